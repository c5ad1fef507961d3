//! Benchmark of the whole recording path in OTF2 mode: how many NCCL events per second go
//! from the callbacks through the collector to an OTF2 archive on disk with nothing
//! dropped, and how many bytes each event costs on disk. Run it with
//!
//! ```text
//! cargo bench -p nccl-profiler-scorep --bench trace_throughput
//! ```
//!
//! A copy of the release cdylib Cargo built next to this benchmark is loaded the way NCCL
//! loads a profiler (`dlopen(RTLD_NOW | RTLD_LOCAL)`, the `ncclProfiler_v7` table) with
//! `NCCL_SCOREP_MODE=otf2`, `NCCL_SCOREP_EVENTS=all` and `NCCL_SCOREP_ON_FULL=wait` (a
//! full ring makes the calling thread wait for the collector: nothing is dropped), output
//! in a temporary directory. Each communicator rank gets an application thread and a proxy
//! thread that play, per collective, what NCCL 2.28+ calls for one `ncclAllReduce` with
//! the RING algorithm on 2 channels:
//!
//! * application thread: GroupApi start, record GroupStartApiStop (23), CollApi
//!   start/stop, record GroupEndApiStart (24), KernelLaunch start/stop, Group start, Coll
//!   start (AllReduce, RING, SIMPLE, 2 channels), Coll stop, Group stop, GroupApi stop
//!   (12 callbacks, 5 events);
//! * proxy thread (handed the Coll handle through a bounded queue): on channel 0 a send
//!   ProxyOp and on channel 1 a receive ProxyOp, each the Coll's child with 8 ProxySteps
//!   (send: start, SendGPUWait (8), SendWait (9) with the step's size, stop; receive:
//!   start, RecvWait (10), RecvFlushWait (11) with the size, RecvGPUWait (12), stop), then
//!   one KernelCh per channel (start with the GPU timer, KernelChStop (22) with the GPU
//!   timer, stop) (82 callbacks, 20 events).
//!
//! The clock runs from the first callback to the return of the last `finalize`, which
//! drains the rings, writes what is left and closes the archive. The plugin's own log
//! (through a logger given to `init`, compiled here in C because NCCL's logger is
//! C-variadic) gives the events recorded, the OTF2 events written and every loss. The
//! archive is then checked with `otf2-print -Werror --silent`; the benchmark fails if it
//! is invalid, if anything was lost, or if an event is missing. Repairs the trace writer
//! reports (`trace writer: otf2_…`) are printed, not failed on: no event is lost by them.
//!
//! Settings (environment): `TRACE_BENCH_COLLECTIVES` (default 50000) collectives per
//! communicator rank; `TRACE_BENCH_COMMS` (default `1,2`) the runs, each with that many
//! communicator ranks (2 threads each) in one process; `TRACE_BENCH_BUFFER` (default
//! the plugin's, `4M`) the ring size per thread; `TRACE_BENCH_WORKDIR` a directory that keeps the
//! plugin copies (for a profiler's symbols) instead of a temporary one;
//! `TRACE_BENCH_KEEP_ARCHIVE` (any value) keeps the archives there too;
//! `TRACE_BENCH_PLUGIN` the path of another build of the plugin to measure instead (say,
//! one from before a change); `TRACE_BENCH_RECORD` (any value) runs it with
//! `NCCL_SCOREP_MODE=otf2,record`, which also records every call (docs/record.md), and
//! reports the recording's size; `TRACE_BENCH_DEFERRED` (any value) runs it with
//! `NCCL_SCOREP_MODE=deferred`, where the recording is all the plugin does during the run,
//! and checks the recording instead of an archive (every call recorded, nothing dropped).
//! The results are described in `docs/performance.md`.

mod support;

use nccl_profiler_abi::CBool;
use nccl_profiler_abi::{
    self as abi, event_type as ty, state as st, v5, v7, KernelChDescrV4, LoggerFn, ProxyOpDescr,
    ProxyStepDescr, StateArgsV4,
};
use nccl_profiler_scorep::clock;
use std::ffi::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::ptr::null_mut;
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use support::{
    available_cpus, built_library, cpu_model, env_usize, load_table, open_forever, Table,
};

type Descr = v7::ncclProfilerEventDescr_v7_t;

/// The targets of the project.
const TARGET_EVENTS_PER_S: f64 = 10e6;
const TARGET_BYTES_PER_EVENT: f64 = 16.0;

/// Channels per collective (one ProxyOp and one KernelCh each).
const CHANNELS: u8 = 2;
/// ProxySteps per ProxyOp.
const STEPS: i32 = 8;
/// Bytes per step.
const STEP_BYTES: usize = 1 << 17;
/// Collectives the application thread may run ahead of its proxy thread.
const PROXY_QUEUE: usize = 256;
/// Ranks of the emulated communicator (only some are in this process).
const N_RANKS: c_int = 8;
/// The emulated GPU timer: the host clock plus this offset.
const GPU_TIMER_OFFSET: u64 = 1 << 40;

/// Callbacks and finished events per collective, application and proxy thread together.
const APP_CALLBACKS: u64 = 12;
const APP_EVENTS: u64 = 5;
const PROXY_CALLBACKS: u64 = (2 + STEPS as u64 * 4) // send ProxyOp and its steps
    + (2 + STEPS as u64 * 5) // receive ProxyOp and its steps
    + 3 * CHANNELS as u64; // KernelCh
