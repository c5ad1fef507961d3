//! Clock alignment across hosts, from what the job itself proves rather than from NTP: a
//! collective cannot end on any rank before its last rank began it, and a message cannot
//! be received before it was sent. Each such fact bounds the difference between two
//! hosts' clocks at one moment; the merge fits a line (offset and drift) per host
//! against a reference host that stays as it is, and writes it as corrected ClockOffset
//! records, so that no event file is rewritten (docs/fidelity.md, docs/merge.md).
//!
//! The drift comes from the offsets the first and the last quarter of the run prove, as
//! offsets measured at a run's start and end are interpolated (Score-P and Scalasca do so
//! with offsets they measure; here the job's own collectives prove them). For that drift,
//! the offsets that respect every bound of the run form one interval; the estimate is its
//! middle, and half its width is the stated uncertainty (when the bounds contradict each
//! other, half the contradiction). Where the facts of a stretch of the run leave that line
//! (a drift that changed: NTP slewing a clock), the correction bends through what each
//! stretch allows.
//!
//! A host that shares no collective or message with the reference host (pipeline stages
//! on different nodes, say) is aligned through the hosts aligned before it: once a round
//! of hosts is aligned, their times are corrected and they join the reference side, and
//! the hosts left are fitted against all of it; each round adds the largest uncertainty
//! of the hosts it went through to its own.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use nccl_scorep_common::run_dir::ANCHOR_FILE;
use otf2_sys::read::{ClockOffset, CollectiveEnd, EventContext, EventVisitor, MpiMessage};
use serde::Serialize;

use crate::PartDefs;

/// What one fact proves about the clock difference `d = other − reference` (what must be
/// added to the other host's times) at the other host's time `at_ns`: `lower ≤ d ≤ upper`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    pub at_ns: f64,
    pub lower: Option<f64>,
    pub upper: Option<f64>,
}

/// One host's correction against the reference host: add `offset_ns + drift × (t −
/// at_ns)` to its time `t`, and where the drift changed during the run, the bend there
/// ([`Correction::bends`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Correction {
    pub offset_ns: f64,
    /// Nanoseconds per nanosecond (1e-6 is 1 ppm).
    pub drift: f64,
    pub at_ns: f64,
    /// Half the width of the offsets every bound allows at this drift; when the bounds
    /// contradict each other (negative width), half of the largest contradiction.
    pub uncertainty_ns: f64,
    /// Bounds the uncorrected times break, and the corrected ones.
    pub violated_before: usize,
    pub violated_after: usize,
    pub bounds: usize,
    /// Empty when the line holds over the whole run. Else, where the facts of a stretch
    /// of the run put the offset off the line (a drift that changed: NTP slewing a
    /// clock, a machine warming up), what is added to the line at each stretch's middle
    /// (`(at_ns, ns)`, in time order), interpolated between them and extended along the
    /// nearest two beyond.
    pub bends: Vec<(f64, f64)>,
}

impl Correction {
    pub fn at(&self, t_ns: f64) -> f64 {
        self.offset_ns + self.drift * (t_ns - self.at_ns) + self.bend_at(t_ns)
    }

    /// What the bends add to the line at `t_ns`: interpolated between the two bends
    /// around it, and beyond the first or the last along the two nearest.
    fn bend_at(&self, t_ns: f64) -> f64 {
        let bends = &self.bends;
        if bends.len() < 2 {
            return bends.first().map_or(0.0, |&(_, b)| b);
        }
        let after = bends.partition_point(|&(at, _)| at <= t_ns);
        let segment = after.clamp(1, bends.len() - 1);
        let ((t0, b0), (t1, b1)) = (bends[segment - 1], bends[segment]);
        b0 + (b1 - b0) * (t_ns - t0) / (t1 - t0)
    }
}

/// The attribute of an operation that holds its enqueue (CLOCK_MONOTONIC ns).
const ENQUEUE_ATTRIBUTE: &str = "nccl.enqueue_ns";

/// The drifts searched: two quartz clocks off by 100 ppm each, the other way.
const MAX_DRIFT: f64 = 200e-6;
/// Below this span of time the bounds cannot tell a drift: none is fitted.
const MIN_SPAN_FOR_DRIFT_NS: f64 = 10e6;
/// The shortest stretch of the run whose facts are checked against the line on their own
/// (see [`bend_where_the_drift_changed`]), and the most stretches a run is cut into.
const MIN_STRETCH_NS: f64 = 100e6;
const MAX_STRETCHES: f64 = 64.0;
/// Facts a stretch needs at least (in each direction).
const MIN_STRETCH_FACTS: usize = 8;

/// The largest interval of offsets at `drift`: (max of lower bounds, min of upper bounds),
/// with times measured from `at_ns`.
fn offsets_allowed(bounds: &[Bound], at_ns: f64, drift: f64) -> (f64, f64) {
    let mut lowest_upper = f64::INFINITY;
    let mut highest_lower = f64::NEG_INFINITY;
    for b in bounds {
        let shift = drift * (b.at_ns - at_ns);
        if let Some(upper) = b.upper {
            lowest_upper = lowest_upper.min(upper - shift);
        }
        if let Some(lower) = b.lower {
            highest_lower = highest_lower.max(lower - shift);
        }
    }
    (highest_lower, lowest_upper)
}

/// Fits a host's correction to `bounds`; `None` unless there are bounds on both sides (a
/// correction needs a fact in each direction).
pub fn fit(bounds: &[Bound]) -> Option<Correction> {
    let has_lower = bounds.iter().any(|b| b.lower.is_some());
    let has_upper = bounds.iter().any(|b| b.upper.is_some());
    if !has_lower || !has_upper {
        return None;
    }
    // In time order, for the quarters and the stretches.
    let mut sorted = bounds.to_vec();
    sorted.sort_by(|a, b| a.at_ns.total_cmp(&b.at_ns));
    let (first, last) = (sorted[0].at_ns, sorted[sorted.len() - 1].at_ns);
    let at_ns = (first + last) / 2.0;
    let drift = if last - first < MIN_SPAN_FOR_DRIFT_NS {
        0.0
    } else {
        drift_between_ends(&sorted).unwrap_or(0.0)
    };
    let (low, high) = offsets_allowed(bounds, at_ns, drift);
    let mut correction = Correction {
        offset_ns: (low + high) / 2.0,
        drift,
        at_ns,
        uncertainty_ns: (high - low).abs() / 2.0,
        violated_before: violated(bounds, |_| 0.0),
        violated_after: 0,
        bounds: bounds.len(),
        bends: Vec::new(),
    };
    bend_where_the_drift_changed(&sorted, &mut correction);
    correction.violated_after = violated(bounds, |t| correction.at(t));
    Some(correction)
}

