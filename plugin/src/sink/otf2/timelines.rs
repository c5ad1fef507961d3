//! The timelines whose intervals go through lanes (CPU threads, and the proxy of each
//! communicator rank): their items wait until no open event can start before them, then go
//! to the lane locations of their timeline. The host-side events and lost records are put
//! here too.

use super::attributes::{static_text, Attributes, Val};
use super::defs::{Attr, Definitions, LocationKind, LocationOrder, RegionGroup, Role};
use super::lanes::{Interval, LaneOutput, Lanes, Nesting};
use super::writer::{Loc, Writer};
use super::Otf2Stats;
use crate::event::Kind;
use crate::model::{Closed, FinishedEvent, Gap, HeldBack, Owner};
use nccl_profiler_abi::state;
use rustc_hash::FxHashMap as HashMap;

/// Lanes a thread's timeline may open before intervals are squeezed (and counted).
const MAX_THREAD_LANES: usize = 64;

/// Finished intervals a timeline may hold back before they are placed regardless.
const MAX_PENDING: usize = 1 << 16;

/// Attributes and inner parts an item is allocated room for.
const ATTRS_CAPACITY: usize = 24;
const INNER_CAPACITY: usize = 8;
/// Spare vectors kept of each sort (more are freed): enough for the items of a pass in
/// a steady run; after a burst the surplus is given back rather than held (each costs
/// about 800 bytes, and 65 536 of them once held 50 MiB).
const MAX_SPARES: usize = 1 << 12;

/// The timelines whose intervals go through lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Family {
    /// An OS thread (by tid).
    Thread(i32),
    /// The proxy operations and steps of one communicator rank (of this process, or of
    /// another one for PXN), all its channels, peers and directions together.
    Proxy(Owner),
}

impl Family {
    /// Lanes this timeline may open before intervals are squeezed.
    fn max_lanes(self, proxy_lanes: usize) -> usize {
        match self {
            Family::Thread(_) => MAX_THREAD_LANES,
            Family::Proxy(_) => proxy_lanes,
        }
    }
}

/// How the timeline of thread `tid` is named until its role is known, and its location
/// group.
pub(super) fn thread_timeline_name(tid: i32) -> (String, u32) {
    (format!("thread {tid}"), Definitions::PROCESS_GROUP)
}

/// What a thread was seen doing, from the events it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum ThreadRole {
    /// None of the below: one of NCCL's other threads (e.g. a network plugin's).
    #[default]
    Nccl,
    /// It started proxy operations, steps or proxy control events.
    Proxy,
    /// It called the NCCL API (group, collective, point-to-point) or launched kernels.
    Application,
}

impl ThreadRole {
    /// The role events of `kind` show; `None` when they show nothing.
    fn of(kind: Kind) -> Option<ThreadRole> {
        match kind {
            Kind::GroupApi | Kind::CollApi | Kind::P2pApi | Kind::KernelLaunch => {
                Some(ThreadRole::Application)
            }
            Kind::ProxyOp | Kind::ProxyStep | Kind::ProxyCtrl => Some(ThreadRole::Proxy),
            _ => None,
        }
    }

    /// The name of thread `tid`'s timeline once its role is known (the tid stays in it).
    pub(super) fn timeline_name(self, tid: i32) -> String {
        match self {
            ThreadRole::Application => format!("application thread {tid}"),
            ThreadRole::Proxy => format!("proxy thread {tid}"),
            ThreadRole::Nccl => format!("NCCL thread {tid}"),
        }
    }
}

/// One interval waiting for its lane.
pub(super) struct Item {
    pub(super) start: u64,
    pub(super) stop: u64,
    pub(super) region: u32,
    pub(super) leaf: bool,
    /// Coll/P2p enqueues of one plan (see [`Interval::chains`]).
    pub(super) chains: bool,
    pub(super) attrs: Vec<(Attr, Val)>,
    /// Consecutive parts inside a leaf (e.g. a proxy step's wait states).
    pub(super) inner: Vec<(u64, u64, u32)>,
    /// What it may be written inside (see [`Nesting`]).
    pub(super) nesting: Nesting,
    /// What items with [`Nesting::Inside`] look for (a proxy operation's handle).
    pub(super) key: u64,
}

