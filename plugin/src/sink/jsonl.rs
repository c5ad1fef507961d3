//! The JSON-lines event log: one line per finished event with its resolved parent,
//! communicator, threads and times. It is the debugging view for users and what the
//! tests read. The schema is documented in `docs/event-log.md`.

use crate::clock::ClockPair;
use crate::collector::{Closed, FinishedEvent, Owner, Parent};
use crate::context::ContextInfo;
use crate::decode::state_name;
use crate::event::{Event, NetPayload, StateArg};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Data older than this is on disk, so a killed process loses at most this much.
const FLUSH_INTERVAL: Duration = Duration::from_millis(200);

pub struct JsonlSink {
    out: BufWriter<File>,
    path: PathBuf,
    last_flush: Instant,
    failed: bool,
}

pub fn hex(value: u64) -> String {
    format!("{value:#x}")
}

impl JsonlSink {
    /// Opens (appends to) `<dir>/nccl-scorep-<host>-<pid>.jsonl` and writes a header.
    pub fn create(dir: &Path, pid: i32) -> std::io::Result<JsonlSink> {
        std::fs::create_dir_all(dir)?;
        let host = hostname();
        let path = dir.join(format!("nccl-scorep-{host}-{pid}.jsonl"));
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        let mut sink = JsonlSink {
            out: BufWriter::with_capacity(1 << 16, file),
            path,
            last_flush: Instant::now(),
            failed: false,
        };
        let clocks = ClockPair::now();
        sink.line(&json!({
            "type": "header",
            "format": "nccl-scorep-events",
            "format_version": 1,
            "plugin_version": env!("CARGO_PKG_VERSION"),
            "host": host,
            "pid": pid,
            "clock": "CLOCK_MONOTONIC",
            "monotonic_ns": clocks.monotonic_ns,
            "realtime_ns": clocks.realtime_ns,
        }));
        Ok(sink)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn line(&mut self, value: &Value) {
        if self.failed {
            return;
        }
        let written = serde_json::to_writer(&mut self.out, value)
            .map_err(std::io::Error::from)
            .and_then(|()| self.out.write_all(b"\n"));
        if let Err(error) = written {
            self.failed = true;
            crate::log::warn(&format!(
                "cannot write {}: {error}; the event log stops here",
                self.path.display()
            ));
        }
    }

    pub fn comm(&mut self, context: u64, info: &ContextInfo) {
        self.line(&json!({
            "type": "comm",
            "context": hex(context),
            "comm_hash": hex(info.comm_hash),
            "comm_name": info.comm_name,
            "rank": info.rank,
            "nranks": info.n_ranks,
            "nnodes": info.n_nodes,
            "api_version": info.version,
        }));
    }

    /// Records lost because a thread's ring was full, between two times.
    pub fn gap(&mut self, tid: i32, first_ns: u64, last_ns: u64, dropped_total: u64) {
        self.line(&json!({
            "type": "gap",
            "thread": tid,
            "start_ns": first_ns,
            "stop_ns": last_ns,
            "dropped_total": dropped_total,
        }));
    }

    pub fn summary(&mut self, counters: &BTreeMap<&'static str, u64>) {
        let clocks = ClockPair::now();
        self.line(&json!({
            "type": "summary",
            "monotonic_ns": clocks.monotonic_ns,
            "realtime_ns": clocks.realtime_ns,
            "counters": counters,
        }));
    }

    pub fn event(&mut self, e: &FinishedEvent) {
        let mut line = Map::new();
        line.insert("type".into(), "event".into());
        line.insert("kind".into(), e.kind.name().into());
        line.insert("id".into(), hex(e.handle).into());
        match e.owner {
            Owner::Local(context) => {
                line.insert("context".into(), hex(context).into());
            }
            Owner::Foreign { pid, context } => {
                line.insert(
                    "foreign".into(),
                    json!({ "pid": pid, "context": hex(context) }),
                );
            }
            Owner::Unknown => {
                line.insert("owner".into(), "unknown".into());
            }
        }
        if let Some(comm) = &e.comm {
            line.insert("comm_hash".into(), hex(comm.comm_hash).into());
            if let Some(name) = &comm.comm_name {
                line.insert("comm_name".into(), name.clone().into());
            }
            line.insert("nranks".into(), comm.n_ranks.into());
        }
        line.insert("rank".into(), e.rank.into());
        line.insert(
            "parent".into(),
            match e.parent {
                Parent::None => Value::Null,
                Parent::Local { handle, kind } => {
                    json!({ "id": hex(handle), "kind": kind.name() })
                }
                Parent::Foreign { pid, value } => {
                    json!({ "foreign_pid": pid, "value": hex(value) })
                }
                Parent::Unresolved(value) => json!({ "unresolved": hex(value) }),
            },
        );
        line.insert("start_ns".into(), e.start_ns.into());
        line.insert("stop_ns".into(), e.stop_ns.into());
        line.insert("start_thread".into(), e.start_tid.into());
        line.insert(
            "stop_thread".into(),
            e.stop_tid.map_or(Value::Null, Value::from),
        );
        line.insert("closed".into(), e.closed.name().into());
        if let Some(gpu) = e.gpu {
            line.insert("gpu_start_ns".into(), gpu.start_ns.into());
            line.insert("gpu_stop_ns".into(), gpu.stop_ns.into());
            line.insert(
                "gpu_clock_error_ns".into(),
                gpu.error_ns.map_or(Value::Null, Value::from),
            );
        }
        event_fields(&mut line, &e.event);
        if !e.states.is_empty() {
            let states: Vec<Value> = e
                .states
                .iter()
                .map(|s| {
                    let mut state = Map::new();
                    state.insert("state".into(), state_name(s.state).into());
                    state.insert("ns".into(), s.time_ns.into());
                    state_arg(&mut state, s.arg);
                    Value::Object(state)
                })
                .collect();
            line.insert("states".into(), states.into());
        }
        debug_assert!(e.closed != Closed::Stopped || e.stop_tid.is_some());
        self.line(&Value::Object(line));
    }

    pub fn flush_if_due(&mut self) {
        if self.last_flush.elapsed() >= FLUSH_INTERVAL {
            self.flush();
        }
    }

    pub fn flush(&mut self) {
        self.last_flush = Instant::now();
        if !self.failed && self.out.flush().is_err() {
            self.failed = true;
        }
    }
}

fn put(line: &mut Map<String, Value>, key: &str, value: impl Into<Value>) {
    line.insert(key.into(), value.into());
}

/// Bytes moved, where the element type is known.
fn bytes(count: u64, datatype: crate::event::DataType) -> Value {
    datatype
        .size()
        .map_or(Value::Null, |size| (count * size).into())
}

fn event_fields(line: &mut Map<String, Value>, event: &Event) {
    match *event {
        Event::Group | Event::ProxyCtrl | Event::KernelLaunch => {}
        Event::Coll(c) => {
            put(line, "func", c.func.as_str());
            put(line, "seq", c.seq);
            put(line, "count", c.count);
            put(line, "datatype", c.datatype.as_str());
            put(line, "bytes", bytes(c.count, c.datatype));
            put(line, "root", c.root);
            put(line, "algo", c.algo.as_str());
            put(line, "proto", c.proto.as_str());
            put(line, "nchannels", c.n_channels);
            put(line, "nwarps", c.n_warps);
            put(line, "parent_group", hex(c.parent_group));
            if c.comm_hash != 0 {
                put(line, "descr_comm_hash", hex(c.comm_hash));
            }
            if c.is_sym_coll {
                put(line, "sym_coll", true);
            }
            if c.user_tag != 0 {
                put(line, "user_tag", c.user_tag);
            }
        }
        Event::P2p(p) => {
            put(line, "func", p.func.as_str());
            put(line, "count", p.count);
            put(line, "datatype", p.datatype.as_str());
            put(line, "bytes", bytes(p.count, p.datatype));
            put(line, "peer", p.peer);
            put(
                line,
                "nchannels",
                p.n_channels.map_or(Value::Null, Value::from),
            );
            put(line, "parent_group", hex(p.parent_group));
            if p.comm_hash != 0 {
                put(line, "descr_comm_hash", hex(p.comm_hash));
            }
            if p.user_tag != 0 {
                put(line, "user_tag", p.user_tag);
            }
        }
        Event::ProxyOp(op) => {
            put(line, "pid", op.pid);
            put(line, "channel", op.channel);
            put(line, "peer", op.peer);
            put(line, "n_steps", op.n_steps);
            put(line, "chunk_size", op.chunk_size);
            put(line, "is_send", op.is_send);
        }
        Event::ProxyStep { step } => put(line, "step", step),
        Event::KernelCh { channel, ptimer } => {
            put(line, "channel", channel);
            put(
                line,
                "ptimer_start",
                ptimer.map_or(Value::Null, Value::from),
            );
        }
        Event::NetPlugin(n) => {
            put(line, "net_id", hex(n.id as u64));
            match n.payload {
                NetPayload::IbQp {
                    device,
                    wr_id,
                    opcode,
                    qp_num,
                    length,
                } => {
                    put(
                        line,
                        "net",
                        json!({"type": "ib_qp", "device": device, "wr_id": wr_id,
                               "opcode": opcode, "qp_num": qp_num, "length": length}),
                    );
                }
                NetPayload::Socket { fd, op, length } => {
                    put(
                        line,
                        "net",
                        json!({"type": "socket", "fd": fd, "op": op, "length": length}),
                    );
                }
                NetPayload::Unknown => put(line, "net", json!({"type": "unknown"})),
            }
        }
        Event::GroupApi {
            graph_captured,
            depth,
        } => {
            put(line, "graph_captured", graph_captured);
            put(line, "group_depth", depth);
        }
        Event::CollApi(c) => {
            put(line, "func", c.func.as_str());
            put(line, "count", c.count);
            put(line, "datatype", c.datatype.as_str());
            put(line, "bytes", bytes(c.count, c.datatype));
            put(line, "root", c.root);
            put(line, "graph_captured", c.graph_captured);
            if c.user_tag != 0 {
                put(line, "user_tag", c.user_tag);
            }
        }
        Event::P2pApi(p) => {
            put(line, "func", p.func.as_str());
            put(line, "count", p.count);
            put(line, "datatype", p.datatype.as_str());
            put(line, "bytes", bytes(p.count, p.datatype));
            put(line, "graph_captured", p.graph_captured);
            if p.user_tag != 0 {
                put(line, "user_tag", p.user_tag);
            }
        }
        Event::CeColl(c) => {
            put(line, "func", c.func.as_str());
            put(line, "seq", c.seq);
            put(line, "count", c.count);
            put(line, "datatype", c.datatype.as_str());
            put(line, "bytes", bytes(c.count, c.datatype));
            put(line, "root", c.root);
            put(line, "intra_batch_sync", c.intra_batch_sync);
            put(line, "batch_size", c.batch_size);
            put(line, "num_batches", c.num_batches);
            put(line, "ce_seq", c.ce_seq);
            if c.user_tag != 0 {
                put(line, "user_tag", c.user_tag);
            }
        }
        Event::CeSync {
            is_complete,
            n_ranks,
        } => {
            put(line, "is_complete", is_complete);
            put(line, "nranks_sync", n_ranks);
        }
        Event::CeBatch {
            num_ops,
            total_bytes,
            use_intra_sync,
        } => {
            put(line, "num_ops", num_ops);
            put(line, "bytes", total_bytes);
            put(line, "use_intra_sync", use_intra_sync);
        }
        Event::KernelPhase {
            channel,
            phase,
            ptimer,
        } => {
            put(line, "channel", channel);
            put(line, "phase", format!("{phase:?}"));
            put(line, "ptimer_start", ptimer);
        }
    }
}

fn state_arg(state: &mut Map<String, Value>, arg: StateArg) {
    match arg {
        StateArg::None => {}
        StateArg::TransSize(bytes) => put(state, "trans_size", bytes),
        StateArg::Progress { trans_size, steps } => {
            put(state, "trans_size", trans_size);
            put(state, "steps", steps);
        }
        StateArg::Appended(n) => put(state, "appended", n),
        StateArg::PTimer(t) => put(state, "ptimer", t),
        StateArg::NetData(data) => put(state, "data", hex(data)),
    }
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if rc == 0 && end > 0 {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "unknown-host".into()
    }
}
