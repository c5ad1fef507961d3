//! The `NCCL_SCOREP::…` trace file properties of an archive, as OTF2's own `otf2-print -I`
//! prints them (a reader nobody here wrote), for tests that check what a trace records.
//! `-I` prints the anchor file only: `-A` would print every event too (seconds for a
//! trace of millions of events).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// `otf2-print -I`'s text, and the `NCCL_SCOREP::` properties in it by their names
/// without the namespace (`CLOCK`, `ENV::NCCL_SCOREP_EVENTS`, …).
pub fn nccl_scorep_properties(anchor: &Path) -> (String, BTreeMap<String, String>) {
    let printed = Command::new("otf2-print")
        .arg("-I")
        .arg(anchor)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&printed.stdout).into_owned();
    let mut properties = BTreeMap::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(name) = line
            .split_whitespace()
            .last()
            .and_then(|word| word.strip_prefix("NCCL_SCOREP::"))
        else {
            continue;
        };
        if let Some(value) = lines
            .peek()
            .and_then(|next| next.strip_prefix("Property value"))
        {
            properties.insert(name.to_owned(), value.trim().to_owned());
            lines.next();
        }
    }
    (text, properties)
}
