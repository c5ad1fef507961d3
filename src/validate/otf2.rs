//! The OTF2 C reader behind `nccl-scorep validate`: the only FFI of the validate module.
//!
//! Opens an archive with `OTF2_Reader`, reads the global definitions into
//! [`Definitions`], the local definitions (mapping tables, clock offsets: OTF2 applies
//! them to the events itself), and every event of every location through a global event
//! reader, handed to a Rust closure as an [`Event`].
//!
//! Callbacks get a pointer to a Rust state struct as their user data, catch panics, and
//! answer `OTF2_CALLBACK_ERROR` after one (which stops the read, reported as a problem).
//! OTF2's error reports are collected by `otf2_sys`'s error handler and drained into
//! problems after each step.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, c_void, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use otf2_sys::error::{drain_thread_error_reports, ErrorReport};
use otf2_sys::*;

use otf2_sys::callbacks::{code_name, first_failure, guarded, text, CallbackState};
use otf2_sys::reading::{self, copy_array, register_callbacks, GlobalDefinitionsFailure};

use super::{
    Attribute, AttributeValue, Check, ClockProperties, Comm, Definitions, Event, EventsRead, Group,
    Location, LocationGroup, Paradigm, Problem, Region, Severity, SystemTreeNode,
};

/// Receives each event: location, time, the record, and (when asked for) the attribute
/// values of Enter and Leave records.
pub(crate) type EventSink<'a> = dyn FnMut(u64, u64, Event, &[(u32, AttributeValue)]) + 'a;

/// An open `OTF2_Reader`, closed when dropped.
pub(crate) struct Archive {
    reader: *mut OTF2_Reader,
    /// The anchor file, to open the archive again.
    anchor: PathBuf,
    /// Hand the events' attribute values to the sink (Enter and Leave records).
    pub(crate) want_attributes: bool,
}

impl Drop for Archive {
    fn drop(&mut self) {
        if !self.reader.is_null() {
            // SAFETY: `reader` came from OTF2_Reader_Open and is closed only here or in
            // `close`, which nulls it.
            unsafe { OTF2_Reader_Close(self.reader) };
        }
    }
}

/// OTF2's reports about one failure as one line: innermost first, as OTF2 makes them.
fn one_line(reports: &[ErrorReport]) -> String {
    let texts: Vec<String> = reports
        .iter()
        .map(|r| {
            // Failed system calls come with an errno-like code that has no name.
            if r.code_name.is_empty() || r.code_name.bytes().all(|b| b.is_ascii_digit()) {
                r.message.clone()
            } else {
                format!("{}: {}", r.code_name, r.message)
            }
        })
        .collect();
    texts.join("; ")
}

/// The OTF2 reports made on this thread since the last drain, as one line.
fn reports_text() -> Option<String> {
    let reports = drain_thread_error_reports();
    (!reports.is_empty()).then(|| one_line(&reports))
}

/// The OTF2 reports made on this thread since the last drain, as one problem (errors
/// and warnings apart).
fn drain(problems: &mut Vec<Problem>, location: Option<u64>, doing: &str) {
    let (warnings, errors): (Vec<_>, Vec<_>) = drain_thread_error_reports()
        .into_iter()
        .partition(ErrorReport::is_warning);
    for (severity, kind, reports) in [
        (Severity::Error, "error", errors),
        (Severity::Warning, "warning", warnings),
    ] {
        if !reports.is_empty() {
            problems.push(Problem {
                severity,
                check: Check::Otf2,
                location,
                message: format!("OTF2 {kind} while {doing}: {}", one_line(&reports)),
            });
        }
    }
}

/// A failed OTF2 call, with what OTF2 reported about it.
fn failed(
    problems: &mut Vec<Problem>,
    check: Check,
    location: Option<u64>,
    what: &str,
    code: Option<OTF2_ErrorCode>,
) {
    let mut message = what.to_owned();
    if let Some(code) = code {
        message = format!("{message}: {}", code_name(code));
    }
    if let Some(reports) = reports_text() {
        message = format!("{message} (OTF2: {reports})");
    }
    problems.push(Problem {
        severity: Severity::Error,
        check,
        location,
        message,
    });
}

impl Archive {
    /// Opens the archive whose anchor file is `anchor`.
    pub(crate) fn open(anchor: &Path) -> Result<Archive, String> {
        let path = CString::new(anchor.as_os_str().as_bytes())
            .map_err(|_| "the path contains a NUL byte".to_owned())?;
        // SAFETY: `path` is a NUL-terminated string that outlives the call.
        let reader = unsafe { OTF2_Reader_Open(path.as_ptr()) };
        if reader.is_null() {
            let why = reports_text().unwrap_or_else(|| "OTF2_Reader_Open failed".to_owned());
            return Err(format!("not a readable OTF2 anchor file ({why})"));
        }
        let archive = Archive {
            reader,
            anchor: anchor.to_path_buf(),
            want_attributes: false,
        };
        // SAFETY: `reader` is open.
        let code = unsafe { OTF2_Reader_SetSerialCollectiveCallbacks(archive.reader) };
        if code != OTF2_SUCCESS {
            let why = reports_text().unwrap_or_default();
            return Err(format!(
                "OTF2_Reader_SetSerialCollectiveCallbacks failed: {} {why}",
                code_name(code)
            ));
        }
        Ok(archive)
    }

