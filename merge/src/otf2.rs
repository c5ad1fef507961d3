//! The OTF2 C library behind `nccl-scorep merge`: the only FFI of the merge module, and the
//! steps `merge --scorep` (module `scorep`) takes alike.
//!
//! [`read_part`] opens one part with `OTF2_Reader` and hands back its global definitions
//! (ids as written in the part) and every location's clock offsets. [`write_archive`]
//! writes the merged archive: the unified global definitions, and for every location a
//! local definition file with the mapping tables and the part's clock offsets. Event files
//! are not touched here (the caller links them into place). [`Reader`], [`Archive`] and
//! [`GlobalDefWriter`] serve both merges.
//!
//! Callbacks get a pointer to a Rust state struct as their user data, catch panics, and
//! answer `OTF2_CALLBACK_ERROR` after one (which stops the read). OTF2's error reports are
//! collected by `otf2_sys`'s error handler and turned into errors after each step.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::collections::BTreeMap;
use std::ffi::{c_char, c_void, CString};
use std::marker::PhantomData;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

use otf2_sys::callbacks::{code_name, first_failure, guarded, text, CallbackState};
use otf2_sys::error::drain_thread_error_reports;
use otf2_sys::reading::{self, copy_array, register_callbacks, GlobalDefinitionsFailure};
use otf2_sys::*;

use super::{
    Attribute, Clock, ClockOffset, Comm, Group, IdMaps, Location, LocationGroup, Paradigm,
    PartDefs, Region, SystemTreeNode, Unified,
};

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

// ---- Reading ----------------------------------------------------------------------

/// What a read's callbacks fill in, and the first panic of one (which stopped the read).
pub(crate) struct ReadState<T> {
    pub(crate) data: T,
    panic: Option<String>,
}

impl<T> ReadState<T> {
    pub(crate) fn new(data: T) -> Self {
        ReadState { data, panic: None }
    }

    pub(crate) fn take_panic(&mut self) -> Option<String> {
        self.panic.take()
    }
}

impl<T> CallbackState for ReadState<T> {
    fn record_panic(&mut self, message: String) {
        self.panic.get_or_insert(message);
    }
}

/// What the merges take from a location's local definitions.
#[derive(Default)]
pub(crate) struct LocalDefinitions {
    pub(crate) clock_offsets: Vec<ClockOffset>,
    /// It has mapping tables (it belongs to a merged archive).
    pub(crate) mapped: bool,
}

/// An open `OTF2_Reader`, closed when dropped.
pub(crate) struct Reader(pub(crate) *mut OTF2_Reader);

impl Drop for Reader {
    fn drop(&mut self) {
        // SAFETY: the pointer came from OTF2_Reader_Open and is closed only here.
        unsafe { OTF2_Reader_Close(self.0) };
        drop(drain_thread_error_reports());
    }
}

impl Reader {
    /// Opens the archive whose anchor file is `anchor`, read by this process alone.
    pub(crate) fn open(anchor: &Path) -> Result<Reader, String> {
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
        Ok(reader)
    }

    /// The archive's (event, definition) chunk sizes.
    pub(crate) fn chunk_sizes(&self) -> Result<(u64, u64), String> {
        let (mut event, mut definition) = (0, 0);
        // SAFETY: the reader is open; the out pointers are valid.
        let code = unsafe { OTF2_Reader_GetChunkSize(self.0, &mut event, &mut definition) };
        check(code, "cannot read the chunk sizes")?;
        Ok((event, definition))
    }

    /// The number of global definitions the anchor file announces.
    pub(crate) fn number_of_global_definitions(&self) -> Result<u64, String> {
        let mut announced = 0;
        // SAFETY: the reader is open; `announced` is a valid out pointer.
        let code = unsafe { OTF2_Reader_GetNumberOfGlobalDefinitions(self.0, &mut announced) };
        check(code, "cannot read the number of global definitions")?;
        Ok(announced)
    }

