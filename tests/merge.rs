//! `nccl-scorep merge`: a 2-process nccl-sim job with our plugin writes one trace part per
//! process and communicator lifetime; the merge joins them into one archive that the OTF2
//! tools accept, with every communicator's ranks, collectives and messages together.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../nccl-sim/tests/otf2_tools/mod.rs"]
mod otf2_tools;
use otf2_tools::{assert_otf2_print_clean, dump};

/// Runs a 2-process job (scenarios `single` then `p2p`, so each process writes two parts)
/// with its output in `<dir>/run`, which it returns.
fn run_job(dir: &Path) -> PathBuf {
    let out = dir.join("run");
    let status = nccl_sim::job_for_tests(&out)
        .args(["--scenario", "single", "--scenario", "p2p"])
        .args(["--iterations", "3", "--speedup", "20", "--procs", "2"])
        .env("NCCL_SIM_SHM_DIR", dir)
        .status()
        .unwrap();
    assert!(status.success());
    out
}

fn merge(run_dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .arg("merge")
        .arg(run_dir)
        .output()
        .unwrap()
}

fn parts(run_dir: &Path) -> Vec<PathBuf> {
    let mut parts: Vec<PathBuf> = std::fs::read_dir(run_dir.join("parts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    parts.sort();
    parts
}

/// Communicator name → its members' location names, in rank order.
fn comms(dump: &Value) -> BTreeMap<String, Vec<String>> {
    dump["comms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let members = c["members"].as_array().unwrap();
            let names = members.iter().map(|m| m.as_str().unwrap().to_owned());
            (c["name"].as_str().unwrap().to_owned(), names.collect())
        })
        .collect()
}

#[test]
fn merge_joins_the_parts_of_a_two_process_job() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_job(dir.path());
    assert_eq!(parts(&run).len(), 4, "two parts per process");

    let output = merge(&run);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("merged 4 parts"), "{stdout}");
    assert!(stdout.contains("2 communicators"), "{stdout}");
    let anchor = run.join("traces.otf2");
    assert_otf2_print_clean(&anchor);
    let trace = dump(&anchor);

    // One communicator per NCCL communicator, every rank a member, in rank order.
    let comms = comms(&trace);
    assert_eq!(comms.len(), 2, "{comms:#?}");
    let mut rank_of: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (name, members) in &comms {
        let prefix = name.split(" (0x").next().unwrap();
        let expected: Vec<String> = (0..2).map(|r| format!("{prefix} rank {r} ops")).collect();
        assert_eq!(members, &expected, "{name}");
        for (rank, member) in members.iter().enumerate() {
            rank_of.insert((name.clone(), member.clone()), rank);
        }
    }

    // Locations keep their ids; the parts of each process are in one process group.
    let locations = trace["locations"].as_array().unwrap();
    let processes: BTreeMap<&str, ()> = locations
        .iter()
        .filter(|l| l["group_type"] == "PROCESS")
        .map(|l| (l["group"].as_str().unwrap(), ()))
        .collect();
    assert_eq!(processes.len(), 2, "{processes:?}");

    // The locations of a part share one local definition file (its mapping tables and
    // clock offsets are the same for all of them), linked; each part has its own.
    let mut definition_files = BTreeSet::new();
    for part in parts(&run) {
        let inodes: BTreeSet<u64> = std::fs::read_dir(part.join("traces"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter_map(|name| name.strip_suffix(".evt").map(str::to_owned))
            .map(|id| {
                let merged = run.join("traces").join(format!("{id}.def"));
                std::fs::metadata(&merged).unwrap().ino()
            })
            .collect();
        assert_eq!(inodes.len(), 1, "{}: {inodes:?}", part.display());
        definition_files.extend(inodes);
    }
    assert_eq!(definition_files.len(), 4, "one file per part");
    let process_of: BTreeMap<&str, u64> = locations
        .iter()
        .map(|l| {
            (
                l["name"].as_str().unwrap(),
                l["id"].as_u64().unwrap() & 0xffff_ffff,
            )
        })
        .collect();

    // The same number of collective records on every member of a communicator.
    let mut collectives: BTreeMap<(String, String), usize> = BTreeMap::new();
    for c in trace["collectives"].as_array().unwrap() {
        let key = (
            c["comm"].as_str().unwrap().to_owned(),
            c["loc"].as_str().unwrap().to_owned(),
        );
        assert!(rank_of.contains_key(&key), "{key:?} is a member");
        *collectives.entry(key).or_default() += 1;
    }
    let single: Vec<usize> = collectives
        .iter()
        .filter(|((comm, _), _)| comm.starts_with("single"))
        .map(|(_, &n)| n)
        .collect();
    assert_eq!(single, [3, 3], "{collectives:?}");

    // Sends and receives pair up across processes: per (comm, sender, receiver) as many
    // sends as receives, between ranks of different processes.
    let mut sends: BTreeMap<(String, usize, usize), usize> = BTreeMap::new();
    let mut recvs: BTreeMap<(String, usize, usize), usize> = BTreeMap::new();
    for m in trace["messages"].as_array().unwrap() {
        let comm = m["comm"].as_str().unwrap().to_owned();
        let loc = m["loc"].as_str().unwrap().to_owned();
        let me = rank_of[&(comm.clone(), loc.clone())];
        let peer = m["peer"].as_u64().unwrap() as usize;
        let peer_loc = &comms[&comm][peer];
        assert_ne!(process_of[loc.as_str()], process_of[peer_loc.as_str()]);
        if m["kind"] == "send" {
            *sends.entry((comm, me, peer)).or_default() += 1;
        } else {
            *recvs.entry((comm, peer, me)).or_default() += 1;
        }
    }
    assert!(!sends.is_empty());
    assert_eq!(sends, recvs, "every send has its receive");

    // A second merge replaces the first, and leaves nothing behind.
    let again = merge(&run);
    assert!(again.status.success());
    assert_otf2_print_clean(&anchor);
    let leftovers: Vec<_> = std::fs::read_dir(&run)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_part_without_anchor_is_reported_incomplete_and_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_job(dir.path());
    // A process killed before its trace was finished, and before it saved a snapshot of
    // its definitions, leaves event files without definitions and anchor.
    let killed = parts(&run).remove(0);
    std::fs::remove_file(killed.join("traces.otf2")).unwrap();
    std::fs::remove_file(killed.join("traces.def")).unwrap();
    let name = killed.file_name().unwrap().to_string_lossy().into_owned();

    let output = merge(&run);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("merged 3 parts"), "{stdout}");
    assert!(
        stdout.contains("skipped 1 incomplete part") && stdout.contains(&name),
        "{stdout}"
    );
    let anchor = run.join("traces.otf2");
    assert_otf2_print_clean(&anchor);
    let comms = comms(&dump(&anchor));
    let sizes: Vec<usize> = comms.values().map(Vec::len).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 4, "{comms:#?}");
    // The missing rank keeps its number: an empty location stands for it.
    let empty: Vec<&String> = comms
        .values()
        .flatten()
        .filter(|m| m.ends_with(" rank 0: no trace part"))
        .collect();
    assert_eq!(empty.len(), 1, "one rank is missing: {comms:#?}");
    assert!(stdout.contains("1 empty location stands for"), "{stdout}");
}

