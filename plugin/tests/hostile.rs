//! Hostile and broken calls through the loaded library: NULL and forged handles, double
//! and late stops, unknown types and states, NULL descriptors, pointers and strings,
//! foreign contexts. Each one must leave the process alive, be refused or repaired, and
//! be counted exactly once in the summary; nothing of it may leak into other events.

mod support;

use nccl_profiler_abi::{self as abi, event_type as t, state, v1, v5, v6, StateArgsV4};
use nccl_profiler_scorep::config::DEFAULT_EVENT_MASK;
use std::ffi::{c_int, c_void};
use std::ptr::{null, null_mut};
use support::*;

const HASH: u64 = 0x0bad_cafe_0000_0001;
const NULL: Handle = Handle(null_mut());

/// The per-process salt a context value carries (bits 32..56).
fn context_salt(ctx: Ctx) -> u64 {
    (ctx.0 as u64 >> 32) & 0xFF_FFFF
}

/// The salt bits of a handle (bits 47..55), and its generation (20..47) and slot (0..20).
fn handle_parts(h: Handle) -> (u64, u64, u64) {
    let v = h.value();
    (
        (v >> 47) & 0xFF,
        (v >> 20) & ((1 << 27) - 1),
        v & ((1 << 20) - 1),
    )
}

/// A second plugin instance (as another process would have) whose salt differs from
/// `ours`, so its values can never alias ours; with one live GroupApi handle.
fn other_instance(ours: Ctx) -> (Plugin, Ctx, Handle) {
    for _ in 0..16 {
        let other = Plugin::load(&[]);
        let (ctx, _) = other.init_v7(HASH + 1, Some(c"other"), 0, 2);
        if context_salt(ctx) != context_salt(ours) {
            let handle = other.start7(ctx, &mut group_api7(1));
            assert!(!handle.is_null());
            return (other, ctx, handle);
        }
        other.finalize7(ctx);
    }
    panic!("16 plugin instances with the same 8-bit salt");
}

/// A v7 `startEvent` on the raw table with a descriptor of another version's table.
fn start_with<D>(
    start: unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut D) -> i32,
    ctx: Ctx,
    descr: &mut D,
) -> Handle {
    let mut handle = 0xdead_usize as *mut c_void;
    // SAFETY: a local handle slot and a valid descriptor of the table's version.
    // SAFETY: NULL out pointers on purpose: the plugin must cope.
    let rc = unsafe { start(ctx.0, &mut handle, descr) };
    assert_eq!(rc, 0);
    assert_ne!(handle as usize, 0xdead, "*eHandle must be written");
    Handle(handle)
}

#[test]
fn calls_before_any_init_are_ignored_and_not_counted() {
    let plugin = Plugin::load(&[]);
    // No runtime yet: everything answers success and records nothing.
    let handle = plugin.start7(Ctx(null_mut()), &mut group_api7(1));
    assert!(handle.is_null());
    plugin.stop7(NULL);
    plugin.stop7(Handle(0xdead_beef as *mut c_void));
    plugin.record7(NULL, state::GROUP_START_API_STOP, None);
    plugin.finalize7(Ctx(0x1234 as *mut c_void));
    assert!(plugin.log_lines().is_empty(), "no init, no log");

    let (ctx, mask) = plugin.init_v7(HASH, Some(c"late"), 0, 1);
    assert_eq!(mask as u64, DEFAULT_EVENT_MASK.bits());
    plugin.finalize7(ctx);
    assert_counters(&plugin.counters(), &[]);
    assert!(plugin.events().is_empty());
}

