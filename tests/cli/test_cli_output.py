"""What a person reads on the terminal (issue 27, item 16): a slow command's first line, one
style for the library's warnings on stderr, and the directory-mode warning said once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _data_util import cli

from edge_plm.cli.announce import loading_line

ROOT = Path(__file__).resolve().parents[2]


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


def test_status_shows_the_owners_labels_apart_from_the_starting_models(tmp_path, no_user_config):
    from edge_plm.switch.model import SwitchModel

    session = tmp_path / "s.jsonl"
    session.write_text("".join(f'{{"text": "{t}", "label": "{y}"}}\n' for t, y in [
        ("turn on the light", "ON"), ("lights off now", "OFF"), ("what time is it", "NOOP")] * 5))
    shipped = SwitchModel.load(ROOT / "models" / "switch-en.npz").n_examples
    for start, frozen in (("switch-en", shipped), ("empty", 0)):
        db = tmp_path / start / "edge-plm.db"
        assert cli("replay", session, "--db", db, "--start", start).exit_code == 0
        status = cli("status", "--db", db, "--json")
        a = json.loads(status.stdout)["model"]["active"]
        assert a["starting_examples"] == frozen and 0 < a["owner_labels"] <= 15
        assert a["n_train"] == a["owner_labels"] + frozen
        text = " ".join(cli("status", "--db", db).stdout.split())
        assert f"{a['owner_labels']} of your labels learned" in text
        assert (f"+ {frozen} examples of the starting model" in text) == bool(frozen)
