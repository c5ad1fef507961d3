//! `nccl-scorep validate` on small archives written here through otf2-sys's writer API:
//! one valid two-rank trace and variants with one defect each.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::ptr;

use otf2_sys::error::{drain_thread_error_reports, ignore};
use otf2_sys::*;

const BINARY: &str = env!("CARGO_BIN_EXE_nccl-scorep");

// Region ids, in the order of REGION_NAMES.
const MAIN: u32 = 0;
const ALLREDUCE: u32 = 1;
const COMPUTE: u32 = 2;
const REGION_NAMES: [&str; 3] = ["main", "ncclAllReduce", "compute"];
/// The one communicator: every location, rank = location id.
const WORLD: OTF2_CommRef = 0;

#[derive(Clone, Copy, Debug)]
enum Ev {
    Enter(u64, OTF2_RegionRef),
    Leave(u64, OTF2_RegionRef),
    CollectiveBegin(u64),
    CollectiveEnd(u64, OTF2_CommRef),
    /// time, receiver rank, tag
    Send(u64, u32, u32),
    /// time, sender rank, tag
    Recv(u64, u32, u32),
}

impl Ev {
    fn time(self) -> u64 {
        match self {
            Ev::Enter(t, _)
            | Ev::Leave(t, _)
            | Ev::CollectiveBegin(t)
            | Ev::CollectiveEnd(t, _)
            | Ev::Send(t, ..)
            | Ev::Recv(t, ..) => t,
        }
    }
}

/// What to write: the events of each location (`None`: defined, but no event file).
struct Trace {
    locations: Vec<Option<Vec<Ev>>>,
    /// Written as every Location's numberOfEvents instead of the true count.
    number_of_events: Option<u64>,
    /// Write a local definition file per location (OTF2 reports an error without one).
    local_defs: bool,
}

impl Trace {
    fn new(locations: Vec<Vec<Ev>>) -> Trace {
        Trace {
            locations: locations.into_iter().map(Some).collect(),
            number_of_events: None,
            local_defs: true,
        }
    }
}

fn check(what: &str, code: OTF2_ErrorCode) {
    assert_eq!(code, OTF2_SUCCESS, "{what} returned OTF2 error code {code}");
}

