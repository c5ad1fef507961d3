//! `nccl-scorep`: the command-line tool of the NCCL → Score-P / OTF2 profiler plugin.

mod compare;
mod convert;
mod doctor;
mod export;
mod generate;
mod launch;
mod libsearch;
mod nccl_ops;

mod probe;
mod profile;
mod report;
mod status;
mod summary;
mod validate;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The replay clock `convert` offers the plugin (exported, see build.rs), kept in the
/// link: a library function nothing in the binary calls may otherwise be left out.
#[used]
static EXPORTED_CLOCK: unsafe extern "C" fn(*mut i64) -> u64 = nccl_sim::host_clock::nccl_sim_clock;

/// The git commit the tool was built from, or "unknown" (set by build.rs).
const GIT_COMMIT: &str = env!("NCCLSCOREP_GIT_COMMIT");

/// The version, with the commit when the build knew it: "0.1.0 (git 1a2b3c4)".
fn version_text() -> String {
    let version = env!("CARGO_PKG_VERSION");
    if GIT_COMMIT == "unknown" {
        version.to_owned()
    } else {
        format!("{version} (git {GIT_COMMIT})")
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "nccl-scorep",
    version = version_text(),
    about = "Companion tool of the NCCL profiler plugin that writes Score-P / OTF2 traces"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a job traced, in a new experiment directory, and print its summary.
    ///
    /// `nccl-scorep run -- mpirun -np 8 ./app` (or srun, torchrun, a plain program). At the
    /// end, where the trace is and its summary; for a job that ended without merging, the
    /// command that merges it.
    ///
    /// Sets NCCL_PROFILER_PLUGIN to the library installed beside the tool and the
    /// NCCL_SCOREP_* variables (forwarded with -x to Open MPI's ranks), and writes run.json
    /// (docs/launcher.md). The exit status is the job's.
    Run {
        #[command(flatten)]
        launch: LaunchArgs,
        /// The launcher and program, after `--`.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<std::ffi::OsString>,
    },
    /// The per-rank form of `run`, like tau_exec: `mpirun -np 8 nccl-scorep exec -- ./app`.
    ///
    /// Every rank of a job finds the same experiment directory (by the launcher's job id),
    /// sets the plugin's variables and becomes the program.
    Exec {
        #[command(flatten)]
        launch: LaunchArgs,
        /// The program and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "PROGRAM")]
        command: Vec<std::ffi::OsString>,
    },
    /// Report what this machine offers: NCCL, OTF2, MPI, Score-P, and which profiler
    /// plugin NCCL would load with the current environment.
    ///
    /// Missing pieces are reported, not treated as errors: the exit status is 0. Every
    /// NCCL_SCOREP_* variable set is checked with the plugin's own parser.
    Doctor {
        /// List every variable of the plugin with its values, default and meaning.
        #[arg(long)]
        variables: bool,
    },
    /// Where NCCL time went and which rank was late.
    ///
    /// From a job's trace (or, without one, its processes' parts or event logs): per
    /// communicator and operation, the costliest
    /// first, totals, share of the run, bandwidth and the wait for the last rank, per size
    /// bucket; each rank's time, wait and bandwidth; stragglers (docs/summary.md).
    ///
    /// Exit status: 0 with a summary, 2 when the path cannot be opened (or holds neither a
    /// trace nor event logs), 1 for other failures. Parts of a run directory that its
    /// merged traces.otf2 lacks are warned about on stderr.
    Summary {
        /// A run directory (NCCL_SCOREP_OUTPUT_DIR): its merged traces.otf2, else its
        /// parts/*/traces.otf2, else its *.jsonl event logs; or an archive's anchor file.
        run_dir: std::path::PathBuf,
        /// Print JSON (schema nccl-scorep-summary/2) instead of tables.
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// Print the operations table as CSV, one row per operation and size bucket.
        #[arg(long)]
        csv: bool,
    },
    /// While a job runs or hangs: per communicator, the collective sequence number each
    /// rank reached, who has not arrived at the collective the others wait in, and the
    /// operation unfinished longest and where it is stuck (docs/hangs.md).
    ///
    /// Reads the processes' flight recorder files in the run directory (on one node or a
    /// shared file system). Exit status: 0 when nothing is unfinished, 3 when something
    /// is, 2 when there is no readable recorder file.
    Status {
        /// The job's run directory (NCCL_SCOREP_OUTPUT_DIR).
        run_dir: std::path::PathBuf,
        /// Print JSON (schema nccl-scorep-status/2).
        #[arg(long)]
        json: bool,
        /// Refresh every SECS seconds (default 2) until interrupted.
        #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "2")]
        watch: Option<f64>,
    },
    /// Make the trace of a run recorded with NCCL_SCOREP_MODE=deferred, after the run.
    ///
    /// Replays <run-dir>/recordings/*.ncclrec through the plugin (one process per
    /// recording, with the recorded times and hosts), which writes and merges the trace as
    /// in a live run: <run-dir>/traces.otf2. The NCCL_SCOREP_* variables set now shape
    /// the trace (docs/record.md). Exit status: 0 with a trace, 2 when there is nothing to
    /// convert, 1 when the conversion failed.
    Convert {
        /// The run directory of the deferred run (NCCL_SCOREP_OUTPUT_DIR).
        run_dir: std::path::PathBuf,
        /// The plugin library, when it is not installed beside this tool.
        #[arg(long, value_name = "PATH")]
        plugin: Option<std::path::PathBuf>,
    },
    /// Join the trace parts of a run's processes (<run-dir>/parts/*/traces.otf2) into one
    /// OTF2 archive, <run-dir>/traces.otf2, that Vampir opens.
    ///
    /// Definitions are unified and mapped; events are linked, not rewritten. Parts without
    /// traces.otf2 (a killed process) are merged with the events they had flushed, from
    /// their saved definitions, and reported. An earlier merged archive is replaced.
    Merge {
        /// The directory the processes wrote their parts to (NCCL_SCOREP_OUTPUT_DIR).
        run_dir: std::path::PathBuf,
        /// Where to write traces.otf2, traces.def and traces/ (default: the run directory;
        /// with --scorep, <experiment-dir>/nccl-combined).
        #[arg(long)]
        output: Option<std::path::PathBuf>,
        /// The directory is a Score-P experiment directory: add the NCCL parts of
        /// <experiment-dir>/nccl/parts to Score-P's traces.otf2 in a combined archive, on
        /// Score-P's clock (docs/scorep-merge.md). Score-P's files are left as they are.
        #[arg(long)]
        scorep: bool,
        /// With --scorep: print the report as JSON.
        #[arg(long, requires = "scorep")]
        json: bool,
        /// Only the parts of this job, as the processes recorded them in
        /// <run-dir>/merge.ledger (what the job's last process runs at its end).
        #[arg(long, value_name = "ID", conflicts_with = "scorep")]
        job: Option<String>,
        /// Merge every part in the directory, also when they belong to different jobs (by
        /// default a directory holding parts of several jobs is refused).
        #[arg(long, conflicts_with_all = ["scorep", "job"])]
        all: bool,
        /// Do not write the CUBE4 profile (profile.cubex) beside the merged trace.
        #[arg(long, conflicts_with = "scorep")]
        no_profile: bool,
        /// Keep each host's clock as it is (trust NTP): do not align the hosts' clocks
        /// from the job's collectives and messages (docs/merge.md).
        #[arg(long, conflicts_with = "scorep")]
        no_clock_alignment: bool,
        /// Read every event file whole and walk its records before merging it, instead of
        /// comparing it with the length its process listed (docs/merge.md).
        #[arg(long, conflicts_with = "scorep")]
        check_records: bool,
    },
    /// Compare two runs per communicator, operation and size bucket: time per call, bus
    /// bandwidth, wait for the last rank, the change and a verdict (docs/profile.md).
    ///
    /// A change is a regression only when the median time per call moves by more than the
    /// threshold and a Mann-Whitney test of the two runs' calls says it is not noise.
    Compare {
        /// Run A (the reference): a run directory, a merged trace's anchor file, or a
        /// profile (.cubex).
        a: std::path::PathBuf,
        /// Run B.
        b: std::path::PathBuf,
        /// Where to write the difference cube B - A (default: <A>-vs-<B>.cubex in the
        /// current directory).
        #[arg(long, value_name = "FILE", conflicts_with = "no_diff")]
        diff: Option<std::path::PathBuf>,
        /// Do not write the difference cube.
        #[arg(long)]
        no_diff: bool,
        /// The smallest change of the median time per call that counts, in percent.
        #[arg(long, default_value_t = compare::DEFAULT_THRESHOLD * 100.0)]
        threshold: f64,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
        /// Exit with status 1 when a regression is found.
        #[arg(long)]
        fail_on_regression: bool,
        #[command(flatten)]
        threads: ReadingThreads,
    },
    /// Write the CUBE4 profile of a job's merged trace, for Cube and Scalasca:
    /// metrics (time split into host, stream execution, GPU kernel and proxy time; the
    /// wait for the last rank; visits; bytes) × call paths × locations (docs/profile.md).
    Profile {
        /// The run directory (its traces.otf2), or an archive's anchor file.
        path: std::path::PathBuf,
        /// Where to write the profile (default: profile.cubex beside the trace).
        #[arg(short, long)]
        output: Option<std::path::PathBuf>,
        #[command(flatten)]
        threads: ReadingThreads,
    },
    /// Write a job's merged trace as Chrome trace-event JSON for Perfetto UI and
    /// chrome://tracing: a process per rank, a thread per location, a slice per interval
    /// with its attributes, flows for messages and PXN links (docs/export.md).
    ///
    /// Exit status: 0 when written, 2 when the trace cannot be found or opened, 1 for
    /// other failures. A trace (or --window) with more than --max-events slice events is
    /// cut at the time where they run out, and a message on stderr says where.
    Export(export::Args),
    /// Write a job's merged trace as one self-contained HTML page with plots, that opens
    /// offline (docs/report.md).
    ///
    /// The summary's tables, bus bandwidth vs message size, the ranks' arrival skew, an
    /// interactive timeline of the slowest collective, point-to-point bytes rank to rank,
    /// and where each process's time went; --png DIR also writes each plot as a PNG.
    ///
    /// Exit status: 0 when written, 2 when the trace cannot be found or opened, 1 for
    /// other failures.
    Report(report::Args),
    /// Check an OTF2 trace: references resolve, time never goes back, Enter/Leave nest,
    /// collectives pair up, event counts match the definitions (docs/validate.md).
    ///
    /// Exit status: 0 when there is no error (warnings allowed), 1 when there are errors,
    /// 2 when the archive cannot be opened.
    Validate {
        /// The archive's anchor file (traces.otf2), or the directory that holds it.
        archive: std::path::PathBuf,
        /// Print a JSON summary instead of the text report.
        #[arg(long)]
        json: bool,
        /// Locations read per opening of the archive. One location's files are open at a
        /// time whatever it is; a batch's mapping tables stay in memory until it is done.
        #[arg(long, value_name = "LOCATIONS", default_value_t = validate::DEFAULT_BATCH,
              value_parser = clap::value_parser!(u32).range(1..))]
        batch: u32,
    },
    /// Write the manual pages or a shell's completions (used when installing).
    #[command(hide = true)]
    Generate {
        #[command(subcommand)]
        what: generate::What,
    },
}

