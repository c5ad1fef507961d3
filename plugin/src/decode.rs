//! Each version's descriptor and state arguments become one normalized [`Start`] /
//! [`StateArg`]. This is the only place that reads NCCL's unions; the differences between
//! versions are the per-version `match` arms below, everything after is shared.

use crate::event::*;
use crate::name_cache::NameCache;
use nccl_profiler_abi::fields::{StateArgMemberV1, StateArgMemberV4};
use nccl_profiler_abi::{
    net, v1, v2, v3, v4, v5, v6, v7, Descriptor, KernelChDescrV4, NetIbDescrV1, NetPluginDescr,
    NetSockDescrV1, ProxyOpDescr, StateArgsV1, StateArgsV4,
};
use std::ffi::c_char;

/// A version's event descriptor.
pub trait DecodeDescr: Descriptor + Copy {
    /// The profiler API version: which kinds its type bits name (see
    /// [`Kind::decode_type`]).
    const VERSION: u8;
    /// The type bits of the kinds this version has, from the kinds table at compile time.
    const KINDS: u64 = crate::kinds::kinds_of_version(Self::VERSION);

    /// Decodes a descriptor whose type bit is `kind` (a kind of this version).
    ///
    /// # Safety
    /// `self` is a descriptor NCCL filled in for `kind`: the union member of that kind is
    /// initialised and its string fields are NULL or C strings.
    unsafe fn decode(&self, kind: Kind) -> Event;

    fn parent(&self) -> u64;
    fn rank(&self) -> i32;
    /// A copy with another `parentObj` (what a chained plugin gets: its own parent handle).
    fn with_parent(&self, parent: u64) -> Self;
}

/// A version's state-argument union (whose fields per state a recording copies).
pub trait DecodeArgs: nccl_profiler_abi::fields::StateArgFields {
    /// # Safety
    /// `args` is NULL or points to this version's state arguments.
    unsafe fn decode(args: *const Self, state: i32) -> StateArg;
}

fn ptr_value<T>(ptr: *const T) -> u64 {
    ptr as usize as u64
}

/// The operation names (`func`), resolved by address where they can be.
pub static FUNC_NAMES: NameCache = NameCache::new(|bytes| Func::from_bytes(bytes) as u8);
/// The element type names (`datatype`), with NCCL's "Unknown" for `ncclUint8`.
pub static DATATYPE_NAMES: NameCache =
    NameCache::new(|bytes| DataType::from_nccl_bytes(bytes) as u8);
/// The algorithm names.
pub static ALGO_NAMES: NameCache = NameCache::new(|bytes| Algo::from_bytes(bytes) as u8);
/// The protocol names.
pub static PROTO_NAMES: NameCache = NameCache::new(|bytes| Proto::from_bytes(bytes) as u8);

const NAME_CACHES: [&NameCache; 4] = [&FUNC_NAMES, &DATATYPE_NAMES, &ALGO_NAMES, &PROTO_NAMES];

/// On the collector, once per pass: enters the names' addresses the callbacks offered
/// (see [`crate::name_cache`]).
pub fn enter_offered_names() {
    for cache in NAME_CACHES {
        cache.enter_offered();
    }
}

/// Forgets every name's address (after the last finalize).
pub fn forget_names() {
    for cache in NAME_CACHES {
        cache.clear();
    }
}

/// # Safety
/// NULL or a C string.
#[inline(always)]
unsafe fn func(ptr: *const c_char) -> Func {
    // SAFETY: forwarded from the caller.
    unsafe { Func::from_c(&FUNC_NAMES, ptr) }
}

/// NULL or an unlisted name is `Unknown`; NCCL's "Unknown" is `Uint8`
/// ([`DataType::from_nccl_bytes`]).
///
/// # Safety
/// NULL or a C string.
#[inline(always)]
unsafe fn dtype(ptr: *const c_char) -> DataType {
    // SAFETY: forwarded from the caller.
    unsafe { DataType::from_c(&DATATYPE_NAMES, ptr) }
}

/// # Safety
/// NULL or a C string.
#[inline(always)]
unsafe fn algo(ptr: *const c_char) -> Algo {
    // SAFETY: forwarded from the caller.
    unsafe { Algo::from_c(&ALGO_NAMES, ptr) }
}