fn cstring(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// The global string table, ids dense from 0.
#[derive(Default)]
struct Strings(Vec<String>);

impl Strings {
    fn add(&mut self, s: &str) -> OTF2_StringRef {
        self.0.push(s.to_owned());
        (self.0.len() - 1) as OTF2_StringRef
    }
}

/// Location `r`'s name, as the report quotes it.
fn location_name(r: usize) -> String {
    format!("rank {r} main thread")
}

/// Writes `<dir>/trace/traces.otf2`: one process and one thread per location, an MPI
/// paradigm communicator WORLD over all of them, the regions of REGION_NAMES. Global
/// definitions are dense and each written before it is referenced. Returns the archive
/// directory.
fn write(dir: &Path, trace: &Trace) -> PathBuf {
    install_error_handler(ignore);
    let archive_dir = dir.join("trace");
    let path = cstring(archive_dir.to_str().unwrap());
    let n = trace.locations.len();
    let archive = otf2_sys::writing::create_archive(
        &path,
        OTF2_CHUNK_SIZE_EVENTS_DEFAULT,
        OTF2_CHUNK_SIZE_DEFINITIONS_DEFAULT,
    )
    .unwrap_or_else(|e| panic!("cannot create {}: {e:?}", archive_dir.display()));
    // SAFETY: the OTF2 write sequence of otf2-sys/tests/write_archive.rs on one thread, with
    // valid pointers, on the archive just opened.
    unsafe {
        // Events.
        check("OpenEvtFiles", OTF2_Archive_OpenEvtFiles(archive));
        let mut counts = vec![0u64; n];
        for (location, events) in trace.locations.iter().enumerate() {
            let Some(events) = events else { continue };
            let evt = OTF2_Archive_GetEvtWriter(archive, location as OTF2_LocationRef);
            assert!(!evt.is_null(), "GetEvtWriter failed");
            let attributes = ptr::null_mut();
            for event in events {
                let code = match *event {
                    Ev::Enter(t, region) => OTF2_EvtWriter_Enter(evt, attributes, t, region),
                    Ev::Leave(t, region) => OTF2_EvtWriter_Leave(evt, attributes, t, region),
                    Ev::CollectiveBegin(t) => OTF2_EvtWriter_MpiCollectiveBegin(evt, attributes, t),
                    Ev::CollectiveEnd(t, comm) => OTF2_EvtWriter_MpiCollectiveEnd(
                        evt,
                        attributes,
                        t,
                        OTF2_COLLECTIVE_OP_ALLREDUCE as OTF2_CollectiveOp,
                        comm,
                        OTF2_UNDEFINED_UINT32,
                        4096,
                        4096,
                    ),
                    Ev::Send(t, receiver, tag) => {
                        OTF2_EvtWriter_MpiSend(evt, attributes, t, receiver, WORLD, tag, 64)
                    }
                    Ev::Recv(t, sender, tag) => {
                        OTF2_EvtWriter_MpiRecv(evt, attributes, t, sender, WORLD, tag, 64)
                    }
                };
                check("event", code);
            }
            check(
                "GetNumberOfEvents",
                OTF2_EvtWriter_GetNumberOfEvents(evt, &mut counts[location]),
            );
            check("CloseEvtWriter", OTF2_Archive_CloseEvtWriter(archive, evt));
        }
        check("CloseEvtFiles", OTF2_Archive_CloseEvtFiles(archive));

        if trace.local_defs {
            check("OpenDefFiles", OTF2_Archive_OpenDefFiles(archive));
            for location in 0..n {
                let def = OTF2_Archive_GetDefWriter(archive, location as OTF2_LocationRef);
                assert!(!def.is_null(), "GetDefWriter failed");
                check("CloseDefWriter", OTF2_Archive_CloseDefWriter(archive, def));
            }
            check("CloseDefFiles", OTF2_Archive_CloseDefFiles(archive));
        }

        // Global definitions: the strings first, then each definition after what it names.
        let gdw = OTF2_Archive_GetGlobalDefWriter(archive);
        assert!(!gdw.is_null(), "GetGlobalDefWriter failed");
        let times = trace.locations.iter().flatten().flatten().map(|e| e.time());
        let first = times.clone().min().unwrap_or(0);
        let last = times.max().unwrap_or(0);
        check(
            "WriteClockProperties",
            OTF2_GlobalDefWriter_WriteClockProperties(
                gdw,
                1_000_000_000,
                first,
                last - first + 1,
                OTF2_UNDEFINED_TIMESTAMP,
            ),
        );
        let mut strings = Strings::default();
        strings.add("");
        let regions: Vec<_> = REGION_NAMES.iter().map(|r| strings.add(r)).collect();
        let node = strings.add("node0");
        let node_class = strings.add("node");
        let processes: Vec<_> = (0..n)
            .map(|r| strings.add(&format!("process {r}")))
            .collect();
        let threads: Vec<_> = (0..n).map(|r| strings.add(&location_name(r))).collect();
        let mpi = strings.add("MPI");
        let all_ranks = strings.add("all ranks");
        let world = strings.add("world");
        for (id, s) in strings.0.iter().enumerate() {
            check(
                "WriteString",
                OTF2_GlobalDefWriter_WriteString(gdw, id as OTF2_StringRef, cstring(s).as_ptr()),
            );
        }
        check(
            "WriteParadigm",
            OTF2_GlobalDefWriter_WriteParadigm(
                gdw,
                OTF2_PARADIGM_MPI as OTF2_Paradigm,
                mpi,
                OTF2_PARADIGM_CLASS_PROCESS as OTF2_ParadigmClass,
            ),
        );
        check(
            "WriteSystemTreeNode",
            OTF2_GlobalDefWriter_WriteSystemTreeNode(
                gdw,
                0,
                node,
                node_class,
                OTF2_UNDEFINED_SYSTEM_TREE_NODE,
            ),
        );
        for (r, &name) in processes.iter().enumerate() {
            check(
                "WriteLocationGroup",
                OTF2_GlobalDefWriter_WriteLocationGroup(
                    gdw,
                    r as OTF2_LocationGroupRef,
                    name,
                    OTF2_LOCATION_GROUP_TYPE_PROCESS as OTF2_LocationGroupType,
                    0,
                    OTF2_UNDEFINED_LOCATION_GROUP,
                ),
            );
        }
        for (r, &name) in threads.iter().enumerate() {
            check(
                "WriteLocation",
                OTF2_GlobalDefWriter_WriteLocation(
                    gdw,
                    r as OTF2_LocationRef,
                    name,
                    OTF2_LOCATION_TYPE_CPU_THREAD as OTF2_LocationType,
                    trace.number_of_events.unwrap_or(counts[r]),
                    r as OTF2_LocationGroupRef,
                ),
            );
        }
        for (id, &name) in regions.iter().enumerate() {
            let role = if id as u32 == ALLREDUCE {
                OTF2_REGION_ROLE_COLL_ALL2ALL
            } else {
                OTF2_REGION_ROLE_FUNCTION
            };
            check(
                "WriteRegion",
                OTF2_GlobalDefWriter_WriteRegion(
                    gdw,
                    id as OTF2_RegionRef,
                    name,
                    name,
                    0,
                    role as OTF2_RegionRole,
                    OTF2_PARADIGM_USER as OTF2_Paradigm,
                    OTF2_REGION_FLAG_NONE as OTF2_RegionFlag,
                    0,
                    0,
                    0,
                ),
            );
        }
        let members: Vec<u64> = (0..n as u64).collect();
        for (id, group_type) in [
            (0, OTF2_GROUP_TYPE_COMM_LOCATIONS),
            (1, OTF2_GROUP_TYPE_COMM_GROUP),
        ] {
            check(
                "WriteGroup",
                OTF2_GlobalDefWriter_WriteGroup(
                    gdw,
                    id,
                    if id == 0 { all_ranks } else { world },
                    group_type as OTF2_GroupType,
                    OTF2_PARADIGM_MPI as OTF2_Paradigm,
                    OTF2_GROUP_FLAG_NONE as OTF2_GroupFlag,
                    n as u32,
                    members.as_ptr(),
                ),
            );
        }
        check(
            "WriteComm",
            OTF2_GlobalDefWriter_WriteComm(
                gdw,
                WORLD,
                world,
                1,
                OTF2_UNDEFINED_COMM,
                OTF2_COMM_FLAG_NONE as OTF2_CommFlag,
            ),
        );
        check("Close", OTF2_Archive_Close(archive));
    }
    assert_eq!(
        drain_thread_error_reports(),
        [],
        "OTF2 reported errors while writing"
    );
    archive_dir
}

/// Rank `r` of a well-formed two-rank trace: nested regions, one allreduce on WORLD, rank 0
/// sends to rank 1.
fn rank(r: u32) -> Vec<Ev> {
    let t = 1000 + u64::from(r);
    let message = if r == 0 {
        Ev::Send(t + 60, 1, 7)
    } else {
        Ev::Recv(t + 60, 0, 7)
    };
    vec![
        Ev::Enter(t, MAIN),
        Ev::Enter(t + 10, COMPUTE),
        Ev::Leave(t + 20, COMPUTE),
        Ev::Enter(t + 30, ALLREDUCE),
        Ev::CollectiveBegin(t + 31),
        Ev::CollectiveEnd(t + 50, WORLD),
        Ev::Leave(t + 51, ALLREDUCE),
        message,
        Ev::Leave(t + 100, MAIN),
    ]
}

fn validate(archive: &Path, extra: &[&str]) -> Output {
    Command::new(BINARY)
        .arg("validate")
        .arg(archive)
        .args(extra)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {BINARY}: {error}"))
}

fn stdout_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The report's finding lines (indented by four spaces), trimmed.
fn finding_lines(report: &str) -> Vec<&str> {
    report
        .lines()
        .filter(|line| line.starts_with("    "))
        .map(str::trim)
        .collect()
}

#[test]
fn a_valid_two_rank_archive_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let archive = write(dir.path(), &Trace::new(vec![rank(0), rank(1)]));
    let output = validate(&archive, &[]);
    let report = stdout_of(&output);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{report}{}",
        stderr_of(&output)
    );
    assert!(report.starts_with("archive: "), "{report}");
    assert!(report.contains("traces.otf2"), "{report}");
    assert!(
        report.contains("definitions: 2 locations, 2 location groups, 1 system tree nodes, 3 regions, 2 groups, 1 comms"),
        "{report}"
    );
    assert!(
        report.contains(
            "events: 18 (Enter 6, Leave 6, MpiCollectiveBegin 2, MpiCollectiveEnd 2, \
             MpiRecv 1, MpiSend 1)"
        ),
        "{report}"
    );
    assert!(!report.contains("errors ("), "{report}");
    assert!(!report.contains("warnings ("), "{report}");
    assert_eq!(report.lines().last(), Some("valid"), "{report}");
    // The anchor file itself is accepted too.
    let output = validate(&archive.join("traces.otf2"), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout_of(&output));
}

