//! The steps [`crate::read`] takes with an `OTF2_Reader`: registering callbacks with
//! `state` as their user data, reading the global definitions through them, and reading a
//! location's local definitions past duplicate mapping tables.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::ffi::c_void;

use crate::callbacks::{first_failure, CallbackState};
use crate::*;

/// How often `OTF2_Reader_ReadAllLocalDefinitions` is called again for one location after
/// it stopped at a duplicate mapping table (as `otf2-print` does).
pub const MAX_DEFINITION_PASSES: usize = 64;

/// A reader of an archive that takes a callback table.
pub trait CallbackTarget {
    /// The table of callbacks it is given.
    type Callbacks;

    /// A fresh, empty table; NULL when out of memory.
    fn new_callbacks() -> *mut Self::Callbacks;

    /// Frees a table.
    ///
    /// # Safety
    /// `callbacks` came from `new_callbacks` and is not used after this.
    unsafe fn delete_callbacks(callbacks: *mut Self::Callbacks);

    /// Registers `callbacks` with this reader of `reader`; OTF2 copies the table.
    ///
    /// # Safety
    /// `reader` and `target` are open; `callbacks` is live; the callbacks accept
    /// `user_data` for as long as `target` reads.
    unsafe fn register(
        reader: *mut OTF2_Reader,
        target: *mut Self,
        callbacks: *const Self::Callbacks,
        user_data: *mut c_void,
    ) -> OTF2_ErrorCode;
}

macro_rules! callback_target {
    ($target:ty, $callbacks:ty, $new:ident, $delete:ident, $register:ident) => {
        impl CallbackTarget for $target {
            type Callbacks = $callbacks;

            fn new_callbacks() -> *mut $callbacks {
                // SAFETY: a plain allocation.
                unsafe { $new() }
            }

            unsafe fn delete_callbacks(callbacks: *mut $callbacks) {
                // SAFETY: per the caller.
                unsafe { $delete(callbacks) }
            }

            unsafe fn register(
                reader: *mut OTF2_Reader,
                target: *mut Self,
                callbacks: *const $callbacks,
                user_data: *mut c_void,
            ) -> OTF2_ErrorCode {
                // SAFETY: per the caller.
                unsafe { $register(reader, target, callbacks, user_data) }
            }
        }
    };
}

callback_target!(
    OTF2_GlobalDefReader,
    OTF2_GlobalDefReaderCallbacks,
    OTF2_GlobalDefReaderCallbacks_New,
    OTF2_GlobalDefReaderCallbacks_Delete,
    OTF2_Reader_RegisterGlobalDefCallbacks
);
callback_target!(
    OTF2_DefReader,
    OTF2_DefReaderCallbacks,
    OTF2_DefReaderCallbacks_New,
    OTF2_DefReaderCallbacks_Delete,
    OTF2_Reader_RegisterDefCallbacks
);
callback_target!(
    OTF2_EvtReader,
    OTF2_EvtReaderCallbacks,
    OTF2_EvtReaderCallbacks_New,
    OTF2_EvtReaderCallbacks_Delete,
    OTF2_Reader_RegisterEvtCallbacks
);
callback_target!(
    OTF2_GlobalEvtReader,
    OTF2_GlobalEvtReaderCallbacks,
    OTF2_GlobalEvtReaderCallbacks_New,
    OTF2_GlobalEvtReaderCallbacks_Delete,
    OTF2_Reader_RegisterGlobalEvtCallbacks
);

