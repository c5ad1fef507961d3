//! Record mode (`NCCL_SCOREP_MODE=…,record`): a copy of every profiler call as NCCL made
//! it — the descriptor's bytes, its strings, the handles and contexts — for `nccl-sim
//! replay` (format in `nccl_scorep_common::recording`, docs/record.md).
//!
//! It sits at the boundary, beside the plugin's own handling of each call and independent
//! of it: the entry points call [`started`], [`stopped`], [`state`], [`init`] and
//! [`finalized`]. On NCCL's threads a call is encoded, as the file holds it, straight into
//! the calling thread's own ring of bytes (no lock, no allocation, no system call after the
//! thread's first call); the [`writer`] thread moves the rings' bytes into the process's
//! file.

mod writer;

use crate::c_string;
use crate::clock;
use crate::context::ContextInfo;
use crate::ring::RoomWait;
use nccl_profiler_abi::fields::{
    self, Span, MAX_DESCR_BYTES, MAX_STATE_ARGS_BYTES, MAX_STRINGS, UNION_OFFSET,
};
use nccl_scorep_common::recording::encode;
use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Whether calls are recorded (set by the first `init` when record mode is on; cleared in
/// a forked child, whose recording would be its parent's file).
static ON: AtomicBool = AtomicBool::new(false);

/// Whether the recording is all the plugin does during the run (`NCCL_SCOREP_MODE=deferred`):
/// the calls are answered with handles the recording issues, and nothing else runs.
static ALONE: AtomicBool = AtomicBool::new(false);

/// A descriptor's 8-byte words.
const DESCR_WORDS: usize = MAX_DESCR_BYTES.div_ceil(8);

/// For the recorded API version, by event type (the type's bit number): which bits of a
/// descriptor's words its fields cover. A start then copies the descriptor whole and keeps
/// those bits, rather than copying its fields one by one.
struct DescrMasks {
    api: u8,
    by_type: [[u64; DESCR_WORDS]; 64],
}

static DESCR_MASKS: OnceLock<DescrMasks> = OnceLock::new();

impl DescrMasks {
    fn of(api: u8) -> DescrMasks {
        let mut by_type = [[0u64; DESCR_WORDS]; 64];
        for (bit, words) in by_type.iter_mut().enumerate() {
            let mut bytes = [0u8; DESCR_WORDS * 8];
            let header = fields::header_spans(api).iter().map(|f| (0, f));
            let member = fields::member_spans(api, 1 << bit).iter();
            for (base, field) in header.chain(member.map(|f| (UNION_OFFSET, f))) {
                let start = (base + field.offset).min(bytes.len());
                let end = (start + field.len).min(bytes.len());
                bytes[start..end].fill(0xff);
            }
            for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
                *word = u64::from_ne_bytes(chunk.try_into().unwrap_or_default());
            }
        }
        DescrMasks { api, by_type }
    }

    /// The masks of an event of type bit `type_bit`, if it is one bit.
    fn of_type(&self, type_bit: u64) -> Option<&[u64; DESCR_WORDS]> {
        (type_bit.count_ones() == 1).then(|| &self.by_type[type_bit.trailing_zeros() as usize])
    }
}

/// The longest string copied; a longer one (or one without a NUL within this bound) is
/// recorded as unreadable, as the plugin itself treats it.
const STRING_BYTES: usize = c_string::MAX_NAME;

/// The longest call's entry: a start with the largest descriptor and every string at its
/// longest. A ring holds at least [`MIN_RING_ENTRIES`] of them.
const LARGEST_ENTRY: usize = encode::largest_start_len(MAX_DESCR_BYTES, MAX_STRINGS, STRING_BYTES);
const MIN_RING_ENTRIES: usize = 16;

/// A call's entry, encoded into contiguous room: in the ring, or aside when the ring's
/// room wraps around its end.
struct EntryOut<'a> {
    room: &'a mut [u8],
    at: usize,
}

impl encode::Out for EntryOut<'_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        // The room was sized by the entry's length; bytes past it are left out (no panic
        // on NCCL's thread).
        if let Some(room) = self.room.get_mut(self.at..self.at + bytes.len()) {
            room.copy_from_slice(bytes);
        }
        self.at += bytes.len();
    }
}

