//! The flight recorder's file: its binary layout (written by the plugin's recorder sink,
//! read by `nccl-scorep status` and by the plugin's hang report), the reader that never
//! returns a torn record, and the diagnosis of a run directory's recorder files.
//!
//! Layout (version 2, little-endian, documented in docs/hangs.md): a 128-byte header,
//! then `slots` slots of `SLOT_HEADER_BYTES + ops_per_slot * RECORD_BYTES` bytes. Every
//! slot and the header's time fields are guarded by a sequence counter that is odd while
//! the writer changes them; a reader copies, checks the counter is even and unchanged, and
//! retries otherwise.

use crate::rank_ranges::ranks_phrase;
use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub const MAGIC: [u8; 8] = *b"NCSPFLT\0";
pub const VERSION: u32 = 2;
pub const HEADER_BYTES: usize = 128;
pub const SLOT_HEADER_BYTES: usize = 64;
pub const RECORD_BYTES: usize = 96;
pub const FUNC_BYTES: usize = 16;
pub const HOST_BYTES: usize = 64;
/// Upper bounds a reader accepts, so a damaged header cannot ask for gigabytes.
pub const MAX_SLOTS: u32 = 4096;
pub const MAX_OPS_PER_SLOT: u32 = 4096;

/// Header field offsets.
pub mod header {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 8;
    pub const HEADER_BYTES: usize = 12;
    pub const SLOTS: usize = 16;
    pub const OPS_PER_SLOT: usize = 20;
    pub const SLOT_BYTES: usize = 24;
    pub const PID: usize = 28;
    /// Sequence counter of the three time fields below.
    pub const SEQ: usize = 32;
    /// CLOCK_REALTIME ns of the collector's last pass (written even when idle).
    pub const HEARTBEAT_NS: usize = 40;
    /// CLOCK_REALTIME ns of the last change of an operation.
    pub const LAST_UPDATE_NS: usize = 48;
    /// CLOCK_REALTIME minus CLOCK_MONOTONIC, ns: the records' times are monotonic.
    pub const REALTIME_MINUS_MONOTONIC_NS: usize = 56;
    pub const HOST: usize = 64;
}

/// Slot field offsets (from the slot's start).
pub mod slot {
    pub const SEQ: usize = 0;
    pub const COMM_HASH: usize = 8;
    pub const RANK: usize = 16;
    pub const NRANKS: usize = 20;
    /// Operations ever written; the newest is at `(written - 1) % ops_per_slot`.
    pub const WRITTEN: usize = 24;
    /// 1 once the communicator rank finalized; 0 for a free slot, 1 used, 2 finalized.
    pub const USE: usize = 32;
}

/// Record field offsets (from the record's start).
pub mod record {
    pub const SEQ: usize = 0;
    pub const FUNC: usize = 8;
    pub const BYTES: usize = 24;
    pub const PEER: usize = 32;
    pub const STATE: usize = 36;
    pub const KIND: usize = 37;
    pub const ENQUEUED_NS: usize = 40;
    pub const GPU_START_NS: usize = 48;
    pub const COMPLETED_NS: usize = 56;
    /// The proxy operation the operation waits for (see [`super::ProxyWait`]): since
    /// when (CLOCK_MONOTONIC ns; 0: no proxy operation open), its peer, channel,
    /// direction, the steps done of its steps (0 of 0: steps not recorded), whether a
    /// step waits, and how many of the operation's proxy operations are open.
    pub const PROXY_SINCE_NS: usize = 64;
    pub const PROXY_PEER: usize = 72;
    pub const PROXY_CHANNEL: usize = 76;
    pub const PROXY_SEND: usize = 77;
    pub const PROXY_STEP_WAITING: usize = 78;
    pub const PROXY_STEPS_DONE: usize = 80;
    pub const PROXY_STEPS: usize = 84;
    pub const PROXY_OPEN: usize = 88;
}

pub const SLOT_FREE: u8 = 0;
pub const SLOT_USED: u8 = 1;
pub const SLOT_FINALIZED: u8 = 2;

pub const KIND_COLL: u8 = 1;
pub const KIND_P2P: u8 = 2;

/// Where an operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum OpState {
    /// Enqueued by the rank, never started on the GPU.
    Enqueued = 1,
    /// Started on the GPU, not completed.
    Running = 2,
    Completed = 3,
    /// Its GPU part ended; its proxy operations wait on the network or the peer.
    Proxy = 4,
}

impl OpState {
    pub fn from_byte(byte: u8) -> Option<OpState> {
        match byte {
            1 => Some(OpState::Enqueued),
            2 => Some(OpState::Running),
            3 => Some(OpState::Completed),
            4 => Some(OpState::Proxy),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            OpState::Enqueued => "enqueued",
            OpState::Running => "running",
            OpState::Completed => "completed",
            OpState::Proxy => "proxy",
        }
    }

    /// Where an unfinished operation is stuck, in words.
    pub fn stuck_where(self) -> &'static str {
        match self {
            OpState::Enqueued => "enqueued but never started on the GPU",
            OpState::Running => "started on the GPU but not completed",
            OpState::Completed => "completed",
            OpState::Proxy => "done on the GPU, its proxy operations not",
        }
    }
}

pub fn slot_bytes(ops_per_slot: u32) -> usize {
    SLOT_HEADER_BYTES + ops_per_slot as usize * RECORD_BYTES
}

