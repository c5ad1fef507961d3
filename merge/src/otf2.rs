//! The merges' use of `otf2_sys` (all OTF2 FFI lives there): reading a part's global
//! definitions and clock offsets ([`read_part`]), scanning a killed part's events
//! ([`scan_events`]), and writing the merged archive ([`write_archive`]): the unified
//! global definitions, and for every location a local definition file with the mapping
//! tables and the part's clock offsets. Event files are not touched here (the caller links
//! them into place). The helpers for archives and local definitions serve `merge --scorep`
//! too.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nccl_scorep_common::run_dir::EVENT_FILES_DIR;

use otf2_sys::error::drain_thread_error_reports;
use otf2_sys::read::{
    ClockOffset, CollectiveEnd, EventContext, EventVisitor, LocalDefinitions, Reader, Region,
};
use otf2_sys::writing::{Archive, GlobalDefWriter, IdMap};
use otf2_sys::*;

use super::{IdMaps, PartDefs, Unified};

/// The errors OTF2 reported on this thread since the last drain, as one line (warnings are
/// dropped).
pub(crate) fn reported_errors() -> Option<String> {
    let errors: Vec<String> = drain_thread_error_reports()
        .into_iter()
        .filter(|r| !r.is_warning())
        .map(|r| format!("{}: {}", r.code_name, r.message))
        .collect();
    (!errors.is_empty()).then(|| errors.join("; "))
}

/// An `otf2_sys` error as the merges' messages carry it.
pub(crate) fn message(error: otf2_sys::Error) -> String {
    error.to_string()
}

// ---- Reading ----------------------------------------------------------------------

/// Opens the archive whose anchor file is `anchor`, read by this process alone.
pub(crate) fn open(anchor: &Path) -> Result<Reader, String> {
    Reader::open(anchor).map_err(|error| match error.step() {
        Step::Open => error.describe("not a readable OTF2 anchor file"),
        _ => error.to_string(),
    })
}

/// Checks that reading the global definitions left no OTF2 error behind.
pub(crate) fn no_errors_reading_definitions() -> Result<(), String> {
    match reported_errors() {
        Some(errors) => Err(format!(
            "OTF2 errors reading the global definitions: {errors}"
        )),
        None => Ok(()),
    }
}

/// Reads the local definitions of each of `locations` (selected) and hands them to
/// `each`; their mapping tables also go to the location's event reader, if one is open. A
/// location without a local definition file has none (OTF2's complaint is dropped).
pub(crate) fn read_local_definitions(
    reader: &Reader,
    locations: &[u64],
    mut each: impl FnMut(u64, LocalDefinitions) -> Result<(), String>,
) -> Result<(), String> {
    let files = reader.open_definition_files().map_err(message)?;
    let result = locations.iter().try_for_each(|&id| {
        let local = files.read(id).map_err(message)?.unwrap_or_default();
        drop(drain_thread_error_reports());
        each(id, local)
    });
    drop(files);
    drop(drain_thread_error_reports());
    result
}

/// Reads the global definitions and the clock offsets of the part whose anchor file is
/// `anchor`.
pub(super) fn read_part(anchor: &Path) -> Result<PartDefs, String> {
    let reader = open(anchor)?;
    let (event_chunk, definition_chunk) = reader.chunk_sizes().map_err(message)?;
    let defs = reader.global_definitions().map_err(message)?;
    no_errors_reading_definitions()?;
    // Every record of a kind the model does not keep is one the merge cannot carry over
    // (metrics, parameters, ...): refuse the part rather than lose them.
    let announced = reader.number_of_global_definitions().map_err(message)?;
    let taken = defs.kept_records();
    if announced > taken {
        return Err(format!(
            "{} of its {announced} global definitions are of kinds the merge does not handle \
             (only what the plugin writes: strings, paradigms, system tree, location groups, \
             locations, regions, groups, communicators, attributes)",
            announced - taken
        ));
    }
    let mut part = PartDefs {
        event_chunk,
        definition_chunk,
        defs,
        clock_offsets: Default::default(),
        // A part without properties (an older plugin) merges all the same.
        properties: reader.properties().unwrap_or_default(),
        ranks_named: Default::default(),
    };
    read_clock_offsets(&reader, anchor, &mut part)?;
    Ok(part)
}

