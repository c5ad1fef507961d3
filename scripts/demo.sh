#!/usr/bin/env bash
# The demo: builds the plugin, shows what NCCL would load, and runs the demo example,
# which writes its traces to OUTDIR (default: nccl-scorep-out/ in the repository).
#
#   scripts/demo.sh [OUTDIR]
set -euo pipefail

# Debian packages the demo needs beyond the Rust toolchain; none yet.
DEBIAN_PACKAGES=()

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

step "build the plugin"
bash scripts/build-plugin.sh
target_root="${CARGO_TARGET_DIR:-target}"
if [[ "$target_root" != /* ]]; then
    target_root="$repo_root/$target_root"
fi
export NCCL_PROFILER_PLUGIN="$target_root/release/libnccl-profiler-scorep.so"

step "nccl-scorep doctor (NCCL_PROFILER_PLUGIN=$NCCL_PROFILER_PLUGIN)"
cargo build --release -p nccl-scorep
"$target_root/release/nccl-scorep" doctor

step "run the demo example"
mkdir -p "$outdir"
cargo run --release -p nccl-profiler-scorep --example demo -- "$outdir"

step "demo output is in $outdir"
ls -l "$outdir"
