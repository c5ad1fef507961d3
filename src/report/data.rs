//! What the report shows, gathered from the trace: the summary and its matched
//! collectives (bandwidth per size bucket, arrival skew), the point-to-point bytes, the
//! time per process (from the job's CUBE profile beside the trace when it is of this
//! trace, else from a profile's pass over it), and the intervals of one time window.
//!
//! Memory: the summary keeps one record per rank and operation, the profile one value per
//! call path and location, the timeline only the intervals of its window (at most
//! [`MAX_TIMELINE_INTERVALS`]).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use otf2_sys::read::{AttributeValue, EventContext, EventVisitor, GlobalDefs, Reader};
use serde::Serialize;

use nccl_scorep_common::run_dir::PROFILE_FILE;

use crate::export::Window;
use crate::nccl_ops::size_and_factor;
use crate::profile::{location_kind, natural_key, LocationKind, Metric};
use crate::summary::tables::{comm_name, Collective};
use crate::summary::{Detailed, Summary};

/// The most intervals the timeline keeps: a window with more is cut at the time where
/// they run out (the page says so).
pub const MAX_TIMELINE_INTERVALS: usize = 40_000;
/// The most instances the heatmap shows as columns: more are averaged in groups.
pub const MAX_HEATMAP_COLUMNS: usize = 200;

/// Everything the page and the pictures are made of.
pub struct Report {
    pub input: String,
    pub summary: Summary,
    pub bandwidth: Vec<BandwidthSeries>,
    pub heatmap: Option<Heatmap>,
    pub p2p: Vec<P2pMatrix>,
    pub time_split: Vec<ProcessTime>,
    /// Where [`Report::time_split`] was read: the profile file, or the trace.
    pub time_split_source: String,
    pub timeline: Timeline,
}

/// Bus bandwidth per size bucket of one communicator × collective.
#[derive(Debug, Serialize)]
pub struct BandwidthSeries {
    pub label: String,
    pub points: Vec<BandwidthPoint>,
}

/// One size bucket: the median bus bandwidth of its instances, with their spread.
#[derive(Debug, Serialize)]
pub struct BandwidthPoint {
    /// The median size of the bucket's instances (as NCCL's tests count it), bytes.
    pub bytes: f64,
    pub calls: usize,
    pub min_gbs: f64,
    pub median_gbs: f64,
    pub max_gbs: f64,
}

/// Arrival skew of one collective: per rank and instance, the time after the first rank
/// arrived, µs.
#[derive(Debug, Serialize)]
pub struct Heatmap {
    pub comm: String,
    pub func: String,
    pub ranks: Vec<i64>,
    /// The first sequence number of each column (a column averages several instances
    /// when there are more than [`MAX_HEATMAP_COLUMNS`]).
    pub columns: Vec<usize>,
    pub instances: usize,
    /// `[rank row][column]`, µs.
    pub skew_us: Vec<Vec<f64>>,
}

impl Heatmap {
    /// Each row's median skew, µs (the median: a job's first calls carry its start-up).
    pub fn row_medians(&self) -> Vec<f64> {
        self.skew_us
            .iter()
            .map(|row| {
                let mut sorted = row.clone();
                sorted.sort_by(f64::total_cmp);
                sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
            })
            .collect()
    }

    /// The row with the largest median skew: the latest rank.
    pub fn hottest_rank(&self) -> Option<i64> {
        self.row_medians()
            .iter()
            .zip(&self.ranks)
            .max_by(|a, b| a.0.total_cmp(b.0))
            .map(|(_, &rank)| rank)
    }
}

/// Bytes sent from rank to rank in one communicator.
#[derive(Debug, Serialize)]
pub struct P2pMatrix {
    pub comm: String,
    pub nranks: usize,
    /// `[sender][receiver]`.
    pub bytes: Vec<Vec<u64>>,
}

/// The kinds of time the stacked bars split a process's time into.
pub const TIME_KINDS: [(Metric, &str); 6] = [
    (Metric::HostTime, "host: API calls, enqueues, launches"),
    (Metric::KernelTime, "GPU kernels (all channels)"),
    (Metric::ProxyGpuWait, "proxy: GPU wait"),
    (Metric::ProxyPeerWait, "proxy: peer wait"),
    (Metric::ProxyNetworkWait, "proxy: network wait"),
    (Metric::ProxyFlush, "proxy: flush"),
];

