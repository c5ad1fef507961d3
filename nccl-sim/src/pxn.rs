//! PXN between processes of one node.
//!
//! On a send connection whose NIC belongs to another local GPU, NCCL does not progress the
//! op itself: it `memcpy`s the `ncclProxyOp` into the proxy ops pool, in `/dev/shm`, of
//! the rank that owns the NIC, whose proxy thread — possibly in another process — then
//! calls *its* process's profiler plugin with the originator's values: the originator's
//! `profilerContext` (a pointer into another address space), its Coll/P2p handle as
//! `parentObj`, its rank, and its pid.
//!
//! This module does the same for real:
//!
//! - [`PxnMailbox`]: a receiving process's pool, a file in `/dev/shm` (else `$TMPDIR`)
//!   named from the job key and the receiver's local rank, mapped `MAP_SHARED`. It holds a
//!   bounded ring of fixed-size [`PxnOp`] records: multi-producer (a compare-and-swap on
//!   the reservation index, then a per-slot sequence number that says "ready"), single
//!   consumer. The receiver creates it (and removes it when dropped); senders open it
//!   with [`PxnSender::open`].
//! - [`PxnSender::try_send`]: non-blocking, reports a full or closed mailbox.
//! - [`PxnProxy`]: the receiving process's proxy thread for foreign ops. It takes ops from
//!   the mailbox and calls the local plugin as NCCL does, through the local plugin's
//!   table but with the **originator's context value**.
//!
//! A sender that dies between reserving a slot and publishing it leaves that slot
//! unpublished; the receiver then stops taking ops at that slot, and at shutdown counts
//! what it could not take ([`PxnStats::lost`]). Nothing here authenticates senders: the
//! file is created mode 0600, so only the same user can write it. A receiver killed
//! before it drops its mailbox leaves the file behind (named by its job, so no later job
//! reuses it).

use crate::event::{CoreEvent, Descr, Raw, StateArgs, NULL};
use crate::profiler::{Profiler, Session};
use nccl_profiler_abi::{event_type as t, state as st};
use std::cell::UnsafeCell;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Slots of a mailbox unless told otherwise.
pub const DEFAULT_CAPACITY: usize = 1024;
/// Steps a foreign op may have (a bound on what a corrupt record can make us do).
pub const MAX_STEPS: i32 = 1 << 20;
/// Ops appended per ProxyCtrl Append window (`NCCL_PROXY_APPEND_BATCH_SIZE`).
pub const APPEND_BATCH: usize = 16;
/// Overrides the directory of the mailboxes.
pub const ENV_SHM_DIR: &str = "NCCL_SIM_SHM_DIR";

const MAGIC: u64 = u64::from_le_bytes(*b"NCSIMPXN");
const VERSION: u32 = 1;

/// One proxy op as the originator hands it over (a plain 64-byte record).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PxnOp {
    /// The originator's pid (NCCL: `getpid()` when its profiler was loaded).
    pub origin_pid: i32,
    /// The originator's communicator rank.
    pub origin_rank: i32,
    /// The originator's profiler context value: a pointer into *its* address space.
    pub context: u64,
    /// The originator's Coll/P2p handle value (ProxyOp `parentObj`).
    pub parent: u64,
    pub channel: u8,
    /// Destination rank.
    pub peer: i32,
    /// Already divided by sliceSteps, as the descriptor carries it.
    pub n_steps: i32,
    pub chunk_size: i32,
    /// The originator's frozen task mask.
    pub mask: u64,
    /// Bytes the op sends in all (split over the steps by `chunk_size`).
    pub send_bytes: u64,
    /// How long each step's transfer takes, to look like one.
    pub step_ns: u64,
}

const _: () = assert!(std::mem::size_of::<PxnOp>() == 64);

impl PxnOp {
    /// The ProxyOp event the receiving proxy reports for this op.
    pub fn event(&self) -> CoreEvent {
        CoreEvent::ProxyOp {
            pid: self.origin_pid,
            channel: self.channel,
            peer: self.peer,
            n_steps: self.n_steps,
            chunk_size: self.chunk_size,
            is_send: true,
        }
    }

