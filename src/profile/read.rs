//! Reads a merged trace into a [`Profile`], one location at a time: first the ops streams
//! for what each collective's parts say together, then every location for the metrics.
//!
//! On every location the Enter/Leave nesting gives the call paths (under one root,
//! "NCCL") and the exclusive time of each; an operation on an ops stream gets two levels
//! of parameters below its region: its algorithm and protocol, and its size bucket. A
//! collective's parts are matched across ranks by `(nccl.comm_hash, nccl.seq, nccl.func)`,
//! as `nccl-scorep summary` matches them. A part's wait for the last rank needs the last
//! rank's arrival, so the ops streams are read twice: the first read keeps, per
//! collective, only its parts' count, latest arrival and latest end (memory that grows
//! with the collectives, not with ranks × collectives); the second knows each part's wait
//! as it reads it. Reading one location at a time, OTF2 holds one event chunk (256 KiB
//! in the plugin's traces) instead of one per ops stream: 4 GiB for 16 384 ranks.
//!
//! Large traces are read by several threads, each a contiguous shard of the locations
//! with a profile of its own; the shards' profiles are added up in order, which gives the
//! profile one thread would (every value belongs to one location, so it is summed in the
//! same order; regions and call paths are defined in the same order).

use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use nccl_scorep_common::read_ahead::{ask_for, ReadAhead};
use otf2_sys::read::{
    CollectiveEnd, EventContext, EventVisitor, GlobalDefs, LocationEvents, MpiMessage, Reader,
};
use otf2_sys::{OTF2_LOCATION_GROUP_TYPE_PROCESS, OTF2_UNDEFINED_UINT32};

use super::{LocationKind, Metric, Process, Profile, ProfileLocation, Sample};
use crate::nccl_ops::{is_point_to_point, size_and_factor};

/// The attributes the profile reads.
#[derive(Clone, Copy, Default)]
struct AttributeIds {
    comm_hash: Option<u32>,
    seq: Option<u32>,
    func: Option<u32>,
    nranks: Option<u32>,
    bytes: Option<u32>,
    algo: Option<u32>,
    proto: Option<u32>,
    enqueue_ns: Option<u32>,
    complete_ns: Option<u32>,
    lost_records: Option<u32>,
    /// A proxy operation's summed-up steps (`NCCL_SCOREP_STEP_DETAIL=summary`): the time
    /// they spent in each wait-state class.
    gpu_wait_ns: Option<u32>,
    peer_wait_ns: Option<u32>,
    network_wait_ns: Option<u32>,
    flush_ns: Option<u32>,
}

/// Threads that read a trace at most, whatever the CPUs: beyond, they mostly wait for
/// the file system.
pub const MAX_READING_THREADS: usize = 8;

/// Locations a reading thread gets at least: each opens the archive anew, which a few
/// small locations do not repay.
const LOCATIONS_PER_THREAD: usize = 256;

/// How many threads read a trace of `locations` locations by default: one per CPU, at
/// most [`MAX_READING_THREADS`], each with at least [`LOCATIONS_PER_THREAD`] locations.
pub fn reading_threads(locations: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    cpus.min(MAX_READING_THREADS)
        .min(locations / LOCATIONS_PER_THREAD)
        .max(1)
}

