//! Parts of processes that were killed: merged with the events they had written.
//!
//! While it writes its part, the plugin keeps the definitions made so far in
//! `<part>/snapshot/` (an archive without events) and the clock pairs for its clock offsets
//! in `<part>/snapshot.clock`, and it writes no event to the disk before the definitions
//! it refers to are in the snapshot. A killed process leaves those beside its event files,
//! which end after the records it had written (every second). The merge puts a readable
//! part together from them in a scratch directory:
//! - the snapshot's definitions and the clock offsets of `snapshot.clock`;
//! - each location's event file ended after its last record ([`event_file`]), then
//!   shortened to where its intervals were last all closed, so that the part nests like a
//!   finished one (the intervals still open when the process died have no end);
//! - an empty event file for a location that wrote nothing.
//!
//! Event files of locations created after the last snapshot have no definitions and are
//! left out, and so is whatever the process had not written yet: both are reported.

mod event_file;

pub(crate) use event_file::check_listed_event_file;
pub use event_file::EventFileCheck;

use std::path::{Path, PathBuf};

use otf2_sys::read::ClockOffset;

use super::{otf2, PartDefs};
use nccl_scorep_common::run_dir::{
    ANCHOR_FILE, EVENT_FILES_DIR, GLOBAL_DEFINITIONS_FILE, SNAPSHOT_CLOCK_FILE, SNAPSHOT_DIR,
};

/// A killed process's part, put together for the merge.
pub(crate) struct RecoveredPart {
    pub defs: PartDefs,
    /// The directory whose `traces/` holds its event files.
    pub dir: PathBuf,
    /// What was merged and what was lost, for the report.
    pub note: String,
}

/// Whether `part` is a killed process's part that [`recover_part`] can try.
pub(crate) fn has_snapshot(part: &Path) -> bool {
    part.join(SNAPSHOT_DIR).join(ANCHOR_FILE).exists()
}

/// The clock offsets in `<part>/snapshot.clock`.
fn snapshot_clock_offsets(part: &Path) -> Result<Vec<ClockOffset>, String> {
    let path = part.join(SNAPSHOT_CLOCK_FILE);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut offsets = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut fields = line.split_whitespace().map(str::parse::<u64>);
        match (fields.next(), fields.next(), fields.next()) {
            (Some(Ok(monotonic)), Some(Ok(realtime)), None) => offsets.push(ClockOffset {
                time: monotonic,
                offset: realtime as i64 - monotonic as i64,
                standard_deviation: 0.0,
            }),
            _ => return Err(format!("{}: unreadable line {line:?}", path.display())),
        }
    }
    offsets.sort_by_key(|o| o.time);
    offsets.dedup_by_key(|o| o.time);
    if offsets.is_empty() {
        return Err(format!("{} holds no clock pair", path.display()));
    }
    Ok(offsets)
}

