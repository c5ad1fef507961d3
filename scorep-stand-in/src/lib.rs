//! A stand-in for Score-P's user API, for tests only. **It is not Score-P**: it records
//! what it receives into a JSON-lines file and enforces the rules of Score-P 8.4 that
//! matter to a plugin (see `README.md`), aborting the process where Score-P would.

#![allow(non_snake_case)]
#![allow(clippy::missing_safety_doc)]

use scorep_adapter::metric::{self, ClockFn, PluginInfo, TimeValuePair};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, Once};

/// The stand-in's clock runs this far ahead of CLOCK_MONOTONIC_RAW.
pub const CLOCK_OFFSET_NS: u64 = 1_000_000_000_000;

const PRE: u8 = 0;
const WITHIN: u8 = 1;
const POST: u8 = 2;

static PHASE: AtomicU8 = AtomicU8::new(PRE);
static INIT: Once = Once::new();
static SEQUENCE: AtomicU64 = AtomicU64::new(0);
static LOG: Mutex<Option<std::fs::File>> = Mutex::new(None);
static REGIONS: Mutex<Vec<RegionInfo>> = Mutex::new(Vec::new());
static BY_NAME: Mutex<Option<HashMap<String, usize>>> = Mutex::new(None);
static PARAMETERS: AtomicU64 = AtomicU64::new(0);
static METRIC_PLUGINS: Mutex<Vec<LoadedPlugin>> = Mutex::new(Vec::new());

struct RegionInfo {
    name: String,
    group: Option<String>,
}

struct LoadedPlugin {
    name: String,
    info: PluginInfo,
    /// (metric name, id from add_counter)
    counters: Vec<(String, i32)>,
    _library: libloading::os::unix::Library,
}

// SAFETY: the plugin's info holds function pointers only; calls happen under the mutex.
unsafe impl Send for LoadedPlugin {}

thread_local! {
    /// The regions this thread entered, innermost last (as Score-P's per-location stack).
    static STACK: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// The stand-in's clock: CLOCK_MONOTONIC_RAW nanoseconds plus [`CLOCK_OFFSET_NS`].
#[no_mangle]
pub extern "C" fn SCOREP_StandIn_Clock() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid, writable timespec; the clock exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64 + CLOCK_OFFSET_NS
}

unsafe extern "C" fn clock_for_plugins() -> u64 {
    SCOREP_StandIn_Clock()
}

fn tid() -> i64 {
    // SAFETY: gettid has no preconditions.
    i64::from(unsafe { libc::gettid() })
}

fn log(mut line: Value) {
    line["seq"] = json!(SEQUENCE.fetch_add(1, Ordering::Relaxed));
    line["tid"] = json!(tid());
    let mut text = line.to_string();
    text.push('\n');
    if let Some(file) = LOG.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        let _ = file.write_all(text.as_bytes());
    }
}

fn fatal(message: &str, line: Value) -> ! {
    log(line);
    eprintln!("[Score-P stand-in] Fatal: {message}");
    std::process::abort();
}

fn text(ptr: *const c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: callers pass NULL or a C string, as Score-P's API requires.
    unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned()
}

/// Brackets every API call: initialises in PRE, says whether to record (WITHIN).
fn active(call: &str) -> bool {
    INIT.call_once(initialise);
    if PHASE.load(Ordering::Acquire) == WITHIN {
        return true;
    }
    log(json!({"call": "ignored_after_finalize", "name": call}));
    false
}

fn initialise() {
    if let Some(path) = std::env::var_os("SCOREP_STAND_IN_LOG") {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
        {
            Ok(file) => *LOG.lock().unwrap_or_else(|e| e.into_inner()) = Some(file),
            Err(error) => eprintln!("[Score-P stand-in] cannot open the log: {error}"),
        }
    }
    *BY_NAME.lock().unwrap_or_else(|e| e.into_inner()) = Some(HashMap::new());
    PHASE.store(WITHIN, Ordering::Release);
    log(json!({"call": "init", "time": SCOREP_StandIn_Clock()}));
    // SAFETY: registers a plain extern "C" fn that catches its panics.
    unsafe { libc::atexit(finalize_at_exit) };
    load_metric_plugins();
}

extern "C" fn finalize_at_exit() {
    let _ = std::panic::catch_unwind(finalize);
}

/// Test hook: finalises now, as Score-P's exit handler would. Later calls are no-ops.
#[no_mangle]
pub extern "C" fn SCOREP_StandIn_Finalize() {
    let _ = std::panic::catch_unwind(finalize);
}

