//! `nccl-scorep summary <run-dir or archive>`: where NCCL time went and which rank was
//! late, from a job's OTF2 trace (the merged `traces.otf2` of a run directory, any
//! archive, or else each process's part) or, without one, from the processes' JSON-lines
//! event logs. What every table and column means: docs/summary.md.
//!
//! Collectives are matched across ranks (and processes) by `(comm_hash, seq, func)`. A
//! rank's **arrival** is when it called the collective (its CollApi call in the event
//! log, its enqueue in the trace), its **completion** the last stop among the Coll's
//! proxy and kernel children (the GPU's end on the host clock where known). Times of
//! different processes are on one clock: the trace's own time base (clock offsets applied)
//! or, for event logs, each process's (monotonic, real-time) reading from its log header.

use nccl_scorep_common::{PartDir, RunDir};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod archive;
mod hygiene;
mod render;
mod straggler;
pub(crate) mod tables;

pub use render::{render, render_csv};
use straggler::{Lateness, Rule};
use tables::{CommRanks, OperationRow};

/// The JSON output's schema and version (docs/summary.md). A change of a field's name,
/// unit or meaning gives a new version.
pub const SCHEMA: &str = "nccl-scorep-summary/2";

/// One rank's part in one collective or transfer.
#[derive(Clone, Debug)]
pub(crate) struct Part {
    pub rank: i64,
    pub nranks: i64,
    pub bytes: u64,
    pub arrival_ns: i128,
    pub completion_ns: i128,
}

/// One rank's send or receive.
#[derive(Clone, Debug)]
pub(crate) struct Transfer {
    pub comm_hash: String,
    pub func: String,
    pub peer: i64,
    pub part: Part,
}

/// What the readers gather, from logs or archives.
#[derive(Default)]
struct Collected {
    processes: usize,
    incomplete: Vec<String>,
    ranks_without_part: Vec<String>,
    instances: HashMap<(String, u64, String), Vec<Part>>,
    transfers: Vec<Transfer>,
    comm_names: HashMap<String, String>,
    losses: BTreeMap<String, u64>,
    /// Records lost on the processes' threads (trace gaps).
    lost_records: u64,
    /// Waits of NCCL's threads for room in the plugin's buffers.
    held_back: HeldBackTotal,
    /// Kernel channel intervals whose GPU times were rejected, by reason.
    gpu_times_rejected: BTreeMap<String, u64>,
    /// Operations progressed for another process (PXN).
    pxn_ops: u64,
    /// Of those, the ones whose task the trace also holds (a merged trace).
    pxn_linked: u64,
}

/// The waits of NCCL's threads for room in the plugin's buffers, over the processes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Serialize)]
pub struct HeldBackTotal {
    pub waits: u64,
    /// Their time added up, and the longest one, ns.
    pub total_ns: u64,
    pub longest_ns: u64,
}

impl HeldBackTotal {
    fn add(&mut self, waited_ns: u64) {
        self.waits += 1;
        self.total_ns += waited_ns;
        self.longest_ns = self.longest_ns.max(waited_ns);
    }

    /// A warning when the waits came to 1 % or more of the ranks' `time_in_nccl_ms`: the
    /// summary's times may then hold a delay the plugin made. (The waits are those of
    /// every thread, proxy threads too, so they can exceed the ranks' time in NCCL.)
    fn warning(&self, time_in_nccl_ms: f64) -> Option<String> {
        let waited_ms = self.total_ns as f64 / 1e6;
        if self.waits == 0 || waited_ms < 0.01 * time_in_nccl_ms {
            return None;
        }
        Some(format!(
            "NCCL's threads waited {waited_ms:.3} ms in all for room in the plugin's \
             buffers, against {time_in_nccl_ms:.3} ms of the ranks' time in NCCL: the \
             times here may include that delay; a larger NCCL_SCOREP_BUFFER_SIZE or fewer \
             NCCL_SCOREP_EVENTS avoid it"
        ))
    }
}

