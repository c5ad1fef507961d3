//! The plugin never ends the job: a file size limit (`ulimit -f`) smaller than the trace
//! makes the trace incomplete, says so once on stderr, and the application exits normally.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A one-process nccl-sim job (one AllReduce scenario) writing into `out`, merged at its
/// end by this tool, with the plugin's messages as a user sees them (no `NCCL_DEBUG`).
fn single_job(out: &Path) -> Output {
    nccl_sim::job_for_tests(out)
        .args(["--scenario", "single"])
        .env("NCCL_SCOREP_TOOL", env!("CARGO_BIN_EXE_nccl-scorep"))
        .env_remove("NCCL_DEBUG")
        .output()
        .unwrap()
}

#[test]
fn a_file_size_limit_cuts_the_trace_not_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // 64 blocks of 1 KiB: far less than the trace of 200 collectives with every event.
    let output = Command::new("bash")
        .arg("-c")
        .arg("ulimit -f 64 && exec \"$0\" run --plugin \"$1\" --scenario single --iterations 200")
        .arg(nccl_sim::binary_for_tests())
        .arg(nccl_sim::our_plugin_for_tests())
        .env("NCCL_SCOREP_OUTPUT_DIR", &out)
        .env("NCCL_SCOREP_EVENTS", "all")
        .env("NCCL_SCOREP_AUTO_MERGE", "0")
        .env_remove("NCCL_DEBUG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the job was ended ({:?}): {stderr}",
        output.status
    );
    assert!(stderr.contains("scenario single done"), "{stderr}");
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("File too large"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].starts_with("[NCCL-Score-P] Warning: "), "{stderr}");
    // The part's list of its event files leaves out those not all written (the merge reads
    // them), and gives the others' lengths.
    let part = only_part(&out);
    let list = std::fs::read_to_string(part.join("event-files.txt")).unwrap();
    let listed = nccl_scorep_common::event_files::parse(&list).unwrap();
    let files: Vec<PathBuf> = std::fs::read_dir(part.join("traces"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "evt"))
        .collect();
    let mut unlisted = 0;
    for file in &files {
        let id: u64 = file.file_stem().unwrap().to_str().unwrap().parse().unwrap();
        match listed.get(&id) {
            Some(written) => assert_eq!(written.bytes, std::fs::metadata(file).unwrap().len()),
            None => unlisted += 1,
        }
    }
    assert!(unlisted >= 1 && unlisted < files.len(), "{list}");
}

/// Links planted where the plugin writes (another user's doing, in a shared directory) are
/// refused with a message, never followed: what they point to is left as it was.
#[test]
fn planted_links_in_the_output_directory_are_refused_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    for name in ["merge.ledger", "merge.lock", "merge-report.txt"] {
        std::os::unix::fs::symlink(&victim, out.join(name)).unwrap();
    }
    let output = single_job(&out);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(
        stderr.contains("is a symbolic link: refused, not followed"),
        "{stderr}"
    );
    // The process's own part is written all the same.
    let parts: Vec<_> = std::fs::read_dir(out.join("parts")).unwrap().collect();
    assert_eq!(parts.len(), 1);
    let part = parts[0].as_ref().unwrap().path();
    assert!(part.join("traces.otf2").is_file());
}

