//! `nccl-scorep merge --scorep <experiment-dir>`: adds the plugin's sidecar trace parts
//! (`<exp>/nccl/parts/<host>.<pid>[.N]/`) to Score-P's trace (`<exp>/traces.otf2`) in a
//! combined archive (`<exp>/nccl-combined/traces.otf2`), without rewriting any event and
//! without touching Score-P's files (docs/scorep-merge.md):
//!
//! 1. Score-P's global definitions are read record by record and written again unchanged,
//!    in their order and with their ids; its local definition and event files are linked.
//! 2. Each part is matched to a Score-P process ("MPI Rank N") through the launcher rank in
//!    the part's `scorep-clock.json`, else the pid (Score-P's "ProcessId" attribute on
//!    ProgramBegin), else host and order. The parts are unified among themselves (as
//!    `merge` does) and get ids above Score-P's: strings (equal texts share Score-P's id),
//!    regions, attributes, groups, communicators, location groups; locations get
//!    `((2^31 + n) << 32) | rank`, a local index Score-P never reaches. A part's process
//!    group becomes the Score-P process group; its accelerator groups are created by it.
//! 3. Time: the pairs of `scorep-clock.json` (or the "NCCL clock sync" regions found in
//!    Score-P's events) give ticks = a·ns + b; composed with the Score-P process's own clock
//!    offsets this is written as ClockOffset records of each of our locations, which OTF2
//!    readers interpolate linearly (and extrapolate beyond the first and last record).

mod archive;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use otf2_sys::read::{
    Attribute, ClockOffset, Comm, GlobalDefinition, Group, Location, LocationGroup, Paradigm,
    Region,
};
use otf2_sys::writing::GlobalDefWriter;
use otf2_sys::*;
use serde::{Deserialize, Serialize};

use crate::otf2::{close, create, message, write_local_definitions, ArchiveInfo};
use crate::{
    host_of, install, link_or_copy, part_dirs, unify, CommSummary, IdMaps, PartDefs, PlacedFiles,
    SkippedPart, TempDir, Unification,
};
use archive::{read_scorep_definitions, read_scorep_locals, ScorepDefs};
use nccl_scorep_common::run_dir::{ANCHOR_FILE, EVENT_FILES_DIR};
use nccl_scorep_common::RunDir;

/// The file the plugin writes next to each sidecar part's `traces.otf2`.
pub use nccl_scorep_common::run_dir::SCOREP_CLOCK_FILE as CLOCK_FILE;
/// The user region the plugin enters for the `sync-regions` clock source.
pub const DEFAULT_SYNC_REGION: &str = "NCCL clock sync";
/// Our locations get local indices from here up (`(index << 32) | rank`); Score-P counts
/// its locations of a process from 0.
pub const LOCATION_INDEX_BASE: u64 = 1 << 31;
/// How far (ns) before the first and after the last clock pair our outer ClockOffset
/// records lie: long end segments keep OTF2's extrapolation exact far beyond the pairs.
const ANCHOR_MARGIN_NS: u64 = 1_000_000_000_000;

// ---------------------------------------------------------------------------------------
// scorep-clock.json
// ---------------------------------------------------------------------------------------

/// One instant on both clocks.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
pub struct ClockPair {
    /// Our timestamp (CLOCK_MONOTONIC ns, what our events carry).
    pub ns: u64,
    /// Score-P's raw clock ticks at the same instant (before Score-P's clock offsets).
    pub scorep: u64,
}

#[derive(Debug, Deserialize)]
struct ClockFile {
    format: u32,
    pid: Option<u64>,
    launcher_rank: Option<i64>,
    hostname: Option<String>,
    source: String,
    #[serde(default)]
    pairs: Vec<ClockPair>,
    sync_region: Option<String>,
    #[serde(default)]
    sync_ns: Vec<u64>,
}

impl ClockFile {
    fn rank(&self) -> Option<u32> {
        self.launcher_rank.and_then(|r| u32::try_from(r).ok())
    }

    fn uses_sync_regions(&self) -> bool {
        self.source == "sync-regions"
    }

    fn sync_region(&self) -> &str {
        self.sync_region.as_deref().unwrap_or(DEFAULT_SYNC_REGION)
    }
}

/// Reads and checks a part's `scorep-clock.json`.
fn read_clock_file(part_dir: &Path) -> Result<ClockFile, String> {
    let path = part_dir.join(CLOCK_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!("no usable {CLOCK_FILE} ({e}): the part cannot be placed on Score-P's clock")
    })?;
    let file: ClockFile =
        serde_json::from_str(&text).map_err(|e| format!("{CLOCK_FILE} is not valid: {e}"))?;
    if file.format != 1 {
        return Err(format!(
            "{CLOCK_FILE} has format {}, nccl-scorep reads format 1",
            file.format
        ));
    }
    match file.source.as_str() {
        "metric-plugin" | "clock_gettime" => {
            if file.pairs.is_empty() {
                return Err(format!(
                    "{CLOCK_FILE}: source {:?} but no clock pairs",
                    file.source
                ));
            }
        }
        "sync-regions" => {
            if file.sync_ns.is_empty() {
                return Err(format!(
                    "{CLOCK_FILE}: source \"sync-regions\" but no sync_ns"
                ));
            }
        }
        other => {
            return Err(format!(
                "{CLOCK_FILE}: unknown source {other:?} (metric-plugin, clock_gettime or \
                 sync-regions)"
            ))
        }
    }
    Ok(file)
}

// ---------------------------------------------------------------------------------------
// The time map
// ---------------------------------------------------------------------------------------

/// ticks = ref_ticks + rate · (ns − ref_ns) (a line fitted to the pairs).
#[derive(Clone, Copy, Debug)]
struct LinearMap {
    ref_ns: u64,
    ref_ticks: u64,
    /// Fractional parts of the reference point (the means of the pairs).
    ref_ns_frac: f64,
    ref_ticks_frac: f64,
    rate: f64,
}

impl LinearMap {
    /// Score-P ticks at `ns`, as a real number relative to `ref_ticks` (exact in f64 for
    /// spans up to days).
    fn relative_ticks(&self, ns: u64) -> f64 {
        let dx = (i128::from(ns) - i128::from(self.ref_ns)) as f64 - self.ref_ns_frac;
        self.ref_ticks_frac + self.rate * dx
    }

    fn ticks(&self, ns: u64) -> i128 {
        i128::from(self.ref_ticks) + self.relative_ticks(ns).round() as i128
    }

    /// The ns at which the map gives `ticks` (rounded).
    fn inverse(&self, ticks: u64) -> i128 {
        let dy = (i128::from(ticks) - i128::from(self.ref_ticks)) as f64 - self.ref_ticks_frac;
        i128::from(self.ref_ns) + (self.ref_ns_frac + dy / self.rate).round() as i128
    }
}