/// What a thread's ring and the writer share.
struct ThreadShared {
    index: u32,
    /// Calls dropped because the ring was full.
    drops: AtomicU64,
    /// The thread, which may sleep until the writer has made room.
    room: RoomWait,
    /// The thread woke the writer since the writer last emptied its ring: one wake-up per
    /// fill, not one per dropped call.
    woke_writer: AtomicBool,
    /// The ring's size, taken from the memory limit's share for rings.
    ring_bytes: usize,
}

impl Drop for ThreadShared {
    /// Both ends are gone: the ring's bytes go back to the rings' share.
    fn drop(&mut self) {
        crate::memory::BUDGET.return_ring(self.ring_bytes);
    }
}

struct ThreadBuffer {
    producer: rtrb::Producer<u8>,
    shared: Arc<ThreadShared>,
    /// The last handle this thread issued (recording alone).
    issued: u64,
}

impl ThreadBuffer {
    /// A handle no other call of the process got: the thread's number above
    /// [`HANDLE_SEQUENCE_BITS`], its count of handles below; never 0 (NULL).
    fn issue_handle(&mut self) -> u64 {
        self.issued = (self.issued + 1) & HANDLE_SEQUENCE_MASK;
        ((u64::from(self.shared.index) + 1) << HANDLE_SEQUENCE_BITS) | self.issued
    }
}

/// Bits of a handle issued in deferred mode that count a thread's handles (a trillion
/// per thread before one repeats); the thread's number is above them.
const HANDLE_SEQUENCE_BITS: u32 = 40;
const HANDLE_SEQUENCE_MASK: u64 = (1 << HANDLE_SEQUENCE_BITS) - 1;

thread_local! {
    static BUFFER: RefCell<Option<ThreadBuffer>> = const { RefCell::new(None) };
}

/// Calls lost because their thread was exiting (its buffer already gone).
static LOST_AT_THREAD_EXIT: AtomicU64 = AtomicU64::new(0);

/// Runs `f` with the calling thread's ring, registering it on the thread's first call.
/// `None` when the thread is exiting (its thread-local storage is gone) or no recorder runs.
#[inline]
fn with_buffer<R>(f: impl FnOnce(&mut ThreadBuffer) -> R) -> Option<R> {
    BUFFER
        .try_with(|cell| {
            let mut buffer = cell.borrow_mut();
            if buffer.is_none() {
                *buffer = register();
            }
            buffer.as_mut().map(f)
        })
        .ok()
        .flatten()
}

/// A thread's first call: its ring, adopted by the writer.
#[cold]
fn register() -> Option<ThreadBuffer> {
    let (producer, shared) = writer::recorder()?.register_thread();
    Some(ThreadBuffer {
        producer,
        shared,
        issued: 0,
    })
}

/// When a call waited for room in its ring (`NCCL_SCOREP_ON_FULL=wait`): NCCL's time the
/// plugin took, for the caller to report as it reports a wait for the plugin's own ring.
#[must_use]
pub struct WaitedSince(pub Option<u64>);

