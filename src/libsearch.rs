//! Where glibc's dynamic loader would find a library that a program `dlopen`s by name.
//!
//! The order is that of `dlopen(3)` for a caller without `DT_RPATH`/`DT_RUNPATH`: a name
//! containing `/` is a path; any other name is looked up in the `LD_LIBRARY_PATH`
//! directories, then in the loader cache (`ldconfig -p`), then in the system directories.
//! Not emulated: hwcaps subdirectories, secure-execution mode, and skipping files of the
//! wrong ELF class (opening the file afterwards reveals those).

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::probe;

/// How a library was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The name was a path.
    Path,
    LdLibraryPath,
    LoaderCache,
    SystemDir,
    /// A place the loader does not search by itself (a Python wheel, a `-L` directory).
    Other(&'static str),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Path => f.write_str("path as given"),
            Origin::LdLibraryPath => f.write_str("LD_LIBRARY_PATH"),
            Origin::LoaderCache => f.write_str("ldconfig cache"),
            Origin::SystemDir => f.write_str("system directory"),
            Origin::Other(what) => f.write_str(what),
        }
    }
}

/// A library file and how it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub path: PathBuf,
    pub origin: Origin,
}

/// One line of `ldconfig -p`: a library file name and where it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEntry {
    pub name: OsString,
    pub path: PathBuf,
}

/// Everything the loader consults, gathered once.
#[derive(Debug, Clone, Default)]
pub struct SearchPath {
    pub ld_library_path: Vec<PathBuf>,
    pub cache: Vec<CacheEntry>,
    pub system_dirs: Vec<PathBuf>,
    /// Why the cache is empty, when reading it failed.
    pub cache_problem: Option<String>,
}

impl SearchPath {
    /// The search path of this process: its `LD_LIBRARY_PATH`, the loader cache and the
    /// loader's system directories.
    pub fn of_this_process() -> SearchPath {
        let ld_library_path = std::env::var_os("LD_LIBRARY_PATH")
            .map(|value| parse_ld_library_path(&value))
            .unwrap_or_default();
        let (cache, cache_problem) = match read_loader_cache() {
            Ok(cache) => (cache, None),
            Err(problem) => (Vec::new(), Some(problem)),
        };
        SearchPath {
            ld_library_path,
            cache,
            system_dirs: system_dirs(),
            cache_problem,
        }
    }

    /// The file the loader would open for `name`, if any.
    pub fn resolve(&self, name: &OsStr) -> Option<Found> {
        if name.as_bytes().contains(&b'/') {
            let path = PathBuf::from(name);
            return path.is_file().then_some(Found {
                path,
                origin: Origin::Path,
            });
        }
        let in_dirs = |dirs: &[PathBuf], origin| {
            dirs.iter()
                .map(|dir| dir.join(name))
                .find(|path| path.is_file())
                .map(|path| Found { path, origin })
        };
        in_dirs(&self.ld_library_path, Origin::LdLibraryPath)
            .or_else(|| {
                self.cache
                    .iter()
                    .find(|entry| entry.name == name && entry.path.is_file())
                    .map(|entry| Found {
                        path: entry.path.clone(),
                        origin: Origin::LoaderCache,
                    })
            })
            .or_else(|| in_dirs(&self.system_dirs, Origin::SystemDir))
    }

    /// Every library file the loader could reach whose file name satisfies `wanted`, in
    /// search order, each real file once.
    pub fn find_all(&self, wanted: impl Fn(&OsStr) -> bool) -> Vec<Found> {
        let mut found = Vec::new();
        for dir in &self.ld_library_path {
            found.extend(files_in(dir, &wanted, Origin::LdLibraryPath));
        }
        for entry in &self.cache {
            if wanted(&entry.name) && entry.path.is_file() {
                found.push(Found {
                    path: entry.path.clone(),
                    origin: Origin::LoaderCache,
                });
            }
        }
        for dir in &self.system_dirs {
            found.extend(files_in(dir, &wanted, Origin::SystemDir));
        }
        dedup_by_real_path(found)
    }
}

