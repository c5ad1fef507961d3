//! End-to-end checks of the `nccl-scorep` binary: what a user types, what they read.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

const BINARY: &str = env!("CARGO_BIN_EXE_nccl-scorep");

/// Runs the binary with `args`, `NCCL_PROFILER_PLUGIN` and the NCCL configuration file
/// cleared (so the developer's own settings cannot leak in), then the given variables.
fn run<K, V>(args: &[&str], vars: &[(K, V)]) -> Output
where
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    let mut command = Command::new(BINARY);
    command
        .args(args)
        .env_remove("NCCL_PROFILER_PLUGIN")
        .env("NCCL_CONF_FILE", "/nonexistent/nccl-scorep-test.conf");
    for (name, value) in vars {
        command.env(name, value);
    }
    match command.output() {
        Ok(output) => output,
        Err(error) => panic!("cannot run {BINARY}: {error}"),
    }
}

fn stdout_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The item column of a report line ("  found     candidate 1  …"): the text after the
/// status word, up to the next run of two spaces.
fn item_of(line: &str) -> Option<&str> {
    let (_status, rest) = line.trim_start().split_once(' ')?;
    rest.trim_start().split("  ").next()
}

/// The first report line whose item is exactly `item`, e.g. "candidate 1".
fn line_for<'a>(report: &'a str, item: &str) -> &'a str {
    report
        .lines()
        .find(|line| item_of(line) == Some(item))
        .unwrap_or_else(|| panic!("no line for {item:?} in:\n{report}"))
}

#[test]
fn version_prints_the_package_version() {
    let output = run::<&str, &str>(&["--version"], &[]);
    assert!(output.status.success());
    let text = stdout_of(&output);
    let expected = format!("nccl-scorep {}", env!("CARGO_PKG_VERSION"));
    assert!(text.starts_with(&expected), "{text}");
}

#[test]
fn doctor_reports_a_disabled_plugin_for_none() {
    let output = run(
        &["doctor"],
        &[
            ("NCCL_PROFILER_PLUGIN", "none"),
            ("NCCL_SCOREP_JSONL", "yes"),
        ],
    );
    assert_eq!(output.status.code(), Some(0));
    let report = stdout_of(&output);
    let line = line_for(&report, "profiler plugin");
    assert!(line.trim_start().starts_with("disabled"), "{line}");
    assert!(line.contains("NCCL_PROFILER_PLUGIN=none"), "{line}");
    // Every section is there, and our own variables are listed.
    for section in [
        "NCCL",
        "OTF2",
        "MPI",
        "Score-P",
        "Profiler plugin NCCL would load",
    ] {
        assert!(
            report.lines().any(|line| line == section),
            "no {section} section in:\n{report}"
        );
    }
    assert!(
        line_for(&report, "NCCL_SCOREP_JSONL").contains("=yes (valid)"),
        "{report}"
    );
}

#[test]
fn doctor_reports_a_missing_plugin_file() -> std::io::Result<()> {
    let dir = tempfile::tempdir()?;
    let missing = dir.path().join("libnccl-profiler-missing.so");
    let output = run(&["doctor"], &[("NCCL_PROFILER_PLUGIN", &missing)]);
    assert_eq!(output.status.code(), Some(0));
    let report = stdout_of(&output);
    // A path is tried as given and never with the libnccl-profiler- prefix.
    let candidate = line_for(&report, "candidate 1");
    assert!(
        candidate.contains(&*missing.to_string_lossy()),
        "{candidate}"
    );
    assert!(candidate.contains("not found"), "{candidate}");
    assert!(!report.contains("candidate 2"), "{report}");
    let verdict = line_for(&report, "profiler plugin");
    assert!(verdict.contains("not found"), "{verdict}");
    Ok(())
}

