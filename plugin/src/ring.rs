//! Per-thread rings: every NCCL thread that calls the plugin gets its own fixed-size
//! single-producer ring, registered once with the collector. Pushing is a copy and an
//! atomic store: no lock, no allocation.

use crate::event::Record;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::Duration;

/// How long a producer waiting for room sleeps at most before it looks again (a wake-up
/// the consumer sends can only be missed by this much).
const ROOM_WAIT: Duration = Duration::from_micros(500);

/// A producing thread that sleeps until its consumer has made room in its full ring
/// (`NCCL_SCOREP_ON_FULL=wait`): the CPU goes to the consumer instead of a spinning
/// thread. Both ends of a ring see it: the plugin's own rings and record mode's.
#[derive(Debug)]
pub struct RoomWait {
    thread: Thread,
    waiting: AtomicBool,
}

impl RoomWait {
    /// For the calling thread, the producer.
    pub fn for_this_thread() -> RoomWait {
        RoomWait {
            thread: std::thread::current(),
            waiting: AtomicBool::new(false),
        }
    }

    /// The producer: sleeps while `is_full()`, until the consumer has made room or a short
    /// while has passed.
    #[cold]
    pub fn wait(&self, is_full: impl FnOnce() -> bool) {
        self.waiting.store(true, Ordering::SeqCst);
        // Room made between the failed push and the flag going up sends no wake-up.
        if is_full() {
            std::thread::park_timeout(ROOM_WAIT);
        }
        self.waiting.store(false, Ordering::SeqCst);
    }

    /// The consumer made room: wakes the producer if it waits.
    pub fn room_made(&self) {
        if self.waiting.load(Ordering::SeqCst) {
            self.thread.unpark();
        }
    }

    /// Wakes the producer, waiting or not (the consumer stops: it is to look again).
    pub fn wake(&self) {
        self.thread.unpark();
    }
}

/// What the producer and the collector both see of a ring.
#[derive(Debug)]
pub struct RingShared {
    /// The ring's size, as taken from the memory limit.
    bytes: usize,
    /// Our index of the thread (0, 1, 2, … in order of first call).
    pub thread_index: u32,
    /// The OS thread id.
    pub os_tid: i32,
    /// Records dropped because the ring was full (the collector adds them to
    /// `ring_full`).
    pub dropped: DropCount,
    /// Start records among them: events lost (`lost_starts`).
    pub dropped_starts: DropCount,
    /// State records among them (`lost_states`).
    pub dropped_states: DropCount,
    /// Time (clock ticks) of the first and the last drop not yet reported.
    pub drop_first: AtomicU64,
    pub drop_last: AtomicU64,
    /// The producing thread, which may sleep until the collector makes room.
    room: RoomWait,
}

/// What a dropped record was: the three are counted apart, so that the trace says how
/// many events it lacks, and how many stops and states its events lack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    Start,
    Stop,
    State,
}

/// A count raised by the ring's producer and added now and then by the collector to a
/// process-wide counter.
#[derive(Debug, Default)]
pub struct DropCount {
    total: AtomicU64,
    counted: AtomicU64,
}

impl DropCount {
    fn add_one(&self) {
        self.total.fetch_add(1, Ordering::AcqRel);
    }

    /// Everything counted since the ring was made.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Acquire)
    }

    /// What was counted since the last call (the collector's share to add).
    pub fn take_new(&self) -> u64 {
        let now = self.total();
        let before = self.counted.swap(now, Ordering::AcqRel);
        now.saturating_sub(before)
    }
}

