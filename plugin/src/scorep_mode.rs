//! Score-P mode: when the process is measured by Score-P, NCCL's host-side API events also
//! become Score-P user regions on the calling thread, the OTF2 trace becomes a sidecar in
//! Score-P's experiment directory, and `scorep-clock.json` says how its time maps onto
//! Score-P's clock.
//!
//! **Nesting.** Score-P keeps a region stack per thread and aborts the application when a
//! region ends on a thread that did not enter it ("Task stack underflow"). Each thread
//! therefore keeps its own stack of the regions it entered, and only ever ends regions of
//! that stack, innermost first:
//!
//! - a stop on another thread than the start is never sent to Score-P (counted); the
//!   region is ended on its own thread at that thread's next NCCL callback, or when the
//!   region around it ends (counted as late);
//! - the tasks of a plan (Coll, P2p) all start, then stop in start order: they overlap but
//!   none calls another, so each task's region is ended when the next task of the plan
//!   starts (counted), which makes them siblings inside the plan and keeps the depth
//!   bounded whatever the plan's size;
//! - any other stop out of order on the same thread is deferred until the regions entered
//!   after it have ended;
//! - when an API call ends (GroupApi, CollApi, P2pApi) while regions entered inside it are
//!   still running, those are ended first (counted as cut short).
//!
//! By NCCL's call orders every forwarded kind starts
//! and stops on one thread: GroupApi, CollApi and P2pApi on the application thread,
//! KernelLaunch on the launching thread, Group/Coll/P2p inside one `hostStreamPlanTask`
//! call (the launching thread, or CUDA's callback thread for graphs). The rules above are
//! the guard for releases or paths that do otherwise.
//!
//! **Clock.** The same library is a Score-P metric plugin (`SCOREP_METRIC_PLUGINS=
//! nccl_scorep`), through which Score-P hands over its clock; clock pairs are read at
//! the start and end of each init/finalize cycle and once a second in between. Without
//! it, `SCOREP_TIMER=clock_gettime` makes Score-P's clock CLOCK_MONOTONIC_RAW, read
//! directly. Either way, a tiny "NCCL clock sync" region is entered and left at the
//! first init and the last finalize, and our time at its Enter recorded, so the merge can
//! also align on those.

use crate::boundary::{guarded, guarded_or};
use crate::clock;
use crate::config::{Config, Mode, ScorepParameters};
use crate::counters::Counters;
use crate::event::{DataType, Event, Func};
use crate::log;
use crate::shared::Shared;
use scorep_adapter::clock_file::{self, ClockFile, ClockPair, ClockSource};
use scorep_adapter::metric::{self, ClockFn, ClockSlot, MetricProperties, PluginInfo};
use scorep_adapter::{size_bucket, Parameter, Region, RegionHandle, UserApi};
use std::cell::{Cell, RefCell};
use std::ffi::{c_char, CStr, CString};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Set once Score-P's user API was found: the one check on the hot path.
pub static FORWARDING: AtomicBool = AtomicBool::new(false);

/// The clock Score-P handed over through the metric-plugin interface.
pub static SCOREP_CLOCK: ClockSlot = ClockSlot::new();

/// The region group of every region we enter.
const GROUP: &CStr = c"NCCL";
/// The names this library answers to as a metric plugin (`lib<name>.so`).
pub const METRIC_PLUGIN_NAMES: [&str; 2] = ["nccl_scorep", "nccl_profiler_scorep"];
/// Regions a thread may have open at once; deeper ones are not forwarded (counted).
const MAX_DEPTH: usize = 32;
/// Thread-local communicator labels kept before the cache starts over.
const MAX_LABELS: usize = 64;
/// Clock pairs taken between the start and the end of a cycle, at most one a second.
const PAIR_SPACING_NS: u64 = 1_000_000_000;
const MAX_PAIRS: usize = 100_000;
/// Samples kept per metric until Score-P collects them.
const MAX_SAMPLES: usize = 1 << 20;

/// Slots of the region table: three single regions, then one per function for CollApi,
/// P2pApi, Coll and P2p.
const FUNCS: usize = 16;
const REGION_SLOTS: usize = 3 + 4 * FUNCS;

