//! The process-wide runtime: created by the first `init`, it holds the [`Shared`] state,
//! runs the collector while communicators are profiled, and carries out `init` and
//! `finalize` for every API version. The callbacks in between are in [`crate::hot_path`].

use crate::chain;
use crate::collector::Collector;
use crate::config::{Config, Mode, OnFull};
use crate::context::ContextInfo;
use crate::counters::Counters;
use crate::event::{Action, Record};
use crate::handle::{Slab, ThreadSlots};
use crate::kinds;
use crate::log;
use crate::ring::{Dropped, RingProducer};
use crate::scorep_mode;
use crate::shared::Shared;
use crate::sink::{self, SinkContext};
use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// Process-wide state, created by the first `init` and kept for the life of the process
/// (NCCL may unload and reload the library; a pinned library keeps it).
pub struct Runtime {
    pub shared: &'static Shared,
    collector: Mutex<Option<Collector>>,
    collecting: AtomicBool,
    /// Set after a caught panic, or from the start with NCCL_SCOREP_MODE=off: the plugin
    /// answers NCCL but records nothing (no handle for any event).
    disabled: AtomicBool,
    /// Serialises `init` and `finalize`, so an `init` racing with the last `finalize`
    /// never sees a collector that is still shutting down.
    lifecycle: Mutex<()>,
    /// This is a child forked after the first `init` (PyTorch's DataLoader workers): the
    /// collector thread stayed in the parent, and the part, the ledger and the merge are
    /// the parent's. The child records nothing and leaves all of it alone.
    forked_child: AtomicBool,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// At process exit (or, as a no-op, when NCCL unloads the library after the last
/// finalize): drains, closes what is open and finishes the outputs, as the last finalize
/// would, and takes part in the automatic merge at the end of the job.
extern "C" fn stop_at_exit() {
    crate::boundary::guarded(|| {
        if let Some(rt) = RUNTIME.get().filter(|rt| !rt.is_forked_child()) {
            // Collecting means communicators are alive, so this is the process's exit:
            // NCCL unloads the library only after the last finalize, which stops the
            // collector (and takes part in the merge itself).
            let exiting = rt.collecting.load(Ordering::Acquire);
            if exiting {
                scorep_mode::end_cycle(rt.shared, true);
            }
            rt.stop_collector();
            if exiting {
                rt.job_done();
            }
        }
    });
}

/// In a child forked from a profiled process (called by `fork` in the child, before it
/// returns): only atomic stores, which are safe there.
extern "C" fn in_forked_child() {
    crate::boundary::guarded(|| {
        if let Some(rt) = RUNTIME.get() {
            rt.forked_child.store(true, Ordering::Release);
            rt.disabled.store(true, Ordering::Release);
            rt.collecting.store(false, Ordering::Release);
        }
    });
}

/// What a thread that calls the plugin keeps: its ring, and the event slots its stops
/// freed, for its next starts (given back to the slab when the thread ends).
struct CallingThread {
    ring: RingProducer,
    slots: ThreadSlots,
    slab: &'static Slab,
}

impl Drop for CallingThread {
    fn drop(&mut self) {
        self.slab.give_back(&mut self.slots);
    }
}

thread_local! {
    static CALLING_THREAD: RefCell<Option<CallingThread>> = const { RefCell::new(None) };
}

/// The runtime, if any `init` ran in this process.
#[inline]
pub fn runtime() -> Option<&'static Runtime> {
    RUNTIME.get()
}

fn runtime_or_init() -> &'static Runtime {
    RUNTIME.get_or_init(|| {
        let (config, warnings) = Config::from_env();
        for warning in &warnings {
            log::warn(&warning.0);
        }
        let (host, host_problem) = nccl_scorep_common::job::hostname_and_problem();
        if let Some(problem) = host_problem {
            log::warn(&problem);
        }
        // Score-P is looked for once, before anything is recorded; without it nothing
        // changes.
        let scorep = scorep_mode::activate(&config);
        let run_dir = config.run_dir(scorep);
        if scorep {
            log::info(&format!(
                "Score-P mode: NCCL API calls become Score-P regions (group \"NCCL\"); \
                 sidecar trace in {}",
                run_dir.root().display()
            ));
        }
        crate::boundary::on_panic(on_panic);
        // SAFETY: registers a plain `extern "C" fn()` (it catches its panics and only
        // stores atomics) to run in the child of every later fork.
        if unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) } != 0 {
            log::info("cannot register the fork handler: a forked child must not use NCCL");
        }
        Runtime::new(Box::leak(Box::new(Shared::new(config, run_dir, host))))
    })
}

