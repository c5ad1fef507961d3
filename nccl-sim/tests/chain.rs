//! Chaining a second plugin behind ours (NCCL_SCOREP_CHAIN): the recording test plugin
//! sees the same events, parents and states chained as when nccl-sim loads it directly,
//! also when it returns errors and NULL handles; and our own trace is the same as
//! without the chain.

use nccl_sim::nccl::{Nccl, SimConfig};
use nccl_sim::profiler::Profiler;
use nccl_sim::release::Release;
use nccl_sim::scenario::{self, Params};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Both plugins read their settings from the environment at their first init: runs do
/// not overlap.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The recording plugin's settings for one comparison.
#[derive(Clone, Copy, Default)]
struct Faults {
    /// The n-th init of the process returns an error.
    init_error: Option<u32>,
    /// Type bits whose start gives NULL (and an error).
    null_types: u64,
    /// stopEvent and recordEventState return errors.
    call_errors: bool,
    /// The activation mask it asks for (every event when `None`).
    mask: Option<u64>,
}

/// What one run left: the recording plugin's lines (one list per process), and our
/// event log.
struct Run {
    recorded: Vec<Vec<String>>,
    ours: Vec<Value>,
}

/// Which plugins a run loads.
#[derive(Clone, Copy)]
enum Setup<'a> {
    /// Ours only.
    Alone,
    /// This plugin only, loaded by nccl-sim.
    Direct(&'a Path),
    /// Ours, with this plugin chained behind it.
    Chained(&'a Path),
}

/// Runs scenario `name` on `release` (2 ranks, one thread each, 2 iterations).
fn run(release: &str, name: &str, setup: Setup, faults: Faults) -> Run {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // Fresh copies: fresh statics in both libraries for every run.
    let copy = |from: &Path, to: &str| {
        let path = dir.path().join(to);
        std::fs::copy(from, &path).unwrap();
        path
    };
    let ours = copy(
        &nccl_sim::our_plugin_for_tests(),
        "libnccl-profiler-scorep-copy.so",
    );
    let loaded = match setup {
        Setup::Alone => ours,
        Setup::Direct(other) => copy(other, "libnccl-profiler-other-copy.so"),
        Setup::Chained(other) => {
            let other = copy(other, "libnccl-profiler-other-copy.so");
            std::env::set_var("NCCL_SCOREP_CHAIN", &other);
            ours
        }
    };
    let record_file = dir.path().join("recorded");
    let out = dir.path().join("out");
    for (name, value) in [
        ("RECORDING_PROFILER_FILE", record_file.display().to_string()),
        (
            "RECORDING_PROFILER_INIT_ERROR",
            faults.init_error.map_or(String::new(), |n| n.to_string()),
        ),
        (
            "RECORDING_PROFILER_NULL_TYPES",
            faults.null_types.to_string(),
        ),
        (
            "RECORDING_PROFILER_STOP_ERROR",
            u8::from(faults.call_errors).to_string(),
        ),
        (
            "RECORDING_PROFILER_RECORD_ERROR",
            u8::from(faults.call_errors).to_string(),
        ),
        (
            "RECORDING_PROFILER_MASK",
            faults.mask.unwrap_or(0xFFFF).to_string(),
        ),
        ("NCCL_SCOREP_OUTPUT_DIR", out.display().to_string()),
        ("NCCL_SCOREP_JSONL", "1".into()),
        ("NCCL_SCOREP_MODE", "jsonl".into()),
        ("NCCL_SCOREP_EVENTS", "default".into()),
    ] {
        std::env::set_var(name, value);
    }
    let release: Release = release.parse().unwrap();
    let profiler = Arc::new(Profiler::new(release, Some(loaded.into_os_string())));
    let mut config = SimConfig::default();
    config.time.speedup = 20.0;
    let config = scenario::config_for(name, &config);
    let nccl = Nccl::new(profiler, config);
    assert!(
        scenario::run(name, &nccl, &Params::single_process(2, 2)),
        "unknown scenario {name}"
    );
    drop(nccl);
    std::env::remove_var("NCCL_SCOREP_CHAIN");
    Run {
        recorded: recorded_lines(dir.path()),
        ours: our_events(&out),
    }
}

/// The recording plugin's files in `dir`, one list of lines per process.
fn recorded_lines(dir: &Path) -> Vec<Vec<String>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("recorded.")
        })
        .map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