struct ScorepState {
    api: UserApi,
    parameters: ScorepParameters,
    regions: [OnceLock<Region>; REGION_SLOTS],
    sync_region: Region,
    /// Around a thread's wait for room in its full ring.
    held_back_region: Region,
}

static STATE: OnceLock<ScorepState> = OnceLock::new();
/// Regions entered and not yet ended, all threads together.
static OPEN_REGIONS: AtomicI64 = AtomicI64::new(0);
static BYTES_PARAMETER: Parameter = Parameter::new(c"nccl.bytes");
static COMM_PARAMETER: Parameter = Parameter::new(c"nccl.comm");

/// One region this thread entered.
#[derive(Clone, Copy)]
struct Entered {
    /// Our event handle.
    handle: u64,
    region: RegionHandle,
    /// An API call: regions still open inside it are ended with it.
    is_api: bool,
    /// Stopped out of order; ended as soon as it is innermost.
    stopped: bool,
    /// A task of a plan (Coll or P2p): ended when the next task of the plan starts.
    is_task: bool,
}

thread_local! {
    static STACK: RefCell<Vec<Entered>> = const { RefCell::new(Vec::new()) };
    static COMM_LABELS: RefCell<Vec<(u64, CString)>> = const { RefCell::new(Vec::new()) };
    /// Tasks of the current plan this thread ended at the next task's start whose stop is
    /// still to come (those stops find nothing left to end).
    static TASKS_ENDED_EARLY: Cell<u32> = const { Cell::new(0) };
}

/// Looks for Score-P at the first `init`. Returns whether Score-P mode is on: the
/// process is measured by Score-P, and the configuration allows it.
pub fn activate(config: &Config) -> bool {
    if !matches!(config.mode, Mode::Auto | Mode::Scorep) {
        return false;
    }
    let api = match UserApi::find() {
        Ok(api) => api,
        Err(missing) => {
            if config.mode == Mode::Scorep {
                log::warn(&format!(
                    "NCCL_SCOREP_MODE=scorep, but {missing}; writing the standalone trace instead"
                ));
            }
            return false;
        }
    };
    if config.scorep_parameters != ScorepParameters::NONE && !api.has_parameters() {
        log::warn("Score-P has no SCOREP_User_ParameterString: regions get no parameters");
    }
    let state = ScorepState {
        api,
        parameters: config.scorep_parameters,
        regions: std::array::from_fn(|_| OnceLock::new()),
        sync_region: Region::new(clock_file::SYNC_REGION, GROUP),
        held_back_region: Region::new(crate::model::HELD_BACK_REGION, GROUP),
    };
    if STATE.set(state).is_err() {
        return true;
    }
    if config.scorep_experiment_dir.is_none() {
        log::warn(&format!(
            "Score-P mode: SCOREP_EXPERIMENT_DIRECTORY is not set, so the NCCL sidecar trace \
             goes to {} (set it to keep both in one place)",
            config.output_dir.display()
        ));
    }
    FORWARDING.store(true, Ordering::Release);
    true
}

fn state() -> Option<&'static ScorepState> {
    STATE.get()
}

/// The region slot of an event; its name is made only when the region is created.
fn region_slot(event: &Event) -> Option<usize> {
    let func_slot = |func: Func| (func as usize).min(FUNCS - 1);
    Some(match event {
        Event::GroupApi { .. } => 0,
        Event::KernelLaunch => 1,
        Event::Group => 2,
        Event::CollApi(c) => 3 + func_slot(c.func),
        Event::P2pApi(p) => 3 + FUNCS + func_slot(p.func),
        Event::Coll(c) => 3 + 2 * FUNCS + func_slot(c.func),
        Event::P2p(p) => 3 + 3 * FUNCS + func_slot(p.func),
        _ => return None,
    })
}