const PROXY_EVENTS: u64 = 2 * (1 + STEPS as u64) + CHANNELS as u64;

// ---------------------------------------------------------------------------------------
// The logger.

/// NCCL's logger is C-variadic (`ncclDebugLogger_t`), which stable Rust cannot define: this
/// one is C, keeps the messages in memory and hands them out with `bench_log_take`.
const LOGGER_C: &str = r#"
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char text[1 << 20];
static size_t used;
__attribute__((visibility("default")))
void bench_logger(int level, unsigned long flags, const char* file, int line,
                  const char* fmt, ...) {
  char message[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&lock);
  if (used < sizeof text) {
    int n = snprintf(text + used, sizeof text - used, "%d %s\n", level, message);
    if (n > 0) used += (size_t)n;
    if (used > sizeof text - 1) used = sizeof text - 1;
  }
  pthread_mutex_unlock(&lock);
}
__attribute__((visibility("default")))
size_t bench_log_take(char* out, size_t cap) {
  pthread_mutex_lock(&lock);
  size_t n = used < cap ? used : cap;
  memcpy(out, text, n);
  used = 0;
  pthread_mutex_unlock(&lock);
  return n;
}
"#;

type TakeFn = unsafe extern "C" fn(*mut c_char, usize) -> usize;

#[derive(Clone, Copy)]
struct Logger {
    log: LoggerFn,
    take: TakeFn,
}

impl Logger {
    /// Compiles and loads the logger with the system C compiler.
    fn build(dir: &Path) -> Logger {
        let library = support::compile_shared_object(dir, "bench-logger", LOGGER_C)
            .unwrap_or_else(|why| panic!("the logger: {why}"));
        let library = open_forever(&library);
        // SAFETY: both symbols are functions of exactly these C signatures (above), and
        // the library stays loaded for the rest of the process.
        unsafe {
            Logger {
                log: *library
                    .get::<LoggerFn>(b"bench_logger\0")
                    .expect("bench_logger"),
                take: *library
                    .get::<TakeFn>(b"bench_log_take\0")
                    .expect("bench_log_take"),
            }
        }
    }

    /// Everything logged since the last call, one message a line ("<level> <text>").
    fn take(&self) -> String {
        let mut buffer = vec![0u8; 1 << 20];
        // SAFETY: the buffer is writable for its whole length.
        let n = unsafe { (self.take)(buffer.as_mut_ptr().cast(), buffer.len()) };
        buffer.truncate(n);
        String::from_utf8_lossy(&buffer).into_owned()
    }
}

// ---------------------------------------------------------------------------------------
// The callback streams.

fn zeroed(type_: u64, parent: *mut c_void, rank: c_int) -> Descr {
    // SAFETY: every field of the descriptor is valid zeroed (integers, pointers, bools).
    let mut d: Descr = unsafe { std::mem::zeroed() };
    d.type_ = type_;
    d.parentObj = parent;
    d.rank = rank;
    d
}

/// What one thread did.
#[derive(Clone, Copy, Default)]
struct Tally {
    callbacks: u64,
    starts: u64,
    nulls: u64,
    cpu_ns: u64,
    /// When its last callback returned.
    done: Option<Instant>,
}

/// One thread's calls into one communicator rank, counted as NCCL would make them.
struct Caller {
    table: &'static Table,
    context: *mut c_void,
    rank: c_int,
    tally: Tally,
}

impl Caller {
    #[inline]
    fn start(&mut self, mut d: Descr) -> *mut c_void {
        let mut handle = null_mut();
        // SAFETY: valid pointers to a local handle slot and descriptor, as NCCL passes them.
        unsafe { (self.table.startEvent)(self.context, &mut handle, &mut d) };
        self.tally.callbacks += 1;
        self.tally.starts += 1;
        self.tally.nulls += u64::from(handle.is_null());
        handle
    }

    /// NCCL makes no call for a NULL handle.
    #[inline]
    fn record(&mut self, handle: *mut c_void, state: c_int, args: Option<StateArgsV4>) {
        if handle.is_null() {
            return;
        }
        let mut args = args;
        let pointer = args.as_mut().map_or(null_mut(), |a| a as *mut StateArgsV4);
        // SAFETY: a handle the plugin gave out and NULL or a valid state argument.
        unsafe { (self.table.recordEventState)(handle, state, pointer) };
        self.tally.callbacks += 1;
    }

    #[inline]
    fn stop(&mut self, handle: *mut c_void) {
        if handle.is_null() {
            return;
        }
        // SAFETY: a handle the plugin gave out.
        unsafe { (self.table.stopEvent)(handle) };
        self.tally.callbacks += 1;
    }

