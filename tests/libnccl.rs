//! nccl-sim's CPU-only libnccl: a real C MPI+NCCL program (`tests/c/mpi_nccl_app.c`),
//! compiled with `mpicc` against our `nccl.h` and `libnccl.so`, runs under `mpirun -np 4`
//! with our plugin, computes the right results, and leaves the same trace content as
//! nccl-sim's `mpi-app` scenario (the same NCCL calls) under `mpirun`: the same events per
//! communicator size, rank, kind, operation and parent, and the same collective records
//! and messages in the merged OTF2 trace.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../nccl-sim/tests/otf2_tools/mod.rs"]
mod otf2_tools;

const RANKS: i64 = 4;
const ITERATIONS: usize = 5;

/// ProxyCtrl events (the proxy thread sleeping, waking, appending, idling) follow the
/// timing of the work, which differs between any two runs: they are left out of the
/// comparison, everything else must match.
const PROXY_CTRL_REGIONS: [&str; 3] = ["proxy sleep", "proxy append", "proxy idle"];

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The test program, linked against the CPU-only libnccl (found by its rpath).
fn compile(dir: &Path) -> PathBuf {
    let repository = Path::new(env!("CARGO_MANIFEST_DIR"));
    let library = nccl_sim::libnccl_for_tests();
    let library_dir = library.parent().unwrap();
    let program = dir.join("mpi_nccl_app");
    let output = Command::new("mpicc")
        .args(["-Wall", "-Wextra", "-Werror", "-O1", "-o"])
        .arg(&program)
        .arg(repository.join("tests/c/mpi_nccl_app.c"))
        .arg("-I")
        .arg(repository.join("nccl-sim/libnccl/include"))
        .arg("-L")
        .arg(library_dir)
        .arg("-lnccl")
        .arg(format!("-Wl,-rpath,{}", library_dir.display()))
        .output()
        .expect("mpicc (Debian package libopenmpi-dev; scripts/test.sh installs it)");
    assert!(output.status.success(), "{}", text(&output.stderr));
    program
}

/// `mpirun -np 4 <command>` with our plugin writing the event logs and the trace to `out`.
fn mpirun(out: &Path, command: &[&std::ffi::OsStr]) -> Output {
    let output = Command::new("timeout")
        .arg("120")
        .arg("mpirun")
        .args([
            "-np",
            &RANKS.to_string(),
            "--oversubscribe",
            "--bind-to",
            "none",
        ])
        .args(["-x", "NCCL_PROFILER_PLUGIN", "-x", "NCCL_SCOREP_OUTPUT_DIR"])
        .args(["-x", "NCCL_SCOREP_JSONL", "-x", "NCCL_SCOREP_TOOL"])
        .args(["-x", "NCCL_SCOREP_EVENTS"])
        .args(command)
        .env("NCCL_PROFILER_PLUGIN", nccl_sim::our_plugin_for_tests())
        .env("NCCL_SCOREP_OUTPUT_DIR", out)
        .env("NCCL_SCOREP_JSONL", "1")
        // Every event NCCL can send, proxy steps and kernel phases included.
        .env("NCCL_SCOREP_EVENTS", "all")
        // The tool merges the job's trace after its last finalize.
        .env("NCCL_SCOREP_TOOL", env!("CARGO_BIN_EXE_nccl-scorep"))
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun (Debian package openmpi-bin; scripts/test.sh installs it)");
    assert!(
        output.status.success(),
        "{}\n{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    output
}

/// What identifies an event in the comparison: communicator size, rank, kind, operation,
/// count, peer, sequence number, and its parent's kind.
type EventKey = (i64, i64, String, String, i64, i64, i64, String);

/// Every event of the job's event logs (one per process), counted by [`EventKey`].
fn events(out: &Path) -> BTreeMap<EventKey, usize> {
    let mut counts = BTreeMap::new();
    let mut logs = 0;
    for entry in std::fs::read_dir(out).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "jsonl") {
            continue;
        }
        logs += 1;
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let event: Value = serde_json::from_str(line).unwrap();
            if event["type"] != "event" || event["kind"] == "ProxyCtrl" {
                continue;
            }
            let number = |field: &str| event[field].as_i64().unwrap_or(-1);
            let key = (
                number("nranks"),
                number("rank"),
                event["kind"].as_str().unwrap().to_owned(),
                event["func"].as_str().unwrap_or("").to_owned(),
                number("count"),
                number("peer"),
                number("seq"),
                event["parent"]["kind"].as_str().unwrap_or("").to_owned(),
            );
            *counts.entry(key).or_insert(0) += 1;
        }
    }
    assert_eq!(
        logs,
        RANKS,
        "one event log per process in {}",
        out.display()
    );
    counts
}

