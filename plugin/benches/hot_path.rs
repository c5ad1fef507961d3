//! Benchmark of the plugin's hot path: the median cost per callback of `startEvent`,
//! `recordEventState` and `stopEvent`, on 1 and on 8 threads, against an empty plugin
//! measured in the same run. Run it with
//!
//! ```text
//! cargo bench -p nccl-profiler-scorep --bench hot_path
//! ```
//!
//! Both plugins are shared objects loaded the way NCCL loads a profiler
//! (`dlopen(RTLD_NOW | RTLD_LOCAL)`, then the `ncclProfiler_v7` data symbol) and called
//! through the function pointers of that table:
//!
//! * the real plugin is the release cdylib Cargo built next to this benchmark;
//! * the empty plugin is a table of C functions that only write a constant non-NULL
//!   `*eHandle` and return 0, compiled here into its own shared object with the system C
//!   compiler (`$CC`, else `cc`). Without a C compiler the benchmark falls back to a table
//!   of Rust functions in this binary, called through the same kind of function pointers,
//!   and says so.
//!
//! The real plugin runs with its collector on (`NCCL_SCOREP_MODE=jsonl`, output in a
//! temporary directory, drops instead of waits) and its rings are faulted in once before
//! anything is timed; every measured phase is its own init/finalize cycle, whose summary
//! line (drops, refusals, events written) is printed with the figures.
//!
//! Settings (environment): `HOT_PATH_BATCHES` (default 200) batches of `HOT_PATH_BATCH`
//! (default 1000) callback groups per thread and variant; `HOT_PATH_THREADS` (default 8)
//! for the multi-threaded phases; `HOT_PATH_RING_MIB` the ring size per thread (default:
//! 64 MiB, or more when one phase needs it; never less than a phase needs);
//! `HOT_PATH_BASELINE` the path of another build of the plugin (say, before a change) to
//! measure alongside, as a further variant. The results are described in
//! `docs/performance.md`.
//!
//! The variant `chained` is the plugin with a second empty plugin chained behind it
//! (`NCCL_SCOREP_CHAIN`); that one asks for every event, so every callback is forwarded
//! to it: the cost of chaining.

mod support;

use nccl_profiler_abi::CBool;
use nccl_profiler_abi::{self as abi, v7, ProxyOpDescr, ProxyStepDescr, StateArgsV4};
use nccl_profiler_scorep::event::Record;
use serde_json::Value;
use std::ffi::{c_char, c_int, c_void};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::ptr::null_mut;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Barrier};
use std::time::Instant;
use support::{available_cpus, built_library, cpu_model, env_usize, load_table, Table};

type Descr = v7::ncclProfilerEventDescr_v7_t;

/// Batches timed per thread and variant, before these many untimed ones.
const WARM_BATCHES: usize = 10;
/// The target of the project: ns per callback on one thread.
const TARGET_1T_NS: f64 = 60.0;
/// The target of the project: 8-thread cost within this factor of the 1-thread cost.
const TARGET_RATIO: f64 = 1.5;

// ---------------------------------------------------------------------------------------
// The two plugins.

/// The empty plugin, in C: every function does the least NCCL requires.
const EMPTY_PLUGIN_C: &str = r#"
#include <stdint.h>
typedef int ncclResult_t;
static ncclResult_t init(void** context, uint64_t commId, int* mask, const char* name,
                         int nNodes, int nranks, int rank, void* logfn) {
  *context = (void*)1;
  *mask = 0;
  return 0;
}
static ncclResult_t startEvent(void* context, void** eHandle, void* eDescr) {
  *eHandle = (void*)1;
  return 0;
}
static ncclResult_t stopEvent(void* eHandle) { return 0; }
static ncclResult_t recordEventState(void* eHandle, int eState, void* eStateArgs) {
  return 0;
}
static ncclResult_t finalize(void* context) { return 0; }
struct table {
  const char* name;
  void* init;
  void* startEvent;
  void* stopEvent;
  void* recordEventState;
  void* finalize;
};
__attribute__((visibility("default"))) const struct table ncclProfiler_v7 = {
  "empty", (void*)init, (void*)startEvent, (void*)stopEvent, (void*)recordEventState,
  (void*)finalize
};
"#;

