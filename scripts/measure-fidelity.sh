#!/usr/bin/env bash
# Measures how far the trace's times lie from the truth, on nccl-sim's ground truth: one
# process, 4 ranks (one thread each), the `single` scenario (one AllReduce per
# iteration), the default events (API calls, enqueues, kernel channels, proxy
# operations), simulated time as fast as real time. One run; prints the errors of each
# kind of time (scripts/fidelity-errors.py) and the plugin's log.
#
#   scripts/measure-fidelity.sh [ITERATIONS] [NCCL_SIM_ARGS...]   (default: 200)
#
# Figures: docs/fidelity.md.
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

NCCL_SCOREP_OUTPUT_DIR="$work/run" NCCL_SCOREP_TOOL="$release/nccl-scorep" \
    "$release/nccl-sim" run --scenario single --ranks 4 --iterations "$iterations" \
    --truth-dir "$work/truth" --plugin "$release/libnccl-profiler-scorep.so" "$@"
/usr/bin/python3 scripts/fidelity-errors.py "$work/run/traces.otf2" "$work/truth"
