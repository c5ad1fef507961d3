//! The exported symbols `ncclProfiler_v1` … `ncclProfiler_v7`.
//!
//! One table per version, all built by one macro from the same five handlers; only the
//! `init` adapter differs (its arguments change order at v4 and v5). Every entry point
//! runs inside [`boundary`], which catches panics and always answers `ncclSuccess`:
//! NCCL ignores the result of every call but `init`, and its handling of a failed `init`
//! is unsafe in several releases.

use crate::context::ContextInfo;
use crate::decode::{DecodeArgs, DecodeDescr};
use crate::runtime::{self, InitArgs};
use crate::{clock, hot_path, record, scorep_mode};
use nccl_profiler_abi::{
    self as abi, ncclDebugLogger_t, ncclProfilerEventState_t, ncclResult_t, ProfilerTable,
    NCCL_SUCCESS,
};
use std::ffi::{c_char, c_int, c_void, CStr};

/// Runs one entry point through [`crate::boundary::guarded`]: whatever happens, NCCL
/// gets `ncclSuccess`.
#[inline(always)]
fn boundary(body: impl FnOnce()) -> ncclResult_t {
    crate::boundary::guarded(|| {
        body();
        NCCL_SUCCESS
    })
}

/// The name NCCL prints when it loads us.
const PLUGIN_NAME: &CStr = c"nccl-scorep";

unsafe extern "C" fn start_event<D: DecodeDescr>(
    context: *mut c_void,
    handle_out: *mut *mut c_void,
    descr: *mut D,
) -> ncclResult_t {
    // SAFETY: NCCL passes a writable handle slot and a descriptor of the version whose
    // table it called (both checked for NULL inside).
    boundary(|| unsafe {
        if !record::active() {
            hot_path::start_event::<D>(context, handle_out, descr, hot_path::Clock);
            return;
        }
        if record::alone() {
            let time = clock::ticks();
            let size = size_of::<D>();
            let waited =
                record::started_alone(D::VERSION, size, context, handle_out, descr.cast(), time);
            runtime::held_back_by_recording(waited);
            return;
        }
        // Record mode files the call with the time our trace gives it.
        let time = hot_path::Stamped(clock::ticks());
        hot_path::start_event::<D>(context, handle_out, descr, time);
        let waited = record::started(
            D::VERSION,
            size_of::<D>(),
            context,
            handle_out,
            descr.cast(),
            time.0,
        );
        runtime::held_back_by_recording(waited);
    })
}

unsafe extern "C" fn stop_event(handle: *mut c_void) -> ncclResult_t {
    boundary(|| {
        if !record::active() {
            hot_path::stop_event(handle, hot_path::Clock);
            return;
        }
        let time = hot_path::Stamped(clock::ticks());
        if !record::alone() {
            hot_path::stop_event(handle, time);
        }
        runtime::held_back_by_recording(record::stopped(handle, time.0));
    })
}

unsafe extern "C" fn record_event_state<A: DecodeArgs>(
    handle: *mut c_void,
    state: ncclProfilerEventState_t,
    args: *mut A,
) -> ncclResult_t {
    // SAFETY: NCCL passes NULL or the state arguments of the version whose table it called.
    boundary(|| unsafe {
        if !record::active() {
            hot_path::record_state::<A>(handle, state, args, hot_path::Clock);
            return;
        }
        let time = hot_path::Stamped(clock::ticks());
        if !record::alone() {
            hot_path::record_state::<A>(handle, state, args, time);
        }
        let fields = A::spans_for(state);
        let waited = record::state(handle, state, size_of::<A>(), fields, args.cast(), time.0);
        runtime::held_back_by_recording(waited);
    })
}

unsafe extern "C" fn finalize(context: *mut c_void) -> ncclResult_t {
    boundary(|| {
        record::finalized(context);
        runtime::finalize(context);
    })
}

/// Copies a communicator name NCCL passed (NULL allowed).
///
/// # Safety
/// NULL or a C string.
unsafe fn comm_name(name: *const c_char) -> Option<String> {
    // SAFETY: forwarded from the caller; a name that is unreadable or has no NUL within
    // the bound is no name.
    unsafe { crate::c_string::bounded(name, crate::c_string::MAX_COMM_NAME) }
        .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
}

/// v1–v3: no communicator information at all.
unsafe extern "C" fn init_v1<const VERSION: u8>(
    context: *mut *mut c_void,
    mask: *mut c_int,
) -> ncclResult_t {
    let info = ContextInfo {
        n_nodes: -1,
        n_ranks: -1,
        rank: -1,
        version: VERSION,
        ..ContextInfo::default()
    };
    // SAFETY: NCCL passes writable context and mask pointers (checked for NULL inside).
    boundary(|| unsafe { runtime::init(context, mask, InitArgs { info, logger: None }) })
}

