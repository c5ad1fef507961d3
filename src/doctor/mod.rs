//! `nccl-scorep doctor`: what this machine offers to the plugin, one line per finding.
//!
//! Every probe is best effort. A missing piece is a line in the report, never an error, so
//! the doctor is useful exactly where something is missing.

mod plugin;
mod python;
mod report;

use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::libsearch::{self, Found, Origin, SearchPath};
use crate::probe;
use nccl_profiler_abi::loader::ReleaseFamily;
use plugin::plugin_section;
use python::{PythonProbe, PythonStatus};
use report::{show, show_os, show_with_target, Report, Status};

/// Launchers that tell each process its rank: the launcher, its rank variable and, where
/// it sets one, its size variable.
const LAUNCHERS: [(&str, &str, Option<&str>); 5] = [
    (
        "Open MPI",
        "OMPI_COMM_WORLD_RANK",
        Some("OMPI_COMM_WORLD_SIZE"),
    ),
    ("PMI (MPICH, Intel MPI)", "PMI_RANK", Some("PMI_SIZE")),
    ("PMIx", "PMIX_RANK", None),
    ("Slurm", "SLURM_PROCID", Some("SLURM_NTASKS")),
    ("torchrun", "RANK", Some("WORLD_SIZE")),
];

/// Lists every variable of the plugin with its values, default and meaning (the full
/// reference is docs/configuration.md).
pub fn variables(out: &mut impl Write) -> io::Result<()> {
    for variable in nccl_profiler_scorep::config::VARIABLES {
        let value = std::env::var_os(variable.name);
        writeln!(out, "{}", variable.name)?;
        writeln!(out, "  meaning: {}", variable.meaning)?;
        writeln!(out, "  values:  {}", variable.values)?;
        writeln!(out, "  default: {}", variable.default)?;
        if let Some(value) = value {
            writeln!(out, "  set to:  {}", show_os(&value))?;
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "NCCL variables kept with the trace when set (they change what NCCL does): {}",
        nccl_scorep_common::provenance::NCCL_VARIABLES.join(", ")
    )
}

/// The system's Python, which Debian's python3-otf2 serves.
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

/// Runs every probe and writes the report.
pub fn run(out: &mut impl Write, version: &str) -> io::Result<()> {
    let search = SearchPath::of_this_process();
    let python = PythonProbe::run();

    let mut report = Report::default();
    let nccl_versions = nccl_section(&mut report, &search, &python);
    otf2_section(&mut report, &search, &python);
    mpi_section(&mut report);
    scorep_section(&mut report);
    plugin_section(&mut report, &search, &nccl_versions);
    plugin::chained_plugin_section(&mut report, &search, &nccl_versions);
    configuration_section(&mut report);

    writeln!(out, "nccl-scorep {version} doctor")?;
    report.write(out)
}

// ---------------------------------------------------------------------------------------
// NCCL

/// An NCCL release number read from a file or package name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NcclVersion {
    major: u32,
    minor: u32,
    text: String,
}

impl NcclVersion {
    /// "2.21.5" or "2.21.5-1"; at least major and minor.
    fn parse(text: &str) -> Option<NcclVersion> {
        let numbers: Vec<&str> = text.split(['.', '-', '+']).collect();
        let number = |index: usize| numbers.get(index).and_then(|part| part.parse::<u32>().ok());
        Some(NcclVersion {
            major: number(0)?,
            minor: number(1)?,
            text: text.to_owned(),
        })
    }

    /// The version in a real library file name such as `libnccl.so.2.21.5`.
    fn from_library_file(path: &Path) -> Option<NcclVersion> {
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        let name = real.file_name()?.to_str()?;
        NcclVersion::parse(name.strip_prefix("libnccl.so.")?)
    }

    fn family(&self) -> Option<ReleaseFamily> {
        ReleaseFamily::of_release(self.major, self.minor)
    }
}

fn is_libnccl_name(name: &OsStr) -> bool {
    let name = name.as_bytes();
    name == b"libnccl.so" || name.starts_with(b"libnccl.so.")
}

