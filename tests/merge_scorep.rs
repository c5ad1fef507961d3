//! `nccl-scorep merge --scorep`: a 2-process nccl-sim job writes its parts into a
//! Score-P experiment directory whose trace this test writes in Score-P's shape (see
//! `scorep_shaped`); the combined archive must validate, keep every Score-P definition id
//! and event as they were, attach our locations to the right "MPI Rank N" group and put
//! our events on Score-P's time base.

use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../nccl-sim/tests/otf2_tools/mod.rs"]
mod otf2_tools;
mod scorep_shaped;
mod validate_json;
use otf2_tools::{assert_otf2_print_clean, dump};
use validate_json::assert_validates;

/// Score-P's ticks per second in the test archive (a TSC-like clock).
const RESOLUTION: u64 = 2_400_000_000;
/// Rank r's raw ticks run `r · RANK_SKEW` ahead of rank 0's; Score-P's clock offsets of
/// rank r take that back (plus a drift).
const RANK_SKEW: u64 = 7_000_003;
const TICKS_AT_ORIGIN: u64 = 1_000_000_000_000;
/// How far (ticks) an event of ours may land from where the test expects it: the rounding
/// of the raw-tick map (1) and of OTF2's interpolation (1), plus one.
const TICK_BOUND: f64 = 3.0;

/// The time map of one rank: raw Score-P ticks from our ns, and Score-P's own offsets.
#[derive(Clone, Copy)]
struct RankClock {
    origin_ns: u64,
    skew: u64,
    /// Score-P's ClockOffset records of the rank: (raw ticks, offset).
    offsets: [(u64, i64); 2],
}

impl RankClock {
    /// Raw ticks at `ns`: 2.4 ticks per ns (exact for ns − origin divisible by 5).
    fn raw(&self, ns: u64) -> u64 {
        TICKS_AT_ORIGIN + self.skew + (ns - self.origin_ns) * 12 / 5
    }

    /// Where a reader shows raw `ticks` (Score-P's offsets interpolated).
    fn shown(&self, ticks: u64) -> f64 {
        let [(t0, o0), (t1, o1)] = self.offsets;
        let slope = (o1 - o0) as f64 / (t1 - t0) as f64;
        ticks as f64 + o0 as f64 + slope * (ticks as f64 - t0 as f64)
    }

    fn expected(&self, ns: u64) -> f64 {
        let exact = TICKS_AT_ORIGIN as f64 + self.skew as f64 + (ns - self.origin_ns) as f64 * 2.4;
        self.shown(exact.round() as u64)
    }
}

/// A part of the job: its directory, rank and the raw ns range of its operations.
struct Part {
    dir: PathBuf,
    rank: u32,
    pid: u64,
}