    /// Reads the global definitions into `state` through the callbacks `set` installs.
    ///
    /// # Safety
    /// The callbacks `set` installs take a `ReadState<T>` as their user data.
    pub(crate) unsafe fn read_global_definitions<T>(
        &self,
        state: &mut ReadState<T>,
        set: impl FnOnce(*mut OTF2_GlobalDefReaderCallbacks) -> OTF2_ErrorCode,
    ) -> Result<(), String> {
        // SAFETY: the reader is open; the callbacks take `state` (caller), which outlives
        // the read.
        let read = unsafe { reading::read_global_definitions(self.0, state, set) };
        if let Some(panic) = state.take_panic() {
            return Err(format!(
                "internal error while reading the definitions: {panic}"
            ));
        }
        match read {
            Ok(_) => {}
            Err(GlobalDefinitionsFailure::NoReader) => {
                return Err(failure(
                    "cannot read the global definitions (traces.def)",
                    None,
                ))
            }
            Err(GlobalDefinitionsFailure::Stopped { read, code }) => {
                let what = format!("reading the global definitions failed after {read} records");
                return Err(failure(&what, Some(code)));
            }
        }
        if let Some(errors) = reported_errors() {
            return Err(format!(
                "OTF2 errors reading the global definitions: {errors}"
            ));
        }
        Ok(())
    }

    /// Selects `locations` for reading their local definitions and events.
    pub(crate) fn select_locations(&self, locations: &[u64]) -> Result<(), String> {
        for &id in locations {
            // SAFETY: the reader is open.
            let code = unsafe { OTF2_Reader_SelectLocation(self.0, id) };
            check(code, &format!("cannot select location {id}"))?;
        }
        Ok(())
    }

    /// Reads the local definitions of each of `locations` (selected) and hands them to
    /// `each`; their mapping tables also go to the location's event reader, if one is open.
    pub(crate) fn read_local_definitions(
        &self,
        locations: &[u64],
        mut each: impl FnMut(u64, LocalDefinitions) -> Result<(), String>,
    ) -> Result<(), String> {
        // SAFETY: the reader is open.
        let code = unsafe { OTF2_Reader_OpenDefFiles(self.0) };
        check(code, "cannot open the local definition files")?;
        let result = locations
            .iter()
            .try_for_each(|&id| each(id, self.local_definitions(id)?));
        // SAFETY: the reader is open, with its definition files.
        unsafe { OTF2_Reader_CloseDefFiles(self.0) };
        drop(drain_thread_error_reports());
        result
    }

    /// One location's local definitions; the definition files are open.
    fn local_definitions(&self, location: u64) -> Result<LocalDefinitions, String> {
        // SAFETY: the reader is open, with its definition files.
        let def_reader = unsafe { OTF2_Reader_GetDefReader(self.0, location) };
        if def_reader.is_null() {
            // No local definition file: no clock offsets (OTF2's complaint is dropped).
            drop(drain_thread_error_reports());
            return Ok(LocalDefinitions::default());
        }
        let mut state = ReadState::new(LocalDefinitions::default());
        let set = |c: *mut OTF2_DefReaderCallbacks| {
            // SAFETY: `c` is the live table of `register_callbacks`; each function has the
            // type its setter takes (the compiler checks it).
            unsafe {
                first_failure(&[
                    OTF2_DefReaderCallbacks_SetClockOffsetCallback(c, Some(local_clock_offset)),
                    OTF2_DefReaderCallbacks_SetMappingTableCallback(c, Some(local_mapping_table)),
                ])
            }
        };
        // SAFETY: the reader and `def_reader` are open; the callbacks take a
        // `ReadState<LocalDefinitions>`; `state` outlives the reads below and is used only
        // through the callbacks while they run.
        let mut code = unsafe { register_callbacks(self.0, def_reader, &mut state, set) };
        if code == OTF2_SUCCESS {
            // SAFETY: as above.
            code = unsafe { reading::read_all_local_definitions(self.0, def_reader) };
        }
        // SAFETY: `def_reader` is open and not used after this.
        unsafe { OTF2_Reader_CloseDefReader(self.0, def_reader) };
        if let Some(panic) = state.take_panic() {
            return Err(format!(
                "internal error while reading local definitions: {panic}"
            ));
        }
        if code != OTF2_SUCCESS {
            let what = format!("reading the local definitions of location {location} failed");
            return Err(failure(&what, Some(code)));
        }
        drop(drain_thread_error_reports());
        Ok(state.data)
    }
}

/// A part's global definitions, and how many records the callbacks took.
struct PartRead {
    defs: PartDefs,
    taken: u64,
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

    fn closed(&mut self, time: u64, position: u64) {
        self.scan.events += 1;
        self.depth = self.depth.saturating_sub(1);
        if self.depth == 0 {
            self.scan.balanced = position;
            self.scan.balanced_time = time;
        }
    }
}

