//! `nccl-scorep run` and `exec`: a new experiment directory per run, `run.json`, the
//! variables reaching Open MPI's ranks, the job's exit status passed on; `merge` refusing a
//! directory that holds two jobs; and the plugin's warnings on stderr without `NCCL_DEBUG`.

mod otf2_properties;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tool() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"));
    // Whatever the test's own environment says, the plugin prints its warnings unasked.
    command
        .env_remove("NCCL_DEBUG")
        .env_remove("NCCL_SCOREP_OUTPUT_DIR");
    allow_mpirun_as_root(&mut command);
    command
}

/// Open MPI refuses to run as root (a container's user) unless told.
fn allow_mpirun_as_root(command: &mut Command) {
    command
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
}

fn plugin() -> PathBuf {
    nccl_sim::our_plugin_for_tests()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `nccl-scorep run --plugin … -- <command>` in `cwd`.
fn run_in(cwd: &Path, extra: &[&str], command: &[&str]) -> Output {
    tool()
        .current_dir(cwd)
        .arg("run")
        .arg("--plugin")
        .arg(plugin())
        .args(extra)
        .arg("--")
        .args(command)
        .output()
        .unwrap()
}

fn sim() -> String {
    nccl_sim::binary_for_tests().display().to_string()
}

/// The experiment directories `nccl-scorep-*` in `dir`, sorted.
fn experiment_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("nccl-scorep-")
        })
        .collect();
    dirs.sort();
    dirs
}

fn run_json(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap()
}