/// Dumps an archive as JSON through the `otf2` Python reader, keyed by location id
/// (Score-P names every master thread alike, so names do not identify locations).
fn dump_by_id(anchor: &Path) -> Value {
    const SCRIPT: &str = r#"
import json, sys, otf2

def plain(value):
    if hasattr(value, "name"):
        return value.name
    if isinstance(value, (int, float, str)) or value is None:
        return value
    return str(value)

out = {"locations": {}, "regions": {}, "attributes": {}, "groups": {}, "comms": {},
       "location_groups": {}, "strings": {}, "events": {}}
with otf2.reader.open(sys.argv[1]) as trace:
    defs = trace.definitions
    clock = defs.clock_properties
    out["clock"] = [clock.timer_resolution, clock.global_offset, clock.trace_length]
    for s in defs.strings:
        out["strings"][str(s._ref)] = str(s)
    for g in defs.location_groups:
        creator = getattr(g, "creating_location_group", None)
        out["location_groups"][str(g._ref)] = {
            "name": g.name,
            "type": str(g.location_group_type).split(".")[-1],
            "creator": creator.name if creator is not None else None,
        }
    for l in defs.locations:
        out["locations"][str(l._ref)] = {
            "name": l.name,
            "type": str(l.type).split(".")[-1],
            "group": l.group._ref,
            "events": l.number_of_events,
        }
    for r in defs.regions:
        out["regions"][str(r._ref)] = [r.name, str(r.paradigm).split(".")[-1], str(r.region_role).split(".")[-1]]
    for a in defs.attributes:
        out["attributes"][str(a._ref)] = a.name
    for g in defs.groups:
        out["groups"][str(g._ref)] = [g.name, str(g.group_type).split(".")[-1], str(g.paradigm).split(".")[-1]]
    for c in defs.comms:
        out["comms"][str(c._ref)] = [c.name, c.group._ref]
    for location, event in trace.events:
        attrs = {}
        if event.attributes:
            attrs = {a.name: plain(v) for a, v in event.attributes.items()}
        region = event.region.name if hasattr(event, "region") else None
        out["events"].setdefault(str(location._ref), []).append(
            [type(event).__name__, event.time, region, attrs])
json.dump(out, sys.stdout)
"#;
    let output = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(anchor)
        .output()
        .expect("/usr/bin/python3 with the otf2 module (Debian package python3-otf2)");
    assert!(
        output.status.success(),
        "the otf2 Python reader failed on {}: {}",
        anchor.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// How much the job does: scenarios (each ends its communicators, so each gives every
/// process one part) and iterations.
struct Job {
    scenarios: &'static [&'static str],
    iterations: u32,
}

/// Two scenarios, so that each process writes two parts.
const SMALL_JOB: Job = Job {
    scenarios: &["single", "p2p"],
    iterations: 3,
};

/// Enough iterations that event files hold several 256 KiB chunks.
const LONG_JOB: Job = Job {
    scenarios: &["single"],
    iterations: 2500,
};

/// Runs the 2-process job with its parts in `<exp>/nccl` and returns its parts.
fn run_job(dir: &Path, exp: &Path, job: &Job) -> Vec<Part> {
    let mut command = nccl_sim::job_for_tests(exp.join("nccl"));
    for scenario in job.scenarios {
        command.args(["--scenario", scenario]);
    }
    let status = command
        .args(["--iterations", &job.iterations.to_string()])
        .args(["--speedup", "1000", "--procs", "2"])
        .env("NCCL_SIM_SHM_DIR", dir)
        .status()
        .unwrap();
    assert!(status.success());
    let mut parts = Vec::new();
    for entry in std::fs::read_dir(exp.join("nccl/parts")).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.join("traces.otf2").is_file() {
            continue; // not a part (e.g. the plugin's lock of its own merge)
        }
        let trace = dump(&dir.join("traces.otf2"));
        // The process group is "process <rank> (pid <pid> on <host>)".
        let group = trace["locations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["group_type"] == "PROCESS")
            .map(|l| l["group"].as_str().unwrap().to_owned())
            .unwrap();
        let words: Vec<&str> = group.split_whitespace().collect();
        let rank = words[1].parse().unwrap();
        let pid = words[3].parse().unwrap();
        parts.push(Part { dir, rank, pid });
    }
    parts.sort_by(|a, b| a.dir.cmp(&b.dir));
    assert_eq!(parts.len(), 2 * job.scenarios.len(), "parts per process");
    parts
}

/// The raw ns range of every operation of the job (from the ops' `nccl.enqueue_ns` and
/// `nccl.complete_ns`, which carry our clock before any offset).
fn ns_range(combined_or_part: &Value) -> (u64, u64) {
    let mut low = u64::MAX;
    let mut high = 0;
    for events in combined_or_part["events"].as_object().unwrap().values() {
        for event in events.as_array().unwrap() {
            let attrs = &event[3];
            for key in ["nccl.enqueue_ns", "nccl.complete_ns"] {
                if let Some(ns) = attrs[key].as_u64() {
                    low = low.min(ns);
                    high = high.max(ns);
                }
            }
        }
    }
    assert!(low < high, "the parts have operations");
    (low, high)
}

/// The experiment: Score-P's archive for 2 ranks around the job's time range, and what
/// the test needs to know about it.
struct Experiment {
    exp: PathBuf,
    parts: Vec<Part>,
    clocks: [RankClock; 2],
    pids: [u64; 2],
    /// ns of the "NCCL clock sync" Enters of each rank's two init/finalize cycles (the
    /// parts `<host>.<pid>` and `<host>.<pid>.1`): two per cycle, four in Score-P's trace.
    sync_ns: [[u64; 2]; 2],
    /// ns of the two metric-plugin pairs.
    pair_ns: [u64; 2],
}

fn set_up(dir: &Path, job: &Job) -> Experiment {
    let exp = dir.join("exp");
    std::fs::create_dir_all(&exp).unwrap();
    let parts = run_job(dir, &exp, job);
    let (mut low, mut high) = (u64::MAX, 0);
    for part in &parts {
        let (l, h) = ns_range(&dump_by_id(&part.dir.join("traces.otf2")));
        low = low.min(l);
        high = high.max(h);
    }
    // Round to multiples of 5 ns from the origin so that raw ticks are exact.
    let origin_ns = low - 3_000_000_000;
    let at = |ns: u64| origin_ns + (ns - origin_ns) / 5 * 5;
    let begin_ns = at(low - 2_000_000_000);
    let end_ns = at(high + 2_000_000_000);
    let sync_ns = [
        [at(low - 1_000_000_000), at(low - 700_000_000)],
        [at(high + 600_000_000), at(high + 1_000_000_000)],
    ];
    let pair_ns = [at(low - 1_500_000_000), at(high + 1_500_000_000)];
    let clock = |rank: u64| {
        let mut c = RankClock {
            origin_ns,
            skew: rank * RANK_SKEW,
            offsets: [(0, 0), (0, 0)],
        };
        let skew = -((rank * RANK_SKEW) as i64);
        // Rank 1 drifts by 400 ticks over the run, which its offsets take back.
        c.offsets = [
            (c.raw(begin_ns), skew + rank as i64 * 100),
            (c.raw(end_ns), skew + rank as i64 * 500),
        ];
        c
    };
    let clocks = [clock(0), clock(1)];
    let mut pids = [0; 2];
    for part in &parts {
        pids[part.rank as usize] = part.pid;
    }
    let ranks: Vec<scorep_shaped::Rank> = (0..2)
        .map(|r| {
            let c = clocks[r];
            scorep_shaped::Rank {
                rank: r as u32,
                pid: pids[r],
                program_begin: c.raw(begin_ns),
                program_end: c.raw(end_ns),
                sync_enters: sync_ns.iter().flatten().map(|&ns| c.raw(ns)).collect(),
                allreduce: c.raw(at((low + high) / 2)),
                clock_offsets: c.offsets,
            }
        })
        .collect();
    let global_offset = clocks[0].shown(clocks[0].raw(begin_ns)) as u64;
    let shape = scorep_shaped::Shape {
        host: "node1".to_owned(),
        resolution: RESOLUTION,
        global_offset,
        trace_length: clocks[1].shown(clocks[1].raw(end_ns)) as u64 - global_offset + 1000,
        ranks,
    };
    scorep_shaped::write(&exp, &shape);
    Experiment {
        exp,
        parts,
        clocks,
        pids,
        sync_ns,
        pair_ns,
    }
}

fn write_clock_file(part: &Part, value: &Value) {
    std::fs::write(
        part.dir.join("scorep-clock.json"),
        serde_json::to_vec_pretty(value).unwrap(),
    )
    .unwrap();
}

fn metric_plugin_clock(e: &Experiment, part: &Part) -> Value {
    let c = e.clocks[part.rank as usize];
    json!({
        "format": 1, "pid": part.pid, "launcher_rank": part.rank, "hostname": "node1",
        "source": "metric-plugin",
        "pairs": e.pair_ns.iter().map(|&ns| json!({"ns": ns, "scorep": c.raw(ns)})).collect::<Vec<_>>(),
    })
}

/// Which init/finalize cycle of its process a part is (`<host>.<pid>` 0, `….1` 1).
fn cycle_of(part: &Part) -> usize {
    let name = part.dir.file_name().unwrap().to_string_lossy().into_owned();
    usize::from(!name.ends_with(&format!(".{}", part.pid)))
}

fn sync_regions_clock(e: &Experiment, part: &Part, rank: Option<u32>) -> Value {
    json!({
        "format": 1, "pid": part.pid, "launcher_rank": rank, "hostname": "node1",
        "source": "sync-regions", "pairs": [],
        "sync_region": "NCCL clock sync", "sync_ns": e.sync_ns[cycle_of(part)],
    })
}

fn merge_scorep(exp: &Path) -> (Output, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .args(["merge", "--scorep", "--json"])
        .arg(exp)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let report = serde_json::from_slice(&output.stdout).unwrap();
    (output, report)
}

/// Every file of Score-P's archive, with its bytes.
fn scorep_files(exp: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    for name in ["traces.otf2", "traces.def"] {
        files.insert(exp.join(name), std::fs::read(exp.join(name)).unwrap());
    }
    for entry in std::fs::read_dir(exp.join("traces")).unwrap() {
        let path = entry.unwrap().path();
        files.insert(path.clone(), std::fs::read(&path).unwrap());
    }
    files
}

/// The checks both clock sources share.
fn check_combined(e: &Experiment, before: &BTreeMap<PathBuf, Vec<u8>>, report: &Value) {
    let combined = e.exp.join("nccl-combined/traces.otf2");
    assert_eq!(report["archive"], json!(combined));
    assert_otf2_print_clean(&combined);

    // nccl-scorep validate: no errors.
    assert_validates(&combined, true);

    // Score-P's files are as they were.
    assert_eq!(&scorep_files(&e.exp), before, "Score-P's archive changed");

    let original = dump_by_id(&e.exp.join("traces.otf2"));
    let trace = dump_by_id(&combined);

    // Every Score-P definition keeps its id; every Score-P event is there unchanged.
    for kind in [
        "locations",
        "regions",
        "attributes",
        "groups",
        "comms",
        "location_groups",
        "strings",
    ] {
        for (id, definition) in original[kind].as_object().unwrap() {
            assert_eq!(&trace[kind][id], definition, "{kind} {id}");
        }
    }
    assert_eq!(original["clock"], trace["clock"], "ClockProperties");
    for (location, events) in original["events"].as_object().unwrap() {
        assert_eq!(
            &trace["events"][location], events,
            "Score-P's events of location {location}"
        );
        assert!(events.as_array().unwrap().len() >= 12);
    }

    // Our ids are above Score-P's: no collision.
    let first = &report["first_ids"];
    for (kind, first_key) in [
        ("regions", "region"),
        ("attributes", "attribute"),
        ("groups", "group"),
        ("comms", "comm"),
    ] {
        let ours: Vec<u64> = trace[kind]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.parse::<u64>().unwrap())
            .filter(|k| {
                !original[kind]
                    .as_object()
                    .unwrap()
                    .contains_key(&k.to_string())
            })
            .collect();
        assert!(!ours.is_empty(), "{kind}: ours are there");
        let first = first[first_key].as_u64().unwrap();
        assert!(
            ours.iter().all(|&id| id >= first),
            "{kind}: {ours:?} vs {first}"
        );
        let scorep_max = original[kind]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.parse::<u64>().unwrap())
            .max()
            .unwrap();
        assert!(first > scorep_max, "{kind}");
    }
    // Our regions are NCCL's, Score-P's stay MPI/USER; our comms use our paradigm.
    let ncc_regions: BTreeSet<&str> = trace["regions"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(id, _)| !original["regions"].as_object().unwrap().contains_key(*id))
        .map(|(_, r)| r[0].as_str().unwrap())
        .collect();
    assert!(ncc_regions.contains("ncclAllReduce"), "{ncc_regions:?}");
    assert!(ncc_regions.contains("AllReduce"), "{ncc_regions:?}");
    let mpi_comm_locations: Vec<&Value> = trace["groups"]
        .as_object()
        .unwrap()
        .values()
        .filter(|g| g[1] == "COMM_LOCATIONS" && g[2] == "MPI")
        .collect();
    assert_eq!(mpi_comm_locations.len(), 1, "one MPI COMM_LOCATIONS group");

    // Our locations: in a range Score-P never uses, attached to the right rank's group.
    let scorep_ids: BTreeSet<&String> = original["locations"].as_object().unwrap().keys().collect();
    let groups = trace["location_groups"].as_object().unwrap();
    let mut ours_per_rank = [0usize; 2];
    let mut accelerator_groups = 0;
    for (id, location) in trace["locations"].as_object().unwrap() {
        if scorep_ids.contains(id) {
            continue;
        }
        let id: u64 = id.parse().unwrap();
        assert!(id >> 32 >= 1 << 31, "location {id:#x} is in our range");
        let rank = (id & 0xffff_ffff) as usize;
        ours_per_rank[rank] += 1;
        let group = &groups[&location["group"].to_string()];
        let owner = match group["type"].as_str().unwrap() {
            "PROCESS" => group["name"].as_str().unwrap(),
            "ACCELERATOR" => {
                accelerator_groups += 1;
                group["creator"].as_str().unwrap()
            }
            other => panic!("group type {other}"),
        };
        assert_eq!(owner, format!("MPI Rank {rank}"), "{location}");
    }
    assert!(ours_per_rank.iter().all(|&n| n > 5), "{ours_per_rank:?}");
    // Every location's events read back completely (an event file OTF2 reads with the
    // wrong chunk size stops early, silently).
    for (id, location) in trace["locations"].as_object().unwrap() {
        let read = trace["events"][id].as_array().map_or(0, Vec::len);
        assert_eq!(
            location["events"].as_u64().unwrap(),
            read as u64,
            "location {id} {}",
            location["name"]
        );
    }
    assert!(accelerator_groups > 0);
    // Score-P's process groups are the only process groups.
    let processes: Vec<&str> = groups
        .values()
        .filter(|g| g["type"] == "PROCESS")
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(processes, ["MPI Rank 0", "MPI Rank 1"]);

    // Time: every operation ends where its nccl.complete_ns maps on Score-P's time base.
    let mut checked = 0;
    for (location, events) in trace["events"].as_object().unwrap() {
        if scorep_ids.contains(location) {
            continue;
        }
        let rank = (location.parse::<u64>().unwrap() & 0xffff_ffff) as usize;
        let events = events.as_array().unwrap();
        for (index, event) in events.iter().enumerate() {
            let Some(complete) = event[3]["nccl.complete_ns"].as_u64() else {
                continue;
            };
            assert_eq!(event[0], "Enter");
            let leave = events[index + 1..]
                .iter()
                .find(|e| e[0] == "Leave" && e[2] == event[2])
                .unwrap();
            let shown = leave[1].as_u64().unwrap() as f64;
            let expected = e.clocks[rank].expected(complete);
            assert!(
                (shown - expected).abs() <= TICK_BOUND,
                "rank {rank} op {}: Leave at {shown}, expected {expected} (complete_ns \
                 {complete})",
                event[2]
            );
            checked += 1;
        }
    }
    assert!(checked >= 8, "{checked} operations checked");
}

