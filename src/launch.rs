//! `nccl-scorep run` and `nccl-scorep exec`: start a job with the plugin loaded, its
//! settings in the environment, and a new experiment directory for every run.
//!
//! `run -- <launcher and program…>` wraps the whole job (`mpirun`, `srun`, `torchrun` or a
//! plain program): it creates the directory, forwards the variables where the launcher
//! needs it (Open MPI's `-x`), writes `run.json`, waits, and then says where the trace is
//! and prints its summary — or, for a job that ended without merging, the command that
//! merges it. `exec -- <program…>` is the per-rank form (`mpirun -np 8 nccl-scorep exec --
//! ./app`): every rank of a job agrees on one directory through the launcher's job id,
//! sets the same variables and becomes the program.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Local, SecondsFormat};
use nccl_scorep_common::job::{file_name_safe, Job};
use nccl_scorep_common::provenance::{self, RUN_JSON_FILE, RUN_JSON_SCHEMA};
use nccl_scorep_common::safe_file;
use nccl_scorep_common::RunDir;
use serde::Serialize;

/// The prefix of an experiment directory's name, as Score-P's is `scorep-`.
pub const EXPERIMENT_PREFIX: &str = "nccl-scorep-";

/// What `run` and `exec` were asked for besides the command.
#[derive(Debug, Default)]
pub struct Settings {
    /// `-o DIR`: the experiment directory (must not exist, or be empty).
    pub output: Option<PathBuf>,
    /// `--events LIST`: `NCCL_SCOREP_EVENTS` for the job.
    pub events: Option<String>,
    /// `--plugin PATH`: the plugin library, when it is not installed beside the tool.
    pub plugin: Option<PathBuf>,
}

/// A problem that stops the launch (the job is not started).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LaunchError(String);

fn error(message: impl Into<String>) -> LaunchError {
    LaunchError(message.into())
}

/// What started the job's processes, as far as the variables have to reach them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Launcher {
    /// Open MPI's `mpirun`: variables reach other nodes only when named with `-x`.
    OpenMpi,
    /// Another MPI's `mpirun`/`mpiexec` (MPICH's Hydra, Intel MPI): they pass the whole
    /// environment.
    Mpi,
    /// Slurm's `srun`: passes the whole environment unless `--export` says otherwise.
    Slurm,
    /// `torchrun`: its workers inherit the environment.
    Torchrun,
    /// Anything else: one process, or a script that starts the job itself.
    Program,
}

impl Launcher {
    /// What `command` starts with. For `mpirun`/`mpiexec`, asks it which MPI it is.
    pub fn of(command: &[OsString]) -> Launcher {
        let Some(program) = command.first() else {
            return Launcher::Program;
        };
        let name = Path::new(program)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match name.as_str() {
            "mpirun" | "mpiexec" | "orterun" | "prterun" | "oshrun" => {
                let said = Command::new(program)
                    .arg("--version")
                    .stdin(std::process::Stdio::null())
                    .output()
                    .map(|out| {
                        String::from_utf8_lossy(&out.stdout).into_owned()
                            + &String::from_utf8_lossy(&out.stderr)
                    })
                    .unwrap_or_default();
                Launcher::of_mpi_version(&said)
            }
            "srun" => Launcher::Slurm,
            "torchrun" => Launcher::Torchrun,
            _ if name.starts_with("python")
                && command.windows(2).any(|pair| {
                    pair[0] == "-m"
                        && (pair[1] == "torch.distributed.run"
                            || pair[1] == "torch.distributed.launch")
                }) =>
            {
                Launcher::Torchrun
            }
            _ => Launcher::Program,
        }
    }

    /// Which MPI an `mpirun --version` text names.
    pub fn of_mpi_version(text: &str) -> Launcher {
        if ["Open MPI", "OpenRTE", "PRRTE", "prterun"]
            .iter()
            .any(|mark| text.contains(mark))
        {
            Launcher::OpenMpi
        } else {
            Launcher::Mpi
        }
    }

