//! What the hot path, the collector and Score-P mode share: the configuration, where the
//! output goes, the handle slab, the communicator contexts, the counters and the registry
//! of the threads' rings. It sits below all three, so that none of them depends on another.

use crate::clock;
use crate::config::{ClockChoice, Config};
use crate::context::Contexts;
use crate::counters::Counters;
use crate::handle::Slab;
use crate::ring::{self, RingConsumer, RingProducer};
use nccl_scorep_common::RunDir;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// The smallest ring a thread gets when the memory limit leaves little room.
const MIN_RING_BYTES: usize = 16 << 10;

pub struct Shared {
    pub config: Config,
    pub pid: i32,
    /// The host name in the trace and in file names.
    pub host: String,
    /// Where this process writes: the output directory, or in Score-P mode the sidecar
    /// directory in Score-P's experiment directory.
    pub run_dir: RunDir,
    pub slab: Slab,
    pub contexts: Contexts,
    pub counters: Counters,
    /// Rings not currently held by a running collector.
    idle_rings: Mutex<Vec<RingConsumer>>,
    next_thread: AtomicU32,
    /// The configured ring size of a thread (a ring gets less when the memory limit's
    /// room is short).
    ring_bytes: usize,
}

impl Shared {
    /// The state for a process with `config`, writing to `run_dir` on `host`. Selects the
    /// clock the hot path stamps records with.
    pub fn new(config: Config, run_dir: RunDir, host: String) -> Shared {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        // The salt keeps our ids apart from those of other processes running this plugin
        // (their handles reach us as PXN parents and contexts).
        let mixed = process_salt(pid);
        let salt = (mixed >> 24) as u8;
        let context_salt = (mixed >> 32) as u32;
        let shards = std::thread::available_parallelism().map_or(8, |n| n.get() * 2);
        clock::select(match config.clock {
            ClockChoice::Tsc => clock::Source::Tsc,
            ClockChoice::Monotonic => clock::Source::Monotonic,
            // The host process's clock: a replay's recorded times, a simulated host's.
            ClockChoice::Auto if clock::clock_offered() => clock::Source::Offered,
            ClockChoice::Auto if clock::tsc_is_reliable() => clock::Source::Tsc,
            ClockChoice::Auto => clock::Source::Monotonic,
        });
        // Set before the slab and rings are made, so that they count against the limit.
        crate::memory::BUDGET.set_limit(config.memory_limit);
        let slab = Slab::new(salt, config.max_open_events, shards);
        let slab = if config.chain.is_some() {
            slab.with_chain_slots()
        } else {
            slab
        };
        Shared {
            pid,
            host,
            run_dir,
            slab,
            contexts: Contexts::new(context_salt),
            counters: Counters::default(),
            idle_rings: Mutex::new(Vec::new()),
            next_thread: AtomicU32::new(0),
            ring_bytes: config.buffer_bytes,
            config,
        }
    }

    /// A ring for the calling thread, which the collector adopts at its next pass.
    #[cold]
    pub fn register_thread(&self) -> RingProducer {
        let index = self.next_thread.fetch_add(1, Ordering::Relaxed);
        let bytes = crate::memory::BUDGET.take_ring(self.ring_bytes, MIN_RING_BYTES);
        let (producer, consumer) = ring::ring(bytes, index);
        self.idle_rings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(consumer);
        producer
    }

    /// Rings registered since the collector last looked (and all of them at its start).
    pub fn take_new_rings(&self) -> Vec<RingConsumer> {
        std::mem::take(&mut *self.idle_rings.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Gives rings back when a collector stops, for the next init/finalize cycle.
    pub fn return_rings(&self, rings: Vec<RingConsumer>) {
        self.idle_rings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(rings);
    }
}

/// 64 random bits for this process's salts, from the kernel's random source. Two
/// processes of one job start together, with consecutive pids: a salt made of the pid and
/// the start time alone (`pid ^ time`) can come out equal for both, and each then takes
/// the other's contexts for its own (a PXN test saw it in about 4 runs of 100). Without the
/// random source (a kernel before 3.17, or a seccomp filter), see [`fallback_salt`].
fn process_salt(pid: i32) -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom writes at most `bytes.len()` bytes into the buffer it is given,
    // which lives on this stack; GRND_NONBLOCK makes it fail rather than wait.
    let got =
        unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), libc::GRND_NONBLOCK) };
    if got == bytes.len() as isize {
        return u64::from_ne_bytes(bytes);
    }
    fallback_salt(pid, clock::realtime_ns(), &bytes as *const _ as u64)
}

/// The pid, the time and an address on the stack (randomised per process), each mixed on
/// its own before they are combined, so that no two of them can cancel out.
fn fallback_salt(pid: i32, time_ns: u64, stack_address: u64) -> u64 {
    split_mix(pid as u64) ^ split_mix(time_ns).rotate_left(21) ^ split_mix(stack_address)
}

/// SplitMix64's finaliser: every input bit moves about half of the output bits.
fn split_mix(value: u64) -> u64 {
    let mut z = value.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod salt_tests {
    use super::*;

    #[test]
    fn two_processes_get_different_salts() {
        assert_ne!(
            process_salt(100),
            process_salt(100),
            "random, not made of the pid"
        );
        // The values that made `pid ^ time` equal: consecutive pids, times one apart.
        let (pid, time) = (14_196, 1_000_000_u64 << 10);
        let old = |pid: i32, time: u64| pid as u64 ^ time >> 10;
        assert_eq!(old(pid, time), old(pid + 1, time ^ (1 << 10)));
        assert_ne!(
            fallback_salt(pid, time, 0x7ffd_0000),
            fallback_salt(pid + 1, time ^ (1 << 10), 0x7ffd_0000)
        );
    }
}