fn our_events(out: &Path) -> Vec<Value> {
    let Ok(entries) = std::fs::read_dir(out) else {
        return Vec::new();
    };
    let mut events = Vec::new();
    for path in entries.map(|e| e.unwrap().path()) {
        if path.is_dir() {
            events.extend(our_events(&path));
        } else if path.extension().is_some_and(|x| x == "jsonl") {
            let text = std::fs::read_to_string(path).unwrap();
            events.extend(
                text.lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap())
                    .filter(|l| l["type"] == "event"),
            );
        }
    }
    events
}

/// One event the recording plugin saw.
#[derive(Default)]
struct Seen {
    context: String,
    description: String,
    parent: String,
    states: Vec<String>,
    stops: usize,
}

/// The recording plugin's calls as a sorted list of events, each described by its own
/// fields, its communicator, its ancestors (handles mapped to the events they name),
/// its states and how often it was stopped; plus its inits, its finalizes and the calls
/// NCCL made with NULL handles. Handle and context numbers themselves, which depend on
/// the threads' interleaving, do not appear.
fn canonical(processes: &[Vec<String>]) -> (Vec<String>, Vec<String>) {
    let (mut events, mut other) = (Vec::new(), Vec::new());
    for lines in processes {
        let (e, o) = canonical_process(lines);
        events.extend(e);
        other.extend(o);
    }
    events.sort();
    other.sort();
    (events, other)
}

/// [`canonical`] for the lines of one process.
fn canonical_process(lines: &[String]) -> (Vec<String>, Vec<String>) {
    let mut inits = HashMap::new();
    let mut other = Vec::new();
    let mut events: BTreeMap<String, Seen> = BTreeMap::new();
    let mut anonymous = Vec::new();
    for line in lines {
        let words: Vec<&str> = line.split(' ').collect();
        match words[0] {
            "I" => {
                inits.insert(words[2].to_owned(), words[3..].join(" "));
                other.push(format!("init v{} {}", words[1], words[3..].join(" ")));
            }
            "X" => other.push(line.clone()),
            "F" => other.push(format!(
                "finalize {}",
                inits.get(words[1]).cloned().unwrap_or_default()
            )),
            "S" => {
                let seen = Seen {
                    context: words[1].to_owned(),
                    description: words[4..].join(" "),
                    parent: words[3].to_owned(),
                    ..Seen::default()
                };
                if words[2] == "-" {
                    anonymous.push(seen);
                } else {
                    events.insert(words[2].to_owned(), seen);
                }
            }
            "R" | "E" if words[1] == "-" => other.push(format!("{} with NULL", words[0])),
            "R" | "E" if !events.contains_key(words[1]) => {
                other.push(format!("{} with an unknown handle", words[0]))
            }
            "R" => {
                // How often a wait state repeats depends on timing, not on the plugin.
                let states = &mut events.get_mut(words[1]).unwrap().states;
                if states.last().is_none_or(|last| last != words[2]) {
                    states.push(words[2].to_owned());
                }
            }
            "E" => events.get_mut(words[1]).unwrap().stops += 1,
            _ => panic!("unknown line {line}"),
        }
    }
    fn describe(
        seen: &Seen,
        events: &BTreeMap<String, Seen>,
        inits: &HashMap<String, String>,
    ) -> String {
        let parent = match events.get(&seen.parent) {
            Some(parent) => describe(parent, events, inits),
            None if seen.parent.starts_with('h') => "an unknown handle".into(),
            None => seen.parent.clone(),
        };
        let context = inits
            .get(&seen.context)
            .cloned()
            .unwrap_or(seen.context.clone());
        format!("[{} in ({context}) <- {parent}]", seen.description)
    }
    let mut described: Vec<String> = events
        .values()
        .chain(&anonymous)
        .map(|seen| {
            format!(
                "{} states {:?} stops {}",
                describe(seen, &events, &inits),
                seen.states,
                seen.stops
            )
        })
        .collect();
    described.sort();
    other.sort();
    (described, other)
}

