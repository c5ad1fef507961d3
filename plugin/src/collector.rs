//! The collector thread: one per process while any communicator is profiled. It drains
//! every thread's ring, matches starts with their states and stops, resolves parents and
//! owners, closes what NCCL never closes, and hands finished events to the sinks, every
//! sink the same calls (see [`crate::sink::Sink`]).

use crate::clock::TickConverter;
use crate::context::ContextInfo;
use crate::counters::Counters;
use crate::event::{Action, Event, Kind, Record, Start, StateArg};
use crate::gpu_clock::GpuClockEstimator;
use crate::gpu_sanity::{self, HostBounds, Rejection};
use crate::handle;
use crate::kinds::{self, KindSet};
use crate::log;
use crate::memory;
use crate::model::{
    task_of_child, Closed, FinishedEvent, Gap, GpuInterval, HeldBack, HeldTasks, OpenView, Owner,
    Parent, StateRecord,
};
use crate::open_table::OpenTable;
use crate::ring::{Available, RingConsumer};
use crate::shared::Shared;
use crate::sink::{CycleEnd, Sink};
use rustc_hash::FxHashMap as HashMap;
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the collector drains the rings.
const POLL_INTERVAL: Duration = Duration::from_millis(2);
/// Closed events remembered for resolving later children (their parents stop first); a
/// power of two.
const REMEMBERED_CLOSED: usize = 1 << 16;
/// Groups whose first kernel launch is remembered; a power of two. A kernel that ends
/// after about that many later groups launched falls back to its API call's start.
const REMEMBERED_LAUNCHES: usize = 1 << 14;
/// Open ProxyOps with no step yet, per communicator rank, before the oldest is taken for
/// one NCCL never stops (non-network transports start ProxyOps and never stop them).
pub const MAX_STEPLESS_PROXY_OPS: usize = 2048;
/// States an event is allocated room for (a receive step has 3, most events fewer).
const STATES_CAPACITY: usize = 4;
/// Records a pass takes from one ring at most. What a pass finishes waits in the trace
/// writer's lanes until the pass ends: small passes keep that in the core's cache (with
/// 32 768 the collector ran a quarter slower; 2 048 was fastest in the throughput
/// benchmark).
const MAX_PASS_RECORDS: usize = 1 << 11;
/// Spare state vectors kept for reuse.
const MAX_SPARE_STATES: usize = 4096;
/// Stop/state records waiting for a start from another thread's ring.
const MAX_EARLY_RECORDS: usize = 1 << 16;
/// How often (in processed time) open events whose stop record was lost are looked for.
const LOST_STOP_SWEEP_NS: u64 = 1_000_000_000;
/// Heap freed since its last high point after which free pages go back to the system.
const TRIM_AFTER_FREEING: usize = 8 << 20;
/// How long (in processed time) a GPU interval waits before it is converted to host time:
/// the GPU clock estimate only gets tighter as kernels come, and the first kernels of a
/// run would otherwise be placed with its loosest bound (tens of microseconds late on a
/// busy machine). The estimate allows for the clocks' drift over it (see `gpu_clock`).
const GPU_HOLD_NS: u64 = 200_000_000;
/// How long (in processed time) after its GPU clock's first bound a GPU interval waits at
/// least. The first kernels have no earlier bounds, and where the host noticed them late
/// (processes starting on busy cores) the later, quicker noticings reach back to them only
/// with the steepest drift allowed; bounds over a second limit that drift, so the first
/// second of each GPU clock is converted with them.
const GPU_START_HOLD_NS: u64 = 1_000_000_000;
/// GPU intervals waiting for their conversion at most; the oldest goes first beyond.
const MAX_HELD_GPU_EVENTS: usize = 8192;

struct OpenEvent {
    kind: Kind,
    owner: Owner,
    parent: Parent,
    rank: i32,
    event: Event,
    start_ns: u64,
    start_thread: u32,
    states: Vec<StateRecord>,
}

impl OpenEvent {
    fn view<'a>(&'a self, handle: u64, tids: &[i32]) -> OpenView<'a> {
        OpenView {
            handle,
            kind: self.kind,
            owner: self.owner,
            parent: self.parent,
            start_ns: self.start_ns,
            start_tid: tid_of(tids, self.start_thread),
            event: &self.event,
        }
    }

    /// The last time NCCL told us something about this event.
    fn last_time(&self) -> u64 {
        self.states.last().map_or(self.start_ns, |s| s.time_ns)
    }
}

/// An event that closed, with what the sinks need of it beside its GPU times.
struct ClosedEvent {
    handle: u64,
    open: OpenEvent,
    stop_ns: u64,
    stop_thread: Option<u32>,
    closed: Closed,
    /// KernelCh and ProxyOp: their task's event when the task was still open.
    parent_event: Option<Event>,
}

/// A ProxyOp's steps as the collector follows them.
struct OpSteps {
    /// Its open steps: (step number, handle).
    open: Vec<(i32, u64)>,
    /// A step of it has started (one without may be an op NCCL never stops).
    stepped: bool,
}

/// A run's records as its ring holds them: up to the ring's end, then from its start.
struct RunParts<'a> {
    first: &'a [Record],
    second: &'a [Record],
    thread_index: u32,
}

impl<'a> RunParts<'a> {
    fn of(run: &'a Available<'_>) -> RunParts<'a> {
        let (first, second) = run.as_slices();
        RunParts {
            first,
            second,
            thread_index: run.thread_index,
        }
    }

    /// The `index`th record, if the run has so many.
    #[inline]
    fn get(&self, index: usize) -> Option<&'a Record> {
        match self.first.get(index) {
            Some(record) => Some(record),
            None => self.second.get(index - self.first.len()),
        }
    }
}

/// How an event ended, as the sinks are told.
#[derive(Clone, Copy)]
struct Ending {
    stop_ns: u64,
    stop_thread: Option<u32>,
    closed: Closed,
    gpu: Option<GpuInterval>,
    gpu_rejected: Option<Rejection>,
}

/// A KernelCh or KernelPhase whose GPU interval passed the checks and waits for the GPU
/// clock estimate to tighten before it is converted and handed to the sinks.
struct HeldGpuEvent {
    event: ClosedEvent,
    /// What to convert; `None`: a kernel event without GPU times (or rejected ones), held
    /// only to keep its place behind the held ones.
    gpu: Option<RawGpuInterval>,
    gpu_rejected: Option<Rejection>,
}

/// A GPU interval as NCCL gave it: the GPU's start and stop timestamps.
#[derive(Clone, Copy)]
struct RawGpuInterval {
    ptimers: (u64, u64),
}