/// The region name of an event (of a kind [`region_slot`] accepts).
fn region_name(event: &Event) -> String {
    match event {
        Event::GroupApi { .. } => "ncclGroup".to_owned(),
        Event::KernelLaunch => "NCCL kernel launch".to_owned(),
        Event::Group => "NCCL plan enqueue".to_owned(),
        Event::CollApi(c) => format!("nccl{}", c.func.as_str()),
        Event::P2pApi(p) => format!("nccl{}", p.func.as_str()),
        Event::Coll(c) => format!("{} enqueue", c.func.as_str()),
        Event::P2p(p) => format!("{} enqueue", p.func.as_str()),
        _ => String::new(),
    }
}

fn payload_bytes(count: u64, datatype: DataType) -> Option<u64> {
    datatype.size().map(|size| count.saturating_mul(size))
}

/// Bytes and calls handed to NCCL's collective and point-to-point API (the metrics).
static BYTES_ISSUED: AtomicU64 = AtomicU64::new(0);
static CALLS_ISSUED: AtomicU64 = AtomicU64::new(0);

/// An event was started on this thread and got `handle`: enters its region.
#[inline(never)]
pub fn entered(shared: &Shared, event: &Event, handle: u64, context: u64) {
    let Some(state) = state() else { return };
    let Some(slot) = region_slot(event) else {
        return;
    };
    let is_task = matches!(event, Event::Coll(_) | Event::P2p(_));
    let (bytes, is_api) = match event {
        Event::CollApi(c) => (Some(payload_bytes(c.count, c.datatype)), true),
        Event::P2pApi(p) => (Some(payload_bytes(p.count, p.datatype)), true),
        Event::Coll(c) => (Some(payload_bytes(c.count, c.datatype)), false),
        Event::P2p(p) => (Some(payload_bytes(p.count, p.datatype)), false),
        Event::GroupApi { .. } => (None, true),
        _ => (None, false),
    };
    if let (true, Some(size)) = (is_api, bytes) {
        BYTES_ISSUED.fetch_add(size.unwrap_or(0), Ordering::Relaxed);
        CALLS_ISSUED.fetch_add(1, Ordering::Relaxed);
    }
    let region = state.regions[slot].get_or_init(|| Region::new(&region_name(event), GROUP));
    let Some(region) = region.handle(&state.api) else {
        Counters::bump(&shared.counters.scorep_not_forwarded);
        return;
    };
    let forwarded = STACK.try_with(|cell| {
        let Ok(mut stack) = cell.try_borrow_mut() else {
            return false;
        };
        end_finished(shared, state, &mut stack);
        if matches!(event, Event::Group) {
            let _ = TASKS_ENDED_EARLY.try_with(|n| n.set(0));
        }
        if is_task {
            // NCCL starts all tasks of a plan, then stops them: as Score-P regions they
            // are siblings inside the plan, each ended when the next one starts.
            if let Some(&previous) = stack.last().filter(|e| e.is_task && !e.stopped) {
                stack.pop();
                end(state, previous);
                Counters::bump(&shared.counters.scorep_tasks_ended_at_next);
                let _ = TASKS_ENDED_EARLY.try_with(|n| n.set(n.get().saturating_add(1)));
            }
        }
        if stack.len() >= MAX_DEPTH {
            return false;
        }
        if stack.capacity() == 0 {
            stack.reserve(MAX_DEPTH);
        }
        state.api.region_enter(region);
        OPEN_REGIONS.fetch_add(1, Ordering::Relaxed);
        Counters::bump(&shared.counters.scorep_regions_entered);
        stack.push(Entered {
            handle,
            region,
            is_api,
            stopped: false,
            is_task,
        });
        true
    });
    if forwarded != Ok(true) {
        Counters::bump(&shared.counters.scorep_not_forwarded);
        return;
    }
    // Parameters go to the innermost open region: the one just entered.
    if state.parameters.bytes {
        if let Some(size) = bytes {
            BYTES_PARAMETER.record(&state.api, size_bucket(size));
        }
    }
    if state.parameters.comm && !matches!(event, Event::GroupApi { .. }) {
        with_comm_label(shared, context, |label| {
            COMM_PARAMETER.record(&state.api, label)
        });
    }
}