#[test]
fn null_and_never_issued_handles_are_refused() {
    let plugin = Plugin::load(&[]);
    let (ctx, _) = plugin.init_v7(HASH, Some(c"victim"), 0, 2);
    let (other, other_ctx, theirs) = other_instance(ctx);
    let live = plugin.start7(ctx, &mut group_api7(1));
    assert!(!live.is_null());

    let (salt, generation, slot) = handle_parts(live);
    let forge = |generation: u64, slot: u64| {
        Handle((live.value() & !((1u64 << 47) - 1) | generation << 20 | slot) as *mut c_void)
    };
    assert_eq!(forge(generation, slot), live, "the forging is faithful");
    let never_issued = [
        Handle(0xdead_beef_usize as *mut c_void),
        Handle(poisoned_pointer()),
        theirs,
        // Ours by magic and salt, but a generation the slot never reached…
        forge(generation + 1000, slot),
        // …an even (free) generation…
        forge(generation + 1, slot),
        // …a slot past the slab.
        forge(1, (1 << 20) - 1),
    ];
    assert_ne!(handle_parts(theirs).0, salt);
    for h in never_issued {
        plugin.stop7(h);
        plugin.record7(h, state::GROUP_START_API_STOP, None);
    }
    plugin.stop7(NULL);
    plugin.record7(NULL, state::GROUP_END_API_START, None);

    // The live event was not touched by any of it.
    plugin.record7(live, state::GROUP_START_API_STOP, None);
    plugin.stop7(live);
    plugin.finalize7(ctx);

    let events = plugin.events();
    assert_eq!(events.len(), 1, "{events:#?}");
    let event = by_id(&events, live);
    assert_eq!(state_names(&event), ["GroupStartApiStop"]);
    assert_eq!(event["closed"], "stop");
    assert_counters(
        &plugin.counters(),
        &[
            ("events_written", 1),
            ("stop_null", 1),
            ("record_null", 1),
            ("stop_never_issued", 6),
            ("record_never_issued", 6),
        ],
    );

    // The other instance's handle still works there: our refusals did not touch it.
    other.stop7(theirs);
    other.finalize7(other_ctx);
    let theirs_event = by_id(&other.events(), theirs);
    assert_eq!(theirs_event["closed"], "stop");
    assert_eq!(state_names(&theirs_event), Vec::<String>::new());
    assert_counters(&other.counters(), &[("events_written", 1)]);
}

#[test]
fn double_stops_late_records_and_stale_handles_are_told_apart() {
    let plugin = Plugin::load(&[("NCCL_SCOREP_MAX_OPEN_EVENTS", "1024")]);
    let (ctx, _) = plugin.init_v7(HASH, None, 0, 1);

    let first = plugin.start7(ctx, &mut group_api7(1));
    plugin.record7(first, state::GROUP_START_API_STOP, None);
    plugin.stop7(first);
    plugin.stop7(first); // double stop
    plugin.record7(first, state::GROUP_END_API_START, None); // record after stop

    // One thread's slab shard is a LIFO stack: the next event reuses the slot.
    let second = plugin.start7(ctx, &mut group_api7(1));
    let (_, g1, s1) = handle_parts(first);
    let (_, g2, s2) = handle_parts(second);
    assert_eq!((s2, g2), (s1, g1 + 2), "slot reused, generation moved on");
    plugin.stop7(first); // stale
    plugin.record7(first, state::GROUP_END_API_START, None); // stale
    plugin.record7(second, state::GROUP_START_API_STOP, None);
    plugin.stop7(second);

    // Churn far past the slab size: the slot is reused over and over, the old handle
    // stays stale (never aliases a newer event).
    for _ in 0..3000 {
        let h = plugin.start7(ctx, &mut plain7(t::PROXY_CTRL, NULL));
        assert!(!h.is_null());
        plugin.stop7(h);
    }
    plugin.stop7(first);
    plugin.stop7(second);
    plugin.record7(second, state::GROUP_END_API_START, None);
    plugin.finalize7(ctx);

    let events = plugin.events();
    assert_eq!(events.len(), 3002);
    assert_eq!(state_names(&by_id(&events, first)), ["GroupStartApiStop"]);
    assert_eq!(state_names(&by_id(&events, second)), ["GroupStartApiStop"]);
    assert!(events.iter().all(|e| e["closed"] == "stop"));
    assert_counters(
        &plugin.counters(),
        &[
            ("events_written", 3002),
            ("stop_double", 1),
            ("record_after_stop", 1),
            ("stop_stale", 3),
            ("record_stale", 2),
        ],
    );
}

