//! The OTF2 trace writer: the standalone mode's output.
//!
//! Each process writes one part of the job's trace, `<output dir>/parts/<host>.<pid>/`,
//! a complete OTF2 archive with local ids (see `writer.rs`). What is written where is the
//! trace schema, documented for users in `docs/trace-schema.md`:
//!
//! - **CPU threads** (one location per OS thread that called the plugin): the API calls
//!   (`ncclGroup`, `ncclAllReduce`, …), kernel launches, the enqueue of each task, and
//!   on proxy threads the proxy's idle, sleep and append intervals. Intervals that do not
//!   nest (e.g. net-plugin requests) go to extra lanes of the thread.
//! - per **communicator rank**, in a location group of its own:
//!   - an **ops stream**: every collective and point-to-point operation in enqueue order
//!     (the order NCCL runs them on the communicator's stream), from the start of its
//!     execution (first kernel channel, else enqueue) to its last kernel channel or proxy
//!     operation, with collective begin/end records on the NCCL communicator and message
//!     records for sends and receives;
//!   - a stream per **channel** with the GPU kernel intervals (GPU clock converted to host
//!     time) and kernel phases;
//!   - **proxy lanes** per (channel, peer, direction) with proxy operations, their steps
//!     and the steps' wait states.
//! - **gaps**: records a full ring dropped show as "NCCL records lost" intervals on the
//!   thread that lost them.
//!
//! The Scalasca-safe variant writes only the CPU-thread locations, with plain Enter/Leave
//! and attributes.

mod attributes;
mod defs;
mod event_file;
mod lanes;
mod writer;

pub use defs::{Attr, ATTRIBUTES};
pub use writer::{ClockSample, EVENT_CHUNK_BYTES};

use super::{CycleEnd, Sink, SinkContext};
use crate::context::ContextInfo;
use crate::event::{Event, Func, Kind, StateArg};
use crate::kinds::Timeline as KindTimeline;
use crate::model::{Closed, FinishedEvent, Gap, OpenView, Owner, Parent};
use attributes::{
    bytes_of, func_of, is_rooted, op_role, push_op_identity, push_op_key, put_attrs, Attributes,
    Val,
};
use defs::{Definitions, LocationKind, Role};
use lanes::{Interval, LaneOutput, Lanes};
use nccl_profiler_abi::state;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use writer::{Loc, Writer};

/// Lanes one timeline may open before intervals are squeezed (and counted).
const MAX_LANES: usize = 64;
/// An operation whose task has ended and that has no open child is complete once nothing
/// happened to it for this long (children may still be on their way from another thread).
const OP_QUIET_NS: u64 = 50_000_000;
/// How long an operation waits for its first kernel channel at most. NCCL reports a
/// channel when the GPU starts it, which can be long after the enqueue (the application's
/// own kernels run first); an operation waits for that unless a later operation of its
/// rank has shown a kernel already (this one's records were lost).
const OP_KERNEL_WAIT_NS: u64 = 10_000_000_000;
/// Operations of one communicator rank that may wait for their first kernel channel; the
/// oldest is written without its kernels beyond that.
const MAX_OPS_AWAITING_KERNELS: usize = 4096;

/// How often the events written so far are put on the disk (processed time), with the
/// definitions snapshot and clock pairs that make them readable: a killed process loses
/// about this much of its trace.
const PERSIST_INTERVAL_NS: u64 = 1_000_000_000;
/// Finished intervals a timeline may hold back before they are placed regardless.
const MAX_PENDING: usize = 1 << 16;

/// What the sink needs to know beyond the events.
#[derive(Clone, Debug)]
pub struct Otf2Options {
    /// Only CPU-thread locations, plain Enter/Leave with attributes.
    pub scalasca_safe: bool,
    /// NCCL will report KernelCh events (an operation then waits for all its channels).
    pub kernel_channels: bool,
    /// Write each proxy step's wait states as intervals nested in the step.
    pub step_states: bool,
    /// The process's index in the job (launcher rank), else its pid.
    pub process_index: u32,
    /// How the process is named in the trace.
    pub process_name: String,
    pub host: String,
}

/// Vectors of written items, kept to be reused by the next items.
#[derive(Default)]
struct Spares {
    attrs: Vec<Vec<(Attr, Val)>>,
    inner: Vec<Vec<(u64, u64, u32)>>,
}

/// Proxy-step states whose wait region is cached (NCCL's are below 32).
const WAIT_REGION_STATES: usize = 32;

/// Attributes and inner parts an item is allocated room for.
const ATTRS_CAPACITY: usize = 24;
const INNER_CAPACITY: usize = 8;
/// Spare vectors kept of each sort (more are freed): enough for the items of a large
/// pass, which all come back when the pass places them.
const MAX_SPARES: usize = 1 << 16;

impl Spares {
    fn attrs(&mut self) -> Vec<(Attr, Val)> {
        // Room for the most attributes any record carries: a reused vector never grows.
        self.attrs
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(ATTRS_CAPACITY))
    }

    fn inner(&mut self) -> Vec<(u64, u64, u32)> {
        self.inner
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(INNER_CAPACITY))
    }

    fn give_back(&mut self, mut attrs: Vec<(Attr, Val)>, mut inner: Vec<(u64, u64, u32)>) {
        if attrs.capacity() > 0 && self.attrs.len() < MAX_SPARES {
            attrs.clear();
            self.attrs.push(attrs);
        }
        if inner.capacity() > 0 && self.inner.len() < MAX_SPARES {
            inner.clear();
            self.inner.push(inner);
        }
    }
}

/// One interval waiting for its lane.
struct Item {
    start: u64,
    stop: u64,
    region: u32,
    leaf: bool,
    /// Coll/P2p enqueues of one plan (see [`Interval::chains`]).
    chains: bool,
    attrs: Vec<(Attr, Val)>,
    /// Consecutive parts inside a leaf (e.g. a proxy step's wait states).
    inner: Vec<(u64, u64, u32)>,
}

impl Interval for Item {
    fn start(&self) -> u64 {
        self.start
    }
    fn stop(&self) -> u64 {
        self.stop
    }
    fn region(&self) -> u32 {
        self.region
    }
    fn is_leaf(&self) -> bool {
        self.leaf
    }
    fn chains(&self) -> bool {
        self.chains
    }
}

/// The timelines whose intervals go through lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Family {
    /// An OS thread (by tid).
    Thread(i32),
    /// One proxy connection of a communicator rank.
    Proxy {
        owner: Owner,
        channel: u8,
        peer: i32,
        send: bool,
    },
    /// Proxy steps whose operation is unknown.
    Steps(Owner),
}

struct Timeline {
    lanes: Lanes<Item>,
    locs: Vec<Loc>,
    name: String,
    group: u32,
}

/// Writes placed intervals of one timeline, opening lane locations on demand.
struct Placer<'a> {
    w: &'a mut Writer,
    locs: &'a mut Vec<Loc>,
    name: &'a str,
    group: u32,
    spares: &'a mut Spares,
}

impl Placer<'_> {
    fn loc(&mut self, lane: usize) -> Loc {
        while self.locs.len() <= lane {
            let name = match self.locs.len() {
                0 => self.name.to_owned(),
                n => format!("{} (lane {})", self.name, n + 1),
            };
            let loc = self
                .w
                .add_location(&name, LocationKind::CpuThread, self.group);
            self.locs.push(loc);
        }
        self.locs[lane]
    }
}

