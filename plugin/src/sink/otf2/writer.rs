//! The OTF2 edge: one archive per process, written with *local* definition ids (every part
//! is a complete archive of its own, and `nccl-scorep merge`
//! joins parts with mapping tables, without rewriting events).
//!
//! Everything here runs on the collector thread, which owns every OTF2 object: OTF2's
//! writers are not thread safe, and a flush then never blocks an NCCL thread. Event files
//! are encoded and written here ([`super::event_file`]); OTF2 writes the anchor and the
//! definitions.
//!
//! Definitions are collected while events are written and go to `traces.def` when the
//! archive closes: their ids are dense and handed out in first-use order, and at close they
//! are written category by category (strings first), so every reference precedes its user.

use super::attributes::Val;
use super::defs::{Attr, Definitions, LocationKind, LocationOrder};
use super::event_file::{Event, EventFile, MAX_ATTRIBUTES};
use nccl_scorep_common::event_files::{render, WrittenEventFile};
use nccl_scorep_common::run_dir::{
    ANCHOR_FILE, EVENT_FILES_DIR, EVENT_FILES_LIST, SNAPSHOT_CLOCK_FILE, SNAPSHOT_DIR,
    SNAPSHOT_NEW_DIR, SNAPSHOT_OLD_DIR,
};
use otf2_sys::*;
use std::collections::HashMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::ptr;

/// Event chunk size: the smallest OTF2 allows; the memory each location holds.
pub const EVENT_CHUNK_BYTES: u64 = OTF2_CHUNK_SIZE_MIN;
/// Definition chunk size: the smallest OTF2 allows. OTF2 clears a whole definition chunk
/// for every local definition writer it opens or closes (one per location, here and again
/// when parts are merged), so 4 MiB chunks cost far more than the few kilobytes of a
/// part's definitions; no single record of a part comes near 256 KiB (strings are capped
/// at [`super::defs::MAX_STRING_BYTES`]).
pub const DEFINITION_CHUNK_BYTES: u64 = OTF2_CHUNK_SIZE_MIN;
/// Inner parts of an interval written with the work of one event (see [`Writer::leaf`]);
/// an interval with more is written event by event.
const MAX_INNER_AT_ONCE: usize = 8;

/// An inner part `s..e` of a leaf interval ending at `stop`, clamped into it and after
/// the part before, which ended at `at` (moved to this one's end).
#[inline]
fn clamp_part(at: &mut u64, stop: u64, s: u64, e: u64) -> (u64, u64) {
    let s = s.clamp(*at, stop);
    let e = e.clamp(s, stop);
    *at = e;
    (s, e)
}
/// A location of this archive: an index into [`Writer`]'s table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Loc(pub u32);

impl Loc {
    /// What [`Writer::add_location`] gives once the part has all the locations it may:
    /// events written there are counted and left out.
    pub const REFUSED: Loc = Loc(u32::MAX);
}

struct LocationEntry {
    file: EventFile,
    /// The first timestamp written (`u64::MAX` before any).
    first: u64,
    /// The last timestamp written (OTF2 readers reject smaller ones).
    last: u64,
}

/// How a timestamp pair of the two clocks was taken (for the clock offsets).
#[derive(Clone, Copy, Debug)]
pub struct ClockSample {
    pub monotonic_ns: u64,
    pub realtime_ns: u64,
}

/// An open OTF2 archive being written.
pub struct Writer {
    archive: *mut OTF2_Archive,
    entries: Vec<LocationEntry>,
    pub defs: Definitions,
    path: PathBuf,
    /// OTF2 calls that did not return `OTF2_SUCCESS`.
    pub failed_calls: u64,
    /// Timestamps raised to the location's last one (a bug if ever non-zero).
    pub raised_timestamps: u64,
    /// Locations the part writes at most; [`Writer::add_location`] refuses more.
    pub max_locations: usize,
    pub locations_refused: u64,
    /// Events of refused locations, left out.
    pub events_without_location: u64,
    clock_start: ClockSample,
    closed: bool,
    /// The [`Definitions::version`] the last snapshot holds (`u64::MAX`: none yet): no
    /// event reaches the disk before every definition it refers to is in the snapshot, so
    /// that a killed process's events can be merged.
    saved_version: u64,
    /// Definition snapshots written.
    pub snapshots: u64,
    /// Event file writes that failed (the first one is logged).
    pub failed_writes: u64,
}

