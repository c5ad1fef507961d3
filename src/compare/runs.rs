//! The inputs of `nccl-scorep compare`: each run a trace (run directory or anchor file) or
//! a profile (`.cubex`), compared call by call when both are traces and from sums
//! otherwise; and the difference cube B − A written beside.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use nccl_scorep_cube::Cube;

use super::{compare, compare_profiles, Comparison};
use crate::profile::{self, Profile};

/// One run as given.
enum Run {
    /// A merged trace, read with its operations' samples.
    Trace(Box<Profile>),
    /// A CUBE4 profile.
    Profile(Cube),
}

impl Run {
    fn read(
        path: &Path,
        threads: Option<usize>,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<Run, String> {
        if is_cube(path) {
            let cube = Cube::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let difference = cube
                .dimensions()
                .attributes()
                .iter()
                .any(|(key, _)| key == nccl_scorep_cube::DIFFERENCE_ATTRIBUTE);
            if difference {
                return Err(format!(
                    "{} is the difference of two runs, not a run",
                    path.display()
                ));
            }
            return Ok(Run::Profile(cube));
        }
        let anchor = profile::archive_of(path)?;
        Ok(Run::Trace(Box::new(profile::read_trace(
            &anchor, true, threads, progress,
        )?)))
    }

    /// The run's cube: the profile as read, or built from the trace.
    fn cube(&self) -> Result<Cow<'_, Cube>, String> {
        match self {
            Run::Trace(profile) => profile::to_cube(profile)
                .map(Cow::Owned)
                .map_err(|e| format!("cannot build the profile: {e}")),
            Run::Profile(cube) => Ok(Cow::Borrowed(cube)),
        }
    }
}

/// Whether `path` names a CUBE4 file rather than a trace.
fn is_cube(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "cubex")
}

/// The name a run goes by in the difference cube's file name: a run directory's name, a
/// trace's or profile's directory when the file has the default name, else the file's
/// stem.
fn run_name(path: &Path) -> String {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let default_name = path.is_file() && matches!(stem.as_str(), "traces" | "profile");
    let named = if default_name || stem.is_empty() {
        path.parent()
            .and_then(Path::file_name)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    } else {
        stem
    };
    if named.is_empty() {
        "run".to_owned()
    } else {
        named
    }
}

/// The difference cube's default file: `<A>-vs-<B>.cubex` in the current directory.
pub fn diff_name(a: &Path, b: &Path) -> PathBuf {
    PathBuf::from(format!("{}-vs-{}.cubex", run_name(a), run_name(b)))
}

/// Compares run `a` with run `b`, a trace read by `threads` threads (None: the
/// default); writes B − A to `diff` when given.
pub fn run(
    a: &Path,
    b: &Path,
    threshold: f64,
    diff: Option<&Path>,
    threads: Option<usize>,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Comparison, String> {
    let run_a = Run::read(a, threads, progress)?;
    let run_b = Run::read(b, threads, progress)?;
    let (name_a, name_b) = (a.display().to_string(), b.display().to_string());
    let mut cubes = None;
    let mut comparison = match (&run_a, &run_b) {
        (Run::Trace(pa), Run::Trace(pb)) => {
            compare(&name_a, &pa.samples, &name_b, &pb.samples, threshold)
        }
        _ => {
            let (ca, cb) = (run_a.cube()?, run_b.cube()?);
            let comparison = compare_profiles(&name_a, &ca, &name_b, &cb, threshold)?;
            cubes = Some((ca, cb));
            comparison
        }
    };
    if let Some(target) = diff {
        let (ca, cb) = match cubes {
            Some(cubes) => cubes,
            None => (run_a.cube()?, run_b.cube()?),
        };
        let difference = nccl_scorep_cube::difference(&cb, &ca)
            .map_err(|e| format!("cannot make the difference cube: {e}"))?;
        difference
            .write(target)
            .map_err(|e| format!("cannot write {}: {e}", target.display()))?;
        comparison.difference_cube = Some(target.display().to_string());
    }
    Ok(comparison)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_named_by_their_directory_unless_the_file_says_more() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("before");
        std::fs::create_dir(&run).unwrap();
        std::fs::write(run.join("traces.otf2"), "").unwrap();
        std::fs::write(run.join("profile.cubex"), "").unwrap();
        std::fs::write(dir.path().join("nightly-42.cubex"), "").unwrap();
        assert_eq!(run_name(&run), "before");
        assert_eq!(run_name(&run.join("traces.otf2")), "before");
        assert_eq!(run_name(&run.join("profile.cubex")), "before");
        assert_eq!(run_name(&dir.path().join("nightly-42.cubex")), "nightly-42");
        assert_eq!(
            diff_name(&run, &dir.path().join("nightly-42.cubex")),
            PathBuf::from("before-vs-nightly-42.cubex")
        );
        assert!(is_cube(Path::new("x/profile.cubex")) && !is_cube(&run));
    }
}
