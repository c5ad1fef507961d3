//! The summary's tables: totals per communicator × operation and per size bucket, the
//! costliest first, and each communicator's ranks with their spread (docs/summary.md).

use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

use super::{Part, Transfer};
use crate::nccl_ops::size_and_factor;
use nccl_scorep_common::sizes::size_bucket;

/// One communicator and collective function, its instances matched across the ranks.
pub(crate) struct Collective {
    pub hash: String,
    pub func: String,
    pub nranks: i64,
    /// Instances every rank took part in, in sequence order; one part per rank.
    pub complete: Vec<Instance>,
    /// Instances some rank's part is missing from (dropped events, a killed process).
    pub incomplete: Vec<Instance>,
}

/// One collective instance.
pub(crate) struct Instance {
    /// The size bucket of the largest `nccl.bytes` of its parts.
    pub bucket: String,
    /// Its size as NCCL's performance tests count it.
    pub size: u64,
    /// The largest `nccl.bytes` of its parts (orders the buckets).
    pub raw_bytes: u64,
    /// One per rank, in rank order.
    pub parts: Vec<Part>,
}

impl Instance {
    pub fn first_arrival(&self) -> i128 {
        self.parts.iter().map(|p| p.arrival_ns).min().unwrap_or(0)
    }

    pub fn last_arrival(&self) -> i128 {
        self.parts.iter().map(|p| p.arrival_ns).max().unwrap_or(0)
    }
}

/// A rank's wait for the last rank in an instance whose last arrival is `last`: the part
/// of its time in the call before then.
pub(super) fn wait_ns(part: &Part, last: i128) -> i128 {
    last.clamp(part.arrival_ns, part.completion_ns.max(part.arrival_ns)) - part.arrival_ns
}

/// The collectives of `instances`, grouped by communicator and function.
/// The instances are taken, not copied: each instance's parts move into its collective
/// (a big trace's parts are most of the summary's memory).
pub(super) fn collectives(instances: HashMap<(String, u64, String), Vec<Part>>) -> Vec<Collective> {
    type Numbered = Vec<(u64, Vec<Part>)>;
    let mut groups: BTreeMap<(String, String), Numbered> = BTreeMap::new();
    for ((hash, seq, func), parts) in instances {
        groups.entry((hash, func)).or_default().push((seq, parts));
    }
    groups
        .into_iter()
        .map(|((hash, func), mut list)| {
            list.sort_by_key(|(seq, _)| *seq);
            let nranks = list
                .iter()
                .flat_map(|(_, parts)| parts.iter().map(|p| p.nranks))
                .max()
                .unwrap_or(0);
            let mut collective = Collective {
                hash,
                func,
                nranks,
                complete: Vec::new(),
                incomplete: Vec::new(),
            };
            for (_, parts) in list {
                // One part per rank: a rank seen twice counts once.
                let raw_bytes = parts.iter().map(|p| p.bytes).max().unwrap_or(0);
                let mut by_rank: BTreeMap<i64, Part> = BTreeMap::new();
                for part in parts {
                    by_rank.entry(part.rank).or_insert(part);
                }
                let instance = Instance {
                    bucket: bucket_name(raw_bytes),
                    size: size_and_factor(&collective.func, raw_bytes, nranks).0,
                    raw_bytes,
                    parts: by_rank.into_values().collect(),
                };
                if (instance.parts.len() as i64) < nranks {
                    collective.incomplete.push(instance);
                } else {
                    collective.complete.push(instance);
                }
            }
            collective
        })
        .collect()
}

fn bucket_name(bytes: u64) -> String {
    size_bucket(Some(bytes)).to_string_lossy().into_owned()
}

