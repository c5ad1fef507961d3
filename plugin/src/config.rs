//! Configuration from `NCCL_SCOREP_*` environment variables, parsed once per process.
//!
//! A bad value never stops the job: it gives one clear message and the default. Every
//! variable is documented in `docs/configuration.md`; keep the two in step.

use crate::kinds::KindSet;
use nccl_scorep_common::RunDir;
use std::path::PathBuf;

/// What the plugin produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Score-P when the process is measured by it, otherwise standalone output.
    Auto,
    /// Standalone OTF2 output.
    Otf2,
    /// Score-P regions plus a sidecar trace.
    Scorep,
    /// Only the JSON-lines event log.
    Jsonl,
    /// Load, answer NCCL, record nothing.
    Off,
    /// Only record every call during the run (record mode without the collector); the
    /// trace is made afterwards from the recordings (`nccl-scorep convert`).
    Deferred,
}

/// Which clock stamps records on the callback path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockChoice {
    /// The TSC where it is reliable, else CLOCK_MONOTONIC.
    Auto,
    Tsc,
    Monotonic,
}

/// How the trace writes the proxy steps of an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepDetail {
    /// Each step is an interval inside its operation (the default).
    Intervals,
    /// Each operation carries its steps' count, bytes, time and wait times as attributes;
    /// no step intervals.
    Summary,
}

/// What to do when a thread's ring is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnFull {
    /// Drop the record and count it (the default: never stall NCCL).
    Drop,
    /// Wait for the collector to make room.
    Wait,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub mode: Mode,
    /// Also record every profiler call as NCCL made it (`record` in NCCL_SCOREP_MODE).
    pub record: bool,
    pub output_dir: PathBuf,
    /// The activation mask written into NCCL's `eActivationMask`.
    pub event_mask: KindSet,
    /// Bytes of ring buffer per calling thread.
    pub buffer_bytes: usize,
    pub on_full: OnFull,
    /// Write the JSON-lines event log (always on in `jsonl` mode).
    pub jsonl: bool,
    /// Open events the plugin can track at once (slab size).
    pub max_open_events: usize,
    pub clock: ClockChoice,
    /// Write the Scalasca-safe variant of the trace (CPU-thread locations only).
    pub scalasca_safe: bool,
    /// The last process of the job merges the parts into one archive.
    pub auto_merge: bool,
    /// The `nccl-scorep` tool that merges at the end of the job, when not found beside
    /// the plugin or on PATH.
    pub merge_tool: Option<PathBuf>,
    /// The merge at the end of the job also writes the CUBE4 profile.
    pub profile: bool,
    /// The trace shows each proxy step's wait states as intervals nested in the step.
    pub step_states: bool,
    /// Proxy steps as intervals, or summed up on their operation.
    pub step_detail: StepDetail,
    /// Proxy lanes (trace locations) per communicator rank; intervals beyond them are
    /// squeezed (started late where a lane has room).
    pub proxy_lanes: usize,
    /// Trace locations one process writes at most; events of locations beyond are left
    /// out and counted.
    pub max_locations: usize,
    /// Bytes of heap the plugin may hold (`usize::MAX`: no limit); above 7/8 of it new
    /// events are refused and counted.
    pub memory_limit: usize,
    /// Parameters attached to the regions entered in Score-P (Score-P mode).
    pub scorep_parameters: ScorepParameters,
    /// Score-P's `SCOREP_EXPERIMENT_DIRECTORY`: in Score-P mode the output goes to its
    /// `nccl/` sidecar directory instead of `output_dir`.
    pub scorep_experiment_dir: Option<PathBuf>,
    /// `NCCL_SCOREP_CHAIN`: another profiler plugin to load and forward NCCL's calls to
    /// (a path or a name, resolved as NCCL resolves `NCCL_PROFILER_PLUGIN`).
    pub chain: Option<String>,
    /// Write the flight recorder file (see docs/hangs.md).
    pub flight_recorder: bool,
    /// Communicator ranks the flight recorder file has room for.
    pub flight_comms: u32,
    /// Operations the flight recorder keeps per communicator rank.
    pub flight_ops: u32,
    /// An operation unfinished this long makes the process write a hang report.
    pub hang_timeout: Option<std::time::Duration>,
    /// The signal on which the process writes a hang report (a `libc::SIG*` number).
    pub report_signal: Option<i32>,
}

/// Which parameters the Score-P regions carry. Every distinct value becomes a call-tree
/// node in Score-P's profile, so each is drawn from a small set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScorepParameters {
    /// `nccl.bytes`: the payload size as a power-of-four bucket ("1-4 KiB").
    pub bytes: bool,
    /// `nccl.comm`: the communicator's name (or its hash when it has none).
    pub comm: bool,
}

impl ScorepParameters {
    pub const ALL: ScorepParameters = ScorepParameters {
        bytes: true,
        comm: true,
    };
    pub const NONE: ScorepParameters = ScorepParameters {
        bytes: false,
        comm: false,
    };
}

/// One variable the plugin reads: what `nccl-scorep doctor --variables` lists (the full
/// reference is docs/configuration.md).
#[derive(Clone, Copy, Debug)]
pub struct Variable {
    pub name: &'static str,
    pub values: &'static str,
    pub default: &'static str,
    pub meaning: &'static str,
}

