//! `scorep-clock.json`: how the sidecar trace's time maps onto Score-P's clock.
//!
//! Written next to a part's `traces.otf2` when the part is finished; `nccl-scorep merge
//! --scorep` reads it. The format (version 1) is a contract:
//!
//! ```json
//! {"format": 1, "pid": 1234, "launcher_rank": 0, "hostname": "node1",
//!  "source": "metric-plugin",
//!  "pairs": [{"ns": 123, "scorep": 456}],
//!  "sync_region": "NCCL clock sync", "sync_ns": [111, 222]}
//! ```
//!
//! - `ns`: the part's timestamps (CLOCK_MONOTONIC nanoseconds); `scorep`: Score-P's clock
//!   (raw ticks, as in Score-P's own event records for this process) at the same instant.
//! - `source`: `metric-plugin` (Score-P handed its clock over; pairs read both clocks),
//!   `clock_gettime` (`SCOREP_TIMER=clock_gettime`: pairs of CLOCK_MONOTONIC and
//!   CLOCK_MONOTONIC_RAW nanoseconds), or `sync-regions` (no pairs: the merge finds the
//!   Enter of each "NCCL clock sync" region in Score-P's trace and pairs it with
//!   `sync_ns`, in order).
//! - `pairs`: with the first two sources, at least one pair at the start and one at the
//!   end; empty with `sync-regions`.
//! - `sync_ns`: our time at the Enter of each "NCCL clock sync" region this process made,
//!   in order (filled with every source).

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file name, next to the part's `traces.otf2`.
pub const FILE_NAME: &str = "scorep-clock.json";
/// The name of the regions that mark sync points in Score-P's trace.
pub const SYNC_REGION: &str = "NCCL clock sync";
pub const FORMAT: u32 = 1;

/// Where the pairs come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClockSource {
    #[serde(rename = "metric-plugin")]
    MetricPlugin,
    #[serde(rename = "clock_gettime")]
    ClockGettime,
    #[serde(rename = "sync-regions")]
    SyncRegions,
}

/// One instant on both clocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockPair {
    pub ns: u64,
    pub scorep: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockFile {
    pub format: u32,
    pub pid: i32,
    pub launcher_rank: Option<u32>,
    pub hostname: String,
    pub source: ClockSource,
    pub pairs: Vec<ClockPair>,
    pub sync_region: String,
    pub sync_ns: Vec<u64>,
}

impl ClockFile {
    /// Writes `dir/scorep-clock.json` atomically (a temporary file renamed over it), so a
    /// reader never sees half a file.
    pub fn write_to(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let path = dir.join(FILE_NAME);
        let temporary = dir.join(format!(".{FILE_NAME}.{}.tmp", self.pid));
        let text = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(&text)?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temporary, &path)?;
        Ok(path)
    }

    /// Reads a clock file (for tests and tools).
    pub fn read_from(path: &Path) -> std::io::Result<ClockFile> {
        let text = std::fs::read(path)?;
        serde_json::from_slice(&text).map_err(std::io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_has_the_agreed_fields_and_spelling() {
        let dir = tempfile::tempdir().unwrap();
        let file = ClockFile {
            format: FORMAT,
            pid: 1234,
            launcher_rank: None,
            hostname: "node1".into(),
            source: ClockSource::MetricPlugin,
            pairs: vec![ClockPair {
                ns: 123,
                scorep: 456,
            }],
            sync_region: SYNC_REGION.into(),
            sync_ns: vec![111, 222],
        };
        let path = file.write_to(dir.path()).unwrap();
        let value: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(value["format"], 1);
        assert_eq!(value["pid"], 1234);
        assert!(value["launcher_rank"].is_null());
        assert_eq!(value["hostname"], "node1");
        assert_eq!(value["source"], "metric-plugin");
        assert_eq!(value["pairs"][0]["ns"], 123);
        assert_eq!(value["pairs"][0]["scorep"], 456);
        assert_eq!(value["sync_region"], "NCCL clock sync");
        assert_eq!(value["sync_ns"], serde_json::json!([111, 222]));
        assert_eq!(ClockFile::read_from(&path).unwrap(), file);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from(FILE_NAME)],
            "no temporary left"
        );
        for (source, text) in [
            (ClockSource::ClockGettime, "\"clock_gettime\""),
            (ClockSource::SyncRegions, "\"sync-regions\""),
        ] {
            assert_eq!(serde_json::to_string(&source).unwrap(), text);
        }
    }
}
