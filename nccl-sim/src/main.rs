//! The `nccl-sim` command: runs scenarios of the emulated NCCL with a profiler plugin,
//! single- or multi-process, and benchmarks plugins against each other.

use clap::{Args, Parser, Subcommand};
use nccl_sim::job::{self, Job};
use nccl_sim::names::{Algo, Proto};
use nccl_sim::nccl::{Nccl, NetPluginKind, SimConfig, Transport};
use nccl_sim::profiler::Profiler;
use nccl_sim::release::Release;
use nccl_sim::scenario::{self, Params, SCENARIOS};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// The symbols a plugin looks up in the executable (see build.rs), kept in the link: a
/// library function nothing in the binary calls may otherwise be left out.
#[used]
static EXPORTED_VERSION: unsafe extern "C" fn(*mut std::ffi::c_int) -> std::ffi::c_int =
    nccl_sim::nccl::ncclGetVersion;
#[used]
static EXPORTED_CLOCK: unsafe extern "C" fn(*mut i64) -> u64 = nccl_sim::host_clock::nccl_sim_clock;
use std::sync::Arc;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "nccl-sim",
    version,
    about = "A CPU-only NCCL stand-in: loads a profiler plugin the way NCCL does and replays NCCL's call sequences",
    after_help = top_help()
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run scenarios with the profiler plugin (all of them unless --scenario is given).
    #[command(after_help = scenario_help())]
    Run(Box<RunArgs>),
    /// List the scenarios and what each reproduces.
    Scenarios,
    /// Drive identical callback streams through several plugins and compare their cost.
    Bench(nccl_sim::bench::BenchArgs),
    /// Drive a plugin with recorded calls (NCCL_SCOREP_MODE=…,record); see docs/record.md.
    Replay(nccl_sim::replay::ReplayArgs),
}