/// Every variable the plugin reads, in the order of docs/configuration.md.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "NCCL_SCOREP_MODE",
        values: "auto, otf2, scorep, jsonl, off, deferred; each may add `,record`",
        default: "auto",
        meaning: "what to produce: the OTF2 trace, Score-P regions when measured by Score-P \
                  (auto), only the event log, or nothing; `record` also records every \
                  profiler call for nccl-sim replay; `deferred` only records them, for \
                  `nccl-scorep convert` to make the trace after the run",
    },
    Variable {
        name: "NCCL_SCOREP_OUTPUT_DIR",
        values: "a directory",
        default: DEFAULT_OUTPUT_DIR,
        meaning: "where each process writes its part, and the job's merged trace",
    },
    Variable {
        name: "NCCL_SCOREP_SCOREP_PARAMETERS",
        values: "comma list of bytes, comm; or all, none",
        default: "all",
        meaning: "Score-P mode: the parameters attached to the regions",
    },
    Variable {
        name: "NCCL_SCOREP_EVENTS",
        values: "comma list of levels (-level removes one), or a number",
        default: "default",
        meaning: "which NCCL events to ask for (NCCL's activation mask)",
    },
    Variable {
        name: "NCCL_SCOREP_BUFFER_SIZE",
        values: "bytes, 4K … 1G",
        default: "4M",
        meaning: "ring buffer per thread that calls the plugin",
    },
    Variable {
        name: "NCCL_SCOREP_MEMORY_LIMIT",
        values: "bytes, 16M … 1024G, or off",
        default: "64M",
        meaning: "heap the plugin may hold; above 7/8 of it new events are refused and counted",
    },
    Variable {
        name: "NCCL_SCOREP_ON_FULL",
        values: "drop, wait",
        default: "drop",
        meaning: "a full ring drops the record (a gap) or makes NCCL's thread wait",
    },
    Variable {
        name: "NCCL_SCOREP_JSONL",
        values: "1/0, yes/no, on/off, true/false",
        default: "0",
        meaning: "also write the JSON-lines event log",
    },
    Variable {
        name: "NCCL_SCOREP_AUTO_MERGE",
        values: "1/0, yes/no, on/off, true/false",
        default: "1",
        meaning: "the job's last process merges the parts into <output dir>/traces.otf2",
    },
    Variable {
        name: "NCCL_SCOREP_TOOL",
        values: "a path",
        default: "the tool beside the plugin, else on PATH",
        meaning: "the nccl-scorep tool that merges at the end of the job",
    },
    Variable {
        name: "NCCL_SCOREP_PROFILE",
        values: "1/0, yes/no, on/off, true/false",
        default: "1",
        meaning: "the merge also writes the CUBE4 profile profile.cubex",
    },
    Variable {
        name: "NCCL_SCOREP_SCALASCA_SAFE",
        values: "1/0, yes/no, on/off, true/false",
        default: "0",
        meaning: "write the variant of the trace Scalasca accepts (CPU threads only)",
    },
    Variable {
        name: "NCCL_SCOREP_STEP_STATES",
        values: "1/0, yes/no, on/off, true/false",
        default: "1",
        meaning: "proxy steps show their wait states as nested intervals",
    },
    Variable {
        name: "NCCL_SCOREP_STEP_DETAIL",
        values: "intervals, summary",
        default: "intervals",
        meaning: "proxy steps as intervals, or summed up on their operation (a smaller trace)",
    },
    Variable {
        name: "NCCL_SCOREP_MAX_LOCATIONS",
        values: "64 to 1048576",
        default: "2048",
        meaning: "trace locations one process writes at most (each holds up to 32 KiB)",
    },
    Variable {
        name: "NCCL_SCOREP_PROXY_LANES",
        values: "1 to 64",
        default: "16",
        meaning: "trace locations (lanes) for the proxy operations of one communicator rank",
    },
    Variable {
        name: "NCCL_SCOREP_FLIGHT_RECORDER",
        values: "1/0, yes/no, on/off, true/false",
        default: "1",
        meaning:
            "keep each communicator rank's last operations in a file `nccl-scorep status` reads",
    },
    Variable {
        name: "NCCL_SCOREP_FLIGHT_COMMS",
        values: "1 to 4096",
        default: "16",
        meaning: "communicator ranks the flight recorder has room for",
    },
    Variable {
        name: "NCCL_SCOREP_FLIGHT_OPS",
        values: "1 to 4096",
        default: "64",
        meaning: "operations the flight recorder keeps per communicator rank",
    },
    Variable {
        name: "NCCL_SCOREP_HANG_TIMEOUT",
        values: "seconds (0 or off: never)",
        default: "off",
        meaning: "an operation unfinished this long writes a hang report",
    },
    Variable {
        name: "NCCL_SCOREP_SIGNAL",
        values: "USR1, USR2 or off",
        default: "off",
        meaning: "the signal on which the process writes a hang report",
    },
    Variable {
        name: "NCCL_SCOREP_CLOCK",
        values: "auto, tsc, monotonic",
        default: "auto",
        meaning: "what stamps events on NCCL's threads",
    },
    Variable {
        name: "NCCL_SCOREP_CHAIN",
        values: "a profiler plugin's path or name",
        default: "none",
        meaning: "another profiler plugin that gets NCCL's events beside nccl-scorep",
    },
    Variable {
        name: "NCCL_SCOREP_MAX_OPEN_EVENTS",
        values: "1024 … 1048576",
        default: "65536",
        meaning: "events open at once in a process; beyond it new ones are refused",
    },
    Variable {
        name: "NCCL_SCOREP_DIR_MODE",
        values: "an octal mode from 0700 to 0777",
        default: "0700",
        meaning: "the mode of the directories nccl-scorep creates (the umask still applies)",
    },
    Variable {
        name: "NCCL_SCOREP_HOSTNAME",
        values: "letters, digits, -, _, . (at most 64)",
        default: "the system's host name",
        meaning: "the node's name in the trace and in the parts' directory names",
    },
];

