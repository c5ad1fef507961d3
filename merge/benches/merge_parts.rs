//! How long `nccl-scorep merge` takes, and how much memory it needs, for jobs of 1, 64 and
//! 1024 processes, each at two event volumes per location.
//!
//! The parts are synthetic but shaped like the plugin's (docs/trace-schema.md): per process
//! an application and a proxy thread, and for its communicator rank an ops stream, two
//! kernel channels and four proxy lanes (9 locations); one communicator spanning every
//! process, each part holding its own rank; the plugin's regions, attributes and strings;
//! ClockProperties; two clock offsets per location. They are written with OTF2 directly,
//! which takes a fraction of the time a real job would.
//!
//! Each merge runs in a child process (this program again, with `--merge-child`), so that
//! its peak resident memory is its own: `wait4` hands back the child's `ru_maxrss`.
//!
//! ```text
//! cargo bench -p nccl-scorep-merge --bench merge_parts
//! MERGE_BENCH_PROCS=1,64 MERGE_BENCH_EVENTS=20 MERGE_BENCH_RUNS=1 cargo bench -p nccl-scorep-merge --bench merge_parts
//! ```
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `MERGE_BENCH_PROCS` | `1,64,1024` | job sizes (processes, one part each) |
//! | `MERGE_BENCH_EVENTS` | `20,2000` | events per location |
//! | `MERGE_BENCH_RUNS` | `3` | merges timed per case (the median is reported) |
//! | `MERGE_BENCH_DIR` | a temporary directory | where the parts and merged archives go |
//! | `MERGE_BENCH_KEEP` | unset | `1`: leave each case's parts and merged archive there (to profile a merge: `merge_parts --merge-child <run-dir> <output-dir>`) |
#![deny(clippy::undocumented_unsafe_blocks)]

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::ptr;
use std::time::{Duration, Instant};

use otf2_sys::*;

/// The first argument of a merge child: `--merge-child <run-dir> <output-dir>`, or
/// `--merge-child --idle` for the baseline memory of the child process itself.
const CHILD_ARG: &str = "--merge-child";
const IDLE_ARG: &str = "--idle";

/// As the plugin writes them.
const EVENT_CHUNK_BYTES: u64 = 256 * 1024;
const CHANNELS: u64 = 2;
const PROCESSES_PER_NODE: usize = 8;
const COMM_HASH: u64 = 0x5eed_0bad_c0ff_ee01;
/// A CLOCK_MONOTONIC start and the realtime − monotonic offset of the synthetic job.
const MONOTONIC_START: u64 = 5_000_000_000_000;
const REALTIME_OFFSET: i64 = 1_700_000_000_000_000_000;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(position) = args.iter().position(|a| a == CHILD_ARG) {
        return merge_child(&args[position + 1..]);
    }
    let settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(message) => {
            eprintln!("merge_parts: {message}");
            return ExitCode::from(2);
        }
    };
    match run(&settings) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("merge_parts: {message}");
            ExitCode::FAILURE
        }
    }
}

// ---- Settings -----------------------------------------------------------------------

struct Settings {
    procs: Vec<usize>,
    events: Vec<u64>,
    runs: usize,
    dir: Option<PathBuf>,
    keep: bool,
}

/// A comma list of positive numbers from `name`, else `default`.
fn list_from_env<T: std::str::FromStr + PartialOrd + Default>(
    name: &str,
    default: &str,
) -> Result<Vec<T>, String> {
    let text = std::env::var(name).unwrap_or_else(|_| default.to_owned());
    text.split(',')
        .map(|item| {
            item.trim()
                .parse::<T>()
                .ok()
                .filter(|value| *value > T::default())
                .ok_or_else(|| {
                    format!("{name}={text:?}: expected a comma list of positive numbers")
                })
        })
        .collect()
}

