//! NCCL's rules for choosing the profiler plugin, as pure functions.
//!
//! Mirrors `ncclProfilerPluginLoad` (`src/plugin/profiler.cc`) and `openPluginLib` /
//! `tryOpenLib` (`src/plugin/plugin_open.cc`) of NCCL 2.28 and later.
//! Nothing here touches the file system or the process
//! environment, so `nccl-scorep doctor` and nccl-sim's loader share the same rules.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// The variable NCCL reads to choose the profiler plugin.
pub const PLUGIN_ENV: &str = "NCCL_PROFILER_PLUGIN";

/// The library NCCL tries when [`PLUGIN_ENV`] is unset or empty.
pub const DEFAULT_PLUGIN_LIBRARY: &str = "libnccl-profiler.so";

/// The prefix of the second name NCCL tries for a bare plugin name.
const PLUGIN_PREFIX: &str = "libnccl-profiler";

/// NCCL copies every library name into a `char[255]` with `snprintf`, so names longer than
/// this many bytes are cut.
const MAX_NAME_BYTES: usize = 254;

/// What NCCL does about the profiler plugin for one value of [`PLUGIN_ENV`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSelection {
    /// The value is `none` (any case): NCCL 2.28+ loads no profiler.
    Disabled,
    /// The value is a case-insensitive prefix of `STATIC_PLUGIN` (`s`, `static`, …):
    /// NCCL calls `dlopen(NULL)` and looks for the symbols in the program itself and in
    /// the libraries loaded with `RTLD_GLOBAL`.
    GlobalScope,
    /// NCCL `dlopen`s these names in order (`RTLD_NOW | RTLD_LOCAL`) and keeps the first
    /// that loads, whether or not it exports a profiler symbol.
    Candidates(Vec<OsString>),
}

/// The libraries NCCL would try for `value`, the content of [`PLUGIN_ENV`] (`None` when it
/// is not set).
pub fn plugin_selection(value: Option<&OsStr>) -> PluginSelection {
    let value = value.map(OsStr::as_bytes).unwrap_or_default();
    if value.eq_ignore_ascii_case(b"none") {
        return PluginSelection::Disabled;
    }
    // An empty value counts as unset: `openPluginLib` falls back to the default name.
    if value.is_empty() {
        return PluginSelection::Candidates(vec![OsString::from(DEFAULT_PLUGIN_LIBRARY)]);
    }

    let as_given = truncated(value.to_vec());
    // `tryOpenLib` runs this test on every name it opens, but the second name below starts
    // with "libnccl" and can never match, so only the value as given can.
    if is_static_plugin_prefix(&as_given) {
        return PluginSelection::GlobalScope;
    }
    let mut candidates = vec![OsString::from_vec(as_given)];
    if wants_prefixed_name(value) {
        let mut prefixed = format!("{PLUGIN_PREFIX}-").into_bytes();
        prefixed.extend_from_slice(value);
        prefixed.extend_from_slice(b".so");
        candidates.push(OsString::from_vec(truncated(prefixed)));
    }
    PluginSelection::Candidates(candidates)
}

/// `strncasecmp(name, "STATIC_PLUGIN", strlen(name)) == 0` for a non-empty name.
fn is_static_plugin_prefix(name: &[u8]) -> bool {
    const STATIC_PLUGIN: &[u8] = b"STATIC_PLUGIN";
    !name.is_empty()
        && name.len() <= STATIC_PLUGIN.len()
        && name.eq_ignore_ascii_case(&STATIC_PLUGIN[..name.len()])
}

/// NCCL also tries `libnccl-profiler-<value>.so` unless the value is a path or already a
/// full library name (`lib*.so`).
fn wants_prefixed_name(value: &[u8]) -> bool {
    let is_path = value.contains(&b'/');
    let is_library_name = value.starts_with(b"lib") && value.ends_with(b".so");
    !is_path && !is_library_name
}

fn truncated(mut name: Vec<u8>) -> Vec<u8> {
    name.truncate(MAX_NAME_BYTES);
    name
}

/// A version of the profiler API: the `N` of the exported symbol `ncclProfiler_vN`.
pub type ApiVersion = u8;

/// The newest profiler API this code knows about.
pub const NEWEST_API_VERSION: ApiVersion = 7;

