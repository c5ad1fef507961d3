//! The normalized event: what every version's descriptor becomes.
//!
//! Records are fixed-size `Copy` values so the hot path can push them into a ring without
//! allocating. Strings NCCL passes are literals from small known sets and become enums
//! here; anything else becomes `Unknown`.

use serde::Serialize;
use std::ffi::c_char;

/// Generates a fieldless enum of NCCL names with its string table, the v1 enum numbers
/// and a lookup from the C string NCCL passes.
macro_rules! nccl_names {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $variant:ident = $text:literal $(, v1 = $num:literal)? ; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize)]
        #[repr(u8)]
        pub enum $name {
            #[default]
            Unknown = 0,
            $( $variant, )*
        }

        impl $name {
            /// The name as NCCL spells it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $name::Unknown => "Unknown",
                    $( $name::$variant => $text, )*
                }
            }

            /// Maps the bytes of an NCCL string; anything not in the set is `Unknown`.
            pub fn from_bytes(bytes: &[u8]) -> Self {
                match bytes {
                    $( b if b == $text.as_bytes() => $name::$variant, )*
                    _ => $name::Unknown,
                }
            }

            /// Maps the enum number that profiler API v1 passes instead of a string.
            #[allow(unreachable_patterns)]
            pub fn from_v1(number: u8) -> Self {
                match number {
                    $( $( $num => $name::$variant, )? )*
                    _ => $name::Unknown,
                }
            }

            /// The value a [`crate::name_cache::NameCache`] holds for a name.
            pub fn from_value(value: u8) -> Self {
                const VARIANTS: &[$name] = &[$name::Unknown, $( $name::$variant, )*];
                VARIANTS.get(usize::from(value)).copied().unwrap_or($name::Unknown)
            }

            /// Reads a C string NCCL passed, by its address where that is known (see
            /// [`crate::name_cache`]); NULL, unreadable or overlong becomes `Unknown`.
            ///
            /// # Safety
            /// `ptr` is NULL or points to memory that stays as it is during the call.
            #[inline]
            pub unsafe fn from_c(cache: &crate::name_cache::NameCache, ptr: *const c_char) -> Self {
                // SAFETY: forwarded from the caller.
                match unsafe { cache.resolve(ptr) } {
                    Some(value) => Self::from_value(value),
                    None => $name::Unknown,
                }
            }
        }
    };
}

nccl_names! {
    /// The operation (`func`) of an API, task or CE event.
    pub enum Func {
        AllGather = "AllGather", v1 = 2;
        AllReduce = "AllReduce", v1 = 4;
        AlltoAll = "AlltoAll";
        Broadcast = "Broadcast", v1 = 0;
        Gather = "Gather";
        Recv = "Recv", v1 = 7;
        Reduce = "Reduce", v1 = 1;
        ReduceScatter = "ReduceScatter", v1 = 3;
        Scatter = "Scatter";
        SendRecv = "SendRecv", v1 = 5;
        Send = "Send", v1 = 6;
        PutSignal = "PutSignal";
        Signal = "Signal";
        WaitSignal = "WaitSignal";
        Invalid = "Invalid";
    }
}

nccl_names! {
    /// The element type. NCCL passes the literal "Unknown" for `ncclUint8` (it has no
    /// case); the decoder maps that literal to `Uint8`.
    pub enum DataType {
        Int8 = "ncclInt8", v1 = 0;
        Uint8 = "ncclUint8", v1 = 1;
        Int32 = "ncclInt32", v1 = 2;
        Uint32 = "ncclUint32", v1 = 3;
        Int64 = "ncclInt64", v1 = 4;
        Uint64 = "ncclUint64", v1 = 5;
        Float16 = "ncclFloat16", v1 = 6;
        Float32 = "ncclFloat32", v1 = 7;
        Float64 = "ncclFloat64", v1 = 8;
        Bfloat16 = "ncclBfloat16", v1 = 9;
        Float8e4m3 = "ncclFloat8e4m3", v1 = 10;
        Float8e5m2 = "ncclFloat8e5m2", v1 = 11;
    }
}

nccl_names! {
    /// The algorithm NCCL chose.
    pub enum Algo {
        Tree = "TREE", v1 = 0;
        Ring = "RING", v1 = 1;
        CollnetDirect = "COLLNET_DIRECT", v1 = 2;
        CollnetChain = "COLLNET_CHAIN", v1 = 3;
        Nvls = "NVLS", v1 = 4;
        NvlsTree = "NVLS_TREE", v1 = 5;
        Pat = "PAT", v1 = 6;
    }
}

