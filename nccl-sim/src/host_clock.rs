//! The process's clock as its host gives it, offered to the plugin through one exported
//! function: the recorded times under `nccl-sim replay`, or under `nccl-sim run
//! --host-clock-offset/--host-clock-drift` a simulated host clock that is off the true
//! clock by an offset and a drift, as unsynchronised hosts are. nccl-sim's own ground
//! truth stays in the true clock (CLOCK_MONOTONIC of this machine), so that a trace's
//! times can be checked against it across simulated hosts.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// Where `nccl-sim run --procs` passes the true CLOCK_MONOTONIC time from which every
/// simulated host clock drifts, so that the processes of one host keep one clock.
pub const ENV_CLOCK_EPOCH: &str = "NCCL_SIM_CLOCK_EPOCH_NS";

static SIMULATED_ON: AtomicBool = AtomicBool::new(false);
static OFFSET_NS: AtomicI64 = AtomicI64::new(0);
/// Drift in parts per billion (1 ppm = 1000 ppb).
static DRIFT_PPB: AtomicI64 = AtomicI64::new(0);
static EPOCH_NS: AtomicU64 = AtomicU64::new(0);
/// When the drift changes (ns after the epoch; `u64::MAX`: never), and to what (ppb).
static CHANGE_AFTER_NS: AtomicU64 = AtomicU64::new(u64::MAX);
static DRIFT_AFTER_PPB: AtomicI64 = AtomicI64::new(0);
/// The machine's CLOCK_REALTIME minus CLOCK_MONOTONIC, taken once.
static REALTIME_OFFSET_NS: AtomicI64 = AtomicI64::new(0);

/// A host's clock against the true one: `simulated = true + offset + drift × (true −
/// epoch)`, the drift changing once when `drift_change` says so (as NTP slews a clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimulatedClock {
    pub offset_ns: i64,
    pub drift_ppb: i64,
    pub epoch_ns: u64,
    pub drift_change: Option<DriftChange>,
}

/// From `after_ns` after the epoch on, the clock drifts by `drift_ppb` instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriftChange {
    pub after_ns: u64,
    pub drift_ppb: i64,
}

impl SimulatedClock {
    /// The simulated host's reading at true time `true_ns`.
    pub fn at(&self, true_ns: u64) -> u64 {
        let since = true_ns as i128 - self.epoch_ns as i128;
        let drifted = match self.drift_change {
            Some(change) if since > i128::from(change.after_ns) => {
                let after = since - i128::from(change.after_ns);
                (i128::from(change.after_ns) * i128::from(self.drift_ppb)
                    + after * i128::from(change.drift_ppb))
                    / 1_000_000_000
            }
            _ => since * self.drift_ppb as i128 / 1_000_000_000,
        };
        (true_ns as i128 + self.offset_ns as i128 + drifted).max(0) as u64
    }
}

/// Makes this process's offered clock the simulated one (before the plugin is loaded).
pub fn simulate(clock: SimulatedClock) {
    OFFSET_NS.store(clock.offset_ns, Ordering::Relaxed);
    DRIFT_PPB.store(clock.drift_ppb, Ordering::Relaxed);
    EPOCH_NS.store(clock.epoch_ns, Ordering::Relaxed);
    let change = clock.drift_change;
    CHANGE_AFTER_NS.store(change.map_or(u64::MAX, |c| c.after_ns), Ordering::Relaxed);
    DRIFT_AFTER_PPB.store(change.map_or(0, |c| c.drift_ppb), Ordering::Relaxed);
    let realtime = nccl_scorep_common::clock::realtime_ns() as i64;
    let monotonic = nccl_scorep_common::clock::now_ns() as i64;
    REALTIME_OFFSET_NS.store(realtime - monotonic, Ordering::Relaxed);
    SIMULATED_ON.store(true, Ordering::Release);
}

/// The simulated host clock, if this process runs one.
pub fn simulated() -> Option<SimulatedClock> {
    SIMULATED_ON
        .load(Ordering::Acquire)
        .then(|| SimulatedClock {
            offset_ns: OFFSET_NS.load(Ordering::Relaxed),
            drift_ppb: DRIFT_PPB.load(Ordering::Relaxed),
            epoch_ns: EPOCH_NS.load(Ordering::Relaxed),
            drift_change: match CHANGE_AFTER_NS.load(Ordering::Relaxed) {
                u64::MAX => None,
                after_ns => Some(DriftChange {
                    after_ns,
                    drift_ppb: DRIFT_AFTER_PPB.load(Ordering::Relaxed),
                }),
            },
        })
}

