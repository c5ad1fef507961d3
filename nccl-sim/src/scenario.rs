//! The scenarios: each reproduces one of NCCL's call patterns
//! on the emulated NCCL, with one application thread per rank unless said otherwise.

use crate::names::DataType;
use crate::nccl::{self, Comm, CommOptions, Nccl, NetPluginKind, SimConfig, Transport};
use crate::time::{host_ns, sleep_until, Rng};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::Duration;

/// How far ahead of the first rank ready the paced iterations start: time enough for the
/// job's other ranks to learn the start ([`Nccl::latest_across_processes`]).
const PACED_START_MARGIN: Duration = Duration::from_millis(5);

/// Every scenario, with its name and what it reproduces.
pub const SCENARIOS: &[(&str, &str)] = &[
    ("single", "one AllReduce per call outside any group, one rank per thread"),
    ("group", "ncclGroupStart; AllReduce, AllGather, ReduceScatter; ncclGroupEnd: lazy GroupApi with depth 2, states 23/24"),
    ("nested-group", "a group opened inside a group after its first operation: the GroupApi ends early"),
    ("multi-comm", "one thread drives every rank's communicator in one group"),
    ("p2p", "send/recv rounds around a ring inside groups"),
    ("alltoall", "ncclAlltoAll lowered to one send and one receive per peer"),
    ("graph", "a CUDA graph captured once, then replayed on a callback thread with stale capture-time parents"),
    ("ring-wrap", "more than 64 collectives in one group: the host reads a later work's GPU timestamps from the 64-slot ring"),
    ("p2p-copy", "a proxy transport without stop: ProxyOps started and never stopped"),
    ("net-plugin", "NetPlugin events from the built-in IB and socket plugins under each send step, stopEvent(NULL) included"),
    ("ce", "AlltoAll on the copy-engine path: CollApi then CeColl, CeSync, CeBatch (NCCL 2.29+)"),
    ("split", "a split communicator sharing its parent's proxy; the parent is destroyed first"),
    ("nonblocking", "non-blocking communicators: launches on another thread"),
    ("special", "nRanks == 1, count == 0 and Broadcast (an AllGatherV task on 2.29+): what NCCL does not emit"),
];

/// Parameters shared by the scenarios.
#[derive(Clone, Debug)]
pub struct Params {
    pub ranks: i32,
    pub iterations: usize,
    /// Message sizes in bytes, used in turn.
    pub sizes: Vec<usize>,
    /// The communicator hash (all processes of a job must agree on it).
    pub comm_hash: u64,
    /// Ranks that exist in this process (all of them for a single process).
    pub local_ranks: Vec<i32>,
    /// A rank that arrives late at every collective, and by how much.
    pub late: Option<(i32, Duration)>,
    /// Paced iterations (`--interval-us`): every rank starts its i-th iteration at the
    /// job's common start + i × this, as after compute of that length; the late rank that
    /// much after it.
    pub interval: Option<Duration>,
    /// Paced: each rank's deadline of each iteration comes up to this much later, at
    /// random (its compute took that much longer), drawn from `seed`.
    pub jitter: Duration,
    /// Seeds the pacing's jitter (the same in every process of a job).
    pub seed: u64,
}

impl Params {
    pub fn single_process(ranks: i32, iterations: usize) -> Params {
        Params {
            ranks,
            iterations,
            sizes: vec![1 << 20],
            comm_hash: 0x5eed_c0de_0000_0001,
            local_ranks: (0..ranks).collect(),
            late: None,
            interval: None,
            jitter: Duration::ZERO,
            seed: 1,
        }
    }

    fn size(&self, iteration: usize) -> usize {
        self.sizes[iteration % self.sizes.len().max(1)].max(4)
    }

    /// How late `rank` is at every collective.
    fn lateness(&self, rank: i32) -> Duration {
        match self.late {
            Some((late, by)) if late == rank => by,
            _ => Duration::ZERO,
        }
    }

    /// Unpaced, the late rank sleeps before its call (paced, [`Params::pace`] delays it).
    fn delay(&self, rank: i32) {
        if self.interval.is_none() {
            std::thread::sleep(self.lateness(rank));
        }
    }

