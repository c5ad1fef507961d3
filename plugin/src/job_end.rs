//! The automatic merge at the end of a job: the last process to finish joins the trace
//! parts of all processes into `<output dir>/traces.otf2`, so the user finds one archive
//! in the run directory when the job ends.
//!
//! Who is last is decided through the ledger (`<output dir>/merge.ledger`, its format in
//! [`nccl_scorep_common::ledger`]), appended to under an exclusive `flock` on
//! `<output dir>/merge.lock` (released by the kernel if a process dies holding it).
//!
//! The process that finds every rank of its job `done` (job size and id from the
//! launcher, see [`nccl_scorep_common::job`]), with parts added since the job's last
//! merge, merges the job's parts, and only those: parts an earlier job left in the same
//! directory stay out. A job whose processes destroy all their communicators and create
//! new ones (a new part each time) is merged again each time all of them are done, the
//! last merge holding every part; most jobs keep their communicators and are merged once.
//!
//! The merge itself is `nccl-scorep merge <dir> --job <id>`, run as a child process while
//! the lock is held: the tool beside the plugin (`<dir of the plugin>/nccl-scorep`, as
//! Cargo builds them, or `<dir of the plugin>/../bin/nccl-scorep`, as they are installed),
//! else `NCCL_SCOREP_TOOL`, else `nccl-scorep` on PATH. A separate process keeps the
//! merge's memory, time and failures out of the application: whatever happens to the
//! merge, the application ends as it would have without us.
//!
//! A job with a killed process never completes the ledger, so nothing is merged
//! automatically; `nccl-scorep merge <dir>` then merges what there is and reports the
//! killed process's part as incomplete.

use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::log;
use nccl_scorep_common::flock::Flock;
use nccl_scorep_common::job::Job;
use nccl_scorep_common::ledger::{self, JobEntries};
use nccl_scorep_common::{safe_file, PartDir, RunDir};

/// The tool's file name.
const TOOL: &str = "nccl-scorep";

/// How the merge at the end of the job runs.
pub struct MergeSettings<'a> {
    /// `NCCL_SCOREP_TOOL`: the tool, when it is not beside the plugin or on PATH.
    pub tool: Option<&'a Path>,
    /// Write the CUBE4 profile beside the merged trace.
    pub profile: bool,
}

/// What happened after a part was finished.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Other processes of the job are not done yet.
    Waiting { ranks_finished: usize, size: usize },
    /// Every part of the job had been merged already.
    UpToDate,
    /// This process merged the job's parts.
    Merged { parts: usize },
}

/// Called when this process begins a part: records which job it belongs to. Problems are
/// logged, never raised.
pub fn part_begun(run_dir: &RunDir, part: &PartDir) {
    let Some(job) = this_job(run_dir) else {
        return;
    };
    let line = ledger::begin_line(&job.job_id, job.rank, part.name());
    if let Err(problem) = with_ledger(run_dir, |ledger| append(ledger, &line)) {
        log::warn(&format!(
            "cannot record the trace part in the ledger: {problem}"
        ));
    }
}

/// Called once this process's part (`anchor`: `<output_dir>/parts/<part>/traces.otf2`) is
/// complete on disk: records it in the ledger. Problems are logged, never raised.
pub fn part_finished(run_dir: &RunDir, anchor: &Path) {
    let Some(part) = PartDir::of_anchor(anchor) else {
        return;
    };
    let Some(job) = this_job(run_dir) else {
        return;
    };
    let line = ledger::part_line(&job.job_id, job.rank, part.name());
    if let Err(problem) = with_ledger(run_dir, |ledger| append(ledger, &line)) {
        log::warn(&format!(
            "cannot record the trace part for the automatic merge: {problem}"
        ));
    }
}

/// Called when this process is done with NCCL (its last finalize, or its exit with
/// communicators alive): records that and, if it is the last of its job, merges. Problems
/// are logged with the command that merges by hand, never raised.
pub fn process_done(run_dir: &RunDir, settings: &MergeSettings) {
    let Some(job) = this_job(run_dir) else {
        return;
    };
    let by_hand = format!("run `nccl-scorep merge {}`", run_dir.root().display());
    match record_done_and_merge(run_dir, &job, settings) {
        Ok(Outcome::Waiting {
            ranks_finished,
            size,
        }) => log::info(&format!(
            "{ranks_finished} of {size} processes of the job are done; the last one merges \
             the trace"
        )),
        Ok(Outcome::UpToDate) => {}
        Ok(Outcome::Merged { parts }) => log::info(&format!(
            "merged {parts} parts into {} (report: {})",
            run_dir.archive().display(),
            run_dir.merge_report().display()
        )),
        Err(problem) => log::warn(&format!("automatic merge failed: {problem}; {by_hand}")),
    }
}

/// The launcher's view of this job, if this process wrote a part (a process that never
/// did has nothing to merge).
fn this_job(run_dir: &RunDir) -> Option<Job> {
    if !run_dir.parts_dir().is_dir() {
        return None;
    }
    match Job::detect() {
        Ok(job) => Some(job),
        Err(problem) => {
            log::warn(&format!(
                "no automatic merge: the launcher's variables do not describe the job \
                 ({problem}); run `nccl-scorep merge {}`",
                run_dir.root().display()
            ));
            None
        }
    }
}

