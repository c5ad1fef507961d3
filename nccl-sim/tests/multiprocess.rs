//! Multi-process jobs: `nccl-sim run --procs N` and under Open MPI's `mpirun`, with our
//! plugin in every process; the event logs of all processes must agree on one job.

use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

mod otf2_tools;

fn our_plugin() -> PathBuf {
    nccl_sim::our_plugin_for_tests()
}

/// Every process's event log lines, by file.
fn logs(dir: &Path) -> Vec<Vec<Value>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        })
        .collect()
}

fn sim_args(out: &Path) -> Vec<String> {
    vec![
        "run".into(),
        "--scenario".into(),
        "single".into(),
        "--scenario".into(),
        "p2p".into(),
        "--iterations".into(),
        "3".into(),
        "--speedup".into(),
        "20".into(),
        "--plugin".into(),
        our_plugin().display().to_string(),
        "--truth-dir".into(),
        out.join("truth").display().to_string(),
    ]
}

/// The checks shared by both launchers.
fn check_job(out: &Path, processes: usize) {
    let logs = logs(out);
    assert_eq!(logs.len(), processes, "one event log per process");
    let mut ranks_by_hash: BTreeMap<String, HashSet<i64>> = BTreeMap::new();
    let mut sends: BTreeMap<(i64, i64), usize> = BTreeMap::new();
    let mut recvs: BTreeMap<(i64, i64), usize> = BTreeMap::new();
    for lines in &logs {
        let comms: Vec<&Value> = lines.iter().filter(|l| l["type"] == "comm").collect();
        assert_eq!(comms.len(), 2, "one comm per scenario");
        for comm in &comms {
            assert_eq!(comm["nranks"], processes as i64);
            ranks_by_hash
                .entry(comm["comm_hash"].as_str().unwrap().to_owned())
                .or_default()
                .insert(comm["rank"].as_i64().unwrap());
        }
        let events: Vec<&Value> = lines.iter().filter(|l| l["type"] == "event").collect();
        let colls = events.iter().filter(|e| e["kind"] == "Coll").count();
        assert_eq!(colls, 3, "3 AllReduce per rank");
        for p in events.iter().filter(|e| e["kind"] == "P2p") {
            let (rank, peer) = (p["rank"].as_i64().unwrap(), p["peer"].as_i64().unwrap());
            if p["func"] == "Send" {
                *sends.entry((rank, peer)).or_default() += 1;
            } else {
                *recvs.entry((peer, rank)).or_default() += 1;
            }
        }
        let summary = lines.iter().rfind(|l| l["type"] == "summary").unwrap();
        assert_eq!(summary["counters"]["ring_full"], 0);
    }
    assert_eq!(
        ranks_by_hash.len(),
        2,
        "every process agrees on the comm hashes"
    );
    for ranks in ranks_by_hash.values() {
        assert_eq!(ranks.len(), processes, "each comm has every rank once");
    }
    assert_eq!(
        sends, recvs,
        "every send has its receive in another process"
    );
    let truth = std::fs::read_dir(out.join("truth")).unwrap().count();
    assert_eq!(truth, processes, "ground truth from every process");
}

#[test]
fn procs_forks_one_process_per_rank() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let status = Command::new(env!("CARGO_BIN_EXE_nccl-sim"))
        .args(sim_args(&out))
        .args(["--procs", "3"])
        .env("NCCL_SCOREP_OUTPUT_DIR", &out)
        .env("NCCL_SCOREP_JSONL", "1")
        .status()
        .unwrap();
    assert!(status.success());
    check_job(&out, 3);
}

#[test]
fn mpirun_launches_a_job() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = Command::new("mpirun")
        .args(["-np", "3", "--oversubscribe", "--bind-to", "none"])
        .args(["-x", "NCCL_SCOREP_OUTPUT_DIR", "-x", "NCCL_SCOREP_JSONL"])
        .arg(env!("CARGO_BIN_EXE_nccl-sim"))
        .args(sim_args(&out))
        .env("NCCL_SCOREP_OUTPUT_DIR", &out)
        .env("NCCL_SCOREP_JSONL", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun (Debian package openmpi-bin; scripts/test.sh installs it)");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("(openmpi)"),
        "the launcher is recognised: {stderr}"
    );
    check_job(&out, 3);
}

