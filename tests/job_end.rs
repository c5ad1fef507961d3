//! The end of a job. Under Open MPI's `mpirun`, the last process to finish merges every
//! process's trace part into one archive by itself, with the processes' times on one time
//! base. A process killed mid-run never says it is done: the job is not merged
//! automatically, and `nccl-scorep merge` merges its part with the events it had flushed,
//! from the definitions it had saved, and reports it.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../nccl-sim/tests/otf2_tools/mod.rs"]
mod otf2_tools;
use otf2_tools::{assert_otf2_print_clean, dump};
mod validate_json;
use validate_json::assert_validates;

/// How close a completion must be to the simulator's ground truth, once its process's
/// offset to real time is taken out (one host).
const TIMING_BOUND_NS: i64 = 5_000;

/// AllReduces (and p2p rounds) of the `mpirun` job: 3 ranks each, one completion per rank
/// to judge.
const ITERATIONS: usize = 12;

/// How closely the processes' offsets to real time agree: each process measures it
/// (a pair of clock reads, the narrowest of a few tries), and a busy machine widens it.
const CLOCK_AGREEMENT_NS: i64 = 50_000;

fn nccl_scorep(args: &[&str], path: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .args(args)
        .arg(path)
        .output()
        .unwrap()
}

/// Interval attribute.
fn attr<'a>(interval: &'a Value, name: &str) -> &'a Value {
    &interval["attrs"][name]
}

/// Every ground-truth record the processes wrote into `dir`.
fn truth(dir: &Path) -> Vec<Value> {
    let mut records = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        records.extend(
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()),
        );
    }
    records
}

