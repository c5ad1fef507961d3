//! The JSON-lines event log: one line per finished event with its resolved parent,
//! communicator, threads and times. It is the debugging view for users and what the
//! tests read. The schema is documented in `docs/event-log.md`.

use super::{CycleEnd, Sink, SinkContext};
use crate::clock::ClockPair;
use crate::context::ContextInfo;
use crate::decode::state_name;
use crate::event::{Event, NetPayload, StateArg};
use crate::model::{Closed, FinishedEvent, Gap, HeldBack, HeldTasks, OpenView, Owner, Parent};
use nccl_scorep_common::RunDir;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Data older than this is on disk, so a killed process loses at most this much.
const FLUSH_INTERVAL: Duration = Duration::from_millis(200);

pub struct JsonlSink {
    out: BufWriter<File>,
    path: PathBuf,
    last_flush: Instant,
    failed: bool,
    /// One event line, reused.
    scratch: Vec<u8>,
}

pub fn hex(value: u64) -> String {
    format!("{value:#x}")
}

/// The event log when the configuration asks for it.
pub fn open(context: &SinkContext) -> Option<Box<dyn Sink>> {
    if !context.config.writes_jsonl() {
        return None;
    }
    match JsonlSink::create(context.run_dir, context.host, context.pid) {
        Ok(sink) => Some(Box::new(sink)),
        Err(error) => {
            crate::log::warn(&format!(
                "cannot write the event log in {}: {error}",
                context.run_dir.root().display()
            ));
            None
        }
    }
}