/// One line assumes the drift stays the same over the run. The run is cut into
/// stretches (at least [`MIN_STRETCH_NS`] long, at most [`MAX_STRETCHES`] of them, each
/// with [`MIN_STRETCH_FACTS`] facts both ways), and the offsets each stretch's facts allow
/// by themselves are compared with the line. When the line lies outside them in some
/// stretch (whose facts agree with each other), the drift changed: the correction then
/// bends through the middle of what each stretch allows (interpolated between their
/// middles, as few of them as stay within a quarter of the uncertainty), and its
/// uncertainty becomes half the widest of those. When the line lies within every
/// stretch's, it stays as it is. `sorted`: the bounds in time order.
fn bend_where_the_drift_changed(sorted: &[Bound], line: &mut Correction) {
    let (Some(first), Some(last)) = (sorted.first(), sorted.last()) else {
        return;
    };
    let length = MIN_STRETCH_NS.max((last.at_ns - first.at_ns) / MAX_STRETCHES);
    let mut stretches: Vec<&[Bound]> = Vec::new();
    let mut start = 0;
    for (i, bound) in sorted.iter().enumerate() {
        let stretch = &sorted[start..=i];
        let both_ways = |side: fn(&Bound) -> bool| {
            stretch.iter().filter(|b| side(b)).count() >= MIN_STRETCH_FACTS
        };
        if bound.at_ns - sorted[start].at_ns >= length
            && both_ways(|b| b.lower.is_some())
            && both_ways(|b| b.upper.is_some())
        {
            stretches.push(stretch);
            start = i + 1;
        }
    }
    // What is left joins the last stretch.
    match stretches.last_mut() {
        Some(tail) if start < sorted.len() => *tail = &sorted[start - tail.len()..],
        _ => {}
    }
    if stretches.len() < 2 {
        return;
    }
    let mut off_the_line = false;
    let mut widest = 0.0_f64;
    let mut bends = Vec::with_capacity(stretches.len());
    for stretch in stretches {
        let middle = (stretch[0].at_ns + stretch[stretch.len() - 1].at_ns) / 2.0;
        let (low, high) = offsets_allowed(stretch, middle, line.drift);
        let on_line = line.at(middle);
        // A stretch whose facts contradict each other says nothing about the line.
        off_the_line |= low <= high && (on_line < low || on_line > high);
        widest = widest.max((high - low).abs());
        bends.push((middle, (low + high) / 2.0 - on_line));
    }
    if off_the_line {
        line.uncertainty_ns = widest / 2.0;
        line.bends = fewest_bends(&bends, line.uncertainty_ns / BEND_TOLERANCE_SHARE);
    }
}

/// What the correction may deviate from the stretches' middles, as a share of its
/// uncertainty, so that straight runs of bends become one segment: every bend is a clock
/// offset record in each of the host's locations, and a job has thousands of them.
const BEND_TOLERANCE_SHARE: f64 = 4.0;

/// The fewest of `bends` (the first and the last among them) whose interpolation lies
/// within `tolerance` of every one of them (Douglas–Peucker: the farthest bend from the
/// segment of the kept ones is kept, until none is farther than `tolerance`).
fn fewest_bends(bends: &[(f64, f64)], tolerance: f64) -> Vec<(f64, f64)> {
    let mut keep = vec![false; bends.len()];
    let mut spans = vec![(0, bends.len().saturating_sub(1))];
    while let Some((first, last)) = spans.pop() {
        keep[first] = true;
        keep[last] = true;
        let ((t0, b0), (t1, b1)) = (bends[first], bends[last]);
        let farthest = (first + 1..last)
            .map(|i| {
                let (t, b) = bends[i];
                (i, (b - (b0 + (b1 - b0) * (t - t0) / (t1 - t0))).abs())
            })
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((i, distance)) = farthest {
            if distance > tolerance {
                spans.push((first, i));
                spans.push((i, last));
            }
        }
    }
    bends
        .iter()
        .zip(keep)
        .filter_map(|(&bend, kept)| kept.then_some(bend))
        .collect()
}

/// The drift between the offsets the first and the last quarter of the run prove (each
/// the middle of what its bounds allow, taken as constant over its quarter), as the
/// offsets measured at a run's start and end are interpolated; `None` when a quarter lacks
/// bounds on either side. `sorted`: the bounds in time order.
fn drift_between_ends(sorted: &[Bound]) -> Option<f64> {
    let quarter = (sorted.len() / 4).max(1);
    let middle = |part: &[Bound]| -> Option<(f64, f64)> {
        let at = part.iter().map(|b| b.at_ns).sum::<f64>() / part.len() as f64;
        let (low, high) = offsets_allowed(part, at, 0.0);
        (low.is_finite() && high.is_finite()).then_some((at, (low + high) / 2.0))
    };
    let (t0, d0) = middle(&sorted[..quarter])?;
    let (t1, d1) = middle(&sorted[sorted.len() - quarter..])?;
    (t1 > t0).then(|| ((d1 - d0) / (t1 - t0)).clamp(-MAX_DRIFT, MAX_DRIFT))
}

/// How many bounds the correction `shift` breaks.
fn violated(bounds: &[Bound], shift: impl Fn(f64) -> f64) -> usize {
    bounds
        .iter()
        .filter(|b| {
            let d = shift(b.at_ns);
            b.lower.is_some_and(|l| d < l) || b.upper.is_some_and(|u| d > u)
        })
        .count()
}

// ---------------------------------------------------------------------------------------
// The facts, from the ops streams
// ---------------------------------------------------------------------------------------