#[test]
fn a_job_under_mpirun_is_merged_by_its_last_process() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let truth_dir = dir.path().join("truth");
    let output = Command::new("mpirun")
        .args(["-np", "3", "--oversubscribe", "--bind-to", "none"])
        .args(["-x", "NCCL_SCOREP_OUTPUT_DIR", "-x", "NCCL_SCOREP_EVENTS"])
        .args(["-x", "NCCL_SCOREP_TOOL"])
        .arg(nccl_sim::binary_for_tests())
        .args(["run", "--scenario", "single", "--scenario", "p2p"])
        .args(["--iterations", &ITERATIONS.to_string(), "--speedup", "20"])
        .arg("--plugin")
        .arg(nccl_sim::our_plugin_for_tests())
        .arg("--truth-dir")
        .arg(&truth_dir)
        .env("NCCL_SCOREP_OUTPUT_DIR", &out)
        .env("NCCL_SCOREP_TOOL", env!("CARGO_BIN_EXE_nccl-scorep"))
        .env("NCCL_SCOREP_EVENTS", "api,tasks,proxy")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun (Debian package openmpi-bin; scripts/test.sh installs it)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // Nobody ran `nccl-scorep merge`: the archive is there, merged once, from all parts.
    let anchor = out.join("traces.otf2");
    assert!(anchor.exists(), "no merged archive in {}", out.display());
    let report = std::fs::read_to_string(out.join("merge-report.txt")).unwrap();
    assert!(report.starts_with("merged 6 parts"), "{report}");
    assert!(report.contains("2 communicators"), "{report}");
    // Each process ends two communicator lifetimes (a part each); whoever completes the
    // job's set of parts last merges all six.
    let ledger = std::fs::read_to_string(out.join("merge.ledger")).unwrap();
    let last_merge = ledger.lines().rfind(|l| l.starts_with("merged\t")).unwrap();
    assert!(last_merge.ends_with("\t6"), "{ledger}");
    assert_otf2_print_clean(&anchor);
    assert_validates(&anchor, true);

    let trace = dump(&anchor);
    // One communicator per NCCL communicator, with the ops streams of its 3 ranks.
    let comms: BTreeMap<String, Vec<String>> = trace["comms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let members = c["members"].as_array().unwrap().iter();
            let names = members.map(|m| m.as_str().unwrap().to_owned()).collect();
            (c["name"].as_str().unwrap().to_owned(), names)
        })
        .collect();
    assert_eq!(comms.len(), 2, "{comms:#?}");
    for (name, members) in &comms {
        let prefix = name.split(" (0x").next().unwrap();
        let expected: Vec<String> = (0..3).map(|r| format!("{prefix} rank {r} ops")).collect();
        assert_eq!(members, &expected);
    }
    let process_of: BTreeMap<&str, u64> = trace["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["name"].as_str().unwrap(),
                l["id"].as_u64().unwrap() & 0xffff_ffff,
            )
        })
        .collect();
    let processes: std::collections::BTreeSet<u64> = process_of.values().copied().collect();
    assert_eq!(processes.len(), 3, "{processes:?}");

    // The same AllReduce, by (seq), on every rank, and its completion where the ground
    // truth puts it: the processes' clocks agree in the merged archive.
    let mut ends: BTreeMap<u64, BTreeMap<i64, i64>> = BTreeMap::new();
    for op in trace["intervals"].as_array().unwrap() {
        let on_ops = op["loc"].as_str().unwrap().ends_with(" ops");
        if op["region"] == "AllReduce" && on_ops {
            let seq = attr(op, "nccl.seq").as_u64().unwrap();
            let rank = attr(op, "nccl.rank").as_i64().unwrap();
            ends.entry(seq)
                .or_default()
                .insert(rank, op["end"].as_i64().unwrap());
        }
    }
    assert_eq!(ends.len(), ITERATIONS, "{ends:?}");
    assert!(ends.values().all(|by_rank| by_rank.len() == 3), "{ends:?}");
    let mut errors = Vec::new();
    for record in truth(&truth_dir) {
        if record["func"] != "AllReduce" {
            continue;
        }
        let seq = record["seq"].as_u64().unwrap();
        let rank = record["rank"].as_i64().unwrap();
        let end = ends[&seq][&rank];
        let completion = record["completion_ns"].as_i64().unwrap();
        let window = record["reported_ns"].as_i64().unwrap() - completion;
        errors.push(((rank, seq), end - completion, window));
    }
    assert_eq!(errors.len(), 3 * ITERATIONS);
    // Monotonic → real time is one offset per process, measured by each process when it
    // opened and closed its part: take each process's own out, and check that the
    // processes' offsets agree (one host, one monotonic clock).
    let mut by_rank: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for ((rank, _), error, _) in &errors {
        by_rank.entry(*rank).or_default().push(*error);
    }
    let median = |values: &[i64]| {
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        sorted[sorted.len() / 2]
    };
    let offsets: BTreeMap<i64, i64> = by_rank
        .iter()
        .map(|(rank, errors)| (*rank, median(errors)))
        .collect();
    let spread = offsets.values().max().unwrap() - offsets.values().min().unwrap();
    assert!(
        spread <= CLOCK_AGREEMENT_NS,
        "the processes' clocks disagree by {spread} ns: {offsets:?}"
    );
    let mut within = 0;
    for ((rank, seq), error, window) in &errors {
        let error = error - offsets[rank];
        // nccl-sim takes its truth (the host knew the operation complete) right before it
        // calls the stops: a simulator preempted between the two makes the trace's end
        // late, up to when the stops returned, never early, so no trace time is before
        // the bound.
        assert!(
            error >= -TIMING_BOUND_NS,
            "rank {rank} seq {seq}: {} ns before the truth",
            -error
        );
        if error <= window + TIMING_BOUND_NS {
            within += 1;
        }
    }
    assert!(within * 10 >= errors.len() * 9, "{errors:?} {offsets:?}");

    // Sends and receives pair up between processes.
    let rank_of = |comm: &str, loc: &str| comms[comm].iter().position(|m| m == loc).unwrap();
    let mut sends: BTreeMap<(String, usize, usize), usize> = BTreeMap::new();
    let mut recvs: BTreeMap<(String, usize, usize), usize> = BTreeMap::new();
    for m in trace["messages"].as_array().unwrap() {
        let comm = m["comm"].as_str().unwrap().to_owned();
        let loc = m["loc"].as_str().unwrap();
        let me = rank_of(&comm, loc);
        let peer = m["peer"].as_u64().unwrap() as usize;
        assert_ne!(process_of[loc], process_of[comms[&comm][peer].as_str()]);
        if m["kind"] == "send" {
            *sends.entry((comm, me, peer)).or_default() += 1;
        } else {
            *recvs.entry((comm, peer, me)).or_default() += 1;
        }
    }
    assert!(!sends.is_empty());
    assert_eq!(sends, recvs);
}