/// The summary of one run directory or archive.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The path given.
    pub input: String,
    /// What was read: `trace` (an OTF2 archive or the processes' parts) or `event logs`.
    pub source: String,
    pub processes: usize,
    /// Processes whose log has no final summary line, or parts without their definitions
    /// (killed, or still running).
    pub incomplete: Vec<String>,
    /// Communicator ranks (`<comm> rank <r>`) the merged trace has no part of: their
    /// messages and roots are named by the other ranks, their own events are missing.
    pub ranks_without_part: Vec<String>,
    /// What the reader should know before trusting the figures (parts newer than the
    /// merged trace, …); also printed on stderr.
    pub warnings: Vec<String>,
    /// The time all ranks spent in the operations below, ms: the whole of every `share`.
    pub total_time_ms: f64,
    /// Per communicator and operation, the costliest first.
    pub operations: Vec<OperationRow>,
    /// Per communicator, its ranks.
    pub ranks: Vec<CommRanks>,
    /// Ranks the straggler rule names.
    pub stragglers: Vec<Lateness>,
    /// Per communicator and collective, its latest rank on median, named or not, and why.
    pub latest_ranks: Vec<Lateness>,
    pub straggler_rule: Rule,
    /// How the trace was made, from its OTF2 properties (docs/launcher.md: NCCL version,
    /// profiler API, settings, command, job, times); null for event logs.
    pub provenance: Value,
    /// Counters of data dropped, refused or repaired, summed over processes (event logs;
    /// a trace has `lost_records`).
    pub losses: BTreeMap<String, u64>,
    /// Records lost before they reached the trace (its gaps).
    pub lost_records: u64,
    /// How often, and how long, NCCL's threads waited for room in the plugin's full
    /// buffers (`NCCL_SCOREP_ON_FULL=wait`): the time the plugin held NCCL back.
    pub held_back: HeldBackTotal,
    /// Kernel channel intervals whose GPU times NCCL reported impossibly, by reason
    /// (`end_before_start`, `beyond_host_bounds`, `clock_jump`): their operations are
    /// timed by the host (`nccl.gpu_time_rejected` in the trace).
    pub gpu_times_rejected: BTreeMap<String, u64>,
    /// Operations progressed for another process (PXN).
    pub pxn_foreign_ops: u64,
    /// Of those, the ones linked to their collective or transfer in the originating
    /// process (by its pid and task handle; needs a merged trace).
    pub pxn_linked_ops: u64,
}

impl Summary {
    /// How closely the merge aligned the hosts' clocks, microseconds (± this), when it did
    /// (the trace property `NCCL_SCOREP::CLOCK_CORRECTION_UNCERTAINTY_NS`).
    pub fn clock_uncertainty_us(&self) -> Option<f64> {
        self.provenance
            .get("clock_correction_uncertainty_ns")?
            .as_str()?
            .parse::<f64>()
            .ok()
            .map(|ns| ns / 1e3)
    }

    /// Whether a lateness of `lateness_us` is within the clocks' alignment uncertainty.
    pub fn within_clock_uncertainty(&self, lateness_us: f64) -> bool {
        self.clock_uncertainty_us()
            .is_some_and(|u| lateness_us.abs() <= u)
    }

    /// What the reader must know about the hosts' clocks before trusting a skew, when the
    /// trace spans hosts the merge aligned.
    pub fn clock_note(&self) -> Option<String> {
        self.clock_uncertainty_us().map(|u| {
            format!(
                "the hosts' clocks were aligned from the job's collectives and messages to \
                 within +-{u:.1} us: a skew across hosts below that is not measured"
            )
        })
    }
}

/// Why there is no summary.
#[derive(Debug)]
pub enum Error {
    /// The path does not exist, cannot be read, or holds neither a trace nor event logs
    /// (exit status 2).
    CannotOpen(String),
    /// The input was found but could not be summarised (exit status 1).
    Failed(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::CannotOpen(message) | Error::Failed(message) => f.write_str(message),
        }
    }
}

/// The output's form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Csv,
}