impl Runtime {
    pub fn new(shared: &'static Shared) -> Runtime {
        Runtime {
            collector: Mutex::new(None),
            collecting: AtomicBool::new(false),
            disabled: AtomicBool::new(shared.config.mode == Mode::Off),
            lifecycle: Mutex::new(()),
            forked_child: AtomicBool::new(false),
            shared,
        }
    }

    /// Whether this process is a child forked after the first `init`.
    pub fn is_forked_child(&self) -> bool {
        self.forked_child.load(Ordering::Acquire)
    }

    #[inline]
    pub(crate) fn recording(&self) -> bool {
        !self.disabled.load(Ordering::Relaxed)
    }

    /// Runs `f` with the calling thread's ring, registering the ring on first use.
    /// `None` when the thread is exiting and its thread-local storage is gone.
    #[inline]
    pub(crate) fn with_ring<R>(&self, f: impl FnOnce(&mut RingProducer) -> R) -> Option<R> {
        self.with_thread(|ring, _| f(ring))
    }

    /// Runs `f` with the calling thread's ring and its own free event slots, registering
    /// the ring on first use. `None` when the thread is exiting and its thread-local
    /// storage is gone.
    #[inline]
    pub(crate) fn with_thread<R>(
        &self,
        f: impl FnOnce(&mut RingProducer, &mut ThreadSlots) -> R,
    ) -> Option<R> {
        CALLING_THREAD
            .try_with(|cell| {
                let mut slot = cell.borrow_mut();
                let thread = slot.get_or_insert_with(|| CallingThread {
                    ring: self.shared.register_thread(),
                    slots: ThreadSlots::new(),
                    slab: &self.shared.slab,
                });
                f(&mut thread.ring, &mut thread.slots)
            })
            .ok()
    }

    /// Pushes one record: on a full ring, drops and counts it, or waits for the collector
    /// when so configured (and a collector runs to make room).
    #[inline]
    pub(crate) fn push(&self, ring: &mut RingProducer, record: Record) -> bool {
        match ring.push(record) {
            Ok(()) => true,
            Err(back) => {
                let wait = self.shared.config.on_full == OnFull::Wait;
                self.push_to_full_ring(ring, back, wait)
            }
        }
    }

    /// [`Runtime::push`] on a full ring, out of line: the common path keeps the record
    /// where it was built. With `wait` (and a collector to make room), waits for room;
    /// else drops and counts it.
    #[cold]
    #[inline(never)]
    fn push_to_full_ring(&self, ring: &mut RingProducer, mut record: Record, wait: bool) -> bool {
        // When the wait began (a dropped record costs no clock read), and in Score-P mode
        // its region, left when this returns.
        let since = if wait { crate::clock::ticks() } else { 0 };
        let _in_scorep = (wait && self.collecting.load(Ordering::Relaxed))
            .then(crate::scorep_mode::held_back)
            .flatten();
        loop {
            if wait && self.collecting.load(Ordering::Relaxed) {
                self.wake_collector();
                ring.wait_for_room();
                match ring.push(record) {
                    Ok(()) => {
                        self.push_held_back(ring, since);
                        return true;
                    }
                    Err(back) => record = back,
                }
            } else {
                let Some(what) = dropped_as(&record.action) else {
                    // An init or finalize record without a collector to read it.
                    return false;
                };
                // Counted per ring (no shared cache line on an overloaded path); the
                // collector adds the rings' drops to `ring_full`.
                if ring.shared.note_drop(record.time, what) {
                    self.wake_collector();
                }
                return false;
            }
        }
    }

    /// Tells the collector that the calling thread waited since `since` for room in
    /// record mode's ring of calls: held back like a wait for room in its own ring.
    #[cold]
    fn held_back_by_recording(&self, since: u64) {
        if self.collecting.load(Ordering::Relaxed) {
            let _ = self.with_ring(|ring| self.push_held_back(ring, since));
        }
    }

    /// Tells the collector, after a record that waited for room, how long the thread
    /// waited: NCCL's time the plugin took, for the trace and the end-of-run report. It
    /// waits for room itself if the ring filled again (the interval then ends later); it
    /// is given up only when the collector stops meanwhile.
    fn push_held_back(&self, ring: &mut RingProducer, since: u64) {
        loop {
            let time = crate::clock::ticks();
            if time <= since {
                // No time passed on the plugin's clock: a clock that is not the host's
                // (`nccl-scorep convert` stamps every call with its recorded time, which
                // stands still while the replay waits), where NCCL was not held back.
                return;
            }
            let held_back = Record {
                time,
                handle: 0,
                action: Action::HeldBack { since },
            };
            if ring.push(held_back).is_ok() || !self.collecting.load(Ordering::Relaxed) {
                return;
            }
            self.wake_collector();
            ring.wait_for_room();
        }
    }

