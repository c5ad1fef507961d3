//! Profiler API v4 (NCCL 2.27): comm identity moves to `init`; `nChannels`; KernelCh
//! carries the GPU start timestamp; 8-byte state arguments.

#![allow(non_camel_case_types, non_snake_case)]

use super::{
    Descriptor, InitV4, KernelChDescrV4, NetPluginDescr, ProfilerTable, ProxyOpDescr,
    ProxyStepDescr, StateArgsV4,
};
use std::ffi::{c_char, c_int, c_void};

c_struct! {
    /// `coll` of v4 (also v5–v7 up to `proto`).
    #[derive(Clone, Copy, Debug)]
    pub struct CollV4 {
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
    }
}

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct P2pV4 {
        pub func: *const c_char,
        pub buff: *mut c_void,
        pub datatype: *const c_char,
        pub count: usize,
        pub peer: c_int,
        pub nChannels: u8,
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union UnionV4 {
    pub coll: CollV4,
    pub p2p: P2pV4,
    pub proxyOp: ProxyOpDescr,
    pub proxyStep: ProxyStepDescr,
    pub kernelCh: KernelChDescrV4,
    pub netPlugin: NetPluginDescr,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclProfilerEventDescr_v4_t {
    pub type_: u8,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: UnionV4,
}

impl Descriptor for ncclProfilerEventDescr_v4_t {
    fn event_type(&self) -> u64 {
        u64::from(self.type_)
    }
}

pub type ncclProfilerEventStateArgs_v4_t = StateArgsV4;
pub type ncclProfiler_v4_t = ProfilerTable<InitV4, ncclProfilerEventDescr_v4_t, StateArgsV4>;
