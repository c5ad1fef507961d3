//! `nccl-scorep compare A B`: two runs side by side, per communicator × operation × size
//! bucket: time per call, bus bandwidth and the share of the time spent waiting for the
//! last rank, with the change and a verdict.
//!
//! A difference is called a regression (or an improvement) only when the data shows it is
//! more than the runs' own noise: the medians of the two runs' times per call differ by
//! more than the threshold (10 % by default), **and** a two-sided Mann–Whitney U test of the
//! two sets of calls says such a difference is not chance (p < 0.001). The test compares
//! every call of one run with every call of the other, so it asks for no particular
//! distribution of the times (a few slow outliers do not move it), and it holds the
//! within-run spread against the difference. Groups with fewer than 8 calls in either run
//! get no significance: their verdict is "few calls".
//!
//! A profile (`.cubex`) holds sums, not calls: compared from profiles, a group's time per
//! call is a mean, there is no spread to test a change against, and a change beyond the
//! threshold is only "slower" or "faster" ([`compare_profiles`]).

pub mod runs;

use nccl_scorep_cube::Cube;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

use crate::nccl_ops::is_point_to_point;
use crate::profile::Sample;

/// The comparison's JSON schema version (`docs/profile.md`).
pub const FORMAT_VERSION: u32 = 1;

/// Calls a group needs in each run for the significance test.
pub const MIN_CALLS: usize = 8;
/// The largest p-value still called significant.
pub const SIGNIFICANCE: f64 = 0.001;
/// The default threshold: a relative change of the median time per call.
pub const DEFAULT_THRESHOLD: f64 = 0.10;

/// What is compared: communicator, operation, size bucket.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct GroupKey {
    /// The communicator's name, or `<n>-rank comm` when it has none (its hash differs from
    /// run to run).
    pub comm: String,
    pub func: String,
    pub bucket: String,
}

/// The verdict on one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Regression,
    Improvement,
    /// Within the threshold, or not significant.
    Same,
    /// Too few calls in a run to tell noise from change.
    FewCalls,
    OnlyInA,
    OnlyInB,
    /// Beyond the threshold, from profiles (no calls to test the change against).
    Slower,
    Faster,
}

impl Verdict {
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Regression => "REGRESSION",
            Verdict::Improvement => "improvement",
            Verdict::Same => "same",
            Verdict::FewCalls => "few calls",
            Verdict::OnlyInA => "only in A",
            Verdict::OnlyInB => "only in B",
            Verdict::Slower => "slower (untested)",
            Verdict::Faster => "faster (untested)",
        }
    }
}

/// One run's figures for a group.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Side {
    pub calls: usize,
    /// Median time per call from the last rank's arrival to the last completion, µs (the
    /// mean, per rank and call, when the run is a profile).
    pub median_us: f64,
    /// All bus bytes / all that time.
    pub busbw_gbs: f64,
    /// Time waiting for the last rank / execution time.
    pub wait_share: f64,
}

/// One group of both runs.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    #[serde(flatten)]
    pub key: GroupKey,
    pub a: Option<Side>,
    pub b: Option<Side>,
    /// (median B − median A) / median A.
    pub change: Option<f64>,
    /// Mann–Whitney U test, two-sided.
    pub p_value: Option<f64>,
    pub verdict: Verdict,
}

/// The whole comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub format_version: u32,
    pub a: String,
    pub b: String,
    pub threshold: f64,
    /// Whether the calls were tested (both runs are traces), or only sums compared.
    pub tested: bool,
    pub significance: f64,
    pub min_calls: usize,
    pub rows: Vec<Row>,
    pub regressions: usize,
    pub improvements: usize,
    /// Where the difference cube (B − A) was written.
    pub difference_cube: Option<String>,
}

/// The group of a sample.
fn key_of(sample: &Sample) -> GroupKey {
    group_key(&sample.comm, sample.nranks, &sample.func, &sample.bucket)
}

/// The group of an operation on communicator `comm` of `nranks` ranks.
fn group_key(comm: &str, nranks: i64, func: &str, bucket: &str) -> GroupKey {
    let anonymous = comm.is_empty() || comm.starts_with("comm 0x") || comm.starts_with("NCCL comm");
    GroupKey {
        comm: if anonymous {
            format!("{nranks}-rank comm")
        } else {
            comm.to_owned()
        },
        func: func.to_owned(),
        bucket: bucket.to_owned(),
    }
}