    /// One `ncclAllReduce` on the application thread; returns the Coll handle.
    fn app_collective(&mut self, seq: u64) -> *mut c_void {
        let mut d = zeroed(ty::GROUP_API, null_mut(), 0);
        d.u.groupApi = v5::GroupApiV5 {
            graphCaptured: CBool::FALSE,
            groupDepth: 1,
        };
        let group_api = self.start(d);
        self.record(group_api, st::GROUP_START_API_STOP, None);

        let mut d = zeroed(ty::COLL_API, group_api, 0);
        d.u.collApi = v7::CollApiV7 {
            func: c"AllReduce".as_ptr(),
            count: 1 << 20,
            datatype: c"ncclFloat32".as_ptr(),
            root: 0,
            stream: null_mut(),
            graphCaptured: CBool::FALSE,
            userTag: 0,
        };
        let coll_api = self.start(d);
        self.stop(coll_api);
        self.record(group_api, st::GROUP_END_API_START, None);

        let mut d = zeroed(ty::KERNEL_LAUNCH, group_api, 0);
        d.u.kernelLaunch = v5::KernelLaunchV5 { stream: null_mut() };
        let launch = self.start(d);
        self.stop(launch);

        let group = self.start(zeroed(ty::GROUP, null_mut(), 0));
        let mut d = zeroed(ty::COLL, coll_api, self.rank);
        d.u.coll = v7::CollV7 {
            seqNumber: seq,
            func: c"AllReduce".as_ptr(),
            sendBuff: std::ptr::null(),
            recvBuff: null_mut(),
            count: 1 << 20,
            root: 0,
            datatype: c"ncclFloat32".as_ptr(),
            nChannels: CHANNELS,
            nWarps: 16,
            algo: c"RING".as_ptr(),
            proto: c"SIMPLE".as_ptr(),
            parentGroup: group,
            kernelVariant: std::ptr::null(),
            isSymColl: CBool::FALSE,
            userTag: 0,
        };
        let coll = self.start(d);
        self.stop(coll);
        self.stop(group);
        self.stop(group_api);
        coll
    }

    /// The proxy thread's work for one collective: a send ProxyOp on channel 0 and a
    /// receive ProxyOp on channel 1, each with its steps, then one KernelCh per channel.
    /// `step_base` numbers the steps of each connection as NCCL does (always rising).
    fn proxy_collective(&mut self, coll: *mut c_void, step_base: i32) {
        let kernel_begin = clock::now_ns() + GPU_TIMER_OFFSET;
        let pid = std::process::id() as i32;
        for channel in 0..CHANNELS {
            let send = channel % 2 == 0;
            let peer = if send {
                (self.rank + 1) % N_RANKS
            } else {
                (self.rank + N_RANKS - 1) % N_RANKS
            };
            let mut d = zeroed(ty::PROXY_OP, coll, self.rank);
            d.u.proxyOp = ProxyOpDescr {
                pid,
                channelId: channel,
                peer,
                nSteps: STEPS,
                chunkSize: STEP_BYTES as c_int,
                isSend: c_int::from(send),
            };
            let op = self.start(d);
            for s in 0..STEPS {
                let mut d = zeroed(ty::PROXY_STEP, op, self.rank);
                d.u.proxyStep = ProxyStepDescr {
                    step: step_base + s,
                };
                let step = self.start(d);
                let size = |n: usize| Some(StateArgsV4 { transSize: n });
                if send {
                    self.record(step, st::PROXY_STEP_SEND_GPU_WAIT, size(STEP_BYTES));
                    self.record(step, st::PROXY_STEP_SEND_WAIT, size(STEP_BYTES));
                } else {
                    self.record(step, st::PROXY_STEP_RECV_WAIT, size(0));
                    self.record(step, st::PROXY_STEP_RECV_FLUSH_WAIT, size(STEP_BYTES));
                    self.record(step, st::PROXY_STEP_RECV_GPU_WAIT, size(0));
                }
                self.stop(step);
            }
            self.stop(op);
        }
        for channel in 0..CHANNELS {
            let mut d = zeroed(ty::KERNEL_CH, coll, 0);
            d.u.kernelCh = KernelChDescrV4 {
                channelId: channel,
                pTimer: kernel_begin,
            };
            let kernel = self.start(d);
            let end = clock::now_ns() + GPU_TIMER_OFFSET;
            self.record(
                kernel,
                st::KERNEL_CH_STOP,
                Some(StateArgsV4 {
                    kernelChPTimer: end,
                }),
            );
            self.stop(kernel);
        }
    }
}

/// A raw pointer that may cross threads (a handle or a context: plain values to NCCL).
#[derive(Clone, Copy)]
struct Raw(*mut c_void);
// SAFETY: handles and contexts are opaque values for the caller; the plugin accepts them
// from any thread, as NCCL hands them between its threads.
unsafe impl Send for Raw {}

impl Raw {
    fn get(self) -> *mut c_void {
        self.0
    }
}

// ---------------------------------------------------------------------------------------
// One run: its own copy of the plugin, init, the streams, finalize, the archive.

struct RunResult {
    comms: usize,
    collectives: u64,
    callbacks: u64,
    starts: u64,
    nulls: u64,
    /// From the first callback to the return of the last finalize.
    total: Duration,
    /// From the first callback to the return of the last callback.
    producers: Duration,
    /// CPU time of the callback threads, and of the rest of the process (the collector,
    /// with the finalize calls).
    producer_cpu: Duration,
    collector_cpu: Duration,
    /// Peak resident memory of the process during the run (rings, the collector's state).
    peak_rss: Option<u64>,
    events_recorded: Option<u64>,
    otf2_events: Option<u64>,
    otf2_events_printed: Option<u64>,
    /// The plugin's last log line said "nothing lost".
    nothing_lost: bool,
    warnings: Vec<String>,
    files: Vec<(String, u64)>,
    /// What record mode wrote (`TRACE_BENCH_RECORD`), else 0.
    recording_bytes: u64,
    bytes: u64,
    evt_bytes: u64,
    breakdown: Breakdown,
    valid: Result<(), String>,
}