    /// Bytes of step `step`: `chunk_size` each, the last one the rest; an even split when
    /// the chunks do not cover `send_bytes`.
    pub fn step_bytes(&self, step: i32) -> usize {
        let n = self.n_steps.max(1) as u64;
        let step = step.clamp(0, self.n_steps.max(1) - 1) as u64;
        let chunk = self.chunk_size.max(0) as u64;
        let bytes = if chunk > 0 && chunk.saturating_mul(n) >= self.send_bytes {
            self.send_bytes.saturating_sub(step * chunk).min(chunk)
        } else {
            let base = self.send_bytes / n;
            if step == n - 1 {
                self.send_bytes - base * (n - 1)
            } else {
                base
            }
        };
        bytes as usize
    }
}

/// Why an op was not sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// Every slot is taken: try again later.
    #[error("the PXN mailbox is full")]
    Full,
    /// The receiver has shut its proxy down.
    #[error("the PXN mailbox is closed")]
    Closed,
}

// ---------------------------------------------------------------------------------------
// Shared-memory layout.

#[repr(C, align(64))]
struct Line(AtomicU64);

#[repr(C)]
struct Header {
    /// Written last at creation (Release): a mapping that reads it is initialised.
    magic: AtomicU64,
    version: u32,
    slot_size: u32,
    capacity: u32,
    owner_pid: i32,
    job_key: u64,
    local_rank: u32,
    closed: AtomicU32,
    /// Next slot to reserve (producers, by compare-and-swap).
    head: Line,
    /// Next slot to take (the consumer only).
    tail: Line,
}

#[repr(C)]
struct Slot {
    /// Vyukov's sequence: `pos` when free for the producer of `pos`, `pos + 1` once that
    /// producer published, `pos + capacity` once the consumer took it.
    seq: AtomicU64,
    op: UnsafeCell<PxnOp>,
}

const HEADER: usize = std::mem::size_of::<Header>();
const SLOT: usize = std::mem::size_of::<Slot>();

fn file_len(capacity: usize) -> usize {
    HEADER + capacity * SLOT
}

/// A `MAP_SHARED` mapping of a file (a mailbox, or the rendezvous table).
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len: usize,
    capacity: u64,
}

// SAFETY: the mapping is shared memory accessed only through atomics and through slots
// that the ring protocol hands to one thread at a time.
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `file`, shared with every process that maps it.
    pub(crate) fn map(file: &File, len: usize) -> io::Result<Mapping> {
        // SAFETY: mapping a regular file we opened read-write, of at least `len` bytes.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            base: NonNull::new(ptr.cast()).expect("mmap returned NULL"),
            len,
            capacity: 0,
        })
    }

    /// The first byte of the mapping (page-aligned).
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping is at least HEADER bytes and page-aligned.
        unsafe { &*self.base.as_ptr().cast::<Header>() }
    }

    fn slot(&self, pos: u64) -> &Slot {
        let index = (pos & (self.capacity - 1)) as usize;
        // SAFETY: index < capacity, and the mapping holds `capacity` slots after the
        // header (checked when mapped); slots are 8-byte aligned.
        unsafe { &*self.base.as_ptr().add(HEADER + index * SLOT).cast::<Slot>() }
    }

    fn try_push(&self, op: &PxnOp) -> Result<(), SendError> {
        let header = self.header();
        if header.closed.load(Ordering::Acquire) != 0 {
            return Err(SendError::Closed);
        }
        let mut pos = header.head.0.load(Ordering::Relaxed);
        loop {
            let slot = self.slot(pos);
            let seq = slot.seq.load(Ordering::Acquire);
            match (seq as i64).wrapping_sub(pos as i64) {
                0 => match header.head.0.compare_exchange_weak(
                    pos,
                    pos + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: the CAS gave this thread slot `pos` until it publishes.
                        unsafe { slot.op.get().write_volatile(*op) };
                        slot.seq.store(pos + 1, Ordering::Release);
                        return Ok(());
                    }
                    Err(current) => pos = current,
                },
                // The slot still holds an op from one lap ago: full.
                d if d < 0 => return Err(SendError::Full),
                // Another producer took `pos`; catch up.
                _ => pos = header.head.0.load(Ordering::Relaxed),
            }
        }
    }

    /// Single consumer only.
    fn try_pop(&self) -> Option<PxnOp> {
        let header = self.header();
        let pos = header.tail.0.load(Ordering::Relaxed);
        let slot = self.slot(pos);
        if slot.seq.load(Ordering::Acquire) != pos + 1 {
            return None;
        }
        // SAFETY: the producer published the slot (Acquire above) and nobody writes it
        // again before we hand it back below.
        let op = unsafe { slot.op.get().read_volatile() };
        slot.seq.store(pos + self.capacity, Ordering::Release);
        header.tail.0.store(pos + 1, Ordering::Release);
        Some(op)
    }

    /// Reserved slots not taken yet (published or not).
    fn pending(&self) -> u64 {
        let header = self.header();
        let tail = header.tail.0.load(Ordering::Acquire);
        header.head.0.load(Ordering::Acquire).saturating_sub(tail)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped; no reference outlives `self`.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// The directory of the mailboxes: `$NCCL_SIM_SHM_DIR`, else `/dev/shm` when it is a
/// writable directory, else the temporary directory.
pub fn default_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(ENV_SHM_DIR).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let shm = Path::new("/dev/shm");
    // SAFETY: access with a NUL-terminated path literal.
    if shm.is_dir() && unsafe { libc::access(c"/dev/shm".as_ptr(), libc::W_OK) } == 0 {
        return shm.to_path_buf();
    }
    std::env::temp_dir()
}

