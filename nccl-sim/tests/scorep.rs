//! Score-P mode, end to end: nccl-sim runs with the Score-P stand-in preloaded
//! (`LD_PRELOAD`, so the plugin finds `SCOREP_User_*` in the global scope exactly as in a
//! process measured by a shared Score-P). The stand-in is NOT Score-P: it enforces Score-P's
//! rules (it aborts the process on an end without enter on the thread, an end out of order,
//! or a NULL region) and logs every call, and these tests assert on that log, on the clock
//! file and on where the sidecar trace went.

use scorep_adapter::clock_file::{ClockFile, ClockSource};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The stand-in's clock runs this far ahead of CLOCK_MONOTONIC_RAW.
const STAND_IN_OFFSET_NS: i64 = 1_000_000_000_000;
/// How far two readings of "the same instant" may be apart on a loaded 2-core machine.
const SAME_INSTANT_NS: i64 = 2_000_000;

fn stand_in() -> PathBuf {
    let plugin = nccl_sim::our_plugin_for_tests();
    let dir = plugin.parent().unwrap();
    [
        dir.to_path_buf(),
        dir.join("deps"),
        dir.parent().unwrap().join("deps"),
    ]
    .into_iter()
    .map(|d| d.join("libscorep_stand_in.so"))
    .find(|p| p.exists())
    .expect("libscorep_stand_in.so is built as a dev-dependency")
}

struct Run {
    dir: tempfile::TempDir,
    output: Output,
    calls: Vec<Value>,
}

impl Run {
    fn experiment(&self) -> PathBuf {
        self.dir.path().join("exp")
    }

    fn standalone_out(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    fn calls_named<'a>(&'a self, call: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.calls.iter().filter(move |c| c["call"] == call)
    }

    /// The single part's clock file.
    fn clock_file(&self) -> ClockFile {
        let parts: Vec<PathBuf> = std::fs::read_dir(self.experiment().join("nccl/parts"))
            .expect("the sidecar parts are in <experiment>/nccl/parts")
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(parts.len(), 1, "{parts:?}");
        assert!(parts[0].join("traces.otf2").exists());
        ClockFile::read_from(&parts[0].join("scorep-clock.json")).expect("scorep-clock.json")
    }
}

/// Runs nccl-sim with our plugin. `preload`: with the stand-in; `metric_plugin`: Score-P
/// loads our library as metric plugin `nccl_scorep` too.
fn run(scenarios: &[&str], preload: bool, metric_plugin: bool, env: &[(&str, &str)]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let plugin = nccl_sim::our_plugin_for_tests();
    let log = dir.path().join("stand-in.jsonl");
    let mut command = Command::new(env!("CARGO_BIN_EXE_nccl-sim"));
    command
        .arg("run")
        .arg("--plugin")
        .arg(&plugin)
        .args(["--ranks", "2", "--iterations", "3", "--speedup", "50"])
        .env("NCCL_SCOREP_OUTPUT_DIR", dir.path().join("out"))
        .env("NCCL_SCOREP_JSONL", "1")
        .env("NCCL_SCOREP_AUTO_MERGE", "0")
        .env("NCCL_DEBUG", "INFO")
        .env("SCOREP_EXPERIMENT_DIRECTORY", dir.path().join("exp"))
        .env("SCOREP_STAND_IN_LOG", &log)
        .env_remove("SCOREP_METRIC_PLUGINS")
        .env_remove("SCOREP_TIMER")
        .env_remove("NCCL_SCOREP_MODE");
    for scenario in scenarios {
        command.args(["--scenario", scenario]);
    }
    if preload {
        command.env("LD_PRELOAD", stand_in());
    }
    if metric_plugin {
        // Score-P opens lib<name>.so from LD_LIBRARY_PATH: a link to the very file NCCL
        // loads, so both are one library with one state.
        let libs = dir.path().join("lib");
        std::fs::create_dir(&libs).unwrap();
        std::os::unix::fs::symlink(&plugin, libs.join("libnccl_scorep.so")).unwrap();
        command
            .env("LD_LIBRARY_PATH", &libs)
            .env("SCOREP_METRIC_PLUGINS", "nccl_scorep")
            .env("SCOREP_METRIC_NCCL_SCOREP", "*");
    }
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("run nccl-sim");
    let calls = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    Run { dir, output, calls }
}

