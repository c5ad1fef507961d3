//! The device side of each communicator rank: its ops stream (every operation in enqueue
//! order, from the start of its execution to its completion, written once complete) and a
//! stream per channel with the GPU kernel intervals and their phases.

use super::attributes::{
    bytes_of, func_of, is_rooted, op_role, push_op_identity, push_op_key, static_text, Val,
};
use super::defs::{Attr, LocationKind, LocationOrder, RegionGroup, Role};
use super::writer::{Loc, Writer};
use super::Otf2Stats;
use crate::context::ContextInfo;
use crate::event::{Event, Func};
use crate::gpu_sanity::Rejection;
use crate::model::{FinishedEvent, Owner, Parent};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::collections::VecDeque;
use std::sync::Arc;

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
/// Tasks still open whose children are remembered (more children are counted as late).
const MAX_EARLY_TASKS: usize = 1 << 16;
/// Phases remembered per kernel channel.
const MAX_PHASES: usize = 16;

/// An operation on a communicator rank's ops stream, until it is complete.
struct PendingOp {
    handle: u64,
    event: Event,
    enqueue: u64,
    task_stop: u64,
    first_kernel: Option<u64>,
    last_child: Option<u64>,
    /// The latest end of its kernel channels timed by the GPU.
    last_gpu_end: Option<u64>,
    kernels: u32,
    /// Why the GPU times of one of its kernel channels were rejected (the first reason).
    gpu_rejected: Option<Rejection>,
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
    /// (rank, rank count) in the shared communicator of its `commHash`, when `init`
    /// described it consistently; `None`: the context has a communicator of its own, and
    /// its records name no other rank.
    shared: Option<(i32, i32)>,
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

impl RankStreams {
    /// The ops stream's location, defined with its place in the communicator the first
    /// time it is asked for: when the rank's first task finished. Its operations come
    /// later (they wait for their kernel channels, a second at the start of a run), and a
    /// process killed meanwhile still names its communicators' members.
    fn ops_loc(&mut self, w: &mut Writer, context: u64) -> Loc {
        if let Some(loc) = self.ops_loc {
            return loc;
        }
        let loc = w.add_location(
            &format!("{} ops", rank_label(context, &self.info, self.shared)),
            LocationKind::AcceleratorStream,
            self.group,
            LocationOrder::OpsStream,
        );
        if let Some(&id) = w.defs.location_ids().get(loc.0 as usize) {
            // In a communicator of its own, the context is its only member.
            let position = self.shared.map_or(self.info.rank.max(0), |(r, _)| r);
            w.defs.comm_member(self.comm, position, id);
        }
        self.ops_loc = Some(loc);
        loc
    }
}

/// What children told us about a task before the task itself finished.
#[derive(Default, Clone, Copy)]
struct EarlyChild {
    first_kernel: Option<u64>,
    last_child: Option<u64>,
    /// The latest end of its kernel channels timed by the GPU.
    last_gpu_end: Option<u64>,
    kernels: u32,
    gpu_rejected: Option<Rejection>,
}

/// The ops and channel streams of every communicator rank, and what their operations are
/// still waiting for.
pub(super) struct OpsStreams {
    /// NCCL will report KernelCh events (an operation then waits for all its channels).
    kernel_channels: bool,
    pid: i32,
    ranks: HashMap<u64, RankStreams>,
    contexts: HashMap<u64, Arc<ContextInfo>>,
    /// Task handle → its context and sequence number on that context's ops stream, while
    /// the operation waits there.
    task_context: HashMap<u64, (u64, u64)>,
    early_children: HashMap<u64, EarlyChild>,
    /// KernelPhase intervals waiting for their KernelCh: (start, stop, region).
    phases: HashMap<u64, Vec<(u64, u64, u32)>>,
    /// Region ids of kernel channels by their operation's function.
    kernel_regions: HashMap<Option<Func>, u32>,
    /// The attributes of the record being written (kept for its room).
    attrs: Vec<(Attr, Val)>,
    /// Children that came after their operation was written.
    late_children: u64,
    /// Operations written without any of the kernel channels they announced.
    ops_without_kernels: u64,
    /// Sends and receives written without a message record: their communicator's ranks
    /// are unknown.
    messages_without_comm: u64,
    /// Sends, receives and rooted collectives whose peer or root is no rank of their
    /// communicator (negative, or past its rank count): written without the message
    /// record, or with no root.
    ranks_out_of_range: u64,
    /// The first description (`init`) of each `commHash`: its rank count, name and the
    /// ranks claimed so far. A later context that disagrees gets a communicator of its own.
    descriptions: HashMap<u64, CommDescription>,
    /// Contexts whose `init` disagreed with their communicator's first description.
    inconsistent_comms: u64,
    /// Kernel channels that started before the previous one on their stream ended.
    clipped_intervals: u64,
}

impl OpsStreams {
    pub(super) fn new(kernel_channels: bool, pid: i32) -> OpsStreams {
        OpsStreams {
            kernel_channels,
            pid,
            ranks: HashMap::default(),
            contexts: HashMap::default(),
            task_context: HashMap::default(),
            early_children: HashMap::default(),
            phases: HashMap::default(),
            kernel_regions: HashMap::default(),
            attrs: Vec::new(),
            late_children: 0,
            ops_without_kernels: 0,
            messages_without_comm: 0,
            ranks_out_of_range: 0,
            descriptions: HashMap::default(),
            inconsistent_comms: 0,
            clipped_intervals: 0,
        }
    }

