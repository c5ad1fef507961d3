//! Where finished events go. Each output is a [`Sink`]: the collector hands every sink the
//! same calls, in the same order, and knows none of them by name. The sinks a process
//! writes are opened from its configuration by the openers in [`SINKS`]; a new output is
//! one new module here and one line in that list.

pub mod flight;
pub mod jsonl;
pub mod ledger;
pub mod otf2;
#[cfg(test)]
pub mod recording;
pub mod scorep_clock;

use crate::config::Config;
use crate::context::ContextInfo;
use crate::model::{Closed, FinishedEvent, Gap, HeldBack, HeldTasks, OpenView};
use nccl_scorep_common::{PartDir, RunDir};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Set when the trace written so far should be on the disk now rather than at the next
/// regular persist (a hang report asks for it); taken by the trace's sink at the end of a
/// pass. Sinks do not know each other: this flag is how one asks and another answers.
static PERSIST_REQUESTED: AtomicBool = AtomicBool::new(false);

/// Asks the trace's sink to put what it wrote on the disk at the end of this pass.
pub fn request_persist() {
    PERSIST_REQUESTED.store(true, Ordering::Release);
}

/// Whether a persist was asked for since the last call (and clears the request).
pub fn take_persist_request() -> bool {
    PERSIST_REQUESTED.swap(false, Ordering::AcqRel)
}

/// An output of the collector. Every method but [`Sink::event`] has a default that does
/// nothing. All run on the collector thread.
pub trait Sink: Send {
    /// A communicator rank was initialised (or, on API v1–v3, learned its hash from its
    /// first task).
    fn comm(&mut self, _context: u64, _info: &Arc<ContextInfo>) {}

    /// A communicator rank was finalized.
    fn comm_finalized(&mut self, _context: u64) {}

    /// A thread's ring dropped records.
    fn gap(&mut self, _gap: &Gap) {}

    /// A thread waited for room in its full ring.
    fn held_back(&mut self, _held: &HeldBack) {}

    /// An event started (its children may finish before it does).
    fn started(&mut self, _event: &OpenView) {}

    /// An event finished: it is complete, with its owner, parent and states resolved.
    fn event(&mut self, event: &FinishedEvent);

    /// A kernel event (KernelCh, KernelPhase) ended at host time `stop_ns`, when the
    /// host noticed it. It reaches [`Sink::event`] only once its GPU times are converted,
    /// which can be a second later at the start of a run: this is for sinks that follow
    /// the job's progress rather than its times.
    fn kernel_ended(&mut self, _kernel: &OpenView, _stop_ns: u64, _closed: Closed) {}

    /// A pass of the collector ended: everything stamped before `processed_until` has
    /// been handed over; `open` are the events still open, `held_tasks` the tasks of
    /// kernel channels held for their GPU clock conversion (not yet handed over).
    fn end_of_pass(
        &mut self,
        _open: &mut dyn Iterator<Item = OpenView<'_>>,
        _held_tasks: &HeldTasks,
        _processed_until: u64,
    ) {
    }

    /// The init/finalize cycle ended: nothing more comes. Sinks finish in list order.
    fn finish(&mut self, _end: &CycleEnd) {}
}

/// What a sink may need when it is opened.
pub struct SinkContext<'a> {
    pub config: &'a Config,
    pub pid: i32,
    pub host: &'a str,
    pub run_dir: &'a RunDir,
    /// This cycle's part of the trace (the trace sink creates it).
    pub part: &'a PartDir,
}

/// What the collector knows at the end of a cycle.
pub struct CycleEnd<'a> {
    /// Every counter of the cycle (see `Counters::snapshot`).
    pub counters: &'a BTreeMap<&'static str, u64>,
}

/// Opens a sink when the configuration asks for it (`None` otherwise, or when it cannot
/// be opened, which it reports).
pub type Opener = fn(&SinkContext) -> Option<Box<dyn Sink>>;

