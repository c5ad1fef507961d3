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
    let rows = summary["collectives"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["func"], "AllReduce");
    assert_eq!(rows[0]["nranks"], 3);
    assert_eq!(rows[0]["calls"], 6);
    assert_eq!(rows[0]["incomplete_calls"], 0);
    assert_eq!(rows[0]["bytes"], 1 << 20);
    let skew = rows[0]["mean_skew_us"].as_f64().unwrap();
    assert!(skew >= 8000.0, "{skew}");
    let late = &summary["late_ranks"][0];
    assert_eq!(late["rank"], 1);
    assert!(late["last_calls"].as_u64().unwrap() >= 5, "{late}");
    assert!(late["cost_ms"].as_f64().unwrap() >= 5.0 * 8.0, "{late}");

    let text = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .arg("summary")
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("rank 1 was last in ") && text.contains("% of AllReduce on comm"),
        "{text}"
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
        from_logs.contains("rank 1 was last in ") && from_logs.contains("% of AllReduce"),
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
    let status = Command::new(nccl_sim::binary_for_tests())
        .args(["run", "--scenario", "single", "--scenario", "p2p"])
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
        .arg("--plugin")
        .arg(nccl_sim::our_plugin_for_tests())
        .env("NCCL_SCOREP_OUTPUT_DIR", &out)
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
    let rows = summary["collectives"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(
        (rows[0]["nranks"].as_u64(), rows[0]["calls"].as_u64()),
        (Some(4), Some(8))
    );
    let late = &summary["late_ranks"][0];
    assert_eq!(late["rank"], 3, "{summary:#}");
    assert!(late["last_share"].as_f64().unwrap() >= 0.75, "{summary:#}");
    let p2p: Vec<(&str, u64)> = summary["point_to_point"]
        .as_array()
        .unwrap()
        .iter()
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
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("no event log"));
}