/// The groups of either run, in order.
fn union<'a, A, B>(
    a: &'a BTreeMap<GroupKey, A>,
    b: &'a BTreeMap<GroupKey, B>,
) -> BTreeSet<&'a GroupKey> {
    a.keys().chain(b.keys()).collect()
}

/// The comparison of the rows.
fn comparison(
    a_name: &str,
    b_name: &str,
    threshold: f64,
    tested: bool,
    rows: Vec<Row>,
) -> Comparison {
    let count = |v: Verdict| rows.iter().filter(|r| r.verdict == v).count();
    Comparison {
        format_version: FORMAT_VERSION,
        a: a_name.to_owned(),
        b: b_name.to_owned(),
        threshold,
        tested,
        significance: SIGNIFICANCE,
        min_calls: MIN_CALLS,
        regressions: count(Verdict::Regression),
        improvements: count(Verdict::Improvement),
        rows,
        difference_cube: None,
    }
}

fn groups(samples: &[Sample]) -> BTreeMap<GroupKey, Vec<&Sample>> {
    let mut groups: BTreeMap<GroupKey, Vec<&Sample>> = BTreeMap::new();
    for sample in samples {
        groups.entry(key_of(sample)).or_default().push(sample);
    }
    groups
}

fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

fn side(samples: &[&Sample]) -> Side {
    let mut times: Vec<f64> = samples.iter().map(|s| s.time_ns).collect();
    let total: f64 = times.iter().sum();
    let bus: f64 = samples.iter().map(|s| s.bus_bytes).sum();
    let wait: f64 = samples.iter().map(|s| s.wait_ns).sum();
    Side {
        calls: samples.len(),
        median_us: median(&mut times) / 1e3,
        busbw_gbs: if total > 0.0 { bus / total } else { 0.0 },
        wait_share: share(wait, wait + total),
    }
}

fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part / whole
    } else {
        0.0
    }
}

/// The two-sided p-value of the Mann–Whitney U test of `a` against `b` (normal
/// approximation with the correction for ties; good from about 8 values per side).
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    if a.is_empty() || b.is_empty() {
        return 1.0;
    }
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&v| (v, true))
        .chain(b.iter().map(|&v| (v, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    // Ranks, ties sharing their mean rank.
    let n = all.len();
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let mean_rank = (i + j) as f64 / 2.0 + 1.0;
        let tied = (j - i + 1) as f64;
        tie_term += tied * tied * tied - tied;
        rank_sum_a += mean_rank * all[i..=j].iter().filter(|(_, in_a)| *in_a).count() as f64;
        i = j + 1;
    }
    let u = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let total = n1 + n2;
    let variance = n1 * n2 / 12.0 * ((total + 1.0) - tie_term / (total * (total - 1.0)));
    if variance <= 0.0 {
        return 1.0;
    }
    // Continuity correction.
    let z = ((u - mean).abs() - 0.5).max(0.0) / variance.sqrt();
    erfc(z / std::f64::consts::SQRT_2)
}

/// The complementary error function (Numerical Recipes' Chebyshev fit, relative error
/// below 1.2e-7: plenty for p-values).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let value = t * poly.exp();
    if x >= 0.0 {
        value
    } else {
        2.0 - value
    }
}

