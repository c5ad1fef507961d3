//! Who am I in a job: rank, size, local rank and a job-wide key, from the launcher's
//! environment. The plugin numbers its part of the trace and its location ids by the rank,
//! and the automatic merge at job end needs the size and the job id; `nccl-sim` uses the
//! same detection to play a job's processes.
//!
//! NCCL itself never learns the job layout: the application bootstraps it, usually with
//! MPI (`MPI_Comm_rank`/`MPI_Comm_size`, then an `MPI_Bcast` of the `ncclUniqueId`). We need
//! the same three facts — rank, size, and a value every process of the
//! communicator agrees on — but every one of them can be derived from what the launcher
//! puts in each process's environment, so **no MPI library is linked and no message is
//! exchanged**:
//!
//! - rank and size come from the launcher's variables (see [`Launcher`]);
//! - [`Job::job_key`] is a hash of the launcher's job id (equal in every process of one job,
//!   different between jobs);
//! - the hash of a simulated communicator is [`Job::comm_hash`]`(index)`, a hash of
//!   `(job_key, index)`: every process computes the same value for its n-th communicator
//!   without a broadcast.
//!
//! Detection order (the first that matches wins; the innermost launcher is tried first):
//!
//! 1. `NCCL_SIM_RANK`/`NCCL_SIM_SIZE` (+ `NCCL_SIM_JOB`): children of `nccl-sim --procs N`
//!    (`nccl_sim::job::spawn_procs`);
//! 2. torchrun (`RANK`/`WORLD_SIZE` with `TORCHELASTIC_RUN_ID`): torchrun is always the
//!    innermost launcher, even when started by `srun` or `mpirun`;
//! 3. Open MPI (`OMPI_COMM_WORLD_RANK`/`_SIZE`; job id `OMPI_MCA_ess_base_jobid` or
//!    `PMIX_NAMESPACE`);
//! 4. MPICH / Intel MPI / any PMI launcher (`PMI_RANK`/`PMI_SIZE`);
//! 5. Slurm `srun` (`SLURM_PROCID`/`SLURM_STEP_NUM_TASKS` or `SLURM_NTASKS`, job id
//!    `SLURM_JOB_ID`.`SLURM_STEP_ID`). A batch script itself (no job step) is *not* a
//!    Slurm-launched task: there `SLURM_NTASKS` describes the allocation, not this process;
//! 6. plain `RANK`/`WORLD_SIZE` (legacy `torch.distributed.launch` and friends);
//! 7. otherwise a single process (rank 0 of 1), keyed by its pid and start time.
//!
//! When a launcher gives no job id (some PMI launchers do not), the key falls back to
//! Slurm's or PMIx's ids if present, else to the parent process's pid and start time and
//! the host name: the processes of one node then still agree (which is all PXN needs), but
//! processes on different nodes get different keys. [`Job::job_id`] says what was used.

use std::fmt;
use std::io;

/// Rank of a `--procs` child.
pub const ENV_RANK: &str = "NCCL_SIM_RANK";
/// Size of a `--procs` job.
pub const ENV_SIZE: &str = "NCCL_SIM_SIZE";
/// Job id of a `--procs` job: `<parent pid>.<parent start time>`.
pub const ENV_JOB: &str = "NCCL_SIM_JOB";

/// What started this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Launcher {
    /// `nccl-sim --procs N`.
    NcclSim,
    OpenMpi,
    /// MPICH, Intel MPI, MVAPICH or another PMI-1/2 launcher.
    Pmi,
    Slurm,
    Torchrun,
    /// Nothing: one process.
    Single,
}

impl Launcher {
    pub fn name(self) -> &'static str {
        match self {
            Launcher::NcclSim => "nccl-sim",
            Launcher::OpenMpi => "openmpi",
            Launcher::Pmi => "pmi",
            Launcher::Slurm => "slurm",
            Launcher::Torchrun => "torchrun",
            Launcher::Single => "single",
        }
    }
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// This process's place in its job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub rank: usize,
    pub size: usize,
    /// Rank among the processes of this node, and their number (the launcher's, else
    /// `rank`/`size` for launchers that put a job on one node, else 0/1).
    pub local_rank: usize,
    pub local_size: usize,
    /// Equal in all processes of one job, different between jobs.
    pub job_key: u64,
    pub launcher: Launcher,
    /// What `job_key` was hashed from, for messages (e.g. `slurm:4242.0`).
    pub job_id: String,
}

