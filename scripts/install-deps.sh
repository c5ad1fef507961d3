#!/usr/bin/env bash
# Installs the Debian packages named as arguments that are not installed yet, and the
# clippy and rustfmt components when cargo lacks them.
#
#   scripts/install-deps.sh [PACKAGE...]
#
# Everything is checked first, so a second run installs nothing and takes no time.
set -euo pipefail

is_installed() {
    dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed$'
}

# Root runs apt-get directly; anyone else needs sudo. `env` carries DEBIAN_FRONTEND
# through sudo, which would otherwise drop it.
as_root() {
    if [[ "$(id -u)" -eq 0 ]]; then
        env DEBIAN_FRONTEND=noninteractive "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo env DEBIAN_FRONTEND=noninteractive "$@"
    else
        echo "error: installing $* needs root, and sudo is not available" >&2
        return 1
    fi
}

missing=()
if [[ $# -gt 0 ]]; then
    if command -v dpkg >/dev/null 2>&1; then
        for package in "$@"; do
            if ! is_installed "$package"; then
                missing+=("$package")
            fi
        done
    else
        echo "warning: no dpkg (not Debian or Ubuntu?); make sure these are installed: $*" >&2
    fi
fi

if [[ ${#missing[@]} -gt 0 ]]; then
    echo "installing Debian packages: ${missing[*]}"
    as_root apt-get update
    as_root apt-get install -y --no-install-recommends "${missing[@]}"
fi

for component in clippy rustfmt; do
    case "$component" in
        clippy) check=(cargo clippy --version) ;;
        rustfmt) check=(cargo fmt --version) ;;
    esac
    if ! "${check[@]}" >/dev/null 2>&1; then
        if command -v rustup >/dev/null 2>&1; then
            echo "installing rustup component $component"
            rustup component add "$component"
        else
            echo "error: ${check[*]} is missing and rustup is not available to add $component" >&2
            exit 1
        fi
    fi
done
