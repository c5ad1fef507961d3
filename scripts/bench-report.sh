#!/usr/bin/env bash
# Benchmark of `nccl-scorep report`: wall time and peak memory on the demo's job and on
# big traces of the same kind. Each job is nccl-sim under mpirun, 4 ranks, groups of
# collectives and send/recv rounds, rank 2 late by 300 µs; the demo's job as
# scripts/demo.sh runs it, the big ones with every event kind recorded
# (NCCL_SCOREP_EVENTS=all), sizes 64K and 1M and simulated time 100 times faster (about
# 34 MB and 2.5 million OTF2 events per 1000 iterations). Also times `summary` and
# `profile`, the report's passes over the trace, on the same archive. One run each.
#
#   scripts/bench-report.sh [ITERATIONS...]     (default: 2000 30000; 30000 is about 1 GB)
#
# Figures: docs/report.md#size-time-and-memory.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
iterations=("$@")
if [[ ${#iterations[@]} -eq 0 ]]; then
    iterations=(2000 30000)
fi

bash scripts/build-plugin.sh --also nccl-sim >/dev/null
target_root="${CARGO_TARGET_DIR:-target}"
if [[ "$target_root" != /* ]]; then
    target_root="$repo_root/$target_root"
fi
release="$target_root/release"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_SCOREP_TOOL="$release/nccl-scorep"

# job NAME EVENTS ARGS...: runs a 4-rank job into $work/NAME.
job() {
    local name="$1" events="$2"
    shift 2
    NCCL_SCOREP_OUTPUT_DIR="$work/$name" NCCL_SCOREP_EVENTS="$events" \
        mpirun -np 4 --oversubscribe --bind-to none \
        -x NCCL_SCOREP_OUTPUT_DIR -x NCCL_SCOREP_EVENTS -x NCCL_SCOREP_TOOL \
        "$release/nccl-sim" run --scenario group --scenario p2p \
        --late-rank 2 --late-us 300 --plugin "$release/libnccl-profiler-scorep.so" "$@" \
        >"$work/$name.log" 2>&1
}

# measure COMMAND...: "seconds MiB" of one run.
measure() {
    /usr/bin/time -f '%e %M' -o "$work/time.txt" "$@" >/dev/null 2>&1
    read -r seconds kib <"$work/time.txt"
    echo "$seconds $((kib / 1024))"
}

echo "| job | OTF2 events | trace on disk | report s | report peak MiB | page | summary s / MiB | profile s / MiB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
row() {
    local name="$1" label="$2" dir="$work/$1"
    local events bytes
    events="$("$release/nccl-scorep" validate --json "$dir" 2>/dev/null |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["counts"]["events"])')"
    # The merged archive's event files are hard links to the parts': count them once.
    bytes="$(du -sb "$dir" | cut -f1)"
    read -r report_s report_mib < <(measure "$release/nccl-scorep" report "$dir" -o "$work/$name.html")
    local page
    page="$(stat -c %s "$work/$name.html")"
    read -r summary_s summary_mib < <(measure "$release/nccl-scorep" summary "$dir")
    read -r profile_s profile_mib < <(measure "$release/nccl-scorep" profile "$dir" -o "$work/p.cubex")
    echo "| $label | $events | $(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }') MB | $report_s | $report_mib | $((page / 1000)) kB | $summary_s / $summary_mib | $profile_s / $profile_mib |"
    rm -rf "$dir"
}

job demo default,steps --iterations 20 --sizes 64K,1M,8M --pxn
row demo "the demo's (20 iterations, 64K,1M,8M, PXN, default,steps)"
for n in "${iterations[@]}"; do
    job "it$n" all --iterations "$n" --sizes 64K,1M --speedup 100
    row "it$n" "$n iterations, all events"
done
