//! Writing events: [`EventFiles`] (the open event files of an [`Archive`]), one
//! location's [`EventWriter`], and the [`AttributeList`] an event may carry. The kinds
//! here are those the readers look at, for archives written by tests and tools.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::cell::RefCell;
use std::collections::BTreeSet;

use crate::read::{AttributeValue, CollectiveEnd, MpiMessage};
use crate::writing::archive::check;
use crate::writing::Archive;
use crate::*;

/// An `OTF2_AttributeList`, freed when dropped. Writing an event with it empties it.
pub struct AttributeList {
    raw: *mut OTF2_AttributeList,
}

impl Drop for AttributeList {
    fn drop(&mut self) {
        // SAFETY: created by OTF2_AttributeList_New, freed only here.
        unsafe { OTF2_AttributeList_Delete(self.raw) };
    }
}

impl AttributeList {
    pub fn new() -> Result<AttributeList, Error> {
        // SAFETY: a plain allocation; NULL on failure.
        let raw = unsafe { OTF2_AttributeList_New() };
        if raw.is_null() {
            return Err(Error::otf2(Step::WriteEvent("attribute list"), None));
        }
        Ok(AttributeList { raw })
    }

    /// Adds attribute `id` with `value` (an id may appear once).
    pub fn add(&mut self, id: u32, value: AttributeValue) -> Result<(), Error> {
        let (value_type, raw_value) = value.to_raw();
        // SAFETY: the list is live; the value is passed by value.
        let code = unsafe { OTF2_AttributeList_AddAttribute(self.raw, id, value_type, raw_value) };
        check(code, Step::WriteEvent("attribute list"))
    }

    /// How many attributes it holds.
    pub fn len(&self) -> u32 {
        // SAFETY: the list is live.
        unsafe { OTF2_AttributeList_GetNumberOfElements(self.raw) }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The raw list for an event: NULL for none.
fn list(attributes: Option<&mut AttributeList>) -> *mut OTF2_AttributeList {
    attributes.map_or(std::ptr::null_mut(), |a| a.raw)
}

impl Archive {
    /// Opens the event files.
    pub fn open_event_files(&self) -> Result<EventFiles<'_>, Error> {
        // SAFETY: the archive is open.
        let code = unsafe { OTF2_Archive_OpenEvtFiles(self.raw) };
        check(code, Step::OpenEventFiles)?;
        Ok(EventFiles {
            archive: self,
            held: RefCell::new(BTreeSet::new()),
            open: true,
        })
    }
}

/// The open event files of an [`Archive`], closed by [`EventFiles::close`] or when dropped.
pub struct EventFiles<'a> {
    archive: &'a Archive,
    /// Locations with a live writer: OTF2 hands out one writer per location.
    held: RefCell<BTreeSet<u64>>,
    open: bool,
}

impl EventFiles<'_> {
    /// The event writer of `location`.
    pub fn writer(&self, location: u64) -> Result<EventWriter<'_>, Error> {
        if self.held.borrow().contains(&location) {
            // A second handle would close OTF2's one writer twice.
            return Err(Error::plain(Step::EventWriter(location)));
        }
        // SAFETY: the archive is open with its event files.
        let raw = unsafe { OTF2_Archive_GetEvtWriter(self.archive.raw, location) };
        if raw.is_null() {
            return Err(Error::otf2(Step::EventWriter(location), None));
        }
        self.held.borrow_mut().insert(location);
        Ok(EventWriter {
            files: self,
            raw,
            location,
        })
    }

    /// Closes the files.
    pub fn close(mut self) -> Result<(), Error> {
        self.open = false;
        // SAFETY: the archive is open with its event files; every writer borrowed these
        // files and is closed.
        let code = unsafe { OTF2_Archive_CloseEvtFiles(self.archive.raw) };
        check(code, Step::CloseEventFiles)
    }
}

impl Drop for EventFiles<'_> {
    fn drop(&mut self) {
        if self.open {
            // SAFETY: as in `close`.
            unsafe { OTF2_Archive_CloseEvtFiles(self.archive.raw) };
        }
    }
}

