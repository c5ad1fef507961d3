//! nccl-sim: a CPU-only stand-in for NCCL that loads profiler plugins the way NCCL does and
//! calls them in NCCL's own order, thread by thread, for every release from 2.23 to 2.32.
//!
//! - [`release`]: what differs between NCCL releases;
//! - [`profiler`]: loading (by NCCL's rules in `nccl_profiler_abi::loader`, which
//!   `nccl-scorep doctor` shares), reference counting, the activation mask, and the version
//!   adapters that imitate NCCL's in-core shims;
//! - [`event`], [`names`]: events as NCCL's core describes them;
//! - [`logger`]: the C-variadic logger plugins receive;
//! - [`bugs`]: NCCL's known profiler bugs, injected on request;
//! - [`replay`]: drives a plugin with a recording of real calls (`nccl-sim replay`).

pub mod bench;
pub mod bugs;
pub mod event;
pub mod host_clock;
pub mod job;
pub mod logger;
pub mod names;
pub mod nccl;
pub mod profiler;
pub mod pxn;
pub mod release;
pub mod rendezvous;
pub mod replay;
pub mod scenario;
pub mod time;

/// A file built beside the running test executable (in its own directory, the profile's
/// `deps/`, or the profile directory), for tests of this workspace. `deps/` comes before the
/// profile directory: Cargo rebuilds the libraries there for every test build, while a
/// library in the profile directory is only as new as the last `cargo build`. Tests that
/// need the tool the plugin runs at the end of a job name it with `NCCL_SCOREP_TOOL`.
fn built_for_tests(file: &str, what: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the running executable's path");
    let here = exe.parent().expect("a directory");
    let profile = here.parent().unwrap_or(here);
    [
        here.to_path_buf(),
        profile.join("deps"),
        profile.to_path_buf(),
    ]
    .into_iter()
    .map(|dir| dir.join(file))
    .find(|path| path.exists())
    .unwrap_or_else(|| {
        panic!(
            "{file} not found near {}: build it first (cargo build -p {what})",
            exe.display()
        )
    })
}

/// The recording test plugin (`csrc/recording_profiler.c`, built by `build.rs`): writes
/// every call it gets to `$RECORDING_PROFILER_FILE.<pid>`; exports API v1 … v7.
pub fn recording_plugin_path() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("NCCL_SIM_RECORDING_PLUGIN"))
}

/// The recording test plugin built to export API v1 … v6 only.
pub fn recording_plugin_v6_path() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("NCCL_SIM_RECORDING_PLUGIN_V6"))
}

/// Our profiler plugin as Cargo built it for the running test, benchmark or example
/// (`target/<profile>/{deps,examples}/…`): in the executable's directory, the parent's
/// `deps`, or the parent. Panics with what to build when it is not there.
pub fn our_plugin_for_tests() -> std::path::PathBuf {
    built_for_tests("libnccl_profiler_scorep.so", "nccl-profiler-scorep")
}

/// The CPU-only `libnccl.so` (`nccl-sim/libnccl`) as Cargo built it for the running test.
pub fn libnccl_for_tests() -> std::path::PathBuf {
    built_for_tests("libnccl.so", "nccl-sim-libnccl")
}

/// The `nccl-sim` binary beside the running test executable (`cargo test --workspace`
/// builds it), for tests of other packages that run jobs with it.
pub fn binary_for_tests() -> std::path::PathBuf {
    built_for_tests("nccl-sim", "nccl-sim")
}

/// `nccl-sim run` with our plugin, its trace going to `out` (`NCCL_SCOREP_OUTPUT_DIR`):
/// how tests of other packages start a job. They add the scenarios and settings, and
/// `NCCL_SCOREP_TOOL` where the job merges its trace at its end.
pub fn job_for_tests(out: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut command = std::process::Command::new(binary_for_tests());
    command
        .arg("run")
        .arg("--plugin")
        .arg(our_plugin_for_tests())
        .env("NCCL_SCOREP_OUTPUT_DIR", out);
    command
}
