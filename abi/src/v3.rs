//! Profiler API v3 (NCCL 2.26): `trafficBytes` removed; KernelCh and NetPlugin events.

#![allow(non_camel_case_types, non_snake_case)]

use super::v2::P2pV2;
use super::{
    Descriptor, InitV1, KernelChDescrV3, NetPluginDescr, ProfilerTable, ProxyOpDescr,
    ProxyStepDescr, StateArgsV1,
};
use std::ffi::{c_char, c_int, c_void};

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct CollV3 {
        pub name: *const c_char,
        pub commHash: u64,
        pub seqNumber: u64,
        pub func: *const c_char,
        pub sendBuff: *const c_void,
        pub recvBuff: *mut c_void,
        pub count: usize,
        pub root: c_int,
        pub datatype: *const c_char,
        pub nMaxChannels: u8,
        pub nWarps: u8,
        pub algo: *const c_char,
        pub proto: *const c_char,
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union UnionV3 {
    pub coll: CollV3,
    pub p2p: P2pV2,
    pub proxyOp: ProxyOpDescr,
    pub proxyStep: ProxyStepDescr,
    pub kernelCh: KernelChDescrV3,
    pub netPlugin: NetPluginDescr,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclProfilerEventDescr_v3_t {
    pub type_: u8,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: UnionV3,
}

impl Descriptor for ncclProfilerEventDescr_v3_t {
    fn event_type(&self) -> u64 {
        u64::from(self.type_)
    }
}

pub type ncclProfilerEventStateArgs_v3_t = StateArgsV1;
pub type ncclProfiler_v3_t = ProfilerTable<InitV1, ncclProfilerEventDescr_v3_t, StateArgsV1>;
