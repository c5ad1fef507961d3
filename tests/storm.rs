//! The storm: four threads call the plugin as fast as they can for `STORM_SECONDS`
//! (10 s) each, every event level and the steps' wait states on, into a 4 KiB ring, so
//! that its collector cannot keep up. With `NCCL_SCOREP_ON_FULL=drop` the trace, read back
//! with `otf2-print`, holds exactly the events whose start was kept, and its
//! `NCCL_SCOREP::LOST::*` properties (and `nccl-scorep summary`) account for every other
//! one; with `wait` every event the threads started is in it, and every wait of theirs is
//! shown (`NCCL held back by the plugin`, added up by the summary). Both traces validate.
//! And a finalize on a full ring is not dropped.

mod otf2_properties;
#[path = "../plugin/tests/support/mod.rs"]
mod support;
mod validate_json;

use nccl_profiler_abi::{event_type as t, state};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::*;

const THREADS: u64 = 4;
/// Proxy steps per proxy operation.
const STEPS: i32 = 2;
/// NCCL's three states of a send step, and the wait-state region each becomes.
const SEND_STEP_STATES: [(&str, i32, &str); 3] = [
    (
        "SendGpuWait",
        state::PROXY_STEP_SEND_GPU_WAIT,
        "send: GPU wait",
    ),
    (
        "SendPeerWait",
        state::PROXY_STEP_SEND_PEER_WAIT_V4,
        "send: peer wait",
    ),
    (
        "SendWait",
        state::PROXY_STEP_SEND_WAIT,
        "send: network wait",
    ),
];

/// What the threads did, by event kind: starts made, and handles the plugin gave back
/// (NULL when a full ring dropped the start).
#[derive(Default, Debug, Clone)]
struct Tally {
    started: BTreeMap<&'static str, u64>,
    issued: BTreeMap<&'static str, u64>,
    /// States recorded on events the plugin issued, by state name.
    states: BTreeMap<&'static str, u64>,
    /// Steps issued whose ProxyOp's start was dropped: NCCL records no state on them.
    steps_without_op: u64,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        for (mine, theirs) in [
            (&mut self.started, &other.started),
            (&mut self.issued, &other.issued),
            (&mut self.states, &other.states),
        ] {
            for (name, n) in theirs {
                *mine.entry(name).or_default() += n;
            }
        }
        self.steps_without_op += other.steps_without_op;
    }
}

/// One thread's calls: NCCL's order for an `ncclAllReduce` outside a group, its proxy
/// operation with its steps, and its kernel channel, over and over until `stop`. As NCCL
/// does, nothing more is called for a NULL handle, and no step state when the step's
/// ProxyOp handle is NULL.
fn storm_thread(plugin: &Plugin, thread: u64, stop: &AtomicBool) -> Tally {
    let table = plugin.v7();
    let (ctx, _) = plugin.init_v7(0x5707_0000 + thread, Some(c"storm"), 0, 1);
    let mut tally = Tally::default();
    let mut start =
        |kind: &'static str, descr: &mut nccl_profiler_abi::v7::ncclProfilerEventDescr_v7_t| {
            *tally.started.entry(kind).or_default() += 1;
            let handle = start_in(table, ctx, descr);
            if !handle.is_null() {
                *tally.issued.entry(kind).or_default() += 1;
            }
            handle
        };
    let mut states: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut record = |handle: Handle, name: &'static str, value: i32, args| {
        if !handle.is_null() {
            *states.entry(name).or_default() += 1;
            record_in(table, handle, value, args);
        }
    };
    let end = |handle: Handle| {
        if !handle.is_null() {
            stop_in(table, handle);
        }
    };
    let mut steps_without_op = 0;
    let mut seq = 0;
    while !stop.load(Ordering::Relaxed) {
        let group_api = start("GroupApi", &mut group_api7(1));
        record(
            group_api,
            "GroupStartApiStop",
            state::GROUP_START_API_STOP,
            None,
        );
        let coll_api = start(
            "CollApi",
            &mut coll_api7(group_api, c"AllReduce", 1024, c"ncclFloat32"),
        );
        end(coll_api);
        record(
            group_api,
            "GroupEndApiStart",
            state::GROUP_END_API_START,
            None,
        );
        let launch = start("KernelLaunch", &mut plain7(t::KERNEL_LAUNCH, group_api));
        end(launch);
        let group = start("Group", &mut plain7(t::GROUP, Handle::NULL));
        let coll = start(
            "Coll",
            &mut coll7(
                coll_api,
                group,
                0,
                seq,
                c"AllReduce",
                1024,
                c"ncclFloat32",
                1,
            ),
        );
        end(coll);
        end(group);
        end(group_api);
        let op = start("ProxyOp", &mut proxy_op7(coll, 0, pid(), 0, 0, true));
        for step in 0..STEPS {
            let s = start("ProxyStep", &mut proxy_step7(op, 0, step));
            if op.is_null() {
                steps_without_op += u64::from(!s.is_null());
            } else {
                for (name, value, _) in SEND_STEP_STATES {
                    record(s, name, value, Some(trans_size(4096)));
                }
            }
            end(s);
        }
        end(op);
        let gpu_start = monotonic_ns();
        let kernel = start("KernelCh", &mut kernel_ch7(coll, 0, gpu_start));
        record(
            kernel,
            "KernelChStop",
            state::KERNEL_CH_STOP,
            Some(ptimer(monotonic_ns())),
        );
        end(kernel);
        seq += 1;
    }
    finalize_in(table, ctx);
    tally.states = states;
    tally.steps_without_op = steps_without_op;
    tally
}

