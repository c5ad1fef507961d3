//! Record and replay: every recording of the corpus (tests/corpus/) replayed through the
//! plugin gives what the original run gave; a job recorded here replays to the same trace
//! content; other plugins take a replay too.

use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const TOOL: &str = env!("CARGO_BIN_EXE_nccl-scorep");

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

fn recordings_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".ncclrec"))
        .collect();
    files.sort();
    files
}

/// Runs `nccl-sim` with the plugin writing to `out`; returns its stderr.
fn nccl_sim(
    args: &[&str],
    recordings: &[PathBuf],
    plugin: &Path,
    out: &Path,
    mode: &str,
) -> String {
    let output = Command::new(nccl_sim::binary_for_tests())
        .args(args)
        .args(recordings)
        .arg("--plugin")
        .arg(plugin)
        .env("NCCL_SCOREP_MODE", mode)
        .env("NCCL_SCOREP_JSONL", "1")
        .env("NCCL_SCOREP_OUTPUT_DIR", out)
        .env("NCCL_SCOREP_TOOL", TOOL)
        .env("NCCL_SCOREP_HOSTNAME", "corpus")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "nccl-sim {args:?} failed:\n{stderr}"
    );
    stderr
}

fn replay(recordings: &[PathBuf], plugin: &Path, out: &Path, mode: &str) -> String {
    nccl_sim(&["replay"], recordings, plugin, out, mode)
}

/// The events of a run directory's event logs, by [`key`], and its header and comm
/// counts. An id names an event within its process only: two processes may issue the
/// same value.
struct Events {
    by_id: HashMap<String, Value>,
    cycles: u64,
    comms: u64,
}

/// An event's key: the pid of the process that wrote it (added to the event as
/// `process`) and its id.
fn key(process: &Value, id: &str) -> String {
    format!("{process}/{id}")
}

/// The key of an event's parent: in its own process, or in the one a foreign (PXN)
/// parent names.
fn parent_key(event: &Value) -> Option<String> {
    let parent = &event["parent"];
    match (parent["id"].as_str(), parent["value"].as_str()) {
        (Some(id), _) => Some(key(&event["process"], id)),
        (None, Some(value)) => Some(key(&parent["foreign_pid"], value)),
        (None, None) => None,
    }
}

fn events(run: &Path) -> Events {
    let mut found = Events {
        by_id: HashMap::new(),
        cycles: 0,
        comms: 0,
    };
    for entry in std::fs::read_dir(run).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("nccl-scorep-") && name.ends_with(".jsonl")) {
            continue;
        }
        let mut process = Value::Null;
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let mut record: Value = serde_json::from_str(line).unwrap();
            match record["type"].as_str().unwrap() {
                "header" => {
                    found.cycles += 1;
                    process = record["pid"].clone();
                }
                "comm" => found.comms += 1,
                "event" => {
                    record["process"] = process.clone();
                    let key = key(&process, record["id"].as_str().unwrap());
                    found.by_id.insert(key, record);
                }
                _ => {}
            }
        }
    }
    found
}

/// The facts scripts/make-corpus.sh wrote to expected.json, from a run directory.
fn facts(run: &Path) -> Value {
    let events = events(run);
    let mut kinds = BTreeMap::new();
    for event in events.by_id.values() {
        *kinds
            .entry(event["kind"].as_str().unwrap().to_owned())
            .or_insert(0u64) += 1;
    }
    let parents: Vec<&Value> = events
        .by_id
        .values()
        .filter(|e| !e["parent"].is_null())
        .map(|e| &e["parent"])
        .collect();
    let count = |keep: &dyn Fn(&Value) -> bool| parents.iter().filter(|p| keep(p)).count();
    let groups = events
        .by_id
        .values()
        .filter(|e| e["parent_group"].as_str().is_some_and(|g| g != "0x0"))
        .count();
    json!({
        "cycles": events.cycles,
        "comms": events.comms,
        "kinds": kinds,
        "parents": count(&|p| p.get("id").is_some()),
        "parents_linked": events
            .by_id
            .values()
            .filter(|e| e["parent"].get("id").is_some())
            .filter(|e| parent_key(e).is_some_and(|k| events.by_id.contains_key(&k)))
            .count(),
        "foreign_parents": count(&|p| p.get("foreign_pid").is_some()),
        "parent_groups": groups,
    })
}

