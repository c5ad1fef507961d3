//! The host clock. Output times are nanoseconds of CLOCK_MONOTONIC, which is consistent
//! across CPUs, so a start stamped on one thread and a stop stamped on another compare.
//!
//! On the callback path a record is stamped with [`ticks`]: the CPU's time-stamp counter
//! where it is trustworthy (about 9 ns to read instead of about 19 ns for `clock_gettime`
//! on the machines measured), else CLOCK_MONOTONIC itself. The collector turns ticks into
//! nanoseconds with a [`TickConverter`]: it pairs a TSC reading with a CLOCK_MONOTONIC
//! reading at every round and interpolates between the two pairs around each record. The
//! error is the width of one pair reading (tens of nanoseconds), and because every pair is
//! fresh, NTP's slewing of CLOCK_MONOTONIC is followed instead of extrapolated.
//!
//! The TSC is used only when the kernel itself uses it as its clock source (so it is
//! synchronised across CPUs and invariant) and the CPU reports `constant_tsc` and
//! `nonstop_tsc`; `NCCL_SCOREP_CLOCK` can force either source.
//!
//! A host process may offer a third source, its own clock: `nccl-sim replay` gives the
//! recorded time of the call being replayed (so that a replayed trace carries the times of
//! the recorded run), `nccl-sim run --host-clock-offset/--host-clock-drift` a simulated
//! host's clock, off the true one as an unsynchronised host's is.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// What [`ticks`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The CPU's time-stamp counter, converted by the collector.
    Tsc,
    /// CLOCK_MONOTONIC nanoseconds (ticks are nanoseconds already).
    Monotonic,
    /// The clock the host process offers: CLOCK_MONOTONIC nanoseconds as it gives them.
    Offered,
}

const MONOTONIC: u8 = 0;
const TSC: u8 = 1;
const OFFERED: u8 = 2;

static SOURCE: AtomicU8 = AtomicU8::new(MONOTONIC);

/// The symbol a process that offers its clock exports: `uint64_t f(int64_t
/// *realtime_offset_ns)` gives CLOCK_MONOTONIC nanoseconds as the process's host gives
/// them (under a replay: the recorded time of the call the calling thread replays) and
/// that host's CLOCK_REALTIME minus CLOCK_MONOTONIC; 0 when it offers none.
pub const OFFERED_CLOCK_SYMBOL: &std::ffi::CStr = c"nccl_sim_clock";

type OfferedClockFn = unsafe extern "C" fn(*mut i64) -> u64;

/// The offered clock function, once found (0: none).
static OFFERED_CLOCK: AtomicUsize = AtomicUsize::new(0);

/// Chooses what [`ticks`] reads, for the whole process. [`Source::Offered`] is taken only
/// when [`clock_offered`] found the host process's clock.
pub fn select(source: Source) {
    let value = match source {
        Source::Tsc => TSC,
        Source::Monotonic => MONOTONIC,
        Source::Offered if OFFERED_CLOCK.load(Ordering::Acquire) != 0 => OFFERED,
        Source::Offered => MONOTONIC,
    };
    SOURCE.store(value, Ordering::Release);
}

/// The source [`ticks`] reads now.
pub fn source() -> Source {
    match SOURCE.load(Ordering::Relaxed) {
        TSC => Source::Tsc,
        OFFERED => Source::Offered,
        _ => Source::Monotonic,
    }
}

/// Whether the host process offers its clock (looked up once).
pub fn clock_offered() -> bool {
    if OFFERED_CLOCK.load(Ordering::Acquire) != 0 {
        return true;
    }
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name has no preconditions.
    let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, OFFERED_CLOCK_SYMBOL.as_ptr()) };
    if symbol.is_null() {
        return false;
    }
    // SAFETY: the offering process exports the symbol with this signature (see
    // OFFERED_CLOCK_SYMBOL).
    let function: OfferedClockFn = unsafe { std::mem::transmute(symbol) };
    let mut offset = 0i64;
    // SAFETY: as above, with a valid out-pointer.
    if unsafe { function(&mut offset) } == 0 {
        return false;
    }
    OFFERED_CLOCK.store(symbol as usize, Ordering::Release);
    true
}

