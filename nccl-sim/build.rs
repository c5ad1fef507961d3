use std::path::PathBuf;
use std::process::Command;

fn main() {
    // A plugin finds NCCL's version with dlsym(RTLD_DEFAULT, "ncclGetVersion"): the binary
    // exports the stand-in's, as libnccl does.
    println!("cargo:rustc-link-arg-bin=nccl-sim=-Wl,--export-dynamic-symbol=ncclGetVersion");
    println!("cargo:rerun-if-changed=csrc/logger.c");
    cc::Build::new()
        .file("csrc/logger.c")
        .warnings(true)
        .compile("nccl_sim_logger");
    empty_plugin();
}

/// The in-tree empty profiler plugin (`nccl-sim bench`'s floor): a shared object of its
/// own. `cc` only builds static archives, so its compiler is invoked here directly, with
/// the flags `cc` picked for the target; always optimised, like a plugin one would measure.
fn empty_plugin() {
    println!("cargo:rerun-if-changed=csrc/empty_profiler.c");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set by Cargo"));
    let library = out_dir.join("libnccl-profiler-empty.so");
    let compiler = cc::Build::new()
        .opt_level(2)
        .pic(true)
        .warnings(true)
        .get_compiler();
    let mut command: Command = compiler.to_command();
    command
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg("csrc/empty_profiler.c");
    let status = command.status().unwrap_or_else(|e| {
        panic!("cannot run the C compiler for the empty plugin ({command:?}): {e}")
    });
    assert!(
        status.success(),
        "building the empty profiler plugin failed ({command:?}): {status}"
    );
    println!(
        "cargo:rustc-env=NCCL_SIM_EMPTY_PLUGIN={}",
        library.display()
    );
}