#[test]
fn json_summarises_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let archive = write(dir.path(), &Trace::new(vec![rank(0), rank(1)]));
    let output = validate(&archive, &["--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["valid"], true, "{summary:#}");
    assert_eq!(summary["errors"], 0);
    assert_eq!(summary["warnings"], 0);
    assert_eq!(summary["counts"]["locations"], 2);
    assert_eq!(summary["counts"]["comms"], 1);
    assert_eq!(summary["counts"]["events"], 18);
    assert_eq!(summary["counts"]["events_by_type"]["MpiCollectiveEnd"], 2);
    assert_eq!(summary["findings"], serde_json::json!([]));
}

#[test]
fn an_enter_without_leave_is_an_error_naming_region_and_location() {
    let dir = tempfile::tempdir().unwrap();
    let mut rank1 = rank(1);
    assert!(matches!(rank1.pop(), Some(Ev::Leave(_, MAIN))));
    let archive = write(dir.path(), &Trace::new(vec![rank(0), rank1]));
    let output = validate(&archive, &[]);
    let report = stdout_of(&output);
    assert_eq!(output.status.code(), Some(1), "{report}");
    assert!(report.contains("\nerrors (1):\n  nesting — "), "{report}");
    assert_eq!(
        finding_lines(&report),
        [format!(
            "location 1 \"{}\" at t=1001: region 0 \"main\" is entered at t=1001 and never left",
            location_name(1)
        )],
        "{report}"
    );
    assert_eq!(
        report.lines().last(),
        Some("INVALID: 1 errors, 0 warnings"),
        "{report}"
    );
}

#[test]
fn a_leave_of_the_wrong_region_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    // Rank 0 leaves "main" while "compute" is still open, then "compute" with nothing open.
    let rank0 = vec![
        Ev::Enter(1000, MAIN),
        Ev::Enter(1010, COMPUTE),
        Ev::Leave(1020, MAIN),
        Ev::Leave(1030, COMPUTE),
    ];
    let rank1 = vec![Ev::Enter(1000, MAIN), Ev::Leave(1030, MAIN)];
    let archive = write(dir.path(), &Trace::new(vec![rank0, rank1]));
    let output = validate(&archive, &[]);
    let report = stdout_of(&output);
    assert_eq!(output.status.code(), Some(1), "{report}");
    let name = location_name(0);
    assert_eq!(
        finding_lines(&report),
        [
            format!(
                "location 0 \"{name}\" at t=1020: Leave of region 0 \"main\", but the innermost \
                 open region is region 2 \"compute\" (entered at t=1010)"
            ),
            format!(
                "location 0 \"{name}\" at t=1030: Leave of region 2 \"compute\" while no region \
                 is open"
            ),
        ],
        "{report}"
    );
    assert!(
        report.ends_with("INVALID: 2 errors, 0 warnings\n"),
        "{report}"
    );
}

#[test]
fn unequal_collective_counts_are_only_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    // Rank 0 runs a second allreduce that rank 1 never does.
    let mut rank0 = rank(0);
    let end = rank0.pop().unwrap();
    rank0.extend([
        Ev::Enter(1070, ALLREDUCE),
        Ev::CollectiveBegin(1071),
        Ev::CollectiveEnd(1080, WORLD),
        Ev::Leave(1081, ALLREDUCE),
        end,
    ]);
    let archive = write(dir.path(), &Trace::new(vec![rank0, rank(1)]));
    let output = validate(&archive, &[]);
    let report = stdout_of(&output);
    assert_eq!(output.status.code(), Some(0), "{report}");
    assert!(!report.contains("errors ("), "{report}");
    assert!(
        report.contains("\nwarnings (1):\n  collective-counts — "),
        "{report}"
    );
    assert_eq!(
        finding_lines(&report),
        [format!(
            "comm 0 \"world\": members have different numbers of collective records: 1 of 2 \
             have 2; location 1 \"{}\" has 1",
            location_name(1)
        )],
        "{report}"
    );
    assert_eq!(report.lines().last(), Some("valid"), "{report}");
}