/// Compares run A's operations with run B's.
pub fn compare(
    a_name: &str,
    a: &[Sample],
    b_name: &str,
    b: &[Sample],
    threshold: f64,
) -> Comparison {
    let (groups_a, groups_b) = (groups(a), groups(b));
    let mut rows = Vec::new();
    for key in union(&groups_a, &groups_b) {
        let (sa, sb) = (groups_a.get(key), groups_b.get(key));
        let row = match (sa, sb) {
            (Some(sa), Some(sb)) => {
                let (side_a, side_b) = (side(sa), side(sb));
                let change = (side_a.median_us > 0.0)
                    .then(|| (side_b.median_us - side_a.median_us) / side_a.median_us);
                let enough = sa.len() >= MIN_CALLS && sb.len() >= MIN_CALLS;
                let p_value = enough.then(|| {
                    let ta: Vec<f64> = sa.iter().map(|s| s.time_ns).collect();
                    let tb: Vec<f64> = sb.iter().map(|s| s.time_ns).collect();
                    mann_whitney_p(&ta, &tb)
                });
                let beyond = change.is_some_and(|c| c.abs() > threshold);
                let verdict = match (beyond, p_value) {
                    (false, _) => Verdict::Same,
                    (true, None) => Verdict::FewCalls,
                    (true, Some(p)) if p < SIGNIFICANCE => {
                        if change.unwrap_or(0.0) > 0.0 {
                            Verdict::Regression
                        } else {
                            Verdict::Improvement
                        }
                    }
                    (true, Some(_)) => Verdict::Same,
                };
                Row {
                    key: key.clone(),
                    a: Some(side_a),
                    b: Some(side_b),
                    change,
                    p_value,
                    verdict,
                }
            }
            (Some(sa), None) => Row {
                key: key.clone(),
                a: Some(side(sa)),
                b: None,
                change: None,
                p_value: None,
                verdict: Verdict::OnlyInA,
            },
            (None, Some(sb)) => Row {
                key: key.clone(),
                a: None,
                b: Some(side(sb)),
                change: None,
                p_value: None,
                verdict: Verdict::OnlyInB,
            },
            (None, None) => continue,
        };
        rows.push(row);
    }
    comparison(a_name, b_name, threshold, true, rows)
}

/// A group's sums in a profile.
#[derive(Default)]
struct Sums {
    visits: f64,
    execution_s: f64,
    wait_s: f64,
    bus_bytes: f64,
    ranks: usize,
}

/// The groups of a profile: on each ops stream, the call paths with a size bucket.
fn profile_groups(cube: &Cube) -> Result<BTreeMap<GroupKey, Side>, String> {
    let dims = cube.dimensions();
    let metric = |name: &str| {
        dims.metric_by_name(name)
            .ok_or_else(|| format!("no `{name}` metric: not a profile of nccl-scorep"))
    };
    let (visits, execution, wait, bus) = (
        metric("visits")?,
        metric("execution_time")?,
        metric("wait_for_last_rank")?,
        metric("bus_bytes")?,
    );
    let value = |m, c, l| cube.get(m, c, l).map_or(0.0, |v| v.as_f64());
    // Ranks per communicator name, for the names of anonymous communicators.
    let mut ops_streams = Vec::new();
    let mut ranks_of: BTreeMap<&str, usize> = BTreeMap::new();
    for location in dims.location_ids() {
        if let Some((comm, _)) = nccl_scorep_merge::ops_stream(dims.location(location).name()) {
            ops_streams.push((location, comm));
            *ranks_of.entry(comm).or_default() += 1;
        }
    }
    let mut sums: BTreeMap<GroupKey, Sums> = BTreeMap::new();
    for cnode in dims.cnode_ids() {
        let node = dims.cnode(cnode);
        let Some(bucket) = node
            .parameters()
            .iter()
            .find_map(|(key, value)| match value {
                nccl_scorep_cube::Parameter::String(text) if key == "nccl.bytes" => Some(text),
                _ => None,
            })
        else {
            continue;
        };
        let func = dims.region(node.region()).name();
        for &(location, comm) in &ops_streams {
            let visited = value(visits, cnode, location);
            if visited == 0.0 {
                continue;
            }
            let key = group_key(comm, ranks_of[comm] as i64, func, bucket);
            let group = sums.entry(key).or_default();
            group.visits += visited;
            group.execution_s += value(execution, cnode, location);
            group.wait_s += value(wait, cnode, location);
            group.bus_bytes += value(bus, cnode, location);
            group.ranks = ranks_of[comm];
        }
    }
    Ok(sums
        .into_iter()
        .map(|(key, g)| {
            let own_s = (g.execution_s - g.wait_s).max(0.0);
            let calls = if is_point_to_point(&key.func) {
                g.visits
            } else {
                g.visits / g.ranks.max(1) as f64
            };
            let side = Side {
                calls: calls.round() as usize,
                median_us: if g.visits > 0.0 {
                    own_s / g.visits * 1e6
                } else {
                    0.0
                },
                busbw_gbs: if own_s > 0.0 {
                    g.bus_bytes / own_s / 1e9
                } else {
                    0.0
                },
                wait_share: share(g.wait_s, g.execution_s),
            };
            (key, side)
        })
        .collect())
}

