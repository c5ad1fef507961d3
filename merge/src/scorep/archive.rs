//! Score-P's archive as `merge --scorep` reads it: its global definitions (every record
//! kept to be written again unchanged, and the model `otf2_sys::read::GlobalDefs` to look
//! them up), and per location its clock offsets and, where a part needs them, the Enters
//! of the sync regions and the ProgramBegin's pid from its events (raw timestamps: Score-P's
//! clock offsets are not applied).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use otf2_sys::error::drain_thread_error_reports;
use otf2_sys::read::{
    AttributeValue, ClockOffset, EventContext, EventVisitor, GlobalDefinition, GlobalDefs,
    LocationEvents, Reader,
};
use otf2_sys::{OTF2_COMPRESSION_NONE, OTF2_SUBSTRATE_POSIX};

use super::FirstIds;
use crate::otf2::{message, no_errors_reading_definitions, open, read_local_definitions};

/// What is read from Score-P's global definitions.
pub(super) struct ScorepDefs {
    pub(super) event_chunk: u64,
    pub(super) definition_chunk: u64,
    /// The definitions to look up; its `clock` is the one written (possibly widened).
    pub(super) defs: GlobalDefs,
    /// Every record in file order, written again as it was read (the ClockProperties
    /// from `defs.clock`).
    pub(super) records: Vec<GlobalDefinition>,
    /// The next free id of each kind we add definitions of.
    pub(super) next: FirstIds,
}

impl ScorepDefs {
    pub(super) fn string(&self, id: u32) -> &str {
        self.defs.string(id).unwrap_or("")
    }
}

fn bump(next: &mut u32, id: u32) {
    if id != u32::MAX {
        *next = (*next).max(id.saturating_add(1));
    }
}

/// Moves the next free ids past `record`'s.
fn note_ids(next: &mut FirstIds, record: &GlobalDefinition) {
    match record {
        GlobalDefinition::String(s) => bump(&mut next.string, s.id),
        GlobalDefinition::Attribute(a) => bump(&mut next.attribute, a.id),
        GlobalDefinition::LocationGroup(g) => bump(&mut next.location_group, g.id),
        GlobalDefinition::Region(r) => bump(&mut next.region, r.id),
        GlobalDefinition::Group(g) => bump(&mut next.group, g.id),
        GlobalDefinition::Comm(c) => bump(&mut next.comm, c.id),
        GlobalDefinition::InterComm(c) => bump(&mut next.comm, c.id),
        _ => {}
    }
}

/// Opens Score-P's archive and reads its global definitions (every record kept for
/// writing it again).
pub(super) fn read_scorep_definitions(anchor: &Path) -> Result<(Reader, ScorepDefs), String> {
    let reader = open(anchor)?;
    let (event_chunk, definition_chunk) = reader.chunk_sizes().map_err(message)?;
    let substrate = reader.file_substrate().map_err(message)?;
    if u32::from(substrate) != OTF2_SUBSTRATE_POSIX {
        return Err(format!(
            "the archive uses OTF2 file substrate {substrate}, not POSIX files: its files \
             cannot be linked into the combined archive (SIONlib containers are not supported)"
        ));
    }
    let compression = reader.compression().map_err(message)?;
    if u32::from(compression) != OTF2_COMPRESSION_NONE {
        return Err(format!("the archive is compressed (mode {compression})"));
    }

    let mut defs = ScorepDefs {
        event_chunk,
        definition_chunk,
        defs: GlobalDefs::default(),
        records: Vec::new(),
        next: FirstIds::default(),
    };
    let unknown = reader
        .for_each_global_definition(|record| {
            note_ids(&mut defs.next, &record);
            defs.defs.add(&record);
            defs.records.push(record);
        })
        .map_err(message)?;
    no_errors_reading_definitions()?;
    if unknown > 0 {
        return Err(format!(
            "{unknown} of its global definitions are of kinds OTF2 3.0.2 does not know (a \
             newer OTF2 wrote them); they could not be carried over"
        ));
    }
    let announced = reader.number_of_global_definitions().map_err(message)?;
    let taken = defs.records.len() as u64;
    if announced != taken {
        return Err(format!(
            "the anchor announces {announced} global definitions, {taken} were read"
        ));
    }
    if defs.defs.clock.is_none() {
        return Err("it has no ClockProperties".to_owned());
    }
    Ok((reader, defs))
}

