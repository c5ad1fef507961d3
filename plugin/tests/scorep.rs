//! Score-P mode at the plugin boundary, with call orders NCCL's releases do not produce
//! today but the plugin must survive: stops on another thread than the start, and stops
//! out of order. Each case runs in a child process (this test binary again, one ignored
//! test selected by name) with the Score-P stand-in preloaded, because the stand-in (NOT
//! Score-P) aborts the whole process on a rule violation, as Score-P does.

mod support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};
use support::{coll7, coll_api7, group_api7, plain7, Handle, Plugin};

use nccl_profiler_abi::event_type as t;

const CHILD: &str = "PLUGIN_TEST_CHILD";

fn stand_in() -> PathBuf {
    let plugin = support::built_library();
    let dir = plugin.parent().unwrap();
    [dir.to_path_buf(), dir.join("deps")]
        .into_iter()
        .map(|d| d.join("libscorep_stand_in.so"))
        .find(|p| p.exists())
        .expect("libscorep_stand_in.so is built as a dev-dependency")
}

struct Child {
    output: Output,
    calls: Vec<Value>,
    dir: tempfile::TempDir,
}

/// Runs the ignored test `name` of this binary in a child with the stand-in preloaded.
fn child(name: &str) -> Child {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stand-in.jsonl");
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD, "1")
        .env("LD_PRELOAD", stand_in())
        .env("SCOREP_STAND_IN_LOG", &log)
        .env("SCOREP_EXPERIMENT_DIRECTORY", dir.path().join("exp"))
        .env("NCCL_SCOREP_AUTO_MERGE", "0")
        .env_remove("SCOREP_METRIC_PLUGINS")
        .output()
        .unwrap();
    let calls = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    Child { output, calls, dir }
}