fn assert_succeeded(run: &Run) {
    assert!(
        run.output.status.success(),
        "nccl-sim failed ({:?}):\n{}",
        run.output.status,
        run.stderr()
    );
    assert_eq!(run.calls_named("abort").count(), 0);
}

/// Replays each thread's enters and ends: every end closes that thread's innermost open
/// region, and nothing is left open. Returns the regions entered per thread.
fn assert_properly_nested(run: &Run) -> BTreeMap<i64, Vec<String>> {
    let mut stacks: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    let mut entered: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for call in &run.calls {
        let tid = call["tid"].as_i64().unwrap();
        let region = call["region"].as_str().unwrap_or_default().to_owned();
        match call["call"].as_str().unwrap() {
            "enter" => {
                stacks.entry(tid).or_default().push(region.clone());
                entered.entry(tid).or_default().push(region);
            }
            "end" => {
                let top = stacks.entry(tid).or_default().pop();
                assert_eq!(top.as_deref(), Some(region.as_str()), "thread {tid}");
            }
            _ => {}
        }
    }
    for (tid, stack) in &stacks {
        assert!(stack.is_empty(), "thread {tid} left {stack:?} open");
    }
    entered
}

fn counters(run: &Run, dir: &Path) -> Value {
    let mut summary = None;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "jsonl") {
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let value: Value = serde_json::from_str(line).unwrap();
                if value["type"] == "summary" {
                    summary = Some(value["counters"].clone());
                }
            }
        }
    }
    summary.unwrap_or_else(|| panic!("no summary in {}:\n{}", dir.display(), run.stderr()))
}

/// CLOCK_MONOTONIC_RAW − CLOCK_MONOTONIC on this machine now (both are system-wide).
fn raw_minus_monotonic() -> i64 {
    let read = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid, writable timespec.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec * 1_000_000_000 + ts.tv_nsec
    };
    let before = read(libc::CLOCK_MONOTONIC);
    let raw = read(libc::CLOCK_MONOTONIC_RAW);
    let after = read(libc::CLOCK_MONOTONIC);
    raw - (before + after) / 2
}

