//! Where the ranks of one collective meet across processes: a small table in shared memory
//! (a file under `/dev/shm`, or `NCCL_SIM_SHM_DIR`), so that, as on real GPUs, no rank's
//! collective completes before the last rank arrived.
//!
//! The table has [`SLOTS`] rows, one per collective instance (`seq × 16 + function`, so
//! collectives in flight together never share a row); a row holds, per rank, a tag naming
//! the instance and the rank's arrival time. A rank writes its arrival, then polls until
//! every rank's tag names the same instance. Rows are reused 256 collectives of a function
//! later, so ranks may drift that far apart.

use crate::pxn::Mapping;
use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Collective instances the table can hold at once.
pub const SLOTS: usize = 4096;

/// The instance in which the ranks agree on a value (the paced start): function 15, which
/// no collective has, so its row is never a collective's.
pub const AGREEMENT: u64 = 15 << 48;

/// The row of an instance `function << 48 | seq`: consecutive collectives, and the
/// different functions of one `seq`, get different rows.
fn row_of(instance: u64) -> usize {
    let (function, seq) = (instance >> 48, instance & ((1 << 48) - 1));
    (seq.wrapping_mul(16).wrapping_add(function % 16) % SLOTS as u64) as usize
}

/// One rank's entry in a row: which instance, and when the rank arrived.
#[repr(C)]
struct Cell {
    tag: AtomicU64,
    arrival: AtomicU64,
}

/// A shared rendezvous table, mapped into this process.
pub struct SharedRendezvous {
    mapping: Mapping,
    n_ranks: usize,
    path: PathBuf,
}

impl SharedRendezvous {
    /// Opens (creating if needed) the table of communicator `key` with `n_ranks` ranks in
    /// `dir`. Every process of the job opens the same file.
    pub fn open(dir: &Path, key: u64, n_ranks: usize) -> io::Result<SharedRendezvous> {
        let path = dir.join(format!("nccl-sim-{key:016x}.rendezvous"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        let len = SLOTS * n_ranks.max(1) * std::mem::size_of::<Cell>();
        // Growing to the same size from every process is harmless; new bytes are zero.
        file.set_len(len as u64)?;
        let mapping = Mapping::map(&file, len)?;
        Ok(SharedRendezvous {
            mapping,
            n_ranks: n_ranks.max(1),
            path,
        })
    }

    fn cell(&self, row: usize, rank: usize) -> &Cell {
        let index = row * self.n_ranks + rank;
        // SAFETY: index < SLOTS * n_ranks cells, inside the (page-aligned) mapping, which
        // lives as long as `self`; cells are only used through atomics.
        unsafe { &*self.mapping.as_ptr().cast::<Cell>().add(index) }
    }

    /// Registers `rank`'s arrival at instance `instance` and waits (at most `patience`)
    /// for every rank's; returns the latest arrival seen.
    pub fn meet(&self, instance: u64, rank: usize, arrival: u64, patience: Duration) -> u64 {
        let row = row_of(instance);
        // 0 means an empty cell: tags start at 1.
        let tag = instance | 1 << 63;
        let mine = self.cell(row, rank.min(self.n_ranks - 1));
        mine.arrival.store(arrival, Ordering::Relaxed);
        mine.tag.store(tag, Ordering::Release);
        let deadline = Instant::now() + patience;
        loop {
            let mut latest = 0;
            let mut all = true;
            for other in 0..self.n_ranks {
                let cell = self.cell(row, other);
                if cell.tag.load(Ordering::Acquire) == tag {
                    latest = latest.max(cell.arrival.load(Ordering::Relaxed));
                } else {
                    all = false;
                }
            }
            if all || Instant::now() >= deadline {
                return latest.max(arrival);
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_meet_and_see_the_latest_arrival() {
        let dir = tempfile::tempdir().unwrap();
        let tables: Vec<SharedRendezvous> = (0..3)
            .map(|_| SharedRendezvous::open(dir.path(), 42, 3).unwrap())
            .collect();
        let seen: Vec<u64> = std::thread::scope(|scope| {
            let handles: Vec<_> = tables
                .iter()
                .enumerate()
                .map(|(rank, table)| {
                    scope.spawn(move || {
                        std::thread::sleep(Duration::from_millis(rank as u64 * 5));
                        table.meet(7, rank, 1_000 + rank as u64, Duration::from_secs(5))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(seen, [1_002, 1_002, 1_002]);
        // Instances in flight together never share a row.
        let rows: std::collections::HashSet<usize> = (0..200u64)
            .flat_map(|seq| (0..11u64).map(move |f| row_of(f << 48 | seq)))
            .collect();
        assert_eq!(rows.len(), 200 * 11);
        // Nor the agreement on a start: theirs never share its row.
        assert!(!rows.contains(&row_of(AGREEMENT)), "{}", row_of(AGREEMENT));
        let agreed: Vec<u64> = std::thread::scope(|scope| {
            let handles: Vec<_> = tables
                .iter()
                .enumerate()
                .map(|(rank, table)| {
                    scope.spawn(move || {
                        table.meet(AGREEMENT, rank, [30, 90, 60][rank], Duration::from_secs(5))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(agreed, [90, 90, 90]);
        // A rank alone gives up after its patience, with its own arrival.
        let alone = tables[0].meet(8, 0, 5, Duration::from_millis(10));
        assert_eq!(alone, 5);
    }
}
