//! The real OTF2 tools as test oracles: `otf2-print` (package otf2-tools) and the `otf2`
//! Python reader (package python3-otf2, through `scripts/otf2-dump.py`). Shared by the
//! tests of nccl-sim and of the root package (included there by path).

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// `otf2-print -Werror --silent` accepts the archive and OTF2 printed no complaint.
pub fn assert_otf2_print_clean(anchor: &Path) {
    let output = Command::new("otf2-print")
        .args(["-Werror", "--silent"])
        .arg(anchor)
        .output()
        .expect("otf2-print (Debian package otf2-tools) must be installed");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && !stderr.contains("[OTF2]"),
        "otf2-print -Werror rejected {}: {stderr}",
        anchor.display()
    );
}

/// The archive as the `otf2` Python reader sees it (see scripts/otf2-dump.py).
pub fn dump(anchor: &Path) -> Value {
    // The including package is the workspace root or one of its members.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = [manifest, manifest.parent().unwrap_or(manifest)]
        .iter()
        .map(|dir| dir.join("scripts/otf2-dump.py"))
        .find(|path| path.exists())
        .expect("scripts/otf2-dump.py in the workspace");
    let output = Command::new("/usr/bin/python3")
        .arg(script)
        .arg(anchor)
        .output()
        .expect("/usr/bin/python3 with the otf2 module (Debian package python3-otf2)");
    assert!(
        output.status.success(),
        "the otf2 Python reader failed on {}: {}",
        anchor.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let value: Value = serde_json::from_slice(&output.stdout).unwrap();
    let problems = value["problems"].as_array().unwrap();
    assert!(
        problems.is_empty(),
        "the trace does not nest: {problems:#?}"
    );
    value
}