nccl_names! {
    /// The protocol NCCL chose. Symmetric kernels (2.31+) pass "" which maps to `Unknown`.
    pub enum Proto {
        Ll = "LL", v1 = 0;
        Ll128 = "LL128", v1 = 1;
        Simple = "SIMPLE", v1 = 2;
    }
}

impl DataType {
    /// The type of a name NCCL passed. NCCL (2.24–2.32) has no string for `ncclUint8` and
    /// passes its literal "Unknown" instead; every other type has a name. So "Unknown"
    /// from NCCL means one-byte unsigned, while an unlisted name stays `Unknown`.
    pub fn from_nccl_bytes(bytes: &[u8]) -> Self {
        if bytes == b"Unknown" {
            DataType::Uint8
        } else {
            DataType::from_bytes(bytes)
        }
    }

    /// Size of one element in bytes; `None` when unknown.
    pub fn size(self) -> Option<u64> {
        Some(match self {
            DataType::Int8 | DataType::Uint8 | DataType::Float8e4m3 | DataType::Float8e5m2 => 1,
            DataType::Float16 | DataType::Bfloat16 => 2,
            DataType::Int32 | DataType::Uint32 | DataType::Float32 => 4,
            DataType::Int64 | DataType::Uint64 | DataType::Float64 => 8,
            DataType::Unknown => return None,
        })
    }
}

/// The kinds of event, one per type bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[repr(u8)]
pub enum Kind {
    Group = 0,
    Coll = 1,
    P2p = 2,
    ProxyOp = 3,
    ProxyStep = 4,
    ProxyCtrl = 5,
    KernelCh = 6,
    NetPlugin = 7,
    GroupApi = 8,
    CollApi = 9,
    P2pApi = 10,
    KernelLaunch = 11,
    CeColl = 12,
    CeSync = 13,
    CeBatch = 14,
    KernelPhase = 15,
}

impl Kind {
    pub const ALL: [Kind; 16] = [
        Kind::Group,
        Kind::Coll,
        Kind::P2p,
        Kind::ProxyOp,
        Kind::ProxyStep,
        Kind::ProxyCtrl,
        Kind::KernelCh,
        Kind::NetPlugin,
        Kind::GroupApi,
        Kind::CollApi,
        Kind::P2pApi,
        Kind::KernelLaunch,
        Kind::CeColl,
        Kind::CeSync,
        Kind::CeBatch,
        Kind::KernelPhase,
    ];

    /// The kind of a descriptor's `type` value; `None` unless exactly one known bit is set.
    pub fn from_type_bits(bits: u64) -> Option<Kind> {
        if bits.count_ones() != 1 || bits.trailing_zeros() >= 16 {
            return None;
        }
        Some(Kind::ALL[bits.trailing_zeros() as usize])
    }

    pub fn from_index(index: u8) -> Option<Kind> {
        Kind::ALL.get(usize::from(index)).copied()
    }

    /// The type bit NCCL uses for this kind.
    pub fn bit(self) -> u64 {
        1 << (self as u8)
    }

    /// NCCL's name of the kind.
    pub fn name(self) -> &'static str {
        self.facts().name
    }
}

/// A collective task (`Coll`), after decoding.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Coll {
    pub seq: u64,
    pub func: Func,
    pub count: u64,
    pub root: i32,
    pub datatype: DataType,
    pub n_channels: u8,
    pub n_warps: u8,
    pub algo: Algo,
    pub proto: Proto,
    /// The legacy Group handle (v5+ `parentGroup`; for v1–v4 the parent itself).
    pub parent_group: u64,
    /// v1–v3 only: the communicator hash in the descriptor (0 when NCCL sent none).
    pub comm_hash: u64,
    pub is_sym_coll: bool,
    pub user_tag: u64,
}