/// The environment did not describe a usable job.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JobError(pub String);

impl From<JobError> for io::Error {
    fn from(e: JobError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, e.0)
    }
}

impl Job {
    /// From this process's environment.
    pub fn detect() -> Result<Job, JobError> {
        Job::from_lookup(|name| std::env::var(name).ok())
    }

    /// A single process, whatever the environment says.
    pub fn single() -> Job {
        let id = self_id();
        Job {
            rank: 0,
            size: 1,
            local_rank: 0,
            local_size: 1,
            job_key: key_of("nccl-sim", &id),
            launcher: Launcher::Single,
            job_id: format!("nccl-sim:{id}"),
        }
    }

    /// From an environment given as a lookup function (for tests and for callers that
    /// read the environment themselves).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Job, JobError> {
        let var = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let first = |names: &[&str]| names.iter().find_map(|n| var(n));
        let number =
            |name: &str| -> Result<Option<usize>, JobError> {
                match var(name) {
                    None => Ok(None),
                    Some(v) => v.trim().parse::<usize>().map(Some).map_err(|_| {
                        JobError(format!("{name}={v:?} is not a non-negative integer"))
                    }),
                }
            };
        let pair = |rank: &str, size: &str| -> Result<Option<(usize, usize)>, JobError> {
            match (number(rank)?, number(size)?) {
                (Some(r), Some(s)) => Ok(Some((r, s))),
                (None, None) => Ok(None),
                (Some(_), None) => Err(JobError(format!("{rank} is set but {size} is not"))),
                (None, Some(_)) => Err(JobError(format!("{size} is set but {rank} is not"))),
            }
        };
        // Job ids that mean the same job in every process, whoever launched it.
        let generic_id = || -> (String, &'static str) {
            if let Some(job) = first(&["SLURM_JOB_ID", "SLURM_JOBID"]) {
                let step = first(&["SLURM_STEP_ID", "SLURM_STEPID"]).unwrap_or_default();
                return (format!("{job}.{step}"), "slurm");
            }
            if let Some(ns) = var("PMIX_NAMESPACE") {
                return (ns, "pmix");
            }
            (parent_id_on_host(), "node")
        };

