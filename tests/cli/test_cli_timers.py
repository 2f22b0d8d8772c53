"""`edge-plm timers` (list, cancel), and the timers in `status --json` and `log --json`."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from edge_plm.cli.root import app
import edge_plm.cli  # noqa: F401 - registers the commands on `app`
from edge_plm.config.settings import Settings
from edge_plm.loop.controller import text_utterance
from edge_plm.loop.replay import build_replay


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "edge-plm.db"
    r = build_replay(Settings(), path, seed=0)
    try:
        r.controller.timed.follow(r.clock)
        r.controller.handle(text_utterance("turn on the lights in twenty minutes"))
        r.clock.advance(30)
        r.controller.handle(text_utterance("turn the lamp off in an hour"))
    finally:
        r.close()
    return path


def run(*args):
    return CliRunner().invoke(app, [*args])


def test_list_json_and_text(db):
    r = run("timers", "--db", str(db), "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [(t["action"], t["kind"], t["status"]) for t in rows] == [("ON", "at", "pending"),
                                                                     ("OFF", "at", "pending")]
    assert set(rows[0]) >= {"id", "device", "action", "due", "transcript"}
    text = run("timers", "--db", str(db)).stdout
    assert "turn on the lights in twenty minutes" in text and "main ON" in text


def test_status_and_log_show_the_timers(db):
    s = json.loads(run("status", "--db", str(db), "--json").stdout)
    assert [t["action"] for t in s["timers"]] == ["ON", "OFF"]
    log = json.loads(run("log", "--db", str(db), "--json").stdout)
    assert [r["timers"][0]["status"] for r in log] == ["pending", "pending"]
    assert "act (timer)" in run("log", "--db", str(db)).stdout


def test_cancel_one_all_and_a_bad_id(db):
    first = json.loads(run("timers", "--db", str(db), "--json").stdout)[0]["id"]
    bad = run("timers", "cancel", "999", "--db", str(db))
    assert bad.exit_code == 1 and "no pending timer with id 999" in bad.output
    assert "Traceback" not in bad.output
    ok = run("timers", "cancel", str(first), "--db", str(db), "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout) == {"cancelled": [first]}
    assert run("timers", "cancel", "--db", str(db)).exit_code == 1  # neither ids nor --all
    rest = run("timers", "cancel", "--all", "--db", str(db))
    assert rest.exit_code == 0 and "cancelled 1 timer" in rest.stdout
    assert json.loads(run("timers", "--db", str(db), "--json").stdout) == []