/// What the scan of Score-P's events finds on one location.
#[derive(Default)]
struct ScanState {
    /// The region ids whose Enters are collected.
    sync_regions: HashSet<u32>,
    /// Global id of the "ProcessId" attribute.
    pid_attribute: Option<u32>,
    /// Read every event (else stop after ProgramBegin).
    full: bool,
    stop: bool,
    enters: Vec<(u32, u64)>,
    pid: Option<u64>,
}

impl EventVisitor for ScanState {
    fn wants_attributes(&self) -> bool {
        self.pid_attribute.is_some()
    }

    fn keep_reading(&self) -> bool {
        !self.stop
    }

    fn enter(&mut self, event: &EventContext<'_>, region: u32) {
        if self.sync_regions.contains(&region) {
            self.enters.push((region, event.time));
        }
    }

    fn program_begin(&mut self, event: &EventContext<'_>, _name: u32, _arguments: &[u32]) {
        let pid = self.pid_attribute.and_then(|id| event.attribute(id));
        if let Some(AttributeValue::Uint64(pid)) = pid {
            self.pid = Some(pid);
        }
        self.stop = !self.full;
    }
}

/// Score-P's per-location facts the merge needs: clock offsets of every location, and for
/// the scanned ones the sync-region Enters (raw ticks) and the ProgramBegin pid.
#[derive(Default)]
pub(super) struct ScorepLocals {
    pub(super) offsets: HashMap<u64, Vec<ClockOffset>>,
    pub(super) enters: HashMap<u64, Vec<(u32, u64)>>,
    pub(super) pids: HashMap<u64, u64>,
    pub(super) notes: Vec<String>,
}

/// Reads the local definitions of every location of Score-P's archive and scans the
/// events of `scan` (raw timestamps: Score-P's clock offsets are not applied).
pub(super) fn read_scorep_locals(
    reader: &Reader,
    defs: &ScorepDefs,
    scan: &[u64],
    sync_regions: &HashSet<u32>,
    pid_attribute: Option<u32>,
    full: bool,
) -> Result<ScorepLocals, String> {
    let ids: Vec<u64> = defs.defs.locations.iter().map(|l| l.id).collect();
    reader.select_locations(&ids).map_err(message)?;
    let files = if scan.is_empty() {
        None
    } else {
        Some(reader.open_event_files().map_err(message)?)
    };
    // The event readers are open before the local definitions are read, so that these
    // give them their mapping tables (Score-P's events use local ids).
    let events: Vec<LocationEvents<'_, '_>> = files
        .iter()
        .flat_map(|files| scan.iter().filter_map(|&id| files.location(id).ok()))
        .collect();
    let mut locals = ScorepLocals::default();
    let result = read_local_definitions(reader, &ids, |id, local| {
        locals.offsets.insert(id, local.clock_offsets);
        Ok(())
    });
    let result = result.and_then(|()| {
        for location in &events {
            let mut state = ScanState {
                sync_regions: sync_regions.clone(),
                pid_attribute,
                full,
                ..ScanState::default()
            };
            let id = location.location();
            scan_location(location, &mut state)
                .map_err(|e| format!("reading the events of Score-P's location {id}: {e}"))?;
            if !state.enters.is_empty() {
                locals.enters.insert(id, state.enters);
            }
            if let Some(pid) = state.pid {
                locals.pids.insert(id, pid);
            }
        }
        Ok(())
    });
    let readable = events.len();
    drop(events);
    drop(files);
    drop(drain_thread_error_reports());
    if readable < scan.len() {
        locals.notes.push(format!(
            "{} of Score-P's thread locations have no readable event file",
            scan.len() - readable
        ));
    }
    result.map(|()| locals)
}

/// Reads one location's events into `state` (until ProgramBegin unless `state.full`).
fn scan_location(location: &LocationEvents<'_, '_>, state: &mut ScanState) -> Result<(), String> {
    location
        .apply_clock_offsets(false)
        .map_err(|e| e.describe("cannot switch off clock offsets"))?;
    location.read_all(state).map_err(|e| match e {
        otf2_sys::Error::Panic { .. } => e.to_string(),
        otf2_sys::Error::Otf2 { .. } => e.describe("reading failed"),
    })?;
    drop(drain_thread_error_reports());
    Ok(())
}