/// Compares two runs of which at least one is a profile: from sums, without a test.
pub fn compare_profiles(
    a_name: &str,
    a: &Cube,
    b_name: &str,
    b: &Cube,
    threshold: f64,
) -> Result<Comparison, String> {
    let groups_a = profile_groups(a).map_err(|e| format!("{a_name}: {e}"))?;
    let groups_b = profile_groups(b).map_err(|e| format!("{b_name}: {e}"))?;
    let rows: Vec<Row> = union(&groups_a, &groups_b)
        .into_iter()
        .map(|key| {
            let (sa, sb) = (groups_a.get(key).cloned(), groups_b.get(key).cloned());
            let change = match (&sa, &sb) {
                (Some(sa), Some(sb)) if sa.median_us > 0.0 => {
                    Some((sb.median_us - sa.median_us) / sa.median_us)
                }
                _ => None,
            };
            let verdict = match (&sa, &sb, change) {
                (Some(_), None, _) => Verdict::OnlyInA,
                (None, _, _) => Verdict::OnlyInB,
                (_, _, Some(c)) if c > threshold => Verdict::Slower,
                (_, _, Some(c)) if c < -threshold => Verdict::Faster,
                _ => Verdict::Same,
            };
            Row {
                key: key.clone(),
                a: sa,
                b: sb,
                change,
                p_value: None,
                verdict,
            }
        })
        .collect();
    Ok(comparison(a_name, b_name, threshold, false, rows))
}