/// The sinks, in the order they receive every call and finish: the event log, the flight
/// recorder, the trace,
/// the Score-P clock file of the trace's part, then the part's entry in the merge ledger,
/// which must come once everything of the part is on disk.
pub const SINKS: &[Opener] = &[
    jsonl::open,
    flight::open,
    otf2::open,
    scorep_clock::open,
    ledger::open,
    #[cfg(test)]
    recording::open,
];

/// The sinks the configuration asks for.
pub fn open_all(context: &SinkContext) -> Vec<Box<dyn Sink>> {
    SINKS.iter().filter_map(|open| open(context)).collect()
}

#[cfg(test)]
mod tests {
    use super::recording::{self, Call};
    use super::*;
    use crate::clock;
    use crate::collector::Collector;
    use crate::config::Mode;
    use crate::event::{Action, CollApi, DataType, Event, Func, Kind, Record, Start};
    use crate::shared::Shared;
    use std::sync::atomic::Ordering;

    /// Runs a cycle of three collectives through the real collector, with the event log,
    /// the trace and the recording sink opened from the list.
    #[test]
    fn a_sink_added_to_the_list_gets_what_the_event_log_and_the_trace_get() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            mode: Mode::Otf2,
            jsonl: true,
            auto_merge: false,
            output_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        let run_dir = RunDir::new(dir.path());
        let shared: &'static Shared =
            Box::leak(Box::new(Shared::new(config, run_dir, "testhost".into())));
        recording::ENABLED.store(true, Ordering::Release);
        let part = shared.run_dir.new_part(&shared.host, shared.pid);
        let sinks = open_all(&SinkContext {
            config: &shared.config,
            pid: shared.pid,
            host: &shared.host,
            run_dir: &shared.run_dir,
            part: &part,
        });
        recording::ENABLED.store(false, Ordering::Release);
        assert_eq!(
            sinks.len(),
            5,
            "event log, flight recorder, trace, part ledger, recording"
        );
        let collector = Collector::start(shared, sinks).unwrap();

        let info = ContextInfo {
            comm_hash: 0xC0,
            comm_name: Some("world".into()),
            n_nodes: 1,
            n_ranks: 1,
            rank: 0,
            version: 7,
        };
        let context = shared.contexts.register(info, true).unwrap();
        let mut ring = shared.register_thread();
        let mut push = |handle, action| {
            let record = Record {
                time: clock::ticks(),
                handle,
                action,
            };
            assert!(ring.push(record).is_ok());
        };
        push(0, Action::Init { context });
        let mut handles = Vec::new();
        for _ in 0..3 {
            let handle = shared.slab.acquire(Kind::CollApi, 0).unwrap();
            let event = Event::CollApi(CollApi {
                func: Func::AllReduce,
                count: 1024,
                datatype: DataType::Float32,
                ..CollApi::default()
            });
            let start = Start {
                parent: 0,
                rank: 0,
                event,
            };
            push(handle, Action::Start { context, start });
            shared.slab.release(handle).unwrap();
            push(handle, Action::Stop);
            handles.push(handle);
        }
        // The thread waited a millisecond for room in its ring.
        let since = clock::ticks();
        std::thread::sleep(std::time::Duration::from_millis(1));
        push(0, Action::HeldBack { since });
        push(0, Action::Finalize { context });
        shared.contexts.finalize(context).unwrap();
        shared.return_rings(collector.stop());

