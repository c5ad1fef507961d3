//! The safe layer end to end: archives written with `otf2_sys::writing` are read back with
//! `otf2_sys::read`, and the definitions, local definitions, events and attributes that
//! come back are the ones written; broken anchors and panicking visitors are typed errors.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use otf2_sys::read::*;
use otf2_sys::writing::{Archive, AttributeList, IdMap};
use otf2_sys::*;

const PROCESS: u64 = 0;
const THREAD: u64 = 1;
/// The region id the events use locally; THREAD's mapping table maps it to REGION.
const LOCAL_REGION: u32 = 0;
const REGION: u32 = 1;
const ATTRIBUTE: u32 = 0;

fn strings() -> Vec<&'static str> {
    vec![
        "", "node", "process", "main", "thread", "unused", "work", "pid", "args",
    ]
}

fn clock() -> ClockProperties {
    ClockProperties {
        timer_resolution: 1_000_000_000,
        global_offset: 0,
        trace_length: 1_000,
        realtime_timestamp: 42,
    }
}

/// The global definitions written, in file order.
fn definitions() -> Vec<GlobalDefinition> {
    let mut records = vec![GlobalDefinition::ClockProperties(clock())];
    for (id, text) in strings().into_iter().enumerate() {
        records.push(GlobalDefinition::String(StringDef {
            id: id as u32,
            text: text.to_owned(),
        }));
    }
    let mpi = OTF2_PARADIGM_MPI as u8;
    records.extend([
        GlobalDefinition::Paradigm(Paradigm {
            paradigm: mpi,
            name: 3,
            class: OTF2_PARADIGM_CLASS_PROCESS as u8,
        }),
        GlobalDefinition::SystemTreeNode(SystemTreeNode {
            id: 0,
            name: 1,
            class_name: 1,
            parent: OTF2_UNDEFINED_SYSTEM_TREE_NODE,
        }),
        GlobalDefinition::SystemTreeNodeProperty(SystemTreeNodePropertyDef {
            node: 0,
            name: 1,
            value: AttributeValue::Double(1.5),
        }),
        GlobalDefinition::LocationGroup(LocationGroup {
            id: 0,
            name: 2,
            group_type: OTF2_LOCATION_GROUP_TYPE_PROCESS as u8,
            system_tree_parent: 0,
            creating_location_group: OTF2_UNDEFINED_LOCATION_GROUP,
        }),
        GlobalDefinition::Location(Location {
            id: PROCESS,
            name: 3,
            location_type: OTF2_LOCATION_TYPE_CPU_THREAD as u8,
            number_of_events: 2,
            location_group: 0,
        }),
        GlobalDefinition::Location(Location {
            id: THREAD,
            name: 4,
            location_type: OTF2_LOCATION_TYPE_CPU_THREAD as u8,
            number_of_events: 4,
            location_group: 0,
        }),
        GlobalDefinition::Region(Region {
            id: 0,
            name: 5,
            canonical_name: 5,
            description: OTF2_UNDEFINED_STRING,
            role: OTF2_REGION_ROLE_FUNCTION as u8,
            paradigm: OTF2_PARADIGM_USER as u8,
            flags: 0,
            source_file: OTF2_UNDEFINED_STRING,
            begin_line: 0,
            end_line: 0,
        }),
        GlobalDefinition::Region(Region {
            id: REGION,
            name: 6,
            canonical_name: 6,
            description: OTF2_UNDEFINED_STRING,
            role: OTF2_REGION_ROLE_FUNCTION as u8,
            paradigm: OTF2_PARADIGM_USER as u8,
            flags: 0,
            source_file: 8,
            begin_line: 10,
            end_line: 20,
        }),
        GlobalDefinition::Attribute(Attribute {
            id: ATTRIBUTE,
            name: 7,
            description: OTF2_UNDEFINED_STRING,
            attribute_type: OTF2_TYPE_INT64 as u8,
        }),
        GlobalDefinition::Group(Group {
            id: 0,
            name: 3,
            group_type: OTF2_GROUP_TYPE_COMM_LOCATIONS as u8,
            paradigm: mpi,
            flags: 0,
            members: vec![PROCESS, THREAD],
        }),
        GlobalDefinition::Group(Group {
            id: 1,
            name: 3,
            group_type: OTF2_GROUP_TYPE_COMM_GROUP as u8,
            paradigm: mpi,
            flags: 0,
            members: vec![0, 1],
        }),
        GlobalDefinition::Comm(Comm {
            id: 0,
            name: 3,
            group: 1,
            parent: OTF2_UNDEFINED_COMM,
            flags: 0,
        }),
        GlobalDefinition::Callpath(CallpathDef {
            id: 0,
            parent: OTF2_UNDEFINED_CALLPATH,
            region: REGION,
        }),
        GlobalDefinition::CartTopology(CartTopologyDef {
            id: 0,
            name: 3,
            comm: 0,
            dimensions: vec![],
        }),
        // A duplicate: kept as a record, not as the definition of string 5.
        GlobalDefinition::String(StringDef {
            id: 5,
            text: "again".to_owned(),
        }),
    ]);
    records
}

