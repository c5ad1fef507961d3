//! Logging through NCCL's logger (`logfn`, subsystem PROFILE).
//!
//! The logger is C-variadic and interprets its format: our text always travels as the
//! argument of a fixed `"%s"` format, never as the format itself. Before a v4+ `init`
//! hands us a logger (or on v1–v3, which have none), warnings go to stderr.

use nccl_profiler_abi::{log_level, ncclDebugLogger_t, LoggerFn, NCCL_PROFILE_SUBSYS};
use std::ffi::CString;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The most recent logger NCCL gave us (they are all the same function in practice).
static LOGGER: AtomicUsize = AtomicUsize::new(0);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Warn,
    Info,
}

pub fn set_logger(logger: ncclDebugLogger_t) {
    if let Some(f) = logger {
        LOGGER.store(f as usize, Ordering::Release);
    }
}

/// Forgets the logger (it lives in libnccl, which may be unloaded after the last finalize).
pub fn clear_logger() {
    LOGGER.store(0, Ordering::Release);
}

fn logger() -> ncclDebugLogger_t {
    let raw = LOGGER.load(Ordering::Acquire);
    if raw == 0 {
        return None;
    }
    // SAFETY: the value was stored from a non-NULL function pointer of this exact type.
    Some(unsafe { std::mem::transmute::<usize, LoggerFn>(raw) })
}

/// Logs one message. Never on the hot path: it formats and allocates.
pub fn log(level: Level, message: &str) {
    let text = format!("NCCL-Score-P: {message}");
    match logger() {
        Some(f) => {
            let c_text = CString::new(text.replace('\0', " ")).unwrap_or_default();
            let nccl_level = match level {
                Level::Warn => log_level::WARN,
                Level::Info => log_level::INFO,
            };
            // SAFETY: NCCL's logger takes (level, flags, file, line, fmt, ...); the format
            // is a static "%s" and its one argument a valid C string that outlives the call.
            unsafe {
                f(
                    nccl_level,
                    NCCL_PROFILE_SUBSYS,
                    c"plugin".as_ptr(),
                    0,
                    c"%s".as_ptr(),
                    c_text.as_ptr(),
                )
            };
        }
        None if level == Level::Warn => eprintln!("{text}"),
        None => {}
    }
}

pub fn warn(message: &str) {
    log(Level::Warn, message);
}

pub fn info(message: &str) {
    log(Level::Info, message);
}
