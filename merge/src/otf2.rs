//! The OTF2 C library behind `nccl-scorep merge`: the only FFI of the merge module.
//!
//! [`read_part`] opens one part with `OTF2_Reader` and hands back its global definitions
//! (ids as written in the part) and every location's clock offsets. [`write_archive`]
//! writes the merged archive: the unified global definitions, and for every location a
//! local definition file with the mapping tables and the part's clock offsets. Event files
//! are not touched here (the caller links them into place).
//!
//! Callbacks get a pointer to a Rust state struct as their user data, catch panics, and
//! answer `OTF2_CALLBACK_ERROR` after one (which stops the read). OTF2's error reports are
//! collected by `otf2_sys`'s error handler and turned into errors after each step.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::collections::BTreeMap;
use std::ffi::{c_char, c_void, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

use otf2_sys::error::drain_thread_error_reports;
use otf2_sys::*;

use otf2_sys::callbacks::{code_name, first_failure, guarded, text, CallbackState};

use super::{
    Attribute, Clock, ClockOffset, Comm, Group, IdMaps, Location, LocationGroup, Paradigm,
    PartDefs, Region, SystemTreeNode, Unified,
};

/// How often `OTF2_Reader_ReadAllLocalDefinitions` is called again for one location after
/// it stopped at a duplicate mapping table (as `otf2-print` does).
pub(crate) const MAX_DEFINITION_PASSES: usize = 64;

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

/// An error for a failed OTF2 call, with what OTF2 reported about it.
pub(crate) fn failure(what: &str, code: Option<OTF2_ErrorCode>) -> String {
    let mut message = what.to_owned();
    if let Some(code) = code {
        message = format!("{message}: {}", code_name(code));
    }
    if let Some(reports) = reported_errors() {
        message = format!("{message} (OTF2: {reports})");
    }
    message
}

pub(crate) fn check(code: OTF2_ErrorCode, what: &str) -> Result<(), String> {
    if code == OTF2_SUCCESS {
        Ok(())
    } else {
        Err(failure(what, Some(code)))
    }
}

pub(crate) fn cstring(text: &str) -> CString {
    CString::new(text.replace('\0', "?")).unwrap_or_default()
}

// ---- Reading a part ---------------------------------------------------------------

/// An open `OTF2_Reader`, closed when dropped.
pub(crate) struct Reader(pub(crate) *mut OTF2_Reader);

impl Drop for Reader {
    fn drop(&mut self) {
        // SAFETY: the pointer came from OTF2_Reader_Open and is closed only here.
        unsafe { OTF2_Reader_Close(self.0) };
        drop(drain_thread_error_reports());
    }
}

/// Reads the global definitions and the clock offsets of the part whose anchor file is
/// `anchor`.
pub(super) fn read_part(anchor: &Path) -> Result<PartDefs, String> {
    drop(drain_thread_error_reports());
    let path = CString::new(anchor.as_os_str().as_bytes())
        .map_err(|_| "the path contains a NUL byte".to_owned())?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call.
    let reader = unsafe { OTF2_Reader_Open(path.as_ptr()) };
    if reader.is_null() {
        return Err(failure("not a readable OTF2 anchor file", None));
    }
    let reader = Reader(reader);
    // SAFETY: the reader is open.
    let code = unsafe { OTF2_Reader_SetSerialCollectiveCallbacks(reader.0) };
    check(code, "OTF2_Reader_SetSerialCollectiveCallbacks failed")?;
    let mut defs = PartDefs::default();
    // SAFETY: the reader is open; the out pointers are valid.
    let code = unsafe {
        OTF2_Reader_GetChunkSize(reader.0, &mut defs.event_chunk, &mut defs.definition_chunk)
    };
    check(code, "cannot read the chunk sizes")?;

    // SAFETY: the reader is open.
    let def_reader = unsafe { OTF2_Reader_GetGlobalDefReader(reader.0) };
    if def_reader.is_null() {
        return Err(failure(
            "cannot read the global definitions (traces.def)",
            None,
        ));
    }
    let mut state = DefState {
        defs,
        taken: 0,
        panic: None,
    };
    // SAFETY: the reader and `def_reader` are open; `state` lives until the end of this
    // function and is used only through the callbacks while ReadAllGlobalDefinitions runs.
    let code = unsafe { register_global_def_callbacks(reader.0, def_reader, &mut state) };
    let mut read = 0;
    let read_code = if code == OTF2_SUCCESS {
        // SAFETY: as above.
        unsafe { OTF2_Reader_ReadAllGlobalDefinitions(reader.0, def_reader, &mut read) }
    } else {
        code
    };
    // SAFETY: `def_reader` is open and not used after this.
    unsafe { OTF2_Reader_CloseGlobalDefReader(reader.0, def_reader) };
    if let Some(panic) = state.panic.take() {
        return Err(format!(
            "internal error while reading the definitions: {panic}"
        ));
    }
    if read_code != OTF2_SUCCESS {
        let what = format!("reading the global definitions failed after {read} records");
        return Err(failure(&what, Some(read_code)));
    }
    if let Some(errors) = reported_errors() {
        return Err(format!(
            "OTF2 errors reading the global definitions: {errors}"
        ));
    }
    // Every record the callbacks above did not take is of a kind the merge cannot carry
    // over (metrics, parameters, ...): refuse the part rather than lose them.
    let mut announced = 0;
    // SAFETY: the reader is open; `announced` is a valid out pointer.
    let code = unsafe { OTF2_Reader_GetNumberOfGlobalDefinitions(reader.0, &mut announced) };
    check(code, "cannot read the number of global definitions")?;
    if announced > state.taken {
        return Err(format!(
            "{} of its {announced} global definitions are of kinds the merge does not handle \
             (only what the plugin writes: strings, paradigms, system tree, location groups, \
             locations, regions, groups, communicators, attributes)",
            announced - state.taken
        ));
    }
    let mut defs = state.defs;
    read_clock_offsets(&reader, &mut defs)?;
    Ok(defs)
}

/// Reads every location's local definitions: its clock offsets. A part written by the
/// plugin has no mapping tables; one that has them is refused (its events would need the
/// maps composed).
fn read_clock_offsets(reader: &Reader, defs: &mut PartDefs) -> Result<(), String> {
    let ids: Vec<u64> = defs.locations.iter().map(|l| l.id).collect();
    for &id in &ids {
        // SAFETY: the reader is open.
        let code = unsafe { OTF2_Reader_SelectLocation(reader.0, id) };
        check(code, &format!("cannot select location {id}"))?;
    }
    // SAFETY: the reader is open.
    let code = unsafe { OTF2_Reader_OpenDefFiles(reader.0) };
    check(code, "cannot open the local definition files")?;
    let result = ids.iter().try_for_each(|&id| {
        let (offsets, mapped) = read_local_definitions(reader, id)?;
        if mapped {
            return Err(format!(
                "location {id} has mapping tables (is this a merged archive?)"
            ));
        }
        defs.clock_offsets.insert(id, offsets);
        Ok(())
    });
    // SAFETY: the reader is open, with its definition files.
    unsafe { OTF2_Reader_CloseDefFiles(reader.0) };
    drop(drain_thread_error_reports());
    result
}

/// One location's clock offsets, and whether it has mapping tables.
fn read_local_definitions(
    reader: &Reader,
    location: u64,
) -> Result<(Vec<ClockOffset>, bool), String> {
    // SAFETY: the reader is open, with its definition files.
    let def_reader = unsafe { OTF2_Reader_GetDefReader(reader.0, location) };
    if def_reader.is_null() {
        // No local definition file: no clock offsets (OTF2's complaint is dropped).
        drop(drain_thread_error_reports());
        return Ok((Vec::new(), false));
    }
    let mut state = LocalState {
        offsets: Vec::new(),
        mapped: false,
        panic: None,
    };
    // SAFETY: the reader and `def_reader` are open; `state` outlives the reads below and
    // is used only through the callbacks while they run.
    let mut code = unsafe { register_local_def_callbacks(reader.0, def_reader, &mut state) };
    if code == OTF2_SUCCESS {
        for _ in 0..MAX_DEFINITION_PASSES {
            let mut read = 0;
            // SAFETY: as above.
            code = unsafe { OTF2_Reader_ReadAllLocalDefinitions(reader.0, def_reader, &mut read) };
            if code != OTF2_ERROR_DUPLICATE_MAPPING_TABLE {
                break;
            }
        }
    }
    // SAFETY: `def_reader` is open and not used after this.
    unsafe { OTF2_Reader_CloseDefReader(reader.0, def_reader) };
    if let Some(panic) = state.panic {
        return Err(format!(
            "internal error while reading local definitions: {panic}"
        ));
    }
    if code != OTF2_SUCCESS && code != OTF2_ERROR_DUPLICATE_MAPPING_TABLE {
        let what = format!("reading the local definitions of location {location} failed");
        return Err(failure(&what, Some(code)));
    }
    drop(drain_thread_error_reports());
    Ok((state.offsets, state.mapped))
}

// ---- Callbacks --------------------------------------------------------------------

struct DefState {
    defs: PartDefs,
    /// Records the callbacks took.
    taken: u64,
    panic: Option<String>,
}

impl CallbackState for DefState {
    fn record_panic(&mut self, message: String) {
        self.panic.get_or_insert(message);
    }
}

struct LocalState {
    offsets: Vec<ClockOffset>,
    mapped: bool,
    panic: Option<String>,
}

impl CallbackState for LocalState {
    fn record_panic(&mut self, message: String) {
        self.panic.get_or_insert(message);
    }
}

/// Runs `body` on the part definitions behind `user_data`.
///
/// # Safety
/// `user_data` is what [`register_global_def_callbacks`] registered.
unsafe fn with_defs(user_data: *mut c_void, body: impl FnOnce(&mut PartDefs)) -> OTF2_CallbackCode {
    // SAFETY: forwarded from the caller.
    unsafe {
        guarded(user_data, |state: &mut DefState| {
            state.taken += 1;
            body(&mut state.defs)
        })
    }
}

/// Registers the global definition callbacks with `state` as their user data.
///
/// # Safety
/// `reader` and `def_reader` are open; `state` outlives every read with this reader.
unsafe fn register_global_def_callbacks(
    reader: *mut OTF2_Reader,
    def_reader: *mut OTF2_GlobalDefReader,
    state: &mut DefState,
) -> OTF2_ErrorCode {
    // SAFETY: allocates a callbacks struct (or returns NULL).
    let callbacks = unsafe { OTF2_GlobalDefReaderCallbacks_New() };
    if callbacks.is_null() {
        return OTF2_ERROR_MEM_ALLOC_FAILED;
    }
    // SAFETY: `callbacks` is live; each function has the type its setter takes (the
    // compiler checks it); the reader copies the struct when registering, so it is
    // deleted right after; `state` outlives the reads, per the caller.
    unsafe {
        let c = callbacks;
        let codes = [
            OTF2_GlobalDefReaderCallbacks_SetClockPropertiesCallback(c, Some(def_clock)),
            OTF2_GlobalDefReaderCallbacks_SetStringCallback(c, Some(def_string)),
            OTF2_GlobalDefReaderCallbacks_SetParadigmCallback(c, Some(def_paradigm)),
            OTF2_GlobalDefReaderCallbacks_SetSystemTreeNodeCallback(c, Some(def_node)),
            OTF2_GlobalDefReaderCallbacks_SetLocationGroupCallback(c, Some(def_lg)),
            OTF2_GlobalDefReaderCallbacks_SetLocationCallback(c, Some(def_location)),
            OTF2_GlobalDefReaderCallbacks_SetRegionCallback(c, Some(def_region)),
            OTF2_GlobalDefReaderCallbacks_SetGroupCallback(c, Some(def_group)),
            OTF2_GlobalDefReaderCallbacks_SetCommCallback(c, Some(def_comm)),
            OTF2_GlobalDefReaderCallbacks_SetAttributeCallback(c, Some(def_attribute)),
            OTF2_Reader_RegisterGlobalDefCallbacks(
                reader,
                def_reader,
                c,
                (state as *mut DefState).cast(),
            ),
        ];
        OTF2_GlobalDefReaderCallbacks_Delete(c);
        first_failure(&codes)
    }
}

unsafe extern "C" fn def_clock(
    user_data: *mut c_void,
    timer_resolution: u64,
    global_offset: u64,
    trace_length: u64,
    _realtime_timestamp: u64,
) -> OTF2_CallbackCode {
    let clock = Clock {
        resolution: timer_resolution,
        offset: global_offset,
        length: trace_length,
    };
    // SAFETY: OTF2 passes back the user data of register_global_def_callbacks.
    unsafe { with_defs(user_data, |defs| defs.clock = Some(clock)) }
}

unsafe extern "C" fn def_string(
    user_data: *mut c_void,
    id: OTF2_StringRef,
    string: *const c_char,
) -> OTF2_CallbackCode {
    // SAFETY: OTF2 passes a NUL-terminated string valid during the callback.
    let string = unsafe { text(string) };
    // SAFETY: OTF2 passes back the user data of register_global_def_callbacks.
    unsafe {
        with_defs(user_data, |defs| {
            defs.strings.insert(id, string);
        })
    }
}

unsafe extern "C" fn def_paradigm(
    user_data: *mut c_void,
    paradigm: OTF2_Paradigm,
    name: OTF2_StringRef,
    class: OTF2_ParadigmClass,
) -> OTF2_CallbackCode {
    let paradigm = Paradigm {
        paradigm,
        name,
        class,
    };
    // SAFETY: OTF2 passes back the user data of register_global_def_callbacks.
    unsafe { with_defs(user_data, |defs| defs.paradigms.push(paradigm)) }
}

unsafe extern "C" fn def_node(
    user_data: *mut c_void,
    id: OTF2_SystemTreeNodeRef,
    name: OTF2_StringRef,
    class_name: OTF2_StringRef,
    parent: OTF2_SystemTreeNodeRef,
) -> OTF2_CallbackCode {
    let node = SystemTreeNode {
        id,
        name,
        class_name,
        parent,
    };
    // SAFETY: OTF2 passes back the user data of register_global_def_callbacks.
    unsafe { with_defs(user_data, |defs| defs.nodes.push(node)) }
}

unsafe extern "C" fn def_lg(
    user_data: *mut c_void,
    id: OTF2_LocationGroupRef,
    name: OTF2_StringRef,
    group_type: OTF2_LocationGroupType,
    system_tree_parent: OTF2_SystemTreeNodeRef,
    creating_location_group: OTF2_LocationGroupRef,
) -> OTF2_CallbackCode {
    let group = LocationGroup {
        id,
        name,
        group_type,
        system_tree_parent,
        creating_location_group,
    };
    // SAFETY: OTF2 passes back the user data of register_global_def_callbacks.
    unsafe { with_defs(user_data, |defs| defs.location_groups.push(group)) }
}

unsafe extern "C" fn def_location(
    user_data: *mut c_void,
    id: OTF2_LocationRef,
    name: OTF2_StringRef,
    location_type: OTF2_LocationType,
    number_of_events: u64,
    location_group: OTF2_LocationGroupRef,
) -> OTF2_CallbackCode {
    let location = Location {
        id,
        name,
        location_type,
        number_of_events,
        location_group,
    };
    // SAFETY: OTF2 passes back the user data of register_global_def_callbacks.
    unsafe { with_defs(user_data, |defs| defs.locations.push(location)) }
}

#[allow(clippy::too_many_arguments)] // OTF2's signature
unsafe extern "C" fn def_region(
    user_data: *mut c_void,
    id: OTF2_RegionRef,
    name: OTF2_StringRef,
    canonical_name: OTF2_StringRef,
    description: OTF2_StringRef,
    role: OTF2_RegionRole,
    paradigm: OTF2_Paradigm,
    flags: OTF2_RegionFlag,
    source_file: OTF2_StringRef,
    begin_line: u32,
    end_line: u32,
) -> OTF2_CallbackCode {
    let region = Region {
        id,
        name,
        canonical_name,
        description,
        role,
        paradigm,
        flags,
        source_file,
        begin_line,
        end_line,
    };
    // SAFETY: OTF2 passes back the user data of register_global_def_callbacks.
    unsafe { with_defs(user_data, |defs| defs.regions.push(region)) }
}

#[allow(clippy::too_many_arguments)] // OTF2's signature
unsafe extern "C" fn def_group(
    user_data: *mut c_void,
    id: OTF2_GroupRef,
    name: OTF2_StringRef,
    group_type: OTF2_GroupType,
    paradigm: OTF2_Paradigm,
    flags: OTF2_GroupFlag,
    number_of_members: u32,
    members: *const u64,
) -> OTF2_CallbackCode {
    let members = if members.is_null() || number_of_members == 0 {
        Vec::new()
    } else {
        // SAFETY: OTF2 passes `number_of_members` values at `members`, valid during the
        // callback; they are copied.
        unsafe { std::slice::from_raw_parts(members, number_of_members as usize) }.to_vec()
    };
    let group = Group {
        id,
        name,
        group_type,
        paradigm,
        flags,
        members,
    };
    // SAFETY: OTF2 passes back the user data of register_global_def_callbacks.
    unsafe { with_defs(user_data, |defs| defs.groups.push(group)) }
}

unsafe extern "C" fn def_comm(
    user_data: *mut c_void,
    id: OTF2_CommRef,
    name: OTF2_StringRef,
    group: OTF2_GroupRef,
    parent: OTF2_CommRef,
    flags: OTF2_CommFlag,
) -> OTF2_CallbackCode {
    let comm = Comm {
        id,
        name,
        group,
        parent,
        flags,
    };
    // SAFETY: OTF2 passes back the user data of register_global_def_callbacks.
    unsafe { with_defs(user_data, |defs| defs.comms.push(comm)) }
}

unsafe extern "C" fn def_attribute(
    user_data: *mut c_void,
    id: OTF2_AttributeRef,
    name: OTF2_StringRef,
    description: OTF2_StringRef,
    attribute_type: OTF2_Type,
) -> OTF2_CallbackCode {
    let attribute = Attribute {
        id,
        name,
        description,
        attribute_type,
    };
    // SAFETY: OTF2 passes back the user data of register_global_def_callbacks.
    unsafe { with_defs(user_data, |defs| defs.attributes.push(attribute)) }
}

/// Registers the local definition callbacks with `state` as their user data.
///
/// # Safety
/// `reader` and `def_reader` are open; `state` outlives every read with `def_reader`.
unsafe fn register_local_def_callbacks(
    reader: *mut OTF2_Reader,
    def_reader: *mut OTF2_DefReader,
    state: &mut LocalState,
) -> OTF2_ErrorCode {
    // SAFETY: allocates a callbacks struct (or returns NULL).
    let callbacks = unsafe { OTF2_DefReaderCallbacks_New() };
    if callbacks.is_null() {
        return OTF2_ERROR_MEM_ALLOC_FAILED;
    }
    // SAFETY: as in `register_global_def_callbacks`.
    unsafe {
        let c = callbacks;
        let codes = [
            OTF2_DefReaderCallbacks_SetClockOffsetCallback(c, Some(local_clock_offset)),
            OTF2_DefReaderCallbacks_SetMappingTableCallback(c, Some(local_mapping_table)),
            OTF2_Reader_RegisterDefCallbacks(
                reader,
                def_reader,
                c,
                (state as *mut LocalState).cast(),
            ),
        ];
        OTF2_DefReaderCallbacks_Delete(c);
        first_failure(&codes)
    }
}

unsafe extern "C" fn local_clock_offset(
    user_data: *mut c_void,
    time: OTF2_TimeStamp,
    offset: i64,
    standard_deviation: f64,
) -> OTF2_CallbackCode {
    let offset = ClockOffset {
        time,
        offset,
        standard_deviation,
    };
    // SAFETY: OTF2 passes back the user data of register_local_def_callbacks.
    unsafe {
        guarded(user_data, |state: &mut LocalState| {
            state.offsets.push(offset)
        })
    }
}

unsafe extern "C" fn local_mapping_table(
    user_data: *mut c_void,
    _mapping_type: OTF2_MappingType,
    _id_map: *const OTF2_IdMap,
) -> OTF2_CallbackCode {
    // SAFETY: OTF2 passes back the user data of register_local_def_callbacks.
    unsafe { guarded(user_data, |state: &mut LocalState| state.mapped = true) }
}

// ---- Writing the merged archive ---------------------------------------------------

/// OTF2 keeps this pointer until the archive is closed: a static outlives it.
pub(crate) static FLUSH_CALLBACKS: OTF2_FlushCallbacks = OTF2_FlushCallbacks {
    otf2_pre_flush: Some(pre_flush),
    otf2_post_flush: None,
};

unsafe extern "C" fn pre_flush(
    _user_data: *mut c_void,
    _file_type: OTF2_FileType,
    _location: OTF2_LocationRef,
    _caller_data: *mut c_void,
    _final: bool,
) -> OTF2_FlushType {
    OTF2_FLUSH as OTF2_FlushType
}

/// An open `OTF2_Archive` being written, closed when dropped (after a failure).
pub(crate) struct Archive(pub(crate) *mut OTF2_Archive);

impl Drop for Archive {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the archive is open and closed only here or in `close`.
            unsafe { OTF2_Archive_Close(self.0) };
            drop(drain_thread_error_reports());
        }
    }
}