/// `nccl-scorep summary`: prints the summary of `path` in `format`, its warnings on
/// stderr; the exit status is 0, 1 when the summary failed, 2 when `path` cannot be opened.
pub fn main(path: &Path, format: Format) -> ExitCode {
    let summary = match summarize(path) {
        Ok(summary) => summary,
        Err(error) => {
            eprintln!("nccl-scorep summary: {error}");
            return match error {
                Error::CannotOpen(_) => ExitCode::from(2),
                Error::Failed(_) => ExitCode::FAILURE,
            };
        }
    };
    for warning in &summary.warnings {
        eprintln!("nccl-scorep summary: warning: {warning}");
    }
    let text = match format {
        Format::Text => render(&summary),
        Format::Csv => render_csv(&summary),
        Format::Json => match serde_json::to_string_pretty(&summary) {
            Ok(json) => json + "\n",
            Err(error) => {
                eprintln!("nccl-scorep summary: {error}");
                return ExitCode::FAILURE;
            }
        },
    };
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        // `| head` stopped reading: not a failure.
        Err(error) if error.kind() != io::ErrorKind::BrokenPipe => {
            eprintln!("nccl-scorep summary: cannot write the report: {error}");
            ExitCode::FAILURE
        }
        _ => ExitCode::SUCCESS,
    }
}

/// Summarises `path`: an archive's anchor file, a directory holding `traces.otf2`, or a
/// run directory (its parts' archives, or else its `*.jsonl` event logs).
pub fn summarize(path: &Path) -> Result<Summary, Error> {
    summarize_in_detail(path).map(|detailed| detailed.summary)
}

/// A summary with the matched collectives and the transfers it was made of (for the
/// report's plots).
pub(crate) struct Detailed {
    pub summary: Summary,
    pub collectives: Vec<tables::Collective>,
    pub transfers: Vec<Transfer>,
    /// Communicator hash → its name, as the summary names it.
    pub comm_names: HashMap<String, String>,
}

/// [`summarize`], keeping what the summary was made of.
pub(crate) fn summarize_in_detail(path: &Path) -> Result<Detailed, Error> {
    let cannot_open =
        |e: io::Error| Error::CannotOpen(format!("cannot open {}: {e}", path.display()));
    let metadata = std::fs::metadata(path).map_err(cannot_open)?;
    let mut collected = Collected::default();
    let mut warnings = Vec::new();
    let source;
    let mut provenance = Value::Null;
    if metadata.is_file() {
        read_archive(path, &mut collected)?;
        provenance = provenance_of(path);
        // The merged trace of a run directory, named by its anchor file.
        if let Some(dir) = path.parent().filter(|_| {
            path.file_name()
                .is_some_and(|n| n == nccl_scorep_common::run_dir::ANCHOR_FILE)
        }) {
            warnings.extend(hygiene::unmerged_parts(&RunDir::new(dir)));
        }
        source = "trace";
    } else if RunDir::new(path).archive().is_file() {
        read_archive(&RunDir::new(path).archive(), &mut collected)?;
        provenance = provenance_of(&RunDir::new(path).archive());
        incomplete_parts(path, &mut collected);
        warnings.extend(hygiene::unmerged_parts(&RunDir::new(path)));
        source = "trace";
    } else if has_logs(path).map_err(cannot_open)? {
        read_logs(path, &mut collected)
            .map_err(|e| Error::Failed(format!("{}: {e}", path.display())))?;
        source = "event logs";
    } else {
        let anchors = part_anchors(path);
        if anchors.is_empty() {
            return Err(Error::CannotOpen(format!(
                "no trace (traces.otf2, parts/*/traces.otf2) and no event log (*.jsonl) in {}",
                path.display()
            )));
        }
        provenance = provenance_of(&anchors[0]);
        for anchor in anchors {
            read_archive(&anchor, &mut collected)?;
        }
        incomplete_parts(path, &mut collected);
        source = "trace";
    }
    // The instances move into the collectives (a copy would double the peak memory of a
    // big trace).
    let collectives = tables::collectives(std::mem::take(&mut collected.instances));
    let (stragglers, latest_ranks) = straggler::assess(&collectives, &collected.comm_names);
    let (operations, total_time_ms) =
        tables::operations(&collectives, &collected.transfers, &collected.comm_names);
    let ranks = tables::ranks(&collectives, &collected.transfers, &collected.comm_names);
    warnings.extend(collected.held_back.warning(total_time_ms));
    let summary = Summary {
        schema: SCHEMA,
        input: path.display().to_string(),
        source: source.to_owned(),
        processes: collected.processes,
        incomplete: collected.incomplete,
        ranks_without_part: collected.ranks_without_part,
        warnings,
        total_time_ms,
        operations,
        ranks,
        stragglers,
        latest_ranks,
        straggler_rule: Rule::default(),
        provenance,
        losses: collected.losses,
        lost_records: collected.lost_records,
        held_back: collected.held_back,
        gpu_times_rejected: collected.gpu_times_rejected,
        pxn_foreign_ops: collected.pxn_ops,
        pxn_linked_ops: collected.pxn_linked,
    };
    Ok(Detailed {
        summary,
        collectives,
        transfers: collected.transfers,
        comm_names: collected.comm_names,
    })
}

