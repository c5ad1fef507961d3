//! Communicator lifecycles and the collector's repairs, through the loaded library:
//! concurrent inits, split comms outliving their parent, init/finalize cycles, disabled
//! and masked configurations, events NCCL never stops, full rings, and events stopped on
//! another thread than the one that started them.

mod support;

use nccl_profiler_abi::{event_type as t, state};
use nccl_profiler_scorep::collector::MAX_STEPLESS_PROXY_OPS;
use nccl_profiler_scorep::config::DEFAULT_EVENT_MASK;
use nccl_profiler_scorep::kinds::kinds_of_version;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ptr::null_mut;
use std::sync::{mpsc, Barrier};
use std::time::Duration;
use support::*;

const NULL: Handle = Handle(null_mut());

/// The handles of one AllReduce in NCCL's order.
#[derive(Clone, Copy)]
struct AllReduce {
    group_api: Handle,
    coll_api: Handle,
    launch: Handle,
    group: Handle,
    coll: Handle,
}

fn all_reduce(plugin: &Plugin, ctx: Ctx, rank: i32, seq: u64) -> AllReduce {
    let group_api = plugin.start7(ctx, &mut group_api7(1));
    plugin.record7(group_api, state::GROUP_START_API_STOP, None);
    let coll_api = plugin.start7(
        ctx,
        &mut coll_api7(group_api, c"AllReduce", 1024, c"ncclFloat32"),
    );
    plugin.stop7(coll_api);
    plugin.record7(group_api, state::GROUP_END_API_START, None);
    let launch = plugin.start7(ctx, &mut plain7(t::KERNEL_LAUNCH, group_api));
    plugin.stop7(launch);
    let group = plugin.start7(ctx, &mut plain7(t::GROUP, NULL));
    let coll = plugin.start7(
        ctx,
        &mut coll7(
            coll_api,
            group,
            rank,
            seq,
            c"AllReduce",
            1024,
            c"ncclFloat32",
            2,
        ),
    );
    plugin.stop7(coll);
    plugin.stop7(group);
    plugin.stop7(group_api);
    let ar = AllReduce {
        group_api,
        coll_api,
        launch,
        group,
        coll,
    };
    for h in [group_api, coll_api, launch, group, coll] {
        assert!(!h.is_null());
    }
    ar
}

fn ctx_id(ctx: Ctx) -> String {
    format!("{:#x}", ctx.0 as u64)
}

fn hash_str(hash: u64) -> String {
    format!("{hash:#x}")
}

fn ns(value: &Value) -> u64 {
    value.as_u64().expect("a time in ns")
}

