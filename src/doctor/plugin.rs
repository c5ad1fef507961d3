//! Which profiler plugin NCCL would load with the current environment, and which API
//! version each NCCL release would use from it.

use std::ffi::{c_void, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

use super::report::{show, show_os, show_with_target, Report, Status};
use super::NcclVersion;
use crate::libsearch::{Origin, SearchPath};
use nccl_profiler_abi::loader::{
    self, ApiVersion, PluginSelection, ReleaseFamily, RELEASE_FAMILIES,
};

/// Where the value of `NCCL_PROFILER_PLUGIN` that NCCL would see comes from.
#[derive(Debug)]
enum PluginSetting {
    Unset,
    Environment(OsString),
    ConfFile(OsString, PathBuf),
}

impl PluginSetting {
    fn value(&self) -> Option<&OsStr> {
        match self {
            PluginSetting::Unset => None,
            PluginSetting::Environment(value) | PluginSetting::ConfFile(value, _) => Some(value),
        }
    }

    /// The process environment wins; then NCCL's configuration files, in NCCL's order.
    fn current() -> PluginSetting {
        if let Some(value) = std::env::var_os(loader::PLUGIN_ENV) {
            return PluginSetting::Environment(value);
        }
        nccl_conf_files()
            .into_iter()
            .find_map(|file| {
                let contents = std::fs::read(&file).ok()?;
                let value = loader::conf_file_value(&contents, loader::PLUGIN_ENV)?;
                Some(PluginSetting::ConfFile(value, file))
            })
            .unwrap_or(PluginSetting::Unset)
    }
}

/// NCCL reads `$NCCL_CONF_FILE` (or `~/.nccl.conf` when that is unset or empty), then
/// `/etc/nccl.conf`. NCCL takes the home directory from the password database; `$HOME`
/// is the same on every sane system and needs no unsafe code.
fn nccl_conf_files() -> Vec<PathBuf> {
    let user_file = match std::env::var_os("NCCL_CONF_FILE").filter(|file| !file.is_empty()) {
        Some(file) => Some(PathBuf::from(file)),
        None => std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".nccl.conf")),
    };
    user_file
        .into_iter()
        .chain([PathBuf::from("/etc/nccl.conf")])
        .collect()
}

pub(super) fn plugin_section(
    report: &mut Report,
    search: &SearchPath,
    nccl_versions: &[NcclVersion],
) {
    report.section("Profiler plugin NCCL would load");
    let setting = PluginSetting::current();
    match &setting {
        PluginSetting::Unset => report.line(
            Status::Unset,
            loader::PLUGIN_ENV,
            format!("NCCL tries {}", loader::DEFAULT_PLUGIN_LIBRARY),
        ),
        PluginSetting::Environment(value) => {
            report.line(Status::Set, loader::PLUGIN_ENV, show_os(value))
        }
        PluginSetting::ConfFile(value, file) => report.line(
            Status::Set,
            loader::PLUGIN_ENV,
            format!(
                "{} (from {}; the environment does not set it)",
                show_os(value),
                show(file)
            ),
        ),
    }

    let value = setting.value().map(show_os).unwrap_or_default();
    match loader::plugin_selection(setting.value()) {
        PluginSelection::Disabled => {
            report.line(
                Status::Disabled,
                "profiler plugin",
                format!(
                    "{}={value}: NCCL 2.28+ loads no profiler plugin",
                    loader::PLUGIN_ENV
                ),
            );
            report.line(
                Status::Note,
                "NCCL 2.23–2.27",
                "do not know \"none\": they look for a library of that name, find none and also run without a profiler",
            );
        }
        PluginSelection::GlobalScope => {
            report.line(
                Status::Note,
                "global scope",
                format!(
                    "\"{value}\" is a prefix of STATIC_PLUGIN: NCCL looks for ncclProfiler_v* in the program and its \
                     RTLD_GLOBAL libraries (dlopen(NULL)), which the doctor cannot see; LD_PRELOAD libraries count"
                ),
            );
            preloaded_libraries(report, search, nccl_versions);
        }
        PluginSelection::Candidates(names) => {
            candidate_libraries(report, search, &names, nccl_versions);
            if names.len() == 2 {
                report.line(
                    Status::Note,
                    "NCCL 2.23–2.25",
                    format!(
                        "try only \"{}\", never {}",
                        show_os(&names[0]),
                        show_os(&names[1])
                    ),
                );
            }
            let is_path = names
                .first()
                .is_some_and(|name| name.as_bytes().contains(&b'/'));
            if is_path
                && nccl_versions
                    .iter()
                    .any(|version| version.text.starts_with("2.27.3"))
            {
                report.line(
                    Status::Note,
                    "NCCL 2.27.3",
                    "cannot load a plugin by path (NVIDIA/nccl issue #1732, fixed in 2.27.5)",
                );
            }
        }
    }
}

