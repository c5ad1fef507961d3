//! A process forked after the first `init` (PyTorch's DataLoader workers do this): the
//! child exits without a panic message, touches neither the parent's part nor the ledger,
//! and the parent's trace is complete.

mod support;

use std::process::Command;
use support::*;

const CHILD: &str = "PLUGIN_FORK_TEST_CHILD";

#[test]
fn a_child_forked_after_init_exits_quietly_and_the_parent_still_records() {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "forking_process", "--ignored", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("forked child exited with status 0"), "{said}");
    assert!(said.contains("parent recorded 2 events"), "{said}");
    assert!(!said.contains("panicked"), "{said}");
    assert!(!said.contains("threads should not terminate"), "{said}");
}

/// The forking process (run by the test above in a process of its own).
#[test]
#[ignore = "run by a_child_forked_after_init_exits_quietly_and_the_parent_still_records"]
fn forking_process() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let plugin = Plugin::load(&[("NCCL_SCOREP_MODE", "jsonl")]);
    let table = plugin.v7();
    let (ctx, _) = plugin.init_v7(0xF0, Some(c"forked"), 0, 1);
    let before = start_in(table, ctx, &mut group_api7(1));
    stop_in(table, before);
    // SAFETY: fork in a test process; the child only calls `exit`, as a worker that never
    // uses NCCL does.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // The child: what a DataLoader worker does at its end. `exit` runs the plugin's
        // exit handler, which must leave the parent's collector and part alone.
        // SAFETY: ends the forked child.
        unsafe { libc::exit(0) };
    }
    assert!(pid > 0, "fork failed");
    let mut status = 0;
    // SAFETY: waits for our own child with a valid status slot.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    println!(
        "forked child exited with status {}",
        if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            -1
        }
    );
    let after = start_in(table, ctx, &mut group_api7(1));
    stop_in(table, after);
    finalize_in(table, ctx);
    println!("parent recorded {} events", plugin.events().len());
}