/// How well the pairs of one part fit a line.
#[derive(Clone, Debug, Serialize)]
pub struct ClockFit {
    /// `metric-plugin`, `clock_gettime` or `sync-regions`.
    pub source: String,
    pub pairs: usize,
    /// Score-P ticks per ns, fitted (or nominal, from one pair).
    pub ticks_per_ns: f64,
    /// Score-P's nominal rate (ClockProperties) per ns.
    pub nominal_ticks_per_ns: f64,
    /// The fitted rate against the nominal one, parts per million.
    pub rate_deviation_ppm: f64,
    /// The largest distance of a pair from the line, ns (only with 3 or more pairs).
    pub max_residual_ns: Option<f64>,
    /// What the report calls the clock error of this part, ns: the largest residual with
    /// 3 or more pairs; 0 (exact at the pairs, drift between them unseen) with 2; unknown
    /// (None) with 1, where the nominal rate is assumed.
    pub estimated_error_ns: Option<f64>,
    /// Score-P's own clock offsets of the process that were composed in.
    pub scorep_clock_offsets: usize,
}

/// Fits ticks = a·ns + b to the pairs (least squares); one pair takes the nominal rate.
/// The largest relative difference between the fitted and the nominal rate of Score-P's
/// clock that is accepted (5 %; real clocks differ by ppm).
const MAX_RATE_DEVIATION: f64 = 0.05;

/// The pairs of a part whose clock comes from the "NCCL clock sync" regions: its sync times
/// in order against the process's Enters of the region (sorted), after the first `used`
/// of them, which earlier parts of the same process (earlier init/finalize cycles) took.
/// A note when fewer Enters are left than the part has sync times.
fn sync_pairs(sync_ns: &[u64], enters: &[u64], used: usize) -> (Vec<ClockPair>, Option<String>) {
    let available = enters.get(used..).unwrap_or_default();
    let pairs: Vec<ClockPair> = sync_ns
        .iter()
        .zip(available)
        .map(|(&ns, &scorep)| ClockPair { ns, scorep })
        .collect();
    let note = (available.len() < sync_ns.len()).then(|| {
        format!(
            "{} sync times against {} Enters left after the {used} of earlier parts of the \
             process: the first {} are paired in order",
            sync_ns.len(),
            available.len(),
            pairs.len()
        )
    });
    (pairs, note)
}

fn fit(
    pairs: &[ClockPair],
    nominal_rate: f64,
    source: &str,
) -> Result<(LinearMap, ClockFit), String> {
    let Some(first) = pairs.first() else {
        return Err("no clock pairs".to_owned());
    };
    let n = pairs.len() as f64;
    let xs: Vec<f64> = pairs
        .iter()
        .map(|p| (i128::from(p.ns) - i128::from(first.ns)) as f64)
        .collect();
    let ys: Vec<f64> = pairs
        .iter()
        .map(|p| (i128::from(p.scorep) - i128::from(first.scorep)) as f64)
        .collect();
    let mean_x = xs.iter().sum::<f64>() / n;
    let mean_y = ys.iter().sum::<f64>() / n;
    let sxx: f64 = xs.iter().map(|x| (x - mean_x).powi(2)).sum();
    let sxy: f64 = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| (x - mean_x) * (y - mean_y))
        .sum();
    let rate = if pairs.len() >= 2 && sxx > 0.0 {
        sxy / sxx
    } else {
        nominal_rate
    };
    if !(rate.is_finite() && rate > 0.0) {
        return Err(format!(
            "the clock pairs give a rate of {rate} Score-P ticks per ns: Score-P's clock must \
             advance with ours"
        ));
    }
    // Two clocks of one machine differ by a few ppm; pairs that disagree by percents were
    // paired wrongly, and the part's times would be wrong by as much.
    let deviation = rate / nominal_rate - 1.0;
    if nominal_rate > 0.0 && deviation.abs() > MAX_RATE_DEVIATION {
        return Err(format!(
            "the {source} clock pairs give {rate:.6} Score-P ticks per ns, {:+.0} ppm from \
             Score-P's nominal {nominal_rate:.6}: they do not belong together, and the part \
             would be misplaced in time",
            deviation * 1e6
        ));
    }
    let map = LinearMap {
        ref_ns: first.ns,
        ref_ticks: first.scorep,
        ref_ns_frac: mean_x,
        ref_ticks_frac: mean_y,
        rate,
    };
    let distinct = xs.iter().map(|x| x.to_bits()).collect::<HashSet<_>>().len();
    let max_residual = (distinct >= 3).then(|| {
        pairs
            .iter()
            .map(|p| {
                let predicted = map.relative_ticks(p.ns);
                let actual = (i128::from(p.scorep) - i128::from(first.scorep)) as f64;
                (predicted - actual).abs() / rate
            })
            .fold(0.0, f64::max)
    });
    let estimated = match distinct {
        0 | 1 => None,
        2 => Some(0.0),
        _ => max_residual,
    };
    Ok((
        map,
        ClockFit {
            source: source.to_owned(),
            pairs: pairs.len(),
            ticks_per_ns: rate,
            nominal_ticks_per_ns: nominal_rate,
            rate_deviation_ppm: (rate / nominal_rate - 1.0) * 1e6,
            max_residual_ns: max_residual,
            estimated_error_ns: estimated,
            scorep_clock_offsets: 0,
        },
    ))
}

/// The correction OTF2 applies to a location with these ClockOffset records, at raw time
/// `t`: none with fewer than two records; else the line through the two records around
/// `t`, the first two before the first record and the last two after the last (observed
/// with OTF2 3.0.2; docs/scorep-merge.md).
fn otf2_offset_at(records: &[ClockOffset], t: i128) -> f64 {
    if records.len() < 2 {
        return 0.0;
    }
    let index = records
        .windows(2)
        .position(|w| t < i128::from(w[1].time))
        .unwrap_or(records.len() - 2);
    let (a, b) = (records[index], records[index + 1]);
    let span = (i128::from(b.time) - i128::from(a.time)) as f64;
    if span <= 0.0 {
        return a.offset as f64;
    }
    let slope = (b.offset as f64 - a.offset as f64) / span;
    a.offset as f64 + slope * (t - i128::from(a.time)) as f64
}

