//! Event handles: tagged ids (slot + generation) into a slab the plugin owns.
//!
//! NCCL only tests a handle for NULL and passes it back, so a handle never needs to be a
//! pointer. Ours is a 64-bit value:
//!
//! ```text
//!  63  60 59  55 54     47 46                 20 19            0
//! +------+------+---------+--------------------+---------------+
//! | magic| kind |  salt   |     generation     |     slot      |
//! +------+------+---------+--------------------+---------------+
//! ```
//!
//! * the magic nibble and the per-process salt make foreign values (another process's
//!   handles under PXN, pointers from other plugins, garbage) fail before any lookup;
//! * the generation makes a stale or reused handle fail instead of aliasing a newer event;
//! * the kind says what the event is without touching the slab.
//!
//! A slot's generation is odd while the event is live and even while the slot is free, so
//! one compare-and-swap both frees a slot and detects a double stop.
//!
//! No handle value is ever issued twice: a slot whose 27-bit generation has gone round
//! (2^26 events, about 67 million) is retired, never used again, so a handle NCCL keeps
//! (a CUDA graph's capture-time parent, replayed for hours) can never name a later event.
//! The slab's capacity times 2^26 events (4·10^12 with the default 65 536 slots) is
//! far beyond any job; after that, new events would be refused and counted (`slab_full`).
//!
//! The slab is split into shards, one per group of threads, each a lock-free stack of free
//! slots. Events mostly start and stop on one thread, so shards are rarely contended. On
//! the callback path each thread also keeps the last few slots its stops freed
//! ([`ThreadSlots`]) for its next starts, which then touch no shared free list at all.

use crate::event::Kind;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

const MAGIC: u64 = 0x5;
const MAGIC_SHIFT: u32 = 60;
const KIND_SHIFT: u32 = 55;
const KIND_MASK: u64 = 0x1F;
const SALT_SHIFT: u32 = 47;
const SALT_MASK: u64 = 0xFF;
const GEN_SHIFT: u32 = 20;
const GEN_BITS: u32 = 27;
const GEN_MASK: u32 = (1 << GEN_BITS) - 1;
const SLOT_BITS: u32 = 20;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
/// The largest slab the encoding can address.
pub const MAX_SLOTS: usize = 1 << SLOT_BITS;
const NIL: u32 = u32::MAX;

/// A handle value decoded by its bits alone (no slab lookup).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandleBits {
    pub kind: Kind,
    pub generation: u32,
    pub slot: u32,
}

/// Why a handle NCCL passed back was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandleError {
    Null,
    /// Not a value this process ever issued (wrong magic, salt, kind or slot, or a
    /// generation the slot has not reached yet).
    NeverIssued,
    /// The event was stopped and the slot not reused since: a double stop, or a record
    /// after stop.
    AlreadyStopped,
    /// The slot was reused by a later event since this handle was issued.
    Stale,
}

/// The slot bits of a handle value, whatever the rest of it (not checked: for tables
/// that compare the whole value).
#[inline]
pub fn slot_bits(value: u64) -> usize {
    (value & SLOT_MASK) as usize
}

/// Encodes a handle for a fixed salt.
pub fn encode(salt: u8, kind: Kind, generation: u32, slot: u32) -> u64 {
    (MAGIC << MAGIC_SHIFT)
        | (u64::from(kind as u8) & KIND_MASK) << KIND_SHIFT
        | u64::from(salt) << SALT_SHIFT
        | u64::from(generation & GEN_MASK) << GEN_SHIFT
        | u64::from(slot) & SLOT_MASK
}

/// Decodes the bits of a handle issued with `salt`; `None` if it cannot be ours.
#[inline]
pub fn decode(salt: u8, value: u64) -> Option<HandleBits> {
    if value >> MAGIC_SHIFT != MAGIC || (value >> SALT_SHIFT) & SALT_MASK != u64::from(salt) {
        return None;
    }
    let kind = Kind::from_index(((value >> KIND_SHIFT) & KIND_MASK) as u8)?;
    Some(HandleBits {
        kind,
        generation: ((value >> GEN_SHIFT) as u32) & GEN_MASK,
        slot: (value & SLOT_MASK) as u32,
    })
}