/// 16 comms initialised at once from 16 threads (as `ncclCommInitAll` does), each
/// running 50 AllReduce; rank 0 finalizes while the others are half way.
#[test]
fn sixteen_comms_init_concurrently_and_finalize_while_others_run() {
    const COMMS: usize = 16;
    const OPS: u64 = 50;
    let plugin = Plugin::load(&[("NCCL_SCOREP_BUFFER_SIZE", "256K")]);
    let hash = |rank: usize| 0xc0ff_ee00_0000_0000 | (rank as u64 * 0x1111);
    let go = Barrier::new(COMMS + 1);
    let inited = Barrier::new(COMMS + 1);
    let first_finalized = Barrier::new(COMMS);
    let runs: Vec<(Ctx, i32, i64, Vec<AllReduce>)> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..COMMS)
            .map(|rank| {
                let (plugin, go, inited, first) = (&plugin, &go, &inited, &first_finalized);
                s.spawn(move || {
                    go.wait();
                    let mut ctx = null_mut();
                    let mut mask = 0;
                    // SAFETY: writable context and mask; the settings are held by the
                    // main thread until every init returned.
                    let rc = unsafe {
                        plugin.init_v7_raw(
                            &mut ctx,
                            hash(rank),
                            &mut mask,
                            Some(c"dp"),
                            rank as i32,
                            COMMS as i32,
                        )
                    };
                    assert_eq!(rc, 0);
                    let ctx = Ctx(ctx);
                    inited.wait();
                    let mut ops = Vec::new();
                    for seq in 0..OPS {
                        if rank != 0 && seq == OPS / 2 {
                            first.wait(); // rank 0 has finalized
                        }
                        ops.push(all_reduce(plugin, ctx, rank as i32, seq));
                    }
                    plugin.finalize7(ctx);
                    if rank == 0 {
                        first.wait();
                    }
                    (ctx, mask, gettid(), ops)
                })
            })
            .collect();
        plugin.with_settings(|| {
            go.wait();
            inited.wait();
        });
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });

    let contexts: HashSet<String> = runs.iter().map(|(ctx, ..)| ctx_id(*ctx)).collect();
    assert_eq!(contexts.len(), COMMS, "distinct contexts");
    for (ctx, mask, ..) in &runs {
        assert!(!ctx.0.is_null());
        assert_eq!(*mask as u64, DEFAULT_EVENT_MASK.bits());
    }
    let comms = plugin.lines_of("comm");
    assert_eq!(comms.len(), COMMS);
    let ranks: BTreeSet<i64> = comms.iter().map(|c| c["rank"].as_i64().unwrap()).collect();
    assert_eq!(ranks, (0..COMMS as i64).collect());

    let events = plugin.events();
    assert_eq!(events.len(), COMMS * OPS as usize * 5);
    let by_handle: HashMap<&str, &Value> = events
        .iter()
        .map(|e| (e["id"].as_str().unwrap(), e))
        .collect();
    assert_eq!(by_handle.len(), events.len(), "ids are unique");
    for (rank, (ctx, _, tid, ops)) in runs.iter().enumerate() {
        let colls: Vec<&Value> = events
            .iter()
            .filter(|e| e["kind"] == "Coll" && e["comm_hash"] == hash_str(hash(rank)))
            .collect();
        assert_eq!(colls.len(), OPS as usize);
        let seqs: BTreeSet<u64> = colls.iter().map(|c| c["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, (0..OPS).collect());
        for (seq, ar) in ops.iter().enumerate() {
            let coll = by_handle[id_of(ar.coll).as_str()];
            assert_eq!(coll["seq"], seq as u64);
            assert_eq!(coll["context"], ctx_id(*ctx));
            assert_eq!(coll["rank"], rank as i64);
            assert_eq!(coll["nranks"], COMMS as i64);
            assert_eq!(coll["parent"]["kind"], "CollApi");
            assert_eq!(coll["parent"]["id"], id_of(ar.coll_api));
            assert_eq!(coll["parent_group"], id_of(ar.group));
            let api = by_handle[id_of(ar.coll_api).as_str()];
            assert_eq!(api["parent"]["id"], id_of(ar.group_api));
            assert_eq!(api["rank"], rank as i64, "API events take the comm's rank");
            let launch = by_handle[id_of(ar.launch).as_str()];
            assert_eq!(launch["parent"]["id"], id_of(ar.group_api));
            let group_api = by_handle[id_of(ar.group_api).as_str()];
            assert_eq!(
                state_names(group_api),
                ["GroupStartApiStop", "GroupEndApiStart"]
            );
            for h in [ar.group_api, ar.coll_api, ar.launch, ar.group, ar.coll] {
                let e = by_handle[id_of(h).as_str()];
                assert_eq!(e["closed"], "stop");
                assert_eq!(e["start_thread"], *tid);
                assert_eq!(e["stop_thread"], *tid);
            }
        }
    }
    let summaries = plugin.summaries();
    assert_eq!(summaries.len(), 1, "one cycle: the last finalize ends it");
    assert_counters(&summaries[0], &[("events_written", 4000)]);
}

/// A split child shares its parent's proxy thread: after the parent's finalize, ProxyCtrl
/// events keep coming with the parent's context, including one that was open
/// (asleep) across that finalize.
#[test]
fn split_child_outlives_its_parent_and_proxy_ctrl_keeps_the_parent_context() {
    const PARENT: u64 = 0x9a7e_0001;
    const CHILD: u64 = 0xc41d_0002;
    const OTHER: u64 = 0x07e4_0003;
    let plugin = Plugin::load(&[]);
    let (parent, _) = plugin.init_v7(PARENT, Some(c"world"), 0, 2);
    let (child, _) = plugin.init_v7(CHILD, Some(c"split"), 0, 1);
    let (other, _) = plugin.init_v7(OTHER, Some(c"other"), 1, 2);
    let colls: Vec<(Ctx, AllReduce)> = [(parent, 0), (child, 0), (other, 1)]
        .into_iter()
        .map(|(ctx, rank)| (ctx, all_reduce(&plugin, ctx, rank, 0)))
        .collect();
    let child_coll = colls[1].1.coll;

    let asleep = Barrier::new(2);
    let parent_gone = Barrier::new(2);
    let (sleep, append, op) = std::thread::scope(|s| {
        let proxy = s.spawn(|| {
            let sleep = plugin.start7(parent, &mut plain7(t::PROXY_CTRL, NULL));
            plugin.record7(sleep, state::PROXY_CTRL_SLEEP, Some(appended(0)));
            asleep.wait();
            parent_gone.wait();
            plugin.record7(sleep, state::PROXY_CTRL_WAKEUP, Some(appended(0)));
            plugin.stop7(sleep);
            let append = plugin.start7(parent, &mut plain7(t::PROXY_CTRL, NULL));
            plugin.record7(append, state::PROXY_CTRL_APPEND, Some(appended(0)));
            let op = plugin.start7(child, &mut proxy_op7(child_coll, 0, pid(), 0, 0, true));
            plugin.record7(append, state::PROXY_CTRL_APPEND_END, Some(appended(1)));
            plugin.stop7(append);
            plugin.record7(op, state::PROXY_OP_IN_PROGRESS_V4, None);
            plugin.stop7(op);
            (sleep, append, op)
        });
        asleep.wait();
        plugin.finalize7(parent);
        // Let the collector apply the parent's finalize before the proxy wakes up.
        std::thread::sleep(Duration::from_millis(50));
        parent_gone.wait();
        proxy.join().unwrap()
    });
    for h in [sleep, append, op] {
        assert!(
            !h.is_null(),
            "the finalized parent's context is still accepted"
        );
    }
    plugin.finalize7(parent); // twice: refused
    plugin.finalize7(other);
    assert!(plugin.summaries().is_empty(), "the child still lives");
    plugin.finalize7(child);

    let events = plugin.events();
    assert_eq!(events.len(), 3 * 5 + 3);
    for (ctx, ar) in &colls {
        let coll = by_id(&events, ar.coll);
        assert_eq!(coll["context"], ctx_id(*ctx));
        assert_eq!(coll["closed"], "stop");
    }
    for (h, states) in [
        (sleep, ["ProxyCtrlSleep", "ProxyCtrlWakeup"]),
        (append, ["ProxyCtrlAppend", "ProxyCtrlAppendEnd"]),
    ] {
        let e = by_id(&events, h);
        assert_eq!(e["kind"], "ProxyCtrl");
        assert_eq!(e["context"], ctx_id(parent));
        assert_eq!(e["comm_hash"], hash_str(PARENT));
        assert_eq!(e["comm_name"], "world");
        assert_eq!(e["closed"], "stop", "{e}");
        assert_eq!(state_names(&e), states);
    }
    assert_eq!(by_id(&events, append)["states"][1]["appended"], 1);
    let op_event = by_id(&events, op);
    assert_eq!(op_event["context"], ctx_id(child));
    assert_eq!(op_event["comm_hash"], hash_str(CHILD));
    assert_eq!(op_event["parent"]["id"], id_of(child_coll));
    assert_eq!(plugin.lines_of("comm").len(), 3);
    let summaries = plugin.summaries();
    assert_eq!(summaries.len(), 1);
    assert_counters(
        &summaries[0],
        &[("events_written", 18), ("bad_finalize", 1)],
    );
}

/// A split child that shares its parent's resources has its ProxyOps started with the
/// parent's context (its proxy thread's), their parent being the child's collective. One
/// open across the parent's finalize is the child's, not the parent's: it ends with its
/// own stop, with its states, rather than closed at the parent's finalize.
#[test]
fn a_proxy_op_of_a_split_child_in_its_parent_s_context_outlives_the_parent() {
    const PARENT: u64 = 0x9a7e_0011;
    const CHILD: u64 = 0xc41d_0012;
    let plugin = Plugin::load(&[]);
    let (parent, _) = plugin.init_v7(PARENT, Some(c"world"), 0, 2);
    let (child, _) = plugin.init_v7(CHILD, Some(c"split"), 0, 1);
    let child_coll = all_reduce(&plugin, child, 0, 0).coll;
    let op = plugin.start7(parent, &mut proxy_op7(child_coll, 0, pid(), 0, 1, false));
    assert!(!op.is_null());
    plugin.finalize7(parent);
    // The collector applies the parent's finalize while the op is open.
    std::thread::sleep(Duration::from_millis(50));
    plugin.record7(op, state::PROXY_OP_IN_PROGRESS_V4, None);
    plugin.stop7(op);
    plugin.finalize7(child);

    let events = plugin.events();
    let op_event = by_id(&events, op);
    assert_eq!(op_event["context"], ctx_id(parent));
    assert_eq!(op_event["parent"]["id"], id_of(child_coll));
    assert_eq!(op_event["closed"], "stop", "{op_event}");
    assert_eq!(state_names(&op_event), ["ProxyOpInProgress"]);
    let summaries = plugin.summaries();
    assert_counters(
        &summaries[0],
        &[
            ("events_written", 6),
            ("closed_at_finalize", 0),
            ("record_after_stop", 0),
        ],
    );
}

/// NCCL unloads the plugin after the last comm and loads it again for the next one; a
/// pinned library sees init → finalize-all → init in one process.
#[test]
fn init_after_the_last_finalize_starts_a_new_cycle() {
    const FIRST: u64 = 0x1111;
    const SECOND: u64 = 0x2222;
    let plugin = Plugin::load(&[]);
    let (first, _) = plugin.init_v7(FIRST, Some(c"first"), 0, 1);
    let a = all_reduce(&plugin, first, 0, 0);
    plugin.finalize7(first);
    assert_eq!(plugin.summaries().len(), 1);

    // Between cycles the old context is stale; both refusals count in the next cycle.
    assert!(plugin.start7(first, &mut group_api7(1)).is_null());
    plugin.finalize7(first);

    let (second, mask) = plugin.init_v7(SECOND, Some(c"second"), 0, 1);
    assert_ne!(second, first, "a new cycle never reuses a context value");
    assert_eq!(mask as u64, DEFAULT_EVENT_MASK.bits());
    let b = all_reduce(&plugin, second, 0, 0);
    // A thread that first calls in the second cycle.
    let c = std::thread::scope(|s| s.spawn(|| all_reduce(&plugin, second, 0, 1)).join()).unwrap();
    plugin.finalize7(second);

    let files: Vec<_> = std::fs::read_dir(plugin.out_dir())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "jsonl")
        })
        .collect();
    assert_eq!(files.len(), 1, "one log per process, appended");
    // The trace has one complete part per cycle.
    let parts = std::fs::read_dir(plugin.out_dir().join("parts"))
        .unwrap()
        .count();
    assert_eq!(parts, 2, "one trace part per init/finalize cycle");
    let types: Vec<String> = plugin
        .log_lines()
        .iter()
        .map(|l| l["type"].as_str().unwrap().to_owned())
        .filter(|t| t != "event")
        .collect();
    assert_eq!(
        types,
        ["header", "comm", "summary", "header", "comm", "summary"]
    );
    let events = plugin.events();
    assert_eq!(events.len(), 15);
    let coll_a = by_id(&events, a.coll);
    assert_eq!(coll_a["comm_hash"], hash_str(FIRST));
    assert_eq!(coll_a["context"], ctx_id(first));
    for ar in [b, c] {
        let coll = by_id(&events, ar.coll);
        assert_eq!(coll["comm_hash"], hash_str(SECOND));
        assert_eq!(coll["context"], ctx_id(second));
        assert_eq!(coll["parent"]["id"], id_of(ar.coll_api));
    }
    let summaries = plugin.summaries();
    assert_counters(&summaries[0], &[("events_written", 5)]);
    assert_counters(
        &summaries[1],
        &[
            ("events_written", 10),
            ("stale_context", 1),
            ("bad_finalize", 1),
        ],
    );
}

