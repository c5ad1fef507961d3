//! `nccl-scorep export --format chrome` on a 4-rank nccl-sim job under mpirun with
//! collectives, point-to-point messages and PXN: the JSON checked against Chrome's
//! trace-event format (fields, nesting, flows, metadata) and against the OTF2 trace as the
//! `otf2` Python reader gives it (every interval with its times, the collectives per rank,
//! the messages and PXN links), with and without --window, and cut by --max-events.

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

#[path = "../nccl-sim/tests/otf2_tools/mod.rs"]
mod otf2_tools;

const TOOL: &str = env!("CARGO_BIN_EXE_nccl-scorep");

/// The demo's job (scripts/demo.sh), smaller: groups of collectives, send/recv rounds and
/// PXN on 4 ranks; its run directory, merged by its last process. Run once for all tests.
fn job() -> &'static Path {
    static JOB: OnceLock<PathBuf> = OnceLock::new();
    JOB.get_or_init(|| {
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        // The jobs of earlier runs whose test process is gone.
        for entry in std::fs::read_dir(tmp).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("export-job-") {
                if !Path::new("/proc").join(pid).exists() {
                    drop(std::fs::remove_dir_all(entry.path()));
                }
            }
        }
        let out = tmp.join(format!("export-job-{}", std::process::id()));
        drop(std::fs::remove_dir_all(&out));
        let output = Command::new("mpirun")
            .args(["-np", "4", "--oversubscribe", "--bind-to", "none"])
            .args(["-x", "NCCL_SCOREP_OUTPUT_DIR", "-x", "NCCL_SCOREP_EVENTS"])
            .args(["-x", "NCCL_SCOREP_TOOL"])
            .arg(nccl_sim::binary_for_tests())
            .args(["run", "--scenario", "group", "--scenario", "p2p"])
            .args(["--iterations", "6", "--sizes", "64K,1M"])
            .args(["--late-rank", "2", "--late-us", "300", "--pxn"])
            .arg("--plugin")
            .arg(nccl_sim::our_plugin_for_tests())
            .env("NCCL_SCOREP_OUTPUT_DIR", &out)
            .env("NCCL_SCOREP_TOOL", TOOL)
            .env("NCCL_SCOREP_EVENTS", "default,steps")
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .output()
            .expect("mpirun (Debian package openmpi-bin; scripts/test.sh installs it)");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(out.join("traces.otf2").is_file(), "the job was not merged");
        otf2_tools::assert_otf2_print_clean(&out.join("traces.otf2"));
        out
    })
}

/// The job's trace as the `otf2` Python reader gives it.
fn trace() -> &'static Value {
    static TRACE: OnceLock<Value> = OnceLock::new();
    TRACE.get_or_init(|| otf2_tools::dump(&job().join("traces.otf2")))
}

fn export(args: &[&str], name: &str) -> (Output, Value) {
    let target = job().join(name);
    let output = Command::new(TOOL)
        .args(["export", "--format", "chrome"])
        .arg(job())
        .arg("-o")
        .arg(&target)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: Value = serde_json::from_slice(&std::fs::read(&target).unwrap()).unwrap();
    (output, json)
}

/// Microseconds as written (three decimals) to whole nanoseconds.
fn ns(ts: &Value) -> i64 {
    (ts.as_f64().expect("a number") * 1000.0).round() as i64
}

/// One slice of the Chrome trace.
#[derive(Clone, Debug, PartialEq)]
struct Slice {
    name: String,
    start: i64,
    end: i64,
    depth: usize,
    args: Value,
}

/// A Chrome process and thread.
type Track = (u64, u64);

/// A slice by its thread's name and its place in that thread's sorted slices.
type SliceRef = (String, usize);

/// What the format check found: slices per thread name, flows with the slices they bind to.
struct Chrome {
    slices: BTreeMap<String, Vec<Slice>>,
    /// (cat, from, to).
    flows: Vec<(String, SliceRef, SliceRef)>,
    other: Value,
}

/// A "B" waiting for its "E": name, time, args.
type Open = (String, i64, Value);

/// One end of a flow: phase, cat, time, thread.
type FlowEnd = (String, String, i64, Track);