    /// `command` with what this launcher needs to pass `variables` to every process.
    pub fn forwarding(self, command: &[OsString], variables: &[&str]) -> Vec<OsString> {
        let mut out = Vec::with_capacity(command.len() + 2 * variables.len());
        match self {
            Launcher::OpenMpi => {
                out.extend(command.first().cloned());
                for name in variables {
                    out.push("-x".into());
                    out.push((*name).into());
                }
                out.extend(command.iter().skip(1).cloned());
            }
            Launcher::Slurm => {
                // `--export=NONE` or a list passes only what it names: add ours.
                for arg in command {
                    match arg.to_str().and_then(|a| a.strip_prefix("--export=")) {
                        Some(list) if !list.split(',').any(|item| item == "ALL") => {
                            let mut names: Vec<&str> =
                                list.split(',').filter(|item| *item != "NONE").collect();
                            names.extend(variables);
                            let kept = if list.split(',').any(|item| item == "NONE") {
                                // NONE with names still passes the names.
                                format!("--export=NONE,{}", names.join(","))
                            } else {
                                format!("--export={}", names.join(","))
                            };
                            out.push(kept.into());
                        }
                        _ => out.push(arg.clone()),
                    }
                }
            }
            Launcher::Mpi | Launcher::Torchrun | Launcher::Program => {
                out.extend(command.iter().cloned())
            }
        }
        out
    }
}

/// The variables a launched job gets: the plugin, where to write, the tool that merges,
/// and what to record when asked.
fn job_variables(
    settings: &Settings,
    plugin: &Path,
    dir: &Path,
) -> Result<Vec<(&'static str, OsString)>, LaunchError> {
    let tool = std::env::current_exe()
        .map_err(|e| error(format!("cannot tell where this tool is: {e}")))?;
    let mut variables = vec![
        ("NCCL_PROFILER_PLUGIN", plugin.as_os_str().to_owned()),
        ("NCCL_SCOREP_OUTPUT_DIR", dir.as_os_str().to_owned()),
        ("NCCL_SCOREP_TOOL", tool.into_os_string()),
    ];
    if let Some(events) = &settings.events {
        variables.push(("NCCL_SCOREP_EVENTS", events.into()));
    }
    Ok(variables)
}

/// The plugin library: `--plugin`, else the one installed beside the tool (a Cargo build
/// directory, or `<prefix>/bin` with the library in `<prefix>/lib`).
pub fn find_plugin(explicit: Option<&Path>) -> Result<PathBuf, LaunchError> {
    if let Some(path) = explicit {
        return absolute(path)
            .filter(|path| path.is_file())
            .ok_or_else(|| error(format!("--plugin {}: no such file", path.display())));
    }
    let tool = std::env::current_exe()
        .map_err(|e| error(format!("cannot tell where this tool is: {e}")))?;
    let bin = tool.parent().unwrap_or(Path::new("."));
    let candidates = [
        bin.join("libnccl-profiler-scorep.so"),
        bin.join("libnccl_profiler_scorep.so"),
        bin.join("../lib/libnccl-profiler-scorep.so"),
        bin.join("../lib64/libnccl-profiler-scorep.so"),
    ];
    candidates
        .iter()
        .find(|path| path.is_file())
        .map(|path| fs::canonicalize(path).unwrap_or_else(|_| path.clone()))
        .ok_or_else(|| {
            error(format!(
                "the plugin library is not installed beside this tool (looked for \
                 libnccl-profiler-scorep.so in {} and {}): give its path with --plugin",
                bin.display(),
                bin.join("../lib").display()
            ))
        })
}

fn absolute(path: &Path) -> Option<PathBuf> {
    std::path::absolute(path).ok()
}

/// An experiment directory's name: `nccl-scorep-<date>_<time>_<id>`, like Score-P's.
pub fn experiment_name(now: &DateTime<Local>, id: &str) -> String {
    format!(
        "{EXPERIMENT_PREFIX}{}_{}",
        now.format("%Y%m%d_%H%M"),
        file_name_safe(id)
    )
}

/// Creates the experiment directory: `explicit` (which must not exist, or be empty), else
/// a new `nccl-scorep-<date>_<time>_<id>` in the working directory (`.1`, `.2` … when that
/// name is taken: a run directory is never reused).
pub fn create_experiment_dir(
    explicit: Option<&Path>,
    now: &DateTime<Local>,
    id: &str,
) -> Result<PathBuf, LaunchError> {
    if let Some(dir) = explicit {
        let dir = absolute(dir).unwrap_or_else(|| dir.to_owned());
        let holds_something = fs::read_dir(&dir)
            .map(|mut entries| entries.next().is_some())
            .unwrap_or(false);
        if holds_something || (dir.exists() && !dir.is_dir()) {
            return Err(error(format!(
                "{} exists and is not an empty directory: a run never reuses one (remove it, \
                 or name another with -o)",
                dir.display()
            )));
        }
        safe_file::create_dirs(&dir)
            .map_err(|e| error(format!("cannot create {}: {e}", dir.display())))?;
        return Ok(dir);
    }
    let name = experiment_name(now, id);
    let cwd = std::env::current_dir()
        .map_err(|e| error(format!("cannot tell the working directory: {e}")))?;
    for n in 0..1000 {
        let candidate = if n == 0 {
            cwd.join(&name)
        } else {
            cwd.join(format!("{name}.{n}"))
        };
        match safe_file::create_dir(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(error(format!(
                    "cannot create {}: {e} (run from a writable directory, or name one with -o)",
                    candidate.display()
                )))
            }
        }
    }
    Err(error(format!(
        "{name}.1 … {name}.999 all exist in {}",
        cwd.display()
    )))
}