/// Whether `name` is one of the plugin's variables.
pub fn is_our_variable(name: &str) -> bool {
    VARIABLES.iter().any(|v| v.name == name)
}

/// One problem found while reading the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigWarning(pub String);

pub const DEFAULT_FLIGHT_COMMS: u32 = 16;
pub const DEFAULT_FLIGHT_OPS: u32 = 64;
/// Proxy lanes per communicator rank: enough for the operations a rank has in flight on
/// a few channels, with room for the steps that overlap.
pub const DEFAULT_PROXY_LANES: usize = 16;
/// Trace locations per process: with at most 32 KiB of unwritten events each, 64 MiB;
/// an 8-GPU process with a few communicators needs a few hundred.
pub const DEFAULT_MAX_LOCATIONS: usize = 2048;

/// The most proxy lanes per communicator rank one may ask for.
pub const MAX_PROXY_LANES: usize = 64;

pub const DEFAULT_BUFFER_BYTES: usize = 4 << 20;
pub const DEFAULT_MAX_OPEN_EVENTS: usize = 1 << 16;
pub const DEFAULT_OUTPUT_DIR: &str = "nccl-scorep-out";

/// Event levels, each a set of NCCL event types, selectable by name.
pub const EVENT_LEVELS: &[(&str, KindSet)] = &[
    ("group_api", KindSet::GROUP_API),
    ("coll_api", KindSet::COLL_API),
    ("p2p_api", KindSet::P2P_API),
    ("kernel_launch", KindSet::KERNEL_LAUNCH),
    ("group", KindSet::GROUP),
    ("coll", KindSet::COLL),
    ("p2p", KindSet::P2P),
    ("proxy_op", KindSet::PROXY_OP),
    ("proxy_step", KindSet::PROXY_STEP),
    ("proxy_ctrl", KindSet::PROXY_CTRL),
    ("kernel_ch", KindSet::KERNEL_CH),
    ("net_plugin", KindSet::NET_PLUGIN),
    ("ce_coll", KindSet::CE_COLL),
    ("ce_sync", KindSet::CE_SYNC),
    ("ce_batch", KindSet::CE_BATCH),
    ("kernel_phase", KindSet::KERNEL_PHASE),
    // Groups of the above.
    (
        "api",
        KindSet::GROUP_API
            .union(KindSet::COLL_API)
            .union(KindSet::P2P_API)
            .union(KindSet::KERNEL_LAUNCH),
    ),
    (
        "tasks",
        KindSet::GROUP.union(KindSet::COLL).union(KindSet::P2P),
    ),
    ("kernel", KindSet::KERNEL_CH),
    ("proxy", KindSet::PROXY_OP.union(KindSet::PROXY_CTRL)),
    ("steps", KindSet::PROXY_STEP),
    ("net", KindSet::NET_PLUGIN),
    (
        "ce",
        KindSet::CE_COLL
            .union(KindSet::CE_SYNC)
            .union(KindSet::CE_BATCH),
    ),
    ("all", KindSet::all()),
    ("default", DEFAULT_EVENT_MASK),
];

/// API calls, tasks, GPU kernel time per channel and proxy operations. Steps and net
/// events are many per operation and are asked for explicitly.
pub const DEFAULT_EVENT_MASK: KindSet = KindSet::GROUP_API
    .union(KindSet::COLL_API)
    .union(KindSet::P2P_API)
    .union(KindSet::KERNEL_LAUNCH)
    .union(KindSet::GROUP)
    .union(KindSet::COLL)
    .union(KindSet::P2P)
    .union(KindSet::KERNEL_CH)
    .union(KindSet::PROXY_OP)
    .union(KindSet::PROXY_CTRL);

impl Default for Config {
    fn default() -> Config {
        Config {
            mode: Mode::Auto,
            record: false,
            output_dir: PathBuf::from(DEFAULT_OUTPUT_DIR),
            event_mask: DEFAULT_EVENT_MASK,
            buffer_bytes: DEFAULT_BUFFER_BYTES,
            on_full: OnFull::Drop,
            jsonl: false,
            max_open_events: DEFAULT_MAX_OPEN_EVENTS,
            clock: ClockChoice::Auto,
            scalasca_safe: false,
            auto_merge: true,
            merge_tool: None,
            profile: true,
            step_states: true,
            step_detail: StepDetail::Intervals,
            proxy_lanes: DEFAULT_PROXY_LANES,
            max_locations: DEFAULT_MAX_LOCATIONS,
            memory_limit: crate::memory::DEFAULT_LIMIT_BYTES,
            scorep_parameters: ScorepParameters::ALL,
            scorep_experiment_dir: None,
            chain: None,
            flight_recorder: true,
            flight_comms: DEFAULT_FLIGHT_COMMS,
            flight_ops: DEFAULT_FLIGHT_OPS,
            hang_timeout: None,
            report_signal: None,
        }
    }
}

impl Config {
    /// Reads the process environment. A value that is not UTF-8 is refused with a warning
    /// (none of the settings can use one).
    pub fn from_env() -> (Config, Vec<ConfigWarning>) {
        let (config, mut warnings) = Config::from_lookup(|name| std::env::var(name).ok());
        for (name, value) in std::env::vars_os() {
            let Some(name) = name.to_str().filter(|n| n.starts_with("NCCL_SCOREP_")) else {
                continue;
            };
            if !is_our_variable(name) {
                warnings.push(ConfigWarning(format!(
                    "{name} is not a variable of nccl-scorep and is ignored (misspelt? \
                     `nccl-scorep doctor --variables` lists them)"
                )));
            } else if value.to_str().is_none() {
                warnings.push(ConfigWarning(format!(
                    "{name}={} is not valid (not UTF-8); using the default",
                    value.to_string_lossy()
                )));
            }
        }
        (config, warnings)
    }