/// Checks `doc` against the trace-event format and returns its slices and flows.
fn check_format(doc: &Value) -> Chrome {
    assert_eq!(doc["displayTimeUnit"], "ns");
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    let mut process_names: HashMap<u64, String> = HashMap::new();
    let mut thread_names: HashMap<Track, String> = HashMap::new();
    let mut open: HashMap<Track, Vec<Open>> = HashMap::new();
    let mut last_ts: HashMap<Track, i64> = HashMap::new();
    let mut slices: HashMap<Track, Vec<Slice>> = HashMap::new();
    let mut flow_ends: BTreeMap<u64, Vec<FlowEnd>> = BTreeMap::new();
    for event in events {
        let ph = event["ph"].as_str().expect("ph");
        assert!(event["name"].is_string(), "no name: {event}");
        assert!(event["ts"].is_number(), "no ts: {event}");
        let pid = event["pid"].as_u64().expect("pid");
        let tid = event["tid"].as_u64().expect("tid");
        let name = event["name"].as_str().unwrap().to_owned();
        let ts = ns(&event["ts"]);
        let track = (pid, tid);
        match ph {
            "M" => {
                let value = event["args"]["name"].as_str().map(str::to_owned);
                match name.as_str() {
                    "process_name" => drop(process_names.insert(pid, value.unwrap())),
                    "thread_name" => drop(thread_names.insert(track, value.unwrap())),
                    "process_sort_index" | "thread_sort_index" => {
                        assert!(event["args"]["sort_index"].is_u64(), "{event}")
                    }
                    other => panic!("unexpected metadata {other}"),
                }
            }
            "B" | "E" => {
                let last = last_ts.entry(track).or_insert(i64::MIN);
                assert!(ts >= *last, "time goes back on {track:?} at {event}");
                *last = ts;
                let stack = open.entry(track).or_default();
                if ph == "B" {
                    assert!(event["args"].is_object(), "{event}");
                    stack.push((name, ts, event["args"].clone()));
                } else {
                    let (begun, start, args) = stack.pop().expect("an E without its B");
                    assert_eq!(begun, name, "E does not close the innermost B on {track:?}");
                    slices.entry(track).or_default().push(Slice {
                        name,
                        start,
                        end: ts,
                        depth: stack.len(),
                        args,
                    });
                }
            }
            "s" | "f" => {
                let cat = event["cat"].as_str().expect("a flow's cat").to_owned();
                let id = event["id"].as_u64().expect("a flow's id");
                if ph == "f" {
                    assert_eq!(event["bp"], "e", "{event}");
                }
                flow_ends
                    .entry(id)
                    .or_default()
                    .push((ph.to_owned(), cat, ts, track));
            }
            other => panic!("unexpected phase {other}: {event}"),
        }
    }
    for (track, stack) in &open {
        assert!(stack.is_empty(), "{track:?} has slices never ended");
    }
    // Metadata names every process and thread used.
    let used: Vec<Track> = slices
        .keys()
        .copied()
        .chain(flow_ends.values().flatten().map(|end| end.3))
        .collect();
    for track in &used {
        assert!(
            process_names.contains_key(&track.0),
            "pid {} unnamed",
            track.0
        );
        assert!(thread_names.contains_key(track), "{track:?} unnamed");
    }
    for list in slices.values_mut() {
        list.sort_by_key(order);
    }
    // Flows: exactly one "s" and one "f" per id, the same cat, the end not before the
    // start, each end inside a slice of its thread (the innermost one it binds to).
    let bound = |track: Track, ts: i64| -> usize {
        let list = &slices[&track];
        (0..list.len())
            .filter(|&i| list[i].start <= ts && ts <= list[i].end)
            .max_by_key(|&i| list[i].depth)
            .unwrap_or_else(|| panic!("a flow end at {ts} on {track:?} lies in no slice"))
    };
    let mut flows = Vec::new();
    for (id, ends) in &flow_ends {
        assert_eq!(ends.len(), 2, "flow {id}: {ends:?}");
        let start = ends.iter().find(|e| e.0 == "s").expect("an s");
        let end = ends.iter().find(|e| e.0 == "f").expect("an f");
        assert_eq!(start.1, end.1, "flow {id}: cats differ");
        assert!(end.2 >= start.2, "flow {id} ends before it starts");
        flows.push((
            start.1.clone(),
            (thread_names[&start.3].clone(), bound(start.3, start.2)),
            (thread_names[&end.3].clone(), bound(end.3, end.2)),
        ));
    }
    // Thread names are the trace's location names, each once.
    let mut by_name = BTreeMap::new();
    for (track, list) in slices {
        let name = thread_names[&track].clone();
        assert!(
            by_name.insert(name, list).is_none(),
            "two threads of one name"
        );
    }
    Chrome {
        slices: by_name,
        flows,
        other: doc["otherData"].clone(),
    }
}