/// Reads the event file of each of `locations` (of the archive `anchor`) to find where
/// its intervals are last all closed: the place to end a killed process's events.
pub(super) fn scan_events(anchor: &Path, locations: &[u64]) -> Result<Vec<EventScan>, String> {
    let reader = Reader::open(anchor)?;
    reader.select_locations(locations)?;
    // SAFETY: the reader is open.
    let code = unsafe { OTF2_Reader_OpenEvtFiles(reader.0) };
    check(code, "cannot open the event files")?;
    let mut scans = Vec::with_capacity(locations.len());
    let mut result = Ok(());
    for &location in locations {
        // SAFETY: the reader is open with its event files.
        let evt = unsafe { OTF2_Reader_GetEvtReader(reader.0, location) };
        if evt.is_null() {
            result = Err(failure(
                &format!("cannot read the events of location {location}"),
                None,
            ));
            break;
        }
        let mut state = ReadState::new(NestingScan::default());
        let set = |c: *mut OTF2_EvtReaderCallbacks| {
            // SAFETY: `c` is the live table of `register_callbacks`; each function has the
            // type its setter takes (the compiler checks it).
            unsafe {
                first_failure(&[
                    OTF2_EvtReaderCallbacks_SetEnterCallback(c, Some(evt_enter)),
                    OTF2_EvtReaderCallbacks_SetLeaveCallback(c, Some(evt_leave)),
                    OTF2_EvtReaderCallbacks_SetMpiCollectiveBeginCallback(
                        c,
                        Some(evt_collective_begin),
                    ),
                    OTF2_EvtReaderCallbacks_SetMpiCollectiveEndCallback(
                        c,
                        Some(evt_collective_end),
                    ),
                ])
            }
        };
        // SAFETY: the reader and `evt` are open; the callbacks take a
        // `ReadState<NestingScan>`; `state` outlives the read and is used only through the
        // callbacks while it runs.
        let mut code = unsafe { register_callbacks(reader.0, evt, &mut state, set) };
        let mut read = 0;
        if code == OTF2_SUCCESS {
            // SAFETY: as above.
            code = unsafe { OTF2_Reader_ReadAllLocalEvents(reader.0, evt, &mut read) };
        }
        // SAFETY: `evt` is open and not used after this.
        unsafe { OTF2_Reader_CloseEvtReader(reader.0, evt) };
        if let Some(panic) = state.take_panic() {
            result = Err(format!("internal error while reading events: {panic}"));
            break;
        }
        if code != OTF2_SUCCESS {
            let what = format!("reading the events of location {location} failed");
            result = Err(failure(&what, Some(code)));
            break;
        }
        let mut scan = state.data.scan;
        // Events without a callback (messages) count too.
        scan.events = read;
        scans.push(scan);
    }
    // SAFETY: the reader is open with its event files.
    unsafe { OTF2_Reader_CloseEvtFiles(reader.0) };
    drop(drain_thread_error_reports());
    result.map(|()| scans)
}

/// Runs `body` on the scan behind `user_data`.
///
/// # Safety
/// `user_data` is the `ReadState<NestingScan>` of [`scan_events`].
unsafe fn with_scan(
    user_data: *mut c_void,
    body: impl FnOnce(&mut NestingScan),
) -> OTF2_CallbackCode {
    // SAFETY: per the caller.
    unsafe { guarded::<ReadState<NestingScan>>(user_data, |state| body(&mut state.data)) }
}

unsafe extern "C" fn evt_enter(
    _location: OTF2_LocationRef,
    _time: OTF2_TimeStamp,
    _position: u64,
    user_data: *mut c_void,
    _attributes: *mut OTF2_AttributeList,
    _region: OTF2_RegionRef,
) -> OTF2_CallbackCode {
    // SAFETY: registered by `scan_events` with its state.
    unsafe { with_scan(user_data, NestingScan::opened) }
}

unsafe extern "C" fn evt_leave(
    _location: OTF2_LocationRef,
    time: OTF2_TimeStamp,
    position: u64,
    user_data: *mut c_void,
    _attributes: *mut OTF2_AttributeList,
    _region: OTF2_RegionRef,
) -> OTF2_CallbackCode {
    // SAFETY: registered by `scan_events` with its state.
    unsafe { with_scan(user_data, |s| s.closed(time, position)) }
}

