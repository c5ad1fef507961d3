#!/usr/bin/env bash
# The demo: a simulated 4-rank MPI+NCCL job traced end to end. nccl-sim (a CPU-only NCCL
# stand-in) runs under Open MPI's mpirun, one rank per process, loads the plugin the way
# NCCL does; each process writes its part of the trace, and the last one to finish merges
# them into one archive. `nccl-scorep run` starts the job and prints the summary of where
# the time went.
#
#   scripts/demo.sh [OUTDIR]        (default: nccl-scorep-out/ in the repository)
set -euo pipefail

# Debian packages the demo needs beyond the Rust toolchain.
DEBIAN_PACKAGES=(openmpi-bin libotf2-trace-dev otf2-tools libclang-dev fonts-dejavu-core)

if [[ $# -gt 1 ]]; then
    echo "usage: $0 [OUTDIR]" >&2
    exit 2
fi

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# A relative OUTDIR means relative to where the script was called from.
outdir="$(realpath -m -- "${1:-$repo_root/nccl-scorep-out}")"
cd "$repo_root"

step() {
    printf '\n==> %s\n' "$*"
}

step "dependencies"
bash scripts/install-deps.sh "${DEBIAN_PACKAGES[@]}"

step "build the plugin, the tool and nccl-sim"
bash scripts/build-plugin.sh --also nccl-sim
target_root="${CARGO_TARGET_DIR:-target}"
if [[ "$target_root" != /* ]]; then
    target_root="$repo_root/$target_root"
fi
export NCCL_PROFILER_PLUGIN="$target_root/release/libnccl-profiler-scorep.so"

step "nccl-scorep doctor (NCCL_PROFILER_PLUGIN=$NCCL_PROFILER_PLUGIN)"
"$target_root/release/nccl-scorep" doctor

step "a 4-rank job under mpirun, started by nccl-scorep run: groups of collectives, send/recv rounds, PXN; rank 2 arrives late"
# `run` loads the plugin into every rank (Open MPI's -x), writes into a new experiment
# directory (here the one named with -o), and prints where the trace is and its summary.
rm -rf "$outdir"
# Open MPI refuses to run as root unless told; oversubscription lets 4 ranks share 2 cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$target_root/release/nccl-scorep" run -o "$outdir" --events default,steps -- \
    mpirun -np 4 --oversubscribe --bind-to none \
    "$target_root/release/nccl-sim" run \
    --scenario group --scenario p2p --iterations 20 --sizes 64K,1M,8M \
    --late-rank 2 --late-us 300 --pxn

step "the job merged its processes' parts into one archive (and its CUBE4 profile) at its end"
cat "$outdir/merge-report.txt"
"$target_root/release/nccl-scorep" validate "$outdir" | tail -n 1

step "the HTML report: summary tables, bandwidth, arrival skew, timeline, point-to-point, time per rank"
"$target_root/release/nccl-scorep" report "$outdir"

echo
echo "open $outdir/report.html in a browser (what each plot shows: docs/report.md)"
echo "open $outdir/traces.otf2 in Vampir (what to look at: vampir-samples/README.md)"
echo "open $outdir/profile.cubex in Cube (what it holds: docs/profile.md)"
echo "no Vampir? nccl-scorep export --format chrome $outdir -o trace.json, then open it in https://ui.perfetto.dev (docs/export.md)"
echo "how the run was made: $outdir/run.json (docs/launcher.md)"
