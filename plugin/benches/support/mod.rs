//! What both benchmarks need to load plugins the way NCCL does, and to build the small C
//! libraries they use beside it (`mod support;` in each).

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
use nccl_profiler_abi::v7;
use std::path::{Path, PathBuf};

#[path = "../../tests/support/library.rs"]
mod library;
pub use library::built_library;

pub type Table = v7::ncclProfiler_v7_t;

/// A positive count from the environment (`_` allowed between digits), else `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().replace('_', "").parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

/// `dlopen`s `path` as NCCL opens a profiler, never to be closed (a process that never
/// unloads its profiler).
pub fn open_forever(path: &Path) -> &'static Library {
    // SAFETY: our plugin or a library a benchmark compiled; none has initialisers with
    // preconditions.
    let library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }
        .unwrap_or_else(|e| panic!("dlopen {}: {e}", path.display()));
    Box::leak(Box::new(library))
}

/// The `ncclProfiler_v7` table of the plugin at `path`.
pub fn load_table(path: &Path) -> &'static Table {
    let library = open_forever(path);
    // SAFETY: `ncclProfiler_v7` is a static of type `ncclProfiler_v7_t` in the plugins
    // loaded here, and the library stays loaded for the rest of the process.
    unsafe {
        let symbol = library
            .get::<*const Table>(b"ncclProfiler_v7\0")
            .unwrap_or_else(|e| panic!("ncclProfiler_v7 in {}: {e}", path.display()));
        &**symbol
    }
}

/// Compiles C `source` into the shared object `dir/lib<name>.so` with the system C
/// compiler (`$CC`, else `cc`; the build of `otf2-sys` needs one too). The error says
/// which compiler failed and why.
pub fn compile_shared_object(dir: &Path, name: &str, source: &str) -> Result<PathBuf, String> {
    let source_path = dir.join(format!("{name}.c"));
    let library = dir.join(format!("lib{name}.so"));
    std::fs::write(&source_path, source)
        .map_err(|e| format!("cannot write {}: {e}", source_path.display()))?;
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = std::process::Command::new(&compiler)
        .args(["-O2", "-shared", "-fPIC", "-pthread", "-o"])
        .arg(&library)
        .arg(&source_path)
        .output()
        .map_err(|e| format!("no C compiler ({compiler}: {e})"))?;
    if !out.status.success() {
        return Err(format!(
            "{compiler} failed to build {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(library)
}

/// The CPU's model name, for the report.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The CPUs this process may run on, for the report.
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
