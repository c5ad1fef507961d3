//! [`Reader`]: an archive opened from its anchor file, its properties, its global
//! definitions, and its locations' local definitions.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::cell::Cell;
use std::ffi::{c_void, CString};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use crate::callbacks::{first_failure, guarded, CallbackState};
use crate::error::drain_thread_error_reports;
use crate::read::model::{ClockOffset, GlobalDefs, LocalDefinitions, MappingTable};
use crate::read::records::{set_callbacks, DefinitionState, GlobalDefinition};
use crate::reading::{self, register_callbacks, GlobalDefinitionsFailure};
use crate::*;

/// An archive open for reading by this process alone (serial collectives), closed when
/// dropped. Not `Send`: OTF2's reader belongs to the thread that opened it.
///
/// Errors carry OTF2's reports about them. A step that succeeds leaves OTF2's reports (a
/// warning, an error OTF2 got past) to the caller, who drains them with
/// [`crate::error::drain_thread_error_reports`] where it wants them.
pub struct Reader {
    pub(crate) raw: *mut OTF2_Reader,
    anchor: PathBuf,
    /// A read is running: its callbacks must not start another OTF2 call on this reader.
    busy: Cell<bool>,
}

/// Marks the reader busy while it lives.
pub(crate) struct Busy<'r>(&'r Cell<bool>);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// `Ok` for `OTF2_SUCCESS`, else the failure of `step` with OTF2's reports.
pub(crate) fn check(code: OTF2_ErrorCode, step: Step) -> Result<(), Error> {
    if code == OTF2_SUCCESS {
        Ok(())
    } else {
        Err(Error::otf2(step, Some(code)))
    }
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("anchor", &self.anchor)
            .finish_non_exhaustive()
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: the pointer came from OTF2_Reader_Open and is closed only here or in
            // `close`, which nulls it; nothing borrows the reader any more.
            unsafe { OTF2_Reader_Close(self.raw) };
            // What OTF2 says while closing after a failure was said before.
            drop(drain_thread_error_reports());
        }
    }
}

impl Reader {
    /// Opens the archive whose anchor file is `anchor`. Reports OTF2 made on this thread
    /// before are dropped, so that an error carries only its own.
    pub fn open(anchor: &Path) -> Result<Reader, Error> {
        drop(drain_thread_error_reports());
        let path = CString::new(anchor.as_os_str().as_bytes())
            .map_err(|_| Error::plain(Step::NulInPath))?;
        // SAFETY: `path` is a NUL-terminated string that outlives the call.
        let raw = unsafe { OTF2_Reader_Open(path.as_ptr()) };
        if raw.is_null() {
            return Err(Error::otf2(Step::Open, None));
        }
        let reader = Reader {
            raw,
            anchor: anchor.to_path_buf(),
            busy: Cell::new(false),
        };
        // SAFETY: the reader is open.
        let code = unsafe { OTF2_Reader_SetSerialCollectiveCallbacks(reader.raw) };
        check(code, Step::CollectiveCallbacks)?;
        Ok(reader)
    }

    /// The anchor file it was opened from.
    pub fn anchor(&self) -> &Path {
        &self.anchor
    }