/// # Safety
/// NULL or a C string.
#[inline(always)]
unsafe fn proto(ptr: *const c_char) -> Proto {
    // SAFETY: forwarded from the caller.
    unsafe { Proto::from_c(&PROTO_NAMES, ptr) }
}

fn proxy_op(op: &ProxyOpDescr) -> Event {
    Event::ProxyOp(ProxyOp {
        pid: op.pid,
        channel: op.channelId,
        peer: op.peer,
        n_steps: op.nSteps,
        chunk_size: op.chunkSize,
        is_send: op.isSend != 0,
    })
}

fn kernel_ch_v4(ch: &KernelChDescrV4) -> Event {
    Event::KernelCh {
        channel: ch.channelId,
        ptimer: Some(ch.pTimer),
    }
}

/// Decodes the built-in IB and socket payloads; anything else stays `Unknown`.
///
/// # Safety
/// `d.data` is NULL or points to the payload struct its id announces.
unsafe fn net_plugin(d: &NetPluginDescr) -> Event {
    let payload = if d.data.is_null() || d.id & net::VER_MASK != 1 {
        NetPayload::Unknown
    } else {
        match d.id & net::TYPE_MASK {
            net::TYPE_IB => {
                // SAFETY: non-NULL, and the id says it is an IB v1 payload.
                let ib = unsafe { &*(d.data as *const NetIbDescrV1) };
                if ib.type_ == net::IB_QP {
                    NetPayload::IbQp {
                        device: ib.qp.device,
                        wr_id: ib.qp.wr_id,
                        opcode: ib.qp.opcode,
                        qp_num: ib.qp.qpNum,
                        length: ib.qp.length as u64,
                    }
                } else {
                    NetPayload::Unknown
                }
            }
            net::TYPE_SOCK => {
                // SAFETY: non-NULL, and the id says it is a socket v1 payload.
                let sock = unsafe { &*(d.data as *const NetSockDescrV1) };
                if sock.type_ == net::SOCKET {
                    NetPayload::Socket {
                        fd: sock.sock.fd,
                        op: sock.sock.op,
                        length: sock.sock.length as u64,
                    }
                } else {
                    NetPayload::Unknown
                }
            }
            _ => NetPayload::Unknown,
        }
    };
    Event::NetPlugin(NetPlugin { id: d.id, payload })
}

/// The parts every descriptor shares: parent and rank sit at the same offsets.
macro_rules! common_fields {
    () => {
        fn parent(&self) -> u64 {
            ptr_value(self.parentObj)
        }
        fn rank(&self) -> i32 {
            self.rank
        }
        fn with_parent(&self, parent: u64) -> Self {
            let mut copy = *self;
            copy.parentObj = parent as usize as *mut std::ffi::c_void;
            copy
        }
    };
}

impl DecodeDescr for v1::ncclProfilerEventDescr_v1_t {
    const VERSION: u8 = 1;
    common_fields!();

    unsafe fn decode(&self, kind: Kind) -> Event {
        // SAFETY: all union reads: the caller guarantees the member of `kind` is set.
        unsafe {
            match kind {
                Kind::Coll => {
                    let c = &self.u.coll;
                    Event::Coll(Coll {
                        seq: c.seqNumber,
                        func: Func::from_v1(c.func),
                        count: c.count as u64,
                        root: c.root,
                        datatype: DataType::from_v1(c.datatype),
                        n_channels: c.nMaxChannels,
                        n_warps: c.nWarps,
                        algo: Algo::from_v1(c.algo),
                        proto: Proto::from_v1(c.proto),
                        parent_group: self.parent(),
                        comm_hash: c.commHash,
                        ..Coll::default()
                    })
                }
                Kind::P2p => {
                    let p = &self.u.p2p;
                    Event::P2p(P2p {
                        func: Func::from_v1(p.func),
                        count: p.count as u64,
                        datatype: DataType::from_v1(p.datatype),
                        peer: p.peer,
                        parent_group: self.parent(),
                        comm_hash: p.commHash,
                        ..P2p::default()
                    })
                }
                Kind::ProxyOp => proxy_op(&self.u.proxyOp),
                Kind::ProxyStep => Event::ProxyStep {
                    step: self.u.proxyStep.step,
                },
                Kind::ProxyCtrl => Event::ProxyCtrl,
                _ => Event::Group,
            }
        }
    }
}