/// Resets the process's peak resident set size (Linux 4.0+; ignored elsewhere).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The process's peak resident set size since the last reset, in MiB.
fn peak_rss_mib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib >> 10)
}

fn process_cpu() -> Duration {
    // SAFETY: `getrusage` fills the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn run(
    plugin: &Path,
    work: &Path,
    logger: Logger,
    comms: usize,
    collectives: u64,
    buffer: &str,
) -> RunResult {
    // A copy of its own: own statics, own configuration (read at the first init).
    let copy = work.join(format!("libnccl_profiler_scorep-{comms}.so"));
    std::fs::copy(plugin, &copy).expect("copy the plugin");
    let out_dir = work.join(format!("out-{comms}"));
    for (key, value) in [
        ("NCCL_SCOREP_MODE", mode()),
        ("NCCL_SCOREP_EVENTS", "all"),
        ("NCCL_SCOREP_ON_FULL", "wait"),
        ("NCCL_SCOREP_BUFFER_SIZE", buffer),
        // One part is measured: no merge at the end.
        ("NCCL_SCOREP_AUTO_MERGE", "0"),
    ] {
        std::env::set_var(key, value);
    }
    std::env::set_var("NCCL_SCOREP_OUTPUT_DIR", &out_dir);
    let table = load_table(&copy);

    let contexts: Vec<Raw> = (0..comms)
        .map(|rank| {
            let mut context = null_mut();
            let mut mask: c_int = 0;
            // SAFETY: valid pointers, a C string and a logger of NCCL's signature.
            let rc = unsafe {
                (table.init)(
                    &mut context,
                    0x7ace_be4c_0000_0000 + comms as u64,
                    &mut mask,
                    c"trace-bench".as_ptr(),
                    1,
                    N_RANKS,
                    rank as c_int,
                    Some(logger.log),
                )
            };
            assert_eq!(rc, 0);
            assert!(!context.is_null(), "init gave no context");
            assert_eq!(
                mask & 0xFFFF,
                0xFFFF,
                "NCCL_SCOREP_EVENTS=all was not taken"
            );
            Raw(context)
        })
        .collect();
    let mut log = logger.take();

    let barrier = Arc::new(Barrier::new(2 * comms + 1));
    let mut threads = Vec::new();
    for (rank, &context) in contexts.iter().enumerate() {
        let (to_proxy, from_app) = sync_channel::<Raw>(PROXY_QUEUE);
        let caller = move || Caller {
            table,
            context: context.get(),
            rank: rank as c_int,
            tally: Tally::default(),
        };
        let app_barrier = Arc::clone(&barrier);
        threads.push(
            std::thread::Builder::new()
                .name(format!("app-{rank}"))
                .spawn(move || {
                    let mut app = caller();
                    app_barrier.wait();
                    let cpu0 = clock::thread_cpu_ns();
                    for seq in 1..=collectives {
                        let coll = app.app_collective(seq);
                        to_proxy.send(Raw(coll)).expect("proxy thread alive");
                    }
                    app.tally.done = Some(Instant::now());
                    app.tally.cpu_ns = clock::thread_cpu_ns() - cpu0;
                    app.tally
                })
                .expect("spawn an application thread"),
        );
        let proxy_barrier = Arc::clone(&barrier);
        threads.push(
            std::thread::Builder::new()
                .name(format!("proxy-{rank}"))
                .spawn(move || {
                    let mut proxy = caller();
                    proxy_barrier.wait();
                    let cpu0 = clock::thread_cpu_ns();
                    let mut step_base = 0;
                    for coll in from_app {
                        proxy.proxy_collective(coll.get(), step_base);
                        step_base = step_base.wrapping_add(STEPS);
                    }
                    proxy.tally.done = Some(Instant::now());
                    proxy.tally.cpu_ns = clock::thread_cpu_ns() - cpu0;
                    proxy.tally
                })
                .expect("spawn a proxy thread"),
        );
    }
    reset_peak_rss();
    let process_cpu0 = process_cpu();
    barrier.wait();
    let t0 = Instant::now();
    let tallies: Vec<Tally> = threads
        .into_iter()
        .map(|t| t.join().expect("a bench thread panicked"))
        .collect();
    for context in &contexts {
        // SAFETY: a context this plugin gave out, finalized once.
        unsafe { (table.finalize)(context.get()) };
    }
    let total = t0.elapsed();
    let process_cpu = process_cpu() - process_cpu0;
    let peak_rss = peak_rss_mib();
    log.push_str(&logger.take());

    let producers = tallies
        .iter()
        .filter_map(|t| t.done)
        .max()
        .map_or(Duration::ZERO, |done| done - t0);
    let producer_cpu = Duration::from_nanos(tallies.iter().map(|t| t.cpu_ns).sum());
    // The main thread only waits (joins, finalize): the rest is the collector's.
    let collector_cpu = process_cpu.saturating_sub(producer_cpu);

    let summary = read_log(&log);
    let recording_bytes = dir_bytes(&out_dir.join("recordings"));
    let tally = |f: fn(&Tally) -> u64| tallies.iter().map(f).sum();
    // What every run measures; the rest is the archive's, or the recording's.
    let measured = RunResult {
        comms,
        collectives,
        callbacks: tally(|t| t.callbacks),
        starts: tally(|t| t.starts),
        nulls: tally(|t| t.nulls),
        total,
        producers,
        producer_cpu,
        collector_cpu,
        peak_rss,
        events_recorded: None,
        otf2_events: None,
        otf2_events_printed: None,
        nothing_lost: false,
        warnings: summary.warnings,
        files: Vec::new(),
        recording_bytes,
        bytes: recording_bytes,
        evt_bytes: 0,
        breakdown: Vec::new(),
        valid: Ok(()),
    };
    let keep = std::env::var_os("TRACE_BENCH_KEEP_ARCHIVE").is_some();
    if deferred() {
        let recorded = read_recording(&out_dir);
        if !keep {
            let _ = std::fs::remove_dir_all(&out_dir);
        }
        return RunResult {
            events_recorded: recorded.as_ref().ok().map(|r| r.starts),
            nothing_lost: recorded.as_ref().is_ok_and(|r| r.drops == 0),
            valid: recorded.map(|_| ()),
            ..measured
        };
    }
    let part = find_part(&out_dir);
    let files = part_files(&part);
    let bytes = files.iter().map(|(_, n)| n).sum();
    let evt_bytes = files
        .iter()
        .filter(|(name, _)| name.ends_with(".evt"))
        .map(|(_, n)| n)
        .sum();
    let anchor = part.join("traces.otf2");
    let locations = locations(&anchor);
    let otf2_events_printed = locations.as_ref().map(|l| l.iter().map(|l| l.events).sum());
    let breakdown = breakdown(locations.as_deref().unwrap_or_default(), &files);
    let valid = validate(&anchor);
    // The archive can be large: gone before the next run.
    if !keep {
        let _ = std::fs::remove_dir_all(&out_dir);
    }

    RunResult {
        events_recorded: summary.events_recorded,
        otf2_events: summary.otf2_events,
        otf2_events_printed,
        nothing_lost: summary.nothing_lost,
        files,
        bytes,
        evt_bytes,
        breakdown,
        valid,
        ..measured
    }
}

