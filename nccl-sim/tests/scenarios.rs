//! Every scenario against our plugin, through every release's API version, asserting on
//! what the plugin recorded.

use nccl_sim::nccl::{Nccl, SimConfig};
use nccl_sim::profiler::Profiler;
use nccl_sim::release::Release;
use nccl_sim::scenario::{self, Params};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn our_plugin() -> PathBuf {
    nccl_sim::our_plugin_for_tests()
}

struct Run {
    _dir: tempfile::TempDir,
    out: PathBuf,
    nccl: Arc<Nccl>,
}

/// The plugin reads its settings from the environment at its first init: runs of this
/// file do not overlap.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs one scenario with a fresh copy of our plugin (fresh statics) on `release`.
fn run(release: &str, name: &str, events: &str, ranks: i32, iterations: usize) -> Run {
    run_with(release, None, name, events, ranks, iterations)
}

/// As [`run`], using at most API `max_version` of the plugin (NCCL's shims for older ones).
fn run_with(
    release: &str,
    max_version: Option<u8>,
    name: &str,
    events: &str,
    ranks: i32,
    iterations: usize,
) -> Run {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let lib = dir
        .path()
        .join(format!("libnccl-profiler-scorep-{name}.so"));
    std::fs::copy(our_plugin(), &lib).unwrap();
    let out = dir.path().join("out");
    // The plugin reads its settings at its first init, below, in this thread.
    std::env::set_var("NCCL_SCOREP_OUTPUT_DIR", &out);
    std::env::set_var("NCCL_SCOREP_EVENTS", events);
    std::env::set_var("NCCL_SCOREP_JSONL", "1");
    let release: Release = release.parse().unwrap();
    let mut profiler = Profiler::new(release, Some(lib.into_os_string()));
    if let Some(version) = max_version {
        profiler = profiler.with_max_version(version);
    }
    let profiler = Arc::new(profiler);
    let mut config = SimConfig::default();
    config.time.speedup = 20.0;
    let config = scenario::config_for(name, &config);
    let nccl = Nccl::new(profiler, config);
    let params = Params::single_process(ranks, iterations);
    assert!(
        scenario::run(name, &nccl, &params),
        "unknown scenario {name}"
    );
    Run {
        _dir: dir,
        out,
        nccl,
    }
}

fn lines(out: &Path) -> Vec<Value> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(out).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "jsonl") {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        all.extend(
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()),
        );
    }
    all
}

fn events(run: &Run) -> Vec<Value> {
    lines(&run.out)
        .into_iter()
        .filter(|l| l["type"] == "event")
        .collect()
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["kind"] == kind).count()
}

#[test]
fn single_allreduce_on_the_newest_release() {
    let run = run("2.32", "single", "all", 2, 3);
    let events = events(&run);
    assert_eq!(count(&events, "GroupApi"), 6);
    assert_eq!(count(&events, "CollApi"), 6);
    assert_eq!(count(&events, "KernelLaunch"), 6);
    assert_eq!(count(&events, "Group"), 6);
    assert_eq!(count(&events, "Coll"), 6);
    assert_eq!(count(&events, "KernelCh"), 12, "2 channels x 6");
    for coll in events.iter().filter(|e| e["kind"] == "Coll") {
        assert_eq!(coll["parent"]["kind"], "CollApi");
        assert_eq!(coll["func"], "AllReduce");
    }
    let truth = run.nccl.truth.records();
    assert_eq!(truth.len(), 6);
    assert_eq!(
        run.nccl.profiler.version(),
        None,
        "unloaded after the last finalize"
    );
    // Nothing left open at finalize: every handle NCCL got was stopped (but for the
    // receive steps NCCL itself restarts).
    let c = counters(&run);
    assert_eq!(c["closed_at_finalize"], 0);
    assert_eq!(c["orphan_records"], 0);
    assert_eq!(c["stop_double"], 0);
    // The GPU timestamps are the ground truth's GPU interval on the GPU clock.
    let offset = run.nccl.config.gpu_clock.offset_ns as u64;
    for coll in of(&events, "Coll") {
        let (rank, seq) = (
            coll["rank"].as_i64().unwrap(),
            coll["seq"].as_u64().unwrap(),
        );
        let record = truth
            .iter()
            .find(|t| i64::from(t.rank) == rank && t.seq == seq)
            .expect("truth for every collective");
        assert!(record.enqueue_start_ns <= record.enqueue_stop_ns);
        assert!(record.gpu_start_ns < record.gpu_stop_ns);
        assert!(record.gpu_stop_ns <= record.completion_ns);
        let kernel = events
            .iter()
            .find(|k| {
                k["kind"] == "KernelCh" && k["parent"]["id"] == coll["id"] && k["channel"] == 0
            })
            .expect("a kernel on channel 0");
        let start = kernel["ptimer_start"].as_u64().unwrap() - offset;
        let stop = kernel["states"][0]["ptimer"].as_u64().unwrap() - offset;
        assert_eq!(start, record.gpu_start_ns);
        assert_eq!(stop, record.gpu_stop_ns);
        // The plugin's own conversion to host time is never early, and late by no more
        // than its stated error bound (a microsecond of slack for the host clock's
        // calibration). How late in practice depends on how busy the machine is.
        let error = kernel["gpu_clock_error_ns"]
            .as_u64()
            .expect("a two-sided bound on 2.28+");
        for (field, truth) in [
            ("gpu_start_ns", record.gpu_start_ns),
            ("gpu_stop_ns", record.gpu_stop_ns),
        ] {
            let converted = kernel[field].as_u64().unwrap();
            assert!(
                converted + 1_000 >= truth && converted <= truth + error + 1_000,
                "{field}: {converted} vs {truth} (error bound {error})"
            );
        }
    }
}