// SAFETY: OTF2 objects have no thread affinity; they must only never be used by two
// threads at once. A `Writer` is created by the thread that starts the collector and from
// then on used by the collector thread alone.
unsafe impl Send for Writer {}

fn cstring(text: &str) -> CString {
    CString::new(text.replace('\0', "?")).unwrap_or_default()
}

/// Why an archive could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OpenError(pub String);

/// Opens `<dir>/traces.otf2` for writing by this process alone (the primary of its own
/// archive, pattern B), with the flush callbacks its definitions need.
fn create_archive(dir: &Path) -> Result<*mut OTF2_Archive, String> {
    let path = cstring(&dir.to_string_lossy());
    let archive =
        otf2_sys::writing::create_archive(&path, EVENT_CHUNK_BYTES, DEFINITION_CHUNK_BYTES)
            .map_err(|error| match error {
                otf2_sys::writing::CreateError::Open => {
                    format!("OTF2 cannot create an archive in {}", dir.display())
                }
                otf2_sys::writing::CreateError::Setup(_) => format!(
                    "OTF2 cannot create {}/traces (does it exist already?)",
                    dir.display()
                ),
            })?;
    // OTF2 made its event files' directory with the umask's mode; ours is private. (A
    // failure leaves it readable only as far as `dir`, made with our mode, allows.)
    drop(nccl_scorep_common::safe_file::set_dir_mode(
        &dir.join("traces"),
    ));
    Ok(archive)
}

