//! A short report of a run directory's event logs (the JSON-lines files every process
//! writes): what was recorded per kind, communicator and rank, and what was lost. The demo
//! prints it after its simulated job.
//!
//!     cargo run --release -p nccl-profiler-scorep --example event_report -- RUN_DIR

#[path = "../tests/support/mod.rs"]
mod support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Counters that are tallies, not losses.
const NOT_LOSSES: [&str; 3] = ["events_written", "pxn_foreign_ops", "stop_null"];

fn main() {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: event_report RUN_DIR");
        std::process::exit(2);
    };
    let lines = support::read_logs(&dir);
    if lines.is_empty() {
        eprintln!("no event log (*.jsonl) in {}", dir.display());
        std::process::exit(1);
    }
    let events: Vec<&Value> = lines.iter().filter(|l| l["type"] == "event").collect();
    // A process writes a header at every init/finalize cycle: count pids.
    let processes = lines
        .iter()
        .filter(|l| l["type"] == "header")
        .filter_map(|l| l["pid"].as_i64())
        .collect::<std::collections::BTreeSet<_>>()
        .len();

    let mut per_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for event in &events {
        *per_kind
            .entry(event["kind"].as_str().unwrap_or("?"))
            .or_default() += 1;
    }
    println!(
        "{} events from {processes} process(es) in {}",
        events.len(),
        dir.display()
    );
    println!("\nevents per kind:");
    for (kind, n) in &per_kind {
        println!("  {kind:<14} {n:>7}");
    }

    // Per communicator and rank: collectives, bytes, GPU time per channel.
    let mut ranks: BTreeMap<(String, i64), Row> = BTreeMap::new();
    for event in &events {
        let Some(comm) = event["comm_name"]
            .as_str()
            .or_else(|| event["comm_hash"].as_str())
        else {
            continue;
        };
        let row = ranks
            .entry((comm.to_owned(), event["rank"].as_i64().unwrap_or(-1)))
            .or_default();
        match event["kind"].as_str() {
            Some("Coll") => {
                row.collectives += 1;
                row.bytes += event["bytes"].as_u64().unwrap_or(0);
            }
            Some("P2p") => {
                row.p2p += 1;
                row.bytes += event["bytes"].as_u64().unwrap_or(0);
            }
            Some("KernelCh") => {
                let start = event["ptimer_start"].as_u64();
                let stop = event["states"][0]["ptimer"].as_u64();
                if let (Some(start), Some(stop)) = (start, stop) {
                    row.gpu_ns.push(stop.saturating_sub(start));
                }
            }
            _ => {}
        }
    }
    println!("\nper communicator and rank:");
    println!("  comm          rank  collectives  p2p        bytes  GPU time per channel (mean)");
    for ((comm, rank), row) in &ranks {
        let mean = if row.gpu_ns.is_empty() {
            "-".to_owned()
        } else {
            let total: u64 = row.gpu_ns.iter().sum();
            format!("{:.1} us", total as f64 / row.gpu_ns.len() as f64 / 1000.0)
        };
        println!(
            "  {comm:<12} {rank:>5}  {:>11}  {:>3}  {:>11}  {mean}",
            row.collectives, row.p2p, row.bytes
        );
    }

    let foreign = events.iter().filter(|e| e.get("foreign").is_some()).count();
    if foreign > 0 {
        println!("\n{foreign} events progressed for another process (PXN)");
    }
    let mut losses: BTreeMap<String, u64> = BTreeMap::new();
    for summary in lines.iter().filter(|l| l["type"] == "summary") {
        for (name, value) in summary["counters"].as_object().into_iter().flatten() {
            let value = value.as_u64().unwrap_or(0);
            if value > 0 && !NOT_LOSSES.contains(&name.as_str()) {
                *losses.entry(name.clone()).or_default() += value;
            }
        }
    }
    if losses.is_empty() {
        println!("\nnothing dropped or refused");
    } else {
        let list: Vec<String> = losses.iter().map(|(n, v)| format!("{n}={v}")).collect();
        println!("\ndropped, refused or repaired: {}", list.join(", "));
    }
}

#[derive(Default)]
struct Row {
    collectives: u64,
    p2p: u64,
    bytes: u64,
    gpu_ns: Vec<u64>,
}
