//! One location's OTF2 event file, encoded and written by the plugin itself.
//!
//! OTF2's own event writer keeps a location's events in memory until a chunk is full, and
//! its file layer then collects chunks into 4 MiB blocks before it writes them: a quiet
//! location reaches the disk only when the trace is closed, and every location holds up
//! to 4 MiB more than its chunk. Writing the file here keeps only the unwritten tail of a
//! location's current chunk in memory ([`STAGE_BYTES`], an eighth of OTF2's smallest
//! chunk), writes it whenever it fills or the collector asks ([`EventFile::persist`]), so
//! a killed process leaves nearly all its events and a trace of many locations does not
//! hold a chunk for each; it also costs a fraction of OTF2's per-record work. The format is OTF2 3.x's
//! ([`otf2_sys::event_format`]), read by OTF2 itself; the archive's definitions and
//! anchor are still written by OTF2. Completed chunks are not padded: the hole up to the
//! next chunk reads as end-of-chunk bytes.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use otf2_sys::event_format::{
    chunk_header, ATTRIBUTE_LIST, END_OF_BUFFER, END_OF_FILE, ENTER, HEADER_BYTES, LAST_EVENT_AT,
    LEAVE, MPI_COLLECTIVE_BEGIN, MPI_COLLECTIVE_END, MPI_RECV, MPI_SEND, TIMESTAMP,
};

/// The most one event takes: a timestamp, an attribute list of [`MAX_ATTRIBUTES`] values
/// and the largest record, with room for the end-of-file bytes.
const MAX_EVENT_BYTES: usize = 9 + (11 + MAX_ATTRIBUTES * 15) + 40 + 2;
/// The most an Enter or Leave without attributes takes: a timestamp, the record's type
/// and its region.
const MAX_REGION_EVENT_BYTES: usize = 9 + 1 + 5;
/// Attribute lists of this many attributes or more get the 9-byte length whatever their
/// length, as OTF2's writer gives them: it sizes the length field by the most a list could
/// take (5 bytes for the count and 15 per attribute reach 255 at 17), not by what it takes.
const LONG_LENGTH_ATTRIBUTES: usize = 17;
/// Attributes one event may carry (the plugin writes at most about 20).
pub const MAX_ATTRIBUTES: usize = 64;
/// The bytes of its current chunk a location holds in memory before they go to its file.
pub const STAGE_BYTES: usize = 32 * 1024;
/// The stage a location gets while the plugin's heap is above its limit's mark
/// (`NCCL_SCOREP_MEMORY_LIMIT`): room for a few events, so that thousands of locations
/// written at once cannot hold their full stages.
const SMALL_STAGE_BYTES: usize = 4 * 1024;

/// An attribute value as OTF2 types it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttributeValue {
    Uint64(u64),
    Int64(i64),
    /// A string definition's id.
    StringRef(u32),
}

/// One attribute of an event as the event file takes it: its definition's id and its
/// value. The trace writer's own attribute lists are written as they are, without a
/// copy into another form first.
pub trait EncodedAttribute {
    fn id_and_value(&self) -> (u32, AttributeValue);
}

/// Plain pairs: what the tests give, with ids beyond the plugin's own.
#[cfg(test)]
impl EncodedAttribute for (u32, AttributeValue) {
    #[inline(always)]
    fn id_and_value(&self) -> (u32, AttributeValue) {
        *self
    }
}

impl AttributeValue {
    /// OTF2's type code.
    fn type_code(self) -> u8 {
        match self {
            AttributeValue::Uint64(_) => otf2_sys::OTF2_TYPE_UINT64 as u8,
            AttributeValue::Int64(_) => otf2_sys::OTF2_TYPE_INT64 as u8,
            AttributeValue::StringRef(_) => otf2_sys::OTF2_TYPE_STRING as u8,
        }
    }
}

