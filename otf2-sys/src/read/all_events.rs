//! [`Reader::read_events`]: every event of a set of locations in time order (OTF2's global
//! event reader), going on past the locations whose events cannot be read, and keeping
//! what went wrong on the way as [`Issue`]s in the order it happened.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::collections::BTreeSet;

use crate::error::{drain_thread_error_reports, ErrorReport};
use crate::read::events::{set_global_callbacks, EventState, EventVisitor};
use crate::read::reader::Reader;
use crate::reading::register_callbacks;
use crate::*;

/// What a step of [`Reader::read_events`] that went on was doing when OTF2 reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum During {
    /// Opening a location and reading its local definitions.
    LocalDefinitions,
    /// Reading the events.
    Events,
}

/// Something that went wrong while reading events.
#[derive(Clone, Debug, PartialEq)]
pub enum Issue {
    /// A step failed (its error says which, and about which location).
    Failed(Error),
    /// OTF2 reported errors or warnings during a step that went on.
    Reported {
        during: During,
        location: Option<u64>,
        reports: Vec<ErrorReport>,
    },
}

/// The outcome of [`Reader::read_events`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventsRead {
    /// Locations whose events could not be read at all.
    pub unreadable: BTreeSet<u64>,
    /// Every event of the other locations was read (no failure, no interruption).
    pub complete: bool,
    /// The visitor stopped the read ([`EventVisitor::keep_reading`]).
    pub interrupted: bool,
    /// Events read, all locations together.
    pub events: u64,
    pub issues: Vec<Issue>,
}

impl EventsRead {
    fn failed(&mut self, error: Error) {
        self.issues.push(Issue::Failed(error));
    }

    /// OTF2's reports since the last drain, if any, as an issue.
    fn reported(&mut self, during: During, location: Option<u64>) {
        let reports = drain_thread_error_reports();
        if !reports.is_empty() {
            self.issues.push(Issue::Reported {
                during,
                location,
                reports,
            });
        }
    }
}

impl Reader {
    /// Reads the local definitions and every event of `locations` through one time-ordered
    /// reader into `visitor`. A location whose events cannot be read is left out (OTF2's
    /// global reader would stop at it): the archive is opened again for the others.
    pub fn read_events<V: EventVisitor + ?Sized>(
        &mut self,
        locations: &[u64],
        visitor: &mut V,
    ) -> EventsRead {
        let mut read = EventsRead {
            unreadable: locations.iter().copied().collect(),
            ..EventsRead::default()
        };
        let Some(readable) = self.open_locations(locations, &mut read) else {
            return read;
        };
        for location in &readable {
            read.unreadable.remove(location);
        }
        if !read.unreadable.is_empty() && !readable.is_empty() {
            // OTF2 keeps a broken event reader for a location whose events cannot be
            // opened: start again with a fresh reader and only the readable locations
            // (what went wrong was kept the first time).
            let fresh = match Reader::open(self.anchor()) {
                Ok(fresh) => fresh,
                Err(error) => {
                    read.failed(error);
                    return read;
                }
            };
            *self = fresh;
            let mut again = EventsRead::default();
            if self.open_locations(&readable, &mut again).is_none() {
                read.issues.extend(again.issues);
                return read;
            }
        }
        read.complete = readable.is_empty() || self.read_global_events(visitor, &mut read);
        // SAFETY: the reader is open, with its event files.
        unsafe { OTF2_Reader_CloseEvtFiles(self.raw) };
        read.reported(During::Events, None);
        read
    }

    /// Selects `locations`, opens the event files, creates each location's event reader
    /// and reads its local definitions. Returns the locations whose events can be read,
    /// or None when the event files cannot be opened.
    fn open_locations(&mut self, locations: &[u64], read: &mut EventsRead) -> Option<Vec<u64>> {
        for &location in locations {
            // SAFETY: the reader is open.
            let code = unsafe { OTF2_Reader_SelectLocation(self.raw, location) };
            if code != OTF2_SUCCESS {
                read.failed(Error::otf2(Step::SelectLocation(location), Some(code)));
            }
        }
        // SAFETY: the reader is open.
        let code = unsafe { OTF2_Reader_OpenEvtFiles(self.raw) };
        if code != OTF2_SUCCESS {
            read.failed(Error::otf2(Step::OpenEventFiles, Some(code)));
            return None;
        }
        // SAFETY: the reader is open.
        let code = unsafe { OTF2_Reader_OpenDefFiles(self.raw) };
        let def_files = code == OTF2_SUCCESS;
        if !def_files {
            read.failed(Error::otf2(Step::OpenDefinitionFiles, Some(code)));
        }
        let mut readable = Vec::new();
        for &location in locations {
            // SAFETY: the reader is open, with its event files.
            let evt_reader = unsafe { OTF2_Reader_GetEvtReader(self.raw, location) };
            if evt_reader.is_null() {
                read.failed(Error::otf2(Step::EventReader(location), None));
            } else {
                readable.push(location);
            }
            if def_files {
                // OTF2 applies the mapping tables and clock offsets to the events itself.
                // A location without a local definition file has none: OTF2 reports that
                // (kept below), it is not fatal.
                if let Err(error) = self.local_definitions(location, false) {
                    read.failed(error);
                }
            }
            read.reported(During::LocalDefinitions, Some(location));
        }
        if def_files {
            // SAFETY: the reader is open, with its definition files.
            unsafe { OTF2_Reader_CloseDefFiles(self.raw) };
        }
        Some(readable)
    }

    /// Reads every event through a global event reader; false when the read stopped early.
    fn read_global_events<V: EventVisitor + ?Sized>(
        &mut self,
        visitor: &mut V,
        read: &mut EventsRead,
    ) -> bool {
        // SAFETY: the reader is open, with an event reader for each readable location.
        let global = unsafe { OTF2_Reader_GetGlobalEvtReader(self.raw) };
        if global.is_null() {
            read.failed(Error::otf2(Step::GlobalEventReader, None));
            return false;
        }
        let mut state = EventState::new(visitor);
        let set = |c| {
            // SAFETY: `c` is the live table of `register_callbacks`.
            unsafe { set_global_callbacks::<V>(c) }
        };
        // SAFETY: the reader and `global` are open; the callbacks take an `EventState` of
        // `V`; `state` lives until the end of this function and is used only by the
        // callbacks while ReadAllGlobalEvents runs.
        let code = unsafe { register_callbacks(self.raw, global, &mut state, set) };
        let mut events = 0;
        let code = if code == OTF2_SUCCESS {
            // SAFETY: as above.
            unsafe { OTF2_Reader_ReadAllGlobalEvents(self.raw, global, &mut events) }
        } else {
            code
        };
        // SAFETY: `global` is open and not used after this.
        unsafe { OTF2_Reader_CloseGlobalEvtReader(self.raw, global) };
        read.events = events;
        let step = Step::ReadEvents { events };
        let panicked = state.panic.take();
        if let Some(message) = &panicked {
            read.failed(Error::Panic {
                step: step.clone(),
                message: message.clone(),
            });
        }
        if panicked.is_none() && code == OTF2_ERROR_INTERRUPTED_BY_CALLBACK {
            read.interrupted = true;
            return false;
        }
        if code != OTF2_SUCCESS {
            read.failed(Error::otf2(step, Some(code)));
        }
        code == OTF2_SUCCESS
    }
}
