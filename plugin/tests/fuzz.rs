//! The sequence fuzzer: random and hostile call sequences over all seven profiler API
//! versions and several threads, each case in a child process (this test binary run
//! again) with a deadline; after each case its invariants are checked (no crash, no
//! hang, bounded memory, counters that add up, every issued event written once, and a
//! trace that merges and validates).
//!
//! Settings (environment):
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `FUZZ_SEED` | the run's seed (decimal or `0x…`), or `random` | `0x5eed` |
//! | `FUZZ_CALLBACKS` | callbacks in all, over every case | 1 000 000 |
//! | `FUZZ_CASE_CALLBACKS` | callbacks per case (per child process) | 50 000 |
//! | `FUZZ_CASE_SEED` | run only the case with this seed (a replay) | |
//! | `FUZZ_CASE_TIMEOUT_S` | deadline of one case | 120 |
//! | `FUZZ_MAX_RSS_MIB` | bound on a case's peak resident memory | 512 |
//! | `FUZZ_CHILD_RUNNER` | a command the cases run under, e.g. `valgrind -q --error-exitcode=9` | |
//! | `FUZZ_UNTERMINATED` | `0`: no strings without a NUL at a page end | they are passed |
//!
//! The long run of docs/reliability.md:
//!
//! ```sh
//! FUZZ_CALLBACKS=100000000 FUZZ_CASE_CALLBACKS=1000000 \
//!     cargo test --release -p nccl-profiler-scorep --test fuzz -- --nocapture
//! ```

mod support;

#[path = "fuzz/case.rs"]
mod case;
#[path = "fuzz/values.rs"]
mod values;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_TEST: &str = "fuzz_case_in_child";

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().map_or(default, |v| {
        parse_u64(&v).unwrap_or_else(|| panic!("{name}={v}: not a number"))
    })
}

fn parse_u64(text: &str) -> Option<u64> {
    let text = text.trim().replace('_', "");
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// The seed of case `index` of a run with `seed`.
fn case_seed(seed: u64, index: u64) -> u64 {
    seed ^ index.wrapping_mul(0xA076_1D64_78BD_642F).rotate_left(17)
}

/// The `nccl-scorep` tool Cargo built beside this test (`target/<profile>/`), if any.
fn tool_beside_this_test() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let profile_dir = exe.parent()?.parent()?;
    let tool = profile_dir.join("nccl-scorep");
    tool.is_file().then_some(tool)
}

/// The last `n` characters of a file (the child's output).
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let start = text.len().saturating_sub(n);
    let start = (start..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    text[start..].to_owned()
}

/// How one case ended.
struct CaseResult {
    callbacks: u64,
    events: u64,
    peak_rss_kib: u64,
}

/// Runs one case in a child process, then merges and validates its trace; `Err` says
/// what went wrong.
fn run_child(
    seed: u64,
    callbacks: u64,
    timeout: Duration,
    tool: Option<&Path>,
    extra_env: &[(&str, &str)],
) -> Result<CaseResult, String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("out");
    let report = dir.path().join("report.json");
    let log = dir.path().join("output.txt");
    let exe = std::env::current_exe().expect("this test's path");
    let runner = std::env::var("FUZZ_CHILD_RUNNER").unwrap_or_default();
    let mut words = runner.split_whitespace();
    let mut command = match words.next() {
        Some(program) => {
            let mut c = Command::new(program);
            c.args(words).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    let output = std::fs::File::create(&log).expect("the child's output file");
    command
        .args([CHILD_TEST, "--exact", "--ignored", "--nocapture"])
        .args(["--test-threads", "1"])
        .env("FUZZ_CHILD_SEED", format!("{seed:#x}"))
        .env("FUZZ_CHILD_CALLBACKS", callbacks.to_string())
        .env("FUZZ_CHILD_OUT", &out)
        .env("FUZZ_CHILD_REPORT", &report)
        .envs(extra_env.iter().copied())
        .stdin(Stdio::null())
        .stdout(output.try_clone().expect("a second handle"))
        .stderr(output);
    let mut child = command.spawn().expect("start the case");
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the case") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "hung: not done after {} s\n--- its output ---\n{}",
                timeout.as_secs(),
                tail(&log, 4000)
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    if !status.success() {
        return Err(format!(
            "failed ({status})\n--- its output ---\n{}",
            tail(&log, 6000)
        ));
    }
    let report: serde_json::Value = std::fs::read_to_string(&report)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| format!("no report\n--- its output ---\n{}", tail(&log, 4000)))?;
    if let Some(tool) = tool {
        let merge = Command::new(tool)
            .arg("merge")
            .arg(&out)
            .output()
            .expect("run nccl-scorep merge");
        if !merge.status.success() {
            return Err(format!(
                "nccl-scorep merge of its trace failed ({}):\n{}{}",
                merge.status,
                String::from_utf8_lossy(&merge.stdout),
                String::from_utf8_lossy(&merge.stderr)
            ));
        }
        let validate = Command::new(tool)
            .args(["validate", "--json"])
            .arg(&out)
            .output()
            .expect("run nccl-scorep validate");
        let findings: serde_json::Value =
            serde_json::from_slice(&validate.stdout).map_err(|e| {
                format!(
                    "nccl-scorep validate said no JSON ({e}, {}): {}",
                    validate.status,
                    String::from_utf8_lossy(&validate.stderr)
                )
            })?;
        let errors: Vec<&serde_json::Value> = findings["findings"]
            .as_array()
            .map(|all| all.iter().filter(|f| f["severity"] == "error").collect())
            .unwrap_or_default();
        if !errors.is_empty() || !validate.status.success() {
            return Err(format!(
                "nccl-scorep validate of its trace failed ({}): {}",
                validate.status,
                serde_json::to_string_pretty(&errors).unwrap_or_default()
            ));
        }
    }
    Ok(CaseResult {
        callbacks: report["callbacks"].as_u64().unwrap_or(0),
        events: report["issued"].as_u64().unwrap_or(0),
        peak_rss_kib: report["peak_rss_kib"].as_u64().unwrap_or(0),
    })
}