/// The order slices are compared in: by start, the enclosing one first.
fn order(s: &Slice) -> (i64, std::cmp::Reverse<i64>, usize) {
    (s.start, std::cmp::Reverse(s.end), s.depth)
}

/// The trace's intervals per location in ns since the trace's start, in the order
/// `check_format` sorts slices, keeping those `keep` accepts.
fn trace_slices(keep: impl Fn(i64, i64) -> bool) -> BTreeMap<String, Vec<Slice>> {
    let trace = trace();
    let offset = trace["clock"]["offset"].as_i64().unwrap();
    let mut slices: BTreeMap<String, Vec<Slice>> = BTreeMap::new();
    for interval in trace["intervals"].as_array().unwrap() {
        let start = interval["start"].as_i64().unwrap() - offset;
        let end = interval["end"].as_i64().unwrap() - offset;
        if !keep(start, end) {
            continue;
        }
        let args: serde_json::Map<String, Value> = interval["attrs"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.trim_start_matches("nccl.").to_owned(), v.clone()))
            .collect();
        slices
            .entry(interval["loc"].as_str().unwrap().to_owned())
            .or_default()
            .push(Slice {
                name: interval["region"].as_str().unwrap().to_owned(),
                start,
                end,
                depth: interval["depth"].as_u64().unwrap() as usize,
                args: Value::Object(args),
            });
    }
    for list in slices.values_mut() {
        list.sort_by_key(order);
    }
    slices
}

/// The slices' names, times and depths (args compared apart: handles are hex strings).
fn shape(
    slices: &BTreeMap<String, Vec<Slice>>,
) -> BTreeMap<String, Vec<(String, i64, i64, usize)>> {
    slices
        .iter()
        .map(|(loc, list)| {
            let list = list
                .iter()
                .map(|s| (s.name.clone(), s.start, s.end, s.depth))
                .collect();
            (loc.clone(), list)
        })
        .collect()
}

/// The rank in a location name `<comm> rank <r> ops`.
fn ops_rank(location: &str) -> Option<(&str, u64)> {
    let (comm, rank) = location.strip_suffix(" ops")?.rsplit_once(" rank ")?;
    Some((comm, rank.parse().ok()?))
}

