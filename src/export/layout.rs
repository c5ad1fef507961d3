//! Where each location of the trace goes in the Chrome trace: a Chrome process (pid) per
//! OTF2 process location group, a Chrome thread (tid) per OTF2 location, numbered and
//! sorted the way `nccl-scorep profile` orders them, and the ranks the ops streams have
//! in their communicators (for matching messages). With `--processes`, only the locations
//! of those processes.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use otf2_sys::read::GlobalDefs;
use otf2_sys::OTF2_GROUP_TYPE_COMM_LOCATIONS;

use super::json::{TraceJson, Track};
use super::processes::Processes;
use crate::profile::{location_kind, natural_key, without_lane, LocationKind};

/// One Chrome thread: an OTF2 location.
#[derive(Clone, Debug)]
pub struct Thread {
    pub track: Track,
    pub name: String,
    pub kind: LocationKind,
    /// A proxy location of operations progressed for another process (PXN).
    pub pxn: bool,
    /// The category of its slices (a JSON literal).
    pub cat: &'static str,
}

/// One Chrome process: an OTF2 process location group.
#[derive(Clone, Debug)]
pub struct Process {
    pub pid: u32,
    pub name: String,
}

#[derive(Debug, Default)]
pub struct Layout {
    /// In Chrome pid order.
    pub processes: Vec<Process>,
    /// OTF2 location id → its thread.
    pub threads: HashMap<u64, Thread>,
    /// (OTF2 communicator, ops stream location) → its rank in the communicator.
    pub ranks: HashMap<(u32, u64), u32>,
    /// (OTF2 communicator, rank) of the ops streams of the processes `--processes` left
    /// out: their messages have no other end in the export.
    pub left_out_ranks: HashSet<(u32, u32)>,
}

/// The process a location belongs to: the low half of its id (the launcher rank, else
/// the pid).
pub fn process_of(location: u64) -> u64 {
    location & 0xffff_ffff
}

impl Layout {
    /// The layout of every location of `defs` that has events, of the `processes` asked
    /// for (all without).
    pub fn of(defs: &GlobalDefs, processes: Option<&Processes>) -> Layout {
        let exported = |location: u64| processes.is_none_or(|p| p.contains(process_of(location)));
        let string = |id: u32| defs.string(id).unwrap_or("").to_owned();
        let process_group = |group: u32| crate::profile::process_of_group(defs, group);
        let mut ids: Vec<u64> = defs
            .locations
            .iter()
            .filter(|l| l.number_of_events > 0 && exported(l.id))
            .map(|l| l.id)
            .collect();
        // By process (the launcher rank, else the pid, in the low half of the id); within
        // one: threads, ops streams, GPU channels, proxies, each in natural order of their
        // names, a location's lanes after it.
        ids.sort_by_cached_key(|&id| {
            let name = defs
                .locations
                .get(&id)
                .map_or_else(String::new, |l| string(l.name));
            (
                process_of(id),
                location_kind(&name),
                natural_key(without_lane(&name)),
                natural_key(&name),
                id,
            )
        });
        let mut layout = Layout::default();
        let mut pid_of_group: HashMap<u32, u32> = HashMap::new();
        let mut threads_in: HashMap<u32, u32> = HashMap::new();
        for id in ids {
            let location = defs.locations.get(&id).expect("listed");
            let group = process_group(location.location_group);
            let pid = *pid_of_group.entry(group).or_insert_with(|| {
                let pid = layout.processes.len() as u32 + 1;
                let name = defs
                    .location_groups
                    .get(&group)
                    .map_or_else(|| format!("process {}", process_of(id)), |g| string(g.name));
                layout.processes.push(Process { pid, name });
                pid
            });
            let tid = threads_in.entry(pid).or_default();
            *tid += 1;
            let name = string(location.name);
            let kind = location_kind(&name);
            let cat = match kind {
                LocationKind::Thread => "\"host\"",
                LocationKind::OpsStream => "\"op\"",
                LocationKind::Channel => "\"kernel\"",
                LocationKind::Proxy => "\"proxy\"",
            };
            layout.threads.insert(
                id,
                Thread {
                    track: Track { pid, tid: *tid },
                    pxn: name.starts_with("PXN for pid "),
                    name,
                    kind,
                    cat,
                },
            );
        }
        // A communicator's COMM_GROUP lists its ranks in NCCL rank order, as positions in
        // the COMM_LOCATIONS group of its paradigm (the ops streams).
        for comm in defs.comms.iter() {
            let Some(group) = defs.groups.get(&comm.group) else {
                continue;
            };
            let Some(all) = defs.groups.iter().find(|g| {
                u32::from(g.group_type) == OTF2_GROUP_TYPE_COMM_LOCATIONS
                    && g.paradigm == group.paradigm
            }) else {
                continue;
            };
            for (rank, &member) in group.members.iter().enumerate() {
                if let Some(&location) = usize::try_from(member)
                    .ok()
                    .and_then(|m| all.members.get(m))
                {
                    layout.ranks.insert((comm.id, location), rank as u32);
                    if !exported(location) {
                        layout.left_out_ranks.insert((comm.id, rank as u32));
                    }
                }
            }
        }
        layout
    }

    /// The metadata events: every process's and thread's name and place.
    pub fn write_metadata<W: Write>(&self, json: &mut TraceJson<W>) -> io::Result<()> {
        for process in &self.processes {
            let track = Track {
                pid: process.pid,
                tid: 0,
            };
            json.name("process_name", track, &process.name)?;
            json.sort_index("process_sort_index", track, process.pid)?;
        }
        let mut threads: Vec<&Thread> = self.threads.values().collect();
        threads.sort_by_key(|t| (t.track.pid, t.track.tid));
        for thread in threads {
            json.name("thread_name", thread.track, &thread.name)?;
            json.sort_index("thread_sort_index", thread.track, thread.track.tid)?;
        }
        Ok(())
    }
}
