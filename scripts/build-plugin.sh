#!/usr/bin/env bash
# Builds the NCCL profiler plugin and gives it the file names NCCL looks for.
#
#   scripts/build-plugin.sh [--debug] [--prefix DIR] [--also PACKAGE]...
#
# Cargo cannot put a hyphen in a library name, so the build's libnccl_profiler_scorep.so is
# hard-linked to libnccl-profiler-scorep.so (the same file: SCOREP_METRIC_PLUGINS=
# nccl_profiler_scorep then opens the very library NCCL loads) (found by NCCL_PROFILER_PLUGIN=scorep), and
# libnccl-profiler.so points to it (found with NCCL_PROFILER_PLUGIN unset), and so does
# libnccl_scorep.so (the Score-P metric plugin SCOREP_METRIC_PLUGINS=nccl_scorep loads). The
# nccl-scorep tool is built beside them (the plugin runs it to merge a job's trace). With
# --prefix, scripts/install-tree.sh installs everything in DIR: the libraries in DIR/lib
# (stripped in a release build, debug information in DIR/lib/.debug), the tool in DIR/bin,
# manual pages, completions, documentation, the CMake and pkg-config files and the
# modulefiles (docs/install.md).
set -euo pipefail

usage() {
    echo "usage: $0 [--debug] [--prefix DIR] [--also PACKAGE]..."
}

profile=release
prefix=""
# More packages built in the same cargo run (one feature resolution: nothing built twice).
also=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --debug) profile=debug ;;
        --prefix)
            if [[ $# -lt 2 || -z "$2" ]]; then
                echo "error: --prefix needs a directory" >&2
                usage >&2
                exit 2
            fi
            prefix="$2"
            shift
            ;;
        --prefix=*) prefix="${1#--prefix=}" ;;
        --also)
            if [[ $# -lt 2 || -z "$2" ]]; then
                echo "error: --also needs a package name" >&2
                usage >&2
                exit 2
            fi
            also+=(-p "$2")
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

# A relative prefix means relative to where the script was called from.
if [[ -n "$prefix" ]]; then
    prefix="$(realpath -m -- "$prefix")"
fi

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

# The tool too: the plugin runs it beside itself to merge the job's trace at its end.
cargo_args=(build -p nccl-profiler-scorep -p nccl-scorep "${also[@]}")
if [[ "$profile" == release ]]; then
    cargo_args+=(--release)
fi
cargo "${cargo_args[@]}"

target_root="${CARGO_TARGET_DIR:-target}"
if [[ "$target_root" != /* ]]; then
    target_root="$repo_root/$target_root"
fi
out_dir="$target_root/$profile"
built="$out_dir/libnccl_profiler_scorep.so"
plugin_name=libnccl-profiler-scorep.so
default_name=libnccl-profiler.so
# Score-P loads metric plugin <name> as lib<name>.so; a link keeps it the same library as
# the one NCCL loads, so both share one state.
metric_plugin_name=libnccl_scorep.so

if [[ ! -f "$built" ]]; then
    echo "error: cargo finished but $built is missing" >&2
    exit 1
fi

# One file under every name, so NCCL and Score-P's metric-plugin loader share one library
# (a copy would be a second library with its own state). `ln -f` replaces the name rather
# than rewriting the file in place, so a process that has the old library mapped keeps
# working; where hard links are refused, a copy (the plugin's log then says the metric
# plugin is another copy; use SCOREP_METRIC_PLUGINS=nccl_scorep).
ln -f "$built" "$out_dir/$plugin_name" 2>/dev/null || install -m 0755 "$built" "$out_dir/$plugin_name"
ln -sfn "$plugin_name" "$out_dir/$default_name"
ln -sfn "$plugin_name" "$out_dir/$metric_plugin_name"
plugin="$out_dir/$plugin_name"

# The install layout is scripts/install-tree.sh's, the same CMake's install step uses.
if [[ -n "$prefix" ]]; then
    install_args=(--build-dir "$out_dir" --prefix "$prefix")
    if [[ "$profile" == release ]]; then
        install_args+=(--strip)
    fi
    bash "$repo_root/scripts/install-tree.sh" "${install_args[@]}"
    plugin="$prefix/lib/$plugin_name"
fi

echo "plugin: $plugin"
echo "use it: export NCCL_PROFILER_PLUGIN=$plugin"
