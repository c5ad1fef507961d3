//! The flight recorder: per communicator rank the last operations and where each is
//! (enqueued, running on the GPU, completed) in a fixed-size file of the run directory
//! that `nccl-scorep status` reads while the job runs; and the hang report, written when
//! an operation stays unfinished past `NCCL_SCOREP_HANG_TIMEOUT` or on the configured
//! signal. The file's layout is `nccl_scorep_common::flight`'s (docs/hangs.md).

use super::{CycleEnd, Sink, SinkContext};
use crate::clock::ClockPair;
use crate::context::ContextInfo;
use crate::event::{Event, Kind};
use crate::kinds::KindSet;
use crate::model::{Closed, FinishedEvent, HeldTasks, OpenView, Owner, Parent};
use nccl_scorep_common::flight::{self, FlightWriter, OpRecord, OpSlot, ProxyWait};
use rustc_hash::FxHashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the file is written out (the heartbeat's resolution).
const PUBLISH_INTERVAL_NS: u64 = 100_000_000;
/// A heartbeat older than this marks a process stale in the hang report.
const STALE_NS: u64 = 5_000_000_000;

/// A task being followed until its children show it completed.
struct Pending {
    op: OpSlot,
    enqueued_ns: u64,
    /// Kernel channels the task announced (at least one).
    channels: u32,
    kernel_ended: u32,
    children_open: u32,
    task_stopped: bool,
    reported: bool,
    /// Its open proxy operations (their handles in [`FlightRecorder::proxies`]).
    proxies: Vec<u64>,
    /// What it waits for in the proxy changed since the file last showed it.
    wait_changed: bool,
}

/// An open proxy operation of a followed task, and how far its steps got.
struct ProxyProgress {
    task: u64,
    /// Its start, or the end of its last step: when it last moved on.
    since_ns: u64,
    peer: i32,
    channel: u8,
    send: bool,
    steps: u32,
    steps_done: u32,
    steps_open: u32,
}

pub struct FlightRecorder {
    writer: FlightWriter,
    run_dir: PathBuf,
    host: String,
    pid: i32,
    /// Kernel channels are recorded (they show the GPU start and completion).
    kernels: bool,
    slots: FxHashMap<u64, usize>,
    pending: FxHashMap<u64, Pending>,
    proxies: FxHashMap<u64, ProxyProgress>,
    /// Per communicator rank, the p2p operations recorded (their `seq` in the file).
    p2p_counts: FxHashMap<u64, u64>,
    /// Per slot of the file, the task of each operation record it holds (0: none), by
    /// the record's place: a task whose record is overwritten is followed no more.
    tasks_in_slot: Vec<Vec<u64>>,
    /// Tasks whose proxy wait changed since it was last written (see
    /// [`FlightRecorder::show_changed_proxy_waits`]).
    waits_changed: Vec<u64>,
    hang_timeout: Option<Duration>,
    last_publish_ns: u64,
    reports: u32,
    failed: bool,
}

/// The recorder when the configuration asks for it (on by default).
pub fn open(context: &SinkContext) -> Option<Box<dyn Sink>> {
    create(context).map(|recorder| Box::new(recorder) as Box<dyn Sink>)
}

fn create(context: &SinkContext) -> Option<FlightRecorder> {
    let config = context.config;
    if !config.flight_recorder || config.mode == crate::config::Mode::Off {
        return None;
    }
    let root = context.run_dir.root().to_path_buf();
    let path = root.join(flight::file_name(context.host, context.pid));
    // Opened on NCCL's thread, whose SIGXFSZ would kill the job: a file size limit
    // (`ulimit -f`) below the file's size means no recorder, said once.
    let bytes = flight::file_bytes(config.flight_comms, config.flight_ops) as u64;
    if let Some(limit) = file_size_limit().filter(|&limit| bytes > limit) {
        crate::log::warn(&format!(
            "the file size limit (ulimit -f, {limit} bytes) is below the flight recorder's \
             {bytes} bytes: no flight recorder in this process"
        ));
        return None;
    }
    let clocks = ClockPair::now();
    let offset = clocks.realtime_ns as i64 - clocks.monotonic_ns as i64;
    let created = match take_last_parts_writer(&path) {
        Some(writer) => Ok(writer),
        None => nccl_scorep_common::safe_file::create_dirs(&root).and_then(|()| {
            FlightWriter::create(
                &path,
                context.host,
                context.pid,
                config.flight_comms,
                config.flight_ops,
                offset,
            )
        }),
    };
    let writer = match created {
        Ok(writer) => writer,
        Err(error) => {
            crate::log::warn(&format!(
                "cannot write the flight recorder {}: {error}",
                path.display()
            ));
            return None;
        }
    };
    if let Some(signal) = config.report_signal {
        install_report_signal(signal);
    }
    Some(FlightRecorder {
        writer,
        run_dir: root,
        host: context.host.to_owned(),
        pid: context.pid,
        kernels: config.event_mask.contains(KindSet::KERNEL_CH),
        slots: FxHashMap::default(),
        pending: FxHashMap::default(),
        proxies: FxHashMap::default(),
        p2p_counts: FxHashMap::default(),
        tasks_in_slot: Vec::new(),
        waits_changed: Vec::new(),
        hang_timeout: config.hang_timeout,
        last_publish_ns: 0,
        reports: 0,
        failed: false,
    })
}

/// The process's file size limit in bytes (`ulimit -f`), or `None` when unlimited.
fn file_size_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given, which lives on this stack.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit) };
    (got == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

impl FlightRecorder {
    /// Marks a task completed once its children say so.
    fn settle(&mut self, handle: u64, time_ns: u64) {
        let Some(p) = self.pending.get(&handle) else {
            return;
        };
        let done = p.task_stopped
            && p.children_open == 0
            // Without kernel channels recorded, a task is done when its proxy work is
            // (or at its stop when none of it is open).
            && (!self.kernels || p.kernel_ended >= p.channels);
        if done {
            let op = p.op;
            self.pending.remove(&handle);
            self.writer.completed(op, time_ns);
        }
    }

    /// Notes that what `task` waits for in the proxy changed. Steps start and stop far
    /// more often than the file is read: the wait is worked out when the file is
    /// published (which a report does first), once per task however many steps moved.
    fn proxy_wait_changed(&mut self, task: u64) {
        if let Some(p) = self.pending.get_mut(&task) {
            if !p.wait_changed {
                p.wait_changed = true;
                self.waits_changed.push(task);
            }
        }
    }

    /// Writes the proxy waits that changed, of the tasks still followed.
    fn show_changed_proxy_waits(&mut self) {
        let mut changed = std::mem::take(&mut self.waits_changed);
        for task in changed.drain(..) {
            if let Some(p) = self.pending.get_mut(&task) {
                p.wait_changed = false;
                self.show_proxy_wait(task);
            }
        }
        self.waits_changed = changed;
    }

    /// Writes what `task` waits for in the proxy: the open proxy operation that has not
    /// moved on for longest.
    fn show_proxy_wait(&mut self, task: u64) {
        let Some(p) = self.pending.get(&task) else {
            return;
        };
        let oldest = p
            .proxies
            .iter()
            .filter_map(|handle| self.proxies.get(handle))
            .min_by_key(|proxy| proxy.since_ns);
        let wait = oldest.map(|proxy| ProxyWait {
            since_ns: proxy.since_ns,
            peer: proxy.peer,
            channel: proxy.channel,
            send: proxy.send,
            step_waiting: proxy.steps_open > 0,
            steps_done: proxy.steps_done,
            steps: proxy.steps,
            open: p.proxies.len() as u32,
        });
        let gpu_done = self.kernels && p.kernel_ended >= p.channels;
        self.writer.proxy_wait(p.op, wait, gpu_done);
    }

    /// The task of the proxy operation a step belongs to, when followed.
    fn step_task(&mut self, parent: &Parent) -> Option<(u64, &mut ProxyProgress)> {
        let Parent::Local {
            handle,
            kind: Kind::ProxyOp,
        } = *parent
        else {
            return None;
        };
        let proxy = self.proxies.get_mut(&handle)?;
        Some((proxy.task, proxy))
    }

    /// `task`'s record is `op`: the task whose record was there before is overwritten, and
    /// followed no more, with its proxy operations (the file cannot show it, and its
    /// children's stops may have been lost; at high rates thousands of tasks would
    /// otherwise wait in the maps).
    fn follow_in_slot(&mut self, op: OpSlot, task: u64) {
        let (per_slot, place) = (
            self.writer.ops_per_slot() as usize,
            self.writer.place_in_slot(op.number),
        );
        if self.tasks_in_slot.len() <= op.slot {
            self.tasks_in_slot.resize_with(op.slot + 1, Vec::new);
        }
        let tasks = &mut self.tasks_in_slot[op.slot];
        if tasks.len() != per_slot {
            tasks.resize(per_slot, 0);
        }
        let overwritten = std::mem::replace(&mut tasks[place], task);
        if let Some(p) = self.pending.remove(&overwritten) {
            for proxy in p.proxies {
                self.proxies.remove(&proxy);
            }
        }
    }

    /// A child of `task` (a kernel channel or a proxy operation) ended at `end_ns`: one
    /// child fewer open, `update` for what else it tells, and the task settled if it is
    /// done.
    fn child_ended(&mut self, task: u64, end_ns: u64, update: impl FnOnce(&mut Pending)) {
        if let Some(p) = self.pending.get_mut(&task) {
            p.children_open = p.children_open.saturating_sub(1);
            update(p);
            self.proxy_wait_changed(task);
        }
        self.settle(task, end_ns);
    }

    fn child_of(parent: &Parent) -> Option<u64> {
        match *parent {
            Parent::Local {
                handle,
                kind: Kind::Coll | Kind::P2p,
            } => Some(handle),
            _ => None,
        }
    }

    fn publish(&mut self, now_realtime_ns: u64) {
        if self.failed {
            self.waits_changed.clear();
            return;
        }
        self.show_changed_proxy_waits();
        if let Err(error) = self.writer.publish(now_realtime_ns) {
            self.failed = true;
            crate::log::warn(&format!(
                "cannot update the flight recorder in {}: {error}; it stops here",
                self.run_dir.display()
            ));
        }
    }

    /// Writes the hang report (the status of every recorder file of the run directory)
    /// and says so on stderr.
    fn report(&mut self, why: &str) {
        // What led up to the hang goes on the disk in this pass, not at the next persist.
        super::request_persist();
        let now = ClockPair::now();
        self.publish(now.realtime_ns);
        let mut records = Vec::new();
        let mut problems = String::new();
        for path in flight::files_in(&self.run_dir).unwrap_or_default() {
            match flight::read_file(&path) {
                Ok(record) => records.push(record),
                Err(error) => problems.push_str(&format!("unreadable: {error}\n")),
            }
        }
        let diagnosis = flight::diagnose(&records, now.realtime_ns, STALE_NS);
        self.reports += 1;
        let path = self.run_dir.join(format!(
            "nccl-scorep-hang-{}-{}-{}.txt",
            self.host, self.pid, self.reports
        ));
        let text = format!(
            "nccl-scorep hang report of process {} on {}: {why}\n{}{problems}",
            self.pid,
            self.host,
            flight::render(&diagnosis)
        );
        match nccl_scorep_common::safe_file::replace(&path, text.as_bytes()) {
            Ok(()) => crate::log::warn(&format!("{why}; hang report in {}", path.display())),
            Err(error) => crate::log::warn(&format!(
                "{why}; cannot write the hang report {}: {error}",
                path.display()
            )),
        }
    }
}

impl Sink for FlightRecorder {
    fn comm(&mut self, context: u64, info: &Arc<ContextInfo>) {
        if self.slots.contains_key(&context) {
            return;
        }
        match self.writer.claim(info.comm_hash, info.rank, info.n_ranks) {
            Some(slot) => {
                self.slots.insert(context, slot);
            }
            None => crate::log::warn(
                "the flight recorder has no room for another communicator rank \
                 (NCCL_SCOREP_FLIGHT_COMMS); it is not recorded",
            ),
        }
    }

    fn comm_finalized(&mut self, context: u64) {
        if let Some(slot) = self.slots.remove(&context) {
            self.writer.finalize(slot);
            if let Some(tasks) = self.tasks_in_slot.get_mut(slot) {
                tasks.fill(0);
            }
            // The slot may be given to another communicator rank: nothing may point in it.
            self.pending.retain(|_, p| p.op.slot != slot);
            let pending = &self.pending;
            self.proxies
                .retain(|_, proxy| pending.contains_key(&proxy.task));
        }
    }

    fn started(&mut self, view: &OpenView) {
        match (view.kind, view.owner, view.event) {
            (Kind::Coll | Kind::P2p, Owner::Local(context), event) => {
                let Some(&slot) = self.slots.get(&context) else {
                    return;
                };
                let (seq, func, bytes, peer, channels, is_coll) = match event {
                    Event::Coll(c) => (
                        c.seq,
                        c.func,
                        c.datatype.size().unwrap_or(1).saturating_mul(c.count),
                        c.root,
                        u32::from(c.n_channels).max(1),
                        true,
                    ),
                    Event::P2p(p) => {
                        let n = self.p2p_counts.entry(context).or_default();
                        *n += 1;
                        (
                            *n - 1,
                            p.func,
                            p.datatype.size().unwrap_or(1).saturating_mul(p.count),
                            p.peer,
                            1,
                            false,
                        )
                    }
                    _ => return,
                };
                let op = self.writer.push(
                    slot,
                    &OpRecord {
                        seq,
                        func: func.as_str(),
                        is_coll,
                        bytes,
                        peer,
                        enqueued_ns: view.start_ns,
                        ..OpRecord::default()
                    },
                );
                self.follow_in_slot(op, view.handle);
                self.pending.insert(
                    view.handle,
                    Pending {
                        op,
                        enqueued_ns: view.start_ns,
                        channels,
                        kernel_ended: 0,
                        children_open: 0,
                        task_stopped: false,
                        reported: false,
                        proxies: Vec::new(),
                        wait_changed: false,
                    },
                );
            }
            (Kind::KernelCh | Kind::ProxyOp, _, event) => {
                let Some(task) = Self::child_of(&view.parent) else {
                    return;
                };
                let Some(p) = self.pending.get_mut(&task) else {
                    return;
                };
                p.children_open += 1;
                match event {
                    Event::ProxyOp(op) => {
                        p.proxies.push(view.handle);
                        self.proxies.insert(
                            view.handle,
                            ProxyProgress {
                                task,
                                since_ns: view.start_ns,
                                peer: op.peer,
                                channel: op.channel,
                                send: op.is_send,
                                steps: op.n_steps.max(0) as u32,
                                steps_done: 0,
                                steps_open: 0,
                            },
                        );
                        self.proxy_wait_changed(task);
                    }
                    _ => {
                        let op = p.op;
                        self.writer.gpu_started(op, view.start_ns);
                    }
                }
            }
            (Kind::ProxyStep, _, _) => {
                if let Some((task, proxy)) = self.step_task(&view.parent) {
                    proxy.steps_open += 1;
                    self.proxy_wait_changed(task);
                }
            }
            _ => {}
        }
    }

    fn event(&mut self, event: &FinishedEvent) {
        match event.kind {
            Kind::Coll | Kind::P2p => {
                if let Some(p) = self.pending.get_mut(&event.handle) {
                    // Closed at finalize or abandoned is no completion.
                    p.task_stopped = matches!(event.closed, Closed::Stopped | Closed::StopLost);
                }
                self.settle(event.handle, event.stop_ns);
            }
            Kind::ProxyOp => {
                let Some(task) = Self::child_of(&event.parent) else {
                    return;
                };
                self.proxies.remove(&event.handle);
                self.child_ended(task, event.stop_ns, |p| {
                    p.proxies.retain(|&h| h != event.handle);
                });
            }
            Kind::ProxyStep => {
                if let Some((task, proxy)) = self.step_task(&event.parent) {
                    proxy.steps_open = proxy.steps_open.saturating_sub(1);
                    proxy.steps_done += 1;
                    proxy.since_ns = proxy.since_ns.max(event.stop_ns);
                    self.proxy_wait_changed(task);
                }
            }
            _ => {}
        }
    }

    /// A kernel channel counts when the host noticed its end: its converted GPU times
    /// come later (see [`Sink::kernel_ended`]), and an operation is not shown unfinished
    /// meanwhile.
    fn kernel_ended(&mut self, kernel: &OpenView, stop_ns: u64, closed: Closed) {
        if kernel.kind != Kind::KernelCh {
            return;
        }
        let Some(task) = Self::child_of(&kernel.parent) else {
            return;
        };
        self.child_ended(task, stop_ns, |p| {
            if closed == Closed::Stopped {
                p.kernel_ended += 1;
            }
        });
    }

    fn end_of_pass(
        &mut self,
        _open: &mut dyn Iterator<Item = OpenView<'_>>,
        _held_tasks: &HeldTasks,
        _until: u64,
    ) {
        let now = ClockPair::now();
        if REPORT_REQUESTED.swap(false, Ordering::AcqRel) {
            self.report("a hang report was asked for by signal");
        }
        if let Some(timeout) = self.hang_timeout {
            let limit = timeout.as_nanos() as u64;
            let overdue = self
                .pending
                .values_mut()
                .filter(|p| !p.reported && now.monotonic_ns.saturating_sub(p.enqueued_ns) > limit)
                .map(|p| p.reported = true)
                .count();
            if overdue > 0 {
                self.report(&format!(
                    "{overdue} operation(s) unfinished for more than {} s \
                     (NCCL_SCOREP_HANG_TIMEOUT)",
                    timeout.as_secs_f64()
                ));
            }
        }
        if now.realtime_ns.saturating_sub(self.last_publish_ns) >= PUBLISH_INTERVAL_NS {
            self.last_publish_ns = now.realtime_ns;
            // Tasks whose records newer operations replaced were dropped as they were
            // replaced ([`FlightRecorder::follow_in_slot`]): the maps are as small as the
            // file.
            debug_assert!(self.pending.values().all(|p| self.writer.holds(p.op)));
            self.publish(now.realtime_ns);
        }
    }

    fn finish(&mut self, _end: &CycleEnd) {
        let slots: Vec<usize> = self.slots.drain().map(|(_, slot)| slot).collect();
        for slot in slots {
            self.writer.finalize(slot);
        }
        self.publish(ClockPair::now().realtime_ns);
        if let Ok(writer) = self.writer.try_clone() {
            let path = self.run_dir.join(flight::file_name(&self.host, self.pid));
            *lock_last_parts_writer() = Some((path, writer));
        }
    }
}

/// The recorder file of this process's last part, finalized, for its next part (a
/// process whose communicators were all destroyed and which then creates new ones): the
/// next part goes on writing it, so the communicators of every part stay in it, as long
/// as its slots last (new ones take free slots first, then finalized ones).
static LAST_PARTS_WRITER: Mutex<Option<(PathBuf, FlightWriter)>> = Mutex::new(None);

fn lock_last_parts_writer() -> std::sync::MutexGuard<'static, Option<(PathBuf, FlightWriter)>> {
    // Poisoned: a panic elsewhere; the value is still whole.
    LAST_PARTS_WRITER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The last part's writer when it wrote `path` (the same run directory, host and pid: a
/// forked child or another run directory starts its own file).
fn take_last_parts_writer(path: &std::path::Path) -> Option<FlightWriter> {
    let mut last = lock_last_parts_writer();
    match last.take() {
        Some((written, writer)) if written == path => Some(writer),
        _ => None,
    }
}

/// Set by the signal handler, taken by the collector's next pass.
static REPORT_REQUESTED: AtomicBool = AtomicBool::new(false);
static SIGNAL_INSTALLED: AtomicBool = AtomicBool::new(false);
/// The handler that was installed before ours, and its `sa_flags`.
static PREVIOUS_HANDLER: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
static PREVIOUS_FLAGS: AtomicUsize = AtomicUsize::new(0);

/// Only async-signal-safe work: sets the flag, then calls the handler that was there
/// before (the application's), the way it asked to be called.
extern "C" fn on_report_signal(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    REPORT_REQUESTED.store(true, Ordering::Release);
    let previous = PREVIOUS_HANDLER.load(Ordering::Acquire);
    if previous == libc::SIG_DFL || previous == libc::SIG_IGN {
        return;
    }
    let flags = PREVIOUS_FLAGS.load(Ordering::Acquire) as libc::c_int;
    if flags & libc::SA_SIGINFO != 0 {
        // SAFETY: `previous` is the sa_sigaction the kernel held with SA_SIGINFO, so it
        // is a function of this signature.
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(previous) };
        handler(signal, info, context);
    } else {
        // SAFETY: without SA_SIGINFO the saved value is a plain `void (*)(int)` handler.
        let handler: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(previous) };
        handler(signal);
    }
}