/// Where one process's time went, seconds, in the order of [`TIME_KINDS`].
#[derive(Debug, Serialize)]
pub struct ProcessTime {
    pub process: String,
    pub seconds: Vec<f64>,
}

/// The intervals of one time window on the ops streams and GPU channels.
#[derive(Debug, Default, Serialize)]
pub struct Timeline {
    /// The window, ns since the trace's start.
    pub start_ns: i64,
    pub end_ns: i64,
    /// Why this window.
    pub why: String,
    pub tracks: Vec<Track>,
    /// Set when [`MAX_TIMELINE_INTERVALS`] cut the window short: where, ns.
    pub cut_at_ns: Option<i64>,
}

impl Timeline {
    /// The names of the ops streams' intervals, sorted: an operation's colour is its place
    /// here (the picture and the page's script use the same rule).
    pub fn operation_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .tracks
            .iter()
            .filter(|t| t.kind == "ops")
            .flat_map(|t| t.intervals.iter().map(|i| i.name.as_str()))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

/// One location of the timeline.
#[derive(Debug, Serialize)]
pub struct Track {
    pub process: String,
    pub name: String,
    /// `ops` or `channel`.
    pub kind: &'static str,
    pub intervals: Vec<Interval>,
}

/// One interval, ns since the trace's start.
#[derive(Debug, Serialize)]
pub struct Interval {
    pub start: i64,
    pub end: i64,
    /// Nesting depth on its location (0: outermost).
    pub depth: u32,
    pub name: String,
    /// func, bytes, seq, algo/proto as far as the interval has them.
    pub details: String,
}

/// Gathers the report of the merged trace at `anchor`; `window` overrides the timeline's
/// default window.
pub fn gather(anchor: &Path, window: Option<Window>) -> Result<Report, crate::summary::Error> {
    let Detailed {
        summary,
        collectives,
        transfers,
        comm_names,
    } = crate::summary::summarize_in_detail(anchor)?;
    let failed = crate::summary::Error::Failed;
    let bandwidth = bandwidth(&collectives, &transfers, &comm_names);
    let latest = summary
        .latest_ranks
        .first()
        .map(|l| (l.comm_hash.as_str(), l.func.as_str()));
    let heatmap = heatmap(latest, &collectives, &comm_names);
    let p2p = p2p_matrices(&transfers, &comm_names);
    let slowest = slowest_window(&collectives, &comm_names);
    drop(collectives);
    drop(transfers);
    let (time_split, time_split_source) = match time_split_from_profile(anchor) {
        Some(split) => (split, format!("the job's CUBE profile ({PROFILE_FILE})")),
        None => (time_split(anchor).map_err(failed)?, "the trace".to_owned()),
    };
    let timeline = timeline(anchor, window, slowest).map_err(failed)?;
    Ok(Report {
        input: summary.input.clone(),
        summary,
        bandwidth,
        heatmap,
        p2p,
        time_split,
        time_split_source,
        timeline,
    })
}

/// Per communicator and collective, and per communicator for its sends, the bus
/// bandwidth of each call: a collective's from its last rank's arrival to its end, a
/// send's from its start to its end (bus factor 1).
fn bandwidth(
    collectives: &[Collective],
    transfers: &[crate::summary::Transfer],
    comm_names: &HashMap<String, String>,
) -> Vec<BandwidthSeries> {
    let mut series = Vec::new();
    for collective in collectives {
        let calls = collective.complete.iter().map(|instance| {
            let last = instance.last_arrival();
            let end = instance
                .parts
                .iter()
                .map(|p| p.completion_ns)
                .max()
                .unwrap_or(last);
            let (size, factor) = size_and_factor(
                &collective.func,
                instance.raw_bytes,
                collective.nranks.max(1),
            );
            Call {
                bucket: &instance.bucket,
                raw_bytes: instance.raw_bytes,
                size,
                execution_ns: end - last,
                factor,
            }
        });
        series.extend(one_series(
            format!(
                "{} on {}",
                collective.func,
                comm_name(&collective.hash, comm_names)
            ),
            calls,
        ));
    }
    // Each message once: the sends (a receive is the same bytes seen from the other end).
    let mut sends: BTreeMap<&str, Vec<&crate::summary::Transfer>> = BTreeMap::new();
    for transfer in transfers.iter().filter(|t| t.func == "Send") {
        sends.entry(&transfer.comm_hash).or_default().push(transfer);
    }
    for (hash, list) in sends {
        let buckets: Vec<String> = list
            .iter()
            .map(|t| {
                nccl_scorep_common::sizes::size_bucket(Some(t.part.bytes))
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        let calls = list.iter().zip(&buckets).map(|(transfer, bucket)| Call {
            bucket,
            raw_bytes: transfer.part.bytes,
            size: transfer.part.bytes,
            execution_ns: transfer.part.completion_ns - transfer.part.arrival_ns,
            factor: 1.0,
        });
        series.extend(one_series(
            format!("Send on {}", comm_name(hash, comm_names)),
            calls,
        ));
    }
    series
}

/// One call's part in the bandwidth plot.
struct Call<'a> {
    bucket: &'a str,
    /// Orders the buckets.
    raw_bytes: u64,
    /// As NCCL's tests count it.
    size: u64,
    execution_ns: i128,
    factor: f64,
}

/// A series of one point per size bucket: the median bandwidth of its calls and their
/// spread; none when no call took time.
fn one_series<'a>(label: String, calls: impl Iterator<Item = Call<'a>>) -> Option<BandwidthSeries> {
    // Per bucket (ordered by the raw size of its first call: buckets do not overlap):
    // sizes and bandwidths.
    let mut buckets: BTreeMap<u64, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    let mut bucket_key: HashMap<&str, u64> = HashMap::new();
    for call in calls {
        if call.execution_ns <= 0 || call.size == 0 {
            continue;
        }
        let key = *bucket_key.entry(call.bucket).or_insert(call.raw_bytes);
        let slot = buckets.entry(key).or_default();
        slot.0.push(call.size as f64);
        // bytes / ns = GB/s.
        slot.1
            .push(call.size as f64 / call.execution_ns as f64 * call.factor);
    }
    let points: Vec<BandwidthPoint> = buckets
        .into_values()
        .map(|(mut sizes, mut bandwidths)| {
            sizes.sort_by(f64::total_cmp);
            bandwidths.sort_by(f64::total_cmp);
            BandwidthPoint {
                bytes: sizes[sizes.len() / 2],
                calls: bandwidths.len(),
                min_gbs: bandwidths[0],
                median_gbs: bandwidths[bandwidths.len() / 2],
                max_gbs: bandwidths[bandwidths.len() - 1],
            }
        })
        .collect();
    (!points.is_empty()).then_some(BandwidthSeries { label, points })
}

/// The collective `latest` names (communicator hash, function: the summary's latest
/// rank's), else the one with the most instances: its arrival skew per rank and instance.
fn heatmap(
    latest: Option<(&str, &str)>,
    collectives: &[Collective],
    comm_names: &HashMap<String, String>,
) -> Option<Heatmap> {
    let chosen = latest
        .and_then(|(hash, func)| {
            collectives
                .iter()
                .find(|c| c.hash == hash && c.func == func)
        })
        .or_else(|| collectives.iter().max_by_key(|c| c.complete.len()))
        .filter(|c| !c.complete.is_empty())?;
    let ranks: Vec<i64> = chosen.complete[0].parts.iter().map(|p| p.rank).collect();
    let instances = chosen.complete.len();
    let per_column = instances.div_ceil(MAX_HEATMAP_COLUMNS);
    let mut skew_us = vec![Vec::new(); ranks.len()];
    let mut columns = Vec::new();
    for (column, group) in chosen.complete.chunks(per_column).enumerate() {
        columns.push(column * per_column);
        for (row, &rank) in ranks.iter().enumerate() {
            let sum: f64 = group
                .iter()
                .map(|instance| {
                    let first = instance.first_arrival();
                    instance
                        .parts
                        .iter()
                        .find(|p| p.rank == rank)
                        .map_or(0.0, |p| (p.arrival_ns - first) as f64 / 1e3)
                })
                .sum();
            skew_us[row].push(sum / group.len() as f64);
        }
    }
    Some(Heatmap {
        comm: comm_name(&chosen.hash, comm_names),
        func: chosen.func.clone(),
        ranks,
        columns,
        instances,
        skew_us,
    })
}

fn p2p_matrices(
    transfers: &[crate::summary::Transfer],
    comm_names: &HashMap<String, String>,
) -> Vec<P2pMatrix> {
    let mut by_comm: BTreeMap<&str, BTreeMap<(i64, i64), u64>> = BTreeMap::new();
    for transfer in transfers.iter().filter(|t| t.func == "Send") {
        if transfer.part.rank < 0 || transfer.peer < 0 {
            continue;
        }
        *by_comm
            .entry(transfer.comm_hash.as_str())
            .or_default()
            .entry((transfer.part.rank, transfer.peer))
            .or_default() += transfer.part.bytes;
    }
    let mut matrices: Vec<P2pMatrix> = by_comm
        .into_iter()
        .map(|(hash, pairs)| {
            let nranks = transfers
                .iter()
                .filter(|t| t.comm_hash == hash)
                .map(|t| t.part.nranks.max(t.part.rank + 1).max(t.peer + 1))
                .max()
                .unwrap_or(0)
                .clamp(1, 1024) as usize;
            let mut bytes = vec![vec![0u64; nranks]; nranks];
            for ((from, to), sent) in pairs {
                if let (Some(row), Ok(to)) = (bytes.get_mut(from as usize), usize::try_from(to)) {
                    if let Some(cell) = row.get_mut(to) {
                        *cell += sent;
                    }
                }
            }
            P2pMatrix {
                comm: comm_name(hash, comm_names),
                nranks,
                bytes,
            }
        })
        .collect();
    // The communicator that moved the most bytes first: the one the picture shows.
    matrices.sort_by_key(|m| std::cmp::Reverse(m.bytes.iter().flatten().sum::<u64>()));
    matrices
}

/// The default window: the slowest collective instance (first arrival → last
/// completion; not a first call) with the instances before and after it, absolute ns,
/// and why.
fn slowest_window(
    collectives: &[Collective],
    comm_names: &HashMap<String, String>,
) -> Option<(i128, i128, String)> {
    let end_of = |instance: &crate::summary::tables::Instance| {
        instance
            .parts
            .iter()
            .map(|p| p.completion_ns)
            .max()
            .unwrap_or(0)
    };
    // A collective's first call carries the communicator's start-up (NCCL's performance
    // tests leave it out as warm-up): it is left out where there are three or more.
    let first_counted = |c: &Collective| usize::from(c.complete.len() >= 3);
    let (collective, index) = collectives
        .iter()
        .flat_map(|c| (first_counted(c)..c.complete.len()).map(move |i| (c, i)))
        .max_by_key(|(c, i)| end_of(&c.complete[*i]) - c.complete[*i].first_arrival())?;
    let before = &collective.complete[index.saturating_sub(1)];
    let slowest = &collective.complete[index];
    let after = &collective.complete[(index + 1).min(collective.complete.len() - 1)];
    let took_us = (end_of(slowest) - slowest.first_arrival()) as f64 / 1e3;
    Some((
        before.first_arrival(),
        end_of(after),
        format!(
            "the slowest collective, {} on {} (call {} of {}, {:.0} µs from its first \
             rank's arrival to its end), with the calls before and after it",
            collective.func,
            comm_name(&collective.hash, comm_names),
            index + 1,
            collective.complete.len(),
            took_us
        ),
    ))
}

/// Seconds per process and kind of time, from the profile's pass over the trace.
fn time_split(anchor: &Path) -> Result<Vec<ProcessTime>, String> {
    let profile = crate::profile::read_trace(anchor, false, None, &|_, _| {})?;
    let mut seconds = vec![vec![0.0; TIME_KINDS.len()]; profile.processes.len()];
    for ((metric, _, location), value) in profile.values() {
        let Some(kind) = TIME_KINDS.iter().position(|(m, _)| *m == metric) else {
            continue;
        };
        if let Some(process) = profile.locations.get(location).map(|l| l.process) {
            seconds[process][kind] += value;
        }
    }
    Ok(profile
        .processes
        .iter()
        .zip(seconds)
        .map(|(process, seconds)| ProcessTime {
            process: short_process_name(&process.name),
            seconds,
        })
        .collect())
}

/// The time split from `profile.cubex` beside the trace, when that is the trace's profile:
/// the merge writes it after the trace, from the same values (`nccl-scorep profile` too),
/// so a file at least as new as the trace's anchor and definitions is taken; one older
/// than them, unreadable or without the time metrics, is not (`None`: the trace is read).
/// The profile's pass is the costliest of the report's three (half its time on a 1 GB
/// trace, docs/report.md).
fn time_split_from_profile(anchor: &Path) -> Option<Vec<ProcessTime>> {
    let path = anchor.with_file_name(PROFILE_FILE);
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let trace = [anchor.to_path_buf(), anchor.with_extension("def")]
        .iter()
        .filter_map(|p| modified(p))
        .max()?;
    if modified(&path)? < trace {
        return None;
    }
    let cube = nccl_scorep_cube::Cube::read(&path).ok()?;
    let dims = cube.dimensions();
    // Location groups are the processes, in the profile's order (their handles' order).
    let groups: Vec<_> = dims.location_group_ids().collect();
    let mut seconds = vec![vec![0.0; TIME_KINDS.len()]; groups.len()];
    for (kind, (metric, _)) in TIME_KINDS.iter().enumerate() {
        let sums = cube
            .location_sums(dims.metric_by_name(metric.unique_name())?)
            .ok()?;
        for (location, sum) in dims.location_ids().zip(sums) {
            *seconds
                .get_mut(dims.location(location).group().index())?
                .get_mut(kind)? += sum;
        }
    }
    Some(
        groups
            .iter()
            .zip(seconds)
            .map(|(&group, seconds)| ProcessTime {
                process: short_process_name(dims.location_group(group).name()),
                seconds,
            })
            .collect(),
    )
}

/// `process 2 (pid 1234 on host)` → `process 2`.
fn short_process_name(name: &str) -> String {
    name.split_once(" (")
        .map_or(name, |(short, _)| short)
        .to_owned()
}

/// The intervals of the ops streams and GPU channels in the window (`window` relative
/// to the trace's start, else the slowest collective's, else the trace's first second).
fn timeline(
    anchor: &Path,
    window: Option<Window>,
    slowest: Option<(i128, i128, String)>,
) -> Result<Timeline, String> {
    otf2_sys::install_error_handler(otf2_sys::error::ignore);
    let archive = Reader::open(anchor).map_err(|e| format!("{}: {e}", anchor.display()))?;
    let defs = archive
        .global_definitions()
        .map_err(|e| format!("{}: cannot read the definitions: {e}", anchor.display()))?;
    drop(archive.close());
    drop(otf2_sys::error::drain_thread_error_reports());
    let (offset, resolution) = defs.clock.as_ref().map_or((0, 1_000_000_000), |c| {
        (c.global_offset, c.timer_resolution.max(1))
    });
    let ns_since_start = |ticks: u64| {
        ((i128::from(ticks) - i128::from(offset)) * 1_000_000_000 / i128::from(resolution)) as i64
    };
    let start_ns_abs = (offset as f64 * 1e9 / resolution as f64) as i128;
    let (start_ns, end_ns, why) = match (window, slowest) {
        (Some(window), _) => (
            window.start_ns as i64,
            window.end_ns.map_or(i64::MAX, |end| end as i64),
            "the window asked for (--window)".to_owned(),
        ),
        (None, Some((from, to, why))) => {
            let pad = (to - from) / 20;
            (
                (from - pad - start_ns_abs).max(0) as i64,
                (to + pad - start_ns_abs) as i64,
                why,
            )
        }
        (None, None) => (0, 1_000_000_000, "the trace's first second".to_owned()),
    };
    let string = |id: u32| defs.string(id).unwrap_or("");
    let mut ids: Vec<u64> = defs
        .locations
        .iter()
        .filter(|l| l.number_of_events > 0)
        .filter(|l| {
            matches!(
                location_kind(string(l.name)),
                LocationKind::OpsStream | LocationKind::Channel
            )
        })
        .map(|l| l.id)
        .collect();
    ids.sort_by_cached_key(|&id| {
        let name = defs.locations.get(&id).map_or("", |l| string(l.name));
        (id & 0xffff_ffff, location_kind(name), natural_key(name), id)
    });
    let mut collector = WindowCollector::new(&defs, start_ns, end_ns, ns_since_start);
    let mut tracks = Vec::new();
    crate::profile::each_location(anchor, &ids, |id, events| {
        collector.open.clear();
        collector.intervals.clear();
        events.read_all(&mut collector)?;
        let location = defs.locations.get(&id).expect("listed");
        let group = crate::profile::process_of_group(&defs, location.location_group);
        let process = defs
            .location_groups
            .get(&group)
            .map_or_else(String::new, |g| short_process_name(string(g.name)));
        let name = string(location.name);
        if !collector.intervals.is_empty() {
            tracks.push(Track {
                process,
                name: name.to_owned(),
                kind: if location_kind(name) == LocationKind::OpsStream {
                    "ops"
                } else {
                    "channel"
                },
                intervals: std::mem::take(&mut collector.intervals),
            });
        }
        Ok(true)
    })
    .map_err(|e| {
        format!(
            "{}: the events could not all be read: {e}",
            anchor.display()
        )
    })?;
    drop(otf2_sys::error::drain_thread_error_reports());
    let mut timeline = Timeline {
        start_ns,
        end_ns,
        why,
        tracks,
        cut_at_ns: None,
    };
    cap_intervals(&mut timeline);
    if timeline.end_ns == i64::MAX {
        timeline.end_ns = timeline
            .tracks
            .iter()
            .flat_map(|t| t.intervals.iter().map(|i| i.end))
            .max()
            .unwrap_or(start_ns + 1);
    }
    Ok(timeline)
}

/// Keeps the first [`MAX_TIMELINE_INTERVALS`] intervals by start time.
fn cap_intervals(timeline: &mut Timeline) {
    let total: usize = timeline.tracks.iter().map(|t| t.intervals.len()).sum();
    if total <= MAX_TIMELINE_INTERVALS {
        return;
    }
    let mut starts: Vec<i64> = timeline
        .tracks
        .iter()
        .flat_map(|t| t.intervals.iter().map(|i| i.start))
        .collect();
    starts.sort_unstable();
    let cut = starts[MAX_TIMELINE_INTERVALS];
    for track in &mut timeline.tracks {
        track.intervals.retain(|i| i.start < cut);
    }
    timeline.tracks.retain(|t| !t.intervals.is_empty());
    timeline.cut_at_ns = Some(cut);
    timeline.end_ns = timeline.end_ns.min(cut);
}

/// The attributes the timeline shows, by name.
struct DetailIds {
    func: Option<u32>,
    bytes: Option<u32>,
    seq: Option<u32>,
    algo: Option<u32>,
    proto: Option<u32>,
}

/// Collects one location's intervals that overlap the window.
struct WindowCollector<'a, F> {
    defs: &'a GlobalDefs,
    ids: DetailIds,
    start_ns: i64,
    end_ns: i64,
    ns_since_start: F,
    /// The open Enters: time (ns), region, details.
    open: Vec<(i64, u32, String)>,
    intervals: Vec<Interval>,
    /// Intervals kept over all locations: past the cap, reading only ends intervals.
    kept: usize,
}

