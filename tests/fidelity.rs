//! The plugin's guards against NCCL's own profiler bugs, each injected by nccl-sim (the
//! CPU-only NCCL stand-in): impossible KernelCh timestamps are rejected, flagged in the
//! trace, counted and summarised, and their operations timed by the host; API events get
//! their communicator's rank; type bit 15 is decoded by the profiler API version.

use nccl_sim::bugs::{NcclBug, NcclBugs};
use nccl_sim::nccl::{Nccl, SimConfig};
use nccl_sim::profiler::Profiler;
use nccl_sim::release::Release;
use nccl_sim::scenario::{self, Params};
use nccl_sim::time::TruthRecord;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

#[path = "../nccl-sim/tests/otf2_tools/mod.rs"]
mod otf2_tools;

const RANKS: i32 = 4;
const ITERATIONS: usize = 8;
const CHANNELS: u64 = 2;
/// Host-side times are late by NCCL's (here nccl-sim's) delay in noticing the GPU, never
/// early: this much earlier is clock-reading noise.
const NOISE_NS: i64 = 5_000;

/// The plugin reads its settings from the environment at its first init.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Run {
    _dir: tempfile::TempDir,
    /// The run directory, with the merged trace.
    out: PathBuf,
    trace: Value,
    truth: Vec<TruthRecord>,
    /// The plugin's counters, from its event log's summary line.
    counters: BTreeMap<String, u64>,
    /// The activation mask the plugin returned to `init`.
    mask: u64,
}

/// Runs nccl-sim's `single` scenario (one AllReduce per iteration) on `release` with
/// `bugs` injected, and reads what the plugin wrote.
fn run(release: &str, events: &str, bugs: &[NcclBug]) -> Run {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let name = bugs.first().map_or("none".to_owned(), |b| format!("{b:?}"));
    let lib = dir
        .path()
        .join(format!("libnccl-profiler-scorep-{release}-{name}.so"));
    std::fs::copy(nccl_sim::our_plugin_for_tests(), &lib).unwrap();
    let out = dir.path().join("out");
    std::env::set_var("NCCL_SCOREP_OUTPUT_DIR", &out);
    std::env::set_var("NCCL_SCOREP_EVENTS", events);
    std::env::set_var("NCCL_SCOREP_JSONL", "1");
    std::env::set_var("NCCL_SCOREP_TOOL", env!("CARGO_BIN_EXE_nccl-scorep"));
    let release: Release = release.parse().unwrap();
    let profiler = Arc::new(Profiler::new(release, Some(lib.into_os_string())));
    let mut config = SimConfig::default();
    config.time.speedup = 20.0;
    config.channels = CHANNELS as u8;
    config.bugs = NcclBugs::new(bugs);
    let nccl = Nccl::new(Arc::clone(&profiler), config);
    assert!(scenario::run(
        "single",
        &nccl,
        &Params::single_process(RANKS, ITERATIONS)
    ));
    let mask = profiler.mask();
    let truth = nccl.truth.records();
    drop(nccl);
    for key in [
        "NCCL_SCOREP_OUTPUT_DIR",
        "NCCL_SCOREP_EVENTS",
        "NCCL_SCOREP_JSONL",
        "NCCL_SCOREP_TOOL",
    ] {
        std::env::remove_var(key);
    }
    let anchor = out.join("traces.otf2");
    assert!(anchor.exists(), "the job's last process merged no trace");
    otf2_tools::assert_otf2_print_clean(&anchor);
    Run {
        trace: otf2_tools::dump(&anchor),
        counters: counters(&out),
        _dir: dir,
        out,
        truth,
        mask,
    }
}

/// The counters of the event log's summary line.
fn counters(out: &Path) -> BTreeMap<String, u64> {
    let log = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .expect("an event log");
    let text = std::fs::read_to_string(log).unwrap();
    let summary: Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["type"] == "summary")
        .expect("the event log's summary line");
    summary["counters"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

fn intervals<'a>(trace: &'a Value, region: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    trace["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(move |i| i["region"] == region)
}

fn attr<'a>(interval: &'a Value, name: &str) -> &'a Value {
    &interval["attrs"][name]
}

fn key(interval: &Value) -> (i64, u64) {
    (
        attr(interval, "nccl.rank").as_i64().unwrap(),
        attr(interval, "nccl.seq").as_u64().unwrap(),
    )
}

/// The operations a kernel timestamp bug hits: (rank, seq).
fn hit_operations() -> BTreeSet<(i64, u64)> {
    (0..i64::from(RANKS))
        .flat_map(|rank| (0..ITERATIONS as u64).map(move |seq| (rank, seq)))
        .filter(|&(_, seq)| NcclBug::hits(seq))
        .collect()
}

/// `nccl-scorep summary` of the run directory, as text and as JSON.
fn summary(out: &Path) -> (String, Value) {
    let tool = env!("CARGO_BIN_EXE_nccl-scorep");
    let text = Command::new(tool).arg("summary").arg(out).output().unwrap();
    assert!(text.status.success(), "{text:?}");
    let json = Command::new(tool)
        .args(["summary", "--json"])
        .arg(out)
        .output()
        .unwrap();
    assert!(json.status.success(), "{json:?}");
    (
        String::from_utf8(text.stdout).unwrap(),
        serde_json::from_slice(&json.stdout).unwrap(),
    )
}