/// `NCCL_SCOREP_CHAIN`: the plugin nccl-scorep would load beside itself, found as NCCL
/// finds its own, and the version each NCCL release family would forward to it.
pub(super) fn chained_plugin_section(
    report: &mut Report,
    search: &SearchPath,
    nccl_versions: &[NcclVersion],
) {
    const CHAIN_ENV: &str = "NCCL_SCOREP_CHAIN";
    let value = std::env::var_os(CHAIN_ENV).filter(|value| !value.is_empty());
    report.section("Chained profiler plugin");
    let Some(value) = value else {
        report.line(Status::Unset, CHAIN_ENV, "no plugin chained");
        return;
    };
    report.line(Status::Set, CHAIN_ENV, show_os(&value));
    let names = match loader::plugin_selection(Some(&value)) {
        PluginSelection::Disabled => {
            report.line(
                Status::Error,
                "chain",
                "names no plugin: nothing is chained",
            );
            return;
        }
        PluginSelection::GlobalScope => {
            report.line(
                Status::Error,
                "chain",
                "a plugin linked into the program cannot be chained: give a library's path or name",
            );
            return;
        }
        PluginSelection::Candidates(names) => names,
    };
    let Some((found, exported)) = names.iter().find_map(|name| {
        let found = search.resolve(name)?;
        let exported = exported_api_versions(&found.path).ok()?;
        Some((found, exported))
    }) else {
        let tried: Vec<String> = names.iter().map(|name| show_os(name)).collect();
        report.line(
            Status::Error,
            "chain",
            format!(
                "none of {} can be found and loaded: the job runs without it (one warning)",
                tried.join(", ")
            ),
        );
        return;
    };
    report.line(Status::Found, "library", show_with_target(&found.path));
    if exported.is_empty() {
        report.line(
            Status::Error,
            "symbols",
            "no ncclProfiler_v* symbol: it cannot be chained",
        );
        return;
    }
    let installed: Vec<ReleaseFamily> = nccl_versions
        .iter()
        .filter_map(NcclVersion::family)
        .collect();
    let ours: Vec<ApiVersion> = (1..=loader::NEWEST_API_VERSION).collect();
    for family in RELEASE_FAMILIES {
        let here = if installed.contains(&family) {
            "  <- NCCL found on this machine"
        } else {
            ""
        };
        let item = format!("NCCL {}", family.releases);
        let Some(called) = family.pick(&ours) else {
            continue;
        };
        match nccl_profiler_scorep::chain::chosen_version(called, &exported) {
            Some(version) => report.line(
                Status::Uses,
                item,
                format!("forwarded at {}{here}", loader::symbol_name(version)),
            ),
            None => report.line(
                Status::Missing,
                item,
                format!(
                    "not chained: NCCL calls v{called}, the plugin exports v{} (docs/chaining.md){here}",
                    exported
                        .iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join(", v")
                ),
            ),
        }
    }
}

/// Tries the names in NCCL's order; NCCL keeps the first library that loads, whether or
/// not it exports a profiler symbol.
fn candidate_libraries(
    report: &mut Report,
    search: &SearchPath,
    names: &[OsString],
    nccl_versions: &[NcclVersion],
) {
    for (index, name) in names.iter().enumerate() {
        let item = format!("candidate {}", index + 1);
        let shown = show_os(name);
        let Some(found) = search.resolve(name) else {
            let searched = if name.as_bytes().contains(&b'/') {
                "no such file"
            } else {
                "searched LD_LIBRARY_PATH, the ldconfig cache and the system directories"
            };
            report.line(
                Status::Missing,
                item,
                format!("{shown}: not found ({searched})"),
            );
            continue;
        };
        let path = show_with_target(&found.path);
        let detail = match found.origin {
            Origin::Path => format!("{path} (a path: not searched for)"),
            origin => format!("{shown}: {path} (via {origin})"),
        };
        report.line(Status::Found, item, detail);
        match exported_api_versions(&found.path) {
            Ok(exported) => {
                symbol_report(report, &exported, nccl_versions);
                return;
            }
            // NCCL logs the dlopen error and goes on with the next name.
            Err(problem) => report.line(
                Status::Error,
                "dlopen",
                format!("{problem}; NCCL skips this file"),
            ),
        }
    }
    report.line(
        Status::Missing,
        "profiler plugin",
        "not found: NCCL runs without a profiler (2.28+ first checks the loaded net plugin library for the symbols)",
    );
}

