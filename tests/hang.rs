//! Hang diagnosis while the job runs: 4-process nccl-sim jobs under Open MPI's `mpirun`
//! where one rank holds back before a collective, or one rank's kernel does not finish.
//! `nccl-scorep status` names the rank, the communicator, the sequence number and the
//! state while it lasts; the hang timeout and the report signal write their reports; the
//! job then goes on and ends with a valid trace.

use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long the planted hang lasts: long enough to be seen on 2 loaded cores, short
/// enough for the suite.
const HANG_MS: &str = "5000";

/// Starts `mpirun -np 4` nccl-sim, 5 AllReduces per rank, with `sim_args` and `env`.
fn job(out: &Path, sim_args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut command = Command::new("mpirun");
    command
        .args(["-np", "4", "--oversubscribe", "--bind-to", "none"])
        .args(["-x", "NCCL_SCOREP_OUTPUT_DIR", "-x", "NCCL_SCOREP_TOOL"])
        .args(["-x", "NCCL_SCOREP_PROFILE"]);
    for (name, value) in env {
        command.args(["-x", name]).env(name, value);
    }
    command
        .arg(nccl_sim::binary_for_tests())
        .args(["run", "--scenario", "single", "--iterations", "5"])
        .args(sim_args)
        .arg("--plugin")
        .arg(nccl_sim::our_plugin_for_tests())
        .env("NCCL_SCOREP_OUTPUT_DIR", out)
        .env("NCCL_SCOREP_TOOL", env!("CARGO_BIN_EXE_nccl-scorep"))
        .env("NCCL_SCOREP_PROFILE", "0")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun (Debian package openmpi-bin; scripts/test.sh installs it)")
}

fn status(out: &Path, json: bool) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"));
    command.arg("status");
    if json {
        command.arg("--json");
    }
    command.arg(out).output().unwrap()
}

