//! PXN between two real processes: a second process (this
//! test binary, re-executed with an environment flag) hands proxy ops to this process's
//! mailbox; this process's PXN proxy reports them to our plugin with the sender's pid,
//! context and parent values. The sender's context is the address of a PROT_NONE page
//! (in the sender, and made PROT_NONE here too where it is free): a plugin that
//! dereferenced it would crash this test.

use nccl_sim::event::CommInfo;
use nccl_sim::profiler::Profiler;
use nccl_sim::pxn::{PxnMailbox, PxnOp, PxnProxy, PxnSender};
use nccl_sim::release::Release;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Set in the re-executed sender: the mailbox to send to.
const SENDER_MAILBOX: &str = "NCCL_SIM_PXN_TEST_MAILBOX";
/// Where the sender writes its pid and context value.
const SENDER_REPORT: &str = "NCCL_SIM_PXN_TEST_REPORT";

const N_OPS: u64 = 48;
const N_STEPS: i32 = 3;
const CHUNK: i32 = 4096;
const SEND_BYTES: u64 = 3 * 4096 - 100;
const SENDER_RANK: i32 = 1;

/// The foreign parent of op `i`: shaped like one of our plugin's handles (magic byte 0x5C)
/// so that only the pid check keeps the receiver from taking it for its own.
fn parent_value(i: u64) -> u64 {
    0x5C00_0000_0000_0000 | ((i + 1) << 4)
}

/// The sender's side; does nothing unless re-executed by `foreign_ops_reach_our_plugin`.
#[test]
fn pxn_sender_process() {
    let Some(mailbox) = std::env::var_os(SENDER_MAILBOX) else {
        return;
    };
    let report = std::env::var_os(SENDER_REPORT).expect("report path");
    // A context value that is a valid address here and must never be touched anywhere.
    // SAFETY: an anonymous PROT_NONE mapping; nothing reads it.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(page, libc::MAP_FAILED);
    let context = page as u64;
    let pid = std::process::id() as i32;
    std::fs::write(
        &report,
        serde_json::json!({ "pid": pid, "context": context }).to_string(),
    )
    .expect("write the report");

    let sender =
        PxnSender::open_wait(Path::new(&mailbox), Duration::from_secs(5)).expect("open mailbox");
    assert_ne!(sender.receiver_pid(), pid);
    for i in 0..N_OPS {
        let op = PxnOp {
            origin_pid: pid,
            origin_rank: SENDER_RANK,
            context,
            parent: parent_value(i),
            channel: (i % 4) as u8,
            peer: 0,
            n_steps: N_STEPS,
            chunk_size: CHUNK,
            mask: 0xFFFF,
            send_bytes: SEND_BYTES,
            step_ns: 20_000,
        };
        // The mailbox is smaller than N_OPS: this waits for the receiver now and then.
        sender
            .send_timeout(&op, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("op {i}: {e}"));
    }
}

fn built_library() -> PathBuf {
    nccl_sim::our_plugin_for_tests()
}

fn read_logs(dir: &Path) -> Vec<Value> {
    let mut lines = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    paths.retain(|p| p.extension().is_some_and(|x| x == "jsonl"));
    paths.sort();
    for path in paths {
        for line in std::fs::read_to_string(&path).expect("read log").lines() {
            lines.push(serde_json::from_str(line).expect("a JSON line"));
        }
    }
    lines
}

fn hex(value: u64) -> String {
    format!("{value:#x}")
}

/// Reserves `address` as PROT_NONE in this process too, where nothing is mapped there.
fn poison(address: u64) {
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; failure is fine.
    unsafe {
        libc::mmap(
            address as usize as *mut libc::c_void,
            4096,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        );
    }
}