impl LaneOutput<Item> for Placer<'_> {
    fn open(&mut self, lane: usize, item: &Item, start: u64, stop: u64) {
        let loc = self.loc(lane);
        put_attrs(self.w, &item.attrs);
        self.w.enter(loc, start, item.region);
        if item.leaf {
            for &(s, e, region) in &item.inner {
                let s = s.clamp(start, stop);
                let e = e.clamp(s, stop);
                self.w.enter(loc, s, region);
                self.w.leave(loc, e, region);
            }
            self.w.leave(loc, stop, item.region);
        }
    }

    fn close(&mut self, lane: usize, time: u64, region: u32) {
        let loc = self.loc(lane);
        self.w.leave(loc, time, region);
    }

    fn done(&mut self, item: Item) {
        self.spares.give_back(item.attrs, item.inner);
    }
}

/// An operation on a communicator rank's ops stream, until it is complete.
struct PendingOp {
    handle: u64,
    event: Event,
    enqueue: u64,
    task_stop: u64,
    first_kernel: Option<u64>,
    last_child: Option<u64>,
    kernels: u32,
    last_activity: u64,
}

/// The kernel channels an operation announced.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Channels {
    None,
    /// A collective's `nChannels`.
    Exactly(u8),
    /// A p2p has one at least; NCCL does not always keep its count (v4's shim leaves it
    /// uninitialised, 2.30 counts otherwise than it reports).
    AtLeastOne,
}

/// The device-side locations of one communicator rank (one context).
struct RankStreams {
    info: Arc<ContextInfo>,
    group: u32,
    comm: u32,
    ops_loc: Option<Loc>,
    ops: VecDeque<PendingOp>,
    /// Operations taken from the front of `ops` so far: the operation with sequence
    /// number `n` (counted from 0 in enqueue order) is `ops[n - written]`.
    written: u64,
    /// The latest sequence number whose operation has shown a kernel channel: an earlier
    /// one still without any will not get one (its channels ran before that one's).
    latest_with_kernel: Option<u64>,
    /// The communicator was finalized: NCCL drops the kernel channels it had not reported.
    finalized: bool,
    last_end: u64,
    channels: HashMap<u8, Loc>,
}

/// What children told us about a task before the task itself finished.
#[derive(Default, Clone, Copy)]
struct EarlyChild {
    first_kernel: Option<u64>,
    last_child: Option<u64>,
    kernels: u32,
}

/// Counts of what the writer had to repair or leave out.
#[derive(Default, Debug, Clone, Copy)]
pub struct Otf2Stats {
    pub events_written: u64,
    pub failed_calls: u64,
    pub raised_timestamps: u64,
    pub clipped_intervals: u64,
    pub late_children: u64,
    /// Operations written without any of the kernel channels they announced.
    pub ops_without_kernels: u64,
    pub held_back_overflow: u64,
    /// Writes of event files, the definitions snapshot or its clock pairs that failed.
    pub failed_writes: u64,
    /// Definition snapshots written.
    pub snapshots: u64,
}

pub struct Otf2Sink {
    w: Writer,
    options: Otf2Options,
    timelines: HashMap<Family, Timeline>,
    /// Open ProxyOps → the proxy timeline of their steps.
    op_family: HashMap<u64, Family>,
    ranks: HashMap<u64, RankStreams>,
    /// Task handle → its context and sequence number on that context's ops stream, while
    /// the operation waits there.
    task_context: HashMap<u64, (u64, u64)>,
    early_children: HashMap<u64, EarlyChild>,
    /// KernelPhase intervals waiting for their KernelCh: (start, stop, region).
    phases: HashMap<u64, Vec<(u64, u64, u32)>>,
    /// Proxy threads that reported Idle and not yet Active: since when.
    idle_since: HashMap<i32, u64>,
    contexts: HashMap<u64, Arc<ContextInfo>>,
    stats: Otf2Stats,
    last_seen: u64,
    /// When the events were last put on the disk (processed time).
    last_persist: u64,
    spares: Spares,
    /// Region ids of kernel channels by their operation's function.
    kernel_regions: HashMap<Option<Func>, u32>,
    /// Region ids of proxy-step wait states by state number, once looked up.
    wait_regions: [Option<Option<u32>>; WAIT_REGION_STATES],
    pid: i32,
    attributes: Attributes,
}

impl Otf2Sink {
    pub fn create(dir: &Path, options: Otf2Options) -> Result<Otf2Sink, String> {
        let defs = Definitions::new(options.process_index, &options.process_name, &options.host);
        let start = ClockSample {
            monotonic_ns: crate::clock::now_ns(),
            realtime_ns: crate::clock::realtime_ns(),
        };
        let w = Writer::open(dir, &options.host, defs, start).map_err(|e| e.0)?;
        Ok(Otf2Sink {
            w,
            options,
            timelines: HashMap::default(),
            op_family: HashMap::default(),
            ranks: HashMap::default(),
            task_context: HashMap::default(),
            early_children: HashMap::default(),
            phases: HashMap::default(),
            idle_since: HashMap::default(),
            contexts: HashMap::default(),
            stats: Otf2Stats::default(),
            last_seen: 0,
            last_persist: 0,
            spares: Spares::default(),
            kernel_regions: HashMap::default(),
            wait_regions: [None; WAIT_REGION_STATES],
            pid: std::process::id() as i32,
            attributes: Attributes::default(),
        })
    }

    pub fn path(&self) -> &Path {
        self.w.path()
    }

    /// A communicator rank was initialised (or learned its hash later).
    fn set_comm(&mut self, context: u64, info: &Arc<ContextInfo>) {
        self.contexts.insert(context, Arc::clone(info));
        if let Some(rank) = self.ranks.get_mut(&context) {
            rank.info = Arc::clone(info);
        }
    }

    /// A communicator rank was finalized: its operations wait for no more kernel channels
    /// (NCCL drops those it had not reported).
    fn mark_finalized(&mut self, context: u64) {
        if let Some(rank) = self.ranks.get_mut(&context) {
            rank.finalized = true;
        }
    }

    /// A ProxyOp started: its steps will go to its connection's lanes.
    fn proxy_op_started(&mut self, handle: u64, owner: Owner, event: &Event) {
        if let Event::ProxyOp(op) = event {
            self.op_family.insert(
                handle,
                Family::Proxy {
                    owner,
                    channel: op.channel,
                    peer: op.peer,
                    send: op.is_send,
                },
            );
        }
    }

    /// Records a ring dropped on thread `tid` between `first` and `last`.
    fn record_gap(&mut self, tid: i32, first: u64, last: u64, dropped_total: u64) {
        let region = self.w.defs.static_region(
            "NCCL records lost",
            Role::Artificial,
            "the plugin's buffer for this thread was full: records in this interval were dropped",
        );
        self.push(
            Family::Thread(tid),
            Item {
                start: first,
                stop: last.max(first),
                region,
                leaf: true,
                chains: false,
                attrs: vec![(Attr::Lost, Val::U(dropped_total))],
                inner: Vec::new(),
            },
        );
    }

