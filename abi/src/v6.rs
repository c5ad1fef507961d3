//! Profiler API v6 (NCCL 2.29–2.30): v5 plus the copy-engine events CeColl, CeSync and
//! CeBatch. Layout-compatible with v5 for every v5 member.

#![allow(non_camel_case_types, non_snake_case)]

use super::v5::{CollApiV5, CollV5, GroupApiV5, KernelLaunchV5, P2pApiV5, P2pV5};
use super::{
    Descriptor, InitV5, KernelChDescrV4, NetPluginDescr, ProfilerTable, ProxyOpDescr,
    ProxyStepDescr, StateArgsV4,
};
use crate::CBool;
use std::ffi::{c_char, c_int, c_void};

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct CeCollV6 {
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
    }
}

c_struct! {
    /// `ceCollSync` (v6, v7).
    #[derive(Clone, Copy, Debug)]
    pub struct CeSyncV6 {
        pub isComplete: CBool,
        pub nRanks: c_int,
    }
}

c_struct! {
    /// `ceCollBatch` (v6, v7).
    #[derive(Clone, Copy, Debug)]
    pub struct CeBatchV6 {
        pub numOps: c_int,
        pub totalBytes: usize,
        pub useIntraSync: CBool,
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union UnionV6 {
    pub groupApi: GroupApiV5,
    pub collApi: CollApiV5,
    pub p2pApi: P2pApiV5,
    pub kernelLaunch: KernelLaunchV5,
    pub coll: CollV5,
    pub p2p: P2pV5,
    pub proxyOp: ProxyOpDescr,
    pub proxyStep: ProxyStepDescr,
    pub kernelCh: KernelChDescrV4,
    pub netPlugin: NetPluginDescr,
    pub ceColl: CeCollV6,
    pub ceCollSync: CeSyncV6,
    pub ceCollBatch: CeBatchV6,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclProfilerEventDescr_v6_t {
    pub type_: u64,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: UnionV6,
}

impl Descriptor for ncclProfilerEventDescr_v6_t {
    fn event_type(&self) -> u64 {
        self.type_
    }
}

pub type ncclProfilerEventStateArgs_v6_t = StateArgsV4;
pub type ncclProfiler_v6_t = ProfilerTable<InitV5, ncclProfilerEventDescr_v6_t, StateArgsV4>;