impl Writer {
    /// Creates `<dir>/traces.otf2` (and `<dir>/traces/`); `dir` may exist, `dir/traces`
    /// must not.
    pub fn open(
        dir: &Path,
        machine: &str,
        defs: Definitions,
        clock_start: ClockSample,
    ) -> Result<Writer, OpenError> {
        otf2_sys::install_error_handler(report_otf2_error);
        nccl_scorep_common::safe_file::create_dirs(dir)
            .map_err(|e| OpenError(format!("cannot create {}: {e}", dir.display())))?;
        let archive = create_archive(dir).map_err(OpenError)?;
        // A list left by another process of this name would describe other files.
        let _ = std::fs::remove_file(dir.join(EVENT_FILES_LIST));
        // SAFETY: the rest of OTF2's write sequence on this thread
        // only, with the archive just created.
        unsafe {
            let mut writer = Writer {
                archive,
                entries: Vec::new(),
                defs,
                path: dir.join(ANCHOR_FILE),
                failed_calls: 0,
                raised_timestamps: 0,
                max_locations: usize::MAX,
                locations_refused: 0,
                events_without_location: 0,
                clock_start,
                closed: false,
                saved_version: u64::MAX,
                snapshots: 0,
                failed_writes: 0,
            };
            let creator = cstring(concat!("nccl-scorep ", env!("CARGO_PKG_VERSION")));
            writer.check(OTF2_Archive_SetCreator(archive, creator.as_ptr()));
            writer.check(OTF2_Archive_SetMachineName(
                archive,
                cstring(machine).as_ptr(),
            ));
            let description = cstring("NCCL communication traced by the nccl-scorep plugin");
            writer.check(OTF2_Archive_SetDescription(archive, description.as_ptr()));
            Ok(writer)
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sets a trace file property of the archive (before it is closed).
    pub fn set_property(&mut self, name: &str, value: &str) {
        if self.archive.is_null() {
            return;
        }
        let (name, value) = (cstring(name), cstring(value));
        // SAFETY: the archive is open for writing; OTF2 copies both strings.
        let code =
            unsafe { OTF2_Archive_SetProperty(self.archive, name.as_ptr(), value.as_ptr(), true) };
        self.check(code);
    }

    fn check(&mut self, code: OTF2_ErrorCode) -> bool {
        if code == OTF2_SUCCESS {
            true
        } else {
            self.failed_calls += 1;
            false
        }
    }

    /// Adds a location; its event file is created when something is first written to it.
    pub fn add_location(
        &mut self,
        name: &str,
        kind: LocationKind,
        group: u32,
        order: LocationOrder,
    ) -> Loc {
        // Memory stays bounded whatever the job: a location beyond the bound is refused
        // and its events counted. Threads and ops streams (what the summary and profile
        // read) may use the last quarter; GPU channels and proxy lanes may not.
        let bound = match order {
            LocationOrder::Thread | LocationOrder::OpsStream => self.max_locations,
            _ => self.max_locations - self.max_locations / 4,
        };
        if self.entries.len() >= bound {
            self.locations_refused += 1;
            return Loc::REFUSED;
        }
        let index = self.entries.len() as u32;
        let id = self.defs.add_location(name, kind, group, order);
        let path = self
            .path
            .with_file_name(EVENT_FILES_DIR)
            .join(format!("{id}.evt"));
        self.entries.push(LocationEntry {
            file: EventFile::new(path, EVENT_CHUNK_BYTES),
            first: u64::MAX,
            last: 0,
        });
        Loc(index)
    }

    /// Names `loc` anew (its definitions and event file are those of its index).
    pub fn rename_location(&mut self, loc: Loc, name: &str) {
        self.defs.rename_location(loc.0 as usize, name);
    }

    pub fn last_time(&self, loc: Loc) -> u64 {
        self.entries.get(loc.0 as usize).map_or(0, |e| e.last)
    }

    /// How many of `attrs` an event takes: all up to [`MAX_ATTRIBUTES`]. More are never in
    /// the plugin's records (about 20 at most); they are counted, not silently left out.
    fn at_most_max(&mut self, attrs: &[(Attr, Val)]) -> usize {
        if attrs.len() > MAX_ATTRIBUTES {
            self.failed_calls += (attrs.len() - MAX_ATTRIBUTES) as u64;
            return MAX_ATTRIBUTES;
        }
        attrs.len()
    }

    /// Writes `event` on `loc` at `time` (raised to the location's last time if earlier),
    /// with `attrs`.
    #[inline]
    fn emit(&mut self, loc: Loc, time: u64, event: Event, attrs: &[(Attr, Val)]) {
        let Some(index) = self.make_room(loc, 0) else {
            return;
        };
        let attrs = &attrs[..self.at_most_max(attrs)];
        let time = self.raised(index, time);
        self.entries[index].file.write(time, attrs, event);
    }

    /// An interval written whole on `loc`: the Enter of `region` at `start` with the
    /// attributes `attrs`, each inner part's Enter and Leave (clamped into the interval
    /// and after the part before), and the Leave at `stop` (not before `start`).
    pub fn leaf(
        &mut self,
        loc: Loc,
        start: u64,
        stop: u64,
        region: u32,
        attrs: &[(Attr, Val)],
        inner: &[(u64, u64, u32)],
    ) {
        let stop = stop.max(start);
        if inner.len() > MAX_INNER_AT_ONCE {
            self.enter_with(loc, start, region, attrs);
            let mut at = start;
            for &(s, e, part) in inner {
                let (s, e) = clamp_part(&mut at, stop, s, e);
                self.enter(loc, s, part);
                self.leave(loc, e, part);
            }
            self.leave(loc, stop, region);
            return;
        }
        let Some(index) = self.make_room(loc, 1 + 2 * inner.len()) else {
            return;
        };
        let mut events = [(0_u64, 0_u32, false); 2 * MAX_INNER_AT_ONCE + 2];
        let start = self.raised(index, start);
        let stop = stop.max(start);
        events[0] = (start, region, false);
        let mut at = start;
        for (i, &(s, e, part)) in inner.iter().enumerate() {
            let (s, e) = clamp_part(&mut at, stop, s, e);
            events[1 + 2 * i] = (s, part, false);
            events[2 + 2 * i] = (e, part, true);
        }
        let count = 2 + 2 * inner.len();
        events[count - 1] = (stop, region, true);
        let attrs = &attrs[..self.at_most_max(attrs)];
        let entry = &mut self.entries[index];
        entry.last = stop;
        entry.file.write_region_events(attrs, &events[..count]);
    }

    /// Makes room on `loc` for one event and `more` Enter or Leave records without
    /// attributes: the location's index, or `None` when its events are left out (a
    /// refused location, or a closed archive).
    #[inline]
    fn make_room(&mut self, loc: Loc, more: usize) -> Option<usize> {
        let index = loc.0 as usize;
        if index >= self.entries.len() || self.closed {
            if loc == Loc::REFUSED {
                self.events_without_location += 1;
            }
            return None;
        }
        if !self.entries[index].file.has_room_for(more) {
            self.before_writing();
            let result = self.entries[index].file.next_chunk();
            self.note_write(result);
        } else if !self.entries[index].file.stage_has_room_for(more) {
            // The location's bytes in memory go to its file: memory holds a stage of each
            // location, not a chunk.
            self.before_writing();
            let result = self.entries[index].file.persist();
            self.note_write(result);
        }
        Some(index)
    }

    /// `time` raised to the last time written on location `index` (OTF2 readers reject
    /// an earlier one), which it becomes.
    #[inline]
    fn raised(&mut self, index: usize, time: u64) -> u64 {
        let entry = &mut self.entries[index];
        let time = if time < entry.last {
            self.raised_timestamps += 1;
            entry.last
        } else {
            time
        };
        entry.last = time;
        if entry.first == u64::MAX {
            entry.first = time;
        }
        time
    }

    /// What must hold before events go to the disk: every definition they refer to is in
    /// the snapshot.
    fn before_writing(&mut self) {
        if self.defs.version() != self.saved_version {
            let now = ClockSample {
                monotonic_ns: crate::clock::now_ns(),
                realtime_ns: crate::clock::realtime_ns(),
            };
            if let Err(why) = self.snapshot(now) {
                self.note_write(Err(std::io::Error::other(format!(
                    "cannot write the definitions snapshot: {why}"
                ))));
            }
        }
    }

    fn note_write(&mut self, result: std::io::Result<()>) {
        if let Err(error) = result {
            self.failed_writes += 1;
            if self.failed_writes == 1 {
                crate::log::warn(&format!(
                    "cannot write the trace part's events in {}: {error}",
                    self.path.with_file_name(EVENT_FILES_DIR).display()
                ));
            }
        }
    }

    pub fn enter(&mut self, loc: Loc, time: u64, region: u32) {
        self.emit(loc, time, Event::Enter { region }, &[]);
    }

    /// An Enter with its attributes.
    pub fn enter_with(&mut self, loc: Loc, time: u64, region: u32, attrs: &[(Attr, Val)]) {
        self.emit(loc, time, Event::Enter { region }, attrs);
    }

    pub fn leave(&mut self, loc: Loc, time: u64, region: u32) {
        self.emit(loc, time, Event::Leave { region }, &[]);
    }

    pub fn collective_begin(&mut self, loc: Loc, time: u64) {
        self.emit(loc, time, Event::MpiCollectiveBegin, &[]);
    }

    #[allow(clippy::too_many_arguments)]
    pub fn collective_end(
        &mut self,
        loc: Loc,
        time: u64,
        op: u8,
        comm: u32,
        root: u32,
        sent: u64,
        received: u64,
    ) {
        let event = Event::MpiCollectiveEnd {
            op,
            comm,
            root,
            sent,
            received,
        };
        self.emit(loc, time, event, &[]);
    }

    pub fn send(&mut self, loc: Loc, time: u64, receiver: u32, comm: u32, bytes: u64) {
        let event = Event::MpiSend {
            receiver,
            comm,
            tag: 0,
            bytes,
        };
        self.emit(loc, time, event, &[]);
    }

    pub fn recv(&mut self, loc: Loc, time: u64, sender: u32, comm: u32, bytes: u64) {
        let event = Event::MpiRecv {
            sender,
            comm,
            tag: 0,
            bytes,
        };
        self.emit(loc, time, event, &[]);
    }

    /// Puts every event written so far on the disk (after the definitions snapshot, when
    /// definitions were added), and renews the clock pairs beside the snapshot: what a
    /// process killed after this leaves.
    pub fn persist(&mut self, now: ClockSample) {
        if self.closed {
            return;
        }
        self.persist_events();
        if let Err(why) = self.write_snapshot_clock(now) {
            self.note_write(Err(std::io::Error::other(why)));
        }
    }

    /// Puts every location's unwritten events in its file and frees the buffers of those
    /// that hold nothing more: memory then holds a stage only for the locations written
    /// to since (see [`EventFile::release_stage`]).
    pub fn persist_events(&mut self) {
        if self.closed {
            return;
        }
        if self.entries.iter().any(|e| e.file.unpersisted() > 0) {
            self.before_writing();
        }
        for index in 0..self.entries.len() {
            let result = self.entries[index].file.persist();
            self.note_write(result);
            self.entries[index].file.release_stage();
        }
    }

    /// Closes every writer, writes the local definitions (clock offsets) and the global
    /// definitions, and closes the archive. Returns the number of events written.
    pub fn close(&mut self, clock_end: ClockSample) -> u64 {
        if self.closed {
            return 0;
        }
        self.closed = true;
        let mut total = 0;
        let mut counts = Vec::with_capacity(self.entries.len());
        for index in 0..self.entries.len() {
            let result = self.entries[index].file.finish();
            self.note_write(result);
            let events = self.entries[index].file.events();
            counts.push(events);
            total += events;
        }
        // SAFETY: OTF2's close sequence on the owning thread, for
        // an archive whose event files are written by `EventFile`.
        unsafe {
            let code = OTF2_Archive_OpenDefFiles(self.archive);
            self.check(code);
            let start = self.clock_start;
            for id in self.defs.location_ids() {
                let def_writer = OTF2_Archive_GetDefWriter(self.archive, id);
                if def_writer.is_null() {
                    self.failed_calls += 1;
                    continue;
                }
                // Readers add these offsets (interpolated) to every timestamp: the trace
                // shows CLOCK_REALTIME nanoseconds, comparable between hosts.
                for sample in [start, clock_end] {
                    let code = OTF2_DefWriter_WriteClockOffset(
                        def_writer,
                        sample.monotonic_ns,
                        sample.realtime_ns as i64 - sample.monotonic_ns as i64,
                        0.0,
                    );
                    self.check(code);
                }
                let code = OTF2_Archive_CloseDefWriter(self.archive, def_writer);
                self.check(code);
            }
            let code = OTF2_Archive_CloseDefFiles(self.archive);
            self.check(code);
            self.failed_calls += self.write_global_definitions(self.archive, clock_end, &counts);
            let code = OTF2_Archive_Close(self.archive);
            self.check(code);
        }
        self.archive = ptr::null_mut();
        self.link_equal_local_definitions();
        self.write_event_files_list();
        total
    }

    /// Makes the locations' local definition files that hold the same bytes (every
    /// location of a process has the same clock offsets) hard links to one file, so that
    /// the merge reads one file per part instead of one per location. OTF2 reads a link
    /// like the file. Where a link cannot be made the copy stays.
    fn link_equal_local_definitions(&self) {
        let dir = self.path.with_file_name(EVENT_FILES_DIR);
        let mut first_with: HashMap<Vec<u8>, PathBuf> = HashMap::new();
        for id in self.defs.location_ids() {
            let path = dir.join(format!("{id}.def"));
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            match first_with.get(&bytes) {
                None => {
                    first_with.insert(bytes, path);
                }
                Some(first) => {
                    // Linked under a new name, then renamed over the copy: the location
                    // never lacks its file.
                    let linked = dir.join(format!(".{id}.def.link"));
                    let _ = std::fs::remove_file(&linked);
                    if std::fs::hard_link(first, &linked).is_ok()
                        && std::fs::rename(&linked, &path).is_err()
                    {
                        let _ = std::fs::remove_file(&linked);
                    }
                }
            }
        }
    }

    /// Writes `<part>/event-files.txt`: each event file's length and events as written,
    /// which the merge compares with the file instead of reading it. A file with a failed
    /// write is left out (the merge reads it); a list that cannot be written only makes
    /// the merge read every file.
    fn write_event_files_list(&self) {
        let files: Vec<WrittenEventFile> = self
            .defs
            .location_ids()
            .into_iter()
            .zip(&self.entries)
            .filter(|(_, entry)| entry.file.all_written())
            .map(|(location, entry)| WrittenEventFile {
                location,
                bytes: entry.file.length(),
                events: entry.file.events(),
            })
            .collect();
        let list = self.path.with_file_name(EVENT_FILES_LIST);
        let _ = nccl_scorep_common::safe_file::replace(&list, render(&files).as_bytes());
    }

    /// Writes the definitions so far as an archive of their own, without events or local
    /// definitions, `<part>/snapshot/traces.otf2` (replacing the previous one), and the
    /// clock pairs beside it: what the merge needs to read the events a killed process
    /// flushed. Every location has 0 events in it.
    pub fn snapshot(&mut self, now: ClockSample) -> Result<(), String> {
        if self.closed {
            return Ok(());
        }
        let version = self.defs.version();
        let part = self
            .path
            .parent()
            .ok_or_else(|| "the part has no directory".to_owned())?;
        let fresh = part.join(SNAPSHOT_NEW_DIR);
        let current = part.join(SNAPSHOT_DIR);
        let old = part.join(SNAPSHOT_OLD_DIR);
        for dir in [&fresh, &old] {
            if dir.exists() {
                std::fs::remove_dir_all(dir)
                    .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
            }
        }
        nccl_scorep_common::safe_file::create_dir(&fresh)
            .map_err(|e| format!("cannot create {}: {e}", fresh.display()))?;
        let archive = create_archive(&fresh)?;
        let zeros = vec![0u64; self.defs.location_ids().len()];
        // SAFETY: an archive of global definitions only, just created, on the collector
        // thread; closed once.
        let failed = unsafe {
            self.write_global_definitions(archive, now, &zeros)
                + u64::from(OTF2_Archive_Close(archive) != OTF2_SUCCESS)
        };
        if failed > 0 {
            self.failed_calls += failed;
            return Err(format!("{failed} OTF2 calls failed"));
        }
        // The previous snapshot stays complete until the new one replaces it.
        let replace = || -> std::io::Result<()> {
            if current.exists() {
                std::fs::rename(&current, &old)?;
            }
            std::fs::rename(&fresh, &current)?;
            if old.exists() {
                std::fs::remove_dir_all(&old)?;
            }
            Ok(())
        };
        replace().map_err(|e| format!("cannot replace {}: {e}", current.display()))?;
        self.saved_version = version;
        self.snapshots += 1;
        self.write_snapshot_clock(now)
    }

    /// Writes `<part>/snapshot.clock`: the clock pairs taken when the part was opened and
    /// `now` (replacing the file), from which the merge makes a killed process's clock
    /// offsets.
    pub fn write_snapshot_clock(&self, now: ClockSample) -> Result<(), String> {
        let Some(part) = self.path.parent() else {
            return Ok(());
        };
        let start = self.clock_start;
        let text = format!(
            "{} {}\n{} {}\n",
            start.monotonic_ns, start.realtime_ns, now.monotonic_ns, now.realtime_ns
        );
        let path = part.join(SNAPSHOT_CLOCK_FILE);
        nccl_scorep_common::safe_file::replace(&path, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// Removes the definitions snapshot: the part is complete without it.
    pub fn remove_snapshot(&self) {
        if let Some(part) = self.path.parent() {
            for name in [SNAPSHOT_DIR, SNAPSHOT_NEW_DIR, SNAPSHOT_OLD_DIR] {
                let dir = part.join(name);
                if dir.exists() {
                    let _ = std::fs::remove_dir_all(dir);
                }
            }
            for name in [
                SNAPSHOT_CLOCK_FILE.to_owned(),
                format!("{SNAPSHOT_CLOCK_FILE}.new"),
            ] {
                let _ = std::fs::remove_file(part.join(name));
            }
        }
    }

    /// Writes into `archive` the ClockProperties (the trace's range up to `end`) and every
    /// definition, with `events` per location. Returns the number of calls that failed.
    ///
    /// # Safety
    /// `archive` is open for writing and its global definitions are not written yet.
    unsafe fn write_global_definitions(
        &self,
        archive: *mut OTF2_Archive,
        end: ClockSample,
        events: &[u64],
    ) -> u64 {
        // SAFETY: per the caller.
        let global = unsafe { OTF2_Archive_GetGlobalDefWriter(archive) };
        if global.is_null() {
            return 1;
        }
        let (offset, length) = self.corrected_range(end);
        // SAFETY: `global` is the archive's open global definition writer.
        unsafe {
            let code = OTF2_GlobalDefWriter_WriteClockProperties(
                global,
                1_000_000_000,
                offset,
                length,
                offset,
            );
            u64::from(code != OTF2_SUCCESS) + self.defs.write(global, events)
        }
    }

    /// The trace's time range in the corrected (real-time) domain.
    fn corrected_range(&self, end: ClockSample) -> (u64, u64) {
        let start = self.clock_start;
        let correct = |t: u64| -> u64 {
            let offset_at = |s: ClockSample| s.realtime_ns as i128 - s.monotonic_ns as i128;
            let (o0, o1) = (offset_at(start), offset_at(end));
            let span = end.monotonic_ns.saturating_sub(start.monotonic_ns) as i128;
            let offset = if span == 0 {
                o0
            } else {
                o0 + (o1 - o0) * (t as i128 - start.monotonic_ns as i128) / span
            };
            (t as i128 + offset).max(0) as u64
        };
        let written = self.entries.iter().filter(|e| e.first != u64::MAX);
        let first_time = written.clone().map(|e| e.first).min();
        let last_time = written.map(|e| e.last).max();
        let (Some(first_time), Some(last_time)) = (first_time, last_time) else {
            let now = correct(end.monotonic_ns);
            return (now, 1);
        };
        // One tick of margin each side: readers interpolate the offsets in floating point
        // and may round a timestamp one tick differently.
        let first = correct(first_time).saturating_sub(1);
        let last = correct(last_time) + 1;
        (first, last - first + 1)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.closed {
            let end = ClockSample {
                monotonic_ns: crate::clock::now_ns(),
                realtime_ns: crate::clock::realtime_ns(),
            };
            self.close(end);
        }
    }
}

fn report_otf2_error(report: &otf2_sys::ErrorReport) {
    crate::log::warn(&format!("OTF2: {report}"));
}