    /// One finished event.
    fn record(&mut self, e: &FinishedEvent) {
        self.last_seen = self.last_seen.max(e.stop_ns);
        match e.kind {
            Kind::GroupApi
            | Kind::CollApi
            | Kind::P2pApi
            | Kind::KernelLaunch
            | Kind::Group
            | Kind::CeColl
            | Kind::CeSync
            | Kind::CeBatch
            | Kind::NetPlugin => self.thread_interval(e),
            Kind::Coll | Kind::P2p => {
                self.thread_interval(e);
                if !self.options.scalasca_safe {
                    self.task(e);
                }
            }
            Kind::ProxyCtrl => self.proxy_ctrl(e),
            Kind::ProxyOp => {
                let family = self.op_family.remove(&e.handle);
                if !self.options.scalasca_safe {
                    self.child_done(e, e.stop_ns, None);
                    if let Some(family) = family {
                        let item = self.proxy_op_item(e);
                        self.push(family, item);
                    }
                }
            }
            Kind::ProxyStep => {
                if !self.options.scalasca_safe {
                    let family = match e.parent {
                        Parent::Local { handle, .. } => self.op_family.get(&handle).copied(),
                        _ => None,
                    }
                    .unwrap_or(Family::Steps(e.owner));
                    let item = self.step_item(e);
                    self.push(family, item);
                }
            }
            Kind::KernelCh => {
                if !self.options.scalasca_safe {
                    self.kernel(e);
                }
            }
            Kind::KernelPhase => {
                if !self.options.scalasca_safe {
                    self.phase(e);
                }
            }
        }
    }

    fn push(&mut self, family: Family, item: Item) {
        if let Some(timeline) = self.timelines.get_mut(&family) {
            timeline.lanes.push(item);
            if timeline.lanes.pending() <= MAX_PENDING {
                return;
            }
        } else {
            self.new_timeline(family, item);
        }
        let timeline = self.timelines.get_mut(&family).expect("exists");
        if timeline.lanes.pending() > MAX_PENDING {
            // Something stays open far too long: place what we have rather than grow.
            self.stats.held_back_overflow += 1;
            let mut placer = Placer {
                w: &mut self.w,
                locs: &mut timeline.locs,
                name: &timeline.name,
                group: timeline.group,
                spares: &mut self.spares,
            };
            timeline.lanes.flush(u64::MAX, &mut placer);
        }
    }

    fn new_timeline(&mut self, family: Family, item: Item) {
        let (name, group) = self.timeline_name(family);
        let mut lanes = Lanes::new(MAX_LANES);
        lanes.push(item);
        self.timelines.insert(
            family,
            Timeline {
                lanes,
                locs: Vec::new(),
                name,
                group,
            },
        );
    }

    fn timeline_name(&mut self, family: Family) -> (String, u32) {
        match family {
            Family::Thread(tid) => (format!("thread {tid}"), Definitions::PROCESS_GROUP),
            Family::Proxy {
                owner,
                channel,
                peer,
                send,
            } => {
                let (prefix, group) = self.owner_prefix(owner);
                let direction = if send { "send to" } else { "recv from" };
                (
                    format!("{prefix} proxy ch{channel} {direction} {peer}"),
                    group,
                )
            }
            Family::Steps(owner) => {
                let (prefix, group) = self.owner_prefix(owner);
                (format!("{prefix} proxy steps"), group)
            }
        }
    }

    /// How the locations of an owner are named, and their location group.
    fn owner_prefix(&mut self, owner: Owner) -> (String, u32) {
        match owner {
            Owner::Local(context) => {
                let rank = self.rank_streams(context);
                (rank_label(&rank.info), rank.group)
            }
            // Another process's communicator rank, known by its context value.
            Owner::Foreign { pid, context } => (
                format!("PXN for pid {pid} ctx {context:#x}"),
                Definitions::PROCESS_GROUP,
            ),
            Owner::Unknown => ("unknown comm".to_owned(), Definitions::PROCESS_GROUP),
        }
    }

    fn rank_streams(&mut self, context: u64) -> &mut RankStreams {
        if !self.ranks.contains_key(&context) {
            let info = self
                .contexts
                .get(&context)
                .cloned()
                .unwrap_or_else(|| Arc::new(ContextInfo::default()));
            let label = rank_label(&info);
            let group = self.w.defs.accelerator_group(&label);
            let (key, name) = comm_key_and_name(context, &info);
            let comm = self.w.defs.comm(key, &name);
            self.ranks.insert(
                context,
                RankStreams {
                    info,
                    group,
                    comm,
                    ops_loc: None,
                    ops: VecDeque::new(),
                    written: 0,
                    latest_with_kernel: None,
                    finalized: false,
                    last_end: 0,
                    channels: HashMap::default(),
                },
            );
        }
        self.ranks.get_mut(&context).expect("inserted above")
    }

    fn thread_interval(&mut self, e: &FinishedEvent) {
        let region = self.attributes.thread_region_id(&mut self.w.defs, e);
        let mut attrs = self.spares.attrs();
        self.attributes
            .push_event_attrs(&mut self.w.defs, &mut attrs, e);
        if e.closed != Closed::Stopped {
            attrs.push((Attr::Closed, Val::S(e.closed.name())));
        }
        if e.kind == Kind::GroupApi {
            // From GroupEndApiStart to the stop: launching the group's work. It nests in
            // the group (same stop), and the launches nest in it.
            if let Some(s) = e
                .states
                .iter()
                .find(|s| s.state == state::GROUP_END_API_START)
            {
                let launch = self.w.defs.static_region(
                    "ncclGroupEnd launch",
                    Role::Function,
                    "from the outermost ncclGroupEnd to the end of the group's launches",
                );
                let start = s.time_ns.clamp(e.start_ns, e.stop_ns);
                self.push(
                    Family::Thread(e.start_tid),
                    Item {
                        start,
                        stop: e.stop_ns,
                        region: launch,
                        leaf: false,
                        chains: false,
                        attrs: Vec::new(),
                        inner: Vec::new(),
                    },
                );
            }
        }
        self.push(
            Family::Thread(e.start_tid),
            Item {
                start: e.start_ns,
                stop: e.stop_ns,
                region,
                leaf: false,
                chains: e.kind.facts().is_task,
                attrs,
                inner: Vec::new(),
            },
        );
    }

    fn proxy_op_item(&mut self, e: &FinishedEvent) -> Item {
        let Event::ProxyOp(op) = e.event else {
            unreachable!("called for ProxyOps only")
        };
        let name = if op.is_send {
            "proxy send"
        } else {
            "proxy recv"
        };
        let region = self.w.defs.static_region(
            name,
            Role::DataTransfer,
            "a proxy operation: one channel's transfer with one peer for one NCCL operation",
        );
        let mut attrs = self.spares.attrs();
        attrs.extend([
            (Attr::Channel, Val::U(u64::from(op.channel))),
            (Attr::Peer, Val::I(i64::from(op.peer))),
            (Attr::NSteps, Val::U(op.n_steps.max(0) as u64)),
            (Attr::ChunkSize, Val::U(op.chunk_size.max(0) as u64)),
            (Attr::Rank, Val::I(i64::from(e.rank))),
        ]);
        if op.pid != self.pid {
            attrs.push((Attr::Pid, Val::I(i64::from(op.pid))));
        }
        match e.parent {
            Parent::Foreign { value, .. } => attrs.push((Attr::ParentValue, Val::U(value))),
            Parent::Local { handle, .. } => {
                let task = self
                    .pending_op(handle)
                    .map(|op| op.event)
                    .or(e.parent_event);
                if let Some(task) = task {
                    push_op_key(&mut attrs, &task, false);
                }
            }
            _ => {}
        }
        if let Some(comm) = &e.comm {
            attrs.push((Attr::CommHash, Val::U(comm.comm_hash)));
        }
        if e.closed != Closed::Stopped {
            attrs.push((Attr::Closed, Val::S(e.closed.name())));
        }
        Item {
            start: e.start_ns,
            stop: e.stop_ns,
            region,
            leaf: false,
            chains: false,
            attrs,
            inner: Vec::new(),
        }
    }