#[test]
fn an_undefined_communicator_and_an_unmatched_send_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut rank0 = rank(0);
    // The allreduce names comm 5, which is not defined.
    rank0[5] = Ev::CollectiveEnd(1050, 5);
    let mut rank1 = rank(1);
    // Rank 1 does not receive.
    rank1.remove(7);
    let archive = write(dir.path(), &Trace::new(vec![rank0, rank1]));
    let output = validate(&archive, &[]);
    let report = stdout_of(&output);
    assert_eq!(output.status.code(), Some(1), "{report}");
    let lines = finding_lines(&report);
    let name0 = location_name(0);
    let name1 = location_name(1);
    assert!(
        lines.contains(
            &format!(
                "location 0 \"{name0}\" at t=1050: MpiCollectiveEnd on comm 5, which is not \
                 defined"
            )
            .as_str()
        ),
        "{report}"
    );
    assert!(
        lines.contains(
            &format!(
                "comm 0 \"world\": rank 0 (location 0 \"{name0}\") → rank 1 (location 1 \
                 \"{name1}\"), tag 7: 1 sends but 0 receives"
            )
            .as_str()
        ),
        "{report}"
    );
    assert!(
        report.ends_with("INVALID: 1 errors, 2 warnings\n"),
        "{report}"
    );
}