/// One ops stream's collectives and messages, in real-time nanoseconds as its part's clock
/// offsets give them (uncorrected).
#[derive(Debug, Default)]
pub(crate) struct OpsTimes {
    /// (begin, end) of each collective, in order.
    pub collectives: Vec<(f64, f64)>,
    /// Send times to each peer rank, in order.
    pub sends: BTreeMap<u32, Vec<f64>>,
    /// Receive times from each peer rank, in order.
    pub receives: BTreeMap<u32, Vec<f64>>,
}

/// Collects an ops stream's times (raw ticks; converted by the caller).
#[derive(Default)]
struct OpsVisitor {
    /// The attribute id of `nccl.enqueue_ns` in the part.
    enqueue_attribute: Option<u32>,
    /// The enqueue of the operation entered last.
    enqueue: Option<u64>,
    begin: Option<u64>,
    collectives: Vec<(u64, u64)>,
    sends: BTreeMap<u32, Vec<u64>>,
    receives: BTreeMap<u32, Vec<u64>>,
}

impl EventVisitor for OpsVisitor {
    fn wants_attributes(&self) -> bool {
        self.enqueue_attribute.is_some()
    }

    fn enter(&mut self, event: &EventContext<'_>, _region: u32) {
        self.enqueue = self
            .enqueue_attribute
            .and_then(|id| event.attribute(id))
            .and_then(|value| value.unsigned());
    }

    fn mpi_collective_begin(&mut self, event: &EventContext<'_>) {
        // A rank has arrived at a collective when its application called NCCL: the enqueue
        // (a host time, exact), never after the kernel's begin (a GPU time converted, which
        // may be late by its stated error).
        let begin = self
            .enqueue
            .take()
            .map_or(event.time, |e| e.min(event.time));
        self.begin = Some(begin);
    }

    fn mpi_collective_end(&mut self, event: &EventContext<'_>, _: &CollectiveEnd) {
        if let Some(begin) = self.begin.take() {
            self.collectives.push((begin, event.time));
        }
    }

    fn mpi_send(&mut self, event: &EventContext<'_>, message: &MpiMessage) {
        // A message is sent when the application called NCCL, as above.
        let sent = self
            .enqueue
            .take()
            .map_or(event.time, |e| e.min(event.time));
        self.sends.entry(message.peer).or_default().push(sent);
    }

    fn mpi_recv(&mut self, event: &EventContext<'_>, message: &MpiMessage) {
        self.receives
            .entry(message.peer)
            .or_default()
            .push(event.time);
    }
}

/// `t` (a part's local time) in real time after `base`, by the part's clock offsets:
/// linear between two records, the nearest one's offset outside them (as OTF2's readers do
/// between them). Measured from a base, so that a double keeps every nanosecond.
pub(crate) fn to_realtime(offsets: &[ClockOffset], t: u64, base: u64) -> f64 {
    let offset = match offsets {
        [] => 0.0,
        [only] => only.offset as f64,
        _ => {
            let next = offsets.partition_point(|o| o.time <= t);
            if next == 0 {
                offsets[0].offset as f64
            } else if next == offsets.len() {
                offsets[offsets.len() - 1].offset as f64
            } else {
                let (a, b) = (offsets[next - 1], offsets[next]);
                let share = (t - a.time) as f64 / (b.time - a.time).max(1) as f64;
                a.offset as f64 + share * (b.offset - a.offset) as f64
            }
        }
    };
    (t as i128 - base as i128) as f64 + offset
}

/// Reads the ops streams `locations` of the part `anchor` (ids as in the part), with
/// their clock offsets; times after the real time `base`.
pub(crate) fn read_ops_times(
    anchor: &Path,
    locations: &[u64],
    offsets: &HashMap<u64, Vec<ClockOffset>>,
    base: u64,
    enqueue_attribute: Option<u32>,
) -> Result<Vec<OpsTimes>, String> {
    let reader = crate::otf2::open(anchor)?;
    reader
        .select_locations(locations)
        .map_err(crate::otf2::message)?;
    let files = reader.open_event_files().map_err(crate::otf2::message)?;
    let mut out = Vec::with_capacity(locations.len());
    for &location in locations {
        let events = files.location(location).map_err(crate::otf2::message)?;
        events
            .apply_clock_offsets(false)
            .map_err(crate::otf2::message)?;
        let mut visitor = OpsVisitor {
            enqueue_attribute,
            ..OpsVisitor::default()
        };
        events
            .read_all(&mut visitor)
            .map_err(crate::otf2::message)?;
        let offsets = offsets.get(&location).map_or(&[][..], Vec::as_slice);
        let real = |t: u64| to_realtime(offsets, t, base);
        let times = |m: BTreeMap<u32, Vec<u64>>| {
            m.into_iter()
                .map(|(peer, ts)| (peer, ts.into_iter().map(real).collect()))
                .collect()
        };
        out.push(OpsTimes {
            collectives: visitor
                .collectives
                .iter()
                .map(|&(b, e)| (real(b), real(e)))
                .collect(),
            sends: times(visitor.sends),
            receives: times(visitor.receives),
        });
    }
    Ok(out)
}

/// One ops stream for the alignment: its communicator, rank, host (an index) and times.
/// Once its host is aligned, its times are corrected and its host becomes the reference.
pub(crate) struct Stream {
    pub comm: String,
    pub rank: u32,
    pub host: usize,
    pub times: OpsTimes,
}