impl<'a, F: Fn(u64) -> i64> WindowCollector<'a, F> {
    fn new(defs: &'a GlobalDefs, start_ns: i64, end_ns: i64, ns_since_start: F) -> Self {
        let mut ids = DetailIds {
            func: None,
            bytes: None,
            seq: None,
            algo: None,
            proto: None,
        };
        for (id, attribute) in defs.attributes.by_id() {
            let slot = match defs.string(attribute.value.name).unwrap_or("") {
                "nccl.func" => &mut ids.func,
                "nccl.bytes" => &mut ids.bytes,
                "nccl.seq" => &mut ids.seq,
                "nccl.algo" => &mut ids.algo,
                "nccl.proto" => &mut ids.proto,
                _ => continue,
            };
            *slot = Some(id);
        }
        WindowCollector {
            defs,
            ids,
            start_ns,
            end_ns,
            ns_since_start,
            open: Vec::new(),
            intervals: Vec::new(),
            kept: 0,
        }
    }

    fn details(&self, e: &EventContext<'_>) -> String {
        let get = |id: Option<u32>| id.and_then(|id| e.attribute(id));
        let text = |id: Option<u32>| {
            get(id)
                .and_then(AttributeValue::string)
                .and_then(|s| self.defs.string(s))
        };
        let mut parts = Vec::new();
        if let Some(func) = text(self.ids.func) {
            parts.push(func.to_owned());
        }
        if let Some(bytes) = get(self.ids.bytes).and_then(AttributeValue::unsigned) {
            parts.push(format!("{bytes} bytes"));
        }
        if let Some(seq) = get(self.ids.seq).and_then(AttributeValue::unsigned) {
            parts.push(format!("seq {seq}"));
        }
        match (text(self.ids.algo), text(self.ids.proto)) {
            (Some(algo), Some(proto)) => parts.push(format!("{algo}/{proto}")),
            (Some(one), None) | (None, Some(one)) => parts.push(one.to_owned()),
            (None, None) => {}
        }
        parts.join(", ")
    }
}