#[test]
fn doctor_reads_the_plugin_setting_from_the_nccl_conf_file() -> std::io::Result<()> {
    let dir = tempfile::tempdir()?;
    let conf = dir.path().join("nccl.conf");
    std::fs::write(
        &conf,
        "# a comment\nNCCL_DEBUG=INFO\nNCCL_PROFILER_PLUGIN=None\n",
    )?;
    let output = run(&["doctor"], &[("NCCL_CONF_FILE", &conf)]);
    let report = stdout_of(&output);
    let setting = line_for(&report, "NCCL_PROFILER_PLUGIN");
    assert!(setting.contains(&*conf.to_string_lossy()), "{setting}");
    assert!(
        line_for(&report, "profiler plugin")
            .trim_start()
            .starts_with("disabled"),
        "{report}"
    );
    Ok(())
}

#[test]
fn doctor_rejects_unknown_arguments() {
    let output = run::<&str, &str>(&["doctor", "--no-such-flag"], &[]);
    assert_eq!(output.status.code(), Some(2));
}

/// Builds a shared library from C source with the system C compiler; `None` (and a note
/// on stderr) where there is none, since the tool's other tests need no compiler.
fn compile_library(dir: &Path, name: &str, source: &str) -> Option<std::path::PathBuf> {
    let source_file = dir.join(format!("{name}.c"));
    let library = dir.join(name);
    std::fs::write(&source_file, source).ok()?;
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source_file)
        .status();
    match status {
        Ok(status) if status.success() => Some(library),
        other => {
            eprintln!("skipping: cannot build a test library with cc ({other:?})");
            None
        }
    }
}

#[test]
fn doctor_finds_the_plugin_by_its_short_name_and_lists_its_symbols() -> std::io::Result<()> {
    let dir = tempfile::tempdir()?;
    let source = "const char ncclProfiler_v3[8] = {0};\nconst char ncclProfiler_v1[8] = {0};\n";
    if compile_library(dir.path(), "libnccl-profiler-clitest.so", source).is_none() {
        return Ok(());
    }
    let output = run(
        &["doctor"],
        &[
            ("NCCL_PROFILER_PLUGIN", OsStr::new("clitest")),
            ("LD_LIBRARY_PATH", dir.path().as_os_str()),
        ],
    );
    let report = stdout_of(&output);
    assert!(
        line_for(&report, "candidate 1").contains("not found"),
        "{report}"
    );
    let second = line_for(&report, "candidate 2");
    assert!(second.trim_start().starts_with("found"), "{second}");
    assert!(second.contains("libnccl-profiler-clitest.so"), "{second}");
    assert!(second.contains("LD_LIBRARY_PATH"), "{second}");
    assert!(
        line_for(&report, "symbols").contains("ncclProfiler_v3 ncclProfiler_v1"),
        "{report}"
    );
    assert!(
        line_for(&report, "NCCL 2.23").contains("ncclProfiler_v1"),
        "{report}"
    );
    assert!(
        line_for(&report, "NCCL 2.24–2.25").contains("ncclProfiler_v1"),
        "{report}"
    );
    assert!(
        line_for(&report, "NCCL 2.26").contains("ncclProfiler_v3"),
        "{report}"
    );
    assert!(
        line_for(&report, "NCCL 2.31–2.32").contains("ncclProfiler_v3"),
        "{report}"
    );
    Ok(())
}

#[test]
fn doctor_reports_a_library_without_profiler_symbols() -> std::io::Result<()> {
    let dir = tempfile::tempdir()?;
    let Some(library) = compile_library(dir.path(), "libnot-a-plugin.so", "int not_a_plugin;\n")
    else {
        return Ok(());
    };
    let output = run(&["doctor"], &[("NCCL_PROFILER_PLUGIN", &library)]);
    let report = stdout_of(&output);
    assert!(
        line_for(&report, "candidate 1")
            .trim_start()
            .starts_with("found"),
        "{report}"
    );
    assert!(
        line_for(&report, "symbols").contains("no ncclProfiler_v* symbol"),
        "{report}"
    );
    Ok(())
}

