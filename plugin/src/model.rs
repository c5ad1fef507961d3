//! What the collector hands to the sinks: events complete with their owner, parent,
//! states and times, and the open events they may still wait for. The collector and
//! every sink depend on this module; it depends on neither.

use crate::context::ContextInfo;
use crate::event::{Event, Kind, StateArg};
use crate::gpu_sanity::Rejection;

/// Who an event belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Owner {
    /// A communicator rank of this process (our context id).
    Local(u64),
    /// Progressed here for another process (PXN): its pid and its context value.
    Foreign { pid: i32, context: u64 },
    /// A step or net event whose ProxyOp is unknown (NULL or dropped).
    Unknown,
}

/// What an event's `parentObj` turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parent {
    None,
    Local {
        handle: u64,
        kind: Kind,
    },
    /// Another process's handle (PXN), kept as numbers only.
    Foreign {
        pid: i32,
        value: u64,
    },
    /// A value that is neither NULL, nor ours and known, nor foreign.
    Unresolved(u64),
}

/// Why an event ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    Stopped,
    /// A receive step started again for the same step; the earlier start never stops.
    Restarted,
    /// Still open when its communicator (or the process) finalized.
    Finalize,
    /// Still open when its ProxyOp stopped.
    ParentStopped,
    /// A ProxyOp never stopped by NCCL (see `collector::MAX_STEPLESS_PROXY_OPS`).
    Abandoned,
    /// NCCL stopped it, but the stop record was dropped (a full ring): closed at its last
    /// known time once the collector saw it was over.
    StopLost,
}

impl Closed {
    pub fn name(self) -> &'static str {
        match self {
            Closed::Stopped => "stop",
            Closed::Restarted => "restarted",
            Closed::Finalize => "finalize",
            Closed::ParentStopped => "parent_stopped",
            Closed::Abandoned => "abandoned",
            Closed::StopLost => "stop_lost",
        }
    }
}

/// A state recorded on an event.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StateRecord {
    pub state: i32,
    pub time_ns: u64,
    pub thread: u32,
    pub arg: StateArg,
}

/// One event as the sinks see it: complete, with everything resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct FinishedEvent<'a> {
    pub handle: u64,
    pub kind: Kind,
    pub owner: Owner,
    pub comm: Option<&'a ContextInfo>,
    pub parent: Parent,
    pub rank: i32,
    pub event: Event,
    pub start_ns: u64,
    pub start_tid: i32,
    pub stop_ns: u64,
    pub stop_tid: Option<i32>,
    pub states: &'a [StateRecord],
    pub closed: Closed,
    /// KernelCh and KernelPhase: the GPU interval on the host clock (see `gpu_clock`).
    pub gpu: Option<GpuInterval>,
    /// KernelCh and KernelPhase: why NCCL's GPU interval was rejected (then `gpu` is
    /// `None` and the event keeps its host-side times; see `gpu_sanity`).
    pub gpu_rejected: Option<Rejection>,
    /// KernelCh and ProxyOp: their task's event when the task was still open.
    pub parent_event: Option<&'a Event>,
}

/// A GPU interval converted to host CLOCK_MONOTONIC nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuInterval {
    pub start_ns: u64,
    pub stop_ns: u64,
    /// The conversion is exact within ± this much; `None` when only bounded from above.
    pub error_ns: Option<u64>,
}

/// The task (Coll or P2p handle) a ProxyOp or KernelCh belongs to: while such a child is
/// open, or held for its GPU clock conversion, its task's operation is not complete.
pub fn task_of_child(kind: Kind, parent: &Parent) -> Option<u64> {
    match *parent {
        Parent::Local { handle, .. } if matches!(kind, Kind::ProxyOp | Kind::KernelCh) => {
            Some(handle)
        }
        _ => None,
    }
}

/// The tasks of the kernel channels that are closed but held for their GPU clock
/// conversion, each with how many of them: their operations wait for them as for open
/// children. Kept by the collector as events are held and released, so that a pass need
/// not look at every held event.
#[derive(Default)]
pub struct HeldTasks(rustc_hash::FxHashMap<u64, u32>);

impl HeldTasks {
    pub fn contains(&self, task: u64) -> bool {
        self.0.contains_key(&task)
    }

    pub(crate) fn add(&mut self, task: u64) {
        *self.0.entry(task).or_default() += 1;
    }

    pub(crate) fn remove(&mut self, task: u64) {
        if let Some(count) = self.0.get_mut(&task) {
            *count -= 1;
            if *count == 0 {
                self.0.remove(&task);
            }
        }
    }
}

/// An open event as the collector holds it (sinks judge from these what can still come).
pub struct OpenView<'a> {
    pub handle: u64,
    pub kind: Kind,
    pub owner: Owner,
    pub parent: Parent,
    pub start_ns: u64,
    pub start_tid: i32,
    pub event: &'a Event,
}

/// Records a thread's ring dropped, in CLOCK_MONOTONIC nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    pub tid: i32,
    pub first_ns: u64,
    pub last_ns: u64,
    /// Records the thread dropped since it started.
    pub dropped_total: u64,
}

/// The name such a wait has in the trace, and in Score-P mode in Score-P's regions.
pub const HELD_BACK_REGION: &str = "NCCL held back by the plugin";

/// A time an NCCL thread waited for room in its full ring, in CLOCK_MONOTONIC
/// nanoseconds: the plugin held NCCL back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldBack {
    pub tid: i32,
    pub since_ns: u64,
    pub until_ns: u64,
}
