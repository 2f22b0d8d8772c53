"""One validation: a config that `config check` accepts is one `run` starts with, and one it
refuses `run` refuses too (text source, mock pins, a fresh state directory), at the edges of
every range that a component checks as well (Policy, Endpointer, the starting model)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from edge_plm.config.starting_model import shipped_path

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "edge_plm.cli"]

# case: (the TOML added to a usable service config, whether check and run accept it)
BOUNDARIES = {
    "defaults": ("", True),
    "override-window-zero": ("[policy]\noverride_window_s = 0", False),
    "override-window-tiny": ("[policy]\noverride_window_s = 0.001", True),
    "ask-window-zero": ("[policy]\nask_window_s = 0", False),
    "thresholds-equal": ("[policy]\nask_threshold = 0.5\nact_threshold = 0.5", True),
    "thresholds-extremes": ("[policy]\nask_threshold = 0.0\nact_threshold = 1.0", True),
    "utterance-min-equals-max": ("[audio]\nmin_utterance_ms = 500\nmax_utterance_ms = 500", False),
    "utterance-min-just-below-max": ("[audio]\nmin_utterance_ms = 499\nmax_utterance_ms = 500", True),
    "utterance-min-zero": ("[audio]\nmin_utterance_ms = 0", True),
    "source-wav": ('[audio]\nsource = "wav"', False),
    "start-missing-file": ('[model]\nstart = "/nonexistent.npz"', False),
    "start-empty": ('[model]\nstart = "empty"', True),
    "start-existing-file": (f'[model]\nstart = "{shipped_path("switch-en")}"', True),
    "keep-two-checkpoints": ("[model]\nkeep_checkpoints = 2", True),
    "keep-one-checkpoint": ("[model]\nkeep_checkpoints = 1", False),
}


def _config(path: Path, state: Path, extra: str) -> Path:
    sections = {"paths": [f'state_dir = "{state}"'], "audio": ['source = "text"'],
                "gpio": ['pin_factory = "mock"'], "policy": [], "model": []}
    for block in filter(None, extra.split("[")):
        head, _, body = block.partition("]\n")
        keys = {line.split("=")[0].strip() for line in body.splitlines()}
        sections[head] = [line for line in sections[head] if line.split("=")[0].strip() not in keys]
        sections[head] += body.splitlines()
    path.write_text("".join(f"[{name}]\n" + "".join(f"{line}\n" for line in lines)
                            for name, lines in sections.items() if lines))
    return path


def _run(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, input=stdin, timeout=300,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})


@pytest.mark.parametrize("case", sorted(BOUNDARIES))
def test_check_accepts_exactly_what_run_starts_with(case, tmp_path):
    extra, accepted = BOUNDARIES[case]
    config = _config(tmp_path / "config.toml", tmp_path / "state", extra)
    check = _run("config", "check", "--config", str(config))
    run = _run("run", "--config", str(config), stdin="turn on the light\n")
    assert (check.returncode == 0) == (run.returncode == 0), (check.stderr, run.stdout, run.stderr)
    assert (check.returncode == 0) == accepted, check.stdout + check.stderr
    for proc in (check, run):
        assert "Traceback" not in proc.stdout + proc.stderr
        if proc.returncode:
            assert len([x for x in proc.stderr.splitlines() if x.startswith("error:")]) == 1
    if accepted:  # it ran: the line was handled and stored
        assert (tmp_path / "state" / "edge-plm.db").exists()
