#!/usr/bin/env bash
# The whole test suite: formatting, lints, every test of the workspace, doc tests.
# Any failure stops it with a non-zero status.
set -euo pipefail

# Debian packages the tests need. Add a package here when a test starts to use it.
DEBIAN_PACKAGES=(valgrind openmpi-bin libopenmpi-dev libotf2-trace-dev otf2-tools python3-otf2 libclang-dev
    cmake pkg-config man-db chromium fonts-dejavu-core)

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

# Each step says when it starts, in seconds since the suite began, so a slow step shows.
step() {
    printf '\n==> [%4ds] %s\n' "$SECONDS" "$*"
}

# Python packages the tests read our files with (readers nobody here wrote).
PIP_PACKAGES=(pycubexr)

step "dependencies"
bash scripts/install-deps.sh "${DEBIAN_PACKAGES[@]}"
for package in "${PIP_PACKAGES[@]}"; do
    if ! python3 -c "import $package" >/dev/null 2>&1; then
        echo "installing Python package $package"
        python3 -m pip install --user --quiet "$package"
    fi
done

step "cargo fmt --all -- --check"
cargo fmt --all -- --check

# Shell scripts are linted where shellcheck is installed; it is not worth installing here.
if command -v shellcheck >/dev/null 2>&1; then
    step "shellcheck"
    shellcheck scripts/*.sh .ci/run
fi

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

# --no-fail-fast: one failure should not hide the others.
if cargo nextest --version >/dev/null 2>&1; then
    step "cargo nextest run --workspace"
    cargo nextest run --workspace --no-fail-fast
else
    step "cargo test --workspace (cargo-nextest is not installed)"
    cargo test --workspace --no-fail-fast
fi

# Memory errors: the integration tests that feed the plugin hostile values (NULL, stale,
# foreign and poisoned pointers) and every API version run again under valgrind memcheck,
# which fails on any invalid read or write. Lock-free code gives helgrind false alarms, so
# races are covered by the concurrency tests instead.
step "valgrind memcheck: hostile, hierarchy and version tests, and every nccl-sim scenario"
CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="valgrind -q --error-exitcode=9" \
    cargo test -p nccl-profiler-scorep --test hostile --test hierarchy --test versions
# The sequence fuzzer (seed 0x5eed), each case under memcheck: 400 000 callbacks, the
# first 8 cases of the short run nextest ran above without it; a release build, so that
# it takes about two minutes.
FUZZ_CALLBACKS=400000 FUZZ_CASE_TIMEOUT_S=1200 FUZZ_CHILD_RUNNER="valgrind -q --error-exitcode=9" \
    cargo test --release -p nccl-profiler-scorep --test fuzz
cargo build --release -p nccl-profiler-scorep -p nccl-sim -p nccl-scorep
sim_out="$(mktemp -d)"
NCCL_SCOREP_OUTPUT_DIR="$sim_out" NCCL_SCOREP_EVENTS=all \
    valgrind -q --error-exitcode=9 target/release/nccl-sim run \
    --plugin "$PWD/target/release/libnccl_profiler_scorep.so" \
    --ranks 2 --iterations 2 --speedup 50
rm -rf "$sim_out"
# Deferred mode copies each descriptor whole and keeps its fields' bits: no byte NCCL left
# unset may reach the recording.
NCCL_SCOREP_MODE=deferred NCCL_SCOREP_OUTPUT_DIR="$sim_out" NCCL_SCOREP_EVENTS=all \
    valgrind -q --error-exitcode=9 target/release/nccl-sim run \
    --plugin "$PWD/target/release/libnccl_profiler_scorep.so" \
    --ranks 2 --iterations 2 --speedup 50
rm -rf "$sim_out"

# The install as a site makes it: CMake build and install into a temporary prefix (reusing
# the release build above), then find_package, pkg-config, the modulefiles with nccl-sim,
# man pages, and the same tree from scripts/build-plugin.sh --prefix.
step "install: cmake build, ctest, install, and use the installed tree"
bash scripts/test-install.sh

# The benchmarks, once each in a short mode: they still build, run and pass their own
# checks (the figures in docs/performance.md come from their full runs, by hand).
step "benchmarks, short mode: hot path, trace throughput, merge"
HOT_PATH_BATCHES=5 HOT_PATH_BATCH=200 HOT_PATH_THREADS=2 \
    cargo bench -p nccl-profiler-scorep --bench hot_path >/dev/null
TRACE_BENCH_COLLECTIVES=2000 TRACE_BENCH_COMMS=1 \
    cargo bench -p nccl-profiler-scorep --bench trace_throughput >/dev/null
MERGE_BENCH_PROCS=4 MERGE_BENCH_ITERATIONS=10 MERGE_BENCH_RUNS=1 \
    cargo bench -p nccl-scorep-merge --bench merge_parts >/dev/null
echo "benchmarks ran"

# nextest does not run doc tests.
step "cargo test --workspace --doc"
cargo test --workspace --doc

step "all checks passed"