    /// Reads configuration through `lookup` (the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> (Config, Vec<ConfigWarning>) {
        let mut config = Config::default();
        let mut warnings = Vec::new();
        let mut warn = |name: &str, value: &str, expected: &str, default: &str| {
            warnings.push(ConfigWarning(format!(
                "{name}={value:?} is not valid ({expected}); using the default {default}"
            )));
        };
        let get = |name: &str| lookup(name).map(|v| v.trim().to_owned());

        if let Some(value) = get("NCCL_SCOREP_MODE") {
            match parse_modes(&value) {
                Some((mode, record)) => (config.mode, config.record) = (mode, record),
                None => warn(
                    "NCCL_SCOREP_MODE",
                    &value,
                    "auto, otf2, scorep, jsonl, off or deferred, each optionally with `,record`",
                    "auto",
                ),
            }
        }
        if let Some(value) = get("NCCL_SCOREP_OUTPUT_DIR") {
            if value.is_empty() {
                warn(
                    "NCCL_SCOREP_OUTPUT_DIR",
                    &value,
                    "a directory",
                    DEFAULT_OUTPUT_DIR,
                );
            } else {
                config.output_dir = PathBuf::from(value);
            }
        }
        if let Some(value) = get("NCCL_SCOREP_EVENTS") {
            match parse_events(&value) {
                Ok(mask) => config.event_mask = mask,
                Err(problem) => warn(
                    "NCCL_SCOREP_EVENTS",
                    &value,
                    &format!(
                        "{problem}; use a comma list of {}, or a number",
                        level_names()
                    ),
                    "(api,tasks,kernel,proxy)",
                ),
            }
        }
        if let Some(value) = get("NCCL_SCOREP_BUFFER_SIZE") {
            match parse_bytes(&value) {
                Some(bytes) if (4 << 10..=1 << 30).contains(&bytes) => config.buffer_bytes = bytes,
                _ => warn(
                    "NCCL_SCOREP_BUFFER_SIZE",
                    &value,
                    "bytes between 4K and 1G, with an optional K, M or G suffix",
                    "4M",
                ),
            }
        }
        if let Some(value) = get("NCCL_SCOREP_MEMORY_LIMIT") {
            match value.trim().to_ascii_lowercase().as_str() {
                "off" | "none" | "unlimited" => config.memory_limit = usize::MAX,
                _ => match parse_bytes(&value) {
                    Some(bytes) if (crate::memory::MIN_LIMIT_BYTES..=1 << 40).contains(&bytes) => {
                        config.memory_limit = bytes
                    }
                    _ => warn(
                        "NCCL_SCOREP_MEMORY_LIMIT",
                        &value,
                        "bytes between 16M and 1024G, with an optional K, M or G suffix, or off",
                        "64M",
                    ),
                },
            }
        }
        if let Some(value) = get("NCCL_SCOREP_ON_FULL") {
            match value.to_ascii_lowercase().as_str() {
                "drop" => config.on_full = OnFull::Drop,
                "wait" => config.on_full = OnFull::Wait,
                _ => warn("NCCL_SCOREP_ON_FULL", &value, "drop or wait", "drop"),
            }
        }
        if let Some(value) = get("NCCL_SCOREP_JSONL") {
            match parse_bool(&value) {
                Some(on) => config.jsonl = on,
                None => warn("NCCL_SCOREP_JSONL", &value, "0/1, yes/no, on/off", "0"),
            }
        }
        if let Some(value) = get("NCCL_SCOREP_MAX_OPEN_EVENTS") {
            match value.parse::<usize>() {
                Ok(n) if (1024..=crate::handle::MAX_SLOTS).contains(&n) => {
                    config.max_open_events = n
                }
                _ => warn(
                    "NCCL_SCOREP_MAX_OPEN_EVENTS",
                    &value,
                    "a number from 1024 to 1048576",
                    "65536",
                ),
            }
        }
        if let Some(value) = get("NCCL_SCOREP_CLOCK") {
            match value.to_ascii_lowercase().as_str() {
                "auto" => config.clock = ClockChoice::Auto,
                "tsc" => config.clock = ClockChoice::Tsc,
                "monotonic" => config.clock = ClockChoice::Monotonic,
                _ => warn(
                    "NCCL_SCOREP_CLOCK",
                    &value,
                    "auto, tsc or monotonic",
                    "auto",
                ),
            }
        }
        if let Some(value) = get("NCCL_SCOREP_AUTO_MERGE") {
            match parse_bool(&value) {
                Some(on) => config.auto_merge = on,
                None => warn("NCCL_SCOREP_AUTO_MERGE", &value, "0/1, yes/no, on/off", "1"),
            }
        }
        if let Some(value) = get("NCCL_SCOREP_PROFILE") {
            match parse_bool(&value) {
                Some(on) => config.profile = on,
                None => warn("NCCL_SCOREP_PROFILE", &value, "0/1, yes/no, on/off", "1"),
            }
        }
        if let Some(value) = get("NCCL_SCOREP_CHAIN") {
            // Empty is the same as unset: nothing chained.
            if !value.is_empty() {
                config.chain = Some(value);
            }
        }
        if let Some(value) = get(nccl_scorep_common::safe_file::DIR_MODE_VARIABLE) {
            // Read where directories are made (safe_file::dir_mode); checked here so that
            // a bad value is reported with the others.
            if nccl_scorep_common::safe_file::parse_dir_mode(&value).is_none() {
                warn(
                    nccl_scorep_common::safe_file::DIR_MODE_VARIABLE,
                    &value,
                    "an octal mode from 0700 to 0777",
                    "0700",
                );
            }
        }
        if let Some(value) = get("NCCL_SCOREP_TOOL") {
            if value.is_empty() {
                warn(
                    "NCCL_SCOREP_TOOL",
                    &value,
                    "the path of the nccl-scorep tool",
                    "the tool beside the plugin, else on PATH",
                );
            } else {
                config.merge_tool = Some(PathBuf::from(value));
            }
        }
        if let Some(value) = get("NCCL_SCOREP_STEP_STATES") {
            match parse_bool(&value) {
                Some(on) => config.step_states = on,
                None => warn(
                    "NCCL_SCOREP_STEP_STATES",
                    &value,
                    "0/1, yes/no, on/off",
                    "1",
                ),
            }
        }
        if let Some(value) = get("NCCL_SCOREP_STEP_DETAIL") {
            match value.to_ascii_lowercase().as_str() {
                "intervals" => config.step_detail = StepDetail::Intervals,
                "summary" => config.step_detail = StepDetail::Summary,
                _ => warn(
                    "NCCL_SCOREP_STEP_DETAIL",
                    &value,
                    "intervals or summary",
                    "intervals",
                ),
            }
        }
        if let Some(value) = get("NCCL_SCOREP_MAX_LOCATIONS") {
            match value.parse::<usize>() {
                Ok(n) if (64..=1 << 20).contains(&n) => config.max_locations = n,
                _ => warn(
                    "NCCL_SCOREP_MAX_LOCATIONS",
                    &value,
                    "a number from 64 to 1048576",
                    &DEFAULT_MAX_LOCATIONS.to_string(),
                ),
            }
        }
        if let Some(value) = get("NCCL_SCOREP_PROXY_LANES") {
            match value.parse::<usize>() {
                Ok(n) if (1..=MAX_PROXY_LANES).contains(&n) => config.proxy_lanes = n,
                _ => warn(
                    "NCCL_SCOREP_PROXY_LANES",
                    &value,
                    "a number from 1 to 64",
                    &DEFAULT_PROXY_LANES.to_string(),
                ),
            }
        }
        if let Some(value) = get("NCCL_SCOREP_FLIGHT_RECORDER") {
            match parse_bool(&value) {
                Some(on) => config.flight_recorder = on,
                None => warn(
                    "NCCL_SCOREP_FLIGHT_RECORDER",
                    &value,
                    "0/1, yes/no, on/off",
                    "1",
                ),
            }
        }
        for (name, field, default) in [
            (
                "NCCL_SCOREP_FLIGHT_COMMS",
                &mut config.flight_comms,
                DEFAULT_FLIGHT_COMMS,
            ),
            (
                "NCCL_SCOREP_FLIGHT_OPS",
                &mut config.flight_ops,
                DEFAULT_FLIGHT_OPS,
            ),
        ] {
            if let Some(value) = get(name) {
                match value.parse::<u32>() {
                    Ok(n) if (1..=4096).contains(&n) => *field = n,
                    _ => warn(
                        name,
                        &value,
                        "a number from 1 to 4096",
                        &default.to_string(),
                    ),
                }
            }
        }
        if let Some(value) = get("NCCL_SCOREP_HANG_TIMEOUT") {
            match parse_timeout(&value) {
                Some(timeout) => config.hang_timeout = timeout,
                None => warn(
                    "NCCL_SCOREP_HANG_TIMEOUT",
                    &value,
                    "seconds, or 0 or off",
                    "off",
                ),
            }
        }
        if let Some(value) = get("NCCL_SCOREP_SIGNAL") {
            match parse_signal(&value) {
                Some(signal) => config.report_signal = signal,
                None => warn("NCCL_SCOREP_SIGNAL", &value, "USR1, USR2 or off", "off"),
            }
        }
        if let Some(value) = get("NCCL_SCOREP_SCOREP_PARAMETERS") {
            match parse_scorep_parameters(&value) {
                Some(parameters) => config.scorep_parameters = parameters,
                None => warn(
                    "NCCL_SCOREP_SCOREP_PARAMETERS",
                    &value,
                    "a comma list of bytes and comm, or all or none",
                    "all",
                ),
            }
        }
        if let Some(value) = get("NCCL_SCOREP_SCALASCA_SAFE") {
            match parse_bool(&value) {
                Some(on) => config.scalasca_safe = on,
                None => warn(
                    "NCCL_SCOREP_SCALASCA_SAFE",
                    &value,
                    "0/1, yes/no, on/off",
                    "0",
                ),
            }
        }
        config.scorep_experiment_dir = get("SCOREP_EXPERIMENT_DIRECTORY")
            .filter(|value| !value.is_empty())
            .map(PathBuf::from);
        if config.mode == Mode::Deferred && config.chain.is_some() {
            // The calls only go to the recording during the run.
            warnings.push(ConfigWarning(
                "NCCL_SCOREP_CHAIN is not used with NCCL_SCOREP_MODE=deferred: no plugin is \
                 chained"
                    .into(),
            ));
            config.chain = None;
        }
        if config.record && get("NCCL_SCOREP_MEMORY_LIMIT").is_none() {
            // Record mode gives every thread a second ring, of recorded calls.
            config.memory_limit = 2 * crate::memory::DEFAULT_LIMIT_BYTES;
        }
        (config, warnings)
    }

    /// Where the process writes: the output directory, or in Score-P mode (`scorep`) the
    /// sidecar directory of Score-P's experiment when Score-P names one.
    pub fn run_dir(&self, scorep: bool) -> RunDir {
        match &self.scorep_experiment_dir {
            Some(experiment) if scorep => RunDir::scorep_sidecar(experiment),
            _ => RunDir::new(&self.output_dir),
        }
    }

    /// Whether the JSON-lines log is written.
    pub fn writes_jsonl(&self) -> bool {
        !matches!(self.mode, Mode::Off | Mode::Deferred) && (self.jsonl || self.mode == Mode::Jsonl)
    }

    /// Whether the OTF2 trace is written (in Score-P mode it is the sidecar trace).
    pub fn writes_otf2(&self) -> bool {
        matches!(self.mode, Mode::Auto | Mode::Otf2 | Mode::Scorep)
    }
}

