//! The plugin never ends the job: a file size limit (`ulimit -f`) smaller than the trace
//! makes the trace incomplete, says so once on stderr, and the application exits normally.

use std::process::Command;

#[test]
fn a_file_size_limit_cuts_the_trace_not_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // 64 blocks of 1 KiB: far less than the trace of 200 collectives with every event.
    let output = Command::new("bash")
        .arg("-c")
        .arg("ulimit -f 64 && exec \"$0\" run --plugin \"$1\" --scenario single --iterations 200")
        .arg(nccl_sim::binary_for_tests())
        .arg(nccl_sim::our_plugin_for_tests())
        .env("NCCL_SCOREP_OUTPUT_DIR", &out)
        .env("NCCL_SCOREP_EVENTS", "all")
        .env("NCCL_SCOREP_AUTO_MERGE", "0")
        .env_remove("NCCL_DEBUG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the job was ended ({:?}): {stderr}",
        output.status
    );
    assert!(stderr.contains("scenario single done"), "{stderr}");
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("File too large"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].starts_with("[NCCL-Score-P] Warning: "), "{stderr}");
}
