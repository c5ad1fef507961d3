//! How long `nccl-scorep merge` takes, and how much memory it needs, for jobs of 1, 64, 1024
//! and 16 384 processes, each at two event volumes per location, on parts the plugin wrote.
//!
//! The parts are made by the plugin itself: one `nccl-sim` process per rank loads
//! `libnccl_profiler_scorep.so` and runs the `single` scenario (AllReduce calls on one
//! communicator spanning every process, 8 channels), as rank `r` of one job of `N`
//! processes (`NCCL_SIM_RANK`, `NCCL_SIM_SIZE`, `NCCL_SIM_JOB`), 8 processes per simulated
//! host (`--hosts`); a job of one process drives two ranks. The processes run 4 per CPU at
//! a time, not all at once, so their collectives do not wait for the ranks of other
//! processes (`--peer-patience-ms 0`):
//! the parts are the plugin's, the timings in them are not a real job's. The merge ledger
//! must name one job for all the parts, as `nccl-scorep merge <run-dir>` needs.
//!
//! Each merge runs in a child process (this program again, with `--merge-child`), so that
//! its peak resident memory is its own: `wait4` hands back the child's `ru_maxrss`.
//!
//! It needs `nccl-sim` and the plugin built in release mode beside it:
//!
//! ```text
//! cargo build --release -p nccl-sim -p nccl-profiler-scorep
//! cargo bench -p nccl-scorep-merge --bench merge_parts
//! MERGE_BENCH_PROCS=1,64 MERGE_BENCH_ITERATIONS=1 MERGE_BENCH_RUNS=1 cargo bench -p nccl-scorep-merge --bench merge_parts
//! ```
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `MERGE_BENCH_PROCS` | `1,64,1024,16384` | job sizes (processes, one part each) |
//! | `MERGE_BENCH_ITERATIONS` | `1,100` | AllReduce calls per process (the event volume) |
//! | `MERGE_BENCH_CHANNELS` | `8` | channels per collective (locations per part: 3, one per channel, and 2 proxy lanes per channel, at most 16) |
//! | `MERGE_BENCH_RUNS` | `3` | merges timed per case (the median is reported) |
//! | `MERGE_BENCH_DIR` | a temporary directory | where the parts and merged archives go |
//! | `MERGE_BENCH_KEEP` | unset | `1`: leave each case's parts and merged archive there, and use parts left there by an earlier run with the same settings instead of making them again (to profile a merge: `merge_parts --merge-child <run-dir> <output-dir> <processes>`) |
#![deny(clippy::undocumented_unsafe_blocks)]

use std::collections::VecDeque;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use nccl_scorep_common::job::{ENV_JOB, ENV_RANK, ENV_SIZE};
use nccl_scorep_common::run_dir::{ANCHOR_FILE, EVENT_FILES_DIR, EVENT_FILES_LIST, PARTS_DIR};

/// The first argument of a merge child: `--merge-child <run-dir> <output-dir> <parts>`, or
/// `--merge-child --idle` for the baseline memory of the child process itself.
const CHILD_ARG: &str = "--merge-child";
const IDLE_ARG: &str = "--idle";
/// The line a merge child prints for its parent: `<prefix> <locations> <events>`.
const COUNTS_PREFIX: &str = "merged-counts";

const PROCESSES_PER_HOST: usize = 8;
/// The job id every process of one case gets (`NCCL_SIM_JOB`).
const JOB_ID: &str = "merge-bench";
/// What a finished case directory holds, to use its parts again (`MERGE_BENCH_KEEP=1`).
const GENERATED_FILE: &str = "generated.txt";

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
    iterations: Vec<u32>,
    channels: u32,
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

/// One positive number from `name`, else `default`.
fn one_from_env<T: std::str::FromStr + PartialOrd + Default>(
    name: &str,
    default: &str,
) -> Result<T, String> {
    let mut values = list_from_env::<T>(name, default)?;
    match values.len() {
        1 => Ok(values.remove(0)),
        _ => Err(format!("{name}: expected one number")),
    }
}

impl Settings {
    fn from_env() -> Result<Settings, String> {
        let procs = list_from_env::<usize>("MERGE_BENCH_PROCS", "1,64,1024,16384")?;
        if let Some(&too_many) = procs.iter().find(|&&p| p > 1 << 20) {
            return Err(format!(
                "MERGE_BENCH_PROCS: {too_many} processes is too many"
            ));
        }
        let iterations = list_from_env::<u32>("MERGE_BENCH_ITERATIONS", "1,100")?;
        let channels = one_from_env::<u32>("MERGE_BENCH_CHANNELS", "8")?;
        if channels > 64 {
            return Err(format!(
                "MERGE_BENCH_CHANNELS={channels}: at most 64 (NCCL's)"
            ));
        }
        let runs = one_from_env::<usize>("MERGE_BENCH_RUNS", "3")?;
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
            iterations,
            channels,
            runs,
            dir,
            keep,
        })
    }
}

