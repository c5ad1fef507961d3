//! Regions defined once and cached, string parameters, and size buckets.
//!
//! Every distinct parameter value becomes a call-tree node of its own in Score-P's
//! profile, so values must come from small sets: sizes go into power-of-four buckets,
//! never raw byte counts.

use crate::user::{RegionHandle, UserApi, INVALID_PARAMETER};
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The source "file" our regions name (Score-P shows it as the region's module).
const REGION_FILE: &CStr = c"NCCL";

/// A user region, defined in Score-P at its first use and put in a region group.
#[derive(Debug)]
pub struct Region {
    name: CString,
    group: &'static CStr,
    /// The Score-P handle; 0 when Score-P refused to define the region.
    handle: OnceLock<usize>,
}

impl Region {
    /// A region named `name` (interior NULs become spaces) in region group `group`.
    pub fn new(name: &str, group: &'static CStr) -> Region {
        Region {
            name: CString::new(name.replace('\0', " ")).unwrap_or_default(),
            group,
            handle: OnceLock::new(),
        }
    }

    pub fn name(&self) -> &CStr {
        &self.name
    }

    /// The handle, defining the region at the first call (Score-P serialises that itself).
    /// `None` when Score-P gave no handle: such a region is never entered.
    pub fn handle(&self, api: &UserApi) -> Option<RegionHandle> {
        let raw = *self
            .handle
            .get_or_init(|| match api.region_init(&self.name, REGION_FILE) {
                Some(handle) => {
                    api.region_set_group(handle, self.group);
                    handle.0
                }
                None => 0,
            });
        (raw != 0).then_some(RegionHandle(raw))
    }
}

/// A string parameter: its name and the handle Score-P fills in at the first use.
#[derive(Debug)]
pub struct Parameter {
    name: &'static CStr,
    handle: AtomicU64,
}

impl Parameter {
    pub const fn new(name: &'static CStr) -> Parameter {
        Parameter {
            name,
            handle: AtomicU64::new(INVALID_PARAMETER),
        }
    }

    /// Records `value` on this thread's innermost open region.
    pub fn record(&self, api: &UserApi, value: &CStr) {
        // Score-P writes the handle at the first use without a lock; two threads racing
        // there define the parameter twice, which its unification merges.
        api.parameter_string(self.handle.as_ptr(), self.name, value);
        // Keeps the compiler from assuming the value never changes behind its back.
        let _ = self.handle.load(Ordering::Relaxed);
    }
}

/// Power-of-four size buckets, `[lower, 4 × lower)`, named by their bounds.
const BUCKETS: [&CStr; 21] = [
    c"1-4 B",
    c"4-16 B",
    c"16-64 B",
    c"64-256 B",
    c"256 B-1 KiB",
    c"1-4 KiB",
    c"4-16 KiB",
    c"16-64 KiB",
    c"64-256 KiB",
    c"256 KiB-1 MiB",
    c"1-4 MiB",
    c"4-16 MiB",
    c"16-64 MiB",
    c"64-256 MiB",
    c"256 MiB-1 GiB",
    c"1-4 GiB",
    c"4-16 GiB",
    c"16-64 GiB",
    c"64-256 GiB",
    c"256 GiB-1 TiB",
    c">= 1 TiB",
];

/// The bucket of a payload size: one of 23 values whatever the sizes a job uses.
pub fn size_bucket(bytes: Option<u64>) -> &'static CStr {
    match bytes {
        None => c"unknown",
        Some(0) => c"0 B",
        Some(n) => {
            let index = (63 - n.leading_zeros()) as usize / 2;
            BUCKETS[index.min(BUCKETS.len() - 1)]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn sizes_fall_into_their_power_of_four_bucket() {
        assert_eq!(size_bucket(None), c"unknown");
        assert_eq!(size_bucket(Some(0)), c"0 B");
        assert_eq!(size_bucket(Some(1)), c"1-4 B");
        assert_eq!(size_bucket(Some(3)), c"1-4 B");
        assert_eq!(size_bucket(Some(4)), c"4-16 B");
        assert_eq!(size_bucket(Some(1023)), c"256 B-1 KiB");
        assert_eq!(size_bucket(Some(1024)), c"1-4 KiB");
        assert_eq!(size_bucket(Some(4095)), c"1-4 KiB");
        assert_eq!(size_bucket(Some(4096)), c"4-16 KiB");
        assert_eq!(size_bucket(Some(1 << 20)), c"1-4 MiB");
        assert_eq!(size_bucket(Some(1 << 40)), c">= 1 TiB");
        assert_eq!(size_bucket(Some(u64::MAX)), c">= 1 TiB");
    }

    #[test]
    fn every_size_gives_one_of_few_values() {
        let mut seen = BTreeSet::new();
        for shift in 0..64 {
            for n in [
                1u64 << shift,
                (1u64 << shift) | 1,
                (1u64 << shift).wrapping_sub(1),
            ] {
                seen.insert(size_bucket(Some(n)));
            }
        }
        assert!(seen.len() <= 23, "{seen:?}");
    }
}
