//! A CPU-only `libnccl.so`: NCCL's public C API (the part applications use) over
//! nccl-sim's engine. Every call makes the profiler calls nccl-sim makes for it (the same
//! plugin loading, threads and call sequences), and the data really moves: buffers are host
//! memory, reductions are computed, and ranks in different processes hand each other their
//! data through shared memory ([`exchange`]). Streams are opaque and never used.
//!
//! Settings: `NCCL_PROFILER_PLUGIN` as for NCCL; `NCCL_SIM_RELEASE` (2.23 … 2.32, default
//! 2.32) the emulated release; `NCCL_SIM_SHM_DIR` where the exchange directories go.

pub mod exchange;
pub mod reduce;

use exchange::{Exchange, Posted};
use nccl_sim::names::DataType;
use nccl_sim::nccl::{self as sim, CommOptions, Nccl, SimConfig};
use nccl_sim::profiler::Profiler;
use nccl_sim::release::{Release, NEWEST};
use reduce::RedOp;
use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// `ncclResult_t` values.
pub mod result {
    use std::ffi::c_int;
    pub const SUCCESS: c_int = 0;
    pub const SYSTEM_ERROR: c_int = 2;
    pub const INTERNAL_ERROR: c_int = 3;
    pub const INVALID_ARGUMENT: c_int = 4;
    pub const INVALID_USAGE: c_int = 5;
}

/// The variable naming the emulated NCCL release.
pub const ENV_RELEASE: &str = "NCCL_SIM_RELEASE";

/// `NCCL_SPLIT_NOCOLOR`.
const SPLIT_NOCOLOR: c_int = -1;

/// `ncclUniqueId` is 128 bytes; ours start with this mark, then a random job key.
const UNIQUE_ID_BYTES: usize = 128;
const UNIQUE_ID_MARK: &[u8; 8] = b"ncclsim\x01";

/// `ncclUniqueId`, passed by value to `ncclCommInitRank`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    pub internal: [u8; UNIQUE_ID_BYTES],
}

/// A failed call: its `ncclResult_t` and what went wrong.
struct Failure {
    code: c_int,
    message: String,
}

impl Failure {
    fn new(code: c_int, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(result::INVALID_ARGUMENT, message)
    }

    fn system(what: &str, error: std::io::Error) -> Failure {
        Failure::new(result::SYSTEM_ERROR, format!("{what}: {error}"))
    }
}

type Outcome = Result<(), Failure>;

thread_local! {
    /// `ncclGetLastError`: the last failure's message on this thread.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    /// The data movements of the open group, run at its end.
    static GROUP: RefCell<Group> = const { RefCell::new(Group { depth: 0, pending: Vec::new() }) };
}

struct Group {
    depth: i32,
    pending: Vec<Pending>,
}

/// Runs one entry point: a failure or a panic is printed (as NCCL prints its warnings) and
/// becomes its `ncclResult_t`.
fn guarded(name: &str, call: impl FnOnce() -> Outcome) -> c_int {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call))
        .unwrap_or_else(|_| Err(Failure::new(result::INTERNAL_ERROR, "internal error")));
    match outcome {
        Ok(()) => result::SUCCESS,
        Err(failure) => {
            let message = format!("{name}: {}", failure.message);
            eprintln!("libnccl (nccl-sim) WARN {message}");
            LAST_ERROR.with(|last| {
                *last.borrow_mut() = CString::new(message.replace('\0', " ")).unwrap_or_default()
            });
            failure.code
        }
    }
}

/// The process's emulated NCCL, made at the first unique id or communicator.
fn engine() -> &'static Arc<Nccl> {
    static ENGINE: OnceLock<Arc<Nccl>> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let release = match std::env::var(ENV_RELEASE) {
            Ok(text) => text.parse::<Release>().unwrap_or_else(|error| {
                eprintln!(
                    "libnccl (nccl-sim) WARN {ENV_RELEASE}={text:?}: {error}; emulating NCCL \
                     2.{}",
                    NEWEST.minor()
                );
                NEWEST
            }),
            Err(_) => NEWEST,
        };
        Nccl::new(Arc::new(Profiler::from_env(release)), SimConfig::default())
    })
}

/// A communicator rank (`ncclComm_t` points to one).
pub struct Communicator {
    comm: sim::Comm,
    exchange: Mutex<Exchange>,
    hash: u64,
    /// Splits made from this communicator so far (the same on every rank).
    splits: AtomicU64,
}

