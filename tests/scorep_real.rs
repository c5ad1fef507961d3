//! Score-P mode against a real Score-P, where one is installed (`SCOREP_PREFIX`, or
//! `scorep` on PATH; each test says it skipped otherwise): the MPI+NCCL test program
//! (`tests/c/mpi_nccl_app.c` on nccl-sim's CPU-only libnccl), built with Score-P's
//! `scorep` wrapper or run uninstrumented under `scorep-preload-init`'s `LD_PRELOAD`,
//! under `mpirun -np 4` with our plugin in Score-P mode and as Score-P's metric plugin.
//! Checked: Score-P's profile (through pycubexr), its trace (`otf2-print -Werror`), and
//! `nccl-scorep merge --scorep` (valid, Score-P's files untouched, our locations under
//! the right MPI rank, every operation executing after its API call on the common clock).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

// Shared test readers, of which this file uses a part.
#[allow(dead_code)]
#[path = "../nccl-sim/tests/otf2_tools/mod.rs"]
mod otf2_tools;
#[allow(dead_code)]
mod profile_reader;
mod validate_json;
use otf2_tools::assert_otf2_print_clean;
use validate_json::assert_validates;

const RANKS: usize = 4;
/// What the test program calls per rank (tests/c/mpi_nccl_app.c): five AllReduces on the
/// world communicator and one on its half, one AllGather, one Send and one Recv in one
/// group; every call in a group of its own but the send/receive pair.
const CALLS_PER_RANK: [(&str, u64); 5] = [
    ("ncclAllReduce", 6),
    ("ncclAllGather", 1),
    ("ncclSend", 1),
    ("ncclRecv", 1),
    ("ncclGroup", 8),
];

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `bin` directory of a real Score-P: `$SCOREP_PREFIX/bin`, else where `scorep` is
/// on PATH. `None` (and a line saying the test skipped) without one.
fn real_scorep(test: &str) -> Option<PathBuf> {
    let from_prefix = std::env::var_os("SCOREP_PREFIX").map(|p| PathBuf::from(p).join("bin"));
    let on_path = std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).find(|dir| dir.join("scorep").is_file()));
    let bin = from_prefix
        .filter(|dir| dir.join("scorep").is_file())
        .or(on_path);
    let real = bin.filter(|dir| {
        Command::new(dir.join("scorep"))
            .arg("--version")
            .output()
            .is_ok_and(|o| text(&o.stdout).contains("Score-P"))
    });
    if real.is_none() {
        eprintln!(
            "skipped {test}: no real Score-P (set SCOREP_PREFIX to its installation, or put \
             `scorep` on PATH)"
        );
    }
    real
}

/// The test program: with `scorep`'s wrapper (`instrumented`), else plain `mpicc`.
fn build(bin: &Path, dir: &Path, instrumented: bool) -> PathBuf {
    let repository = Path::new(env!("CARGO_MANIFEST_DIR"));
    let library = nccl_sim::libnccl_for_tests();
    let library_dir = library.parent().unwrap();
    let program = dir.join("mpi_nccl_app");
    let mut command = if instrumented {
        let mut c = Command::new(bin.join("scorep"));
        // The command docs/scorep.md gives: --no-as-needed keeps Score-P's user library.
        c.args([
            "--user",
            "--thread=pthread",
            "--mpp=mpi",
            "--dynamic",
            "--no-as-needed",
            "mpicc",
        ]);
        c
    } else {
        Command::new("mpicc")
    };
    let output = command
        .args(["-O1", "-o"])
        .arg(&program)
        .arg(repository.join("tests/c/mpi_nccl_app.c"))
        .arg("-I")
        .arg(repository.join("nccl-sim/libnccl/include"))
        .arg("-L")
        .arg(library_dir)
        .arg("-lnccl")
        .arg(format!("-Wl,-rpath,{}", library_dir.display()))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    program
}

/// `mpirun -np 4 program` with our plugin in Score-P mode, Score-P tracing and profiling
/// into `exp`, and `preload` (the value `scorep-preload-init` gave) for the program only.
fn run(program: &Path, exp: &Path, preload: Option<&str>) -> Output {
    let plugin = nccl_sim::our_plugin_for_tests();
    let plugin_dir = plugin.parent().unwrap();
    let mut command = Command::new("timeout");
    command.arg("240").arg("mpirun").args([
        "-np",
        &RANKS.to_string(),
        "--oversubscribe",
        "--bind-to",
        "none",
    ]);
    let env: [(&str, &std::ffi::OsStr); 8] = [
        ("NCCL_PROFILER_PLUGIN", plugin.as_os_str()),
        ("NCCL_SCOREP_MODE", "scorep".as_ref()),
        (
            "NCCL_SCOREP_TOOL",
            env!("CARGO_BIN_EXE_nccl-scorep").as_ref(),
        ),
        ("SCOREP_EXPERIMENT_DIRECTORY", exp.as_os_str()),
        ("SCOREP_ENABLE_TRACING", "true".as_ref()),
        ("SCOREP_TOTAL_MEMORY", "256M".as_ref()),
        // Score-P's clock for the sidecar, through the metric plugin (the file NCCL
        // loads, found in the build directory by Cargo's name).
        ("SCOREP_METRIC_PLUGINS", "nccl_profiler_scorep".as_ref()),
        ("LD_LIBRARY_PATH", plugin_dir.as_os_str()),
    ];
    for (name, value) in env {
        command.args(["-x", name]).env(name, value);
    }
    if let Some(preload) = preload {
        // Set for the launched program only: never for mpirun itself.
        command.arg("-x").arg(format!("LD_PRELOAD={preload}"));
    }
    let output = command
        .arg(program)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .unwrap();
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        text(&output.stderr)
    );
    assert_eq!(stdout.matches(" ok, ring from ").count(), RANKS, "{stdout}");
    output
}