/// The kernel channels' GPU timer: the host's monotonic clock stands in for it.
fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

fn storm_seconds() -> u64 {
    match std::env::var("STORM_SECONDS") {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("STORM_SECONDS={text}: not a number of seconds")),
        Err(_) => 10,
    }
}

/// Runs the storm with `NCCL_SCOREP_ON_FULL=on_full`; returns what the threads did and
/// the trace part's anchor.
fn storm(on_full: &str, seconds: u64) -> (Plugin, Tally, PathBuf) {
    let plugin = Plugin::load(&[
        ("NCCL_SCOREP_MODE", "otf2"),
        ("NCCL_SCOREP_JSONL", "0"),
        ("NCCL_SCOREP_EVENTS", "all"),
        ("NCCL_SCOREP_STEP_STATES", "1"),
        ("NCCL_SCOREP_BUFFER_SIZE", "4K"),
        ("NCCL_SCOREP_ON_FULL", on_full),
    ]);
    let stop = AtomicBool::new(false);
    let began = Instant::now();
    let mut tally = Tally::default();
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..THREADS)
            .map(|thread| {
                let (plugin, stop) = (&plugin, &stop);
                scope.spawn(move || storm_thread(plugin, thread, stop))
            })
            .collect();
        std::thread::sleep(Duration::from_secs(seconds));
        stop.store(true, Ordering::Relaxed);
        for thread in threads {
            tally.add(&thread.join().expect("a storm thread"));
        }
    });
    println!(
        "{on_full}: {seconds} s of storm, the trace finished {:.1} s after its start",
        began.elapsed().as_secs_f64()
    );
    let anchor = only_part_anchor(&plugin.out_dir());
    (plugin, tally, anchor)
}

fn only_part_anchor(out: &Path) -> PathBuf {
    let parts: Vec<PathBuf> = std::fs::read_dir(out.join("parts"))
        .expect("a parts directory")
        .map(|e| e.unwrap().path().join("traces.otf2"))
        .collect();
    assert_eq!(parts.len(), 1, "one part: {parts:?}");
    assert!(parts[0].is_file(), "{} was written", parts[0].display());
    parts[0].clone()
}