/// Registers with `target` the callbacks that `set` puts into a fresh table (answering the
/// first failed setter's code), with `state` as their user data. The table is deleted
/// right after: OTF2 keeps a copy.
///
/// # Safety
/// `reader` and `target` are open; the callbacks `set` installs take an `S` as their user
/// data; `state` outlives every read with `target`, and nothing else uses it while one runs.
pub unsafe fn register_callbacks<R: CallbackTarget, S: CallbackState>(
    reader: *mut OTF2_Reader,
    target: *mut R,
    state: &mut S,
    set: impl FnOnce(*mut R::Callbacks) -> OTF2_ErrorCode,
) -> OTF2_ErrorCode {
    let callbacks = R::new_callbacks();
    if callbacks.is_null() {
        return OTF2_ERROR_MEM_ALLOC_FAILED;
    }
    let set_code = set(callbacks);
    // SAFETY: `reader` and `target` are open and `state` outlives the reads (caller);
    // `callbacks` is live.
    let register_code = unsafe { R::register(reader, target, callbacks, (state as *mut S).cast()) };
    // SAFETY: created above; OTF2 copied it while registering.
    unsafe { R::delete_callbacks(callbacks) };
    first_failure(&[set_code, register_code])
}

/// Why the global definitions could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GlobalDefinitionsFailure {
    /// OTF2 gave no global definition reader (`traces.def` cannot be read).
    NoReader,
    /// Registering the callbacks failed, or the read stopped after `read` records.
    Stopped { read: u64, code: OTF2_ErrorCode },
}

/// Reads every global definition of `reader` into `state` through the callbacks `set`
/// installs; answers the number of records read. A callback's panic stops the read and
/// stays in `state`.
///
/// # Safety
/// `reader` is open; the callbacks `set` installs take an `S` as their user data.
pub unsafe fn read_global_definitions<S: CallbackState>(
    reader: *mut OTF2_Reader,
    state: &mut S,
    set: impl FnOnce(*mut OTF2_GlobalDefReaderCallbacks) -> OTF2_ErrorCode,
) -> Result<u64, GlobalDefinitionsFailure> {
    // SAFETY: the reader is open (caller).
    let def_reader = unsafe { OTF2_Reader_GetGlobalDefReader(reader) };
    if def_reader.is_null() {
        return Err(GlobalDefinitionsFailure::NoReader);
    }
    // SAFETY: the reader and `def_reader` are open; `state` lives until the end of this
    // function, and is used only through the callbacks while the read runs.
    let code = unsafe { register_callbacks(reader, def_reader, state, set) };
    let mut read = 0;
    let code = if code == OTF2_SUCCESS {
        // SAFETY: as above.
        unsafe { OTF2_Reader_ReadAllGlobalDefinitions(reader, def_reader, &mut read) }
    } else {
        code
    };
    // SAFETY: `def_reader` is open and not used after this.
    unsafe { OTF2_Reader_CloseGlobalDefReader(reader, def_reader) };
    if code == OTF2_SUCCESS {
        Ok(read)
    } else {
        Err(GlobalDefinitionsFailure::Stopped { read, code })
    }
}

/// Reads all local definitions of `def_reader`. OTF2 stops at a mapping table that the
/// location's event reader already holds; the read goes on from there, up to
/// [`MAX_DEFINITION_PASSES`] times, and a duplicate table is no failure.
///
/// # Safety
/// `reader` and `def_reader` are open; the state of any callbacks registered with
/// `def_reader` is live.
pub unsafe fn read_all_local_definitions(
    reader: *mut OTF2_Reader,
    def_reader: *mut OTF2_DefReader,
) -> OTF2_ErrorCode {
    for _ in 0..MAX_DEFINITION_PASSES {
        let mut read = 0;
        // SAFETY: per the caller.
        let code = unsafe { OTF2_Reader_ReadAllLocalDefinitions(reader, def_reader, &mut read) };
        if code != OTF2_ERROR_DUPLICATE_MAPPING_TABLE {
            return code;
        }
    }
    OTF2_SUCCESS
}

/// Copies `count` values of an array OTF2 hands to a callback (NULL when `count` is 0).
///
/// # Safety
/// `values` points to `count` readable values, or `count` is 0.
pub unsafe fn copy_array<T: Copy>(values: *const T, count: usize) -> Vec<T> {
    if values.is_null() || count == 0 {
        return Vec::new();
    }
    // SAFETY: per the caller, `count` values are readable at `values`.
    unsafe { std::slice::from_raw_parts(values, count) }.to_vec()
}
