//! What the plugin says: problems the user must know about on stderr, details through
//! NCCL's logger (`logfn`, subsystem PROFILE).
//!
//! A warning (a bad setting, an unwritable directory, lost records, a failed merge) is
//! printed on stderr as one `[NCCL-Score-P] Warning: …` line, whatever `NCCL_DEBUG` says:
//! a job that ends without a trace must not end silently. Each distinct warning is printed
//! once per process, and at most [`MAX_STDERR_WARNINGS`] of them, so a failing disk cannot
//! flood the application's log. Warnings and informational messages also go to NCCL's
//! logger at INFO level (`NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=PROFILE` shows them in NCCL's
//! log, in context); at WARN level they would be printed twice.
//!
//! The logger is C-variadic and interprets its format: our text always travels as the
//! argument of a fixed `"%s"` format, never as the format itself.

use nccl_profiler_abi::{log_level, ncclDebugLogger_t, LoggerFn, NCCL_PROFILE_SUBSYS};
use std::collections::HashSet;
use std::ffi::CString;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The prefix of every line the plugin prints, in the style of Score-P's `[Score-P]`.
pub const PREFIX: &str = "[NCCL-Score-P]";

/// Distinct warnings printed on stderr per process; later ones go to NCCL's logger only.
pub const MAX_STDERR_WARNINGS: usize = 16;

/// The most recent logger NCCL gave us (they are all the same function in practice).
static LOGGER: AtomicUsize = AtomicUsize::new(0);

/// The warnings already printed on stderr.
static PRINTED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

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

/// Passes one message to NCCL's logger at INFO level, if NCCL gave us one.
fn to_nccl(message: &str) {
    let Some(f) = logger() else { return };
    let text = format!("NCCL-Score-P: {message}");
    let c_text = CString::new(text.replace('\0', " ")).unwrap_or_default();
    // SAFETY: NCCL's logger takes (level, flags, file, line, fmt, ...); the format is a
    // static "%s" and its one argument a valid C string that outlives the call.
    unsafe {
        f(
            log_level::INFO,
            NCCL_PROFILE_SUBSYS,
            c"plugin".as_ptr(),
            0,
            c"%s".as_ptr(),
            c_text.as_ptr(),
        )
    };
}

/// What to print on stderr for `message`: the line, the line and a note that later
/// warnings are not printed, or nothing (printed before, or too many).
fn stderr_line(printed: &mut HashSet<String>, message: &str) -> Option<String> {
    if printed.len() > MAX_STDERR_WARNINGS || printed.contains(message) {
        return None;
    }
    printed.insert(message.to_owned());
    let mut line = format!("{PREFIX} Warning: {message}\n");
    if printed.len() == MAX_STDERR_WARNINGS {
        // One more entry, so that nothing is printed after this note.
        printed.insert(String::new());
        line.push_str(&format!(
            "{PREFIX} Warning: further warnings are not printed here; \
             NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=PROFILE shows them\n"
        ));
    }
    Some(line)
}

/// A problem the user must know about: on stderr once, and to NCCL's logger. Never on the
/// hot path: it formats and allocates.
pub fn warn(message: &str) {
    let line = {
        let mut printed = PRINTED.lock().unwrap_or_else(|e| e.into_inner());
        stderr_line(printed.get_or_insert_with(HashSet::new), message)
    };
    if let Some(line) = line {
        // One write, so lines of several processes on one terminal do not interleave.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
    to_nccl(message);
}

/// What the plugin does, for `NCCL_DEBUG=INFO`: to NCCL's logger only.
pub fn info(message: &str) {
    to_nccl(message);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_warning_is_printed_once_and_the_number_is_capped() {
        let mut printed = HashSet::new();
        let first = stderr_line(&mut printed, "bad value").unwrap();
        assert_eq!(first, "[NCCL-Score-P] Warning: bad value\n");
        assert_eq!(stderr_line(&mut printed, "bad value"), None);
        for n in 1..MAX_STDERR_WARNINGS - 1 {
            let line = stderr_line(&mut printed, &format!("problem {n}")).unwrap();
            assert!(!line.contains("further warnings"), "{line}");
        }
        let last = stderr_line(&mut printed, "the last one").unwrap();
        assert!(last.starts_with("[NCCL-Score-P] Warning: the last one\n"));
        assert!(
            last.contains("further warnings are not printed here"),
            "{last}"
        );
        assert_eq!(stderr_line(&mut printed, "one too many"), None);
    }
}