/// Score-P's profile: per MPI rank, each NCCL API region's visits as the program made
/// them, under `ncclGroup` (itself under `main` when the program is instrumented); every
/// task region under `NCCL plan enqueue`; and only the two bounded parameters.
fn check_profile(exp: &Path, instrumented: bool) {
    let profile = profile_reader::read_with_pycubexr(&exp.join("profile.cubex"));
    let locations = profile["locations"].as_array().unwrap();
    let ranks: Vec<i64> = locations
        .iter()
        .filter(|l| l["name"] == "Master thread")
        .map(|l| l["process_rank"].as_i64().unwrap())
        .collect();
    assert_eq!(ranks, vec![0, 1, 2, 3], "{locations:?}");
    let cnodes = profile["cnodes"].as_array().unwrap();
    let path_of = |cnode: &serde_json::Value| -> Vec<String> {
        cnode["path"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap().to_owned())
            .collect()
    };
    let mut visits: BTreeMap<(String, usize), u64> = BTreeMap::new();
    for row in profile["values"]["visits"].as_array().unwrap() {
        let (cnode, location) = (row[0].as_u64().unwrap(), row[1].as_u64().unwrap() as usize);
        let cnode = cnodes.iter().find(|c| c["id"] == cnode).unwrap();
        let path = path_of(cnode);
        let region = path.last().unwrap().clone();
        if locations[location]["name"] != "Master thread" {
            continue;
        }
        if region.starts_with("nccl") || region.ends_with(" enqueue") {
            let rank = locations[location]["process_rank"].as_u64().unwrap() as usize;
            *visits.entry((region.clone(), rank)).or_default() += row[2].as_f64().unwrap() as u64;
            // Nesting as the program called it.
            let parent = &path[path.len() - 2];
            if region == "ncclGroup" {
                if instrumented {
                    assert_eq!(parent, "main", "{path:?}");
                }
            } else if region.starts_with("nccl") {
                assert_eq!(parent, "ncclGroup", "{path:?}");
            } else if region != "NCCL plan enqueue" {
                assert_eq!(parent, "NCCL plan enqueue", "{path:?}");
            }
        }
    }
    for (region, per_rank) in CALLS_PER_RANK {
        for rank in 0..RANKS {
            assert_eq!(
                visits.get(&(region.to_owned(), rank)),
                Some(&per_rank),
                "{region} on MPI rank {rank}: {visits:?}"
            );
        }
    }
    // Parameters: only the size bucket and the communicator, a handful of values.
    let mut buckets = std::collections::BTreeSet::new();
    for cnode in cnodes {
        for (name, value) in cnode["parameters"].as_object().unwrap() {
            assert!(name == "nccl.bytes" || name == "nccl.comm", "{cnode}");
            if name == "nccl.bytes" {
                buckets.insert(value.as_str().unwrap().to_owned());
            }
        }
    }
    assert!((2..=6).contains(&buckets.len()), "{buckets:?}");
}

/// The files of Score-P's experiment (its profile and trace), to see they stay as they were.
fn scorep_files(exp: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    for name in ["profile.cubex", "traces.otf2", "traces.def"] {
        files.insert(exp.join(name), std::fs::read(exp.join(name)).unwrap());
    }
    for entry in std::fs::read_dir(exp.join("traces")).unwrap() {
        let path = entry.unwrap().path();
        files.insert(path.clone(), std::fs::read(&path).unwrap());
    }
    files
}

/// `otf2-print` output: per location id, the ENTER times of `region`, in order.
fn enters(print: &str, region: &str) -> BTreeMap<u64, Vec<u64>> {
    let quoted = format!("Region: \"{region}\" ");
    let mut found: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for line in print
        .lines()
        .filter(|l| l.starts_with("ENTER ") && l.contains(&quoted))
    {
        let mut words = line.split_whitespace().skip(1);
        let location = words.next().unwrap().parse().unwrap();
        let time = words.next().unwrap().parse().unwrap();
        found.entry(location).or_default().push(time);
    }
    found
}