#[derive(Args, Debug)]
struct RunArgs {
    /// A scenario to run (repeatable); see `nccl-sim scenarios`.
    #[arg(long = "scenario", value_name = "NAME")]
    scenarios: Vec<String>,
    /// The NCCL release to emulate (2.23 … 2.32).
    #[arg(long, default_value = "2.32", value_parser = parse_release)]
    nccl: Release,
    /// The profiler plugin: sets NCCL_PROFILER_PLUGIN for this run (a path or a name).
    #[arg(long, value_name = "PATH|NAME")]
    plugin: Option<OsString>,
    /// Use at most this profiler API version of the plugin (exercises NCCL's shims).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=7))]
    max_api: Option<u8>,
    /// Ranks of the communicator when everything runs in this process (one thread each).
    #[arg(long, default_value_t = 4)]
    ranks: i32,
    /// Operations per rank and scenario.
    #[arg(long, default_value_t = 10)]
    iterations: usize,
    /// Message sizes in bytes, used in turn (K, M, G suffixes allowed).
    #[arg(long, value_delimiter = ',', default_value = "64K,1M", value_parser = parse_size)]
    sizes: Vec<usize>,
    /// Channels per collective.
    #[arg(long, default_value_t = 2)]
    channels: u8,
    #[arg(long, value_enum, default_value = "ring")]
    algo: Algo,
    #[arg(long, value_enum, default_value = "simple")]
    proto: Proto,
    /// The proxy path: the network (steps), a copy transport (ProxyOps never stopped), or none.
    #[arg(long, value_enum, default_value = "net")]
    transport: Transport,
    /// NetPlugin events from the built-in IB or socket plugin.
    #[arg(long, value_enum, default_value = "none")]
    net_plugin: NetPluginKind,
    /// Seed of the time model's noise and the irregular behaviours.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How far the simulated GPU clock runs ahead of the host clock.
    #[arg(long, default_value_t = 1_234_567_890, allow_hyphen_values = true)]
    gpu_offset_ns: i64,
    /// How much faster than its host's clock the simulated GPU clock runs, in ppm
    /// (negative: slower), from the start of the process.
    #[arg(
        long,
        default_value_t = 0.0,
        allow_hyphen_values = true,
        value_name = "PPM"
    )]
    gpu_clock_drift: f64,
    /// Runs simulated time this many times faster than real time.
    #[arg(long, default_value_t = 1.0)]
    speedup: f64,
    /// The simulated network's and GPUs' bandwidth per rank, in GB/s: a smaller value
    /// makes every operation slower (to plant a regression between two runs).
    #[arg(long, default_value_t = 20.0)]
    bandwidth_gbs: f64,
    /// This rank arrives late at every collective …
    #[arg(long, value_name = "RANK")]
    late_rank: Option<i32>,
    /// … by this many microseconds.
    #[arg(long, default_value_t = 500)]
    late_us: u64,
    /// Pace the iterations, as if the application computed between them: every rank
    /// calls its i-th iteration's collectives at a start common to the job's ranks plus
    /// i × this many microseconds of real time (--late-rank --late-us after it). The
    /// scenarios with one thread per rank; 0 is unpaced, back to back.
    #[arg(long, value_name = "US", default_value_t = 0)]
    interval_us: u64,
    /// With --interval-us: each rank's every deadline comes up to this many microseconds
    /// later, at random from --seed (the ranks' compute does not take equally long).
    #[arg(long, value_name = "US", default_value_t = 0)]
    jitter_us: u64,
    /// With --interval-us: each rank's thread moves to a CPU drawn at random at every
    /// iteration, so that on a host with fewer cores than ranks no rank keeps a busy CPU
    /// for the whole run (the ranks of a real job each have their own cores).
    #[arg(long)]
    shuffle_cpus: bool,
    /// Inject one of NCCL's known profiler bugs (repeatable; see docs/nccl-sim.md).
    #[arg(long = "nccl-bug", value_enum, value_name = "BUG")]
    nccl_bugs: Vec<nccl_sim::bugs::NcclBug>,
    /// Write ground truth (per operation and rank) to DIR/truth-<pid>.jsonl.
    #[arg(long, value_name = "DIR")]
    truth_dir: Option<PathBuf>,
    /// Fork N processes, one rank each (like `mpirun -np N`).
    #[arg(long, value_name = "N")]
    procs: Option<usize>,
    /// Multi-process: every rank's sends are progressed by the next local process's proxy
    /// thread, which calls its own plugin with this process's pid, context and handles.
    #[arg(long)]
    pxn: bool,
    /// Spread the job's processes over N simulated hosts named node0, node1, … (consecutive
    /// ranks share one): each process's plugin gets its host in NCCL_SCOREP_HOSTNAME.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    hosts: Option<u32>,
    /// Simulated host clocks: how far each simulated host's clock is off the true clock,
    /// one value per host in --hosts order (`-5ms,5ms`; units ns, us, ms, s); hosts
    /// beyond the list: 0. The plugin reads its host's clock; the ground truth
    /// (--truth-dir) stays in the true clock.
    #[arg(long, value_name = "OFFSETS", value_parser = parse_host_offsets, allow_hyphen_values = true)]
    host_clock_offset: Option<PerHost>,
    /// Simulated host clocks: how fast each simulated host's clock runs against the true
    /// clock, in parts per million, one value per host (`-20,20`); hosts beyond the list:
    /// 0. The drift counts from the job's start.
    #[arg(long, value_name = "PPMS", value_parser = parse_host_drifts, allow_hyphen_values = true)]
    host_clock_drift: Option<PerHost>,
    /// Simulated host clocks: each host's drift after --host-clock-drift-change-at, in
    /// parts per million, one value per host (`-20,20`), as NTP slewing a clock changes
    /// its rate; hosts beyond the list: their --host-clock-drift.
    #[arg(long, value_name = "PPMS", value_parser = parse_host_drifts, allow_hyphen_values = true)]
    host_clock_drift_after: Option<PerHost>,
    /// When the simulated host clocks' drift changes to --host-clock-drift-after, after
    /// the job's start (`1s`, `500ms`).
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = parse_duration_ns)]
    host_clock_drift_change_at: i64,
    /// Never destroy the communicators (the profiler gets no finalize), as applications
    /// that simply exit do.
    #[arg(long)]
    skip_destroy: bool,
    /// How long a collective waits for the ranks of other processes before it completes
    /// without them (a rank whose process died never arrives).
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    peer_patience_ms: u64,
    /// The application's own GPU work ahead of every NCCL kernel: each kernel starts at
    /// least this long after its enqueue.
    #[arg(long, value_name = "US", default_value_t = 0)]
    gpu_busy_us: u64,
    /// The host notices each kernel's start and end this many microseconds late …
    #[arg(long, value_name = "US", default_value_t = 0)]
    late_noticing_us: u64,
    /// … for the kernels of each process's first this many milliseconds (as threads of
    /// processes starting together on busy cores).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    late_noticing_ms: u64,
    /// This rank holds back before iteration --stall-at for --stall-ms (the others enter
    /// its collectives and wait), as a rank that hangs before a collective.
    #[arg(long, value_name = "RANK")]
    stall_rank: Option<i32>,
    #[arg(long, value_name = "ITERATION", default_value_t = 0)]
    stall_at: usize,
    #[arg(long, value_name = "MS", default_value_t = 3_000)]
    stall_ms: u64,
    /// This rank's kernel of the collective with sequence number --hang-seq runs
    /// --hang-ms longer, as a kernel that does not finish.
    #[arg(long, value_name = "RANK")]
    hang_rank: Option<i32>,
    #[arg(long, value_name = "SEQ", default_value_t = 0)]
    hang_seq: u64,
    #[arg(long, value_name = "MS", default_value_t = 3_000)]
    hang_ms: u64,
    /// Where the --hang-rank hang is: `gpu` (the kernel runs longer) or `proxy` (the
    /// kernel takes its usual time; the collective's first send step waits --hang-ms for
    /// the network; needs --transport net).
    #[arg(long, value_enum, default_value = "gpu")]
    hang_in: HangIn,
}

