//! [`GlobalDefWriter`]: the global definitions of an [`Archive`], written from the same
//! records the reader hands out.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::marker::PhantomData;

use crate::read::records::{write_group, write_string};
use crate::read::{
    Attribute, ClockProperties, Comm, GlobalDefinition, Group, Location, LocationGroup, Paradigm,
    Region, SystemTreeNode,
};
use crate::writing::archive::check;
use crate::writing::Archive;
use crate::*;

/// The global definition writer of an open [`Archive`] (this process is the archive's
/// only writer). OTF2 closes it with the archive.
pub struct GlobalDefWriter<'a> {
    raw: *mut OTF2_GlobalDefWriter,
    archive: PhantomData<&'a Archive>,
}

impl Archive {
    /// The global definition writer.
    pub fn global_def_writer(&self) -> Result<GlobalDefWriter<'_>, Error> {
        // SAFETY: the archive is open; this process is its only writer.
        let raw = unsafe { OTF2_Archive_GetGlobalDefWriter(self.raw) };
        if raw.is_null() {
            return Err(Error::otf2(Step::GlobalDefinitionWriter, None));
        }
        Ok(GlobalDefWriter {
            raw,
            archive: PhantomData,
        })
    }
}

impl GlobalDefWriter<'_> {
    /// Writes `record` as it was read (ids and all).
    pub fn write(&self, record: &GlobalDefinition) -> Result<(), Error> {
        let step = Step::WriteDefinition(record.kind());
        // SAFETY: the writer is open while its archive is (borrowed).
        let code = unsafe { record.write_raw(self.raw) }.map_err(Error::plain)?;
        check(code, step)
    }

    pub fn clock_properties(&self, clock: &ClockProperties) -> Result<(), Error> {
        self.write(&GlobalDefinition::ClockProperties(*clock))
    }

    pub fn string(&self, id: u32, text: &str) -> Result<(), Error> {
        // SAFETY: the writer is open while its archive is (borrowed).
        let code = unsafe { write_string(self.raw, id, text) };
        check(code, Step::WriteDefinition("String"))
    }

    pub fn paradigm(&self, paradigm: &Paradigm) -> Result<(), Error> {
        self.write(&GlobalDefinition::Paradigm(*paradigm))
    }

    pub fn system_tree_node(&self, node: &SystemTreeNode) -> Result<(), Error> {
        self.write(&GlobalDefinition::SystemTreeNode(*node))
    }

    pub fn location_group(&self, group: &LocationGroup) -> Result<(), Error> {
        self.write(&GlobalDefinition::LocationGroup(*group))
    }

    pub fn location(&self, location: &Location) -> Result<(), Error> {
        self.write(&GlobalDefinition::Location(*location))
    }

    pub fn region(&self, region: &Region) -> Result<(), Error> {
        self.write(&GlobalDefinition::Region(*region))
    }

    pub fn group(&self, group: &Group) -> Result<(), Error> {
        // SAFETY: the writer is open while its archive is (borrowed).
        let code = unsafe { write_group(self.raw, group) }.map_err(Error::plain)?;
        check(code, Step::WriteDefinition("Group"))
    }

    pub fn comm(&self, comm: &Comm) -> Result<(), Error> {
        self.write(&GlobalDefinition::Comm(*comm))
    }

    pub fn attribute(&self, attribute: &Attribute) -> Result<(), Error> {
        self.write(&GlobalDefinition::Attribute(*attribute))
    }
}