    /// The number of locations the anchor file announces.
    pub(crate) fn number_of_locations(&self) -> Option<u64> {
        let mut n = 0;
        // SAFETY: the reader is open; `n` is a valid out pointer.
        let code = unsafe { OTF2_Reader_GetNumberOfLocations(self.reader, &mut n) };
        drop(drain_thread_error_reports());
        (code == OTF2_SUCCESS).then_some(n)
    }

    /// Closes the reader, keeping what OTF2 reports on the way.
    pub(crate) fn close(mut self, problems: &mut Vec<Problem>) {
        // SAFETY: the reader is open; it is nulled so that `drop` does not close it again.
        let code = unsafe { OTF2_Reader_Close(self.reader) };
        self.reader = std::ptr::null_mut();
        if code != OTF2_SUCCESS {
            failed(
                problems,
                Check::Otf2,
                None,
                "closing the archive failed",
                Some(code),
            );
        }
        drain(problems, None, "closing the archive");
    }

    /// Reads the global definitions; None (with problems) when they cannot be read.
    pub(crate) fn read_global_definitions(
        &mut self,
        problems: &mut Vec<Problem>,
    ) -> Option<Definitions> {
        let mut state = DefState::default();
        let set = |c: *mut OTF2_GlobalDefReaderCallbacks| {
            // SAFETY: `c` is the live table of `register_callbacks`; each function has the
            // type its setter takes (the compiler checks it).
            unsafe {
                first_failure(&[
                    OTF2_GlobalDefReaderCallbacks_SetStringCallback(c, Some(def_string)),
                    OTF2_GlobalDefReaderCallbacks_SetSystemTreeNodeCallback(c, Some(def_node)),
                    OTF2_GlobalDefReaderCallbacks_SetLocationGroupCallback(c, Some(def_lg)),
                    OTF2_GlobalDefReaderCallbacks_SetLocationCallback(c, Some(def_location)),
                    OTF2_GlobalDefReaderCallbacks_SetRegionCallback(c, Some(def_region)),
                    OTF2_GlobalDefReaderCallbacks_SetGroupCallback(c, Some(def_group)),
                    OTF2_GlobalDefReaderCallbacks_SetCommCallback(c, Some(def_comm)),
                    OTF2_GlobalDefReaderCallbacks_SetAttributeCallback(c, Some(def_attribute)),
                    OTF2_GlobalDefReaderCallbacks_SetClockPropertiesCallback(c, Some(def_clock)),
                    OTF2_GlobalDefReaderCallbacks_SetParadigmCallback(c, Some(def_paradigm)),
                ])
            }
        };
        // SAFETY: the reader is open; the callbacks take a `DefState`; `state` lives until
        // the end of this function (it is read after the read returns).
        let read = unsafe { reading::read_global_definitions(self.reader, &mut state, set) };
        if read == Err(GlobalDefinitionsFailure::NoReader) {
            let what = "cannot read the global definitions (traces.def)";
            failed(problems, Check::Otf2, None, what, None);
            return None;
        }
        if let Some(panic) = state.panic.take() {
            problems.push(Problem {
                severity: Severity::Error,
                check: Check::Otf2,
                location: None,
                message: format!("internal error while reading the definitions: {panic}"),
            });
        }
        if let Err(GlobalDefinitionsFailure::Stopped { read, code }) = read {
            let what = format!("reading the global definitions failed after {read} records");
            failed(problems, Check::Otf2, None, &what, Some(code));
            return None;
        }
        drain(problems, None, "reading the global definitions");
        Some(state.defs)
    }

    /// Reads the local definitions and all events of `locations`, handing each event to
    /// `sink`.
    pub(crate) fn read_events(
        &mut self,
        locations: &[u64],
        sink: &mut EventSink<'_>,
        problems: &mut Vec<Problem>,
    ) -> EventsRead {
        let mut read = EventsRead {
            unreadable: locations.iter().copied().collect(),
            complete: false,
        };
        let Some(readable) = self.open_locations(locations, problems) else {
            return read;
        };
        for location in &readable {
            read.unreadable.remove(location);
        }
        if !read.unreadable.is_empty() && !readable.is_empty() {
            // OTF2 keeps a broken event reader for a location whose events cannot be
            // opened, and the global event reader would stop at it: start again with a
            // fresh reader and only the readable locations (what went wrong was reported
            // the first time, and is reported again while the first reader closes).
            let fresh = match Archive::open(&self.anchor) {
                Ok(fresh) => fresh,
                Err(why) => {
                    let what = format!("cannot open the archive again: {why}");
                    failed(problems, Check::Events, None, &what, None);
                    return read;
                }
            };
            let want_attributes = self.want_attributes;
            drop(std::mem::replace(self, fresh));
            self.want_attributes = want_attributes;
            drop(self.open_locations(&readable, &mut Vec::new()));
        }
        read.complete = readable.is_empty() || self.read_global_events(sink, problems);
        // SAFETY: the reader is open, with its event files.
        unsafe { OTF2_Reader_CloseEvtFiles(self.reader) };
        drain(problems, None, "reading the events");
        read
    }

