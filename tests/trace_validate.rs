//! `nccl-scorep validate` on the traces our plugin writes for every nccl-sim scenario:
//! no error and no warning.

use nccl_sim::nccl::{Nccl, SimConfig};
use nccl_sim::profiler::Profiler;
use nccl_sim::scenario::{self, Params};
use std::process::Command;
use std::sync::Arc;

mod validate_json;
use validate_json::assert_validates;

#[test]
fn every_scenario_gives_a_trace_that_validates_without_findings() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    std::env::set_var("NCCL_SCOREP_OUTPUT_DIR", &out);
    std::env::set_var("NCCL_SCOREP_EVENTS", "all");
    for (name, _) in scenario::SCENARIOS {
        // A fresh copy of the library per scenario: fresh statics, as in a new process.
        let lib = dir
            .path()
            .join(format!("libnccl-profiler-scorep-{name}.so"));
        std::fs::copy(nccl_sim::our_plugin_for_tests(), &lib).unwrap();
        let profiler = Arc::new(Profiler::new("2.32".parse().unwrap(), Some(lib.into())));
        let mut config = SimConfig::default();
        config.time.speedup = 20.0;
        let config = scenario::config_for(name, &config);
        let nccl = Nccl::new(profiler, config);
        assert!(scenario::run(name, &nccl, &Params::single_process(4, 3)));
    }
    let mut checked = 0;
    for part in std::fs::read_dir(out.join("parts")).unwrap() {
        assert_validates(&part.unwrap().path(), false);
        checked += 1;
    }
    assert!(
        checked >= scenario::SCENARIOS.len(),
        "one part per scenario at least"
    );
}

#[test]
fn releases_that_give_no_communicator_identity_still_give_valid_traces_with_sends() {
    // NCCL 2.23–2.26 call profiler API v1–v3, whose init names no communicator; 2.26 also
    // leaves the tasks' commHash 0, so a send's peer is a rank of an unknown communicator.
    for release in ["2.23", "2.24", "2.26"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        std::env::set_var("NCCL_SCOREP_OUTPUT_DIR", &out);
        std::env::set_var("NCCL_SCOREP_EVENTS", "all");
        for name in ["p2p", "group"] {
            let lib = dir
                .path()
                .join(format!("libnccl-profiler-scorep-{name}.so"));
            std::fs::copy(nccl_sim::our_plugin_for_tests(), &lib).unwrap();
            let profiler = Arc::new(Profiler::new(release.parse().unwrap(), Some(lib.into())));
            let mut config = SimConfig::default();
            config.time.speedup = 20.0;
            let config = scenario::config_for(name, &config);
            let nccl = Nccl::new(profiler, config);
            assert!(scenario::run(name, &nccl, &Params::single_process(2, 2)));
        }
        for part in std::fs::read_dir(out.join("parts")).unwrap() {
            let part = part.unwrap().path();
            assert_validates(&part, false);
            let locations = Command::new("otf2-print")
                .arg("-G")
                .arg(part.join("traces.otf2"))
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&locations.stdout);
            assert!(text.contains(" ops\""), "{release}: {text}");
            assert!(!text.contains("rank -1"), "{release}: {text}");
        }
    }
}
