//! A job merged without the part of one of its ranks (lost: killed early, a full disk, a
//! damaged part left out): the merged trace keeps NCCL's rank numbering, with an empty
//! location for the missing rank, still validates, and the merge report and `summary`
//! say which rank is missing.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

#[path = "../nccl-sim/tests/otf2_tools/mod.rs"]
mod otf2_tools;
use otf2_tools::{assert_otf2_print_clean, dump};
mod validate_json;
use validate_json::assert_validates;

fn nccl_scorep(args: &[&str], path: &Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .args(args)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "nccl-scorep {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn a_p2p_job_merged_without_one_ranks_part_validates_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // Three processes in a ring of sends and receives; no automatic merge (no tool named).
    let output = Command::new("mpirun")
        .args(["-np", "3", "--oversubscribe", "--bind-to", "none"])
        .args(["-x", "NCCL_SCOREP_OUTPUT_DIR"])
        .arg(nccl_sim::binary_for_tests())
        .args(["run", "--scenario", "p2p", "--iterations", "4"])
        .args(["--speedup", "20", "--plugin"])
        .arg(nccl_sim::our_plugin_for_tests())
        .env("NCCL_SCOREP_OUTPUT_DIR", &out)
        .env("NCCL_SCOREP_TOOL", "/nonexistent/nccl-scorep")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun (Debian package openmpi-bin; scripts/test.sh installs it)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // The part of rank 1 is lost.
    let mut lost = None;
    for part in std::fs::read_dir(out.join("parts")).unwrap() {
        let part = part.unwrap().path();
        let names = Command::new("otf2-print")
            .arg("-G")
            .arg(part.join("traces.otf2"))
            .output()
            .unwrap();
        if String::from_utf8_lossy(&names.stdout).contains("\"p2p rank 1 ops\"") {
            lost = Some(part);
        }
    }
    let lost = lost.expect("a part with rank 1");
    std::fs::remove_dir_all(&lost).unwrap();

    let report = nccl_scorep(&["merge"], &out);
    assert!(report.starts_with("merged 2 parts"), "{report}");
    assert!(report.contains(": 2 ranks (no part has rank [1]); 1 empty location stands for the ranks without a part"), "{report}");
    let anchor = out.join("traces.otf2");
    assert_otf2_print_clean(&anchor);
    // Valid: every rank a record names exists. The warnings are the messages to and from
    // the lost rank, which have no partner in the trace.
    let validation = assert_validates(&anchor, true);
    let warnings: Vec<&str> = validation["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "warning")
        .filter_map(|f| f["message"].as_str())
        .collect();
    assert!(
        warnings.iter().all(|w| w.contains("rank 1: no trace part")),
        "{warnings:#?}"
    );

    // The communicator keeps NCCL's numbering: its rank 1 is the empty location.
    let trace = dump(&anchor);
    let comms: BTreeMap<String, Vec<String>> = trace["comms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let members = c["members"].as_array().unwrap().iter();
            let names = members.map(|m| m.as_str().unwrap().to_owned()).collect();
            (c["name"].as_str().unwrap().to_owned(), names)
        })
        .collect();
    assert_eq!(comms.len(), 1, "{comms:#?}");
    let (name, members) = comms.iter().next().unwrap();
    assert_eq!(
        members,
        &[
            "p2p rank 0 ops".to_owned(),
            format!("{name} rank 1: no trace part"),
            "p2p rank 2 ops".to_owned()
        ]
    );

    let summary = nccl_scorep(&["summary"], &out);
    assert!(summary.starts_with("2 process(es)"), "{summary}");
    assert!(
        summary.contains(&format!(
            "ranks without a trace part (the others' messages to them and from them are \
             unmatched): {name} rank 1\n"
        )),
        "{summary}"
    );
}