/// An event record.
#[derive(Clone, Copy, Debug)]
pub enum Event {
    Enter {
        region: u32,
    },
    Leave {
        region: u32,
    },
    MpiSend {
        receiver: u32,
        comm: u32,
        tag: u32,
        bytes: u64,
    },
    MpiRecv {
        sender: u32,
        comm: u32,
        tag: u32,
        bytes: u64,
    },
    MpiCollectiveBegin,
    MpiCollectiveEnd {
        op: u8,
        comm: u32,
        root: u32,
        sent: u64,
        received: u64,
    },
}

/// Writes into a chunk at `pos`. Integers are stored with fixed-size copies of all 8
/// bytes (the bytes past the value are overwritten by what follows, or never written to
/// the file): the chunk keeps [`SLACK`] bytes of room for that.
struct Out<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

/// Room kept after the last byte an event may take, for the fixed-size copies of integers
/// (up to 8 bytes past the value's last one).
const SLACK: usize = 16;

impl Out<'_> {
    #[inline]
    fn byte(&mut self, value: u8) {
        self.buf[self.pos] = value;
        self.pos += 1;
    }

    #[inline]
    fn full_u64(&mut self, value: u64) {
        self.buf[self.pos..self.pos + 8].copy_from_slice(&value.to_le_bytes());
        self.pos += 8;
    }

    /// `value` compressed: 0 and `all_ones` as one byte, others as a byte count and the
    /// value's significant little-endian bytes. (0 is the count 0 with no bytes.)
    #[inline]
    fn unsigned(&mut self, value: u64, all_ones: u64) {
        if value == all_ones {
            self.byte(0xff);
            return;
        }
        let bytes = 8 - (value.leading_zeros() / 8) as usize;
        let window = &mut self.buf[self.pos..self.pos + 9];
        window[0] = bytes as u8;
        window[1..].copy_from_slice(&value.to_le_bytes());
        self.pos += 1 + bytes;
    }

    #[inline]
    fn u32(&mut self, value: u32) {
        self.unsigned(u64::from(value), u64::from(u32::MAX));
    }

    #[inline]
    fn u64(&mut self, value: u64) {
        self.unsigned(value, u64::MAX);
    }

    /// A signed value: like an unsigned one, but a negative one in all 8 bytes.
    #[inline]
    fn i64(&mut self, value: i64) {
        if value < 0 {
            self.byte(8);
            self.full_u64(value as u64);
        } else {
            self.u64(value as u64);
        }
    }

    /// A record's length and data (written by `data`): one byte, or 0xff and 8 bytes for
    /// 255 bytes and more.
    #[inline]
    fn with_length(&mut self, data: impl FnOnce(&mut Self)) {
        self.with_length_form(false, data);
    }

    /// [`Out::with_length`], with the 0xff and 8 bytes whatever the length when `long`.
    #[inline]
    fn with_length_form(&mut self, long: bool, data: impl FnOnce(&mut Self)) {
        let length_at = self.pos;
        self.pos += 1;
        data(self);
        let length = self.pos - length_at - 1;
        if length < 255 && !long {
            self.buf[length_at] = length as u8;
        } else {
            self.buf.copy_within(length_at + 1..self.pos, length_at + 9);
            self.buf[length_at] = 0xff;
            self.buf[length_at + 1..length_at + 9].copy_from_slice(&(length as u64).to_le_bytes());
            self.pos += 8;
        }
    }
}

