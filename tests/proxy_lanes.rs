//! Proxy lanes: a 4-process PXN job on 4 channels, with proxy steps, keeps the proxy
//! operations of each communicator rank on a few shared lanes, never more than
//! `NCCL_SCOREP_PROXY_LANES`; beyond the bound intervals are squeezed (started late, never
//! inside another operation), counted and warned about, and the trace still nests. The
//! locations are defined by process, then rank, then kind. The merged trace passes
//! `nccl-scorep validate` and `otf2-print -Werror`.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[path = "../nccl-sim/tests/otf2_tools/mod.rs"]
mod otf2_tools;
use otf2_tools::{assert_otf2_print_clean, dump};
mod validate_json;
use validate_json::assert_validates;

const PROCESSES: usize = 4;
const CHANNELS: usize = 4;

/// Runs the job (a ring AllReduce, then point-to-point rounds, each on its communicator)
/// with `NCCL_SCOREP_PROXY_LANES` set to `lanes` when given; returns the run directory,
/// merged at the job's end, and the job's stderr.
fn run_job(dir: &Path, lanes: Option<&str>) -> (PathBuf, String) {
    let out = dir.join("run");
    let mut command = nccl_sim::job_for_tests(&out);
    command
        .args(["--scenario", "single", "--scenario", "p2p"])
        .args(["--iterations", "4", "--speedup", "10", "--pxn"])
        .args(["--procs", &PROCESSES.to_string()])
        .args(["--channels", &CHANNELS.to_string()])
        .env("NCCL_SCOREP_EVENTS", "default,steps")
        .env("NCCL_SCOREP_TOOL", env!("CARGO_BIN_EXE_nccl-scorep"))
        .env("NCCL_SIM_SHM_DIR", dir);
    if let Some(lanes) = lanes {
        command.env("NCCL_SCOREP_PROXY_LANES", lanes);
    }
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    assert!(out.join("traces.otf2").exists(), "merged at the job's end");
    (out, stderr)
}

/// Location name → its lanes' count, for every proxy owner (`… proxy lane N`).
fn proxy_lanes(trace: &Value) -> BTreeMap<String, usize> {
    let mut owners = BTreeMap::new();
    for location in trace["locations"].as_array().unwrap() {
        let name = location["name"].as_str().unwrap();
        if let Some((owner, lane)) = name.rsplit_once(" proxy lane ") {
            assert!(lane.parse::<usize>().is_ok(), "{name}");
            *owners.entry(owner.to_owned()).or_default() += 1;
        }
    }
    owners
}

/// What a location is, in the definitions' order within its process: its section
/// (threads 0, communicator ranks 1, PXN lanes 2), and for a rank's location its rank
/// (`<comm> rank <r>`), its kind (ops 0, channel 1, proxy lane 2) and its number.
fn place(name: &str) -> (u8, &str, u8, u64) {
    let thread = ["application thread ", "proxy thread ", "NCCL thread "]
        .iter()
        .any(|role| name.starts_with(role));
    if thread {
        return (0, "", 0, 0);
    }
    if name.starts_with("PXN for pid ") {
        return (2, "", 0, 0);
    }
    let number = |n: &str| n.parse::<u64>().unwrap_or_else(|_| panic!("{name}"));
    if let Some(rank) = name.strip_suffix(" ops") {
        (1, rank, 0, 0)
    } else if let Some((rank, channel)) = name.rsplit_once(" channel ") {
        (1, rank, 1, number(channel))
    } else if let Some((rank, lane)) = name.rsplit_once(" proxy lane ") {
        (1, rank, 2, number(lane))
    } else {
        panic!("a location of no known kind: {name}")
    }
}

/// The locations are listed by process (launcher rank), then the threads, the
/// communicator ranks (each one's ops stream, channels and proxy lanes together, in that
/// order, numbers in order), then the PXN lanes.
fn assert_readable_order(trace: &Value) {
    let locations: Vec<(u64, &str)> = trace["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["id"].as_u64().unwrap() & 0xffff_ffff,
                l["name"].as_str().unwrap(),
            )
        })
        .collect();
    let processes: Vec<u64> = locations.iter().map(|l| l.0).collect();
    let mut sorted = processes.clone();
    sorted.sort();
    assert_eq!(processes, sorted, "by process");
    sorted.dedup();
    assert_eq!(sorted, [0, 1, 2, 3]);
    for process in sorted {
        let places: Vec<(u8, &str, u8, u64)> = locations
            .iter()
            .filter(|l| l.0 == process)
            .map(|l| place(l.1))
            .collect();
        let mut ranks_done: Vec<&str> = Vec::new();
        for pair in places.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            assert!(a.0 <= b.0, "process {process}: {a:?} before {b:?}");
            if a.0 == 1 && b.0 == 1 {
                if a.1 == b.1 {
                    assert!(
                        (a.2, a.3) < (b.2, b.3),
                        "process {process}: {a:?} before {b:?}"
                    );
                } else {
                    ranks_done.push(a.1);
                    assert!(!ranks_done.contains(&b.1), "{} split: {places:?}", b.1);
                }
            }
        }
    }
}

