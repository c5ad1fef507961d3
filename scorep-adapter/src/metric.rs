//! Score-P's metric-plugin interface, version 1 (`SCOREP_MetricPlugins.h`,
//! `SCOREP_MetricTypes.h`), as plain `repr(C)` types.
//!
//! Score-P loads `lib<name>.so` for every name in `SCOREP_METRIC_PLUGINS` (with
//! `dlopen(RTLD_NOW)`, searching `LD_LIBRARY_PATH`), calls
//! `SCOREP_MetricPlugin_<name>_get_info`, hands its clock over with
//! `set_clock_function` before `initialize`, asks `get_event_info` for each token of
//! `SCOREP_METRIC_<NAME>`, `add_counter` for each metric, `synchronize` at the begin and end
//! of measurement, and, for asynchronous plugins, `get_all_values` at the end. Score-P
//! frees what `get_event_info` and `get_all_values` return with `free`.

use std::ffi::c_char;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `SCOREP_METRIC_PLUGIN_VERSION`.
pub const PLUGIN_VERSION: u32 = 1;

/// `SCOREP_MetricPer`.
pub mod per {
    pub const THREAD: u32 = 0;
    pub const PROCESS: u32 = 1;
    pub const HOST: u32 = 2;
    pub const ONCE: u32 = 3;
}

/// `SCOREP_MetricSynchronicity`.
pub mod sync {
    pub const STRICTLY_SYNC: u32 = 0;
    pub const SYNC: u32 = 1;
    pub const ASYNC_EVENT: u32 = 2;
    pub const ASYNC: u32 = 3;
}

/// `SCOREP_MetricSynchronizationMode`.
pub mod sync_mode {
    pub const BEGIN: u32 = 0;
    pub const BEGIN_MPP: u32 = 1;
    pub const END: u32 = 2;
}

/// `SCOREP_MetricMode` (the ones used here).
pub mod mode {
    pub const ACCUMULATED_START: u32 = 0;
    pub const ABSOLUTE_POINT: u32 = 4;
}

/// `SCOREP_MetricValueType`.
pub mod value_type {
    pub const INT64: u32 = 0;
    pub const UINT64: u32 = 1;
    pub const DOUBLE: u32 = 2;
}

/// `SCOREP_MetricBase`.
pub mod base {
    pub const BINARY: u32 = 0;
    pub const DECIMAL: u32 = 1;
}

/// Score-P's clock: ticks of its timer (TSC by default, see `SCOREP_TIMER`).
pub type ClockFn = unsafe extern "C" fn() -> u64;

/// `SCOREP_Metric_Plugin_MetricProperties`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MetricProperties {
    pub name: *mut c_char,
    pub description: *mut c_char,
    pub mode: u32,
    pub value_type: u32,
    pub base: u32,
    pub exponent: i64,
    pub unit: *mut c_char,
}

/// `SCOREP_MetricTimeValuePair`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimeValuePair {
    pub timestamp: u64,
    pub value: u64,
}

/// `SCOREP_Metric_Plugin_Info`, returned by value from `get_info`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PluginInfo {
    pub plugin_version: u32,
    pub run_per: u32,
    pub sync: u32,
    pub delta_t: u64,
    pub initialize: Option<unsafe extern "C" fn() -> i32>,
    pub finalize: Option<unsafe extern "C" fn()>,
    pub get_event_info: Option<unsafe extern "C" fn(token: *mut c_char) -> *mut MetricProperties>,
    pub add_counter: Option<unsafe extern "C" fn(metric: *mut c_char) -> i32>,
    pub get_current_value: Option<unsafe extern "C" fn(id: i32) -> u64>,
    pub get_optional_value: Option<unsafe extern "C" fn(id: i32, value: *mut u64) -> bool>,
    pub set_clock_function: Option<unsafe extern "C" fn(clock: Option<ClockFn>)>,
    pub get_all_values: Option<unsafe extern "C" fn(id: i32, list: *mut *mut TimeValuePair) -> u64>,
    /// `is_responsible` is a C `bool`: taken as a byte, so that a value other than 0 or 1
    /// is not undefined behaviour on our side.
    pub synchronize: Option<unsafe extern "C" fn(is_responsible: u8, mode: u32)>,
    pub reserved: [u64; 92],
}

impl PluginInfo {
    /// All zero: no callback, version 0 (Score-P expects unused fields zeroed).
    pub const fn zeroed() -> PluginInfo {
        PluginInfo {
            plugin_version: 0,
            run_per: 0,
            sync: 0,
            delta_t: 0,
            initialize: None,
            finalize: None,
            get_event_info: None,
            add_counter: None,
            get_current_value: None,
            get_optional_value: None,
            set_clock_function: None,
            get_all_values: None,
            synchronize: None,
            reserved: [0; 92],
        }
    }
}

/// The name of the entry point Score-P looks for in `lib<plugin>.so`.
pub fn entry_symbol(plugin: &str) -> String {
    format!("SCOREP_MetricPlugin_{plugin}_get_info")
}

/// Where a clock function handed over by Score-P is kept (process-wide, lock-free).
#[derive(Debug, Default)]
pub struct ClockSlot(AtomicUsize);

impl ClockSlot {
    pub const fn new() -> ClockSlot {
        ClockSlot(AtomicUsize::new(0))
    }

    pub fn set(&self, clock: Option<ClockFn>) {
        self.0
            .store(clock.map_or(0, |f| f as usize), Ordering::Release);
    }

    pub fn get(&self) -> Option<ClockFn> {
        let raw = self.0.load(Ordering::Acquire);
        // SAFETY: a non-zero value was stored from a function pointer of this exact type.
        (raw != 0).then(|| unsafe { std::mem::transmute::<usize, ClockFn>(raw) })
    }

    /// Score-P's clock now, if it was handed over.
    pub fn read(&self) -> Option<u64> {
        // SAFETY: Score-P's clock function takes nothing and can be called from any
        // thread (it reads the timer).
        self.get().map(|clock| unsafe { clock() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn the_layout_is_score_p_s() {
        // Three 32-bit fields, padding, a 64-bit field, nine function pointers, and 92
        // reserved 64-bit words (x86_64 and aarch64 Linux).
        assert_eq!(offset_of!(PluginInfo, run_per), 4);
        assert_eq!(offset_of!(PluginInfo, sync), 8);
        assert_eq!(offset_of!(PluginInfo, delta_t), 16);
        assert_eq!(offset_of!(PluginInfo, initialize), 24);
        assert_eq!(offset_of!(PluginInfo, set_clock_function), 24 + 6 * 8);
        assert_eq!(offset_of!(PluginInfo, synchronize), 24 + 8 * 8);
        assert_eq!(offset_of!(PluginInfo, reserved), 24 + 9 * 8);
        assert_eq!(size_of::<PluginInfo>(), 24 + 9 * 8 + 92 * 8);
        assert_eq!(offset_of!(MetricProperties, mode), 16);
        assert_eq!(offset_of!(MetricProperties, exponent), 32);
        assert_eq!(size_of::<MetricProperties>(), 48);
        assert_eq!(size_of::<TimeValuePair>(), 16);
    }

    unsafe extern "C" fn fixed_clock() -> u64 {
        42
    }

    #[test]
    fn a_clock_slot_hands_the_clock_back() {
        let slot = ClockSlot::new();
        assert_eq!(slot.read(), None);
        slot.set(Some(fixed_clock));
        assert_eq!(slot.read(), Some(42));
        slot.set(None);
        assert!(slot.get().is_none());
    }
}