/// True time `true_ns` as this process's host reads it (itself without a simulated clock).
pub fn host_reading(true_ns: u64) -> u64 {
    simulated().map_or(true_ns, |clock| clock.at(true_ns))
}

/// The clock a plugin may read instead of its own: CLOCK_MONOTONIC nanoseconds as this
/// process's host gives them, and the host's CLOCK_REALTIME minus CLOCK_MONOTONIC in
/// `*realtime_offset_ns`; 0 when the process offers no clock (a plain run). Under
/// `nccl-sim replay` the recorded times ([`crate::replay`]); under a simulated host clock,
/// the true clock shifted and drifted.
///
/// # Safety
/// `realtime_offset_ns` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn nccl_sim_clock(realtime_offset_ns: *mut i64) -> u64 {
    let (ns, offset) = if let Some(replayed) = crate::replay::replay_clock() {
        replayed
    } else if let Some(clock) = simulated() {
        (
            clock.at(nccl_scorep_common::clock::now_ns()),
            REALTIME_OFFSET_NS.load(Ordering::Relaxed),
        )
    } else {
        return 0;
    };
    if !realtime_offset_ns.is_null() {
        // SAFETY: non-NULL and writable (caller).
        unsafe { *realtime_offset_ns = offset };
    }
    ns
}

/// Parses a list of per-host offsets (`-5ms,5ms`; units ns, us, ms, s; a bare number is
/// nanoseconds).
pub fn parse_offsets(text: &str) -> Result<Vec<i64>, String> {
    text.split(',').map(parse_offset).collect()
}

/// Parses one duration or offset (`1.5s`, `-250us`; a bare number is nanoseconds).
pub fn parse_offset(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let (number, scale) = [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)]
        .iter()
        .find_map(|(unit, scale)| t.strip_suffix(unit).map(|n| (n, *scale)))
        .unwrap_or((t, 1.0));
    number
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && (v * scale).abs() < 1e15)
        .map(|v| (v * scale).round() as i64)
        .ok_or_else(|| format!("{text:?} is not a clock offset (e.g. 5ms, -250us, 0)"))
}

/// Parses a list of per-host drifts in parts per million (`-20,20`) into parts per billion.
pub fn parse_drifts(text: &str) -> Result<Vec<i64>, String> {
    text.split(',')
        .map(|d| {
            d.trim()
                .trim_end_matches("ppm")
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && v.abs() <= 1e5)
                .map(|v| (v * 1e3).round() as i64)
                .ok_or_else(|| format!("{d:?} is not a clock drift in ppm (e.g. 20, -20)"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_simulated_clock_is_offset_and_drifts_from_its_epoch() {
        let clock = SimulatedClock {
            offset_ns: -5_000_000,
            drift_ppb: 20_000,
            epoch_ns: 1_000_000_000,
            drift_change: None,
        };
        assert_eq!(clock.at(1_000_000_000), 995_000_000);
        // One second later, 20 ppm: 20 µs ahead of the offset.
        assert_eq!(clock.at(2_000_000_000), 1_995_020_000);
        // The drift turns to -30 ppm after a second: 20 µs, then 30 µs less a second on.
        let slewed = SimulatedClock {
            drift_change: Some(DriftChange {
                after_ns: 1_000_000_000,
                drift_ppb: -30_000,
            }),
            ..clock
        };
        assert_eq!(slewed.at(2_000_000_000), 1_995_020_000);
        assert_eq!(slewed.at(3_000_000_000), 2_994_990_000);
        assert_eq!(
            parse_offsets("-5ms, 5ms,250us,7").unwrap(),
            [-5_000_000, 5_000_000, 250_000, 7]
        );
        assert_eq!(
            parse_drifts("-20,20ppm,0.5").unwrap(),
            [-20_000, 20_000, 500]
        );
        assert!(parse_offsets("5 parsecs")
            .unwrap_err()
            .contains("not a clock offset"));
        assert!(parse_drifts("fast")
            .unwrap_err()
            .contains("not a clock drift"));
    }
}