/// The mailbox file of local rank `local_rank` of job `job_key` in `dir`.
pub fn mailbox_path(dir: &Path, job_key: u64, local_rank: usize) -> PathBuf {
    dir.join(format!("nccl-sim-pxn-{job_key:016x}-{local_rank}"))
}

fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// Maps an existing mailbox file and checks its header.
fn open_mapping(path: &Path) -> io::Result<Mapping> {
    let file = OpenOptions::new().read(true).write(true).open(path)?;
    let len = file.metadata()?.len() as usize;
    let invalid = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {what}", path.display()),
        )
    };
    if len < HEADER {
        return Err(invalid("too short for a PXN mailbox"));
    }
    let mut map = Mapping::map(&file, len)?;
    let header = map.header();
    if header.magic.load(Ordering::Acquire) != MAGIC {
        return Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!("{}: not an initialised PXN mailbox", path.display()),
        ));
    }
    let capacity = header.capacity as usize;
    if header.version != VERSION || header.slot_size as usize != SLOT {
        return Err(invalid("a PXN mailbox of another version"));
    }
    if !capacity.is_power_of_two() || len != file_len(capacity) {
        return Err(invalid("a PXN mailbox of inconsistent size"));
    }
    map.capacity = capacity as u64;
    Ok(map)
}

// ---------------------------------------------------------------------------------------
// Receiver.

/// A receiving process's mailbox: created by it, removed when dropped.
pub struct PxnMailbox {
    map: Mapping,
    path: PathBuf,
    /// (device, inode) of our file, so that dropping never removes someone else's.
    identity: (u64, u64),
}

impl PxnMailbox {
    /// Creates the mailbox of local rank `local_rank` of job `job_key` in [`default_dir`].
    pub fn create(job_key: u64, local_rank: usize, capacity: usize) -> io::Result<PxnMailbox> {
        PxnMailbox::create_in(&default_dir(), job_key, local_rank, capacity)
    }

