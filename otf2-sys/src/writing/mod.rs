//! Writing archives. [`create_archive`] is how every writer here creates one (the
//! plugin's writer goes on with the raw bindings); [`Archive`] and the writers it hands out
//! are the safe layer over the rest of OTF2's write sequence that the merges and the tests
//! use: archive properties, global definitions ([`GlobalDefWriter`], any
//! [`crate::read::GlobalDefinition`] as it was read), local definitions (mapping tables
//! from [`IdMap`]s, clock offsets) and events ([`EventWriter`] with [`AttributeList`]s).
//! Failures are [`crate::Error`]s that carry OTF2's reports.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

mod archive;
mod events;
mod global;

pub use archive::{Archive, DefinitionFiles, IdMap, LocalDefWriter};
pub use events::{AttributeList, EventFiles, EventWriter};
pub use global::GlobalDefWriter;

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

/// Why [`create_archive`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateError {
    /// `OTF2_Archive_Open` gave no archive.
    Open,
    /// Setting the flush or the collective callbacks failed (e.g. `traces/` exists).
    Setup(OTF2_ErrorCode),
}

/// Opens `<dir>/traces.otf2` for writing, as every writer here does: POSIX files, no
/// compression, [`ALWAYS_FLUSH`], and serial collective callbacks (the calling process is
/// the archive's only writer). An archive that cannot be set up is closed again.
pub fn create_archive(
    dir: &std::ffi::CStr,
    event_chunk: u64,
    definition_chunk: u64,
) -> Result<*mut OTF2_Archive, CreateError> {
    // SAFETY: the first steps of OTF2's write sequence on the calling thread; both strings
    // are live for the call (OTF2 copies them) and the flush callbacks are a static, so
    // they outlive the archive.
    unsafe {
        let archive = OTF2_Archive_Open(
            dir.as_ptr(),
            c"traces".as_ptr(),
            OTF2_FILEMODE_WRITE as OTF2_FileMode,
            event_chunk,
            definition_chunk,
            OTF2_SUBSTRATE_POSIX as OTF2_FileSubstrate,
            OTF2_COMPRESSION_NONE as OTF2_Compression,
        );
        if archive.is_null() {
            return Err(CreateError::Open);
        }
        let mut code = OTF2_Archive_SetFlushCallbacks(archive, &ALWAYS_FLUSH, std::ptr::null_mut());
        if code == OTF2_SUCCESS {
            code = OTF2_Archive_SetSerialCollectiveCallbacks(archive);
        }
        if code != OTF2_SUCCESS {
            OTF2_Archive_Close(archive);
            return Err(CreateError::Setup(code));
        }
        Ok(archive)
    }
}