/// The summary's operations (comm, func, kind, nranks, calls), sorted.
fn operations(run: &Path) -> Value {
    let output = Command::new(TOOL)
        .arg("summary")
        .arg(run)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut rows: Vec<Value> = summary["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|op| {
            json!({"comm": op["comm"], "func": op["func"], "kind": op["kind"],
                   "nranks": op["nranks"], "calls": op["calls"]})
        })
        .collect();
    rows.sort_by_key(|op| (op["comm"].to_string(), op["func"].to_string()));
    Value::Array(rows)
}

fn assert_valid_trace(run: &Path) {
    let output = Command::new(TOOL)
        .arg("validate")
        .arg(run.join("traces.otf2"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}: {}{}",
        run.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn every_corpus_recording_replays_to_what_the_original_run_gave() {
    let plugin = nccl_sim::our_plugin_for_tests();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    entries.sort();
    assert!(entries.len() >= 5, "{entries:?}");
    for entry in entries {
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        let expected: Value =
            serde_json::from_str(&std::fs::read_to_string(entry.join("expected.json")).unwrap())
                .unwrap();
        let recordings = recordings_in(&entry);
        assert!(!recordings.is_empty(), "{name}");
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let report = replay(&recordings, &plugin, &out, "otf2");
        assert!(!report.contains("passed as recorded"), "{name}: {report}");
        let mut got = facts(&out);
        got["operations"] = operations(&out);
        assert_eq!(
            got, expected,
            "{name}: the replay differs from the original run"
        );
        assert!(
            expected["kinds"]["Coll"].as_u64().unwrap_or(0) > 0,
            "{name}"
        );
        assert_eq!(
            expected["parents"], expected["parents_linked"],
            "{name}: every local parent links to an event"
        );
        assert_valid_trace(&out);
    }
}

/// What an event says, without what a run chooses (ids, times, threads, pids), and the
/// same of its parents: two runs of the same calls give the same multiset of these.
fn signature(events: &HashMap<String, Value>, event: &Value, depth: usize) -> String {
    const RUN_CHOSEN: &[&str] = &[
        "id",
        "process",
        "parent",
        "parent_group",
        "context",
        "foreign",
        "pid",
        "start_ns",
        "stop_ns",
        "start_thread",
        "stop_thread",
        "gpu_start_ns",
        "gpu_stop_ns",
        "gpu_clock_error_ns",
    ];
    let mut own = event.clone();
    let fields = own.as_object_mut().unwrap();
    fields.retain(|key, _| !RUN_CHOSEN.contains(&key.as_str()));
    if let Some(Value::Array(states)) = fields.get_mut("states") {
        for state in states {
            state.as_object_mut().unwrap().remove("ns");
        }
    }
    let parent = &event["parent"];
    let parent = match parent_key(event).and_then(|key| events.get(&key)) {
        Some(parent) if depth < 4 => signature(events, parent, depth + 1),
        _ if parent.is_null() => "none".into(),
        _ => "unlinked".into(),
    };
    format!("{own} <- {parent}")
}

fn signatures(run: &Path) -> BTreeMap<String, usize> {
    let events = events(run).by_id;
    let mut all = BTreeMap::new();
    for event in events.values() {
        *all.entry(signature(&events, event, 0)).or_insert(0) += 1;
    }
    all
}

/// One time of an event, and how far the same time of another run may lie from it beyond
/// the clock conversions' nanosecond: nothing for a host time, which is recorded; for a GPU
/// time, the error bound its conversion states (unknown: any), since the conversion takes
/// the bounds the collector has seen by then, which depends on when its passes come.
type Stamp = (Option<u64>, u64);

/// Every time an event of the run gives (start, stop, GPU start and stop, each state),
/// by signature, each signature's events in start order.
fn times(run: &Path) -> BTreeMap<String, Vec<Vec<Stamp>>> {
    let events = events(run).by_id;
    let mut all: BTreeMap<String, Vec<Vec<Stamp>>> = BTreeMap::new();
    for event in events.values() {
        let gpu_error = event["gpu_clock_error_ns"].as_u64().unwrap_or(u64::MAX);
        let mut stamps: Vec<Stamp> = [
            ("start_ns", 0),
            ("stop_ns", 0),
            ("gpu_start_ns", gpu_error),
            ("gpu_stop_ns", gpu_error),
        ]
        .iter()
        .map(|&(field, slack)| (event[field].as_u64(), slack))
        .collect();
        if let Some(states) = event["states"].as_array() {
            stamps.extend(states.iter().map(|state| (state["ns"].as_u64(), 0)));
        }
        all.entry(signature(&events, event, 0))
            .or_default()
            .push(stamps);
    }
    for list in all.values_mut() {
        list.sort();
    }
    all
}

/// The largest difference between the same times of two runs with the same signatures,
/// beyond the slack either allows (see [`Stamp`]), and the number of times compared.
fn largest_time_difference(
    a: &BTreeMap<String, Vec<Vec<Stamp>>>,
    b: &BTreeMap<String, Vec<Vec<Stamp>>>,
) -> (u64, usize, String) {
    let (mut largest, mut compared, mut where_) = (0, 0, String::new());
    for (signature, events) in a {
        for (x, y) in events.iter().zip(&b[signature]) {
            assert_eq!(x.len(), y.len(), "{signature}");
            for (i, (&(p, p_slack), &(q, q_slack))) in x.iter().zip(y).enumerate() {
                match (p, q) {
                    (Some(p), Some(q)) => {
                        compared += 1;
                        let beyond = p.abs_diff(q).saturating_sub(p_slack.max(q_slack));
                        if beyond > largest {
                            largest = beyond;
                            where_ = format!("time {i} of {signature}: {p} and {q}");
                        }
                    }
                    (None, None) => {}
                    _ => panic!("time {i} of {signature}: {p:?} and {q:?}"),
                }
            }
        }
    }
    (largest, compared, where_)
}

/// The merge report's first line: parts, locations, events, communicators.
fn merged(run: &Path) -> String {
    let report = std::fs::read_to_string(run.join("merge-report.txt")).unwrap();
    let first = report.lines().next().unwrap().to_owned();
    first.split_once(": ").unwrap().1.to_owned()
}

/// `nccl-sim run` arguments: 2 processes with PXN, 2 iterations of each scenario.
fn pxn_job<'a>(scenarios: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", "--procs", "2", "--pxn", "--iterations", "2"];
    for scenario in scenarios {
        args.extend(["--scenario", scenario]);
    }
    args
}

#[test]
fn a_recorded_job_replays_to_the_same_trace_content() {
    let plugin = nccl_sim::our_plugin_for_tests();
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("original");
    let run = pxn_job(&["group", "p2p", "graph", "split"]);
    nccl_sim(&run, &[], &plugin, &original, "otf2,record");
    let recordings = recordings_in(&original.join("recordings"));
    assert_eq!(recordings.len(), 2, "one recording per process");
    let replayed = dir.path().join("replayed");
    let report = replay(&recordings, &plugin, &replayed, "otf2");
    assert!(!report.contains("passed as recorded"), "{report}");

    let (before, after) = (signatures(&original), signatures(&replayed));
    assert!(before.values().sum::<usize>() > 100, "{before:#?}");
    assert!(
        !before.keys().any(|s| s.contains("unlinked")),
        "{before:#?}"
    );
    assert_eq!(
        before, after,
        "the same events, with the same contents and parents"
    );
    // The recorded times, through the replay clock: the same times, to within the
    // difference between the plugin's conversion of TSC ticks and the recording's; GPU
    // times to within that beyond the error bounds their conversions state.
    let (largest, compared, at) = largest_time_difference(&times(&original), &times(&replayed));
    assert!(compared > 300, "{compared} times");
    assert!(largest <= 1_000, "{largest} ns between the {at}");
    assert_eq!(facts(&original), facts(&replayed));
    assert_eq!(operations(&original), operations(&replayed));
    // The merged OTF2 traces: the same locations, events and communicators.
    assert_eq!(merged(&original), merged(&replayed));
    assert_valid_trace(&replayed);

    // The recorded pace: the replay of a 2-process job takes at least as long as the
    // recorded calls spanned.
    let span = |path: &Path| {
        let recording = nccl_scorep_common::recording::Recording::read_file(path).unwrap();
        let to_ns = recording.to_ns();
        let times: Vec<u64> = recording.calls().map(|(_, t, _)| to_ns(t)).collect();
        times.iter().max().unwrap() - times.iter().min().unwrap()
    };
    let recorded_ns = recordings.iter().map(|r| span(r)).max().unwrap();
    let paced = dir.path().join("paced");
    let started = std::time::Instant::now();
    nccl_sim(
        &[
            "replay",
            "--timing",
            "original",
            "--recorded-times",
            "false",
        ],
        &recordings,
        &plugin,
        &paced,
        "jsonl",
    );
    assert!(
        started.elapsed().as_nanos() as u64 >= recorded_ns,
        "{recorded_ns} ns"
    );
    assert_eq!(facts(&paced), facts(&original));
    // With the plugin's own clock, every event is later than all of the original run.
    let span_of = |run: &Path| {
        let all: Vec<u64> = times(run)
            .into_values()
            .flatten()
            .flatten()
            .filter_map(|(time, _)| time)
            .collect();
        (*all.iter().min().unwrap(), *all.iter().max().unwrap())
    };
    assert!(span_of(&paced).0 > span_of(&original).1);
}

#[test]
fn a_deferred_job_only_records_and_its_conversion_gives_the_trace_a_live_run_gives() {
    use nccl_scorep_common::recording::{Call, Recording};
    let plugin = nccl_sim::our_plugin_for_tests();
    let dir = tempfile::tempdir().unwrap();
    let run = pxn_job(&["group", "p2p", "split"]);
    let live = dir.path().join("live");
    nccl_sim(&run, &[], &plugin, &live, "otf2");
    let deferred = dir.path().join("deferred");
    nccl_sim(&run, &[], &plugin, &deferred, "deferred");

    // During the job: the recordings and nothing else (no part, event log or flight
    // recorder file: no collector ran).
    let written: Vec<String> = std::fs::read_dir(&deferred)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(written, ["recordings"]);
    let recordings = recordings_in(&deferred.join("recordings"));
    assert_eq!(recordings.len(), 2, "one recording per process");
    // Every start got a handle of the recording's own, none twice in a process.
    let mut recorded_ns = (u64::MAX, 0);
    for path in &recordings {
        let recording = Recording::read_file(path).unwrap();
        assert_eq!(recording.drops(), 0);
        let handles: Vec<u64> = recording
            .calls()
            .filter_map(|(_, _, call)| match call {
                Call::Start { handle, .. } => Some(*handle),
                _ => None,
            })
            .collect();
        assert!(handles.len() > 100 && !handles.contains(&0), "{handles:?}");
        let distinct: std::collections::HashSet<&u64> = handles.iter().collect();
        assert_eq!(distinct.len(), handles.len(), "a handle issued twice");
        let to_ns = recording.to_ns();
        for (_, time, _) in recording.calls() {
            recorded_ns = (
                recorded_ns.0.min(to_ns(time)),
                recorded_ns.1.max(to_ns(time)),
            );
        }
    }

    // After it: `nccl-scorep convert` makes the trace (and, asked for, the event logs).
    let output = Command::new(TOOL)
        .arg("convert")
        .arg(&deferred)
        .arg("--plugin")
        .arg(&plugin)
        .env("NCCL_SCOREP_MODE", "deferred")
        .env("NCCL_SCOREP_JSONL", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("traces.otf2 (Vampir)"), "{stdout}");
    let replayed: Vec<&str> = stderr.lines().filter(|l| l.contains("replayed")).collect();
    assert_eq!(replayed.len(), 2, "{stderr}");
    for line in replayed {
        let total: u64 = line.split_whitespace().nth(5).unwrap().parse().unwrap();
        assert_eq!(calls_made(line), total, "every call made: {line}");
    }

    // The same events, contents and parents as the live run (two runs of nccl-sim differ
    // only in their communicators' random hashes, the GPU timers and in how often the
    // proxy threads slept), and the same operations in the trace.
    let comparable = |run: &Path| {
        let mut events = events(run).by_id;
        events.retain(|_, event| event["kind"] != "ProxyCtrl");
        for event in events.values_mut() {
            let fields = event.as_object_mut().unwrap();
            fields.retain(|key, _| key != "comm_hash" && !key.starts_with("ptimer"));
            if let Some(Value::Array(states)) = fields.get_mut("states") {
                for state in states {
                    state.as_object_mut().unwrap().remove("ptimer");
                }
            }
        }
        let mut all = BTreeMap::new();
        for event in events.values() {
            *all.entry(signature(&events, event, 0)).or_insert(0) += 1;
        }
        all
    };
    let (expected, got) = (comparable(&live), comparable(&deferred));
    assert!(expected.values().sum::<usize>() > 100, "{expected:#?}");
    assert!(!got.keys().any(|s| s.contains("unlinked")), "{got:#?}");
    let differing: Vec<(&String, Option<&usize>, Option<&usize>)> = expected
        .keys()
        .chain(got.keys())
        .filter(|k| expected.get(*k) != got.get(*k))
        .map(|k| (k, expected.get(k), got.get(k)))
        .take(3)
        .collect();
    assert!(differing.is_empty(), "live and deferred: {differing:#?}");
    assert_eq!(operations(&live), operations(&deferred));
    assert_valid_trace(&deferred);
    // At the times the calls were made, not those of the conversion.
    let all: Vec<u64> = times(&deferred)
        .into_values()
        .flatten()
        .flatten()
        .filter(|&(_, slack)| slack == 0)
        .filter_map(|(time, _)| time)
        .collect();
    let (first, last) = (*all.iter().min().unwrap(), *all.iter().max().unwrap());
    assert!(
        first >= recorded_ns.0 && last <= recorded_ns.1,
        "events from {first} to {last} ns, calls recorded from {} to {} ns",
        recorded_ns.0,
        recorded_ns.1
    );

    // With small rings the replay, calling as fast as it can, waits for room in them: the
    // conversion's waits, not NCCL's (no time passes on the recorded clock), are not
    // reported as NCCL held back.
    let small = dir.path().join("small-rings");
    std::fs::create_dir_all(small.join("recordings")).unwrap();
    for path in &recordings {
        std::fs::copy(
            path,
            small.join("recordings").join(path.file_name().unwrap()),
        )
        .unwrap();
    }
    let output = Command::new(TOOL)
        .arg("convert")
        .arg(&small)
        .arg("--plugin")
        .arg(&plugin)
        .env("NCCL_SCOREP_BUFFER_SIZE", "4K")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("held back"), "{stderr}");

    // Converted once: a second conversion leaves the trace alone.
    let again = Command::new(TOOL)
        .arg("convert")
        .arg(&deferred)
        .arg("--plugin")
        .arg(&plugin)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already has a trace"));
    // A directory without recordings is nothing to convert.
    let nothing = Command::new(TOOL)
        .arg("convert")
        .arg(&live)
        .output()
        .unwrap();
    assert_eq!(nothing.status.code(), Some(2));
}

