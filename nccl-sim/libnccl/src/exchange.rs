//! How the ranks of one communicator hand each other their data: files in a directory of
//! shared memory (`/dev/shm`, or `NCCL_SIM_SHM_DIR`) named after the communicator, so that
//! ranks in different processes meet without any network or MPI.
//!
//! A collective is an all-gather of what each rank contributes: rank `r` writes
//! `c<seq>.r<r>` (to a temporary name, then renamed, so it appears whole) and reads every
//! rank's file of that `seq`. Each file starts with how many of its writer's collectives
//! were complete when it was written; once every rank's file of a collective says that
//! collective `m` was complete everywhere, nobody reads the files before `m` again and
//! their writers remove them. A send is a file `p<from>.<to>.<n>` that its receiver
//! removes after reading. At destroy every rank leaves a `bye.r<r>`; whoever then finds
//! every rank's removes the directory (the last to leave always does).

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// After this long waiting for peers, a waiting rank says on stderr whom it waits for
/// (NCCL itself waits forever; so does this library).
const WAIT_NOTICE: Duration = Duration::from_secs(30);

/// The directory of communicator `hash` in `base`.
pub fn comm_dir(base: &Path, hash: u64) -> PathBuf {
    base.join(format!("nccl-sim-libnccl-{hash:016x}"))
}

/// One rank's side of a communicator's exchange.
pub struct Exchange {
    dir: PathBuf,
    rank: usize,
    n_ranks: usize,
    /// The next collective's sequence number (the same order on every rank, as NCCL
    /// requires of collectives on one communicator).
    next_seq: u64,
    /// Collectives below this are complete here.
    completed: u64,
    /// Own collective files below this are removed.
    removed: u64,
    /// Sends posted to each peer, receives taken from each peer.
    sent: Vec<u64>,
    received: Vec<u64>,
}

/// A collective this rank has contributed to and not yet read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posted(u64);

impl Exchange {
    /// Joins (creating if needed) the exchange of communicator `hash` as `rank` of `n_ranks`.
    pub fn join(base: &Path, hash: u64, rank: usize, n_ranks: usize) -> io::Result<Exchange> {
        let dir = comm_dir(base, hash);
        std::fs::create_dir_all(&dir)?;
        Ok(Exchange {
            dir,
            rank,
            n_ranks,
            next_seq: 0,
            completed: 0,
            removed: 0,
            sent: vec![0; n_ranks],
            received: vec![0; n_ranks],
        })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn n_ranks(&self) -> usize {
        self.n_ranks
    }

    fn collective_file(&self, seq: u64, rank: usize) -> PathBuf {
        self.dir.join(format!("c{seq}.r{rank}"))
    }

    fn p2p_file(&self, from: usize, to: usize, n: u64) -> PathBuf {
        self.dir.join(format!("p{from}.{to}.{n}"))
    }

    /// Writes `path` whole: a temporary name first, then renamed.
    fn publish(&self, path: &Path, parts: &[&[u8]]) -> io::Result<()> {
        let name = path.file_name().expect("a file name").to_string_lossy();
        let temporary = self.dir.join(format!(".tmp.{name}"));
        std::fs::write(&temporary, parts.concat())?;
        std::fs::rename(&temporary, path)
    }

    /// Contributes `data` to the next collective.
    pub fn post(&mut self, data: &[u8]) -> io::Result<Posted> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let header = self.completed.to_le_bytes();
        self.publish(&self.collective_file(seq, self.rank), &[&header, data])?;
        Ok(Posted(seq))
    }