fn finalize() {
    if PHASE.swap(POST, Ordering::AcqRel) != WITHIN {
        return;
    }
    let mut plugins = METRIC_PLUGINS.lock().unwrap_or_else(|e| e.into_inner());
    for plugin in plugins.iter_mut() {
        if let Some(synchronize) = plugin.info.synchronize {
            // SAFETY: the plugin's callback, per the metric-plugin interface.
            unsafe { synchronize(1, metric::sync_mode::END) };
        }
        for (name, id) in &plugin.counters {
            let Some(get_all_values) = plugin.info.get_all_values else {
                continue;
            };
            let mut list: *mut TimeValuePair = std::ptr::null_mut();
            // SAFETY: the plugin's callback with a writable list pointer.
            let count = unsafe { get_all_values(*id, &mut list) };
            let values: &[TimeValuePair] = if list.is_null() || count == 0 {
                &[]
            } else {
                // SAFETY: the plugin returned `count` pairs at `list`.
                unsafe { std::slice::from_raw_parts(list, count as usize) }
            };
            for pair in values {
                log(
                    json!({"call": "metric_value", "name": name, "time": pair.timestamp,
                           "value": pair.value, "plugin": plugin.name}),
                );
            }
            // SAFETY: Score-P takes ownership of the list and frees it with free().
            unsafe { libc::free(list.cast()) };
        }
        if let Some(finalize) = plugin.info.finalize {
            // SAFETY: the plugin's callback.
            unsafe { finalize() };
        }
    }
    log(json!({"call": "finalize", "time": SCOREP_StandIn_Clock()}));
}

fn load_metric_plugins() {
    let Ok(names) = std::env::var("SCOREP_METRIC_PLUGINS") else {
        return;
    };
    for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let file = format!("lib{name}.so");
        // SAFETY: loading a metric plugin, as Score-P does (RTLD_NOW, default scope).
        let library = match unsafe {
            libloading::os::unix::Library::open(Some(&file), libloading::os::unix::RTLD_NOW)
        } {
            Ok(library) => library,
            Err(error) => {
                log(json!({"call": "metric_plugin_failed", "name": name,
                           "value": error.to_string()}));
                continue;
            }
        };
        let symbol = format!("{}\0", metric::entry_symbol(name));
        // SAFETY: the entry point's signature is fixed by the metric-plugin interface.
        let get_info =
            match unsafe { library.get::<unsafe extern "C" fn() -> PluginInfo>(symbol.as_bytes()) }
            {
                Ok(f) => *f,
                Err(error) => {
                    log(json!({"call": "metric_plugin_failed", "name": name,
                           "value": error.to_string()}));
                    continue;
                }
            };
        // SAFETY: the plugin's entry point.
        let info = unsafe { get_info() };
        let async_ok = info.get_all_values.is_some() && info.set_clock_function.is_some();
        let mandatory = info.initialize.is_some()
            && info.finalize.is_some()
            && info.get_event_info.is_some()
            && info.add_counter.is_some();
        if info.plugin_version > metric::PLUGIN_VERSION || !mandatory || !async_ok {
            log(json!({"call": "metric_plugin_failed", "name": name,
                       "value": "incomplete or newer plugin"}));
            continue;
        }
        if let Some(set_clock) = info.set_clock_function {
            // SAFETY: the plugin's callback; the clock is a plain extern "C" fn.
            unsafe { set_clock(Some(clock_for_plugins as ClockFn)) };
        }
        // SAFETY: checked non-NULL above.
        let status = unsafe { info.initialize.map_or(-1, |f| f()) };
        log(
            json!({"call": "metric_plugin_loaded", "name": name, "value": status,
                   "run_per": info.run_per, "sync": info.sync}),
        );
        if status != 0 {
            continue;
        }
        let variable = format!("SCOREP_METRIC_{}", name.to_ascii_uppercase());
        let tokens = std::env::var(&variable).unwrap_or_default();
        let mut counters = Vec::new();
        for token in tokens.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let token = CString::new(token).unwrap_or_default().into_raw();
            // SAFETY: the plugin's callback with a writable C string (leaked on purpose:
            // the plugin may keep it).
            let list = unsafe {
                info.get_event_info
                    .map_or(std::ptr::null_mut(), |f| f(token))
            };
            if list.is_null() {
                continue;
            }
            let mut index = 0;
            loop {
                // SAFETY: the list ends with an entry whose name is NULL.
                let entry = unsafe { *list.add(index) };
                if entry.name.is_null() {
                    break;
                }
                let metric_name = text(entry.name);
                // SAFETY: the plugin's callback with the name it gave.
                let id = unsafe { info.add_counter.map_or(-1, |f| f(entry.name)) };
                log(
                    json!({"call": "metric_added", "name": metric_name, "value": id,
                           "unit": text(entry.unit), "mode": entry.mode}),
                );
                if id >= 0 {
                    counters.push((metric_name, id));
                }
                // SAFETY: Score-P owns and frees the names.
                unsafe { libc::free(entry.name.cast()) };
                index += 1;
            }
            // SAFETY: Score-P owns and frees the list.
            unsafe { libc::free(list.cast()) };
        }
        if !counters.is_empty() {
            if let Some(synchronize) = info.synchronize {
                // SAFETY: the plugin's callback.
                unsafe { synchronize(1, metric::sync_mode::BEGIN) };
            }
        }
        METRIC_PLUGINS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(LoadedPlugin {
                name: name.to_owned(),
                info,
                counters,
                _library: library,
            });
    }
}