/// The most intervals written outside any other (proxy operations, and steps not in their
/// operation) that overlap at one time on the locations whose names start with `prefix`.
fn peak_overlap(trace: &Value, prefix: &str) -> usize {
    let mut edges: Vec<(u64, i32)> = Vec::new();
    for interval in trace["intervals"].as_array().unwrap() {
        let loc = interval["loc"].as_str().unwrap();
        if loc.starts_with(prefix) && interval["depth"] == 0 {
            let (start, end) = (interval["start"].as_u64(), interval["end"].as_u64());
            let (Some(start), Some(end)) = (start, end) else {
                panic!("{interval}")
            };
            // An interval that ends when another starts leaves its lane to it.
            edges.push((start, 1));
            edges.push((end, -1));
        }
    }
    edges.sort_by_key(|&(time, change)| (time, change));
    let (mut now, mut peak) = (0i32, 0i32);
    for (_, change) in edges {
        now += change;
        peak = peak.max(now);
    }
    peak as usize
}

/// Proxy owner → the connections (direction, channel, peer) of its operations.
fn connections(trace: &Value) -> BTreeMap<String, usize> {
    let mut seen: BTreeMap<String, std::collections::BTreeSet<(String, u64, i64)>> =
        BTreeMap::new();
    for interval in trace["intervals"].as_array().unwrap() {
        let region = interval["region"].as_str().unwrap();
        if !matches!(region, "proxy send" | "proxy recv") {
            continue;
        }
        let loc = interval["loc"].as_str().unwrap();
        let owner = loc.rsplit_once(" proxy lane ").expect("on a proxy lane").0;
        let attrs = &interval["attrs"];
        let (Some(channel), Some(peer)) =
            (attrs["nccl.channel"].as_u64(), attrs["nccl.peer"].as_i64())
        else {
            panic!("a proxy operation without channel or peer: {interval}")
        };
        seen.entry(owner.to_owned())
            .or_default()
            .insert((region.to_owned(), channel, peer));
    }
    seen.into_iter()
        .map(|(owner, c)| (owner, c.len()))
        .collect()
}

#[test]
fn proxy_operations_share_a_few_lanes_per_rank_in_a_readable_order() {
    let dir = tempfile::tempdir().unwrap();
    let (run, stderr) = run_job(dir.path(), None);
    let anchor = run.join("traces.otf2");
    assert_validates(&anchor, false);
    assert_otf2_print_clean(&anchor);
    let trace = dump(&anchor);
    let lanes = proxy_lanes(&trace);
    // Per process and communicator: its own rank's lanes (receives), and the lanes of the
    // previous process's rank, whose sends it progresses (PXN).
    assert_eq!(lanes.len(), 2 * 2 * PROCESSES, "{lanes:#?}");
    assert!(lanes.values().all(|&n| n <= 16), "{lanes:#?}");
    assert!(!stderr.contains("squeezed"), "{stderr}");
    // No more lanes than the intervals need: as many as the most operations (and steps
    // outside their operation) that are in progress at one time. One timeline per
    // connection took a location per channel, peer and direction in use, and more for its
    // own overlaps, whether or not the other connections were busy at the time.
    for (owner, &count) in &lanes {
        let peak = peak_overlap(&trace, &format!("{owner} proxy lane "));
        assert_eq!(count, peak, "{owner}");
    }
    let connections = connections(&trace);
    assert!(
        connections.values().any(|&c| c >= CHANNELS),
        "{connections:#?}"
    );
    assert_readable_order(&trace);
    let locations = trace["locations"].as_array().unwrap();
    let lane_names: Vec<&str> = locations
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .filter(|n| n.starts_with("single rank 0 proxy lane "))
        .collect();
    let expected: Vec<String> = (1..=lane_names.len())
        .map(|n| format!("single rank 0 proxy lane {n}"))
        .collect();
    assert_eq!(lane_names, expected);
}

#[test]
fn beyond_the_bound_proxy_intervals_are_squeezed_and_the_trace_still_nests() {
    let dir = tempfile::tempdir().unwrap();
    let (run, stderr) = run_job(dir.path(), Some("1"));
    let anchor = run.join("traces.otf2");
    // Squeezed intervals are shortened to nest: the trace stays valid.
    assert_validates(&anchor, true);
    assert_otf2_print_clean(&anchor);
    let trace = dump(&anchor);
    let lanes = proxy_lanes(&trace);
    assert_eq!(lanes.len(), 2 * 2 * PROCESSES, "{lanes:#?}");
    assert!(lanes.values().all(|&n| n == 1), "{lanes:#?}");
    // Every proxy operation is still there, and none is drawn inside another one.
    let ops: Vec<&Value> = trace["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| matches!(i["region"].as_str(), Some("proxy send" | "proxy recv")))
        .collect();
    for op in &ops {
        assert_eq!(op["depth"], 0, "{op}");
    }
    let ops = ops.len();
    let reference_dir = dir.path().join("reference");
    std::fs::create_dir(&reference_dir).unwrap();
    let (reference_run, _) = run_job(&reference_dir, None);
    let reference = dump(&reference_run.join("traces.otf2"));
    let reference_ops = reference["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| matches!(i["region"].as_str(), Some("proxy send" | "proxy recv")))
        .count();
    assert_eq!(ops, reference_ops);
    assert!(
        stderr.contains("proxy lanes of their communicator rank busy and were squeezed"),
        "{stderr}"
    );
    assert!(stderr.contains("NCCL_SCOREP_PROXY_LANES"), "{stderr}");
}
