//! `nccl-scorep compare` on nccl-sim runs: a planted slowdown (a smaller simulated
//! bandwidth) is a regression of the right operation and size; runs of one configuration
//! with different seeds show none.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const TOOL: &str = env!("CARGO_BIN_EXE_nccl-scorep");

/// One 4-rank job of AllReduce calls. Simulated time runs ten times slower than real
/// time, so that a busy machine's scheduling delays stay small against the operations.
fn run(dir: &Path, name: &str, seed: u64, extra: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let status = Command::new(nccl_sim::binary_for_tests())
        .args(["run", "--scenario", "single", "--iterations", "24"])
        .args([
            "--sizes",
            "4M,16M",
            "--speedup",
            "0.1",
            "--seed",
            &seed.to_string(),
        ])
        .args(extra)
        .arg("--plugin")
        .arg(nccl_sim::our_plugin_for_tests())
        .env("NCCL_SCOREP_OUTPUT_DIR", &out)
        .env("NCCL_SCOREP_PROFILE", "0")
        .env("NCCL_SCOREP_TOOL", TOOL)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(out.join("traces.otf2").is_file());
    out
}

fn compare(a: &Path, b: &Path) -> Value {
    let output = Command::new(TOOL)
        .arg("compare")
        .arg(a)
        .arg(b)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn a_planted_slowdown_is_a_regression_of_its_operation_and_size() {
    let dir = tempfile::tempdir().unwrap();
    let base = run(dir.path(), "base", 1, &[]);
    let slow = run(dir.path(), "slow", 2, &["--bandwidth-gbs", "4"]);
    let comparison = compare(&base, &slow);
    assert_eq!(comparison["format_version"], 1);
    let rows = comparison["rows"].as_array().unwrap();
    let regressions: Vec<(&str, &str)> = rows
        .iter()
        .filter(|r| r["verdict"] == "regression")
        .map(|r| (r["func"].as_str().unwrap(), r["bucket"].as_str().unwrap()))
        .collect();
    // 16 MiB moves 5 × slower; 4 MiB too, with the latency a smaller share.
    assert!(
        regressions.contains(&("AllReduce", "16-64 MiB")),
        "{comparison:#}"
    );
    assert!(
        regressions.iter().all(|(func, _)| *func == "AllReduce"),
        "{comparison:#}"
    );
    let row = rows.iter().find(|r| r["bucket"] == "16-64 MiB").unwrap();
    assert!(row["change"].as_f64().unwrap() > 1.0, "{row:#}");
    assert!(row["p_value"].as_f64().unwrap() < 0.001);
    assert!(row["b"]["busbw_gbs"].as_f64().unwrap() < row["a"]["busbw_gbs"].as_f64().unwrap());
    // The other way round it is an improvement; --fail-on-regression says so by its status.
    let back = compare(&slow, &base);
    assert!(back["rows"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["bucket"] == "16-64 MiB" && r["verdict"] == "improvement"));
    let status = Command::new(TOOL)
        .args(["compare", "--fail-on-regression"])
        .arg(&base)
        .arg(&slow)
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(1));
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("REGRESSION"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
}

#[test]
fn runs_of_one_configuration_with_other_seeds_show_no_regression() {
    let dir = tempfile::tempdir().unwrap();
    for pair in 0..10u64 {
        let a = run(dir.path(), &format!("a{pair}"), 2 * pair + 11, &[]);
        let b = run(dir.path(), &format!("b{pair}"), 2 * pair + 12, &[]);
        let comparison = compare(&a, &b);
        assert_eq!(comparison["regressions"], 0, "pair {pair}: {comparison:#}");
        assert_eq!(comparison["improvements"], 0, "pair {pair}: {comparison:#}");
        let rows = comparison["rows"].as_array().unwrap();
        assert_eq!(
            rows.len(),
            2,
            "both size buckets in both runs: {comparison:#}"
        );
        std::fs::remove_dir_all(a).unwrap();
        std::fs::remove_dir_all(b).unwrap();
    }
}

#[test]
fn compare_says_what_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(TOOL)
        .arg("compare")
        .arg(dir.path().join("a"))
        .arg(dir.path().join("b"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("does not exist"), "{stderr}");
}