/// Reports every reachable `libnccl.so*` and returns the versions it could read.
fn nccl_section(
    report: &mut Report,
    search: &SearchPath,
    python: &PythonProbe,
) -> Vec<NcclVersion> {
    report.section("NCCL");
    let mut libraries: Vec<(Found, Option<NcclVersion>)> = search
        .find_all(is_libnccl_name)
        .into_iter()
        .map(|found| {
            let version = NcclVersion::from_library_file(&found.path);
            (found, version)
        })
        .collect();

    // pip's nvidia-nccl-cuXX wheels ship `nvidia/nccl/lib/libnccl.so.2` without the full
    // version in the name; the wheel's own version fills the gap.
    let wheel_version = match python.nccl_dists.as_slice() {
        [(_, version)] => NcclVersion::parse(version),
        _ => None,
    };
    for dir in &python.nccl_dirs {
        for found in libsearch::files_in(
            &dir.join("lib"),
            is_libnccl_name,
            Origin::Other("Python nvidia-nccl wheel"),
        ) {
            let version =
                NcclVersion::from_library_file(&found.path).or_else(|| wheel_version.clone());
            libraries.push((found, version));
        }
    }
    // The same file is often reachable by several names and from several places.
    let mut seen = Vec::new();
    libraries.retain(|(found, _)| {
        let real = std::fs::canonicalize(&found.path).unwrap_or_else(|_| found.path.clone());
        let first = !seen.contains(&real);
        seen.push(real);
        first
    });

    if libraries.is_empty() {
        report.line(
            Status::Missing,
            "libnccl.so",
            "not in LD_LIBRARY_PATH, the ldconfig cache, the system directories or a Python nvidia-nccl wheel",
        );
    }
    for (found, version) in &libraries {
        let version_text = match version {
            Some(version) => match version.family() {
                Some(family) => format!(
                    "NCCL {}, profiler API up to v{}",
                    version.text, family.newest_api
                ),
                None if (version.major, version.minor) < (2, 23) => {
                    format!(
                        "NCCL {}, too old: profiler plugins need 2.23+",
                        version.text
                    )
                }
                None => format!("NCCL {}, newer than this tool knows", version.text),
            },
            None => "NCCL version unknown".to_owned(),
        };
        let name = found.path.file_name().map(show_os).unwrap_or_default();
        report.line(
            Status::Found,
            name,
            format!(
                "{} ({version_text}; {})",
                show_with_target(&found.path),
                found.origin
            ),
        );
    }
    if let Some(problem) = &search.cache_problem {
        report.line(
            Status::Note,
            "ldconfig cache",
            format!("not read: {problem}"),
        );
    }
    match &python.status {
        PythonStatus::Missing => report.line(
            Status::Missing,
            "python3",
            "not on PATH; Python wheels not checked",
        ),
        PythonStatus::Failed(problem) => report.line(Status::Error, "python3", problem.clone()),
        PythonStatus::Ran(python3) => {
            if python.nccl_dirs.is_empty() {
                report.line(
                    Status::Missing,
                    "nvidia.nccl (Python)",
                    format!("{} finds no nvidia-nccl wheel", show(python3)),
                );
            }
            for (name, version) in &python.nccl_dists {
                report.line(
                    Status::Found,
                    "nvidia.nccl (Python)",
                    format!("{name} {version}"),
                );
            }
        }
    }
    libraries
        .into_iter()
        .filter_map(|(_, version)| version)
        .collect()
}

// ---------------------------------------------------------------------------------------
// OTF2

