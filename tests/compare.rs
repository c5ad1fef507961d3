//! `nccl-scorep compare` on nccl-sim runs: a planted slowdown (a smaller simulated
//! bandwidth) is a regression of the right operation and size; runs of one configuration
//! with different seeds show none.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

mod profile_reader;
use profile_reader::{cube_dump_at_root, cube_tools_accept, per_column, read_with_pycubexr};

const TOOL: &str = env!("CARGO_BIN_EXE_nccl-scorep");

/// One 4-rank job of AllReduce calls. Simulated time runs ten times slower than real
/// time, so that a busy machine's scheduling delays stay small against the operations.
fn run(dir: &Path, name: &str, seed: u64, extra: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let status = nccl_sim::job_for_tests(&out)
        .args(["--scenario", "single", "--iterations", "24"])
        .args([
            "--sizes",
            "4M,16M",
            "--speedup",
            "0.1",
            "--seed",
            &seed.to_string(),
        ])
        .args(extra)
        .env("NCCL_SCOREP_PROFILE", "0")
        .env("NCCL_SCOREP_TOOL", TOOL)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(out.join("traces.otf2").is_file());
    out
}

/// `nccl-scorep compare A B --json` run in A's directory (where the difference cube goes).
fn compare(a: &Path, b: &Path) -> Value {
    compare_with(a, b, &[])
}

fn compare_with(a: &Path, b: &Path, extra: &[&str]) -> Value {
    let output = Command::new(TOOL)
        .arg("compare")
        .arg(a)
        .arg(b)
        .arg("--json")
        .args(extra)
        .current_dir(a.parent().unwrap())
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
        .args(["compare", "--fail-on-regression", "--no-diff"])
        .arg(&base)
        .arg(&slow)
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(1));
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("REGRESSION"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");

    profiles_and_their_difference(dir.path(), &base, &slow, &comparison);
}

/// The sum of `metric` over every location at the call paths ending in `region` with the
/// parameter `nccl.bytes` = `bucket`.
fn sum_at(profile: &Value, metric: &str, region: &str, bucket: &str) -> f64 {
    let cnodes: Vec<u64> = profile["cnodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["path"].as_array().unwrap().last().unwrap() == region
                && c["parameters"]["nccl.bytes"] == bucket
        })
        .map(|c| c["id"].as_u64().unwrap())
        .collect();
    assert!(!cnodes.is_empty(), "no {region} [{bucket}]");
    profile["values"][metric].as_array().map_or(0.0, |rows| {
        rows.iter()
            .filter(|r| cnodes.contains(&r[0].as_u64().unwrap()))
            .map(|r| r[2].as_f64().unwrap())
            .sum()
    })
}

