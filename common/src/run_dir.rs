//! The layout of a run directory (`NCCL_SCOREP_OUTPUT_DIR`, `nccl-scorep-out` by default):
//! every file name the plugin, the merge and the command-line tool agree on, in one place.
//!
//! ```text
//! <run dir>/
//!   traces.otf2, traces.def, traces/     the job's merged archive (open it in Vampir)
//!   merge-report.txt                     what the last merge joined and left out
//!   profile.cubex                        the job's CUBE4 profile (Cube, Scalasca)
//!   merge.ledger, merge.lock             how the job's processes agree who merges
//!   nccl-scorep-<host>-<pid>.jsonl       event logs (NCCL_SCOREP_JSONL=1)
//!   parts/<host>.<pid>[.<n>]/            one process's part per init/finalize cycle:
//!     traces.otf2, traces.def, traces/   its archive (complete once traces.otf2 is there)
//!     snapshot/, snapshot.clock          its definitions and clock pairs while it runs
//!     event-files.txt                    its event files' lengths, once it is complete
//!     scorep-clock.json                  Score-P mode: how its clock maps onto Score-P's
//! ```

use std::path::{Path, PathBuf};

/// The anchor file of an OTF2 archive.
pub const ANCHOR_FILE: &str = "traces.otf2";
/// The global definitions of an OTF2 archive.
pub const GLOBAL_DEFINITIONS_FILE: &str = "traces.def";
/// The directory of an OTF2 archive's event and local definition files.
pub const EVENT_FILES_DIR: &str = "traces";
/// The directory of the processes' parts in a run directory.
pub const PARTS_DIR: &str = "parts";
/// The job's CUBE4 profile, beside its merged trace.
pub const PROFILE_FILE: &str = "profile.cubex";
/// The merge's report.
pub const MERGE_REPORT_FILE: &str = "merge-report.txt";
/// The ledger of finished parts and processes.
pub const MERGE_LEDGER_FILE: &str = "merge.ledger";
/// The file the ledger's lock is taken on.
pub const MERGE_LOCK_FILE: &str = "merge.lock";
/// A running part's definitions, an archive without events.
pub const SNAPSHOT_DIR: &str = "snapshot";
/// The snapshot being written, renamed over [`SNAPSHOT_DIR`] when complete.
pub const SNAPSHOT_NEW_DIR: &str = "snapshot.new";
/// The snapshot being replaced, removed once the new one is in place.
pub const SNAPSHOT_OLD_DIR: &str = "snapshot.old";
/// A finished part's list of its event files ([`crate::event_files`]).
pub const EVENT_FILES_LIST: &str = "event-files.txt";
/// A running part's clock pairs.
pub const SNAPSHOT_CLOCK_FILE: &str = "snapshot.clock";
/// Score-P mode: the clock pairs that map a part's time onto Score-P's.
pub const SCOREP_CLOCK_FILE: &str = "scorep-clock.json";
/// Score-P mode: the run directory inside Score-P's experiment directory.
pub const SCOREP_SIDECAR_DIR: &str = "nccl";

/// A run directory: where a job's parts, merged archive and logs live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunDir {
    root: PathBuf,
}

impl RunDir {
    pub fn new(root: impl Into<PathBuf>) -> RunDir {
        RunDir { root: root.into() }
    }

    /// Score-P mode: the sidecar run directory inside Score-P's experiment directory.
    pub fn scorep_sidecar(experiment: &Path) -> RunDir {
        RunDir::new(experiment.join(SCOREP_SIDECAR_DIR))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The merged archive's anchor file, the one to open in Vampir.
    pub fn archive(&self) -> PathBuf {
        self.root.join(ANCHOR_FILE)
    }

    /// The job's CUBE4 profile.
    pub fn profile(&self) -> PathBuf {
        self.root.join(PROFILE_FILE)
    }

    pub fn parts_dir(&self) -> PathBuf {
        self.root.join(PARTS_DIR)
    }

    pub fn part(&self, name: &str) -> PartDir {
        PartDir::new(self.parts_dir().join(name))
    }

    /// Where a process's next part goes: `parts/<host>.<pid>`, or `<host>.<pid>.<n>` with
    /// the first `n` not taken when that part exists (a second init/finalize cycle).
    pub fn new_part(&self, host: &str, pid: i32) -> PartDir {
        let base = format!("{host}.{pid}");
        let mut candidate = self.part(&base);
        let mut n = 0;
        while candidate.has_content() {
            n += 1;
            candidate = self.part(&format!("{base}.{n}"));
        }
        candidate
    }

    /// The part directories under `parts/`, in natural name order (`host.pid` before
    /// `host.pid.1`, `host.99` before `host.100`).
    pub fn parts(&self) -> std::io::Result<Vec<PartDir>> {
        let mut dirs: Vec<PartDir> = std::fs::read_dir(self.parts_dir())?
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| PartDir::new(e.path()))
            .collect();
        dirs.sort_by_cached_key(|part| natural_key(part.name()));
        Ok(dirs)
    }

    pub fn merge_report(&self) -> PathBuf {
        self.root.join(MERGE_REPORT_FILE)
    }

    pub fn merge_ledger(&self) -> PathBuf {
        self.root.join(MERGE_LEDGER_FILE)
    }

    pub fn merge_lock(&self) -> PathBuf {
        self.root.join(MERGE_LOCK_FILE)
    }

    /// A process's JSON-lines event log.
    pub fn event_log(&self, host: &str, pid: i32) -> PathBuf {
        self.root.join(format!("nccl-scorep-{host}-{pid}.jsonl"))
    }

