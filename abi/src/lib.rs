//! The NCCL profiler plugin ABI, versions 1 to 7, as `#[repr(C)]` Rust types, and NCCL's
//! rules for finding a plugin ([`loader`]).
//!
//! Written from NCCL's profiler headers of each release (x86_64, LP64). Every
//! descriptor's size and every field offset is pinned by a compile-time assertion in
//! [`layout`], so a typo here cannot build. The plugin, the NCCL stand-in `nccl-sim` and
//! the tool's `doctor` share these definitions; `nccl-sim`'s tests also check the bytes
//! it writes against offsets spelled out in the test, so a wrong definition here cannot
//! pass on both sides.
//!
//! Only the parts shared by several versions live in this file; each version's descriptor,
//! state arguments and `init` signature live in `vN.rs`.

#![allow(non_camel_case_types, non_snake_case)]

use std::ffi::{c_char, c_int, c_void};

/// Defines one of NCCL's `#[repr(C)]` union members and, as its [`fields::Fields`], where
/// each of its fields lies: the bytes between and after them are padding, which a C caller
/// leaves as they were.
macro_rules! c_struct {
    (
        $(#[$attr:meta])*
        pub struct $name:ident {
            $(pub $field:ident: $ty:ty,)*
        }
    ) => {
        $(#[$attr])*
        #[repr(C)]
        pub struct $name {
            $(pub $field: $ty,)*
        }

        impl $crate::fields::Fields for $name {
            const SPANS: &'static [$crate::fields::Span] = &[$(
                $crate::fields::Span {
                    offset: ::std::mem::offset_of!($name, $field),
                    len: ::std::mem::size_of::<$ty>(),
                },
            )*];
        }
    };
}

pub mod fields;
pub mod layout;
pub mod loader;
pub mod v1;
pub mod v2;
pub mod v3;
pub mod v4;
pub mod v5;
pub mod v6;
pub mod v7;

/// A C `bool` as NCCL hands it over: one byte, read as a byte. A Rust `bool` must be 0 or
/// 1, and the bytes of a descriptor are not ours to trust (a shim may leave garbage in
/// members it does not set): any value other than 0 reads as true.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CBool(pub u8);

impl CBool {
    pub const FALSE: CBool = CBool(0);
    pub const TRUE: CBool = CBool(1);

    /// True for any nonzero byte.
    pub fn get(self) -> bool {
        self.0 != 0
    }
}

impl From<bool> for CBool {
    fn from(value: bool) -> CBool {
        CBool(u8::from(value))
    }
}

/// `ncclResult_t`: a 4-byte C enum. The plugin only ever returns [`NCCL_SUCCESS`].
pub type ncclResult_t = c_int;
pub const NCCL_SUCCESS: ncclResult_t = 0;

/// `ncclProfilerEventState_t`: a 4-byte C enum shared by all versions.
pub type ncclProfilerEventState_t = c_int;

/// The function behind `ncclDebugLogger_t` (v4+): C-variadic
/// `(level, flags, file, line, fmt, ...)`.
pub type LoggerFn = unsafe extern "C" fn(
    level: c_int,
    flags: std::ffi::c_ulong,
    file: *const c_char,
    line: c_int,
    fmt: *const c_char,
    ...
);

/// `ncclDebugLogger_t`: NULL or a [`LoggerFn`].
pub type ncclDebugLogger_t = Option<LoggerFn>;

/// Log levels of `ncclDebugLogLevel`.
pub mod log_level {
    pub const VERSION: i32 = 1;
    pub const WARN: i32 = 2;
    pub const INFO: i32 = 3;
}

/// The PROFILE subsystem flag of NCCL's logger.
pub const NCCL_PROFILE_SUBSYS: std::ffi::c_ulong = 0x4000;