unsafe extern "C" fn evt_collective_begin(
    _location: OTF2_LocationRef,
    _time: OTF2_TimeStamp,
    _position: u64,
    user_data: *mut c_void,
    _attributes: *mut OTF2_AttributeList,
) -> OTF2_CallbackCode {
    // SAFETY: registered by `scan_events` with its state.
    unsafe { with_scan(user_data, NestingScan::opened) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn evt_collective_end(
    _location: OTF2_LocationRef,
    time: OTF2_TimeStamp,
    position: u64,
    user_data: *mut c_void,
    _attributes: *mut OTF2_AttributeList,
    _op: OTF2_CollectiveOp,
    _comm: OTF2_CommRef,
    _root: u32,
    _sent: u64,
    _received: u64,
) -> OTF2_CallbackCode {
    // SAFETY: registered by `scan_events` with its state.
    unsafe { with_scan(user_data, |s| s.closed(time, position)) }
}

/// Reads the global definitions and the clock offsets of the part whose anchor file is
/// `anchor`.
pub(super) fn read_part(anchor: &Path) -> Result<PartDefs, String> {
    let reader = Reader::open(anchor)?;
    let mut defs = PartDefs::default();
    (defs.event_chunk, defs.definition_chunk) = reader.chunk_sizes()?;
    let mut state = ReadState::new(PartRead { defs, taken: 0 });
    let set = |c: *mut OTF2_GlobalDefReaderCallbacks| {
        // SAFETY: `c` is the live table of `register_callbacks`; each function has the type
        // its setter takes (the compiler checks it).
        unsafe {
            first_failure(&[
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
            ])
        }
    };
    // SAFETY: the callbacks take a `ReadState<PartRead>`.
    unsafe { reader.read_global_definitions(&mut state, set) }?;
    // Every record the callbacks above did not take is of a kind the merge cannot carry
    // over (metrics, parameters, ...): refuse the part rather than lose them.
    let announced = reader.number_of_global_definitions()?;
    let PartRead { mut defs, taken } = state.data;
    if announced > taken {
        return Err(format!(
            "{} of its {announced} global definitions are of kinds the merge does not handle \
             (only what the plugin writes: strings, paradigms, system tree, location groups, \
             locations, regions, groups, communicators, attributes)",
            announced - taken
        ));
    }
    read_clock_offsets(&reader, &mut defs)?;
    Ok(defs)
}

/// Reads every location's local definitions: its clock offsets. A part written by the
/// plugin has no mapping tables; one that has them is refused (its events would need the
/// maps composed).
fn read_clock_offsets(reader: &Reader, defs: &mut PartDefs) -> Result<(), String> {
    let ids: Vec<u64> = defs.locations.iter().map(|l| l.id).collect();
    reader.select_locations(&ids)?;
    reader.read_local_definitions(&ids, |id, local| {
        if local.mapped {
            return Err(format!(
                "location {id} has mapping tables (is this a merged archive?)"
            ));
        }
        defs.clock_offsets.insert(id, local.clock_offsets);
        Ok(())
    })
}

// ---- Callbacks --------------------------------------------------------------------

/// Runs `body` on the part definitions behind `user_data`.
///
/// # Safety
/// `user_data` is the `ReadState<PartRead>` of [`read_part`].
unsafe fn with_defs(user_data: *mut c_void, body: impl FnOnce(&mut PartDefs)) -> OTF2_CallbackCode {
    // SAFETY: forwarded from the caller.
    unsafe {
        guarded(user_data, |state: &mut ReadState<PartRead>| {
            state.data.taken += 1;
            body(&mut state.data.defs)
        })
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
    // SAFETY: OTF2 passes back the user data of `read_part`.
    unsafe { with_defs(user_data, |defs| defs.clock = Some(clock)) }
}

unsafe extern "C" fn def_string(
    user_data: *mut c_void,
    id: OTF2_StringRef,
    string: *const c_char,
) -> OTF2_CallbackCode {
    // SAFETY: OTF2 passes a NUL-terminated string valid during the callback.
    let string = unsafe { text(string) };
    // SAFETY: OTF2 passes back the user data of `read_part`.
    unsafe {
        with_defs(user_data, |defs| {
            defs.strings.insert(id, string);
        })
    }
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
    // SAFETY: OTF2 passes `number_of_members` values at `members`, valid during the
    // callback.
    let members = unsafe { copy_array(members, number_of_members as usize) };
    let group = Group {
        id,
        name,
        group_type,
        paradigm,
        flags,
        members,
    };
    // SAFETY: OTF2 passes back the user data of `read_part`.
    unsafe { with_defs(user_data, |defs| defs.groups.push(group)) }
}

/// Defines a global definition callback whose arguments after the user data are the
/// fields of `$record`, in OTF2's order, and that adds the record to the part's `$list`.
macro_rules! record_callback {
    ($callback:ident => $list:ident.push($record:ident { $($field:ident: $ty:ty),* $(,)? })) => {
        #[allow(clippy::too_many_arguments)] // OTF2's signature
        unsafe extern "C" fn $callback(
            user_data: *mut c_void,
            $($field: $ty),*
        ) -> OTF2_CallbackCode {
            let record = $record { $($field),* };
            // SAFETY: OTF2 passes back the user data of `read_part`.
            unsafe { with_defs(user_data, |defs| defs.$list.push(record)) }
        }
    };
}

record_callback!(def_paradigm => paradigms.push(Paradigm {
    paradigm: OTF2_Paradigm,
    name: OTF2_StringRef,
    class: OTF2_ParadigmClass,
}));
record_callback!(def_node => nodes.push(SystemTreeNode {
    id: OTF2_SystemTreeNodeRef,
    name: OTF2_StringRef,
    class_name: OTF2_StringRef,
    parent: OTF2_SystemTreeNodeRef,
}));
record_callback!(def_lg => location_groups.push(LocationGroup {
    id: OTF2_LocationGroupRef,
    name: OTF2_StringRef,
    group_type: OTF2_LocationGroupType,
    system_tree_parent: OTF2_SystemTreeNodeRef,
    creating_location_group: OTF2_LocationGroupRef,
}));
record_callback!(def_location => locations.push(Location {
    id: OTF2_LocationRef,
    name: OTF2_StringRef,
    location_type: OTF2_LocationType,
    number_of_events: u64,
    location_group: OTF2_LocationGroupRef,
}));
record_callback!(def_region => regions.push(Region {
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
}));
record_callback!(def_comm => comms.push(Comm {
    id: OTF2_CommRef,
    name: OTF2_StringRef,
    group: OTF2_GroupRef,
    parent: OTF2_CommRef,
    flags: OTF2_CommFlag,
}));
record_callback!(def_attribute => attributes.push(Attribute {
    id: OTF2_AttributeRef,
    name: OTF2_StringRef,
    description: OTF2_StringRef,
    attribute_type: OTF2_Type,
}));

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
    // SAFETY: OTF2 passes back the user data of `Reader::local_definitions`.
    unsafe {
        guarded(user_data, |state: &mut ReadState<LocalDefinitions>| {
            state.data.clock_offsets.push(offset)
        })
    }
}

unsafe extern "C" fn local_mapping_table(
    user_data: *mut c_void,
    _mapping_type: OTF2_MappingType,
    _id_map: *const OTF2_IdMap,
) -> OTF2_CallbackCode {
    // SAFETY: OTF2 passes back the user data of `Reader::local_definitions`.
    unsafe {
        guarded(user_data, |state: &mut ReadState<LocalDefinitions>| {
            state.data.mapped = true
        })
    }
}

// ---- Writing ----------------------------------------------------------------------

/// An open `OTF2_Archive` being written, closed when dropped (after a failure).
pub(crate) struct Archive(*mut OTF2_Archive);

impl Drop for Archive {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the archive is open and closed only here or in `close`.
            unsafe { OTF2_Archive_Close(self.0) };
            drop(drain_thread_error_reports());
        }
    }
}

