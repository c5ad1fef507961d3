//! The demo: a simulated 4-rank NCCL job in one process, driving the real plugin library
//! through its `ncclProfiler_v7` table in NCCL's own call order (app threads for the API
//! and launch events, one proxy thread per rank for proxy ops, steps and GPU channel
//! timings), then a summary read back from the plugin's event log.
//!
//!     cargo run --release -p nccl-profiler-scorep --example demo -- OUTDIR
//!
//! The library is the one `NCCL_PROFILER_PLUGIN` names (a path), else the one Cargo built.

#[path = "../tests/support/mod.rs"]
mod support;

use nccl_profiler_scorep::abi::{event_type as t, state};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use support::*;

const RANKS: i32 = 4;
const ITERATIONS: u64 = 20;
const CHANNELS: u8 = 2;
const COMM_HASH: u64 = 0x5c0e_0d1e_2024_0001;
/// The simulated GPU clock runs this far ahead of the host clock.
const GPU_CLOCK_OFFSET_NS: u64 = 1_700_000_000;

fn main() {
    let out_dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("nccl-scorep-out"));
    let library = std::env::var_os("NCCL_PROFILER_PLUGIN")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .unwrap_or_else(built_library);
    let out = out_dir.display().to_string();
    let plugin = Plugin::load_copy_of(
        &library,
        &[
            ("NCCL_SCOREP_OUTPUT_DIR", out.as_str()),
            ("NCCL_SCOREP_MODE", "jsonl"),
            ("NCCL_SCOREP_EVENTS", "default,steps"),
        ],
    );
    println!("plugin: {}", library.display());
    println!("simulating {RANKS} ranks x {ITERATIONS} AllReduce on comm \"demo\"...");

    std::thread::scope(|scope| {
        for rank in 0..RANKS {
            let plugin = &plugin;
            scope.spawn(move || run_rank(plugin, rank));
        }
    });

    report(&plugin);
}

/// One rank: its app thread enqueues collectives, its proxy thread progresses them.
fn run_rank(plugin: &Plugin, rank: i32) {
    let (ctx, _mask) = plugin.init_v7(COMM_HASH, Some(c"demo"), rank, RANKS);
    for seq in 0..ITERATIONS {
        let count = 1usize << (16 + seq % 5);
        let group_api = plugin.start7(ctx, &mut group_api7(1));
        plugin.record7(group_api, state::GROUP_START_API_STOP, None);
        let coll_api = plugin.start7(
            ctx,
            &mut coll_api7(group_api, c"AllReduce", count, c"ncclFloat32"),
        );
        plugin.stop7(coll_api);
        plugin.record7(group_api, state::GROUP_END_API_START, None);
        let launch = plugin.start7(ctx, &mut plain7(t::KERNEL_LAUNCH, group_api));
        std::thread::sleep(Duration::from_micros(5));
        plugin.stop7(launch);
        let group = plugin.start7(ctx, &mut plain7(t::GROUP, Handle(std::ptr::null_mut())));
        let coll = plugin.start7(
            ctx,
            &mut coll7(
                coll_api,
                group,
                rank,
                seq,
                c"AllReduce",
                count,
                c"ncclFloat32",
                CHANNELS,
            ),
        );
        // The proxy thread takes over the network part and the GPU timings.
        let bytes = count * 4;
        std::thread::scope(|scope| {
            scope.spawn(|| progress(plugin, ctx, coll, rank, bytes));
        });
        plugin.stop7(coll);
        plugin.stop7(group);
        plugin.stop7(group_api);
    }
    plugin.finalize7(ctx);
}

