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
    let profiler = Arc::new(Profiler::new("2.32".parse().unwrap(), Some(lib.into())));
    let mut config = SimConfig::default();
    config.time.speedup = 10.0;
    let nccl = Nccl::new(profiler, config);
    let mut params = Params::single_process(3, 6);
    params.late = Some((1, Duration::from_millis(3)));
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
    let rows = summary["collectives"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["func"], "AllReduce");
    assert_eq!(rows[0]["nranks"], 3);
    assert_eq!(rows[0]["calls"], 6);
    assert_eq!(rows[0]["incomplete_calls"], 0);
    assert_eq!(rows[0]["bytes"], 1 << 20);
    assert!(rows[0]["mean_skew_us"].as_f64().unwrap() >= 3000.0);
    let late = &summary["late_ranks"][0];
    assert_eq!(late["rank"], 1);
    assert_eq!(late["last_calls"], 6);
    assert!(late["cost_ms"].as_f64().unwrap() >= 6.0 * 3.0);

    let text = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .arg("summary")
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("rank 1 was last in 100% of AllReduce"),
        "{text}"
    );
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
