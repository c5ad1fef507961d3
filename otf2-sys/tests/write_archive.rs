//! Writes small archives through the raw bindings and checks them with the real OTF2 tools
//! (`otf2-print`, Debian package `otf2-tools`). The tools are required: without them these
//! tests fail and say how to install them.

use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

use otf2_sys::error::{drain_thread_error_reports, print_to_stderr};
use otf2_sys::*;

/// Counts calls of the Rust flush callbacks, to show OTF2 really called them.
static PRE_FLUSH_FINAL_CALLS: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" fn pre_flush(
    _user_data: *mut c_void,
    _file_type: OTF2_FileType,
    _location: OTF2_LocationRef,
    _caller_data: *mut c_void,
    final_: bool,
) -> OTF2_FlushType {
    if final_ {
        PRE_FLUSH_FINAL_CALLS.fetch_add(1, Ordering::Relaxed);
    }
    // Without FLUSH (at least when `final_`), the events never reach the file.
    OTF2_FLUSH as OTF2_FlushType
}

unsafe extern "C" fn post_flush(
    _user_data: *mut c_void,
    _file_type: OTF2_FileType,
    _location: OTF2_LocationRef,
) -> OTF2_TimeStamp {
    // Called only after a non-final event flush, which these small archives never reach.
    0
}

/// OTF2 keeps this pointer until the archive is closed, so it must outlive the archive.
static FLUSH_CALLBACKS: OTF2_FlushCallbacks = OTF2_FlushCallbacks {
    otf2_pre_flush: Some(pre_flush),
    otf2_post_flush: Some(post_flush),
};

#[derive(Clone, Copy)]
enum Event {
    Enter(OTF2_TimeStamp),
    Leave(OTF2_TimeStamp),
}

const REGION_NAME: &str = "otf2_sys_test_region";
const LOCATION: OTF2_LocationRef = 0;

fn check(what: &str, code: OTF2_ErrorCode) {
    assert_eq!(code, OTF2_SUCCESS, "{what} returned OTF2 error code {code}");
}

