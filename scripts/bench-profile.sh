#!/usr/bin/env bash
# Benchmark of `nccl-scorep profile`: how long the CUBE4 profile of a merged trace takes,
# and its peak memory, for jobs of 1, 64 and 1024 processes at two event volumes. The
# traces are the merge benchmark's (parts written by the plugin in nccl-sim processes, 27
# locations per process, every operation an AllReduce of all processes), merged by that
# benchmark; this script then times the profile of each.
#
#   scripts/bench-profile.sh [PROCS [ITERATIONS]]     (defaults: 1,64,1024 and 1,100)
#
# Figures: docs/profile.md#performance.
set -euo pipefail

procs="${1:-1,64,1024}"
iterations="${2:-1,100}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

cargo build --release -p nccl-scorep -p nccl-sim -p nccl-profiler-scorep
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
MERGE_BENCH_PROCS="$procs" MERGE_BENCH_ITERATIONS="$iterations" MERGE_BENCH_RUNS=1 \
    MERGE_BENCH_KEEP=1 MERGE_BENCH_DIR="$work" \
    cargo bench -p nccl-scorep-merge --bench merge_parts >"$work/merge-bench.txt"

target_root="${CARGO_TARGET_DIR:-target}"
echo "| processes | AllReduce calls | events | profile s | peak MiB | call paths | locations |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
IFS=, read -ra all_procs <<<"$procs"
IFS=, read -ra all_iterations <<<"$iterations"
for p in "${all_procs[@]}"; do
    for i in "${all_iterations[@]}"; do
        merged="$work/p$p-i$i-c8/merged"
        stats="$work/time.txt"
        line="$(/usr/bin/time -f '%e %M' -o "$stats" \
            "$target_root/release/nccl-scorep" profile "$merged" -o "$work/profile.cubex")"
        read -r seconds kib <"$stats"
        paths="$(sed -E 's/.*: ([0-9]+) call paths.*/\1/' <<<"$line")"
        locations="$(sed -E 's/.*call paths, ([0-9]+) locations.*/\1/' <<<"$line")"
        # The merge benchmark's row of this case: | processes | locations | calls | events | …
        total="$(awk -F'|' -v p="$p" -v i="$i" '$2 + 0 == p && $4 + 0 == i { print $5 + 0 }' \
            "$work/merge-bench.txt")"
        echo "| $p | $i | $total | $seconds | $((kib / 1024)) | $paths | $locations |"
    done
done