    /// Marks the reader busy for one step, or fails when a step is running (a callback of
    /// it called back into the reader).
    pub(crate) fn enter(&self) -> Result<Busy<'_>, Error> {
        if self.busy.replace(true) {
            return Err(Error::plain(Step::Busy));
        }
        Ok(Busy(&self.busy))
    }

    /// Whether a step is running (a guard dropped inside a callback must not close).
    pub(crate) fn is_busy(&self) -> bool {
        self.busy.get()
    }

    /// Reads one property with `get`, failing as `step`.
    fn property<T: Default>(
        &self,
        step: Step,
        get: impl FnOnce(*mut OTF2_Reader, &mut T) -> OTF2_ErrorCode,
    ) -> Result<T, Error> {
        let _busy = self.enter()?;
        let mut value = T::default();
        let code = get(self.raw, &mut value);
        check(code, step)?;
        Ok(value)
    }

    /// The archive's trace file properties (name, value), in OTF2's order. OTF2 stores
    /// names upper-cased.
    pub fn properties(&self) -> Result<Vec<(String, String)>, Error> {
        let _busy = self.enter()?;
        let mut count: u32 = 0;
        let mut names: *mut *mut std::ffi::c_char = std::ptr::null_mut();
        // SAFETY: the reader is open; the out pointers are valid. OTF2 allocates the list
        // of names in one block, released below with `free`.
        let code = unsafe { OTF2_Reader_GetPropertyNames(self.raw, &mut count, &mut names) };
        check(code, Step::Properties)?;
        let mut properties = Vec::with_capacity(count as usize);
        for index in 0..count as usize {
            if names.is_null() {
                break;
            }
            // SAFETY: `names` holds `count` pointers to NUL-terminated strings.
            let name = unsafe { *names.add(index) };
            if name.is_null() {
                continue;
            }
            // SAFETY: a NUL-terminated string that lives until `names` is freed.
            let name_text = unsafe { std::ffi::CStr::from_ptr(name) };
            let mut value: *mut std::ffi::c_char = std::ptr::null_mut();
            // SAFETY: the reader is open; `name` is valid; OTF2 mallocs the value.
            let code = unsafe { OTF2_Reader_GetProperty(self.raw, name, &mut value) };
            if code == OTF2_SUCCESS && !value.is_null() {
                // SAFETY: `value` is a NUL-terminated string OTF2 allocated for us.
                let value_text = unsafe { std::ffi::CStr::from_ptr(value) }
                    .to_string_lossy()
                    .into_owned();
                // SAFETY: allocated with malloc by OTF2, freed once.
                unsafe { libc::free(value.cast()) };
                properties.push((name_text.to_string_lossy().into_owned(), value_text));
            }
        }
        if !names.is_null() {
            // SAFETY: the list OTF2 allocated with malloc, freed once.
            unsafe { libc::free(names.cast()) };
        }
        Ok(properties)
    }

    /// The archive's (event, definition) chunk sizes.
    pub fn chunk_sizes(&self) -> Result<(u64, u64), Error> {
        self.property(
            Step::ChunkSizes,
            |raw, (event, definition): &mut (u64, u64)| {
                // SAFETY: the reader is open; the out pointers are valid.
                unsafe { OTF2_Reader_GetChunkSize(raw, event, definition) }
            },
        )
    }

    /// How many global definitions the anchor file announces.
    pub fn number_of_global_definitions(&self) -> Result<u64, Error> {
        self.property(Step::NumberOfGlobalDefinitions, |raw, n| {
            // SAFETY: the reader is open; the out pointer is valid.
            unsafe { OTF2_Reader_GetNumberOfGlobalDefinitions(raw, n) }
        })
    }

    /// How many locations the anchor file announces.
    pub fn number_of_locations(&self) -> Result<u64, Error> {
        self.property(Step::NumberOfLocations, |raw, n| {
            // SAFETY: the reader is open; the out pointer is valid.
            unsafe { OTF2_Reader_GetNumberOfLocations(raw, n) }
        })
    }

    /// The file substrate (`OTF2_SUBSTRATE_*`).
    pub fn file_substrate(&self) -> Result<OTF2_FileSubstrate, Error> {
        self.property(Step::FileSubstrate, |raw, substrate| {
            // SAFETY: the reader is open; the out pointer is valid.
            unsafe { OTF2_Reader_GetFileSubstrate(raw, substrate) }
        })
    }

    /// The compression (`OTF2_COMPRESSION_*`).
    pub fn compression(&self) -> Result<OTF2_Compression, Error> {
        self.property(Step::Compression, |raw, compression| {
            // SAFETY: the reader is open; the out pointer is valid.
            unsafe { OTF2_Reader_GetCompression(raw, compression) }
        })
    }

    /// Hands every global definition record to `each`, in file order; answers how many
    /// records of kinds this OTF2 does not know went by.
    pub fn for_each_global_definition(
        &self,
        mut each: impl FnMut(GlobalDefinition),
    ) -> Result<u64, Error> {
        let _busy = self.enter()?;
        let mut state = DefinitionState {
            each: &mut each,
            unknown: 0,
            panic: None,
        };
        let set = |c| {
            // SAFETY: `c` is the live table of `register_callbacks`.
            unsafe { set_callbacks(c) }
        };
        // SAFETY: the reader is open; the callbacks take a `DefinitionState`; `state` lives
        // until the end of this function and is used only by the callbacks meanwhile.
        let read = unsafe { reading::read_global_definitions(self.raw, &mut state, set) };
        if let Some(message) = state.panic.take() {
            let records = match read {
                Err(GlobalDefinitionsFailure::Stopped { read, .. }) => read,
                _ => 0,
            };
            let step = Step::ReadGlobalDefinitions { records };
            return Err(Error::Panic { step, message });
        }
        match read {
            Ok(_) => Ok(state.unknown),
            Err(GlobalDefinitionsFailure::NoReader) => {
                Err(Error::otf2(Step::GlobalDefinitionReader, None))
            }
            Err(GlobalDefinitionsFailure::Stopped { read, code }) => Err(Error::otf2(
                Step::ReadGlobalDefinitions { records: read },
                Some(code),
            )),
        }
    }

    /// The global definitions, as the model keeps them.
    pub fn global_definitions(&self) -> Result<GlobalDefs, Error> {
        let mut defs = GlobalDefs::default();
        let unknown = self.for_each_global_definition(|record| defs.add(&record))?;
        defs.unknown = unknown;
        Ok(defs)
    }

    /// Selects `locations` for reading their local definitions and events.
    pub fn select_locations(&self, locations: &[u64]) -> Result<(), Error> {
        let _busy = self.enter()?;
        for &id in locations {
            // SAFETY: the reader is open.
            let code = unsafe { OTF2_Reader_SelectLocation(self.raw, id) };
            check(code, Step::SelectLocation(id))?;
        }
        Ok(())
    }

    /// Opens the local definition files (of the selected locations).
    pub fn open_definition_files(&self) -> Result<DefinitionFiles<'_>, Error> {
        let _busy = self.enter()?;
        // SAFETY: the reader is open.
        let code = unsafe { OTF2_Reader_OpenDefFiles(self.raw) };
        check(code, Step::OpenDefinitionFiles)?;
        Ok(DefinitionFiles { reader: self })
    }

    /// Reads one location's local definitions; the definition files are open. None: OTF2
    /// has no definition reader for it (no local definition file; OTF2's report about that
    /// is left to the caller). Without `collect` they only reach the location's event
    /// reader and an empty value is answered: a merged archive repeats its parts' mapping
    /// tables in every location, which adds up.
    pub(crate) fn local_definitions(
        &self,
        location: u64,
        collect: bool,
    ) -> Result<Option<LocalDefinitions>, Error> {
        // SAFETY: the reader is open, with its definition files (caller).
        let def_reader = unsafe { OTF2_Reader_GetDefReader(self.raw, location) };
        if def_reader.is_null() {
            return Ok(None);
        }
        let mut state = LocalState::default();
        let set = |c: *mut OTF2_DefReaderCallbacks| {
            if !collect {
                return OTF2_SUCCESS;
            }
            // SAFETY: `c` is the live table of `register_callbacks`; each function has the
            // type its setter takes (the compiler checks it).
            unsafe {
                first_failure(&[
                    OTF2_DefReaderCallbacks_SetClockOffsetCallback(c, Some(read_clock_offset)),
                    OTF2_DefReaderCallbacks_SetMappingTableCallback(c, Some(read_mapping_table)),
                ])
            }
        };
        // SAFETY: the reader and `def_reader` are open; the callbacks take a `LocalState`;
        // `state` outlives the reads below and is used only by the callbacks meanwhile.
        let mut code = unsafe { register_callbacks(self.raw, def_reader, &mut state, set) };
        if code == OTF2_SUCCESS {
            // SAFETY: as above.
            code = unsafe { reading::read_all_local_definitions(self.raw, def_reader) };
        }
        // SAFETY: `def_reader` is open and not used after this.
        unsafe { OTF2_Reader_CloseDefReader(self.raw, def_reader) };
        if let Some(message) = state.panic.take() {
            let step = Step::ReadLocalDefinitions(location);
            return Err(Error::Panic { step, message });
        }
        check(code, Step::ReadLocalDefinitions(location))?;
        Ok(Some(state.defs))
    }

    /// Closes the archive. Reports OTF2 makes while closing without failing are left to the
    /// caller.
    pub fn close(mut self) -> Result<(), Error> {
        // SAFETY: the reader is open and nothing borrows it (`self` is owned); it is nulled
        // so that `drop` does not close it again.
        let code = unsafe { OTF2_Reader_Close(self.raw) };
        self.raw = std::ptr::null_mut();
        check(code, Step::Close)
    }
}

