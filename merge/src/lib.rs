//! Joins the trace parts of a job's processes
//! (`<run-dir>/parts/<host>.<pid>[.N]/traces.otf2`, each a complete archive with local
//! definition ids) into one archive, `<run-dir>/traces.otf2`, without rewriting events.
//! Used by `nccl-scorep merge <run-dir>` and by the
//! plugin's automatic merge at the end of a job:
//!
//! 1. every part's global definitions and each location's clock offsets are read;
//! 2. definitions are unified: strings by content, regions by (name, role, paradigm),
//!    attributes by (name, type), paradigms by value, system tree nodes by (name, class,
//!    parent), location groups by (name, type, parent, creator) — so the parts of one
//!    process share its process group —, communicators by their commHash (carried in
//!    their name), locations keep their 64-bit ids (see [`unify`] for a collision);
//! 3. when the parts come from several hosts, their clocks are aligned from the job's
//!    collectives and messages (the ops streams' events are read for it): each host's
//!    correction goes into its locations' clock offsets ([`clock_alignment`]);
//! 4. the merged archive gets the unified global definitions, and each location a local
//!    definition file with the mapping tables from its part's ids to the global ones and
//!    its part's clock offsets; its `.evt` file is hard-linked (or copied) unchanged.
//!
//! Each communicator's COMM_GROUP lists the ops streams (`<comm> rank <r> ops`) of all its
//! ranks in NCCL rank order. A part's COMM_GROUP holds only the ranks of its process, so
//! the rank of each member is taken from its location name, which the plugin writes as
//! `... rank <r> ops` (the last ` rank ` of the name, so a communicator name containing
//! " rank " does not confuse it); only a location whose name does not have that form gets
//! its position in the part's COMM_GROUP (exact when the part holds every rank). A rank no
//! part has, below the highest one a member has or a record names (the records are read for
//! it, [`ranks_named`]), gets an empty location, so that every rank the records name exists
//! and keeps its number; a part that gives a rank another location than an earlier part
//! makes a further communicator of the same name.
//!
//! This file is the part model, the unification, the files and the report. The child
//! module `otf2` (`merge/otf2.rs`) reads and writes archives through `otf2_sys::read` and
//! `otf2_sys::writing`, where all OTF2 FFI lives; the part model is `otf2_sys::read`'s.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{Read, Seek, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use nccl_scorep_common::read_ahead::{ask_for, ReadAhead};
use nccl_scorep_common::run_dir::{
    ANCHOR_FILE, EVENT_FILES_DIR, EVENT_FILES_LIST, GLOBAL_DEFINITIONS_FILE, PARTS_DIR,
};
use nccl_scorep_common::RunDir;
use otf2_sys::read::{
    Attribute, ClockOffset, ClockProperties, Comm, GlobalDefs, Group, Location, LocationGroup,
    Paradigm, Region, SystemTreeNode,
};
use otf2_sys::{
    OTF2_GROUP_TYPE_COMM_GROUP, OTF2_GROUP_TYPE_COMM_LOCATIONS, OTF2_GROUP_TYPE_REGIONS,
    OTF2_LOCATION_GROUP_TYPE_PROCESS, OTF2_LOCATION_TYPE_ACCELERATOR_STREAM, OTF2_UNDEFINED_COMM,
    OTF2_UNDEFINED_LOCATION_GROUP, OTF2_UNDEFINED_STRING, OTF2_UNDEFINED_SYSTEM_TREE_NODE,
};
use serde::Serialize;

pub mod clock_alignment;
mod otf2;
mod provenance;
pub use provenance::as_json as provenance_as_json;
mod ranks_named;
mod recover;
pub use recover::EventFileCheck;
pub mod scorep;

pub use nccl_scorep_common::run_dir::{SNAPSHOT_CLOCK_FILE, SNAPSHOT_DIR};

// ---------------------------------------------------------------------------------------
// One part's definitions, with the ids written in the part (otf2_sys::read's model, whose
// records also hold the merged definitions, with global ids)
// ---------------------------------------------------------------------------------------

/// What the merge reads from one part: its chunk sizes, its global definitions (ids as
/// written in the part; records in file order), and each location's clock offsets.
#[derive(Debug, Default)]
pub(crate) struct PartDefs {
    pub event_chunk: u64,
    pub definition_chunk: u64,
    pub defs: GlobalDefs,
    pub clock_offsets: HashMap<u64, Vec<ClockOffset>>,
    /// The part's trace file properties (how it was made).
    pub properties: Vec<(String, String)>,
    /// Per communicator (the part's id), the highest rank its records name.
    pub ranks_named: HashMap<u32, u32>,
}

/// A part's ids → the merged archive's ids, per kind (what its mapping tables say).
#[derive(Debug, Default)]
pub(crate) struct IdMaps {
    pub strings: BTreeMap<u64, u64>,
    pub attributes: BTreeMap<u64, u64>,
    pub locations: BTreeMap<u64, u64>,
    pub regions: BTreeMap<u64, u64>,
    pub groups: BTreeMap<u64, u64>,
    pub comms: BTreeMap<u64, u64>,
    pub location_groups: BTreeMap<u64, u64>,
}

impl IdMaps {
    /// The merged id of the part's location `id`.
    pub fn location(&self, id: u64) -> u64 {
        self.locations.get(&id).copied().unwrap_or(id)
    }
}

/// The merged archive's definitions, with dense global ids (the index in each list; the
/// records' own `id` fields are unused, except a location's).
#[derive(Debug, Default)]
pub(crate) struct Unified {
    pub event_chunk: u64,
    pub definition_chunk: u64,
    pub machine: String,
    /// Its realtime timestamp is the global offset.
    pub clock: ClockProperties,
    pub strings: Vec<String>,
    pub paradigms: Vec<Paradigm>,
    pub nodes: Vec<SystemTreeNode>,
    pub location_groups: Vec<LocationGroup>,
    pub locations: Vec<Location>,
    pub regions: Vec<Region>,
    pub groups: Vec<Group>,
    pub comms: Vec<Comm>,
    pub attributes: Vec<Attribute>,
}

// ---------------------------------------------------------------------------------------
// The report
// ---------------------------------------------------------------------------------------

/// A part that was not merged.
#[derive(Clone, Debug, Serialize)]
pub struct SkippedPart {
    /// The part's directory name (`<host>.<pid>[.N]`).
    pub part: String,
    /// True when the part has no anchor file: its process did not finish its trace.
    pub incomplete: bool,
    pub reason: String,
}

/// One communicator of the merged archive.
#[derive(Clone, Debug, Serialize)]
pub struct CommSummary {
    pub name: String,
    /// Ranks with an ops stream in the merged archive.
    pub members: usize,
    /// Ranks below the highest one that no merged part has.
    pub missing_ranks: Vec<u32>,
    /// How many ranks below the highest one no part has (`missing_ranks` lists at most
    /// [`MISSING_RANKS_LISTED`] of them: a rank number is NCCL's, not a size to trust).
    /// The highest one is the highest a member has or a record names.
    pub missing_rank_count: u64,
    /// Empty locations the merged communicator has for ranks without a part.
    pub placeholders: u64,
}

/// A location given a new id because an earlier part used its id.
#[derive(Clone, Debug, Serialize)]
pub struct Renumbered {
    pub part: String,
    pub name: String,
    pub old_id: u64,
    pub new_id: u64,
}

/// What `nccl-scorep merge` did.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The merged anchor file.
    pub archive: PathBuf,
    /// The merged parts (directory names).
    pub parts: Vec<String>,
    pub skipped: Vec<SkippedPart>,
    /// Parts of processes that did not finish their trace, merged with what they had
    /// flushed (also in `parts`).
    pub recovered: Vec<SkippedPart>,
    pub locations: usize,
    pub events: u64,
    pub comms: Vec<CommSummary>,
    pub renumbered: Vec<Renumbered>,
    /// Mapping tables written, all locations together.
    pub mapping_tables: u64,
    /// Event files hard-linked, and copied (where linking failed).
    pub linked: usize,
    pub copied: usize,
    /// How the hosts' clocks were aligned (`None`: one host, or alignment off).
    pub clock_alignment: Option<clock_alignment::Alignment>,
    /// Anything else worth knowing (e.g. a rank found twice).
    pub notes: Vec<String>,
}

// ---------------------------------------------------------------------------------------
// Unification
// ---------------------------------------------------------------------------------------

/// Interning of one kind of definition by key: the dense global id of each key.
struct Interner<K, V> {
    ids: HashMap<K, u32>,
    values: Vec<V>,
}

impl<K: std::hash::Hash + Eq, V> Interner<K, V> {
    fn new() -> Self {
        Interner {
            ids: HashMap::new(),
            values: Vec::new(),
        }
    }