/// `Enter` records per region name, every location: `otf2-print`'s lines read as they
/// come (a 10 s trace is far too large to hold its text).
fn enters_by_region(anchor: &Path) -> BTreeMap<String, u64> {
    let mut child = Command::new("otf2-print")
        .arg(anchor)
        .stdout(Stdio::piped())
        .spawn()
        .expect("otf2-print (Debian package otf2-tools) must be installed");
    let mut enters = BTreeMap::new();
    let mut line = String::new();
    let mut reader = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if !line.starts_with("ENTER ") {
            continue;
        }
        // ENTER  <location>  <time>  Region: "<name>" <<id>>
        let name = line
            .split_once("Region: \"")
            .and_then(|(_, rest)| rest.rsplit_once('"'))
            .map(|(name, _)| name)
            .unwrap_or_else(|| panic!("an Enter without a region: {line}"));
        *enters.entry(name.to_owned()).or_default() += 1;
    }
    assert!(child.wait().unwrap().success(), "otf2-print failed");
    enters
}

/// The trace's regions that show an event of each kind the threads start (a kernel
/// channel whose operation is not known any more is `NCCL kernel`; a step whose operation
/// and states were all dropped is `proxy step`).
const REGIONS_OF_KIND: [(&str, &[&str]); 8] = [
    ("GroupApi", &["ncclGroup"]),
    ("CollApi", &["ncclAllReduce"]),
    ("KernelLaunch", &["NCCL kernel launch"]),
    ("Group", &["NCCL plan enqueue"]),
    ("Coll", &["AllReduce enqueue"]),
    ("ProxyOp", &["proxy send"]),
    ("ProxyStep", &["send step", "proxy step"]),
    ("KernelCh", &["AllReduce kernel", "NCCL kernel"]),
];

fn count(map: &BTreeMap<String, u64>, name: &str) -> u64 {
    map.get(name).copied().unwrap_or(0)
}

/// The trace's events of each kind: Enter records of its regions.
fn events_in_trace(enters: &BTreeMap<String, u64>) -> BTreeMap<&'static str, u64> {
    REGIONS_OF_KIND
        .iter()
        .map(|(kind, regions)| (*kind, regions.iter().map(|r| count(enters, r)).sum()))
        .collect()
}

/// A `NCCL_SCOREP::LOST::<COUNTER>` property (absent: 0).
fn lost(properties: &BTreeMap<String, String>, counter: &str) -> u64 {
    properties
        .get(&format!("LOST::{}", counter.to_ascii_uppercase()))
        .map_or(0, |v| v.parse().expect("a number"))
}

/// What one storm's trace holds, next to what its threads did.
struct Checked {
    started: u64,
    written: u64,
    lost_starts: u64,
    enters: BTreeMap<String, u64>,
    properties: BTreeMap<String, String>,
}

