//! The CUBE4 profile of a job, read with pycubexr (a reader nobody here wrote) and, when
//! CubeLib's tools are on PATH, with them: its metric tree, visits, bytes and times against
//! the trace as the `otf2` Python reader gives it, the wait for the last rank of a planted
//! late rank, and the ways `nccl-scorep profile` refuses what it cannot read.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../nccl-sim/tests/otf2_tools/mod.rs"]
mod otf2_tools;
mod profile_reader;
use profile_reader::{cube_dump_at_root, cube_tools_accept, per_column, read_with_pycubexr};

const TOOL: &str = env!("CARGO_BIN_EXE_nccl-scorep");

/// How late the planted rank arrives at every collective.
const LATE_US: u64 = 10_000;
const LATE_RANK: u64 = 2;

/// A 4-rank job under mpirun, one collective kind, rank 2 late every time; its run
/// directory, merged (and profiled) by its last process.
fn late_rank_job(dir: &Path) -> PathBuf {
    let out = dir.join("run");
    let output = Command::new("mpirun")
        .args(["-np", "4", "--oversubscribe", "--bind-to", "none"])
        .args(["-x", "NCCL_SCOREP_OUTPUT_DIR", "-x", "NCCL_SCOREP_EVENTS"])
        .args(["-x", "NCCL_SCOREP_TOOL"])
        .arg(nccl_sim::binary_for_tests())
        .args(["run", "--scenario", "single", "--iterations", "8"])
        .args(["--sizes", "64K,1M", "--late-rank", &LATE_RANK.to_string()])
        .args(["--late-us", &LATE_US.to_string()])
        .arg("--plugin")
        .arg(nccl_sim::our_plugin_for_tests())
        .env("NCCL_SCOREP_OUTPUT_DIR", &out)
        .env("NCCL_SCOREP_TOOL", env!("CARGO_BIN_EXE_nccl-scorep"))
        .env("NCCL_SCOREP_EVENTS", "default,steps")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun (Debian package openmpi-bin; scripts/test.sh installs it)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

/// Per location name, the sum of `metric` over the call paths `keep` accepts.
fn per_location(
    profile: &Value,
    metric: &str,
    keep: impl Fn(&Value) -> bool,
) -> BTreeMap<String, f64> {
    let cnodes: BTreeMap<u64, &Value> = profile["cnodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_u64().unwrap(), c))
        .collect();
    let locations = profile["locations"].as_array().unwrap();
    let mut sums = BTreeMap::new();
    for row in profile["values"][metric].as_array().unwrap() {
        let (cnode, location) = (row[0].as_u64().unwrap(), row[1].as_u64().unwrap());
        if keep(cnodes[&cnode]) {
            let name = locations[location as usize]["name"].as_str().unwrap();
            *sums.entry(name.to_owned()).or_default() += row[2].as_f64().unwrap();
        }
    }
    sums
}

fn depth(cnode: &Value) -> usize {
    cnode["path"].as_array().unwrap().len()
}

#[test]
fn a_job_s_profile_agrees_with_its_trace_and_shows_who_waited_for_the_late_rank() {
    let dir = tempfile::tempdir().unwrap();
    let run = late_rank_job(dir.path());
    // Written by the job's last process, beside the merged trace.
    let cubex = run.join("profile.cubex");
    assert!(cubex.is_file(), "no profile in {}", run.display());
    let report = std::fs::read_to_string(run.join("merge-report.txt")).unwrap();
    assert!(report.contains("profile written to"), "{report}");
    let profile = read_with_pycubexr(&cubex);

    // The metric tree, with units, as docs/profile.md describes it.
    let tree: Vec<(String, String, String, Option<String>)> = profile["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_owned(),
                m["unit"].as_str().unwrap().to_owned(),
                m["dtype"].as_str().unwrap().to_owned(),
                m["parent"].as_str().map(str::to_owned),
            )
        })
        .collect();
    let expected: Vec<(&str, &str, &str, Option<&str>)> = vec![
        ("time", "sec", "DOUBLE", None),
        ("host_time", "sec", "DOUBLE", Some("time")),
        ("execution_time", "sec", "DOUBLE", Some("time")),
        (
            "wait_for_last_rank",
            "sec",
            "DOUBLE",
            Some("execution_time"),
        ),
        ("kernel_time", "sec", "DOUBLE", Some("time")),
        ("proxy_time", "sec", "DOUBLE", Some("time")),
        ("proxy_gpu_wait", "sec", "DOUBLE", Some("proxy_time")),
        ("proxy_peer_wait", "sec", "DOUBLE", Some("proxy_time")),
        ("proxy_network_wait", "sec", "DOUBLE", Some("proxy_time")),
        ("proxy_flush", "sec", "DOUBLE", Some("proxy_time")),
        ("visits", "occ", "UINT64", None),
        ("bytes_sent", "bytes", "UINT64", None),
        ("bytes_received", "bytes", "UINT64", None),
        ("bus_bytes", "bytes", "DOUBLE", None),
        ("lost_records", "occ", "UINT64", None),
    ];
    let expected: Vec<(String, String, String, Option<String>)> = expected
        .into_iter()
        .map(|(a, b, c, d)| (a.into(), b.into(), c.into(), d.map(Into::into)))
        .collect();
    assert_eq!(tree, expected);
    assert!(profile["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["kind"] == "EXCLUSIVE"));

    // The trace, as the otf2 Python reader gives it.
    otf2_tools::assert_otf2_print_clean(&run.join("traces.otf2"));
    let trace = otf2_tools::dump(&run.join("traces.otf2"));
    let ops_locations: Vec<String> = trace["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap().to_owned())
        .filter(|name| name.ends_with(" ops"))
        .collect();
    assert_eq!(ops_locations.len(), 4, "one ops stream per rank");
    let mut trace_ops: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for interval in trace["intervals"].as_array().unwrap() {
        let loc = interval["loc"].as_str().unwrap();
        if ops_locations.iter().any(|o| o == loc) && interval["depth"] == 0 {
            let entry = trace_ops.entry(loc.to_owned()).or_default();
            entry.0 += 1.0;
            let ns = interval["end"].as_u64().unwrap() - interval["start"].as_u64().unwrap();
            entry.1 += ns as f64 / 1e9;
        }
    }
    let mut trace_sent: BTreeMap<String, f64> = BTreeMap::new();
    for collective in trace["collectives"].as_array().unwrap() {
        *trace_sent
            .entry(collective["loc"].as_str().unwrap().to_owned())
            .or_default() += collective["sent"].as_f64().unwrap();
    }

    // Visits of the operations (their size-bucket call paths) per rank: the trace's
    // operations, and the collectives the summary counts.
    let operation_paths = |c: &Value| depth(c) == 4;
    let visits = per_location(&profile, "visits", operation_paths);
    let summary: Value = serde_json::from_slice(
        &Command::new(TOOL)
            .args(["summary", "--json"])
            .arg(&run)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let calls: f64 = summary["operations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["kind"] == "collective")
        .map(|row| row["calls"].as_f64().unwrap())
        .sum();
    assert_eq!(calls, 8.0, "8 iterations");
    for location in &ops_locations {
        assert_eq!(
            visits.get(location),
            Some(&trace_ops[location].0),
            "{location}"
        );
        assert_eq!(visits[location], calls, "{location}");
    }
    // Bytes and execution time per rank: the trace's.
    let sent = per_location(&profile, "bytes_sent", |_| true);
    let execution = per_location(&profile, "execution_time", |_| true);
    for location in &ops_locations {
        assert_eq!(sent.get(location), trace_sent.get(location), "{location}");
        let (want, got) = (trace_ops[location].1, execution[location]);
        assert!(
            (want - got).abs() <= 1e-9 * want.max(1.0),
            "{location}: {got} vs {want}"
        );
    }
    // Time is the sum of its parts on every location.
    let time = per_location(&profile, "time", |_| true);
    let mut parts: BTreeMap<String, f64> = BTreeMap::new();
    for metric in ["host_time", "execution_time", "kernel_time", "proxy_time"] {
        for (location, value) in per_location(&profile, metric, |_| true) {
            *parts.entry(location).or_default() += value;
        }
    }
    for (location, total) in &time {
        assert!(
            (total - parts[location]).abs() <= 1e-9 * total.max(1.0),
            "{location}"
        );
    }

    // The late rank hardly waits; the others wait about as long as it was late (on a busy
    // machine their own scheduling delays blur that, hence the wide bounds).
    let wait = per_location(&profile, "wait_for_last_rank", |_| true);
    let late_us = LATE_US as f64;
    let mean_us = |location: &String| wait.get(location).copied().unwrap_or(0.0) / calls * 1e6;
    let (late, others): (Vec<&String>, Vec<&String>) = ops_locations
        .iter()
        .partition(|l| l.ends_with(&format!(" rank {LATE_RANK} ops")));
    let late_wait = mean_us(late[0]);
    assert!(late_wait < 0.25 * late_us, "{}: {late_wait} µs", late[0]);
    let mut waits: Vec<f64> = others.iter().map(|l| mean_us(l)).collect();
    waits.sort_by(f64::total_cmp);
    let median = waits[waits.len() / 2];
    assert!(
        (0.3 * late_us..4.0 * late_us).contains(&median),
        "the others' waits: {waits:?} µs"
    );
    assert!(waits[0] > 2.0 * late_wait, "{waits:?} µs vs {late_wait} µs");

    // One root call path and one root system-tree node, as Cube readers expect.
    let roots = profile["cnodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["parent"].is_null())
        .count();
    assert_eq!(roots, 1);
    let processes: std::collections::BTreeSet<u64> = profile["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["process_rank"].as_u64().unwrap())
        .collect();
    assert_eq!(processes.into_iter().collect::<Vec<_>>(), [0, 1, 2, 3]);

    cube_tools_agree(&cubex, &profile);
    read_by_threads_as_by_one(&run, &profile);
}

/// Read by several threads, each a shard of the locations, the trace gives the profile
/// one thread gives (the job end's), file for file; with 64 threads the shards hold a
/// location or two, so the ranks of one collective lie in different shards. `compare`,
/// which also keeps each collective's samples, says the same too.
fn read_by_threads_as_by_one(run: &Path, profile: &Value) {
    let dir = tempfile::tempdir().unwrap();
    let profile_by = |threads: usize| {
        let cubex = dir.path().join(format!("{threads}.cubex"));
        let output = Command::new(TOOL)
            .args(["profile", "--threads", &threads.to_string(), "-o"])
            .arg(&cubex)
            .arg(run)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        cubex
    };
    // The files in a profile, by name (the archive's times aside).
    let files = |cubex: &Path| -> BTreeMap<String, Vec<u8>> {
        let mut archive = tar::Archive::new(std::fs::File::open(cubex).unwrap());
        let mut files = BTreeMap::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let name = entry.path().unwrap().display().to_string();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
            files.insert(name, bytes);
        }
        files
    };
    let one = profile_by(1);
    assert_eq!(&read_with_pycubexr(&one), profile);
    let one = files(&one);
    assert!(one.contains_key("anchor.xml"), "{:?}", one.keys());
    for threads in [2, 64] {
        let cubex = profile_by(threads);
        assert_eq!(&read_with_pycubexr(&cubex), profile, "{threads} threads");
        assert!(
            files(&cubex) == one,
            "{threads} threads: not the same files as one thread's"
        );
    }
    let compare_by = |threads: usize| {
        let output = Command::new(TOOL)
            .args(["compare", "--no-diff", "--threads", &threads.to_string()])
            .args([run, run])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let by_one = compare_by(1);
    assert!(by_one.contains("AllReduce"), "{by_one}");
    assert_eq!(compare_by(64), by_one);
}

/// CubeLib's tools, when they are on PATH: they accept the file, and `cube_dump` gives the
/// same inclusive visits and waits at the root, per location, as pycubexr.
fn cube_tools_agree(cubex: &Path, profile: &Value) {
    if !cube_tools_accept(cubex) {
        return;
    }
    // cube_dump prints the metrics in the metric tree's order: the wait, then visits.
    let by_cube_dump = cube_dump_at_root(cubex, "visits,wait_for_last_rank");
    assert_eq!(
        by_cube_dump.len(),
        profile["locations"].as_array().unwrap().len()
    );
    let (visits_by_pycubexr, waits_by_pycubexr) = (
        per_column(profile, "visits"),
        per_column(profile, "wait_for_last_rank"),
    );
    for (location, values) in by_cube_dump {
        let (wait, visits) = (values[0], values[1]);
        let (want_visits, want_wait) = (visits_by_pycubexr[location], waits_by_pycubexr[location]);
        assert_eq!(visits, want_visits, "visits on location {location}");
        assert!(
            // cube_dump prints six significant digits.
            (wait - want_wait).abs() <= 1e-5 * want_wait.max(1e-3),
            "wait on {location}: {wait} vs {want_wait}"
        );
    }
}

#[test]
fn profile_names_what_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let output = Command::new(TOOL)
        .arg("profile")
        .arg(&missing)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");

    // Parts without a merged trace: say what to run.
    let run = dir.path().join("run");
    std::fs::create_dir_all(run.join("parts/host.1")).unwrap();
    let output = Command::new(TOOL)
        .arg("profile")
        .arg(&run)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("nccl-scorep merge"), "{stderr}");

    // A file that is not a trace.
    let junk = dir.path().join("junk.otf2");
    std::fs::write(&junk, "not an anchor").unwrap();
    let output = Command::new(TOOL)
        .arg("profile")
        .arg(&junk)
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(!dir.path().join("profile.cubex").exists());
}

/// With `NCCL_SCOREP_STEP_DETAIL=summary` the proxy steps are summed up on their
/// operations: the profile has no step call paths, and the proxy wait metrics sit on the
/// operations' call paths with the values their attributes carry.
#[test]
fn summed_up_steps_give_their_wait_times_to_their_operations_call_paths() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let status = nccl_sim::job_for_tests(&out)
        .args(["--scenario", "single", "--iterations", "4"])
        .env("NCCL_SCOREP_TOOL", env!("CARGO_BIN_EXE_nccl-scorep"))
        .env("NCCL_SCOREP_EVENTS", "default,steps")
        .env("NCCL_SCOREP_STEP_DETAIL", "summary")
        .status()
        .unwrap();
    assert!(status.success());
    let profile = read_with_pycubexr(&out.join("profile.cubex"));
    let last_region = |c: &Value| {
        let path = c["path"].as_array().unwrap();
        path.last().unwrap().as_str().unwrap().to_owned()
    };
    for cnode in profile["cnodes"].as_array().unwrap() {
        let region = last_region(cnode);
        assert!(
            !region.ends_with(" step") && !region.contains(" wait") && region != "recv: flush",
            "a step or wait-state call path: {cnode}"
        );
    }

    // The trace's summed-up wait times, per location and metric.
    let trace = otf2_tools::dump(&out.join("traces.otf2"));
    let mut in_trace: BTreeMap<(String, &str), f64> = BTreeMap::new();
    let mut operations = 0;
    for interval in trace["intervals"].as_array().unwrap() {
        let region = interval["region"].as_str().unwrap();
        if region != "proxy send" && region != "proxy recv" {
            continue;
        }
        operations += 1;
        let attrs = &interval["attrs"];
        assert_eq!(attrs["nccl.steps_done"], attrs["nccl.nsteps"], "{interval}");
        let took = interval["end"].as_u64().unwrap() - interval["start"].as_u64().unwrap();
        assert!(
            attrs["nccl.step_max_ns"].as_u64().unwrap() <= took,
            "{interval}"
        );
        for (attribute, metric) in [
            ("nccl.gpu_wait_ns", "proxy_gpu_wait"),
            ("nccl.peer_wait_ns", "proxy_peer_wait"),
            ("nccl.network_wait_ns", "proxy_network_wait"),
            ("nccl.flush_ns", "proxy_flush"),
        ] {
            if let Some(ns) = attrs[attribute].as_u64() {
                // The profile has one location for a rank's proxy lanes.
                let lane = interval["loc"].as_str().unwrap();
                let location = lane.split(" lane ").next().unwrap().to_owned();
                *in_trace.entry((location, metric)).or_default() += ns as f64 / 1e9;
            }
        }
    }
    assert!(operations > 0, "no proxy operation in the trace");
    for metric in ["proxy_gpu_wait", "proxy_network_wait", "proxy_flush"] {
        assert!(
            in_trace.keys().any(|(_, m)| *m == metric),
            "no {metric} in the trace's operations"
        );
    }
    for metric in [
        "proxy_gpu_wait",
        "proxy_peer_wait",
        "proxy_network_wait",
        "proxy_flush",
    ] {
        let on_operations = |c: &Value| {
            let region = last_region(c);
            region == "proxy send" || region == "proxy recv"
        };
        let everywhere = per_location(&profile, metric, |_| true);
        let on_ops = per_location(&profile, metric, on_operations);
        assert_eq!(everywhere, on_ops, "{metric} outside the proxy operations");
        let want: BTreeMap<String, f64> = in_trace
            .iter()
            .filter(|((_, m), _)| *m == metric)
            .map(|((location, _), &seconds)| (location.clone(), seconds))
            .collect();
        let got: BTreeMap<String, f64> = on_ops.into_iter().filter(|(_, v)| *v != 0.0).collect();
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{metric}"
        );
        for (location, seconds) in &want {
            assert!(
                (got[location] - seconds).abs() <= 1e-9 * seconds.max(1.0),
                "{metric} on {location}: profile {} s, trace {seconds} s",
                got[location]
            );
        }
    }
}

#[test]
fn nccl_scorep_profile_0_leaves_the_profile_out() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let status = nccl_sim::job_for_tests(&out)
        .args(["--scenario", "single", "--iterations", "2"])
        .env("NCCL_SCOREP_TOOL", env!("CARGO_BIN_EXE_nccl-scorep"))
        .env("NCCL_SCOREP_PROFILE", "0")
        .status()
        .unwrap();
    assert!(status.success());
    assert!(out.join("traces.otf2").is_file());
    assert!(!out.join("profile.cubex").exists());
    // And on demand, into a file of one's choice.
    let target = dir.path().join("elsewhere.cubex");
    let output = Command::new(TOOL)
        .arg("profile")
        .arg(&out)
        .arg("-o")
        .arg(&target)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("profile written to"));
    let profile = read_with_pycubexr(&target);
    let visits = per_location(&profile, "visits", |c| depth(c) == 4);
    assert!(!visits.is_empty());
}

#[test]
fn the_profile_and_the_export_read_one_location_at_a_time_whatever_the_open_file_limit() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let status = nccl_sim::job_for_tests(&out)
        .args(["--scenario", "single", "--iterations", "2"])
        .env("NCCL_SCOREP_TOOL", TOOL)
        .env("NCCL_SCOREP_PROFILE", "0")
        .status()
        .unwrap();
    assert!(status.success());
    // `command` run under `ulimit -n 8` (which sets the hard limit too: the tool cannot
    // raise it) into `limited.<ext>`, and without a limit into `unlimited.<ext>`.
    let with_and_without_limit = |command: &str, ext: &str| {
        for (limit, name) in [("ulimit -n 8 && ", "limited"), ("", "unlimited")] {
            let output = Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "{limit}exec '{TOOL}' {command} '{}' -o '{}/{name}.{ext}'",
                    out.display(),
                    dir.path().display()
                ))
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "{command} {name}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    };
    // The profile needs no more files than that whatever the ranks (the ops streams are
    // read one by one): the same profile as without a limit.
    with_and_without_limit("profile", "cubex");
    let values = |file: &str| read_with_pycubexr(&dir.path().join(file))["values"].clone();
    let unlimited = values("unlimited.cubex");
    assert!(!unlimited["execution_time"].as_array().unwrap().is_empty());
    assert!(!unlimited["wait_for_last_rank"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(values("limited.cubex"), unlimited);
    // The same for the export: under the limit, the same file as without it.
    with_and_without_limit("export", "json");
    let json = |file: &str| std::fs::read_to_string(dir.path().join(file)).unwrap();
    let unlimited = json("unlimited.json");
    assert!(unlimited.contains("\"ph\":\"B\""), "no slices");
    assert!(unlimited.contains("AllReduce"), "no operation");
    assert_eq!(json("limited.json"), unlimited);
}
