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

/// How long `held-group` holds its group open after its API call.
pub const GROUP_HOLD: Duration = Duration::from_millis(1);

/// Every scenario, with its name and what it reproduces.
pub const SCENARIOS: &[(&str, &str)] = &[
    ("single", "one AllReduce per call outside any group, one rank per thread"),
    ("group", "ncclGroupStart; AllReduce, AllGather, ReduceScatter; ncclGroupEnd: lazy GroupApi with depth 2, states 23/24"),
    ("held-group", "an AllReduce in a user group the application holds open for 1 ms before ncclGroupEnd: its kernel starts long after its API call"),
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
    ("mpi-app", "the calls of the MPI+NCCL test program of the CPU-only libnccl: AllReduce loop, AllGather, a split by parity with an AllReduce, a send/recv ring"),
    ("pipeline", "pipeline stages: a two-rank communicator per pair of neighbouring ranks (`stage R-R+1`) and none of all ranks; an AllReduce on each per iteration"),
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
    /// Paced iterations (`--interval-us`): every rank starts an iteration this long after
    /// the previous one's collectives met, as after compute of that length; the first at
    /// the job's common start ([`Params::pace`]).
    pub interval: Option<Duration>,
    /// Paced: each rank's deadline of each iteration comes up to this much later, at
    /// random (its compute took that much longer), drawn from `seed`.
    pub jitter: Duration,
    /// Seeds the pacing's jitter (the same in every process of a job).
    pub seed: u64,
    /// Paced: each rank's thread moves to a CPU drawn at random at every iteration
    /// (`--shuffle-cpus`).
    pub shuffle_cpus: bool,
    /// A rank that holds back before one iteration (`--stall-rank`, `--stall-at`,
    /// `--stall-ms`): the others enter that iteration's collectives and wait for it, as in
    /// a job where one rank hangs before a collective.
    pub stall: Option<(i32, usize, Duration)>,
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
            shuffle_cpus: false,
            stall: None,
        }
    }

    /// Holds `rank` back before `iteration` when it is the stalled one.
    fn stall(&self, rank: i32, iteration: usize) {
        if let Some((stalled, at, how_long)) = self.stall {
            if stalled == rank && at == iteration {
                std::thread::sleep(how_long);
            }
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

    /// Paced: sleeps until `rank`'s deadline for `iteration`, plus its jitter and its
    /// lateness. The first iteration's deadline is the job's common start `start_ns`; a
    /// later one's comes one interval after the previous iteration's collectives met
    /// (`met_ns`, when their last rank arrived: the same on every rank), as an application
    /// that computes for that long after each step; without collectives (`met_ns` 0),
    /// `start_ns` + `iteration` intervals; a deadline already past is now. Times are host
    /// CLOCK_MONOTONIC ns. With `cpus`, the thread moves to one of them, drawn at random,
    /// before it sleeps.
    ///
    /// Gives the time it slept until (None unpaced).
    fn pace(
        &self,
        start_ns: u64,
        met_ns: u64,
        rank: i32,
        iteration: usize,
        cpus: &[usize],
    ) -> Option<u64> {
        let interval = self.interval?;
        let interval = interval.as_nanos() as u64;
        let deadline = match (iteration, met_ns) {
            (0, _) => start_ns,
            (_, 0) => start_ns + interval * iteration as u64,
            _ => met_ns + interval,
        };
        let (jitter, cpu) = self.draw(rank, iteration, cpus.len());
        if let Some(&cpu) = cpus.get(cpu) {
            let _ = pin_to(cpu);
        }
        // A rank behind schedule (its previous step ended after the deadline) calls as
        // soon as it can, but its jitter and lateness still come on top.
        let until = deadline.max(host_ns()) + jitter + self.lateness(rank).as_nanos() as u64;
        sleep_until(until);
        Some(until)
    }

    /// `rank`'s jitter (ns) and CPU (an index below `cpus`) for `iteration`: drawn from
    /// the seed, independently per rank and iteration.
    fn draw(&self, rank: i32, iteration: usize, cpus: usize) -> (u64, usize) {
        let mut rng = Rng::new(mix(self.seed ^ mix(rank as u64 ^ mix(iteration as u64))));
        let jitter = rng.below(self.jitter.as_nanos() as u64 + 1);
        (jitter, rng.below(cpus as u64) as usize)
    }
}

/// The time slice a paced rank's thread asks the scheduler for: short, so that when it
/// wakes it preempts the current task of its CPU instead of waiting for that one's slice
/// (of about 3 ms) to end.
const PACED_SLICE: Duration = Duration::from_micros(100);

/// Asks Linux's fair scheduler (EEVDF, 6.12 and later: `sched_attr.sched_runtime` of a
/// SCHED_OTHER thread is its slice) for [`PACED_SLICE`] for the calling thread. No
/// privilege needed; earlier kernels accept it and ignore it.
fn request_short_slice() -> std::io::Result<()> {
    /// `struct sched_attr` of sched_setattr(2), its first version (48 bytes).
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }
    // SAFETY: getpriority reads the calling thread's nice value (which sched_setattr sets
    // as well: it is kept).
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice,
        priority: 0,
        runtime: PACED_SLICE.as_nanos() as u64,
        deadline: 0,
        period: 0,
    };
    // SAFETY: pid 0 is the calling thread; `attr` is a valid sched_attr of `size` bytes.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The CPUs the calling thread may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity fills it for the
    // calling thread (pid 0) and CPU_ISSET reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect()
    }
}