/// Where a planted hang is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum HangIn {
    Gpu,
    Proxy,
}

/// `nccl-sim --help`: where the plugin comes from, and the scenarios.
fn top_help() -> String {
    format!(
        "The plugin comes from NCCL_PROFILER_PLUGIN (or `run --plugin`), chosen by NCCL's own rules for the emulated release. See docs/nccl-sim.md.\n\n{}",
        scenario_help()
    )
}

/// The scenario list, for `nccl-sim run --help`.
fn scenario_help() -> String {
    let mut text = String::from("Scenarios:\n");
    for (name, what) in SCENARIOS {
        text.push_str(&format!("  {name:<14} {what}\n"));
    }
    text.push_str(
        "\nMulti-process: run under mpirun, srun or torchrun (one rank per process), or with --procs N.",
    );
    text
}

/// One value per simulated host (clock offsets in ns, drifts in ppb).
#[derive(Clone, Debug)]
struct PerHost(Vec<i64>);

impl PerHost {
    fn of(list: Option<&PerHost>, host: usize) -> i64 {
        list.and_then(|l| l.0.get(host)).copied().unwrap_or(0)
    }
}

fn parse_host_offsets(text: &str) -> Result<PerHost, String> {
    nccl_sim::host_clock::parse_offsets(text).map(PerHost)
}

fn parse_host_drifts(text: &str) -> Result<PerHost, String> {
    nccl_sim::host_clock::parse_drifts(text).map(PerHost)
}

fn parse_duration_ns(text: &str) -> Result<i64, String> {
    nccl_sim::host_clock::parse_offset(text)
        .ok()
        .filter(|&ns| ns >= 0)
        .ok_or_else(|| format!("{text:?} is not a time after the start (e.g. 1s, 500ms)"))
}

/// Starts this process's simulated host clock (`--host-clock-offset/--host-clock-drift`)
/// for process `rank` of `size` on `hosts` hosts, drifting from the job's common epoch.
fn simulate_host_clock(args: &RunArgs, rank: usize, size: usize) {
    if args.host_clock_offset.is_none()
        && args.host_clock_drift.is_none()
        && args.host_clock_drift_after.is_none()
    {
        return;
    }
    let host = rank * args.hosts.unwrap_or(1) as usize / size.max(1);
    let epoch_ns = std::env::var(nccl_sim::host_clock::ENV_CLOCK_EPOCH)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(nccl_sim::time::host_ns);
    let drift_ppb = PerHost::of(args.host_clock_drift.as_ref(), host);
    let drift_change =
        args.host_clock_drift_after
            .as_ref()
            .map(|after| nccl_sim::host_clock::DriftChange {
                after_ns: args.host_clock_drift_change_at as u64,
                drift_ppb: after.0.get(host).copied().unwrap_or(drift_ppb),
            });
    nccl_sim::host_clock::simulate(nccl_sim::host_clock::SimulatedClock {
        offset_ns: PerHost::of(args.host_clock_offset.as_ref(), host),
        drift_ppb,
        epoch_ns,
        drift_change,
    });
}

fn parse_release(text: &str) -> Result<Release, String> {
    text.parse()
}

