//! The recorder's writer: one thread that moves the NCCL threads' rings into the process's
//! recording file every few milliseconds, and at once when a ring is full; `init`,
//! `finalize` and the process's exit write through it too, after emptying the rings, so
//! that each thread's calls keep their order.

use super::{ThreadShared, LARGEST_ENTRY, LOST_AT_THREAD_EXIT, MIN_RING_ENTRIES};
use crate::ring::RoomWait;
use crate::{clock, log};
use nccl_scorep_common::recording::{self, encode, ClockKind, Header};
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How often the writer thread empties the rings (a full ring wakes it sooner).
const DRAIN_INTERVAL: Duration = Duration::from_millis(5);

pub(super) struct Recorder {
    state: Mutex<State>,
    new_threads: Mutex<Vec<(rtrb::Consumer<u8>, Arc<ThreadShared>)>>,
    next_thread: AtomicU32,
    /// Each thread's ring, in bytes.
    capacity: usize,
    /// The writer thread, which a full ring wakes.
    writer: OnceLock<std::thread::Thread>,
    /// `NCCL_SCOREP_ON_FULL=wait`: a thread whose ring is full waits for room.
    wait_for_room: bool,
    /// The writer still empties the rings (until the process's exit ends the file).
    writing: AtomicBool,
}

struct Adopted {
    consumer: rtrb::Consumer<u8>,
    shared: Arc<ThreadShared>,
    drops_written: u64,
}

struct State {
    file: Option<File>,
    out: Vec<u8>,
    threads: Vec<Adopted>,
    lost_written: u64,
    /// Calls not recorded, all threads together: said at exit.
    dropped: u64,
}

static RECORDER: OnceLock<Recorder> = OnceLock::new();

pub(super) fn recorder() -> Option<&'static Recorder> {
    RECORDER.get()
}

impl Recorder {
    #[cold]
    pub(super) fn register_thread(&self) -> (rtrb::Producer<u8>, Arc<ThreadShared>) {
        // From the rings' share of the memory limit, as the thread's ring of records.
        let ring_bytes =
            crate::memory::BUDGET.take_ring(self.capacity, MIN_RING_ENTRIES * LARGEST_ENTRY);
        let (producer, consumer) = rtrb::RingBuffer::new(ring_bytes);
        let shared = Arc::new(ThreadShared {
            index: self.next_thread.fetch_add(1, Ordering::Relaxed),
            drops: AtomicU64::new(0),
            room: RoomWait::for_this_thread(),
            woke_writer: AtomicBool::new(false),
            ring_bytes,
        });
        self.new_threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((consumer, shared.clone()));
        (producer, shared)
    }

    /// Wakes the writer for a full ring, once until it has emptied that ring.
    pub(super) fn wake_writer_for(&self, thread: &ThreadShared) {
        if !thread.woke_writer.swap(true, Ordering::AcqRel) {
            if let Some(writer) = self.writer.get() {
                writer.unpark();
            }
        }
    }

