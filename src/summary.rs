//! `nccl-scorep summary <run-dir or archive>`: where NCCL time went and which rank was
//! late, from a job's OTF2 trace (the merged `traces.otf2` of a run directory, any
//! archive, or else each process's part) or, without one, from the processes' JSON-lines
//! event logs.
//!
//! Collectives are matched across ranks (and processes) by `(comm_hash, seq, func)`. A
//! rank's **arrival** is when it called the collective (its CollApi call in the event
//! log, its enqueue in the trace), its **completion** the last stop among the Coll's
//! proxy and kernel children (the GPU's end on the host clock where known). Times of
//! different processes are on one clock: the trace's own time base (clock offsets applied)
//! or, for event logs, each process's (monotonic, real-time) reading from its log header.

use crate::nccl_ops::size_and_factor;
use nccl_scorep_common::{PartDir, RunDir};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};

mod archive;

/// One rank's part in one collective or transfer.
#[derive(Clone, Debug)]
struct Part {
    rank: i64,
    nranks: i64,
    bytes: u64,
    arrival_ns: i128,
    completion_ns: i128,
}

/// One rank's send or receive.
#[derive(Clone, Debug)]
struct Transfer {
    comm_hash: String,
    func: String,
    peer: i64,
    part: Part,
}

/// What the readers gather, from logs or archives.
#[derive(Default)]
struct Collected {
    processes: usize,
    incomplete: Vec<String>,
    instances: HashMap<(String, u64, String), Vec<Part>>,
    transfers: Vec<Transfer>,
    comm_names: HashMap<String, String>,
    losses: BTreeMap<String, u64>,
    /// Records lost on the processes' threads (trace gaps).
    lost_records: u64,
    /// Operations progressed for another process (PXN).
    pxn_ops: u64,
    /// Of those, the ones whose task the trace also holds (a merged trace).
    pxn_linked: u64,
}

/// The summary of one run directory.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// What was read: `trace` (an OTF2 archive or the processes' parts) or `event logs`.
    pub source: String,
    pub processes: usize,
    /// Processes whose log has no final summary line, or parts without their definitions
    /// (killed, or still running).
    pub incomplete: Vec<String>,
    pub collectives: Vec<CollectiveRow>,
    pub point_to_point: Vec<TransferRow>,
    pub late_ranks: Vec<LateRank>,
    /// Counters of data dropped, refused or repaired, summed over processes (event logs;
    /// a trace has `lost_records`).
    pub losses: BTreeMap<String, u64>,
    /// Records lost before they reached the trace (its gaps).
    pub lost_records: u64,
    /// Operations progressed for another process (PXN).
    pub pxn_foreign_ops: u64,
    /// Of those, the ones linked to their collective or transfer in the originating
    /// process (by its pid and task handle; needs a merged trace).
    pub pxn_linked_ops: u64,
}

/// One communicator and collective function.
#[derive(Debug, Serialize)]
pub struct CollectiveRow {
    pub comm: String,
    pub comm_hash: String,
    pub func: String,
    pub nranks: i64,
    /// Collectives seen on every rank.
    pub calls: usize,
    /// Collectives some rank's log lacks (dropped events, or a killed process).
    pub incomplete_calls: usize,
    /// Mean bytes per call, as NCCL's performance tests count them.
    pub bytes: u64,
    /// Mean per rank of arrival → completion.
    pub mean_time_us: f64,
    /// Mean of last arrival → last completion: the collective itself.
    pub mean_execution_us: f64,
    /// All calls' bytes / all calls' execution time, and the bus bandwidth NCCL's tests
    /// derive from it.
    pub algbw_gbs: f64,
    pub busbw_gbs: f64,
    /// Mean spread of the ranks' arrivals.
    pub mean_skew_us: f64,
}

/// One communicator's sends or receives.
#[derive(Debug, Serialize)]
pub struct TransferRow {
    pub comm: String,
    pub comm_hash: String,
    pub func: String,
    /// Operations, over all ranks.
    pub calls: usize,
    /// Distinct (rank, peer) pairs.
    pub pairs: usize,
    /// Mean bytes per operation.
    pub bytes: u64,
    /// Mean call → completion.
    pub mean_time_us: f64,
    /// All bytes / all operations' time.
    pub bandwidth_gbs: f64,
}

/// A rank that arrived last more often than its share.
#[derive(Debug, Serialize)]
pub struct LateRank {
    pub comm: String,
    pub func: String,
    pub rank: i64,
    /// Share of the calls in which this rank arrived last.
    pub last_share: f64,
    pub last_calls: usize,
    pub calls: usize,
    /// Time the earliest rank waited for it, summed over those calls.
    pub cost_ms: f64,
}