struct Slot {
    /// Odd: live; even: free. Only the low `GEN_BITS` travel in the handle.
    generation: AtomicU32,
    /// Next free slot in this shard's stack (valid while free).
    next: AtomicU32,
}

/// What a slot holds beside the event when a second plugin is chained
/// (`NCCL_SCOREP_CHAIN`).
#[derive(Default)]
struct ChainSlot {
    handle: AtomicU64,
    recorded: AtomicBool,
    states: AtomicBool,
    /// Our handle of the event whose stop the chained plugin has yet to get (0: none).
    /// A claim names the event, not the slot: the slot may be freed and taken by a later
    /// event between our release and the claim.
    awaiting_stop: AtomicU64,
}

/// The chained plugin's view of one of our events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chained {
    /// Its handle of the event (0: none).
    pub handle: u64,
    /// Our own sinks record the event (the chained plugin may ask for events we do not).
    pub recorded: bool,
    /// It gets the event's states (NCCL sends no ProxyStep state when the plugin gave
    /// the step's ProxyOp no handle).
    pub states: bool,
}

impl Chained {
    /// An event of ours with nothing chained.
    pub const NONE: Chained = Chained {
        handle: 0,
        recorded: true,
        states: false,
    };
}

/// How many free slots one thread keeps for itself.
pub const THREAD_FREE_SLOTS: usize = 16;

/// The slots a thread freed with its last stops, kept for its next starts: an event
/// mostly starts and stops on one thread, so its id comes back to the thread that takes
/// the next one, without the compare-and-swaps of the shared free lists. Owned by one
/// thread; [`Slab::give_back`] returns what it holds when the thread ends.
pub struct ThreadSlots {
    free: [u32; THREAD_FREE_SLOTS],
    len: usize,
}

impl ThreadSlots {
    pub const fn new() -> ThreadSlots {
        ThreadSlots {
            free: [NIL; THREAD_FREE_SLOTS],
            len: 0,
        }
    }

    #[inline]
    fn take(&mut self) -> Option<u32> {
        self.len = self.len.checked_sub(1)?;
        Some(self.free[self.len])
    }

    /// Keeps `slot`; false when full.
    #[inline]
    fn keep(&mut self, slot: u32) -> bool {
        let Some(free) = self.free.get_mut(self.len) else {
            return false;
        };
        *free = slot;
        self.len += 1;
        true
    }

    /// Free slots held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for ThreadSlots {
    fn default() -> Self {
        ThreadSlots::new()
    }
}

struct Shard {
    /// Top of the free stack: slot index in the low 32 bits, an ABA tag in the high 32.
    head: CachePadded<AtomicU64>,
}

/// A fixed-size slab of event slots.
pub struct Slab {
    salt: u8,
    slots: Box<[Slot]>,
    shards: Box<[Shard]>,
    per_shard: u32,
    /// A slot whose generation reaches a multiple of this (plus one) is retired: the
    /// handle's generation bits have gone round (smaller in tests, to reach it quickly).
    wrap_mask: u32,
    /// Slots retired so far.
    retired: AtomicU64,
    /// One per slot with a chained plugin, else empty.
    chain: Box<[ChainSlot]>,
}

impl Slab {
    /// A slab of about `capacity` slots in `shards` shards (both rounded to sane bounds).
    pub fn new(salt: u8, capacity: usize, shards: usize) -> Slab {
        let shards = shards.clamp(1, 256);
        let capacity = capacity.clamp(shards, MAX_SLOTS);
        let per_shard = (capacity / shards) as u32;
        let total = per_shard as usize * shards;
        let slots: Box<[Slot]> = (0..total)
            .map(|index| {
                let index = index as u32;
                let last_of_shard = (index + 1) % per_shard == 0;
                Slot {
                    generation: AtomicU32::new(0),
                    next: AtomicU32::new(if last_of_shard { NIL } else { index + 1 }),
                }
            })
            .collect();
        let shards = (0..shards as u32)
            .map(|shard| Shard {
                head: CachePadded::new(AtomicU64::new(u64::from(shard * per_shard))),
            })
            .collect();
        Slab {
            salt,
            slots,
            shards,
            per_shard,
            wrap_mask: GEN_MASK,
            retired: AtomicU64::new(0),
            chain: Box::new([]),
        }
    }

