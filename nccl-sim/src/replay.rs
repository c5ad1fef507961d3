//! `nccl-sim replay`: drives a profiler plugin with the calls a recording holds
//! (`NCCL_SCOREP_MODE=…,record`, docs/record.md), at the recorded API version, thread by
//! thread in each thread's recorded order, at the recorded pace or as fast as possible.
//!
//! Handles and contexts are what the plugin under test returns: every value NCCL passed
//! back (a handle to stop, a parent, a context) is traced to the call that returned it in
//! the recording, and replaced by what the plugin returned for that call in the replay.
//! Several recordings are one job: one process each (a job the plugin sees as such, with
//! `NCCL_SIM_RANK`/`SIZE`/`JOB`), and a PXN ProxyOp's foreign context, parent and pid are
//! those the originating process's replay got, exchanged through small files.

use crate::job::{self, Job};
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
use nccl_profiler_abi::fields::{self, PARENT_OFFSET};
use nccl_profiler_abi::{event_type as t, loader, InitV1, InitV4, InitV5, ProfilerTable};
use nccl_scorep_common::recording::{Call, Recording};
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_int, c_void, CString, OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where the processes of a multi-process replay exchange their pids and PXN handles.
const ENV_EXCHANGE: &str = "NCCL_SIM_REPLAY_EXCHANGE";

/// The replay clock: a plugin that looks for `nccl_sim_clock` (ours does) stamps
/// each call with the time the recording gave it, so that the replayed trace has the
/// recorded times whatever the pace of the replay.
static REPLAY_CLOCK_ON: AtomicBool = AtomicBool::new(false);
/// The latest recorded time replayed on any thread: the time other threads see.
static REPLAY_LATEST_NS: AtomicU64 = AtomicU64::new(0);
/// The recorded process's CLOCK_REALTIME minus its CLOCK_MONOTONIC.
static REPLAY_REALTIME_OFFSET_NS: AtomicI64 = AtomicI64::new(0);

thread_local! {
    /// The recorded time of the call this thread replays (0: none yet).
    static REPLAY_CALL_NS: Cell<u64> = const { Cell::new(0) };
}

/// The replay clock, offered to the plugin by [`crate::host_clock::nccl_sim_clock`]: the
/// recorded CLOCK_MONOTONIC time of the call the calling thread replays (the latest
/// replayed time on any other thread) and the recorded real-time offset; `None` when no
/// replay runs with recorded times.
pub(crate) fn replay_clock() -> Option<(u64, i64)> {
    if !REPLAY_CLOCK_ON.load(Ordering::Acquire) {
        return None;
    }
    let offset = REPLAY_REALTIME_OFFSET_NS.load(Ordering::Relaxed);
    // `try_with`: a plugin may ask from a thread whose locals are being destroyed.
    let ns = match REPLAY_CALL_NS.try_with(Cell::get).unwrap_or(0) {
        0 => REPLAY_LATEST_NS.load(Ordering::Acquire),
        own => own,
    };
    Some((ns, offset))
}

/// Sets the replay clock of this thread to a call's recorded time (never back).
fn replay_clock_at(time_ns: u64) {
    let now = REPLAY_CALL_NS.with(|own| {
        let now = own.get().max(time_ns);
        own.set(now);
        now
    });
    REPLAY_LATEST_NS.fetch_max(now, Ordering::AcqRel);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Timing {
    /// Each call at its recorded time after the start of the replay.
    Original,
    /// Each call as soon as the calls it depends on were made.
    Fast,
}

#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// Recordings (`<host>.<pid>.ncclrec`, or gzip-compressed `….ncclrec.gz`), one per
    /// process of the recorded job.
    #[arg(required = true, value_name = "RECORDING")]
    recordings: Vec<PathBuf>,
    /// The profiler plugin to drive (a path or a name); else NCCL_PROFILER_PLUGIN.
    #[arg(long, value_name = "PATH|NAME")]
    plugin: Option<OsString>,
    #[arg(long, value_enum, default_value = "fast")]
    timing: Timing,
    /// How long a call waits for a value another process's replay publishes (PXN) before
    /// it passes the recorded value instead. (Calls of this process wait for each other
    /// without a limit: the recorded order guarantees the call waited for comes.)
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    patience_ms: u64,
    /// Keep each recording's host name for the plugin (NCCL_SCOREP_HOSTNAME), so that the
    /// replayed trace names the same hosts as the recorded one.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    recorded_hosts: bool,
    /// Offer the recorded times as the plugin's clock (`nccl_sim_clock`), so that
    /// the replayed trace has the recorded run's times; `false`: the plugin's own clock.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    recorded_times: bool,
}

