//! The summary's input from an OTF2 archive (a merged `traces.otf2`, or one process's
//! part), read through `otf2_sys::read` like `validate`'s.
//!
//! Each operation on an ops stream (`<comm> rank <r> ops`) is one rank's part in a
//! collective: its attributes name it (`nccl.comm_hash`, `nccl.seq`, `nccl.func`, rank,
//! bytes), its Leave is the completion on the archive's time base (clock offsets
//! applied, so processes line up), and `nccl.complete_ns - nccl.enqueue_ns` (both on the
//! process's own clock) puts the arrival that long before it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use otf2_sys::read::{AttributeValue, EventContext, EventVisitor, GlobalDefs, Reader};

use super::{Collected, Part, Transfer};

/// The attributes the summary reads, by name.
#[derive(Default)]
struct AttributeIds {
    comm_hash: Option<u32>,
    seq: Option<u32>,
    func: Option<u32>,
    rank: Option<u32>,
    nranks: Option<u32>,
    bytes: Option<u32>,
    peer: Option<u32>,
    enqueue_ns: Option<u32>,
    complete_ns: Option<u32>,
    pxn_parent: Option<u32>,
    pid: Option<u32>,
    task: Option<u32>,
    lost_records: Option<u32>,
    held_back: Option<u32>,
    gpu_time_rejected: Option<u32>,
}

/// Why an archive gave nothing.
pub(super) enum Error {
    /// OTF2 cannot open the anchor file.
    Open(String),
    /// It opened, but is not a readable trace of nccl-scorep.
    Read(String),
}

/// Reads the archive whose anchor file is `anchor`.
pub(super) fn read(anchor: &Path, out: &mut Collected) -> Result<(), Error> {
    otf2_sys::install_error_handler(otf2_sys::error::ignore);
    drop(otf2_sys::error::drain_thread_error_reports());
    let archive = Reader::open(anchor).map_err(|e| Error::Open(e.to_string()))?;
    let defs = archive
        .global_definitions()
        .map_err(|e| Error::Read(format!("cannot read the definitions: {e}")))?;
    // What OTF2 reported while reading them does not stop a summary.
    drop(otf2_sys::error::drain_thread_error_reports());
    let string = |id: u32| -> &str { defs.string(id).unwrap_or("") };
    let mut ids = AttributeIds::default();
    for (id, attribute) in defs.attributes.by_id() {
        let slot = match string(attribute.value.name) {
            "nccl.comm_hash" => &mut ids.comm_hash,
            "nccl.seq" => &mut ids.seq,
            "nccl.func" => &mut ids.func,
            "nccl.rank" => &mut ids.rank,
            "nccl.nranks" => &mut ids.nranks,
            "nccl.bytes" => &mut ids.bytes,
            "nccl.peer" => &mut ids.peer,
            "nccl.enqueue_ns" => &mut ids.enqueue_ns,
            "nccl.complete_ns" => &mut ids.complete_ns,
            "nccl.pxn_parent" => &mut ids.pxn_parent,
            "nccl.pid" => &mut ids.pid,
            "nccl.task" => &mut ids.task,
            "nccl.lost_records" => &mut ids.lost_records,
            "nccl.held_back_ns" => &mut ids.held_back,
            "nccl.gpu_time_rejected" => &mut ids.gpu_time_rejected,
            _ => continue,
        };
        *slot = Some(id);
    }
    if ids.seq.is_none() || ids.func.is_none() {
        return Err(Error::Read(
            "the archive has no nccl.seq or nccl.func attribute: not an NCCL trace \
             of nccl-scorep"
                .into(),
        ));
    }
    // Times in the archive's ticks; the summary works in nanoseconds.
    let ns_per_tick = defs
        .clock
        .as_ref()
        .map_or(1.0, |c| 1e9 / c.timer_resolution.max(1) as f64);

    let mut collector = Collector {
        defs: &defs,
        ids: &ids,
        ns_per_tick,
        open: HashMap::new(),
        comm_of: HashMap::new(),
        lost: BTreeMap::new(),
        tasks: HashSet::new(),
        pxn_parents: Vec::new(),
        out,
    };
    for (id, location) in defs.locations.by_id() {
        let name = string(location.value.name);
        if let Some((comm, _)) = nccl_scorep_merge::ops_stream(name) {
            collector.comm_of.insert(id, comm.to_owned());
        }
    }
    // The merge's empty locations of ranks without a part are no process's.
    let mut processes = std::collections::BTreeSet::new();
    for (id, location) in defs.locations.by_id() {
        match nccl_scorep_merge::rank_without_part(string(location.value.name)) {
            Some(rank) => collector.out.ranks_without_part.push(rank.to_owned()),
            None => {
                processes.insert(id & 0xffff_ffff);
            }
        }
    }
    collector.out.processes += processes.len();
    // Nothing here needs time order across locations: they are read one after the other,
    // which keeps one location's files and event chunk open at a time.
    drop(archive.close());
    let locations: Vec<u64> = defs.locations.keys().collect();
    let read = crate::profile::each_location(anchor, &locations, |_, events| {
        Ok(!events.read_all(&mut collector)?.interrupted)
    });
    // Problems on the way show as an incomplete read, below.
    drop(otf2_sys::error::drain_thread_error_reports());
    // `nccl.lost_records` counts what a thread dropped so far: its largest value per
    // thread (per process and thread, over the lanes and parts of that thread) is what
    // the thread lost.
    let mut lost_per_thread: HashMap<(u64, &str), u64> = HashMap::new();
    for (&location, &lost) in &collector.lost {
        let name = defs.locations.get(&location).map_or("", |l| string(l.name));
        let thread = crate::profile::without_lane(name);
        let slot = lost_per_thread
            .entry((location & 0xffff_ffff, thread))
            .or_default();
        *slot = (*slot).max(lost);
    }
    collector.out.lost_records += lost_per_thread.values().sum::<u64>();
    // A PXN proxy operation names its task by the originating pid and task handle; the
    // ops streams carry both for each of their operations.
    let linked = collector
        .pxn_parents
        .iter()
        .filter(|key| collector.tasks.contains(key))
        .count();
    collector.out.pxn_linked += linked as u64;
    if let Err(error) = read {
        collector.out.incomplete.push(format!(
            "{} (events not fully readable: {error})",
            anchor.display()
        ));
    }
    Ok(())
}

