//! The hot path: `startEvent`, `stopEvent` and `recordEventState` for every API version.
//!
//! Each reads the clock, checks or takes a slab id, decodes the descriptor into a
//! fixed-size record and pushes it into the calling thread's ring. No lock, no
//! allocation, no system call (after a thread's first call, which registers its ring).
//! Everything else happens on the collector thread.
//!
//! With a chained plugin (`NCCL_SCOREP_CHAIN`, [`crate::chain`]) each callback takes the
//! `*_chained` path instead, which also calls that plugin; without one, the only cost of
//! chaining is the test of [`chain::ACTIVE`].

use crate::boundary::panic_probe;
use crate::chain;
use crate::clock;
use crate::config::OnFull;
use crate::context::{ContextError, ContextState};
use crate::counters::Counters;
use crate::decode::{DecodeArgs, DecodeDescr};
use crate::event::{Action, Event, Kind, Record, Start};
use crate::handle::{Chained, HandleError};
use crate::ring::Dropped;
use crate::runtime::{runtime, Runtime};
use crate::scorep_mode;
use std::ffi::c_void;
use std::sync::atomic::Ordering;

/// Where a callback's time stamp comes from: read when needed ([`Clock`]), so that a
/// refused call never pays for the read, or taken once by the caller ([`Stamped`]) when
/// record mode files the same call with the same time.
pub trait Stamp: Copy {
    fn ticks(self) -> u64;
}

/// Reads [`clock::ticks`] when a record needs its time.
#[derive(Clone, Copy)]
pub struct Clock;

impl Stamp for Clock {
    #[inline(always)]
    fn ticks(self) -> u64 {
        clock::ticks()
    }
}

/// A time the caller already read.
#[derive(Clone, Copy)]
pub struct Stamped(pub u64);

impl Stamp for Stamped {
    #[inline(always)]
    fn ticks(self) -> u64 {
        self.0
    }
}

/// `startEvent` for any version.
///
/// # Safety
/// `handle_out` is NULL or writable; `descr` is NULL or a descriptor of version `D`.
#[inline]
pub unsafe fn start_event<D: DecodeDescr>(
    context: *mut c_void,
    handle_out: *mut *mut c_void,
    descr: *const D,
    stamp: impl Stamp,
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
    if chain::ACTIVE.load(Ordering::Relaxed) {
        // SAFETY: as for this function.
        unsafe { start_chained(rt, context, handle_out, descr, stamp) };
        return;
    }
    if !admitted(rt) {
        return;
    }
    // SAFETY: NULL or a valid descriptor (caller).
    let Some((d, kind)) = (unsafe { described(rt, descr) }) else {
        return;
    };
    // SAFETY: `d` is a descriptor of version D announcing `kind`.
    let handle = unsafe { start_recorded(rt, context as u64, d, kind, stamp, None) };
    if handle != 0 {
        // SAFETY: checked non-NULL and writable above.
        unsafe { *handle_out = handle as usize as *mut c_void };
    }
}

/// Whether a new event may be recorded: recording is on and the plugin's heap is below
/// its limit (a refusal for memory is counted). Decided before any work on the event.
#[inline(always)]
fn admitted(rt: &Runtime) -> bool {
    if !rt.recording() {
        return false;
    }
    if crate::memory::BUDGET.shedding() {
        Counters::bump(&rt.shared.counters.memory_limit_events);
        return false;
    }
    true
}

/// The descriptor NCCL passed and the event kind its type names; `None`, counted, for a
/// NULL descriptor or a type this version does not have.
///
/// # Safety
/// `descr` is NULL or points to a descriptor of version `D`.
#[inline(always)]
unsafe fn described<'a, D: DecodeDescr>(rt: &Runtime, descr: *const D) -> Option<(&'a D, Kind)> {
    // SAFETY: NULL or a valid descriptor (caller).
    let Some(d) = (unsafe { descr.as_ref() }) else {
        Counters::bump(&rt.shared.counters.null_descriptor);
        return None;
    };
    panic_probe(d.event_type());
    let Some(kind) = Kind::decode_type_in(D::KINDS, d.event_type()) else {
        Counters::bump(&rt.shared.counters.unknown_type);
        return None;
    };
    Some((d, kind))
}

