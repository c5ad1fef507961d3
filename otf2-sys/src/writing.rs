//! Plumbing for Rust code that writes archives: the flush callbacks every writer here sets.

use std::ffi::c_void;

use crate::*;

/// Flush callbacks that let OTF2 write every buffer when it is full or closed, and write no
/// BufferFlush records. OTF2 keeps the pointer until the archive is closed: a static
/// outlives it.
pub static ALWAYS_FLUSH: OTF2_FlushCallbacks = OTF2_FlushCallbacks {
    otf2_pre_flush: Some(always_flush),
    otf2_post_flush: None,
};

unsafe extern "C" fn always_flush(
    _user_data: *mut c_void,
    _file_type: OTF2_FileType,
    _location: OTF2_LocationRef,
    _caller_data: *mut c_void,
    _final: bool,
) -> OTF2_FlushType {
    OTF2_FLUSH as OTF2_FlushType
}