/// Our ClockOffset records for a part: every event time `ns` reads back as
/// `S(ns) + scorep_offset(S(ns))` with `S` the fitted map, i.e. where Score-P's own
/// events of that process are shown. The composition is piecewise linear with its bends
/// at Score-P's interior offset records, so records go at those bends and at two outer
/// anchors far beyond the pairs.
fn our_clock_offsets(
    map: &LinearMap,
    pairs: &[ClockPair],
    scorep: &[ClockOffset],
) -> Vec<ClockOffset> {
    let mut bends: Vec<u64> = Vec::new();
    if scorep.len() > 2 {
        for record in &scorep[1..scorep.len() - 1] {
            let ns = map.inverse(record.time);
            if let Ok(ns) = u64::try_from(ns) {
                bends.push(ns);
            }
        }
    }
    let low = pairs
        .iter()
        .map(|p| p.ns)
        .chain(bends.iter().copied())
        .min();
    let high = pairs
        .iter()
        .map(|p| p.ns)
        .chain(bends.iter().copied())
        .max();
    let (Some(low), Some(high)) = (low, high) else {
        return Vec::new();
    };
    let mut times: BTreeSet<u64> = bends.into_iter().collect();
    times.insert(low.saturating_sub(ANCHOR_MARGIN_NS));
    times.insert(high.saturating_add(ANCHOR_MARGIN_NS));
    times
        .into_iter()
        .map(|ns| {
            let ticks = map.ticks(ns);
            let global = ticks + otf2_offset_at(scorep, ticks).round() as i128;
            let offset =
                (global - i128::from(ns)).clamp(i128::from(i64::MIN), i128::from(i64::MAX));
            ClockOffset {
                time: ns,
                offset: offset as i64,
                standard_deviation: 0.0,
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Ids
// ---------------------------------------------------------------------------------------

/// The next free id of each kind we add definitions of.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct FirstIds {
    pub string: u32,
    pub region: u32,
    pub attribute: u32,
    pub group: u32,
    pub comm: u32,
    pub location_group: u32,
}

// ---------------------------------------------------------------------------------------
// Score-P's processes and matching
// ---------------------------------------------------------------------------------------

/// One Score-P process location group.
#[derive(Clone, Debug)]
struct ScorepProcess {
    group: u32,
    name: String,
    rank: Option<u32>,
    host: String,
    node: u32,
    /// Its CPU thread locations, lowest id first.
    threads: Vec<u64>,
    pid: Option<u64>,
}

/// The rank of a process group: the low 32 bits of its locations' ids (Score-P numbers
/// them `(local << 32) | rank`), else the number in "MPI Rank N".
fn scorep_processes(defs: &ScorepDefs) -> Vec<ScorepProcess> {
    let mut processes = Vec::new();
    for group in defs.defs.location_groups.iter() {
        if u32::from(group.group_type) != OTF2_LOCATION_GROUP_TYPE_PROCESS {
            continue;
        }
        let members: Vec<&Location> = defs
            .defs
            .locations
            .iter()
            .filter(|l| l.location_group == group.id)
            .collect();
        let lows: BTreeSet<u32> = members.iter().map(|l| l.id as u32).collect();
        let name = defs.string(group.name).to_owned();
        let rank = if lows.len() == 1 {
            lows.first().copied()
        } else {
            name.strip_prefix("MPI Rank ")
                .and_then(|r| r.trim().parse().ok())
        };
        let mut threads: Vec<u64> = members
            .iter()
            .filter(|l| u32::from(l.location_type) == OTF2_LOCATION_TYPE_CPU_THREAD)
            .map(|l| l.id)
            .collect();
        threads.sort_unstable();
        let host = defs
            .defs
            .system_tree_nodes
            .get(&group.system_tree_parent)
            .map(|n| defs.string(n.name).to_owned())
            .unwrap_or_default();
        processes.push(ScorepProcess {
            group: group.id,
            name,
            rank,
            host,
            node: group.system_tree_parent,
            threads,
            pid: None,
        });
    }
    processes
}

/// A part that passed the first checks.
struct Candidate {
    name: String,
    dir: PathBuf,
    clock: ClockFile,
    defs: PartDefs,
    /// Our pid: from the json, else the part's name.
    pid: Option<u64>,
    host: String,
}

/// How a part was matched to its Score-P process.
fn match_parts(
    candidates: &[Candidate],
    processes: &[ScorepProcess],
    notes: &mut Vec<String>,
) -> Vec<Result<(usize, String), String>> {
    let mut result: Vec<Option<Result<(usize, String), String>>> =
        candidates.iter().map(|_| None).collect();
    for (c, candidate) in candidates.iter().enumerate() {
        if let Some(rank) = candidate.clock.rank() {
            result[c] = Some(
                processes
                    .iter()
                    .position(|p| p.rank == Some(rank))
                    .map(|p| (p, "launcher rank".to_owned()))
                    .ok_or_else(|| format!("Score-P's trace has no process of rank {rank}")),
            );
        } else if let Some(pid) = candidate.pid {
            let found = processes.iter().position(|p| {
                p.pid == Some(pid) && (p.host.is_empty() || p.host == candidate.host)
            });
            if let Some(p) = found {
                result[c] = Some(Ok((p, "pid (Score-P's ProcessId)".to_owned())));
            }
        }
    }
    // Host and order: the unmatched parts of a host (by pid) against the unmatched
    // processes of that host (by rank), when they are as many.
    let taken: HashSet<usize> = result
        .iter()
        .flatten()
        .filter_map(|r| r.as_ref().ok().map(|(p, _)| *p))
        .collect();
    let mut hosts: BTreeMap<&str, BTreeSet<(u64, usize)>> = BTreeMap::new();
    for (c, candidate) in candidates.iter().enumerate() {
        if result[c].is_none() {
            hosts
                .entry(candidate.host.as_str())
                .or_default()
                .insert((candidate.pid.unwrap_or(u64::MAX), c));
        }
    }
    for (host, parts) in hosts {
        // The parts of one process (same pid) count once.
        let pids: BTreeSet<u64> = parts.iter().map(|(pid, _)| *pid).collect();
        let mut free: Vec<usize> = (0..processes.len())
            .filter(|p| !taken.contains(p) && processes[*p].host == host)
            .collect();
        free.sort_by_key(|&p| (processes[p].rank, processes[p].group));
        if pids.len() == free.len() && !free.is_empty() {
            let index: HashMap<u64, usize> = pids.iter().copied().zip(free).collect();
            for (pid, c) in parts {
                result[c] = Some(Ok((index[&pid], "host and order".to_owned())));
            }
            notes.push(format!(
                "the parts of host {host:?} carry no launcher rank and Score-P recorded no \
                 matching pid: they were matched to its processes by order (ascending pid to \
                 ascending rank), which is a guess"
            ));
        } else {
            for (_, c) in parts {
                result[c] = Some(Err(format!(
                    "no launcher rank, and no Score-P process has its pid; host {host:?} has \
                     {} such part(s) for {} free Score-P process(es), so order cannot match them",
                    pids.len(),
                    free.len()
                )));
            }
        }
    }
    // One Score-P process per pid: a second process matched to it is refused.
    let mut owner: HashMap<usize, (Option<u64>, String)> = HashMap::new();
    for (c, candidate) in candidates.iter().enumerate() {
        if let Some(Ok((p, _))) = &result[c] {
            match owner.get(p) {
                Some((pid, first)) if *pid != candidate.pid => {
                    result[c] = Some(Err(format!(
                        "{} is already matched to part {first} of another process",
                        processes[*p].name
                    )));
                }
                _ => {
                    owner
                        .entry(*p)
                        .or_insert((candidate.pid, candidate.name.clone()));
                }
            }
        }
    }
    result
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err("not matched".to_owned())))
        .collect()
}

// ---------------------------------------------------------------------------------------
// The report
// ---------------------------------------------------------------------------------------

/// One part added to the combined archive.
#[derive(Clone, Debug, Serialize)]
pub struct AttachedPart {
    pub part: String,
    /// The Score-P process location group it was attached to ("MPI Rank N").
    pub scorep_process: String,
    pub scorep_rank: Option<u32>,
    /// How it was matched: "launcher rank", "pid (Score-P's ProcessId)", "host and order".
    pub matched_by: String,
    pub locations: usize,
    pub events: u64,
    pub clock: ClockFit,
}

/// Score-P's side of the combined archive.
#[derive(Clone, Debug, Serialize)]
pub struct ScorepSide {
    pub processes: usize,
    pub locations: usize,
    pub events: u64,
    pub definitions: u64,
    pub timer_resolution: u64,
    pub event_chunk_size: u64,
}

/// What `nccl-scorep merge --scorep` did.
#[derive(Debug, Serialize)]
pub struct ScorepReport {
    /// The combined anchor file.
    pub archive: PathBuf,
    /// Score-P's anchor file (left as it was).
    pub scorep_archive: PathBuf,
    pub scorep: ScorepSide,
    pub attached: Vec<AttachedPart>,
    pub skipped: Vec<SkippedPart>,
    /// The first id of each kind our definitions got (everything below is Score-P's).
    pub first_ids: FirstIds,
    /// Our locations are `((location_index_base + n) << 32) | rank`.
    pub location_index_base: u64,
    pub comms: Vec<CommSummary>,
    /// Files hard-linked, copied (where linking failed), and our event files laid out
    /// again for Score-P's chunk size (chunks moved, bytes unchanged).
    pub linked: usize,
    pub copied: usize,
    pub relaid: usize,
    pub notes: Vec<String>,
}

/// The report as text.
pub fn render(report: &ScorepReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "combined Score-P's trace ({} processes, {} locations, {} events) with {} NCCL part{} \
         into {}",
        report.scorep.processes,
        report.scorep.locations,
        report.scorep.events,
        report.attached.len(),
        if report.attached.len() == 1 { "" } else { "s" },
        report.archive.display()
    );
    for part in &report.attached {
        let clock = &part.clock;
        let error = match clock.estimated_error_ns {
            Some(e) if clock.pairs >= 3 => format!("max residual {e:.1} ns"),
            Some(_) => "exact at both pairs, drift between them not measurable".to_owned(),
            None => "one pair: nominal rate assumed, error unknown".to_owned(),
        };
        let _ = writeln!(
            out,
            "  {} -> {} (by {}): {} locations, {} events; clock {} from {} pair{}, {:.9} \
             ticks/ns ({:+.1} ppm vs nominal), {error}",
            part.part,
            part.scorep_process,
            part.matched_by,
            part.locations,
            part.events,
            clock.source,
            clock.pairs,
            if clock.pairs == 1 { "" } else { "s" },
            clock.ticks_per_ns,
            clock.rate_deviation_ppm,
        );
    }
    for comm in &report.comms {
        let _ = write!(out, "  communicator {}: {} ranks", comm.name, comm.members);
        if !comm.missing_ranks.is_empty() {
            let _ = write!(out, " (no part has rank {:?})", comm.missing_ranks);
        }
        out.push('\n');
    }
    if !report.skipped.is_empty() {
        let _ = writeln!(out, "skipped {} part(s):", report.skipped.len());
        for skip in &report.skipped {
            let _ = writeln!(out, "  {}: {}", skip.part, skip.reason);
        }
    }
    let ids = &report.first_ids;
    let _ = writeln!(
        out,
        "our ids start at: string {}, region {}, attribute {}, group {}, comm {}, location \
         group {}; locations ((2^31 + n) << 32) | rank",
        ids.string, ids.region, ids.attribute, ids.group, ids.comm, ids.location_group
    );
    let _ = writeln!(
        out,
        "files: {} linked, {} copied, {} event files laid out for Score-P's chunk size",
        report.linked, report.copied, report.relaid
    );
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    out.truncate(out.trim_end().len());
    out
}

