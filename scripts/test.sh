#!/usr/bin/env bash
# The whole test suite: formatting, lints, every test of the workspace, doc tests.
# Any failure stops it with a non-zero status.
set -euo pipefail

# Debian packages the tests need. Add a package here when a test starts to use it.
DEBIAN_PACKAGES=(valgrind)

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

step() {
    printf '\n==> %s\n' "$*"
}

step "dependencies"
bash scripts/install-deps.sh "${DEBIAN_PACKAGES[@]}"

step "cargo fmt --all -- --check"
cargo fmt --all -- --check

# Shell scripts are linted where shellcheck is installed; it is not worth installing here.
if command -v shellcheck >/dev/null 2>&1; then
    step "shellcheck"
    shellcheck scripts/*.sh .ci/run
fi

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

# --no-fail-fast: one failure should not hide the others.
if cargo nextest --version >/dev/null 2>&1; then
    step "cargo nextest run --workspace"
    cargo nextest run --workspace --no-fail-fast
else
    step "cargo test --workspace (cargo-nextest is not installed)"
    cargo test --workspace --no-fail-fast
fi

# nextest does not run doc tests.
step "cargo test --workspace --doc"
cargo test --workspace --doc

step "all checks passed"