    /// Selects `locations`, opens the event files, creates each location's event reader
    /// and reads its local definitions. Returns the locations whose events can be read,
    /// or None when the event files cannot be opened.
    fn open_locations(
        &mut self,
        locations: &[u64],
        problems: &mut Vec<Problem>,
    ) -> Option<Vec<u64>> {
        for &location in locations {
            // SAFETY: the reader is open.
            let code = unsafe { OTF2_Reader_SelectLocation(self.reader, location) };
            if code != OTF2_SUCCESS {
                let what = "cannot select the location for reading";
                failed(problems, Check::Events, Some(location), what, Some(code));
            }
        }
        // SAFETY: the reader is open.
        let code = unsafe { OTF2_Reader_OpenEvtFiles(self.reader) };
        if code != OTF2_SUCCESS {
            let what = "cannot open the event files";
            failed(problems, Check::Events, None, what, Some(code));
            return None;
        }
        // SAFETY: the reader is open.
        let code = unsafe { OTF2_Reader_OpenDefFiles(self.reader) };
        let def_files = code == OTF2_SUCCESS;
        if !def_files {
            let what = "cannot open the local definition files";
            failed(problems, Check::Otf2, None, what, Some(code));
        }
        let mut readable = Vec::new();
        for &location in locations {
            // SAFETY: the reader is open, with its event files.
            let evt_reader = unsafe { OTF2_Reader_GetEvtReader(self.reader, location) };
            if evt_reader.is_null() {
                let what = "its events cannot be read (no event reader: is its .evt file \
                            missing?)";
                failed(problems, Check::Events, Some(location), what, None);
            } else {
                readable.push(location);
            }
            if def_files {
                self.read_local_definitions(location, problems);
            }
            drain(
                problems,
                Some(location),
                "reading the local definitions of this location",
            );
        }
        if def_files {
            // SAFETY: the reader is open, with its definition files.
            unsafe { OTF2_Reader_CloseDefFiles(self.reader) };
        }
        Some(readable)
    }

    fn read_local_definitions(&mut self, location: u64, problems: &mut Vec<Problem>) {
        // SAFETY: the reader is open, with its definition files.
        let def_reader = unsafe { OTF2_Reader_GetDefReader(self.reader, location) };
        // A location without a local definition file has no mapping tables or clock
        // offsets: OTF2 reports that (drained by the caller), it is not fatal.
        if def_reader.is_null() {
            return;
        }
        // SAFETY: the reader and `def_reader` are open; no callbacks are registered (OTF2
        // keeps the mapping tables and clock offsets for the event reader).
        let code = unsafe { reading::read_all_local_definitions(self.reader, def_reader) };
        if code != OTF2_SUCCESS {
            let what = "reading its local definitions failed";
            failed(problems, Check::Otf2, Some(location), what, Some(code));
        }
        // SAFETY: `def_reader` is open and not used after this.
        unsafe { OTF2_Reader_CloseDefReader(self.reader, def_reader) };
    }

    /// Reads every event through a global event reader; false when the read stopped early.
    fn read_global_events(
        &mut self,
        sink: &mut EventSink<'_>,
        problems: &mut Vec<Problem>,
    ) -> bool {
        // SAFETY: the reader is open, with an event reader for each readable location.
        let global = unsafe { OTF2_Reader_GetGlobalEvtReader(self.reader) };
        if global.is_null() {
            let what = "cannot read the events (creating the global event reader failed)";
            failed(problems, Check::Events, None, what, None);
            return false;
        }
        let mut state = EvtState {
            sink,
            panic: None,
            want_attributes: self.want_attributes,
            attributes: Vec::new(),
        };
        let set = |c: *mut OTF2_GlobalEvtReaderCallbacks| {
            // SAFETY: `c` is the live table of `register_callbacks`.
            unsafe { set_event_callbacks(c) }
        };
        // SAFETY: the reader and `global` are open; the callbacks take an `EvtState`;
        // `state` lives until the end of this function and is used only through the
        // callbacks while ReadAllGlobalEvents runs.
        let code = unsafe { register_callbacks(self.reader, global, &mut state, set) };
        let mut read = 0;
        let read_code = if code == OTF2_SUCCESS {
            // SAFETY: as above.
            unsafe { OTF2_Reader_ReadAllGlobalEvents(self.reader, global, &mut read) }
        } else {
            code
        };
        // SAFETY: `global` is open and not used after this.
        unsafe { OTF2_Reader_CloseGlobalEvtReader(self.reader, global) };
        if let Some(panic) = state.panic.take() {
            problems.push(Problem {
                severity: Severity::Error,
                check: Check::Otf2,
                location: None,
                message: format!("internal error while reading the events: {panic}"),
            });
        }
        if read_code != OTF2_SUCCESS {
            let what = format!("reading the events stopped after {read} events");
            failed(problems, Check::Events, None, &what, Some(read_code));
        }
        read_code == OTF2_SUCCESS
    }
}