/// Polls `status --json` until `seen` holds of it (the hang has set in), for at most the
/// hang's length.
fn status_when(out: &Path, seen: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    let mut last = Value::Null;
    while start.elapsed() < Duration::from_millis(HANG_MS.parse().unwrap()) {
        let output = status(out, true);
        if output.status.code() == Some(3) {
            last = serde_json::from_slice(&output.stdout).unwrap();
            if seen(&last) {
                return last;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the hang never showed in `nccl-scorep status`; last: {last:#}");
}

/// The communicator's longest unfinished operation has been in its state for over 1 s
/// (the job's other operations take milliseconds).
fn lasted_a_second(comm: &Value) -> bool {
    comm["longest_unfinished"]["for_ns"]
        .as_u64()
        .is_some_and(|ns| ns > 1_000_000_000)
}

fn finish(child: Child) -> String {
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    stderr
}

fn hang_reports(out: &Path) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("nccl-scorep-hang-") && name.ends_with(".txt")
        })
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

/// After the hang the job finished normally: every rank reached the last collective,
/// nothing is unfinished, and the merged trace is valid.
fn assert_job_went_on(out: &Path) {
    let after = status(out, false);
    let text = String::from_utf8_lossy(&after.stdout);
    assert_eq!(after.status.code(), Some(0), "{text}");
    assert!(
        text.contains("  ranks 0-3: last collective seq 4, finalized (4 ranks on "),
        "{text}"
    );
    assert!(
        text.contains("every recorded operation completed"),
        "{text}"
    );
    let validate = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .arg("validate")
        .arg(out)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&validate.stdout);
    assert!(validate.status.success(), "{report}");
    assert!(report.lines().any(|l| l.trim() == "valid"), "{report}");
}

#[test]
fn a_rank_that_never_enters_a_collective_is_named_and_the_hang_timeout_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let child = job(
        &out,
        &[
            "--stall-rank",
            "3",
            "--stall-at",
            "2",
            "--stall-ms",
            HANG_MS,
        ],
        &[("NCCL_SCOREP_HANG_TIMEOUT", "1")],
    );
    // A running job is behind for a moment at every collective: a hang is what lasts.
    let seen = status_when(&out, |s| {
        let comm = &s["communicators"][0];
        comm["not_arrived"]["seq"] == 2 && lasted_a_second(comm)
    });
    let comm = &seen["communicators"][0];
    assert_eq!(seen["schema"], "nccl-scorep-status/2");
    assert_eq!(comm["nranks"], 4);
    assert_eq!(
        comm["not_arrived"]["ranks"],
        serde_json::json!([3]),
        "{seen:#}"
    );
    assert_eq!(comm["not_arrived"]["seq"], 2);
    assert_eq!(comm["not_arrived"]["func"], "AllReduce");
    let waiting = &comm["longest_unfinished"];
    assert_eq!(waiting["seq"], 2, "{seen:#}");
    assert_ne!(waiting["rank"], 3);
    let comm_hash = comm["comm_hash"].as_str().unwrap().to_owned();

    let text = String::from_utf8_lossy(&status(&out, false).stdout).into_owned();
    assert!(
        text.contains(&format!("communicator {comm_hash} (4 ranks)")),
        "{text}"
    );
    assert!(
        text.contains(
            "not arrived: rank 3 has not entered AllReduce seq 2 that the others wait in"
        ),
        "{text}"
    );
    assert!(
        text.contains("  ranks 0-2: last collective seq 2 (3 ranks on "),
        "{text}"
    );
    assert!(
        text.contains("  rank 3: last collective seq 1 (pid "),
        "{text}"
    );

    let stderr = finish(child);
    // The three waiting ranks' collective passed the 1 s timeout; rank 3's never started.
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("NCCL_SCOREP_HANG_TIMEOUT"))
        .collect();
    assert_eq!(warnings.len(), 3, "{stderr}");
    for line in &warnings {
        assert!(
            line.starts_with("[NCCL-Score-P] Warning: 1 operation(s) unfinished for more than 1 s"),
            "{line}"
        );
        assert!(line.contains("hang report in "), "{line}");
    }
    let reports = hang_reports(&out);
    assert_eq!(reports.len(), 3);
    for report in &reports {
        assert!(
            report.contains(&format!("communicator {comm_hash} (4 ranks)")),
            "{report}"
        );
        assert!(
            report.contains(
                "not arrived: rank 3 has not entered AllReduce seq 2 that the others wait in"
            ),
            "{report}"
        );
        assert!(report.contains("AllReduce seq 2 ("), "{report}");
    }
    assert_job_went_on(&out);
}

#[test]
fn a_kernel_that_does_not_finish_is_named_and_the_signal_reports_it_without_stopping_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let child = job(
        &out,
        &["--hang-rank", "2", "--hang-seq", "3", "--hang-ms", HANG_MS],
        &[("NCCL_SCOREP_SIGNAL", "USR2")],
    );
    let seen = status_when(&out, |s| {
        let comm = &s["communicators"][0];
        comm["longest_unfinished"]["state"] == "running" && lasted_a_second(comm)
    });
    let comm = &seen["communicators"][0];
    let stuck = &comm["longest_unfinished"];
    assert_eq!(stuck["rank"], 2, "{seen:#}");
    assert_eq!(stuck["seq"], 3);
    assert_eq!(stuck["func"], "AllReduce");
    assert!(stuck["gpu_start_ns"].as_u64().unwrap() > 0);
    let text = String::from_utf8_lossy(&status(&out, false).stdout).into_owned();
    assert!(
        text.contains("longest unfinished: rank 2 AllReduce seq 3 (1048576 bytes) started on the GPU but not completed"),
        "{text}"
    );

    // The report on demand, from the stuck rank's process.
    let pid = comm["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rank"] == 2)
        .unwrap()["pid"]
        .to_string();
    let kill = Command::new("kill").args(["-USR2", &pid]).status().unwrap();
    assert!(kill.success());
    let start = Instant::now();
    while hang_reports(&out).is_empty() && start.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let reports = hang_reports(&out);
    assert_eq!(reports.len(), 1, "only the signalled process reports");
    assert!(
        reports[0].starts_with(&format!("nccl-scorep hang report of process {pid} on ")),
        "{}",
        reports[0]
    );
    assert!(
        reports[0].contains(
            "rank 2 AllReduce seq 3 (1048576 bytes) started on the GPU but not completed"
        ),
        "{}",
        reports[0]
    );

    let stderr = finish(child);
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.starts_with(
                "[NCCL-Score-P] Warning: a hang report was asked for by signal; hang report in "
            ))
            .count(),
        1,
        "{stderr}"
    );
    assert_job_went_on(&out);
}

