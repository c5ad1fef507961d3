//! The host clock every record is stamped with: CLOCK_MONOTONIC in nanoseconds.
//!
//! `clock_gettime` goes through the vDSO (no system call) and is consistent across CPUs,
//! so a start stamped on one thread and a stop stamped on another can be compared. The
//! real-time offset is taken at start and at end so traces can be placed in wall time.

/// Nanoseconds of CLOCK_MONOTONIC.
#[inline]
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Nanoseconds since the Unix epoch (CLOCK_REALTIME).
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

#[inline]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; both clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// A pair of readings of the monotonic and the real-time clock, taken back to back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockPair {
    pub monotonic_ns: u64,
    pub realtime_ns: u64,
}

impl ClockPair {
    /// Reads both clocks, keeping the reading with the narrowest bracket of a few tries.
    pub fn now() -> ClockPair {
        let mut best: Option<(u64, ClockPair)> = None;
        for _ in 0..5 {
            let before = now_ns();
            let realtime = realtime_ns();
            let after = now_ns();
            let width = after - before;
            if best.is_none_or(|(w, _)| width < w) {
                best = Some((
                    width,
                    ClockPair {
                        monotonic_ns: before + width / 2,
                        realtime_ns: realtime,
                    },
                ));
            }
        }
        best.map(|(_, pair)| pair).unwrap_or(ClockPair {
            monotonic_ns: now_ns(),
            realtime_ns: realtime_ns(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_time_moves_forward() {
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a);
        let pair = ClockPair::now();
        assert!(pair.realtime_ns > 1_600_000_000_000_000_000, "after 2020");
    }
}
