//! nccl-scorep: an NCCL profiler plugin (API v1–v7, NCCL 2.23–2.32) that turns NCCL's
//! communication events into Score-P and OTF2 traces.
//!
//! NCCL loads the cdylib and calls the `ncclProfiler_vN` tables in [`ffi`]; each callback
//! runs through [`boundary`] into [`hot_path`] (or [`runtime`] for `init`/`finalize`),
//! which pushes a record into the calling thread's ring. The [`collector`] thread turns
//! records into finished events ([`model`]) and hands them to the [`sink`]s. What is true
//! of each kind of event is in [`kinds`]; the state all of these share is in [`shared`].
//! The rlib serves the plugin's own tests and benchmarks.

pub mod boundary;
pub mod c_string;
pub mod chain;
pub mod clock;
pub mod collector;
pub mod config;
pub mod context;
pub mod counters;
pub mod decode;
pub mod event;
pub mod ffi;
pub mod gpu_clock;
pub mod gpu_sanity;
pub mod handle;
pub mod hot_path;
pub mod job_end;
pub mod kinds;
pub mod log;
pub mod memory;
pub mod model;
pub mod name_cache;
pub mod open_table;
pub mod provenance;
pub mod record;
pub mod ring;
pub mod runtime;
pub mod scorep_mode;
pub mod shared;
pub mod sink;
#[cfg(test)]
mod test_random;