impl Settings {
    fn from_env() -> Result<Settings, String> {
        let procs = list_from_env::<usize>("MERGE_BENCH_PROCS", "1,64,1024")?;
        if let Some(&too_many) = procs.iter().find(|&&p| p > 1 << 20) {
            return Err(format!(
                "MERGE_BENCH_PROCS: {too_many} processes is too many"
            ));
        }
        let events = list_from_env::<u64>("MERGE_BENCH_EVENTS", "20,2000")?;
        let runs = list_from_env::<usize>("MERGE_BENCH_RUNS", "3")?;
        let [runs] = runs[..] else {
            return Err("MERGE_BENCH_RUNS: expected one number".to_owned());
        };
        let dir = std::env::var_os("MERGE_BENCH_DIR").map(PathBuf::from);
        let keep = match std::env::var("MERGE_BENCH_KEEP").as_deref() {
            Err(_) | Ok("" | "0") => false,
            Ok("1") => true,
            Ok(other) => return Err(format!("MERGE_BENCH_KEEP={other:?}: expected 0 or 1")),
        };
        if keep && dir.is_none() {
            return Err("MERGE_BENCH_KEEP=1 needs MERGE_BENCH_DIR".to_owned());
        }
        Ok(Settings {
            procs,
            events,
            runs,
            dir,
            keep,
        })
    }
}

// ---- The benchmark ------------------------------------------------------------------

/// One measured case.
struct Case {
    procs: usize,
    events_per_location: u64,
    locations: u64,
    events: u64,
    event_bytes: u64,
    generate: Duration,
    merges: Vec<Duration>,
    peak_rss_kib: u64,
}

fn run(settings: &Settings) -> Result<(), String> {
    let temp;
    let root = match &settings.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            dir.clone()
        }
        None => {
            temp = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
            temp.path().to_path_buf()
        }
    };
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    // OTF2 allocates (and clears) a 4 MiB definition chunk per location of every part it
    // writes: keep freed chunks in the heap for the next part instead of returning them
    // to the kernel, which would fault every page in again. Only the generator is tuned;
    // the merge children run with the allocator's defaults.
    // SAFETY: mallopt only changes glibc's allocator settings; no other thread runs yet.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
    }
    let (_, baseline_kib) = child_run(&exe, &[IDLE_ARG.as_ref()])?;
    println!(
        "merge benchmark: {} CPUs, parts in {}, {} timed merges per case (median shown)",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        root.display(),
        settings.runs
    );
    println!(
        "peak memory is the merge child's maximum resident set; the child alone, without \
         merging, peaks at {:.1} MiB\n",
        baseline_kib as f64 / 1024.0
    );
    println!(
        "| processes | locations | events/location | events | .evt MiB | generate s | merge s (median) | min–max s | peak MiB |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &procs in &settings.procs {
        for &events_per_location in &settings.events {
            let case = measure(&exe, &root, procs, events_per_location, settings)?;
            print_row(&case);
        }
    }
    Ok(())
}

fn measure(
    exe: &Path,
    root: &Path,
    procs: usize,
    events_per_location: u64,
    settings: &Settings,
) -> Result<Case, String> {
    let case_dir = root.join(format!("p{procs}-e{events_per_location}"));
    let _ = std::fs::remove_dir_all(&case_dir);
    let run_dir = case_dir.join("run");
    let out_dir = case_dir.join("merged");
    let started = Instant::now();
    let mut locations = 0;
    let mut events = 0;
    for process in 0..procs {
        let part = write_part(&run_dir, process, procs, events_per_location)?;
        locations += part.locations;
        events += part.events;
    }
    let generate = started.elapsed();
    let event_bytes = event_file_bytes(&run_dir.join("parts"));
    let mut merges = Vec::with_capacity(settings.runs);
    let mut peak_rss_kib = 0;
    for _ in 0..settings.runs {
        let args = [run_dir.as_os_str(), out_dir.as_os_str()];
        let (elapsed, rss) = child_run(exe, &args)?;
        merges.push(elapsed);
        peak_rss_kib = peak_rss_kib.max(rss);
    }
    check_merged(&out_dir, locations)?;
    if !settings.keep {
        let _ = std::fs::remove_dir_all(&case_dir);
    }
    merges.sort();
    Ok(Case {
        procs,
        events_per_location,
        locations,
        events,
        event_bytes,
        generate,
        merges,
        peak_rss_kib,
    })
}