impl Out<'_> {
    /// An attribute list record, when there are attributes.
    #[inline]
    fn attribute_list<A: EncodedAttribute>(&mut self, attributes: &[A]) {
        if attributes.is_empty() {
            return;
        }
        self.byte(ATTRIBUTE_LIST);
        self.with_length_form(attributes.len() >= LONG_LENGTH_ATTRIBUTES, |out| {
            out.u32(attributes.len() as u32);
            for attribute in attributes {
                let (id, value) = attribute.id_and_value();
                out.attribute(id, value);
            }
        });
    }

    /// One attribute: its id, its type and its value, each as
    /// [`Out::attribute_any_id`] writes them; for the ids 1 to 255 (the plugin's) in one
    /// window of the buffer, checked once, instead of a check per byte.
    #[inline]
    fn attribute(&mut self, id: u32, value: AttributeValue) {
        let Ok(short_id @ 1..=255) = u8::try_from(id) else {
            self.attribute_any_id(id, value);
            return;
        };
        // The value's bytes, and how many of them are significant (`None`: all ones,
        // written as 0xff alone). A negative signed value takes all 8.
        let (raw, significant) = match value {
            AttributeValue::Uint64(u64::MAX) => (0, None),
            AttributeValue::Uint64(v) => (v, Some(8 - (v.leading_zeros() / 8) as usize)),
            AttributeValue::Int64(v) if v < 0 => (v as u64, Some(8)),
            AttributeValue::Int64(v) => (v as u64, Some(8 - (v.leading_zeros() / 8) as usize)),
            AttributeValue::StringRef(u32::MAX) => (0, None),
            AttributeValue::StringRef(v) => {
                (u64::from(v), Some(4 - (v.leading_zeros() / 8) as usize))
            }
        };
        let window: &mut [u8; 16] = (&mut self.buf[self.pos..self.pos + 16])
            .try_into()
            .expect("16 bytes");
        window[0] = 1;
        window[1] = short_id;
        window[2] = value.type_code();
        match significant {
            None => {
                window[3] = 0xff;
                self.pos += 4;
            }
            Some(bytes) => {
                window[3] = bytes as u8;
                window[4..12].copy_from_slice(&raw.to_le_bytes());
                self.pos += 4 + bytes;
            }
        }
    }

    /// One attribute, field by field: any id.
    fn attribute_any_id(&mut self, id: u32, value: AttributeValue) {
        self.u32(id);
        self.byte(value.type_code());
        match value {
            AttributeValue::Uint64(v) => self.u64(v),
            AttributeValue::Int64(v) => self.i64(v),
            AttributeValue::StringRef(v) => self.u32(v),
        }
    }
}

/// One location's event file being written.
pub struct EventFile {
    path: PathBuf,
    /// Opened when something is first written.
    file: Option<File>,
    chunk_bytes: usize,
    /// The current chunk's bytes from `persisted` to `len` (the ones not in the file yet;
    /// the chunk's header too until its first bytes are written). Empty while everything
    /// is in the file and the location is quiet ([`EventFile::release_stage`]).
    stage: Box<[u8]>,
    /// The most a stage may hold: [`STAGE_BYTES`], or less for a small chunk.
    stage_capacity: usize,
    /// The current chunk's length so far.
    len: usize,
    /// Its index in the file.
    chunk_index: u64,
    /// Bytes of the current chunk already in the file.
    persisted: usize,
    /// The header's last-event field of the current chunk, as it is in the file.
    persisted_last_event: u64,
    /// Events written so far (the file's, not the chunk's).
    events: u64,
    /// The time of the last timestamp record in the current chunk.
    time: Option<u64>,
    finished: bool,
    /// A write to the file failed: some of what was written is not in it.
    write_failed: bool,
}

impl EventFile {
    pub fn new(path: PathBuf, chunk_bytes: u64) -> EventFile {
        let chunk_bytes = chunk_bytes as usize;
        let mut file = EventFile {
            path,
            file: None,
            chunk_bytes,
            stage: Box::default(),
            stage_capacity: STAGE_BYTES.min(chunk_bytes),
            len: 0,
            chunk_index: 0,
            persisted: 0,
            persisted_last_event: 0,
            events: 0,
            time: None,
            finished: false,
            write_failed: false,
        };
        file.start_chunk();
        file
    }

    /// Events written.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The file's length once everything written so far is in it.
    pub fn length(&self) -> u64 {
        self.chunk_index * self.chunk_bytes as u64 + self.len as u64
    }

    /// Whether every write to the file succeeded.
    pub fn all_written(&self) -> bool {
        !self.write_failed
    }

    /// Bytes of events not yet in the file.
    pub fn unpersisted(&self) -> usize {
        self.len - self.persisted
    }

    /// Gives the stage its memory back if it was released.
    fn ensure_stage(&mut self) {
        if self.stage.is_empty() {
            self.stage = vec![0u8; self.next_stage_bytes()].into_boxed_slice();
        }
    }

