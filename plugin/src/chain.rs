//! Chaining a second profiler plugin (`NCCL_SCOREP_CHAIN`): loaded as NCCL loads a
//! profiler plugin, it gets NCCL's `init`, `startEvent`, `stopEvent`, `recordEventState`
//! and `finalize` beside us, with its own contexts and handles, and nothing it returns
//! reaches NCCL.
//!
//! Its context for each of our contexts sits in a table here, indexed like ours; its
//! handle for each event sits in our handle's slab slot ([`crate::handle::Slab::chained`]).
//! The hot path tests [`ACTIVE`] once per callback and comes here only when it is set.
//! docs/chaining.md describes what the chained plugin sees.

use crate::context::{ContextInfo, MAX_CONTEXTS};
use crate::event::Kind;
use crate::log;
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
use nccl_profiler_abi::event_type as bit;
use nccl_profiler_abi::loader::{plugin_selection, PluginSelection};
use nccl_profiler_abi::{
    ncclDebugLogger_t, ncclResult_t, InitV1, InitV4, InitV5, StateArgsV4, NCCL_SUCCESS,
};
use std::ffi::{c_char, c_int, c_void, CString, OsStr};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::OnceLock;

/// Set once a chained plugin is loaded: the hot path's one test.
pub static ACTIVE: AtomicBool = AtomicBool::new(false);

static CHAIN: OnceLock<Option<Chain>> = OnceLock::new();

/// The chained plugin's activation mask: the `int` its `init` writes. One per process and
/// shared by all its contexts, like NCCL's own, so the last `init` to write it wins.
static MASK: AtomicI32 = AtomicI32::new(0);

/// The kinds NCCL starts for the chained plugin's mask, with the mask they were computed
/// for: mask in the high 32 bits, type bits in the low 32. Recomputed when the mask
/// changed (a plugin may change it at any time through the pointer `init` gave it).
static EMITTED: AtomicU64 = AtomicU64::new(0);

/// Error results of the chained plugin's calls (other than `init`), reported at the
/// process's last finalize.
static CALL_ERRORS: AtomicU64 = AtomicU64::new(0);

type StartFn = unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut c_void) -> ncclResult_t;
type HandleFn = unsafe extern "C" fn(*mut c_void) -> ncclResult_t;
type RecordFn = unsafe extern "C" fn(*mut c_void, c_int, *mut c_void) -> ncclResult_t;

/// A profiler table as it lies in the chained library: every slot may be NULL.
#[repr(C)]
struct RawTable {
    name: *const c_char,
    init: Option<unsafe extern "C" fn()>,
    start: Option<StartFn>,
    stop: Option<HandleFn>,
    record: Option<RecordFn>,
    finalize: Option<HandleFn>,
}

/// `init` in the form of the chained version.
#[derive(Clone, Copy)]
enum InitFn {
    V1(InitV1),
    V4(InitV4),
    V5(InitV5),
}

/// What we keep of one of the chained plugin's contexts.
struct ChainedContext {
    /// Our context value it belongs to (0: none).
    ours: AtomicU64,
    /// Its context value.
    theirs: AtomicU64,
    /// Its finalize was called. NCCL goes on sending events with a finalized context
    /// (a split child's proxy uses its parent's) until the process's last finalize.
    finalized: AtomicBool,
}

/// How many ended events [`Chain::ended`] remembers (a power of two).
const ENDED_EVENTS: usize = 1 << 14;

/// Whether NCCL gives events of `kind` as parent after they ended: API calls end before
/// their tasks start, a CUDA graph replays its tasks under capture-time Group and API
/// events, and a ProxyOp may be stopped before the last of its steps starts. (The other
/// parents, ProxyStep, KernelCh and CeColl, outlive their children.)
#[inline]
pub fn parent_after_its_end(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::GroupApi
            | Kind::CollApi
            | Kind::P2pApi
            | Kind::Group
            | Kind::Coll
            | Kind::P2p
            | Kind::ProxyOp
    )
}

/// One ended event: our handle and the chained plugin's handle of it.
struct EndedEvent {
    ours: AtomicU64,
    theirs: AtomicU64,
}

