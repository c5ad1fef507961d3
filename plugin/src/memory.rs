//! The plugin's memory limit (`NCCL_SCOREP_MEMORY_LIMIT`): every heap allocation of the
//! plugin is counted, and above the limit's high-water mark new events are refused until
//! enough is freed, so that the plugin can never be what runs a node out of memory.
//!
//! The count is exact because it is the allocator's: the plugin's Rust code allocates
//! through [`CountingAllocator`] (in a shared library, the global allocator serves that
//! library only; the application's `malloc` is not touched). The hot path reads one flag
//! ([`shedding`]); the allocator sets and clears it as the count crosses the marks.

use crossbeam_utils::CachePadded;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The default limit of the plugin's heap.
pub const DEFAULT_LIMIT_BYTES: usize = 64 << 20;
/// The smallest limit accepted: below it the fixed tables alone would not fit.
pub const MIN_LIMIT_BYTES: usize = 16 << 20;

/// The plugin's heap and its marks; one per process ([`BUDGET`]), more in tests.
pub struct Budget {
    /// What every allocation writes, on a cache line of its own…
    count: CachePadded<Count>,
    /// …apart from what every callback reads.
    marks: CachePadded<Marks>,
}

struct Count {
    /// Bytes allocated and not freed.
    in_use: AtomicUsize,
    /// Bytes of it in the threads' rings.
    rings: AtomicUsize,
    /// The largest `in_use` since the last [`Budget::reset_peak`].
    peak: AtomicUsize,
}

struct Marks {
    /// Above this, new events are refused (`shedding` turns on)…
    high_water: AtomicUsize,
    /// …until the heap is back below this.
    low_water: AtomicUsize,
    /// The configured limit; `usize::MAX` until the configuration sets one.
    limit: AtomicUsize,
    /// Whether new events are refused for lack of memory.
    shedding: AtomicBool,
    /// Whether shedding turned on since the last [`Budget::reset_peak`].
    ever_shed: AtomicBool,
}

/// The process's budget, counted by the allocator.
pub static BUDGET: Budget = Budget::new();

/// The allocator that counts: the system's, with the count kept in [`BUDGET`].
pub struct CountingAllocator;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

impl Budget {
    /// A budget with nothing counted and no limit.
    pub const fn new() -> Budget {
        Budget {
            count: CachePadded::new(Count {
                in_use: AtomicUsize::new(0),
                rings: AtomicUsize::new(0),
                peak: AtomicUsize::new(0),
            }),
            marks: CachePadded::new(Marks {
                high_water: AtomicUsize::new(usize::MAX),
                low_water: AtomicUsize::new(usize::MAX),
                limit: AtomicUsize::new(usize::MAX),
                shedding: AtomicBool::new(false),
                ever_shed: AtomicBool::new(false),
            }),
        }
    }

    #[inline]
    fn added(&self, size: usize) {
        let now = self.count.in_use.fetch_add(size, Ordering::Relaxed) + size;
        if now > self.count.peak.load(Ordering::Relaxed) {
            self.count.peak.fetch_max(now, Ordering::Relaxed);
        }
        if now > self.marks.high_water.load(Ordering::Relaxed)
            && !self.marks.shedding.load(Ordering::Relaxed)
        {
            self.marks.shedding.store(true, Ordering::Relaxed);
            self.marks.ever_shed.store(true, Ordering::Relaxed);
        }
    }

    #[inline]
    fn removed(&self, size: usize) {
        let now = self
            .count
            .in_use
            .fetch_sub(size, Ordering::Relaxed)
            .saturating_sub(size);
        if self.marks.shedding.load(Ordering::Relaxed)
            && now < self.marks.low_water.load(Ordering::Relaxed)
        {
            self.marks.shedding.store(false, Ordering::Relaxed);
        }
    }

    /// Sets the limit: new events are refused above 7/8 of it, accepted again below 3/4
    /// (the room above the high-water mark is for what is already in flight: records in
    /// the rings, a table that doubles).
    pub fn set_limit(&self, limit: usize) {
        self.marks.limit.store(limit, Ordering::Relaxed);
        self.marks
            .high_water
            .store(limit / 8 * 7, Ordering::Relaxed);
        self.marks.low_water.store(limit / 4 * 3, Ordering::Relaxed);
        let over = self.in_use() > limit / 8 * 7;
        self.marks.shedding.store(over, Ordering::Relaxed);
        if over {
            self.marks.ever_shed.store(true, Ordering::Relaxed);
        }
    }

    /// The configured limit (`usize::MAX`: none).
    pub fn limit(&self) -> usize {
        self.marks.limit.load(Ordering::Relaxed)
    }

    /// Whether new events are refused for lack of memory (one relaxed load: the hot
    /// path's).
    #[inline(always)]
    pub fn shedding(&self) -> bool {
        self.marks.shedding.load(Ordering::Relaxed)
    }