/// Compiles the empty plugin into `dir`; `None` (with the reason printed) without a
/// working C compiler.
fn build_empty_plugin(dir: &Path) -> Option<PathBuf> {
    support::compile_shared_object(dir, "empty-profiler", EMPTY_PLUGIN_C)
        .map_err(|why| eprintln!("note: {why}"))
        .ok()
}

/// The empty plugin asking for every event, to chain behind ours; `None` without a C
/// compiler.
fn build_chained_plugin(dir: &Path) -> Option<PathBuf> {
    let source = EMPTY_PLUGIN_C.replace("*mask = 0;", "*mask = 0xFFFF;");
    support::compile_shared_object(dir, "chained-empty-profiler", &source)
        .map_err(|why| eprintln!("note: no chained variant: {why}"))
        .ok()
}

// The fallback empty plugin, in this binary.
unsafe extern "C" fn empty_init(
    context: *mut *mut c_void,
    _comm_id: u64,
    mask: *mut c_int,
    _name: *const c_char,
    _n_nodes: c_int,
    _n_ranks: c_int,
    _rank: c_int,
    _logger: abi::ncclDebugLogger_t,
) -> abi::ncclResult_t {
    // SAFETY: NCCL passes writable pointers.
    unsafe {
        *context = std::ptr::dangling_mut::<c_void>();
        *mask = 0;
    }
    0
}
unsafe extern "C" fn empty_start(
    _context: *mut c_void,
    handle: *mut *mut c_void,
    _descr: *mut Descr,
) -> abi::ncclResult_t {
    // SAFETY: NCCL passes a writable handle slot.
    unsafe { *handle = std::ptr::dangling_mut::<c_void>() };
    0
}
unsafe extern "C" fn empty_stop(_handle: *mut c_void) -> abi::ncclResult_t {
    0
}
unsafe extern "C" fn empty_record(
    _handle: *mut c_void,
    _state: c_int,
    _args: *mut StateArgsV4,
) -> abi::ncclResult_t {
    0
}
unsafe extern "C" fn empty_finalize(_context: *mut c_void) -> abi::ncclResult_t {
    0
}
static EMPTY_TABLE: Table = abi::ProfilerTable {
    name: c"empty".as_ptr(),
    init: empty_init,
    startEvent: empty_start,
    stopEvent: empty_stop,
    recordEventState: empty_record,
    finalize: empty_finalize,
};

// ---------------------------------------------------------------------------------------
// The callback mixes.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mix {
    /// What a proxy thread does per network step: start(ProxyStep) +
    /// record(SendWait, transSize) + stop.
    Proxy,
    /// What an application thread does per collective: start(Coll) + stop.
    App,
}

impl Mix {
    fn callbacks(self) -> usize {
        match self {
            Mix::Proxy => 3,
            Mix::App => 2,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Mix::Proxy => "proxy: start(ProxyStep)+record(SendWait)+stop",
            Mix::App => "app: start(Coll)+stop",
        }
    }
}

fn zeroed(type_: u64, parent: *mut c_void, rank: i32) -> Descr {
    // SAFETY: every field of the descriptor is valid zeroed (integers, pointers, bools).
    let mut d: Descr = unsafe { std::mem::zeroed() };
    d.type_ = type_;
    d.parentObj = parent;
    d.rank = rank;
    d
}

/// One thread's view of one plugin: its table, its communicator context and the
/// ProxyOp its steps belong to.
#[derive(Clone, Copy)]
struct Rank {
    table: &'static Table,
    context: usize,
    proxy_op: usize,
    rank: i32,
}

impl Rank {
    /// Starts the ProxyOp the steps of this thread hang under (as NCCL's proxy thread
    /// does once per operation).
    fn open(table: &'static Table, context: usize, rank: i32) -> Rank {
        let mut d = zeroed(abi::event_type::PROXY_OP, null_mut(), rank);
        d.u.proxyOp = ProxyOpDescr {
            pid: std::process::id() as i32,
            channelId: 0,
            peer: (rank + 1) % 8,
            nSteps: i32::MAX,
            chunkSize: 1 << 17,
            isSend: 1,
        };
        let mut handle = null_mut();
        // SAFETY: valid pointers to a local handle slot and descriptor.
        unsafe { (table.startEvent)(context as *mut c_void, &mut handle, &mut d) };
        assert!(!handle.is_null(), "the ProxyOp was refused");
        Rank {
            table,
            context,
            proxy_op: handle as usize,
            rank,
        }
    }