/// NCCL_SCOREP_MODE=off: contexts are handed out (NCCL keeps going), the mask stays 0,
/// every event is refused, and no collector runs, so nothing is written at all.
#[test]
fn mode_off_hands_out_disabled_contexts_and_writes_nothing() {
    let plugin = Plugin::load(&[("NCCL_SCOREP_MODE", "off")]);
    let (ctx, mask) = plugin.init_v7(0x0ff, Some(c"quiet"), 0, 2);
    assert!(
        !ctx.0.is_null(),
        "a disabled context, so NCCL still finalizes"
    );
    assert_eq!(mask, 0);
    let group_api = plugin.start7(ctx, &mut group_api7(1));
    let coll = plugin.start7(
        ctx,
        &mut coll7(NULL, NULL, 0, 0, c"AllReduce", 8, c"ncclFloat32", 1),
    );
    let op = plugin.start7(ctx, &mut proxy_op7(NULL, 0, pid(), 0, 1, true));
    let ctrl = plugin.start7(ctx, &mut plain7(t::PROXY_CTRL, NULL));
    // Steps and net events do not trust their context, but the plugin is off.
    let step = plugin.start7(ctx, &mut proxy_step7(NULL, 0, 0));
    let net = plugin.start7(ctx, &mut plain7(t::NET_PLUGIN, NULL));
    for h in [group_api, coll, op, ctrl, step, net] {
        assert!(h.is_null());
    }
    plugin.finalize7(ctx);
    assert!(plugin.log_lines().is_empty());
    assert!(
        !plugin.out_dir().exists(),
        "no collector, no output directory"
    );
}