    fn pending_op(&self, task: u64) -> Option<&PendingOp> {
        let &(context, seq) = self.task_context.get(&task)?;
        let rank = self.ranks.get(&context)?;
        let op = rank
            .ops
            .get(usize::try_from(seq.checked_sub(rank.written)?).ok()?)?;
        (op.handle == task).then_some(op)
    }

    fn pending_op_mut(&mut self, task: u64) -> Option<&mut PendingOp> {
        let &(context, seq) = self.task_context.get(&task)?;
        let rank = self.ranks.get_mut(&context)?;
        let index = usize::try_from(seq.checked_sub(rank.written)?).ok()?;
        let op = rank.ops.get_mut(index)?;
        (op.handle == task).then_some(op)
    }

    fn step_item(&mut self, e: &FinishedEvent) -> Item {
        let Event::ProxyStep { step } = e.event else {
            unreachable!("called for ProxySteps only")
        };
        let send = e.states.iter().any(|s| {
            matches!(
                s.state,
                state::PROXY_STEP_SEND_GPU_WAIT
                    | state::PROXY_STEP_SEND_WAIT
                    | state::PROXY_STEP_SEND_PEER_WAIT_V4
            )
        });
        let region = self.w.defs.static_region(
            if send { "send step" } else { "recv step" },
            Role::DataTransfer,
            "one proxy step (a slice of a proxy operation through the network)",
        );
        let mut attrs = self.spares.attrs();
        attrs.push((Attr::Step, Val::U(step.max(0) as u64)));
        // Only SendWait and RecvFlushWait carry this step's own size (ABI notes §3.7).
        if let Some(size) = e.states.iter().find_map(|s| match (s.state, s.arg) {
            (
                state::PROXY_STEP_SEND_WAIT | state::PROXY_STEP_RECV_FLUSH_WAIT,
                StateArg::TransSize(n),
            ) => Some(n),
            _ => None,
        }) {
            attrs.push((Attr::TransSize, Val::U(size)));
        }
        if e.closed != Closed::Stopped {
            attrs.push((Attr::Closed, Val::S(e.closed.name())));
        }
        // Each state lasts until the next different one, the last until the stop.
        let mut inner = self.spares.inner();
        let mut current: Option<(i32, u64)> = None;
        let states = if self.options.step_states {
            &e.states[..]
        } else {
            &[]
        };
        for s in states {
            if current.is_some_and(|(c, _)| c == s.state) {
                continue;
            }
            if let Some((c, since)) = current {
                if let Some(region) = self.wait_region(c) {
                    inner.push((since, s.time_ns, region));
                }
            }
            current = Some((s.state, s.time_ns));
        }
        if let Some((c, since)) = current {
            if let Some(region) = self.wait_region(c) {
                inner.push((since, e.stop_ns, region));
            }
        }
        Item {
            start: e.start_ns,
            stop: e.stop_ns,
            region,
            leaf: true,
            chains: false,
            attrs,
            inner,
        }
    }

    fn wait_region(&mut self, step_state: i32) -> Option<u32> {
        let cached = usize::try_from(step_state)
            .ok()
            .filter(|&index| index < WAIT_REGION_STATES);
        if let Some(region) = cached.and_then(|index| self.wait_regions[index]) {
            return region;
        }
        let region = self.define_wait_region(step_state);
        if let Some(index) = cached {
            self.wait_regions[index] = Some(region);
        }
        region
    }

    fn define_wait_region(&mut self, step_state: i32) -> Option<u32> {
        let (name, description) = match step_state {
            state::PROXY_STEP_SEND_GPU_WAIT => {
                ("send: GPU wait", "waiting for the GPU to fill the buffer")
            }
            state::PROXY_STEP_SEND_PEER_WAIT_V4 => (
                "send: peer wait",
                "data ready; waiting for the receiver's credit",
            ),
            state::PROXY_STEP_SEND_WAIT => (
                "send: network wait",
                "send posted; waiting for the network to complete it",
            ),
            state::PROXY_STEP_RECV_WAIT => {
                ("recv: network wait", "receive posted; waiting for data")
            }
            state::PROXY_STEP_RECV_FLUSH_WAIT => {
                ("recv: flush", "data received; flushing it to the GPU")
            }
            state::PROXY_STEP_RECV_GPU_WAIT => {
                ("recv: GPU wait", "waiting for the GPU to consume the data")
            }
            _ => return None,
        };
        Some(
            self.w
                .defs
                .static_region(name, Role::DataTransfer, description),
        )
    }

    fn proxy_ctrl(&mut self, e: &FinishedEvent) {
        let tid = e.start_tid;
        let find = |wanted: i32| e.states.iter().find(|s| s.state == wanted);
        if let (Some(sleep), wakeup) = (
            find(state::PROXY_CTRL_SLEEP),
            find(state::PROXY_CTRL_WAKEUP),
        ) {
            let region = self.w.defs.static_region(
                "proxy sleep",
                Role::Artificial,
                "the proxy thread waits for work",
            );
            let stop = wakeup.map_or(e.stop_ns, |w| w.time_ns);
            self.push(
                Family::Thread(tid),
                leaf_item(sleep.time_ns, stop, region, Vec::new()),
            );
        }
        if let Some(append) = find(state::PROXY_CTRL_APPEND) {
            let region = self.w.defs.static_region(
                "proxy append",
                Role::Artificial,
                "the proxy thread takes posted operations",
            );
            let end = find(state::PROXY_CTRL_APPEND_END);
            let appended = end.map_or(0, |s| match s.arg {
                StateArg::Appended(n) => n,
                _ => 0,
            });
            let stop = end.map_or(e.stop_ns, |s| s.time_ns);
            self.push(
                Family::Thread(tid),
                leaf_item(
                    append.time_ns,
                    stop,
                    region,
                    vec![(Attr::Appended, Val::I(i64::from(appended)))],
                ),
            );
        }
        if let Some(idle) = find(state::PROXY_CTRL_IDLE) {
            self.idle_since.entry(tid).or_insert(idle.time_ns);
        }
        if let Some(active) = find(state::PROXY_CTRL_ACTIVE) {
            if let Some(since) = self.idle_since.remove(&tid) {
                self.push_idle(tid, since, active.time_ns);
            }
        }
    }

    fn push_idle(&mut self, tid: i32, since: u64, until: u64) {
        let region = self.w.defs.static_region(
            "proxy idle",
            Role::Artificial,
            "the proxy thread has no operation in progress",
        );
        self.push(
            Family::Thread(tid),
            Item {
                start: since,
                stop: until.max(since),
                region,
                leaf: false,
                chains: false,
                attrs: Vec::new(),
                inner: Vec::new(),
            },
        );
    }

