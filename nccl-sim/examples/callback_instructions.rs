//! Repeats one kind of callback group (or one bench stream) through nccl-sim's NCCL 2.32
//! imitation, so that `valgrind --tool=callgrind` can count a profiler plugin's
//! instructions per callback: `scripts/hot-path-instructions.sh` runs it.
//!
//! ```text
//! callback_instructions PLUGIN.so GROUP ITERATIONS
//! ```
//!
//! GROUP is one of the names in [`GROUPS`]; `app` and `proxy` are the application and
//! proxy streams of `nccl-sim bench` (12 and 22 callbacks per iteration). After the first
//! 100 iterations it sleeps 100 ms, so that the plugin's own threads (a collector) catch
//! up as they would between NCCL's collectives. It prints `callbacks N` and `null handles
//! N` (starts that got no handle) on stderr.

use nccl_profiler_abi::state as st;
use nccl_sim::bench::{allreduce_call, allreduce_task};
use nccl_sim::event::{CommInfo, CoreEvent, Descr, Raw, StateArgs, NULL};
use nccl_sim::profiler::{Profiler, Session};
use nccl_sim::release;
use std::process::ExitCode;

/// The groups, and what each iteration calls.
const GROUPS: [(&str, &str); 11] = [
    ("groupapi", "GroupApi start, stop"),
    ("groupapi-states", "record 23 and 24 on a live GroupApi"),
    ("collapi", "CollApi start (AllReduce, ncclFloat32), stop"),
    ("kernellaunch", "KernelLaunch start, stop"),
    ("group", "Group start, stop"),
    (
        "coll",
        "Coll start (AllReduce, ncclFloat32, RING, SIMPLE), stop",
    ),
    ("proxyop", "ProxyOp start, record 19, stop"),
    ("proxystep", "ProxyStep start, record 8, record 9, stop"),
    ("kernelch", "KernelCh start, record 22, stop"),
    ("app", "nccl-sim bench's application stream (12 callbacks)"),
    ("proxy", "nccl-sim bench's proxy stream (22 callbacks)"),
];

const STEP_BYTES: usize = 1 << 19;

/// One communicator rank, counting the callbacks it makes.
struct Caller<'a> {
    profiler: &'a Profiler,
    session: Session,
    calls: u64,
    /// Starts that got a NULL handle (a plugin that refused or dropped them).
    nulls: u64,
    seq: u64,
    pid: i32,
}

