//! Reading archives without `unsafe`: every OTF2 call and callback of the readers here
//! (`validate`, `summary`, the merges) is in this module.
//!
//! - [`Reader::open`] opens an archive from its anchor file; [`Reader::chunk_sizes`] and
//!   the other getters read the anchor's properties.
//! - [`Reader::global_definitions`] reads the global definitions into one plain model,
//!   [`GlobalDefs`], with the ids as written (a merge builds its mapping tables from
//!   them): strings, paradigms, system tree nodes, location groups, locations (with their
//!   event counts), regions, groups, communicators, attributes and the clock properties,
//!   per kind a [`DefTable`] of every record in file order and the first definition of
//!   each id. [`Reader::for_each_global_definition`] hands out every record of every kind
//!   as a [`GlobalDefinition`] instead, which [`crate::writing::GlobalDefWriter::write`]
//!   writes again unchanged.
//! - [`Reader::open_definition_files`] then [`DefinitionFiles::read`]: a location's local
//!   definitions ([`LocalDefinitions`]: clock offsets, mapping tables).
//! - Events go to an [`EventVisitor`], a method per record kind with attribute lists
//!   decoded to [`AttributeValue`]s: [`Reader::read_events`] reads a set of locations in
//!   time order; [`Reader::open_event_files`] then [`EventFiles::location`] and
//!   [`LocationEvents::read_all`] read one location in file order.
//!
//! Failures are [`crate::Error`]s that carry OTF2's own reports. OTF2 calls the readers'
//! callbacks from C: each catches a panic there, stops the read and turns it into
//! [`crate::Error::Panic`]. A callback that calls back into the reader it runs under gets
//! [`crate::Step::Busy`].

mod all_events;
mod events;
mod location_events;
mod model;
mod reader;
pub(crate) mod records;
mod values;

pub use all_events::{During, EventsRead, Issue};
pub use events::{CollectiveEnd, EventContext, EventVisitor, MpiMessage};
pub use location_events::{EventFiles, LocationEvents, LocationRead};
pub use model::{
    Attribute, ClockOffset, ClockProperties, Comm, Def, DefTable, Duplicate, GlobalDefs, Group,
    LocalDefinitions, Location, LocationGroup, MappingTable, Paradigm, Region, SystemTreeNode,
};
pub use reader::{DefinitionFiles, Reader};
pub use records::*;
pub use values::AttributeValue;