/// v2 and v3 share the p2p member and differ in `coll` only by `trafficBytes`.
macro_rules! decode_v2_v3 {
    ($descr:ty, $version:literal, $extra:ident) => {
        impl DecodeDescr for $descr {
            const VERSION: u8 = $version;
            common_fields!();

            unsafe fn decode(&self, kind: Kind) -> Event {
                // SAFETY: all union reads and strings: guaranteed by the caller.
                unsafe {
                    match kind {
                        Kind::Coll => {
                            let c = &self.u.coll;
                            Event::Coll(Coll {
                                seq: c.seqNumber,
                                func: func(c.func),
                                count: c.count as u64,
                                root: c.root,
                                datatype: dtype(c.datatype),
                                n_channels: c.nMaxChannels,
                                n_warps: c.nWarps,
                                algo: algo(c.algo),
                                proto: proto(c.proto),
                                parent_group: self.parent(),
                                comm_hash: c.commHash,
                                ..Coll::default()
                            })
                        }
                        Kind::P2p => {
                            let p = &self.u.p2p;
                            Event::P2p(P2p {
                                func: func(p.func),
                                count: p.count as u64,
                                datatype: dtype(p.datatype),
                                peer: p.peer,
                                parent_group: self.parent(),
                                comm_hash: p.commHash,
                                ..P2p::default()
                            })
                        }
                        Kind::ProxyOp => proxy_op(&self.u.proxyOp),
                        Kind::ProxyStep => Event::ProxyStep {
                            step: self.u.proxyStep.step,
                        },
                        Kind::ProxyCtrl => Event::ProxyCtrl,
                        other => $extra(self, other),
                    }
                }
            }
        }
    };
}

fn no_extra_v2(_: &v2::ncclProfilerEventDescr_v2_t, _: Kind) -> Event {
    Event::Group
}

/// # Safety
/// As for [`DecodeDescr::decode`].
unsafe fn extra_v3(d: &v3::ncclProfilerEventDescr_v3_t, kind: Kind) -> Event {
    // SAFETY: guaranteed by the caller.
    unsafe {
        match kind {
            Kind::KernelCh => Event::KernelCh {
                channel: d.u.kernelCh.channelId,
                ptimer: None,
            },
            Kind::NetPlugin => net_plugin(&d.u.netPlugin),
            _ => Event::Group,
        }
    }
}

decode_v2_v3!(v2::ncclProfilerEventDescr_v2_t, 2, no_extra_v2);
decode_v2_v3!(v3::ncclProfilerEventDescr_v3_t, 3, extra_v3);

impl DecodeDescr for v4::ncclProfilerEventDescr_v4_t {
    const VERSION: u8 = 4;
    common_fields!();

    unsafe fn decode(&self, kind: Kind) -> Event {
        // SAFETY: all union reads and strings: guaranteed by the caller.
        unsafe {
            match kind {
                Kind::Coll => {
                    let c = &self.u.coll;
                    Event::Coll(Coll {
                        seq: c.seqNumber,
                        func: func(c.func),
                        count: c.count as u64,
                        root: c.root,
                        datatype: dtype(c.datatype),
                        n_channels: c.nChannels,
                        n_warps: c.nWarps,
                        algo: algo(c.algo),
                        proto: proto(c.proto),
                        parent_group: self.parent(),
                        ..Coll::default()
                    })
                }
                Kind::P2p => {
                    let p = &self.u.p2p;
                    Event::P2p(P2p {
                        func: func(p.func),
                        count: p.count as u64,
                        datatype: dtype(p.datatype),
                        peer: p.peer,
                        // NCCL's v4 shim never copies p2p.nChannels: it is garbage on
                        // 2.28+, and only 2.27 (v4 direct) fills it. Trust it not at all.
                        n_channels: None,
                        parent_group: self.parent(),
                        ..P2p::default()
                    })
                }
                Kind::ProxyOp => proxy_op(&self.u.proxyOp),
                Kind::ProxyStep => Event::ProxyStep {
                    step: self.u.proxyStep.step,
                },
                Kind::ProxyCtrl => Event::ProxyCtrl,
                Kind::KernelCh => kernel_ch_v4(&self.u.kernelCh),
                Kind::NetPlugin => net_plugin(&self.u.netPlugin),
                _ => Event::Group,
            }
        }
    }
}