#[test]
fn unknown_type_bits_get_a_null_handle() {
    let plugin = Plugin::load(&[]);
    let (ctx, _) = plugin.init_v7(HASH, None, 0, 1);
    for bits in [
        0,
        0x3,
        t::GROUP_API | t::COLL_API,
        1 << 16,
        1 << 20,
        u64::MAX,
    ] {
        let handle = plugin.start7(ctx, &mut zeroed7(bits, NULL, 0));
        assert!(handle.is_null(), "type {bits:#x}");
    }

    // Older tables refuse the types their version does not know. (v1–v4 carry the type
    // in a u8, so GroupApi's 0x100 cannot even be expressed there: 0x40 and 0x80 are the
    // v3 additions a v1 table must not accept.)
    // SAFETY: every field is valid zeroed.
    let mut d1: v1::ncclProfilerEventDescr_v1_t = unsafe { std::mem::zeroed() };
    for bits in [t::KERNEL_CH as u8, t::NET_PLUGIN as u8, 0] {
        d1.type_ = bits;
        assert!(start_with(plugin.v1().startEvent, ctx, &mut d1).is_null());
    }
    // SAFETY: every field is valid zeroed.
    let mut d5: v5::ncclProfilerEventDescr_v5_t = unsafe { std::mem::zeroed() };
    d5.type_ = t::CE_COLL;
    assert!(start_with(plugin.v5().startEvent, ctx, &mut d5).is_null());
    // SAFETY: every field is valid zeroed.
    let mut d6: v6::ncclProfilerEventDescr_v6_t = unsafe { std::mem::zeroed() };
    d6.type_ = t::KERNEL_PHASE;
    assert!(start_with(plugin.v6().startEvent, ctx, &mut d6).is_null());

    // What each table does know still works.
    d1.type_ = t::PROXY_CTRL as u8;
    let ctrl = start_with(plugin.v1().startEvent, ctx, &mut d1);
    assert!(!ctrl.is_null());
    plugin.stop7(ctrl);
    d5.type_ = t::GROUP_API;
    let api = start_with(plugin.v5().startEvent, ctx, &mut d5);
    assert!(!api.is_null());
    plugin.stop7(api);
    plugin.finalize7(ctx);

    let events = plugin.events();
    assert_eq!(events.len(), 2);
    assert_eq!(by_id(&events, ctrl)["kind"], "ProxyCtrl");
    assert_eq!(by_id(&events, api)["kind"], "GroupApi");
    assert_counters(
        &plugin.counters(),
        &[("events_written", 2), ("unknown_type", 11)],
    );
}

