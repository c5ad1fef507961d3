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
//!   so `offset >= api_call_start - ptimer_start` (the CollApi/P2pApi start, NCCL 2.28+).
//!
//! The estimate is the tightest upper bound (the minimum-delay filter NTP uses): the host
//! polls the GPU's timestamps every few microseconds, so its quickest detection is close to
//! the truth, while the lower bound is loose whenever kernels queue behind each other. The
//! error bound is the width of the interval: the true offset lies in
//! `[estimate - error, estimate]`, so converted times are never early, and late by at most
//! `error` (in practice by about the host's polling delay). Without a lower bound (NCCL
//! before 2.28, or no API events asked for) the error is reported as unknown.
//!
//! The two clocks also drift apart (a few ppm): bounds are gathered in windows of
//! [`WINDOW_NS`] of host time, and the estimate uses the current window together with the
//! previous one, so a drift of d ppm adds at most `2 × WINDOW_NS × d × 1e-6` ns of error.

/// Length of one window of bounds (host time).
pub const WINDOW_NS: u64 = 2_000_000_000;

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
}

impl GpuClockEstimator {
    /// The host saw, at `host_ns`, something the GPU had stamped `gpu_ns` before.
    pub fn observed_after(&mut self, host_ns: u64, gpu_ns: u64) {
        self.roll(host_ns);
        let bound = offset_bound(host_ns, gpu_ns);
        self.current.upper = min_opt(self.current.upper, Some(bound));
    }

    /// The GPU stamped `gpu_ns` after the host's moment `host_ns`.
    pub fn happened_before(&mut self, host_ns: u64, gpu_ns: u64) {
        self.roll(host_ns);
        let bound = offset_bound(host_ns, gpu_ns);
        self.current.lower = max_opt(self.current.lower, Some(bound));
    }

    fn roll(&mut self, host_ns: u64) {
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

    /// The current estimate; `None` before any upper bound.
    pub fn estimate(&self) -> Option<Estimate> {
        let bounds = self.bounds();
        let upper = bounds.upper?;
        Some(match bounds.lower {
            // Inconsistent bounds (the clocks drifted within the windows, or a wrapped
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

    #[test]
    fn the_truth_lies_within_the_error_bound() {
        let offset = 1_000_000_i64;
        let mut clock = GpuClockEstimator::default();
        assert_eq!(clock.estimate(), None);
        for i in 0..100u64 {
            let gpu_start = 5_000_000 + i * 100_000;
            let host_start = (gpu_start as i64 + offset) as u64;
            // The API call came 3..30 µs before the kernel; the host noticed 1..20 µs late.
            clock.happened_before(host_start - 3_000 - (i % 10) * 3_000, gpu_start);
            clock.observed_after(host_start + 1_000 + (i % 7) * 3_000, gpu_start);
        }
        let estimate = clock.estimate().unwrap();
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
        let estimate = clock.estimate().unwrap();
        assert_eq!(estimate.offset_ns, 1_200);
        assert_eq!(estimate.error_ns, None);
    }

    #[test]
    fn garbage_timestamps_do_not_overflow() {
        // One window: as i64, u64::MAX is -1 and 2^63 is i64::MIN.
        let mut clock = GpuClockEstimator::default();
        clock.happened_before(10, u64::MAX);
        clock.observed_after(20, 1 << 63);
        let estimate = clock.estimate().unwrap();
        assert_eq!(estimate.offset_ns, i64::MAX, "saturated");
        assert_eq!(estimate.error_ns, Some(i64::MAX as u64 - 11));
        assert_eq!(estimate.to_host(5), i64::MAX as u64);
        let mut clock = GpuClockEstimator::default();
        clock.observed_after(1 << 62, u64::MAX - 5);
        assert_eq!(clock.estimate().unwrap().offset_ns, (1 << 62) + 6);
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
        let estimate = clock.estimate().unwrap();
        assert_eq!(estimate.offset_ns, 1_050);
        assert_eq!(estimate.error_ns, Some(100));
    }
}
