//! The automatic merge at the end of a job: the last process to finish joins the trace
//! parts of all processes into `<output dir>/traces.otf2`, so the user finds one archive
//! in the run directory when the job ends.
//!
//! Who is last is decided through a ledger, `<output dir>/merge.ledger`, written under an
//! exclusive `flock` on `<output dir>/merge.lock` (released by the kernel if a process dies
//! holding it). Each line is one of
//!
//! - `part TAB <job id> TAB <rank> TAB <part>`: a part is complete on disk;
//! - `done TAB <job id> TAB <rank>`: the process is done with NCCL for now: its last
//!   communicator was finalized (`ncclCommDestroy`), or it exits with communicators alive;
//! - `merged TAB <job id> TAB <number of parts>`: a merge of the job's parts.
//!
//! The process that finds every rank of its job `done` (job size and id from the
//! launcher, see [`crate::job`]), with parts added since the job's last merge, merges the
//! job's parts, and only those: parts an earlier job left in the same directory stay out.
//! A job whose processes destroy all their communicators and create new ones (a new part
//! each time) is merged again each time all of them are done, the last merge holding
//! every part; most jobs keep their communicators and are merged once.
//!
//! A job with a killed process never completes the ledger, so nothing is merged
//! automatically; `nccl-scorep merge <dir>` then merges what there is and reports the
//! killed process's part as incomplete. The merge runs in the last process's last
//! `ncclCommDestroy` (or at its exit) and takes about as long as `nccl-scorep merge`,
//! which grows with the number of locations, not events (docs/performance.md).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::job::Job;
use crate::log;

const LOCK_FILE: &str = "merge.lock";
const LEDGER_FILE: &str = "merge.ledger";
/// The merge's report, for the parts it left out and why.
pub const REPORT_FILE: &str = "merge-report.txt";

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

/// Called once this process's part (`anchor`: `<output_dir>/parts/<part>/traces.otf2`) is
/// complete on disk: records it in the ledger. Problems are logged, never raised.
pub fn part_finished(output_dir: &Path, anchor: &Path) {
    let Some(part) = anchor
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
    else {
        return;
    };
    let Some(job) = this_job(output_dir) else {
        return;
    };
    let line = format!(
        "part\t{}\t{}\t{}\n",
        field(&job.job_id),
        job.rank,
        field(&part)
    );
    if let Err(problem) = with_ledger(output_dir, |ledger| append(ledger, &line)) {
        log::warn(&format!(
            "cannot record the trace part for the automatic merge: {problem}"
        ));
    }
}

/// Called when this process is done with NCCL (its last finalize, or its exit with
/// communicators alive): records that and, if it is the last of its job, merges. Problems
/// are logged with the command that merges by hand, never raised.
pub fn process_done(output_dir: &Path) {
    let Some(job) = this_job(output_dir) else {
        return;
    };
    let by_hand = format!("run `nccl-scorep merge {}`", output_dir.display());
    // On a thread of its own: thread-local values the merge creates (ours, OTF2's) must be
    // dropped while the library is loaded, not when the application's thread ends, maybe
    // long after NCCL unloaded the library.
    let dir = output_dir.to_path_buf();
    let merged = std::thread::Builder::new()
        .name("nccl-scorep-merge".into())
        .spawn(move || record_done_and_merge(&dir, &job))
        .map_err(|e| format!("cannot start the merge thread: {e}"))
        .and_then(|thread| {
            thread
                .join()
                .unwrap_or_else(|_| Err("the merge failed (internal error)".into()))
        });
    match merged {
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
            output_dir.join("traces.otf2").display(),
            output_dir.join(REPORT_FILE).display()
        )),
        Err(problem) => log::warn(&format!("automatic merge failed: {problem}; {by_hand}")),
    }
}

/// The launcher's view of this job, if this process wrote a part (a process that never
/// did has nothing to merge).
fn this_job(output_dir: &Path) -> Option<Job> {
    if !output_dir.join("parts").is_dir() {
        return None;
    }
    match Job::detect() {
        Ok(job) => Some(job),
        Err(problem) => {
            log::warn(&format!(
                "no automatic merge: the launcher's variables do not describe the job \
                 ({problem}); run `nccl-scorep merge {}`",
                output_dir.display()
            ));
            None
        }
    }
}

/// Runs `f` on the ledger, opened for reading and appending, under the lock.
fn with_ledger<R>(
    output_dir: &Path,
    f: impl FnOnce(&mut File) -> std::io::Result<R>,
) -> Result<R, String> {
    let lock_path = output_dir.join(LOCK_FILE);
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
    let _held =
        Flock::exclusive(&lock).map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    let ledger_path = output_dir.join(LEDGER_FILE);
    let mut ledger = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&ledger_path)
        .map_err(|e| format!("cannot open {}: {e}", ledger_path.display()))?;
    f(&mut ledger).map_err(|e| format!("{}: {e}", ledger_path.display()))
}