#[test]
fn unknown_and_foreign_states_are_counted_and_left_out() {
    let plugin = Plugin::load(&[]);
    let (ctx, _) = plugin.init_v7(HASH, None, 0, 1);
    let group_api = plugin.start7(ctx, &mut group_api7(1));
    for bad in [
        99,
        -1,
        i32::MIN,
        32,
        state::KERNEL_CH_STOP,
        state::KERNEL_PHASE_STOP,
        state::PROXY_OP_IN_PROGRESS_V4,
    ] {
        plugin.record7(group_api, bad, None);
    }
    plugin.record7(group_api, state::GROUP_START_API_STOP, None);
    let coll_api = plugin.start7(
        ctx,
        &mut coll_api7(group_api, c"AllReduce", 8, c"ncclFloat32"),
    );
    plugin.stop7(coll_api);
    let coll = plugin.start7(
        ctx,
        &mut coll7(coll_api, NULL, 0, 0, c"AllReduce", 8, c"ncclFloat32", 1),
    );
    // A valid state of another kind: Coll has no states at all.
    plugin.record7(coll, state::KERNEL_CH_STOP, Some(ptimer(5)));
    plugin.record7(coll, state::GROUP_END_API_START, None);
    let kernel = plugin.start7(ctx, &mut kernel_ch7(coll, 0, 100));
    plugin.record7(kernel, state::GROUP_START_API_STOP, None);
    plugin.record7(kernel, state::PROXY_STEP_SEND_WAIT, Some(trans_size(64)));
    plugin.record7(kernel, state::KERNEL_CH_STOP, Some(ptimer(200)));
    plugin.stop7(kernel);
    plugin.stop7(coll);
    plugin.record7(group_api, state::GROUP_END_API_START, None);
    plugin.stop7(group_api);
    plugin.finalize7(ctx);

    let events = plugin.events();
    assert_eq!(events.len(), 4);
    assert_eq!(
        state_names(&by_id(&events, group_api)),
        ["GroupStartApiStop", "GroupEndApiStart"]
    );
    let coll_event = by_id(&events, coll);
    assert!(coll_event.get("states").is_none(), "{coll_event}");
    let kernel_event = by_id(&events, kernel);
    assert_eq!(state_names(&kernel_event), ["KernelChStop"]);
    assert_eq!(kernel_event["states"][0]["ptimer"], 200);
    assert_counters(
        &plugin.counters(),
        &[("events_written", 4), ("unknown_state", 11)],
    );
}

#[test]
fn null_descriptor_null_handle_slot_and_bad_contexts_are_refused() {
    let plugin = Plugin::load(&[]);
    let (ctx, _) = plugin.init_v7(HASH, Some(c"ranks"), 0, 2);
    let (other, other_ctx, theirs) = other_instance(ctx);

    assert!(plugin.start7_raw(ctx, null_mut()).is_null());
    // A NULL handle slot: nothing to write, nothing recorded.
    let mut descr = group_api7(1);
    // SAFETY: NULL handle slot on purpose; valid descriptor.
    let rc = unsafe { (plugin.v7().startEvent)(ctx.0, null_mut(), &mut descr) };
    assert_eq!(rc, 0);

    let coll = || coll7(NULL, NULL, 0, 0, c"AllReduce", 8, c"ncclFloat32", 1);
    assert!(plugin.start7(Ctx(null_mut()), &mut coll()).is_null());
    for foreign in [
        Ctx(0x1234 as *mut c_void),
        Ctx(poisoned_pointer()),
        other_ctx,
    ] {
        assert!(plugin.start7(foreign, &mut coll()).is_null());
        assert!(plugin.start7(foreign, &mut group_api7(1)).is_null());
        plugin.finalize7(foreign);
    }
    plugin.finalize7(Ctx(null_mut()));

    // Steps and net events never trust their context (PXN): a NULL one is fine, and a
    // step whose ProxyOp handle was NULL has no owner.
    let step = plugin.start7(Ctx(null_mut()), &mut proxy_step7(NULL, 0, 3));
    assert!(!step.is_null());
    plugin.record7(step, state::PROXY_STEP_RECV_WAIT, None);
    plugin.stop7(step);
    plugin.finalize7(ctx);

    let events = plugin.events();
    assert_eq!(events.len(), 1, "{events:#?}");
    let step_event = by_id(&events, step);
    assert_eq!(step_event["owner"], "unknown");
    assert!(step_event["parent"].is_null());
    assert_eq!(step_event["step"], 3);
    assert!(step_event["states"][0].get("trans_size").is_none());
    assert_counters(
        &plugin.counters(),
        &[
            ("events_written", 1),
            ("null_descriptor", 1),
            ("null_handle_out", 1),
            ("null_context", 1),
            ("foreign_context", 6),
            ("bad_finalize", 4),
        ],
    );
    other.stop7(theirs);
    other.finalize7(other_ctx);
    assert_counters(&other.counters(), &[("events_written", 1)]);
}

