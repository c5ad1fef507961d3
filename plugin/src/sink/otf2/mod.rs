//! The OTF2 trace writer: the standalone mode's output.
//!
//! Each process writes one part of the job's trace, `<output dir>/parts/<host>.<pid>/`,
//! a complete OTF2 archive with local ids (see `writer.rs`). What is written where is the
//! trace schema, documented for users in `docs/trace-schema.md`:
//!
//! - **CPU threads** (one location per OS thread that called the plugin): the API calls
//!   (`ncclGroup`, `ncclAllReduce`, …), kernel launches, the enqueue of each task, and
//!   on proxy threads the proxy's idle, sleep and append intervals. Intervals that do not
//!   nest (e.g. net-plugin requests) go to extra lanes of the thread.
//! - per **communicator rank**, in a location group of its own:
//!   - an **ops stream**: every collective and point-to-point operation in enqueue order
//!     (the order NCCL runs them on the communicator's stream), from the start of its
//!     execution (first kernel channel, else enqueue) to its last kernel channel or proxy
//!     operation, with collective begin/end records on the NCCL communicator and message
//!     records for sends and receives;
//!   - a stream per **channel** with the GPU kernel intervals (GPU clock converted to host
//!     time) and kernel phases;
//!   - **proxy lanes**, at most `NCCL_SCOREP_PROXY_LANES` of them, shared by all its
//!     proxy operations (whatever their channel, peer and direction), with the operations'
//!     steps and the steps' wait states.
//! - proxy lanes of the communicator ranks of other processes whose operations this one
//!   progressed (PXN).
//!
//! The locations are defined by process (threads), then communicator rank (ops stream,
//! channels, proxy lanes), then the PXN lanes (see `defs.rs`).
//! - **gaps**: records a full ring dropped show as "NCCL records lost" intervals on the
//!   thread that lost them; a thread's waits for room in its full ring show as "NCCL held
//!   back by the plugin" intervals on it.
//!
//! The Scalasca-safe variant writes only the CPU-thread locations, with plain Enter/Leave
//! and attributes.
//!
//! The sink routes each event to the part that owns what it becomes: `timelines.rs` (the
//! lanes of CPU threads and proxies, and the host-side intervals), `ops.rs`
//! (per communicator rank, the ops stream and the kernel channels), `proxy.rs` (proxy
//! operations, steps and the proxy threads' intervals) and `attributes.rs` (what is said
//! about each event). All of them write through one `Writer` (`writer.rs`).

mod attributes;
mod defs;
mod event_file;
mod lanes;
mod ops;
mod proxy;
mod timelines;
mod writer;

pub use defs::{Attr, ATTRIBUTES};
pub use writer::{ClockSample, EVENT_CHUNK_BYTES};

use super::{CycleEnd, Sink, SinkContext};
use crate::config::StepDetail;
use crate::context::ContextInfo;
use crate::event::Kind;
use crate::model::{task_of_child, FinishedEvent, Gap, HeldBack, HeldTasks, OpenView};
use attributes::Attributes;
use defs::Definitions;
use ops::OpsStreams;
use proxy::Proxy;
use rustc_hash::FxHashSet as HashSet;
use std::path::Path;
use std::sync::Arc;
use timelines::{Timelines, Watermarks};
use writer::Writer;

/// How often the events written so far are put on the disk (processed time), with the
/// definitions snapshot and clock pairs that make them readable: a killed process loses
/// about this much of its trace.
const PERSIST_INTERVAL_NS: u64 = 1_000_000_000;

/// What the sink needs to know beyond the events.
#[derive(Clone, Debug)]
pub struct Otf2Options {
    /// Only CPU-thread locations, plain Enter/Leave with attributes.
    pub scalasca_safe: bool,
    /// NCCL will report KernelCh events (an operation then waits for all its channels).
    pub kernel_channels: bool,
    /// Write each proxy step's wait states as intervals nested in the step.
    pub step_states: bool,
    /// Proxy steps as intervals, or summed up on their operation.
    pub step_detail: StepDetail,
    /// Proxy lanes per communicator rank before intervals are squeezed.
    pub proxy_lanes: usize,
    /// Locations the part writes at most.
    pub max_locations: usize,
    /// The process's index in the job (launcher rank), else its pid.
    pub process_index: u32,
    /// How the process is named in the trace.
    pub process_name: String,
    pub host: String,
    /// The trace file properties known when the part begins (see [`crate::provenance`]).
    pub properties: Vec<(String, String)>,
}