/// The trace's message records (send or recv) on `location` within `slice`.
fn messages_in<'a>(location: &str, slice: &Slice, kind: &str) -> Vec<&'a Value> {
    let trace = trace();
    let offset = trace["clock"]["offset"].as_i64().unwrap();
    trace["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["loc"] == location && m["kind"] == kind)
        .filter(|m| {
            let time = m["time"].as_i64().unwrap() - offset;
            slice.start <= time && time <= slice.end
        })
        .collect()
}

#[test]
fn the_chrome_trace_follows_the_trace_event_format_and_holds_the_otf2_trace() {
    let (output, doc) = export(&[], "trace.json");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("Chrome trace written to"), "{stdout}");
    let chrome = check_format(&doc);
    let trace = trace();

    // Every interval of the trace, to the nanosecond, on the thread of its location.
    let expected = trace_slices(|_, _| true);
    assert_eq!(shape(&chrome.slices), shape(&expected));
    let intervals = trace["intervals"].as_array().unwrap().len() as u64;
    assert_eq!(chrome.other["slice_events"], 2 * intervals);
    assert_eq!(chrome.other["cut"], Value::Null);

    // Per rank, as many collectives as the trace has collective records on its ops stream,
    // with the operation's description as args.
    let mut collectives: BTreeMap<String, usize> = BTreeMap::new();
    for record in trace["collectives"].as_array().unwrap() {
        *collectives
            .entry(record["loc"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    let ops_streams: Vec<&String> = expected.keys().filter(|l| ops_rank(l).is_some()).collect();
    assert_eq!(
        ops_streams.len(),
        8,
        "2 communicators × 4 ranks: {ops_streams:?}"
    );
    assert_eq!(collectives.len(), 4, "the group communicator's ranks");
    for location in ops_streams {
        let ops: Vec<&Slice> = chrome.slices[location]
            .iter()
            .filter(|s| s.depth == 0)
            .collect();
        let collective_ops = ops
            .iter()
            .filter(|s| !matches!(s.args["func"].as_str(), Some("Send" | "Recv")))
            .count();
        assert_eq!(
            collective_ops,
            collectives.get(location).copied().unwrap_or(0),
            "{location}"
        );
        let wanted: Vec<&Slice> = expected[location].iter().filter(|s| s.depth == 0).collect();
        assert_eq!(ops.len(), wanted.len());
        for (op, want) in ops.iter().zip(wanted) {
            for key in [
                "func", "bytes", "seq", "algo", "proto", "nranks", "rank", "peer",
            ] {
                assert_eq!(op.args[key], want.args[key], "{location}: {key} of {op:?}");
            }
            let hash = format!("{:#x}", want.args["comm_hash"].as_u64().unwrap());
            assert_eq!(op.args["comm_hash"], hash.as_str());
            let task = format!("{:#x}", want.args["task"].as_u64().unwrap());
            assert_eq!(op.args["task"], task.as_str());
        }
    }

    // Messages: each a flow from its Send to its Recv, matched by communicator, ranks and
    // order; those whose receive ended before the send began (nccl-sim's ranks are not
    // causal) are counted instead.
    let sends = trace["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["kind"] == "send")
        .count() as u64;
    let p2p: Vec<_> = chrome.flows.iter().filter(|f| f.0 == "p2p").collect();
    assert!(!p2p.is_empty());
    assert_eq!(chrome.other["p2p_flows"], p2p.len() as u64);
    assert_eq!(chrome.other["unmatched_messages"], 0);
    assert_eq!(
        p2p.len() as u64 + chrome.other["links_back_in_time"].as_u64().unwrap(),
        sends
    );
    for (_, (from_loc, from), (to_loc, to)) in &p2p {
        let (send, recv) = (&chrome.slices[from_loc][*from], &chrome.slices[to_loc][*to]);
        assert_eq!((send.name.as_str(), recv.name.as_str()), ("Send", "Recv"));
        let (comm, sender) = ops_rank(from_loc).unwrap();
        let (recv_comm, receiver) = ops_rank(to_loc).unwrap();
        assert_eq!(comm, recv_comm);
        let sent = messages_in(from_loc, send, "send");
        let received = messages_in(to_loc, recv, "recv");
        assert_eq!(sent.len(), 1);
        assert_eq!(received.len(), 1);
        assert_eq!(sent[0]["peer"], receiver);
        assert_eq!(received[0]["peer"], sender);
        assert_eq!(sent[0]["bytes"], received[0]["bytes"]);
        // The n-th send of the pair goes to the n-th receive.
        let before = |loc: &str, slices: &[Slice], end: &Slice, kind: &str, peer: u64| {
            slices
                .iter()
                .filter(|s| s.depth == 0 && s.start < end.start)
                .filter(|s| messages_in(loc, s, kind).iter().any(|m| m["peer"] == peer))
                .count()
        };
        assert_eq!(
            before(from_loc, &chrome.slices[from_loc], send, "send", receiver),
            before(to_loc, &chrome.slices[to_loc], recv, "recv", sender),
            "{from_loc} → {to_loc}"
        );
    }

    // PXN: each proxy operation progressed for another process linked from the operation
    // it names by (nccl.pid, nccl.task).
    let tasks: std::collections::HashSet<(i64, u64)> = trace["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| ops_rank(i["loc"].as_str().unwrap()).is_some())
        .filter_map(|i| {
            Some((
                i["attrs"]["nccl.pid"].as_i64()?,
                i["attrs"]["nccl.task"].as_u64()?,
            ))
        })
        .collect();
    let linkable = trace["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| {
            Some((
                i["attrs"]["nccl.pid"].as_i64()?,
                i["attrs"]["nccl.pxn_parent"].as_u64()?,
            ))
        })
        .filter(|key| tasks.contains(key))
        .count();
    let pxn: Vec<_> = chrome.flows.iter().filter(|f| f.0 == "pxn").collect();
    assert!(linkable > 0, "the job has PXN operations");
    assert_eq!(pxn.len(), linkable);
    assert_eq!(chrome.other["pxn_flows"], linkable as u64);
    // From whichever began first to the other, bound to the operation and the proxy
    // operation themselves (not to what is nested in them).
    for (_, from, to) in &pxn {
        let ((op_loc, op), (proxy_loc, proxy)) = if ops_rank(&from.0).is_some() {
            (from, to)
        } else {
            (to, from)
        };
        let (op, proxy) = (
            &chrome.slices[op_loc][*op],
            &chrome.slices[proxy_loc][*proxy],
        );
        assert!(ops_rank(op_loc).is_some(), "{op_loc}");
        assert!(proxy_loc.starts_with("PXN for pid "), "{proxy_loc}");
        assert_eq!((op.depth, proxy.depth), (0, 0));
        assert_eq!(proxy.name, "proxy send");
        assert_eq!(op.args["task"], proxy.args["pxn_parent"]);
        assert_eq!(op.args["pid"], proxy.args["pid"]);
        assert!(proxy_loc.starts_with(&format!("PXN for pid {} ", op.args["pid"])));
        let first = &chrome.slices[&from.0][from.1];
        let second = &chrome.slices[&to.0][to.1];
        assert!(first.start <= second.start);
    }
}

#[test]
fn a_window_keeps_exactly_the_intervals_that_overlap_it() {
    let length = trace()["clock"]["length"].as_i64().unwrap();
    // It begins inside the trace's longest interval and spans a third of the trace; in
    // microseconds, as a user types them.
    let longest = trace_slices(|_, _| true)
        .into_values()
        .flatten()
        .max_by_key(|s| s.end - s.start)
        .unwrap();
    let a = (longest.start + longest.end) / 2 / 1000;
    let b = a + length / 3 / 1000;
    let (_, doc) = export(&["--window", &format!("{a}us:{b}us")], "window.json");
    let chrome = check_format(&doc);
    let (a, b) = (a * 1000, b * 1000);
    let expected = trace_slices(|start, end| start <= b && end >= a);
    let all = trace_slices(|_, _| true);
    let count =
        |slices: &BTreeMap<String, Vec<Slice>>| slices.values().map(Vec::len).sum::<usize>();
    assert!(count(&expected) > 0 && count(&expected) < count(&all));
    assert_eq!(shape(&chrome.slices), shape(&expected));
    assert_eq!(ns(&chrome.other["window_start_us"]), a);
    // Said as the part of the trace it covers.
    assert_eq!(ns(&chrome.other["window_end_us"]), b.min(length));
    // Intervals that began before the window are there whole.
    assert!(chrome
        .slices
        .values()
        .flatten()
        .any(|s| s.start < a && s.end >= a));
}

#[test]
fn the_cap_keeps_the_first_intervals_and_says_how_to_see_the_rest() {
    let intervals = trace()["intervals"].as_array().unwrap().len() as u64;
    let max = 2 * intervals / 3;
    let (output, doc) = export(&["--max-events", &max.to_string()], "cut.json");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("more than --max-events {max}")) && stderr.contains("--window "),
        "{stderr}"
    );
    let chrome = check_format(&doc);
    let end = ns(&chrome.other["cut"]["end_us"]);
    assert_eq!(ns(&chrome.other["window_end_us"]), end);
    let expected = trace_slices(|start, _| start <= end);
    assert_eq!(shape(&chrome.slices), shape(&expected));
    let kept = 2 * chrome.slices.values().map(Vec::len).sum::<usize>() as u64;
    assert_eq!(chrome.other["slice_events"], kept);
    assert_eq!(chrome.other["cut"]["kept_slice_events"], kept);
    assert_eq!(chrome.other["cut"]["window_slice_events"], 2 * intervals);
    // The cut falls as late as the cap allows, to a 1/16384 of the trace.
    assert!(kept <= max && kept > max * 95 / 100, "{kept} of {max}");

    // The window the message proposes holds what comes next.
    let proposed = stderr
        .split("--window ")
        .nth(1)
        .and_then(|rest| rest.split([',', ' ']).next())
        .unwrap()
        .to_owned();
    let (_, next) = export(&["--window", &proposed], "next.json");
    let next = check_format(&next);
    let first_new = next
        .slices
        .values()
        .flatten()
        .filter(|s| s.start > end)
        .count();
    assert!(first_new > 0, "{proposed}");
}

#[test]
fn what_cannot_be_exported_is_refused_with_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let output = Command::new(TOOL)
        .arg("export")
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("does not exist"));
    std::fs::create_dir_all(dir.path().join("parts/host.1")).unwrap();
    let output = Command::new(TOOL)
        .arg("export")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("nccl-scorep merge"));
    let output = Command::new(TOOL)
        .args(["export", "--window", "2s:1s"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "clap's usage error");
    assert!(String::from_utf8_lossy(&output.stderr).contains("ends before it starts"));
}