impl RingShared {
    /// Counts a dropped record of `what`; returns whether it is the first of a gap (the
    /// first since the collector last reported one).
    pub fn note_drop(&self, time: u64, what: Dropped) -> bool {
        // The collector swaps `drop_first` back to 0 when it reports a gap.
        let first = self
            .drop_first
            .compare_exchange(0, time, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok();
        self.drop_last.store(time, Ordering::Release);
        match what {
            Dropped::Start => self.dropped_starts.add_one(),
            Dropped::State => self.dropped_states.add_one(),
            // Counted by the caller, which knows the event then closed without it.
            Dropped::Stop => {}
        }
        self.dropped.add_one();
        first
    }

    /// Wakes the producer if it waits for room (the collector just made some).
    fn room_made(&self) {
        self.room.room_made();
    }
}

/// The producing end, owned by the thread.
pub struct RingProducer {
    producer: rtrb::Producer<Record>,
    pub shared: Arc<RingShared>,
}

/// The consuming end, owned by the collector.
pub struct RingConsumer {
    consumer: rtrb::Consumer<Record>,
    pub shared: Arc<RingShared>,
}

impl Drop for RingConsumer {
    fn drop(&mut self) {
        // The collector drops a ring once its thread is gone and it is empty: its room
        // goes back to the rings' share of the memory limit.
        crate::memory::BUDGET.return_ring(self.shared.bytes);
    }
}

/// Records of one ring, read in place (see [`RingConsumer::read_available`]).
pub struct Available<'a> {
    chunk: Option<rtrb::chunks::ReadChunk<'a, Record>>,
    shared: &'a RingShared,
    pub thread_index: u32,
}

impl Available<'_> {
    pub fn len(&self) -> usize {
        self.chunk.as_ref().map_or(0, |chunk| chunk.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records: those up to the ring's end, then those from its start.
    pub fn as_slices(&self) -> (&[Record], &[Record]) {
        self.chunk
            .as_ref()
            .map_or((&[], &[]), rtrb::chunks::ReadChunk::as_slices)
    }

    /// The `index`th record (`index < len()`).
    pub fn get(&self, index: usize) -> &Record {
        let (first, second) = self.chunk.as_ref().expect("a non-empty chunk").as_slices();
        match first.get(index) {
            Some(record) => record,
            None => &second[index - first.len()],
        }
    }

    /// Removes the first `count` records from the ring (and wakes its producer if it
    /// waits for room).
    pub fn commit(self, count: usize) {
        if let Some(chunk) = self.chunk {
            chunk.commit(count);
            if count > 0 {
                self.shared.room_made();
            }
        }
    }
}

/// A new ring of `bytes` (taken from the memory limit's share of the rings, given back
/// when the collector drops it) for the calling thread.
pub fn ring(bytes: usize, thread_index: u32) -> (RingProducer, RingConsumer) {
    let capacity = (bytes / std::mem::size_of::<Record>()).max(16);
    let (producer, consumer) = rtrb::RingBuffer::new(capacity);
    let shared = Arc::new(RingShared {
        bytes,
        thread_index,
        // SAFETY: gettid has no preconditions.
        os_tid: unsafe { libc::gettid() },
        dropped: DropCount::default(),
        dropped_starts: DropCount::default(),
        dropped_states: DropCount::default(),
        drop_first: AtomicU64::new(0),
        drop_last: AtomicU64::new(0),
        room: RoomWait::for_this_thread(),
    });
    (
        RingProducer {
            producer,
            shared: Arc::clone(&shared),
        },
        RingConsumer { consumer, shared },
    )
}

impl RingProducer {
    /// No room for another record now.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.producer.is_full()
    }

    /// Pushes a record; gives it back when the ring is full.
    #[inline]
    pub fn push(&mut self, record: Record) -> Result<(), Record> {
        self.producer
            .push(record)
            .map_err(|rtrb::PushError::Full(r)| r)
    }

    /// Sleeps until the collector has made room in the full ring (or a short while has
    /// passed): the CPU goes to the collector instead of a spinning thread.
    #[cold]
    pub fn wait_for_room(&self) {
        self.shared.room.wait(|| self.producer.is_full());
    }
}

impl RingConsumer {
    /// The records available now, read in place: what the caller commits leaves the ring,
    /// the rest stays for the next read. Records pushed meanwhile are not included.
    pub fn read_available(&mut self) -> Available<'_> {
        let available = self.consumer.slots();
        Available {
            chunk: self.consumer.read_chunk(available).ok(),
            shared: &self.shared,
            thread_index: self.shared.thread_index,
        }
    }

    /// The thread is gone and everything it pushed has been read.
    pub fn finished(&self) -> bool {
        producer_gone(&self.consumer) && self.consumer.is_empty()
    }
}