fn cstring(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// Writes `<dir>/trace/traces.otf2` with one process, one thread location and one region,
/// and `events` on that location. Returns the anchor path and each event call's return code.
fn write_archive(dir: &Path, events: &[Event]) -> (PathBuf, Vec<OTF2_ErrorCode>) {
    install_error_handler(print_to_stderr);
    let archive_path = dir.join("trace");
    let path = cstring(archive_path.to_str().unwrap());
    let name = cstring("traces");
    let mut codes = Vec::new();
    // SAFETY: OTF2's write sequence on one thread, with valid
    // pointers and callbacks that outlive the archive.
    unsafe {
        let archive = OTF2_Archive_Open(
            path.as_ptr(),
            name.as_ptr(),
            OTF2_FILEMODE_WRITE as OTF2_FileMode,
            OTF2_CHUNK_SIZE_EVENTS_DEFAULT,
            OTF2_CHUNK_SIZE_DEFINITIONS_DEFAULT,
            OTF2_SUBSTRATE_POSIX as OTF2_FileSubstrate,
            OTF2_COMPRESSION_NONE as OTF2_Compression,
        );
        assert!(!archive.is_null(), "OTF2_Archive_Open failed");
        check(
            "SetFlushCallbacks",
            OTF2_Archive_SetFlushCallbacks(archive, &FLUSH_CALLBACKS, ptr::null_mut()),
        );
        check(
            "SetSerialCollectiveCallbacks",
            OTF2_Archive_SetSerialCollectiveCallbacks(archive),
        );
        check(
            "SetCreator",
            OTF2_Archive_SetCreator(archive, cstring("otf2-sys tests").as_ptr()),
        );

        // Events.
        check("OpenEvtFiles", OTF2_Archive_OpenEvtFiles(archive));
        let evt = OTF2_Archive_GetEvtWriter(archive, LOCATION);
        assert!(!evt.is_null(), "GetEvtWriter failed");
        for event in events {
            codes.push(match *event {
                Event::Enter(t) => OTF2_EvtWriter_Enter(evt, ptr::null_mut(), t, 0),
                Event::Leave(t) => OTF2_EvtWriter_Leave(evt, ptr::null_mut(), t, 0),
            });
        }
        let mut number_of_events = 0u64;
        check(
            "GetNumberOfEvents",
            OTF2_EvtWriter_GetNumberOfEvents(evt, &mut number_of_events),
        );
        check("CloseEvtWriter", OTF2_Archive_CloseEvtWriter(archive, evt));
        check("CloseEvtFiles", OTF2_Archive_CloseEvtFiles(archive));

        // An empty local definition file: readers complain on stderr without one.
        check("OpenDefFiles", OTF2_Archive_OpenDefFiles(archive));
        let def = OTF2_Archive_GetDefWriter(archive, LOCATION);
        assert!(!def.is_null(), "GetDefWriter failed");
        check("CloseDefWriter", OTF2_Archive_CloseDefWriter(archive, def));
        check("CloseDefFiles", OTF2_Archive_CloseDefFiles(archive));

        // Global definitions: dense ids, each written before it is referenced.
        let gdw = OTF2_Archive_GetGlobalDefWriter(archive);
        assert!(!gdw.is_null(), "GetGlobalDefWriter failed");
        let (first, last) = events.iter().fold((u64::MAX, 0), |(lo, hi), e| {
            let (Event::Enter(t) | Event::Leave(t)) = *e;
            (lo.min(t), hi.max(t))
        });
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
        let strings = [
            "",
            REGION_NAME,
            "localhost",
            "node",
            "process 0",
            "main thread",
        ];
        for (id, s) in strings.iter().enumerate() {
            check(
                "WriteString",
                OTF2_GlobalDefWriter_WriteString(gdw, id as OTF2_StringRef, cstring(s).as_ptr()),
            );
        }
        check(
            "WriteRegion",
            OTF2_GlobalDefWriter_WriteRegion(
                gdw,
                0,
                1,
                1,
                0,
                OTF2_REGION_ROLE_FUNCTION as OTF2_RegionRole,
                OTF2_PARADIGM_USER as OTF2_Paradigm,
                OTF2_REGION_FLAG_NONE as OTF2_RegionFlag,
                0,
                0,
                0,
            ),
        );
        check(
            "WriteSystemTreeNode",
            OTF2_GlobalDefWriter_WriteSystemTreeNode(gdw, 0, 2, 3, OTF2_UNDEFINED_SYSTEM_TREE_NODE),
        );
        check(
            "WriteLocationGroup",
            OTF2_GlobalDefWriter_WriteLocationGroup(
                gdw,
                0,
                4,
                OTF2_LOCATION_GROUP_TYPE_PROCESS as OTF2_LocationGroupType,
                0,
                OTF2_UNDEFINED_LOCATION_GROUP,
            ),
        );
        check(
            "WriteLocation",
            OTF2_GlobalDefWriter_WriteLocation(
                gdw,
                LOCATION,
                5,
                OTF2_LOCATION_TYPE_CPU_THREAD as OTF2_LocationType,
                number_of_events,
                0,
            ),
        );
        check("Close", OTF2_Archive_Close(archive));
    }
    (archive_path.join("traces.otf2"), codes)
}

fn otf2_print(args: &[&str], anchor: &Path) -> Output {
    match Command::new("otf2-print").args(args).arg(anchor).output() {
        Ok(output) => output,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => panic!(
            "otf2-print is not installed (Debian package otf2-tools), and these tests need \
             it: run `bash scripts/install-deps.sh otf2-tools` (scripts/test.sh installs \
             every package the tests need)"
        ),
        Err(err) => panic!("cannot run otf2-print: {err}"),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Lines of `otf2-print` output that start with `record` and mention `needle`.
fn records<'a>(stdout: &'a str, record: &str, needle: &str) -> Vec<&'a str> {
    stdout
        .lines()
        .filter(|line| line.starts_with(record) && line.contains(needle))
        .collect()
}

#[test]
fn minimal_archive_passes_otf2_print_werror() {
    let dir = tempfile::tempdir().unwrap();
    let (anchor, codes) = write_archive(dir.path(), &[Event::Enter(1000), Event::Leave(2000)]);
    assert_eq!(codes, [OTF2_SUCCESS, OTF2_SUCCESS]);
    assert_eq!(drain_thread_error_reports(), []);
    assert!(
        PRE_FLUSH_FINAL_CALLS.load(Ordering::Relaxed) > 0,
        "the Rust pre-flush callback was never called"
    );

    let output = otf2_print(&["-Werror", "--silent"], &anchor);
    let stderr = text(&output.stderr);
    assert!(
        output.status.success(),
        "otf2-print -Werror --silent failed ({}): {stderr}",
        output.status
    );
    assert!(
        !stderr.contains("[OTF2]"),
        "OTF2 warnings on stderr: {stderr}"
    );
}

#[test]
fn otf2_print_shows_the_enter_and_leave_events() {
    let dir = tempfile::tempdir().unwrap();
    let (anchor, codes) = write_archive(dir.path(), &[Event::Enter(1000), Event::Leave(2000)]);
    assert_eq!(codes, [OTF2_SUCCESS, OTF2_SUCCESS]);
    assert_eq!(drain_thread_error_reports(), []);

    let output = otf2_print(&[], &anchor);
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "otf2-print failed: {}{stdout}",
        text(&output.stderr)
    );
    let region = format!("\"{REGION_NAME}\"");
    let enters = records(&stdout, "ENTER", &region);
    let leaves = records(&stdout, "LEAVE", &region);
    assert_eq!(enters.len(), 1, "{stdout}");
    assert_eq!(leaves.len(), 1, "{stdout}");
    assert!(enters[0].contains(" 1000 "), "{}", enters[0]);
    assert!(leaves[0].contains(" 2000 "), "{}", leaves[0]);
}

#[test]
fn a_decreasing_timestamp_is_reported_through_the_error_handler() {
    let dir = tempfile::tempdir().unwrap();
    let events = [Event::Enter(100), Event::Leave(50), Event::Leave(150)];
    let (anchor, codes) = write_archive(dir.path(), &events);
    // OTF2 rejects the event that goes back in time, drops it, and keeps the writer usable.
    assert_eq!(
        codes,
        [OTF2_SUCCESS, OTF2_ERROR_INVALID_ARGUMENT, OTF2_SUCCESS]
    );

    let reports = drain_thread_error_reports();
    assert_eq!(reports.len(), 1, "{reports:#?}");
    let report = &reports[0];
    assert_eq!(report.code, OTF2_ERROR_INVALID_ARGUMENT);
    assert_eq!(report.code_name, "INVALID_ARGUMENT");
    assert!(!report.is_warning());
    assert!(
        report
            .message
            .contains("Passed timestamp is smaller than last written one! (50 < 100)"),
        "{report}"
    );
    assert!(otf2_sys::error::error_count() >= 1);

    // The rejected event never reaches the file.
    let output = otf2_print(&[], &anchor);
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "otf2-print failed: {}",
        text(&output.stderr)
    );
    let leaves = records(&stdout, "LEAVE", REGION_NAME);
    assert_eq!(leaves.len(), 1, "{stdout}");
    assert!(leaves[0].contains(" 150 "), "{}", leaves[0]);
}