impl JsonlSink {
    /// Opens (appends to) the run directory's `nccl-scorep-<host>-<pid>.jsonl` and writes
    /// a header.
    pub fn create(run_dir: &RunDir, host: &str, pid: i32) -> std::io::Result<JsonlSink> {
        nccl_scorep_common::safe_file::create_dirs(run_dir.root())?;
        let path = run_dir.event_log(host, pid);
        let file = nccl_scorep_common::safe_file::append(&path)?;
        let mut sink = JsonlSink {
            out: BufWriter::with_capacity(1 << 16, file),
            path,
            last_flush: Instant::now(),
            failed: false,
            scratch: Vec::with_capacity(1024),
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

    fn comm_line(&mut self, context: u64, info: &ContextInfo) {
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

    fn summary(&mut self, counters: &BTreeMap<&'static str, u64>) {
        let clocks = ClockPair::now();
        self.line(&json!({
            "type": "summary",
            "monotonic_ns": clocks.monotonic_ns,
            "realtime_ns": clocks.realtime_ns,
            "counters": counters,
            "heap_peak_bytes": crate::memory::BUDGET.peak(),
            "memory_limit_bytes": Some(crate::memory::BUDGET.limit()).filter(|&l| l != usize::MAX),
        }));
    }

    /// One finished event, written field by field (no JSON tree is built: this runs for
    /// every event, on the collector thread).
    fn event_line(&mut self, e: &FinishedEvent) {
        if self.failed {
            return;
        }
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        write_event(&mut buf, e);
        buf.push(b'\n');
        if let Err(error) = self.out.write_all(&buf) {
            self.failed = true;
            crate::log::warn(&format!(
                "cannot write {}: {error}; the event log stops here",
                self.path.display()
            ));
        }
        self.scratch = buf;
    }

    fn flush(&mut self) {
        self.last_flush = Instant::now();
        if !self.failed && self.out.flush().is_err() {
            self.failed = true;
        }
    }
}

impl Sink for JsonlSink {
    fn comm(&mut self, context: u64, info: &Arc<ContextInfo>) {
        self.comm_line(context, info);
    }

    /// Records lost because a thread's ring was full, between two times.
    fn gap(&mut self, gap: &Gap) {
        self.line(&json!({
            "type": "gap",
            "thread": gap.tid,
            "start_ns": gap.first_ns,
            "stop_ns": gap.last_ns,
            "dropped_total": gap.dropped_total,
        }));
    }

    /// A time the thread waited for room in its full ring.
    fn held_back(&mut self, held: &HeldBack) {
        self.line(&json!({
            "type": "held_back",
            "thread": held.tid,
            "start_ns": held.since_ns,
            "stop_ns": held.until_ns,
        }));
    }

    fn event(&mut self, event: &FinishedEvent) {
        self.event_line(event);
    }

    fn end_of_pass(
        &mut self,
        _open: &mut dyn Iterator<Item = OpenView<'_>>,
        _held_tasks: &HeldTasks,
        _until: u64,
    ) {
        if self.last_flush.elapsed() >= FLUSH_INTERVAL {
            self.flush();
        }
    }

    fn finish(&mut self, end: &CycleEnd) {
        self.summary(end.counters);
        self.flush();
        crate::log::info(&format!("event log written to {}", self.path.display()));
    }
}

/// Writes one JSON object into a buffer, field by field.
struct Obj<'a> {
    out: &'a mut Vec<u8>,
    empty: bool,
}

impl<'a> Obj<'a> {
    fn new(out: &'a mut Vec<u8>) -> Obj<'a> {
        out.push(b'{');
        Obj { out, empty: true }
    }

    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.empty {
            self.out.push(b',');
        }
        self.empty = false;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    fn str(&mut self, key: &str, value: &str) {
        let out = self.key(key);
        write_str(out, value);
    }

    fn uint(&mut self, key: &str, value: u64) {
        let out = self.key(key);
        out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    fn int(&mut self, key: &str, value: i64) {
        let out = self.key(key);
        out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    fn bool(&mut self, key: &str, value: bool) {
        let out = self.key(key);
        out.extend_from_slice(if value { b"true" } else { b"false" });
    }

    fn null(&mut self, key: &str) {
        self.key(key).extend_from_slice(b"null");
    }

    fn opt_uint(&mut self, key: &str, value: Option<u64>) {
        match value {
            Some(v) => self.uint(key, v),
            None => self.null(key),
        }
    }

    /// A number as a `"0x…"` string (identities: ids, hashes, pointer values).
    fn hex(&mut self, key: &str, value: u64) {
        let out = self.key(key);
        // Formatting into a Vec<u8> cannot fail.
        let _ = write!(out, "\"{value:#x}\"");
    }

    /// A nested object under `key`.
    fn obj(&mut self, key: &str, fill: impl FnOnce(&mut Obj)) {
        let out = self.key(key);
        let mut inner = Obj::new(out);
        fill(&mut inner);
        inner.end();
    }

    fn end(self) {
        self.out.push(b'}');
    }
}

/// A JSON string; NCCL's names and our own need no escaping, a communicator name may.
fn write_str(out: &mut Vec<u8>, value: &str) {
    if value.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(value.as_bytes());
        out.push(b'"');
    } else {
        // Writing into a Vec<u8> cannot fail.
        let _ = serde_json::to_writer(out, value);
    }
}

fn write_event(buf: &mut Vec<u8>, e: &FinishedEvent) {
    let mut line = Obj::new(buf);
    line.str("type", "event");
    line.str("kind", e.kind.name());
    line.hex("id", e.handle);
    match e.owner {
        Owner::Local(context) => line.hex("context", context),
        Owner::Foreign { pid, context } => line.obj("foreign", |o| {
            o.int("pid", i64::from(pid));
            o.hex("context", context);
        }),
        Owner::Unknown => line.str("owner", "unknown"),
    }
    if let Some(comm) = &e.comm {
        line.hex("comm_hash", comm.comm_hash);
        if let Some(name) = &comm.comm_name {
            line.str("comm_name", name);
        }
        line.int("nranks", i64::from(comm.n_ranks));
    }
    line.int("rank", i64::from(e.rank));
    match e.parent {
        Parent::None => line.null("parent"),
        Parent::Local { handle, kind } => line.obj("parent", |o| {
            o.hex("id", handle);
            o.str("kind", kind.name());
        }),
        Parent::Foreign { pid, value } => line.obj("parent", |o| {
            o.int("foreign_pid", i64::from(pid));
            o.hex("value", value);
        }),
        Parent::Unresolved(value) => line.obj("parent", |o| o.hex("unresolved", value)),
    }
    line.uint("start_ns", e.start_ns);
    line.uint("stop_ns", e.stop_ns);
    line.int("start_thread", i64::from(e.start_tid));
    line.opt_uint("stop_thread", e.stop_tid.map(|t| t as u64));
    line.str("closed", e.closed.name());
    if let Some(gpu) = e.gpu {
        line.uint("gpu_start_ns", gpu.start_ns);
        line.uint("gpu_stop_ns", gpu.stop_ns);
        line.opt_uint("gpu_clock_error_ns", gpu.error_ns);
    }
    if let Some(rejection) = e.gpu_rejected {
        line.str("gpu_time_rejected", rejection.name());
    }
    event_fields(&mut line, &e.event);
    if !e.states.is_empty() {
        let out = line.key("states");
        out.push(b'[');
        for (i, state) in e.states.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let mut o = Obj::new(out);
            o.str("state", state_name(state.state));
            o.uint("ns", state.time_ns);
            state_arg(&mut o, state.arg);
            o.end();
        }
        out.push(b']');
    }
    debug_assert!(e.closed != Closed::Stopped || e.stop_tid.is_some());
    line.end();
}

/// Bytes moved, where the element type is known; a count whose size does not fit in 64
/// bits (a garbage count) saturates, as in the OTF2 attributes.
fn bytes(count: u64, datatype: crate::event::DataType) -> Option<u64> {
    datatype.size().map(|size| count.saturating_mul(size))
}

fn event_fields(line: &mut Obj, event: &Event) {
    match *event {
        Event::Group | Event::ProxyCtrl | Event::KernelLaunch => {}
        Event::Coll(c) => {
            line.str("func", c.func.as_str());
            line.uint("seq", c.seq);
            line.uint("count", c.count);
            line.str("datatype", c.datatype.as_str());
            line.opt_uint("bytes", bytes(c.count, c.datatype));
            line.int("root", i64::from(c.root));
            line.str("algo", c.algo.as_str());
            line.str("proto", c.proto.as_str());
            line.uint("nchannels", u64::from(c.n_channels));
            line.uint("nwarps", u64::from(c.n_warps));
            line.hex("parent_group", c.parent_group);
            if c.comm_hash != 0 {
                line.hex("descr_comm_hash", c.comm_hash);
            }
            if c.is_sym_coll {
                line.bool("sym_coll", true);
            }
            if c.user_tag != 0 {
                line.uint("user_tag", c.user_tag);
            }
        }
        Event::P2p(p) => {
            line.str("func", p.func.as_str());
            line.uint("count", p.count);
            line.str("datatype", p.datatype.as_str());
            line.opt_uint("bytes", bytes(p.count, p.datatype));
            line.int("peer", i64::from(p.peer));
            line.opt_uint("nchannels", p.n_channels.map(u64::from));
            line.hex("parent_group", p.parent_group);
            if p.comm_hash != 0 {
                line.hex("descr_comm_hash", p.comm_hash);
            }
            if p.user_tag != 0 {
                line.uint("user_tag", p.user_tag);
            }
        }
        Event::ProxyOp(op) => {
            line.int("pid", i64::from(op.pid));
            line.uint("channel", u64::from(op.channel));
            line.int("peer", i64::from(op.peer));
            line.int("n_steps", i64::from(op.n_steps));
            line.int("chunk_size", i64::from(op.chunk_size));
            line.bool("is_send", op.is_send);
        }
        Event::ProxyStep { step } => line.int("step", i64::from(step)),
        Event::KernelCh { channel, ptimer } => {
            line.uint("channel", u64::from(channel));
            line.opt_uint("ptimer_start", ptimer);
        }
        Event::NetPlugin(n) => {
            line.hex("net_id", n.id as u64);
            match n.payload {
                NetPayload::IbQp {
                    device,
                    wr_id,
                    opcode,
                    qp_num,
                    length,
                } => line.obj("net", |o| {
                    o.str("type", "ib_qp");
                    o.int("device", i64::from(device));
                    o.uint("wr_id", wr_id);
                    o.int("opcode", i64::from(opcode));
                    o.int("qp_num", i64::from(qp_num));
                    o.uint("length", length);
                }),
                NetPayload::Socket { fd, op, length } => line.obj("net", |o| {
                    o.str("type", "socket");
                    o.int("fd", i64::from(fd));
                    o.int("op", i64::from(op));
                    o.uint("length", length);
                }),
                NetPayload::Unknown => line.obj("net", |o| o.str("type", "unknown")),
            }
        }
        Event::GroupApi {
            graph_captured,
            depth,
        } => {
            line.bool("graph_captured", graph_captured);
            line.int("group_depth", i64::from(depth));
        }
        Event::CollApi(c) => {
            line.str("func", c.func.as_str());
            line.uint("count", c.count);
            line.str("datatype", c.datatype.as_str());
            line.opt_uint("bytes", bytes(c.count, c.datatype));
            line.int("root", i64::from(c.root));
            line.bool("graph_captured", c.graph_captured);
            if c.user_tag != 0 {
                line.uint("user_tag", c.user_tag);
            }
        }
        Event::P2pApi(p) => {
            line.str("func", p.func.as_str());
            line.uint("count", p.count);
            line.str("datatype", p.datatype.as_str());
            line.opt_uint("bytes", bytes(p.count, p.datatype));
            line.bool("graph_captured", p.graph_captured);
            if p.user_tag != 0 {
                line.uint("user_tag", p.user_tag);
            }
        }
        Event::CeColl(c) => {
            line.str("func", c.func.as_str());
            line.uint("seq", c.seq);
            line.uint("count", c.count);
            line.str("datatype", c.datatype.as_str());
            line.opt_uint("bytes", bytes(c.count, c.datatype));
            line.int("root", i64::from(c.root));
            line.bool("intra_batch_sync", c.intra_batch_sync);
            line.uint("batch_size", u64::from(c.batch_size));
            line.uint("num_batches", u64::from(c.num_batches));
            line.uint("ce_seq", u64::from(c.ce_seq));
            if c.user_tag != 0 {
                line.uint("user_tag", c.user_tag);
            }
        }
        Event::CeSync {
            is_complete,
            n_ranks,
        } => {
            line.bool("is_complete", is_complete);
            line.int("nranks_sync", i64::from(n_ranks));
        }
        Event::CeBatch {
            num_ops,
            total_bytes,
            use_intra_sync,
        } => {
            line.int("num_ops", i64::from(num_ops));
            line.uint("bytes", total_bytes);
            line.bool("use_intra_sync", use_intra_sync);
        }
        Event::KernelPhase {
            channel,
            phase,
            ptimer,
        } => {
            line.uint("channel", u64::from(channel));
            line.str("phase", phase.name());
            line.uint("ptimer_start", ptimer);
        }
    }
}

fn state_arg(state: &mut Obj, arg: StateArg) {
    match arg {
        StateArg::None => {}
        StateArg::TransSize(bytes) => state.uint("trans_size", bytes),
        StateArg::Progress { trans_size, steps } => {
            state.uint("trans_size", trans_size);
            state.int("steps", i64::from(steps));
        }
        StateArg::Appended(n) => state.int("appended", i64::from(n)),
        StateArg::PTimer(t) => state.uint("ptimer", t),
        StateArg::NetData(data) => state.hex("data", data),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_that_need_escaping_stay_valid_json() {
        let mut out = Vec::new();
        let mut obj = Obj::new(&mut out);
        obj.str("plain", "AllReduce");
        obj.str("name", "a \"quoted\"\tname\\");
        obj.hex("id", 0xabc);
        obj.opt_uint("none", None);
        obj.obj("nested", |o| o.int("n", -3));
        obj.end();
        let value: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(value["plain"], "AllReduce");
        assert_eq!(value["name"], "a \"quoted\"\tname\\");
        assert_eq!(value["id"], "0xabc");
        assert!(value["none"].is_null());
        assert_eq!(value["nested"]["n"], -3);
    }
}
