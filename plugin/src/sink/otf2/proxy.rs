//! The proxy's side of the trace: proxy operations and their steps (with the steps' wait
//! states) on the proxy lanes of their communicator rank, and the proxy threads' sleep,
//! append and idle intervals.
//!
//! With `NCCL_SCOREP_STEP_DETAIL=summary` a step whose operation is open is not written:
//! it is added to its operation's summary (steps, bytes, time, time per wait state), which
//! the operation's interval carries as attributes.
//!
//! The operations of one communicator rank share its lanes, whatever their channel, peer
//! and direction (which the operation's region and attributes say): an operation goes to
//! the first lane where nothing is open, a step inside its own operation when that lane is
//! free at the step's start, else to the first lane where nothing is open. The lanes an
//! owner needs are about the operations it has in flight at once, bounded by
//! `NCCL_SCOREP_PROXY_LANES`.

use super::attributes::{push_op_key, static_text, Val};
use super::defs::{Attr, Definitions, RegionGroup, Role};
use super::lanes::Nesting;
use super::ops::OpsStreams;
use super::timelines::{thread_timeline_name, Family, Item, Timelines, Watermarks};
use super::writer::Writer;
use crate::config::StepDetail;
use crate::event::{Event, StateArg};
use crate::kinds::Timeline as KindTimeline;
use crate::model::{Closed, FinishedEvent, OpenView, Owner, Parent, StateRecord};
use nccl_profiler_abi::state;
use rustc_hash::FxHashMap as HashMap;

/// Step state numbers the wait-state table covers (NCCL's are below 32).
const STEP_STATE_NUMBERS: usize = 32;

/// What a step needs of its open operation.
#[derive(Clone, Copy)]
struct OpenOp {
    family: Family,
    is_send: bool,
    steps: StepSummary,
}

/// A finished ProxyOp: the timeline it goes to, and its steps when they are summed up.
pub(super) struct FinishedOp {
    family: Family,
    steps: StepSummary,
}

/// The attributes of the wait-state classes a summary adds up, by [`WaitState::class`].
const WAIT_CLASS_ATTRIBUTES: [Attr; 4] = [
    Attr::GpuWait,
    Attr::PeerWait,
    Attr::NetworkWait,
    Attr::FlushTime,
];

/// A proxy-step wait state NCCL records: its step's direction, the region its intervals
/// show, and the class (GPU, peer, network, flush, as the profile's metrics divide them) a
/// summary adds it to.
struct WaitState {
    state: i32,
    send: bool,
    name: &'static str,
    description: &'static str,
    /// Index into [`WAIT_CLASS_ATTRIBUTES`].
    class: usize,
}

const WAIT_STATES: [WaitState; 6] = [
    WaitState {
        state: state::PROXY_STEP_SEND_GPU_WAIT,
        send: true,
        name: "send: GPU wait",
        description: "waiting for the GPU to fill the buffer",
        class: 0,
    },
    WaitState {
        state: state::PROXY_STEP_SEND_PEER_WAIT_V4,
        send: true,
        name: "send: peer wait",
        description: "data ready; waiting for the receiver's credit",
        class: 1,
    },
    WaitState {
        state: state::PROXY_STEP_SEND_WAIT,
        send: true,
        name: "send: network wait",
        description: "send posted; waiting for the network to complete it",
        class: 2,
    },
    WaitState {
        state: state::PROXY_STEP_RECV_WAIT,
        send: false,
        name: "recv: network wait",
        description: "receive posted; waiting for data",
        class: 2,
    },
    WaitState {
        state: state::PROXY_STEP_RECV_FLUSH_WAIT,
        send: false,
        name: "recv: flush",
        description: "data received; flushing it to the GPU",
        class: 3,
    },
    WaitState {
        state: state::PROXY_STEP_RECV_GPU_WAIT,
        send: false,
        name: "recv: GPU wait",
        description: "waiting for the GPU to consume the data",
        class: 0,
    },
];

/// The wait state of NCCL's state number, if it is one.
fn wait_state(step_state: i32) -> Option<&'static WaitState> {
    wait_state_index(step_state).map(|index| &WAIT_STATES[index])
}

/// The index in [`WAIT_STATES`] of NCCL's state number, if it is a wait state.
fn wait_state_index(step_state: i32) -> Option<usize> {
    let index = *WAIT_STATE_BY_NUMBER.get(usize::try_from(step_state).ok()?)?;
    (usize::from(index) < WAIT_STATES.len()).then_some(usize::from(index))
}

