//! Lanes: turning finished intervals, which arrive in the order they *end*, into per-location
//! Enter/Leave streams that nest and never go back in time.
//!
//! NCCL closes a parent after its children (GroupApi after CollApi), and proxy operations,
//! steps and network requests overlap without nesting. A [`Lanes`] set keeps the finished
//! intervals of one timeline (one thread, or the proxy of one communicator rank) until no
//! interval that is still open could start before them — the *watermark*, the earliest
//! start among the timeline's open events — and then places them in start order: each goes
//! to the first lane where it nests inside the innermost open interval (or where nothing is
//! open), and a new lane is opened when none fits. An interval may restrict what it nests
//! in ([`Nesting`]): a proxy operation only where nothing is open, a proxy step only inside
//! its own operation. Leaves are written when a later interval starts after them, or at
//! the end.

use std::cmp::Reverse;

/// Something placed on a lane.
pub trait Interval {
    fn start(&self) -> u64;
    fn stop(&self) -> u64;
    /// Region id written with the Leave.
    fn region(&self) -> u32;
    /// A leaf is written whole (Enter, inner parts, Leave) and nothing nests inside it.
    fn is_leaf(&self) -> bool;
    /// Siblings that overlap by nature (NCCL starts all tasks of a plan, then stops them
    /// all): when one starts inside another that ends before it, the earlier is shown to
    /// end where the later starts, rather than the later going to another lane.
    fn chains(&self) -> bool {
        false
    }
    /// What this interval may be written inside.
    fn nesting(&self) -> Nesting {
        Nesting::ByTime
    }
    /// What intervals with [`Nesting::Inside`] this one look for (0: none).
    fn key(&self) -> u64 {
        0
    }
}

/// What an interval may be written inside, on a lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nesting {
    /// Any interval that contains it (a thread's API call inside its group).
    ByTime,
    /// Nothing: only a lane where nothing is open (a proxy operation, which is no part
    /// of another one).
    Alone,
    /// Only the open interval with this key, preferred to any other lane; else a lane where
    /// nothing is open (a proxy step inside its operation).
    Inside(u64),
}

impl Nesting {
    /// Whether an interval may be written inside the open interval with key `outer`.
    fn allows(self, outer: u64) -> bool {
        match self {
            Nesting::ByTime => true,
            Nesting::Alone => false,
            Nesting::Inside(key) => key == outer,
        }
    }
}

/// Where placed intervals go.
pub trait LaneOutput<T> {
    /// Writes the Enter of `item` on `lane` at `start` (and, for a leaf, all of it up to
    /// its Leave at `stop`). `start`/`stop` differ from the item's only when clipped.
    fn open(&mut self, lane: usize, item: &T, start: u64, stop: u64);
    /// Writes the Leave of a non-leaf interval.
    fn close(&mut self, lane: usize, time: u64, region: u32);
    /// Takes back an item once it is written (to reuse what it owns).
    fn done(&mut self, _item: T) {}
}

/// An open (non-leaf) interval of a lane.
#[derive(Clone, Copy)]
struct Open {
    stop: u64,
    region: u32,
    chains: bool,
    key: u64,
}

#[derive(Default)]
struct Lane {
    /// Open intervals, innermost last.
    stack: Vec<Open>,
    /// The last time written on this lane.
    last: u64,
}

/// A finished interval waiting to be placed. Placing order: start order; at equal starts
/// the longer first, so it can hold the shorter; then arrival order.
/// Pending room kept after a flush: more is freed when mostly empty.
const SHRINK_ABOVE: usize = 1 << 10;

struct Waiting<T> {
    key: (u64, Reverse<u64>, u64),
    item: T,
}

/// The lanes of one timeline.
pub struct Lanes<T> {
    lanes: Vec<Lane>,
    /// Finished intervals not placed yet, in placing order. They arrive almost in that
    /// order (by their end), so most are appended and the others inserted a few places
    /// from the back; nothing is sorted again at each flush. A flush removes a prefix and
    /// moves the few that stay to the front: the next items are written where the last
    /// ones were, in memory the cache still holds (a ring buffer would walk through all
    /// the room it ever needed).
    pending: Vec<Waiting<T>>,
    arrivals: u64,
    max_lanes: usize,
    /// Intervals squeezed because all lanes were in use (see `place`).
    pub clipped: u64,
}

impl<T: Interval> Lanes<T> {
    pub fn new(max_lanes: usize) -> Lanes<T> {
        Lanes {
            lanes: Vec::new(),
            pending: Vec::new(),
            arrivals: 0,
            max_lanes: max_lanes.max(1),
            clipped: 0,
        }
    }

