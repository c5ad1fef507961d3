//! The straggler rule: which rank of a collective arrives late by more than the run's
//! noise, with enough calls, a large enough effect and a significance test against the
//! other ranks (docs/summary.md, "Stragglers").
//!
//! In every instance a rank's **lateness** is its arrival less the median arrival of the
//! other ranks. A rank is named only when
//!
//! - the collective has at least [`MIN_INSTANCES`] complete instances;
//! - its median lateness is at least [`FLOOR_US`] (a scheduling delay of a busy host
//!   does not make a straggler);
//! - its median lateness is at least [`MIN_EFFECT`] of the time the other ranks spend in
//!   the call (on median): the others' wait for it matters;
//! - a one-sided Mann–Whitney U test of its lateness against the other ranks' lateness
//!   gives p < [`SIGNIFICANCE`] / the number of ranks (Bonferroni: every rank is tested).

use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

use super::tables::{comm_name, median, Collective};
use crate::compare::mann_whitney_p;

/// Complete instances a collective needs before any of its ranks is named.
pub const MIN_INSTANCES: usize = 6;
/// The least median lateness that names a rank, µs.
pub const FLOOR_US: f64 = 50.0;
/// The least median lateness, as a share of the other ranks' median time in the call.
pub const MIN_EFFECT: f64 = 0.10;
/// The family-wise significance level over a communicator's ranks.
pub const SIGNIFICANCE: f64 = 0.01;

/// The rule's parameters, as the JSON output states them.
#[derive(Clone, Debug, Serialize)]
pub struct Rule {
    pub min_instances: usize,
    pub floor_us: f64,
    pub min_effect: f64,
    pub significance: f64,
    pub test: &'static str,
}

impl Default for Rule {
    fn default() -> Rule {
        Rule {
            min_instances: MIN_INSTANCES,
            floor_us: FLOOR_US,
            min_effect: MIN_EFFECT,
            significance: SIGNIFICANCE,
            test: "one-sided Mann-Whitney U of the rank's lateness against the other ranks' \
                   lateness, p < significance / ranks",
        }
    }
}

/// One rank's lateness in one communicator's collective.
#[derive(Clone, Debug, Serialize)]
pub struct Lateness {
    pub comm: String,
    pub comm_hash: String,
    pub func: String,
    pub rank: i64,
    pub nranks: i64,
    /// Complete instances of the collective.
    pub instances: usize,
    /// Median over the instances of its arrival less the other ranks' median arrival, µs.
    pub median_lateness_us: f64,
    /// `median_lateness_us` / the other ranks' median time in the call.
    pub effect: f64,
    /// One-sided Mann–Whitney p-value (absent when an earlier condition failed).
    pub p_value: Option<f64>,
    /// Instances in which it arrived last.
    pub last_calls: usize,
    pub last_share: f64,
    /// The time the other ranks spent in the call before it arrived, summed, ms.
    pub cost_ms: f64,
    /// Whether the rule names it.
    pub named: bool,
    /// Why (not).
    pub verdict: String,
}

/// Per rank of one collective, what the instances say.
#[derive(Default)]
struct Evidence {
    lateness_ns: Vec<f64>,
    others_time_ns: Vec<f64>,
    last: usize,
    cost_ns: f64,
}

/// The ranks the rule names, the costliest first, and per collective its latest rank on
/// median (named or not).
pub(super) fn assess(
    collectives: &[Collective],
    comm_names: &HashMap<String, String>,
) -> (Vec<Lateness>, Vec<Lateness>) {
    let mut named = Vec::new();
    let mut latest = Vec::new();
    for collective in collectives {
        let mut ranks = judge(collective, &comm_name(&collective.hash, comm_names));
        named.extend(ranks.iter().filter(|l| l.named).cloned());
        ranks.sort_by(|a, b| {
            b.median_lateness_us
                .total_cmp(&a.median_lateness_us)
                .then(a.rank.cmp(&b.rank))
        });
        latest.extend(ranks.into_iter().next());
    }
    named.sort_by(|a, b| b.cost_ms.total_cmp(&a.cost_ms));
    latest.sort_by(|a, b| b.median_lateness_us.total_cmp(&a.median_lateness_us));
    (named, latest)
}

