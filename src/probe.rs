//! Small, careful ways to look at the machine: programs on `PATH` and commands that must
//! not hang the doctor.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How long any one probe command may run. `mpirun --version` or a Python import can stall
/// on a misconfigured machine; the doctor reports that instead of waiting forever.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// What a finished command printed.
#[derive(Debug, Clone, Default)]
pub struct Output {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The first non-blank line of stdout, or of stderr when stdout has none (some tools
    /// print their version on stderr).
    pub fn first_line(&self) -> Option<&str> {
        [self.stdout.as_str(), self.stderr.as_str()]
            .into_iter()
            .flat_map(str::lines)
            .map(str::trim)
            .find(|line| !line.is_empty())
    }
}

/// Runs `program args…` with stdin closed and waits at most `timeout`.
///
/// Errors are one readable line: the program is missing, could not start, or ran too long
/// (it is then killed).
pub fn run<S: AsRef<OsStr>>(
    program: &Path,
    args: &[S],
    timeout: Duration,
) -> Result<Output, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a timeout can stop whatever it started as well.
        .process_group(0)
        .spawn()
        .map_err(|error| format!("cannot run {}: {error}", program.display()))?;

    // Read both pipes on their own threads so a chatty child cannot block on a full pipe
    // while we wait for it to exit.
    let stdout = child.stdout.take().map(read_to_end_in_background);
    let stderr = child.stderr.take().map(read_to_end_in_background);

    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < timeout => thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                kill_process_group(child.id());
                // Best effort: the child may have exited in the meantime.
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} did not finish within {} s",
                    program.display(),
                    timeout.as_secs()
                ));
            }
            Err(error) => return Err(format!("waiting for {}: {error}", program.display())),
        }
    };

    // A grandchild (a daemon the tool started) may keep a pipe open after the child has
    // exited, so the output is collected within the same time budget.
    let deadline = started + timeout;
    let collect = |reader: Option<mpsc::Receiver<Vec<u8>>>| {
        let remaining = deadline.saturating_duration_since(Instant::now());
        reader
            .and_then(|receiver| receiver.recv_timeout(remaining).ok())
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    };
    Ok(Output {
        success: status.success(),
        stdout: collect(stdout),
        stderr: collect(stderr),
    })
}

/// Stops the process group led by `leader` (a child spawned with `process_group(0)`).
fn kill_process_group(leader: u32) {
    let Ok(group) = libc::pid_t::try_from(leader) else {
        return;
    };
    // SAFETY: kill(2) takes plain integers; a negative pid names the process group, which
    // is the child's own, so nothing outside what the probe started is signalled.
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
}

fn read_to_end_in_background<R: Read + Send + 'static>(mut pipe: R) -> mpsc::Receiver<Vec<u8>> {
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        let mut bytes = Vec::new();
        // A read error leaves what was read so far, which is all a report needs.
        let _ = pipe.read_to_end(&mut bytes);
        // The receiver is gone only if the doctor stopped waiting; nothing to do then.
        let _ = sender.send(bytes);
    });
    receiver
}

/// The first executable file called `name` in the directories of `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable_file(candidate))
}

/// `which(name)`, then the given absolute fallbacks (for tools like `ldconfig` that live in
/// `sbin` directories missing from a normal user's `PATH`).
pub fn which_or(name: &str, fallbacks: &[&str]) -> Option<PathBuf> {
    which(name).or_else(|| {
        fallbacks
            .iter()
            .map(PathBuf::from)
            .find(|candidate| is_executable_file(candidate))
    })
}

fn is_executable_file(path: &Path) -> bool {
    path.metadata()
        .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The environment variables whose names start with `prefix`, sorted by name.
pub fn env_vars_with_prefix(prefix: &str) -> Vec<(String, OsString)> {
    let mut vars: Vec<(String, OsString)> = std::env::vars_os()
        .filter_map(|(name, value)| {
            let name = name.into_string().ok()?;
            name.starts_with(prefix).then_some((name, value))
        })
        .collect();
    vars.sort();
    vars
}