/// The offered clock's time and real-time offset; `None` without one.
#[inline(never)]
fn offered_clock() -> Option<(u64, i64)> {
    let address = OFFERED_CLOCK.load(Ordering::Acquire);
    if address == 0 {
        return None;
    }
    // SAFETY: an address found by `clock_offered` for this signature; the
    // function lives in the executable, for the life of the process.
    let function: OfferedClockFn = unsafe { std::mem::transmute(address) };
    let mut offset = 0i64;
    // SAFETY: as above, with a valid out-pointer.
    let ns = unsafe { function(&mut offset) };
    Some((ns, offset))
}

/// The time stamp of a record: TSC ticks or monotonic nanoseconds, see [`source`].
#[inline]
pub fn ticks() -> u64 {
    match SOURCE.load(Ordering::Relaxed) {
        TSC => tsc(),
        MONOTONIC => system::now_ns(),
        _ => now_ns(),
    }
}

/// Nanoseconds of CLOCK_MONOTONIC (as the host process gives them, when it offers its clock).
pub fn now_ns() -> u64 {
    if SOURCE.load(Ordering::Relaxed) == OFFERED {
        if let Some((ns, _)) = offered_clock() {
            return ns;
        }
    }
    system::now_ns()
}

/// Nanoseconds since the Unix epoch (the offered clock's, when the host process offers one).
pub fn realtime_ns() -> u64 {
    if SOURCE.load(Ordering::Relaxed) == OFFERED {
        if let Some((ns, offset)) = offered_clock() {
            return ns.saturating_add_signed(offset);
        }
    }
    system::realtime_ns()
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn tsc() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86_64 (user-mode reads are allowed by Linux).
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn tsc() -> u64 {
    system::now_ns()
}

/// Whether this machine's TSC can stamp records: x86_64, the kernel's clock source is the
/// TSC (it checked synchronisation across CPUs), and the TSC is constant and non-stop.
pub fn tsc_is_reliable() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let clocksource =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .unwrap_or_default();
    if clocksource.trim() != "tsc" {
        return false;
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = cpuinfo
        .lines()
        .find(|line| line.starts_with("flags"))
        .unwrap_or_default();
    let has = |flag: &str| flags.split_whitespace().any(|f| f == flag);
    has("constant_tsc") && has("nonstop_tsc")
}

/// One reading of ticks and CLOCK_MONOTONIC taken as close together as possible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Calibration {
    ticks: u64,
    ns: u64,
}

/// The narrowest of three (TSC, CLOCK_MONOTONIC) readings, with its width in ticks (how
/// far off the pair can be).
fn calibration_now() -> (u64, Calibration) {
    let mut best: Option<(u64, Calibration)> = None;
    for _ in 0..3 {
        let before = tsc();
        let ns = system::now_ns();
        let after = tsc();
        let width = after.wrapping_sub(before);
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((
                width,
                Calibration {
                    ticks: before + width / 2,
                    ns,
                },
            ));
        }
    }
    best.unwrap_or_else(|| {
        (
            u64::MAX,
            Calibration {
                ticks: tsc(),
                ns: system::now_ns(),
            },
        )
    })
}

/// A reading of [`ticks`] and of [`now_ns`] for the same instant (ticks, ns): the
/// midpoint of two TSC readings around the clock's, as the collector calibrates.
pub fn tick_pair() -> (u64, u64) {
    if source() == Source::Tsc {
        let (_, pair) = calibration_now();
        (pair.ticks, pair.ns)
    } else {
        let now = now_ns();
        (now, now)
    }
}

/// Recent calibrations kept at full resolution (one per collector round).
const RECENT: usize = 512;
/// Older calibrations kept one per this many nanoseconds.
const ANCHOR_SPACING_NS: u64 = 1_000_000_000;
/// At most this many older calibrations (more than a day at one per second).
const MAX_ANCHORS: usize = 100_000;

