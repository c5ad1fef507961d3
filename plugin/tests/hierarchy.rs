//! End-to-end through the loaded library: NCCL's real call order for one AllReduce on
//! profiler API v7, its proxy and kernel children on other threads, and PXN.

mod support;

use nccl_profiler_abi::{event_type as t, state};
use serde_json::Value;
use support::*;

const HASH: u64 = 0xfeed_beef_1234_5678;

#[test]
fn exports_every_version_under_one_name() {
    let plugin = Plugin::load(&[]);
    for v in 1..=7 {
        assert!(plugin.has_symbol(&format!("ncclProfiler_v{v}")), "v{v}");
    }
    assert!(!plugin.has_symbol("ncclProfiler_v8"));
    // SAFETY: the name is a static C string.
    let name = unsafe { std::ffi::CStr::from_ptr(plugin.v7().name) };
    assert_eq!(name.to_str().unwrap(), "nccl-scorep");
}

/// NCCL's application-thread sequence for one AllReduce plus the proxy thread's children and the KernelCh on
/// another thread, then finalize.
#[test]
fn one_allreduce_resolves_every_parent_and_count() {
    let plugin = Plugin::load(&[("NCCL_SCOREP_EVENTS", "all")]);
    let (ctx, mask) = plugin.init_v7(HASH, Some(c"trainer"), 1, 4);
    assert!(!ctx.0.is_null());
    assert_eq!(mask, 0xFFFF, "init writes the configured event mask");

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
    let group = plugin.start7(ctx, &mut plain7(t::GROUP, Handle(std::ptr::null_mut())));
    let coll = plugin.start7(
        ctx,
        &mut coll7(coll_api, group, 1, 0, c"AllReduce", 1024, c"ncclFloat32", 2),
    );

    // The proxy thread starts children before the Coll stops; KernelCh and steps run there.
    let proxy = std::thread::spawn({
        let plugin = &plugin as *const Plugin as usize;
        move || {
            // SAFETY: the plugin outlives the thread (joined below).
            let plugin = unsafe { &*(plugin as *const Plugin) };
            let op = plugin.start7(ctx, &mut proxy_op7(coll, 1, pid(), 0, 2, true));
            plugin.record7(op, state::PROXY_OP_IN_PROGRESS_V4, None);
            let step = plugin.start7(ctx, &mut proxy_step7(op, 1, 0));
            plugin.record7(step, state::PROXY_STEP_SEND_GPU_WAIT, Some(trans_size(7)));
            plugin.record7(step, state::PROXY_STEP_SEND_WAIT, Some(trans_size(4096)));
            plugin.stop7(step);
            let kernel = plugin.start7(ctx, &mut kernel_ch7(coll, 0, 1_000_000));
            plugin.record7(kernel, state::KERNEL_CH_STOP, Some(ptimer(1_250_000)));
            plugin.stop7(kernel);
            plugin.stop7(op);
            (op, step, kernel)
        }
    });
    let (op, step, kernel) = proxy.join().unwrap();
    plugin.stop7(coll);
    plugin.stop7(group);
    plugin.stop7(group_api);
    plugin.finalize7(ctx);

    let events = plugin.events();
    assert_eq!(events.len(), 8, "{events:#?}");
    let coll_event = by_id(&events, coll);
    assert_eq!(coll_event["kind"], "Coll");
    assert_eq!(coll_event["parent"]["kind"], "CollApi");
    assert_eq!(
        coll_event["parent"]["id"],
        format!("{:#x}", coll_api.value())
    );
    assert_eq!(coll_event["parent_group"], format!("{:#x}", group.value()));
    assert_eq!(coll_event["func"], "AllReduce");
    assert_eq!(coll_event["count"], 1024);
    assert_eq!(coll_event["bytes"], 4096);
    assert_eq!(coll_event["algo"], "RING");
    assert_eq!(coll_event["proto"], "SIMPLE");
    assert_eq!(coll_event["nchannels"], 2);
    assert_eq!(coll_event["comm_hash"], format!("{HASH:#x}"));
    assert_eq!(coll_event["comm_name"], "trainer");
    assert_eq!(coll_event["rank"], 1);
    assert_eq!(coll_event["nranks"], 4);

    let api = by_id(&events, coll_api);
    assert_eq!(api["parent"]["kind"], "GroupApi");
    assert_eq!(
        api["rank"], 1,
        "API events carry rank 0: the context's rank is used"
    );
    let group_event = by_id(&events, group_api);
    let states: Vec<&str> = group_event["states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["GroupStartApiStop", "GroupEndApiStart"]);
    assert_eq!(by_id(&events, launch)["parent"]["kind"], "GroupApi");

    let op_event = by_id(&events, op);
    assert_eq!(op_event["parent"]["kind"], "Coll");
    assert_eq!(op_event["is_send"], true);
    assert_eq!(op_event["peer"], 2);
    assert_ne!(op_event["start_thread"], coll_event["start_thread"]);
    let step_event = by_id(&events, step);
    assert_eq!(step_event["parent"]["kind"], "ProxyOp");
    assert_eq!(
        step_event["comm_hash"],
        format!("{HASH:#x}"),
        "owner found via the ProxyOp"
    );
    let sizes: Vec<&Value> = step_event["states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["trans_size"])
        .collect();
    assert_eq!(sizes, [&Value::from(7), &Value::from(4096)]);
    let kernel_event = by_id(&events, kernel);
    assert_eq!(kernel_event["parent"]["kind"], "Coll");
    assert_eq!(kernel_event["ptimer_start"], 1_000_000);
    assert_eq!(kernel_event["states"][0]["ptimer"], 1_250_000);
    for event in &events {
        assert_eq!(event["closed"], "stop", "{event}");
        assert!(event["stop_ns"].as_u64() >= event["start_ns"].as_u64());
    }

    let comms: Vec<Value> = plugin
        .log_lines()
        .into_iter()
        .filter(|l| l["type"] == "comm")
        .collect();
    assert_eq!(comms.len(), 1);
    assert_eq!(comms[0]["nranks"], 4);
    let counters = plugin.counters();
    assert_eq!(counters["events_written"], 8);
    assert_eq!(counters["ring_full"], 0);
    assert_eq!(counters["orphan_records"], 0);
}

/// A ProxyOp progressed here for another process: its context and parent point into
/// another address space (here: a page that crashes on any access). Steps and net events
/// under it carry the same foreign context and must find their owner via the ProxyOp.
#[test]
fn pxn_ops_are_foreign_and_never_dereferenced() {
    let plugin = Plugin::load(&[("NCCL_SCOREP_EVENTS", "all")]);
    let (ctx, _) = plugin.init_v7(HASH, None, 0, 8);
    let foreign_ctx = Ctx(poisoned_pointer());
    let foreign_parent = Handle(poisoned_pointer());
    let other_pid = pid() + 1;

    let op = plugin.start7(
        foreign_ctx,
        &mut proxy_op7(foreign_parent, 5, other_pid, 3, 1, true),
    );
    assert!(!op.is_null(), "foreign ops are recorded");
    plugin.record7(op, state::PROXY_OP_IN_PROGRESS_V4, None);
    let step = plugin.start7(foreign_ctx, &mut proxy_step7(op, 5, 0));
    plugin.record7(step, state::PROXY_STEP_SEND_WAIT, Some(trans_size(65536)));
    let mut net = plain7(t::NET_PLUGIN, step);
    net.u.netPlugin = nccl_profiler_abi::NetPluginDescr {
        id: 0x2_0001,
        data: std::ptr::null_mut(),
    };
    let net = plugin.start7(foreign_ctx, &mut net);
    plugin.stop7(net);
    plugin.stop7(step);
    plugin.stop7(op);
    // A local op beside it stays local.
    let local = plugin.start7(
        ctx,
        &mut proxy_op7(Handle(std::ptr::null_mut()), 0, pid(), 0, 1, false),
    );
    plugin.stop7(local);
    plugin.finalize7(ctx);

    let events = plugin.events();
    let op_event = by_id(&events, op);
    assert_eq!(op_event["foreign"]["pid"], other_pid);
    assert_eq!(
        op_event["foreign"]["context"],
        format!("{:#x}", foreign_ctx.0 as u64)
    );
    assert_eq!(op_event["parent"]["foreign_pid"], other_pid);
    assert_eq!(
        op_event["parent"]["value"],
        format!("{:#x}", foreign_parent.value())
    );
    assert_eq!(op_event["rank"], 5, "the originator's rank");
    assert!(op_event.get("context").is_none());
    let step_event = by_id(&events, step);
    assert_eq!(
        step_event["foreign"]["pid"], other_pid,
        "owner found via the ProxyOp"
    );
    assert_eq!(step_event["parent"]["kind"], "ProxyOp");
    let net_event = by_id(&events, net);
    assert_eq!(net_event["foreign"]["pid"], other_pid);
    assert_eq!(
        net_event["net"]["type"], "unknown",
        "NULL payload is not read"
    );
    let local_event = by_id(&events, local);
    assert_eq!(local_event["context"], format!("{:#x}", ctx.0 as u64));
    assert!(local_event.get("foreign").is_none());
    assert_eq!(plugin.counters()["pxn_foreign_ops"], 1);
}

/// `nm -D` lists the seven tables as exported data objects, as NCCL's `dlsym` needs.
#[test]
fn nm_lists_the_seven_tables_as_data() {
    let output = std::process::Command::new("nm")
        .arg("-D")
        .arg("--defined-only")
        .arg(built_library())
        .output()
        .expect("nm (binutils) runs");
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    for v in 1..=7 {
        let symbol = format!("ncclProfiler_v{v}");
        let line = text
            .lines()
            .find(|l| l.ends_with(&format!(" {symbol}")))
            .unwrap_or_else(|| panic!("{symbol} missing from nm -D:\n{text}"));
        let kind = line.split_whitespace().nth(1);
        assert!(
            matches!(kind, Some("D" | "R")),
            "{symbol} is not data: {line}"
        );
    }
}

/// A panic inside any entry point is caught at the boundary: NCCL gets ncclSuccess (and a
/// NULL handle from startEvent), the panic is counted, and the plugin stops recording but
/// keeps answering. Each entry point is probed in a fresh plugin instance.
#[test]
#[cfg(debug_assertions)]
fn panics_never_reach_nccl() {
    use nccl_profiler_scorep::boundary::PANIC_PROBE;
    type EntryPoint = (&'static str, fn(&Plugin, Ctx));
    let entry_points: [EntryPoint; 4] = [
        ("startEvent", |plugin, ctx| {
            let mut descr = plain7(PANIC_PROBE, Handle(std::ptr::null_mut()));
            assert!(plugin.start7(ctx, &mut descr).is_null());
        }),
        ("stopEvent", |plugin, _| {
            plugin.stop7(Handle(PANIC_PROBE as usize as *mut std::ffi::c_void))
        }),
        ("recordEventState", |plugin, _| {
            plugin.record7(
                Handle(PANIC_PROBE as usize as *mut std::ffi::c_void),
                state::GROUP_END_API_START,
                None,
            )
        }),
        ("finalize", |plugin, _| {
            plugin.finalize7(Ctx(PANIC_PROBE as usize as *mut std::ffi::c_void))
        }),
    ];
    for (name, call) in entry_points {
        let plugin = Plugin::load(&[]);
        let (ctx, _) = plugin.init_v7(HASH, None, 0, 2);
        let before = plugin.start7(ctx, &mut group_api7(1));
        assert!(!before.is_null());
        call(&plugin, ctx);
        // Recording is off from the panic on; NCCL gets NULL handles, calls still succeed.
        assert!(plugin.start7(ctx, &mut group_api7(1)).is_null(), "{name}");
        plugin.stop7(before);
        plugin.finalize7(ctx);
        assert_eq!(plugin.counters()["panics"], 1, "{name}");
    }
}

/// Event times are CLOCK_MONOTONIC nanoseconds whichever clock stamps the records: each
/// start and stop lies within the caller's own readings around the call.
#[test]
fn event_times_are_monotonic_nanoseconds_with_either_clock() {
    for clock in ["tsc", "monotonic"] {
        let plugin = Plugin::load(&[("NCCL_SCOREP_CLOCK", clock)]);
        let (ctx, _) = plugin.init_v7(HASH, None, 0, 2);
        let mut brackets = Vec::new();
        for _ in 0..50 {
            let before = nccl_profiler_scorep::clock::now_ns();
            let handle = plugin.start7(ctx, &mut group_api7(1));
            let between = nccl_profiler_scorep::clock::now_ns();
            std::thread::sleep(std::time::Duration::from_micros(100));
            let before_stop = nccl_profiler_scorep::clock::now_ns();
            plugin.stop7(handle);
            let after = nccl_profiler_scorep::clock::now_ns();
            brackets.push((handle, before, between, before_stop, after));
        }
        plugin.finalize7(ctx);
        let events = plugin.events();
        // Calibration error allowance: a few microseconds.
        const SLACK: u64 = 5_000;
        for (handle, before, between, before_stop, after) in brackets {
            let event = by_id(&events, handle);
            let start = event["start_ns"].as_u64().unwrap();
            let stop = event["stop_ns"].as_u64().unwrap();
            assert!(
                start + SLACK >= before && start <= between + SLACK,
                "{clock}: start {start} not in [{before}, {between}]"
            );
            assert!(
                stop + SLACK >= before_stop && stop <= after + SLACK,
                "{clock}: stop {stop} not in [{before_stop}, {after}]"
            );
        }
    }
}
