//! The logger nccl-sim hands to plugins at `init` (profiler API v4+), like NCCL's
//! `ncclDebugLog`: a C-variadic function (in `csrc/logger.c`) that formats the message and
//! passes the text here. Lines are printed when `NCCL_DEBUG` asks for their level, as NCCL
//! does, and kept so tests can read what a plugin logged.

use nccl_profiler_abi::LoggerFn;
use std::ffi::{c_char, c_int, c_ulong, CStr};
use std::sync::Mutex;

extern "C" {
    fn nccl_sim_logger(
        level: c_int,
        flags: c_ulong,
        file: *const c_char,
        line: c_int,
        fmt: *const c_char,
        ...
    );
}

/// One message a plugin logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    pub level: i32,
    pub flags: u64,
    pub text: String,
}

static LINES: Mutex<Vec<LogLine>> = Mutex::new(Vec::new());

/// The logger to pass to a plugin's `init`.
pub fn logger() -> LoggerFn {
    nccl_sim_logger
}

/// Everything plugins logged in this process so far.
pub fn lines() -> Vec<LogLine> {
    LINES.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// NCCL's levels: WARN 2, INFO 3, TRACE 5; `NCCL_DEBUG` unset prints nothing.
fn printed_up_to() -> i32 {
    match std::env::var("NCCL_DEBUG")
        .unwrap_or_default()
        .to_ascii_uppercase()
        .as_str()
    {
        "VERSION" => 1,
        "WARN" => 2,
        "INFO" => 3,
        "TRACE" => 5,
        _ => 0,
    }
}

#[no_mangle]
extern "C" fn nccl_sim_log_line(
    level: c_int,
    flags: c_ulong,
    _file: *const c_char,
    _line: c_int,
    text: *const c_char,
) {
    let text = if text.is_null() {
        String::new()
    } else {
        // SAFETY: the C side passes its NUL-terminated buffer.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    };
    if level <= printed_up_to() {
        let tag = if level <= 2 { "WARN" } else { "INFO" };
        eprintln!("nccl-sim {tag} {text}");
    }
    LINES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(LogLine { level, flags, text });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_c_logger_formats_and_hands_over() {
        // SAFETY: a C-variadic call with a format and matching arguments.
        unsafe {
            (logger())(
                3,
                0x4000,
                c"file".as_ptr(),
                1,
                c"%s has %d ranks".as_ptr(),
                c"comm".as_ptr(),
                8 as c_int,
            )
        };
        assert!(lines()
            .iter()
            .any(|l| l.text == "comm has 8 ranks" && l.level == 3 && l.flags == 0x4000));
    }
}
