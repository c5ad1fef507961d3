#!/usr/bin/env bash
# Installs a built nccl-scorep into a prefix: the one definition of the install layout,
# used by `scripts/build-plugin.sh --prefix` and by CMake's install step.
#
#   scripts/install-tree.sh --build-dir DIR --prefix DIR [--destdir DIR] [--strip]
#                           [--manifest FILE]
#
# --build-dir  Cargo's output directory of one profile (target/release or target/debug)
#              holding libnccl_profiler_scorep.so and nccl-scorep.
# --prefix     where the tree will live; written into the pkg-config file and the
#              modulefiles. Must be absolute.
# --destdir    a staging root the files go under instead (default: $DESTDIR), as for
#              `make install DESTDIR=…`: the files land in DESTDIR/PREFIX, the texts name PREFIX.
# --strip      strip the library and the tool, keeping their debug information in separate
#              files that gdb finds by itself: lib/.debug/libnccl-profiler-scorep.so.debug and
#              bin/.debug/nccl-scorep.debug (linked with --add-gnu-debuglink).
# --manifest   append the path of every file and link installed to FILE.
#
# Layout (PREFIX/…):
#   lib/libnccl-profiler-scorep.so, lib/libnccl-profiler.so and lib/libnccl_scorep.so (links)
#   bin/nccl-scorep
#   share/doc/nccl-scorep/{README.md,LICENSE,NOTICE,docs/*.md}
#   share/man/man1/nccl-scorep.1, nccl-scorep-<subcommand>.1
#   share/bash-completion/completions/nccl-scorep, share/zsh/site-functions/_nccl-scorep,
#   share/fish/vendor_completions.d/nccl-scorep.fish
#   lib/cmake/NcclScorep/NcclScorepConfig.cmake, NcclScorepConfigVersion.cmake
#   lib/pkgconfig/nccl-scorep.pc
#   share/nccl-scorep/modulefiles/nccl-scorep/VERSION.lua (Lmod) and VERSION (Tcl)
set -euo pipefail

usage() {
    echo "usage: $0 --build-dir DIR --prefix DIR [--destdir DIR] [--strip] [--manifest FILE]"
}

build_dir=""
prefix=""
destdir="${DESTDIR:-}"
strip=0
manifest=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --build-dir | --prefix | --destdir | --manifest)
            if [[ $# -lt 2 ]]; then
                echo "error: $1 needs a value" >&2
                usage >&2
                exit 2
            fi
            case "$1" in
                --build-dir) build_dir="$2" ;;
                --prefix) prefix="$2" ;;
                --destdir) destdir="$2" ;;
                --manifest) manifest="$2" ;;
            esac
            shift
            ;;
        --strip) strip=1 ;;
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

if [[ -z "$build_dir" || -z "$prefix" ]]; then
    echo "error: --build-dir and --prefix are required" >&2
    usage >&2
    exit 2
fi
if [[ "$prefix" != /* ]]; then
    echo "error: --prefix must be an absolute path, not $prefix" >&2
    exit 2
fi
# No trailing slash, so that "$prefix/lib" reads well in the generated files.
while [[ "$prefix" == */ && "$prefix" != / ]]; do
    prefix="${prefix%/}"
done

# Absolute, because the stripping step runs objcopy from another directory.
build_dir="$(realpath -m -- "$build_dir")"
if [[ -n "$destdir" ]]; then
    destdir="$(realpath -m -- "$destdir")"
fi

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
built_plugin="$build_dir/libnccl_profiler_scorep.so"
built_tool="$build_dir/nccl-scorep"
for file in "$built_plugin" "$built_tool"; do
    if [[ ! -f "$file" ]]; then
        echo "error: $file is missing: build first (scripts/build-plugin.sh or cmake --build)" >&2
        exit 1
    fi
done
if [[ "$strip" -eq 1 ]] && ! command -v objcopy >/dev/null 2>&1; then
    echo "error: --strip needs objcopy (binutils)" >&2
    exit 1
fi