    fn get_or_insert(&mut self, key: K, value: impl FnOnce() -> V) -> u32 {
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.values.len() as u32;
        self.values.push(value());
        self.ids.insert(key, id);
        id
    }
}

/// Looks up a part's 32-bit reference in a map; UNDEFINED stays UNDEFINED.
fn map32(map: &BTreeMap<u64, u64>, id: u32, what: &str) -> Result<u32, String> {
    if id == u32::MAX {
        return Ok(id);
    }
    map.get(&u64::from(id))
        .map(|&g| g as u32)
        .ok_or_else(|| format!("references {what} {id}, which it does not define"))
}

/// The communicator's identity: the commHash in its name (`<name> (0x<hash>)` or
/// `NCCL comm 0x<hash>`), else the whole name.
fn comm_key(name: &str) -> String {
    let hash = name
        .strip_suffix(')')
        .and_then(|n| n.rsplit_once(" (0x"))
        .map(|(_, h)| h)
        .or_else(|| name.strip_prefix("NCCL comm 0x"));
    match hash {
        Some(h) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            format!("0x{}", h.to_ascii_lowercase())
        }
        _ => name.to_owned(),
    }
}

/// The communicator name and NCCL rank of an ops stream, from its location name
/// `<comm> rank <r> ops` (the last ` rank `, so a communicator name containing one is kept
/// whole); `None` for other locations.
pub fn ops_stream(name: &str) -> Option<(&str, u32)> {
    let (comm, rank) = name.strip_suffix(" ops")?.rsplit_once(" rank ")?;
    Some((comm, rank.parse().ok()?))
}

/// How the merge ends the name of the empty location that stands for a communicator rank
/// without a part: `<comm> rank <r>: no trace part`.
pub const NO_PART_SUFFIX: &str = ": no trace part";

/// The communicator rank (`<comm> rank <r>`) an empty location of the merge stands for,
/// from its name; `None` for other locations.
pub fn rank_without_part(name: &str) -> Option<&str> {
    name.strip_suffix(NO_PART_SUFFIX)
}

/// The NCCL rank of an ops stream, from its name `... rank <r> ops`.
fn ops_rank(name: &str) -> Option<u32> {
    ops_stream(name).map(|(_, rank)| rank)
}

/// A communicator being assembled from the parts.
struct CommEntry {
    name: u32,
    paradigm: u8,
    flags: u32,
    /// (part index, the part's parent comm id) of the first definition.
    parent: (usize, u32),
    /// NCCL rank → global location id.
    members: BTreeMap<u32, u64>,
    /// The highest rank the parts' records name.
    highest_named: Option<u32>,
}

/// The most empty locations a merge makes for ranks without a part (the plugin names no
/// rank of a communicator of more than 2^20 ranks in its records).
pub const MAX_PLACEHOLDER_RANKS: u64 = 1 << 21;

/// The location group of the empty locations that stand for ranks without a part: a
/// process of its own under the system tree's root, named so.
fn placeholder_location_group(u: &mut Unified) -> u32 {
    u.strings.push("ranks without a trace part".to_owned());
    let name = (u.strings.len() - 1) as u32;
    let root = u
        .nodes
        .iter()
        .position(|n| n.parent == OTF2_UNDEFINED_SYSTEM_TREE_NODE)
        .map_or(OTF2_UNDEFINED_SYSTEM_TREE_NODE, |i| i as u32);
    u.location_groups.push(LocationGroup {
        id: 0,
        name,
        group_type: OTF2_LOCATION_GROUP_TYPE_PROCESS as u8,
        system_tree_parent: root,
        creating_location_group: OTF2_UNDEFINED_LOCATION_GROUP,
    });
    (u.location_groups.len() - 1) as u32
}

/// The outcome of [`unify`].
pub(crate) struct Unification {
    pub unified: Unified,
    /// The empty locations made for ranks without a part.
    pub placeholders: Vec<u64>,
    pub maps: Vec<IdMaps>,
    pub comms: Vec<CommSummary>,
    pub renumbered: Vec<Renumbered>,
    pub notes: Vec<String>,
}