    /// A communicator rank was initialised (or learned its hash later).
    pub(super) fn set_comm(&mut self, context: u64, info: &Arc<ContextInfo>) {
        self.contexts.insert(context, Arc::clone(info));
        if let Some(rank) = self.ranks.get_mut(&context) {
            rank.info = Arc::clone(info);
        }
    }

    /// A communicator rank was finalized: its operations wait for no more kernel channels
    /// (NCCL drops those it had not reported).
    pub(super) fn mark_finalized(&mut self, context: u64) {
        if let Some(rank) = self.ranks.get_mut(&context) {
            rank.finalized = true;
        }
    }

    fn rank_streams(&mut self, w: &mut Writer, context: u64) -> &mut RankStreams {
        if !self.ranks.contains_key(&context) {
            let info = self
                .contexts
                .get(&context)
                .cloned()
                .unwrap_or_else(|| Arc::new(ContextInfo::default()));
            let shared = self.join_shared_comm(&info);
            let label = rank_label(context, &info, shared);
            let group = w.defs.accelerator_group(&label);
            let (key, name) = if shared.is_some() {
                comm_key_and_name(context, &info)
            } else {
                own_comm_key_and_name(context)
            };
            let comm = w.defs.comm(key, &name);
            self.ranks.insert(
                context,
                RankStreams {
                    info,
                    group,
                    comm,
                    shared,
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

    /// Whether a context with `info` joins the communicator of its `commHash`: it has a
    /// hash, a rank within a plausible rank count (or no rank count, as before NCCL 2.27),
    /// agrees with the first description of that hash, and no earlier context claimed
    /// its rank. Returns its (rank, rank count), the count 0 when unknown.
    fn join_shared_comm(&mut self, info: &ContextInfo) -> Option<(i32, i32)> {
        let (rank, n_ranks) = (info.rank, info.n_ranks);
        if info.comm_hash == 0 || !identity_known(info) {
            return None;
        }
        // Profiler API v1–v3 give no rank count at `init`: the rank (learned from the
        // events) places the context in its communicator, whose records then name no
        // other rank (their positions cannot be checked against a size).
        let n_ranks = if n_ranks <= 0 && rank < MAX_COMM_RANKS {
            0
        } else {
            n_ranks
        };
        if !(n_ranks == 0 || (n_ranks <= MAX_COMM_RANKS && rank < n_ranks)) {
            // Not a description to keep for the others.
            self.inconsistent_comms += 1;
            return None;
        }
        let description =
            self.descriptions
                .entry(info.comm_hash)
                .or_insert_with(|| CommDescription {
                    n_ranks,
                    name: info.comm_name.clone(),
                    ranks: HashSet::default(),
                });
        let agrees = description.n_ranks == n_ranks
            && description.name == info.comm_name
            && description.ranks.insert(rank);
        if agrees {
            Some((rank, n_ranks))
        } else {
            self.inconsistent_comms += 1;
            None
        }
    }

    /// How the locations of a communicator rank are named, and their location group.
    pub(super) fn rank_label_and_group(&mut self, w: &mut Writer, context: u64) -> (String, u32) {
        let rank = self.rank_streams(w, context);
        (rank_label(context, &rank.info, rank.shared), rank.group)
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

    /// The event of task `task` while its operation waits on its ops stream.
    pub(super) fn pending_event(&self, task: u64) -> Option<Event> {
        self.pending_op(task).map(|op| op.event)
    }

    /// A Coll or P2p task: the operation joins its communicator rank's ops stream.
    pub(super) fn task(&mut self, w: &mut Writer, e: &FinishedEvent) {
        let Owner::Local(context) = e.owner else {
            return;
        };
        let early = self.early_children.remove(&e.handle).unwrap_or_default();
        let rank = self.rank_streams(w, context);
        rank.ops_loc(w, context);
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
            last_gpu_end: early.last_gpu_end,
            kernels: early.kernels,
            gpu_rejected: early.gpu_rejected,
            last_activity: e.stop_ns.max(early.last_child.unwrap_or(0)),
        });
        self.task_context.insert(e.handle, (context, seq));
    }

    /// A child (ProxyOp or KernelCh) of a task finished: it joins its operation waiting on
    /// the ops stream, or is kept for a task that has not ended yet (an early child), or
    /// comes too late (its operation was written).
    pub(super) fn child_done(&mut self, e: &FinishedEvent, stop: u64, kernel_start: Option<u64>) {
        let Parent::Local { handle, kind } = e.parent else {
            return;
        };
        if !kind.facts().is_task {
            return;
        }
        let rejected = e.gpu_rejected;
        let gpu_end = e.gpu.and(kernel_start).map(|_| stop);
        let apply = |first: &mut Option<u64>,
                     last: &mut Option<u64>,
                     last_gpu_end: &mut Option<u64>,
                     kernels: &mut u32,
                     gpu_rejected: &mut Option<Rejection>| {
            *last = Some(last.map_or(stop, |l| l.max(stop)));
            if let Some(k) = kernel_start {
                *first = Some(first.map_or(k, |f| f.min(k)));
                *kernels += 1;
            }
            *last_gpu_end = (*last_gpu_end).max(gpu_end);
            *gpu_rejected = gpu_rejected.or(rejected);
        };
        if let Some(op) = self.pending_op_mut(handle) {
            apply(
                &mut op.first_kernel,
                &mut op.last_child,
                &mut op.last_gpu_end,
                &mut op.kernels,
                &mut op.gpu_rejected,
            );
            op.last_activity = op.last_activity.max(stop);
            if kernel_start.is_some() {
                let (context, seq) = self.task_context[&handle];
                let rank = self.ranks.get_mut(&context).expect("a pending op's rank");
                rank.latest_with_kernel = rank.latest_with_kernel.max(Some(seq));
            }
            return;
        }
        if e.parent_event.is_none() {
            self.late_children += 1;
            return;
        }
        if self.early_children.len() < MAX_EARLY_TASKS {
            let early = self.early_children.entry(handle).or_default();
            apply(
                &mut early.first_kernel,
                &mut early.last_child,
                &mut early.last_gpu_end,
                &mut early.kernels,
                &mut early.gpu_rejected,
            );
        } else {
            self.late_children += 1;
        }
    }

    /// A KernelCh: it counts for its operation, and is written on its channel's stream
    /// with the phases that came before it.
    pub(super) fn kernel(&mut self, w: &mut Writer, e: &FinishedEvent) {
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
            Parent::Local { handle, .. } => self.pending_event(handle),
            _ => None,
        }
        .or(e.parent_event.copied());
        let func = identity.map(|ev| func_of(&ev));
        let region = match self.kernel_regions.get(&func) {
            Some(&region) => region,
            None => {
                let name = func.map_or("NCCL", Func::as_str);
                let region = w.defs.region(
                    &format!("{name} kernel"),
                    Role::Code,
                    "GPU time of one channel of an NCCL kernel (GPU clock converted to host time)",
                );
                w.defs.group_region(region, RegionGroup::GpuKernels);
                self.kernel_regions.insert(func, region);
                region
            }
        };
        let phases = if self.phases.is_empty() {
            None
        } else {
            self.phases.remove(&e.handle)
        }
        // Phases inside host-side times would place GPU times where they were not.
        .filter(|_| e.gpu_rejected.is_none());
        let rank = self.rank_streams(w, context);
        let loc = match rank.channels.get(&channel) {
            Some(&loc) => loc,
            None => {
                let (group, label) = (rank.group, rank_label(context, &rank.info, rank.shared));
                let loc = w.add_location(
                    &format!("{label} channel {channel}"),
                    LocationKind::AcceleratorStream,
                    group,
                    LocationOrder::Channel,
                );
                rank.channels.insert(channel, loc);
                loc
            }
        };
        let last = w.last_time(loc);
        let s = start.max(last);
        let t = stop.max(s);
        if s != start {
            self.clipped_intervals += 1;
        }
        let attrs = &mut self.attrs;
        attrs.clear();
        attrs.extend([
            (Attr::Channel, Val::U(u64::from(channel))),
            (Attr::Rank, Val::I(i64::from(e.rank))),
        ]);
        if let Some(ev) = identity {
            push_op_key(&mut w.defs, attrs, &ev, true);
        }
        if let Some(error) = e.gpu.and_then(|g| g.error_ns) {
            attrs.push((Attr::GpuClockError, Val::U(error)));
        }
        if let Some(rejection) = e.gpu_rejected {
            attrs.push((
                Attr::GpuTimeRejected,
                static_text(&mut w.defs, rejection.name()),
            ));
        }
        // Its phases inside it, one after the other.
        w.leaf(
            loc,
            s,
            t,
            region,
            attrs,
            phases.as_deref().unwrap_or_default(),
        );
    }

    /// A KernelPhase: kept for its kernel channel, written inside it.
    pub(super) fn phase(&mut self, w: &mut Writer, e: &FinishedEvent) {
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
        let region = w.defs.static_region_in(
            name,
            Role::Code,
            "a phase of a kernel channel (NCCL 2.31+)",
            RegionGroup::GpuKernels,
        );
        let phases = self.phases.entry(handle).or_default();
        if phases.len() < MAX_PHASES {
            phases.push((gpu.start_ns, gpu.stop_ns, region));
        }
    }

    /// Writes, per communicator rank, the operations at the front of its ops stream that
    /// are complete: none of their children is in `busy` (still open), and they have all
    /// their kernel channels or were quiet long enough (`now` is the time processed). At
    /// the end (`finishing`) everything is complete.
    pub(super) fn write_completed(
        &mut self,
        w: &mut Writer,
        busy: &dyn Fn(u64) -> bool,
        now: u64,
        finishing: bool,
    ) {
        let kernel_channels = self.kernel_channels;
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
                    || (!busy(op.handle)
                        && (all_kernels || (quiet >= OP_QUIET_NS && !awaits_first_kernel)));
                if !complete {
                    break;
                }
                if announced != Channels::None && op.kernels == 0 {
                    self.ops_without_kernels += 1;
                }
                let op = rank.ops.pop_front().expect("front exists");
                rank.written += 1;
                self.task_context.remove(&op.handle);
                self.write_op(w, context, op);
            }
        }
    }