/// Two processes of one job, started as `nccl-sim --procs` would; the test kills rank 1
/// once it is under way. Rank 0 goes on alone (its collectives stop waiting for rank 1
/// after 5 ms) and ends normally.
#[test]
fn a_process_killed_mid_run_is_reported_and_the_rest_merged() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let job = format!("killed-{}", std::process::id());
    let start = |rank: usize| {
        nccl_sim::job_for_tests(&out)
            .args(["--scenario", "single", "--iterations", "400"])
            .args(["--sizes", "64M", "--peer-patience-ms", "5"])
            .env("NCCL_SIM_SHM_DIR", dir.path())
            .env("NCCL_SIM_RANK", rank.to_string())
            .env("NCCL_SIM_SIZE", "2")
            .env("NCCL_SIM_JOB", &job)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let survivor = start(0);
    let mut victim = start(1);
    let victim_part = |pid: u32| -> Option<PathBuf> {
        std::fs::read_dir(out.join("parts"))
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(&format!(".{pid}")))
    };
    // Under way: its part exists, with a snapshot of its definitions that has its rank
    // (strings are stored as they are), and it has run for a while.
    let deadline = Instant::now() + Duration::from_secs(20);
    let snapshot_saved = |part: Option<PathBuf>| {
        part.and_then(|p| std::fs::read(p.join("snapshot").join("traces.def")).ok())
            .is_some_and(|defs| {
                let name = b"single rank 1 ops";
                defs.windows(name.len()).any(|w| w == name)
            })
    };
    while !snapshot_saved(victim_part(victim.id())) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        victim.try_wait().unwrap().is_none(),
        "rank 1 ended before it was killed: make its run longer"
    );
    let part = victim_part(victim.id()).expect("rank 1 writes its part");
    victim.kill().unwrap();
    victim.wait().unwrap();
    let survived = survivor.wait_with_output().unwrap();
    assert!(
        survived.status.success(),
        "{}",
        String::from_utf8_lossy(&survived.stderr)
    );

    // Rank 1 never said it was done: no automatic merge.
    assert!(!out.join("traces.otf2").exists());
    let ledger = std::fs::read_to_string(out.join("merge.ledger")).unwrap();
    assert!(
        ledger.contains(&format!("done\t{}:{job}\t0", "nccl-sim")),
        "{ledger}"
    );
    assert!(
        !ledger.contains("\t1\n") && !ledger.contains("merged"),
        "{ledger}"
    );

    let merged = nccl_scorep(&["merge"], &out);
    let stdout = String::from_utf8_lossy(&merged.stdout);
    assert!(merged.status.success(), "{stdout}");
    let name = part.file_name().unwrap().to_string_lossy().into_owned();
    assert!(stdout.starts_with("merged 2 parts into"), "{stdout}");
    assert!(
        stdout.contains("merged 1 incomplete part") && stdout.contains(&name),
        "{stdout}"
    );
    let flushed = flushed_events(&stdout);
    let anchor = out.join("traces.otf2");
    assert_otf2_print_clean(&anchor);
    let trace = dump(&anchor);
    let comms = trace["comms"].as_array().unwrap();
    assert_eq!(comms.len(), 1);
    let members: Vec<&str> = comms[0]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert_eq!(
        members,
        ["single rank 0 ops", "single rank 1 ops"],
        "the killed rank is a member (from its saved definitions)"
    );
    let intervals = trace["intervals"].as_array().unwrap();
    let survivor_ops = intervals
        .iter()
        .filter(|i| i["region"] == "AllReduce" && i["loc"] == "single rank 0 ops")
        .count();
    assert_eq!(survivor_ops, 400, "every collective of the survivor");
    // Whatever the killed process had written is there (it writes every second).
    let victim_intervals = intervals
        .iter()
        .filter(|i| i["loc"].as_str().unwrap().contains("rank 1"))
        .count() as u64;
    assert!(
        victim_intervals * 2 <= flushed,
        "{victim_intervals} {flushed}"
    );
}