/// Unifies the parts' definitions (`names` name the parts in messages).
///
/// Locations keep their ids: the plugin numbers them `(index << 32) | process index`, so
/// the parts of different processes never collide. The parts of one process (`.1`, `.2`,
/// … after its communicators were all destroyed and new ones created) restart at index 0,
/// though: a location whose id an earlier part already used gets the next free index of
/// the same process index, and its part's local definitions map the old id to the new
/// one. Its `.evt` file is linked under the new id; event files do not contain their
/// location's id.
///
/// With `make_placeholders`, a communicator gets an empty location for each rank without
/// a part below the highest one a member has or its records name
/// ([`PartDefs::ranks_named`]).
pub(crate) fn unify(
    parts: &[PartDefs],
    names: &[String],
    make_placeholders: bool,
) -> Result<Unification, String> {
    let mut u = Unified::default();
    let mut maps: Vec<IdMaps> = parts.iter().map(|_| IdMaps::default()).collect();
    let mut notes = Vec::new();
    let ctx = |p: usize, message: String| format!("part {}: {message}", names[p]);

    // Chunk sizes and clock.
    u.event_chunk = parts[0].event_chunk;
    for (p, part) in parts.iter().enumerate() {
        if part.event_chunk != u.event_chunk {
            return Err(ctx(
                p,
                format!(
                    "its event chunk size is {} bytes, not {} as in part {}: the event files \
                     cannot share one archive",
                    part.event_chunk, u.event_chunk, names[0]
                ),
            ));
        }
        u.definition_chunk = u.definition_chunk.max(part.definition_chunk);
    }
    let mut range: Option<(u64, u64, u64)> = None;
    for (p, part) in parts.iter().enumerate() {
        let Some(clock) = part.defs.clock else {
            return Err(ctx(p, "it has no ClockProperties".to_owned()));
        };
        let end = clock.global_offset.saturating_add(clock.trace_length);
        range = Some(match range {
            None => (clock.timer_resolution, clock.global_offset, end),
            Some((resolution, start, stop)) => {
                if resolution != clock.timer_resolution {
                    return Err(ctx(
                        p,
                        format!(
                            "its timer resolution is {} ticks/s, not {resolution}",
                            clock.timer_resolution
                        ),
                    ));
                }
                (resolution, start.min(clock.global_offset), stop.max(end))
            }
        });
    }
    let (resolution, start, stop) = range.unwrap_or_default();
    u.clock = ClockProperties {
        timer_resolution: resolution,
        global_offset: start,
        trace_length: stop.saturating_sub(start).max(1),
        realtime_timestamp: start,
    };

    // Strings, by content ("" first, as usual).
    let mut strings: Interner<String, ()> = Interner::new();
    strings.get_or_insert(String::new(), || ());
    let mut string_texts = vec![String::new()];
    for (p, part) in parts.iter().enumerate() {
        for (id, text) in part.defs.strings.by_id() {
            let text = &text.value;
            let global = strings.get_or_insert(text.clone(), || string_texts.push(text.clone()));
            maps[p].strings.insert(u64::from(id), u64::from(global));
        }
    }
    u.strings = string_texts;

    // Paradigms, by value (the first name wins).
    let mut seen_paradigms = HashSet::new();
    for (p, part) in parts.iter().enumerate() {
        for paradigm in part.defs.paradigms.iter() {
            if seen_paradigms.insert(paradigm.paradigm) {
                let name =
                    map32(&maps[p].strings, paradigm.name, "string").map_err(|e| ctx(p, e))?;
                u.paradigms.push(Paradigm { name, ..*paradigm });
            }
        }
    }

    // System tree nodes, by (name, class, parent); parents first.
    let mut nodes: Interner<(u32, u32, u32), SystemTreeNode> = Interner::new();
    let mut node_maps: Vec<HashMap<u32, u32>> = vec![HashMap::new(); parts.len()];
    for (p, part) in parts.iter().enumerate() {
        let mut pending: Vec<&SystemTreeNode> = part.defs.system_tree_nodes.iter().collect();
        while !pending.is_empty() {
            let before = pending.len();
            let mut later = Vec::new();
            for node in pending {
                let parent = if node.parent == OTF2_UNDEFINED_SYSTEM_TREE_NODE {
                    Some(node.parent)
                } else {
                    node_maps[p].get(&node.parent).copied()
                };
                let Some(parent) = parent else {
                    later.push(node);
                    continue;
                };
                let name = map32(&maps[p].strings, node.name, "string").map_err(|e| ctx(p, e))?;
                let class_name =
                    map32(&maps[p].strings, node.class_name, "string").map_err(|e| ctx(p, e))?;
                let global = nodes.get_or_insert((name, class_name, parent), || SystemTreeNode {
                    id: 0,
                    name,
                    class_name,
                    parent,
                });
                node_maps[p].insert(node.id, global);
            }
            if later.len() == before {
                return Err(ctx(
                    p,
                    format!(
                        "system tree node {} has a parent it does not define",
                        later[0].id
                    ),
                ));
            }
            pending = later;
        }
    }
    u.nodes = nodes.values;

    // Location groups, by (name, type, parent, creator): groups without a creator (the
    // processes) first, so that every creator precedes the groups it created. The parts
    // of one process share its group.
    let mut location_groups: Interner<(u32, u8, u32, u32), LocationGroup> = Interner::new();
    for creators in [true, false] {
        for (p, part) in parts.iter().enumerate() {
            for group in part.defs.location_groups.iter() {
                let undefined = group.creating_location_group == OTF2_UNDEFINED_LOCATION_GROUP;
                if undefined != creators {
                    continue;
                }
                let name = map32(&maps[p].strings, group.name, "string").map_err(|e| ctx(p, e))?;
                let parent = if group.system_tree_parent == OTF2_UNDEFINED_SYSTEM_TREE_NODE {
                    group.system_tree_parent
                } else {
                    *node_maps[p]
                        .get(&group.system_tree_parent)
                        .ok_or_else(|| ctx(p, "a location group has no parent node".into()))?
                };
                let creator = map32(
                    &maps[p].location_groups,
                    group.creating_location_group,
                    "location group",
                )
                .map_err(|e| ctx(p, e))?;
                let global = location_groups.get_or_insert(
                    (name, group.group_type, parent, creator),
                    || LocationGroup {
                        id: 0,
                        name,
                        group_type: group.group_type,
                        system_tree_parent: parent,
                        creating_location_group: creator,
                    },
                );
                maps[p]
                    .location_groups
                    .insert(u64::from(group.id), u64::from(global));
            }
        }
    }
    u.location_groups = location_groups.values;

    // Locations keep their ids unless an earlier part took them.
    let mut next_index: HashMap<u32, u64> = HashMap::new();
    for part in parts {
        for location in part.defs.locations.iter() {
            let next = next_index.entry(location.id as u32).or_default();
            *next = (*next).max((location.id >> 32) + 1);
        }
    }
    let mut taken: HashSet<u64> = HashSet::new();
    let mut renumbered = Vec::new();
    for (p, part) in parts.iter().enumerate() {
        let mut own = HashSet::new();
        for location in part.defs.locations.iter() {
            if !own.insert(location.id) {
                return Err(ctx(p, format!("location {} is defined twice", location.id)));
            }
            let mut global = location.id;
            if taken.contains(&global) {
                let low = location.id as u32;
                let next = next_index.entry(low).or_default();
                if *next > u64::from(u32::MAX) {
                    return Err(ctx(p, format!("no free id for location {}", location.id)));
                }
                global = (*next << 32) | u64::from(low);
                *next += 1;
                renumbered.push(Renumbered {
                    part: names[p].clone(),
                    name: part
                        .defs
                        .strings
                        .get(&location.name)
                        .cloned()
                        .unwrap_or_default(),
                    old_id: location.id,
                    new_id: global,
                });
            }
            taken.insert(global);
            maps[p].locations.insert(location.id, global);
            let name = map32(&maps[p].strings, location.name, "string").map_err(|e| ctx(p, e))?;
            let group = map32(
                &maps[p].location_groups,
                location.location_group,
                "location group",
            )
            .map_err(|e| ctx(p, e))?;
            u.locations.push(Location {
                id: global,
                name,
                location_group: group,
                ..*location
            });
        }
    }

    // By process (a location id's low half is its process's index in the job; parts are
    // found in host.pid order, which is not the processes' order), then the threads of all
    // its parts, its communicator ranks (each part's in its order: ops stream, channels,
    // proxy lanes), and the proxy lanes it kept for other processes (PXN): readers list
    // the locations so.
    let location_groups = &u.location_groups;
    let strings = &u.strings;
    u.locations.sort_by_key(|location| {
        let in_process = location_groups
            .get(location.location_group as usize)
            .is_some_and(|g| u32::from(g.group_type) == OTF2_LOCATION_GROUP_TYPE_PROCESS);
        let pxn = strings
            .get(location.name as usize)
            .is_some_and(|name| name.starts_with("PXN for pid "));
        let section = match (in_process, pxn) {
            (true, false) => 0,
            (false, _) => 1,
            (true, true) => 2,
        };
        (location.id as u32, section)
    });

    // Regions by (name, role, paradigm); attributes by (name, type).
    let mut regions: Interner<(u32, u8, u8), Region> = Interner::new();
    let mut attributes: Interner<(u32, u8), Attribute> = Interner::new();
    for (p, part) in parts.iter().enumerate() {
        let s = |id: u32| map32(&maps[p].strings, id, "string").map_err(|e| ctx(p, e));
        let mut region_map = BTreeMap::new();
        for region in part.defs.regions.iter() {
            let name = s(region.name)?;
            let canonical_name = s(region.canonical_name)?;
            let description = s(region.description)?;
            let source_file = s(region.source_file)?;
            let global = regions.get_or_insert((name, region.role, region.paradigm), || Region {
                name,
                canonical_name,
                description,
                source_file,
                ..*region
            });
            region_map.insert(u64::from(region.id), u64::from(global));
        }
        let mut attribute_map = BTreeMap::new();
        for attribute in part.defs.attributes.iter() {
            let name = s(attribute.name)?;
            let description = s(attribute.description)?;
            let global = attributes.get_or_insert((name, attribute.attribute_type), || Attribute {
                name,
                description,
                ..*attribute
            });
            attribute_map.insert(u64::from(attribute.id), u64::from(global));
        }
        maps[p].regions = region_map;
        maps[p].attributes = attribute_map;
    }
    u.regions = regions.values;
    u.attributes = attributes.values;

    // Communicators, by commHash; members by NCCL rank.
    let mut comm_ids: HashMap<(u8, String), Vec<usize>> = HashMap::new();
    let mut comms: Vec<CommEntry> = Vec::new();
    // Per paradigm: the COMM_LOCATIONS group's name, and locations listed there that are
    // no communicator's member (kept in the merged group).
    let mut comm_locations: BTreeMap<u8, (u32, Vec<u64>)> = BTreeMap::new();
    let mut comm_group_of: Vec<HashMap<u32, usize>> = vec![HashMap::new(); parts.len()];
    for (p, part) in parts.iter().enumerate() {
        let groups: HashMap<u32, &Group> = part.defs.groups.iter().map(|g| (g.id, g)).collect();
        for group in part.defs.groups.iter() {
            let t = group.group_type as u32;
            if t == OTF2_GROUP_TYPE_REGIONS {
                // Joined below, by name.
                continue;
            }
            if t != OTF2_GROUP_TYPE_COMM_LOCATIONS && t != OTF2_GROUP_TYPE_COMM_GROUP {
                return Err(ctx(
                    p,
                    format!(
                        "group {} is of type {t}; the merge handles the communicator groups \
                         the plugin writes (COMM_LOCATIONS, COMM_GROUP, REGIONS)",
                        group.id
                    ),
                ));
            }
            if t == OTF2_GROUP_TYPE_COMM_LOCATIONS {
                let name = map32(&maps[p].strings, group.name, "string").map_err(|e| ctx(p, e))?;
                let entry = comm_locations
                    .entry(group.paradigm)
                    .or_insert((name, Vec::new()));
                entry
                    .1
                    .extend(group.members.iter().map(|&l| maps[p].location(l)));
            }
        }
        for comm in part.defs.comms.iter() {
            let group = groups
                .get(&comm.group)
                .filter(|g| g.group_type as u32 == OTF2_GROUP_TYPE_COMM_GROUP)
                .ok_or_else(|| {
                    ctx(
                        p,
                        format!("communicator {} has no COMM_GROUP group", comm.id),
                    )
                })?;
            let all = part
                .defs
                .groups
                .iter()
                .find(|g| {
                    g.group_type as u32 == OTF2_GROUP_TYPE_COMM_LOCATIONS
                        && g.paradigm == group.paradigm
                })
                .ok_or_else(|| ctx(p, "a COMM_GROUP without COMM_LOCATIONS group".into()))?;
            let name_text = part
                .defs
                .strings
                .get(&comm.name)
                .cloned()
                .unwrap_or_default();
            // The part's members: (NCCL rank, merged location id).
            let mut ranked: Vec<(u32, u64)> = Vec::with_capacity(group.members.len());
            let mut unnamed = Vec::new();
            for (position, &member) in group.members.iter().enumerate() {
                let Some(&local) = all.members.get(member as usize) else {
                    return Err(ctx(
                        p,
                        format!("communicator {name_text:?} lists member {member}, out of range"),
                    ));
                };
                let location = part.defs.locations.iter().find(|l| l.id == local);
                let location_name = location
                    .and_then(|l| part.defs.strings.get(&l.name))
                    .cloned()
                    .unwrap_or_default();
                let rank = ops_rank(&location_name).unwrap_or_else(|| {
                    unnamed.push((location_name, position));
                    position as u32
                });
                ranked.push((rank, maps[p].location(local)));
            }
            let distinct: HashSet<u32> = ranked.iter().map(|&(rank, _)| rank).collect();
            if distinct.len() < ranked.len() {
                // The names give one rank twice: the part's own order is the one the
                // records of its locations agree with.
                notes.push(ctx(
                    p,
                    format!(
                        "the locations of {name_text:?} name a rank twice; their positions in \
                         the part are used as their ranks"
                    ),
                ));
                for (position, member) in ranked.iter_mut().enumerate() {
                    member.0 = position as u32;
                }
            } else {
                for (location_name, position) in unnamed {
                    notes.push(ctx(
                        p,
                        format!(
                            "the rank of {location_name:?} in {name_text:?} is not in its \
                             name; its position {position} in the part is used"
                        ),
                    ));
                }
            }
            // The communicator of its commHash that has none of these ranks as another
            // location; a part that describes a rank the merged one already has (two
            // processes claim rank 0, e.g.) makes another communicator of that name, so
            // that every location stays a member of the communicator its records name.
            let key = (group.paradigm, comm_key(&name_text));
            let variants = comm_ids.entry(key).or_default();
            let fits = |entry: &CommEntry| {
                ranked
                    .iter()
                    .all(|(rank, location)| entry.members.get(rank).is_none_or(|l| l == location))
            };
            let index = match variants.iter().copied().find(|&i| fits(&comms[i])) {
                Some(index) => index,
                None => {
                    if !variants.is_empty() {
                        notes.push(ctx(
                            p,
                            format!(
                                "its communicator {name_text:?} has ranks that another part \
                                 already gave other locations; its ranks form a further \
                                 communicator of that name"
                            ),
                        ));
                    }
                    comms.push(CommEntry {
                        name: maps[p]
                            .strings
                            .get(&u64::from(comm.name))
                            .copied()
                            .unwrap_or(0) as u32,
                        paradigm: group.paradigm,
                        flags: comm.flags,
                        parent: (p, comm.parent),
                        members: BTreeMap::new(),
                        highest_named: None,
                    });
                    variants.push(comms.len() - 1);
                    comms.len() - 1
                }
            };
            comm_group_of[p].insert(comm.group, index);
            maps[p].comms.insert(u64::from(comm.id), index as u64);
            let entry = &mut comms[index];
            entry.members.extend(ranked);
            if let Some(&named) = part.ranks_named.get(&comm.id) {
                entry.highest_named = Some(entry.highest_named.map_or(named, |h| h.max(named)));
            }
        }
    }

    // Ranks without a part: every rank below the highest one a member has or a record
    // names gets a location, empty where no part has that rank, so that the records keep
    // NCCL's rank numbering and every rank they name exists.
    let mut summaries = Vec::with_capacity(comms.len());
    let mut placeholder_group = None;
    // Placeholder ids handed out (or skipped as taken) so far.
    let mut placeholder_index = 0u64;
    let mut placeholder_ids = Vec::new();
    for comm in &mut comms {
        let (mut missing_ranks, mut missing_rank_count) =
            missing_ranks(comm.members.keys().copied());
        let members = comm.members.len();
        let highest_member = comm.members.keys().next_back().copied();
        let Some(highest) = highest_member.max(comm.highest_named) else {
            summaries.push(CommSummary {
                name: u.strings[comm.name as usize].clone(),
                members,
                missing_ranks,
                missing_rank_count,
                placeholders: 0,
            });
            continue;
        };
        if let Some(member) = highest_member.filter(|&m| highest > m) {
            // Ranks above the highest member that records name.
            let room = MISSING_RANKS_LISTED.saturating_sub(missing_ranks.len()) as u32;
            missing_ranks.extend((member + 1..=highest).take(room as usize));
            missing_rank_count += u64::from(highest - member);
        }
        let absent = u64::from(highest) + 1 - comm.members.len() as u64;
        let placed = if absent == 0 || !make_placeholders {
            0
        } else if placeholder_ids.len() as u64 + absent > MAX_PLACEHOLDER_RANKS {
            notes.push(format!(
                "{:?}: {absent} ranks without a part, more than the merge makes empty \
                 locations for ({MAX_PLACEHOLDER_RANKS} in all): records naming them refer \
                 to ranks the communicator lacks",
                u.strings[comm.name as usize]
            ));
            0
        } else {
            let group =
                *placeholder_group.get_or_insert_with(|| placeholder_location_group(&mut u));
            let mut placed = 0;
            for rank in 0..=highest {
                if comm.members.contains_key(&rank) {
                    continue;
                }
                let name = format!(
                    "{} rank {rank}{NO_PART_SUFFIX}",
                    u.strings[comm.name as usize]
                );
                u.strings.push(name);
                let name = (u.strings.len() - 1) as u32;
                let id = loop {
                    let id = (placeholder_index << 32) | u64::from(u32::MAX);
                    placeholder_index += 1;
                    if !taken.contains(&id) {
                        break id;
                    }
                };
                u.locations.push(Location {
                    id,
                    name,
                    location_type: OTF2_LOCATION_TYPE_ACCELERATOR_STREAM as u8,
                    number_of_events: 0,
                    location_group: group,
                });
                comm.members.insert(rank, id);
                placeholder_ids.push(id);
                placed += 1;
            }
            placed
        };
        summaries.push(CommSummary {
            name: u.strings[comm.name as usize].clone(),
            members,
            missing_ranks,
            missing_rank_count,
            placeholders: placed,
        });
    }

    // Groups: per paradigm one COMM_LOCATIONS (every member, communicator by
    // communicator in rank order, then other listed locations), then one COMM_GROUP per
    // communicator (positions in its paradigm's COMM_LOCATIONS, in rank order).
    for comm in &comms {
        comm_locations
            .entry(comm.paradigm)
            .or_insert((comm.name, Vec::new()));
    }
    let mut positions: HashMap<u8, (u32, HashMap<u64, u64>)> = HashMap::new();
    for (&paradigm, (name, listed)) in &comm_locations {
        let mut members: Vec<u64> = Vec::new();
        let mut position: HashMap<u64, u64> = HashMap::new();
        let ordered = comms
            .iter()
            .filter(|c| c.paradigm == paradigm)
            .flat_map(|c| c.members.values().copied())
            .chain(listed.iter().copied());
        for location in ordered {
            position.entry(location).or_insert_with(|| {
                members.push(location);
                members.len() as u64 - 1
            });
        }
        let id = u.groups.len() as u32;
        u.groups.push(Group {
            id,
            name: *name,
            group_type: OTF2_GROUP_TYPE_COMM_LOCATIONS as u8,
            paradigm,
            flags: 0,
            members,
        });
        positions.insert(paradigm, (id, position));
    }
    let mut comm_group_ids = Vec::with_capacity(comms.len());
    for comm in &comms {
        let (_, position) = &positions[&comm.paradigm];
        comm_group_ids.push(u.groups.len() as u32);
        u.groups.push(Group {
            id: 0,
            name: comm.name,
            group_type: OTF2_GROUP_TYPE_COMM_GROUP as u8,
            paradigm: comm.paradigm,
            flags: 0,
            members: comm.members.values().map(|l| position[l]).collect(),
        });
    }
    // Region groups (the kinds viewers colour by): one per (name, paradigm), its members
    // the union of the parts' members, remapped, in first-seen order.
    let mut region_group_ids: BTreeMap<(u32, u8), usize> = BTreeMap::new();
    for (p, part) in parts.iter().enumerate() {
        for group in part.defs.groups.iter() {
            if group.group_type as u32 != OTF2_GROUP_TYPE_REGIONS {
                continue;
            }
            let name = map32(&maps[p].strings, group.name, "string").map_err(|e| ctx(p, e))?;
            let index = *region_group_ids
                .entry((name, group.paradigm))
                .or_insert_with(|| {
                    u.groups.push(Group {
                        id: 0,
                        name,
                        group_type: OTF2_GROUP_TYPE_REGIONS as u8,
                        paradigm: group.paradigm,
                        flags: group.flags,
                        members: Vec::new(),
                    });
                    u.groups.len() - 1
                });
            for &member in &group.members {
                let region = maps[p].regions.get(&member).copied().ok_or_else(|| {
                    ctx(
                        p,
                        format!(
                            "region group {} lists region {member}, which it does not define",
                            group.id
                        ),
                    )
                })?;
                if !u.groups[index].members.contains(&region) {
                    u.groups[index].members.push(region);
                }
            }
            maps[p].groups.insert(u64::from(group.id), index as u64);
        }
    }
    for (p, part) in parts.iter().enumerate() {
        for group in part.defs.groups.iter() {
            if group.group_type as u32 == OTF2_GROUP_TYPE_REGIONS {
                continue;
            }
            let global = if group.group_type as u32 == OTF2_GROUP_TYPE_COMM_LOCATIONS {
                Some(positions[&group.paradigm].0)
            } else {
                comm_group_of[p]
                    .get(&group.id)
                    .map(|&comm| comm_group_ids[comm])
            };
            if let Some(global) = global {
                maps[p]
                    .groups
                    .insert(u64::from(group.id), u64::from(global));
            }
        }
    }
    for (index, comm) in comms.iter().enumerate() {
        let (p, parent) = comm.parent;
        let parent = if parent == OTF2_UNDEFINED_COMM {
            parent
        } else {
            map32(&maps[p].comms, parent, "communicator").map_err(|e| ctx(p, e))?
        };
        u.comms.push(Comm {
            id: 0,
            name: comm.name,
            group: comm_group_ids[index],
            parent,
            flags: comm.flags,
        });
    }
    if u.strings.len() as u64 >= u64::from(OTF2_UNDEFINED_STRING) {
        return Err("too many strings for one archive".to_owned());
    }
    Ok(Unification {
        unified: u,
        placeholders: placeholder_ids,
        maps,
        comms: summaries,
        renumbered,
        notes,
    })
}