/// What the checks of a GPU interval decided.
#[derive(Clone, Copy)]
enum GpuCheck {
    /// No GPU interval (not a kernel event, or no timestamps).
    None,
    Rejected(Rejection),
    /// Plausible: to be converted with the estimate of its communicator rank.
    Convert(RawGpuInterval),
}

/// What is remembered of an event after it closed.
#[derive(Clone, Copy)]
struct Known {
    kind: Kind,
    owner: Owner,
    start_ns: u64,
    /// The local parent's handle (0 when none or not ours).
    parent: u64,
}

/// Values kept per event handle in a table indexed by a hash of the handle: a newer
/// handle that lands on the same entry replaces an older one. No removal, no eviction
/// queue: one write per insert. With `N` entries, a value is kept until about that many
/// more have been inserted (fewer when entries collide).
struct HandleTable<V: Copy, const N: usize> {
    entries: Vec<(u64, V)>,
}

impl<V: Copy, const N: usize> HandleTable<V, N> {
    fn new(empty: V) -> Self {
        HandleTable {
            entries: vec![(0, empty); N],
        }
    }

    fn index(handle: u64) -> usize {
        // Fibonacci hashing: the top bits of the product mix every bit of the handle.
        (handle.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - N.trailing_zeros())) as usize
    }

    fn insert(&mut self, handle: u64, value: V) {
        self.entries[Self::index(handle)] = (handle, value);
    }

    fn get(&self, handle: u64) -> Option<V> {
        let (stored, value) = self.entries[Self::index(handle)];
        (stored == handle && handle != 0).then_some(value)
    }
}

/// Closed events. With [`REMEMBERED_CLOSED`] entries, an event is kept until about that
/// many more have closed.
type KnownTable = HandleTable<Known, REMEMBERED_CLOSED>;

/// When each GroupApi's first kernel launch started (host time), by the GroupApi's handle.
type FirstLaunches = HandleTable<u64, REMEMBERED_LAUNCHES>;

/// A running collector thread.
pub struct Collector {
    thread: JoinHandle<Vec<RingConsumer>>,
    stop: Arc<AtomicBool>,
}

impl Collector {
    /// Starts the collector of one init/finalize cycle, writing to `sinks`.
    pub fn start(shared: &'static Shared, sinks: Vec<Box<dyn Sink>>) -> std::io::Result<Collector> {
        let stop = Arc::new(AtomicBool::new(false));
        let stop_flag = Arc::clone(&stop);
        // The heap's peak of this cycle, for its report and its trace part.
        memory::BUDGET.reset_peak();
        // Built here, so the first clock calibration precedes every record of this cycle.
        let state = State::new(shared, sinks);
        // The thread must be running before NCCL can go on: a new thread's start-up takes
        // the dynamic loader's lock, and a process that unloads the plugin (dlclose) or
        // exits right after its first init holds that lock while our exit handler joins
        // the collector — a thread not yet started would never finish.
        let running = Arc::new(std::sync::Barrier::new(2));
        let running_in_thread = Arc::clone(&running);
        let thread = std::thread::Builder::new()
            .name("nccl-scorep".into())
            .spawn(move || {
                running_in_thread.wait();
                block_file_size_signal();
                let mut state = state;
                while !stop_flag.load(Ordering::Acquire) {
                    let more = state.pass(false);
                    if !more {
                        std::thread::park_timeout(POLL_INTERVAL);
                    }
                }
                state.finish()
            })?;
        running.wait();
        Ok(Collector { thread, stop })
    }

    /// Makes the thread run a pass now if it sleeps between passes.
    pub fn wake(&self) {
        self.thread.thread().unpark();
    }

    /// Drains everything, closes what is open, finishes the sinks and joins the thread.
    /// Returns the rings, for the next cycle.
    pub fn stop(self) -> Vec<RingConsumer> {
        self.stop.store(true, Ordering::Release);
        self.thread.thread().unpark();
        self.thread.join().unwrap_or_else(|_| {
            log::warn("the collector thread failed; the trace may be incomplete");
            Vec::new()
        })
    }
}