fn print_row(case: &Case) {
    let seconds = |d: &Duration| d.as_secs_f64();
    let median = &case.merges[case.merges.len() / 2];
    println!(
        "| {} | {} | {} | {} | {:.1} | {:.2} | **{:.3}** | {:.3}–{:.3} | {:.1} |",
        case.procs,
        case.locations,
        case.events_per_location,
        case.events,
        case.event_bytes as f64 / (1 << 20) as f64,
        seconds(&case.generate),
        seconds(median),
        seconds(&case.merges[0]),
        seconds(&case.merges[case.merges.len() - 1]),
        case.peak_rss_kib as f64 / 1024.0,
    );
}

/// The bytes of every `.evt` file under `parts`.
fn event_file_bytes(parts: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(parts) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|part| std::fs::read_dir(part.path().join("traces")).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter(|file| file.path().extension().is_some_and(|x| x == "evt"))
        .filter_map(|file| file.metadata().ok())
        .map(|meta| meta.len())
        .sum()
}

/// The merged archive holds every location (a merge that silently did less would look
/// fast).
fn check_merged(out: &Path, locations: u64) -> Result<(), String> {
    let anchor = out.join("traces.otf2");
    if !anchor.exists() {
        return Err(format!("the merge wrote no {}", anchor.display()));
    }
    let definitions = std::fs::read_dir(out.join("traces"))
        .map_err(|e| format!("{}: {e}", out.display()))?
        .filter_map(Result::ok)
        .filter(|f| f.path().extension().is_some_and(|x| x == "def"))
        .count() as u64;
    if definitions != locations {
        return Err(format!(
            "the merged archive has {definitions} local definition files, not {locations}"
        ));
    }
    Ok(())
}

/// Runs this program as a merge child with `args`; returns its wall time and peak
/// resident memory (KiB).
fn child_run(exe: &Path, args: &[&std::ffi::OsStr]) -> Result<(Duration, u64), String> {
    let started = Instant::now();
    let child = Command::new(exe)
        .arg(CHILD_ARG)
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not reaped yet (the `Child` is never waited on); the
    // pointers are valid for the call.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let elapsed = started.elapsed();
    drop(child);
    if reaped != pid {
        return Err(format!("wait4 failed: {}", std::io::Error::last_os_error()));
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!("the merge child failed (wait status {status:#x})"));
    }
    // Linux reports ru_maxrss in KiB.
    Ok((elapsed, usage.ru_maxrss.max(0) as u64))
}

/// The merge child: merges and exits; 1 with the error on stderr when the merge failed.
fn merge_child(args: &[String]) -> ExitCode {
    match args {
        [idle] if idle == IDLE_ARG => ExitCode::SUCCESS,
        [run_dir, out_dir] => {
            match nccl_scorep_merge::merge(Path::new(run_dir), Some(Path::new(out_dir))) {
                Ok(report) => {
                    println!("{}", nccl_scorep_merge::render(&report));
                    ExitCode::SUCCESS
                }
                Err(message) => {
                    eprintln!("merge_parts: the merge failed: {message}");
                    ExitCode::FAILURE
                }
            }
        }
        _ => {
            eprintln!("usage: merge_parts {CHILD_ARG} <run-dir> <output-dir> | {IDLE_ARG}");
            ExitCode::from(2)
        }
    }
}

// ---- Synthetic parts ----------------------------------------------------------------

/// The `nccl.*` attributes the plugin defines (a subset is enough for the merge's work per
/// attribute): name, type.
const ATTRIBUTES: &[(&str, u32)] = &[
    ("nccl.comm_hash", OTF2_TYPE_UINT64),
    ("nccl.rank", OTF2_TYPE_INT64),
    ("nccl.nranks", OTF2_TYPE_INT64),
    ("nccl.seq", OTF2_TYPE_UINT64),
    ("nccl.func", OTF2_TYPE_STRING),
    ("nccl.count", OTF2_TYPE_UINT64),
    ("nccl.datatype", OTF2_TYPE_STRING),
    ("nccl.bytes", OTF2_TYPE_UINT64),
    ("nccl.algo", OTF2_TYPE_STRING),
    ("nccl.proto", OTF2_TYPE_STRING),
    ("nccl.nchannels", OTF2_TYPE_UINT64),
    ("nccl.peer", OTF2_TYPE_INT64),
    ("nccl.channel", OTF2_TYPE_UINT64),
    ("nccl.step", OTF2_TYPE_UINT64),
    ("nccl.trans_size", OTF2_TYPE_UINT64),
    ("nccl.nsteps", OTF2_TYPE_UINT64),
    ("nccl.chunk_size", OTF2_TYPE_UINT64),
    ("nccl.pid", OTF2_TYPE_INT64),
    ("nccl.enqueue_ns", OTF2_TYPE_UINT64),
    ("nccl.complete_ns", OTF2_TYPE_UINT64),
    ("nccl.gpu_clock_error_ns", OTF2_TYPE_UINT64),
];
const ATTR_COMM_HASH: u32 = 0;
const ATTR_RANK: u32 = 1;
const ATTR_NRANKS: u32 = 2;
const ATTR_SEQ: u32 = 3;
const ATTR_FUNC: u32 = 4;
const ATTR_BYTES: u32 = 7;
const ATTR_PEER: u32 = 11;
const ATTR_CHANNEL: u32 = 12;

