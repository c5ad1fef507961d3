//! Opening the files we write without following a link that someone else planted: in a
//! shared, world-writable directory another user can put a symbolic link where the plugin
//! is about to write, and the job would append to, or truncate, whatever it points to.
//!
//! Every output file is opened with `O_NOFOLLOW` (a link at the last component is refused
//! with `ELOOP`), and an existing file must be a regular file of ours. Temporary files are
//! created with `O_EXCL`, which refuses anything already there, links included.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Opens `options` on `path` without following a link there, and checks what was opened.
fn open_checked(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    let file = options
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "{} is a symbolic link: refused, not followed",
                        path.display()
                    ),
                )
            } else {
                e
            }
        })?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is not a regular file: refused", path.display()),
        ));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} belongs to another user (uid {}): refused",
                path.display(),
                meta.uid()
            ),
        ));
    }
    Ok(file)
}

/// Opens `path` for appending, creating it if missing.
pub fn append(path: &Path) -> io::Result<File> {
    open_checked(path, OpenOptions::new().create(true).append(true))
}

/// Opens `path` for reading and appending at the end, creating it if missing.
pub fn read_append(path: &Path) -> io::Result<File> {
    open_checked(
        path,
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true),
    )
}

/// Creates `path`, or empties it when it is already a file of ours.
pub fn create(path: &Path) -> io::Result<File> {
    open_checked(
        path,
        OpenOptions::new().create(true).write(true).truncate(true),
    )
}

/// Writes `bytes` to the new file `path` (which must not exist: `O_EXCL`).
pub fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    file.write_all(bytes)
}

/// Writes `bytes` to `path` whole: into a new temporary file beside it, then renamed over
/// it (a reader never sees half of it, and a link at `path` is replaced, not followed).
pub fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    // A temporary left by a killed process of the same pid (or planted): removed, never
    // followed (removing a link removes the link).
    let _ = std::fs::remove_file(&temporary);
    write_new(&temporary, bytes)?;
    std::fs::rename(&temporary, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}

/// The variable that sets the mode of the directories the plugin and the tool create.
pub const DIR_MODE_VARIABLE: &str = "NCCL_SCOREP_DIR_MODE";

/// New directories are the user's alone unless [`DIR_MODE_VARIABLE`] says otherwise: a
/// trace names hosts, commands and the job's environment.
pub const DEFAULT_DIR_MODE: u32 = 0o700;

/// A directory mode as written in [`DIR_MODE_VARIABLE`]: octal (`0750`, `750`), at most
/// `0777`, with the owner keeping read, write and search (we must write there).
pub fn parse_dir_mode(value: &str) -> Option<u32> {
    let digits = value.trim();
    if digits.is_empty() || digits.len() > 4 {
        return None;
    }
    let mode = u32::from_str_radix(digits, 8).ok()?;
    (mode <= 0o777 && mode & 0o700 == 0o700).then_some(mode)
}

/// The mode new directories get: [`DIR_MODE_VARIABLE`] when valid, else
/// [`DEFAULT_DIR_MODE`] (the plugin's configuration and `doctor` report a bad value; the
/// process's umask still applies).
pub fn dir_mode() -> u32 {
    static MODE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *MODE.get_or_init(|| {
        std::env::var(DIR_MODE_VARIABLE)
            .ok()
            .and_then(|value| parse_dir_mode(&value))
            .unwrap_or(DEFAULT_DIR_MODE)
    })
}

/// Creates the directory `path` and its missing parents with [`dir_mode`]; an existing
/// directory is left as it is.
pub fn create_dirs(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(dir_mode())
        .create(path)
}

/// Creates the one new directory `path` with [`dir_mode`] (an error when it exists).
pub fn create_dir(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(dir_mode()).create(path)
}

/// Gives the directory `path` (made by a library with the umask's mode) the mode
/// [`dir_mode`]; a link there is refused, never followed.
pub fn set_dir_mode(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.file_type().is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is not a directory: refused", path.display()),
        ));
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(dir_mode()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn directory_modes_are_octal_and_leave_the_owner_all_rights() {
        assert_eq!(parse_dir_mode("0700"), Some(0o700));
        assert_eq!(parse_dir_mode("750"), Some(0o750));
        assert_eq!(parse_dir_mode(" 0755 "), Some(0o755));
        for bad in ["", "0600", "0500", "1777", "0o750", "rwx", "08", "07777"] {
            assert_eq!(parse_dir_mode(bad), None, "{bad}");
        }
    }

    #[test]
    fn new_directories_get_the_mode_and_parents_too() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b/c");
        create_dirs(&deep).unwrap();
        create_dirs(&deep).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        // The umask can only take rights away from the default 0700.
        for path in [dir.path().join("a"), dir.path().join("a/b"), deep.clone()] {
            assert_eq!(mode(&path) & !0o700, 0, "{}", path.display());
            assert_eq!(mode(&path) & 0o700, 0o700, "{}", path.display());
        }
        create_dir(&dir.path().join("one")).unwrap();
        assert_eq!(mode(&dir.path().join("one")), 0o700);
        assert!(create_dir(&dir.path().join("one")).is_err());
    }
    use std::os::unix::fs::symlink;

    #[test]
    fn a_planted_link_is_refused_and_its_target_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let planted = dir.path().join("merge.ledger");
        symlink(&victim, &planted).unwrap();
        for open in [append, read_append, create] {
            let refused = open(&planted).unwrap_err();
            assert!(refused.to_string().contains("symbolic link"), "{refused}");
        }
        assert!(write_new(&planted, b"x").is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        // Replacing swaps the link for a file of ours; the target is untouched.
        replace(&planted, b"ours").unwrap();
        assert_eq!(std::fs::read_to_string(&planted).unwrap(), "ours");
        assert!(!std::fs::symlink_metadata(&planted)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    }

    #[test]
    fn our_own_files_open_as_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        append(&path).unwrap().write_all(b"a").unwrap();
        append(&path).unwrap().write_all(b"b").unwrap();
        let mut text = String::new();
        read_append(&path)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "ab");
        create(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
        assert!(create(dir.path()).is_err(), "a directory is not a file");
    }
}
