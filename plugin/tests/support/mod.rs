//! Loads the built plugin the way NCCL does (`dlopen(RTLD_NOW | RTLD_LOCAL)`, then the
//! `ncclProfiler_vN` data symbols) and reads back its JSON-lines event log.
//!
//! Every [`Plugin`] loads its own copy of the library file, so each test gets a fresh
//! plugin instance (own statics, own collector) even when tests run as threads of one
//! process.

#![allow(dead_code)]

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
use nccl_profiler_abi::CBool;
use nccl_profiler_abi::{self as abi, v1, v4, v5, v6, v7, StateArgsV1, StateArgsV4};
use serde_json::Value;
use std::ffi::{c_int, c_void, CStr};
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::ptr::null_mut;
use std::sync::Mutex;

mod library;
pub use library::built_library;

/// Configuration is read from the environment at the first `init`: tests that set it
/// must not interleave.
static ENV_LOCK: Mutex<()> = Mutex::new(());

pub struct Plugin {
    /// Never closed: the plugin pins itself with thread-local destructors, and NCCL may
    /// keep it loaded too; a test mirrors a process that never unloads it.
    library: ManuallyDrop<Library>,
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

/// One communicator rank's context, as returned by `init`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ctx(pub *mut c_void);
// SAFETY: a context is an opaque number that NCCL passes between its threads.
unsafe impl Send for Ctx {}
// SAFETY: as for `Send`.
unsafe impl Sync for Ctx {}

/// An event handle, as NCCL keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handle(pub *mut c_void);
// SAFETY: as for Ctx.
unsafe impl Send for Handle {}
// SAFETY: as for Ctx.
unsafe impl Sync for Handle {}

impl Handle {
    pub fn is_null(self) -> bool {
        self.0.is_null()
    }
    pub fn value(self) -> u64 {
        self.0 as u64
    }
}

impl Plugin {
    /// Loads a private copy of the library as `libnccl-profiler-scorep.so`, with
    /// `NCCL_SCOREP_*` settings `env` (the output directory is the plugin's own).
    pub fn load(env: &[(&str, &str)]) -> Plugin {
        Plugin::load_copy_of(&built_library(), env)
    }

    /// As [`Plugin::load`], from a given library file.
    pub fn load_copy_of(library: &Path, env: &[(&str, &str)]) -> Plugin {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("libnccl-profiler-scorep.so");
        std::fs::copy(library, &path).expect("copy the plugin");
        // SAFETY: loading our own plugin, whose initialisers have no preconditions.
        let library =
            unsafe { Library::open(Some(&path), RTLD_NOW | RTLD_LOCAL) }.expect("dlopen plugin");
        let mut env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        // These tests read the JSON-lines event log.
        if !env.iter().any(|(k, _)| k == "NCCL_SCOREP_JSONL") {
            env.push(("NCCL_SCOREP_JSONL".into(), "1".into()));
        }
        // The copy has no nccl-scorep tool beside it: without one named, no automatic
        // merge (which would only warn that it cannot find the tool).
        if !env
            .iter()
            .any(|(k, _)| k == "NCCL_SCOREP_AUTO_MERGE" || k == "NCCL_SCOREP_TOOL")
        {
            env.push(("NCCL_SCOREP_AUTO_MERGE".into(), "0".into()));
        }
        if !env.iter().any(|(k, _)| k == "NCCL_SCOREP_OUTPUT_DIR") {
            env.push((
                "NCCL_SCOREP_OUTPUT_DIR".into(),
                dir.path().join("out").display().to_string(),
            ));
        }
        Plugin {
            library: ManuallyDrop::new(library),
            dir,
            env,
        }
    }

    pub fn out_dir(&self) -> PathBuf {
        self.env
            .iter()
            .find(|(k, _)| k == "NCCL_SCOREP_OUTPUT_DIR")
            .map(|(_, v)| PathBuf::from(v))
            .expect("output dir")
    }

