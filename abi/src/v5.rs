//! Profiler API v5 (NCCL 2.28): `type` widens to u64; `init(ctx, commId, mask, …)`;
//! GroupApi/CollApi/P2pApi/KernelLaunch events; Coll/P2p `parentObj` is the API event and
//! the old Group handle moves to `parentGroup`.

#![allow(non_camel_case_types, non_snake_case)]

use super::{
    Descriptor, InitV5, KernelChDescrV4, NetPluginDescr, ProfilerTable, ProxyOpDescr,
    ProxyStepDescr, StateArgsV4,
};
use crate::CBool;
use std::ffi::{c_char, c_int, c_void};

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct GroupApiV5 {
        pub graphCaptured: CBool,
        pub groupDepth: c_int,
    }
}

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct CollApiV5 {
        pub func: *const c_char,
        pub count: usize,
        pub datatype: *const c_char,
        pub root: c_int,
        pub stream: *mut c_void,
        pub graphCaptured: CBool,
    }
}

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct P2pApiV5 {
        pub func: *const c_char,
        pub count: usize,
        pub datatype: *const c_char,
        pub stream: *mut c_void,
        pub graphCaptured: CBool,
    }
}

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct KernelLaunchV5 {
        pub stream: *mut c_void,
    }
}

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct CollV5 {
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
    }
}

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct P2pV5 {
        pub func: *const c_char,
        pub buff: *mut c_void,
        pub datatype: *const c_char,
        pub count: usize,
        pub peer: c_int,
        pub nChannels: u8,
        pub parentGroup: *mut c_void,
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union UnionV5 {
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
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclProfilerEventDescr_v5_t {
    pub type_: u64,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: UnionV5,
}

impl Descriptor for ncclProfilerEventDescr_v5_t {
    fn event_type(&self) -> u64 {
        self.type_
    }
}

pub type ncclProfilerEventStateArgs_v5_t = StateArgsV4;
pub type ncclProfiler_v5_t = ProfilerTable<InitV5, ncclProfilerEventDescr_v5_t, StateArgsV4>;
