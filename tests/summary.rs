//! `nccl-scorep summary` on a run that nccl-sim made with a rank that is late on purpose.

use nccl_sim::nccl::{Nccl, SimConfig};
use nccl_sim::profiler::Profiler;
use nccl_sim::scenario::{self, Params};
use serde_json::Value;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

#[test]
fn summary_names_the_late_rank_and_counts_every_collective() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libnccl-profiler-scorep.so");
    std::fs::copy(nccl_sim::our_plugin_for_tests(), &lib).unwrap();
    let out = dir.path().join("run");
    // The plugin reads its settings at its first init, below, on this thread.
    std::env::set_var("NCCL_SCOREP_OUTPUT_DIR", &out);
    std::env::set_var("NCCL_SCOREP_JSONL", "1");
    // The copy has no tool beside it to merge the job at its end.
    std::env::set_var("NCCL_SCOREP_TOOL", env!("CARGO_BIN_EXE_nccl-scorep"));
    let profiler = Arc::new(Profiler::new("2.32".parse().unwrap(), Some(lib.into())));
    let mut config = SimConfig::default();
    config.time.speedup = 10.0;
    let nccl = Nccl::new(profiler, config);
    let mut params = Params::single_process(3, 6);
    // Late by far more than a busy machine's scheduling delays (a time slice is a few ms).
    params.late = Some((1, Duration::from_millis(10)));
    assert!(scenario::run("single", &nccl, &params));

    let output = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .arg("summary")
        .arg(&out)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    // The run directory holds the merged trace (the plugin merged it at the last
    // finalize), which the summary prefers to the event logs.
    assert_eq!(summary["source"], "trace");
    assert_eq!(summary["schema"], "nccl-scorep-summary/2");
    assert_eq!(
        summary["warnings"].as_array().unwrap().len(),
        0,
        "{summary:#}"
    );
    let rows = summary["operations"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["func"], "AllReduce");
    assert_eq!(rows[0]["kind"], "collective");
    assert_eq!(rows[0]["nranks"], 3);
    assert_eq!(rows[0]["calls"], 6);
    assert_eq!(rows[0]["incomplete_calls"], 0);
    assert_eq!(rows[0]["bytes_per_call"], 1 << 20);
    assert_eq!(rows[0]["share"], 1.0);
    assert_eq!(rows[0]["sizes"][0]["bucket"], "1-4 MiB");
    assert_eq!(rows[0]["sizes"][0]["calls"], 6);
    let skew = rows[0]["mean_skew_us"].as_f64().unwrap();
    assert!(skew >= 8000.0, "{skew}");
    // Ranks 0 and 2 wait about 10 ms in each of the 6 calls; rank 1 hardly.
    let wait = rows[0]["wait_ms"].as_f64().unwrap();
    assert!(wait >= 2.0 * 6.0 * 8.0, "{wait}");
    let ranks = &summary["ranks"][0];
    assert_eq!(ranks["ranks"].as_array().unwrap().len(), 3);
    assert_eq!(ranks["wait_ms"]["min_rank"], 1, "{ranks:#}");
    let late = &summary["stragglers"][0];
    assert_eq!(late["rank"], 1, "{summary:#}");
    assert_eq!(late["instances"], 6);
    assert!(late["last_calls"].as_u64().unwrap() >= 5, "{late}");
    assert!(
        late["median_lateness_us"].as_f64().unwrap() >= 8000.0,
        "{late}"
    );
    // Two other ranks waited about 10 ms for it in each call.
    assert!(
        late["cost_ms"].as_f64().unwrap() >= 2.0 * 5.0 * 8.0,
        "{late}"
    );

    let text = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .arg("summary")
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("rank 1 in AllReduce on comm "), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");

    // The trace's locations are read one at a time: the summary is the same with fewer
    // open files allowed than the trace has locations.
    let tool = env!("CARGO_BIN_EXE_nccl-scorep");
    let validate = Command::new(tool)
        .args(["validate", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    let validate: Value = serde_json::from_slice(&validate.stdout).unwrap();
    let locations = validate["counts"]["locations"].as_u64().unwrap();
    const FILES: u64 = 16;
    assert!(locations > FILES, "{validate:#}");
    let limited = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n {FILES} && exec '{tool}' summary '{}' --json",
            out.display()
        ))
        .output()
        .unwrap();
    assert!(
        limited.status.success(),
        "{}",
        String::from_utf8_lossy(&limited.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&limited.stdout),
        String::from_utf8_lossy(&output.stdout)
    );

    // The event logs alone say the same.
    std::fs::remove_file(out.join("traces.otf2")).unwrap();
    let from_logs = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .arg("summary")
        .arg(&out)
        .output()
        .unwrap();
    let from_logs = String::from_utf8_lossy(&from_logs.stdout);
    assert!(from_logs.contains("from the event logs"), "{from_logs}");
    assert!(
        from_logs.contains("rank 1 in AllReduce on comm "),
        "{from_logs}"
    );
}

