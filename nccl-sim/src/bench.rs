//! `nccl-sim bench`: the cost per callback of profiler plugins, measured side by side.
//!
//! Every plugin given (any profiler plugin built for NCCL, by path or by a name as
//! `NCCL_PROFILER_PLUGIN` takes it) and the in-tree empty plugin, the floor, are loaded
//! the way the emulated NCCL release loads them ([`Profiler`]), each with one `init` per
//! bench thread (a communicator rank of its own), and then receive identical callback
//! streams: per iteration, what one rank's threads call for one `ncclAllReduce`
//!
//! - the application thread (2.28+): GroupApi start, record GroupStartApiStop (23),
//!   CollApi start/stop, record GroupEndApiStart (24), KernelLaunch start/stop, Group
//!   start, Coll start (parent the CollApi, `parentGroup` the Group), Coll stop, Group
//!   stop, GroupApi stop; up to 2.27 only Group and Coll (parent the Group);
//! - the proxy thread: ProxyOp start (parent the Coll), record ProxyOpInProgress (19;
//!   SendPosted (0) up to 2.26), KernelCh start (parent the Coll; from 2.26), four
//!   ProxySteps each with start, record SendGPUWait (8, stale size), record SendWait (9,
//!   the step's size), stop; record KernelChStop (22, from 2.27), KernelCh stop; ProxyOp
//!   stop. As on NCCL, the kernel channel starts and ends while the proxy operation is
//!   open (its GPU work feeds the network).
//!
//! As NCCL does, a plugin is called only for the event types its activation mask enables
//! (and their ancestors), and nothing more for an event whose handle came back NULL. A
//! plugin that returns NULL for every start of an event type does not record that type
//! (NVIDIA's Inspector keeps only Coll and KernelCh): those NULLs are reported apart;
//! NULLs among the types it does record are refusals (full pools or buffers), and more
//! than 0.1 % of them cost it its figure. Each thread plays both streams of its rank.
//! Iterations are timed in batches, plugins taking turns batch by batch, each batch in
//! thread CPU time (`CLOCK_THREAD_CPUTIME_ID`) and wall time; a batch gives one figure,
//! its time divided by the callbacks it made. Reported:
//! median, 10th and 90th percentile over all batches of all threads. Nothing is subtracted:
//! the empty plugin's row is the floor (the emulation's own cost and the calls).
//!
//! The bench knows nothing about any plugin: each reads its own settings from the
//! environment (for ours `NCCL_SCOREP_*`, e.g. `NCCL_SCOREP_OUTPUT_DIR`,
//! `NCCL_SCOREP_EVENTS=all`, `NCCL_SCOREP_BUFFER_SIZE`). What it reports about each is what
//! NCCL can see: the API version used, the activation mask, and how many starts returned
//! a NULL handle. A plugin that drops events (NULL handles) is called less and looks
//! cheaper; the output says so.

use crate::event::{CollTask, CommInfo, CoreEvent, Descr, Raw, StateArgs, NULL};
use crate::names::{Algo, DataType, Func, Proto};
use crate::profiler::{Profiler, Session};
use crate::release::{self, Release};
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
use nccl_profiler_abi::loader::ApiVersion;
use nccl_profiler_abi::{event_type as t, state as st};
use std::ffi::{CStr, CString, OsStr, OsString};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::Instant;

/// The in-tree empty profiler plugin (`csrc/empty_profiler.c`), built by `build.rs` into
/// Cargo's output directory: it exports `ncclProfiler_v1` … `ncclProfiler_v7`, asks for
/// every event, returns a constant non-NULL handle and does nothing else.
pub fn empty_plugin_path() -> PathBuf {
    PathBuf::from(env!("NCCL_SIM_EMPTY_PLUGIN"))
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// The plugins, as `NCCL_PROFILER_PLUGIN` would name them (a path, or a name NCCL
    /// resolves). The empty plugin is always measured too, first, as the floor.
    pub plugins: Vec<OsString>,
    pub release: Release,
    /// Bench threads, each a communicator rank of every plugin.
    pub threads: usize,
    /// Timed iterations per thread and plugin (rounded down to whole batches).
    pub iterations: usize,
    /// Iterations per timed batch.
    pub batch: usize,
    /// Untimed batches per thread and plugin before the timed ones.
    pub warmup_batches: usize,
    /// Untimed sleep after every round of batches (one batch per plugin), so that a
    /// plugin's own threads (a collector, a writer) get the time real NCCL work leaves
    /// them between collectives.
    pub pause: std::time::Duration,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            plugins: Vec::new(),
            release: release::NEWEST,
            threads: 1,
            iterations: 20_000,
            batch: 100,
            warmup_batches: 10,
            pause: std::time::Duration::ZERO,
        }
    }
}

impl BenchConfig {
    /// (iterations per batch, timed batches) as run.
    pub fn batches(&self) -> (usize, usize) {
        let batch = self.batch.clamp(1, self.iterations.max(1));
        (batch, (self.iterations / batch).max(1))
    }
}

/// Median and spread of the per-batch figures, ns per callback.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spread {
    pub p10: f64,
    pub median: f64,
    pub p90: f64,
}

impl Spread {
    fn of(values: &mut [f64]) -> Spread {
        values.sort_by(f64::total_cmp);
        Spread {
            p10: quantile(values, 0.1),
            median: quantile(values, 0.5),
            p90: quantile(values, 0.9),
        }
    }
}

