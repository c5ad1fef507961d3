#!/usr/bin/env bash
# Measures how well the merge aligns the clocks of simulated hosts, on nccl-sim's ground
# truth: nccl-sim jobs of 1 process (4 ranks), 2 and 4 processes on 2 simulated hosts
# whose clocks are off by -5 ms and +5 ms and drift by -20 and +20 ppm (the truth stays in
# the true clock). Each job is merged twice, with the hosts' clocks as they are
# (`--no-clock-alignment`) and aligned (the default); scripts/clock-alignment-errors.py
# prints the completion and alignment errors of each (the reference host's own offset and
# drift against the true clock taken out). One run of each.
#
#   scripts/measure-clock-alignment.sh [ITERATIONS] [NCCL_SIM_ARGS...]   (default: 300)
#
# Figures: docs/fidelity.md.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
iterations="${1:-300}"
shift || true

bash scripts/build-plugin.sh --also nccl-sim >/dev/null
target_root="${CARGO_TARGET_DIR:-target}"
if [[ "$target_root" != /* ]]; then
    target_root="$repo_root/$target_root"
fi
release="$target_root/release"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for procs in 1 2 4; do
    if [[ $procs == 1 ]]; then
        layout=(--ranks 4)
    else
        layout=(--procs "$procs" --hosts 2)
    fi
    run="$work/p$procs"
    NCCL_SCOREP_OUTPUT_DIR="$run/run" NCCL_SCOREP_AUTO_MERGE=0 \
        "$release/nccl-sim" run --scenario single "${layout[@]}" \
        --iterations "$iterations" --host-clock-offset=-5ms,5ms --host-clock-drift=-20,20 \
        --truth-dir "$run/truth" --plugin "$release/libnccl-profiler-scorep.so" "$@" 2>/dev/null
    for mode in as-they-are aligned; do
        flag=()
        [[ $mode == as-they-are ]] && flag=(--no-clock-alignment)
        echo "== $procs process(es), ${layout[*]}, hosts' clocks $mode"
        "$release/nccl-scorep" merge "$run/run" --output "$run/$mode" --no-profile "${flag[@]}" |
            grep '^clock' || true
        /usr/bin/python3 scripts/clock-alignment-errors.py "$run/$mode/traces.otf2" "$run/truth"
    done
done