/// An `OTF2_IdMap`, freed when dropped.
pub(crate) struct IdMap(pub(crate) *mut OTF2_IdMap);

impl Drop for IdMap {
    fn drop(&mut self) {
        // SAFETY: created by OTF2_IdMap_Create, freed only here.
        unsafe { OTF2_IdMap_Free(self.0) };
    }
}

/// An id map of `pairs` (local, global), or None when every pair is the identity. Dense
/// when the local ids are 0..n in order, else sparse.
fn id_map(pairs: &BTreeMap<u64, u64>) -> Result<Option<IdMap>, String> {
    if pairs.iter().all(|(local, global)| local == global) {
        return Ok(None);
    }
    let dense = pairs
        .keys()
        .enumerate()
        .all(|(i, local)| *local == i as u64);
    let mode = if dense {
        OTF2_ID_MAP_DENSE
    } else {
        OTF2_ID_MAP_SPARSE
    };
    // SAFETY: plain allocation; NULL on failure.
    let map = unsafe { OTF2_IdMap_Create(mode as OTF2_IdMapMode, pairs.len() as u64) };
    if map.is_null() {
        return Err("OTF2_IdMap_Create failed".to_owned());
    }
    let map = IdMap(map);
    for (&local, &global) in pairs {
        // SAFETY: `map` is live; dense maps get their local ids in order.
        let code = unsafe { OTF2_IdMap_AddIdPair(map.0, local, global) };
        check(code, "OTF2_IdMap_AddIdPair failed")?;
    }
    Ok(Some(map))
}