    /// Waits for every rank's contribution to `posted` and gives them, by rank. Collectives
    /// are completed in the order they were posted.
    pub fn complete(&mut self, posted: Posted) -> io::Result<Vec<Vec<u8>>> {
        let Posted(seq) = posted;
        let files: Vec<PathBuf> = (0..self.n_ranks)
            .map(|rank| self.collective_file(seq, rank))
            .collect();
        let mut contents = Vec::with_capacity(self.n_ranks);
        for (rank, file) in files.iter().enumerate() {
            let bytes = wait_read(file, || format!("collective {seq}: rank {rank}"))?;
            contents.push(bytes);
        }
        self.completed = self.completed.max(seq + 1);
        // Every rank had completed this many collectives when it wrote its part: nobody
        // reads our files below that again.
        let everywhere = contents
            .iter()
            .map(|bytes| header(bytes))
            .min()
            .unwrap_or(0);
        while self.removed < everywhere {
            let _ = std::fs::remove_file(self.collective_file(self.removed, self.rank));
            self.removed += 1;
        }
        Ok(contents.into_iter().map(|b| b[8..].to_vec()).collect())
    }

    /// Hands `data` to `peer` (never waits).
    pub fn send(&mut self, peer: usize, data: &[u8]) -> io::Result<()> {
        let n = self.sent[peer];
        self.sent[peer] += 1;
        self.publish(&self.p2p_file(self.rank, peer, n), &[data])
    }

    /// Waits for the next data `peer` sent here.
    pub fn recv(&mut self, peer: usize) -> io::Result<Vec<u8>> {
        let n = self.received[peer];
        self.received[peer] += 1;
        let file = self.p2p_file(peer, self.rank, n);
        let bytes = wait_read(&file, || format!("receive {n} from rank {peer}"))?;
        let _ = std::fs::remove_file(&file);
        Ok(bytes)
    }

    /// Leaves the exchange, never waiting: the last rank to leave removes the directory.
    pub fn leave(self) {
        let bye = |rank: usize| self.dir.join(format!("bye.r{rank}"));
        let _ = std::fs::write(bye(self.rank), b"");
        if (0..self.n_ranks).all(|rank| bye(rank).exists()) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The completed-collectives count at the head of a collective file.
fn header(bytes: &[u8]) -> u64 {
    bytes
        .get(..8)
        .and_then(|h| h.try_into().ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0)
}

/// Waits until `file` exists and reads it, saying on stderr what it waits for when that
/// takes long.
fn wait_read(file: &Path, what: impl Fn() -> String) -> io::Result<Vec<u8>> {
    let start = Instant::now();
    let mut next_notice = WAIT_NOTICE;
    let mut pause = Duration::from_micros(10);
    loop {
        match std::fs::read(file) {
            Ok(bytes) => return Ok(bytes),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        if start.elapsed() >= next_notice {
            eprintln!(
                "libnccl (nccl-sim): waiting {} s for {} ({})",
                start.elapsed().as_secs(),
                what(),
                file.display()
            );
            next_notice += WAIT_NOTICE;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_gather_each_others_data_and_old_files_are_removed() {
        let base = tempfile::tempdir().unwrap();
        let mut ranks: Vec<Exchange> = (0..3)
            .map(|r| Exchange::join(base.path(), 7, r, 3).unwrap())
            .collect();
        for round in 0..4u8 {
            let posted: Vec<Posted> = ranks
                .iter_mut()
                .enumerate()
                .map(|(r, x)| x.post(&[round, r as u8]).unwrap())
                .collect();
            for (x, p) in ranks.iter_mut().zip(posted) {
                let got = x.complete(p).unwrap();
                assert_eq!(got, vec![vec![round, 0], vec![round, 1], vec![round, 2]]);
            }
        }
        // Round 3's files say rounds 0-2 were complete everywhere: only round 3's remain.
        let mut left: Vec<String> = std::fs::read_dir(comm_dir(base.path(), 7))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["c3.r0", "c3.r1", "c3.r2"]);
        ranks[0].send(2, b"hello").unwrap();
        ranks[0].send(2, b"again").unwrap();
        assert_eq!(ranks[2].recv(0).unwrap(), b"hello");
        assert_eq!(ranks[2].recv(0).unwrap(), b"again");
        for rank in ranks {
            assert!(
                comm_dir(base.path(), 7).exists(),
                "removed before the last left"
            );
            rank.leave();
        }
        assert!(!comm_dir(base.path(), 7).exists());
    }
}
