//! [`Archive`]: an archive being written by this process alone, its properties, and its
//! locations' local definitions ([`DefinitionFiles`], [`LocalDefWriter`], [`IdMap`]).
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::error::drain_thread_error_reports;
use crate::read::ClockOffset;
use crate::writing::{create_archive, CreateError};
use crate::*;

/// `Ok` for `OTF2_SUCCESS`, else the failure of `step` with OTF2's reports.
pub(crate) fn check(code: OTF2_ErrorCode, step: Step) -> Result<(), Error> {
    if code == OTF2_SUCCESS {
        Ok(())
    } else {
        Err(Error::otf2(step, Some(code)))
    }
}

/// A C string for OTF2; a NUL byte becomes `?`.
pub(crate) fn c_text(text: &str) -> CString {
    CString::new(text.replace('\0', "?")).unwrap_or_default()
}

/// An archive open for writing, closed when dropped (after a failure). Not `Send`: OTF2's
/// writers belong to the thread that opened the archive.
///
/// Errors carry OTF2's reports about them. Some failures appear only as a report while
/// the call succeeds: after [`Archive::close`], drain them with
/// [`crate::error::drain_thread_error_reports`].
pub struct Archive {
    pub(crate) raw: *mut OTF2_Archive,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archive").finish_non_exhaustive()
    }
}

impl Drop for Archive {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: the archive is open, closed only here or in `close` (which nulls
            // it), and nothing borrows it any more.
            unsafe { OTF2_Archive_Close(self.raw) };
            // What OTF2 says while closing after a failure was said before.
            drop(drain_thread_error_reports());
        }
    }
}

impl Archive {
    /// Creates `<dir>/traces.otf2` (`dir/traces` must not exist) with [`create_archive`].
    /// Reports OTF2 made on this thread before are dropped, so that an error carries only
    /// its own.
    pub fn create(dir: &Path, event_chunk: u64, definition_chunk: u64) -> Result<Archive, Error> {
        drop(drain_thread_error_reports());
        let path =
            CString::new(dir.as_os_str().as_bytes()).map_err(|_| Error::plain(Step::NulInPath))?;
        let step = Step::CreateArchive(dir.to_path_buf());
        match create_archive(&path, event_chunk, definition_chunk) {
            Ok(raw) => Ok(Archive { raw }),
            Err(CreateError::Open) => Err(Error::otf2(step, None)),
            Err(CreateError::Setup(code)) => Err(Error::otf2(step, Some(code))),
        }
    }

    fn set(
        &self,
        what: &'static str,
        text: &str,
        set: unsafe extern "C" fn(*mut OTF2_Archive, *const std::ffi::c_char) -> OTF2_ErrorCode,
    ) -> Result<(), Error> {
        let text = c_text(text);
        // SAFETY: the archive is open; `set` is one of OTF2's archive setters, which copy
        // the string.
        let code = unsafe { set(self.raw, text.as_ptr()) };
        check(code, Step::ArchiveProperty(what))
    }

    pub fn set_creator(&self, creator: &str) -> Result<(), Error> {
        self.set("creator", creator, OTF2_Archive_SetCreator)
    }

    pub fn set_description(&self, description: &str) -> Result<(), Error> {
        self.set("description", description, OTF2_Archive_SetDescription)
    }

    pub fn set_machine_name(&self, machine: &str) -> Result<(), Error> {
        self.set("machine name", machine, OTF2_Archive_SetMachineName)
    }

    /// Sets a trace file property (`NAMESPACE::NAME`, letters, digits and `_`), replacing
    /// an earlier value.
    pub fn set_property(&self, name: &str, value: &str) -> Result<(), Error> {
        let name = c_text(name);
        let value = c_text(value);
        // SAFETY: the archive is open for writing; OTF2 copies both strings.
        let code =
            unsafe { OTF2_Archive_SetProperty(self.raw, name.as_ptr(), value.as_ptr(), true) };
        check(code, Step::ArchiveProperty("property"))
    }

    /// Opens the local definition files.
    pub fn open_definition_files(&self) -> Result<DefinitionFiles<'_>, Error> {
        // SAFETY: the archive is open.
        let code = unsafe { OTF2_Archive_OpenDefFiles(self.raw) };
        check(code, Step::OpenDefinitionFiles)?;
        Ok(DefinitionFiles {
            archive: self,
            held: RefCell::new(BTreeSet::new()),
            open: true,
        })
    }

    /// Closes the archive: OTF2 writes what it still holds. Reports OTF2 makes without
    /// failing the call are left to the caller.
    pub fn close(mut self) -> Result<(), Error> {
        // SAFETY: the archive is open and nothing borrows it (`self` is owned); it is
        // nulled so that `drop` does not close it again.
        let code = unsafe { OTF2_Archive_Close(self.raw) };
        self.raw = std::ptr::null_mut();
        check(code, Step::Close)
    }
}