// ---------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------

/// The part directories under `<run-dir>/parts`, in natural name order (`host.pid` before
/// `host.pid.1`, `host.99` before `host.100`).
fn part_dirs(run_dir: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let run = RunDir::new(run_dir);
    let parts = run.parts().map_err(|e| {
        format!(
            "cannot read {}: {e} (is {} a run directory, NCCL_SCOREP_OUTPUT_DIR of the job?)",
            run.parts_dir().display(),
            run_dir.display()
        )
    })?;
    Ok(parts
        .into_iter()
        .map(|part| (part.name().to_owned(), part.path().to_path_buf()))
        .collect())
}

/// Asks for what the merge reads of a part before it reaches the part (see
/// [`ReadAhead`]): its anchor, definitions and list of event files, each location's
/// definitions, and the inodes of its event files, whose lengths are checked.
fn ask_for_part(dir: &Path) {
    for file in [ANCHOR_FILE, GLOBAL_DEFINITIONS_FILE, EVENT_FILES_LIST] {
        ask_for(&dir.join(file));
    }
    let Ok(entries) = std::fs::read_dir(dir.join(EVENT_FILES_DIR)) else {
        return;
    };
    for path in entries.filter_map(|entry| entry.ok().map(|entry| entry.path())) {
        match path.extension().and_then(|extension| extension.to_str()) {
            Some("def") => ask_for(&path),
            Some("evt") => drop(std::fs::metadata(&path)),
            _ => {}
        }
    }
}