    /// The same slab with room, in every slot, for a chained plugin's handle.
    pub fn with_chain_slots(mut self) -> Slab {
        self.chain = (0..self.slots.len())
            .map(|_| ChainSlot::default())
            .collect();
        self
    }

    /// Notes the chained plugin's view of the live event `value`. Only the thread that
    /// acquired its slot writes it, before the handle reaches NCCL.
    #[inline]
    pub fn set_chained(&self, value: u64, chained: Chained) {
        let Ok(bits) = self.bits(value) else { return };
        if let Some(entry) = self.chain.get(bits.slot as usize) {
            entry.handle.store(chained.handle, Ordering::Release);
            entry.recorded.store(chained.recorded, Ordering::Release);
            entry.states.store(chained.states, Ordering::Release);
            entry.awaiting_stop.store(value, Ordering::Release);
        }
    }

    /// For an event our sinks are done with before NCCL stopped it (closed at its
    /// communicator's finalize): true, and the event is no longer ours to record, when the
    /// chained plugin has a handle of it, so that the slot stays live until NCCL's stop.
    pub fn keep_for_chain(&self, value: u64) -> bool {
        let Ok(bits) = self.check(value) else {
            return false;
        };
        match self.chain.get(bits.slot as usize) {
            Some(entry) if entry.handle.load(Ordering::Acquire) != 0 => {
                entry.recorded.store(false, Ordering::Release);
                true
            }
            _ => false,
        }
    }