/// `run.json`: how the run was made (docs/launcher.md). The merge adds what the trace
/// itself records (NCCL version, profiler API version …) under `provenance`.
#[derive(Debug, Serialize)]
struct RunRecord {
    schema: &'static str,
    tool: String,
    /// The command as given.
    command: Vec<String>,
    /// The command as started (with the launcher's forwarding options).
    started: Vec<String>,
    launcher: Launcher,
    working_directory: String,
    host: String,
    /// Slurm's job id, when the run is inside an allocation.
    #[serde(skip_serializing_if = "Option::is_none")]
    slurm_job_id: Option<String>,
    /// `exec`: the job id every rank agreed on.
    #[serde(skip_serializing_if = "Option::is_none")]
    job_id: Option<String>,
    plugin: String,
    /// The `NCCL_SCOREP_*` variables and the NCCL variables that change its algorithms, as
    /// the job saw them.
    environment: std::collections::BTreeMap<String, String>,
    start: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    end: Option<String>,
    /// The job's exit status (`run`), absent when it was killed by a signal.
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_status: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<i32>,
    /// The merged trace's anchor file, relative to the directory, once it exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    trace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    profile: Option<String>,
    /// What the trace itself records, written by the merge (kept when run.json is
    /// written again).
    #[serde(skip_serializing_if = "Option::is_none")]
    provenance: Option<serde_json::Value>,
}

impl RunRecord {
    /// The record of a run that starts now.
    fn begun(
        command: &[OsString],
        started: &[OsString],
        launcher: Launcher,
        plugin: &Path,
        environment: std::collections::BTreeMap<String, String>,
        now: &DateTime<Local>,
    ) -> RunRecord {
        RunRecord {
            schema: RUN_JSON_SCHEMA,
            tool: format!("nccl-scorep {}", crate::version_text()),
            command: lossy(command),
            started: lossy(started),
            launcher,
            working_directory: std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            host: nccl_scorep_common::job::hostname(),
            slurm_job_id: None,
            job_id: None,
            plugin: plugin.display().to_string(),
            environment,
            start: timestamp(now),
            end: None,
            exit_status: None,
            signal: None,
            trace: None,
            profile: None,
            provenance: None,
        }
    }
}

/// Slurm's job id, inside an allocation.
fn slurm_job_id() -> Option<String> {
    std::env::var("SLURM_JOB_ID")
        .ok()
        .filter(|id| !id.is_empty())
}

fn lossy(args: &[OsString]) -> Vec<String> {
    args.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

fn timestamp(time: &DateTime<Local>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Millis, false)
}

/// Writes `run.json` in `dir` whole (a reader never sees half of it). `run.json` may
/// already hold the `provenance` the merge wrote: it is kept.
fn write_run_json(dir: &Path, record: &mut RunRecord) -> io::Result<()> {
    let path = dir.join(RUN_JSON_FILE);
    if record.provenance.is_none() {
        record.provenance = fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|old| old.get("provenance").cloned());
    }
    let text = serde_json::to_string_pretty(record).map_err(io::Error::from)? + "\n";
    nccl_scorep_common::safe_file::replace(&path, text.as_bytes())
}