#[test]
fn every_api_event_kind_becomes_a_region_nested_on_its_thread() {
    let run = run(
        &[
            "single",
            "group",
            "p2p",
            "alltoall",
            "multi-comm",
            "nonblocking",
        ],
        true,
        false,
        &[],
    );
    assert_succeeded(&run);
    let entered = assert_properly_nested(&run);
    let all: BTreeSet<&str> = entered.values().flatten().map(String::as_str).collect();
    for region in [
        "ncclGroup",
        "ncclAllReduce",
        "ncclAllGather",
        "ncclReduceScatter",
        "ncclSend",
        "ncclRecv",
        "NCCL kernel launch",
        "NCCL plan enqueue",
        "AllReduce enqueue",
        "AllGather enqueue",
        "Send enqueue",
        "Recv enqueue",
        "NCCL clock sync",
    ] {
        assert!(all.contains(region), "no {region:?} region in {all:?}");
    }
    // Every region was defined once and put in the group "NCCL".
    let defined: Vec<&str> = run
        .calls_named("region_init")
        .map(|c| c["region"].as_str().unwrap())
        .collect();
    let unique: BTreeSet<&str> = defined.iter().copied().collect();
    assert_eq!(defined.len(), unique.len(), "a region was defined twice");
    let grouped: BTreeMap<&str, &str> = run
        .calls_named("set_group")
        .map(|c| (c["region"].as_str().unwrap(), c["group"].as_str().unwrap()))
        .collect();
    for region in &unique {
        assert_eq!(grouped.get(region), Some(&"NCCL"), "{region}");
    }
    // API calls nest the work they cause on the application thread: in `single`, a
    // kernel launch and the plan's enqueue happen inside ncclGroup.
    let mut inside_group = BTreeSet::new();
    let mut stacks: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for call in &run.calls {
        let tid = call["tid"].as_i64().unwrap();
        let region = call["region"].as_str().unwrap_or_default().to_owned();
        if call["call"] == "enter" {
            let stack = stacks.entry(tid).or_default();
            // A plan's tasks are siblings inside the plan, never one inside another.
            let is_task = |r: &str| r.ends_with(" enqueue") && r != "NCCL plan enqueue";
            if is_task(&region) {
                assert_eq!(
                    stack.last().map(String::as_str),
                    Some("NCCL plan enqueue"),
                    "{region} entered inside {stack:?}"
                );
            }
            if stack.first().is_some_and(|r| r == "ncclGroup") {
                inside_group.insert(region.clone());
            }
            stack.push(region);
        } else if call["call"] == "end" {
            stacks.entry(tid).or_default().pop();
        }
    }
    for region in ["ncclAllReduce", "NCCL kernel launch", "AllReduce enqueue"] {
        assert!(
            inside_group.contains(region),
            "{region} not inside ncclGroup"
        );
    }
    let sidecar = run.experiment().join("nccl");
    let c = counters(&run, &sidecar);
    assert!(c["scorep_regions_entered"].as_u64().unwrap() > 0);
    assert_eq!(c["scorep_cross_thread_stops"], 0);
    assert_eq!(c["scorep_left_open"], 0);
    assert!(
        !run.standalone_out().exists(),
        "Score-P mode writes to the experiment"
    );
}

#[test]
fn parameters_are_bounded_and_can_be_turned_off() {
    let with = run(&["single", "p2p"], true, false, &[]);
    assert_succeeded(&with);
    let mut values: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut last_enter: BTreeMap<i64, String> = BTreeMap::new();
    for call in &with.calls {
        let tid = call["tid"].as_i64().unwrap();
        match call["call"].as_str().unwrap() {
            "enter" => {
                last_enter.insert(tid, call["region"].as_str().unwrap().to_owned());
            }
            "parameter_string" => {
                // On the region just entered, on the same thread.
                assert_eq!(
                    call["region"].as_str(),
                    last_enter.get(&tid).map(String::as_str)
                );
                values
                    .entry(call["name"].as_str().unwrap().to_owned())
                    .or_default()
                    .insert(call["value"].as_str().unwrap().to_owned());
            }
            "parameter_int64" | "parameter_uint64" => panic!("numbers explode the profile"),
            _ => {}
        }
    }
    let buckets = &values["nccl.bytes"];
    for value in buckets {
        assert!(
            value.ends_with(" B") || value.ends_with("iB") || value == "unknown",
            "{value}"
        );
    }
    assert!(buckets.contains("64-256 KiB"), "{buckets:?}");
    assert!(buckets.contains("1-4 MiB"), "{buckets:?}");
    assert!(buckets.len() <= 4, "{buckets:?}");
    assert_eq!(
        values["nccl.comm"],
        BTreeSet::from(["single".to_owned(), "p2p".to_owned()])
    );

    let without = run(
        &["single"],
        true,
        false,
        &[("NCCL_SCOREP_SCOREP_PARAMETERS", "none")],
    );
    assert_succeeded(&without);
    assert!(without.calls_named("enter").count() > 0);
    assert_eq!(without.calls_named("parameter_string").count(), 0);
}

