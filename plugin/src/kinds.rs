//! What is true of each kind of NCCL event, in one table that the decoder, the hot path,
//! the collector, Score-P mode and the sinks all read.
//!
//! Every row spells every fact (no defaults), and [`Kind::facts`] matches on the kind
//! without a wildcard: a new kind of event is one new row, and the compiler names every
//! place that must learn about it. Type bits are decoded per profiler API version
//! ([`Kind::decode_type`]), never by the bit alone: a bit may mean another kind, or
//! nothing, in another version.

use crate::event::Kind;
use bitflags::bitflags;
use nccl_profiler_abi::{event_type as bit, state};

bitflags! {
    /// A set of event kinds, one bit each as NCCL's type bits and activation mask spell
    /// them (`NCCL_SCOREP_EVENTS`, the mask `init` returns, the kinds remembered).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct KindSet: u64 {
        const GROUP = bit::GROUP;
        const COLL = bit::COLL;
        const P2P = bit::P2P;
        const PROXY_OP = bit::PROXY_OP;
        const PROXY_STEP = bit::PROXY_STEP;
        const PROXY_CTRL = bit::PROXY_CTRL;
        const KERNEL_CH = bit::KERNEL_CH;
        const NET_PLUGIN = bit::NET_PLUGIN;
        const GROUP_API = bit::GROUP_API;
        const COLL_API = bit::COLL_API;
        const P2P_API = bit::P2P_API;
        const KERNEL_LAUNCH = bit::KERNEL_LAUNCH;
        const CE_COLL = bit::CE_COLL;
        const CE_SYNC = bit::CE_SYNC;
        const CE_BATCH = bit::CE_BATCH;
        const KERNEL_PHASE = bit::KERNEL_PHASE;
    }
}

impl KindSet {
    /// Whether `kind` is in the set.
    #[inline]
    pub fn has(self, kind: Kind) -> bool {
        self.bits() & kind.bit() != 0
    }
}

impl From<Kind> for KindSet {
    fn from(kind: Kind) -> KindSet {
        KindSet::from_bits_retain(kind.bit())
    }
}

/// Which events of this kind are remembered after they close (for children that start or
/// stop later, and refer to them as their parent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remembered {
    Always,
    Never,
    /// Only when events of that kind, its only children, are recorded.
    WhenRecording(Kind),
}

/// Where events of a kind are drawn in the trace: which timeline their intervals belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timeline {
    /// The OS thread that called NCCL's API or enqueued the work.
    CallingThread,
    /// One proxy connection (channel, peer, direction) of a communicator rank.
    ProxyConnection,
    /// The proxy connection of the event's ProxyOp.
    ParentProxyOp,
    /// A GPU channel of a communicator rank (times from the GPU's clock).
    GpuChannel,
}

/// The facts about one kind of event.
#[derive(Clone, Copy, Debug)]
pub struct KindFacts {
    /// NCCL's name of the kind (`ncclProfile<name>`).
    pub name: &'static str,
    /// The type bit that announces it, from `since` on.
    pub type_bit: u64,
    /// The first profiler API version that has it.
    pub since: u8,
    /// The states it may receive, a set over state values 0–31.
    pub states: u32,
    /// Its `context` argument is one of this process's contexts. ProxyStep and NetPlugin
    /// events under PXN carry another process's context: their owner comes from their
    /// parent instead.
    pub trusted_context: bool,
    /// NCCL fills in the descriptor's `rank` (elsewhere it is left 0, and the
    /// communicator's rank is used).
    pub descriptor_sets_rank: bool,
    pub remembered: Remembered,
    /// It becomes a Score-P region on the calling thread in Score-P mode.
    pub forwarded_to_scorep: bool,
    pub timeline: Timeline,
    /// A task of a kernel plan: its GPU execution and proxy operations are its children,
    /// and the plan's tasks are enqueued one after another.
    pub is_task: bool,
    /// An API call of the application (the first thing to happen to an operation).
    pub is_api_call: bool,
    /// What an interval of this kind is, for the trace's region descriptions.
    pub description: &'static str,
}