#[test]
fn null_strings_read_as_unknown_and_a_null_comm_name_is_left_out() {
    let plugin = Plugin::load(&[]);
    let (ctx, _) = plugin.init_v7(HASH, None, 3, 4);
    let mut api = coll_api7(NULL, c"AllReduce", 16, c"ncclFloat32");
    // Writing a union member is safe; these are the members the type bit names.
    api.u.collApi.func = null();
    api.u.collApi.datatype = null();
    let api = plugin.start7(ctx, &mut api);
    plugin.stop7(api);
    let mut coll = coll7(api, NULL, 3, 7, c"AllReduce", 16, c"ncclFloat32", 2);
    coll.u.coll.func = null();
    coll.u.coll.datatype = null();
    coll.u.coll.algo = null();
    coll.u.coll.proto = null();
    let coll = plugin.start7(ctx, &mut coll);
    plugin.stop7(coll);
    let mut p2p = p2p7(NULL, NULL, 3, c"Send", 4, 1);
    p2p.u.p2p.func = null();
    p2p.u.p2p.datatype = null();
    let p2p = plugin.start7(ctx, &mut p2p);
    plugin.stop7(p2p);
    plugin.finalize7(ctx);

    let events = plugin.events();
    assert_eq!(events.len(), 3);
    for event in &events {
        assert_eq!(event["func"], "Unknown", "{event}");
        assert_eq!(event["datatype"], "Unknown", "{event}");
        assert!(event["bytes"].is_null(), "unknown size: {event}");
        assert!(event.get("comm_name").is_none(), "{event}");
        assert_eq!(event["comm_hash"], format!("{HASH:#x}"));
        assert_eq!(event["rank"], 3);
    }
    let coll_event = by_id(&events, coll);
    assert_eq!(coll_event["algo"], "Unknown");
    assert_eq!(coll_event["proto"], "Unknown");
    assert_eq!(coll_event["seq"], 7);
    let comms = plugin.lines_of("comm");
    assert_eq!(comms.len(), 1);
    assert!(comms[0]["comm_name"].is_null());
    assert_counters(&plugin.counters(), &[("events_written", 3)]);
}

#[test]
fn init_with_null_pointers_succeeds() {
    let plugin = Plugin::load(&[]);
    let rc = plugin.with_settings(|| {
        // SAFETY: NULL context and mask pointers on purpose.
        unsafe { plugin.init_v7_raw(null_mut(), HASH, null_mut(), None, 0, 1) }
    });
    assert_eq!(rc, 0);
    // SAFETY: as above, through the v4 and v1 tables.
    let rc = unsafe { (plugin.v4().init)(null_mut(), null_mut(), null(), HASH, 1, 1, 0, None) };
    assert_eq!(rc, 0);
    // SAFETY: NULL out pointers on purpose: the plugin must cope.
    let rc = unsafe { (plugin.v1().init)(null_mut(), null_mut()) };
    assert_eq!(rc, 0);

    // A context with a NULL mask pointer is still profiled (NCCL's mask stays as it was).
    let mut ctx = null_mut();
    // SAFETY: writable context slot, NULL mask.
    let rc = unsafe { plugin.init_v7_raw(&mut ctx, HASH, null_mut(), Some(c"m"), 0, 1) };
    assert_eq!(rc, 0);
    let ctx = Ctx(ctx);
    assert!(!ctx.0.is_null());
    let api = plugin.start7(ctx, &mut group_api7(1));
    assert!(!api.is_null());
    plugin.stop7(api);
    // The only context NCCL could ever finalize: its finalize ends the cycle.
    plugin.finalize7(ctx);

    let events = plugin.events();
    assert_eq!(events.len(), 1);
    assert_eq!(by_id(&events, api)["comm_name"], "m");
    assert_counters(
        &plugin.counters(),
        &[("events_written", 1), ("disabled_inits", 3)],
    );
}

