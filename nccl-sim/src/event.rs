//! Events as NCCL's core produces them, before any version adapter: the newest API's
//! information (v7), from which each version's descriptor is built (`profiler.rs`).

use crate::names::{Algo, DataType, Func, Proto};
use std::ffi::{c_char, c_void};

/// A handle or context value as NCCL keeps it: opaque, only ever tested for NULL.
pub type Raw = *mut c_void;

pub const NULL: Raw = std::ptr::null_mut();

/// A collective task (`Coll`).
#[derive(Clone, Copy, Debug)]
pub struct CollTask {
    pub seq: u64,
    pub func: Func,
    /// As NCCL reports it: bytes (with Int8) for AllGather and Broadcast.
    pub count: usize,
    pub root: i32,
    pub datatype: DataType,
    pub n_channels: u8,
    pub n_warps: u8,
    pub algo: Algo,
    pub proto: Proto,
    /// Symmetric kernels (2.31+) pass a kernel-variant name as algo and "" as proto.
    pub symmetric_variant: Option<&'static std::ffi::CStr>,
    /// The legacy Group handle; the parent of Coll up to 2.27 and in the v1–v4 shims.
    pub parent_group: Raw,
    pub user_tag: u64,
    /// 2.23–2.25 only: the comm's name and hash in the descriptor.
    pub comm_name: *const c_char,
    pub comm_hash: u64,
}

/// A point-to-point task (`P2p`).
#[derive(Clone, Copy, Debug)]
pub struct P2pTask {
    pub func: Func,
    pub count: usize,
    pub datatype: DataType,
    pub peer: i32,
    pub n_channels: u8,
    pub parent_group: Raw,
    pub user_tag: u64,
    pub comm_name: *const c_char,
    pub comm_hash: u64,
}

#[derive(Clone, Copy, Debug)]
pub enum CoreEvent {
    GroupApi {
        graph_captured: bool,
        depth: i32,
    },
    CollApi {
        func: Func,
        count: usize,
        datatype: DataType,
        root: i32,
        graph_captured: bool,
        user_tag: u64,
    },
    P2pApi {
        func: Func,
        count: usize,
        datatype: DataType,
        graph_captured: bool,
        user_tag: u64,
    },
    KernelLaunch,
    Group,
    Coll(CollTask),
    P2p(P2pTask),
    ProxyOp {
        pid: i32,
        channel: u8,
        peer: i32,
        n_steps: i32,
        chunk_size: i32,
        is_send: bool,
    },
    ProxyStep {
        step: i32,
    },
    ProxyCtrl,
    KernelCh {
        channel: u8,
        ptimer: u64,
    },
    NetPlugin {
        id: i64,
        data: Raw,
    },
    CeColl {
        seq: u64,
        func: Func,
        count: usize,
        root: i32,
        datatype: DataType,
        batch_size: u32,
        num_batches: u32,
        ce_seq: u32,
        user_tag: u64,
    },
    CeSync {
        is_complete: bool,
        n_ranks: i32,
    },
    CeBatch {
        num_ops: i32,
        total_bytes: usize,
        use_intra_sync: bool,
    },
    KernelPhase {
        channel: u8,
        phase: u8,
        ptimer: u64,
    },
    /// The `KernelStep` event NCCL PR #2316 proposes, on type bit 15: sent only with
    /// `--nccl-bug kernel-step-on-bit15` (see `bugs`), laid out as a KernelCh.
    KernelStep {
        channel: u8,
        ptimer: u64,
    },
}

impl CoreEvent {
    /// The type bit of this event (`ncclProfile*`).
    pub fn type_bit(&self) -> u64 {
        use nccl_profiler_abi::event_type as t;
        match self {
            CoreEvent::Group => t::GROUP,
            CoreEvent::Coll(_) => t::COLL,
            CoreEvent::P2p(_) => t::P2P,
            CoreEvent::ProxyOp { .. } => t::PROXY_OP,
            CoreEvent::ProxyStep { .. } => t::PROXY_STEP,
            CoreEvent::ProxyCtrl => t::PROXY_CTRL,
            CoreEvent::KernelCh { .. } => t::KERNEL_CH,
            CoreEvent::NetPlugin { .. } => t::NET_PLUGIN,
            CoreEvent::GroupApi { .. } => t::GROUP_API,
            CoreEvent::CollApi { .. } => t::COLL_API,
            CoreEvent::P2pApi { .. } => t::P2P_API,
            CoreEvent::KernelLaunch => t::KERNEL_LAUNCH,
            CoreEvent::CeColl { .. } => t::CE_COLL,
            CoreEvent::CeSync { .. } => t::CE_SYNC,
            CoreEvent::CeBatch { .. } => t::CE_BATCH,
            CoreEvent::KernelPhase { .. } => t::KERNEL_PHASE,
            // The proposal's bit, the same as KernelPhase's.
            CoreEvent::KernelStep { .. } => 1 << 15,
        }
    }
}

/// One `startEvent` as core calls it.
#[derive(Clone, Copy, Debug)]
pub struct Descr {
    pub parent: Raw,
    pub rank: i32,
    pub event: CoreEvent,
}

/// The state arguments core passes with a state.
#[derive(Clone, Copy, Debug)]
pub enum StateArgs {
    /// A NULL pointer (GroupApi states on a direct version).
    Null,
    /// A pointer to arguments nobody initialised (ProxyOp InProgress).
    Uninit,
    TransSize(usize),
    Appended(i32),
    NetData(Raw),
    PTimer(u64),
    /// 2.23–2.26 ProxyOp states: `{transSize, steps}`.
    ProxyOpProgress {
        trans_size: usize,
        steps: i32,
    },
}

/// What core passes to `init` about a communicator rank.
#[derive(Clone, Debug)]
pub struct CommInfo {
    pub comm_hash: u64,
    pub name: Option<std::ffi::CString>,
    pub n_nodes: i32,
    pub n_ranks: i32,
    pub rank: i32,
}