/// The regions the plugin defines for such a job: name, role.
const REGIONS: &[(&str, u32)] = &[
    ("ncclGroup", OTF2_REGION_ROLE_FUNCTION),
    ("ncclAllReduce", OTF2_REGION_ROLE_COLL_ALL2ALL),
    ("NCCL kernel launch", OTF2_REGION_ROLE_FUNCTION),
    ("NCCL plan enqueue", OTF2_REGION_ROLE_FUNCTION),
    ("AllReduce enqueue", OTF2_REGION_ROLE_FUNCTION),
    ("proxy sleep", OTF2_REGION_ROLE_ARTIFICIAL),
    ("proxy append", OTF2_REGION_ROLE_ARTIFICIAL),
    ("AllReduce", OTF2_REGION_ROLE_COLL_ALL2ALL),
    ("AllReduce kernel", OTF2_REGION_ROLE_CODE),
    ("proxy send", OTF2_REGION_ROLE_DATA_TRANSFER),
    ("proxy recv", OTF2_REGION_ROLE_DATA_TRANSFER),
    ("send step", OTF2_REGION_ROLE_DATA_TRANSFER),
    ("recv step", OTF2_REGION_ROLE_DATA_TRANSFER),
    ("send: GPU wait", OTF2_REGION_ROLE_DATA_TRANSFER),
    ("recv: network wait", OTF2_REGION_ROLE_DATA_TRANSFER),
];
const REGION_API: u32 = 1;
const REGION_LAUNCH: u32 = 2;
const REGION_SLEEP: u32 = 5;
const REGION_OP: u32 = 7;
const REGION_KERNEL: u32 = 8;
const REGION_PROXY_SEND: u32 = 9;
const REGION_PROXY_RECV: u32 = 10;
const REGION_SEND_STEP: u32 = 11;
const REGION_RECV_STEP: u32 = 12;

/// What a synthetic location shows, and so which events it gets.
#[derive(Clone, Copy)]
enum Kind {
    AppThread,
    ProxyThread,
    Ops,
    Channel,
    ProxySend { channel: u64, peer: usize },
    ProxyRecv { channel: u64, peer: usize },
}

/// The part's strings, with dense ids in first-use order.
#[derive(Default)]
struct Strings {
    texts: Vec<CString>,
    ids: std::collections::HashMap<String, u32>,
}

impl Strings {
    fn id(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.ids.get(text) {
            return id;
        }
        let id = self.texts.len() as u32;
        self.texts
            .push(CString::new(text).expect("no NUL in generated names"));
        self.ids.insert(text.to_owned(), id);
        id
    }
}

/// What the operations on the ops streams are.
#[derive(Clone, Copy)]
struct Operation {
    /// The string id of their function.
    func: u32,
    nranks: i64,
}

struct PartSize {
    locations: u64,
    events: u64,
}

fn check(code: OTF2_ErrorCode, what: &str) -> Result<(), String> {
    if code == OTF2_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed (OTF2 error {code})"))
    }
}