/// Index into [`WAIT_STATES`] by NCCL's state number (all below
/// [`STEP_STATE_NUMBERS`], which building the table checks); `u8::MAX` where a number is
/// no wait state. Looked up for every state of every step.
const WAIT_STATE_BY_NUMBER: [u8; STEP_STATE_NUMBERS] = {
    let mut table = [u8::MAX; STEP_STATE_NUMBERS];
    let mut i = 0;
    while i < WAIT_STATES.len() {
        table[WAIT_STATES[i].state as usize] = i as u8;
        i += 1;
    }
    table
};

/// What the finished steps of an operation add up to (all zero when none was added).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(super) struct StepSummary {
    steps: u64,
    bytes: u64,
    time_ns: u64,
    longest_ns: u64,
    /// Time in each wait-state class, by [`WaitState::class`].
    wait_ns: [u64; 4],
}

impl StepSummary {
    /// Adds a finished step. Sizes come from NCCL unchecked, so every sum saturates.
    fn add(&mut self, e: &FinishedEvent, with_states: bool) {
        let took = e.stop_ns.saturating_sub(e.start_ns);
        self.steps += 1;
        self.bytes = self.bytes.saturating_add(step_size(e.states).unwrap_or(0));
        self.time_ns = self.time_ns.saturating_add(took);
        self.longest_ns = self.longest_ns.max(took);
        if with_states {
            wait_runs(e.states, e.stop_ns, |step_state, since, until| {
                if let Some(wait) = wait_state(step_state) {
                    let waited = until.saturating_sub(since);
                    self.wait_ns[wait.class] = self.wait_ns[wait.class].saturating_add(waited);
                }
            });
        }
    }

    /// The attributes an operation carries for its summed-up steps: none when no step was
    /// added; byte and wait totals only when not zero.
    fn push_attributes(&self, attrs: &mut Vec<(Attr, Val)>) {
        if self.steps == 0 {
            return;
        }
        attrs.extend([
            (Attr::StepsDone, Val::U(self.steps)),
            (Attr::StepsTime, Val::U(self.time_ns)),
            (Attr::StepMaxTime, Val::U(self.longest_ns)),
        ]);
        if self.bytes > 0 {
            attrs.push((Attr::StepsBytes, Val::U(self.bytes)));
        }
        for (attr, &ns) in WAIT_CLASS_ATTRIBUTES.iter().zip(&self.wait_ns) {
            if ns > 0 {
                attrs.push((*attr, Val::U(ns)));
            }
        }
    }
}

/// The step's own size: only SendWait and RecvFlushWait carry it.
fn step_size(states: &[StateRecord]) -> Option<u64> {
    states.iter().find_map(|s| match (s.state, s.arg) {
        (
            state::PROXY_STEP_SEND_WAIT | state::PROXY_STEP_RECV_FLUSH_WAIT,
            StateArg::TransSize(n),
        ) => Some(n),
        _ => None,
    })
}

/// Calls `run(state, since, until)` for each wait state of a step: a state lasts from its
/// record until the next different one, the last until the step's `stop`.
fn wait_runs(states: &[StateRecord], stop: u64, mut run: impl FnMut(i32, u64, u64)) {
    let mut current: Option<(i32, u64)> = None;
    for s in states {
        if current.is_some_and(|(c, _)| c == s.state) {
            continue;
        }
        if let Some((c, since)) = current {
            run(c, since, s.time_ns);
        }
        current = Some((s.state, s.time_ns));
    }
    if let Some((c, since)) = current {
        run(c, since, stop);
    }
}

/// What the proxy part remembers between events.
pub(super) struct Proxy {
    /// Write each proxy step's wait states as intervals nested in the step (or, in a
    /// summary, add them up).
    step_states: bool,
    /// Steps as intervals, or summed up on their operation.
    step_detail: StepDetail,
    pid: i32,
    /// Open ProxyOps → the proxy timeline of their steps, their direction and (in a
    /// summary) their steps so far.
    op_family: HashMap<u64, OpenOp>,
    /// Proxy threads that reported Idle and not yet Active: since when.
    idle_since: HashMap<i32, u64>,
    /// Region ids of the wait states, by their index in [`WAIT_STATES`], once defined.
    wait_regions: [Option<u32>; WAIT_STATES.len()],
    /// Region ids of send, receive and unknown-direction steps, once looked up.
    step_regions: [Option<u32>; 3],
}