#[test]
fn a_send_step_waiting_on_the_network_is_named_with_its_peer_and_step() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let child = job(
        &out,
        &[
            "--hang-rank",
            "1",
            "--hang-seq",
            "2",
            "--hang-ms",
            HANG_MS,
            "--hang-in",
            "proxy",
        ],
        &[("NCCL_SCOREP_EVENTS", "default,proxy_step")],
    );
    let seen = status_when(&out, |s| {
        let comm = &s["communicators"][0];
        comm["longest_unfinished"]["state"] == "proxy" && lasted_a_second(comm)
    });
    let stuck = &seen["communicators"][0]["longest_unfinished"];
    assert_eq!(
        (stuck["rank"].as_i64(), stuck["seq"].as_i64()),
        (Some(1), Some(2)),
        "{seen:#}"
    );
    let proxy = &stuck["proxy"];
    assert_eq!(proxy["direction"], "send", "{seen:#}");
    assert_eq!(proxy["waiting_on"], "network");
    // nccl-sim's ring: rank 1 sends to rank 2; the first of its 4 steps waits.
    assert_eq!(proxy["peer"], 2);
    assert_eq!(proxy["channel"], 0);
    assert_eq!(
        (proxy["steps_done"].as_u64(), proxy["steps"].as_u64()),
        (Some(0), Some(4))
    );
    assert_eq!(proxy["step_waiting"], true);
    assert_eq!(stuck["since_ns"], proxy["since_ns"]);
    let text = String::from_utf8_lossy(&status(&out, false).stdout).into_owned();
    assert!(
        text.contains(
            "longest unfinished: rank 1 AllReduce seq 2 (65536 bytes) done on the GPU, its \
             proxy operations not, for "
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "    proxy send to rank 2 on channel 0, 0 of 4 steps done, one waiting: waiting on \
             the network, for "
        ),
        "{text}"
    );
    finish(child);
    assert_job_went_on(&out);
}

#[test]
fn status_says_when_there_is_no_recorder_file_or_a_damaged_one() {
    let dir = tempfile::tempdir().unwrap();
    let empty = status(dir.path(), false);
    assert_eq!(empty.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&empty.stderr);
    assert!(
        stderr.contains("no flight recorder file (nccl-scorep-flight-*.bin) in"),
        "{stderr}"
    );
    let damaged = dir.path().join("nccl-scorep-flight-node0-12.bin");
    std::fs::write(&damaged, vec![7u8; 200]).unwrap();
    let output = status(dir.path(), true);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "{}: not a flight recorder file (wrong magic)",
            damaged.display()
        )),
        "{stderr}"
    );
}

/// A process whose communicators were all destroyed and which then created new ones
/// wrote a second part; its recorder file goes on, so `status` after the job still shows
/// the first part's communicator beside the second's, every rank finalized.
#[test]
fn the_recorder_file_keeps_the_communicators_of_earlier_parts() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let run = nccl_sim::job_for_tests(&out)
        .args(["--scenario", "group", "--scenario", "p2p"])
        .args(["--ranks", "2", "--iterations", "2"])
        .env("NCCL_SCOREP_AUTO_MERGE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(run);
    let parts = std::fs::read_dir(out.join("parts")).unwrap().count();
    assert_eq!(parts, 2, "one part per scenario");
    let after = status(&out, true);
    assert_eq!(after.status.code(), Some(0));
    let json: Value = serde_json::from_slice(&after.stdout).unwrap();
    let comms = json["communicators"].as_array().unwrap();
    assert_eq!(comms.len(), 2, "{json:#}");
    for comm in comms {
        let ranks = comm["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), 2, "{comm:#}");
        assert!(ranks.iter().all(|r| r["finalized"] == true), "{comm:#}");
    }
}