    /// The exported table `symbol` (e.g. `ncclProfiler_v7`).
    pub fn table<T>(&self, symbol: &str) -> &T {
        let name = format!("{symbol}\0");
        // SAFETY: the symbol is a static of type T in the plugin, which stays loaded as
        // long as `self`.
        unsafe {
            let sym = self
                .library
                .get::<*const T>(name.as_bytes())
                .unwrap_or_else(|e| panic!("{symbol} not exported: {e}"));
            &**sym
        }
    }

    pub fn has_symbol(&self, symbol: &str) -> bool {
        let name = format!("{symbol}\0");
        // SAFETY: only the address is looked up.
        unsafe { self.library.get::<*const c_void>(name.as_bytes()).is_ok() }
    }

    pub fn v1(&self) -> &v1::ncclProfiler_v1_t {
        self.table("ncclProfiler_v1")
    }
    pub fn v4(&self) -> &v4::ncclProfiler_v4_t {
        self.table("ncclProfiler_v4")
    }
    pub fn v5(&self) -> &v5::ncclProfiler_v5_t {
        self.table("ncclProfiler_v5")
    }
    pub fn v6(&self) -> &v6::ncclProfiler_v6_t {
        self.table("ncclProfiler_v6")
    }
    pub fn v7(&self) -> &v7::ncclProfiler_v7_t {
        self.table("ncclProfiler_v7")
    }

    /// Runs `f` with this plugin's settings in the environment.
    fn with_env<R>(&self, f: impl FnOnce() -> R) -> R {
        let _guard = ENV_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        for (k, v) in &self.env {
            std::env::set_var(k, v);
        }
        let result = f();
        for (k, _) in &self.env {
            std::env::remove_var(k);
        }
        result
    }

    /// v5–v7 `init` through `ncclProfiler_v7`; returns the context and the mask NCCL
    /// would now use.
    pub fn init_v7(
        &self,
        comm_hash: u64,
        name: Option<&CStr>,
        rank: i32,
        nranks: i32,
    ) -> (Ctx, i32) {
        let mut ctx = null_mut();
        let mut mask: c_int = 0;
        let name = name.map_or(std::ptr::null(), CStr::as_ptr);
        // SAFETY: writable local slots; the name is NULL or a C string that outlives the call.
        let rc = self.with_env(|| unsafe {
            (self.v7().init)(&mut ctx, comm_hash, &mut mask, name, 1, nranks, rank, None)
        });
        assert_eq!(rc, 0, "init must return ncclSuccess");
        (Ctx(ctx), mask)
    }

    /// v4 `init`: the comm name comes before the hash.
    pub fn init_v4(
        &self,
        comm_hash: u64,
        name: Option<&CStr>,
        rank: i32,
        nranks: i32,
    ) -> (Ctx, i32) {
        let mut ctx = null_mut();
        let mut mask: c_int = 0;
        let name = name.map_or(std::ptr::null(), CStr::as_ptr);
        // SAFETY: writable local slots; the name is NULL or a C string that outlives the call.
        let rc = self.with_env(|| unsafe {
            (self.v4().init)(&mut ctx, &mut mask, name, comm_hash, 1, nranks, rank, None)
        });
        assert_eq!(rc, 0);
        (Ctx(ctx), mask)
    }

    /// v1–v3 `init`: no comm information.
    pub fn init_v1(&self) -> (Ctx, i32) {
        let mut ctx = null_mut();
        let mut mask: c_int = 0;
        // SAFETY: writable local slots.
        let rc = self.with_env(|| unsafe { (self.v1().init)(&mut ctx, &mut mask) });
        assert_eq!(rc, 0);
        (Ctx(ctx), mask)
    }

    /// `startEvent` of v7 with `descr`; returns the handle written.
    pub fn start7(&self, ctx: Ctx, descr: &mut v7::ncclProfilerEventDescr_v7_t) -> Handle {
        let mut handle = 0xdead_usize as *mut c_void;
        // SAFETY: valid pointers to a local handle slot and descriptor.
        let rc = unsafe { (self.v7().startEvent)(ctx.0, &mut handle, descr) };
        assert_eq!(rc, 0);
        assert_ne!(
            handle as usize, 0xdead,
            "startEvent must always write *eHandle"
        );
        Handle(handle)
    }