/// `nccl-scorep run`: runs `command` as a traced job in a new experiment directory, and
/// reports on it. The exit code is the job's.
pub fn run(settings: &Settings, command: &[OsString]) -> Result<ExitCode, LaunchError> {
    if command.is_empty() {
        return Err(error(
            "no command: nccl-scorep run [OPTIONS] -- <launcher and program…>",
        ));
    }
    let plugin = find_plugin(settings.plugin.as_deref())?;
    if let Some(set) = std::env::var_os("NCCL_SCOREP_OUTPUT_DIR").filter(|d| !d.is_empty()) {
        eprintln!(
            "nccl-scorep run: NCCL_SCOREP_OUTPUT_DIR={} is not used: every run gets a \
             directory of its own (name it with -o)",
            set.to_string_lossy()
        );
    }
    let now = Local::now();
    let slurm_job_id = std::env::var("SLURM_JOB_ID")
        .ok()
        .filter(|id| !id.is_empty());
    let id = slurm_job_id
        .clone()
        .unwrap_or_else(|| std::process::id().to_string());
    let dir = create_experiment_dir(settings.output.as_deref(), &now, &id)?;
    let variables = job_variables(settings, &plugin, &dir)?;
    let launcher = Launcher::of(command);
    let names: Vec<&str> = variables.iter().map(|(name, _)| *name).collect();
    let started = launcher.forwarding(command, &names);

    let mut environment = provenance::recorded_environment_of_process();
    for (name, value) in &variables {
        environment.insert((*name).to_owned(), value.to_string_lossy().into_owned());
    }
    let mut record = RunRecord::begun(command, &started, launcher, &plugin, environment, &now);
    record.slurm_job_id = slurm_job_id;
    if let Err(e) = write_run_json(&dir, &mut record) {
        eprintln!(
            "nccl-scorep run: cannot write {}: {e}",
            dir.join(RUN_JSON_FILE).display()
        );
    }
    eprintln!("nccl-scorep run: experiment directory {}", dir.display());

    // Ctrl-C reaches the job and this tool alike: the tool stays to say what is left.
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(signal, Arc::clone(&interrupted));
    }
    let mut child = Command::new(&started[0]);
    child.args(&started[1..]);
    for (name, value) in &variables {
        child.env(name, value);
    }
    let status = child.status().map_err(|e| {
        error(format!(
            "cannot start {}: {e}",
            started[0].to_string_lossy()
        ))
    })?;

    record.end = Some(timestamp(&Local::now()));
    record.exit_status = status.code();
    record.signal = status.signal();
    let run_dir = RunDir::new(&dir);
    if deferred() && crate::convert::recordings_of(&dir).is_ok() {
        convert_after_the_job(&dir, &plugin);
    }
    let merged = run_dir.archive().is_file();
    if merged {
        record.trace = Some(nccl_scorep_common::run_dir::ANCHOR_FILE.to_owned());
        if run_dir.profile().is_file() {
            record.profile = Some(nccl_scorep_common::run_dir::PROFILE_FILE.to_owned());
        }
    }
    if let Err(e) = write_run_json(&dir, &mut record) {
        eprintln!(
            "nccl-scorep run: cannot write {}: {e}",
            dir.join(RUN_JSON_FILE).display()
        );
    }
    report(&run_dir, &status, interrupted.load(Ordering::Relaxed));
    Ok(exit_code(&status))
}

/// Whether the job only recorded its calls (`NCCL_SCOREP_MODE=deferred`), for a trace
/// made after it.
fn deferred() -> bool {
    let (config, _) = nccl_profiler_scorep::config::Config::from_env();
    config.mode == nccl_profiler_scorep::config::Mode::Deferred
}

/// A deferred run's trace: `nccl-scorep convert`, in a process of its own (the plugin is
/// loaded there, not into the launcher), whatever way the job ended: the recordings hold
/// what its processes did up to then.
fn convert_after_the_job(dir: &Path, plugin: &Path) {
    let tool = match std::env::current_exe() {
        Ok(tool) => tool,
        Err(e) => {
            eprintln!("nccl-scorep run: cannot tell where this tool is ({e}) to convert the recordings: run `nccl-scorep convert {}`", dir.display());
            return;
        }
    };
    let converted = Command::new(tool)
        .arg("convert")
        .arg(dir)
        .arg("--plugin")
        .arg(plugin)
        .stdout(std::process::Stdio::null())
        .status();
    match converted {
        Ok(status) if status.success() => {}
        Ok(_) => eprintln!(
            "nccl-scorep run: the recordings were not converted (see above); `nccl-scorep \
             convert {}` tries again",
            dir.display()
        ),
        Err(e) => eprintln!(
            "nccl-scorep run: cannot start the conversion ({e}): run `nccl-scorep convert {}`",
            dir.display()
        ),
    }
}