/// Every rank of one collective, judged by the rule.
fn judge(collective: &Collective, comm: &str) -> Vec<Lateness> {
    let mut evidence: BTreeMap<i64, Evidence> = BTreeMap::new();
    for instance in &collective.complete {
        // Relative to the first arrival: nanoseconds since 1970 lose their last digits in
        // an f64.
        let first = instance.first_arrival();
        let mut arrivals: Vec<f64> = instance
            .parts
            .iter()
            .map(|p| (p.arrival_ns - first) as f64)
            .collect();
        arrivals.sort_by(f64::total_cmp);
        let prefix: Vec<f64> = std::iter::once(0.0)
            .chain(arrivals.iter().scan(0.0, |sum, &a| {
                *sum += a;
                Some(*sum)
            }))
            .collect();
        let mut times: Vec<f64> = instance
            .parts
            .iter()
            .map(|p| (p.completion_ns - p.arrival_ns).max(0) as f64)
            .collect();
        times.sort_by(f64::total_cmp);
        let last = instance.last_arrival();
        let last_rank = instance
            .parts
            .iter()
            .find(|p| p.arrival_ns == last)
            .map(|p| p.rank);
        for part in &instance.parts {
            let arrival = (part.arrival_ns - first) as f64;
            let time = (part.completion_ns - part.arrival_ns).max(0) as f64;
            let e = evidence.entry(part.rank).or_default();
            e.lateness_ns
                .push(arrival - median_without(&arrivals, arrival));
            e.others_time_ns.push(median_without(&times, time));
            // The others that arrived before it waited for it.
            let before = arrivals.partition_point(|&a| a < arrival);
            e.cost_ns += before as f64 * arrival - prefix[before];
            if last_rank == Some(part.rank) {
                e.last += 1;
            }
        }
    }
    let instances = collective.complete.len();
    let tested = evidence.len().max(1) as f64;
    let ranks: Vec<i64> = evidence.keys().copied().collect();
    ranks
        .iter()
        .map(|&rank| {
            let e = &evidence[&rank];
            let lateness_us = median(&e.lateness_ns) / 1e3;
            let others_time_us = median(&e.others_time_ns) / 1e3;
            let effect = if others_time_us > 0.0 {
                lateness_us / others_time_us
            } else {
                0.0
            };
            let mut p_value = None;
            let verdict = if instances < MIN_INSTANCES {
                format!("{instances} calls, fewer than {MIN_INSTANCES}")
            } else if lateness_us < FLOOR_US {
                format!("late by less than {FLOOR_US:.0} us on median")
            } else if effect < MIN_EFFECT {
                format!(
                    "late by less than {:.0}% of the others' time in the call",
                    MIN_EFFECT * 100.0
                )
            } else {
                let others: Vec<f64> = ranks
                    .iter()
                    .filter(|&&other| other != rank)
                    .flat_map(|other| evidence[other].lateness_ns.iter().copied())
                    .collect();
                let p = one_sided_p(&e.lateness_ns, &others);
                p_value = Some(p);
                if p < SIGNIFICANCE / tested {
                    "named".to_owned()
                } else {
                    format!(
                        "not significant: p = {p:.2e}, not below {:.1e}",
                        SIGNIFICANCE / tested
                    )
                }
            };
            Lateness {
                comm: comm.to_owned(),
                comm_hash: collective.hash.clone(),
                func: collective.func.clone(),
                rank,
                nranks: collective.nranks,
                instances,
                median_lateness_us: lateness_us,
                effect,
                p_value,
                last_calls: e.last,
                last_share: e.last as f64 / instances.max(1) as f64,
                cost_ms: e.cost_ns / 1e6,
                named: verdict == "named",
                verdict,
            }
        })
        .collect()
}

/// The median of `sorted` without one occurrence of `value` (which it holds).
fn median_without(sorted: &[f64], value: f64) -> f64 {
    let at = sorted.partition_point(|&v| v < value);
    let others = sorted.len().saturating_sub(1);
    // The k-th of the others.
    let get = |k: usize| if k < at { sorted[k] } else { sorted[k + 1] };
    match others {
        0 => 0.0,
        _ if others % 2 == 1 => get(others / 2),
        _ => (get(others / 2 - 1) + get(others / 2)) / 2.0,
    }
}