impl Proxy {
    pub(super) fn new(step_states: bool, step_detail: StepDetail, pid: i32) -> Proxy {
        Proxy {
            step_states,
            step_detail,
            pid,
            op_family: HashMap::default(),
            idle_since: HashMap::default(),
            wait_regions: [None; WAIT_STATES.len()],
            step_regions: [None; 3],
        }
    }

    /// A ProxyOp started: its steps will go to its owner's lanes.
    pub(super) fn op_started(&mut self, handle: u64, owner: Owner, event: &Event) {
        if let Event::ProxyOp(op) = event {
            self.op_family.insert(
                handle,
                OpenOp {
                    family: Family::Proxy(owner),
                    is_send: op.is_send,
                    steps: StepSummary::default(),
                },
            );
        }
    }

    /// A ProxyOp finished: its steps are done, and its own interval goes to this timeline.
    pub(super) fn op_finished(&mut self, handle: u64) -> Option<FinishedOp> {
        self.op_family.remove(&handle).map(|op| FinishedOp {
            family: op.family,
            steps: op.steps,
        })
    }

    /// The timeline an open event's interval will go to, when it goes through lanes.
    pub(super) fn timeline_of(&self, view: &OpenView) -> Option<Family> {
        match view.kind.facts().timeline {
            KindTimeline::ProxyConnection => match view.event {
                Event::ProxyOp(_) => Some(Family::Proxy(view.owner)),
                _ => None,
            },
            KindTimeline::ParentProxyOp => Some(self.steps_family(view.parent, view.owner)),
            KindTimeline::GpuChannel => None,
            KindTimeline::CallingThread => Some(Family::Thread(view.start_tid)),
        }
    }

    /// The timeline of a proxy step: its operation's owner, if that one is known, else
    /// the step's.
    fn steps_family(&self, parent: Parent, owner: Owner) -> Family {
        match parent {
            Parent::Local { handle, .. } => self.op_family.get(&handle).map(|op| op.family),
            _ => None,
        }
        .unwrap_or(Family::Proxy(owner))
    }

    /// An idle proxy thread holds back its timeline: the idle interval starts before
    /// whatever comes next.
    pub(super) fn hold_back_idle_threads(&self, watermarks: &mut Watermarks) {
        for (&tid, &since) in &self.idle_since {
            watermarks.hold_back(Family::Thread(tid), since);
        }
    }

    /// A finished ProxyOp on the lanes of its timeline.
    pub(super) fn push_op(
        &mut self,
        w: &mut Writer,
        timelines: &mut Timelines,
        ops: &mut OpsStreams,
        op: FinishedOp,
        e: &FinishedEvent,
    ) {
        let family = op.family;
        let mut item = self.op_item(w, timelines, ops, e);
        op.steps.push_attributes(&mut item.attrs);
        timelines.push(w, family, item, |w| timeline_name(w, ops, family));
    }

    /// A finished ProxyStep: on the lanes of its operation's owner, or, in a summary,
    /// added to its open operation.
    pub(super) fn push_step(
        &mut self,
        w: &mut Writer,
        timelines: &mut Timelines,
        ops: &mut OpsStreams,
        e: &FinishedEvent,
    ) {
        if self.step_detail == StepDetail::Summary {
            if let Parent::Local { handle, .. } = e.parent {
                if let Some(op) = self.op_family.get_mut(&handle) {
                    // A receive step NCCL started again is the same step: counted once,
                    // by the start that goes on.
                    if e.closed != Closed::Restarted {
                        op.steps.add(e, self.step_states);
                    }
                    return;
                }
            }
            // Its operation is not open (its start was dropped, or it finished first): the
            // step stays an interval of its own, as without a summary.
        }
        let op = match e.parent {
            Parent::Local { handle, .. } => self.op_family.get(&handle).map(|op| (handle, *op)),
            _ => None,
        };
        // The timeline of its operation's owner when that one is known, else its own.
        let family = op.map_or(Family::Proxy(e.owner), |(_, op)| op.family);
        let mut item = self.step_item(w, timelines, e, op.map(|(_, op)| op.is_send));
        // Inside its operation when that one is known (it is open on one of the lanes).
        if let Some((handle, _)) = op {
            item.nesting = Nesting::Inside(handle);
        }
        timelines.push(w, family, item, |w| timeline_name(w, ops, family));
    }