/// The difference cube `compare` wrote is B − A of the two runs' profiles, and profiles
/// compare too (from sums, untested).
fn profiles_and_their_difference(dir: &Path, base: &Path, slow: &Path, comparison: &Value) {
    assert_eq!(comparison["difference_cube"], "base-vs-slow.cubex");
    let diff = dir.join("base-vs-slow.cubex");
    assert!(diff.is_file());
    for run in [base, slow] {
        let status = Command::new(TOOL).arg("profile").arg(run).output().unwrap();
        assert!(status.status.success(), "{status:?}");
    }
    let (pa, pb) = (
        read_with_pycubexr(&base.join("profile.cubex")),
        read_with_pycubexr(&slow.join("profile.cubex")),
    );
    let difference = read_with_pycubexr(&diff);
    assert!(
        difference["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["dtype"] == "DOUBLE"),
        "{:#}",
        difference["metrics"]
    );
    for bucket in ["4-16 MiB", "16-64 MiB"] {
        let want = sum_at(&pb, "execution_time", "AllReduce", bucket)
            - sum_at(&pa, "execution_time", "AllReduce", bucket);
        let got = sum_at(&difference, "execution_time", "AllReduce", bucket);
        assert!(want > 0.0, "B is slower at {bucket}");
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{bucket}: {got} vs {want}"
        );
        // The same calls in both runs.
        assert_eq!(sum_at(&difference, "visits", "AllReduce", bucket), 0.0);
    }
    // The difference has the runs' locations, matched: not one set per run.
    assert_eq!(
        difference["locations"].as_array().unwrap().len(),
        pb["locations"].as_array().unwrap().len()
    );

    // Profiles: the same groups, from sums, with no verdict stronger than "slower".
    let from_profiles = compare_with(
        &base.join("profile.cubex"),
        &slow.join("profile.cubex"),
        &["--no-diff"],
    );
    assert_eq!(from_profiles["tested"], false);
    assert!(from_profiles["difference_cube"].is_null());
    assert_eq!(from_profiles["regressions"], 0);
    let rows = from_profiles["rows"].as_array().unwrap();
    let row = rows.iter().find(|r| r["bucket"] == "16-64 MiB").unwrap();
    assert_eq!(row["verdict"], "slower", "{from_profiles:#}");
    let traced = comparison["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["bucket"] == "16-64 MiB")
        .unwrap();
    assert_eq!(row["a"]["calls"], traced["a"]["calls"]);
    assert!(row["change"].as_f64().unwrap() > 1.0, "{row:#}");
    // A trace against a profile is compared from sums too.
    let mixed = compare_with(base, &slow.join("profile.cubex"), &["--no-diff"]);
    assert_eq!(mixed["tested"], false);
    assert_eq!(mixed["rows"].as_array().unwrap().len(), rows.len());
    // A difference is not a run.
    let output = Command::new(TOOL)
        .arg("compare")
        .arg(base)
        .arg(&diff)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("is the difference of two runs, not a run"),
        "{stderr}"
    );

    cube_tools_agree(
        &diff,
        &difference,
        &slow.join("profile.cubex"),
        &base.join("profile.cubex"),
    );
}

/// CubeLib's tools, when they are on PATH, read the difference cube, and `cube_dump`
/// gives the execution time per location that pycubexr gives. CubeLib's own `cube_diff`
/// of the two profiles (`-c`: it cannot match the system trees of two runs, whose process
/// and thread names differ, and keeps both runs' locations) has the same totals.
fn cube_tools_agree(diff: &Path, difference: &Value, minuend: &Path, subtrahend: &Path) {
    if !cube_tools_accept(diff) {
        return;
    }
    let by_cube_diff = diff.with_file_name("by-cube_diff.cubex");
    let output = Command::new("cube_diff")
        .arg("-c")
        .arg(minuend)
        .arg(subtrahend)
        .arg("-o")
        .arg(&by_cube_diff)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metrics = "execution_time,visits,wait_for_last_rank";
    let totals = |cubex: &Path| {
        cube_dump_at_root(cubex, metrics)
            .into_values()
            .fold(vec![0.0; 3], |sums, values| {
                sums.iter().zip(values).map(|(s, v)| s + v).collect()
            })
    };
    let (ours, theirs) = (totals(diff), totals(&by_cube_diff));
    for (ours, theirs) in ours.iter().zip(&theirs) {
        // cube_dump prints six significant digits per location.
        assert!(
            (ours - theirs).abs() <= 1e-4 * theirs.abs().max(1e-2),
            "{ours} vs {theirs}"
        );
    }
    let by_cube_dump = cube_dump_at_root(diff, "execution_time");
    let by_pycubexr = per_column(difference, "execution_time");
    assert_eq!(by_cube_dump.len(), by_pycubexr.len(), "{by_cube_dump:?}");
    for (location, values) in by_cube_dump {
        let (value, want) = (values[0], by_pycubexr[location]);
        // cube_dump prints six significant digits.
        assert!(
            (value - want).abs() <= 1e-5 * want.abs().max(1e-3),
            "{location}: {value} vs {want}"
        );
    }
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
