mod support;

// Every exported version driven through its own table with descriptors of its own type,
// built by hand as NCCL (or NCCL's shim for that version) builds them; the assertions are
// on the event log. The v4 and v5 shims do not zero descriptors: those tests start from
// 0xAB garbage, so any read of another kind's pointer member crashes.

use nccl_profiler_abi::CBool;
use nccl_profiler_abi::{
    self as abi, event_type as t, state, v1, v2, v3, v4, v5, v6, v7, NetIbDescrV1, NetIbQpV1,
    NetPluginDescr, NetSockDescrV1, NetSockV1,
};
use serde_json::{json, Value};
use std::ffi::{c_char, c_void, CStr};
use std::ptr::{null, null_mut};
use support::*;

fn load() -> Plugin {
    Plugin::load(&[("NCCL_SCOREP_EVENTS", "all")])
}

fn cstr(s: &'static CStr) -> *const c_char {
    s.as_ptr()
}

/// The keys of a state entry besides its name and time.
fn state_arg_keys(state: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = state
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .filter(|k| *k != "state" && *k != "ns")
        .collect();
    keys.sort_unstable();
    keys
}

fn single_comm(plugin: &Plugin) -> Value {
    let comms = plugin.lines_of("comm");
    assert_eq!(comms.len(), 1, "{comms:#?}");
    comms[0].clone()
}

#[test]
fn every_table_has_the_same_name() {
    let plugin = load();
    let names = [
        plugin.v1().name,
        plugin.v2().name,
        plugin.v3().name,
        plugin.v4().name,
        plugin.v5().name,
        plugin.v6().name,
        plugin.v7().name,
    ];
    for (v, name) in names.into_iter().enumerate() {
        // SAFETY: every table's name is a static C string.
        let name = unsafe { CStr::from_ptr(name) };
        assert_eq!(name.to_str().unwrap(), "nccl-scorep", "v{}", v + 1);
    }
}

// ---------------------------------------------------------------------------------------
// v1

fn coll_v1(
    parent: Handle,
    rank: i32,
    func: u8,
    datatype: u8,
    algo: u8,
    proto: u8,
) -> v1::ncclProfilerEventDescr_v1_t {
    let mut d: v1::ncclProfilerEventDescr_v1_t = zeroed();
    d.type_ = t::COLL as u8;
    d.parentObj = parent.0;
    d.rank = rank;
    d.u.coll = v1::CollV1 {
        name: cstr(c"world"),
        commHash: 0x1234_5678_9abc,
        seqNumber: 7,
        func,
        sendBuff: null(),
        recvBuff: null_mut(),
        count: 256,
        root: 0,
        datatype,
        op: 3,
        trafficBytes: 999_999,
        nMaxChannels: 4,
        nWarps: 8,
        algo,
        proto,
        isCollnet: 1,
        isNvls: 1,
    };
    d
}

/// v1's enum numbers, the descriptor's commHash, and the comm line of an `init` that
/// carries no communicator information.
#[test]
fn v1_enum_numbers_decode_and_init_has_no_comm_info() {
    let plugin = load();
    let table = plugin.v1();
    let (ctx, mask) = plugin.init_2arg(table);
    // Every kind v1 has (Group … ProxyCtrl), and no bit it does not define.
    assert_eq!(mask, 0x3F);

    let mut group_d: v1::ncclProfilerEventDescr_v1_t = zeroed();
    group_d.type_ = t::GROUP as u8;
    let group = start_in(table, ctx, &mut group_d);
    assert!(!group.is_null());
    let known = start_in(table, ctx, &mut coll_v1(group, 3, 4, 7, 1, 2));
    let unknown = start_in(table, ctx, &mut coll_v1(group, 3, 99, 42, 9, 7));
    // Rank 0 is a real rank on a Coll: it must not become the unknown comm rank.
    let uint8 = start_in(table, ctx, &mut coll_v1(group, 0, 2, 1, 0, 0));
    let mut p2p_d: v1::ncclProfilerEventDescr_v1_t = zeroed();
    p2p_d.type_ = t::P2P as u8;
    p2p_d.parentObj = group.0;
    p2p_d.rank = 3;
    p2p_d.u.p2p = v1::P2pV1 {
        name: cstr(c"world"),
        commHash: 0x1234_5678_9abc,
        func: 6,
        buff: null_mut(),
        datatype: 1,
        count: 100,
        peer: 5,
    };
    let p2p = start_in(table, ctx, &mut p2p_d);
    for h in [known, unknown, uint8, p2p, group] {
        stop_in(table, h);
    }
    finalize_in(table, ctx);

    // The init line knows nothing; the first Coll's descriptor (2.23–2.25) gives the hash
    // and the rank, announced by a second comm line for the same context.
    let comms = plugin.lines_of("comm");
    assert_eq!(comms.len(), 2, "{comms:#?}");
    let comm = &comms[0];
    assert_eq!(comm["comm_hash"], "0x0");
    assert_eq!(comm["comm_name"], Value::Null);
    assert_eq!(comm["rank"], -1);
    assert_eq!(comm["nranks"], -1);
    assert_eq!(comm["nnodes"], -1);
    assert_eq!(comm["api_version"], 1);
    let learned = &comms[1];
    assert_eq!(learned["context"], comm["context"]);
    assert_eq!(learned["comm_hash"], "0x123456789abc");
    assert_eq!(learned["rank"], 3);

    let events = plugin.events();
    assert_eq!(events.len(), 5, "{events:#?}");
    let group_event = by_id(&events, group);
    assert_eq!(group_event["kind"], "Group");
    assert_eq!(
        group_event["rank"], 3,
        "rank unset on Group: the comm rank learned from the Coll"
    );
    assert_eq!(group_event["comm_hash"], "0x123456789abc");
    assert_eq!(group_event["nranks"], -1);
    assert!(group_event.get("comm_name").is_none());

    let c = by_id(&events, known);
    assert_eq!(c["kind"], "Coll");
    assert_eq!(c["func"], "AllReduce");
    assert_eq!(c["datatype"], "ncclFloat32");
    assert_eq!(c["algo"], "RING");
    assert_eq!(c["proto"], "SIMPLE");
    assert_eq!(c["count"], 256);
    assert_eq!(c["bytes"], 1024);
    assert_eq!(c["seq"], 7);
    assert_eq!(c["nchannels"], 4, "nMaxChannels");
    assert_eq!(c["nwarps"], 8);
    assert_eq!(c["descr_comm_hash"], "0x123456789abc");
    assert_eq!(
        c["comm_hash"], "0x123456789abc",
        "learned from the descriptor"
    );
    assert_eq!(c["rank"], 3);
    assert_eq!(c["parent"]["kind"], "Group");
    assert_eq!(c["parent"]["id"], id_of(group));
    assert_eq!(c["parent_group"], id_of(group));
    for removed in ["op", "traffic_bytes", "is_collnet", "is_nvls", "name"] {
        assert!(c.get(removed).is_none(), "{removed}");
    }

    let u = by_id(&events, unknown);
    for field in ["func", "datatype", "algo", "proto"] {
        assert_eq!(u[field], "Unknown", "{field}");
    }
    assert_eq!(u["bytes"], Value::Null);

    let b = by_id(&events, uint8);
    assert_eq!(b["func"], "AllGather");
    assert_eq!(b["datatype"], "ncclUint8");
    assert_eq!(b["algo"], "TREE");
    assert_eq!(b["proto"], "LL");
    assert_eq!(b["bytes"], 256);
    assert_eq!(b["rank"], 0);

    let p = by_id(&events, p2p);
    assert_eq!(p["kind"], "P2p");
    assert_eq!(p["func"], "Send");
    assert_eq!(p["datatype"], "ncclUint8");
    assert_eq!(p["count"], 100);
    assert_eq!(p["bytes"], 100);
    assert_eq!(p["peer"], 5);
    assert_eq!(p["nchannels"], Value::Null, "v1 p2p has no channel count");
    assert_eq!(p["descr_comm_hash"], "0x123456789abc");
    assert_eq!(p["parent_group"], id_of(group));
}