    /// Bytes allocated and not freed.
    pub fn in_use(&self) -> usize {
        self.count.in_use.load(Ordering::Relaxed)
    }

    /// The largest heap held since the last [`Budget::reset_peak`].
    pub fn peak(&self) -> usize {
        self.count.peak.load(Ordering::Relaxed)
    }

    /// Whether events were refused for lack of memory since the last
    /// [`Budget::reset_peak`].
    pub fn limit_reached(&self) -> bool {
        self.marks.ever_shed.load(Ordering::Relaxed)
    }

    /// Starts a new measurement (a new init/finalize cycle).
    pub fn reset_peak(&self) {
        self.count.peak.store(self.in_use(), Ordering::Relaxed);
        self.marks
            .ever_shed
            .store(self.shedding(), Ordering::Relaxed);
    }

    /// Bytes a new thread's ring gets, taken from the rings' share of the limit (half
    /// of it): the configured size, or half of what is left of the share when that is
    /// less, and never less than `min_bytes`. Give them back with
    /// [`Budget::return_ring`].
    pub fn take_ring(&self, configured: usize, min_bytes: usize) -> usize {
        let share = self.limit() / 2;
        let left = share.saturating_sub(self.count.rings.load(Ordering::Relaxed));
        let bytes = configured.min((left / 2).max(min_bytes));
        self.count.rings.fetch_add(bytes, Ordering::Relaxed);
        bytes
    }

    /// A ring of `bytes` was freed.
    pub fn return_ring(&self, bytes: usize) {
        self.count.rings.fetch_sub(bytes, Ordering::Relaxed);
    }
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::new()
    }
}

// SAFETY: every call is forwarded to the system allocator with the caller's arguments
// unchanged; the counting beside it touches only atomics and never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `GlobalAlloc::alloc`, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            BUDGET.added(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            BUDGET.added(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (the caller's contract).
        unsafe { System.dealloc(ptr, layout) };
        BUDGET.removed(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `GlobalAlloc::realloc`, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                BUDGET.added(new_size - layout.size());
            } else {
                BUDGET.removed(layout.size() - new_size);
            }
        }
        p
    }
}

/// Hands the C allocator's free pages back to the system (glibc keeps them otherwise).
pub fn return_free_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory the allocator holds free; no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Mebibytes, for messages.
pub fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marks_turn_refusal_on_above_seven_eighths_and_off_below_three_quarters() {
        let budget = Budget::new();
        budget.set_limit(800);
        budget.added(690);
        assert!(!budget.shedding());
        budget.added(20); // 710 > 700
        assert!(budget.shedding() && budget.limit_reached());
        budget.removed(100); // 610: still above 600
        assert!(budget.shedding());
        budget.removed(20); // 590
        assert!(!budget.shedding());
        assert!(budget.limit_reached(), "remembered for the report");
        assert_eq!(budget.peak(), 710);
        budget.reset_peak();
        assert!(!budget.limit_reached());
        assert_eq!(budget.peak(), 590);
    }

    #[test]
    fn a_limit_set_below_what_is_held_refuses_at_once() {
        let budget = Budget::new();
        budget.added(1000);
        assert!(!budget.shedding(), "no limit until one is set");
        budget.set_limit(1000);
        assert!(budget.shedding());
    }

    #[test]
    fn rings_take_at_most_half_of_the_limit_together() {
        let budget = Budget::new();
        assert_eq!(budget.take_ring(4 << 20, 4096), 4 << 20, "no limit");
        budget.return_ring(4 << 20);
        budget.set_limit(64 << 20); // 32 MiB for rings
        let sizes: Vec<usize> = (0..16)
            .map(|_| budget.take_ring(4 << 20, 16 << 10))
            .collect();
        let mib: Vec<usize> = sizes.iter().map(|&b| b >> 20).collect();
        assert_eq!(mib[..9], [4, 4, 4, 4, 4, 4, 4, 2, 1]);
        assert!(sizes.iter().sum::<usize>() <= 32 << 20);
        assert_eq!(*sizes.last().unwrap(), 16 << 10, "never below the least");
        // Threads' rings freed: the next thread gets its room.
        for &bytes in &sizes[..3] {
            budget.return_ring(bytes);
        }
        assert_eq!(budget.take_ring(4 << 20, 16 << 10), 4 << 20);
    }

    #[test]
    fn the_process_budget_counts_this_process_allocations() {
        let before = BUDGET.in_use();
        let block = vec![1u8; 64 << 20];
        // Other tests allocate and free at the same time, but not 64 MiB at once.
        assert!(BUDGET.in_use() > before + (32 << 20));
        assert!(BUDGET.peak() >= 64 << 20);
        drop(block);
    }
}