/// N of the replay's report `replayed N of M calls of …`.
fn calls_made(report: &str) -> u64 {
    report
        .split_whitespace()
        .skip_while(|w| *w != "replayed")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{report}"))
}

#[test]
fn other_plugins_take_a_replay() {
    let entry = corpus().join("nccl-2.32-v7");
    let recordings = recordings_in(&entry);
    let dir = tempfile::tempdir().unwrap();
    // The in-tree empty plugin: every call made, nothing written.
    let report = replay(
        &recordings,
        &nccl_sim::bench::empty_plugin_path(),
        &dir.path().join("empty"),
        "otf2",
    );
    assert!(calls_made(&report) > 1000, "{report}");
    assert!(
        !dir.path().join("empty").exists(),
        "the empty plugin writes nothing"
    );

    // Another file with our plugin, in JSON-lines mode only.
    let copy = dir.path().join("libnccl-profiler-other.so");
    std::fs::copy(nccl_sim::our_plugin_for_tests(), &copy).unwrap();
    let out = dir.path().join("other");
    replay(&recordings, &copy, &out, "jsonl");
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(entry.join("expected.json")).unwrap())
            .unwrap();
    assert_eq!(facts(&out)["kinds"], expected["kinds"]);
    assert!(
        !out.join("traces.otf2").exists(),
        "jsonl mode writes no trace"
    );
}