pub fn file_bytes(slots: u32, ops_per_slot: u32) -> usize {
    HEADER_BYTES + slots as usize * slot_bytes(ops_per_slot)
}

/// The recorder file of one process in a run directory.
pub fn file_name(host: &str, pid: i32) -> String {
    format!("nccl-scorep-flight-{host}-{pid}.bin")
}

pub fn is_file_name(name: &str) -> bool {
    name.starts_with("nccl-scorep-flight-") && name.ends_with(".bin")
}

pub fn put_u64(buf: &mut [u8], at: usize, value: u64) {
    buf[at..at + 8].copy_from_slice(&value.to_le_bytes());
}
pub fn put_u32(buf: &mut [u8], at: usize, value: u32) {
    buf[at..at + 4].copy_from_slice(&value.to_le_bytes());
}
pub fn put_i32(buf: &mut [u8], at: usize, value: i32) {
    buf[at..at + 4].copy_from_slice(&value.to_le_bytes());
}
fn get_u64(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().unwrap_or_default())
}
fn get_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().unwrap_or_default())
}
fn get_i32(buf: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(buf[at..at + 4].try_into().unwrap_or_default())
}
/// A zero-padded text field.
fn get_text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
/// Writes `text` zero-padded into `buf` (cut to fit).
pub fn put_text(buf: &mut [u8], text: &str) {
    buf.fill(0);
    let n = text.len().min(buf.len() - 1);
    buf[..n].copy_from_slice(&text.as_bytes()[..n]);
}

/// One operation as the writer records it (times CLOCK_MONOTONIC ns, 0: not reached).
#[derive(Clone, Copy, Debug, Default)]
pub struct OpRecord<'a> {
    pub seq: u64,
    pub func: &'a str,
    pub is_coll: bool,
    pub bytes: u64,
    pub peer: i32,
    pub enqueued_ns: u64,
    pub gpu_start_ns: u64,
    pub completed_ns: u64,
}

/// The proxy operation an operation waits for: the oldest of its open ones, by the time
/// it last moved on (its start, or its last step's end).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyWait {
    /// Since when it has not moved on (CLOCK_MONOTONIC ns written, CLOCK_REALTIME read).
    pub since_ns: u64,
    pub peer: i32,
    pub channel: u8,
    pub send: bool,
    /// A step of it started and has not ended (steps are recorded).
    pub step_waiting: bool,
    pub steps_done: u32,
    /// Its steps (0: NCCL gave none, or they are not recorded).
    pub steps: u32,
    /// Open proxy operations of the operation.
    pub open: u32,
}

impl ProxyWait {
    /// What it waits for, in words: a send waits for the network to take its data, a
    /// receive for the peer's data.
    pub fn describe(&self) -> String {
        let (direction, waits_on) = if self.send {
            ("send to", "the network")
        } else {
            ("receive from", "the peer")
        };
        let steps = if self.steps > 0 {
            format!(
                ", {} of {} steps done{}",
                self.steps_done,
                self.steps,
                if self.step_waiting {
                    ", one waiting"
                } else {
                    ""
                }
            )
        } else {
            String::new()
        };
        format!(
            "proxy {direction} rank {} on channel {}{steps}: waiting on {waits_on}",
            self.peer, self.channel
        )
    }
}

/// Where a written operation is, to change its state later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpSlot {
    pub slot: usize,
    /// The operation's number in its slot (`written` when it was recorded).
    pub number: u64,
}

/// The writer's side: an image of the file in memory, changed in place and written out
/// slot by slot (only slots changed since the last [`FlightWriter::publish`]).
pub struct FlightWriter {
    file: File,
    image: Vec<u8>,
    slots: u32,
    ops_per_slot: u32,
    dirty: Vec<bool>,
    header_dirty: bool,
}

impl FlightWriter {
    /// Creates the fixed-size file (an existing file of ours is emptied, links are not
    /// followed).
    pub fn create(
        path: &Path,
        host: &str,
        pid: i32,
        slots: u32,
        ops_per_slot: u32,
        realtime_minus_monotonic_ns: i64,
    ) -> io::Result<FlightWriter> {
        let slots = slots.clamp(1, MAX_SLOTS);
        let ops_per_slot = ops_per_slot.clamp(1, MAX_OPS_PER_SLOT);
        let file = crate::safe_file::create(path)?;
        let mut image = vec![0u8; file_bytes(slots, ops_per_slot)];
        image[header::MAGIC..header::MAGIC + 8].copy_from_slice(&MAGIC);
        put_u32(&mut image, header::VERSION, VERSION);
        put_u32(&mut image, header::HEADER_BYTES, HEADER_BYTES as u32);
        put_u32(&mut image, header::SLOTS, slots);
        put_u32(&mut image, header::OPS_PER_SLOT, ops_per_slot);
        put_u32(
            &mut image,
            header::SLOT_BYTES,
            slot_bytes(ops_per_slot) as u32,
        );
        put_i32(&mut image, header::PID, pid);
        put_u64(
            &mut image,
            header::REALTIME_MINUS_MONOTONIC_NS,
            realtime_minus_monotonic_ns as u64,
        );
        put_text(&mut image[header::HOST..header::HOST + HOST_BYTES], host);
        file.write_all_at(&image, 0)?;
        Ok(FlightWriter {
            file,
            image,
            slots,
            ops_per_slot,
            dirty: vec![false; slots as usize],
            header_dirty: false,
        })
    }

