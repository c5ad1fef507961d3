//! The sample traces in `vampir-samples/` (made by `scripts/vampir-samples.sh`): each one
//! passes `nccl-scorep validate` and `otf2-print`, shows what its README promises (ranks,
//! hosts, collectives, messages, the late rank, the grouped launches, the PXN proxies),
//! and the script still makes them, with the same structure.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../nccl-sim/tests/otf2_tools/mod.rs"]
mod otf2_tools;
use otf2_tools::{assert_otf2_print_clean, dump};
mod validate_json;
use validate_json::assert_validates;

/// Every sample the script makes, with the communicator it traces.
const SAMPLES: [(&str, &str); 4] = [
    ("ring-allreduce", "single"),
    ("p2p-pipeline", "p2p"),
    ("grouped-collectives", "group"),
    ("pxn", "single"),
];
const RANKS: usize = 4;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn committed(sample: &str) -> PathBuf {
    repo().join("vampir-samples").join(sample)
}

/// `nccl-scorep validate --json` finds neither errors nor warnings, and `otf2-print
/// -Werror` accepts the archive.
fn assert_valid(archive: &Path) {
    assert_validates(archive, false);
    assert_otf2_print_clean(&archive.join("traces.otf2"));
}

/// A location, group or communicator name without what changes from run to run: thread
/// ids, pids, PXN context pointers, communicator hashes, and the lane number of a timeline
/// (how many lanes overlapping intervals need depends on timing): a thread's `(lane N)`,
/// a proxy's `lane N`.
fn normalized(name: &str) -> String {
    let base = match name.rsplit_once(" (lane ") {
        Some((base, lane)) if lane.ends_with(')') => base,
        _ => match name.rsplit_once(" lane ") {
            Some((base, lane)) if base.ends_with(" proxy") && lane.parse::<u32>().is_ok() => base,
            _ => name,
        },
    };
    let mut words = Vec::new();
    let mut previous = "";
    for word in base.split(' ') {
        let digits = word.trim_end_matches(')');
        let closing = &word[digits.len()..];
        let numeric = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
        let replaced = match previous.trim_start_matches('(') {
            "thread" | "pid" if numeric => format!("N{closing}"),
            "ctx" if word.starts_with("0x") => "0xC".to_owned(),
            _ if word.starts_with("(0x") && word.ends_with(')') => "(0xH)".to_owned(),
            _ => word.to_owned(),
        };
        words.push(replaced);
        previous = word;
    }
    words.join(" ")
}

fn text(value: &Value) -> &str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"))
}

/// What must come out the same whenever the script makes a sample.
#[derive(Debug, PartialEq)]
struct Structure {
    /// Communicator → its members, in rank order.
    comms: BTreeMap<String, Vec<String>>,
    /// (location, its location group).
    locations: BTreeSet<(String, String)>,
    /// (location, region) → intervals; the proxy thread's idle, sleep and append windows
    /// are left out (their number depends on timing).
    intervals: BTreeMap<(String, String), usize>,
    /// (communicator, location, operation) → collective records.
    collectives: BTreeMap<(String, String, String), usize>,
    /// (communicator, location, send/recv, peer rank) → message records.
    messages: BTreeMap<(String, String, String, u64), usize>,
}

impl Structure {
    fn of(trace: &Value) -> Structure {
        let comms = trace["comms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let members = c["members"].as_array().unwrap();
                let members = members.iter().map(|m| normalized(text(m))).collect();
                (normalized(text(&c["name"])), members)
            })
            .collect();
        let group_of: BTreeMap<&str, String> = trace["locations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| (text(&l["name"]), normalized(text(&l["group"]))))
            .collect();
        let locations = group_of
            .iter()
            .map(|(name, group)| (normalized(name), group.clone()))
            .collect();
        let mut intervals = BTreeMap::new();
        for interval in trace["intervals"].as_array().unwrap() {
            let region = text(&interval["region"]);
            if matches!(region, "proxy idle" | "proxy sleep" | "proxy append") {
                continue;
            }
            let loc = text(&interval["loc"]);
            // Threads of one process differ only by their ids: count them per process.
            let loc = format!("{} in {}", normalized(loc), group_of[loc]);
            *intervals.entry((loc, region.to_owned())).or_default() += 1;
        }
        let mut collectives = BTreeMap::new();
        for c in trace["collectives"].as_array().unwrap() {
            let key = (
                normalized(text(&c["comm"])),
                text(&c["loc"]).to_owned(),
                text(&c["op"]).to_owned(),
            );
            *collectives.entry(key).or_default() += 1;
        }
        let mut messages = BTreeMap::new();
        for m in trace["messages"].as_array().unwrap() {
            let key = (
                normalized(text(&m["comm"])),
                text(&m["loc"]).to_owned(),
                text(&m["kind"]).to_owned(),
                m["peer"].as_u64().unwrap(),
            );
            *messages.entry(key).or_default() += 1;
        }
        Structure {
            comms,
            locations,
            intervals,
            collectives,
            messages,
        }
    }
}