fn region_name(handle: usize) -> (String, Option<String>) {
    let regions = REGIONS.lock().unwrap_or_else(|e| e.into_inner());
    regions
        .get(handle.wrapping_sub(1))
        .map(|r| (r.name.clone(), r.group.clone()))
        .unwrap_or_default()
}

fn define(name: String) -> usize {
    let mut regions = REGIONS.lock().unwrap_or_else(|e| e.into_inner());
    regions.push(RegionInfo { name, group: None });
    regions.len()
}

fn enter(handle: usize, call: &str) {
    if handle == 0 {
        fatal(
            "Enter for uninitialized region handle",
            json!({"call": "abort", "name": call}),
        );
    }
    STACK.with(|stack| stack.borrow_mut().push(handle));
    let (region, group) = region_name(handle);
    log(json!({"call": "enter", "region": region, "group": group,
               "time": SCOREP_StandIn_Clock()}));
}

fn end(handle: usize) {
    let (region, _) = region_name(handle);
    let top = STACK.with(|stack| stack.borrow().last().copied());
    match top {
        None => fatal(
            "Bug 'NULL == task->current_frame': Task stack underflow",
            json!({"call": "abort", "region": region, "name": "end without enter on this thread"}),
        ),
        Some(top) if top != handle => {
            let (open, _) = region_name(top);
            fatal(
                &format!("region \"{region}\" ended while \"{open}\" is open on this thread"),
                json!({"call": "abort", "region": region, "name": "end out of order"}),
            )
        }
        Some(_) => {
            STACK.with(|stack| stack.borrow_mut().pop());
            log(json!({"call": "end", "region": region, "time": SCOREP_StandIn_Clock()}));
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn SCOREP_User_RegionInit(
    handle: *mut *mut c_void,
    _last_file_name: *mut *const c_char,
    _last_file: *mut u32,
    name: *const c_char,
    region_type: u32,
    file_name: *const c_char,
    line: u32,
) {
    if handle.is_null() || !active("RegionInit") {
        return;
    }
    // SAFETY: a writable handle (caller).
    if unsafe { !(*handle).is_null() } {
        return;
    }
    let name = text(name);
    let id = define(name.clone());
    // SAFETY: as above.
    unsafe { *handle = id as *mut c_void };
    log(
        json!({"call": "region_init", "region": name, "value": region_type,
               "name": text(file_name), "line": line}),
    );
}

#[no_mangle]
pub unsafe extern "C" fn SCOREP_User_RegionBegin(
    handle: *mut *mut c_void,
    last_file_name: *mut *const c_char,
    last_file: *mut u32,
    name: *const c_char,
    region_type: u32,
    file_name: *const c_char,
    line: u32,
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        SCOREP_User_RegionInit(
            handle,
            last_file_name,
            last_file,
            name,
            region_type,
            file_name,
            line,
        )
    };
    if handle.is_null() || PHASE.load(Ordering::Acquire) != WITHIN {
        return;
    }
    // SAFETY: a writable handle (caller).
    enter(unsafe { *handle } as usize, "RegionBegin");
}

#[no_mangle]
pub extern "C" fn SCOREP_User_RegionEnter(handle: *mut c_void) {
    if active("RegionEnter") {
        enter(handle as usize, "RegionEnter");
    }
}

#[no_mangle]
pub extern "C" fn SCOREP_User_RegionEnd(handle: *mut c_void) {
    if active("RegionEnd") {
        end(handle as usize);
    }
}

#[no_mangle]
pub extern "C" fn SCOREP_User_RegionByNameBegin(
    name: *const c_char,
    _region_type: u32,
    _file_name: *const c_char,
    _line: u32,
) {
    if !active("RegionByNameBegin") {
        return;
    }
    let name = text(name);
    let existing = BY_NAME
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&name).copied());
    let handle = existing.unwrap_or_else(|| {
        let id = define(name.clone());
        if let Some(map) = BY_NAME.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            map.insert(name, id);
        }
        id
    });
    enter(handle, "RegionByNameBegin");
}