impl Item {
    /// An interval written whole, with nothing nested in it.
    pub(super) fn leaf(start: u64, stop: u64, region: u32, attrs: Vec<(Attr, Val)>) -> Item {
        Item {
            start,
            stop: stop.max(start),
            region,
            leaf: true,
            chains: false,
            attrs,
            inner: Vec::new(),
            nesting: Nesting::ByTime,
            key: 0,
        }
    }
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
    fn nesting(&self) -> Nesting {
        self.nesting
    }
    fn key(&self) -> u64 {
        self.key
    }
}

/// Vectors of written items, kept to be reused by the next items.
#[derive(Default)]
struct Spares {
    attrs: Vec<Vec<(Attr, Val)>>,
    inner: Vec<Vec<(u64, u64, u32)>>,
}

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

struct Timeline {
    lanes: Lanes<Item>,
    locs: Vec<Loc>,
    name: String,
    group: u32,
    /// Whether its lanes are numbered from the first (`… proxy lane 1`), or the first
    /// one has the timeline's name and the others a `(lane N)` suffix (a thread's).
    numbered: bool,
    /// Where its locations go in the order of the definitions.
    order: LocationOrder,
}

impl Timeline {
    /// Its lanes, and what writes the intervals they place.
    fn lanes_and_placer<'a>(
        &'a mut self,
        w: &'a mut Writer,
        spares: &'a mut Spares,
    ) -> (&'a mut Lanes<Item>, Placer<'a>) {
        let Timeline {
            lanes,
            locs,
            name,
            group,
            numbered,
            order,
        } = self;
        let placer = Placer {
            w,
            locs,
            name,
            group: *group,
            numbered: *numbered,
            order: *order,
            spares,
        };
        (lanes, placer)
    }
}

/// The name of lane `lane` (counted from 0) of a timeline named `timeline`: lanes of a
/// thread beyond the first get a `(lane N)` suffix, proxy lanes are all numbered.
fn lane_name(timeline: &str, lane: usize, numbered: bool) -> String {
    match lane {
        _ if numbered => format!("{timeline} lane {}", lane + 1),
        0 => timeline.to_owned(),
        n => format!("{timeline} (lane {})", n + 1),
    }
}

/// Writes placed intervals of one timeline, opening lane locations on demand.
struct Placer<'a> {
    w: &'a mut Writer,
    locs: &'a mut Vec<Loc>,
    name: &'a str,
    group: u32,
    numbered: bool,
    order: LocationOrder,
    spares: &'a mut Spares,
}

impl Placer<'_> {
    fn loc(&mut self, lane: usize) -> Loc {
        while self.locs.len() <= lane {
            let name = lane_name(self.name, self.locs.len(), self.numbered);
            let loc = self
                .w
                .add_location(&name, LocationKind::CpuThread, self.group, self.order);
            self.locs.push(loc);
        }
        self.locs[lane]
    }
}