/// Restricts the calling thread to `cpu`.
fn pin_to(cpu: usize) -> std::io::Result<()> {
    // SAFETY: as in `allowed_cpus`; CPU_SET writes inside the set (cpu < CPU_SETSIZE is
    // checked by the caller's list).
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// SplitMix64's finalizer: nearby inputs give unrelated outputs.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
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
        "held-group" => per_rank(nccl, params, "held-group", |comm, p, i| {
            p.delay(comm.rank());
            nccl::group_start();
            comm.all_reduce(p.size(i) / 4, DataType::Float32);
            // The application does other work before it ends the group.
            std::thread::sleep(GROUP_HOLD);
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
        "mpi-app" => mpi_app(nccl, params),
        "pipeline" => pipeline(nccl, params),
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
    // Paced: how long after its deadline each call came (ns).
    let delays = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for &rank in &params.local_ranks {
            let (barrier, body, proposal, delays) = (&barrier, &body, &proposal, &delays);
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
                        // Called at its deadline, the rank takes the CPU from other
                        // processes' work, as a rank on its own cores would find it free.
                        let _ = request_short_slice();
                        let mine = *proposal
                            .get_or_init(|| host_ns() + PACED_START_MARGIN.as_nanos() as u64);
                        nccl.latest_across_processes(rank, mine)
                    }
                    None => 0,
                };
                let cpus = match params.interval.is_some() && params.shuffle_cpus {
                    true => allowed_cpus(),
                    false => Vec::new(),
                };
                let mut late = Vec::new();
                for iteration in 0..params.iterations {
                    if let Some(until) =
                        params.pace(start, comm.last_met_ns(), rank, iteration, &cpus)
                    {
                        late.push(host_ns().saturating_sub(until));
                    }
                    params.stall(rank, iteration);
                    body(&comm, params, iteration);
                    // The application waits for its step's communication, as training
                    // loops do; otherwise a late rank falls further behind every step.
                    comm.synchronize();
                }
                barrier.wait();
                comm.destroy();
                delays
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(late);
            });
        }
    });
    let delays = delays.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Some(report) = paced_report(name, delays) {
        eprintln!("{report}");
    }
}