#[test]
fn foreign_ops_reach_our_plugin() {
    if std::env::var_os(SENDER_MAILBOX).is_some() {
        return;
    }
    let started = Instant::now();
    let tmp = tempfile::tempdir().expect("temporary directory");
    let out = tmp.path().join("out");
    let library = tmp.path().join("libnccl-profiler-scorep.so");
    std::fs::copy(built_library(), &library).expect("copy the plugin");
    // Read by the plugin at its first init; the only test here that loads it.
    std::env::set_var("NCCL_SCOREP_OUTPUT_DIR", &out);
    std::env::set_var("NCCL_SCOREP_EVENTS", "all");
    std::env::set_var("NCCL_SCOREP_JSONL", "1");

    let profiler = Arc::new(Profiler::new(
        Release::new(32),
        Some(library.clone().into_os_string()),
    ));
    let session = profiler
        .init(&CommInfo {
            comm_hash: 0x1234_5678,
            name: None,
            n_nodes: 1,
            n_ranks: 2,
            rank: 0,
        })
        .unwrap_or_else(|| panic!("plugin not loaded: {:?}", profiler.report()));
    assert_ne!(profiler.mask() & 0x18, 0, "ProxyOp/ProxyStep enabled");

    let job_key = (u64::from(std::process::id()) << 32) ^ 0x7E57;
    let mailbox = PxnMailbox::create_in(tmp.path(), job_key, 0, 16).expect("create the mailbox");
    let mailbox_path = mailbox.path().to_path_buf();
    let proxy = PxnProxy::spawn(Arc::clone(&profiler), Some(session), mailbox);

    let report = tmp.path().join("sender.json");
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args(["--exact", "pxn_sender_process", "--test-threads=1"])
        .env(SENDER_MAILBOX, &mailbox_path)
        .env(SENDER_REPORT, &report)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the sender");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the sender hung");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let output = child.wait_with_output().expect("sender output");
    assert!(
        status.success(),
        "sender failed ({status}):\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let sender: Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("sender report"))
            .expect("report JSON");
    let sender_pid = sender["pid"].as_i64().unwrap();
    let context = sender["context"].as_u64().unwrap();
    assert_ne!(sender_pid, i64::from(std::process::id() as i32));
    poison(context);

    let stats = proxy.shutdown();
    assert_eq!(stats.ops, N_OPS);
    assert_eq!(stats.steps, N_OPS * N_STEPS as u64);
    assert_eq!(stats.bytes, N_OPS * SEND_BYTES);
    assert_eq!(stats.lost, 0);
    assert_eq!(stats.op_events, N_OPS);
    profiler.finalize(Some(session));
    assert!(!mailbox_path.exists(), "the mailbox is removed");

    let lines = read_logs(&out);
    let events: Vec<&Value> = lines.iter().filter(|l| l["type"] == "event").collect();
    let ops: Vec<&Value> = events
        .iter()
        .copied()
        .filter(|e| e["kind"] == "ProxyOp")
        .collect();
    let steps: Vec<&Value> = events
        .iter()
        .copied()
        .filter(|e| e["kind"] == "ProxyStep")
        .collect();
    assert_eq!(ops.len() as u64, N_OPS, "every foreign op is logged");
    let expected_parents: HashSet<String> = (0..N_OPS).map(|i| hex(parent_value(i))).collect();
    let mut seen_parents = HashSet::new();
    let mut op_ids = HashMap::new();
    for op in &ops {
        assert_eq!(op["foreign"]["pid"], sender_pid, "{op}");
        assert_eq!(op["foreign"]["context"], hex(context), "{op}");
        assert!(op.get("context").is_none(), "no local owner: {op}");
        assert_eq!(op["parent"]["foreign_pid"], sender_pid, "{op}");
        seen_parents.insert(op["parent"]["value"].as_str().unwrap().to_owned());
        assert_eq!(op["rank"], SENDER_RANK, "{op}");
        assert_eq!(op["pid"], sender_pid);
        assert_eq!(op["is_send"], true);
        assert_eq!(op["n_steps"], N_STEPS);
        assert_eq!(op["chunk_size"], CHUNK);
        assert_eq!(op["closed"], "stop");
        let states: Vec<&str> = op["states"]
            .as_array()
            .expect("states")
            .iter()
            .map(|s| s["state"].as_str().unwrap())
            .collect();
        assert_eq!(states.len(), 1, "{op}");
        assert!(states[0].contains("InProgress"), "{op}");
        op_ids.insert(op["id"].as_str().unwrap().to_owned(), 0u32);
    }
    assert_eq!(seen_parents, expected_parents);

    assert_eq!(steps.len() as u64, N_OPS * N_STEPS as u64);
    let mut bytes = 0u64;
    for step in &steps {
        let parent = step["parent"]["id"]
            .as_str()
            .expect("a local ProxyOp parent");
        assert_eq!(step["parent"]["kind"], "ProxyOp");
        *op_ids.get_mut(parent).expect("parent is a logged ProxyOp") += 1;
        assert_eq!(
            step["foreign"]["pid"], sender_pid,
            "owned via its ProxyOp: {step}"
        );
        assert_eq!(step["foreign"]["context"], hex(context));
        assert_eq!(step["closed"], "stop");
        let states = step["states"].as_array().expect("states");
        let names: Vec<&str> = states
            .iter()
            .map(|s| s["state"].as_str().unwrap())
            .collect();
        assert_eq!(
            names.first().copied(),
            Some("ProxyStepSendGPUWait"),
            "{step}"
        );
        assert_eq!(names.last().copied(), Some("ProxyStepSendWait"), "{step}");
        assert!(names.iter().any(|n| n.contains("PeerWait")), "{step}");
        bytes += states.last().unwrap()["trans_size"].as_u64().unwrap();
    }
    assert!(op_ids.values().all(|&n| n == N_STEPS as u32));
    assert_eq!(bytes, N_OPS * SEND_BYTES);

    let counters = &lines
        .iter()
        .rfind(|l| l["type"] == "summary")
        .expect("a summary line")["counters"];
    assert_eq!(counters["pxn_foreign_ops"], N_OPS);
    for zero in [
        "foreign_context",
        "unresolved_parents",
        "ring_full",
        "panics",
        "record_never_issued",
        "stop_never_issued",
    ] {
        assert_eq!(counters[zero], 0, "{zero}: {counters}");
    }
    eprintln!("PXN test took {:?}", started.elapsed());
}
