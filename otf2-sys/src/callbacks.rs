//! Plumbing of the reader callbacks of [`crate::read`]: error-code names, and the guard
//! every C callback goes through (the Rust state behind OTF2's user-data pointer, panics
//! caught and turned into `OTF2_CALLBACK_ERROR`).
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::any::Any;
use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::*;

/// `OTF2_Error_GetName`, or the number.
pub fn code_name(code: OTF2_ErrorCode) -> String {
    // SAFETY: OTF2_Error_GetName accepts any code and returns a static string or NULL.
    let name = unsafe { OTF2_Error_GetName(code) };
    if name.is_null() {
        return format!("error {code}");
    }
    // SAFETY: non-NULL, a NUL-terminated static string of OTF2.
    unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned()
}

/// The first code that is not `OTF2_SUCCESS`, else `OTF2_SUCCESS`.
pub fn first_failure(codes: &[OTF2_ErrorCode]) -> OTF2_ErrorCode {
    codes
        .iter()
        .copied()
        .find(|c| *c != OTF2_SUCCESS)
        .unwrap_or(OTF2_SUCCESS)
}

/// The state a callback works on remembers the first panic, which stops the read.
pub trait CallbackState {
    fn record_panic(&mut self, message: String);
}

fn panic_text(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic".to_owned()
    }
}

/// Runs `body` on the state behind `user_data`; a panic becomes `OTF2_CALLBACK_ERROR`.
///
/// # Safety
/// `user_data` is NULL or points to a live `S` that nothing else uses during the call.
pub unsafe fn guarded<S: CallbackState>(
    user_data: *mut c_void,
    body: impl FnOnce(&mut S),
) -> OTF2_CallbackCode {
    if user_data.is_null() {
        return OTF2_CALLBACK_ERROR as OTF2_CallbackCode;
    }
    // SAFETY: the caller guarantees an exclusive, live `S` behind `user_data`.
    let state = unsafe { &mut *user_data.cast::<S>() };
    match catch_unwind(AssertUnwindSafe(|| body(&mut *state))) {
        Ok(()) => OTF2_CALLBACK_SUCCESS as OTF2_CallbackCode,
        Err(payload) => {
            state.record_panic(panic_text(payload.as_ref()));
            OTF2_CALLBACK_ERROR as OTF2_CallbackCode
        }
    }
}

/// A string from OTF2 that may be NULL.
///
/// # Safety
/// `text` is NULL or a NUL-terminated string valid for the call.
pub unsafe fn text(text: *const c_char) -> String {
    if text.is_null() {
        return String::new();
    }
    // SAFETY: non-NULL and NUL-terminated, per the caller.
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}