// ---- Callbacks ------------------------------------------------------------------

#[derive(Default)]
struct DefState {
    defs: Definitions,
    panic: Option<String>,
}

impl CallbackState for DefState {
    fn record_panic(&mut self, message: String) {
        self.panic.get_or_insert(message);
    }
}

struct EvtState<'s> {
    sink: &'s mut EventSink<'s>,
    panic: Option<String>,
    /// Decode the attribute lists of Enter and Leave records (for the summary).
    want_attributes: bool,
    attributes: Vec<(u32, AttributeValue)>,
}

impl CallbackState for EvtState<'_> {
    fn record_panic(&mut self, message: String) {
        self.panic.get_or_insert(message);
    }
}

/// Runs `body` on the [`DefState`] behind `user_data`.
///
/// # Safety
/// `user_data` is the [`DefState`] of [`Archive::read_global_definitions`].
unsafe fn with_defs(
    user_data: *mut c_void,
    body: impl FnOnce(&mut Definitions),
) -> OTF2_CallbackCode {
    // SAFETY: forwarded from the caller.
    unsafe { guarded(user_data, |state: &mut DefState| body(&mut state.defs)) }
}

unsafe extern "C" fn def_string(
    user_data: *mut c_void,
    id: OTF2_StringRef,
    string: *const c_char,
) -> OTF2_CallbackCode {
    // SAFETY: OTF2 passes a NUL-terminated string valid during the callback.
    let string = unsafe { text(string) };
    // SAFETY: OTF2 passes back the user data of `Archive::read_global_definitions`.
    unsafe { with_defs(user_data, |defs| defs.add_string(id, string)) }
}

unsafe extern "C" fn def_node(
    user_data: *mut c_void,
    id: OTF2_SystemTreeNodeRef,
    name: OTF2_StringRef,
    class_name: OTF2_StringRef,
    parent: OTF2_SystemTreeNodeRef,
) -> OTF2_CallbackCode {
    let node = SystemTreeNode {
        name,
        class_name,
        parent,
    };
    // SAFETY: OTF2 passes back the user data of `Archive::read_global_definitions`.
    unsafe { with_defs(user_data, |defs| defs.add_system_tree_node(id, node)) }
}

unsafe extern "C" fn def_lg(
    user_data: *mut c_void,
    id: OTF2_LocationGroupRef,
    name: OTF2_StringRef,
    _group_type: OTF2_LocationGroupType,
    system_tree_parent: OTF2_SystemTreeNodeRef,
    creating_location_group: OTF2_LocationGroupRef,
) -> OTF2_CallbackCode {
    let group = LocationGroup {
        name,
        system_tree_parent,
        creating_location_group,
    };
    // SAFETY: OTF2 passes back the user data of `Archive::read_global_definitions`.
    unsafe { with_defs(user_data, |defs| defs.add_location_group(id, group)) }
}

unsafe extern "C" fn def_location(
    user_data: *mut c_void,
    id: OTF2_LocationRef,
    name: OTF2_StringRef,
    _location_type: OTF2_LocationType,
    number_of_events: u64,
    location_group: OTF2_LocationGroupRef,
) -> OTF2_CallbackCode {
    let location = Location {
        name,
        number_of_events,
        location_group,
    };
    // SAFETY: OTF2 passes back the user data of `Archive::read_global_definitions`.
    unsafe { with_defs(user_data, |defs| defs.add_location(id, location)) }
}

#[allow(clippy::too_many_arguments)] // OTF2's signature
unsafe extern "C" fn def_region(
    user_data: *mut c_void,
    id: OTF2_RegionRef,
    name: OTF2_StringRef,
    canonical_name: OTF2_StringRef,
    description: OTF2_StringRef,
    _role: OTF2_RegionRole,
    _paradigm: OTF2_Paradigm,
    _flags: OTF2_RegionFlag,
    source_file: OTF2_StringRef,
    _begin_line: u32,
    _end_line: u32,
) -> OTF2_CallbackCode {
    let region = Region {
        name,
        canonical_name,
        description,
        source_file,
    };
    // SAFETY: OTF2 passes back the user data of `Archive::read_global_definitions`.
    unsafe { with_defs(user_data, |defs| defs.add_region(id, region)) }
}

#[allow(clippy::too_many_arguments)] // OTF2's signature
unsafe extern "C" fn def_group(
    user_data: *mut c_void,
    id: OTF2_GroupRef,
    name: OTF2_StringRef,
    group_type: OTF2_GroupType,
    paradigm: OTF2_Paradigm,
    _flags: OTF2_GroupFlag,
    number_of_members: u32,
    members: *const u64,
) -> OTF2_CallbackCode {
    // SAFETY: OTF2 passes `number_of_members` values at `members`, valid during the
    // callback.
    let members = unsafe { copy_array(members, number_of_members as usize) };
    let group = Group {
        name,
        group_type,
        paradigm,
        members,
    };
    // SAFETY: OTF2 passes back the user data of `Archive::read_global_definitions`.
    unsafe { with_defs(user_data, |defs| defs.add_group(id, group)) }
}