/// The bounds each host (by index) gets against host `reference`: from the streams'
/// collectives (matched by order per communicator), and separately from their messages
/// (matched by order per sender, receiver and communicator). Facts between two other
/// hosts are not used: [`fit_hosts`] makes the hosts it aligns part of the reference.
pub(crate) fn bounds(
    streams: &[Stream],
    reference: usize,
) -> (HashMap<usize, Vec<Bound>>, HashMap<usize, Vec<Bound>>) {
    let mut out: HashMap<usize, Vec<Bound>> = HashMap::new();
    let mut messages: HashMap<usize, Vec<Bound>> = HashMap::new();
    let mut by_comm: BTreeMap<&str, Vec<&Stream>> = BTreeMap::new();
    for s in streams {
        by_comm.entry(&s.comm).or_default().push(s);
    }
    for members in by_comm.values() {
        // The communicator's streams by host: each host's side of a collective is read
        // from its own streams only (a scan of every member per host and collective was
        // quadratic in the job's size: 2048 hosts × 16 384 ranks).
        let mut by_host: BTreeMap<usize, Vec<&Stream>> = BTreeMap::new();
        for s in members {
            by_host.entry(s.host).or_default().push(s);
        }
        let Some(reference_side) = by_host.get(&reference) else {
            continue;
        };
        let count = members
            .iter()
            .map(|s| s.times.collectives.len())
            .min()
            .unwrap_or(0);
        // A host's side of collective k: its ranks' latest begin and earliest end.
        let side = |streams: &[&Stream], k: usize| {
            streams
                .iter()
                .map(|s| s.times.collectives[k])
                .fold((f64::MIN, f64::MAX), |(begin, end), c| {
                    (begin.max(c.0), end.min(c.1))
                })
        };
        let reference_sides: Vec<(f64, f64)> =
            (0..count).map(|k| side(reference_side, k)).collect();
        for (&other, other_side) in by_host.iter().filter(|(&h, _)| h != reference) {
            let list = out.entry(other).or_default();
            for (k, &(latest_begin_ref, earliest_end_ref)) in reference_sides.iter().enumerate() {
                let (latest_begin_other, earliest_end_other) = side(other_side, k);
                // The other host's ranks end after the reference's last begin, and the
                // reference's ranks end after the other's last begin.
                list.push(Bound {
                    at_ns: earliest_end_other,
                    lower: Some(latest_begin_ref - earliest_end_other),
                    upper: Some(earliest_end_ref - latest_begin_other),
                });
            }
        }
        // The first stream of each rank, for the senders of messages.
        let mut by_rank: HashMap<u32, &Stream> = HashMap::new();
        for s in members {
            by_rank.entry(s.rank).or_insert(s);
        }
        // Messages: a receive ends after its send began.
        for receiver in members.iter() {
            for (&peer, receives) in &receiver.times.receives {
                let Some(&sender) = by_rank.get(&peer) else {
                    continue;
                };
                if sender.host == receiver.host {
                    continue;
                }
                let Some(sends) = sender.times.sends.get(&receiver.rank) else {
                    continue;
                };
                for (&sent, &received) in sends.iter().zip(receives) {
                    if receiver.host == reference {
                        // reference: received ≥ sent + d.
                        messages.entry(sender.host).or_default().push(Bound {
                            at_ns: sent,
                            lower: None,
                            upper: Some(received - sent),
                        });
                    } else if sender.host == reference {
                        // other: received + d ≥ sent.
                        messages.entry(receiver.host).or_default().push(Bound {
                            at_ns: received,
                            lower: Some(sent - received),
                            upper: None,
                        });
                    }
                }
            }
        }
    }
    (out, messages)
}

/// A host's fitted correction, and the hosts it was aligned through (none: against the
/// reference host itself).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Aligned {
    pub correction: Correction,
    pub through: Vec<usize>,
}

/// Fits every host of `streams` (hosts `0..hosts`) against `reference`, round by round:
/// the hosts a round aligns have their streams' times corrected and join the reference
/// side, so that the next round aligns the hosts that share facts only with them. Hosts
/// missing from the result could not be aligned.
pub(crate) fn fit_hosts(
    streams: &mut [Stream],
    hosts: usize,
    reference: usize,
) -> BTreeMap<usize, Aligned> {
    let mut aligned: BTreeMap<usize, Aligned> = BTreeMap::new();
    // What each stream's host was before it joined the reference side.
    let origins: Vec<usize> = streams.iter().map(|s| s.host).collect();
    // The largest uncertainty of the hosts on the reference side.
    let mut carried = 0.0_f64;
    // Every host but the reference aligned: no further round (its facts would be read
    // again for nothing, which at thousands of hosts takes seconds).
    while aligned.len() + 1 < hosts {
        let (collectives, messages) = bounds(streams, reference);
        let mut round = Vec::new();
        for h in (0..hosts).filter(|&h| h != reference && !aligned.contains_key(&h)) {
            // Collectives first: messages only where they are all there is. (nccl-sim's
            // point-to-point operations do not wait for their peer, so its messages break
            // causality; NCCL's cannot.)
            let fitted = collectives
                .get(&h)
                .and_then(|b| fit(b))
                .or_else(|| messages.get(&h).and_then(|b| fit(b)))
                // Facts that contradict each other more than the host's own clock does
                // them prove nothing to correct it by.
                .filter(|c| c.violated_after == 0 || c.violated_after < c.violated_before);
            if let Some(mut correction) = fitted {
                correction.uncertainty_ns += carried;
                round.push((h, correction));
            }
        }
        if round.is_empty() {
            break;
        }
        // Whom each was fitted against, before any of this round joins the reference side
        // (in the first round, the reference alone).
        let first_round = aligned.is_empty();
        let round: Vec<(usize, Correction, Vec<usize>)> = round
            .into_iter()
            .map(|(h, correction)| {
                let through = match first_round {
                    true => Vec::new(),
                    false => partners(streams, &origins, h, reference),
                };
                (h, correction, through)
            })
            .collect();
        for (h, correction, through) in round {
            for stream in streams.iter_mut().filter(|s| s.host == h) {
                stream.times.correct(&correction);
                stream.host = reference;
            }
            carried = carried.max(correction.uncertainty_ns);
            aligned.insert(
                h,
                Aligned {
                    correction,
                    through,
                },
            );
        }
    }
    aligned
}

/// The hosts on the reference side, other than the reference itself, that host `h`
/// shares a communicator with (`origins`: each stream's host before it joined that side).
fn partners(streams: &[Stream], origins: &[usize], h: usize, reference: usize) -> Vec<usize> {
    let comms: std::collections::BTreeSet<&str> = streams
        .iter()
        .filter(|s| s.host == h)
        .map(|s| s.comm.as_str())
        .collect();
    let mut through: Vec<usize> = streams
        .iter()
        .zip(origins)
        .filter(|(s, &origin)| {
            s.host == reference && origin != reference && comms.contains(s.comm.as_str())
        })
        .map(|(_, &origin)| origin)
        .collect();
    through.sort_unstable();
    through.dedup();
    through
}