/// Each thread's name → the name of its process, from the metadata events.
fn process_of_threads(doc: &Value) -> BTreeMap<String, String> {
    let events = doc["traceEvents"].as_array().unwrap();
    let named = |kind: &'static str| {
        events
            .iter()
            .filter(move |e| e["ph"] == "M" && e["name"] == kind)
            .map(|e| {
                let track = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
                (track, e["args"]["name"].as_str().unwrap().to_owned())
            })
    };
    let processes: HashMap<u64, String> = named("process_name").map(|(t, n)| (t.0, n)).collect();
    named("thread_name")
        .map(|(track, name)| (name, processes[&track.0].clone()))
        .collect()
}

#[test]
fn processes_keeps_the_processes_asked_for_with_their_slices_and_the_flows_among_them() {
    let (_, whole_doc) = export(&[], "whole-for-processes.json");
    let whole_processes = process_of_threads(&whole_doc);
    let whole = check_format(&whole_doc);
    // The two processes at the ends of a message the whole export links (which messages
    // nccl-sim's ranks send in time to be linked varies from run to run).
    let rank_of = |thread: &str| -> u64 {
        let process = &whole_processes[thread];
        let rank = process
            .strip_prefix("process ")
            .and_then(|p| p.split(' ').next());
        rank.and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("{process}"))
    };
    let (_, from, to) = whole
        .flows
        .iter()
        .find(|(cat, from, to)| cat == "p2p" && rank_of(&from.0) != rank_of(&to.0))
        .expect("a message between two processes");
    let mut pair = [rank_of(&from.0), rank_of(&to.0)];
    pair.sort_unstable();
    let asked_for = format!("{},{}", pair[0], pair[1]);
    let (output, some_doc) = export(&["--processes", &asked_for], "processes-pair.json");
    let some_processes = process_of_threads(&some_doc);
    let asked = |process: &str| {
        pair.iter()
            .any(|rank| process.starts_with(&format!("process {rank} (")))
    };
    let names: std::collections::BTreeSet<&String> = some_processes.values().collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().all(|name| asked(name)), "{names:?}");
    // Every slice of their threads, as the whole export has them, and nothing else.
    let some = check_format(&some_doc);
    let kept: BTreeMap<String, Vec<Slice>> = whole
        .slices
        .iter()
        .filter(|(thread, _)| asked(&whole_processes[*thread]))
        .map(|(thread, slices)| (thread.clone(), slices.clone()))
        .collect();
    assert!(kept.keys().any(|thread| ops_rank(thread).is_some()));
    assert_eq!(some.slices, kept);
    // The flows between them; a message to a process left out is not "unmatched".
    let mut kept_flows: Vec<_> = whole
        .flows
        .iter()
        .filter(|(_, from, to)| kept.contains_key(&from.0) && kept.contains_key(&to.0))
        .cloned()
        .collect();
    assert!(kept_flows.iter().any(|flow| flow.0 == "p2p"));
    assert!(kept_flows.len() < whole.flows.len());
    let mut some_flows = some.flows.clone();
    kept_flows.sort();
    some_flows.sort();
    assert_eq!(some_flows, kept_flows);
    assert_eq!(some.other["processes"], asked_for.as_str());
    assert_eq!(some.other["unmatched_messages"], 0);
    assert_eq!(whole.other["processes"], Value::Null);
    assert!(String::from_utf8_lossy(&output.stdout).contains("Chrome trace written to"));

    // Ranks the trace does not have, and what is not a rank list.
    for (processes, message) in [
        (
            "7,9",
            "no process of the trace has a rank in --processes 7,9 (its processes: 0-3)",
        ),
        ("3-1", "`3-1` is an empty range"),
    ] {
        let output = Command::new(TOOL)
            .args(["export", "--processes", processes])
            .arg(job())
            .arg("-o")
            .arg(job().join("refused.json"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(message), "{stderr}");
        assert!(!job().join("refused.json").exists());
    }
}