#[test]
fn doctor_checks_every_setting_with_the_plugins_parser() {
    let output = run(
        &["doctor"],
        &[
            ("NCCL_SCOREP_MODE", "turbo"),
            ("NCCL_SCOREP_EVENT", "all"),
            ("NCCL_SCOREP_BUFFER_SIZE", "8M"),
            ("NCCL_SCOREP_HOSTNAME", "../etc"),
        ],
    );
    assert!(output.status.success());
    let report = stdout_of(&output);
    let mode = line_for(&report, "NCCL_SCOREP_MODE");
    assert!(mode.trim_start().starts_with("error"), "{mode}");
    assert!(mode.contains("\"turbo\" is not valid"), "{mode}");
    let misspelt = line_for(&report, "NCCL_SCOREP_EVENT");
    assert!(misspelt.trim_start().starts_with("error"), "{misspelt}");
    assert!(
        misspelt.contains("not a variable of nccl-scorep"),
        "{misspelt}"
    );
    let buffer = line_for(&report, "NCCL_SCOREP_BUFFER_SIZE");
    assert!(buffer.trim_start().starts_with("set"), "{buffer}");
    assert!(buffer.contains("=8M (valid)"), "{buffer}");
    let host = line_for(&report, "NCCL_SCOREP_HOSTNAME");
    assert!(host.trim_start().starts_with("error"), "{host}");
}

#[test]
fn doctor_lists_every_variable_that_the_configuration_reference_documents() {
    let output = run::<&str, &str>(&["doctor", "--variables"], &[]);
    assert!(output.status.success());
    let listed = stdout_of(&output);
    let reference = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md"),
    )
    .unwrap();
    let documented: Vec<&str> = reference
        .lines()
        .filter_map(|line| line.strip_prefix("| `NCCL_SCOREP_"))
        .filter_map(|rest| rest.split('`').next())
        .collect();
    assert!(documented.len() >= 15, "{documented:?}");
    for name in documented {
        let heading = format!("\nNCCL_SCOREP_{name}\n  meaning: ");
        assert!(
            format!("\n{listed}").contains(&heading),
            "NCCL_SCOREP_{name} is documented but not listed:\n{listed}"
        );
    }
    assert!(listed.contains("  default: 4M"), "{listed}");
}

#[test]
fn merge_of_a_directory_that_does_not_exist_names_it_and_exits_2_like_validate() {
    for command in ["merge", "validate"] {
        let output = run::<&str, &str>(&[command, "/nonexistent/run-dir"], &[]);
        assert_eq!(output.status.code(), Some(2), "{command}");
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(said.contains("/nonexistent/run-dir"), "{command}: {said}");
    }
}

#[test]
fn doctor_tells_which_version_a_chained_plugin_gets_from_each_nccl() {
    // A plugin exporting v1 … v6 only: NCCL 2.31–2.32 call us at v7, and we forward v6.
    let older = nccl_sim::recording_plugin_v6_path();
    let output = run(&["doctor"], &[("NCCL_SCOREP_CHAIN", &older)]);
    assert_eq!(output.status.code(), Some(0));
    let report = stdout_of(&output);
    assert!(
        report.lines().any(|line| line == "Chained profiler plugin"),
        "{report}"
    );
    assert!(
        line_for(&report, "library").contains(&*older.to_string_lossy()),
        "{report}"
    );
    let newest = line_for(&report, "NCCL 2.31–2.32");
    assert!(newest.contains("forwarded at ncclProfiler_v6"), "{newest}");
    let oldest = line_for(&report, "NCCL 2.23");
    assert!(oldest.contains("forwarded at ncclProfiler_v1"), "{oldest}");

    // A name that finds nothing: said, with the names NCCL's rules try.
    let output = run(&["doctor"], &[("NCCL_SCOREP_CHAIN", "no-such-plugin")]);
    let report = stdout_of(&output);
    let line = line_for(&report, "chain");
    assert!(line.trim_start().starts_with("error"), "{line}");
    assert!(
        line.contains("no-such-plugin, libnccl-profiler-no-such-plugin.so"),
        "{line}"
    );
}