/// Collects the operations of the ops streams as the events go by.
struct Collector<'a> {
    defs: &'a GlobalDefs,
    ids: &'a AttributeIds,
    ns_per_tick: f64,
    /// Per location, the open Enters: their attributes.
    open: HashMap<u64, Vec<Vec<(u32, AttributeValue)>>>,
    /// Ops stream → its communicator's name.
    comm_of: HashMap<u64, String>,
    /// Per location, the most records its thread reported lost (the count is cumulative).
    lost: BTreeMap<u64, u64>,
    /// (pid, task handle) of every operation on an ops stream.
    tasks: HashSet<(i64, u64)>,
    /// (originating pid, task handle) of every PXN proxy operation.
    pxn_parents: Vec<(i64, u64)>,
    out: &'a mut Collected,
}

impl EventVisitor for Collector<'_> {
    fn enter(&mut self, e: &EventContext<'_>, _region: u32) {
        let attributes = e.attributes;
        let get = |id: Option<u32>| value(attributes, id);
        if let Some(parent) = get(self.ids.pxn_parent).and_then(AttributeValue::unsigned) {
            self.out.pxn_ops += 1;
            if let Some(pid) = get(self.ids.pid).and_then(AttributeValue::signed) {
                self.pxn_parents.push((pid, parent));
            }
        }
        if let Some(lost) = get(self.ids.lost_records).and_then(AttributeValue::unsigned) {
            let slot = self.lost.entry(e.location).or_default();
            *slot = (*slot).max(lost);
        }
        if let Some(waited) = get(self.ids.held_back).and_then(AttributeValue::unsigned) {
            self.out.held_back.add(waited);
        }
        // Kernel channel intervals whose GPU times were rejected (their operations on
        // the ops streams carry the same attribute, and are not counted twice).
        if let Some(AttributeValue::String(reason)) = get(self.ids.gpu_time_rejected) {
            if !self.comm_of.contains_key(&e.location) {
                let reason = self.defs.string(reason).unwrap_or("unknown").to_owned();
                *self.out.gpu_times_rejected.entry(reason).or_default() += 1;
            }
        }
        self.open
            .entry(e.location)
            .or_default()
            .push(attributes.to_vec());
    }

    fn leave(&mut self, e: &EventContext<'_>, _region: u32) {
        let Some(attributes) = self.open.get_mut(&e.location).and_then(Vec::pop) else {
            return;
        };
        if let Some(comm) = self.comm_of.get(&e.location).cloned() {
            self.operation(&comm, e.time, &attributes);
        }
    }
}

impl Collector<'_> {
    /// One operation that ended at `time` (ticks) on an ops stream of `comm`.
    fn operation(&mut self, comm: &str, time: u64, attributes: &[(u32, AttributeValue)]) {
        let ids = self.ids;
        let unsigned = |id| {
            let v = value(attributes, id)?;
            v.unsigned().or_else(|| u64::try_from(v.signed()?).ok())
        };
        let signed = |id| {
            let v = value(attributes, id)?;
            v.signed().or_else(|| i64::try_from(v.unsigned()?).ok())
        };
        let func = match value(attributes, ids.func).and_then(AttributeValue::string) {
            Some(id) => self.defs.string(id).unwrap_or_default().to_owned(),
            None => return,
        };
        let transfer = matches!(func.as_str(), "Send" | "Recv");
        // Point-to-point operations are not matched across ranks: their seq may be absent.
        let seq = unsigned(ids.seq).or(transfer.then_some(0));
        let (Some(hash), Some(seq)) = (unsigned(ids.comm_hash), seq) else {
            return;
        };
        let completion = (time as f64 * self.ns_per_tick) as i128;
        let took = match (unsigned(ids.enqueue_ns), unsigned(ids.complete_ns)) {
            (Some(enqueue), Some(complete)) => i128::from(complete.saturating_sub(enqueue)),
            _ => 0,
        };
        if let (Some(pid), Some(task)) = (signed(ids.pid), unsigned(ids.task)) {
            self.tasks.insert((pid, task));
        }
        let hash = format!("{hash:#x}");
        self.out
            .comm_names
            .entry(hash.clone())
            .or_insert_with(|| comm.to_owned());
        let part = Part {
            rank: signed(ids.rank).unwrap_or(-1),
            nranks: signed(ids.nranks).unwrap_or(0),
            bytes: unsigned(ids.bytes).unwrap_or(0),
            arrival_ns: completion - took,
            completion_ns: completion,
        };
        if transfer {
            self.out.transfers.push(Transfer {
                comm_hash: hash,
                func,
                peer: signed(ids.peer).unwrap_or(-1),
                part,
            });
        } else {
            self.out
                .instances
                .entry((hash, seq, func))
                .or_default()
                .push(part);
        }
    }
}

fn value(attributes: &[(u32, AttributeValue)], id: Option<u32>) -> Option<AttributeValue> {
    let id = id?;
    attributes.iter().find(|(a, _)| *a == id).map(|(_, v)| *v)
}
