//! What the checks ask of the global definitions (`otf2_sys::read::GlobalDefs`, the model
//! `summary` and the merges read too): where a definition is among the records (forward
//! references), names and labels for messages, and counts for the report.

use std::collections::BTreeMap;
use std::fmt;

use otf2_sys::read::{Duplicate, GlobalDefs, Group};
use otf2_sys::OTF2_GROUP_TYPE_COMM_LOCATIONS;

use super::{location_label, Counts};

/// Lookups on the definitions, as the checks and their messages use them.
pub(crate) trait Lookup {
    /// The position of the definition `kind id` among the records, if it is defined.
    fn seq_of(&self, kind: &str, id: u64) -> Option<u64>;
    fn location_name(&self, location: u64) -> Option<String>;
    fn location_label(&self, location: u64) -> String;
    /// `region 3 "compute"`, `region 7 (not defined)`.
    fn region_label(&self, region: u32) -> String;
    fn comm_label(&self, comm: u32) -> String;
    /// `Region 3 "compute"`: a definition as the subject of a message.
    fn owner(&self, kind: &str, id: impl fmt::Display, name: u32) -> String;
    fn paradigm_label(&self, paradigm: u8) -> String;
    fn counts(&self) -> Counts;
    /// The COMM_LOCATIONS group a COMM_GROUP of `paradigm` numbers its ranks in.
    fn comm_locations(&self, paradigm: u8) -> Option<(u32, &Group)>;
}

impl Lookup for GlobalDefs {
    fn seq_of(&self, kind: &str, id: u64) -> Option<u64> {
        let Ok(id32) = u32::try_from(id) else {
            return match kind {
                "Location" => self.locations.def(&id).map(|d| d.seq),
                _ => None,
            };
        };
        match kind {
            "String" => self.strings.def(&id32).map(|d| d.seq),
            "SystemTreeNode" => self.system_tree_nodes.def(&id32).map(|d| d.seq),
            "LocationGroup" => self.location_groups.def(&id32).map(|d| d.seq),
            "Location" => self.locations.def(&id).map(|d| d.seq),
            "Region" => self.regions.def(&id32).map(|d| d.seq),
            "Group" => self.groups.def(&id32).map(|d| d.seq),
            "Comm" => self.comms.def(&id32).map(|d| d.seq),
            _ => unreachable!("no definitions of kind {kind}"),
        }
    }

    fn location_name(&self, location: u64) -> Option<String> {
        let location = self.locations.get(&location)?;
        Some(self.string(location.name).unwrap_or("").to_owned())
    }

    fn location_label(&self, location: u64) -> String {
        location_label(location, self.location_name(location).as_deref())
    }

    fn region_label(&self, region: u32) -> String {
        match self.regions.get(&region) {
            Some(r) => format!("region {region} {:?}", self.string(r.name).unwrap_or("")),
            None => format!("region {region} (not defined)"),
        }
    }

    fn comm_label(&self, comm: u32) -> String {
        match self.comms.get(&comm) {
            Some(c) => format!("comm {comm} {:?}", self.string(c.name).unwrap_or("")),
            None => format!("comm {comm} (not defined)"),
        }
    }

    fn owner(&self, kind: &str, id: impl fmt::Display, name: u32) -> String {
        match self.string(name) {
            Some(name) => format!("{kind} {id} {name:?}"),
            None => format!("{kind} {id}"),
        }
    }

    fn paradigm_label(&self, paradigm: u8) -> String {
        match self
            .paradigms
            .get(&paradigm)
            .and_then(|p| self.string(p.name))
        {
            Some(name) => format!("{paradigm} ({name})"),
            None => paradigm.to_string(),
        }
    }

    fn counts(&self) -> Counts {
        Counts {
            locations: self.locations.len(),
            location_groups: self.location_groups.len(),
            system_tree_nodes: self.system_tree_nodes.len(),
            regions: self.regions.len(),
            groups: self.groups.len(),
            comms: self.comms.len(),
            strings: self.strings.len(),
            attributes: self.attributes.len(),
            paradigms: self.paradigms.len(),
            events: 0,
            events_by_type: BTreeMap::new(),
        }
    }

    fn comm_locations(&self, paradigm: u8) -> Option<(u32, &Group)> {
        self.groups
            .by_id()
            .find(|(_, g)| {
                g.value.group_type == OTF2_GROUP_TYPE_COMM_LOCATIONS as u8
                    && g.value.paradigm == paradigm
            })
            .map(|(id, g)| (id, &g.value))
    }
}

/// "Region 3 is defined more than once (the first definition is used)".
pub(crate) fn duplicate_message(duplicate: &Duplicate) -> String {
    match duplicate.id {
        Some(id) => format!(
            "{} {id} is defined more than once (the first definition is used)",
            duplicate.kind
        ),
        None => format!(
            "{} is defined more than once (the first definition is used)",
            duplicate.kind
        ),
    }
}