/// Reads every location's local definitions: its clock offsets. A part written by the
/// plugin has no mapping tables; one that has them is refused (its events would need the
/// maps composed).
///
/// Locations whose files are links to one file (the plugin links equal ones) are read
/// once: one file per part instead of one per location.
fn read_clock_offsets(reader: &Reader, anchor: &Path, part: &mut PartDefs) -> Result<(), String> {
    let dir = anchor.with_file_name(EVENT_FILES_DIR);
    // The locations by the file that holds their definitions; a location whose file
    // cannot be looked at is read on its own.
    let mut sharing: HashMap<(u64, u64), Vec<u64>> = HashMap::new();
    let mut read = Vec::new();
    for location in part.defs.locations.iter() {
        let id = location.id;
        match std::fs::metadata(dir.join(format!("{id}.def"))) {
            Ok(file) => {
                let same = sharing.entry((file.dev(), file.ino())).or_default();
                if same.is_empty() {
                    read.push(id);
                }
                same.push(id);
            }
            Err(_) => read.push(id),
        }
    }
    let mut also: HashMap<u64, Vec<u64>> = sharing
        .into_values()
        .map(|ids| (ids[0], ids[1..].to_vec()))
        .collect();
    reader.select_locations(&read).map_err(message)?;
    read_local_definitions(reader, &read, |id, local| {
        if local.has_mapping_tables() {
            return Err(format!(
                "location {id} has mapping tables (is this a merged archive?)"
            ));
        }
        for other in also.remove(&id).unwrap_or_default() {
            part.clock_offsets
                .insert(other, local.clock_offsets.clone());
        }
        part.clock_offsets.insert(id, local.clock_offsets);
        Ok(())
    })
}

/// What [`scan_events`] found in one location's event file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct EventScan {
    /// Events OTF2 read.
    pub events: u64,
    /// How many events lead up to the last point where every interval was closed
    /// (Enter/Leave and MpiCollectiveBegin/End balanced).
    pub balanced: u64,
    /// The timestamp of the last of those events.
    pub balanced_time: u64,
}

/// Follows the nesting of one location's intervals.
#[derive(Default)]
struct NestingScan {
    scan: EventScan,
    depth: u64,
}

impl NestingScan {
    fn opened(&mut self) {
        self.scan.events += 1;
        self.depth += 1;
    }

    fn closed(&mut self, event: &EventContext<'_>) {
        self.scan.events += 1;
        self.depth = self.depth.saturating_sub(1);
        if self.depth == 0 {
            self.scan.balanced = event.position.unwrap_or(self.scan.events);
            self.scan.balanced_time = event.time;
        }
    }
}

impl EventVisitor for NestingScan {
    fn wants_attributes(&self) -> bool {
        false
    }

    fn enter(&mut self, _: &EventContext<'_>, _region: u32) {
        self.opened();
    }

    fn leave(&mut self, event: &EventContext<'_>, _region: u32) {
        self.closed(event);
    }

    fn mpi_collective_begin(&mut self, _: &EventContext<'_>) {
        self.opened();
    }

    fn mpi_collective_end(&mut self, event: &EventContext<'_>, _: &CollectiveEnd) {
        self.closed(event);
    }
}

/// Reads the event file of each of `locations` (of the archive `anchor`) to find where
/// its intervals are last all closed: the place to end a killed process's events.
pub(super) fn scan_events(anchor: &Path, locations: &[u64]) -> Result<Vec<EventScan>, String> {
    let reader = open(anchor)?;
    reader.select_locations(locations).map_err(message)?;
    let files = reader.open_event_files().map_err(message)?;
    let scans = locations
        .iter()
        .map(|&location| {
            let events = files.location(location).map_err(message)?;
            let mut nesting = NestingScan::default();
            let read = events.read_all(&mut nesting).map_err(message)?;
            // Events without a method of their own (messages) count too.
            Ok(EventScan {
                events: read.events,
                ..nesting.scan
            })
        })
        .collect();
    drop(files);
    drop(drain_thread_error_reports());
    scans
}

// ---- Writing ----------------------------------------------------------------------

/// What an archive says about itself.
pub(crate) struct ArchiveInfo<'a> {
    pub(crate) creator: &'a str,
    pub(crate) description: &'a str,
    pub(crate) machine: Option<&'a str>,
}

/// Creates the archive `<dir>/traces.otf2` (`dir/traces` must not exist), written by this
/// process alone.
pub(crate) fn create(
    dir: &Path,
    event_chunk: u64,
    definition_chunk: u64,
    info: &ArchiveInfo,
) -> Result<Archive, String> {
    let archive = Archive::create(dir, event_chunk, definition_chunk).map_err(|error| {
        if error.code().is_some() {
            error.describe(&format!("OTF2 cannot create {}/traces", dir.display()))
        } else {
            error.to_string()
        }
    })?;
    archive.set_creator(info.creator).map_err(message)?;
    archive.set_description(info.description).map_err(message)?;
    if let Some(machine) = info.machine {
        archive.set_machine_name(machine).map_err(message)?;
    }
    Ok(archive)
}

