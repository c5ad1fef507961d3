//! The OTF2 edge: one archive per process, written with *local* definition ids (pattern B
//! of the OTF2 notes: every part is a complete archive of its own, and `nccl-scorep merge`
//! joins parts with mapping tables, without rewriting events).
//!
//! Everything here runs on the collector thread, which owns every OTF2 object: OTF2's
//! writers are not thread safe, and a flush then never blocks an NCCL thread.
//!
//! Definitions are collected while events are written and go to `traces.def` when the
//! archive closes: their ids are dense and handed out in first-use order, and at close they
//! are written category by category (strings first), so every reference precedes its user.

use super::defs::{Attr, Definitions, LocationKind};
use otf2_sys::*;
use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

/// Event chunk size: the smallest OTF2 allows, so data reaches the disk often.
pub const EVENT_CHUNK_BYTES: u64 = OTF2_CHUNK_SIZE_MIN;
/// Definition chunk size: the smallest OTF2 allows. OTF2 clears a whole definition chunk
/// for every local definition writer it opens or closes (one per location, here and again
/// when parts are merged), so 4 MiB chunks cost far more than the few kilobytes of a
/// part's definitions; no single record of a part comes near 256 KiB (strings are capped
/// at [`super::defs::MAX_STRING_BYTES`]).
pub const DEFINITION_CHUNK_BYTES: u64 = OTF2_CHUNK_SIZE_MIN;
/// Event chunks one location may hold in memory before OTF2 must flush them. With one
/// chunk, a location flushes every 256 KiB of encoded events (about 20,000 events).
const EVENT_CHUNKS_PER_LOCATION: usize = 1;
/// Event chunks one location may hold while definitions are not yet in the snapshot (see
/// [`FlushGate`]); past this, it flushes anyway (counted).
const MAX_HELD_CHUNKS_PER_LOCATION: usize = 16;

/// A location of this archive: an index into [`Writer`]'s table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Loc(pub u32);

struct LocationEntry {
    writer: *mut OTF2_EvtWriter,
    /// The last timestamp written (OTF2 rejects smaller ones).
    last: u64,
}

/// Where a part keeps the snapshot of its definitions while it is being written, and the
/// clock pairs for it (the merge reads them from there when the process was killed).
pub const SNAPSHOT_DIR: &str = nccl_scorep_merge::SNAPSHOT_DIR;
pub const SNAPSHOT_CLOCK_FILE: &str = nccl_scorep_merge::SNAPSHOT_CLOCK_FILE;

/// Keeps event flushes behind the definitions snapshot: a location's events reach the
/// disk only once every definition they refer to is in `<part>/snapshot/`, so that a
/// killed process's flushed events can be merged with the definitions it saved. While
/// definitions were added since the last snapshot, the memory callbacks give a location
/// more chunks instead of flushing it; the collector then writes a snapshot soon (see
/// [`Writer::snapshot_due`]), and the held chunks go out with the location's next flush.
/// OTF2's memory callbacks reach it through their user data, so it holds atomics only.
struct FlushGate {
    /// [`Definitions::version`]: bumped with every definition added.
    defs_version: std::sync::Arc<AtomicU64>,
    /// The version the last snapshot holds (`u64::MAX`: none yet).
    saved_version: AtomicU64,
    /// Chunks given out instead of a flush since the last snapshot.
    held_chunks: AtomicU64,
    /// Flushes that could not wait for a snapshot any longer.
    early_flushes: AtomicU64,
}

impl FlushGate {
    fn holds(&self) -> bool {
        self.defs_version.load(Ordering::Relaxed) != self.saved_version.load(Ordering::Relaxed)
    }
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
    attributes: *mut OTF2_AttributeList,
    entries: Vec<LocationEntry>,
    pub defs: Definitions,
    path: PathBuf,
    /// OTF2 calls that did not return `OTF2_SUCCESS`.
    pub failed_calls: u64,
    /// Timestamps raised to the location's last one (a bug if ever non-zero).
    pub raised_timestamps: u64,
    first_time: u64,
    last_time: u64,
    clock_start: ClockSample,
    closed: bool,
    /// Shared with OTF2's memory callbacks (their user data): boxed, so its address stays.
    gate: Box<FlushGate>,
    /// Definition snapshots written.
    pub snapshots: u64,
}

// SAFETY: OTF2 objects have no thread affinity; they must only never be used by two
// threads at once. A `Writer` is created by the thread that starts the collector and from
// then on used by the collector thread alone.
unsafe impl Send for Writer {}

