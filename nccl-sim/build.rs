use std::path::PathBuf;
use std::process::Command;

fn main() {
    // A plugin finds NCCL's version with dlsym(RTLD_DEFAULT, "ncclGetVersion"): the binary
    // exports the stand-in's, as libnccl does.
    println!("cargo:rustc-link-arg-bin=nccl-sim=-Wl,--export-dynamic-symbol=ncclGetVersion");
    // The process offers its clock as its host gives it (recorded times under `replay`, a
    // simulated host clock under `run --host-clock-*`) the same way.
    println!("cargo:rustc-link-arg-bin=nccl-sim=-Wl,--export-dynamic-symbol=nccl_sim_clock");
    println!("cargo:rerun-if-changed=csrc/logger.c");
    cc::Build::new()
        .file("csrc/logger.c")
        .warnings(true)
        .compile("nccl_sim_logger");
    empty_plugin();
    // The recording test plugin: every version, and one whose newest is v6 (a plugin
    // older than the NCCL that loads it).
    test_plugin(
        "recording_profiler.c",
        "libnccl-profiler-recording.so",
        &[],
        "NCCL_SIM_RECORDING_PLUGIN",
    );
    test_plugin(
        "recording_profiler.c",
        "libnccl-profiler-recording6.so",
        &["-DRECORDING_NEWEST=6"],
        "NCCL_SIM_RECORDING_PLUGIN_V6",
    );
}

/// The in-tree empty profiler plugin (`nccl-sim bench`'s floor): a shared object of its
/// own, always optimised, like a plugin one would measure.
fn empty_plugin() {
    test_plugin(
        "empty_profiler.c",
        "libnccl-profiler-empty.so",
        &[],
        "NCCL_SIM_EMPTY_PLUGIN",
    );
}

/// Builds `csrc/<source>` into the shared object `library` and passes its path to the
/// crate in the variable `env`. `cc` only builds static archives, so its compiler is
/// invoked here directly, with the flags `cc` picked for the target.
fn test_plugin(source: &str, library: &str, defines: &[&str], env: &str) {
    println!("cargo:rerun-if-changed=csrc/{source}");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set by Cargo"));
    let library = out_dir.join(library);
    let compiler = cc::Build::new()
        .opt_level(2)
        .pic(true)
        .warnings(true)
        .get_compiler();
    let mut command: Command = compiler.to_command();
    command
        .args(["-shared", "-fPIC", "-pthread"])
        .args(defines)
        .arg("-o")
        .arg(&library)
        .arg(format!("csrc/{source}"));
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler for {source} ({command:?}): {e}"));
    assert!(
        status.success(),
        "building {source} failed ({command:?}): {status}"
    );
    println!("cargo:rustc-env={env}={}", library.display());
}