#[test]
fn two_runs_get_two_directories_each_with_its_trace_summary_and_run_json() {
    let cwd = tempfile::tempdir().unwrap();
    let job = [sim(), "run".into(), "--scenario".into(), "single".into()];
    let job: Vec<&str> = job.iter().map(String::as_str).collect();
    let first = run_in(cwd.path(), &["--events", "default,steps"], &job);
    assert!(first.status.success(), "{}", text(&first.stderr));
    let second = run_in(cwd.path(), &[], &job);
    assert!(second.status.success(), "{}", text(&second.stderr));

    let found = experiment_dirs(cwd.path());
    assert_eq!(found.len(), 2, "{found:?}");
    // Each run's directory, found by the name its report gives: names do not sort in run
    // order (their last field is the launcher's pid when there is no job id).
    let dirs: Vec<PathBuf> = [&first, &second]
        .iter()
        .map(|output| {
            let stderr = text(&output.stderr);
            found
                .iter()
                .find(|dir| {
                    let name = dir.file_name().unwrap().to_string_lossy();
                    stderr.contains(&format!("experiment directory {}", dir.display()))
                        || stderr.contains(name.as_ref())
                })
                .unwrap_or_else(|| panic!("the report names none of {found:?}: {stderr}"))
                .clone()
        })
        .collect();
    for (dir, output) in dirs.iter().zip([&first, &second]) {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        // nccl-scorep-<yyyymmdd>_<hhmm>_<id>[.n]
        let fields: Vec<&str> = name["nccl-scorep-".len()..].splitn(3, '_').collect();
        assert_eq!(fields[0].len(), 8, "{name}");
        assert_eq!(fields[1].len(), 4, "{name}");
        assert!(fields[0]
            .chars()
            .chain(fields[1].chars())
            .all(|c| c.is_ascii_digit()));
        assert!(dir.join("traces.otf2").is_file(), "{name}: no merged trace");
        let stdout = text(&output.stdout);
        assert!(
            stdout.contains(&format!("trace:   {}/traces.otf2", dir.display())),
            "{stdout}"
        );
        assert!(
            stdout.contains("AllReduce"),
            "the summary follows: {stdout}"
        );
        // Its header says how the trace was made.
        assert!(
            stdout.contains("NCCL 2.32.0, profiler API v7, nccl-scorep "),
            "{stdout}"
        );
        assert!(stdout.contains("\ncommand: "), "{stdout}");
    }
    assert_ne!(dirs[0], dirs[1]);

    let record = run_json(&dirs[0]);
    assert_eq!(record["schema"], "nccl-scorep-run/1");
    assert_eq!(record["launcher"], "program");
    assert_eq!(record["command"][0], sim());
    assert_eq!(record["command"][2], "--scenario");
    assert_eq!(record["exit_status"], 0);
    assert_eq!(record["trace"], "traces.otf2");
    assert_eq!(record["environment"]["NCCL_SCOREP_EVENTS"], "default,steps");
    let output_dir = record["environment"]["NCCL_SCOREP_OUTPUT_DIR"]
        .as_str()
        .unwrap();
    assert_eq!(Path::new(output_dir), dirs[0]);
    assert!(record["start"].as_str().unwrap() <= record["end"].as_str().unwrap());
    // What the trace itself records, as the merge put it into run.json …
    let provenance = &record["provenance"];
    assert_eq!(provenance["nccl_version"], "2.32.0", "{record}");
    assert_eq!(provenance["profiler_api"], "7");
    assert_eq!(provenance["plugin_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(provenance["event_mask"], "0xf7f", "default,steps");
    assert_eq!(provenance["parts"], "1");
    assert!(provenance["command"]
        .as_str()
        .unwrap()
        .contains("--scenario single"));
    assert_eq!(
        provenance["environment"]["NCCL_SCOREP_EVENTS"],
        "default,steps"
    );
    for field in [
        "hosts",
        "clock",
        "launcher",
        "job_id",
        "start_realtime_ns",
        "end_realtime_ns",
    ] {
        assert!(
            provenance[field].as_str().is_some_and(|v| !v.is_empty()),
            "{field}: {record}"
        );
    }
    // … and as the OTF2 trace file properties that OTF2's own tool prints.
    let (anchor, properties) =
        otf2_properties::nccl_scorep_properties(&dirs[0].join("traces.otf2"));
    let property = |name: &str| properties.get(name).cloned();
    assert_eq!(
        property("NCCL_VERSION").as_deref(),
        Some("2.32.0"),
        "{anchor}"
    );
    assert_eq!(property("PROFILER_API").as_deref(), Some("7"), "{anchor}");
    // What the plugin's heap came to, under its limit (the merge joins the processes'
    // values with " | ").
    assert_eq!(
        property("MEMORY_LIMIT_BYTES").as_deref(),
        Some("67108864"),
        "{anchor}"
    );
    let peaks = property("HEAP_PEAK_BYTES").unwrap_or_default();
    assert!(
        !peaks.is_empty()
            && peaks
                .split(" | ")
                .all(|p| p.parse::<u64>().is_ok_and(|p| p > 0 && p < 64 << 20)),
        "{anchor}"
    );
    assert_eq!(
        property("ENV::NCCL_SCOREP_EVENTS").as_deref(),
        Some("default,steps"),
        "{anchor}"
    );
    assert!(run_json(&dirs[1])["environment"]
        .get("NCCL_SCOREP_EVENTS")
        .is_none());
}

#[test]
fn a_used_directory_is_refused_and_the_jobs_exit_status_is_passed_on() {
    let cwd = tempfile::tempdir().unwrap();
    let used = cwd.path().join("used");
    std::fs::create_dir(&used).unwrap();
    std::fs::write(used.join("traces.otf2"), "").unwrap();
    let refused = run_in(cwd.path(), &["-o", "used"], &["true"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr).contains("is not an empty directory"),
        "{}",
        text(&refused.stderr)
    );

    let failed = run_in(cwd.path(), &["-o", "fresh"], &["sh", "-c", "exit 3"]);
    assert_eq!(failed.status.code(), Some(3));
    let stderr = text(&failed.stderr);
    assert!(
        stderr.contains("the job ended (exit status 3) before any process wrote a trace"),
        "{stderr}"
    );
    assert_eq!(run_json(&cwd.path().join("fresh"))["exit_status"], 3);
}

#[test]
fn run_forwards_the_variables_to_open_mpi_ranks() {
    let cwd = tempfile::tempdir().unwrap();
    let sim = sim();
    let output = run_in(
        cwd.path(),
        &["-o", "job"],
        &[
            "mpirun",
            "-np",
            "2",
            "--oversubscribe",
            "--bind-to",
            "none",
            &sim,
            "run",
            "--scenario",
            "single",
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let dir = cwd.path().join("job");
    let record = run_json(&dir);
    assert_eq!(record["launcher"], "openmpi");
    let started: Vec<&str> = record["started"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(&started[..3], ["mpirun", "-x", "NCCL_PROFILER_PLUGIN"]);
    assert!(started.contains(&"NCCL_SCOREP_OUTPUT_DIR"));
    // Both ranks wrote their part into the one directory, and the last merged them.
    let ledger = std::fs::read_to_string(dir.join("merge.ledger")).unwrap();
    assert_eq!(
        ledger.lines().filter(|l| l.starts_with("merged\t")).count(),
        1,
        "{ledger}"
    );
    assert!(ledger.contains("merged\topenmpi:"), "{ledger}");
    assert!(
        ledger.lines().any(|l| l.ends_with("\t2")),
        "two parts merged: {ledger}"
    );
}

#[test]
fn exec_ranks_agree_on_one_directory() {
    let cwd = tempfile::tempdir().unwrap();
    let mut mpirun = Command::new("mpirun");
    allow_mpirun_as_root(&mut mpirun);
    let output = mpirun
        .current_dir(cwd.path())
        .env_remove("NCCL_SCOREP_OUTPUT_DIR")
        .args(["-np", "3", "--oversubscribe", "--bind-to", "none"])
        .arg(env!("CARGO_BIN_EXE_nccl-scorep"))
        .arg("exec")
        .arg("--plugin")
        .arg(plugin())
        .arg("--")
        .arg(sim())
        .args(["run", "--scenario", "single"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let dirs = experiment_dirs(cwd.path());
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let record = run_json(&dirs[0]);
    let job_id = record["job_id"].as_str().unwrap();
    assert!(job_id.starts_with("openmpi:"), "{record}");
    let ledger = std::fs::read_to_string(dirs[0].join("merge.ledger")).unwrap();
    // The job id the ranks agreed on is the one the plugin merged the job by.
    assert!(
        ledger.contains(&format!("merged\t{job_id}\t3\n")),
        "{job_id}: {ledger}"
    );
    assert!(dirs[0].join("traces.otf2").is_file());
}

/// Two single-process jobs write into one directory, as the default directory would.
#[test]
fn merge_refuses_two_jobs_in_one_directory_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shared-out");
    for _ in 0..2 {
        let status = Command::new(nccl_sim::binary_for_tests())
            .env("NCCL_SCOREP_OUTPUT_DIR", &out)
            .env("NCCL_SCOREP_AUTO_MERGE", "0")
            .arg("run")
            .arg("--plugin")
            .arg(plugin())
            .args(["--scenario", "single"])
            .output()
            .unwrap()
            .status;
        assert!(status.success());
    }
    let refused = tool().arg("merge").arg(&out).output().unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let said = text(&refused.stderr);
    assert!(said.contains("holds the parts of 2 jobs"), "{said}");
    assert!(said.contains("--all"), "{said}");
    assert!(!out.join("traces.otf2").exists());

    let ledger = std::fs::read_to_string(out.join("merge.ledger")).unwrap();
    let first_job = ledger.lines().next().unwrap().split('\t').nth(1).unwrap();
    let one = tool()
        .arg("merge")
        .arg(&out)
        .args(["--job", first_job, "--no-profile"])
        .output()
        .unwrap();
    assert!(one.status.success(), "{}", text(&one.stderr));
    assert!(
        text(&one.stdout).contains("1 part"),
        "{}",
        text(&one.stdout)
    );
    let all = tool()
        .arg("merge")
        .arg(&out)
        .args(["--all", "--no-profile"])
        .output()
        .unwrap();
    assert!(all.status.success(), "{}", text(&all.stderr));
    assert!(
        text(&all.stdout).contains("2 parts"),
        "{}",
        text(&all.stdout)
    );
}

#[test]
fn a_bad_value_and_an_unwritable_directory_are_said_once_on_stderr_without_nccl_debug() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let output = Command::new(nccl_sim::binary_for_tests())
        .env_remove("NCCL_DEBUG")
        .env("NCCL_SCOREP_MODE", "turbo")
        .env("NCCL_SCOREP_OUTPUT_DIR", &file)
        .arg("run")
        .arg("--plugin")
        .arg(plugin())
        // Two scenarios: two communicators, two init/finalize cycles.
        .args(["--scenario", "single", "--scenario", "group"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let stderr = text(&output.stderr);
    let ours: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("[NCCL-Score-P] "))
        .collect();
    let bad_mode: Vec<&&str> = ours
        .iter()
        .filter(|l| l.contains("NCCL_SCOREP_MODE=\"turbo\""))
        .collect();
    assert_eq!(bad_mode.len(), 1, "{stderr}");
    assert!(bad_mode[0].contains("using the default auto"), "{stderr}");
    let unwritable: Vec<&&str> = ours
        .iter()
        .filter(|l| l.contains("cannot write the trace"))
        .collect();
    assert_eq!(unwritable.len(), 1, "{stderr}");
    assert!(
        unwritable[0].contains(&file.display().to_string()),
        "{stderr}"
    );
}

#[test]
fn a_deferred_run_is_converted_after_the_job_and_summed_up() {
    let cwd = tempfile::tempdir().unwrap();
    let job = [sim(), "run".into(), "--procs".into(), "2".into()];
    let job: Vec<&str> = job.iter().map(String::as_str).collect();
    let output = tool()
        .current_dir(cwd.path())
        .env("NCCL_SCOREP_MODE", "deferred")
        .args(["run", "-o", "deferred", "--plugin"])
        .arg(plugin())
        .arg("--")
        .args(&job)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{stderr}");
    let dir = cwd.path().join("deferred");
    assert!(
        stderr.contains("replaying 2 recording(s)"),
        "the launcher converts the recordings: {stderr}"
    );
    assert_eq!(
        std::fs::read_dir(dir.join("recordings")).unwrap().count(),
        2
    );
    assert!(
        stdout.contains(&format!("trace:   {}/traces.otf2", dir.display())),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("AllReduce"),
        "the summary follows: {stdout}"
    );
    assert_eq!(run_json(&dir)["trace"], "traces.otf2");
}
