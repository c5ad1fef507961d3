//! Sanity checks on the GPU timestamps NCCL reports (KernelCh and KernelPhase `pTimer`s):
//! an interval that cannot be true is rejected before it reaches the trace or the GPU
//! clock estimate, and its operation keeps the host-side times.
//!
//! NCCL has reported impossible GPU times: KernelCh stops before their starts and
//! broadcast kernels of 3–6 s (NCCL PR #2368). What the host saw bounds every GPU
//! interval, whatever the offset between the clocks:
//!
//! - a kernel cannot start before its operation was enqueued on the host, and the host
//!   notices its end after it happened, so the GPU interval is no longer than the host's
//!   span from the enqueue to the stop callback;
//! - the clock offset this interval implies (`host - gpu`: at most what the host's two
//!   callbacks imply, at least what the enqueue implies) must overlap the offsets the
//!   earlier kernels proved: a kernel whose timestamps jumped by seconds contradicts them.
//!
//! The margins cover what the clocks' drift can explain; anything beyond is NCCL's
//! error, not ours. A rejected interval never reaches the clock estimate, so one bad
//! kernel cannot shift the times of the others.

use crate::gpu_clock::OffsetBounds;

/// Slack for a GPU interval against its host-side span: the clocks' drift over a
/// kernel (ppm of its length) is far below this.
pub const SPAN_MARGIN_NS: u64 = 1_000_000;
/// Slack for the offset an interval implies against the offsets the earlier kernels
/// proved (they may be 4 s old: a drift of a few ppm moves the clocks by microseconds).
pub const JUMP_MARGIN_NS: i64 = 10_000_000;

/// Why a GPU interval was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rejection {
    /// The stop timestamp is before the start timestamp.
    EndBeforeStart,
    /// Longer than the host's span from the operation's enqueue to the stop callback.
    BeyondHostBounds,
    /// Its timestamps imply a clock offset more than [`JUMP_MARGIN_NS`] away from the
    /// offsets the earlier kernels proved: the GPU timer jumped.
    ClockJump,
}

impl Rejection {
    /// The reason as the trace's `nccl.gpu_time_rejected` attribute and the counters
    /// spell it.
    pub fn name(self) -> &'static str {
        match self {
            Rejection::EndBeforeStart => "end_before_start",
            Rejection::BeyondHostBounds => "beyond_host_bounds",
            Rejection::ClockJump => "clock_jump",
        }
    }
}

/// What the host saw of one GPU interval (CLOCK_MONOTONIC ns).
#[derive(Clone, Copy, Debug)]
pub struct HostBounds {
    /// When its operation was enqueued (the task's start), if still known: the GPU
    /// cannot have started before.
    pub not_before_ns: Option<u64>,
    /// When the host saw it start (the start callback): the GPU started before.
    pub seen_start_ns: u64,
    /// When the host saw it end (the stop record): the GPU ended before.
    pub seen_end_ns: u64,
}

/// `host - gpu`, saturating (NCCL's timestamps are not ours to trust).
fn offset(host_ns: u64, gpu_ns: u64) -> i64 {
    (host_ns as i64).saturating_sub(gpu_ns as i64)
}