/// Event type bits (`ncclProfile*`). The descriptor's `type` holds exactly one of them.
pub mod event_type {
    pub const GROUP: u64 = 1 << 0;
    pub const COLL: u64 = 1 << 1;
    pub const P2P: u64 = 1 << 2;
    pub const PROXY_OP: u64 = 1 << 3;
    pub const PROXY_STEP: u64 = 1 << 4;
    pub const PROXY_CTRL: u64 = 1 << 5;
    pub const KERNEL_CH: u64 = 1 << 6;
    pub const NET_PLUGIN: u64 = 1 << 7;
    pub const GROUP_API: u64 = 1 << 8;
    pub const COLL_API: u64 = 1 << 9;
    pub const P2P_API: u64 = 1 << 10;
    pub const KERNEL_LAUNCH: u64 = 1 << 11;
    pub const CE_COLL: u64 = 1 << 12;
    pub const CE_SYNC: u64 = 1 << 13;
    pub const CE_BATCH: u64 = 1 << 14;
    pub const KERNEL_PHASE: u64 = 1 << 15;
}

/// Values of `ncclProfilerEventState_t`; they never change between versions.
pub mod state {
    pub const PROXY_OP_SEND_POSTED: i32 = 0;
    pub const PROXY_OP_SEND_REM_FIFO_WAIT: i32 = 1;
    pub const PROXY_OP_SEND_TRANSMITTED: i32 = 2;
    pub const PROXY_OP_SEND_DONE: i32 = 3;
    pub const PROXY_OP_RECV_POSTED: i32 = 4;
    pub const PROXY_OP_RECV_RECEIVED: i32 = 5;
    pub const PROXY_OP_RECV_TRANSMITTED: i32 = 6;
    pub const PROXY_OP_RECV_DONE: i32 = 7;
    pub const PROXY_STEP_SEND_GPU_WAIT: i32 = 8;
    pub const PROXY_STEP_SEND_WAIT: i32 = 9;
    pub const PROXY_STEP_RECV_WAIT: i32 = 10;
    pub const PROXY_STEP_RECV_FLUSH_WAIT: i32 = 11;
    pub const PROXY_STEP_RECV_GPU_WAIT: i32 = 12;
    pub const PROXY_CTRL_IDLE: i32 = 13;
    pub const PROXY_CTRL_ACTIVE: i32 = 14;
    pub const PROXY_CTRL_SLEEP: i32 = 15;
    pub const PROXY_CTRL_WAKEUP: i32 = 16;
    pub const PROXY_CTRL_APPEND: i32 = 17;
    pub const PROXY_CTRL_APPEND_END: i32 = 18;
    pub const PROXY_OP_IN_PROGRESS_V4: i32 = 19;
    pub const PROXY_STEP_SEND_PEER_WAIT_V4: i32 = 20;
    pub const NET_PLUGIN_UPDATE: i32 = 21;
    pub const KERNEL_CH_STOP: i32 = 22;
    pub const GROUP_START_API_STOP: i32 = 23;
    pub const GROUP_END_API_START: i32 = 24;
    pub const CE_COLL_START: i32 = 25;
    pub const CE_COLL_COMPLETE: i32 = 26;
    pub const CE_SYNC_START: i32 = 27;
    pub const CE_SYNC_COMPLETE: i32 = 28;
    pub const CE_BATCH_START: i32 = 29;
    pub const CE_BATCH_COMPLETE: i32 = 30;
    pub const KERNEL_PHASE_STOP: i32 = 31;
}

/// Net-plugin event id encoding (`netPlugin.id`): low 16 bits version, high bits type.
pub mod net {
    pub const VER_MASK: i64 = 0x0000_FFFF;
    pub const TYPE_MASK: i64 = 0xFFFF_0000;
    pub const TYPE_IB: i64 = 0x1_0000;
    pub const TYPE_SOCK: i64 = 0x2_0000;
    /// `ncclProfileQp`, the only IB v1 payload kind.
    pub const IB_QP: u8 = 1;
    /// `ncclProfileSocket`, the only socket v1 payload kind.
    pub const SOCKET: u8 = 1;
}

/// The IB v1 net-plugin payload (`netPlugin.data` when the type is IB, version 1).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NetIbQpV1 {
    pub device: c_int,
    pub wr_id: u64,
    pub opcode: c_int,
    pub qpNum: c_int,
    pub length: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct NetIbDescrV1 {
    pub type_: u8,
    pub qp: NetIbQpV1,
}

/// The socket v1 net-plugin payload.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NetSockV1 {
    pub fd: c_int,
    pub op: c_int,
    pub length: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct NetSockDescrV1 {
    pub type_: u8,
    pub sock: NetSockV1,
}