/// The open local definition files of a [`Reader`], closed when dropped.
pub struct DefinitionFiles<'r> {
    reader: &'r Reader,
}

impl DefinitionFiles<'_> {
    /// One location's local definitions (it must be selected): its clock offsets and
    /// mapping tables. The mapping tables also go to the location's event reader, if one
    /// is open. None: it has no local definition file (OTF2's report about that is left to
    /// the caller).
    pub fn read(&self, location: u64) -> Result<Option<LocalDefinitions>, Error> {
        let _busy = self.reader.enter()?;
        self.reader.local_definitions(location, true)
    }

    /// Reads one location's local definitions only for its open event reader (mapping
    /// tables and clock offsets), keeping nothing: a merged archive repeats its parts'
    /// mapping tables in every location. False: it has no local definition file.
    pub fn apply(&self, location: u64) -> Result<bool, Error> {
        let _busy = self.reader.enter()?;
        Ok(self.reader.local_definitions(location, false)?.is_some())
    }
}

impl Drop for DefinitionFiles<'_> {
    fn drop(&mut self) {
        // Inside a callback of a running read the files stay open until the reader closes.
        if !self.reader.is_busy() {
            // SAFETY: the reader is open with its definition files, and no read runs.
            unsafe { OTF2_Reader_CloseDefFiles(self.reader.raw) };
        }
    }
}