/// The process location groups, by launcher rank: (pid, host), from their names
/// `process <rank> (pid <pid> on <host>)`.
fn processes(trace: &Value) -> BTreeMap<usize, (u64, String)> {
    let mut out = BTreeMap::new();
    for location in trace["locations"].as_array().unwrap() {
        if location["group_type"] != "PROCESS" {
            continue;
        }
        let group = text(&location["group"]);
        let parsed = group
            .strip_prefix("process ")
            .and_then(|rest| rest.strip_suffix(')'))
            .and_then(|rest| rest.split_once(" (pid "))
            .and_then(|(rank, rest)| {
                let (pid, host) = rest.split_once(" on ")?;
                Some((rank.parse().ok()?, pid.parse().ok()?, host.to_owned()))
            });
        let (rank, pid, host) = parsed.unwrap_or_else(|| panic!("process group {group:?}"));
        out.insert(rank, (pid, host));
    }
    out
}

/// The intervals of `region` on the threads of process `rank`, as (start, end), by start.
fn thread_intervals(trace: &Value, rank: usize, region: &str) -> Vec<(u64, u64, String)> {
    let prefix = format!("process {rank} (");
    let threads: BTreeSet<&str> = trace["locations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| text(&l["group"]).starts_with(&prefix) && is_thread(text(&l["name"])))
        .map(|l| text(&l["name"]))
        .collect();
    let mut out: Vec<(u64, u64, String)> = trace["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["region"] == region && threads.contains(text(&i["loc"])))
        .map(|i| {
            (
                i["start"].as_u64().unwrap(),
                i["end"].as_u64().unwrap(),
                text(&i["loc"]).to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Thread locations are named by role, the tid kept: `application thread <tid>`,
/// `proxy thread <tid>`, `NCCL thread <tid>`.
const THREAD_ROLES: [&str; 3] = ["application thread ", "proxy thread ", "NCCL thread "];

fn is_thread(name: &str) -> bool {
    THREAD_ROLES.iter().any(|role| {
        name.strip_prefix(role)
            .and_then(|rest| rest.split(' ').next())
            .is_some_and(|tid| tid.parse::<u32>().is_ok())
    })
}

/// The roles of each process's thread locations (lanes left out): every process has its
/// application thread (the API calls) and its proxy thread (the proxy's idle, sleep and
/// append windows), and no location is named `thread <tid>` alone.
fn assert_threads_named_by_role(trace: &Value) {
    for rank in 0..RANKS {
        let prefix = format!("process {rank} (");
        let roles: BTreeSet<String> = trace["locations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| text(&l["group"]).starts_with(&prefix))
            .map(|l| text(&l["name"]))
            .filter(|name| !name.contains(" (lane "))
            .inspect(|name| assert!(!name.starts_with("thread "), "{name}"))
            .filter(|name| is_thread(name))
            .map(|name| name.rsplit_once(' ').unwrap().0.to_owned())
            .collect();
        assert_eq!(
            roles,
            BTreeSet::from(["application thread".to_owned(), "proxy thread".to_owned()]),
            "rank {rank}"
        );
    }
}

/// The archive's REGIONS groups as `otf2-print -G` lists them: group name → member regions.
fn region_groups(archive: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let out = Command::new("otf2-print")
        .arg("-G")
        .arg(archive)
        .output()
        .expect("otf2-print runs");
    assert!(out.status.success(), "otf2-print -G {}", archive.display());
    let mut groups = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if !line.starts_with("GROUP ") || !line.contains("Type: REGIONS") {
            continue;
        }
        // GROUP <id>  Name: "<name>" <s>, Type: REGIONS, …, <n> Members: "<region>" <r>, …
        let name = line.split('"').nth(1).unwrap().to_owned();
        let (_, members) = line.split_once(" Members: ").unwrap();
        let members: BTreeSet<String> = members
            .split('"')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        assert!(groups.insert(name, members).is_none(), "{line}");
    }
    groups
}

/// Every region of the sample is in the region group of its kind, and only there.
fn assert_region_groups(sample: &str, archive: &Path) {
    let groups = region_groups(archive);
    let names: Vec<&str> = groups.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "NCCL API calls",
            "NCCL GPU kernels",
            "NCCL enqueue",
            "NCCL proxy operations",
            "NCCL wait states"
        ],
        "{sample}"
    );
    let mut seen = BTreeSet::new();
    for (group, members) in &groups {
        for region in members {
            assert!(
                seen.insert(region.clone()),
                "{sample}: {region} in two groups"
            );
            let fits = match group.as_str() {
                "NCCL API calls" => region.starts_with("nccl"),
                "NCCL enqueue" => region.ends_with(" enqueue") || region == "NCCL kernel launch",
                "NCCL GPU kernels" => {
                    region.ends_with(" kernel")
                        || region.starts_with("kernel phase: ")
                        || !region.contains(' ')
                }
                "NCCL proxy operations" => [
                    "proxy send",
                    "proxy recv",
                    "send step",
                    "recv step",
                    "proxy step",
                    "proxy append",
                ]
                .contains(&region.as_str()),
                "NCCL wait states" => {
                    region.starts_with("send: ")
                        || region.starts_with("recv: ")
                        || region == "proxy idle"
                        || region == "proxy sleep"
                }
                _ => false,
            };
            assert!(fits, "{sample}: {region} in {group}");
        }
    }
    if sample == "pxn" {
        assert_eq!(
            groups["NCCL wait states"],
            BTreeSet::from(
                [
                    "proxy idle",
                    "proxy sleep",
                    "recv: GPU wait",
                    "recv: flush",
                    "recv: network wait",
                    "send: GPU wait",
                    "send: network wait",
                    "send: peer wait"
                ]
                .map(str::to_owned)
            )
        );
    }
}

fn location_names(trace: &Value) -> BTreeSet<String> {
    trace["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| text(&l["name"]).to_owned())
        .collect()
}

/// One communicator of all ranks, its ops streams in rank order.
fn assert_one_communicator(trace: &Value, comm: &str) {
    let structure = Structure::of(trace);
    let expected: Vec<String> = (0..RANKS).map(|r| format!("{comm} rank {r} ops")).collect();
    let comms: Vec<(&String, &Vec<String>)> = structure.comms.iter().collect();
    assert_eq!(
        comms,
        [(&format!("{comm} (0xH)"), &expected)],
        "{:#?}",
        structure.comms
    );
}

/// Collective records per ops stream and operation.
fn collective_counts(trace: &Value) -> BTreeMap<(String, String), usize> {
    let mut counts = BTreeMap::new();
    for c in trace["collectives"].as_array().unwrap() {
        let key = (text(&c["loc"]).to_owned(), text(&c["op"]).to_owned());
        *counts.entry(key).or_default() += 1;
    }
    counts
}

fn check_ring_allreduce(trace: &Value) {
    assert_one_communicator(trace, "single");
    // Two simulated nodes, two consecutive ranks each.
    let hosts: Vec<String> = processes(trace).into_values().map(|(_, h)| h).collect();
    assert_eq!(hosts, ["node0", "node0", "node1", "node1"]);
    let counts = collective_counts(trace);
    for rank in 0..RANKS {
        let ops = format!("single rank {rank} ops");
        assert_eq!(
            counts.get(&(ops, "ALLREDUCE".into())),
            Some(&6),
            "{counts:?}"
        );
    }
    assert_eq!(counts.len(), RANKS, "{counts:?}");
    // Kernel channels and proxy lanes of every rank; on the lanes, the ring's connections
    // (channel, peer and direction of each proxy operation).
    let names = location_names(trace);
    for rank in 0..RANKS {
        let next = (rank + 1) % RANKS;
        let previous = (rank + RANKS - 1) % RANKS;
        for expected in [
            format!("single rank {rank} channel 0"),
            format!("single rank {rank} channel 1"),
            format!("single rank {rank} proxy lane 1"),
        ] {
            assert!(names.contains(&expected), "{expected} in {names:#?}");
        }
        let connections = proxy_connections(trace, &format!("single rank {rank} proxy lane "));
        for expected in [
            ("proxy send".to_owned(), 0, next as i64),
            ("proxy send".to_owned(), 1, next as i64),
            ("proxy recv".to_owned(), 0, previous as i64),
            ("proxy recv".to_owned(), 1, previous as i64),
        ] {
            assert!(
                connections.contains(&expected),
                "rank {rank}: {expected:?} in {connections:?}"
            );
        }
        assert_eq!(connections.len(), 4, "rank {rank}: {connections:?}");
    }
    // Rank 2 is late: after the first AllReduce (which the processes' start-up blurs) it
    // calls ncclAllReduce after every other rank.
    let calls: Vec<Vec<(u64, u64, String)>> = (0..RANKS)
        .map(|rank| thread_intervals(trace, rank, "ncclAllReduce"))
        .collect();
    for (rank, list) in calls.iter().enumerate() {
        assert_eq!(list.len(), 6, "rank {rank}: {list:?}");
    }
    for iteration in 1..6 {
        let late = calls[2][iteration].0;
        for (rank, list) in calls.iter().enumerate().filter(|(r, _)| *r != 2) {
            assert!(
                list[iteration].0 + 1_000_000 < late,
                "iteration {iteration}: rank {rank} called at {}, rank 2 at {late}",
                list[iteration].0
            );
        }
    }
}

fn check_p2p_pipeline(trace: &Value) {
    assert_one_communicator(trace, "p2p");
    let hosts: Vec<String> = processes(trace).into_values().map(|(_, h)| h).collect();
    assert_eq!(hosts, ["node0", "node0", "node1", "node1"]);
    assert!(trace["collectives"].as_array().unwrap().is_empty());
    let structure = Structure::of(trace);
    let mut expected = BTreeMap::new();
    for rank in 0..RANKS {
        let loc = format!("p2p rank {rank} ops");
        let next = ((rank + 1) % RANKS) as u64;
        let previous = ((rank + RANKS - 1) % RANKS) as u64;
        for (kind, peer) in [("send", next), ("recv", previous)] {
            let key = ("p2p (0xH)".into(), loc.clone(), kind.into(), peer);
            expected.insert(key, 4);
        }
    }
    assert_eq!(structure.messages, expected);
}

fn check_grouped_collectives(trace: &Value) {
    assert_one_communicator(trace, "group");
    let counts = collective_counts(trace);
    for rank in 0..RANKS {
        for op in ["ALLREDUCE", "ALLGATHER", "REDUCE_SCATTER_BLOCK"] {
            let key = (format!("group rank {rank} ops"), op.to_owned());
            assert_eq!(counts.get(&key), Some(&3), "{key:?}: {counts:?}");
        }
    }
    // Per rank and iteration one ncclGroup holding the three API calls and one kernel
    // launch for all three.
    for rank in 0..RANKS {
        let groups = thread_intervals(trace, rank, "ncclGroup");
        assert_eq!(groups.len(), 3, "rank {rank}: {groups:?}");
        let launches = thread_intervals(trace, rank, "NCCL kernel launch");
        assert_eq!(launches.len(), 3, "rank {rank}: one launch per group");
        for region in ["ncclAllReduce", "ncclAllGather", "ncclReduceScatter"] {
            let calls = thread_intervals(trace, rank, region);
            assert_eq!(calls.len(), 3, "rank {rank} {region}: {calls:?}");
            for (call, group) in calls.iter().zip(&groups) {
                assert!(
                    group.2 == call.2 && group.0 <= call.0 && call.1 <= group.1,
                    "rank {rank}: {region} {call:?} outside its ncclGroup {group:?}"
                );
            }
        }
        for (launch, group) in launches.iter().zip(&groups) {
            assert!(
                group.0 <= launch.0 && launch.1 <= group.1,
                "{launch:?} {group:?}"
            );
        }
    }
}

fn check_pxn(trace: &Value) {
    assert_one_communicator(trace, "single");
    let processes = processes(trace);
    assert_eq!(processes.len(), RANKS);
    assert!(processes.values().all(|(_, host)| host == "node0"));
    let counts = collective_counts(trace);
    assert_eq!(counts.values().copied().collect::<Vec<_>>(), [4; RANKS]);
    // Each rank's sends are progressed by the next process: its proxy lanes are in that
    // process, named after the originating pid; the rank itself has no send lanes.
    let groups: Vec<(String, String)> = trace["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (text(&l["name"]).to_owned(), text(&l["group"]).to_owned()))
        .collect();
    for rank in 0..RANKS {
        let host = (rank + 1) % RANKS;
        let origin_pid = processes[&rank].0;
        let pxn: Vec<&(String, String)> = groups
            .iter()
            .filter(|(name, _)| name.starts_with(&format!("PXN for pid {origin_pid} ")))
            .collect();
        assert!(!pxn.is_empty(), "no PXN lanes for rank {rank}: {groups:#?}");
        let host_group = format!("process {host} (pid {} on node0)", processes[&host].0);
        for (name, group) in pxn {
            assert_eq!(group, &host_group, "{name}");
            assert!(name.contains(" proxy lane "), "{name}");
        }
        // They send to the rank of the process that progresses them.
        let sends = proxy_connections(trace, &format!("PXN for pid {origin_pid} "));
        let peers: BTreeSet<(String, i64)> = sends.into_iter().map(|(r, _, p)| (r, p)).collect();
        assert_eq!(
            peers,
            BTreeSet::from([("proxy send".to_owned(), host as i64)]),
            "rank {rank}"
        );
        let own = proxy_connections(trace, &format!("single rank {rank} proxy lane "));
        assert!(
            own.iter().all(|(region, _, _)| region == "proxy recv"),
            "rank {rank}: {own:?}"
        );
    }
}

/// The (region, `nccl.channel`, `nccl.peer`) of the proxy operations on the locations whose
/// names start with `prefix`.
fn proxy_connections(trace: &Value, prefix: &str) -> BTreeSet<(String, u64, i64)> {
    trace["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| text(&i["loc"]).starts_with(prefix))
        .filter(|i| matches!(text(&i["region"]), "proxy send" | "proxy recv"))
        .map(|i| {
            let attrs = &i["attrs"];
            let channel = attrs["nccl.channel"].as_u64();
            let peer = attrs["nccl.peer"].as_i64();
            let (Some(channel), Some(peer)) = (channel, peer) else {
                panic!("a proxy operation without channel or peer: {i}")
            };
            (text(&i["region"]).to_owned(), channel, peer)
        })
        .collect()
}

/// On every proxy lane, a proxy operation is nested in nothing, and a step nested in
/// something is in an operation of its direction (a send step in a `proxy send`).
fn assert_proxy_lanes_nest_steps_in_operations(trace: &Value) {
    let mut by_loc: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for interval in trace["intervals"].as_array().unwrap() {
        let loc = text(&interval["loc"]);
        if loc.contains(" proxy lane ") {
            by_loc.entry(loc).or_default().push(interval);
        }
    }
    assert!(!by_loc.is_empty(), "no proxy lanes");
    for (loc, intervals) in by_loc {
        let ops: Vec<&&Value> = intervals
            .iter()
            .filter(|i| matches!(text(&i["region"]), "proxy send" | "proxy recv"))
            .collect();
        for op in &ops {
            assert_eq!(op["depth"], 0, "{loc}: {op}");
        }
        for step in intervals
            .iter()
            .filter(|i| text(&i["region"]).ends_with(" step"))
        {
            if step["depth"] == 0 {
                continue;
            }
            let (start, end) = (step["start"].as_u64(), step["end"].as_u64());
            let op = ops
                .iter()
                .find(|op| op["start"].as_u64() <= start && end <= op["end"].as_u64())
                .unwrap_or_else(|| panic!("{loc}: {step} is in no operation"));
            let direction = text(&step["region"]).trim_end_matches(" step");
            assert_eq!(text(&op["region"]), format!("proxy {direction}"), "{loc}");
        }
    }
}

fn check(sample: &str, trace: &Value) {
    assert_threads_named_by_role(trace);
    assert_proxy_lanes_nest_steps_in_operations(trace);
    match sample {
        "ring-allreduce" => check_ring_allreduce(trace),
        "p2p-pipeline" => check_p2p_pipeline(trace),
        "grouped-collectives" => check_grouped_collectives(trace),
        "pxn" => check_pxn(trace),
        _ => panic!("no check for sample {sample}"),
    }
}

/// The entries of a directory, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn every_committed_sample_is_valid_and_shows_what_its_readme_says() {
    let mut expected: Vec<String> = SAMPLES.iter().map(|(s, _)| s.to_string()).collect();
    expected.push("README.md".into());
    expected.sort();
    assert_eq!(entries(&repo().join("vampir-samples")), expected);
    let readme = std::fs::read_to_string(repo().join("vampir-samples/README.md")).unwrap();
    for (sample, _) in SAMPLES {
        let dir = committed(sample);
        // Only the merged archive: no parts, no event logs.
        assert_eq!(
            entries(&dir),
            ["traces", "traces.def", "traces.otf2"],
            "{sample}"
        );
        assert!(
            readme.contains(&format!("`{sample}/`")),
            "README on {sample}"
        );
        assert_valid(&dir);
        assert_region_groups(sample, &dir.join("traces.otf2"));
        let trace = dump(&dir.join("traces.otf2"));
        check(sample, &trace);
    }
}

#[test]
fn the_script_makes_the_samples_again_with_the_same_structure() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("samples");
    let output = Command::new("bash")
        .arg(repo().join("scripts/vampir-samples.sh"))
        .arg("--output")
        .arg(&out)
        .arg("--nccl-sim")
        .arg(nccl_sim::binary_for_tests())
        .arg("--nccl-scorep")
        .arg(env!("CARGO_BIN_EXE_nccl-scorep"))
        .arg("--plugin")
        .arg(nccl_sim::our_plugin_for_tests())
        .env("TMPDIR", dir.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let names: Vec<String> = SAMPLES.iter().map(|(s, _)| s.to_string()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(entries(&out), sorted);
    for (sample, _) in SAMPLES {
        let made = out.join(sample);
        assert_eq!(
            entries(&made),
            ["traces", "traces.def", "traces.otf2"],
            "{sample}"
        );
        assert_valid(&made);
        let fresh = dump(&made.join("traces.otf2"));
        let old = dump(&committed(sample).join("traces.otf2"));
        let (fresh, old) = (Structure::of(&fresh), Structure::of(&old));
        assert_eq!(fresh.comms, old.comms, "{sample}");
        assert_eq!(fresh.locations, old.locations, "{sample}");
        assert_eq!(fresh.collectives, old.collectives, "{sample}");
        assert_eq!(fresh.messages, old.messages, "{sample}");
        assert_eq!(fresh.intervals, old.intervals, "{sample}");
    }
    // The script's scratch directory is gone.
    assert_eq!(entries(dir.path()), ["samples"]);
}

#[test]
fn names_are_normalized_for_comparison() {
    assert_eq!(
        normalized("application thread 4242"),
        "application thread N"
    );
    assert!(is_thread("proxy thread 17 (lane 2)"));
    assert!(!is_thread("thread 17"));
    assert!(!is_thread("world rank 3 proxy lane 2"));
    assert_eq!(
        normalized("process 3 (pid 77 on node1)"),
        "process 3 (pid N on node1)"
    );
    assert_eq!(
        normalized("PXN for pid 12 ctx 0xc7b2 proxy lane 3"),
        "PXN for pid N ctx 0xC proxy"
    );
    assert_eq!(
        normalized("single rank 2 proxy lane 12"),
        "single rank 2 proxy"
    );
    assert_eq!(normalized("proxy thread 17 (lane 2)"), "proxy thread N");
    assert_eq!(normalized("single (0xd2ca7a45)"), "single (0xH)");
    assert_eq!(normalized("single rank 2 ops"), "single rank 2 ops");
}