unsafe extern "C" fn def_comm(
    user_data: *mut c_void,
    id: OTF2_CommRef,
    name: OTF2_StringRef,
    group: OTF2_GroupRef,
    parent: OTF2_CommRef,
    _flags: OTF2_CommFlag,
) -> OTF2_CallbackCode {
    let comm = Comm {
        name,
        group,
        parent,
    };
    // SAFETY: OTF2 passes back the user data of `Archive::read_global_definitions`.
    unsafe { with_defs(user_data, |defs| defs.add_comm(id, comm)) }
}

unsafe extern "C" fn def_attribute(
    user_data: *mut c_void,
    id: OTF2_AttributeRef,
    name: OTF2_StringRef,
    description: OTF2_StringRef,
    _type: OTF2_Type,
) -> OTF2_CallbackCode {
    let attribute = Attribute { name, description };
    // SAFETY: OTF2 passes back the user data of `Archive::read_global_definitions`.
    unsafe { with_defs(user_data, |defs| defs.add_attribute(id, attribute)) }
}

unsafe extern "C" fn def_clock(
    user_data: *mut c_void,
    timer_resolution: u64,
    global_offset: u64,
    trace_length: u64,
    _realtime_timestamp: u64,
) -> OTF2_CallbackCode {
    let clock = ClockProperties {
        timer_resolution,
        global_offset,
        trace_length,
    };
    // SAFETY: OTF2 passes back the user data of `Archive::read_global_definitions`.
    unsafe { with_defs(user_data, |defs| defs.set_clock_properties(clock)) }
}

unsafe extern "C" fn def_paradigm(
    user_data: *mut c_void,
    paradigm: OTF2_Paradigm,
    name: OTF2_StringRef,
    _class: OTF2_ParadigmClass,
) -> OTF2_CallbackCode {
    // SAFETY: OTF2 passes back the user data of `Archive::read_global_definitions`.
    unsafe {
        with_defs(user_data, |defs| {
            defs.add_paradigm(paradigm, Paradigm { name })
        })
    }
}

/// Hands one event to the sink of the [`EvtState`] behind `user_data`.
///
/// # Safety
/// `user_data` is the [`EvtState`] of [`Archive::read_global_events`].
unsafe fn deliver(
    user_data: *mut c_void,
    location: u64,
    time: u64,
    attributes: *mut OTF2_AttributeList,
    event: Event,
) -> OTF2_CallbackCode {
    // SAFETY: forwarded from the caller.
    unsafe {
        guarded(user_data, |state: &mut EvtState<'_>| {
            state.attributes.clear();
            if state.want_attributes && matches!(event, Event::Enter { .. } | Event::Leave { .. }) {
                // OTF2 passes the record's attribute list (or NULL), valid during the
                // callback.
                decode_attributes(attributes, &mut state.attributes);
            }
            (state.sink)(location, time, event, &state.attributes)
        })
    }
}

/// The values of an attribute list that the summary can use: integers and strings.
///
/// # Safety
/// `list` is NULL or an attribute list OTF2 handed to a callback.
unsafe fn decode_attributes(list: *mut OTF2_AttributeList, out: &mut Vec<(u32, AttributeValue)>) {
    if list.is_null() {
        return;
    }
    // SAFETY: a live list (caller).
    let count = unsafe { OTF2_AttributeList_GetNumberOfElements(list) };
    for index in 0..count {
        let mut id: OTF2_AttributeRef = 0;
        let mut value_type: OTF2_Type = 0;
        // SAFETY: the union is plain data; OTF2 writes the member named by the type.
        let mut value: OTF2_AttributeValue = unsafe { std::mem::zeroed() };
        // SAFETY: a live list and index < count; the out-pointers are valid locals.
        let code = unsafe {
            OTF2_AttributeList_GetAttributeByIndex(
                list,
                index,
                &mut id,
                &mut value_type,
                &mut value,
            )
        };
        if code != OTF2_SUCCESS {
            continue;
        }
        // SAFETY: each arm reads the member that `value_type` names.
        let decoded = unsafe {
            match u32::from(value_type) {
                OTF2_TYPE_UINT8 => AttributeValue::Unsigned(u64::from(value.uint8)),
                OTF2_TYPE_UINT16 => AttributeValue::Unsigned(u64::from(value.uint16)),
                OTF2_TYPE_UINT32 => AttributeValue::Unsigned(u64::from(value.uint32)),
                OTF2_TYPE_UINT64 => AttributeValue::Unsigned(value.uint64),
                OTF2_TYPE_INT8 => AttributeValue::Signed(i64::from(value.int8)),
                OTF2_TYPE_INT16 => AttributeValue::Signed(i64::from(value.int16)),
                OTF2_TYPE_INT32 => AttributeValue::Signed(i64::from(value.int32)),
                OTF2_TYPE_INT64 => AttributeValue::Signed(value.int64),
                OTF2_TYPE_STRING => AttributeValue::Text(value.stringRef),
                _ => continue,
            }
        };
        out.push((id, decoded));
    }
}