    fn close(self) {
        // SAFETY: any value is allowed.
        unsafe { (self.table.stopEvent)(self.proxy_op as *mut c_void) };
    }

    /// `n` groups of the mix; returns how many starts got a NULL handle.
    #[inline(never)]
    fn run(&self, mix: Mix, n: usize, seq: &mut u64) -> usize {
        let t = self.table;
        let context = self.context as *mut c_void;
        let mut nulls = 0;
        match mix {
            Mix::Proxy => {
                let mut d = zeroed(
                    abi::event_type::PROXY_STEP,
                    self.proxy_op as *mut c_void,
                    self.rank,
                );
                let mut args = StateArgsV4 { transSize: 0 };
                for _ in 0..n {
                    *seq += 1;
                    d.u.proxyStep = ProxyStepDescr { step: *seq as i32 };
                    args.transSize = 1 << 17;
                    let mut h = null_mut();
                    // SAFETY: valid pointers, as NCCL passes them.
                    unsafe {
                        (t.startEvent)(context, &mut h, &mut d);
                        (t.recordEventState)(h, abi::state::PROXY_STEP_SEND_WAIT, &mut args);
                        (t.stopEvent)(h);
                    }
                    nulls += usize::from(h.is_null());
                }
            }
            Mix::App => {
                let mut d = zeroed(abi::event_type::COLL, null_mut(), self.rank);
                for _ in 0..n {
                    *seq += 1;
                    d.u.coll = v7::CollV7 {
                        seqNumber: *seq,
                        func: c"AllReduce".as_ptr(),
                        sendBuff: std::ptr::null(),
                        recvBuff: null_mut(),
                        count: 1 << 20,
                        root: 0,
                        datatype: c"ncclFloat32".as_ptr(),
                        nChannels: 8,
                        nWarps: 16,
                        algo: c"RING".as_ptr(),
                        proto: c"SIMPLE".as_ptr(),
                        parentGroup: null_mut(),
                        kernelVariant: std::ptr::null(),
                        isSymColl: CBool::FALSE,
                        userTag: 0,
                    };
                    let mut h = null_mut();
                    // SAFETY: valid pointers, as NCCL passes them.
                    unsafe {
                        (t.startEvent)(context, &mut h, &mut d);
                        (t.stopEvent)(h);
                    }
                    nulls += usize::from(h.is_null());
                }
            }
        }
        nulls
    }
}

// ---------------------------------------------------------------------------------------
// Worker threads: persistent, so each keeps its (faulted-in) rings across phases, as an
// NCCL thread does.

/// What a job measured, one entry per variant.
type Job = Box<dyn FnOnce() -> Vec<Samples> + Send>;

struct Worker {
    jobs: Sender<Job>,
    results: Receiver<Vec<Samples>>,
}

fn spawn_workers(n: usize) -> Vec<Worker> {
    (0..n)
        .map(|i| {
            let (jobs, job_rx) = channel::<Job>();
            let (result_tx, results) = channel();
            std::thread::Builder::new()
                .name(format!("bench-{i}"))
                .spawn(move || {
                    for job in job_rx {
                        if result_tx.send(job()).is_err() {
                            break;
                        }
                    }
                })
                .expect("spawn a worker");
            Worker { jobs, results }
        })
        .collect()
}

/// Per-callback costs of each timed batch (ns), wall and thread CPU time.
#[derive(Clone, Default)]
struct Samples {
    wall: Vec<f64>,
    cpu: Vec<f64>,
    /// Starts that got a NULL handle (refused or dropped).
    nulls: usize,
}