/// Encodes a call of `len` bytes into the calling thread's ring; `encode` writes it, given
/// the thread's number.
#[inline]
fn push(len: usize, encode: impl Fn(&mut EntryOut<'_>, u32)) -> WaitedSince {
    let pushed = with_buffer(|buffer| write_or_wait(buffer, len, &encode).0);
    match pushed {
        Some(waited) => WaitedSince(waited),
        None => {
            LOST_AT_THREAD_EXIT.fetch_add(1, Ordering::Relaxed);
            WaitedSince(None)
        }
    }
}

/// As [`push`], for a start that gets its handle from the recording (deferred mode):
/// `encode` is also given the handle. Returns the handle, or 0 when the call could not be
/// recorded (NCCL then gets NULL and makes no call on it).
#[inline]
fn push_issuing(len: usize, encode: impl Fn(&mut EntryOut<'_>, u32, u64)) -> (WaitedSince, u64) {
    let pushed = with_buffer(|buffer| {
        let handle = buffer.issue_handle();
        let (waited, written) = write_or_wait(buffer, len, &|out, thread| {
            encode(out, thread, handle);
        });
        (waited, if written { handle } else { 0 })
    });
    match pushed {
        Some((waited, handle)) => (WaitedSince(waited), handle),
        None => {
            LOST_AT_THREAD_EXIT.fetch_add(1, Ordering::Relaxed);
            (WaitedSince(None), 0)
        }
    }
}

/// Writes the entry, through [`push_to_full_ring`] when the ring is full: when the call
/// waited, and whether it was written.
#[inline]
fn write_or_wait(
    buffer: &mut ThreadBuffer,
    len: usize,
    encode: &impl Fn(&mut EntryOut<'_>, u32),
) -> (Option<u64>, bool) {
    if write(buffer, len, encode) {
        (None, true)
    } else {
        push_to_full_ring(buffer, len, encode)
    }
}

/// Writes the entry if the ring has room for it.
#[inline]
fn write(buffer: &mut ThreadBuffer, len: usize, encode: &impl Fn(&mut EntryOut<'_>, u32)) -> bool {
    let thread = buffer.shared.index;
    let Ok(mut chunk) = buffer.producer.write_chunk(len) else {
        return false;
    };
    let (first, second) = chunk.as_mut_slices();
    if second.is_empty() {
        encode(&mut EntryOut { room: first, at: 0 }, thread);
    } else {
        write_around_the_end(first, second, len, encode, thread);
    }
    chunk.commit_all();
    true
}

/// Once per turn of the ring, its room wraps around the end: the entry is encoded aside and
/// copied in two parts.
#[cold]
#[inline(never)]
fn write_around_the_end(
    first: &mut [u8],
    second: &mut [u8],
    len: usize,
    encode: &impl Fn(&mut EntryOut<'_>, u32),
    thread: u32,
) {
    let mut aside = [0u8; LARGEST_ENTRY];
    let len = len.min(LARGEST_ENTRY);
    encode(
        &mut EntryOut {
            room: &mut aside[..len],
            at: 0,
        },
        thread,
    );
    let (head, tail) = aside[..len].split_at(first.len().min(len));
    first[..head.len()].copy_from_slice(head);
    if let Some(room) = second.get_mut(..tail.len()) {
        room.copy_from_slice(tail);
    }
}

/// A full ring: the writer empties it now rather than at its next round. With
/// `NCCL_SCOREP_ON_FULL=wait` the thread waits for the room and returns when it began;
/// otherwise the call is dropped and counted. Also says whether the call was written.
#[cold]
#[inline(never)]
fn push_to_full_ring(
    buffer: &mut ThreadBuffer,
    len: usize,
    encode: &impl Fn(&mut EntryOut<'_>, u32),
) -> (Option<u64>, bool) {
    let Some(recorder) = writer::recorder() else {
        buffer.shared.drops.fetch_add(1, Ordering::Relaxed);
        return (None, false);
    };
    recorder.wake_writer_for(&buffer.shared);
    if !recorder.waits_for_room() {
        buffer.shared.drops.fetch_add(1, Ordering::Relaxed);
        return (None, false);
    }
    let since = clock::ticks();
    let in_scorep = crate::scorep_mode::held_back();
    let written = loop {
        buffer.shared.room.wait(|| buffer.producer.slots() < len);
        if write(buffer, len, encode) {
            break true;
        }
        if !recorder.waits_for_room() {
            // The writer has stopped (the process is exiting): nothing will make room.
            buffer.shared.drops.fetch_add(1, Ordering::Relaxed);
            break false;
        }
        recorder.wake_writer_for(&buffer.shared);
    };
    drop(in_scorep);
    (Some(since), written)
}

/// The calling thread's number in the recording.
fn thread_index() -> u32 {
    with_buffer(|buffer| buffer.shared.index).unwrap_or(u32::MAX)
}

/// Starts recording, at the process's first `init` in record mode: opens the file.
pub fn begin(shared: &crate::shared::Shared, api: u8) {
    DESCR_MASKS.get_or_init(|| DescrMasks::of(api));
    if writer::begin(shared, api) {
        let alone = shared.config.mode == crate::config::Mode::Deferred;
        ALONE.store(alone, Ordering::Relaxed);
        ON.store(true, Ordering::Release);
    }
}

/// Whether calls are being recorded (the callbacks then stamp each call once, for both).
#[inline]
pub fn active() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Whether the recording is all that runs (deferred mode): the callbacks then call
/// [`started_alone`], [`stopped`] and [`state`] only. Read after [`active`].
#[inline]
pub fn alone() -> bool {
    ALONE.load(Ordering::Relaxed)
}

/// Turns recording off in a forked child (only an atomic store: safe there).
pub fn stop_in_forked_child() {
    ON.store(false, Ordering::Release);
}

/// `startEvent`, after the plugin answered: what NCCL passed and the handle it got.
///
/// # Safety
/// `handle_out` is NULL or readable; `descr` is NULL or points to the readable bytes
/// (`size_of_descr`) of a descriptor of version `api`, whose string fields are NULL or C
/// strings.
#[inline]
pub unsafe fn started(
    api: u8,
    size_of_descr: usize,
    context: *mut c_void,
    handle_out: *mut *mut c_void,
    descr: *const u8,
    time: u64,
) -> WaitedSince {
    if !ON.load(Ordering::Relaxed) {
        return WaitedSince(None);
    }
    let handle = if handle_out.is_null() {
        0
    } else {
        // SAFETY: non-NULL and readable (caller); the plugin wrote it just before.
        unsafe { *handle_out as u64 }
    };
    // SAFETY: forwarded from the caller.
    let start = unsafe { StartFields::of(api, size_of_descr, descr) };
    let context = context as u64;
    push(start.len(), |out, thread| {
        start.encode(out, thread, time, context, handle)
    })
}

/// `startEvent` in deferred mode, where the recording is all that runs: records the call
/// and answers it with a handle of the recording's own, or NULL when the call could not be
/// recorded (`NCCL_SCOREP_ON_FULL=drop` and a full ring), so that no stop or state comes
/// for an event the recording lacks.
///
/// # Safety
/// `handle_out` is NULL or writable; `descr` as for [`started`].
#[inline]
pub unsafe fn started_alone(
    api: u8,
    size_of_descr: usize,
    context: *mut c_void,
    handle_out: *mut *mut c_void,
    descr: *const u8,
    time: u64,
) -> WaitedSince {
    if handle_out.is_null() {
        // Nowhere to return a handle: nothing NCCL could stop.
        return WaitedSince(None);
    }
    // SAFETY: forwarded from the caller.
    let start = unsafe { StartFields::of(api, size_of_descr, descr) };
    let context = context as u64;
    let (waited, handle) = push_issuing(start.len(), |out, thread, handle| {
        start.encode(out, thread, time, context, handle);
    });
    // SAFETY: non-NULL and writable (caller).
    unsafe { *handle_out = handle as usize as *mut c_void };
    waited
}

/// The fields of a descriptor that a recording keeps, copied from C memory and packed.
struct StartFields<'a> {
    packed: encode::Sparse<MAX_DESCR_BYTES>,
    strings: [(u16, Option<&'a [u8]>); MAX_STRINGS],
    n_strings: usize,
}

impl StartFields<'_> {
    /// # Safety
    /// `descr` is NULL or points to the readable bytes (`size_of_descr`) of a descriptor
    /// of version `api`, whose string fields are NULL or C strings.
    #[inline]
    unsafe fn of(api: u8, size_of_descr: usize, descr: *const u8) -> Self {
        let mut strings = [(0, None); MAX_STRINGS];
        let mut n_strings = 0;
        let mut bytes = [0u8; MAX_DESCR_BYTES];
        let size = if descr.is_null() {
            0
        } else {
            size_of_descr.min(MAX_DESCR_BYTES)
        };
        if size > 0 {
            // The whole descriptor, then only its fields' bits: one copy.
            // SAFETY: `size` readable bytes at `descr` (caller), within `bytes`.
            unsafe { std::ptr::copy_nonoverlapping(descr, bytes.as_mut_ptr(), size) };
            // The type field is a field: set by NCCL.
            let type_bit = fields::type_bit(api, &bytes[..size]);
            let masks = DESCR_MASKS.get().filter(|m| m.api == api);
            match masks.and_then(|masks| masks.of_type(type_bit)) {
                Some(masks) => keep_masked(&mut bytes, masks),
                None => {
                    // A type the masks do not know: field by field.
                    bytes = [0; MAX_DESCR_BYTES];
                    let header = fields::header_spans(api);
                    let member = fields::member_spans(api, type_bit);
                    // SAFETY: as above.
                    unsafe {
                        copy_fields(descr, size, &mut bytes, 0, header);
                        copy_fields(descr, size, &mut bytes, UNION_OFFSET, member);
                    }
                }
            }
            for (string, &offset) in strings
                .iter_mut()
                .zip(fields::string_offsets(api, type_bit))
            {
                let pointer =
                    u64::from_le_bytes(bytes[offset..offset + 8].try_into().unwrap_or_default());
                // SAFETY: the field NCCL filled for this type: NULL or a C string
                // (caller); the bounded reader checks that the memory is readable.
                let text = unsafe { c_string::bounded(pointer as usize as *const _, STRING_BYTES) };
                *string = (offset as u16, text);
                n_strings += 1;
            }
        }
        StartFields {
            packed: encode::Sparse::of(&bytes[..size]),
            strings,
            n_strings,
        }
    }

    /// The entry's length in the file.
    #[inline]
    fn len(&self) -> usize {
        let strings = self.strings[..self.n_strings].iter();
        encode::start_len(&self.packed, strings.map(|(_, text)| text.map(<[u8]>::len)))
    }

    #[inline]
    fn encode(&self, out: &mut EntryOut<'_>, thread: u32, time: u64, context: u64, handle: u64) {
        let strings = self.strings[..self.n_strings].iter().copied();
        encode::start(out, thread, time, context, handle, &self.packed, strings);
    }
}

/// `stopEvent`, with the handle NCCL passed.
#[inline]
pub fn stopped(handle: *mut c_void, time: u64) -> WaitedSince {
    if !ON.load(Ordering::Relaxed) {
        return WaitedSince(None);
    }
    let handle = handle as u64;
    push(encode::stop_len(), |out, thread| {
        encode::stop(out, thread, time, handle)
    })
}

/// Copies the fields `spans` (offsets from `base`) that lie within the `size` bytes at
/// `from` to the same places in `to`. The bytes between them stay zero: padding, or union
/// bytes past the member in use, which a C caller leaves as they were (a few bytes of its
/// stack, not for a file).
///
/// # Safety
/// `size` bytes at `from` are readable.
#[inline]
unsafe fn copy_fields(from: *const u8, size: usize, to: &mut [u8], base: usize, spans: &[Span]) {
    let size = size.min(to.len());
    for field in spans {
        let start = base + field.offset;
        let end = (start + field.len).min(size);
        if start < end {
            // SAFETY: `start..end` lies within the readable bytes (caller) and within `to`.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    from.add(start),
                    to[start..].as_mut_ptr(),
                    end - start,
                )
            };
        }
    }
}

/// Keeps of each 8-byte word of a descriptor only the bits `masks` gives (its fields'):
/// the padding and the union past the member in use become 0.
#[inline]
fn keep_masked(bytes: &mut [u8; MAX_DESCR_BYTES], masks: &[u64; DESCR_WORDS]) {
    for (word, mask) in bytes.chunks_mut(8).zip(masks) {
        let mut whole = [0u8; 8];
        whole[..word.len()].copy_from_slice(word);
        let kept = (u64::from_ne_bytes(whole) & mask).to_ne_bytes();
        word.copy_from_slice(&kept[..word.len()]);
    }
}

/// `recordEventState`, with what NCCL passed: of the arguments, the fields `fields` that
/// the state sets.
///
/// # Safety
/// `args` is NULL or points to `size` readable bytes.
#[inline]
pub unsafe fn state(
    handle: *mut c_void,
    state: i32,
    size: usize,
    fields: &[Span],
    args: *const u8,
    time: u64,
) -> WaitedSince {
    if !ON.load(Ordering::Relaxed) {
        return WaitedSince(None);
    }
    let args = if args.is_null() {
        None
    } else {
        let mut bytes = [0u8; MAX_STATE_ARGS_BYTES];
        let size = size.min(MAX_STATE_ARGS_BYTES);
        // SAFETY: `size` readable bytes (caller).
        unsafe { copy_fields(args, size, &mut bytes, 0, fields) };
        Some(encode::Sparse::<MAX_STATE_ARGS_BYTES>::of(&bytes[..size]))
    };
    let handle = handle as u64;
    push(encode::state_len(args.as_ref()), |out, thread| {
        encode::state(out, thread, time, handle, state, args.as_ref());
    })
}

/// What `init` was passed, kept before the plugin takes it over.
pub struct InitCall {
    info: ContextInfo,
}

impl InitCall {
    pub fn of(info: &ContextInfo) -> InitCall {
        InitCall { info: info.clone() }
    }
}

/// `init`, after the plugin answered: its arguments and the context and mask returned.
///
/// # Safety
/// `context_out` and `mask` are NULL or readable.
pub unsafe fn init(call: InitCall, context_out: *mut *mut c_void, mask: *const i32) {
    if !ON.load(Ordering::Acquire) {
        return;
    }
    // SAFETY: NULL or readable (caller).
    let context = unsafe { context_out.as_ref() }.map_or(0, |&c| c as u64);
    // SAFETY: NULL or readable (caller).
    let mask = unsafe { mask.as_ref() }.copied().unwrap_or(0);
    // Stamped after the plugin's init: the process's first init chooses the clock.
    writer::init(thread_index(), clock::ticks(), context, mask, &call.info);
}

/// `finalize`, before the plugin's own: then everything recorded so far goes to the file.
pub fn finalized(context: *mut c_void) {
    if !ON.load(Ordering::Acquire) {
        return;
    }
    writer::finalize(thread_index(), clock::ticks(), context as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stop or a state, by `i`: entries of 21 and 35 bytes.
    fn call(out: &mut impl encode::Out, thread: u32, i: u64) {
        if i % 3 == 0 {
            encode::stop(out, thread, i, i);
        } else {
            let args = encode::Sparse::<8>::of(&[i as u8; 8]);
            encode::state(out, thread, i, i, 13, Some(&args));
        }
    }

    fn len_of(i: u64) -> usize {
        if i % 3 == 0 {
            encode::stop_len()
        } else {
            encode::state_len(Some(&encode::Sparse::<8>::of(&[1; 8])))
        }
    }

    /// A thread's ring of `bytes`, as thread `index`, and the writer's end of it.
    fn thread_buffer(index: u32, bytes: usize) -> (ThreadBuffer, rtrb::Consumer<u8>) {
        let (producer, consumer) = rtrb::RingBuffer::new(bytes);
        let shared = Arc::new(ThreadShared {
            index,
            drops: AtomicU64::new(0),
            room: RoomWait::for_this_thread(),
            woke_writer: AtomicBool::new(false),
            ring_bytes: 0,
        });
        let buffer = ThreadBuffer {
            producer,
            shared,
            issued: 0,
        };
        (buffer, consumer)
    }

    #[test]
    fn handles_issued_in_deferred_mode_are_never_null_nor_another_thread_s() {
        let (mut first, _) = thread_buffer(0, 100);
        let (mut other, _) = thread_buffer(1, 100);
        let mine: Vec<u64> = (0..1000).map(|_| first.issue_handle()).collect();
        let theirs: Vec<u64> = (0..1000).map(|_| other.issue_handle()).collect();
        let all: std::collections::HashSet<u64> = mine.iter().chain(&theirs).copied().collect();
        assert_eq!(all.len(), 2000);
        assert!(!all.contains(&0));
        // A thread's count wraps within its own bits, never into the next thread's.
        first.issued = HANDLE_SEQUENCE_MASK;
        let wrapped = first.issue_handle();
        assert_eq!(wrapped >> HANDLE_SEQUENCE_BITS, 1);
        assert!(!theirs.contains(&wrapped) && wrapped != 0);
    }

    #[test]
    fn entries_read_back_whole_also_where_they_wrap_around_the_ring_s_end() {
        let (mut buffer, mut consumer) = thread_buffer(3, 100);
        let (mut read, mut expected) = (Vec::new(), Vec::new());
        // About 1 100 bytes through a 100-byte ring, in entries that do not divide it:
        // most turns end inside an entry.
        for i in 0..40u64 {
            assert!(write(&mut buffer, len_of(i), &|out, thread| call(
                out, thread, i
            )));
            call(&mut expected, 3, i);
            let chunk = consumer.read_chunk(consumer.slots()).unwrap();
            let (first, second) = chunk.as_slices();
            read.extend_from_slice(first);
            read.extend_from_slice(second);
            chunk.commit_all();
        }
        assert_eq!(read.len(), expected.len());
        assert!(read == expected, "the bytes differ");
        // No room: refused, nothing written.
        assert!(!write(&mut buffer, 101, &|out, thread| call(
            out, thread, 0
        )));
        assert_eq!(consumer.slots(), 0);
    }
}