#[test]
fn merge_scorep_with_metric_plugin_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let e = set_up(dir.path(), &SMALL_JOB);
    for part in &e.parts {
        write_clock_file(part, &metric_plugin_clock(&e, part));
    }
    let before = scorep_files(&e.exp);
    let (_, report) = merge_scorep(&e.exp);
    assert_eq!(report["skipped"], json!([]), "{report:#}");
    assert_eq!(report["relaid"], 0, "small event files are linked");
    let attached = report["attached"].as_array().unwrap();
    assert_eq!(attached.len(), 4, "{report:#}");
    for a in attached {
        let part = e
            .parts
            .iter()
            .find(|p| p.dir.ends_with(a["part"].as_str().unwrap()))
            .unwrap();
        assert_eq!(a["scorep_process"], format!("MPI Rank {}", part.rank));
        assert_eq!(a["matched_by"], "launcher rank");
        assert_eq!(a["clock"]["source"], "metric-plugin");
        assert_eq!(a["clock"]["pairs"], 2);
        assert_eq!(a["clock"]["scorep_clock_offsets"], 2);
        let rate = a["clock"]["ticks_per_ns"].as_f64().unwrap();
        assert!((rate - 2.4).abs() < 1e-9, "{rate}");
    }
    assert_eq!(report["scorep"]["processes"], 2);
    check_combined(&e, &before, &report);

    // The human report says where each part went and with which clock.
    let text = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .args(["merge", "--scorep"])
        .arg(&e.exp)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("-> MPI Rank 1 (by launcher rank)"), "{text}");
    assert!(text.contains("clock metric-plugin from 2 pairs"), "{text}");
    // A second run replaced the first and left nothing behind.
    check_combined(&e, &before, &report);
    let leftovers: Vec<_> = std::fs::read_dir(e.exp.join("nccl-combined"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn merge_scorep_with_sync_regions_matched_by_pid_and_bad_clock_files() {
    let dir = tempfile::tempdir().unwrap();
    let e = set_up(dir.path(), &SMALL_JOB);
    // Rank 0's parts say their rank; rank 1's do not, so Score-P's ProcessId matches them.
    for part in &e.parts {
        let rank = (part.rank == 0).then_some(part.rank);
        write_clock_file(part, &sync_regions_clock(&e, part, rank));
    }
    let before = scorep_files(&e.exp);
    let (_, report) = merge_scorep(&e.exp);
    assert_eq!(report["skipped"], json!([]), "{report:#}");
    for a in report["attached"].as_array().unwrap() {
        let rank = a["scorep_rank"].as_u64().unwrap();
        let by = if rank == 0 {
            "launcher rank"
        } else {
            "pid (Score-P's ProcessId)"
        };
        assert_eq!(a["matched_by"], by, "{a:#}");
        assert_eq!(a["clock"]["source"], "sync-regions");
        assert_eq!(a["clock"]["pairs"], 2);
    }
    assert_ne!(e.pids[0], e.pids[1]);
    check_combined(&e, &before, &report);

    // A part without its clock file, and one with a broken file, are reported and left
    // out; the rest is still combined.
    std::fs::remove_file(e.parts[0].dir.join("scorep-clock.json")).unwrap();
    std::fs::write(e.parts[1].dir.join("scorep-clock.json"), "{\"format\": 1,").unwrap();
    let (_, report) = merge_scorep(&e.exp);
    let skipped = report["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 2, "{report:#}");
    let reasons: BTreeMap<&str, &str> = skipped
        .iter()
        .map(|s| (s["part"].as_str().unwrap(), s["reason"].as_str().unwrap()))
        .collect();
    let name = |p: &Part| p.dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        reasons[name(&e.parts[0]).as_str()].contains("no usable scorep-clock.json"),
        "{reasons:?}"
    );
    assert!(
        reasons[name(&e.parts[1]).as_str()].contains("scorep-clock.json is not valid"),
        "{reasons:?}"
    );
    assert_eq!(report["attached"].as_array().unwrap().len(), 2);
    assert_otf2_print_clean(&e.exp.join("nccl-combined/traces.otf2"));
    assert_eq!(scorep_files(&e.exp), before);
}

#[test]
fn merge_scorep_lays_out_event_files_of_several_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let e = set_up(dir.path(), &LONG_JOB);
    let biggest = e
        .parts
        .iter()
        .flat_map(|p| std::fs::read_dir(p.dir.join("traces")).unwrap())
        .map(|f| f.unwrap().metadata().unwrap().len())
        .max()
        .unwrap();
    assert!(biggest > 2 * 256 * 1024, "{biggest} bytes: several chunks");
    for part in &e.parts {
        write_clock_file(part, &metric_plugin_clock(&e, part));
    }
    let before = scorep_files(&e.exp);
    let (_, report) = merge_scorep(&e.exp);
    assert_eq!(report["skipped"], json!([]), "{report:#}");
    assert!(report["relaid"].as_u64().unwrap() > 0, "{report:#}");
    check_combined(&e, &before, &report);
}
