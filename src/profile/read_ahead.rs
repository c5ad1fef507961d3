//! Asks the kernel for a trace's location files ahead of the reader, so that a trace on a
//! cold disk or a parallel file system is read with many requests in flight instead of
//! one small file after another.
//!
//! OTF2's reader opens a location's event and definition files when it reaches the
//! location and reads them synchronously: with the files out of the page cache every
//! location waits for its own disk round trips, and a merged trace of 16 384 processes has
//! 442 368 of them. A few threads here open the files of the next locations, ask for their
//! first megabyte (`POSIX_FADV_WILLNEED` starts the reads and returns), and close them:
//! the reader then finds them in memory. It is advice only: a file that cannot be opened
//! is left to the reader, which says why.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Locations asked for ahead of the one being read: with each location's files asked for
/// up to [`BYTES_PER_FILE`], at most 512 MiB in flight, and a few megabytes in practice.
const LOCATIONS_AHEAD: usize = 256;
/// Bytes of each file asked for; the reader's own read-ahead takes over in longer files.
const BYTES_PER_FILE: libc::off_t = 1 << 20;
/// Threads opening files: opening a file whose inode is not in memory waits for the disk,
/// so one thread alone would again have one request in flight.
const THREADS: usize = 4;
/// How long a thread that is [`LOCATIONS_AHEAD`] ahead waits before it looks again.
const AHEAD_PAUSE: Duration = Duration::from_micros(500);

/// What the reader and the threads share.
struct Shared {
    /// The directory of the archive's location files (`traces/` beside `traces.otf2`).
    directory: PathBuf,
    locations: Vec<u64>,
    /// The index in `locations` of the location being read.
    reading: AtomicUsize,
    /// The index of the next location a thread takes.
    next: AtomicUsize,
    stop: AtomicBool,
}

/// Threads reading ahead of a reader of `locations`; they stop when it is dropped.
pub(crate) struct ReadAhead {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl ReadAhead {
    /// Starts reading ahead the files of `locations` (in the order they will be read) of the
    /// archive whose anchor file is `anchor`. A single location is read without help.
    pub(crate) fn start(anchor: &Path, locations: &[u64]) -> ReadAhead {
        let shared = Arc::new(Shared {
            directory: anchor.with_extension(""),
            locations: locations.to_vec(),
            reading: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let threads = if locations.len() < 2 {
            Vec::new()
        } else {
            (0..THREADS)
                .filter_map(|_| {
                    let shared = Arc::clone(&shared);
                    std::thread::Builder::new()
                        .name("read-ahead".into())
                        .spawn(move || ask_ahead(&shared))
                        .ok()
                })
                .collect()
        };
        ReadAhead { shared, threads }
    }

    /// The reader has reached `locations[index]`.
    pub(crate) fn reading(&self, index: usize) {
        self.shared.reading.store(index, Ordering::Relaxed);
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            drop(thread.join());
        }
    }
}

/// One thread: takes the next location not yet taken, waits until it is no more than
/// [`LOCATIONS_AHEAD`] ahead of the reader, and asks for its files.
fn ask_ahead(shared: &Shared) {
    loop {
        let index = shared.next.fetch_add(1, Ordering::Relaxed);
        let Some(&location) = shared.locations.get(index) else {
            return;
        };
        while index >= shared.reading.load(Ordering::Relaxed) + LOCATIONS_AHEAD {
            if shared.stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(AHEAD_PAUSE);
        }
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        for extension in ["evt", "def"] {
            ask_for(&shared.directory.join(format!("{location}.{extension}")));
        }
    }
}

/// Starts reading the first [`BYTES_PER_FILE`] of `path` into the page cache.
fn ask_for(path: &Path) {
    let Ok(file) = File::open(path) else {
        return;
    };
    // SAFETY: advice on a descriptor open for the whole call; it touches no memory of ours.
    unsafe {
        libc::posix_fadvise(
            file.as_raw_fd(),
            0,
            BYTES_PER_FILE,
            libc::POSIX_FADV_WILLNEED,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The threads ask for every location's files, no further ahead of the reader than
    /// allowed, and stop when the reader is done.
    #[test]
    fn the_threads_stay_within_their_distance_of_the_reader_and_stop_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let traces = dir.path().join("traces");
        std::fs::create_dir(&traces).unwrap();
        let locations: Vec<u64> = (0..(3 * LOCATIONS_AHEAD as u64)).collect();
        let ahead = ReadAhead::start(&dir.path().join("traces.otf2"), &locations);
        assert_eq!(ahead.shared.directory, traces);
        // Missing files are left to the reader; the threads go on to the next ones.
        let waited_for = || {
            for _ in 0..2000 {
                std::thread::sleep(Duration::from_millis(1));
                if ahead.shared.next.load(Ordering::Relaxed) >= LOCATIONS_AHEAD + THREADS {
                    break;
                }
            }
            ahead.shared.next.load(Ordering::Relaxed)
        };
        // Each thread takes one location beyond the distance and waits with it.
        assert_eq!(waited_for(), LOCATIONS_AHEAD + THREADS);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(ahead.shared.next.load(Ordering::Relaxed), LOCATIONS_AHEAD + THREADS);
        ahead.reading(LOCATIONS_AHEAD);
        for _ in 0..2000 {
            std::thread::sleep(Duration::from_millis(1));
            if ahead.shared.next.load(Ordering::Relaxed) >= 2 * LOCATIONS_AHEAD + THREADS {
                break;
            }
        }
        assert_eq!(
            ahead.shared.next.load(Ordering::Relaxed),
            2 * LOCATIONS_AHEAD + THREADS
        );
        let started = std::time::Instant::now();
        drop(ahead);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
