//! Profiler API v2 (NCCL 2.24–2.25): strings replace the enums; `op`, `isCollnet` and
//! `isNvls` are gone.

#![allow(non_camel_case_types, non_snake_case)]

use super::{Descriptor, InitV1, ProfilerTable, ProxyOpDescr, ProxyStepDescr, StateArgsV1};
use std::ffi::{c_char, c_int, c_void};

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct CollV2 {
        pub name: *const c_char,
        pub commHash: u64,
        pub seqNumber: u64,
        pub func: *const c_char,
        pub sendBuff: *const c_void,
        pub recvBuff: *mut c_void,
        pub count: usize,
        pub root: c_int,
        pub datatype: *const c_char,
        pub trafficBytes: usize,
        pub nMaxChannels: u8,
        pub nWarps: u8,
        pub algo: *const c_char,
        pub proto: *const c_char,
    }
}

c_struct! {
    /// `p2p` of v2 and v3.
    #[derive(Clone, Copy, Debug)]
    pub struct P2pV2 {
        pub name: *const c_char,
        pub commHash: u64,
        pub func: *const c_char,
        pub buff: *mut c_void,
        pub datatype: *const c_char,
        pub count: usize,
        pub peer: c_int,
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union UnionV2 {
    pub coll: CollV2,
    pub p2p: P2pV2,
    pub proxyOp: ProxyOpDescr,
    pub proxyStep: ProxyStepDescr,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclProfilerEventDescr_v2_t {
    pub type_: u8,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: UnionV2,
}

impl Descriptor for ncclProfilerEventDescr_v2_t {
    fn event_type(&self) -> u64 {
        u64::from(self.type_)
    }
}

pub type ncclProfilerEventStateArgs_v2_t = StateArgsV1;
pub type ncclProfiler_v2_t = ProfilerTable<InitV1, ncclProfilerEventDescr_v2_t, StateArgsV1>;