/// The function table, the same six slots in every version; `Init` is the version's
/// `init` signature and `Descr`/`Args` its descriptor and state-argument types.
#[repr(C)]
pub struct ProfilerTable<Init, Descr, Args> {
    pub name: *const c_char,
    pub init: Init,
    pub startEvent: unsafe extern "C" fn(
        context: *mut c_void,
        eHandle: *mut *mut c_void,
        eDescr: *mut Descr,
    ) -> ncclResult_t,
    pub stopEvent: unsafe extern "C" fn(eHandle: *mut c_void) -> ncclResult_t,
    pub recordEventState: unsafe extern "C" fn(
        eHandle: *mut c_void,
        eState: ncclProfilerEventState_t,
        eStateArgs: *mut Args,
    ) -> ncclResult_t,
    pub finalize: unsafe extern "C" fn(context: *mut c_void) -> ncclResult_t,
}

// SAFETY: the table is immutable after construction; `name` points to a static C string.
unsafe impl<I, D, A> Sync for ProfilerTable<I, D, A> {}

/// `init` of v1–v3.
pub type InitV1 = unsafe extern "C" fn(context: *mut *mut c_void, mask: *mut c_int) -> ncclResult_t;

/// `init` of v4: comm name comes before the hash.
pub type InitV4 = unsafe extern "C" fn(
    context: *mut *mut c_void,
    mask: *mut c_int,
    commName: *const c_char,
    commHash: u64,
    nNodes: c_int,
    nranks: c_int,
    rank: c_int,
    logfn: ncclDebugLogger_t,
) -> ncclResult_t;

/// `init` of v5–v7: the comm id becomes the second argument.
pub type InitV5 = unsafe extern "C" fn(
    context: *mut *mut c_void,
    commId: u64,
    mask: *mut c_int,
    commName: *const c_char,
    nNodes: c_int,
    nranks: c_int,
    rank: c_int,
    logfn: ncclDebugLogger_t,
) -> ncclResult_t;

// ---- union members shared by several versions (same absolute offsets everywhere) ----

c_struct! {
    /// `proxyOp` (all versions): 24 bytes, align 4, at offset 24.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct ProxyOpDescr {
        pub pid: libc::pid_t,
        pub channelId: u8,
        pub peer: c_int,
        pub nSteps: c_int,
        pub chunkSize: c_int,
        pub isSend: c_int,
    }
}

c_struct! {
    /// `proxyStep` (all versions).
    #[derive(Clone, Copy, Debug, Default)]
    pub struct ProxyStepDescr {
        pub step: c_int,
    }
}

c_struct! {
    /// `kernelCh` of v3: only the channel.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct KernelChDescrV3 {
        pub channelId: u8,
    }
}

c_struct! {
    /// `kernelCh` of v4+: channel and GPU start timestamp.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct KernelChDescrV4 {
        pub channelId: u8,
        pub pTimer: u64,
    }
}

c_struct! {
    /// `netPlugin` (v3+): encoded id and a payload pointer owned by the net plugin.
    #[derive(Clone, Copy, Debug)]
    pub struct NetPluginDescr {
        pub id: i64,
        pub data: *mut c_void,
    }
}

/// State arguments of v1–v3 (16 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub union StateArgsV1 {
    pub proxyOp: StateArgsV1ProxyOp,
    pub proxyCtrl: StateArgsProxyCtrl,
}

c_struct! {
    #[derive(Clone, Copy, Debug, Default)]
    pub struct StateArgsV1ProxyOp {
        pub transSize: usize,
        pub steps: c_int,
    }
}

c_struct! {
    #[derive(Clone, Copy, Debug, Default)]
    pub struct StateArgsProxyCtrl {
        pub appendedProxyOps: c_int,
    }
}

/// State arguments of v4–v7 (8 bytes): every member sits at offset 0.
#[repr(C)]
#[derive(Clone, Copy)]
pub union StateArgsV4 {
    pub transSize: usize,
    pub appendedProxyOps: c_int,
    pub netPluginData: *mut c_void,
    pub kernelChPTimer: u64,
}

/// Every version's descriptor starts with the event type, at offset 0.
/// v1–v4 store it as `u8`, v5+ as `u64`.
pub trait Descriptor {
    /// The single type bit of this descriptor.
    fn event_type(&self) -> u64;
}