fn parse_size(text: &str) -> Result<usize, String> {
    let upper = text.trim().to_ascii_uppercase();
    let (digits, shift) = match upper.chars().last() {
        Some('K') => (&upper[..upper.len() - 1], 10),
        Some('M') => (&upper[..upper.len() - 1], 20),
        Some('G') => (&upper[..upper.len() - 1], 30),
        _ => (upper.as_str(), 0),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{text:?} is not a size in bytes (e.g. 64K, 1M)"))
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(args) => run(*args),
        Command::Scenarios => {
            for (name, what) in SCENARIOS {
                println!("{name:<14} {what}");
            }
            ExitCode::SUCCESS
        }
        Command::Bench(args) => nccl_sim::bench::main(args),
        Command::Replay(args) => nccl_sim::replay::main(args),
    }
}

/// The simulated host of process `rank` of `size` with `--hosts hosts`.
fn simulated_host(rank: usize, size: usize, hosts: u32, pxn: bool) -> Result<String, String> {
    let hosts = hosts as usize;
    if hosts > size {
        return Err(format!(
            "--hosts {hosts} needs at least {hosts} processes (--procs or a launcher), not {size}"
        ));
    }
    if pxn && hosts > 1 {
        // PXN proxies are found by local rank, and the simulated hosts share this
        // machine's mailboxes.
        return Err("--pxn stays on one host: it cannot be combined with --hosts above 1".into());
    }
    Ok(format!("node{}", rank * hosts / size))
}

