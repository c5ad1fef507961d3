//! NCCL's names (operation, type, algorithm, protocol) resolved by their address, so that
//! the callback path does not read again a name it has seen in read-only memory.
//!
//! NCCL passes its names as string literals: the same address for the same name, in a
//! segment of `libnccl.so` mapped without write permission. Each set of names has a small
//! table of `address → value` (the tables are in [`crate::decode`]) that the callback path
//! looks up before it reads the string.
//! A hit reads nothing at the address, so nothing NCCL passes is dereferenced on a hit,
//! whatever it points to. A miss reads the string as before ([`crate::c_string::bounded`])
//! and offers the address to the collector, which fills the table off the callback path:
//! only an address whose whole string lies in a loaded object's segment mapped without
//! write permission (`dl_iterate_phdr`) is entered, because only there can the bytes not
//! change while the object stays loaded. Names in writable memory (a heap buffer, a
//! stack) are never entered and are read at every call. The tables are emptied after the
//! last finalize, as the table of readable memory is, since a library may be unloaded
//! then and another mapped at its addresses.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Entries per table (a power of two); NCCL has at most 16 names per set.
const ENTRIES: usize = 64;
/// Entries looked at from an address's home entry (linear probing).
const PROBES: usize = 4;
/// Addresses a table holds for the collector to look at (a power of two).
const OFFERS: usize = 8;
/// Addresses the collector remembers as not to be entered (direct-mapped), so that a name
/// in writable memory, offered at every call, is not looked up in the loader's list at
/// every pass.
const REFUSED: usize = 16;
/// Addresses at or above this do not fit beside a value in one entry (none on the
/// platforms NCCL runs on; such an address is simply never entered).
const ADDRESS_LIMIT: usize = 1 << 56;

/// One set of names: what an address resolved to, and the addresses missed since the
/// collector last looked.
pub struct NameCache {
    /// `address << 8 | value`; 0 is empty. Entries are only added, and all emptied at
    /// once, so an empty entry ends a probe.
    entries: [AtomicU64; ENTRIES],
    offered: [AtomicUsize; OFFERS],
    /// Written and read by the collector only.
    refused: [AtomicUsize; REFUSED],
    /// The value of a name's bytes (the same mapping the callback path applies on a miss).
    value_of: fn(&[u8]) -> u8,
}

impl NameCache {
    pub const fn new(value_of: fn(&[u8]) -> u8) -> NameCache {
        NameCache {
            entries: [const { AtomicU64::new(0) }; ENTRIES],
            offered: [const { AtomicUsize::new(0) }; OFFERS],
            refused: [const { AtomicUsize::new(0) }; REFUSED],
            value_of,
        }
    }

    /// The value of the name at `ptr`: from the table, or read within bounds (see
    /// [`crate::c_string::bounded`]); `None` when NULL, unreadable or overlong.
    ///
    /// # Safety
    /// `ptr` is NULL or points to memory that stays as it is during the call.
    #[inline]
    pub unsafe fn resolve(&self, ptr: *const c_char) -> Option<u8> {
        let address = ptr as usize;
        if address == 0 {
            return None;
        }
        match self.cached(address) {
            Some(value) => Some(value),
            // SAFETY: forwarded from the caller.
            None => unsafe { self.missed(ptr) },
        }
    }

    /// The value entered for `address`, if any: one load when it is in its home entry.
    #[inline]
    fn cached(&self, address: usize) -> Option<u8> {
        let home = home(address);
        for probe in 0..PROBES {
            let entry = self.entries[(home + probe) % ENTRIES].load(Ordering::Relaxed);
            if entry >> 8 == address as u64 {
                return Some(entry as u8);
            }
            if entry == 0 {
                return None;
            }
        }
        None
    }

    /// A name not in the table: read it, and offer its address to the collector.
    ///
    /// # Safety
    /// As for [`NameCache::resolve`].
    #[cold]
    #[inline(never)]
    unsafe fn missed(&self, ptr: *const c_char) -> Option<u8> {
        let address = ptr as usize;
        self.offered[home(address) % OFFERS].store(address, Ordering::Relaxed);
        // SAFETY: forwarded from the caller.
        let bytes = unsafe { crate::c_string::bounded(ptr, crate::c_string::MAX_NAME) }?;
        Some((self.value_of)(bytes))
    }

    /// On the collector: enters every offered address whose name lies in read-only
    /// memory of a loaded object.
    pub fn enter_offered(&self) {
        for offer in &self.offered {
            let address = offer.swap(0, Ordering::Relaxed);
            if address == 0 || address >= ADDRESS_LIMIT || self.cached(address).is_some() {
                continue;
            }
            let refused = &self.refused[home(address) % REFUSED];
            if refused.load(Ordering::Relaxed) == address {
                continue;
            }
            // SAFETY: read within bounds, and only from memory found readable.
            let Some(bytes) = (unsafe {
                crate::c_string::bounded(address as *const c_char, crate::c_string::MAX_NAME)
            }) else {
                continue;
            };
            // The name and its NUL.
            if !in_read_only_segment(address, bytes.len() + 1) {
                refused.store(address, Ordering::Relaxed);
                continue;
            }
            let entry = (address as u64) << 8 | u64::from((self.value_of)(bytes));
            let home = home(address);
            for probe in 0..PROBES {
                let slot = &self.entries[(home + probe) % ENTRIES];
                if slot
                    .compare_exchange(0, entry, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    break;
                }
            }
        }
    }