impl Kind {
    /// The facts about this kind.
    pub const fn facts(self) -> &'static KindFacts {
        match self {
            Kind::Group => &GROUP,
            Kind::Coll => &COLL,
            Kind::P2p => &P2P,
            Kind::ProxyOp => &PROXY_OP,
            Kind::ProxyStep => &PROXY_STEP,
            Kind::ProxyCtrl => &PROXY_CTRL,
            Kind::KernelCh => &KERNEL_CH,
            Kind::NetPlugin => &NET_PLUGIN,
            Kind::GroupApi => &GROUP_API,
            Kind::CollApi => &COLL_API,
            Kind::P2pApi => &P2P_API,
            Kind::KernelLaunch => &KERNEL_LAUNCH,
            Kind::CeColl => &CE_COLL,
            Kind::CeSync => &CE_SYNC,
            Kind::CeBatch => &CE_BATCH,
            Kind::KernelPhase => &KERNEL_PHASE,
        }
    }

    /// The kind a descriptor's `type` announces under profiler API `version`: `None`
    /// unless exactly one bit is set and that bit names a kind the version has.
    #[inline]
    pub fn decode_type(version: u8, type_bits: u64) -> Option<Kind> {
        Kind::decode_type_in(kinds_of_version(version), type_bits)
    }

    /// [`Kind::decode_type`] with the version's kinds ([`kinds_of_version`]) computed
    /// already: the hot path's form, with a constant `version_kinds`.
    #[inline]
    pub fn decode_type_in(version_kinds: u64, type_bits: u64) -> Option<Kind> {
        Kind::from_type_bits(type_bits).filter(|kind| version_kinds & kind.bit() != 0)
    }

    /// Whether this kind may receive `state`.
    #[inline]
    pub fn accepts_state(self, state: i32) -> bool {
        (0..32).contains(&state) && self.facts().states & 1 << state != 0
    }
}

/// The type bits of every kind profiler API `version` has.
pub const fn kinds_of_version(version: u8) -> u64 {
    let mut mask = 0;
    let mut index = 0;
    while index < Kind::ALL.len() {
        let facts = Kind::ALL[index].facts();
        if facts.since <= version {
            mask |= facts.type_bit;
        }
        index += 1;
    }
    mask
}

/// The kinds remembered after they close, given the kinds being recorded.
pub fn remembered_kinds(recorded: KindSet) -> KindSet {
    Kind::ALL
        .iter()
        .filter(|kind| match kind.facts().remembered {
            Remembered::Always => true,
            Remembered::Never => false,
            Remembered::WhenRecording(child) => recorded.has(child),
        })
        .fold(KindSet::empty(), |set, &kind| set | kind.into())
}

/// A set of state values.
const fn states(values: &[i32]) -> u32 {
    let mut set = 0;
    let mut index = 0;
    while index < values.len() {
        set |= 1 << values[index];
        index += 1;
    }
    set
}

/// State values `lo..=hi`.
const fn state_range(lo: i32, hi: i32) -> u32 {
    let mut set = 0;
    let mut value = lo;
    while value <= hi {
        set |= 1 << value;
        value += 1;
    }
    set
}

const GROUP: KindFacts = KindFacts {
    name: "Group",
    type_bit: bit::GROUP,
    since: 1,
    states: 0,
    trusted_context: true,
    descriptor_sets_rank: false,
    remembered: Remembered::Always,
    forwarded_to_scorep: true,
    timeline: Timeline::CallingThread,
    is_task: false,
    is_api_call: false,
    description: "enqueueing one kernel plan's tasks",
};

const COLL: KindFacts = KindFacts {
    name: "Coll",
    type_bit: bit::COLL,
    since: 1,
    states: 0,
    trusted_context: true,
    descriptor_sets_rank: true,
    remembered: Remembered::Always,
    forwarded_to_scorep: true,
    timeline: Timeline::CallingThread,
    is_task: true,
    is_api_call: false,
    description: "enqueueing one task for the GPU and the proxy",
};

const P2P: KindFacts = KindFacts {
    name: "P2p",
    type_bit: bit::P2P,
    since: 1,
    states: 0,
    trusted_context: true,
    descriptor_sets_rank: true,
    remembered: Remembered::Always,
    forwarded_to_scorep: true,
    timeline: Timeline::CallingThread,
    is_task: true,
    is_api_call: false,
    description: "enqueueing one task for the GPU and the proxy",
};

const PROXY_OP: KindFacts = KindFacts {
    name: "ProxyOp",
    type_bit: bit::PROXY_OP,
    since: 1,
    states: state_range(state::PROXY_OP_SEND_POSTED, state::PROXY_OP_RECV_DONE)
        | states(&[state::PROXY_OP_IN_PROGRESS_V4]),
    trusted_context: true,
    descriptor_sets_rank: true,
    remembered: Remembered::Always,
    forwarded_to_scorep: false,
    timeline: Timeline::ProxyConnection,
    is_task: false,
    is_api_call: false,
    description: "",
};