    /// As [`PxnMailbox::create`], in `dir`. `capacity` is rounded up to a power of two.
    /// A mailbox file left by a dead process is replaced; one whose owner still runs is
    /// an error (`AlreadyExists`): two processes claim the same local rank.
    pub fn create_in(
        dir: &Path,
        job_key: u64,
        local_rank: usize,
        capacity: usize,
    ) -> io::Result<PxnMailbox> {
        let capacity = capacity.clamp(2, 1 << 24).next_power_of_two();
        let path = mailbox_path(dir, job_key, local_rank);
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        if let Ok(existing) = open_mapping(&path) {
            let owner = existing.header().owner_pid;
            if owner != pid && pid_alive(owner) {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} belongs to the running process {owner}", path.display()),
                ));
            }
        }
        // Build it under a private name, then rename: senders never see a half-made one.
        let tmp = dir.join(format!(
            ".nccl-sim-pxn-{job_key:016x}-{local_rank}.{pid}.tmp"
        ));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        let made = (|| {
            let len = file_len(capacity);
            file.set_len(len as u64)?;
            let mut map = Mapping::map(&file, len)?;
            map.capacity = capacity as u64;
            // SAFETY: nobody else maps the private file yet; plain fields are written
            // before the Release store of the magic.
            unsafe {
                let header = map.base.as_ptr().cast::<Header>();
                (*header).version = VERSION;
                (*header).slot_size = SLOT as u32;
                (*header).capacity = capacity as u32;
                (*header).owner_pid = pid;
                (*header).job_key = job_key;
                (*header).local_rank = local_rank as u32;
            }
            for pos in 0..capacity as u64 {
                map.slot(pos).seq.store(pos, Ordering::Relaxed);
            }
            map.header().magic.store(MAGIC, Ordering::Release);
            let meta = file.metadata()?;
            std::fs::rename(&tmp, &path)?;
            Ok(PxnMailbox {
                map,
                path: path.clone(),
                identity: (meta.dev(), meta.ino()),
            })
        })();
        if made.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        made
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn capacity(&self) -> usize {
        self.map.capacity as usize
    }

    /// Takes the next published op (the receiving proxy's side; one consumer).
    pub fn try_recv(&self) -> Option<PxnOp> {
        self.map.try_pop()
    }

    /// Ops reserved by senders and not taken yet.
    pub fn pending(&self) -> usize {
        self.map.pending() as usize
    }

    /// Refuses further ops (senders get [`SendError::Closed`]); what is in is still taken.
    pub fn close(&self) {
        self.map.header().closed.store(1, Ordering::Release);
    }

    pub fn is_closed(&self) -> bool {
        self.map.header().closed.load(Ordering::Acquire) != 0
    }

    /// A sender into this mailbox from this process (single-process PXN).
    pub fn sender(&self) -> io::Result<PxnSender> {
        PxnSender::open_path(&self.path)
    }
}