#[test]
fn event_counts_and_missing_event_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut trace = Trace::new(vec![rank(0), rank(1), vec![]]);
    // Location 2 is defined, but nothing was ever written for it.
    trace.locations[2] = None;
    trace.number_of_events = Some(5);
    let archive = write(dir.path(), &trace);
    let output = validate(&archive, &[]);
    let report = stdout_of(&output);
    assert_eq!(output.status.code(), Some(1), "{report}");
    let lines = finding_lines(&report);
    for r in 0..2 {
        let count = format!(
            "location {r} \"{}\": its Location definition says 5 events, 9 were read",
            location_name(r)
        );
        assert!(lines.contains(&count.as_str()), "{report}");
    }
    let missing = format!(
        "location 2 \"{}\": its events cannot be read",
        location_name(2)
    );
    assert!(lines.iter().any(|l| l.starts_with(&missing)), "{report}");
    // The other locations were still read (OTF2's global reader alone would stop at the
    // missing file), and the unreadable location is not counted on top.
    assert!(report.contains("events: 18 ("), "{report}");
    let uncounted = format!(
        "location 2 \"{}\": its Location definition",
        location_name(2)
    );
    assert!(!report.contains(&uncounted), "{report}");
}

#[test]
fn otf2_reports_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut trace = Trace::new(vec![rank(0), rank(1)]);
    trace.local_defs = false;
    let archive = write(dir.path(), &trace);
    let output = validate(&archive, &[]);
    let report = stdout_of(&output);
    assert_eq!(output.status.code(), Some(1), "{report}");
    // A missing local definition file is only an OTF2 error report (otf2-print exits 0):
    // one finding per location, OTF2's chain of messages on one line.
    assert!(report.contains("\nerrors (2):\n  otf2 — "), "{report}");
    for r in 0..2 {
        let line = format!(
            "location {r} \"{}\": OTF2 error while reading the local definitions of this \
             location: POSIX: ",
            location_name(r)
        );
        assert!(
            finding_lines(&report).iter().any(|l| l.starts_with(&line)),
            "{report}"
        );
    }
    assert!(report.contains("traces/0.def'"), "{report}");
    // The events are read all the same.
    assert!(report.contains("events: 18 ("), "{report}");
    // Nothing reaches stderr: OTF2's own printing is replaced.
    assert_eq!(stderr_of(&output), "");
}

