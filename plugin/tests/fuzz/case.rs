//! One fuzz case, run in a child process: several threads call a loaded copy of the
//! plugin with random and hostile sequences over all seven API versions, then the case
//! checks the plugin's event log and counters against what was called.

use super::values::*;
use crate::support::*;
use nccl_profiler_abi::{InitV1, InitV5, ProfilerTable};
use nccl_profiler_scorep::event::Kind;
use nccl_profiler_scorep::kinds::kinds_of_version;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::ffi::{c_int, c_void};
use std::path::Path;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// Live handles one thread keeps before it stops one.
const MAX_LIVE: usize = 256;
/// Stopped handles kept for double and stale stops.
const MAX_DEAD: usize = 4096;
/// A context value's magic byte (bits 56..64); a forged context never has it.
const CONTEXT_MAGIC: u64 = 0xC7;
/// A handle's magic nibble (bits 60..64); a forged handle never has it.
const HANDLE_MAGIC: u64 = 0x5;
const SLOT_MASK: u64 = (1 << 20) - 1;
const GEN_MASK: u64 = (1 << 27) - 1;

/// The settings and shape of one case, drawn first from its seed.
#[derive(Clone, Debug)]
pub struct CaseConfig {
    pub threads: usize,
    pub on_full: &'static str,
    pub buffer_size: Option<&'static str>,
    pub events_all: bool,
    pub max_open_events: Option<&'static str>,
    /// The last context may be finalized while other threads call, and inits follow
    /// (several init/finalize cycles). Counters of calls made around a cycle's end may
    /// land in either cycle or in none, so the refusal counts are then upper bounds only.
    pub cycles: bool,
    /// The share of descriptors filled with random bytes (the rest are zeroed). Random
    /// channels, peers and ranks each make new trace locations, which makes a case slow.
    pub garbage: f64,
    /// Hand out strings without a NUL at the end of mapped memory (a known defect: off
    /// unless FUZZ_UNTERMINATED=0).
    pub unterminated: bool,
    /// Proxy steps summed up on their operations (`NCCL_SCOREP_STEP_DETAIL=summary`).
    pub step_summary: bool,
    /// Every call also recorded (`NCCL_SCOREP_MODE=otf2,record`), whose ring of calls
    /// follows `on_full` too.
    pub record: bool,
}

impl CaseConfig {
    pub fn draw(rng: &mut FuzzRng, unterminated: bool) -> CaseConfig {
        CaseConfig {
            threads: rng.random_range(1..=4),
            on_full: if rng.random_bool(0.5) { "drop" } else { "wait" },
            buffer_size: [None, Some("4K"), Some("64K")][rng.random_range(0..3)],
            events_all: rng.random_bool(0.5),
            max_open_events: [None, Some("1024"), Some("4096")][rng.random_range(0..3)],
            cycles: rng.random_bool(0.3),
            garbage: [0.02, 0.1, 0.5][rng.random_range(0..3)],
            unterminated,
            step_summary: rng.random_bool(0.3),
            record: rng.random_bool(0.2),
        }
    }

    fn env(&self, out: &Path) -> Vec<(&'static str, String)> {
        let mut env = vec![
            (
                "NCCL_SCOREP_MODE",
                if self.record { "otf2,record" } else { "otf2" }.to_owned(),
            ),
            ("NCCL_SCOREP_JSONL", "1".to_owned()),
            ("NCCL_SCOREP_AUTO_MERGE", "0".to_owned()),
            ("NCCL_SCOREP_OUTPUT_DIR", out.display().to_string()),
            ("NCCL_SCOREP_ON_FULL", self.on_full.to_owned()),
        ];
        if let Some(size) = self.buffer_size {
            env.push(("NCCL_SCOREP_BUFFER_SIZE", size.to_owned()));
        }
        if self.events_all {
            env.push(("NCCL_SCOREP_EVENTS", "all".to_owned()));
        }
        if let Some(n) = self.max_open_events {
            env.push(("NCCL_SCOREP_MAX_OPEN_EVENTS", n.to_owned()));
        }
        if self.step_summary {
            env.push(("NCCL_SCOREP_STEP_DETAIL", "summary".to_owned()));
        }
        env
    }
}

