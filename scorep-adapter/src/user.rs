//! Score-P's user API, resolved at run time.
//!
//! The functions live in `libscorep_adapter_user_event.so`, which an application gets when
//! it is instrumented with `scorep --user` and linked against a shared Score-P (or runs
//! under `scorep-preload-init --user`). A plugin that NCCL loads with `RTLD_LOCAL` still
//! finds them through the global scope. A statically linked Score-P keeps them out of the
//! dynamic symbol table, so nothing is found there.

use std::ffi::{c_char, c_void, CStr};

/// `SCOREP_User_RegionHandle`: a pointer to Score-P's region object; NULL is invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionHandle(pub(crate) usize);

impl RegionHandle {
    pub fn as_ptr(self) -> *mut c_void {
        self.0 as *mut c_void
    }
}

/// `SCOREP_USER_REGION_TYPE_FUNCTION`.
pub const REGION_TYPE_FUNCTION: u32 = 1;
/// `SCOREP_USER_INVALID_PARAMETER`: the value a parameter handle starts with.
pub const INVALID_PARAMETER: u64 = u64::MAX;

type RegionInitFn = unsafe extern "C" fn(
    handle: *mut *mut c_void,
    last_file_name: *mut *const c_char,
    last_file: *mut u32,
    name: *const c_char,
    region_type: u32,
    file_name: *const c_char,
    line: u32,
);
type RegionFn = unsafe extern "C" fn(handle: *mut c_void);
type RegionSetGroupFn = unsafe extern "C" fn(handle: *mut c_void, group: *const c_char);
type ParameterStringFn =
    unsafe extern "C" fn(handle: *mut u64, name: *const c_char, value: *const c_char);

/// The symbols without which regions cannot be recorded.
pub const REQUIRED_SYMBOLS: [&str; 3] = [
    "SCOREP_User_RegionInit",
    "SCOREP_User_RegionEnter",
    "SCOREP_User_RegionEnd",
];

/// Score-P's user API as found in this process.
#[derive(Clone, Copy, Debug)]
pub struct UserApi {
    region_init: RegionInitFn,
    region_enter: RegionFn,
    region_end: RegionFn,
    region_set_group: Option<RegionSetGroupFn>,
    parameter_string: Option<ParameterStringFn>,
}

/// Why Score-P's user API is not usable in this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    /// The required symbols that were not found.
    pub symbols: Vec<&'static str>,
    /// Whether some `SCOREP_User_*` symbol was found (a partial or unusual Score-P).
    pub partial: bool,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.partial {
            write!(
                f,
                "Score-P's user API is incomplete in this process (missing {})",
                self.symbols.join(", ")
            )
        } else {
            write!(
                f,
                "no Score-P user API in this process ({} not found): the application is not \
                 measured by Score-P, was instrumented without --user, was linked with \
                 --as-needed (the default of many toolchains: it drops Score-P's user library \
                 when the application never calls it), or is linked with a static Score-P, \
                 whose symbols are not visible to plugins (use a shared Score-P and `scorep \
                 --user --thread=pthread --dynamic --no-as-needed`, or \
                 `LD_PRELOAD=$(scorep-preload-init --user --value-only <app>)`)",
                self.symbols.join(", ")
            )
        }
    }
}

