//! NCCL's side of the profiler plugin interface: loading the library, reference
//! counting and unloading, the global activation mask, and calling the
//! plugin through the API version it exports — directly when it is the release's newest,
//! else through an imitation of NCCL's in-core shim for that version, quirks
//! included: zeroed or garbage descriptors, dropped events and states, handles written
//! or left alone, uninitialised or NULL state arguments.

use crate::event::{CommInfo, CoreEvent, Descr, Raw, StateArgs, NULL};
use crate::release::{InitErrorHandling, Release};
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
use nccl_profiler_abi::loader::{self, ApiVersion, PluginSelection};
use nccl_profiler_abi::v2::CollV2;
use nccl_profiler_abi::v3::CollV3;
use nccl_profiler_abi::CBool;
use nccl_profiler_abi::{
    self as abi, event_type as t, state as st, v1, v2, v3, v4, v5, v6, v7, KernelChDescrV3,
    KernelChDescrV4, NetPluginDescr, ProxyOpDescr, ProxyStepDescr, StateArgsProxyCtrl, StateArgsV1,
    StateArgsV1ProxyOp, StateArgsV4,
};
use std::ffi::{c_int, c_void, OsStr, OsString};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The plugin's function table of the version NCCL uses.
#[derive(Clone, Copy)]
enum Table {
    V1(&'static v1::ncclProfiler_v1_t),
    V2(&'static v2::ncclProfiler_v2_t),
    V3(&'static v3::ncclProfiler_v3_t),
    V4(&'static v4::ncclProfiler_v4_t),
    V5(&'static v5::ncclProfiler_v5_t),
    V6(&'static v6::ncclProfiler_v6_t),
    V7(&'static v7::ncclProfiler_v7_t),
}

/// A loaded profiler library and the version NCCL picked from it.
struct Loaded {
    /// Kept open while a communicator uses it; dropped (dlclose) after the last finalize.
    _library: Arc<Library>,
    table: Table,
    version: ApiVersion,
    name: String,
    path: OsString,
}

enum Status {
    /// Not loaded yet, or unloaded after the last finalize.
    Ready,
    Loaded {
        plugin: Loaded,
        refs: i64,
    },
    /// Loading failed once: NCCL never tries again in this process.
    Failed,
}

/// What NCCL logged about the plugin (in NCCL's words, for tests and `--verbose`).
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    pub tried: Vec<OsString>,
    pub loaded: Option<OsString>,
    pub version: Option<ApiVersion>,
    pub name: Option<String>,
    pub message: String,
}

/// The profiler interface of one emulated NCCL library instance.
pub struct Profiler {
    release: Release,
    setting: Option<OsString>,
    status: Mutex<Status>,
    /// `ncclProfilerEventMask`: one int per process, handed to every `init`.
    mask: Box<AtomicI32>,
    /// Seed for the garbage NCCL's v4/v5 shims leave in descriptors.
    garbage: AtomicU64,
    report: Mutex<LoadReport>,
    /// Ignore symbols newer than this: makes a plugin look as if it exported only older
    /// versions, to exercise NCCL's shims with it.
    max_version: ApiVersion,
}

// SAFETY: the tables are immutable statics of the loaded library, and the library stays
// loaded while a `Loaded` refers to it; everything else is behind a Mutex or atomic.
unsafe impl Send for Profiler {}
// SAFETY: as for `Send`: shared access reads immutable tables or goes through locks.
unsafe impl Sync for Profiler {}

/// The profiler a communicator got at `init`: the table to call and its context.
#[derive(Clone, Copy)]
pub struct Session {
    table: Table,
    version: ApiVersion,
    pub context: Raw,
}

// SAFETY: see `Profiler`; the context is an opaque value.
unsafe impl Send for Session {}
// SAFETY: as for `Send`: a `Session` is plain values, never written once made.
unsafe impl Sync for Session {}

impl Profiler {
    /// A profiler interface for `release`, choosing the library from `setting` (the value
    /// of `NCCL_PROFILER_PLUGIN`, `None` when unset). Nothing is loaded before the first
    /// communicator `init`, as in NCCL.
    pub fn new(release: Release, setting: Option<OsString>) -> Profiler {
        Profiler {
            release,
            setting,
            status: Mutex::new(Status::Ready),
            mask: Box::new(AtomicI32::new(0)),
            garbage: AtomicU64::new(0x9E37_79B9_7F4A_7C15),
            report: Mutex::new(LoadReport::default()),
            max_version: loader::NEWEST_API_VERSION,
        }
    }

    /// Uses at most API `version` of the plugin, as if it exported nothing newer.
    pub fn with_max_version(mut self, version: ApiVersion) -> Profiler {
        self.max_version = version;
        self
    }

    /// From the process environment.
    pub fn from_env(release: Release) -> Profiler {
        Profiler::new(release, std::env::var_os(loader::PLUGIN_ENV))
    }

    pub fn release(&self) -> Release {
        self.release
    }

    /// The activation mask as the plugin left it.
    pub fn mask(&self) -> u64 {
        self.mask.load(Ordering::Relaxed) as u32 as u64
    }

    pub fn report(&self) -> LoadReport {
        self.report
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The API version in use, once loaded.
    pub fn version(&self) -> Option<ApiVersion> {
        match &*self.status.lock().unwrap_or_else(|e| e.into_inner()) {
            Status::Loaded { plugin, .. } => Some(plugin.version),
            _ => None,
        }
    }

    /// `ncclProfilerPluginInit` for one communicator rank: loads the library if needed,
    /// calls the plugin's `init`, and returns what the communicator keeps.
    pub fn init(&self, comm: &CommInfo) -> Option<Session> {
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(*status, Status::Ready) {
            *status = match self.load() {
                Some(plugin) => Status::Loaded { plugin, refs: 0 },
                None => Status::Failed,
            };
        }
        let Status::Loaded { plugin, refs } = &mut *status else {
            return None;
        };
        *refs += 1;
        let (table, version) = (plugin.table, plugin.version);
        // NCCL loads under its lock but calls `init` without it: communicators created
        // together (ncclCommInitAll, a group of inits) call it concurrently.
        drop(status);
        let mut context: Raw = NULL;
        let mask = self.mask.as_ptr();
        let name = comm.name.as_ref().map_or(std::ptr::null(), |n| n.as_ptr());
        let logger = Some(crate::logger::logger());
        // SAFETY: the table belongs to the loaded library; arguments are valid pointers.
        let result = unsafe {
            match table {
                Table::V1(t) => (t.init)(&mut context, mask),
                Table::V2(t) => (t.init)(&mut context, mask),
                Table::V3(t) => (t.init)(&mut context, mask),
                Table::V4(t) => (t.init)(
                    &mut context,
                    mask,
                    name,
                    comm.comm_hash,
                    comm.n_nodes,
                    comm.n_ranks,
                    comm.rank,
                    logger,
                ),
                Table::V5(t) => (t.init)(
                    &mut context,
                    comm.comm_hash,
                    mask,
                    name,
                    comm.n_nodes,
                    comm.n_ranks,
                    comm.rank,
                    logger,
                ),
                Table::V6(t) => (t.init)(
                    &mut context,
                    comm.comm_hash,
                    mask,
                    name,
                    comm.n_nodes,
                    comm.n_ranks,
                    comm.rank,
                    logger,
                ),
                Table::V7(t) => (t.init)(
                    &mut context,
                    comm.comm_hash,
                    mask,
                    name,
                    comm.n_nodes,
                    comm.n_ranks,
                    comm.rank,
                    logger,
                ),
            }
        };
        // The shims hide from core the events their version cannot carry.
        let direct = version == self.release.newest_api();
        let hidden = match version {
            5 if !direct && self.release.has_kernel_phase() => {
                t::CE_COLL | t::CE_SYNC | t::CE_BATCH | t::KERNEL_PHASE
            }
            5 if !direct => t::CE_COLL | t::CE_SYNC | t::CE_BATCH,
            6 if !direct => t::KERNEL_PHASE,
            _ => 0,
        };
        if hidden != 0 {
            self.mask.fetch_and(!(hidden as i32), Ordering::Relaxed);
        }
        // 2.31+: KernelPhase needs KernelCh.
        if self.release.has_kernel_phase() && self.mask() & t::KERNEL_PHASE != 0 {
            self.mask.fetch_or(t::KERNEL_CH as i32, Ordering::Relaxed);
        }
        if result != abi::NCCL_SUCCESS {
            let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
            return self.init_failed(&mut status, context, table, version);
        }
        Some(Session {
            table,
            version,
            context,
        })
    }

    /// NCCL's reaction to an `init` error, release by release.
    fn init_failed(
        &self,
        status: &mut Status,
        context: Raw,
        table: Table,
        version: ApiVersion,
    ) -> Option<Session> {
        match self.release.init_error() {
            InitErrorHandling::DisableProcess => {
                self.note("Profiler init failed: profiling disabled for the process");
                *status = Status::Failed;
                None
            }
            InitErrorHandling::KeepContext => {
                self.note("Profiler init failed; Continue without profiler");
                Some(Session {
                    table,
                    version,
                    context,
                })
            }
            InitErrorHandling::UnloadAtOnce => {
                self.note("Profiler init failed; Continue without profiler (unloaded)");
                self.release_reference(status);
                None
            }
        }
    }

    /// `ncclProfilerPluginFinalize`: the plugin's `finalize`, then one reference less; the
    /// library is closed after the last one.
    pub fn finalize(&self, session: Option<Session>) {
        let Some(session) = session else {
            return;
        };
        if !(self.release.finalize_needs_context() && session.context.is_null()) {
            // SAFETY: the session's table belongs to the library, which stays loaded until
            // this session's reference is released below.
            unsafe {
                match session.table {
                    Table::V1(t) => (t.finalize)(session.context),
                    Table::V2(t) => (t.finalize)(session.context),
                    Table::V3(t) => (t.finalize)(session.context),
                    Table::V4(t) => (t.finalize)(session.context),
                    Table::V5(t) => (t.finalize)(session.context),
                    Table::V6(t) => (t.finalize)(session.context),
                    Table::V7(t) => (t.finalize)(session.context),
                };
            }
        }
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        self.release_reference(&mut status);
    }

    fn release_reference(&self, status: &mut Status) {
        if let Status::Loaded { refs, .. } = status {
            *refs -= 1;
            if *refs <= 0 {
                *status = Status::Ready;
            }
        }
    }

    fn note(&self, message: &str) {
        self.report
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .message = message.to_owned();
    }

    /// Finds and opens the library and picks the symbol.
    fn load(&self) -> Option<Loaded> {
        let mut report = LoadReport::default();
        let candidates: Vec<Option<OsString>> = if self.release.tries_prefixed_name() {
            let value = self.setting.as_deref().filter(|v| {
                // Before 2.28 `none` is just a name that does not load.
                self.release.understands_none() || !v.eq_ignore_ascii_case("none")
            });
            match (self.setting.as_deref(), loader::plugin_selection(value)) {
                (Some(v), _)
                    if !self.release.understands_none() && v.eq_ignore_ascii_case("none") =>
                {
                    vec![
                        Some(OsString::from("none")),
                        Some(OsString::from("libnccl-profiler-none.so")),
                    ]
                }
                (_, PluginSelection::Disabled) => {
                    report.message = "profiler disabled (NCCL_PROFILER_PLUGIN=none)".into();
                    *self.report.lock().unwrap_or_else(|e| e.into_inner()) = report;
                    return None;
                }
                (_, PluginSelection::GlobalScope) => vec![None],
                (_, PluginSelection::Candidates(names)) => names.into_iter().map(Some).collect(),
            }
        } else {
            // 2.23–2.25: the value twice, or the default name.
            match self.setting.as_deref().filter(|v| !v.is_empty()) {
                Some(value) => vec![Some(value.to_owned()), Some(value.to_owned())],
                None => vec![Some(OsString::from(loader::DEFAULT_PLUGIN_LIBRARY))],
            }
        };
        for candidate in candidates {
            report
                .tried
                .push(candidate.clone().unwrap_or_else(|| "(global scope)".into()));
            // SAFETY: loading a profiler plugin is what NCCL does; its initialisers run.
            let opened = unsafe {
                Library::open(candidate.as_deref().map(OsStr::new), RTLD_NOW | RTLD_LOCAL)
            };
            let Ok(library) = opened else { continue };
            let library = Arc::new(library);
            let path = candidate.unwrap_or_default();
            report.loaded = Some(path.clone());
            let picked = (1..=self.release.newest_api().min(self.max_version))
                .rev()
                .find_map(|version| lookup(&library, version).map(|table| (version, table)));
            let Some((version, table)) = picked else {
                report.message = format!(
                    "External profiler plugin {} is unsupported",
                    path.to_string_lossy()
                );
                *self.report.lock().unwrap_or_else(|e| e.into_inner()) = report;
                return None;
            };
            let name = table_name(table);
            report.version = Some(version);
            report.name = Some(name.clone());
            report.message = format!("PROFILER/Plugin: Loaded {name} (v{version})");
            *self.report.lock().unwrap_or_else(|e| e.into_inner()) = report;
            return Some(Loaded {
                _library: library,
                table,
                version,
                name,
                path,
            });
        }
        report.message = "PROFILER/Plugin: Could not find any profiler plugin".into();
        *self.report.lock().unwrap_or_else(|e| e.into_inner()) = report;
        None
    }

    /// The name and file of the loaded plugin.
    pub fn loaded(&self) -> Option<(String, OsString)> {
        match &*self.status.lock().unwrap_or_else(|e| e.into_inner()) {
            Status::Loaded { plugin, .. } => Some((plugin.name.clone(), plugin.path.clone())),
            _ => None,
        }
    }

    // -----------------------------------------------------------------------------------
    // Events.

    /// `startEvent` as core calls it, through the version adapter. `handle` is core's
    /// variable for this event: adapters write it, clear it or leave it alone exactly as
    /// NCCL's do.
    pub fn start(&self, session: &Session, handle: &mut Raw, descr: &Descr) {
        let direct = session.version == self.release.newest_api();
        if matches!(descr.event, CoreEvent::KernelStep { .. }) && session.version != 6 {
            // Only a v6 descriptor can carry it (see `bugs::NcclBug::KernelStepOnBit15`).
            *handle = NULL;
            return;
        }
        let garbage = self
            .garbage
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
        // SAFETY: in every arm, descriptors are built fully below; the table belongs to the
        // library that `session` came from, which stays loaded while the comm lives.
        unsafe {
            match session.table {
                Table::V1(table) => {
                    if !direct {
                        *handle = NULL;
                    }
                    if let Some(mut d) = build_v1(descr, self.release) {
                        (table.startEvent)(session.context, handle, &mut d);
                    }
                }
                Table::V2(table) => {
                    if !direct {
                        *handle = NULL;
                    }
                    if let Some(mut d) = build_v2(descr, self.release) {
                        (table.startEvent)(session.context, handle, &mut d);
                    }
                }
                Table::V3(table) => {
                    if !direct {
                        *handle = NULL;
                    }
                    if let Some(mut d) = build_v3(descr, self.release) {
                        (table.startEvent)(session.context, handle, &mut d);
                    }
                }
                Table::V4(table) => {
                    // Types v4 does not know: success without writing the handle.
                    if let Some(mut d) = build_v4(descr, direct, garbage) {
                        (table.startEvent)(session.context, handle, &mut d);
                    }
                }
                Table::V5(table) => match descr.event {
                    CoreEvent::CeColl { .. }
                    | CoreEvent::CeSync { .. }
                    | CoreEvent::CeBatch { .. } => {
                        *handle = NULL;
                    }
                    CoreEvent::KernelPhase { .. } => {}
                    _ => {
                        let mut d = build_v5(descr, direct, garbage);
                        (table.startEvent)(session.context, handle, &mut d);
                    }
                },
                Table::V6(table) => match descr.event {
                    CoreEvent::KernelPhase { .. } => *handle = NULL,
                    _ => {
                        let mut d = build_v6(descr);
                        (table.startEvent)(session.context, handle, &mut d);
                    }
                },
                Table::V7(table) => {
                    let mut d = build_v7(descr);
                    (table.startEvent)(session.context, handle, &mut d);
                }
            }
        }
    }

    /// `stopEvent`: the same for every version.
    // A handle is an opaque value passed through to the plugin, never dereferenced here.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn stop(&self, session: &Session, handle: Raw) {
        // SAFETY: the table belongs to the session's loaded library.
        unsafe {
            match session.table {
                Table::V1(t) => (t.stopEvent)(handle),
                Table::V2(t) => (t.stopEvent)(handle),
                Table::V3(t) => (t.stopEvent)(handle),
                Table::V4(t) => (t.stopEvent)(handle),
                Table::V5(t) => (t.stopEvent)(handle),
                Table::V6(t) => (t.stopEvent)(handle),
                Table::V7(t) => (t.stopEvent)(handle),
            };
        }
    }

    /// `recordEventState` through the version adapter.
    // As for `stop`: the handle is opaque.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn record(&self, session: &Session, handle: Raw, state: i32, args: StateArgs) {
        let direct = session.version == self.release.newest_api();
        let garbage = self
            .garbage
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
        // SAFETY: in every arm, the argument structs live on this stack frame for the call.
        unsafe {
            match session.table {
                Table::V1(t) => {
                    if let Some(mut a) = args_v1(state, args, direct) {
                        (t.recordEventState)(handle, state, &mut a);
                    }
                }
                Table::V2(t) => {
                    if let Some(mut a) = args_v1(state, args, direct) {
                        (t.recordEventState)(handle, state, &mut a);
                    }
                }
                Table::V3(t) => {
                    if let Some(mut a) = args_v1(state, args, direct) {
                        (t.recordEventState)(handle, state, &mut a);
                    }
                }
                Table::V4(t) => {
                    let keep = direct
                        || matches!(
                            state,
                            st::PROXY_STEP_SEND_GPU_WAIT
                                ..=st::PROXY_OP_IN_PROGRESS_V4
                                    | st::PROXY_STEP_SEND_PEER_WAIT_V4
                                    | st::NET_PLUGIN_UPDATE
                                    | st::KERNEL_CH_STOP
                        );
                    if keep {
                        let mut a = args_v4(args, garbage);
                        (t.recordEventState)(handle, state, args_ptr(&mut a, args));
                    }
                }
                Table::V5(t) => {
                    let is_ce = (st::CE_COLL_START..=st::CE_BATCH_COMPLETE).contains(&state);
                    if direct || (!is_ce && state != st::KERNEL_PHASE_STOP) {
                        // The v5 shim passes a non-NULL, uninitialised struct for 19/23/24.
                        let args = match (direct, args) {
                            (false, StateArgs::Null) => StateArgs::Uninit,
                            (_, other) => other,
                        };
                        let mut a = args_v4(args, garbage);
                        (t.recordEventState)(handle, state, args_ptr(&mut a, args));
                    }
                }
                Table::V6(t) => {
                    if direct {
                        let mut a = args_v4(args, garbage);
                        (t.recordEventState)(handle, state, args_ptr(&mut a, args));
                    } else if state != st::KERNEL_PHASE_STOP {
                        // The v6 shim always passes a zeroed, non-NULL struct.
                        let mut a = match args {
                            StateArgs::Null | StateArgs::Uninit => zeroed(),
                            other => args_v4(other, 0),
                        };
                        (t.recordEventState)(handle, state, &mut a);
                    }
                }
                Table::V7(t) => {
                    let mut a = args_v4(args, garbage);
                    (t.recordEventState)(handle, state, args_ptr(&mut a, args));
                }
            }
        }
    }
}

/// Looks up `ncclProfiler_v<version>` in the library.
fn lookup(library: &Library, version: ApiVersion) -> Option<Table> {
    let symbol = format!("{}\0", loader::symbol_name(version));
    // SAFETY: the symbol, if present, is the plugin's table of that version (a static
    // that lives as long as the library, which `Loaded` keeps open).
    unsafe {
        let address = *library.get::<*const c_void>(symbol.as_bytes()).ok()?;
        if address.is_null() {
            return None;
        }
        Some(match version {
            1 => Table::V1(&*(address as *const v1::ncclProfiler_v1_t)),
            2 => Table::V2(&*(address as *const v2::ncclProfiler_v2_t)),
            3 => Table::V3(&*(address as *const v3::ncclProfiler_v3_t)),
            4 => Table::V4(&*(address as *const v4::ncclProfiler_v4_t)),
            5 => Table::V5(&*(address as *const v5::ncclProfiler_v5_t)),
            6 => Table::V6(&*(address as *const v6::ncclProfiler_v6_t)),
            7 => Table::V7(&*(address as *const v7::ncclProfiler_v7_t)),
            _ => return None,
        })
    }
}

fn table_name(table: Table) -> String {
    let name = match table {
        Table::V1(t) => t.name,
        Table::V2(t) => t.name,
        Table::V3(t) => t.name,
        Table::V4(t) => t.name,
        Table::V5(t) => t.name,
        Table::V6(t) => t.name,
        Table::V7(t) => t.name,
    };
    if name.is_null() {
        return "(unnamed)".into();
    }
    // SAFETY: a plugin's name is a static C string.
    unsafe { std::ffi::CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned()
}

// ---------------------------------------------------------------------------------------
// Descriptors, version by version.

/// A descriptor of any version, zeroed (what NCCL's direct path and the v1–v3 and v6
/// shims build).
fn zeroed<D>() -> D {
    // SAFETY: every descriptor and argument type is plain data (integers, pointers,
    // bools, unions of those), for which all-zero bytes are valid.
    unsafe { std::mem::zeroed() }
}

/// A descriptor or argument union full of stack garbage (what the v4 and v5 shims leave
/// in members they do not set).
fn garbage<D>(seed: u64) -> D {
    let mut value: D = zeroed();
    // SAFETY: writes within the value's bytes. Only descriptors (plain integers and
    // pointers around a union) and argument unions come here, and any bytes are valid
    // for those; the builders then write every member they use.
    let bytes = unsafe {
        std::slice::from_raw_parts_mut(&mut value as *mut D as *mut u8, std::mem::size_of::<D>())
    };
    let mut x = seed | 1;
    for byte in bytes.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *byte = x as u8;
    }
    value
}

fn cstr(s: &'static std::ffi::CStr) -> *const std::ffi::c_char {
    s.as_ptr()
}

fn proxy_op(event: &CoreEvent) -> Option<ProxyOpDescr> {
    match *event {
        CoreEvent::ProxyOp {
            pid,
            channel,
            peer,
            n_steps,
            chunk_size,
            is_send,
        } => Some(ProxyOpDescr {
            pid,
            channelId: channel,
            peer,
            nSteps: n_steps,
            chunkSize: chunk_size,
            isSend: i32::from(is_send),
        }),
        _ => None,
    }
}

/// Coll/P2p parents in the v1–v4 hierarchy: the Group handle.
fn legacy_parent(descr: &Descr) -> Raw {
    match descr.event {
        CoreEvent::Coll(c) => c.parent_group,
        CoreEvent::P2p(p) => p.parent_group,
        _ => descr.parent,
    }
}

fn build_v1(descr: &Descr, release: Release) -> Option<v1::ncclProfilerEventDescr_v1_t> {
    let mut d: v1::ncclProfilerEventDescr_v1_t = zeroed();
    d.type_ = descr.event.type_bit() as u8;
    d.parentObj = legacy_parent(descr);
    d.rank = descr.rank;
    let carry = release.task_descriptors_carry_comm();
    match descr.event {
        CoreEvent::Group | CoreEvent::ProxyCtrl => {}
        CoreEvent::Coll(c) => {
            d.u.coll = v1::CollV1 {
                name: if carry { c.comm_name } else { std::ptr::null() },
                commHash: if carry { c.comm_hash } else { 0 },
                seqNumber: c.seq,
                func: c.func.v1_number(),
                sendBuff: std::ptr::null(),
                recvBuff: NULL,
                count: c.count,
                root: c.root,
                datatype: c.datatype.v1_number(),
                op: 0,
                trafficBytes: if release.minor() == 23 {
                    c.count * c.datatype.size()
                } else {
                    0
                },
                nMaxChannels: c.n_channels,
                nWarps: c.n_warps,
                algo: c.algo.v1_number(),
                proto: c.proto.v1_number(),
                isCollnet: 0,
                isNvls: 0,
            }
        }
        CoreEvent::P2p(p) => {
            d.u.p2p = v1::P2pV1 {
                name: if carry { p.comm_name } else { std::ptr::null() },
                commHash: if carry { p.comm_hash } else { 0 },
                func: p.func.v1_number(),
                buff: NULL,
                datatype: p.datatype.v1_number(),
                count: p.count,
                peer: p.peer,
            }
        }
        CoreEvent::ProxyOp { .. } => d.u.proxyOp = proxy_op(&descr.event)?,
        CoreEvent::ProxyStep { step } => d.u.proxyStep = ProxyStepDescr { step },
        _ => return None,
    }
    Some(d)
}

/// Fills the string-typed `coll`/`p2p` of v2 and v3 (they differ only in `trafficBytes`).
macro_rules! string_task {
    ($d:ident, $descr:expr, $release:expr, $coll:ident, { $($extra:tt)* }) => {{
        let carry = $release.task_descriptors_carry_comm();
        match $descr.event {
            CoreEvent::Coll(c) => {
                $d.u.coll = $coll {
                    name: if carry { c.comm_name } else { std::ptr::null() },
                    commHash: if carry { c.comm_hash } else { 0 },
                    seqNumber: c.seq,
                    func: cstr(c.func.name()),
                    sendBuff: std::ptr::null(),
                    recvBuff: NULL,
                    count: c.count,
                    root: c.root,
                    datatype: cstr(c.datatype.name()),
                    nMaxChannels: c.n_channels,
                    nWarps: c.n_warps,
                    algo: cstr(c.algo.name()),
                    proto: cstr(c.proto.name()),
                    $($extra)*
                };
                true
            }
            CoreEvent::P2p(p) => {
                $d.u.p2p = v2::P2pV2 {
                    name: if carry { p.comm_name } else { std::ptr::null() },
                    commHash: if carry { p.comm_hash } else { 0 },
                    func: cstr(p.func.name()),
                    buff: NULL,
                    datatype: cstr(p.datatype.name()),
                    count: p.count,
                    peer: p.peer,
                };
                true
            }
            _ => false,
        }
    }};
}

fn build_v2(descr: &Descr, release: Release) -> Option<v2::ncclProfilerEventDescr_v2_t> {
    let mut d: v2::ncclProfilerEventDescr_v2_t = zeroed();
    d.type_ = descr.event.type_bit() as u8;
    d.parentObj = legacy_parent(descr);
    d.rank = descr.rank;
    if string_task!(d, descr, release, CollV2, { trafficBytes: 0 }) {
        return Some(d);
    }
    match descr.event {
        CoreEvent::Group | CoreEvent::ProxyCtrl => {}
        CoreEvent::ProxyOp { .. } => d.u.proxyOp = proxy_op(&descr.event)?,
        CoreEvent::ProxyStep { step } => d.u.proxyStep = ProxyStepDescr { step },
        _ => return None,
    }
    Some(d)
}

fn build_v3(descr: &Descr, release: Release) -> Option<v3::ncclProfilerEventDescr_v3_t> {
    let mut d: v3::ncclProfilerEventDescr_v3_t = zeroed();
    d.type_ = descr.event.type_bit() as u8;
    d.parentObj = legacy_parent(descr);
    d.rank = descr.rank;
    if string_task!(d, descr, release, CollV3, {}) {
        return Some(d);
    }
    match descr.event {
        CoreEvent::Group | CoreEvent::ProxyCtrl => {}
        CoreEvent::ProxyOp { .. } => d.u.proxyOp = proxy_op(&descr.event)?,
        CoreEvent::ProxyStep { step } => d.u.proxyStep = ProxyStepDescr { step },
        CoreEvent::KernelCh { channel, .. } => {
            d.u.kernelCh = KernelChDescrV3 { channelId: channel }
        }
        CoreEvent::NetPlugin { id, data } => d.u.netPlugin = NetPluginDescr { id, data },
        _ => return None,
    }
    Some(d)
}

fn build_v4(descr: &Descr, direct: bool, seed: u64) -> Option<v4::ncclProfilerEventDescr_v4_t> {
    // Direct (2.27): NCCL's own zeroed descriptor; the v4 shim (2.28+): stack garbage.
    let mut d: v4::ncclProfilerEventDescr_v4_t = if direct { zeroed() } else { garbage(seed) };
    d.type_ = descr.event.type_bit() as u8;
    d.parentObj = legacy_parent(descr);
    d.rank = descr.rank;
    match descr.event {
        CoreEvent::Group | CoreEvent::ProxyCtrl => {}
        CoreEvent::Coll(c) => {
            d.u.coll = v4::CollV4 {
                seqNumber: c.seq,
                func: cstr(c.func.name()),
                sendBuff: std::ptr::null(),
                recvBuff: NULL,
                count: c.count,
                root: c.root,
                datatype: cstr(c.datatype.name()),
                nChannels: c.n_channels,
                nWarps: c.n_warps,
                algo: cstr(c.algo.name()),
                proto: cstr(c.proto.name()),
            }
        }
        CoreEvent::P2p(p) => {
            // The shim never copies p2p.nChannels: whatever was on the stack stays.
            // SAFETY: every member of the union is plain integers and pointers; reading
            // one reads whatever bytes are there, as NCCL's shim does.
            let garbage_channels = unsafe { d.u.p2p.nChannels };
            d.u.p2p = v4::P2pV4 {
                func: cstr(p.func.name()),
                buff: NULL,
                datatype: cstr(p.datatype.name()),
                count: p.count,
                peer: p.peer,
                nChannels: if direct {
                    p.n_channels
                } else {
                    garbage_channels
                },
            }
        }
        CoreEvent::ProxyOp { .. } => d.u.proxyOp = proxy_op(&descr.event)?,
        CoreEvent::ProxyStep { step } => d.u.proxyStep = ProxyStepDescr { step },
        CoreEvent::KernelCh { channel, ptimer } => {
            d.u.kernelCh = KernelChDescrV4 {
                channelId: channel,
                pTimer: ptimer,
            }
        }
        CoreEvent::NetPlugin { id, data } => d.u.netPlugin = NetPluginDescr { id, data },
        _ => return None,
    }
    Some(d)
}

/// The members v5, v6 and v7 share (all but userTag and the v7 additions).
macro_rules! fill_v5_family {
    ($d:ident, $descr:expr, $coll:expr, $p2p:expr, $coll_api:expr, $p2p_api:expr, $other:expr) => {{
        $d.type_ = $descr.event.type_bit();
        $d.parentObj = $descr.parent;
        $d.rank = $descr.rank;
        match $descr.event {
            CoreEvent::Group | CoreEvent::ProxyCtrl | CoreEvent::KernelLaunch => {}
            CoreEvent::GroupApi {
                graph_captured,
                depth,
            } => {
                $d.u.groupApi = v5::GroupApiV5 {
                    graphCaptured: CBool::from(graph_captured),
                    groupDepth: depth,
                }
            }
            CoreEvent::CollApi { .. } => $d.u.collApi = $coll_api(&$descr.event),
            CoreEvent::P2pApi { .. } => $d.u.p2pApi = $p2p_api(&$descr.event),
            CoreEvent::Coll(c) => $d.u.coll = $coll(&c),
            CoreEvent::P2p(p) => $d.u.p2p = $p2p(&p),
            CoreEvent::ProxyOp { .. } => {
                if let Some(op) = proxy_op(&$descr.event) {
                    $d.u.proxyOp = op;
                }
            }
            CoreEvent::ProxyStep { step } => $d.u.proxyStep = ProxyStepDescr { step },
            CoreEvent::KernelCh { channel, ptimer } | CoreEvent::KernelStep { channel, ptimer } => {
                $d.u.kernelCh = KernelChDescrV4 {
                    channelId: channel,
                    pTimer: ptimer,
                }
            }
            CoreEvent::NetPlugin { id, data } => $d.u.netPlugin = NetPluginDescr { id, data },
            _ => $other(&mut $d, &$descr.event),
        }
    }};
}

fn coll_v5(c: &crate::event::CollTask) -> v5::CollV5 {
    v5::CollV5 {
        seqNumber: c.seq,
        func: cstr(c.func.name()),
        sendBuff: std::ptr::null(),
        recvBuff: NULL,
        count: c.count,
        root: c.root,
        datatype: cstr(c.datatype.name()),
        nChannels: c.n_channels,
        nWarps: c.n_warps,
        algo: cstr(c.algo.name()),
        proto: cstr(c.proto.name()),
        parentGroup: c.parent_group,
    }
}

fn p2p_v5(p: &crate::event::P2pTask) -> v5::P2pV5 {
    v5::P2pV5 {
        func: cstr(p.func.name()),
        buff: NULL,
        datatype: cstr(p.datatype.name()),
        count: p.count,
        peer: p.peer,
        nChannels: p.n_channels,
        parentGroup: p.parent_group,
    }
}

fn coll_api_v5(e: &CoreEvent) -> v5::CollApiV5 {
    let CoreEvent::CollApi {
        func,
        count,
        datatype,
        root,
        graph_captured,
        ..
    } = *e
    else {
        unreachable!("called for CollApi only")
    };
    v5::CollApiV5 {
        func: cstr(func.name()),
        count,
        datatype: cstr(datatype.name()),
        root,
        stream: NULL,
        graphCaptured: CBool::from(graph_captured),
    }
}

fn p2p_api_v5(e: &CoreEvent) -> v5::P2pApiV5 {
    let CoreEvent::P2pApi {
        func,
        count,
        datatype,
        graph_captured,
        ..
    } = *e
    else {
        unreachable!("called for P2pApi only")
    };
    v5::P2pApiV5 {
        func: cstr(func.name()),
        count,
        datatype: cstr(datatype.name()),
        stream: NULL,
        graphCaptured: CBool::from(graph_captured),
    }
}

fn build_v5(descr: &Descr, direct: bool, seed: u64) -> v5::ncclProfilerEventDescr_v5_t {
    let mut d: v5::ncclProfilerEventDescr_v5_t = if direct { zeroed() } else { garbage(seed) };
    fill_v5_family!(
        d,
        descr,
        coll_v5,
        p2p_v5,
        coll_api_v5,
        p2p_api_v5,
        |_: &mut v5::ncclProfilerEventDescr_v5_t, _: &CoreEvent| {}
    );
    d
}

/// The copy-engine members shared by v6 and v7 (v7's CeColl adds `userTag`).
fn ce_coll_v6(e: &CoreEvent) -> Option<(v6::CeCollV6, u64)> {
    let CoreEvent::CeColl {
        seq,
        func,
        count,
        root,
        datatype,
        batch_size,
        num_batches,
        ce_seq,
        user_tag,
    } = *e
    else {
        return None;
    };
    Some((
        v6::CeCollV6 {
            seqNumber: seq,
            func: cstr(func.name()),
            sendBuff: std::ptr::null(),
            recvBuff: NULL,
            count,
            root,
            datatype: cstr(datatype.name()),
            syncStrategy: c"batch".as_ptr(),
            intraBatchSync: CBool::FALSE,
            batchSize: batch_size,
            numBatches: num_batches,
            ceSeqNum: ce_seq,
            stream: NULL,
        },
        user_tag,
    ))
}

fn ce_sync(e: &CoreEvent) -> Option<v6::CeSyncV6> {
    match *e {
        CoreEvent::CeSync {
            is_complete,
            n_ranks,
        } => Some(v6::CeSyncV6 {
            isComplete: CBool::from(is_complete),
            nRanks: n_ranks,
        }),
        _ => None,
    }
}

fn ce_batch(e: &CoreEvent) -> Option<v6::CeBatchV6> {
    match *e {
        CoreEvent::CeBatch {
            num_ops,
            total_bytes,
            use_intra_sync,
        } => Some(v6::CeBatchV6 {
            numOps: num_ops,
            totalBytes: total_bytes,
            useIntraSync: CBool::from(use_intra_sync),
        }),
        _ => None,
    }
}

fn ce_v6(d: &mut v6::ncclProfilerEventDescr_v6_t, e: &CoreEvent) {
    if let Some((coll, _)) = ce_coll_v6(e) {
        d.u.ceColl = coll;
    } else if let Some(sync) = ce_sync(e) {
        d.u.ceCollSync = sync;
    } else if let Some(batch) = ce_batch(e) {
        d.u.ceCollBatch = batch;
    }
}

fn build_v6(descr: &Descr) -> v6::ncclProfilerEventDescr_v6_t {
    // Direct (2.29–2.30) or the v6 shim (2.31+): zeroed either way; the shim drops what
    // v7 added (userTag, kernelVariant, isSymColl).
    let mut d: v6::ncclProfilerEventDescr_v6_t = zeroed();
    fill_v5_family!(d, descr, coll_v5, p2p_v5, coll_api_v5, p2p_api_v5, ce_v6);
    d
}

fn coll_v7(c: &crate::event::CollTask) -> v7::CollV7 {
    let (algo, proto) = match c.symmetric_variant {
        Some(variant) => (variant.as_ptr(), c"".as_ptr()),
        None => (cstr(c.algo.name()), cstr(c.proto.name())),
    };
    v7::CollV7 {
        seqNumber: c.seq,
        func: cstr(c.func.name()),
        sendBuff: std::ptr::null(),
        recvBuff: NULL,
        count: c.count,
        root: c.root,
        datatype: cstr(c.datatype.name()),
        nChannels: c.n_channels,
        nWarps: c.n_warps,
        algo,
        proto,
        parentGroup: c.parent_group,
        kernelVariant: c.symmetric_variant.map_or(std::ptr::null(), |v| v.as_ptr()),
        isSymColl: CBool::from(c.symmetric_variant.is_some()),
        userTag: c.user_tag,
    }
}

fn p2p_v7(p: &crate::event::P2pTask) -> v7::P2pV7 {
    v7::P2pV7 {
        func: cstr(p.func.name()),
        buff: NULL,
        datatype: cstr(p.datatype.name()),
        count: p.count,
        peer: p.peer,
        nChannels: p.n_channels,
        parentGroup: p.parent_group,
        userTag: p.user_tag,
    }
}

fn coll_api_v7(e: &CoreEvent) -> v7::CollApiV7 {
    let base = coll_api_v5(e);
    let CoreEvent::CollApi { user_tag, .. } = *e else {
        unreachable!("called for CollApi only")
    };
    v7::CollApiV7 {
        func: base.func,
        count: base.count,
        datatype: base.datatype,
        root: base.root,
        stream: base.stream,
        graphCaptured: base.graphCaptured,
        userTag: user_tag,
    }
}

fn p2p_api_v7(e: &CoreEvent) -> v7::P2pApiV7 {
    let base = p2p_api_v5(e);
    let CoreEvent::P2pApi { user_tag, .. } = *e else {
        unreachable!("called for P2pApi only")
    };
    v7::P2pApiV7 {
        func: base.func,
        count: base.count,
        datatype: base.datatype,
        stream: base.stream,
        graphCaptured: base.graphCaptured,
        userTag: user_tag,
    }
}

fn extra_v7(d: &mut v7::ncclProfilerEventDescr_v7_t, e: &CoreEvent) {
    const PHASE_NAMES: [&std::ffi::CStr; 3] = [c"initial_sync", c"compute", c"final_sync"];
    if let CoreEvent::KernelPhase {
        channel,
        phase,
        ptimer,
    } = *e
    {
        d.u.kernelPhase = v7::KernelPhaseV7 {
            channelId: channel,
            phaseId: phase,
            phaseName: PHASE_NAMES
                .get(usize::from(phase))
                .map_or(std::ptr::null(), |n| n.as_ptr()),
            pTimer: ptimer,
        };
    } else if let Some((c, user_tag)) = ce_coll_v6(e) {
        d.u.ceColl = v7::CeCollV7 {
            seqNumber: c.seqNumber,
            func: c.func,
            sendBuff: c.sendBuff,
            recvBuff: c.recvBuff,
            count: c.count,
            root: c.root,
            datatype: c.datatype,
            syncStrategy: c.syncStrategy,
            intraBatchSync: c.intraBatchSync,
            batchSize: c.batchSize,
            numBatches: c.numBatches,
            ceSeqNum: c.ceSeqNum,
            stream: c.stream,
            userTag: user_tag,
        };
    } else if let Some(sync) = ce_sync(e) {
        d.u.ceCollSync = sync;
    } else if let Some(batch) = ce_batch(e) {
        d.u.ceCollBatch = batch;
    }
}

fn build_v7(descr: &Descr) -> v7::ncclProfilerEventDescr_v7_t {
    let mut d: v7::ncclProfilerEventDescr_v7_t = zeroed();
    fill_v5_family!(d, descr, coll_v7, p2p_v7, coll_api_v7, p2p_api_v7, extra_v7);
    d
}

// ---------------------------------------------------------------------------------------
// State arguments.

/// v1–v3 arguments. Direct (2.23–2.26): ProxyOp states carry `{transSize, steps}`,
/// ProxyCtrl the appended count. The shims on newer releases forward only ProxyCtrl
/// 13–18 and ProxyStep 8–12, with zeroed arguments but for the appended count.
fn args_v1(state: i32, args: StateArgs, direct: bool) -> Option<StateArgsV1> {
    let mut a: StateArgsV1 = zeroed();
    if direct {
        match args {
            StateArgs::ProxyOpProgress { trans_size, steps } => {
                a.proxyOp = StateArgsV1ProxyOp {
                    transSize: trans_size,
                    steps,
                }
            }
            StateArgs::Appended(n) => {
                a.proxyCtrl = StateArgsProxyCtrl {
                    appendedProxyOps: n,
                }
            }
            _ => {}
        }
        return Some(a);
    }
    match state {
        st::PROXY_CTRL_IDLE..=st::PROXY_CTRL_APPEND_END => {
            if let StateArgs::Appended(n) = args {
                a.proxyCtrl = StateArgsProxyCtrl {
                    appendedProxyOps: n,
                };
            }
            Some(a)
        }
        st::PROXY_STEP_SEND_GPU_WAIT..=st::PROXY_STEP_RECV_GPU_WAIT => Some(a),
        _ => None,
    }
}

/// v4–v7 arguments (8 bytes, one member at a time).
fn args_v4(args: StateArgs, seed: u64) -> StateArgsV4 {
    match args {
        StateArgs::Null | StateArgs::Uninit => garbage(seed),
        StateArgs::TransSize(n) => StateArgsV4 { transSize: n },
        StateArgs::ProxyOpProgress { trans_size, .. } => StateArgsV4 {
            transSize: trans_size,
        },
        StateArgs::Appended(n) => StateArgsV4 {
            appendedProxyOps: n as c_int,
        },
        StateArgs::NetData(data) => StateArgsV4 {
            netPluginData: data,
        },
        StateArgs::PTimer(t) => StateArgsV4 { kernelChPTimer: t },
    }
}

/// NULL for `StateArgs::Null`, else the struct.
fn args_ptr(a: &mut StateArgsV4, args: StateArgs) -> *mut StateArgsV4 {
    match args {
        StateArgs::Null => std::ptr::null_mut(),
        _ => a,
    }
}

/// The bytes the version adapters write, read at the offsets of NCCL's headers spelled
/// out here, not through the shared `nccl_profiler_abi` types: a wrong definition there
/// would otherwise pass on both sides, in the plugin and in this stand-in.
#[cfg(test)]
mod descriptor_bytes {
    use super::*;
    use crate::event::{CollTask, CoreEvent, P2pTask};
    use crate::names::{Algo, DataType, Func, Proto};
    use std::ffi::CStr;

    fn bytes_of<T>(value: &T) -> &[u8] {
        // SAFETY: any initialised value can be viewed as its bytes (the descriptors are
        // zeroed before they are filled, so padding is initialised too).
        unsafe { std::slice::from_raw_parts((value as *const T).cast::<u8>(), size_of::<T>()) }
    }

    fn u64_at(bytes: &[u8], at: usize) -> u64 {
        u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap())
    }

    fn i32_at(bytes: &[u8], at: usize) -> i32 {
        i32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap())
    }

    /// The C string a pointer stored at `at` points to.
    fn str_at(bytes: &[u8], at: usize) -> String {
        let ptr = u64_at(bytes, at) as usize as *const std::ffi::c_char;
        assert!(!ptr.is_null(), "NULL string at {at}");
        // SAFETY: the adapters store pointers to static NUL-terminated names.
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned()
    }

    fn coll() -> Descr {
        Descr {
            parent: 0x1234_5678 as Raw,
            rank: 3,
            event: CoreEvent::Coll(CollTask {
                seq: 41,
                func: Func::AllReduce,
                count: 1000,
                root: 2,
                datatype: DataType::Float32,
                n_channels: 4,
                n_warps: 16,
                algo: Algo::Ring,
                proto: Proto::Simple,
                symmetric_variant: None,
                parent_group: 0x5678 as Raw,
                user_tag: 77,
                comm_name: std::ptr::null(),
                comm_hash: 0xC0FFEE,
            }),
        }
    }

    #[test]
    fn a_v7_collective_has_its_fields_where_nccl_2_31_puts_them() {
        let d = build_v7(&coll());
        let b = bytes_of(&d);
        assert_eq!(b.len(), 136);
        assert_eq!(u64_at(b, 0), 1 << 1, "type is a u64 at 0");
        assert_eq!(u64_at(b, 8), 0x1234_5678, "parentObj");
        assert_eq!(i32_at(b, 16), 3, "rank");
        assert_eq!(u64_at(b, 24), 41, "coll.seqNumber");
        assert_eq!(str_at(b, 32), "AllReduce", "coll.func");
        assert_eq!(u64_at(b, 56), 1000, "coll.count");
        assert_eq!(i32_at(b, 64), 2, "coll.root");
        assert_eq!(str_at(b, 72), "ncclFloat32", "coll.datatype");
        assert_eq!(b[80], 4, "coll.nChannels");
        assert_eq!(b[81], 16, "coll.nWarps");
        assert_eq!(str_at(b, 88), "RING", "coll.algo");
        assert_eq!(str_at(b, 96), "SIMPLE", "coll.proto");
        assert_eq!(u64_at(b, 104), 0x5678, "coll.parentGroup");
        assert_eq!(b[120], 0, "coll.isSymColl");
        assert_eq!(u64_at(b, 128), 77, "coll.userTag");
    }

    #[test]
    fn a_v4_collective_has_its_fields_where_nccl_2_27_puts_them() {
        let d = build_v4(&coll(), true, 0).unwrap();
        let b = bytes_of(&d);
        assert_eq!(b.len(), 104);
        assert_eq!(b[0], 1 << 1, "type is a u8 at 0");
        assert_eq!(u64_at(b, 24), 41, "coll.seqNumber");
        assert_eq!(str_at(b, 32), "AllReduce", "coll.func");
        assert_eq!(u64_at(b, 56), 1000, "coll.count");
        assert_eq!(i32_at(b, 64), 2, "coll.root");
        assert_eq!(str_at(b, 72), "ncclFloat32", "coll.datatype");
        assert_eq!(b[80], 4, "coll.nChannels");
        assert_eq!(str_at(b, 88), "RING", "coll.algo");
        assert_eq!(str_at(b, 96), "SIMPLE", "coll.proto");
    }

    #[test]
    fn a_v1_collective_has_its_fields_where_nccl_2_23_puts_them() {
        let release: crate::release::Release = "2.23".parse().unwrap();
        let d = build_v1(&coll(), release).unwrap();
        let b = bytes_of(&d);
        assert_eq!(b.len(), 120);
        assert_eq!(b[0], 1 << 1, "type");
        assert_eq!(i32_at(b, 16), 3, "rank");
        assert_eq!(u64_at(b, 32), 0xC0FFEE, "coll.commHash");
        assert_eq!(u64_at(b, 40), 41, "coll.seqNumber");
        assert_eq!(b[48], 4, "coll.func: AllReduce is 4");
        assert_eq!(u64_at(b, 72), 1000, "coll.count");
        assert_eq!(i32_at(b, 80), 2, "coll.root");
        assert_eq!(b[84], 7, "coll.datatype: Float32 is 7");
        assert_eq!(b[104], 4, "coll.nMaxChannels");
        assert_eq!(b[106], 1, "coll.algo: RING is 1");
        assert_eq!(b[107], 2, "coll.proto: SIMPLE is 2");
    }

    #[test]
    fn proxy_and_kernel_members_sit_at_the_same_offsets_in_v7() {
        let op = build_v7(&Descr {
            parent: NULL,
            rank: 1,
            event: CoreEvent::ProxyOp {
                pid: 4242,
                channel: 5,
                peer: 6,
                n_steps: 7,
                chunk_size: 8,
                is_send: true,
            },
        });
        let b = bytes_of(&op);
        assert_eq!(u64_at(b, 0), 1 << 3);
        assert_eq!(i32_at(b, 24), 4242, "proxyOp.pid");
        assert_eq!(b[28], 5, "proxyOp.channelId");
        assert_eq!(i32_at(b, 32), 6, "proxyOp.peer");
        assert_eq!(i32_at(b, 36), 7, "proxyOp.nSteps");
        assert_eq!(i32_at(b, 40), 8, "proxyOp.chunkSize");
        assert_eq!(i32_at(b, 44), 1, "proxyOp.isSend");

        let ch = build_v7(&Descr {
            parent: NULL,
            rank: 0,
            event: CoreEvent::KernelCh {
                channel: 9,
                ptimer: 0xABCD,
            },
        });
        let b = bytes_of(&ch);
        assert_eq!(u64_at(b, 0), 1 << 6);
        assert_eq!(b[24], 9, "kernelCh.channelId");
        assert_eq!(u64_at(b, 32), 0xABCD, "kernelCh.pTimer");

        let phase = build_v7(&Descr {
            parent: NULL,
            rank: 0,
            event: CoreEvent::KernelPhase {
                channel: 2,
                phase: 1,
                ptimer: 0x1111,
            },
        });
        let b = bytes_of(&phase);
        assert_eq!(u64_at(b, 0), 1 << 15);
        assert_eq!(b[24], 2, "kernelPhase.channelId");
        assert_eq!(b[25], 1, "kernelPhase.phaseId");
        assert_eq!(u64_at(b, 40), 0x1111, "kernelPhase.pTimer");
    }

    #[test]
    fn a_v7_p2p_has_its_fields_where_nccl_2_31_puts_them() {
        let d = build_v7(&Descr {
            parent: NULL,
            rank: 0,
            event: CoreEvent::P2p(P2pTask {
                func: Func::Send,
                count: 64,
                datatype: DataType::Int8,
                peer: 5,
                n_channels: 2,
                parent_group: 0x99 as Raw,
                user_tag: 12,
                comm_name: std::ptr::null(),
                comm_hash: 0,
            }),
        });
        let b = bytes_of(&d);
        assert_eq!(u64_at(b, 0), 1 << 2);
        assert_eq!(str_at(b, 24), "Send", "p2p.func");
        assert_eq!(str_at(b, 40), "ncclInt8", "p2p.datatype");
        assert_eq!(u64_at(b, 48), 64, "p2p.count");
        assert_eq!(i32_at(b, 56), 5, "p2p.peer");
        assert_eq!(b[60], 2, "p2p.nChannels");
        assert_eq!(u64_at(b, 64), 0x99, "p2p.parentGroup");
        assert_eq!(u64_at(b, 72), 12, "p2p.userTag");
    }
}