fn run(args: RunArgs) -> ExitCode {
    if let Some(procs) = args.procs {
        if let Some(Err(error)) = args.hosts.map(|h| simulated_host(0, procs, h, args.pxn)) {
            eprintln!("nccl-sim: {error}");
            return ExitCode::FAILURE;
        }
        if std::env::var_os(nccl_sim::host_clock::ENV_CLOCK_EPOCH).is_none() {
            // One epoch for the job: processes of one simulated host keep one clock. No
            // other thread runs yet.
            std::env::set_var(
                nccl_sim::host_clock::ENV_CLOCK_EPOCH,
                nccl_sim::time::host_ns().to_string(),
            );
        }
        let all: Vec<OsString> = std::env::args_os().skip(1).collect();
        return match job::spawn_procs(procs, &job::strip_procs_arg(&all)) {
            Ok(statuses) if job::all_succeeded(&statuses) => ExitCode::SUCCESS,
            Ok(_) => ExitCode::FAILURE,
            Err(error) => {
                eprintln!("nccl-sim: cannot start {procs} processes: {error}");
                ExitCode::FAILURE
            }
        };
    }
    if args.hang_in == HangIn::Proxy && args.transport != Transport::Net {
        eprintln!("nccl-sim: --hang-in proxy needs --transport net (the other transports have no proxy steps)");
        return ExitCode::FAILURE;
    }
    let job = match Job::detect() {
        Ok(job) => job,
        Err(error) => {
            eprintln!("nccl-sim: {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(hosts) = args.hosts {
        match simulated_host(job.rank, job.size, hosts, args.pxn) {
            // No other thread runs yet: the plugin reads it when it is loaded below.
            Ok(host) => std::env::set_var(nccl_scorep_common::job::ENV_HOSTNAME, host),
            Err(error) => {
                eprintln!("nccl-sim: {error}");
                return ExitCode::FAILURE;
            }
        }
    }
    simulate_host_clock(&args, job.rank, job.size);
    let names: Vec<String> = if args.scenarios.is_empty() {
        SCENARIOS.iter().map(|(name, _)| name.to_string()).collect()
    } else {
        args.scenarios.clone()
    };
    if let Some(unknown) = names
        .iter()
        .find(|n| !SCENARIOS.iter().any(|(name, _)| name == n))
    {
        eprintln!("nccl-sim: no scenario {unknown:?}; `nccl-sim scenarios` lists them");
        return ExitCode::FAILURE;
    }
    let setting = args
        .plugin
        .clone()
        .or_else(|| std::env::var_os(nccl_profiler_abi::loader::PLUGIN_ENV));
    let mut profiler = Profiler::new(args.nccl, setting);
    if let Some(version) = args.max_api {
        profiler = profiler.with_max_version(version);
    }
    let profiler = Arc::new(profiler);
    let base = SimConfig {
        channels: args.channels.max(1),
        algo: args.algo,
        proto: args.proto,
        transport: args.transport,
        net_plugin: args.net_plugin,
        seed: args.seed ^ job.rank as u64,
        skip_destroy: args.skip_destroy,
        peer_patience: std::time::Duration::from_millis(args.peer_patience_ms),
        gpu_busy: std::time::Duration::from_micros(args.gpu_busy_us),
        late_noticing: (args.late_noticing_us > 0 && args.late_noticing_ms > 0).then(|| {
            nccl_sim::nccl::LateNoticing {
                by: std::time::Duration::from_micros(args.late_noticing_us),
                for_first: std::time::Duration::from_millis(args.late_noticing_ms),
            }
        }),
        hang_in_proxy: args.hang_in == HangIn::Proxy,
        hang_kernel: args.hang_rank.map(|rank| {
            (
                rank,
                args.hang_seq,
                std::time::Duration::from_millis(args.hang_ms),
            )
        }),
        bugs: nccl_sim::bugs::NcclBugs::new(&args.nccl_bugs),
        gpu_clock: nccl_sim::time::GpuClock {
            offset_ns: args.gpu_offset_ns,
            drift_ppb: (args.gpu_clock_drift * 1_000.0) as i64,
            epoch_ns: nccl_sim::time::host_ns(),
        },
        time: nccl_sim::time::TimeModel {
            speedup: args.speedup,
            bandwidth: args.bandwidth_gbs.max(1e-3),
            ..Default::default()
        },
        ..SimConfig::default()
    };
    let (ranks, local_ranks) = if job.size > 1 {
        (job.size as i32, vec![job.rank as i32])
    } else {
        (args.ranks.max(1), (0..args.ranks.max(1)).collect())
    };
    let mut failed = false;
    for (index, name) in names.iter().enumerate() {
        let nccl = Nccl::new(Arc::clone(&profiler), scenario::config_for(name, &base));
        if job.size > 1 {
            // Collectives wait for every process's rank, as on real GPUs.
            if let Err(error) = nccl.enable_shared_rendezvous(job.comm_hash(index as u64), job.size)
            {
                eprintln!("nccl-sim: cannot share the collectives' rendezvous table: {error}");
                return ExitCode::FAILURE;
            }
        }
        if args.pxn {
            if let Err(error) =
                nccl.enable_pxn(job.comm_hash(index as u64), job.local_rank, job.local_size)
            {
                eprintln!("nccl-sim: --pxn: {error}");
                return ExitCode::FAILURE;
            }
        }
        let params = Params {
            ranks,
            iterations: args.iterations,
            sizes: args.sizes.clone(),
            comm_hash: job.comm_hash(index as u64),
            local_ranks: local_ranks.clone(),
            late: args
                .late_rank
                .map(|rank| (rank, Duration::from_micros(args.late_us))),
            interval: (args.interval_us > 0).then(|| Duration::from_micros(args.interval_us)),
            jitter: Duration::from_micros(args.jitter_us),
            seed: args.seed,
            shuffle_cpus: args.shuffle_cpus,
            stall: args
                .stall_rank
                .map(|rank| (rank, args.stall_at, Duration::from_millis(args.stall_ms))),
        };
        scenario::run(name, &nccl, &params);
        nccl.finish_shared_rendezvous(job.rank == 0);
        let report = profiler.report();
        if index == 0 {
            eprintln!(
                "nccl-sim: NCCL {} rank {}/{} ({}): {}",
                args.nccl, job.rank, job.size, job.launcher, report.message
            );
        }
        if let Some(dir) = &args.truth_dir {
            let path = dir.join(format!("truth-{}.jsonl", std::process::id()));
            let written = std::fs::create_dir_all(dir).and_then(|()| append_truth(&nccl, &path));
            if let Err(error) = written {
                eprintln!("nccl-sim: cannot write {}: {error}", path.display());
                failed = true;
            }
        }
        eprintln!("nccl-sim: scenario {name} done");
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn append_truth(nccl: &Nccl, path: &std::path::Path) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    for record in nccl.truth.records() {
        writeln!(file, "{}", serde_json::to_string(&record)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::simulated_host;

    #[test]
    fn consecutive_ranks_share_a_simulated_host() {
        let hosts: Vec<String> = (0..4)
            .map(|rank| simulated_host(rank, 4, 2, false).unwrap())
            .collect();
        assert_eq!(hosts, ["node0", "node0", "node1", "node1"]);
        assert_eq!(simulated_host(2, 3, 1, true).unwrap(), "node0");
        let error = simulated_host(0, 2, 3, false).unwrap_err();
        assert!(
            error.contains("--hosts 3 needs at least 3 processes"),
            "{error}"
        );
        let error = simulated_host(0, 4, 2, true).unwrap_err();
        assert!(error.contains("--pxn"), "{error}");
    }
}