/// Linear interpolation between the closest ranks; NaN for no values.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let position = q * (sorted.len() - 1) as f64;
    let low = position.floor() as usize;
    let high = position.ceil() as usize;
    sorted[low] + (sorted[high] - sorted[low]) * (position - low as f64)
}

/// One plugin's result.
#[derive(Clone, Debug)]
pub struct BenchRow {
    /// The in-tree empty plugin.
    pub floor: bool,
    /// The plugin as given (`--plugin`), or the empty plugin's path.
    pub setting: OsString,
    /// The library NCCL's rules opened for it.
    pub library: OsString,
    /// The `name` of its function table.
    pub name: String,
    /// The profiler API version the release uses with it.
    pub api_version: ApiVersion,
    /// The activation mask it left after the last `init`.
    pub mask: u64,
    /// Event types of the streams that this mask would not make NCCL emit: as NCCL, the
    /// bench does not call the plugin for them.
    pub unrequested: u64,
    /// Per callback, over every timed batch (app and proxy stream together).
    pub cpu: Spread,
    pub wall: Spread,
    /// The two streams on their own.
    pub app_cpu: Spread,
    pub proxy_cpu: Spread,
    pub app_wall: Spread,
    pub proxy_wall: Spread,
    /// Callbacks made in the timed batches (starts, records, stops).
    pub callbacks: u64,
    /// `startEvent` calls in the timed batches, and how many of them left a NULL handle.
    pub starts: u64,
    pub null_handles: u64,
    /// Event types it was called for and refused every time (it records none of them,
    /// by design): their NULL handles are not counted as refusals.
    pub not_recorded: u64,
    /// NULL handles of the event types it records (some starts accepted): events it
    /// dropped, which make it look cheaper than it is.
    pub refused: u64,
    /// Starts of the event types it records.
    pub recorded_starts: u64,
}

/// Why a bench could not run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BenchError {
    /// A plugin did not load (or its `init` failed), as NCCL would have it.
    #[error("cannot use profiler plugin {}: {reason}", plugin.to_string_lossy())]
    Load { plugin: OsString, reason: String },
    /// The in-tree empty plugin is not where the build put it.
    #[error("the in-tree empty plugin is missing ({}): rebuild nccl-sim", .0.display())]
    EmptyPluginMissing(PathBuf),
    #[error("{0}")]
    BadConfig(String),
}

/// No plugin failed to start (else the first one's index).
const NONE_FAILED: usize = usize::MAX;

/// One plugin under test.
struct Target {
    profiler: Profiler,
    setting: OsString,
    floor: bool,
    comm_hash: u64,
}

/// What one thread measured for one plugin.
#[derive(Default)]
struct Samples {
    cpu: Vec<f64>,
    wall: Vec<f64>,
    app_cpu: Vec<f64>,
    app_wall: Vec<f64>,
    proxy_cpu: Vec<f64>,
    proxy_wall: Vec<f64>,
    callbacks: u64,
    starts: TypeCounts,
    nulls: TypeCounts,
    /// The same over every batch, warm-up included: what the plugin records at all.
    all_starts: TypeCounts,
    all_nulls: TypeCounts,
}

/// A count per event type bit (index: the bit's position).
type TypeCounts = [u64; 16];

fn add_counts(total: &mut TypeCounts, more: &TypeCounts) {
    total.iter_mut().zip(more).for_each(|(t, m)| *t += m);
}

fn sub_counts(now: &TypeCounts, before: &TypeCounts) -> TypeCounts {
    std::array::from_fn(|i| now[i] - before[i])
}

/// The event types of which every start of the whole run (`all_*`, warm-up included)
/// returned NULL; the NULLs and the starts of the others in the timed batches.
fn classify_nulls(
    all_starts: &TypeCounts,
    all_nulls: &TypeCounts,
    starts: &TypeCounts,
    nulls: &TypeCounts,
) -> (u64, u64, u64) {
    let mut not_recorded = 0;
    let mut refused = 0;
    let mut recorded_starts = 0;
    for bit in 0..16 {
        if all_starts[bit] > 0 && all_nulls[bit] == all_starts[bit] {
            not_recorded |= 1 << bit;
        } else {
            refused += nulls[bit];
            recorded_starts += starts[bit];
        }
    }
    (not_recorded, refused, recorded_starts)
}

impl Samples {
    fn merge(&mut self, other: Samples) {
        self.cpu.extend(other.cpu);
        self.wall.extend(other.wall);
        self.app_cpu.extend(other.app_cpu);
        self.app_wall.extend(other.app_wall);
        self.proxy_cpu.extend(other.proxy_cpu);
        self.proxy_wall.extend(other.proxy_wall);
        self.callbacks += other.callbacks;
        add_counts(&mut self.starts, &other.starts);
        add_counts(&mut self.nulls, &other.nulls);
        add_counts(&mut self.all_starts, &other.all_starts);
        add_counts(&mut self.all_nulls, &other.all_nulls);
    }
}