/// Counts of what the writer had to repair or leave out.
#[derive(Default, Debug, Clone, Copy)]
pub struct Otf2Stats {
    pub events_written: u64,
    pub failed_calls: u64,
    pub raised_timestamps: u64,
    pub clipped_intervals: u64,
    /// Of `clipped_intervals`, the proxy intervals squeezed because every proxy lane of
    /// their communicator rank was in use.
    pub squeezed_proxy_intervals: u64,
    pub late_children: u64,
    /// Operations written without any of the kernel channels they announced.
    pub ops_without_kernels: u64,
    pub messages_without_comm: u64,
    /// Sends and receives without a message record, and rooted collectives without a
    /// root, because the peer or root is no rank of the communicator.
    pub ranks_out_of_range: u64,
    /// Communicator ranks whose `init` disagreed with the first description of their
    /// `commHash` (another rank count or name, a rank outside it, a rank twice): each got
    /// a communicator of its own.
    pub inconsistent_comms: u64,
    /// Locations not written because the part had as many as it may
    /// (`NCCL_SCOREP_MAX_LOCATIONS`), and the events they would have had.
    pub locations_refused: u64,
    pub events_without_location: u64,
    pub held_back_overflow: u64,
    /// Writes of event files, the definitions snapshot or its clock pairs that failed.
    pub failed_writes: u64,
    /// Definition snapshots written.
    pub snapshots: u64,
}

/// Hands each finished event, the end of each pass and the end to the parts that own what
/// they become; the parts share the writer.
pub struct Otf2Sink {
    w: Writer,
    /// Only the CPU-thread locations are written (see [`Otf2Options::scalasca_safe`]).
    scalasca_safe: bool,
    attributes: Attributes,
    timelines: Timelines,
    ops: OpsStreams,
    proxy: Proxy,
    last_seen: u64,
    /// When the events were last put on the disk (processed time).
    last_persist: u64,
    /// The profiler API versions NCCL used with the communicators of this part.
    api_versions: std::collections::BTreeSet<u32>,
    /// The tasks an open child keeps from completing, gathered anew at each pass (kept to
    /// reuse its memory).
    busy_tasks: HashSet<u64>,
}

impl Otf2Sink {
    pub fn create(dir: &Path, options: Otf2Options) -> Result<Otf2Sink, String> {
        let defs = Definitions::new(options.process_index, &options.process_name, &options.host);
        let start = ClockSample {
            monotonic_ns: crate::clock::now_ns(),
            realtime_ns: crate::clock::realtime_ns(),
        };
        let mut w = Writer::open(dir, &options.host, defs, start).map_err(|e| e.0)?;
        w.max_locations = options.max_locations;
        for (name, value) in &options.properties {
            w.set_property(name, value);
        }
        let pid = std::process::id() as i32;
        Ok(Otf2Sink {
            w,
            scalasca_safe: options.scalasca_safe,
            attributes: Attributes::default(),
            timelines: Timelines::new(options.proxy_lanes),
            ops: OpsStreams::new(options.kernel_channels, pid),
            proxy: Proxy::new(options.step_states, options.step_detail, pid),
            last_seen: 0,
            last_persist: 0,
            api_versions: Default::default(),
            busy_tasks: HashSet::default(),
        })
    }

    pub fn path(&self) -> &Path {
        self.w.path()
    }

    /// A communicator rank was initialised (or learned its hash later).
    fn set_comm(&mut self, context: u64, info: &Arc<ContextInfo>) {
        self.api_versions.insert(u32::from(info.version));
        self.ops.set_comm(context, info);
    }

    /// A communicator rank was finalized: its operations wait for no more kernel channels
    /// (NCCL drops those it had not reported).
    fn mark_finalized(&mut self, context: u64) {
        self.ops.mark_finalized(context);
    }

    /// One finished event.
    fn record(&mut self, e: &FinishedEvent) {
        self.last_seen = self.last_seen.max(e.stop_ns);
        self.timelines.saw_thread(e.start_tid, e.kind);
        // The Scalasca-safe variant has no device-side locations.
        let device_side = !self.scalasca_safe;
        let w = &mut self.w;
        match e.kind {
            Kind::GroupApi
            | Kind::CollApi
            | Kind::P2pApi
            | Kind::KernelLaunch
            | Kind::Group
            | Kind::CeColl
            | Kind::CeSync
            | Kind::CeBatch
            | Kind::NetPlugin => self.timelines.thread_interval(w, &mut self.attributes, e),
            Kind::Coll | Kind::P2p => {
                self.timelines.thread_interval(w, &mut self.attributes, e);
                if device_side {
                    self.ops.task(w, e);
                }
            }
            Kind::ProxyCtrl => self.proxy.ctrl(w, &mut self.timelines, e),
            Kind::ProxyOp => {
                let op = self.proxy.op_finished(e.handle);
                if device_side {
                    self.ops.child_done(e, e.stop_ns, None);
                    if let Some(op) = op {
                        self.proxy
                            .push_op(w, &mut self.timelines, &mut self.ops, op, e);
                    }
                }
            }
            Kind::ProxyStep => {
                if device_side {
                    self.proxy
                        .push_step(w, &mut self.timelines, &mut self.ops, e);
                }
            }
            Kind::KernelCh => {
                if device_side {
                    self.ops.kernel(w, e);
                }
            }
            Kind::KernelPhase => {
                if device_side {
                    self.ops.phase(w, e);
                }
            }
        }
    }

