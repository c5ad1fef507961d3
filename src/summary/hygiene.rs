//! Whether a run directory's merged `traces.otf2` holds all of its parts: parts written
//! after the merge, or finished after it according to the merge ledger, are not in it, and
//! a summary of the merged trace alone would leave them out without a word.

use nccl_scorep_common::RunDir;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::SystemTime;

/// Parts of the run directory not in its merged trace, as warnings that say how to merge
/// them (none when the directory has no merged trace or every part is in it).
pub(super) fn unmerged_parts(run: &RunDir) -> Vec<String> {
    let Ok(merged_at) = std::fs::metadata(run.archive()).and_then(|m| m.modified()) else {
        return Vec::new();
    };
    let parts = run.parts().unwrap_or_default();
    let mut missing = BTreeSet::new();
    // A part with a file written after the merged trace.
    for part in &parts {
        if newest(part.path()).is_some_and(|t| t > merged_at) {
            missing.insert(part.name().to_owned());
        }
    }
    // The ledger's account, when its last merge is the one that wrote the trace (a merge by
    // hand after it writes the trace later than the ledger).
    let ledger_path = run.merge_ledger();
    let ledger_time = std::fs::metadata(&ledger_path).and_then(|m| m.modified());
    if let (Ok(text), Ok(ledger_time)) = (std::fs::read_to_string(&ledger_path), ledger_time) {
        if ledger_time >= merged_at {
            let on_disk: BTreeSet<&str> = parts
                .iter()
                .filter(|p| p.anchor().is_file())
                .map(|p| p.name())
                .collect();
            missing.extend(not_in_last_merge(&text, &on_disk));
        }
    }
    if missing.is_empty() {
        return Vec::new();
    }
    const LISTED: usize = 8;
    let mut names: Vec<String> = missing.iter().take(LISTED).cloned().collect();
    if missing.len() > LISTED {
        names.push(format!("and {} more", missing.len() - LISTED));
    }
    vec![format!(
        "{} part(s) of {} are not in its traces.otf2 (written or finished after its merge): \
         {}; merge again to include them: nccl-scorep merge {}",
        missing.len(),
        run.root().display(),
        names.join(", "),
        run.root().display()
    )]
}

/// The parts the ledger `text` does not count in its last merge: parts of the merged job
/// beyond the number merged, parts of jobs recorded after that merge, and complete parts on
/// disk (`on_disk`) the ledger does not list at all (a job's merge takes its listed parts
/// only).
fn not_in_last_merge(text: &str, on_disk: &BTreeSet<&str>) -> BTreeSet<String> {
    let mut missing = BTreeSet::new();
    // (job, part) in the order the ledger lists them, and the last merge's job and count.
    let mut parts: Vec<(&str, &str)> = Vec::new();
    let mut last_merge: Option<(&str, usize, usize)> = None;
    for line in text.lines() {
        match line.split('\t').collect::<Vec<_>>().as_slice() {
            ["part", job, _rank, part] if !parts.contains(&(*job, *part)) => {
                parts.push((job, part));
            }
            ["merged", job, count] => {
                if let Ok(count) = count.parse() {
                    last_merge = Some((job, count, parts.len()));
                }
            }
            _ => {}
        }
    }
    let Some((job, count, seen)) = last_merge else {
        return missing;
    };
    // The merge took the first `count` parts its job had recorded.
    let mut of_job = 0;
    for (i, (part_job, part)) in parts.iter().enumerate() {
        if *part_job == job {
            of_job += 1;
            if of_job > count {
                missing.insert((*part).to_owned());
            }
        } else if i >= seen {
            missing.insert((*part).to_owned());
        }
    }
    let listed: BTreeSet<&str> = parts.iter().map(|(_, part)| *part).collect();
    missing.extend(
        on_disk
            .iter()
            .filter(|part| !listed.contains(*part))
            .map(|part| (*part).to_owned()),
    );
    missing
}

/// The latest modification time of the files under `dir`.
fn newest(dir: &Path) -> Option<SystemTime> {
    let mut latest = None;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(metadata) = entry.metadata() else {
                continue;
            };
            if metadata.is_dir() {
                stack.push(entry.path());
            } else if let Ok(time) = metadata.modified() {
                latest = latest.max(Some(time));
            }
        }
    }
    latest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&'static str]) -> BTreeSet<&'static str> {
        names.iter().copied().collect()
    }

    #[test]
    fn the_ledger_tells_the_parts_its_last_merge_left_out() {
        let text = "part\tj\t0\th.1\npart\tj\t1\th.2\nmerged\tj\t2\n\
                    part\tj\t1\th.2.1\npart\tk\t0\th.9\n";
        let missing = not_in_last_merge(text, &set(&["h.1", "h.2", "h.2.1", "h.9", "h.7"]));
        let missing: Vec<&str> = missing.iter().map(String::as_str).collect();
        assert_eq!(missing, ["h.2.1", "h.7", "h.9"]);
    }

    #[test]
    fn a_ledger_whose_last_merge_took_everything_leaves_nothing_out() {
        let text = "part\tj\t0\th.1\npart\tj\t1\th.2\ndone\tj\t0\nmerged\tj\t2\n";
        assert!(not_in_last_merge(text, &set(&["h.1", "h.2"])).is_empty());
        // No merge recorded: the ledger says nothing about the trace.
        assert!(not_in_last_merge("part\tj\t0\th.1\n", &set(&["h.5"])).is_empty());
    }
}