    /// A second writer of the same file, from the same image: positioned writes, so the
    /// two share no file position. The process's next part goes on with it.
    pub fn try_clone(&self) -> io::Result<FlightWriter> {
        Ok(FlightWriter {
            file: self.file.try_clone()?,
            image: self.image.clone(),
            slots: self.slots,
            ops_per_slot: self.ops_per_slot,
            dirty: self.dirty.clone(),
            header_dirty: self.header_dirty,
        })
    }

    /// Operations a slot holds: the newest of them, older ones being overwritten.
    pub fn ops_per_slot(&self) -> u32 {
        self.ops_per_slot
    }

    fn slot_at(&self, slot: usize) -> usize {
        HEADER_BYTES + slot * slot_bytes(self.ops_per_slot)
    }

    /// Takes a slot for a communicator rank: a free one, else the oldest finalized one
    /// (`None` when all are in use).
    pub fn claim(&mut self, comm_hash: u64, rank: i32, nranks: i32) -> Option<usize> {
        let slots = self.slots as usize;
        let free = (0..slots).find(|&s| self.image[self.slot_at(s) + slot::USE] == SLOT_FREE);
        let slot = free.or_else(|| {
            (0..slots).find(|&s| self.image[self.slot_at(s) + slot::USE] == SLOT_FINALIZED)
        })?;
        let at = self.slot_at(slot);
        let size = slot_bytes(self.ops_per_slot);
        let seq = get_u64(&self.image, at + slot::SEQ);
        self.image[at..at + size].fill(0);
        put_u64(&mut self.image, at + slot::SEQ, seq);
        put_u64(&mut self.image, at + slot::COMM_HASH, comm_hash);
        put_i32(&mut self.image, at + slot::RANK, rank);
        put_i32(&mut self.image, at + slot::NRANKS, nranks);
        self.image[at + slot::USE] = SLOT_USED;
        self.dirty[slot] = true;
        Some(slot)
    }

    pub fn finalize(&mut self, slot: usize) {
        let at = self.slot_at(slot);
        self.image[at + slot::USE] = SLOT_FINALIZED;
        self.dirty[slot] = true;
    }

    /// Records a new operation (enqueued, or further when its times say so), replacing
    /// the slot's oldest when the slot is full.
    pub fn push(&mut self, slot: usize, op: &OpRecord) -> OpSlot {
        let at = self.slot_at(slot);
        let number = get_u64(&self.image, at + slot::WRITTEN);
        put_u64(&mut self.image, at + slot::WRITTEN, number + 1);
        let r = self.record_at(slot, number);
        let rec = &mut self.image[r..r + RECORD_BYTES];
        put_u64(rec, record::SEQ, op.seq);
        put_text(&mut rec[record::FUNC..record::FUNC + FUNC_BYTES], op.func);
        put_u64(rec, record::BYTES, op.bytes);
        put_i32(rec, record::PEER, op.peer);
        rec[record::KIND] = if op.is_coll { KIND_COLL } else { KIND_P2P };
        put_u64(rec, record::ENQUEUED_NS, op.enqueued_ns);
        put_u64(rec, record::GPU_START_NS, op.gpu_start_ns);
        put_u64(rec, record::COMPLETED_NS, op.completed_ns);
        rec[record::STATE] = if op.completed_ns != 0 {
            OpState::Completed
        } else if op.gpu_start_ns != 0 {
            OpState::Running
        } else {
            OpState::Enqueued
        } as u8;
        self.dirty[slot] = true;
        OpSlot { slot, number }
    }

    fn record_at(&self, slot: usize, number: u64) -> usize {
        self.slot_at(slot) + SLOT_HEADER_BYTES + self.place_in_slot(number) * RECORD_BYTES
    }

    /// Where in its slot the record of operation `number` lies (of [`Self::ops_per_slot`]
    /// places): the operation `ops_per_slot` later overwrites it.
    pub fn place_in_slot(&self, number: u64) -> usize {
        (number % u64::from(self.ops_per_slot)) as usize
    }

    /// Whether `op` is still in its slot (not overwritten by newer ones).
    pub fn holds(&self, op: OpSlot) -> bool {
        let written = get_u64(&self.image, self.slot_at(op.slot) + slot::WRITTEN);
        op.number < written && written - op.number <= self.ops_per_slot as u64
    }

    /// The operation started on the GPU at `time_ns` (kept: the first start).
    pub fn gpu_started(&mut self, op: OpSlot, time_ns: u64) {
        if !self.holds(op) {
            return;
        }
        let r = self.record_at(op.slot, op.number);
        if self.image[r + record::STATE] == OpState::Enqueued as u8 {
            self.image[r + record::STATE] = OpState::Running as u8;
            put_u64(&mut self.image, r + record::GPU_START_NS, time_ns);
            self.dirty[op.slot] = true;
        }
    }