/// `nccl-scorep merge --scorep`: a valid combined archive, Score-P's files untouched, our
/// locations under their MPI rank, and on each rank every AllReduce executing after its
/// `ncclAllReduce` call began on Score-P's clock.
fn check_merge(exp: &Path) {
    let before = scorep_files(exp);
    let output = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .args(["merge", "--scorep"])
        .arg(exp)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let combined = exp.join("nccl-combined/traces.otf2");
    assert_otf2_print_clean(&combined);
    assert_validates(&combined, true);
    assert_eq!(scorep_files(exp), before, "Score-P's experiment changed");

    let definitions = Command::new("otf2-print")
        .arg("-G")
        .arg(&combined)
        .output()
        .unwrap();
    let definitions = text(&definitions.stdout);
    // Each rank's location groups of the world communicator were made by that MPI rank's
    // process; record the MPI rank of every ops stream.
    let world = definitions
        .lines()
        .find(|l| l.starts_with("LOCATION_GROUP") && l.contains(" rank 3\""))
        .and_then(|l| l.split('"').nth(1))
        .map(|name| name.trim_end_matches(" rank 3").to_owned())
        .expect("a communicator with a rank 3: the world");
    let mut group_rank: BTreeMap<String, usize> = BTreeMap::new();
    for line in definitions
        .lines()
        .filter(|l| l.starts_with("LOCATION_GROUP"))
    {
        let fields: Vec<&str> = line.split('"').collect();
        // LOCATION_GROUP <id>  Name: "…", Type: …, Parent: "…", Creator: "…"
        let (name, creator) = (fields[1], fields.get(5).copied().unwrap_or(""));
        if let Some(rank) = creator.strip_prefix("MPI Rank ") {
            let rank: usize = rank.parse().unwrap();
            if let Some(world_rank) = name.strip_prefix(&format!("{world} rank ")) {
                assert_eq!(world_rank.parse::<usize>().unwrap(), rank, "{line}");
            }
            group_rank.insert(name.to_owned(), rank);
        }
    }
    assert_eq!(
        group_rank.keys().filter(|g| g.starts_with(&world)).count(),
        RANKS,
        "{definitions}"
    );
    let mut ops_rank: BTreeMap<u64, usize> = BTreeMap::new();
    for line in definitions.lines().filter(|l| l.starts_with("LOCATION ")) {
        let fields: Vec<&str> = line.split('"').collect();
        // LOCATION <id>  Name: "…", Type: …, # Events: …, Group: "…"
        if fields[1].ends_with(" ops") {
            let id = line.split_whitespace().nth(1).unwrap().parse().unwrap();
            ops_rank.insert(id, group_rank[fields[3]]);
        }
    }

    let print = Command::new("otf2-print").arg(&combined).output().unwrap();
    let print = text(&print.stdout);
    // Score-P's master threads have location ids 0 … 3, one per MPI rank.
    let calls = enters(&print, "ncclAllReduce");
    let mut executions: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for (location, times) in enters(&print, "AllReduce") {
        if let Some(&rank) = ops_rank.get(&location) {
            executions.entry(rank).or_default().extend(times);
        }
    }
    for rank in 0..RANKS {
        let called = &calls[&(rank as u64)];
        let executed = executions.get_mut(&rank).unwrap();
        executed.sort_unstable();
        assert_eq!((called.len(), executed.len()), (6, 6), "rank {rank}");
        for (call, execution) in called.iter().zip(executed.iter()) {
            assert!(
                execution >= call,
                "rank {rank}: an AllReduce executed at {execution}, before its call at {call}"
            );
        }
    }
}

#[test]
fn an_instrumented_mpi_nccl_program_under_real_score_p() {
    let Some(bin) = real_scorep("an_instrumented_mpi_nccl_program_under_real_score_p") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let program = build(&bin, dir.path(), true);
    let exp = dir.path().join("scorep-exp");
    let output = run(&program, &exp, None);
    let stderr = text(&output.stderr);
    assert!(!stderr.contains("Warning: no Score-P"), "{stderr}");
    check_profile(&exp, true);
    assert_otf2_print_clean(&exp.join("traces.otf2"));
    check_merge(&exp);
}

#[test]
fn an_uninstrumented_mpi_nccl_program_under_score_p_s_preload() {
    let Some(bin) = real_scorep("an_uninstrumented_mpi_nccl_program_under_score_p_s_preload")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let program = build(&bin, dir.path(), false);
    let result_dir = dir.path().join("preload");
    std::fs::create_dir(&result_dir).unwrap();
    // The command docs/scorep.md gives: no `--` before the program, --value-only.
    let preload = Command::new(bin.join("scorep-preload-init"))
        .args(["--user", "--thread=pthread", "--mpp=mpi", "--value-only"])
        .arg(&program)
        .arg(&result_dir)
        .output()
        .unwrap();
    assert!(preload.status.success(), "{}", text(&preload.stderr));
    let preload = text(&preload.stdout).trim().to_owned();
    assert!(
        preload.contains("libscorep_adapter_user_event"),
        "{preload}"
    );
    let exp = dir.path().join("scorep-exp");
    run(&program, &exp, Some(&preload));
    check_profile(&exp, false);
    assert_otf2_print_clean(&exp.join("traces.otf2"));
    check_merge(&exp);
}