/// Defines a global event callback per record type, named after the record, that hands
/// an [`Event`] to [`deliver`], and `set_event_callbacks`, which registers them all. Each
/// line gives the record's arguments after the attribute list, as OTF2 declares them (the
/// compiler checks them against the setter's callback type). `checked` records become the
/// given event; `counted` ones become [`Event::Other`] with the record's name: OTF2's Unknown
/// callback only sees record types this OTF2 version does not know, and a known record
/// without a callback would be skipped silently, so the per-location event counts (check 5)
/// would come out short.
macro_rules! event_callbacks {
    (@one $name:ident($($arg:ident: $ty:ty),*) => $event:expr) => {
        #[allow(non_snake_case, clippy::too_many_arguments)]
        unsafe extern "C" fn $name(
            location: OTF2_LocationRef,
            time: OTF2_TimeStamp,
            user_data: *mut c_void,
            attributes: *mut OTF2_AttributeList,
            $($arg: $ty),*
        ) -> OTF2_CallbackCode {
            // SAFETY: OTF2 passes back the user data of `Archive::read_global_events`, and the
            // record's attribute list.
            unsafe { deliver(user_data, location, time, attributes, $event) }
        }
    };
    (
        checked { $($name:ident($($arg:ident: $ty:ty),*) => $event:expr, via $setter:ident;)* }
        counted { $($other:ident($($oarg:ident: $oty:ty),*) via $osetter:ident;)* }
    ) => {
        $(event_callbacks!(@one $name($($arg: $ty),*) => $event);)*
        $(event_callbacks!(@one $other($($oarg: $oty),*) => Event::Other(stringify!($other)));)*

        /// Sets every event callback in `callbacks`.
        ///
        /// # Safety
        /// `callbacks` is a live callbacks struct.
        unsafe fn set_event_callbacks(
            callbacks: *mut OTF2_GlobalEvtReaderCallbacks,
        ) -> OTF2_ErrorCode {
            let codes = [
                $(
                    // SAFETY: `callbacks` is live, per the caller; the function has the type
                    // the setter takes.
                    unsafe { $setter(callbacks, Some($name)) },
                )*
                $(
                    // SAFETY: as above.
                    unsafe { $osetter(callbacks, Some($other)) },
                )*
            ];
            first_failure(&codes)
        }
    };
}