/// The symbol name for an API version, e.g. `ncclProfiler_v7`.
pub fn symbol_name(version: ApiVersion) -> String {
    format!("ncclProfiler_v{version}")
}

/// A group of NCCL releases that look for the same profiler symbols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseFamily {
    /// The releases, as people write them ("2.24–2.25").
    pub releases: &'static str,
    /// The oldest and newest `(major, minor)` release of the family.
    pub first: (u32, u32),
    pub last: (u32, u32),
    /// NCCL looks for `ncclProfiler_v<newest_api>` first, then every older version down to
    /// v1, and takes the first symbol it finds.
    pub newest_api: ApiVersion,
}

/// Every NCCL release with a profiler plugin interface, oldest first.
pub const RELEASE_FAMILIES: [ReleaseFamily; 7] = [
    family("2.23", (2, 23), (2, 23), 1),
    family("2.24–2.25", (2, 24), (2, 25), 2),
    family("2.26", (2, 26), (2, 26), 3),
    family("2.27", (2, 27), (2, 27), 4),
    family("2.28", (2, 28), (2, 28), 5),
    family("2.29–2.30", (2, 29), (2, 30), 6),
    family("2.31–2.32", (2, 31), (2, 32), 7),
];

const fn family(
    releases: &'static str,
    first: (u32, u32),
    last: (u32, u32),
    newest_api: ApiVersion,
) -> ReleaseFamily {
    ReleaseFamily {
        releases,
        first,
        last,
        newest_api,
    }
}

impl ReleaseFamily {
    /// The family of NCCL `major.minor`, if it has a profiler plugin interface that this
    /// code knows.
    pub fn of_release(major: u32, minor: u32) -> Option<ReleaseFamily> {
        RELEASE_FAMILIES
            .into_iter()
            .find(|family| family.first <= (major, minor) && (major, minor) <= family.last)
    }

    /// The API version this family uses from a library exporting `exported`, or `None`
    /// when it finds no symbol it knows (NCCL then unloads the library and runs without a
    /// profiler).
    pub fn pick(&self, exported: &[ApiVersion]) -> Option<ApiVersion> {
        (1..=self.newest_api)
            .rev()
            .find(|version| exported.contains(version))
    }
}

