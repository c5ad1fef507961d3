//! nccl-scorep: an NCCL profiler plugin (API v1–v7, NCCL 2.23–2.32) that turns NCCL's
//! communication events into Score-P and OTF2 traces.
//!
//! NCCL loads the cdylib and calls the `ncclProfiler_vN` tables in [`ffi`]; the rlib
//! shares the ABI types and the decoders with the command-line tool and the tests.

pub mod clock;
pub mod collector;
pub mod config;
pub mod context;
pub mod core;
pub mod counters;
pub mod decode;
pub mod event;
pub mod ffi;
pub mod gpu_clock;
pub mod handle;
pub mod job_end;
pub mod log;
pub mod ring;
pub mod sink;