/// The host of a part named `<host>.<pid>[.N]`.
fn host_of(part: &str) -> &str {
    nccl_scorep_common::run_dir::host_of_part(part)
}

/// Hard-links `from` to `to`, or copies it where linking fails (another file system).
/// Returns whether it was linked.
fn link_or_copy(from: &Path, to: &Path) -> std::io::Result<bool> {
    match std::fs::hard_link(from, to) {
        Ok(()) => Ok(true),
        Err(_) => std::fs::copy(from, to).map(|_| false),
    }
}

/// Copies an event file written with `chunk` byte chunks so that chunk k starts at byte
/// k · `target` (the gaps are holes): OTF2 reads each chunk up to its end marker, so the
/// file reads as one with `target` byte chunks. The bytes of every chunk are unchanged.
fn relay_chunks(from: &Path, to: &Path, chunk: u64, target: u64) -> std::io::Result<()> {
    let mut input = std::fs::File::open(from)?;
    let mut output = std::fs::File::create(to)?;
    let mut buffer = vec![0u8; chunk as usize];
    let mut index = 0u64;
    loop {
        let mut filled = 0;
        while filled < buffer.len() {
            let n = input.read(&mut buffer[filled..])?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        if filled == 0 {
            break;
        }
        output.seek(SeekFrom::Start(index * target))?;
        output.write_all(&buffer[..filled])?;
        index += 1;
        if filled < buffer.len() {
            break;
        }
    }
    output.flush()
}

/// The files put into an archive: hard-linked, copied (where linking failed), and event
/// files laid out again for another chunk size.
#[derive(Default)]
struct PlacedFiles {
    linked: usize,
    copied: usize,
    relaid: usize,
}

impl PlacedFiles {
    /// Puts the event file of a part's `location` (in `part_dir`) into `traces` as
    /// `<global>.evt`: linked, or with `relay` = (chunk, target) its chunks laid out for
    /// `target` byte chunks. A location without events may have no file.
    fn add_events(
        &mut self,
        part_dir: &Path,
        location: &Location,
        traces: &Path,
        global: u64,
        relay: Option<(u64, u64)>,
    ) -> Result<(), String> {
        let from = part_dir
            .join(EVENT_FILES_DIR)
            .join(format!("{}.evt", location.id));
        if !from.exists() && location.number_of_events == 0 {
            return Ok(());
        }
        let to = traces.join(format!("{global}.evt"));
        let failed = |e: std::io::Error| {
            format!(
                "cannot link or copy {} to {}: {e}",
                from.display(),
                to.display()
            )
        };
        match relay {
            Some((chunk, target)) => {
                relay_chunks(&from, &to, chunk, target).map_err(failed)?;
                self.relaid += 1;
            }
            None => match link_or_copy(&from, &to).map_err(failed)? {
                true => self.linked += 1,
                false => self.copied += 1,
            },
        }
        Ok(())
    }
}

/// The directory an archive is written in before it moves into place; removed when
/// dropped, whether the merge finished or not.
struct TempDir(PathBuf);

impl TempDir {
    /// Creates `out` if need be, and in it a fresh `.traces.<doing>.<pid>`.
    fn create(out: &Path, doing: &str) -> Result<TempDir, String> {
        nccl_scorep_common::safe_file::create_dirs(out)
            .map_err(|e| format!("cannot create {}: {e}", out.display()))?;
        let temp = out.join(format!(".traces.{doing}.{}", std::process::id()));
        if temp.exists() {
            std::fs::remove_dir_all(&temp)
                .map_err(|e| format!("cannot remove {}: {e}", temp.display()))?;
        }
        nccl_scorep_common::safe_file::create_dir(&temp)
            .map_err(|e| format!("cannot create {}: {e}", temp.display()))?;
        Ok(TempDir(temp))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Removes what merges killed before they could clean up left in `dir`: the
/// `.traces.<doing>.<pid>` directories of processes that are gone (a killed merge's copy
/// of the trace can be as large as the trace). Those of running merges are left alone.
fn remove_leftovers_of_killed_merges(dir: &Path) -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return removed;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(".traces.")
            .and_then(|rest| rest.rsplit_once('.'))
            .and_then(|(_, pid)| pid.parse::<i32>().ok())
        else {
            continue;
        };
        if pid <= 0 || pid as u32 == std::process::id() || process_exists(pid) {
            continue;
        }
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed.push(name);
        }
    }
    removed
}

/// Whether a process `pid` exists (on this node).
fn process_exists(pid: i32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Merges the parts of `run_dir` into `<output>/traces.otf2` (`output` defaults to
/// `run_dir`), replacing an earlier merged archive there.
pub fn merge(run_dir: &Path, output: Option<&Path>) -> Result<Report, String> {
    merge_with(
        run_dir,
        &MergeOptions {
            output,
            ..MergeOptions::default()
        },
    )
}

/// What a merge reports while it runs: the step, and how far it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Reading the parts' definitions: `done` of `total` parts.
    Reading { done: usize, total: usize },
    /// Linking the parts' event files: `done` of `total` parts.
    Linking { done: usize, total: usize },
}

/// How to merge; the default merges every part of the run directory into it.
#[derive(Default)]
pub struct MergeOptions<'a> {
    /// Where the archive goes; the run directory when `None`.
    pub output: Option<&'a Path>,
    /// Only these parts (directory names under `parts/`), e.g. those of one job when
    /// older jobs left parts in the same directory; every part when `None`.
    pub only_parts: Option<&'a [String]>,
    /// Called as the merge advances (a progress bar).
    pub progress: Option<&'a dyn Fn(Progress)>,
    /// Keep each host's clock as its parts say (trust NTP): no alignment of hosts from the
    /// job's collectives and messages.
    pub keep_host_clocks: bool,
    /// How much of each event file is read to refuse a damaged one before it is linked.
    pub check_event_files: EventFileCheck,
}

