//! Asks the kernel for files ahead of a reader, so that files out of the page cache (a
//! cold disk, a parallel file system) are read with many requests in flight instead of one
//! small file after another.
//!
//! OTF2's reader opens a location's event and definition files when it reaches the
//! location, and the merge a part's files when it reaches the part, and both read them
//! synchronously: with the files out of the page cache each waits for its own disk round
//! trips, and a trace of 16 384 processes has 442 368 locations. A few threads here take
//! the next items of the reader's list, open their files, ask for their first megabyte
//! ([`ask_for`]: `POSIX_FADV_WILLNEED` starts the reads and returns) and close them: the
//! reader then finds them in memory. It is advice only: a file that cannot be opened is
//! left to the reader, which says why.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Items asked for ahead of the one being read: with a location's two files asked for up
/// to [`BYTES_PER_FILE`] each, at most 512 MiB in flight, and a few megabytes in practice.
const ITEMS_AHEAD: usize = 256;
/// Bytes of each file asked for; the reader's own read-ahead takes over in longer files.
const BYTES_PER_FILE: libc::off_t = 1 << 20;
/// Threads asking: opening a file whose inode is not in memory waits for the disk, so one
/// thread alone would again have one request in flight.
const THREADS: usize = 4;
/// How long a thread that is [`ITEMS_AHEAD`] ahead waits before it looks again.
const AHEAD_PAUSE: Duration = Duration::from_micros(500);

/// What the reader and the threads share.
struct Shared<T> {
    items: Vec<T>,
    /// What a thread does for an item: open its files and [`ask_for`] them.
    ask: Box<dyn Fn(&T) + Send + Sync>,
    /// The index in `items` of the item being read.
    reading: AtomicUsize,
    /// The index of the next item a thread takes.
    next: AtomicUsize,
    stop: AtomicBool,
}

/// Threads reading ahead of a reader of `items`; they stop when it is dropped.
pub struct ReadAhead<T> {
    shared: Arc<Shared<T>>,
    threads: Vec<JoinHandle<()>>,
}

impl<T: Send + Sync + 'static> ReadAhead<T> {
    /// Starts asking for the files of `items`, in the order they will be read, with `ask`.
    /// A single item is read without help.
    pub fn start(items: Vec<T>, ask: impl Fn(&T) + Send + Sync + 'static) -> ReadAhead<T> {
        let helped = items.len() > 1;
        let shared = Arc::new(Shared {
            items,
            ask: Box::new(ask),
            reading: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let threads = if helped {
            (0..THREADS)
                .filter_map(|_| {
                    let shared = Arc::clone(&shared);
                    std::thread::Builder::new()
                        .name("read-ahead".into())
                        .spawn(move || ask_ahead(&shared))
                        .ok()
                })
                .collect()
        } else {
            Vec::new()
        };
        ReadAhead { shared, threads }
    }

    /// The reader has reached `items[index]`.
    pub fn reading(&self, index: usize) {
        self.shared.reading.store(index, Ordering::Relaxed);
    }
}

impl<T> Drop for ReadAhead<T> {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            drop(thread.join());
        }
    }
}

/// One thread: takes the next item not yet taken, waits until it is no more than
/// [`ITEMS_AHEAD`] ahead of the reader, and asks for its files.
fn ask_ahead<T>(shared: &Shared<T>) {
    loop {
        let index = shared.next.fetch_add(1, Ordering::Relaxed);
        let Some(item) = shared.items.get(index) else {
            return;
        };
        while index >= shared.reading.load(Ordering::Relaxed) + ITEMS_AHEAD {
            if shared.stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(AHEAD_PAUSE);
        }
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        (shared.ask)(item);
    }
}

/// Starts reading the first [`BYTES_PER_FILE`] of `path` into the page cache; a file that
/// cannot be opened is passed over.
pub fn ask_for(path: &Path) {
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
    use std::sync::Mutex;

    /// The threads ask for every item in turn, no further ahead of the reader than
    /// allowed, and stop when the reader is done.
    #[test]
    fn the_threads_stay_within_their_distance_of_the_reader_and_stop_with_it() {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&asked);
        let ahead = ReadAhead::start((0..3 * ITEMS_AHEAD).collect(), move |&item: &usize| {
            record.lock().unwrap().push(item)
        });
        let asked_once_settled = |count: usize| {
            for _ in 0..5000 {
                if asked.lock().unwrap().len() >= count {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            // Long enough for a thread that went too far to have asked.
            std::thread::sleep(Duration::from_millis(20));
            let mut items = asked.lock().unwrap().clone();
            items.sort_unstable();
            items
        };
        assert_eq!(
            asked_once_settled(ITEMS_AHEAD),
            (0..ITEMS_AHEAD).collect::<Vec<_>>()
        );
        ahead.reading(ITEMS_AHEAD);
        assert_eq!(
            asked_once_settled(2 * ITEMS_AHEAD),
            (0..2 * ITEMS_AHEAD).collect::<Vec<_>>()
        );
        let started = std::time::Instant::now();
        drop(ahead);
        assert!(started.elapsed() < Duration::from_secs(5));
        // The threads waiting beyond the distance stopped without asking.
        assert_eq!(asked.lock().unwrap().len(), 2 * ITEMS_AHEAD);
    }
}