impl Samples {
    fn extend(&mut self, other: Samples) {
        self.wall.extend(other.wall);
        self.cpu.extend(other.cpu);
        self.nulls += other.nulls;
    }
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// Times one batch and adds its (wall, cpu) ns per callback to `samples`.
fn timed(rank: &Rank, mix: Mix, batch: usize, seq: &mut u64, samples: &mut Samples) {
    let cpu0 = nccl_profiler_scorep::clock::thread_cpu_ns();
    let wall0 = Instant::now();
    let nulls = rank.run(mix, batch, seq);
    let wall = wall0.elapsed().as_nanos() as f64;
    let cpu = (nccl_profiler_scorep::clock::thread_cpu_ns() - cpu0) as f64;
    let callbacks = (batch * mix.callbacks()) as f64;
    samples.wall.push(wall / callbacks);
    samples.cpu.push(cpu / callbacks);
    samples.nulls += nulls;
}

// ---------------------------------------------------------------------------------------
// The plugins under test, their lifecycle and their summary lines.

struct Variant {
    name: &'static str,
    table: &'static Table,
    /// The event log directory of a real plugin; `None` for the empty one.
    out_dir: Option<PathBuf>,
}

impl Variant {
    /// One init per rank (thread), as NCCL does per communicator rank.
    fn init(&self, ranks: usize, cycle: u64) -> Vec<usize> {
        (0..ranks)
            .map(|rank| {
                let mut context = null_mut();
                let mut mask: c_int = 0;
                // SAFETY: valid pointers and a C string.
                let rc = unsafe {
                    (self.table.init)(
                        &mut context,
                        0xBE_0000 + cycle,
                        &mut mask,
                        c"bench".as_ptr(),
                        1,
                        ranks as c_int,
                        rank as c_int,
                        None,
                    )
                };
                assert_eq!(rc, 0);
                assert!(!context.is_null(), "init gave no context");
                context as usize
            })
            .collect()
    }

    fn finalize(&self, contexts: &[usize]) {
        for &context in contexts {
            // SAFETY: any value is allowed.
            unsafe { (self.table.finalize)(context as *mut c_void) };
        }
    }