    /// The proxy operation `op` waits for (`None`: none open), and whether its GPU part
    /// ended (then it is waiting in the proxy).
    pub fn proxy_wait(&mut self, op: OpSlot, wait: Option<ProxyWait>, gpu_done: bool) {
        if !self.holds(op) {
            return;
        }
        let r = self.record_at(op.slot, op.number);
        let wait = wait.unwrap_or_default();
        let rec = &mut self.image[r..r + RECORD_BYTES];
        put_u64(rec, record::PROXY_SINCE_NS, wait.since_ns);
        put_i32(rec, record::PROXY_PEER, wait.peer);
        rec[record::PROXY_CHANNEL] = wait.channel;
        rec[record::PROXY_SEND] = u8::from(wait.send);
        rec[record::PROXY_STEP_WAITING] = u8::from(wait.step_waiting);
        put_u32(rec, record::PROXY_STEPS_DONE, wait.steps_done);
        put_u32(rec, record::PROXY_STEPS, wait.steps);
        put_u32(rec, record::PROXY_OPEN, wait.open);
        let state = rec[record::STATE];
        if state != OpState::Completed as u8 {
            rec[record::STATE] = if gpu_done && wait.since_ns != 0 {
                OpState::Proxy as u8
            } else if state == OpState::Proxy as u8 {
                OpState::Running as u8
            } else {
                state
            };
        }
        self.dirty[op.slot] = true;
    }

    pub fn completed(&mut self, op: OpSlot, time_ns: u64) {
        if !self.holds(op) {
            return;
        }
        let r = self.record_at(op.slot, op.number);
        self.image[r + record::STATE] = OpState::Completed as u8;
        put_u64(&mut self.image, r + record::COMPLETED_NS, time_ns);
        put_u64(&mut self.image, r + record::PROXY_SINCE_NS, 0);
        self.dirty[op.slot] = true;
    }

    /// Sets the heartbeat (and the last update when an operation changed) and writes
    /// every changed part, each between an odd and an even value of its counter.
    pub fn publish(&mut self, now_realtime_ns: u64) -> io::Result<()> {
        let changed = self.dirty.iter().any(|&d| d);
        for slot in 0..self.slots as usize {
            if std::mem::take(&mut self.dirty[slot]) {
                let at = self.slot_at(slot);
                self.write_guarded(at, slot_bytes(self.ops_per_slot), at + slot::SEQ)?;
            }
        }
        put_u64(&mut self.image, header::HEARTBEAT_NS, now_realtime_ns);
        if changed || self.header_dirty {
            put_u64(&mut self.image, header::LAST_UPDATE_NS, now_realtime_ns);
            self.header_dirty = false;
        }
        self.write_guarded(header::SEQ, HEADER_BYTES - header::SEQ, header::SEQ)
    }

    /// Writes `image[at..at+len]` with the counter at `seq_at` (inside it) odd while the
    /// rest changes.
    fn write_guarded(&mut self, at: usize, len: usize, seq_at: usize) -> io::Result<()> {
        let seq = get_u64(&self.image, seq_at) | 1;
        put_u64(&mut self.image, seq_at, seq);
        self.file
            .write_all_at(&self.image[seq_at..seq_at + 8], seq_at as u64)?;
        self.file
            .write_all_at(&self.image[at..at + len], at as u64)?;
        put_u64(&mut self.image, seq_at, seq + 1);
        self.file
            .write_all_at(&self.image[seq_at..seq_at + 8], seq_at as u64)
    }
}

/// Why a recorder file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum FlightError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: not a flight recorder file ({why})")]
    Damaged { path: PathBuf, why: String },
    #[error("{path}: the writer kept changing it; try again")]
    Busy { path: PathBuf },
}

/// One operation as read back, times on CLOCK_REALTIME ns (0: not reached).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    pub seq: u64,
    pub func: String,
    pub is_coll: bool,
    pub bytes: u64,
    /// The peer of a send/receive, the root of a rooted collective, else -1.
    pub peer: i32,
    pub state: OpState,
    pub enqueued_ns: u64,
    pub gpu_start_ns: u64,
    pub completed_ns: u64,
    /// The proxy operation it waits for, while one of its proxy operations is open.
    pub proxy: Option<ProxyWait>,
}

/// One communicator rank's slot, operations oldest first.
#[derive(Clone, Debug)]
pub struct CommRank {
    pub comm_hash: u64,
    pub rank: i32,
    pub nranks: i32,
    pub finalized: bool,
    pub ops: Vec<Op>,
}

/// One process's recorder file.
#[derive(Clone, Debug)]
pub struct ProcessRecord {
    pub path: PathBuf,
    pub host: String,
    pub pid: i32,
    pub heartbeat_ns: u64,
    pub last_update_ns: u64,
    pub ranks: Vec<CommRank>,
}