/// PXN for real: each process's sends are progressed by the other process's proxy, which
/// records them as foreign ops whose parent values are Coll handles of the originator.
#[test]
fn pxn_sends_are_progressed_by_the_other_process() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let status = Command::new(env!("CARGO_BIN_EXE_nccl-sim"))
        .args(sim_args(&out))
        .args(["--procs", "2", "--pxn"])
        .env("NCCL_SCOREP_OUTPUT_DIR", &out)
        .env("NCCL_SCOREP_JSONL", "1")
        .env("NCCL_SCOREP_EVENTS", "all")
        .env("NCCL_SIM_SHM_DIR", dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    let logs = logs(&out);
    assert_eq!(logs.len(), 2);
    let pid_of = |lines: &Vec<Value>| {
        lines.iter().find(|l| l["type"] == "header").unwrap()["pid"]
            .as_i64()
            .unwrap()
    };
    for (i, lines) in logs.iter().enumerate() {
        let other = &logs[1 - i];
        let other_pid = pid_of(other);
        let other_ids: HashSet<&str> = other
            .iter()
            .filter(|l| l["type"] == "event" && (l["kind"] == "Coll" || l["kind"] == "P2p"))
            .map(|l| l["id"].as_str().unwrap())
            .collect();
        let foreign: Vec<&Value> = lines
            .iter()
            .filter(|l| {
                l["type"] == "event" && l["kind"] == "ProxyOp" && l.get("foreign").is_some()
            })
            .collect();
        assert!(
            !foreign.is_empty(),
            "process {i} progressed the other's sends"
        );
        for op in &foreign {
            assert_eq!(op["foreign"]["pid"], other_pid);
            assert_eq!(op["is_send"], true);
            let parent = op["parent"]["value"].as_str().unwrap();
            assert!(
                other_ids.contains(parent),
                "{parent} is a task of the originator"
            );
        }
        let local_sends = lines
            .iter()
            .filter(|l| {
                l["type"] == "event" && l["kind"] == "ProxyOp" && l.get("foreign").is_none()
            })
            .filter(|l| l["is_send"] == true)
            .count();
        assert_eq!(local_sends, 0, "sends all went through the other process");
        // One summary per scenario (each ends with the process's last finalize).
        let counted: u64 = lines
            .iter()
            .filter(|l| l["type"] == "summary")
            .map(|l| l["counters"]["pxn_foreign_ops"].as_u64().unwrap())
            .sum();
        assert_eq!(counted, foreign.len() as u64);

        // The trace parts of this process show the same foreign operations, on locations
        // of their own, carrying the originator's pid and task handle for the merge.
        let pid = pid_of(lines);
        let mut traced = 0;
        for part in std::fs::read_dir(out.join("parts")).unwrap() {
            let part = part.unwrap().path();
            let name = part.file_name().unwrap().to_string_lossy().into_owned();
            if name.split('.').nth(1) != Some(pid.to_string().as_str()) {
                continue;
            }
            let anchor = part.join("traces.otf2");
            otf2_tools::assert_otf2_print_clean(&anchor);
            let trace = otf2_tools::dump(&anchor);
            for interval in trace["intervals"].as_array().unwrap() {
                let location = interval["loc"].as_str().unwrap();
                if interval["region"] == "proxy send" && location.starts_with("PXN for pid") {
                    assert!(location.starts_with(&format!("PXN for pid {other_pid} ")));
                    assert_eq!(interval["attrs"]["nccl.pid"], other_pid);
                    let parent = format!(
                        "{:#x}",
                        interval["attrs"]["nccl.pxn_parent"].as_u64().unwrap()
                    );
                    assert!(other_ids.contains(parent.as_str()), "{parent}");
                    traced += 1;
                }
            }
        }
        assert_eq!(
            traced,
            foreign.len(),
            "process {i}: foreign ops in the trace"
        );
    }
}

