//! The collector's open events, found by their handle's slab slot instead of by a hash.
//!
//! Every record of an event carries its handle, so the collector looks an open event up
//! several times (its children's parent, its states, its stop). The slot bits of a handle
//! index a small table here; the whole handle is compared, so a stale or foreign value
//! finds nothing. Two open events share a slot only when the first one's stop record has
//! not been applied when the slot's next event starts (a stop lost with a full ring, or one
//! still on its way): the first one then moves to a hash map, where it stays findable by its
//! whole handle until it closes.

use crate::handle;
use rustc_hash::FxHashMap as HashMap;

/// Open events by handle.
pub struct OpenTable<T> {
    /// Per slab slot: 1 + the index in `entries` of the open event holding it (0: none).
    by_slot: Vec<u32>,
    /// The open events found by their slot, densely.
    entries: Vec<(u64, T)>,
    /// Open events whose slot a newer open event holds.
    displaced: HashMap<u64, T>,
}

impl<T> Default for OpenTable<T> {
    fn default() -> Self {
        OpenTable {
            by_slot: Vec::new(),
            entries: Vec::new(),
            displaced: HashMap::default(),
        }
    }
}

impl<T> OpenTable<T> {
    /// The index in `entries` of `handle`'s event, when its slot holds it.
    #[inline]
    fn index(&self, handle: u64) -> Option<usize> {
        let at = *self.by_slot.get(handle::slot_bits(handle))?;
        let index = (at as usize).checked_sub(1)?;
        (self.entries[index].0 == handle).then_some(index)
    }

    #[inline]
    pub fn get(&self, handle: u64) -> Option<&T> {
        match self.index(handle) {
            Some(index) => Some(&self.entries[index].1),
            None if self.displaced.is_empty() => None,
            None => self.displaced.get(&handle),
        }
    }

    #[inline]
    pub fn get_mut(&mut self, handle: u64) -> Option<&mut T> {
        match self.index(handle) {
            Some(index) => Some(&mut self.entries[index].1),
            None if self.displaced.is_empty() => None,
            None => self.displaced.get_mut(&handle),
        }
    }

    #[inline]
    pub fn contains_key(&self, handle: u64) -> bool {
        self.get(handle).is_some()
    }

    /// Adds an open event; one already open with the same handle is replaced and returned.
    pub fn insert(&mut self, handle: u64, value: T) -> Option<T> {
        if let Some(index) = self.index(handle) {
            return Some(std::mem::replace(&mut self.entries[index].1, value));
        }
        let replaced = if self.displaced.is_empty() {
            None
        } else {
            self.displaced.remove(&handle)
        };
        let slot = handle::slot_bits(handle);
        if self.by_slot.len() <= slot {
            self.by_slot.resize(slot + 1, 0);
        }
        if self.by_slot[slot] != 0 {
            // The slot's earlier event is still open: it keeps its handle elsewhere.
            let (earlier, event) = self.take(self.by_slot[slot] as usize - 1);
            self.displaced.insert(earlier, event);
        }
        self.entries.push((handle, value));
        self.by_slot[slot] = self.entries.len() as u32;
        replaced
    }

    /// `handle`'s event, added by `make` when there is none.
    #[inline]
    pub fn get_or_insert_with(&mut self, handle: u64, make: impl FnOnce() -> T) -> &mut T {
        if let Some(index) = self.index(handle) {
            return &mut self.entries[index].1;
        }
        if self.displaced.contains_key(&handle) {
            return self.displaced.get_mut(&handle).expect("a displaced entry");
        }
        // Not open anywhere: `insert` adds it last.
        self.insert(handle, make());
        &mut self.entries.last_mut().expect("an entry just added").1
    }

    /// Removes and returns `handle`'s event.
    #[inline(always)]
    pub fn remove(&mut self, handle: u64) -> Option<T> {
        match self.index(handle) {
            Some(index) => Some(self.take(index).1),
            None if self.displaced.is_empty() => None,
            None => self.remove_displaced(handle),
        }
    }

    #[cold]
    #[inline(never)]
    fn remove_displaced(&mut self, handle: u64) -> Option<T> {
        self.displaced.remove(&handle)
    }

    /// Takes entry `index` out; the last entry takes its place.
    #[inline(always)]
    fn take(&mut self, index: usize) -> (u64, T) {
        let taken = self.entries.swap_remove(index);
        self.by_slot[handle::slot_bits(taken.0)] = 0;
        if let Some(&(moved, _)) = self.entries.get(index) {
            self.by_slot[handle::slot_bits(moved)] = index as u32 + 1;
        }
        taken
    }

    pub fn len(&self) -> usize {
        self.entries.len() + self.displaced.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every open event with its handle, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        self.entries
            .iter()
            .map(|(handle, value)| (*handle, value))
            .chain(
                self.displaced
                    .iter()
                    .map(|(&handle, value)| (handle, value)),
            )
    }

    /// Every open event's handle, in no particular order.
    pub fn handles(&self) -> impl Iterator<Item = u64> + '_ {
        self.iter().map(|(handle, _)| handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Kind;
    use std::collections::BTreeMap;

    fn handle(slot: u32, generation: u32) -> u64 {
        handle::encode(0x42, Kind::ProxyStep, generation, slot)
    }

    /// Against a map, under inserts, removals and lookups of handles that share slots
    /// (an event whose slot was reused while it was open) and of handles never inserted.
    #[test]
    fn the_table_finds_what_a_map_finds() {
        let mut table = OpenTable::default();
        let mut map = BTreeMap::new();
        let mut next = crate::test_random::xorshift(0x9e37_79b9);
        for round in 0..20_000 {
            let h = handle((next() % 64) as u32, (next() % 4) as u32 * 2 + 1);
            match next() % 4 {
                0 | 1 => assert_eq!(table.insert(h, round), map.insert(h, round)),
                2 => assert_eq!(table.remove(h), map.remove(&h)),
                3 if round % 2 == 0 => {
                    *table.get_or_insert_with(h, || -1) += 1;
                    *map.entry(h).or_insert(-1) += 1;
                }
                _ => {
                    if let Some(value) = table.get_mut(h) {
                        *value += 1;
                    }
                    if let Some(value) = map.get_mut(&h) {
                        *value += 1;
                    }
                }
            }
            assert_eq!(table.get(h), map.get(&h));
            assert_eq!(table.len(), map.len());
        }
        let mut all: Vec<(u64, i32)> = table.iter().map(|(h, &v)| (h, v)).collect();
        all.sort_unstable();
        assert_eq!(all, map.into_iter().collect::<Vec<_>>());
        // A value that is no handle of ours, and one whose slot holds another event.
        assert_eq!(table.get(0), None);
        assert_eq!(table.get(u64::MAX), None);
    }

    #[test]
    fn an_event_whose_slot_is_taken_stays_open_under_its_handle() {
        let mut table = OpenTable::default();
        let (earlier, later) = (handle(7, 1), handle(7, 3));
        table.insert(earlier, "earlier");
        table.insert(later, "later");
        assert_eq!(table.get(earlier), Some(&"earlier"));
        assert_eq!(table.get(later), Some(&"later"));
        assert_eq!(table.remove(earlier), Some("earlier"));
        assert_eq!(table.remove(earlier), None);
        assert_eq!(table.get(later), Some(&"later"));
        assert_eq!(table.len(), 1);
    }
}