/// Asserts that the recording plugin saw the same chained as directly.
fn assert_same(release: &str, scenario: &str, recorder: &Path, faults: Faults) -> Run {
    let direct = run(release, scenario, Setup::Direct(recorder), faults);
    let chained = run(release, scenario, Setup::Chained(recorder), faults);
    let (direct_events, direct_other) = canonical(&direct.recorded);
    let (chained_events, chained_other) = canonical(&chained.recorded);
    // ProxyCtrl events (the proxy thread going idle, asleep, awake) follow the timing of
    // each run: compared by presence only.
    let proxy_ctrl = |e: &String| e.starts_with("[0x20 ");
    assert_eq!(
        direct_events.iter().any(proxy_ctrl),
        chained_events.iter().any(proxy_ctrl),
        "{release} {scenario}: ProxyCtrl events"
    );
    let direct_events: Vec<String> = direct_events
        .into_iter()
        .filter(|e| !proxy_ctrl(e))
        .collect();
    let chained_events: Vec<String> = chained_events
        .into_iter()
        .filter(|e| !proxy_ctrl(e))
        .collect();
    assert!(
        faults.null_types != 0 || direct_events.len() > 4,
        "{release} {scenario}: the scenario gave events: {:?}",
        direct.recorded
    );
    if direct_events != chained_events {
        let (only_direct, only_chained) = multiset_difference(&direct_events, &chained_events);
        panic!(
            "{release} {scenario}: {} events directly, {} chained\nonly directly: \
             {:#?}\nonly chained: {:#?}",
            direct_events.len(),
            chained_events.len(),
            &only_direct[..only_direct.len().min(5)],
            &only_chained[..only_chained.len().min(5)],
        );
    }
    // NCCL alone also stops NULL handles (net-plugin); chained, it never gets a handle it
    // did not give.
    let direct_other: Vec<_> = direct_other
        .into_iter()
        .filter(|o| !o.ends_with("with NULL"))
        .collect();
    assert_eq!(direct_other, chained_other, "{release} {scenario}");
    chained
}

/// What is in `a` more often than in `b`, and the other way round (both sorted).
fn multiset_difference(a: &[String], b: &[String]) -> (Vec<String>, Vec<String>) {
    let (mut only_a, mut only_b) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x == y => (i, j) = (i + 1, j + 1),
            (Some(x), Some(y)) if x < y => {
                only_a.push(x.clone());
                i += 1;
            }
            (Some(x), None) => {
                only_a.push(x.clone());
                i += 1;
            }
            (_, Some(y)) => {
                only_b.push(y.clone());
                j += 1;
            }
            (None, None) => unreachable!(),
        }
    }
    (only_a, only_b)
}

fn recorder() -> PathBuf {
    nccl_sim::recording_plugin_path()
}

/// Events per kind, ProxyCtrl left out (how often the proxy thread sleeps follows the
/// timing of each run).
fn kind_counts(events: &[Value]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for event in events.iter().filter(|e| e["kind"] != "ProxyCtrl") {
        *counts
            .entry(event["kind"].as_str().unwrap_or("?").to_owned())
            .or_default() += 1;
    }
    counts
}

#[test]
fn the_chained_plugin_sees_what_nccl_alone_gives_it_in_every_release() {
    for release in ["2.23", "2.24", "2.26", "2.27", "2.28", "2.30", "2.31"] {
        for scenario in ["single", "group", "p2p"] {
            let chained = assert_same(release, scenario, &recorder(), Faults::default());
            let alone = run(release, scenario, Setup::Alone, Faults::default());
            let (with_chain, without) = (kind_counts(&chained.ours), kind_counts(&alone.ours));
            assert!(without.contains_key("Coll") || without.contains_key("P2p"));
            assert_eq!(
                with_chain, without,
                "{release} {scenario}: our trace is the same with the chain (the recorder \
                 asks for every event, we for the default ones)"
            );
        }
    }
}

#[test]
fn proxy_steps_net_plugin_kernel_phases_and_copy_engine_events() {
    for (release, scenario) in [
        ("2.32", "net-plugin"),
        ("2.31", "ce"),
        ("2.31", "nonblocking"),
        ("2.27", "net-plugin"),
        ("2.32", "split"),
    ] {
        assert_same(release, scenario, &recorder(), Faults::default());
    }
}