/// The communicators alive in this process, by address: a handle that is none of them is
/// refused instead of followed.
fn live() -> &'static Mutex<HashSet<usize>> {
    static LIVE: OnceLock<Mutex<HashSet<usize>>> = OnceLock::new();
    LIVE.get_or_init(Default::default)
}

fn communicator(comm: *const Communicator) -> Result<&'static Communicator, Failure> {
    let known = live()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&(comm as usize));
    if !known {
        return Err(Failure::invalid(format!(
            "{comm:p} is not a communicator of this process (NULL, destroyed, or never made)"
        )));
    }
    // SAFETY: the address is one of ours, boxed and leaked by `publish_comm`, and only
    // freed by destroy/abort after it left the set (using a communicator while another
    // thread destroys it is the application's error, as with NCCL).
    Ok(unsafe { &*comm })
}

/// Makes communicator `hash`'s rank `rank` of `n_ranks`: the profiler's init, and the
/// rank's way to the others' data. The ranks meet (a barrier) now, or at the end of the
/// open group.
fn create(hash: u64, rank: i32, n_ranks: i32) -> Result<*mut Communicator, Failure> {
    let base = nccl_sim::pxn::default_dir();
    let exchange = Exchange::join(&base, hash, rank as usize, n_ranks as usize)
        .map_err(|e| Failure::system(&format!("cannot use {}", base.display()), e))?;
    let comm = engine().comm_init(CommOptions::new(hash, rank, n_ranks));
    let pointer = Box::into_raw(Box::new(Communicator {
        comm,
        exchange: Mutex::new(exchange),
        hash,
        splits: AtomicU64::new(0),
    }));
    live()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(pointer as usize);
    submit(pointer, Movement::Hello { n_ranks })?;
    Ok(pointer)
}

/// What one call moves between ranks.
#[derive(Clone, Copy)]
enum Movement {
    /// The ranks of a new communicator meet and check they agree on its size.
    Hello { n_ranks: i32 },
    AllReduce {
        send: usize,
        recv: usize,
        bytes: usize,
        datatype: DataType,
        op: RedOp,
    },
    Broadcast {
        send: usize,
        recv: usize,
        bytes: usize,
        root: i32,
    },
    Reduce {
        send: usize,
        recv: usize,
        bytes: usize,
        datatype: DataType,
        op: RedOp,
        root: i32,
    },
    /// `bytes` per rank.
    AllGather {
        send: usize,
        recv: usize,
        bytes: usize,
    },
    /// `bytes` of the result per rank.
    ReduceScatter {
        send: usize,
        recv: usize,
        bytes: usize,
        datatype: DataType,
        op: RedOp,
    },
    /// `bytes` per peer.
    AlltoAll {
        send: usize,
        recv: usize,
        bytes: usize,
    },
    Send {
        send: usize,
        bytes: usize,
        peer: i32,
    },
    Recv {
        recv: usize,
        bytes: usize,
        peer: i32,
    },
}

struct Pending {
    comm: usize,
    movement: Movement,
    posted: Option<Posted>,
}

/// Runs `movement` now, or at the end of the open group.
fn submit(comm: *mut Communicator, movement: Movement) -> Outcome {
    let pending = Pending {
        comm: comm as usize,
        movement,
        posted: None,
    };
    let deferred = GROUP.with(|group| {
        let mut group = group.borrow_mut();
        if group.depth > 0 {
            group.pending.push(pending);
            None
        } else {
            Some(pending)
        }
    });
    match deferred {
        Some(pending) => run(vec![pending]),
        None => Ok(()),
    }
}

/// `len` bytes at `address`, copied.
///
/// # Safety
///
/// `address` points to `len` readable bytes (the caller's buffer as NCCL's API describes
/// it), or `len` is 0.
unsafe fn read(address: usize, len: usize) -> Vec<u8> {
    if len == 0 {
        return Vec::new();
    }
    // SAFETY: as the function requires.
    unsafe { std::slice::from_raw_parts(address as *const u8, len) }.to_vec()
}

/// Writes `data` at `address`.
///
/// # Safety
///
/// `address` points to `data.len()` writable bytes, or `data` is empty.
unsafe fn write(address: usize, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    // SAFETY: as the function requires; `data` is our own copy, never the destination.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), address as *mut u8, data.len()) };
}

