//! The built plugin exports the NCCL profiler tables and nothing of the OTF2 library it
//! carries (linked statically, so that a Score-P-measured process with its own OTF2 can
//! never bind to ours, nor ours to its: see otf2-sys's README).

mod support;

use std::process::Command;

fn tool(program: &str, args: &[&str]) -> String {
    let library = support::built_library();
    let output = Command::new(program)
        .args(args)
        .arg(&library)
        .output()
        .unwrap_or_else(|e| panic!("{program} (binutils) must be installed: {e}"));
    assert!(
        output.status.success(),
        "{program} failed on {}",
        library.display()
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn only_the_profiler_tables_are_exported_and_no_otf2_symbol() {
    let symbols = tool("nm", &["-D", "--defined-only"]);
    let names: Vec<&str> = symbols
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2))
        .collect();
    for version in 1..=7 {
        let table = format!("ncclProfiler_v{version}");
        assert!(
            names.contains(&table.as_str()),
            "{table} is not exported: {names:?}"
        );
    }
    let otf2: Vec<&&str> = names
        .iter()
        .filter(|n| n.to_ascii_lowercase().starts_with("otf2_"))
        .collect();
    assert!(otf2.is_empty(), "OTF2 symbols exported: {otf2:?}");
    // Nor does the plugin need a shared OTF2 at run time.
    let dynamic = tool("readelf", &["-d"]);
    let needed: Vec<&str> = dynamic.lines().filter(|l| l.contains("(NEEDED)")).collect();
    assert!(
        !needed
            .iter()
            .any(|l| l.contains("otf2") || l.contains("open-trace-format")),
        "{needed:?}"
    );
    // ... and it really carries OTF2 (as local symbols).
    let all = tool("nm", &["--defined-only"]);
    assert!(all.contains("OTF2_Archive_Open"), "OTF2 is not linked in");
}