/// The open local definition files of an [`Archive`], closed by [`DefinitionFiles::close`]
/// or when dropped.
pub struct DefinitionFiles<'a> {
    archive: &'a Archive,
    /// Locations with a live writer: OTF2 hands out one writer per location.
    held: RefCell<BTreeSet<u64>>,
    open: bool,
}

impl DefinitionFiles<'_> {
    /// The local definition writer of `location`.
    pub fn writer(&self, location: u64) -> Result<LocalDefWriter<'_>, Error> {
        if self.held.borrow().contains(&location) {
            // A second handle would close OTF2's one writer twice.
            return Err(Error::plain(Step::DefinitionWriter(location)));
        }
        // SAFETY: the archive is open with its definition files.
        let raw = unsafe { OTF2_Archive_GetDefWriter(self.archive.raw, location) };
        if raw.is_null() {
            return Err(Error::otf2(Step::DefinitionWriter(location), None));
        }
        self.held.borrow_mut().insert(location);
        Ok(LocalDefWriter {
            files: self,
            raw,
            location,
        })
    }

    /// Closes the files.
    pub fn close(mut self) -> Result<(), Error> {
        self.open = false;
        // SAFETY: the archive is open with its definition files; every writer borrowed
        // these files and is closed.
        let code = unsafe { OTF2_Archive_CloseDefFiles(self.archive.raw) };
        check(code, Step::CloseDefinitionFiles)
    }
}

impl Drop for DefinitionFiles<'_> {
    fn drop(&mut self) {
        if self.open {
            // SAFETY: as in `close`.
            unsafe { OTF2_Archive_CloseDefFiles(self.archive.raw) };
        }
    }
}

/// One location's local definition writer, closed by [`LocalDefWriter::close`] or when
/// dropped.
pub struct LocalDefWriter<'f> {
    files: &'f DefinitionFiles<'f>,
    /// NULL once closed.
    raw: *mut OTF2_DefWriter,
    location: u64,
}

impl LocalDefWriter<'_> {
    /// Writes a MappingTable record: the location's ids of `kind` (`OTF2_MAPPING_*`) are
    /// mapped by `map`.
    pub fn mapping_table(&self, kind: OTF2_MappingType, map: &IdMap) -> Result<(), Error> {
        // SAFETY: the writer and `map` are live; OTF2 copies the map.
        let code = unsafe { OTF2_DefWriter_WriteMappingTable(self.raw, kind, map.raw) };
        check(code, Step::WriteDefinition("MappingTable"))
    }

    /// Writes a ClockOffset record.
    pub fn clock_offset(&self, offset: &ClockOffset) -> Result<(), Error> {
        // SAFETY: the writer is live.
        let code = unsafe {
            OTF2_DefWriter_WriteClockOffset(
                self.raw,
                offset.time,
                offset.offset,
                offset.standard_deviation,
            )
        };
        check(code, Step::WriteDefinition("ClockOffset"))
    }

    /// Closes the writer.
    pub fn close(mut self) -> Result<(), Error> {
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        // SAFETY: the writer is live and this is its only handle; nulled above so that
        // `drop` does not close it again.
        let code = unsafe { OTF2_Archive_CloseDefWriter(self.files.archive.raw, raw) };
        check(code, Step::CloseDefinitionWriter(self.location))
    }
}

impl Drop for LocalDefWriter<'_> {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: the writer is live and this is its only handle.
            unsafe { OTF2_Archive_CloseDefWriter(self.files.archive.raw, self.raw) };
        }
        self.files.held.borrow_mut().remove(&self.location);
    }
}

/// An `OTF2_IdMap` (a mapping table's content), freed when dropped.
pub struct IdMap {
    raw: *mut OTF2_IdMap,
}

impl Drop for IdMap {
    fn drop(&mut self) {
        // SAFETY: created by OTF2_IdMap_Create, freed only here.
        unsafe { OTF2_IdMap_Free(self.raw) };
    }
}

impl IdMap {
    /// A map of `pairs` (local id → global id): dense when the local ids are 0..n,
    /// else sparse.
    pub fn from_pairs(pairs: &BTreeMap<u64, u64>) -> Result<IdMap, Error> {
        let dense = pairs
            .keys()
            .enumerate()
            .all(|(i, local)| *local == i as u64);
        let mode = if dense {
            OTF2_ID_MAP_DENSE
        } else {
            OTF2_ID_MAP_SPARSE
        };
        // SAFETY: a plain allocation; NULL on failure.
        let raw = unsafe { OTF2_IdMap_Create(mode as OTF2_IdMapMode, pairs.len() as u64) };
        if raw.is_null() {
            return Err(Error::otf2(Step::IdMap, None));
        }
        let map = IdMap { raw };
        for (&local, &global) in pairs {
            // SAFETY: `map` is live; a dense map gets its local ids in order (BTreeMap).
            let code = unsafe { OTF2_IdMap_AddIdPair(map.raw, local, global) };
            check(code, Step::IdMap)?;
        }
        Ok(map)
    }
}