/// A mode, with `record` added to it or alone (`record` alone keeps the default mode):
/// `standalone,record`, `record,jsonl`, `record`. Two modes are an error.
fn parse_modes(value: &str) -> Option<(Mode, bool)> {
    let mut mode = None;
    let mut record = false;
    for word in value.split(',').map(str::trim) {
        if word.eq_ignore_ascii_case("record") {
            record = true;
        } else if mode.replace(parse_mode(word)?).is_some() {
            return None;
        }
    }
    let mode = mode.unwrap_or(Mode::Auto);
    // Deferred mode is record mode without the rest.
    Some((mode, record || mode == Mode::Deferred))
}

fn parse_mode(value: &str) -> Option<Mode> {
    Some(match value.to_ascii_lowercase().as_str() {
        "auto" | "" => Mode::Auto,
        "otf2" | "standalone" => Mode::Otf2,
        "scorep" | "score-p" => Mode::Scorep,
        "jsonl" | "json" => Mode::Jsonl,
        "off" | "none" | "0" => Mode::Off,
        "deferred" => Mode::Deferred,
        _ => return None,
    })
}

fn parse_scorep_parameters(value: &str) -> Option<ScorepParameters> {
    match value.to_ascii_lowercase().as_str() {
        "all" | "on" | "1" | "yes" | "true" => return Some(ScorepParameters::ALL),
        "none" | "off" | "0" | "no" | "false" => return Some(ScorepParameters::NONE),
        _ => {}
    }
    let mut parameters = ScorepParameters::NONE;
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match item.to_ascii_lowercase().as_str() {
            "bytes" => parameters.bytes = true,
            "comm" => parameters.comm = true,
            _ => return None,
        }
    }
    Some(parameters)
}

