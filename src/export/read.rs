//! The trace's events as Chrome events, written as they are read: each Enter/Leave pair a
//! "B"/"E" slice with the Enter's attributes as args; each point-to-point message a flow
//! from the sender's Send slice to the receiver's Recv slice; each PXN proxy operation a
//! flow from the operation it worked for.
//!
//! With `--processes`, only their locations are read, and messages whose other end is
//! in a process left out are passed over.
//!
//! What is held: the open intervals of the location being read, the messages whose other
//! end has not been read yet (the ops streams are read one after the other, so a message
//! waits until its other end's stream is read), a counter per (communicator, sender,
//! receiver, tag), and the PXN proxy operations with the operations they name.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

use otf2_sys::read::{AttributeValue, EventContext, EventVisitor, GlobalDefs, MpiMessage};

use super::json::{quoted, TraceJson, Track};
use super::layout::Layout;
use crate::profile::LocationKind;

/// The trace's clock: ticks to nanoseconds since the trace's start.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// The first tick of the trace.
    pub offset: u64,
    /// Ticks per second.
    pub resolution: u64,
}

impl Clock {
    pub fn of(defs: &GlobalDefs) -> Clock {
        defs.clock.as_ref().map_or(
            Clock {
                offset: 0,
                resolution: 1_000_000_000,
            },
            |c| Clock {
                offset: c.global_offset,
                resolution: c.timer_resolution.max(1),
            },
        )
    }

    /// Nanoseconds of `ticks` since the trace's start.
    pub fn ns(&self, ticks: u64) -> i64 {
        let relative = i128::from(ticks) - i128::from(self.offset);
        (relative * 1_000_000_000 / i128::from(self.resolution)) as i64
    }

    /// The tick `ns` nanoseconds after the trace's start.
    pub fn ticks(&self, ns: u64) -> u64 {
        let ticks = u128::from(ns) * u128::from(self.resolution) / 1_000_000_000;
        u64::try_from(u128::from(self.offset) + ticks).unwrap_or(u64::MAX)
    }
}

/// The ticks whose intervals are kept: every interval that overlaps `[start, end]`.
#[derive(Clone, Copy, Debug)]
pub struct Range {
    pub start: u64,
    pub end: u64,
}

/// What was linked and what was not.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub p2p_flows: u64,
    pub pxn_flows: u64,
    /// Messages whose other end is not in the trace.
    pub unmatched_messages: u64,
    /// Links left out because their end would lie before their start (clocks of
    /// different hosts).
    pub backwards_links: u64,
    /// Exported PXN proxy operations whose operation is not in the export.
    pub pxn_unlinked: u64,
    /// Intervals the trace never closed, closed at their location's last event.
    pub unclosed: u64,
}

/// Which locations are being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The PXN proxy locations, one by one: their operations are collected.
    Pxn,
    /// The ops streams, one by one: messages are matched, operations that PXN proxy
    /// operations name are collected.
    Ops,
    /// Every other location, one by one.
    Others,
}

/// A written slice: where, from when to when, and the time of the record that links it.
#[derive(Clone, Copy, Debug)]
struct Slice {
    track: Track,
    start: u64,
    end: u64,
    at: u64,
    /// When its first nested slice begins (its end when none does).
    first_child: u64,
}

impl Slice {
    /// A tick for a flow's end at the slice's beginning that binds to it rather than to a
    /// slice nested in it.
    fn first_instant(&self) -> u64 {
        if self.start + 1 < self.first_child.min(self.end) {
            self.start + 1
        } else {
            self.start
        }
    }

    /// A tick for a flow's end near `at`, strictly inside the slice when it is long enough:
    /// a viewer binds a flow to the slice that encloses its time, and a slice's first or
    /// last tick may be shared by its neighbours.
    fn inside(&self, at: u64) -> u64 {
        if self.end.saturating_sub(self.start) >= 2 {
            at.clamp(self.start + 1, self.end - 1)
        } else {
            self.start
        }
    }
}