    pub fn push(&mut self, item: T) {
        let waiting = Waiting {
            key: (item.start(), Reverse(item.stop()), self.arrivals),
            item,
        };
        self.arrivals += 1;
        if self
            .pending
            .last()
            .is_none_or(|last| last.key <= waiting.key)
        {
            self.pending.push(waiting);
        } else {
            let at = self.pending.partition_point(|w| w.key <= waiting.key);
            self.pending.insert(at, waiting);
        }
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Places every pending interval that starts before `watermark`.
    pub fn flush(&mut self, watermark: u64, out: &mut impl LaneOutput<T>) {
        let ready = self.pending.partition_point(|w| w.key.0 < watermark);
        if ready == 0 {
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        for waiting in pending.drain(..ready) {
            self.place(waiting.item, out);
        }
        // After a burst, the room it needed is given back.
        if pending.capacity() > SHRINK_ABOVE && pending.capacity() > 4 * pending.len() {
            pending.shrink_to(SHRINK_ABOVE.max(2 * pending.len()));
        }
        self.pending = pending;
    }

    /// Places everything and closes every open interval.
    pub fn finish(&mut self, out: &mut impl LaneOutput<T>) {
        self.flush(u64::MAX, out);
        for (index, lane) in self.lanes.iter_mut().enumerate() {
            while let Some(open) = lane.stack.pop() {
                let time = open.stop.max(lane.last);
                out.close(index, time, open.region);
                lane.last = time;
            }
        }
    }

    fn place(&mut self, item: T, out: &mut impl LaneOutput<T>) {
        let (start, stop) = (item.start(), item.stop().max(item.start()));
        let nesting = item.nesting();
        if let Nesting::Inside(key) = nesting {
            // Its own parent's lane first, wherever that is.
            for index in 0..self.lanes.len() {
                pop_until(&mut self.lanes[index], index, start, out);
                let lane = &self.lanes[index];
                let inside_parent = lane
                    .stack
                    .last()
                    .is_some_and(|open| open.key == key && stop <= open.stop);
                if inside_parent && lane.last <= start {
                    self.write(index, &item, start, stop, out);
                    out.done(item);
                    return;
                }
            }
        }
        for index in 0..self.lanes.len() {
            pop_until(&mut self.lanes[index], index, start, out);
            let lane = &mut self.lanes[index];
            if item.chains() {
                if let Some(&Open {
                    stop: outer,
                    region,
                    chains: true,
                    ..
                }) = lane.stack.last()
                {
                    if stop > outer && lane.last <= start {
                        // The earlier sibling ends where this one starts.
                        lane.stack.pop();
                        out.close(index, start, region);
                        lane.last = start;
                    }
                }
            }
            let lane = &self.lanes[index];
            let fits = lane.last <= start
                && lane
                    .stack
                    .last()
                    .is_none_or(|open| stop <= open.stop && nesting.allows(open.key));
            if fits {
                self.write(index, &item, start, stop, out);
                out.done(item);
                return;
            }
        }
        if self.lanes.len() < self.max_lanes {
            self.lanes.push(Lane::default());
            self.write(self.lanes.len() - 1, &item, start, stop, out);
            out.done(item);
            return;
        }
        // Every lane is taken: the interval is squeezed (and counted).
        self.clipped += 1;
        let (index, start, stop) = match nesting {
            Nesting::ByTime => self.squeeze_into_last(start, stop),
            Nesting::Alone | Nesting::Inside(_) => self.squeeze_after(nesting, start, stop, out),
        };
        self.write(index, &item, start, stop, out);
        out.done(item);
    }

    /// Where an interval that nests by time is squeezed: into the last lane, inside
    /// whatever is open there (so that the lane still nests), no earlier than its last
    /// event.
    fn squeeze_into_last(&self, start: u64, stop: u64) -> (usize, u64, u64) {
        let index = self.lanes.len() - 1;
        let lane = &self.lanes[index];
        let start = start.max(lane.last);
        let stop = match lane.stack.last() {
            Some(open) => stop.clamp(start, open.stop.max(start)),
            None => stop.max(start),
        };
        (index, start, stop)
    }

    /// Where an interval that must not go inside just anything is squeezed: a step into
    /// its own operation when that one is open, after what the lane already holds; else
    /// onto the lane that frees first, from the time it frees (so it starts late, or has
    /// no length, rather than being drawn inside an operation it is no part of).
    fn squeeze_after(
        &mut self,
        nesting: Nesting,
        start: u64,
        stop: u64,
        out: &mut impl LaneOutput<T>,
    ) -> (usize, u64, u64) {
        if let Nesting::Inside(key) = nesting {
            let parent = self.lanes.iter().enumerate().find_map(|(index, lane)| {
                let open = lane.stack.last().filter(|open| open.key == key)?;
                let start = start.max(lane.last).min(open.stop);
                Some((index, start, stop.clamp(start, open.stop)))
            });
            if let Some(place) = parent {
                return place;
            }
        }
        let (index, free) = self
            .lanes
            .iter()
            .enumerate()
            .map(|(index, lane)| {
                let outermost = lane.stack.first().map_or(0, |open| open.stop);
                (index, outermost.max(lane.last))
            })
            .min_by_key(|&(_, free)| free)
            .expect("a lane exists once the bound is reached");
        pop_until(&mut self.lanes[index], index, free, out);
        let start = start.max(self.lanes[index].last);
        (index, start, stop.max(start))
    }

    fn write(
        &mut self,
        index: usize,
        item: &T,
        start: u64,
        stop: u64,
        out: &mut impl LaneOutput<T>,
    ) {
        out.open(index, item, start, stop);
        let lane = &mut self.lanes[index];
        if item.is_leaf() {
            lane.last = stop;
        } else {
            lane.stack.push(Open {
                stop,
                region: item.region(),
                chains: item.chains(),
                key: item.key(),
            });
            lane.last = start;
        }
    }
}

/// Closes the intervals of `lane` that end by `time`.
fn pop_until<T>(lane: &mut Lane, index: usize, time: u64, out: &mut impl LaneOutput<T>) {
    while let Some(&Open { stop, region, .. }) = lane.stack.last() {
        if stop > time {
            break;
        }
        lane.stack.pop();
        let at = stop.max(lane.last);
        out.close(index, at, region);
        lane.last = at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug)]
    struct Span(u64, u64, u32, bool);

    /// A span that chains with its siblings.
    #[derive(Clone, Copy, Debug)]
    struct Task(u64, u64, u32);

    impl Interval for Task {
        fn start(&self) -> u64 {
            self.0
        }
        fn stop(&self) -> u64 {
            self.1
        }
        fn region(&self) -> u32 {
            self.2
        }
        fn is_leaf(&self) -> bool {
            false
        }
        fn chains(&self) -> bool {
            true
        }
    }

    impl LaneOutput<Task> for Log {
        fn open(&mut self, lane: usize, item: &Task, start: u64, _stop: u64) {
            self.0.push((lane, "E", start, item.2));
        }
        fn close(&mut self, lane: usize, time: u64, region: u32) {
            self.0.push((lane, "L", time, region));
        }
    }

    #[test]
    fn overlapping_siblings_that_chain_follow_each_other_on_one_lane() {
        let mut lanes = Lanes::new(8);
        let mut log = Log::default();
        // Three tasks started back to back and stopped together, as NCCL does per plan.
        lanes.push(Task(10, 50, 1));
        lanes.push(Task(20, 52, 2));
        lanes.push(Task(30, 54, 3));
        lanes.finish(&mut log);
        assert_well_formed(&log);
        assert_eq!(
            log.0,
            vec![
                (0, "E", 10, 1),
                (0, "L", 20, 1),
                (0, "E", 20, 2),
                (0, "L", 30, 2),
                (0, "E", 30, 3),
                (0, "L", 54, 3)
            ]
        );
    }

    impl Interval for Span {
        fn start(&self) -> u64 {
            self.0
        }
        fn stop(&self) -> u64 {
            self.1
        }
        fn region(&self) -> u32 {
            self.2
        }
        fn is_leaf(&self) -> bool {
            self.3
        }
    }

    /// Records what was written, as (lane, "E"/"L", time, region).
    #[derive(Default)]
    struct Log(Vec<(usize, &'static str, u64, u32)>);

    impl LaneOutput<Span> for Log {
        fn open(&mut self, lane: usize, item: &Span, start: u64, stop: u64) {
            self.0.push((lane, "E", start, item.2));
            if item.3 {
                self.0.push((lane, "L", stop, item.2));
            }
        }
        fn close(&mut self, lane: usize, time: u64, region: u32) {
            self.0.push((lane, "L", time, region));
        }
    }

    /// Checks the written stream: per lane, time never decreases and Enter/Leave nest.
    fn assert_well_formed(log: &Log) {
        let lanes = log.0.iter().map(|e| e.0).max().map_or(0, |m| m + 1);
        for lane in 0..lanes {
            let mut last = 0;
            let mut stack = Vec::new();
            for &(l, what, time, region) in &log.0 {
                if l != lane {
                    continue;
                }
                assert!(time >= last, "lane {lane} goes back: {:?}", log.0);
                last = time;
                if what == "E" {
                    stack.push(region);
                } else {
                    assert_eq!(stack.pop(), Some(region), "bad nesting: {:?}", log.0);
                }
            }
            assert!(stack.is_empty());
        }
    }

    #[test]
    fn children_finishing_first_are_written_inside_their_parent() {
        let mut lanes = Lanes::new(8);
        let mut log = Log::default();
        // CollApi (20..30) closes before its GroupApi (10..100).
        lanes.push(Span(20, 30, 2, false));
        lanes.push(Span(40, 50, 3, false));
        lanes.push(Span(10, 100, 1, false));
        lanes.flush(u64::MAX, &mut log);
        lanes.finish(&mut log);
        assert_well_formed(&log);
        assert_eq!(
            log.0,
            vec![
                (0, "E", 10, 1),
                (0, "E", 20, 2),
                (0, "L", 30, 2),
                (0, "E", 40, 3),
                (0, "L", 50, 3),
                (0, "L", 100, 1)
            ]
        );
    }

    #[test]
    fn overlapping_intervals_take_other_lanes() {
        let mut lanes = Lanes::new(8);
        let mut log = Log::default();
        for (start, stop) in [(0, 50), (10, 60), (20, 70), (55, 80)] {
            lanes.push(Span(start, stop, start as u32, false));
        }
        lanes.finish(&mut log);
        assert_well_formed(&log);
        let lane_of = |region: u32| {
            log.0
                .iter()
                .find(|e| e.3 == region && e.1 == "E")
                .unwrap()
                .0
        };
        assert_eq!(
            [lane_of(0), lane_of(10), lane_of(20), lane_of(55)],
            [0, 1, 2, 0]
        );
    }

    #[test]
    fn nothing_before_the_watermark_is_held_back_and_nothing_after_is_written() {
        let mut lanes = Lanes::new(8);
        let mut log = Log::default();
        lanes.push(Span(5, 8, 1, true));
        lanes.push(Span(12, 14, 2, true));
        lanes.flush(10, &mut log);
        assert_eq!(log.0, vec![(0, "E", 5, 1), (0, "L", 8, 1)]);
        assert_eq!(lanes.pending(), 1);
        lanes.finish(&mut log);
        assert_well_formed(&log);
        assert_eq!(log.0.len(), 4);
    }

    #[test]
    fn a_late_interval_never_goes_back_in_time_on_a_lane() {
        let mut lanes = Lanes::new(8);
        let mut log = Log::default();
        lanes.push(Span(100, 200, 1, true));
        lanes.flush(u64::MAX, &mut log);
        // Arrives after 100..200 was written, but starts before it ended.
        lanes.push(Span(50, 150, 2, true));
        lanes.finish(&mut log);
        assert_well_formed(&log);
        assert_eq!(log.0[2], (1, "E", 50, 2));
    }

    #[test]
    fn when_all_lanes_are_taken_intervals_are_clipped_and_counted() {
        let mut lanes = Lanes::new(1);
        let mut log = Log::default();
        lanes.push(Span(0, 50, 1, false));
        lanes.push(Span(10, 60, 2, false));
        lanes.finish(&mut log);
        assert_well_formed(&log);
        assert_eq!(lanes.clipped, 1);
        assert_eq!(log.0[1], (0, "E", 10, 2));
        assert_eq!(log.0[2], (0, "L", 50, 2));
    }

    /// A proxy operation (key = its handle) or step (nested in its operation).
    #[derive(Clone, Copy, Debug)]
    struct Proxy {
        start: u64,
        stop: u64,
        region: u32,
        step_of: Option<u64>,
    }

    impl Interval for Proxy {
        fn start(&self) -> u64 {
            self.start
        }
        fn stop(&self) -> u64 {
            self.stop
        }
        fn region(&self) -> u32 {
            self.region
        }
        fn is_leaf(&self) -> bool {
            self.step_of.is_some()
        }
        fn nesting(&self) -> Nesting {
            self.step_of.map_or(Nesting::Alone, Nesting::Inside)
        }
        fn key(&self) -> u64 {
            if self.step_of.is_some() {
                0
            } else {
                u64::from(self.region)
            }
        }
    }

    impl LaneOutput<Proxy> for Log {
        fn open(&mut self, lane: usize, item: &Proxy, start: u64, stop: u64) {
            self.0.push((lane, "E", start, item.region));
            if item.step_of.is_some() {
                self.0.push((lane, "L", stop, item.region));
            }
        }
        fn close(&mut self, lane: usize, time: u64, region: u32) {
            self.0.push((lane, "L", time, region));
        }
    }

    fn op(start: u64, stop: u64, handle: u32) -> Proxy {
        Proxy {
            start,
            stop,
            region: handle,
            step_of: None,
        }
    }

    fn step(start: u64, stop: u64, region: u32, op: u32) -> Proxy {
        Proxy {
            start,
            stop,
            region,
            step_of: Some(u64::from(op)),
        }
    }

    /// The lane each region was entered on.
    fn lane_of(log: &Log, region: u32) -> usize {
        log.0
            .iter()
            .find(|e| e.3 == region && e.1 == "E")
            .unwrap_or_else(|| panic!("region {region} not written: {:?}", log.0))
            .0
    }

    #[test]
    fn operations_never_nest_in_each_other_and_steps_go_inside_their_own_operation() {
        let mut lanes = Lanes::new(8);
        let mut log = Log::default();
        // Operation 1 (0..100) holds operation 2 (10..90) in time; their steps interleave.
        lanes.push(step(5, 20, 11, 1));
        lanes.push(step(12, 30, 21, 2));
        lanes.push(step(40, 60, 22, 2));
        lanes.push(step(61, 70, 12, 1));
        lanes.push(op(10, 90, 2));
        lanes.push(op(0, 100, 1));
        lanes.finish(&mut log);
        assert_well_formed(&log);
        assert_eq!([lane_of(&log, 1), lane_of(&log, 2)], [0, 1]);
        assert_eq!([lane_of(&log, 11), lane_of(&log, 12)], [0, 0]);
        assert_eq!([lane_of(&log, 21), lane_of(&log, 22)], [1, 1]);
        // Lanes are reused once their operation ended: first fit.
        lanes.push(op(150, 200, 3));
        lanes.push(op(160, 170, 4));
        lanes.finish(&mut log);
        assert_well_formed(&log);
        assert_eq!([lane_of(&log, 3), lane_of(&log, 4)], [0, 1]);
    }

    #[test]
    fn a_step_overlapping_its_sibling_takes_a_lane_of_its_own_not_another_operation() {
        let mut lanes = Lanes::new(8);
        let mut log = Log::default();
        lanes.push(step(10, 40, 11, 1));
        lanes.push(step(20, 50, 12, 1));
        lanes.push(op(0, 100, 1));
        lanes.push(op(5, 100, 2));
        lanes.finish(&mut log);
        assert_well_formed(&log);
        // Operation 2 is open on lane 1 over the second step: the step is not put in it.
        assert_eq!([lane_of(&log, 1), lane_of(&log, 2)], [0, 1]);
        assert_eq!([lane_of(&log, 11), lane_of(&log, 12)], [0, 2]);
    }

    #[test]
    fn beyond_the_bound_operations_start_when_a_lane_frees_and_are_counted() {
        let mut lanes = Lanes::new(2);
        let mut log = Log::default();
        for handle in 1..=5 {
            let start = u64::from(handle) * 10;
            lanes.push(op(start, start + 100, handle));
        }
        // A step of operation 5, inside it once it is placed.
        lanes.push(step(60, 70, 51, 5));
        lanes.finish(&mut log);
        assert_well_formed(&log);
        assert_eq!(lanes.clipped, 4);
        // Never an operation inside another: each Enter of an operation on an empty lane.
        let mut depth = [0usize; 2];
        for &(lane, what, time, region) in &log.0 {
            if region < 10 {
                if what == "E" {
                    assert_eq!(depth[lane], 0, "operation {region} at {time}: {:?}", log.0);
                    depth[lane] += 1;
                } else {
                    depth[lane] -= 1;
                }
            }
        }
        let entered = |region: u32| {
            *log.0
                .iter()
                .find(|e| e.1 == "E" && e.3 == region)
                .expect("entered")
        };
        // 1 and 2 as they came; 3 when 1 ends, 4 when 2 ends, 5 when 3 ends.
        assert_eq!(entered(1), (0, "E", 10, 1));
        assert_eq!(entered(2), (1, "E", 20, 2));
        assert_eq!(entered(3), (0, "E", 110, 3));
        assert_eq!(entered(4), (1, "E", 120, 4));
        assert_eq!(entered(5), (0, "E", 130, 5));
        // The step waits for its operation, and is squeezed into it.
        assert_eq!(entered(51), (0, "E", 130, 51));
    }
}