#[test]
fn a_plan_of_seventy_tasks_loses_no_region_and_counts_no_cross_thread_stop() {
    // ring-wrap: 70 AllReduces in one group, 3 iterations, 2 ranks.
    let run = run(&["ring-wrap"], true, false, &[]);
    assert_succeeded(&run);
    let entered = assert_properly_nested(&run);
    let tasks = entered
        .values()
        .flatten()
        .filter(|r| *r == "AllReduce enqueue")
        .count();
    assert_eq!(tasks, 70 * 3 * 2);
    let c = counters(&run, &run.experiment().join("nccl"));
    assert_eq!(c["scorep_not_forwarded"], 0, "{c}");
    assert_eq!(c["scorep_cross_thread_stops"], 0, "{c}");
    // Every task but the last of each plan ends when the next starts.
    assert_eq!(c["scorep_tasks_ended_at_next"], 69 * 3 * 2, "{c}");
}

#[test]
fn graph_replays_become_regions_on_the_callback_thread_only() {
    let run = run(&["graph"], true, false, &[]);
    assert_succeeded(&run);
    let entered = assert_properly_nested(&run);
    let api_threads: BTreeSet<i64> = entered
        .iter()
        .filter(|(_, r)| r.iter().any(|n| n == "ncclGroup"))
        .map(|(t, _)| *t)
        .collect();
    let replay_threads: BTreeSet<i64> = entered
        .iter()
        .filter(|(_, r)| r.iter().any(|n| n == "AllReduce enqueue"))
        .map(|(t, _)| *t)
        .collect();
    assert!(!api_threads.is_empty() && !replay_threads.is_empty());
    assert!(
        api_threads.is_disjoint(&replay_threads),
        "replays run on the callback thread: {api_threads:?} vs {replay_threads:?}"
    );
    let c = counters(&run, &run.experiment().join("nccl"));
    assert_eq!(c["scorep_cross_thread_stops"], 0);
}