/// A loaded chained plugin.
pub struct Chain {
    /// Kept loaded for the life of the process: its handles may outlive any finalize.
    _library: Library,
    /// What was loaded, for messages.
    pub path: String,
    /// The API version of NCCL's calls to us.
    pub nccl_version: u8,
    /// The API version of the table we call.
    pub version: u8,
    init: InitFn,
    start: StartFn,
    stop: HandleFn,
    record: RecordFn,
    finalize: HandleFn,
    /// Type bits of the kinds its version has.
    its_kinds: u64,
    /// Mask bits it may keep: those NCCL's shim of its version clears are cleared here too.
    allowed_mask: i32,
    /// Type bits of the kinds NCCL emits for our own activation mask.
    our_kinds: u64,
    contexts: Box<[ChainedContext]>,
    /// The chained plugin's handles of recently ended events, by our handle: NCCL gives an
    /// ended event as parent (an API call ends before its tasks start; a graph replays its
    /// capture-time parents), and its slab slot may already hold a later event.
    /// Direct-mapped: a later event may take an earlier one's place (its children then get
    /// a NULL parent), but never names another event, as no handle is issued twice.
    ended: Box<[EndedEvent]>,
}

/// The chained plugin, once loaded.
#[inline]
pub fn get() -> Option<&'static Chain> {
    CHAIN.get().and_then(Option::as_ref)
}

/// Loads the plugin `spec` names on the first `init` (NCCL's calls are at API version
/// `nccl_version`); later calls return what the first found. A plugin that cannot be
/// chained is reported once, and the job runs without it.
pub fn load_once(spec: &str, nccl_version: u8, our_mask: u64) -> Option<&'static Chain> {
    CHAIN
        .get_or_init(|| match Chain::load(spec, nccl_version, our_mask) {
            Ok(chain) => {
                log::info(&format!(
                    "chained profiler plugin {} (API v{}, NCCL calls v{})",
                    chain.path, chain.version, chain.nccl_version
                ));
                ACTIVE.store(true, Ordering::Release);
                Some(chain)
            }
            Err(problem) => {
                log::warn(&format!(
                    "NCCL_SCOREP_CHAIN={spec}: {problem}; running without the chained plugin"
                ));
                None
            }
        })
        .as_ref()
}

/// The API version to call a plugin exporting `exported` at, when NCCL calls us at
/// `nccl_version`: the same version when it has it; else, from v5 on, the newest older
/// version down to v5 (v5–v7 descriptors share the layout of every member they have in
/// common). Earlier versions differ in layout and hierarchy and are not translated.
pub fn chosen_version(nccl_version: u8, exported: &[u8]) -> Option<u8> {
    if exported.contains(&nccl_version) {
        return Some(nccl_version);
    }
    if nccl_version < 5 {
        return None;
    }
    (5..nccl_version).rev().find(|v| exported.contains(v))
}

/// The mask bits NCCL's shim for a `version` plugin leaves after its `init` on an NCCL
/// that calls `nccl_version`: the CE bits (12–14) for v5 and KernelPhase (15) for v5 and
/// v6 are cleared.
fn allowed_mask(version: u8, nccl_version: u8) -> i32 {
    let mut allowed = !0;
    if version < nccl_version {
        if version < 6 {
            allowed &= !((bit::CE_COLL | bit::CE_SYNC | bit::CE_BATCH) as i32);
        }
        if version < 7 {
            allowed &= !(bit::KERNEL_PHASE as i32);
        }
    }
    allowed
}