/// OTF2 keeps these pointers until the archive is closed: statics outlive it.
static FLUSH_CALLBACKS: OTF2_FlushCallbacks = OTF2_FlushCallbacks {
    otf2_pre_flush: Some(pre_flush),
    // No BufferFlush records: flushes happen on the collector thread, not in the job.
    otf2_post_flush: None,
};
static MEMORY_CALLBACKS: OTF2_MemoryCallbacks = OTF2_MemoryCallbacks {
    otf2_allocate: Some(allocate_chunk),
    otf2_free_all: Some(free_chunks),
};

unsafe extern "C" fn pre_flush(
    _user_data: *mut c_void,
    _file_type: OTF2_FileType,
    _location: OTF2_LocationRef,
    _caller_data: *mut c_void,
    _final: bool,
) -> OTF2_FlushType {
    // Always write: the memory callbacks decide how often this happens.
    OTF2_FLUSH as OTF2_FlushType
}

/// The chunks one OTF2 buffer holds, kept in that buffer's `perBufferData`.
#[derive(Default)]
struct Chunks(Vec<*mut c_void>);

unsafe extern "C" fn allocate_chunk(
    user_data: *mut c_void,
    file_type: OTF2_FileType,
    _location: OTF2_LocationRef,
    per_buffer: *mut *mut c_void,
    chunk_size: u64,
) -> *mut c_void {
    std::panic::catch_unwind(|| {
        if per_buffer.is_null() {
            return ptr::null_mut();
        }
        // SAFETY: OTF2 passes the address of this buffer's private pointer, NULL at first
        // and afterwards the `Chunks` box we stored there.
        let chunks = unsafe {
            if (*per_buffer).is_null() {
                *per_buffer = Box::into_raw(Box::<Chunks>::default()).cast();
            }
            &mut *(*per_buffer).cast::<Chunks>()
        };
        // SAFETY: the user data is the writer's boxed `FlushGate`, which outlives the
        // archive; it is only read through atomics.
        let gate = unsafe { user_data.cast::<FlushGate>().as_ref() };
        if file_type == OTF2_FILETYPE_EVENTS as OTF2_FileType
            && chunks.0.len() >= EVENT_CHUNKS_PER_LOCATION
        {
            match gate {
                Some(gate) if gate.holds() && chunks.0.len() < MAX_HELD_CHUNKS_PER_LOCATION => {
                    gate.held_chunks.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    if gate.is_some_and(FlushGate::holds) {
                        gate.map(|g| g.early_flushes.fetch_add(1, Ordering::Relaxed));
                    }
                    // NULL makes OTF2 flush this buffer and free its chunks, then ask
                    // again.
                    return ptr::null_mut();
                }
            }
        }
        // SAFETY: plain allocation; OTF2 writes at most `chunk_size` bytes into it.
        let chunk = unsafe { libc::malloc(chunk_size as usize) };
        if !chunk.is_null() {
            chunks.0.push(chunk);
        }
        chunk
    })
    .unwrap_or(ptr::null_mut())
}

unsafe extern "C" fn free_chunks(
    _user_data: *mut c_void,
    _file_type: OTF2_FileType,
    _location: OTF2_LocationRef,
    per_buffer: *mut *mut c_void,
    final_: bool,
) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: as in `allocate_chunk`; the chunks were allocated there with malloc.
        unsafe {
            if per_buffer.is_null() || (*per_buffer).is_null() {
                return;
            }
            let chunks = (*per_buffer).cast::<Chunks>();
            for chunk in (*chunks).0.drain(..) {
                libc::free(chunk);
            }
            if final_ {
                drop(Box::from_raw(chunks));
                *per_buffer = ptr::null_mut();
            }
        }
    });
}

fn cstring(text: &str) -> CString {
    CString::new(text.replace('\0', "?")).unwrap_or_default()
}