/// Closes the archive, which `name` names in errors ("merged archive").
pub(crate) fn close(archive: Archive, name: &str) -> Result<(), String> {
    archive
        .close()
        .map_err(|e| e.describe(&format!("closing the {name} failed")))?;
    if let Some(errors) = reported_errors() {
        return Err(format!("OTF2 errors writing the {name}: {errors}"));
    }
    Ok(())
}

/// Writes every location's local definitions into the archive `archive` created in `dir`:
/// the mapping tables of its part (`maps`) and the clock offsets
/// `clock_offsets(part index, location id)`. Returns the number of mapping tables written.
///
/// The locations of one part with the same clock offsets (as a process's locations have)
/// get the same file: OTF2 writes it for the first of them, and the others get a hard link
/// to it (a copy where the file system has none). OTF2 looks a location up in a list of
/// every location it wrote before, so one OTF2 writer per location made a merge of 16 384
/// parts (442 368 locations) quadratic; and a file system creates a link faster than a
/// file.
pub(crate) fn write_local_definitions<'o>(
    archive: &Archive,
    dir: &Path,
    parts: &[PartDefs],
    maps: &[IdMaps],
    clock_offsets: impl Fn(usize, u64) -> &'o [ClockOffset],
    empty: &[u64],
) -> Result<u64, String> {
    let mut written_tables = 0u64;
    // (the location whose file OTF2 wrote, a location that shares it)
    let mut shared: Vec<(u64, u64)> = Vec::new();
    let files = archive.open_definition_files().map_err(message)?;
    // Locations of no part (ranks without one): nothing to map or offset.
    if let Some((&first, others)) = empty.split_first() {
        files
            .writer(first)
            .and_then(|writer| writer.close())
            .map_err(message)?;
        shared.extend(others.iter().map(|&other| (first, other)));
    }
    for (part_index, part) in parts.iter().enumerate() {
        let tables = part_tables(&maps[part_index])?;
        // The locations written so far in this part, by their clock offsets.
        let mut written: Vec<(&[ClockOffset], u64)> = Vec::new();
        for location in part.defs.locations.iter() {
            let global = maps[part_index].location(location.id);
            let offsets = clock_offsets(part_index, location.id);
            written_tables += tables.len() as u64;
            if let Some(&(_, first)) = written.iter().find(|(known, _)| *known == offsets) {
                shared.push((first, global));
                continue;
            }
            let writer = files.writer(global).map_err(message)?;
            for (kind, map) in &tables {
                writer.mapping_table(*kind, map).map_err(message)?;
            }
            for offset in offsets {
                writer.clock_offset(offset).map_err(message)?;
            }
            writer.close().map_err(message)?;
            written.push((offsets, global));
        }
    }
    files.close().map_err(message)?;
    let file = |id: u64| {
        dir.join(nccl_scorep_common::run_dir::EVENT_FILES_DIR)
            .join(format!("{id}.def"))
    };
    for (first, other) in shared {
        let (from, to) = (file(first), file(other));
        std::fs::hard_link(&from, &to)
            .or_else(|_| std::fs::copy(&from, &to).map(|_| ()))
            .map_err(|e| format!("cannot write {}: {e}", to.display()))?;
    }
    Ok(written_tables)
}

/// Each kind of `maps` with the mapping type OTF2 writes its table as.
fn mapping_kinds(maps: &IdMaps) -> [(OTF2_MappingType, &BTreeMap<u64, u64>); 7] {
    [
        (OTF2_MAPPING_STRING, &maps.strings),
        (OTF2_MAPPING_ATTRIBUTE, &maps.attributes),
        (OTF2_MAPPING_LOCATION, &maps.locations),
        (OTF2_MAPPING_REGION, &maps.regions),
        (OTF2_MAPPING_GROUP, &maps.groups),
        (OTF2_MAPPING_COMM, &maps.comms),
        (OTF2_MAPPING_LOCATION_GROUP, &maps.location_groups),
    ]
    .map(|(kind, pairs)| (kind as OTF2_MappingType, pairs))
}

/// The mapping tables of one part, built once and written into each of its locations; a
/// kind whose ids all stay as they are needs none.
fn part_tables(maps: &IdMaps) -> Result<Vec<(OTF2_MappingType, IdMap)>, String> {
    let mut tables = Vec::new();
    for (kind, pairs) in mapping_kinds(maps) {
        if pairs.iter().all(|(local, global)| local == global) {
            continue;
        }
        tables.push((kind, IdMap::from_pairs(pairs).map_err(message)?));
    }
    Ok(tables)
}