    /// Whether a thread whose ring is full waits for room: in wait mode, while a writer
    /// thread runs to make it.
    pub(super) fn waits_for_room(&self) -> bool {
        self.wait_for_room && self.writing.load(Ordering::Acquire) && self.writer.get().is_some()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Opens the recording file and starts the writer thread (once per process); false when
/// the file cannot be created (said as a warning).
pub(super) fn begin(shared: &crate::shared::Shared, api: u8) -> bool {
    if RECORDER.get().is_some() {
        return true;
    }
    let dir = shared.run_dir.root().join(recording::DIR);
    let path = dir.join(recording::file_name(&shared.host, shared.pid));
    let file = nccl_scorep_common::safe_file::create_dirs(&dir)
        .and_then(|()| nccl_scorep_common::safe_file::create(&path));
    let file = match file {
        Ok(file) => file,
        Err(error) => {
            log::warn(&format!(
                "record mode: cannot create {} ({error}); the calls are not recorded",
                path.display()
            ));
            return false;
        }
    };
    let mut out = Vec::with_capacity(1 << 16);
    encode::header(
        &mut out,
        &Header {
            format: recording::FORMAT_VERSION,
            api,
            clock: match clock::source() {
                clock::Source::Tsc => ClockKind::Tsc,
                clock::Source::Monotonic | clock::Source::Offered => ClockKind::Monotonic,
            },
            pid: shared.pid,
            host: shared.host.clone(),
            realtime_ns: clock::realtime_ns(),
        },
    );
    let (ticks, ns) = clock::tick_pair();
    encode::clock(&mut out, ticks, ns);
    let capacity = shared
        .config
        .buffer_bytes
        .max(MIN_RING_ENTRIES * LARGEST_ENTRY);
    let recorder = RECORDER.get_or_init(|| Recorder {
        state: Mutex::new(State {
            file: Some(file),
            out,
            threads: Vec::new(),
            lost_written: 0,
            dropped: 0,
        }),
        new_threads: Mutex::new(Vec::new()),
        next_thread: AtomicU32::new(0),
        capacity,
        writer: OnceLock::new(),
        wait_for_room: shared.config.on_full == crate::config::OnFull::Wait,
        writing: AtomicBool::new(true),
    });
    let spawned = std::thread::Builder::new()
        .name("nccl-scorep-rec".into())
        .spawn(move || loop {
            std::thread::park_timeout(DRAIN_INTERVAL);
            let mut state = recorder.state();
            if state.file.is_none() {
                return;
            }
            drain(recorder, &mut state);
        });
    match spawned {
        Ok(handle) => {
            let _ = recorder.writer.set(handle.thread().clone());
        }
        Err(error) => log::warn(&format!(
            "record mode: cannot start the writer thread ({error}); calls are written at each finalize only"
        )),
    }
    // SAFETY: registers plain `extern "C" fn()`s that catch their panics; the fork
    // handler only stores an atomic.
    unsafe {
        if libc::atexit(finish_at_exit) != 0 {
            log::warn("record mode: cannot register the exit handler: end the job with ncclCommDestroy for a complete recording");
        }
        libc::pthread_atfork(None, None, Some(in_forked_child));
    }
    log::info(&format!(
        "record mode: recording every call to {}",
        path.display()
    ));
    true
}

extern "C" fn in_forked_child() {
    crate::boundary::guarded(super::stop_in_forked_child);
}

/// At exit: the rings' last calls, a last clock reading and the end mark.
extern "C" fn finish_at_exit() {
    crate::boundary::guarded(|| {
        let Some(recorder) = RECORDER.get() else {
            return;
        };
        let mut state = recorder.state();
        drain(recorder, &mut state);
        let (ticks, ns) = clock::tick_pair();
        encode::clock(&mut state.out, ticks, ns);
        encode::end(&mut state.out);
        write_out(&mut state);
        state.file = None;
        if state.dropped > 0 {
            log::warn(&format!(
                "record mode: {} calls were not recorded: their thread's ring of calls was \
                 full (NCCL_SCOREP_ON_FULL=drop); a larger NCCL_SCOREP_BUFFER_SIZE or \
                 NCCL_SCOREP_ON_FULL=wait keeps them (the recording says which threads lost them)",
                state.dropped
            ));
        }
        // Threads waiting for room now drop their calls instead.
        recorder.writing.store(false, Ordering::Release);
        for thread in &state.threads {
            thread.shared.room.wake();
        }
    });
}

pub(super) fn init(
    thread: u32,
    time: u64,
    context: u64,
    mask: i32,
    info: &crate::context::ContextInfo,
) {
    let Some(recorder) = RECORDER.get() else {
        return;
    };
    let mut state = recorder.state();
    drain(recorder, &mut state);
    let name = info.comm_name.as_deref().map(str::as_bytes);
    encode::init(
        &mut state.out,
        thread,
        time,
        context,
        mask,
        info.comm_hash,
        info.n_nodes,
        info.n_ranks,
        info.rank,
        name,
    );
    write_out(&mut state);
}

pub(super) fn finalize(thread: u32, time: u64, context: u64) {
    let Some(recorder) = RECORDER.get() else {
        return;
    };
    let mut state = recorder.state();
    drain(recorder, &mut state);
    encode::finalize(&mut state.out, thread, time, context);
    let (ticks, ns) = clock::tick_pair();
    encode::clock(&mut state.out, ticks, ns);
    write_out(&mut state);
}

/// Encodes what the rings hold and writes it to the file.
fn drain(recorder: &Recorder, state: &mut State) {
    if state.file.is_none() {
        return;
    }
    let adopted = std::mem::take(
        &mut *recorder
            .new_threads
            .lock()
            .unwrap_or_else(|e| e.into_inner()),
    );
    state
        .threads
        .extend(adopted.into_iter().map(|(consumer, shared)| Adopted {
            consumer,
            shared,
            drops_written: 0,
        }));
    let State {
        out,
        threads,
        dropped,
        ..
    } = state;
    threads.retain_mut(|thread| {
        // Seen before the read: a thread that is gone pushes nothing after it.
        let gone = crate::ring::producer_gone(&thread.consumer);
        let index = thread.shared.index;
        let available = thread.consumer.slots();
        if let Ok(chunk) = thread.consumer.read_chunk(available) {
            // Whole entries, encoded by the calling threads.
            let (first, second) = chunk.as_slices();
            out.extend_from_slice(first);
            out.extend_from_slice(second);
            chunk.commit_all();
            thread.shared.woke_writer.store(false, Ordering::Release);
            thread.shared.room.room_made();
        }
        let drops = thread.shared.drops.load(Ordering::Relaxed);
        if drops > thread.drops_written {
            encode::drops(out, index, drops - thread.drops_written);
            *dropped += drops - thread.drops_written;
            thread.drops_written = drops;
        }
        // A thread that has ended gives its ring back, and its bytes to the memory limit.
        !(gone && thread.consumer.is_empty())
    });
    let lost = LOST_AT_THREAD_EXIT.load(Ordering::Relaxed);
    if lost > state.lost_written {
        encode::drops(&mut state.out, u32::MAX, lost - state.lost_written);
        state.dropped += lost - state.lost_written;
        state.lost_written = lost;
    }
    write_out(state);
}

fn write_out(state: &mut State) {
    if state.out.is_empty() {
        return;
    }
    if let Some(file) = &mut state.file {
        if let Err(error) = file.write_all(&state.out) {
            log::warn(&format!(
                "record mode: cannot write the recording ({error}); recording stops"
            ));
            super::ON.store(false, Ordering::Relaxed);
            state.file = None;
        }
    }
    state.out.clear();
}