    /// The size a released stage gets when it is needed again.
    fn next_stage_bytes(&self) -> usize {
        if crate::memory::BUDGET.shedding() {
            self.stage_capacity.min(SMALL_STAGE_BYTES)
        } else {
            self.stage_capacity
        }
    }

    /// Frees the stage when everything it held is in the file: a quiet location then
    /// holds no buffer (it is allocated again at its next event).
    pub fn release_stage(&mut self) {
        if self.len == self.persisted {
            self.stage = Box::default();
        }
    }

    /// Bytes of memory the stage holds now.
    #[cfg(test)]
    fn stage_bytes(&self) -> usize {
        self.stage.len()
    }

    fn start_chunk(&mut self) {
        self.ensure_stage();
        // The last event's number is set when the chunk goes to the file.
        self.stage[..HEADER_BYTES].copy_from_slice(&chunk_header(self.events + 1, 0));
        self.len = HEADER_BYTES;
        self.persisted = 0;
        self.persisted_last_event = 0;
        self.time = None;
    }

    /// Whether the next event fits in the current chunk; when not, [`EventFile::next_chunk`]
    /// must come first.
    pub fn has_room(&self) -> bool {
        self.has_room_for(0)
    }

    /// Whether the next event and `more` Enter or Leave records without attributes fit in
    /// the current chunk.
    #[inline]
    pub fn has_room_for(&self, more: usize) -> bool {
        self.len + MAX_EVENT_BYTES + more * MAX_REGION_EVENT_BYTES + SLACK <= self.chunk_bytes
    }

    /// Whether the next event fits in memory; when not, [`EventFile::persist`] must come
    /// first.
    pub fn stage_has_room(&self) -> bool {
        self.stage_has_room_for(0)
    }

    /// Whether the next event and `more` Enter or Leave records without attributes fit in
    /// memory.
    #[inline]
    pub fn stage_has_room_for(&self, more: usize) -> bool {
        let stage = if self.stage.is_empty() {
            self.next_stage_bytes()
        } else {
            self.stage.len()
        };
        self.len - self.persisted + MAX_EVENT_BYTES + more * MAX_REGION_EVENT_BYTES + SLACK <= stage
    }

    /// Ends the current chunk (its end-of-chunk bytes are the hole up to the next one),
    /// writes what is not yet in the file, and starts the next chunk.
    pub fn next_chunk(&mut self) -> std::io::Result<()> {
        let result = self.persist();
        self.chunk_index += 1;
        self.start_chunk();
        result
    }

    /// Appends one event with its attributes at `time` (not before the last one). The
    /// caller made room ([`EventFile::has_room`]).
    pub fn write<A: EncodedAttribute>(&mut self, time: u64, attributes: &[A], event: Event) {
        debug_assert!(
            self.has_room() && self.stage_has_room() && attributes.len() <= MAX_ATTRIBUTES
        );
        self.ensure_stage();
        let mut out = Out {
            buf: &mut self.stage,
            pos: self.len - self.persisted,
        };
        if self.time.is_none_or(|last| time > last) {
            out.byte(TIMESTAMP);
            out.full_u64(time);
            self.time = Some(time);
        }
        out.attribute_list(attributes);
        match event {
            // A single compressed field and no length.
            Event::Enter { region } => {
                out.byte(ENTER);
                out.u32(region);
            }
            Event::Leave { region } => {
                out.byte(LEAVE);
                out.u32(region);
            }
            Event::MpiSend {
                receiver,
                comm,
                tag,
                bytes,
            } => {
                out.byte(MPI_SEND);
                out.with_length(|out| {
                    out.u32(receiver);
                    out.u32(comm);
                    out.u32(tag);
                    out.u64(bytes);
                });
            }
            Event::MpiRecv {
                sender,
                comm,
                tag,
                bytes,
            } => {
                out.byte(MPI_RECV);
                out.with_length(|out| {
                    out.u32(sender);
                    out.u32(comm);
                    out.u32(tag);
                    out.u64(bytes);
                });
            }
            Event::MpiCollectiveBegin => {
                out.byte(MPI_COLLECTIVE_BEGIN);
                out.byte(0);
            }
            Event::MpiCollectiveEnd {
                op,
                comm,
                root,
                sent,
                received,
            } => {
                out.byte(MPI_COLLECTIVE_END);
                out.with_length(|out| {
                    out.byte(op);
                    out.u32(comm);
                    out.u32(root);
                    out.u64(sent);
                    out.u64(received);
                });
            }
        }
        self.len = self.persisted + out.pos;
        self.events += 1;
    }