impl LaneOutput<Item> for Placer<'_> {
    fn open(&mut self, lane: usize, item: &Item, start: u64, stop: u64) {
        let loc = self.loc(lane);
        if item.leaf {
            self.w
                .leaf(loc, start, stop, item.region, &item.attrs, &item.inner);
        } else {
            self.w.enter_with(loc, start, item.region, &item.attrs);
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

/// Per timeline, the earliest start among its open events: what starts before it can be
/// placed.
#[derive(Default)]
pub(super) struct Watermarks(HashMap<Family, u64>);

impl Watermarks {
    /// Something of `family` that started at `time` is still open.
    pub(super) fn hold_back(&mut self, family: Family, time: u64) {
        let mark = self.0.entry(family).or_insert(u64::MAX);
        *mark = (*mark).min(time);
    }
}

/// Every timeline that goes through lanes, with the vectors its items reuse.
pub(super) struct Timelines {
    timelines: HashMap<Family, Timeline>,
    /// Lanes each proxy timeline may open (`NCCL_SCOREP_PROXY_LANES`).
    proxy_lanes: usize,
    /// Proxy intervals squeezed because every lane of their owner was in use.
    squeezed_proxy_intervals: u64,
    spares: Spares,
    /// Times a timeline held back so many intervals that they were placed regardless.
    held_back_overflow: u64,
    /// Intervals the lanes squeezed, counted when they are closed.
    clipped_intervals: u64,
    /// What each thread was seen doing; its locations are named by it at the end.
    thread_roles: HashMap<i32, ThreadRole>,
    /// The thread and role last noted in `thread_roles`: most events repeat them.
    last_role: Option<(i32, ThreadRole)>,
}

impl Timelines {
    /// Timelines whose proxy owners may open `proxy_lanes` lanes each (1 to
    /// [`crate::config::MAX_PROXY_LANES`]).
    pub(super) fn new(proxy_lanes: usize) -> Timelines {
        Timelines {
            timelines: HashMap::default(),
            proxy_lanes: proxy_lanes.clamp(1, crate::config::MAX_PROXY_LANES),
            squeezed_proxy_intervals: 0,
            spares: Spares::default(),
            held_back_overflow: 0,
            clipped_intervals: 0,
            thread_roles: HashMap::default(),
            last_role: None,
        }
    }

    /// Lanes each proxy timeline may open.
    pub(super) fn proxy_lanes(&self) -> usize {
        self.proxy_lanes
    }

    /// An empty vector for an item's attributes.
    pub(super) fn spare_attrs(&mut self) -> Vec<(Attr, Val)> {
        self.spares.attrs()
    }

    /// An empty vector for an item's inner parts.
    pub(super) fn spare_inner(&mut self) -> Vec<(u64, u64, u32)> {
        self.spares.inner()
    }

    /// Adds an interval to its timeline; `name` names a timeline seen for the first time
    /// (and gives its location group).
    pub(super) fn push(
        &mut self,
        w: &mut Writer,
        family: Family,
        item: Item,
        name: impl FnOnce(&mut Writer) -> (String, u32),
    ) {
        if let Some(timeline) = self.timelines.get_mut(&family) {
            timeline.lanes.push(item);
            if timeline.lanes.pending() <= MAX_PENDING {
                return;
            }
        } else {
            let (name, group) = name(w);
            let mut lanes = Lanes::new(family.max_lanes(self.proxy_lanes));
            lanes.push(item);
            let (numbered, order) = match family {
                Family::Thread(_) => (false, LocationOrder::Thread),
                Family::Proxy(Owner::Local(_)) => (true, LocationOrder::ProxyLane),
                Family::Proxy(_) => (true, LocationOrder::ForeignProxyLane),
            };
            self.timelines.insert(
                family,
                Timeline {
                    lanes,
                    locs: Vec::new(),
                    name,
                    group,
                    numbered,
                    order,
                },
            );
        }
        let timeline = self.timelines.get_mut(&family).expect("exists");
        if timeline.lanes.pending() > MAX_PENDING {
            // Something stays open far too long: place what we have rather than grow.
            self.held_back_overflow += 1;
            let (lanes, mut placer) = timeline.lanes_and_placer(w, &mut self.spares);
            lanes.flush(u64::MAX, &mut placer);
        }
    }

    /// Adds an interval to the timeline of thread `tid`.
    pub(super) fn push_thread(&mut self, w: &mut Writer, tid: i32, item: Item) {
        self.push(w, Family::Thread(tid), item, |_| thread_timeline_name(tid));
    }

    /// A host-side event: the interval of the thread that started it.
    pub(super) fn thread_interval(
        &mut self,
        w: &mut Writer,
        attributes: &mut Attributes,
        e: &FinishedEvent,
    ) {
        let region = attributes.thread_region_id(&mut w.defs, e);
        let mut attrs = self.spares.attrs();
        attributes.push_event_attrs(&mut w.defs, &mut attrs, e);
        if e.closed != Closed::Stopped {
            attrs.push((Attr::Closed, static_text(&mut w.defs, e.closed.name())));
        }
        if e.kind == Kind::GroupApi {
            // From GroupEndApiStart to the stop: launching the group's work. It nests in
            // the group (same stop), and the launches nest in it.
            if let Some(s) = e
                .states
                .iter()
                .find(|s| s.state == state::GROUP_END_API_START)
            {
                let launch = w.defs.static_region_in(
                    "ncclGroupEnd launch",
                    Role::Function,
                    "from the outermost ncclGroupEnd to the end of the group's launches",
                    RegionGroup::ApiCalls,
                );
                let start = s.time_ns.clamp(e.start_ns, e.stop_ns);
                self.push_thread(
                    w,
                    e.start_tid,
                    Item {
                        start,
                        stop: e.stop_ns,
                        region: launch,
                        leaf: false,
                        chains: false,
                        attrs: Vec::new(),
                        inner: Vec::new(),
                        nesting: Nesting::ByTime,
                        key: 0,
                    },
                );
            }
        }
        self.push_thread(
            w,
            e.start_tid,
            Item {
                start: e.start_ns,
                stop: e.stop_ns,
                region,
                leaf: false,
                chains: e.kind.facts().is_task,
                attrs,
                inner: Vec::new(),
                nesting: Nesting::ByTime,
                key: 0,
            },
        );
    }

    /// Records a thread's ring dropped: an interval on that thread.
    pub(super) fn gap(&mut self, w: &mut Writer, gap: &Gap) {
        let region = w.defs.static_region(
            "NCCL records lost",
            Role::Artificial,
            "the plugin's buffer for this thread was full: records in this interval were dropped",
        );
        self.push_thread(
            w,
            gap.tid,
            Item::leaf(
                gap.first_ns,
                gap.last_ns,
                region,
                vec![(Attr::Lost, Val::U(gap.dropped_total))],
            ),
        );
    }

    /// Records a thread waited for room in its ring: an interval on that thread.
    pub(super) fn held_back(&mut self, w: &mut Writer, held: &HeldBack) {
        let region = w.defs.static_region(
            crate::model::HELD_BACK_REGION,
            Role::Artificial,
            "the plugin's buffer for this thread was full: NCCL's thread waited here until \
             the plugin had made room (NCCL_SCOREP_ON_FULL=wait, or a communicator's init or \
             finalize)",
        );
        self.push_thread(
            w,
            held.tid,
            Item::leaf(
                held.since_ns,
                held.until_ns,
                region,
                vec![(Attr::HeldBack, Val::U(held.until_ns - held.since_ns))],
            ),
        );
    }

    /// Places, on every timeline, what starts before its watermark (everything where none
    /// is given).
    pub(super) fn flush(&mut self, w: &mut Writer, watermarks: &Watermarks) {
        for (family, timeline) in &mut self.timelines {
            let mark = watermarks.0.get(family).copied().unwrap_or(u64::MAX);
            let (lanes, mut placer) = timeline.lanes_and_placer(w, &mut self.spares);
            lanes.flush(mark, &mut placer);
        }
    }

    /// Thread `tid` started an event of `kind`: the strongest role seen names the thread
    /// (an application thread that also drives a proxy stays an application thread).
    pub(super) fn saw_thread(&mut self, tid: i32, kind: Kind) {
        let Some(role) = ThreadRole::of(kind) else {
            return;
        };
        if self.last_role == Some((tid, role)) {
            return;
        }
        let seen = self.thread_roles.entry(tid).or_default();
        *seen = (*seen).max(role);
        self.last_role = Some((tid, role));
    }

    /// Places everything, closes every open interval, and names each thread's locations
    /// by the role it was seen in.
    pub(super) fn finish(&mut self, w: &mut Writer) {
        for (family, timeline) in self.timelines.iter_mut() {
            let (lanes, mut placer) = timeline.lanes_and_placer(w, &mut self.spares);
            lanes.finish(&mut placer);
            self.clipped_intervals += lanes.clipped;
            match *family {
                Family::Thread(tid) => {
                    let role = self.thread_roles.get(&tid).copied().unwrap_or_default();
                    timeline.name = role.timeline_name(tid);
                    for (lane, &loc) in timeline.locs.iter().enumerate() {
                        w.rename_location(loc, &lane_name(&timeline.name, lane, false));
                    }
                }
                Family::Proxy(_) => self.squeezed_proxy_intervals += lanes.clipped,
            }
        }
    }

    /// Adds this part's counts to the writer's.
    pub(super) fn add_counts(&self, stats: &mut Otf2Stats) {
        stats.held_back_overflow += self.held_back_overflow;
        stats.clipped_intervals += self.clipped_intervals;
        stats.squeezed_proxy_intervals += self.squeezed_proxy_intervals;
    }
}