fn clock_offsets() -> Vec<ClockOffset> {
    vec![
        ClockOffset {
            time: 0,
            offset: 1000,
            standard_deviation: 0.0,
        },
        ClockOffset {
            time: 1000,
            offset: 1000,
            standard_deviation: 0.5,
        },
    ]
}

/// Writes `<dir>/trace/traces.otf2`: PROCESS with one Enter/Leave of region 0 at 10 and 20;
/// THREAD with Enter/MpiSend/MpiRecv/Leave of LOCAL_REGION at 5..8 (an INT64 attribute on
/// its Enter), a mapping table LOCAL_REGION → REGION and two clock offsets of +1000.
fn write(dir: &Path, records: &[GlobalDefinition]) -> PathBuf {
    install_error_handler(error::ignore);
    let trace = dir.join("trace");
    let archive = Archive::create(&trace, OTF2_CHUNK_SIZE_MIN, OTF2_CHUNK_SIZE_MIN).unwrap();
    archive.set_creator("otf2-sys test").unwrap();
    archive.set_machine_name("machine").unwrap();

    let files = archive.open_event_files().unwrap();
    let process = files.writer(PROCESS).unwrap();
    process.enter(None, 10, 0).unwrap();
    process.leave(None, 20, 0).unwrap();
    assert_eq!(process.number_of_events().unwrap(), 2);
    process.close().unwrap();
    let thread = files.writer(THREAD).unwrap();
    let mut attributes = AttributeList::new().unwrap();
    attributes
        .add(ATTRIBUTE, AttributeValue::Int64(-7))
        .unwrap();
    assert_eq!(attributes.len(), 1);
    thread
        .enter(Some(&mut attributes), 5, LOCAL_REGION)
        .unwrap();
    let message = MpiMessage {
        peer: 0,
        comm: 0,
        tag: 3,
        length: 64,
    };
    thread.mpi_send(None, 6, &message).unwrap();
    thread.mpi_recv(None, 7, &message).unwrap();
    thread.leave(None, 8, LOCAL_REGION).unwrap();
    drop(thread);
    files.close().unwrap();

    let files = archive.open_definition_files().unwrap();
    files.writer(PROCESS).unwrap().close().unwrap();
    let writer = files.writer(THREAD).unwrap();
    let pairs = BTreeMap::from([(u64::from(LOCAL_REGION), u64::from(REGION))]);
    let map = IdMap::from_pairs(&pairs).unwrap();
    writer
        .mapping_table(OTF2_MAPPING_REGION as u8, &map)
        .unwrap();
    for offset in clock_offsets() {
        writer.clock_offset(&offset).unwrap();
    }
    drop(writer);
    drop(files);

    let global = archive.global_def_writer().unwrap();
    for record in records {
        global.write(record).unwrap();
    }
    archive.close().unwrap();
    let reports = error::drain_thread_error_reports();
    assert!(reports.is_empty(), "{reports:?}");
    trace.join("traces.otf2")
}