    /// After each collector pass: places what no open event can precede any more, and
    /// writes the operations that completed.
    fn place<'a>(
        &mut self,
        open: &mut dyn Iterator<Item = OpenView<'a>>,
        held_tasks: &HeldTasks,
        now: u64,
    ) {
        let mut watermarks = Watermarks::default();
        let mut busy_tasks = std::mem::take(&mut self.busy_tasks);
        busy_tasks.clear();
        for view in open {
            if let Some(family) = self.proxy.timeline_of(&view) {
                watermarks.hold_back(family, view.start_ns);
            }
            if let Some(task) = task_of_child(view.kind, &view.parent) {
                busy_tasks.insert(task);
            }
        }
        self.proxy.hold_back_idle_threads(&mut watermarks);
        let shedding = crate::memory::BUDGET.shedding();
        if shedding {
            // Above the memory limit's mark nothing is held back for a better placement:
            // what waits for open events is placed now (as when a timeline holds too
            // much), and the memory it held is freed.
            watermarks = Watermarks::default();
        }
        self.timelines.flush(&mut self.w, &watermarks);
        let busy = |task: u64| busy_tasks.contains(&task) || held_tasks.contains(task);
        self.ops.write_completed(&mut self.w, &busy, now, false);
        self.busy_tasks = busy_tasks;
        if shedding {
            // …and every location's buffer goes to its file.
            self.w.persist_events();
        }
        self.keep_snapshot(now);
    }

    /// Every [`PERSIST_INTERVAL_NS`], and when a hang report asked for it
    /// ([`super::request_persist`]), puts the events written so far on the disk, readable
    /// without the end of the trace (see `Writer::persist`).
    fn keep_snapshot(&mut self, now: u64) {
        let asked = super::take_persist_request();
        if !asked && now.saturating_sub(self.last_persist) < PERSIST_INTERVAL_NS {
            return;
        }
        self.last_persist = now;
        let sample = ClockSample {
            monotonic_ns: crate::clock::now_ns(),
            realtime_ns: crate::clock::realtime_ns(),
        };
        self.w.persist(sample);
    }

    /// Places everything, writes what is left and closes the archive.
    fn close(&mut self) -> Otf2Stats {
        let now = self.last_seen;
        self.proxy.close(&mut self.w, &mut self.timelines, now);
        self.ops
            .write_completed(&mut self.w, &|_| false, u64::MAX, true);
        self.timelines.finish(&mut self.w);
        let end = ClockSample {
            monotonic_ns: crate::clock::now_ns(),
            realtime_ns: crate::clock::realtime_ns(),
        };
        let versions: Vec<String> = self.api_versions.iter().map(u32::to_string).collect();
        let property = nccl_scorep_common::provenance::property;
        self.w
            .set_property(&property("PROFILER_API"), &versions.join(","));
        self.w
            .set_property(&property("END_REALTIME_NS"), &end.realtime_ns.to_string());
        // What the plugin held, so that a trace says how close it came to its limit.
        let budget = &crate::memory::BUDGET;
        self.w
            .set_property(&property("HEAP_PEAK_BYTES"), &budget.peak().to_string());
        if budget.limit() != usize::MAX {
            self.w
                .set_property(&property("MEMORY_LIMIT_BYTES"), &budget.limit().to_string());
        }
        let mut stats = Otf2Stats {
            events_written: self.w.close(end),
            ..Otf2Stats::default()
        };
        self.w.remove_snapshot();
        stats.failed_writes = self.w.failed_writes;
        stats.snapshots = self.w.snapshots;
        stats.failed_calls = self.w.failed_calls;
        stats.raised_timestamps = self.w.raised_timestamps;
        stats.locations_refused = self.w.locations_refused;
        stats.events_without_location = self.w.events_without_location;
        self.ops.add_counts(&mut stats);
        self.timelines.add_counts(&mut stats);
        stats
    }
}