fn parse_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "1" | "yes" | "on" | "true" => Some(true),
        "0" | "no" | "off" | "false" => Some(false),
        _ => None,
    }
}

/// A comma list of level names (a leading `-` removes a level), or a number. A list that
/// selects nothing is refused (a deliberate `0` is accepted).
fn parse_events(value: &str) -> Result<KindSet, String> {
    if let Some(number) = parse_number(value) {
        return Ok(KindSet::from_bits_truncate(number));
    }
    let mut mask = KindSet::empty();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (remove, name) = match item.strip_prefix('-') {
            Some(name) => (true, name),
            None => (false, item),
        };
        let name = name.to_ascii_lowercase().replace('-', "_");
        let kinds = EVENT_LEVELS
            .iter()
            .find(|(level, _)| *level == name)
            .map(|(_, kinds)| *kinds)
            .ok_or_else(|| format!("unknown level {item:?}"))?;
        if remove {
            mask -= kinds;
        } else {
            mask |= kinds;
        }
    }
    if mask.is_empty() {
        return Err("it selects no event".to_owned());
    }
    Ok(mask)
}

/// Seconds (fractions allowed) or off; `Some(None)` is off.
fn parse_timeout(value: &str) -> Option<Option<std::time::Duration>> {
    if matches!(value.to_ascii_lowercase().as_str(), "off" | "no" | "0") {
        return Some(None);
    }
    let seconds: f64 = value.parse().ok()?;
    (seconds.is_finite() && seconds > 0.0 && seconds < 1e9)
        .then(|| Some(std::time::Duration::from_secs_f64(seconds)))
}

/// USR1 or USR2 (with or without SIG), or off; `Some(None)` is off.
fn parse_signal(value: &str) -> Option<Option<i32>> {
    let upper = value.to_ascii_uppercase();
    match upper.strip_prefix("SIG").unwrap_or(&upper) {
        "OFF" | "NO" | "0" => Some(None),
        "USR1" => Some(Some(libc::SIGUSR1)),
        "USR2" => Some(Some(libc::SIGUSR2)),
        _ => None,
    }
}

fn parse_number(value: &str) -> Option<u64> {
    match value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => value.parse().ok(),
    }
}

fn parse_bytes(value: &str) -> Option<usize> {
    let upper = value.to_ascii_uppercase();
    let trimmed = upper.trim_end_matches('B').trim_end_matches('I');
    let (digits, shift) = match trimmed.chars().last()? {
        'K' => (&trimmed[..trimmed.len() - 1], 10),
        'M' => (&trimmed[..trimmed.len() - 1], 20),
        'G' => (&trimmed[..trimmed.len() - 1], 30),
        _ => (trimmed, 0),
    };
    digits.trim().parse::<usize>().ok()?.checked_mul(1 << shift)
}