/// What the threads did that the plugin must have counted.
#[derive(Default)]
struct Tally {
    bad_stops: AtomicU64,
    bad_records: AtomicU64,
    unknown_states: AtomicU64,
    bad_finalizes: AtomicU64,
    null_descriptors: AtomicU64,
    null_handle_outs: AtomicU64,
    unknown_types: AtomicU64,
    null_slot_inits: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Relaxed);
}

/// What was done with one issued handle while the fuzzer thought it live.
#[derive(Clone, Copy, Default)]
struct Use {
    stops: u64,
    records: u64,
    unknown_states: u64,
}

#[derive(Clone, Copy)]
struct Live {
    handle: u64,
    kind: Kind,
}

/// Record mode wrote every call into the plugin (the last finalize wrote what the rings
/// held): with `wait` nothing is missing, with `drop` what is missing is counted as dropped.
fn check_recording(config: &CaseConfig, out: &Path, calls: u64) {
    let dir = out.join(nccl_scorep_common::recording::DIR);
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("no recordings in {}: {e}", dir.display()))
        .flatten()
        .map(|entry| entry.path())
        .collect();
    assert_eq!(files.len(), 1, "one recording per process: {files:?}");
    let recording = nccl_scorep_common::recording::Recording::read_file(&files[0])
        .unwrap_or_else(|e| panic!("{}: {e}", files[0].display()));
    let (recorded, dropped) = (recording.calls().count() as u64, recording.drops());
    if config.on_full == "wait" {
        assert_eq!(
            (recorded, dropped),
            (calls, 0),
            "calls recorded and dropped"
        );
    } else {
        assert_eq!(
            recorded + dropped,
            calls,
            "calls recorded ({recorded}) and dropped"
        );
    }
}

/// Another plugin instance (as another process would have): its values are foreign here.
struct Foreign {
    ctx: u64,
    handles: Vec<u64>,
}

struct Case<'a> {
    config: &'a CaseConfig,
    plugin: &'a Plugin,
    strings: &'a Strings,
    budget: u64,
    calls: AtomicU64,
    handoff: Mutex<Vec<Live>>,
    dead: Mutex<Vec<u64>>,
    contexts: Mutex<Vec<u64>>,
    foreign: Foreign,
    issued: Mutex<Vec<u64>>,
    uses: Mutex<HashMap<u64, Use>>,
    tally: Tally,
}

/// What a case reports to the driver.
pub struct Report {
    pub callbacks: u64,
    pub issued: usize,
    pub cycles: usize,
    pub peak_rss_kib: u64,
}

impl Report {
    pub fn to_json(&self) -> Value {
        json!({
            "callbacks": self.callbacks,
            "issued": self.issued,
            "cycles": self.cycles,
            "peak_rss_kib": self.peak_rss_kib,
        })
    }
}