    pub fn stop7(&self, handle: Handle) {
        // SAFETY: any value is allowed.
        // SAFETY: NULL out pointers on purpose: the plugin must cope.
        let rc = unsafe { (self.v7().stopEvent)(handle.0) };
        assert_eq!(rc, 0);
    }

    /// `recordEventState` of v7; `args` None passes NULL (as for states 23/24).
    pub fn record7(&self, handle: Handle, state: i32, args: Option<StateArgsV4>) {
        let mut args = args;
        let ptr = args.as_mut().map_or(null_mut(), |a| a as *mut StateArgsV4);
        // SAFETY: NULL or a valid args struct.
        let rc = unsafe { (self.v7().recordEventState)(handle.0, state, ptr) };
        assert_eq!(rc, 0);
    }

    pub fn finalize7(&self, ctx: Ctx) {
        // SAFETY: any value is allowed.
        // SAFETY: NULL out pointers on purpose: the plugin must cope.
        let rc = unsafe { (self.v7().finalize)(ctx.0) };
        assert_eq!(rc, 0);
    }

    /// Every line of every event log this plugin wrote.
    pub fn log_lines(&self) -> Vec<Value> {
        read_logs(&self.out_dir())
    }

    /// Lines of type "event".
    pub fn events(&self) -> Vec<Value> {
        self.log_lines()
            .into_iter()
            .filter(|l| l["type"] == "event")
            .collect()
    }