// ---- The benchmark ------------------------------------------------------------------

/// The programs that make the parts.
struct Makers {
    nccl_sim: PathBuf,
    plugin: PathBuf,
    /// Processes run at once.
    at_once: usize,
}

/// One measured case.
struct Case {
    procs: usize,
    iterations: u32,
    locations: u64,
    events: u64,
    event_bytes: u64,
    /// `None`: parts of an earlier run used again.
    generate: Option<Duration>,
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
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let makers = Makers {
        nccl_sim: nccl_sim::binary_for_tests(),
        plugin: nccl_sim::our_plugin_for_tests(),
        at_once: 4 * cpus,
    };
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let (_, baseline_kib) = child_run(&exe, &[IDLE_ARG.as_ref()])?;
    println!(
        "merge benchmark: {cpus} CPUs, parts made by {} with {} ({} processes at once, \
         scenario single, {} channels) in {}, {} timed merges per case (median shown)",
        makers.nccl_sim.display(),
        makers.plugin.display(),
        makers.at_once,
        settings.channels,
        root.display(),
        settings.runs
    );
    println!(
        "peak memory is the merge child's maximum resident set; the child alone, without \
         merging, peaks at {:.1} MiB\n",
        baseline_kib as f64 / 1024.0
    );
    println!(
        "| processes | locations | AllReduce calls | events | events/location | .evt MiB | generate s | merge s (median) | min–max s | peak MiB |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &procs in &settings.procs {
        for &iterations in &settings.iterations {
            let case = measure(&exe, &root, &makers, procs, iterations, settings)?;
            print_row(&case);
        }
    }
    Ok(())
}