impl Drop for PxnMailbox {
    fn drop(&mut self) {
        self.close();
        if let Ok(meta) = std::fs::metadata(&self.path) {
            if (meta.dev(), meta.ino()) == self.identity {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Sender.

/// A sending process's view of another process's mailbox.
pub struct PxnSender {
    map: Mapping,
    path: PathBuf,
}

impl PxnSender {
    /// Opens the mailbox of local rank `local_rank` of job `job_key` in [`default_dir`].
    pub fn open(job_key: u64, local_rank: usize) -> io::Result<PxnSender> {
        PxnSender::open_path(&mailbox_path(&default_dir(), job_key, local_rank))
    }

    /// Opens the mailbox at `path`.
    pub fn open_path(path: &Path) -> io::Result<PxnSender> {
        Ok(PxnSender {
            map: open_mapping(path)?,
            path: path.to_path_buf(),
        })
    }

    /// As [`PxnSender::open_path`], retrying until `timeout` while the receiver has not
    /// created it yet.
    pub fn open_wait(path: &Path, timeout: Duration) -> io::Result<PxnSender> {
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_micros(200);
        loop {
            match PxnSender::open_path(path) {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::NotFound | io::ErrorKind::WouldBlock
                    ) && Instant::now() < deadline =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
                other => return other,
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The receiving process.
    pub fn receiver_pid(&self) -> i32 {
        self.map.header().owner_pid
    }

    pub fn capacity(&self) -> usize {
        self.map.capacity as usize
    }

    /// Hands `op` over without waiting.
    pub fn try_send(&self, op: &PxnOp) -> Result<(), SendError> {
        self.map.try_push(op)
    }

    /// Hands `op` over, waiting up to `timeout` while the mailbox is full (NCCL waits for
    /// a free pool entry the same way).
    pub fn send_timeout(&self, op: &PxnOp, timeout: Duration) -> Result<(), SendError> {
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_micros(20);
        loop {
            match self.try_send(op) {
                Err(SendError::Full) if Instant::now() < deadline => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(5));
                }
                other => return other,
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The receiving proxy.

/// What a [`PxnProxy`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PxnStats {
    /// Foreign ops progressed.
    pub ops: u64,
    /// Their steps.
    pub steps: u64,
    /// Bytes they sent.
    pub bytes: u64,
    /// ProxyOp / ProxyStep events started (non-NULL handles received).
    pub op_events: u64,
    pub step_events: u64,
    /// Ops still reserved but never published at shutdown (their sender died mid-write).
    pub lost: u64,
}

/// The receiving process's proxy thread for ops other processes hand over.
pub struct PxnProxy {
    mailbox: Arc<PxnMailbox>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<PxnStats>>,
}

impl PxnProxy {
    /// Starts the thread. `local_session` is what this process's communicator got at
    /// `init` (None when no plugin is loaded: ops are then progressed silently); the
    /// plugin is called through its table, with the originator's context for the ProxyOp
    /// and ProxyStep events and the local context for ProxyCtrl.
    pub fn spawn(
        profiler: Arc<Profiler>,
        local_session: Option<Session>,
        mailbox: PxnMailbox,
    ) -> PxnProxy {
        let mailbox = Arc::new(mailbox);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let mailbox = Arc::clone(&mailbox);
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("NCCL Progress PXN".into())
                .spawn(move || {
                    let mut proxy = Worker {
                        profiler,
                        session: local_session,
                        stats: PxnStats::default(),
                        stale_size: 0,
                    };
                    proxy.run(&mailbox, &stop);
                    proxy.stats
                })
                .expect("spawn the PXN proxy thread")
        };
        PxnProxy {
            mailbox,
            stop,
            thread: Some(thread),
        }
    }

    pub fn mailbox(&self) -> &PxnMailbox {
        &self.mailbox
    }

    /// Closes the mailbox, progresses every op already in it, and joins the thread.
    pub fn shutdown(mut self) -> PxnStats {
        self.finish()
    }

    fn finish(&mut self) -> PxnStats {
        self.mailbox.close();
        self.stop.store(true, Ordering::Release);
        match self.thread.take() {
            Some(thread) => thread.join().unwrap_or_default(),
            None => PxnStats::default(),
        }
    }
}

impl Drop for PxnProxy {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.finish();
        }
    }
}

struct Worker {
    profiler: Arc<Profiler>,
    session: Option<Session>,
    stats: PxnStats,
    /// The args slot NCCL never resets: what SendGPUWait and SendPeerWait pass.
    stale_size: usize,
}

/// How long shutdown waits for a reserved op whose sender has not published it.
const UNPUBLISHED_WAIT: Duration = Duration::from_millis(200);

impl Worker {
    fn run(&mut self, mailbox: &PxnMailbox, stop: &AtomicBool) {
        let mut idle = Duration::from_micros(20);
        let mut stuck_since: Option<Instant> = None;
        loop {
            let mut batch = Vec::with_capacity(APPEND_BATCH);
            while batch.len() < APPEND_BATCH {
                match mailbox.try_recv() {
                    Some(op) => batch.push(op),
                    None => break,
                }
            }
            if !batch.is_empty() {
                idle = Duration::from_micros(20);
                stuck_since = None;
                self.progress(&batch);
                continue;
            }
            if stop.load(Ordering::Acquire) {
                let pending = mailbox.pending() as u64;
                if pending == 0 {
                    return;
                }
                // Reserved but not yet published: give the sender a moment.
                let since = *stuck_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= UNPUBLISHED_WAIT {
                    self.stats.lost = pending;
                    return;
                }
            }
            std::thread::sleep(idle);
            idle = (idle * 2).min(Duration::from_millis(1));
        }
    }

    /// One Append window and the progress of its ops.
    fn progress(&mut self, batch: &[PxnOp]) {
        let profiler = Arc::clone(&self.profiler);
        let release = profiler.release();
        let at_append = release.proxy_op_at_append();
        let sanitized: Vec<PxnOp> = batch
            .iter()
            .map(|op| PxnOp {
                n_steps: op.n_steps.clamp(0, MAX_STEPS),
                ..*op
            })
            .collect();
        let batch = &sanitized[..];
        let mut handles: Vec<Raw> = vec![NULL; batch.len()];

        // The Append window, in the proxy's own (local) context, with the live mask.
        let ctrl = self
            .session
            .filter(|_| profiler.mask() & t::PROXY_CTRL != 0);
        let mut ctrl_handle = NULL;
        if let Some(session) = &ctrl {
            let descr = Descr {
                parent: NULL,
                rank: 0,
                event: CoreEvent::ProxyCtrl,
            };
            profiler.start(session, &mut ctrl_handle, &descr);
            if !ctrl_handle.is_null() {
                profiler.record(
                    session,
                    ctrl_handle,
                    st::PROXY_CTRL_APPEND,
                    StateArgs::Appended(0),
                );
            }
        }
        if at_append {
            for (op, handle) in batch.iter().zip(handles.iter_mut()) {
                self.start_op(op, handle);
            }
        }
        if let Some(session) = &ctrl {
            if !ctrl_handle.is_null() {
                profiler.record(
                    session,
                    ctrl_handle,
                    st::PROXY_CTRL_APPEND_END,
                    StateArgs::Appended(batch.len() as i32),
                );
                profiler.stop(session, ctrl_handle);
            }
        }

        // First progress call: InProgress (2.27+), or the start itself (2.23–2.26).
        for (op, handle) in batch.iter().zip(handles.iter_mut()) {
            if at_append {
                if let Some(session) = self.foreign(op).filter(|_| !handle.is_null()) {
                    profiler.record(
                        &session,
                        *handle,
                        st::PROXY_OP_IN_PROGRESS_V4,
                        StateArgs::Uninit,
                    );
                }
            } else {
                self.start_op(op, handle);
            }
        }

        // Steps, one per op in turn, as the progress loop visits the subs.
        let mut next = vec![0i32; batch.len()];
        let mut sent = vec![0usize; batch.len()];
        loop {
            let mut active = false;
            for (i, op) in batch.iter().enumerate() {
                if next[i] >= op.n_steps {
                    continue;
                }
                active = true;
                sent[i] += self.step(op, handles[i], next[i], sent[i]);
                next[i] += 1;
                if next[i] == op.n_steps {
                    self.finish_op(op, &mut handles[i]);
                }
            }
            if !active {
                break;
            }
        }
        // Ops without steps are done at once.
        for (op, handle) in batch.iter().zip(handles.iter_mut()) {
            if op.n_steps == 0 {
                self.finish_op(op, handle);
            }
        }
    }

    /// The local plugin's table with the originator's context.
    fn foreign(&self, op: &PxnOp) -> Option<Session> {
        self.session.map(|session| {
            let mut foreign = session;
            foreign.context = op.context as usize as Raw;
            foreign
        })
    }

    fn start_op(&mut self, op: &PxnOp, handle: &mut Raw) {
        let Some(session) = self.foreign(op) else {
            return;
        };
        if op.mask & (t::PROXY_OP | t::PROXY_STEP | t::NET_PLUGIN) == 0 {
            return;
        }
        let descr = Descr {
            parent: op.parent as usize as Raw,
            rank: op.origin_rank,
            event: op.event(),
        };
        self.profiler.start(&session, handle, &descr);
        if !handle.is_null() {
            self.stats.op_events += 1;
        }
    }

    fn finish_op(&mut self, op: &PxnOp, handle: &mut Raw) {
        self.stats.ops += 1;
        if let Some(session) = self.foreign(op).filter(|_| !handle.is_null()) {
            self.profiler.stop(&session, *handle);
        }
        *handle = NULL;
    }

    /// One send step (send side); returns its bytes.
    fn step(&mut self, op: &PxnOp, op_handle: Raw, step: i32, sent_before: usize) -> usize {
        let bytes = op.step_bytes(step);
        let transfer = Duration::from_nanos(op.step_ns);
        self.stats.steps += 1;
        self.stats.bytes += bytes as u64;
        let release = self.profiler.release();
        let session = self.foreign(op);
        let wanted = op.mask & (t::PROXY_STEP | t::NET_PLUGIN) != 0;
        let allowed = !release.children_need_parent_handle() || !op_handle.is_null();
        let (Some(session), true, true) = (session, wanted, allowed) else {
            sleep(transfer);
            return bytes;
        };
        let profiler = Arc::clone(&self.profiler);
        let mut handle = NULL;
        let descr = Descr {
            parent: op_handle,
            rank: op.origin_rank,
            event: CoreEvent::ProxyStep { step },
        };
        profiler.start(&session, &mut handle, &descr);
        if !handle.is_null() {
            self.stats.step_events += 1;
        }
        // Only steps of a recorded ProxyOp record states.
        let records = !op_handle.is_null() && !handle.is_null();
        let old = !release.proxy_op_at_append();
        let progress =
            |steps: i32, trans_size: usize| StateArgs::ProxyOpProgress { trans_size, steps };
        if records {
            profiler.record(
                &session,
                handle,
                st::PROXY_STEP_SEND_GPU_WAIT,
                StateArgs::TransSize(self.stale_size),
            );
            if old {
                // 2.23–2.26: ProxyOp states alongside the steps (2.26: cumulative size).
                let cumulative = sent_before + bytes;
                profiler.record(
                    &session,
                    op_handle,
                    st::PROXY_OP_SEND_POSTED,
                    progress(step + 1, cumulative),
                );
                profiler.record(
                    &session,
                    op_handle,
                    st::PROXY_OP_SEND_REM_FIFO_WAIT,
                    progress(step + 1, cumulative),
                );
            } else {
                // Repeated while isend finds no credit: every third step waits twice.
                let waits = if step % 3 == 2 { 2 } else { 1 };
                for _ in 0..waits {
                    profiler.record(
                        &session,
                        handle,
                        st::PROXY_STEP_SEND_PEER_WAIT_V4,
                        StateArgs::TransSize(self.stale_size),
                    );
                }
            }
            profiler.record(
                &session,
                handle,
                st::PROXY_STEP_SEND_WAIT,
                StateArgs::TransSize(bytes),
            );
            self.stale_size = bytes;
        }
        sleep(transfer);
        if records && old {
            let cumulative = sent_before + bytes;
            profiler.record(
                &session,
                op_handle,
                st::PROXY_OP_SEND_TRANSMITTED,
                progress(step + 1, cumulative),
            );
            profiler.record(
                &session,
                op_handle,
                st::PROXY_OP_SEND_DONE,
                progress(step + 1, cumulative),
            );
        }
        if !handle.is_null() {
            profiler.stop(&session, handle);
        }
        bytes
    }
}

fn sleep(d: Duration) {
    if !d.is_zero() {
        std::thread::sleep(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::Release;

    fn op(i: u64) -> PxnOp {
        PxnOp {
            origin_pid: 1,
            origin_rank: 1,
            context: 0x1000 + i,
            parent: i,
            channel: 0,
            peer: 0,
            n_steps: 2,
            chunk_size: 10,
            mask: 0,
            send_bytes: 15,
            step_ns: 0,
        }
    }

    fn unique_key() -> u64 {
        static N: AtomicU64 = AtomicU64::new(0);
        (u64::from(std::process::id()) << 32) ^ N.fetch_add(1, Ordering::Relaxed) ^ 0xABCD_0000_0000
    }

    #[test]
    fn layout() {
        assert_eq!(HEADER, 192);
        assert_eq!(SLOT, 72);
        assert_eq!(std::mem::offset_of!(PxnOp, channel), 24);
        assert_eq!(std::mem::offset_of!(PxnOp, step_ns), 56);
    }

    #[test]
    fn step_bytes() {
        let o = op(0);
        assert_eq!((o.step_bytes(0), o.step_bytes(1)), (10, 5));
        let even = PxnOp {
            chunk_size: 1,
            send_bytes: 10,
            n_steps: 3,
            ..o
        };
        assert_eq!((even.step_bytes(0), even.step_bytes(2)), (3, 4));
    }

    #[test]
    fn full_closed_and_order() {
        let dir = tempfile::tempdir().unwrap();
        let mailbox = PxnMailbox::create_in(dir.path(), unique_key(), 0, 4).unwrap();
        let sender = mailbox.sender().unwrap();
        assert_eq!(sender.receiver_pid(), std::process::id() as i32);
        for i in 0..4 {
            sender.try_send(&op(i)).unwrap();
        }
        assert_eq!(sender.try_send(&op(9)), Err(SendError::Full));
        assert_eq!(mailbox.try_recv().unwrap().parent, 0);
        sender.try_send(&op(4)).unwrap();
        let got: Vec<u64> = std::iter::from_fn(|| mailbox.try_recv())
            .map(|o| o.parent)
            .collect();
        assert_eq!(got, [1, 2, 3, 4]);
        mailbox.close();
        assert_eq!(sender.try_send(&op(5)), Err(SendError::Closed));
        let path = mailbox.path().to_path_buf();
        drop(mailbox);
        assert!(!path.exists(), "the receiver removes its mailbox");
    }

    #[test]
    fn a_live_owner_keeps_its_mailbox() {
        let dir = tempfile::tempdir().unwrap();
        let key = unique_key();
        let first = PxnMailbox::create_in(dir.path(), key, 3, 8).unwrap();
        // Same pid: a re-creation is allowed (and replaces it).
        let second = PxnMailbox::create_in(dir.path(), key, 3, 8).unwrap();
        drop(first);
        assert!(
            second.path().exists(),
            "dropping a replaced mailbox keeps the new file"
        );
        // A file whose owner is some other running process (our parent) is refused.
        {
            let map = open_mapping(second.path()).unwrap();
            // SAFETY: test-only rewrite of the owner field.
            unsafe {
                (*map.base.as_ptr().cast::<Header>()).owner_pid = libc::getppid();
            }
        }
        let err = PxnMailbox::create_in(dir.path(), key, 3, 8).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
    }

    #[test]
    fn many_producers_one_consumer() {
        let dir = tempfile::tempdir().unwrap();
        let mailbox = PxnMailbox::create_in(dir.path(), unique_key(), 1, 8).unwrap();
        const PRODUCERS: u64 = 4;
        const EACH: u64 = 2000;
        let path = mailbox.path().to_path_buf();
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let sender = PxnSender::open_path(&path).unwrap();
                    for i in 0..EACH {
                        let mut o = op(i);
                        o.origin_rank = p as i32;
                        o.parent = p * EACH + i;
                        o.send_bytes = !o.parent;
                        sender.send_timeout(&o, Duration::from_secs(20)).unwrap();
                    }
                })
            })
            .collect();
        let mut seen = vec![false; (PRODUCERS * EACH) as usize];
        let mut last = vec![None::<u64>; PRODUCERS as usize];
        let mut count = 0;
        let deadline = Instant::now() + Duration::from_secs(30);
        while count < PRODUCERS * EACH {
            assert!(Instant::now() < deadline, "consumer starved");
            match mailbox.try_recv() {
                Some(o) => {
                    assert_eq!(o.send_bytes, !o.parent, "torn record");
                    assert!(!seen[o.parent as usize], "duplicate");
                    seen[o.parent as usize] = true;
                    let p = o.origin_rank as usize;
                    assert!(last[p] < Some(o.parent), "per-producer order kept");
                    last[p] = Some(o.parent);
                    count += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(mailbox.pending(), 0);
    }

    #[test]
    fn proxy_without_plugin_progresses_silently() {
        let dir = tempfile::tempdir().unwrap();
        let mailbox = PxnMailbox::create_in(dir.path(), unique_key(), 2, 16).unwrap();
        let sender = mailbox.sender().unwrap();
        let profiler = Arc::new(Profiler::new(Release::new(32), Some("none".into())));
        let proxy = PxnProxy::spawn(profiler, None, mailbox);
        for i in 0..40 {
            sender
                .send_timeout(&op(i), Duration::from_secs(10))
                .unwrap();
        }
        let stats = proxy.shutdown();
        assert_eq!((stats.ops, stats.steps, stats.bytes), (40, 80, 40 * 15));
        assert_eq!(sender.try_send(&op(0)), Err(SendError::Closed));
    }
}