/// The definition chunk size of the merged archive: the smallest OTF2 allows that holds its
/// largest definition record (a group's member list, a mapping table, a string). OTF2
/// clears a whole chunk for every local definition writer, one per location, so with the
/// parts' 4 MiB chunks that clearing was most of the time of a merge of many parts.
fn definition_chunk_size(unified: &Unified, maps: &[IdMaps]) -> u64 {
    // The largest OTF2 encoding of one 64-bit integer.
    const INTEGER: u64 = 9;
    let groups = unified
        .groups
        .iter()
        .map(|g| g.members.len() as u64 * INTEGER);
    let strings = unified.strings.iter().map(|s| s.len() as u64);
    let tables = maps
        .iter()
        .flat_map(|m| mapping_kinds(m).map(|(_, pairs)| pairs.len() as u64 * 2 * INTEGER));
    let largest = groups.chain(strings).chain(tables).max().unwrap_or(0);
    // Room for the record's header and the chunk's own bookkeeping.
    let needed = largest + 64 * 1024;
    needed
        .next_power_of_two()
        .clamp(OTF2_CHUNK_SIZE_MIN, OTF2_CHUNK_SIZE_MAX)
}

/// Writes the archive `<dir>/traces.otf2` (`dir/traces` must not exist): the global
/// definitions of `unified`, and each location's local definitions. Returns the number
/// of mapping tables written.
pub(super) fn write_archive(
    dir: &Path,
    unified: &Unified,
    parts: &[PartDefs],
    maps: &[IdMaps],
    properties: &[(String, String)],
    placeholders: &[u64],
) -> Result<u64, String> {
    let info = ArchiveInfo {
        creator: concat!("nccl-scorep merge ", env!("CARGO_PKG_VERSION")),
        description: "NCCL communication traced by the nccl-scorep plugin (merged)",
        machine: Some(&unified.machine),
    };
    let chunk = definition_chunk_size(unified, maps);
    let archive = create(dir, unified.event_chunk, chunk, &info)?;
    for (name, value) in properties {
        archive.set_property(name, value).map_err(message)?;
    }
    let tables = write_local_definitions(
        &archive,
        dir,
        parts,
        maps,
        |part, location| {
            parts[part]
                .clock_offsets
                .get(&location)
                .map_or(&[], Vec::as_slice)
        },
        placeholders,
    )?;
    let writer = archive.global_def_writer().map_err(message)?;
    write_global_definitions(&writer, unified).map_err(message)?;
    close(archive, "merged archive")?;
    Ok(tables)
}

