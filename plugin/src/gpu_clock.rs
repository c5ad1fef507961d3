//! GPU clock → host clock: where a KernelCh `pTimer` (the GPU's `%globaltimer`, ns) lies
//! on the host's CLOCK_MONOTONIC.
//!
//! The two clocks differ by an offset (`host = gpu + offset`) that nobody tells us, but
//! every KernelCh bounds it:
//!
//! - **from above**: the host notices a kernel's start (the start callback) and its end
//!   (the stop record) only after the GPU wrote the timestamp, so
//!   `offset <= host_callback - ptimer` for both;
//! - **from below**: a kernel cannot start before the application enqueued its operation,
//!   nor before NCCL began to launch it, so `offset >= not_before - ptimer_start`, where
//!   `not_before` is the CollApi/P2pApi start or, later, the first KernelLaunch start of
//!   that call's group (NCCL 2.28+; the collector picks it).
//!
//! The estimate is the tightest upper bound (the minimum-delay filter NTP uses): the host
//! polls the GPU's timestamps every few microseconds, so its quickest detection is close to
//! the truth, while the lower bound is loose whenever kernels queue behind each other. The
//! error bound is the width of the interval: the true offset lies in
//! `[estimate - error, estimate]`, so converted times are never early, and late by at most
//! `error` (in practice by about the host's polling delay). Without a lower bound (NCCL
//! before 2.28, or no API events asked for) the error is reported as unknown.
//!
//! The two clocks also drift apart (a few ppm), so the offset is a line over time, not a
//! constant. Each bound holds at a moment the GPU's own clock names exactly (the
//! timestamp it concerns), so the bounds are kept as points (GPU time, bound). The
//! tightest upper bound at a moment that every line under all the upper points obeys is
//! their **lower convex hull** there; at the hull's ends, though, that is only the end
//! point's own bound (a loose first detection would stay loose whatever came later).
//! Lines are therefore also limited to the most a clock drifts, [`MAX_DRIFT_PPB`]: the
//! estimate at a moment is the highest line of at most that slope under every upper
//! bound of the last [`HULL_SPAN_NS`], the lower bound the lowest such line over every
//! lower bound. It holds for a drift that is constant over the span (within a fraction
//! of a microsecond when it changes by a ppm over seconds) and below the maximum, and it
//! uses the bounds that came *after* the moment too: the collector converts an interval a
//! while after it saw it. The bounds the sanity checks compare with are gathered in
//! windows of [`WINDOW_NS`] of host time (the current window together with the previous
//! one).

use std::cell::Cell;

/// Length of one window of bounds (host time).
pub const WINDOW_NS: u64 = 2_000_000_000;
/// How far back (GPU time, from the latest one) bounds stay in the hulls.
pub const HULL_SPAN_NS: u64 = 2 * WINDOW_NS;
/// Points a hull keeps at most (noisy bounds leave a few dozen; bounds that keep
/// tightening along a curve could leave one per kernel): the oldest go first, which only
/// loosens the bound.
const MAX_HULL_POINTS: usize = 256;
/// The most a GPU's timer is taken to drift against the host's clock, in parts per
/// billion: 100 ppm, twice a common quartz's tolerance.
pub const MAX_DRIFT_PPB: u64 = 100_000;

/// Bounds on a GPU clock's offset from the host clock (`host = gpu + offset`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffsetBounds {
    /// Greatest lower bound of the offset seen, if any.
    pub lower: Option<i64>,
    /// Least upper bound of the offset seen, if any.
    pub upper: Option<i64>,
}

type Bounds = OffsetBounds;

impl Bounds {
    fn merge(self, other: Bounds) -> Bounds {
        Bounds {
            lower: max_opt(self.lower, other.lower),
            upper: min_opt(self.upper, other.upper),
        }
    }
}

fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The offset estimate of one GPU clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// `host_ns = gpu_ns + offset_ns`.
    pub offset_ns: i64,
    /// The true offset is within `[offset_ns - error_ns, offset_ns]`; `None`: only
    /// bounded from above.
    pub error_ns: Option<u64>,
}

impl Estimate {
    /// Host time of a GPU timestamp.
    pub fn to_host(&self, gpu_ns: u64) -> u64 {
        (gpu_ns as i64).saturating_add(self.offset_ns).max(0) as u64
    }
}