#[test]
fn a_file_that_is_no_recording_is_refused_and_a_cut_one_replays_as_far_as_it_goes() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let plugin = nccl_sim::our_plugin_for_tests();
    let bogus = dir.path().join("bogus.ncclrec");
    std::fs::write(&bogus, "not a recording at all").unwrap();
    let output = Command::new(nccl_sim::binary_for_tests())
        .arg("replay")
        .arg(&bogus)
        .arg("--plugin")
        .arg(&plugin)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bogus.ncclrec: not a recording"),
        "{stderr}"
    );

    // The v7 entry cut in the middle of an entry, as a killed process leaves it.
    let entry = corpus().join("nccl-2.32-v7");
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&recordings_in(&entry)[0]).unwrap())
        .read_to_end(&mut bytes)
        .unwrap();
    let cut = dir.path().join("cut.ncclrec");
    std::fs::write(&cut, &bytes[..bytes.len() / 2 + 3]).unwrap();
    let report = replay(&[cut], &plugin, &dir.path().join("out"), "jsonl");
    assert!(report.contains("the recording was cut short"), "{report}");
    assert!(calls_made(&report) > 1000, "{report}");
    let events = events(&dir.path().join("out"));
    assert!(!events.by_id.is_empty());
}

/// `nccl-sim bench` (3000 iterations, no pause: far faster than the writer empties a
/// small ring of calls every 5 ms) through our plugin in record mode, with the ring
/// size and `NCCL_SCOREP_ON_FULL` given; its output and its recordings, in `out`.
fn bench_recorded(out: &Path, buffer: &str, on_full: &str) -> (Output, Vec<PathBuf>) {
    let output = Command::new(nccl_sim::binary_for_tests())
        .args(["bench", "--iterations", "3000", "--warmup", "0", "--plugin"])
        .arg(nccl_sim::our_plugin_for_tests())
        .env("NCCL_SCOREP_MODE", "jsonl,record")
        .env("NCCL_SCOREP_BUFFER_SIZE", buffer)
        .env("NCCL_SCOREP_EVENTS", "all")
        .env("NCCL_SCOREP_ON_FULL", on_full)
        .env("NCCL_SCOREP_OUTPUT_DIR", out)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let recordings = recordings_in(&out.join("recordings"));
    (output, recordings)
}