/// What an archive says about itself.
pub(crate) struct ArchiveInfo<'a> {
    pub(crate) creator: &'a str,
    pub(crate) description: &'a str,
    pub(crate) machine: Option<&'a str>,
}

impl Archive {
    /// Creates the archive `<dir>/traces.otf2` (`dir/traces` must not exist), written by
    /// this process alone.
    pub(crate) fn create(
        dir: &Path,
        event_chunk: u64,
        definition_chunk: u64,
        info: &ArchiveInfo,
    ) -> Result<Archive, String> {
        drop(drain_thread_error_reports());
        let path = CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| "the output path contains a NUL byte".to_owned())?;
        let archive = otf2_sys::writing::create_archive(&path, event_chunk, definition_chunk)
            .map_err(|error| match error {
                otf2_sys::writing::CreateError::Open => failure(
                    &format!("OTF2 cannot create an archive in {}", dir.display()),
                    None,
                ),
                otf2_sys::writing::CreateError::Setup(code) => failure(
                    &format!("OTF2 cannot create {}/traces", dir.display()),
                    Some(code),
                ),
            })?;
        let archive = Archive(archive);
        let a = archive.0;
        let creator = cstring(info.creator);
        let description = cstring(info.description);
        // SAFETY: `a` is open; OTF2 copies the strings.
        unsafe {
            check(OTF2_Archive_SetCreator(a, creator.as_ptr()), "SetCreator")?;
            check(
                OTF2_Archive_SetDescription(a, description.as_ptr()),
                "SetDescription",
            )?;
        }
        if let Some(machine) = info.machine {
            let machine = cstring(machine);
            // SAFETY: `a` is open; OTF2 copies the string.
            let code = unsafe { OTF2_Archive_SetMachineName(a, machine.as_ptr()) };
            check(code, "SetMachineName")?;
        }
        Ok(archive)
    }

    /// Writes every location's local definitions: the mapping tables of its part (`maps`)
    /// and the clock offsets `clock_offsets(part index, location id)`. Returns the number
    /// of mapping tables written.
    pub(crate) fn write_local_definitions<'o>(
        &self,
        parts: &[PartDefs],
        maps: &[IdMaps],
        clock_offsets: impl Fn(usize, u64) -> &'o [ClockOffset],
    ) -> Result<u64, String> {
        let a = self.0;
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
                for (kind, map) in &tables {
                    // SAFETY: `writer` is open; OTF2 copies the map.
                    let code = unsafe { OTF2_DefWriter_WriteMappingTable(writer, *kind, map.0) };
                    check(code, "OTF2_DefWriter_WriteMappingTable failed")?;
                    written_tables += 1;
                }
                for offset in clock_offsets(part_index, location.id) {
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
        Ok(written_tables)
    }

    /// The global definition writer (this process is the archive's primary).
    pub(crate) fn global_def_writer(&self) -> Result<GlobalDefWriter<'_>, String> {
        // SAFETY: the archive is open; this process is its primary.
        let writer = unsafe { OTF2_Archive_GetGlobalDefWriter(self.0) };
        if writer.is_null() {
            return Err(failure("cannot create the global definitions", None));
        }
        Ok(GlobalDefWriter {
            writer,
            archive: PhantomData,
        })
    }

    /// Closes the archive, which `name` names in errors ("merged archive").
    pub(crate) fn close(mut self, name: &str) -> Result<(), String> {
        // SAFETY: the archive is open; it is nulled so that `drop` does not close it again.
        let code = unsafe { OTF2_Archive_Close(self.0) };
        self.0 = ptr::null_mut();
        check(code, &format!("closing the {name} failed"))?;
        if let Some(errors) = reported_errors() {
            return Err(format!("OTF2 errors writing the {name}: {errors}"));
        }
        Ok(())
    }
}