/// Two jobs in one output directory: the second job's automatic merge replaces the first
/// one's trace, and says so.
#[test]
fn a_second_job_in_the_same_directory_says_that_it_replaces_the_first_ones_trace() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shared");
    let mut said = Vec::new();
    for _ in 0..2 {
        let output = single_job(&out);
        assert!(output.status.success());
        said.push(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    assert!(!said[0].contains("held the merged trace"), "{}", said[0]);
    assert!(
        said[1].contains("held the merged trace of another job"),
        "{}",
        said[1]
    );
    assert!(out.join("traces.otf2").is_file());
}

/// The only part in the output directory `out`.
fn only_part(out: &Path) -> PathBuf {
    let mut parts = std::fs::read_dir(out.join("parts")).unwrap();
    let part = parts.next().unwrap().unwrap().path();
    assert!(parts.next().is_none(), "one part");
    part
}

/// The biggest event file of the single job's (only) part, after running it.
fn biggest_event_file(out: &Path) -> PathBuf {
    assert!(single_job(out).status.success());
    let part = only_part(out);
    std::fs::read_dir(part.join("traces"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "evt"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap()
}

fn merge_without_profile(out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .args(["merge", "--no-profile"])
        .arg(out)
        .output()
        .unwrap()
}

/// A damaged event file is refused with a message naming it, never merged into a trace
/// OTF2 cannot read: one cut short (not as long as its process listed it), and, in a part
/// without the list of its event files (an older plugin's), one whose chunk header is
/// damaged.
#[test]
fn a_damaged_event_file_is_refused_by_the_merge() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let evt = biggest_event_file(&out);
    let part = evt.parent().unwrap().parent().unwrap();
    assert!(part.join("event-files.txt").is_file());
    let bytes = std::fs::read(&evt).unwrap();
    std::fs::write(&evt, &bytes[..bytes.len() - 5]).unwrap();
    let merged = merge_without_profile(&out);
    assert_eq!(merged.status.code(), Some(1));
    let said = String::from_utf8_lossy(&merged.stderr);
    assert!(said.contains("is damaged: chunk 0: "), "{said}");
    assert!(said.contains(&evt.display().to_string()), "{said}");

    let mut damaged = bytes.clone();
    damaged[0] = 0x77;
    std::fs::write(&evt, &damaged).unwrap();
    std::fs::remove_file(part.join("event-files.txt")).unwrap();
    let merged = merge_without_profile(&out);
    assert_eq!(merged.status.code(), Some(1));
    let said = String::from_utf8_lossy(&merged.stderr);
    assert!(
        said.contains("is damaged: chunk 0 does not start with a chunk header"),
        "{said}"
    );
    assert!(said.contains(&evt.display().to_string()), "{said}");
}

/// The merge takes an event file that is as long as its process listed it, with as many
/// events, without reading it; `--check-records` walks every record of every file, and so
/// also refuses one damaged inside.
#[test]
fn the_merge_walks_every_record_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let evt = biggest_event_file(&out);
    let mut bytes = std::fs::read(&evt).unwrap();
    // The first record's kind (after the 18-byte chunk header): one OTF2 does not know.
    bytes[18] = 0x03;
    std::fs::write(&evt, &bytes).unwrap();
    let walked = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .args(["merge", "--no-profile", "--check-records"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(walked.status.code(), Some(1), "{walked:?}");
    let said = String::from_utf8_lossy(&walked.stderr);
    assert!(said.contains("is damaged: chunk 0:"), "{said}");
    assert!(said.contains(&evt.display().to_string()), "{said}");
    // Without it, the file is as its process listed it: merged.
    let quick = merge_without_profile(&out);
    assert!(quick.status.success(), "{quick:?}");
}

/// The modes of every directory under `root` (itself included), by path.
fn directory_modes(root: &Path) -> Vec<(String, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut found = vec![(
        root.display().to_string(),
        std::fs::metadata(root).unwrap().permissions().mode() & 0o777,
    )];
    for entry in std::fs::read_dir(root).unwrap().flatten() {
        if entry.file_type().unwrap().is_dir() {
            found.extend(directory_modes(&entry.path()));
        }
    }
    found
}

#[test]
fn the_directories_of_a_trace_are_private_unless_configured() {
    let dir = tempfile::tempdir().unwrap();
    let private = dir.path().join("private");
    let output = single_job(&private);
    assert!(output.status.success(), "{output:?}");
    assert!(private.join("traces.otf2").is_file(), "{output:?}");
    let modes = directory_modes(&private);
    // The output directory, the parts, their event files and the merged archive's.
    assert!(modes.len() >= 4, "{modes:?}");
    for (path, mode) in &modes {
        assert_eq!(*mode, 0o700, "{path}");
    }

    // A group-readable setting, read by the plugin and by the tool's merge alike.
    let shared = dir.path().join("shared");
    let output = nccl_sim::job_for_tests(&shared)
        .args(["--scenario", "single"])
        .env("NCCL_SCOREP_TOOL", env!("CARGO_BIN_EXE_nccl-scorep"))
        .env("NCCL_SCOREP_DIR_MODE", "0750")
        .env_remove("NCCL_DEBUG")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(shared.join("traces.otf2").is_file(), "{output:?}");
    for (path, mode) in directory_modes(&shared) {
        // The umask may take rights from the group, never give them.
        assert_eq!(mode & !0o750, 0, "{path}: {mode:o}");
        assert_eq!(mode & 0o700, 0o700, "{path}: {mode:o}");
    }

    // A bad value: one warning naming the variable, and the private default.
    let bad = dir.path().join("bad");
    let output = nccl_sim::job_for_tests(&bad)
        .args(["--scenario", "single"])
        .env("NCCL_SCOREP_AUTO_MERGE", "0")
        .env("NCCL_SCOREP_DIR_MODE", "0644")
        .env_remove("NCCL_DEBUG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("[NCCL-Score-P] Warning:") && stderr.contains("NCCL_SCOREP_DIR_MODE"),
        "{stderr}"
    );
    for (path, mode) in directory_modes(&bad) {
        assert_eq!(mode, 0o700, "{path}");
    }
}

#[test]
fn a_process_writes_at_most_its_bound_of_locations_and_says_what_it_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // 4 ranks × 8 channels with 16 proxy lanes each would need over 100 locations.
    let output = nccl_sim::job_for_tests(&out)
        .args(["--ranks", "4", "--channels", "8", "--iterations", "5"])
        .args(["--scenario", "single"])
        .env("NCCL_SCOREP_MAX_LOCATIONS", "64")
        .env("NCCL_SCOREP_EVENTS", "all")
        .env("NCCL_SCOREP_TOOL", env!("CARGO_BIN_EXE_nccl-scorep"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("the trace part reached NCCL_SCOREP_MAX_LOCATIONS (64 locations): "),
        "{stderr}"
    );
    let definitions = Command::new("otf2-print")
        .arg("-G")
        .arg(out.join("traces.otf2"))
        .output()
        .unwrap();
    let definitions = String::from_utf8_lossy(&definitions.stdout);
    let locations: Vec<&str> = definitions
        .lines()
        .filter(|l| l.starts_with("LOCATION "))
        .collect();
    assert!(locations.len() <= 64, "{}", locations.len());
    // What the summary reads comes first: every rank's ops stream is there.
    assert_eq!(
        locations.iter().filter(|l| l.contains(" ops\"")).count(),
        4,
        "{definitions}"
    );
    let validate = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .arg("validate")
        .arg(&out)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&validate.stdout);
    assert!(report.lines().any(|l| l.trim() == "valid"), "{report}");
    let summary = Command::new(env!("CARGO_BIN_EXE_nccl-scorep"))
        .args(["summary", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&summary.stdout).unwrap();
    let operation = &summary["operations"][0];
    assert_eq!(
        (
            &operation["func"],
            &operation["calls"],
            &operation["nranks"]
        ),
        (
            &serde_json::json!("AllReduce"),
            &serde_json::json!(5),
            &serde_json::json!(4)
        ),
        "{summary:#}"
    );
}

/// Settings that leave the plugin nothing to write, or that it cannot read: each is said on
/// stderr (no `NCCL_DEBUG` needed), and the application still runs to its end.
#[test]
fn settings_that_cannot_work_are_said_not_silently_ignored() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let not_utf8 = std::ffi::OsStr::from_bytes(b"otf\xff2");
    let cases: [(&str, &std::ffi::OsStr, &str); 5] = [
        (
            "NCCL_SCOREP_OUTPUT_DIR",
            "/dev/null".as_ref(),
            "cannot write the trace",
        ),
        (
            "NCCL_SCOREP_OUTPUT_DIR",
            file.as_os_str(),
            "cannot write the trace",
        ),
        (
            "NCCL_SCOREP_OUTPUT_DIR",
            "/proc/self".as_ref(),
            "cannot write the trace",
        ),
        ("NCCL_SCOREP_MODE", not_utf8, "NCCL_SCOREP_MODE="),
        (
            "NCCL_SCOREP_MEMORY_LIMIT",
            "1K".as_ref(),
            "NCCL_SCOREP_MEMORY_LIMIT=",
        ),
    ];
    for (name, value, said) in cases {
        let output = nccl_sim::job_for_tests(dir.path().join("out"))
            .args(["--scenario", "single"])
            .env("NCCL_SCOREP_AUTO_MERGE", "0")
            .env(name, value)
            .env_remove("NCCL_DEBUG")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{name}={value:?}: {stderr}");
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("[NCCL-Score-P] Warning: ") && l.contains(said))
            .collect();
        assert_eq!(warnings.len(), 1, "{name}={value:?} said once: {stderr}");
    }
}

/// The same as another user's doing, where the test can make it so (as root: files given
/// to uid 65534): in a shared directory that user owns, their links and their own files at
/// the names the plugin writes are refused, and what the links point to is left alone.
/// Without root, the test says it skipped (the same-user links are tested above).
#[test]
fn another_users_links_and_files_in_the_output_directory_are_refused() {
    use std::os::unix::fs::{chown, lchown, MetadataExt, PermissionsExt};
    if std::fs::metadata("/proc/self").unwrap().uid() != 0 {
        println!("skipped: only root can give files to another user here");
        return;
    }
    const OTHER: u32 = 65534;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shared");
    std::fs::create_dir(&out).unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    for name in ["merge.ledger", "merge-report.txt"] {
        let link = out.join(name);
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        lchown(&link, Some(OTHER), Some(OTHER)).unwrap();
    }
    let theirs = out.join("merge.lock");
    std::fs::write(&theirs, "theirs\n").unwrap();
    chown(&theirs, Some(OTHER), Some(OTHER)).unwrap();
    chown(&out, Some(OTHER), Some(OTHER)).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).unwrap();

    let output = single_job(&out);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "theirs\n");
    assert_eq!(std::fs::metadata(&theirs).unwrap().uid(), OTHER);
    // The lock is taken first: their file there stops the plugin before it would reach
    // the links.
    assert!(
        stderr.contains("merge.lock belongs to another user (uid 65534): refused"),
        "{stderr}"
    );
    // The process's own part is written all the same, in the shared directory.
    let parts: Vec<_> = std::fs::read_dir(out.join("parts")).unwrap().collect();
    assert_eq!(parts.len(), 1);

    // Without their lock, the next job reaches their links: refused too.
    std::fs::remove_file(&theirs).unwrap();
    let output = single_job(&out);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(
        stderr.contains("merge.ledger is a symbolic link: refused, not followed"),
        "{stderr}"
    );
}