    fn write_op(&mut self, w: &mut Writer, context: u64, op: PendingOp) {
        let rank = self.rank_streams(w, context);
        let (comm, comm_hash, my_rank, n_ranks) = (
            rank.comm,
            rank.info.comm_hash,
            rank.info.rank,
            rank.info.n_ranks,
        );
        // A rank of the communicator the records refer to, or `None`.
        let shared = rank.shared;
        let member = |peer: i32| match shared {
            Some((_, n)) if (0..n).contains(&peer) => u32::try_from(peer).ok(),
            _ => None,
        };
        let loc = rank.ops_loc(w, context);
        // Execution starts with the first kernel channel (never before the enqueue). It
        // ends when the GPU finished its last kernel channel, the moment its result is
        // there for the application; where the GPU's times are not known (no kernel
        // channels, or rejected ones), with the last kernel channel or proxy operation the
        // host saw end (the enqueue's end without either).
        let begin = op.first_kernel.map_or(op.enqueue, |k| k.max(op.enqueue));
        let end = match (op.gpu_rejected, op.last_gpu_end) {
            (None, Some(gpu_end)) => gpu_end,
            _ => op.last_child.unwrap_or(op.task_stop),
        };
        let s = begin.max(rank.last_end);
        let t = end.max(s);
        rank.last_end = t;
        let func = func_of(&op.event);
        let region = w.defs.static_region_in(func.as_str(), op_role(func), "an NCCL operation on its communicator's stream, from the start of its execution to its completion", RegionGroup::GpuKernels);
        let attrs = &mut self.attrs;
        attrs.clear();
        attrs.extend([
            (Attr::CommHash, Val::U(comm_hash)),
            (Attr::Rank, Val::I(i64::from(my_rank))),
            (Attr::NRanks, Val::I(i64::from(n_ranks))),
        ]);
        push_op_identity(&mut w.defs, attrs, &op.event);
        // With the pid, what another process's PXN proxy operations name as their parent.
        attrs.push((Attr::Task, Val::U(op.handle)));
        attrs.push((Attr::Pid, Val::I(i64::from(self.pid))));
        attrs.push((Attr::EnqueueTime, Val::U(op.enqueue)));
        attrs.push((Attr::CompleteTime, Val::U(end)));
        if let Some(rejection) = op.gpu_rejected {
            attrs.push((
                Attr::GpuTimeRejected,
                static_text(&mut w.defs, rejection.name()),
            ));
        }
        w.enter_with(loc, s, region, attrs);
        let n = n_ranks.max(1) as u64;
        match op.event {
            Event::Coll(c) => {
                let b = bytes_of(c.count, c.datatype);
                // Saturating: a garbage count or rank count must not overflow.
                let bn = b.saturating_mul(n);
                let (sent, received) = match c.func {
                    Func::AllGather => (b, bn),
                    Func::ReduceScatter => (bn, b),
                    Func::AlltoAll | Func::Gather | Func::Scatter => (bn, bn),
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
                // A root that is no rank of the trace's communicator is not written (the
                // `nccl.root` attribute keeps it).
                let root = match (is_rooted(c.func), member(c.root)) {
                    (true, Some(root)) => root,
                    (true, None) => {
                        if shared.is_some() {
                            self.ranks_out_of_range += 1;
                        }
                        otf2_sys::OTF2_COLLECTIVE_ROOT_NONE
                    }
                    (false, _) => otf2_sys::OTF2_COLLECTIVE_ROOT_NONE,
                };
                w.collective_begin(loc, s);
                w.collective_end(loc, t, collective_op(c.func), comm, root, sent, received);
            }
            Event::P2p(_) if shared.is_none() => {
                // The peer is a rank of a communicator whose ranks are not known here: a
                // message record would name a rank the trace's communicator lacks. The
                // operation keeps its region and attributes (the peer among them).
                self.messages_without_comm += 1;
            }
            Event::P2p(p) if member(p.peer).is_none() => {
                // A peer NCCL cannot have: no message record, the `nccl.peer` attribute
                // keeps it.
                self.ranks_out_of_range += 1;
            }
            Event::P2p(p) => {
                let b = bytes_of(p.count, p.datatype);
                let peer = p.peer as u32;
                if p.func == Func::Recv {
                    w.recv(loc, t, peer, comm, b);
                } else {
                    w.send(loc, s, peer, comm, b);
                }
            }
            _ => {}
        }
        w.leave(loc, t, region);
    }

    /// Adds this part's counts to the writer's.
    pub(super) fn add_counts(&self, stats: &mut Otf2Stats) {
        stats.late_children += self.late_children;
        stats.ops_without_kernels += self.ops_without_kernels;
        stats.messages_without_comm += self.messages_without_comm;
        stats.ranks_out_of_range += self.ranks_out_of_range;
        stats.inconsistent_comms += self.inconsistent_comms;
        stats.clipped_intervals += self.clipped_intervals;
    }
}

/// A communicator rank's name, with its rank in the shared communicator (`shared`, see
/// [`RankStreams::shared`]); without one (NCCL 2.26 and older give no identity to profiler
/// API v1–v3 before a task names its communicator's hash, or `init` described it
/// inconsistently), its context's.
fn rank_label(context: u64, info: &ContextInfo, shared: Option<(i32, i32)>) -> String {
    let Some((rank, _)) = shared else {
        return format!("comm of context {context:#x}");
    };
    let comm = match &info.comm_name {
        Some(name) if !name.is_empty() => name.clone(),
        _ => format!("comm {:#x}", info.comm_hash),
    };
    format!("{comm} rank {rank}")
}

/// Whether the communicator rank's rank is known (from `init`, or learned from its
/// tasks on API v1–v3): the trace's communicator then maps its peers to locations.
fn identity_known(info: &ContextInfo) -> bool {
    info.rank >= 0
}

/// The largest rank count a communicator's records may name ranks of: a larger one is a
/// value NCCL cannot mean (its ranks would each need a location in the merged trace).
const MAX_COMM_RANKS: i32 = 1 << 20;

/// The first description of a `commHash` in this process.
struct CommDescription {
    n_ranks: i32,
    name: Option<String>,
    /// The ranks contexts of this process claimed.
    ranks: HashSet<i32>,
}

/// The communicator of a context that shares none: its key and name.
fn own_comm_key_and_name(context: u64) -> (u64, String) {
    (context, format!("NCCL comm of context {context:#x}"))
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

#[cfg(test)]
mod tests {
    //! The ops streams' waiting, driven through the sink as the collector drives it.

    use super::*;
    use crate::event::{Coll, Kind, P2p};
    use crate::model::{Closed, HeldTasks};
    use crate::sink::otf2::{Otf2Options, Otf2Sink};

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
            step_detail: crate::config::StepDetail::Intervals,
            proxy_lanes: 16,
            max_locations: crate::config::DEFAULT_MAX_LOCATIONS,
            process_index: 0,
            process_name: "process 0".into(),
            host: "node0".into(),
            properties: Vec::new(),
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
            states: &[],
            closed: Closed::Stopped,
            gpu: None,
            gpu_rejected: None,
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
    fn kernel<'a>(
        task: &'a FinishedEvent,
        handle: u64,
        channel: u8,
        start: u64,
        stop: u64,
        task_open: bool,
    ) -> FinishedEvent<'a> {
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
        kernel.parent_event = task_open.then_some(&task.event);
        kernel
    }