    /// Pushes a record that needs no new id.
    #[inline]
    pub(crate) fn push_here(&self, record: Record) -> bool {
        let state = matches!(record.action, Action::State { .. });
        self.with_ring(|ring| self.push(ring, record))
            .unwrap_or_else(|| {
                self.count_without_ring(state);
                false
            })
    }

    /// A record that found no ring (its thread is exiting) is counted as one a full ring
    /// dropped; a state record also as a lost state.
    #[cold]
    pub(crate) fn count_without_ring(&self, state: bool) {
        Counters::bump(&self.shared.counters.ring_full);
        if state {
            Counters::bump(&self.shared.counters.lost_states);
        }
    }

    /// Pushes an init or finalize record: these wait for room whatever
    /// `NCCL_SCOREP_ON_FULL` says (they are rare, and off NCCL's hot path). A dropped
    /// finalize left the communicator live for the collector until the end of the part:
    /// its flight recorder slot kept, its operations waiting for their kernel channels.
    fn push_lifecycle(&self, record: Record) {
        let _ = self.with_ring(|ring| match ring.push(record) {
            Ok(()) => true,
            Err(back) => self.push_to_full_ring(ring, back, true),
        });
    }

    /// A ring is full: the collector drains now instead of at the end of its poll
    /// interval (a thread fills a small ring faster than that).
    #[cold]
    pub(crate) fn wake_collector(&self) {
        if let Some(collector) = &*self.collector.lock().unwrap_or_else(|e| e.into_inner()) {
            collector.wake();
        }
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
            let shared = self.shared;
            // This cycle's part of the trace: a new directory for each init/finalize cycle.
            let part = shared.run_dir.new_part(&shared.host, shared.pid);
            let sinks = sink::open_all(&SinkContext {
                config: &shared.config,
                pid: shared.pid,
                host: &shared.host,
                run_dir: &shared.run_dir,
                part: &part,
            });
            match Collector::start(shared, sinks) {
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
    /// process of the job merges the trace.
    fn job_done(&self) {
        let config = &self.shared.config;
        if config.auto_merge && config.writes_otf2() && self.recording() && !self.is_forked_child()
        {
            crate::job_end::process_done(
                &self.shared.run_dir,
                &crate::job_end::MergeSettings {
                    tool: config.merge_tool.as_deref(),
                    profile: config.profile,
                },
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
        if self.is_forked_child() {
            // Its thread lives in the parent only: nothing to stop or join here.
            std::mem::forget(collector);
            return;
        }
        if let Some(collector) = collector {
            self.shared.return_rings(collector.stop());
        }
    }
}

/// Reports a wait for room in record mode's ring of calls, if the call waited.
#[inline]
pub fn held_back_by_recording(waited: crate::record::WaitedSince) {
    if let (Some(since), Some(rt)) = (waited.0, runtime()) {
        rt.held_back_by_recording(since);
    }
}

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
    let recorded = crate::record::InitCall::of(&args.info);
    // SAFETY: forwarded from the caller.
    unsafe { init_profiling(context_out, mask, args) };
    // SAFETY: forwarded from the caller; the plugin wrote both just before.
    unsafe { crate::record::init(recorded, context_out, mask) };
}

/// The plugin's own part of `init`.
///
/// # Safety
/// As for [`init`].
unsafe fn init_profiling(context_out: *mut *mut c_void, mask: *mut i32, args: InitArgs) {
    if !context_out.is_null() {
        // SAFETY: non-NULL and writable (caller).
        unsafe { *context_out = std::ptr::null_mut() };
    }
    log::set_logger(args.logger);
    let rt = runtime_or_init();
    let shared = rt.shared;
    if shared.config.record && !rt.is_forked_child() {
        crate::record::begin(shared, args.info.version);
    }
    let _lifecycle = rt.lifecycle.lock().unwrap_or_else(|e| e.into_inner());
    if context_out.is_null() {
        // Nowhere to return a context: registering one would leave a live context that
        // no finalize can ever name, so the last finalize (summary, collector stop) would
        // never come.
        Counters::bump(&shared.counters.disabled_inits);
        return;
    }
    let enabled = rt.recording() && shared.config.mode != Mode::Off;
    let name = args.info.comm_name.clone().unwrap_or_default();
    let (hash, rank, n_ranks) = (args.info.comm_hash, args.info.rank, args.info.n_ranks);
    let info = args.info.clone();
    let Some(context) = shared.contexts.register(args.info, enabled) else {
        Counters::bump(&shared.counters.disabled_inits);
        log::warn(&format!(
            "too many communicators in this process (at most {}); comm {hash:#x} rank {rank} is not profiled",
            crate::context::MAX_CONTEXTS
        ));
        return;
    };
    // SAFETY: non-NULL and writable (caller).
    unsafe { *context_out = context as usize as *mut c_void };
    let chain_mask = match shared.config.chain.as_deref() {
        Some(spec) => chain::load_once(spec, info.version, shared.config.event_mask.bits())
            .zip(shared.contexts.slot_of(context))
            .map_or(0, |(chain, slot)| {
                chain.init(context, slot, &info, args.logger)
            }),
        None => 0,
    };
    if !enabled {
        if chain_mask != 0 && !mask.is_null() {
            // SAFETY: non-NULL and writable (caller).
            unsafe { *mask = chain_mask };
        }
        Counters::bump(&shared.counters.disabled_inits);
        log::info(&format!(
            "comm {hash:#x} rank {rank}: profiling off (NCCL_SCOREP_MODE=off or plugin disabled)"
        ));
        return;
    }
    if !mask.is_null() {
        // Only the kinds this API version has: a bit it does not define may mean another
        // event in this NCCL (a KernelStep on bit 15, NCCL PR #2316, where v7 has
        // KernelPhase), which must not be asked for.
        let ours = shared.config.event_mask.bits() & kinds::kinds_of_version(info.version);
        // SAFETY: non-NULL and writable (caller); NCCL reads it with relaxed atomics.
        unsafe { *mask = ours as i32 | chain_mask };
    }
    if shared.config.mode == Mode::Deferred {
        // Only the recording runs during the job: no collector, no sinks.
        log::info(&format!(
            "recording comm \"{name}\" {hash:#x} rank {rank}/{n_ranks} for a trace made \
             afterwards (NCCL_SCOREP_MODE=deferred), output {}",
            shared.run_dir.root().display()
        ));
        return;
    }
    let first_of_cycle = !rt.collecting.load(Ordering::Acquire);
    rt.ensure_collector();
    if first_of_cycle && scorep_mode::FORWARDING.load(Ordering::Relaxed) {
        scorep_mode::start_cycle(shared);
    }
    // The collector learns of the context through its first event or the finalize
    // record; tell it now so comms without events still appear in the output.
    rt.push_lifecycle(Record {
        time: crate::clock::ticks(),
        handle: 0,
        action: Action::Init { context },
    });
    log::info(&format!(
        "profiling comm \"{name}\" {hash:#x} rank {rank}/{n_ranks}, events {:#x}, output {}",
        shared.config.event_mask.bits(),
        shared.run_dir.root().display()
    ));
}

/// `finalize` for any version. The last finalize of the process drains and stops the
/// collector, so nothing of ours runs when NCCL unloads the library.
pub fn finalize(context: *mut c_void) {
    let Some(rt) = runtime() else { return };
    let value = context as u64;
    crate::boundary::panic_probe(value);
    let shared = rt.shared;
    let _lifecycle = rt.lifecycle.lock().unwrap_or_else(|e| e.into_inner());
    match shared.contexts.finalize(value) {
        Ok(done) => {
            if let Some(chain) = chain::get() {
                if let Some(slot) = shared.contexts.slot_of(value) {
                    chain.finalize(value, slot);
                }
                if done.last {
                    chain.report();
                }
            }
            if rt.recording() && shared.config.mode != Mode::Deferred {
                rt.push_lifecycle(Record {
                    time: crate::clock::ticks(),
                    handle: 0,
                    action: Action::Finalize { context: value },
                });
            }
            if done.last {
                if scorep_mode::FORWARDING.load(Ordering::Relaxed) {
                    scorep_mode::end_cycle(shared, false);
                }
                rt.stop_collector();
                shared.contexts.clear();
                rt.job_done();
                // NCCL may unload itself, and the logger with it, after its last
                // communicator: a later message goes to stderr instead.
                log::clear_logger();
                crate::c_string::forget_readable_memory();
                crate::decode::forget_names();
            }
        }
        Err(_) => Counters::bump(&shared.counters.bad_finalize),
    }
}

/// What the boundary does after it caught a panic: counts it and turns recording off for
/// the rest of the run.
fn on_panic() {
    if let Some(rt) = runtime() {
        Counters::bump(&rt.shared.counters.panics);
        if !rt.disabled.swap(true, Ordering::Relaxed) {
            log::warn("internal error (panic caught); profiling is off for the rest of the run");
        }
    }
}

/// What a dropped record is counted as; `None` for init and finalize records, which are
/// only dropped when no collector runs.
#[inline]
fn dropped_as(action: &Action) -> Option<Dropped> {
    match action {
        Action::Start { .. } => Some(Dropped::Start),
        Action::Stop => Some(Dropped::Stop),
        Action::State { .. } => Some(Dropped::State),
        Action::Init { .. } | Action::Finalize { .. } | Action::HeldBack { .. } => None,
    }
}