/// Writes the part of process `process` of `procs` into
/// `<run_dir>/parts/node<k>.<pid>/`, with about `events_per_location` events on each
/// location.
fn write_part(
    run_dir: &Path,
    process: usize,
    procs: usize,
    events_per_location: u64,
) -> Result<PartSize, String> {
    let host = format!("node{}", process / PROCESSES_PER_NODE);
    let pid = 100_000 + process;
    let dir = run_dir.join("parts").join(format!("{host}.{pid}"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = CString::new(dir.as_os_str().as_bytes()).map_err(|_| "NUL in the path")?;

    let next = (process + 1) % procs;
    let previous = (process + procs - 1) % procs;
    let mut kinds = vec![Kind::AppThread, Kind::ProxyThread, Kind::Ops];
    kinds.extend((0..CHANNELS).map(|_| Kind::Channel));
    for channel in 0..CHANNELS {
        kinds.push(Kind::ProxySend {
            channel,
            peer: next,
        });
        kinds.push(Kind::ProxyRecv {
            channel,
            peer: previous,
        });
    }
    let mut strings = Strings::default();
    strings.id("");
    for (name, _) in ATTRIBUTES {
        strings.id(name);
    }
    for (name, _) in REGIONS {
        strings.id(name);
    }
    let comm = "bench";
    let names: Vec<String> = kinds
        .iter()
        .enumerate()
        .map(|(index, kind)| match kind {
            Kind::AppThread | Kind::ProxyThread => format!("thread {}", pid + 1 + index),
            Kind::Ops => format!("{comm} rank {process} ops"),
            Kind::Channel => format!("{comm} rank {process} channel {}", index - 3),
            Kind::ProxySend { channel, peer } => {
                format!("{comm} rank {process} proxy ch{channel} send to {peer}")
            }
            Kind::ProxyRecv { channel, peer } => {
                format!("{comm} rank {process} proxy ch{channel} recv from {peer}")
            }
        })
        .collect();

    let archive = otf2_sys::writing::create_archive(
        &path,
        EVENT_CHUNK_BYTES,
        OTF2_CHUNK_SIZE_DEFINITIONS_DEFAULT,
    )
    .map_err(|error| {
        format!(
            "OTF2 cannot create an archive in {}: {error:?}",
            dir.display()
        )
    })?;
    // SAFETY: the OTF2 write sequence on this thread: events, local definitions, global
    // definitions, close; every pointer passed is live for its call, and every writer is
    // closed before the archive.
    unsafe {
        let result = write_archive(
            archive,
            process,
            procs,
            events_per_location,
            &host,
            pid,
            &kinds,
            &names,
            &mut strings,
        );
        let closed = OTF2_Archive_Close(archive);
        let size = result?;
        check(closed, "OTF2_Archive_Close")?;
        Ok(size)
    }
}

/// The body of [`write_part`] on an open archive.
///
/// # Safety
/// `archive` is open for writing and used on this thread only.
#[allow(clippy::too_many_arguments)]
unsafe fn write_archive(
    archive: *mut OTF2_Archive,
    process: usize,
    procs: usize,
    events_per_location: u64,
    host: &str,
    pid: usize,
    kinds: &[Kind],
    names: &[String],
    strings: &mut Strings,
) -> Result<PartSize, String> {
    let ids: Vec<u64> = (0..kinds.len() as u64)
        .map(|index| (index << 32) | process as u64)
        .collect();
    let mut counts = Vec::with_capacity(kinds.len());
    let mut last_time = MONOTONIC_START;
    // The operations are AllReduce calls of every process (the profile matches them).
    let operation = Operation {
        func: strings.id("AllReduce"),
        nranks: procs as i64,
    };
    // SAFETY: `archive` is open (caller); the attribute list is deleted at the end; each
    // event writer is closed before the event files.
    unsafe {
        check(OTF2_Archive_OpenEvtFiles(archive), "OpenEvtFiles")?;
        let attributes = OTF2_AttributeList_New();
        for (index, kind) in kinds.iter().enumerate() {
            let writer = OTF2_Archive_GetEvtWriter(archive, ids[index]);
            if writer.is_null() {
                OTF2_AttributeList_Delete(attributes);
                return Err("OTF2_Archive_GetEvtWriter failed".to_owned());
            }
            let end = write_events(
                writer,
                attributes,
                *kind,
                process,
                operation,
                events_per_location,
            );
            last_time = last_time.max(end?);
            let mut events = 0;
            OTF2_EvtWriter_GetNumberOfEvents(writer, &mut events);
            counts.push(events);
            check(
                OTF2_Archive_CloseEvtWriter(archive, writer),
                "CloseEvtWriter",
            )?;
        }
        OTF2_AttributeList_Delete(attributes);
        check(OTF2_Archive_CloseEvtFiles(archive), "CloseEvtFiles")?;

        check(OTF2_Archive_OpenDefFiles(archive), "OpenDefFiles")?;
        for &id in &ids {
            let writer = OTF2_Archive_GetDefWriter(archive, id);
            if writer.is_null() {
                return Err("OTF2_Archive_GetDefWriter failed".to_owned());
            }
            for time in [MONOTONIC_START, last_time] {
                check(
                    OTF2_DefWriter_WriteClockOffset(writer, time, REALTIME_OFFSET, 0.0),
                    "WriteClockOffset",
                )?;
            }
            check(
                OTF2_Archive_CloseDefWriter(archive, writer),
                "CloseDefWriter",
            )?;
        }
        check(OTF2_Archive_CloseDefFiles(archive), "CloseDefFiles")?;

        let global = OTF2_Archive_GetGlobalDefWriter(archive);
        if global.is_null() {
            return Err("OTF2_Archive_GetGlobalDefWriter failed".to_owned());
        }
        let start = (MONOTONIC_START as i64 + REALTIME_OFFSET) as u64;
        check(
            OTF2_GlobalDefWriter_WriteClockProperties(
                global,
                1_000_000_000,
                start,
                last_time - MONOTONIC_START + 1,
                start,
            ),
            "WriteClockProperties",
        )?;
        write_global_definitions(
            global, process, host, pid, kinds, names, &ids, &counts, strings,
        )?;
    }
    Ok(PartSize {
        locations: kinds.len() as u64,
        events: counts.iter().sum(),
    })
}

/// The events of one location, in the pattern its kind gets, until there are at least
/// `wanted`; returns the last timestamp.
///
/// # Safety
/// `writer` and `attributes` are live.
unsafe fn write_events(
    writer: *mut OTF2_EvtWriter,
    attributes: *mut OTF2_AttributeList,
    kind: Kind,
    process: usize,
    operation: Operation,
    wanted: u64,
) -> Result<u64, String> {
    let mut time = MONOTONIC_START + 1_000;
    let mut written = 0u64;
    let mut seq = 0u64;
    // SAFETY: forwarded from the caller; OTF2 empties the attribute list with each record
    // that takes it.
    unsafe {
        let mut tick = |step: u64| {
            time += step;
            time
        };
        while written < wanted {
            let codes: [OTF2_ErrorCode; 4] = match kind {
                Kind::AppThread => [
                    OTF2_EvtWriter_Enter(writer, ptr::null_mut(), tick(700), REGION_API),
                    OTF2_EvtWriter_Enter(writer, ptr::null_mut(), tick(100), REGION_LAUNCH),
                    OTF2_EvtWriter_Leave(writer, ptr::null_mut(), tick(100), REGION_LAUNCH),
                    OTF2_EvtWriter_Leave(writer, ptr::null_mut(), tick(100), REGION_API),
                ],
                Kind::ProxyThread => [
                    OTF2_EvtWriter_Enter(writer, ptr::null_mut(), tick(500), REGION_SLEEP),
                    OTF2_EvtWriter_Leave(writer, ptr::null_mut(), tick(500), REGION_SLEEP),
                    OTF2_SUCCESS,
                    OTF2_SUCCESS,
                ],
                Kind::Ops => {
                    OTF2_AttributeList_AddUint64(attributes, ATTR_COMM_HASH, COMM_HASH);
                    OTF2_AttributeList_AddUint64(attributes, ATTR_SEQ, seq);
                    OTF2_AttributeList_AddInt64(attributes, ATTR_RANK, process as i64);
                    OTF2_AttributeList_AddInt64(attributes, ATTR_NRANKS, operation.nranks);
                    OTF2_AttributeList_AddStringRef(attributes, ATTR_FUNC, operation.func);
                    OTF2_AttributeList_AddUint64(attributes, ATTR_BYTES, 65_536);
                    [
                        OTF2_EvtWriter_Enter(writer, attributes, tick(200), REGION_OP),
                        OTF2_EvtWriter_MpiCollectiveBegin(writer, ptr::null_mut(), tick(0)),
                        OTF2_EvtWriter_MpiCollectiveEnd(
                            writer,
                            ptr::null_mut(),
                            tick(600),
                            OTF2_COLLECTIVE_OP_ALLREDUCE as OTF2_CollectiveOp,
                            0,
                            OTF2_UNDEFINED_UINT32,
                            65_536,
                            65_536,
                        ),
                        OTF2_EvtWriter_Leave(writer, ptr::null_mut(), tick(0), REGION_OP),
                    ]
                }
                Kind::Channel => {
                    OTF2_AttributeList_AddInt64(attributes, ATTR_RANK, process as i64);
                    [
                        OTF2_EvtWriter_Enter(writer, attributes, tick(300), REGION_KERNEL),
                        OTF2_EvtWriter_Leave(writer, ptr::null_mut(), tick(500), REGION_KERNEL),
                        OTF2_SUCCESS,
                        OTF2_SUCCESS,
                    ]
                }
                Kind::ProxySend { channel, peer } | Kind::ProxyRecv { channel, peer } => {
                    let (operation, step) = match kind {
                        Kind::ProxySend { .. } => (REGION_PROXY_SEND, REGION_SEND_STEP),
                        _ => (REGION_PROXY_RECV, REGION_RECV_STEP),
                    };
                    OTF2_AttributeList_AddUint64(attributes, ATTR_CHANNEL, channel);
                    OTF2_AttributeList_AddInt64(attributes, ATTR_PEER, peer as i64);
                    [
                        OTF2_EvtWriter_Enter(writer, attributes, tick(300), operation),
                        OTF2_EvtWriter_Enter(writer, ptr::null_mut(), tick(50), step),
                        OTF2_EvtWriter_Leave(writer, ptr::null_mut(), tick(400), step),
                        OTF2_EvtWriter_Leave(writer, ptr::null_mut(), tick(50), operation),
                    ]
                }
            };
            for code in codes {
                check(code, "writing an event")?;
            }
            written += match kind {
                Kind::ProxyThread | Kind::Channel => 2,
                _ => 4,
            };
            seq += 1;
        }
    }
    Ok(time)
}

/// The part's global definitions, in the plugin's order and shape.
///
/// # Safety
/// `w` is the archive's open global definition writer.
#[allow(clippy::too_many_arguments)]
unsafe fn write_global_definitions(
    w: *mut OTF2_GlobalDefWriter,
    process: usize,
    host: &str,
    pid: usize,
    kinds: &[Kind],
    names: &[String],
    ids: &[u64],
    counts: &[u64],
    strings: &mut Strings,
) -> Result<(), String> {
    let nccl = strings.id("NCCL");
    let all_ranks = strings.id("NCCL ranks");
    let machine = strings.id("machine");
    let node_class = strings.id("node");
    let node = strings.id(host);
    let process_name = strings.id(&format!("process {process} (pid {pid} on {host})"));
    let rank_group = strings.id(&format!("bench rank {process}"));
    let comm_name = strings.id(&format!("bench (0x{COMM_HASH:x})"));
    let descriptions: Vec<u32> = ATTRIBUTES
        .iter()
        .map(|(name, _)| strings.id(&format!("{name}: what the plugin records there")))
        .collect();
    let region_descriptions: Vec<u32> = REGIONS
        .iter()
        .map(|(name, _)| strings.id(&format!("{name} (NCCL)")))
        .collect();
    let location_names: Vec<u32> = names.iter().map(|n| strings.id(n)).collect();
    // SAFETY: `w` is open (caller); every id written is dense and defined before its users.
    unsafe {
        for (id, text) in strings.texts.iter().enumerate() {
            check(
                OTF2_GlobalDefWriter_WriteString(w, id as u32, text.as_ptr()),
                "WriteString",
            )?;
        }
        check(
            OTF2_GlobalDefWriter_WriteParadigm(
                w,
                OTF2_PARADIGM_NONE as OTF2_Paradigm,
                nccl,
                OTF2_PARADIGM_CLASS_PROCESS as OTF2_ParadigmClass,
            ),
            "WriteParadigm",
        )?;
        check(
            OTF2_GlobalDefWriter_WriteSystemTreeNode(
                w,
                0,
                machine,
                machine,
                OTF2_UNDEFINED_SYSTEM_TREE_NODE,
            ),
            "WriteSystemTreeNode",
        )?;
        check(
            OTF2_GlobalDefWriter_WriteSystemTreeNode(w, 1, node, node_class, 0),
            "WriteSystemTreeNode",
        )?;
        check(
            OTF2_GlobalDefWriter_WriteLocationGroup(
                w,
                0,
                process_name,
                OTF2_LOCATION_GROUP_TYPE_PROCESS as OTF2_LocationGroupType,
                1,
                OTF2_UNDEFINED_LOCATION_GROUP,
            ),
            "WriteLocationGroup",
        )?;
        check(
            OTF2_GlobalDefWriter_WriteLocationGroup(
                w,
                1,
                rank_group,
                OTF2_LOCATION_GROUP_TYPE_ACCELERATOR as OTF2_LocationGroupType,
                1,
                0,
            ),
            "WriteLocationGroup",
        )?;
        for (index, kind) in kinds.iter().enumerate() {
            let (location_type, group) = match kind {
                Kind::AppThread | Kind::ProxyThread => (OTF2_LOCATION_TYPE_CPU_THREAD, 0),
                Kind::Ops | Kind::Channel => (OTF2_LOCATION_TYPE_ACCELERATOR_STREAM, 1),
                Kind::ProxySend { .. } | Kind::ProxyRecv { .. } => {
                    (OTF2_LOCATION_TYPE_CPU_THREAD, 1)
                }
            };
            check(
                OTF2_GlobalDefWriter_WriteLocation(
                    w,
                    ids[index],
                    location_names[index],
                    location_type as OTF2_LocationType,
                    counts[index],
                    group,
                ),
                "WriteLocation",
            )?;
        }
        for (id, (name, role)) in REGIONS.iter().enumerate() {
            let name = strings.ids[*name];
            check(
                OTF2_GlobalDefWriter_WriteRegion(
                    w,
                    id as u32,
                    name,
                    name,
                    region_descriptions[id],
                    *role as OTF2_RegionRole,
                    OTF2_PARADIGM_NONE as OTF2_Paradigm,
                    OTF2_REGION_FLAG_NONE as OTF2_RegionFlag,
                    0,
                    0,
                    0,
                ),
                "WriteRegion",
            )?;
        }
        // The ops stream is the part's only communicator member (position 0).
        let ops_position = [0u64];
        let ops_location = [ids[2]];
        check(
            OTF2_GlobalDefWriter_WriteGroup(
                w,
                0,
                all_ranks,
                OTF2_GROUP_TYPE_COMM_LOCATIONS as OTF2_GroupType,
                OTF2_PARADIGM_NONE as OTF2_Paradigm,
                OTF2_GROUP_FLAG_NONE as OTF2_GroupFlag,
                1,
                ops_location.as_ptr(),
            ),
            "WriteGroup",
        )?;
        check(
            OTF2_GlobalDefWriter_WriteGroup(
                w,
                1,
                comm_name,
                OTF2_GROUP_TYPE_COMM_GROUP as OTF2_GroupType,
                OTF2_PARADIGM_NONE as OTF2_Paradigm,
                OTF2_GROUP_FLAG_NONE as OTF2_GroupFlag,
                1,
                ops_position.as_ptr(),
            ),
            "WriteGroup",
        )?;
        check(
            OTF2_GlobalDefWriter_WriteComm(
                w,
                0,
                comm_name,
                1,
                OTF2_UNDEFINED_COMM,
                OTF2_COMM_FLAG_NONE as OTF2_CommFlag,
            ),
            "WriteComm",
        )?;
        for (id, (name, attribute_type)) in ATTRIBUTES.iter().enumerate() {
            check(
                OTF2_GlobalDefWriter_WriteAttribute(
                    w,
                    id as u32,
                    strings.ids[*name],
                    descriptions[id],
                    *attribute_type as OTF2_Type,
                ),
                "WriteAttribute",
            )?;
        }
    }
    Ok(())
}
