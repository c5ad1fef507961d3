//! Record mode (`NCCL_SCOREP_MODE=…,record`): a copy of every profiler call as NCCL made
//! it — the descriptor's bytes, its strings, the handles and contexts — for `nccl-sim
//! replay` (format in `nccl_scorep_common::recording`, docs/record.md).
//!
//! It sits at the boundary, beside the plugin's own handling of each call and independent
//! of it: the entry points call [`started`], [`stopped`], [`state`], [`init`] and
//! [`finalized`]. On NCCL's threads a call is copied into a fixed-size [`Slot`] of the
//! calling thread's own ring (no lock, no allocation, no system call after the thread's
//! first call); the [`writer`] thread encodes the rings into the process's file.

mod writer;

use crate::c_string;
use crate::clock;
use crate::context::ContextInfo;
use crate::ring::RoomWait;
use nccl_profiler_abi::fields::{
    self, Span, MAX_DESCR_BYTES, MAX_STATE_ARGS_BYTES, MAX_STRINGS, UNION_OFFSET,
};
use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Whether calls are recorded (set by the first `init` when record mode is on; cleared in
/// a forked child, whose recording would be its parent's file).
static ON: AtomicBool = AtomicBool::new(false);

/// The longest string copied; a longer one (or one without a NUL within this bound) is
/// recorded as unreadable, as the plugin itself treats it.
const STRING_BYTES: usize = c_string::MAX_NAME;

#[derive(Clone, Copy, PartialEq, Eq)]
enum What {
    Start,
    Stop,
    State,
}

/// One call on NCCL's thread, copied as it came.
#[derive(Clone, Copy)]
struct Slot {
    what: What,
    /// Descriptor bytes (start) or state-argument bytes (state) used.
    len: u8,
    /// State arguments were NULL.
    null_args: bool,
    n_strings: u8,
    state: i32,
    time: u64,
    handle: u64,
    context: u64,
    bytes: [u8; MAX_DESCR_BYTES],
    string_offsets: [u16; MAX_STRINGS],
    /// `u16::MAX`: NULL or unreadable.
    string_lens: [u16; MAX_STRINGS],
    strings: [[u8; STRING_BYTES]; MAX_STRINGS],
}

impl Slot {
    #[inline]
    fn new(what: What, time: u64, handle: u64) -> Slot {
        Slot {
            what,
            len: 0,
            null_args: false,
            n_strings: 0,
            state: 0,
            time,
            handle,
            context: 0,
            bytes: [0; MAX_DESCR_BYTES],
            string_offsets: [0; MAX_STRINGS],
            string_lens: [0; MAX_STRINGS],
            strings: [[0; STRING_BYTES]; MAX_STRINGS],
        }
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
}

struct ThreadBuffer {
    producer: rtrb::Producer<Slot>,
    shared: Arc<ThreadShared>,
}

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
    Some(ThreadBuffer { producer, shared })
}

/// When a call waited for room in its ring (`NCCL_SCOREP_ON_FULL=wait`): NCCL's time the
/// plugin took, for the caller to report as it reports a wait for the plugin's own ring.
#[must_use]
pub struct WaitedSince(pub Option<u64>);

#[inline]
fn push(slot: Slot) -> WaitedSince {
    let pushed = with_buffer(|buffer| match buffer.producer.push(slot) {
        Ok(()) => None,
        Err(rtrb::PushError::Full(slot)) => push_to_full_ring(buffer, slot),
    });
    match pushed {
        Some(waited) => WaitedSince(waited),
        None => {
            LOST_AT_THREAD_EXIT.fetch_add(1, Ordering::Relaxed);
            WaitedSince(None)
        }
    }
}

/// A full ring: the writer empties it now rather than at its next round. With
/// `NCCL_SCOREP_ON_FULL=wait` the thread waits for the room and returns when it began;
/// otherwise the call is dropped and counted.
#[cold]
#[inline(never)]
fn push_to_full_ring(buffer: &mut ThreadBuffer, mut slot: Slot) -> Option<u64> {
    let Some(recorder) = writer::recorder() else {
        buffer.shared.drops.fetch_add(1, Ordering::Relaxed);
        return None;
    };
    recorder.wake_writer_for(&buffer.shared);
    if !recorder.waits_for_room() {
        buffer.shared.drops.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    let since = clock::ticks();
    let in_scorep = crate::scorep_mode::held_back();
    loop {
        buffer.shared.room.wait(|| buffer.producer.is_full());
        match buffer.producer.push(slot) {
            Ok(()) => break,
            Err(rtrb::PushError::Full(back)) => slot = back,
        }
        if !recorder.waits_for_room() {
            // The writer has stopped (the process is exiting): nothing will make room.
            buffer.shared.drops.fetch_add(1, Ordering::Relaxed);
            break;
        }
        recorder.wake_writer_for(&buffer.shared);
    }
    drop(in_scorep);
    Some(since)
}

/// The calling thread's number in the recording.
fn thread_index() -> u32 {
    with_buffer(|buffer| buffer.shared.index).unwrap_or(u32::MAX)
}

/// Starts recording, at the process's first `init` in record mode: opens the file.
pub fn begin(shared: &crate::shared::Shared, api: u8) {
    if writer::begin(shared, api) {
        ON.store(true, Ordering::Release);
    }
}

/// Whether calls are being recorded (the callbacks then stamp each call once, for both).
#[inline]
pub fn active() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Turns recording off in a forked child (only an atomic store: safe there).
pub fn stop_in_forked_child() {
    ON.store(false, Ordering::Release);
}

/// `startEvent`, after the plugin answered: what NCCL passed and the handle it got.
///
/// # Safety
/// `handle_out` is NULL or readable; `descr` is NULL or points to `size` readable bytes
/// of a descriptor of version `api`, whose string fields are NULL or C strings.
#[inline]
pub unsafe fn started(
    api: u8,
    size: usize,
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
    let mut slot = Slot::new(What::Start, time, handle);
    slot.context = context as u64;
    if !descr.is_null() {
        let size = size.min(MAX_DESCR_BYTES);
        // SAFETY: `size` readable bytes at `descr` (caller).
        unsafe { copy_fields(descr, size, &mut slot.bytes, 0, fields::header_spans(api)) };
        let type_bit = fields::type_bit(api, &slot.bytes[..size]);
        let member = fields::member_spans(api, type_bit);
        // SAFETY: as above.
        unsafe { copy_fields(descr, size, &mut slot.bytes, UNION_OFFSET, member) };
        slot.len = size as u8;
        for (i, &offset) in fields::string_offsets(api, type_bit).iter().enumerate() {
            let pointer = u64::from_le_bytes(
                slot.bytes[offset..offset + 8]
                    .try_into()
                    .unwrap_or_default(),
            );
            // SAFETY: the field NCCL filled for this type: NULL or a C string (caller);
            // the bounded reader checks that the memory is readable.
            let text = unsafe { c_string::bounded(pointer as usize as *const _, STRING_BYTES) };
            slot.string_offsets[i] = offset as u16;
            match text {
                Some(text) => {
                    slot.strings[i][..text.len()].copy_from_slice(text);
                    slot.string_lens[i] = text.len() as u16;
                }
                None => slot.string_lens[i] = u16::MAX,
            }
            slot.n_strings = i as u8 + 1;
        }
    }
    push(slot)
}

/// `stopEvent`, with the handle NCCL passed.
#[inline]
pub fn stopped(handle: *mut c_void, time: u64) -> WaitedSince {
    if !ON.load(Ordering::Relaxed) {
        return WaitedSince(None);
    }
    push(Slot::new(What::Stop, time, handle as u64))
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
    let mut slot = Slot::new(What::State, time, handle as u64);
    slot.state = state;
    if args.is_null() {
        slot.null_args = true;
    } else {
        let size = size.min(MAX_STATE_ARGS_BYTES);
        // SAFETY: `size` readable bytes (caller).
        unsafe { copy_fields(args, size, &mut slot.bytes, 0, fields) };
        slot.len = size as u8;
    }
    push(slot)
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