/// The global definition writer of an open [`Archive`]: a method per record the merges
/// write. Every pointer passed points into the record or a local CString, which outlive
/// the call; OTF2 copies what it keeps.
pub(crate) struct GlobalDefWriter<'a> {
    writer: *mut OTF2_GlobalDefWriter,
    archive: PhantomData<&'a Archive>,
}

impl GlobalDefWriter<'_> {
    /// The writer itself, for records written as they were read.
    pub(crate) fn raw(&self) -> *mut OTF2_GlobalDefWriter {
        self.writer
    }

    /// The clock properties, with the trace's start as its realtime timestamp.
    fn clock_properties(&self, clock: &Clock) -> Result<(), String> {
        // SAFETY: the writer is open while its archive is (borrowed).
        let code = unsafe {
            OTF2_GlobalDefWriter_WriteClockProperties(
                self.writer,
                clock.resolution,
                clock.offset,
                clock.length,
                clock.offset,
            )
        };
        check(code, "writing the clock properties")
    }

    pub(crate) fn string(&self, id: u32, text: &str) -> Result<(), String> {
        let text = cstring(text);
        // SAFETY: as in `clock_properties`.
        let code = unsafe { OTF2_GlobalDefWriter_WriteString(self.writer, id, text.as_ptr()) };
        check(code, "writing a string")
    }

    pub(crate) fn paradigm(&self, p: &Paradigm) -> Result<(), String> {
        // SAFETY: as in `clock_properties`.
        let code =
            unsafe { OTF2_GlobalDefWriter_WriteParadigm(self.writer, p.paradigm, p.name, p.class) };
        check(code, "writing a paradigm")
    }

    fn system_tree_node(&self, id: u32, n: &SystemTreeNode) -> Result<(), String> {
        // SAFETY: as in `clock_properties`.
        let code = unsafe {
            OTF2_GlobalDefWriter_WriteSystemTreeNode(
                self.writer,
                id,
                n.name,
                n.class_name,
                n.parent,
            )
        };
        check(code, "writing a system tree node")
    }

    pub(crate) fn location_group(&self, id: u32, g: &LocationGroup) -> Result<(), String> {
        // SAFETY: as in `clock_properties`.
        let code = unsafe {
            OTF2_GlobalDefWriter_WriteLocationGroup(
                self.writer,
                id,
                g.name,
                g.group_type,
                g.system_tree_parent,
                g.creating_location_group,
            )
        };
        check(code, "writing a location group")
    }

    pub(crate) fn location(&self, l: &Location) -> Result<(), String> {
        // SAFETY: as in `clock_properties`.
        let code = unsafe {
            OTF2_GlobalDefWriter_WriteLocation(
                self.writer,
                l.id,
                l.name,
                l.location_type,
                l.number_of_events,
                l.location_group,
            )
        };
        check(code, "writing a location")
    }

    pub(crate) fn region(&self, id: u32, r: &Region) -> Result<(), String> {
        // SAFETY: as in `clock_properties`.
        let code = unsafe {
            OTF2_GlobalDefWriter_WriteRegion(
                self.writer,
                id,
                r.name,
                r.canonical_name,
                r.description,
                r.role,
                r.paradigm,
                r.flags,
                r.source_file,
                r.begin_line,
                r.end_line,
            )
        };
        check(code, "writing a region")
    }

    pub(crate) fn group(&self, id: u32, g: &Group) -> Result<(), String> {
        // SAFETY: as in `clock_properties`; `members` holds the count passed.
        let code = unsafe {
            OTF2_GlobalDefWriter_WriteGroup(
                self.writer,
                id,
                g.name,
                g.group_type,
                g.paradigm,
                g.flags,
                g.members.len() as u32,
                g.members.as_ptr(),
            )
        };
        check(code, "writing a group")
    }

    pub(crate) fn comm(&self, id: u32, c: &Comm) -> Result<(), String> {
        // SAFETY: as in `clock_properties`.
        let code = unsafe {
            OTF2_GlobalDefWriter_WriteComm(self.writer, id, c.name, c.group, c.parent, c.flags)
        };
        check(code, "writing a communicator")
    }

    pub(crate) fn attribute(&self, id: u32, a: &Attribute) -> Result<(), String> {
        // SAFETY: as in `clock_properties`.
        let code = unsafe {
            OTF2_GlobalDefWriter_WriteAttribute(
                self.writer,
                id,
                a.name,
                a.description,
                a.attribute_type,
            )
        };
        check(code, "writing an attribute")
    }
}

