//! Simulated time: how long operations take (a latency/bandwidth model per algorithm,
//! protocol and size, with noise), the GPU clock, and the ground truth a run can write for
//! accuracy checks.

use crate::names::{Algo, Func, Proto};
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

/// A small deterministic random source (xorshift64*), seeded per run.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

/// How long a collective or p2p operation takes on the simulated GPUs and network.
#[derive(Clone, Copy, Debug)]
pub struct TimeModel {
    /// Base latency per operation.
    pub latency_ns: f64,
    /// Bandwidth per rank in bytes per nanosecond (GB/s).
    pub bandwidth: f64,
    /// Relative noise (0.1 = ±10 %).
    pub noise: f64,
    /// Divides every duration: 1.0 is "real time", larger runs faster.
    pub speedup: f64,
}

impl Default for TimeModel {
    fn default() -> Self {
        TimeModel {
            latency_ns: 8_000.0,
            bandwidth: 20.0,
            noise: 0.05,
            speedup: 1.0,
        }
    }
}

impl TimeModel {
    /// Simulated GPU time of one operation moving `bytes` per rank on `n_ranks` ranks.
    pub fn duration(
        &self,
        func: Func,
        algo: Algo,
        proto: Proto,
        bytes: usize,
        n_ranks: i32,
        rng: &mut Rng,
    ) -> Duration {
        let n = f64::from(n_ranks.max(1));
        // Bus-bandwidth factors of NCCL's performance tests.
        let traffic = bytes as f64
            * match func {
                Func::AllReduce => 2.0 * (n - 1.0) / n,
                Func::AllGather | Func::ReduceScatter | Func::AlltoAll => (n - 1.0) / n,
                _ => 1.0,
            };
        let (latency, efficiency) = match proto {
            Proto::Ll => (0.5, 0.25),
            Proto::Ll128 => (0.8, 0.9),
            Proto::Simple => (1.0, 1.0),
        };
        let algo_latency = match algo {
            Algo::Tree => 1.0 + n.log2().max(1.0) * 0.3,
            Algo::Ring => 1.0 + (n - 1.0) * 0.2,
            _ => 1.0,
        };
        let ns = self.latency_ns * latency * algo_latency
            + traffic / (self.bandwidth * efficiency).max(1e-6);
        let noisy = ns * (1.0 + self.noise * (2.0 * rng.unit() - 1.0));
        Duration::from_nanos((noisy / self.speedup.max(1e-3)).max(1.0) as u64)
    }
}

/// The simulated GPU's global timer, in ns: its host's clock plus an offset, running
/// faster than the host's by `drift_ppb` parts per billion from `epoch_ns` (host time) on,
/// as a real GPU's timer drifts against the host's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct GpuClock {
    pub offset_ns: i64,
    pub drift_ppb: i64,
    pub epoch_ns: u64,
}

impl GpuClock {
    pub fn from_host(&self, host_ns: u64) -> u64 {
        let drifted =
            (host_ns as i128 - self.epoch_ns as i128) * self.drift_ppb as i128 / 1_000_000_000;
        (host_ns as i64)
            .wrapping_add(self.offset_ns)
            .wrapping_add(drifted as i64) as u64
    }
}

/// Host CLOCK_MONOTONIC in nanoseconds (the plugin's clock too).
pub fn host_ns() -> u64 {
    nccl_scorep_common::clock::now_ns()
}

/// The last stretch before a simulated moment that [`sleep_until`] spins instead of
/// sleeping: a thread woken from sleep runs microseconds late, while NCCL's threads poll
/// the GPU and the network and notice within a fraction of one.
const SPIN_NS: u64 = 20_000;

/// Waits until host time `until_ns`: sleeps, then polls for the last [`SPIN_NS`].
pub fn sleep_until(until_ns: u64) {
    let now = host_ns();
    if until_ns > now + SPIN_NS {
        std::thread::sleep(Duration::from_nanos(until_ns - now - SPIN_NS));
    }
    while host_ns() < until_ns {
        std::hint::spin_loop();
    }
}

/// What really happened to one operation on one rank, in host nanoseconds.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TruthRecord {
    pub comm_hash: String,
    pub rank: i32,
    pub func: String,
    /// `seq` of the Coll (per comm and function); for p2p the call's index.
    pub seq: u64,
    pub bytes: u64,
    /// The API call (CollApi/P2pApi start → stop).
    pub enqueue_start_ns: u64,
    pub enqueue_stop_ns: u64,
    /// When the simulated GPU ran the kernel.
    pub gpu_start_ns: u64,
    pub gpu_stop_ns: u64,
    /// When the host saw it complete (last ProxyOp or KernelCh stop).
    pub completion_ns: u64,
    /// When the simulator had told the plugin (its stops returned). A trace's host-side
    /// end lies between the two: a simulator thread preempted after it saw the completion
    /// and before it called the stops widens the window, and the trace cannot be earlier.
    pub reported_ns: u64,
}

/// Collects ground truth; written as JSON lines at the end of a run.
#[derive(Default)]
pub struct GroundTruth {
    records: Mutex<Vec<TruthRecord>>,
}

impl GroundTruth {
    pub fn push(&self, record: TruthRecord) {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record);
    }

    pub fn records(&self) -> Vec<TruthRecord> {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
        for record in self.records() {
            serde_json::to_writer(&mut out, &record)?;
            out.write_all(b"\n")?;
        }
        out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bigger_messages_take_longer_and_noise_stays_bounded() {
        let model = TimeModel::default();
        let mut rng = Rng::new(7);
        let small = model.duration(
            Func::AllReduce,
            Algo::Ring,
            Proto::Simple,
            1 << 10,
            8,
            &mut rng,
        );
        let large = model.duration(
            Func::AllReduce,
            Algo::Ring,
            Proto::Simple,
            1 << 26,
            8,
            &mut rng,
        );
        assert!(large > small * 10, "{small:?} {large:?}");
        for _ in 0..100 {
            let d = model.duration(Func::Send, Algo::Ring, Proto::Simple, 1 << 20, 2, &mut rng);
            let nominal = 8_000.0 * 1.2 + (1 << 20) as f64 / 20.0;
            let ratio = d.as_nanos() as f64 / nominal;
            assert!((0.94..=1.06).contains(&ratio), "{ratio}");
        }
        assert_eq!(Rng::new(3).next_u64(), Rng::new(3).next_u64(), "seeded");
    }
}