/// Turns record ticks into CLOCK_MONOTONIC nanoseconds (owned by the collector).
#[derive(Debug)]
pub struct TickConverter {
    source: Source,
    anchors: Vec<Calibration>,
    recent: VecDeque<Calibration>,
    /// The segment the last conversion used: records come in time order, so most
    /// conversions fall into the same segment as the one before.
    segment: Option<Segment>,
    /// The narrowest calibration reading so far, in ticks.
    narrowest: u64,
}

/// A calibration reading wider than this many times the narrowest (and than
/// [`WIDE_READING_TICKS`]) was preempted: its pair can be off by half its width, which
/// would shift every time of its segment. It is left out; the neighbouring calibrations
/// span the gap (the two clocks run at a steady rate).
const WIDE_READING_FACTOR: u64 = 8;
/// Readings narrower than this (about 0.3 µs at 3 GHz) are always taken.
const WIDE_READING_TICKS: u64 = 1_000;

/// Whether a calibration reading `width` ticks wide was preempted, by the narrowest one.
fn preempted(width: u64, narrowest: u64) -> bool {
    width > WIDE_READING_TICKS && width / WIDE_READING_FACTOR > narrowest
}

/// The line between two consecutive calibrations, for ticks in `(after, until]`, with its
/// slope in fixed point (nanoseconds per tick × 2³²): a multiplication per conversion
/// instead of a division.
#[derive(Clone, Copy, Debug)]
struct Segment {
    after: u64,
    until: u64,
    base: Calibration,
    /// `None` when the slope does not fit (never with a real clock): then divide.
    slope_q32: Option<i64>,
    /// The slope of a clock that rises, when every tick of the segment converts in 64
    /// bits (see [`Segment::at_inside`]).
    rising_q32: Option<u64>,
    span_ticks: i128,
    span_ns: i128,
}

impl Segment {
    fn new(a: Calibration, b: Calibration) -> Segment {
        let span_ticks = b.ticks.saturating_sub(a.ticks).max(1) as i128;
        let span_ns = b.ns as i128 - a.ns as i128;
        let slope_q32 = i64::try_from((span_ns << 32) / span_ticks).ok();
        let rising_q32 = slope_q32
            .and_then(|slope| u64::try_from(slope).ok())
            .filter(|&slope| {
                let widest = u128::from(b.ticks.saturating_sub(a.ticks)) * u128::from(slope);
                u64::try_from(widest >> 32).is_ok()
            });
        Segment {
            after: a.ticks,
            until: b.ticks,
            base: a,
            slope_q32,
            rising_q32,
            span_ticks,
            span_ns,
        }
    }

    /// [`Segment::at`] for ticks in `(after, until]`, the case of nearly every record:
    /// there the product of a rising slope fits in 64 bits once shifted (checked when
    /// the segment was made), so it needs no check.
    #[inline]
    fn at_inside(&self, ticks: u64) -> u64 {
        match self.rising_q32 {
            Some(slope) => {
                let offset = ticks.saturating_sub(self.after);
                let delta = (u128::from(offset) * u128::from(slope)) >> 32;
                self.base.ns.saturating_add(delta as u64)
            }
            None => self.at(ticks),
        }
    }

    #[inline]
    fn at(&self, ticks: u64) -> u64 {
        // The common case (a record after the segment's start, a rising clock) in 64-bit
        // arithmetic; the general one below.
        if let (Some(slope), Some(offset)) = (self.slope_q32, ticks.checked_sub(self.base.ticks)) {
            if let Ok(slope) = u64::try_from(slope) {
                // Two 64-bit factors: the 128-bit product cannot overflow.
                let delta = (u128::from(offset) * u128::from(slope)) >> 32;
                if let Ok(delta) = u64::try_from(delta) {
                    return self.base.ns.saturating_add(delta);
                }
            }
        }
        self.at_any(ticks)
    }

