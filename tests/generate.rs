//! `nccl-scorep generate`: the manual pages and shell completions installed with the tool,
//! written from its own command-line definition, and hidden from its help.

use std::path::Path;
use std::process::Command;

const BINARY: &str = env!("CARGO_BIN_EXE_nccl-scorep");

/// The subcommands users see, each with its own manual page.
const SUBCOMMANDS: &[&str] = &[
    "run", "exec", "doctor", "summary", "status", "convert", "merge", "compare", "profile",
    "export", "report", "validate",
];

fn generate(args: &[&str], dir: &Path) -> String {
    let output = Command::new(BINARY)
        .arg("generate")
        .args(args)
        .arg(dir)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .expect("run nccl-scorep generate");
    assert!(
        output.status.success(),
        "nccl-scorep generate {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

#[test]
fn help_does_not_show_generate() {
    let output = Command::new(BINARY).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("validate"), "{help}");
    assert!(!help.contains("generate"), "{help}");
}

#[test]
fn man_pages_one_per_visible_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let man1 = dir.path().join("man1");
    let printed = generate(&["man"], &man1);

    let mut expected = vec!["nccl-scorep.1".to_owned()];
    expected.extend(SUBCOMMANDS.iter().map(|sub| format!("nccl-scorep-{sub}.1")));
    let listed: Vec<String> = printed
        .lines()
        .map(|line| {
            let path = Path::new(line);
            assert_eq!(path.parent(), Some(man1.as_path()), "{line}");
            path.file_name().unwrap().to_string_lossy().into_owned()
        })
        .collect();
    assert_eq!(listed, expected);
    let mut on_disk: Vec<String> = std::fs::read_dir(&man1)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut sorted = expected.clone();
    sorted.sort();
    assert_eq!(on_disk, sorted, "no page for generate or help");

    let top = std::fs::read_to_string(man1.join("nccl-scorep.1")).unwrap();
    // .TH title section date source manual: the date from SOURCE_DATE_EPOCH, the version.
    let th = top.lines().find(|line| line.starts_with(".TH ")).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        th.starts_with(&format!(
            ".TH nccl-scorep 1 2023-11-14 \"nccl-scorep {version}"
        )),
        "{th}"
    );
    assert!(th.ends_with("\"nccl-scorep manual\""), "{th}");
    for sub in SUBCOMMANDS {
        assert!(
            top.contains(&format!("nccl\\-scorep\\-{sub}(1)")),
            "{sub} in\n{top}"
        );
    }
    assert!(!top.contains("generate"), "{top}");

    let doctor = std::fs::read_to_string(man1.join("nccl-scorep-doctor.1")).unwrap();
    assert!(
        doctor.contains(".TH nccl-scorep-doctor 1 2023-11-14 "),
        "{doctor}"
    );
    assert!(doctor.contains("\\-\\-variables"), "{doctor}");
    assert!(doctor.contains("NCCL_SCOREP_*"), "{doctor}");
}

#[test]
fn completions_under_the_names_each_shell_looks_for() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, name, marker) in [
        ("bash", "nccl-scorep", "complete -F _nccl__scorep"),
        ("zsh", "_nccl-scorep", "#compdef nccl-scorep"),
        ("fish", "nccl-scorep.fish", "complete -c nccl-scorep"),
    ] {
        let printed = generate(&["completions", shell], dir.path());
        let path = dir.path().join(name);
        assert_eq!(printed.trim_end(), path.display().to_string());
        let script = std::fs::read_to_string(&path).unwrap();
        assert!(script.contains(marker), "{shell}: {marker} in\n{script}");
        for word in ["validate", "summary", "variables", "fail-on-regression"] {
            assert!(script.contains(word), "{shell}: {word}");
        }
    }
}

#[test]
fn unknown_shell_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(BINARY)
        .args(["generate", "completions", "tcsh"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("tcsh"));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