/// The mapping tables of one part, built once and written into each of its locations.
pub(crate) struct PartTables(pub(crate) Vec<(OTF2_MappingType, IdMap)>);

pub(crate) fn part_tables(maps: &IdMaps) -> Result<PartTables, String> {
    let mut tables = Vec::new();
    for (kind, pairs) in [
        (OTF2_MAPPING_STRING, &maps.strings),
        (OTF2_MAPPING_ATTRIBUTE, &maps.attributes),
        (OTF2_MAPPING_LOCATION, &maps.locations),
        (OTF2_MAPPING_REGION, &maps.regions),
        (OTF2_MAPPING_GROUP, &maps.groups),
        (OTF2_MAPPING_COMM, &maps.comms),
        (OTF2_MAPPING_LOCATION_GROUP, &maps.location_groups),
    ] {
        if let Some(map) = id_map(pairs)? {
            tables.push((kind as OTF2_MappingType, map));
        }
    }
    Ok(PartTables(tables))
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
    let tables = maps.iter().flat_map(|m| {
        [
            &m.strings,
            &m.attributes,
            &m.locations,
            &m.regions,
            &m.groups,
            &m.comms,
            &m.location_groups,
        ]
        .map(|pairs| pairs.len() as u64 * 2 * INTEGER)
    });
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
) -> Result<u64, String> {
    drop(drain_thread_error_reports());
    let path = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| "the output path contains a NUL byte".to_owned())?;
    let name = cstring("traces");
    // SAFETY: the write sequence of the OTF2 notes (§1.3) on this thread; the callback
    // table is a static.
    let archive = unsafe {
        OTF2_Archive_Open(
            path.as_ptr(),
            name.as_ptr(),
            OTF2_FILEMODE_WRITE as OTF2_FileMode,
            unified.event_chunk,
            definition_chunk_size(unified, maps),
            OTF2_SUBSTRATE_POSIX as OTF2_FileSubstrate,
            OTF2_COMPRESSION_NONE as OTF2_Compression,
        )
    };
    if archive.is_null() {
        return Err(failure(
            &format!("OTF2 cannot create an archive in {}", dir.display()),
            None,
        ));
    }
    let mut archive = Archive(archive);
    let a = archive.0;
    // SAFETY: `a` is open; FLUSH_CALLBACKS is a static.
    let code = unsafe { OTF2_Archive_SetFlushCallbacks(a, &FLUSH_CALLBACKS, ptr::null_mut()) };
    check(code, "OTF2_Archive_SetFlushCallbacks failed")?;
    // SAFETY: `a` is open. This process is the primary of the merged archive.
    let code = unsafe { OTF2_Archive_SetSerialCollectiveCallbacks(a) };
    check(
        code,
        &format!("OTF2 cannot create {}/traces", dir.display()),
    )?;
    let creator = cstring(concat!("nccl-scorep merge ", env!("CARGO_PKG_VERSION")));
    let description = cstring("NCCL communication traced by the nccl-scorep plugin (merged)");
    let machine = cstring(&unified.machine);
    // SAFETY: `a` is open; OTF2 copies the strings.
    unsafe {
        check(OTF2_Archive_SetCreator(a, creator.as_ptr()), "SetCreator")?;
        check(
            OTF2_Archive_SetDescription(a, description.as_ptr()),
            "SetDescription",
        )?;
        check(
            OTF2_Archive_SetMachineName(a, machine.as_ptr()),
            "SetMachineName",
        )?;
    }

    let mut written_tables = 0u64;
    // SAFETY: `a` is open.
    let code = unsafe { OTF2_Archive_OpenDefFiles(a) };
    check(code, "cannot open the local definition files")?;
    for (part_index, part) in parts.iter().enumerate() {
        let tables = part_tables(&maps[part_index])?;
        for location in &part.locations {
            let global = maps[part_index].location(location.id);
            // SAFETY: `a` is open with its definition files.
            let writer = unsafe { OTF2_Archive_GetDefWriter(a, global) };
            if writer.is_null() {
                return Err(failure(
                    &format!("cannot create the local definitions of location {global}"),
                    None,
                ));
            }
            for (kind, map) in &tables.0 {
                // SAFETY: `writer` is open; OTF2 copies the map.
                let code = unsafe { OTF2_DefWriter_WriteMappingTable(writer, *kind, map.0) };
                check(code, "OTF2_DefWriter_WriteMappingTable failed")?;
                written_tables += 1;
            }
            for offset in part.clock_offsets.get(&location.id).into_iter().flatten() {
                // SAFETY: `writer` is open.
                let code = unsafe {
                    OTF2_DefWriter_WriteClockOffset(
                        writer,
                        offset.time,
                        offset.offset,
                        offset.standard_deviation,
                    )
                };
                check(code, "OTF2_DefWriter_WriteClockOffset failed")?;
            }
            // SAFETY: `writer` is open and not used after this.
            let code = unsafe { OTF2_Archive_CloseDefWriter(a, writer) };
            check(code, "OTF2_Archive_CloseDefWriter failed")?;
        }
    }
    // SAFETY: `a` is open with its definition files.
    let code = unsafe { OTF2_Archive_CloseDefFiles(a) };
    check(code, "cannot close the local definition files")?;

    // SAFETY: `a` is open; this process is its primary.
    let global = unsafe { OTF2_Archive_GetGlobalDefWriter(a) };
    if global.is_null() {
        return Err(failure("cannot create the global definitions", None));
    }
    // SAFETY: `global` is open until the archive closes.
    unsafe { write_global_definitions(global, unified) }?;

    // SAFETY: `a` is open; it is nulled so that `drop` does not close it again.
    let code = unsafe { OTF2_Archive_Close(a) };
    archive.0 = ptr::null_mut();
    check(code, "closing the merged archive failed")?;
    if let Some(errors) = reported_errors() {
        return Err(format!("OTF2 errors writing the merged archive: {errors}"));
    }
    Ok(written_tables)
}

