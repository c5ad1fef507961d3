//! One communicator id that `init` describes in two ways (other names and rank counts,
//! the same rank twice): the first description keeps the communicator, the other context
//! gets a communicator of its own, and the merged trace validates.

mod support;

#[path = "../../nccl-sim/tests/otf2_tools/mod.rs"]
mod otf2_tools;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::*;

/// The `nccl-scorep` tool Cargo built beside this test (`target/<profile>/`), if any.
fn tool_beside_this_test() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let tool = exe.parent()?.parent()?.join("nccl-scorep");
    tool.is_file().then_some(tool)
}

/// A send to `peer` and a Broadcast rooted at `root` on `ctx`, as NCCL issues them.
fn send_and_broadcast(plugin: &Plugin, ctx: Ctx, rank: i32, peer: i32, root: i32) {
    let api = plugin.start7(
        ctx,
        &mut p2p_api7(Handle::NULL, c"Send", 256, c"ncclFloat32"),
    );
    let send = plugin.start7(ctx, &mut p2p7(api, Handle::NULL, rank, c"Send", 256, peer));
    plugin.stop7(send);
    plugin.stop7(api);
    let api = plugin.start7(
        ctx,
        &mut coll_api7(Handle::NULL, c"Broadcast", 256, c"ncclFloat32"),
    );
    let mut descr = coll7(
        api,
        Handle::NULL,
        rank,
        0,
        c"Broadcast",
        256,
        c"ncclFloat32",
        1,
    );
    descr.u.coll.root = root;
    let coll = plugin.start7(ctx, &mut descr);
    plugin.stop7(coll);
    plugin.stop7(api);
}

/// Merges the run in `out` with `tool`, checks the archive with `otf2-print` and
/// `nccl-scorep validate`, and returns the merge's report.
fn merged_and_valid(tool: &Path, out: &Path) -> String {
    let merge = Command::new(tool).arg("merge").arg(out).output().unwrap();
    let report = String::from_utf8_lossy(&merge.stdout).into_owned();
    assert!(merge.status.success(), "{report}");
    otf2_tools::assert_otf2_print_clean(&out.join("traces.otf2"));
    let validate = Command::new(tool)
        .arg("validate")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        validate.status.success(),
        "{}",
        String::from_utf8_lossy(&validate.stdout)
    );
    report
}

/// The merged trace's communicators: name and member locations, in definition order.
fn communicators(out: &Path) -> Vec<(String, Vec<String>)> {
    let trace = otf2_tools::dump(&out.join("traces.otf2"));
    trace["comms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let members = c["members"].as_array().unwrap().iter();
            let names = members.map(|m| m.as_str().unwrap().to_owned()).collect();
            (c["name"].as_str().unwrap().to_owned(), names)
        })
        .collect()
}

#[test]
fn two_inits_of_one_comm_that_disagree_give_a_valid_merged_trace() {
    let Some(tool) = tool_beside_this_test() else {
        println!("skipped: no nccl-scorep built beside this test to merge and validate");
        return;
    };
    let plugin = Plugin::load(&[("NCCL_SCOREP_EVENTS", "api,tasks")]);
    let (first, _) = plugin.init_v7(5, Some(c"train"), 0, 2);
    // The same id again: another name, another rank count, the same rank.
    let (second, _) = plugin.init_v7(5, Some(c"other"), 0, 3);
    send_and_broadcast(&plugin, first, 0, 1, 1);
    send_and_broadcast(&plugin, second, 0, 2, 2);
    plugin.finalize7(second);
    plugin.finalize7(first);
    let out = plugin.out_dir();
    let report = merged_and_valid(&tool, &out);
    assert!(
        report.contains("train (0x5): 1 ranks (no part has rank [1]); 1 empty location"),
        "{report}"
    );
    // The first description keeps the id's communicator, its rank 1 an empty location (the
    // send and the root name it); the second context is the one member of its own, without
    // the message record or root that would name ranks it lacks.
    let comms = communicators(&out);
    let own = format!("NCCL comm of context {:#x}", second.0 as u64);
    assert_eq!(
        comms,
        [
            (
                "train (0x5)".to_owned(),
                vec![
                    "train rank 0 ops".to_owned(),
                    "train (0x5) rank 1: no trace part".to_owned()
                ]
            ),
            (
                own,
                vec![format!("comm of context {:#x} ops", second.0 as u64)]
            ),
        ]
    );
}

/// Two processes (two copies of the library, each its own part) that both say they are
/// rank 0 of one communicator: the merge keeps both locations, each the rank 0 of a
/// communicator of that name, rather than leave one out of the communicator its records
/// name.
#[test]
fn two_parts_that_claim_one_rank_give_two_communicators_of_that_name() {
    let Some(tool) = tool_beside_this_test() else {
        println!("skipped: no nccl-scorep built beside this test to merge and validate");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out_text = out.display().to_string();
    for _ in 0..2 {
        let plugin = Plugin::load(&[
            ("NCCL_SCOREP_EVENTS", "api,tasks"),
            ("NCCL_SCOREP_OUTPUT_DIR", &out_text),
        ]);
        let (ctx, _) = plugin.init_v7(9, Some(c"twice"), 0, 2);
        send_and_broadcast(&plugin, ctx, 0, 1, 0);
        plugin.finalize7(ctx);
    }
    let report = merged_and_valid(&tool, &out);
    assert!(report.starts_with("merged 2 parts"), "{report}");
    assert!(
        report.contains("its ranks form a further communicator of that name"),
        "{report}"
    );
    let comms = communicators(&out);
    let one = (
        "twice (0x9)".to_owned(),
        vec![
            "twice rank 0 ops".to_owned(),
            "twice (0x9) rank 1: no trace part".to_owned(),
        ],
    );
    assert_eq!(comms, [one.clone(), one]);
}

/// An `init` NCCL cannot mean (a rank past its rank count) that comes first does not
/// decide the communicator's description: the consistent one after it keeps it.
#[test]
fn an_impossible_first_init_does_not_decide_the_description() {
    let Some(tool) = tool_beside_this_test() else {
        println!("skipped: no nccl-scorep built beside this test to merge and validate");
        return;
    };
    let plugin = Plugin::load(&[("NCCL_SCOREP_EVENTS", "api,tasks")]);
    let (impossible, _) = plugin.init_v7(7, Some(c"x"), 3, 2);
    let (sane, _) = plugin.init_v7(7, Some(c"x"), 0, 2);
    send_and_broadcast(&plugin, impossible, 3, 1, 1);
    send_and_broadcast(&plugin, sane, 0, 1, 1);
    plugin.finalize7(sane);
    plugin.finalize7(impossible);
    let out = plugin.out_dir();
    merged_and_valid(&tool, &out);
    let comms: std::collections::BTreeMap<String, Vec<String>> =
        communicators(&out).into_iter().collect();
    let context = impossible.0 as u64;
    assert_eq!(
        comms,
        [
            (
                format!("NCCL comm of context {context:#x}"),
                vec![format!("comm of context {context:#x} ops")]
            ),
            (
                "x (0x7)".to_owned(),
                vec![
                    "x rank 0 ops".to_owned(),
                    "x (0x7) rank 1: no trace part".to_owned()
                ]
            ),
        ]
        .into_iter()
        .collect()
    );
}