    /// The counters of the last summary line of the event log (the cycle just
    /// finalized); `None` for the empty plugin.
    fn last_summary(&self) -> Option<Value> {
        let dir = self.out_dir.as_ref()?;
        let Some(path) = std::fs::read_dir(dir)
            .expect("output directory")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        else {
            panic!("no event log in {}", dir.display());
        };
        let mut file = std::fs::File::open(&path).expect("open the event log");
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        file.seek(SeekFrom::Start(len.saturating_sub(1 << 16)))
            .expect("seek");
        let mut tail = Vec::new();
        file.read_to_end(&mut tail).expect("read the event log");
        let tail = String::from_utf8_lossy(&tail);
        let line = tail
            .lines()
            .rev()
            .find(|l| l.contains("\"type\":\"summary\""))
            .expect("a summary line after finalize");
        Some(serde_json::from_str::<Value>(line).expect("summary is JSON")["counters"].clone())
    }
}

/// What a cycle's summary says: events written, and every counter of lost or refused
/// data that is not zero.
fn losses(counters: &Value) -> (u64, Vec<String>) {
    let written = counters["events_written"].as_u64().unwrap_or(0);
    let lost = counters
        .as_object()
        .map(|map| {
            map.iter()
                .filter(|(name, value)| {
                    value.as_u64().unwrap_or(0) > 0
                        && !matches!(name.as_str(), "events_written" | "pxn_foreign_ops")
                })
                .map(|(name, value)| format!("{name}={value}"))
                .collect()
        })
        .unwrap_or_default();
    (written, lost)
}

/// What one variant did in one phase.
struct Measured {
    samples: Samples,
    /// Median CPU figure of each thread (the spread between threads).
    per_thread_cpu: Vec<f64>,
    /// From the cycle's summary line (real plugins only).
    events_written: Option<u64>,
    lost: Vec<String>,
}

struct PhaseResult {
    mix: Mix,
    threads: usize,
    /// One per variant, in the order of the variants.
    measured: Vec<Measured>,
    expected_events: u64,
}

/// One measured phase: its own init/finalize cycle, `threads` workers running `mix`
/// concurrently, the variants taking turns batch by batch.
fn phase(
    variants: &[&'static Variant],
    workers: &[Worker],
    mix: Mix,
    threads: usize,
    batches: usize,
    batch: usize,
    cycle: u64,
) -> PhaseResult {
    let contexts: Vec<Vec<usize>> = variants.iter().map(|v| v.init(threads, cycle)).collect();
    let barrier = Arc::new(Barrier::new(threads));
    for (i, worker) in workers.iter().take(threads).enumerate() {
        let mine: Vec<(&'static Table, usize)> = variants
            .iter()
            .zip(&contexts)
            .map(|(v, c)| (v.table, c[i]))
            .collect();
        let barrier = Arc::clone(&barrier);
        let job: Job = Box::new(move || {
            let ranks: Vec<Rank> = mine
                .iter()
                .map(|&(table, context)| Rank::open(table, context, i as i32))
                .collect();
            let mut seq = 0;
            let mut samples = vec![Samples::default(); ranks.len()];
            for _ in 0..WARM_BATCHES {
                for rank in &ranks {
                    rank.run(mix, batch, &mut seq);
                }
            }
            barrier.wait();
            for b in 0..batches {
                // Rotate the order so no variant always runs first.
                for k in 0..ranks.len() {
                    let v = (b + k) % ranks.len();
                    timed(&ranks[v], mix, batch, &mut seq, &mut samples[v]);
                }
            }
            for rank in ranks {
                rank.close();
            }
            samples
        });
        worker.jobs.send(job).expect("worker alive");
    }
    let mut measured: Vec<Measured> = variants
        .iter()
        .map(|_| Measured {
            samples: Samples::default(),
            per_thread_cpu: Vec::new(),
            events_written: None,
            lost: Vec::new(),
        })
        .collect();
    for worker in workers.iter().take(threads) {
        let per_variant = worker.results.recv().expect("worker result");
        for (m, s) in measured.iter_mut().zip(per_variant) {
            m.per_thread_cpu.push(median(&s.cpu));
            m.samples.extend(s);
        }
    }
    for ((variant, contexts), m) in variants.iter().zip(&contexts).zip(&mut measured) {
        variant.finalize(contexts);
        if let Some(counters) = variant.last_summary() {
            let (written, lost) = losses(&counters);
            m.events_written = Some(written);
            m.lost = lost;
        }
    }
    PhaseResult {
        mix,
        threads,
        measured,
        // One event per group and thread, plus each thread's ProxyOp.
        expected_events: (threads * ((WARM_BATCHES + batches) * batch + 1)) as u64,
    }
}

/// Writes one full lap of every worker's ring of `variant` so no page fault is left for
/// the timed phases, in init/finalize cycles small enough that nothing is dropped (each
/// finalize drains the rings). Worker 0's first lap is timed on its own: the cost of a
/// fresh ring. Returns its median CPU ns per callback.
fn warm_rings(variant: &Variant, workers: &[Worker], capacity: usize, cycle: &mut u64) -> f64 {
    let chunks = 5;
    let per_chunk = capacity / (chunks - 1) / Mix::Proxy.callbacks() + 1;
    let batch = 1000;
    let mut cold = Vec::new();
    for group in [0..1, 1..workers.len()] {
        for chunk in 0..chunks {
            *cycle += 1;
            let contexts = variant.init(workers.len(), *cycle);
            for i in group.clone() {
                let (table, context) = (variant.table, contexts[i]);
                let job: Job = Box::new(move || {
                    let p = Rank::open(table, context, i as i32);
                    let mut seq = 0;
                    let mut s = Samples::default();
                    for _ in 0..per_chunk / batch {
                        timed(&p, Mix::Proxy, batch, &mut seq, &mut s);
                    }
                    p.close();
                    vec![s]
                });
                workers[i].jobs.send(job).expect("worker alive");
            }
            for i in group.clone() {
                let s = workers[i].results.recv().expect("worker result");
                // The last chunk starts the second lap: not part of the first.
                if i == 0 && chunk + 1 < chunks {
                    cold.extend(s.into_iter().flat_map(|s| s.cpu));
                }
            }
            variant.finalize(&contexts);
            if let Some(counters) = variant.last_summary() {
                let (_, lost) = losses(&counters);
                if !lost.is_empty() {
                    eprintln!(
                        "note: {} warm-up cycle lost records: {}",
                        variant.name,
                        lost.join(", ")
                    );
                }
            }
        }
    }
    median(&cold)
}

fn main() {
    let batches = env_usize("HOT_PATH_BATCHES", 200);
    let batch = env_usize("HOT_PATH_BATCH", 1000);
    let many = env_usize("HOT_PATH_THREADS", 8);
    let baseline = std::env::var_os("HOT_PATH_BASELINE").map(PathBuf::from);

    let work = tempfile::tempdir().expect("temporary directory");
    let plugin_path = built_library();
    if plugin_path.components().any(|c| c.as_os_str() == "debug") {
        eprintln!(
            "warning: {} is a debug build; run `cargo bench` for the figures",
            plugin_path.display()
        );
    }

    // A ring must hold one thread's whole phase (the collector may fall behind a thread
    // that does nothing but call the plugin): size it, within the plugin's 1 GiB limit.
    let record = std::mem::size_of::<Record>();
    let per_phase = (WARM_BATCHES + batches) * batch * Mix::Proxy.callbacks() + 16;
    let needed = (per_phase * record * 5 / 4).div_ceil(1 << 20);
    let mib = env_usize("HOT_PATH_RING_MIB", needed.max(64)).clamp(needed, 1024);
    let capacity = (mib << 20) / record;
    for (key, value) in [
        ("NCCL_SCOREP_MODE", "jsonl".to_owned()),
        ("NCCL_SCOREP_BUFFER_SIZE", format!("{mib}M")),
        ("NCCL_SCOREP_ON_FULL", "drop".to_owned()),
        ("NCCL_SCOREP_EVENTS", "all".to_owned()),
        // A ring that holds a whole phase is beyond the default memory limit, which would
        // give it less.
        ("NCCL_SCOREP_MEMORY_LIMIT", "off".to_owned()),
    ] {
        std::env::set_var(key, value);
    }

    let (empty, empty_kind) = match build_empty_plugin(work.path()) {
        Some(path) => (load_table(&path), "C shared object, dlopen'd"),
        None => (&EMPTY_TABLE, "Rust table in the benchmark (no C compiler)"),
    };
    let leak = |v: Variant| -> &'static Variant { Box::leak(Box::new(v)) };
    let mut variants = vec![
        leak(Variant {
            name: "empty",
            table: empty,
            out_dir: None,
        }),
        leak(Variant {
            name: "plugin",
            table: load_table(&plugin_path),
            out_dir: Some(work.path().join("out-plugin")),
        }),
    ];
    let chained_plugin = build_chained_plugin(work.path());
    if chained_plugin.is_some() {
        // A copy: its own statics, and its own settings at its first init.
        let copy = work.path().join("libchained.so");
        std::fs::copy(&plugin_path, &copy).expect("copy the plugin");
        variants.push(leak(Variant {
            name: "chained",
            table: load_table(&copy),
            out_dir: Some(work.path().join("out-chained")),
        }));
    }
    if let Some(path) = &baseline {
        // A copy, so that even the same file gets its own instance (own statics).
        let copy = work.path().join("libbaseline.so");
        std::fs::copy(path, &copy)
            .unwrap_or_else(|e| panic!("HOT_PATH_BASELINE {}: {e}", path.display()));
        variants.push(leak(Variant {
            name: "baseline",
            table: load_table(&copy),
            out_dir: Some(work.path().join("out-baseline")),
        }));
    }

    println!("nccl-scorep hot-path benchmark");
    println!("  plugin:   {}", plugin_path.display());
    if let Some(path) = &baseline {
        println!("  baseline: {}", path.display());
    }
    println!("  empty:    {empty_kind}");
    if chained_plugin.is_some() {
        println!("  chained:  the plugin, with an empty plugin that asks for every event chained behind it");
    }
    println!(
        "  cpu:      {} ({} logical CPUs)",
        cpu_model(),
        available_cpus()
    );
    println!(
        "  config:   jsonl mode, ring {mib} MiB per thread ({capacity} records of {record} B), drop when full"
    );
    println!(
        "  method:   {batches} timed batches of {batch} groups per thread and variant (after {WARM_BATCHES} untimed), \
         variants taking turns; figure = median over batches of (batch time / callbacks)"
    );

    let workers = spawn_workers(many.max(1));
    let mut cycle = 0;
    let mut cold = None;
    for variant in variants.iter().filter(|v| v.out_dir.is_some()) {
        // Each plugin reads its settings at its first init: give each its own log.
        let dir = variant.out_dir.as_ref().expect("a real plugin");
        std::env::set_var("NCCL_SCOREP_OUTPUT_DIR", dir);
        match (&chained_plugin, variant.name) {
            (Some(chained), "chained") => std::env::set_var("NCCL_SCOREP_CHAIN", chained),
            _ => std::env::remove_var("NCCL_SCOREP_CHAIN"),
        }
        eprintln!("faulting in the rings of {} ...", variant.name);
        let first_lap = warm_rings(variant, &workers, capacity, &mut cycle);
        if variant.name == "plugin" {
            cold = Some(first_lap);
        }
    }

    let mut results = Vec::new();
    for threads in [1, many] {
        for mix in [Mix::Proxy, Mix::App] {
            cycle += 1;
            eprintln!("measuring {threads} thread(s), {} ...", mix.name());
            results.push(phase(
                &variants, &workers, mix, threads, batches, batch, cycle,
            ));
        }
    }
    drop(workers);

    println!();
    println!("ns per callback: median over batches of (batch time / callbacks in the batch)");
    if many > available_cpus() {
        println!(
            "{many} threads share {} CPUs: the cpu column (thread CPU time) is the cost; wall includes waiting for a CPU",
            available_cpus()
        );
    }
    println!(
        "{:<46} {:>3}  {:<8} {:>6} {:>6} {:>10} {:>9}",
        "mix",
        "thr",
        "variant",
        "wall",
        "cpu",
        "cpu-empty",
        format!("cpu {many}T/1T")
    );
    let plugin_index = 1;
    let mut ok = true;
    for r in &results {
        let empty_cpu = median(&r.measured[0].samples.cpu);
        for (v, (variant, m)) in variants.iter().zip(&r.measured).enumerate() {
            let (wall, cpu) = (median(&m.samples.wall), median(&m.samples.cpu));
            let one = results
                .iter()
                .find(|o| o.mix == r.mix && o.threads == 1)
                .map(|o| median(&o.measured[v].samples.cpu))
                .unwrap_or(f64::NAN);
            let ratio = cpu / one;
            println!(
                "{:<46} {:>3}  {:<8} {:>6.1} {:>6.1} {:>10} {:>9}",
                r.mix.name(),
                r.threads,
                variant.name,
                wall,
                cpu,
                if v == 0 {
                    "-".to_owned()
                } else {
                    format!("{:.1}", cpu - empty_cpu)
                },
                if r.threads == 1 {
                    "-".to_owned()
                } else {
                    format!("{ratio:.2}x")
                }
            );
            if v == plugin_index {
                if r.threads == 1 {
                    ok &= cpu <= TARGET_1T_NS;
                } else {
                    ok &= ratio <= TARGET_RATIO;
                }
            }
        }
    }
    if let Some(cold) = cold {
        println!(
            "plugin, first lap of a fresh ring (page faults), proxy mix, 1 thread: {cold:.1} ns/callback cpu"
        );
    }
    println!();
    println!("per-thread medians of cpu ns/callback, and what each cycle's summary line says:");
    for r in &results {
        for (variant, m) in variants.iter().zip(&r.measured).skip(1) {
            let spread: Vec<String> = m.per_thread_cpu.iter().map(|v| format!("{v:.1}")).collect();
            let written = m.events_written.unwrap_or(0);
            println!(
                "  {:<46} {:>2}T {:<8} [{}]; events written {} of {}; NULL handles {}; losses: {}",
                r.mix.name(),
                r.threads,
                variant.name,
                spread.join(" "),
                written,
                r.expected_events,
                m.samples.nulls,
                if m.lost.is_empty() {
                    "none".to_owned()
                } else {
                    m.lost.join(", ")
                }
            );
            ok &= m.lost.is_empty() && written == r.expected_events && m.samples.nulls == 0;
        }
    }
    println!();
    println!(
        "targets (plugin: <= {TARGET_1T_NS} ns/callback on 1 thread, {many}T within {TARGET_RATIO}x of 1T, nothing lost): {}",
        if ok { "met" } else { "NOT met" }
    );
}