/// Runs the bench: the empty plugin first, then `config.plugins` in order, one row each.
pub fn run(config: &BenchConfig) -> Result<Vec<BenchRow>, BenchError> {
    if config.threads == 0 || config.iterations == 0 {
        return Err(BenchError::BadConfig(
            "threads and iterations must be at least 1".into(),
        ));
    }
    let empty = empty_plugin_path();
    if !empty.exists() {
        return Err(BenchError::EmptyPluginMissing(empty));
    }
    let settings = std::iter::once((empty.into_os_string(), true))
        .chain(config.plugins.iter().map(|p| (p.clone(), false)));
    let targets: Vec<Target> = settings
        .enumerate()
        .map(|(index, (setting, floor))| Target {
            profiler: Profiler::new(config.release, Some(setting.clone())),
            setting,
            floor,
            comm_hash: 0x6265_6e63_6800_0000 | index as u64,
        })
        .collect();

    let barrier = Barrier::new(config.threads);
    let failed = AtomicUsize::new(NONE_FAILED);
    let per_thread: Vec<Vec<Samples>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..config.threads)
            .map(|rank| {
                let (targets, barrier, failed) = (&targets, &barrier, &failed);
                std::thread::Builder::new()
                    .name(format!("bench-{rank}"))
                    .spawn_scoped(scope, move || {
                        worker(config, targets, rank as i32, barrier, failed)
                    })
                    .expect("spawn a bench thread")
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });

    let failed = failed.load(Ordering::Relaxed);
    if failed != NONE_FAILED {
        return Err(load_error(&targets[failed]));
    }

    let mut merged: Vec<Samples> = targets.iter().map(|_| Samples::default()).collect();
    for thread in per_thread {
        for (total, samples) in merged.iter_mut().zip(thread) {
            total.merge(samples);
        }
    }
    let stream_bits = stream_events(config.release);
    Ok(targets
        .iter()
        .zip(merged)
        .map(|(target, mut s)| {
            let report = target.profiler.report();
            let mask = target.profiler.mask();
            let (not_recorded, refused, recorded_starts) =
                classify_nulls(&s.all_starts, &s.all_nulls, &s.starts, &s.nulls);
            BenchRow {
                floor: target.floor,
                setting: target.setting.clone(),
                library: report.loaded.unwrap_or_default(),
                name: report.name.unwrap_or_default(),
                api_version: report.version.unwrap_or_default(),
                mask,
                unrequested: unrequested(stream_bits, mask),
                cpu: Spread::of(&mut s.cpu),
                wall: Spread::of(&mut s.wall),
                app_cpu: Spread::of(&mut s.app_cpu),
                proxy_cpu: Spread::of(&mut s.proxy_cpu),
                app_wall: Spread::of(&mut s.app_wall),
                proxy_wall: Spread::of(&mut s.proxy_wall),
                callbacks: s.callbacks,
                starts: s.starts.iter().sum(),
                null_handles: s.nulls.iter().sum(),
                not_recorded,
                refused,
                recorded_starts,
            }
        })
        .collect())
}

/// A plugin that failed to load, with the loader's own words for each name tried.
fn load_error(target: &Target) -> BenchError {
    let report = target.profiler.report();
    let mut reason = if report.message.is_empty() {
        "it did not load".to_owned()
    } else {
        report.message.clone()
    };
    if report.loaded.is_none() {
        let mut tried: Vec<&OsString> = Vec::new();
        for name in &report.tried {
            if tried.contains(&name) {
                continue; // 2.23–2.25 try the same name twice
            }
            tried.push(name);
            // Only to get dlerror's text; NCCL's attempt above already failed.
            // SAFETY: this name failed to load a moment ago; if it loads now, its
            // initialisers run as they would in NCCL.
            if let Err(error) = unsafe { Library::open(Some(name), RTLD_NOW | RTLD_LOCAL) } {
                let _ = write!(reason, "; {error}");
            }
        }
    }
    BenchError::Load {
        plugin: target.setting.clone(),
        reason,
    }
}

/// One bench thread: a rank of every plugin's communicator, then the timed streams.
fn worker(
    config: &BenchConfig,
    targets: &[Target],
    rank: i32,
    barrier: &Barrier,
    failed: &AtomicUsize,
) -> Vec<Samples> {
    let name = CString::new("nccl-sim-bench").expect("no NUL");
    let sessions: Vec<Option<Session>> = targets
        .iter()
        .map(|target| {
            target.profiler.init(&CommInfo {
                comm_hash: target.comm_hash,
                name: Some(name.clone()),
                n_nodes: 1,
                n_ranks: config.threads as i32,
                rank,
            })
        })
        .collect();
    if let Some(index) = sessions.iter().position(Option::is_none) {
        failed.fetch_min(index, Ordering::Relaxed);
    }
    barrier.wait();
    if failed.load(Ordering::Relaxed) != NONE_FAILED {
        for (target, session) in targets.iter().zip(sessions) {
            target.profiler.finalize(session);
        }
        return Vec::new();
    }

    let mut ranks: Vec<Rank> = targets
        .iter()
        .zip(&sessions)
        .map(|(target, session)| Rank::new(target, session.expect("checked"), config, rank))
        .collect();
    let mut samples: Vec<Samples> = targets.iter().map(|_| Samples::default()).collect();
    let (batch, timed) = config.batches();
    for round in 0..config.warmup_batches + timed {
        // Plugins take turns, each starting a round in turn.
        for k in 0..ranks.len() {
            let index = (round + k) % ranks.len();
            let measured = ranks[index].batch(batch);
            if round >= config.warmup_batches {
                measured.add_to(&mut samples[index]);
            }
        }
        if !config.pause.is_zero() {
            std::thread::sleep(config.pause);
        }
    }
    for (rank, samples) in ranks.iter().zip(&mut samples) {
        samples.all_starts = rank.starts;
        samples.all_nulls = rank.nulls;
    }
    // Nobody finalizes while another thread still measures.
    barrier.wait();
    for (target, session) in targets.iter().zip(sessions) {
        target.profiler.finalize(session);
    }
    samples
}

