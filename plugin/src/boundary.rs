//! The one boundary between C and Rust: every function C calls (NCCL's profiler tables,
//! Score-P's metric-plugin callbacks, the exit handler) runs its body through [`guarded`].
//! A panic never unwinds into C: it is caught, counted, turns recording off for the rest
//! of the run, and the caller gets the fallback its return type chooses.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// What a caught panic does besides the fallback: the runtime registers its handler
/// (count it, turn recording off) when it is created.
static AFTER_PANIC: OnceLock<fn()> = OnceLock::new();

/// Sets what happens after a caught panic (the first call wins).
pub fn on_panic(handler: fn()) {
    let _ = AFTER_PANIC.set(handler);
}

/// What a C caller gets when the body panicked.
pub trait Fallback {
    fn fallback() -> Self;
}

impl Fallback for () {
    fn fallback() {}
}

/// `ncclSuccess` (NCCL ignores every result but `init`'s, and handles a failed `init`
/// unsafely in several releases), and Score-P's "initialised".
impl Fallback for i32 {
    fn fallback() -> i32 {
        0
    }
}

/// Nothing: no value, no sample.
impl Fallback for u64 {
    fn fallback() -> u64 {
        0
    }
}

impl<T> Fallback for *mut T {
    fn fallback() -> *mut T {
        std::ptr::null_mut()
    }
}

impl Fallback for scorep_adapter::metric::PluginInfo {
    fn fallback() -> Self {
        scorep_adapter::metric::PluginInfo::zeroed()
    }
}

/// Runs the body of a C-callable function; after a panic, the fallback of `R`.
#[inline(always)]
pub fn guarded<R: Fallback>(body: impl FnOnce() -> R) -> R {
    guarded_or(R::fallback(), body)
}

/// Runs the body of a C-callable function; after a panic, `fallback`.
#[inline(always)]
pub fn guarded_or<R>(fallback: R, body: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(value) => value,
        Err(_) => {
            if let Some(&handler) = AFTER_PANIC.get() {
                let _ = catch_unwind(handler);
            }
            fallback
        }
    }
}

/// Debug builds panic when an entry point receives this value as a descriptor type,
/// handle or context, so tests can prove that the boundary catches panics.
pub const PANIC_PROBE: u64 = 0x5041_4e49_4350_524f;

#[inline(always)]
pub fn panic_probe(value: u64) {
    if cfg!(debug_assertions) && value == PANIC_PROBE {
        panic!("panic probe");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_gives_the_fallback_of_the_return_type() {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        assert_eq!(guarded(|| -> i32 { panic!("probe") }), 0);
        assert_eq!(guarded(|| -> u64 { panic!("probe") }), 0);
        assert!(guarded(|| -> *mut u8 { panic!("probe") }).is_null());
        assert_eq!(guarded_or(-1, || -> i32 { panic!("probe") }), -1);
        std::panic::set_hook(hook);
        assert_eq!(guarded(|| 7_i32), 7);
    }
}