/// Writes every global definition in dependency order: clock properties, strings,
/// paradigms, system tree, location groups, locations, regions, groups, comms,
/// attributes. Ids are dense and in increasing order (the index in each list).
fn write_global_definitions(w: &GlobalDefWriter, u: &Unified) -> Result<(), otf2_sys::Error> {
    w.clock_properties(&u.clock)?;
    for (id, text) in u.strings.iter().enumerate() {
        w.string(id as u32, text)?;
    }
    for p in &u.paradigms {
        w.paradigm(p)?;
    }
    for (id, n) in u.nodes.iter().enumerate() {
        w.system_tree_node(&otf2_sys::read::SystemTreeNode {
            id: id as u32,
            ..*n
        })?;
    }
    for (id, g) in u.location_groups.iter().enumerate() {
        w.location_group(&otf2_sys::read::LocationGroup {
            id: id as u32,
            ..*g
        })?;
    }
    for l in &u.locations {
        w.location(l)?;
    }
    for (id, r) in u.regions.iter().enumerate() {
        w.region(&Region {
            id: id as u32,
            ..*r
        })?;
    }
    for (id, g) in u.groups.iter().enumerate() {
        w.group(&otf2_sys::read::Group {
            id: id as u32,
            ..g.clone()
        })?;
    }
    for (id, c) in u.comms.iter().enumerate() {
        w.comm(&otf2_sys::read::Comm {
            id: id as u32,
            ..*c
        })?;
    }
    for (id, a) in u.attributes.iter().enumerate() {
        w.attribute(&otf2_sys::read::Attribute {
            id: id as u32,
            ..*a
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use otf2_sys::read::Group;

    fn group(members: usize) -> Group {
        Group {
            id: 0,
            name: 0,
            group_type: OTF2_GROUP_TYPE_COMM_GROUP as u8,
            paradigm: OTF2_PARADIGM_NONE as u8,
            flags: 0,
            members: vec![0; members],
        }
    }

    #[test]
    fn definition_chunks_are_small_unless_a_record_needs_more() {
        let mut unified = Unified::default();
        unified.strings.push("machine".to_owned());
        unified.groups.push(group(1024));
        assert_eq!(definition_chunk_size(&unified, &[]), OTF2_CHUNK_SIZE_MIN);

        // 100 000 members of up to 9 bytes each.
        unified.groups.push(group(100_000));
        assert_eq!(definition_chunk_size(&unified, &[]), 1 << 20);

        // A mapping table of 20 000 strings: pairs of up to 18 bytes.
        let maps = IdMaps {
            strings: (0..20_000).map(|id| (id, id + 1)).collect(),
            ..IdMaps::default()
        };
        let unified = Unified::default();
        assert_eq!(definition_chunk_size(&unified, &[maps]), 512 << 10);
    }
}

/// Archives for the tests of other modules, written with OTF2 itself.
#[cfg(test)]
pub(crate) mod test_archives {
    use super::*;
    use otf2_sys::read::{
        AttributeValue, ClockProperties, Location, LocationGroup, SystemTreeNode,
    };
    use otf2_sys::writing::AttributeList;
    use std::path::PathBuf;

    /// The location of [`write_nested_events`].
    pub(crate) const LOCATION: u64 = 7;

    /// Writes `<dir>/traces.otf2` with one location that has `pairs` intervals, each an
    /// outer and an inner one (Enter, Enter, Leave, Leave; event `4k + 1` at time
    /// `10 · (4k + 1)`), with a 40-value attribute list (a record longer than 255 bytes)
    /// on the outer Enter of every `wide_every`th interval. Answers the event file.
    pub(crate) fn write_nested_events(dir: &Path, pairs: u64, wide_every: u64) -> PathBuf {
        let info = ArchiveInfo {
            creator: "test",
            description: "nested intervals",
            machine: None,
        };
        let archive =
            create(dir, OTF2_CHUNK_SIZE_MIN, OTF2_CHUNK_SIZE_MIN, &info).expect("an archive");
        let files = archive.open_event_files().expect("event files");
        let writer = files.writer(LOCATION).expect("an event writer");
        let mut attributes = AttributeList::new().expect("an attribute list");
        let mut event = 0u64;
        let mut time = || {
            event += 1;
            event * 10
        };
        for pair in 0..pairs {
            let list = if wide_every > 0 && pair % wide_every == 0 {
                for attribute in 0..40 {
                    let value = AttributeValue::Uint64(u64::MAX - pair);
                    attributes.add(attribute, value).expect("an attribute");
                }
                Some(&mut attributes)
            } else {
                None
            };
            writer.enter(list, time(), 0).expect("Enter");
            writer.enter(None, time(), 0).expect("Enter");
            writer.leave(None, time(), 0).expect("Leave");
            writer.leave(None, time(), 0).expect("Leave");
        }
        writer.close().expect("closed");
        files.close().expect("closed");
        let global = archive.global_def_writer().expect("a definition writer");
        let strings = ["", "machine", "process", "location", "interval"];
        for (id, text) in strings.iter().enumerate() {
            global.string(id as u32, text).expect("a string");
        }
        let clock = ClockProperties {
            timer_resolution: 1_000_000_000,
            global_offset: 0,
            trace_length: 10 * (4 * pairs + 1),
            realtime_timestamp: 0,
        };
        global.clock_properties(&clock).expect("clock");
        let node = SystemTreeNode {
            id: 0,
            name: 1,
            class_name: 1,
            parent: OTF2_UNDEFINED_SYSTEM_TREE_NODE,
        };
        global.system_tree_node(&node).expect("a node");
        let group = LocationGroup {
            id: 0,
            name: 2,
            group_type: OTF2_LOCATION_GROUP_TYPE_PROCESS as u8,
            system_tree_parent: 0,
            creating_location_group: OTF2_UNDEFINED_LOCATION_GROUP,
        };
        global.location_group(&group).expect("a location group");
        let location = Location {
            id: LOCATION,
            name: 3,
            location_type: OTF2_LOCATION_TYPE_CPU_THREAD as u8,
            number_of_events: 4 * pairs,
            location_group: 0,
        };
        global.location(&location).expect("a location");
        let region = Region {
            id: 0,
            name: 4,
            canonical_name: 4,
            description: 0,
            role: OTF2_REGION_ROLE_FUNCTION as u8,
            paradigm: OTF2_PARADIGM_NONE as u8,
            flags: OTF2_REGION_FLAG_NONE,
            source_file: 0,
            begin_line: 0,
            end_line: 0,
        };
        global.region(&region).expect("a region");
        close(archive, "test archive").expect("closed");
        dir.join("traces").join(format!("{LOCATION}.evt"))
    }
}
