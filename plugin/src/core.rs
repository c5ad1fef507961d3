//! The event core: what every exported function does, for every API version.
//!
//! The hot path (`start_event`, `stop_event`, `record_state`) reads the clock, checks or
//! takes a slab id, decodes the descriptor into a fixed-size record and pushes it into
//! the calling thread's ring. No lock, no allocation, no system call (after a thread's
//! first call, which registers its ring). Everything else happens on the collector thread.

use crate::clock;
use crate::collector::Collector;
use crate::config::{ClockChoice, Config, Mode, OnFull};
use crate::context::{ContextError, ContextInfo, ContextState, Contexts};
use crate::counters::Counters;
use crate::decode::{states_of, DecodeArgs, DecodeDescr};
use crate::event::{Action, Event, Kind, Record, Start};
use crate::handle::{HandleError, Slab};
use crate::log;
use crate::ring::{self, RingConsumer, RingProducer};
use nccl_scorep_common::RunDir;
use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

pub mod scorep_mode;

/// Process-wide state, created by the first `init` and kept for the life of the process
/// (NCCL may unload and reload the library; a pinned library keeps it).
pub struct Runtime {
    pub config: Config,
    pub pid: i32,
    pub slab: Slab,
    pub contexts: Contexts,
    pub counters: Counters,
    /// Rings not currently held by a running collector.
    idle_rings: Mutex<Vec<RingConsumer>>,
    collector: Mutex<Option<Collector>>,
    collecting: AtomicBool,
    /// Set after a caught panic, or from the start with NCCL_SCOREP_MODE=off: the plugin
    /// answers NCCL but records nothing (no handle for any event).
    disabled: AtomicBool,
    next_thread: AtomicU32,
    ring_capacity: usize,
    /// Serialises `init` and `finalize`, so an `init` racing with the last `finalize`
    /// never sees a collector that is still shutting down.
    lifecycle: Mutex<()>,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// At process exit (or, as a no-op, when NCCL unloads the library after the last
/// finalize): drains, closes what is open and finishes the outputs, as the last finalize
/// would, and takes part in the automatic merge at the end of the job.
extern "C" fn stop_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(rt) = RUNTIME.get() {
            // Collecting means communicators are alive, so this is the process's exit:
            // NCCL unloads the library only after the last finalize, which stops the
            // collector (and takes part in the merge itself).
            let exiting = rt.collecting.load(Ordering::Acquire);
            if exiting {
                scorep_mode::end_cycle(rt, true);
            }
            rt.stop_collector();
            if exiting {
                rt.job_done();
            }
        }
    });
}

thread_local! {
    static RING: RefCell<Option<RingProducer>> = const { RefCell::new(None) };
}

/// The runtime, if any `init` ran in this process.
#[inline]
pub fn runtime() -> Option<&'static Runtime> {
    RUNTIME.get()
}

fn runtime_or_init() -> &'static Runtime {
    RUNTIME.get_or_init(|| {
        let (mut config, warnings) = Config::from_env();
        for warning in &warnings {
            log::warn(&warning.0);
        }
        // Score-P is looked for once, before anything is recorded; without it nothing
        // changes.
        scorep_mode::activate(&mut config);
        Runtime::new(config)
    })
}

impl Runtime {
    pub fn new(config: Config) -> Runtime {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        // The salt keeps our ids apart from those of other processes running this plugin
        // (their handles reach us as PXN parents and contexts).
        let salt = (pid as u64 ^ clock::realtime_ns() >> 10).wrapping_mul(0x9E37_79B9) >> 24;
        let salt = salt as u8;
        let shards = std::thread::available_parallelism().map_or(8, |n| n.get() * 2);
        let tsc = match config.clock {
            ClockChoice::Tsc => true,
            ClockChoice::Monotonic => false,
            ClockChoice::Auto => clock::tsc_is_reliable(),
        };
        clock::select(if tsc {
            clock::Source::Tsc
        } else {
            clock::Source::Monotonic
        });
        Runtime {
            pid,
            slab: Slab::new(salt, config.max_open_events, shards),
            contexts: Contexts::new(salt),
            counters: Counters::default(),
            idle_rings: Mutex::new(Vec::new()),
            collector: Mutex::new(None),
            collecting: AtomicBool::new(false),
            disabled: AtomicBool::new(config.mode == Mode::Off),
            next_thread: AtomicU32::new(0),
            ring_capacity: config.buffer_bytes / std::mem::size_of::<Record>(),
            lifecycle: Mutex::new(()),
            config,
        }
    }