/// The comparison as a table for a terminal of 100 columns.
pub fn render(c: &Comparison) -> String {
    let mut out = format!("A: {}\nB: {}\n\n", c.a, c.b);
    out.push_str(&format!(
        "{:<12} {:<13} {:<13} {:>7} {:>8} {:>8} {:>7} {:>5} {:>4}  {}\n",
        "comm", "op", "size", "calls", "A us", "B us", "change", "bw", "wait", "verdict"
    ));
    out.push_str(&format!(
        "{:<12} {:<13} {:<13} {:>7} {:>8} {:>8} {:>7} {:>5} {:>4}\n",
        "", "", "", "A/B", "median", "median", "", "B/A", "B %"
    ));
    let cut = |text: &str, width: usize| -> String {
        if text.chars().count() <= width {
            text.to_owned()
        } else {
            text.chars().take(width - 1).chain(['…']).collect()
        }
    };
    for row in &c.rows {
        let calls = format!(
            "{}/{}",
            row.a.as_ref().map_or(0, |s| s.calls),
            row.b.as_ref().map_or(0, |s| s.calls)
        );
        let us = |s: &Option<Side>| {
            s.as_ref()
                .map_or("-".to_owned(), |s| format!("{:.1}", s.median_us))
        };
        let change = row
            .change
            .map_or("-".to_owned(), |c| format!("{:+.1}%", c * 100.0));
        let busbw = match (&row.a, &row.b) {
            (Some(a), Some(b)) if a.busbw_gbs > 0.0 => format!("{:.2}", b.busbw_gbs / a.busbw_gbs),
            _ => "-".to_owned(),
        };
        let wait = row
            .b
            .as_ref()
            .map_or("-".to_owned(), |b| format!("{:.0}", b.wait_share * 100.0));
        out.push_str(&format!(
            "{:<12} {:<13} {:<13} {:>7} {:>8} {:>8} {:>7} {:>5} {:>4}  {}\n",
            cut(&row.key.comm, 12),
            cut(&row.key.func, 13),
            cut(&row.key.bucket, 13),
            calls,
            us(&row.a),
            us(&row.b),
            change,
            busbw,
            wait,
            row.verdict.text()
        ));
    }
    if c.tested {
        out.push_str(&format!(
            "\n{} regression(s), {} improvement(s). A change counts when the median time per\n\
             call moves by more than {:.0}% and a Mann-Whitney test of the calls gives p < {}\n\
             (at least {} calls per run). bw: bus bandwidth B/A; wait: B's share waiting for\n\
             the last rank.",
            c.regressions,
            c.improvements,
            c.threshold * 100.0,
            c.significance,
            c.min_calls
        ));
    } else {
        out.push_str(&format!(
            "\nFrom a profile: sums, not calls. The times are means per rank and call, and a\n\
             change beyond {:.0}% is only slower or faster, untested against the runs' noise:\n\
             compare the traces for a verdict. bw: bus bandwidth B/A; wait: B's share waiting\n\
             for the last rank.",
            c.threshold * 100.0
        ));
    }
    if let Some(path) = &c.difference_cube {
        out.push_str(&format!("\nB - A for Cube: {path}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(func: &str, time_ns: f64) -> Sample {
        Sample {
            comm: "world".into(),
            nranks: 4,
            func: func.into(),
            bucket: "1-4 MiB".into(),
            time_ns,
            wait_ns: time_ns / 4.0,
            bus_bytes: 1e6,
        }
    }

    #[test]
    fn the_mann_whitney_test_tells_shifted_from_equal() {
        let a: Vec<f64> = (0..20).map(|i| 100.0 + f64::from(i)).collect();
        let same: Vec<f64> = (0..20).map(|i| 100.5 + f64::from(i)).collect();
        let shifted: Vec<f64> = (0..20).map(|i| 150.0 + f64::from(i)).collect();
        assert!(mann_whitney_p(&a, &same) > 0.5);
        assert!(mann_whitney_p(&a, &shifted) < 1e-6);
        // All values tied: no evidence at all.
        assert_eq!(mann_whitney_p(&[1.0; 10], &[1.0; 10]), 1.0);
        // A textbook value: two samples of 8 without overlap, z = 3.31, p ≈ 0.00093.
        let low: Vec<f64> = (1..=8).map(f64::from).collect();
        let high: Vec<f64> = (9..=16).map(f64::from).collect();
        let p = mann_whitney_p(&low, &high);
        assert!((p - 0.00093).abs() < 0.0001, "{p}");
        assert!((erfc(0.0) - 1.0).abs() < 1e-6 && (erfc(1.0) - 0.157_299).abs() < 1e-6);
    }

    #[test]
    fn only_a_significant_change_beyond_the_threshold_is_a_regression() {
        let a: Vec<Sample> = (0..20)
            .map(|i| sample("AllReduce", 100.0 + f64::from(i)))
            .collect();
        let slower: Vec<Sample> = (0..20)
            .map(|i| sample("AllReduce", 200.0 + f64::from(i)))
            .collect();
        let c = compare("a", &a, "b", &slower, DEFAULT_THRESHOLD);
        assert_eq!(c.rows.len(), 1);
        assert_eq!(c.rows[0].verdict, Verdict::Regression);
        assert_eq!(c.regressions, 1);
        let c = compare("b", &slower, "a", &a, DEFAULT_THRESHOLD);
        assert_eq!(c.rows[0].verdict, Verdict::Improvement);
        // 5 % slower: within the threshold.
        let close: Vec<Sample> = (0..20)
            .map(|i| sample("AllReduce", 105.0 + f64::from(i)))
            .collect();
        assert_eq!(
            compare("a", &a, "b", &close, DEFAULT_THRESHOLD).rows[0].verdict,
            Verdict::Same
        );
        // Far slower, but 3 calls: no verdict.
        let few: Vec<Sample> = (0..3)
            .map(|i| sample("AllReduce", 300.0 + f64::from(i)))
            .collect();
        assert_eq!(
            compare("a", &a, "b", &few, DEFAULT_THRESHOLD).rows[0].verdict,
            Verdict::FewCalls
        );
        // A group of one run only.
        let other: Vec<Sample> = (0..20).map(|_| sample("AllGather", 50.0)).collect();
        let c = compare("a", &a, "b", &other, DEFAULT_THRESHOLD);
        let verdicts: Vec<Verdict> = c.rows.iter().map(|r| r.verdict).collect();
        assert_eq!(verdicts, [Verdict::OnlyInB, Verdict::OnlyInA]);
        let text = render(&c);
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    }

    #[test]
    fn communicators_without_a_name_are_known_by_their_size() {
        let mut s = sample("AllReduce", 1.0);
        s.comm = "comm 0x1234abcd".into();
        assert_eq!(key_of(&s).comm, "4-rank comm");
    }
}