/// What a deferred run's recording holds.
struct Recorded {
    /// Starts that got a handle.
    starts: u64,
    drops: u64,
}

/// The run's one recording, read back (an error when it is missing or unreadable).
fn read_recording(out_dir: &Path) -> Result<Recorded, String> {
    use nccl_scorep_common::recording::{Call, Recording};
    let dir = out_dir.join("recordings");
    let path = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .map(|entry| entry.path())
        .next()
        .ok_or_else(|| format!("no recording in {}", dir.display()))?;
    // Its end mark comes at the process's exit; the last finalize wrote every call.
    let recording = Recording::read_file(&path).map_err(|e| e.to_string())?;
    let starts = recording
        .calls()
        .filter(|(_, _, call)| matches!(call, Call::Start { handle, .. } if *handle != 0))
        .count() as u64;
    Ok(Recorded {
        starts,
        drops: recording.drops(),
    })
}

/// A deferred run's report: what the recording holds, and what the thread that writes it
/// (the process's CPU time besides the callback threads) cost per NCCL event.
fn report_deferred(results: &[RunResult]) {
    println!();
    println!("NCCL ev: NCCL events started; per writer CPU s: per CPU second of the process minus the callback");
    println!("threads (the recording's writer thread, and the finalize calls); B/NCCL ev: the recording's bytes");
    println!(
        "{:>5} {:>10} {:>8} {:>11} {:>19} {:>10}",
        "ranks", "NCCL ev", "total s", "NCCL ev/s", "per writer CPU s", "B/NCCL ev"
    );
    let mut ok = true;
    for r in results {
        let events = r.starts as f64;
        println!(
            "{:>5} {:>10} {:>8.2} {:>11} {:>19} {:>10.1}",
            r.comms,
            r.starts,
            r.total.as_secs_f64(),
            millions(events / r.total.as_secs_f64()),
            millions(events / r.collector_cpu.as_secs_f64()),
            r.recording_bytes as f64 / events
        );
    }
    for r in results {
        let expected = r.collectives * r.comms as u64 * (APP_EVENTS + PROXY_EVENTS);
        println!(
            "{} rank(s): starts {} of {expected}, recorded with a handle {}; NULL handles {}; \
             CPU: callback threads {:.2} s, writer {:.2} s; peak RSS {} MiB; recording: {}",
            r.comms,
            r.starts,
            r.events_recorded.map_or("-".into(), |n| n.to_string()),
            r.nulls,
            r.producer_cpu.as_secs_f64(),
            r.collector_cpu.as_secs_f64(),
            r.peak_rss.map_or("?".into(), |n| n.to_string()),
            match &r.valid {
                Ok(()) if r.nothing_lost => "complete, nothing dropped".to_owned(),
                Ok(()) => "calls dropped".to_owned(),
                Err(e) => e.clone(),
            }
        );
        ok &= r.nothing_lost
            && r.valid.is_ok()
            && r.nulls == 0
            && r.starts == expected
            && r.events_recorded == Some(expected);
    }
    assert!(ok, "calls were lost, refused or miscounted (see above)");
    println!("every call recorded, nothing dropped");
}

