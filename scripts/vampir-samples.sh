#!/usr/bin/env bash
# Regenerates the sample traces in vampir-samples/: small nccl-sim jobs traced by the plugin,
# one process per rank, each merged into one OTF2 archive and validated. What each sample
# shows is in vampir-samples/README.md.
#
#   scripts/vampir-samples.sh [--output DIR] [--nccl-sim PATH --nccl-scorep PATH --plugin PATH]
#
# --output DIR      where the samples go (default: vampir-samples/ in the repository); each
#                   sample replaces DIR/<name>/, anything else in DIR is left alone
# --nccl-sim, --nccl-scorep, --plugin
#                   use these builds instead of building the release ones (all three)
set -euo pipefail

usage() {
    echo "usage: $0 [--output DIR] [--nccl-sim PATH --nccl-scorep PATH --plugin PATH]"
}

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
output=""
nccl_sim=""
nccl_scorep=""
plugin=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --output | --nccl-sim | --nccl-scorep | --plugin)
            if [[ $# -lt 2 || -z "$2" ]]; then
                echo "error: $1 needs a value" >&2
                usage >&2
                exit 2
            fi
            case "$1" in
                --output) output="$2" ;;
                --nccl-sim) nccl_sim="$2" ;;
                --nccl-scorep) nccl_scorep="$2" ;;
                --plugin) plugin="$2" ;;
            esac
            shift
            ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            echo "error: unknown argument: $1" >&2
            usage >&2
            exit 2
            ;;
    esac
    shift
done

# Relative paths mean relative to where the script was called from.
output="$(realpath -m -- "${output:-$repo_root/vampir-samples}")"
given=0
for path in "$nccl_sim" "$nccl_scorep" "$plugin"; do
    [[ -n "$path" ]] && given=$((given + 1))
done
if [[ $given -ne 0 && $given -ne 3 ]]; then
    echo "error: give all of --nccl-sim, --nccl-scorep and --plugin, or none" >&2
    exit 2
fi
if [[ $given -eq 3 ]]; then
    nccl_sim="$(realpath -- "$nccl_sim")"
    nccl_scorep="$(realpath -- "$nccl_scorep")"
    plugin="$(realpath -- "$plugin")"
else
    (cd "$repo_root" && cargo build --release -p nccl-scorep -p nccl-sim -p nccl-profiler-scorep)
    target_root="${CARGO_TARGET_DIR:-target}"
    if [[ "$target_root" != /* ]]; then
        target_root="$repo_root/$target_root"
    fi
    nccl_sim="$target_root/release/nccl-sim"
    nccl_scorep="$target_root/release/nccl-scorep"
    plugin="$target_root/release/libnccl_profiler_scorep.so"
fi
for path in "$nccl_sim" "$nccl_scorep" "$plugin"; do
    if [[ ! -f "$path" ]]; then
        echo "error: $path is missing" >&2
        exit 1
    fi
done

# The samples depend only on the settings below, not on the caller's environment.
while IFS= read -r name; do
    unset "$name"
done < <(compgen -e | grep -E '^(NCCL_SCOREP_|NCCL_SIM_|NCCL_PROFILER_PLUGIN$)' || true)
export NCCL_SCOREP_EVENTS=all
# The parts are merged below, into the output directory.
export NCCL_SCOREP_AUTO_MERGE=0

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# nccl-sim's shared-memory tables (rendezvous, PXN mailboxes) go there too.
export NCCL_SIM_SHM_DIR="$work"
mkdir -p "$output"
# The jobs run in the scratch directory and start copies of the builds by relative names
# (see sample); nccl-sim starts its ranks from its own file, which is then the copy.
cp "$nccl_sim" "$work/nccl-sim"
cp "$plugin" "$work/$(basename "$plugin")"

# sample NAME NCCL-SIM-RUN-ARGUMENTS...: runs the job, merges its parts into OUTPUT/NAME
# (only the merged archive: traces.otf2, traces.def, traces/) and validates it.
sample() {
    local name="$1"
    shift
    local run="$work/$name"
    printf '\n==> %s: nccl-sim run %s\n' "$name" "$*"
    # Run from the scratch directory with relative names: the trace records its command
    # line and output directory, and the committed samples must not name this machine's paths.
    (cd "$work" && NCCL_SCOREP_OUTPUT_DIR="$name" ./nccl-sim run \
        --plugin "./$(basename "$plugin")" --seed 1 "$@")
    rm -rf "${output:?}/$name"
    "$nccl_scorep" merge "$run" --output "$output/$name" --no-profile
    "$nccl_scorep" validate "$output/$name" | tail -n 1
}

# Ring AllReduce, 4 ranks on 2 simulated nodes; rank 2 arrives 2 ms late every time.
sample ring-allreduce --procs 4 --hosts 2 --scenario single --algo ring --channels 2 \
    --iterations 6 --sizes 64K,1M --late-rank 2 --late-us 2000
# Each rank sends to the next and receives from the previous one, as pipeline stages do.
sample p2p-pipeline --procs 4 --hosts 2 --scenario p2p --iterations 4 --sizes 64K,1M
# A user group of AllReduce, AllGather and ReduceScatter: one launch for the three.
sample grouped-collectives --procs 4 --hosts 2 --scenario group --iterations 3 --sizes 64K,1M
# PXN: every rank's sends are progressed by the next process's proxy on the same node.
sample pxn --procs 4 --hosts 1 --pxn --scenario single --iterations 4 --sizes 64K,1M

printf '\n==> samples in %s\n' "$output"
du -sh --apparent-size "$output"/*/ | sed "s|$output/||"
