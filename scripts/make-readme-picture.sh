#!/usr/bin/env bash
# Makes the picture the README opens with, docs/images/demo-arrival-skew.png: the demo's
# job (scripts/demo.sh: 4 ranks under mpirun, rank 2 late by 300 µs) and its report's
# arrival-skew heatmap, as `nccl-scorep report --png` draws it.
#
#   scripts/make-readme-picture.sh
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

bash scripts/demo.sh "$work/demo" >"$work/demo.log" 2>&1 || {
    cat "$work/demo.log" >&2
    exit 1
}
target_root="${CARGO_TARGET_DIR:-target}"
if [[ "$target_root" != /* ]]; then
    target_root="$repo_root/$target_root"
fi
"$target_root/release/nccl-scorep" report "$work/demo" -o "$work/report.html" --png "$work/pictures"
mkdir -p docs/images
cp "$work/pictures/skew-heatmap.png" docs/images/demo-arrival-skew.png
echo "wrote docs/images/demo-arrival-skew.png"