/// One timed batch: (cpu ns, wall ns, callbacks) of each stream, and the starts.
struct Batch {
    app: (u64, u64, u64),
    proxy: (u64, u64, u64),
    starts: TypeCounts,
    nulls: TypeCounts,
}

impl Batch {
    fn add_to(&self, s: &mut Samples) {
        let per = |ns: u64, calls: u64| ns as f64 / calls as f64;
        let (app, proxy) = (self.app, self.proxy);
        if app.2 > 0 {
            s.app_cpu.push(per(app.0, app.2));
            s.app_wall.push(per(app.1, app.2));
        }
        if proxy.2 > 0 {
            s.proxy_cpu.push(per(proxy.0, proxy.2));
            s.proxy_wall.push(per(proxy.1, proxy.2));
        }
        let calls = app.2 + proxy.2;
        if calls > 0 {
            s.cpu.push(per(app.0 + proxy.0, calls));
            s.wall.push(per(app.1 + proxy.1, calls));
        }
        s.callbacks += calls;
        add_counts(&mut s.starts, &self.starts);
        add_counts(&mut s.nulls, &self.nulls);
    }
}

/// The size of a ProxyStep, and of a ProxyOp's chunk.
const STEP_BYTES: usize = 1 << 19;
const STEPS_PER_OP: i32 = 4;

/// One thread's communicator rank of one plugin, and the handle variables NCCL keeps.
struct Rank<'a> {
    profiler: &'a Profiler,
    session: Session,
    release: Release,
    rank: i32,
    peer: i32,
    pid: i32,
    comm_hash: u64,
    seq: u64,
    gpu_timer: u64,
    /// Thread-local in NCCL: cleared after stop (GroupApi), kept (CollApi).
    group_api: Raw,
    coll_api: Raw,
    kernel_launch: Raw,
    /// Per plan in NCCL; kept up to 2.30, cleared after stop from 2.31.
    group: Raw,
    coll: Raw,
    /// The Coll handles of the current batch: the parents of its proxy work.
    colls: Vec<Raw>,
    /// Event types NCCL would not emit with the plugin's activation mask.
    unrequested: u64,
    calls: u64,
    starts: TypeCounts,
    nulls: TypeCounts,
}