/// A point-to-point task (`P2p`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct P2p {
    pub func: Func,
    pub count: u64,
    pub datatype: DataType,
    pub peer: i32,
    /// `None` where the version has no field or NCCL leaves it garbage (v4 shim).
    pub n_channels: Option<u8>,
    pub parent_group: u64,
    pub comm_hash: u64,
    pub user_tag: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CollApi {
    pub func: Func,
    pub count: u64,
    pub datatype: DataType,
    pub root: i32,
    pub graph_captured: bool,
    pub user_tag: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct P2pApi {
    pub func: Func,
    pub count: u64,
    pub datatype: DataType,
    pub graph_captured: bool,
    pub user_tag: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProxyOp {
    pub pid: i32,
    pub channel: u8,
    pub peer: i32,
    pub n_steps: i32,
    pub chunk_size: i32,
    pub is_send: bool,
}

/// The decoded payload of a NetPlugin event.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum NetPayload {
    /// An IB queue-pair work request (IB type, version 1).
    IbQp {
        device: i32,
        wr_id: u64,
        opcode: i32,
        qp_num: i32,
        length: u64,
    },
    /// A socket task (socket type, version 1).
    Socket { fd: i32, op: i32, length: u64 },
    /// A payload type or version we do not know, or a NULL payload.
    #[default]
    Unknown,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NetPlugin {
    /// The raw encoded id (type in the high bits, version in the low 16).
    pub id: i64,
    pub payload: NetPayload,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CeColl {
    pub seq: u64,
    pub func: Func,
    pub count: u64,
    pub root: i32,
    pub datatype: DataType,
    pub intra_batch_sync: bool,
    pub batch_size: u32,
    pub num_batches: u32,
    pub ce_seq: u32,
    pub user_tag: u64,
}

/// The kernel phases of v7's KernelPhase event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum Phase {
    InitialSync,
    Compute,
    FinalSync,
    #[default]
    Unknown,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::InitialSync => "InitialSync",
            Phase::Compute => "Compute",
            Phase::FinalSync => "FinalSync",
            Phase::Unknown => "Unknown",
        }
    }

    pub fn from_id(id: u8) -> Phase {
        match id {
            0 => Phase::InitialSync,
            1 => Phase::Compute,
            2 => Phase::FinalSync,
            _ => Phase::Unknown,
        }
    }
}

/// One event as NCCL described it at start, in a version-independent form.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Event {
    Group,
    Coll(Coll),
    P2p(P2p),
    ProxyOp(ProxyOp),
    ProxyStep {
        step: i32,
    },
    ProxyCtrl,
    KernelCh {
        channel: u8,
        ptimer: Option<u64>,
    },
    NetPlugin(NetPlugin),
    GroupApi {
        graph_captured: bool,
        depth: i32,
    },
    CollApi(CollApi),
    P2pApi(P2pApi),
    KernelLaunch,
    CeColl(CeColl),
    CeSync {
        is_complete: bool,
        n_ranks: i32,
    },
    CeBatch {
        num_ops: i32,
        total_bytes: u64,
        use_intra_sync: bool,
    },
    KernelPhase {
        channel: u8,
        phase: Phase,
        ptimer: u64,
    },
}

impl Event {
    pub fn kind(&self) -> Kind {
        match self {
            Event::Group => Kind::Group,
            Event::Coll(_) => Kind::Coll,
            Event::P2p(_) => Kind::P2p,
            Event::ProxyOp(_) => Kind::ProxyOp,
            Event::ProxyStep { .. } => Kind::ProxyStep,
            Event::ProxyCtrl => Kind::ProxyCtrl,
            Event::KernelCh { .. } => Kind::KernelCh,
            Event::NetPlugin(_) => Kind::NetPlugin,
            Event::GroupApi { .. } => Kind::GroupApi,
            Event::CollApi(_) => Kind::CollApi,
            Event::P2pApi(_) => Kind::P2pApi,
            Event::KernelLaunch => Kind::KernelLaunch,
            Event::CeColl(_) => Kind::CeColl,
            Event::CeSync { .. } => Kind::CeSync,
            Event::CeBatch { .. } => Kind::CeBatch,
            Event::KernelPhase { .. } => Kind::KernelPhase,
        }
    }
}

/// A decoded start: the event plus the raw values NCCL passed around it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Start {
    /// `parentObj` as NCCL passed it: one of our handles, NULL, or a foreign value.
    pub parent: u64,
    /// The descriptor's `rank` (0 where NCCL does not set it).
    pub rank: i32,
    pub event: Event,
}