/// Ranks in different processes meet per collective: nobody completes before the late
/// rank (in another process) arrived.
#[test]
fn a_late_process_holds_back_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let truth = dir.path().join("truth");
    let status = Command::new(env!("CARGO_BIN_EXE_nccl-sim"))
        .args([
            "run",
            "--scenario",
            "single",
            "--iterations",
            "4",
            "--speedup",
            "20",
        ])
        .args(["--late-rank", "2", "--late-us", "3000", "--procs", "3"])
        .arg("--truth-dir")
        .arg(&truth)
        .arg("--plugin")
        .arg(our_plugin())
        .env("NCCL_SCOREP_OUTPUT_DIR", &out)
        .env("NCCL_SCOREP_JSONL", "1")
        .env("NCCL_SIM_SHM_DIR", dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    let mut records: Vec<Value> = Vec::new();
    for entry in std::fs::read_dir(&truth).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        records.extend(
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()),
        );
    }
    assert_eq!(records.len(), 12, "3 ranks x 4 collectives");
    for seq in 0..4 {
        let of_seq: Vec<&Value> = records.iter().filter(|r| r["seq"] == seq).collect();
        let late = of_seq.iter().find(|r| r["rank"] == 2).unwrap()["enqueue_start_ns"]
            .as_u64()
            .unwrap();
        for r in &of_seq {
            assert!(r["gpu_stop_ns"].as_u64().unwrap() > late, "seq {seq}: {r}");
        }
    }
    let leftover: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".rendezvous"))
        .collect();
    assert!(
        leftover.is_empty(),
        "the rendezvous table is removed at the end"
    );
}

/// `--interval-us`: the ranks of different processes agree on one start, then call each
/// collective one interval after the previous one's last rank arrived; the late rank that
/// much after the others at every call.
#[test]
fn paced_processes_call_an_interval_after_the_last_rank() {
    const INTERVAL_MS: u64 = 20;
    const LATE_MS: u64 = 5;
    const CALLS: usize = 9;
    let dir = tempfile::tempdir().unwrap();
    let truth = dir.path().join("truth");
    let status = Command::new(env!("CARGO_BIN_EXE_nccl-sim"))
        .args(["run", "--scenario", "single"])
        .args(["--iterations", &CALLS.to_string()])
        .args(["--interval-us", &(INTERVAL_MS * 1000).to_string()])
        .args([
            "--late-rank",
            "2",
            "--late-us",
            &(LATE_MS * 1000).to_string(),
        ])
        .args(["--procs", "3", "--speedup", "20"])
        .arg("--truth-dir")
        .arg(&truth)
        .arg("--plugin")
        .arg(our_plugin())
        .env("NCCL_SCOREP_OUTPUT_DIR", dir.path().join("out"))
        .env("NCCL_SIM_SHM_DIR", dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    // arrivals[seq][rank], ms.
    let mut arrivals = [[f64::NAN; 3]; CALLS];
    for entry in std::fs::read_dir(&truth).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for record in text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
        {
            let (seq, rank) = (record["seq"].as_u64().unwrap(), record["rank"].as_u64());
            arrivals[seq as usize][rank.unwrap() as usize] =
                record["enqueue_start_ns"].as_u64().unwrap() as f64 / 1e6;
        }
    }
    // On medians over the calls: a loaded host delays a process's wake-up by milliseconds
    // now and then.
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    assert!(
        arrivals.iter().flatten().all(|a| a.is_finite()),
        "{arrivals:?}"
    );
    let first = |seq: usize| arrivals[seq][0].min(arrivals[seq][1]);
    // Ranks 0 and 1 (two processes) at one deadline …
    let apart = median(arrivals.iter().map(|a| (a[0] - a[1]).abs()).collect());
    assert!(apart < 1.0, "{apart} ms apart: {arrivals:?}");
    // … an interval after the late rank's previous call …
    let since = median(
        (1..CALLS)
            .map(|seq| first(seq) - arrivals[seq - 1][2])
            .collect(),
    );
    assert!(
        since > INTERVAL_MS as f64 - 0.5 && since < INTERVAL_MS as f64 + 2.0,
        "{since} ms after the last call, not {INTERVAL_MS}: {arrivals:?}"
    );
    // … which comes LATE_MS after theirs.
    let late = median(
        (0..CALLS)
            .map(|seq| arrivals[seq][2] - first(seq))
            .collect(),
    );
    assert!(
        late > LATE_MS as f64 - 0.5 && late < LATE_MS as f64 + 2.0,
        "rank 2 {late} ms late, not {LATE_MS}: {arrivals:?}"
    );
}