impl<'a> Rank<'a> {
    fn new(target: &'a Target, session: Session, config: &BenchConfig, rank: i32) -> Rank<'a> {
        Rank {
            profiler: &target.profiler,
            session,
            release: config.release,
            rank,
            peer: (rank + 1) % config.threads as i32,
            pid: std::process::id() as i32,
            comm_hash: target.comm_hash,
            seq: 0,
            gpu_timer: 0,
            group_api: NULL,
            coll_api: NULL,
            kernel_launch: NULL,
            group: NULL,
            coll: NULL,
            colls: Vec::with_capacity(config.batch),
            unrequested: unrequested(stream_events(config.release), target.profiler.mask()),
            calls: 0,
            starts: [0; 16],
            nulls: [0; 16],
        }
    }

    /// NCCL makes no call for an event type the activation mask does not enable.
    #[inline]
    fn start(&mut self, handle: &mut Raw, parent: Raw, rank: i32, event: CoreEvent) {
        let bit = event.type_bit();
        if bit & self.unrequested != 0 {
            *handle = NULL;
            return;
        }
        let descr = Descr {
            parent,
            rank,
            event,
        };
        self.profiler.start(&self.session, handle, &descr);
        self.calls += 1;
        let index = (bit.trailing_zeros() as usize).min(15);
        self.starts[index] += 1;
        self.nulls[index] += u64::from(handle.is_null());
    }

    /// NCCL makes no call for a NULL handle.
    #[inline]
    fn record(&mut self, handle: Raw, state: i32, args: StateArgs) {
        if !handle.is_null() {
            self.profiler.record(&self.session, handle, state, args);
            self.calls += 1;
        }
    }

    #[inline]
    fn stop(&mut self, handle: Raw) {
        if !handle.is_null() {
            self.profiler.stop(&self.session, handle);
            self.calls += 1;
        }
    }

    /// `n` iterations of the app stream, then `n` of the proxy stream, each timed.
    fn batch(&mut self, n: usize) -> Batch {
        self.colls.clear();
        let (starts0, nulls0) = (self.starts, self.nulls);
        let calls0 = self.calls;
        let (cpu0, wall0) = (nccl_scorep_common::clock::thread_cpu_ns(), Instant::now());
        for _ in 0..n {
            self.app_stream();
        }
        // The batch's kernels ran after its API calls and before the proxy thread noticed
        // them: their GPU times start from now, on the host's clock (a GPU clock that ran
        // ahead of the host would be an impossible one to the plugins that check it).
        self.gpu_timer = self.gpu_timer.max(crate::time::host_ns());
        let (cpu1, wall1) = (nccl_scorep_common::clock::thread_cpu_ns(), Instant::now());
        let calls1 = self.calls;
        for i in 0..n {
            let coll = self.colls[i];
            self.proxy_stream(coll);
        }
        let (cpu2, wall2) = (nccl_scorep_common::clock::thread_cpu_ns(), Instant::now());
        Batch {
            app: (
                cpu1 - cpu0,
                (wall1 - wall0).as_nanos() as u64,
                calls1 - calls0,
            ),
            proxy: (
                cpu2 - cpu1,
                (wall2 - wall1).as_nanos() as u64,
                self.calls - calls1,
            ),
            starts: sub_counts(&self.starts, &starts0),
            nulls: sub_counts(&self.nulls, &nulls0),
        }
    }

    /// One `ncclAllReduce` on the application thread.
    fn app_stream(&mut self) {
        let api = self.release.has_api_events();
        if api {
            let mut group_api = self.group_api;
            self.start(
                &mut group_api,
                NULL,
                0,
                CoreEvent::GroupApi {
                    graph_captured: false,
                    depth: 1,
                },
            );
            self.group_api = group_api;
            self.record(group_api, st::GROUP_START_API_STOP, StateArgs::Null);
            let mut coll_api = self.coll_api;
            self.start(&mut coll_api, group_api, 0, allreduce_call());
            self.coll_api = coll_api;
            self.stop(coll_api);
            self.record(group_api, st::GROUP_END_API_START, StateArgs::Null);
            let mut kernel_launch = self.kernel_launch;
            self.start(&mut kernel_launch, group_api, 0, CoreEvent::KernelLaunch);
            self.kernel_launch = kernel_launch;
            self.stop(kernel_launch);
        }
        let mut group = self.group;
        self.start(&mut group, NULL, 0, CoreEvent::Group);
        let mut coll = self.coll;
        // Up to 2.27 a Coll needs a Group handle.
        if !(self.release.children_need_parent_handle() && group.is_null()) {
            self.seq += 1;
            let task = allreduce_task(self.seq, group, c"nccl-sim-bench", self.comm_hash);
            let parent = if api { self.coll_api } else { group };
            self.start(&mut coll, parent, self.rank, CoreEvent::Coll(task));
            self.stop(coll);
        } else {
            coll = NULL;
        }
        self.stop(group);
        if api {
            self.stop(self.group_api);
            self.group_api = NULL;
        }
        self.colls.push(coll);
        let clears = self.release.clears_task_handles();
        self.group = if clears { NULL } else { group };
        self.coll = if clears { NULL } else { coll };
    }

    /// The proxy thread's work for that collective's one channel and peer.
    fn proxy_stream(&mut self, coll: Raw) {
        let mut op = NULL;
        self.start(
            &mut op,
            coll,
            self.rank,
            CoreEvent::ProxyOp {
                pid: self.pid,
                channel: 0,
                peer: self.peer,
                n_steps: STEPS_PER_OP,
                chunk_size: STEP_BYTES as i32,
                is_send: true,
            },
        );
        if self.release.proxy_op_at_append() {
            self.record(op, st::PROXY_OP_IN_PROGRESS_V4, StateArgs::Uninit);
        } else {
            self.record(
                op,
                st::PROXY_OP_SEND_POSTED,
                StateArgs::ProxyOpProgress {
                    trans_size: STEP_BYTES,
                    steps: STEPS_PER_OP,
                },
            );
        }
        // The GPU starts its work while the proxy operation waits for it, and ends it
        // before the network does: the kernel channel lies inside the operation.
        let kernel = self.start_kernel_ch(coll);
        // Up to 2.27 steps need a ProxyOp handle; later, steps start anyway but their
        // states are only recorded under a non-NULL ProxyOp.
        if !(self.release.children_need_parent_handle() && op.is_null()) {
            let mut stale = 0;
            for step in 0..STEPS_PER_OP {
                let mut handle = NULL;
                self.start(&mut handle, op, self.rank, CoreEvent::ProxyStep { step });
                if !op.is_null() {
                    self.record(
                        handle,
                        st::PROXY_STEP_SEND_GPU_WAIT,
                        StateArgs::TransSize(stale),
                    );
                    self.record(
                        handle,
                        st::PROXY_STEP_SEND_WAIT,
                        StateArgs::TransSize(STEP_BYTES),
                    );
                }
                stale = STEP_BYTES;
                self.stop(handle);
            }
        }
        self.stop_kernel_ch(kernel);
        self.stop(op);
    }

    /// KernelCh start (from 2.26), parent the Coll, with the GPU's start time (from 2.27).
    fn start_kernel_ch(&mut self, coll: Raw) -> Raw {
        let mut kernel = NULL;
        if self.release.has_kernel_ch() {
            let timestamps = self.release.kernel_ch_has_timestamps();
            let begin = self.gpu_timer;
            self.start(
                &mut kernel,
                coll,
                0,
                CoreEvent::KernelCh {
                    channel: 0,
                    ptimer: if timestamps { begin } else { 0 },
                },
            );
        }
        kernel
    }

    /// Record KernelChStop (from 2.27, with the GPU's end time), then KernelCh stop.
    fn stop_kernel_ch(&mut self, kernel: Raw) {
        if !self.release.has_kernel_ch() {
            return;
        }
        self.gpu_timer += 1;
        if self.release.kernel_ch_has_timestamps() {
            self.record(
                kernel,
                st::KERNEL_CH_STOP,
                StateArgs::PTimer(self.gpu_timer),
            );
        }
        self.stop(kernel);
    }
}

/// The `ncclAllReduce` call of the bench's application stream (CollApi).
pub fn allreduce_call() -> CoreEvent {
    CoreEvent::CollApi {
        func: Func::AllReduce,
        count: 1 << 20,
        datatype: DataType::Float32,
        root: 0,
        graph_captured: false,
        user_tag: 0,
    }
}

/// The task of that call (Coll, number `seq` of its communicator `comm_name`).
pub fn allreduce_task(
    seq: u64,
    parent_group: Raw,
    comm_name: &'static CStr,
    comm_hash: u64,
) -> CollTask {
    CollTask {
        seq,
        func: Func::AllReduce,
        count: 1 << 20,
        root: 0,
        datatype: DataType::Float32,
        n_channels: 1,
        n_warps: 16,
        algo: Algo::Ring,
        proto: Proto::Simple,
        symmetric_variant: None,
        parent_group,
        user_tag: 0,
        comm_name: comm_name.as_ptr(),
        comm_hash,
    }
}

/// The event types the streams of `release` contain.
pub fn stream_events(release: Release) -> u64 {
    let mut bits = t::GROUP | t::COLL | t::PROXY_OP | t::PROXY_STEP;
    if release.has_api_events() {
        bits |= t::GROUP_API | t::COLL_API | t::KERNEL_LAUNCH;
    }
    if release.has_kernel_ch() {
        bits |= t::KERNEL_CH;
    }
    bits
}

/// Of the event types in `stream`, those NCCL would not emit with activation mask `mask`
/// (an event is emitted when the mask asks for it or for one of its descendants).
pub fn unrequested(stream: u64, mask: u64) -> u64 {
    const CE: u64 = t::CE_COLL | t::CE_SYNC | t::CE_BATCH;
    let enablers = [
        (t::GROUP_API, !t::PROXY_CTRL & 0xFFFF),
        (
            t::COLL_API,
            t::COLL_API | t::COLL | t::PROXY_OP | t::PROXY_STEP | t::KERNEL_CH | t::NET_PLUGIN | CE,
        ),
        (t::KERNEL_LAUNCH, t::KERNEL_LAUNCH),
        (
            t::GROUP,
            t::GROUP
                | t::COLL
                | t::P2P
                | t::PROXY_OP
                | t::PROXY_STEP
                | t::KERNEL_CH
                | t::NET_PLUGIN,
        ),
        (
            t::COLL,
            t::COLL | t::PROXY_OP | t::PROXY_STEP | t::KERNEL_CH | t::NET_PLUGIN,
        ),
        (t::PROXY_OP, t::PROXY_OP | t::PROXY_STEP | t::NET_PLUGIN),
        (t::PROXY_STEP, t::PROXY_STEP | t::NET_PLUGIN),
        (t::KERNEL_CH, t::KERNEL_CH),
    ];
    enablers
        .iter()
        .filter(|(event, enabled_by)| stream & event != 0 && mask & enabled_by == 0)
        .fold(0, |bits, (event, _)| bits | event)
}

/// Names of the event type bits in `bits`.
pub fn event_names(bits: u64) -> Vec<&'static str> {
    const NAMES: [&str; 16] = [
        "Group",
        "Coll",
        "P2p",
        "ProxyOp",
        "ProxyStep",
        "ProxyCtrl",
        "KernelCh",
        "NetPlugin",
        "GroupApi",
        "CollApi",
        "P2pApi",
        "KernelLaunch",
        "CeColl",
        "CeSync",
        "CeBatch",
        "KernelPhase",
    ];
    (0..16)
        .filter(|bit| bits & (1 << bit) != 0)
        .map(|bit| NAMES[bit])
        .collect()
}