/// `host_ns - gpu_ns`, saturating: a garbage GPU timestamp (NCCL's `pTimer` is not ours
/// to trust) must not overflow.
fn offset_bound(host_ns: u64, gpu_ns: u64) -> i64 {
    (host_ns as i64).saturating_sub(gpu_ns as i64)
}

/// Collects bounds on one GPU clock's offset from the host clock.
#[derive(Clone, Debug, Default)]
pub struct GpuClockEstimator {
    window_start: u64,
    current: Bounds,
    previous: Bounds,
    /// The upper bounds.
    upper: BoundHull,
    /// The lower bounds, negated (a lower bound `l` is an upper bound `-l` of the negated
    /// offset, which drifts as fast the other way).
    negated_lower: BoundHull,
    /// [`feasible_slopes`] of the hulls as they are, once worked out (a new bound clears it).
    slopes: Cell<Option<(i128, i128)>>,
    /// Host time of the first bound.
    first_bound_ns: Option<u64>,
}

/// Upper bounds (GPU time, bound) on a quantity that drifts by at most [`MAX_DRIFT_PPB`]:
/// the vertices of their lower convex hull, in time order, from the last [`HULL_SPAN_NS`].
#[derive(Clone, Debug, Default)]
struct BoundHull {
    points: Vec<(u64, i64)>,
    /// The last two slopes [`BoundHull::lowest_for_slope`] was asked for, with its answers
    /// (`usize::MAX`: none), until the points change: the conversions of a collector pass
    /// all come after its bounds, with the same two slopes.
    lowest: Cell<[(i128, usize); 2]>,
}

/// No slope asked for yet.
const NO_LOWEST: [(i128, usize); 2] = [(0, usize::MAX); 2];

/// Twice the signed area of the triangle `a, b, c`: positive when `a → b → c` turns left
/// (counter-clockwise), i.e. `b` lies below the segment from `a` to `c`. In 128 bits: host
/// times and (untrusted) offsets both span 64 bits.
fn turn(a: (u64, i64), b: (u64, i64), c: (u64, i64)) -> i128 {
    let (ax, ay) = (i128::from(a.0), i128::from(a.1));
    let (bx, by) = (i128::from(b.0) - ax, i128::from(b.1) - ay);
    let (cx, cy) = (i128::from(c.0) - ax, i128::from(c.1) - ay);
    bx * cy - by * cx
}

/// Division rounded towards +∞ by a positive divisor (stable `div_ceil` is unsigned only).
trait DivCeilPositive {
    fn div_ceil_positive(self, divisor: i128) -> i128;
}

impl DivCeilPositive for i128 {
    fn div_ceil_positive(self, divisor: i128) -> i128 {
        // Nearly always both fit in 64 bits, whose division is a single instruction
        // (128-bit division is a library call, twice here).
        if let (Ok(value), Ok(divisor)) = (i64::try_from(self), i64::try_from(divisor)) {
            return i128::from(
                value.div_euclid(divisor) + i64::from(value.rem_euclid(divisor) != 0),
            );
        }
        self.div_euclid(divisor) + i128::from(self.rem_euclid(divisor) != 0)
    }
}

impl BoundHull {
    /// Adds an upper bound to the hull (points come nearly in time order: a binary search
    /// finds their place, usually the end). A point on or above the hull is no tighter
    /// anywhere and is dropped for good: more points only lower the hull.
    fn add(&mut self, point: (u64, i64)) {
        self.lowest.set(NO_LOWEST);
        let hull = &mut self.points;
        // Nearly every bound is the newest: its place is the end, found without a search.
        let mut at = if hull.last().is_some_and(|&(t, _)| t < point.0) {
            hull.len()
        } else {
            hull.partition_point(|&(t, _)| t < point.0)
        };
        if let Some(&(t, bound)) = hull.get(at) {
            if t == point.0 {
                if bound <= point.1 {
                    return;
                }
                hull.remove(at);
            }
        }
        if at > 0 && at < hull.len() && turn(hull[at - 1], point, hull[at]) <= 0 {
            return;
        }
        hull.insert(at, point);
        // Neighbours that are no longer below their own neighbours' segment go.
        while at >= 2 && turn(hull[at - 2], hull[at - 1], hull[at]) <= 0 {
            hull.remove(at - 1);
            at -= 1;
        }
        while at + 2 < hull.len() && turn(hull[at], hull[at + 1], hull[at + 2]) <= 0 {
            hull.remove(at + 1);
        }
        self.forget_old();
    }

