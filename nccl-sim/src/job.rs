//! Who am I in a job, and `nccl-sim --procs N`.
//!
//! The launcher detection (rank, size, local rank, job key) is shared with the plugin,
//! which needs the same facts for its trace ([`nccl_scorep_common::job`]); it is
//! re-exported here. This module adds the `--procs` launcher.

pub use nccl_scorep_common::job::{
    comm_hash, self_id, Job, JobError, Launcher, ENV_JOB, ENV_RANK, ENV_SIZE,
};

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// How long the other children may run on after one failed, before they are terminated
/// (as `mpirun` does: a job with a dead rank usually hangs).
pub const FAILURE_GRACE: Duration = Duration::from_secs(2);
// ---------------------------------------------------------------------------------------
// nccl-sim --procs N

/// `args` without `--procs N` / `--procs=N` (everything after a `--` is kept as is).
pub fn strip_procs_arg(args: &[OsString]) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let text = arg.to_string_lossy();
        if text == "--" {
            out.push(arg.clone());
            out.extend(iter.cloned());
            break;
        }
        if text == "--procs" {
            iter.next();
            continue;
        }
        if text.starts_with("--procs=") {
            continue;
        }
        out.push(arg.clone());
    }
    out
}

/// `--procs N`: runs the current executable `n` times with `args` (the parent's
/// arguments, without the program name; `--procs` is removed) and `NCCL_SIM_RANK`,
/// `NCCL_SIM_SIZE`, `NCCL_SIM_JOB` set, waits for all of them, and reports on stderr each
/// child that failed or was killed. Once one child failed, the others get
/// [`FAILURE_GRACE`] to finish, then are terminated (SIGTERM, then SIGKILL).
///
/// Returns the exit status of every child, by rank; see [`describe_status`].
pub fn spawn_procs(n: usize, args: &[OsString]) -> io::Result<Vec<ExitStatus>> {
    let exe = std::env::current_exe()?;
    // The children keep the name the job was started by, so that the command line a
    // trace records is the user's, not this machine's path of the executable.
    let name = std::env::args_os().next();
    spawn_procs_named(&exe, name.as_deref(), n, args, &[])
}

/// [`spawn_procs`] for a given program and with extra environment variables.
pub fn spawn_procs_of(
    program: &Path,
    n: usize,
    args: &[OsString],
    env: &[(&str, &OsStr)],
) -> io::Result<Vec<ExitStatus>> {
    spawn_procs_named(program, None, n, args, env)
}

/// [`spawn_procs_of`] with the children's `argv[0]` set to `name` (else the program).
fn spawn_procs_named(
    program: &Path,
    name: Option<&OsStr>,
    n: usize,
    args: &[OsString],
    env: &[(&str, &OsStr)],
) -> io::Result<Vec<ExitStatus>> {
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--procs needs at least one process",
        ));
    }
    let args = strip_procs_arg(args);
    let job = self_id();
    let mut children: Vec<Child> = Vec::with_capacity(n);
    for rank in 0..n {
        let mut command = Command::new(program);
        if let Some(name) = name {
            std::os::unix::process::CommandExt::arg0(&mut command, name);
        }
        command
            .args(&args)
            .env(ENV_RANK, rank.to_string())
            .env(ENV_SIZE, n.to_string())
            .env(ENV_JOB, &job);
        for (k, v) in env {
            command.env(k, v);
        }
        match command.spawn() {
            Ok(child) => children.push(child),
            Err(e) => {
                for child in &mut children {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot start rank {rank} ({}): {e}", program.display()),
                ));
            }
        }
    }
    let statuses = wait_all(&mut children)?;
    for (rank, (child, status)) in children.iter().zip(&statuses).enumerate() {
        if !status.success() {
            eprintln!("nccl-sim: {}", describe_status(rank, child.id(), status));
        }
    }
    Ok(statuses)
}

/// Waits for every child; once one failed, terminates the rest after the grace period.
fn wait_all(children: &mut [Child]) -> io::Result<Vec<ExitStatus>> {
    let mut statuses: Vec<Option<ExitStatus>> = vec![None; children.len()];
    let mut failed_at: Option<Instant> = None;
    let mut terminated_at: Option<Instant> = None;
    let mut pause = Duration::from_millis(1);
    loop {
        let mut running = 0;
        for (child, status) in children.iter_mut().zip(statuses.iter_mut()) {
            if status.is_some() {
                continue;
            }
            match child.try_wait()? {
                Some(s) => {
                    if !s.success() && failed_at.is_none() {
                        failed_at = Some(Instant::now());
                    }
                    *status = Some(s);
                }
                None => running += 1,
            }
        }
        if running == 0 {
            return Ok(statuses.into_iter().map(|s| s.expect("all done")).collect());
        }
        if let Some(failed) = failed_at {
            if terminated_at.is_none() && failed.elapsed() >= FAILURE_GRACE {
                for (child, status) in children.iter().zip(&statuses) {
                    if status.is_none() {
                        // SAFETY: signalling our own child, which has not been reaped.
                        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
                    }
                }
                terminated_at = Some(Instant::now());
            } else if terminated_at.is_some_and(|t| t.elapsed() >= FAILURE_GRACE) {
                for (child, status) in children.iter_mut().zip(&statuses) {
                    if status.is_none() {
                        let _ = child.kill();
                    }
                }
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// `rank 3 (pid 4242) exited with status 1` / `… was killed by signal 9 (SIGKILL)` /
/// `… succeeded`.
pub fn describe_status(rank: usize, pid: u32, status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    let what = if status.success() {
        "succeeded".to_string()
    } else if let Some(code) = status.code() {
        format!("exited with status {code}")
    } else if let Some(signal) = status.signal() {
        let core = if status.core_dumped() {
            ", core dumped"
        } else {
            ""
        };
        format!(
            "was killed by signal {signal} ({}{core})",
            signal_name(signal)
        )
    } else {
        format!("ended with {status}")
    };
    format!("rank {rank} (pid {pid}) {what}")
}

fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("signal {signal}"),
    };
    name.to_owned()
}

/// Whether every child succeeded.
pub fn all_succeeded(statuses: &[ExitStatus]) -> bool {
    statuses.iter().all(ExitStatus::success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn procs_argument_is_removed() {
        let args: Vec<OsString> = [
            "run",
            "--procs",
            "4",
            "-n",
            "2",
            "--procs=3",
            "--",
            "--procs",
            "1",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let kept: Vec<String> = strip_procs_arg(&args)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(kept, ["run", "-n", "2", "--", "--procs", "1"]);
    }
}
