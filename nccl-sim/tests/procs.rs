//! `--procs N`: the parent re-executes itself N times (here: this test binary, running only
//! `procs_child`), the children find their rank through `Job::detect`, and the parent
//! reports children that failed or were killed.

use nccl_sim::job::{self, describe_status, spawn_procs_of, Job, Launcher};
use std::ffi::{OsStr, OsString};
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

/// Where the children write what they detected.
const DIR: &str = "NCCL_SIM_PROCS_TEST_DIR";
/// What the children do besides: `fail` (rank 1 is killed, rank 2 exits with 3) or
/// `hang` (rank 1 exits with 1, the others wait for a minute).
const MODE: &str = "NCCL_SIM_PROCS_TEST_MODE";

#[test]
fn procs_child() {
    if std::env::var_os(job::ENV_RANK).is_none() {
        return;
    }
    let dir = std::env::var_os(DIR).expect("output directory");
    let me = Job::detect().expect("job from the environment");
    assert_eq!(me.launcher, Launcher::NcclSim);
    std::fs::write(
        std::path::Path::new(&dir).join(format!("rank-{}", me.rank)),
        format!(
            "{} {} {} {} {:x}",
            me.rank,
            me.size,
            me.local_rank,
            me.local_size,
            me.comm_hash(0)
        ),
    )
    .expect("write");
    match (std::env::var(MODE).as_deref(), me.rank) {
        // SAFETY: killing ourselves, as a crashing rank would die.
        (Ok("fail"), 1) => unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        },
        (Ok("fail"), 2) => std::process::exit(3),
        (Ok("hang"), 1) => std::process::exit(1),
        (Ok("hang"), _) => std::thread::sleep(Duration::from_secs(60)),
        _ => {}
    }
}

fn run(n: usize, mode: &str) -> (tempfile::TempDir, Vec<std::process::ExitStatus>) {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    // `--procs` must be removed: the test harness would reject it.
    let args: Vec<OsString> = ["--exact", "procs_child", "--procs", &n.to_string(), "-q"]
        .iter()
        .map(OsString::from)
        .collect();
    let statuses = spawn_procs_of(
        &exe,
        n,
        &args,
        &[(DIR, dir.path().as_os_str()), (MODE, OsStr::new(mode))],
    )
    .expect("spawn");
    (dir, statuses)
}

#[test]
fn children_agree_on_the_job() {
    if std::env::var_os(job::ENV_RANK).is_some() {
        return;
    }
    let (dir, statuses) = run(3, "ok");
    assert!(job::all_succeeded(&statuses), "{statuses:?}");
    let lines: Vec<Vec<String>> = (0..3)
        .map(|r| {
            std::fs::read_to_string(dir.path().join(format!("rank-{r}")))
                .unwrap()
                .split(' ')
                .map(str::to_owned)
                .collect()
        })
        .collect();
    for (r, line) in lines.iter().enumerate() {
        assert_eq!(
            line[..4],
            [r.to_string(), "3".into(), r.to_string(), "3".into()]
        );
        assert_eq!(
            line[4], lines[0][4],
            "every rank computes the same comm hash"
        );
    }
    // The job id is the parent's pid and start time: this process, alone, is that job.
    assert_eq!(format!("{:x}", Job::single().comm_hash(0)), lines[0][4]);
}

#[test]
fn failures_are_reported() {
    if std::env::var_os(job::ENV_RANK).is_some() {
        return;
    }
    let (_dir, statuses) = run(3, "fail");
    assert!(statuses[0].success());
    assert_eq!(statuses[1].signal(), Some(libc::SIGKILL));
    assert_eq!(statuses[2].code(), Some(3));
    assert!(!job::all_succeeded(&statuses));
    let text = describe_status(1, 4242, &statuses[1]);
    assert!(
        text == "rank 1 (pid 4242) was killed by signal 9 (SIGKILL)",
        "{text}"
    );
    assert_eq!(
        describe_status(2, 7, &statuses[2]),
        "rank 2 (pid 7) exited with status 3"
    );
}

#[test]
fn survivors_of_a_failure_are_terminated() {
    if std::env::var_os(job::ENV_RANK).is_some() {
        return;
    }
    let started = Instant::now();
    let (_dir, statuses) = run(3, "hang");
    let took = started.elapsed();
    assert_eq!(statuses[1].code(), Some(1));
    for r in [0, 2] {
        assert_eq!(
            statuses[r].signal(),
            Some(libc::SIGTERM),
            "rank {r}: {:?}",
            statuses[r]
        );
    }
    assert!(took >= job::FAILURE_GRACE, "{took:?}");
    assert!(took < Duration::from_secs(20), "{took:?}");
}