/// Reads the trace whose anchor file is `anchor` with `threads` threads (None: as many as
/// [`reading_threads`] says); `progress(events read, events in all)` is called now and
/// then, from any of them. With `samples`, the profile also keeps one [`Sample`] per
/// operation (for comparing runs: memory that grows with the operations).
pub fn read_trace(
    anchor: &Path,
    samples: bool,
    threads: Option<usize>,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Profile, String> {
    otf2_sys::install_error_handler(otf2_sys::error::ignore);
    let archive = Reader::open(anchor).map_err(|e| format!("{}: {e}", anchor.display()))?;
    let defs = archive
        .global_definitions()
        .map_err(|e| format!("{}: cannot read the definitions: {e}", anchor.display()))?;
    drop(otf2_sys::error::drain_thread_error_reports());
    let ids = attribute_ids(&defs);
    if ids.func.is_none() {
        return Err(format!(
            "{} has no nccl.func attribute: not an NCCL trace of nccl-scorep",
            anchor.display()
        ));
    }
    let mut profile = Profile {
        source: anchor.to_path_buf(),
        ..Profile::default()
    };
    let locations = define_system(&defs, &mut profile);
    define_root(&mut profile);
    let ns_per_tick = defs
        .clock
        .as_ref()
        .map_or(1.0, |c| 1e9 / c.timer_resolution.max(1) as f64);
    let total_events = defs.locations.iter().map(|l| l.number_of_events).sum();
    let (ops_streams, others): (Vec<u64>, Vec<u64>) = defs
        .locations
        .keys()
        .partition(|id| locations.get(id).map(|&(_, kind)| kind) == Some(LocationKind::OpsStream));
    drop(archive.close());
    let threads = threads
        .unwrap_or_else(|| reading_threads(defs.locations.len()))
        .max(1);
    let unreadable = |error: otf2_sys::Error| {
        format!(
            "{}: the events could not all be read ({error}); `nccl-scorep validate` says why",
            anchor.display()
        )
    };

    // First read: each collective's parts, latest arrival and latest end.
    let gathered = in_threads(&shards(&ops_streams, threads, |id| id), |shard| {
        let mut gatherer = CollectiveGatherer {
            defs: &defs,
            ids: &ids,
            ns_per_tick,
            stack: Vec::new(),
            location: None,
            collectives: HashMap::default(),
        };
        let read = read_one_by_one(anchor, shard, &mut gatherer);
        drop(otf2_sys::error::drain_thread_error_reports());
        read.map(|()| gatherer.collectives)
    });
    let mut collectives: HashMap<CollectiveKey, Collective> = HashMap::default();
    for shard in gathered {
        for (key, found) in shard.map_err(unreadable)? {
            collectives
                .entry(key)
                .and_modify(|known| known.add(&found))
                .or_insert(found);
        }
    }

    // Second read: every location, the ops streams first, for the metrics. The lanes of
    // a profile location are read one after the other, by one thread: their values are
    // summed in the same order whatever the threads.
    let profile_location = |id: u64| locations.get(&id).map_or(usize::MAX, |&(index, _)| index);
    let mut others = others;
    others.sort_by_key(|&id| (profile_location(id), id));
    let in_order: Vec<u64> = ops_streams.into_iter().chain(others).collect();
    let events_read = AtomicU64::new(0);
    let read = in_threads(&shards(&in_order, threads, profile_location), |shard| {
        let mut own = profile.for_a_reader();
        let root = define_root(&mut own);
        let mut reader = ProfileReader {
            defs: &defs,
            ids,
            ns_per_tick,
            profile: own,
            root,
            locations: &locations,
            stacks: HashMap::default(),
            regions: HashMap::default(),
            collectives: &collectives,
            parts_read: HashMap::default(),
            lost_seen: HashMap::default(),
            events: 0,
            events_read: &events_read,
            total_events,
            progress,
            keep_samples: samples,
        };
        let read = read_one_by_one(anchor, shard, &mut reader);
        drop(otf2_sys::error::drain_thread_error_reports());
        read.map(|()| (reader.profile, reader.parts_read))
    });
    // Collectives whose parts lay in several shards are finished here.
    let mut unfinished: BTreeMap<CollectiveKey, PartsRead> = BTreeMap::new();
    for shard in read {
        let (own, parts_read) = shard.map_err(unreadable)?;
        let call_paths = profile.absorb(own);
        for (key, mut read) in parts_read {
            read.last_part.call_path = call_paths[read.last_part.call_path];
            unfinished
                .entry(key)
                .and_modify(|earlier| earlier.add(&read))
                .or_insert(read);
        }
    }
    for (key, read) in unfinished {
        match collectives.get(&key) {
            // Only a trace that changed between the two reads leaves parts unread.
            Some(collective) if read.parts < collective.parts => {
                profile.incomplete_collectives += 1;
            }
            Some(collective) => {
                collective_done(&mut profile, &defs, samples, collective, &read);
            }
            None => {}
        }
    }
    progress(total_events, total_events);
    Ok(profile)
}

/// The root of the call tree, "NCCL": the first region and call path of a profile.
fn define_root(profile: &mut Profile) -> usize {
    let region = profile.region("NCCL", "everything NCCL did in the job", "artificial");
    profile.call_path(region, None, Vec::new())
}

/// `locations` cut into at most `threads` contiguous shards of about equal length, never
/// between two neighbours of one `group`.
fn shards<G: PartialEq>(
    locations: &[u64],
    threads: usize,
    group: impl Fn(u64) -> G,
) -> Vec<&[u64]> {
    let length = locations.len().div_ceil(threads.max(1)).max(1);
    let mut cut = Vec::new();
    let mut rest = locations;
    while !rest.is_empty() {
        let mut end = length.min(rest.len());
        while end < rest.len() && group(rest[end]) == group(rest[end - 1]) {
            end += 1;
        }
        let (shard, after) = rest.split_at(end);
        cut.push(shard);
        rest = after;
    }
    cut
}

/// `work` done on each shard, in a thread each when there are several; the results in
/// the shards' order.
fn in_threads<'s, T: Send>(shards: &[&'s [u64]], work: impl Fn(&'s [u64]) -> T + Sync) -> Vec<T> {
    if shards.len() <= 1 {
        return shards.iter().map(|&shard| work(shard)).collect();
    }
    std::thread::scope(|scope| {
        let work = &work;
        let running: Vec<_> = shards
            .iter()
            .map(|&shard| scope.spawn(move || work(shard)))
            .collect();
        running
            .into_iter()
            .map(|thread| {
                thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

/// Reads the events of each of `locations`, one location after the other.
fn read_one_by_one(
    anchor: &Path,
    locations: &[u64],
    visitor: &mut impl EventVisitor,
) -> Result<(), otf2_sys::Error> {
    each_location(anchor, locations, |_, events| {
        Ok(!events.read_all(visitor)?.interrupted)
    })
}

/// Locations read per opening of the archive by [`each_location`] (and by default by
/// `validate`): OTF2 keeps the mapping tables and clock offsets of every location it read
/// until the archive closes, and finds a location's reader more slowly the more locations
/// are selected.
pub(crate) const LOCATIONS_PER_OPENING: usize = 1024;

/// Opens the archive at `anchor` and hands `read` the event reader of each of `locations`
/// in turn, with the location's mapping tables and clock offsets applied: reading one
/// location at a time keeps one chunk in memory and one location's files open instead of
/// one per location, and the archive is opened again for every
/// [`LOCATIONS_PER_OPENING`] locations. The files of the next locations are asked for
/// while one is read ([`ReadAhead`]). `read` says whether to go on.
pub(crate) fn each_location(
    anchor: &Path,
    locations: &[u64],
    mut read: impl FnMut(u64, LocationEvents<'_, '_>) -> Result<bool, otf2_sys::Error>,
) -> Result<(), otf2_sys::Error> {
    // The location files lie in `traces/` beside `traces.otf2`.
    let directory = anchor.with_extension("");
    let ahead = ReadAhead::start(locations.to_vec(), move |location| {
        for extension in ["evt", "def"] {
            ask_for(&directory.join(format!("{location}.{extension}")));
        }
    });
    let mut index = 0;
    for batch in locations.chunks(LOCATIONS_PER_OPENING) {
        let archive = Reader::open(anchor)?;
        archive.select_locations(batch)?;
        let events = archive.open_event_files()?;
        let definitions = archive.open_definition_files()?;
        let mut go_on = true;
        for &location in batch {
            ahead.reading(index);
            index += 1;
            let location_events = events.location(location)?;
            definitions.apply(location)?;
            if !read(location, location_events)? {
                go_on = false;
                break;
            }
        }
        drop(definitions);
        drop(events);
        archive.close()?;
        if !go_on {
            break;
        }
    }
    Ok(())
}

fn attribute_ids(defs: &GlobalDefs) -> AttributeIds {
    let mut ids = AttributeIds::default();
    for (id, attribute) in defs.attributes.by_id() {
        let slot = match defs.string(attribute.value.name).unwrap_or("") {
            "nccl.comm_hash" => &mut ids.comm_hash,
            "nccl.seq" => &mut ids.seq,
            "nccl.func" => &mut ids.func,
            "nccl.nranks" => &mut ids.nranks,
            "nccl.bytes" => &mut ids.bytes,
            "nccl.algo" => &mut ids.algo,
            "nccl.proto" => &mut ids.proto,
            "nccl.enqueue_ns" => &mut ids.enqueue_ns,
            "nccl.complete_ns" => &mut ids.complete_ns,
            "nccl.lost_records" => &mut ids.lost_records,
            "nccl.gpu_wait_ns" => &mut ids.gpu_wait_ns,
            "nccl.peer_wait_ns" => &mut ids.peer_wait_ns,
            "nccl.network_wait_ns" => &mut ids.network_wait_ns,
            "nccl.flush_ns" => &mut ids.flush_ns,
            _ => continue,
        };
        *slot = Some(id);
    }
    ids
}

/// What a location of the trace is, from its name (see docs/trace-schema.md).
pub(crate) fn location_kind(name: &str) -> LocationKind {
    if nccl_scorep_merge::ops_stream(name).is_some() {
        LocationKind::OpsStream
    } else if name.contains(" proxy ") {
        LocationKind::Proxy
    } else if name
        .rsplit_once(" channel ")
        .is_some_and(|(_, channel)| channel.parse::<u32>().is_ok())
    {
        LocationKind::Channel
    } else {
        LocationKind::Thread
    }
}

/// A location's name without its lane: lanes exist only so that intervals nest in OTF2.
/// A thread's lanes beyond the first end in ` (lane N)`; proxy lanes are all numbered,
/// `<owner> proxy lane N`, and are the owner's proxy.
pub(crate) fn without_lane(name: &str) -> &str {
    if let Some((base, lane)) = name.rsplit_once(" (lane ") {
        if lane.ends_with(')') {
            return base;
        }
    }
    match name.rsplit_once(" lane ") {
        Some((base, lane)) if base.ends_with(" proxy") && lane.parse::<u32>().is_ok() => base,
        _ => name,
    }
}

/// The process a location group belongs to: itself when it is a process, else the group
/// that created it (a GPU's group is created by its process's).
pub(crate) fn process_of_group(defs: &GlobalDefs, group: u32) -> u32 {
    match defs.location_groups.get(&group) {
        Some(g) if u32::from(g.group_type) == OTF2_LOCATION_GROUP_TYPE_PROCESS => group,
        Some(g) if g.creating_location_group != OTF2_UNDEFINED_UINT32 => g.creating_location_group,
        _ => group,
    }
}

/// The processes and locations of the trace; returns trace location id → (profile
/// location, kind).
fn define_system(defs: &GlobalDefs, profile: &mut Profile) -> HashMap<u64, (usize, LocationKind)> {
    let string = |id: u32| defs.string(id).unwrap_or("").to_owned();
    let process_group = |group: u32| process_of_group(defs, group);
    profile.machine = defs
        .system_tree_nodes
        .iter()
        .find(|node| node.parent == OTF2_UNDEFINED_UINT32)
        .map_or_else(|| "machine".to_owned(), |node| string(node.name));
    let mut process_of_group: HashMap<u32, usize> = HashMap::default();
    let mut location_of: HashMap<(usize, String), usize> = HashMap::default();
    let mut locations = HashMap::default();
    let mut ids: Vec<u64> = defs.locations.keys().collect();
    // By process; within one: threads, ops streams, GPU channels, proxies, each in natural
    // order of their names. The same job then gives the same location ranks in the cube
    // run after run (a difference of two runs matches locations by them).
    ids.sort_by_cached_key(|&id| {
        let name = defs
            .locations
            .get(&id)
            .map_or_else(String::new, |l| string(l.name));
        (
            id & 0xffff_ffff,
            location_kind(&name),
            natural_key(without_lane(&name)),
            id >> 32,
        )
    });
    for id in ids {
        let location = defs.locations.get(&id).expect("listed");
        // The merge's empty locations of ranks without a part measured nothing.
        if nccl_scorep_merge::rank_without_part(defs.string(location.name).unwrap_or("")).is_some()
        {
            continue;
        }
        let group_id = process_group(location.location_group);
        let process = *process_of_group.entry(group_id).or_insert_with(|| {
            let group = defs.location_groups.get(&group_id);
            let host = group
                .and_then(|g| defs.system_tree_nodes.get(&g.system_tree_parent))
                .map_or_else(String::new, |node| string(node.name));
            profile.processes.push(Process {
                name: group.map_or_else(
                    || format!("process {}", id & 0xffff_ffff),
                    |g| string(g.name),
                ),
                host,
                index: id & 0xffff_ffff,
            });
            profile.processes.len() - 1
        });
        let name = string(location.name);
        let kind = location_kind(&name);
        let base = without_lane(&name).to_owned();
        let index = *location_of
            .entry((process, base.clone()))
            .or_insert_with(|| {
                profile.locations.push(ProfileLocation {
                    name: base,
                    process,
                    kind,
                });
                profile.locations.len() - 1
            });
        locations.insert(id, (index, kind));
    }
    // Processes the launcher did not number are numbered by their pids in the trace; the
    // profile numbers them 0, 1, … in that order instead, so that two runs of one job have
    // the same process ranks (a difference of runs matches processes by rank).
    let count = profile.processes.len() as u64;
    if profile.processes.iter().any(|p| p.index >= count) {
        let mut order: Vec<usize> = (0..profile.processes.len()).collect();
        order.sort_by_key(|&p| profile.processes[p].index);
        for (rank, p) in order.into_iter().enumerate() {
            profile.processes[p].index = rank as u64;
        }
    }
    locations
}

/// An interval open on a location.
struct Frame {
    call_path: usize,
    enter: u64,
    /// Ticks of the intervals nested in it.
    inner: u64,
    region: RegionKind,
    operation: Option<Operation>,
}

/// What a region is, for the metrics.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RegionKind {
    Plain,
    Wait(Metric),
    /// A proxy operation, which may carry its steps' wait times.
    ProxyOperation,
    Gap,
}

/// An operation on an ops stream, as its Enter describes it.
#[derive(Clone, Copy)]
struct Operation {
    comm_hash: u64,
    seq: u64,
    func: u32,
    nranks: i64,
    bytes: u64,
    took_ns: Option<u64>,
    collective: bool,
}

/// One rank's part of an operation, as its ops stream has it.
#[derive(Clone, Copy)]
struct Part {
    call_path: usize,
    location: usize,
    start_ns: f64,
    end_ns: f64,
    bus_bytes: f64,
}

/// Identifies a collective across its ranks: (comm hash, seq, func).
type CollectiveKey = (u64, u64, u32);

/// What the ops streams say of one collective's parts together.
struct Collective {
    /// The ranks its first part names.
    expected: i64,
    /// Its parts in the trace.
    parts: u64,
    last_arrival_ns: f64,
    last_end_ns: f64,
}

impl Collective {
    fn new(expected: i64) -> Self {
        Collective {
            expected,
            parts: 0,
            last_arrival_ns: f64::NEG_INFINITY,
            last_end_ns: f64::NEG_INFINITY,
        }
    }

    /// Adds what a later shard of the ops streams found of it.
    fn add(&mut self, later: &Collective) {
        self.parts += later.parts;
        self.last_arrival_ns = self.last_arrival_ns.max(later.last_arrival_ns);
        self.last_end_ns = self.last_end_ns.max(later.last_end_ns);
    }
}

/// Of a collective's parts, those the second read has found so far, and their sums.
struct PartsRead {
    parts: u64,
    wait_sum_ns: f64,
    bus_bytes_sum: f64,
    /// The last of them (its call path and communicator are every part's).
    last_part: Part,
    op: Operation,
}

impl PartsRead {
    /// Adds the parts a later shard read.
    fn add(&mut self, later: &PartsRead) {
        self.parts += later.parts;
        self.wait_sum_ns += later.wait_sum_ns;
        self.bus_bytes_sum += later.bus_bytes_sum;
        self.last_part = later.last_part;
    }
}

/// The first read of the ops streams: each collective's [`Collective`], before any part's
/// wait is worked out.
struct CollectiveGatherer<'a> {
    defs: &'a GlobalDefs,
    ids: &'a AttributeIds,
    ns_per_tick: f64,
    /// The location being read, and its open intervals (the operation of a top-level one,
    /// with its Enter's time).
    location: Option<u64>,
    stack: Vec<Option<(Operation, u64)>>,
    collectives: HashMap<CollectiveKey, Collective>,
}

impl EventVisitor for CollectiveGatherer<'_> {
    /// Only operations' Enters are asked for theirs.
    fn wants_attributes(&self) -> bool {
        false
    }

    fn enter(&mut self, e: &EventContext<'_>, _region: u32) {
        if self.location != Some(e.location) {
            self.location = Some(e.location);
            self.stack.clear();
        }
        let operation = if self.stack.is_empty() {
            operation(self.defs, self.ids, e).map(|op| (op, e.time))
        } else {
            None
        };
        self.stack.push(operation);
    }

    fn leave(&mut self, e: &EventContext<'_>, _region: u32) {
        if self.location != Some(e.location) {
            return;
        }
        let Some(Some((op, enter))) = self.stack.pop() else {
            return;
        };
        if !op.collective {
            return;
        }
        let (arrival_ns, _, end_ns) = op.times(enter, e.time, self.ns_per_tick);
        let collective = self
            .collectives
            .entry(op.key())
            .or_insert_with(|| Collective::new(op.nranks));
        collective.parts += 1;
        collective.last_arrival_ns = collective.last_arrival_ns.max(arrival_ns);
        collective.last_end_ns = collective.last_end_ns.max(end_ns);
    }
}

/// The second read of one shard of the locations, into a profile of its own.
struct ProfileReader<'a> {
    defs: &'a GlobalDefs,
    ids: AttributeIds,
    ns_per_tick: f64,
    profile: Profile,
    root: usize,
    /// Trace location → (profile location, kind).
    locations: &'a HashMap<u64, (usize, LocationKind)>,
    stacks: HashMap<u64, Vec<Frame>>,
    /// Trace region → (profile region, kind).
    regions: HashMap<u32, (usize, RegionKind)>,
    /// Every collective of the ops streams, from their first read.
    collectives: &'a HashMap<CollectiveKey, Collective>,
    /// The collectives this shard has read parts of, until it has read them all.
    parts_read: HashMap<CollectiveKey, PartsRead>,
    /// Per trace location, the records its thread reported lost so far (cumulative).
    lost_seen: HashMap<u64, u64>,
    /// Events this reader read since it last added them to `events_read`.
    events: u64,
    /// Events every reader read.
    events_read: &'a AtomicU64,
    total_events: u64,
    progress: &'a (dyn Fn(u64, u64) + Sync),
    keep_samples: bool,
}

impl ProfileReader<'_> {
    fn string(&self, id: u32) -> &str {
        self.defs.string(id).unwrap_or("")
    }

    fn region(&mut self, id: u32) -> (usize, RegionKind) {
        if let Some(&known) = self.regions.get(&id) {
            return known;
        }
        let (name, description, role) = match self.defs.regions.get(&id) {
            Some(r) => (
                self.string(r.name).to_owned(),
                self.string(r.description).to_owned(),
                role_name(r.role).to_owned(),
            ),
            None => (format!("region {id}"), String::new(), "unknown".to_owned()),
        };
        let kind = match name.as_str() {
            "send: GPU wait" | "recv: GPU wait" => RegionKind::Wait(Metric::ProxyGpuWait),
            "send: peer wait" => RegionKind::Wait(Metric::ProxyPeerWait),
            "send: network wait" | "recv: network wait" => {
                RegionKind::Wait(Metric::ProxyNetworkWait)
            }
            "recv: flush" => RegionKind::Wait(Metric::ProxyFlush),
            "proxy send" | "proxy recv" => RegionKind::ProxyOperation,
            "NCCL records lost" => RegionKind::Gap,
            _ => RegionKind::Plain,
        };
        let index = self.profile.region(&name, &description, &role);
        self.regions.insert(id, (index, kind));
        (index, kind)
    }

    /// A proxy operation whose steps were summed up on it: their wait times go to the
    /// wait metrics of its call path, as the wait states' intervals would go to theirs.
    fn summed_up_wait_states(&mut self, e: &EventContext<'_>, call_path: usize, location: usize) {
        let ids = self.ids;
        for (id, metric) in [
            (ids.gpu_wait_ns, Metric::ProxyGpuWait),
            (ids.peer_wait_ns, Metric::ProxyPeerWait),
            (ids.network_wait_ns, Metric::ProxyNetworkWait),
            (ids.flush_ns, Metric::ProxyFlush),
        ] {
            if let Some(ns) = unsigned(e, id) {
                self.profile
                    .add(metric, call_path, location, ns as f64 / 1e9);
            }
        }
    }

    fn text(&self, e: &EventContext<'_>, id: Option<u32>) -> Option<String> {
        let id = e.attribute(id?)?.string()?;
        Some(self.string(id).to_owned())
    }

    /// An operation entered on an ops stream: its call path is the operation's region,
    /// then its algorithm and protocol (collectives), then its size bucket.
    fn operation_path(&mut self, e: &EventContext<'_>, region: usize, parent: usize) -> usize {
        let op = self.profile.call_path(region, Some(parent), Vec::new());
        let (algo, proto) = (self.text(e, self.ids.algo), self.text(e, self.ids.proto));
        let below = match (algo, proto) {
            (None, None) => op,
            (algo, proto) => self.profile.call_path(
                region,
                Some(op),
                vec![
                    ("nccl.algo".to_owned(), algo.unwrap_or_default()),
                    ("nccl.proto".to_owned(), proto.unwrap_or_default()),
                ],
            ),
        };
        let bytes = unsigned(e, self.ids.bytes);
        let bucket = nccl_scorep_common::sizes::size_bucket(bytes)
            .to_string_lossy()
            .into_owned();
        self.profile
            .call_path(region, Some(below), vec![("nccl.bytes".to_owned(), bucket)])
    }

    /// The call path events of `location` are at now.
    fn current(&self, location: u64) -> usize {
        self.stacks
            .get(&location)
            .and_then(|stack| stack.last())
            .map_or(self.root, |frame| frame.call_path)
    }

    /// An operation's interval ended: its bus bytes, and its part of its collective.
    fn operation_done(&mut self, frame: &Frame, location: usize, end_ticks: u64) {
        let Some(op) = frame.operation else {
            return;
        };
        let func = self.string(op.func).to_owned();
        let (size, factor) = size_and_factor(&func, op.bytes, op.nranks);
        let bus_bytes = size as f64 * factor;
        self.profile
            .add(Metric::BusBytes, frame.call_path, location, bus_bytes);
        let (_, start_ns, end_ns) = op.times(frame.enter, end_ticks, self.ns_per_tick);
        let part = Part {
            call_path: frame.call_path,
            location,
            start_ns,
            end_ns,
            bus_bytes,
        };
        if !op.collective {
            // A point-to-point operation is a sample of its own, without a wait.
            if self.keep_samples {
                let time_ns = end_ns - start_ns;
                let sample = sample(
                    &self.profile,
                    self.defs,
                    &part,
                    &op,
                    time_ns,
                    0.0,
                    bus_bytes,
                );
                self.profile.samples.push(sample);
            }
            return;
        }
        let key = op.key();
        // The first read saw this part, unless the trace changed in between.
        let collectives = self.collectives;
        let Some(collective) = collectives.get(&key) else {
            return;
        };
        // The part of its execution before the last rank arrived.
        let waited = collective
            .last_arrival_ns
            .clamp(part.start_ns, part.end_ns.max(part.start_ns))
            - part.start_ns;
        self.profile.add(
            Metric::WaitLastRank,
            part.call_path,
            part.location,
            waited / 1e9,
        );
        let read = PartsRead {
            parts: 1,
            wait_sum_ns: waited,
            bus_bytes_sum: part.bus_bytes,
            last_part: part,
            op,
        };
        let parts = self
            .parts_read
            .entry(key)
            .and_modify(|earlier| earlier.add(&read))
            .or_insert(read)
            .parts;
        if parts < collective.parts {
            return;
        }
        let read = self.parts_read.remove(&key).expect("present");
        collective_done(
            &mut self.profile,
            self.defs,
            self.keep_samples,
            collective,
            &read,
        );
    }
}

