//! The plain Rust model of an archive's definitions: the global definitions every reader
//! here uses (ids as written, so a merge can map them), and a location's local definitions.

use std::collections::BTreeMap;

use crate::read::records::GlobalDefinition;
use crate::{OTF2_MappingType, OTF2_Type};

/// The ClockProperties record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClockProperties {
    /// Ticks per second.
    pub timer_resolution: u64,
    /// The first tick of the trace.
    pub global_offset: u64,
    pub trace_length: u64,
    /// Realtime (ns since the epoch) of `global_offset`, or `OTF2_UNDEFINED_TIMESTAMP`.
    pub realtime_timestamp: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Paradigm {
    pub paradigm: u8,
    pub name: u32,
    pub class: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemTreeNode {
    pub id: u32,
    pub name: u32,
    pub class_name: u32,
    pub parent: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocationGroup {
    pub id: u32,
    pub name: u32,
    pub group_type: u8,
    pub system_tree_parent: u32,
    pub creating_location_group: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    pub id: u64,
    pub name: u32,
    pub location_type: u8,
    pub number_of_events: u64,
    pub location_group: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub id: u32,
    pub name: u32,
    pub canonical_name: u32,
    pub description: u32,
    pub role: u8,
    pub paradigm: u8,
    pub flags: u32,
    pub source_file: u32,
    pub begin_line: u32,
    pub end_line: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub id: u32,
    pub name: u32,
    pub group_type: u8,
    pub paradigm: u8,
    pub flags: u32,
    pub members: Vec<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Comm {
    pub id: u32,
    pub name: u32,
    pub group: u32,
    pub parent: u32,
    pub flags: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attribute {
    pub id: u32,
    pub name: u32,
    pub description: u32,
    pub attribute_type: OTF2_Type,
}

/// One definition and its position among the global definition records (from 1), which
/// tells forward references.
#[derive(Clone, Debug, PartialEq)]
pub struct Def<T> {
    pub seq: u64,
    pub value: T,
}

/// The definitions of one kind: every record in file order, and the first definition of
/// each id (a later one with the same id is a duplicate, see [`GlobalDefs::duplicates`]).
#[derive(Clone, Debug)]
pub struct DefTable<K, T> {
    records: Vec<Def<T>>,
    first: BTreeMap<K, usize>,
}

impl<K, T> Default for DefTable<K, T> {
    fn default() -> Self {
        DefTable {
            records: Vec::new(),
            first: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Copy, T> DefTable<K, T> {
    /// Adds a record; answers whether its id was new.
    pub fn insert(&mut self, id: K, seq: u64, value: T) -> bool {
        let index = self.records.len();
        self.records.push(Def { seq, value });
        let new = !self.first.contains_key(&id);
        if new {
            self.first.insert(id, index);
        }
        new
    }

    /// The first definition of `id`.
    pub fn get(&self, id: &K) -> Option<&T> {
        self.def(id).map(|d| &d.value)
    }

    /// The first definition of `id`, with its position.
    pub fn def(&self, id: &K) -> Option<&Def<T>> {
        self.first.get(id).map(|&i| &self.records[i])
    }

    pub fn contains_key(&self, id: &K) -> bool {
        self.first.contains_key(id)
    }

    /// How many ids are defined.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    /// The defined ids, ascending.
    pub fn keys(&self) -> impl Iterator<Item = K> + '_ {
        self.first.keys().copied()
    }

    /// The first definition of each id, by ascending id.
    pub fn by_id(&self) -> impl Iterator<Item = (K, &Def<T>)> + '_ {
        self.first.iter().map(|(&id, &i)| (id, &self.records[i]))
    }

    /// Every record in file order, duplicates included.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.records.iter().map(|d| &d.value)
    }

    /// Every record in file order, to change in place (ids stay as they were indexed).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> + '_ {
        self.records.iter_mut().map(|d| &mut d.value)
    }

    /// How many records were read, duplicates included.
    pub fn records(&self) -> usize {
        self.records.len()
    }
}

/// A global definition whose id was defined before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Duplicate {
    /// The record's OTF2 name ("Region", "ClockProperties").
    pub kind: &'static str,
    /// Its id (None for ClockProperties).
    pub id: Option<u64>,
}

/// The global definitions of an archive, with ids as written.
#[derive(Clone, Debug, Default)]
pub struct GlobalDefs {
    /// Records read, every kind together (not counting those of unknown kinds).
    pub records: u64,
    /// The first ClockProperties.
    pub clock: Option<ClockProperties>,
    pub strings: DefTable<u32, String>,
    pub paradigms: DefTable<u8, Paradigm>,
    pub system_tree_nodes: DefTable<u32, SystemTreeNode>,
    pub location_groups: DefTable<u32, LocationGroup>,
    pub locations: DefTable<u64, Location>,
    pub regions: DefTable<u32, Region>,
    pub groups: DefTable<u32, Group>,
    pub comms: DefTable<u32, Comm>,
    pub attributes: DefTable<u32, Attribute>,
    /// Records of the kinds this model does not keep, by OTF2 record name.
    pub other_kinds: BTreeMap<&'static str, u64>,
    /// Records of kinds this OTF2 version does not know (a newer OTF2 wrote them).
    pub unknown: u64,
    /// Definitions of an id already defined, in file order.
    pub duplicates: Vec<Duplicate>,
}

impl GlobalDefs {
    /// Adds the next record of the file.
    pub fn add(&mut self, record: &GlobalDefinition) {
        self.records += 1;
        let seq = self.records;
        let duplicates = &mut self.duplicates;
        let mut keep = |new: bool, kind: &'static str, id: u64| {
            if !new {
                duplicates.push(Duplicate { kind, id: Some(id) });
            }
        };
        match record {
            GlobalDefinition::ClockProperties(clock) => {
                if self.clock.is_some() {
                    duplicates.push(Duplicate {
                        kind: "ClockProperties",
                        id: None,
                    });
                } else {
                    self.clock = Some(*clock);
                }
            }
            GlobalDefinition::String(s) => {
                let new = self.strings.insert(s.id, seq, s.text.clone());
                keep(new, "String", u64::from(s.id));
            }
            GlobalDefinition::Paradigm(p) => {
                let new = self.paradigms.insert(p.paradigm, seq, *p);
                keep(new, "Paradigm", u64::from(p.paradigm));
            }
            GlobalDefinition::SystemTreeNode(n) => {
                let new = self.system_tree_nodes.insert(n.id, seq, *n);
                keep(new, "SystemTreeNode", u64::from(n.id));
            }
            GlobalDefinition::LocationGroup(g) => {
                let new = self.location_groups.insert(g.id, seq, *g);
                keep(new, "LocationGroup", u64::from(g.id));
            }
            GlobalDefinition::Location(l) => {
                let new = self.locations.insert(l.id, seq, *l);
                keep(new, "Location", l.id);
            }
            GlobalDefinition::Region(r) => {
                let new = self.regions.insert(r.id, seq, *r);
                keep(new, "Region", u64::from(r.id));
            }
            GlobalDefinition::Group(g) => {
                let new = self.groups.insert(g.id, seq, g.clone());
                keep(new, "Group", u64::from(g.id));
            }
            GlobalDefinition::Comm(c) => {
                let new = self.comms.insert(c.id, seq, *c);
                keep(new, "Comm", u64::from(c.id));
            }
            GlobalDefinition::Attribute(a) => {
                let new = self.attributes.insert(a.id, seq, *a);
                keep(new, "Attribute", u64::from(a.id));
            }
            other => *self.other_kinds.entry(other.kind()).or_default() += 1,
        }
    }

    /// Records of the kinds this model keeps.
    pub fn kept_records(&self) -> u64 {
        self.records - self.other_kinds.values().sum::<u64>()
    }

    /// The text of string `id`, if defined.
    pub fn string(&self, id: u32) -> Option<&str> {
        self.strings.get(&id).map(String::as_str)
    }
}

/// One ClockOffset record of a location: at `time`, its clock was `offset` ticks off the
/// global clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClockOffset {
    pub time: u64,
    pub offset: i64,
    pub standard_deviation: f64,
}

