#!/usr/bin/env bash
# Instructions per callback on the calling thread, per kind of callback group and per
# stream of `nccl-sim bench`: the plugin's profiler entry points (startEvent, stopEvent,
# recordEventState and everything they call) counted by `valgrind --tool=callgrind`,
# driven through nccl-sim's NCCL 2.32 imitation (nccl-sim/examples/callback_instructions.rs)
# with NCCL_SCOREP_EVENTS=all and the OTF2 writer on. Instruction counts do not depend on
# the machine's load, unlike times. Each figure is the difference of two runs (N1 and N2
# iterations) divided by the difference of their callbacks, so one-time costs (the first
# call of a thread, the first sight of a name) cancel out. One run each.
#
#   scripts/hot-path-instructions.sh [PLUGIN.so ...]   (default: this checkout's release build)
#
# Settings: HOT_PATH_N1 (default 5000) and HOT_PATH_N2 (25000) iterations;
# HOT_PATH_GROUPS (default: every group and both streams). Another build of the plugin
# (say, a copy of libnccl_profiler_scorep.so from before a change) is counted the same
# way when given as a further argument. Figures: docs/performance.md.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
command -v valgrind >/dev/null || { echo "valgrind is needed (Debian package valgrind)" >&2; exit 1; }
cargo build --release -q -p nccl-profiler-scorep -p nccl-sim --example callback_instructions
target_root="${CARGO_TARGET_DIR:-target}"
if [[ "$target_root" != /* ]]; then
    target_root="$repo_root/$target_root"
fi
driver="$target_root/release/examples/callback_instructions"
plugins=("$@")
if [[ ${#plugins[@]} -eq 0 ]]; then
    plugins=("$target_root/release/deps/libnccl_profiler_scorep.so")
fi
n1="${HOT_PATH_N1:-5000}"
n2="${HOT_PATH_N2:-25000}"
groups="${HOT_PATH_GROUPS:-groupapi groupapi-states collapi kernellaunch group coll proxyop proxystep kernelch app proxy}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Prints "callbacks instructions" of one run.
count() {
    local plugin="$1" group="$2" iterations="$3"
    rm -rf "$work/out"
    # Rings that hold every record of the run: nothing is dropped, whatever the
    # collector (slow under valgrind) manages meanwhile.
    NCCL_SCOREP_EVENTS=all NCCL_SCOREP_MODE=otf2 NCCL_SCOREP_OUTPUT_DIR="$work/out" \
    NCCL_SCOREP_BUFFER_SIZE=128M NCCL_SCOREP_MEMORY_LIMIT=1G \
        valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$work/callgrind.out" \
        --toggle-collect='*ffi::start_event*' --toggle-collect='*ffi::stop_event*' \
        --toggle-collect='*ffi::record_event_state*' \
        "$driver" "$plugin" "$group" "$iterations" >"$work/log" 2>&1
    local callbacks instructions nulls
    callbacks="$(sed -n 's/^callbacks \([0-9]*\)$/\1/p' "$work/log")"
    nulls="$(sed -n 's/^null handles \([0-9]*\)$/\1/p' "$work/log")"
    if [[ -z "$callbacks" || "$nulls" != 0 ]]; then
        echo "$group with $plugin: no figure (null handles: ${nulls:-?}); its output:" >&2
        cat "$work/log" >&2
        exit 1
    fi
    instructions="$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$work/callgrind.out")"
    echo "$callbacks $instructions"
}

printf '%-16s' "group"
for plugin in "${plugins[@]}"; do
    printf ' %24s' "$(basename "$plugin")"
done
printf '\n'
for group in $groups; do
    printf '%-16s' "$group"
    for plugin in "${plugins[@]}"; do
        first="$(count "$plugin" "$group" "$n1")"
        second="$(count "$plugin" "$group" "$n2")"
        read -r c1 i1 <<<"$first"
        read -r c2 i2 <<<"$second"
        printf ' %24s' "$(awk -v i1="$i1" -v i2="$i2" -v c1="$c1" -v c2="$c2" \
            'BEGIN { printf "%.1f", (i2 - i1) / (c2 - c1) }')"
    done
    printf '\n'
done
echo "(instructions per callback on the calling thread; $n2 minus $n1 iterations)"