    /// A Coll or P2p task: the operation joins its communicator rank's ops stream.
    fn task(&mut self, e: &FinishedEvent) {
        let Owner::Local(context) = e.owner else {
            return;
        };
        let early = self.early_children.remove(&e.handle).unwrap_or_default();
        let rank = self.rank_streams(context);
        let seq = rank.written + rank.ops.len() as u64;
        if early.kernels > 0 {
            rank.latest_with_kernel = Some(seq);
        }
        rank.ops.push_back(PendingOp {
            handle: e.handle,
            event: e.event,
            enqueue: e.start_ns,
            task_stop: e.stop_ns,
            first_kernel: early.first_kernel,
            last_child: early.last_child,
            kernels: early.kernels,
            last_activity: e.stop_ns.max(early.last_child.unwrap_or(0)),
        });
        self.task_context.insert(e.handle, (context, seq));
    }

    /// A child (ProxyOp or KernelCh) of a task finished: it joins its operation waiting on
    /// the ops stream, or is kept for a task that has not ended yet (an early child), or
    /// comes too late (its operation was written).
    fn child_done(&mut self, e: &FinishedEvent, stop: u64, kernel_start: Option<u64>) {
        let Parent::Local { handle, kind } = e.parent else {
            return;
        };
        if !kind.facts().is_task {
            return;
        }
        let apply = |first: &mut Option<u64>, last: &mut Option<u64>, kernels: &mut u32| {
            *last = Some(last.map_or(stop, |l| l.max(stop)));
            if let Some(k) = kernel_start {
                *first = Some(first.map_or(k, |f| f.min(k)));
                *kernels += 1;
            }
        };
        if let Some(op) = self.pending_op_mut(handle) {
            apply(&mut op.first_kernel, &mut op.last_child, &mut op.kernels);
            op.last_activity = op.last_activity.max(stop);
            if kernel_start.is_some() {
                let (context, seq) = self.task_context[&handle];
                let rank = self.ranks.get_mut(&context).expect("a pending op's rank");
                rank.latest_with_kernel = rank.latest_with_kernel.max(Some(seq));
            }
            return;
        }
        if e.parent_event.is_none() {
            self.stats.late_children += 1;
            return;
        }
        if self.early_children.len() < MAX_PENDING {
            let early = self.early_children.entry(handle).or_default();
            apply(
                &mut early.first_kernel,
                &mut early.last_child,
                &mut early.kernels,
            );
        } else {
            self.stats.late_children += 1;
        }
    }

    fn kernel(&mut self, e: &FinishedEvent) {
        let Owner::Local(context) = e.owner else {
            return;
        };
        let Event::KernelCh { channel, .. } = e.event else {
            return;
        };
        let (start, stop) = e
            .gpu
            .map_or((e.start_ns, e.stop_ns), |g| (g.start_ns, g.stop_ns));
        self.child_done(e, stop, Some(start));
        let identity = match e.parent {
            Parent::Local { handle, .. } => self.pending_op(handle).map(|op| op.event),
            _ => None,
        }
        .or(e.parent_event);
        let func = identity.map(|ev| func_of(&ev));
        let region = match self.kernel_regions.get(&func) {
            Some(&region) => region,
            None => {
                let name = func.map_or("NCCL", Func::as_str);
                let region = self.w.defs.region(
                    &format!("{name} kernel"),
                    Role::Code,
                    "GPU time of one channel of an NCCL kernel (GPU clock converted to host time)",
                );
                self.kernel_regions.insert(func, region);
                region
            }
        };
        let phases = if self.phases.is_empty() {
            None
        } else {
            self.phases.remove(&e.handle)
        };
        let rank = self.rank_streams(context);
        let loc = match rank.channels.get(&channel) {
            Some(&loc) => loc,
            None => {
                let (group, label) = (rank.group, rank_label(&rank.info));
                let loc = self.w.add_location(
                    &format!("{label} channel {channel}"),
                    LocationKind::AcceleratorStream,
                    group,
                );
                self.rank_streams(context).channels.insert(channel, loc);
                loc
            }
        };
        let last = self.w.last_time(loc);
        let s = start.max(last);
        let t = stop.max(s);
        if s != start {
            self.stats.clipped_intervals += 1;
        }
        let mut attrs = self.spares.attrs();
        attrs.extend([
            (Attr::Channel, Val::U(u64::from(channel))),
            (Attr::Rank, Val::I(i64::from(e.rank))),
        ]);
        if let Some(ev) = identity {
            push_op_key(&mut attrs, &ev, true);
        }
        if let Some(error) = e.gpu.and_then(|g| g.error_ns) {
            attrs.push((Attr::GpuClockError, Val::U(error)));
        }
        put_attrs(&mut self.w, &attrs);
        self.spares.give_back(attrs, Vec::new());
        self.w.enter(loc, s, region);
        let mut at = s;
        for (ps, pe, pregion) in phases.unwrap_or_default() {
            let ps = ps.clamp(at, t);
            let pe = pe.clamp(ps, t);
            self.w.enter(loc, ps, pregion);
            self.w.leave(loc, pe, pregion);
            at = pe;
        }
        self.w.leave(loc, t, region);
    }

    fn phase(&mut self, e: &FinishedEvent) {
        let Event::KernelPhase { phase, .. } = e.event else {
            return;
        };
        let Some(gpu) = e.gpu else {
            return;
        };
        let Parent::Local { handle, .. } = e.parent else {
            return;
        };
        let name = match phase {
            crate::event::Phase::InitialSync => "kernel phase: initial sync",
            crate::event::Phase::Compute => "kernel phase: compute",
            crate::event::Phase::FinalSync => "kernel phase: final sync",
            crate::event::Phase::Unknown => "kernel phase",
        };
        let region =
            self.w
                .defs
                .static_region(name, Role::Code, "a phase of a kernel channel (NCCL 2.31+)");
        let phases = self.phases.entry(handle).or_default();
        if phases.len() < 16 {
            phases.push((gpu.start_ns, gpu.stop_ns, region));
        }
    }