    /// Appends Enter and Leave records, each `(time, region, leave)`, the first with
    /// `attributes`: the same bytes as one [`EventFile::write`] each, with the work of
    /// one. Times are in order and not before the last one. The caller made room
    /// ([`EventFile::has_room_for`] the records after the first).
    pub fn write_region_events<A: EncodedAttribute>(
        &mut self,
        attributes: &[A],
        events: &[(u64, u32, bool)],
    ) {
        debug_assert!(
            self.has_room_for(events.len().saturating_sub(1))
                && self.stage_has_room_for(events.len().saturating_sub(1))
                && attributes.len() <= MAX_ATTRIBUTES
        );
        self.ensure_stage();
        let mut out = Out {
            buf: &mut self.stage,
            pos: self.len - self.persisted,
        };
        let mut last = self.time;
        let mut attributes = attributes;
        for &(time, region, leave) in events {
            if last.is_none_or(|last| time > last) {
                out.byte(TIMESTAMP);
                out.full_u64(time);
                last = Some(time);
            }
            out.attribute_list(std::mem::take(&mut attributes));
            out.byte(if leave { LEAVE } else { ENTER });
            out.u32(region);
        }
        self.time = last;
        self.len = self.persisted + out.pos;
        self.events += events.len() as u64;
    }

    /// Writes to the file what the current chunk holds and the file does not: the new
    /// records and the chunk's event count. A reader of the file (a killed process's)
    /// then finds every event written so far.
    pub fn persist(&mut self) -> std::io::Result<()> {
        let result = self.write_to_file();
        self.write_failed |= result.is_err();
        result
    }

    fn write_to_file(&mut self) -> std::io::Result<()> {
        let last_event = self.events;
        if self.persisted == self.len && self.persisted_last_event == last_event {
            return Ok(());
        }
        let last_event_bytes = last_event.to_ne_bytes();
        if self.persisted == 0 {
            // The header is still in memory: it goes with the chunk's first bytes.
            self.stage[LAST_EVENT_AT..HEADER_BYTES].copy_from_slice(&last_event_bytes);
        }
        if self.file.is_none() {
            if let Some(dir) = self.path.parent() {
                nccl_scorep_common::safe_file::create_dirs(dir)?;
            }
            self.file = Some(nccl_scorep_common::safe_file::create(&self.path)?);
        }
        let file = self.file.as_ref().expect("opened above");
        let start = self.chunk_index * self.chunk_bytes as u64;
        if self.persisted > 0 && self.persisted_last_event != last_event {
            file.write_all_at(&last_event_bytes, start + LAST_EVENT_AT as u64)?;
        }
        file.write_all_at(
            &self.stage[..self.len - self.persisted],
            start + self.persisted as u64,
        )?;
        // What is in the file leaves memory: the stage starts again at `len`.
        self.persisted = self.len;
        self.persisted_last_event = last_event;
        Ok(())
    }

    /// Ends the file (end of file after the last record) and writes what is left.
    pub fn finish(&mut self) -> std::io::Result<()> {
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        self.ensure_stage();
        // The stage keeps room for these two bytes (SLACK).
        let at = self.len - self.persisted;
        self.stage[at] = END_OF_FILE;
        self.stage[at + 1] = END_OF_BUFFER;
        self.len += 2;
        let result = self.persist();
        self.file = None;
        self.stage = Box::default();
        result
    }