/// What every rejected kernel shows, whatever the reason: the kernel intervals and the
/// operations of exactly the hit operations carry the reason, the counter and the summary
/// count them, `validate` accepts the trace, and each flagged operation lies within its
/// host-side bounds: from its enqueue (never before) to shortly after the GPU's true end
/// (never before it), so no operation is seconds long.
fn assert_rejected(run: &Run, reason: &str, counter: &str) {
    let hit = hit_operations();
    let kernels: Vec<&Value> = intervals(&run.trace, "AllReduce kernel").collect();
    assert_eq!(
        kernels.len() as u64,
        RANKS as u64 * ITERATIONS as u64 * CHANNELS
    );
    let flagged: Vec<(i64, u64)> = kernels
        .iter()
        .filter(|k| !attr(k, "nccl.gpu_time_rejected").is_null())
        .map(|k| {
            assert_eq!(attr(k, "nccl.gpu_time_rejected"), reason, "{k}");
            // Host-side times have no GPU clock conversion, so no error bound of one.
            assert!(attr(k, "nccl.gpu_clock_error_ns").is_null(), "{k}");
            key(k)
        })
        .collect();
    assert_eq!(flagged.len() as u64, hit.len() as u64 * CHANNELS);
    assert_eq!(flagged.iter().copied().collect::<BTreeSet<_>>(), hit);

    let ops: Vec<&Value> = intervals(&run.trace, "AllReduce").collect();
    assert_eq!(ops.len(), RANKS as usize * ITERATIONS);
    let mut checked = 0;
    for op in ops {
        let key = key(op);
        let flag = attr(op, "nccl.gpu_time_rejected");
        if !hit.contains(&key) {
            assert!(flag.is_null(), "{key:?} flagged: {op}");
            continue;
        }
        assert_eq!(flag, reason, "{key:?}");
        let truth = run
            .truth
            .iter()
            .find(|t| (i64::from(t.rank), t.seq) == key)
            .unwrap_or_else(|| panic!("no truth for {key:?}"));
        // The ops stream's times less the clock offset are the process's monotonic clock.
        let (start, end) = (op["start"].as_i64().unwrap(), op["end"].as_i64().unwrap());
        let complete = attr(op, "nccl.complete_ns").as_i64().unwrap();
        let offset = end - complete;
        let (start, end) = (start - offset, end - offset);
        let enqueued = truth.enqueue_start_ns as i64;
        let gpu_end = truth.gpu_stop_ns as i64;
        assert!(
            start >= enqueued - NOISE_NS,
            "{key:?} starts before its enqueue"
        );
        assert!(end >= gpu_end - NOISE_NS, "{key:?} ends before the GPU did");
        assert!(
            end - gpu_end < 100_000_000,
            "{key:?} ends {} ns after the GPU",
            end - gpu_end
        );
        checked += 1;
    }
    assert_eq!(checked, hit.len());

    assert_eq!(run.counters[counter], hit.len() as u64 * CHANNELS);
    for other in [
        "gpu_end_before_start",
        "gpu_beyond_host_bounds",
        "gpu_clock_jumps",
        "gpu_phases_rejected",
    ] {
        if other != counter {
            assert_eq!(run.counters[other], 0, "{other}");
        }
    }
    let (text, json) = summary(&run.out);
    let n = hit.len() as u64 * CHANNELS;
    assert_eq!(
        json["gpu_times_rejected"],
        serde_json::json!({ reason: n }),
        "{json:#}"
    );
    let line = format!("{n} GPU kernel intervals had impossible times from NCCL ({reason} {n})");
    assert!(text.contains(&line), "no «{line}» in:\n{text}");

    let validate = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .arg("validate")
        .arg(run.out.join("traces.otf2"))
        .output()
        .unwrap();
    assert!(
        validate.status.success(),
        "validate rejected the trace: {}{}",
        String::from_utf8_lossy(&validate.stdout),
        String::from_utf8_lossy(&validate.stderr)
    );
}

#[test]
fn kernels_that_end_before_they_begin_are_rejected_and_timed_by_the_host() {
    let run = run("2.32", "default", &[NcclBug::KernelEndBeforeStart]);
    assert_rejected(&run, "end_before_start", "gpu_end_before_start");
}

#[test]
fn seconds_long_kernels_in_millisecond_operations_are_rejected() {
    let run = run("2.32", "default", &[NcclBug::KernelSecondsLong]);
    assert_rejected(&run, "beyond_host_bounds", "gpu_beyond_host_bounds");
    // Neither the kernels nor their operations keep the seconds NCCL reported.
    for region in ["AllReduce kernel", "AllReduce"] {
        for interval in intervals(&run.trace, region) {
            let length = interval["end"].as_i64().unwrap() - interval["start"].as_i64().unwrap();
            assert!(length < 1_000_000_000, "{length} ns: {interval}");
        }
    }
}