/// Why an archive could not be opened.
#[derive(Debug)]
pub struct OpenError(pub String);

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
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
        std::fs::create_dir_all(dir)
            .map_err(|e| OpenError(format!("cannot create {}: {e}", dir.display())))?;
        let path = cstring(&dir.to_string_lossy());
        let name = cstring("traces");
        // SAFETY: the write sequence of the OTF2 notes (§1.3) on this thread only; the
        // callback tables are statics, so they outlive the archive.
        unsafe {
            let archive = OTF2_Archive_Open(
                path.as_ptr(),
                name.as_ptr(),
                OTF2_FILEMODE_WRITE as OTF2_FileMode,
                EVENT_CHUNK_BYTES,
                DEFINITION_CHUNK_BYTES,
                OTF2_SUBSTRATE_POSIX as OTF2_FileSubstrate,
                OTF2_COMPRESSION_NONE as OTF2_Compression,
            );
            if archive.is_null() {
                return Err(OpenError(format!(
                    "OTF2 cannot create an archive in {}",
                    dir.display()
                )));
            }
            let gate = Box::new(FlushGate {
                defs_version: defs.version(),
                saved_version: AtomicU64::new(u64::MAX),
                held_chunks: AtomicU64::new(0),
                early_flushes: AtomicU64::new(0),
            });
            let mut writer = Writer {
                archive,
                attributes: OTF2_AttributeList_New(),
                entries: Vec::new(),
                defs,
                path: dir.join("traces.otf2"),
                failed_calls: 0,
                raised_timestamps: 0,
                first_time: u64::MAX,
                last_time: 0,
                clock_start,
                closed: false,
                gate,
                snapshots: 0,
            };
            writer.check(OTF2_Archive_SetFlushCallbacks(
                archive,
                &FLUSH_CALLBACKS,
                ptr::null_mut(),
            ));
            let gate: *const FlushGate = &*writer.gate;
            writer.check(OTF2_Archive_SetMemoryCallbacks(
                archive,
                &MEMORY_CALLBACKS,
                gate.cast_mut().cast(),
            ));
            // This process is the primary of its own archive (pattern B).
            let collective = OTF2_Archive_SetSerialCollectiveCallbacks(archive);
            if collective != OTF2_SUCCESS {
                OTF2_Archive_Close(archive);
                return Err(OpenError(format!(
                    "OTF2 cannot create {}/traces (does it exist already?)",
                    dir.display()
                )));
            }
            let creator = cstring(concat!("nccl-scorep ", env!("CARGO_PKG_VERSION")));
            writer.check(OTF2_Archive_SetCreator(archive, creator.as_ptr()));
            writer.check(OTF2_Archive_SetMachineName(
                archive,
                cstring(machine).as_ptr(),
            ));
            let description = cstring("NCCL communication traced by the nccl-scorep plugin");
            writer.check(OTF2_Archive_SetDescription(archive, description.as_ptr()));
            writer.check(OTF2_Archive_OpenEvtFiles(archive));
            Ok(writer)
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check(&mut self, code: OTF2_ErrorCode) -> bool {
        if code == OTF2_SUCCESS {
            true
        } else {
            self.failed_calls += 1;
            false
        }
    }

    /// Adds a location and opens its event writer.
    pub fn add_location(&mut self, name: &str, kind: LocationKind, group: u32) -> Loc {
        let index = self.entries.len() as u32;
        let id = self.defs.add_location(name, kind, group);
        // SAFETY: the archive is open; one writer per location, used on this thread only.
        let writer = unsafe { OTF2_Archive_GetEvtWriter(self.archive, id) };
        if writer.is_null() {
            self.failed_calls += 1;
        }
        self.entries.push(LocationEntry { writer, last: 0 });
        Loc(index)
    }

    /// The timestamp to write on `loc`: never below the last one written there.
    fn stamp(&mut self, loc: Loc, time: u64) -> Option<(*mut OTF2_EvtWriter, u64)> {
        let entry = self.entries.get_mut(loc.0 as usize)?;
        if entry.writer.is_null() {
            return None;
        }
        let time = if time < entry.last {
            self.raised_timestamps += 1;
            entry.last
        } else {
            time
        };
        entry.last = time;
        self.first_time = self.first_time.min(time);
        self.last_time = self.last_time.max(time);
        Some((entry.writer, time))
    }

    pub fn last_time(&self, loc: Loc) -> u64 {
        self.entries.get(loc.0 as usize).map_or(0, |e| e.last)
    }

    // Attribute values for the next event record (OTF2 empties the list with each write).

    pub fn attr_u64(&mut self, attr: Attr, value: u64) {
        // SAFETY: the list was created in `open` and is used on this thread only.
        let code = unsafe { OTF2_AttributeList_AddUint64(self.attributes, attr as u32, value) };
        self.check(code);
    }

    pub fn attr_i64(&mut self, attr: Attr, value: i64) {
        // SAFETY: as in `attr_u64`.
        let code = unsafe { OTF2_AttributeList_AddInt64(self.attributes, attr as u32, value) };
        self.check(code);
    }

    /// A string attribute with a static string (interned on first use).
    pub fn attr_static_str(&mut self, attr: Attr, value: &'static str) {
        let string = self.defs.static_string(value);
        self.attr_string_id(attr, string);
    }

    /// A string attribute whose string is interned already.
    pub fn attr_string_id(&mut self, attr: Attr, string: u32) {
        // SAFETY: as in `attr_u64`; the string is defined at close, before any reader
        // resolves it.
        let code = unsafe { OTF2_AttributeList_AddStringRef(self.attributes, attr as u32, string) };
        self.check(code);
    }

    /// Drops attribute values that no record took (a location without a writer).
    fn clear_attributes(&mut self) {
        // SAFETY: as in `attr_u64`.
        unsafe {
            OTF2_AttributeList_RemoveAllAttributes(self.attributes);
        }
    }

    pub fn enter(&mut self, loc: Loc, time: u64, region: u32) {
        let Some((w, t)) = self.stamp(loc, time) else {
            return self.clear_attributes();
        };
        // SAFETY: `w` is this location's open writer; the region id is defined at close.
        let code = unsafe { OTF2_EvtWriter_Enter(w, self.attributes, t, region) };
        self.check(code);
    }

    pub fn leave(&mut self, loc: Loc, time: u64, region: u32) {
        let Some((w, t)) = self.stamp(loc, time) else {
            return self.clear_attributes();
        };
        // SAFETY: as in `enter`.
        let code = unsafe { OTF2_EvtWriter_Leave(w, self.attributes, t, region) };
        self.check(code);
    }

    pub fn collective_begin(&mut self, loc: Loc, time: u64) {
        let Some((w, t)) = self.stamp(loc, time) else {
            return;
        };
        // SAFETY: as in `enter`.
        let code = unsafe { OTF2_EvtWriter_MpiCollectiveBegin(w, ptr::null_mut(), t) };
        self.check(code);
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
        let Some((w, t)) = self.stamp(loc, time) else {
            return;
        };
        // SAFETY: as in `enter`; the comm id is defined at close.
        let code = unsafe {
            OTF2_EvtWriter_MpiCollectiveEnd(w, ptr::null_mut(), t, op, comm, root, sent, received)
        };
        self.check(code);
    }

    pub fn send(&mut self, loc: Loc, time: u64, receiver: u32, comm: u32, bytes: u64) {
        let Some((w, t)) = self.stamp(loc, time) else {
            return;
        };
        // SAFETY: as in `collective_end`.
        let code =
            unsafe { OTF2_EvtWriter_MpiSend(w, ptr::null_mut(), t, receiver, comm, 0, bytes) };
        self.check(code);
    }

    pub fn recv(&mut self, loc: Loc, time: u64, sender: u32, comm: u32, bytes: u64) {
        let Some((w, t)) = self.stamp(loc, time) else {
            return;
        };
        // SAFETY: as in `collective_end`.
        let code = unsafe { OTF2_EvtWriter_MpiRecv(w, ptr::null_mut(), t, sender, comm, 0, bytes) };
        self.check(code);
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
        // SAFETY: the close sequence of the OTF2 notes (§1.3) on the owning thread; every
        // writer is closed exactly once.
        unsafe {
            for entry in &self.entries {
                let mut events = 0u64;
                if !entry.writer.is_null() {
                    OTF2_EvtWriter_GetNumberOfEvents(entry.writer, &mut events);
                }
                counts.push(events);
                total += events;
            }
            for index in 0..self.entries.len() {
                let writer = self.entries[index].writer;
                if !writer.is_null() {
                    let code = OTF2_Archive_CloseEvtWriter(self.archive, writer);
                    self.check(code);
                }
            }
            let code = OTF2_Archive_CloseEvtFiles(self.archive);
            self.check(code);
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
            let global = OTF2_Archive_GetGlobalDefWriter(self.archive);
            if global.is_null() {
                self.failed_calls += 1;
            } else {
                let (offset, length) = self.corrected_range(clock_end);
                let code = OTF2_GlobalDefWriter_WriteClockProperties(
                    global,
                    1_000_000_000,
                    offset,
                    length,
                    offset,
                );
                self.check(code);
                self.failed_calls += self.defs.write(global, &counts);
            }
            let code = OTF2_Archive_Close(self.archive);
            self.check(code);
            OTF2_AttributeList_Delete(self.attributes);
        }
        self.archive = ptr::null_mut();
        total
    }

    /// Whether to write the definitions snapshot now: definitions were added since the
    /// last one, and a location holds events back for it or `interval_ns` passed since
    /// `last_ns` (both on the collector's clock, `now_ns`).
    pub fn snapshot_due(&self, now_ns: u64, last_ns: u64, interval_ns: u64) -> bool {
        !self.closed
            && self.gate.holds()
            && (self.gate.held_chunks.load(Ordering::Relaxed) > 0
                || now_ns.saturating_sub(last_ns) >= interval_ns)
    }

    /// Event flushes that could not wait for the definitions snapshot (a location filled
    /// [`MAX_HELD_CHUNKS_PER_LOCATION`] chunks first): a killed process's events of those
    /// flushes may refer to definitions its snapshot lacks.
    pub fn early_flushes(&self) -> u64 {
        self.gate.early_flushes.load(Ordering::Relaxed)
    }

    /// Writes the definitions so far as an archive of their own, without events or local
    /// definitions, `<part>/snapshot/traces.otf2` (replacing the previous one), and the
    /// clock pairs beside it: what the merge needs to read the events a killed process
    /// flushed. Every location has 0 events in it.
    pub fn snapshot(&mut self, now: ClockSample) -> Result<(), String> {
        if self.closed {
            return Ok(());
        }
        let version = self.gate.defs_version.load(Ordering::Relaxed);
        let part = self
            .path
            .parent()
            .ok_or_else(|| "the part has no directory".to_owned())?;
        let fresh = part.join("snapshot.new");
        let current = part.join(SNAPSHOT_DIR);
        let old = part.join("snapshot.old");
        for dir in [&fresh, &old] {
            if dir.exists() {
                std::fs::remove_dir_all(dir)
                    .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
            }
        }
        std::fs::create_dir(&fresh)
            .map_err(|e| format!("cannot create {}: {e}", fresh.display()))?;
        let path = cstring(&fresh.to_string_lossy());
        let name = cstring("traces");
        let (offset, length) = self.corrected_range(now);
        let zeros = vec![0u64; self.defs.location_ids().len()];
        let mut failed = 0u64;
        // SAFETY: the write sequence of the OTF2 notes (§1.3) for an archive of global
        // definitions only, on the collector thread; the flush callbacks are a static.
        unsafe {
            let archive = OTF2_Archive_Open(
                path.as_ptr(),
                name.as_ptr(),
                OTF2_FILEMODE_WRITE as OTF2_FileMode,
                EVENT_CHUNK_BYTES,
                DEFINITION_CHUNK_BYTES,
                OTF2_SUBSTRATE_POSIX as OTF2_FileSubstrate,
                OTF2_COMPRESSION_NONE as OTF2_Compression,
            );
            if archive.is_null() {
                return Err(format!("OTF2 cannot create {}", fresh.display()));
            }
            let codes = [
                OTF2_Archive_SetFlushCallbacks(archive, &FLUSH_CALLBACKS, ptr::null_mut()),
                OTF2_Archive_SetSerialCollectiveCallbacks(archive),
            ];
            failed += codes.iter().filter(|&&c| c != OTF2_SUCCESS).count() as u64;
            let global = OTF2_Archive_GetGlobalDefWriter(archive);
            if global.is_null() {
                failed += 1;
            } else {
                let code = OTF2_GlobalDefWriter_WriteClockProperties(
                    global,
                    1_000_000_000,
                    offset,
                    length,
                    offset,
                );
                failed += u64::from(code != OTF2_SUCCESS);
                failed += self.defs.write(global, &zeros);
            }
            failed += u64::from(OTF2_Archive_Close(archive) != OTF2_SUCCESS);
        }
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
        self.gate.saved_version.store(version, Ordering::Relaxed);
        self.gate.held_chunks.store(0, Ordering::Relaxed);
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
        let fresh = part.join(format!("{SNAPSHOT_CLOCK_FILE}.new"));
        std::fs::write(&fresh, text)
            .and_then(|()| std::fs::rename(&fresh, part.join(SNAPSHOT_CLOCK_FILE)))
            .map_err(|e| format!("cannot write {}: {e}", fresh.display()))
    }

    /// Removes the definitions snapshot: the part is complete without it.
    pub fn remove_snapshot(&self) {
        if let Some(part) = self.path.parent() {
            for name in [SNAPSHOT_DIR, "snapshot.new", "snapshot.old"] {
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
        if self.first_time > self.last_time {
            let now = correct(end.monotonic_ns);
            return (now, 1);
        }
        // One tick of margin each side: readers interpolate the offsets in floating point
        // and may round a timestamp one tick differently.
        let first = correct(self.first_time).saturating_sub(1);
        let last = correct(self.last_time) + 1;
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
