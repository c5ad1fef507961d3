//! `nccl-sim bench` as a library: the empty plugin alone on every release, our plugin
//! against it, and plugins that cannot be used.

use nccl_sim::bench::{self, BenchConfig, BenchError};
use nccl_sim::release::Release;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Our plugin's settings, set once before any test runs a bench (the plugin reads them at
/// its first `init`): output in a temporary directory, every event, rings that hold a
/// whole test run (so nothing is dropped and no handle is NULL).
fn setup() {
    static OUTPUT: OnceLock<tempfile::TempDir> = OnceLock::new();
    OUTPUT.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temporary directory");
        std::env::set_var("NCCL_SCOREP_OUTPUT_DIR", dir.path());
        std::env::set_var("NCCL_SCOREP_EVENTS", "all");
        std::env::set_var("NCCL_SCOREP_BUFFER_SIZE", "64M");
        dir
    });
}

fn our_plugin() -> PathBuf {
    nccl_sim::our_plugin_for_tests()
}

fn small(plugins: Vec<OsString>, release: Release) -> BenchConfig {
    BenchConfig {
        plugins,
        release,
        threads: 2,
        iterations: 200,
        batch: 20,
        warmup_batches: 2,
        ..BenchConfig::default()
    }
}

#[test]
fn the_empty_plugin_gets_every_callback_of_every_release() {
    setup();
    assert!(bench::empty_plugin_path().exists());
    for release in Release::all() {
        let config = small(Vec::new(), release);
        let rows = bench::run(&config).unwrap_or_else(|e| panic!("{release}: {e}"));
        assert_eq!(rows.len(), 1, "{release}");
        let row = &rows[0];
        assert!(row.floor);
        assert_eq!(row.name, "empty");
        assert_eq!(row.api_version, release.newest_api(), "{release}");
        assert_eq!(row.null_handles, 0, "{release}");
        assert_eq!(
            row.unrequested, 0,
            "{release}: the empty plugin asks for everything"
        );
        let (app, proxy) = bench::callbacks_per_iteration(release);
        let iterations = (config.threads * config.iterations) as u64;
        assert_eq!(row.callbacks, (app + proxy) * iterations, "{release}");
        assert!(row.cpu.median > 0.0 && row.wall.median > 0.0, "{release}");
        assert!(row.cpu.p10 <= row.cpu.median && row.cpu.median <= row.cpu.p90);
        assert!(row.app_cpu.median > 0.0 && row.proxy_cpu.median > 0.0);
    }
}

#[test]
fn our_plugin_costs_more_than_the_floor_and_drops_nothing() {
    setup();
    let ours = our_plugin();
    let config = small(
        vec![ours.clone().into_os_string()],
        nccl_sim::release::NEWEST,
    );
    let rows = bench::run(&config).expect("bench with our plugin");
    assert_eq!(rows.len(), 2);
    let (empty, plugin) = (&rows[0], &rows[1]);
    assert!(empty.floor && !plugin.floor);
    assert_eq!(plugin.setting, ours.as_os_str());
    assert_eq!(plugin.api_version, 7);
    assert_eq!(plugin.null_handles, 0, "our plugin dropped events");
    assert_eq!(plugin.starts, empty.starts, "identical streams");
    assert_eq!(plugin.callbacks, empty.callbacks, "identical streams");
    assert!(
        plugin.cpu.median > empty.cpu.median,
        "ours {:?} vs empty {:?}",
        plugin.cpu,
        empty.cpu
    );
    let text = bench::render(&config, &rows);
    assert!(text.contains("empty (floor)") && text.contains(&ours.display().to_string()));
    assert!(text.contains("NULL handles"), "{text}");
    assert!(!text.contains("no figure"), "{text}");
    // Each stream on its own, as a multiple of the plugin compared (ours: 1).
    let streams: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("per stream"))
        .collect();
    let row = |prefix: &str| *streams.iter().find(|l| l.starts_with(prefix)).unwrap();
    let ratios = |line: &str| -> Vec<f64> {
        // The numbers after each "]": the three multiples.
        line.split(']')
            .skip(1)
            .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
            .collect()
    };
    assert_eq!(ratios(row("#1 ")), [1.0, 1.0, 1.0], "{text}");
    let floor = ratios(row("#0 "));
    assert_eq!(floor.len(), 3, "{text}");
    assert!(floor.iter().all(|&r| r > 0.0 && r < 1.0), "{text}");
    // The same plugin, had it refused one start in 500 (0.2 %), gets no figure.
    let mut refusing = rows.clone();
    refusing[1].refused = refusing[1].recorded_starts / 500;
    refusing[1].null_handles = refusing[1].refused;
    let text = bench::render(&config, &refusing);
    let row = text.lines().find(|l| l.starts_with("#1 ")).unwrap();
    assert!(row.contains("no figure"), "{text}");
    assert!(text.contains("more than 0.1 %: no figure"), "{text}");
    // Had it returned NULL for every Group (a type it does not record), it keeps its
    // figure, and the report says which types it leaves out.
    let mut partial = rows.clone();
    partial[1].not_recorded = 1; // Group
    partial[1].null_handles = partial[1].starts / 10;
    partial[1].recorded_starts = partial[1].starts - partial[1].null_handles;
    let text = bench::render(&config, &partial);
    let row = text.lines().find(|l| l.starts_with("#1 ")).unwrap();
    assert!(!row.contains("no figure"), "{text}");
    assert!(
        text.contains("records no Group (every start returned NULL)"),
        "{text}"
    );
    // Had it refused every start, it recorded nothing: no figure.
    partial[1].not_recorded = 0xFFFF;
    partial[1].recorded_starts = 0;
    partial[1].null_handles = partial[1].starts;
    let text = bench::render(&config, &partial);
    let row = text.lines().find(|l| l.starts_with("#1 ")).unwrap();
    assert!(row.contains("no figure"), "{text}");
    assert!(text.contains("it recorded nothing, no figure"), "{text}");
}

