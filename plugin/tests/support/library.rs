//! Where the plugin Cargo built is: shared by the tests and the benchmarks
//! (`plugin/benches/support` includes this file).

use std::path::PathBuf;

/// The cdylib Cargo built next to the running test, example or benchmark.
pub fn built_library() -> PathBuf {
    let exe = std::env::current_exe().expect("executable path");
    // Tests and benchmarks run from target/<profile>/deps, examples from
    // target/<profile>/examples.
    let here = exe.parent().expect("executable directory");
    let profile = here.parent().unwrap_or(here);
    for dir in [
        here.to_path_buf(),
        profile.to_path_buf(),
        profile.join("deps"),
    ] {
        let candidate = dir.join("libnccl_profiler_scorep.so");
        if candidate.exists() {
            return candidate;
        }
    }
    panic!(
        "libnccl_profiler_scorep.so not found next to {}",
        exe.display()
    );
}