// ---------------------------------------------------------------------------------------
// The merge
// ---------------------------------------------------------------------------------------

/// Where an event file of ours goes into the combined archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EventLayout {
    /// Same chunk size, or a single chunk that fits Score-P's: linked.
    Link,
    /// Several smaller chunks: each moved to the start of a chunk of Score-P's size.
    Relay,
}

/// How a part's event files fit Score-P's event chunk size.
fn event_layouts(
    dir: &Path,
    defs: &PartDefs,
    scorep_chunk: u64,
) -> Result<HashMap<u64, EventLayout>, String> {
    let mut layouts = HashMap::new();
    for location in defs.defs.locations.iter() {
        let path = dir
            .join(EVENT_FILES_DIR)
            .join(format!("{}.evt", location.id));
        let size = match std::fs::metadata(&path) {
            Ok(meta) => meta.len(),
            Err(_) if location.number_of_events == 0 => 0,
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let layout =
            if defs.event_chunk == scorep_chunk || size <= defs.event_chunk.min(scorep_chunk) {
                EventLayout::Link
            } else if defs.event_chunk < scorep_chunk {
                EventLayout::Relay
            } else {
                return Err(format!(
                "its event chunks ({} bytes) are larger than Score-P's ({scorep_chunk} bytes) and \
                 {} holds several: OTF2 cannot read it within Score-P's archive",
                defs.event_chunk,
                path.display()
            ));
            };
        layouts.insert(location.id, layout);
    }
    Ok(layouts)
}

/// The part's raw ns range (its ClockProperties are after its own clock offsets).
fn raw_range(defs: &PartDefs) -> Option<(u64, u64)> {
    let clock = defs.defs.clock?;
    let offsets = defs.clock_offsets.values().find(|o| !o.is_empty());
    let (first, last) = offsets
        .map(|o| (o[0].offset, o[o.len() - 1].offset))
        .unwrap_or((0, 0));
    let start = i128::from(clock.global_offset) - i128::from(first);
    let end = i128::from(clock.global_offset) + i128::from(clock.trace_length) - i128::from(last);
    Some((u64::try_from(start).ok()?, u64::try_from(end).ok()?))
}

/// Adds the parts of `<experiment>/nccl/parts/` to Score-P's trace `<experiment>/traces.otf2`
/// in `<output>/traces.otf2` (default `<experiment>/nccl-combined`), replacing an earlier
/// combined archive there.
pub fn merge_scorep(experiment: &Path, output: Option<&Path>) -> Result<ScorepReport, String> {
    otf2_sys::install_error_handler(otf2_sys::error::ignore);
    let scorep_anchor = experiment.join(ANCHOR_FILE);
    if !scorep_anchor.exists() {
        return Err(format!(
            "{} not found: is {} a Score-P experiment directory (SCOREP_EXPERIMENT_DIRECTORY) \
             of a run with SCOREP_ENABLE_TRACING=true?",
            scorep_anchor.display(),
            experiment.display()
        ));
    }
    let default_output = experiment.join("nccl-combined");
    let out = output.unwrap_or(&default_output);
    if same_dir(out, experiment) {
        return Err(format!(
            "the output directory {} is the experiment directory: the combined archive would \
             replace Score-P's traces.otf2",
            out.display()
        ));
    }
    let (reader, mut scorep) = read_scorep_definitions(&scorep_anchor)
        .map_err(|e| format!("Score-P's archive {}: {e}", scorep_anchor.display()))?;
    let scorep_clock = scorep.defs.clock.unwrap_or_default();
    let nominal_rate = scorep_clock.timer_resolution as f64 / 1e9;
    let mut notes = Vec::new();
    let mut skipped = Vec::new();

    // Our parts: a readable archive and a valid clock file.
    let run_dir = RunDir::scorep_sidecar(experiment).root().to_path_buf();
    let mut candidates = Vec::new();
    for (name, dir) in part_dirs(&run_dir)? {
        if name.starts_with('.') {
            continue; // the plugin's own files (a merge lock), not a part
        }
        let skip = |reason: String, incomplete: bool| SkippedPart {
            part: name.clone(),
            incomplete,
            reason,
        };
        let anchor = dir.join(ANCHOR_FILE);
        if !anchor.exists() {
            skipped.push(skip(
                "no traces.otf2: its process did not finish the trace (killed?)".to_owned(),
                true,
            ));
            continue;
        }
        let clock = match read_clock_file(&dir) {
            Ok(clock) => clock,
            Err(why) => {
                skipped.push(skip(why, false));
                continue;
            }
        };
        let defs = match crate::otf2::read_part(&anchor) {
            Ok(defs) => defs,
            Err(why) => {
                skipped.push(skip(format!("cannot be read: {why}"), false));
                continue;
            }
        };
        let pid = clock
            .pid
            .or_else(|| name.split('.').rev().find_map(|s| s.parse().ok()));
        let host = clock
            .hostname
            .clone()
            .unwrap_or_else(|| host_of(&name).to_owned());
        candidates.push(Candidate {
            name,
            dir,
            clock,
            defs,
            pid,
            host,
        });
    }

    // Score-P's events are read where a part needs them: pids (no launcher rank) and the
    // sync regions.
    let mut processes = scorep_processes(&scorep);
    let need_pid = candidates.iter().any(|c| c.clock.rank().is_none());
    let need_sync = candidates.iter().any(|c| c.clock.uses_sync_regions());
    let sync_names: HashSet<&str> = candidates
        .iter()
        .filter(|c| c.clock.uses_sync_regions())
        .map(|c| c.clock.sync_region())
        .collect();
    let sync_regions: HashSet<u32> = scorep
        .defs
        .regions
        .iter()
        .filter(|r| sync_names.contains(scorep.string(r.name)))
        .map(|r| r.id)
        .collect();
    let pid_attribute = scorep
        .defs
        .attributes
        .iter()
        .find(|a| {
            scorep.string(a.name) == "ProcessId" && u32::from(a.attribute_type) == OTF2_TYPE_UINT64
        })
        .map(|a| a.id);
    let scan: Vec<u64> = if need_sync || (need_pid && pid_attribute.is_some()) {
        processes.iter().flat_map(|p| p.threads.clone()).collect()
    } else {
        Vec::new()
    };
    let locals = read_scorep_locals(
        &reader,
        &scorep,
        &scan,
        &sync_regions,
        pid_attribute,
        need_sync,
    )
    .map_err(|e| format!("Score-P's archive {}: {e}", scorep_anchor.display()))?;
    drop(reader);
    notes.extend(locals.notes.iter().cloned());
    for process in &mut processes {
        process.pid = process
            .threads
            .iter()
            .find_map(|t| locals.pids.get(t))
            .copied();
    }
    if need_pid && pid_attribute.is_none() {
        notes.push(
            "Score-P's trace has no ProcessId attribute: parts without a launcher rank are \
             matched by host and order"
                .to_owned(),
        );
    }

    // Match, place on the clock, check the event files.
    let matches = match_parts(&candidates, &processes, &mut notes);
    let mut accepted: Vec<Accepted> = Vec::new();
    // Per Score-P process, the sync Enters its earlier parts (cycles) took: the parts come
    // in cycle order (`<host>.<pid>` before `<host>.<pid>.1`).
    let mut sync_enters_used: HashMap<usize, usize> = HashMap::new();
    for (candidate, matched) in candidates.into_iter().zip(matches) {
        let skip = |reason: String| SkippedPart {
            part: candidate.name.clone(),
            incomplete: false,
            reason,
        };
        let (process, matched_by) = match matched {
            Ok(m) => m,
            Err(why) => {
                skipped.push(skip(why));
                continue;
            }
        };
        let proc = &processes[process];
        let pairs = if candidate.clock.uses_sync_regions() {
            let region = candidate.clock.sync_region();
            let mut enters: Vec<u64> = proc
                .threads
                .iter()
                .flat_map(|t| locals.enters.get(t).into_iter().flatten())
                .filter(|(r, _)| {
                    scorep
                        .defs
                        .regions
                        .iter()
                        .any(|g| g.id == *r && scorep.string(g.name) == region)
                })
                .map(|(_, time)| *time)
                .collect();
            enters.sort_unstable();
            let used = sync_enters_used.entry(process).or_insert(0);
            if enters.len() <= *used {
                skipped.push(skip(format!(
                    "its clock source is sync-regions, but Score-P recorded no Enter of region \
                     {region:?} on {}",
                    proc.name
                )));
                continue;
            }
            let (pairs, note) = sync_pairs(&candidate.clock.sync_ns, &enters, *used);
            *used += candidate.clock.sync_ns.len();
            if let Some(note) = note {
                notes.push(format!(
                    "part {}: {note} (region {region:?} on {})",
                    candidate.name, proc.name
                ));
            }
            pairs
        } else {
            candidate.clock.pairs.clone()
        };
        let (map, mut fit) = match fit(&pairs, nominal_rate, &candidate.clock.source) {
            Ok(fitted) => fitted,
            Err(why) => {
                skipped.push(skip(why));
                continue;
            }
        };
        let scorep_offsets = proc
            .threads
            .iter()
            .filter_map(|t| locals.offsets.get(t))
            .find(|o| !o.is_empty())
            .cloned()
            .unwrap_or_default();
        fit.scorep_clock_offsets = scorep_offsets.len();
        let offsets = our_clock_offsets(&map, &pairs, &scorep_offsets);
        let layouts = match event_layouts(&candidate.dir, &candidate.defs, scorep.event_chunk) {
            Ok(layouts) => layouts,
            Err(why) => {
                skipped.push(skip(why));
                continue;
            }
        };
        let mapped_range = raw_range(&candidate.defs).map(|(lo, hi)| {
            let at = |ns: u64| {
                let ticks = map.ticks(ns);
                ticks + otf2_offset_at(&scorep_offsets, ticks).round() as i128
            };
            (at(lo), at(hi))
        });
        accepted.push(Accepted {
            candidate,
            process,
            matched_by,
            fit,
            offsets,
            layouts,
            mapped_range,
        });
    }
    if accepted.is_empty() {
        let mut message = format!(
            "no NCCL part could be added to Score-P's trace (parts in {})",
            run_dir
                .join(nccl_scorep_common::run_dir::PARTS_DIR)
                .display()
        );
        for skip in &skipped {
            let _ = write!(message, "\n  {}: {}", skip.part, skip.reason);
        }
        return Err(message);
    }

    // Unify our parts among themselves, then place their ids above Score-P's.
    let names: Vec<String> = accepted.iter().map(|a| a.candidate.name.clone()).collect();
    let parts: Vec<PartDefs> = accepted
        .iter_mut()
        .map(|a| std::mem::take(&mut a.candidate.defs))
        .collect();
    let Unification {
        unified,
        placeholders: _,
        maps,
        comms,
        renumbered: _,
        notes: unify_notes,
    } = unify(&parts, &names, false)?;
    notes.extend(unify_notes);
    let part_process: Vec<usize> = accepted.iter().map(|a| a.process).collect();
    let plan = place_ids(
        &scorep,
        &processes,
        &unified,
        &maps,
        &part_process,
        &mut notes,
    )?;

    // ClockProperties: Score-P's, widened only if our events would lie outside.
    let mut clock = scorep_clock;
    let (mut low, mut high) = (
        i128::from(clock.global_offset),
        i128::from(clock.global_offset) + i128::from(clock.trace_length),
    );
    for a in &accepted {
        if let Some((lo, hi)) = a.mapped_range {
            low = low.min(lo);
            high = high.max(hi);
        }
    }
    if low < i128::from(clock.global_offset)
        || high > i128::from(clock.global_offset) + i128::from(clock.trace_length)
    {
        let start = u64::try_from(low.max(0)).unwrap_or(0);
        let end = u64::try_from(high.max(0)).unwrap_or(u64::MAX);
        notes.push(format!(
            "NCCL events reach outside Score-P's trace range; the combined ClockProperties \
             span [{start}, {end}] instead of [{}, {}]",
            clock.global_offset,
            clock.global_offset.saturating_add(clock.trace_length)
        ));
        clock.global_offset = start;
        clock.trace_length = end.saturating_sub(start).max(1);
    }
    scorep.defs.clock = Some(clock);

    // Write in a temporary directory of the output directory, then move into place.
    let temp = TempDir::create(out, "combining")?;
    let part_offsets: Vec<&[ClockOffset]> = accepted.iter().map(|a| a.offsets.as_slice()).collect();
    write_combined(&temp.0, &scorep, &plan, &parts, &part_offsets)?;

    let mut files = PlacedFiles::default();
    let traces = temp.0.join(EVENT_FILES_DIR);
    let scorep_traces = experiment.join(EVENT_FILES_DIR);
    let mut scorep_events = 0;
    for location in scorep.defs.locations.iter() {
        scorep_events += location.number_of_events;
        for ext in ["evt", "def"] {
            let from = scorep_traces.join(format!("{}.{ext}", location.id));
            if !from.exists() {
                continue;
            }
            let to = traces.join(format!("{}.{ext}", location.id));
            match link_or_copy(&from, &to) {
                Ok(true) => files.linked += 1,
                Ok(false) => files.copied += 1,
                Err(e) => return Err(format!("cannot link or copy {}: {e}", from.display())),
            }
        }
    }
    let mut attached = Vec::new();
    for (p, a) in accepted.iter().enumerate() {
        let mut events = 0;
        for location in parts[p].defs.locations.iter() {
            events += location.number_of_events;
            let global = plan.maps[p].location(location.id);
            let relay = match a.layouts.get(&location.id) {
                Some(EventLayout::Relay) => Some((parts[p].event_chunk, scorep.event_chunk)),
                _ => None,
            };
            files.add_events(&a.candidate.dir, location, &traces, global, relay)?;
        }
        let proc = &processes[a.process];
        attached.push(AttachedPart {
            part: a.candidate.name.clone(),
            scorep_process: proc.name.clone(),
            scorep_rank: proc.rank,
            matched_by: a.matched_by.clone(),
            locations: parts[p].defs.locations.len(),
            events,
            clock: a.fit.clone(),
        });
    }
    install(&temp.0, out)?;
    drop(temp);

    Ok(ScorepReport {
        archive: out.join(ANCHOR_FILE),
        scorep_archive: scorep_anchor,
        scorep: ScorepSide {
            processes: processes.len(),
            locations: scorep.defs.locations.len(),
            events: scorep_events,
            definitions: scorep.records.len() as u64,
            timer_resolution: scorep_clock.timer_resolution,
            event_chunk_size: scorep.event_chunk,
        },
        attached,
        skipped,
        first_ids: plan.first,
        location_index_base: LOCATION_INDEX_BASE,
        comms,
        linked: files.linked,
        copied: files.copied,
        relaid: files.relaid,
        notes,
    })
}

/// A part that will be added.
struct Accepted {
    candidate: Candidate,
    process: usize,
    matched_by: String,
    fit: ClockFit,
    offsets: Vec<ClockOffset>,
    layouts: HashMap<u64, EventLayout>,
    mapped_range: Option<(i128, i128)>,
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

// ---------------------------------------------------------------------------------------
// Ids of our definitions in the combined archive
// ---------------------------------------------------------------------------------------

/// Our definitions with their combined ids, and each part's mapping tables.
struct Plan {
    first: FirstIds,
    /// (id, text) of the strings Score-P does not have.
    strings: Vec<(u32, String)>,
    paradigms: Vec<Paradigm>,
    location_groups: Vec<LocationGroup>,
    locations: Vec<Location>,
    regions: Vec<Region>,
    groups: Vec<Group>,
    comms: Vec<Comm>,
    attributes: Vec<Attribute>,
    maps: Vec<IdMaps>,
}

fn place_ids(
    scorep: &ScorepDefs,
    processes: &[ScorepProcess],
    unified: &crate::Unified,
    maps: &[IdMaps],
    part_process: &[usize],
    notes: &mut Vec<String>,
) -> Result<Plan, String> {
    let first = scorep.next;
    let shift = |base: u32, id: u32| -> Result<u32, String> {
        if id == u32::MAX {
            return Ok(id);
        }
        base.checked_add(id)
            .filter(|&v| v != u32::MAX)
            .ok_or_else(|| "too many definitions for one archive".to_owned())
    };

    // Strings: Score-P's id for a text it has, else a new one.
    let scorep_ids: HashMap<&str, u32> = scorep
        .defs
        .strings
        .by_id()
        .map(|(id, text)| (text.value.as_str(), id))
        .collect();
    let mut string_map = Vec::with_capacity(unified.strings.len());
    let mut strings = Vec::new();
    let mut next_string = first.string;
    for text in &unified.strings {
        if let Some(&id) = scorep_ids.get(text.as_str()) {
            string_map.push(id);
        } else {
            string_map.push(next_string);
            strings.push((next_string, text.clone()));
            next_string = shift(next_string, 1)?;
        }
    }
    let s = |id: u32| -> u32 {
        if id == u32::MAX {
            id
        } else {
            string_map[id as usize]
        }
    };

    // Paradigms: Score-P's record wins.
    let mut paradigms = Vec::new();
    for p in &unified.paradigms {
        match scorep.defs.paradigms.get(&p.paradigm).map(|p| p.name) {
            Some(name) => notes.push(format!(
                "Score-P names paradigm {} {:?}; its name is kept for our regions and \
                 communicators too",
                p.paradigm,
                scorep.string(name)
            )),
            None => paradigms.push(Paradigm {
                name: s(p.name),
                ..*p
            }),
        }
    }

    // Which Score-P process each unified location group and location belongs to.
    let mut group_owner: HashMap<u32, usize> = HashMap::new();
    let mut location_owner: HashMap<u64, usize> = HashMap::new();
    for (p, map) in maps.iter().enumerate() {
        for &global in map.location_groups.values() {
            group_owner.entry(global as u32).or_insert(part_process[p]);
        }
        for &global in map.locations.values() {
            location_owner.entry(global).or_insert(part_process[p]);
        }
    }

    // Location groups: our process groups are Score-P's; the others are new, created by
    // it and under its node.
    let mut group_map: HashMap<u32, u32> = HashMap::new();
    let mut next_group = first.location_group;
    for (id, group) in unified.location_groups.iter().enumerate() {
        let id = id as u32;
        let owner = *group_owner
            .get(&id)
            .ok_or_else(|| format!("location group {id} of the parts has no process"))?;
        if u32::from(group.group_type) == OTF2_LOCATION_GROUP_TYPE_PROCESS {
            group_map.insert(id, processes[owner].group);
        } else {
            group_map.insert(id, next_group);
            next_group = shift(next_group, 1)?;
        }
    }
    let mut location_groups = Vec::new();
    for (id, group) in unified.location_groups.iter().enumerate() {
        let id = id as u32;
        if u32::from(group.group_type) == OTF2_LOCATION_GROUP_TYPE_PROCESS {
            continue;
        }
        let owner = &processes[group_owner[&id]];
        let creator = match group.creating_location_group {
            u32::MAX => owner.group,
            c => group_map[&c],
        };
        location_groups.push(LocationGroup {
            id: group_map[&id],
            name: s(group.name),
            group_type: group.group_type,
            system_tree_parent: owner.node,
            creating_location_group: creator,
        });
    }

    // Locations: ((2^31 + n) << 32) | rank, never one of Score-P's.
    let taken: HashSet<u64> = scorep.defs.locations.iter().map(|l| l.id).collect();
    let mut next_index: HashMap<usize, u64> = HashMap::new();
    let mut location_map: HashMap<u64, u64> = HashMap::new();
    let mut locations = Vec::new();
    for location in &unified.locations {
        let owner = location_owner[&location.id];
        let low = processes[owner]
            .rank
            .unwrap_or_else(|| processes[owner].threads.first().map_or(0, |&t| t as u32));
        let index = next_index.entry(owner).or_insert(LOCATION_INDEX_BASE);
        let mut id = (*index << 32) | u64::from(low);
        while taken.contains(&id) {
            *index += 1;
            id = (*index << 32) | u64::from(low);
        }
        *index += 1;
        location_map.insert(location.id, id);
        locations.push(Location {
            id,
            name: s(location.name),
            location_group: group_map[&location.location_group],
            ..*location
        });
    }

    let regions = unified
        .regions
        .iter()
        .enumerate()
        .map(|(id, r)| {
            Ok(Region {
                id: shift(first.region, id as u32)?,
                name: s(r.name),
                canonical_name: s(r.canonical_name),
                description: s(r.description),
                source_file: s(r.source_file),
                ..*r
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let attributes = unified
        .attributes
        .iter()
        .enumerate()
        .map(|(id, a)| {
            Ok(Attribute {
                id: shift(first.attribute, id as u32)?,
                name: s(a.name),
                description: s(a.description),
                ..*a
            })
        })
        .collect::<Result<Vec<_>, String>>()?;

    // Groups: COMM_LOCATIONS members are location ids; COMM_GROUP members are positions;
    // REGIONS members are region ids.
    let mut groups = Vec::new();
    for (id, g) in unified.groups.iter().enumerate() {
        let is_locations = u32::from(g.group_type) == OTF2_GROUP_TYPE_COMM_LOCATIONS;
        if is_locations
            && scorep.defs.groups.iter().any(|s| {
                u32::from(s.group_type) == OTF2_GROUP_TYPE_COMM_LOCATIONS
                    && s.paradigm == g.paradigm
            })
        {
            return Err(format!(
                "Score-P's trace already has a COMM_LOCATIONS group of paradigm {}, the one \
                 our communicators use: the two cannot share it",
                g.paradigm
            ));
        }
        let members = if is_locations {
            g.members.iter().map(|m| location_map[m]).collect()
        } else if u32::from(g.group_type) == OTF2_GROUP_TYPE_REGIONS {
            // Region groups list region ids, which move with the regions.
            g.members
                .iter()
                .map(|&m| Ok(u64::from(shift(first.region, m as u32)?)))
                .collect::<Result<Vec<u64>, String>>()?
        } else {
            g.members.clone()
        };
        groups.push(Group {
            id: shift(first.group, id as u32)?,
            name: s(g.name),
            members,
            ..g.clone()
        });
    }
    let comms = unified
        .comms
        .iter()
        .enumerate()
        .map(|(id, c)| {
            Ok(Comm {
                id: shift(first.comm, id as u32)?,
                name: s(c.name),
                group: shift(first.group, c.group)?,
                parent: shift(first.comm, c.parent)?,
                flags: c.flags,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;

    // Each part's ids → combined ids (its mapping tables).
    let compose = |table: &BTreeMap<u64, u64>, f: &dyn Fn(u64) -> Result<u64, String>| {
        table
            .iter()
            .map(|(&local, &global)| Ok((local, f(global)?)))
            .collect::<Result<BTreeMap<u64, u64>, String>>()
    };
    let mut part_maps = Vec::new();
    for map in maps {
        part_maps.push(IdMaps {
            strings: compose(&map.strings, &|g| Ok(u64::from(s(g as u32))))?,
            attributes: compose(&map.attributes, &|g| {
                Ok(u64::from(shift(first.attribute, g as u32)?))
            })?,
            locations: compose(&map.locations, &|g| Ok(location_map[&g]))?,
            regions: compose(&map.regions, &|g| {
                Ok(u64::from(shift(first.region, g as u32)?))
            })?,
            groups: compose(&map.groups, &|g| {
                Ok(u64::from(shift(first.group, g as u32)?))
            })?,
            comms: compose(&map.comms, &|g| Ok(u64::from(shift(first.comm, g as u32)?)))?,
            location_groups: compose(&map.location_groups, &|g| {
                Ok(u64::from(group_map[&(g as u32)]))
            })?,
        });
    }
    Ok(Plan {
        first,
        strings,
        paradigms,
        location_groups,
        locations,
        regions,
        groups,
        comms,
        attributes,
        maps: part_maps,
    })
}

// ---------------------------------------------------------------------------------------
// Writing the combined archive
// ---------------------------------------------------------------------------------------

/// Writes `<dir>/traces.otf2` and `traces.def` (Score-P's definitions as read, then ours)
/// and our locations' local definitions (mapping tables and clock offsets).
fn write_combined(
    dir: &Path,
    scorep: &ScorepDefs,
    plan: &Plan,
    parts: &[PartDefs],
    offsets: &[&[ClockOffset]],
) -> Result<(), String> {
    let info = ArchiveInfo {
        creator: concat!("nccl-scorep merge --scorep ", env!("CARGO_PKG_VERSION")),
        description: "Score-P trace with the NCCL timelines of the nccl-scorep plugin added",
        machine: None,
    };
    let archive = create(dir, scorep.event_chunk, scorep.definition_chunk, &info)?;
    write_local_definitions(
        &archive,
        dir,
        parts,
        &plan.maps,
        |part, _| offsets[part],
        &[],
    )?;
    let global = archive.global_def_writer().map_err(message)?;
    let clock = scorep.defs.clock.unwrap_or_default();
    for record in &scorep.records {
        let written = match record {
            GlobalDefinition::ClockProperties(_) => global.clock_properties(&clock),
            other => global.write(other),
        };
        written.map_err(|e| e.describe("writing one of Score-P's definitions failed"))?;
    }
    write_our_definitions(&global, plan).map_err(message)?;
    close(archive, "combined archive")
}

/// Writes our definitions after Score-P's, each after what it refers to.
fn write_our_definitions(w: &GlobalDefWriter, plan: &Plan) -> Result<(), otf2_sys::Error> {
    for (id, text) in &plan.strings {
        w.string(*id, text)?;
    }
    for p in &plan.paradigms {
        w.paradigm(p)?;
    }
    for g in &plan.location_groups {
        w.location_group(g)?;
    }
    for l in &plan.locations {
        w.location(l)?;
    }
    for r in &plan.regions {
        w.region(r)?;
    }
    for g in &plan.groups {
        w.group(g)?;
    }
    for c in &plan.comms {
        w.comm(c)?;
    }
    for a in &plan.attributes {
        w.attribute(a)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset(time: u64, offset: i64) -> ClockOffset {
        ClockOffset {
            time,
            offset,
            standard_deviation: 0.0,
        }
    }

    #[test]
    fn otf2_offsets_extrapolate_the_end_segments() {
        // As OTF2 3.0.2 reads them (docs/scorep-merge.md): raw 100 with records
        // (300, +1000), (600, +4000) reads as -900; raw 700 as 5700.
        let records = [offset(300, 1000), offset(600, 4000)];
        assert_eq!(100.0 + otf2_offset_at(&records, 100), -900.0);
        assert_eq!(700.0 + otf2_offset_at(&records, 700), 5700.0);
        assert_eq!(otf2_offset_at(&records[..1], 100), 0.0);
    }

    #[test]
    fn two_pairs_fit_exactly_and_one_takes_the_nominal_rate() {
        let pairs = [
            ClockPair {
                ns: 1_000_000_000,
                scorep: 5_000_000_000,
            },
            ClockPair {
                ns: 3_000_000_000,
                scorep: 9_800_000_000,
            },
        ];
        let (map, fit_) = fit(&pairs, 2.39, "metric-plugin").unwrap();
        assert!((fit_.ticks_per_ns - 2.4).abs() < 1e-12);
        // Pairs that do not belong together: refused, not placed percents off.
        let refused = fit(&pairs, 2.0, "sync-regions").unwrap_err();
        assert!(refused.contains("+200000 ppm"), "{refused}");
        assert_eq!(map.ticks(2_000_000_000), 7_400_000_000);
        assert_eq!(fit_.estimated_error_ns, Some(0.0));
        let (map, fit_) = fit(&pairs[..1], 2.0, "sync-regions").unwrap();
        assert_eq!(map.ticks(2_000_000_000), 7_000_000_000);
        assert_eq!(fit_.estimated_error_ns, None);
    }

    #[test]
    fn a_second_cycle_pairs_its_sync_times_with_the_enters_after_the_first_ones() {
        // Cycle 1 synced at ns 100 and 200, cycle 2 at 1000 and 1100; Score-P saw four
        // Enters, 2 ticks per ns.
        let enters = [200, 400, 2000, 2200];
        let (first, note) = sync_pairs(&[100, 200], &enters, 0);
        assert_eq!(note, None);
        assert_eq!(
            first.iter().map(|p| p.scorep).collect::<Vec<_>>(),
            [200, 400]
        );
        let (second, note) = sync_pairs(&[1000, 1100], &enters, 2);
        assert_eq!(note, None);
        assert_eq!(
            second.iter().map(|p| p.scorep).collect::<Vec<_>>(),
            [2000, 2200]
        );
        let (map, fit_) = fit(&second, 2.0, "sync-regions").unwrap();
        assert_eq!(map.ticks(1050), 2100);
        assert!(fit_.rate_deviation_ppm.abs() < 1e-6);
        let (short, note) = sync_pairs(&[1000, 1100, 1200], &enters, 2);
        assert_eq!(short.len(), 2);
        assert!(note.unwrap().contains("3 sync times against 2 Enters left"));
    }

    #[test]
    fn three_pairs_report_their_largest_residual() {
        let pair = |ns: u64, scorep: u64| ClockPair { ns, scorep };
        // The middle pair is 30 ticks (12.5 ns at 2.4 ticks/ns) off the line through the
        // outer two; least squares spreads it: residuals 10, 20, 10 ticks.
        let pairs = [pair(0, 0), pair(1000, 2430), pair(2000, 4800)];
        let (_, fitted) = fit(&pairs, 2.4, "clock_gettime").unwrap();
        let residual = fitted.max_residual_ns.unwrap();
        assert!((residual - 20.0 / 2.4).abs() < 1e-6, "{residual}");
        assert_eq!(fitted.estimated_error_ns, Some(residual));
    }

    #[test]
    fn our_offsets_compose_with_scorep_offsets() {
        let pairs = [
            ClockPair {
                ns: 10_000_000_000_000,
                scorep: 50_000_000_000,
            },
            ClockPair {
                ns: 10_010_000_000_000,
                scorep: 50_000_000_000 + 24_000_000_000,
            },
        ];
        let (map, _) = fit(&pairs, 2.4, "metric-plugin").unwrap();
        let scorep = [
            offset(50_000_000_000, 1000),
            offset(60_000_000_000, 3000),
            offset(74_000_000_000, 2000),
        ];
        let ours = our_clock_offsets(&map, &pairs, &scorep);
        assert_eq!(ours.len(), 3, "{ours:?}");
        for ns in [
            9_000_000_000_000u64,
            10_000_000_000_000,
            10_003_000_000_000,
            10_009_999_999_999,
            11_000_000_000_000,
        ] {
            let ticks = map.ticks(ns);
            let expected = ticks as f64 + otf2_offset_at(&scorep, ticks);
            let read = ns as f64 + otf2_offset_at(&ours, i128::from(ns));
            assert!((read - expected).abs() <= 1.0, "{ns}: {read} vs {expected}");
        }
    }
}