/// Runs `f` on the ledger, opened for reading and appending, under the lock.
fn with_ledger<R>(
    run_dir: &RunDir,
    f: impl FnOnce(&mut File) -> std::io::Result<R>,
) -> Result<R, String> {
    let lock_path = run_dir.merge_lock();
    let lock = safe_file::append(&lock_path)
        .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
    let _held =
        Flock::exclusive(&lock).map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    let ledger_path = run_dir.merge_ledger();
    let mut ledger = safe_file::read_append(&ledger_path)
        .map_err(|e| format!("cannot open {}: {e}", ledger_path.display()))?;
    f(&mut ledger).map_err(|e| format!("{}: {e}", ledger_path.display()))
}

/// Appends `done` for this process and merges if the job is complete, all under the lock.
pub fn record_done_and_merge(
    run_dir: &RunDir,
    job: &Job,
    settings: &MergeSettings,
) -> Result<Outcome, String> {
    let mut merged = Ok(Outcome::UpToDate);
    with_ledger(run_dir, |ledger| {
        append(ledger, &ledger::done_line(&job.job_id, job.rank))?;
        let mut text = String::new();
        ledger.seek(SeekFrom::Start(0))?;
        ledger.read_to_string(&mut text)?;
        let entries = JobEntries::read(&text, &ledger::field(&job.job_id));
        if entries.done.len() < job.size {
            merged = Ok(Outcome::Waiting {
                ranks_finished: entries.done.len(),
                size: job.size,
            });
            return Ok(());
        }
        if entries.parts.len() <= entries.merged_parts {
            return Ok(());
        }
        let this_job = ledger::field(&job.job_id);
        if let Some(other) = ledger::jobs(&text)
            .into_iter()
            .filter(|id| *id != this_job)
            .rfind(|id| JobEntries::read(&text, id).merged_parts > 0)
        {
            log::warn(&format!(
                "{} held the merged trace of another job ({other}); this job's merge replaces \
                 it (give every run a directory of its own: `nccl-scorep run`, or one \
                 NCCL_SCOREP_OUTPUT_DIR per job)",
                run_dir.root().display()
            ));
        }
        merged = merge_job(run_dir, &job.job_id, entries.parts.len(), settings);
        if merged.is_ok() {
            append(
                ledger,
                &ledger::merged_line(&job.job_id, entries.parts.len()),
            )?;
        }
        Ok(())
    })?;
    merged
}

/// Runs `nccl-scorep merge <run dir> --job <id>`, its report going to `merge-report.txt`.
fn merge_job(
    run_dir: &RunDir,
    job_id: &str,
    parts: usize,
    settings: &MergeSettings,
) -> Result<Outcome, String> {
    let tool = find_tool(settings.tool).ok_or_else(|| {
        format!(
            "the {TOOL} tool is neither beside the plugin ({}) nor named by NCCL_SCOREP_TOOL \
             nor on PATH",
            plugin_dir().map_or_else(|| "unknown".into(), |d| d.display().to_string())
        )
    })?;
    let report_path = run_dir.merge_report();
    let report = safe_file::create(&report_path)
        .map_err(|e| format!("cannot write {}: {e}", report_path.display()))?;
    let mut command = Command::new(&tool);
    command
        .arg("merge")
        .arg(run_dir.root())
        .arg("--job")
        .arg(ledger::field(job_id));
    if !settings.profile {
        command.arg("--no-profile");
    }
    let output = command
        // What preloads into the application (Score-P's measurement, say) must not measure
        // the tool too: its experiment would replace the application's.
        .env_remove("LD_PRELOAD")
        .env_remove("LD_AUDIT")
        .stdin(Stdio::null())
        .stdout(report)
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", tool.display()))?;
    let said = String::from_utf8_lossy(&output.stderr);
    let said = said.trim();
    if output.status.success() {
        // Merged; what the tool still had to say (a profile it could not write, say).
        if !said.is_empty() {
            log::warn(said);
        }
        return Ok(Outcome::Merged { parts });
    }
    Err(format!(
        "{} merge exited with {}{}",
        tool.display(),
        output.status,
        if said.is_empty() {
            String::new()
        } else {
            format!(": {said}")
        }
    ))
}

/// The tool that merges: beside the plugin (a Cargo build, or an installation's
/// `lib/../bin`), else as configured, else on PATH.
fn find_tool(setting: Option<&Path>) -> Option<PathBuf> {
    let beside = plugin_dir()
        .into_iter()
        .flat_map(|dir| [dir.join(TOOL), dir.join("../bin").join(TOOL)]);
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join(TOOL));
    beside
        .chain(setting.map(Path::to_path_buf))
        .chain(on_path)
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The directory this library was loaded from.
fn plugin_dir() -> Option<PathBuf> {
    // SAFETY: `Dl_info` is plain data; all-zero is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let here = plugin_dir as fn() -> Option<PathBuf> as *const libc::c_void;
    // SAFETY: `here` is an address inside this library; `info` is writable.
    if unsafe { libc::dladdr(here, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr succeeded, so `dli_fname` is the library's NUL-terminated path.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    let path = PathBuf::from(OsStr::from_bytes(name.to_bytes()));
    let path = std::fs::canonicalize(&path).unwrap_or(path);
    path.parent().map(Path::to_path_buf)
}

fn append(file: &mut File, line: &str) -> std::io::Result<()> {
    file.seek(SeekFrom::End(0))?;
    file.write_all(line.as_bytes())?;
    file.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tool_is_found_as_configured_when_not_beside_the_plugin() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("my-tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        // Not executable: not taken.
        let found = find_tool(Some(&tool));
        assert_ne!(found.as_deref(), Some(tool.as_path()));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Nothing named nccl-scorep is beside this test binary (target/<profile>/deps).
        assert_eq!(find_tool(Some(&tool)).as_deref(), Some(tool.as_path()));
    }
}