/// The callbacks one iteration makes when no handle is NULL: (app stream, proxy stream).
pub fn callbacks_per_iteration(release: Release) -> (u64, u64) {
    let app = if release.has_api_events() { 12 } else { 4 };
    let mut proxy = 3 + 4 * STEPS_PER_OP as u64;
    if release.has_kernel_ch() {
        proxy += if release.kernel_ch_has_timestamps() {
            3
        } else {
            2
        };
    }
    (app, proxy)
}

/// The report `nccl-sim bench` prints.
/// More starts than this share came back NULL: the plugin did less work than the others,
/// and gets no figure.
pub const MAX_REFUSED_SHARE: f64 = 0.001;

impl BenchRow {
    /// Whether the plugin refused too many starts to be compared.
    /// Starts of event types it records NULL-ed count; types it never records do not. A
    /// plugin that records nothing at all gets no figure either.
    pub fn refused_too_many(&self) -> bool {
        self.recorded_starts == 0
            || self.refused as f64 > MAX_REFUSED_SHARE * self.recorded_starts as f64
    }
}

/// Each stream on its own (thread CPU time per callback: median [p10 p90]), and each
/// plugin's median as a multiple of the first plugin after the floor (the one compared).
fn render_streams(
    out: &mut String,
    rows: &[BenchRow],
    width: usize,
    label: &dyn Fn(usize, &BenchRow) -> String,
) {
    let Some(reference) = rows.iter().find(|r| !r.floor && !r.refused_too_many()) else {
        return;
    };
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "per stream, thread CPU ns per callback: median [p10 p90], and ×{} (its median = 1)",
        reference.name
    );
    let _ = writeln!(
        out,
        "{:width$}  {:^23} {:>6}  {:^23} {:>6}  {:^23} {:>6}",
        "plugin", "app stream", "×", "proxy stream", "×", "both", "×"
    );
    let spread = |s: Spread| format!("{:7.1} [{:6.1} {:6.1}]", s.median, s.p10, s.p90);
    let ratio = |s: Spread, r: Spread| format!("{:6.2}", s.median / r.median);
    for (i, row) in rows.iter().enumerate() {
        if row.refused_too_many() {
            let _ = writeln!(out, "{:width$}  no figure", label(i, row));
            continue;
        }
        let _ = writeln!(
            out,
            "{:width$}  {} {}  {} {}  {} {}",
            label(i, row),
            spread(row.app_cpu),
            ratio(row.app_cpu, reference.app_cpu),
            spread(row.proxy_cpu),
            ratio(row.proxy_cpu, reference.proxy_cpu),
            spread(row.cpu),
            ratio(row.cpu, reference.cpu),
        );
    }
}

