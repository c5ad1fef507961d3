//! `nccl-scorep generate`: the manual pages and shell completions, written from the
//! command-line definition itself, for installation (`scripts/install-tree.sh`). Hidden
//! from `--help`: users read the results, not the command.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use clap_complete::Shell;

/// What `generate` writes.
#[derive(Debug, Subcommand)]
pub enum What {
    /// The manual pages, section 1: nccl-scorep.1 and nccl-scorep-<subcommand>.1 for
    /// every subcommand.
    Man {
        /// The directory to write them to (created when missing).
        dir: PathBuf,
    },
    /// The completion script of a shell, under the name that shell's completion directory
    /// expects: `nccl-scorep` (bash), `_nccl-scorep` (zsh), `nccl-scorep.fish` (fish).
    Completions {
        /// The shell.
        shell: Shell,
        /// The directory to write it to (created when missing).
        dir: PathBuf,
    },
}

/// The name of the program in the pages and scripts.
const BIN_NAME: &str = "nccl-scorep";

/// Writes what was asked for, and prints each file written on stdout.
pub fn run(what: What, cmd: clap::Command, version: &str) -> io::Result<()> {
    let written = match what {
        What::Man { dir } => man_pages(cmd, version, &dir)?,
        What::Completions { shell, dir } => vec![completions(cmd, shell, &dir)?],
    };
    for path in written {
        println!("{}", path.display());
    }
    Ok(())
}

/// Writes one page for the tool and one for each subcommand that is not hidden, and
/// returns their paths (the tool's first).
pub fn man_pages(cmd: clap::Command, version: &str, dir: &Path) -> io::Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)?;
    // `help` is not a command worth a page; building fills in the subcommands' display
    // names ("nccl-scorep-run"), which name their pages.
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let title = Title {
        date: page_date(),
        source: format!("{BIN_NAME} {version}"),
        manual: "nccl-scorep manual",
    };
    let mut written = vec![title.write(cmd.clone(), dir)?];
    for sub in cmd.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        written.push(title.write(sub.clone(), dir)?);
    }
    Ok(written)
}

/// The `.TH` fields every page shares.
struct Title {
    date: String,
    source: String,
    manual: &'static str,
}

impl Title {
    fn write(&self, cmd: clap::Command, dir: &Path) -> io::Result<PathBuf> {
        clap_mangen::Man::new(cmd)
            .date(&self.date)
            .source(&self.source)
            .manual(self.manual)
            .generate_to(dir)
    }
}

/// The pages' date, YYYY-MM-DD: from `SOURCE_DATE_EPOCH` when the packager sets it (a
/// reproducible build), else today. Never empty: an empty date shifts the other `.TH`
/// fields to the wrong places.
fn page_date() -> String {
    let from_epoch = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|text| text.trim().parse::<i64>().ok())
        .and_then(|seconds| chrono::DateTime::from_timestamp(seconds, 0));
    match from_epoch {
        Some(time) => time.format("%Y-%m-%d").to_string(),
        None => chrono::Local::now().format("%Y-%m-%d").to_string(),
    }
}

/// The file name each shell's completion directory looks for.
pub fn completion_file_name(shell: Shell) -> String {
    match shell {
        Shell::Bash => BIN_NAME.to_owned(),
        Shell::Zsh => format!("_{BIN_NAME}"),
        Shell::Fish => format!("{BIN_NAME}.fish"),
        Shell::Elvish => format!("{BIN_NAME}.elv"),
        Shell::PowerShell => format!("_{BIN_NAME}.ps1"),
        // Shells added to clap_complete later: its own choice of name.
        _ => format!("{BIN_NAME}.{shell}"),
    }
}

/// Writes the completion script of `shell` into `dir` and returns its path.
pub fn completions(mut cmd: clap::Command, shell: Shell, dir: &Path) -> io::Result<PathBuf> {
    fs::create_dir_all(dir)?;
    let path = dir.join(completion_file_name(shell));
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, BIN_NAME, &mut script);
    fs::write(&path, script)?;
    Ok(path)
}