/// What the plugin's log says at the last finalize.
struct LogSummary {
    events_recorded: Option<u64>,
    otf2_events: Option<u64>,
    /// "N events recorded, nothing lost" (else "…; dropped, refused or repaired: …").
    nothing_lost: bool,
    /// Every warning: losses, the trace writer's repairs, failures.
    warnings: Vec<String>,
}

fn read_log(log: &str) -> LogSummary {
    let mut summary = LogSummary {
        events_recorded: None,
        otf2_events: None,
        nothing_lost: false,
        warnings: Vec::new(),
    };
    for line in log.lines() {
        let (level, text) = line.split_once(' ').unwrap_or(("", line));
        let text = text.trim_start_matches("NCCL-Score-P: ");
        if let Some(rest) = text.strip_prefix("trace part written to ") {
            summary.otf2_events = rest
                .rsplit_once(" (")
                .and_then(|(_, n)| n.strip_suffix(" OTF2 events)"))
                .and_then(|n| n.parse().ok());
        }
        if let Some((n, rest)) = text.split_once(" events recorded") {
            summary.events_recorded = n.parse().ok();
            summary.nothing_lost = rest == ", nothing lost";
        }
        if level == abi::log_level::WARN.to_string() {
            summary.warnings.push(text.to_owned());
        }
    }
    summary
}

/// Whether the runs only record (`TRACE_BENCH_DEFERRED`).
fn deferred() -> bool {
    std::env::var_os("TRACE_BENCH_DEFERRED").is_some()
}

/// `NCCL_SCOREP_MODE` for the runs: `otf2`, with `record` added on request, or `deferred`.
fn mode() -> &'static str {
    if deferred() {
        "deferred"
    } else if std::env::var_os("TRACE_BENCH_RECORD").is_some() {
        "otf2,record"
    } else {
        "otf2"
    }
}

/// The bytes of the files in `dir` (0 when there is none).
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .filter_map(|entry| entry.metadata().ok())
            .map(|meta| meta.len())
            .sum()
    })
}

/// The single part the run wrote: `<out>/parts/<host>.<pid>`.
fn find_part(out_dir: &Path) -> PathBuf {
    let parts: Vec<PathBuf> = std::fs::read_dir(out_dir.join("parts"))
        .unwrap_or_else(|e| panic!("no parts in {}: {e}", out_dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    assert_eq!(parts.len(), 1, "one part expected: {parts:?}");
    parts.into_iter().next().expect("one part")
}

/// Every file of a part, relative name and size, largest first.
fn part_files(part: &Path) -> Vec<(String, u64)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, u64)>) {
        for entry in std::fs::read_dir(dir).expect("read the part").flatten() {
            let path = entry.path();
            let meta = entry.metadata().expect("file metadata");
            if meta.is_dir() {
                walk(base, &path, out);
            } else {
                let name = path.strip_prefix(base).unwrap_or(&path);
                out.push((name.display().to_string(), meta.len()));
            }
        }
    }
    let mut files = Vec::new();
    walk(part, part, &mut files);
    files.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    files
}

/// One location of the archive, as `otf2-print -G` lists it.
struct Location {
    id: u64,
    name: String,
    events: u64,
}

/// The locations of the archive (`None` without a working `otf2-print`).
fn locations(anchor: &Path) -> Option<Vec<Location>> {
    let out = Command::new("otf2-print")
        .arg("-G")
        .arg(anchor)
        .output()
        .ok()
        .filter(|out| out.status.success())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let parsed = text
        .lines()
        .filter_map(|line| line.strip_prefix("LOCATION "))
        .filter_map(|rest| {
            let id = rest.split_whitespace().next()?.parse().ok()?;
            let name = rest.split("Name: \"").nth(1)?.split('"').next()?.to_owned();
            let events = rest
                .split("# Events: ")
                .nth(1)?
                .split(',')
                .next()?
                .trim()
                .parse()
                .ok()?;
            Some(Location { id, name, events })
        })
        .collect();
    Some(parsed)
}

/// What kind of timeline a location is, from its name (see `docs/trace-schema.md`).
fn location_kind(name: &str) -> &'static str {
    if name.contains(" proxy ") {
        "proxy lanes (ProxyOps, steps, step states)"
    } else if name.ends_with(" ops") {
        "ops streams (operations)"
    } else if name.contains(" channel ") {
        "kernel channels (KernelCh)"
    } else {
        "CPU threads (API, launch, enqueue)"
    }
}

