//! `nccl-scorep convert`: the trace of a run recorded with `NCCL_SCOREP_MODE=deferred`,
//! made after the run by replaying its recordings through the plugin.
//!
//! The replay is nccl-sim's: one process per recording (this program again), each calling
//! the plugin as NCCL called it, from as many threads, with the recorded times offered as
//! the plugin's clock; the plugin writes its parts and merges them as in a live run.

use nccl_scorep_common::recording;
use nccl_scorep_common::RunDir;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What went wrong before the replay could start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The path holds nothing to convert: exit status 2.
    #[error("{0}")]
    NothingToConvert(String),
    #[error("{0}")]
    Failed(String),
}

/// The recordings of a run directory, in the order every replay process sees them.
pub fn recordings_of(run_dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let dir = run_dir.join(recording::DIR);
    let entries = std::fs::read_dir(&dir).map_err(|e| {
        Error::NothingToConvert(format!(
            "{}: {e}; a run recorded with NCCL_SCOREP_MODE=deferred has its recordings there",
            dir.display()
        ))
    })?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            name.ends_with(recording::SUFFIX)
                || name.ends_with(&format!("{}.gz", recording::SUFFIX))
        })
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(Error::NothingToConvert(format!(
            "{} holds no recording (*{})",
            dir.display(),
            recording::SUFFIX
        )));
    }
    Ok(found)
}

/// The mode the plugin runs in while it converts: the run's mode without `deferred` and
/// `record` (the conversion must not record again), else the standalone trace.
pub fn converting_mode(run_mode: Option<&str>) -> String {
    let kept: Vec<&str> = run_mode
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|word| {
            !word.is_empty()
                && !word.eq_ignore_ascii_case("deferred")
                && !word.eq_ignore_ascii_case("record")
        })
        .collect();
    if kept.is_empty() {
        "otf2".to_owned()
    } else {
        kept.join(",")
    }
}

/// `nccl-scorep convert RUN_DIR`: exit status 0 with a trace, 2 when there is nothing to
/// convert, 1 when the conversion failed.
pub fn main(run_dir: &Path, plugin: Option<&Path>) -> ExitCode {
    match convert(run_dir, plugin) {
        Ok(code) => code,
        Err(Error::NothingToConvert(error)) => {
            eprintln!("nccl-scorep convert: {error}");
            ExitCode::from(2)
        }
        Err(Error::Failed(error)) => {
            eprintln!("nccl-scorep convert: {error}");
            ExitCode::FAILURE
        }
    }
}

fn convert(run_dir: &Path, plugin: Option<&Path>) -> Result<ExitCode, Error> {
    let recordings = recordings_of(run_dir)?;
    let plugin = crate::launch::find_plugin(plugin).map_err(|e| Error::Failed(e.to_string()))?;
    let replay = nccl_sim::replay::ReplayArgs::converting(recordings.clone(), plugin.into());
    if nccl_sim::replay::is_replay_process() {
        // One of the processes the replay below started: it replays its recording.
        return Ok(nccl_sim::replay::main(replay));
    }
    let target = RunDir::new(run_dir);
    if target.archive().exists() {
        return Err(Error::Failed(format!(
            "{} already has a trace ({}); nothing was converted",
            run_dir.display(),
            target.archive().display()
        )));
    }
    // Read by the plugin when the replay loads it, in this process or the replay's
    // processes; no other thread runs yet.
    let mode = converting_mode(std::env::var("NCCL_SCOREP_MODE").ok().as_deref());
    std::env::set_var("NCCL_SCOREP_MODE", &mode);
    std::env::set_var("NCCL_SCOREP_OUTPUT_DIR", run_dir);
    // The replay calls as fast as the plugin takes the calls: it waits for room rather
    // than losing any. A replay has no hang to report.
    std::env::set_var("NCCL_SCOREP_ON_FULL", "wait");
    std::env::set_var("NCCL_SCOREP_FLIGHT_RECORDER", "0");
    if std::env::var_os("NCCL_SCOREP_TOOL").is_none() {
        // The plugin merges the parts with this tool.
        if let Ok(tool) = std::env::current_exe() {
            std::env::set_var("NCCL_SCOREP_TOOL", tool);
        }
    }
    eprintln!(
        "nccl-scorep convert: replaying {} recording(s) of {} through the plugin \
         (NCCL_SCOREP_MODE={mode})",
        recordings.len(),
        run_dir.display()
    );
    let code = nccl_sim::replay::main(replay);
    if code != ExitCode::SUCCESS {
        return Err(Error::Failed(format!(
            "the replay of {} failed (see above); what it wrote is in {}",
            run_dir.join(recording::DIR).display(),
            run_dir.display()
        )));
    }
    if target.archive().is_file() {
        println!("trace:   {} (Vampir)", target.archive().display());
        if target.profile().is_file() {
            println!("profile: {} (Cube)", target.profile().display());
        }
    } else if mode.split(',').any(|m| m.eq_ignore_ascii_case("jsonl")) {
        println!("event logs: {}", run_dir.display());
    } else {
        return Err(Error::Failed(format!(
            "the replay ended but {} holds no merged trace; `nccl-scorep merge {}` merges \
             the parts it wrote",
            run_dir.display(),
            run_dir.display()
        )));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conversion_keeps_the_run_s_mode_without_deferred_and_record() {
        assert_eq!(converting_mode(None), "otf2");
        assert_eq!(converting_mode(Some("deferred")), "otf2");
        assert_eq!(converting_mode(Some("Deferred,record")), "otf2");
        assert_eq!(converting_mode(Some("jsonl,deferred")), "jsonl");
        assert_eq!(converting_mode(Some("otf2")), "otf2");
    }

    #[test]
    fn a_directory_without_recordings_is_nothing_to_convert() {
        let dir = tempfile::tempdir().unwrap();
        let missing = recordings_of(dir.path()).unwrap_err();
        assert!(matches!(&missing, Error::NothingToConvert(m) if m.contains("deferred")));
        std::fs::create_dir(dir.path().join("recordings")).unwrap();
        std::fs::write(dir.path().join("recordings/notes.txt"), "x").unwrap();
        let empty = recordings_of(dir.path()).unwrap_err();
        assert!(matches!(&empty, Error::NothingToConvert(m) if m.contains("no recording")));
        for name in ["b.2.ncclrec", "a.1.ncclrec.gz"] {
            std::fs::write(dir.path().join("recordings").join(name), "").unwrap();
        }
        let names: Vec<String> = recordings_of(dir.path())
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.1.ncclrec.gz", "b.2.ncclrec"]);
    }
}