#[test]
fn kernel_ch_record_after_stop_and_net_plugin_stop_null() {
    let plugin = Plugin::load(&[("NCCL_SCOREP_EVENTS", "all")]);
    let (ctx, _) = plugin.init_v7(HASH, None, 0, 2);
    let coll = plugin.start7(
        ctx,
        &mut coll7(NULL, NULL, 0, 0, c"AllGather", 8, c"ncclInt8", 1),
    );
    let kernel = plugin.start7(ctx, &mut kernel_ch7(coll, 1, 1_000));
    plugin.record7(kernel, state::KERNEL_CH_STOP, Some(ptimer(2_000)));
    plugin.stop7(kernel);
    plugin.record7(kernel, state::KERNEL_CH_STOP, Some(ptimer(3_000)));

    // The net plugin stops whatever it holds, NULL included (no NULL check in NCCL).
    let op = plugin.start7(ctx, &mut proxy_op7(coll, 0, pid(), 1, 1, true));
    let step = plugin.start7(ctx, &mut proxy_step7(op, 0, 0));
    let mut net = plain7(t::NET_PLUGIN, step);
    net.u.netPlugin = abi::NetPluginDescr {
        id: abi::net::TYPE_SOCK | 1,
        data: null_mut(),
    };
    let net = plugin.start7(ctx, &mut net);
    plugin.stop7(NULL);
    plugin.stop7(net);
    plugin.stop7(NULL);
    plugin.stop7(net); // stopped twice by the net plugin
    plugin.stop7(step);
    plugin.stop7(op);
    plugin.stop7(coll);
    plugin.finalize7(ctx);

    let events = plugin.events();
    assert_eq!(events.len(), 5);
    let kernel_event = by_id(&events, kernel);
    assert_eq!(state_names(&kernel_event), ["KernelChStop"]);
    assert_eq!(kernel_event["states"][0]["ptimer"], 2_000);
    assert_eq!(kernel_event["ptimer_start"], 1_000);
    let net_event = by_id(&events, net);
    assert_eq!(net_event["parent"]["kind"], "ProxyStep");
    assert_eq!(net_event["net"]["type"], "unknown");
    assert_counters(
        &plugin.counters(),
        &[
            ("events_written", 5),
            ("record_after_stop", 1),
            ("stop_null", 2),
            ("stop_double", 1),
        ],
    );
}

#[test]
fn group_api_states_with_null_or_unreadable_args() {
    let plugin = Plugin::load(&[]);
    let (ctx, _) = plugin.init_v7(HASH, None, 0, 1);
    // Direct version: NULL args for 23/24.
    let direct = plugin.start7(ctx, &mut group_api7(1));
    plugin.record7(direct, state::GROUP_START_API_STOP, None);
    plugin.record7(direct, state::GROUP_END_API_START, None);
    plugin.stop7(direct);
    // The v5 shim passes a non-NULL pointer to uninitialised args for 19/23/24: they must
    // not be read (here: a page that crashes on access).
    let poisoned = poisoned_pointer() as *mut StateArgsV4;
    let shimmed = plugin.start7(ctx, &mut group_api7(2));
    plugin.record7_raw(shimmed, state::GROUP_START_API_STOP, poisoned);
    plugin.record7_raw(shimmed, state::GROUP_END_API_START, poisoned);
    plugin.stop7(shimmed);
    let op = plugin.start7(ctx, &mut proxy_op7(NULL, 0, pid(), 0, 1, false));
    plugin.record7_raw(op, state::PROXY_OP_IN_PROGRESS_V4, poisoned);
    plugin.stop7(op);
    plugin.finalize7(ctx);

    let events = plugin.events();
    assert_eq!(events.len(), 3);
    for handle in [direct, shimmed] {
        let event = by_id(&events, handle);
        assert_eq!(
            state_names(&event),
            ["GroupStartApiStop", "GroupEndApiStart"]
        );
        for s in event["states"].as_array().unwrap() {
            let keys: Vec<&String> = s.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["ns", "state"], "no argument fields: {s}");
        }
    }
    assert_eq!(by_id(&events, shimmed)["group_depth"], 2);
    assert_eq!(state_names(&by_id(&events, op)), ["ProxyOpInProgress"]);
    assert_counters(&plugin.counters(), &[("events_written", 3)]);
}