impl<F: Fn(u64) -> i64> EventVisitor for WindowCollector<'_, F> {
    fn enter(&mut self, e: &EventContext<'_>, region: u32) {
        let time = (self.ns_since_start)(e.time);
        // Details only for what may be kept: formatting every event would cost the most.
        let details = if time <= self.end_ns && self.kept < MAX_TIMELINE_INTERVALS * 2 {
            self.details(e)
        } else {
            String::new()
        };
        self.open.push((time, region, details));
    }

    fn leave(&mut self, e: &EventContext<'_>, _region: u32) {
        let Some((start, region, details)) = self.open.pop() else {
            return;
        };
        let end = (self.ns_since_start)(e.time);
        if end < self.start_ns || start > self.end_ns {
            return;
        }
        if self.kept >= MAX_TIMELINE_INTERVALS * 2 {
            return;
        }
        self.kept += 1;
        let name = self
            .defs
            .regions
            .get(&region)
            .and_then(|r| self.defs.string(r.name))
            .unwrap_or("?")
            .to_owned();
        self.intervals.push(Interval {
            start,
            end,
            depth: self.open.len() as u32,
            name,
            details,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::tables::Instance;
    use crate::summary::{Part, Transfer};

    fn part(rank: i64, bytes: u64, arrival_ns: i128, completion_ns: i128) -> Part {
        Part {
            rank,
            nranks: 4,
            bytes,
            arrival_ns,
            completion_ns,
        }
    }

    /// `calls` AllReduces of 4 ranks, rank 2 arriving `late_ns` after the others, each
    /// taking 1 ms from the last arrival; sizes alternate between 64 KiB and 1 MiB.
    fn allreduce(calls: usize, late_ns: i128) -> Collective {
        let complete = (0..calls)
            .map(|call| {
                let start = call as i128 * 10_000_000;
                let bytes = if call % 2 == 0 { 64 << 10 } else { 1 << 20 };
                let last = start + late_ns;
                Instance {
                    bucket: if call % 2 == 0 {
                        "64-256 KiB"
                    } else {
                        "1-4 MiB"
                    }
                    .to_owned(),
                    size: bytes,
                    raw_bytes: bytes,
                    parts: (0..4)
                        .map(|rank| {
                            let arrival = if rank == 2 { last } else { start };
                            part(rank, bytes, arrival, last + 1_000_000)
                        })
                        .collect(),
                }
            })
            .collect();
        Collective {
            hash: "0xabc".to_owned(),
            func: "AllReduce".to_owned(),
            nranks: 4,
            complete,
            incomplete: Vec::new(),
        }
    }

    #[test]
    fn the_heatmap_shows_the_late_rank_as_its_hottest_row_and_groups_many_calls() {
        let names = HashMap::from([("0xabc".to_owned(), "world".to_owned())]);
        let heatmap = heatmap(None, &[allreduce(500, 300_000)], &names).unwrap();
        assert_eq!(heatmap.comm, "world");
        assert_eq!(heatmap.ranks, vec![0, 1, 2, 3]);
        assert_eq!(heatmap.instances, 500);
        // 500 calls in columns of 3: 167 columns, the first call of each named.
        assert_eq!(heatmap.columns.len(), 167);
        assert_eq!(&heatmap.columns[..3], &[0, 3, 6]);
        assert_eq!(heatmap.skew_us[2][0], 300.0);
        assert_eq!(heatmap.skew_us[0][0], 0.0);
        assert_eq!(heatmap.hottest_rank(), Some(2));
    }

    #[test]
    fn bandwidth_has_one_point_per_bucket_with_the_median_and_the_spread() {
        let mut collective = allreduce(6, 0);
        // One slow call of 1 MiB: 4 ms instead of 1.
        collective.complete[1].parts[0].completion_ns += 3_000_000;
        let send = |bytes: u64, took: i128| Transfer {
            comm_hash: "0xdef".to_owned(),
            func: "Send".to_owned(),
            peer: 1,
            part: part(0, bytes, 0, took),
        };
        // Receives are the sends seen from the other end: not a series of their own.
        let transfers = [
            send(1 << 20, 1_000_000),
            send(1 << 20, 2_000_000),
            send(1 << 20, 4_000_000),
            Transfer {
                func: "Recv".to_owned(),
                ..send(1 << 20, 1_000)
            },
        ];
        let series = bandwidth(&[collective], &transfers, &HashMap::new());
        assert_eq!(series.len(), 2);
        assert_eq!(series[1].label, "Send on 0xdef");
        assert_eq!(series[1].points.len(), 1);
        let sends = &series[1].points[0];
        assert_eq!((sends.calls, sends.bytes), (3, 1048576.0));
        assert!(
            (sends.median_gbs - 1048576.0 / 2e6).abs() < 1e-9,
            "{sends:?}"
        );
        assert!((sends.min_gbs - 1048576.0 / 4e6).abs() < 1e-9);
        assert_eq!(series[0].label, "AllReduce on 0xabc");
        let points = &series[0].points;
        assert_eq!(points.len(), 2);
        assert_eq!(points[0].bytes, 65536.0);
        assert_eq!(points[1].bytes, 1048576.0);
        assert_eq!(points[1].calls, 3);
        // 1 MiB in 1 ms × AllReduce's bus factor 2(n-1)/n = 1.5.
        let fast = 1048576.0 / 1e6 * 1.5;
        assert!((points[1].median_gbs - fast).abs() < 1e-9, "{points:?}");
        assert!((points[1].max_gbs - fast).abs() < 1e-9);
        assert!((points[1].min_gbs - fast / 4.0).abs() < 1e-9);
    }

    #[test]
    fn the_p2p_matrix_adds_up_the_sends_of_each_pair() {
        let send = |rank: i64, peer: i64, bytes: u64| Transfer {
            comm_hash: "0xabc".to_owned(),
            func: "Send".to_owned(),
            peer,
            part: part(rank, bytes, 0, 1),
        };
        let mut transfers = vec![send(0, 1, 100), send(0, 1, 50), send(3, 0, 7)];
        // Receives are the same bytes seen from the other end: not counted twice.
        transfers.push(Transfer {
            func: "Recv".to_owned(),
            ..send(1, 0, 150)
        });
        let matrices = p2p_matrices(&transfers, &HashMap::new());
        assert_eq!(matrices.len(), 1);
        assert_eq!(matrices[0].nranks, 4);
        assert_eq!(matrices[0].bytes[0][1], 150);
        assert_eq!(matrices[0].bytes[3][0], 7);
        assert_eq!(matrices[0].bytes[1][0], 0);
    }

    #[test]
    fn the_default_window_is_the_slowest_call_but_not_a_first_one() {
        let mut collective = allreduce(5, 0);
        // The first call is the slowest (start-up), then the fourth.
        collective.complete[0].parts[1].completion_ns += 50_000_000;
        collective.complete[3].parts[1].completion_ns += 5_000_000;
        let (from, to, why) = slowest_window(&[collective], &HashMap::new()).unwrap();
        assert_eq!(from, 20_000_000);
        assert_eq!(to, 40_000_000 + 1_000_000);
        assert!(why.contains("call 4 of 5"), "{why}");
    }

    #[test]
    fn a_window_with_too_many_intervals_is_cut_at_the_time_they_run_out() {
        let interval = |start: i64| Interval {
            start,
            end: start + 1,
            depth: 0,
            name: String::new(),
            details: String::new(),
        };
        let track = |offset: i64| Track {
            process: String::new(),
            name: String::new(),
            kind: "ops",
            intervals: (0..MAX_TIMELINE_INTERVALS as i64)
                .map(|i| interval(i * 2 + offset))
                .collect(),
        };
        let mut timeline = Timeline {
            start_ns: 0,
            end_ns: i64::MAX,
            tracks: vec![track(0), track(1)],
            ..Timeline::default()
        };
        cap_intervals(&mut timeline);
        let kept: usize = timeline.tracks.iter().map(|t| t.intervals.len()).sum();
        assert_eq!(kept, MAX_TIMELINE_INTERVALS);
        assert_eq!(timeline.cut_at_ns, Some(MAX_TIMELINE_INTERVALS as i64));
        assert_eq!(timeline.end_ns, MAX_TIMELINE_INTERVALS as i64);
    }
}
