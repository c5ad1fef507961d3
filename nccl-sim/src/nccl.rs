//! The emulated NCCL: communicators, groups, collectives and point-to-point calls, kernel
//! launches, and a proxy thread per communicator, each calling the profiler from the
//! thread and in the order NCCL does.
//!
//! The API mirrors NCCL's: [`group_start`]/[`group_end`] keep thread-local state like
//! `ncclGroupStart`/`ncclGroupEnd`, and every operation on a [`Comm`] is an implicit group
//! of one when no group is open. Completion happens on the proxy thread (and the profiler
//! thread from 2.31), in simulated time.

use crate::bugs::{NcclBug, NcclBugs};
use crate::event::{CollTask, CommInfo, CoreEvent, Descr, P2pTask, Raw, StateArgs, NULL};
use crate::names::{Algo, DataType, Func, Proto};
use crate::profiler::{Profiler, Session};
use crate::pxn::{PxnMailbox, PxnOp, PxnProxy, PxnSender};
use crate::release::Release;
use crate::rendezvous::SharedRendezvous;
use crate::time::{host_ns, sleep_until, GpuClock, GroundTruth, Rng, TimeModel, TruthRecord};
use nccl_profiler_abi::{event_type as t, net as netid, state as st};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Which proxy path operations take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    /// The network: ProxyOps with steps, stopped when all steps are done.
    Net,
    /// A proxy transport without a stop (CollNet, P2P via CUDA memcpy): ProxyOps are
    /// started and never stopped, and have no steps.
    P2pCopy,
    /// Intra-node without proxy work: no ProxyOp at all (KernelCh only).
    Local,
}

/// Which built-in net plugin emits NetPlugin events (only NCCL builds with
/// `NET_PROFILER=1` do).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum NetPluginKind {
    None,
    Ib,
    Socket,
}

/// Parameters of the emulated NCCL.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub channels: u8,
    pub algo: Algo,
    pub proto: Proto,
    pub transport: Transport,
    pub net_plugin: NetPluginKind,
    pub time: TimeModel,
    pub gpu_clock: GpuClock,
    pub seed: u64,
    /// Every this many receive steps, the step's start is made twice (the first never
    /// stopped); 0: never.
    pub recv_restart_every: u32,
    /// How many times SendPeerWait may repeat for one step (0..=n, seeded).
    pub peer_wait_repeats: u32,
    /// Steps per ProxyOp.
    pub steps: i32,
    /// `destroy` only waits for the work and never finalizes the profiler, like an
    /// application that exits without ncclCommDestroy.
    pub skip_destroy: bool,
    /// How long a collective waits for the other processes' ranks before it goes on
    /// alone (a rank that died never arrives).
    pub peer_patience: Duration,
    /// The application's own GPU work queued ahead of every NCCL kernel (the CPU runs
    /// ahead of the GPU): each kernel starts at least this long after its enqueue.
    pub gpu_busy: Duration,
    /// One collective whose kernel runs this much longer on one rank (`--hang-rank`,
    /// `--hang-seq`, `--hang-ms`): (rank, the collective's seq, extra time), as a kernel
    /// that does not finish.
    pub hang_kernel: Option<(i32, u64, Duration)>,
    /// The planted hang is in the proxy, not in the kernel (`--hang-in proxy`): the
    /// kernel takes its usual time, and the first send step of the collective's first
    /// send waits that long for the network.
    pub hang_in_proxy: bool,
    /// NCCL's known profiler bugs to inject (`--nccl-bug`).
    pub bugs: NcclBugs,
    /// The host notices kernels late at first (`--late-noticing-us`,
    /// `--late-noticing-ms`).
    pub late_noticing: Option<LateNoticing>,
}

/// The host notices each kernel's start and end late for a while, as the threads of
/// processes that start together on busy cores do: the GPU clock estimate then has no
/// quick noticing to go by for that stretch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LateNoticing {
    /// How late.
    pub by: Duration,
    /// For the GPU events this long after the process's emulated NCCL was created.
    pub for_first: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            channels: 2,
            algo: Algo::Ring,
            proto: Proto::Simple,
            transport: Transport::Net,
            net_plugin: NetPluginKind::None,
            time: TimeModel::default(),
            gpu_clock: GpuClock {
                offset_ns: 1_234_567_890,
                ..GpuClock::default()
            },
            seed: 1,
            recv_restart_every: 3,
            peer_wait_repeats: 2,
            steps: 4,
            skip_destroy: false,
            peer_patience: Duration::from_secs(10),
            gpu_busy: Duration::ZERO,
            hang_kernel: None,
            hang_in_proxy: false,
            bugs: NcclBugs::default(),
            late_noticing: None,
        }
    }
}

/// One emulated NCCL library in a process.
pub struct Nccl {
    pub release: Release,
    pub profiler: Arc<Profiler>,
    pub config: SimConfig,
    pub truth: GroundTruth,
    /// When this emulated NCCL was created (host clock).
    created_ns: u64,
    pid: i32,
    rng: Mutex<Rng>,
    p2p_index: AtomicU64,
    /// Communicator ranks alive in this process (the last destroy ends PXN first).
    live_comms: std::sync::atomic::AtomicUsize,
    pxn: Mutex<Option<PxnLink>>,
    rendezvous: Rendezvous,
    /// Ranks of each communicator (by hash) created in this process.
    local_ranks: Mutex<HashMap<u64, i32>>,
    /// Multi-process jobs: the job's key and table (where its processes agree on a start).
    shared_rendezvous: Mutex<Option<(u64, Arc<SharedRendezvous>)>>,
    /// Multi-process jobs: where ranks of other processes meet ours per collective, a
    /// table per communicator (by hash), opened at its first collective; with whether
    /// this process holds the communicator's rank 0 (which removes the table's file).
    comm_rendezvous: Mutex<HashMap<u64, (Arc<SharedRendezvous>, bool)>>,
}

/// PXN between the processes of one node: this process's sends are progressed by the
/// next local process's proxy, and this process's [`PxnProxy`] progresses the previous
/// one's, calling this process's plugin with the originator's values.
struct PxnLink {
    route: PxnRoute,
    /// The mailbox until the first communicator exists, then its proxy.
    mailbox: Option<PxnMailbox>,
    proxy: Option<PxnProxy>,
    /// Marks that our sends are all handed over, and that the previous process's are.
    done_ours: std::path::PathBuf,
    done_theirs: std::path::PathBuf,
}

/// The version code `ncclGetVersion` reports: that of the last [`Nccl`] created.
static VERSION_CODE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// NCCL's `ncclGetVersion`: the emulated release's code (`2*10000 + minor*100`), as a
/// plugin finds it in the process. The `nccl-sim` binary exports it (see build.rs), and so
/// does the CPU-only libnccl (`nccl-sim/libnccl`).
///
/// # Safety
///
/// `version` is NULL or points to an int the caller owns, as NCCL requires.
#[no_mangle]
pub unsafe extern "C" fn ncclGetVersion(version: *mut std::ffi::c_int) -> std::ffi::c_int {
    const NCCL_INVALID_ARGUMENT: std::ffi::c_int = 4;
    if version.is_null() {
        return NCCL_INVALID_ARGUMENT;
    }
    // Before any emulated NCCL exists (a program asking first, as applications do), the
    // default release's.
    let code = match VERSION_CODE.load(Ordering::Relaxed) {
        0 => 20000 + 100 * crate::release::NEWEST.minor() as i32,
        code => code,
    };
    // SAFETY: a non-NULL pointer the caller gives for one int.
    unsafe { *version = code };
    0
}

impl Nccl {
    /// When the host notices a GPU event of host time `gpu_ns` at the earliest: then, or
    /// later while [`SimConfig::late_noticing`] lasts.
    fn noticed_at(&self, gpu_ns: u64) -> u64 {
        match self.config.late_noticing {
            Some(late)
                if gpu_ns
                    < self
                        .created_ns
                        .saturating_add(late.for_first.as_nanos() as u64) =>
            {
                gpu_ns.saturating_add(late.by.as_nanos() as u64)
            }
            _ => gpu_ns,
        }
    }

    pub fn new(profiler: Arc<Profiler>, config: SimConfig) -> Arc<Nccl> {
        quick_wake_ups();
        let release = profiler.release();
        VERSION_CODE.store(20000 + 100 * release.minor() as i32, Ordering::Relaxed);
        Arc::new(Nccl {
            release: profiler.release(),
            rng: Mutex::new(Rng::new(config.seed)),
            profiler,
            config,
            truth: GroundTruth::default(),
            created_ns: host_ns(),
            pid: std::process::id() as i32,
            p2p_index: AtomicU64::new(0),
            live_comms: std::sync::atomic::AtomicUsize::new(0),
            pxn: Mutex::new(None),
            rendezvous: Rendezvous::default(),
            local_ranks: Mutex::new(HashMap::new()),
            shared_rendezvous: Mutex::new(None),
            comm_rendezvous: Mutex::new(HashMap::new()),
        })
    }