fn in_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// (tid, call, region) of every enter and end.
fn region_calls(calls: &[Value]) -> Vec<(i64, String, String)> {
    calls
        .iter()
        .filter(|c| c["call"] == "enter" || c["call"] == "end")
        .map(|c| {
            (
                c["tid"].as_i64().unwrap(),
                c["call"].as_str().unwrap().to_owned(),
                c["region"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_stand_in_aborts_like_score_p_on_an_end_from_another_thread() {
    let run = child("cross_thread_end_straight_to_the_stand_in");
    assert!(!run.output.status.success(), "the stand-in must abort");
    let stderr = String::from_utf8_lossy(&run.output.stderr);
    assert!(stderr.contains("Task stack underflow"), "{stderr}");
    assert!(run.calls.iter().any(|c| c["call"] == "abort"));
}

#[test]
#[ignore = "run in a child process by the test above"]
fn cross_thread_end_straight_to_the_stand_in() {
    if !in_child() {
        return;
    }
    type Begin = unsafe extern "C" fn(*const std::ffi::c_char, u32, *const std::ffi::c_char, u32);
    type End = unsafe extern "C" fn(*const std::ffi::c_char);
    let this = libloading::os::unix::Library::this();
    // SAFETY: the stand-in's functions with Score-P's signatures.
    let (begin, end) = unsafe {
        (
            *this
                .get::<Begin>(b"SCOREP_User_RegionByNameBegin\0")
                .unwrap(),
            *this.get::<End>(b"SCOREP_User_RegionByNameEnd\0").unwrap(),
        )
    };
    // SAFETY: valid C strings.
    unsafe { begin(c"r".as_ptr(), 0, c"f".as_ptr(), 1) };
    std::thread::spawn(move || {
        // SAFETY: as above; this is the violation the stand-in must catch.
        unsafe { end(c"r".as_ptr()) }
    })
    .join()
    .unwrap();
}

#[test]
fn stops_on_other_threads_and_out_of_order_never_break_score_p_s_nesting() {
    let run = child("awkward_stop_orders");
    let stderr = String::from_utf8_lossy(&run.output.stderr);
    assert!(run.output.status.success(), "{stderr}");
    let calls = region_calls(&run.calls);
    // Every end closes the innermost region of its own thread.
    let mut stacks: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for (tid, call, region) in &calls {
        let stack = stacks.entry(*tid).or_default();
        if call == "enter" {
            stack.push(region.clone());
        } else {
            assert_eq!(
                stack.pop().as_ref(),
                Some(region),
                "thread {tid}: {calls:?}"
            );
        }
    }
    assert!(stacks.values().all(Vec::is_empty), "{stacks:?}");
    let main_tid = calls[0].0;
    let main: Vec<(&str, &str)> = calls
        .iter()
        .filter(|(tid, _, _)| *tid == main_tid)
        .map(|(_, call, region)| (call.as_str(), region.as_str()))
        .collect();
    let expected = [
        ("enter", "NCCL clock sync"),
        ("end", "NCCL clock sync"),
        // 1. A plan whose tasks stop in start order: siblings, each task ended when the
        // next one starts.
        ("enter", "ncclGroup"),
        ("enter", "ncclAllReduce"),
        ("end", "ncclAllReduce"),
        ("enter", "NCCL kernel launch"),
        ("end", "NCCL kernel launch"),
        ("enter", "NCCL plan enqueue"),
        ("enter", "AllReduce enqueue"),
        ("end", "AllReduce enqueue"),
        ("enter", "AllGather enqueue"),
        ("end", "AllGather enqueue"),
        ("end", "NCCL plan enqueue"),
        ("end", "ncclGroup"),
        // 2. A task stopped on another thread: ended here with the plan around it.
        ("enter", "NCCL plan enqueue"),
        ("enter", "AllReduce enqueue"),
        ("end", "AllReduce enqueue"),
        ("end", "NCCL plan enqueue"),
        // 4. (after 3 on the other thread) the last sync point.
        ("enter", "NCCL clock sync"),
        ("end", "NCCL clock sync"),
    ];
    assert_eq!(main, expected);
    // 3. On another thread: a kernel launch stopped by the main thread is ended at this
    // thread's next callback, before its next region.
    let other: Vec<(&str, &str)> = calls
        .iter()
        .filter(|(tid, _, _)| *tid != main_tid)
        .map(|(_, call, region)| (call.as_str(), region.as_str()))
        .collect();
    assert_eq!(
        other,
        [
            ("enter", "NCCL kernel launch"),
            ("end", "NCCL kernel launch"),
            ("enter", "NCCL plan enqueue"),
            ("end", "NCCL plan enqueue"),
        ]
    );
    let logs = support::read_logs(&run.dir.path().join("exp/nccl"));
    let counters = &logs
        .iter()
        .rfind(|l| l["type"] == "summary")
        .expect("a summary")["counters"];
    assert_eq!(counters["scorep_cross_thread_stops"], 2, "{counters}");
    assert_eq!(counters["scorep_closed_late"], 2, "{counters}");
    assert_eq!(counters["scorep_ends_deferred"], 0, "{counters}");
    assert_eq!(counters["scorep_tasks_ended_at_next"], 1, "{counters}");
    assert_eq!(counters["scorep_left_open"], 0, "{counters}");
    // Ten events, each entered in Score-P once, and each still in the sidecar's log.
    assert_eq!(counters["scorep_regions_entered"], 10, "{counters}");
    assert_eq!(counters["events_written"], 10, "{counters}");
}

#[test]
fn a_plan_of_a_hundred_tasks_gives_a_hundred_sibling_regions_inside_the_plan() {
    let run = child("plan_of_a_hundred_tasks");
    let stderr = String::from_utf8_lossy(&run.output.stderr);
    assert!(run.output.status.success(), "{stderr}");
    let calls: Vec<(String, String)> = region_calls(&run.calls)
        .into_iter()
        .map(|(_, call, region)| (call, region))
        .filter(|(_, region)| region != "NCCL clock sync")
        .collect();
    let kinds = ["AllReduce", "AllGather", "ReduceScatter", "Broadcast"];
    let mut expected = vec![("enter".to_owned(), "NCCL plan enqueue".to_owned())];
    for i in 0..100 {
        let region = format!("{} enqueue", kinds[i % kinds.len()]);
        expected.push(("enter".to_owned(), region.clone()));
        expected.push(("end".to_owned(), region));
    }
    expected.push(("end".to_owned(), "NCCL plan enqueue".to_owned()));
    assert_eq!(calls, expected);
    let logs = support::read_logs(&run.dir.path().join("exp/nccl"));
    let counters = &logs
        .iter()
        .rfind(|l| l["type"] == "summary")
        .expect("a summary")["counters"];
    assert_eq!(counters["scorep_regions_entered"], 101, "{counters}");
    assert_eq!(counters["scorep_tasks_ended_at_next"], 99, "{counters}");
    assert_eq!(counters["scorep_cross_thread_stops"], 0, "{counters}");
    assert_eq!(counters["scorep_not_forwarded"], 0, "{counters}");
    assert_eq!(counters["scorep_ends_deferred"], 0, "{counters}");
}

/// With `NCCL_SCOREP_ON_FULL=wait` a thread that waits for room in its full ring is in
/// Score-P's "NCCL held back by the plugin" region meanwhile: Score-P's profile shows the
/// time the plugin took, once per wait the sidecar counts.
#[test]
fn a_wait_for_room_is_a_score_p_region_on_the_waiting_thread() {
    let run = child("waits_for_room_under_score_p");
    let stderr = String::from_utf8_lossy(&run.output.stderr);
    assert!(run.output.status.success(), "{stderr}");
    let calls = region_calls(&run.calls);
    let mut waits = 0;
    for (i, (tid, call, region)) in calls.iter().enumerate() {
        if region == "NCCL held back by the plugin" && call == "enter" {
            // Left right after, on the same thread: nothing is entered inside it.
            let next = &calls[i + 1];
            assert_eq!(
                (next.0, next.1.as_str(), next.2.as_str()),
                (*tid, "end", region.as_str())
            );
            waits += 1;
        }
    }
    let logs = support::read_logs(&run.dir.path().join("exp/nccl"));
    let counters = &logs
        .iter()
        .rfind(|l| l["type"] == "summary")
        .expect("a summary")["counters"];
    assert!(
        waits > 0,
        "a 4 KiB ring cannot take 3000 calls without a wait"
    );
    assert_eq!(counters["held_back"], waits, "{counters}");
    assert_eq!(counters["events_written"], 3000, "{counters}");
}

#[test]
#[ignore = "run in a child process by the test above"]
fn waits_for_room_under_score_p() {
    if !in_child() {
        return;
    }
    let plugin = Plugin::load(&[
        ("NCCL_SCOREP_EVENTS", "all"),
        ("NCCL_SCOREP_BUFFER_SIZE", "4K"),
        ("NCCL_SCOREP_ON_FULL", "wait"),
    ]);
    let (ctx, _) = plugin.init_v7(0x5c10, Some(c"waits"), 0, 2);
    for _ in 0..3000 {
        let api = plugin.start7(
            ctx,
            &mut coll_api7(
                Handle(std::ptr::null_mut()),
                c"AllReduce",
                256,
                c"ncclFloat32",
            ),
        );
        plugin.stop7(api);
    }
    plugin.finalize7(ctx);
}

#[test]
#[ignore = "run in a child process by the test above"]
fn plan_of_a_hundred_tasks() {
    if !in_child() {
        return;
    }
    let plugin = Plugin::load(&[("NCCL_SCOREP_EVENTS", "all")]);
    let (ctx, _) = plugin.init_v7(0x5c0f, Some(c"hundred"), 0, 2);
    let kinds = [c"AllReduce", c"AllGather", c"ReduceScatter", c"Broadcast"];
    // As NCCL does: the plan's tasks all start, then stop in start order.
    let group = plugin.start7(ctx, &mut plain7(t::GROUP, Handle(std::ptr::null_mut())));
    let tasks: Vec<_> = (0..100u64)
        .map(|i| {
            let func = kinds[i as usize % kinds.len()];
            plugin.start7(
                ctx,
                &mut coll7(
                    Handle(std::ptr::null_mut()),
                    group,
                    0,
                    i,
                    func,
                    256,
                    c"ncclFloat32",
                    2,
                ),
            )
        })
        .collect();
    for task in tasks {
        plugin.stop7(task);
    }
    plugin.stop7(group);
    plugin.finalize7(ctx);
}

#[test]
#[ignore = "run in a child process by the test above"]
fn awkward_stop_orders() {
    if !in_child() {
        return;
    }
    let plugin = Plugin::load(&[("NCCL_SCOREP_EVENTS", "all")]);
    let (ctx, _) = plugin.init_v7(0x5c0e, Some(c"awkward"), 0, 2);
    let float = c"ncclFloat32";

    // 1. GroupApi { CollApi; KernelLaunch; Group { Coll A, Coll B; stop A; stop B } }.
    let group_api = plugin.start7(ctx, &mut group_api7(1));
    let api = plugin.start7(ctx, &mut coll_api7(group_api, c"AllReduce", 256, float));
    plugin.stop7(api);
    let launch = plugin.start7(ctx, &mut plain7(t::KERNEL_LAUNCH, group_api));
    plugin.stop7(launch);
    let group = plugin.start7(ctx, &mut plain7(t::GROUP, Handle(std::ptr::null_mut())));
    let a = plugin.start7(
        ctx,
        &mut coll7(api, group, 0, 0, c"AllReduce", 256, float, 2),
    );
    let b = plugin.start7(
        ctx,
        &mut coll7(api, group, 0, 0, c"AllGather", 1024, c"ncclInt8", 2),
    );
    plugin.stop7(a);
    plugin.stop7(b);
    plugin.stop7(group);
    plugin.stop7(group_api);

    // 2. Group { Coll } with the Coll stopped on another thread.
    let group = plugin.start7(ctx, &mut plain7(t::GROUP, Handle(std::ptr::null_mut())));
    let task = plugin.start7(
        ctx,
        &mut coll7(api, group, 0, 1, c"AllReduce", 256, float, 2),
    );
    std::thread::scope(|s| {
        s.spawn(|| plugin.stop7(task));
    });
    plugin.stop7(group);

    // 3. A kernel launch started on another thread and stopped here; that thread's next
    // callback ends it before entering its next region.
    let (sender, receiver) = std::sync::mpsc::channel();
    let (resume, wait) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        let plugin = &plugin;
        s.spawn(move || {
            let launch = plugin.start7(ctx, &mut plain7(t::KERNEL_LAUNCH, group_api));
            sender.send(launch).unwrap();
            wait.recv().unwrap();
            let next = plugin.start7(ctx, &mut plain7(t::GROUP, Handle(std::ptr::null_mut())));
            plugin.stop7(next);
        });
        let launch = receiver.recv().unwrap();
        plugin.stop7(launch);
        resume.send(()).unwrap();
    });

    plugin.finalize7(ctx);
}