    /// Whether `name` is the file name of an event log.
    pub fn is_event_log(name: &str) -> bool {
        name.starts_with("nccl-scorep-") && name.ends_with(".jsonl")
    }
}

/// One process's part of the trace: `<run dir>/parts/<host>.<pid>[.<n>]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartDir {
    dir: PathBuf,
}

impl PartDir {
    pub fn new(dir: impl Into<PathBuf>) -> PartDir {
        PartDir { dir: dir.into() }
    }

    /// The part of an anchor file `<part>/traces.otf2`.
    pub fn of_anchor(anchor: &Path) -> Option<PartDir> {
        anchor.parent().map(PartDir::new)
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The directory's name, `<host>.<pid>[.<n>]`.
    pub fn name(&self) -> &str {
        self.dir
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default()
    }

    /// The host of a part named `<host>.<pid>[.<n>]`.
    pub fn host(&self) -> &str {
        host_of_part(self.name())
    }

    /// The anchor file, present once the part is complete.
    pub fn anchor(&self) -> PathBuf {
        self.dir.join(ANCHOR_FILE)
    }

    pub fn global_definitions(&self) -> PathBuf {
        self.dir.join(GLOBAL_DEFINITIONS_FILE)
    }

    pub fn event_files_dir(&self) -> PathBuf {
        self.dir.join(EVENT_FILES_DIR)
    }

    /// A location's event file.
    pub fn event_file(&self, location: u64) -> PathBuf {
        self.event_files_dir().join(format!("{location}.evt"))
    }

    pub fn snapshot_dir(&self) -> PathBuf {
        self.dir.join(SNAPSHOT_DIR)
    }

    pub fn snapshot_clock(&self) -> PathBuf {
        self.dir.join(SNAPSHOT_CLOCK_FILE)
    }

    pub fn scorep_clock(&self) -> PathBuf {
        self.dir.join(SCOREP_CLOCK_FILE)
    }

    /// Whether a trace was (or is being) written here.
    pub fn has_content(&self) -> bool {
        self.event_files_dir().exists() || self.anchor().exists()
    }
}

/// The host of a part named `<host>.<pid>[.<n>]` (a host name may contain dots).
pub fn host_of_part(part: &str) -> &str {
    let mut host = part;
    for _ in 0..2 {
        match host.rsplit_once('.') {
            Some((rest, tail)) if !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) => {
                host = rest
            }
            _ => break,
        }
    }
    host
}

/// Sorts `host.99` before `host.100`: numbers compare as numbers.
fn natural_key(name: &str) -> Vec<(String, u64)> {
    name.split('.')
        .map(|piece| match piece.parse::<u64>() {
            Ok(n) => (String::new(), n),
            Err(_) => (piece.to_owned(), 0),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_is_spelled_once() {
        let run = RunDir::new("/r");
        assert_eq!(run.archive(), Path::new("/r/traces.otf2"));
        assert_eq!(run.merge_ledger(), Path::new("/r/merge.ledger"));
        assert_eq!(run.merge_lock(), Path::new("/r/merge.lock"));
        assert_eq!(run.merge_report(), Path::new("/r/merge-report.txt"));
        assert_eq!(run.profile(), Path::new("/r/profile.cubex"));
        assert_eq!(run.event_log("h", 7), Path::new("/r/nccl-scorep-h-7.jsonl"));
        assert!(RunDir::is_event_log("nccl-scorep-h-7.jsonl"));
        let part = run.part("node.1.42");
        assert_eq!(part.path(), Path::new("/r/parts/node.1.42"));
        assert_eq!(part.anchor(), Path::new("/r/parts/node.1.42/traces.otf2"));
        assert_eq!(
            part.event_file(3),
            Path::new("/r/parts/node.1.42/traces/3.evt")
        );
        assert_eq!(
            part.snapshot_dir(),
            Path::new("/r/parts/node.1.42/snapshot")
        );
        assert_eq!(
            part.snapshot_clock(),
            Path::new("/r/parts/node.1.42/snapshot.clock")
        );
        assert_eq!(
            RunDir::scorep_sidecar(Path::new("/e")).root(),
            Path::new("/e/nccl")
        );
    }

    #[test]
    fn a_part_name_gives_its_host() {
        assert_eq!(host_of_part("node-1.42"), "node-1");
        assert_eq!(host_of_part("node-1.42.3"), "node-1");
        assert_eq!(host_of_part("gpu.example.org.42.3"), "gpu.example.org");
        assert_eq!(host_of_part("n7.100"), "n7");
        assert_eq!(host_of_part("plain"), "plain");
        assert_eq!(PartDir::new("/r/parts/h.5.1").host(), "h");
    }

    #[test]
    fn a_second_cycle_gets_the_next_free_part_and_parts_sort_naturally() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        let first = run.new_part("h", 99);
        assert_eq!(first.name(), "h.99");
        std::fs::create_dir_all(first.event_files_dir()).unwrap();
        let second = run.new_part("h", 99);
        assert_eq!(second.name(), "h.99.1");
        std::fs::create_dir_all(second.path()).unwrap();
        std::fs::create_dir_all(run.part("h.100").path()).unwrap();
        let names: Vec<String> = run
            .parts()
            .unwrap()
            .iter()
            .map(|p| p.name().to_owned())
            .collect();
        assert_eq!(names, ["h.99", "h.99.1", "h.100"]);
    }
}
