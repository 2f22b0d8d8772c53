"""Input that is accepted but hostile: JSON nested 100k deep is a line-numbered error (exit 2),
and control characters in stored transcripts are printed as escapes, never sent raw to the
terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from edge_plm.store import ReplayStore
from edge_plm.voice.transcript import printable

CLI = [sys.executable, "-m", "edge_plm.cli"]
ESCAPE = "turn\x1b[31m on\x07 the [bold]light[/bold]\u202e"


def _run(*args):
    env = {**os.environ, "COLUMNS": "300"}  # rich wraps at the terminal width otherwise
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, env=env)


def test_deep_json_is_a_line_numbered_error(tmp_path):
    session = tmp_path / "deep.jsonl"
    session.write_text(json.dumps({"text": "turn on the light", "label": "ON"}) + "\n"
                       + '{"a":' * 100_000 + "1" + "}" * 100_000 + "\n")
    proc = _run("replay", str(session), "--json")
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {session}:2: JSON nested too deeply (an utterance is one flat object)"]
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_printable_escapes_controls_and_keeps_text():
    assert printable(ESCAPE) == "turn\\x1b[31m on\\x07 the [bold]light[/bold]\\u202e"
    assert printable("lights on, please\tnow") == "lights on, please\tnow"
    assert printable(None) == ""


def test_log_and_status_print_control_characters_as_escapes(tmp_path):
    db = tmp_path / "edge-plm.db"
    with ReplayStore(db) as store:
        store.add_interaction(transcript=ESCAPE, prediction="ON", confidence=0.9,
                              decision="act", action="ON")
    for args in (["log", "--db", str(db)], ["status", "--db", str(db)]):
        proc = _run(*args)
        assert proc.returncode == 0, proc.stderr
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout, args
        assert "\u202e" not in proc.stdout, args
        # as typed, escapes visible; markup in a transcript is text, not markup
        assert printable(ESCAPE) in proc.stdout, (args, proc.stdout)
    proc = _run("log", "--db", str(db), "--json")
    assert json.loads(proc.stdout)[0]["transcript"] == ESCAPE  # JSON keeps the stored text