impl ReplayArgs {
    /// A replay that makes a trace of a recorded job (`nccl-scorep convert`): as fast as
    /// the calls allow, with the recorded hosts and times.
    pub fn converting(recordings: Vec<PathBuf>, plugin: OsString) -> ReplayArgs {
        ReplayArgs {
            recordings,
            plugin: Some(plugin),
            timing: Timing::Fast,
            patience_ms: 10_000,
            recorded_hosts: true,
            recorded_times: true,
        }
    }
}

/// Whether this process is one of the processes a replay of several recordings started.
pub fn is_replay_process() -> bool {
    std::env::var_os(ENV_EXCHANGE).is_some()
}

pub fn main(args: ReplayArgs) -> ExitCode {
    let multi = args.recordings.len() > 1;
    let exchange = std::env::var_os(ENV_EXCHANGE).map(PathBuf::from);
    if multi && exchange.is_none() {
        return launch_job(&args);
    }
    let index = if multi {
        match Job::detect() {
            Ok(job) if job.size == args.recordings.len() => job.rank,
            Ok(job) => {
                eprintln!(
                    "nccl-sim replay: {} recordings but a job of {} processes",
                    args.recordings.len(),
                    job.size
                );
                return ExitCode::FAILURE;
            }
            Err(error) => {
                eprintln!("nccl-sim replay: {error}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        0
    };
    match replay_one(&args, index, exchange.as_deref()) {
        Ok(report) => {
            eprintln!("nccl-sim replay: {report}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("nccl-sim replay: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Several recordings: one process for each, as one job.
fn launch_job(args: &ReplayArgs) -> ExitCode {
    let exchange = std::env::temp_dir().join(format!("nccl-sim-replay-{}", std::process::id()));
    if let Err(error) = std::fs::create_dir_all(&exchange) {
        eprintln!(
            "nccl-sim replay: cannot create {}: {error}",
            exchange.display()
        );
        return ExitCode::FAILURE;
    }
    let all: Vec<OsString> = std::env::args_os().skip(1).collect();
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(error) => {
            eprintln!("nccl-sim replay: cannot find this program: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = job::spawn_procs_of(
        &exe,
        args.recordings.len(),
        &all,
        &[(ENV_EXCHANGE, exchange.as_os_str())],
    );
    let _ = std::fs::remove_dir_all(&exchange);
    match result {
        Ok(statuses) if job::all_succeeded(&statuses) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("nccl-sim replay: cannot start the processes: {error}");
            ExitCode::FAILURE
        }
    }
}

/// A value NCCL passed back, traced to where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ref {
    Null,
    /// What the plugin returned for this process's call at this position.
    Local(usize),
    /// What another process's replay got for its call at this position.
    Foreign {
        process: usize,
        position: usize,
    },
    /// Nothing in the recordings returned it: passed as recorded.
    Opaque(u64),
}

/// Where the recorded values of one recording came from: for each value, the calls that
/// returned it, by position in time order.
struct Origins {
    /// Call indices (file order) sorted by time: a call's position is its index here.
    position_of: Vec<usize>,
    handles: HashMap<u64, Vec<(u64, usize)>>,
    contexts: HashMap<u64, Vec<(u64, usize)>>,
    /// By position: the call is an init or a finalize.
    lifecycle: Vec<bool>,
}

impl Origins {
    fn of(recording: &Recording) -> Origins {
        // A thread's calls keep their recorded order even where its stamps step back (a
        // clock recalibrated between two calls): each stamp is at least the thread's
        // previous one, so that no call waits, through the time order, for a later call of
        // its own thread.
        let mut latest_of_thread: HashMap<u32, u64> = HashMap::new();
        let calls: Vec<(u64, &Call)> = recording
            .calls()
            .map(|(thread, time, c)| {
                let latest = latest_of_thread.entry(thread).or_insert(time);
                *latest = (*latest).max(time);
                (*latest, c)
            })
            .collect();
        let mut order: Vec<usize> = (0..calls.len()).collect();
        order.sort_by_key(|&i| calls[i].0);
        let mut position_of = vec![0; calls.len()];
        let mut handles: HashMap<u64, Vec<(u64, usize)>> = HashMap::new();
        let mut contexts: HashMap<u64, Vec<(u64, usize)>> = HashMap::new();
        let mut lifecycle = vec![false; calls.len()];
        for (position, &i) in order.iter().enumerate() {
            position_of[i] = position;
            let (time, call) = calls[i];
            lifecycle[position] = matches!(call, Call::Init { .. } | Call::Finalize { .. });
            match call {
                Call::Start { handle, .. } if *handle != 0 => {
                    handles.entry(*handle).or_default().push((time, position))
                }
                Call::Init { context, .. } if *context != 0 => {
                    contexts.entry(*context).or_default().push((time, position))
                }
                _ => {}
            }
        }
        Origins {
            position_of,
            handles,
            contexts,
            lifecycle,
        }
    }

    /// The latest call before `position` that returned `value`.
    fn find(list: Option<&Vec<(u64, usize)>>, position: usize) -> Option<usize> {
        list?.iter().rev().map(|&(_, p)| p).find(|&p| p < position)
    }

    /// The latest call at or before `time` that returned `value` (for another process's
    /// values, whose positions do not compare with ours); else its first.
    fn find_at(list: Option<&Vec<(u64, usize)>>, time: u64) -> Option<usize> {
        let list = list?;
        list.iter()
            .rev()
            .find(|&&(t, _)| t <= time)
            .or(list.first())
            .map(|&(_, p)| p)
    }
}

/// A `startEvent` to make.
struct StartCall {
    context: Ref,
    /// The descriptor's bytes, 8-aligned.
    descr: Vec<u64>,
    /// String fields: offset and the copy to point at (None: NULL), one copy of each text
    /// for the whole replay.
    strings: Vec<(usize, Option<Arc<CString>>)>,
    /// Fields holding handles of other events.
    handles: Vec<(usize, Ref)>,
    /// A ProxyOp's pid field, and the process it names (None: not one of the job's).
    pid: Option<(usize, Option<usize>)>,
}

/// What to do at one recorded call.
enum Action {
    Init {
        name: Option<CString>,
        comm_id: u64,
        n_nodes: i32,
        n_ranks: i32,
        rank: i32,
    },
    /// Boxed: most calls are stops and states, which then take a small step each.
    Start(Box<StartCall>),
    Stop {
        handle: Ref,
    },
    State {
        handle: Ref,
        state: i32,
        args: Option<Vec<u64>>,
    },
    Finalize {
        context: Ref,
    },
}

struct Step {
    position: usize,
    time_ns: u64,
    /// The communicator life cycle keeps its place among all threads' calls (so that an
    /// init/finalize cycle of the plugin begins and ends where it did): an init or a
    /// finalize waits for every call before it, and a call waits for the last init or
    /// finalize before it.
    after: After,
    action: Action,
}

enum After {
    Nothing,
    Everything,
    Lifecycle(usize),
}

/// The bytes, 8-aligned and zero-padded to at least `size` (a damaged recording's short
/// descriptor never lets the plugin read past the buffer).
fn aligned(bytes: &[u8], size: usize) -> Vec<u64> {
    let mut words = vec![0u64; bytes.len().max(size).div_ceil(8).max(1)];
    for (i, &byte) in bytes.iter().enumerate() {
        words[i / 8] |= u64::from(byte) << (8 * (i % 8));
    }
    words
}

fn word_at(bytes: &[u8], offset: usize) -> u64 {
    bytes
        .get(offset..offset + 8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
}

/// A ProxyOp's pid field: its offset, and the recording of the process it names (None:
/// none of the recordings given). None for any other event.
fn proxy_op_origin(
    recordings: &[Recording],
    api: u8,
    descr: &[u8],
) -> Option<(usize, Option<usize>)> {
    if fields::type_bit(api, descr) != t::PROXY_OP {
        return None;
    }
    let offset = fields::PROXY_OP_PID_OFFSET;
    let pid = descr
        .get(offset..offset + 4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap_or_default()))?;
    Some((offset, recordings.iter().position(|r| r.header.pid == pid)))
}

/// The steps of recording `own`, by recorded thread, and the positions of its calls that
/// the other processes' PXN ops refer to (published as they happen).
fn plan(recordings: &[Recording], origins: &[Origins], own: usize) -> (Vec<Vec<Step>>, Vec<usize>) {
    let recording = &recordings[own];
    let api = recording.header.api;
    let to_ns = recording.to_ns();
    let mine = &origins[own];
    let local = |list: &HashMap<u64, Vec<(u64, usize)>>, value: u64, position: usize| {
        if value == 0 {
            return Ref::Null;
        }
        Origins::find(list.get(&value), position).map_or(Ref::Opaque(value), Ref::Local)
    };
    let mut threads: HashMap<u32, Vec<Step>> = HashMap::new();
    // The texts of the string fields: a few names, each copied once.
    let mut texts: HashMap<Vec<u8>, Arc<CString>> = HashMap::new();
    let mut lifecycle_at = vec![None; mine.position_of.len()];
    let mut last = None;
    for (position, is_lifecycle) in mine.lifecycle.iter().enumerate() {
        lifecycle_at[position] = last;
        if *is_lifecycle {
            last = Some(position);
        }
    }
    for (i, (thread, time, call)) in recording.calls().enumerate() {
        let position = mine.position_of[i];
        let after = if mine.lifecycle[position] {
            After::Everything
        } else {
            lifecycle_at[position].map_or(After::Nothing, After::Lifecycle)
        };
        let action = match call {
            Call::Init {
                comm_id,
                n_nodes,
                n_ranks,
                rank,
                name,
                ..
            } => Action::Init {
                name: name
                    .as_ref()
                    .map(|n| CString::new(n.clone()).unwrap_or_default()),
                comm_id: *comm_id,
                n_nodes: *n_nodes,
                n_ranks: *n_ranks,
                rank: *rank,
            },
            Call::Start {
                context,
                descr,
                strings,
                ..
            } => {
                let origin = proxy_op_origin(recordings, api, descr);
                // A ProxyOp of another process (PXN): Some(its recording, if given).
                let foreign = origin
                    .filter(|&(_, process)| process != Some(own))
                    .map(|(_, process)| process);
                let resolve = |value: u64, contexts: bool| match foreign {
                    // Its values are the other process's: never ours, whatever they equal.
                    Some(None) if value == 0 => Ref::Null,
                    Some(None) => Ref::Opaque(value),
                    Some(Some(process)) => {
                        let theirs = &origins[process];
                        let list = if contexts {
                            &theirs.contexts
                        } else {
                            &theirs.handles
                        };
                        match Origins::find_at(list.get(&value), time) {
                            _ if value == 0 => Ref::Null,
                            Some(position) => Ref::Foreign { process, position },
                            None => Ref::Opaque(value),
                        }
                    }
                    None if contexts => local(&mine.contexts, value, position),
                    None => local(&mine.handles, value, position),
                };
                let mut handles =
                    vec![(PARENT_OFFSET, resolve(word_at(descr, PARENT_OFFSET), false))];
                for &offset in fields::handle_offsets(api, fields::type_bit(api, descr)) {
                    handles.push((offset, resolve(word_at(descr, offset), false)));
                }
                // Every string field of the type points at its recorded copy, or is NULL:
                // the recorded process's pointers never reach the plugin.
                let known = fields::string_offsets(api, fields::type_bit(api, descr));
                let strings = known
                    .iter()
                    .map(|&offset| {
                        let text = strings
                            .iter()
                            .find(|(at, _)| *at as usize == offset)
                            .and_then(|(_, text)| text.as_ref());
                        let copy = text.map(|t| {
                            Arc::clone(texts.entry(t.clone()).or_insert_with(|| {
                                Arc::new(CString::new(t.clone()).unwrap_or_default())
                            }))
                        });
                        (offset, copy)
                    })
                    .collect();
                Action::Start(Box::new(StartCall {
                    context: resolve(*context, true),
                    descr: aligned(descr, fields::MAX_DESCR_BYTES),
                    strings,
                    handles,
                    pid: origin,
                }))
            }
            Call::Stop { handle } => Action::Stop {
                handle: local(&mine.handles, *handle, position),
            },
            Call::State {
                handle,
                state,
                args,
            } => Action::State {
                handle: local(&mine.handles, *handle, position),
                state: *state,
                args: args
                    .as_deref()
                    .map(|a| aligned(a, fields::MAX_STATE_ARGS_BYTES)),
            },
            Call::Finalize { context } => Action::Finalize {
                context: local(&mine.contexts, *context, position),
            },
        };
        threads.entry(thread).or_default().push(Step {
            position,
            time_ns: to_ns(time),
            after,
            action,
        });
    }
    // What the others' PXN ops need of ours.
    let mut exported = Vec::new();
    for (_, other) in recordings.iter().enumerate().filter(|&(p, _)| p != own) {
        let api = other.header.api;
        for (_, time, call) in other.calls() {
            let Call::Start { context, descr, .. } = call else {
                continue;
            };
            if proxy_op_origin(recordings, api, descr).and_then(|(_, p)| p) != Some(own) {
                continue;
            }
            for (list, value) in [
                (&mine.contexts, *context),
                (&mine.handles, word_at(descr, PARENT_OFFSET)),
            ] {
                if value != 0 {
                    exported.extend(Origins::find_at(list.get(&value), time));
                }
            }
        }
    }
    exported.sort_unstable();
    exported.dedup();
    let mut threads: Vec<(u32, Vec<Step>)> = threads.into_iter().collect();
    threads.sort_by_key(|(thread, _)| *thread);
    (
        threads.into_iter().map(|(_, steps)| steps).collect(),
        exported,
    )
}

/// The plugin's table of one version: the six slots, with the descriptor and state
/// arguments as bytes (their types only appear behind pointers).
enum Init {
    V1(InitV1),
    V4(InitV4),
    V5(InitV5),
}

struct Table {
    init: Init,
    start: unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut u64) -> c_int,
    stop: unsafe extern "C" fn(*mut c_void) -> c_int,
    record: unsafe extern "C" fn(*mut c_void, c_int, *mut u64) -> c_int,
    finalize: unsafe extern "C" fn(*mut c_void) -> c_int,
}

fn open_plugin(setting: Option<&OsStr>, api: u8) -> Result<(Library, Table), String> {
    let candidates: Vec<Option<OsString>> = match loader::plugin_selection(setting) {
        loader::PluginSelection::Disabled => {
            return Err("NCCL_PROFILER_PLUGIN=none: no plugin to replay into".into())
        }
        loader::PluginSelection::GlobalScope => vec![None],
        loader::PluginSelection::Candidates(names) => names.into_iter().map(Some).collect(),
    };
    let library = candidates
        .iter()
        .find_map(|name| {
            // SAFETY: loading a profiler plugin is what NCCL does; its initialisers run.
            unsafe { Library::open(name.as_deref(), RTLD_NOW | RTLD_LOCAL) }.ok()
        })
        .ok_or_else(|| format!("cannot load a profiler plugin (tried {candidates:?})"))?;
    let symbol = format!("{}\0", loader::symbol_name(api));
    // SAFETY: the symbol, if present, is the plugin's table of that version, which lives
    // as long as the library (kept open by the caller while the table is used).
    let table = unsafe {
        let address = *library
            .get::<*const c_void>(symbol.as_bytes())
            .map_err(|_| {
                format!(
                    "the plugin has no {} (the recording is of API v{api})",
                    loader::symbol_name(api)
                )
            })?;
        if address.is_null() {
            return Err(format!("the plugin's {} is NULL", loader::symbol_name(api)));
        }
        let init = match api {
            1..=3 => Init::V1((*(address as *const ProfilerTable<InitV1, u64, u64>)).init),
            4 => Init::V4((*(address as *const ProfilerTable<InitV4, u64, u64>)).init),
            _ => Init::V5((*(address as *const ProfilerTable<InitV5, u64, u64>)).init),
        };
        let table = &*(address as *const ProfilerTable<InitV1, u64, u64>);
        Table {
            init,
            start: table.startEvent,
            stop: table.stopEvent,
            record: table.recordEventState,
            finalize: table.finalize,
        }
    };
    Ok((library, table))
}

/// Values returned in this replay, by position, and the other processes' published ones.
struct Results {
    values: Vec<AtomicU64>,
    ready: Vec<AtomicBool>,
    patience: Duration,
    exchange: Option<PathBuf>,
    /// The positions the other processes need, and where they are published.
    exported: Vec<usize>,
    published: Mutex<Option<std::fs::File>>,
    foreign: Mutex<HashMap<(usize, usize), u64>>,
    foreign_pids: Mutex<HashMap<usize, i32>>,
    late: AtomicU64,
}

impl Results {
    /// Waits until the call at `position` was made (or skipped). Without a time limit: a
    /// call of this process only waits for calls before it in the time order, and each
    /// thread's calls keep that order, so the call waited for always comes (a limit would
    /// only cut a slow call short, e.g. a finalize that runs the job-end merge).
    fn wait_for(&self, position: usize) {
        let mut spins = 0u32;
        let mut nap = Duration::from_micros(50);
        while !self.ready[position].load(Ordering::Acquire) {
            // A short wait is another thread's next call; a long one is not worth a core,
            // nor, with hundreds of recorded threads waiting their turn, a wake-up every
            // few microseconds.
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(nap);
                nap = (nap * 2).min(Duration::from_millis(1));
            }
        }
    }

    fn wait_after(&self, after: &After, position: usize) {
        match after {
            After::Nothing => {}
            After::Lifecycle(before) => self.wait_for(*before),
            After::Everything => (0..position).for_each(|before| self.wait_for(before)),
        }
    }

    fn done(&self, position: usize) {
        self.ready[position].store(true, Ordering::Release);
    }

    fn set(&self, position: usize, value: u64) {
        self.values[position].store(value, Ordering::Relaxed);
        self.ready[position].store(true, Ordering::Release);
        if self.exported.binary_search(&position).is_ok() {
            if let Some(file) = &mut *self.published.lock().unwrap_or_else(|e| e.into_inner()) {
                let _ = writeln!(file, "{position} {value}");
            }
        }
    }

    /// The replayed value of a reference (`None`: it came back NULL, so NCCL would not
    /// make the call).
    fn get(&self, reference: Ref, recorded_if_late: u64) -> Option<u64> {
        match reference {
            Ref::Null => Some(0),
            Ref::Opaque(value) => Some(value),
            Ref::Local(position) => {
                self.wait_for(position);
                Some(self.values[position].load(Ordering::Relaxed)).filter(|&v| v != 0)
            }
            Ref::Foreign { process, position } => Some(
                self.foreign_value(process, position)
                    .unwrap_or(recorded_if_late),
            ),
        }
    }

    fn foreign_value(&self, process: usize, position: usize) -> Option<u64> {
        let exchange = self.exchange.as_ref()?;
        let deadline = Instant::now() + self.patience;
        loop {
            if let Some(&value) = self
                .foreign
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&(process, position))
            {
                return Some(value);
            }
            if let Ok(text) = std::fs::read_to_string(exchange.join(format!("{process}.ids"))) {
                let mut foreign = self.foreign.lock().unwrap_or_else(|e| e.into_inner());
                for line in text.lines() {
                    let mut words = line.split(' ').map(str::parse::<u64>);
                    if let (Some(Ok(p)), Some(Ok(v))) = (words.next(), words.next()) {
                        foreign.insert((process, p as usize), v);
                    }
                }
                if let Some(&value) = foreign.get(&(process, position)) {
                    return Some(value);
                }
            }
            if Instant::now() > deadline {
                self.late.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn pid_of(&self, process: usize) -> Option<i32> {
        let exchange = self.exchange.as_ref()?;
        if let Some(&pid) = self
            .foreign_pids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&process)
        {
            return Some(pid);
        }
        let deadline = Instant::now() + self.patience;
        loop {
            let text = std::fs::read_to_string(exchange.join(format!("{process}.pid")));
            if let Some(pid) = text.ok().and_then(|t| t.trim().parse().ok()) {
                self.foreign_pids
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(process, pid);
                return Some(pid);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn replay_one(args: &ReplayArgs, own: usize, exchange: Option<&Path>) -> Result<String, String> {
    let recordings = args
        .recordings
        .iter()
        .map(|path| Recording::read_file(path).map_err(|e| format!("{}: {e}", path.display())))
        .collect::<Result<Vec<_>, _>>()?;
    let recording = &recordings[own];
    let header = recording.header.clone();
    if fields::descr_size(header.api) == 0 {
        return Err(format!(
            "{}: profiler API v{} is not one this build knows (v1-v7)",
            args.recordings[own].display(),
            header.api
        ));
    }
    if args.recorded_hosts {
        // No other thread runs yet: the plugin reads it when it is loaded below.
        std::env::set_var(nccl_scorep_common::job::ENV_HOSTNAME, &header.host);
    }
    let origins: Vec<Origins> = recordings.iter().map(Origins::of).collect();
    let (threads, exported) = plan(&recordings, &origins, own);
    let calls = origins[own].position_of.len();
    let published = match exchange {
        Some(dir) => {
            std::fs::write(
                dir.join(format!("{own}.pid")),
                std::process::id().to_string(),
            )
            .map_err(|e| format!("cannot write to {}: {e}", dir.display()))?;
            Some(
                std::fs::File::create(dir.join(format!("{own}.ids")))
                    .map_err(|e| format!("cannot write to {}: {e}", dir.display()))?,
            )
        }
        None => None,
    };
    // The job's recordings share a clock: the earliest call of any is the replay's start.
    let first_ns = recordings
        .iter()
        .filter_map(|r| {
            let to_ns = r.to_ns();
            r.calls().map(|(_, time, _)| to_ns(time)).min()
        })
        .min()
        .unwrap_or(0);
    if args.recorded_times {
        // Before the plugin is loaded: it looks for the clock once.
        REPLAY_LATEST_NS.store(first_ns.max(1), Ordering::Release);
        REPLAY_REALTIME_OFFSET_NS.store(recording.realtime_offset_ns(), Ordering::Release);
        REPLAY_CLOCK_ON.store(true, Ordering::Release);
    }
    let (drops, complete) = (recording.drops(), recording.complete);
    // The replay needs only its steps from here on.
    drop(origins);
    drop(recordings);
    let setting = args
        .plugin
        .clone()
        .or_else(|| std::env::var_os(loader::PLUGIN_ENV));
    let (_library, table) = open_plugin(setting.as_deref(), header.api)?;
    let results = Results {
        values: (0..calls).map(|_| AtomicU64::new(0)).collect(),
        ready: (0..calls).map(|_| AtomicBool::new(false)).collect(),
        patience: Duration::from_millis(args.patience_ms),
        exchange: exchange.map(Path::to_path_buf),
        exported,
        published: Mutex::new(published),
        foreign: Mutex::new(HashMap::new()),
        foreign_pids: Mutex::new(HashMap::new()),
        late: AtomicU64::new(0),
    };
    let start = Instant::now();
    let made = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for steps in &threads {
            let (table, results, made) = (&table, &results, &made);
            std::thread::Builder::new()
                .name("replay".into())
                .spawn_scoped(scope, move || {
                    for step in steps {
                        if args.timing == Timing::Original {
                            let due =
                                start + Duration::from_nanos(step.time_ns.saturating_sub(first_ns));
                            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                                std::thread::sleep(wait);
                            }
                        }
                        results.wait_after(&step.after, step.position);
                        replay_clock_at(step.time_ns);
                        // SAFETY: the table belongs to the library kept open until the
                        // replay ends; every pointer passed lives through the call.
                        if unsafe { make_call(table, results, own, step) } {
                            made.fetch_add(1, Ordering::Relaxed);
                        }
                        results.done(step.position);
                    }
                })
                .expect("a replay thread");
        }
    });
    let late = results.late.load(Ordering::Relaxed);
    Ok(format!(
        "replayed {} of {calls} calls of {} (API v{}, pid {}, {} threads){}{}",
        made.into_inner(),
        args.recordings[own].display(),
        header.api,
        header.pid,
        threads.len(),
        if late > 0 {
            format!(
                "; {late} values passed as recorded after waiting {} ms",
                args.patience_ms
            )
        } else {
            String::new()
        },
        match drops {
            0 if complete => String::new(),
            0 => "; the recording was cut short".into(),
            drops => format!("; {drops} calls were not recorded (buffer full)"),
        }
    ))
}

/// Makes one recorded call; false when NCCL would not have made it (a NULL handle).
///
/// # Safety
/// `table` is a loaded plugin's table of the recording's version.
unsafe fn make_call(table: &Table, results: &Results, own: usize, step: &Step) -> bool {
    match &step.action {
        Action::Init {
            name,
            comm_id,
            n_nodes,
            n_ranks,
            rank,
        } => {
            let mut context: *mut c_void = std::ptr::null_mut();
            let mut mask: c_int = 0;
            let name = name.as_ref().map_or(std::ptr::null(), |n| n.as_ptr());
            let logger = Some(crate::logger::logger());
            // SAFETY: valid out-pointers and a NUL-terminated name (or NULL).
            unsafe {
                match table.init {
                    Init::V1(init) => init(&mut context, &mut mask),
                    Init::V4(init) => init(
                        &mut context,
                        &mut mask,
                        name,
                        *comm_id,
                        *n_nodes,
                        *n_ranks,
                        *rank,
                        logger,
                    ),
                    Init::V5(init) => init(
                        &mut context,
                        *comm_id,
                        &mut mask,
                        name,
                        *n_nodes,
                        *n_ranks,
                        *rank,
                        logger,
                    ),
                };
            }
            results.set(step.position, context as u64);
            true
        }
        Action::Start(start) => {
            let StartCall {
                context,
                descr,
                strings,
                handles,
                pid,
            } = &**start;
            let mut descr = descr.clone();
            let bytes = descr.as_mut_ptr().cast::<u8>();
            let put = |offset: usize, value: u64| {
                // SAFETY: every offset lies inside the version's descriptor, which the
                // recording holds whole (8-byte fields at 8-byte offsets).
                unsafe { bytes.add(offset).cast::<u64>().write_unaligned(value) }
            };
            for (offset, text) in strings {
                put(*offset, text.as_ref().map_or(0, |t| t.as_ptr() as u64));
            }
            for (offset, reference) in handles {
                let recorded = word_at_ptr(bytes, *offset);
                put(*offset, results.get(*reference, recorded).unwrap_or(0));
            }
            if let Some((offset, Some(process))) = pid {
                let replayed = if *process == own {
                    Some(std::process::id() as i32)
                } else {
                    results.pid_of(*process)
                };
                if let Some(replayed) = replayed {
                    // SAFETY: the pid field lies inside the descriptor.
                    unsafe { bytes.add(*offset).cast::<i32>().write_unaligned(replayed) };
                }
            }
            let context = results.get(*context, 0).unwrap_or(0);
            let mut handle: *mut c_void = std::ptr::null_mut();
            // SAFETY: a descriptor of the table's version whose pointers live through
            // the call.
            unsafe { (table.start)(context as *mut c_void, &mut handle, descr.as_mut_ptr()) };
            results.set(step.position, handle as u64);
            true
        }
        Action::Stop { handle } => match results.get(*handle, 0) {
            Some(handle) => {
                // SAFETY: a handle the plugin returned (or the recorded value).
                unsafe { (table.stop)(handle as *mut c_void) };
                true
            }
            None => false,
        },
        Action::State {
            handle,
            state,
            args,
        } => match results.get(*handle, 0) {
            Some(handle) => {
                let mut args = args.clone();
                let pointer = args
                    .as_mut()
                    .map_or(std::ptr::null_mut(), |a| a.as_mut_ptr());
                // SAFETY: the version's state arguments (or NULL), alive through the call.
                unsafe { (table.record)(handle as *mut c_void, *state, pointer) };
                true
            }
            None => false,
        },
        Action::Finalize { context } => {
            let context = results.get(*context, 0).unwrap_or(0);
            // SAFETY: a context the plugin returned.
            unsafe { (table.finalize)(context as *mut c_void) };
            true
        }
    }
}

fn word_at_ptr(bytes: *const u8, offset: usize) -> u64 {
    // SAFETY: as in `make_call`: the offset lies inside the descriptor.
    unsafe { bytes.add(offset).cast::<u64>().read_unaligned() }
}