    /// After each collector pass: places what no open event can precede any more, and
    /// writes the operations that completed.
    fn place<'a>(&mut self, open: &mut dyn Iterator<Item = OpenView<'a>>, now: u64) {
        let mut watermarks: HashMap<Family, u64> = HashMap::default();
        let mut busy_tasks: HashSet<u64> = HashSet::default();
        for view in open {
            let family = match view.kind.facts().timeline {
                KindTimeline::ProxyConnection => match view.event {
                    Event::ProxyOp(op) => Some(Family::Proxy {
                        owner: view.owner,
                        channel: op.channel,
                        peer: op.peer,
                        send: op.is_send,
                    }),
                    _ => None,
                },
                KindTimeline::ParentProxyOp => Some(match view.parent {
                    Parent::Local { handle, .. } => self
                        .op_family
                        .get(&handle)
                        .copied()
                        .unwrap_or(Family::Steps(view.owner)),
                    _ => Family::Steps(view.owner),
                }),
                KindTimeline::GpuChannel => None,
                KindTimeline::CallingThread => Some(Family::Thread(view.start_tid)),
            };
            if let Some(family) = family {
                let mark = watermarks.entry(family).or_insert(u64::MAX);
                *mark = (*mark).min(view.start_ns);
            }
            if matches!(view.kind, Kind::ProxyOp | Kind::KernelCh) {
                if let Parent::Local { handle, .. } = view.parent {
                    busy_tasks.insert(handle);
                }
            }
        }
        for (&tid, &since) in &self.idle_since {
            let mark = watermarks.entry(Family::Thread(tid)).or_insert(u64::MAX);
            *mark = (*mark).min(since);
        }
        for (family, timeline) in &mut self.timelines {
            let mark = watermarks.get(family).copied().unwrap_or(u64::MAX);
            let mut placer = Placer {
                w: &mut self.w,
                locs: &mut timeline.locs,
                name: &timeline.name,
                group: timeline.group,
                spares: &mut self.spares,
            };
            timeline.lanes.flush(mark, &mut placer);
        }
        self.write_completed_ops(&busy_tasks, now, false);
        self.keep_snapshot(now);
    }

    /// Every [`PERSIST_INTERVAL_NS`], puts the events written so far on the disk, readable
    /// without the end of the trace (see `Writer::persist`).
    fn keep_snapshot(&mut self, now: u64) {
        if now.saturating_sub(self.last_persist) < PERSIST_INTERVAL_NS {
            return;
        }
        self.last_persist = now;
        let sample = ClockSample {
            monotonic_ns: crate::clock::now_ns(),
            realtime_ns: crate::clock::realtime_ns(),
        };
        self.w.persist(sample);
    }

    fn write_completed_ops(&mut self, busy: &HashSet<u64>, now: u64, finishing: bool) {
        let kernel_channels = self.options.kernel_channels;
        let contexts: Vec<u64> = self.ranks.keys().copied().collect();
        for context in contexts {
            loop {
                let rank = self.ranks.get_mut(&context).expect("listed");
                let Some(op) = rank.ops.front() else {
                    break;
                };
                // KernelCh exists from profiler API v3 on.
                let announced = match op.event {
                    _ if !kernel_channels || rank.info.version < 3 => Channels::None,
                    Event::Coll(c) if c.n_channels > 0 => Channels::Exactly(c.n_channels),
                    Event::P2p(_) => Channels::AtLeastOne,
                    _ => Channels::None,
                };
                let all_kernels =
                    matches!(announced, Channels::Exactly(n) if op.kernels >= u32::from(n));
                let quiet = now.saturating_sub(op.last_activity);
                // NCCL reports a kernel channel when the GPU starts it: until the first
                // one comes, silence means the GPU has not got there yet, unless a later
                // operation of this rank has shown a kernel (this one's were lost).
                let awaits_first_kernel = announced != Channels::None
                    && op.kernels == 0
                    && !rank.finalized
                    && rank
                        .latest_with_kernel
                        .is_none_or(|latest| latest < rank.written)
                    && quiet < OP_KERNEL_WAIT_NS
                    && rank.ops.len() <= MAX_OPS_AWAITING_KERNELS;
                let complete = finishing
                    || (!busy.contains(&op.handle)
                        && (all_kernels || (quiet >= OP_QUIET_NS && !awaits_first_kernel)));
                if !complete {
                    break;
                }
                if announced != Channels::None && op.kernels == 0 {
                    self.stats.ops_without_kernels += 1;
                }
                let op = rank.ops.pop_front().expect("front exists");
                rank.written += 1;
                self.task_context.remove(&op.handle);
                self.write_op(context, op);
            }
        }
    }

    fn write_op(&mut self, context: u64, op: PendingOp) {
        let (comm, comm_hash, my_rank, n_ranks) = {
            let rank = self.rank_streams(context);
            (
                rank.comm,
                rank.info.comm_hash,
                rank.info.rank,
                rank.info.n_ranks,
            )
        };
        let loc = match self.ranks[&context].ops_loc {
            Some(loc) => loc,
            None => {
                let (group, label) = {
                    let rank = &self.ranks[&context];
                    (rank.group, rank_label(&rank.info))
                };
                let loc = self.w.add_location(
                    &format!("{label} ops"),
                    LocationKind::AcceleratorStream,
                    group,
                );
                let id = self.w.defs.location_ids()[loc.0 as usize];
                self.w.defs.comm_member(comm, my_rank, id);
                self.rank_streams(context).ops_loc = Some(loc);
                loc
            }
        };
        let last_end = self.ranks[&context].last_end;
        // Execution starts with the first kernel channel (never before the enqueue), and
        // ends with the last kernel channel or proxy operation (the enqueue's end without).
        let begin = op.first_kernel.map_or(op.enqueue, |k| k.max(op.enqueue));
        let end = op.last_child.unwrap_or(op.task_stop);
        let s = begin.max(last_end);
        let t = end.max(s);
        self.rank_streams(context).last_end = t;
        let func = func_of(&op.event);
        let region = self.w.defs.static_region(func.as_str(), op_role(func), "an NCCL operation on its communicator's stream, from the start of its execution to its completion");
        let mut attrs = self.spares.attrs();
        attrs.extend([
            (Attr::CommHash, Val::U(comm_hash)),
            (Attr::Rank, Val::I(i64::from(my_rank))),
            (Attr::NRanks, Val::I(i64::from(n_ranks))),
        ]);
        push_op_identity(&mut attrs, &op.event);
        // With the pid, what another process's PXN proxy operations name as their parent.
        attrs.push((Attr::Task, Val::U(op.handle)));
        attrs.push((Attr::Pid, Val::I(i64::from(self.pid))));
        attrs.push((Attr::EnqueueTime, Val::U(op.enqueue)));
        attrs.push((Attr::CompleteTime, Val::U(end)));
        put_attrs(&mut self.w, &attrs);
        self.spares.give_back(attrs, Vec::new());
        self.w.enter(loc, s, region);
        let n = n_ranks.max(1) as u64;
        match op.event {
            Event::Coll(c) => {
                let b = bytes_of(c.count, c.datatype);
                let root_rank = u32::try_from(c.root).ok();
                let (sent, received) = match c.func {
                    Func::AllGather => (b, b * n),
                    Func::ReduceScatter => (b * n, b),
                    Func::AlltoAll | Func::Gather | Func::Scatter => (b * n, b * n),
                    Func::Broadcast => {
                        if c.root == my_rank {
                            (b, b)
                        } else {
                            (0, b)
                        }
                    }
                    Func::Reduce => {
                        if c.root == my_rank {
                            (b, b)
                        } else {
                            (b, 0)
                        }
                    }
                    _ => (b, b),
                };
                let root = if is_rooted(c.func) {
                    root_rank.unwrap_or(otf2_sys::OTF2_COLLECTIVE_ROOT_NONE)
                } else {
                    otf2_sys::OTF2_COLLECTIVE_ROOT_NONE
                };
                self.w.collective_begin(loc, s);
                self.w
                    .collective_end(loc, t, collective_op(c.func), comm, root, sent, received);
            }
            Event::P2p(p) => {
                let b = bytes_of(p.count, p.datatype);
                let peer = p.peer.max(0) as u32;
                if p.func == Func::Recv {
                    self.w.recv(loc, t, peer, comm, b);
                } else {
                    self.w.send(loc, s, peer, comm, b);
                }
            }
            _ => {}
        }
        self.w.leave(loc, t, region);
    }

    /// Places everything, writes what is left and closes the archive.
    fn close(&mut self) -> Otf2Stats {
        let now = self.last_seen;
        let idle: Vec<(i32, u64)> = self.idle_since.drain().collect();
        for (tid, since) in idle {
            self.push_idle(tid, since, now.max(since));
        }
        self.write_completed_ops(&HashSet::default(), u64::MAX, true);
        for timeline in self.timelines.values_mut() {
            let mut placer = Placer {
                w: &mut self.w,
                locs: &mut timeline.locs,
                name: &timeline.name,
                group: timeline.group,
                spares: &mut self.spares,
            };
            timeline.lanes.finish(&mut placer);
            self.stats.clipped_intervals += timeline.lanes.clipped;
        }
        let end = ClockSample {
            monotonic_ns: crate::clock::now_ns(),
            realtime_ns: crate::clock::realtime_ns(),
        };
        self.stats.events_written = self.w.close(end);
        self.w.remove_snapshot();
        self.stats.failed_writes = self.w.failed_writes;
        self.stats.snapshots = self.w.snapshots;
        self.stats.failed_calls = self.w.failed_calls;
        self.stats.raised_timestamps = self.w.raised_timestamps;
        self.stats
    }
}