pub fn render(config: &BenchConfig, rows: &[BenchRow]) -> String {
    let mut out = String::new();
    let (batch, timed) = config.batches();
    let (app, proxy) = callbacks_per_iteration(config.release);
    let _ = writeln!(
        out,
        "nccl-sim bench: NCCL {}, {} thread{}, {} iterations per thread and plugin \
         ({timed} batches of {batch} after {} warm-up batches; plugins take turns)",
        config.release,
        config.threads,
        if config.threads == 1 { "" } else { "s" },
        timed * batch,
        config.warmup_batches,
    );
    let _ = writeln!(
        out,
        "an iteration of a plugin that asks for every event (a narrower activation mask \
         gets fewer, as said below): app stream {app} callbacks ({}), proxy stream {proxy} ({})",
        if config.release.has_api_events() {
            "GroupApi, CollApi, KernelLaunch, Group, Coll"
        } else {
            "Group, Coll"
        },
        if config.release.has_kernel_ch() {
            "ProxyOp, 4 ProxySteps, KernelCh"
        } else {
            "ProxyOp, 4 ProxySteps"
        },
    );
    let _ = writeln!(out, "ns per callback: median [p10 p90] over batches");
    let _ = writeln!(out);
    let label = |i: usize, r: &BenchRow| {
        if r.floor {
            format!("#{i} {} (floor)", r.name)
        } else {
            format!("#{i} {}", r.name)
        }
    };
    let width = rows
        .iter()
        .enumerate()
        .map(|(i, r)| label(i, r).len())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = writeln!(
        out,
        "{:width$}  api  {:^22}  {:^22}  {:>8}  {:>9}  {:>14}",
        "plugin", "thread CPU time", "wall time", "app cpu", "proxy cpu", "NULL handles"
    );
    let spread = |s: Spread| format!("{:7.1} [{:6.1} {:6.1}]", s.median, s.p10, s.p90);
    for (i, row) in rows.iter().enumerate() {
        let nulls = format!("{} / {}", row.null_handles, row.starts);
        if row.refused_too_many() {
            // Called less, it would look cheaper than it is: no figure.
            let _ = writeln!(
                out,
                "{:width$}  v{:<2}  {:^22}  {:^22}  {:>8}  {:>9}  {:>14}",
                label(i, row),
                row.api_version,
                "no figure",
                "no figure",
                "-",
                "-",
                nulls,
            );
            continue;
        }
        let _ = writeln!(
            out,
            "{:width$}  v{:<2}  {}  {}  {:8.1}  {:9.1}  {:>14}",
            label(i, row),
            row.api_version,
            spread(row.cpu),
            spread(row.wall),
            row.app_cpu.median,
            row.proxy_cpu.median,
            nulls,
        );
    }
    render_streams(&mut out, rows, width, &label);
    let _ = writeln!(out);
    for (i, row) in rows.iter().enumerate() {
        let what = if row.floor {
            " (the in-tree empty plugin: the floor, not subtracted from the other rows)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "#{i} {}: {}{what}",
            row.name,
            OsStr::new(&row.library).to_string_lossy()
        );
        if row.recorded_starts == 0 && row.starts > 0 {
            let _ = writeln!(
                out,
                "   every start of the whole run (warm-up included) returned NULL: it \
                 recorded nothing, no figure"
            );
        } else if row.not_recorded != 0 {
            let _ = writeln!(
                out,
                "   records no {} (every start returned NULL): not counted as refusals; \
                 its row is its cost on the stream NCCL calls it with",
                event_names(row.not_recorded).join(", ")
            );
        }
        if row.refused > 0 {
            let _ = writeln!(
                out,
                "   {} of {} starts of the events it records returned NULL: NCCL calls \
                 nothing more for those events, so this plugin did less work and looks \
                 cheaper than it is{}",
                row.refused,
                row.recorded_starts,
                if row.refused_too_many() {
                    "; more than 0.1 %: no figure (give it larger buffers or pools, or a \
                     slower pace with --pause-us)"
                } else {
                    ""
                }
            );
        }
        if row.unrequested != 0 {
            let _ = writeln!(
                out,
                "   its activation mask {:#x} does not ask for {}: NCCL does not call it for \
                 those, nor does the bench (plugins with other masks get other streams)",
                row.mask,
                event_names(row.unrequested).join(", ")
            );
        }
        if !row.floor && row.api_version != config.release.newest_api() {
            let _ = writeln!(
                out,
                "   used through NCCL {}'s v{} shim: events and states v{} lacks never reach it",
                config.release, row.api_version, row.api_version
            );
        }
    }
    let _ = writeln!(
        out,
        "NULL handles: starts that returned NULL, of all starts (a plugin that drops events \
         looks cheaper; a type it never records is not a drop). Each plugin reads its own \
         settings from the environment."
    );
    out
}