/// The exit code that passes the job's on: its status, or 128 + the signal that ended it.
fn exit_code(status: &ExitStatus) -> ExitCode {
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from(code.clamp(0, 255) as u8),
        (None, Some(signal)) => ExitCode::from((128 + signal).clamp(0, 255) as u8),
        (None, None) => ExitCode::FAILURE,
    }
}

/// "exit status 3", "killed by signal 9".
fn describe_status(status: &ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "status unknown".to_owned(),
    }
}

/// What the user needs after the job: where the trace is and its summary, or why there is
/// none and what to do.
fn report(run_dir: &RunDir, status: &ExitStatus, interrupted: bool) {
    let dir = run_dir.root().display();
    let has_parts = run_dir
        .parts()
        .map(|parts| !parts.is_empty())
        .unwrap_or(false);
    let mut out = io::stdout().lock();
    if run_dir.archive().is_file() {
        let _ = writeln!(out, "trace:   {} (Vampir)", run_dir.archive().display());
        if run_dir.profile().is_file() {
            let _ = writeln!(out, "profile: {} (Cube)", run_dir.profile().display());
        }
        let _ = out.flush();
        match crate::summary::summarize(run_dir.root()) {
            Ok(summary) => {
                let _ = writeln!(out, "\n{}", crate::summary::render(&summary));
            }
            Err(e) => eprintln!("nccl-scorep run: no summary: {e}"),
        }
    } else if has_parts {
        let why = if interrupted || !status.success() {
            "the job did not end normally"
        } else {
            "the job's processes did not all finish their part"
        };
        eprintln!(
            "nccl-scorep run: {why}, so its trace was not merged; merge what was written \
             with:\n    nccl-scorep merge {dir}"
        );
    } else if !status.success() {
        eprintln!(
            "nccl-scorep run: the job ended ({}) before any process wrote a trace in {dir}",
            describe_status(status)
        );
    } else {
        eprintln!(
            "nccl-scorep run: no trace was written in {dir}: NCCL did not load the plugin \
             (`nccl-scorep doctor` says what it would load), or the program made no NCCL \
             communicator"
        );
    }
    let _ = out.flush();
}

/// `nccl-scorep exec`: this process becomes `command` with the plugin's variables set, in
/// the experiment directory of its job (returns only on failure).
pub fn exec(settings: &Settings, command: &[OsString]) -> LaunchError {
    match prepare_exec(settings, command) {
        Ok(mut child) => {
            let e = child.exec();
            error(format!("cannot run {}: {e}", command[0].to_string_lossy()))
        }
        Err(e) => e,
    }
}

fn prepare_exec(settings: &Settings, command: &[OsString]) -> Result<Command, LaunchError> {
    if command.is_empty() {
        return Err(error(
            "no command: nccl-scorep exec [OPTIONS] -- <program…>",
        ));
    }
    let plugin = find_plugin(settings.plugin.as_deref())?;
    let job = Job::detect().unwrap_or_else(|_| Job::single());
    let inherited = std::env::var_os("NCCL_SCOREP_OUTPUT_DIR").filter(|d| !d.is_empty());
    let dir = match (&settings.output, inherited) {
        // Under `nccl-scorep run`, or told by the user: the directory is decided.
        (Some(dir), _) => shared_dir(dir)?,
        (None, Some(dir)) => shared_dir(Path::new(&dir))?,
        (None, None) => job_experiment_dir(&job)?,
    };
    if job.rank == 0 {
        let now = Local::now();
        let mut record = RunRecord::begun(
            command,
            command,
            Launcher::Program,
            &plugin,
            provenance::recorded_environment_of_process(),
            &now,
        );
        record.slurm_job_id = slurm_job_id();
        record.job_id = Some(job.job_id.clone());
        // Under `run`, run.json is run's.
        if !dir.join(RUN_JSON_FILE).exists() {
            if let Err(e) = write_run_json(&dir, &mut record) {
                eprintln!(
                    "nccl-scorep exec: cannot write {}: {e}",
                    dir.join(RUN_JSON_FILE).display()
                );
            }
        }
    }
    let mut child = Command::new(&command[0]);
    child.args(&command[1..]);
    for (name, value) in job_variables(settings, &plugin, &dir)? {
        child.env(name, value);
    }
    Ok(child)
}