        // 1. nccl-sim --procs.
        if let Some((rank, size)) = pair(ENV_RANK, ENV_SIZE)? {
            let id = var(ENV_JOB).unwrap_or_else(parent_id);
            return Job::checked(
                Launcher::NcclSim,
                rank,
                size,
                Some((rank, size)),
                "nccl-sim",
                id,
            );
        }
        // 2. torchrun (elastic agent).
        if var("TORCHELASTIC_RUN_ID").is_some() {
            if let Some((rank, size)) = pair("RANK", "WORLD_SIZE")? {
                let local = pair("LOCAL_RANK", "LOCAL_WORLD_SIZE")?;
                return Job::checked(
                    Launcher::Torchrun,
                    rank,
                    size,
                    local,
                    "torchrun",
                    torch_id(&var),
                );
            }
        }
        // 3. Open MPI.
        if let Some((rank, size)) = pair("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")? {
            let local = pair("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")?;
            let (id, source) = match first(&["OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"]) {
                Some(id) => (id, "openmpi"),
                None => generic_id(),
            };
            return Job::checked(Launcher::OpenMpi, rank, size, local, source, id);
        }
        // 4. PMI (MPICH's Hydra, Intel MPI, srun --mpi=pmi2).
        if let Some((rank, size)) = pair("PMI_RANK", "PMI_SIZE")? {
            let local = pair("MPI_LOCALRANKID", "MPI_LOCALNRANKS")?;
            let (id, source) = match first(&["PMI_JOBID", "PMI_KVSNAME"]) {
                Some(id) => (id, "pmi"),
                None => generic_id(),
            };
            return Job::checked(Launcher::Pmi, rank, size, local, source, id);
        }
        // 5. Slurm job step (srun), not the batch script.
        let step = first(&["SLURM_STEP_ID", "SLURM_STEPID"]);
        let in_step = step
            .as_deref()
            .and_then(|s| s.trim().parse::<u64>().ok())
            // Slurm's special steps (batch script, extern, interactive) are >= 0xFFFFFFF0.
            .is_some_and(|s| s < 0xFFFF_FFF0);
        if in_step && var("SLURM_PROCID").is_some() {
            let size_var = ["SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"]
                .into_iter()
                .find(|n| var(n).is_some())
                .ok_or_else(|| JobError("SLURM_PROCID is set but no task count".into()))?;
            let (rank, size) = pair("SLURM_PROCID", size_var)?.expect("both checked above");
            let local = match (number("SLURM_LOCALID")?, slurm_local_size(&var)) {
                (Some(r), Some(s)) => Some((r, s)),
                _ => None,
            };
            let job = first(&["SLURM_JOB_ID", "SLURM_JOBID"])
                .ok_or_else(|| JobError("SLURM_PROCID is set but SLURM_JOB_ID is not".into()))?;
            let id = format!("{job}.{}", step.unwrap_or_default());
            return Job::checked(Launcher::Slurm, rank, size, local, "slurm", id);
        }
        // 6. Plain RANK/WORLD_SIZE.
        if let Some((rank, size)) = pair("RANK", "WORLD_SIZE")? {
            let local = pair("LOCAL_RANK", "LOCAL_WORLD_SIZE")?;
            let id = if var("MASTER_ADDR").is_some() || var("MASTER_PORT").is_some() {
                torch_id(&var)
            } else {
                generic_id().0
            };
            return Job::checked(Launcher::Torchrun, rank, size, local, "torch", id);
        }
        Ok(Job::single())
    }

    fn checked(
        launcher: Launcher,
        rank: usize,
        size: usize,
        local: Option<(usize, usize)>,
        source: &str,
        id: String,
    ) -> Result<Job, JobError> {
        if size == 0 || rank >= size {
            return Err(JobError(format!(
                "{launcher}: rank {rank} is not below the job size {size}"
            )));
        }
        let (local_rank, local_size) = match local {
            Some((r, s)) if s > 0 && r < s && s <= size => (r, s),
            Some((r, s)) => {
                return Err(JobError(format!(
                    "{launcher}: local rank {r} of {s} does not fit a job of {size}"
                )))
            }
            // Without the launcher's word, a process is alone on its node.
            None => (0, 1),
        };
        Ok(Job {
            rank,
            size,
            local_rank,
            local_size,
            job_key: key_of(source, &id),
            launcher,
            job_id: format!("{source}:{id}"),
        })
    }

    /// The `commHash` of this job's communicator number `index` (0 for the first one
    /// created, in creation order): equal in every process, never 0.
    pub fn comm_hash(&self, index: u64) -> u64 {
        comm_hash(self.job_key, index)
    }
}

/// The `commHash` of communicator `index` of the job `job_key`; never 0.
pub fn comm_hash(job_key: u64, index: u64) -> u64 {
    let h = mix(job_key ^ mix(index.wrapping_add(0x6A09_E667_F3BC_C909)));
    if h == 0 {
        1
    } else {
        h
    }
}

/// splitmix64's finaliser: a stable 64-bit mix (Rust's `DefaultHasher` is not promised to
/// be stable across builds, and processes of one job may run different builds).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a of `source:id`, then mixed.
fn key_of(source: &str, id: &str) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in source.bytes().chain(*b":").chain(id.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01B3);
    }
    mix(h)
}

fn torch_id(var: &impl Fn(&str) -> Option<String>) -> String {
    format!(
        "{}/{}/{}:{}",
        var("TORCHELASTIC_RUN_ID").unwrap_or_default(),
        var("TORCHELASTIC_RESTART_COUNT").unwrap_or_default(),
        var("MASTER_ADDR").unwrap_or_default(),
        var("MASTER_PORT").unwrap_or_default(),
    )
}