/// What `run` and `exec` share.
#[derive(Debug, clap::Args)]
struct LaunchArgs {
    /// The experiment directory (default: nccl-scorep-<date>_<time>_<job id> in the working
    /// directory). It must not exist, or be empty.
    #[arg(short, long, value_name = "DIR")]
    output: Option<std::path::PathBuf>,
    /// What to record: NCCL_SCOREP_EVENTS for the job (docs/configuration.md).
    #[arg(long, value_name = "LIST")]
    events: Option<String>,
    /// The plugin library, when it is not installed beside this tool.
    #[arg(long, value_name = "PATH")]
    plugin: Option<std::path::PathBuf>,
}

impl LaunchArgs {
    fn settings(self) -> launch::Settings {
        launch::Settings {
            output: self.output,
            events: self.events,
            plugin: self.plugin,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Generate { what } => generate::run(
            what,
            <Cli as clap::CommandFactory>::command(),
            &version_text(),
        ),
        Command::Run { launch, command } => {
            return match launch::run(&launch.settings(), &command) {
                Ok(code) => code,
                Err(error) => {
                    eprintln!("nccl-scorep run: {error}");
                    ExitCode::from(2)
                }
            };
        }
        Command::Convert { run_dir, plugin } => {
            return convert::main(&run_dir, plugin.as_deref());
        }
        Command::Exec { launch, command } => {
            let error = launch::exec(&launch.settings(), &command);
            eprintln!("nccl-scorep exec: {error}");
            return ExitCode::from(2);
        }
        Command::Doctor { variables } => {
            let stdout = io::stdout();
            let mut out = stdout.lock();
            if variables {
                doctor::variables(&mut out)
            } else {
                doctor::run(&mut out, &version_text())
            }
            .and_then(|()| out.flush())
        }
        Command::Summary { run_dir, json, csv } => {
            let format = match (json, csv) {
                (true, _) => summary::Format::Json,
                (_, true) => summary::Format::Csv,
                _ => summary::Format::Text,
            };
            return summary::main(&run_dir, format);
        }
        Command::Status {
            run_dir,
            json,
            watch,
        } => return status::main(&run_dir, json, watch),
        Command::Merge {
            run_dir,
            output,
            scorep: true,
            json,
            ..
        } => match nccl_scorep_merge::scorep::merge_scorep(&run_dir, output.as_deref()) {
            Ok(report) => {
                let text = if json {
                    serde_json::to_string_pretty(&report).map_err(io::Error::from)
                } else {
                    Ok(nccl_scorep_merge::scorep::render(&report))
                };
                text.and_then(|text| {
                    let mut out = io::stdout().lock();
                    writeln!(out, "{text}").and_then(|()| out.flush())
                })
            }
            Err(error) => {
                eprintln!("nccl-scorep merge --scorep: {error}");
                return ExitCode::FAILURE;
            }
        },
        Command::Compare {
            a,
            b,
            diff,
            no_diff,
            threshold,
            json,
            fail_on_regression,
            threads,
        } => {
            if !(0.0..1000.0).contains(&threshold) {
                eprintln!("nccl-scorep compare: --threshold is a percentage between 0 and 1000");
                return ExitCode::from(2);
            }
            let diff = (!no_diff).then(|| diff.unwrap_or_else(|| compare::runs::diff_name(&a, &b)));
            let bar = ProgressBar::for_profile();
            let comparison = compare::runs::run(
                &a,
                &b,
                threshold / 100.0,
                diff.as_deref(),
                threads.get(),
                &|done, total| bar.show("reading", done, total),
            );
            bar.finish();
            let comparison = match comparison {
                Ok(comparison) => comparison,
                Err(error) => {
                    eprintln!("nccl-scorep compare: {error}");
                    return ExitCode::FAILURE;
                }
            };
            let text = if json {
                serde_json::to_string_pretty(&comparison).map_err(io::Error::from)
            } else {
                Ok(compare::render(&comparison))
            };
            let written = text.and_then(|text| {
                let mut out = io::stdout().lock();
                writeln!(out, "{text}").and_then(|()| out.flush())
            });
            if fail_on_regression && comparison.regressions > 0 && written.is_ok() {
                return ExitCode::from(1);
            }
            written
        }
        Command::Profile {
            path,
            output,
            threads,
        } => {
            let bar = ProgressBar::for_profile();
            let written =
                profile::write_profile(&path, output.as_deref(), threads.get(), &|done, total| {
                    bar.show("reading", done, total)
                });
            bar.finish();
            match written {
                Ok((profile, target)) => {
                    let mut out = io::stdout().lock();
                    writeln!(out, "{}", profile::describe(&profile, &target))
                        .and_then(|()| out.flush())
                }
                Err(error) => {
                    eprintln!("nccl-scorep profile: {error}");
                    return ExitCode::FAILURE;
                }
            }
        }
        Command::Merge {
            run_dir,
            output,
            job,
            all,
            no_profile,
            no_clock_alignment,
            check_records,
            ..
        } => {
            if !all {
                if let Err(error) = one_job_only(&run_dir, job.as_deref()) {
                    eprintln!("nccl-scorep merge: {error}");
                    return ExitCode::from(2);
                }
            }
            let job_parts = match job.map(|id| parts_of_job(&run_dir, &id)).transpose() {
                Ok(parts) => parts,
                Err(error) => {
                    eprintln!("nccl-scorep merge: {error}");
                    return ExitCode::FAILURE;
                }
            };
            let bar = ProgressBar::for_merge();
            let options = nccl_scorep_merge::MergeOptions {
                output: output.as_deref(),
                only_parts: job_parts.as_deref(),
                progress: Some(&|step| bar.show_merge(step)),
                keep_host_clocks: no_clock_alignment,
                check_event_files: if check_records {
                    nccl_scorep_merge::EventFileCheck::Records
                } else {
                    nccl_scorep_merge::EventFileCheck::Quick
                },
            };
            let merged = nccl_scorep_merge::merge_with(&run_dir, &options);
            bar.finish();
            match merged {
                Ok(report) => {
                    let archive = output.as_deref().unwrap_or(&run_dir);
                    let profiled = (!no_profile).then(|| {
                        release_freed_memory();
                        profile::write_profile(archive, None, None, &|_, _| {})
                            .map(|(profile, target)| profile::describe(&profile, &target))
                    });
                    let mut out = io::stdout().lock();
                    let written = writeln!(out, "{}", nccl_scorep_merge::render(&report));
                    match profiled {
                        Some(Ok(line)) => written.and_then(|()| writeln!(out, "{line}")),
                        Some(Err(error)) => {
                            // The trace is merged; a profile that failed is said, not fatal.
                            eprintln!("nccl-scorep merge: no profile: {error}");
                            written
                        }
                        None => written,
                    }
                    .and_then(|()| out.flush())
                }
                Err(error) => {
                    eprintln!("nccl-scorep merge: {error}");
                    // Like validate: 2 when there is nothing to open, 1 when merging failed.
                    let unreadable = !nccl_scorep_common::RunDir::new(&run_dir)
                        .parts_dir()
                        .is_dir();
                    return if unreadable {
                        ExitCode::from(2)
                    } else {
                        ExitCode::FAILURE
                    };
                }
            }
        }
        Command::Export(args) => return export::main(&args),
        Command::Report(args) => return report::main(&args),
        Command::Validate {
            archive,
            json,
            batch,
        } => match validate::validate(&archive, batch as usize) {
            Ok(report) => {
                let text = if json {
                    serde_json::to_string_pretty(&report).map_err(io::Error::from)
                } else {
                    Ok(validate::render(&report))
                };
                let written = text.and_then(|text| {
                    let mut out = io::stdout().lock();
                    writeln!(out, "{text}").and_then(|()| out.flush())
                });
                match written {
                    Err(error) if error.kind() != io::ErrorKind::BrokenPipe => Err(error),
                    // The verdict is the exit status, also when `| head` stopped reading.
                    _ if !report.valid => return ExitCode::from(1),
                    _ => Ok(()),
                }
            }
            Err(error) => {
                eprintln!("nccl-scorep validate: {error}");
                return ExitCode::from(2);
            }
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `nccl-scorep doctor | head` closes the pipe early; that is not a failure.
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("nccl-scorep: cannot write the report: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The parts of job `id` in the run directory's merge ledger: those its processes
/// finished, or, when none is recorded finished (no automatic merge, or every process
/// killed), those they began.
fn parts_of_job(run_dir: &std::path::Path, id: &str) -> Result<Vec<String>, String> {
    use nccl_scorep_common::ledger;
    let run = nccl_scorep_common::RunDir::new(run_dir);
    let path = run.merge_ledger();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut parts = ledger::JobEntries::read(&text, id).parts;
    if parts.is_empty() {
        parts = ledger::job_of_parts(&text)
            .into_iter()
            .filter(|(_, job)| job == id)
            .map(|(part, _)| part)
            .collect();
    }
    if parts.is_empty() {
        return Err(format!(
            "{} records no part of job {id:?} (jobs there: {})",
            path.display(),
            ledger::jobs(&text).join(", ")
        ));
    }
    Ok(parts)
}

/// Refuses a merge of a directory that holds the parts of several jobs (unless one is
/// chosen with `--job`): a reused output directory must not yield one trace of two runs.
/// The ledger says which job each part began in; parts it does not name (written with
/// an older plugin) count as one more job when others are named.
fn one_job_only(run_dir: &std::path::Path, job: Option<&str>) -> Result<(), String> {
    let run = nccl_scorep_common::RunDir::new(run_dir);
    let Ok(parts) = run.parts() else {
        // No parts directory: the merge says so itself.
        return Ok(());
    };
    if job.is_some() {
        return Ok(());
    }
    let text = std::fs::read_to_string(run.merge_ledger()).unwrap_or_default();
    let owners = nccl_scorep_common::ledger::job_of_parts(&text);
    let mut jobs: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for part in &parts {
        let job = owners
            .get(part.name())
            .map_or("(none recorded)", String::as_str);
        *jobs.entry(job).or_default() += 1;
    }
    if jobs.len() <= 1 {
        return Ok(());
    }
    let listed: Vec<String> = jobs
        .iter()
        .map(|(job, parts)| format!("{job} ({parts} part{})", if *parts == 1 { "" } else { "s" }))
        .collect();
    Err(format!(
        "{} holds the parts of {} jobs: {}; merge one with --job ID, or all of them into one \
         trace with --all (nccl-scorep run gives every run its own directory)",
        run_dir.display(),
        jobs.len(),
        listed.join(", ")
    ))
}

/// Hands the memory the merge freed back to the system before the profile's threads take
/// their own: glibc keeps freed memory in the heap of the thread that freed it, and the
/// merge's peak and the profile's would otherwise add up.
fn release_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only hands glibc's free pages back to the kernel; it takes no
    // pointer and touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How many threads read a trace (`profile`, `compare`).
#[derive(clap::Args, Debug)]
struct ReadingThreads {
    /// Threads that read a trace (default: one per CPU, at most 8, each with at least
    /// 256 of the trace's locations).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: Option<u16>,
}

impl ReadingThreads {
    fn get(&self) -> Option<usize> {
        self.threads.map(usize::from)
    }
}

/// A progress bar on stderr for long merges and profiles (drawn only on a terminal, and
/// only for work big enough to take a while).
struct ProgressBar {
    bar: indicatif::ProgressBar,
    min_total: u64,
}

impl ProgressBar {
    fn new(template: &str, min_total: u64) -> ProgressBar {
        let bar = indicatif::ProgressBar::hidden();
        bar.set_style(
            indicatif::ProgressStyle::with_template(template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        ProgressBar { bar, min_total }
    }

    /// A merge's bar: merges of fewer than 16 parts are over before a bar would help.
    fn for_merge() -> ProgressBar {
        ProgressBar::new("{msg:8} [{bar:40}] {pos}/{len} parts", 16)
    }

    /// A profile's bar, for traces of a million events or more.
    fn for_profile() -> ProgressBar {
        ProgressBar::new("{msg:8} [{bar:40}] {percent}% of the events", 1 << 20)
    }

    fn show(&self, message: &'static str, done: u64, total: u64) {
        // Nothing to show before the total is known (a first frame of 0/0).
        if total < self.min_total.max(1) {
            return;
        }
        if self.bar.is_hidden() {
            self.bar
                .set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
        self.bar.set_message(message);
        self.bar.set_length(total);
        self.bar.set_position(done);
    }

    fn show_merge(&self, step: nccl_scorep_merge::Progress) {
        use nccl_scorep_merge::Progress;
        let (message, done, total) = match step {
            Progress::Reading { done, total } => ("reading", done, total),
            Progress::Linking { done, total } => ("linking", done, total),
        };
        self.show(message, done as u64, total as u64);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