        let calls = std::mem::take(&mut *recording::CALLS.lock().unwrap());
        let events: Vec<(u64, u64, u64)> = calls
            .iter()
            .filter_map(|call| match *call {
                Call::Event {
                    handle,
                    kind: Kind::CollApi,
                    start_ns,
                    stop_ns,
                    closed: crate::model::Closed::Stopped,
                } => Some((handle, start_ns, stop_ns)),
                _ => None,
            })
            .collect();
        assert_eq!(
            events.iter().map(|e| e.0).collect::<Vec<_>>(),
            handles,
            "{calls:?}"
        );
        for handle in &handles {
            assert!(calls.contains(&Call::Started {
                handle: *handle,
                kind: Kind::CollApi
            }));
        }
        let held: Vec<HeldBack> = calls
            .iter()
            .filter_map(|call| match call {
                Call::HeldBack(held) => Some(*held),
                _ => None,
            })
            .collect();
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        assert!(
            held.len() == 1
                && held[0].tid == tid
                && held[0].until_ns - held[0].since_ns >= 1_000_000
                && held[0].since_ns >= events[2].2,
            "one wait of this thread, after the last event: {calls:?}"
        );
        assert_eq!(calls.first(), Some(&Call::Comm(context)));
        assert!(calls.contains(&Call::CommFinalized(context)));
        assert_eq!(calls.last(), Some(&Call::Finish));

        // The event log holds the same events, with the same times.
        let log =
            std::fs::read_to_string(shared.run_dir.event_log("testhost", shared.pid)).unwrap();
        let logged: Vec<(u64, u64, u64)> = log
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .filter(|line| line["type"] == "event")
            .map(|line| {
                (
                    u64::from_str_radix(line["id"].as_str().unwrap().trim_start_matches("0x"), 16)
                        .unwrap(),
                    line["start_ns"].as_u64().unwrap(),
                    line["stop_ns"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(logged, events);
        let held_lines: Vec<(i64, u64, u64)> = log
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .filter(|line| line["type"] == "held_back")
            .map(|line| {
                (
                    line["thread"].as_i64().unwrap(),
                    line["start_ns"].as_u64().unwrap(),
                    line["stop_ns"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            held_lines,
            [(i64::from(tid), held[0].since_ns, held[0].until_ns)]
        );

        // The trace has one ncclAllReduce interval per event, at the same times (the
        // trace's clock is CLOCK_MONOTONIC moved to real time: compare from the first; the
        // offset interpolated between the part's two clock offsets rounds to a nanosecond
        // either way).
        let printed = std::process::Command::new("otf2-print")
            .arg(part.anchor())
            .output()
            .expect("otf2-print (Debian package otf2-tools)");
        assert!(printed.status.success());
        let text = String::from_utf8_lossy(&printed.stdout);
        let enters: Vec<u64> = text
            .lines()
            .filter(|l| l.starts_with("ENTER") && l.contains("\"ncclAllReduce\""))
            .map(|l| l.split_whitespace().nth(2).unwrap().parse().unwrap())
            .collect();
        let since_first = |times: &[u64]| times.iter().map(|t| t - times[0]).collect::<Vec<_>>();
        let starts: Vec<u64> = events.iter().map(|e| e.1).collect();
        let (enters, starts) = (since_first(&enters), since_first(&starts));
        assert_eq!(enters.len(), starts.len(), "{text}");
        assert!(
            enters.iter().zip(&starts).all(|(e, s)| e.abs_diff(*s) <= 1),
            "{enters:?} {starts:?} {text}"
        );
        // And the wait, as long as the sinks were told.
        let held_times: Vec<u64> = text
            .lines()
            .filter(|l| {
                (l.starts_with("ENTER") || l.starts_with("LEAVE"))
                    && l.contains("\"NCCL held back by the plugin\"")
            })
            .map(|l| l.split_whitespace().nth(2).unwrap().parse().unwrap())
            .collect();
        assert_eq!(held_times.len(), 2, "{text}");
        // (The offsets' interpolation may stretch it by the clocks' drift: at most a
        // thousandth here.)
        let waited = held[0].until_ns - held[0].since_ns;
        assert!(
            (held_times[1] - held_times[0]).abs_diff(waited) <= 1 + waited / 1000,
            "{held_times:?} {held:?}"
        );
    }
}