/// A 4-process job with PXN and a late rank, merged at its end: the summary of the merged
/// trace names the late rank, lists the point-to-point transfers, and finds every PXN
/// proxy operation's task in the process that created it.
#[test]
fn summary_of_a_merged_job_names_the_late_rank_and_links_pxn_operations() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let status = nccl_sim::job_for_tests(&out)
        .args(["--scenario", "single", "--scenario", "p2p"])
        .args([
            "--iterations",
            "8",
            "--speedup",
            "10",
            "--procs",
            "4",
            "--pxn",
        ])
        .args(["--late-rank", "3", "--late-us", "10000"])
        .env("NCCL_SCOREP_TOOL", env!("CARGO_BIN_EXE_nccl-scorep"))
        .env("NCCL_SIM_SHM_DIR", dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    assert!(out.join("traces.otf2").exists(), "merged at the job's end");
    let output = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .args(["summary", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success());
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["source"], "trace");
    assert_eq!(summary["processes"], 4);
    let rows = summary["operations"].as_array().unwrap();
    let collectives: Vec<&Value> = rows.iter().filter(|r| r["kind"] == "collective").collect();
    assert_eq!(collectives.len(), 1, "{rows:#?}");
    assert_eq!(
        (
            collectives[0]["nranks"].as_u64(),
            collectives[0]["calls"].as_u64()
        ),
        (Some(4), Some(8))
    );
    // The costliest first, and the shares make the whole.
    let times: Vec<f64> = rows
        .iter()
        .map(|r| r["time_ms"].as_f64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    let shares: f64 = rows.iter().map(|r| r["share"].as_f64().unwrap()).sum();
    assert!((shares - 1.0).abs() < 1e-9, "{shares}");
    let late = &summary["stragglers"][0];
    assert_eq!(late["rank"], 3, "{summary:#}");
    assert!(late["last_share"].as_f64().unwrap() >= 0.75, "{summary:#}");
    let p2p: Vec<(&str, u64)> = rows
        .iter()
        .filter(|r| r["kind"] == "p2p")
        .map(|r| (r["func"].as_str().unwrap(), r["calls"].as_u64().unwrap()))
        .collect();
    assert_eq!(p2p.len(), 2, "{p2p:?}");
    assert!(p2p.iter().all(|(_, calls)| *calls > 0), "{p2p:?}");
    let pxn = summary["pxn_foreign_ops"].as_u64().unwrap();
    assert!(pxn > 0);
    assert_eq!(summary["pxn_linked_ops"].as_u64(), Some(pxn), "{summary:#}");
}

#[test]
fn summary_of_an_empty_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .arg("summary")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no event log"));
    // A path that does not exist is named.
    let missing = dir.path().join("nonexistent");
    let output = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .arg("summary")
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains(&*missing.to_string_lossy()), "{said}");
    assert!(output.stdout.is_empty());
}