fn measure(
    exe: &Path,
    root: &Path,
    makers: &Makers,
    procs: usize,
    iterations: u32,
    settings: &Settings,
) -> Result<Case, String> {
    let case_dir = root.join(format!("p{procs}-i{iterations}-c{}", settings.channels));
    let run_dir = case_dir.join("run");
    let out_dir = case_dir.join("merged");
    let description = format!(
        "{procs} processes, {iterations} iterations, {} channels, plugin {}\n",
        settings.channels,
        makers.plugin.display()
    );
    let reuse = settings.keep
        && std::fs::read_to_string(case_dir.join(GENERATED_FILE)).ok() == Some(description.clone());
    let generate = if reuse {
        None
    } else {
        let _ = std::fs::remove_dir_all(&case_dir);
        std::fs::create_dir_all(&case_dir).map_err(|e| format!("{}: {e}", case_dir.display()))?;
        let started = Instant::now();
        make_parts(
            makers,
            &case_dir,
            &run_dir,
            procs,
            iterations,
            settings.channels,
        )?;
        let took = started.elapsed();
        std::fs::write(case_dir.join(GENERATED_FILE), &description)
            .map_err(|e| format!("{}: {e}", case_dir.display()))?;
        Some(took)
    };
    check_one_job(&run_dir, procs)?;
    let event_bytes = event_file_bytes(&run_dir.join(PARTS_DIR));
    let mut merges = Vec::with_capacity(settings.runs);
    let mut peak_rss_kib = 0;
    let mut counts = (0, 0);
    for _ in 0..settings.runs {
        let procs_text = procs.to_string();
        let args = [
            run_dir.as_os_str(),
            out_dir.as_os_str(),
            procs_text.as_ref(),
        ];
        let (elapsed, rss, output) = child_run_counted(exe, &args)?;
        merges.push(elapsed);
        peak_rss_kib = peak_rss_kib.max(rss);
        counts = output;
    }
    let (locations, events) = counts;
    check_merged(&out_dir, locations)?;
    if !settings.keep {
        let _ = std::fs::remove_dir_all(&case_dir);
    }
    merges.sort();
    Ok(Case {
        procs,
        iterations,
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
    let generate = case
        .generate
        .map_or("(kept)".to_owned(), |d| format!("{:.1}", seconds(&d)));
    println!(
        "| {} | {} | {} | {} | {:.1} | {:.1} | {generate} | **{:.3}** | {:.3}–{:.3} | {:.1} |",
        case.procs,
        case.locations,
        case.iterations,
        case.events,
        case.events as f64 / case.locations.max(1) as f64,
        case.event_bytes as f64 / (1 << 20) as f64,
        seconds(median),
        seconds(&case.merges[0]),
        seconds(&case.merges[case.merges.len() - 1]),
        case.peak_rss_kib as f64 / 1024.0,
    );
}

// ---- Parts made by the plugin -------------------------------------------------------

/// Runs `procs` nccl-sim processes with the plugin, [`Makers::at_once`] at a time, as the
/// ranks of one job writing into `run_dir`. Their standard error goes to one log in
/// `case_dir`, shown when a process fails.
fn make_parts(
    makers: &Makers,
    case_dir: &Path,
    run_dir: &Path,
    procs: usize,
    iterations: u32,
    channels: u32,
) -> Result<(), String> {
    // The collectives' rendezvous table of nccl-sim lives here, not in /dev/shm: with
    // 16 384 ranks it is a sparse file of 1 GiB, which the last processes leave behind.
    let shm_dir = case_dir.join("shm");
    std::fs::create_dir_all(&shm_dir).map_err(|e| format!("{}: {e}", shm_dir.display()))?;
    let log_path = case_dir.join("nccl-sim.log");
    let log = File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let hosts = procs.div_ceil(PROCESSES_PER_HOST).to_string();
    let size = procs.to_string();
    let iterations = iterations.to_string();
    let channels = channels.to_string();
    let ranks_in_process = ranks_per_process(procs).to_string();
    let mut running: VecDeque<(usize, Child)> = VecDeque::with_capacity(makers.at_once);
    let failed = |rank: usize, why: String| {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "making the parts: rank {rank} of {procs} {why}; the end of {}:\n{}",
            log_path.display(),
            tail.join("\n")
        )
    };
    let wait = |(rank, mut child): (usize, Child)| -> Result<(), String> {
        match child.wait() {
            Ok(status) if status.success() => Ok(()),
            Ok(status) => Err(failed(rank, format!("ended with {status}"))),
            Err(e) => Err(failed(rank, format!("cannot be waited for: {e}"))),
        }
    };
    for rank in 0..procs {
        if running.len() == makers.at_once {
            let oldest = running.pop_front().expect("at least one runs");
            wait(oldest)?;
        }
        let stderr = log
            .try_clone()
            .map_err(|e| format!("{}: {e}", log_path.display()))?;
        let child = Command::new(&makers.nccl_sim)
            .args(["run", "--scenario", "single", "--peer-patience-ms", "0"])
            .args(["--speedup", "1000", "--iterations", &iterations])
            .args(["--channels", &channels, "--hosts", &hosts])
            .args(["--ranks", &ranks_in_process])
            .arg("--plugin")
            .arg(&makers.plugin)
            .env(ENV_RANK, rank.to_string())
            .env(ENV_SIZE, &size)
            .env(ENV_JOB, JOB_ID)
            .env("NCCL_SIM_SHM_DIR", &shm_dir)
            .env("NCCL_SCOREP_MODE", "otf2")
            .env("NCCL_SCOREP_OUTPUT_DIR", run_dir)
            .env("NCCL_SCOREP_AUTO_MERGE", "0")
            // Not part of the trace: 64 KiB per process on the disk for nothing here.
            .env("NCCL_SCOREP_FLIGHT_RECORDER", "0")
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", makers.nccl_sim.display()))?;
        running.push_back((rank, child));
    }
    while let Some(child) = running.pop_front() {
        wait(child)?;
    }
    let _ = std::fs::remove_dir_all(&shm_dir);
    Ok(())
}

/// A process of a multi-process job drives one rank; a job of one process, two (a rank
/// alone in its communicator makes NCCL emit nothing).
fn ranks_per_process(procs: usize) -> usize {
    if procs == 1 {
        2
    } else {
        1
    }
}

/// The merge ledger names one job for every part, and there is a part per process: what
/// `nccl-scorep merge <run-dir>` takes as one job.
fn check_one_job(run_dir: &Path, procs: usize) -> Result<(), String> {
    let run = nccl_scorep_common::RunDir::new(run_dir);
    let ledger = std::fs::read_to_string(run.merge_ledger())
        .map_err(|e| format!("{}: {e}", run.merge_ledger().display()))?;
    let owners = nccl_scorep_common::ledger::job_of_parts(&ledger);
    let parts = run
        .parts()
        .map_err(|e| format!("{}: {e}", run_dir.display()))?;
    if parts.len() != procs {
        return Err(format!(
            "{} processes wrote {} parts, not one each",
            procs,
            parts.len()
        ));
    }
    // Parts as the plugin writes them now list their event files, which the merge then
    // does not read: parts kept from an older plugin would measure another merge.
    if let Some(part) = parts
        .iter()
        .find(|part| !part.path().join(EVENT_FILES_LIST).is_file())
    {
        return Err(format!(
            "{} has no {EVENT_FILES_LIST} (made by an older plugin?): make the parts anew",
            part.path().display()
        ));
    }
    let jobs: std::collections::BTreeSet<Option<&String>> =
        parts.iter().map(|part| owners.get(part.name())).collect();
    if jobs.len() != 1 || jobs.contains(&None) {
        return Err(format!(
            "the merge ledger does not put the {procs} parts in one job: {jobs:?}"
        ));
    }
    Ok(())
}

/// The bytes of every `.evt` file under `parts`.
fn event_file_bytes(parts: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(parts) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|part| std::fs::read_dir(part.path().join(EVENT_FILES_DIR)).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter(|file| file.path().extension().is_some_and(|x| x == "evt"))
        .filter_map(|file| file.metadata().ok())
        .map(|meta| meta.len())
        .sum()
}

/// The merged archive holds a local definition file for every location (a merge that
/// silently did less would look fast).
fn check_merged(out: &Path, locations: u64) -> Result<(), String> {
    let anchor = out.join(ANCHOR_FILE);
    if !anchor.exists() {
        return Err(format!("the merge wrote no {}", anchor.display()));
    }
    let definitions = std::fs::read_dir(out.join(EVENT_FILES_DIR))
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

// ---- The merge child ----------------------------------------------------------------

/// Runs this program as a merge child with `args`; returns its wall time and peak
/// resident memory (KiB).
fn child_run(exe: &Path, args: &[&std::ffi::OsStr]) -> Result<(Duration, u64), String> {
    child_run_with_output(exe, args).map(|(elapsed, rss, _)| (elapsed, rss))
}

/// [`child_run`] of a merge: also the merged locations and events the child printed.
fn child_run_counted(
    exe: &Path,
    args: &[&std::ffi::OsStr],
) -> Result<(Duration, u64, (u64, u64)), String> {
    let (elapsed, rss, stdout) = child_run_with_output(exe, args)?;
    let counts = stdout
        .lines()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some(COUNTS_PREFIX)).then(|| {
                let mut number = || words.next().and_then(|w| w.parse::<u64>().ok());
                Some((number()?, number()?))
            })?
        })
        .ok_or_else(|| format!("the merge child printed no counts: {stdout:?}"))?;
    Ok((elapsed, rss, counts))
}