/// The figures of a row: an operation's, or one of its size buckets'.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Figures {
    /// Collectives: instances every rank took part in. Transfers: operations, over all
    /// ranks.
    pub calls: usize,
    /// Collectives some rank's part is missing from (not in the other figures).
    pub incomplete_calls: usize,
    /// Mean bytes per call as NCCL's performance tests count them (a collective's whole
    /// buffer; a transfer's message).
    pub bytes_per_call: u64,
    /// Time the ranks spent in these calls, arrival → completion, summed over ranks, ms.
    pub time_ms: f64,
    /// `time_ms` / the summary's `total_time_ms`.
    pub share: f64,
    /// Mean time of one rank in one call, µs.
    pub time_per_call_us: f64,
    /// Collectives: mean last arrival → last completion (the collective itself), µs.
    /// Transfers: `time_per_call_us`.
    pub mean_execution_us: f64,
    /// All bytes / all execution time, GB/s.
    pub algbw_gbs: f64,
    /// `algbw_gbs` × NCCL's bus factor of the collective (1 for transfers), GB/s.
    pub busbw_gbs: f64,
    /// Time the ranks spent waiting for the last rank to arrive, summed over ranks, ms.
    pub wait_ms: f64,
    /// `wait_ms` / `time_ms`.
    pub wait_share: f64,
    /// Mean first → last arrival, µs.
    pub mean_skew_us: f64,
}

#[derive(Default)]
struct Acc {
    calls: usize,
    incomplete: usize,
    bytes: f64,
    time_ns: f64,
    parts: usize,
    execution_ns: f64,
    wait_ns: f64,
    skew_ns: f64,
}

impl Acc {
    fn add_instance(&mut self, instance: &Instance) {
        self.calls += 1;
        self.bytes += instance.size as f64;
        let first = instance.first_arrival();
        let last = instance.last_arrival();
        let end = instance
            .parts
            .iter()
            .map(|p| p.completion_ns)
            .max()
            .unwrap_or(0);
        for part in &instance.parts {
            self.time_ns += (part.completion_ns - part.arrival_ns).max(0) as f64;
            self.wait_ns += wait_ns(part, last) as f64;
            self.parts += 1;
        }
        self.execution_ns += (end - last).max(0) as f64;
        self.skew_ns += (last - first) as f64;
    }

    fn add_transfer(&mut self, transfer: &Transfer) {
        let time = (transfer.part.completion_ns - transfer.part.arrival_ns).max(0) as f64;
        self.calls += 1;
        self.parts += 1;
        self.bytes += transfer.part.bytes as f64;
        self.time_ns += time;
        self.execution_ns += time;
    }

    fn figures(&self, factor: f64) -> Figures {
        let calls = self.calls.max(1) as f64;
        let algbw = if self.execution_ns > 0.0 {
            self.bytes / self.execution_ns
        } else {
            0.0
        };
        Figures {
            calls: self.calls,
            incomplete_calls: self.incomplete,
            bytes_per_call: (self.bytes / calls).round() as u64,
            time_ms: self.time_ns / 1e6,
            share: 0.0,
            time_per_call_us: self.time_ns / self.parts.max(1) as f64 / 1e3,
            mean_execution_us: self.execution_ns / calls / 1e3,
            algbw_gbs: algbw,
            busbw_gbs: algbw * factor,
            wait_ms: self.wait_ns / 1e6,
            wait_share: ratio(self.wait_ns, self.time_ns),
            mean_skew_us: self.skew_ns / calls / 1e3,
        }
    }
}

fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part / whole
    } else {
        0.0
    }
}

/// One communicator and operation (a collective function, `Send` or `Recv`).
#[derive(Clone, Debug, Serialize)]
pub struct OperationRow {
    pub comm: String,
    pub comm_hash: String,
    pub func: String,
    /// `collective` or `p2p`.
    pub kind: &'static str,
    pub nranks: i64,
    /// Transfers: distinct (rank, peer) pairs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pairs: Option<usize>,
    #[serde(flatten)]
    pub figures: Figures,
    /// Per size bucket of the bytes each rank's record carries (`nccl.bytes`), smallest
    /// first.
    pub sizes: Vec<SizeRow>,
}

/// One size bucket of an operation.
#[derive(Clone, Debug, Serialize)]
pub struct SizeRow {
    /// The bucket, as the profile and `compare` name it (`64-256 KiB`).
    pub bucket: String,
    #[serde(flatten)]
    pub figures: Figures,
}

/// Buckets of one operation, in size order.
#[derive(Default)]
struct Buckets(BTreeMap<String, (u64, Acc)>);

impl Buckets {
    fn get(&mut self, bucket: &str, bytes: u64) -> &mut Acc {
        let slot = self
            .0
            .entry(bucket.to_owned())
            .or_insert_with(|| (bytes, Acc::default()));
        slot.0 = slot.0.min(bytes);
        &mut slot.1
    }

