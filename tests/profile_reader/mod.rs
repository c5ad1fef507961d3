//! Readers of our CUBE4 files that nobody here wrote, for the tests: pycubexr (through
//! `dump_profile.py`) and, where they are on PATH, CubeLib's command-line tools.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The profile as pycubexr reads it (`tests/profile_reader/dump_profile.py`).
pub fn read_with_pycubexr(profile: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/profile_reader/dump_profile.py");
    let output = Command::new("python3")
        .arg(script)
        .arg(profile)
        .output()
        .expect("python3");
    assert!(
        output.status.success(),
        "pycubexr could not read {} (scripts/test.sh installs pycubexr): {}",
        profile.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// CubeLib's tools the tests run.
const CUBE_TOOLS: [&str; 5] = [
    "cube_info",
    "cube_dump",
    "cube_stat",
    "cube_calltree",
    "cube_diff",
];

/// Whether CubeLib's tools are on PATH; says it skips them if not. When they are,
/// `cube_info` and `cube_stat` must accept `cubex`, and `cube_calltree` must show its root
/// call path, `NCCL`.
pub fn cube_tools_accept(cubex: &Path) -> bool {
    let on_path = |name: &str| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
    };
    if !CUBE_TOOLS.iter().all(|tool| on_path(tool)) {
        eprintln!(
            "skipped: CubeLib's tools ({}) are not on PATH",
            CUBE_TOOLS.join(", ")
        );
        return false;
    }
    for tool in ["cube_info", "cube_stat", "cube_calltree"] {
        let output = Command::new(tool).arg(cubex).output().unwrap();
        assert!(
            output.status.success(),
            "{tool}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        if tool == "cube_calltree" {
            let text = String::from_utf8_lossy(&output.stdout);
            assert!(text.lines().any(|l| l.trim() == "NCCL"), "{text}");
        }
    }
    true
}

/// `cube_dump`'s values of `metrics` (comma-separated) at the root call path, inclusive,
/// per location: location number → the values in the order `cube_dump` prints them.
pub fn cube_dump_at_root(cubex: &Path, metrics: &str) -> BTreeMap<usize, Vec<f64>> {
    let dump = Command::new("cube_dump")
        .args(["-m", metrics, "-z", "incl", "-c", "0", "-s", "csv2"])
        .arg(cubex)
        .output()
        .unwrap();
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let text = String::from_utf8_lossy(&dump.stdout);
    let mut by_location = BTreeMap::new();
    for line in text.lines().skip(1) {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if let [_, location, values @ ..] = &fields[..] {
            let values = values.iter().map(|v| v.parse().unwrap()).collect();
            by_location.insert(location.parse().unwrap(), values);
        }
    }
    by_location
}

/// pycubexr's values of `metric` summed over the call paths, per location (column).
pub fn per_column(profile: &Value, metric: &str) -> Vec<f64> {
    let mut sums = vec![0.0; profile["locations"].as_array().unwrap().len()];
    for row in profile["values"][metric].as_array().unwrap() {
        sums[row[1].as_u64().unwrap() as usize] += row[2].as_f64().unwrap();
    }
    sums
}
