//! Memory under overload: four threads that call the plugin faster than its collector can
//! write (a ring of 4 KiB, every event kind), for a while; prints the process's resident
//! memory every second, which must level off. A measurement, run by hand:
//!
//! ```sh
//! OVERLOAD_SECONDS=600 OVERLOAD_ON_FULL=drop \
//!     cargo test --release -p nccl-profiler-scorep --test overload -- --ignored --nocapture
//! ```

mod support;

use nccl_profiler_abi::state;
use support::*;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

#[test]
#[ignore = "an experiment: run by hand"]
fn memory_levels_off_under_overload() {
    let seconds: u64 = std::env::var("OVERLOAD_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let mode = std::env::var("OVERLOAD_ON_FULL").unwrap_or_else(|_| "drop".into());
    let limit = std::env::var("OVERLOAD_MEMORY_LIMIT").unwrap_or_else(|_| "64M".into());
    // The application's own memory: what the process holds before the plugin is loaded.
    let application = rss_kib();
    let plugin = Plugin::load(&[
        ("NCCL_SCOREP_MEMORY_LIMIT", &limit),
        ("NCCL_SCOREP_MODE", "otf2"),
        ("NCCL_SCOREP_JSONL", "0"),
        ("NCCL_SCOREP_EVENTS", "all"),
        ("NCCL_SCOREP_BUFFER_SIZE", "4K"),
        ("NCCL_SCOREP_ON_FULL", &mode),
        ("NCCL_SCOREP_AUTO_MERGE", "0"),
    ]);
    let table = plugin.v7();
    let start = std::time::Instant::now();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let plugin = &plugin;
            let stop = &stop;
            scope.spawn(move || {
                let (ctx, _) = plugin.init_v7(0x1000 + thread, Some(c"stress"), 0, 2);
                let mut seq = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    seq += 1;
                    let api = start_in(
                        table,
                        ctx,
                        &mut coll_api7(Handle::NULL, c"AllReduce", 1024, c"ncclFloat32"),
                    );
                    let coll = start_in(
                        table,
                        ctx,
                        &mut coll7(
                            api,
                            Handle::NULL,
                            0,
                            seq,
                            c"AllReduce",
                            1024,
                            c"ncclFloat32",
                            2,
                        ),
                    );
                    let op = start_in(
                        table,
                        ctx,
                        &mut proxy_op7(coll, 1, std::process::id() as i32, 0, 1, true),
                    );
                    for step in 0..8 {
                        let s = start_in(table, ctx, &mut proxy_step7(op, 1, step));
                        record_in(table, s, state::PROXY_STEP_SEND_WAIT, None);
                        stop_in(table, s);
                    }
                    let k = start_in(table, ctx, &mut kernel_ch7(coll, 0, 100));
                    record_in(table, k, state::KERNEL_CH_STOP, Some(ptimer(200)));
                    stop_in(table, k);
                    stop_in(table, op);
                    stop_in(table, api);
                    stop_in(table, coll);
                }
                finalize_in(table, ctx);
            });
        }
        let mut last = 0;
        let mut most = 0;
        while start.elapsed().as_secs() < seconds {
            std::thread::sleep(std::time::Duration::from_secs(1));
            let now = rss_kib();
            most = most.max(now);
            println!(
                "{:>3} s  RSS {:>8} KiB ({:+} KiB), above the application {:>8} KiB",
                start.elapsed().as_secs(),
                now,
                now as i64 - last as i64,
                now as i64 - application as i64,
            );
            last = now;
        }
        println!(
            "application {application} KiB; the most above it {} KiB ({mode}, limit {limit})",
            most as i64 - application as i64
        );
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}