    /// The counters of the last summary line.
    pub fn counters(&self) -> Value {
        self.log_lines()
            .into_iter()
            .rfind(|l| l["type"] == "summary")
            .expect("a summary line (written at the last finalize)")["counters"]
            .clone()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

pub fn read_logs(dir: &Path) -> Vec<Value> {
    let mut lines = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return lines;
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("read log");
        for (n, line) in text.lines().enumerate() {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}:{}: not JSON ({e}): {line}", path.display(), n + 1));
            lines.push(value);
        }
    }
    lines
}

// ---- descriptor builders (v7, zero-initialised like NCCL's own) ----

pub fn zeroed7(type_: u64, parent: Handle, rank: i32) -> v7::ncclProfilerEventDescr_v7_t {
    // SAFETY: every field of the descriptor is valid when zeroed (integers, pointers,
    // bools).
    let mut d: v7::ncclProfilerEventDescr_v7_t = unsafe { std::mem::zeroed() };
    d.type_ = type_;
    d.parentObj = parent.0;
    d.rank = rank;
    d
}

pub fn group_api7(depth: i32) -> v7::ncclProfilerEventDescr_v7_t {
    let mut d = zeroed7(abi::event_type::GROUP_API, Handle(null_mut()), 0);
    d.u.groupApi = v5::GroupApiV5 {
        graphCaptured: CBool::FALSE,
        groupDepth: depth,
    };
    d
}

pub fn coll_api7(
    parent: Handle,
    func: &'static CStr,
    count: usize,
    dtype: &'static CStr,
) -> v7::ncclProfilerEventDescr_v7_t {
    let mut d = zeroed7(abi::event_type::COLL_API, parent, 0);
    d.u.collApi = v7::CollApiV7 {
        func: func.as_ptr(),
        count,
        datatype: dtype.as_ptr(),
        root: 0,
        stream: null_mut(),
        graphCaptured: CBool::FALSE,
        userTag: 0,
    };
    d
}

pub fn p2p_api7(
    parent: Handle,
    func: &'static CStr,
    count: usize,
    dtype: &'static CStr,
) -> v7::ncclProfilerEventDescr_v7_t {
    let mut d = zeroed7(abi::event_type::P2P_API, parent, 0);
    d.u.p2pApi = v7::P2pApiV7 {
        func: func.as_ptr(),
        count,
        datatype: dtype.as_ptr(),
        stream: null_mut(),
        graphCaptured: CBool::FALSE,
        userTag: 0,
    };
    d
}

pub fn plain7(type_: u64, parent: Handle) -> v7::ncclProfilerEventDescr_v7_t {
    zeroed7(type_, parent, 0)
}

#[allow(clippy::too_many_arguments)]
pub fn coll7(
    parent: Handle,
    group: Handle,
    rank: i32,
    seq: u64,
    func: &'static CStr,
    count: usize,
    dtype: &'static CStr,
    n_channels: u8,
) -> v7::ncclProfilerEventDescr_v7_t {
    let mut d = zeroed7(abi::event_type::COLL, parent, rank);
    d.u.coll = v7::CollV7 {
        seqNumber: seq,
        func: func.as_ptr(),
        sendBuff: std::ptr::null(),
        recvBuff: null_mut(),
        count,
        root: 0,
        datatype: dtype.as_ptr(),
        nChannels: n_channels,
        nWarps: 16,
        algo: c"RING".as_ptr(),
        proto: c"SIMPLE".as_ptr(),
        parentGroup: group.0,
        kernelVariant: std::ptr::null(),
        isSymColl: CBool::FALSE,
        userTag: 0,
    };
    d
}

pub fn p2p7(
    parent: Handle,
    group: Handle,
    rank: i32,
    func: &'static CStr,
    count: usize,
    peer: i32,
) -> v7::ncclProfilerEventDescr_v7_t {
    let mut d = zeroed7(abi::event_type::P2P, parent, rank);
    d.u.p2p = v7::P2pV7 {
        func: func.as_ptr(),
        buff: null_mut(),
        datatype: c"ncclFloat32".as_ptr(),
        count,
        peer,
        nChannels: 2,
        parentGroup: group.0,
        userTag: 0,
    };
    d
}

pub fn proxy_op7(
    parent: Handle,
    rank: i32,
    pid: i32,
    channel: u8,
    peer: i32,
    is_send: bool,
) -> v7::ncclProfilerEventDescr_v7_t {
    let mut d = zeroed7(abi::event_type::PROXY_OP, parent, rank);
    d.u.proxyOp = abi::ProxyOpDescr {
        pid,
        channelId: channel,
        peer,
        nSteps: 4,
        chunkSize: 1 << 17,
        isSend: i32::from(is_send),
    };
    d
}

pub fn proxy_step7(parent: Handle, rank: i32, step: i32) -> v7::ncclProfilerEventDescr_v7_t {
    let mut d = zeroed7(abi::event_type::PROXY_STEP, parent, rank);
    d.u.proxyStep = abi::ProxyStepDescr { step };
    d
}

pub fn kernel_ch7(parent: Handle, channel: u8, ptimer: u64) -> v7::ncclProfilerEventDescr_v7_t {
    let mut d = zeroed7(abi::event_type::KERNEL_CH, parent, 0);
    d.u.kernelCh = abi::KernelChDescrV4 {
        channelId: channel,
        pTimer: ptimer,
    };
    d
}

pub fn trans_size(bytes: usize) -> StateArgsV4 {
    StateArgsV4 { transSize: bytes }
}

pub fn ptimer(t: u64) -> StateArgsV4 {
    StateArgsV4 { kernelChPTimer: t }
}

pub fn appended(n: i32) -> StateArgsV4 {
    StateArgsV4 {
        appendedProxyOps: n,
    }
}

pub fn v1_args() -> StateArgsV1 {
    StateArgsV1 {
        proxyOp: abi::StateArgsV1ProxyOp {
            transSize: 0,
            steps: 0,
        },
    }
}

/// This process's pid, as NCCL puts it in `proxyOp.pid`.
pub fn pid() -> i32 {
    std::process::id() as i32
}

/// The address of a page no one may touch: any dereference of it crashes the test.
pub fn poisoned_pointer() -> *mut c_void {
    // SAFETY: an anonymous PROT_NONE mapping; never unmapped, never accessed.
    let page = unsafe {
        libc::mmap(
            null_mut(),
            4096,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(page, libc::MAP_FAILED);
    page.cast::<u8>().wrapping_add(64).cast()
}

/// Events of `kind`.
pub fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// The event whose id is `handle`.
pub fn by_id(events: &[Value], handle: Handle) -> Value {
    let id = format!("{:#x}", handle.value());
    events
        .iter()
        .find(|e| e["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no event with id {id}"))
}

// ---- every version's table, driven generically (used by versions.rs) ----

use nccl_profiler_abi::{v2, v3, InitV1, InitV5, ProfilerTable};

impl Handle {
    pub const NULL: Handle = Handle(null_mut());
}

impl Plugin {
    pub fn v2(&self) -> &v2::ncclProfiler_v2_t {
        self.table("ncclProfiler_v2")
    }
    pub fn v3(&self) -> &v3::ncclProfiler_v3_t {
        self.table("ncclProfiler_v3")
    }

    /// v1–v3 `init(ctx, mask)` through `table` (one of this plugin's v1–v3 tables).
    pub fn init_2arg<D, A>(&self, table: &ProfilerTable<InitV1, D, A>) -> (Ctx, i32) {
        let mut ctx = null_mut();
        let mut mask: c_int = 0;
        // SAFETY: valid pointers to a local context slot and mask.
        let rc = self.with_env(|| unsafe { (table.init)(&mut ctx, &mut mask) });
        assert_eq!(rc, 0);
        (Ctx(ctx), mask)
    }

    /// v4 `init` with every argument chosen by the caller (commName before commHash).
    pub fn init_v4_args(
        &self,
        name: Option<&CStr>,
        comm_hash: u64,
        n_nodes: i32,
        nranks: i32,
        rank: i32,
    ) -> (Ctx, i32) {
        let mut ctx = null_mut();
        let mut mask: c_int = 0;
        let name = name.map_or(std::ptr::null(), CStr::as_ptr);
        // SAFETY: valid pointers; the name is NULL or a C string.
        let rc = self.with_env(|| unsafe {
            (self.v4().init)(
                &mut ctx, &mut mask, name, comm_hash, n_nodes, nranks, rank, None,
            )
        });
        assert_eq!(rc, 0);
        (Ctx(ctx), mask)
    }

    /// v5–v7 `init(ctx, commId, mask, commName, nNodes, nranks, rank, logfn)` through
    /// `table` (one of this plugin's v5–v7 tables).
    pub fn init_5arg<D, A>(
        &self,
        table: &ProfilerTable<InitV5, D, A>,
        comm_id: u64,
        name: Option<&CStr>,
        n_nodes: i32,
        nranks: i32,
        rank: i32,
    ) -> (Ctx, i32) {
        let mut ctx = null_mut();
        let mut mask: c_int = 0;
        let name = name.map_or(std::ptr::null(), CStr::as_ptr);
        // SAFETY: valid pointers; the name is NULL or a C string.
        let rc = self.with_env(|| unsafe {
            (table.init)(
                &mut ctx, comm_id, &mut mask, name, n_nodes, nranks, rank, None,
            )
        });
        assert_eq!(rc, 0);
        (Ctx(ctx), mask)
    }
}

/// `startEvent` of any version's table; returns the handle written (NULL allowed).
pub fn start_in<I, D, A>(table: &ProfilerTable<I, D, A>, ctx: Ctx, descr: &mut D) -> Handle {
    let mut handle = 0xdead_usize as *mut c_void;
    // SAFETY: valid pointers to a local handle slot and a descriptor of the table's type.
    let rc = unsafe { (table.startEvent)(ctx.0, &mut handle, descr) };
    assert_eq!(rc, 0);
    assert_ne!(
        handle as usize, 0xdead,
        "startEvent must always write *eHandle"
    );
    Handle(handle)
}

pub fn stop_in<I, D, A>(table: &ProfilerTable<I, D, A>, handle: Handle) {
    // SAFETY: any value is allowed.
    // SAFETY: NULL out pointers on purpose: the plugin must cope.
    let rc = unsafe { (table.stopEvent)(handle.0) };
    assert_eq!(rc, 0);
}

/// `recordEventState` of any version's table; `args` None passes NULL.
pub fn record_in<I, D, A>(
    table: &ProfilerTable<I, D, A>,
    handle: Handle,
    state: i32,
    args: Option<A>,
) {
    let mut args = args;
    let ptr = args.as_mut().map_or(null_mut(), |a| a as *mut A);
    // SAFETY: NULL or a valid args struct of the table's type.
    // SAFETY: NULL out pointers on purpose: the plugin must cope.
    let rc = unsafe { (table.recordEventState)(handle.0, state, ptr) };
    assert_eq!(rc, 0);
}

pub fn finalize_in<I, D, A>(table: &ProfilerTable<I, D, A>, ctx: Ctx) {
    // SAFETY: any value is allowed.
    // SAFETY: NULL out pointers on purpose: the plugin must cope.
    let rc = unsafe { (table.finalize)(ctx.0) };
    assert_eq!(rc, 0);
}

/// A zero-initialised descriptor of any version (what the v1–v3 and v6 shims and NCCL's
/// direct version pass).
pub fn zeroed<D: abi::Descriptor>() -> D {
    // SAFETY: every descriptor type holds only integers, raw pointers, bools and unions of
    // them: all-zero bytes are a valid value.
    unsafe { std::mem::zeroed() }
}

/// A descriptor of any version with every byte 0xAB, as the v4 and v5 shims leave the
/// members and padding they do not write (stack garbage). Any read of a pointer member
/// of another kind dereferences 0xABAB… (non-canonical) and crashes the test.
pub fn garbage<D: abi::Descriptor>() -> D {
    let mut d = std::mem::MaybeUninit::<D>::uninit();
    // SAFETY: the top level of every descriptor is an integer type, a raw pointer, an int
    // and a union: any byte pattern is a valid value of each.
    unsafe {
        std::ptr::write_bytes(d.as_mut_ptr(), 0xAB, 1);
        d.assume_init()
    }
}

/// v4+ state arguments full of garbage, as NCCL passes them for states 19, 23 and 24
/// through the v5 shim (non-NULL, uninitialised).
pub fn garbage_args() -> StateArgsV4 {
    StateArgsV4 {
        transSize: 0xABAB_ABAB_ABAB_ABAB,
    }
}

/// v1–v3 state arguments with both ProxyOp members set.
pub fn v1_progress(trans_size: usize, steps: i32) -> StateArgsV1 {
    StateArgsV1 {
        proxyOp: abi::StateArgsV1ProxyOp {
            transSize: trans_size,
            steps,
        },
    }
}

pub fn v1_appended(n: i32) -> StateArgsV1 {
    StateArgsV1 {
        proxyCtrl: abi::StateArgsProxyCtrl {
            appendedProxyOps: n,
        },
    }
}

pub fn net_data(data: *mut c_void) -> StateArgsV4 {
    StateArgsV4 {
        netPluginData: data,
    }
}

// ---- raw calls, log queries and counter checks (hostile and lifecycle tests) ----

impl Plugin {
    /// Runs `f` with this plugin's settings in the environment (and the lock that keeps
    /// other tests from changing it meanwhile): for inits made on other threads.
    pub fn with_settings<R>(&self, f: impl FnOnce() -> R) -> R {
        self.with_env(f)
    }

    /// v7 `init` with the pointers as given (NULL allowed), without touching the
    /// environment: the caller holds [`Plugin::with_settings`] or the runtime exists.
    ///
    /// # Safety
    /// `ctx` and `mask` are NULL or writable.
    pub unsafe fn init_v7_raw(
        &self,
        ctx: *mut *mut c_void,
        comm_hash: u64,
        mask: *mut c_int,
        name: Option<&CStr>,
        rank: i32,
        nranks: i32,
    ) -> i32 {
        let name = name.map_or(std::ptr::null(), CStr::as_ptr);
        // SAFETY: forwarded from the caller.
        unsafe { (self.v7().init)(ctx, comm_hash, mask, name, 1, nranks, rank, None) }
    }

    /// v7 `startEvent` with a raw descriptor pointer (NULL allowed); the handle slot
    /// starts as 0xdead and must have been written.
    pub fn start7_raw(&self, ctx: Ctx, descr: *mut v7::ncclProfilerEventDescr_v7_t) -> Handle {
        let mut handle = 0xdead_usize as *mut c_void;
        // SAFETY: a local handle slot; the descriptor is NULL or valid (caller).
        let rc = unsafe { (self.v7().startEvent)(ctx.0, &mut handle, descr) };
        assert_eq!(rc, 0);
        assert_ne!(
            handle as usize, 0xdead,
            "startEvent must always write *eHandle"
        );
        Handle(handle)
    }

    /// v7 `recordEventState` with a raw args pointer (which the plugin may not read).
    pub fn record7_raw(&self, handle: Handle, state: i32, args: *mut StateArgsV4) {
        // SAFETY: the plugin must cope with any handle; `args` is whatever the test wants
        // to prove is not read.
        let rc = unsafe { (self.v7().recordEventState)(handle.0, state, args) };
        assert_eq!(rc, 0);
    }

    /// Lines of `type` (`"comm"`, `"gap"`, `"summary"`, …).
    pub fn lines_of(&self, type_: &str) -> Vec<Value> {
        self.log_lines()
            .into_iter()
            .filter(|l| l["type"] == type_)
            .collect()
    }

    /// The counters of every summary line, oldest first.
    pub fn summaries(&self) -> Vec<Value> {
        self.lines_of("summary")
            .into_iter()
            .map(|l| l["counters"].clone())
            .collect()
    }
}

/// Checks a summary's counters exactly: every counter named in `expected` has that
/// value, every other one is 0.
pub fn assert_counters(counters: &Value, expected: &[(&str, u64)]) {
    let all = counters.as_object().expect("counters object");
    for (name, _) in expected {
        assert!(all.contains_key(*name), "no counter {name:?}: {counters}");
    }
    for (name, value) in all {
        let want = expected
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, v)| *v);
        assert_eq!(value.as_u64(), Some(want), "counter {name}: {counters}");
    }
}

/// The counters `held_back`, `held_back_ns` and `held_back_longest_ns` as the event log's
/// `held_back` lines add them up, after checking each line: on `tid`'s thread, its start
/// not after its stop.
pub fn held_back_counters(plugin: &Plugin, tid: i64) -> [(&'static str, u64); 3] {
    let lines = plugin.lines_of("held_back");
    let mut waited = Vec::new();
    for line in &lines {
        assert_eq!(line["thread"], tid, "{line}");
        let (start, stop) = (
            line["start_ns"].as_u64().expect("start_ns"),
            line["stop_ns"].as_u64().expect("stop_ns"),
        );
        assert!(start <= stop, "{line}");
        waited.push(stop - start);
    }
    [
        ("held_back", lines.len() as u64),
        ("held_back_ns", waited.iter().sum()),
        (
            "held_back_longest_ns",
            waited.iter().copied().max().unwrap_or(0),
        ),
    ]
}

/// The state names recorded on an event (empty when it has none).
pub fn state_names(event: &Value) -> Vec<String> {
    event["states"].as_array().map_or(Vec::new(), |states| {
        states
            .iter()
            .map(|s| s["state"].as_str().expect("state name").to_owned())
            .collect()
    })
}

/// The id an event line carries for `handle`.
pub fn id_of(handle: Handle) -> String {
    format!("{:#x}", handle.value())
}

/// The calling thread's OS id, as the log's `start_thread`/`stop_thread`.
pub fn gettid() -> i64 {
    // SAFETY: no preconditions.
    i64::from(unsafe { libc::gettid() })
}
