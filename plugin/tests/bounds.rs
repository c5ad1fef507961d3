//! Numbers NCCL passes are not trusted as sizes: a rank or rank count of two billion, or
//! a negative one, costs no memory per rank, in the plugin or in the merge of its part.

mod support;

use nccl_profiler_abi::state;
use support::*;

#[test]
fn huge_and_negative_ranks_cost_no_memory_per_rank() {
    let plugin = Plugin::load(&[("NCCL_SCOREP_MODE", "otf2")]);
    let table = plugin.v7();
    let mut contexts = Vec::new();
    for (hash, rank, nranks) in [
        (0x1u64, 2_000_000_000, 2_000_000_001),
        (0x2, -5, -7),
        (0x3, i32::MAX, i32::MAX),
    ] {
        let (ctx, _) = plugin.init_v7(hash, Some(c"huge"), rank, nranks);
        let api = start_in(
            table,
            ctx,
            &mut coll_api7(Handle::NULL, c"AllReduce", 1024, c"ncclFloat32"),
        );
        let coll = start_in(
            table,
            ctx,
            &mut coll7(
                api,
                Handle::NULL,
                0,
                1,
                c"AllReduce",
                1024,
                c"ncclFloat32",
                1,
            ),
        );
        let kernel = start_in(table, ctx, &mut kernel_ch7(coll, 0, 100));
        record_in(table, kernel, state::KERNEL_CH_STOP, Some(ptimer(200)));
        stop_in(table, kernel);
        stop_in(table, api);
        stop_in(table, coll);
        contexts.push(ctx);
    }
    for ctx in contexts {
        finalize_in(table, ctx);
    }

    // The part merges, validates and profiles under a 2 GB address-space limit (the merge
    // once listed every rank below the highest: 8 GB for a rank of two billion; it makes
    // empty locations for at most 2^21 ranks without a part).
    let Some(tool) = tool_beside_this_test() else {
        println!("skipped: the merge of the part (no nccl-scorep built beside this test)");
        return;
    };
    let out = plugin.out_dir();
    for command in ["merge", "validate", "profile"] {
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 2000000 && exec \"$0\" \"$1\" \"$2\"")
            .arg(&tool)
            .arg(command)
            .arg(&out)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{command}: {said}");
        if command == "merge" {
            // Rank counts NCCL cannot mean: each context has a communicator of its own, its
            // one rank, and no record names another.
            assert!(said.contains("3 communicators"), "{said}");
            assert_eq!(said.matches(": 1 ranks\n").count(), 3, "{said}");
            assert!(!said.contains("empty location"), "{said}");
        }
    }
}

/// The `nccl-scorep` tool Cargo built beside this test (`target/<profile>/`), if any.
fn tool_beside_this_test() -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let profile_dir = exe.parent()?.parent()?;
    let tool = profile_dir.join("nccl-scorep");
    tool.is_file().then_some(tool)
}