/// v5, v6 and v7 share every member up to the fields v7 adds; `$tag` reads the userTag of
/// a member (0 before v7) and `$extra` decodes what only that version knows.
macro_rules! decode_v5_family {
    ($descr:ty, $version:literal, tag: $tag:ident, coll_extra: $coll_extra:ident, extra: $extra:ident) => {
        impl DecodeDescr for $descr {
            const VERSION: u8 = $version;
            common_fields!();

            unsafe fn decode(&self, kind: Kind) -> Event {
                // SAFETY: all union reads and strings: guaranteed by the caller.
                unsafe {
                    match kind {
                        Kind::GroupApi => Event::GroupApi {
                            graph_captured: self.u.groupApi.graphCaptured.get(),
                            depth: self.u.groupApi.groupDepth,
                        },
                        Kind::CollApi => {
                            let c = &self.u.collApi;
                            Event::CollApi(CollApi {
                                func: func(c.func),
                                count: c.count as u64,
                                datatype: dtype(c.datatype),
                                root: c.root,
                                graph_captured: c.graphCaptured.get(),
                                user_tag: $tag!(c),
                            })
                        }
                        Kind::P2pApi => {
                            let p = &self.u.p2pApi;
                            Event::P2pApi(P2pApi {
                                func: func(p.func),
                                count: p.count as u64,
                                datatype: dtype(p.datatype),
                                graph_captured: p.graphCaptured.get(),
                                user_tag: $tag!(p),
                            })
                        }
                        Kind::KernelLaunch => Event::KernelLaunch,
                        Kind::Group => Event::Group,
                        Kind::Coll => {
                            let c = &self.u.coll;
                            let coll = Coll {
                                seq: c.seqNumber,
                                func: func(c.func),
                                count: c.count as u64,
                                root: c.root,
                                datatype: dtype(c.datatype),
                                n_channels: c.nChannels,
                                n_warps: c.nWarps,
                                algo: algo(c.algo),
                                proto: proto(c.proto),
                                parent_group: ptr_value(c.parentGroup),
                                ..Coll::default()
                            };
                            Event::Coll($coll_extra!(c, coll))
                        }
                        Kind::P2p => {
                            let p = &self.u.p2p;
                            Event::P2p(P2p {
                                func: func(p.func),
                                count: p.count as u64,
                                datatype: dtype(p.datatype),
                                peer: p.peer,
                                n_channels: Some(p.nChannels),
                                parent_group: ptr_value(p.parentGroup),
                                user_tag: $tag!(p),
                                ..P2p::default()
                            })
                        }
                        Kind::ProxyOp => proxy_op(&self.u.proxyOp),
                        Kind::ProxyStep => Event::ProxyStep {
                            step: self.u.proxyStep.step,
                        },
                        Kind::ProxyCtrl => Event::ProxyCtrl,
                        Kind::KernelCh => kernel_ch_v4(&self.u.kernelCh),
                        Kind::NetPlugin => net_plugin(&self.u.netPlugin),
                        other => $extra(self, other),
                    }
                }
            }
        }
    };
}

macro_rules! no_tag {
    ($m:expr) => {
        0
    };
}
macro_rules! user_tag {
    ($m:expr) => {
        $m.userTag
    };
}
macro_rules! no_coll_extra {
    ($c:expr, $coll:ident) => {
        $coll
    };
}
macro_rules! coll_extra_v7 {
    ($c:expr, $coll:ident) => {
        Coll {
            is_sym_coll: $c.isSymColl.get(),
            user_tag: $c.userTag,
            ..$coll
        }
    };
}

fn no_extra_v5(_: &v5::ncclProfilerEventDescr_v5_t, _: Kind) -> Event {
    Event::Group
}