/// A write past the file size limit (`ulimit -f`) sends SIGXFSZ, whose default action
/// kills the process. Blocked on the collector thread, which does the trace's writing, the
/// write fails with EFBIG instead and the sink reports it; the application's own threads
/// keep their disposition. (A blocked, pending SIGXFSZ dies with the thread.)
fn block_file_size_signal() {
    // SAFETY: a signal set on the stack, initialised by sigemptyset before use; the call
    // changes this thread's mask only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGXFSZ);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// The collector's own state; lives on its thread.
struct State {
    shared: &'static Shared,
    rings: Vec<RingConsumer>,
    /// OS thread id per ring's thread index (-1 where unknown).
    tids: Vec<i32>,
    /// State vectors of closed events, kept for the next events (no allocation per event).
    spare_states: Vec<Vec<StateRecord>>,
    /// Which kinds are remembered after they close (see [`kinds::remembered_kinds`]).
    remembered: KindSet,
    /// Everything stamped before this time (CLOCK_MONOTONIC ns) has been processed.
    processed_until: u64,
    open: OpenTable<OpenEvent>,
    known: KnownTable,
    /// A lower bound of the GPU start of every kernel of a group (see `check_gpu_interval`).
    first_launches: FirstLaunches,
    /// Stop/state records that arrived before their start (another thread's ring).
    early: HashMap<u64, Vec<(u32, Record)>>,
    early_count: usize,
    /// Open events that NCCL had stopped (their handle no longer live) at the last sweep
    /// for lost stops, and when that sweep was (processed time).
    stop_lost_suspects: Vec<u64>,
    /// The plugin's heap at its last high point or return of free pages.
    heap_at_trim: usize,
    last_sweep_ns: u64,
    /// Events handed to the sinks and not yet added to the shared counter (once a pass).
    events_written: u64,
    /// ProxyOps by handle, with their open steps: found by slot like open events, for
    /// every step start and stop looks its op up.
    op_steps: OpenTable<OpSteps>,
    /// Step lists of stopped ProxyOps, kept for the next ones (no allocation per op).
    spare_step_lists: Vec<Vec<(i32, u64)>>,
    /// Per owner: ProxyOps in start order (those that got a step or stopped are removed
    /// lazily).
    stepless: HashMap<Owner, VecDeque<u64>>,
    /// Finalize records wait one pass, so events other threads pushed before are seen.
    finalizing: Vec<u64>,
    comms: HashMap<u64, Option<Arc<ContextInfo>>>,
    /// The context last looked up in `comms`, with its entry: most events are of the same
    /// communicator rank as the event before.
    last_comm: Option<(u64, Option<Arc<ContextInfo>>)>,
    sinks: Vec<Box<dyn Sink>>,
    clock: TickConverter,
    /// One GPU clock estimate per communicator rank (each rank drives one GPU).
    gpu_clocks: HashMap<u64, GpuClockEstimator>,
    /// GPU intervals waiting for their conversion, in the order they closed.
    held_gpu: VecDeque<HeldGpuEvent>,
    /// The tasks of the held kernel channels (their operations wait for them).
    held_tasks: HeldTasks,
}

impl State {
    fn new(shared: &'static Shared, sinks: Vec<Box<dyn Sink>>) -> State {
        State {
            shared,
            rings: Vec::new(),
            tids: Vec::new(),
            spare_states: Vec::new(),
            remembered: kinds::remembered_kinds(shared.config.event_mask),
            processed_until: 0,
            open: OpenTable::default(),
            known: KnownTable::new(Known {
                kind: Kind::Group,
                owner: Owner::Unknown,
                start_ns: 0,
                parent: 0,
            }),
            first_launches: FirstLaunches::new(0),
            early: HashMap::default(),
            early_count: 0,
            stop_lost_suspects: Vec::new(),
            heap_at_trim: 0,
            last_sweep_ns: 0,
            events_written: 0,
            op_steps: OpenTable::default(),
            spare_step_lists: Vec::new(),
            stepless: HashMap::default(),
            finalizing: Vec::new(),
            comms: HashMap::default(),
            last_comm: None,
            sinks,
            clock: TickConverter::new(),
            gpu_clocks: HashMap::default(),
            held_gpu: VecDeque::new(),
            held_tasks: HeldTasks::default(),
        }
    }

    /// One round: adopt new rings, drain all, process in time order.
    ///
    /// Records stamped after the pass began wait for the next one (unless `last`): another
    /// thread may have stamped an earlier record that its ring did not hold yet when it was
    /// drained (a Coll start behind the proxy thread's first KernelCh of it).
    ///
    /// A pass takes at most [`MAX_PASS_RECORDS`] records of each ring, so that what a
    /// pass holds back per timeline stays bounded when the collector lags; it returns
    /// whether it left records for an immediate next pass.
    fn pass(&mut self, last: bool) -> bool {
        let cutoff = if last {
            u64::MAX
        } else {
            crate::clock::ticks()
        };
        // Names the callbacks read since the last pass: those in read-only memory are
        // resolved by their address from now on.
        crate::decode::enter_offered_names();
        for ring in self.shared.take_new_rings() {
            let index = ring.shared.thread_index as usize;
            if self.tids.len() <= index {
                self.tids.resize(index + 1, -1);
            }
            self.tids[index] = ring.shared.os_tid;
            self.rings.push(ring);
        }
        // Finalize records seen in the previous pass are applied now: everything other
        // threads pushed before them has been drained by now.
        let finalizing = std::mem::take(&mut self.finalizing);
        let mut rings = std::mem::take(&mut self.rings);
        let gaps: Vec<TickGap> = rings.iter().filter_map(take_gap).collect();
        // What each ring holds now, and no more: records pushed during the pass wait for
        // the next one instead of making this pass chase the threads.
        let mut runs: Vec<Available<'_>> =
            rings.iter_mut().map(RingConsumer::read_available).collect();
        // Everything read was stamped before this calibration: it converts by
        // interpolation between two calibrations.
        self.clock.calibrate();
        for gap in gaps {
            let (first, last) = (self.clock.to_ns(gap.first), self.clock.to_ns(gap.last));
            let gap = Gap {
                tid: gap.tid,
                first_ns: first,
                last_ns: last.max(first),
                dropped_total: gap.dropped_total,
            };
            for sink in &mut self.sinks {
                sink.gap(&gap);
            }
        }
        // A ring with more than a pass takes bounds the pass in time: everything stamped
        // before its first record left out is in this pass (each ring is in time order).
        let limit = runs
            .iter()
            .filter(|run| run.len() > MAX_PASS_RECORDS)
            .map(|run| run.get(MAX_PASS_RECORDS).time.saturating_sub(1))
            .min();
        let mut limited = limit.is_some_and(|limit| limit < cutoff);
        let pass_cutoff = if limited {
            limit.unwrap_or(cutoff)
        } else {
            cutoff
        };
        self.processed_until = if last && !limited {
            u64::MAX
        } else {
            self.clock.to_ns(pass_cutoff)
        };
        let mut taken = self.apply_in_time_order(&runs, pass_cutoff);
        if limited && taken.iter().all(|&count| count == 0) {
            // Records sharing one time stamp across the limit: take them all.
            taken = self.apply_in_time_order(&runs, cutoff);
            limited = false;
        }
        for (run, count) in runs.drain(..).zip(taken) {
            run.commit(count);
        }
        drop(runs);
        let shared = self.shared;
        rings.retain(|ring| {
            let finished = ring.finished();
            if finished {
                count_ring_drops(shared, ring);
            }
            !finished
        });
        self.rings = rings;
        for context in finalizing {
            self.close_owned_by(Owner::Local(context), Closed::Finalize);
            // Its kernels before its end: nothing of it comes after this.
            self.release_held_gpu_events_of(context);
            for sink in &mut self.sinks {
                sink.comm_finalized(context);
            }
        }
        self.close_events_whose_stop_was_lost();
        let held_until = if memory::BUDGET.shedding() {
            u64::MAX
        } else {
            self.processed_until
        };
        self.release_held_gpu_events(held_until);
        self.end_of_pass();
        self.count_written_events();
        limited
    }

    /// Closes the open events whose stop NCCL gave but whose stop record was dropped (a
    /// full ring). Left open, they would be kept until the finalize, and every interval
    /// after them held back with them: memory that grows for as long as the overload
    /// lasts. An event is closed when its handle was no longer live at two sweeps in a row
    /// (a second or more apart, far longer than a record waits in a ring), or sooner when
    /// there are more open events than live handles can be.
    fn close_events_whose_stop_was_lost(&mut self) {
        // Above the memory limit's mark, events known to be stopped are not kept a second.
        let crowded = self.open.len() > self.shared.slab.capacity() || memory::BUDGET.shedding();
        if !crowded && self.processed_until < self.last_sweep_ns.saturating_add(LOST_STOP_SWEEP_NS)
        {
            return;
        }
        self.last_sweep_ns = self.processed_until;
        for handle in std::mem::take(&mut self.stop_lost_suspects) {
            if let Some(open) = self.open.remove(handle) {
                let last = open.last_time();
                self.finish_event(handle, open, last, None, Closed::StopLost);
            }
        }
        let slab = &self.shared.slab;
        self.stop_lost_suspects = self
            .open
            .handles()
            .filter(|&handle| slab.check(handle).is_err())
            .collect();
    }

    /// Applies the records of every run (each in time order: a ring holds one thread's
    /// records in the order they were stamped) in time order, up to `cutoff`: a k-way
    /// merge, stable (at equal times the earlier run first). Returns how many records of
    /// each run it applied; the others stay in their ring for the next pass.
    fn apply_in_time_order(&mut self, runs: &[Available<'_>], cutoff: u64) -> Vec<usize> {
        // Each run's records where the ring holds them, looked up once per pass.
        let parts: Vec<RunParts<'_>> = runs.iter().map(RunParts::of).collect();
        let mut taken = vec![0; runs.len()];
        loop {
            // The run with the earliest next record, and the next record of any other.
            let mut earliest: Option<(usize, u64)> = None;
            let mut runner_up = u64::MAX;
            for (index, part) in parts.iter().enumerate() {
                let Some(record) = part.get(taken[index]) else {
                    continue;
                };
                let time = record.time;
                if time > cutoff {
                    continue;
                }
                match earliest {
                    Some((_, best)) if time >= best => runner_up = runner_up.min(time),
                    _ => {
                        if let Some((_, best)) = earliest {
                            runner_up = runner_up.min(best);
                        }
                        earliest = Some((index, time));
                    }
                }
            }
            let Some((index, _)) = earliest else {
                break;
            };
            // Take that run's records as long as they come before every other run's.
            let part = &parts[index];
            let mut next = taken[index];
            // Read where it lies: a record is large, and most of it is not needed.
            while let Some(record) = part.get(next) {
                if next > taken[index] && (record.time >= runner_up || record.time > cutoff) {
                    break;
                }
                next += 1;
                let time = self.clock.to_ns(record.time);
                self.apply(part.thread_index, time, record);
            }
            taken[index] = next;
        }
        taken
    }

    /// Tells the sinks a pass ended, with the events still open (the trace writer places
    /// what none of them can precede any more).
    fn end_of_pass(&mut self) {
        self.give_back_freed_memory();
        for sink in &mut self.sinks {
            let mut open = self
                .open
                .iter()
                .map(|(handle, open)| open.view(handle, &self.tids));
            // Held GPU intervals count as open children of their tasks: their operations
            // wait for them. Operations are judged quiet by the time the records processed
            // have reached, not by the wall clock: a collector that lags must not close
            // them early.
            sink.end_of_pass(&mut open, &self.held_tasks, self.processed_until);
        }
    }

    /// Returns freed heap to the system after the plugin's heap shrank by a lot (a burst,
    /// or the memory limit's shedding): the C allocator keeps freed pages otherwise, and
    /// the process's resident memory would stay at its peak.
    fn give_back_freed_memory(&mut self) {
        let now = memory::BUDGET.in_use();
        if now > self.heap_at_trim {
            self.heap_at_trim = now;
        } else if self.heap_at_trim - now > TRIM_AFTER_FREEING {
            self.heap_at_trim = now;
            memory::return_free_pages();
        }
    }

    /// Applies `record`, stamped `time` (converted already).
    #[inline(always)]
    fn apply(&mut self, thread: u32, time: u64, record: &Record) {
        match &record.action {
            &Action::Start { context, ref start } => {
                self.start(thread, time, record.handle, context, start)
            }
            Action::State { .. } if memory::BUDGET.shedding() => {
                // Above the memory limit's mark an event's states do not grow.
                Counters::bump(&self.shared.counters.memory_limit_states);
            }
            &Action::State { state, arg } => match self.open.get_mut(record.handle) {
                Some(open) => open.states.push(StateRecord {
                    state,
                    time_ns: time,
                    thread,
                    arg,
                }),
                None => self.park_early(thread, Record { time, ..*record }),
            },
            Action::Stop => match self.open.remove(record.handle) {
                Some(open) => {
                    self.finish_event(record.handle, open, time, Some(thread), Closed::Stopped)
                }
                None => self.park_early(thread, Record { time, ..*record }),
            },
            &Action::Init { context } => {
                if let Some(info) = self.comm(context) {
                    for sink in &mut self.sinks {
                        sink.comm(context, &info);
                    }
                }
            }
            &Action::Finalize { context } => self.finalizing.push(context),
            &Action::HeldBack { since } => self.held_back(thread, since, time),
        }
    }

    /// Thread `thread` waited for room in its ring from `since` (clock ticks) until
    /// `until_ns`: counted, and shown to the sinks.
    #[cold]
    fn held_back(&mut self, thread: u32, since: u64, until_ns: u64) {
        let since_ns = self.clock.to_ns(since).min(until_ns);
        let waited = until_ns - since_ns;
        let counters = &self.shared.counters;
        Counters::bump(&counters.held_back);
        counters.held_back_ns.fetch_add(waited, Ordering::Relaxed);
        counters
            .held_back_longest_ns
            .fetch_max(waited, Ordering::Relaxed);
        let held = HeldBack {
            tid: tid_of(&self.tids, thread),
            since_ns,
            until_ns,
        };
        for sink in &mut self.sinks {
            sink.held_back(&held);
        }
    }

    /// Keeps a record (its time converted) until its event's start comes.
    fn park_early(&mut self, thread: u32, record: Record) {
        if self.early_count >= MAX_EARLY_RECORDS {
            Counters::bump(&self.shared.counters.orphan_records);
            return;
        }
        self.early_count += 1;
        self.early
            .entry(record.handle)
            .or_default()
            .push((thread, record));
    }

    fn start(&mut self, thread: u32, time: u64, handle: u64, context: u64, start: &Start) {
        let kind = start.event.kind();
        let (owner, parent) = self.owner_and_parent(kind, context, start);
        if kind == Kind::ProxyStep {
            self.track_step(handle, &parent, &start.event);
        }
        if kind == Kind::ProxyOp {
            self.track_stepless_op(handle, owner);
        }
        if let Owner::Local(context) = owner {
            self.learn_comm_from(context, start);
        }
        if let (
            Kind::KernelLaunch,
            Parent::Local {
                handle: group,
                kind: Kind::GroupApi,
            },
        ) = (kind, parent)
        {
            // Launches come in time order: the first one of a group is kept.
            if self.first_launches.get(group).is_none() {
                self.first_launches.insert(group, time);
            }
        }
        let open = OpenEvent {
            kind,
            owner,
            parent,
            rank: start.rank,
            event: start.event,
            start_ns: time,
            start_thread: thread,
            states: self
                .spare_states
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(STATES_CAPACITY)),
        };
        let view = open.view(handle, &self.tids);
        for sink in &mut self.sinks {
            sink.started(&view);
        }
        self.open.insert(handle, open);
        // Records of this event that another thread pushed and we saw first.
        if self.early_count == 0 {
            return;
        }
        if let Some(waiting) = self.early.remove(&handle) {
            self.early_count -= waiting.len();
            for (thread, record) in waiting {
                self.apply(thread, record.time, &record);
            }
        }
    }

    fn owner_and_parent(&mut self, kind: Kind, context: u64, start: &Start) -> (Owner, Parent) {
        if let Event::ProxyOp(op) = start.event {
            if op.pid != self.shared.pid {
                // PXN: both values belong to another address space; keep them as numbers.
                let parent = match start.parent {
                    0 => Parent::None,
                    value => Parent::Foreign { pid: op.pid, value },
                };
                return (
                    Owner::Foreign {
                        pid: op.pid,
                        context,
                    },
                    parent,
                );
            }
        }
        let (parent, parent_owner) = self.resolve_parent(start.parent);
        let owner = if kind.facts().trusted_context {
            Owner::Local(context)
        } else {
            // Steps and net events: the owner is the owner of the parent, never the
            // context argument (foreign under PXN).
            match parent {
                Parent::Local { .. } => parent_owner,
                // NCCL 2.28+ starts steps even when the ProxyOp was not recorded. The
                // context is then the only clue; it is used only if it is one of ours
                // (a PXN context of another process fails this check).
                Parent::None if self.shared.contexts.state(context).is_ok() => {
                    Owner::Local(context)
                }
                _ => Owner::Unknown,
            }
        };
        (owner, parent)
    }

    /// What `value` is as a parent, and the owner of that parent when it is one of ours
    /// and open or remembered (found by the same lookup).
    fn resolve_parent(&mut self, value: u64) -> (Parent, Owner) {
        if value == 0 {
            return (Parent::None, Owner::Unknown);
        }
        if let Some(open) = self.open.get(value) {
            let parent = Parent::Local {
                handle: value,
                kind: open.kind,
            };
            return (parent, open.owner);
        }
        if let Some(known) = self.known.get(value) {
            let parent = Parent::Local {
                handle: value,
                kind: known.kind,
            };
            return (parent, known.owner);
        }
        // Ours by its bits but forgotten (e.g. a capture-time CollApi replayed much later).
        if let Some(bits) = handle::decode(self.shared.slab.salt(), value) {
            let parent = Parent::Local {
                handle: value,
                kind: bits.kind,
            };
            return (parent, Owner::Unknown);
        }
        Counters::bump(&self.shared.counters.unresolved_parents);
        (Parent::Unresolved(value), Owner::Unknown)
    }

    /// A receive step that starts again for the same step number replaces the earlier
    /// start, which NCCL never stops.
    fn track_step(&mut self, handle: u64, parent: &Parent, event: &Event) {
        let (Parent::Local { handle: op, .. }, Event::ProxyStep { step }) = (parent, event) else {
            return;
        };
        let (op, step) = (*op, *step);
        let spare = &mut self.spare_step_lists;
        let steps = self.op_steps.get_or_insert_with(op, || OpSteps {
            open: spare.pop().unwrap_or_default(),
            stepped: false,
        });
        steps.stepped = true;
        let steps = &mut steps.open;
        let replaced = steps
            .iter()
            .position(|&(s, _)| s == step)
            .map(|index| steps.swap_remove(index).1);
        steps.push((step, handle));
        if let Some(old) = replaced {
            if self.open.contains_key(old) {
                Counters::bump(&self.shared.counters.restarted_steps);
                let last = self.open.get(old).map_or(0, OpenEvent::last_time);
                self.close(old, last, None, Closed::Restarted);
                let _ = self.shared.slab.release(old);
            }
        }
    }

    fn track_stepless_op(&mut self, handle: u64, owner: Owner) {
        let open = self.spare_step_lists.pop().unwrap_or_default();
        self.op_steps.insert(
            handle,
            OpSteps {
                open,
                stepped: false,
            },
        );
        let queue = self.stepless.entry(owner).or_default();
        queue.push_back(handle);
        // Entries whose op got a step or stopped are removed lazily, here.
        while queue.len() > MAX_STEPLESS_PROXY_OPS {
            let Some(oldest) = queue.pop_front() else {
                break;
            };
            if self.op_steps.get(oldest).is_none_or(|op| op.stepped) {
                continue;
            }
            if let Some(open) = self.open.get(oldest) {
                let at = open.last_time();
                Counters::bump(&self.shared.counters.abandoned_proxy_ops);
                self.close(oldest, at, None, Closed::Abandoned);
                let _ = self.shared.slab.release(oldest);
            }
            if let Some(op) = self.op_steps.remove(oldest) {
                self.reuse_step_list(op.open);
            }
            break;
        }
    }

    /// Profiler API v1–v3 give `init` no communicator information; NCCL 2.23–2.25 put the
    /// hash (and the rank) in every Coll/P2p descriptor instead. The first one completes
    /// the context, and a second `comm` line says so.
    fn learn_comm_from(&mut self, context: u64, start: &Start) {
        let hash = match start.event {
            Event::Coll(c) => c.comm_hash,
            Event::P2p(p) => p.comm_hash,
            _ => return,
        };
        if hash == 0 {
            return;
        }
        let Some(Some(cached)) = self.comms.get_mut(&context) else {
            return;
        };
        if cached.comm_hash != 0 {
            return;
        }
        // The copy kept for the next lookup would make `make_mut` clone the description.
        self.last_comm = None;
        let info = Arc::make_mut(cached);
        info.comm_hash = hash;
        info.rank = start.rank;
        let info = Arc::clone(cached);
        for sink in &mut self.sinks {
            sink.comm(context, &info);
        }
    }

    fn comm(&mut self, context: u64) -> Option<Arc<ContextInfo>> {
        cached_comm(&mut self.comms, self.shared, context).cloned()
    }

    fn close(&mut self, handle: u64, stop_ns: u64, stop_thread: Option<u32>, closed: Closed) {
        if let Some(open) = self.open.remove(handle) {
            self.finish_event(handle, open, stop_ns, stop_thread, closed);
        }
    }

    /// Hands an event that was open to the sinks.
    fn finish_event(
        &mut self,
        handle: u64,
        open: OpenEvent,
        stop_ns: u64,
        stop_thread: Option<u32>,
        closed: Closed,
    ) {
        match open.kind {
            Kind::ProxyStep => {
                if let Parent::Local { handle: op, .. } = open.parent {
                    if let Some(op) = self.op_steps.get_mut(op) {
                        op.open.retain(|&(_, h)| h != handle);
                    }
                }
            }
            Kind::ProxyOp => {
                if let Some(op) = self.op_steps.remove(handle) {
                    for &(_, step) in &op.open {
                        if self.open.contains_key(step) {
                            Counters::bump(&self.shared.counters.closed_with_parent);
                            self.close(step, stop_ns, None, Closed::ParentStopped);
                            let _ = self.shared.slab.release(step);
                        }
                    }
                    self.reuse_step_list(op.open);
                }
            }
            _ => {}
        }
        if self.remembered.has(open.kind) {
            self.remember(
                handle,
                Known {
                    kind: open.kind,
                    owner: open.owner,
                    start_ns: open.start_ns,
                    parent: local_handle(open.parent),
                },
            );
        }
        let check = self.check_gpu_interval(&open);
        let parent_event = match (open.kind, open.parent) {
            (Kind::KernelCh | Kind::ProxyOp, Parent::Local { handle, .. }) => {
                self.open.get(handle).map(|task| task.event)
            }
            _ => None,
        };
        let (raw, gpu_rejected) = match check {
            GpuCheck::None => (None, None),
            GpuCheck::Rejected(rejection) => (None, Some(rejection)),
            GpuCheck::Convert(gpu) => (Some(gpu), None),
        };
        let is_kernel = matches!(open.kind, Kind::KernelCh | Kind::KernelPhase);
        if is_kernel {
            let view = open.view(handle, &self.tids);
            for sink in &mut self.sinks {
                sink.kernel_ended(&view, stop_ns, closed);
            }
        }
        if raw.is_some() || (is_kernel && !self.held_gpu.is_empty()) {
            let event = ClosedEvent {
                handle,
                open,
                stop_ns,
                stop_thread,
                closed,
                parent_event,
            };
            // Kernel events leave in the order they closed: one written ahead of held
            // ones would push them later on their channel's stream.
            if let Some(task) = task_of_child(event.open.kind, &event.open.parent) {
                self.held_tasks.add(task);
            }
            self.held_gpu.push_back(HeldGpuEvent {
                event,
                gpu: raw,
                gpu_rejected,
            });
            return;
        }
        let ending = Ending {
            stop_ns,
            stop_thread,
            closed,
            gpu: None,
            gpu_rejected,
        };
        self.show_to_sinks(handle, &open, ending, parent_event.as_ref());
        self.reuse_states(open.states);
    }

    /// Converts and hands to the sinks the held GPU intervals that closed before
    /// `until_ns - GPU_HOLD_NS` and whose GPU clock got its first bound before `until_ns -
    /// GPU_START_HOLD_NS` (and the oldest beyond [`MAX_HELD_GPU_EVENTS`]), each with its
    /// communicator rank's estimate as it stands now.
    fn release_held_gpu_events(&mut self, until_ns: u64) {
        while let Some(front) = self.held_gpu.front() {
            let clock_since = match front.event.open.owner {
                Owner::Local(context) => self
                    .gpu_clocks
                    .get(&context)
                    .and_then(GpuClockEstimator::first_bound_ns),
                _ => None,
            };
            let due = front.event.stop_ns.saturating_add(GPU_HOLD_NS) <= until_ns
                && clock_since
                    .is_none_or(|since| since.saturating_add(GPU_START_HOLD_NS) <= until_ns);
            if !due && self.held_gpu.len() <= MAX_HELD_GPU_EVENTS {
                break;
            }
            let held = self.held_gpu.pop_front().expect("a front");
            self.hand_held_to_sinks(held);
        }
    }

    /// Converts and hands to the sinks every held event of communicator rank `context`, in
    /// the order they closed; the others keep waiting (each rank's kernels have streams
    /// of their own, and a rank's estimate does not depend on when another one ended).
    fn release_held_gpu_events_of(&mut self, context: u64) {
        let owner = Owner::Local(context);
        if !self
            .held_gpu
            .iter()
            .any(|held| held.event.open.owner == owner)
        {
            return;
        }
        let (mine, others): (VecDeque<HeldGpuEvent>, VecDeque<HeldGpuEvent>) = self
            .held_gpu
            .drain(..)
            .partition(|held| held.event.open.owner == owner);
        self.held_gpu = others;
        for held in mine {
            self.hand_held_to_sinks(held);
        }
    }

    fn hand_held_to_sinks(&mut self, held: HeldGpuEvent) {
        if let Some(task) = task_of_child(held.event.open.kind, &held.event.open.parent) {
            self.held_tasks.remove(task);
        }
        let clock = match held.event.open.owner {
            Owner::Local(context) => self.gpu_clocks.get(&context),
            _ => None,
        };
        let gpu = clock
            .zip(held.gpu)
            .and_then(|(clock, raw)| convert(clock, raw));
        self.hand_to_sinks(held.event, gpu, held.gpu_rejected);
    }

    /// Hands a held event to every sink, with its GPU interval on the host clock (or why
    /// NCCL's was rejected).
    fn hand_to_sinks(
        &mut self,
        event: ClosedEvent,
        gpu: Option<GpuInterval>,
        gpu_rejected: Option<Rejection>,
    ) {
        let ending = Ending {
            stop_ns: event.stop_ns,
            stop_thread: event.stop_thread,
            closed: event.closed,
            gpu,
            gpu_rejected,
        };
        self.show_to_sinks(
            event.handle,
            &event.open,
            ending,
            event.parent_event.as_ref(),
        );
        self.reuse_states(event.open.states);
    }

    /// Keeps a stopped ProxyOp's step list for a later one.
    fn reuse_step_list(&mut self, mut steps: Vec<(i32, u64)>) {
        if self.spare_step_lists.len() < MAX_SPARE_STATES {
            steps.clear();
            self.spare_step_lists.push(steps);
        }
    }

    /// Keeps a closed event's state vector for a later event (no allocation per event).
    fn reuse_states(&mut self, mut states: Vec<StateRecord>) {
        if self.spare_states.len() < MAX_SPARE_STATES {
            states.clear();
            self.spare_states.push(states);
        }
    }

    /// Shows a closed event to every sink. Its parts are borrowed, not moved: an event
    /// is large, and most go to the sinks straight from [`State::finish_event`].
    fn show_to_sinks(
        &mut self,
        handle: u64,
        open: &OpenEvent,
        ending: Ending,
        parent_event: Option<&Event>,
    ) {
        let Ending {
            stop_ns,
            stop_thread,
            closed,
            gpu,
            gpu_rejected,
        } = ending;
        let comm = match open.owner {
            Owner::Local(context) => {
                if self
                    .last_comm
                    .as_ref()
                    .is_none_or(|&(last, _)| last != context)
                {
                    let info = cached_comm(&mut self.comms, self.shared, context).cloned();
                    self.last_comm = Some((context, info));
                }
                self.last_comm
                    .as_ref()
                    .and_then(|(_, info)| info.as_deref())
            }
            _ => None,
        };
        let finished = FinishedEvent {
            handle,
            kind: open.kind,
            owner: open.owner,
            // Kinds whose descriptor carries the rank keep it (0 is a real rank there);
            // the others (rank left 0 by NCCL) take the communicator's.
            rank: comm
                .filter(|_| !open.kind.facts().descriptor_sets_rank)
                .map_or(open.rank, |c| c.rank),
            comm,
            parent: open.parent,
            event: open.event,
            start_ns: open.start_ns,
            start_tid: tid_of(&self.tids, open.start_thread),
            stop_ns: stop_ns.max(open.start_ns),
            stop_tid: stop_thread.map(|t| tid_of(&self.tids, t)),
            states: &open.states,
            closed,
            gpu,
            gpu_rejected,
            parent_event,
        };
        self.events_written += 1;
        for sink in &mut self.sinks {
            sink.event(&finished);
        }
    }

    /// Adds the events written since the last call to the shared counter: one atomic
    /// addition per pass instead of one per event.
    fn count_written_events(&mut self) {
        let written = std::mem::take(&mut self.events_written);
        if written > 0 {
            self.shared
                .counters
                .events_written
                .fetch_add(written, Ordering::Relaxed);
        }
    }

    fn remember(&mut self, handle: u64, known: Known) {
        self.known.insert(handle, known);
    }

    /// Checks a KernelCh's (or a KernelPhase's) GPU interval against what the host saw
    /// ([`gpu_sanity`]) and feeds a plausible KernelCh's bounds to its communicator's GPU
    /// clock estimate; the interval is converted to host time later (see
    /// [`GPU_HOLD_NS`]). A rejected interval is counted and never reaches the estimate:
    /// its event keeps its host-side times.
    fn check_gpu_interval(&mut self, open: &OpenEvent) -> GpuCheck {
        let Owner::Local(context) = open.owner else {
            return GpuCheck::None;
        };
        let stop_ptimer = open.states.iter().find_map(|s| match s.arg {
            StateArg::PTimer(t) => Some((s.time_ns, t)),
            _ => None,
        });
        let start_ptimer = match open.event {
            Event::KernelCh {
                ptimer: Some(t), ..
            }
            | Event::KernelPhase { ptimer: t, .. } => t,
            _ => return GpuCheck::None,
        };
        let Some((seen_end_ns, stop_ptimer_value)) = stop_ptimer else {
            return GpuCheck::None;
        };
        if start_ptimer == 0 {
            return GpuCheck::None;
        }
        // The operation's task (the parent of a KernelCh) was enqueued before the kernel
        // started, and so before NCCL noticed that start: a task that started later is
        // not this kernel's (a stale parent whose handle was reused).
        let task = (open.kind == Kind::KernelCh)
            .then(|| self.known_or_open(local_handle(open.parent)))
            .flatten()
            .filter(|task| task.kind.facts().is_task && task.start_ns <= open.start_ns);
        let bounds = HostBounds {
            not_before_ns: task.map(|task| task.start_ns),
            seen_start_ns: open.start_ns,
            seen_end_ns,
        };
        let proven = self
            .gpu_clocks
            .get(&context)
            .map(GpuClockEstimator::bounds)
            .unwrap_or_default();
        if let Err(rejection) = gpu_sanity::check(start_ptimer, stop_ptimer_value, bounds, proven) {
            let counters = &self.shared.counters;
            Counters::bump(match (open.kind, rejection) {
                (Kind::KernelPhase, _) => &counters.gpu_phases_rejected,
                (_, Rejection::EndBeforeStart) => &counters.gpu_end_before_start,
                (_, Rejection::BeyondHostBounds) => &counters.gpu_beyond_host_bounds,
                (_, Rejection::ClockJump) => &counters.gpu_clock_jumps,
            });
            return GpuCheck::Rejected(rejection);
        }
        if open.kind == Kind::KernelCh {
            let not_before = self.kernel_not_before(task, open.start_ns);
            let clock = self.gpu_clocks.entry(context).or_default();
            clock.observed_after(open.start_ns, start_ptimer);
            clock.observed_after(seen_end_ns, stop_ptimer_value);
            if let Some(not_before) = not_before {
                clock.happened_before(not_before, start_ptimer);
            }
        }
        if !self.gpu_clocks.contains_key(&context) {
            // A KernelPhase before any kernel of its rank: nothing to convert it with.
            return GpuCheck::None;
        }
        GpuCheck::Convert(RawGpuInterval {
            ptimers: (start_ptimer, stop_ptimer_value),
        })
    }

    /// The latest host time known to lie before a kernel started: its operation's API
    /// call came before it, and so did the first kernel launch of the API call's group
    /// (NCCL launches a group's kernels after its last API call, each kernel after the
    /// launch that runs it). `seen_start_ns`: when NCCL noticed the kernel start.
    fn kernel_not_before(&self, task: Option<Known>, seen_start_ns: u64) -> Option<u64> {
        let api = task
            .and_then(|task| self.known_or_open(task.parent))
            .filter(|api| api.kind.facts().is_api_call)?;
        let launched = self
            .first_launches
            .get(api.parent)
            // A launch out of that order is not this kernel's: the API call's bound stays.
            .filter(|&launch_ns| launch_ns >= api.start_ns && launch_ns <= seen_start_ns);
        Some(launched.unwrap_or(api.start_ns))
    }

    /// What is known of an event, open or closed.
    fn known_or_open(&self, handle: u64) -> Option<Known> {
        if handle == 0 {
            return None;
        }
        self.open
            .get(handle)
            .map(|open| Known {
                kind: open.kind,
                owner: open.owner,
                start_ns: open.start_ns,
                parent: local_handle(open.parent),
            })
            .or_else(|| self.known.get(handle))
    }

    /// Closes every open event that `keep` does not keep, at its last record.
    fn close_owned_by_filter(&mut self, keep: impl Fn(u64, &OpenEvent) -> bool, closed: Closed) {
        let mut handles: Vec<(u64, u64)> = self
            .open
            .iter()
            .filter(|&(handle, open)| !keep(handle, open))
            .map(|(handle, open)| (open.last_time(), handle))
            .collect();
        handles.sort_unstable();
        for (last, handle) in handles {
            if self.open.contains_key(handle) {
                Counters::bump(&self.shared.counters.closed_at_finalize);
                self.close(handle, last, None, closed);
                // A chained plugin still has the event: NCCL's stop frees it.
                if !self.shared.slab.keep_for_chain(handle) {
                    let _ = self.shared.slab.release(handle);
                }
            }
        }
    }

    fn close_owned_by(&mut self, owner: Owner, closed: Closed) {
        // ProxyCtrl events belong to the proxy thread, which split children sharing it
        // keep running after this comm's finalize, still with its context; so do the
        // ProxyOps (and their channels' kernels) of those children's operations: they
        // end with their own stop, or at the last finalize.
        let serving_another_comm: HashSet<u64> = self
            .open
            .iter()
            .filter(|(_, open)| open.owner == owner)
            .filter(|(_, open)| {
                self.known_or_open(local_handle(open.parent))
                    .is_some_and(|parent| parent.owner != owner)
            })
            .map(|(handle, _)| handle)
            .collect();
        self.close_owned_by_filter(
            |handle, open| {
                open.owner != owner
                    || open.kind == Kind::ProxyCtrl
                    || serving_another_comm.contains(&handle)
            },
            closed,
        );
    }

    /// The last round: drain, close everything, report.
    fn finish(mut self) -> Vec<RingConsumer> {
        // Everything left, then once more for the finalize records of the last pass.
        while self.pass(true) {}
        while self.pass(true) {}
        for ring in &self.rings {
            count_ring_drops(self.shared, ring);
        }
        self.close_owned_by_filter(|_, _| false, Closed::Finalize);
        self.release_held_gpu_events(u64::MAX);
        let orphans = self.early_count as u64;
        if orphans > 0 {
            self.shared
                .counters
                .orphan_records
                .fetch_add(orphans, Ordering::Relaxed);
        }
        self.count_written_events();
        let counters = self.shared.counters.snapshot();
        let losses = self.shared.counters.losses();
        let end = CycleEnd {
            counters: &counters,
        };
        for sink in &mut self.sinks {
            sink.finish(&end);
        }
        let rejected: Vec<String> = [
            "gpu_end_before_start",
            "gpu_beyond_host_bounds",
            "gpu_clock_jumps",
            "gpu_phases_rejected",
        ]
        .iter()
        .filter(|name| counters[**name] > 0)
        .map(|name| format!("{name}={}", counters[*name]))
        .collect();
        if !rejected.is_empty() {
            // The trace's times of those operations are not the GPU's: the user must know.
            log::warn(&format!(
                "NCCL reported impossible GPU times; those kernel intervals were rejected and \
                 their operations use host-side times (nccl.gpu_time_rejected in the trace): {}",
                rejected.join(", ")
            ));
        }
        let (refused, states) = (
            counters["memory_limit_events"],
            counters["memory_limit_states"],
        );
        if refused + states > 0 {
            // The trace is thinner than the job: the user must know, and what to change.
            log::warn(&format!(
                "the plugin's heap reached its limit (NCCL_SCOREP_MEMORY_LIMIT={}; peak {}): \
                 {refused} events were refused and {states} step states dropped while it was \
                 above 7/8 of it; raise the limit to keep them",
                memory::mib(memory::BUDGET.limit()),
                memory::mib(memory::BUDGET.peak()),
            ));
        }
        let held_back = counters["held_back"];
        if held_back > 0 {
            // The plugin took NCCL's time: the user must know how much, and what to change.
            let ms = |ns: u64| ns as f64 / 1e6;
            let times = match held_back {
                1 => "once".to_owned(),
                n => format!("{n} times"),
            };
            log::warn(&format!(
                "NCCL's threads waited {times} for room in the plugin's buffers, \
                 {:.3} ms in all, the longest {:.3} ms: nothing was lost, but NCCL was held \
                 back that long (\"NCCL held back by the plugin\" in the trace); a larger \
                 NCCL_SCOREP_BUFFER_SIZE, NCCL_SCOREP_STEP_DETAIL=summary or fewer \
                 NCCL_SCOREP_EVENTS hold it back less",
                ms(counters["held_back_ns"]),
                ms(counters["held_back_longest_ns"]),
            ));
        }
        if losses.is_empty() {
            log::info(&format!(
                "{} events recorded, nothing lost",
                counters["events_written"]
            ));
        } else {
            let listed = losses
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect::<Vec<_>>()
                .join(", ");
            let count = |name: &str| losses.get(name).copied().unwrap_or(0);
            // `ring_full` holds the lost stops and states too.
            let dropped = count("ring_full") + count("slab_full");
            if dropped > 0 {
                // Gaps in the trace: the user must know, and what to change.
                log::warn(&format!(
                    "{} events recorded, {dropped} records dropped, {} of them starts of \
                     events the trace lacks (the trace has gaps; NCCL_SCOREP_BUFFER_SIZE or \
                     NCCL_SCOREP_ON_FULL=wait keep more): {listed}",
                    counters["events_written"],
                    count("lost_starts") + count("slab_full"),
                ));
            } else {
                log::info(&format!(
                    "{} events recorded; refused or repaired: {listed}",
                    counters["events_written"]
                ));
            }
        }
        self.shared.counters.reset();
        self.rings
    }
}

/// Adds what `ring` dropped since it was last counted to `ring_full`, and its starts and
/// states among them to `lost_starts` and `lost_states`.
fn count_ring_drops(shared: &Shared, ring: &RingConsumer) {
    let counters = &shared.counters;
    for (count, counter) in [
        (&ring.shared.dropped, &counters.ring_full),
        (&ring.shared.dropped_starts, &counters.lost_starts),
        (&ring.shared.dropped_states, &counters.lost_states),
    ] {
        counter.fetch_add(count.take_new(), Ordering::Relaxed);
    }
}

/// A GPU interval on the host clock, each end with the estimate of its own moment.
fn convert(clock: &GpuClockEstimator, raw: RawGpuInterval) -> Option<GpuInterval> {
    let (start, stop) = raw.ptimers;
    let at_start = clock.estimate_at(start)?;
    let at_stop = clock.estimate_at(stop)?;
    let start_ns = at_start.to_host(start);
    Some(GpuInterval {
        start_ns,
        stop_ns: at_stop.to_host(stop).max(start_ns),
        error_ns: at_start
            .error_ns
            .zip(at_stop.error_ns)
            .map(|(a, b)| a.max(b)),
    })
}

/// A context's description, looked up once (`None` for a context not ours).
fn cached_comm<'a>(
    comms: &'a mut HashMap<u64, Option<Arc<ContextInfo>>>,
    shared: &Shared,
    context: u64,
) -> Option<&'a Arc<ContextInfo>> {
    comms
        .entry(context)
        .or_insert_with(|| shared.contexts.info(context).map(Arc::new))
        .as_ref()
}

/// The OS thread id of a ring's thread index.
fn tid_of(tids: &[i32], thread: u32) -> i32 {
    tids.get(thread as usize).copied().unwrap_or(-1)
}

/// The handle of a local parent, else 0.
fn local_handle(parent: Parent) -> u64 {
    match parent {
        Parent::Local { handle, .. } => handle,
        _ => 0,
    }
}

/// Records a ring dropped since the last look, in clock ticks.
struct TickGap {
    tid: i32,
    first: u64,
    last: u64,
    dropped_total: u64,
}

fn take_gap(ring: &RingConsumer) -> Option<TickGap> {
    let first = ring.shared.drop_first.swap(0, Ordering::AcqRel);
    (first != 0).then(|| TickGap {
        tid: ring.shared.os_tid,
        first,
        last: ring.shared.drop_last.load(Ordering::Acquire),
        dropped_total: ring.shared.dropped.total(),
    })
}