/// Summarises `path`: an archive's anchor file, a directory holding `traces.otf2`, or a
/// run directory (its parts' archives, or else its `*.jsonl` event logs).
pub fn summarize(path: &Path) -> io::Result<Summary> {
    let invalid = |message: String| io::Error::new(io::ErrorKind::InvalidData, message);
    let mut collected = Collected::default();
    let source;
    if path.is_file() {
        archive::read(path, &mut collected).map_err(invalid)?;
        source = "trace";
    } else if RunDir::new(path).archive().is_file() {
        archive::read(&RunDir::new(path).archive(), &mut collected).map_err(invalid)?;
        incomplete_parts(path, &mut collected);
        source = "trace";
    } else if has_logs(path)? {
        read_logs(path, &mut collected)?;
        source = "event logs";
    } else {
        let anchors = part_anchors(path);
        if anchors.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no trace (traces.otf2, parts/*/traces.otf2) and no event log (*.jsonl) in {}",
                    path.display()
                ),
            ));
        }
        for anchor in anchors {
            archive::read(&anchor, &mut collected)
                .map_err(|e| invalid(format!("{}: {e}", anchor.display())))?;
        }
        incomplete_parts(path, &mut collected);
        source = "trace";
    }
    let (collectives, late_ranks) = aggregate(&collected.instances, &collected.comm_names);
    let point_to_point = aggregate_transfers(&collected.transfers, &collected.comm_names);
    Ok(Summary {
        source: source.to_owned(),
        processes: collected.processes,
        incomplete: collected.incomplete,
        collectives,
        point_to_point,
        late_ranks,
        losses: collected.losses,
        lost_records: collected.lost_records,
        pxn_foreign_ops: collected.pxn_ops,
        pxn_linked_ops: collected.pxn_linked,
    })
}

fn has_logs(dir: &Path) -> io::Result<bool> {
    Ok(std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .any(|p| p.extension().is_some_and(|x| x == "jsonl")))
}

/// `<dir>/parts/*/traces.otf2`, in the parts' order.
fn part_anchors(dir: &Path) -> Vec<PathBuf> {
    RunDir::new(dir)
        .parts()
        .unwrap_or_default()
        .iter()
        .map(PartDir::anchor)
        .filter(|anchor| anchor.is_file())
        .collect()
}

/// Parts of a run directory whose process did not finish them (it was killed): the merged
/// trace has only the events it had flushed, or nothing of a part without saved
/// definitions.
fn incomplete_parts(dir: &Path, collected: &mut Collected) {
    let mut missing: Vec<String> = RunDir::new(dir)
        .parts()
        .unwrap_or_default()
        .iter()
        .filter(|part| !part.anchor().is_file())
        .map(|part| {
            let saved = part
                .snapshot_dir()
                .join(nccl_scorep_common::run_dir::ANCHOR_FILE)
                .is_file();
            let what = if saved {
                "killed? only the events it had flushed"
            } else {
                "no definitions: killed?"
            };
            format!("part {} ({what})", part.name())
        })
        .collect();
    missing.sort();
    collected.incomplete.extend(missing);
}

/// Reads every `*.jsonl` event log in `dir`.
fn read_logs(dir: &Path, collected: &mut Collected) -> io::Result<()> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    for file in &files {
        let text = std::fs::read_to_string(file)?;
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let Some(header) = lines.iter().find(|l| l["type"] == "header") else {
            continue;
        };
        // This process's monotonic clock → real time.
        let to_real = header["realtime_ns"].as_i64().unwrap_or(0) as i128
            - header["monotonic_ns"].as_i64().unwrap_or(0) as i128;
        let summaries: Vec<&Value> = lines.iter().filter(|l| l["type"] == "summary").collect();
        let headers = lines.iter().filter(|l| l["type"] == "header").count();
        if summaries.len() < headers {
            collected.incomplete.push(file.display().to_string());
        }
        for summary in summaries {
            for (name, value) in summary["counters"].as_object().into_iter().flatten() {
                let value = value.as_u64().unwrap_or(0);
                match name.as_str() {
                    "pxn_foreign_ops" => collected.pxn_ops += value,
                    "events_written" | "stop_null" => {}
                    _ if value > 0 => *collected.losses.entry(name.clone()).or_default() += value,
                    _ => {}
                }
            }
        }
        collect(&lines, to_real, collected);
    }
    collected.processes += files.len();
    Ok(())
}

/// The Coll events of one log, with their arrival and completion.
fn collect(lines: &[Value], to_real: i128, collected: &mut Collected) {
    let events: Vec<&Value> = lines.iter().filter(|l| l["type"] == "event").collect();
    let by_id: HashMap<&str, &Value> = events
        .iter()
        .filter_map(|e| Some((e["id"].as_str()?, *e)))
        .collect();
    // The latest completion among each task's children.
    let mut done: HashMap<&str, i128> = HashMap::new();
    for e in &events {
        if !matches!(e["kind"].as_str(), Some("ProxyOp" | "KernelCh")) {
            continue;
        }
        let Some(parent) = e["parent"]["id"].as_str() else {
            continue;
        };
        let end = e["gpu_stop_ns"]
            .as_i64()
            .filter(|_| e["kind"] == "KernelCh")
            .or_else(|| e["stop_ns"].as_i64())
            .unwrap_or(0) as i128;
        let slot = done.entry(parent).or_insert(end);
        *slot = (*slot).max(end);
    }
    for e in events
        .iter()
        .filter(|e| e["kind"] == "Coll" || e["kind"] == "P2p")
    {
        let (Some(hash), Some(seq), Some(func)) = (
            e["comm_hash"].as_str(),
            // Point-to-point operations have no seq; they are not matched across ranks.
            e["seq"].as_u64().or((e["kind"] == "P2p").then_some(0)),
            e["func"].as_str(),
        ) else {
            continue;
        };
        if let Some(name) = e["comm_name"].as_str() {
            collected
                .comm_names
                .insert(hash.to_owned(), name.to_owned());
        }
        let api_start = e["parent"]["id"]
            .as_str()
            .and_then(|id| by_id.get(id))
            .filter(|api| api["kind"] == "CollApi" || api["kind"] == "P2pApi")
            .and_then(|api| api["start_ns"].as_i64());
        let arrival = api_start.or_else(|| e["start_ns"].as_i64()).unwrap_or(0) as i128;
        let id = e["id"].as_str().unwrap_or_default();
        let completion = done
            .get(id)
            .copied()
            .unwrap_or(e["stop_ns"].as_i64().unwrap_or(0) as i128);
        let part = Part {
            rank: e["rank"].as_i64().unwrap_or(-1),
            nranks: e["nranks"].as_i64().unwrap_or(0),
            bytes: e["bytes"].as_u64().unwrap_or(0),
            arrival_ns: arrival + to_real,
            completion_ns: completion.max(arrival) + to_real,
        };
        if e["kind"] == "P2p" {
            collected.transfers.push(Transfer {
                comm_hash: hash.to_owned(),
                func: func.to_owned(),
                peer: e["peer"].as_i64().unwrap_or(-1),
                part,
            });
        } else {
            collected
                .instances
                .entry((hash.to_owned(), seq, func.to_owned()))
                .or_default()
                .push(part);
        }
    }
}

#[derive(Default)]
struct Acc {
    nranks: i64,
    calls: usize,
    incomplete: usize,
    bytes: u64,
    time_ns: f64,
    time_parts: usize,
    execution_ns: f64,
    skew_ns: f64,
    /// rank → (times last, wait it caused)
    last: BTreeMap<i64, (usize, f64)>,
}

fn aggregate(
    instances: &HashMap<(String, u64, String), Vec<Part>>,
    comm_names: &HashMap<String, String>,
) -> (Vec<CollectiveRow>, Vec<LateRank>) {
    let mut groups: BTreeMap<(String, String), Acc> = BTreeMap::new();
    for ((hash, _seq, func), parts) in instances {
        let acc = groups.entry((hash.clone(), func.clone())).or_default();
        let nranks = parts.iter().map(|p| p.nranks).max().unwrap_or(0);
        acc.nranks = acc.nranks.max(nranks);
        let mut ranks: Vec<i64> = parts.iter().map(|p| p.rank).collect();
        ranks.sort_unstable();
        ranks.dedup();
        if (ranks.len() as i64) < nranks {
            acc.incomplete += 1;
            continue;
        }
        acc.calls += 1;
        let (size, _) = size_and_factor(
            func,
            parts.iter().map(|p| p.bytes).max().unwrap_or(0),
            nranks,
        );
        acc.bytes += size;
        for p in parts {
            acc.time_ns += (p.completion_ns - p.arrival_ns) as f64;
            acc.time_parts += 1;
        }
        let first = parts.iter().map(|p| p.arrival_ns).min().unwrap_or(0);
        let last_part = parts
            .iter()
            .max_by_key(|p| p.arrival_ns)
            .expect("a complete collective has parts");
        let end = parts.iter().map(|p| p.completion_ns).max().unwrap_or(0);
        acc.execution_ns += (end - last_part.arrival_ns).max(0) as f64;
        let spread = (last_part.arrival_ns - first) as f64;
        acc.skew_ns += spread;
        let entry = acc.last.entry(last_part.rank).or_default();
        entry.0 += 1;
        entry.1 += spread;
    }
    let mut rows = Vec::new();
    let mut late = Vec::new();
    for ((hash, func), acc) in groups {
        let comm = comm_names
            .get(&hash)
            .cloned()
            .unwrap_or_else(|| hash.clone());
        let calls = acc.calls.max(1) as f64;
        let execution_ns = acc.execution_ns / calls;
        let (_, factor) = size_and_factor(&func, 0, acc.nranks);
        let algbw = if acc.execution_ns > 0.0 {
            acc.bytes as f64 / acc.execution_ns
        } else {
            0.0
        };
        rows.push(CollectiveRow {
            comm: comm.clone(),
            comm_hash: hash.clone(),
            func: func.clone(),
            nranks: acc.nranks,
            calls: acc.calls,
            incomplete_calls: acc.incomplete,
            bytes: (acc.bytes as f64 / calls) as u64,
            mean_time_us: acc.time_ns / acc.time_parts.max(1) as f64 / 1e3,
            mean_execution_us: execution_ns / 1e3,
            algbw_gbs: algbw,
            busbw_gbs: algbw * factor,
            mean_skew_us: acc.skew_ns / calls / 1e3,
        });
        // A rank is worth naming when it is last clearly more often than its share.
        let share = 1.0 / acc.nranks.max(1) as f64;
        for (rank, (times, cost)) in acc.last {
            let last_share = times as f64 / calls;
            if acc.calls >= 2 && last_share > (2.0 * share).min(0.5) {
                late.push(LateRank {
                    comm: comm.clone(),
                    func: func.clone(),
                    rank,
                    last_share,
                    last_calls: times,
                    calls: acc.calls,
                    cost_ms: cost / 1e6,
                });
            }
        }
    }
    late.sort_by(|a, b| b.cost_ms.total_cmp(&a.cost_ms));
    (rows, late)
}

/// Sends and receives per communicator and direction.
fn aggregate_transfers(
    transfers: &[Transfer],
    comm_names: &HashMap<String, String>,
) -> Vec<TransferRow> {
    #[derive(Default)]
    struct Acc {
        calls: usize,
        pairs: std::collections::BTreeSet<(i64, i64)>,
        bytes: u64,
        time_ns: f64,
    }
    let mut groups: BTreeMap<(String, String), Acc> = BTreeMap::new();
    for t in transfers {
        let acc = groups
            .entry((t.comm_hash.clone(), t.func.clone()))
            .or_default();
        acc.calls += 1;
        acc.pairs.insert((t.part.rank, t.peer));
        acc.bytes += t.part.bytes;
        acc.time_ns += (t.part.completion_ns - t.part.arrival_ns).max(0) as f64;
    }
    groups
        .into_iter()
        .map(|((hash, func), acc)| TransferRow {
            comm: comm_names
                .get(&hash)
                .cloned()
                .unwrap_or_else(|| hash.clone()),
            comm_hash: hash,
            func,
            calls: acc.calls,
            pairs: acc.pairs.len(),
            bytes: acc.bytes / acc.calls.max(1) as u64,
            mean_time_us: acc.time_ns / acc.calls.max(1) as f64 / 1e3,
            bandwidth_gbs: if acc.time_ns > 0.0 {
                acc.bytes as f64 / acc.time_ns
            } else {
                0.0
            },
        })
        .collect()
}

/// The human-readable report.
pub fn render(summary: &Summary) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{} process(es), from the {}{}\n\n",
        summary.processes,
        summary.source,
        if summary.incomplete.is_empty() {
            String::new()
        } else {
            format!(
                "; incomplete (no final summary, e.g. killed): {}",
                summary.incomplete.join(", ")
            )
        }
    ));
    out.push_str(
        "comm          func           ranks  calls      bytes  time/rank us  exec us  algbw GB/s  busbw GB/s  skew us\n",
    );
    for r in &summary.collectives {
        out.push_str(&format!(
            "{:<13} {:<14} {:>5}  {:>5}  {:>9}  {:>12.1}  {:>7.1}  {:>10.2}  {:>10.2}  {:>7.1}{}\n",
            r.comm,
            r.func,
            r.nranks,
            r.calls,
            r.bytes,
            r.mean_time_us,
            r.mean_execution_us,
            r.algbw_gbs,
            r.busbw_gbs,
            r.mean_skew_us,
            if r.incomplete_calls > 0 {
                format!("  (+{} incomplete)", r.incomplete_calls)
            } else {
                String::new()
            }
        ));
    }
    if !summary.point_to_point.is_empty() {
        out.push_str(
            "\ncomm          p2p            pairs  calls      bytes  time/call us  GB/s\n",
        );
        for r in &summary.point_to_point {
            out.push_str(&format!(
                "{:<13} {:<14} {:>5}  {:>5}  {:>9}  {:>12.1}  {:>4.2}\n",
                r.comm, r.func, r.pairs, r.calls, r.bytes, r.mean_time_us, r.bandwidth_gbs
            ));
        }
    }
    out.push('\n');
    if summary.late_ranks.is_empty() {
        out.push_str("no rank was last markedly more often than the others\n");
    }
    for l in &summary.late_ranks {
        out.push_str(&format!(
            "rank {} was last in {:.0}% of {} on comm {} ({} of {} calls), costing {:.3} ms\n",
            l.rank,
            l.last_share * 100.0,
            l.func,
            l.comm,
            l.last_calls,
            l.calls,
            l.cost_ms
        ));
    }
    if summary.pxn_foreign_ops > 0 {
        out.push_str(&format!(
            "{} proxy operations were progressed for another process (PXN)",
            summary.pxn_foreign_ops
        ));
        if summary.source == "trace" {
            out.push_str(&format!(
                "; {} of them linked to their operation in the originating process",
                summary.pxn_linked_ops
            ));
        }
        out.push('\n');
    }
    if summary.lost_records > 0 {
        out.push_str(&format!(
            "{} records were lost before they reached the trace (its gaps)\n",
            summary.lost_records
        ));
    }
    if summary.losses.is_empty() && summary.lost_records == 0 {
        out.push_str("nothing dropped or refused\n");
    } else if !summary.losses.is_empty() {
        let list: Vec<String> = summary
            .losses
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        out.push_str(&format!(
            "dropped, refused or repaired: {}\n",
            list.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(rank: i64, arrival: i128, completion: i128) -> Part {
        Part {
            rank,
            nranks: 3,
            bytes: 3_000_000,
            arrival_ns: arrival,
            completion_ns: completion,
        }
    }

    #[test]
    fn the_late_rank_is_named_with_its_cost() {
        let mut instances = HashMap::new();
        for seq in 0..10u64 {
            let t = seq as i128 * 1_000_000;
            instances.insert(
                ("0xabc".to_owned(), seq, "AllReduce".to_owned()),
                vec![
                    part(0, t, t + 600_000),
                    part(1, t + 10_000, t + 600_000),
                    part(2, t + 500_000, t + 600_000),
                ],
            );
        }
        // One collective lacks rank 2: incomplete.
        instances.insert(
            ("0xabc".to_owned(), 99, "AllReduce".to_owned()),
            vec![part(0, 0, 1), part(1, 0, 1)],
        );
        let names = HashMap::from([("0xabc".to_owned(), "world".to_owned())]);
        let (rows, late) = aggregate(&instances, &names);
        assert_eq!(rows.len(), 1);
        let row = &rows[0];
        assert_eq!((row.calls, row.incomplete_calls), (10, 1));
        assert!((row.mean_skew_us - 500.0).abs() < 1e-9);
        assert!((row.mean_execution_us - 100.0).abs() < 1e-9);
        // 3 MB in 100 µs: 30 GB/s; AllReduce bus factor 2(n-1)/n = 4/3.
        assert!((row.algbw_gbs - 30.0).abs() < 1e-9);
        assert!((row.busbw_gbs - 40.0).abs() < 1e-9);
        assert_eq!(late.len(), 1);
        assert_eq!(late[0].rank, 2);
        assert_eq!(late[0].last_calls, 10);
        assert!((late[0].cost_ms - 5.0).abs() < 1e-9);
        assert!(render(&Summary {
            source: "trace".into(),
            processes: 1,
            incomplete: vec![],
            collectives: rows,
            point_to_point: vec![],
            late_ranks: late,
            losses: BTreeMap::new(),
            lost_records: 0,
            pxn_foreign_ops: 0,
            pxn_linked_ops: 0,
        })
        .contains("rank 2 was last in 100% of AllReduce on comm world"));
    }
}