    fn at_any(&self, ticks: u64) -> u64 {
        let offset = ticks as i128 - self.base.ticks as i128;
        let delta = match (self.slope_q32, i64::try_from(offset)) {
            // Two 64-bit factors: the 128-bit product cannot overflow.
            (Some(slope), Ok(offset)) => (i128::from(offset) * i128::from(slope)) >> 32,
            _ => offset.saturating_mul(self.span_ns) / self.span_ticks,
        };
        let ns = (self.base.ns as i128).saturating_add(delta);
        ns.clamp(0, u64::MAX as i128) as u64
    }
}

impl TickConverter {
    /// A converter for the current [`source`], with a first calibration.
    pub fn new() -> TickConverter {
        TickConverter::for_source(source())
    }

    /// A converter of `source`'s stamps, whatever the process's source.
    fn for_source(source: Source) -> TickConverter {
        let mut converter = TickConverter {
            source,
            anchors: Vec::new(),
            recent: VecDeque::new(),
            segment: None,
            narrowest: u64::MAX,
        };
        converter.calibrate();
        converter
    }

    /// Takes a calibration now. Call it after draining the rings: every record drained
    /// before it then lies between two calibrations.
    pub fn calibrate(&mut self) {
        if self.source != Source::Tsc {
            return;
        }
        let (width, now) = calibration_now();
        self.narrowest = self.narrowest.min(width);
        if preempted(width, self.narrowest) && !self.recent.is_empty() {
            return;
        }
        // Segments change when calibrations are added or thinned out.
        self.segment = None;
        if self
            .recent
            .back()
            .is_some_and(|last| now.ticks <= last.ticks)
        {
            return;
        }
        self.recent.push_back(now);
        if self.recent.len() > RECENT {
            if let Some(old) = self.recent.pop_front() {
                let due = self
                    .anchors
                    .last()
                    .is_none_or(|a| old.ns >= a.ns + ANCHOR_SPACING_NS);
                if due && self.anchors.len() < MAX_ANCHORS {
                    self.anchors.push(old);
                }
            }
        }
    }

    /// Nanoseconds of CLOCK_MONOTONIC for a record's ticks.
    #[inline]
    pub fn to_ns(&mut self, ticks: u64) -> u64 {
        if self.source != Source::Tsc {
            return ticks;
        }
        if let Some(segment) = &self.segment {
            if ticks > segment.after && ticks <= segment.until {
                return segment.at_inside(ticks);
            }
        }
        self.convert_in_new_segment(ticks)
    }

    /// [`TickConverter::to_ns`] for ticks outside the last segment used.
    #[inline(never)]
    fn convert_in_new_segment(&mut self, ticks: u64) -> u64 {
        let count = self.anchors.len() + self.recent.len();
        if count == 0 {
            return ticks;
        }
        let nth = |i: usize| -> Calibration {
            if i < self.anchors.len() {
                self.anchors[i]
            } else {
                self.recent[i - self.anchors.len()]
            }
        };
        // The first calibration at or after `ticks` (both lists are sorted by ticks, and
        // every anchor is older than every recent calibration).
        let in_recent = self.anchors.is_empty()
            || self
                .recent
                .front()
                .is_some_and(|first| ticks >= first.ticks);
        let after = if in_recent {
            self.anchors.len() + self.recent.partition_point(|c| c.ticks < ticks)
        } else {
            self.anchors.partition_point(|c| c.ticks < ticks)
        };
        let (a, b) = match after {
            0 if count == 1 => return nth(0).ns,
            0 => (nth(0), nth(count - 1)),
            i if i == count && count == 1 => return nth(0).ns,
            i if i == count => (nth(0), nth(count - 1)),
            i => {
                let segment = Segment::new(nth(i - 1), nth(i));
                self.segment = Some(segment);
                return segment.at(ticks);
            }
        };
        interpolate(a, b, ticks)
    }
}

impl Default for TickConverter {
    fn default() -> Self {
        TickConverter::new()
    }
}

/// The line through two calibrations, evaluated at `ticks` (also outside them).
fn interpolate(a: Calibration, b: Calibration, ticks: u64) -> u64 {
    Segment::new(a, b).at(ticks)
}