#[test]
fn definitions_come_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let anchor = write(dir.path(), &definitions());
    let reader = Reader::open(&anchor).unwrap();
    assert_eq!(
        reader.chunk_sizes().unwrap(),
        (OTF2_CHUNK_SIZE_MIN, OTF2_CHUNK_SIZE_MIN)
    );
    assert_eq!(reader.number_of_locations().unwrap(), 2);
    assert_eq!(
        reader.number_of_global_definitions().unwrap(),
        definitions().len() as u64
    );
    assert_eq!(
        u32::from(reader.file_substrate().unwrap()),
        OTF2_SUBSTRATE_POSIX
    );
    assert_eq!(
        u32::from(reader.compression().unwrap()),
        OTF2_COMPRESSION_NONE
    );

    // Record by record, every kind exactly as written.
    let mut records = Vec::new();
    let unknown = reader
        .for_each_global_definition(|r| records.push(r))
        .unwrap();
    assert_eq!(unknown, 0);
    assert_eq!(records, definitions());

    // The model.
    let defs = reader.global_definitions().unwrap();
    assert_eq!(defs.records, definitions().len() as u64);
    assert_eq!(defs.clock, Some(clock()));
    assert_eq!(defs.string(5), Some("unused"));
    assert_eq!(defs.strings.len(), strings().len());
    assert_eq!(defs.strings.records(), strings().len() + 1);
    assert_eq!(
        defs.duplicates,
        [Duplicate {
            kind: "String",
            id: Some(5)
        }]
    );
    let thread = defs.locations.get(&THREAD).unwrap();
    assert_eq!((thread.name, thread.number_of_events), (4, 4));
    assert_eq!(defs.locations.keys().collect::<Vec<_>>(), [PROCESS, THREAD]);
    assert_eq!(defs.regions.get(&REGION).unwrap().source_file, 8);
    assert_eq!(defs.groups.get(&0).unwrap().members, [PROCESS, THREAD]);
    assert_eq!(defs.comms.get(&0).unwrap().group, 1);
    assert_eq!(
        defs.attributes.get(&ATTRIBUTE).unwrap().attribute_type,
        OTF2_TYPE_INT64 as u8
    );
    assert_eq!(
        defs.paradigms.get(&(OTF2_PARADIGM_MPI as u8)).unwrap().name,
        3
    );
    assert_eq!(defs.system_tree_nodes.get(&0).unwrap().class_name, 1);
    assert_eq!(defs.location_groups.get(&0).unwrap().system_tree_parent, 0);
    let others: Vec<(&str, u64)> = defs.other_kinds.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(
        others,
        [
            ("Callpath", 1),
            ("CartTopology", 1),
            ("SystemTreeNodeProperty", 1)
        ]
    );
    assert_eq!(defs.kept_records(), definitions().len() as u64 - 3);

    // Local definitions.
    reader.select_locations(&[PROCESS, THREAD]).unwrap();
    let files = reader.open_definition_files().unwrap();
    let local = files.read(THREAD).unwrap().unwrap();
    assert_eq!(local.clock_offsets, clock_offsets());
    assert_eq!(
        local.mapping_tables,
        [MappingTable {
            kind: OTF2_MAPPING_REGION as u8,
            pairs: vec![(0, 1)]
        }]
    );
    assert!(local.has_mapping_tables());
    assert_eq!(
        files.read(PROCESS).unwrap(),
        Some(LocalDefinitions::default())
    );
    drop(files);
    reader.close().unwrap();
}

/// Every event as a line, with its attributes: those decoded, then attribute 0 and the
/// absent attribute 9 as the event finds them (decoded or not).
#[derive(Default)]
struct Lines {
    lines: Vec<String>,
    attributes: bool,
    stop_after: Option<usize>,
}