    fn recording(&self) -> bool {
        !self.disabled.load(Ordering::Relaxed)
    }

    /// Runs `f` with the calling thread's ring, registering the ring on first use.
    /// `None` when the thread is exiting and its thread-local storage is gone.
    #[inline]
    fn with_ring<R>(&self, f: impl FnOnce(&mut RingProducer) -> R) -> Option<R> {
        RING.try_with(|cell| {
            let mut slot = cell.borrow_mut();
            f(slot.get_or_insert_with(|| self.register_thread()))
        })
        .ok()
    }

    /// Pushes one record: on a full ring, drops and counts it, or waits for the collector
    /// when so configured (and a collector runs to make room).
    #[inline]
    fn push(&self, ring: &mut RingProducer, mut record: Record) -> bool {
        loop {
            match ring.push(record) {
                Ok(()) => return true,
                Err(back)
                    if self.config.on_full == OnFull::Wait
                        && self.collecting.load(Ordering::Relaxed) =>
                {
                    record = back;
                    self.wake_collector();
                    ring.wait_for_room();
                }
                Err(_) => {
                    // Counted per ring (no shared cache line on an overloaded path); the
                    // collector adds the rings' drops to `ring_full`.
                    if ring.shared.note_drop(record.time) {
                        self.wake_collector();
                    }
                    return false;
                }
            }
        }
    }

    /// Pushes a record that needs no new id.
    #[inline]
    fn push_here(&self, record: Record) -> bool {
        self.with_ring(|ring| self.push(ring, record))
            .unwrap_or_else(|| {
                Counters::bump(&self.counters.ring_full);
                false
            })
    }

    /// A ring is full: the collector drains now instead of at the end of its poll
    /// interval (a thread fills a small ring faster than that).
    #[cold]
    fn wake_collector(&self) {
        if let Some(collector) = &*self.collector.lock().unwrap_or_else(|e| e.into_inner()) {
            collector.wake();
        }
    }

    #[cold]
    fn register_thread(&self) -> RingProducer {
        let index = self.next_thread.fetch_add(1, Ordering::Relaxed);
        let (producer, consumer) = ring::ring(self.ring_capacity, index);
        self.idle_rings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(consumer);
        producer
    }