/// For `NCCL_PROFILER_PLUGIN=STATIC_PLUGIN`: the preloaded libraries are the part of the
/// global scope the doctor can inspect.
fn preloaded_libraries(report: &mut Report, search: &SearchPath, nccl_versions: &[NcclVersion]) {
    let preload = std::env::var_os("LD_PRELOAD").unwrap_or_default();
    let names: Vec<&[u8]> = preload
        .as_bytes()
        .split(|&byte| byte == b' ' || byte == b':')
        .filter(|name| !name.is_empty())
        .collect();
    if names.is_empty() {
        report.line(
            Status::Unset,
            "LD_PRELOAD",
            "no preloaded library: only a plugin linked into the application itself would be found",
        );
    }
    for (index, name) in names.into_iter().enumerate() {
        let name = OsStr::from_bytes(name);
        let item = format!("LD_PRELOAD {}", index + 1);
        let Some(found) = search.resolve(name) else {
            report.line(
                Status::Missing,
                item,
                format!("{}: not found", show_os(name)),
            );
            continue;
        };
        report.line(Status::Found, item, show_with_target(&found.path));
        match exported_api_versions(&found.path) {
            Ok(exported) if !exported.is_empty() => symbol_report(report, &exported, nccl_versions),
            Ok(_) => report.line(Status::Note, "symbols", "no ncclProfiler_v* symbol"),
            Err(problem) => report.line(Status::Error, "dlopen", problem),
        }
    }
}

/// Which `ncclProfiler_vN` symbols a library exports, newest first. The library is opened
/// the way NCCL opens it, so a load error here is the error NCCL would meet.
fn exported_api_versions(path: &Path) -> Result<Vec<ApiVersion>, String> {
    // SAFETY: opening a library runs its initialisers. That is what NCCL itself would do
    // with this file, and inspecting it on the user's behalf is the point of the doctor.
    let library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }
        .map_err(|error| format!("cannot be opened: {error}"))?;
    let exported = (1..=loader::NEWEST_API_VERSION)
        .rev()
        .filter(|&version| {
            let symbol = format!("{}\0", loader::symbol_name(version));
            // SAFETY: the symbol is only looked up, never read or called.
            unsafe { library.get::<*const c_void>(symbol.as_bytes()) }.is_ok()
        })
        .collect();
    Ok(exported)
}

fn symbol_report(report: &mut Report, exported: &[ApiVersion], nccl_versions: &[NcclVersion]) {
    if exported.is_empty() {
        report.line(
            Status::Error,
            "symbols",
            "no ncclProfiler_v* symbol: NCCL loads this file, calls it unsupported and runs without a profiler",
        );
        return;
    }
    let names: Vec<String> = exported
        .iter()
        .map(|&version| loader::symbol_name(version))
        .collect();
    report.line(Status::Found, "symbols", names.join(" "));

    let installed: Vec<ReleaseFamily> = nccl_versions
        .iter()
        .filter_map(NcclVersion::family)
        .collect();
    for family in RELEASE_FAMILIES {
        let here = if installed.contains(&family) {
            "  <- NCCL found on this machine"
        } else {
            ""
        };
        let item = format!("NCCL {}", family.releases);
        match family.pick(exported) {
            Some(version) => report.line(
                Status::Uses,
                item,
                format!("{}{here}", loader::symbol_name(version)),
            ),
            None => report.line(
                Status::Missing,
                item,
                format!(
                    "no symbol it knows (needs ncclProfiler_v1..v{}){here}",
                    family.newest_api
                ),
            ),
        }
    }
}