#[test]
fn merge_without_parts_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = merge(dir.path());
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("nccl-scorep merge:") && stderr.contains("parts"),
        "{stderr}"
    );
}

/// A finished part lists each event file's length and events as its process wrote them
/// (what the merge checks the files against without reading them), and its locations'
/// local definition files, which hold the same clock offsets, are links to one file (which
/// the merge reads once). A part whose files are copies, as an older plugin wrote them,
/// merges to the same trace.
#[test]
fn a_part_lists_its_event_files_and_links_its_equal_local_definitions() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_job(dir.path());
    for part in parts(&run) {
        let traces = part.join("traces");
        let list = std::fs::read_to_string(part.join("event-files.txt")).unwrap();
        let listed = nccl_scorep_common::event_files::parse(&list).unwrap();
        let locations = dump(&part.join("traces.otf2"))["locations"].clone();
        let locations = locations.as_array().unwrap();
        assert_eq!(listed.len(), locations.len(), "{}", part.display());
        let mut inodes = BTreeSet::new();
        for location in locations {
            let id = location["id"].as_u64().unwrap();
            let file = &listed[&id];
            let evt = std::fs::metadata(traces.join(format!("{id}.evt"))).unwrap();
            assert_eq!(file.bytes, evt.len(), "{id}");
            assert_eq!(file.events, location["events"].as_u64().unwrap(), "{id}");
            inodes.insert(
                std::fs::metadata(traces.join(format!("{id}.def")))
                    .unwrap()
                    .ino(),
            );
        }
        assert!(locations.len() > 1);
        assert_eq!(inodes.len(), 1, "{}: {inodes:?}", part.display());
    }
    let merged = |run: &Path| {
        let output = merge(run);
        assert!(output.status.success(), "{output:?}");
        assert_otf2_print_clean(&run.join("traces.otf2"));
        dump(&run.join("traces.otf2"))
    };
    let linked = merged(&run);

    // The same part with a copy of the file for each location.
    for part in parts(&run) {
        for entry in std::fs::read_dir(part.join("traces")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|x| x == "def") {
                let bytes = std::fs::read(&path).unwrap();
                std::fs::remove_file(&path).unwrap();
                std::fs::write(&path, bytes).unwrap();
            }
        }
    }
    assert_eq!(merged(&run), linked);
}