/// Per location kind: locations, OTF2 events, bytes of event files.
type Breakdown = Vec<(&'static str, usize, u64, u64)>;

fn breakdown(locations: &[Location], files: &[(String, u64)]) -> Breakdown {
    let mut rows: Breakdown = Vec::new();
    for location in locations {
        let file = format!("traces/{}.evt", location.id);
        let bytes = files
            .iter()
            .find(|(name, _)| *name == file)
            .map_or(0, |(_, n)| *n);
        let kind = location_kind(&location.name);
        match rows.iter_mut().find(|row| row.0 == kind) {
            Some(row) => {
                row.1 += 1;
                row.2 += location.events;
                row.3 += bytes;
            }
            None => rows.push((kind, 1, location.events, bytes)),
        }
    }
    rows.sort_by_key(|row| std::cmp::Reverse(row.3));
    rows
}

/// `otf2-print -Werror --silent`: reads every event of every location.
fn validate(anchor: &Path) -> Result<(), String> {
    match Command::new("otf2-print")
        .args(["-Werror", "--silent"])
        .arg(anchor)
        .output()
    {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "otf2-print -Werror --silent failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(error) => Err(format!("otf2-print cannot run: {error}")),
    }
}

// ---------------------------------------------------------------------------------------
// Reporting.

fn millions(n: f64) -> String {
    format!("{:.2} M", n / 1e6)
}

fn main() {
    let collectives = env_usize("TRACE_BENCH_COLLECTIVES", 50_000) as u64;
    let comm_counts: Vec<usize> = std::env::var("TRACE_BENCH_COMMS")
        .unwrap_or_else(|_| "1,2".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .filter(|&n| n > 0)
        .collect();
    // The plugin's own default unless told otherwise.
    let buffer = std::env::var("TRACE_BENCH_BUFFER").unwrap_or_else(|_| {
        format!(
            "{}M",
            nccl_profiler_scorep::config::DEFAULT_BUFFER_BYTES >> 20
        )
    });

    // `TRACE_BENCH_WORKDIR` keeps the plugin copies (for a profiler's symbols) in a
    // directory of one's choice; the archives are removed after each run either way.
    let temp = tempfile::tempdir().expect("temporary directory");
    let work = match std::env::var_os("TRACE_BENCH_WORKDIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            std::fs::create_dir_all(&dir).expect("create TRACE_BENCH_WORKDIR");
            dir
        }
        None => temp.path().to_owned(),
    };
    // Another build (say, from before a change) can be measured the same way.
    let plugin = std::env::var_os("TRACE_BENCH_PLUGIN").map_or_else(built_library, PathBuf::from);
    if plugin.components().any(|c| c.as_os_str() == "debug") {
        eprintln!(
            "warning: {} is a debug build; run `cargo bench` for the figures",
            plugin.display()
        );
    }
    let logger = Logger::build(&work);

    println!("nccl-scorep trace throughput benchmark (OTF2 mode)");
    println!("  plugin:  {} (a copy per run)", plugin.display());
    println!(
        "  cpu:     {} ({} logical CPUs)",
        cpu_model(),
        available_cpus()
    );
    println!(
        "  config:  NCCL_SCOREP_MODE={} EVENTS=all ON_FULL=wait BUFFER_SIZE={buffer} (per thread)",
        mode()
    );
    println!(
        "  stream:  per collective and communicator rank: app thread {APP_CALLBACKS} callbacks / {APP_EVENTS} events, \
         proxy thread {PROXY_CALLBACKS} callbacks / {PROXY_EVENTS} events ({CHANNELS} channels, {STEPS} steps per ProxyOp)"
    );
    // The plugin's other settings pass through from the environment: say which did.
    let passed: Vec<String> = std::env::vars()
        .filter(|(name, _)| {
            const SET_HERE: [&str; 6] = [
                "NCCL_SCOREP_MODE",
                "NCCL_SCOREP_AUTO_MERGE",
                "NCCL_SCOREP_EVENTS",
                "NCCL_SCOREP_ON_FULL",
                "NCCL_SCOREP_BUFFER_SIZE",
                "NCCL_SCOREP_OUTPUT_DIR",
            ];
            name.starts_with("NCCL_SCOREP_") && !SET_HERE.contains(&name.as_str())
        })
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    if !passed.is_empty() {
        println!("  also:    {}", passed.join(" "));
    }
    println!("  runs:    {collectives} collectives per rank; ranks per run: {comm_counts:?}");

    let mut results = Vec::new();
    for &comms in &comm_counts {
        eprintln!("running {comms} communicator rank(s), {collectives} collectives each ...");
        let r = run(&plugin, &work, logger, comms, collectives, &buffer);
        results.push(r);
    }
    if deferred() {
        report_deferred(&results);
        return;
    }

    println!();
    println!("NCCL ev: finished NCCL events (one per start); OTF2 ev: event records the trace holds (Enter, Leave,");
    println!("collective begin/end, send/receive: what otf2-print counts); total: first callback to the return of the");
    println!(
        "last finalize; per coll.CPU s: per CPU second of the process minus the callback threads;"
    );
    println!("B/…: bytes of the whole part (event files, definitions, anchor) per event");
    println!(
        "{:>5} {:>10} {:>10} {:>8} {:>11} {:>11} {:>14} {:>10} {:>9}",
        "ranks",
        "NCCL ev",
        "OTF2 ev",
        "total s",
        "NCCL ev/s",
        "OTF2 ev/s",
        "per coll.CPU s",
        "B/NCCL ev",
        "B/OTF2 ev"
    );
    let mut ok_no_loss = true;
    let mut verdicts = Vec::new();
    for r in &results {
        let events = r.starts as f64;
        let otf2_events = r.otf2_events.unwrap_or(0) as f64;
        let secs = r.total.as_secs_f64();
        println!(
            "{:>5} {:>10} {:>10} {:>8.2} {:>11} {:>11} {:>14} {:>10.1} {:>9.1}",
            r.comms,
            r.starts,
            otf2_events,
            secs,
            millions(events / secs),
            millions(otf2_events / secs),
            millions(otf2_events / r.collector_cpu.as_secs_f64()),
            r.bytes as f64 / events,
            r.bytes as f64 / otf2_events,
        );
        verdicts.push((r.comms, otf2_events / secs, r.bytes as f64 / otf2_events));
    }
    println!();
    for r in &results {
        let expected = r.collectives * r.comms as u64 * (APP_EVENTS + PROXY_EVENTS);
        let expected_calls = r.collectives * r.comms as u64 * (APP_CALLBACKS + PROXY_CALLBACKS);
        println!("{} rank(s):", r.comms);
        println!(
            "  callbacks {} of {expected_calls}; starts {} of {expected}; NULL handles {}",
            r.callbacks, r.starts, r.nulls
        );
        println!(
            "  events recorded (plugin log): {}; OTF2 events written: {} (plugin log), {} (otf2-print -G)",
            r.events_recorded
                .map_or("not logged".into(), |n| n.to_string()),
            r.otf2_events.map_or("not logged".into(), |n| n.to_string()),
            r.otf2_events_printed
                .map_or("-".into(), |n| n.to_string()),
        );
        println!(
            "  CPU: callback threads {:.2} s (waiting for ring space included), collector (rest of the process) {:.2} s; \
             callbacks done after {:.2} s of {:.2} s; peak RSS {} MiB",
            r.producer_cpu.as_secs_f64(),
            r.collector_cpu.as_secs_f64(),
            r.producers.as_secs_f64(),
            r.total.as_secs_f64(),
            r.peak_rss.map_or("?".into(), |n| n.to_string())
        );
        let otf2 = r.otf2_events.unwrap_or(0).max(1) as f64;
        let events = r.starts.max(1) as f64;
        println!(
            "  on disk: {} bytes in {} files: {:.1} B per NCCL event, {:.2} OTF2 events per NCCL event; \
             event files {} bytes, {:.1} B per OTF2 event",
            r.bytes,
            r.files.len(),
            r.bytes as f64 / events,
            otf2 / events,
            r.evt_bytes,
            r.evt_bytes as f64 / otf2
        );
        if r.recording_bytes > 0 {
            println!(
                "  recording: {} bytes, {:.1} B per NCCL event",
                r.recording_bytes,
                r.recording_bytes as f64 / events
            );
        }
        let collectives = (r.collectives * r.comms as u64).max(1) as f64;
        println!(
            "    {:<44} {:>5} {:>12} {:>12} {:>9} {:>10} {:>10}",
            "locations", "count", "OTF2 events", "bytes", "B/OTF2 ev", "ev/coll", "B/coll"
        );
        for (kind, count, otf2_events, bytes) in &r.breakdown {
            println!(
                "    {:<44} {:>5} {:>12} {:>12} {:>9.1} {:>10.1} {:>10.1}",
                kind,
                count,
                otf2_events,
                bytes,
                *bytes as f64 / (*otf2_events).max(1) as f64,
                *otf2_events as f64 / collectives,
                *bytes as f64 / collectives
            );
        }
        println!(
            "  plugin warnings: {}",
            if r.warnings.is_empty() {
                "none".to_owned()
            } else {
                r.warnings.join(" | ")
            }
        );
        println!(
            "  archive: {}",
            match &r.valid {
                Ok(()) => "valid (otf2-print -Werror --silent)".to_owned(),
                Err(e) => e.clone(),
            }
        );
        // The trace writer's repairs (`trace writer: otf2_…`) are reported, not failed on:
        // they lose no NCCL event.
        ok_no_loss &= r.nothing_lost
            && r.nulls == 0
            && r.starts == expected
            && r.callbacks == expected_calls
            && r.events_recorded == Some(expected)
            && r.otf2_events.is_some()
            && r.otf2_events_printed
                .is_none_or(|n| Some(n) == r.otf2_events);
    }
    // The targets count events as OTF2's own measurements count them when it measures OTF2
    // itself (10–14 ns and 11.75 B per event): OTF2 event records.
    println!();
    println!(
        "targets, per OTF2 event record: >= {}/s through the collector, <= {TARGET_BYTES_PER_EVENT} B on disk",
        millions(TARGET_EVENTS_PER_S)
    );
    for (comms, rate, bytes) in verdicts {
        println!(
            "  {comms} rank(s): {}/s: {}; {bytes:.1} B: {}",
            millions(rate),
            if rate >= TARGET_EVENTS_PER_S {
                "met"
            } else {
                "NOT met"
            },
            if bytes <= TARGET_BYTES_PER_EVENT {
                "met"
            } else {
                "NOT met"
            }
        );
    }
    let invalid: Vec<String> = results
        .iter()
        .filter_map(|r| {
            r.valid
                .as_ref()
                .err()
                .map(|e| format!("{} rank(s): {e}", r.comms))
        })
        .collect();
    assert!(
        invalid.is_empty(),
        "INVALID ARCHIVE: {}",
        invalid.join("; ")
    );
    assert!(
        ok_no_loss,
        "events were lost, refused or miscounted (see above)"
    );
    let repaired = results.iter().any(|r| !r.warnings.is_empty());
    println!(
        "nothing lost, every archive valid{}",
        if repaired {
            "; the trace writer reported repairs (see \"plugin warnings\")"
        } else {
            ""
        }
    );
}