#[test]
fn errors_and_null_handles_of_the_chained_plugin_stay_with_it() {
    use nccl_profiler_abi::event_type as t;
    // NULL for the API events on 2.28+ (their children get a NULL parent) and for the
    // ProxyOps (steps then have none).
    let faults = Faults {
        null_types: t::GROUP_API | t::PROXY_OP,
        call_errors: true,
        ..Faults::default()
    };
    for release in ["2.32", "2.28"] {
        let chained = assert_same(release, "single", &recorder(), faults);
        assert!(
            kind_counts(&chained.ours)["Coll"] > 0,
            "our trace goes on: {:?}",
            kind_counts(&chained.ours)
        );
    }
    // Before 2.28 a NULL ProxyOp handle means no steps, and a NULL Group handle no
    // Coll/P2p (nor anything below them).
    for null_types in [t::PROXY_OP, t::GROUP] {
        let faults = Faults {
            null_types,
            ..Faults::default()
        };
        let chained = assert_same("2.27", "group", &recorder(), faults);
        let (events, _) = canonical(&chained.recorded);
        let coll = events.iter().filter(|e| e.starts_with("[0x2 ")).count();
        let steps = events.iter().filter(|e| e.starts_with("[0x10 ")).count();
        assert_eq!(
            (coll > 0, steps),
            (null_types == t::PROXY_OP, 0),
            "{events:#?}"
        );
    }
    // An init error: that communicator gets nothing more, the others everything.
    let faults = Faults {
        init_error: Some(2),
        ..Faults::default()
    };
    let chained = run("2.32", "single", Setup::Chained(&recorder()), faults);
    let (events, other) = canonical(&chained.recorded);
    assert!(other.iter().any(|o| o.starts_with("X init")), "{other:?}");
    assert_eq!(other.iter().filter(|o| o.starts_with("init")).count(), 1);
    assert!(!events.is_empty());
    let contexts: std::collections::HashSet<&str> = events
        .iter()
        .map(|e| e[e.find(" in (").unwrap()..e.find(") <- ").unwrap()].trim())
        .collect();
    assert_eq!(
        contexts.len(),
        1,
        "one communicator rank only: {contexts:?}"
    );
    let alone = run("2.32", "single", Setup::Alone, Faults::default());
    assert_eq!(kind_counts(&chained.ours), kind_counts(&alone.ours));
}

#[test]
fn a_chained_plugin_asking_for_less_gets_only_what_it_asked_for() {
    use nccl_profiler_abi::event_type as t;
    // ProxyOps only: NCCL also starts their ancestors, but no KernelCh, ProxyCtrl or
    // step, which our default mask asks for.
    let faults = Faults {
        mask: Some(t::PROXY_OP),
        ..Faults::default()
    };
    for release in ["2.32", "2.27"] {
        let chained = assert_same(release, "single", &recorder(), faults);
        let (events, _) = canonical(&chained.recorded);
        let types: std::collections::BTreeSet<&str> = events
            .iter()
            .map(|e| e[1..].split(' ').next().unwrap())
            .collect();
        let expected: &[&str] = if release == "2.32" {
            &["0x1", "0x100", "0x2", "0x200", "0x8"]
        } else {
            &["0x1", "0x2", "0x8"]
        };
        assert_eq!(types.into_iter().collect::<Vec<_>>(), expected, "{release}");
        let alone = run(release, "single", Setup::Alone, Faults::default());
        assert_eq!(
            kind_counts(&chained.ours),
            kind_counts(&alone.ours),
            "{release}"
        );
    }
}

#[test]
fn an_older_chained_plugin_gets_what_nccls_shim_would_give_it() {
    // nccl-sim loads the v6 build directly through its v6 shim; chained, ours is called at
    // v7 and forwards at v6.
    let v6 = nccl_sim::recording_plugin_v6_path();
    for scenario in ["single", "ce", "group"] {
        assert_same("2.31", scenario, &v6, Faults::default());
    }
    let chained = run("2.31", "single", Setup::Chained(&v6), Faults::default());
    let (_, other) = canonical(&chained.recorded);
    assert!(
        other
            .iter()
            .all(|o| !o.starts_with("init") || o.starts_with("init v6")),
        "{other:?}"
    );
}