#[test]
fn sequences_keep_every_invariant() {
    let seed = match std::env::var("FUZZ_SEED").as_deref() {
        Ok("random") => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        Ok(text) => parse_u64(text).unwrap_or_else(|| panic!("FUZZ_SEED={text}: not a number")),
        Err(_) => 0x5eed,
    };
    let total = env_u64("FUZZ_CALLBACKS", 1_000_000);
    let per_case = env_u64("FUZZ_CASE_CALLBACKS", 50_000).max(100);
    let timeout = Duration::from_secs(env_u64("FUZZ_CASE_TIMEOUT_S", 120));
    let tool = tool_beside_this_test();
    if tool.is_none() {
        println!(
            "fuzz: no nccl-scorep built beside this test: traces are not merged and validated"
        );
    }
    let cases: Vec<u64> = match std::env::var("FUZZ_CASE_SEED") {
        Ok(text) => vec![parse_u64(&text).expect("FUZZ_CASE_SEED: a number")],
        Err(_) => (0..total.div_ceil(per_case))
            .map(|i| case_seed(seed, i))
            .collect(),
    };
    println!(
        "fuzz: seed {seed:#x}, {} cases of {per_case} callbacks",
        cases.len()
    );
    let started = Instant::now();
    let (mut callbacks, mut events, mut peak) = (0, 0, 0);
    for (index, &case) in cases.iter().enumerate() {
        match run_child(case, per_case, timeout, tool.as_deref(), &[]) {
            Ok(result) => {
                callbacks += result.callbacks;
                events += result.events;
                peak = peak.max(result.peak_rss_kib);
            }
            Err(what) => panic!(
                "fuzz case {index} (seed {case:#x}) of the run with seed {seed:#x}: {what}\n\
                 replay: FUZZ_CASE_SEED={case:#x} FUZZ_CASE_CALLBACKS={per_case} \
                 cargo test -p nccl-profiler-scorep --test fuzz -- --nocapture"
            ),
        }
    }
    println!(
        "fuzz: seed {seed:#x}: {callbacks} callbacks, {events} events in {} cases, {:.1} s, \
         peak RSS of a case {} MiB: every invariant held",
        cases.len(),
        started.elapsed().as_secs_f64(),
        peak / 1024
    );
    assert!(callbacks >= total.min(per_case * cases.len() as u64));
}

/// One case, in the child process the driver started (does nothing when run otherwise).
#[test]
#[ignore = "a fuzz case: run by sequences_keep_every_invariant in a child process"]
fn fuzz_case_in_child() {
    let Ok(seed) = std::env::var("FUZZ_CHILD_SEED") else {
        return;
    };
    let seed = parse_u64(&seed).expect("FUZZ_CHILD_SEED");
    let callbacks = env_u64("FUZZ_CHILD_CALLBACKS", 10_000);
    let out = PathBuf::from(std::env::var("FUZZ_CHILD_OUT").expect("FUZZ_CHILD_OUT"));
    let unterminated = std::env::var("FUZZ_UNTERMINATED").map_or(true, |v| v != "0");
    let report = if std::env::var("FUZZ_CHILD_MODE").as_deref() == Ok("unterminated") {
        unterminated_string_case(&out);
        serde_json::json!({ "callbacks": 4 })
    } else {
        case::run_case(seed, callbacks, &out, unterminated).to_json()
    };
    let path = std::env::var("FUZZ_CHILD_REPORT").expect("FUZZ_CHILD_REPORT");
    std::fs::write(path, report.to_string()).expect("write the report");
}

/// A CollApi whose `func` has no NUL and ends at the last byte before a `PROT_NONE` page.
fn unterminated_string_case(out: &Path) {
    use support::*;
    let out = out.display().to_string();
    let plugin = Plugin::load(&[("NCCL_SCOREP_OUTPUT_DIR", &out)]);
    let (ctx, _) = plugin.init_v7(7, Some(c"edge"), 0, 1);
    let strings = values::Strings::new();
    let mut descr = coll_api7(Handle::NULL, c"AllReduce", 8, c"ncclFloat32");
    descr.u.collApi.func = strings.unterminated();
    let api = plugin.start7(ctx, &mut descr);
    plugin.stop7(api);
    plugin.finalize7(ctx);
    assert_eq!(by_id(&plugin.events(), api)["func"], "Unknown");
}

/// The strings NCCL passes (`func`, `datatype`, `algo`, `proto`, the comm name) are read
/// up to their NUL within a bound: one without a NUL that ends where mapped memory ends must be refused (read as
/// unknown), not read past into the next page (which crashed the process with SIGSEGV).
#[test]
fn a_string_without_nul_at_a_page_end_is_not_read_past() {
    let result = run_child(
        1,
        0,
        Duration::from_secs(60),
        None,
        &[("FUZZ_CHILD_MODE", "unterminated")],
    );
    if let Err(what) = result {
        panic!("{what}");
    }
}