impl EventVisitor for Lines {
    fn wants_attributes(&self) -> bool {
        self.attributes
    }

    fn keep_reading(&self) -> bool {
        self.stop_after.is_none_or(|n| self.lines.len() < n)
    }

    fn enter(&mut self, e: &EventContext<'_>, region: u32) {
        let line = format!(
            "{} {} {:?} Enter {region} {:?} {:?} {:?}",
            e.location,
            e.time,
            e.position,
            e.attributes,
            e.attribute(0),
            e.attribute(9)
        );
        self.lines.push(line);
    }

    fn leave(&mut self, e: &EventContext<'_>, region: u32) {
        let line = format!("{} {} {:?} Leave {region}", e.location, e.time, e.position);
        self.lines.push(line);
    }

    fn mpi_send(&mut self, e: &EventContext<'_>, m: &MpiMessage) {
        let line = format!("{} {} MpiSend {} {}", e.location, e.time, m.peer, m.tag);
        self.lines.push(line);
    }

    fn other(&mut self, e: &EventContext<'_>, record: &'static str) {
        self.lines
            .push(format!("{} {} {record}", e.location, e.time));
    }
}

#[test]
fn events_come_back_in_time_order_mapped_and_corrected() {
    let dir = tempfile::tempdir().unwrap();
    let anchor = write(dir.path(), &definitions());
    let mut reader = Reader::open(&anchor).unwrap();
    let mut lines = Lines {
        attributes: true,
        ..Lines::default()
    };
    let read = reader.read_events(&[PROCESS, THREAD], &mut lines);
    assert!(read.complete, "{read:?}");
    assert!(read.unreadable.is_empty());
    assert_eq!(read.events, 6);
    assert_eq!(read.issues, []);
    // THREAD's times are 1000 ticks later, its region is mapped; MpiRecv has no method
    // of its own here and comes as `other`.
    assert_eq!(
        lines.lines,
        [
            "0 10 None Enter 0 [] None None",
            "0 20 None Leave 0",
            "1 1005 None Enter 1 [(0, Int64(-7))] Some(Int64(-7)) None",
            "1 1006 MpiSend 0 3",
            "1 1007 MpiRecv",
            "1 1008 None Leave 1",
        ]
    );
    reader.close().unwrap();
}

#[test]
fn one_location_reads_in_file_order_with_positions() {
    let dir = tempfile::tempdir().unwrap();
    let anchor = write(dir.path(), &definitions());
    let reader = Reader::open(&anchor).unwrap();
    reader.select_locations(&[THREAD]).unwrap();
    let events = reader.open_event_files().unwrap();
    let thread = events.location(THREAD).unwrap();
    assert!(events.location(THREAD).is_err(), "one handle per location");
    // Local definitions read while the event reader is open reach it: the region is
    // mapped; the clock offsets are switched off.
    let files = reader.open_definition_files().unwrap();
    files.read(THREAD).unwrap();
    drop(files);
    thread.apply_clock_offsets(false).unwrap();
    let mut lines = Lines {
        stop_after: Some(2),
        ..Lines::default()
    };
    let read = thread.read_all(&mut lines).unwrap();
    assert_eq!(
        read,
        LocationRead {
            events: 2,
            interrupted: true
        }
    );
    // Not decoded, the attribute is still found when asked for.
    assert_eq!(
        lines.lines,
        [
            "1 5 Some(1) Enter 1 [] Some(Int64(-7)) None",
            "1 6 MpiSend 0 3"
        ]
    );
    // The read goes on where it stopped.
    lines.stop_after = None;
    let read = thread.read_all(&mut lines).unwrap();
    assert!(!read.interrupted);
    assert_eq!(lines.lines[3], "1 8 Some(4) Leave 1");
}