#[test]
fn an_application_exiting_without_destroy_calls_nothing_after_score_p_finished() {
    let exit = run_skip_destroy();
    assert_succeeded(&exit);
    assert_properly_nested(&exit);
    assert_eq!(exit.calls_named("ignored_after_finalize").count(), 0);
    let finalize_seq = exit
        .calls_named("finalize")
        .map(|c| c["seq"].as_u64().unwrap())
        .next()
        .expect("the stand-in finalised at exit");
    let last_region_call = exit
        .calls
        .iter()
        .filter(|c| c["call"] == "enter" || c["call"] == "end")
        .map(|c| c["seq"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(last_region_call < finalize_seq);
    // At exit only a clock pair is taken, no region: the clock file has one sync point.
    let file = exit.clock_file();
    assert_eq!(file.sync_ns.len(), 1);
}

fn run_skip_destroy() -> Run {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stand-in.jsonl");
    let output = Command::new(env!("CARGO_BIN_EXE_nccl-sim"))
        .arg("run")
        .arg("--plugin")
        .arg(nccl_sim::our_plugin_for_tests())
        .args(["--scenario", "single", "--ranks", "2", "--iterations", "2"])
        .args(["--speedup", "50", "--skip-destroy"])
        .env("NCCL_SCOREP_AUTO_MERGE", "0")
        .env("SCOREP_EXPERIMENT_DIRECTORY", dir.path().join("exp"))
        .env("SCOREP_STAND_IN_LOG", &log)
        .env("LD_PRELOAD", stand_in())
        .env_remove("SCOREP_METRIC_PLUGINS")
        .output()
        .unwrap();
    let calls = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    Run { dir, output, calls }
}

#[test]
fn the_metric_plugin_receives_score_p_s_clock_and_the_pairs_follow_it() {
    let run = run(&["single"], true, true, &[]);
    assert_succeeded(&run);
    let loaded: Vec<&Value> = run.calls_named("metric_plugin_loaded").collect();
    assert_eq!(loaded.len(), 1, "{}", run.stderr());
    assert_eq!(loaded[0]["value"], 0, "initialize succeeded");
    assert_eq!(loaded[0]["sync"], 3, "asynchronous");
    let file = run.clock_file();
    assert_eq!(file.format, 1);
    assert_eq!(file.source, ClockSource::MetricPlugin);
    assert_eq!(file.pid as u32, {
        // The part is named <host>.<pid>.
        let parts = std::fs::read_dir(run.experiment().join("nccl/parts")).unwrap();
        let name = parts.map(|e| e.unwrap().file_name()).next().unwrap();
        let name = name.to_string_lossy().into_owned();
        name.rsplit('.').next().unwrap().parse::<u32>().unwrap()
    });
    assert!(file.pairs.len() >= 2);
    assert!(file
        .pairs
        .windows(2)
        .all(|w| w[0].ns < w[1].ns && w[0].scorep < w[1].scorep));
    // The stand-in's clock is CLOCK_MONOTONIC_RAW + 1000 s; ours CLOCK_MONOTONIC.
    let expected = raw_minus_monotonic() + STAND_IN_OFFSET_NS;
    for pair in &file.pairs {
        let offset = pair.scorep as i64 - pair.ns as i64;
        assert!(
            (offset - expected).abs() < SAME_INSTANT_NS,
            "{offset} vs {expected}"
        );
    }
    // One sync region at the first init and one at the last finalize, each recorded with
    // our time just before its Enter.
    let enters: Vec<i64> = run
        .calls_named("enter")
        .filter(|c| c["region"] == "NCCL clock sync")
        .map(|c| c["time"].as_i64().unwrap())
        .collect();
    assert_eq!(enters.len(), 2);
    assert_eq!(file.sync_ns.len(), 2);
    for (enter, ns) in enters.iter().zip(&file.sync_ns) {
        let delta = enter - *ns as i64 - expected;
        // The Enter comes right after our reading (the clocks' difference may have
        // moved a little since the run, hence the tolerance below zero).
        assert!(
            (-SAME_INSTANT_NS..SAME_INSTANT_NS).contains(&delta),
            "{delta}"
        );
    }
    // The metrics: what the API calls handed to NCCL, sampled on Score-P's clock.
    let values = |name: &str| -> Vec<(u64, u64)> {
        run.calls_named("metric_value")
            .filter(|c| c["name"] == name)
            .map(|c| (c["time"].as_u64().unwrap(), c["value"].as_u64().unwrap()))
            .collect()
    };
    let calls = values("calls_issued");
    let api_calls = run
        .calls_named("enter")
        .filter(|c| c["region"] == "ncclAllReduce")
        .count() as u64;
    assert_eq!(calls.last().map(|v| v.1), Some(api_calls));
    let bytes = values("bytes_issued");
    assert!(bytes
        .windows(2)
        .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
    assert!(bytes.last().unwrap().1 > 0);
    // Sampled on Score-P's clock, inside the measurement.
    let first = file.pairs.first().unwrap().scorep;
    assert!(bytes
        .iter()
        .all(|(t, _)| *t + SAME_INSTANT_NS as u64 >= first));
}

/// Runs `single` with Score-P loading the metric plugin `name` from a directory where
/// `lib<name>.so` is the plugin's file (`copy`: a copy of it, else a link).
fn run_metric_plugin_named(name: &str, copy: bool) -> (Run, tempfile::TempDir) {
    let libs = tempfile::tempdir().unwrap();
    let plugin = nccl_sim::our_plugin_for_tests();
    let file = libs.path().join(format!("lib{name}.so"));
    if copy {
        std::fs::copy(&plugin, &file).unwrap();
    } else {
        std::os::unix::fs::symlink(&plugin, &file).unwrap();
    }
    let variable = format!("SCOREP_METRIC_{}", name.to_uppercase());
    let env = [
        ("LD_LIBRARY_PATH", libs.path().to_str().unwrap()),
        ("SCOREP_METRIC_PLUGINS", name),
        (variable.as_str(), "*"),
    ];
    (run(&["single"], true, false, &env), libs)
}

#[test]
fn the_metric_plugin_works_by_each_documented_name() {
    for name in ["nccl_scorep", "nccl_profiler_scorep"] {
        let (run, _libs) = run_metric_plugin_named(name, false);
        assert_succeeded(&run);
        assert_eq!(run.calls_named("metric_plugin_loaded").count(), 1, "{name}");
        assert_eq!(
            run.clock_file().source,
            ClockSource::MetricPlugin,
            "{name}: {}",
            run.stderr()
        );
        assert!(!run.stderr().contains("another copy"), "{}", run.stderr());
    }
}

#[test]
fn a_copy_loaded_as_metric_plugin_is_named_in_the_warning() {
    let (run, libs) = run_metric_plugin_named("nccl_profiler_scorep", true);
    assert_succeeded(&run);
    assert_eq!(run.clock_file().source, ClockSource::SyncRegions);
    let stderr = run.stderr();
    let copy = libs.path().join("libnccl_profiler_scorep.so");
    assert!(
        stderr.contains(&format!(
            "Score-P loaded {}, another copy of this library",
            copy.display()
        )),
        "{stderr}"
    );
}

#[test]
fn a_metric_plugin_score_p_did_not_find_is_said_so() {
    let run = run(
        &["single"],
        true,
        false,
        &[("SCOREP_METRIC_PLUGINS", "nccl_scorep")],
    );
    assert_succeeded(&run);
    assert_eq!(run.clock_file().source, ClockSource::SyncRegions);
    let stderr = run.stderr();
    assert!(
        stderr.contains("Score-P did not load libnccl_scorep.so"),
        "{stderr}"
    );
}

#[test]
fn with_score_p_on_clock_gettime_the_pairs_are_raw_monotonic() {
    let run = run(
        &["single"],
        true,
        false,
        &[("SCOREP_TIMER", "clock_gettime")],
    );
    assert_succeeded(&run);
    let file = run.clock_file();
    assert_eq!(file.source, ClockSource::ClockGettime);
    assert!(file.pairs.len() >= 2);
    let expected = raw_minus_monotonic();
    for pair in &file.pairs {
        let offset = pair.scorep as i64 - pair.ns as i64;
        assert!(
            (offset - expected).abs() < SAME_INSTANT_NS,
            "{offset} vs {expected}"
        );
    }
}

#[test]
fn without_a_clock_the_sync_regions_carry_the_alignment() {
    let before = nccl_scorep_common::clock::now_ns();
    let run = run(&["single"], true, false, &[]);
    let after = nccl_scorep_common::clock::now_ns();
    assert_succeeded(&run);
    let file = run.clock_file();
    assert_eq!(file.source, ClockSource::SyncRegions);
    assert!(file.pairs.is_empty());
    assert_eq!(file.sync_region, "NCCL clock sync");
    let enters = run
        .calls_named("enter")
        .filter(|c| c["region"] == "NCCL clock sync")
        .count();
    assert_eq!(file.sync_ns.len(), enters);
    assert_eq!(enters, 2);
    assert!(file.sync_ns[0] < file.sync_ns[1]);
    assert!(file.sync_ns.iter().all(|ns| (before..after).contains(ns)));
}

#[test]
fn without_score_p_the_plugin_stays_standalone() {
    let run = run(&["single"], false, false, &[]);
    assert_succeeded(&run);
    assert!(run.calls.is_empty(), "nothing reached a Score-P");
    assert!(!run.experiment().exists());
    let parts: Vec<PathBuf> = std::fs::read_dir(run.standalone_out().join("parts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(parts.len(), 1);
    assert!(parts[0].join("traces.otf2").exists());
    assert!(!parts[0].join("scorep-clock.json").exists());
    let c = counters(&run, &run.standalone_out());
    assert_eq!(c["scorep_regions_entered"], 0);

    // Insisting on Score-P without it: one clear message, and the standalone trace.
    let insisted = run_mode_scorep();
    assert_succeeded(&insisted);
    let stderr = insisted.stderr();
    assert!(stderr.contains("NCCL_SCOREP_MODE=scorep"), "{stderr}");
    assert!(stderr.contains("--dynamic"), "{stderr}");
    assert!(insisted.standalone_out().join("parts").exists());
}

fn run_mode_scorep() -> Run {
    run(&["single"], false, false, &[("NCCL_SCOREP_MODE", "scorep")])
}