/// Installs the report signal's handler once per process, keeping the one it replaces.
fn install_report_signal(signal: i32) {
    if SIGNAL_INSTALLED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: sigaction with zeroed, then filled structures; the handler only touches
    // atomics and calls the saved handler.
    let installed = unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        let mut previous: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_report_signal as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        // Saved before ours is in place, so the handler never sees a half-saved one.
        if libc::sigaction(signal, std::ptr::null(), &mut previous) != 0 {
            false
        } else {
            PREVIOUS_HANDLER.store(previous.sa_sigaction, Ordering::Release);
            PREVIOUS_FLAGS.store(previous.sa_flags as usize, Ordering::Release);
            libc::sigaction(signal, &action, std::ptr::null_mut()) == 0
        }
    };
    if !installed {
        crate::log::warn(&format!(
            "cannot install the hang report's signal handler (signal {signal}): {}",
            std::io::Error::last_os_error()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Mode};
    use crate::event::{Coll, ProxyOp};
    use nccl_scorep_common::run_dir::RunDir;

    /// Operations whose kernels and proxy work never end (as while their kernel channels
    /// wait for the GPU clock's conversion) are followed only while the file holds their
    /// record: the maps stay as small as the file, whatever the rate.
    #[test]
    fn only_the_operations_the_file_holds_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            mode: Mode::Otf2,
            flight_ops: 8,
            output_dir: dir.path().to_path_buf(),
            ..Config::default()
        };
        let run_dir = RunDir::new(dir.path());
        let part = run_dir.new_part("testhost", 7);
        let mut recorder = create(&SinkContext {
            config: &config,
            pid: 7,
            host: "testhost",
            run_dir: &run_dir,
            part: &part,
        })
        .expect("a flight recorder");
        let info = Arc::new(ContextInfo {
            comm_hash: 0xC0,
            comm_name: None,
            n_nodes: 1,
            n_ranks: 2,
            rank: 0,
            version: 7,
        });
        recorder.comm(1, &info);
        for n in 0..100u64 {
            let (task, proxy) = (1_000 + 2 * n, 1_001 + 2 * n);
            let coll = Event::Coll(Coll {
                seq: n,
                n_channels: 1,
                ..Coll::default()
            });
            recorder.started(&OpenView {
                handle: task,
                kind: Kind::Coll,
                owner: Owner::Local(1),
                parent: Parent::None,
                start_ns: n,
                start_tid: 1,
                event: &coll,
            });
            let op = Event::ProxyOp(ProxyOp {
                n_steps: 4,
                ..ProxyOp::default()
            });
            recorder.started(&OpenView {
                handle: proxy,
                kind: Kind::ProxyOp,
                owner: Owner::Local(1),
                parent: Parent::Local {
                    handle: task,
                    kind: Kind::Coll,
                },
                start_ns: n,
                start_tid: 2,
                event: &op,
            });
        }
        assert_eq!(recorder.pending.len(), 8);
        assert_eq!(recorder.proxies.len(), 8);
        assert!(recorder.pending.contains_key(&(1_000 + 2 * 99)));
        assert!(!recorder.pending.contains_key(&(1_000 + 2 * 91)));
    }
}