/// Checks a GPU interval `[start, stop]` (GPU ns) against what the host saw and the
/// offsets the earlier kernels of its GPU proved (`proven`).
pub fn check(
    start: u64,
    stop: u64,
    host: HostBounds,
    proven: OffsetBounds,
) -> Result<(), Rejection> {
    if stop < start {
        return Err(Rejection::EndBeforeStart);
    }
    if let Some(not_before) = host.not_before_ns {
        let host_span = host.seen_end_ns.saturating_sub(not_before);
        if stop.saturating_sub(start) > host_span.saturating_add(SPAN_MARGIN_NS) {
            return Err(Rejection::BeyondHostBounds);
        }
    }
    // The offset this interval implies lies in [lower, upper].
    let upper = offset(host.seen_start_ns, start).min(offset(host.seen_end_ns, stop));
    let lower = host.not_before_ns.map(|t| offset(t, start));
    let above_proven =
        matches!((lower, proven.upper), (Some(l), Some(u)) if l > u.saturating_add(JUMP_MARGIN_NS));
    let below_proven = proven
        .lower
        .is_some_and(|l| upper < l.saturating_sub(JUMP_MARGIN_NS));
    if above_proven || below_proven {
        return Err(Rejection::ClockJump);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// host = gpu + 500 ns; the operation enqueued at 1 ms, its kernel seen to start at
    /// 1.3 ms and to end at 2 ms (host time).
    const HOST: HostBounds = HostBounds {
        not_before_ns: Some(1_000_000),
        seen_start_ns: 1_300_000,
        seen_end_ns: 2_000_000,
    };
    const PROVEN: OffsetBounds = OffsetBounds {
        lower: Some(400),
        upper: Some(600),
    };

    #[test]
    fn a_plausible_interval_passes() {
        assert_eq!(check(1_200_000, 1_900_000, HOST, PROVEN), Ok(()));
        assert_eq!(
            check(1_200_000, 1_900_000, HOST, OffsetBounds::default()),
            Ok(())
        );
        // Without the enqueue only the host's callbacks bound it.
        let unknown = HostBounds {
            not_before_ns: None,
            ..HOST
        };
        assert_eq!(check(0, 1_900_000, unknown, PROVEN), Ok(()));
    }

    #[test]
    fn an_end_before_the_start_is_rejected() {
        assert_eq!(
            check(1_900_000, 1_200_000, HOST, PROVEN),
            Err(Rejection::EndBeforeStart)
        );
    }

    #[test]
    fn seconds_long_kernels_in_a_millisecond_operation_are_rejected() {
        let stop = 5_001_900_000;
        let host = HostBounds {
            not_before_ns: Some(5_001_000_000),
            seen_start_ns: 5_001_300_000,
            seen_end_ns: 5_002_000_000,
        };
        assert_eq!(
            check(stop - 4_000_000_000, stop, host, OffsetBounds::default()),
            Err(Rejection::BeyondHostBounds)
        );
        // Longer than the host's 1 ms span, but within the margin: accepted.
        assert_eq!(
            check(stop - 1_900_000, stop, host, OffsetBounds::default()),
            Ok(())
        );
    }

    #[test]
    fn intervals_shifted_by_seconds_are_rejected() {
        let jump = 2_000_000_000;
        // Later by 2 s: an offset far below the proven lower bound.
        assert_eq!(
            check(1_200_000 + jump, 1_900_000 + jump, HOST, PROVEN),
            Err(Rejection::ClockJump)
        );
        // Earlier by 2 s (the host span still holds it): far above the proven upper bound.
        let host = HostBounds {
            not_before_ns: Some(3_001_000_000),
            seen_start_ns: 3_001_300_000,
            seen_end_ns: 3_002_000_000,
        };
        assert_eq!(
            check(1_001_200_000, 1_001_900_000, host, PROVEN),
            Err(Rejection::ClockJump)
        );
        // Nothing proven yet: nothing to jump from.
        assert_eq!(
            check(
                1_200_000 + jump,
                1_900_000 + jump,
                HOST,
                OffsetBounds::default()
            ),
            Ok(())
        );
        // Seen seconds late by the host (a loose bound), the interval is no jump.
        let late = HostBounds {
            not_before_ns: Some(1_000_000),
            seen_start_ns: 9_001_300_000,
            seen_end_ns: 9_002_000_000,
        };
        assert_eq!(check(1_200_000, 1_900_000, late, PROVEN), Ok(()));
    }

    #[test]
    fn garbage_timestamps_do_not_overflow() {
        let host = HostBounds {
            not_before_ns: None,
            seen_start_ns: u64::MAX,
            seen_end_ns: u64::MAX,
        };
        let proven = OffsetBounds {
            lower: Some(i64::MIN),
            upper: Some(i64::MAX),
        };
        assert_eq!(check(0, u64::MAX, host, proven), Ok(()));
        assert_eq!(
            check(0, u64::MAX, HOST, proven),
            Err(Rejection::BeyondHostBounds)
        );
    }
}