/// Every part of a collective has been read: counted, and a sample.
fn collective_done(
    profile: &mut Profile,
    defs: &GlobalDefs,
    keep_samples: bool,
    collective: &Collective,
    read: &PartsRead,
) {
    if collective.parts as i64 >= collective.expected.max(1) {
        profile.complete_collectives += 1;
    } else {
        profile.incomplete_collectives += 1;
    }
    if !keep_samples {
        return;
    }
    // As the summary counts a collective's time: from the last rank's arrival to the
    // last completion (without the wait for late ranks); one part alone, its execution.
    let part = &read.last_part;
    let time_ns = if collective.parts == 1 {
        part.end_ns - part.start_ns
    } else {
        (collective.last_end_ns - collective.last_arrival_ns).max(0.0)
    };
    let n = read.parts as f64;
    let sample = sample(
        profile,
        defs,
        part,
        &read.op,
        time_ns,
        read.wait_sum_ns / n,
        read.bus_bytes_sum / n,
    );
    profile.samples.push(sample);
}

/// One operation (all its ranks' parts) as a sample for comparing runs; `part` is one of
/// its parts (their call paths and communicator names are the same).
fn sample(
    profile: &Profile,
    defs: &GlobalDefs,
    part: &Part,
    op: &Operation,
    time_ns: f64,
    wait_ns: f64,
    bus_bytes: f64,
) -> Sample {
    let location = &profile.locations[part.location];
    let comm = nccl_scorep_merge::ops_stream(&location.name)
        .map_or_else(String::new, |(comm, _)| comm.to_owned());
    let bucket = profile.call_paths[part.call_path]
        .parameters
        .iter()
        .find(|(key, _)| key == "nccl.bytes")
        .map_or_else(String::new, |(_, value)| value.clone());
    Sample {
        comm,
        nranks: op.nranks,
        func: defs.string(op.func).unwrap_or("").to_owned(),
        bucket,
        time_ns,
        wait_ns,
        bus_bytes,
    }
}