/// Runs one case with `seed` and about `callbacks` calls into the plugin, writing its
/// output to `out`; panics when an invariant does not hold.
pub fn run_case(seed: u64, callbacks: u64, out: &Path, unterminated: bool) -> Report {
    let mut rng = FuzzRng::seed_from_u64(seed);
    let config = CaseConfig::draw(&mut rng, unterminated);
    println!("fuzz case {seed:#x}: {callbacks} callbacks, {config:?}");
    let env = config.env(out);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let plugin = Plugin::load(&env);
    let (anchor, _) = plugin.init_v7(seed, Some(c"fuzz"), 0, 2);
    assert_ne!(anchor.0, null_mut());
    let (other, foreign) = foreign_instance(anchor);
    let strings = Strings::new();
    let case = Case {
        config: &config,
        plugin: &plugin,
        strings: &strings,
        budget: callbacks,
        calls: AtomicU64::new(1), // the anchor's init
        handoff: Mutex::new(Vec::new()),
        dead: Mutex::new(Vec::new()),
        contexts: Mutex::new(vec![anchor.0 as u64]),
        foreign,
        issued: Mutex::new(Vec::new()),
        uses: Mutex::new(HashMap::new()),
        tally: Tally::default(),
    };
    let started = std::time::Instant::now();
    let anchor_value = anchor.0 as u64;
    std::thread::scope(|scope| {
        for thread in 0..config.threads {
            let case = &case;
            let thread_seed = seed ^ (thread as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            scope.spawn(move || {
                let mut worker = Worker::new(case, thread_seed);
                if thread == 0 && config.cycles {
                    worker.contexts.push(anchor_value);
                }
                worker.run();
            });
        }
    });
    let calls_s = started.elapsed().as_secs_f64();
    if !config.cycles {
        plugin.finalize7(anchor);
    }
    // Init after the last finalize: a new cycle, whose collector also drains what was
    // pushed between cycles.
    let (ctx, _) = plugin.init_v7(seed ^ 1, Some(c"after"), 0, 1);
    let last = plugin.start7(ctx, &mut group_api7(1));
    assert!(!last.is_null(), "an event after a new init");
    plugin.stop7(last);
    plugin.finalize7(ctx);
    case.issued.lock().unwrap().push(last.value());
    other.finalize7(Ctx(case.foreign.ctx as *mut c_void));
    // The anchor's finalize, and the last cycle's init, start, stop and finalize.
    case.calls.fetch_add(4 + u64::from(!config.cycles), Relaxed);

    let finalize_s = started.elapsed().as_secs_f64() - calls_s;
    let report = check(&case, &plugin);
    if config.record {
        check_recording(&config, out, case.calls.load(Relaxed));
    }
    println!(
        "fuzz case {seed:#x}: {} callbacks, {} events, {} cycles, peak RSS {} MiB; \
         calls {calls_s:.2} s, last finalize {finalize_s:.2} s, checks {:.2} s",
        report.callbacks,
        report.issued,
        report.cycles,
        report.peak_rss_kib / 1024,
        started.elapsed().as_secs_f64() - calls_s - finalize_s
    );
    report
}

/// A second plugin instance whose salt differs from ours, with a live, a stopped and a
/// never-stopped handle.
fn foreign_instance(ours: Ctx) -> (Plugin, Foreign) {
    let salt = |ctx: Ctx| (ctx.0 as u64 >> 32) & 0xFF_FFFF;
    for _ in 0..16 {
        let other = Plugin::load(&[("NCCL_SCOREP_MODE", "jsonl")]);
        let (ctx, _) = other.init_v7(0xF0E1, Some(c"other"), 1, 2);
        if salt(ctx) == salt(ours) {
            other.finalize7(ctx);
            continue;
        }
        let handles: Vec<u64> = (0..3)
            .map(|_| other.start7(ctx, &mut group_api7(1)).value())
            .collect();
        other.stop7(Handle(handles[0] as *mut c_void));
        return (
            other,
            Foreign {
                ctx: ctx.0 as u64,
                handles,
            },
        );
    }
    panic!("16 plugin instances with the same salt");
}

struct Worker<'c, 'a> {
    case: &'c Case<'a>,
    rng: FuzzRng,
    live: Vec<Live>,
    contexts: Vec<u64>,
    finalized: Vec<u64>,
    uses: HashMap<u64, Use>,
    issued: Vec<u64>,
    net_payload: Box<[u64; 8]>,
}

/// Calls `$method` with the table of API version `$version`.
macro_rules! on_table {
    ($self:ident, $version:expr, $method:ident) => {{
        let plugin = $self.case.plugin;
        match $version {
            1 => $self.$method(plugin.v1()),
            2 => $self.$method(plugin.v2()),
            3 => $self.$method(plugin.v3()),
            4 => $self.$method(plugin.v4()),
            5 => $self.$method(plugin.v5()),
            6 => $self.$method(plugin.v6()),
            _ => $self.$method(plugin.v7()),
        }
    }};
}

/// Which handle a stop or record gets.
enum Target {
    /// One of this thread's live handles (index into `live`).
    Live(usize),
    /// A value that is not live: the plugin must refuse it.
    Bad(u64),
}

impl<'c, 'a> Worker<'c, 'a> {
    fn new(case: &'c Case<'a>, seed: u64) -> Self {
        let mut rng = FuzzRng::seed_from_u64(seed);
        let net_payload = Box::new(std::array::from_fn(|_| rng.random()));
        Worker {
            case,
            rng,
            live: Vec::new(),
            contexts: Vec::new(),
            finalized: Vec::new(),
            uses: HashMap::new(),
            issued: Vec::new(),
            net_payload,
        }
    }

    /// Counts a callback about to be made; false (and not counted) once the case's
    /// budget is spent.
    fn call(&self) -> bool {
        if self.case.calls.fetch_add(1, Relaxed) < self.case.budget {
            return true;
        }
        self.case.calls.fetch_sub(1, Relaxed);
        false
    }

    /// Counts a callback that is made whatever the budget (it completes what another
    /// began: a stop for the live-handle limit, the finalizes at a thread's end).
    fn force_call(&self) {
        self.case.calls.fetch_add(1, Relaxed);
    }

    fn run(&mut self) {
        while self.case.calls.load(Relaxed) < self.case.budget {
            let version = self.rng.random_range(1..=7u8);
            match self.rng.random_range(0..1000) {
                0..400 => on_table!(self, version, start),
                400..630 => on_table!(self, version, stop),
                630..900 => on_table!(self, version, record),
                900..940 => self.hand_over(),
                940..970 => self.init(version),
                _ => self.finalize(),
            }
        }
        // The end of this thread: its communicators are finalized while other threads
        // may still be calling; some of its events stay open.
        while let Some(ctx) = self.contexts.pop() {
            self.finalize_good(ctx);
        }
        self.case.issued.lock().unwrap().append(&mut self.issued);
        let mut uses = self.case.uses.lock().unwrap();
        for (handle, u) in self.uses.drain() {
            let total = uses.entry(handle).or_default();
            total.stops += u.stops;
            total.records += u.records;
            total.unknown_states += u.unknown_states;
        }
    }

    /// A random index into a collection of `len` items.
    fn index(&mut self, len: usize) -> Option<usize> {
        (len > 0).then(|| self.rng.random_range(0..len))
    }

    fn own_context(&mut self) -> Option<u64> {
        self.index(self.contexts.len()).map(|i| self.contexts[i])
    }

    fn finalized_context(&mut self) -> Option<u64> {
        self.index(self.finalized.len()).map(|i| self.finalized[i])
    }

    fn live_handle(&mut self) -> Option<u64> {
        self.index(self.live.len()).map(|i| self.live[i].handle)
    }

    fn foreign_handle(&mut self) -> u64 {
        let handles = &self.case.foreign.handles;
        handles[self.rng.random_range(0..handles.len())]
    }

    fn any_context(&mut self) -> u64 {
        let contexts = self.case.contexts.lock().unwrap();
        if contexts.is_empty() {
            return 0;
        }
        contexts[self.rng.random_range(0..contexts.len())]
    }

    fn forged_context(&mut self) -> u64 {
        let mut top = self.rng.random_range(0..=0xFFu64);
        if top == CONTEXT_MAGIC {
            top = 0;
        }
        self.rng.random::<u64>() & ((1 << 56) - 1) | top << 56
    }

    fn pick_context(&mut self) -> u64 {
        match self.rng.random_range(0..100) {
            0..70 => match self.own_context() {
                Some(ctx) => ctx,
                None => self.any_context(),
            },
            70..80 => self.any_context(),
            80..85 => 0,
            85..90 => self.case.foreign.ctx,
            90..95 => self.forged_context(),
            _ => match self.finalized_context() {
                Some(ctx) => ctx,
                None => self.any_context(),
            },
        }
    }

    fn dead(&mut self) -> Option<u64> {
        let dead = self.case.dead.lock().unwrap();
        (!dead.is_empty()).then(|| dead[self.rng.random_range(0..dead.len())])
    }

    /// A value that can never be a live handle of ours.
    fn forged_handle(&mut self) -> u64 {
        let real = self.live_handle().or_else(|| self.dead());
        match (self.rng.random_range(0..3), real) {
            // An even (free) generation of a real slot.
            (0, Some(h)) => {
                let generation = ((h >> 20) + 1) & GEN_MASK;
                h & !(GEN_MASK << 20) | generation << 20
            }
            // A slot past any slab.
            (1, Some(h)) => h | SLOT_MASK,
            // Garbage without our magic.
            _ => {
                let mut top = self.rng.random_range(0..16u64);
                if top == HANDLE_MAGIC {
                    top = 0;
                }
                self.rng.random::<u64>() & ((1 << 60) - 1) | top << 60
            }
        }
    }

    fn pick_parent(&mut self) -> u64 {
        match self.rng.random_range(0..100) {
            0..20 => 0,
            20..60 => self.live_handle().unwrap_or(0),
            60..70 => self.dead().unwrap_or(0),
            70..78 => {
                let handoff = self.case.handoff.lock().unwrap();
                if handoff.is_empty() {
                    0
                } else {
                    handoff[self.rng.random_range(0..handoff.len())].handle
                }
            }
            78..84 => self.foreign_handle(),
            84..92 => self.forged_handle(),
            _ => self.rng.random(),
        }
    }

    fn pick_target(&mut self) -> Target {
        let roll = self.rng.random_range(0..100);
        if roll < 65 && !self.live.is_empty() {
            return Target::Live(self.rng.random_range(0..self.live.len()));
        }
        Target::Bad(match roll {
            65..75 => self.dead().unwrap_or(0),
            75..82 => 0,
            82..94 => self.forged_handle(),
            _ => self.foreign_handle(),
        })
    }

    /// A type: mostly one bit the version knows, else none, several, or unknown ones.
    fn pick_type(&mut self, version: u8) -> u64 {
        let known = kinds_of_version(version);
        if self.rng.random_range(0..100) < 85 {
            let kinds: Vec<u64> = (0..64)
                .map(|b| 1u64 << b)
                .filter(|b| known & b != 0)
                .collect();
            return kinds[self.rng.random_range(0..kinds.len())];
        }
        match self.rng.random_range(0..7) {
            0 => 0,
            1 => 0x3,
            2 => 1 << 8 | 1 << 9,
            3 => 1 << self.rng.random_range(16..64),
            4 => u64::MAX,
            // A kind of a later version.
            5 => !known & kinds_of_version(7),
            _ => self.rng.random(),
        }
    }

    fn start<I, D: FuzzDescr, A>(&mut self, table: &ProfilerTable<I, D, A>) {
        let ctx = self.pick_context();
        let roll = self.rng.random_range(0..200);
        let (slot_null, descr_null) = (roll == 0, roll == 1);
        let bits = self.pick_type(D::VERSION);
        let kind = Kind::decode_type(D::VERSION, D::stored_type(bits));
        let mut descr: D = body(&mut self.rng, self.case.config.garbage);
        let parent = self.pick_parent();
        let rank = rank(&mut self.rng);
        descr.header(bits, parent, rank);
        let mut pointers = Pointers {
            rng: &mut self.rng,
            strings: self.case.strings,
            unterminated: self.case.config.unterminated,
            net_payload: self.net_payload.as_mut_ptr().cast(),
        };
        if let Some(kind) = kind {
            descr.patch(kind, &mut pointers);
        }
        if self.case.config.record {
            patch_recorded_strings(&mut descr, bits, &mut pointers);
        }
        if !self.call() {
            return;
        }
        let mut handle = 0xdead_usize as *mut c_void;
        let slot: *mut *mut c_void = if slot_null { null_mut() } else { &mut handle };
        let descr_ptr: *mut D = if descr_null { null_mut() } else { &mut descr };
        // SAFETY: the handle slot is NULL or a local; the descriptor is NULL or a local
        // whose members the plugin reads for its type point at readable memory.
        let rc = unsafe { (table.startEvent)(ctx as *mut c_void, slot, descr_ptr) };
        assert_eq!(rc, 0, "startEvent must return ncclSuccess");
        let tally = &self.case.tally;
        if slot_null {
            bump(&tally.null_handle_outs);
            return;
        }
        assert_ne!(handle as usize, 0xdead, "startEvent must write *eHandle");
        let handle = handle as u64;
        if descr_null {
            bump(&tally.null_descriptors);
            assert_eq!(handle, 0, "a NULL descriptor gets a NULL handle");
            return;
        }
        let Some(kind) = kind else {
            bump(&tally.unknown_types);
            assert_eq!(handle, 0, "type {bits:#x} under v{} is unknown", D::VERSION);
            return;
        };
        if handle == 0 {
            return; // refused: its context, a full ring or slab
        }
        assert_eq!(handle >> 60, HANDLE_MAGIC, "handle {handle:#x}");
        assert_eq!(
            (handle >> 55) & 0x1F,
            kind as u64,
            "handle {handle:#x} names kind {kind:?}"
        );
        self.issued.push(handle);
        self.live.push(Live { handle, kind });
        if self.live.len() > MAX_LIVE {
            let index = self.rng.random_range(0..self.live.len());
            self.stop_live(table, index);
        }
    }

    fn stop_live<I, D, A>(&mut self, table: &ProfilerTable<I, D, A>, index: usize) {
        let live = self.live.swap_remove(index);
        self.uses.entry(live.handle).or_default().stops += 1;
        self.force_call();
        stop_in(table, Handle(live.handle as *mut c_void));
        let mut dead = self.case.dead.lock().unwrap();
        if dead.len() < MAX_DEAD {
            dead.push(live.handle);
        } else {
            let index = self.rng.random_range(0..dead.len());
            dead[index] = live.handle;
        }
    }

    fn stop<I, D, A>(&mut self, table: &ProfilerTable<I, D, A>) {
        match self.pick_target() {
            Target::Live(index) => self.stop_live(table, index),
            Target::Bad(value) => {
                if self.call() {
                    bump(&self.case.tally.bad_stops);
                    stop_in(table, Handle(value as *mut c_void));
                }
            }
        }
    }

    fn pick_state(&mut self) -> i32 {
        if self.rng.random_range(0..100) < 85 {
            return self.rng.random_range(0..32);
        }
        [-1, i32::MIN, i32::MAX, 32, 99, self.rng.random()][self.rng.random_range(0..6)]
    }

    fn record<I, D, A: FuzzArgs>(&mut self, table: &ProfilerTable<I, D, A>) {
        if !self.call() {
            return;
        }
        let state = self.pick_state();
        let args = (self.rng.random_range(0..5) != 0).then(|| A::random(&mut self.rng));
        let handle = match self.pick_target() {
            Target::Live(index) => {
                let live = self.live[index];
                let u = self.uses.entry(live.handle).or_default();
                u.records += 1;
                if !live.kind.accepts_state(state) {
                    u.unknown_states += 1;
                    bump(&self.case.tally.unknown_states);
                }
                live.handle
            }
            Target::Bad(value) => {
                bump(&self.case.tally.bad_records);
                value
            }
        };
        record_in(table, Handle(handle as *mut c_void), state, args);
    }

    fn hand_over(&mut self) {
        let mut handoff = self.case.handoff.lock().unwrap();
        if self.rng.random_bool(0.5) && !self.live.is_empty() && handoff.len() < 256 {
            let index = self.rng.random_range(0..self.live.len());
            handoff.push(self.live.swap_remove(index));
        } else if let Some(live) = handoff.pop() {
            self.live.push(live);
        }
    }

    fn init(&mut self, version: u8) {
        let mut ctx: *mut c_void = 0xdead_usize as *mut c_void;
        let mut mask: c_int = -7;
        let slot_null = self.rng.random_range(0..30) == 0;
        let mask_null = self.rng.random_range(0..20) == 0;
        let ctx_ptr: *mut *mut c_void = if slot_null { null_mut() } else { &mut ctx };
        let mask_ptr: *mut c_int = if mask_null { null_mut() } else { &mut mask };
        let name = self
            .case
            .strings
            .pick(&mut self.rng, self.case.config.unterminated);
        let id = comm_id(&mut self.rng);
        let (nodes, nranks, rank) = (
            edge_i32(&mut self.rng),
            rank(&mut self.rng),
            rank(&mut self.rng),
        );
        if !self.call() {
            return;
        }
        let plugin = self.case.plugin;
        let init_v1 = |init: InitV1| {
            // SAFETY: local context and mask slots, or NULL.
            unsafe { init(ctx_ptr, mask_ptr) }
        };
        let init_v5 = |init: InitV5| {
            // SAFETY: local slots or NULL; the name is NULL or readable to its NUL.
            unsafe { init(ctx_ptr, id, mask_ptr, name, nodes, nranks, rank, None) }
        };
        let rc = match version {
            1 => init_v1(plugin.v1().init),
            2 => init_v1(plugin.v2().init),
            3 => init_v1(plugin.v3().init),
            // SAFETY: as for v5–v7, in v4's argument order.
            4 => unsafe {
                (plugin.v4().init)(ctx_ptr, mask_ptr, name, id, nodes, nranks, rank, None)
            },
            5 => init_v5(plugin.v5().init),
            6 => init_v5(plugin.v6().init),
            _ => init_v5(plugin.v7().init),
        };
        assert_eq!(rc, 0, "init must return ncclSuccess");
        if slot_null {
            bump(&self.case.tally.null_slot_inits);
            return;
        }
        assert_ne!(ctx as usize, 0xdead, "init must write *context");
        if ctx.is_null() {
            return; // the context table is full
        }
        if !mask_null {
            assert_ne!(mask, -7, "init must write the mask");
        }
        let ctx = ctx as u64;
        self.contexts.push(ctx);
        self.case.contexts.lock().unwrap().push(ctx);
        if self.contexts.len() > 3 {
            let oldest = self.contexts.remove(0);
            self.finalize_good(oldest);
        }
    }

    fn finalize_good(&mut self, ctx: u64) {
        self.force_call();
        finalize_in(self.case.plugin.v7(), Ctx(ctx as *mut c_void));
        if self.finalized.len() >= 64 {
            self.finalized.remove(0);
        }
        self.finalized.push(ctx);
    }

    fn finalize(&mut self) {
        let roll = self.rng.random_range(0..100);
        // Keep a context while this thread has only one, except now and then in a case
        // of several cycles: each last finalize ends a cycle.
        let may_end = self.contexts.len() > 1
            || (self.case.config.cycles && self.rng.random_range(0..16) == 0);
        if roll < 60 && !self.contexts.is_empty() && may_end {
            let index = self.rng.random_range(0..self.contexts.len());
            let ctx = self.contexts.remove(index);
            self.finalize_good(ctx);
            return;
        }
        let value = match roll {
            0..70 => self.finalized_context().unwrap_or(0),
            70..80 => 0,
            80..90 => self.forged_context(),
            _ => self.case.foreign.ctx,
        };
        if self.call() {
            bump(&self.case.tally.bad_finalizes);
            finalize_in(self.case.plugin.v7(), Ctx(value as *mut c_void));
        }
    }
}

/// The sum of counter `name` over every summary.
fn total(summaries: &[Value], name: &str) -> u64 {
    summaries
        .iter()
        .map(|c| {
            c[name]
                .as_u64()
                .unwrap_or_else(|| panic!("no counter {name}: {c}"))
        })
        .sum()
}

/// The invariants of a finished case.
fn check(case: &Case, plugin: &Plugin) -> Report {
    // The bound is the plugin's: the peak is taken before this check parses the event
    // logs, whose JSON values take more memory than the plugin ever did.
    let peak_rss_kib = peak_rss_kib();
    let lines = plugin.log_lines();
    let summaries: Vec<Value> = lines
        .iter()
        .filter(|l| l["type"] == "summary")
        .map(|l| l["counters"].clone())
        .collect();
    let events: Vec<&Value> = lines.iter().filter(|l| l["type"] == "event").collect();
    assert!(!summaries.is_empty(), "no summary line");
    // The plugin's heap stayed under its limit (NCCL_SCOREP_MEMORY_LIMIT) in every cycle.
    for summary in lines.iter().filter(|l| l["type"] == "summary") {
        let peak = summary["heap_peak_bytes"]
            .as_u64()
            .expect("heap_peak_bytes");
        let limit = summary["memory_limit_bytes"]
            .as_u64()
            .expect("a memory limit");
        assert!(
            peak <= limit,
            "the plugin's heap peaked at {peak} bytes, over its limit of {limit}"
        );
    }
    let sum = |name: &str| total(&summaries, name);
    assert_eq!(sum("panics"), 0, "a panic was caught: {summaries:?}");
    assert_eq!(
        sum("events_written"),
        events.len() as u64,
        "events_written and event lines"
    );

    // Every issued handle is written exactly once, and nothing else.
    let mut logged = HashSet::new();
    let mut closed_by_plugin = HashSet::new();
    for event in &events {
        let id = event["id"].as_str().expect("an event id");
        let id = u64::from_str_radix(id.trim_start_matches("0x"), 16).expect("a hex id");
        assert!(logged.insert(id), "event {id:#x} written twice");
        if event["closed"] != "stop" {
            closed_by_plugin.insert(id);
        }
    }
    let issued: HashSet<u64> = case.issued.lock().unwrap().iter().copied().collect();
    let missing: Vec<String> = issued
        .difference(&logged)
        .take(5)
        .map(|h| format!("{h:#x}"))
        .collect();
    let unknown: Vec<String> = logged
        .difference(&issued)
        .take(5)
        .map(|h| format!("{h:#x}"))
        .collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "{} issued, {} written; issued but not written: {missing:?}; written but never issued: {unknown:?}",
        issued.len(),
        logged.len()
    );

    // Refusals: every hostile call is counted; a call on a handle the fuzzer held live
    // is refused only if the plugin itself had closed that event (restarted step, ProxyOp
    // abandoned or stopped first, finalize of its communicator).
    let uses = case.uses.lock().unwrap();
    let mut released = Use::default();
    for handle in &closed_by_plugin {
        if let Some(u) = uses.get(handle) {
            released.stops += u.stops;
            released.records += u.records;
            released.unknown_states += u.unknown_states;
        }
    }
    let tally = &case.tally;
    let t = |c: &AtomicU64| c.load(Relaxed);
    let stops_refused =
        sum("stop_null") + sum("stop_never_issued") + sum("stop_double") + sum("stop_stale");
    let records_refused = sum("record_null")
        + sum("record_never_issued")
        + sum("record_after_stop")
        + sum("record_stale");
    let said = format!("counters {summaries:?}");
    assert!(
        stops_refused <= t(&tally.bad_stops) + released.stops,
        "{stops_refused} stops refused, {} hostile, {} on events the plugin closed; {said}",
        t(&tally.bad_stops),
        released.stops
    );
    assert!(
        records_refused <= t(&tally.bad_records) + released.records,
        "{records_refused} records refused, {} hostile, {} on events the plugin closed; {said}",
        t(&tally.bad_records),
        released.records
    );
    assert!(
        sum("unknown_state") <= t(&tally.unknown_states),
        "unknown_state {} > {} made; {said}",
        sum("unknown_state"),
        t(&tally.unknown_states)
    );
    let exact = [
        ("null_handle_out", t(&tally.null_handle_outs)),
        ("null_descriptor", t(&tally.null_descriptors)),
        ("unknown_type", t(&tally.unknown_types)),
        ("bad_finalize", t(&tally.bad_finalizes)),
    ];
    if case.config.cycles {
        for (name, made) in exact {
            assert!(
                sum(name) <= made,
                "{name}: {} > {made} made; {said}",
                sum(name)
            );
        }
    } else {
        // One cycle around every call: nothing may be missing, but a start refused for
        // memory is refused before its descriptor is looked at.
        let refused_for_memory = sum("memory_limit_events");
        for (name, made) in exact {
            if matches!(name, "null_descriptor" | "unknown_type") {
                assert!(
                    sum(name) <= made && sum(name) + refused_for_memory >= made,
                    "{name}: {} of {made} made, {refused_for_memory} refused for memory; {said}",
                    sum(name)
                );
            } else {
                assert_eq!(sum(name), made, "{name}; {said}");
            }
        }
        assert!(
            stops_refused >= t(&tally.bad_stops),
            "{stops_refused} stops refused < {} hostile; {said}",
            t(&tally.bad_stops)
        );
        assert!(
            records_refused >= t(&tally.bad_records),
            "{records_refused} records refused < {} hostile; {said}",
            t(&tally.bad_records)
        );
        assert!(
            sum("unknown_state") + released.unknown_states >= t(&tally.unknown_states),
            "unknown_state {} < {} made; {said}",
            sum("unknown_state"),
            t(&tally.unknown_states)
        );
    }
    assert!(
        sum("disabled_inits") >= t(&tally.null_slot_inits) || case.config.cycles,
        "disabled_inits; {said}"
    );

    let limit_mib: u64 = std::env::var("FUZZ_MAX_RSS_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512);
    assert!(
        peak_rss_kib <= limit_mib * 1024,
        "peak resident memory {} MiB over the bound of {limit_mib} MiB",
        peak_rss_kib / 1024
    );
    Report {
        callbacks: case.calls.load(Relaxed),
        issued: issued.len(),
        cycles: summaries.len(),
        peak_rss_kib,
    }
}

/// The process's peak resident memory (VmHWM).
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