#[test]
fn event_levels_set_the_mask_and_bad_values_keep_the_default() {
    for (events, want) in [
        ("coll,kernel_ch", 0x42),
        (" kernel-ch , COLL ", 0x42),
        ("0x42", 0x42),
        ("all,-proxy_step", 0xFFFF & !t::PROXY_STEP),
        ("coll,bogus", DEFAULT_EVENT_MASK.bits()),
        ("0xZZ", DEFAULT_EVENT_MASK.bits()),
    ] {
        let plugin = Plugin::load(&[("NCCL_SCOREP_EVENTS", events)]);
        let (ctx, mask) = plugin.init_v7(1, None, 0, 1);
        assert_eq!(mask as u64, want, "NCCL_SCOREP_EVENTS={events:?}");
        // Every later init writes the same mask (NCCL's mask is one global int), less
        // the kinds its API version does not have.
        let (ctx2, mask2) = plugin.init_v4(2, None, 0, 1);
        assert_eq!(mask2 as u64, mask as u64 & kinds_of_version(4));
        plugin.finalize7(ctx);
        plugin.finalize7(ctx2);
        assert_counters(&plugin.counters(), &[]);
    }
}

/// Events NCCL never stops are closed by the collector, each with its reason: a receive
/// step restarted for the same step, a step whose ProxyOp stopped, a KernelCh and a
/// ProxyOp still open at finalize.
#[test]
fn never_stopped_events_are_closed_with_a_reason() {
    let plugin = Plugin::load(&[("NCCL_SCOREP_EVENTS", "all")]);
    let (ctx, _) = plugin.init_v7(0x5e9, Some(c"steps"), 1, 2);
    let coll = plugin.start7(
        ctx,
        &mut coll7(NULL, NULL, 1, 0, c"AllReduce", 4096, c"ncclFloat32", 1),
    );
    let recv = plugin.start7(ctx, &mut proxy_op7(coll, 1, pid(), 0, 0, false));
    plugin.record7(recv, state::PROXY_OP_IN_PROGRESS_V4, None);
    // irecv returned no request: the step is started again, the first start never stops.
    let tried = plugin.start7(ctx, &mut proxy_step7(recv, 1, 0));
    plugin.record7(tried, state::PROXY_STEP_RECV_WAIT, Some(trans_size(0)));
    let posted = plugin.start7(ctx, &mut proxy_step7(recv, 1, 0));
    plugin.record7(posted, state::PROXY_STEP_RECV_WAIT, Some(trans_size(0)));
    plugin.record7(
        posted,
        state::PROXY_STEP_RECV_FLUSH_WAIT,
        Some(trans_size(4096)),
    );
    plugin.record7(
        posted,
        state::PROXY_STEP_RECV_GPU_WAIT,
        Some(trans_size(4096)),
    );
    plugin.stop7(posted);
    let pending = plugin.start7(ctx, &mut proxy_step7(recv, 1, 1));
    plugin.record7(pending, state::PROXY_STEP_RECV_WAIT, Some(trans_size(0)));
    plugin.stop7(recv); // with `pending` still open
    let kernel = plugin.start7(ctx, &mut kernel_ch7(coll, 0, 1_000));
    plugin.record7(kernel, state::KERNEL_CH_STOP, Some(ptimer(2_000)));
    // A p2p-copy ProxyOp: started, never stopped (no stop outside net.cc).
    let copy = plugin.start7(ctx, &mut proxy_op7(coll, 1, pid(), 1, 0, false));
    plugin.stop7(coll);
    plugin.finalize7(ctx);

    let events = plugin.events();
    assert_eq!(events.len(), 7);
    let tried_event = by_id(&events, tried);
    assert_eq!(tried_event["closed"], "restarted");
    assert_eq!(
        tried_event["stop_ns"], tried_event["states"][0]["ns"],
        "closed at its last record"
    );
    assert!(tried_event["stop_thread"].is_null());
    let posted_event = by_id(&events, posted);
    assert_eq!(posted_event["closed"], "stop");
    assert_eq!(
        state_names(&posted_event),
        [
            "ProxyStepRecvWait",
            "ProxyStepRecvFlushWait",
            "ProxyStepRecvGPUWait"
        ]
    );
    let recv_event = by_id(&events, recv);
    assert_eq!(recv_event["closed"], "stop");
    let pending_event = by_id(&events, pending);
    assert_eq!(pending_event["closed"], "parent_stopped");
    assert_eq!(
        pending_event["stop_ns"], recv_event["stop_ns"],
        "closed when its ProxyOp stopped"
    );
    assert!(pending_event["stop_thread"].is_null());
    let kernel_event = by_id(&events, kernel);
    assert_eq!(kernel_event["closed"], "finalize");
    assert_eq!(kernel_event["stop_ns"], kernel_event["states"][0]["ns"]);
    assert_eq!(kernel_event["states"][0]["ptimer"], 2_000);
    let copy_event = by_id(&events, copy);
    assert_eq!(copy_event["closed"], "finalize");
    assert_eq!(copy_event["stop_ns"], copy_event["start_ns"]);
    for (step, number) in [(tried_event, 0), (posted_event, 0), (pending_event, 1)] {
        assert_eq!(step["step"], number);
        assert_eq!(step["parent"]["id"], id_of(recv));
        assert_eq!(step["comm_hash"], hash_str(0x5e9), "owner via the ProxyOp");
    }
    assert_counters(
        &plugin.counters(),
        &[
            ("events_written", 7),
            ("restarted_steps", 1),
            ("closed_with_parent", 1),
            ("closed_at_finalize", 2),
        ],
    );
}