/// Runs `f` with the communicator's label, from this thread's small cache.
fn with_comm_label(shared: &Shared, context: u64, f: impl FnOnce(&CStr)) {
    let _ = COMM_LABELS.try_with(|cell| {
        let Ok(mut labels) = cell.try_borrow_mut() else {
            return;
        };
        if let Some((_, label)) = labels.iter().find(|(c, _)| *c == context) {
            f(label);
            return;
        }
        let Some(info) = shared.contexts.info(context) else {
            return;
        };
        let text = match info.comm_name.as_deref() {
            Some(name) if !name.is_empty() => name.to_owned(),
            _ => format!("comm {:#x}", info.comm_hash),
        };
        if labels.len() >= MAX_LABELS {
            labels.clear();
        }
        let label = CString::new(text.replace('\0', " ")).unwrap_or_default();
        f(&label);
        labels.push((context, label));
    });
}

/// An event of a forwarded kind was stopped on this thread.
#[inline(never)]
pub fn stopped(shared: &Shared, handle: u64, is_task: bool) {
    let Some(state) = state() else { return };
    let result = STACK.try_with(|cell| {
        let Ok(mut stack) = cell.try_borrow_mut() else {
            return;
        };
        let Some(index) = stack.iter().rposition(|e| e.handle == handle) else {
            let ended_early = is_task
                && TASKS_ENDED_EARLY
                    .try_with(|n| {
                        let pending = n.get();
                        n.set(pending.saturating_sub(1));
                        pending > 0
                    })
                    .unwrap_or(false);
            if !ended_early {
                // Entered on another thread (or never entered): Score-P must not hear
                // of it.
                Counters::bump(&shared.counters.scorep_cross_thread_stops);
            }
            return;
        };
        stack[index].stopped = true;
        end_finished(shared, state, &mut stack);
        if stack.len() <= index {
            return;
        }
        if stack[index].is_api {
            // An API call ends: whatever it still has open inside ends with it.
            while stack.len() > index + 1 {
                if let Some(inner) = stack.pop() {
                    if !inner.stopped {
                        let counter = if shared.slab.check(inner.handle).is_ok() {
                            &shared.counters.scorep_truncated
                        } else {
                            &shared.counters.scorep_closed_late
                        };
                        Counters::bump(counter);
                    }
                    end(state, inner);
                }
            }
            if let Some(api) = stack.pop() {
                end(state, api);
            }
            end_finished(shared, state, &mut stack);
        } else {
            Counters::bump(&shared.counters.scorep_ends_deferred);
        }
    });
    if result.is_err() {
        Counters::bump(&shared.counters.scorep_not_forwarded);
    }
}

fn end(state: &ScorepState, entered: Entered) {
    state.api.region_end(entered.region);
    OPEN_REGIONS.fetch_sub(1, Ordering::Relaxed);
}

/// Ends innermost regions that are already stopped: out of order on this thread, or on
/// another thread (their handle is no longer live).
fn end_finished(shared: &Shared, state: &ScorepState, stack: &mut Vec<Entered>) {
    while let Some(&top) = stack.last() {
        if !top.stopped {
            if shared.slab.check(top.handle).is_ok() {
                break;
            }
            Counters::bump(&shared.counters.scorep_closed_late);
        }
        stack.pop();
        end(state, top);
    }
}