/// The one-sided p-value that `mine` lies above `others`, from the two-sided Mann–Whitney
/// test: half of it when `mine`'s median is the greater, else one less half of it.
fn one_sided_p(mine: &[f64], others: &[f64]) -> f64 {
    let two_sided = mann_whitney_p(mine, others);
    if median(mine) > median(others) {
        two_sided / 2.0
    } else {
        1.0 - two_sided / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::super::tables::collectives;
    use super::super::Part;
    use super::*;

    fn part(rank: i64, nranks: i64, arrival_us: f64, completion_us: f64) -> Part {
        Part {
            rank,
            nranks,
            bytes: 1 << 20,
            arrival_ns: (arrival_us * 1e3) as i128,
            completion_ns: (completion_us * 1e3) as i128,
        }
    }

    /// `calls` instances of a 2-rank AllReduce: rank 1 arrives `late_us(i)` after rank 0,
    /// and both complete 100 µs after the later arrival.
    fn two_ranks(calls: u64, late_us: impl Fn(u64) -> f64) -> Vec<Collective> {
        let mut instances = HashMap::new();
        for seq in 0..calls {
            let t = seq as f64 * 10_000.0;
            let late = late_us(seq);
            let end = t + late.max(0.0) + 100.0;
            instances.insert(
                ("0xc".to_owned(), seq, "AllReduce".to_owned()),
                vec![part(0, 2, t, end), part(1, 2, t + late, end)],
            );
        }
        collectives(instances)
    }

    fn judged(collectives: &[Collective]) -> (Vec<Lateness>, Vec<Lateness>) {
        assess(collectives, &HashMap::new())
    }

    #[test]
    fn a_rank_late_every_time_is_named() {
        let (named, latest) = judged(&two_ranks(8, |_| 300.0));
        assert_eq!(named.len(), 1, "{latest:#?}");
        let l = &named[0];
        assert_eq!((l.rank, l.instances, l.last_calls), (1, 8, 8));
        assert!((l.median_lateness_us - 300.0).abs() < 1e-6);
        // The other rank's median time in the call: 300 µs waiting plus 100 µs.
        assert!((l.effect - 0.75).abs() < 1e-9, "{l:?}");
        assert!(l.p_value.unwrap() < SIGNIFICANCE / 2.0);
        // Rank 0 waited 300 µs in each of 8 calls.
        assert!((l.cost_ms - 2.4).abs() < 1e-9);
    }

    #[test]
    fn three_of_five_calls_name_nobody() {
        // Rank 1 last in 3 of 5 calls, by a lot: too few calls to tell.
        let (named, latest) = judged(&two_ranks(5, |i| if i < 3 { 2000.0 } else { -10.0 }));
        assert!(named.is_empty(), "{named:#?}");
        assert_eq!(latest[0].verdict, "5 calls, fewer than 6");
    }

    #[test]
    fn small_or_rare_lateness_names_nobody() {
        // Always last, by 20 µs: below the floor.
        let (named, latest) = judged(&two_ranks(40, |_| 20.0));
        assert!(named.is_empty(), "{named:#?}");
        assert!(latest[0].verdict.contains("less than 50 us"), "{latest:#?}");
        // Late by 100 µs half the time, early by 100 µs otherwise: no median lateness.
        let (named, _) = judged(&two_ranks(40, |i| if i % 2 == 0 { 100.0 } else { -100.0 }));
        assert!(named.is_empty(), "{named:#?}");
    }

    #[test]
    fn lateness_small_against_the_call_names_nobody() {
        // 60 µs late in calls where the others spend 60 + 1000 µs: under 10 %.
        let mut instances = HashMap::new();
        for seq in 0..20u64 {
            let t = seq as f64 * 10_000.0;
            instances.insert(
                ("0xc".to_owned(), seq, "AllReduce".to_owned()),
                vec![part(0, 2, t, t + 1060.0), part(1, 2, t + 60.0, t + 1060.0)],
            );
        }
        let (named, latest) = judged(&collectives(instances));
        assert!(named.is_empty(), "{named:#?}");
        assert!(latest[0].verdict.contains("10%"), "{latest:#?}");
    }

    #[test]
    fn in_a_larger_communicator_the_late_rank_stands_out_from_the_median() {
        // 8 ranks, noise of ±40 µs, rank 5 120 µs late in 8 of 10 calls.
        let mut instances = HashMap::new();
        for seq in 0..10u64 {
            let t = seq as f64 * 10_000.0;
            let parts = (0..8)
                .map(|rank| {
                    let noise = ((rank * 37 + seq as i64 * 11) % 9 - 4) as f64 * 10.0;
                    let late = if rank == 5 && seq % 5 != 0 {
                        120.0
                    } else {
                        0.0
                    };
                    part(rank, 8, t + noise + late, t + 300.0)
                })
                .collect();
            instances.insert(("0xc".to_owned(), seq, "AllReduce".to_owned()), parts);
        }
        let (named, latest) = judged(&collectives(instances));
        assert_eq!(named.len(), 1, "{latest:#?}");
        assert_eq!(named[0].rank, 5);
        assert_eq!(latest[0].rank, 5);
    }

    #[test]
    fn the_median_of_the_others_leaves_one_value_out() {
        let sorted = [1.0, 2.0, 3.0, 10.0];
        assert_eq!(median_without(&sorted, 10.0), 2.0);
        assert_eq!(median_without(&sorted, 1.0), 3.0);
        assert_eq!(median_without(&[1.0, 5.0], 1.0), 5.0);
        assert_eq!(median_without(&[2.0, 2.0, 9.0], 2.0), 5.5);
    }
}