/// The demo's job (4 processes, groups of collectives and send/receive rounds in three
/// sizes, PXN, rank 2 late): its text fits a terminal of 100 columns, its CSV is the
/// operations table, and a part newer than the merged trace is warned about.
#[test]
fn summary_of_the_demo_job_fits_100_columns_and_warns_of_unmerged_parts() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let status = nccl_sim::job_for_tests(&out)
        .args(["--scenario", "group", "--scenario", "p2p"])
        .args([
            "--iterations",
            "8",
            "--sizes",
            "64K,1M,8M",
            "--speedup",
            "10",
        ])
        .args([
            "--procs",
            "4",
            "--pxn",
            "--late-rank",
            "2",
            "--late-us",
            "5000",
        ])
        .env("NCCL_SCOREP_TOOL", env!("CARGO_BIN_EXE_nccl-scorep"))
        .env("NCCL_SCOREP_PROFILE", "0")
        .env("NCCL_SIM_SHM_DIR", dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    let summary = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
            .arg("summary")
            .args(args)
            .arg(&out)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        (
            String::from_utf8(output.stdout).unwrap(),
            String::from_utf8(output.stderr).unwrap(),
        )
    };
    let (text, warned) = summary(&[]);
    assert!(warned.is_empty(), "{warned}");
    for line in text.lines() {
        assert!(
            line.chars().count() <= 100,
            "{} columns: {line}",
            line.len()
        );
    }
    for label in [
        "bytes/call",
        "time ms",
        "share %",
        "us/call",
        "busbw GB/s",
        "wait %",
    ] {
        assert!(text.contains(label), "{label}: {text}");
    }
    // Three sizes: a row per size bucket under each collective.
    for bucket in ["16-64 KiB", "256 KiB-1 MiB", "1-4 MiB"] {
        assert!(text.contains(bucket), "{bucket}: {text}");
    }
    assert!(text.contains("rank 2 in "), "{text}");

    let (csv, _) = summary(&["--csv"]);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        header[..5],
        ["comm", "comm_hash", "func", "kind", "size_bucket"]
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == header.len()), "{csv}");
    let (json, _) = summary(&["--json"]);
    let json: Value = serde_json::from_str(&json).unwrap();
    let operations = json["operations"].as_array().unwrap();
    let expected: usize = operations
        .iter()
        .map(|o| 1 + o["sizes"].as_array().unwrap().len())
        .sum();
    assert_eq!(rows.len(), expected, "{csv}");
    assert_eq!(rows[0][4], "all");
    assert_eq!(rows[0][2], operations[0]["func"].as_str().unwrap());

    // A part written after the merge is not in the trace.
    std::thread::sleep(Duration::from_millis(20));
    let parts = out.join("parts");
    let first = std::fs::read_dir(&parts)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let late = parts.join("node.99");
    std::fs::create_dir(&late).unwrap();
    for file in ["traces.otf2", "traces.def"] {
        std::fs::copy(first.join(file), late.join(file)).unwrap();
    }
    let (_, warned) = summary(&[]);
    assert!(warned.contains("node.99"), "{warned}");
    assert!(warned.contains("nccl-scorep merge"), "{warned}");
    let (json, _) = summary(&["--json"]);
    let json: Value = serde_json::from_str(&json).unwrap();
    let warnings = json["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{json:#}");
    assert!(warnings[0].as_str().unwrap().contains("node.99"));
}

/// A 2-process, 4-rank job with every event level into rings of 16 records per thread
/// (`NCCL_SCOREP_BUFFER_SIZE=4K`), with `NCCL_SCOREP_ON_FULL=on_full` and event logs;
/// returns its output directory (in `dir`).
fn tiny_ring_job(dir: &std::path::Path, on_full: &str) -> std::path::PathBuf {
    let out = dir.join("run");
    let status = nccl_sim::job_for_tests(&out)
        .args(["--scenario", "single", "--iterations", "40"])
        .args(["--procs", "2", "--ranks", "4"])
        .env("NCCL_SCOREP_TOOL", env!("CARGO_BIN_EXE_nccl-scorep"))
        .env("NCCL_SCOREP_EVENTS", "all")
        .env("NCCL_SCOREP_JSONL", "1")
        .env("NCCL_SCOREP_BUFFER_SIZE", "4K")
        .env("NCCL_SCOREP_ON_FULL", on_full)
        .env("NCCL_SIM_SHM_DIR", dir)
        .status()
        .unwrap();
    assert!(status.success());
    out
}

