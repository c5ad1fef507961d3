//! The ranks a part's records name: per communicator, the highest rank its sends,
//! receives and collective roots refer to, so that the merged communicator has a position
//! for every one of them even when the part of that rank is missing.

use std::collections::HashMap;
use std::path::Path;

use otf2_sys::read::{CollectiveEnd, EventContext, EventVisitor, MpiMessage};
use otf2_sys::OTF2_COLLECTIVE_ROOT_NONE;

/// Collects the highest rank named per communicator (the part's ids).
#[derive(Default)]
struct RanksNamed {
    highest: HashMap<u32, u32>,
}

impl RanksNamed {
    fn named(&mut self, comm: u32, rank: u32) {
        let highest = self.highest.entry(comm).or_insert(rank);
        *highest = (*highest).max(rank);
    }
}

impl EventVisitor for RanksNamed {
    fn wants_attributes(&self) -> bool {
        false
    }

    fn mpi_collective_end(&mut self, _: &EventContext<'_>, end: &CollectiveEnd) {
        if end.root != OTF2_COLLECTIVE_ROOT_NONE {
            self.named(end.comm, end.root);
        }
    }

    fn non_blocking_collective_complete(
        &mut self,
        _: &EventContext<'_>,
        end: &CollectiveEnd,
        _: u64,
    ) {
        if end.root != OTF2_COLLECTIVE_ROOT_NONE {
            self.named(end.comm, end.root);
        }
    }

    fn mpi_send(&mut self, _: &EventContext<'_>, message: &MpiMessage) {
        self.named(message.comm, message.peer);
    }

    fn mpi_isend(&mut self, _: &EventContext<'_>, message: &MpiMessage, _: u64) {
        self.named(message.comm, message.peer);
    }

    fn mpi_recv(&mut self, _: &EventContext<'_>, message: &MpiMessage) {
        self.named(message.comm, message.peer);
    }

    fn mpi_irecv(&mut self, _: &EventContext<'_>, message: &MpiMessage, _: u64) {
        self.named(message.comm, message.peer);
    }

    fn other(&mut self, _: &EventContext<'_>, _: &'static str) {}
}

/// The highest rank the records of `locations` (a part's communicator members, ids as in
/// the part `anchor`) name, per communicator of the part.
pub(crate) fn highest_ranks_named(
    anchor: &Path,
    locations: &[u64],
) -> Result<HashMap<u32, u32>, String> {
    let mut visitor = RanksNamed::default();
    if locations.is_empty() {
        return Ok(visitor.highest);
    }
    let reader = crate::otf2::open(anchor)?;
    reader
        .select_locations(locations)
        .map_err(crate::otf2::message)?;
    let files = reader.open_event_files().map_err(crate::otf2::message)?;
    for &location in locations {
        let events = files.location(location).map_err(crate::otf2::message)?;
        events
            .read_all(&mut visitor)
            .map_err(crate::otf2::message)?;
    }
    Ok(visitor.highest)
}