/// One message, named as both its ends see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct MessageKey {
    comm: u32,
    sender: u32,
    receiver: u32,
    tag: u32,
    /// Its place among the messages of the same communicator, ranks and tag.
    n: u64,
}

struct Frame {
    region: u32,
    enter: u64,
    /// Kept only while the frame waits for the window to begin.
    attributes: Vec<(u32, AttributeValue)>,
    emitted: bool,
    /// A message record inside it: (message, is the receive, its time).
    message: Option<(MessageKey, bool, u64)>,
    /// PXN: (pid, task) of the operation it is or works for.
    pxn: Option<(i64, u64)>,
    /// When its first nested interval began.
    first_child: Option<u64>,
}

#[derive(Default)]
struct LocationState {
    stack: Vec<Frame>,
    /// An event at or after the window's start was seen.
    in_window: bool,
    last: u64,
}

/// What an attribute becomes in args.
struct AttributeInfo {
    /// Its name without `nccl.`, as a JSON literal.
    key: String,
    /// A handle or hash: written as a hex string.
    hex: bool,
}

pub struct Exporter<'a, W: Write> {
    defs: &'a GlobalDefs,
    layout: &'a Layout,
    json: &'a mut TraceJson<W>,
    clock: Clock,
    range: Range,
    pub phase: Phase,
    attributes: HashMap<u32, AttributeInfo>,
    pid_id: Option<u32>,
    task_id: Option<u32>,
    pxn_parent_id: Option<u32>,
    strings: HashMap<u32, String>,
    regions: HashMap<u32, String>,
    states: HashMap<u64, LocationState>,
    /// Emitted slices open on the locations being read.
    open_emitted: usize,
    stop: bool,
    pub error: Option<io::Error>,
    args: String,
    /// Messages seen per (comm, sender, receiver, tag, is the receive).
    counters: HashMap<(u32, u32, u32, u32, bool), u64>,
    /// One end of a message read, the other not yet: (is the receive, its slice if
    /// exported).
    waiting: HashMap<MessageKey, (bool, Option<Slice>)>,
    /// Exported PXN proxy operations by (originating pid, task).
    proxies: BTreeMap<(i64, u64), Vec<Slice>>,
    /// Exported operations that PXN proxy operations name.
    operations: HashMap<(i64, u64), Vec<Slice>>,
    next_flow: u64,
    pub stats: Stats,
}

const MAX_EXACT_JSON_INTEGER: u64 = 1 << 53;

impl<'a, W: Write> Exporter<'a, W> {
    pub fn new(
        defs: &'a GlobalDefs,
        layout: &'a Layout,
        json: &'a mut TraceJson<W>,
        range: Range,
    ) -> Self {
        let mut attributes = HashMap::new();
        let (mut pid_id, mut task_id, mut pxn_parent_id) = (None, None, None);
        for (id, attribute) in defs.attributes.by_id() {
            let name = defs.string(attribute.value.name).unwrap_or("");
            match name {
                "nccl.pid" => pid_id = Some(id),
                "nccl.task" => task_id = Some(id),
                "nccl.pxn_parent" => pxn_parent_id = Some(id),
                _ => {}
            }
            let hex = matches!(name, "nccl.comm_hash" | "nccl.task" | "nccl.pxn_parent");
            let key = quoted(name.strip_prefix("nccl.").unwrap_or(name));
            attributes.insert(id, AttributeInfo { key, hex });
        }
        Exporter {
            defs,
            layout,
            json,
            clock: Clock::of(defs),
            range,
            phase: Phase::Pxn,
            attributes,
            pid_id,
            task_id,
            pxn_parent_id,
            strings: HashMap::new(),
            regions: HashMap::new(),
            states: HashMap::new(),
            open_emitted: 0,
            stop: false,
            error: None,
            args: String::new(),
            counters: HashMap::new(),
            waiting: HashMap::new(),
            proxies: BTreeMap::new(),
            operations: HashMap::new(),
            next_flow: 1,
            stats: Stats::default(),
        }
    }

    /// Before a location is read on its own: it may be read to its end.
    pub fn restart(&mut self) {
        self.stop = false;
    }