/// Checks one storm's trace against what its threads did: the same events of every
/// kind, the rest counted as lost, the trace valid.
fn check_storm(on_full: &str, tally: &Tally, anchor: &Path) -> Checked {
    let (_, properties) = otf2_properties::nccl_scorep_properties(anchor);
    let read = Instant::now();
    let enters = enters_by_region(anchor);
    let in_trace = events_in_trace(&enters);
    let started: u64 = tally.started.values().sum();
    let written: u64 = in_trace.values().sum();
    let lost_starts = lost(&properties, "lost_starts");
    println!(
        "{on_full}: {started} events started, {written} in the trace, {lost_starts} lost \
         (otf2-print read it in {:.1} s)\n  started {:?}\n  issued  {:?}\n  trace   \
         {in_trace:?}\n  states  {:?}\n  regions {enters:?}\n  lost    {:?}",
        read.elapsed().as_secs_f64(),
        tally.started,
        tally.issued,
        tally.states,
        properties
            .iter()
            .filter(|(name, _)| name.starts_with("LOST::"))
            .collect::<BTreeMap<_, _>>(),
    );
    // Every event the plugin gave a handle for is in the trace, once, under its kind.
    for (kind, _) in REGIONS_OF_KIND {
        assert_eq!(
            in_trace[kind],
            tally.issued.get(kind).copied().unwrap_or(0),
            "{on_full}: {kind} events in the trace"
        );
    }
    // A step is named by its operation, else by its states: a step without either says
    // no direction, and none is called a receive step.
    assert_eq!(
        count(&enters, "recv step"),
        0,
        "{on_full}: only send steps were made"
    );
    assert!(
        count(&enters, "proxy step") >= tally.steps_without_op,
        "{on_full}: {} steps without their operation and states, {} `proxy step`",
        tally.steps_without_op,
        count(&enters, "proxy step")
    );
    assert_eq!(
        count(&enters, "AllReduce"),
        tally.issued["Coll"],
        "{on_full}: an operation on the ops stream for every Coll"
    );
    // Every other start was refused, and the trace's properties say how many and why.
    assert_eq!(
        started - written,
        lost_starts + lost(&properties, "memory_limit_events") + lost(&properties, "slab_full"),
        "{on_full}: events started = events in the trace + events counted as lost"
    );
    // The records a full ring dropped: lost starts, stops and states, nothing else.
    assert_eq!(
        lost(&properties, "ring_full"),
        lost_starts + lost(&properties, "lost_stops") + lost(&properties, "lost_states"),
        "{on_full}: ring_full"
    );
    // A step's wait states: an interval for each state that arrived (the three differ).
    let mut states_missing = 0;
    for (state, _, region) in SEND_STEP_STATES {
        let issued = tally.states.get(state).copied().unwrap_or(0);
        let shown = count(&enters, region);
        assert!(shown <= issued, "{on_full}: {region}: {shown} of {issued}");
        states_missing += issued - shown;
    }
    let lost_states = lost(&properties, "lost_states") + lost(&properties, "memory_limit_states");
    // The other states may be among the lost ones too: GroupEndApiStart (which begins
    // `ncclGroupEnd launch`), GroupStartApiStop and KernelChStop (no interval of their own).
    let others: u64 = ["GroupEndApiStart", "GroupStartApiStop", "KernelChStop"]
        .iter()
        .map(|state| tally.states.get(state).copied().unwrap_or(0))
        .sum();
    assert!(
        states_missing <= lost_states && lost_states <= states_missing + others,
        "{on_full}: {states_missing} step states missing from the trace, {lost_states} states \
         counted as lost"
    );
    println!(
        "{on_full}: {} steps without their operation; the part is {} bytes",
        tally.steps_without_op,
        bytes_under(anchor.parent().unwrap())
    );
    let validating = Instant::now();
    let report = validate_json::assert_validates(anchor.parent().unwrap(), false);
    println!(
        "{on_full}: nccl-scorep validate: valid, {} records ({:.1} s)",
        report["counts"]["events"],
        validating.elapsed().as_secs_f64()
    );
    Checked {
        started,
        written,
        lost_starts,
        enters,
        properties,
    }
}

/// `nccl-scorep summary --json` of the run directory: its losses are the trace's.
fn check_summary(out: &Path, properties: &BTreeMap<String, String>) {
    let summary = summary_json(out);
    for counter in ["lost_starts", "lost_stops", "lost_states", "ring_full"] {
        assert_eq!(
            summary["losses"][counter].as_u64(),
            Some(lost(properties, counter)),
            "summary's {counter}: {}",
            summary["losses"]
        );
    }
}