/// v4: `(context, mask, commName, commHash, nNodes, nranks, rank, logfn)`.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn init_v4(
    context: *mut *mut c_void,
    mask: *mut c_int,
    name: *const c_char,
    comm_hash: u64,
    n_nodes: c_int,
    n_ranks: c_int,
    rank: c_int,
    logger: ncclDebugLogger_t,
) -> ncclResult_t {
    boundary(|| {
        let info = ContextInfo {
            comm_hash,
            // SAFETY: NULL or NCCL's comm name.
            comm_name: unsafe { comm_name(name) },
            n_nodes,
            n_ranks,
            rank,
            version: 4,
        };
        // SAFETY: as for v1.
        unsafe { runtime::init(context, mask, InitArgs { info, logger }) }
    })
}

/// v5–v7: `(context, commId, mask, commName, nNodes, nranks, rank, logfn)`.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn init_v5<const VERSION: u8>(
    context: *mut *mut c_void,
    comm_id: u64,
    mask: *mut c_int,
    name: *const c_char,
    n_nodes: c_int,
    n_ranks: c_int,
    rank: c_int,
    logger: ncclDebugLogger_t,
) -> ncclResult_t {
    boundary(|| {
        let info = ContextInfo {
            comm_hash: comm_id,
            // SAFETY: NULL or NCCL's comm name.
            comm_name: unsafe { comm_name(name) },
            n_nodes,
            n_ranks,
            rank,
            version: VERSION,
        };
        // SAFETY: as for v1.
        unsafe { runtime::init(context, mask, InitArgs { info, logger }) }
    })
}

macro_rules! profiler_table {
    ($symbol:ident: $table:ty = $init:expr, $descr:ty, $args:ty) => {
        #[no_mangle]
        #[allow(non_upper_case_globals)]
        pub static $symbol: $table = ProfilerTable {
            name: PLUGIN_NAME.as_ptr(),
            init: $init,
            startEvent: start_event::<$descr>,
            stopEvent: stop_event,
            recordEventState: record_event_state::<$args>,
            finalize,
        };
    };
}

/// Score-P's metric-plugin entry point for `SCOREP_METRIC_PLUGINS=nccl_scorep` (Score-P
/// loads `libnccl_scorep.so`, a link to this library): Score-P hands over its clock, and
/// gets the asynchronous NCCL metrics.
#[no_mangle]
pub extern "C" fn SCOREP_MetricPlugin_nccl_scorep_get_info() -> scorep_adapter::metric::PluginInfo {
    crate::boundary::guarded(scorep_mode::metric_plugin_info)
}

/// The same for `SCOREP_METRIC_PLUGINS=nccl_profiler_scorep` (the file name Cargo gives
/// this library).
#[no_mangle]
pub extern "C" fn SCOREP_MetricPlugin_nccl_profiler_scorep_get_info(
) -> scorep_adapter::metric::PluginInfo {
    SCOREP_MetricPlugin_nccl_scorep_get_info()
}

profiler_table!(ncclProfiler_v1: abi::v1::ncclProfiler_v1_t = init_v1::<1>, abi::v1::ncclProfilerEventDescr_v1_t, abi::StateArgsV1);
profiler_table!(ncclProfiler_v2: abi::v2::ncclProfiler_v2_t = init_v1::<2>, abi::v2::ncclProfilerEventDescr_v2_t, abi::StateArgsV1);
profiler_table!(ncclProfiler_v3: abi::v3::ncclProfiler_v3_t = init_v1::<3>, abi::v3::ncclProfilerEventDescr_v3_t, abi::StateArgsV1);
profiler_table!(ncclProfiler_v4: abi::v4::ncclProfiler_v4_t = init_v4, abi::v4::ncclProfilerEventDescr_v4_t, abi::StateArgsV4);
profiler_table!(ncclProfiler_v5: abi::v5::ncclProfiler_v5_t = init_v5::<5>, abi::v5::ncclProfilerEventDescr_v5_t, abi::StateArgsV4);
profiler_table!(ncclProfiler_v6: abi::v6::ncclProfiler_v6_t = init_v5::<6>, abi::v6::ncclProfilerEventDescr_v6_t, abi::StateArgsV4);
profiler_table!(ncclProfiler_v7: abi::v7::ncclProfiler_v7_t = init_v5::<7>, abi::v7::ncclProfilerEventDescr_v7_t, abi::StateArgsV4);