    fn rows(self, factor: f64) -> Vec<SizeRow> {
        let mut rows: Vec<(u64, SizeRow)> = self
            .0
            .into_iter()
            .map(|(bucket, (bytes, acc))| {
                (
                    bytes,
                    SizeRow {
                        bucket,
                        figures: acc.figures(factor),
                    },
                )
            })
            .collect();
        rows.sort_by_key(|(bytes, _)| *bytes);
        rows.into_iter().map(|(_, row)| row).collect()
    }
}

/// The name of communicator `hash`.
pub(crate) fn comm_name(hash: &str, comm_names: &HashMap<String, String>) -> String {
    comm_names
        .get(hash)
        .cloned()
        .unwrap_or_else(|| hash.to_owned())
}

/// The operations table, the costliest first, and the total time of all its rows (ms).
pub(super) fn operations(
    collectives: &[Collective],
    transfers: &[Transfer],
    comm_names: &HashMap<String, String>,
) -> (Vec<OperationRow>, f64) {
    let mut rows = Vec::new();
    for collective in collectives {
        let (mut all, mut buckets) = (Acc::default(), Buckets::default());
        for instance in &collective.complete {
            all.add_instance(instance);
            buckets
                .get(&instance.bucket, instance.raw_bytes)
                .add_instance(instance);
        }
        for instance in &collective.incomplete {
            all.incomplete += 1;
            buckets.get(&instance.bucket, instance.raw_bytes).incomplete += 1;
        }
        let (_, factor) = size_and_factor(&collective.func, 0, collective.nranks);
        rows.push(OperationRow {
            comm: comm_name(&collective.hash, comm_names),
            comm_hash: collective.hash.clone(),
            func: collective.func.clone(),
            kind: "collective",
            nranks: collective.nranks,
            pairs: None,
            figures: all.figures(factor),
            sizes: buckets.rows(factor),
        });
    }
    /// A communicator's transfers of one direction: all, per bucket, (rank, peer) pairs,
    /// ranks.
    type Group = (Acc, Buckets, Vec<(i64, i64)>, i64);
    let mut groups: BTreeMap<(&str, &str), Group> = BTreeMap::new();
    for t in transfers {
        let (all, buckets, pairs, nranks) = groups
            .entry((t.comm_hash.as_str(), t.func.as_str()))
            .or_default();
        all.add_transfer(t);
        buckets
            .get(&bucket_name(t.part.bytes), t.part.bytes)
            .add_transfer(t);
        pairs.push((t.part.rank, t.peer));
        *nranks = (*nranks).max(t.part.nranks);
    }
    for ((hash, func), (all, buckets, mut pairs, nranks)) in groups {
        pairs.sort_unstable();
        pairs.dedup();
        rows.push(OperationRow {
            comm: comm_name(hash, comm_names),
            comm_hash: hash.to_owned(),
            func: func.to_owned(),
            kind: "p2p",
            nranks,
            pairs: Some(pairs.len()),
            figures: all.figures(1.0),
            sizes: buckets.rows(1.0),
        });
    }
    let total: f64 = rows.iter().map(|r| r.figures.time_ms).sum();
    for row in &mut rows {
        row.figures.share = ratio(row.figures.time_ms, total);
        for size in &mut row.sizes {
            size.figures.share = ratio(size.figures.time_ms, total);
        }
    }
    rows.sort_by(|a, b| {
        b.figures
            .time_ms
            .total_cmp(&a.figures.time_ms)
            .then_with(|| (&a.comm, &a.func).cmp(&(&b.comm, &b.func)))
    });
    (rows, total)
}

/// One rank of a communicator.
#[derive(Clone, Debug, Serialize)]
pub struct RankRow {
    pub rank: i64,
    /// Its collectives (those every rank took part in) and transfers.
    pub calls: usize,
    /// Its time in those calls, arrival → completion, ms.
    pub time_ms: f64,
    /// Of that, the time its collectives waited for their last rank, ms.
    pub wait_ms: f64,
    /// `wait_ms` / `time_ms`.
    pub wait_share: f64,
    /// Its collectives' bus bytes / its time in them after the last rank arrived, GB/s
    /// (absent without collectives).
    pub busbw_gbs: Option<f64>,
}

