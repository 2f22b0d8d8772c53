#!/usr/bin/env bash
# The README's quick start, checked the way a newcomer runs it: both commands, in sequence, in
# one fresh copy of this tree (tracked and new files, no .venv, no caches), then the installed
# CLI must still work. Run by .ci/run; pip's download cache is reused, so it costs installs,
# the demo and the second command's tests, not downloads.
#
# Command 2's pytest runs the tests named in QUICKSTART_TESTS (PYTEST_ADDOPTS; default: the
# ones that use the installed package and the demo's state); .ci/run runs the whole suite in
# the checkout itself. QUICKSTART_TESTS="" runs the whole suite here too.
# Usage: bash scripts/check-quickstart.sh [WORKDIR]   (default: a new temporary directory)
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"
clone="$work/clone"
rm -rf "$clone"
mkdir -p "$clone"
cd "$src"
git ls-files -z --cached --others --exclude-standard \
    | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$clone"
cd "$clone"
export PIP_CACHE_DIR="${PIP_CACHE_DIR:-$(python3 -m pip cache dir 2>/dev/null || echo "$work/pip-cache")}"
# a newcomer's home: nothing cached from an earlier edge-plm (state, Numba kernels, config)
export HOME="$work/home" XDG_CACHE_HOME="" XDG_DATA_HOME="" XDG_CONFIG_HOME=""
unset NUMBA_CACHE_DIR EDGE_PLM_CONFIG
mkdir -p "$HOME"

step() { echo "check-quickstart: $*"; }
step "command 1 in $clone"
python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/edge-plm demo > "$work/demo.out"
site="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
stray="$(find "$site/edge_plm" -name '*.nbi' -o -name '*.nbc' | head -5)"
if [ -n "$stray" ]; then
    echo "check-quickstart: FAIL: the demo wrote Numba cache files into the installed package:" >&2
    echo "$stray" >&2
    exit 1
fi

step "command 2"
export PYTEST_ADDOPTS="${QUICKSTART_TESTS-tests/cli/test_cli_version.py tests/cli/test_cli_data.py tests/commands/test_doctor.py}"
bash scripts/setup-dev.sh && .venv/bin/python -m pytest -q

step "the CLI afterwards"
.venv/bin/edge-plm --version
grep -q "interactions stored in $HOME/.local/share/edge-plm/demo/edge-plm.db" "$work/demo.out"
.venv/bin/edge-plm status --db "$HOME/.local/share/edge-plm/demo/edge-plm.db" > /dev/null
.venv/bin/edge-plm eval --train edge_plm/data/switch-sample-train.jsonl \
    --test edge_plm/data/switch-sample-test.jsonl --budgets 0,10 > /dev/null
step "ok"
