//! nccl-sim: a CPU-only stand-in for NCCL that loads profiler plugins the way NCCL does and
//! calls them in NCCL's own order, thread by thread, for every release from 2.23 to 2.32.
//!
//! - [`loader`]: which library NCCL opens (shared with `nccl-scorep doctor`);
//! - [`release`]: what differs between NCCL releases;
//! - [`profiler`]: loading, reference counting, the activation mask, and the version
//!   adapters that imitate NCCL's in-core shims;
//! - [`event`], [`names`]: events as NCCL's core describes them;
//! - [`logger`]: the C-variadic logger plugins receive.

pub mod bench;
pub mod event;
pub mod job;
pub mod loader;
pub mod logger;
pub mod names;
pub mod nccl;
pub mod profiler;
pub mod pxn;
pub mod release;
pub mod scenario;
pub mod time;