impl EventVisitor for ProfileReader<'_> {
    /// Only the Enters of operations, of proxy operations and of lost-record gaps are
    /// asked for theirs.
    fn wants_attributes(&self) -> bool {
        false
    }

    fn enter(&mut self, e: &EventContext<'_>, region: u32) {
        self.tick();
        let Some(&(location, kind)) = self.locations.get(&e.location) else {
            return;
        };
        let (region, region_kind) = self.region(region);
        let parent = self.current(e.location);
        let top_level_operation = kind == LocationKind::OpsStream && parent == self.root;
        let (call_path, operation) = if top_level_operation {
            (
                self.operation_path(e, region, parent),
                operation(self.defs, &self.ids, e),
            )
        } else {
            (
                self.profile.call_path(region, Some(parent), Vec::new()),
                None,
            )
        };
        self.profile.add(Metric::Visits, call_path, location, 1.0);
        if region_kind == RegionKind::ProxyOperation && kind == LocationKind::Proxy {
            self.summed_up_wait_states(e, call_path, location);
        }
        if region_kind == RegionKind::Gap {
            if let Some(total) = unsigned(e, self.ids.lost_records) {
                let seen = self.lost_seen.entry(e.location).or_default();
                let new = total.saturating_sub(*seen);
                *seen = (*seen).max(total);
                self.profile
                    .add(Metric::LostRecords, call_path, location, new as f64);
            }
        }
        self.stacks.entry(e.location).or_default().push(Frame {
            call_path,
            enter: e.time,
            inner: 0,
            region: region_kind,
            operation,
        });
    }

    fn leave(&mut self, e: &EventContext<'_>, _region: u32) {
        self.tick();
        let Some(&(location, kind)) = self.locations.get(&e.location) else {
            return;
        };
        let Some(stack) = self.stacks.get_mut(&e.location) else {
            return;
        };
        let Some(frame) = stack.pop() else {
            return;
        };
        let duration = e.time.saturating_sub(frame.enter);
        if let Some(parent) = stack.last_mut() {
            parent.inner += duration;
        }
        let exclusive = duration.saturating_sub(frame.inner) as f64 * self.ns_per_tick / 1e9;
        self.profile
            .add(Metric::Time, frame.call_path, location, exclusive);
        self.profile
            .add(kind.time_metric(), frame.call_path, location, exclusive);
        if let RegionKind::Wait(metric) = frame.region {
            if kind == LocationKind::Proxy {
                self.profile
                    .add(metric, frame.call_path, location, exclusive);
            }
        }
        self.operation_done(&frame, location, e.time);
    }

    fn mpi_collective_end(&mut self, e: &EventContext<'_>, end: &CollectiveEnd) {
        self.tick();
        let Some(&(location, _)) = self.locations.get(&e.location) else {
            return;
        };
        let at = self.current(e.location);
        self.profile
            .add(Metric::BytesSent, at, location, end.sent as f64);
        self.profile
            .add(Metric::BytesReceived, at, location, end.received as f64);
    }

    fn mpi_send(&mut self, e: &EventContext<'_>, message: &MpiMessage) {
        self.tick();
        if let Some(&(location, _)) = self.locations.get(&e.location) {
            let at = self.current(e.location);
            self.profile
                .add(Metric::BytesSent, at, location, message.length as f64);
        }
    }

    fn mpi_recv(&mut self, e: &EventContext<'_>, message: &MpiMessage) {
        self.tick();
        if let Some(&(location, _)) = self.locations.get(&e.location) {
            let at = self.current(e.location);
            self.profile
                .add(Metric::BytesReceived, at, location, message.length as f64);
        }
    }

    fn other(&mut self, _e: &EventContext<'_>, _record: &'static str) {
        self.tick();
    }
}