#[no_mangle]
pub extern "C" fn SCOREP_User_RegionByNameEnd(name: *const c_char) {
    if !active("RegionByNameEnd") {
        return;
    }
    let name = text(name);
    let handle = BY_NAME
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&name).copied())
        .unwrap_or(usize::MAX);
    end(handle);
}

#[no_mangle]
pub extern "C" fn SCOREP_User_RegionSetGroup(handle: *mut c_void, group: *const c_char) {
    if !active("RegionSetGroup") || handle.is_null() {
        return;
    }
    let group = text(group);
    let region = {
        let mut regions = REGIONS.lock().unwrap_or_else(|e| e.into_inner());
        match regions.get_mut((handle as usize).wrapping_sub(1)) {
            Some(r) => {
                r.group = Some(group.clone());
                r.name.clone()
            }
            None => return,
        }
    };
    log(json!({"call": "set_group", "region": region, "group": group}));
}

fn parameter(handle: *mut u64, name: *const c_char, value: Value, call: &str) {
    if !active(call) || handle.is_null() {
        return;
    }
    // SAFETY: a writable parameter handle (caller).
    unsafe {
        if *handle == u64::MAX {
            *handle = PARAMETERS.fetch_add(1, Ordering::Relaxed);
        }
    }
    let top = STACK.with(|stack| stack.borrow().last().copied());
    let region = top.map(|h| region_name(h).0);
    log(json!({"call": call, "region": region, "name": text(name), "value": value}));
}

#[no_mangle]
pub unsafe extern "C" fn SCOREP_User_ParameterInt64(
    handle: *mut u64,
    name: *const c_char,
    value: i64,
) {
    parameter(handle, name, json!(value), "parameter_int64");
}

#[no_mangle]
pub unsafe extern "C" fn SCOREP_User_ParameterUint64(
    handle: *mut u64,
    name: *const c_char,
    value: u64,
) {
    parameter(handle, name, json!(value), "parameter_uint64");
}

#[no_mangle]
pub unsafe extern "C" fn SCOREP_User_ParameterString(
    handle: *mut u64,
    name: *const c_char,
    value: *const c_char,
) {
    parameter(handle, name, json!(text(value)), "parameter_string");
}

#[no_mangle]
pub extern "C" fn SCOREP_User_EnableRecording() {
    if active("EnableRecording") {
        log(json!({"call": "enable_recording"}));
    }
}

#[no_mangle]
pub extern "C" fn SCOREP_User_DisableRecording() {
    if active("DisableRecording") {
        log(json!({"call": "disable_recording"}));
    }
}

#[no_mangle]
pub extern "C" fn SCOREP_User_RecordingEnabled() -> bool {
    active("RecordingEnabled")
}

#[no_mangle]
pub unsafe extern "C" fn SCOREP_User_InitMetric(
    handle: *mut u32,
    name: *const c_char,
    unit: *const c_char,
    metric_type: u32,
    context: i8,
) {
    if !active("InitMetric") || handle.is_null() {
        return;
    }
    let id = define(text(name)) as u32;
    // SAFETY: a writable sampling-set handle (caller).
    unsafe { *handle = id };
    log(
        json!({"call": "init_metric", "name": text(name), "unit": text(unit),
               "value": metric_type, "context": context}),
    );
}

fn trigger(handle: u32, value: Value) {
    if active("TriggerMetric") {
        log(
            json!({"call": "trigger_metric", "name": region_name(handle as usize).0,
                   "value": value}),
        );
    }
}

#[no_mangle]
pub extern "C" fn SCOREP_User_TriggerMetricInt64(handle: u32, value: i64) {
    trigger(handle, json!(value));
}

#[no_mangle]
pub extern "C" fn SCOREP_User_TriggerMetricUint64(handle: u32, value: u64) {
    trigger(handle, json!(value));
}

#[no_mangle]
pub extern "C" fn SCOREP_User_TriggerMetricDouble(handle: u32, value: f64) {
    trigger(handle, json!(value));
}
