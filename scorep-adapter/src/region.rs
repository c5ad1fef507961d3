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