/// The last finalize: ends what the calling thread still has open and counts what other
/// threads have (their regions can only be ended on their own thread).
pub fn close_thread_at_finalize(shared: &Shared) {
    let Some(state) = state() else { return };
    let _ = STACK.try_with(|cell| {
        if let Ok(mut stack) = cell.try_borrow_mut() {
            while let Some(entered) = stack.pop() {
                if !entered.stopped {
                    Counters::bump(&shared.counters.scorep_closed_at_finalize);
                }
                end(state, entered);
            }
        }
    });
    let others = OPEN_REGIONS.load(Ordering::Relaxed).max(0) as u64;
    if others > 0 {
        shared
            .counters
            .scorep_left_open
            .fetch_add(others, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------------------
// Clock synchronisation.

struct SyncLog {
    source: ClockSource,
    pairs: Vec<ClockPair>,
    sync_ns: Vec<u64>,
    last_pair_ns: u64,
}

static SYNC: Mutex<Option<SyncLog>> = Mutex::new(None);

fn clock_source() -> ClockSource {
    if SCOREP_CLOCK.get().is_some() {
        ClockSource::MetricPlugin
    } else if std::env::var("SCOREP_TIMER").is_ok_and(|t| t.trim() == "clock_gettime") {
        ClockSource::ClockGettime
    } else {
        ClockSource::SyncRegions
    }
}

fn raw_monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid, writable timespec; the clock exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Both clocks at one instant: the narrowest of a few brackets of our clock around
/// Score-P's, at the bracket's middle.
fn pair_now(source: ClockSource) -> Option<ClockPair> {
    let read_scorep = || match source {
        ClockSource::MetricPlugin => SCOREP_CLOCK.read(),
        ClockSource::ClockGettime => Some(raw_monotonic_ns()),
        ClockSource::SyncRegions => None,
    };
    let mut best: Option<(u64, ClockPair)> = None;
    for _ in 0..5 {
        let before = clock::now_ns();
        let scorep = read_scorep()?;
        let after = clock::now_ns();
        let width = after.saturating_sub(before);
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((
                width,
                ClockPair {
                    ns: before + width / 2,
                    scorep,
                },
            ));
        }
    }
    best.map(|(_, pair)| pair)
}

/// A wait for room in a full ring, as a Score-P region on the waiting thread: entered
/// by [`held_back`], left when dropped. Nothing else enters or leaves a region on the
/// thread meanwhile (it is inside one callback), so it nests wherever it is.
pub struct HeldBackRegion {
    state: &'static ScorepState,
    region: RegionHandle,
}

impl Drop for HeldBackRegion {
    fn drop(&mut self) {
        self.state.api.region_end(self.region);
    }
}

/// In Score-P mode, enters the region of a wait on this thread, so that Score-P's own
/// profile and trace show the time the plugin held NCCL back.
#[cold]
pub fn held_back() -> Option<HeldBackRegion> {
    if !FORWARDING.load(Ordering::Acquire) {
        return None;
    }
    let state = state()?;
    let region = state.held_back_region.handle(&state.api)?;
    state.api.region_enter(region);
    Some(HeldBackRegion { state, region })
}

/// Enters and leaves "NCCL clock sync" on this thread; our time just before the Enter.
fn sync_region_now(state: &ScorepState) -> Option<u64> {
    let region = state.sync_region.handle(&state.api)?;
    let ns = clock::now_ns();
    state.api.region_enter(region);
    state.api.region_end(region);
    Some(ns)
}

/// The state the hot path and the collector share, for the counters of the metric plugin's
/// callbacks (set at the first cycle).
static SHARED: OnceLock<&'static Shared> = OnceLock::new();

/// The first init of an init/finalize cycle: the first sync point.
pub fn start_cycle(shared: &'static Shared) {
    let _ = SHARED.set(shared);
    let Some(state) = state() else { return };
    // Score-P initialises its measurement (and loads its metric plugins, which hands us
    // its clock) at its first API call if nothing called it before.
    let _ = state.sync_region.handle(&state.api);
    let source = clock_source();
    if source != ClockSource::MetricPlugin {
        if let Some(name) = our_metric_plugin_name() {
            log::warn(&metric_plugin_diagnosis(&name));
        }
    }
    let mut log = SyncLog {
        source,
        pairs: Vec::new(),
        sync_ns: Vec::new(),
        last_pair_ns: clock::now_ns(),
    };
    log.pairs.extend(pair_now(source));
    log.sync_ns.extend(sync_region_now(state));
    *SYNC.lock().unwrap_or_else(|e| e.into_inner()) = Some(log);
    log::info(&format!(
        "Score-P clock source: {}",
        match source {
            ClockSource::MetricPlugin => "the metric plugin (Score-P's own clock)",
            ClockSource::ClockGettime => "SCOREP_TIMER=clock_gettime (CLOCK_MONOTONIC_RAW)",
            ClockSource::SyncRegions =>
                "\"NCCL clock sync\" regions only (set SCOREP_METRIC_PLUGINS=nccl_scorep for Score-P's clock)",
        }
    ));
}

/// The first of our names in `SCOREP_METRIC_PLUGINS`, if any.
fn our_metric_plugin_name() -> Option<String> {
    let list = std::env::var("SCOREP_METRIC_PLUGINS").ok()?;
    list.split(',')
        .map(str::trim)
        .find(|name| METRIC_PLUGIN_NAMES.contains(name))
        .map(str::to_owned)
}

/// The path of the library that holds `address`.
fn library_of(address: *const std::ffi::c_void) -> Option<String> {
    // SAFETY: `Dl_info` is plain data; all-zero is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is writable; dladdr only reads the address.
    if unsafe { libc::dladdr(address, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr succeeded, so `dli_fname` is a NUL-terminated path.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(name.to_string_lossy().into_owned())
}

/// Why Score-P's clock did not reach this library although `SCOREP_METRIC_PLUGINS` names
/// it as `name`: Score-P did not load `lib<name>.so`, loaded another copy, or loaded this
/// one and handed over no clock.
fn metric_plugin_diagnosis(name: &str) -> String {
    let file = format!("lib{name}.so");
    let here = library_of(metric_plugin_info as fn() -> PluginInfo as *const std::ffi::c_void)
        .unwrap_or_else(|| "this library".to_owned());
    let Ok(c_file) = CString::new(file.as_str()) else {
        return format!("SCOREP_METRIC_PLUGINS={name}: not a library name");
    };
    // SAFETY: a valid C string; RTLD_NOLOAD only looks the library up, loading nothing.
    let handle = unsafe { libc::dlopen(c_file.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return format!(
            "SCOREP_METRIC_PLUGINS={name}, but Score-P did not load {file} (it is not in \
             LD_LIBRARY_PATH, or Score-P's measurement did not start): put a directory \
             where {file} is a link to {here} on LD_LIBRARY_PATH; Score-P's clock comes \
             from the \"NCCL clock sync\" regions instead"
        );
    }
    let symbol = CString::new(format!("SCOREP_MetricPlugin_{name}_get_info")).unwrap_or_default();
    // SAFETY: `handle` came from dlopen above; `symbol` is a valid C string.
    let theirs = unsafe { libc::dlsym(handle, symbol.as_ptr()) };
    let there = library_of(theirs).unwrap_or_else(|| file.clone());
    // SAFETY: balances the reference RTLD_NOLOAD took; the library stays loaded by Score-P.
    unsafe { libc::dlclose(handle) };
    if there != here {
        format!(
            "SCOREP_METRIC_PLUGINS={name}: Score-P loaded {there}, another copy of this \
             library ({here}), and handed its clock to that copy: make {file} a link to \
             the file NCCL loads (scripts/build-plugin.sh and an install do); Score-P's \
             clock comes from the \"NCCL clock sync\" regions instead"
        )
    } else {
        format!(
            "SCOREP_METRIC_PLUGINS={name}: Score-P loaded this library ({here}) but handed \
             over no clock yet; Score-P's clock comes from the \"NCCL clock sync\" regions"
        )
    }
}

/// The last finalize of a cycle (or process exit without one): the last sync point. At
/// exit Score-P may have finished already, so no region is entered then.
pub fn end_cycle(shared: &Shared, at_exit: bool) {
    let Some(state) = state() else { return };
    if !at_exit {
        close_thread_at_finalize(shared);
    }
    let mut guard = SYNC.lock().unwrap_or_else(|e| e.into_inner());
    let Some(log) = guard.as_mut() else { return };
    if let Some(pair) = pair_now(log.source) {
        log.pairs.push(pair);
    }
    if !at_exit {
        log.sync_ns.extend(sync_region_now(state));
    }
}

/// Called by the collector after each pass: a clock pair now and then, metric samples.
pub fn on_collector_pass() {
    if !FORWARDING.load(Ordering::Relaxed) {
        return;
    }
    let now = clock::now_ns();
    {
        let mut guard = SYNC.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(log) = guard.as_mut() {
            if now >= log.last_pair_ns + PAIR_SPACING_NS && log.pairs.len() < MAX_PAIRS {
                log.last_pair_ns = now;
                log.pairs.extend(pair_now(log.source));
            }
        }
    }
    sample_metrics();
}

/// The cycle's part (in `part_dir`) is finished: writes its `scorep-clock.json`.
pub fn part_finished(pid: i32, host: &str, part_dir: &Path) {
    if !FORWARDING.load(Ordering::Relaxed) {
        return;
    }
    let Some(log) = SYNC.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return;
    };
    let file = ClockFile {
        format: clock_file::FORMAT,
        pid,
        launcher_rank: nccl_scorep_common::job::launcher_rank(),
        hostname: host.to_owned(),
        source: log.source,
        pairs: log.pairs,
        sync_region: clock_file::SYNC_REGION.to_owned(),
        sync_ns: log.sync_ns,
    };
    match file.write_to(part_dir) {
        Ok(path) => log::info(&format!(
            "Score-P clock pairs written to {}",
            path.display()
        )),
        Err(error) => log::warn(&format!(
            "cannot write {} in {}: {error}; the sidecar cannot be aligned with Score-P's trace",
            clock_file::FILE_NAME,
            part_dir.display()
        )),
    }
}

// ---------------------------------------------------------------------------------------
// The metric plugin: Score-P's clock, and two asynchronous metrics.

struct MetricDef {
    name: &'static CStr,
    description: &'static CStr,
    unit: &'static CStr,
}

const METRICS: [MetricDef; 2] = [
    MetricDef {
        name: c"bytes_issued",
        description: c"Payload bytes handed to NCCL collective and point-to-point calls so far",
        unit: c"bytes",
    },
    MetricDef {
        name: c"calls_issued",
        description: c"NCCL collective and point-to-point calls so far",
        unit: c"calls",
    },
];

struct Samples {
    /// Score-P collects samples only between synchronize(BEGIN) and synchronize(END).
    window_open: bool,
    last: [Option<u64>; METRICS.len()],
    values: [Vec<metric::TimeValuePair>; METRICS.len()],
}

static SAMPLES: Mutex<Samples> = Mutex::new(Samples {
    window_open: false,
    last: [None; METRICS.len()],
    values: [Vec::new(), Vec::new()],
});

fn current_values() -> [u64; METRICS.len()] {
    [
        BYTES_ISSUED.load(Ordering::Relaxed),
        CALLS_ISSUED.load(Ordering::Relaxed),
    ]
}

fn sample_metrics() {
    let Some(clock) = SCOREP_CLOCK.get() else {
        return;
    };
    let mut samples = SAMPLES.lock().unwrap_or_else(|e| e.into_inner());
    if !samples.window_open {
        return;
    }
    // SAFETY: Score-P's clock function, callable from any thread.
    let timestamp = unsafe { clock() };
    for (index, value) in current_values().into_iter().enumerate() {
        if samples.last[index] == Some(value) {
            continue;
        }
        samples.last[index] = Some(value);
        if samples.values[index].len() >= MAX_SAMPLES {
            if let Some(shared) = SHARED.get() {
                Counters::bump(&shared.counters.scorep_metric_samples_dropped);
            }
            continue;
        }
        samples.values[index].push(metric::TimeValuePair { timestamp, value });
    }
}

/// `SCOREP_MetricPlugin_<name>_get_info`: an asynchronous, per-process plugin.
pub fn metric_plugin_info() -> PluginInfo {
    PluginInfo {
        plugin_version: metric::PLUGIN_VERSION,
        run_per: metric::per::PROCESS,
        sync: metric::sync::ASYNC,
        delta_t: 0,
        initialize: Some(metric_initialize),
        finalize: Some(metric_finalize),
        get_event_info: Some(metric_event_info),
        add_counter: Some(metric_add_counter),
        set_clock_function: Some(metric_set_clock),
        get_all_values: Some(metric_all_values),
        synchronize: Some(metric_synchronize),
        ..PluginInfo::zeroed()
    }
}

extern "C" fn metric_set_clock(clock: Option<ClockFn>) {
    guarded(|| SCOREP_CLOCK.set(clock));
}

extern "C" fn metric_initialize() -> i32 {
    0
}

extern "C" fn metric_finalize() {
    guarded(|| {
        SAMPLES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .window_open = false;
    });
}

/// A `malloc`ed copy of `text` (Score-P frees what it gets with `free`).
fn malloc_string(text: &CStr) -> *mut c_char {
    // SAFETY: strdup copies a valid C string into memory from malloc (NULL if none).
    unsafe { libc::strdup(text.as_ptr()) }
}

extern "C" fn metric_event_info(token: *mut c_char) -> *mut MetricProperties {
    guarded(|| event_info(token))
}

fn event_info(token: *mut c_char) -> *mut MetricProperties {
    let token = if token.is_null() {
        String::new()
    } else {
        // SAFETY: Score-P passes a C string (one token of SCOREP_METRIC_<NAME>).
        unsafe { CStr::from_ptr(token) }
            .to_string_lossy()
            .trim()
            .to_owned()
    };
    let chosen: Vec<&MetricDef> = METRICS
        .iter()
        .filter(|m| token == "*" || token == "all" || m.name.to_bytes() == token.as_bytes())
        .collect();
    if chosen.is_empty() {
        log::warn(&format!(
            "Score-P asked for metric {token:?}; this plugin has bytes_issued and calls_issued"
        ));
    }
    // Score-P requires a list (never NULL), ended by an entry whose name is NULL.
    let count = chosen.len() + 1;
    // SAFETY: calloc of `count` zeroed entries; zero is a valid MetricProperties (NULL
    // pointers, zero enums).
    let list: *mut MetricProperties =
        unsafe { libc::calloc(count, std::mem::size_of::<MetricProperties>()) }.cast();
    if list.is_null() {
        return list;
    }
    for (index, def) in chosen.iter().enumerate() {
        let entry = MetricProperties {
            name: malloc_string(def.name),
            description: malloc_string(def.description),
            mode: metric::mode::ACCUMULATED_START,
            value_type: metric::value_type::UINT64,
            base: metric::base::DECIMAL,
            exponent: 0,
            unit: malloc_string(def.unit),
        };
        // SAFETY: `index` < count - 1, inside the allocation.
        unsafe { list.add(index).write(entry) };
    }
    list
}

extern "C" fn metric_add_counter(name: *mut c_char) -> i32 {
    guarded_or(-1, || {
        if name.is_null() {
            return -1;
        }
        // SAFETY: Score-P passes back a name this plugin gave.
        let name = unsafe { CStr::from_ptr(name) };
        METRICS
            .iter()
            .position(|m| m.name == name)
            .map_or(-1, |index| index as i32)
    })
}

extern "C" fn metric_synchronize(is_responsible: u8, mode: u32) {
    guarded(|| {
        // A C `bool`, read as a byte: only 0 is false.
        if is_responsible == 0 {
            return;
        }
        let open = mode != metric::sync_mode::END;
        if !open {
            // A last sample at the end of the window.
            sample_metrics();
        }
        let mut samples = SAMPLES.lock().unwrap_or_else(|e| e.into_inner());
        samples.window_open = open;
        if open {
            samples.last = [None; METRICS.len()];
        }
    });
}

extern "C" fn metric_all_values(id: i32, list: *mut *mut metric::TimeValuePair) -> u64 {
    guarded(|| {
        if list.is_null() {
            return 0;
        }
        let values = {
            let mut samples = SAMPLES.lock().unwrap_or_else(|e| e.into_inner());
            match usize::try_from(id)
                .ok()
                .and_then(|i| samples.values.get_mut(i))
            {
                Some(values) => std::mem::take(values),
                None => Vec::new(),
            }
        };
        let size = std::mem::size_of::<metric::TimeValuePair>();
        // SAFETY: malloc for Score-P, which frees the list with free.
        let out: *mut metric::TimeValuePair =
            unsafe { libc::malloc(values.len().max(1) * size) }.cast();
        if out.is_null() {
            // SAFETY: `list` is writable (Score-P's).
            unsafe { *list = out };
            return 0;
        }
        // SAFETY: `out` holds values.len() pairs; `list` is writable.
        unsafe {
            std::ptr::copy_nonoverlapping(values.as_ptr(), out, values.len());
            *list = out;
        }
        values.len() as u64
    })
}