/// What NCCL's proxy thread does for one ring AllReduce: a send and a receive ProxyOp
/// per channel with their steps, and the kernel's start/stop per channel.
fn progress(plugin: &Plugin, ctx: Ctx, coll: Handle, rank: i32, bytes: usize) {
    let next = (rank + 1) % RANKS;
    let prev = (rank + RANKS - 1) % RANKS;
    let gpu_now = || support_now() + GPU_CLOCK_OFFSET_NS;
    for channel in 0..CHANNELS {
        let kernel = plugin.start7(ctx, &mut kernel_ch7(coll, channel, gpu_now()));
        for (peer, is_send) in [(next, true), (prev, false)] {
            let op = plugin.start7(
                ctx,
                &mut proxy_op7(coll, rank, pid(), channel, peer, is_send),
            );
            plugin.record7(op, state::PROXY_OP_IN_PROGRESS_V4, None);
            let chunk = bytes / usize::from(CHANNELS) / 4;
            for step in 0..4 {
                let s = plugin.start7(ctx, &mut proxy_step7(op, rank, step));
                if is_send {
                    plugin.record7(s, state::PROXY_STEP_SEND_GPU_WAIT, Some(trans_size(0)));
                    plugin.record7(s, state::PROXY_STEP_SEND_WAIT, Some(trans_size(chunk)));
                } else {
                    plugin.record7(s, state::PROXY_STEP_RECV_WAIT, Some(trans_size(0)));
                    plugin.record7(
                        s,
                        state::PROXY_STEP_RECV_FLUSH_WAIT,
                        Some(trans_size(chunk)),
                    );
                    plugin.record7(s, state::PROXY_STEP_RECV_GPU_WAIT, Some(trans_size(chunk)));
                }
                std::thread::sleep(Duration::from_micros(2 + (bytes as u64 >> 18)));
                plugin.stop7(s);
            }
            plugin.stop7(op);
        }
        plugin.record7(kernel, state::KERNEL_CH_STOP, Some(ptimer(gpu_now())));
        plugin.stop7(kernel);
    }
}

fn support_now() -> u64 {
    nccl_profiler_scorep::clock::now_ns()
}

fn report(plugin: &Plugin) {
    let events = plugin.events();
    let mut per_kind: BTreeMap<String, usize> = BTreeMap::new();
    for event in &events {
        *per_kind
            .entry(event["kind"].as_str().unwrap_or("?").to_owned())
            .or_default() += 1;
    }
    println!("\nevents per kind:");
    for (kind, n) in &per_kind {
        println!("  {kind:<14} {n:>6}");
    }

    println!("\nper rank (AllReduce):");
    println!("  rank  calls  bytes total  mean GPU time/channel  mean step SendWait bytes");
    for rank in 0..RANKS {
        let colls: Vec<&Value> = events
            .iter()
            .filter(|e| e["kind"] == "Coll" && e["rank"] == rank)
            .collect();
        let bytes: u64 = colls.iter().filter_map(|e| e["bytes"].as_u64()).sum();
        let kernels: Vec<f64> = events
            .iter()
            .filter(|e| e["kind"] == "KernelCh" && e["rank"] == rank)
            .filter_map(|e| {
                let start = e["ptimer_start"].as_u64()?;
                let stop = e["states"][0]["ptimer"].as_u64()?;
                Some(stop.saturating_sub(start) as f64 / 1000.0)
            })
            .collect();
        let sends: Vec<u64> = events
            .iter()
            .filter(|e| e["kind"] == "ProxyStep" && e["rank"] == rank)
            .filter_map(|e| {
                e["states"]
                    .as_array()?
                    .iter()
                    .find(|s| s["state"] == "ProxyStepSendWait")?["trans_size"]
                    .as_u64()
            })
            .collect();
        println!(
            "  {rank:>4}  {:>5}  {:>11}  {:>18.1} us  {:>24}",
            colls.len(),
            bytes,
            mean(&kernels),
            sends.iter().sum::<u64>() / sends.len().max(1) as u64
        );
    }

    let counters = plugin.counters();
    let lost: Vec<String> = counters
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(name, v)| {
            v.as_u64().unwrap_or(0) > 0 && !matches!(name.as_str(), "events_written" | "stop_null")
        })
        .map(|(name, v)| format!("{name}={v}"))
        .collect();
    println!(
        "\n{} events written; {}",
        counters["events_written"],
        if lost.is_empty() {
            "nothing dropped or refused".to_owned()
        } else {
            format!("counted: {}", lost.join(", "))
        }
    );
    println!("event log: {}/", plugin.out_dir().display());
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}