/// The trace's part when the configuration writes the OTF2 trace.
pub fn open(context: &SinkContext) -> Option<Box<dyn Sink>> {
    let config = context.config;
    if !config.writes_otf2() {
        return None;
    }
    let rank = nccl_scorep_common::job::launcher_rank();
    let process_name = match rank {
        Some(rank) => format!("process {rank} (pid {} on {})", context.pid, context.host),
        None => format!("pid {} on {}", context.pid, context.host),
    };
    let options = Otf2Options {
        scalasca_safe: config.scalasca_safe,
        kernel_channels: config.event_mask & Kind::KernelCh.bit() != 0,
        step_states: config.step_states,
        process_index: rank.unwrap_or(context.pid as u32),
        process_name,
        host: context.host.to_owned(),
    };
    match Otf2Sink::create(context.part.path(), options) {
        Ok(trace) => Some(Box::new(trace)),
        Err(error) => {
            crate::log::warn(&format!("cannot write the trace: {error}"));
            None
        }
    }
}

impl Sink for Otf2Sink {
    fn comm(&mut self, context: u64, info: &Arc<ContextInfo>) {
        self.set_comm(context, info);
    }

    fn comm_finalized(&mut self, context: u64) {
        self.mark_finalized(context);
    }

    fn gap(&mut self, gap: &Gap) {
        self.record_gap(gap.tid, gap.first_ns, gap.last_ns, gap.dropped_total);
    }

    fn started(&mut self, event: &OpenView) {
        if event.kind == Kind::ProxyOp {
            self.proxy_op_started(event.handle, event.owner, event.event);
        }
    }

    fn event(&mut self, event: &FinishedEvent) {
        self.record(event);
    }

    fn end_of_pass(&mut self, open: &mut dyn Iterator<Item = OpenView<'_>>, until: u64) {
        self.place(open, until);
    }

    fn finish(&mut self, _end: &CycleEnd) {
        let stats = self.close();
        crate::log::info(&format!(
            "trace part written to {} ({} OTF2 events)",
            self.path().display(),
            stats.events_written
        ));
        crate::log::info(&format!(
            "{} snapshots of the trace part's definitions were kept while it was written",
            stats.snapshots
        ));
        let repaired = [
            ("otf2_failed_calls", stats.failed_calls),
            ("otf2_raised_timestamps", stats.raised_timestamps),
            ("otf2_clipped_intervals", stats.clipped_intervals),
            ("otf2_late_children", stats.late_children),
            ("otf2_ops_without_kernels", stats.ops_without_kernels),
            ("otf2_held_back_overflow", stats.held_back_overflow),
            ("otf2_failed_writes", stats.failed_writes),
        ];
        for (name, value) in repaired {
            if value > 0 {
                crate::log::warn(&format!("trace writer: {name}={value}"));
            }
        }
    }
}

fn leaf_item(start: u64, stop: u64, region: u32, attrs: Vec<(Attr, Val)>) -> Item {
    Item {
        start,
        stop: stop.max(start),
        region,
        leaf: true,
        chains: false,
        attrs,
        inner: Vec::new(),
    }
}

fn collective_op(func: Func) -> u8 {
    use otf2_sys::*;
    (match func {
        Func::AllReduce => OTF2_COLLECTIVE_OP_ALLREDUCE,
        Func::Broadcast => OTF2_COLLECTIVE_OP_BCAST,
        Func::Reduce => OTF2_COLLECTIVE_OP_REDUCE,
        Func::AllGather => OTF2_COLLECTIVE_OP_ALLGATHER,
        Func::ReduceScatter => OTF2_COLLECTIVE_OP_REDUCE_SCATTER_BLOCK,
        Func::AlltoAll => OTF2_COLLECTIVE_OP_ALLTOALL,
        Func::Gather => OTF2_COLLECTIVE_OP_GATHER,
        Func::Scatter => OTF2_COLLECTIVE_OP_SCATTER,
        _ => OTF2_COLLECTIVE_OP_BARRIER,
    }) as u8
}

fn rank_label(info: &ContextInfo) -> String {
    let comm = match &info.comm_name {
        Some(name) if !name.is_empty() => name.clone(),
        _ => format!("comm {:#x}", info.comm_hash),
    };
    format!("{comm} rank {}", info.rank)
}