/// The files in `dir` whose names satisfy `wanted`, sorted by name.
pub fn files_in(dir: &Path, wanted: impl Fn(&OsStr) -> bool, origin: Origin) -> Vec<Found> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|entry| wanted(&entry.file_name()))
        .map(|entry| entry.path())
        .filter(|path| path.is_file())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| Found { path, origin })
        .collect()
}

/// Keeps the first of several names (symlinks, repeated directories) for the same file.
pub fn dedup_by_real_path(found: Vec<Found>) -> Vec<Found> {
    let mut seen = Vec::new();
    found
        .into_iter()
        .filter(|item| {
            let real = std::fs::canonicalize(&item.path).unwrap_or_else(|_| item.path.clone());
            if seen.contains(&real) {
                false
            } else {
                seen.push(real);
                true
            }
        })
        .collect()
}

/// The directories of an `LD_LIBRARY_PATH` value. glibc splits at `:` and `;` and reads an
/// empty element as the current directory.
pub fn parse_ld_library_path(value: &OsStr) -> Vec<PathBuf> {
    value
        .as_bytes()
        .split(|&byte| byte == b':' || byte == b';')
        .map(|dir| {
            if dir.is_empty() {
                PathBuf::from(".")
            } else {
                PathBuf::from(OsStr::from_bytes(dir))
            }
        })
        .collect()
}

/// The entries of `ldconfig -p` output that this process's loader would use: only those
/// built for this architecture (the cache also lists 32-bit and x32 libraries).
pub fn parse_ldconfig_output(text: &str, arch_flag: Option<&str>) -> Vec<CacheEntry> {
    text.lines()
        .filter_map(|line| {
            // "\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1"
            let (left, path) = line.trim().split_once(" => ")?;
            let (name, flags) = left.split_once(" (")?;
            let fits = arch_flag.is_none_or(|flag| flags.contains(flag));
            fits.then(|| CacheEntry {
                name: OsString::from(name),
                path: PathBuf::from(path),
            })
        })
        .collect()
}

/// The flag `ldconfig -p` puts on libraries of this architecture, where known.
fn this_arch_flag() -> Option<&'static str> {
    match std::env::consts::ARCH {
        "x86_64" => Some("x86-64"),
        "aarch64" => Some("AArch64"),
        _ => None,
    }
}

fn read_loader_cache() -> Result<Vec<CacheEntry>, String> {
    let ldconfig = probe::which_or("ldconfig", &["/sbin/ldconfig", "/usr/sbin/ldconfig"])
        .ok_or_else(|| "ldconfig not found".to_owned())?;
    let output = probe::run(&ldconfig, &["-p"], probe::COMMAND_TIMEOUT)?;
    if !output.success {
        return Err(format!(
            "{} -p failed: {}",
            ldconfig.display(),
            output.stderr.trim()
        ));
    }
    Ok(parse_ldconfig_output(&output.stdout, this_arch_flag()))
}

/// The loader's own list of system directories. `ld.so --help` (glibc 2.33+) prints it;
/// older loaders get the usual Debian and Red Hat layout.
fn system_dirs() -> Vec<PathBuf> {
    let from_loader = loader_program()
        .and_then(|loader| probe::run(Path::new(loader), &["--help"], probe::COMMAND_TIMEOUT).ok())
        .map(|output| parse_system_dirs(&output.stdout))
        .unwrap_or_default();
    if !from_loader.is_empty() {
        return from_loader;
    }
    let multiarch = multiarch_triplet()
        .map(|triplet| vec![format!("/lib/{triplet}"), format!("/usr/lib/{triplet}")])
        .unwrap_or_default();
    multiarch
        .into_iter()
        .chain(["/lib64", "/usr/lib64", "/lib", "/usr/lib"].map(String::from))
        .map(PathBuf::from)
        .filter(|dir| dir.is_dir())
        .collect()
}