    /// Forgets the shared rendezvous tables; `remove` also deletes the job's file (one
    /// process of the job does, once its collectives are over: the others keep their
    /// mapping), and each communicator's file goes with the process of its rank 0.
    pub fn finish_shared_rendezvous(&self, remove: bool) {
        let table = self
            .shared_rendezvous
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let (Some((_, table)), true) = (table, remove) {
            let _ = std::fs::remove_file(table.path());
        }
        let comms = std::mem::take(
            &mut *self
                .comm_rendezvous
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for (table, holds_rank_0) in comms.into_values() {
            if holds_rank_0 {
                let _ = std::fs::remove_file(table.path());
            }
        }
    }

    /// Multi-process jobs: collectives of the communicator(s) made next wait for the
    /// ranks of the other processes too, through tables in shared memory named after
    /// `key` (one for the job, one per communicator).
    pub fn enable_shared_rendezvous(&self, key: u64, n_ranks: usize) -> std::io::Result<()> {
        let table = SharedRendezvous::open(&crate::pxn::default_dir(), key, n_ranks)?;
        *self
            .shared_rendezvous
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some((key, Arc::new(table)));
        Ok(())
    }

    /// The shared table where `comm`'s ranks meet, opened at its first use; None in a
    /// single-process job (or when the table cannot be made: then ranks do not wait).
    fn comm_rendezvous(&self, comm: &Comm) -> Option<Arc<SharedRendezvous>> {
        let key = self
            .shared_rendezvous
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()?
            .0;
        let mut tables = self
            .comm_rendezvous
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some((table, _)) = tables.get(&comm.hash()) {
            return Some(Arc::clone(table));
        }
        let n_ranks = usize::try_from(comm.n_ranks()).unwrap_or(1);
        let table = SharedRendezvous::open(
            &crate::pxn::default_dir(),
            key ^ comm.hash().rotate_left(17),
            n_ranks,
        )
        .ok()?;
        let table = Arc::new(table);
        tables.insert(comm.hash(), (Arc::clone(&table), comm.rank() == 0));
        Some(table)
    }

    /// The latest `value` of all the job's ranks, `rank` giving this one's: how the
    /// processes of a multi-process job agree on a common time (through the shared
    /// rendezvous table, in a row no collective uses). Without other processes, `value`.
    pub fn latest_across_processes(&self, rank: i32, value: u64) -> u64 {
        let table = self
            .shared_rendezvous
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match table {
            Some((_, table)) => table.meet(
                crate::rendezvous::AGREEMENT,
                rank as usize,
                value,
                self.config.peer_patience,
            ),
            None => value,
        }
    }

    /// Turns PXN on for this process's communicators: `key` names this run's mailboxes
    /// (equal in every process of the job), `local_rank`/`local_size` place the process
    /// on its node. Sends go to local rank `local_rank + 1`.
    pub fn enable_pxn(
        &self,
        key: u64,
        local_rank: usize,
        local_size: usize,
    ) -> std::io::Result<()> {
        if local_size < 2 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "PXN needs at least two processes on the node",
            ));
        }
        let mailbox = PxnMailbox::create(key, local_rank, crate::pxn::DEFAULT_CAPACITY)?;
        let next = (local_rank + 1) % local_size;
        let previous = (local_rank + local_size - 1) % local_size;
        let dir = crate::pxn::default_dir();
        let target = crate::pxn::mailbox_path(&dir, key, next);
        let sender = Arc::new(PxnSender::open_wait(&target, Duration::from_secs(30))?);
        let route: PxnRoute = Arc::new(move |op: PxnOp| {
            if sender.send_timeout(&op, Duration::from_secs(10)).is_err() {
                eprintln!("nccl-sim: PXN mailbox {} refused an op", target.display());
            }
        });
        let done = |rank: usize| {
            let mut path = crate::pxn::mailbox_path(&dir, key, rank).into_os_string();
            path.push(".sent");
            std::path::PathBuf::from(path)
        };
        *self.pxn.lock().unwrap_or_else(|e| e.into_inner()) = Some(PxnLink {
            route,
            mailbox: Some(mailbox),
            proxy: None,
            done_ours: done(local_rank),
            done_theirs: done(previous),
        });
        Ok(())
    }

    /// A new communicator rank: its sends take the PXN route, and the first one gives the
    /// PXN proxy its plugin session.
    fn attach_pxn(self: &Arc<Nccl>, comm: &Comm) {
        self.live_comms.fetch_add(1, Ordering::AcqRel);
        *self
            .local_ranks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(comm.hash())
            .or_insert(0) += 1;
        let mut pxn = self.pxn.lock().unwrap_or_else(|e| e.into_inner());
        let Some(link) = pxn.as_mut() else { return };
        comm.set_pxn_route(Some(Arc::clone(&link.route)));
        if let Some(mailbox) = link.mailbox.take() {
            link.proxy = Some(PxnProxy::spawn(
                Arc::clone(&self.profiler),
                comm.0.session,
                mailbox,
            ));
        }
    }

    /// Before the last communicator of the process is finalized: say our sends are all
    /// handed over, wait until the previous process says the same, and let the PXN proxy
    /// finish everything in its mailbox, so no foreign event reaches the plugin after its
    /// last finalize.
    fn detach_pxn(&self) {
        if self.live_comms.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let Some(mut link) = self.pxn.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        let _ = std::fs::write(&link.done_ours, b"");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !link.done_theirs.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        if let Some(proxy) = link.proxy.take() {
            proxy.shutdown();
        }
        // The previous process waits for our mark, not we for its removal; remove ours
        // only once our own proxy is done, the other side's mark when we saw it.
        let _ = std::fs::remove_file(&link.done_theirs);
    }

    /// `ncclCommInitRank`: the profiler's `init` runs here, then the proxy thread starts.
    pub fn comm_init(self: &Arc<Nccl>, options: CommOptions) -> Comm {
        let info = CommInfo {
            comm_hash: options.hash,
            name: options.name.as_deref().and_then(|n| CString::new(n).ok()),
            n_nodes: options.n_nodes,
            n_ranks: options.n_ranks,
            rank: options.rank,
        };
        let session = self.profiler.init(&info);
        let proxy = ProxyThread::spawn(Arc::clone(self), session, options.rank);
        let comm = Comm(Arc::new(CommInner {
            nccl: Arc::clone(self),
            session,
            options,
            proxy,
            seq: Mutex::new(HashMap::new()),
            pxn: Mutex::new(None),
            gpu_free: Arc::new(AtomicU64::new(0)),
            met: Arc::new(AtomicU64::new(0)),
        }));
        self.attach_pxn(&comm);
        comm
    }

    fn rng<R>(&self, f: impl FnOnce(&mut Rng) -> R) -> R {
        f(&mut self.rng.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn gpu(&self, host: u64) -> u64 {
        // The GPU's timer runs with its host's clock (simulated or not), drifting from it
        // by `--gpu-clock-drift`.
        self.config
            .gpu_clock
            .from_host(crate::host_clock::host_reading(host))
    }
}

/// How a communicator rank is created.
#[derive(Clone, Debug)]
pub struct CommOptions {
    pub hash: u64,
    pub name: Option<String>,
    pub rank: i32,
    pub n_ranks: i32,
    pub n_nodes: i32,
    /// `config.blocking = 0`: launches run on a background thread.
    pub blocking: bool,
}

impl CommOptions {
    pub fn new(hash: u64, rank: i32, n_ranks: i32) -> CommOptions {
        CommOptions {
            hash,
            name: None,
            rank,
            n_ranks,
            n_nodes: 1,
            blocking: true,
        }
    }
}

/// Where PXN sends go (set by the multi-process runner).
pub type PxnRoute = Arc<dyn Fn(PxnOp) + Send + Sync>;

/// A communicator rank.
#[derive(Clone)]
pub struct Comm(Arc<CommInner>);

struct CommInner {
    nccl: Arc<Nccl>,
    session: Option<Session>,
    options: CommOptions,
    proxy: Arc<ProxyThread>,
    seq: Mutex<HashMap<Func, u64>>,
    pxn: Mutex<Option<PxnRoute>>,
    /// When the simulated GPU stream is free again: kernels of one stream run in turn.
    gpu_free: Arc<AtomicU64>,
    /// The latest last arrival of this rank's collectives so far (host ns, 0 before the
    /// first): the same on every rank of a collective.
    met: Arc<AtomicU64>,
}

/// A collective or point-to-point task waiting for its group's launch.
#[derive(Clone)]
struct Task {
    comm: Comm,
    op: Op,
    /// The CollApi/P2pApi handle (as a number: tasks move to launch and callback threads).
    api: usize,
    mask: u64,
    graph_captured: bool,
    enqueue: (u64, u64),
    seq: u64,
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Coll {
        func: Func,
        count: usize,
        datatype: DataType,
        root: i32,
    },
    P2p {
        func: Func,
        count: usize,
        datatype: DataType,
        peer: i32,
    },
}

impl Op {
    fn func(&self) -> Func {
        match *self {
            Op::Coll { func, .. } | Op::P2p { func, .. } => func,
        }
    }

    fn bytes(&self) -> usize {
        match *self {
            Op::Coll {
                count, datatype, ..
            }
            | Op::P2p {
                count, datatype, ..
            } => count * datatype.size(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ApiState {
    Reset,
    Started,
    Stopped,
}

/// NCCL's thread-local group state.
struct ThreadState {
    nccl_depth: i32,
    profiler_depth: i32,
    group_api: Raw,
    /// The session and profiler the GroupApi was started with (the first comm's).
    group_api_session: Option<(Session, Arc<Profiler>)>,
    api_state: ApiState,
    /// The CollApi variable is never cleared after stop.
    coll_api: Raw,
    tasks: Vec<Task>,
    capturing: Option<Vec<Task>>,
}

thread_local! {
    static THREAD: RefCell<ThreadState> = const { RefCell::new(ThreadState {
        nccl_depth: 0,
        profiler_depth: 0,
        group_api: NULL,
        group_api_session: None,
        api_state: ApiState::Reset,
        coll_api: NULL,
        tasks: Vec::new(),
        capturing: None,
    }) };
}

/// `ncclGroupStart`: no profiler call.
pub fn group_start() {
    THREAD.with(|t| t.borrow_mut().nccl_depth += 1);
}

/// `ncclGroupEnd`.
pub fn group_end() {
    group_end_internal();
}

/// Everything but ProxyCtrl enables the GroupApi event.
const GROUP_API_TRIGGER: u64 = 0xFFFF & !t::PROXY_CTRL;
const COLL_API_TRIGGER: u64 = t::COLL_API
    | t::COLL
    | t::PROXY_OP
    | t::PROXY_STEP
    | t::KERNEL_CH
    | t::NET_PLUGIN
    | t::CE_COLL
    | t::CE_SYNC
    | t::CE_BATCH;
const P2P_API_TRIGGER: u64 =
    t::P2P_API | t::P2P | t::PROXY_OP | t::PROXY_STEP | t::KERNEL_CH | t::NET_PLUGIN;
const GROUP_TRIGGER: u64 =
    t::GROUP | t::COLL | t::P2P | t::PROXY_OP | t::PROXY_STEP | t::KERNEL_CH | t::NET_PLUGIN;
const COLL_TRIGGER: u64 = t::COLL | t::PROXY_OP | t::PROXY_STEP | t::KERNEL_CH | t::NET_PLUGIN;
const P2P_TRIGGER: u64 = t::P2P | t::PROXY_OP | t::PROXY_STEP | t::KERNEL_CH | t::NET_PLUGIN;
const PROXY_OP_TRIGGER: u64 = t::PROXY_OP | t::PROXY_STEP | t::NET_PLUGIN;
const PROXY_STEP_TRIGGER: u64 = t::PROXY_STEP | t::NET_PLUGIN;

impl Comm {
    pub fn rank(&self) -> i32 {
        self.0.options.rank
    }

    pub fn n_ranks(&self) -> i32 {
        self.0.options.n_ranks
    }

    pub fn hash(&self) -> u64 {
        self.0.options.hash
    }

    /// The profiler context this rank got at `init` (NULL when not profiled).
    pub fn context(&self) -> Raw {
        self.0.session.map_or(NULL, |s| s.context)
    }

    /// Hands this rank's sends to another process's proxy (PXN).
    pub fn set_pxn_route(&self, route: Option<PxnRoute>) {
        *self.0.pxn.lock().unwrap_or_else(|e| e.into_inner()) = route;
    }

    fn nccl(&self) -> &Arc<Nccl> {
        &self.0.nccl
    }

    pub fn all_reduce(&self, count: usize, datatype: DataType) {
        self.collective(Func::AllReduce, count, datatype, 0);
    }

    pub fn all_gather(&self, count: usize, datatype: DataType) {
        self.collective(Func::AllGather, count, datatype, 0);
    }

    pub fn reduce_scatter(&self, count: usize, datatype: DataType) {
        self.collective(Func::ReduceScatter, count, datatype, 0);
    }

    pub fn broadcast(&self, count: usize, datatype: DataType, root: i32) {
        self.collective(Func::Broadcast, count, datatype, root);
    }

    pub fn reduce(&self, count: usize, datatype: DataType, root: i32) {
        self.collective(Func::Reduce, count, datatype, root);
    }

    pub fn send(&self, count: usize, datatype: DataType, peer: i32) {
        self.enqueue(Op::P2p {
            func: Func::Send,
            count,
            datatype,
            peer,
        });
    }

    pub fn recv(&self, count: usize, datatype: DataType, peer: i32) {
        self.enqueue(Op::P2p {
            func: Func::Recv,
            count,
            datatype,
            peer,
        });
    }

    /// `ncclAlltoAll` (2.28+): lowered inside the call into a send and a receive per peer,
    /// each with its own P2pApi, in one group.
    pub fn all_to_all(&self, count: usize, datatype: DataType) {
        if count == 0 || self.n_ranks() == 1 {
            return;
        }
        // One API call: one implicit group around all the lowered tasks.
        implicit_group_start();
        for peer in 0..self.n_ranks() {
            for func in [Func::Send, Func::Recv] {
                self.append(Op::P2p {
                    func,
                    count,
                    datatype,
                    peer,
                });
            }
        }
        group_end_internal();
    }

    /// AlltoAll on the copy-engine path (2.29+): one CollApi "AlltoAll", then CeColl with
    /// CeSync and CeBatch children on the calling thread, no Coll event.
    pub fn all_to_all_ce(&self, count: usize, datatype: DataType) {
        let Some(session) = self.0.session else {
            return;
        };
        let nccl = self.nccl();
        let profiler = &nccl.profiler;
        let mask = profiler.mask();
        let seq = self.next_seq(Func::AlltoAll);
        let mut api = NULL;
        if nccl.release.has_api_events() && mask & COLL_API_TRIGGER != 0 {
            let descr = Descr {
                parent: NULL,
                rank: 0,
                event: CoreEvent::CollApi {
                    func: Func::AlltoAll,
                    count,
                    datatype,
                    root: 0,
                    graph_captured: false,
                    user_tag: 0,
                },
            };
            profiler.start(&session, &mut api, &descr);
        }
        if nccl.release.has_ce_events() && mask & (t::CE_COLL | t::CE_SYNC | t::CE_BATCH) != 0 {
            let mut ce = NULL;
            let rank = self.rank();
            let ce_descr = Descr {
                parent: api,
                rank,
                event: CoreEvent::CeColl {
                    seq,
                    func: Func::AlltoAll,
                    count,
                    root: 0,
                    datatype,
                    batch_size: 4,
                    num_batches: 1,
                    ce_seq: seq as u32,
                    user_tag: 0,
                },
            };
            profiler.start(&session, &mut ce, &ce_descr);
            if mask & t::CE_SYNC != 0 {
                let mut sync = NULL;
                let d = Descr {
                    parent: ce,
                    rank,
                    event: CoreEvent::CeSync {
                        is_complete: false,
                        n_ranks: self.n_ranks(),
                    },
                };
                profiler.start(&session, &mut sync, &d);
                if !sync.is_null() {
                    profiler.stop(&session, sync);
                }
            }
            if mask & t::CE_BATCH != 0 {
                let mut batch = NULL;
                let d = Descr {
                    parent: ce,
                    rank,
                    event: CoreEvent::CeBatch {
                        num_ops: self.n_ranks(),
                        total_bytes: count * datatype.size() * self.n_ranks() as usize,
                        use_intra_sync: false,
                    },
                };
                profiler.start(&session, &mut batch, &d);
                if !batch.is_null() {
                    profiler.stop(&session, batch);
                }
            }
            if !ce.is_null() {
                profiler.stop(&session, ce);
            }
        }
        if !api.is_null() {
            profiler.stop(&session, api);
        }
    }

    fn collective(&self, func: Func, count: usize, datatype: DataType, root: i32) {
        self.enqueue(Op::Coll {
            func,
            count,
            datatype,
            root,
        });
    }

    fn next_seq(&self, func: Func) -> u64 {
        let mut seq = self.0.seq.lock().unwrap_or_else(|e| e.into_inner());
        let counter = seq.entry(func).or_insert(0);
        let value = *counter;
        *counter += 1;
        value
    }

    /// `ncclEnqueueCheck` → `collTaskAppend`/`p2pTaskAppend`, on the calling thread.
    fn enqueue(&self, op: Op) {
        let count = match op {
            Op::Coll { count, .. } | Op::P2p { count, .. } => count,
        };
        // count == 0 is dropped before any event; one rank is a local copy with no event
        // but a GroupEndApiStart attempt on a NULL handle, a no-op.
        if count == 0 || self.n_ranks() == 1 {
            return;
        }
        implicit_group_start();
        self.append(op);
        group_end_internal();
    }

    /// `collTaskAppend`/`p2pTaskAppend`: the API events and the task, inside a group.
    fn append(&self, op: Op) {
        let nccl = Arc::clone(self.nccl());
        let profiler = &nccl.profiler;
        let session = self.0.session;
        let enqueue_start = host_ns();
        THREAD.with(|cell| {
            let mut thread = cell.borrow_mut();
            let mask = profiler.mask();
            let captured = thread.capturing.is_some();
            let mut api = NULL;
            if let Some(session) = session.filter(|_| nccl.release.has_api_events()) {
                if thread.api_state == ApiState::Reset && mask & GROUP_API_TRIGGER != 0 {
                    let depth = thread.nccl_depth;
                    let descr = Descr {
                        parent: NULL,
                        rank: 0,
                        event: CoreEvent::GroupApi {
                            graph_captured: captured,
                            depth,
                        },
                    };
                    let mut handle = NULL;
                    profiler.start(&session, &mut handle, &descr);
                    thread.group_api = handle;
                    thread.group_api_session = Some((session, Arc::clone(profiler)));
                    thread.api_state = ApiState::Started;
                    thread.profiler_depth = depth;
                    if !handle.is_null() {
                        profiler.record(
                            &session,
                            handle,
                            st::GROUP_START_API_STOP,
                            StateArgs::Null,
                        );
                    }
                }
                let parent = thread.group_api;
                match op {
                    Op::Coll {
                        func,
                        count,
                        datatype,
                        root,
                    } if mask & COLL_API_TRIGGER != 0 => {
                        let descr = Descr {
                            parent,
                            rank: 0,
                            event: CoreEvent::CollApi {
                                func,
                                count,
                                datatype,
                                root,
                                graph_captured: captured,
                                user_tag: 0,
                            },
                        };
                        profiler.start(&session, &mut thread.coll_api, &descr);
                        api = thread.coll_api;
                        if !api.is_null() {
                            profiler.stop(&session, api);
                        }
                    }
                    Op::P2p {
                        func,
                        count,
                        datatype,
                        ..
                    } if mask & P2P_API_TRIGGER != 0 => {
                        let descr = Descr {
                            parent,
                            rank: 0,
                            event: CoreEvent::P2pApi {
                                func,
                                count,
                                datatype,
                                graph_captured: captured,
                                user_tag: 0,
                            },
                        };
                        profiler.start(&session, &mut api, &descr);
                        if !api.is_null() {
                            profiler.stop(&session, api);
                        }
                    }
                    _ => {}
                }
            }
            // Broadcast on 2.29+ is an AllGatherV task: CollApi only, nothing launched.
            let allgatherv = matches!(
                op,
                Op::Coll {
                    func: Func::Broadcast,
                    ..
                }
            ) && nccl.release.broadcast_is_allgatherv();
            if !allgatherv {
                let seq = match op {
                    Op::Coll { func, .. } => self.next_seq(func),
                    Op::P2p { .. } => nccl.p2p_index.fetch_add(1, Ordering::Relaxed),
                };
                let task = Task {
                    comm: self.clone(),
                    op,
                    api: api as usize,
                    mask,
                    graph_captured: captured,
                    enqueue: (enqueue_start, host_ns()),
                    seq,
                };
                if let Some(graph) = thread.capturing.as_mut() {
                    graph.push(task.clone());
                }
                thread.tasks.push(task);
            }
        });
    }

    /// `ncclCommSplit` with `shareResources`: a new communicator rank whose ProxyCtrl
    /// events keep the parent's context, because it uses the parent's proxy thread.
    pub fn split(&self, hash: u64, rank: i32, n_ranks: i32) -> Comm {
        let nccl = Arc::clone(self.nccl());
        let mut options = CommOptions::new(hash, rank, n_ranks);
        options.name = self.0.options.name.as_ref().map(|n| format!("{n}.split"));
        let info = CommInfo {
            comm_hash: hash,
            name: options.name.as_deref().and_then(|n| CString::new(n).ok()),
            n_nodes: self.0.options.n_nodes,
            n_ranks,
            rank,
        };
        let session = nccl.profiler.init(&info);
        self.0.proxy.users.fetch_add(1, Ordering::AcqRel);
        let child = Comm(Arc::new(CommInner {
            nccl: Arc::clone(&nccl),
            session,
            options,
            proxy: Arc::clone(&self.0.proxy),
            seq: Mutex::new(HashMap::new()),
            pxn: Mutex::new(None),
            gpu_free: Arc::new(AtomicU64::new(0)),
            met: Arc::new(AtomicU64::new(0)),
        }));
        nccl.attach_pxn(&child);
        child
    }

    /// When the last rank arrived at the latest of this rank's collectives so far (host
    /// CLOCK_MONOTONIC ns; 0 before its first collective met): a time every rank of those
    /// collectives knows. Complete once [`Comm::synchronize`] returned.
    pub fn last_met_ns(&self) -> u64 {
        self.0.met.load(Ordering::Acquire)
    }

    /// Waits until every operation enqueued so far has completed, like the
    /// `cudaStreamSynchronize` an application calls once per training step.
    pub fn synchronize(&self) {
        self.0.proxy.drain();
    }

    /// `ncclCommDestroy`: waits for outstanding work, stops the proxy thread if this was
    /// its last user, then the profiler's `finalize`.
    pub fn destroy(self) {
        self.0.proxy.drain();
        if self.0.nccl.config.skip_destroy {
            return;
        }
        if self.0.proxy.users.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.proxy.shutdown();
        }
        self.0.nccl.detach_pxn();
        self.0.nccl.profiler.finalize(self.0.session);
    }
}

/// The implicit `ncclGroupStartInternal` of every API call. The profiler's depth mirrors
/// it once a GroupApi runs; a user's `ncclGroupStart` does not bump it.
fn implicit_group_start() {
    THREAD.with(|cell| {
        let mut thread = cell.borrow_mut();
        thread.nccl_depth += 1;
        if thread.api_state == ApiState::Started {
            thread.profiler_depth += 1;
        }
    });
}

/// `ncclGroupEndInternal`: GroupEndApiStart when the profiler's depth reaches 0, the
/// launch when NCCL's depth does, then the GroupApi stop.
fn group_end_internal() {
    let (tasks, group_api, stop) = THREAD.with(|cell| {
        let mut thread = cell.borrow_mut();
        thread.nccl_depth = (thread.nccl_depth - 1).max(0);
        let mut stop = None;
        if thread.api_state == ApiState::Started {
            thread.profiler_depth -= 1;
            if thread.profiler_depth <= 0 {
                if let Some((session, profiler)) = &thread.group_api_session {
                    if !thread.group_api.is_null() {
                        profiler.record(
                            session,
                            thread.group_api,
                            st::GROUP_END_API_START,
                            StateArgs::Null,
                        );
                    }
                }
                thread.api_state = ApiState::Stopped;
                stop = Some((thread.group_api as usize, thread.group_api_session.clone()));
            }
        }
        let tasks = if thread.nccl_depth == 0 {
            std::mem::take(&mut thread.tasks)
        } else {
            Vec::new()
        };
        (tasks, thread.group_api as usize, stop)
    });
    if !tasks.is_empty() {
        launch_tasks(tasks, group_api as Raw);
    }
    if let Some((handle, session)) = stop {
        if let Some((session, profiler)) = session {
            if handle != 0 {
                profiler.stop(&session, handle as Raw);
            }
        }
        THREAD.with(|cell| {
            let mut thread = cell.borrow_mut();
            thread.group_api = NULL;
            thread.group_api_session = None;
            thread.api_state = ApiState::Reset;
        });
    }
}

/// `doLaunches`: comm by comm, a KernelLaunch and the plan's host work. Non-blocking
/// comms launch on their own thread.
fn launch_tasks(tasks: Vec<Task>, group_api: Raw) {
    let mut by_comm: Vec<(Comm, Vec<Task>)> = Vec::new();
    for task in tasks {
        match by_comm
            .iter_mut()
            .find(|(comm, _)| Arc::ptr_eq(&comm.0, &task.comm.0))
        {
            Some((_, list)) => list.push(task),
            None => by_comm.push((task.comm.clone(), vec![task])),
        }
    }
    let group_api = group_api as usize;
    for (comm, tasks) in by_comm {
        if comm.0.options.blocking {
            launch_plan(&comm, &tasks, group_api as Raw);
        } else {
            // The whole doLaunches runs on another thread; GroupApi stops right away.
            let handle = std::thread::spawn(move || launch_plan(&comm, &tasks, group_api as Raw));
            let _ = handle.join();
        }
    }
}

fn launch_plan(comm: &Comm, tasks: &[Task], group_api: Raw) {
    let nccl = comm.nccl();
    let profiler = &nccl.profiler;
    let Some(session) = comm.0.session else {
        simulate_without_profiler(comm, tasks);
        return;
    };
    let mask = tasks.iter().map(|t| t.mask).find(|&m| m != 0).unwrap_or(0);
    if nccl.release.has_api_events() && mask & t::KERNEL_LAUNCH != 0 {
        let mut launch = NULL;
        let descr = Descr {
            parent: group_api,
            rank: 0,
            event: CoreEvent::KernelLaunch,
        };
        profiler.start(&session, &mut launch, &descr);
        std::thread::sleep(Duration::from_micros(3));
        if !launch.is_null() {
            profiler.stop(&session, launch);
        }
    }
    // A captured plan's host work runs at each replay (`Graph::replay`), except when it
    // has no proxy work: then its tasks are emitted once, now, and never again.
    let captured = tasks.iter().any(|t| t.graph_captured);
    if !captured || nccl.config.transport == Transport::Local {
        host_stream_plan_task(comm, &session, tasks);
    }
}

/// Without a profiler the work still runs (in simulated time, with ground truth).
fn simulate_without_profiler(comm: &Comm, tasks: &[Task]) {
    let works = tasks
        .iter()
        .map(|task| plan_work(comm, task, NULL))
        .collect();
    comm.0.proxy.post(works);
}

/// `hostStreamPlanTask`: Group, the tasks' Coll/P2p, proxy work posted, stops.
fn host_stream_plan_task(comm: &Comm, session: &Session, tasks: &[Task]) {
    let nccl = comm.nccl();
    let profiler = &nccl.profiler;
    let release = nccl.release;
    let rank = comm.rank();
    let mask = tasks.iter().map(|t| t.mask).find(|&m| m != 0).unwrap_or(0);
    let mut group = NULL;
    if mask & GROUP_TRIGGER != 0 {
        let descr = Descr {
            parent: NULL,
            rank: 0,
            event: CoreEvent::Group,
        };
        profiler.start(session, &mut group, &descr);
    }
    let mut handles = Vec::with_capacity(tasks.len());
    let mut works = Vec::with_capacity(tasks.len());
    for task in tasks {
        let mut handle = NULL;
        let needs_group = release.children_need_parent_handle() && group.is_null();
        let parent = if release.has_api_events() {
            task.api as Raw
        } else {
            group
        };
        match task.op {
            Op::Coll {
                func,
                count,
                datatype,
                root,
            } if task.mask & COLL_TRIGGER != 0 && !needs_group => {
                // AllGather and Broadcast report bytes with Int8.
                let (count, datatype) = match func {
                    Func::AllGather | Func::Broadcast => (count * datatype.size(), DataType::Int8),
                    _ => (count, datatype),
                };
                let descr = Descr {
                    parent,
                    rank,
                    event: CoreEvent::Coll(CollTask {
                        seq: task.seq,
                        func,
                        count,
                        root,
                        datatype,
                        n_channels: nccl.config.channels,
                        n_warps: 16,
                        algo: nccl.config.algo,
                        proto: nccl.config.proto,
                        symmetric_variant: None,
                        parent_group: group,
                        user_tag: 0,
                        comm_name: std::ptr::null(),
                        comm_hash: comm.hash(),
                    }),
                };
                profiler.start(session, &mut handle, &descr);
            }
            Op::P2p {
                func,
                count,
                datatype,
                peer,
            } if task.mask & P2P_TRIGGER != 0 && !needs_group => {
                let descr = Descr {
                    parent,
                    rank,
                    event: CoreEvent::P2p(P2pTask {
                        func,
                        count,
                        datatype,
                        peer,
                        n_channels: 1,
                        parent_group: group,
                        user_tag: 0,
                        comm_name: std::ptr::null(),
                        comm_hash: comm.hash(),
                    }),
                };
                profiler.start(session, &mut handle, &descr);
            }
            _ => {}
        }
        handles.push(handle);
        works.push(plan_work(comm, task, handle));
    }
    // Proxy ops are uploaded: the proxy (and from 2.31 the profiler thread) take over.
    comm.0.proxy.post(works);
    for handle in handles {
        if !handle.is_null() {
            profiler.stop(session, handle);
        }
    }
    if !group.is_null() {
        profiler.stop(session, group);
    }
}

/// The simulated execution of one task: GPU interval and the proxy's part.
fn plan_work(comm: &Comm, task: &Task, handle: Raw) -> Work {
    let nccl = comm.nccl();
    let bytes = task.op.bytes();
    let duration = nccl.rng(|rng| {
        nccl.config.time.duration(
            task.op.func(),
            nccl.config.algo,
            nccl.config.proto,
            bytes,
            comm.n_ranks(),
            rng,
        )
    });
    let duration = match (nccl.config.hang_kernel, task.op) {
        (Some((rank, seq, extra)), Op::Coll { .. })
            if rank == comm.rank() && seq == task.seq && !nccl.config.hang_in_proxy =>
        {
            duration + extra
        }
        _ => duration,
    };
    let queued = 2_000 + nccl.config.gpu_busy.as_nanos() as u64;
    let gpu_start = (host_ns() + queued).max(comm.0.gpu_free.load(Ordering::Acquire));
    let gpu_stop = gpu_start + duration.as_nanos() as u64;
    comm.0.gpu_free.fetch_max(gpu_stop, Ordering::AcqRel);
    let (peers, n_channels): (Vec<(i32, bool)>, u8) = match task.op {
        Op::Coll { .. } => {
            let n = comm.n_ranks();
            let next = (comm.rank() + 1) % n;
            let prev = (comm.rank() + n - 1) % n;
            (vec![(next, true), (prev, false)], nccl.config.channels)
        }
        Op::P2p { func, peer, .. } => (vec![(peer, func == Func::Send)], 1),
    };
    let all_local = nccl
        .local_ranks
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&comm.hash())
        .is_some_and(|&n| n >= comm.n_ranks());
    let rendezvous = match task.op {
        Op::Coll { func, .. } if all_local => {
            Some(Meet::Local((comm.hash(), func, task.seq), comm.n_ranks()))
        }
        Op::Coll { func, .. } => nccl
            .comm_rendezvous(comm)
            .map(|table| Meet::Shared(table, (func as u64) << 48 | task.seq)),
        _ => None,
    };
    Work {
        rendezvous,
        gpu_free: Arc::clone(&comm.0.gpu_free),
        met: Arc::clone(&comm.0.met),
        task_handle: handle as usize,
        mask: task.mask,
        rank: comm.rank(),
        comm_hash: comm.hash(),
        func: task.op.func(),
        seq: task.seq,
        bytes,
        n_channels,
        peers,
        gpu_start,
        gpu_stop,
        enqueue: task.enqueue,
        pxn: comm.0.pxn.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        context: comm.context() as usize,
    }
}

/// What the proxy thread gets for one task.
struct Work {
    task_handle: usize,
    mask: u64,
    rank: i32,
    comm_hash: u64,
    func: Func,
    seq: u64,
    bytes: usize,
    n_channels: u8,
    /// (peer, is_send) per channel.
    peers: Vec<(i32, bool)>,
    gpu_start: u64,
    gpu_stop: u64,
    enqueue: (u64, u64),
    pxn: Option<PxnRoute>,
    context: usize,
    /// A collective completes only after its last rank arrived: where the ranks meet.
    rendezvous: Option<Meet>,
    /// The comm's GPU stream, to push back when the collective waits for a late rank.
    gpu_free: Arc<AtomicU64>,
    /// The comm's latest last arrival, to advance after the ranks met.
    met: Arc<AtomicU64>,
}

/// A collective instance: (comm hash, function, seq).
type RendezvousKey = (u64, Func, u64);

/// How a collective's ranks meet.
#[derive(Clone)]
enum Meet {
    /// Every rank lives in this process (with the number of ranks).
    Local(RendezvousKey, i32),
    /// Ranks in other processes too: the communicator's shared table, and the instance's
    /// id.
    Shared(Arc<SharedRendezvous>, u64),
}

/// Where ranks of one process meet per collective: a collective's kernels spin until every
/// rank's data is there, so none completes before the last rank arrived plus the
/// operation's own time. Ranks in other processes are not waited for.
#[derive(Default)]
struct Rendezvous {
    /// Per collective: ranks arrived, the latest arrival, ranks that have seen it.
    table: Mutex<HashMap<RendezvousKey, (i32, u64, i32)>>,
    changed: std::sync::Condvar,
}

impl Rendezvous {
    /// Registers this rank's arrival and waits (at most `patience`) for the others'; gives
    /// the latest arrival seen.
    fn meet(&self, key: RendezvousKey, n_ranks: i32, arrival: u64, patience: Duration) -> u64 {
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let entry = table.entry(key).or_insert((0, 0, 0));
        entry.0 += 1;
        entry.1 = entry.1.max(arrival);
        self.changed.notify_all();
        let deadline = std::time::Instant::now() + patience;
        while table.get(&key).is_some_and(|e| e.0 < n_ranks) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            table = self
                .changed
                .wait_timeout(table, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let entry = table.entry(key).or_insert((n_ranks, arrival, 0));
        let latest = entry.1;
        entry.2 += 1;
        if entry.2 >= n_ranks {
            table.remove(&key);
        }
        latest
    }
}

enum ProxyMessage {
    Works(Vec<Work>),
    /// Reply when everything posted before is done.
    Drain(Sender<()>),
    Shutdown,
}

/// A proxy progress thread ("NCCL Progress N"): one per communicator, shared with split
/// children. Its ProxyCtrl events carry the context of the comm that created it.
struct ProxyThread {
    sender: Mutex<Sender<ProxyMessage>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    users: std::sync::atomic::AtomicUsize,
}

impl ProxyThread {
    fn spawn(nccl: Arc<Nccl>, session: Option<Session>, rank: i32) -> Arc<ProxyThread> {
        let (sender, receiver) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("NCCL Progress {rank}"))
            .spawn(move || proxy_main(nccl, session, receiver))
            .expect("spawn the proxy thread");
        Arc::new(ProxyThread {
            sender: Mutex::new(sender),
            thread: Mutex::new(Some(thread)),
            users: std::sync::atomic::AtomicUsize::new(1),
        })
    }

    /// Uploads a plan's proxy work in one go.
    fn post(&self, works: Vec<Work>) {
        let _ = self
            .sender
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(ProxyMessage::Works(works));
    }

    fn drain(&self) {
        let (done, wait) = mpsc::channel();
        let sent = self
            .sender
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(ProxyMessage::Drain(done));
        if sent.is_ok() {
            let _ = wait.recv();
        }
    }

    fn shutdown(&self) {
        let _ = self
            .sender
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(ProxyMessage::Shutdown);
        if let Some(thread) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = thread.join();
        }
    }
}

/// A short ProxyCtrl event: start, one or two states, stop — if the live mask has it.
fn proxy_ctrl(nccl: &Nccl, session: &Session, states: &[(i32, i32)], between: impl FnOnce()) {
    let profiler = &nccl.profiler;
    if profiler.mask() & t::PROXY_CTRL == 0 {
        between();
        return;
    }
    let mut handle = NULL;
    let descr = Descr {
        parent: NULL,
        rank: 0,
        event: CoreEvent::ProxyCtrl,
    };
    profiler.start(session, &mut handle, &descr);
    if let Some(&(state, appended)) = states.first() {
        if !handle.is_null() {
            profiler.record(session, handle, state, StateArgs::Appended(appended));
        }
    }
    between();
    for &(state, appended) in states.iter().skip(1) {
        if !handle.is_null() {
            profiler.record(session, handle, state, StateArgs::Appended(appended));
        }
    }
    if !handle.is_null() {
        profiler.stop(session, handle);
    }
}

fn proxy_main(nccl: Arc<Nccl>, session: Option<Session>, receiver: Receiver<ProxyMessage>) {
    let mut idle = false;
    let mut first = true;
    // 2.31+: KernelCh and KernelPhase come from a dedicated profiler thread.
    let kernels = session
        .filter(|_| nccl.release.has_profiler_thread())
        .map(|session| KernelThread::spawn(Arc::clone(&nccl), session));
    loop {
        // Nothing posted: Sleep, block, Wakeup.
        let mut message = None;
        match &session {
            Some(s) => proxy_ctrl(
                &nccl,
                s,
                &[(st::PROXY_CTRL_SLEEP, 0), (st::PROXY_CTRL_WAKEUP, 0)],
                || message = receiver.recv().ok(),
            ),
            None => message = receiver.recv().ok(),
        }
        let Some(message) = message else { return };
        let mut batch = Vec::new();
        let mut drains = Vec::new();
        let mut shutdown = false;
        for message in std::iter::once(message).chain(receiver.try_iter()) {
            match message {
                ProxyMessage::Works(works) => batch.extend(works),
                ProxyMessage::Drain(done) => drains.push(done),
                ProxyMessage::Shutdown => shutdown = true,
            }
        }
        if let Some(s) = &session {
            // Idle → active flips are reported after a pass; the first pass counts as
            // "not idle" so only a change is reported.
            if idle && !batch.is_empty() {
                proxy_ctrl(&nccl, s, &[(st::PROXY_CTRL_ACTIVE, 0)], || {});
                idle = false;
            }
            progress_batch(&nccl, s, batch, kernels.as_ref());
            if !first && !idle {
                proxy_ctrl(&nccl, s, &[(st::PROXY_CTRL_IDLE, 0)], || {});
                idle = true;
            }
            first = false;
        } else {
            let mut batch = batch;
            schedule(&nccl, &mut batch);
            for work in batch {
                sleep_until(work.gpu_stop);
                let completion = host_ns();
                nccl.truth.push(truth_of(&work, completion, completion));
            }
        }
        if !drains.is_empty() {
            if let Some(kernels) = &kernels {
                kernels.drain();
            }
        }
        for done in drains {
            let _ = done.send(());
        }
        if shutdown {
            if let Some(kernels) = kernels {
                kernels.shutdown();
            }
            return;
        }
    }
}

/// Places a batch's kernels on the comm's GPU stream (one after another) and, for
/// collectives whose ranks all live here, after the last rank's arrival.
fn schedule(nccl: &Nccl, batch: &mut [Work]) {
    thread_local! {
        /// When this proxy thread's GPU stream is free: kernels run one after another.
        static STREAM_FREE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    for work in batch.iter_mut() {
        let behind = STREAM_FREE.get().saturating_sub(work.gpu_start);
        work.gpu_start += behind;
        work.gpu_stop += behind;
        if let Some(meet) = &work.rendezvous {
            let patience = nccl.config.peer_patience;
            // A rank arrives when its kernel starts (after its host launched it): no rank's
            // kernel ends before the last one's started and did its part.
            let latest = match meet {
                Meet::Local(key, n_ranks) => {
                    nccl.rendezvous
                        .meet(*key, *n_ranks, work.gpu_start, patience)
                }
                Meet::Shared(table, instance) => {
                    table.meet(*instance, work.rank as usize, work.gpu_start, patience)
                }
            };
            let own = work.gpu_stop - work.gpu_start;
            let stop = work.gpu_stop.max(latest + 2_000 + own);
            work.gpu_stop = stop;
            work.gpu_free.fetch_max(stop, Ordering::AcqRel);
            work.met.fetch_max(latest, Ordering::AcqRel);
        }
        STREAM_FREE.set(work.gpu_stop);
    }
}

/// NCCL's proxy and profiler threads poll the GPU and the network: they notice within
/// microseconds. nccl-sim's sleep until shortly before the simulated moment (then poll,
/// [`sleep_until`]), and Linux lets a sleeping thread wake up to 50 µs late by default (its
/// timer slack). The least slack for this thread and every thread it starts from now on
/// keeps nccl-sim's noticing close to NCCL's.
fn quick_wake_ups() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and changes only this thread's
    // (and its future children's) timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

/// The ground truth of one operation on one rank.
fn truth_of(work: &Work, completion: u64, reported: u64) -> TruthRecord {
    TruthRecord {
        comm_hash: format!("{:#x}", work.comm_hash),
        rank: work.rank,
        func: work.func.name().to_string_lossy().into_owned(),
        seq: work.seq,
        bytes: work.bytes as u64,
        enqueue_start_ns: work.enqueue.0,
        enqueue_stop_ns: work.enqueue.1,
        gpu_start_ns: work.gpu_start,
        gpu_stop_ns: work.gpu_stop,
        completion_ns: completion,
        reported_ns: reported,
    }
}

/// What the profiler thread (or, before 2.31, the proxy thread) needs to report one
/// task's GPU work per channel.
#[derive(Clone, Copy)]
struct KernelJob {
    task_handle: usize,
    seq: u64,
    mask: u64,
    n_channels: u8,
    gpu_start: u64,
    gpu_stop: u64,
    /// The work whose timestamps the host reads: another one when the 64-slot ring
    /// wrapped before the host polled.
    reported: (u64, u64),
}

impl KernelJob {
    fn of(work: &Work) -> KernelJob {
        KernelJob {
            task_handle: work.task_handle,
            seq: work.seq,
            mask: work.mask,
            n_channels: work.n_channels,
            gpu_start: work.gpu_start,
            gpu_stop: work.gpu_stop,
            reported: (work.gpu_start, work.gpu_stop),
        }
    }
}

enum KernelMessage {
    Job(KernelJob),
    Drain(Sender<()>),
}

/// NCCL 2.31's dedicated profiler thread of a communicator.
struct KernelThread {
    sender: Sender<KernelMessage>,
    thread: JoinHandle<()>,
}

impl KernelThread {
    fn spawn(nccl: Arc<Nccl>, session: Session) -> KernelThread {
        let (sender, receiver) = mpsc::channel::<KernelMessage>();
        let thread = std::thread::Builder::new()
            .name("NCCL Profiler".into())
            .spawn(move || {
                for message in receiver {
                    match message {
                        KernelMessage::Job(job) => {
                            let handles = kernel_start(&nccl, &session, &job);
                            kernel_stop(&nccl, &session, &job, handles);
                        }
                        KernelMessage::Drain(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            })
            .expect("spawn the profiler thread");
        KernelThread { sender, thread }
    }

    fn post(&self, job: KernelJob) {
        let _ = self.sender.send(KernelMessage::Job(job));
    }

    fn drain(&self) {
        let (done, wait) = mpsc::channel();
        if self.sender.send(KernelMessage::Drain(done)).is_ok() {
            let _ = wait.recv();
        }
    }

    fn shutdown(self) {
        drop(self.sender);
        let _ = self.thread.join();
    }
}

/// One ProxyOp being progressed here.
struct OpState {
    handle: Raw,
    channel: u8,
    peer: i32,
    is_send: bool,
    steps: i32,
}

/// Appends and progresses a batch of works: the Append window with the ProxyOp starts
/// (2.27+), steps, KernelCh, stops.
fn progress_batch(
    nccl: &Arc<Nccl>,
    session: &Session,
    batch: Vec<Work>,
    kernels: Option<&KernelThread>,
) {
    if batch.is_empty() {
        return;
    }
    // The device writes work counters into a ring of 64 slots per channel; when more
    // works were posted before the host polled, the host reads a later work's times.
    const RING_SLOTS: usize = 64;
    let mut batch = batch;
    schedule(nccl, &mut batch);
    let jobs: Vec<KernelJob> = (0..batch.len())
        .map(|i| {
            let mut job = KernelJob::of(&batch[i]);
            if let Some(later) = batch.get(i + RING_SLOTS) {
                job.reported = (later.gpu_start, later.gpu_stop);
            }
            job
        })
        .collect();
    let profiler = &nccl.profiler;
    let release = nccl.release;
    let transport = nccl.config.transport;
    let mut ops: Vec<Vec<OpState>> = Vec::new();
    let n_ops: usize = batch
        .iter()
        .map(|w| w.peers.len() * usize::from(w.n_channels))
        .sum();
    let appended = if transport == Transport::Local {
        0
    } else {
        n_ops as i32
    };
    proxy_ctrl(
        nccl,
        session,
        &[
            (st::PROXY_CTRL_APPEND, 0),
            (st::PROXY_CTRL_APPEND_END, appended),
        ],
        || {
            for work in &batch {
                let mut list = Vec::new();
                if transport != Transport::Local {
                    for channel in 0..work.n_channels {
                        for &(peer, is_send) in &work.peers {
                            if is_send && work.pxn.is_some() {
                                continue; // progressed by another process
                            }
                            let mut handle = NULL;
                            let parent_ok =
                                !release.children_need_parent_handle() || work.task_handle != 0;
                            if work.mask & PROXY_OP_TRIGGER != 0
                                && parent_ok
                                && release.proxy_op_at_append()
                            {
                                let descr = Descr {
                                    parent: work.task_handle as Raw,
                                    rank: work.rank,
                                    event: CoreEvent::ProxyOp {
                                        pid: nccl.pid,
                                        channel,
                                        peer,
                                        n_steps: nccl.config.steps,
                                        chunk_size: (work.bytes / nccl.config.steps.max(1) as usize)
                                            as i32,
                                        is_send: is_send && transport == Transport::Net,
                                    },
                                };
                                profiler.start(session, &mut handle, &descr);
                            }
                            list.push(OpState {
                                handle,
                                channel,
                                peer,
                                is_send,
                                steps: nccl.config.steps,
                            });
                        }
                    }
                }
                ops.push(list);
            }
        },
    );
    for ((work, list), job) in batch.iter().zip(ops.iter_mut()).zip(jobs) {
        progress_work(nccl, session, work, list, job, kernels);
    }
}

fn progress_work(
    nccl: &Arc<Nccl>,
    session: &Session,
    work: &Work,
    ops: &mut [OpState],
    job: KernelJob,
    kernels: Option<&KernelThread>,
) {
    let profiler = &nccl.profiler;
    let release = nccl.release;
    let config = &nccl.config;
    // PXN: the sends go to another process's proxy.
    if let Some(route) = &work.pxn {
        for channel in 0..work.n_channels {
            for &(peer, is_send) in &work.peers {
                if is_send {
                    route(PxnOp {
                        origin_pid: nccl.pid,
                        origin_rank: work.rank,
                        context: work.context as u64,
                        parent: work.task_handle as u64,
                        channel,
                        peer,
                        n_steps: config.steps,
                        chunk_size: (work.bytes / config.steps.max(1) as usize) as i32,
                        mask: work.mask,
                        send_bytes: (work.bytes / config.steps.max(1) as usize) as u64,
                        step_ns: (work.gpu_stop - work.gpu_start) / config.steps.max(1) as u64,
                    });
                }
            }
        }
    }
    // First progress call: InProgress on each op (2.27+), or, before 2.27, the ProxyOp
    // starts now, with the old per-op states.
    for op in ops.iter_mut() {
        if !release.proxy_op_at_append()
            && work.mask & PROXY_OP_TRIGGER != 0
            && config.transport != Transport::Local
        {
            let descr = Descr {
                parent: work.task_handle as Raw,
                rank: work.rank,
                event: CoreEvent::ProxyOp {
                    pid: nccl.pid,
                    channel: op.channel,
                    peer: op.peer,
                    n_steps: op.steps,
                    chunk_size: (work.bytes / op.steps.max(1) as usize) as i32,
                    is_send: op.is_send,
                },
            };
            profiler.start(session, &mut op.handle, &descr);
        }
        if !op.handle.is_null() && release.proxy_op_at_append() {
            profiler.record(
                session,
                op.handle,
                st::PROXY_OP_IN_PROGRESS_V4,
                StateArgs::Uninit,
            );
        }
    }
    let kernel = match kernels {
        Some(thread) => {
            thread.post(job);
            Vec::new()
        }
        None => kernel_start(nccl, session, &job),
    };
    let step_ns = (work.gpu_stop - work.gpu_start) / config.steps.max(1) as u64;
    let step_bytes =
        work.bytes / usize::from(work.n_channels.max(1)) / config.steps.max(1) as usize;
    if config.transport == Transport::Net {
        let mut stale = 0usize;
        let mut recv_steps = 0u32;
        // The planted proxy hang: the first send step of this collective's first send.
        let mut network_hang = match nccl.config.hang_kernel {
            Some((rank, seq, extra))
                if nccl.config.hang_in_proxy
                    && rank == work.rank
                    && seq == work.seq
                    && !matches!(work.func, Func::Send | Func::Recv) =>
            {
                Some(extra)
            }
            _ => None,
        };
        for step in 0..config.steps {
            sleep_until(work.gpu_start + step_ns * (step as u64 + 1));
            for op in ops.iter_mut() {
                let mut handle = NULL;
                let steps_allowed = work.mask & PROXY_STEP_TRIGGER != 0
                    && (!release.children_need_parent_handle() || !op.handle.is_null());
                let start_step = |handle: &mut Raw| {
                    if steps_allowed {
                        let descr = Descr {
                            parent: op.handle,
                            rank: work.rank,
                            event: CoreEvent::ProxyStep { step },
                        };
                        profiler.start(session, handle, &descr);
                    }
                };
                let record = |handle: Raw, state: i32, args: StateArgs| {
                    // State records are skipped when the ProxyOp handle is NULL.
                    if !handle.is_null() && !op.handle.is_null() {
                        profiler.record(session, handle, state, args);
                    }
                };
                if op.is_send {
                    start_step(&mut handle);
                    record(
                        handle,
                        st::PROXY_STEP_SEND_GPU_WAIT,
                        StateArgs::TransSize(stale),
                    );
                    let repeats =
                        nccl.rng(|rng| rng.below(u64::from(config.peer_wait_repeats) + 1));
                    for _ in 0..=repeats {
                        record(
                            handle,
                            st::PROXY_STEP_SEND_PEER_WAIT_V4,
                            StateArgs::TransSize(stale),
                        );
                    }
                    record(
                        handle,
                        st::PROXY_STEP_SEND_WAIT,
                        StateArgs::TransSize(step_bytes),
                    );
                    if let Some(extra) = network_hang.take() {
                        // The network does not take the data for that long.
                        std::thread::sleep(extra);
                    }
                    net_plugin_events(nccl, session, work, handle, step_bytes);
                    stale = step_bytes;
                    if !handle.is_null() {
                        profiler.stop(session, handle);
                    }
                } else {
                    recv_steps += 1;
                    start_step(&mut handle);
                    if config.recv_restart_every != 0 && recv_steps % config.recv_restart_every == 0
                    {
                        // irecv gave no request: the step starts again, the first handle is
                        // overwritten and never stopped.
                        start_step(&mut handle);
                    }
                    record(
                        handle,
                        st::PROXY_STEP_RECV_WAIT,
                        StateArgs::TransSize(stale),
                    );
                    record(
                        handle,
                        st::PROXY_STEP_RECV_FLUSH_WAIT,
                        StateArgs::TransSize(step_bytes),
                    );
                    record(
                        handle,
                        st::PROXY_STEP_RECV_GPU_WAIT,
                        StateArgs::TransSize(step_bytes),
                    );
                    if !handle.is_null() {
                        profiler.stop(session, handle);
                    }
                }
            }
        }
        if !release.proxy_op_at_append() {
            for op in ops.iter() {
                if !op.handle.is_null() {
                    let (state, done) = if op.is_send {
                        (st::PROXY_OP_SEND_POSTED, st::PROXY_OP_SEND_DONE)
                    } else {
                        (st::PROXY_OP_RECV_POSTED, st::PROXY_OP_RECV_DONE)
                    };
                    for s in [state, done] {
                        profiler.record(
                            session,
                            op.handle,
                            s,
                            StateArgs::ProxyOpProgress {
                                trans_size: work.bytes,
                                steps: op.steps,
                            },
                        );
                    }
                }
            }
        }
    } else {
        sleep_until(work.gpu_stop);
    }
    // All subs done: the host knows the operation complete now, before it tells the
    // plugin (its callbacks take time, and may be preempted). Then every ProxyOp stops
    // back to back (network only; others never stop).
    let completion = host_ns();
    if config.transport == Transport::Net {
        for op in ops.iter_mut() {
            if !op.handle.is_null() {
                profiler.stop(session, op.handle);
                op.handle = NULL;
            }
        }
    }
    if kernels.is_none() {
        kernel_stop(nccl, session, &job, kernel);
    }
    nccl.truth.push(truth_of(work, completion, host_ns()));
}

/// NetPlugin events of one send step: start if the mask has NetPlugin (else the
/// handle is left untouched: NULL), an update, and a stop with no NULL check.
fn net_plugin_events(nccl: &Nccl, session: &Session, work: &Work, step: Raw, bytes: usize) {
    let kind = nccl.config.net_plugin;
    if kind == NetPluginKind::None {
        return;
    }
    let profiler = &nccl.profiler;
    let mut ib = nccl_profiler_abi::NetIbDescrV1 {
        type_: netid::IB_QP,
        qp: nccl_profiler_abi::NetIbQpV1 {
            device: 0,
            wr_id: work.seq,
            opcode: 2,
            qpNum: 17,
            length: bytes,
        },
    };
    let mut sock = nccl_profiler_abi::NetSockDescrV1 {
        type_: netid::SOCKET,
        sock: nccl_profiler_abi::NetSockV1 {
            fd: 42,
            op: 1,
            length: bytes,
        },
    };
    let (id, data): (i64, Raw) = match kind {
        NetPluginKind::Ib => (netid::TYPE_IB | 1, &mut ib as *mut _ as Raw),
        _ => (netid::TYPE_SOCK | 1, &mut sock as *mut _ as Raw),
    };
    let mut handle = NULL;
    if work.mask & t::NET_PLUGIN != 0 {
        let descr = Descr {
            parent: step,
            rank: work.rank,
            event: CoreEvent::NetPlugin { id, data },
        };
        profiler.start(session, &mut handle, &descr);
        if !handle.is_null() {
            profiler.record(
                session,
                handle,
                st::NET_PLUGIN_UPDATE,
                StateArgs::NetData(data),
            );
        }
    }
    profiler.stop(session, handle);
}

/// KernelCh starts, one per channel, when the host notices the GPU started. The
/// rank is not set; pTimer is the GPU's start time (of a later work after a ring wrap).
fn kernel_start(nccl: &Arc<Nccl>, session: &Session, job: &KernelJob) -> Vec<Raw> {
    let release = nccl.release;
    if !release.has_kernel_ch() || job.mask & t::KERNEL_CH == 0 || job.task_handle == 0 {
        return Vec::new();
    }
    sleep_until(nccl.noticed_at(job.gpu_start));
    (0..job.n_channels)
        .map(|channel| {
            let mut handle = NULL;
            let ptimer = if release.kernel_ch_has_timestamps() {
                nccl.gpu(reported_channel_times(nccl, job, channel).0)
            } else {
                0
            };
            let descr = Descr {
                parent: job.task_handle as Raw,
                rank: 0,
                event: CoreEvent::KernelCh { channel, ptimer },
            };
            nccl.profiler.start(session, &mut handle, &descr);
            if nccl.config.bugs.has(NcclBug::KernelStepOnBit15) && !handle.is_null() {
                kernel_step(nccl, session, handle, channel, ptimer);
            }
            handle
        })
        .collect()
}

/// The KernelStep event of NCCL PR #2316 (type bit 15) under a KernelCh, started and
/// stopped at once (`--nccl-bug kernel-step-on-bit15`).
fn kernel_step(nccl: &Nccl, session: &Session, kernel: Raw, channel: u8, ptimer: u64) {
    let mut step = NULL;
    let descr = Descr {
        parent: kernel,
        rank: 0,
        event: CoreEvent::KernelStep { channel, ptimer },
    };
    nccl.profiler.start(session, &mut step, &descr);
    if !step.is_null() {
        nccl.profiler.stop(session, step);
    }
}

/// The (start, stop) GPU times of a channel as NCCL reports them: the true ones, unless a
/// kernel timestamp bug is injected (`--nccl-bug`).
fn reported_channel_times(nccl: &Nccl, job: &KernelJob, channel: u8) -> (u64, u64) {
    nccl.config.bugs.kernel_timestamps(
        job.seq,
        channel_start(job, channel),
        channel_stop(job, channel),
    )
}

/// Channels start a little apart and end a little apart, as on a GPU.
fn channel_start(job: &KernelJob, channel: u8) -> u64 {
    job.reported.0 + u64::from(channel) * 150
}

fn channel_stop(job: &KernelJob, channel: u8) -> u64 {
    job.reported
        .1
        .saturating_sub(u64::from(channel) * 100)
        .max(channel_start(job, channel) + 1)
}

/// KernelCh stops: (2.31+, with KernelPhase asked for) the phases first, then the stop
/// record with the GPU's stop time, immediately followed by the stop.
fn kernel_stop(nccl: &Arc<Nccl>, session: &Session, job: &KernelJob, handles: Vec<Raw>) {
    let profiler = &nccl.profiler;
    sleep_until(nccl.noticed_at(job.gpu_stop));
    for (channel, handle) in handles.into_iter().enumerate() {
        if handle.is_null() {
            continue;
        }
        let channel = channel as u8;
        let (start, stop) = (channel_start(job, channel), channel_stop(job, channel));
        if nccl.release.has_kernel_phase() && profiler.mask() & t::KERNEL_PHASE != 0 {
            let span = stop - start;
            let bounds = [start, start + span / 10, start + span * 9 / 10, stop];
            for phase in 0..3u8 {
                let (a, b) = (bounds[usize::from(phase)], bounds[usize::from(phase) + 1]);
                if b <= a {
                    continue; // zero-length phases are skipped
                }
                let mut ph = NULL;
                let descr = Descr {
                    parent: handle,
                    rank: 0,
                    event: CoreEvent::KernelPhase {
                        channel,
                        phase,
                        ptimer: nccl.gpu(a),
                    },
                };
                profiler.start(session, &mut ph, &descr);
                if !ph.is_null() {
                    profiler.record(
                        session,
                        ph,
                        st::KERNEL_PHASE_STOP,
                        StateArgs::PTimer(nccl.gpu(b)),
                    );
                    profiler.stop(session, ph);
                }
            }
        }
        let ptimer = if nccl.release.kernel_ch_has_timestamps() {
            nccl.gpu(reported_channel_times(nccl, job, channel).1)
        } else {
            0
        };
        profiler.record(
            session,
            handle,
            st::KERNEL_CH_STOP,
            StateArgs::PTimer(ptimer),
        );
        profiler.stop(session, handle);
    }
}

// ---------------------------------------------------------------------------------------
// CUDA graphs.

/// Begins capturing this thread's operations into a CUDA graph.
pub fn capture_begin() {
    THREAD.with(|t| t.borrow_mut().capturing = Some(Vec::new()));
}

/// Ends the capture; the graph's plans can then be replayed.
pub fn capture_end() -> Graph {
    let tasks = THREAD.with(|t| t.borrow_mut().capturing.take().unwrap_or_default());
    Graph { tasks }
}

/// A captured CUDA graph.
pub struct Graph {
    tasks: Vec<Task>,
}

impl Graph {
    /// Replays the graph `times` times on a CUDA host-callback thread: Group and Coll/P2p
    /// start there, with the capture-time (long stopped) API handles as parents.
    pub fn replay(&self, times: usize) {
        if self.tasks.is_empty() || self.tasks[0].comm.nccl().config.transport == Transport::Local {
            return;
        }
        let tasks = self.tasks.clone();
        std::thread::Builder::new()
            .name("cuda-callback".into())
            .spawn(move || {
                for _ in 0..times {
                    let mut by_comm: Vec<(Comm, Vec<Task>)> = Vec::new();
                    for task in &tasks {
                        match by_comm
                            .iter_mut()
                            .find(|(c, _)| Arc::ptr_eq(&c.0, &task.comm.0))
                        {
                            Some((_, list)) => list.push(task.clone()),
                            None => by_comm.push((task.comm.clone(), vec![task.clone()])),
                        }
                    }
                    for (comm, list) in by_comm {
                        if let Some(session) = comm.0.session {
                            host_stream_plan_task(&comm, &session, &list);
                            comm.0.proxy.drain();
                        }
                    }
                }
            })
            .expect("spawn the callback thread")
            .join()
            .ok();
    }
}