fn child_run_with_output(
    exe: &Path,
    args: &[&std::ffi::OsStr],
) -> Result<(Duration, u64, String), String> {
    let started = Instant::now();
    let mut child = Command::new(exe)
        .arg(CHILD_ARG)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    // The child prints one short line at its end: read it before reaping.
    let mut stdout = String::new();
    if let Some(mut pipe) = child.stdout.take() {
        pipe.read_to_string(&mut stdout)
            .map_err(|e| format!("reading the merge child's output: {e}"))?;
    }
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
    Ok((elapsed, usage.ru_maxrss.max(0) as u64, stdout))
}

/// The merge child: merges, checks that the job came out whole (every part merged, one
/// communicator with a rank per process), prints the counts and exits; 1 with the error on
/// stderr when the merge failed or came out otherwise.
fn merge_child(args: &[String]) -> ExitCode {
    match args {
        [idle] if idle == IDLE_ARG => ExitCode::SUCCESS,
        [run_dir, out_dir, procs] => {
            let Ok(procs) = procs.parse::<usize>() else {
                eprintln!("merge_parts: {procs:?} is not a number of processes");
                return ExitCode::from(2);
            };
            match nccl_scorep_merge::merge(Path::new(run_dir), Some(Path::new(out_dir))) {
                Ok(report) => match whole_job(&report, procs) {
                    Ok(()) => {
                        println!("{COUNTS_PREFIX} {} {}", report.locations, report.events);
                        ExitCode::SUCCESS
                    }
                    Err(why) => {
                        eprintln!(
                            "merge_parts: the merge did not join the job: {why}\n{}",
                            nccl_scorep_merge::render(&report)
                        );
                        ExitCode::FAILURE
                    }
                },
                Err(message) => {
                    eprintln!("merge_parts: the merge failed: {message}");
                    ExitCode::FAILURE
                }
            }
        }
        _ => {
            eprintln!(
                "usage: merge_parts {CHILD_ARG} <run-dir> <output-dir> <processes> | {IDLE_ARG}"
            );
            ExitCode::from(2)
        }
    }
}

/// Every one of `procs` parts merged, none left out, and one communicator whose ranks are
/// all there.
fn whole_job(report: &nccl_scorep_merge::Report, procs: usize) -> Result<(), String> {
    if report.parts.len() != procs || !report.skipped.is_empty() {
        return Err(format!(
            "{} parts merged and {} left out, of {procs}",
            report.parts.len(),
            report.skipped.len()
        ));
    }
    let ranks = procs * ranks_per_process(procs);
    match report.comms.as_slice() {
        [comm] if comm.members == ranks && comm.missing_rank_count == 0 => Ok(()),
        comms => Err(format!(
            "expected one communicator of {ranks} ranks, found {}",
            comms
                .iter()
                .map(|c| format!("{} ({} ranks)", c.name, c.members))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}