/// Tasks on this node from `SLURM_STEP_TASKS_PER_NODE` (or `SLURM_TASKS_PER_NODE`), e.g.
/// `2(x3),1`, and `SLURM_NODEID`.
fn slurm_local_size(var: &impl Fn(&str) -> Option<String>) -> Option<usize> {
    let spec = var("SLURM_STEP_TASKS_PER_NODE").or_else(|| var("SLURM_TASKS_PER_NODE"))?;
    let node: usize = var("SLURM_NODEID")?.trim().parse().ok()?;
    let mut index = 0usize;
    for part in spec.split(',') {
        let part = part.trim();
        let (count, repeat) = match part.split_once("(x") {
            Some((c, r)) => (c, r.trim_end_matches(')')),
            None => (part, "1"),
        };
        let count: usize = count.trim().parse().ok()?;
        let repeat: usize = repeat.trim().parse().ok()?;
        if node < index + repeat {
            return Some(count);
        }
        index += repeat;
    }
    None
}

/// `<pid>.<start time>` of a process (the start time in clock ticks since boot, from
/// `/proc/<pid>/stat`): unique on a host while the pid is not reused during boot.
fn process_id_of(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 22 (starttime) is the 20th after the name.
    let start = rest.split_whitespace().nth(19)?;
    Some(format!("{pid}.{start}"))
}

/// This process's id, `<pid>.<start time>`; the pid and the realtime clock where /proc is
/// missing.
pub fn self_id() -> String {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let pid = std::process::id();
        process_id_of(pid).unwrap_or_else(|| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            format!("{pid}.t{now}")
        })
    })
    .clone()
}

fn parent_id() -> String {
    // SAFETY: getppid has no preconditions.
    let ppid = unsafe { libc::getppid() } as u32;
    process_id_of(ppid).unwrap_or_else(|| ppid.to_string())
}

fn parent_id_on_host() -> String {
    format!("{}@{}", parent_id(), hostname())
}

/// The launcher's rank of this process, if a launcher started it.
pub fn launcher_rank() -> Option<u32> {
    Job::detect()
        .ok()
        .filter(|job| job.launcher != Launcher::Single)
        .and_then(|job| u32::try_from(job.rank).ok())
}

/// Replaces the host name in the trace and in file names (`nccl-sim --hosts` gives each
/// process a simulated node this way).
pub const ENV_HOSTNAME: &str = "NCCL_SCOREP_HOSTNAME";

/// The host name (the trace's node, and part of file names): `NCCL_SCOREP_HOSTNAME` when
/// set to a usable name, else the system's.
pub fn hostname() -> String {
    hostname_and_problem().0
}

/// [`hostname`], and what is wrong with `NCCL_SCOREP_HOSTNAME` when it was set to a value
/// that cannot be used (for the caller to report).
pub fn hostname_and_problem() -> (String, Option<String>) {
    if let Some(value) = std::env::var_os(ENV_HOSTNAME) {
        let value = value.to_string_lossy();
        if is_usable_hostname(&value) {
            return (value.into_owned(), None);
        }
        let problem = format!(
            "{ENV_HOSTNAME}={value:?} is not a host name (letters, digits, '-', '_', '.'; \
             at most 64 characters); the system's host name is used"
        );
        return (system_hostname(), Some(problem));
    }
    (system_hostname(), None)
}

/// A name that is safe in a file name and reads as a host: `[A-Za-z0-9._-]{1,64}`, not
/// starting with a dot.
fn is_usable_hostname(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `text` with every character outside `[A-Za-z0-9._-]` replaced by `-`, and without
/// leading dots: a part of a file name that cannot name another directory.
pub fn file_name_safe(text: &str) -> String {
    let safe: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    safe.trim_start_matches('.').to_owned()
}

/// The system's host name, made safe for file names (it becomes part of a part's
/// directory name): see [`file_name_safe_host`].
fn system_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if rc == 0 && end > 0 {
        file_name_safe_host(&String::from_utf8_lossy(&buf[..end]))
    } else {
        "unknown-host".into()
    }
}