/// Whether a ring's producer is gone; if so, everything it pushed is visible to the
/// consumer from here on. The producer's end is seen through a relaxed count: without the
/// fence a weakly ordered CPU (Arm) could still show an older end of its records.
pub fn producer_gone<T>(consumer: &rtrb::Consumer<T>) -> bool {
    if !consumer.is_abandoned() {
        return false;
    }
    std::sync::atomic::fence(Ordering::Acquire);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Action;

    #[test]
    fn a_full_ring_gives_the_record_back() {
        let (mut producer, mut consumer) = ring(16 * std::mem::size_of::<Record>(), 3);
        let record = Record {
            time: 1,
            handle: 2,
            action: Action::Stop,
        };
        for _ in 0..16 {
            producer.push(record).unwrap();
        }
        assert_eq!(producer.push(record), Err(record));
        let available = consumer.read_available();
        assert_eq!(available.len(), 16);
        assert_eq!((available.thread_index, *available.get(0)), (3, record));
        available.commit(16);
        assert!(!consumer.finished());
        drop(producer);
        assert!(consumer.finished());
    }

    /// Only the first drop of a gap says so (the producer then wakes the collector once,
    /// not at every record it drops); the next gap starts after the collector took one.
    #[test]
    fn only_the_first_drop_of_a_gap_is_reported_as_first() {
        let (_producer, consumer) = ring(16 * std::mem::size_of::<Record>(), 0);
        let shared = &consumer.shared;
        assert!(shared.note_drop(10, Dropped::Start));
        assert!(!shared.note_drop(11, Dropped::Stop));
        assert!(!shared.note_drop(12, Dropped::State));
        // What the collector does when it writes the gap.
        assert_eq!(shared.drop_first.swap(0, Ordering::AcqRel), 10);
        assert!(shared.note_drop(20, Dropped::Start));
        assert_eq!(shared.dropped.total(), 4);
        assert_eq!(shared.drop_last.load(Ordering::Acquire), 20);
    }

    /// Drops are counted by what they were (starts: lost events; states), and the
    /// collector takes each count once.
    #[test]
    fn drops_are_counted_by_what_they_were_and_taken_once() {
        let (_producer, consumer) = ring(16 * std::mem::size_of::<Record>(), 0);
        let shared = &consumer.shared;
        for what in [
            Dropped::Start,
            Dropped::Start,
            Dropped::Stop,
            Dropped::State,
        ] {
            shared.note_drop(1, what);
        }
        assert_eq!(
            (
                shared.dropped.take_new(),
                shared.dropped_starts.take_new(),
                shared.dropped_states.take_new()
            ),
            (4, 2, 1)
        );
        assert_eq!(shared.dropped.take_new(), 0, "taken once");
        shared.note_drop(2, Dropped::State);
        assert_eq!(
            (
                shared.dropped.take_new(),
                shared.dropped_starts.take_new(),
                shared.dropped_states.take_new()
            ),
            (1, 0, 1)
        );
        assert_eq!(shared.dropped.total(), 5);
    }

    /// A producer that sleeps on a full ring goes on as the collector makes room, and
    /// every record arrives in order.
    #[test]
    fn a_producer_waiting_for_room_loses_nothing() {
        const RECORDS: u64 = 5_000;
        let consumer = std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::channel();
            scope.spawn(move || {
                // The ring belongs to the thread that creates it.
                let (mut producer, consumer) = ring(16 * std::mem::size_of::<Record>(), 0);
                tx.send(consumer).unwrap();
                for time in 0..RECORDS {
                    let mut record = Record {
                        time,
                        handle: 0,
                        action: Action::Stop,
                    };
                    while let Err(back) = producer.push(record) {
                        record = back;
                        producer.wait_for_room();
                    }
                }
            });
            let mut consumer = rx.recv().unwrap();
            let mut next = 0;
            while next < RECORDS {
                let available = consumer.read_available();
                // Small bites, so that the producer waits again and again.
                let take = available.len().min(3);
                for index in 0..take {
                    assert_eq!(available.get(index).time, next);
                    next += 1;
                }
                available.commit(take);
            }
            consumer
        });
        // The producer's thread has ended: its ring is abandoned and read to the end.
        assert!(consumer.finished());
    }
}