impl ProfileReader<'_> {
    fn tick(&mut self) {
        const EVERY: u64 = 1 << 16;
        self.events += 1;
        if self.events == EVERY {
            self.events = 0;
            let read = self.events_read.fetch_add(EVERY, Ordering::Relaxed) + EVERY;
            (self.progress)(read, self.total_events);
        }
    }
}

/// An attribute of an event as an unsigned integer, whichever integer type it has.
fn unsigned(e: &EventContext<'_>, id: Option<u32>) -> Option<u64> {
    let value = e.attribute(id?)?;
    value
        .unsigned()
        .or_else(|| u64::try_from(value.signed()?).ok())
}

/// An attribute of an event as a signed integer, whichever integer type it has.
fn signed(e: &EventContext<'_>, id: Option<u32>) -> Option<i64> {
    let value = e.attribute(id?)?;
    value
        .signed()
        .or_else(|| i64::try_from(value.unsigned()?).ok())
}

/// The operation an Enter on an ops stream describes; None without `nccl.func`.
fn operation(defs: &GlobalDefs, ids: &AttributeIds, e: &EventContext<'_>) -> Option<Operation> {
    let func = e.attribute(ids.func?)?.string()?;
    let collective = !is_point_to_point(defs.string(func).unwrap_or(""));
    let took_ns = match (unsigned(e, ids.enqueue_ns), unsigned(e, ids.complete_ns)) {
        (Some(enqueue), Some(complete)) => Some(complete.saturating_sub(enqueue)),
        _ => None,
    };
    Some(Operation {
        comm_hash: unsigned(e, ids.comm_hash).unwrap_or(0),
        seq: unsigned(e, ids.seq).unwrap_or(0),
        func,
        nranks: signed(e, ids.nranks).unwrap_or(0),
        bytes: unsigned(e, ids.bytes).unwrap_or(0),
        took_ns,
        collective: collective && ids.seq.is_some_and(|id| e.attribute(id).is_some()),
    })
}