    /// The end of a read: closes what the trace left open on `locations`.
    pub fn finish_locations(&mut self, locations: &[u64]) {
        for location in locations {
            let Some(mut state) = self.states.remove(location) else {
                continue;
            };
            let Some(thread) = self.layout.threads.get(location) else {
                continue;
            };
            while let Some(frame) = state.stack.pop() {
                if frame.emitted {
                    self.stats.unclosed += 1;
                    self.open_emitted -= 1;
                    let name = self.region_name(frame.region);
                    let ts = self.clock.ns(state.last);
                    let written = self.json.end(&name, ts, thread.track);
                    self.check(written);
                }
            }
        }
    }

    /// The flows of the PXN proxy operations to their operations, once every one of both
    /// has been read.
    pub fn link_pxn(&mut self) {
        let all_operations = std::mem::take(&mut self.operations);
        for (key, proxies) in std::mem::take(&mut self.proxies) {
            let operations = all_operations.get(&key).map_or(&[][..], Vec::as_slice);
            for proxy in proxies {
                // A task handle may be used again by a later operation: the nearest in time.
                let gap = |op: &Slice| {
                    op.start
                        .saturating_sub(proxy.end)
                        .max(proxy.start.saturating_sub(op.end))
                };
                let Some(operation) = operations.iter().min_by_key(|op| gap(op)).copied() else {
                    self.stats.pxn_unlinked += 1;
                    continue;
                };
                // From the one that began first to the other, at their beginnings.
                let operation = (operation, operation.first_instant());
                let proxy = (proxy, proxy.first_instant());
                let (from, to) = if proxy.1 >= operation.1 {
                    (operation, proxy)
                } else {
                    (proxy, operation)
                };
                if self.flow("\"PXN\"", "\"pxn\"", from, to) {
                    self.stats.pxn_flows += 1;
                }
            }
        }
    }

    /// Messages still waiting for their other end: unmatched when every ops stream was
    /// read to its end (`complete`), else their other end may lie past the window.
    pub fn finish_messages(&mut self, complete: bool) {
        if complete {
            self.stats.unmatched_messages += self.waiting.len() as u64;
        }
        self.waiting.clear();
    }

    fn check(&mut self, written: io::Result<()>) {
        if let Err(error) = written {
            self.error.get_or_insert(error);
            self.stop = true;
        }
    }

    /// A flow from one slice to another; false when it would go back in time.
    fn flow(&mut self, name: &str, cat: &str, from: (Slice, u64), to: (Slice, u64)) -> bool {
        if to.1 < from.1 {
            self.stats.backwards_links += 1;
            return false;
        }
        let id = self.next_flow;
        self.next_flow += 1;
        let (start, end) = (self.clock.ns(from.1), self.clock.ns(to.1));
        let written = self
            .json
            .flow(true, name, cat, id, start, from.0.track)
            .and_then(|()| self.json.flow(false, name, cat, id, end, to.0.track));
        self.check(written);
        true
    }

    fn region_name(&mut self, region: u32) -> String {
        if let Some(name) = self.regions.get(&region) {
            return name.clone();
        }
        let name = self
            .defs
            .regions
            .get(&region)
            .and_then(|r| self.defs.string(r.name))
            .map_or_else(|| format!("region {region}"), str::to_owned);
        let name = quoted(&name);
        self.regions.insert(region, name.clone());
        name
    }

    fn string(&mut self, id: u32) -> &str {
        let defs = self.defs;
        self.strings
            .entry(id)
            .or_insert_with(|| quoted(defs.string(id).unwrap_or("")))
    }