/// The merged trace's collective records, messages and intervals (by region), each with
/// its communicator's size instead of its name (the hashes differ between jobs).
fn trace_content(out: &Path) -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    let anchor = out.join("traces.otf2");
    assert!(anchor.is_file(), "no merged trace in {}", out.display());
    otf2_tools::assert_otf2_print_clean(&anchor);
    let dump = otf2_tools::dump(&anchor);
    let sizes: BTreeMap<&str, usize> = dump["comms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let members = c["members"].as_array().unwrap().len();
            (c["name"].as_str().unwrap(), members)
        })
        .collect();
    let mut records = BTreeMap::new();
    for c in dump["collectives"].as_array().unwrap() {
        let key = format!(
            "{} on {} ranks, root {}, sent {}, received {}",
            c["op"],
            sizes[c["comm"].as_str().unwrap()],
            c["root"],
            c["sent"],
            c["received"]
        );
        *records.entry(key).or_insert(0) += 1;
    }
    for m in dump["messages"].as_array().unwrap() {
        let key = format!(
            "{} peer {} on {} ranks, {} bytes, tag {}",
            m["kind"],
            m["peer"],
            sizes[m["comm"].as_str().unwrap()],
            m["bytes"],
            m["tag"]
        );
        *records.entry(key).or_insert(0) += 1;
    }
    let mut regions = BTreeMap::new();
    for i in dump["intervals"].as_array().unwrap() {
        let region = i["region"].as_str().unwrap();
        if !PROXY_CTRL_REGIONS.contains(&region) {
            *regions.entry(region.to_owned()).or_insert(0) += 1;
        }
    }
    (records, regions)
}

#[test]
fn a_c_mpi_program_on_the_cpu_only_libnccl_computes_right_and_traces_like_nccl_sim() {
    let dir = tempfile::tempdir().unwrap();
    let program = compile(dir.path());

    let app_out = dir.path().join("app");
    let app = mpirun(&app_out, &[program.as_os_str()]);
    // Each rank checked its results and says what it got.
    let mut lines: Vec<String> = text(&app.stdout).lines().map(str::to_owned).collect();
    lines.sort();
    let expected: Vec<String> = (0..RANKS)
        .map(|rank| {
            let color = rank % 2;
            let half_sum: i64 = (color..RANKS).step_by(2).sum();
            format!(
                "rank {rank} of {RANKS} (NCCL 23200): allreduce x{ITERATIONS} ok, allgather ok, \
                 split color {color} rank {} of {} sum {half_sum} ok, ring from {} ok",
                rank / 2,
                (RANKS + 1 - color) / 2,
                (rank + RANKS - 1) % RANKS
            )
        })
        .collect();
    assert_eq!(lines, expected, "{}", text(&app.stderr));

    let sim_out = dir.path().join("sim");
    let sim = nccl_sim::binary_for_tests();
    let iterations = ITERATIONS.to_string();
    mpirun(
        &sim_out,
        &[
            sim.as_os_str(),
            "run".as_ref(),
            "--scenario".as_ref(),
            "mpi-app".as_ref(),
            "--iterations".as_ref(),
            iterations.as_ref(),
        ],
    );

    let (app_events, sim_events) = (events(&app_out), events(&sim_out));
    // What the program did, as its own events say: per world rank the AllReduce loop and
    // the AllGather under their CollApi, the half's AllReduce, the ring's send and receive.
    let count = |events: &BTreeMap<EventKey, usize>, n: i64, kind: &str, func: &str| -> usize {
        events
            .iter()
            .filter(|((ranks, _, k, f, ..), _)| *ranks == n && k == kind && f == func)
            .map(|(_, c)| c)
            .sum()
    };
    assert_eq!(count(&app_events, 4, "Coll", "AllReduce"), ITERATIONS * 4);
    assert_eq!(count(&app_events, 4, "Coll", "AllGather"), 4);
    assert_eq!(count(&app_events, 2, "Coll", "AllReduce"), 4);
    for rank in 0..RANKS {
        let next = (rank + 1) % RANKS;
        let send = (
            4,
            rank,
            "P2p".into(),
            "Send".into(),
            4096,
            next,
            -1,
            "P2pApi".into(),
        );
        assert_eq!(app_events.get(&send), Some(&1), "{app_events:#?}");
        let seq4 = (
            4,
            rank,
            "Coll".into(),
            "AllReduce".into(),
            16384,
            -1,
            4,
            "CollApi".into(),
        );
        assert_eq!(app_events.get(&seq4), Some(&1), "{app_events:#?}");
    }
    for kind in ["ProxyOp", "ProxyStep", "KernelCh", "KernelPhase"] {
        assert!(app_events.keys().any(|k| k.2 == kind), "no {kind}");
    }
    // … and the same as nccl-sim's scenario, event for event.
    let differences: Vec<String> = app_events
        .keys()
        .chain(sim_events.keys())
        .filter(|k| app_events.get(*k) != sim_events.get(*k))
        .map(|k| format!("{k:?}: {:?} vs {:?}", app_events.get(k), sim_events.get(k)))
        .collect();
    assert!(
        differences.is_empty(),
        "the libnccl program's events differ from nccl-sim's:\n{}",
        differences.join("\n")
    );

    let (app_records, app_regions) = trace_content(&app_out);
    let (sim_records, sim_regions) = trace_content(&sim_out);
    assert_eq!(
        app_records.get("\"ALLREDUCE\" on 4 ranks, root 4294967295, sent 65536, received 65536"),
        Some(&(ITERATIONS * 4)),
        "{app_records:#?}"
    );
    assert_eq!(app_records, sim_records);
    assert_eq!(app_regions.get("ncclSend"), Some(&4), "{app_regions:#?}");
    assert_eq!(app_regions, sim_regions);
}
