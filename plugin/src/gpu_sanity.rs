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
//! - converted with the estimate of the earlier kernels, it starts no earlier than the
//!   enqueue and ends no later than the host saw it end.
//!
//! The margins cover what the clocks' drift and the estimate's own lateness can explain;
//! anything beyond is NCCL's error, not ours.

use crate::gpu_clock::Estimate;

/// Slack for a GPU interval against its host-side span: the clocks' drift over a
/// kernel (ppm of its length) is far below this.
pub const SPAN_MARGIN_NS: u64 = 1_000_000;
/// Slack for a GPU interval converted with the current estimate: that estimate may be
/// late by as much as NCCL's slowest prompt detection of the last seconds (its polling
/// thread descheduled), so a shift is called a jump only when it exceeds this.
pub const JUMP_MARGIN_NS: u64 = 10_000_000;

/// Why a GPU interval was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rejection {
    /// The stop timestamp is before the start timestamp.
    EndBeforeStart,
    /// Longer than the host's span from the operation's enqueue to the stop callback.
    BeyondHostBounds,
    /// Shifted by more than [`JUMP_MARGIN_NS`] from where the clock estimate of the
    /// other kernels puts it: before its enqueue, or after the host saw it end.
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
    /// When the host saw it end (the stop record): the GPU ended before.
    pub seen_end_ns: u64,
}

/// Checks a GPU interval `[start, stop]` (GPU ns) against what the host saw and the
/// clock estimate built from the kernels before it (`None` before the first).
pub fn check(
    start: u64,
    stop: u64,
    host: HostBounds,
    estimate: Option<Estimate>,
) -> Result<(), Rejection> {
    if stop < start {
        return Err(Rejection::EndBeforeStart);
    }
    if let Some(not_before) = host.not_before_ns {
        let host_span = host.seen_end_ns.saturating_sub(not_before);
        if stop - start > host_span.saturating_add(SPAN_MARGIN_NS) {
            return Err(Rejection::BeyondHostBounds);
        }
    }
    if let Some(estimate) = estimate {
        let ends_after_seen = estimate.to_host(stop) > host.seen_end_ns.saturating_add(JUMP_MARGIN_NS);
        let starts_before_enqueue = host
            .not_before_ns
            .is_some_and(|t| estimate.to_host(start).saturating_add(JUMP_MARGIN_NS) < t);
        if ends_after_seen || starts_before_enqueue {
            return Err(Rejection::ClockJump);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: HostBounds = HostBounds {
        not_before_ns: Some(1_000_000),
        seen_end_ns: 2_000_000,
    };
    /// host = gpu + 500 ns.
    const ESTIMATE: Estimate = Estimate {
        offset_ns: 500,
        error_ns: Some(100),
    };

    #[test]
    fn a_plausible_interval_passes() {
        assert_eq!(check(1_200_000, 1_900_000, HOST, Some(ESTIMATE)), Ok(()));
        assert_eq!(check(1_200_000, 1_900_000, HOST, None), Ok(()));
        // Without the enqueue only the host's stop bounds it.
        let unknown = HostBounds {
            not_before_ns: None,
            ..HOST
        };
        assert_eq!(check(0, 1_900_000, unknown, Some(ESTIMATE)), Ok(()));
    }

    #[test]
    fn an_end_before_the_start_is_rejected() {
        assert_eq!(
            check(1_900_000, 1_200_000, HOST, Some(ESTIMATE)),
            Err(Rejection::EndBeforeStart)
        );
    }

    #[test]
    fn seconds_long_kernels_in_a_millisecond_operation_are_rejected() {
        let start = 1_200_000;
        assert_eq!(
            check(start, start + 4_000_000_000, HOST, None),
            Err(Rejection::BeyondHostBounds)
        );
        // Longer than the host's 1 ms span, but within the margin: accepted.
        assert_eq!(check(start, start + 1_900_000, HOST, None), Ok(()));
    }

    #[test]
    fn intervals_shifted_by_seconds_are_rejected() {
        let jump = 2_000_000_000;
        assert_eq!(
            check(1_200_000 + jump, 1_900_000 + jump, HOST, Some(ESTIMATE)),
            Err(Rejection::ClockJump)
        );
        let host = HostBounds {
            not_before_ns: Some(3_000_000_000),
            seen_end_ns: 3_001_000_000,
        };
        assert_eq!(
            check(1_000_000, 1_100_000, host, Some(ESTIMATE)),
            Err(Rejection::ClockJump)
        );
        // The first kernel has no estimate to jump from.
        assert_eq!(check(1_200_000 + jump, 1_900_000 + jump, HOST, None), Ok(()));
    }

    #[test]
    fn garbage_timestamps_do_not_overflow() {
        let host = HostBounds {
            not_before_ns: None,
            seen_end_ns: u64::MAX,
        };
        let estimate = Estimate {
            offset_ns: i64::MAX,
            error_ns: None,
        };
        assert_eq!(check(0, u64::MAX, host, Some(estimate)), Ok(()));
        assert_eq!(
            check(0, u64::MAX, HOST, Some(estimate)),
            Err(Rejection::BeyondHostBounds)
        );
    }
}