event_callbacks! {
    checked {
        Enter(region: OTF2_RegionRef) => Event::Enter { region },
            via OTF2_GlobalEvtReaderCallbacks_SetEnterCallback;
        Leave(region: OTF2_RegionRef) => Event::Leave { region },
            via OTF2_GlobalEvtReaderCallbacks_SetLeaveCallback;
        MpiCollectiveBegin() => Event::CollectiveBegin,
            via OTF2_GlobalEvtReaderCallbacks_SetMpiCollectiveBeginCallback;
        MpiCollectiveEnd(
            _op: OTF2_CollectiveOp, comm: OTF2_CommRef, root: u32, _sent: u64, _received: u64
        ) => Event::CollectiveEnd { comm, root },
            via OTF2_GlobalEvtReaderCallbacks_SetMpiCollectiveEndCallback;
        NonBlockingCollectiveComplete(
            _op: OTF2_CollectiveOp, comm: OTF2_CommRef, root: u32, _sent: u64, _received: u64,
            _request: u64
        ) => Event::NonBlockingCollectiveComplete { comm, root },
            via OTF2_GlobalEvtReaderCallbacks_SetNonBlockingCollectiveCompleteCallback;
        MpiSend(receiver: u32, comm: OTF2_CommRef, tag: u32, _length: u64)
            => Event::Send { blocking: true, receiver, comm, tag },
            via OTF2_GlobalEvtReaderCallbacks_SetMpiSendCallback;
        MpiIsend(receiver: u32, comm: OTF2_CommRef, tag: u32, _length: u64, _request: u64)
            => Event::Send { blocking: false, receiver, comm, tag },
            via OTF2_GlobalEvtReaderCallbacks_SetMpiIsendCallback;
        MpiRecv(sender: u32, comm: OTF2_CommRef, tag: u32, _length: u64)
            => Event::Recv { blocking: true, sender, comm, tag },
            via OTF2_GlobalEvtReaderCallbacks_SetMpiRecvCallback;
        MpiIrecv(sender: u32, comm: OTF2_CommRef, tag: u32, _length: u64, _request: u64)
            => Event::Recv { blocking: false, sender, comm, tag },
            via OTF2_GlobalEvtReaderCallbacks_SetMpiIrecvCallback;
        MeasurementOnOff(_mode: OTF2_MeasurementMode) => Event::MeasurementOnOff,
            via OTF2_GlobalEvtReaderCallbacks_SetMeasurementOnOffCallback;
        Unknown() => Event::Unknown,
            via OTF2_GlobalEvtReaderCallbacks_SetUnknownCallback;
    }
    counted {
            BufferFlush(_0: OTF2_TimeStamp)
                via OTF2_GlobalEvtReaderCallbacks_SetBufferFlushCallback;
            MpiIsendComplete(_0: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetMpiIsendCompleteCallback;
            MpiIrecvRequest(_0: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetMpiIrecvRequestCallback;
            MpiRequestTest(_0: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetMpiRequestTestCallback;
            MpiRequestCancelled(_0: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetMpiRequestCancelledCallback;
            OmpFork(_0: u32)
                via OTF2_GlobalEvtReaderCallbacks_SetOmpForkCallback;
            OmpJoin()
                via OTF2_GlobalEvtReaderCallbacks_SetOmpJoinCallback;
            OmpAcquireLock(_0: u32, _1: u32)
                via OTF2_GlobalEvtReaderCallbacks_SetOmpAcquireLockCallback;
            OmpReleaseLock(_0: u32, _1: u32)
                via OTF2_GlobalEvtReaderCallbacks_SetOmpReleaseLockCallback;
            OmpTaskCreate(_0: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetOmpTaskCreateCallback;
            OmpTaskSwitch(_0: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetOmpTaskSwitchCallback;
            OmpTaskComplete(_0: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetOmpTaskCompleteCallback;
            Metric(_0: OTF2_MetricRef, _1: u8, _2: *const OTF2_Type, _3: *const OTF2_MetricValue)
                via OTF2_GlobalEvtReaderCallbacks_SetMetricCallback;
            ParameterString(_0: OTF2_ParameterRef, _1: OTF2_StringRef)
                via OTF2_GlobalEvtReaderCallbacks_SetParameterStringCallback;
            ParameterInt(_0: OTF2_ParameterRef, _1: i64)
                via OTF2_GlobalEvtReaderCallbacks_SetParameterIntCallback;
            ParameterUnsignedInt(_0: OTF2_ParameterRef, _1: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetParameterUnsignedIntCallback;
            RmaWinCreate(_0: OTF2_RmaWinRef)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaWinCreateCallback;
            RmaWinDestroy(_0: OTF2_RmaWinRef)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaWinDestroyCallback;
            RmaCollectiveBegin()
                via OTF2_GlobalEvtReaderCallbacks_SetRmaCollectiveBeginCallback;
            RmaCollectiveEnd(_0: OTF2_CollectiveOp, _1: OTF2_RmaSyncLevel, _2: OTF2_RmaWinRef, _3: u32, _4: u64, _5: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaCollectiveEndCallback;
            RmaGroupSync(_0: OTF2_RmaSyncLevel, _1: OTF2_RmaWinRef, _2: OTF2_GroupRef)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaGroupSyncCallback;
            RmaRequestLock(_0: OTF2_RmaWinRef, _1: u32, _2: u64, _3: OTF2_LockType)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaRequestLockCallback;
            RmaAcquireLock(_0: OTF2_RmaWinRef, _1: u32, _2: u64, _3: OTF2_LockType)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaAcquireLockCallback;
            RmaTryLock(_0: OTF2_RmaWinRef, _1: u32, _2: u64, _3: OTF2_LockType)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaTryLockCallback;
            RmaReleaseLock(_0: OTF2_RmaWinRef, _1: u32, _2: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaReleaseLockCallback;
            RmaSync(_0: OTF2_RmaWinRef, _1: u32, _2: OTF2_RmaSyncType)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaSyncCallback;
            RmaWaitChange(_0: OTF2_RmaWinRef)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaWaitChangeCallback;
            RmaPut(_0: OTF2_RmaWinRef, _1: u32, _2: u64, _3: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaPutCallback;
            RmaGet(_0: OTF2_RmaWinRef, _1: u32, _2: u64, _3: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaGetCallback;
            RmaAtomic(_0: OTF2_RmaWinRef, _1: u32, _2: OTF2_RmaAtomicType, _3: u64, _4: u64, _5: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaAtomicCallback;
            RmaOpCompleteBlocking(_0: OTF2_RmaWinRef, _1: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaOpCompleteBlockingCallback;
            RmaOpCompleteNonBlocking(_0: OTF2_RmaWinRef, _1: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaOpCompleteNonBlockingCallback;
            RmaOpTest(_0: OTF2_RmaWinRef, _1: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaOpTestCallback;
            RmaOpCompleteRemote(_0: OTF2_RmaWinRef, _1: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetRmaOpCompleteRemoteCallback;
            ThreadFork(_0: OTF2_Paradigm, _1: u32)
                via OTF2_GlobalEvtReaderCallbacks_SetThreadForkCallback;
            ThreadJoin(_0: OTF2_Paradigm)
                via OTF2_GlobalEvtReaderCallbacks_SetThreadJoinCallback;
            ThreadTeamBegin(_0: OTF2_CommRef)
                via OTF2_GlobalEvtReaderCallbacks_SetThreadTeamBeginCallback;
            ThreadTeamEnd(_0: OTF2_CommRef)
                via OTF2_GlobalEvtReaderCallbacks_SetThreadTeamEndCallback;
            ThreadAcquireLock(_0: OTF2_Paradigm, _1: u32, _2: u32)
                via OTF2_GlobalEvtReaderCallbacks_SetThreadAcquireLockCallback;
            ThreadReleaseLock(_0: OTF2_Paradigm, _1: u32, _2: u32)
                via OTF2_GlobalEvtReaderCallbacks_SetThreadReleaseLockCallback;
            ThreadTaskCreate(_0: OTF2_CommRef, _1: u32, _2: u32)
                via OTF2_GlobalEvtReaderCallbacks_SetThreadTaskCreateCallback;
            ThreadTaskSwitch(_0: OTF2_CommRef, _1: u32, _2: u32)
                via OTF2_GlobalEvtReaderCallbacks_SetThreadTaskSwitchCallback;
            ThreadTaskComplete(_0: OTF2_CommRef, _1: u32, _2: u32)
                via OTF2_GlobalEvtReaderCallbacks_SetThreadTaskCompleteCallback;
            ThreadCreate(_0: OTF2_CommRef, _1: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetThreadCreateCallback;
            ThreadBegin(_0: OTF2_CommRef, _1: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetThreadBeginCallback;
            ThreadWait(_0: OTF2_CommRef, _1: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetThreadWaitCallback;
            ThreadEnd(_0: OTF2_CommRef, _1: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetThreadEndCallback;
            CallingContextEnter(_0: OTF2_CallingContextRef, _1: u32)
                via OTF2_GlobalEvtReaderCallbacks_SetCallingContextEnterCallback;
            CallingContextLeave(_0: OTF2_CallingContextRef)
                via OTF2_GlobalEvtReaderCallbacks_SetCallingContextLeaveCallback;
            CallingContextSample(_0: OTF2_CallingContextRef, _1: u32, _2: OTF2_InterruptGeneratorRef)
                via OTF2_GlobalEvtReaderCallbacks_SetCallingContextSampleCallback;
            IoCreateHandle(_0: OTF2_IoHandleRef, _1: OTF2_IoAccessMode, _2: OTF2_IoCreationFlag, _3: OTF2_IoStatusFlag)
                via OTF2_GlobalEvtReaderCallbacks_SetIoCreateHandleCallback;
            IoDestroyHandle(_0: OTF2_IoHandleRef)
                via OTF2_GlobalEvtReaderCallbacks_SetIoDestroyHandleCallback;
            IoDuplicateHandle(_0: OTF2_IoHandleRef, _1: OTF2_IoHandleRef, _2: OTF2_IoStatusFlag)
                via OTF2_GlobalEvtReaderCallbacks_SetIoDuplicateHandleCallback;
            IoSeek(_0: OTF2_IoHandleRef, _1: i64, _2: OTF2_IoSeekOption, _3: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetIoSeekCallback;
            IoChangeStatusFlags(_0: OTF2_IoHandleRef, _1: OTF2_IoStatusFlag)
                via OTF2_GlobalEvtReaderCallbacks_SetIoChangeStatusFlagsCallback;
            IoDeleteFile(_0: OTF2_IoParadigmRef, _1: OTF2_IoFileRef)
                via OTF2_GlobalEvtReaderCallbacks_SetIoDeleteFileCallback;
            IoOperationBegin(_0: OTF2_IoHandleRef, _1: OTF2_IoOperationMode, _2: OTF2_IoOperationFlag, _3: u64, _4: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetIoOperationBeginCallback;
            IoOperationTest(_0: OTF2_IoHandleRef, _1: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetIoOperationTestCallback;
            IoOperationIssued(_0: OTF2_IoHandleRef, _1: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetIoOperationIssuedCallback;
            IoOperationComplete(_0: OTF2_IoHandleRef, _1: u64, _2: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetIoOperationCompleteCallback;
            IoOperationCancelled(_0: OTF2_IoHandleRef, _1: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetIoOperationCancelledCallback;
            IoAcquireLock(_0: OTF2_IoHandleRef, _1: OTF2_LockType)
                via OTF2_GlobalEvtReaderCallbacks_SetIoAcquireLockCallback;
            IoReleaseLock(_0: OTF2_IoHandleRef, _1: OTF2_LockType)
                via OTF2_GlobalEvtReaderCallbacks_SetIoReleaseLockCallback;
            IoTryLock(_0: OTF2_IoHandleRef, _1: OTF2_LockType)
                via OTF2_GlobalEvtReaderCallbacks_SetIoTryLockCallback;
            ProgramBegin(_0: OTF2_StringRef, _1: u32, _2: *const OTF2_StringRef)
                via OTF2_GlobalEvtReaderCallbacks_SetProgramBeginCallback;
            ProgramEnd(_0: i64)
                via OTF2_GlobalEvtReaderCallbacks_SetProgramEndCallback;
            NonBlockingCollectiveRequest(_0: u64)
                via OTF2_GlobalEvtReaderCallbacks_SetNonBlockingCollectiveRequestCallback;
            CommCreate(_0: OTF2_CommRef)
                via OTF2_GlobalEvtReaderCallbacks_SetCommCreateCallback;
            CommDestroy(_0: OTF2_CommRef)
                via OTF2_GlobalEvtReaderCallbacks_SetCommDestroyCallback;
    }
}