/// Each process's counters, from the last summary line of its event log.
fn logged_counters(out: &std::path::Path) -> Vec<Value> {
    let mut counters = Vec::new();
    for entry in std::fs::read_dir(out).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            let text = std::fs::read_to_string(&path).unwrap();
            let last = text
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .rfind(|l| l["type"] == "summary")
                .expect("a summary line");
            counters.push(last["counters"].clone());
        }
    }
    assert_eq!(counters.len(), 2, "an event log per process");
    counters
}

/// `nccl-scorep summary` of `out`: its JSON, and its text.
fn summary_of(out: &std::path::Path) -> (Value, String) {
    let run = |json: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"));
        command.arg("summary").arg(out);
        if json {
            command.arg("--json");
        }
        let output = command.output().unwrap();
        assert!(output.status.success());
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    (serde_json::from_str(&run(true)).unwrap(), run(false))
}

/// What the plugin refused or dropped leaves no event in the trace; the summary of the
/// merged trace says how much, added up over the processes, as their event logs count it.
#[test]
fn summary_of_a_merged_trace_counts_what_every_process_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let out = tiny_ring_job(dir.path(), "drop");
    let mut counted = std::collections::BTreeMap::<String, u64>::new();
    for counters in logged_counters(&out) {
        for (name, value) in counters.as_object().unwrap() {
            *counted.entry(name.clone()).or_default() += value.as_u64().unwrap();
        }
    }
    let dropped = counted["ring_full"];
    assert!(dropped > 0, "the tiny rings dropped records: {counted:?}");
    let (summary, text) = summary_of(&out);
    assert_eq!(summary["source"], "trace");
    assert_eq!(
        summary["losses"]["ring_full"], dropped,
        "{}",
        summary["losses"]
    );
    assert_eq!(
        summary["losses"]["lost_stops"], counted["lost_stops"],
        "{}",
        summary["losses"]
    );
    assert!(
        text.contains(&format!("ring_full={dropped}")) && !text.contains("nothing dropped"),
        "{text}"
    );
}

/// With `NCCL_SCOREP_ON_FULL=wait` nothing is dropped, and the summary of the merged trace
/// says how often and how long NCCL's threads waited, as the processes counted it.
#[test]
fn summary_of_a_merged_trace_adds_up_the_waits_of_every_process() {
    let dir = tempfile::tempdir().unwrap();
    let out = tiny_ring_job(dir.path(), "wait");
    let (mut waits, mut total_ns, mut longest_ns, mut dropped) = (0, 0, 0, 0);
    for counters in logged_counters(&out) {
        let counter = |name: &str| counters[name].as_u64().unwrap();
        waits += counter("held_back");
        total_ns += counter("held_back_ns");
        longest_ns = longest_ns.max(counter("held_back_longest_ns"));
        dropped += counter("ring_full");
    }
    assert!(waits > 0, "the tiny rings made the threads wait");
    assert_eq!(dropped, 0, "nothing dropped");
    let (summary, text) = summary_of(&out);
    assert_eq!(summary["source"], "trace");
    assert_eq!(
        summary["held_back"],
        serde_json::json!({"waits": waits, "total_ns": total_ns, "longest_ns": longest_ns}),
    );
    let times = match waits {
        1 => "once".to_owned(),
        n => format!("{n} times"),
    };
    let time_in_nccl_ms = summary["total_time_ms"].as_f64().unwrap();
    println!("the threads waited {times}, {total_ns} ns in all, in {time_in_nccl_ms} ms in NCCL");
    // The summary's times hold that delay: it warns from 1 % of them.
    let warned = summary["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().starts_with("NCCL's threads waited"));
    assert_eq!(
        warned,
        total_ns as f64 / 1e6 >= 0.01 * time_in_nccl_ms,
        "{summary:#}"
    );
    assert!(
        text.contains(&format!("NCCL's threads waited {times}"))
            && text.contains("nothing dropped or refused"),
        "{text}"
    );
}