/// The "(system search path)" lines of `ld.so --help`.
pub fn parse_system_dirs(help: &str) -> Vec<PathBuf> {
    help.lines()
        .filter_map(|line| line.trim().strip_suffix("(system search path)"))
        .map(|dir| PathBuf::from(dir.trim()))
        .collect()
}

fn loader_program() -> Option<&'static str> {
    match std::env::consts::ARCH {
        "x86_64" => Some("/lib64/ld-linux-x86-64.so.2"),
        "aarch64" => Some("/lib/ld-linux-aarch64.so.1"),
        "powerpc64" => Some("/lib64/ld64.so.2"),
        _ => None,
    }
}

fn multiarch_triplet() -> Option<&'static str> {
    match std::env::consts::ARCH {
        "x86_64" => Some("x86_64-linux-gnu"),
        "aarch64" => Some("aarch64-linux-gnu"),
        "powerpc64" => Some("powerpc64le-linux-gnu"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ld_library_path_splits_like_glibc() {
        let dirs = parse_ld_library_path(OsStr::new("/a:b;/c::"));
        let expected: Vec<PathBuf> = ["/a", "b", "/c", ".", "."]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(dirs, expected);
    }

    #[test]
    fn ldconfig_output_keeps_this_architecture_only() {
        let text = "3 libs found in cache `/etc/ld.so.cache'\n\
            \tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1\n\
            \tlibz.so.1 (libc6) => /lib/i386-linux-gnu/libz.so.1\n\
            \tlibfoo.so (libc6,x86-64, OS ABI: Linux 3.2.0) => /opt/foo/libfoo.so\n";
        let entries = parse_ldconfig_output(text, Some("x86-64"));
        let names: Vec<&OsStr> = entries.iter().map(|entry| entry.name.as_os_str()).collect();
        assert_eq!(names, ["libz.so.1", "libfoo.so"]);
        assert_eq!(entries[1].path, PathBuf::from("/opt/foo/libfoo.so"));
        assert_eq!(parse_ldconfig_output(text, None).len(), 3);
    }

    #[test]
    fn system_dirs_come_from_ld_so_help() {
        let help = "Shared library search path:\n  (libraries located via /etc/ld.so.cache)\n  \
            /lib/x86_64-linux-gnu (system search path)\n  /usr/lib (system search path)\n";
        assert_eq!(
            parse_system_dirs(help),
            [
                PathBuf::from("/lib/x86_64-linux-gnu"),
                PathBuf::from("/usr/lib")
            ]
        );
    }

    #[test]
    fn resolution_follows_the_loader_order() -> std::io::Result<()> {
        let first = tempfile::tempdir()?;
        let second = tempfile::tempdir()?;
        std::fs::write(second.path().join("libx.so"), b"")?;
        std::fs::write(first.path().join("liby.so"), b"")?;
        let cache_dir = tempfile::tempdir()?;
        let cached = cache_dir.path().join("libz.so.1");
        std::fs::write(&cached, b"")?;

        let search = SearchPath {
            ld_library_path: vec![first.path().to_owned(), second.path().to_owned()],
            cache: vec![CacheEntry {
                name: OsString::from("libz.so.1"),
                path: cached.clone(),
            }],
            system_dirs: Vec::new(),
            cache_problem: None,
        };
        let found = search
            .resolve(OsStr::new("libx.so"))
            .map(|found| (found.path, found.origin));
        assert_eq!(
            found,
            Some((second.path().join("libx.so"), Origin::LdLibraryPath))
        );
        let found = search
            .resolve(OsStr::new("libz.so.1"))
            .map(|found| found.origin);
        assert_eq!(found, Some(Origin::LoaderCache));
        assert_eq!(search.resolve(OsStr::new("libmissing.so")), None);

        // A name with a slash is a path, never searched for.
        let as_path = first.path().join("liby.so");
        let found = search
            .resolve(as_path.as_os_str())
            .map(|found| found.origin);
        assert_eq!(found, Some(Origin::Path));
        assert_eq!(search.resolve(OsStr::new("./liby.so")), None);
        Ok(())
    }
}