/// The copy-engine members, identical in v6 and v7 but for `userTag`.
macro_rules! ce_event {
    ($d:expr, $kind:expr, $tag:ident) => {
        match $kind {
            Kind::CeColl => {
                let c = &$d.u.ceColl;
                Event::CeColl(CeColl {
                    seq: c.seqNumber,
                    func: func(c.func),
                    count: c.count as u64,
                    root: c.root,
                    datatype: dtype(c.datatype),
                    intra_batch_sync: c.intraBatchSync.get(),
                    batch_size: c.batchSize,
                    num_batches: c.numBatches,
                    ce_seq: c.ceSeqNum,
                    user_tag: $tag!(c),
                })
            }
            Kind::CeSync => Event::CeSync {
                is_complete: $d.u.ceCollSync.isComplete.get(),
                n_ranks: $d.u.ceCollSync.nRanks,
            },
            Kind::CeBatch => Event::CeBatch {
                num_ops: $d.u.ceCollBatch.numOps,
                total_bytes: $d.u.ceCollBatch.totalBytes as u64,
                use_intra_sync: $d.u.ceCollBatch.useIntraSync.get(),
            },
            _ => Event::Group,
        }
    };
}

/// # Safety
/// As for [`DecodeDescr::decode`].
unsafe fn extra_v6(d: &v6::ncclProfilerEventDescr_v6_t, kind: Kind) -> Event {
    // SAFETY: guaranteed by the caller.
    unsafe { ce_event!(d, kind, no_tag) }
}

/// # Safety
/// As for [`DecodeDescr::decode`].
unsafe fn extra_v7(d: &v7::ncclProfilerEventDescr_v7_t, kind: Kind) -> Event {
    // SAFETY: guaranteed by the caller.
    unsafe {
        if kind == Kind::KernelPhase {
            let p = &d.u.kernelPhase;
            return Event::KernelPhase {
                channel: p.channelId,
                phase: Phase::from_id(p.phaseId),
                ptimer: p.pTimer,
            };
        }
        ce_event!(d, kind, user_tag)
    }
}

decode_v5_family!(v5::ncclProfilerEventDescr_v5_t, 5, tag: no_tag, coll_extra: no_coll_extra, extra: no_extra_v5);
decode_v5_family!(v6::ncclProfilerEventDescr_v6_t, 6, tag: no_tag, coll_extra: no_coll_extra, extra: extra_v6);
decode_v5_family!(v7::ncclProfilerEventDescr_v7_t, 7, tag: user_tag, coll_extra: coll_extra_v7, extra: extra_v7);

impl DecodeArgs for StateArgsV1 {
    unsafe fn decode(args: *const Self, state: i32) -> StateArg {
        if args.is_null() {
            return StateArg::None;
        }
        // SAFETY: non-NULL and points to v1–v3 arguments (caller); the member read is
        // the one the state's meaning names.
        unsafe {
            match StateArgMemberV1::of(state) {
                Some(StateArgMemberV1::ProxyOp) => StateArg::Progress {
                    trans_size: (*args).proxyOp.transSize as u64,
                    steps: (*args).proxyOp.steps,
                },
                Some(StateArgMemberV1::ProxyCtrl) => {
                    StateArg::Appended((*args).proxyCtrl.appendedProxyOps)
                }
                None => StateArg::None,
            }
        }
    }
}

impl DecodeArgs for StateArgsV4 {
    unsafe fn decode(args: *const Self, state: i32) -> StateArg {
        if args.is_null() {
            return StateArg::None;
        }
        // SAFETY: non-NULL and points to v4+ arguments (caller); the member read is the
        // one the state's meaning names (none for states 19, 23 and 24, which come with
        // uninitialised arguments).
        unsafe {
            match StateArgMemberV4::of(state) {
                Some(StateArgMemberV4::TransSize) => StateArg::TransSize((*args).transSize as u64),
                Some(StateArgMemberV4::AppendedProxyOps) => {
                    StateArg::Appended((*args).appendedProxyOps)
                }
                Some(StateArgMemberV4::NetPluginData) => {
                    StateArg::NetData(ptr_value((*args).netPluginData))
                }
                Some(StateArgMemberV4::KernelChPTimer) => StateArg::PTimer((*args).kernelChPTimer),
                None => StateArg::None,
            }
        }
    }
}