    /// Bounds older than the span go, and the oldest beyond the most points kept (the
    /// hull of the others is higher, never lower: still a bound).
    fn forget_old(&mut self) {
        let hull = &mut self.points;
        let newest = hull.last().map_or(0, |&(t, _)| t);
        // Usually nothing is: the first point tells, without a search.
        if hull.len() <= MAX_HULL_POINTS
            && hull
                .first()
                .is_none_or(|&(t, _)| t.saturating_add(HULL_SPAN_NS) >= newest)
        {
            return;
        }
        let old = hull
            .partition_point(|&(t, _)| t.saturating_add(HULL_SPAN_NS) < newest)
            .max(hull.len().saturating_sub(MAX_HULL_POINTS));
        if old > 0 {
            hull.drain(..old);
        }
    }

    /// The tightest upper bound at `moment` that every line with a slope (ppb) between
    /// `low` and `high` under all the bounds obeys; `None` before any bound. For a slope
    /// `b`, the highest such line at `moment` is the least of `bound + b × (moment − t)`
    /// over the hull's points; it is highest for the slope of the hull's segment at
    /// `moment` (the hull itself), or, where that segment is steeper than the range allows
    /// (or beyond the hull's ends), for the range's limit on that side.
    fn at(&self, moment: u64, (low, high): (i128, i128)) -> Option<i64> {
        let hull = &self.points;
        let at = hull.partition_point(|&(t, _)| t < moment);
        let billion = 1_000_000_000_i128;
        // The segment's slope in parts per billion, clamped to the range.
        let slope = match (at.checked_sub(1).map(|i| hull[i]), hull.get(at)) {
            (Some((t0, b0)), Some(&(t1, b1))) => {
                let rise = (i128::from(b1) - i128::from(b0)) * billion;
                let run = i128::from(t1 - t0);
                if rise > high * run {
                    high
                } else if rise < low * run {
                    low
                } else {
                    // Within the range: the hull there, b0 + (b1 - b0) × (host - t0) /
                    // (t1 - t0), rounded up.
                    let step = (i128::from(b1) - i128::from(b0)) * i128::from(moment - t0);
                    let value = i128::from(b0) + step.div_ceil_positive(run);
                    return Some(value.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64);
                }
            }
            (None, _) => low,
            (_, None) => high,
        };
        let &(t, bound) = hull.get(self.lowest_for_slope(slope))?;
        let since = i128::from(moment) - i128::from(t);
        let value = i128::from(bound) + (slope * since).div_ceil_positive(billion);
        Some(value.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
    }

    /// The point whose line of slope `slope` (ppb) lies lowest, i.e. where the least of
    /// `bound + slope × (moment − t)` is, whatever the moment: on a convex hull the
    /// segments' slopes rise, so it is the first point whose next segment is at least
    /// that steep (a binary search; rounding up, a monotone step, keeps it the least).
    fn lowest_for_slope(&self, slope: i128) -> usize {
        let known = self.lowest.get();
        if let Some(&(_, index)) = known.iter().find(|&&(s, i)| s == slope && i != usize::MAX) {
            return index;
        }
        let hull = &self.points;
        let billion = 1_000_000_000_i128;
        let falls = |i: usize| {
            let ((t0, b0), (t1, b1)) = (hull[i], hull[i + 1]);
            (i128::from(b1) - i128::from(b0)) * billion < slope * i128::from(t1 - t0)
        };
        let (mut low, mut high) = (0, hull.len().saturating_sub(1));
        while low < high {
            let middle = (low + high) / 2;
            if falls(middle) {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        self.lowest.set([(slope, low), known[0]]);
        low
    }
}

/// The drift allowed: every slope (ppb) up to [`MAX_DRIFT_PPB`] either way.
const ANY_DRIFT: (i128, i128) = (-(MAX_DRIFT_PPB as i128), MAX_DRIFT_PPB as i128);

/// The slopes (ppb, low and high) of the lines that lie under every upper bound of
/// `upper` and over every lower bound of `negated_lower` (negated), within the drift
/// allowed: the offset's true line is one of them when its drift is steady over the
/// hulls' span. A lower bound some time before an upper one limits how fast the offset
/// can have risen between them, and one after it how fast it can have fallen; with bounds
/// of both kinds seconds apart, this is far narrower than the drift allowed. Rounded
/// outwards. Bounds that no line fits (a clock whose drift changed, or a wrong bound) give
/// the whole drift allowed. Of a hull with many points, every few are taken, its first and
/// last among them (fewer bounds only widen the range), so that the cost stays at most
/// [`SLOPE_POINTS`] squared.
fn feasible_slopes(upper: &BoundHull, negated_lower: &BoundHull) -> (i128, i128) {
    let billion = 1_000_000_000_i128;
    let (mut low, mut high) = ANY_DRIFT;
    for (lower_at, negated) in sampled(&negated_lower.points) {
        let lower = -i128::from(negated);
        for (upper_at, bound) in sampled(&upper.points) {
            let gap = i128::from(bound) - lower;
            if upper_at > lower_at {
                let run = i128::from(upper_at - lower_at);
                high = high.min((gap * billion).div_ceil_positive(run));
            } else if lower_at > upper_at {
                let run = i128::from(lower_at - upper_at);
                low = low.max((-gap * billion).div_euclid(run));
            }
        }
    }
    if low > high {
        ANY_DRIFT
    } else {
        (low, high)
    }
}

/// Points of a hull [`feasible_slopes`] takes at most.
const SLOPE_POINTS: usize = 64;

/// At most about [`SLOPE_POINTS`] of `points`, evenly spaced, the first and the last
/// among them.
fn sampled(points: &[(u64, i64)]) -> impl Iterator<Item = (u64, i64)> + '_ {
    let step = points.len().div_ceil(SLOPE_POINTS).max(1);
    let last = points.len().checked_sub(1);
    points
        .iter()
        .enumerate()
        .filter(move |&(i, _)| i % step == 0 || Some(i) == last)
        .map(|(_, &point)| point)
}

impl GpuClockEstimator {
    /// The host saw, at `host_ns`, something the GPU had stamped `gpu_ns` before.
    pub fn observed_after(&mut self, host_ns: u64, gpu_ns: u64) {
        self.roll(host_ns);
        let bound = offset_bound(host_ns, gpu_ns);
        self.current.upper = min_opt(self.current.upper, Some(bound));
        self.upper.add((gpu_ns, bound));
        self.slopes.set(None);
    }

    /// The GPU stamped `gpu_ns` after the host's moment `host_ns`.
    pub fn happened_before(&mut self, host_ns: u64, gpu_ns: u64) {
        self.roll(host_ns);
        let bound = offset_bound(host_ns, gpu_ns);
        self.current.lower = max_opt(self.current.lower, Some(bound));
        self.negated_lower.add((gpu_ns, bound.saturating_neg()));
        self.slopes.set(None);
    }

    /// Host time of the first bound this clock got; `None` before any.
    pub fn first_bound_ns(&self) -> Option<u64> {
        self.first_bound_ns
    }

    fn roll(&mut self, host_ns: u64) {
        self.first_bound_ns.get_or_insert(host_ns);
        if host_ns >= self.window_start.saturating_add(WINDOW_NS) {
            // The window just ended becomes the previous one, unless it is older than
            // that (a long pause without kernels): then nothing old is kept.
            let adjacent = host_ns < self.window_start.saturating_add(2 * WINDOW_NS);
            self.previous = if adjacent {
                self.current
            } else {
                Bounds::default()
            };
            self.current = Bounds::default();
            self.window_start = host_ns;
        }
    }

    /// The bounds of the current and the previous window.
    pub fn bounds(&self) -> OffsetBounds {
        self.current.merge(self.previous)
    }

    /// The estimate for the GPU timestamp `gpu_ns`; `None` before any upper bound.
    pub fn estimate_at(&self, gpu_ns: u64) -> Option<Estimate> {
        let (low, high) = self.slopes.get().unwrap_or_else(|| {
            let slopes = feasible_slopes(&self.upper, &self.negated_lower);
            self.slopes.set(Some(slopes));
            slopes
        });
        let upper = self.upper.at(gpu_ns, (low, high))?;
        // The negated offset drifts the other way.
        let lower = self
            .negated_lower
            .at(gpu_ns, (-high, -low))
            .map(i64::saturating_neg);
        Some(match lower {
            // Inconsistent bounds (a clock drifting faster than assumed, or a wrapped
            // kernel ring reported a later work's times): trust the upper bound.
            Some(lower) if lower <= upper => Estimate {
                offset_ns: upper,
                error_ns: Some(upper.abs_diff(lower)),
            },
            _ => Estimate {
                offset_ns: upper,
                error_ns: None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The binary search finds the same least line as trying every point, on hulls of
    /// noisy bounds along drifting clocks, for the steepest drifts and at any moment.
    #[test]
    fn the_lowest_line_is_found_without_trying_every_point() {
        let mut next = crate::test_random::xorshift(0x2545_f491_4f6c_dd1d);
        let billion = 1_000_000_000_i128;
        let max = i128::from(MAX_DRIFT_PPB);
        // The steepest slopes asked twice (the second answer is the one remembered), before
        // and after a bound is added, which must make it forget: the first slope asked
        // after it is one remembered before it.
        let check = |hull: &BoundHull, round: u64| {
            for slope in [-max, max, 0, max / 3, -max, max] {
                let brute = (0..hull.points.len())
                    .min_by_key(|&i| {
                        let (t, b) = hull.points[i];
                        i128::from(b) * billion - slope * i128::from(t)
                    })
                    .unwrap();
                let found = hull.lowest_for_slope(slope);
                let value = |i: usize, moment: u64| {
                    let (t, b) = hull.points[i];
                    i128::from(b)
                        + (slope * (i128::from(moment) - i128::from(t))).div_ceil_positive(billion)
                };
                for moment in [0, 1_500_000_000, u64::from(u32::MAX) * 4] {
                    assert_eq!(value(found, moment), value(brute, moment), "round {round}");
                }
            }
        };
        for round in 0..200 {
            let mut hull = BoundHull::default();
            let drift = (next() % 401) as i64 - 200; // ppm
            let count = next() % 300 + 1;
            for i in 0..count {
                let t = 1_000_000_000 + i * 1_000_000 + next() % 500_000;
                let bound = 5_000_000 + (t as i64 / 1_000_000) * drift + (next() % 40_000) as i64;
                hull.add((t, bound));
            }
            check(&hull, round);
            // A much tighter bound in the middle or at the end: it becomes the lowest point
            // for most slopes.
            let t = 1_000_000_000 + (next() % (count + 1)) * 1_000_000 + 250_000;
            hull.add((t, -1_000_000_000));
            check(&hull, round);
        }
    }

    #[test]
    fn the_truth_lies_within_the_error_bound() {
        let offset = 1_000_000_i64;
        let mut clock = GpuClockEstimator::default();
        assert_eq!(clock.estimate_at(0), None);
        for i in 0..100u64 {
            let gpu_start = 5_000_000 + i * 100_000;
            let host_start = (gpu_start as i64 + offset) as u64;
            // The API call came 3..30 µs before the kernel; the host noticed 1..20 µs late.
            clock.happened_before(host_start - 3_000 - (i % 10) * 3_000, gpu_start);
            clock.observed_after(host_start + 1_000 + (i % 7) * 3_000, gpu_start);
        }
        let estimate = clock.estimate_at(5_000_000).unwrap();
        let error = estimate.error_ns.unwrap();
        // Tightest detection 1 µs late, tightest API call 3 µs early: [offset-3µs, offset+1µs].
        assert_eq!(error, 4_000);
        assert_eq!(estimate.offset_ns, offset + 1_000);
        assert!(estimate.offset_ns - error as i64 <= offset && offset <= estimate.offset_ns);
        assert_eq!(estimate.to_host(10), (10 + estimate.offset_ns) as u64);
    }

    #[test]
    fn without_a_lower_bound_the_error_is_unknown() {
        let mut clock = GpuClockEstimator::default();
        clock.observed_after(2_000, 500);
        clock.observed_after(3_000, 1_800);
        let estimate = clock.estimate_at(1_800).unwrap();
        assert_eq!(estimate.offset_ns, 1_200);
        assert_eq!(estimate.error_ns, None);
        // The segment joining the two bounds (1 350 halfway) falls faster than any clock
        // drifts: the later bound plus the most drift (100 ppm of 0.65, 1.8 and 7.2 µs,
        // rounded up) is tighter, between them and beyond.
        assert_eq!(clock.estimate_at(1_150).unwrap().offset_ns, 1_201);
        assert_eq!(clock.estimate_at(0).unwrap().offset_ns, 1_201);
        assert_eq!(clock.estimate_at(9_000).unwrap().offset_ns, 1_201);
    }

    #[test]
    fn garbage_timestamps_do_not_overflow() {
        // One window: as i64, u64::MAX is -1 and 2^63 is i64::MIN.
        let mut clock = GpuClockEstimator::default();
        clock.happened_before(10, u64::MAX);
        clock.observed_after(20, 1 << 63);
        let estimate = clock.estimate_at(1 << 63).unwrap();
        assert_eq!(estimate.offset_ns, i64::MAX, "saturated");
        // The lower bound 11 at GPU time 2^64 - 1, less the most drift over 2^63 ns.
        let drift = ((1u64 << 63) - 1) / 10_000 + 1;
        assert_eq!(estimate.error_ns, Some(i64::MAX as u64 - 11 + drift));
        assert_eq!(estimate.to_host(5), i64::MAX as u64);
        let mut clock = GpuClockEstimator::default();
        clock.observed_after(1 << 62, u64::MAX - 5);
        assert_eq!(
            clock.estimate_at(u64::MAX - 5).unwrap().offset_ns,
            (1 << 62) + 6
        );
        // Bounds from both ends of the 64-bit ranges on one hull: no overflow either.
        let mut clock = GpuClockEstimator::default();
        clock.observed_after(0, u64::MAX);
        clock.observed_after(1, 1 << 63);
        clock.observed_after(2, 0);
        // Only the latest bound is within the span (1 at GPU time 2^64 - 1): at 2^62, it
        // plus the most drift over the distance.
        let drift = (u64::MAX - (1 << 62)).div_ceil(10_000) as i64;
        assert_eq!(clock.estimate_at(1 << 62).unwrap().offset_ns, 1 + drift);
    }

    #[test]
    fn old_windows_are_forgotten() {
        let mut clock = GpuClockEstimator::default();
        clock.observed_after(1_000, 0);
        clock.happened_before(900, 0);
        // Two windows later the clocks drifted by 50 ns; the old bounds are gone.
        let later = 3 * WINDOW_NS;
        clock.observed_after(later + 1_050, later);
        clock.happened_before(later + 950, later);
        let estimate = clock.estimate_at(later).unwrap();
        assert_eq!(estimate.offset_ns, 1_050);
        assert_eq!(estimate.error_ns, Some(100));
        assert_eq!(
            clock.upper.points.len(),
            1,
            "the old upper bound left the hull"
        );
    }

    /// Host times, offsets and detection delays of a GPU whose clock drifts against the
    /// host's by `ppm` (the offset grows by that much), seen every 100 µs for 2 s with
    /// delays of 0.5–30 µs (every 13th quick).
    fn drifting_observations(ppm: i64) -> Vec<(u64, u64, i64)> {
        (0..20_000u64)
            .map(|i| {
                let host = 10_000_000_000 + i * 100_000;
                let offset = 1_000_000 + (host as i64 - 10_000_000_000) * ppm / 1_000_000;
                let delay = if i % 13 == 0 {
                    500
                } else {
                    1_000 + (i * 7_919) % 29_000
                };
                let gpu = (host as i64 - offset) as u64;
                (host + delay, gpu, offset)
            })
            .collect()
    }

    #[test]
    fn a_drifting_clock_is_never_converted_early() {
        for ppm in [-50, 0, 20, 50] {
            let seen = drifting_observations(ppm);
            let mut clock = GpuClockEstimator::default();
            for &(host, gpu, _) in &seen {
                clock.observed_after(host, gpu);
            }
            for &(host, gpu, offset) in &seen[..seen.len() - 13] {
                let estimate = clock.estimate_at(gpu).unwrap();
                let late = estimate.to_host(gpu) as i64 - (gpu as i64 + offset);
                // Never early; late by about the quick detections' delay (0.5 µs) plus
                // the drift between two of them (1.3 ms × 50 ppm = 65 ns).
                assert!((0..=600).contains(&late), "{ppm} ppm: {late} ns at {host}");
            }
            // The hull keeps few points.
            assert!(
                clock.upper.points.len() < 64,
                "{}",
                clock.upper.points.len()
            );
        }
    }

    #[test]
    fn a_window_minimum_would_be_early_on_a_drifting_clock() {
        // What the hull is for: the least bound of the last seconds is older than the
        // moment, and the offset grew since.
        let seen = drifting_observations(50);
        let least = seen
            .iter()
            .map(|&(h, g, _)| offset_bound(h, g))
            .min()
            .unwrap();
        let &(_, gpu, offset) = seen.last().unwrap();
        assert!((gpu as i64 + least) < gpu as i64 + offset - 50_000);
    }

    #[test]
    fn later_bounds_tighten_earlier_moments() {
        // The first kernel was noticed 80 µs late, the later ones within 1 µs: its
        // conversion, made after them, uses theirs.
        let mut clock = GpuClockEstimator::default();
        clock.observed_after(1_080_000, 0);
        assert_eq!(clock.estimate_at(0).unwrap().offset_ns, 1_080_000);
        for i in 1..10u64 {
            clock.observed_after(1_000_000 + i * 50_000 + 1_000, i * 50_000);
        }
        // The next bound, 50 µs later, plus the most drift over them (5 ns).
        assert_eq!(clock.estimate_at(0).unwrap().offset_ns, 1_001_005);
        assert_eq!(clock.estimate_at(75_000).unwrap().offset_ns, 1_001_000);
    }

    /// Whatever order the bounds come in (the newest last, as nearly always, or not), the
    /// hull holds exactly the points strictly below every segment joining two others.
    #[test]
    fn the_hull_is_the_lower_hull_of_its_bounds_in_any_order() {
        let mut next = crate::test_random::xorshift(0x9e37_79b9_7f4a_7c15);
        for round in 0..300 {
            let count = (next() % 40 + 1) as usize;
            let mut points: Vec<(u64, i64)> = (0..count as u64)
                .map(|i| {
                    let t = 1_000_000 + i * 10_000 + next() % 5_000;
                    (t, 3_000 + (next() % 2_000) as i64 + (t / 100_000) as i64)
                })
                .collect();
            let below_every_segment = |j: usize, points: &[(u64, i64)]| {
                (0..j).all(|i| {
                    (j + 1..points.len()).all(|k| turn(points[i], points[j], points[k]) > 0)
                })
            };
            let expected: Vec<(u64, i64)> = (0..points.len())
                .filter(|&j| below_every_segment(j, &points))
                .map(|j| points[j])
                .collect();
            if round % 2 == 1 {
                // A few swapped neighbours: those bounds come before newer ones.
                for i in (1..points.len()).step_by(3) {
                    points.swap(i - 1, i);
                }
            }
            let mut hull = BoundHull::default();
            for &point in &points {
                hull.add(point);
            }
            assert_eq!(hull.points, expected, "round {round}");
        }
    }

    #[test]
    fn the_order_of_the_bounds_does_not_change_the_hull() {
        let seen = drifting_observations(20);
        let mut in_order = GpuClockEstimator::default();
        let mut shuffled = GpuClockEstimator::default();
        for &(host, gpu, _) in &seen {
            in_order.observed_after(host, gpu);
        }
        // Pairs swapped, as a kernel's start and end bounds arrive.
        for pair in seen.chunks(2) {
            for &(host, gpu, _) in pair.iter().rev() {
                shuffled.observed_after(host, gpu);
            }
        }
        assert_eq!(in_order.upper.points, shuffled.upper.points);
    }

    #[test]
    fn the_truth_lies_between_the_bounds_whatever_the_drift_and_delays() {
        // Random runs: a drift within the maximum, kernels every 0.1–3 ms, detections
        // 0.2–60 µs late, API calls 5–100 µs early, bounds given in kernel pairs.
        let mut random = crate::test_random::xorshift(0x2545_f491_4f6c_dd1d);
        let mut next = |below: u64| random() % below;
        for _ in 0..50 {
            let ppb = next(180_001) as i64 - 90_000;
            let truth =
                |gpu: u64| 7_000_000_000 + (gpu as i64 - 1_000_000_000) * ppb / 1_000_000_000;
            let mut clock = GpuClockEstimator::default();
            let mut kernels = Vec::new();
            let mut gpu = 1_000_000_000u64;
            for _ in 0..300 {
                gpu += 100_000 + next(2_900_000);
                let stop = gpu + 1_000 + next(50_000);
                let host = |g: u64| (g as i64 + truth(g)) as u64;
                clock.happened_before(host(gpu) - 5_000 - next(95_000), gpu);
                clock.observed_after(host(gpu) + 200 + next(60_000), gpu);
                clock.observed_after(host(stop) + 200 + next(60_000), stop);
                kernels.push((gpu, stop));
            }
            for &(start, stop) in &kernels {
                for g in [start, stop] {
                    let estimate = clock.estimate_at(g).unwrap();
                    let upper = estimate.offset_ns;
                    let lower = upper - estimate.error_ns.unwrap() as i64;
                    let t = truth(g);
                    assert!(
                        lower <= t && t <= upper,
                        "{ppb} ppb at {g}: {lower} {t} {upper}"
                    );
                }
            }
        }
    }

    /// One quick detection, 100 ms into a second whose other detections are 30 µs late,
    /// and lower bounds 17 µs loose throughout (a steady clock): before the quick one, the
    /// estimate can only follow it back at the steepest drift allowed. The bounds a second
    /// apart allow about 19 ppm, not 100, so the start is converted 2 µs late instead of
    /// 10, never early.
    #[test]
    fn lower_and_upper_bounds_a_second_apart_narrow_the_drift() {
        let offset = 3_000_000_i64;
        let host = |gpu: u64| (gpu as i64 + offset) as u64;
        let mut narrowed = GpuClockEstimator::default();
        let mut upper_only = GpuClockEstimator::default();
        for clock in [&mut narrowed, &mut upper_only] {
            for i in 0..=100u64 {
                let gpu = i * 10_000_000;
                let delay = if i == 10 { 100 } else { 30_000 };
                clock.observed_after(host(gpu) + delay, gpu);
            }
        }
        for i in 0..=100u64 {
            let gpu = i * 10_000_000;
            narrowed.happened_before(host(gpu) - 17_000, gpu);
        }
        let late = |clock: &GpuClockEstimator| {
            let estimate = clock.estimate_at(0).unwrap();
            estimate.to_host(0) as i64 - host(0) as i64
        };
        let (low, high) = feasible_slopes(&narrowed.upper, &narrowed.negated_lower);
        assert!((-19_100..=-18_900).contains(&low), "{low} ppb");
        assert!(high <= 47_100, "{high} ppb");
        assert!(
            (1_900..=2_100).contains(&late(&narrowed)),
            "{}",
            late(&narrowed)
        );
        assert_eq!(late(&upper_only), 10_100);
    }

    /// However many points the hulls keep, the slopes are worked out from at most about
    /// 64 of each, the ends among them, and still hold the truth.
    #[test]
    fn the_slopes_come_from_a_bounded_number_of_points() {
        let points: Vec<(u64, i64)> = (0..256).map(|i| (i * 1_000, i as i64)).collect();
        let taken: Vec<(u64, i64)> = sampled(&points).collect();
        assert!(taken.len() <= SLOPE_POINTS + 1, "{}", taken.len());
        assert_eq!(taken.first(), points.first());
        assert_eq!(taken.last(), points.last());
        assert_eq!(sampled(&points[..10]).count(), 10);
        assert_eq!(sampled(&[]).count(), 0);
    }

    /// Bounds that no steady line fits (a lower bound above an upper one) leave the whole
    /// drift allowed rather than none.
    #[test]
    fn inconsistent_bounds_allow_the_whole_drift() {
        // Offset 1 ms by the upper bounds at 0 and 200 ms, and a lower bound in between
        // whose host time is `lower_host`.
        let slopes = |lower_host: u64| {
            let mut clock = GpuClockEstimator::default();
            clock.observed_after(1_000_000, 0);
            clock.observed_after(201_000_000, 200_000_000);
            clock.happened_before(lower_host, 100_000_000);
            feasible_slopes(&clock.upper, &clock.negated_lower)
        };
        // The lower bound 0.5 µs above the upper ones; consistent again 0.5 µs below.
        assert_eq!(slopes(101_000_500), ANY_DRIFT);
        assert_eq!(slopes(100_999_500), (-5_000, 5_000));
    }

    #[test]
    fn bounds_on_a_curve_keep_the_hull_bounded_and_valid() {
        // Detections that keep getting quicker along a convex curve: every bound is a
        // vertex of the hull, which keeps only the newest.
        let mut clock = GpuClockEstimator::default();
        let offset = 5_000_000_i64;
        for i in 0..1_000u64 {
            let gpu = 1_000_000 + i * 100_000;
            let delay = 1_000 + (1_000 - i) * (1_000 - i);
            clock.observed_after((gpu as i64 + offset) as u64 + delay, gpu);
        }
        assert_eq!(clock.upper.points.len(), MAX_HULL_POINTS);
        for i in (0..1_000u64).step_by(7) {
            let estimate = clock.estimate_at(1_000_000 + i * 100_000).unwrap();
            assert!(estimate.offset_ns >= offset, "early at {i}");
        }
    }
}