    fn end_of_pass(sink: &mut Otf2Sink, now: u64) -> u64 {
        sink.place(&mut std::iter::empty(), &HeldTasks::default(), now);
        sink.ops.ranks[&CONTEXT].written
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
            sink.ops.ranks[&CONTEXT].last_end,
            302 * MS,
            "the operation ends with its last channel"
        );
        assert_eq!(sink.ops.ops_without_kernels, 0);
        assert_eq!(sink.ops.late_children, 0);
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
        assert_eq!(sink.ops.ops_without_kernels, 1);
        // The second has one of its two channels: it is written once quiet.
        assert_eq!(end_of_pass(&mut sink, 6 * MS + OP_QUIET_NS), 2);
        assert_eq!(sink.ops.ops_without_kernels, 1);
    }

    /// A kernel channel held for its GPU clock conversion keeps its operation open like
    /// an open child: with one channel in and one held, the operation is not written
    /// however quiet, and is once the held one comes.
    #[test]
    fn an_operation_waits_for_its_held_kernel_channels() {
        let (_dir, mut sink) = sink(7);
        let task = allreduce(1, 0, MS, 2 * MS);
        sink.record(&task);
        sink.record(&kernel(&task, 2, 0, 3 * MS, 4 * MS, false));
        let mut held = HeldTasks::default();
        held.add(task.handle);
        let quiet = 4 * MS + 5 * OP_QUIET_NS;
        sink.place(&mut std::iter::empty(), &held, quiet);
        assert_eq!(sink.ops.ranks[&CONTEXT].written, 0, "its channel 1 is held");
        held.remove(task.handle);
        sink.record(&kernel(&task, 3, 1, 3 * MS, 5 * MS, false));
        sink.place(&mut std::iter::empty(), &held, quiet);
        assert_eq!(sink.ops.ranks[&CONTEXT].written, 1);
        assert_eq!(sink.ops.ranks[&CONTEXT].last_end, 5 * MS);
        assert_eq!(sink.ops.ops_without_kernels, 0);
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
            sink.ops.ops_without_kernels,
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
        assert_eq!(sink.ops.early_children.len(), 1);
        sink.record(&task);
        assert!(sink.ops.early_children.is_empty());
        assert_eq!(end_of_pass(&mut sink, 3 * MS + OP_QUIET_NS), 1);
        sink.record(&kernel(&task, 3, 1, 4 * MS, 5 * MS, false));
        assert_eq!(sink.ops.late_children, 1);
        assert!(sink.ops.early_children.is_empty());
        assert_eq!(sink.ops.ops_without_kernels, 0);
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
        assert_eq!(sink.ops.ops_without_kernels, 0);
    }

    /// Before profiler API v3 there are no kernel channels: quiet is enough.
    #[test]
    fn without_kernel_channels_in_the_api_quiet_is_enough() {
        let (_dir, mut sink) = sink(2);
        sink.record(&allreduce(1, 0, MS, 2 * MS));
        assert_eq!(end_of_pass(&mut sink, 2 * MS + OP_QUIET_NS), 1);
        assert_eq!(sink.ops.ops_without_kernels, 0);
    }
}