/// The argument that came with a state, decoded for the state's meaning.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum StateArg {
    #[default]
    None,
    /// ProxyStep states (v4+) and v1–v3 ProxyOp states: bytes.
    TransSize(u64),
    /// v1–v3 ProxyOp states: bytes and steps.
    Progress { trans_size: u64, steps: i32 },
    /// ProxyCtrl states.
    Appended(i32),
    /// KernelChStop and KernelPhaseStop: the GPU timestamp.
    PTimer(u64),
    /// NetPluginUpdate: the net plugin's payload pointer value, kept as a number only.
    NetData(u64),
}

/// What happened to an event, as pushed by an NCCL thread.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action {
    Start {
        context: u64,
        start: Start,
    },
    State {
        state: i32,
        arg: StateArg,
    },
    Stop,
    /// A communicator context was initialised (pushed by the initialising thread).
    Init {
        context: u64,
    },
    /// A communicator context was finalized (pushed by the finalizing thread).
    Finalize {
        context: u64,
    },
    /// The thread waited for room in its full ring from `since` (clock ticks) until the
    /// record's time: NCCL's thread was held back by the plugin
    /// (`NCCL_SCOREP_ON_FULL=wait`, or an init or finalize record, which always wait).
    HeldBack {
        since: u64,
    },
}

/// One fixed-size record in a thread's ring.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Record {
    /// When NCCL called: [`crate::clock::ticks`] on the calling thread, turned into
    /// CLOCK_MONOTONIC nanoseconds by the collector right after it drained the record.
    pub time: u64,
    /// Our handle of the event (0 for `Init` and `Finalize`).
    pub handle: u64,
    pub action: Action,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_map_to_enums_and_back() {
        for name in ["AllGather", "AllReduce", "AlltoAll", "SendRecv", "Invalid"] {
            assert_eq!(Func::from_bytes(name.as_bytes()).as_str(), name);
        }
        assert_eq!(Func::from_bytes(b"Bogus"), Func::Unknown);
        assert_eq!(DataType::from_bytes(b"ncclBfloat16"), DataType::Bfloat16);
        assert_eq!(DataType::from_bytes(b"Unknown"), DataType::Unknown);
        assert_eq!(Algo::from_bytes(b"NVLS_TREE"), Algo::NvlsTree);
        assert_eq!(Proto::from_bytes(b""), Proto::Unknown);
        assert_eq!(
            // SAFETY: NULL is allowed.
            unsafe { Func::from_c(&crate::decode::FUNC_NAMES, std::ptr::null()) },
            Func::Unknown
        );
        assert_eq!(DataType::from_nccl_bytes(b"Unknown"), DataType::Uint8);
        for value in 0..=u8::MAX {
            let algo = Algo::from_value(value);
            assert!(algo == Algo::Unknown || algo as u8 == value);
        }
        assert_eq!(Proto::from_value(Proto::Simple as u8), Proto::Simple);
    }

    #[test]
    fn v1_enum_numbers_follow_nccl() {
        assert_eq!(Func::from_v1(0), Func::Broadcast);
        assert_eq!(Func::from_v1(4), Func::AllReduce);
        assert_eq!(Func::from_v1(7), Func::Recv);
        assert_eq!(Func::from_v1(99), Func::Unknown);
        assert_eq!(DataType::from_v1(1), DataType::Uint8);
        assert_eq!(DataType::from_v1(9), DataType::Bfloat16);
        assert_eq!(Algo::from_v1(6), Algo::Pat);
        assert_eq!(Proto::from_v1(2), Proto::Simple);
    }

    #[test]
    fn type_bits_need_exactly_one_known_bit() {
        assert_eq!(Kind::from_type_bits(0x2), Some(Kind::Coll));
        assert_eq!(Kind::from_type_bits(0x8000), Some(Kind::KernelPhase));
        assert_eq!(Kind::from_type_bits(0), None);
        assert_eq!(Kind::from_type_bits(0x3), None);
        assert_eq!(Kind::from_type_bits(0x1_0000), None);
        for kind in Kind::ALL {
            assert_eq!(Kind::from_type_bits(kind.bit()), Some(kind));
        }
    }

    #[test]
    fn records_stay_small() {
        // The hot path copies one record per callback: keep it within two cache lines.
        assert!(
            std::mem::size_of::<Record>() <= 128,
            "{}",
            std::mem::size_of::<Record>()
        );
    }
}