/// Reads a recorder file while its writer may be changing it.
pub fn read_file(path: &Path) -> Result<ProcessRecord, FlightError> {
    let io = |source| FlightError::Io {
        path: path.to_path_buf(),
        source,
    };
    let damaged = |why: String| FlightError::Damaged {
        path: path.to_path_buf(),
        why,
    };
    let file = File::open(path).map_err(io)?;
    let mut head = [0u8; HEADER_BYTES];
    file.read_exact_at(&mut head, 0)
        .map_err(|_| damaged("shorter than its header".into()))?;
    if head[..8] != MAGIC {
        return Err(damaged("wrong magic".into()));
    }
    let version = get_u32(&head, header::VERSION);
    if version != VERSION {
        return Err(damaged(format!(
            "layout version {version}, this reads {VERSION}"
        )));
    }
    let slots = get_u32(&head, header::SLOTS);
    let ops = get_u32(&head, header::OPS_PER_SLOT);
    if slots == 0 || slots > MAX_SLOTS || ops == 0 || ops > MAX_OPS_PER_SLOT {
        return Err(damaged(format!("{slots} slots of {ops} operations")));
    }
    if get_u32(&head, header::SLOT_BYTES) as usize != slot_bytes(ops)
        || get_u32(&head, header::HEADER_BYTES) as usize != HEADER_BYTES
    {
        return Err(damaged("sizes do not match the layout".into()));
    }
    let busy = || FlightError::Busy {
        path: path.to_path_buf(),
    };
    let times = consistent(
        || {
            let mut buf = [0u8; HEADER_BYTES];
            file.read_exact_at(&mut buf, 0)?;
            Ok(buf)
        },
        header::SEQ,
    )
    .map_err(io)?
    .ok_or_else(busy)?;
    let offset = get_u64(&times, header::REALTIME_MINUS_MONOTONIC_NS) as i64;
    let to_real = |monotonic: u64| {
        if monotonic == 0 {
            0
        } else {
            monotonic.saturating_add_signed(offset)
        }
    };
    let mut record = ProcessRecord {
        path: path.to_path_buf(),
        host: get_text(&head[header::HOST..header::HOST + HOST_BYTES]),
        pid: get_i32(&head, header::PID),
        heartbeat_ns: get_u64(&times, header::HEARTBEAT_NS),
        last_update_ns: get_u64(&times, header::LAST_UPDATE_NS),
        ranks: Vec::new(),
    };
    let size = slot_bytes(ops);
    for index in 0..slots as usize {
        let at = (HEADER_BYTES + index * size) as u64;
        let bytes = consistent(
            || {
                let mut buf = vec![0u8; size];
                file.read_exact_at(&mut buf, at)?;
                Ok(buf)
            },
            slot::SEQ,
        )
        .map_err(|_| damaged(format!("cut in slot {index}")))?
        .ok_or_else(busy)?;
        let use_ = bytes[slot::USE];
        if use_ == SLOT_FREE {
            continue;
        }
        let written = get_u64(&bytes, slot::WRITTEN);
        let kept = written.min(ops as u64);
        let mut comm_rank = CommRank {
            comm_hash: get_u64(&bytes, slot::COMM_HASH),
            rank: get_i32(&bytes, slot::RANK),
            nranks: get_i32(&bytes, slot::NRANKS),
            finalized: use_ == SLOT_FINALIZED,
            ops: Vec::with_capacity(kept as usize),
        };
        for n in (written - kept)..written {
            let r = SLOT_HEADER_BYTES + (n % ops as u64) as usize * RECORD_BYTES;
            let rec = &bytes[r..r + RECORD_BYTES];
            let Some(state) = OpState::from_byte(rec[record::STATE]) else {
                return Err(damaged(format!("slot {index}: unknown state")));
            };
            comm_rank.ops.push(Op {
                seq: get_u64(rec, record::SEQ),
                func: get_text(&rec[record::FUNC..record::FUNC + FUNC_BYTES]),
                is_coll: rec[record::KIND] == KIND_COLL,
                bytes: get_u64(rec, record::BYTES),
                peer: get_i32(rec, record::PEER),
                state,
                enqueued_ns: to_real(get_u64(rec, record::ENQUEUED_NS)),
                gpu_start_ns: to_real(get_u64(rec, record::GPU_START_NS)),
                completed_ns: to_real(get_u64(rec, record::COMPLETED_NS)),
                proxy: read_proxy_wait(rec).map(|wait| ProxyWait {
                    since_ns: to_real(wait.since_ns),
                    ..wait
                }),
            });
        }
        record.ranks.push(comm_rank);
    }
    Ok(record)
}

/// A record's proxy fields (times as written), when a proxy operation is open.
fn read_proxy_wait(rec: &[u8]) -> Option<ProxyWait> {
    let since_ns = get_u64(rec, record::PROXY_SINCE_NS);
    (since_ns != 0).then(|| ProxyWait {
        since_ns,
        peer: get_i32(rec, record::PROXY_PEER),
        channel: rec[record::PROXY_CHANNEL],
        send: rec[record::PROXY_SEND] != 0,
        step_waiting: rec[record::PROXY_STEP_WAITING] != 0,
        steps_done: get_u32(rec, record::PROXY_STEPS_DONE),
        steps: get_u32(rec, record::PROXY_STEPS),
        open: get_u32(rec, record::PROXY_OPEN),
    })
}

/// Reads with `read` until the sequence counter at `seq_at` is even and the same before
/// and after (`None` after many tries: the writer is too busy).
fn consistent<B: AsRef<[u8]>>(
    read: impl Fn() -> io::Result<B>,
    seq_at: usize,
) -> io::Result<Option<B>> {
    for _ in 0..1000 {
        let first = read()?;
        let before = get_u64(first.as_ref(), seq_at);
        if before % 2 == 1 {
            std::thread::yield_now();
            continue;
        }
        let again = read()?;
        if get_u64(again.as_ref(), seq_at) == before {
            return Ok(Some(first));
        }
    }
    Ok(None)
}