/// An `OTF2_IdMap`, freed when dropped.
struct IdMap(*mut OTF2_IdMap);

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

/// The mapping tables of one part, built once and written into each of its locations.
fn part_tables(maps: &IdMaps) -> Result<Vec<(OTF2_MappingType, IdMap)>, String> {
    let mut tables = Vec::new();
    for (kind, pairs) in mapping_kinds(maps) {
        if let Some(map) = id_map(pairs)? {
            tables.push((kind, map));
        }
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
) -> Result<u64, String> {
    let info = ArchiveInfo {
        creator: concat!("nccl-scorep merge ", env!("CARGO_PKG_VERSION")),
        description: "NCCL communication traced by the nccl-scorep plugin (merged)",
        machine: Some(&unified.machine),
    };
    let chunk = definition_chunk_size(unified, maps);
    let archive = Archive::create(dir, unified.event_chunk, chunk, &info)?;
    let tables = archive.write_local_definitions(parts, maps, |part, location| {
        parts[part]
            .clock_offsets
            .get(&location)
            .map_or(&[], Vec::as_slice)
    })?;
    write_global_definitions(&archive.global_def_writer()?, unified)?;
    archive.close("merged archive")?;
    Ok(tables)
}

/// Writes every global definition in dependency order: clock properties, strings,
/// paradigms, system tree, location groups, locations, regions, groups, comms,
/// attributes. Ids are dense and in increasing order.
fn write_global_definitions(w: &GlobalDefWriter, u: &Unified) -> Result<(), String> {
    w.clock_properties(&u.clock)?;
    for (id, text) in u.strings.iter().enumerate() {
        w.string(id as u32, text)?;
    }
    for p in &u.paradigms {
        w.paradigm(p)?;
    }
    for (id, n) in u.nodes.iter().enumerate() {
        w.system_tree_node(id as u32, n)?;
    }
    for (id, g) in u.location_groups.iter().enumerate() {
        w.location_group(id as u32, g)?;
    }
    for l in &u.locations {
        w.location(l)?;
    }
    for (id, r) in u.regions.iter().enumerate() {
        w.region(id as u32, r)?;
    }
    for (id, g) in u.groups.iter().enumerate() {
        w.group(id as u32, g)?;
    }
    for (id, c) in u.comms.iter().enumerate() {
        w.comm(id as u32, c)?;
    }
    for (id, a) in u.attributes.iter().enumerate() {
        w.attribute(id as u32, a)?;
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

/// Archives for the tests of other modules, written with OTF2 itself.
#[cfg(test)]
pub(crate) mod test_archives {
    use super::*;
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
        let archive = Archive::create(dir, OTF2_CHUNK_SIZE_MIN, OTF2_CHUNK_SIZE_MIN, &info)
            .expect("an archive");
        let a = archive.0;
        // SAFETY: `a` is open; the writers are used on this thread and closed before the
        // archive; the attribute list lives until it is deleted at the end.
        unsafe {
            assert_eq!(OTF2_Archive_OpenEvtFiles(a), OTF2_SUCCESS);
            let writer = OTF2_Archive_GetEvtWriter(a, LOCATION);
            assert!(!writer.is_null());
            let attributes = OTF2_AttributeList_New();
            let mut event = 0u64;
            let mut time = || {
                event += 1;
                event * 10
            };
            for pair in 0..pairs {
                let list = if wide_every > 0 && pair % wide_every == 0 {
                    for attribute in 0..40 {
                        OTF2_AttributeList_AddUint64(attributes, attribute, u64::MAX - pair);
                    }
                    attributes
                } else {
                    ptr::null_mut()
                };
                assert_eq!(OTF2_EvtWriter_Enter(writer, list, time(), 0), OTF2_SUCCESS);
                assert_eq!(
                    OTF2_EvtWriter_Enter(writer, ptr::null_mut(), time(), 0),
                    OTF2_SUCCESS
                );
                assert_eq!(
                    OTF2_EvtWriter_Leave(writer, ptr::null_mut(), time(), 0),
                    OTF2_SUCCESS
                );
                assert_eq!(
                    OTF2_EvtWriter_Leave(writer, ptr::null_mut(), time(), 0),
                    OTF2_SUCCESS
                );
            }
            OTF2_AttributeList_Delete(attributes);
            assert_eq!(OTF2_Archive_CloseEvtWriter(a, writer), OTF2_SUCCESS);
            assert_eq!(OTF2_Archive_CloseEvtFiles(a), OTF2_SUCCESS);
            let global = OTF2_Archive_GetGlobalDefWriter(a);
            assert!(!global.is_null());
            let strings = [c"", c"machine", c"process", c"location", c"interval"];
            for (id, text) in strings.iter().enumerate() {
                OTF2_GlobalDefWriter_WriteString(global, id as u32, text.as_ptr());
            }
            OTF2_GlobalDefWriter_WriteClockProperties(
                global,
                1_000_000_000,
                0,
                10 * (4 * pairs + 1),
                0,
            );
            OTF2_GlobalDefWriter_WriteSystemTreeNode(
                global,
                0,
                1,
                1,
                OTF2_UNDEFINED_SYSTEM_TREE_NODE,
            );
            OTF2_GlobalDefWriter_WriteLocationGroup(
                global,
                0,
                2,
                OTF2_LOCATION_GROUP_TYPE_PROCESS as OTF2_LocationGroupType,
                0,
                OTF2_UNDEFINED_LOCATION_GROUP,
            );
            OTF2_GlobalDefWriter_WriteLocation(
                global,
                LOCATION,
                3,
                OTF2_LOCATION_TYPE_CPU_THREAD as OTF2_LocationType,
                4 * pairs,
                0,
            );
            OTF2_GlobalDefWriter_WriteRegion(
                global,
                0,
                4,
                4,
                0,
                OTF2_REGION_ROLE_FUNCTION as OTF2_RegionRole,
                OTF2_PARADIGM_NONE as OTF2_Paradigm,
                OTF2_REGION_FLAG_NONE as OTF2_RegionFlag,
                0,
                0,
                0,
            );
        }
        archive.close("test archive").expect("closed");
        dir.join("traces").join(format!("{LOCATION}.evt"))
    }
}