/// Minimum, median and maximum of a column over a communicator's ranks.
#[derive(Clone, Debug, Serialize)]
pub struct Spread {
    pub min: f64,
    pub min_rank: i64,
    pub median: f64,
    pub max: f64,
    pub max_rank: i64,
}

/// The ranks of one communicator.
#[derive(Clone, Debug, Serialize)]
pub struct CommRanks {
    pub comm: String,
    pub comm_hash: String,
    pub nranks: i64,
    pub ranks: Vec<RankRow>,
    pub time_ms: Option<Spread>,
    pub wait_ms: Option<Spread>,
    pub busbw_gbs: Option<Spread>,
}

#[derive(Default)]
struct RankAcc {
    calls: usize,
    time_ns: f64,
    wait_ns: f64,
    bus_bytes: f64,
    execution_ns: f64,
    collectives: usize,
}

/// Per communicator, its ranks' time, wait and bandwidth, with their spread.
pub(super) fn ranks(
    collectives: &[Collective],
    transfers: &[Transfer],
    comm_names: &HashMap<String, String>,
) -> Vec<CommRanks> {
    let mut comms: BTreeMap<&str, (i64, BTreeMap<i64, RankAcc>)> = BTreeMap::new();
    for collective in collectives {
        let (nranks, ranks) = comms.entry(&collective.hash).or_default();
        *nranks = (*nranks).max(collective.nranks);
        let (_, factor) = size_and_factor(&collective.func, 0, collective.nranks);
        for instance in &collective.complete {
            let last = instance.last_arrival();
            for part in &instance.parts {
                let acc = ranks.entry(part.rank).or_default();
                acc.calls += 1;
                acc.collectives += 1;
                acc.time_ns += (part.completion_ns - part.arrival_ns).max(0) as f64;
                acc.wait_ns += wait_ns(part, last) as f64;
                acc.bus_bytes += instance.size as f64 * factor;
                acc.execution_ns += (part.completion_ns - last).max(0) as f64;
            }
        }
    }
    for t in transfers {
        let (nranks, ranks) = comms.entry(&t.comm_hash).or_default();
        *nranks = (*nranks).max(t.part.nranks);
        let acc = ranks.entry(t.part.rank).or_default();
        acc.calls += 1;
        acc.time_ns += (t.part.completion_ns - t.part.arrival_ns).max(0) as f64;
    }
    comms
        .into_iter()
        .map(|(hash, (nranks, ranks))| {
            let ranks: Vec<RankRow> = ranks
                .into_iter()
                .map(|(rank, acc)| RankRow {
                    rank,
                    calls: acc.calls,
                    time_ms: acc.time_ns / 1e6,
                    wait_ms: acc.wait_ns / 1e6,
                    wait_share: ratio(acc.wait_ns, acc.time_ns),
                    busbw_gbs: (acc.collectives > 0)
                        .then(|| ratio(acc.bus_bytes, acc.execution_ns)),
                })
                .collect();
            CommRanks {
                comm: comm_name(hash, comm_names),
                comm_hash: hash.to_owned(),
                nranks,
                time_ms: spread(ranks.iter().map(|r| (r.rank, r.time_ms))),
                wait_ms: spread(ranks.iter().map(|r| (r.rank, r.wait_ms))),
                busbw_gbs: spread(ranks.iter().filter_map(|r| Some((r.rank, r.busbw_gbs?)))),
                ranks,
            }
        })
        .collect()
}

/// The spread of `(rank, value)`s; none without values. The lower rank wins a tie.
fn spread(values: impl Iterator<Item = (i64, f64)>) -> Option<Spread> {
    let mut values: Vec<(i64, f64)> = values.collect();
    if values.is_empty() {
        return None;
    }
    values.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    let (min_rank, min) = values[0];
    let max = values[values.len() - 1].1;
    let max_rank = values
        .iter()
        .find(|(_, v)| *v == max)
        .map_or(values[values.len() - 1].0, |(r, _)| *r);
    let sorted: Vec<f64> = values.iter().map(|(_, v)| *v).collect();
    Some(Spread {
        min,
        min_rank,
        median: median_of_sorted(&sorted),
        max,
        max_rank,
    })
}

/// The median of sorted values (0 without any).
pub(super) fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The median of `values`, in any order.
pub(super) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    median_of_sorted(&sorted)
}