    /// The args members of an Enter's attributes, into `self.args`.
    fn format_args(&mut self, attributes: &[(u32, AttributeValue)]) {
        let mut args = std::mem::take(&mut self.args);
        args.clear();
        for &(id, value) in attributes {
            let Some(info) = self.attributes.get(&id) else {
                continue;
            };
            let hex = info.hex;
            if !args.is_empty() {
                args.push(',');
            }
            args.push_str(&info.key);
            args.push(':');
            let large = |text: String| quoted(&text);
            match value {
                AttributeValue::String(id) => args.push_str(self.string(id)),
                AttributeValue::Region(id) => args.push_str(&self.region_name(id)),
                AttributeValue::Float(v) if v.is_finite() => args.push_str(&v.to_string()),
                AttributeValue::Double(v) if v.is_finite() => args.push_str(&v.to_string()),
                other => match (other.unsigned(), other.signed()) {
                    (Some(v), _) if hex => args.push_str(&large(format!("{v:#x}"))),
                    (Some(v), _) if v <= MAX_EXACT_JSON_INTEGER => args.push_str(&v.to_string()),
                    (Some(v), _) => args.push_str(&large(v.to_string())),
                    (_, Some(v)) if v.unsigned_abs() <= MAX_EXACT_JSON_INTEGER => {
                        args.push_str(&v.to_string())
                    }
                    (_, Some(v)) => args.push_str(&large(v.to_string())),
                    _ => args.push_str(&large(format!("{other:?}"))),
                },
            }
        }
        self.args = args;
    }

    /// Writes the "B" of a frame.
    fn begin(
        &mut self,
        location: u64,
        region: u32,
        enter: u64,
        attributes: &[(u32, AttributeValue)],
    ) {
        let Some(thread) = self.layout.threads.get(&location) else {
            return;
        };
        let (track, cat) = (thread.track, thread.cat);
        let name = self.region_name(region);
        self.format_args(attributes);
        let ts = self.clock.ns(enter);
        let written = self.json.begin(&name, cat, ts, track, &self.args);
        self.check(written);
        self.open_emitted += 1;
    }

    /// Every event's first step: the frames that waited for the window's start are
    /// written when it comes; the read stops past the window's end once nothing written
    /// is open.
    fn arrive(&mut self, location: u64, time: u64) -> bool {
        if !self.layout.threads.contains_key(&location) {
            return false;
        }
        let state = self.states.entry(location).or_default();
        state.last = time;
        if !state.in_window && time >= self.range.start {
            state.in_window = true;
            let mut stack = std::mem::take(&mut state.stack);
            for frame in &mut stack {
                if !frame.emitted && frame.enter < self.range.start {
                    frame.emitted = true;
                    let attributes = std::mem::take(&mut frame.attributes);
                    self.begin(location, frame.region, frame.enter, &attributes);
                }
            }
            self.states.get_mut(&location).expect("present").stack = stack;
        }
        if time > self.range.end && self.open_emitted == 0 {
            self.stop = true;
        }
        true
    }

    fn attribute(e: &EventContext<'_>, id: Option<u32>) -> Option<AttributeValue> {
        e.attribute(id?)
    }

    fn signed(e: &EventContext<'_>, id: Option<u32>) -> Option<i64> {
        let v = Self::attribute(e, id)?;
        v.signed().or_else(|| i64::try_from(v.unsigned()?).ok())
    }

    fn unsigned(e: &EventContext<'_>, id: Option<u32>) -> Option<u64> {
        let v = Self::attribute(e, id)?;
        v.unsigned().or_else(|| u64::try_from(v.signed()?).ok())
    }

    fn message(&mut self, e: &EventContext<'_>, message: &MpiMessage, is_recv: bool) {
        if !self.arrive(e.location, e.time) {
            return;
        }
        let Some(&me) = self.layout.ranks.get(&(message.comm, e.location)) else {
            return;
        };
        if self
            .layout
            .left_out_ranks
            .contains(&(message.comm, message.peer))
        {
            // Its other end is in a process `--processes` left out: no flow, and not
            // unmatched either.
            return;
        }
        let (sender, receiver) = if is_recv {
            (message.peer, me)
        } else {
            (me, message.peer)
        };
        let counter = self
            .counters
            .entry((message.comm, sender, receiver, message.tag, is_recv))
            .or_default();
        let key = MessageKey {
            comm: message.comm,
            sender,
            receiver,
            tag: message.tag,
            n: *counter,
        };
        *counter += 1;
        let state = self.states.get_mut(&e.location).expect("arrived");
        match state.stack.last_mut() {
            Some(frame) => frame.message = Some((key, is_recv, e.time)),
            // A record outside any interval: matched, but it has no slice to link.
            None => self.message_end(key, is_recv, None),
        }
    }