    fn op_item(
        &mut self,
        w: &mut Writer,
        timelines: &mut Timelines,
        ops: &OpsStreams,
        e: &FinishedEvent,
    ) -> Item {
        let Event::ProxyOp(op) = e.event else {
            unreachable!("called for ProxyOps only")
        };
        let name = if op.is_send {
            "proxy send"
        } else {
            "proxy recv"
        };
        let region = w.defs.static_region_in(
            name,
            Role::DataTransfer,
            "a proxy operation: one channel's transfer with one peer for one NCCL operation",
            RegionGroup::ProxyOperations,
        );
        let mut attrs = timelines.spare_attrs();
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
                let task = ops.pending_event(handle).or(e.parent_event.copied());
                if let Some(task) = task {
                    push_op_key(&mut w.defs, &mut attrs, &task, false);
                }
            }
            _ => {}
        }
        if let Some(comm) = &e.comm {
            attrs.push((Attr::CommHash, Val::U(comm.comm_hash)));
        }
        if e.closed != Closed::Stopped {
            attrs.push((Attr::Closed, static_text(&mut w.defs, e.closed.name())));
        }
        Item {
            start: e.start_ns,
            stop: e.stop_ns,
            region,
            leaf: false,
            chains: false,
            attrs,
            inner: Vec::new(),
            // Never part of another operation; its steps look for it by its handle.
            nesting: Nesting::Alone,
            key: e.handle,
        }
    }

    /// A step's interval; `op_is_send` is its open operation's direction, if known.
    fn step_item(
        &mut self,
        w: &mut Writer,
        timelines: &mut Timelines,
        e: &FinishedEvent,
        op_is_send: Option<bool>,
    ) -> Item {
        let Event::ProxyStep { step } = e.event else {
            unreachable!("called for ProxySteps only")
        };
        let direction = step_direction(op_is_send, e.states);
        let cached = &mut self.step_regions[match direction {
            Some(true) => 0,
            Some(false) => 1,
            None => 2,
        }];
        let region = *cached.get_or_insert_with(|| {
            w.defs.static_region_in(
                match direction {
                    Some(true) => "send step",
                    Some(false) => "recv step",
                    None => "proxy step",
                },
                Role::DataTransfer,
                "one proxy step (a slice of a proxy operation through the network)",
                RegionGroup::ProxyOperations,
            )
        });
        let mut attrs = timelines.spare_attrs();
        attrs.push((Attr::Step, Val::U(step.max(0) as u64)));
        if let Some(size) = step_size(e.states) {
            attrs.push((Attr::TransSize, Val::U(size)));
        }
        if e.closed != Closed::Stopped {
            attrs.push((Attr::Closed, static_text(&mut w.defs, e.closed.name())));
        }
        let mut inner = timelines.spare_inner();
        let states = if self.step_states { e.states } else { &[] };
        wait_runs(states, e.stop_ns, |step_state, since, until| {
            if let Some(region) = self.wait_region(&mut w.defs, step_state) {
                inner.push((since, until, region));
            }
        });
        Item {
            start: e.start_ns,
            stop: e.stop_ns,
            region,
            leaf: true,
            chains: false,
            attrs,
            inner,
            nesting: Nesting::Alone,
            key: 0,
        }
    }

    /// The region of a wait state's intervals (`None` for a state that is none),
    /// defined on its first use.
    fn wait_region(&mut self, defs: &mut Definitions, step_state: i32) -> Option<u32> {
        let index = wait_state_index(step_state)?;
        let wait = &WAIT_STATES[index];
        Some(*self.wait_regions[index].get_or_insert_with(|| {
            defs.static_region_in(
                wait.name,
                Role::DataTransfer,
                wait.description,
                RegionGroup::WaitStates,
            )
        }))
    }

    /// A ProxyCtrl: the proxy thread's sleep and append intervals, and the start or end of
    /// its idle time.
    pub(super) fn ctrl(&mut self, w: &mut Writer, timelines: &mut Timelines, e: &FinishedEvent) {
        let tid = e.start_tid;
        let find = |wanted: i32| e.states.iter().find(|s| s.state == wanted);
        if let (Some(sleep), wakeup) = (
            find(state::PROXY_CTRL_SLEEP),
            find(state::PROXY_CTRL_WAKEUP),
        ) {
            let region = w.defs.static_region_in(
                "proxy sleep",
                Role::Artificial,
                "the proxy thread waits for work",
                RegionGroup::WaitStates,
            );
            let stop = wakeup.map_or(e.stop_ns, |s| s.time_ns);
            timelines.push_thread(w, tid, Item::leaf(sleep.time_ns, stop, region, Vec::new()));
        }
        if let Some(append) = find(state::PROXY_CTRL_APPEND) {
            let region = w.defs.static_region_in(
                "proxy append",
                Role::Artificial,
                "the proxy thread takes posted operations",
                RegionGroup::ProxyOperations,
            );
            let end = find(state::PROXY_CTRL_APPEND_END);
            let appended = end.map_or(0, |s| match s.arg {
                StateArg::Appended(n) => n,
                _ => 0,
            });
            let stop = end.map_or(e.stop_ns, |s| s.time_ns);
            timelines.push_thread(
                w,
                tid,
                Item::leaf(
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
                push_idle(w, timelines, tid, since, active.time_ns);
            }
        }
    }

    /// The end: threads still idle are idle until `now`.
    pub(super) fn close(&mut self, w: &mut Writer, timelines: &mut Timelines, now: u64) {
        let idle: Vec<(i32, u64)> = self.idle_since.drain().collect();
        for (tid, since) in idle {
            push_idle(w, timelines, tid, since, now.max(since));
        }
    }
}

