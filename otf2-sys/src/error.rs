//! OTF2's errors and warnings, delivered to Rust.
//!
//! OTF2 reports problems through one process-wide error callback whose last argument is a
//! `va_list`, which stable Rust cannot read. `csrc/error_shim.c` registers a C callback that
//! formats the message with `vsnprintf` and passes the text to a Rust function here. Once
//! [`install_error_handler`] has run, OTF2 (our statically linked copy of it) no longer
//! prints `[OTF2] …` lines on stderr; instead every report is
//!
//! 1. counted ([`error_count`], never reset),
//! 2. kept, up to [`KEPT_REPORTS`] of them since the last drain ([`drain_error_reports`],
//!    [`drain_thread_error_reports`]), and
//! 3. passed to the handler, if one was given.
//!
//! OTF2 calls the callback on the thread whose OTF2 call failed, so each report records
//! that thread: tests that run side by side in one process can still check only their own.
//! Some failures are reported only this way while the call itself (typically
//! `OTF2_Archive_Close`) still returns `OTF2_SUCCESS`, so writers should assert that
//! no report arrived, not only that return codes were `OTF2_SUCCESS`.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, CStr};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, Once};
use std::thread::{self, ThreadId};

use crate::bindings::{OTF2_ErrorCode, OTF2_Error_GetName, OTF2_WARNING};

/// How many reports are kept between two drains; later ones are only counted.
pub const KEPT_REPORTS: usize = 256;

/// A handler for OTF2 reports; see [`install_error_handler`].
pub type ErrorHandler = fn(&ErrorReport);

/// One error or warning from OTF2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorReport {
    /// The `OTF2_ErrorCode` (`OTF2_WARNING` for warnings).
    pub code: OTF2_ErrorCode,
    /// `OTF2_Error_GetName(code)`, e.g. `"INVALID_ARGUMENT"`.
    pub code_name: String,
    /// OTF2 source file, line and function that reported it.
    pub file: String,
    pub line: u64,
    pub function: String,
    /// The formatted message, e.g. `Passed timestamp is smaller than last written one! (50
    /// < 100)`.
    pub message: String,
    /// The thread whose OTF2 call reported it.
    pub thread: ThreadId,
}

impl ErrorReport {
    /// Whether OTF2 reported this as a warning rather than an error.
    pub fn is_warning(&self) -> bool {
        self.code == OTF2_WARNING
    }
}

impl fmt::Display for ErrorReport {
    /// The format OTF2 itself prints: `[OTF2] file:line: error: CODE: message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.is_warning() {
            "warning"
        } else {
            "error"
        };
        write!(
            f,
            "[OTF2] {}:{}: {kind}: {}: {}",
            self.file, self.line, self.code_name, self.message
        )
    }
}

/// A ready-made handler that prints the report on stderr, the way OTF2 would.
pub fn print_to_stderr(report: &ErrorReport) {
    eprintln!("{report}");
}

/// A ready-made handler that does nothing: reports are only counted and kept.
pub fn ignore(_: &ErrorReport) {}

static INSTALL: Once = Once::new();
static HANDLER: Mutex<Option<ErrorHandler>> = Mutex::new(None);
static REPORTS: Mutex<Vec<ErrorReport>> = Mutex::new(Vec::new());
static COUNT: AtomicU64 = AtomicU64::new(0);

type Sink = unsafe extern "C" fn(*const c_char, u64, *const c_char, OTF2_ErrorCode, *const c_char);

unsafe extern "C" {
    /// In `csrc/error_shim.c`: stores `sink` and registers the va_list callback with OTF2.
    fn otf2_sys_install_error_shim(sink: Sink);
}

/// Routes OTF2's error and warning reports to Rust: counted, kept, and passed to `handler`
/// (which replaces the handler of an earlier call). Use [`ignore`] to only count and keep
/// them, [`print_to_stderr`] to also print them.
///
/// The C callback is registered with OTF2 once, on the first call. OTF2's registration is not
/// thread-safe, so make the first call before other threads use OTF2 (the writer does it
/// when it starts).
pub fn install_error_handler(handler: ErrorHandler) {
    *lock(&HANDLER) = Some(handler);
    INSTALL.call_once(|| {
        // SAFETY: `sink` has the signature the shim expects and lives forever.
        unsafe { otf2_sys_install_error_shim(sink) };
    });
}

/// How many reports OTF2 has made since [`install_error_handler`] was first called.
pub fn error_count() -> u64 {
    COUNT.load(Ordering::Relaxed)
}

/// Takes the kept reports of all threads.
pub fn drain_error_reports() -> Vec<ErrorReport> {
    std::mem::take(&mut *lock(&REPORTS))
}

/// Takes the kept reports made on the calling thread and leaves the others.
pub fn drain_thread_error_reports() -> Vec<ErrorReport> {
    let me = thread::current().id();
    let mut reports = lock(&REPORTS);
    let (mine, others): (Vec<_>, Vec<_>) = reports.drain(..).partition(|r| r.thread == me);
    *reports = others;
    mine
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A handler that panicked must not silence every later report.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Converts a C string from OTF2 that may be NULL.
///
/// # Safety
/// `text` is NULL or a NUL-terminated string valid for the call.
unsafe fn text(text: *const c_char) -> String {
    if text.is_null() {
        String::new()
    } else {
        // SAFETY: the caller guarantees a NUL-terminated string.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    }
}

/// Called by the C shim with the formatted message; never unwinds into C.
unsafe extern "C" fn sink(
    file: *const c_char,
    line: u64,
    function: *const c_char,
    code: OTF2_ErrorCode,
    message: *const c_char,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        COUNT.fetch_add(1, Ordering::Relaxed);
        // SAFETY: OTF2 passes its own static strings (or NULL) and the shim a formatted
        // buffer, all valid for this call; OTF2_Error_GetName returns a static string.
        let report = unsafe {
            ErrorReport {
                code,
                code_name: text(OTF2_Error_GetName(code)),
                file: text(file),
                line,
                function: text(function),
                message: text(message),
                thread: thread::current().id(),
            }
        };
        if let Some(handler) = *lock(&HANDLER) {
            handler(&report);
        }
        let mut reports = lock(&REPORTS);
        if reports.len() < KEPT_REPORTS {
            reports.push(report);
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_looks_like_otf2s_own_line() {
        let report = ErrorReport {
            code: OTF2_WARNING,
            code_name: "WARNING".into(),
            file: "a.c".into(),
            line: 7,
            function: "f".into(),
            message: "m".into(),
            thread: thread::current().id(),
        };
        assert_eq!(report.to_string(), "[OTF2] a.c:7: warning: WARNING: m");
        assert!(report.is_warning());
        assert_ne!(report.code, crate::OTF2_SUCCESS);
    }
}