/// Writes every global definition in dependency order: clock properties, strings,
/// paradigms, system tree, location groups, locations, regions, groups, comms,
/// attributes. Ids are dense and in increasing order.
///
/// # Safety
/// `w` is the open global definition writer of the archive.
unsafe fn write_global_definitions(
    w: *mut OTF2_GlobalDefWriter,
    u: &Unified,
) -> Result<(), String> {
    // SAFETY: `w` is open (caller); every pointer passed points into `u` or a local
    // CString, which outlive the calls; OTF2 copies what it keeps.
    unsafe {
        check(
            OTF2_GlobalDefWriter_WriteClockProperties(
                w,
                u.clock.resolution,
                u.clock.offset,
                u.clock.length,
                u.clock.offset,
            ),
            "writing the clock properties",
        )?;
        for (id, text) in u.strings.iter().enumerate() {
            let text = cstring(text);
            check(
                OTF2_GlobalDefWriter_WriteString(w, id as u32, text.as_ptr()),
                "writing a string",
            )?;
        }
        for p in &u.paradigms {
            check(
                OTF2_GlobalDefWriter_WriteParadigm(w, p.paradigm, p.name, p.class),
                "writing a paradigm",
            )?;
        }
        for (id, n) in u.nodes.iter().enumerate() {
            check(
                OTF2_GlobalDefWriter_WriteSystemTreeNode(
                    w,
                    id as u32,
                    n.name,
                    n.class_name,
                    n.parent,
                ),
                "writing a system tree node",
            )?;
        }
        for (id, g) in u.location_groups.iter().enumerate() {
            check(
                OTF2_GlobalDefWriter_WriteLocationGroup(
                    w,
                    id as u32,
                    g.name,
                    g.group_type,
                    g.system_tree_parent,
                    g.creating_location_group,
                ),
                "writing a location group",
            )?;
        }
        for l in &u.locations {
            check(
                OTF2_GlobalDefWriter_WriteLocation(
                    w,
                    l.id,
                    l.name,
                    l.location_type,
                    l.number_of_events,
                    l.location_group,
                ),
                "writing a location",
            )?;
        }
        for (id, r) in u.regions.iter().enumerate() {
            check(
                OTF2_GlobalDefWriter_WriteRegion(
                    w,
                    id as u32,
                    r.name,
                    r.canonical_name,
                    r.description,
                    r.role,
                    r.paradigm,
                    r.flags,
                    r.source_file,
                    r.begin_line,
                    r.end_line,
                ),
                "writing a region",
            )?;
        }
        for (id, g) in u.groups.iter().enumerate() {
            check(
                OTF2_GlobalDefWriter_WriteGroup(
                    w,
                    id as u32,
                    g.name,
                    g.group_type,
                    g.paradigm,
                    g.flags,
                    g.members.len() as u32,
                    g.members.as_ptr(),
                ),
                "writing a group",
            )?;
        }
        for (id, c) in u.comms.iter().enumerate() {
            check(
                OTF2_GlobalDefWriter_WriteComm(w, id as u32, c.name, c.group, c.parent, c.flags),
                "writing a communicator",
            )?;
        }
        for (id, a) in u.attributes.iter().enumerate() {
            check(
                OTF2_GlobalDefWriter_WriteAttribute(
                    w,
                    id as u32,
                    a.name,
                    a.description,
                    a.attribute_type,
                ),
                "writing an attribute",
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