/// The value NCCL's configuration files give to `name`, from the text of one file.
///
/// NCCL reads `$NCCL_CONF_FILE` (or `~/.nccl.conf` when that is unset or empty), then
/// `/etc/nccl.conf`, and sets each `NAME=VALUE` line without overwriting what is already
/// set, so the process environment wins over the files and the first file over the second.
/// Lines starting with `#` are comments; nothing is trimmed or unquoted.
pub fn conf_file_value(contents: &[u8], name: &str) -> Option<OsString> {
    contents
        .split(|&byte| byte == b'\n')
        .filter(|line| !line.starts_with(b"#"))
        .find_map(|line| {
            let equals = line.iter().position(|&byte| byte == b'=')?;
            (&line[..equals] == name.as_bytes())
                .then(|| OsString::from_vec(line[equals + 1..].to_vec()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selection(value: Option<&str>) -> PluginSelection {
        plugin_selection(value.map(OsStr::new))
    }

    fn candidates(names: &[&str]) -> PluginSelection {
        PluginSelection::Candidates(names.iter().map(OsString::from).collect())
    }

    #[test]
    fn unset_or_empty_means_the_default_library() {
        assert_eq!(selection(None), candidates(&["libnccl-profiler.so"]));
        assert_eq!(selection(Some("")), candidates(&["libnccl-profiler.so"]));
    }

    #[test]
    fn none_in_any_case_disables_profiling() {
        for value in ["none", "NONE", "None"] {
            assert_eq!(selection(Some(value)), PluginSelection::Disabled, "{value}");
        }
        // Only the whole word counts.
        assert_eq!(
            selection(Some("nonexistent")),
            candidates(&["nonexistent", "libnccl-profiler-nonexistent.so"])
        );
    }

    #[test]
    fn a_bare_name_is_tried_as_given_then_with_the_plugin_prefix() {
        assert_eq!(
            selection(Some("scorep")),
            candidates(&["scorep", "libnccl-profiler-scorep.so"])
        );
    }

    #[test]
    fn a_full_library_name_is_tried_alone() {
        assert_eq!(selection(Some("libfoo.so")), candidates(&["libfoo.so"]));
        // "lib" and ".so" must both be there to skip the prefixed name.
        assert_eq!(
            selection(Some("libfoo.so.1")),
            candidates(&["libfoo.so.1", "libnccl-profiler-libfoo.so.1.so"])
        );
        assert_eq!(
            selection(Some("foo.so")),
            candidates(&["foo.so", "libnccl-profiler-foo.so.so"])
        );
    }

    #[test]
    fn a_path_is_tried_alone() {
        assert_eq!(selection(Some("/abs/x.so")), candidates(&["/abs/x.so"]));
        assert_eq!(selection(Some("rel/dir/x")), candidates(&["rel/dir/x"]));
    }

    #[test]
    fn prefixes_of_static_plugin_mean_the_global_scope() {
        for value in ["s", "S", "static", "STATIC_PLUGIN", "static_plugin"] {
            assert_eq!(
                selection(Some(value)),
                PluginSelection::GlobalScope,
                "{value}"
            );
        }
        // Longer than "STATIC_PLUGIN": an ordinary name.
        assert_eq!(
            selection(Some("STATIC_PLUGINS")),
            candidates(&["STATIC_PLUGINS", "libnccl-profiler-STATIC_PLUGINS.so"])
        );
    }

    #[test]
    fn long_names_are_cut_like_nccl_cuts_them() {
        let long = "x".repeat(300);
        let PluginSelection::Candidates(names) = selection(Some(&long)) else {
            panic!("a long name is still a name");
        };
        assert_eq!(names.len(), 2);
        assert_eq!(names[0].len(), MAX_NAME_BYTES);
        assert!(names[1].as_bytes().starts_with(b"libnccl-profiler-xxx"));
        assert_eq!(names[1].len(), MAX_NAME_BYTES);
    }

    #[test]
    fn each_family_takes_the_newest_symbol_it_knows() {
        let all: Vec<ApiVersion> = (1..=NEWEST_API_VERSION).collect();
        let newest: Vec<ApiVersion> = RELEASE_FAMILIES
            .iter()
            .map(|family| family.pick(&all).unwrap_or(0))
            .collect();
        assert_eq!(newest, [1, 2, 3, 4, 5, 6, 7]);

        let family_2_27 = ReleaseFamily::of_release(2, 27);
        assert_eq!(family_2_27.and_then(|family| family.pick(&[1, 2])), Some(2));
        // A v5-only plugin is unusable before 2.28.
        assert_eq!(family_2_27.and_then(|family| family.pick(&[5])), None);
    }

    #[test]
    fn releases_map_to_their_family() {
        let newest_api =
            |major, minor| ReleaseFamily::of_release(major, minor).map(|f| f.newest_api);
        assert_eq!(newest_api(2, 22), None);
        assert_eq!(newest_api(2, 23), Some(1));
        assert_eq!(newest_api(2, 25), Some(2));
        assert_eq!(newest_api(2, 30), Some(6));
        assert_eq!(newest_api(2, 32), Some(7));
        assert_eq!(newest_api(2, 33), None);
    }

    #[test]
    fn conf_files_are_read_like_nccl_reads_them() {
        let text = b"# NCCL_PROFILER_PLUGIN=commented\nNCCL_DEBUG=INFO\nNCCL_PROFILER_PLUGIN=scorep\nNCCL_PROFILER_PLUGIN=second\n";
        assert_eq!(
            conf_file_value(text, "NCCL_PROFILER_PLUGIN"),
            Some(OsString::from("scorep"))
        );
        assert_eq!(conf_file_value(text, "NCCL_NET_PLUGIN"), None);
        // No trimming: the spaces belong to the name, which then does not match.
        assert_eq!(
            conf_file_value(b"NCCL_PROFILER_PLUGIN =x", "NCCL_PROFILER_PLUGIN"),
            None
        );
        assert_eq!(
            conf_file_value(b"NCCL_PROFILER_PLUGIN=a=b", "NCCL_PROFILER_PLUGIN"),
            Some(OsString::from("a=b"))
        );
    }
}