/// [`merge`] with options.
pub fn merge_with(run_dir: &Path, options: &MergeOptions) -> Result<Report, String> {
    otf2_sys::install_error_handler(otf2_sys::error::ignore);
    let report = |step: Progress| {
        if let Some(progress) = options.progress {
            progress(step);
        }
    };
    let mut names = Vec::new();
    let mut dirs = Vec::new();
    let mut parts = Vec::new();
    let mut skipped = Vec::new();
    let mut recovered = Vec::new();
    // Where the parts of killed processes are put together for reading (removed at the end).
    let scratch = run_dir.join(format!(".traces.recovering.{}", std::process::id()));
    let _scratch_guard = TempDir(scratch.clone());
    let mut leftovers = remove_leftovers_of_killed_merges(run_dir);
    if let Some(out) = options.output.filter(|out| *out != run_dir) {
        leftovers.extend(remove_leftovers_of_killed_merges(out));
    }
    let mut notes_before_unify = Vec::new();
    let mut candidates = part_dirs(run_dir)?;
    if let Some(only) = options.only_parts {
        candidates.retain(|(name, _)| only.contains(name));
    }
    let total = candidates.len();
    let ahead = ReadAhead::start(
        candidates.iter().map(|(_, dir)| dir.clone()).collect(),
        |dir: &PathBuf| ask_for_part(dir),
    );
    for (done, (name, dir)) in candidates.into_iter().enumerate() {
        report(Progress::Reading { done, total });
        ahead.reading(done);
        let anchor = dir.join(ANCHOR_FILE);
        if !anchor.exists() && recover::has_snapshot(&dir) {
            match recover::recover_part(&dir, &scratch) {
                Ok(part) => {
                    recovered.push(SkippedPart {
                        part: name.clone(),
                        incomplete: true,
                        reason: part.note,
                    });
                    names.push(name);
                    dirs.push(part.dir);
                    parts.push(part.defs);
                }
                Err(why) => skipped.push(SkippedPart {
                    part: name,
                    incomplete: true,
                    reason: format!(
                        "its process did not finish the trace (killed?), and what it saved \
                         cannot be used: {why}"
                    ),
                }),
            }
            continue;
        }
        if !anchor.exists() {
            let events = std::fs::read_dir(dir.join(EVENT_FILES_DIR))
                .map(|d| {
                    d.filter_map(Result::ok)
                        .filter(|e| e.path().extension().is_some_and(|x| x == "evt"))
                        .count()
                })
                .unwrap_or(0);
            skipped.push(SkippedPart {
                part: name,
                incomplete: true,
                reason: format!(
                    "no traces.otf2: its process did not finish the trace (killed?), and \
                     saved no definitions; {events} event files without definitions left \
                     out"
                ),
            });
            continue;
        }
        match otf2::read_part(&anchor).and_then(|defs| {
            // A damaged event file would make the merged trace unreadable: refused here.
            let listed = std::fs::read_to_string(dir.join(EVENT_FILES_LIST))
                .ok()
                .and_then(|text| nccl_scorep_common::event_files::parse(&text))
                .unwrap_or_default();
            for location in defs.defs.locations.iter() {
                let path = dir
                    .join(EVENT_FILES_DIR)
                    .join(format!("{}.evt", location.id));
                recover::check_listed_event_file(
                    &path,
                    listed.get(&location.id),
                    defs.event_chunk,
                    location.number_of_events,
                    options.check_event_files,
                )?;
            }
            Ok(defs)
        }) {
            Ok(defs) => {
                names.push(name);
                dirs.push(dir);
                parts.push(defs);
            }
            Err(why) => skipped.push(SkippedPart {
                part: name,
                incomplete: false,
                reason: format!("cannot be read: {why}"),
            }),
        }
    }
    drop(ahead);
    if parts.is_empty() {
        let mut message = format!(
            "no complete trace part in {}",
            run_dir.join(PARTS_DIR).display()
        );
        for skip in &skipped {
            let _ = write!(message, "\n  {}: {}", skip.part, skip.reason);
        }
        return Err(message);
    }
    let mut alignment = None;
    if !options.keep_host_clocks {
        match clock_alignment::align(&names, &dirs, &mut parts) {
            Ok(found) => alignment = found,
            // The trace is still worth merging: on the hosts' own clocks, as said.
            Err(why) => notes_before_unify.push(format!(
                "the hosts' clocks are left as they are (NTP's): {why}"
            )),
        }
    }
    for (p, part) in parts.iter_mut().enumerate() {
        let members: BTreeSet<u64> = part
            .defs
            .groups
            .iter()
            .filter(|g| g.group_type as u32 == OTF2_GROUP_TYPE_COMM_LOCATIONS)
            .flat_map(|g| g.members.iter().copied())
            .collect();
        let locations: Vec<u64> = part
            .defs
            .locations
            .iter()
            .filter(|l| members.contains(&l.id) && l.number_of_events > 0)
            .map(|l| l.id)
            .collect();
        part.ranks_named = ranks_named::highest_ranks_named(&dirs[p].join(ANCHOR_FILE), &locations)
            .map_err(|e| format!("part {}: reading its ops streams: {e}", names[p]))?;
    }
    let Unification {
        mut unified,
        placeholders,
        maps,
        comms,
        renumbered,
        mut notes,
    } = unify(&parts, &names, true)?;
    notes.extend(notes_before_unify);
    for name in leftovers {
        notes.push(format!("removed {name}, left by a merge that was killed"));
    }
    unified.machine = host_of(&names[0]).to_owned();

    let out = options.output.unwrap_or(run_dir);
    let temp = TempDir::create(out, "merging")?;
    let mut properties = provenance::merged_properties(
        &parts
            .iter()
            .map(|p| p.properties.as_slice())
            .collect::<Vec<_>>(),
    );
    if let Some(alignment) = &alignment {
        properties.extend(alignment.properties());
    }
    let mapping_tables =
        otf2::write_archive(&temp.0, &unified, &parts, &maps, &properties, &placeholders)?;
    let traces = temp.0.join(EVENT_FILES_DIR);
    let mut files = PlacedFiles::default();
    for (p, part) in parts.iter().enumerate() {
        report(Progress::Linking {
            done: p,
            total: parts.len(),
        });
        for location in part.defs.locations.iter() {
            let global = maps[p].location(location.id);
            files.add_events(&dirs[p], location, &traces, global, None)?;
        }
    }
    // OTF2 reads an event file for every location: the empty locations get one without
    // events (written once, linked for the others).
    if let Some((&first, others)) = placeholders.split_first() {
        let path = |id: u64| traces.join(format!("{id}.evt"));
        let fail = |p: &Path, e: std::io::Error| format!("cannot write {}: {e}", p.display());
        std::fs::write(path(first), otf2_sys::event_format::empty_event_file())
            .map_err(|e| fail(&path(first), e))?;
        for &id in others {
            link_or_copy(&path(first), &path(id)).map_err(|e| fail(&path(id), e))?;
        }
    }
    report(Progress::Linking {
        done: parts.len(),
        total: parts.len(),
    });
    install(&temp.0, out)?;
    drop(temp);
    // The run directory's description of the run; an archive written elsewhere (--output)
    // carries the same facts as its properties.
    if options.output.is_none() {
        if let Err(e) = provenance::update_run_json(run_dir, provenance::as_json(&properties)) {
            notes.push(format!(
                "cannot write {}: {e}",
                run_dir
                    .join(nccl_scorep_common::provenance::RUN_JSON_FILE)
                    .display()
            ));
        }
    }

    Ok(Report {
        archive: out.join(ANCHOR_FILE),
        parts: names,
        skipped,
        recovered,
        locations: unified.locations.len(),
        events: unified.locations.iter().map(|l| l.number_of_events).sum(),
        comms,
        renumbered,
        mapping_tables,
        linked: files.linked,
        copied: files.copied,
        clock_alignment: alignment,
        notes,
    })
}

/// The most missing ranks a communicator's summary lists.
pub const MISSING_RANKS_LISTED: usize = 32;

