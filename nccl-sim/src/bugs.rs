//! NCCL's known profiler bugs, injected on request (`nccl-sim run --nccl-bug NAME`), so that
//! a plugin's defences against them can be tested. Without any, nccl-sim reports what
//! NCCL should.
//!
//! The kernel timestamp bugs hit every fourth operation of each communicator rank and
//! function (sequence numbers 3, 7, …), all of its channels: the operations before them
//! give a plugin plausible kernels to build its clock estimate from.
//!
//! One NCCL bug needs no knob: API events (GroupApi, CollApi, P2pApi, KernelLaunch) carry
//! rank 0 on every rank (NCCL issue #2300), and nccl-sim always reports them so.

/// One of NCCL's bugs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum NcclBug {
    /// KernelCh's stop timestamp lies before its start (NCCL PR #2368).
    KernelEndBeforeStart,
    /// KernelCh intervals 3–6 s long in operations of a millisecond (the broadcast
    /// kernels of NCCL PR #2368): the start timestamp is seconds early.
    KernelSecondsLong,
    /// Both KernelCh timestamps jump 2 s ahead of the GPU clock the other kernels show.
    KernelClockJump,
    /// A `KernelStep` event on type bit 15 (proposed in NCCL PR #2316), the bit v7 uses
    /// for KernelPhase, after every KernelCh start, whatever the plugin's activation mask
    /// asks for: sent to plugins of API v6 (v5 and older have no way to carry it, and v7
    /// gives the bit to KernelPhase).
    KernelStepOnBit15,
}

impl NcclBug {
    /// Whether a kernel timestamp bug hits the operation with this sequence number.
    pub fn hits(seq: u64) -> bool {
        seq % 4 == 3
    }
}

/// The bugs a run injects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NcclBugs(Vec<NcclBug>);

impl NcclBugs {
    pub fn new(bugs: &[NcclBug]) -> NcclBugs {
        NcclBugs(bugs.to_vec())
    }

    pub fn has(&self, bug: NcclBug) -> bool {
        self.0.contains(&bug)
    }

    /// The (start, stop) GPU timestamps NCCL reports for a channel of the operation with
    /// sequence number `seq` whose true ones are `start`, `stop`.
    pub fn kernel_timestamps(&self, seq: u64, start: u64, stop: u64) -> (u64, u64) {
        if !NcclBug::hits(seq) {
            return (start, stop);
        }
        let mut reported = (start, stop);
        if self.has(NcclBug::KernelEndBeforeStart) {
            reported = (reported.1, reported.0);
        }
        if self.has(NcclBug::KernelSecondsLong) {
            // 3, 4 or 5 s longer than it ran.
            let extra = (3 + seq / 4 % 3) * 1_000_000_000;
            reported.0 = reported.0.saturating_sub(extra);
        }
        if self.has(NcclBug::KernelClockJump) {
            let jump = 2_000_000_000;
            reported = (reported.0 + jump, reported.1 + jump);
        }
        reported
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_every_fourth_operation_is_hit() {
        let bugs = NcclBugs::new(&[NcclBug::KernelEndBeforeStart]);
        assert_eq!(bugs.kernel_timestamps(2, 10, 20), (10, 20));
        assert_eq!(bugs.kernel_timestamps(3, 10, 20), (20, 10));
        let long = NcclBugs::new(&[NcclBug::KernelSecondsLong]);
        let (start, stop) = long.kernel_timestamps(7, 10_000_000_000, 10_000_001_000);
        assert_eq!(stop - start, 4_000_001_000);
        let jump = NcclBugs::new(&[NcclBug::KernelClockJump]);
        assert_eq!(
            jump.kernel_timestamps(3, 10, 20),
            (2_000_000_010, 2_000_000_020)
        );
        assert_eq!(NcclBugs::default().kernel_timestamps(3, 10, 20), (10, 20));
    }
}