#[test]
fn a_path_without_an_archive_cannot_be_opened() {
    let dir = tempfile::tempdir().unwrap();
    let output = validate(dir.path(), &[]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stdout_of(&output), "");
    let stderr = stderr_of(&output);
    assert!(
        stderr.starts_with("nccl-scorep validate: no OTF2 archive in "),
        "{stderr}"
    );
    assert!(stderr.contains("traces.otf2"), "{stderr}");

    let output = validate(&dir.path().join("missing"), &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr_of(&output).contains("missing"),
        "{}",
        stderr_of(&output)
    );

    let not_otf2 = dir.path().join("traces.otf2");
    std::fs::write(&not_otf2, "not an anchor file\n").unwrap();
    let output = validate(&not_otf2, &[]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout_of(&output));
    let stderr = stderr_of(&output);
    assert!(stderr.contains("cannot open"), "{stderr}");
}

/// A valid trace of `n` ranks (n even): rank(r)'s events, each even rank sending to the odd
/// rank after it.
fn ranks(n: u32) -> Vec<Vec<Ev>> {
    (0..n)
        .map(|r| {
            let mut events = rank(r);
            let t = 1060 + u64::from(r);
            events[7] = if r % 2 == 0 {
                Ev::Send(t, r + 1, 7)
            } else {
                Ev::Recv(t, r - 1, 7)
            };
            events
        })
        .collect()
}

