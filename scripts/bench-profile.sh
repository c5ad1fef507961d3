#!/usr/bin/env bash
# Benchmark of `nccl-scorep profile`: how long the CUBE4 profile of a merged trace takes,
# and its peak memory, for jobs of 1, 64 and 1024 processes at two event volumes per
# location. The traces are the merge benchmark's synthetic ones (9 locations per process,
# shaped like the plugin's parts, every operation an AllReduce of all processes), merged
# by that benchmark; this script then times the profile of each.
#
#   scripts/bench-profile.sh [PROCS [EVENTS]]     (defaults: 1,64,1024 and 20,2000)
#
# Figures: docs/profile.md#performance.
set -euo pipefail

procs="${1:-1,64,1024}"
events="${2:-20,2000}"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

cargo build --release -p nccl-scorep
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
MERGE_BENCH_PROCS="$procs" MERGE_BENCH_EVENTS="$events" MERGE_BENCH_RUNS=1 \
    MERGE_BENCH_KEEP=1 MERGE_BENCH_DIR="$work" \
    cargo bench -p nccl-scorep-merge --bench merge_parts >/dev/null

target_root="${CARGO_TARGET_DIR:-target}"
echo "| processes | events/location | events | profile s | peak MiB | call paths | locations |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
IFS=, read -ra all_procs <<<"$procs"
IFS=, read -ra all_events <<<"$events"
for p in "${all_procs[@]}"; do
    for e in "${all_events[@]}"; do
        merged="$work/p$p-e$e/merged"
        stats="$work/time.txt"
        line="$(/usr/bin/time -f '%e %M' -o "$stats" \
            "$target_root/release/nccl-scorep" profile "$merged" -o "$work/profile.cubex")"
        read -r seconds kib <"$stats"
        paths="$(sed -E 's/.*: ([0-9]+) call paths.*/\1/' <<<"$line")"
        locations="$(sed -E 's/.*call paths, ([0-9]+) locations.*/\1/' <<<"$line")"
        total=$((p * 9 * e))
        echo "| $p | $e | $total | $seconds | $((kib / 1024)) | $paths | $locations |"
    done
done