fn push_idle(w: &mut Writer, timelines: &mut Timelines, tid: i32, since: u64, until: u64) {
    let region = w.defs.static_region_in(
        "proxy idle",
        Role::Artificial,
        "the proxy thread has no operation in progress",
        RegionGroup::WaitStates,
    );
    timelines.push_thread(
        w,
        tid,
        Item {
            start: since,
            stop: until.max(since),
            region,
            leaf: false,
            chains: false,
            attrs: Vec::new(),
            inner: Vec::new(),
            nesting: Nesting::ByTime,
            key: 0,
        },
    );
}

/// Whether a step sends (`Some(true)`), receives, or cannot say: its operation's
/// direction when the operation is known, else what its states say. A step whose operation
/// and states were all lost (dropped records, or NCCL's NULL ProxyOp handle) says nothing.
fn step_direction(op_is_send: Option<bool>, states: &[StateRecord]) -> Option<bool> {
    op_is_send.or_else(|| states.iter().find_map(|s| Some(wait_state(s.state)?.send)))
}

/// How the locations of a timeline are named, and their location group.
fn timeline_name(w: &mut Writer, ops: &mut OpsStreams, family: Family) -> (String, u32) {
    match family {
        Family::Thread(tid) => thread_timeline_name(tid),
        Family::Proxy(owner) => {
            let (prefix, group) = owner_prefix(w, ops, owner);
            (format!("{prefix} proxy"), group)
        }
    }
}