/// Our part of a start: decodes the event, takes a slab id (noting the chained plugin's
/// handle `chained` in it) and pushes the record. The handle, or 0 when refused. A start
/// that a full ring drops is dropped before the event is stamped or decoded.
///
/// # Safety
/// `d` is a descriptor of version `D` whose type bit is `kind`.
#[inline]
unsafe fn start_recorded<D: DecodeDescr>(
    rt: &Runtime,
    context_value: u64,
    d: &D,
    kind: Kind,
    stamp: impl Stamp,
    chained: Option<Chained>,
) -> u64 {
    let issued = rt.with_thread(|ring, slots| {
        // A full ring drops the start before it costs a clock read, a decode or an id
        // (the drop's time, for the gap it makes, is the only work).
        if rt.shared.config.on_full == OnFull::Drop && ring.is_full() {
            if ring.shared.note_drop(stamp.ticks(), Dropped::Start) {
                rt.wake_collector();
            }
            return None;
        }
        let time = stamp.ticks();
        // SAFETY: the type bit names the union member NCCL filled in (caller).
        let event = unsafe { d.decode(kind) };
        if !context_accepted(rt, kind, &event, context_value) {
            return None;
        }
        let Some(handle) =
            rt.shared
                .slab
                .acquire_for_thread(kind, ring.shared.thread_index as usize, slots)
        else {
            Counters::bump(&rt.shared.counters.slab_full);
            return None;
        };
        // The event goes straight into the record: only the handle comes out.
        let record = Record {
            time,
            handle,
            action: Action::Start {
                context: context_value,
                start: Start {
                    parent: d.parent(),
                    rank: d.rank(),
                    event,
                },
            },
        };
        if rt.push(ring, record) {
            Some(handle)
        } else {
            // Nobody will hear of this event: free its id so NCCL gets NULL.
            let _ = rt.shared.slab.release_for_thread(handle, slots);
            None
        }
    });
    let Some(handle) = issued.flatten() else {
        return 0;
    };
    if let Some(chained) = chained {
        rt.shared.slab.set_chained(handle, chained);
    }
    if scorep_mode::FORWARDING.load(Ordering::Relaxed) && kind.facts().forwarded_to_scorep {
        // Decoded again rather than carried out of the ring's closure: only Score-P mode
        // needs it here (NCCL's descriptor is unchanged during the call).
        // SAFETY: as above.
        let event = unsafe { d.decode(kind) };
        scorep_mode::entered(rt.shared, &event, handle, context_value);
    }
    handle
}

/// `startEvent` with a chained plugin: it gets the start first (with its own context and
/// parent), then our sinks, when each asked for the event; the handle NCCL gets is ours,
/// with the chained plugin's beside it in the slab.
///
/// # Safety
/// As for [`start_event`], with `handle_out` non-NULL.
#[inline(never)]
unsafe fn start_chained<D: DecodeDescr>(
    rt: &Runtime,
    context: *mut c_void,
    handle_out: *mut *mut c_void,
    descr: *const D,
    stamp: impl Stamp,
) {
    let Some(chain) = chain::get() else { return };
    let time = stamp.ticks();
    // SAFETY: NULL or a valid descriptor (caller).
    let Some((d, kind)) = (unsafe { described(rt, descr) }) else {
        return;
    };
    let context_value = context as u64;
    let mut chained = Chained {
        handle: 0,
        recorded: chain.records_ours(kind) && admitted(rt),
        states: true,
    };
    if chain.wants(kind) {
        // A ProxyOp of another process (PXN) carries that process's context and parent:
        // passed on unchanged, whatever they look like here.
        // SAFETY: the type bit names the union member NCCL filled in.
        let foreign = kind == Kind::ProxyOp
            && matches!(unsafe { d.decode(kind) }, Event::ProxyOp(op) if op.pid != rt.shared.pid);
        let (their_context, their_parent) = if foreign {
            (Some(context_value), d.parent())
        } else {
            (
                chain.context_for(context_value, rt.shared.contexts.slot_of(context_value)),
                chained_parent(rt, chain, d.parent()),
            )
        };
        if let Some(their_context) = their_context {
            if chain.parent_allows(kind, their_parent) {
                let mut copy = d.with_parent(their_parent);
                // SAFETY: a copy of NCCL's descriptor of version D, whose layout the
                // chained version shares.
                chained.handle =
                    unsafe { chain.start(their_context, (&mut copy as *mut D).cast()) };
                chained.states = chain.parent_allows_states(kind, their_parent);
            }
        }
    }
    let mut handle = 0;
    if chained.recorded {
        // SAFETY: `d` is a descriptor of version D announcing `kind`.
        handle =
            unsafe { start_recorded(rt, context_value, d, kind, Stamped(time), Some(chained)) };
    }
    if handle == 0 && chained.handle != 0 {
        // Only the chained plugin has it (it alone asked for it, or our sinks refused or
        // dropped it): an id that carries its handle, nothing recorded.
        chained.recorded = false;
        let issued = rt
            .with_ring(|ring| {
                rt.shared
                    .slab
                    .acquire(kind, ring.shared.thread_index as usize)
            })
            .flatten();
        match issued {
            Some(issued) => {
                rt.shared.slab.set_chained(issued, chained);
                handle = issued;
            }
            None => Counters::bump(&rt.shared.counters.slab_full),
        }
    }
    if handle != 0 {
        // SAFETY: non-NULL and writable (caller).
        unsafe { *handle_out = handle as usize as *mut c_void };
    } else if chained.handle != 0 {
        // NCCL cannot stop an event it has no handle for: end it now for the chained
        // plugin rather than leave it open.
        chain.stop(chained.handle);
    }
}

