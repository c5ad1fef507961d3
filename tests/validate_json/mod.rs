//! `nccl-scorep validate --json` on an archive, for the tests that check what a run wrote.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Runs `nccl-scorep validate --json` on `archive` and asserts that it succeeds without
/// errors, and without warnings unless `warnings_allowed`; returns its report.
pub fn assert_validates(archive: &Path, warnings_allowed: bool) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .arg("validate")
        .arg(archive)
        .arg("--json")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: no JSON report ({e}): {}",
            archive.display(),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert!(output.status.success(), "{}: {report:#}", archive.display());
    assert_eq!(report["errors"], 0, "{}: {report:#}", archive.display());
    if !warnings_allowed {
        assert_eq!(report["warnings"], 0, "{}: {report:#}", archive.display());
    }
    report
}
