//! `nccl-scorep status <run-dir>`: while a job runs (or hangs), what its processes'
//! flight recorder files say: per communicator, how far each rank got, who has not
//! arrived at the collective the others wait in, and the operation unfinished longest
//! and where it is stuck (docs/hangs.md).

use nccl_scorep_common::flight::{self, Diagnosis, FlightError};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// The JSON schema's name and version (docs/hangs.md).
pub const SCHEMA: &str = "nccl-scorep-status/2";
/// A heartbeat older than this marks its process stale.
const STALE: Duration = Duration::from_secs(5);

/// Prints the status once, or every `watch` until interrupted. Exit status: 0 when
/// nothing is stuck, 3 when an operation is unfinished or a rank has not arrived, 2 when
/// the directory holds no readable recorder file.
pub fn main(run_dir: &Path, json: bool, watch: Option<f64>) -> ExitCode {
    loop {
        let code = once(run_dir, json);
        let Some(seconds) = watch else {
            return code;
        };
        if code == ExitCode::from(2) {
            return code;
        }
        std::thread::sleep(Duration::from_secs_f64(seconds.clamp(0.1, 3600.0)));
        if !json {
            println!();
        }
    }
}

fn once(run_dir: &Path, json: bool) -> ExitCode {
    let files = match flight::files_in(run_dir) {
        Ok(files) => files,
        Err(error) => {
            eprintln!(
                "nccl-scorep status: cannot read {}: {error}",
                run_dir.display()
            );
            return ExitCode::from(2);
        }
    };
    if files.is_empty() {
        eprintln!(
            "nccl-scorep status: no flight recorder file (nccl-scorep-flight-*.bin) in {}; \
             is the job running with the plugin and NCCL_SCOREP_FLIGHT_RECORDER on?",
            run_dir.display()
        );
        return ExitCode::from(2);
    }
    let mut records = Vec::new();
    let mut errors: Vec<FlightError> = Vec::new();
    for path in files {
        match flight::read_file(&path) {
            Ok(record) => records.push(record),
            Err(error) => errors.push(error),
        }
    }
    for error in &errors {
        eprintln!("nccl-scorep status: {error}");
    }
    if records.is_empty() {
        return ExitCode::from(2);
    }
    let now = nccl_scorep_common::clock::realtime_ns();
    let diagnosis = flight::diagnose(&records, now, STALE.as_nanos() as u64);
    let mut out = std::io::stdout().lock();
    let written = if json {
        serde_json::to_writer_pretty(&mut out, &to_json(&diagnosis))
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        write!(out, "{}", flight::render(&diagnosis))
    };
    if written.and_then(|()| out.flush()).is_err() {
        return ExitCode::FAILURE;
    }
    let stuck = diagnosis
        .comms
        .iter()
        .any(|c| c.missing.is_some() || c.longest.is_some());
    if stuck {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    }
}

fn hex(value: u64) -> String {
    format!("{value:#018x}")
}

/// The diagnosis as JSON (schema [`SCHEMA`], documented in docs/hangs.md).
pub fn to_json(d: &Diagnosis) -> Value {
    json!({
        "schema": SCHEMA,
        "now_ns": d.now_ns,
        "processes": d.processes.iter().map(|p| json!({
            "host": p.host,
            "pid": p.pid,
            "heartbeat_age_ns": p.heartbeat_age_ns,
            "stale": p.stale,
        })).collect::<Vec<_>>(),
        "communicators": d.comms.iter().map(|c| json!({
            "comm_hash": hex(c.comm_hash),
            "nranks": c.nranks,
            "ranks": c.ranks.iter().map(|r| json!({
                "rank": r.rank,
                "host": r.host,
                "pid": r.pid,
                "last_seq": r.last_seq,
                "finalized": r.finalized,
            })).collect::<Vec<_>>(),
            "unseen_ranks": c.unseen_ranks,
            "not_arrived": c.missing.as_ref().map(|m| json!({
                "ranks": m.ranks,
                "seq": m.seq,
                "func": m.func,
            })),
            "longest_unfinished": c.longest.as_ref().map(|s| json!({
                "rank": s.rank,
                "seq": s.op.seq,
                "func": s.op.func,
                "collective": s.op.is_coll,
                "bytes": s.op.bytes,
                "peer_or_root": s.op.peer,
                "state": s.op.state.name(),
                "enqueued_ns": s.op.enqueued_ns,
                "gpu_start_ns": s.op.gpu_start_ns,
                "since_ns": s.since_ns,
                "for_ns": d.now_ns.saturating_sub(s.since_ns),
                "proxy": s.op.proxy.as_ref().map(|w| json!({
                    "direction": if w.send { "send" } else { "receive" },
                    "peer": w.peer,
                    "channel": w.channel,
                    "waiting_on": if w.send { "network" } else { "peer" },
                    "steps_done": w.steps_done,
                    "steps": w.steps,
                    "step_waiting": w.step_waiting,
                    "open_proxy_operations": w.open,
                    "since_ns": w.since_ns,
                    "for_ns": d.now_ns.saturating_sub(w.since_ns),
                })),
            })),
        })).collect::<Vec<_>>(),
    })
}
