//! Profiler API v1 (NCCL 2.23): enum-typed fields, `init(ctx, mask)`.

#![allow(non_camel_case_types, non_snake_case)]

use super::{Descriptor, InitV1, ProfilerTable, ProxyOpDescr, ProxyStepDescr, StateArgsV1};
use std::ffi::{c_char, c_int, c_void};

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct CollV1 {
        pub name: *const c_char,
        pub commHash: u64,
        pub seqNumber: u64,
        pub func: u8,
        pub sendBuff: *const c_void,
        pub recvBuff: *mut c_void,
        pub count: usize,
        pub root: c_int,
        pub datatype: u8,
        pub op: u32,
        pub trafficBytes: usize,
        pub nMaxChannels: u8,
        pub nWarps: u8,
        pub algo: u8,
        pub proto: u8,
        pub isCollnet: c_int,
        pub isNvls: c_int,
    }
}

c_struct! {
    #[derive(Clone, Copy, Debug)]
    pub struct P2pV1 {
        pub name: *const c_char,
        pub commHash: u64,
        pub func: u8,
        pub buff: *mut c_void,
        pub datatype: u8,
        pub count: usize,
        pub peer: c_int,
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union UnionV1 {
    pub coll: CollV1,
    pub p2p: P2pV1,
    pub proxyOp: ProxyOpDescr,
    pub proxyStep: ProxyStepDescr,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ncclProfilerEventDescr_v1_t {
    pub type_: u8,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: UnionV1,
}

impl Descriptor for ncclProfilerEventDescr_v1_t {
    fn event_type(&self) -> u64 {
        u64::from(self.type_)
    }
}

pub type ncclProfilerEventStateArgs_v1_t = StateArgsV1;
pub type ncclProfiler_v1_t = ProfilerTable<InitV1, ncclProfilerEventDescr_v1_t, StateArgsV1>;