/// Runs a group's movements: everything is posted first (sends and contributions), then
/// completed in order, so that one thread may drive several ranks (`ncclCommInitAll`).
fn run(mut batch: Vec<Pending>) -> Outcome {
    for pending in &mut batch {
        let comm = communicator(pending.comm as *const Communicator)?;
        let mut exchange = comm.exchange.lock().unwrap_or_else(|e| e.into_inner());
        let n = exchange.n_ranks();
        let rank = exchange.rank() as i32;
        // What this rank contributes: (address, bytes) of the application's send buffer.
        let source = match pending.movement {
            Movement::Hello { .. } | Movement::Recv { .. } => (0, 0),
            Movement::AllReduce { send, bytes, .. }
            | Movement::Reduce { send, bytes, .. }
            | Movement::AllGather { send, bytes, .. }
            | Movement::Send { send, bytes, .. } => (send, bytes),
            Movement::Broadcast {
                send, bytes, root, ..
            } => (send, if rank == root { bytes } else { 0 }),
            Movement::ReduceScatter { send, bytes, .. }
            | Movement::AlltoAll { send, bytes, .. } => (send, bytes * n),
        };
        // SAFETY: the send buffer and its size are the application's, as its API call
        // described them (the size checked against overflow and NULL at the call).
        let data = unsafe { read(source.0, source.1) };
        let contribution = match pending.movement {
            Movement::Hello { n_ranks } => Some(n_ranks.to_le_bytes().to_vec()),
            Movement::Send { peer, .. } => {
                exchange
                    .send(peer as usize, &data)
                    .map_err(|e| Failure::system("ncclSend", e))?;
                None
            }
            Movement::Recv { .. } => None,
            _ => Some(data),
        };
        if let Some(data) = contribution {
            pending.posted = Some(
                exchange
                    .post(&data)
                    .map_err(|e| Failure::system("posting a collective", e))?,
            );
        }
    }
    for pending in &batch {
        let comm = communicator(pending.comm as *const Communicator)?;
        let mut exchange = comm.exchange.lock().unwrap_or_else(|e| e.into_inner());
        let n = exchange.n_ranks();
        let rank = exchange.rank();
        let parts = match pending.posted {
            Some(posted) => exchange
                .complete(posted)
                .map_err(|e| Failure::system("completing a collective", e))?,
            None => Vec::new(),
        };
        let slices: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let short = |what: &str| {
            Failure::new(
                result::INVALID_USAGE,
                format!("{what}: the ranks disagree on the size of the operation"),
            )
        };
        // What this rank receives: (address of the application's receive buffer, data).
        let delivery: Option<(usize, Vec<u8>)> = match pending.movement {
            Movement::Hello { n_ranks } => {
                if let Some(other) = slices.iter().position(|s| *s != n_ranks.to_le_bytes()) {
                    return Err(Failure::new(
                        result::INVALID_USAGE,
                        format!(
                            "rank {other} created this communicator with another number of \
                             ranks than {n_ranks}"
                        ),
                    ));
                }
                None
            }
            Movement::AllReduce {
                recv,
                bytes,
                datatype,
                op,
                ..
            } => {
                if slices.iter().any(|s| s.len() != bytes) {
                    return Err(short("ncclAllReduce"));
                }
                let mut out = vec![0; bytes];
                reduce::reduce(&slices, datatype, op, &mut out);
                Some((recv, out))
            }
            Movement::Reduce {
                recv,
                bytes,
                datatype,
                op,
                root,
                ..
            } => {
                if slices.iter().any(|s| s.len() != bytes) {
                    return Err(short("ncclReduce"));
                }
                (rank == root as usize).then(|| {
                    let mut out = vec![0; bytes];
                    reduce::reduce(&slices, datatype, op, &mut out);
                    (recv, out)
                })
            }
            Movement::Broadcast {
                recv, bytes, root, ..
            } => {
                let data = slices[root as usize];
                if data.len() != bytes {
                    return Err(short("ncclBroadcast"));
                }
                Some((recv, data.to_vec()))
            }
            Movement::AllGather { recv, bytes, .. } => {
                if slices.iter().any(|s| s.len() != bytes) {
                    return Err(short("ncclAllGather"));
                }
                Some((recv, slices.concat()))
            }
            Movement::ReduceScatter {
                recv,
                bytes,
                datatype,
                op,
                ..
            } => {
                if slices.iter().any(|s| s.len() != bytes * n) {
                    return Err(short("ncclReduceScatter"));
                }
                let mine: Vec<&[u8]> = slices
                    .iter()
                    .map(|s| &s[rank * bytes..(rank + 1) * bytes])
                    .collect();
                let mut out = vec![0; bytes];
                reduce::reduce(&mine, datatype, op, &mut out);
                Some((recv, out))
            }
            Movement::AlltoAll { recv, bytes, .. } => {
                if slices.iter().any(|s| s.len() != bytes * n) {
                    return Err(short("ncclAlltoAll"));
                }
                let out: Vec<u8> = slices
                    .iter()
                    .flat_map(|s| s[rank * bytes..(rank + 1) * bytes].iter().copied())
                    .collect();
                Some((recv, out))
            }
            Movement::Send { .. } => None,
            Movement::Recv { recv, bytes, peer } => {
                let data = exchange
                    .recv(peer as usize)
                    .map_err(|e| Failure::system("ncclRecv", e))?;
                if data.len() != bytes {
                    return Err(Failure::new(
                        result::INVALID_USAGE,
                        format!(
                            "ncclRecv of {bytes} bytes from rank {peer}, which sent {}",
                            data.len()
                        ),
                    ));
                }
                Some((recv, data))
            }
        };
        if let Some((address, data)) = delivery {
            // SAFETY: the receive buffer is the application's, as large as its API call
            // said (checked against overflow and NULL at the call), and `data` has that
            // size (checked above).
            unsafe { write(address, &data) };
        }
    }
    Ok(())
}