const PROXY_STEP: KindFacts = KindFacts {
    name: "ProxyStep",
    type_bit: bit::PROXY_STEP,
    since: 1,
    states: state_range(
        state::PROXY_STEP_SEND_GPU_WAIT,
        state::PROXY_STEP_RECV_GPU_WAIT,
    ) | states(&[state::PROXY_STEP_SEND_PEER_WAIT_V4]),
    trusted_context: false,
    descriptor_sets_rank: true,
    remembered: Remembered::WhenRecording(Kind::NetPlugin),
    forwarded_to_scorep: false,
    timeline: Timeline::ParentProxyOp,
    is_task: false,
    is_api_call: false,
    description: "",
};

const PROXY_CTRL: KindFacts = KindFacts {
    name: "ProxyCtrl",
    type_bit: bit::PROXY_CTRL,
    since: 1,
    states: state_range(state::PROXY_CTRL_IDLE, state::PROXY_CTRL_APPEND_END),
    trusted_context: true,
    descriptor_sets_rank: false,
    remembered: Remembered::Never,
    forwarded_to_scorep: false,
    timeline: Timeline::CallingThread,
    is_task: false,
    is_api_call: false,
    description: "",
};

const KERNEL_CH: KindFacts = KindFacts {
    name: "KernelCh",
    type_bit: bit::KERNEL_CH,
    since: 3,
    states: states(&[state::KERNEL_CH_STOP]),
    trusted_context: true,
    descriptor_sets_rank: false,
    remembered: Remembered::WhenRecording(Kind::KernelPhase),
    forwarded_to_scorep: false,
    timeline: Timeline::GpuChannel,
    is_task: false,
    is_api_call: false,
    description: "",
};

const NET_PLUGIN: KindFacts = KindFacts {
    name: "NetPlugin",
    type_bit: bit::NET_PLUGIN,
    since: 3,
    states: states(&[state::NET_PLUGIN_UPDATE]),
    trusted_context: false,
    descriptor_sets_rank: true,
    remembered: Remembered::Never,
    forwarded_to_scorep: false,
    timeline: Timeline::CallingThread,
    is_task: false,
    is_api_call: false,
    description: "a request of the network plugin",
};

const GROUP_API: KindFacts = KindFacts {
    name: "GroupApi",
    type_bit: bit::GROUP_API,
    since: 5,
    states: states(&[state::GROUP_START_API_STOP, state::GROUP_END_API_START]),
    trusted_context: true,
    descriptor_sets_rank: false,
    remembered: Remembered::Always,
    forwarded_to_scorep: true,
    timeline: Timeline::CallingThread,
    is_task: false,
    is_api_call: false,
    description: "an NCCL group: from its first operation to the end of its launches",
};

const COLL_API: KindFacts = KindFacts {
    name: "CollApi",
    type_bit: bit::COLL_API,
    since: 5,
    states: 0,
    trusted_context: true,
    descriptor_sets_rank: false,
    remembered: Remembered::Always,
    forwarded_to_scorep: true,
    timeline: Timeline::CallingThread,
    is_task: false,
    is_api_call: true,
    description: "an NCCL collective API call",
};

const P2P_API: KindFacts = KindFacts {
    name: "P2pApi",
    type_bit: bit::P2P_API,
    since: 5,
    states: 0,
    trusted_context: true,
    descriptor_sets_rank: false,
    remembered: Remembered::Always,
    forwarded_to_scorep: true,
    timeline: Timeline::CallingThread,
    is_task: false,
    is_api_call: true,
    description: "an NCCL point-to-point API call",
};

const KERNEL_LAUNCH: KindFacts = KindFacts {
    name: "KernelLaunch",
    type_bit: bit::KERNEL_LAUNCH,
    since: 5,
    states: 0,
    trusted_context: true,
    descriptor_sets_rank: false,
    remembered: Remembered::Never,
    forwarded_to_scorep: true,
    timeline: Timeline::CallingThread,
    is_task: false,
    is_api_call: false,
    description: "launching an NCCL kernel",
};

const CE_COLL: KindFacts = KindFacts {
    name: "CeColl",
    type_bit: bit::CE_COLL,
    since: 6,
    states: states(&[state::CE_COLL_START, state::CE_COLL_COMPLETE]),
    trusted_context: true,
    descriptor_sets_rank: true,
    remembered: Remembered::Always,
    forwarded_to_scorep: false,
    timeline: Timeline::CallingThread,
    is_task: false,
    is_api_call: false,
    description: "",
};

const CE_SYNC: KindFacts = KindFacts {
    name: "CeSync",
    type_bit: bit::CE_SYNC,
    since: 6,
    states: states(&[state::CE_SYNC_START, state::CE_SYNC_COMPLETE]),
    trusted_context: true,
    descriptor_sets_rank: true,
    remembered: Remembered::Always,
    forwarded_to_scorep: false,
    timeline: Timeline::CallingThread,
    is_task: false,
    is_api_call: false,
    description: "",
};