    /// Paced: sleeps until `rank`'s deadline for `iteration` (its lateness after the
    /// common one), from the job's common start `start_ns` (host CLOCK_MONOTONIC). A
    /// deadline already past is not waited for: the rank is behind schedule.
    fn pace(&self, start_ns: u64, rank: i32, iteration: usize) {
        if let Some(interval) = self.interval {
            let offset = interval.as_nanos() as u64 * iteration as u64;
            let jitter = self.jitter.as_nanos() as u64;
            let mut rng = Rng::new(self.seed ^ (rank as u64) << 32 ^ iteration as u64);
            // The generator's first output of adjacent seeds is not independent enough.
            rng.next_u64();
            let jitter = rng.below(jitter + 1);
            sleep_until(start_ns + offset + jitter + self.lateness(rank).as_nanos() as u64);
        }
    }
}

/// Runs `name`; false when there is no such scenario.
pub fn run(name: &str, nccl: &Arc<Nccl>, params: &Params) -> bool {
    match name {
        "single" => per_rank(nccl, params, "single", |comm, p, i| {
            p.delay(comm.rank());
            comm.all_reduce(p.size(i) / 4, DataType::Float32);
        }),
        "group" => per_rank(nccl, params, "group", |comm, p, i| {
            p.delay(comm.rank());
            nccl::group_start();
            comm.all_reduce(p.size(i) / 4, DataType::Float32);
            comm.all_gather(p.size(i) / 2 / comm.n_ranks() as usize, DataType::Bfloat16);
            comm.reduce_scatter(p.size(i) / 4 / comm.n_ranks() as usize, DataType::Float32);
            nccl::group_end();
        }),
        "nested-group" => per_rank(nccl, params, "nested", |comm, p, i| {
            nccl::group_start();
            comm.all_reduce(p.size(i) / 4, DataType::Float32);
            nccl::group_start();
            nccl::group_end();
            comm.all_reduce(p.size(i) / 4, DataType::Float32);
            nccl::group_end();
        }),
        "multi-comm" => multi_comm(nccl, params),
        "p2p" => per_rank(nccl, params, "p2p", |comm, p, i| {
            let n = comm.n_ranks();
            let (next, prev) = ((comm.rank() + 1) % n, (comm.rank() + n - 1) % n);
            nccl::group_start();
            comm.send(p.size(i) / 4, DataType::Float32, next);
            comm.recv(p.size(i) / 4, DataType::Float32, prev);
            nccl::group_end();
        }),
        "alltoall" => per_rank(nccl, params, "alltoall", |comm, p, i| {
            comm.all_to_all(p.size(i) / 4 / comm.n_ranks() as usize, DataType::Float32);
        }),
        "graph" => per_rank_once(nccl, params, "graph", |comm, p| {
            nccl::capture_begin();
            comm.all_reduce(p.size(0) / 4, DataType::Float32);
            let graph = nccl::capture_end();
            graph.replay(p.iterations);
        }),
        "ring-wrap" => per_rank(nccl, params, "ring-wrap", |comm, p, _| {
            nccl::group_start();
            for _ in 0..70 {
                comm.all_reduce(p.size(0) / 64, DataType::Float32);
            }
            nccl::group_end();
        }),
        "p2p-copy" | "net-plugin" => per_rank(nccl, params, name, |comm, p, i| {
            comm.all_reduce(p.size(i) / 4, DataType::Float32);
        }),
        "ce" => per_rank(nccl, params, "ce", |comm, p, i| {
            comm.all_to_all_ce(p.size(i) / 4 / comm.n_ranks() as usize, DataType::Float32);
        }),
        "split" => split(nccl, params),
        "nonblocking" => per_rank_with(nccl, params, "nonblocking", false, |comm, p, i| {
            comm.all_reduce(p.size(i) / 4, DataType::Float32);
        }),
        "special" => special(nccl, params),
        _ => return false,
    }
    true
}

/// The emulated NCCL's settings a scenario needs, from the configured ones.
pub fn config_for(name: &str, configured: &SimConfig) -> SimConfig {
    let mut config = configured.clone();
    match name {
        "p2p-copy" => config.transport = Transport::P2pCopy,
        "net-plugin" if config.net_plugin == NetPluginKind::None => {
            config.net_plugin = NetPluginKind::Ib
        }
        _ => {}
    }
    config
}

