#!/usr/bin/env bash
# The install, tested as a site would use it: configure, build, ctest and install with
# CMake into a temporary prefix, then
#   - check the layout (libraries and links, stripped binaries with their debug files,
#     man pages, completions, docs, licences, CMake, pkg-config and module files),
#   - find it from a CMake project (tests/cmake-consumer) and with pkg-config, which must
#     agree on the plugin's path, also after the tree is moved (CMake) and for a version
#     asked for (0.1 found, 9.0 refused),
#   - run nccl-sim with the environment the modulefiles set: NCCL_PROFILER_PLUGIN=scorep
#     on their LD_LIBRARY_PATH, then their own NCCL_PROFILER_PLUGIN, and Lmod itself
#     when it is installed,
#   - render the man pages with man, find them on the modulefiles' MANPATH,
#   - install again with DESTDIR, and with scripts/build-plugin.sh --prefix, which must
#     give the same tree.
#
#   scripts/test-install.sh
#
# Cargo's target directory is CARGO_TARGET_DIR or target/ of the checkout, so a run after
# the test suite's release build rebuilds nothing. Needs cmake, pkg-config and man
# (installed by scripts/install-deps.sh when missing).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
started=$SECONDS

bash scripts/install-deps.sh cmake pkg-config man-db

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo_root/target}"
if [[ "$CARGO_TARGET_DIR" != /* ]]; then
    CARGO_TARGET_DIR="$repo_root/$CARGO_TARGET_DIR"
fi
sim="$CARGO_TARGET_DIR/release/nccl-sim"

work="$(mktemp -d "${TMPDIR:-/tmp}/nccl-scorep-install.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# No symlink in the prefix, so that every way of computing a path gives the same text.
work="$(realpath "$work")"
prefix="$work/prefix"

step() {
    printf '\n--> %s\n' "$*"
}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

expect_equal() {
    local what="$1" got="$2" want="$3"
    if [[ "$got" != "$want" ]]; then
        fail "$what: got '$got', want '$want'"
    fi
    echo "ok: $what = $got"
}

expect_grep() {
    local what="$1" pattern="$2" file="$3"
    if ! grep -q -E -- "$pattern" "$file"; then
        echo "--- $file:" >&2
        head -50 "$file" >&2
        fail "$what: no match for /$pattern/"
    fi
    echo "ok: $what"
}

step "cmake configure, build, ctest, install into $prefix"
cmake -S . -B "$work/build" -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" ||
    { cat "$work/configure.log"; fail "cmake configure"; }
cmake --build "$work/build"
ctest --test-dir "$work/build" --output-on-failure
cmake --install "$work/build" --prefix "$prefix"

step "layout"
version="$(awk '/^\[/ { s = $0 } s == "[workspace.package]" && $1 == "version" { gsub(/[" ]/, "", $3); print $3; exit }' Cargo.toml)"
expected=(
    bin/nccl-scorep
    bin/.debug/nccl-scorep.debug
    lib/libnccl-profiler-scorep.so
    lib/.debug/libnccl-profiler-scorep.so.debug
    lib/cmake/NcclScorep/NcclScorepConfig.cmake
    lib/cmake/NcclScorep/NcclScorepConfigVersion.cmake
    lib/pkgconfig/nccl-scorep.pc
    share/doc/nccl-scorep/README.md
    share/doc/nccl-scorep/LICENSE
    share/doc/nccl-scorep/NOTICE
    share/doc/nccl-scorep/docs/configuration.md
    share/man/man1/nccl-scorep.1
    share/bash-completion/completions/nccl-scorep
    share/zsh/site-functions/_nccl-scorep
    share/fish/vendor_completions.d/nccl-scorep.fish
    "share/nccl-scorep/modulefiles/nccl-scorep/$version.lua"
    "share/nccl-scorep/modulefiles/nccl-scorep/$version"
)
for sub in run exec doctor summary status convert merge compare profile export report validate; do
    expected+=("share/man/man1/nccl-scorep-$sub.1")
done
for file in "${expected[@]}"; do
    [[ -f "$prefix/$file" ]] || fail "$file is not installed"
done
echo "ok: ${#expected[@]} files in place"
for link in libnccl-profiler.so libnccl_scorep.so libnccl_profiler_scorep.so; do
    expect_equal "lib/$link" "$(readlink "$prefix/lib/$link")" libnccl-profiler-scorep.so
done
[[ ! -e "$prefix/share/man/man1/nccl-scorep-generate.1" ]] || fail "the hidden generate command has a man page"
for doc in docs/*.md; do
    cmp -s "$doc" "$prefix/share/doc/nccl-scorep/$doc" || fail "$doc differs from its installed copy"
done
grep -q "Apache License" "$prefix/share/doc/nccl-scorep/LICENSE" || fail "LICENSE is not Apache-2.0"
expect_grep "NOTICE carries OTF2's BSD licence" "Redistributions in binary form must reproduce" \
    "$prefix/share/doc/nccl-scorep/NOTICE"

# Stripped: no DWARF left in the installed binaries, a debuglink naming a debug file that
# has it.
for pair in "lib/libnccl-profiler-scorep.so lib/.debug/libnccl-profiler-scorep.so.debug" \
    "bin/nccl-scorep bin/.debug/nccl-scorep.debug"; do
    read -r binary debug <<<"$pair"
    readelf -S "$prefix/$binary" >"$work/sections"
    if grep -q '\.debug_info' "$work/sections"; then
        fail "$binary still has .debug_info"
    fi
    link="$(readelf --string-dump=.gnu_debuglink "$prefix/$binary" | awk '/\[ *0\]/ { print $3 }')"
    expect_equal "debuglink of $binary" "$link" "$(basename "$debug")"
    readelf -S "$prefix/$debug" 2>/dev/null | grep -q '\.debug_info' || fail "$debug has no .debug_info"
done
# NCCL and Score-P find the plugin by its dynamic symbols, which stripping keeps.
nm -D --defined-only "$prefix/lib/libnccl-profiler-scorep.so" >"$work/dynsym"
expect_grep "the stripped plugin exports ncclProfiler_v7" ' ncclProfiler_v7$' "$work/dynsym"
size_built="$(stat -c %s "$CARGO_TARGET_DIR/release/libnccl_profiler_scorep.so")"
size_installed="$(stat -c %s "$prefix/lib/libnccl-profiler-scorep.so")"
echo "plugin size: $size_built bytes built, $size_installed bytes installed (stripped)"

step "find_package(NcclScorep) from tests/cmake-consumer"
consume() {
    local build="$1" search="$2"
    shift 2
    cmake -S tests/cmake-consumer -B "$build" -DCMAKE_PREFIX_PATH="$search" "$@" >"$build.log" 2>&1
}
consume "$work/consumer" "$prefix" -DNCCL_SCOREP_WANTED=0.1 ||
    { cat "$work/consumer.log"; fail "the consumer project does not configure"; }
cmake_plugin="$(sed -n 's/^-- NcclScorep_PLUGIN=//p' "$work/consumer.log")"
expect_equal "NcclScorep_PLUGIN" "$cmake_plugin" "$prefix/lib/libnccl-profiler-scorep.so"
expect_equal "NcclScorep_VERSION" "$(sed -n 's/^-- NcclScorep_VERSION=//p' "$work/consumer.log")" "$version"
expect_equal "NcclScorep::plugin TYPE" \
    "$(sed -n 's/^-- NcclScorep::plugin TYPE=//p' "$work/consumer.log")" MODULE_LIBRARY
expect_equal "\$<TARGET_FILE:NcclScorep::plugin>" "$(cat "$work/consumer/plugin-path.txt")" "$cmake_plugin"
cmake --build "$work/consumer" >"$work/consumer-build.log" 2>&1 ||
    { cat "$work/consumer-build.log"; fail "the consumer project does not build"; }
expect_grep "NcclScorep::nccl-scorep runs at build time" "^nccl-scorep $version" "$work/consumer-build.log"
if consume "$work/consumer-9" "$prefix" -DNCCL_SCOREP_WANTED=9.0; then
    fail "find_package(NcclScorep 9.0) accepted version $version"
fi
expect_grep "find_package(NcclScorep 9.0) is refused" 'compatible with requested version "9\.0"' "$work/consumer-9.log"

step "pkg-config"
pc_plugin="$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --variable=plugin nccl-scorep)"
expect_equal "pkg-config --variable=plugin nccl-scorep" "$pc_plugin" "$cmake_plugin"
expect_equal "pkg-config --modversion nccl-scorep" \
    "$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --modversion nccl-scorep)" "$version"

step "modulefiles"
modules="$prefix/share/nccl-scorep/modulefiles"
lua="$modules/nccl-scorep/$version.lua"
tcl="$modules/nccl-scorep/$version"
# VAR VALUE for each setenv / prepend_path of the Lmod file, then of the Tcl file.
sed -n -E 's/^(setenv|prepend_path)\("([A-Z_]+)", "(.*)"\)$/\1 \2 \3/p' "$lua" >"$work/lua.env"
sed -n -E 's/^(setenv|prepend-path) ([A-Z_]+) "(.*)"$/\1 \2 \3/p' "$tcl" | sed 's/^prepend-path/prepend_path/' >"$work/tcl.env"
diff -u "$work/lua.env" "$work/tcl.env" || fail "the Lmod and Tcl modulefiles set different values"
module_value() {
    awk -v name="$1" '$2 == name { print $3 }' "$work/lua.env"
}
module_ld="$(module_value LD_LIBRARY_PATH)"
module_plugin="$(module_value NCCL_PROFILER_PLUGIN)"
module_path="$(module_value PATH)"
module_man="$(module_value MANPATH)"
expect_equal "modulefile LD_LIBRARY_PATH" "$module_ld" "$prefix/lib"
expect_equal "modulefile NCCL_PROFILER_PLUGIN" "$module_plugin" "$cmake_plugin"
expect_equal "modulefile PATH" "$module_path" "$prefix/bin"
expect_equal "modulefile MANPATH" "$module_man" "$prefix/share/man"
expect_equal "nccl-scorep on the modulefile's PATH" \
    "$(PATH="$module_path:$PATH" command -v nccl-scorep)" "$prefix/bin/nccl-scorep"

# nccl-sim as NCCL 2.32: NCCL_PROFILER_PLUGIN=scorep means libnccl-profiler-scorep.so on
# the library path. LD_DEBUG=files shows which file the loader opened.
[[ -x "$sim" ]] || fail "$sim is missing (built with NCCL_SCOREP_BUILD_SIM=ON)"
run_sim() {
    local log="$1"
    shift
    (cd "$work" && env NCCL_SCOREP_OUTPUT_DIR="$work/sim-out" NCCL_SCOREP_AUTO_MERGE=0 "$@" \
        LD_DEBUG=files "$sim" run --scenario single) >"$log" 2>&1 ||
        { cat "$log"; fail "nccl-sim failed"; }
}
run_sim "$work/sim-short.log" NCCL_PROFILER_PLUGIN=scorep LD_LIBRARY_PATH="$module_ld"
expect_grep "nccl-sim loads the plugin with NCCL_PROFILER_PLUGIN=scorep" "Loaded nccl-scorep" "$work/sim-short.log"
expect_grep "... the installed one" "file=$prefix/lib/libnccl-profiler-scorep.so " "$work/sim-short.log"
ls "$work"/sim-out/parts/*/traces.otf2 >/dev/null 2>&1 || fail "the installed plugin wrote no trace part"
rm -rf "$work/sim-out"
run_sim "$work/sim-full.log" NCCL_PROFILER_PLUGIN="$module_plugin" LD_LIBRARY_PATH="$module_ld"
expect_grep "nccl-sim loads the plugin with the modulefile's NCCL_PROFILER_PLUGIN" "Loaded nccl-scorep" "$work/sim-full.log"

# Score-P's metric-plugin loader (the in-tree Score-P stand-in, which opens lib<name>.so
# from LD_LIBRARY_PATH as Score-P does) must get the very library NCCL loaded, by each
# documented name: the plugin then says its clock comes from the metric plugin.
cargo build --release --quiet -p scorep-stand-in
stand_in="$CARGO_TARGET_DIR/release/libscorep_stand_in.so"
[[ -f "$stand_in" ]] || stand_in="$CARGO_TARGET_DIR/release/deps/libscorep_stand_in.so"
[[ -f "$stand_in" ]] || fail "libscorep_stand_in.so was not built"
for name in nccl_scorep nccl_profiler_scorep; do
    rm -rf "$work/sim-out" "$work/scorep-exp"
    run_sim "$work/sim-metric-$name.log" NCCL_PROFILER_PLUGIN=scorep LD_LIBRARY_PATH="$module_ld" \
        LD_PRELOAD="$stand_in" SCOREP_EXPERIMENT_DIRECTORY="$work/scorep-exp" \
        SCOREP_METRIC_PLUGINS="$name" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=PROFILE
    expect_grep "SCOREP_METRIC_PLUGINS=$name hands Score-P's clock to the installed plugin" \
        "Score-P clock source: the metric plugin" "$work/sim-metric-$name.log"
done

# Lmod itself, where it is installed (it is not worth installing for this).
lmod_cmd="${LMOD_CMD:-}"
if [[ -z "$lmod_cmd" && -x /usr/share/lmod/lmod/libexec/lmod ]]; then
    lmod_cmd=/usr/share/lmod/lmod/libexec/lmod
fi
if [[ -n "$lmod_cmd" ]]; then
    # shellcheck disable=SC2016 # expanded by the inner shell
    loaded="$(env -u LOADEDMODULES -u _LMFILES_ MODULEPATH="$modules" LMOD_CMD="$lmod_cmd" \
        MODULE_NAME="nccl-scorep/$version" bash -c \
        'eval "$("$LMOD_CMD" bash load "$MODULE_NAME")" && printf "%s\n" "$NCCL_PROFILER_PLUGIN" "$LD_LIBRARY_PATH"' \
        2>"$work/lmod.err")" || { cat "$work/lmod.err"; fail "module load nccl-scorep/$version"; }
    expect_equal "Lmod: NCCL_PROFILER_PLUGIN after module load" "$(sed -n 1p <<<"$loaded")" "$module_plugin"
    expect_equal "Lmod: LD_LIBRARY_PATH starts with" "$(sed -n 2p <<<"$loaded" | cut -d: -f1)" "$module_ld"
else
    echo "skipped: running the modulefile with Lmod (not installed); its values were read from the file"
fi

step "man pages"
MANWIDTH=80 man -P cat -l "$prefix/share/man/man1/nccl-scorep.1" >"$work/man.txt" 2>"$work/man.err" ||
    { cat "$work/man.err"; fail "man -l nccl-scorep.1"; }
expect_grep "nccl-scorep(1) renders: SYNOPSIS" "^SYNOPSIS" "$work/man.txt"
expect_grep "nccl-scorep(1) lists nccl-scorep-validate(1)" "nccl-scorep-validate\(1\)" "$work/man.txt"
if grep -q "nccl-scorep-generate" "$work/man.txt"; then
    fail "nccl-scorep(1) shows the hidden generate command"
fi
MANWIDTH=80 man -P cat -l "$prefix/share/man/man1/nccl-scorep-doctor.1" >"$work/man-doctor.txt" 2>/dev/null
expect_grep "nccl-scorep-doctor(1) documents --variables" "--variables" "$work/man-doctor.txt"
expect_equal "man -w nccl-scorep-run on the modulefile's MANPATH" \
    "$(MANPATH="$module_man" man -w nccl-scorep-run)" "$prefix/share/man/man1/nccl-scorep-run.1"

step "completions"
bash -n "$prefix/share/bash-completion/completions/nccl-scorep" || fail "the bash completion does not parse"
for file in share/bash-completion/completions/nccl-scorep share/zsh/site-functions/_nccl-scorep \
    share/fish/vendor_completions.d/nccl-scorep.fish; do
    expect_grep "$file completes validate and --variables" "validate" "$prefix/$file"
    grep -q -- "variables" "$prefix/$file" || fail "$file does not complete doctor --variables"
done

step "moved tree: the CMake package follows"
cp -a "$prefix" "$work/moved"
consume "$work/consumer-moved" "$work/moved" || { cat "$work/consumer-moved.log"; fail "consumer on the moved tree"; }
expect_equal "NcclScorep_PLUGIN of the moved tree" \
    "$(sed -n 's/^-- NcclScorep_PLUGIN=//p' "$work/consumer-moved.log")" "$work/moved/lib/libnccl-profiler-scorep.so"

step "DESTDIR staging"
DESTDIR="$work/stage" cmake --install "$work/build" --prefix /opt/nccl-scorep >/dev/null
[[ -f "$work/stage/opt/nccl-scorep/lib/libnccl-profiler-scorep.so" ]] || fail "DESTDIR install missed the plugin"
expect_grep "the staged pkg-config file names the final prefix" "^prefix=/opt/nccl-scorep$" \
    "$work/stage/opt/nccl-scorep/lib/pkgconfig/nccl-scorep.pc"

step "scripts/build-plugin.sh --prefix makes the same tree"
bash scripts/build-plugin.sh --also nccl-sim --prefix "$work/prefix2" >"$work/build-plugin.log" ||
    { cat "$work/build-plugin.log"; fail "build-plugin.sh --prefix"; }
(cd "$prefix" && find . -printf '%P %y %l\n' | sort) >"$work/tree1"
(cd "$work/prefix2" && find . -printf '%P %y %l\n' | sort) >"$work/tree2"
diff -u "$work/tree1" "$work/tree2" || fail "the two install trees differ in their files"
while read -r file kind _; do
    [[ "$kind" == f ]] || continue
    if ! cmp -s "$prefix/$file" "$work/prefix2/$file" &&
        ! cmp -s <(sed "s|$prefix|PREFIX|g" "$prefix/$file") <(sed "s|$work/prefix2|PREFIX|g" "$work/prefix2/$file"); then
        fail "$file differs between the CMake and the build-plugin.sh install"
    fi
done <"$work/tree1"
echo "ok: $(wc -l <"$work/tree1") entries, the same in both trees"
# In the build directory every name of the plugin is one file, so Score-P's metric plugin
# nccl_profiler_scorep (Cargo's name) is the library NCCL loads.
[[ "$CARGO_TARGET_DIR/release/libnccl_profiler_scorep.so" -ef "$CARGO_TARGET_DIR/release/libnccl-profiler-scorep.so" ]] ||
    fail "build-plugin.sh left libnccl-profiler-scorep.so a copy of Cargo's libnccl_profiler_scorep.so"
echo "ok: the build directory's plugin names are one file"

step "install test passed in $((SECONDS - started)) s"
