//! The system clocks every part of the product reads: CLOCK_MONOTONIC (the time base of
//! the trace), CLOCK_REALTIME (to place a run in calendar time) and a thread's CPU time
//! (for benchmarks).

/// Nanoseconds of CLOCK_MONOTONIC.
#[inline]
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Nanoseconds since the Unix epoch (CLOCK_REALTIME).
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// CPU time of the calling thread (time spent waiting for a core does not count), for
/// benchmarks.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

#[inline]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; these clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_time_does_not_go_back_and_realtime_is_after_2020() {
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a);
        // 2020-01-01 in ns since the epoch.
        assert!(realtime_ns() > 1_577_836_800_000_000_000);
    }
}
