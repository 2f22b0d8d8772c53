#!/usr/bin/env bash
# Set up a development environment: system packages (when run as root or with sudo),
# a virtualenv in .venv with edge-plm installed editable plus its test, benchmark and
# build-model extras (the last: the starting model's build-time data tools).
# Idempotent. Usage: bash scripts/setup-dev.sh
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(flite espeak-ng sox libportaudio2 shellcheck systemd mosquitto)

if command -v apt-get >/dev/null 2>&1; then
    missing=()
    for pkg in "${APT_PACKAGES[@]}"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    if ((${#missing[@]})); then
        SUDO=""
        [ "$(id -u)" -eq 0 ] || SUDO="sudo"
        echo "setup-dev: installing system packages: ${missing[*]}"
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
else
    echo "setup-dev: no apt-get; install these yourself: ${APT_PACKAGES[*]}" >&2
fi

PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip setuptools wheel
.venv/bin/python -m pip install -q -e '.[test,bench,build-model]'
echo "setup-dev: ready (.venv)"
