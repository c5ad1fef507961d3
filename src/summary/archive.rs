//! The summary's input from an OTF2 archive (a merged `traces.otf2`, or one process's
//! part), read through the same OTF2 reader as `validate`.
//!
//! Each operation on an ops stream (`<comm> rank <r> ops`) is one rank's part in a
//! collective: its attributes name it (`nccl.comm_hash`, `nccl.seq`, `nccl.func`, rank,
//! bytes), its Leave is the completion on the archive's time base (clock offsets
//! applied, so processes line up), and `nccl.complete_ns - nccl.enqueue_ns` (both on the
//! process's own clock) puts the arrival that long before it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use crate::validate::otf2::Archive;
use crate::validate::{AttributeValue, Definitions, Event};

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
}

/// Reads the archive whose anchor file is `anchor`.
pub(super) fn read(anchor: &Path, out: &mut Collected) -> Result<(), String> {
    otf2_sys::install_error_handler(otf2_sys::error::ignore);
    drop(otf2_sys::error::drain_thread_error_reports());
    let mut archive = Archive::open(anchor)?;
    archive.want_attributes = true;
    let mut problems = Vec::new();
    let Some(defs) = archive.read_global_definitions(&mut problems) else {
        let why: Vec<String> = problems.into_iter().map(|p| p.message).collect();
        return Err(format!("cannot read the definitions: {}", why.join("; ")));
    };
    let string = |id: u32| -> &str { defs.strings.get(&id).map_or("", |s| s.value.as_str()) };
    let mut ids = AttributeIds::default();
    for (&id, attribute) in &defs.attributes {
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
            _ => continue,
        };
        *slot = Some(id);
    }
    if ids.seq.is_none() || ids.func.is_none() {
        return Err(
            "the archive has no nccl.seq or nccl.func attribute: not an NCCL trace \
                    of nccl-scorep"
                .into(),
        );
    }
    // Times in the archive's ticks; the summary works in nanoseconds.
    let ns_per_tick = defs
        .clock
        .as_ref()
        .map_or(1.0, |c| 1e9 / c.timer_resolution.max(1) as f64);

    let mut reader = Reader {
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
    for (&id, location) in &defs.locations {
        let name = string(location.value.name);
        if let Some((comm, _)) = nccl_scorep_merge::ops_stream(name) {
            reader.comm_of.insert(id, comm.to_owned());
        }
    }
    let processes: std::collections::BTreeSet<u64> =
        defs.locations.keys().map(|id| id & 0xffff_ffff).collect();
    reader.out.processes += processes.len();
    let locations: Vec<u64> = defs.locations.keys().copied().collect();
    let read = archive.read_events(
        &locations,
        &mut |location, time, event, attributes| reader.event(location, time, event, attributes),
        &mut problems,
    );
    archive.close(&mut problems);
    reader.out.lost_records += reader.lost.values().sum::<u64>();
    // A PXN proxy operation names its task by the originating pid and task handle; the
    // ops streams carry both for each of their operations.
    let linked = reader
        .pxn_parents
        .iter()
        .filter(|key| reader.tasks.contains(key))
        .count();
    reader.out.pxn_linked += linked as u64;
    if !read.complete || !read.unreadable.is_empty() {
        reader
            .out
            .incomplete
            .push(format!("{} (events not fully readable)", anchor.display()));
    }
    Ok(())
}

struct Reader<'a> {
    defs: &'a Definitions,
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

impl Reader<'_> {
    fn event(
        &mut self,
        location: u64,
        time: u64,
        event: Event,
        attributes: &[(u32, AttributeValue)],
    ) {
        match event {
            Event::Enter { .. } => {
                let get = |id: Option<u32>| value(attributes, id);
                if let Some(AttributeValue::Unsigned(parent)) = get(self.ids.pxn_parent) {
                    self.out.pxn_ops += 1;
                    if let Some(AttributeValue::Signed(pid)) = get(self.ids.pid) {
                        self.pxn_parents.push((pid, parent));
                    }
                }
                if let Some(AttributeValue::Unsigned(lost)) = get(self.ids.lost_records) {
                    let slot = self.lost.entry(location).or_default();
                    *slot = (*slot).max(lost);
                }
                self.open
                    .entry(location)
                    .or_default()
                    .push(attributes.to_vec());
            }
            Event::Leave { .. } => {
                let Some(attributes) = self.open.get_mut(&location).and_then(Vec::pop) else {
                    return;
                };
                if let Some(comm) = self.comm_of.get(&location).cloned() {
                    self.operation(&comm, time, &attributes);
                }
            }
            _ => {}
        }
    }

    /// One operation that ended at `time` (ticks) on an ops stream of `comm`.
    fn operation(&mut self, comm: &str, time: u64, attributes: &[(u32, AttributeValue)]) {
        let ids = self.ids;
        let unsigned = |id| match value(attributes, id) {
            Some(AttributeValue::Unsigned(v)) => Some(v),
            Some(AttributeValue::Signed(v)) => u64::try_from(v).ok(),
            _ => None,
        };
        let signed = |id| match value(attributes, id) {
            Some(AttributeValue::Signed(v)) => Some(v),
            Some(AttributeValue::Unsigned(v)) => i64::try_from(v).ok(),
            _ => None,
        };
        let func = match value(attributes, ids.func) {
            Some(AttributeValue::Text(id)) => self
                .defs
                .strings
                .get(&id)
                .map(|s| s.value.clone())
                .unwrap_or_default(),
            _ => return,
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