/// Every recorder file of a run directory, by name.
pub fn files_in(run_dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(run_dir)?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(is_file_name))
        .map(|e| e.path())
        .collect();
    files.sort();
    Ok(files)
}

/// One rank of a communicator in the diagnosis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankProgress {
    pub rank: i32,
    pub host: String,
    pub pid: i32,
    /// The highest collective sequence number the rank enqueued (None: none yet).
    pub last_seq: Option<u64>,
    pub finalized: bool,
}

/// The operation of a communicator that has been unfinished longest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stuck {
    pub rank: i32,
    pub op: Op,
    /// Since when it is in its state (CLOCK_REALTIME ns).
    pub since_ns: u64,
}

/// Ranks that have not arrived at the collective the others wait in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    pub ranks: Vec<i32>,
    pub seq: u64,
    pub func: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommDiagnosis {
    pub comm_hash: u64,
    pub nranks: i32,
    pub ranks: Vec<RankProgress>,
    /// Ranks of the communicator that have no recorder slot here.
    pub unseen_ranks: Vec<i32>,
    pub missing: Option<Missing>,
    pub longest: Option<Stuck>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessHealth {
    pub host: String,
    pub pid: i32,
    pub heartbeat_age_ns: u64,
    pub stale: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnosis {
    pub now_ns: u64,
    pub processes: Vec<ProcessHealth>,
    pub comms: Vec<CommDiagnosis>,
}

/// Diagnoses the processes' records at `now_ns` (CLOCK_REALTIME); a heartbeat older than
/// `stale_ns` marks its process stale.
pub fn diagnose(records: &[ProcessRecord], now_ns: u64, stale_ns: u64) -> Diagnosis {
    let processes = records
        .iter()
        .map(|p| {
            let age = now_ns.saturating_sub(p.heartbeat_ns);
            ProcessHealth {
                host: p.host.clone(),
                pid: p.pid,
                heartbeat_age_ns: age,
                stale: age > stale_ns,
            }
        })
        .collect();
    let mut by_comm: BTreeMap<u64, Vec<(&ProcessRecord, &CommRank)>> = BTreeMap::new();
    for process in records {
        for rank in &process.ranks {
            by_comm
                .entry(rank.comm_hash)
                .or_default()
                .push((process, rank));
        }
    }
    let mut comms = Vec::new();
    for (comm_hash, mut members) in by_comm {
        members.sort_by_key(|(_, r)| r.rank);
        // A rank re-initialised later has a second slot: keep its newest.
        members.dedup_by_key(|(_, r)| r.rank);
        let nranks = members.iter().map(|(_, r)| r.nranks).max().unwrap_or(0);
        let ranks: Vec<RankProgress> = members
            .iter()
            .map(|(p, r)| RankProgress {
                rank: r.rank,
                host: p.host.clone(),
                pid: p.pid,
                last_seq: r.ops.iter().filter(|o| o.is_coll).map(|o| o.seq).max(),
                finalized: r.finalized,
            })
            .collect();
        let unseen_ranks = (0..nranks)
            .filter(|n| !ranks.iter().any(|r| r.rank == *n))
            .collect();
        let top = ranks.iter().filter_map(|r| r.last_seq).max();
        let missing = top.and_then(|seq| {
            let behind: Vec<i32> = ranks
                .iter()
                .filter(|r| !r.finalized && r.last_seq.is_none_or(|s| s < seq))
                .map(|r| r.rank)
                .collect();
            let func = members
                .iter()
                .flat_map(|(_, r)| &r.ops)
                .find(|o| o.is_coll && o.seq == seq)
                .map(|o| o.func.clone())
                .unwrap_or_default();
            (!behind.is_empty()).then_some(Missing {
                ranks: behind,
                seq,
                func,
            })
        });
        let longest = members
            .iter()
            .flat_map(|(_, r)| r.ops.iter().map(move |op| (r.rank, op)))
            .filter(|(_, op)| op.state != OpState::Completed)
            .min_by_key(|(_, op)| op.enqueued_ns)
            .map(|(rank, op)| Stuck {
                rank,
                op: op.clone(),
                since_ns: match (op.state, &op.proxy) {
                    (OpState::Proxy, Some(wait)) => wait.since_ns,
                    (OpState::Running, _) => op.gpu_start_ns,
                    _ => op.enqueued_ns,
                },
            });
        comms.push(CommDiagnosis {
            comm_hash,
            nranks,
            ranks,
            unseen_ranks,
            missing,
            longest,
        });
    }
    Diagnosis {
        now_ns,
        processes,
        comms,
    }
}

fn seconds(ns: u64) -> String {
    format!("{:.1} s", ns as f64 / 1e9)
}

/// The ranks' progress, one line per group of ranks at the same point (last collective,
/// finalized or not), in the order of their lowest rank: a job of a thousand ranks where
/// one is behind gives two lines. A group of one rank names its process and host; a
/// larger one its host, or how many hosts it spans.
fn render_progress(out: &mut String, ranks: &[RankProgress]) {
    use std::fmt::Write;
    let mut by_point: BTreeMap<(Option<u64>, bool), Vec<&RankProgress>> = BTreeMap::new();
    for rank in ranks {
        by_point
            .entry((rank.last_seq, rank.finalized))
            .or_default()
            .push(rank);
    }
    let mut groups: Vec<_> = by_point.into_iter().collect();
    groups.sort_by_key(|(_, members)| members.iter().map(|r| r.rank).min());
    for ((last_seq, finalized), members) in groups {
        let seq = last_seq.map_or_else(|| "none".to_owned(), |s| s.to_string());
        let finalized = if finalized { ", finalized" } else { "" };
        let place = match members.as_slice() {
            [one] => format!("pid {} on {}", one.pid, one.host),
            _ => {
                let mut hosts: Vec<&str> = members.iter().map(|r| r.host.as_str()).collect();
                hosts.sort_unstable();
                hosts.dedup();
                match hosts.as_slice() {
                    [host] => format!("{} ranks on {host}", members.len()),
                    _ => format!("{} ranks on {} hosts", members.len(), hosts.len()),
                }
            }
        };
        let _ = writeln!(
            out,
            "  {}: last collective seq {seq}{finalized} ({place})",
            ranks_phrase(members.iter().map(|r| i128::from(r.rank)))
        );
    }
}

/// The diagnosis as the text `nccl-scorep status` prints and the hang report holds.
pub fn render(diagnosis: &Diagnosis) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for p in &diagnosis.processes {
        if p.stale {
            let _ = writeln!(
                out,
                "process {} on {}: no heartbeat for {} (its collector is stuck or it died)",
                p.pid,
                p.host,
                seconds(p.heartbeat_age_ns)
            );
        }
    }
    for comm in &diagnosis.comms {
        let _ = writeln!(
            out,
            "communicator {:#018x} ({} ranks)",
            comm.comm_hash, comm.nranks
        );
        render_progress(&mut out, &comm.ranks);
        if !comm.unseen_ranks.is_empty() {
            let _ = writeln!(
                out,
                "  no recorder file seen for {}",
                ranks_phrase(comm.unseen_ranks.iter().map(|&r| i128::from(r)))
            );
        }
        if let Some(missing) = &comm.missing {
            let _ = writeln!(
                out,
                "  not arrived: {} {} not entered {} seq {} that the others wait in",
                ranks_phrase(missing.ranks.iter().map(|&r| i128::from(r))),
                if missing.ranks.len() == 1 {
                    "has"
                } else {
                    "have"
                },
                missing.func,
                missing.seq
            );
        }
        match &comm.longest {
            Some(stuck) => {
                let _ = writeln!(
                    out,
                    "  longest unfinished: rank {} {} seq {} ({} bytes) {}, for {}",
                    stuck.rank,
                    stuck.op.func,
                    stuck.op.seq,
                    stuck.op.bytes,
                    stuck.op.state.stuck_where(),
                    seconds(diagnosis.now_ns.saturating_sub(stuck.since_ns))
                );
                if let Some(wait) = &stuck.op.proxy {
                    let _ = writeln!(
                        out,
                        "    {}, for {}",
                        wait.describe(),
                        seconds(diagnosis.now_ns.saturating_sub(wait.since_ns))
                    );
                }
            }
            None => {
                let _ = writeln!(out, "  every recorded operation completed");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(seq: u64, state: OpState, enqueued_ns: u64) -> Op {
        Op {
            seq,
            func: "AllReduce".into(),
            is_coll: true,
            bytes: 4096,
            peer: -1,
            state,
            enqueued_ns,
            gpu_start_ns: if state == OpState::Enqueued {
                0
            } else {
                enqueued_ns + 1
            },
            completed_ns: 0,
            proxy: None,
        }
    }

    fn process(rank: i32, ops: Vec<Op>) -> ProcessRecord {
        ProcessRecord {
            path: PathBuf::new(),
            host: "node".into(),
            pid: 100 + rank,
            heartbeat_ns: 1_000,
            last_update_ns: 1_000,
            ranks: vec![CommRank {
                comm_hash: 0xabc,
                rank,
                nranks: 4,
                finalized: false,
                ops,
            }],
        }
    }

    #[test]
    fn a_rank_that_never_entered_the_collective_is_named_with_seq_and_state() {
        let mut records: Vec<ProcessRecord> = (0..3)
            .map(|r| {
                process(
                    r,
                    vec![
                        op(0, OpState::Completed, 10),
                        op(1, OpState::Running, 20 + r as u64),
                    ],
                )
            })
            .collect();
        records.push(process(3, vec![op(0, OpState::Completed, 10)]));
        let d = diagnose(&records, 10_000_000_000, 5_000_000_000);
        let comm = &d.comms[0];
        assert_eq!(
            comm.missing,
            Some(Missing {
                ranks: vec![3],
                seq: 1,
                func: "AllReduce".into()
            })
        );
        let longest = comm.longest.as_ref().unwrap();
        assert_eq!(
            (longest.rank, longest.op.seq, longest.op.state),
            (0, 1, OpState::Running)
        );
        let text = render(&d);
        assert!(
            text.contains("not arrived: rank 3 has not entered AllReduce seq 1"),
            "{text}"
        );
        assert!(
            text.contains("  ranks 0-2: last collective seq 1 (3 ranks on node)\n"),
            "{text}"
        );
        assert!(
            text.contains("  rank 3: last collective seq 0 (pid 103 on node)\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "rank 0 AllReduce seq 1 (4096 bytes) started on the GPU but not completed"
            ),
            "{text}"
        );
        assert!(text.contains("no heartbeat for 10.0 s"), "{text}");
    }

    /// A thousand ranks where one is behind: two lines of progress, not a thousand.
    #[test]
    fn ranks_at_the_same_point_share_one_line() {
        let ranks: Vec<RankProgress> = (0..1024)
            .map(|rank| RankProgress {
                rank,
                host: format!("node{}", rank / 8),
                pid: 1000 + rank,
                last_seq: Some(if rank == 512 { 6 } else { 7 }),
                finalized: false,
            })
            .collect();
        let mut text = String::new();
        render_progress(&mut text, &ranks);
        assert_eq!(
            text,
            "  ranks 0-511,513-1023: last collective seq 7 (1023 ranks on 128 hosts)\n  \
             rank 512: last collective seq 6 (pid 1512 on node64)\n"
        );
    }

    #[test]
    fn what_the_writer_publishes_reads_back_and_a_full_slot_keeps_its_newest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(file_name("node", 7));
        let mut w = FlightWriter::create(&path, "node", 7, 2, 3, 1_000).unwrap();
        let slot = w.claim(0xfeed, 1, 2).unwrap();
        let mut ops = Vec::new();
        for seq in 0..5 {
            ops.push(w.push(
                slot,
                &OpRecord {
                    seq,
                    func: "AllGather",
                    is_coll: true,
                    bytes: 8,
                    peer: -1,
                    enqueued_ns: 100 + seq,
                    ..OpRecord::default()
                },
            ));
        }
        w.gpu_started(ops[3], 200);
        w.completed(ops[2], 300);
        w.gpu_started(ops[0], 400); // overwritten: ignored
        w.publish(5_000).unwrap();
        let read = read_file(&path).unwrap();
        assert_eq!(
            (read.host.as_str(), read.pid, read.heartbeat_ns),
            ("node", 7, 5_000)
        );
        let ops: Vec<(u64, OpState, u64, u64)> = read.ranks[0]
            .ops
            .iter()
            .map(|o| (o.seq, o.state, o.enqueued_ns, o.gpu_start_ns))
            .collect();
        assert_eq!(
            ops,
            vec![
                (2, OpState::Completed, 1_102, 0),
                (3, OpState::Running, 1_103, 1_200),
                (4, OpState::Enqueued, 1_104, 0)
            ]
        );
        assert_eq!((read.ranks[0].comm_hash, read.ranks[0].rank), (0xfeed, 1));
        std::fs::write(&path, b"garbage").unwrap();
        assert!(matches!(read_file(&path), Err(FlightError::Damaged { .. })));
    }

    #[test]
    fn an_operation_done_on_the_gpu_waits_in_the_proxy_and_says_on_what() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(file_name("node", 8));
        let mut w = FlightWriter::create(&path, "node", 8, 1, 4, 1_000).unwrap();
        let slot = w.claim(0xbeef, 2, 4).unwrap();
        let record = |seq| OpRecord {
            seq,
            func: "AllReduce",
            is_coll: true,
            bytes: 64,
            peer: -1,
            enqueued_ns: 100,
            ..OpRecord::default()
        };
        let (send, recv) = (w.push(slot, &record(0)), w.push(slot, &record(1)));
        w.gpu_started(send, 200);
        w.gpu_started(recv, 210);
        let waiting = ProxyWait {
            since_ns: 300,
            peer: 3,
            channel: 1,
            send: true,
            step_waiting: true,
            steps_done: 2,
            steps: 8,
            open: 2,
        };
        w.proxy_wait(send, Some(waiting), true);
        // Still running on the GPU: the proxy detail, not the proxy state.
        w.proxy_wait(
            recv,
            Some(ProxyWait {
                send: false,
                ..waiting
            }),
            false,
        );
        w.publish(9_000).unwrap();
        let read = read_file(&path).unwrap();
        let ops = &read.ranks[0].ops;
        assert_eq!(
            (ops[0].state, ops[1].state),
            (OpState::Proxy, OpState::Running)
        );
        assert_eq!(
            ops[0].proxy,
            Some(ProxyWait {
                since_ns: 1_300,
                ..waiting
            }),
            "times on CLOCK_REALTIME"
        );
        let diagnosis = diagnose(&[read], 2_000_001_300, u64::MAX);
        let stuck = diagnosis.comms[0].longest.as_ref().unwrap();
        assert_eq!((stuck.op.seq, stuck.since_ns), (0, 1_300));
        let text = render(&diagnosis);
        assert!(
            text.contains(
                "rank 2 AllReduce seq 0 (64 bytes) done on the GPU, its proxy operations not, \
                 for 2.0 s\n    proxy send to rank 3 on channel 1, 2 of 8 steps done, one \
                 waiting: waiting on the network, for 2.0 s"
            ),
            "{text}"
        );
        assert!(ProxyWait {
            send: false,
            steps: 0,
            ..waiting
        }
        .describe()
        .ends_with("receive from rank 3 on channel 1: waiting on the peer"));
        // Once its proxy operations end the operation is running again until completed.
        w.proxy_wait(send, None, true);
        w.completed(recv, 400);
        w.publish(9_100).unwrap();
        let read = read_file(&path).unwrap();
        let ops = &read.ranks[0].ops;
        assert_eq!((ops[0].state, ops[0].proxy), (OpState::Running, None));
        assert_eq!((ops[1].state, ops[1].proxy), (OpState::Completed, None));
    }
}