impl UserApi {
    /// Looks the user API up in the process's global scope (`dlopen(NULL)`, as
    /// `dlsym(RTLD_DEFAULT)` would).
    pub fn find() -> Result<UserApi, Missing> {
        let this = libloading::os::unix::Library::this();
        let lookup = |name: &str| -> Option<*mut c_void> {
            let symbol = format!("{name}\0");
            // SAFETY: only the address is read; it is checked for NULL and later called
            // through the signature Score-P 8.4 declares for that name.
            unsafe { this.get::<*mut c_void>(symbol.as_bytes()) }
                .ok()
                .map(|s| *s)
                .filter(|p| !p.is_null())
        };
        let init = lookup(REQUIRED_SYMBOLS[0]);
        let enter = lookup(REQUIRED_SYMBOLS[1]);
        let end = lookup(REQUIRED_SYMBOLS[2]);
        let set_group = lookup("SCOREP_User_RegionSetGroup");
        let parameter_string = lookup("SCOREP_User_ParameterString");
        // The process keeps its own handle of itself; ours is only a lookup scope.
        std::mem::forget(this);
        match (init, enter, end) {
            (Some(init), Some(enter), Some(end)) => {
                // SAFETY: each address is the named Score-P function, whose C signature is
                // the one transmuted to (Score-P 8.4 `SCOREP_User_Functions.h`).
                unsafe {
                    Ok(UserApi {
                        region_init: std::mem::transmute::<*mut c_void, RegionInitFn>(init),
                        region_enter: std::mem::transmute::<*mut c_void, RegionFn>(enter),
                        region_end: std::mem::transmute::<*mut c_void, RegionFn>(end),
                        region_set_group: set_group
                            .map(|p| std::mem::transmute::<*mut c_void, RegionSetGroupFn>(p)),
                        parameter_string: parameter_string
                            .map(|p| std::mem::transmute::<*mut c_void, ParameterStringFn>(p)),
                    })
                }
            }
            _ => {
                let found = [init, enter, end];
                let symbols = REQUIRED_SYMBOLS
                    .iter()
                    .zip(found)
                    .filter(|(_, f)| f.is_none())
                    .map(|(n, _)| *n)
                    .collect();
                let partial =
                    found.iter().any(Option::is_some) || set_group.or(parameter_string).is_some();
                Err(Missing { symbols, partial })
            }
        }
    }

    /// `SCOREP_User_RegionInit`: defines a region; `None` when Score-P left the handle
    /// NULL (it does so after its finalisation, when every call is a no-op).
    pub fn region_init(&self, name: &CStr, file: &CStr) -> Option<RegionHandle> {
        let mut handle: *mut c_void = std::ptr::null_mut();
        // SAFETY: `handle` is a writable NULL handle as Score-P expects; lastFileName and
        // lastFile may be NULL (Score-P's by-name path passes NULL itself); the strings
        // are valid C strings for the duration of the call (Score-P copies them).
        unsafe {
            (self.region_init)(
                &mut handle,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                name.as_ptr(),
                REGION_TYPE_FUNCTION,
                file.as_ptr(),
                0,
            )
        };
        (!handle.is_null()).then_some(RegionHandle(handle as usize))
    }

    /// `SCOREP_User_RegionSetGroup` (skipped where the symbol is missing).
    pub fn region_set_group(&self, region: RegionHandle, group: &CStr) {
        if let Some(set_group) = self.region_set_group {
            // SAFETY: a non-NULL handle Score-P issued, and a valid C string.
            unsafe { set_group(region.as_ptr(), group.as_ptr()) };
        }
    }

    /// `SCOREP_User_RegionEnter`. The handle is never NULL (a NULL handle is fatal in
    /// Score-P): [`RegionHandle`]s only come from a successful [`UserApi::region_init`].
    pub fn region_enter(&self, region: RegionHandle) {
        // SAFETY: a non-NULL handle Score-P issued.
        unsafe { (self.region_enter)(region.as_ptr()) };
    }

    /// `SCOREP_User_RegionEnd`. The caller guarantees it entered `region` on this thread
    /// and ends regions in reverse order (else Score-P aborts the application).
    pub fn region_end(&self, region: RegionHandle) {
        // SAFETY: a non-NULL handle Score-P issued, entered on this thread.
        unsafe { (self.region_end)(region.as_ptr()) };
    }

    /// Whether string parameters can be recorded.
    pub fn has_parameters(&self) -> bool {
        self.parameter_string.is_some()
    }

    /// `SCOREP_User_ParameterString` on the innermost open region of this thread.
    pub(crate) fn parameter_string(&self, handle: *mut u64, name: &CStr, value: &CStr) {
        if let Some(parameter_string) = self.parameter_string {
            // SAFETY: `handle` points to a parameter handle that lives as long as the
            // process (it starts at INVALID_PARAMETER; Score-P fills it in); the strings
            // are valid C strings.
            unsafe { parameter_string(handle, name.as_ptr(), value.as_ptr()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_without_scorep_finds_nothing_and_says_what_to_do() {
        let missing = UserApi::find().expect_err("no Score-P in a test binary");
        assert_eq!(missing.symbols, REQUIRED_SYMBOLS.to_vec());
        assert!(!missing.partial);
        let text = missing.to_string();
        assert!(text.contains("--dynamic --no-as-needed"), "{text}");
        assert!(
            text.contains("scorep-preload-init --user --value-only"),
            "{text}"
        );
        assert!(text.contains("SCOREP_User_RegionEnter"), "{text}");
    }
}