fn level_names() -> String {
    EVENT_LEVELS
        .iter()
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(pairs: &[(&str, &str)]) -> (Config, Vec<ConfigWarning>) {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn nothing_set_gives_the_defaults() {
        let (config, warnings) = read(&[]);
        assert_eq!(config, Config::default());
        assert!(warnings.is_empty());
    }

    #[test]
    fn every_variable_is_read() {
        let (config, warnings) = read(&[
            ("NCCL_SCOREP_MODE", "JSONL"),
            ("NCCL_SCOREP_OUTPUT_DIR", "/tmp/x"),
            ("NCCL_SCOREP_EVENTS", "coll, proxy_step,-coll"),
            ("NCCL_SCOREP_BUFFER_SIZE", "64K"),
            ("NCCL_SCOREP_ON_FULL", "wait"),
            ("NCCL_SCOREP_JSONL", "yes"),
            ("NCCL_SCOREP_MAX_OPEN_EVENTS", "4096"),
            ("NCCL_SCOREP_CLOCK", "Monotonic"),
            ("NCCL_SCOREP_AUTO_MERGE", "off"),
            ("NCCL_SCOREP_STEP_STATES", "no"),
            ("NCCL_SCOREP_STEP_DETAIL", "Summary"),
            ("NCCL_SCOREP_PROXY_LANES", "4"),
            ("NCCL_SCOREP_TOOL", "/opt/x/bin/nccl-scorep"),
            ("NCCL_SCOREP_PROFILE", "no"),
            ("SCOREP_EXPERIMENT_DIRECTORY", "/e/scorep-run"),
        ]);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(config.mode, Mode::Jsonl);
        assert_eq!(config.output_dir, PathBuf::from("/tmp/x"));
        assert_eq!(config.event_mask, KindSet::PROXY_STEP);
        assert_eq!(config.buffer_bytes, 64 << 10);
        assert_eq!(config.on_full, OnFull::Wait);
        assert!(config.jsonl);
        assert_eq!(config.max_open_events, 4096);
        assert_eq!(
            config.merge_tool.as_deref(),
            Some(std::path::Path::new("/opt/x/bin/nccl-scorep"))
        );
        assert!(!config.profile);
        assert_eq!(config.run_dir(false).root(), std::path::Path::new("/tmp/x"));
        assert_eq!(
            config.run_dir(true).root(),
            std::path::Path::new("/e/scorep-run/nccl")
        );
        assert_eq!(config.clock, ClockChoice::Monotonic);
        assert!(!config.auto_merge);
        assert!(!config.step_states);
        assert_eq!(config.step_detail, StepDetail::Summary);
        assert_eq!(config.proxy_lanes, 4);
    }

    #[test]
    fn bad_values_warn_once_each_and_keep_the_default() {
        let (config, warnings) = read(&[
            ("NCCL_SCOREP_MODE", "turbo"),
            ("NCCL_SCOREP_EVENTS", "coll,bogus"),
            ("NCCL_SCOREP_BUFFER_SIZE", "12Q"),
            ("NCCL_SCOREP_ON_FULL", "maybe"),
            ("NCCL_SCOREP_JSONL", "2"),
            ("NCCL_SCOREP_MAX_OPEN_EVENTS", "-1"),
            ("NCCL_SCOREP_CLOCK", "sundial"),
            ("NCCL_SCOREP_AUTO_MERGE", "later"),
            ("NCCL_SCOREP_PROXY_LANES", "0"),
            ("NCCL_SCOREP_STEP_DETAIL", "some"),
        ]);
        assert_eq!(config, Config::default());
        assert_eq!(warnings.len(), 10);
        assert!(
            warnings.iter().any(|w| w.0
                == "NCCL_SCOREP_PROXY_LANES=\"0\" is not valid (a number from 1 to 64); \
                    using the default 16"),
            "{warnings:?}"
        );
        assert!(warnings[1].0.contains("\"bogus\""), "{}", warnings[1].0);
        assert!(warnings[0].0.contains("NCCL_SCOREP_MODE"));
    }

    #[test]
    fn hang_settings_are_read_and_bad_ones_give_a_warning_and_the_default() {
        let read = |pairs: &[(&str, &str)]| {
            let map: std::collections::HashMap<String, String> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Config::from_lookup(|name| map.get(name).cloned())
        };
        let (config, warnings) = read(&[
            ("NCCL_SCOREP_HANG_TIMEOUT", "2.5"),
            ("NCCL_SCOREP_SIGNAL", "sigusr2"),
            ("NCCL_SCOREP_FLIGHT_OPS", "8"),
            ("NCCL_SCOREP_FLIGHT_RECORDER", "off"),
        ]);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            config.hang_timeout,
            Some(std::time::Duration::from_millis(2500))
        );
        assert_eq!(config.report_signal, Some(libc::SIGUSR2));
        assert_eq!(config.flight_ops, 8);
        assert!(!config.flight_recorder);
        let (config, warnings) = read(&[
            ("NCCL_SCOREP_HANG_TIMEOUT", "-1"),
            ("NCCL_SCOREP_SIGNAL", "KILL"),
            ("NCCL_SCOREP_FLIGHT_COMMS", "0"),
        ]);
        assert_eq!(config, Config::default());
        let text: Vec<&str> = warnings.iter().map(|w| w.0.as_str()).collect();
        assert_eq!(
            text,
            [
                "NCCL_SCOREP_FLIGHT_COMMS=\"0\" is not valid (a number from 1 to 4096); using the default 16",
                "NCCL_SCOREP_HANG_TIMEOUT=\"-1\" is not valid (seconds, or 0 or off); using the default off",
                "NCCL_SCOREP_SIGNAL=\"KILL\" is not valid (USR1, USR2 or off); using the default off",
            ]
        );
    }

    #[test]
    fn every_variable_read_is_listed_for_the_doctor_and_documented() {
        let asked = std::cell::RefCell::new(Vec::new());
        Config::from_lookup(|name| {
            asked.borrow_mut().push(name.to_owned());
            None
        });
        let mut asked: Vec<String> = asked
            .into_inner()
            .into_iter()
            .filter(|name| name.starts_with("NCCL_SCOREP_"))
            .collect();
        // Read by the job's description (nccl_scorep_common::job), not here.
        asked.push("NCCL_SCOREP_HOSTNAME".to_owned());
        asked.sort();
        let mut listed: Vec<String> = VARIABLES.iter().map(|v| v.name.to_owned()).collect();
        listed.sort();
        assert_eq!(asked, listed);
        let docs = include_str!("../../docs/configuration.md");
        for variable in VARIABLES {
            assert!(
                docs.contains(&format!("| `{}` |", variable.name)),
                "{} is not in docs/configuration.md's table",
                variable.name
            );
        }
    }

    #[test]
    fn record_is_added_to_a_mode_or_stands_alone() {
        let mode = |value: &str| {
            let (config, warnings) = read(&[("NCCL_SCOREP_MODE", value)]);
            (config.mode, config.record, warnings.len())
        };
        assert_eq!(mode("otf2"), (Mode::Otf2, false, 0));
        assert_eq!(mode("standalone,record"), (Mode::Otf2, true, 0));
        assert_eq!(mode(" RECORD , jsonl"), (Mode::Jsonl, true, 0));
        assert_eq!(mode("record"), (Mode::Auto, true, 0));
        assert_eq!(mode("otf2,jsonl"), (Mode::Auto, false, 1));
        assert_eq!(mode("record,bogus"), (Mode::Auto, false, 1));
        assert_eq!(mode("deferred"), (Mode::Deferred, true, 0));
        assert_eq!(mode("Deferred,record"), (Mode::Deferred, true, 0));
        assert_eq!(mode("deferred,otf2"), (Mode::Auto, false, 1));
        let (config, warnings) = read(&[
            ("NCCL_SCOREP_MODE", "deferred"),
            ("NCCL_SCOREP_CHAIN", "other.so"),
        ]);
        assert_eq!(config.chain, None);
        assert!(warnings[0].0.contains("not used"), "{warnings:?}");
    }

    #[test]
    fn the_memory_limit_is_a_size_or_off_and_doubles_for_record_mode() {
        let limit = |vars: &[(&str, &str)]| {
            let (config, warnings) = read(vars);
            (config.memory_limit >> 20, warnings.len())
        };
        assert_eq!(limit(&[]), (64, 0));
        assert_eq!(limit(&[("NCCL_SCOREP_MEMORY_LIMIT", "256M")]), (256, 0));
        assert_eq!(
            limit(&[("NCCL_SCOREP_MEMORY_LIMIT", "off")]),
            (usize::MAX >> 20, 0)
        );
        assert_eq!(limit(&[("NCCL_SCOREP_MEMORY_LIMIT", "1M")]), (64, 1));
        assert_eq!(limit(&[("NCCL_SCOREP_MEMORY_LIMIT", "lots")]), (64, 1));
        assert_eq!(limit(&[("NCCL_SCOREP_MODE", "otf2,record")]), (128, 0));
        assert_eq!(
            limit(&[
                ("NCCL_SCOREP_MODE", "otf2,record"),
                ("NCCL_SCOREP_MEMORY_LIMIT", "32M")
            ]),
            (32, 0)
        );
    }

    #[test]
    fn scorep_parameters_are_a_list_or_all_or_none() {
        let of = |v: &str| read(&[("NCCL_SCOREP_SCOREP_PARAMETERS", v)]);
        assert_eq!(of("none").0.scorep_parameters, ScorepParameters::NONE);
        assert_eq!(of("ALL").0.scorep_parameters, ScorepParameters::ALL);
        assert_eq!(
            of("comm").0.scorep_parameters,
            ScorepParameters {
                bytes: false,
                comm: true
            }
        );
        assert_eq!(
            of(" bytes , comm ").0.scorep_parameters,
            ScorepParameters::ALL
        );
        let (config, warnings) = of("bytes,seq");
        assert_eq!(
            config.scorep_parameters,
            ScorepParameters::ALL,
            "the default"
        );
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].0.contains("NCCL_SCOREP_SCOREP_PARAMETERS"));
    }

    #[test]
    fn event_levels_accept_numbers_and_groups() {
        let bits = |value: &str| parse_events(value).map(|kinds| kinds.bits());
        assert_eq!(bits("0x42"), Ok(0x42));
        assert_eq!(bits("all"), Ok(0xFFFF));
        assert_eq!(
            bits("0x1ffff"),
            Ok(0xFFFF),
            "bits without a kind are dropped"
        );
        assert_eq!(bits("api"), Ok(0x100 | 0x200 | 0x400 | 0x800));
        assert_eq!(bits("default"), Ok(0x0F6F));
        assert_eq!(
            parse_events("default,steps"),
            Ok(DEFAULT_EVENT_MASK | KindSet::PROXY_STEP)
        );
        assert_eq!(bits("coll,-coll"), Err("it selects no event".to_owned()));
    }
}