#[test]
fn the_report_is_the_same_whatever_the_batch_of_locations() {
    let dir = tempfile::tempdir().unwrap();
    let mut locations = ranks(8);
    // Location 1 never leaves "main"; location 2 leaves a region twice; location 3 does
    // not receive what location 2 sends; location 4 runs a second allreduce; location 5
    // names comm 5; location 6 has no event file (location 7 is read after it).
    assert!(matches!(locations[1].pop(), Some(Ev::Leave(_, MAIN))));
    locations[2].insert(3, Ev::Leave(1023, COMPUTE));
    locations[3].remove(7);
    let end = locations[4].pop().unwrap();
    locations[4].extend([
        Ev::Enter(1070, ALLREDUCE),
        Ev::CollectiveBegin(1071),
        Ev::CollectiveEnd(1080, WORLD),
        Ev::Leave(1081, ALLREDUCE),
        end,
    ]);
    locations[5][5] = Ev::CollectiveEnd(1055, 5);
    let mut broken = Trace::new(locations);
    broken.locations[6] = None;
    let valid = Trace::new(ranks(8));
    for (name, trace, status) in [("broken", &broken, 1), ("valid", &valid, 0)] {
        let archive = write(&dir.path().join(name), trace);
        let all = validate(&archive, &["--batch", "8"]);
        let all_json = validate(&archive, &["--batch", "8", "--json"]);
        assert_eq!(all.status.code(), Some(status), "{}", stdout_of(&all));
        for batch in ["1", "2", "3", "100"] {
            let output = validate(&archive, &["--batch", batch]);
            assert_eq!(
                stdout_of(&output),
                stdout_of(&all),
                "{name}, --batch {batch}"
            );
            assert_eq!(output.status.code(), Some(status));
            let json = validate(&archive, &["--batch", batch, "--json"]);
            assert_eq!(stdout_of(&json), stdout_of(&all_json), "{name}, {batch}");
        }
    }
    // What the broken trace's report says, every batch alike.
    let output = validate(&dir.path().join("broken/trace"), &["--batch", "1"]);
    let report = stdout_of(&output);
    let lines = finding_lines(&report);
    let expected = [
        format!(
            "location 1 \"{}\" at t=1001: region 0 \"main\" is entered at t=1001 and never left",
            location_name(1)
        ),
        format!(
            "location 2 \"{}\" at t=1023: Leave of region 2 \"compute\", but the innermost \
             open region is region 0 \"main\" (entered at t=1002)",
            location_name(2)
        ),
        format!(
            "comm 0 \"world\": rank 2 (location 2 \"{}\") → rank 3 (location 3 \"{}\"), tag \
             7: 1 sends but 0 receives",
            location_name(2),
            location_name(3)
        ),
        format!(
            "location 5 \"{}\" at t=1055: MpiCollectiveEnd on comm 5, which is not defined",
            location_name(5)
        ),
        format!(
            "comm 0 \"world\": members have different numbers of collective records: 5 of 8 \
             have 1; location 4 \"{}\" has 2, location 5 \"{}\" has 0, location 6 \"{}\" has 0",
            location_name(4),
            location_name(5),
            location_name(6)
        ),
        // Location 7, read after the missing file, is read all the same.
        format!(
            "comm 0 \"world\": rank 6 (location 6 \"{}\") → rank 7 (location 7 \"{}\"), tag \
             7: 0 sends but 1 receives",
            location_name(6),
            location_name(7)
        ),
    ];
    for line in &expected {
        assert!(lines.contains(&line.as_str()), "{line}\n{report}");
    }
    let missing = format!(
        "location 6 \"{}\": its events cannot be read",
        location_name(6)
    );
    assert!(lines.iter().any(|l| l.starts_with(&missing)), "{report}");
    assert!(report.contains("events: 66 ("), "{report}");
    assert!(
        report.ends_with("INVALID: 4 errors, 3 warnings\n"),
        "{report}"
    );
}

#[test]
fn hundreds_of_locations_validate_with_64_open_files() {
    let dir = tempfile::tempdir().unwrap();
    let archive = write(dir.path(), &Trace::new(ranks(300)));
    let limited = |command: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -n 64 && exec {command}"))
            .output()
            .unwrap()
    };
    // One location's files are open at a time, whatever the batch.
    for batch in ["1024", "7"] {
        let output = limited(&format!(
            "'{BINARY}' validate '{}' --batch {batch}",
            archive.display()
        ));
        let report = stdout_of(&output);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{report}{}",
            stderr_of(&output)
        );
        assert!(
            report.contains("definitions: 300 locations, 300 location groups"),
            "{report}"
        );
        assert!(report.contains("events: 2700 ("), "{report}");
        assert_eq!(report.lines().last(), Some("valid"), "{report}");
    }
    // OTF2's global reader, which opens every location's events at once, cannot.
    let output = limited(&format!("otf2-print '{}/traces.otf2'", archive.display()));
    if output.status.code() == Some(127) {
        println!("skipped: otf2-print is not installed");
        return;
    }
    assert_ne!(output.status.code(), Some(0), "{}", stdout_of(&output));
    assert!(
        stderr_of(&output).contains("Could not open file"),
        "{}",
        stderr_of(&output)
    );
}