    /// Forgets every address (and every offer).
    pub fn clear(&self) {
        for entry in &self.entries {
            entry.store(0, Ordering::Relaxed);
        }
        for offer in self.offered.iter().chain(&self.refused) {
            offer.store(0, Ordering::Relaxed);
        }
    }

    /// Addresses entered (for tests).
    pub fn len(&self) -> usize {
        self.entries
            .iter()
            .filter(|entry| entry.load(Ordering::Relaxed) != 0)
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An address's home entry (Fibonacci hashing: literals a few bytes apart spread out).
#[inline(always)]
fn home(address: usize) -> usize {
    ((address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize
}

/// Whether the `len` bytes from `address` lie in one segment of a loaded object (the
/// executable or a shared library) that is mapped without write permission.
fn in_read_only_segment(address: usize, len: usize) -> bool {
    struct Query {
        start: usize,
        end: usize,
        found: bool,
    }

    /// Called by `dl_iterate_phdr` for every loaded object; 1 stops the walk.
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        crate::boundary::guarded_or(1, || {
            // SAFETY: `data` is the query passed below, `info` the loader's description of
            // one object, with `dlpi_phnum` program headers at `dlpi_phdr`, valid for the
            // duration of this call.
            let (query, info) = unsafe { (&mut *data.cast::<Query>(), &*info) };
            if info.dlpi_phdr.is_null() {
                return 0;
            }
            // SAFETY: as above.
            let headers =
                unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
            let base = info.dlpi_addr as usize;
            for header in headers {
                if header.p_type != libc::PT_LOAD || header.p_flags & libc::PF_W != 0 {
                    continue;
                }
                let start = base.wrapping_add(header.p_vaddr as usize);
                let end = start.saturating_add(header.p_memsz as usize);
                if start <= query.start && query.end <= end {
                    query.found = true;
                    return 1;
                }
            }
            0
        })
    }

    let Some(end) = address.checked_add(len) else {
        return false;
    };
    let mut query = Query {
        start: address,
        end,
        found: false,
    };
    // SAFETY: `visit` matches the callback type and only reads what the loader passes;
    // `query` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut query as *mut Query).cast()) };
    query.found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A set of three names.
    fn value_of(bytes: &[u8]) -> u8 {
        match bytes {
            b"AllReduce" => 1,
            b"Send" => 2,
            b"Recv" => 3,
            _ => 0,
        }
    }

    static NAMES: NameCache = NameCache::new(value_of);

    /// A literal is entered after the collector's look and then resolved without a read;
    /// a name in writable memory is never entered and is read at every call, so a change
    /// of its bytes is seen.
    #[test]
    fn only_names_in_read_only_memory_are_resolved_by_address() {
        let literal = c"AllReduce";
        // SAFETY: a literal, and a NUL-terminated heap buffer below.
        unsafe {
            assert_eq!(NAMES.resolve(literal.as_ptr()), Some(1));
            assert!(NAMES.is_empty(), "entered only by the collector");
            NAMES.enter_offered();
            assert_eq!(NAMES.len(), 1);
            assert_eq!(NAMES.cached(literal.as_ptr() as usize), Some(1));
            assert_eq!(NAMES.resolve(literal.as_ptr()), Some(1));

            let mut heap = b"Send\0\0\0\0".to_vec();
            assert_eq!(NAMES.resolve(heap.as_ptr().cast()), Some(2));
            NAMES.enter_offered();
            assert_eq!(NAMES.len(), 1, "writable memory is never entered");
            let heap_address = heap.as_ptr() as usize;
            assert_eq!(
                NAMES.refused[home(heap_address) % REFUSED].load(Ordering::Relaxed),
                heap_address,
                "and not looked up again"
            );
            heap[..5].copy_from_slice(b"Recv\0");
            assert_eq!(NAMES.resolve(heap.as_ptr().cast()), Some(3));

            assert_eq!(NAMES.resolve(std::ptr::null()), None);
            NAMES.clear();
            assert!(NAMES.is_empty());
            assert_eq!(NAMES.cached(literal.as_ptr() as usize), None);
        }
    }

    #[test]
    fn read_only_segments_are_told_from_writable_memory() {
        static WRITABLE: AtomicU64 = AtomicU64::new(1);
        let literal = c"ncclFloat32";
        assert!(in_read_only_segment(literal.as_ptr() as usize, 12));
        assert!(!in_read_only_segment(&WRITABLE as *const _ as usize, 8));
        let stack = [0u8; 16];
        assert!(!in_read_only_segment(stack.as_ptr() as usize, 16));
        assert!(!in_read_only_segment(usize::MAX - 4, 8));
    }

    #[test]
    fn colliding_addresses_share_a_probe_sequence() {
        static TABLE: NameCache = NameCache::new(|_| 7);
        // Addresses with the same home entry, entered by hand as the collector would.
        let base = 0x1000_usize;
        let same_home: Vec<usize> = (0..100_000)
            .map(|i| base + i * 8)
            .filter(|&a| home(a) == home(base))
            .take(PROBES + 1)
            .collect();
        for (value, &address) in same_home.iter().enumerate().take(PROBES) {
            let slot = &TABLE.entries[(home(address) + value) % ENTRIES];
            slot.store((address as u64) << 8 | value as u64, Ordering::Relaxed);
        }
        for (value, &address) in same_home.iter().enumerate().take(PROBES) {
            assert_eq!(TABLE.cached(address), Some(value as u8));
        }
        assert_eq!(
            TABLE.cached(same_home[PROBES]),
            None,
            "beyond the probes: a miss"
        );
    }
}
