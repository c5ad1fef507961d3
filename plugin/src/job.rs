//! This process's rank in the job, from the launcher's environment (the plugin never links
//! MPI). It numbers the process's part of the trace and its location ids.
//!
//! The order follows `nccl-sim`'s job detection (innermost launcher first): `nccl-sim
//! --procs`, torchrun, Open MPI, PMI (MPICH, Intel MPI), a Slurm job step, plain
//! `RANK`.

/// The launcher's rank of this process, if a launcher set one.
pub fn launcher_rank() -> Option<u32> {
    launcher_rank_from(|name| std::env::var(name).ok())
}

pub fn launcher_rank_from(var: impl Fn(&str) -> Option<String>) -> Option<u32> {
    let number = |name: &str| var(name).and_then(|v| v.trim().parse::<u32>().ok());
    if let Some(rank) = number("NCCL_SIM_RANK") {
        return Some(rank);
    }
    if var("TORCHELASTIC_RUN_ID").is_some() {
        if let Some(rank) = number("RANK") {
            return Some(rank);
        }
    }
    for name in ["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"] {
        if let Some(rank) = number(name) {
            return Some(rank);
        }
    }
    // A Slurm job step, not the batch script (special steps are >= 0xFFFFFFF0).
    let in_step = ["SLURM_STEP_ID", "SLURM_STEPID"]
        .iter()
        .find_map(|n| var(n))
        .and_then(|s| s.trim().parse::<u64>().ok())
        .is_some_and(|s| s < 0xFFFF_FFF0);
    if in_step {
        if let Some(rank) = number("SLURM_PROCID") {
            return Some(rank);
        }
    }
    number("RANK")
}

/// The host name (the trace's node, and part of file names).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if rc == 0 && end > 0 {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        "unknown-host".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(vars: &[(&str, &str)]) -> Option<u32> {
        launcher_rank_from(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn launchers_are_read_innermost_first() {
        assert_eq!(rank(&[]), None);
        assert_eq!(rank(&[("OMPI_COMM_WORLD_RANK", "3")]), Some(3));
        assert_eq!(rank(&[("PMI_RANK", "5"), ("RANK", "1")]), Some(5));
        assert_eq!(
            rank(&[
                ("TORCHELASTIC_RUN_ID", "x"),
                ("RANK", "2"),
                ("OMPI_COMM_WORLD_RANK", "0")
            ]),
            Some(2)
        );
        // A batch script's SLURM_PROCID is not a task's rank.
        assert_eq!(
            rank(&[("SLURM_PROCID", "4"), ("SLURM_STEP_ID", "4294967290")]),
            None
        );
        assert_eq!(
            rank(&[("SLURM_PROCID", "4"), ("SLURM_STEP_ID", "0")]),
            Some(4)
        );
        assert_eq!(rank(&[("RANK", "garbage")]), None);
    }
}