/// One MappingTable record: the location's ids of one kind → global ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MappingTable {
    /// `OTF2_MAPPING_*`.
    pub kind: OTF2_MappingType,
    /// (local, global) pairs, in the order OTF2 traverses them.
    pub pairs: Vec<(u64, u64)>,
}

/// A location's local definitions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LocalDefinitions {
    pub clock_offsets: Vec<ClockOffset>,
    pub mapping_tables: Vec<MappingTable>,
}

impl LocalDefinitions {
    /// Whether its ids are mapped (it belongs to a merged archive).
    pub fn has_mapping_tables(&self) -> bool {
        !self.mapping_tables.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::records::{CallpathDef, StringDef};

    #[test]
    fn tables_keep_the_first_definition_and_every_record() {
        let mut defs = GlobalDefs::default();
        for (id, text) in [(1, "a"), (0, "b"), (1, "c")] {
            defs.add(&GlobalDefinition::String(StringDef {
                id,
                text: text.into(),
            }));
        }
        defs.add(&GlobalDefinition::Callpath(CallpathDef {
            id: 0,
            parent: u32::MAX,
            region: 0,
        }));
        assert_eq!(defs.string(1), Some("a"));
        assert_eq!(defs.strings.def(&0).map(|d| d.seq), Some(2));
        assert_eq!(defs.strings.len(), 2);
        assert_eq!(defs.strings.records(), 3);
        let texts: Vec<&String> = defs.strings.iter().collect();
        assert_eq!(texts, ["a", "b", "c"]);
        let ids: Vec<u32> = defs.strings.by_id().map(|(id, _)| id).collect();
        assert_eq!(ids, [0, 1]);
        assert_eq!(
            defs.duplicates,
            [Duplicate {
                kind: "String",
                id: Some(1)
            }]
        );
        assert_eq!(defs.records, 4);
        assert_eq!(defs.kept_records(), 3);
        assert_eq!(defs.other_kinds.get("Callpath"), Some(&1));
    }
}
