//! The merge ledger, `<run dir>/merge.ledger`: the text in which the processes of a job
//! record their finished parts and that they are done, so that the last one merges, and
//! so that a merge by hand can take one job's parts only.
//!
//! Each line is one of
//!
//! - `begin TAB <job id> TAB <rank> TAB <part>`: a process began writing a part (so that
//!   even the part of a killed process is known to belong to its job);
//! - `part TAB <job id> TAB <rank> TAB <part>`: a part is complete on disk;
//! - `done TAB <job id> TAB <rank>`: the process is done with NCCL for now: its last
//!   communicator was finalized (`ncclCommDestroy`), or it exits with communicators alive;
//! - `merged TAB <job id> TAB <number of parts>`: a merge of the job's parts.
//!
//! The plugin appends under an exclusive `flock` on `merge.lock`; readers need no lock (a
//! line cut short by a killed process is ignored).

use std::collections::BTreeSet;

/// One job's entries in the ledger.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct JobEntries {
    /// Ranks whose process is done.
    pub done: BTreeSet<usize>,
    /// The job's parts, in the order they were finished.
    pub parts: Vec<String>,
    /// How many parts the job's last merge had.
    pub merged_parts: usize,
}

impl JobEntries {
    /// The entries of job `job_id` (as written, see [`field`]) in the ledger `text`.
    pub fn read(text: &str, job_id: &str) -> JobEntries {
        let mut entries = JobEntries::default();
        for line in text.lines() {
            let fields: Vec<&str> = line.split('\t').collect();
            match fields.as_slice() {
                ["part", id, _rank, part]
                    if *id == job_id && !entries.parts.iter().any(|p| p == part) =>
                {
                    entries.parts.push((*part).to_owned());
                }
                ["done", id, rank] if *id == job_id => {
                    if let Ok(rank) = rank.parse() {
                        entries.done.insert(rank);
                    }
                }
                ["merged", id, count] if *id == job_id => {
                    entries.merged_parts = count.parse().unwrap_or(0);
                }
                // Other jobs' lines, and a line cut short by a process killed mid-write.
                _ => {}
            }
        }
        entries
    }
}

/// The job each part in the ledger `text` belongs to (by its `begin` or `part` line).
pub fn job_of_parts(text: &str) -> std::collections::BTreeMap<String, String> {
    let mut jobs = std::collections::BTreeMap::new();
    for line in text.lines() {
        if let ["begin" | "part", id, _rank, part] = line.split('\t').collect::<Vec<_>>()[..] {
            jobs.entry(part.to_owned()).or_insert_with(|| id.to_owned());
        }
    }
    jobs
}

/// The job ids in the ledger `text`, in the order they first appear.
pub fn jobs(text: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for line in text.lines() {
        let mut fields = line.split('\t');
        if let (Some("begin" | "part" | "done" | "merged"), Some(id)) =
            (fields.next(), fields.next())
        {
            if !ids.iter().any(|known| known == id) {
                ids.push(id.to_owned());
            }
        }
    }
    ids
}

/// A ledger field: no tab or newline.
pub fn field(text: &str) -> String {
    text.replace(['\t', '\n', '\r'], " ")
}

/// The line that records a part begun.
pub fn begin_line(job_id: &str, rank: usize, part: &str) -> String {
    format!("begin\t{}\t{rank}\t{}\n", field(job_id), field(part))
}

/// The line that records a finished part.
pub fn part_line(job_id: &str, rank: usize, part: &str) -> String {
    format!("part\t{}\t{rank}\t{}\n", field(job_id), field(part))
}

/// The line that records a process done with NCCL.
pub fn done_line(job_id: &str, rank: usize) -> String {
    format!("done\t{}\t{rank}\n", field(job_id))
}

/// The line that records a merge of `parts` parts.
pub fn merged_line(job_id: &str, parts: usize) -> String {
    format!("merged\t{}\t{parts}\n", field(job_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_is_read_per_job() {
        let text = "begin\told\t0\th.1\n\
                    begin\tj\t0\th.10\n\
                    part\told\t0\th.1\n\
                    done\told\t0\n\
                    part\tj\t0\th.10\n\
                    part\tj\t1\th.11\n\
                    done\tj\t1\n\
                    merged\tj\t2\n\
                    part\tj\t1\th.11.1\n\
                    part\tj\t1\th.11.1\n\
                    done\tj\tbroken\n\
                    part\tj\t0";
        let entries = JobEntries::read(text, "j");
        assert_eq!(entries.done.iter().copied().collect::<Vec<_>>(), [1]);
        assert_eq!(entries.parts, ["h.10", "h.11", "h.11.1"]);
        assert_eq!(entries.merged_parts, 2);
        assert_eq!(JobEntries::read(text, "other"), JobEntries::default());
        assert_eq!(jobs(text), ["old", "j"]);
        let owners = job_of_parts(text);
        assert_eq!(owners["h.1"], "old");
        assert_eq!(owners["h.10"], "j");
        assert_eq!(owners["h.11.1"], "j");
    }

    #[test]
    fn fields_never_break_the_ledger() {
        assert_eq!(field("a\tb\nc"), "a b c");
        let text = part_line("j\t1", 3, "h.\n5") + &done_line("j\t1", 3) + &merged_line("j\t1", 1);
        let entries = JobEntries::read(&text, "j 1");
        assert_eq!(entries.parts, ["h. 5"]);
        assert_eq!(entries.done.iter().copied().collect::<Vec<_>>(), [3]);
        assert_eq!(entries.merged_parts, 1);
    }
}