/// One location's event writer, closed by [`EventWriter::close`] or when dropped. Times
/// must not decrease.
pub struct EventWriter<'f> {
    files: &'f EventFiles<'f>,
    /// NULL once closed.
    raw: *mut OTF2_EvtWriter,
    location: u64,
}

impl EventWriter<'_> {
    pub fn enter(
        &self,
        attributes: Option<&mut AttributeList>,
        time: u64,
        region: u32,
    ) -> Result<(), Error> {
        // SAFETY: the writer and the list (or NULL) are live.
        let code = unsafe { OTF2_EvtWriter_Enter(self.raw, list(attributes), time, region) };
        check(code, Step::WriteEvent("Enter"))
    }

    pub fn leave(
        &self,
        attributes: Option<&mut AttributeList>,
        time: u64,
        region: u32,
    ) -> Result<(), Error> {
        // SAFETY: the writer and the list (or NULL) are live.
        let code = unsafe { OTF2_EvtWriter_Leave(self.raw, list(attributes), time, region) };
        check(code, Step::WriteEvent("Leave"))
    }

    pub fn mpi_collective_begin(
        &self,
        attributes: Option<&mut AttributeList>,
        time: u64,
    ) -> Result<(), Error> {
        // SAFETY: the writer and the list (or NULL) are live.
        let code = unsafe { OTF2_EvtWriter_MpiCollectiveBegin(self.raw, list(attributes), time) };
        check(code, Step::WriteEvent("MpiCollectiveBegin"))
    }

    pub fn mpi_collective_end(
        &self,
        attributes: Option<&mut AttributeList>,
        time: u64,
        end: &CollectiveEnd,
    ) -> Result<(), Error> {
        // SAFETY: the writer and the list (or NULL) are live.
        let code = unsafe {
            OTF2_EvtWriter_MpiCollectiveEnd(
                self.raw,
                list(attributes),
                time,
                end.op,
                end.comm,
                end.root,
                end.sent,
                end.received,
            )
        };
        check(code, Step::WriteEvent("MpiCollectiveEnd"))
    }

    pub fn mpi_send(
        &self,
        attributes: Option<&mut AttributeList>,
        time: u64,
        message: &MpiMessage,
    ) -> Result<(), Error> {
        let m = message;
        // SAFETY: the writer and the list (or NULL) are live.
        let code = unsafe {
            OTF2_EvtWriter_MpiSend(
                self.raw,
                list(attributes),
                time,
                m.peer,
                m.comm,
                m.tag,
                m.length,
            )
        };
        check(code, Step::WriteEvent("MpiSend"))
    }

    pub fn mpi_recv(
        &self,
        attributes: Option<&mut AttributeList>,
        time: u64,
        message: &MpiMessage,
    ) -> Result<(), Error> {
        let m = message;
        // SAFETY: the writer and the list (or NULL) are live.
        let code = unsafe {
            OTF2_EvtWriter_MpiRecv(
                self.raw,
                list(attributes),
                time,
                m.peer,
                m.comm,
                m.tag,
                m.length,
            )
        };
        check(code, Step::WriteEvent("MpiRecv"))
    }

    /// How many events it wrote.
    pub fn number_of_events(&self) -> Result<u64, Error> {
        let mut events = 0;
        // SAFETY: the writer is live; the out pointer is valid.
        let code = unsafe { OTF2_EvtWriter_GetNumberOfEvents(self.raw, &mut events) };
        check(code, Step::WriteEvent("count"))?;
        Ok(events)
    }

    /// Closes the writer.
    pub fn close(mut self) -> Result<(), Error> {
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        // SAFETY: the writer is live and this is its only handle; nulled above so that
        // `drop` does not close it again.
        let code = unsafe { OTF2_Archive_CloseEvtWriter(self.files.archive.raw, raw) };
        check(code, Step::CloseEventWriter(self.location))
    }
}

impl Drop for EventWriter<'_> {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: the writer is live and this is its only handle.
            unsafe { OTF2_Archive_CloseEvtWriter(self.files.archive.raw, self.raw) };
        }
        self.files.held.borrow_mut().remove(&self.location);
    }
}