/// The chained plugin's parent for the parent `parent` NCCL passed: its handle of the
/// same event for one of our live or recently ended events (0 if it gave none or it is
/// forgotten), NULL for NULL, and another process's value unchanged (PXN: no plugin may
/// dereference it).
#[inline]
fn chained_parent(rt: &Runtime, chain: &chain::Chain, parent: u64) -> u64 {
    match rt.shared.slab.check(parent) {
        Ok(bits) => rt.shared.slab.chained(bits.slot).handle,
        Err(HandleError::Null) => 0,
        Err(HandleError::NeverIssued) => parent,
        Err(HandleError::AlreadyStopped | HandleError::Stale) => rt
            .shared
            .slab
            .chained_after_release(parent)
            .map(|(_, chained)| chained.handle)
            .or_else(|| chain.ended_handle(parent))
            .unwrap_or(0),
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
pub fn stop_event(handle: *mut c_void, stamp: impl Stamp) {
    let Some(rt) = runtime() else { return };
    if chain::ACTIVE.load(Ordering::Relaxed) {
        stop_chained(rt, handle as u64, stamp);
        return;
    }
    stop_recorded(rt, handle as u64, true, stamp);
}

/// Our part of a stop: frees the id and, if `recorded`, pushes the stop. Whether the
/// handle was live.
#[inline]
fn stop_recorded(rt: &Runtime, value: u64, recorded: bool, stamp: impl Stamp) -> bool {
    let time = stamp.ticks();
    panic_probe(value);
    if !scorep_mode::FORWARDING.load(Ordering::Relaxed) {
        // The id goes back to this thread's own free slots, and the stop into its ring,
        // with one look-up of the thread's state.
        let stopped = rt.with_thread(|ring, slots| {
            let released = rt.shared.slab.release_for_thread(value, slots);
            if released.is_ok()
                && recorded
                && rt.recording()
                && !rt.push(
                    ring,
                    Record {
                        time,
                        handle: value,
                        action: Action::Stop,
                    },
                )
            {
                Counters::bump(&rt.shared.counters.lost_stops);
            }
            released
        });
        if let Some(released) = stopped {
            return count_stop(rt, released);
        }
    }
    let released = rt.shared.slab.release(value);
    if let Ok(bits) = released {
        if recorded {
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
    }
    count_stop(rt, released)
}

/// Whether a stop's handle was live; a bad one is counted.
#[inline]
fn count_stop(rt: &Runtime, released: Result<crate::handle::HandleBits, HandleError>) -> bool {
    match released {
        Ok(_) => true,
        Err(error) => {
            Counters::bump(match error {
                HandleError::Null => &rt.shared.counters.stop_null,
                HandleError::NeverIssued => &rt.shared.counters.stop_never_issued,
                HandleError::AlreadyStopped => &rt.shared.counters.stop_double,
                HandleError::Stale => &rt.shared.counters.stop_stale,
            });
            false
        }
    }
}

/// `stopEvent` with a chained plugin: its handle is read while ours is live, and it is
/// stopped only when ours was (once, and never with a handle it did not give).
#[inline(never)]
fn stop_chained(rt: &Runtime, value: u64, stamp: impl Stamp) {
    let slab = &rt.shared.slab;
    let Some(chain) = chain::get() else {
        stop_recorded(rt, value, true, stamp);
        return;
    };
    let theirs = match slab.check(value) {
        Ok(bits) => {
            let chained = slab.chained(bits.slot);
            if chained.handle != 0 && chain::parent_after_its_end(bits.kind) {
                // Before the slot is free: a child starting on another thread the
                // moment after must find it.
                chain.ended(value, chained.handle);
            }
            // Claimed before the slot is free too: a later event may take it at once.
            let claimed = chained.handle != 0 && slab.claim_chained_stop(value);
            stop_recorded(rt, value, chained.recorded, stamp);
            claimed.then_some(chained.handle)
        }
        Err(HandleError::AlreadyStopped) => {
            // Our collector may have freed the slot before NCCL's stop (a ProxyOp it gave
            // up waiting for, a step NCCL started again): the chained plugin still gets
            // this stop, once.
            let found = slab.chained_after_release(value);
            stop_recorded(rt, value, true, stamp);
            found.and_then(|(bits, chained)| {
                if chained.handle == 0 {
                    return None;
                }
                if chain::parent_after_its_end(bits.kind) {
                    chain.ended(value, chained.handle);
                }
                slab.claim_chained_stop(value).then_some(chained.handle)
            })
        }
        Err(_) => {
            stop_recorded(rt, value, true, stamp);
            None
        }
    };
    if let Some(theirs) = theirs {
        chain.stop(theirs);
    }
}

/// `recordEventState` for any version.
///
/// # Safety
/// `args` is NULL or points to version `A`'s state arguments.
#[inline]
pub unsafe fn record_state<A: DecodeArgs>(
    handle: *mut c_void,
    state: i32,
    args: *const A,
    stamp: impl Stamp,
) {
    let Some(rt) = runtime() else { return };
    if chain::ACTIVE.load(Ordering::Relaxed) {
        // SAFETY: as for this function.
        unsafe { record_chained(rt, handle as u64, state, args, stamp) };
        return;
    }
    if !rt.recording() {
        return;
    }
    let value = handle as u64;
    panic_probe(value);
    if let Some(bits) = checked_for_record(rt, value) {
        // SAFETY: as for this function.
        unsafe { record_recorded(rt, value, bits.kind, state, args, stamp) };
    }
}

/// The bits of a live handle a state is recorded for; a bad one is counted.
#[inline]
fn checked_for_record(rt: &Runtime, value: u64) -> Option<crate::handle::HandleBits> {
    match rt.shared.slab.check(value) {
        Ok(bits) => Some(bits),
        Err(error) => {
            Counters::bump(match error {
                HandleError::Null => &rt.shared.counters.record_null,
                HandleError::NeverIssued => &rt.shared.counters.record_never_issued,
                HandleError::AlreadyStopped => &rt.shared.counters.record_after_stop,
                HandleError::Stale => &rt.shared.counters.record_stale,
            });
            None
        }
    }
}

/// Our part of a state: pushes it for a live event of `kind`.
///
/// # Safety
/// `args` is NULL or points to version `A`'s state arguments.
#[inline]
unsafe fn record_recorded<A: DecodeArgs>(
    rt: &Runtime,
    value: u64,
    kind: Kind,
    state: i32,
    args: *const A,
    stamp: impl Stamp,
) {
    let time = stamp.ticks();
    if !kind.accepts_state(state) {
        Counters::bump(&rt.shared.counters.unknown_state);
        return;
    }
    // SAFETY: NULL or version A's arguments (caller).
    let arg = unsafe { A::decode(args, state) };
    // The record is built where it is pushed (not moved into the thread's closure).
    let pushed = rt.with_ring(|ring| {
        rt.push(
            ring,
            Record {
                time,
                handle: value,
                action: Action::State { state, arg },
            },
        )
    });
    if pushed.is_none() {
        rt.count_without_ring(true);
    }
}

/// `recordEventState` with a chained plugin: it gets the state with its own handle when
/// it has one for the event; our sinks get it when they record the event.
///
/// # Safety
/// `args` is NULL or points to version `A`'s state arguments.
#[inline(never)]
unsafe fn record_chained<A: DecodeArgs>(
    rt: &Runtime,
    value: u64,
    state: i32,
    args: *const A,
    stamp: impl Stamp,
) {
    panic_probe(value);
    let (bits, chained) = match rt.shared.slab.chained_after_release(value) {
        // Freed by our collector before NCCL is done with it: still the chained plugin's.
        Some((bits, chained)) => (
            bits,
            Chained {
                recorded: false,
                ..chained
            },
        ),
        None => match checked_for_record(rt, value) {
            Some(bits) => (bits, rt.shared.slab.chained(bits.slot)),
            None => return,
        },
    };
    if chained.handle != 0 && chained.states {
        if let Some(chain) = chain::get() {
            // SAFETY: its live handle, and NCCL's arguments for the state (caller).
            unsafe { chain.record(chained.handle, state, args as *mut c_void) };
        }
    }
    if chained.recorded && rt.recording() {
        // SAFETY: as for this function.
        unsafe { record_recorded(rt, value, bits.kind, state, args, stamp) };
    }
}
