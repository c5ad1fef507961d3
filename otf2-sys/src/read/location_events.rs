//! Reading one location's events at a time: [`EventFiles`] (the open event files of a
//! [`Reader`]) and [`LocationEvents`] (one location's event reader), in file order with
//! each event's position.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::cell::RefCell;
use std::collections::BTreeSet;

use crate::read::events::{set_local_callbacks, EventState, EventVisitor};
use crate::read::reader::{check, Reader};
use crate::reading::register_callbacks;
use crate::*;

/// The open event files of a [`Reader`] (of its selected locations), closed when dropped.
pub struct EventFiles<'r> {
    reader: &'r Reader,
    /// Locations with a live [`LocationEvents`]: OTF2 hands out one reader per location.
    held: RefCell<BTreeSet<u64>>,
}

impl Reader {
    /// Opens the event files of the selected locations.
    pub fn open_event_files(&self) -> Result<EventFiles<'_>, Error> {
        let _busy = self.enter()?;
        // SAFETY: the reader is open.
        let code = unsafe { OTF2_Reader_OpenEvtFiles(self.raw) };
        check(code, Step::OpenEventFiles)?;
        Ok(EventFiles {
            reader: self,
            held: RefCell::new(BTreeSet::new()),
        })
    }
}

impl<'r> EventFiles<'r> {
    /// The event reader of `location` (selected). Local definitions read while it is open
    /// give it their mapping tables and clock offsets.
    pub fn location(&self, location: u64) -> Result<LocationEvents<'_, 'r>, Error> {
        let _busy = self.reader.enter()?;
        if self.held.borrow().contains(&location) {
            // A second handle would close OTF2's one reader twice.
            return Err(Error::plain(Step::EventReader(location)));
        }
        // SAFETY: the reader is open with its event files.
        let raw = unsafe { OTF2_Reader_GetEvtReader(self.reader.raw, location) };
        if raw.is_null() {
            return Err(Error::otf2(Step::EventReader(location), None));
        }
        self.held.borrow_mut().insert(location);
        Ok(LocationEvents {
            files: self,
            raw,
            location,
        })
    }
}

impl Drop for EventFiles<'_> {
    fn drop(&mut self) {
        // Inside a callback of a running read the files stay open until the reader closes.
        if !self.reader.is_busy() {
            // SAFETY: the reader is open with its event files; every `LocationEvents`
            // borrowed these files and is gone.
            unsafe { OTF2_Reader_CloseEvtFiles(self.reader.raw) };
        }
    }
}

/// How a location's events were read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocationRead {
    /// Events OTF2 read (of every kind).
    pub events: u64,
    /// The visitor stopped the read ([`EventVisitor::keep_reading`]).
    pub interrupted: bool,
}

/// One location's event reader, closed when dropped.
pub struct LocationEvents<'f, 'r> {
    files: &'f EventFiles<'r>,
    raw: *mut OTF2_EvtReader,
    location: u64,
}

impl LocationEvents<'_, '_> {
    pub fn location(&self) -> u64 {
        self.location
    }

    /// Whether OTF2 applies the location's clock offsets to its event times (it does
    /// unless told otherwise).
    pub fn apply_clock_offsets(&self, apply: bool) -> Result<(), Error> {
        let _busy = self.files.reader.enter()?;
        // SAFETY: the event reader is open.
        let code = unsafe { OTF2_EvtReader_ApplyClockOffsets(self.raw, apply) };
        check(code, Step::ApplyClockOffsets(self.location))
    }

    /// Reads the location's events, from where an earlier read stopped, into `visitor`.
    pub fn read_all<V: EventVisitor + ?Sized>(
        &self,
        visitor: &mut V,
    ) -> Result<LocationRead, Error> {
        let reader = self.files.reader;
        let _busy = reader.enter()?;
        let mut state = EventState::new(visitor);
        let set = |c| {
            // SAFETY: `c` is the live table of `register_callbacks`.
            unsafe { set_local_callbacks::<V>(c) }
        };
        // SAFETY: the reader and the event reader are open; the callbacks take an
        // `EventState` of `V`; `state` outlives the read and is used only by the callbacks
        // meanwhile.
        let code = unsafe { register_callbacks(reader.raw, self.raw, &mut state, set) };
        check(code, Step::RegisterCallbacks)?;
        let mut events = 0;
        // SAFETY: as above.
        let code = unsafe { OTF2_Reader_ReadAllLocalEvents(reader.raw, self.raw, &mut events) };
        let step = Step::ReadLocationEvents {
            location: self.location,
            events,
        };
        if let Some(message) = state.panic.take() {
            return Err(Error::Panic { step, message });
        }
        let interrupted = code == OTF2_ERROR_INTERRUPTED_BY_CALLBACK;
        if !interrupted {
            check(code, step)?;
        }
        Ok(LocationRead {
            events,
            interrupted,
        })
    }
}

impl Drop for LocationEvents<'_, '_> {
    fn drop(&mut self) {
        // Inside a callback of a running read the reader stays open until the archive
        // closes.
        if !self.files.reader.is_busy() {
            // SAFETY: the event reader is open and this is its only handle (`held`).
            unsafe { OTF2_Reader_CloseEvtReader(self.files.reader.raw, self.raw) };
        }
        self.files.held.borrow_mut().remove(&self.location);
    }
}