/// The ranks below the highest of `members` (sorted) that are not among them: the first
/// [`MISSING_RANKS_LISTED`], and how many there are. Costs nothing per rank number, so a
/// rank of two billion is just a number.
fn missing_ranks(members: impl Iterator<Item = u32>) -> (Vec<u32>, u64) {
    let mut listed = Vec::new();
    let mut count = 0u64;
    let mut expected = 0u32;
    for rank in members {
        if rank > expected {
            count += u64::from(rank - expected);
            let room = MISSING_RANKS_LISTED.saturating_sub(listed.len()) as u32;
            listed.extend(expected..rank.min(expected.saturating_add(room)));
        }
        expected = rank.saturating_add(1);
    }
    (listed, count)
}

/// Moves the archive written in `temp` into `out`, replacing an earlier one. The old
/// anchor goes first and the new anchor comes last, so that an interrupted replacement
/// never leaves an anchor beside definitions or events that are not its own.
fn install(temp: &Path, out: &Path) -> Result<(), String> {
    let anchor = out.join(ANCHOR_FILE);
    let defs = out.join(GLOBAL_DEFINITIONS_FILE);
    let events = out.join(EVENT_FILES_DIR);
    let fail = |what: &str, path: &Path, e: std::io::Error| {
        format!("cannot {what} {}: {e}", path.display())
    };
    if anchor.exists() {
        std::fs::remove_file(&anchor).map_err(|e| fail("remove", &anchor, e))?;
    }
    if events.exists() {
        let old = temp.join("old-traces");
        std::fs::rename(&events, &old).map_err(|e| fail("move away", &events, e))?;
    }
    // OTF2 made the event files' directory with the umask's mode; ours is private.
    nccl_scorep_common::safe_file::set_dir_mode(&temp.join(EVENT_FILES_DIR))
        .map_err(|e| fail("set the mode of", &temp.join(EVENT_FILES_DIR), e))?;
    std::fs::rename(temp.join(EVENT_FILES_DIR), &events).map_err(|e| fail("create", &events, e))?;
    std::fs::rename(temp.join(GLOBAL_DEFINITIONS_FILE), &defs)
        .map_err(|e| fail("create", &defs, e))?;
    std::fs::rename(temp.join(ANCHOR_FILE), &anchor).map_err(|e| fail("create", &anchor, e))
}

/// The report as text.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "merged {} part{} into {}: {} locations, {} events, {} communicator{}",
        report.parts.len(),
        if report.parts.len() == 1 { "" } else { "s" },
        report.archive.display(),
        report.locations,
        report.events,
        report.comms.len(),
        if report.comms.len() == 1 { "" } else { "s" },
    );
    render_comms(&mut out, &report.comms);
    if !report.recovered.is_empty() {
        let _ = writeln!(
            out,
            "merged {} incomplete part{}:",
            report.recovered.len(),
            if report.recovered.len() == 1 { "" } else { "s" }
        );
        for part in &report.recovered {
            let _ = writeln!(out, "  {}: {}", part.part, part.reason);
        }
    }
    let incomplete: Vec<&SkippedPart> = report.skipped.iter().filter(|s| s.incomplete).collect();
    if !incomplete.is_empty() {
        let _ = writeln!(
            out,
            "skipped {} incomplete part{}:",
            incomplete.len(),
            if incomplete.len() == 1 { "" } else { "s" }
        );
        for skip in incomplete {
            let _ = writeln!(out, "  {}: {}", skip.part, skip.reason);
        }
    }
    let unreadable: Vec<&SkippedPart> = report.skipped.iter().filter(|s| !s.incomplete).collect();
    if !unreadable.is_empty() {
        let _ = writeln!(out, "skipped {} unreadable part(s):", unreadable.len());
        for skip in unreadable {
            let _ = writeln!(out, "  {}: {}", skip.part, skip.reason);
        }
    }
    if !report.renumbered.is_empty() {
        let parts: BTreeSet<&str> = report.renumbered.iter().map(|r| r.part.as_str()).collect();
        let mut listed: Vec<&str> = parts.iter().copied().take(3).collect();
        if parts.len() > listed.len() {
            listed.push("...");
        }
        let _ = writeln!(
            out,
            "renumbered {} locations in {} part{} ({}): their ids were used by an earlier \
             part of the same process",
            report.renumbered.len(),
            parts.len(),
            if parts.len() == 1 { "" } else { "s" },
            listed.join(", ")
        );
    }
    if let Some(alignment) = &report.clock_alignment {
        render_clock_alignment(&mut out, alignment);
    }
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    out.truncate(out.trim_end().len());
    out
}

/// Communicators the merge report gives a line each; beyond, it counts them by size and
/// gives a line each only to those with ranks missing (the trace's definitions hold all).
const COMMS_LISTED: usize = 16;

fn render_comms(out: &mut String, comms: &[CommSummary]) {
    let line = |out: &mut String, comm: &CommSummary| {
        let _ = write!(out, "  {}: {} ranks", comm.name, comm.members);
        if comm.missing_rank_count > comm.missing_ranks.len() as u64 {
            let _ = write!(
                out,
                " (no part has {} of the ranks below the highest, the first {:?})",
                comm.missing_rank_count, comm.missing_ranks
            );
        } else if !comm.missing_ranks.is_empty() {
            let _ = write!(out, " (no part has rank {:?})", comm.missing_ranks);
        }
        if comm.placeholders > 0 {
            let _ = write!(
                out,
                "; {} empty location{} stand{} for the ranks without a part, which its \
                 messages and roots name",
                comm.placeholders,
                if comm.placeholders == 1 { "" } else { "s" },
                if comm.placeholders == 1 { "s" } else { "" },
            );
        }
        out.push('\n');
    };
    if comms.len() <= COMMS_LISTED {
        for comm in comms {
            line(out, comm);
        }
        return;
    }
    let mut by_size: BTreeMap<usize, usize> = BTreeMap::new();
    for comm in comms {
        *by_size.entry(comm.members).or_default() += 1;
    }
    for (members, count) in by_size.iter().rev() {
        let _ = writeln!(
            out,
            "  {count} communicator{} of {members} rank{}",
            if *count == 1 { "" } else { "s" },
            if *members == 1 { "" } else { "s" }
        );
    }
    let incomplete: Vec<&CommSummary> = comms
        .iter()
        .filter(|c| c.missing_rank_count > 0 || c.placeholders > 0)
        .collect();
    for comm in incomplete.iter().take(COMMS_LISTED) {
        line(out, comm);
    }
    if incomplete.len() > COMMS_LISTED {
        let _ = writeln!(
            out,
            "  ... and {} more communicators with ranks missing",
            incomplete.len() - COMMS_LISTED
        );
    }
}

/// Hosts the merge report gives a line each; beyond, it sums them up and names the least
/// certain (the trace's properties hold every host's correction).
const HOSTS_LISTED: usize = 8;