/// The number in "merged with the N events it had flushed" of a merge's report.
fn flushed_events(report: &str) -> u64 {
    let after = report
        .split("merged with the ")
        .nth(1)
        .unwrap_or_else(|| panic!("no recovered part in {report}"));
    after
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no event count in {report}"))
}

/// A process killed mid-run is merged with the events it had written (it puts them on
/// the disk every second): they read back, nest, lie within its run, and reach to within
/// a few seconds of its end.
#[test]
fn a_killed_process_is_merged_with_the_events_it_had_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let realtime_ns = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i64
    };
    let started = realtime_ns();
    let mut victim = nccl_sim::job_for_tests(&out)
        .args(["--scenario", "single", "--iterations", "10000000"])
        .args(["--sizes", "64K", "--speedup", "1000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once it has written more than a chunk (256 KiB) on some location.
    let written = || -> u64 {
        let Some(part) = std::fs::read_dir(out.join("parts"))
            .ok()
            .and_then(|mut parts| parts.next())
            .and_then(Result::ok)
        else {
            return 0;
        };
        std::fs::read_dir(part.path().join("traces"))
            .map(|files| {
                files
                    .filter_map(Result::ok)
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .max()
                    .unwrap_or(0)
            })
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(180);
    while written() <= 256 * 1024 {
        assert!(
            victim.try_wait().unwrap().is_none(),
            "nccl-sim ended before it wrote a chunk: make its run longer"
        );
        assert!(
            Instant::now() < deadline,
            "no event file grew past a chunk in time"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // And once the part's definitions were saved again after that (`snapshot.clock` is
    // rewritten with them): the ranks' ops streams, whose operations are written when they
    // complete, may have been defined after the snapshot of the proxy lanes' first chunk
    // (a loaded machine), and a killed process's part has only what its last snapshot
    // defined.
    let snapshot_clock = || {
        let part = std::fs::read_dir(out.join("parts"))
            .ok()?
            .next()?
            .ok()?
            .path();
        std::fs::read_to_string(part.join("snapshot.clock")).ok()
    };
    let saved = snapshot_clock();
    while snapshot_clock() == saved {
        assert!(
            victim.try_wait().unwrap().is_none(),
            "nccl-sim ended before it saved its definitions again"
        );
        assert!(Instant::now() < deadline, "no new snapshot in time");
        std::thread::sleep(Duration::from_millis(20));
    }
    victim.kill().unwrap();
    victim.wait().unwrap();
    let killed = realtime_ns();

    let merged = nccl_scorep(&["merge"], &out);
    let stdout = String::from_utf8_lossy(&merged.stdout);
    assert!(merged.status.success(), "{stdout}");
    assert!(stdout.starts_with("merged 1 part into"), "{stdout}");
    assert!(stdout.contains("merged 1 incomplete part"), "{stdout}");
    let flushed = flushed_events(&stdout);
    assert!(flushed > 10_000, "{stdout}");
    let anchor = out.join("traces.otf2");
    assert_otf2_print_clean(&anchor);
    assert_validates(&anchor, true);

    // The Python reader checks that every interval is closed and nests.
    let trace = dump(&anchor);
    let comms = trace["comms"].as_array().unwrap();
    assert_eq!(comms.len(), 1);
    assert_eq!(comms[0]["members"].as_array().unwrap().len(), 4);
    let intervals = trace["intervals"].as_array().unwrap();
    assert!(intervals.len() as u64 * 2 <= flushed);
    assert!(intervals.len() > 1000, "{}", intervals.len());
    let mut last_end = 0;
    for interval in intervals {
        let (start, end) = (
            interval["start"].as_i64().unwrap(),
            interval["end"].as_i64().unwrap(),
        );
        // Real time, from the clock pairs the process saved; 1 ms for the clock reads.
        assert!(
            started - 1_000_000 <= start && start <= end && end <= killed + 1_000_000,
            "{interval} outside the run [{started}, {killed}]"
        );
        last_end = last_end.max(end);
    }
    // It writes every second of what its collector processed; 5 s for a busy machine.
    assert!(
        killed - last_end < 5_000_000_000,
        "the trace ends {} ms before the kill",
        (killed - last_end) / 1_000_000
    );
}

/// Runs a one-process nccl-sim job with a copy of the plugin that has no tool beside it,
/// with `env` added; returns the job's output and its run directory.
fn job_with_a_lone_plugin(
    dir: &Path,
    env: &[(&str, &std::ffi::OsStr)],
) -> (std::process::Output, PathBuf) {
    let lone = dir.join("lib");
    std::fs::create_dir_all(&lone).unwrap();
    let plugin = lone.join("libnccl-profiler-scorep.so");
    std::fs::copy(nccl_sim::our_plugin_for_tests(), &plugin).unwrap();
    let out = dir.join("out");
    let mut command = Command::new(nccl_sim::binary_for_tests());
    command
        .args(["run", "--scenario", "single", "--iterations", "2"])
        .arg("--plugin")
        .arg(&plugin)
        .env("NCCL_SCOREP_OUTPUT_DIR", &out)
        // Nothing named nccl-scorep on the search path.
        .env("PATH", "/usr/bin:/bin")
        .env("NCCL_DEBUG", "WARN");
    for (name, value) in env {
        command.env(name, value);
    }
    (command.output().unwrap(), out)
}

#[test]
fn a_failing_merge_tool_is_reported_and_leaves_the_job_alone() {
    let dir = tempfile::tempdir().unwrap();
    let tool = dir.path().join("failing-tool");
    std::fs::write(&tool, "#!/bin/sh\necho 'disk quota exceeded' >&2\nexit 3\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (output, out) =
        job_with_a_lone_plugin(dir.path(), &[("NCCL_SCOREP_TOOL", tool.as_os_str())]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("automatic merge failed")
            && stderr.contains("exit status: 3: disk quota exceeded")
            && stderr.contains(&format!("run `nccl-scorep merge {}`", out.display())),
        "{stderr}"
    );
    assert!(!out.join("traces.otf2").exists());
    // The part itself is complete, for the merge by hand.
    let parts: Vec<_> = std::fs::read_dir(out.join("parts")).unwrap().collect();
    assert_eq!(parts.len(), 1);
    assert!(parts[0]
        .as_ref()
        .unwrap()
        .path()
        .join("traces.otf2")
        .exists());
}

#[test]
fn without_a_tool_the_merge_is_skipped_with_the_command_to_run() {
    let dir = tempfile::tempdir().unwrap();
    let (output, out) = job_with_a_lone_plugin(dir.path(), &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("the nccl-scorep tool is neither beside the plugin")
            && stderr.contains("NCCL_SCOREP_TOOL"),
        "{stderr}"
    );
    assert!(!out.join("traces.otf2").exists());
    // The same part merges by hand.
    let merged = nccl_scorep(&["merge"], &out);
    assert!(merged.status.success());
    assert!(out.join("traces.otf2").exists());
}