impl Operation {
    fn key(&self) -> CollectiveKey {
        (self.comm_hash, self.seq, self.func)
    }

    /// Its arrival, start and end in ns, from the ticks of its Enter and Leave. The
    /// arrival is as the summary has it: the completion, less the enqueue-to-completion
    /// time the rank's own clock measured.
    fn times(&self, enter: u64, leave: u64, ns_per_tick: f64) -> (f64, f64, f64) {
        let end_ns = leave as f64 * ns_per_tick;
        (
            end_ns - self.took_ns.unwrap_or(0) as f64,
            enter as f64 * ns_per_tick,
            end_ns,
        )
    }
}

/// OTF2's region role, as Cube shows a region's kind.
fn role_name(role: u8) -> &'static str {
    use otf2_sys::*;
    match u32::from(role) {
        OTF2_REGION_ROLE_FUNCTION => "function",
        OTF2_REGION_ROLE_CODE => "code",
        OTF2_REGION_ROLE_COLL_ONE2ALL => "collective one2all",
        OTF2_REGION_ROLE_COLL_ALL2ONE => "collective all2one",
        OTF2_REGION_ROLE_COLL_ALL2ALL => "collective all2all",
        OTF2_REGION_ROLE_COLL_OTHER => "collective other",
        OTF2_REGION_ROLE_POINT2POINT => "point2point",
        OTF2_REGION_ROLE_DATA_TRANSFER => "data transfer",
        OTF2_REGION_ROLE_ARTIFICIAL => "artificial",
        _ => "unknown",
    }
}