#[test]
fn records_written_again_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let first = write(dir.path(), &definitions());
    let reader = Reader::open(&first).unwrap();
    let mut records = Vec::new();
    reader
        .for_each_global_definition(|r| records.push(r))
        .unwrap();
    let again = tempfile::tempdir().unwrap();
    let second = write(again.path(), &records);
    let mut copied = Vec::new();
    Reader::open(&second)
        .unwrap()
        .for_each_global_definition(|r| copied.push(r))
        .unwrap();
    assert_eq!(copied, records);
}

struct Panics;

impl EventVisitor for Panics {
    fn leave(&mut self, _: &EventContext<'_>, _: u32) {
        panic!("no leaving");
    }
}

#[test]
fn a_panicking_visitor_stops_the_read_with_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let anchor = write(dir.path(), &definitions());
    let mut reader = Reader::open(&anchor).unwrap();
    let read = reader.read_events(&[PROCESS], &mut Panics);
    assert!(!read.complete);
    let Some(Issue::Failed(Error::Panic { message, .. })) = read.issues.first() else {
        panic!("{:?}", read.issues);
    };
    assert_eq!(message, "no leaving");
}

#[test]
fn a_missing_event_file_leaves_that_location_out() {
    let dir = tempfile::tempdir().unwrap();
    let anchor = write(dir.path(), &definitions());
    std::fs::remove_file(dir.path().join("trace/traces/1.evt")).unwrap();
    let mut reader = Reader::open(&anchor).unwrap();
    let mut lines = Lines::default();
    let read = reader.read_events(&[PROCESS, THREAD], &mut lines);
    assert_eq!(
        read.unreadable.iter().copied().collect::<Vec<_>>(),
        [THREAD]
    );
    assert!(read.complete);
    assert_eq!(lines.lines.len(), 2);
    assert!(
        read.issues.iter().any(|i| matches!(
            i,
            Issue::Failed(e) if *e.step() == Step::EventReader(THREAD)
        )),
        "{:?}",
        read.issues
    );
}

#[test]
fn broken_anchors_are_typed_errors() {
    install_error_handler(error::ignore);
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("traces.otf2");
    std::fs::write(&garbage, "not an anchor file\n").unwrap();
    let error = Reader::open(&garbage)
        .and_then(|r| r.global_definitions())
        .unwrap_err();
    assert!(matches!(error, Error::Otf2 { .. }), "{error:?}");
    assert!(!error.reports().is_empty(), "{error:?}");

    let missing = Reader::open(&dir.path().join("missing.otf2")).unwrap_err();
    assert_eq!(*missing.step(), Step::Open);

    // A real anchor cut in half.
    let anchor = write(dir.path(), &definitions());
    let bytes = std::fs::read(&anchor).unwrap();
    std::fs::write(&anchor, &bytes[..bytes.len() / 2]).unwrap();
    let error = Reader::open(&anchor)
        .and_then(|r| r.global_definitions())
        .unwrap_err();
    assert!(error.to_string().contains("OTF2"), "{error}");
}

/// Asks its reader for another step from inside a callback.
struct Reenters<'r> {
    reader: &'r Reader,
    answer: Option<Result<(), Error>>,
}

impl EventVisitor for Reenters<'_> {
    fn other(&mut self, _: &EventContext<'_>, _: &'static str) {
        if self.answer.is_none() {
            self.answer = Some(self.reader.select_locations(&[PROCESS]));
        }
    }
}

#[test]
fn a_callback_cannot_start_another_step_of_its_reader() {
    let dir = tempfile::tempdir().unwrap();
    let anchor = write(dir.path(), &definitions());
    let reader = Reader::open(&anchor).unwrap();
    reader.select_locations(&[PROCESS]).unwrap();
    let events = reader.open_event_files().unwrap();
    let process = events.location(PROCESS).unwrap();
    let mut visitor = Reenters {
        reader: &reader,
        answer: None,
    };
    process.read_all(&mut visitor).unwrap();
    let answer = visitor.answer.unwrap().unwrap_err();
    assert_eq!(*answer.step(), Step::Busy);
    // Once the read is over, the reader takes steps again.
    reader.select_locations(&[PROCESS]).unwrap();
}