fn render_clock_alignment(out: &mut String, alignment: &clock_alignment::Alignment) {
    let line = |out: &mut String, host: &clock_alignment::HostCorrection| {
        let through = if host.through.is_empty() {
            String::new()
        } else {
            format!(" through {}", host.through.join(", "))
        };
        let bent = if host.bends == 0 {
            String::new()
        } else {
            format!(
                " (on average: it changed during the run, and is followed through {} bends)",
                host.bends
            )
        };
        let _ = writeln!(
            out,
            "clock of {} aligned to {}{through}: {:+.1} us added, its drift of {:+.2} ppm \
             taken out{bent}, within +-{:.1} us \
             ({} facts from the collectives or messages; {} broken before, {} after)",
            host.host,
            alignment.reference,
            host.offset_ns as f64 / 1e3,
            host.drift_ppm,
            host.uncertainty_ns as f64 / 1e3,
            host.bounds,
            host.violated_before,
            host.violated_after
        );
    };
    let hosts = &alignment.hosts;
    if hosts.len() <= HOSTS_LISTED {
        for host in hosts {
            line(out, host);
        }
    } else {
        let range = |value: &dyn Fn(&clock_alignment::HostCorrection) -> f64| {
            let values = hosts.iter().map(value);
            let low = values.clone().fold(f64::INFINITY, f64::min);
            (low, values.fold(f64::NEG_INFINITY, f64::max))
        };
        let (offset_low, offset_high) = range(&|h| h.offset_ns as f64 / 1e3);
        let (drift_low, drift_high) = range(&|h| h.drift_ppm);
        let (within_low, within_high) = range(&|h| h.uncertainty_ns as f64 / 1e3);
        let bent = hosts.iter().filter(|h| h.bends > 0).count();
        let _ = writeln!(
            out,
            "clocks of {} hosts aligned to {}: {offset_low:+.1} to {offset_high:+.1} us added, \
             drifts of {drift_low:+.2} to {drift_high:+.2} ppm taken out, within +-{within_low:.1} \
             to +-{within_high:.1} us ({} facts from the collectives or messages; {} broken \
             before, {} after; {bent} followed through bends where the drift changed)",
            hosts.len(),
            alignment.reference,
            hosts.iter().map(|h| h.bounds).sum::<usize>(),
            hosts.iter().map(|h| h.violated_before).sum::<usize>(),
            hosts.iter().map(|h| h.violated_after).sum::<usize>(),
        );
        let mut least_certain: Vec<&clock_alignment::HostCorrection> = hosts.iter().collect();
        least_certain.sort_by_key(|h| std::cmp::Reverse(h.uncertainty_ns));
        let _ = writeln!(
            out,
            "the {HOSTS_LISTED} least certain (every host's correction is in the trace \
             property NCCL_SCOREP::CLOCK_CORRECTION_HOSTS):"
        );
        for host in least_certain.into_iter().take(HOSTS_LISTED) {
            out.push_str("  ");
            line(out, host);
        }
    }
    if !alignment.unaligned.is_empty() {
        let unaligned = &alignment.unaligned;
        let named = if unaligned.len() <= HOSTS_LISTED {
            unaligned.join(", ")
        } else {
            format!(
                "{}, ... ({} hosts: the trace property NCCL_SCOREP::CLOCK_CORRECTION_UNALIGNED \
                 names them all)",
                unaligned[..HOSTS_LISTED].join(", "),
                unaligned.len()
            )
        };
        let _ = writeln!(
            out,
            "clocks left as they are (no collective or message both ways with {} or a host \
             aligned to it, or facts that contradict each other): {named}",
            alignment.reference,
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::clock_alignment::{Alignment, HostCorrection};

    #[test]
    fn a_large_jobs_communicators_are_counted_by_size_in_the_report() {
        let comm = |i: usize, members: usize, missing: u64| super::CommSummary {
            name: format!("comm{i} (0x{i:x})"),
            members,
            missing_ranks: (0..missing as u32).collect(),
            missing_rank_count: missing,
            placeholders: 0,
        };
        let render = |comms: &[super::CommSummary]| {
            let mut out = String::new();
            super::render_comms(&mut out, comms);
            out
        };
        let few: Vec<_> = (0..3).map(|i| comm(i, 8, 0)).collect();
        assert_eq!(
            render(&few),
            "  comm0 (0x0): 8 ranks\n  comm1 (0x1): 8 ranks\n  comm2 (0x2): 8 ranks\n"
        );
        let mut many: Vec<_> = (0..2048).map(|i| comm(i, 8, 0)).collect();
        many.push(comm(2048, 16384, 0));
        many.extend((2049..2069).map(|i| comm(i, 7, 1)));
        let out = render(&many);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3 + 16 + 1, "{out}");
        assert_eq!(lines[0], "  1 communicator of 16384 ranks");
        assert_eq!(lines[1], "  2048 communicators of 8 ranks");
        assert_eq!(lines[2], "  20 communicators of 7 ranks");
        assert_eq!(
            lines[3],
            "  comm2049 (0x801): 7 ranks (no part has rank [0])"
        );
        assert_eq!(
            lines[19],
            "  ... and 4 more communicators with ranks missing"
        );
    }

    #[test]
    fn a_large_jobs_clock_alignment_is_summed_up_in_the_report() {
        let host = |i: i64| HostCorrection {
            host: format!("node{i}"),
            offset_ns: -5_000_000 + i * 1000,
            drift_ppm: i as f64 / 10.0,
            uncertainty_ns: 1000 + i * 100,
            bounds: 10,
            violated_before: 10,
            violated_after: usize::from(i == 3),
            through: Vec::new(),
            bends: usize::from(i % 10 == 0) * 2,
        };
        let alignment = |hosts: i64, unaligned: usize| Alignment {
            reference: "node0".to_owned(),
            hosts: (1..=hosts).map(host).collect(),
            unaligned: (0..unaligned).map(|i| format!("far{i}")).collect(),
        };
        let render = |alignment: &Alignment| {
            let mut out = String::new();
            super::render_clock_alignment(&mut out, alignment);
            out
        };
        // A few hosts: a line each, and every host left as it is named.
        let few = render(&alignment(3, 2));
        assert_eq!(few.lines().count(), 4, "{few}");
        assert!(
            few.contains("clock of node3 aligned to node0: -4997.0 us added"),
            "{few}"
        );
        assert!(
            few.ends_with("contradict each other): far0, far1\n"),
            "{few}"
        );
        // Many: one line sums them up, the least certain follow, the rest is in the trace.
        let many = render(&alignment(40, 30));
        let lines: Vec<&str> = many.lines().collect();
        assert_eq!(lines.len(), 1 + 1 + 8 + 1, "{many}");
        assert_eq!(
            lines[0],
            "clocks of 40 hosts aligned to node0: -4999.0 to -4960.0 us added, drifts of +0.10 \
             to +4.00 ppm taken out, within +-1.1 to +-5.0 us (400 facts from the collectives \
             or messages; 400 broken before, 1 after; 4 followed through bends where the drift \
             changed)"
        );
        assert!(
            lines[1].contains("NCCL_SCOREP::CLOCK_CORRECTION_HOSTS"),
            "{many}"
        );
        assert!(
            lines[2].starts_with("  clock of node40 aligned to node0:"),
            "{many}"
        );
        assert!(
            lines[9].starts_with("  clock of node33 aligned to node0:"),
            "{many}"
        );
        assert!(
            lines[10].ends_with(
                "far0, far1, far2, far3, far4, far5, far6, far7, ... (30 hosts: the trace \
                 property NCCL_SCOREP::CLOCK_CORRECTION_UNALIGNED names them all)"
            ),
            "{many}"
        );
    }

    #[test]
    fn a_killed_merges_leftovers_are_removed_and_a_running_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        // No process has pid 2^22 + 1 here (pids stay below /proc/sys/kernel/pid_max).
        let dead = dir.path().join(".traces.merging.4194305");
        let running = dir
            .path()
            .join(format!(".traces.merging.{}", std::process::id()));
        let other = dir.path().join(".traces.recovering.1");
        for d in [&dead, &running, &other] {
            std::fs::create_dir_all(d.join("traces")).unwrap();
        }
        let removed = super::remove_leftovers_of_killed_merges(dir.path());
        assert_eq!(removed, [".traces.merging.4194305"]);
        assert!(!dead.exists());
        assert!(running.exists(), "this process's own");
        assert!(other.exists(), "pid 1 is alive");
    }

    #[test]
    fn missing_ranks_are_counted_not_enumerated() {
        assert_eq!(
            super::missing_ranks([0, 1, 3, 6].into_iter()),
            (vec![2, 4, 5], 3)
        );
        assert_eq!(super::missing_ranks([0, 1].into_iter()), (vec![], 0));
        let (listed, count) = super::missing_ranks([0, 2_000_000_000, u32::MAX].into_iter());
        assert_eq!(listed, (1..=32).collect::<Vec<u32>>());
        assert_eq!(count, u64::from(u32::MAX) - 2);
    }

    use super::*;

    #[test]
    fn comm_keys_are_the_hash() {
        assert_eq!(comm_key("train (0xAB12)"), "0xab12");
        assert_eq!(comm_key("NCCL comm 0xab12"), "0xab12");
        assert_eq!(comm_key("plain"), "plain");
        assert_eq!(comm_key("odd (0xzz)"), "odd (0xzz)");
    }

    #[test]
    fn ranks_come_from_ops_stream_names() {
        assert_eq!(ops_rank("train rank 3 ops"), Some(3));
        assert_eq!(ops_rank("a rank b rank 12 ops"), Some(12));
        assert_eq!(ops_rank("train rank 3 channel 0"), None);
        assert_eq!(ops_rank("thread 7"), None);
        assert_eq!(ops_stream("a rank b rank 12 ops"), Some(("a rank b", 12)));
        assert_eq!(ops_stream("world rank x ops"), None);
    }

    #[test]
    fn hosts_of_part_names() {
        assert_eq!(host_of("node1.cluster.org.1234"), "node1.cluster.org");
        assert_eq!(host_of("vm.1234.1"), "vm");
        assert_eq!(host_of("vm"), "vm");
    }

    #[test]
    fn relaid_chunks_start_at_target_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("in.evt");
        let to = dir.path().join("out.evt");
        let data: Vec<u8> = (0..10u8).collect();
        std::fs::write(&from, &data).unwrap();
        relay_chunks(&from, &to, 4, 8).unwrap();
        let out = std::fs::read(&to).unwrap();
        assert_eq!(&out[0..4], &data[0..4]);
        assert_eq!(&out[8..12], &data[4..8]);
        assert_eq!(&out[16..18], &data[8..10]);
        assert_eq!(out.len(), 18);
    }
}