/// `name` made safe for file names ([`file_name_safe`]), at most 64 characters: a host
/// name a container or a hostile node gave cannot put `/` or `..` into a path.
fn file_name_safe_host(name: &str) -> String {
    let safe: String = file_name_safe(name).chars().take(64).collect();
    if safe.is_empty() {
        "unknown-host".into()
    } else {
        safe
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn a_system_host_name_is_made_safe_for_paths() {
        assert_eq!(file_name_safe_host("node-7.cluster"), "node-7.cluster");
        assert_eq!(file_name_safe_host("../../etc/x"), "-..-etc-x");
        assert_eq!(file_name_safe_host("..."), "unknown-host");
        assert_eq!(file_name_safe_host("höst name"), "h-st-name");
        assert_eq!(file_name_safe_host(&"a".repeat(100)).len(), 64);
        assert!(is_usable_hostname(&file_name_safe_host("a/b\0c")));
    }

    fn job(vars: &[(&str, &str)]) -> Result<Job, JobError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Job::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn nothing_is_a_single_process() {
        let j = job(&[]).unwrap();
        assert_eq!((j.rank, j.size, j.launcher), (0, 1, Launcher::Single));
        assert_eq!(j, Job::single());
    }

    #[test]
    fn open_mpi() {
        let vars = [
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("OMPI_COMM_WORLD_SIZE", "8"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            ("OMPI_MCA_ess_base_jobid", "1234567"),
            // An enclosing Slurm allocation loses to mpirun.
            ("SLURM_PROCID", "0"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_JOB_ID", "99"),
        ];
        let j = job(&vars).unwrap();
        assert_eq!(j.launcher, Launcher::OpenMpi);
        assert_eq!((j.rank, j.size, j.local_rank, j.local_size), (3, 8, 1, 2));
        assert_eq!(j.job_id, "openmpi:1234567");
        let other = job(&[
            ("OMPI_COMM_WORLD_RANK", "5"),
            ("OMPI_COMM_WORLD_SIZE", "8"),
            ("OMPI_MCA_ess_base_jobid", "1234567"),
        ])
        .unwrap();
        assert_eq!(j.job_key, other.job_key, "same job, same key");
        assert_eq!(j.comm_hash(0), other.comm_hash(0));
        assert_ne!(j.comm_hash(0), j.comm_hash(1));
        let pmix = job(&[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("PMIX_NAMESPACE", "prterun-host-4242@1"),
        ])
        .unwrap();
        assert_eq!(pmix.job_id, "openmpi:prterun-host-4242@1");
        assert_ne!(pmix.job_key, j.job_key);
    }

    #[test]
    fn pmi_and_slurm() {
        let j = job(&[
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "4"),
            ("MPI_LOCALRANKID", "1"),
            ("MPI_LOCALNRANKS", "4"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_ID", "2"),
        ])
        .unwrap();
        assert_eq!(j.launcher, Launcher::Pmi);
        assert_eq!((j.rank, j.size, j.local_rank, j.local_size), (1, 4, 1, 4));
        assert_eq!(j.job_id, "slurm:77.2");

        let s = job(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "6"),
            ("SLURM_STEP_NUM_TASKS", "6"),
            ("SLURM_LOCALID", "2"),
            ("SLURM_NODEID", "1"),
            ("SLURM_STEP_TASKS_PER_NODE", "3(x2)"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_ID", "2"),
        ])
        .unwrap();
        assert_eq!(s.launcher, Launcher::Slurm);
        assert_eq!((s.rank, s.size, s.local_rank, s.local_size), (5, 6, 2, 3));
        assert_eq!(s.job_id, "slurm:77.2");
        let step3 = job(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "6"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_ID", "3"),
        ])
        .unwrap();
        assert_ne!(step3.job_key, s.job_key, "another step is another job");
        assert_eq!((step3.local_rank, step3.local_size), (0, 1));

        // The batch script itself: the allocation's task count is not this process's.
        let batch = job(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "6"),
            ("SLURM_JOB_ID", "77"),
        ])
        .unwrap();
        assert_eq!(batch.launcher, Launcher::Single);
        let batch = job(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "6"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_ID", "4294967294"),
        ])
        .unwrap();
        assert_eq!(batch.launcher, Launcher::Single);
    }

    #[test]
    fn slurm_tasks_per_node() {
        let spec = |s: &str, node: &str| {
            let vars: HashMap<&str, String> = [
                ("SLURM_TASKS_PER_NODE", s.to_string()),
                ("SLURM_NODEID", node.to_string()),
            ]
            .into_iter()
            .collect();
            slurm_local_size(&|n: &str| vars.get(n).cloned())
        };
        assert_eq!(spec("2(x3),1", "0"), Some(2));
        assert_eq!(spec("2(x3),1", "2"), Some(2));
        assert_eq!(spec("2(x3),1", "3"), Some(1));
        assert_eq!(spec("2(x3),1", "4"), None);
        assert_eq!(spec("4", "0"), Some(4));
    }

    #[test]
    fn torchrun_is_innermost() {
        let j = job(&[
            ("RANK", "6"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "2"),
            ("LOCAL_WORLD_SIZE", "4"),
            ("TORCHELASTIC_RUN_ID", "abc"),
            ("TORCHELASTIC_RESTART_COUNT", "0"),
            ("MASTER_ADDR", "n1"),
            ("MASTER_PORT", "29500"),
            // torchrun started by srun: the agent's Slurm rank is not the worker's.
            ("SLURM_PROCID", "1"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_JOB_ID", "5"),
        ])
        .unwrap();
        assert_eq!(j.launcher, Launcher::Torchrun);
        assert_eq!((j.rank, j.size, j.local_rank, j.local_size), (6, 8, 2, 4));
        let restarted = job(&[
            ("RANK", "6"),
            ("WORLD_SIZE", "8"),
            ("TORCHELASTIC_RUN_ID", "abc"),
            ("TORCHELASTIC_RESTART_COUNT", "1"),
            ("MASTER_ADDR", "n1"),
            ("MASTER_PORT", "29500"),
        ])
        .unwrap();
        assert_ne!(j.job_key, restarted.job_key, "a restart is a new job");
        let plain = job(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "1")]).unwrap();
        assert_eq!(plain.launcher, Launcher::Torchrun);
    }

    #[test]
    fn host_name_overrides_must_be_safe_in_file_names() {
        for good in ["node0", "gpu-07.cluster.org", "a_b"] {
            assert!(is_usable_hostname(good), "{good}");
        }
        let too_long = "n".repeat(65);
        for bad in [
            "",
            ".hidden",
            "a/b",
            "../x",
            "two words",
            "é",
            too_long.as_str(),
        ] {
            assert!(!is_usable_hostname(bad), "{bad:?}");
        }
    }

    #[test]
    fn nccl_sim_children_win() {
        let vars = [
            (ENV_RANK, "1"),
            (ENV_SIZE, "2"),
            (ENV_JOB, "4242.123"),
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "1"),
        ];
        let j = job(&vars).unwrap();
        assert_eq!(j.launcher, Launcher::NcclSim);
        assert_eq!((j.rank, j.size, j.local_rank, j.local_size), (1, 2, 1, 2));
        assert_eq!(j.job_id, "nccl-sim:4242.123");
        // A single process is the job of its own pid and start time: the same formula.
        let me = Job::single();
        let as_child = job(&[
            (ENV_RANK, "0"),
            (ENV_SIZE, "1"),
            (ENV_JOB, me.job_id.trim_start_matches("nccl-sim:")),
        ])
        .unwrap();
        assert_eq!(as_child.job_key, me.job_key);
    }

    #[test]
    fn bad_values_are_errors() {
        assert!(job(&[(ENV_RANK, "2"), (ENV_SIZE, "2")]).is_err());
        assert!(job(&[(ENV_RANK, "x"), (ENV_SIZE, "2")]).is_err());
        assert!(job(&[(ENV_RANK, "0")]).is_err());
        assert!(job(&[("PMI_RANK", "0"), ("PMI_SIZE", "0")]).is_err());
        assert!(job(&[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "3"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
        ])
        .is_err());
    }

    #[test]
    fn comm_hashes_are_stable_and_nonzero() {
        // Pinned: processes built from different commits must still agree.
        assert_eq!(comm_hash(0, 0), comm_hash(0, 0));
        assert_ne!(comm_hash(0, 0), 0);
        assert_ne!(comm_hash(1, 0), comm_hash(0, 1));
        assert_eq!(key_of("a", "b"), key_of("a", "b"));
    }
}