fn otf2_section(report: &mut Report, search: &SearchPath, python: &PythonProbe) {
    report.section("OTF2");
    let mut library_dirs = Vec::new();
    match probe::which("otf2-config") {
        Some(config) => {
            let version = first_output_line(&config, &["--version"]);
            report.line(
                Status::Found,
                "otf2-config",
                format!("{} ({version})", show(&config)),
            );
            // `otf2-config --ldflags` names the directory of an OTF2 outside the loader's path.
            if let Ok(output) = probe::run(&config, &["--ldflags"], probe::COMMAND_TIMEOUT) {
                library_dirs.extend(
                    output
                        .stdout
                        .split_whitespace()
                        .filter_map(|flag| flag.strip_prefix("-L"))
                        .map(PathBuf::from),
                );
            }
        }
        None => report.line(Status::Missing, "otf2-config", "not on PATH"),
    }

    let is_libotf2 = |name: &OsStr| {
        let name = name.as_bytes();
        name == b"libotf2.so" || name.starts_with(b"libotf2.so.")
    };
    let mut libraries = search.find_all(is_libotf2);
    for dir in &library_dirs {
        libraries.extend(libsearch::files_in(
            dir,
            is_libotf2,
            Origin::Other("otf2-config --ldflags"),
        ));
    }
    let libraries = libsearch::dedup_by_real_path(libraries);
    if libraries.is_empty() {
        report.line(
            Status::Missing,
            "libotf2.so",
            "not in LD_LIBRARY_PATH, the ldconfig cache or the system directories",
        );
    }
    for found in &libraries {
        let name = found.path.file_name().map(show_os).unwrap_or_default();
        report.line(
            Status::Found,
            name,
            format!("{} ({})", show_with_target(&found.path), found.origin),
        );
    }

    match probe::which("otf2-print") {
        Some(path) => report.line(Status::Found, "otf2-print", show(&path)),
        None => report.line(
            Status::Missing,
            "otf2-print",
            "not on PATH (Debian package otf2-tools)",
        ),
    }

    // Debian's python3-otf2 serves the system Python; a Python first on PATH (pyenv, a
    // virtual environment) may not see it.
    let system = Path::new(SYSTEM_PYTHON);
    let system_probe = match &python.status {
        PythonStatus::Ran(first)
            if python.otf2.is_err()
                && system.is_file()
                && std::fs::canonicalize(first).ok() != std::fs::canonicalize(system).ok() =>
        {
            Some(PythonProbe::run_with(Some(system.to_path_buf())))
        }
        _ => None,
    };
    match (&python.status, &python.otf2) {
        (PythonStatus::Ran(first), Ok(module)) => report.line(
            Status::Found,
            "otf2 (Python)",
            format!("{module} (imported by {})", show(first)),
        ),
        (PythonStatus::Ran(first), Err(_))
            if system_probe.as_ref().is_some_and(|p| p.otf2.is_ok()) =>
        {
            let module = system_probe.and_then(|p| p.otf2.ok()).unwrap_or_default();
            report.line(
                Status::Found,
                "otf2 (Python)",
                format!(
                    "{module} (imported by {SYSTEM_PYTHON}, not by {}, the python3 first on \
                     PATH: run OTF2's Python readers with {SYSTEM_PYTHON})",
                    show(first)
                ),
            )
        }
        (PythonStatus::Ran(first), Err(problem)) => report.line(
            Status::Missing,
            "otf2 (Python)",
            format!(
                "import otf2 failed in {}: {problem} (Debian package python3-otf2)",
                show(first)
            ),
        ),
        _ => report.line(
            Status::Missing,
            "otf2 (Python)",
            "not checked: python3 did not run",
        ),
    }
}

// ---------------------------------------------------------------------------------------
// MPI and launchers

fn mpi_section(report: &mut Report) {
    report.section("MPI");
    for launcher in ["mpirun", "mpiexec"] {
        match probe::which(launcher) {
            Some(path) => {
                let version = first_output_line(&path, &["--version"]);
                report.line(
                    Status::Found,
                    launcher,
                    format!("{} ({version})", show(&path)),
                );
            }
            None => report.line(Status::Missing, launcher, "not on PATH"),
        }
    }

    let mut any_launcher = false;
    for (launcher, rank_var, size_var) in LAUNCHERS {
        let Some(rank) = std::env::var_os(rank_var) else {
            continue;
        };
        any_launcher = true;
        let size = size_var
            .and_then(|size_var| Some((size_var, std::env::var_os(size_var)?)))
            .map(|(size_var, size)| format!(", {size_var}={}", show_os(&size)))
            .unwrap_or_default();
        report.line(
            Status::Set,
            launcher,
            format!("{rank_var}={}{size}", show_os(&rank)),
        );
    }
    if !any_launcher {
        let names: Vec<&str> = LAUNCHERS.iter().map(|(_, rank_var, _)| *rank_var).collect();
        report.line(
            Status::Unset,
            "launcher",
            format!(
                "none of {} is set: not started by an MPI launcher, srun or torchrun",
                names.join(", ")
            ),
        );
    }
}

// ---------------------------------------------------------------------------------------
// Score-P