/// `nccl-sim bench`.
#[derive(clap::Args, Debug, Clone)]
#[command(
    after_help = "Each plugin is loaded as the chosen NCCL release loads it, next to \
    the in-tree empty plugin (the floor, row #0), and reads its own settings from the \
    environment, e.g. NCCL_SCOREP_OUTPUT_DIR, NCCL_SCOREP_EVENTS=all and \
    NCCL_SCOREP_BUFFER_SIZE for nccl-scorep's plugin. Read the NULL handles column: a \
    plugin that drops events is called less and looks cheaper."
)]
pub struct BenchArgs {
    /// A profiler plugin: a path, or a name as NCCL_PROFILER_PLUGIN takes it (repeat for
    /// several).
    #[arg(long = "plugin", value_name = "PLUGIN")]
    pub plugins: Vec<OsString>,
    /// The NCCL release to emulate (2.23 … 2.32).
    #[arg(long, value_name = "RELEASE", default_value = "2.32")]
    pub nccl: Release,
    /// Threads, each one communicator rank of every plugin.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Timed iterations (one app and one proxy stream each) per thread and plugin.
    #[arg(long, default_value_t = 20_000)]
    pub iterations: usize,
    /// Iterations per timed batch.
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
    /// Untimed batches before the timed ones.
    #[arg(long, default_value_t = 10)]
    pub warmup: usize,
    /// Sleep this many microseconds after each round of batches (untimed), leaving the
    /// plugins' own threads time to keep up, as the gaps between real collectives do.
    #[arg(long, value_name = "US", default_value_t = 0)]
    pub pause_us: u64,
}

impl From<BenchArgs> for BenchConfig {
    fn from(args: BenchArgs) -> BenchConfig {
        BenchConfig {
            plugins: args.plugins,
            release: args.nccl,
            threads: args.threads,
            iterations: args.iterations,
            batch: args.batch,
            warmup_batches: args.warmup,
            pause: std::time::Duration::from_micros(args.pause_us),
        }
    }
}

/// Runs `nccl-sim bench` and prints its report.
pub fn main(args: BenchArgs) -> ExitCode {
    let config = BenchConfig::from(args);
    match run(&config) {
        Ok(rows) => {
            print!("{}", render(&config, &rows));
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("nccl-sim bench: {error}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate() {
        let mut v = vec![4.0, 1.0, 3.0, 2.0, 5.0];
        let s = Spread::of(&mut v);
        assert_eq!(s.median, 3.0);
        assert!((s.p10 - 1.4).abs() < 1e-9);
        assert!((s.p90 - 4.6).abs() < 1e-9);
        assert!(Spread::of(&mut []).median.is_nan());
    }

    #[test]
    fn masks_name_what_nccl_would_not_emit() {
        let stream = stream_events(release::NEWEST);
        assert_eq!(unrequested(stream, 0xFFFF), 0);
        // Asking for ProxyStep brings its ancestors, but not KernelLaunch or KernelCh.
        assert_eq!(
            unrequested(stream, t::PROXY_STEP),
            t::KERNEL_LAUNCH | t::KERNEL_CH
        );
        assert_eq!(event_names(t::GROUP | t::KERNEL_CH), ["Group", "KernelCh"]);
        assert_eq!(stream_events(Release::new(23)) & t::GROUP_API, 0);
    }

    #[test]
    fn a_type_never_accepted_is_not_recorded_and_partial_nulls_are_refusals() {
        let (group, coll, step) = (0, 1, 4);
        let mut starts = [0; 16];
        let mut nulls = [0; 16];
        starts[group] = 100;
        nulls[group] = 100; // never accepted: not recorded by design
        starts[coll] = 100;
        nulls[coll] = 3; // a full pool now and then: refusals
        starts[step] = 400; // all accepted
        assert_eq!(
            classify_nulls(&starts, &nulls, &starts, &nulls),
            (t::GROUP, 3, 500),
            "(not recorded, refused, starts of recorded types)"
        );
        // A pool that ran dry in the warm-up: the Coll type was accepted then, so its
        // NULLs of the timed batches are refusals, not a type it does not record.
        let mut all_starts = starts;
        all_starts[coll] += 10;
        let timed_nulls = {
            let mut n = nulls;
            n[coll] = 100;
            n
        };
        assert_eq!(
            classify_nulls(&all_starts, &timed_nulls, &starts, &timed_nulls),
            (t::GROUP, 100, 500)
        );
        assert_eq!(
            classify_nulls(&[0; 16], &[0; 16], &[0; 16], &[0; 16]),
            (0, 0, 0)
        );
    }
}
