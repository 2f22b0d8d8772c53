"""The README's quick start: Numba's cache stays out of the package, and (with
EDGE_PLM_QUICKSTART=1) both README commands in a fresh copy of the tree, then the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "edge_plm"


def _cache_paths(env: dict[str, str]) -> list[str]:
    code = ("import edge_plm, numba; from edge_plm.switch import jit_kernels as k; "
            "print(numba.config.CACHE_DIR); print(k.unit_loss_grad._cache._cache_path)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_numba_caches_under_the_users_cache_dir_not_the_package(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env["HOME"] = str(tmp_path)
    config_dir, kernel_dir = _cache_paths(env)
    assert config_dir == str(tmp_path / ".cache" / "edge-plm" / "numba")
    assert kernel_dir.startswith(config_dir) and not kernel_dir.startswith(str(PACKAGE))
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    assert _cache_paths(env)[0] == str(tmp_path / "xdg" / "edge-plm" / "numba")
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "service")  # what the systemd unit sets wins
    assert _cache_paths(env)[0] == str(tmp_path / "service")


@pytest.mark.skipif(os.environ.get("EDGE_PLM_QUICKSTART") != "1",
                    reason="set EDGE_PLM_QUICKSTART=1 (minutes: two installs; .ci/run runs the script)")
def test_readme_commands_in_a_fresh_copy(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "check-quickstart.sh"), str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "check-quickstart: ok" in proc.stdout


def test_readme_keeps_its_two_commands():
    """The commands the quick-start check runs are the README's, word for word."""
    readme = (ROOT / "README.md").read_text()
    script = (ROOT / "scripts" / "check-quickstart.sh").read_text()
    one = "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/edge-plm demo"
    two = "bash scripts/setup-dev.sh && .venv/bin/python -m pytest -q"
    assert one in readme and two in readme
    assert one in script and two in script
    # after the quick start `edge-plm` is in .venv/bin, not on PATH: the examples say so
    assert "\nedge-plm eval " not in readme and "\n.venv/bin/edge-plm eval --train" in readme
    assert "source .venv/bin/activate" in readme