/// Puts together the part of a process that did not finish it (see the module's notes)
/// in `scratch/<part name>`.
pub(crate) fn recover_part(part: &Path, scratch: &Path) -> Result<RecoveredPart, String> {
    let name = part
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let together = scratch.join(&name);
    let traces = together.join(EVENT_FILES_DIR);
    let fail = |what: &str, path: &Path, e: std::io::Error| {
        format!("cannot {what} {}: {e}", path.display())
    };
    nccl_scorep_common::safe_file::create_dirs(&traces).map_err(|e| fail("create", &traces, e))?;
    let snapshot = part.join(SNAPSHOT_DIR);
    for file in [ANCHOR_FILE, GLOBAL_DEFINITIONS_FILE] {
        std::fs::copy(snapshot.join(file), together.join(file))
            .map_err(|e| fail("copy", &snapshot.join(file), e))?;
    }
    let anchor = together.join(ANCHOR_FILE);
    let mut found = otf2::read_part(&anchor)?;
    let clock_offsets = snapshot_clock_offsets(part)?;
    let chunk = found.event_chunk.max(1);

    // End every event file after its last record.
    let mut wrote_nothing = Vec::new();
    let mut unreadable_chunks = 0;
    for location in found.defs.locations.iter() {
        let file = format!("{}.evt", location.id);
        let from = part.join(EVENT_FILES_DIR).join(&file);
        let ended = if from.exists() {
            event_file::end_written_file(&from, &traces.join(&file), chunk)?
        } else {
            event_file::EndedFile::default()
        };
        unreadable_chunks += ended.unreadable_chunks;
        if ended.events == 0 {
            wrote_nothing.push(location.id);
        }
    }
    let defined: std::collections::HashSet<String> = found
        .defs
        .locations
        .iter()
        .map(|l| format!("{}.evt", l.id))
        .collect();
    let undefined_files = std::fs::read_dir(part.join(EVENT_FILES_DIR))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.ends_with(".evt")
                        && !defined.contains(&name)
                        && e.metadata().is_ok_and(|m| m.len() > 0)
                })
                .count()
        })
        .unwrap_or(0);

    // Shorten each file to where its intervals were last all closed.
    let written: Vec<u64> = found
        .defs
        .locations
        .iter()
        .map(|l| l.id)
        .filter(|id| !wrote_nothing.contains(id))
        .collect();
    let scans = if written.is_empty() {
        Vec::new()
    } else {
        otf2::scan_events(&anchor, &written)?
    };
    let mut kept_events = 0;
    let mut unfinished_events = 0;
    let mut last_time = 0;
    for (&id, scan) in written.iter().zip(&scans) {
        let path = traces.join(format!("{id}.evt"));
        if scan.balanced == 0 {
            std::fs::remove_file(&path).map_err(|e| fail("remove", &path, e))?;
            wrote_nothing.push(id);
        } else if scan.balanced < scan.events {
            event_file::keep_first_events(&path, chunk, scan.balanced)?;
        }
        unfinished_events += scan.events - scan.balanced;
        kept_events += scan.balanced;
        last_time = last_time.max(scan.balanced_time);
        if let Some(location) = found.defs.locations.iter_mut().find(|l| l.id == id) {
            location.number_of_events = scan.balanced;
        }
    }
    if !wrote_nothing.is_empty() {
        let empty = otf2_sys::event_format::empty_event_file();
        for id in &wrote_nothing {
            let path = traces.join(format!("{id}.evt"));
            std::fs::write(&path, &empty).map_err(|e| fail("write", &path, e))?;
        }
        for location in found.defs.locations.iter_mut() {
            if wrote_nothing.contains(&location.id) {
                location.number_of_events = 0;
            }
        }
    }

    // The snapshot's time range ends at the snapshot; the events may go on after it.
    if let (Some(clock), Some(latest)) = (found.defs.clock.as_mut(), clock_offsets.last()) {
        let corrected_end = last_time.saturating_add_signed(latest.offset);
        clock.trace_length = clock
            .trace_length
            .max(corrected_end.saturating_sub(clock.global_offset) + 1);
    }
    for location in found.defs.locations.iter() {
        found
            .clock_offsets
            .insert(location.id, clock_offsets.clone());
    }

    let mut note = format!(
        "its process did not finish the trace (killed?): merged with the {kept_events} \
         events it had written, from the definitions it had saved; what it had not written \
         yet is missing"
    );
    if unfinished_events > 0 {
        note.push_str(&format!(
            "; {unfinished_events} events of intervals still open at its end left out"
        ));
    }
    if unreadable_chunks > 0 {
        note.push_str(&format!("; {unreadable_chunks} unreadable chunks left out"));
    }
    if undefined_files > 0 {
        note.push_str(&format!(
            "; {undefined_files} event files of locations created after its last snapshot \
             left out"
        ));
    }
    Ok(RecoveredPart {
        defs: found,
        dir: together,
        note,
    })
}