/// `nccl-scorep summary --json` of the storm's output directory.
fn summary_json(out: &Path) -> serde_json::Value {
    let output = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .args(["summary", "--json"])
        .arg(out)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn a_storm_drops_events_and_says_how_many_or_waits_and_loses_none() {
    let seconds = storm_seconds();

    let (plugin, tally, anchor) = storm("drop", seconds);
    let drop = check_storm("drop", &tally, &anchor);
    assert!(
        drop.lost_starts > drop.written,
        "a 4 KiB ring under four threads loses most events: {} lost, {} kept",
        drop.lost_starts,
        drop.written
    );
    assert!(
        count(&drop.enters, "NCCL records lost") > 0,
        "the gaps are shown"
    );
    check_summary(&plugin.out_dir(), &drop.properties);
    drop_storm(plugin);

    let (plugin, tally, anchor) = storm("wait", seconds);
    let wait = check_storm("wait", &tally, &anchor);
    assert_eq!(
        (wait.written, wait.lost_starts),
        (wait.started, 0),
        "wait: nothing lost"
    );
    let losses: Vec<_> = wait
        .properties
        .keys()
        .filter(|name| name.starts_with("LOST::"))
        .collect();
    assert!(
        losses.is_empty(),
        "wait: every loss counter is 0: {losses:?}"
    );
    assert_eq!(count(&wait.enters, "NCCL records lost"), 0, "wait: no gap");
    // What waiting cost NCCL's threads is shown: an interval per wait, added up by the
    // summary.
    let waits = count(&wait.enters, "NCCL held back by the plugin");
    assert!(waits > 0, "wait: the threads' waits are in the trace");
    let held_back = &summary_json(&plugin.out_dir())["held_back"];
    let (total, longest) = (
        held_back["total_ns"].as_u64().unwrap(),
        held_back["longest_ns"].as_u64().unwrap(),
    );
    println!(
        "wait: the threads waited {waits} times, {:.1} ms in all, the longest {:.3} ms",
        total as f64 / 1e6,
        longest as f64 / 1e6
    );
    assert_eq!(held_back["waits"].as_u64(), Some(waits), "{held_back}");
    assert!(total >= longest && longest > 0, "{held_back}");
    drop_storm(plugin);
}

/// Removes a storm's trace, or keeps it with `STORM_KEEP=1` (and says where).
fn drop_storm(plugin: Plugin) {
    if std::env::var_os("STORM_KEEP").is_some() {
        println!("kept {}", plugin.out_dir().display());
        std::mem::forget(plugin);
    }
}

/// The bytes of the files under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let metadata = entry.metadata().unwrap();
            if metadata.is_dir() {
                bytes_under(&entry.path())
            } else {
                metadata.len()
            }
        })
        .sum()
}

/// A communicator finalized by a thread whose ring is full (`drop`): its finalize record
/// waits for room instead of being dropped, so the flight recorder (`nccl-scorep status`)
/// shows the communicator finalized while another one still runs.
#[test]
fn a_finalize_on_a_full_ring_is_not_dropped() {
    let plugin = Plugin::load(&[
        ("NCCL_SCOREP_MODE", "otf2"),
        ("NCCL_SCOREP_JSONL", "0"),
        ("NCCL_SCOREP_BUFFER_SIZE", "4K"),
        ("NCCL_SCOREP_ON_FULL", "drop"),
    ]);
    let table = plugin.v7();
    let (finalized, _) = plugin.init_v7(0x5707_00f1, Some(c"finalized"), 0, 1);
    let (running, _) = plugin.init_v7(0x5707_00f2, Some(c"running"), 0, 1);
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // Far more records than a 4 KiB ring holds, as fast as possible: the ring
                // is full when the finalize comes.
                for seq in 0..20_000 {
                    let coll = start_in(
                        table,
                        finalized,
                        &mut coll7(
                            Handle::NULL,
                            Handle::NULL,
                            0,
                            seq,
                            c"AllReduce",
                            1024,
                            c"ncclFloat32",
                            1,
                        ),
                    );
                    if !coll.is_null() {
                        stop_in(table, coll);
                    }
                }
                finalize_in(table, finalized);
            })
            .join()
            .unwrap();
    });
    // The collector looks at the rings every 2 ms; a busy machine may delay it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        let status = flight_status(&plugin.out_dir());
        if finalized_of(&status, "0x00000000570700f1") == Some(true) || Instant::now() > deadline {
            break status;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        finalized_of(&status, "0x00000000570700f1"),
        Some(true),
        "{status:#}"
    );
    assert_eq!(
        finalized_of(&status, "0x00000000570700f2"),
        Some(false),
        "{status:#}"
    );
    finalize_in(table, running);
}

/// `nccl-scorep status --json` of a run directory: what its flight recorders say.
fn flight_status(out: &Path) -> serde_json::Value {
    let output = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .args(["status", "--json"])
        .arg(out)
        .output()
        .unwrap();
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON from nccl-scorep status ({e}): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Whether the flight recorder says rank 0 of communicator `hash` was finalized (`None`
/// while it does not list the communicator).
fn finalized_of(status: &serde_json::Value, hash: &str) -> Option<bool> {
    status["communicators"]
        .as_array()?
        .iter()
        .find(|c| c["comm_hash"] == hash)?["ranks"][0]["finalized"]
        .as_bool()
}