fn scorep_section(report: &mut Report) {
    report.section("Score-P");
    match probe::which("scorep") {
        Some(path) => report.line(Status::Found, "scorep", show(&path)),
        None => report.line(Status::Missing, "scorep", "not on PATH"),
    }
    match probe::which("scorep-config") {
        Some(path) => {
            let version = first_output_line(&path, &["--version"]);
            report.line(
                Status::Found,
                "scorep-config",
                format!("{} ({version})", show(&path)),
            );
        }
        None => report.line(Status::Missing, "scorep-config", "not on PATH"),
    }
    let variables = probe::env_vars_with_prefix("SCOREP_");
    if variables.is_empty() {
        report.line(Status::Unset, "SCOREP_*", "no Score-P variable is set");
    }
    for (name, value) in variables {
        report.line(Status::Set, name, show_os(&value));
    }
}

// ---------------------------------------------------------------------------------------
// Our own configuration

fn configuration_section(report: &mut Report) {
    report.section("nccl-scorep configuration");
    let variables = probe::env_vars_with_prefix("NCCL_SCOREP_");
    if variables.is_empty() {
        report.line(
            Status::Unset,
            "NCCL_SCOREP_*",
            "none set: the plugin uses its defaults",
        );
    }
    // The plugin's own parser: what it would say at its first init is said here.
    let (_, warnings) = nccl_profiler_scorep::config::Config::from_env();
    let (_, host_problem) = nccl_scorep_common::job::hostname_and_problem();
    for (name, value) in variables {
        let problem = warnings
            .iter()
            .map(|w| w.0.clone())
            .chain(host_problem.clone())
            .find(|w| w.starts_with(&format!("{name}=")));
        if !nccl_profiler_scorep::config::is_our_variable(&name) {
            report.line(
                Status::Error,
                name,
                format!(
                    "={}: not a variable of nccl-scorep (misspelt? \
                     `nccl-scorep doctor --variables` lists them)",
                    show_os(&value)
                ),
            );
        } else if let Some(problem) = problem {
            report.line(Status::Error, name, problem);
        } else {
            report.line(Status::Set, name, format!("={} (valid)", show_os(&value)));
        }
    }
    let mask_note = "is read by NCCL's example plugin, not by nccl-scorep (use NCCL_SCOREP_*)";
    match std::env::var_os("NCCL_PROFILE_EVENT_MASK") {
        Some(value) => report.line(
            Status::Note,
            "NCCL_PROFILE_EVENT_MASK",
            format!("={}: {mask_note}", show_os(&value)),
        ),
        None => report.line(Status::Note, "NCCL_PROFILE_EVENT_MASK", mask_note),
    }
}

// ---------------------------------------------------------------------------------------
// Helpers

/// The first line a `--version`-style command prints, or why there is none.
fn first_output_line(program: &Path, args: &[&str]) -> String {
    match probe::run(program, args, probe::COMMAND_TIMEOUT) {
        Ok(output) => match output.first_line() {
            Some(line) => line.to_owned(),
            None if output.success => "printed nothing".to_owned(),
            None => "failed without a message".to_owned(),
        },
        Err(problem) => problem,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_versions_come_from_file_names() {
        let version = NcclVersion::from_library_file(Path::new("/nonexistent/libnccl.so.2.21.5"));
        assert_eq!(
            version.map(|version| (version.major, version.minor)),
            Some((2, 21))
        );
        // Only the major version: not enough to pick a family.
        assert_eq!(
            NcclVersion::from_library_file(Path::new("/nonexistent/libnccl.so.2")),
            None
        );
        assert_eq!(
            NcclVersion::from_library_file(Path::new("/nonexistent/libnccl.so")),
            None
        );
        let wheel = NcclVersion::parse("2.28.3").and_then(|version| version.family());
        assert_eq!(wheel.map(|family| family.newest_api), Some(5));
    }

    #[test]
    fn only_libnccl_itself_counts_as_nccl() {
        assert!(is_libnccl_name(OsStr::new("libnccl.so")));
        assert!(is_libnccl_name(OsStr::new("libnccl.so.2.21.5")));
        assert!(!is_libnccl_name(OsStr::new("libnccl-net.so")));
        assert!(!is_libnccl_name(OsStr::new("libnccl_static.a")));
    }
}