/// Runs the nccl-sim binary: `processes` processes of one rank each, every rank's sends
/// progressed by the next process's proxy (PXN), loading `plugin`, with `env` set.
fn run_processes(plugin: &Path, env: &[(&str, &Path)], dir: &Path) -> std::process::Output {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_nccl-sim"))
        // One scenario: NCCL unloads a plugin after its last finalize, and a reloaded
        // recording plugin numbers its handles from 1 again.
        .args(["run", "--scenario", "p2p"])
        .args([
            "--iterations",
            "2",
            "--speedup",
            "20",
            "--procs",
            "2",
            "--pxn",
        ])
        .arg("--plugin")
        .arg(plugin)
        .env("RECORDING_PROFILER_FILE", dir.join("recorded"))
        .env("NCCL_SCOREP_OUTPUT_DIR", dir.join("out"))
        .env("NCCL_SCOREP_MODE", "jsonl")
        .env("NCCL_SIM_SHM_DIR", dir)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[test]
fn under_pxn_the_chained_plugin_gets_the_foreign_proxy_ops_nccl_would_give_it() {
    let direct_dir = tempfile::tempdir().unwrap();
    run_processes(&recorder(), &[], direct_dir.path());
    let chained_dir = tempfile::tempdir().unwrap();
    let ours = nccl_sim::our_plugin_for_tests();
    run_processes(
        &ours,
        &[("NCCL_SCOREP_CHAIN", &recorder())],
        chained_dir.path(),
    );
    let direct = recorded_lines(direct_dir.path());
    let chained = recorded_lines(chained_dir.path());
    assert_eq!(
        (direct.len(), chained.len()),
        (2, 2),
        "one file per process"
    );
    // Each job draws its communicators' ids at random: they become "comm".
    let comparable = |processes: &[Vec<String>]| -> Vec<String> {
        let ids: Vec<String> = processes
            .iter()
            .flatten()
            .filter(|l| l.starts_with("I "))
            .filter_map(|l| l.split(' ').nth(6).map(str::to_owned))
            .collect();
        let mut events: Vec<String> = canonical(processes)
            .0
            .into_iter()
            .filter(|e| !e.starts_with("[0x20 "))
            .map(|e| ids.iter().fold(e, |e, id| e.replace(id.as_str(), "comm")))
            .collect();
        events.sort();
        events
    };
    let (direct_events, chained_events) = (comparable(&direct), comparable(&chained));
    let foreign = direct_events
        .iter()
        .filter(|e| e.starts_with("[0x8 ") && e.contains("pid=other"))
        .count();
    assert!(foreign > 0, "the scenario has foreign ProxyOps");
    let (only_direct, only_chained) = multiset_difference(&direct_events, &chained_events);
    assert!(
        only_direct.is_empty() && only_chained.is_empty(),
        "only directly: {:#?}\nonly chained: {:#?}",
        &only_direct[..only_direct.len().min(5)],
        &only_chained[..only_chained.len().min(5)]
    );
    for e in direct_events.iter().filter(|e| e.contains("pid=other")) {
        assert!(
            e.contains("in (x) <- x]"),
            "another process's context and parent, never dereferenced: {e}"
        );
    }
}

#[test]
fn the_empty_plugin_chained_changes_nothing_in_our_trace() {
    let empty = nccl_sim::bench::empty_plugin_path();
    let ours = nccl_sim::our_plugin_for_tests();
    let debug = Path::new("INFO");
    let alone_dir = tempfile::tempdir().unwrap();
    run_processes(&ours, &[("NCCL_DEBUG", debug)], alone_dir.path());
    let chained_dir = tempfile::tempdir().unwrap();
    let output = run_processes(
        &ours,
        &[("NCCL_DEBUG", debug), ("NCCL_SCOREP_CHAIN", &empty)],
        chained_dir.path(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr
            .matches("NCCL-Score-P: chained profiler plugin")
            .count(),
        2,
        "loaded in each process: {stderr}"
    );
    let alone = kind_counts(&our_events(&alone_dir.path().join("out")));
    let chained = kind_counts(&our_events(&chained_dir.path().join("out")));
    assert!(alone["P2p"] > 0 && alone["ProxyOp"] > 0, "{alone:?}");
    assert_eq!(
        chained, alone,
        "the empty plugin asks for every event; our trace has the default ones"
    );
}

#[test]
fn a_plugin_that_cannot_be_chained_is_reported_and_the_job_runs_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let ours = nccl_sim::our_plugin_for_tests();
    let missing = dir.path().join("libnccl-profiler-missing.so");
    for (spec, problem) in [
        (missing.as_path(), "cannot load it"),
        (ours.as_path(), "names nccl-scorep itself"),
        (Path::new("none"), "names no plugin"),
    ] {
        let output = run_processes(&ours, &[("NCCL_SCOREP_CHAIN", spec)], dir.path());
        let stderr = String::from_utf8_lossy(&output.stderr);
        let expected = format!("NCCL_SCOREP_CHAIN={}: {problem}", spec.display());
        assert!(stderr.contains(&expected), "{expected} in:\n{stderr}");
        assert_eq!(
            stderr.matches("running without the chained plugin").count(),
            2,
            "once per process: {stderr}"
        );
    }
}
