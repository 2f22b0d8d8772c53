"""What a person reads on the terminal (issue 27, item 16): a slow command's first line, one
style for the library's warnings on stderr, and the directory-mode warning said once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _data_util import cli

from edge_plm.cli.announce import loading_line

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("argv, line", [
    (["edge-plm", "run", "--audio", "x.wav"], "loading speech recognition and the model..."),
    (["edge-plm", "replay", "s.jsonl", "--json"], "loading speech recognition and the model..."),
    (["edge-plm", "forget", "--all", "--yes"], "loading the model..."),
    (["edge-plm", "model", "rebuild"], "loading the model..."),
    (["edge-plm", "model", "list"], None),
    (["edge-plm", "status", "--json"], None),
    (["edge-plm", "run", "--help"], None),
    (["edge-plm", "--version"], None),
    (["edge-plm"], None),
])
def test_which_commands_say_loading_first(argv, line):
    assert loading_line(argv) == line


def test_a_model_command_says_loading_within_a_second(tmp_path):
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "edge_plm.cli", "model", "rebuild", "--db",
                             str(tmp_path / "none.db")], stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=ROOT, env={**os.environ, "EDGE_PLM_CONFIG": os.devnull})
    first = proc.stderr.readline()
    waited = time.monotonic() - t0
    rest = proc.stderr.read()
    proc.wait(timeout=120)
    assert first == "loading the model...\n" and waited < 1.0, (first, waited)
    assert proc.returncode == 1 and rest.startswith("error: no database at"), rest


def test_library_warnings_are_warning_lines_and_the_mode_warning_is_said_once(tmp_path, no_user_config):
    loose = tmp_path / "shared"
    loose.mkdir()
    loose.chmod(0o755)  # made by a person, not by edge-plm
    db = loose / "edge-plm.db"
    first = cli("model", "import", ROOT / "models" / "switch-en.npz", "--db", db)
    assert first.exit_code == 0, first.output
    warned = [line for line in first.stderr.splitlines() if "group/others" in line]
    assert len(warned) == 1 and warned[0].startswith("warning: directory of the replay buffer "), first.stderr
    assert "(mode 755)" in warned[0] and f"chmod 700 {loose}" in warned[0]
    for args in (("status",), ("model", "list"), ("label", "1", "ON")):
        again = cli(*args, "--db", db)
        assert "group/others" not in again.stderr, (args, again.stderr)
    loose.chmod(0o750)  # another mode: said again, once
    assert "(mode 750)" in cli("model", "rebuild", "--db", db).stderr
    assert "group/others" not in cli("model", "rebuild", "--db", db).stderr
    assert all(not line.startswith(("WARNING", "ERROR", "INFO")) or line.startswith("20")
               for line in first.stderr.splitlines())

