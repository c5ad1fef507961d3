//! The scenarios: each reproduces one of NCCL's call patterns
//! on the emulated NCCL, with one application thread per rank unless said otherwise.

use crate::names::DataType;
use crate::nccl::{self, Comm, CommOptions, Nccl, NetPluginKind, SimConfig, Transport};
use std::sync::{Arc, Barrier};
use std::time::Duration;

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
        }
    }

    fn size(&self, iteration: usize) -> usize {
        self.sizes[iteration % self.sizes.len().max(1)].max(4)
    }

    fn delay(&self, rank: i32) {
        if let Some((late, by)) = self.late {
            if late == rank {
                std::thread::sleep(by);
            }
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
    std::thread::scope(|scope| {
        for &rank in &params.local_ranks {
            let (barrier, body) = (&barrier, &body);
            scope.spawn(move || {
                let comm = nccl.comm_init(options(params, rank, name, blocking));
                barrier.wait();
                for iteration in 0..params.iterations {
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