/// Non-network transports start ProxyOps and never stop them: past
/// MAX_STEPLESS_PROXY_OPS open ones without a step on one comm, the oldest are closed.
#[test]
fn stepless_proxy_ops_beyond_the_limit_are_abandoned_oldest_first() {
    const EXTRA: usize = 300;
    let plugin = Plugin::load(&[]);
    let (ctx, _) = plugin.init_v7(0xab, Some(c"copy"), 0, 2);
    let (quiet, _) = plugin.init_v7(0xcd, Some(c"quiet"), 1, 2);
    let coll = plugin.start7(
        ctx,
        &mut coll7(NULL, NULL, 0, 0, c"AllGather", 64, c"ncclInt8", 8),
    );
    plugin.stop7(coll);
    // An op that got a step is not stepless: it is never abandoned.
    let with_step = plugin.start7(ctx, &mut proxy_op7(coll, 0, pid(), 0, 1, true));
    let step = plugin.start7(ctx, &mut proxy_step7(with_step, 0, 0));
    plugin.stop7(step);
    let few: Vec<Handle> = (0..10)
        .map(|i| plugin.start7(quiet, &mut proxy_op7(NULL, 1, pid(), i, 0, false)))
        .collect();
    let flood: Vec<Handle> = (0..MAX_STEPLESS_PROXY_OPS + EXTRA)
        .map(|i| {
            let h = plugin.start7(
                ctx,
                &mut proxy_op7(coll, 0, pid(), (i % 32) as u8, 1, false),
            );
            assert!(!h.is_null());
            h
        })
        .collect();
    plugin.finalize7(quiet);
    plugin.finalize7(ctx);

    let events = plugin.events();
    assert_eq!(events.len(), 3 + 10 + flood.len());
    let closed = |reason: &str| -> BTreeSet<String> {
        events
            .iter()
            .filter(|e| e["closed"] == reason)
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let oldest: BTreeSet<String> = flood[..EXTRA].iter().map(|&h| id_of(h)).collect();
    assert_eq!(closed("abandoned"), oldest);
    let mut at_finalize: BTreeSet<String> = flood[EXTRA..].iter().map(|&h| id_of(h)).collect();
    at_finalize.extend(few.iter().map(|&h| id_of(h)));
    at_finalize.insert(id_of(with_step));
    assert_eq!(closed("finalize"), at_finalize);
    for &h in &flood[..EXTRA] {
        let e = by_id(&events, h);
        assert_eq!(e["stop_ns"], e["start_ns"]);
        assert_eq!(e["comm_hash"], hash_str(0xab));
    }
    assert_counters(
        &plugin.counters(),
        &[
            ("events_written", events.len() as u64),
            ("abandoned_proxy_ops", EXTRA as u64),
            (
                "closed_at_finalize",
                (MAX_STEPLESS_PROXY_OPS + 10 + 1) as u64,
            ),
        ],
    );
}

/// A 4 KiB ring (a few dozen records) and a burst of 20000 events from one thread: with
/// NCCL_SCOREP_ON_FULL=drop records are dropped, counted and reported as gaps, and what
/// was written is consistent with the handles NCCL got.
#[test]
fn a_full_ring_drops_counts_and_reports_gaps() {
    const PAIRS: usize = 20_000;
    let plugin = Plugin::load(&[
        ("NCCL_SCOREP_BUFFER_SIZE", "4K"),
        ("NCCL_SCOREP_ON_FULL", "drop"),
    ]);
    let (ctx, _) = plugin.init_v7(0xf1, None, 0, 1);
    let (handles, tid) = std::thread::scope(|s| {
        s.spawn(|| {
            let handles: Vec<Handle> = (0..PAIRS)
                .map(|_| {
                    let h = plugin.start7(ctx, &mut plain7(t::KERNEL_LAUNCH, NULL));
                    if !h.is_null() {
                        plugin.stop7(h);
                    }
                    h
                })
                .collect();
            (handles, gettid())
        })
        .join()
        .unwrap()
    });
    // Finalized from another thread (as ncclCommDestroy may be): its record cannot be
    // dropped, so the counts below are exact.
    plugin.finalize7(ctx);

    let issued: BTreeSet<String> = handles
        .iter()
        .filter(|h| !h.is_null())
        .map(|&h| id_of(h))
        .collect();
    let refused = (PAIRS - issued.len()) as u64;
    let events = plugin.events();
    let written: BTreeSet<String> = events
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(written.len(), events.len(), "each event written once");
    assert_eq!(
        written, issued,
        "an event for every handle given, none else"
    );
    let lost_stops = events.iter().filter(|e| e["closed"] == "finalize").count() as u64;
    for e in &events {
        assert_eq!(e["start_thread"], tid);
        if e["closed"] == "finalize" {
            assert_eq!(e["stop_ns"], e["start_ns"], "its stop was dropped");
            assert!(e["stop_thread"].is_null());
        } else {
            assert_eq!(e["closed"], "stop");
            assert_eq!(e["stop_thread"], tid);
        }
    }
    let counters = plugin.counters();
    let ring_full = counters["ring_full"].as_u64().unwrap();
    assert!(ring_full > 0, "a 4K ring cannot take a burst of {PAIRS}");
    // Nothing waited (`held_back` is 0): the dropping thread never waits, and the
    // init and finalize records came from a thread whose ring had room.
    assert_counters(
        &counters,
        &[
            ("events_written", issued.len() as u64),
            ("ring_full", refused + lost_stops),
            ("lost_starts", refused),
            ("lost_stops", lost_stops),
            ("closed_at_finalize", lost_stops),
        ],
    );
    let gaps = plugin.lines_of("gap");
    assert!(!gaps.is_empty());
    let mut previous_total = 0;
    for gap in &gaps {
        assert_eq!(gap["thread"], tid);
        assert!(ns(&gap["start_ns"]) <= ns(&gap["stop_ns"]), "{gap}");
        let total = gap["dropped_total"].as_u64().unwrap();
        assert!(total >= previous_total && total <= ring_full, "{gap}");
        previous_total = total;
    }
    // The trace shows each gap on the thread that lost the records.
    let text = otf2_print_of_only_part(&plugin);
    let lost_enters = text
        .lines()
        .filter(|l| l.starts_with("ENTER") && l.contains("\"NCCL records lost\""))
        .count();
    assert_eq!(lost_enters, gaps.len(), "one gap interval per reported gap");
}

/// `otf2-print` of the plugin's only trace part.
fn otf2_print_of_only_part(plugin: &Plugin) -> String {
    let parts: Vec<_> = std::fs::read_dir(plugin.out_dir().join("parts"))
        .unwrap()
        .map(|e| e.unwrap().path().join("traces.otf2"))
        .collect();
    assert_eq!(parts.len(), 1);
    let printed = std::process::Command::new("otf2-print")
        .arg(&parts[0])
        .output()
        .expect("otf2-print (Debian package otf2-tools)");
    assert!(printed.status.success());
    String::from_utf8_lossy(&printed.stdout).into_owned()
}

/// The same tiny ring with NCCL_SCOREP_ON_FULL=wait: the thread waits for the collector
/// and nothing is lost; each wait is reported.
#[test]
fn a_full_ring_with_on_full_wait_loses_nothing() {
    const PAIRS: usize = 3_000;
    let plugin = Plugin::load(&[
        ("NCCL_SCOREP_BUFFER_SIZE", "4K"),
        ("NCCL_SCOREP_ON_FULL", "wait"),
    ]);
    let (ctx, _) = plugin.init_v7(0xf2, None, 0, 1);
    let handles: Vec<Handle> = (0..PAIRS)
        .map(|_| {
            let h = plugin.start7(ctx, &mut plain7(t::KERNEL_LAUNCH, NULL));
            assert!(!h.is_null());
            plugin.stop7(h);
            h
        })
        .collect();
    plugin.finalize7(ctx);
    let events = plugin.events();
    let written: BTreeSet<String> = events
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(written, handles.iter().map(|&h| id_of(h)).collect());
    assert!(events.iter().all(|e| e["closed"] == "stop"));
    assert!(plugin.lines_of("gap").is_empty());
    // Every wait is reported: in the counters, on the thread, and in the trace.
    let tid = events[0]["start_thread"].as_i64().unwrap();
    let held_back = held_back_counters(&plugin, tid);
    assert!(
        held_back[0].1 > 0,
        "a 4K ring cannot take a burst of {PAIRS} without a wait"
    );
    let mut expected = vec![("events_written", PAIRS as u64)];
    expected.extend(held_back);
    assert_counters(&plugin.counters(), &expected);
    let held_enters = otf2_print_of_only_part(&plugin)
        .lines()
        .filter(|l| l.starts_with("ENTER") && l.contains("\"NCCL held back by the plugin\""))
        .count() as u64;
    assert_eq!(held_enters, held_back[0].1, "one interval per wait");
}

/// A Coll started on one thread and stopped on another (the stop may reach the collector
/// before the start) is matched.
#[test]
fn a_stop_on_another_thread_is_matched() {
    const COLLS: u64 = 200;
    let plugin = Plugin::load(&[]);
    let (ctx, _) = plugin.init_v7(0x7d, None, 2, 4);
    let (tx, rx) = mpsc::channel::<Handle>();
    let plugin_ref = &plugin;
    let ((started, a), b) = std::thread::scope(|s| {
        let stopper = s.spawn(move || {
            for h in rx {
                plugin_ref.stop7(h);
            }
            gettid()
        });
        let starter = s.spawn(move || {
            let handles: Vec<Handle> = (0..COLLS)
                .map(|seq| {
                    let h = plugin_ref.start7(
                        ctx,
                        &mut coll7(NULL, NULL, 2, seq, c"Broadcast", 16, c"ncclInt32", 1),
                    );
                    tx.send(h).unwrap();
                    h
                })
                .collect();
            (handles, gettid())
        });
        (starter.join().unwrap(), stopper.join().unwrap())
    });
    assert_ne!(a, b);
    plugin.finalize7(ctx);

    let events = plugin.events();
    assert_eq!(events.len(), COLLS as usize);
    for (seq, &h) in started.iter().enumerate() {
        let e = by_id(&events, h);
        assert_eq!(e["seq"], seq as u64);
        assert_eq!(e["closed"], "stop");
        assert_eq!(e["start_thread"], a);
        assert_eq!(e["stop_thread"], b);
        assert!(ns(&e["stop_ns"]) >= ns(&e["start_ns"]));
    }
    assert_counters(&plugin.counters(), &[("events_written", COLLS)]);
}