#[test]
fn v1_table_writes_the_mask_and_decodes_enum_numbers() {
    // A v1 init through the old table writes the same mask (NCCL's shims clear what the
    // version cannot carry; the plugin writes what it was asked for).
    let plugin = Plugin::load(&[("NCCL_SCOREP_EVENTS", "coll,proxy_op")]);
    let (ctx, mask) = plugin.init_v1();
    assert_eq!(mask, (t::COLL | t::PROXY_OP) as c_int);
    // v1 coll: enum numbers instead of strings.
    // SAFETY: zeroed descriptor is valid.
    let mut d: v1::ncclProfilerEventDescr_v1_t = unsafe { std::mem::zeroed() };
    d.type_ = t::COLL as u8;
    d.u.coll.func = 4;
    d.u.coll.datatype = 7;
    d.u.coll.count = 2;
    d.u.coll.algo = 1;
    d.u.coll.proto = 2;
    let coll = start_with(plugin.v1().startEvent, ctx, &mut d);
    assert!(!coll.is_null());
    // A v1 state on a v7-kind handle goes through the v1 args decoder; NULL args.
    // SAFETY: any handle; NULL args.
    let rc = unsafe { (plugin.v1().recordEventState)(coll.0, 99, null_mut()) };
    assert_eq!(rc, 0);
    plugin.stop7(coll);
    plugin.finalize7(ctx);
    let events = plugin.events();
    let event = by_id(&events, coll);
    assert_eq!(event["func"], "AllReduce");
    assert_eq!(event["datatype"], "ncclFloat32");
    assert_eq!(event["bytes"], 8);
    assert_eq!(event["algo"], "RING");
    assert_eq!(event["proto"], "SIMPLE");
    assert_eq!(plugin.lines_of("comm")[0]["api_version"], 1);
    assert_counters(
        &plugin.counters(),
        &[("events_written", 1), ("unknown_state", 1)],
    );
}

#[test]
fn counts_whose_size_overflows_64_bits_are_written() {
    // A count of 2^64−1 eight-byte elements once overflowed the byte counts of the event
    // log and of the trace's collective (times the rank count): the collector thread
    // panicked (debug builds) and the rest of the trace was lost.
    let plugin = Plugin::load(&[("NCCL_SCOREP_MODE", "otf2"), ("NCCL_SCOREP_JSONL", "1")]);
    let (ctx, _) = plugin.init_v7(HASH, None, 0, 4);
    let api = plugin.start7(
        ctx,
        &mut coll_api7(NULL, c"AllGather", usize::MAX, c"ncclFloat32"),
    );
    let coll = plugin.start7(
        ctx,
        &mut coll7(api, NULL, 0, 1, c"AllGather", usize::MAX, c"ncclFloat64", 1),
    );
    plugin.stop7(coll);
    plugin.stop7(api);
    let after = plugin.start7(ctx, &mut group_api7(1));
    plugin.stop7(after);
    plugin.finalize7(ctx);

    let events = plugin.events();
    assert_eq!(events.len(), 3);
    for handle in [api, coll] {
        let event = by_id(&events, handle);
        assert_eq!(event["count"], u64::MAX, "{event}");
        assert_eq!(event["bytes"], u64::MAX, "saturated: {event}");
    }
    assert_eq!(by_id(&events, after)["closed"], "stop");
    assert_counters(&plugin.counters(), &[("events_written", 3)]);
}