impl Caller<'_> {
    fn start(&mut self, parent: Raw, event: CoreEvent) -> Raw {
        let mut handle = NULL;
        let descr = Descr {
            parent,
            rank: 0,
            event,
        };
        self.profiler.start(&self.session, &mut handle, &descr);
        self.calls += 1;
        self.nulls += u64::from(handle.is_null());
        handle
    }

    fn record(&mut self, handle: Raw, state: i32, args: StateArgs) {
        if !handle.is_null() {
            self.profiler.record(&self.session, handle, state, args);
            self.calls += 1;
        }
    }

    fn stop(&mut self, handle: Raw) {
        if !handle.is_null() {
            self.profiler.stop(&self.session, handle);
            self.calls += 1;
        }
    }

    fn group_api(&mut self) -> Raw {
        self.start(
            NULL,
            CoreEvent::GroupApi {
                graph_captured: false,
                depth: 1,
            },
        )
    }

    fn coll_api(&mut self, parent: Raw) -> Raw {
        self.start(parent, allreduce_call())
    }

    fn coll(&mut self, parent: Raw, group: Raw) -> Raw {
        self.seq += 1;
        let task = allreduce_task(self.seq, group, c"callback-instructions", 7);
        self.start(parent, CoreEvent::Coll(task))
    }

    fn proxy_op(&mut self, coll: Raw) -> Raw {
        let op = self.start(
            coll,
            CoreEvent::ProxyOp {
                pid: self.pid,
                channel: 0,
                peer: 1,
                n_steps: 4,
                chunk_size: STEP_BYTES as i32,
                is_send: true,
            },
        );
        self.record(op, st::PROXY_OP_IN_PROGRESS_V4, StateArgs::Uninit);
        op
    }

    fn proxy_step(&mut self, op: Raw, step: i32) {
        let handle = self.start(op, CoreEvent::ProxyStep { step });
        self.record(
            handle,
            st::PROXY_STEP_SEND_GPU_WAIT,
            StateArgs::TransSize(0),
        );
        self.record(
            handle,
            st::PROXY_STEP_SEND_WAIT,
            StateArgs::TransSize(STEP_BYTES),
        );
        self.stop(handle);
    }

    fn kernel_ch(&mut self, coll: Raw) {
        let handle = self.start_kernel_ch(coll);
        self.stop_kernel_ch(handle);
    }

    fn start_kernel_ch(&mut self, coll: Raw) -> Raw {
        self.start(
            coll,
            CoreEvent::KernelCh {
                channel: 0,
                ptimer: 1_000_000,
            },
        )
    }

    fn stop_kernel_ch(&mut self, handle: Raw) {
        self.record(handle, st::KERNEL_CH_STOP, StateArgs::PTimer(1_010_000));
        self.stop(handle);
    }

    /// What the application thread calls for one `ncclAllReduce` (as `nccl-sim bench`).
    fn app_stream(&mut self) -> Raw {
        let group_api = self.group_api();
        self.record(group_api, st::GROUP_START_API_STOP, StateArgs::Null);
        let coll_api = self.coll_api(group_api);
        self.stop(coll_api);
        self.record(group_api, st::GROUP_END_API_START, StateArgs::Null);
        let launch = self.start(group_api, CoreEvent::KernelLaunch);
        self.stop(launch);
        let group = self.start(NULL, CoreEvent::Group);
        let coll = self.coll(coll_api, group);
        self.stop(coll);
        self.stop(group);
        self.stop(group_api);
        coll
    }

    /// What the proxy thread calls for that collective (as `nccl-sim bench`).
    fn proxy_stream(&mut self, coll: Raw) {
        let op = self.proxy_op(coll);
        let kernel = self.start_kernel_ch(coll);
        for step in 0..4 {
            self.proxy_step(op, step);
        }
        self.stop_kernel_ch(kernel);
        self.stop(op);
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let known = GROUPS
        .iter()
        .any(|(name, _)| args.get(2) == Some(&name.to_string()));
    let iterations = args.get(3).and_then(|n| n.parse::<u64>().ok());
    let (Some(plugin), true, Some(iterations)) = (args.get(1), known, iterations) else {
        eprintln!("usage: callback_instructions PLUGIN.so GROUP ITERATIONS; GROUP is one of:");
        for (name, what) in GROUPS {
            eprintln!("  {name:16} {what}");
        }
        return ExitCode::from(2);
    };
    let group = args[2].as_str();
    let profiler = Profiler::new(release::NEWEST, Some(plugin.into()));
    let Some(session) = profiler.init(&CommInfo {
        comm_hash: 7,
        name: Some(c"callback-instructions".to_owned()),
        n_nodes: 1,
        n_ranks: 1,
        rank: 0,
    }) else {
        eprintln!("{plugin}: init failed");
        return ExitCode::FAILURE;
    };
    let mut caller = Caller {
        profiler: &profiler,
        session,
        calls: 0,
        nulls: 0,
        seq: 0,
        pid: std::process::id() as i32,
    };
    // Parents that outlive the loop, made before it (not counted).
    let live_group_api = caller.group_api();
    let ended_coll = caller.coll(NULL, NULL);
    caller.stop(ended_coll);
    let live_op = caller.proxy_op(ended_coll);
    caller.calls = 0;
    caller.nulls = 0;
    for i in 0..iterations {
        if i == 100 {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        match group {
            "groupapi" => {
                let handle = caller.group_api();
                caller.stop(handle);
            }
            "groupapi-states" => {
                caller.record(live_group_api, st::GROUP_START_API_STOP, StateArgs::Null);
                caller.record(live_group_api, st::GROUP_END_API_START, StateArgs::Null);
            }
            "collapi" => {
                let handle = caller.coll_api(live_group_api);
                caller.stop(handle);
            }
            "kernellaunch" => {
                let handle = caller.start(live_group_api, CoreEvent::KernelLaunch);
                caller.stop(handle);
            }
            "group" => {
                let handle = caller.start(NULL, CoreEvent::Group);
                caller.stop(handle);
            }
            "coll" => {
                let handle = caller.coll(live_group_api, NULL);
                caller.stop(handle);
            }
            "proxyop" => {
                let handle = caller.proxy_op(ended_coll);
                caller.stop(handle);
            }
            "proxystep" => caller.proxy_step(live_op, 1),
            "kernelch" => caller.kernel_ch(ended_coll),
            "app" => {
                caller.app_stream();
            }
            _ => caller.proxy_stream(ended_coll),
        }
    }
    let (calls, nulls) = (caller.calls, caller.nulls);
    caller.stop(live_op);
    caller.stop(live_group_api);
    profiler.finalize(Some(caller.session));
    eprintln!("callbacks {calls}");
    eprintln!("null handles {nulls}");
    ExitCode::SUCCESS
}