/// A kernel whose timestamps jumped 2 s is rejected, and never reaches the GPU clock
/// estimate: the other kernels keep their GPU times, within their stated error of the
/// truth.
#[test]
fn kernels_whose_gpu_timer_jumped_are_rejected_and_do_not_shift_the_others() {
    let run = run("2.32", "default", &[NcclBug::KernelClockJump]);
    assert_rejected(&run, "clock_jump", "gpu_clock_jumps");
    let offsets: BTreeMap<(i64, u64), i64> = intervals(&run.trace, "AllReduce")
        .map(|op| {
            let end = op["end"].as_i64().unwrap();
            (
                key(op),
                end - attr(op, "nccl.complete_ns").as_i64().unwrap(),
            )
        })
        .collect();
    let mut good = 0;
    for kernel in intervals(&run.trace, "AllReduce kernel") {
        let key = key(kernel);
        if NcclBug::hits(key.1) {
            continue;
        }
        let truth = run
            .truth
            .iter()
            .find(|t| (i64::from(t.rank), t.seq) == key)
            .unwrap();
        let start = kernel["start"].as_i64().unwrap() - offsets[&key];
        let error = attr(kernel, "nccl.gpu_clock_error_ns")
            .as_i64()
            .expect("an error bound: API events give the estimate its lower bound");
        // Channels start up to 150 ns apart on nccl-sim's GPU.
        let late = start - truth.gpu_start_ns as i64;
        assert!(
            (-NOISE_NS..=error + NOISE_NS + 150).contains(&late),
            "{key:?}: kernel start off by {late} ns, stated error {error} ns"
        );
        good += 1;
    }
    assert_eq!(
        good as u64,
        (RANKS as u64 * ITERATIONS as u64 - hit_operations().len() as u64) * CHANNELS
    );
}

/// NCCL leaves `rank` 0 in every API event's descriptor (NCCL #2300; nccl-sim does the
/// same): each API call must carry the rank of its communicator, the rank its own
/// enqueues (whose descriptors NCCL does fill in) carry on the same thread.
#[test]
fn api_events_carry_their_communicators_rank_not_the_descriptors() {
    let run = run("2.32", "default", &[]);
    let mut api_ranks: BTreeMap<String, BTreeSet<i64>> = BTreeMap::new();
    for call in intervals(&run.trace, "ncclAllReduce") {
        let thread = call["loc"].as_str().unwrap().to_owned();
        api_ranks
            .entry(thread)
            .or_default()
            .insert(attr(call, "nccl.rank").as_i64().unwrap());
    }
    assert_eq!(api_ranks.len(), RANKS as usize, "{api_ranks:?}");
    let mut seen = BTreeSet::new();
    for (thread, ranks) in &api_ranks {
        assert_eq!(ranks.len(), 1, "{thread}: {ranks:?}");
        let enqueue_ranks: BTreeSet<i64> = intervals(&run.trace, "AllReduce enqueue")
            .filter(|e| e["loc"] == thread.as_str())
            .map(|e| attr(e, "nccl.rank").as_i64().unwrap())
            .collect();
        assert_eq!(&enqueue_ranks, ranks, "{thread}");
        seen.extend(ranks);
    }
    assert_eq!(seen, (0..i64::from(RANKS)).collect());
}

/// Type bit 15 is KernelPhase under profiler API v7 (NCCL 2.31+) and nothing under v6:
/// a v6 NCCL sending a KernelStep on bit 15 (as NCCL PR #2316 proposed) must not get
/// kernel phases in the trace. The plugin does not ask a v6 NCCL for bit 15 at all, and
/// refuses and counts what comes anyway.
#[test]
fn type_bit_15_is_decoded_by_the_api_version() {
    let v6 = run("2.30", "all", &[NcclBug::KernelStepOnBit15]);
    assert_eq!(v6.mask & 1 << 15, 0, "mask {:#x}", v6.mask);
    let kernels = RANKS as u64 * ITERATIONS as u64 * CHANNELS;
    assert_eq!(v6.counters["unknown_type"], kernels);
    let regions: Vec<&str> = v6.trace["regions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(
        !regions.iter().any(|r| r.starts_with("kernel phase")),
        "{regions:?}"
    );
    assert_eq!(
        intervals(&v6.trace, "AllReduce kernel").count() as u64,
        kernels
    );

    let v7 = run("2.31", "all", &[]);
    assert_ne!(v7.mask & 1 << 15, 0, "mask {:#x}", v7.mask);
    assert_eq!(v7.counters["unknown_type"], 0);
    assert_eq!(v7.counters["gpu_phases_rejected"], 0, "{:?}", v7.counters);
    // Three phases per kernel channel. The phases of each rank's first channel end
    // before any kernel gave the GPU clock an estimate, and are left out.
    for phase in [
        "kernel phase: initial sync",
        "kernel phase: compute",
        "kernel phase: final sync",
    ] {
        let count = intervals(&v7.trace, phase).count() as u64;
        assert!(
            (kernels - RANKS as u64..=kernels).contains(&count),
            "{count} intervals of {phase}"
        );
    }
}