/// `count` elements of `datatype` in bytes, refusing an overflow.
fn byte_size(count: usize, datatype: DataType, times: usize) -> Result<usize, Failure> {
    count
        .checked_mul(datatype.size())
        .and_then(|b| b.checked_mul(times))
        .ok_or_else(|| Failure::invalid(format!("count {count} is too large")))
}

fn data_type(value: c_int) -> Result<DataType, Failure> {
    reduce::data_type(value).ok_or_else(|| Failure::invalid(format!("unknown data type {value}")))
}

fn red_op(value: c_int) -> Result<RedOp, Failure> {
    RedOp::from_c(value).ok_or_else(|| Failure::invalid(format!("unknown reduction {value}")))
}

fn buffer(address: *const c_void, bytes: usize, what: &str) -> Result<usize, Failure> {
    if address.is_null() && bytes > 0 {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    Ok(address as usize)
}

fn rank_in(comm: &Communicator, rank: c_int, what: &str) -> Result<(), Failure> {
    if rank < 0 || rank >= comm.comm.n_ranks() {
        return Err(Failure::invalid(format!(
            "{what} {rank} is not a rank of this {}-rank communicator",
            comm.comm.n_ranks()
        )));
    }
    Ok(())
}

/// Writes `value` to an output argument.
fn output<T>(pointer: *mut T, value: T, what: &str) -> Outcome {
    if pointer.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: a non-NULL pointer the application gives for one value of the type.
    unsafe { pointer.write(value) };
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The C API. (`ncclGetVersion` is nccl-sim's own, exported from this library too.)

/// # Safety
///
/// `unique_id` is NULL or points to an `ncclUniqueId`.
#[no_mangle]
pub unsafe extern "C" fn ncclGetUniqueId(unique_id: *mut UniqueId) -> c_int {
    guarded("ncclGetUniqueId", || {
        engine();
        let mut key = [0u8; 8];
        // SAFETY: getrandom writes at most `key.len()` bytes into `key`.
        let got = unsafe { libc::getrandom(key.as_mut_ptr().cast(), key.len(), 0) };
        if got != key.len() as isize {
            // The time and pid still make a job key no other job has at the same moment.
            let now = nccl_sim::time::host_ns() ^ (std::process::id() as u64) << 40;
            key = now.to_le_bytes();
        }
        let mut id = [0u8; UNIQUE_ID_BYTES];
        id[..8].copy_from_slice(UNIQUE_ID_MARK);
        id[8..16].copy_from_slice(&key);
        output(unique_id, UniqueId { internal: id }, "uniqueId")
    })
}

/// The job key of a unique id of ours.
fn job_key(id: &UniqueId) -> Result<u64, Failure> {
    let id = &id.internal;
    if &id[..8] != UNIQUE_ID_MARK {
        return Err(Failure::invalid(
            "the unique id was not made by this library's ncclGetUniqueId",
        ));
    }
    Ok(u64::from_le_bytes(id[8..16].try_into().expect("8 bytes")))
}

/// # Safety
///
/// `comm` is NULL or points to an `ncclComm_t` to fill.
#[no_mangle]
pub unsafe extern "C" fn ncclCommInitRank(
    comm: *mut *mut Communicator,
    n_ranks: c_int,
    id: UniqueId,
    rank: c_int,
) -> c_int {
    guarded("ncclCommInitRank", || {
        if comm.is_null() {
            return Err(Failure::invalid("comm is NULL"));
        }
        if n_ranks < 1 || rank < 0 || rank >= n_ranks {
            return Err(Failure::invalid(format!(
                "rank {rank} of {n_ranks} ranks is not a rank"
            )));
        }
        let hash = nccl_scorep_common::job::comm_hash(job_key(&id)?, 0);
        let made = create(hash, rank, n_ranks)?;
        output(comm, made, "comm")
    })
}

/// # Safety
///
/// `comms` is NULL or points to `ndev` `ncclComm_t`s to fill; `devlist` is ignored.
#[no_mangle]
pub unsafe extern "C" fn ncclCommInitAll(
    comms: *mut *mut Communicator,
    ndev: c_int,
    _devlist: *const c_int,
) -> c_int {
    guarded("ncclCommInitAll", || {
        if comms.is_null() || ndev < 1 {
            return Err(Failure::invalid(format!(
                "comms {comms:p} for {ndev} devices"
            )));
        }
        let mut id = UniqueId {
            internal: [0; UNIQUE_ID_BYTES],
        };
        // SAFETY: `id` is one writable unique id.
        let got = unsafe { ncclGetUniqueId(&mut id) };
        if got != result::SUCCESS {
            return Err(Failure::new(got, "cannot make a unique id"));
        }
        let hash = nccl_scorep_common::job::comm_hash(job_key(&id)?, 0);
        // One thread makes every rank: they meet at the end of this implicit group.
        group_start();
        let mut made = Vec::with_capacity(ndev as usize);
        for rank in 0..ndev {
            match create(hash, rank, ndev) {
                Ok(comm) => made.push(comm),
                Err(failure) => {
                    let _ = group_end();
                    return Err(failure);
                }
            }
        }
        group_end()?;
        for (index, comm) in made.into_iter().enumerate() {
            // SAFETY: `comms` holds `ndev` entries, as the caller promised.
            unsafe { comms.add(index).write(comm) };
        }
        Ok(())
    })
}

/// # Safety
///
/// `newcomm` is NULL or points to an `ncclComm_t` to fill; `config` is ignored.
#[no_mangle]
pub unsafe extern "C" fn ncclCommSplit(
    comm: *mut Communicator,
    color: c_int,
    key: c_int,
    newcomm: *mut *mut Communicator,
    _config: *mut c_void,
) -> c_int {
    guarded("ncclCommSplit", || {
        let parent = communicator(comm)?;
        if newcomm.is_null() {
            return Err(Failure::invalid("newcomm is NULL"));
        }
        if color < 0 && color != SPLIT_NOCOLOR {
            return Err(Failure::invalid(format!("color {color} is negative")));
        }
        // Every rank learns every rank's color and key (a collective on the parent).
        let index = parent.splits.fetch_add(1, Ordering::Relaxed);
        let rank = parent.comm.rank();
        let everyone = {
            let mut exchange = parent.exchange.lock().unwrap_or_else(|e| e.into_inner());
            let mine = [color.to_le_bytes(), key.to_le_bytes()].concat();
            let posted = exchange
                .post(&mine)
                .map_err(|e| Failure::system("ncclCommSplit", e))?;
            exchange
                .complete(posted)
                .map_err(|e| Failure::system("ncclCommSplit", e))?
        };
        if color == SPLIT_NOCOLOR {
            return output(newcomm, std::ptr::null_mut(), "newcomm");
        }
        let mut members: Vec<(c_int, i32)> = everyone
            .iter()
            .enumerate()
            .filter_map(|(other, bytes)| {
                let field = |at: usize| {
                    bytes
                        .get(at..at + 4)
                        .map(|b| c_int::from_le_bytes(b.try_into().expect("4 bytes")))
                };
                (field(0)? == color).then_some((field(4)?, other as i32))
            })
            .collect();
        members.sort_unstable();
        let child_rank = members
            .iter()
            .position(|&(_, other)| other == rank)
            .expect("this rank is among its color's members") as i32;
        let hash =
            nccl_scorep_common::job::comm_hash(parent.hash, index << 32 | u64::from(color as u32));
        let made = create(hash, child_rank, members.len() as i32)?;
        output(newcomm, made, "newcomm")
    })
}

/// Waits for the communicator's work (nothing else to do: there is no network).
#[no_mangle]
pub extern "C" fn ncclCommFinalize(comm: *mut Communicator) -> c_int {
    guarded("ncclCommFinalize", || {
        communicator(comm)?.comm.synchronize();
        Ok(())
    })
}

/// Destroys a communicator rank (abort does the same: nothing here can hang).
fn end(comm: *mut Communicator) -> Outcome {
    communicator(comm)?;
    live()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&(comm as usize));
    // SAFETY: the address was ours and alive (checked above) and is no longer known, so
    // nothing else reaches it through this library.
    let communicator = unsafe { Box::from_raw(comm) };
    let Communicator { comm, exchange, .. } = *communicator;
    comm.destroy();
    exchange
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .leave();
    Ok(())
}

#[no_mangle]
pub extern "C" fn ncclCommDestroy(comm: *mut Communicator) -> c_int {
    guarded("ncclCommDestroy", || end(comm))
}

#[no_mangle]
pub extern "C" fn ncclCommAbort(comm: *mut Communicator) -> c_int {
    guarded("ncclCommAbort", || end(comm))
}

/// # Safety
///
/// `count` is NULL or points to an int.
#[no_mangle]
pub unsafe extern "C" fn ncclCommCount(comm: *const Communicator, count: *mut c_int) -> c_int {
    guarded("ncclCommCount", || {
        output(count, communicator(comm)?.comm.n_ranks(), "count")
    })
}

/// # Safety
///
/// `rank` is NULL or points to an int.
#[no_mangle]
pub unsafe extern "C" fn ncclCommUserRank(comm: *const Communicator, rank: *mut c_int) -> c_int {
    guarded("ncclCommUserRank", || {
        output(rank, communicator(comm)?.comm.rank(), "rank")
    })
}

/// There is no device: always 0.
///
/// # Safety
///
/// `device` is NULL or points to an int.
#[no_mangle]
pub unsafe extern "C" fn ncclCommCuDevice(comm: *const Communicator, device: *mut c_int) -> c_int {
    guarded("ncclCommCuDevice", || {
        communicator(comm)?;
        output(device, 0, "device")
    })
}

/// Nothing fails asynchronously here: always ncclSuccess.
///
/// # Safety
///
/// `async_error` is NULL or points to an `ncclResult_t`.
#[no_mangle]
pub unsafe extern "C" fn ncclCommGetAsyncError(
    comm: *mut Communicator,
    async_error: *mut c_int,
) -> c_int {
    guarded("ncclCommGetAsyncError", || {
        communicator(comm)?;
        output(async_error, result::SUCCESS, "asyncError")
    })
}

#[no_mangle]
pub extern "C" fn ncclGetErrorString(code: c_int) -> *const c_char {
    let text: &'static CStr = match code {
        0 => c"no error",
        1 => c"unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        2 => c"unhandled system error (run with NCCL_DEBUG=INFO for details)",
        3 => c"internal error - please report this issue to the NCCL developers",
        4 => c"invalid argument (run with NCCL_DEBUG=WARN for details)",
        5 => c"invalid usage (run with NCCL_DEBUG=WARN for details)",
        6 => c"remote process exited or there was a network error",
        7 => c"NCCL operation in progress",
        _ => c"unknown result code",
    };
    text.as_ptr()
}

/// The last failure's message on the calling thread ("" when none); valid until the
/// thread's next failed call.
#[no_mangle]
pub extern "C" fn ncclGetLastError(_comm: *mut Communicator) -> *const c_char {
    LAST_ERROR.with(|last| last.borrow().as_ptr())
}

fn group_start() {
    sim::group_start();
    GROUP.with(|group| group.borrow_mut().depth += 1);
}

fn group_end() -> Outcome {
    let batch = GROUP.with(|group| {
        let mut group = group.borrow_mut();
        if group.depth == 0 {
            return Err(Failure::new(
                result::INVALID_USAGE,
                "ncclGroupEnd without ncclGroupStart",
            ));
        }
        group.depth -= 1;
        Ok(if group.depth == 0 {
            std::mem::take(&mut group.pending)
        } else {
            Vec::new()
        })
    })?;
    sim::group_end();
    run(batch)
}

#[no_mangle]
pub extern "C" fn ncclGroupStart() -> c_int {
    guarded("ncclGroupStart", || {
        group_start();
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn ncclGroupEnd() -> c_int {
    guarded("ncclGroupEnd", group_end)
}

/// # Safety
///
/// The buffers hold `count` elements as NCCL's API describes for this call (host memory),
/// or are NULL with a count of 0; `comm` is a communicator of this library.
#[no_mangle]
pub unsafe extern "C" fn ncclAllReduce(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    datatype: c_int,
    op: c_int,
    comm: *mut Communicator,
    _stream: *mut c_void,
) -> c_int {
    guarded("ncclAllReduce", || {
        let c = communicator(comm)?;
        let (datatype, op) = (data_type(datatype)?, red_op(op)?);
        let bytes = byte_size(count, datatype, 1)?;
        let movement = Movement::AllReduce {
            send: buffer(send, bytes, "sendbuff")?,
            recv: buffer(recv, bytes, "recvbuff")?,
            bytes,
            datatype,
            op,
        };
        c.comm.all_reduce(count, datatype);
        submit(comm, movement)
    })
}

/// # Safety
///
/// The buffers hold `count` elements as NCCL's API describes for this call (host memory),
/// or are NULL with a count of 0; `comm` is a communicator of this library.
#[no_mangle]
pub unsafe extern "C" fn ncclBroadcast(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    datatype: c_int,
    root: c_int,
    comm: *mut Communicator,
    _stream: *mut c_void,
) -> c_int {
    guarded("ncclBroadcast", || {
        let c = communicator(comm)?;
        let datatype = data_type(datatype)?;
        rank_in(c, root, "root")?;
        let bytes = byte_size(count, datatype, 1)?;
        let mine = if c.comm.rank() == root { bytes } else { 0 };
        let movement = Movement::Broadcast {
            send: buffer(send, mine, "sendbuff")?,
            recv: buffer(recv, bytes, "recvbuff")?,
            bytes,
            root,
        };
        c.comm.broadcast(count, datatype, root);
        submit(comm, movement)
    })
}

/// The older, in-place broadcast: `ncclBroadcast(buff, buff, …)`.
///
/// # Safety
///
/// As for [`ncclBroadcast`], with one buffer.
#[no_mangle]
pub unsafe extern "C" fn ncclBcast(
    buff: *mut c_void,
    count: usize,
    datatype: c_int,
    root: c_int,
    comm: *mut Communicator,
    stream: *mut c_void,
) -> c_int {
    // SAFETY: as the caller promised for the one buffer.
    unsafe { ncclBroadcast(buff, buff, count, datatype, root, comm, stream) }
}

/// # Safety
///
/// The buffers hold `count` elements as NCCL's API describes for this call (host memory),
/// or are NULL with a count of 0; `comm` is a communicator of this library.
#[no_mangle]
pub unsafe extern "C" fn ncclReduce(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    datatype: c_int,
    op: c_int,
    root: c_int,
    comm: *mut Communicator,
    _stream: *mut c_void,
) -> c_int {
    guarded("ncclReduce", || {
        let c = communicator(comm)?;
        let (datatype, op) = (data_type(datatype)?, red_op(op)?);
        rank_in(c, root, "root")?;
        let bytes = byte_size(count, datatype, 1)?;
        let result = if c.comm.rank() == root { bytes } else { 0 };
        let movement = Movement::Reduce {
            send: buffer(send, bytes, "sendbuff")?,
            recv: buffer(recv, result, "recvbuff")?,
            bytes,
            datatype,
            op,
            root,
        };
        c.comm.reduce(count, datatype, root);
        submit(comm, movement)
    })
}

/// # Safety
///
/// The buffers hold `count` elements as NCCL's API describes for this call (host memory),
/// or are NULL with a count of 0; `comm` is a communicator of this library.
#[no_mangle]
pub unsafe extern "C" fn ncclAllGather(
    send: *const c_void,
    recv: *mut c_void,
    send_count: usize,
    datatype: c_int,
    comm: *mut Communicator,
    _stream: *mut c_void,
) -> c_int {
    guarded("ncclAllGather", || {
        let c = communicator(comm)?;
        let datatype = data_type(datatype)?;
        let bytes = byte_size(send_count, datatype, 1)?;
        let total = byte_size(send_count, datatype, c.comm.n_ranks() as usize)?;
        let movement = Movement::AllGather {
            send: buffer(send, bytes, "sendbuff")?,
            recv: buffer(recv, total, "recvbuff")?,
            bytes,
        };
        c.comm.all_gather(send_count, datatype);
        submit(comm, movement)
    })
}

/// # Safety
///
/// The buffers hold `count` elements as NCCL's API describes for this call (host memory),
/// or are NULL with a count of 0; `comm` is a communicator of this library.
#[no_mangle]
pub unsafe extern "C" fn ncclReduceScatter(
    send: *const c_void,
    recv: *mut c_void,
    recv_count: usize,
    datatype: c_int,
    op: c_int,
    comm: *mut Communicator,
    _stream: *mut c_void,
) -> c_int {
    guarded("ncclReduceScatter", || {
        let c = communicator(comm)?;
        let (datatype, op) = (data_type(datatype)?, red_op(op)?);
        let bytes = byte_size(recv_count, datatype, 1)?;
        let total = byte_size(recv_count, datatype, c.comm.n_ranks() as usize)?;
        let movement = Movement::ReduceScatter {
            send: buffer(send, total, "sendbuff")?,
            recv: buffer(recv, bytes, "recvbuff")?,
            bytes,
            datatype,
            op,
        };
        c.comm.reduce_scatter(recv_count, datatype);
        submit(comm, movement)
    })
}

/// # Safety
///
/// The buffers hold `count` elements as NCCL's API describes for this call (host memory),
/// or are NULL with a count of 0; `comm` is a communicator of this library.
#[no_mangle]
pub unsafe extern "C" fn ncclAlltoAll(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    datatype: c_int,
    comm: *mut Communicator,
    _stream: *mut c_void,
) -> c_int {
    guarded("ncclAlltoAll", || {
        let c = communicator(comm)?;
        let datatype = data_type(datatype)?;
        let bytes = byte_size(count, datatype, 1)?;
        let total = byte_size(count, datatype, c.comm.n_ranks() as usize)?;
        let movement = Movement::AlltoAll {
            send: buffer(send, total, "sendbuff")?,
            recv: buffer(recv, total, "recvbuff")?,
            bytes,
        };
        c.comm.all_to_all(count, datatype);
        submit(comm, movement)
    })
}

/// # Safety
///
/// The buffers hold `count` elements as NCCL's API describes for this call (host memory),
/// or are NULL with a count of 0; `comm` is a communicator of this library.
#[no_mangle]
pub unsafe extern "C" fn ncclSend(
    send: *const c_void,
    count: usize,
    datatype: c_int,
    peer: c_int,
    comm: *mut Communicator,
    _stream: *mut c_void,
) -> c_int {
    guarded("ncclSend", || {
        let c = communicator(comm)?;
        let datatype = data_type(datatype)?;
        rank_in(c, peer, "peer")?;
        let bytes = byte_size(count, datatype, 1)?;
        let movement = Movement::Send {
            send: buffer(send, bytes, "sendbuff")?,
            bytes,
            peer,
        };
        c.comm.send(count, datatype, peer);
        submit(comm, movement)
    })
}

/// # Safety
///
/// The buffers hold `count` elements as NCCL's API describes for this call (host memory),
/// or are NULL with a count of 0; `comm` is a communicator of this library.
#[no_mangle]
pub unsafe extern "C" fn ncclRecv(
    recv: *mut c_void,
    count: usize,
    datatype: c_int,
    peer: c_int,
    comm: *mut Communicator,
    _stream: *mut c_void,
) -> c_int {
    guarded("ncclRecv", || {
        let c = communicator(comm)?;
        let datatype = data_type(datatype)?;
        rank_in(c, peer, "peer")?;
        let bytes = byte_size(count, datatype, 1)?;
        let movement = Movement::Recv {
            recv: buffer(recv, bytes, "recvbuff")?,
            bytes,
            peer,
        };
        c.comm.recv(count, datatype, peer);
        submit(comm, movement)
    })
}