/// A directory every rank writes to: created if missing (by whichever rank comes first).
fn shared_dir(dir: &Path) -> Result<PathBuf, LaunchError> {
    let dir = absolute(dir).unwrap_or_else(|| dir.to_owned());
    safe_file::create_dirs(&dir)
        .map_err(|e| error(format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir)
}

/// The experiment directory of `job`, found or created in the working directory: the
/// first rank to come creates `nccl-scorep-<date>_<time>_<job id>`, the others find it by
/// the job id (under a lock on the working directory, so two ranks starting in different
/// minutes still agree).
fn job_experiment_dir(job: &Job) -> Result<PathBuf, LaunchError> {
    let cwd = std::env::current_dir()
        .map_err(|e| error(format!("cannot tell the working directory: {e}")))?;
    let id = file_name_safe(&job.job_id);
    // Best effort: without the lock (a file system without flock) ranks still find a
    // directory another rank created before they looked.
    let cwd_file = File::open(&cwd).ok();
    let _lock = cwd_file
        .as_ref()
        .and_then(|file| nccl_scorep_common::flock::Flock::exclusive(file).ok());
    let suffix = format!("_{id}");
    let existing = fs::read_dir(&cwd).ok().and_then(|entries| {
        entries.filter_map(Result::ok).find_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            (name.starts_with(EXPERIMENT_PREFIX)
                && name.ends_with(&suffix)
                && entry.path().is_dir())
            .then(|| entry.path())
        })
    });
    match existing {
        Some(dir) => Ok(dir),
        None => create_experiment_dir(None, &Local::now(), &id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn names_are_like_scorep_and_safe_in_a_path() {
        let now = Local.with_ymd_and_hms(2026, 11, 26, 9, 5, 0).unwrap();
        assert_eq!(
            experiment_name(&now, "4242"),
            "nccl-scorep-20261126_0905_4242"
        );
        assert_eq!(
            experiment_name(&now, "openmpi:12/../x"),
            "nccl-scorep-20261126_0905_openmpi-12-..-x"
        );
    }

    #[test]
    fn open_mpi_gets_the_variables_with_x_and_srun_through_its_export_list() {
        let vars = ["NCCL_PROFILER_PLUGIN", "NCCL_SCOREP_OUTPUT_DIR"];
        let forwarded = Launcher::OpenMpi.forwarding(&os(&["mpirun", "-np", "4", "./app"]), &vars);
        assert_eq!(
            forwarded,
            os(&[
                "mpirun",
                "-x",
                "NCCL_PROFILER_PLUGIN",
                "-x",
                "NCCL_SCOREP_OUTPUT_DIR",
                "-np",
                "4",
                "./app"
            ])
        );
        let srun = Launcher::Slurm.forwarding(&os(&["srun", "--export=NONE", "./app"]), &vars);
        assert_eq!(
            srun,
            os(&[
                "srun",
                "--export=NONE,NCCL_PROFILER_PLUGIN,NCCL_SCOREP_OUTPUT_DIR",
                "./app"
            ])
        );
        let all = os(&["srun", "--export=ALL,X=1", "./app"]);
        assert_eq!(Launcher::Slurm.forwarding(&all, &vars), all);
        let plain = os(&["torchrun", "--nproc-per-node=8", "train.py"]);
        assert_eq!(Launcher::Torchrun.forwarding(&plain, &vars), plain);
    }

    #[test]
    fn the_mpi_is_told_by_its_version_text() {
        assert_eq!(
            Launcher::of_mpi_version("mpirun (Open MPI) 4.1.4\n"),
            Launcher::OpenMpi
        );
        assert_eq!(
            Launcher::of_mpi_version("HYDRA build details:\n    Version: 4.1\n"),
            Launcher::Mpi
        );
        assert_eq!(
            Launcher::of(&os(&["/usr/bin/srun", "-n2", "x"])),
            Launcher::Slurm
        );
        assert_eq!(
            Launcher::of(&os(&["python3", "-m", "torch.distributed.run", "t.py"])),
            Launcher::Torchrun
        );
        assert_eq!(Launcher::of(&os(&["./app"])), Launcher::Program);
    }

    #[test]
    fn a_directory_is_never_reused() {
        let dir = tempfile::tempdir().unwrap();
        let full = dir.path().join("full");
        fs::create_dir(&full).unwrap();
        fs::write(full.join("x"), "").unwrap();
        let now = Local::now();
        let refused = create_experiment_dir(Some(&full), &now, "1").unwrap_err();
        assert!(refused.0.contains("is not an empty directory"), "{refused}");
        let empty = dir.path().join("empty");
        fs::create_dir(&empty).unwrap();
        assert_eq!(
            create_experiment_dir(Some(&empty), &now, "1").unwrap(),
            empty
        );
    }
}