/// How the locations of an owner are named, and their location group.
fn owner_prefix(w: &mut Writer, ops: &mut OpsStreams, owner: Owner) -> (String, u32) {
    match owner {
        Owner::Local(context) => ops.rank_label_and_group(w, context),
        // Another process's communicator rank, known by its context value.
        Owner::Foreign { pid, context } => (
            format!("PXN for pid {pid} ctx {context:#x}"),
            Definitions::PROCESS_GROUP,
        ),
        Owner::Unknown => ("unknown comm".to_owned(), Definitions::PROCESS_GROUP),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states(values: &[i32]) -> Vec<StateRecord> {
        values
            .iter()
            .map(|&state| StateRecord {
                state,
                time_ns: 0,
                thread: 0,
                arg: StateArg::None,
            })
            .collect()
    }

    /// A step's direction is its operation's; without one, its states'; with neither (a
    /// send step whose operation and states a full ring dropped), unknown: it used to be
    /// called a receive step.
    #[test]
    fn a_step_is_named_by_its_operation_then_its_states_else_unknown() {
        let send = states(&[state::PROXY_STEP_SEND_GPU_WAIT, state::PROXY_STEP_SEND_WAIT]);
        let recv = states(&[state::PROXY_STEP_RECV_WAIT]);
        assert_eq!(step_direction(Some(true), &[]), Some(true));
        assert_eq!(step_direction(Some(false), &[]), Some(false));
        assert_eq!(step_direction(Some(false), &send), Some(false));
        assert_eq!(step_direction(None, &send), Some(true));
        assert_eq!(step_direction(None, &recv), Some(false));
        assert_eq!(
            step_direction(None, &states(&[state::PROXY_STEP_SEND_PEER_WAIT_V4])),
            Some(true)
        );
        assert_eq!(step_direction(None, &[]), None);
    }

    /// A step's states from (state, time, size).
    fn step_states(states: &[(i32, u64, Option<u64>)]) -> Vec<StateRecord> {
        states
            .iter()
            .map(|&(state, time_ns, size)| StateRecord {
                state,
                time_ns,
                thread: 1,
                arg: size.map_or(StateArg::None, StateArg::TransSize),
            })
            .collect()
    }

    fn step(start: u64, stop: u64, states: &[StateRecord]) -> FinishedEvent<'_> {
        FinishedEvent {
            handle: 9,
            kind: crate::event::Kind::ProxyStep,
            owner: Owner::Local(1),
            comm: None,
            parent: Parent::None,
            rank: 0,
            event: Event::ProxyStep { step: 0 },
            start_ns: start,
            start_tid: 1,
            stop_ns: stop,
            stop_tid: Some(1),
            states,
            closed: Closed::Stopped,
            gpu: None,
            gpu_rejected: None,
            parent_event: None,
        }
    }

    /// A summary adds up what the step intervals would show: each wait state from its
    /// record to the next different one (a repeated state goes on), the last to the
    /// step's stop; the step's size from its SendWait or RecvFlushWait.
    #[test]
    fn a_summary_adds_up_the_steps_wait_states_as_their_intervals_would_show_them() {
        let send_states = step_states(&[
            (state::PROXY_STEP_SEND_GPU_WAIT, 100, None),
            (state::PROXY_STEP_SEND_WAIT, 130, Some(4096)),
        ]);
        let send = step(100, 190, &send_states);
        let recv_states = step_states(&[
            (state::PROXY_STEP_RECV_WAIT, 210, None),
            (state::PROXY_STEP_RECV_FLUSH_WAIT, 260, Some(8192)),
            (state::PROXY_STEP_RECV_FLUSH_WAIT, 270, Some(8192)),
            (state::PROXY_STEP_RECV_GPU_WAIT, 280, None),
        ]);
        let recv = step(200, 300, &recv_states);
        let mut runs = Vec::new();
        wait_runs(recv.states, recv.stop_ns, |s, since, until| {
            runs.push((s, since, until))
        });
        assert_eq!(
            runs,
            [
                (state::PROXY_STEP_RECV_WAIT, 210, 260),
                (state::PROXY_STEP_RECV_FLUSH_WAIT, 260, 280),
                (state::PROXY_STEP_RECV_GPU_WAIT, 280, 300),
            ]
        );

        let mut summary = StepSummary::default();
        summary.add(&send, true);
        summary.add(&recv, true);
        assert_eq!(
            summary,
            StepSummary {
                steps: 2,
                bytes: 4096 + 8192,
                time_ns: 90 + 100,
                longest_ns: 100,
                // GPU 30 + 20, peer none, network 60 + 50, flush 20.
                wait_ns: [50, 0, 110, 20],
            }
        );
        let mut attrs = Vec::new();
        summary.push_attributes(&mut attrs);
        let names: Vec<&str> = attrs
            .iter()
            .map(|(attr, _)| super::super::defs::ATTRIBUTES[*attr as usize].0)
            .collect();
        assert_eq!(
            names,
            [
                "nccl.steps_done",
                "nccl.steps_ns",
                "nccl.step_max_ns",
                "nccl.steps_bytes",
                "nccl.gpu_wait_ns",
                "nccl.network_wait_ns",
                "nccl.flush_ns",
            ],
            "no peer wait: none was seen"
        );
        assert!(matches!(attrs[4].1, Val::U(50)));

        // Without the wait states, only the steps, their time and their bytes.
        let mut without = StepSummary::default();
        without.add(&send, false);
        assert_eq!(without.wait_ns, [0; 4]);
        assert_eq!(
            (without.steps, without.bytes, without.time_ns),
            (1, 4096, 90)
        );
        // Sizes are NCCL's, unchecked: their sum saturates instead of wrapping.
        let huge_states = step_states(&[(state::PROXY_STEP_SEND_WAIT, 0, Some(u64::MAX))]);
        let huge = step(0, 1, &huge_states);
        let mut saturated = StepSummary::default();
        saturated.add(&huge, true);
        saturated.add(&huge, true);
        assert_eq!(saturated.bytes, u64::MAX);
        // An operation without steps carries nothing.
        let mut none = Vec::new();
        StepSummary::default().push_attributes(&mut none);
        assert!(none.is_empty());
    }
}