/// The type bits of the kinds NCCL starts for activation mask `mask`: a kind is started
/// when the mask asks for it or for one of its descendants (KernelPhase implies
/// KernelCh).
pub fn emitted_kinds(mask: u64) -> u64 {
    const CE: u64 = bit::CE_COLL | bit::CE_SYNC | bit::CE_BATCH;
    const TASK_CHILDREN: u64 = bit::PROXY_OP | bit::PROXY_STEP | bit::KERNEL_CH | bit::NET_PLUGIN;
    let mask = if mask & bit::KERNEL_PHASE != 0 {
        mask | bit::KERNEL_CH
    } else {
        mask
    };
    let enablers: [(u64, u64); 16] = [
        (bit::GROUP_API, 0xFFFF & !bit::PROXY_CTRL),
        (
            bit::COLL_API,
            bit::COLL_API | bit::COLL | TASK_CHILDREN | CE,
        ),
        (bit::P2P_API, bit::P2P_API | bit::P2P | TASK_CHILDREN),
        (bit::KERNEL_LAUNCH, bit::KERNEL_LAUNCH),
        (
            bit::GROUP,
            bit::GROUP | bit::COLL | bit::P2P | TASK_CHILDREN,
        ),
        (bit::COLL, bit::COLL | TASK_CHILDREN),
        (bit::P2P, bit::P2P | TASK_CHILDREN),
        (
            bit::PROXY_OP,
            bit::PROXY_OP | bit::PROXY_STEP | bit::NET_PLUGIN,
        ),
        (bit::PROXY_STEP, bit::PROXY_STEP | bit::NET_PLUGIN),
        (bit::KERNEL_CH, bit::KERNEL_CH),
        (bit::NET_PLUGIN, bit::NET_PLUGIN),
        (bit::PROXY_CTRL, bit::PROXY_CTRL),
        (bit::CE_COLL, CE),
        (bit::CE_SYNC, bit::CE_SYNC),
        (bit::CE_BATCH, bit::CE_BATCH),
        (bit::KERNEL_PHASE, bit::KERNEL_PHASE),
    ];
    enablers
        .iter()
        .filter(|(_, enabled_by)| mask & enabled_by != 0)
        .fold(0, |kinds, (kind, _)| kinds | kind)
}

/// Whether `address` lies in the shared object this code is in (the chained "plugin"
/// would be nccl-scorep itself).
fn in_this_library(address: *const c_void) -> bool {
    let object_of = |address: *const c_void| {
        // SAFETY: dladdr only reads the loader's tables; `info` is a plain C struct it
        // fills in when it returns nonzero.
        unsafe {
            let mut info: libc::Dl_info = std::mem::zeroed();
            (libc::dladdr(address, &mut info) != 0).then_some(info.dli_fbase)
        }
    };
    let ours = object_of(in_this_library as fn(*const c_void) -> bool as *const c_void);
    ours.is_some() && ours == object_of(address)
}

