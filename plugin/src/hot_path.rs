//! The hot path: `startEvent`, `stopEvent` and `recordEventState` for every API version.
//!
//! Each reads the clock, checks or takes a slab id, decodes the descriptor into a
//! fixed-size record and pushes it into the calling thread's ring. No lock, no
//! allocation, no system call (after a thread's first call, which registers its ring).
//! Everything else happens on the collector thread.

use crate::boundary::panic_probe;
use crate::clock;
use crate::config::OnFull;
use crate::context::{ContextError, ContextState};
use crate::counters::Counters;
use crate::decode::{DecodeArgs, DecodeDescr};
use crate::event::{Action, Event, Kind, Record, Start};
use crate::handle::HandleError;
use crate::runtime::{runtime, Runtime};
use crate::scorep_mode;
use std::ffi::c_void;
use std::sync::atomic::Ordering;

/// `startEvent` for any version.
///
/// # Safety
/// `handle_out` is NULL or writable; `descr` is NULL or a descriptor of version `D`.
#[inline]
pub unsafe fn start_event<D: DecodeDescr>(
    context: *mut c_void,
    handle_out: *mut *mut c_void,
    descr: *const D,
) {
    if handle_out.is_null() {
        if let Some(rt) = runtime() {
            Counters::bump(&rt.shared.counters.null_handle_out);
        }
        return;
    }
    // SAFETY: non-NULL and writable (caller). Written first so NCCL never keeps an old
    // value, whatever happens below.
    unsafe { *handle_out = std::ptr::null_mut() };
    let Some(rt) = runtime() else { return };
    if !rt.recording() {
        return;
    }
    let time = clock::ticks();
    // SAFETY: NULL or a valid descriptor (caller).
    let Some(d) = (unsafe { descr.as_ref() }) else {
        Counters::bump(&rt.shared.counters.null_descriptor);
        return;
    };
    panic_probe(d.event_type());
    let Some(kind) = Kind::decode_type_in(D::KINDS, d.event_type()) else {
        Counters::bump(&rt.shared.counters.unknown_type);
        return;
    };
    // SAFETY: the type bit names the union member NCCL filled in.
    let event = unsafe { d.decode(kind) };
    let context_value = context as u64;
    if !context_accepted(rt, kind, &event, context_value) {
        return;
    }
    let start = Start {
        parent: d.parent(),
        rank: d.rank(),
        event,
    };
    let issued = rt.with_ring(|ring| {
        // A full ring drops the start before it costs a slab id.
        if rt.shared.config.on_full == OnFull::Drop && ring.is_full() {
            if ring.shared.note_drop(time) {
                rt.wake_collector();
            }
            return 0;
        }
        let Some(handle) = rt
            .shared
            .slab
            .acquire(kind, ring.shared.thread_index as usize)
        else {
            Counters::bump(&rt.shared.counters.slab_full);
            return 0;
        };
        let record = Record {
            time,
            handle,
            action: Action::Start {
                context: context_value,
                start,
            },
        };
        if rt.push(ring, record) {
            handle
        } else {
            // Nobody will hear of this event: free its id so NCCL gets NULL.
            let _ = rt.shared.slab.release(handle);
            0
        }
    });
    if let Some(handle) = issued.filter(|&h| h != 0) {
        // SAFETY: checked non-NULL and writable above.
        unsafe { *handle_out = handle as usize as *mut c_void };
        if scorep_mode::FORWARDING.load(Ordering::Relaxed) && kind.facts().forwarded_to_scorep {
            scorep_mode::entered(rt.shared, &event, handle, context_value);
        }
    }
}

/// Whether an event may be recorded given its context. PXN ProxyOps (another process's
/// pid) and ProxyStep/NetPlugin events carry contexts that are not ours: they are
/// recorded, and their owner is found through the pid or the parent handle instead.
#[inline]
fn context_accepted(rt: &Runtime, kind: Kind, event: &Event, context: u64) -> bool {
    if !kind.facts().trusted_context {
        return true;
    }
    if let Event::ProxyOp(op) = event {
        if op.pid != rt.shared.pid {
            Counters::bump(&rt.shared.counters.pxn_foreign_ops);
            return true;
        }
    }
    match rt.shared.contexts.state(context) {
        Ok(ContextState::Active | ContextState::Finalized) => true,
        Ok(ContextState::Disabled) => {
            Counters::bump(&rt.shared.counters.disabled_context);
            false
        }
        Err(ContextError::Null) => {
            Counters::bump(&rt.shared.counters.null_context);
            false
        }
        Err(ContextError::Foreign) => {
            Counters::bump(&rt.shared.counters.foreign_context);
            false
        }
        Err(ContextError::Stale) => {
            Counters::bump(&rt.shared.counters.stale_context);
            false
        }
    }
}

/// `stopEvent` for any version.
#[inline]
pub fn stop_event(handle: *mut c_void) {
    let Some(rt) = runtime() else { return };
    let time = clock::ticks();
    let value = handle as u64;
    panic_probe(value);
    match rt.shared.slab.release(value) {
        Ok(bits) => {
            if scorep_mode::FORWARDING.load(Ordering::Relaxed)
                && bits.kind.facts().forwarded_to_scorep
            {
                scorep_mode::stopped(
                    rt.shared,
                    value,
                    matches!(bits.kind, Kind::Coll | Kind::P2p),
                );
            }
            if rt.recording()
                && !rt.push_here(Record {
                    time,
                    handle: value,
                    action: Action::Stop,
                })
            {
                Counters::bump(&rt.shared.counters.lost_stops);
            }
        }
        Err(error) => Counters::bump(match error {
            HandleError::Null => &rt.shared.counters.stop_null,
            HandleError::NeverIssued => &rt.shared.counters.stop_never_issued,
            HandleError::AlreadyStopped => &rt.shared.counters.stop_double,
            HandleError::Stale => &rt.shared.counters.stop_stale,
        }),
    }
}

/// `recordEventState` for any version.
///
/// # Safety
/// `args` is NULL or points to version `A`'s state arguments.
#[inline]
pub unsafe fn record_state<A: DecodeArgs>(handle: *mut c_void, state: i32, args: *const A) {
    let Some(rt) = runtime() else { return };
    if !rt.recording() {
        return;
    }
    let time = clock::ticks();
    let value = handle as u64;
    panic_probe(value);
    let bits = match rt.shared.slab.check(value) {
        Ok(bits) => bits,
        Err(error) => {
            Counters::bump(match error {
                HandleError::Null => &rt.shared.counters.record_null,
                HandleError::NeverIssued => &rt.shared.counters.record_never_issued,
                HandleError::AlreadyStopped => &rt.shared.counters.record_after_stop,
                HandleError::Stale => &rt.shared.counters.record_stale,
            });
            return;
        }
    };
    if !bits.kind.accepts_state(state) {
        Counters::bump(&rt.shared.counters.unknown_state);
        return;
    }
    // SAFETY: NULL or version A's arguments (caller).
    let arg = unsafe { A::decode(args, state) };
    rt.push_here(Record {
        time,
        handle: value,
        action: Action::State { state, arg },
    });
}