/// The trace's part when the configuration writes the OTF2 trace.
pub fn open(context: &SinkContext) -> Option<Box<dyn Sink>> {
    let config = context.config;
    if !config.writes_otf2() {
        return None;
    }
    let rank = nccl_scorep_common::job::launcher_rank();
    let process_name = match rank {
        Some(rank) => format!("process {rank} (pid {} on {})", context.pid, context.host),
        None => format!("pid {} on {}", context.pid, context.host),
    };
    let options = Otf2Options {
        scalasca_safe: config.scalasca_safe,
        kernel_channels: config.event_mask.has(Kind::KernelCh),
        step_states: config.step_states,
        step_detail: config.step_detail,
        proxy_lanes: config.proxy_lanes,
        max_locations: config.max_locations,
        process_index: rank.unwrap_or(context.pid as u32),
        process_name,
        host: context.host.to_owned(),
        properties: crate::provenance::part_properties(
            config,
            context.host,
            crate::clock::realtime_ns(),
        ),
    };
    match Otf2Sink::create(context.part.path(), options) {
        Ok(trace) => Some(Box::new(trace)),
        Err(error) => {
            crate::log::warn(&format!(
                "cannot write the trace: {error}; this process records no trace \
                 (NCCL_SCOREP_OUTPUT_DIR names where it goes)"
            ));
            None
        }
    }
}

impl Sink for Otf2Sink {
    fn comm(&mut self, context: u64, info: &Arc<ContextInfo>) {
        self.set_comm(context, info);
    }

    fn comm_finalized(&mut self, context: u64) {
        self.mark_finalized(context);
    }

    fn gap(&mut self, gap: &Gap) {
        self.timelines.gap(&mut self.w, gap);
    }

    fn held_back(&mut self, held: &HeldBack) {
        self.timelines.held_back(&mut self.w, held);
    }

    fn started(&mut self, event: &OpenView) {
        if event.kind == Kind::ProxyOp {
            self.proxy
                .op_started(event.handle, event.owner, event.event);
        }
    }

    fn event(&mut self, event: &FinishedEvent) {
        self.record(event);
    }

    fn end_of_pass(
        &mut self,
        open: &mut dyn Iterator<Item = OpenView<'_>>,
        held_tasks: &HeldTasks,
        until: u64,
    ) {
        self.place(open, held_tasks, until);
    }

    fn finish(&mut self, end: &CycleEnd) {
        // What this part lost or refused, so that readers of the trace alone (the summary)
        // can say so; the merge adds up the parts'.
        for (name, &value) in end.counters.iter() {
            if value > 0 && crate::counters::is_loss(name) {
                self.w.set_property(
                    &nccl_scorep_common::provenance::lost_property(name),
                    &value.to_string(),
                );
            }
        }
        let proxy_lanes = self.timelines.proxy_lanes();
        let stats = self.close();
        crate::log::info(&format!(
            "trace part written to {} ({} OTF2 events)",
            self.path().display(),
            stats.events_written
        ));
        crate::log::info(&format!(
            "{} snapshots of the trace part's definitions were kept while it was written",
            stats.snapshots
        ));
        if stats.inconsistent_comms > 0 {
            crate::log::warn(&format!(
                "{} communicator rank(s) were described by init unlike the first rank of their \
                 communicator in this process (another rank count or name, a rank outside the \
                 rank count, or a rank twice): each has a communicator of its own in the trace, \
                 without message records or roots",
                stats.inconsistent_comms
            ));
        }
        let repaired = [
            ("otf2_failed_calls", stats.failed_calls),
            ("otf2_raised_timestamps", stats.raised_timestamps),
            ("otf2_clipped_intervals", stats.clipped_intervals),
            ("otf2_late_children", stats.late_children),
            ("otf2_ops_without_kernels", stats.ops_without_kernels),
            ("otf2_messages_without_comm", stats.messages_without_comm),
            ("otf2_ranks_out_of_range", stats.ranks_out_of_range),
            ("otf2_inconsistent_comms", stats.inconsistent_comms),
            ("otf2_locations_refused", stats.locations_refused),
            (
                "otf2_events_without_location",
                stats.events_without_location,
            ),
            ("otf2_held_back_overflow", stats.held_back_overflow),
            ("otf2_failed_writes", stats.failed_writes),
        ];
        for (name, value) in repaired {
            if value > 0 {
                crate::log::info(&format!("trace writer: {name}={value}"));
            }
        }
        if stats.locations_refused > 0 {
            crate::log::warn(&format!(
                "the trace part reached NCCL_SCOREP_MAX_LOCATIONS ({} locations): {} more \
                 locations and their {} events are not in it",
                self.w.max_locations, stats.locations_refused, stats.events_without_location
            ));
        }
        if stats.squeezed_proxy_intervals > 0 {
            crate::log::warn(&format!(
                "{} proxy operations or steps found all {proxy_lanes} proxy lanes of their \
                 communicator rank busy and were squeezed (each starts late, where a lane or \
                 its operation had room); raise NCCL_SCOREP_PROXY_LANES (at most 64) to show \
                 them as they were",
                stats.squeezed_proxy_intervals
            ));
        }
    }
}