#[test]
fn calls_that_find_the_ring_full_are_counted_in_the_recording() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = nccl_sim::our_plugin_for_tests();
    let (output, recordings) = bench_recorded(&dir.path().join("out"), "4K", "drop");
    let recording = nccl_scorep_common::recording::Recording::read_file(&recordings[0]).unwrap();
    assert!(recording.complete, "the exit handler ends the file");
    let (calls, drops) = (recording.calls().count() as u64, recording.drops());
    assert!(drops > 0 && calls > 1024, "{calls} calls, {drops} drops");
    // Said at the end of the run, too.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("record mode: {drops} calls were not recorded")),
        "{stderr}"
    );
    let report = replay(&recordings, &plugin, &dir.path().join("replayed"), "jsonl");
    assert!(
        report.contains(&format!("{drops} calls were not recorded (buffer full)")),
        "{report}"
    );
    assert_eq!(calls_made(&report), calls, "{report}");
}

#[test]
fn with_on_full_wait_a_full_ring_of_calls_waits_and_every_call_is_recorded() {
    // A 64 KiB ring of calls (some 900 calls: the writer's 5 ms rounds alone would let it
    // overflow again and again): the full ring wakes the writer, and the thread waits for
    // room.
    use nccl_scorep_common::recording::Call;
    let dir = tempfile::tempdir().unwrap();
    let (output, recordings) = bench_recorded(&dir.path().join("out"), "64K", "wait");
    // 3000 iterations of 11 events (GroupApi, CollApi, KernelLaunch, Group, Coll;
    // ProxyOp, 4 ProxySteps, KernelCh), each started and stopped.
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("0 / 33000"), "{stdout}");
    let recording = nccl_scorep_common::recording::Recording::read_file(&recordings[0]).unwrap();
    assert_eq!(recording.drops(), 0, "nothing dropped");
    let count = |is: fn(&Call) -> bool| recording.calls().filter(|(_, _, c)| is(c)).count();
    assert_eq!(
        count(|c| matches!(c, Call::Start { handle, .. } if *handle != 0)),
        33_000
    );
    assert_eq!(count(|c| matches!(c, Call::Stop { .. })), 33_000);
}

#[test]
fn a_pxn_op_of_a_process_not_replayed_keeps_its_recorded_foreign_values() {
    use nccl_scorep_common::recording::{Call, Recording};
    let recordings = recordings_in(&corpus().join("nccl-2.32-pxn"));
    let other = Recording::read_file(&recordings[1]).unwrap();
    // The parents the other process's handles gave this process's PXN ProxyOps.
    let other_handles: Vec<u64> = other
        .calls()
        .filter_map(|(_, _, call)| match call {
            Call::Start { handle, .. } => Some(*handle),
            _ => None,
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    replay(
        &recordings[..1],
        &nccl_sim::our_plugin_for_tests(),
        &out,
        "jsonl",
    );
    let events = events(&out).by_id;
    let foreign: Vec<&Value> = events
        .values()
        .filter(|e| e["parent"].get("foreign_pid").is_some())
        .collect();
    assert!(!foreign.is_empty());
    for op in foreign {
        assert_eq!(op["parent"]["foreign_pid"], other.header.pid, "{op}");
        let value = op["parent"]["value"].as_str().unwrap();
        let value = u64::from_str_radix(value.trim_start_matches("0x"), 16).unwrap();
        assert!(other_handles.contains(&value), "{op}");
    }
}
