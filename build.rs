//! Records the git commit the tool was built from, for `nccl-scorep --version`, and
//! exports the symbol through which `convert` gives the plugin the recorded times.
//!
//! Sets `NCCLSCOREP_GIT_COMMIT` to the short hash of `HEAD`, or to "unknown" when the
//! sources are not a git checkout (a release tarball, a vendored copy) or git is missing.
//! Never fails: a version string is not worth a broken build.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    // Without this line Cargo would rerun the script whenever any file of the package changes.
    println!("cargo:rerun-if-changed=build.rs");

    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = match git_dir(&manifest_dir) {
        Some(git_dir) => {
            watch_head(&git_dir);
            short_head_hash(&manifest_dir).unwrap_or_else(|| "unknown".to_owned())
        }
        // Only trust git when this package is the top of a checkout: git would otherwise
        // report the commit of some enclosing repository.
        None => "unknown".to_owned(),
    };
    println!("cargo:rustc-env=NCCLSCOREP_GIT_COMMIT={commit}");
    // `convert` offers the recorded times to the plugin it drives through this symbol,
    // which the plugin looks up in the executable.
    println!("cargo:rustc-link-arg-bin=nccl-scorep=-Wl,--export-dynamic-symbol=nccl_sim_clock");
}

/// The git directory of a checkout rooted at `root`: `.git` itself, or the directory a
/// `.git` file points to (worktrees, submodules).
fn git_dir(root: &Path) -> Option<PathBuf> {
    let dot_git = root.join(".git");
    if dot_git.is_dir() {
        return Some(dot_git);
    }
    let contents = std::fs::read_to_string(&dot_git).ok()?;
    let target = contents.strip_prefix("gitdir:")?.trim();
    Some(root.join(target))
}

/// Reruns this script when `HEAD` moves: `HEAD` itself changes on a checkout, the branch
/// ref on a commit. A branch with no commit yet has no ref file; its directory is watched
/// instead, so the first commit is noticed.
fn watch_head(git_dir: &Path) {
    let head = git_dir.join("HEAD");
    if !head.exists() {
        return;
    }
    println!("cargo:rerun-if-changed={}", head.display());

    let Ok(head_contents) = std::fs::read_to_string(&head) else {
        return;
    };
    if let Some(reference) = head_contents.strip_prefix("ref:") {
        let ref_file = git_dir.join(reference.trim());
        if ref_file.exists() {
            println!("cargo:rerun-if-changed={}", ref_file.display());
        } else if let Some(ref_dir) = ref_file.parent().filter(|dir| dir.is_dir()) {
            println!("cargo:rerun-if-changed={}", ref_dir.display());
        }
    }
    let packed_refs = git_dir.join("packed-refs");
    if packed_refs.exists() {
        println!("cargo:rerun-if-changed={}", packed_refs.display());
    }
}

fn short_head_hash(root: &Path) -> Option<String> {
    let output = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root)
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let hash = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    // Anything but a plain hash (odd git wrappers, localized noise) is not worth printing.
    let looks_like_hash = !hash.is_empty() && hash.chars().all(|c| c.is_ascii_hexdigit());
    looks_like_hash.then_some(hash)
}