fn comm_lines(run: &Run) -> Vec<Value> {
    lines(&run.out)
        .into_iter()
        .filter(|l| l["type"] == "comm")
        .collect()
}

fn counters(run: &Run) -> Value {
    lines(&run.out)
        .into_iter()
        .rfind(|l| l["type"] == "summary")
        .expect("summary")["counters"]
        .clone()
}

fn of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

fn state_names(event: &Value) -> Vec<String> {
    event["states"]
        .as_array()
        .map(|s| {
            s.iter()
                .map(|s| s["state"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_user_group_has_one_group_api_of_depth_two() {
    let run = run("2.32", "group", "all", 2, 2);
    let events = events(&run);
    let group_apis = of(&events, "GroupApi");
    assert_eq!(group_apis.len(), 4, "one per rank and iteration");
    for g in &group_apis {
        assert_eq!(g["group_depth"], 2);
        assert_eq!(state_names(g), ["GroupStartApiStop", "GroupEndApiStart"]);
    }
    assert_eq!(count(&events, "CollApi"), 12);
    assert_eq!(count(&events, "KernelLaunch"), 4);
    let colls = of(&events, "Coll");
    assert_eq!(colls.len(), 12);
    let all_gather: Vec<_> = colls.iter().filter(|c| c["func"] == "AllGather").collect();
    assert_eq!(all_gather.len(), 4);
    for c in all_gather {
        assert_eq!(c["datatype"], "ncclInt8", "AllGather counts bytes");
        assert_eq!(c["bytes"], c["count"]);
    }
    assert_eq!(counters(&run)["orphan_records"], 0);
}

#[test]
fn a_nested_group_ends_the_group_api_early() {
    let run = run("2.32", "nested-group", "all", 2, 1);
    let events = events(&run);
    // Per rank: the GroupApi of the first op stops at the inner end; the second op starts
    // a new one.
    assert_eq!(count(&events, "GroupApi"), 4);
    assert_eq!(count(&events, "Coll"), 4);
}

#[test]
fn one_thread_drives_every_comm_under_one_group_api() {
    let run = run("2.32", "multi-comm", "all", 4, 2);
    let events = events(&run);
    assert_eq!(count(&events, "GroupApi"), 2, "thread-local: one per group");
    let apis = of(&events, "CollApi");
    assert_eq!(apis.len(), 8);
    let contexts: std::collections::HashSet<_> = apis
        .iter()
        .map(|a| a["context"].as_str().unwrap())
        .collect();
    assert_eq!(contexts.len(), 4, "each comm's CollApi has its own context");
    for api in apis {
        assert_eq!(
            api["parent"]["kind"], "GroupApi",
            "parent is the shared GroupApi"
        );
    }
}

#[test]
fn p2p_rounds_and_alltoall_lowering() {
    let run = run("2.32", "p2p", "all", 4, 2);
    let events = events(&run);
    assert_eq!(count(&events, "P2pApi"), 16);
    let p2p = of(&events, "P2p");
    assert_eq!(p2p.len(), 16);
    for e in &p2p {
        assert_eq!(e["parent"]["kind"], "P2pApi");
        let (rank, peer) = (e["rank"].as_i64().unwrap(), e["peer"].as_i64().unwrap());
        if e["func"] == "Send" {
            assert_eq!(peer, (rank + 1) % 4);
        } else {
            assert_eq!(peer, (rank + 3) % 4);
        }
    }

    let run = run_with("2.32", None, "alltoall", "all", 3, 1);
    let events = events_of(&run);
    let apis = of(&events, "P2pApi");
    assert_eq!(apis.len(), 3 * 6, "a P2pApi per send and per receive");
    assert!(apis
        .iter()
        .all(|a| a["func"] == "Send" || a["func"] == "Recv"));
    let groups = of(&events, "GroupApi");
    assert_eq!(groups.len(), 3);
    assert!(groups.iter().all(|g| g["group_depth"] == 1));
}

#[test]
fn graph_replays_start_on_another_thread_with_the_capture_parent() {
    let run = run("2.32", "graph", "all", 2, 3);
    let events = events(&run);
    let apis = of(&events, "CollApi");
    assert_eq!(apis.len(), 2, "captured once per rank");
    assert!(apis.iter().all(|a| a["graph_captured"] == true));
    let colls = of(&events, "Coll");
    assert_eq!(colls.len(), 6, "one per replay and rank");
    for c in &colls {
        let api = apis.iter().find(|a| a["rank"] == c["rank"]).unwrap();
        assert_eq!(c["parent"]["id"], api["id"], "the capture-time CollApi");
        assert_ne!(
            c["start_thread"], api["start_thread"],
            "replayed on the callback thread"
        );
    }
}

#[test]
fn the_network_path_has_steps_restarts_and_stale_sizes() {
    let run = run("2.32", "single", "all", 2, 2);
    let events = events(&run);
    let ops = of(&events, "ProxyOp");
    assert_eq!(
        ops.len(),
        2 * 2 * 2 * 2,
        "rank x iteration x channel x direction"
    );
    for op in &ops {
        assert_eq!(op["closed"], "stop");
        assert_eq!(op["parent"]["kind"], "Coll");
        assert_eq!(state_names(op), ["ProxyOpInProgress"]);
    }
    let steps = of(&events, "ProxyStep");
    let restarted = steps.iter().filter(|s| s["closed"] == "restarted").count();
    assert!(restarted > 0, "some receive steps start twice");
    let sends: Vec<_> = steps
        .iter()
        .filter(|s| state_names(s).first().map(String::as_str) == Some("ProxyStepSendGPUWait"))
        .collect();
    for s in &sends {
        let names = state_names(s);
        assert_eq!(names.last().unwrap(), "ProxyStepSendWait");
        assert!(
            names
                .iter()
                .filter(|n| *n == "ProxyStepSendPeerWait")
                .count()
                >= 1
        );
    }
    assert_eq!(
        counters(&run)["restarted_steps"].as_u64().unwrap(),
        restarted as u64
    );
    let ctrl = of(&events, "ProxyCtrl");
    assert!(ctrl
        .iter()
        .any(|c| state_names(c) == ["ProxyCtrlAppend", "ProxyCtrlAppendEnd"]));
    assert!(ctrl
        .iter()
        .any(|c| state_names(c) == ["ProxyCtrlSleep", "ProxyCtrlWakeup"]));
    let kernels = of(&events, "KernelCh");
    assert_eq!(kernels.len(), 8);
    for k in kernels {
        let start = k["ptimer_start"].as_u64().unwrap();
        let stop = k["states"][0]["ptimer"].as_u64().unwrap();
        assert!(stop > start);
        assert_eq!(k["parent"]["kind"], "Coll");
    }
}

#[test]
fn proxy_ops_of_copy_transports_are_never_stopped() {
    let run = run("2.32", "p2p-copy", "all", 2, 2);
    let events = events(&run);
    let ops = of(&events, "ProxyOp");
    assert_eq!(ops.len(), 16);
    assert!(ops.iter().all(|o| o["closed"] == "finalize"));
    assert_eq!(count(&events, "ProxyStep"), 0);
}

#[test]
fn net_plugin_events_hang_under_send_steps() {
    let run = run("2.32", "net-plugin", "all", 2, 1);
    let events = events(&run);
    let net = of(&events, "NetPlugin");
    assert!(!net.is_empty());
    for n in &net {
        assert_eq!(n["net"]["type"], "ib_qp");
        assert_eq!(n["parent"]["kind"], "ProxyStep");
    }
    // Without NetPlugin in the mask the handle stays NULL and NCCL stops it anyway.
    let run = run_with("2.32", None, "net-plugin", "default,steps", 2, 1);
    assert_eq!(count(&events_of(&run), "NetPlugin"), 0);
    assert!(counters(&run)["stop_null"].as_u64().unwrap() > 0);
}

fn events_of(run: &Run) -> Vec<Value> {
    events(run)
}

#[test]
fn copy_engine_events_on_the_ce_path() {
    let run = run("2.32", "ce", "all", 2, 2);
    let events = events(&run);
    let ce = of(&events, "CeColl");
    assert_eq!(ce.len(), 4);
    assert!(ce.iter().all(|c| c["parent"]["kind"] == "CollApi"));
    assert_eq!(count(&events, "CeSync"), 4);
    assert_eq!(count(&events, "CeBatch"), 4);
    assert_eq!(count(&events, "Coll"), 0);
}

#[test]
fn a_split_child_keeps_the_parents_proxy_after_the_parent_is_gone() {
    let run = run("2.32", "split", "all", 2, 3);
    let comms = comm_lines(&run);
    assert_eq!(comms.len(), 4, "two parents, two children");
    let events = events(&run);
    let colls = of(&events, "Coll");
    let hashes: std::collections::HashSet<_> = colls
        .iter()
        .map(|c| c["comm_hash"].as_str().unwrap())
        .collect();
    assert_eq!(hashes.len(), 2);
    assert_eq!(counters(&run)["bad_finalize"], 0);
    assert_eq!(
        counters(&run)["stale_context"],
        0,
        "the parent's context stays valid"
    );
}

#[test]
fn nonblocking_launches_run_on_another_thread() {
    let run = run("2.32", "nonblocking", "all", 2, 2);
    let events = events(&run);
    for launch in of(&events, "KernelLaunch") {
        let group = events
            .iter()
            .find(|e| e["id"] == launch["parent"]["id"])
            .unwrap();
        assert_ne!(launch["start_thread"], group["start_thread"]);
    }
}

#[test]
fn what_nccl_does_not_emit() {
    let run = run("2.32", "special", "all", 2, 2);
    let events = events(&run);
    // Broadcast on 2.29+: CollApi only; count == 0 and the one-rank comm: nothing.
    let apis = of(&events, "CollApi");
    assert_eq!(apis.len(), 4);
    assert!(apis.iter().all(|a| a["func"] == "Broadcast"));
    assert_eq!(count(&events, "Coll"), 0);
    assert_eq!(count(&events, "KernelLaunch"), 0);

    // Before 2.29, Broadcast is a real collective.
    let run = run_with("2.28", None, "special", "all", 2, 1);
    assert_eq!(count(&events_of(&run), "Coll"), 2);
}

/// Every release calls its newest API directly; a plugin limited to an older API goes
/// through NCCL's shim for it. Every version of our plugin is exercised.
#[test]
fn every_release_and_every_exported_version() {
    for release in Release::all() {
        let run = run(&release.to_string(), "single", "all", 2, 1);
        let comms = comm_lines(&run);
        let contexts: std::collections::HashSet<_> =
            comms.iter().map(|c| c["context"].clone()).collect();
        assert_eq!(contexts.len(), 2, "{release}");
        assert_eq!(comms[0]["api_version"], release.newest_api(), "{release}");
        if release.task_descriptors_carry_comm() {
            // API v1/v2 inits carry no comm; the task descriptors' hash completes it.
            let hash = format!("{:#x}", Params::single_process(2, 1).comm_hash);
            let learned: Vec<_> = comms.iter().filter(|c| c["comm_hash"] == hash).collect();
            assert_eq!(learned.len(), 2, "{release}: {comms:?}");
        } else {
            assert_eq!(comms.len(), 2, "{release}");
        }
        let events = events(&run);
        assert_eq!(count(&events, "Coll"), 2, "{release}");
        assert_eq!(
            count(&events, "GroupApi"),
            if release.has_api_events() { 2 } else { 0 },
            "{release}"
        );
        assert_eq!(counters(&run)["unknown_type"], 0, "{release}");
        for kernel in of(&events, "KernelCh") {
            if !release.kernel_ch_has_timestamps() {
                assert!(kernel.get("gpu_start_ns").is_none(), "{release}: no pTimer");
            } else if release.has_api_events() {
                assert!(kernel["gpu_clock_error_ns"].is_u64(), "{release}");
            } else {
                // No API call to bound the offset from below before 2.28.
                assert!(kernel["gpu_start_ns"].is_u64(), "{release}");
                assert!(kernel["gpu_clock_error_ns"].is_null(), "{release}");
            }
        }
    }
    for version in 1..=6u8 {
        let run = run_with("2.32", Some(version), "single", "all", 2, 1);
        let comms = comm_lines(&run);
        assert_eq!(
            comms[0]["api_version"], version,
            "v{version} through its shim"
        );
        let events = events(&run);
        assert_eq!(count(&events, "Coll"), 2, "v{version}");
        let c = counters(&run);
        assert_eq!(
            c["unknown_type"], 0,
            "shims drop what v{version} cannot carry"
        );
        assert_eq!(c["unknown_state"], 0, "v{version}");
        if version < 5 {
            assert_eq!(count(&events, "GroupApi"), 0, "v{version}");
            for coll in of(&events, "Coll") {
                assert_eq!(coll["parent"]["kind"], "Group", "v1-v4 hierarchy");
            }
        }
        if version == 4 {
            for p in of(&events, "P2p") {
                assert!(p["nchannels"].is_null());
            }
        }
    }
}

#[test]
fn kernel_channels_move_to_the_profiler_thread_with_phases_on_2_31() {
    let run = run("2.32", "single", "all", 2, 2);
    let events = events(&run);
    let proxy_threads: std::collections::HashSet<_> = of(&events, "ProxyOp")
        .iter()
        .map(|o| o["start_thread"].clone())
        .collect();
    let kernels = of(&events, "KernelCh");
    assert!(kernels
        .iter()
        .all(|k| !proxy_threads.contains(&k["start_thread"])));
    let phases = of(&events, "KernelPhase");
    assert_eq!(phases.len(), kernels.len() * 3);
    for p in &phases {
        assert_eq!(p["parent"]["kind"], "KernelCh");
        assert_eq!(state_names(p), ["KernelPhaseStop"]);
    }

    // Up to 2.30 the proxy thread reports kernels, and there are no phases.
    let run = run_with("2.30", None, "single", "all", 2, 2);
    let events = events_of(&run);
    let proxy_threads: std::collections::HashSet<_> = of(&events, "ProxyOp")
        .iter()
        .map(|o| o["start_thread"].clone())
        .collect();
    assert!(of(&events, "KernelCh")
        .iter()
        .all(|k| proxy_threads.contains(&k["start_thread"])));
    assert_eq!(count(&events, "KernelPhase"), 0);
}

#[test]
fn a_wrapped_kernel_ring_reports_later_timestamps() {
    let run = run("2.32", "ring-wrap", "coll,kernel_ch", 2, 1);
    let events = events(&run);
    let kernels = of(&events, "KernelCh");
    assert_eq!(kernels.len(), 2 * 70 * 2, "ranks x collectives x channels");
    // Per rank and channel, 6 of the 70 start timestamps are read twice (works 0..5
    // report the times of works 64..69).
    for rank in 0..2 {
        for channel in 0..2 {
            let starts: Vec<u64> = kernels
                .iter()
                .filter(|k| k["rank"] == rank && k["channel"] == channel)
                .map(|k| k["ptimer_start"].as_u64().unwrap())
                .collect();
            let distinct: std::collections::HashSet<_> = starts.iter().collect();
            assert_eq!(
                starts.len() - distinct.len(),
                6,
                "rank {rank} channel {channel}"
            );
        }
    }
}

/// Ranks of one process meet per collective: nobody's collective completes before the
/// late rank arrived, and it arrives late by what it was told.
#[test]
fn a_late_rank_holds_back_everybody_s_completion() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // No profiler at all ("none"): the simulation and its ground truth still run.
    let profiler = Arc::new(Profiler::new("2.32".parse().unwrap(), Some("none".into())));
    let mut config = SimConfig::default();
    config.time.speedup = 20.0;
    let nccl = Nccl::new(profiler, config);
    let mut params = Params::single_process(3, 4);
    params.late = Some((2, std::time::Duration::from_millis(2)));
    assert!(scenario::run("single", &nccl, &params));
    let truth = nccl.truth.records();
    assert_eq!(truth.len(), 12);
    for seq in 0..4 {
        let of_seq: Vec<_> = truth.iter().filter(|t| t.seq == seq).collect();
        let late_arrival = of_seq
            .iter()
            .find(|t| t.rank == 2)
            .unwrap()
            .enqueue_start_ns;
        for t in &of_seq {
            assert!(t.gpu_stop_ns > late_arrival, "seq {seq} rank {}", t.rank);
            assert!(t.completion_ns >= t.gpu_stop_ns);
        }
        // The late rank waits 2 ms after its previous collective is done before it
        // arrives (measured from that, not from the others' arrival: on a loaded machine
        // their threads may be as late).
        if seq > 0 {
            let previous = truth
                .iter()
                .find(|t| t.rank == 2 && t.seq == seq - 1)
                .unwrap();
            assert!(
                late_arrival >= previous.gpu_stop_ns + 2_000_000,
                "rank 2 is late at seq {seq}"
            );
        }
    }
}