    /// One end of a message has its slice (None: not exported).
    fn message_end(&mut self, key: MessageKey, is_recv: bool, slice: Option<Slice>) {
        match self.waiting.remove(&key) {
            Some((other_is_recv, other)) if other_is_recv != is_recv => {
                let (send, recv) = if is_recv {
                    (other, slice)
                } else {
                    (slice, other)
                };
                if let (Some(send), Some(recv)) = (send, recv) {
                    let from = send.inside(send.at);
                    let to = recv.inside(recv.at);
                    if self.flow("\"send\"", "\"p2p\"", (send, from), (recv, to)) {
                        self.stats.p2p_flows += 1;
                    }
                }
            }
            // The same end twice cannot be: the key counts each end's messages.
            Some(entry) => drop(self.waiting.insert(key, entry)),
            None => drop(self.waiting.insert(key, (is_recv, slice))),
        }
    }
}

impl<W: Write> EventVisitor for Exporter<'_, W> {
    fn keep_reading(&self) -> bool {
        !self.stop
    }

    fn enter(&mut self, e: &EventContext<'_>, region: u32) {
        if !self.arrive(e.location, e.time) {
            return;
        }
        let thread = &self.layout.threads[&e.location];
        let (kind, pxn_location) = (thread.kind, thread.pxn);
        let pxn = match self.phase {
            Phase::Pxn if pxn_location => {
                Self::signed(e, self.pid_id).zip(Self::unsigned(e, self.pxn_parent_id))
            }
            Phase::Ops if kind == LocationKind::OpsStream => Self::signed(e, self.pid_id)
                .zip(Self::unsigned(e, self.task_id))
                .filter(|key| self.proxies.contains_key(key)),
            _ => None,
        };
        let in_window = e.time >= self.range.start && e.time <= self.range.end;
        if in_window {
            self.begin(e.location, region, e.time, e.attributes);
        }
        let attributes = if e.time < self.range.start {
            e.attributes.to_vec()
        } else {
            Vec::new()
        };
        let state = self.states.get_mut(&e.location).expect("arrived");
        if let Some(parent) = state.stack.last_mut() {
            parent.first_child.get_or_insert(e.time);
        }
        state.stack.push(Frame {
            region,
            enter: e.time,
            attributes,
            emitted: in_window,
            message: None,
            pxn,
            first_child: None,
        });
    }

    fn leave(&mut self, e: &EventContext<'_>, _region: u32) {
        if !self.arrive(e.location, e.time) {
            return;
        }
        let track = self.layout.threads[&e.location].track;
        let state = self.states.get_mut(&e.location).expect("arrived");
        let Some(frame) = state.stack.pop() else {
            return;
        };
        if frame.emitted {
            self.open_emitted -= 1;
            let name = self.region_name(frame.region);
            let ts = self.clock.ns(e.time);
            let written = self.json.end(&name, ts, track);
            self.check(written);
        }
        let slice = |at| Slice {
            track,
            start: frame.enter,
            end: e.time,
            at,
            first_child: frame.first_child.unwrap_or(e.time),
        };
        if let Some((key, is_recv, at)) = frame.message {
            self.message_end(key, is_recv, frame.emitted.then(|| slice(at)));
        }
        if let (Some(key), true) = (frame.pxn, frame.emitted) {
            let slices = match self.phase {
                Phase::Pxn => self.proxies.entry(key).or_default(),
                _ => self.operations.entry(key).or_default(),
            };
            slices.push(slice(frame.enter));
        }
    }

    fn mpi_send(&mut self, e: &EventContext<'_>, message: &MpiMessage) {
        self.message(e, message, false);
    }

    fn mpi_recv(&mut self, e: &EventContext<'_>, message: &MpiMessage) {
        self.message(e, message, true);
    }

    fn other(&mut self, e: &EventContext<'_>, _record: &'static str) {
        self.arrive(e.location, e.time);
    }
}
