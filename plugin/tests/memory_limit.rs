//! The memory limit (`NCCL_SCOREP_MEMORY_LIMIT`): a job that would make the plugin hold
//! far more than the limit — every interval after a call NCCL leaves open is held back
//! for its placement — keeps the plugin's heap under the limit, and what was refused for
//! it is counted.

mod support;

use support::*;

/// Calls made after the open one: without a limit, their held-back intervals take about
/// 60 MiB (measured: 58 MiB).
const CALLS: u64 = 120_000;

/// What a job did: the starts it made, how many were refused, and whether a start was
/// accepted again after one was refused.
struct Job {
    plugin: Plugin,
    starts: u64,
    refused: u64,
    resumed: bool,
}

fn held_back_job(limit: &str) -> Job {
    let plugin = Plugin::load(&[
        ("NCCL_SCOREP_MODE", "otf2"),
        ("NCCL_SCOREP_JSONL", "1"),
        ("NCCL_SCOREP_ON_FULL", "wait"),
        ("NCCL_SCOREP_AUTO_MERGE", "0"),
        ("NCCL_SCOREP_MEMORY_LIMIT", limit),
    ]);
    let (ctx, _) = plugin.init_v7(0x77, Some(c"held"), 0, 2);
    // A group NCCL never ends until the finalize: everything after it on this thread's
    // timeline waits for it to be placed.
    let _open = plugin.start7(ctx, &mut group_api7(1));
    let (mut starts, mut refused, mut resumed) = (0, 0, false);
    let mut start = || {
        starts += 1;
        let api = plugin.start7(
            ctx,
            &mut coll_api7(Handle::NULL, c"AllReduce", 1024, c"ncclFloat32"),
        );
        if api.is_null() {
            refused += 1;
            false
        } else {
            plugin.stop7(api);
            true
        }
    };
    for _ in 0..CALLS {
        if !start() && !resumed {
            // The first refusal: a refused call costs nothing, so this thread would make
            // all the others before the collector frees anything; give it the time an
            // application's compute between calls would, until events are taken again.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while !resumed && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(1));
                resumed = start();
            }
        }
    }
    plugin.finalize7(ctx);
    Job {
        plugin,
        starts,
        refused,
        resumed,
    }
}

fn summary(plugin: &Plugin) -> serde_json::Value {
    plugin
        .log_lines()
        .into_iter()
        .rfind(|l| l["type"] == "summary")
        .expect("a summary line")
}

#[test]
fn the_heap_stays_under_the_limit_and_what_was_refused_is_counted() {
    let Job {
        plugin,
        starts,
        refused,
        resumed,
    } = held_back_job("16M");
    let summary = summary(&plugin);
    let peak = summary["heap_peak_bytes"]
        .as_u64()
        .expect("heap_peak_bytes");
    assert_eq!(summary["memory_limit_bytes"], 16 << 20);
    assert!(
        peak <= 16 << 20,
        "the heap peaked at {peak} bytes, over the 16 MiB limit"
    );
    let counters = &summary["counters"];
    assert_eq!(
        counters["memory_limit_events"], refused,
        "every start refused for memory is counted, and nothing else is: {counters}"
    );
    assert!(refused > 0, "the job needed more than the limit");
    // What was not refused is in the trace: the open group, closed at the finalize, too.
    let written = counters["events_written"].as_u64().unwrap();
    assert_eq!(written, starts - refused + 1, "{counters}");
    assert!(
        resumed,
        "recording resumes once the held-back intervals are placed and their memory \
         freed ({written} of {starts} written)"
    );
}

#[test]
fn without_the_limit_the_same_job_holds_far_more() {
    // The measurement the limit is for: it shows the job above would break the limit.
    let Job {
        plugin, refused, ..
    } = held_back_job("off");
    let summary = summary(&plugin);
    assert_eq!(refused, 0);
    assert!(summary["memory_limit_bytes"].is_null());
    let peak = summary["heap_peak_bytes"].as_u64().unwrap();
    assert!(
        peak > 32 << 20,
        "without a limit the held-back intervals take {peak} bytes"
    );
}

#[test]
fn in_record_mode_threads_that_come_and_go_leave_no_ring_of_calls_behind() {
    // Each thread gets a ring of recorded calls beside its ring of records. A job whose
    // threads come and go (a communicator's proxy thread each) must not pile those rings
    // up: 12 threads one after the other, 4 MiB rings, a 16 MiB limit.
    let plugin = Plugin::load(&[
        ("NCCL_SCOREP_MODE", "jsonl,record"),
        ("NCCL_SCOREP_BUFFER_SIZE", "4M"),
        ("NCCL_SCOREP_MEMORY_LIMIT", "16M"),
    ]);
    let (ctx, _) = plugin.init_v7(0x78, Some(c"threads"), 0, 1);
    let mut refused = 0;
    for _ in 0..12 {
        let accepted = std::thread::scope(|s| {
            s.spawn(|| {
                let group = plugin.start7(ctx, &mut group_api7(1));
                plugin.stop7(group);
                !group.is_null()
            })
            .join()
            .unwrap()
        });
        refused += u64::from(!accepted);
        // The writer's and the collector's next rounds (every 5 and 2 ms) find the thread
        // gone.
        std::thread::sleep(std::time::Duration::from_millis(30));
    }
    plugin.finalize7(ctx);
    let summary = summary(&plugin);
    let peak = summary["heap_peak_bytes"].as_u64().unwrap();
    assert_eq!(
        (refused, &summary["counters"]["memory_limit_events"]),
        (0, &serde_json::json!(0)),
        "no start refused for memory; the heap peaked at {peak} bytes"
    );
    assert!(peak <= 16 << 20, "the heap peaked at {peak} bytes");
}