use nccl_scorep_common::clock as system;
pub use nccl_scorep_common::clock::thread_cpu_ns;

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
    fn a_preempted_calibration_reading_is_left_out() {
        // Typical readings: 60–100 ticks wide.
        assert!(!preempted(100, 60));
        assert!(
            !preempted(WIDE_READING_TICKS, 60),
            "narrow enough whatever the rest"
        );
        // A reading preempted for 10 µs (30 000 ticks) would shift its segment by 5 µs.
        assert!(preempted(30_000, 60));
        // Where every reading is slow (a virtual machine trapping the TSC), none is.
        assert!(!preempted(30_000, 20_000));
    }

    #[test]
    fn ticks_convert_to_monotonic_time() {
        // Each source read as it is, not through the process's choice, which other tests
        // running at the same time in this process may change.
        for (source, read) in [
            (Source::Tsc, tsc as fn() -> u64),
            (Source::Monotonic, system::now_ns as fn() -> u64),
        ] {
            let mut converter = TickConverter::for_source(source);
            let before = system::now_ns();
            let stamp = read();
            let after = system::now_ns();
            std::thread::sleep(std::time::Duration::from_millis(2));
            converter.calibrate();
            let ns = converter.to_ns(stamp);
            // Within the bracket, give or take a microsecond of calibration error.
            assert!(
                ns + 1_000 >= before && ns <= after + 1_000,
                "{source:?}: {before} <= {ns} <= {after}"
            );
        }
    }

    #[test]
    fn without_an_offering_process_its_clock_is_not_taken() {
        assert!(!clock_offered(), "the test binary offers no clock");
        select(Source::Offered);
        assert_eq!(source(), Source::Monotonic);
        let (ticks, ns) = tick_pair();
        assert_eq!(ticks, ns, "monotonic ticks are nanoseconds");
    }

    #[test]
    fn interpolation_follows_each_segment() {
        let a = Calibration {
            ticks: 1_000,
            ns: 10_000,
        };
        let b = Calibration {
            ticks: 3_000,
            ns: 11_000,
        };
        assert_eq!(interpolate(a, b, 2_000), 10_500);
        assert_eq!(interpolate(a, b, 1_000), 10_000);
        assert_eq!(interpolate(a, b, 5_000), 12_000, "extrapolates beyond b");
        assert_eq!(interpolate(a, b, 0), 9_500, "and before a");
    }

    #[test]
    fn the_fast_conversion_agrees_with_the_general_one() {
        // A TSC of about 2.1 GHz, calibrated 2 ms apart, far from zero on both clocks.
        let a = Calibration {
            ticks: 9_876_543_210_000,
            ns: 4_700_000_000_000,
        };
        let b = Calibration {
            ticks: a.ticks + 4_200_000,
            ns: a.ns + 2_000_000,
        };
        let segment = Segment::new(a, b);
        for ticks in (a.ticks..=b.ticks + 1_000_000).step_by(99_991) {
            assert_eq!(segment.at(ticks), segment.at_any(ticks), "at {ticks}");
        }
        assert!(segment.rising_q32.is_some());
        for ticks in (a.ticks + 1..=b.ticks).step_by(99_991).chain([b.ticks]) {
            assert_eq!(
                segment.at_inside(ticks),
                segment.at_any(ticks),
                "at {ticks}"
            );
        }
        // Before the segment's start only the general path applies.
        assert_eq!(segment.at(a.ticks - 2_100), a.ns - 1_000);
        // A clock that fell (never with a real one) converts too.
        let falling = Segment::new(
            b,
            Calibration {
                ticks: b.ticks + 10,
                ns: b.ns - 10,
            },
        );
        assert_eq!(falling.at(b.ticks + 5), b.ns - 5);
        assert_eq!(falling.rising_q32, None);
        assert_eq!(falling.at_inside(b.ticks + 5), b.ns - 5);
    }

    #[test]
    fn monotonic_time_moves_forward() {
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a);
        let pair = ClockPair::now();
        assert!(pair.realtime_ns > 1_600_000_000_000_000_000, "after 2020");
    }
}
