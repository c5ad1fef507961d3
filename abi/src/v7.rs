//! Profiler API v7 (NCCL 2.31–2.32): `userTag` on API, task and CE events,
//! `coll.kernelVariant`/`isSymColl`, and the KernelPhase event.

#![allow(non_camel_case_types, non_snake_case)]

use super::v5::{GroupApiV5, KernelLaunchV5};
use super::v6::{CeBatchV6, CeSyncV6};
use super::{
    Descriptor, InitV5, KernelChDescrV4, NetPluginDescr, ProfilerTable, ProxyOpDescr,
    ProxyStepDescr, StateArgsV4,
};
use crate::CBool;
use std::ffi::{c_char, c_int, c_void};

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct CollApiV7 {
        pub func: *const c_char,
        pub count: usize,
        pub datatype: *const c_char,
        pub root: c_int,
        pub stream: *mut c_void,
        pub graphCaptured: CBool,
        pub userTag: u64,
    }
}

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct P2pApiV7 {
        pub func: *const c_char,
        pub count: usize,
        pub datatype: *const c_char,
        pub stream: *mut c_void,
        pub graphCaptured: CBool,
        pub userTag: u64,
    }
}

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct CollV7 {
        pub seqNumber: u64,
        pub func: *const c_char,
        pub sendBuff: *const c_void,
        pub recvBuff: *mut c_void,
        pub count: usize,
        pub root: c_int,
        pub datatype: *const c_char,
        pub nChannels: u8,
        pub nWarps: u8,
        pub algo: *const c_char,
        pub proto: *const c_char,
        pub parentGroup: *mut c_void,
        pub kernelVariant: *const c_char,
        pub isSymColl: CBool,
        pub userTag: u64,
    }
}

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct P2pV7 {
        pub func: *const c_char,
        pub buff: *mut c_void,
        pub datatype: *const c_char,
        pub count: usize,
        pub peer: c_int,
        pub nChannels: u8,
        pub parentGroup: *mut c_void,
        pub userTag: u64,
    }
}

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct CeCollV7 {
        pub seqNumber: u64,
        pub func: *const c_char,
        pub sendBuff: *const c_void,
        pub recvBuff: *mut c_void,
        pub count: usize,
        pub root: c_int,
        pub datatype: *const c_char,
        pub syncStrategy: *const c_char,
        pub intraBatchSync: CBool,
        pub batchSize: u32,
        pub numBatches: u32,
        pub ceSeqNum: u32,
        pub stream: *mut c_void,
        pub userTag: u64,
    }
}

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct KernelPhaseV7 {
        pub channelId: u8,
        pub phaseId: u8,
        pub phaseName: *const c_char,
        pub pTimer: u64,
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union UnionV7 {
    pub groupApi: GroupApiV5,
    pub collApi: CollApiV7,
    pub p2pApi: P2pApiV7,
    pub kernelLaunch: KernelLaunchV5,
    pub coll: CollV7,
    pub p2p: P2pV7,
    pub proxyOp: ProxyOpDescr,
    pub proxyStep: ProxyStepDescr,
    pub kernelCh: KernelChDescrV4,
    pub netPlugin: NetPluginDescr,
    pub ceColl: CeCollV7,
    pub ceCollSync: CeSyncV6,
    pub ceCollBatch: CeBatchV6,
    pub kernelPhase: KernelPhaseV7,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclProfilerEventDescr_v7_t {
    pub type_: u64,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: UnionV7,
}

impl Descriptor for ncclProfilerEventDescr_v7_t {
    fn event_type(&self) -> u64 {
        self.type_
    }
}

pub type ncclProfilerEventStateArgs_v7_t = StateArgsV4;
pub type ncclProfiler_v7_t = ProfilerTable<InitV5, ncclProfilerEventDescr_v7_t, StateArgsV4>;