pub(crate) use nccl_scorep_common::natural::natural_key;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_told_apart_by_their_names() {
        assert_eq!(location_kind("thread 4242"), LocationKind::Thread);
        assert_eq!(location_kind("world rank 3 ops"), LocationKind::OpsStream);
        assert_eq!(
            location_kind("world rank 3 channel 7"),
            LocationKind::Channel
        );
        assert_eq!(
            location_kind("world rank 3 proxy lane 2"),
            LocationKind::Proxy
        );
        assert_eq!(
            location_kind("PXN for pid 7 ctx 0x1 proxy lane 1"),
            LocationKind::Proxy
        );
        assert_eq!(location_kind("proxy thread 17"), LocationKind::Thread);
        assert_eq!(without_lane("thread 5 (lane 2)"), "thread 5");
        assert_eq!(without_lane("thread 5"), "thread 5");
        assert_eq!(
            without_lane("world rank 3 proxy lane 12"),
            "world rank 3 proxy"
        );
        assert_eq!(
            without_lane("PXN for pid 7 ctx 0x1 proxy lane 1"),
            "PXN for pid 7 ctx 0x1 proxy"
        );
        assert_eq!(without_lane("world rank 3 proxy"), "world rank 3 proxy");
    }

    #[test]
    fn shards_are_contiguous_and_cover_every_location_once() {
        let locations: Vec<u64> = (100..110).collect();
        let lengths = |threads, group: fn(u64) -> u64| -> Vec<usize> {
            let cut = shards(&locations, threads, group);
            assert_eq!(cut.concat(), locations, "{threads} threads");
            cut.iter().map(|shard| shard.len()).collect()
        };
        let alone = |id| id;
        assert_eq!(lengths(1, alone), [10]);
        assert_eq!(lengths(3, alone), [4, 4, 2]);
        assert_eq!(lengths(4, alone), [3, 3, 3, 1]);
        assert_eq!(lengths(64, alone), [1; 10]);
        assert!(shards(&[], 4, alone).is_empty());
        // Lanes of one location (here 100-103, then 104-105, …) stay in one shard.
        let lanes = |id| (id - 100) / 4 + u64::from(id >= 104) * 10 + u64::from(id >= 106);
        assert_eq!(lengths(3, lanes), [4, 4, 2]);
        assert_eq!(lengths(5, lanes), [4, 2, 2, 2]);
        assert_eq!(lengths(10, lanes), [4, 2, 2, 2]);
        // What each shard's work gives comes back in the shards' order.
        let cut = shards(&locations, 4, alone);
        let firsts = in_threads(&cut, |shard| shard[0]);
        assert_eq!(firsts, [100, 103, 106, 109]);
    }

    #[test]
    fn numbers_in_names_sort_as_numbers() {
        let mut names = [
            "thread 10",
            "thread 9",
            "c rank 1 ops",
            "c rank 0 channel 12",
        ];
        names.sort_by_key(|n| natural_key(n));
        assert_eq!(
            names,
            [
                "c rank 0 channel 12",
                "c rank 1 ops",
                "thread 9",
                "thread 10"
            ]
        );
    }
}