fn comm_key_and_name(context: u64, info: &ContextInfo) -> (u64, String) {
    let name = match &info.comm_name {
        Some(name) if !name.is_empty() => format!("{name} ({:#x})", info.comm_hash),
        _ => format!("NCCL comm {:#x}", info.comm_hash),
    };
    if info.comm_hash != 0 {
        (info.comm_hash, name)
    } else {
        (context, format!("NCCL comm of context {context:#x}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Coll, P2p};

    const CONTEXT: u64 = 7;
    const MS: u64 = 1_000_000;

    /// A sink writing into a temporary directory, with one communicator rank of profiler
    /// API `version` and kernel channels asked for.
    fn sink(version: u8) -> (tempfile::TempDir, Otf2Sink) {
        let dir = tempfile::tempdir().unwrap();
        let options = Otf2Options {
            scalasca_safe: false,
            kernel_channels: true,
            step_states: true,
            process_index: 0,
            process_name: "process 0".into(),
            host: "node0".into(),
        };
        let mut sink = Otf2Sink::create(&dir.path().join("part"), options).unwrap();
        let info = ContextInfo {
            comm_hash: 0xc0ffee,
            n_ranks: 2,
            version,
            ..ContextInfo::default()
        };
        sink.set_comm(CONTEXT, &Arc::new(info));
        (dir, sink)
    }

    fn finished(
        handle: u64,
        event: Event,
        parent: Parent,
        start: u64,
        stop: u64,
    ) -> FinishedEvent<'static> {
        FinishedEvent {
            handle,
            kind: event.kind(),
            owner: Owner::Local(CONTEXT),
            comm: None,
            parent,
            rank: 0,
            event,
            start_ns: start,
            start_tid: 1,
            stop_ns: stop,
            stop_tid: Some(1),
            states: Vec::new(),
            closed: Closed::Stopped,
            gpu: None,
            parent_event: None,
        }
    }

    /// An AllReduce task on two channels, enqueued from `start` to `stop`.
    fn allreduce(handle: u64, seq: u64, start: u64, stop: u64) -> FinishedEvent<'static> {
        let coll = Coll {
            seq,
            func: Func::AllReduce,
            count: 1024,
            n_channels: 2,
            ..Coll::default()
        };
        finished(handle, Event::Coll(coll), Parent::None, start, stop)
    }

    /// A kernel channel of `task`, which was still open when the channel ended if
    /// `task_open`.
    fn kernel(
        task: &FinishedEvent,
        handle: u64,
        channel: u8,
        start: u64,
        stop: u64,
        task_open: bool,
    ) -> FinishedEvent<'static> {
        let parent = Parent::Local {
            handle: task.handle,
            kind: Kind::Coll,
        };
        let mut kernel = finished(
            handle,
            Event::KernelCh {
                channel,
                ptimer: None,
            },
            parent,
            start,
            stop,
        );
        kernel.parent_event = task_open.then_some(task.event);
        kernel
    }

    fn end_of_pass(sink: &mut Otf2Sink, now: u64) -> u64 {
        sink.place(&mut std::iter::empty(), now);
        sink.ranks[&CONTEXT].written
    }

    /// NCCL reports a kernel channel when the GPU starts it: the operation waits for its
    /// channels however long its enqueue was quiet, and then has them.
    #[test]
    fn an_operation_waits_for_its_first_kernel_channel() {
        let (_dir, mut sink) = sink(7);
        let task = allreduce(1, 0, MS, 2 * MS);
        sink.record(&task);
        assert_eq!(end_of_pass(&mut sink, 2 * MS + 5 * OP_QUIET_NS), 0);
        sink.record(&kernel(&task, 2, 0, 300 * MS, 301 * MS, false));
        sink.record(&kernel(&task, 3, 1, 300 * MS, 302 * MS, false));
        assert_eq!(end_of_pass(&mut sink, 302 * MS), 1);
        assert_eq!(
            sink.ranks[&CONTEXT].last_end,
            302 * MS,
            "the operation ends with its last channel"
        );
        assert_eq!(sink.stats.ops_without_kernels, 0);
        assert_eq!(sink.stats.late_children, 0);
    }

    /// When a later operation of the rank has shown a kernel channel, an earlier one
    /// without any lost its channels: it is written once quiet, and counted.
    #[test]
    fn a_later_operations_kernel_releases_one_whose_channels_were_lost() {
        let (_dir, mut sink) = sink(7);
        let first = allreduce(1, 0, MS, 2 * MS);
        let second = allreduce(2, 1, 3 * MS, 4 * MS);
        sink.record(&first);
        sink.record(&second);
        sink.record(&kernel(&second, 3, 0, 5 * MS, 6 * MS, false));
        assert_eq!(end_of_pass(&mut sink, 6 * MS), 0, "not quiet yet");
        assert_eq!(end_of_pass(&mut sink, 2 * MS + OP_QUIET_NS), 1);
        assert_eq!(sink.stats.ops_without_kernels, 1);
        // The second has one of its two channels: it is written once quiet.
        assert_eq!(end_of_pass(&mut sink, 6 * MS + OP_QUIET_NS), 2);
        assert_eq!(sink.stats.ops_without_kernels, 1);
    }

    /// Waiting has limits: the time, the number of operations waiting, and the
    /// communicator's finalize (NCCL drops the channels it had not reported).
    #[test]
    fn waiting_for_kernel_channels_ends_at_a_limit_or_at_finalize() {
        let (_dir, mut sink) = sink(7);
        sink.record(&allreduce(1, 0, MS, 2 * MS));
        assert_eq!(end_of_pass(&mut sink, 2 * MS + OP_KERNEL_WAIT_NS - 1), 0);
        assert_eq!(end_of_pass(&mut sink, 2 * MS + OP_KERNEL_WAIT_NS), 1);

        let start = 3 * MS;
        for n in 0..=MAX_OPS_AWAITING_KERNELS as u64 {
            sink.record(&allreduce(10 + n, 1 + n, start + n, start + n + 1));
        }
        let last_stop = start + MAX_OPS_AWAITING_KERNELS as u64 + 1;
        let now = last_stop + OP_QUIET_NS;
        assert_eq!(end_of_pass(&mut sink, now), 2, "the oldest over the limit");

        sink.mark_finalized(CONTEXT);
        assert_eq!(
            end_of_pass(&mut sink, now),
            2 + MAX_OPS_AWAITING_KERNELS as u64
        );
        assert_eq!(
            sink.stats.ops_without_kernels,
            2 + MAX_OPS_AWAITING_KERNELS as u64
        );
    }

    /// A channel of an operation written already is counted as late; one of a task still
    /// open waits for the task.
    #[test]
    fn late_channels_are_counted_and_early_ones_kept() {
        let (_dir, mut sink) = sink(7);
        let task = allreduce(1, 0, MS, 2 * MS);
        sink.record(&kernel(&task, 2, 0, MS + 10, 3 * MS, true));
        assert_eq!(sink.early_children.len(), 1);
        sink.record(&task);
        assert!(sink.early_children.is_empty());
        assert_eq!(end_of_pass(&mut sink, 3 * MS + OP_QUIET_NS), 1);
        sink.record(&kernel(&task, 3, 1, 4 * MS, 5 * MS, false));
        assert_eq!(sink.stats.late_children, 1);
        assert!(sink.early_children.is_empty());
        assert_eq!(sink.stats.ops_without_kernels, 0);
    }

    /// A p2p announces no exact count, but one channel at least: it waits for that one,
    /// then for quiet.
    #[test]
    fn a_p2p_waits_for_its_first_kernel_channel_too() {
        let (_dir, mut sink) = sink(7);
        let p2p = P2p {
            func: Func::Send,
            count: 1024,
            peer: 1,
            ..P2p::default()
        };
        let task = finished(1, Event::P2p(p2p), Parent::None, MS, 2 * MS);
        sink.record(&task);
        assert_eq!(end_of_pass(&mut sink, 2 * MS + 5 * OP_QUIET_NS), 0);
        let mut channel = kernel(&task, 2, 0, 400 * MS, 401 * MS, false);
        channel.parent = Parent::Local {
            handle: task.handle,
            kind: Kind::P2p,
        };
        sink.record(&channel);
        assert_eq!(end_of_pass(&mut sink, 401 * MS + OP_QUIET_NS - 1), 0);
        assert_eq!(end_of_pass(&mut sink, 401 * MS + OP_QUIET_NS), 1);
        assert_eq!(sink.stats.ops_without_kernels, 0);
    }

    /// Before profiler API v3 there are no kernel channels: quiet is enough.
    #[test]
    fn without_kernel_channels_in_the_api_quiet_is_enough() {
        let (_dir, mut sink) = sink(2);
        sink.record(&allreduce(1, 0, MS, 2 * MS));
        assert_eq!(end_of_pass(&mut sink, 2 * MS + OP_QUIET_NS), 1);
        assert_eq!(sink.stats.ops_without_kernels, 0);
    }
}