fn options(params: &Params, rank: i32, name: &str, blocking: bool) -> CommOptions {
    let mut options = CommOptions::new(params.comm_hash, rank, params.ranks);
    options.name = Some(name.to_owned());
    options.blocking = blocking;
    options
}

fn per_rank(
    nccl: &Arc<Nccl>,
    params: &Params,
    name: &str,
    body: impl Fn(&Comm, &Params, usize) + Sync,
) {
    per_rank_with(nccl, params, name, true, body);
}

/// One thread per local rank: init together, run the iterations, destroy.
fn per_rank_with(
    nccl: &Arc<Nccl>,
    params: &Params,
    name: &str,
    blocking: bool,
    body: impl Fn(&Comm, &Params, usize) + Sync,
) {
    let barrier = Barrier::new(params.local_ranks.len());
    // The ranks of this process propose one start; those of other processes take the
    // latest proposal of all.
    let proposal = OnceLock::new();
    std::thread::scope(|scope| {
        for &rank in &params.local_ranks {
            let (barrier, body, proposal) = (&barrier, &body, &proposal);
            scope.spawn(move || {
                let comm = nccl.comm_init(options(params, rank, name, blocking));
                barrier.wait();
                let start = match params.interval {
                    Some(_) => {
                        // Wake at the deadline, not up to the default 50 µs of timer
                        // slack after it (an application's compute ends when it ends).
                        // SAFETY: PR_SET_TIMERSLACK takes a value and changes only this
                        // thread's timer slack.
                        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
                        let mine = *proposal
                            .get_or_init(|| host_ns() + PACED_START_MARGIN.as_nanos() as u64);
                        nccl.latest_across_processes(rank, mine)
                    }
                    None => 0,
                };
                for iteration in 0..params.iterations {
                    params.pace(start, rank, iteration);
                    body(&comm, params, iteration);
                    // The application waits for its step's communication, as training
                    // loops do; otherwise a late rank falls further behind every step.
                    comm.synchronize();
                }
                barrier.wait();
                comm.destroy();
            });
        }
    });
}

fn per_rank_once(
    nccl: &Arc<Nccl>,
    params: &Params,
    name: &str,
    body: impl Fn(&Comm, &Params) + Sync,
) {
    let once = Params {
        iterations: 1,
        ..params.clone()
    };
    per_rank(nccl, &once, name, |comm, p, _| {
        body(
            comm,
            &Params {
                iterations: params.iterations,
                ..p.clone()
            },
        )
    });
}

/// One thread, every local rank's comm in one group per iteration.
fn multi_comm(nccl: &Arc<Nccl>, params: &Params) {
    let comms: Vec<Comm> = params
        .local_ranks
        .iter()
        .map(|&rank| nccl.comm_init(options(params, rank, "multi", true)))
        .collect();
    for iteration in 0..params.iterations {
        nccl::group_start();
        for comm in &comms {
            comm.all_reduce(params.size(iteration) / 4, DataType::Float32);
        }
        nccl::group_end();
    }
    for comm in comms {
        comm.destroy();
    }
}

/// Split children share the parent's proxy; the parent goes first.
fn split(nccl: &Arc<Nccl>, params: &Params) {
    let barrier = Barrier::new(params.local_ranks.len());
    std::thread::scope(|scope| {
        for &rank in &params.local_ranks {
            let barrier = &barrier;
            scope.spawn(move || {
                let parent = nccl.comm_init(options(params, rank, "parent", true));
                barrier.wait();
                parent.all_reduce(params.size(0) / 4, DataType::Float32);
                let child = parent.split(params.comm_hash ^ 0x5b11_7000, rank, params.ranks);
                barrier.wait();
                parent.destroy();
                for iteration in 0..params.iterations {
                    child.all_reduce(params.size(iteration) / 4, DataType::Float32);
                }
                barrier.wait();
                child.destroy();
            });
        }
    });
}

/// What NCCL does not emit: one-rank comms, empty operations, Broadcast on 2.29+.
fn special(nccl: &Arc<Nccl>, params: &Params) {
    let solo = nccl.comm_init(CommOptions::new(params.comm_hash ^ 0x1, 0, 1));
    solo.all_reduce(1024, DataType::Float32);
    solo.destroy();
    per_rank(nccl, params, "special", |comm, p, i| {
        comm.all_reduce(0, DataType::Float32);
        comm.broadcast(p.size(i) / 4, DataType::Float32, 0);
    });
}