const CE_BATCH: KindFacts = KindFacts {
    name: "CeBatch",
    type_bit: bit::CE_BATCH,
    since: 6,
    states: states(&[state::CE_BATCH_START, state::CE_BATCH_COMPLETE]),
    trusted_context: true,
    descriptor_sets_rank: true,
    remembered: Remembered::Always,
    forwarded_to_scorep: false,
    timeline: Timeline::CallingThread,
    is_task: false,
    is_api_call: false,
    description: "",
};

const KERNEL_PHASE: KindFacts = KindFacts {
    name: "KernelPhase",
    type_bit: bit::KERNEL_PHASE,
    since: 7,
    states: states(&[state::KERNEL_PHASE_STOP]),
    trusted_context: true,
    descriptor_sets_rank: false,
    remembered: Remembered::Never,
    forwarded_to_scorep: false,
    timeline: Timeline::GpuChannel,
    is_task: false,
    is_api_call: false,
    description: "",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_belongs_to_its_kind() {
        for kind in Kind::ALL {
            assert_eq!(kind.facts().type_bit, kind.bit(), "{kind:?}");
            assert_eq!(
                Kind::from_type_bits(kind.facts().type_bit),
                Some(kind),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn versions_know_the_kinds_they_introduced() {
        let v1 = bit::GROUP | bit::COLL | bit::P2P | bit::PROXY_OP | bit::PROXY_STEP;
        assert_eq!(kinds_of_version(1), v1 | bit::PROXY_CTRL);
        assert_eq!(kinds_of_version(2), kinds_of_version(1));
        assert_eq!(
            kinds_of_version(3),
            kinds_of_version(2) | bit::KERNEL_CH | bit::NET_PLUGIN
        );
        assert_eq!(kinds_of_version(4), kinds_of_version(3));
        assert_eq!(
            kinds_of_version(5),
            kinds_of_version(4)
                | bit::GROUP_API
                | bit::COLL_API
                | bit::P2P_API
                | bit::KERNEL_LAUNCH
        );
        assert_eq!(
            kinds_of_version(6),
            kinds_of_version(5) | bit::CE_COLL | bit::CE_SYNC | bit::CE_BATCH
        );
        assert_eq!(kinds_of_version(7), 0xFFFF);
    }

    #[test]
    fn bit_15_is_a_kernel_phase_under_v7_only() {
        assert_eq!(Kind::decode_type(7, 1 << 15), Some(Kind::KernelPhase));
        assert_eq!(Kind::decode_type(6, 1 << 15), None);
        assert_eq!(Kind::decode_type(2, bit::KERNEL_CH), None);
        assert_eq!(Kind::decode_type(3, bit::KERNEL_CH), Some(Kind::KernelCh));
        assert_eq!(Kind::decode_type(7, bit::COLL | bit::P2P), None);
        assert_eq!(Kind::decode_type(7, 1 << 16), None);
    }

    #[test]
    fn states_are_accepted_only_by_their_kinds() {
        assert!(Kind::ProxyStep.accepts_state(state::PROXY_STEP_SEND_PEER_WAIT_V4));
        assert!(!Kind::ProxyOp.accepts_state(state::PROXY_STEP_SEND_WAIT));
        assert!(Kind::GroupApi.accepts_state(state::GROUP_END_API_START));
        assert!(!Kind::Coll.accepts_state(0));
        assert!(!Kind::KernelCh.accepts_state(-1));
        assert!(!Kind::KernelCh.accepts_state(32));
        // Every state value NCCL defines belongs to exactly one kind.
        for value in 0..32 {
            let owners = Kind::ALL
                .iter()
                .filter(|kind| kind.accepts_state(value))
                .count();
            assert_eq!(owners, 1, "state {value}");
        }
    }

    #[test]
    fn children_keep_their_parents_remembered() {
        let remembered = remembered_kinds(KindSet::all());
        assert!(remembered.has(Kind::ProxyStep));
        assert!(remembered.has(Kind::KernelCh));
        assert!(!remembered.has(Kind::KernelLaunch));
        let without_children = remembered_kinds(KindSet::all() - KindSet::NET_PLUGIN);
        assert!(!without_children.has(Kind::ProxyStep));
        assert!(without_children.has(Kind::Coll));
        assert_eq!(KindSet::all().bits(), 0xFFFF);
        for kind in Kind::ALL {
            assert_eq!(KindSet::from(kind).bits(), kind.facts().type_bit);
        }
    }
}
