//! One run of `python3` that answers every Python question of the doctor.

use std::path::PathBuf;

use super::report::show;
use crate::probe;

#[derive(Debug)]
pub(super) enum PythonStatus {
    Missing,
    Failed(String),
    Ran(PathBuf),
}

/// What one run of `python3` found: NCCL wheels and the `otf2` module.
#[derive(Debug)]
pub(super) struct PythonProbe {
    pub(super) status: PythonStatus,
    /// The `nvidia/nccl` package directories.
    pub(super) nccl_dirs: Vec<PathBuf>,
    /// Installed `nvidia-nccl-*` distributions: (name, version).
    pub(super) nccl_dists: Vec<(String, String)>,
    /// Where `import otf2` found the module, or why it failed.
    pub(super) otf2: Result<String, String>,
}

/// One Python run answers every Python question; it prints `key<TAB>value` lines.
const PYTHON_PROBE: &str = r#"
import importlib.util, sys
def emit(key, value):
    print(key + "\t" + " ".join(str(value).split()))
try:
    spec = importlib.util.find_spec("nvidia.nccl")
    for path in (spec.submodule_search_locations or []) if spec else []:
        emit("nccl_dir", path)
except ModuleNotFoundError:
    pass
except Exception as error:
    emit("note", "nvidia.nccl: %r" % error)
try:
    from importlib import metadata
    for dist in metadata.distributions():
        name = dist.metadata.get("Name") or ""
        if name.lower().replace("_", "-").startswith("nvidia-nccl"):
            emit("nccl_dist", name + " " + dist.version)
except Exception as error:
    emit("note", "metadata: %r" % error)
try:
    import otf2
    emit("otf2", getattr(otf2, "__file__", None) or "built in")
except BaseException as error:
    emit("otf2_error", "%s: %s" % (type(error).__name__, error))
"#;

impl PythonProbe {
    /// Runs the first `python3` on PATH.
    pub(super) fn run() -> PythonProbe {
        PythonProbe::run_with(probe::which("python3"))
    }

    /// Runs `python3` (nothing when it is `None`).
    pub(super) fn run_with(python3: Option<PathBuf>) -> PythonProbe {
        let mut probe = PythonProbe {
            status: PythonStatus::Missing,
            nccl_dirs: Vec::new(),
            nccl_dists: Vec::new(),
            otf2: Err("python3 did not run".to_owned()),
        };
        let Some(python3) = python3 else {
            return probe;
        };
        let output = match probe::run(&python3, &["-c", PYTHON_PROBE], probe::COMMAND_TIMEOUT) {
            Ok(output) if output.success => output,
            Ok(output) => {
                let why = output.first_line().unwrap_or("no message").to_owned();
                probe.status = PythonStatus::Failed(format!("{} failed: {why}", show(&python3)));
                return probe;
            }
            Err(problem) => {
                probe.status = PythonStatus::Failed(problem);
                return probe;
            }
        };
        probe.status = PythonStatus::Ran(python3);
        for line in output.stdout.lines() {
            let Some((key, value)) = line.split_once('\t') else {
                continue;
            };
            match key {
                "nccl_dir" => probe.nccl_dirs.push(PathBuf::from(value)),
                "nccl_dist" => {
                    if let Some((name, version)) = value.split_once(' ') {
                        probe.nccl_dists.push((name.to_owned(), version.to_owned()));
                    }
                }
                "otf2" => probe.otf2 = Ok(value.to_owned()),
                "otf2_error" => probe.otf2 = Err(value.to_owned()),
                _ => {}
            }
        }
        probe
    }
}