    /// The number of the current chunk's first event, before the chunk reached the file
    /// (for tests).
    #[cfg(test)]
    fn chunk_first_event(&self) -> u64 {
        use otf2_sys::event_format::FIRST_EVENT_AT;
        assert_eq!(self.persisted, 0, "the header is in the file");
        u64::from_ne_bytes(
            self.stage[FIRST_EVENT_AT..FIRST_EVENT_AT + 8]
                .try_into()
                .expect("8 bytes"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use otf2_sys::*;
    use std::ffi::CString;

    const CHUNK: u64 = 256 * 1024;

    /// A record of the test sequence: time, attributes, event.
    type Step = (u64, Vec<(u32, AttributeValue)>, Event);

    fn sequence() -> Vec<Step> {
        let many: Vec<(u32, AttributeValue)> = (0..30)
            .map(|i| (i, AttributeValue::Uint64(u64::MAX - u64::from(i))))
            .collect();
        // Short lists at the bound where OTF2 takes the long length field: 17 small
        // attributes (under 255 bytes) get it, 16 do not.
        let small = |count: u32| -> Vec<(u32, AttributeValue)> {
            (1..=count)
                .map(|i| (i, AttributeValue::StringRef(i)))
                .collect()
        };
        vec![
            (0, vec![], Event::Enter { region: 0 }),
            (
                5,
                vec![
                    (0, AttributeValue::Uint64(0)),
                    (1, AttributeValue::Int64(-3)),
                    (2, AttributeValue::Int64(70_000)),
                    (3, AttributeValue::StringRef(300)),
                    (4, AttributeValue::Uint64(u64::MAX)),
                    (5, AttributeValue::Int64(0)),
                    (6, AttributeValue::Int64(i64::MIN)),
                    (7, AttributeValue::Int64(i64::MAX)),
                    (8, AttributeValue::StringRef(0)),
                    (9, AttributeValue::StringRef(u32::MAX)),
                    (10, AttributeValue::StringRef(u32::MAX - 1)),
                    (11, AttributeValue::Uint64(u64::MAX - 1)),
                    (12, AttributeValue::Uint64(1 << 56)),
                    (255, AttributeValue::Uint64(255)),
                    (256, AttributeValue::Uint64(256)),
                    (300, AttributeValue::Int64(-1)),
                ],
                Event::Enter { region: 70_000 },
            ),
            (5, vec![], Event::MpiCollectiveBegin),
            (6, small(16), Event::Enter { region: 1 }),
            (6, small(17), Event::Leave { region: 1 }),
            (
                1 << 40,
                vec![],
                Event::MpiCollectiveEnd {
                    op: 4,
                    comm: 1,
                    root: u32::MAX,
                    sent: 1 << 33,
                    received: 0,
                },
            ),
            (
                (1 << 40) + 1,
                vec![],
                Event::MpiSend {
                    receiver: 3,
                    comm: 0,
                    tag: 0,
                    bytes: 4096,
                },
            ),
            (
                (1 << 40) + 1,
                vec![],
                Event::MpiRecv {
                    sender: 255,
                    comm: 256,
                    tag: 0,
                    bytes: u64::MAX,
                },
            ),
            ((1 << 40) + 2, many, Event::Leave { region: 70_000 }),
            (u64::MAX - 1, vec![], Event::Leave { region: 0 }),
        ]
    }

    /// The event file OTF2's own event writer makes of `steps`.
    fn written_by_otf2(dir: &std::path::Path, steps: &[Step]) -> Vec<u8> {
        let path = CString::new(dir.to_str().unwrap()).unwrap();
        let archive = otf2_sys::writing::create_archive(&path, CHUNK, CHUNK).unwrap();
        // SAFETY: OTF2's write sequence on this thread, on the archive just
        // opened; the attribute list and the writer are used between their creation and
        // their deletion only.
        unsafe {
            assert_eq!(OTF2_Archive_OpenEvtFiles(archive), OTF2_SUCCESS);
            let writer = OTF2_Archive_GetEvtWriter(archive, 0);
            let list = OTF2_AttributeList_New();
            for (time, attributes, event) in steps {
                for &(id, value) in attributes {
                    let code = match value {
                        AttributeValue::Uint64(v) => OTF2_AttributeList_AddUint64(list, id, v),
                        AttributeValue::Int64(v) => OTF2_AttributeList_AddInt64(list, id, v),
                        AttributeValue::StringRef(v) => {
                            OTF2_AttributeList_AddStringRef(list, id, v)
                        }
                    };
                    assert_eq!(code, OTF2_SUCCESS);
                }
                let t = *time;
                let code = match *event {
                    Event::Enter { region } => OTF2_EvtWriter_Enter(writer, list, t, region),
                    Event::Leave { region } => OTF2_EvtWriter_Leave(writer, list, t, region),
                    Event::MpiSend {
                        receiver,
                        comm,
                        tag,
                        bytes,
                    } => OTF2_EvtWriter_MpiSend(writer, list, t, receiver, comm, tag, bytes),
                    Event::MpiRecv {
                        sender,
                        comm,
                        tag,
                        bytes,
                    } => OTF2_EvtWriter_MpiRecv(writer, list, t, sender, comm, tag, bytes),
                    Event::MpiCollectiveBegin => OTF2_EvtWriter_MpiCollectiveBegin(writer, list, t),
                    Event::MpiCollectiveEnd {
                        op,
                        comm,
                        root,
                        sent,
                        received,
                    } => OTF2_EvtWriter_MpiCollectiveEnd(
                        writer, list, t, op, comm, root, sent, received,
                    ),
                };
                assert_eq!(code, OTF2_SUCCESS);
            }
            OTF2_AttributeList_Delete(list);
            assert_eq!(OTF2_Archive_CloseEvtWriter(archive, writer), OTF2_SUCCESS);
            assert_eq!(OTF2_Archive_CloseEvtFiles(archive), OTF2_SUCCESS);
            OTF2_Archive_Close(archive);
        }
        std::fs::read(dir.join("traces").join("0.evt")).unwrap()
    }

    fn written_here(path: &std::path::Path, steps: &[Step]) -> EventFile {
        let mut file = EventFile::new(path.to_owned(), CHUNK);
        for (time, attributes, event) in steps {
            assert!(file.has_room());
            if !file.stage_has_room() {
                file.persist().unwrap();
            }
            file.write(*time, attributes, *event);
        }
        file
    }

    #[test]
    fn events_are_encoded_byte_for_byte_as_otf2_encodes_them() {
        let dir = tempfile::tempdir().unwrap();
        let steps = sequence();
        let expected = written_by_otf2(&dir.path().join("otf2"), &steps);
        let ours = dir.path().join("ours.evt");
        let mut file = written_here(&ours, &steps);
        assert_eq!(file.events(), steps.len() as u64);
        file.finish().unwrap();
        assert_eq!(std::fs::read(&ours).unwrap(), expected);

        // A location without events.
        let expected = written_by_otf2(&dir.path().join("otf2-empty"), &[]);
        assert_eq!(expected, otf2_sys::event_format::empty_event_file());
        let empty = dir.path().join("empty.evt");
        written_here(&empty, &[]).finish().unwrap();
        assert_eq!(std::fs::read(&empty).unwrap(), expected);
    }

    /// Intervals written at once (an Enter with attributes, inner parts, a Leave, some at
    /// equal times) are the bytes OTF2 writes for the same records one by one.
    #[test]
    fn region_events_written_at_once_are_what_otf2_writes() {
        let dir = tempfile::tempdir().unwrap();
        let attributes = vec![
            (0, AttributeValue::Uint64(7)),
            (1, AttributeValue::Int64(-3)),
            (2, AttributeValue::StringRef(300)),
        ];
        type Batch = (Vec<(u32, AttributeValue)>, Vec<(u64, u32, bool)>);
        let batches: Vec<Batch> = vec![
            (
                attributes,
                vec![(10, 1, false), (10, 2, false), (12, 2, true), (15, 1, true)],
            ),
            (vec![], vec![(15, 3, false), (20, 3, true)]),
            (
                vec![(5, AttributeValue::Uint64(u64::MAX))],
                vec![
                    (21, 70_000, false),
                    (22, 4, false),
                    (22, 4, true),
                    (30, 70_000, true),
                ],
            ),
        ];
        let steps: Vec<Step> = batches
            .iter()
            .flat_map(|(attributes, events)| {
                events
                    .iter()
                    .enumerate()
                    .map(|(i, &(time, region, leave))| {
                        let attributes = if i == 0 { attributes.clone() } else { vec![] };
                        let event = if leave {
                            Event::Leave { region }
                        } else {
                            Event::Enter { region }
                        };
                        (time, attributes, event)
                    })
            })
            .collect();
        let expected = written_by_otf2(&dir.path().join("otf2"), &steps);
        let ours = dir.path().join("ours.evt");
        let mut file = EventFile::new(ours.clone(), CHUNK);
        for (attributes, events) in &batches {
            assert!(file.has_room_for(events.len() - 1));
            file.write_region_events(attributes, events);
        }
        assert_eq!(file.events(), steps.len() as u64);
        file.finish().unwrap();
        assert_eq!(std::fs::read(&ours).unwrap(), expected);
    }

    #[test]
    fn what_is_persisted_reads_as_the_events_so_far() {
        let dir = tempfile::tempdir().unwrap();
        let steps = sequence();
        let path = dir.path().join("traces").join("7.evt");
        let mut file = written_here(&path, &steps[..3]);
        file.persist().unwrap();
        // The header counts the three events; the records follow it.
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!(on_disk.len(), file.len);
        assert_eq!(on_disk[LAST_EVENT_AT], 3);
        for (time, attributes, event) in &steps[3..] {
            file.write(*time, attributes, *event);
        }
        file.persist().unwrap();
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!(on_disk[LAST_EVENT_AT], steps.len() as u8);
        // The same bytes as the events written in one go.
        let whole = dir.path().join("whole.evt");
        written_here(&whole, &steps).persist().unwrap();
        assert_eq!(on_disk, std::fs::read(&whole).unwrap());
        // Nothing new: nothing written.
        assert_eq!(file.unpersisted(), 0);
    }

    #[test]
    fn a_released_stage_holds_no_memory_and_the_file_is_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let steps = sequence();
        let path = dir.path().join("released.evt");
        let mut file = EventFile::new(path.clone(), CHUNK);
        file.release_stage();
        assert!(file.stage_bytes() > 0, "the header is not in the file yet");
        for (time, attributes, event) in &steps {
            file.persist().unwrap();
            file.release_stage();
            assert_eq!(file.stage_bytes(), 0, "a quiet location holds no buffer");
            file.write(*time, attributes, *event);
            assert_eq!(file.stage_bytes(), STAGE_BYTES);
        }
        file.finish().unwrap();
        let whole = dir.path().join("whole.evt");
        written_here(&whole, &steps).finish().unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            std::fs::read(&whole).unwrap()
        );
    }

    #[test]
    fn chunks_are_numbered_and_placed_at_their_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.evt");
        let mut file = EventFile::new(path.clone(), CHUNK);
        let mut chunks = 1;
        for time in 0..100_000u64 {
            if !file.has_room() {
                file.next_chunk().unwrap();
                chunks += 1;
                assert_eq!(file.chunk_first_event(), file.events() + 1);
            } else if !file.stage_has_room() {
                file.persist().unwrap();
            }
            file.write::<(u32, AttributeValue)>(time, &[], Event::Enter { region: 1 });
            // Memory holds a stage, not a chunk.
            assert!(file.unpersisted() < STAGE_BYTES);
        }
        file.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert!(chunks > 1);
        assert_eq!(bytes.len() as u64 / CHUNK + 1, chunks);
        let mut expected_first = 1;
        for chunk in bytes.chunks(CHUNK as usize) {
            assert_eq!(chunk[0], otf2_sys::event_format::CHUNK_HEADER);
            let first = u64::from_ne_bytes(chunk[2..10].try_into().unwrap());
            let last = u64::from_ne_bytes(chunk[10..18].try_into().unwrap());
            assert_eq!(first, expected_first);
            assert!(last >= first);
            expected_first = last + 1;
        }
        assert_eq!(expected_first, 100_001);
    }
}