/// What the host's scheduling did to a paced run, from how long after their deadlines
/// (ns) its calls came: `nccl-sim: paced NAME: N calls, D us after their deadline on
/// median, P us at the 90th percentile`. None for an unpaced run.
fn paced_report(name: &str, mut delays: Vec<u64>) -> Option<String> {
    if delays.is_empty() {
        return None;
    }
    delays.sort_unstable();
    let at = |q: f64| delays[((delays.len() - 1) as f64 * q).round() as usize] as f64 / 1e3;
    Some(format!(
        "nccl-sim: paced {name}: {} calls, {:.0} us after their deadline on median, {:.0} us \
         at the 90th percentile",
        delays.len(),
        at(0.5),
        at(0.9)
    ))
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

/// Pipeline stages, as pipeline parallelism across nodes communicates: a two-rank
/// communicator per pair of neighbouring ranks, `stage R-R+1`, and no communicator of all
/// ranks. Every iteration, each rank runs an AllReduce on its communicator towards rank 0,
/// then on the one away from it, waiting for each.
fn pipeline(nccl: &Arc<Nccl>, params: &Params) {
    let barrier = Barrier::new(params.local_ranks.len());
    std::thread::scope(|scope| {
        for &rank in &params.local_ranks {
            let barrier = &barrier;
            scope.spawn(move || {
                let stage = |first: i32| {
                    let mut options = CommOptions::new(
                        params.comm_hash ^ (0x919e_0000 + first as u64),
                        rank - first,
                        2,
                    );
                    options.name = Some(format!("stage {first}-{}", first + 1));
                    nccl.comm_init(options)
                };
                let comms: Vec<Comm> = [rank - 1, rank]
                    .into_iter()
                    .filter(|&first| first >= 0 && first + 1 < params.ranks)
                    .map(stage)
                    .collect();
                barrier.wait();
                for iteration in 0..params.iterations {
                    for comm in &comms {
                        comm.all_reduce(params.size(iteration) / 4, DataType::Float32);
                        comm.synchronize();
                    }
                }
                barrier.wait();
                for comm in comms {
                    comm.destroy();
                }
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

/// Element counts of the MPI+NCCL test program (`tests/c/mpi_nccl_app.c`), whose NCCL
/// calls [`mpi_app`] makes.
pub mod mpi_app_counts {
    pub const REDUCE: usize = 16384;
    pub const GATHER: usize = 256;
    pub const HALF: usize = 1024;
    pub const RING: usize = 4096;
}

/// The NCCL calls of the test program of the CPU-only libnccl, rank by rank: `iterations`
/// AllReduce of floats on the world communicator, one AllGather of ints, a split by parity
/// (a new communicator, as ncclCommSplit without shared resources makes) with one
/// AllReduce of ints, a send to the next rank and a receive from the previous one in a
/// group, then the half and the world destroyed. The communicators are unnamed, as
/// `ncclCommInitRank` makes them.
fn mpi_app(nccl: &Arc<Nccl>, params: &Params) {
    use mpi_app_counts::*;
    let barrier = Barrier::new(params.local_ranks.len());
    std::thread::scope(|scope| {
        for &rank in &params.local_ranks {
            let barrier = &barrier;
            scope.spawn(move || {
                let n = params.ranks;
                let world = nccl.comm_init(CommOptions::new(params.comm_hash, rank, n));
                barrier.wait();
                for _ in 0..params.iterations {
                    world.all_reduce(REDUCE, DataType::Float32);
                }
                world.all_gather(GATHER, DataType::Int32);
                let color = rank % 2;
                let half = nccl.comm_init(CommOptions::new(
                    params.comm_hash ^ (0x5b11_7000 + color as u64),
                    rank / 2,
                    (n + 1 - color) / 2,
                ));
                half.all_reduce(HALF, DataType::Int32);
                nccl::group_start();
                world.send(RING, DataType::Float32, (rank + 1) % n);
                world.recv(RING, DataType::Float32, (rank + n - 1) % n);
                nccl::group_end();
                half.destroy();
                world.destroy();
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_is_drawn_afresh_per_seed_rank_and_iteration() {
        let mut params = Params::single_process(2, 1);
        params.jitter = Duration::from_micros(200);
        let draws = |p: &Params, rank: i32| -> Vec<u64> {
            (0..400).map(|i| p.draw(rank, i, 2).0).collect()
        };
        let (zero, one) = (draws(&params, 0), draws(&params, 1));
        assert!(zero.iter().chain(&one).all(|&j| j <= 200_000));
        // The ranks' jitter has no offset between them: mean difference near 0 (its
        // standard error is 8 µs).
        let mean = zero
            .iter()
            .zip(&one)
            .map(|(a, b)| *a as f64 - *b as f64)
            .sum::<f64>()
            / 400.0;
        assert!(mean.abs() < 30_000.0, "{mean}");
        // Another seed draws other values, and both CPUs are drawn.
        params.seed = 2;
        let other = draws(&params, 0);
        let same = zero.iter().zip(&other).filter(|(a, b)| a == b).count();
        assert!(same < 4, "{same} of 400 draws equal");
        let cpus: std::collections::HashSet<usize> =
            (0..100).map(|i| params.draw(0, i, 2).1).collect();
        assert_eq!(cpus.len(), 2);
    }

    #[test]
    fn the_paced_report_gives_the_median_and_90th_percentile_delay() {
        assert_eq!(paced_report("single", Vec::new()), None);
        let delays = (1..=11).rev().map(|us| us * 1000).collect();
        assert_eq!(
            paced_report("single", delays).unwrap(),
            "nccl-sim: paced single: 11 calls, 6 us after their deadline on median, 10 us \
             at the 90th percentile"
        );
    }

    #[test]
    fn a_paced_thread_gets_a_short_slice_and_the_cpu_it_is_moved_to() {
        std::thread::spawn(|| {
            request_short_slice().unwrap();
            // sched_getattr(2): the slice is `sched_runtime`, at byte 24.
            let mut attr = [0u8; 56];
            // SAFETY: pid 0 is this thread; `attr` holds `attr.len()` bytes.
            let rc = unsafe {
                libc::syscall(libc::SYS_sched_getattr, 0, attr.as_mut_ptr(), attr.len(), 0)
            };
            assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
            let runtime = u64::from_ne_bytes(attr[24..32].try_into().unwrap());
            // Kernels before 6.12 report no slice (0); later ones their base slice, about
            // 1-3 ms, when the request did not take.
            assert!(
                runtime == PACED_SLICE.as_nanos() as u64 || runtime == 0,
                "{runtime} ns"
            );
            let cpus = allowed_cpus();
            let last = *cpus.last().unwrap();
            pin_to(last).unwrap();
            assert_eq!(allowed_cpus(), [last]);
        })
        .join()
        .unwrap();
    }
}