impl Chain {
    fn load(spec: &str, nccl_version: u8, our_mask: u64) -> Result<Chain, String> {
        let names = match plugin_selection(Some(OsStr::new(spec))) {
            PluginSelection::Disabled => return Err("names no plugin".into()),
            PluginSelection::GlobalScope => {
                return Err("a plugin linked into the program cannot be chained".into())
            }
            PluginSelection::Candidates(names) => names,
        };
        let mut failures = Vec::new();
        let (library, path) = names
            .iter()
            .find_map(|name| {
                // SAFETY: loading a profiler plugin runs its initialisers, as NCCL's own
                // dlopen would; RTLD_LOCAL keeps its symbols out of the global scope.
                match unsafe { Library::open(Some(name), RTLD_NOW | RTLD_LOCAL) } {
                    Ok(library) => Some((library, name.to_string_lossy().into_owned())),
                    Err(error) => {
                        failures.push(error.to_string());
                        None
                    }
                }
            })
            .ok_or_else(|| format!("cannot load it ({})", failures.join("; ")))?;
        let table_of = |version: u8| -> Option<&'static RawTable> {
            let symbol = format!("ncclProfiler_v{version}\0");
            // SAFETY: the symbol, when present, is a profiler table; only its address is
            // taken here, and the library stays loaded for the life of the process.
            let address = unsafe { library.get::<*const RawTable>(symbol.as_bytes()) }.ok()?;
            // SAFETY: a non-NULL address of an exported table of this layout.
            unsafe { (*address).as_ref() }
        };
        let exported: Vec<u8> = (1..=7).filter(|&v| table_of(v).is_some()).collect();
        if exported.is_empty() {
            return Err(format!("{path} exports no ncclProfiler_vN table"));
        }
        let Some(version) = chosen_version(nccl_version, &exported) else {
            return Err(format!(
                "{path} exports API v{exported:?}, NCCL calls v{nccl_version}: no version \
                 to forward at (see docs/chaining.md)"
            ));
        };
        let table = table_of(version).expect("exported above");
        if in_this_library(table as *const RawTable as *const c_void) {
            return Err("names nccl-scorep itself".into());
        }
        let (Some(init), Some(start), Some(stop), Some(record), Some(finalize)) = (
            table.init,
            table.start,
            table.stop,
            table.record,
            table.finalize,
        ) else {
            return Err(format!(
                "{path}: ncclProfiler_v{version} has a NULL function"
            ));
        };
        // SAFETY: the table of this version holds an `init` of this version's signature.
        let init = unsafe {
            match version {
                1..=3 => InitFn::V1(std::mem::transmute::<unsafe extern "C" fn(), InitV1>(init)),
                4 => InitFn::V4(std::mem::transmute::<unsafe extern "C" fn(), InitV4>(init)),
                _ => InitFn::V5(std::mem::transmute::<unsafe extern "C" fn(), InitV5>(init)),
            }
        };
        Ok(Chain {
            _library: library,
            path,
            nccl_version,
            version,
            init,
            start,
            stop,
            record,
            finalize,
            its_kinds: crate::kinds::kinds_of_version(version),
            allowed_mask: allowed_mask(version, nccl_version),
            our_kinds: emitted_kinds(our_mask),
            contexts: (0..MAX_CONTEXTS)
                .map(|_| ChainedContext {
                    ours: AtomicU64::new(0),
                    theirs: AtomicU64::new(0),
                    finalized: AtomicBool::new(false),
                })
                .collect(),
            ended: (0..ENDED_EVENTS)
                .map(|_| EndedEvent {
                    ours: AtomicU64::new(0),
                    theirs: AtomicU64::new(0),
                })
                .collect(),
        })
    }

    fn ended_entry(&self, ours: u64) -> &EndedEvent {
        let index = (ours ^ ours >> 29).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48;
        &self.ended[index as usize & (ENDED_EVENTS - 1)]
    }

    /// Remembers that our event `ours`, which it knows as `theirs`, has ended.
    #[inline]
    pub fn ended(&self, ours: u64, theirs: u64) {
        let entry = self.ended_entry(ours);
        // Readers see `ours` only around a complete pair.
        entry.ours.store(0, Ordering::Release);
        entry.theirs.store(theirs, Ordering::Release);
        entry.ours.store(ours, Ordering::Release);
    }

    /// Its handle of our ended event `ours`, if still remembered.
    #[inline]
    pub fn ended_handle(&self, ours: u64) -> Option<u64> {
        let entry = self.ended_entry(ours);
        if entry.ours.load(Ordering::Acquire) != ours {
            return None;
        }
        let theirs = entry.theirs.load(Ordering::Acquire);
        (entry.ours.load(Ordering::Acquire) == ours).then_some(theirs)
    }

    /// Calls its `init` for our context `ours` (table slot `slot`) and returns its
    /// activation mask. After an error return it gets nothing of this communicator (one
    /// warning says so).
    pub fn init(
        &self,
        ours: u64,
        slot: usize,
        info: &ContextInfo,
        logger: ncclDebugLogger_t,
    ) -> i32 {
        let Some(entry) = self.contexts.get(slot) else {
            return 0;
        };
        let name = info
            .comm_name
            .as_deref()
            .and_then(|name| CString::new(name).ok());
        let name_ptr = name.as_ref().map_or(std::ptr::null(), |name| name.as_ptr());
        let mut theirs: *mut c_void = std::ptr::null_mut();
        let mask = MASK.as_ptr();
        // SAFETY: a call into the chained plugin's `init` of its version, with writable
        // context and mask pointers and a NUL-terminated (or NULL) name that outlives it.
        let result = unsafe {
            match self.init {
                InitFn::V1(init) => init(&mut theirs, mask),
                InitFn::V4(init) => init(
                    &mut theirs,
                    mask,
                    name_ptr,
                    info.comm_hash,
                    info.n_nodes,
                    info.n_ranks,
                    info.rank,
                    logger,
                ),
                InitFn::V5(init) => init(
                    &mut theirs,
                    info.comm_hash,
                    mask,
                    name_ptr,
                    info.n_nodes,
                    info.n_ranks,
                    info.rank,
                    logger,
                ),
            }
        };
        if result != NCCL_SUCCESS {
            entry.ours.store(0, Ordering::Release);
            log::warn(&format!(
                "chained profiler plugin {}: init failed (error {result}) for comm {:#x} rank \
                 {}; it gets no events of this communicator",
                self.path, info.comm_hash, info.rank
            ));
            return 0;
        }
        entry
            .theirs
            .store(theirs as usize as u64, Ordering::Relaxed);
        entry.finalized.store(false, Ordering::Relaxed);
        entry.ours.store(ours, Ordering::Release);
        self.mask()
    }

    /// Its activation mask now, less what NCCL's shim for its version would clear.
    #[inline]
    pub fn mask(&self) -> i32 {
        MASK.load(Ordering::Relaxed) & self.allowed_mask
    }

    /// Calls its `finalize` for our context `ours` (slot `slot`), once, if its `init`
    /// succeeded. The context stays mapped: events may still come with it.
    pub fn finalize(&self, ours: u64, slot: usize) {
        let Some(entry) = self.contexts.get(slot) else {
            return;
        };
        if ours == 0
            || entry.ours.load(Ordering::Acquire) != ours
            || entry.finalized.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let theirs = entry.theirs.load(Ordering::Acquire);
        // NCCL 2.28+ skips finalize for a NULL context; earlier releases always call it.
        if theirs != 0 || self.nccl_version <= 4 {
            // SAFETY: its own context, from its `init`, finalized once.
            let result = unsafe { (self.finalize)(theirs as usize as *mut c_void) };
            self.note(result);
        }
    }

    /// Warns about error results at the process's last finalize.
    pub fn report(&self) {
        let errors = CALL_ERRORS.swap(0, Ordering::Relaxed);
        if errors > 0 {
            log::warn(&format!(
                "chained profiler plugin {} returned {errors} errors (not passed to NCCL)",
                self.path
            ));
        }
    }

    /// The type bits of the kinds NCCL starts for its mask now.
    #[inline]
    fn its_emitted_kinds(&self) -> u64 {
        let mask = self.mask() as u32;
        let cached = EMITTED.load(Ordering::Relaxed);
        if (cached >> 32) as u32 == mask && cached != 0 {
            return cached & 0xFFFF_FFFF;
        }
        let kinds = emitted_kinds(u64::from(mask));
        EMITTED.store(u64::from(mask) << 32 | kinds, Ordering::Relaxed);
        kinds
    }

    /// Whether our sinks record an event of `kind`: all but those only the chained
    /// plugin's mask made NCCL start.
    #[inline]
    pub fn records_ours(&self, kind: Kind) -> bool {
        let bit = kind.bit();
        self.our_kinds & bit != 0 || self.its_emitted_kinds() & bit == 0
    }

    /// Whether the chained plugin gets a start of `kind`: its version has the kind and its
    /// mask makes NCCL start it.
    #[inline]
    pub fn wants(&self, kind: Kind) -> bool {
        let bit = kind.bit();
        self.its_kinds & bit != 0 && self.its_emitted_kinds() & bit != 0
    }

    /// Its context for a `context` NCCL passed: its own for one of our contexts (`None`
    /// when it has none: its init failed, or the context is of an earlier cycle), the value
    /// unchanged for another process's context (PXN), which no plugin may dereference.
    #[inline]
    pub fn context_for(&self, context: u64, our_slot: Option<usize>) -> Option<u64> {
        match our_slot {
            Some(slot) => {
                let entry = self.contexts.get(slot)?;
                (entry.ours.load(Ordering::Acquire) == context)
                    .then(|| entry.theirs.load(Ordering::Relaxed))
            }
            None => Some(context),
        }
    }

    /// Whether NCCL, calling only the chained plugin, would start an event of `kind`
    /// whose parent has its handle `parent`: up to 2.27 (API v4 and earlier) Coll/P2p
    /// need a Group handle and ProxySteps a ProxyOp handle; 2.27 (v4) starts ProxyOps,
    /// at append, only under a task handle; KernelCh always needs its task's handle.
    #[inline]
    pub fn parent_allows(&self, kind: Kind, parent: u64) -> bool {
        if parent != 0 {
            return true;
        }
        match kind {
            Kind::KernelCh => false,
            Kind::Coll | Kind::P2p | Kind::ProxyStep => self.nccl_version > 4,
            Kind::ProxyOp => self.nccl_version != 4,
            _ => true,
        }
    }

    /// Whether NCCL, calling only the chained plugin, would send the states of an event of
    /// `kind` whose parent has its handle `parent`: no ProxyStep state without a ProxyOp
    /// handle.
    #[inline]
    pub fn parent_allows_states(&self, kind: Kind, parent: u64) -> bool {
        parent != 0 || kind != Kind::ProxyStep
    }

    /// Its `startEvent` with a descriptor already carrying its parent; its handle (0: none).
    ///
    /// # Safety
    /// `descr` points to a descriptor of NCCL's version, whose layout its version shares
    /// ([`chosen_version`]).
    #[inline]
    pub unsafe fn start(&self, context: u64, descr: *mut c_void) -> u64 {
        let mut handle: *mut c_void = std::ptr::null_mut();
        // SAFETY: its own context (or a foreign one, as NCCL would pass), a writable
        // handle slot and a descriptor it can read (caller).
        let result = unsafe { (self.start)(context as usize as *mut c_void, &mut handle, descr) };
        self.note(result);
        handle as usize as u64
    }

    /// Its `stopEvent` for one of its handles.
    #[inline]
    pub fn stop(&self, handle: u64) {
        // SAFETY: a handle its `startEvent` gave, stopped once.
        let result = unsafe { (self.stop)(handle as usize as *mut c_void) };
        self.note(result);
    }

    /// Its `recordEventState` for one of its handles; states its version does not have
    /// are dropped, and an older version gets non-NULL arguments, as from NCCL's shims.
    ///
    /// # Safety
    /// `args` is NULL or NCCL's state arguments for `state`.
    #[inline]
    pub unsafe fn record(&self, handle: u64, state: i32, args: *mut c_void) {
        let mut zeroed = StateArgsV4 { transSize: 0 };
        let args = if self.version < self.nccl_version {
            let unknown = match self.version {
                5 => (25..=31).contains(&state),
                6 => state == 31,
                _ => false,
            };
            if unknown {
                return;
            }
            if args.is_null() {
                (&mut zeroed as *mut StateArgsV4).cast()
            } else {
                args
            }
        } else {
            args
        };
        // SAFETY: a live handle it gave, and arguments of its version (the v5–v7 state
        // arguments share one layout).
        let result = unsafe { (self.record)(handle as usize as *mut c_void, state, args) };
        self.note(result);
    }

    #[inline]
    fn note(&self, result: ncclResult_t) {
        if result != NCCL_SUCCESS {
            CALL_ERRORS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_nccls_else_an_older_one_of_the_same_layout() {
        assert_eq!(chosen_version(7, &[1, 2, 3, 4, 5, 6, 7]), Some(7));
        assert_eq!(chosen_version(7, &[5, 6]), Some(6));
        assert_eq!(chosen_version(6, &[5]), Some(5));
        assert_eq!(chosen_version(7, &[1, 4]), None, "v4 has another layout");
        assert_eq!(chosen_version(4, &[3]), None);
        assert_eq!(chosen_version(4, &[4, 5]), Some(4));
        assert_eq!(
            chosen_version(3, &[5]),
            None,
            "NCCL would not load it either"
        );
    }

    #[test]
    fn nccl_starts_the_ancestors_of_what_a_mask_asks_for() {
        let kinds = emitted_kinds(bit::PROXY_STEP);
        let expected = bit::GROUP_API
            | bit::COLL_API
            | bit::P2P_API
            | bit::GROUP
            | bit::COLL
            | bit::P2P
            | bit::PROXY_OP
            | bit::PROXY_STEP;
        assert_eq!(kinds, expected);
        assert_eq!(emitted_kinds(bit::PROXY_CTRL), bit::PROXY_CTRL);
        assert_eq!(emitted_kinds(0), 0);
        assert_ne!(emitted_kinds(bit::KERNEL_PHASE) & bit::KERNEL_CH, 0);
    }

    #[test]
    fn older_versions_lose_the_mask_bits_their_shim_clears() {
        assert_eq!(allowed_mask(7, 7), !0);
        assert_eq!(allowed_mask(6, 7) & 0xF000, 0x7000);
        assert_eq!(allowed_mask(5, 7) & 0xF000, 0);
    }
}