/// As NCCL, the bench calls a plugin only for the event types its activation mask enables
/// and their ancestors: with Coll and KernelCh asked for (NVIDIA's Inspector's mask), our
/// plugin gets GroupApi, CollApi, Group, Coll and KernelCh, five starts per iteration, and
/// no KernelLaunch, ProxyOp or ProxyStep.
#[test]
fn a_plugin_is_called_only_for_the_events_its_mask_enables() {
    let output_dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_nccl-sim"))
        .args([
            "bench",
            "--nccl",
            "2.28",
            "--iterations",
            "2000",
            "--batch",
            "20",
        ])
        .args(["--warmup", "2", "--plugin"])
        .arg(our_plugin())
        .env("NCCL_SCOREP_EVENTS", "coll,kernel_ch")
        .env("NCCL_SCOREP_OUTPUT_DIR", output_dir.path())
        .env("NCCL_SCOREP_AUTO_MERGE", "0")
        .output()
        .expect("run nccl-sim bench");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    // The bench's GPU times lie between the API calls and the proxy thread's noticing,
    // on the host's clock: nothing for the plugin to reject.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("impossible GPU times"), "{stderr}");
    let row = |prefix: &str| text.lines().find(|l| l.starts_with(prefix)).unwrap();
    assert!(row("#0 ").ends_with(" 0 / 22000"), "{text}");
    assert!(row("#1 ").ends_with(" 0 / 10000"), "{text}");
    assert!(
        text.contains(
            "its activation mask 0x42 does not ask for ProxyOp, ProxyStep, KernelLaunch: \
             NCCL does not call it for those"
        ),
        "{text}"
    );
}

#[test]
fn a_plugin_that_cannot_be_used_is_a_clear_error() {
    setup();
    let missing = "/nonexistent/libnccl-profiler-nothing.so";
    let error = bench::run(&small(vec![missing.into()], nccl_sim::release::NEWEST))
        .expect_err("a missing library");
    let BenchError::Load { plugin, reason } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(plugin, missing);
    assert!(reason.contains("No such file"), "{reason}");
    assert!(error.to_string().contains(missing), "{error}");

    // A library without any ncclProfiler_vN symbol.
    let error = bench::run(&small(vec!["libm.so.6".into()], Release::new(27)))
        .expect_err("not a profiler plugin");
    assert!(error.to_string().contains("unsupported"), "{error}");

    let zero = BenchConfig {
        threads: 0,
        ..BenchConfig::default()
    };
    assert!(matches!(bench::run(&zero), Err(BenchError::BadConfig(_))));
}