impl OpsTimes {
    /// Every time moved by `correction` (times of the host it was fitted for).
    fn correct(&mut self, correction: &Correction) {
        let shift = |t: &mut f64| *t += correction.at(*t);
        for (begin, end) in &mut self.collectives {
            shift(begin);
            shift(end);
        }
        for times in self.sends.values_mut().chain(self.receives.values_mut()) {
            times.iter_mut().for_each(shift);
        }
    }
}

/// `offsets` (a location's clock offsets, in time order) with `correction` (of times
/// after `base`) added: each record's offset moves by the correction at its real time, and
/// a record is added at each of the correction's bends between two of them, so that
/// readers interpolating between the records apply the correction's line and bends; each
/// record's standard deviation becomes the correction's uncertainty.
pub(crate) fn corrected_offsets(
    offsets: &[ClockOffset],
    correction: &Correction,
    base: u64,
) -> Vec<ClockOffset> {
    let real_of = |o: &ClockOffset| (o.time as i128 + o.offset as i128 - base as i128) as f64;
    let mut with_bends: Vec<ClockOffset> = Vec::with_capacity(offsets.len());
    for (i, o) in offsets.iter().enumerate() {
        with_bends.push(*o);
        let Some(next) = offsets.get(i + 1) else {
            break;
        };
        let (real, next_real) = (real_of(o), real_of(next));
        let run = next.time.saturating_sub(o.time) as f64;
        for &(bend, _) in &correction.bends {
            if bend <= real || bend >= next_real || run <= 0.0 {
                continue;
            }
            // Real time grows along the segment as time × (1 + slope of the offsets).
            let slope = (next.offset - o.offset) as f64 / run;
            let ticks = ((bend - real) / (1.0 + slope)).round() as u64;
            // In integers: an offset since the epoch is beyond a double's nanoseconds.
            let offset = o.offset + (slope * ticks as f64).round() as i64;
            with_bends.push(ClockOffset {
                time: o.time + ticks,
                offset,
                standard_deviation: o.standard_deviation,
            });
        }
    }
    with_bends
        .iter()
        .map(|o| ClockOffset {
            offset: o.offset + correction.at(real_of(o)).round() as i64,
            // OTF2's only field for how sure an offset is: the uncertainty (a bound,
            // wider than a standard deviation), in ticks (nanoseconds).
            standard_deviation: o.standard_deviation.max(correction.uncertainty_ns),
            ..*o
        })
        .collect()
}

/// A host's correction as the merge reports it and writes it into the trace.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct HostCorrection {
    pub host: String,
    /// Added to the host's times in the middle of the run, nanoseconds.
    pub offset_ns: i64,
    /// How much faster than the reference host's the host's clock runs, ppm (taken out).
    pub drift_ppm: f64,
    /// ± this many nanoseconds (see [`Correction::uncertainty_ns`]).
    pub uncertainty_ns: i64,
    /// Facts used, and how many of them the uncorrected and the corrected times break.
    pub bounds: usize,
    pub violated_before: usize,
    pub violated_after: usize,
    /// The hosts aligned before it that it shares collectives or messages with, when it
    /// shares none with the reference host (its uncertainty includes theirs).
    pub through: Vec<String>,
    /// Points the correction bends through, where the drift changed (0: one line).
    pub bends: usize,
}

/// What the merge did to the hosts' clocks.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Alignment {
    /// The host whose clock the others are aligned to (left as it is).
    pub reference: String,
    pub hosts: Vec<HostCorrection>,
    /// Hosts left as they are: they share no collective or message both ways with the
    /// reference host or a host aligned to it, or those they share contradict each other
    /// more than the host's own clock does them.
    pub unaligned: Vec<String>,
}

impl Alignment {
    /// The largest uncertainty of any host, nanoseconds.
    pub fn uncertainty_ns(&self) -> i64 {
        self.hosts
            .iter()
            .map(|h| h.uncertainty_ns)
            .max()
            .unwrap_or(0)
    }

