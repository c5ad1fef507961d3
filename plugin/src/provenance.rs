//! What a trace part records of how it was made, as OTF2 trace file properties
//! (`NCCL_SCOREP::…`, see `nccl_scorep_common::provenance` and docs/trace-schema.md): the
//! NCCL and plugin versions, the profiler API version NCCL chose, the event mask, the
//! settings and the NCCL variables that change algorithms, the command line, the job, the
//! host and the clock.

use crate::config::Config;
use nccl_scorep_common::provenance::{
    environment_property, property, recorded_environment_of_process,
};

/// The longest command line kept (a launcher may pass thousands of arguments).
const MAX_COMMAND_BYTES: usize = 4096;

/// The NCCL release of this process, from `ncclGetVersion` wherever it is loaded
/// ("2.32.0"), or `None` when no loaded library has it.
pub fn nccl_version() -> Option<String> {
    type GetVersion = unsafe extern "C" fn(*mut libc::c_int) -> libc::c_int;
    // SAFETY: dlsym on the global scope with a NUL-terminated name; no state is changed.
    let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"ncclGetVersion".as_ptr()) };
    if symbol.is_null() {
        return None;
    }
    // SAFETY: `ncclGetVersion(int*)` returns an ncclResult_t; the symbol is NCCL's
    // exported function of that type (or a stand-in with the same signature).
    let get: GetVersion = unsafe { std::mem::transmute::<*mut libc::c_void, GetVersion>(symbol) };
    let mut code: libc::c_int = 0;
    // SAFETY: `code` is a valid, writable int for the call's duration.
    let result = unsafe { get(&mut code) };
    (result == 0 && code > 0).then(|| version_of_code(code))
}

/// NCCL's version code as a release: `major*10000 + minor*100 + patch` since 2.9,
/// `major*1000 + minor*100 + patch` before.
pub fn version_of_code(code: i32) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100)
    }
}

/// This process's command line, its arguments separated by spaces (cut at
/// [`MAX_COMMAND_BYTES`]).
fn command_line() -> String {
    let raw = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let mut text = raw
        .split(|byte| *byte == 0)
        .filter(|arg| !arg.is_empty())
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    if text.len() > MAX_COMMAND_BYTES {
        let mut cut = MAX_COMMAND_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(" …");
    }
    text
}

/// The properties a part knows when it begins.
pub fn part_properties(
    config: &Config,
    host: &str,
    start_realtime_ns: u64,
) -> Vec<(String, String)> {
    let mut properties = vec![
        (
            property("PLUGIN_VERSION"),
            env!("CARGO_PKG_VERSION").to_owned(),
        ),
        (
            property("NCCL_VERSION"),
            nccl_version().unwrap_or_else(|| "unknown".to_owned()),
        ),
        (
            property("EVENT_MASK"),
            format!("{:#x}", config.event_mask.bits()),
        ),
        (property("COMMAND"), command_line()),
        (property("HOST"), host.to_owned()),
        (
            property("CLOCK"),
            match crate::clock::source() {
                crate::clock::Source::Tsc => "tsc",
                crate::clock::Source::Monotonic => "monotonic",
                crate::clock::Source::Offered => "offered",
            }
            .to_owned(),
        ),
        (property("START_REALTIME_NS"), start_realtime_ns.to_string()),
    ];
    if let Ok(job) = nccl_scorep_common::job::Job::detect() {
        properties.push((property("LAUNCHER"), job.launcher.name().to_owned()));
        properties.push((property("JOB_ID"), job.job_id));
        properties.push((property("JOB_SIZE"), job.size.to_string()));
    }
    for (name, value) in recorded_environment_of_process() {
        properties.push((environment_property(&name), value));
    }
    properties
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_codes_of_both_eras_are_read() {
        assert_eq!(version_of_code(23204), "2.32.4");
        assert_eq!(version_of_code(22703), "2.27.3");
        assert_eq!(version_of_code(2804), "2.8.4");
    }

    #[test]
    fn a_part_records_its_settings_and_command() {
        let config = Config::default();
        let properties = part_properties(&config, "node7", 42);
        let get = |name: &str| {
            properties
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("NCCL_SCOREP::HOST"), Some("node7"));
        assert_eq!(get("NCCL_SCOREP::EVENT_MASK"), Some("0xf6f"));
        assert_eq!(get("NCCL_SCOREP::START_REALTIME_NS"), Some("42"));
        assert!(get("NCCL_SCOREP::COMMAND").is_some_and(|c| !c.is_empty()));
        // The test binary exports no ncclGetVersion.
        assert_eq!(get("NCCL_SCOREP::NCCL_VERSION"), Some("unknown"));
    }
}