/// NCCL's name of a state value, for the event log.
pub fn state_name(value: i32) -> &'static str {
    const NAMES: [&str; 32] = [
        "ProxyOpSendPosted",
        "ProxyOpSendRemFifoWait",
        "ProxyOpSendTransmitted",
        "ProxyOpSendDone",
        "ProxyOpRecvPosted",
        "ProxyOpRecvReceived",
        "ProxyOpRecvTransmitted",
        "ProxyOpRecvDone",
        "ProxyStepSendGPUWait",
        "ProxyStepSendWait",
        "ProxyStepRecvWait",
        "ProxyStepRecvFlushWait",
        "ProxyStepRecvGPUWait",
        "ProxyCtrlIdle",
        "ProxyCtrlActive",
        "ProxyCtrlSleep",
        "ProxyCtrlWakeup",
        "ProxyCtrlAppend",
        "ProxyCtrlAppendEnd",
        "ProxyOpInProgress",
        "ProxyStepSendPeerWait",
        "NetPluginUpdate",
        "KernelChStop",
        "GroupStartApiStop",
        "GroupEndApiStart",
        "CeCollStart",
        "CeCollComplete",
        "CeSyncStart",
        "CeSyncComplete",
        "CeBatchStart",
        "CeBatchComplete",
        "KernelPhaseStop",
    ];
    usize::try_from(value)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("Unknown")
}

#[cfg(test)]
mod tests {
    use super::*;
    use nccl_profiler_abi::fields::{self, Span, MAX_DESCR_BYTES, UNION_OFFSET};

    /// Descriptor bytes, aligned for any version's descriptor.
    #[repr(C, align(8))]
    struct Bytes([u8; MAX_DESCR_BYTES]);

    fn keep(from: &Bytes, to: &mut Bytes, base: usize, spans: &[Span]) {
        for field in spans {
            let at = base + field.offset..base + field.offset + field.len;
            to.0[at.clone()].copy_from_slice(&from.0[at]);
        }
    }

    /// Every byte the plugin's decoding reads is one a recording keeps: each kind of the
    /// version decodes the same from a caller's bytes (a left-over byte everywhere but the
    /// type) and from its fields alone (zeros between them).
    fn decodes_the_same_from_its_fields_alone<D: DecodeDescr>() {
        let version = D::VERSION;
        let type_bytes = if version <= 4 { 1 } else { 8 };
        for kind in (0..16).filter_map(|bit| Kind::decode_type_in(D::KINDS, 1 << bit)) {
            let mut caller = Bytes([0x5a; MAX_DESCR_BYTES]);
            caller.0[..type_bytes].copy_from_slice(&kind.bit().to_le_bytes()[..type_bytes]);
            let mut fields_only = Bytes([0; MAX_DESCR_BYTES]);
            keep(&caller, &mut fields_only, 0, fields::header_spans(version));
            let member = fields::member_spans(version, kind.bit());
            keep(&caller, &mut fields_only, UNION_OFFSET, member);
            // SAFETY: both buffers are as large and as aligned as the descriptor, and every
            // bit pattern is a valid one (integers, pointers, byte-sized booleans); the
            // pointers lead nowhere readable, which decoding checks before reading.
            let (from_caller, from_fields) = unsafe {
                (
                    caller.0.as_ptr().cast::<D>().read().decode(kind),
                    fields_only.0.as_ptr().cast::<D>().read().decode(kind),
                )
            };
            assert_eq!(from_caller, from_fields, "v{version} {kind:?}");
        }
    }

    #[test]
    fn a_recording_keeps_every_byte_decoding_reads() {
        decodes_the_same_from_its_fields_alone::<v1::ncclProfilerEventDescr_v1_t>();
        decodes_the_same_from_its_fields_alone::<v2::ncclProfilerEventDescr_v2_t>();
        decodes_the_same_from_its_fields_alone::<v3::ncclProfilerEventDescr_v3_t>();
        decodes_the_same_from_its_fields_alone::<v4::ncclProfilerEventDescr_v4_t>();
        decodes_the_same_from_its_fields_alone::<v5::ncclProfilerEventDescr_v5_t>();
        decodes_the_same_from_its_fields_alone::<v6::ncclProfilerEventDescr_v6_t>();
        decodes_the_same_from_its_fields_alone::<v7::ncclProfilerEventDescr_v7_t>();
    }
}