    /// Rings registered since the collector last looked (and all of them at its start).
    pub fn take_new_rings(&self) -> Vec<RingConsumer> {
        std::mem::take(&mut *self.idle_rings.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Gives rings back when a collector stops, for the next init/finalize cycle.
    pub fn return_rings(&self, rings: Vec<RingConsumer>) {
        self.idle_rings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(rings);
    }

    fn ensure_collector(&'static self) {
        // Many applications exit without ncclCommDestroy: the trace is then finished at
        // exit. (Registered from this library, the handler also runs, as a no-op, when
        // the library is unloaded after the last finalize.)
        static AT_EXIT: std::sync::Once = std::sync::Once::new();
        AT_EXIT.call_once(|| {
            // SAFETY: registers a plain `extern "C" fn()` that catches its panics.
            if unsafe { libc::atexit(stop_at_exit) } != 0 {
                log::warn("cannot register the exit handler: end the job with ncclCommDestroy for a complete trace");
            }
        });
        let mut collector = self.collector.lock().unwrap_or_else(|e| e.into_inner());
        if collector.is_none() {
            match Collector::start(self) {
                Ok(started) => {
                    *collector = Some(started);
                    self.collecting.store(true, Ordering::Release);
                }
                Err(error) => log::warn(&format!(
                    "cannot start the collector thread ({error}); events will be counted as dropped"
                )),
            }
        }
    }

    /// The process is done with NCCL for now (its last finalize, or its exit): the last
    /// process of the job merges the trace. Never called while the library is being
    /// unloaded: the merge runs on a thread of its own, which needs the dynamic loader.
    fn job_done(&self) {
        if self.config.auto_merge && self.config.writes_otf2() && self.recording() {
            crate::job_end::process_done(
                &RunDir::new(&self.config.output_dir),
                self.config.merge_tool.as_deref(),
            );
        }
    }

    fn stop_collector(&self) {
        let collector = self
            .collector
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        self.collecting.store(false, Ordering::Release);
        if let Some(collector) = collector {
            collector.stop();
        }
    }
}

// ---------------------------------------------------------------------------------------
// The hot path.

/// Debug builds panic when an entry point receives this value as a descriptor type,
/// handle or context, so tests can prove that the boundary catches panics.
pub const PANIC_PROBE: u64 = 0x5041_4e49_4350_524f;

#[inline(always)]
fn panic_probe(value: u64) {
    if cfg!(debug_assertions) && value == PANIC_PROBE {
        panic!("panic probe");
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
) {
    if handle_out.is_null() {
        if let Some(rt) = runtime() {
            Counters::bump(&rt.counters.null_handle_out);
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
        Counters::bump(&rt.counters.null_descriptor);
        return;
    };
    panic_probe(d.event_type());
    let Some(kind) = Kind::from_type_bits(d.event_type()).filter(|k| D::KINDS & k.bit() != 0)
    else {
        Counters::bump(&rt.counters.unknown_type);
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
        if rt.config.on_full == OnFull::Drop && ring.is_full() {
            if ring.shared.note_drop(time) {
                rt.wake_collector();
            }
            return 0;
        }
        let Some(handle) = rt.slab.acquire(kind, ring.shared.thread_index as usize) else {
            Counters::bump(&rt.counters.slab_full);
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
            let _ = rt.slab.release(handle);
            0
        }
    });
    if let Some(handle) = issued.filter(|&h| h != 0) {
        // SAFETY: checked non-NULL and writable above.
        unsafe { *handle_out = handle as usize as *mut c_void };
        if scorep_mode::FORWARDING.load(Ordering::Relaxed) && scorep_mode::is_forwarded(kind) {
            scorep_mode::entered(rt, &event, handle, context_value);
        }
    }
}

/// Whether an event may be recorded given its context. PXN ProxyOps (another process's
/// pid) and ProxyStep/NetPlugin events carry contexts that are not ours: they are
/// recorded, and their owner is found through the pid or the parent handle instead.
#[inline]
fn context_accepted(rt: &Runtime, kind: Kind, event: &Event, context: u64) -> bool {
    if !kind.context_is_trusted() {
        return true;
    }
    if let Event::ProxyOp(op) = event {
        if op.pid != rt.pid {
            Counters::bump(&rt.counters.pxn_foreign_ops);
            return true;
        }
    }
    match rt.contexts.state(context) {
        Ok(ContextState::Active | ContextState::Finalized) => true,
        Ok(ContextState::Disabled) => {
            Counters::bump(&rt.counters.disabled_context);
            false
        }
        Err(ContextError::Null) => {
            Counters::bump(&rt.counters.null_context);
            false
        }
        Err(ContextError::Foreign) => {
            Counters::bump(&rt.counters.foreign_context);
            false
        }
        Err(ContextError::Stale) => {
            Counters::bump(&rt.counters.stale_context);
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
    match rt.slab.release(value) {
        Ok(bits) => {
            if scorep_mode::FORWARDING.load(Ordering::Relaxed)
                && scorep_mode::is_forwarded(bits.kind)
            {
                scorep_mode::stopped(rt, value);
            }
            if rt.recording()
                && !rt.push_here(Record {
                    time,
                    handle: value,
                    action: Action::Stop,
                })
            {
                Counters::bump(&rt.counters.lost_stops);
            }
        }
        Err(error) => Counters::bump(match error {
            HandleError::Null => &rt.counters.stop_null,
            HandleError::NeverIssued => &rt.counters.stop_never_issued,
            HandleError::AlreadyStopped => &rt.counters.stop_double,
            HandleError::Stale => &rt.counters.stop_stale,
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
    let bits = match rt.slab.check(value) {
        Ok(bits) => bits,
        Err(error) => {
            Counters::bump(match error {
                HandleError::Null => &rt.counters.record_null,
                HandleError::NeverIssued => &rt.counters.record_never_issued,
                HandleError::AlreadyStopped => &rt.counters.record_after_stop,
                HandleError::Stale => &rt.counters.record_stale,
            });
            return;
        }
    };
    if !(0..32).contains(&state) || states_of(bits.kind) & 1 << state == 0 {
        Counters::bump(&rt.counters.unknown_state);
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

// ---------------------------------------------------------------------------------------
// Communicator lifecycle (not on the hot path).

/// What `init` passes, in a version-independent form.
pub struct InitArgs {
    pub info: ContextInfo,
    pub logger: nccl_profiler_abi::ncclDebugLogger_t,
}

/// `init` for any version: always leaves `*context` written (a disabled context or NULL
/// on any problem) and never fails.
///
/// # Safety
/// `context_out` and `mask` are NULL or writable.
pub unsafe fn init(context_out: *mut *mut c_void, mask: *mut i32, args: InitArgs) {
    if !context_out.is_null() {
        // SAFETY: non-NULL and writable (caller).
        unsafe { *context_out = std::ptr::null_mut() };
    }
    log::set_logger(args.logger);
    let rt = runtime_or_init();
    let _lifecycle = rt.lifecycle.lock().unwrap_or_else(|e| e.into_inner());
    if context_out.is_null() {
        // Nowhere to return a context: registering one would leave a live context that
        // no finalize can ever name, so the last finalize (summary, collector stop) would
        // never come.
        Counters::bump(&rt.counters.disabled_inits);
        return;
    }
    let enabled = rt.recording() && rt.config.mode != Mode::Off;
    let name = args.info.comm_name.clone().unwrap_or_default();
    let (hash, rank, n_ranks) = (args.info.comm_hash, args.info.rank, args.info.n_ranks);
    let Some(context) = rt.contexts.register(args.info, enabled) else {
        Counters::bump(&rt.counters.disabled_inits);
        log::warn(&format!(
            "too many communicators in this process (at most {}); comm {hash:#x} rank {rank} is not profiled",
            crate::context::MAX_CONTEXTS
        ));
        return;
    };
    if !context_out.is_null() {
        // SAFETY: non-NULL and writable (caller).
        unsafe { *context_out = context as usize as *mut c_void };
    }
    if !enabled {
        Counters::bump(&rt.counters.disabled_inits);
        log::info(&format!(
            "comm {hash:#x} rank {rank}: profiling off (NCCL_SCOREP_MODE=off or plugin disabled)"
        ));
        return;
    }
    if !mask.is_null() {
        // SAFETY: non-NULL and writable (caller); NCCL reads it with relaxed atomics.
        unsafe { *mask = rt.config.event_mask as i32 };
    }
    let first_of_cycle = !rt.collecting.load(Ordering::Acquire);
    rt.ensure_collector();
    if first_of_cycle && scorep_mode::FORWARDING.load(Ordering::Relaxed) {
        scorep_mode::start_cycle();
    }
    // The collector learns of the context through its first event or the finalize
    // record; tell it now so comms without events still appear in the output.
    rt.push_here(Record {
        time: clock::ticks(),
        handle: 0,
        action: Action::Init { context },
    });
    log::info(&format!(
        "profiling comm \"{name}\" {hash:#x} rank {rank}/{n_ranks}, events {:#x}, output {}",
        rt.config.event_mask,
        rt.config.output_dir.display()
    ));
}

/// `finalize` for any version. The last finalize of the process drains and stops the
/// collector, so nothing of ours runs when NCCL unloads the library.
pub fn finalize(context: *mut c_void) {
    let Some(rt) = runtime() else { return };
    let value = context as u64;
    panic_probe(value);
    let _lifecycle = rt.lifecycle.lock().unwrap_or_else(|e| e.into_inner());
    match rt.contexts.finalize(value) {
        Ok(done) => {
            if rt.recording() {
                rt.push_here(Record {
                    time: clock::ticks(),
                    handle: 0,
                    action: Action::Finalize { context: value },
                });
            }
            if done.last {
                if scorep_mode::FORWARDING.load(Ordering::Relaxed) {
                    scorep_mode::end_cycle(rt, false);
                }
                rt.stop_collector();
                rt.contexts.clear();
                rt.job_done();
            }
        }
        Err(_) => Counters::bump(&rt.counters.bad_finalize),
    }
}

/// Called by the boundary after it caught a panic.
pub fn on_panic() {
    if let Some(rt) = runtime() {
        Counters::bump(&rt.counters.panics);
        if !rt.disabled.swap(true, Ordering::Relaxed) {
            log::warn("internal error (panic caught); profiling is off for the rest of the run");
        }
    }
}
