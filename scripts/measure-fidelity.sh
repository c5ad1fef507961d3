#!/usr/bin/env bash
# Measures how far the trace's times lie from the truth, on nccl-sim's ground truth, on
# one host: 1 process (4 ranks, one thread each), 2 and 4 processes (one rank each), and 4
# processes whose rank 3 arrives 400 µs late at every collective, all in the `single`
# scenario (one AllReduce per iteration); and 4 processes in `held-group` (the AllReduce in
# a group the application holds open 1 ms before ending it). The default events (API
# calls, enqueues, kernel channels, proxy operations), simulated time as fast as real time. One run each; prints the errors of each
# kind of time (scripts/fidelity-errors.py).
#
#   scripts/measure-fidelity.sh [ITERATIONS] [NCCL_SIM_ARGS...]   (default: 200)
#
# Extra arguments go to every run (e.g. `--interval-us 2000` to pace the iterations,
# `--gpu-clock-drift 50`). Figures: docs/fidelity.md.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
iterations="${1:-200}"
shift || true

bash scripts/build-plugin.sh --also nccl-sim >/dev/null
target_root="${CARGO_TARGET_DIR:-target}"
if [[ "$target_root" != /* ]]; then
    target_root="$repo_root/$target_root"
fi
release="$target_root/release"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

run() {
    local name="$1" scenario="$2"
    shift 2
    echo "== $name"
    NCCL_SCOREP_OUTPUT_DIR="$work/$name/run" NCCL_SCOREP_TOOL="$release/nccl-scorep" \
        "$release/nccl-sim" run --scenario "$scenario" --iterations "$iterations" \
        --truth-dir "$work/$name/truth" --plugin "$release/libnccl-profiler-scorep.so" \
        "$@" >/dev/null 2>&1
    /usr/bin/python3 scripts/fidelity-errors.py "$work/$name/run/traces.otf2" "$work/$name/truth"
}

run "1-process-4-ranks" single --ranks 4 "$@"
run "2-processes" single --procs 2 "$@"
run "4-processes" single --procs 4 "$@"
run "4-processes-rank-3-late-400us" single --procs 4 --late-rank 3 --late-us 400 "$@"
run "4-processes-groups-held-1ms" held-group --procs 4 "$@"