/// v1 state arguments: ProxyOp states 0–7 carry {transSize, steps}, ProxyCtrl 13–18 the
/// appended count, ProxyStep 8–12 nothing. States are checked per kind, not per version.
#[test]
fn v1_states_and_their_arguments() {
    let plugin = load();
    let table = plugin.v1();
    let (ctx, _) = plugin.init_2arg(table);

    let mut op_d: v1::ncclProfilerEventDescr_v1_t = zeroed();
    op_d.type_ = t::PROXY_OP as u8;
    op_d.rank = 2;
    op_d.u.proxyOp = abi::ProxyOpDescr {
        pid: pid(),
        channelId: 3,
        peer: 1,
        nSteps: 8,
        chunkSize: 4096,
        isSend: 1,
    };
    let op = start_in(table, ctx, &mut op_d);
    for s in 0..=7 {
        record_in(table, op, s, Some(v1_progress(1000 * s as usize, s + 1)));
    }
    // 22 (KernelChStop) is not a ProxyOp state: refused.
    record_in(table, op, state::KERNEL_CH_STOP, Some(v1_progress(1, 1)));
    // 13 is a ProxyCtrl state: refused on a ProxyOp.
    record_in(table, op, state::PROXY_CTRL_IDLE, Some(v1_appended(1)));
    // Out of range.
    record_in(table, op, 32, None);
    record_in(table, op, -1, None);
    // 19 is a ProxyOp state of v4+: the check is per kind, so a v1 ProxyOp accepts it,
    // and v1 arguments are not read for it.
    record_in(
        table,
        op,
        state::PROXY_OP_IN_PROGRESS_V4,
        Some(v1_progress(5, 5)),
    );

    let mut step_d: v1::ncclProfilerEventDescr_v1_t = zeroed();
    step_d.type_ = t::PROXY_STEP as u8;
    step_d.parentObj = op.0;
    step_d.rank = 2;
    step_d.u.proxyStep = abi::ProxyStepDescr { step: 6 };
    let step = start_in(table, ctx, &mut step_d);
    for s in state::PROXY_STEP_SEND_GPU_WAIT..=state::PROXY_STEP_RECV_GPU_WAIT {
        record_in(table, step, s, Some(v1_progress(77, 1)));
    }
    stop_in(table, step);

    let mut ctrl_d: v1::ncclProfilerEventDescr_v1_t = zeroed();
    ctrl_d.type_ = t::PROXY_CTRL as u8;
    let ctrl = start_in(table, ctx, &mut ctrl_d);
    for s in state::PROXY_CTRL_IDLE..=state::PROXY_CTRL_APPEND_END {
        record_in(table, ctrl, s, Some(v1_appended(s - 10)));
    }
    stop_in(table, ctrl);
    stop_in(table, op);

    // Kinds v1 does not know never get a handle.
    for bit in [t::KERNEL_CH, t::NET_PLUGIN, 0, 0x3] {
        let mut d: v1::ncclProfilerEventDescr_v1_t = zeroed();
        d.type_ = bit as u8;
        assert!(start_in(table, ctx, &mut d).is_null(), "type {bit:#x}");
    }
    finalize_in(table, ctx);

    let events = plugin.events();
    assert_eq!(events.len(), 3, "{events:#?}");
    let op_event = by_id(&events, op);
    assert_eq!(op_event["kind"], "ProxyOp");
    assert_eq!(op_event["channel"], 3);
    assert_eq!(op_event["n_steps"], 8);
    assert_eq!(op_event["chunk_size"], 4096);
    assert_eq!(op_event["is_send"], true);
    assert_eq!(op_event["rank"], 2);
    let states = op_event["states"].as_array().unwrap();
    let names = state_names(&op_event);
    assert_eq!(
        names,
        [
            "ProxyOpSendPosted",
            "ProxyOpSendRemFifoWait",
            "ProxyOpSendTransmitted",
            "ProxyOpSendDone",
            "ProxyOpRecvPosted",
            "ProxyOpRecvReceived",
            "ProxyOpRecvTransmitted",
            "ProxyOpRecvDone",
            "ProxyOpInProgress",
        ]
    );
    for (s, entry) in states.iter().take(8).enumerate() {
        assert_eq!(entry["trans_size"], 1000 * s as u64, "{entry}");
        assert_eq!(entry["steps"], s as i64 + 1, "{entry}");
    }
    assert!(state_arg_keys(&states[8]).is_empty(), "{}", states[8]);

    let step_event = by_id(&events, step);
    assert_eq!(step_event["step"], 6);
    assert_eq!(step_event["parent"]["kind"], "ProxyOp");
    assert_eq!(step_event["states"].as_array().unwrap().len(), 5);
    for entry in step_event["states"].as_array().unwrap() {
        assert!(
            state_arg_keys(entry).is_empty(),
            "v1 has no step args: {entry}"
        );
    }

    let ctrl_event = by_id(&events, ctrl);
    assert_eq!(ctrl_event["parent"], Value::Null);
    let appended: Vec<i64> = ctrl_event["states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["appended"].as_i64().unwrap())
        .collect();
    assert_eq!(appended, [3, 4, 5, 6, 7, 8]);
    assert_eq!(
        state_names(&ctrl_event),
        [
            "ProxyCtrlIdle",
            "ProxyCtrlActive",
            "ProxyCtrlSleep",
            "ProxyCtrlWakeup",
            "ProxyCtrlAppend",
            "ProxyCtrlAppendEnd"
        ]
    );

    let counters = plugin.counters();
    assert_eq!(counters["unknown_state"], 4);
    assert_eq!(counters["unknown_type"], 4);
}

// ---------------------------------------------------------------------------------------
// v2 and v3

#[test]
fn v2_reads_strings_and_ignores_traffic_bytes() {
    let plugin = load();
    let table = plugin.v2();
    let (ctx, _) = plugin.init_2arg(table);
    let mut group_d: v2::ncclProfilerEventDescr_v2_t = zeroed();
    group_d.type_ = t::GROUP as u8;
    let group = start_in(table, ctx, &mut group_d);

    let mut coll_d: v2::ncclProfilerEventDescr_v2_t = zeroed();
    coll_d.type_ = t::COLL as u8;
    coll_d.parentObj = group.0;
    coll_d.rank = 1;
    coll_d.u.coll = v2::CollV2 {
        name: null(),
        commHash: 0,
        seqNumber: 11,
        func: cstr(c"ReduceScatter"),
        sendBuff: null(),
        recvBuff: null_mut(),
        count: 1000,
        root: 0,
        datatype: cstr(c"ncclBfloat16"),
        trafficBytes: 123_456_789,
        nMaxChannels: 6,
        nWarps: 4,
        algo: cstr(c"NVLS_TREE"),
        proto: cstr(c"LL128"),
    };
    let coll = start_in(table, ctx, &mut coll_d);
    let mut p2p_d: v2::ncclProfilerEventDescr_v2_t = zeroed();
    p2p_d.type_ = t::P2P as u8;
    p2p_d.parentObj = group.0;
    p2p_d.rank = 1;
    p2p_d.u.p2p = v2::P2pV2 {
        name: null(),
        commHash: 0xabc,
        func: cstr(c"Recv"),
        buff: null_mut(),
        datatype: cstr(c"ncclInt64"),
        count: 10,
        peer: 0,
    };
    let p2p = start_in(table, ctx, &mut p2p_d);
    let mut kernel_d: v2::ncclProfilerEventDescr_v2_t = zeroed();
    kernel_d.type_ = t::KERNEL_CH as u8;
    assert!(
        start_in(table, ctx, &mut kernel_d).is_null(),
        "v2 has no KernelCh"
    );
    for h in [coll, p2p, group] {
        stop_in(table, h);
    }
    finalize_in(table, ctx);

    // The P2p's commHash completes the context: a second comm line.
    let comms = plugin.lines_of("comm");
    assert_eq!(comms.len(), 2, "{comms:#?}");
    assert_eq!(comms[0]["api_version"], 2);
    assert_eq!(comms[0]["rank"], -1);
    assert_eq!(comms[1]["comm_hash"], "0xabc");
    assert_eq!(comms[1]["rank"], 1);
    let events = plugin.events();
    assert_eq!(events.len(), 3);
    let c = by_id(&events, coll);
    assert_eq!(c["func"], "ReduceScatter");
    assert_eq!(c["datatype"], "ncclBfloat16");
    assert_eq!(c["algo"], "NVLS_TREE");
    assert_eq!(c["proto"], "LL128");
    assert_eq!(c["seq"], 11);
    assert_eq!(c["nchannels"], 6);
    assert_eq!(c["nwarps"], 4);
    assert_eq!(c["bytes"], 2000, "count × size, never trafficBytes");
    assert!(c.get("descr_comm_hash").is_none(), "NCCL sent commHash 0");
    assert_eq!(c["parent_group"], id_of(group));
    assert_eq!(c["rank"], 1);
    let p = by_id(&events, p2p);
    assert_eq!(p["func"], "Recv");
    assert_eq!(p["datatype"], "ncclInt64");
    assert_eq!(p["bytes"], 80);
    assert_eq!(p["peer"], 0);
    assert_eq!(p["descr_comm_hash"], "0xabc");
    assert_eq!(p["rank"], 1);
    assert_eq!(plugin.counters()["unknown_type"], 1);
}

#[test]
fn v3_kernel_ch_has_no_timer_and_net_plugin_decodes() {
    let plugin = load();
    let table = plugin.v3();
    let (ctx, _) = plugin.init_2arg(table);
    let mut coll_d: v3::ncclProfilerEventDescr_v3_t = zeroed();
    coll_d.type_ = t::COLL as u8;
    coll_d.rank = 2;
    coll_d.u.coll = v3::CollV3 {
        name: null(),
        commHash: 0,
        seqNumber: 1,
        func: cstr(c"AllReduce"),
        sendBuff: null(),
        recvBuff: null_mut(),
        count: 8,
        root: 0,
        datatype: cstr(c"ncclFloat64"),
        nMaxChannels: 2,
        nWarps: 16,
        algo: cstr(c"PAT"),
        proto: cstr(c"LL"),
    };
    let coll = start_in(table, ctx, &mut coll_d);

    let mut kernel_d: v3::ncclProfilerEventDescr_v3_t = zeroed();
    kernel_d.type_ = t::KERNEL_CH as u8;
    kernel_d.parentObj = coll.0;
    kernel_d.u.kernelCh = abi::KernelChDescrV3 { channelId: 1 };
    let kernel = start_in(table, ctx, &mut kernel_d);
    // 22 is a KernelCh state, accepted by kind; v1–v3 arguments carry no timer.
    record_in(
        table,
        kernel,
        state::KERNEL_CH_STOP,
        Some(v1_progress(9, 9)),
    );
    stop_in(table, kernel);

    let mut step_d: v3::ncclProfilerEventDescr_v3_t = zeroed();
    step_d.type_ = t::PROXY_STEP as u8;
    step_d.rank = 2;
    step_d.u.proxyStep = abi::ProxyStepDescr { step: 0 };
    let step = start_in(table, ctx, &mut step_d);
    let qp = NetIbDescrV1 {
        type_: abi::net::IB_QP,
        qp: NetIbQpV1 {
            device: 2,
            wr_id: 0xfeed,
            opcode: 4,
            qpNum: 77,
            length: 65536,
        },
    };
    let mut net_d: v3::ncclProfilerEventDescr_v3_t = zeroed();
    net_d.type_ = t::NET_PLUGIN as u8;
    net_d.parentObj = step.0;
    net_d.rank = 2;
    net_d.u.netPlugin = NetPluginDescr {
        id: 0x1_0001,
        data: &qp as *const NetIbDescrV1 as *mut c_void,
    };
    let net = start_in(table, ctx, &mut net_d);
    record_in(
        table,
        net,
        state::NET_PLUGIN_UPDATE,
        Some(v1_progress(1, 1)),
    );
    stop_in(table, net);
    stop_in(table, step);
    stop_in(table, coll);
    finalize_in(table, ctx);

    assert_eq!(single_comm(&plugin)["api_version"], 3);
    let events = plugin.events();
    assert_eq!(events.len(), 4);
    let c = by_id(&events, coll);
    assert_eq!(c["algo"], "PAT");
    assert_eq!(c["proto"], "LL");
    assert_eq!(c["bytes"], 64);
    assert_eq!(c["nchannels"], 2);
    let k = by_id(&events, kernel);
    assert_eq!(k["kind"], "KernelCh");
    assert_eq!(k["channel"], 1);
    assert_eq!(k["ptimer_start"], Value::Null);
    assert_eq!(k["parent"]["kind"], "Coll");
    assert_eq!(state_names(&k), ["KernelChStop"]);
    assert!(state_arg_keys(&k["states"][0]).is_empty());
    let n = by_id(&events, net);
    assert_eq!(n["parent"]["kind"], "ProxyStep");
    assert_eq!(n["net_id"], "0x10001");
    assert_eq!(
        n["net"],
        json!({"type": "ib_qp", "device": 2, "wr_id": 0xfeed, "opcode": 4,
               "qp_num": 77, "length": 65536})
    );
    assert_eq!(state_names(&n), ["NetPluginUpdate"]);
    assert!(state_arg_keys(&n["states"][0]).is_empty(), "no v3 data arg");
    assert_eq!(n["rank"], 2);
    assert_eq!(
        n["context"],
        by_id(&events, step)["context"],
        "owner via the step"
    );
}

// ---------------------------------------------------------------------------------------
// v4

fn v4_descr(type_: u64, parent: Handle, rank: i32) -> v4::ncclProfilerEventDescr_v4_t {
    let mut d: v4::ncclProfilerEventDescr_v4_t = garbage();
    d.type_ = type_ as u8;
    d.parentObj = parent.0;
    d.rank = rank;
    d
}

/// The v4 shim: garbage-filled descriptors, `init(ctx, mask, commName, commHash, …)`,
/// p2p.nChannels never trusted, KernelCh pTimer and the 8-byte state arguments.
#[test]
fn v4_init_order_garbage_descriptors_and_state_args() {
    let plugin = load();
    let table = plugin.v4();
    let (ctx, mask) = plugin.init_v4_args(Some(c"trainer-v4"), 0xC0FFEE, 2, 8, 5);
    // v1's kinds, KernelCh and NetPlugin.
    assert_eq!(mask, 0xFF);

    let group = start_in(table, ctx, &mut v4_descr(t::GROUP, Handle::NULL, 5));
    let mut coll_d = v4_descr(t::COLL, group, 5);
    coll_d.u.coll = v4::CollV4 {
        seqNumber: 3,
        func: cstr(c"AllReduce"),
        sendBuff: null(),
        recvBuff: null_mut(),
        count: 16,
        root: 0,
        datatype: cstr(c"ncclFloat16"),
        nChannels: 12,
        nWarps: 16,
        algo: cstr(c"COLLNET_CHAIN"),
        proto: cstr(c"SIMPLE"),
    };
    let coll = start_in(table, ctx, &mut coll_d);
    let mut p2p_d = v4_descr(t::P2P, group, 5);
    // Field by field, as the shim does: nChannels stays garbage (0xAB).
    p2p_d.u.p2p.func = cstr(c"Send");
    p2p_d.u.p2p.buff = null_mut();
    p2p_d.u.p2p.datatype = cstr(c"ncclInt32");
    p2p_d.u.p2p.count = 50;
    p2p_d.u.p2p.peer = 6;
    // SAFETY: reading bytes of a union member; any value is a valid u8.
    let channels = unsafe { p2p_d.u.p2p.nChannels };
    assert_eq!(channels, 0xAB, "garbage is really there");
    let p2p = start_in(table, ctx, &mut p2p_d);

    let mut op_d = v4_descr(t::PROXY_OP, coll, 5);
    op_d.u.proxyOp = abi::ProxyOpDescr {
        pid: pid(),
        channelId: 0,
        peer: 4,
        nSteps: 2,
        chunkSize: 1 << 19,
        isSend: 0,
    };
    let op = start_in(table, ctx, &mut op_d);
    // 19 comes with uninitialised arguments: never read.
    record_in(
        table,
        op,
        state::PROXY_OP_IN_PROGRESS_V4,
        Some(garbage_args()),
    );
    let mut step_d = v4_descr(t::PROXY_STEP, op, 5);
    step_d.u.proxyStep.step = 1;
    let step = start_in(table, ctx, &mut step_d);
    let step_states = [8, 9, 10, 11, 12, 20];
    for (i, s) in step_states.into_iter().enumerate() {
        record_in(table, step, s, Some(trans_size(100 + i)));
    }
    let sock = NetSockDescrV1 {
        type_: abi::net::SOCKET,
        sock: NetSockV1 {
            fd: 17,
            op: 1,
            length: 4096,
        },
    };
    let mut net_d = v4_descr(t::NET_PLUGIN, step, 5);
    net_d.u.netPlugin = NetPluginDescr {
        id: 0x2_0001,
        data: &sock as *const NetSockDescrV1 as *mut c_void,
    };
    let net = start_in(table, ctx, &mut net_d);
    record_in(
        table,
        net,
        state::NET_PLUGIN_UPDATE,
        Some(net_data(0x5000 as *mut c_void)),
    );
    stop_in(table, net);
    stop_in(table, step);
    stop_in(table, op);

    let mut kernel_d = v4_descr(t::KERNEL_CH, coll, 0);
    kernel_d.u.kernelCh = abi::KernelChDescrV4 {
        channelId: 9,
        pTimer: 5_000,
    };
    let kernel = start_in(table, ctx, &mut kernel_d);
    record_in(table, kernel, state::KERNEL_CH_STOP, Some(ptimer(7_500)));
    stop_in(table, kernel);

    let ctrl = start_in(table, ctx, &mut v4_descr(t::PROXY_CTRL, Handle::NULL, 0));
    for s in state::PROXY_CTRL_IDLE..=state::PROXY_CTRL_APPEND_END {
        record_in(table, ctrl, s, Some(appended(s)));
    }
    stop_in(table, ctrl);
    for h in [coll, p2p, group] {
        stop_in(table, h);
    }
    // v5 kinds do not exist in v4: NULL handle, nothing read.
    for bit in [t::GROUP_API, t::COLL_API, t::KERNEL_LAUNCH] {
        assert!(start_in(table, ctx, &mut v4_descr(bit, Handle::NULL, 0)).is_null());
    }
    finalize_in(table, ctx);

    let comm = single_comm(&plugin);
    assert_eq!(comm["comm_hash"], "0xc0ffee");
    assert_eq!(comm["comm_name"], "trainer-v4");
    assert_eq!(comm["nnodes"], 2);
    assert_eq!(comm["nranks"], 8);
    assert_eq!(comm["rank"], 5);
    assert_eq!(comm["api_version"], 4);

    let events = plugin.events();
    assert_eq!(events.len(), 8, "{events:#?}");
    for event in &events {
        assert_eq!(event["comm_hash"], "0xc0ffee", "{event}");
        assert_eq!(event["comm_name"], "trainer-v4", "{event}");
        assert_eq!(event["nranks"], 8);
        assert_eq!(event["rank"], 5, "{event}");
        assert_eq!(event["closed"], "stop");
    }
    let c = by_id(&events, coll);
    assert_eq!(c["nchannels"], 12);
    assert_eq!(c["algo"], "COLLNET_CHAIN");
    assert_eq!(c["bytes"], 32);
    assert_eq!(c["parent"]["kind"], "Group");
    assert!(c.get("descr_comm_hash").is_none());
    let p = by_id(&events, p2p);
    assert_eq!(p["nchannels"], Value::Null, "v4 shim leaves it garbage");
    assert_eq!(p["peer"], 6);
    assert_eq!(p["bytes"], 200);
    let op_event = by_id(&events, op);
    assert_eq!(op_event["parent"]["kind"], "Coll");
    assert_eq!(state_names(&op_event), ["ProxyOpInProgress"]);
    assert!(state_arg_keys(&op_event["states"][0]).is_empty());
    let step_event = by_id(&events, step);
    assert_eq!(
        state_names(&step_event),
        [
            "ProxyStepSendGPUWait",
            "ProxyStepSendWait",
            "ProxyStepRecvWait",
            "ProxyStepRecvFlushWait",
            "ProxyStepRecvGPUWait",
            "ProxyStepSendPeerWait"
        ]
    );
    for (i, entry) in step_event["states"].as_array().unwrap().iter().enumerate() {
        assert_eq!(entry["trans_size"], 100 + i as u64);
        assert_eq!(state_arg_keys(entry), ["trans_size"]);
    }
    let n = by_id(&events, net);
    assert_eq!(
        n["net"],
        json!({"type": "socket", "fd": 17, "op": 1, "length": 4096})
    );
    assert_eq!(n["states"][0]["data"], "0x5000");
    let k = by_id(&events, kernel);
    assert_eq!(k["channel"], 9);
    assert_eq!(k["ptimer_start"], 5_000);
    assert_eq!(k["states"][0]["ptimer"], 7_500);
    let ctrl_event = by_id(&events, ctrl);
    let appended: Vec<i64> = ctrl_event["states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["appended"].as_i64().unwrap())
        .collect();
    assert_eq!(appended, [13, 14, 15, 16, 17, 18]);
    let counters = plugin.counters();
    assert_eq!(counters["unknown_type"], 3);
    assert_eq!(counters["unknown_state"], 0);
}

// ---------------------------------------------------------------------------------------
// v5

fn v5_descr(type_: u64, parent: Handle, rank: i32) -> v5::ncclProfilerEventDescr_v5_t {
    let mut d: v5::ncclProfilerEventDescr_v5_t = garbage();
    d.type_ = type_;
    d.parentObj = parent.0;
    d.rank = rank;
    d
}

/// v5 (through the v5 shim: garbage descriptors): the API events, a Coll whose parent is
/// its CollApi and whose parentGroup is the Group, and `init(ctx, commId, mask, …)`.
#[test]
fn v5_api_events_and_both_parents() {
    let plugin = load();
    let table = plugin.v5();
    let (ctx, _) = plugin.init_5arg(table, 0x5555_0000_1111, Some(c"v5-comm"), 3, 6, 4);

    let mut group_api_d = v5_descr(t::GROUP_API, Handle::NULL, 0);
    // The padding after the bool stays garbage, and the bool itself is a byte that is
    // neither 0 nor 1 (read as a Rust bool, that was undefined behaviour).
    group_api_d.u.groupApi.graphCaptured = CBool(0xA5);
    group_api_d.u.groupApi.groupDepth = 2;
    let group_api = start_in(table, ctx, &mut group_api_d);
    // 23/24 through the v5 shim: a non-NULL pointer to uninitialised arguments.
    record_in(
        table,
        group_api,
        state::GROUP_START_API_STOP,
        Some(garbage_args()),
    );
    let mut coll_api_d = v5_descr(t::COLL_API, group_api, 0);
    coll_api_d.u.collApi = v5::CollApiV5 {
        func: cstr(c"Broadcast"),
        count: 100,
        datatype: cstr(c"ncclInt32"),
        root: 2,
        stream: 0x77 as *mut c_void,
        graphCaptured: CBool::TRUE,
    };
    let coll_api = start_in(table, ctx, &mut coll_api_d);
    stop_in(table, coll_api);
    let mut p2p_api_d = v5_descr(t::P2P_API, group_api, 0);
    p2p_api_d.u.p2pApi = v5::P2pApiV5 {
        func: cstr(c"Send"),
        count: 9,
        datatype: cstr(c"ncclUint64"),
        stream: null_mut(),
        graphCaptured: CBool::FALSE,
    };
    let p2p_api = start_in(table, ctx, &mut p2p_api_d);
    stop_in(table, p2p_api);
    record_in(
        table,
        group_api,
        state::GROUP_END_API_START,
        Some(garbage_args()),
    );
    let mut launch_d = v5_descr(t::KERNEL_LAUNCH, group_api, 0);
    launch_d.u.kernelLaunch.stream = 0x77 as *mut c_void;
    let launch = start_in(table, ctx, &mut launch_d);
    stop_in(table, launch);
    let group = start_in(table, ctx, &mut v5_descr(t::GROUP, Handle::NULL, 0));
    let mut coll_d = v5_descr(t::COLL, coll_api, 4);
    coll_d.u.coll = v5::CollV5 {
        seqNumber: 0,
        func: cstr(c"Broadcast"),
        sendBuff: null(),
        recvBuff: null_mut(),
        count: 400,
        root: 2,
        datatype: cstr(c"ncclInt8"),
        nChannels: 2,
        nWarps: 8,
        algo: cstr(c"RING"),
        proto: cstr(c"LL"),
        parentGroup: group.0,
    };
    let coll = start_in(table, ctx, &mut coll_d);
    let mut p2p_d = v5_descr(t::P2P, p2p_api, 4);
    p2p_d.u.p2p = v5::P2pV5 {
        func: cstr(c"Send"),
        buff: null_mut(),
        datatype: cstr(c"ncclUint64"),
        count: 9,
        peer: 1,
        nChannels: 3,
        parentGroup: group.0,
    };
    let p2p = start_in(table, ctx, &mut p2p_d);
    stop_in(table, coll);
    stop_in(table, p2p);
    stop_in(table, group);
    stop_in(table, group_api);

    // `type` is a u64: a high bit beside a known one is no kind at all, and a kind above
    // bit 7 is not truncated to a byte.
    assert!(start_in(table, ctx, &mut v5_descr(0x1_0000_0002, Handle::NULL, 0)).is_null());
    assert!(start_in(table, ctx, &mut v5_descr(t::CE_COLL, Handle::NULL, 0)).is_null());
    assert!(start_in(table, ctx, &mut v5_descr(t::KERNEL_PHASE, Handle::NULL, 0)).is_null());
    finalize_in(table, ctx);

    let comm = single_comm(&plugin);
    assert_eq!(comm["comm_hash"], "0x555500001111");
    assert_eq!(comm["comm_name"], "v5-comm");
    assert_eq!(comm["nnodes"], 3);
    assert_eq!(comm["nranks"], 6);
    assert_eq!(comm["rank"], 4);
    assert_eq!(comm["api_version"], 5);

    let events = plugin.events();
    assert_eq!(events.len(), 7, "{events:#?}");
    for event in &events {
        assert_eq!(event["rank"], 4, "API events take the comm's rank: {event}");
        assert_eq!(event["comm_hash"], "0x555500001111");
    }
    let ga = by_id(&events, group_api);
    assert_eq!(ga["kind"], "GroupApi");
    assert_eq!(ga["graph_captured"], true);
    assert_eq!(ga["group_depth"], 2);
    assert_eq!(state_names(&ga), ["GroupStartApiStop", "GroupEndApiStart"]);
    for entry in ga["states"].as_array().unwrap() {
        assert!(state_arg_keys(entry).is_empty(), "garbage never read");
    }
    let ca = by_id(&events, coll_api);
    assert_eq!(ca["kind"], "CollApi");
    assert_eq!(ca["parent"]["id"], id_of(group_api));
    assert_eq!(ca["func"], "Broadcast");
    assert_eq!(ca["count"], 100);
    assert_eq!(ca["datatype"], "ncclInt32");
    assert_eq!(ca["bytes"], 400, "CollApi keeps the user's count and type");
    assert_eq!(ca["root"], 2);
    assert_eq!(ca["graph_captured"], true);
    let pa = by_id(&events, p2p_api);
    assert_eq!(pa["kind"], "P2pApi");
    assert_eq!(pa["func"], "Send");
    assert_eq!(pa["bytes"], 72);
    assert_eq!(pa["parent"]["kind"], "GroupApi");
    let kl = by_id(&events, launch);
    assert_eq!(kl["kind"], "KernelLaunch");
    assert_eq!(kl["parent"]["id"], id_of(group_api));
    let c = by_id(&events, coll);
    assert_eq!(c["parent"]["kind"], "CollApi");
    assert_eq!(c["parent"]["id"], id_of(coll_api));
    assert_eq!(c["parent_group"], id_of(group));
    assert_eq!(c["datatype"], "ncclInt8");
    assert_eq!(c["count"], 400);
    assert_eq!(c["bytes"], 400, "Broadcast tasks count bytes");
    assert!(c.get("user_tag").is_none(), "v5 has no userTag");
    let p = by_id(&events, p2p);
    assert_eq!(p["parent"]["kind"], "P2pApi");
    assert_eq!(p["parent"]["id"], id_of(p2p_api));
    assert_eq!(p["parent_group"], id_of(group));
    assert_eq!(p["nchannels"], 3);
    assert_eq!(by_id(&events, group)["kind"], "Group");
    let counters = plugin.counters();
    assert_eq!(counters["unknown_type"], 3);
    assert_eq!(counters["unknown_state"], 0);
}

// ---------------------------------------------------------------------------------------
// v6

#[test]
fn v6_copy_engine_events_and_states() {
    let plugin = load();
    let table = plugin.v6();
    let (ctx, _) = plugin.init_5arg(table, 0x66, Some(c"ce"), 1, 2, 1);
    let descr = |type_: u64, parent: Handle| {
        let mut d: v6::ncclProfilerEventDescr_v6_t = zeroed();
        d.type_ = type_;
        d.parentObj = parent.0;
        d.rank = 1;
        d
    };
    let mut api_d = descr(t::COLL_API, Handle::NULL);
    api_d.u.collApi = v5::CollApiV5 {
        func: cstr(c"AlltoAll"),
        count: 64,
        datatype: cstr(c"ncclFloat32"),
        root: 0,
        stream: null_mut(),
        graphCaptured: CBool::FALSE,
    };
    let api = start_in(table, ctx, &mut api_d);
    let mut ce_d = descr(t::CE_COLL, api);
    ce_d.u.ceColl = v6::CeCollV6 {
        seqNumber: 42,
        func: cstr(c"AlltoAll"),
        sendBuff: null(),
        recvBuff: null_mut(),
        count: 64,
        root: 0,
        datatype: cstr(c"ncclFloat32"),
        syncStrategy: cstr(c"barrier"),
        intraBatchSync: CBool::TRUE,
        batchSize: 4,
        numBatches: 3,
        ceSeqNum: 9,
        stream: null_mut(),
    };
    let ce = start_in(table, ctx, &mut ce_d);
    record_in(table, ce, state::CE_COLL_START, None);
    let mut sync_d = descr(t::CE_SYNC, ce);
    sync_d.u.ceCollSync = v6::CeSyncV6 {
        isComplete: CBool::TRUE,
        nRanks: 2,
    };
    let sync = start_in(table, ctx, &mut sync_d);
    record_in(table, sync, state::CE_SYNC_START, Some(trans_size(1)));
    record_in(table, sync, state::CE_COLL_START, None); // another kind's state
    record_in(table, sync, state::CE_SYNC_COMPLETE, None);
    stop_in(table, sync);
    let mut batch_d = descr(t::CE_BATCH, ce);
    batch_d.u.ceCollBatch = v6::CeBatchV6 {
        numOps: 5,
        totalBytes: 1 << 20,
        useIntraSync: CBool::TRUE,
    };
    let batch = start_in(table, ctx, &mut batch_d);
    record_in(table, batch, state::CE_BATCH_START, None);
    record_in(table, batch, state::CE_BATCH_COMPLETE, None);
    stop_in(table, batch);
    record_in(table, ce, state::CE_COLL_COMPLETE, None);
    record_in(table, ce, state::KERNEL_PHASE_STOP, Some(ptimer(1)));
    stop_in(table, ce);
    stop_in(table, api);
    assert!(
        start_in(table, ctx, &mut descr(t::KERNEL_PHASE, Handle::NULL)).is_null(),
        "v6 has no KernelPhase"
    );
    finalize_in(table, ctx);

    assert_eq!(single_comm(&plugin)["api_version"], 6);
    let events = plugin.events();
    assert_eq!(events.len(), 4, "{events:#?}");
    let c = by_id(&events, ce);
    assert_eq!(c["kind"], "CeColl");
    assert_eq!(c["parent"]["kind"], "CollApi");
    assert_eq!(c["func"], "AlltoAll");
    assert_eq!(c["seq"], 42);
    assert_eq!(c["count"], 64);
    assert_eq!(c["datatype"], "ncclFloat32");
    assert_eq!(c["bytes"], 256);
    assert_eq!(c["intra_batch_sync"], true);
    assert_eq!(c["batch_size"], 4);
    assert_eq!(c["num_batches"], 3);
    assert_eq!(c["ce_seq"], 9);
    assert!(c.get("user_tag").is_none());
    assert_eq!(state_names(&c), ["CeCollStart", "CeCollComplete"]);
    let s = by_id(&events, sync);
    assert_eq!(s["kind"], "CeSync");
    assert_eq!(s["parent"]["id"], id_of(ce));
    assert_eq!(s["is_complete"], true);
    assert_eq!(s["nranks_sync"], 2);
    assert_eq!(state_names(&s), ["CeSyncStart", "CeSyncComplete"]);
    assert!(state_arg_keys(&s["states"][0]).is_empty());
    let b = by_id(&events, batch);
    assert_eq!(b["kind"], "CeBatch");
    assert_eq!(b["parent"]["kind"], "CeColl");
    assert_eq!(b["num_ops"], 5);
    assert_eq!(b["bytes"], 1 << 20);
    assert_eq!(b["use_intra_sync"], true);
    assert_eq!(state_names(&b), ["CeBatchStart", "CeBatchComplete"]);
    let counters = plugin.counters();
    assert_eq!(counters["unknown_state"], 2);
    assert_eq!(counters["unknown_type"], 1);
}

// ---------------------------------------------------------------------------------------
// v7

#[test]
fn v7_user_tags_sym_coll_and_kernel_phases() {
    let plugin = load();
    let (ctx, _) = plugin.init_v7(0x77, None, 0, 2);
    let table = plugin.v7();
    let mut api_d = coll_api7(Handle::NULL, c"AllGather", 128, c"ncclFloat32");
    api_d.u.collApi.userTag = 0xAAAA;
    let api = start_in(table, ctx, &mut api_d);
    stop_in(table, api);
    let mut p2p_api_d = p2p_api7(Handle::NULL, c"Recv", 4, c"ncclInt8");
    p2p_api_d.u.p2pApi.userTag = 0xBBBB;
    let p2p_api = start_in(table, ctx, &mut p2p_api_d);
    stop_in(table, p2p_api);

    let mut coll_d = coll7(api, Handle::NULL, 0, 5, c"AllGather", 1024, c"ncclInt8", 3);
    // Any nonzero byte is true; 0xA5 in a Rust bool aborted the process.
    coll_d.u.coll.isSymColl = CBool(0xA5);
    coll_d.u.coll.userTag = 0xAAAA;
    coll_d.u.coll.algo = cstr(c"AGxLLMC_R");
    coll_d.u.coll.proto = cstr(c"");
    coll_d.u.coll.kernelVariant = cstr(c"AGxLLMC_R");
    let coll = start_in(table, ctx, &mut coll_d);
    let mut p2p_d = p2p7(p2p_api, Handle::NULL, 0, c"Recv", 4, 1);
    p2p_d.u.p2p.userTag = 0xBBBB;
    let p2p = start_in(table, ctx, &mut p2p_d);

    let kernel = start_in(table, ctx, &mut kernel_ch7(coll, 2, 100));
    let mut phases = Vec::new();
    for (id, name, t0, t1) in [
        (0u8, c"initial_sync", 100u64, 110u64),
        (1, c"compute", 110, 190),
        (2, c"final_sync", 190, 200),
        (3, c"bogus", 200, 201),
    ] {
        let mut d = zeroed7(t::KERNEL_PHASE, kernel, 0);
        d.u.kernelPhase = v7::KernelPhaseV7 {
            channelId: 2,
            phaseId: id,
            phaseName: cstr(name),
            pTimer: t0,
        };
        let h = start_in(table, ctx, &mut d);
        record_in(table, h, state::KERNEL_PHASE_STOP, Some(ptimer(t1)));
        stop_in(table, h);
        phases.push(h);
    }
    record_in(table, kernel, state::KERNEL_CH_STOP, Some(ptimer(200)));
    stop_in(table, kernel);
    stop_in(table, coll);
    stop_in(table, p2p);
    finalize_in(table, ctx);

    let events = plugin.events();
    assert_eq!(events.len(), 9, "{events:#?}");
    assert_eq!(by_id(&events, api)["user_tag"], 0xAAAA);
    assert_eq!(by_id(&events, p2p_api)["user_tag"], 0xBBBB);
    let c = by_id(&events, coll);
    assert_eq!(c["user_tag"], 0xAAAA);
    assert_eq!(c["sym_coll"], true);
    assert_eq!(c["proto"], "Unknown", "symmetric kernels pass \"\"");
    assert_eq!(c["algo"], "Unknown", "a kernel variant is no algorithm");
    assert_eq!(c["bytes"], 1024, "AllGather counts bytes as ncclInt8");
    assert_eq!(c["nchannels"], 3);
    let p = by_id(&events, p2p);
    assert_eq!(p["user_tag"], 0xBBBB);
    assert_eq!(p["parent"]["kind"], "P2pApi");
    assert_eq!(p["parent_group"], "0x0");
    let expected = [
        ("InitialSync", 100, 110),
        ("Compute", 110, 190),
        ("FinalSync", 190, 200),
        ("Unknown", 200, 201),
    ];
    for (h, (name, t0, t1)) in phases.iter().zip(expected) {
        let e = by_id(&events, *h);
        assert_eq!(e["kind"], "KernelPhase");
        assert_eq!(e["phase"], name);
        assert_eq!(e["channel"], 2);
        assert_eq!(e["ptimer_start"], t0);
        assert_eq!(state_names(&e), ["KernelPhaseStop"]);
        assert_eq!(e["states"][0]["ptimer"], t1);
        assert_eq!(e["parent"]["kind"], "KernelCh");
        assert_eq!(e["parent"]["id"], id_of(kernel));
    }
    assert_eq!(by_id(&events, kernel)["states"][0]["ptimer"], 200);
}

// ---------------------------------------------------------------------------------------
// NetPlugin payloads (v7 table; v3 and v4 decode through the same code, see above)

#[test]
fn net_plugin_payloads_are_read_only_when_known() {
    let plugin = load();
    let (ctx, _) = plugin.init_v7(0x99, None, 0, 1);
    let table = plugin.v7();
    let ib = NetIbDescrV1 {
        type_: abi::net::IB_QP,
        qp: NetIbQpV1 {
            device: 1,
            wr_id: u64::MAX - 1,
            opcode: 0,
            qpNum: 4242,
            length: 1 << 30,
        },
    };
    let ib_other_kind = NetIbDescrV1 {
        type_: 2,
        qp: ib.qp,
    };
    let sock = NetSockDescrV1 {
        type_: abi::net::SOCKET,
        sock: NetSockV1 {
            fd: 3,
            op: 0,
            length: 12,
        },
    };
    let cases: [(i64, *mut c_void); 7] = [
        (0x1_0001, &ib as *const _ as *mut c_void),
        (0x2_0001, &sock as *const _ as *mut c_void),
        (0x1_0001, &ib_other_kind as *const _ as *mut c_void),
        // Unknown type, unknown version, no type: never dereferenced.
        (0x3_0001, poisoned_pointer()),
        (0x1_0002, poisoned_pointer()),
        (0x0_0001, poisoned_pointer()),
        (0x1_0001, null_mut()),
    ];
    let update = poisoned_pointer();
    let handles: Vec<Handle> = cases
        .iter()
        .map(|&(id, data)| {
            let mut d = plain7(t::NET_PLUGIN, Handle::NULL);
            d.rank = 0;
            d.u.netPlugin = NetPluginDescr { id, data };
            let h = start_in(table, ctx, &mut d);
            // The update's data is kept as a number, never read.
            record_in(table, h, state::NET_PLUGIN_UPDATE, Some(net_data(update)));
            stop_in(table, h);
            h
        })
        .collect();
    // NCCL stops net events without a NULL check.
    stop_in(table, Handle::NULL);
    finalize_in(table, ctx);

    let events = plugin.events();
    assert_eq!(events.len(), cases.len());
    let net: Vec<Value> = handles
        .iter()
        .map(|&h| by_id(&events, h)["net"].clone())
        .collect();
    assert_eq!(
        net[0],
        json!({"type": "ib_qp", "device": 1, "wr_id": u64::MAX - 1, "opcode": 0,
               "qp_num": 4242, "length": 1u64 << 30})
    );
    assert_eq!(
        net[1],
        json!({"type": "socket", "fd": 3, "op": 0, "length": 12})
    );
    for (i, n) in net.iter().enumerate().skip(2) {
        assert_eq!(*n, json!({"type": "unknown"}), "case {i}");
    }
    let ids: Vec<Value> = handles
        .iter()
        .map(|&h| by_id(&events, h)["net_id"].clone())
        .collect();
    assert_eq!(
        ids,
        ["0x10001", "0x20001", "0x10001", "0x30001", "0x10002", "0x1", "0x10001"]
    );
    let first = by_id(&events, handles[0]);
    assert_eq!(first["states"][0]["data"], format!("{:#x}", update as u64));
    for &h in &handles {
        let e = by_id(&events, h);
        assert_eq!(
            e["context"],
            format!("{:#x}", ctx.0 as u64),
            "no ProxyStep parent: owned by its context, which is ours"
        );
        assert_eq!(e["rank"], 0);
        assert_eq!(state_names(&e), ["NetPluginUpdate"]);
    }
    assert_eq!(plugin.counters()["stop_null"], 1);
}

// ---------------------------------------------------------------------------------------
// The traps of the string-typed descriptors, through every string-typed version

/// Sets the string fields of `u.coll` that v2–v7 share and returns the descriptor.
macro_rules! trap_coll {
    ($descr:ty, $func:expr, $count:expr, $dtype:expr, $algo:expr, $proto:expr) => {{
        let mut d: $descr = zeroed();
        d.type_ = t::COLL as _;
        d.rank = 1;
        d.u.coll.func = $func;
        d.u.coll.count = $count;
        d.u.coll.datatype = $dtype;
        d.u.coll.algo = $algo;
        d.u.coll.proto = $proto;
        d
    }};
}

/// A Coll's (func, count, datatype, algo, proto) as NCCL passes them.
type Trap = (
    *const c_char,
    usize,
    *const c_char,
    *const c_char,
    *const c_char,
);

/// Each trap with what the log must show: [func, datatype, bytes, algo, proto].
fn traps() -> Vec<(Trap, Value)> {
    vec![
        // AllGather and Broadcast tasks: count in bytes, type ncclInt8.
        (
            (
                cstr(c"AllGather"),
                4096,
                cstr(c"ncclInt8"),
                cstr(c"RING"),
                cstr(c"SIMPLE"),
            ),
            json!(["AllGather", "ncclInt8", 4096, "RING", "SIMPLE"]),
        ),
        (
            (
                cstr(c"Broadcast"),
                333,
                cstr(c"ncclInt8"),
                cstr(c"TREE"),
                cstr(c"LL"),
            ),
            json!(["Broadcast", "ncclInt8", 333, "TREE", "LL"]),
        ),
        // NCCL's name for ncclUint8 is the literal "Unknown".
        (
            (
                cstr(c"AllReduce"),
                77,
                cstr(c"Unknown"),
                cstr(c"Unknown"),
                cstr(c"Unknown"),
            ),
            json!(["AllReduce", "ncclUint8", 77, "Unknown", "Unknown"]),
        ),
        // NULL strings.
        (
            (null(), 10, null(), null(), null()),
            json!(["Unknown", "Unknown", null, "Unknown", "Unknown"]),
        ),
        // Symmetric kernels: proto "", algo a variant name.
        (
            (
                cstr(c"AllReduce"),
                10,
                cstr(c"ncclFloat8e5m2"),
                cstr(c"ARxLL_R"),
                cstr(c""),
            ),
            json!(["AllReduce", "ncclFloat8e5m2", 10, "Unknown", "Unknown"]),
        ),
        // Names NCCL never passes.
        (
            (
                cstr(c"allreduce"),
                10,
                cstr(c"float"),
                cstr(c"ring"),
                cstr(c"simple"),
            ),
            json!(["Unknown", "Unknown", null, "Unknown", "Unknown"]),
        ),
    ]
}

#[test]
fn string_traps_decode_the_same_in_every_string_version() {
    let plugin = load();
    let (c2, _) = plugin.init_2arg(plugin.v2());
    let (c3, _) = plugin.init_2arg(plugin.v3());
    let (c4, _) = plugin.init_v4_args(None, 0x4, 1, 2, 1);
    let (c5, _) = plugin.init_5arg(plugin.v5(), 0x5, None, 1, 2, 1);
    let (c6, _) = plugin.init_5arg(plugin.v6(), 0x6, None, 1, 2, 1);
    let (c7, _) = plugin.init_5arg(plugin.v7(), 0x7, None, 1, 2, 1);
    let mut expected = Vec::new();
    for ((func, count, dtype, algo, proto), want) in traps() {
        let mut handles = Vec::new();
        macro_rules! run {
            ($table:expr, $ctx:expr, $descr:ty) => {{
                let mut d = trap_coll!($descr, func, count, dtype, algo, proto);
                let h = start_in($table, $ctx, &mut d);
                stop_in($table, h);
                handles.push(h);
            }};
        }
        run!(plugin.v2(), c2, v2::ncclProfilerEventDescr_v2_t);
        run!(plugin.v3(), c3, v3::ncclProfilerEventDescr_v3_t);
        run!(plugin.v4(), c4, v4::ncclProfilerEventDescr_v4_t);
        run!(plugin.v5(), c5, v5::ncclProfilerEventDescr_v5_t);
        run!(plugin.v6(), c6, v6::ncclProfilerEventDescr_v6_t);
        run!(plugin.v7(), c7, v7::ncclProfilerEventDescr_v7_t);
        expected.push((handles, count, want));
    }
    // The same for P2p's datatype, in the version that reads every p2p field.
    let mut p2p_d = zeroed7(t::P2P, Handle::NULL, 1);
    p2p_d.u.p2p.func = cstr(c"Send");
    p2p_d.u.p2p.datatype = cstr(c"Unknown");
    p2p_d.u.p2p.count = 5;
    let p2p = start_in(plugin.v7(), c7, &mut p2p_d);
    stop_in(plugin.v7(), p2p);
    for ctx in [c2, c3, c4, c5, c6, c7] {
        finalize_in(plugin.v7(), ctx);
    }

    assert_eq!(plugin.lines_of("comm").len(), 6);
    let events = plugin.events();
    for (handles, count, want) in expected {
        for (v, h) in (2..=7).zip(handles) {
            let e = by_id(&events, h);
            let got = json!([e["func"], e["datatype"], e["bytes"], e["algo"], e["proto"]]);
            assert_eq!(got, want, "v{v}: {e}");
            assert_eq!(e["count"], count as u64);
            assert_eq!(e["rank"], 1);
        }
    }
    let p = by_id(&events, p2p);
    assert_eq!(p["datatype"], "ncclUint8");
    assert_eq!(p["bytes"], 5);
}