# The version of the workspace, from [workspace.package] of the top Cargo.toml.
version="$(awk '
    /^\[/ { section = $0 }
    section == "[workspace.package]" && $1 == "version" {
        gsub(/[" ]/, "", $3); print $3; exit
    }' "$repo_root/Cargo.toml")"
if [[ -z "$version" ]]; then
    echo "error: no version in [workspace.package] of $repo_root/Cargo.toml" >&2
    exit 1
fi

root="${destdir%/}$prefix"
plugin_name=libnccl-profiler-scorep.so
default_name=libnccl-profiler.so
metric_plugin_name=libnccl_scorep.so
# SCOREP_METRIC_PLUGINS=nccl_profiler_scorep opens this name: one more link to the one file.
cargo_name=libnccl_profiler_scorep.so
doc_dir="$root/share/doc/nccl-scorep"
modules_dir="$root/share/nccl-scorep/modulefiles/nccl-scorep"

installed=()
record() {
    installed+=("$@")
}

# Copies a built binary; with --strip, the copy is stripped and its debug information goes
# to DIR/.debug/NAME.debug beside it. `install`/objcopy write a new file rather than
# rewriting the old one in place, so a process that has the old library mapped keeps working.
put_binary() {
    local source="$1" dest="$2" how="$3"
    local dir name
    dir="$(dirname "$dest")"
    name="$(basename "$dest")"
    install -d "$dir"
    if [[ "$strip" -eq 1 ]]; then
        local debug="$dir/.debug/$name.debug"
        install -d "$dir/.debug"
        objcopy --only-keep-debug "$source" "$debug.tmp"
        chmod 0644 "$debug.tmp"
        mv -f "$debug.tmp" "$debug"
        # The link is made from inside the directory so that it holds the bare file name.
        local dest_tmp="$dir/.$name.tmp"
        (cd "$dir/.debug" && objcopy "$how" --add-gnu-debuglink="$name.debug" "$source" "$dest_tmp")
        chmod 0755 "$dest_tmp"
        mv -f "$dest_tmp" "$dest"
        record "$debug"
    else
        install -m 0755 "$source" "$dest"
    fi
    record "$dest"
}

put_link() {
    local target="$1" link="$2"
    ln -sfn "$target" "$link"
    record "$link"
}

# Replaces @PREFIX@ and @VERSION@ in a template.
put_template() {
    local template="$1" dest="$2"
    install -d "$(dirname "$dest")"
    PREFIX="$prefix" VERSION="$version" awk '
        { gsub(/@PREFIX@/, ENVIRON["PREFIX"]); gsub(/@VERSION@/, ENVIRON["VERSION"]); print }
    ' "$template" >"$dest.tmp"
    chmod 0644 "$dest.tmp"
    mv -f "$dest.tmp" "$dest"
    record "$dest"
}

put_doc() {
    local source="$1" dest="$2"
    install -d "$(dirname "$dest")"
    install -m 0644 "$source" "$dest"
    record "$dest"
}

# The libraries: the name NCCL_PROFILER_PLUGIN=scorep finds, the default name NCCL loads
# with NCCL_PROFILER_PLUGIN unset, and the Score-P metric plugin's two names, all one library.
# --strip-unneeded keeps the dynamic symbols NCCL and Score-P look up.
put_binary "$built_plugin" "$root/lib/$plugin_name" --strip-unneeded
put_link "$plugin_name" "$root/lib/$default_name"
put_link "$plugin_name" "$root/lib/$metric_plugin_name"
put_link "$plugin_name" "$root/lib/$cargo_name"
put_binary "$built_tool" "$root/bin/nccl-scorep" --strip-all

# Manual pages and completions, written by the tool from its own command-line definition.
while IFS= read -r file; do
    record "$file"
done < <("$built_tool" generate man "$root/share/man/man1")
chmod 0644 "$root/share/man/man1"/nccl-scorep*.1
for shell_dir in "bash share/bash-completion/completions" \
    "zsh share/zsh/site-functions" \
    "fish share/fish/vendor_completions.d"; do
    read -r shell dir <<<"$shell_dir"
    while IFS= read -r file; do
        chmod 0644 "$file"
        record "$file"
    done < <("$built_tool" generate completions "$shell" "$root/$dir")
done

# Documentation and the licences (NOTICE carries OTF2's, which the library contains).
put_doc "$repo_root/README.md" "$doc_dir/README.md"
put_doc "$repo_root/LICENSE" "$doc_dir/LICENSE"
put_doc "$repo_root/NOTICE" "$doc_dir/NOTICE"
for doc in "$repo_root"/docs/*.md; do
    put_doc "$doc" "$doc_dir/docs/$(basename "$doc")"
done

# For build systems and for `module load`.
put_template "$repo_root/cmake/NcclScorepConfig.cmake.in" \
    "$root/lib/cmake/NcclScorep/NcclScorepConfig.cmake"
put_template "$repo_root/cmake/NcclScorepConfigVersion.cmake.in" \
    "$root/lib/cmake/NcclScorep/NcclScorepConfigVersion.cmake"
put_template "$repo_root/packaging/pkgconfig/nccl-scorep.pc.in" \
    "$root/lib/pkgconfig/nccl-scorep.pc"
put_template "$repo_root/packaging/modulefiles/nccl-scorep.lua.in" "$modules_dir/$version.lua"
put_template "$repo_root/packaging/modulefiles/nccl-scorep.tcl.in" "$modules_dir/$version"

if [[ -n "$manifest" ]]; then
    printf '%s\n' "${installed[@]}" >>"$manifest"
fi

echo "installed nccl-scorep $version in $root (${#installed[@]} files and links)"
echo "  plugin: $prefix/lib/$plugin_name"
echo "  tool:   $prefix/bin/nccl-scorep"
echo "  module: module use $prefix/share/nccl-scorep/modulefiles && module load nccl-scorep/$version"