    /// The trace properties that carry it (see docs/trace-schema.md).
    pub fn properties(&self) -> Vec<(String, String)> {
        let hosts = self
            .hosts
            .iter()
            .map(|h| {
                let through = if h.through.is_empty() {
                    String::new()
                } else {
                    format!(" through={}", h.through.join(","))
                };
                let bends = if h.bends == 0 {
                    String::new()
                } else {
                    format!(" bends={}", h.bends)
                };
                format!(
                    "{} offset_ns={} drift_ppm={:.3} uncertainty_ns={} facts={} violated_before={} violated_after={}{through}{bends}",
                    h.host,
                    h.offset_ns,
                    h.drift_ppm,
                    h.uncertainty_ns,
                    h.bounds,
                    h.violated_before,
                    h.violated_after
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let mut properties = vec![(PROPERTY_REFERENCE.to_owned(), self.reference.clone())];
        // OTF2 takes an empty value for the removal of a property.
        if !self.hosts.is_empty() {
            properties.push((PROPERTY_HOSTS.to_owned(), hosts));
            properties.push((
                PROPERTY_UNCERTAINTY.to_owned(),
                self.uncertainty_ns().to_string(),
            ));
        }
        if !self.unaligned.is_empty() {
            properties.push((PROPERTY_UNALIGNED.to_owned(), self.unaligned.join(",")));
        }
        properties
    }
}

/// The host the others were aligned to.
pub const PROPERTY_REFERENCE: &str = "NCCL_SCOREP::CLOCK_CORRECTION_REFERENCE";
/// Each corrected host: `<host> offset_ns=… drift_ppm=… uncertainty_ns=… facts=…
/// violated_before=… violated_after=…` (and ` through=<host>,…` for one aligned through
/// other hosts, ` bends=…` for one whose drift changed), separated by `; `.
pub const PROPERTY_HOSTS: &str = "NCCL_SCOREP::CLOCK_CORRECTION_HOSTS";
/// The largest uncertainty of the alignment, nanoseconds: a skew between processes of
/// different hosts below it is not measured.
pub const PROPERTY_UNCERTAINTY: &str = "NCCL_SCOREP::CLOCK_CORRECTION_UNCERTAINTY_NS";
/// Hosts that could not be aligned (comma-separated).
pub const PROPERTY_UNALIGNED: &str = "NCCL_SCOREP::CLOCK_CORRECTION_UNALIGNED";

/// Aligns the hosts' clocks of `parts` (named `names`, read from `dirs`): reads their ops
/// streams, fits each host against the first host in name order, and replaces the
/// corrected parts' clock offsets and clock ranges. `None` when all parts are of one host
/// (processes of one host share one clock and are never shifted apart).
pub(crate) fn align(
    names: &[String],
    dirs: &[PathBuf],
    parts: &mut [PartDefs],
) -> Result<Option<Alignment>, String> {
    let part_hosts: Vec<&str> = names.iter().map(|n| super::host_of(n)).collect();
    let mut hosts: Vec<&str> = part_hosts.clone();
    hosts.sort_unstable();
    hosts.dedup();
    if hosts.len() < 2 {
        return Ok(None);
    }
    // `hosts` is sorted.
    let host_index = |h: &str| hosts.binary_search(&h).unwrap_or(0);
    // Times are handled after the job's first real time (doubles keep nanoseconds).
    let base = parts
        .iter()
        .filter_map(|p| p.defs.clock.map(|c| c.global_offset))
        .min()
        .unwrap_or(0);
    let mut streams = Vec::new();
    for (p, part) in parts.iter().enumerate() {
        let ops: Vec<(u64, String, u32)> = part
            .defs
            .locations
            .iter()
            .filter_map(|l| {
                let name = part.defs.string(l.name)?;
                let (comm, rank) = super::ops_stream(name)?;
                Some((l.id, super::comm_key(comm), rank))
            })
            .collect();
        if ops.is_empty() {
            continue;
        }
        let ids: Vec<u64> = ops.iter().map(|o| o.0).collect();
        let anchor = dirs[p].join(ANCHOR_FILE);
        let enqueue_attribute = part
            .defs
            .attributes
            .iter()
            .find(|a| part.defs.string(a.name) == Some(ENQUEUE_ATTRIBUTE))
            .map(|a| a.id);
        let times = read_ops_times(&anchor, &ids, &part.clock_offsets, base, enqueue_attribute)
            .map_err(|e| format!("part {}: reading its ops streams: {e}", names[p]))?;
        for ((_, comm, rank), times) in ops.into_iter().zip(times) {
            streams.push(Stream {
                comm,
                rank,
                host: host_index(part_hosts[p]),
                times,
            });
        }
    }
    let reference = 0;
    let fitted = fit_hosts(&mut streams, hosts.len(), reference);
    let mut alignment = Alignment {
        reference: hosts[reference].to_owned(),
        ..Alignment::default()
    };
    let mut corrections: HashMap<usize, Correction> = HashMap::new();
    for (h, host) in hosts.iter().enumerate().skip(1) {
        match fitted.get(&h) {
            Some(aligned) => {
                let c = &aligned.correction;
                alignment.hosts.push(HostCorrection {
                    host: host.to_string(),
                    offset_ns: c.offset_ns.round() as i64,
                    drift_ppm: -c.drift * 1e6,
                    uncertainty_ns: c.uncertainty_ns.ceil() as i64,
                    bounds: c.bounds,
                    violated_before: c.violated_before,
                    violated_after: c.violated_after,
                    through: aligned
                        .through
                        .iter()
                        .map(|&t| hosts[t].to_owned())
                        .collect(),
                    bends: c.bends.len(),
                });
                corrections.insert(h, c.clone());
            }
            None => alignment.unaligned.push(host.to_string()),
        }
    }
    for (p, part) in parts.iter_mut().enumerate() {
        let Some(correction) = corrections.get(&host_index(part_hosts[p])) else {
            continue;
        };
        let clock = part.defs.clock;
        // Readers hold a location's first and last offsets before and after them: the
        // correction there is the one at those records, which a bent correction makes
        // differ from the one at the clock range's ends.
        let mut at_ends: Vec<f64> = Vec::new();
        for location in part.defs.locations.iter() {
            let offsets = part.clock_offsets.entry(location.id).or_default();
            if offsets.is_empty() {
                // Times without offsets are real time already: two records carry the line.
                if let Some(clock) = clock {
                    for time in [
                        clock.global_offset,
                        clock.global_offset + clock.trace_length,
                    ] {
                        offsets.push(ClockOffset {
                            time,
                            offset: 0,
                            standard_deviation: 0.0,
                        });
                    }
                }
            }
            for o in [offsets.first(), offsets.last()].into_iter().flatten() {
                at_ends
                    .push(correction.at((o.time as i128 + o.offset as i128 - base as i128) as f64));
            }
            *offsets = corrected_offsets(offsets, correction, base);
        }
        if let Some(clock) = part.defs.clock.as_mut() {
            let start = clock.global_offset.saturating_sub(base) as f64;
            let end = start + clock.trace_length as f64;
            let shifted = |t: f64, by: f64| (base as i128 + (t + by) as i128).max(0) as u64;
            let least = at_ends.iter().fold(correction.at(start), |a, &b| a.min(b));
            let most = at_ends.iter().fold(correction.at(end), |a, &b| a.max(b));
            let new_start = shifted(start, least).saturating_sub(1);
            let new_end = shifted(end, most) + 1;
            clock.global_offset = new_start;
            clock.trace_length = new_end.saturating_sub(new_start).max(1);
            if clock.realtime_timestamp != otf2_sys::OTF2_UNDEFINED_TIMESTAMP {
                clock.realtime_timestamp = new_start;
            }
        }
    }
    Ok(Some(alignment))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bounds around a true line `offset + drift × t`: collectives every 10 ms over one
    /// second, each proving the truth within an asymmetric window of a few microseconds.
    fn synthetic(offset: f64, drift: f64) -> Vec<Bound> {
        synthetic_along(|at| offset + drift * at, 100)
    }

    /// Bounds around the true offset `truth(t)`, as [`synthetic`]'s, `count` of them.
    fn synthetic_along(truth: impl Fn(f64) -> f64, count: usize) -> Vec<Bound> {
        (0..count)
            .map(|i| {
                let at = 1e9 + i as f64 * 10e6;
                let below = 3_000.0 + (i % 7) as f64 * 1_000.0;
                let above = 4_000.0 + (i % 5) as f64 * 1_500.0;
                Bound {
                    at_ns: at,
                    lower: Some(truth(at) - below),
                    upper: Some(truth(at) + above),
                }
            })
            .collect()
    }

    #[test]
    fn the_fit_recovers_offset_and_drift_within_its_stated_uncertainty() {
        let drift = 40e-6;
        let bounds = synthetic(-5e6, drift);
        let fit = fit(&bounds).expect("bounds on both sides");
        for t in [1e9, 1.5e9, 1.99e9] {
            let truth = -5e6 + drift * t;
            let error = (fit.at(t) - truth).abs();
            assert!(
                error <= fit.uncertainty_ns + 1.0,
                "at {t}: error {error} ns, uncertainty {} ns",
                fit.uncertainty_ns
            );
            assert!(error < 2_000.0, "at {t}: error {error} ns");
        }
        assert!((fit.drift - drift).abs() < 5e-6, "drift {}", fit.drift);
        assert_eq!(fit.violated_before, 100, "5 ms off breaks every bound");
        assert_eq!(fit.violated_after, 0);
        assert!(fit.bends.is_empty(), "a steady drift needs no bend");
        // The narrowest windows (3 µs below, 4 µs above) make the uncertainty.
        assert!(fit.uncertainty_ns <= 3_500.0, "{}", fit.uncertainty_ns);
    }

    /// A drift that changes in the middle of the run (+50 ppm for a second, then −50 ppm
    /// for a second, as NTP slewing a clock back): the line alone is up to 25.5 µs off and
    /// breaks 147 of the 200 facts; the correction bends through the middles of 9 of the 18
    /// stretches (11 facts, 100 ms each; the others lie within a quarter of its uncertainty
    /// of the segments between) and stays within 1.9 µs of the truth, within its stated
    /// uncertainty, breaking none.
    #[test]
    fn a_drift_that_changes_during_the_run_is_followed() {
        let truth = |t: f64| -3e6 + 50e-6 * (1e9 - (t - 2e9).abs());
        let bounds = synthetic_along(truth, 200);
        let fit = fit(&bounds).expect("bounds on both sides");
        assert!((3..18).contains(&fit.bends.len()), "{:?}", fit.bends);
        let line = Correction {
            bends: Vec::new(),
            ..fit.clone()
        };
        assert!(
            violated(&bounds, |t| line.at(t)) > 100,
            "the line alone breaks most facts"
        );
        for i in 0..=200 {
            let t = 1e9 + i as f64 * 10e6;
            let error = (fit.at(t) - truth(t)).abs();
            assert!(error < 3_000.0, "at {t}: {error} ns off");
            assert!(
                error <= fit.uncertainty_ns,
                "at {t}: {error} ns off, stated {}",
                fit.uncertainty_ns
            );
        }
        assert_eq!(fit.violated_after, 0);
    }

    #[test]
    fn contradicting_bounds_give_the_middle_and_say_how_far_apart_they_are() {
        let bounds = [
            Bound {
                at_ns: 0.0,
                lower: Some(100.0),
                upper: None,
            },
            Bound {
                at_ns: 1.0,
                lower: None,
                upper: Some(60.0),
            },
        ];
        let fit = fit(&bounds).unwrap();
        assert_eq!(fit.drift, 0.0, "no span to see a drift in");
        assert_eq!(fit.offset_ns, 80.0);
        assert_eq!(fit.uncertainty_ns, 20.0);
        assert_eq!(fit.violated_after, 2);
        let one_sided = [bounds[0]];
        assert!(super::fit(&one_sided).is_none(), "needs both directions");
    }

    fn stream(comm: &str, rank: u32, host: usize, collectives: &[(f64, f64)]) -> Stream {
        Stream {
            comm: comm.to_owned(),
            rank,
            host,
            times: OpsTimes {
                collectives: collectives.to_vec(),
                ..OpsTimes::default()
            },
        }
    }

    #[test]
    fn collectives_bound_the_other_host_both_ways_and_messages_one_way() {
        // Host 1's clock reads 1000 ns ahead: a collective that all ranks begin at true
        // 100..=130 and that ends at true 200..=210.
        let mut streams = vec![
            stream("c", 0, 0, &[(100.0, 200.0)]),
            stream("c", 1, 0, &[(130.0, 205.0)]),
            stream("c", 2, 1, &[(1_110.0, 1_210.0)]),
        ];
        // Rank 0 sends to rank 2 at true 300, received at true 350; rank 2 sends to rank 0
        // at true 400, received at true 420.
        streams[0].times.sends.insert(2, vec![300.0]);
        streams[2].times.receives.insert(0, vec![1_350.0]);
        streams[2].times.sends.insert(0, vec![1_400.0]);
        streams[0].times.receives.insert(2, vec![420.0]);
        let (collectives, messages) = bounds(&streams, 0);
        // d = −1000 lies within what the collective proves: host 1's end (1210) is after
        // the reference's last begin (130), the reference's first end (200) after host 1's
        // last begin (1110).
        assert_eq!(
            collectives[&1],
            [Bound {
                at_ns: 1_210.0,
                lower: Some(130.0 - 1_210.0),
                upper: Some(200.0 - 1_110.0),
            }]
        );
        let mut from_messages = messages[&1].clone();
        from_messages.sort_by(|a, b| a.at_ns.total_cmp(&b.at_ns));
        assert_eq!(
            from_messages,
            [
                // Received on host 1: 1350 + d ≥ 300.
                Bound {
                    at_ns: 1_350.0,
                    lower: Some(300.0 - 1_350.0),
                    upper: None,
                },
                // Sent from host 1: 420 ≥ 1400 + d.
                Bound {
                    at_ns: 1_400.0,
                    lower: None,
                    upper: Some(420.0 - 1_400.0),
                },
            ]
        );
        let fitted = fit(&collectives[&1]).unwrap();
        assert_eq!(fitted.offset_ns, -995.0, "the middle of [-1080, -910]");
        assert_eq!(fitted.uncertainty_ns, 85.0);
        assert_eq!((fitted.violated_before, fitted.violated_after), (1, 0));
    }

    /// Host 1 shares communicator "a" with the reference host, host 2 shares "b" with host
    /// 1 only (pipeline stages on three nodes), host 3 shares nothing: host 2 is aligned
    /// through host 1, with host 1's uncertainty added to its own; host 3 is not aligned.
    #[test]
    fn a_host_without_facts_against_the_reference_is_aligned_through_an_aligned_one() {
        let (off1, off2) = (1_000_000.0, -3_000_000.0);
        // Two ranks per communicator: the first begins at t, the second 30 ns later; each
        // ends 100 ns after its begin.
        let pair = |offset_first: f64, offset_second: f64| {
            let times = |begin_delay: f64, offset: f64| -> Vec<(f64, f64)> {
                (0..20)
                    .map(|k| {
                        let t = 1e9 + k as f64 * 2e6 + begin_delay;
                        (t + offset, t + 100.0 + offset)
                    })
                    .collect()
            };
            (times(0.0, offset_first), times(30.0, offset_second))
        };
        let (a0, a1) = pair(0.0, off1);
        let (b1, b2) = pair(off1, off2);
        let mut streams = vec![
            stream("a", 0, 0, &a0),
            stream("a", 1, 1, &a1),
            stream("b", 0, 1, &b1),
            stream("b", 1, 2, &b2),
            stream("c", 0, 3, &a0),
        ];
        let aligned = fit_hosts(&mut streams, 4, 0);
        assert_eq!(aligned.keys().copied().collect::<Vec<_>>(), [1, 2]);
        let (one, two) = (&aligned[&1], &aligned[&2]);
        assert!(one.through.is_empty(), "against the reference itself");
        assert_eq!(two.through, [1]);
        for (host, truth, aligned) in [(1, -off1, one), (2, -off2, two)] {
            let c = &aligned.correction;
            let error = (c.at(1.02e9) - truth).abs();
            assert!(
                error <= c.uncertainty_ns,
                "host {host}: {} ns for {truth}, ±{}",
                c.at(1.02e9),
                c.uncertainty_ns
            );
            assert_eq!(c.violated_after, 0, "host {host}");
        }
        assert!(two.correction.uncertainty_ns >= one.correction.uncertainty_ns + 1.0);
        // Host 2's streams now read in the reference's time, as the reference side.
        assert!(streams.iter().all(|s| s.host == 0 || s.host == 3));
        let corrected = streams[3].times.collectives[0].0;
        assert!((corrected - (1e9 + 30.0)).abs() <= two.correction.uncertainty_ns);
    }

    /// A location's clock offsets at its start and end: 500 ns at 1 000, 700 ns at 3 000.
    fn two_offsets() -> [ClockOffset; 2] {
        [(1_000, 500), (3_000, 700)].map(|(time, offset)| ClockOffset {
            time,
            offset,
            standard_deviation: 0.0,
        })
    }

    #[test]
    fn clock_offsets_are_interpolated_and_corrected_along_the_line() {
        let offsets = two_offsets();
        assert_eq!(to_realtime(&offsets, 2_000, 100), 2_500.0);
        assert_eq!(
            to_realtime(&offsets, 0, 0),
            500.0,
            "the first offset before it"
        );
        let correction = Correction {
            offset_ns: 10.0,
            drift: 0.5,
            at_ns: 1_500.0,
            uncertainty_ns: 0.0,
            violated_before: 0,
            violated_after: 0,
            bounds: 0,
            bends: Vec::new(),
        };
        let corrected = corrected_offsets(&offsets, &correction, 0);
        assert_eq!(corrected[0].offset, 510);
        assert_eq!(
            corrected[0].standard_deviation, 0.0,
            "no uncertainty stated"
        );
        assert_eq!(corrected[1].offset, 700 + 10 + 1_100);
    }

    /// Bends along a straight line become one segment; a tent keeps its top.
    #[test]
    fn straight_runs_of_bends_become_one_segment() {
        let straight: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 2.0 * i as f64)).collect();
        assert_eq!(fewest_bends(&straight, 0.1), [(0.0, 0.0), (9.0, 18.0)]);
        let tent: Vec<(f64, f64)> = (0..=10)
            .map(|i| (i as f64, 5.0 - (i as f64 - 5.0).abs()))
            .collect();
        assert_eq!(
            fewest_bends(&tent, 0.1),
            [(0.0, 0.0), (5.0, 5.0), (10.0, 0.0)]
        );
        // Within the tolerance, the top goes too.
        assert_eq!(fewest_bends(&tent, 6.0), [(0.0, 0.0), (10.0, 0.0)]);
    }

    /// A bend between two records gets a record of its own, where the location's time
    /// reaches the bend's real time, so that readers interpolate through it.
    #[test]
    fn a_bend_between_two_clock_offsets_gets_a_record() {
        let offsets = two_offsets();
        let correction = Correction {
            offset_ns: 0.0,
            drift: 0.0,
            at_ns: 0.0,
            uncertainty_ns: 7.0,
            violated_before: 0,
            violated_after: 0,
            bounds: 0,
            bends: vec![(1_500.0, 0.0), (2_600.0, 100.0), (3_700.0, 0.0)],
        };
        let corrected = corrected_offsets(&offsets, &correction, 0);
        let records: Vec<(u64, i64)> = corrected.iter().map(|o| (o.time, o.offset)).collect();
        // Real time 2 600 is the location's time 2 000 (offset 600 there).
        assert_eq!(records, [(1_000, 500), (2_000, 700), (3_000, 700)]);
        assert!(corrected.iter().all(|o| o.standard_deviation == 7.0));
    }
}