/// Reads one archive: an anchor OTF2 cannot open is "cannot open", anything after that a
/// failure.
/// The provenance the archive's properties record (null when it has none).
fn provenance_of(anchor: &Path) -> Value {
    let properties = otf2_sys::read::Reader::open(anchor)
        .and_then(|reader| reader.properties())
        .unwrap_or_default();
    if properties.is_empty() {
        return Value::Null;
    }
    nccl_scorep_merge::provenance_as_json(&properties)
}

/// Adds what the plugin recorded as lost or refused in `anchor`'s properties (the
/// `NCCL_SCOREP::LOST::…` counts: refusals leave no gap in the trace) to the losses.
fn losses_of(anchor: &Path, collected: &mut Collected) {
    let properties = otf2_sys::read::Reader::open(anchor)
        .and_then(|reader| reader.properties())
        .unwrap_or_default();
    for (name, value) in properties {
        let counter = nccl_scorep_common::provenance::counter_of_lost_property(&name);
        if let (Some(counter), Ok(value)) = (counter, value.parse::<u64>()) {
            if value > 0 {
                *collected.losses.entry(counter).or_default() += value;
            }
        }
    }
}

fn read_archive(anchor: &Path, collected: &mut Collected) -> Result<(), Error> {
    archive::read(anchor, collected).map_err(|e| match e {
        archive::Error::Open(message) => {
            Error::CannotOpen(format!("cannot open {}: {message}", anchor.display()))
        }
        archive::Error::Read(message) => Error::Failed(format!("{}: {message}", anchor.display())),
    })?;
    // Opened again for its properties only once it is known to be an archive.
    losses_of(anchor, collected);
    Ok(())
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
                let rejected = match name.as_str() {
                    "gpu_end_before_start" => Some("end_before_start"),
                    "gpu_beyond_host_bounds" => Some("beyond_host_bounds"),
                    "gpu_clock_jumps" => Some("clock_jump"),
                    _ => None,
                };
                match name.as_str() {
                    _ if rejected.is_some() => {
                        if let Some(reason) = rejected.filter(|_| value > 0) {
                            *collected
                                .gpu_times_rejected
                                .entry(reason.to_owned())
                                .or_default() += value;
                        }
                    }
                    "pxn_foreign_ops" => collected.pxn_ops += value,
                    "held_back" => collected.held_back.waits += value,
                    "held_back_ns" => collected.held_back.total_ns += value,
                    "held_back_longest_ns" => {
                        let longest = &mut collected.held_back.longest_ns;
                        *longest = (*longest).max(value);
                    }
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

#[cfg(test)]
mod tests {
    use super::HeldBackTotal;

    /// Waits of 1 % or more of the time in NCCL make a warning that gives both times.
    #[test]
    fn waits_for_the_plugin_warn_from_one_percent_of_the_time_in_nccl() {
        let waited = |ms: u64| HeldBackTotal {
            waits: 3,
            total_ns: ms * 1_000_000,
            longest_ns: ms * 1_000_000 / 2,
        };
        assert_eq!(HeldBackTotal::default().warning(1000.0), None);
        assert_eq!(waited(9).warning(1000.0), None);
        let warning = waited(20).warning(1000.0).expect("2 % warns");
        assert!(
            warning.starts_with(
                "NCCL's threads waited 20.000 ms in all for room in the plugin's buffers, \
                 against 1000.000 ms of the ranks' time in NCCL"
            ),
            "{warning}"
        );
        assert!(waited(1).warning(0.0).is_some(), "no time in NCCL at all");
    }
}