/// What the local definition callbacks collect.
#[derive(Default)]
struct LocalState {
    defs: LocalDefinitions,
    panic: Option<String>,
}

impl CallbackState for LocalState {
    fn record_panic(&mut self, message: String) {
        self.panic.get_or_insert(message);
    }
}

unsafe extern "C" fn read_clock_offset(
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
    // SAFETY: OTF2 passes back the `LocalState` of `local_definitions`.
    unsafe {
        guarded(user_data, |s: &mut LocalState| {
            s.defs.clock_offsets.push(offset)
        })
    }
}

unsafe extern "C" fn read_mapping_table(
    user_data: *mut c_void,
    kind: OTF2_MappingType,
    id_map: *const OTF2_IdMap,
) -> OTF2_CallbackCode {
    let mut pairs: Vec<(u64, u64)> = Vec::new();
    if !id_map.is_null() {
        // SAFETY: OTF2 passes a live id map for the call; `add_pair` gets `pairs`, which
        // outlives the traversal.
        unsafe {
            OTF2_IdMap_Traverse(id_map, Some(add_pair), (&mut pairs as *mut Vec<_>).cast());
        }
    }
    let table = MappingTable { kind, pairs };
    // SAFETY: OTF2 passes back the `LocalState` of `local_definitions`.
    unsafe {
        guarded(user_data, |s: &mut LocalState| {
            s.defs.mapping_tables.push(table)
        })
    }
}

unsafe extern "C" fn add_pair(local: u64, global: u64, user_data: *mut c_void) {
    // OTF2's traversal cannot be stopped; a failed push (out of memory) is not unwound
    // into C.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `read_mapping_table` passes its live `Vec` of pairs.
        let pairs = unsafe { &mut *user_data.cast::<Vec<(u64, u64)>>() };
        pairs.push((local, global));
    }));
}