    /// Claims the stop of our event `value` for the chained plugin: true the first time
    /// only, so that it gets one stop per event, and never for an event that has since
    /// given its slot to another.
    #[inline]
    pub fn claim_chained_stop(&self, value: u64) -> bool {
        let Ok(bits) = self.bits(value) else {
            return false;
        };
        self.chain.get(bits.slot as usize).is_some_and(|entry| {
            entry
                .awaiting_stop
                .compare_exchange(value, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        })
    }

    /// The chained plugin's view of an event whose slot was freed and not reused since,
    /// and whose stop it has not had (our collector frees the slots of events NCCL may
    /// still name: abandoned ProxyOps, restarted steps). `None` for any other handle, or
    /// when the slot was taken again meanwhile.
    pub fn chained_after_release(&self, value: u64) -> Option<(HandleBits, Chained)> {
        let bits = self.bits(value).ok()?;
        let generation = &self.slots[bits.slot as usize].generation;
        let before = generation.load(Ordering::Acquire);
        if classify(before, bits.generation) != Err(HandleError::AlreadyStopped) {
            return None;
        }
        let entry = self.chain.get(bits.slot as usize)?;
        if entry.awaiting_stop.load(Ordering::Acquire) != value {
            return None;
        }
        let chained = self.chained(bits.slot);
        // Unchanged generation: nobody acquired the slot while it was read.
        (generation.load(Ordering::Acquire) == before).then_some((bits, chained))
    }

    /// The chained plugin's view of the event in `slot` ([`Chained::NONE`] without a
    /// chain). Read while the event is live, or ended with the slot not reused since.
    #[inline]
    pub fn chained(&self, slot: u32) -> Chained {
        match self.chain.get(slot as usize) {
            Some(entry) => Chained {
                handle: entry.handle.load(Ordering::Acquire),
                recorded: entry.recorded.load(Ordering::Acquire),
                states: entry.states.load(Ordering::Acquire),
            },
            None => Chained::NONE,
        }
    }

    /// Slots retired because their generation went round (none in any real job).
    pub fn retired(&self) -> u64 {
        self.retired.load(Ordering::Relaxed)
    }

    pub fn salt(&self) -> u8 {
        self.salt
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Takes a free slot from `shard_hint`'s shard (or any other when that one is empty)
    /// and returns the new event's handle; `None` when the slab is full.
    pub fn acquire(&self, kind: Kind, shard_hint: usize) -> Option<u64> {
        let slot = self.pop_near(shard_hint)?;
        Some(self.issue(kind, slot))
    }

    /// [`Slab::acquire`], taking the slot from the thread's own free slots first.
    #[inline]
    pub fn acquire_for_thread(
        &self,
        kind: Kind,
        shard_hint: usize,
        own: &mut ThreadSlots,
    ) -> Option<u64> {
        let slot = match own.take() {
            Some(slot) => slot,
            None => self.pop_near(shard_hint)?,
        };
        Some(self.issue(kind, slot))
    }

    /// Gives every slot a thread kept back to the shared free lists (its end).
    pub fn give_back(&self, own: &mut ThreadSlots) {
        while let Some(slot) = own.take() {
            self.push(slot);
        }
    }

    /// A free slot from `shard_hint`'s shard or, when that one is empty, a neighbour's.
    fn pop_near(&self, shard_hint: usize) -> Option<u32> {
        let n = self.shards.len();
        let first = shard_hint % n;
        // Try the thread's own shard, then at most a few neighbours, so a full slab costs
        // a bounded number of loads.
        (0..n.min(4)).find_map(|offset| self.pop((first + offset) % n))
    }

    /// The handle of a new event in the free slot `slot`, now live.
    #[inline]
    fn issue(&self, kind: Kind, slot: u32) -> u64 {
        let generation = self.slots[slot as usize]
            .generation
            .fetch_add(1, Ordering::AcqRel)
            .wrapping_add(1);
        encode(self.salt, kind, generation, slot)
    }

    /// Checks that `value` names a live event.
    pub fn check(&self, value: u64) -> Result<HandleBits, HandleError> {
        let bits = self.bits(value)?;
        let current = self.slots[bits.slot as usize]
            .generation
            .load(Ordering::Acquire);
        classify(current, bits.generation).map(|()| bits)
    }

    /// Ends a live event and frees its slot; the second release of a handle fails.
    pub fn release(&self, value: u64) -> Result<HandleBits, HandleError> {
        let bits = self.bits(value)?;
        if self.end_live(bits)? {
            self.push(bits.slot);
        }
        Ok(bits)
    }

    /// [`Slab::release`], keeping the freed slot among the thread's own free slots while
    /// they have room.
    #[inline]
    pub fn release_for_thread(
        &self,
        value: u64,
        own: &mut ThreadSlots,
    ) -> Result<HandleBits, HandleError> {
        let bits = self.bits(value)?;
        if self.end_live(bits)? && !own.keep(bits.slot) {
            self.push(bits.slot);
        }
        Ok(bits)
    }

    /// Ends the live event with bits `bits`: whether its slot may be used again (false
    /// when it is retired).
    #[inline]
    fn end_live(&self, bits: HandleBits) -> Result<bool, HandleError> {
        let slot = &self.slots[bits.slot as usize];
        let mut current = slot.generation.load(Ordering::Acquire);
        loop {
            classify(current, bits.generation)?;
            match slot.generation.compare_exchange_weak(
                current,
                current.wrapping_add(1),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => current = now,
            }
        }
        if current.wrapping_add(1) & self.wrap_mask == 0 {
            // Its next event would carry a generation an earlier one had.
            self.retired.fetch_add(1, Ordering::Relaxed);
            return Ok(false);
        }
        Ok(true)
    }

    /// The bits of a value this slab could have issued, live or not.
    pub fn bits_of(&self, value: u64) -> Option<HandleBits> {
        self.bits(value).ok()
    }

    #[inline]
    fn bits(&self, value: u64) -> Result<HandleBits, HandleError> {
        if value == 0 {
            return Err(HandleError::Null);
        }
        match decode(self.salt, value) {
            Some(bits) if (bits.slot as usize) < self.slots.len() => Ok(bits),
            _ => Err(HandleError::NeverIssued),
        }
    }

    fn pop(&self, shard: usize) -> Option<u32> {
        let head = &self.shards[shard].head;
        let mut current = head.load(Ordering::Acquire);
        loop {
            let index = current as u32;
            if index == NIL {
                return None;
            }
            let next = self.slots[index as usize].next.load(Ordering::Acquire);
            let tag = (current >> 32).wrapping_add(1);
            match head.compare_exchange_weak(
                current,
                tag << 32 | u64::from(next),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(index),
                Err(now) => current = now,
            }
        }
    }

    fn push(&self, slot: u32) {
        let head = &self.shards[(slot / self.per_shard) as usize].head;
        let mut current = head.load(Ordering::Acquire);
        loop {
            self.slots[slot as usize]
                .next
                .store(current as u32, Ordering::Release);
            let tag = (current >> 32).wrapping_add(1);
            match head.compare_exchange_weak(
                current,
                tag << 32 | u64::from(slot),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(now) => current = now,
            }
        }
    }
}

/// Compares a slot's current generation with the one a handle carries.
fn classify(current: u32, issued: u32) -> Result<(), HandleError> {
    if issued & 1 == 0 {
        return Err(HandleError::NeverIssued);
    }
    let ahead = current.wrapping_sub(issued) & GEN_MASK;
    match ahead {
        0 => Ok(()),
        1 => Err(HandleError::AlreadyStopped),
        // Less than half the generation space ahead: reused since. More: the handle claims
        // a generation the slot never had.
        n if n < 1 << (GEN_BITS - 1) => Err(HandleError::Stale),
        _ => Err(HandleError::NeverIssued),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn handles_round_trip_through_their_bits() {
        let h = encode(0xA1, Kind::ProxyStep, 7, 12345);
        assert_eq!(
            decode(0xA1, h),
            Some(HandleBits {
                kind: Kind::ProxyStep,
                generation: 7,
                slot: 12345
            })
        );
        assert_eq!(decode(0xA2, h), None, "another salt is another process");
        assert_eq!(
            decode(0xA1, 0x7fff_1234_5678),
            None,
            "a pointer is not a handle"
        );
    }

    #[test]
    fn acquire_release_and_the_ways_a_handle_goes_bad() {
        let slab = Slab::new(3, 4, 1);
        let a = slab.acquire(Kind::Coll, 0).unwrap();
        assert!(slab.check(a).is_ok());
        assert_eq!(slab.release(a).unwrap().kind, Kind::Coll);
        assert_eq!(slab.release(a), Err(HandleError::AlreadyStopped));
        assert_eq!(slab.check(a), Err(HandleError::AlreadyStopped));
        // The slot is reused: the old handle is now stale, the new one live.
        let b = slab.acquire(Kind::P2p, 0).unwrap();
        assert_ne!(a, b);
        assert_eq!(slab.release(a), Err(HandleError::Stale));
        assert!(slab.check(b).is_ok());
        assert_eq!(slab.release(0), Err(HandleError::Null));
        assert_eq!(slab.release(0xdead_beef), Err(HandleError::NeverIssued));
        // A well-formed handle with a generation the slot never reached.
        let future = encode(3, Kind::Coll, 1001, 0);
        assert_eq!(slab.check(future), Err(HandleError::NeverIssued));
        let out_of_range = encode(3, Kind::Coll, 1, 999);
        assert_eq!(slab.check(out_of_range), Err(HandleError::NeverIssued));
    }

    /// A thread's own free slots: a slot its stop freed is the next one it takes, a
    /// double stop is still caught, slots beyond its room go to the shared lists, and
    /// everything comes back when the thread gives its slots back.
    #[test]
    fn a_thread_reuses_the_slots_it_freed_and_gives_them_back() {
        let slab = Slab::new(4, 64, 1);
        let mut own = ThreadSlots::new();
        let first = slab.acquire_for_thread(Kind::Coll, 0, &mut own).unwrap();
        assert_eq!(
            slab.release_for_thread(first, &mut own).unwrap().kind,
            Kind::Coll
        );
        assert_eq!(own.len(), 1);
        assert_eq!(
            slab.release_for_thread(first, &mut own),
            Err(HandleError::AlreadyStopped)
        );
        assert_eq!(own.len(), 1, "a failed stop frees nothing");
        let second = slab.acquire_for_thread(Kind::Group, 0, &mut own).unwrap();
        assert!(own.is_empty());
        let (a, b) = (slab.bits_of(first).unwrap(), slab.bits_of(second).unwrap());
        assert_eq!(a.slot, b.slot, "the freed slot is taken again");
        assert_eq!(slab.check(first), Err(HandleError::Stale));
        slab.release_for_thread(second, &mut own).unwrap();

        // More stops than the thread keeps: the rest goes to the shared free list.
        let live: Vec<u64> = (0..THREAD_FREE_SLOTS + 8)
            .map(|_| {
                slab.acquire_for_thread(Kind::ProxyStep, 0, &mut own)
                    .unwrap()
            })
            .collect();
        for &handle in &live {
            slab.release_for_thread(handle, &mut own).unwrap();
        }
        assert_eq!(own.len(), THREAD_FREE_SLOTS);
        slab.give_back(&mut own);
        assert!(own.is_empty());
        let all: HashSet<u64> = (0..64)
            .filter_map(|_| slab.acquire(Kind::Coll, 0))
            .collect();
        assert_eq!(all.len(), 64, "every slot is free again");
        assert_eq!(slab.acquire(Kind::Coll, 0), None);
    }

    #[test]
    fn the_chained_stop_belongs_to_the_event_not_to_its_slot() {
        let slab = Slab::new(9, 1, 1).with_chain_slots();
        let chained = |handle| Chained {
            handle,
            recorded: false,
            states: true,
        };
        let first = slab.acquire(Kind::KernelCh, 0).unwrap();
        slab.set_chained(first, chained(0x100));
        // A stop on another thread: the first event's slot is freed and taken by the
        // next event before that thread claims the first one's chained stop.
        slab.release(first).unwrap();
        let second = slab.acquire(Kind::KernelCh, 0).unwrap();
        slab.set_chained(second, chained(0x200));
        assert!(
            !slab.claim_chained_stop(first),
            "the first no longer owns the slot"
        );
        assert!(slab.claim_chained_stop(second));
        assert!(!slab.claim_chained_stop(second), "one stop per event");
        // A slot freed and not taken again still gives its event's chained stop, once.
        slab.release(second).unwrap();
        assert_eq!(
            slab.chained_after_release(second).map(|(_, c)| c.handle),
            None
        );
        let third = slab.acquire(Kind::ProxyOp, 0).unwrap();
        slab.set_chained(third, chained(0x300));
        slab.release(third).unwrap();
        assert_eq!(
            slab.chained_after_release(third).map(|(_, c)| c.handle),
            Some(0x300)
        );
        assert!(slab.claim_chained_stop(third));
        assert_eq!(slab.chained_after_release(third), None);
    }

    #[test]
    fn a_slot_whose_generations_went_round_is_retired_and_no_handle_comes_twice() {
        let mut slab = Slab::new(5, 2, 1);
        // 8 generations (4 events) per slot instead of 2^27, to get there quickly.
        slab.wrap_mask = 7;
        let mut issued = HashSet::new();
        for _ in 0..8 {
            let h = slab.acquire(Kind::Coll, 0).unwrap();
            assert!(issued.insert(h), "{h:#x} issued twice");
            slab.release(h).unwrap();
        }
        assert_eq!(slab.retired(), 2, "both slots went round once");
        assert_eq!(
            slab.acquire(Kind::Coll, 0),
            None,
            "and are never used again"
        );
        const { assert!(MAX_SLOTS >= 1 << 20 && GEN_MASK == (1 << 27) - 1) };
    }

    #[test]
    fn a_full_slab_says_so_and_recovers() {
        let slab = Slab::new(1, 8, 2);
        let handles: Vec<u64> = (0..8)
            .map(|i| slab.acquire(Kind::ProxyOp, i).unwrap())
            .collect();
        assert_eq!(handles.iter().collect::<HashSet<_>>().len(), 8);
        assert_eq!(slab.acquire(Kind::ProxyOp, 0), None);
        slab.release(handles[5]).unwrap();
        assert!(slab.acquire(Kind::ProxyOp, 0).is_some());
    }

    #[test]
    fn concurrent_acquire_release_never_hands_out_a_live_slot_twice() {
        let slab = Slab::new(9, 1024, 4);
        std::thread::scope(|scope| {
            for t in 0..4 {
                let slab = &slab;
                scope.spawn(move || {
                    let mut live = Vec::new();
                    for i in 0..20_000 {
                        if let Some(h) = slab.acquire(Kind::ProxyStep, t) {
                            live.push(h);
                        }
                        if i % 3 != 0 {
                            if let Some(h) = live.pop() {
                                slab.release(h).unwrap();
                            }
                        }
                        if live.len() > 100 {
                            for h in live.drain(..) {
                                slab.release(h).unwrap();
                            }
                        }
                    }
                    for h in live {
                        slab.release(h).unwrap();
                    }
                });
            }
        });
        // Everything came back: the whole capacity can be taken again.
        let all: HashSet<u64> = (0..1024)
            .filter_map(|i| slab.acquire(Kind::Coll, i))
            .collect();
        assert_eq!(all.len(), 1024);
    }
}