/// Appends `done` for this process and merges if the job is complete, all under the lock.
pub fn record_done_and_merge(output_dir: &Path, job: &Job) -> Result<Outcome, String> {
    let job_id = field(&job.job_id);
    let mut merged = Ok(Outcome::UpToDate);
    with_ledger(output_dir, |ledger| {
        append(ledger, &format!("done\t{job_id}\t{}\n", job.rank))?;
        let mut text = String::new();
        ledger.seek(SeekFrom::Start(0))?;
        ledger.read_to_string(&mut text)?;
        let state = JobState::from_ledger(&text, &job_id);
        if state.done.len() < job.size {
            merged = Ok(Outcome::Waiting {
                ranks_finished: state.done.len(),
                size: job.size,
            });
            return Ok(());
        }
        if state.parts.len() <= state.merged_parts {
            return Ok(());
        }
        merged = merge_job(output_dir, &state.parts);
        if merged.is_ok() {
            append(
                ledger,
                &format!("merged\t{job_id}\t{}\n", state.parts.len()),
            )?;
        }
        Ok(())
    })?;
    merged
}

fn merge_job(output_dir: &Path, parts: &[String]) -> Result<Outcome, String> {
    let options = nccl_scorep_merge::MergeOptions {
        only_parts: Some(parts),
        ..Default::default()
    };
    let report = nccl_scorep_merge::merge_with(output_dir, &options)?;
    let report_path = output_dir.join(REPORT_FILE);
    if let Err(e) = std::fs::write(&report_path, nccl_scorep_merge::render(&report) + "\n") {
        log::warn(&format!("cannot write {}: {e}", report_path.display()));
    }
    Ok(Outcome::Merged {
        parts: report.parts.len(),
    })
}

/// One job's entries in the ledger.
#[derive(Debug, Default, PartialEq)]
struct JobState {
    /// Ranks whose process is done.
    done: std::collections::BTreeSet<usize>,
    /// The job's parts, in the order they were finished.
    parts: Vec<String>,
    /// How many parts the job's last merge had.
    merged_parts: usize,
}

impl JobState {
    fn from_ledger(text: &str, job_id: &str) -> JobState {
        let mut state = JobState::default();
        for line in text.lines() {
            let fields: Vec<&str> = line.split('\t').collect();
            match fields.as_slice() {
                ["part", id, _rank, part]
                    if *id == job_id && !state.parts.iter().any(|p| p == part) =>
                {
                    state.parts.push((*part).to_owned());
                }
                ["done", id, rank] if *id == job_id => {
                    if let Ok(rank) = rank.parse() {
                        state.done.insert(rank);
                    }
                }
                ["merged", id, count] if *id == job_id => {
                    state.merged_parts = count.parse().unwrap_or(0);
                }
                // Other jobs' lines, and a line cut short by a process killed mid-write.
                _ => {}
            }
        }
        state
    }
}

/// A ledger field: no tab or newline.
fn field(text: &str) -> String {
    text.replace(['\t', '\n', '\r'], " ")
}

fn append(file: &mut File, line: &str) -> std::io::Result<()> {
    file.seek(SeekFrom::End(0))?;
    file.write_all(line.as_bytes())?;
    file.flush()
}

/// An exclusive `flock`, released on drop (and by the kernel when the process dies).
struct Flock<'a>(&'a File);

impl<'a> Flock<'a> {
    fn exclusive(file: &'a File) -> std::io::Result<Flock<'a>> {
        loop {
            // SAFETY: the descriptor is open for the life of `file`, which outlives the lock.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(Flock(file));
            }
            let error = std::io::Error::last_os_error();
            if error.kind() != std::io::ErrorKind::Interrupted {
                return Err(error);
            }
        }
    }
}

impl Drop for Flock<'_> {
    fn drop(&mut self) {
        // SAFETY: as above; unlocking a held lock has no other precondition.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_is_read_per_job() {
        let text = "part\told\t0\th.1\n\
                    done\told\t0\n\
                    part\tj\t0\th.10\n\
                    part\tj\t1\th.11\n\
                    done\tj\t1\n\
                    merged\tj\t2\n\
                    part\tj\t1\th.11.1\n\
                    part\tj\t1\th.11.1\n\
                    done\tj\tbroken\n\
                    part\tj\t0";
        let state = JobState::from_ledger(text, "j");
        assert_eq!(state.done.iter().copied().collect::<Vec<_>>(), [1]);
        assert_eq!(state.parts, ["h.10", "h.11", "h.11.1"]);
        assert_eq!(state.merged_parts, 2);
        assert_eq!(JobState::from_ledger(text, "other"), JobState::default());
    }

    #[test]
    fn fields_never_break_the_ledger() {
        assert_eq!(field("a\tb\nc"), "a b c");
    }
}
