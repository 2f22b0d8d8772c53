"""Shared by tests/cli/test_cli_data.py and tests/cli/test_cli_model.py: a replay buffer populated by
the real loop (controller + learner + policy on mock GPIO), and the CLI runner."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from edge_plm.cli import app
from edge_plm.loop.replay import SessionLine, run_session
from edge_plm.decide.policy import Action
from kit import make_replay

DEMO_SESSION = Path(__file__).resolve().parent.parent / "edge_plm" / "data" / "demo" / "session.jsonl"


def demo_text_lines() -> list[SessionLine]:
    """The demo session's reference transcripts as a text session (48 lines)."""
    rows = [json.loads(s) for s in DEMO_SESSION.read_text().splitlines() if s.strip()]
    return [SessionLine(Action(r["label"]), text=r["text"]) for r in rows]


def populate(db: Path, lines: list[SessionLine], seed: int = 0) -> dict:
    """Replay `lines` through the real loop into `db` (checkpoints in <db dir>/checkpoints),
    from an empty model."""
    replay = make_replay(db, start="empty", seed=seed)
    try:
        result = run_session(lines, replay.controller, replay.clock)
    finally:
        replay.close()
    return result.summary()


def copy_db(src_dir: Path, dst_dir: Path) -> Path:
    """A private copy of a populated state dir (database + checkpoints, paths rewritten)."""
    shutil.copytree(src_dir, dst_dir)
    db = dst_dir / "edge-plm.db"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE model_versions SET path = replace(path, ?, ?)",
                     [str(src_dir), str(dst_dir)])
    conn.close()
    return db


def query(db: Path, sql: str, params=()) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


runner = CliRunner()


def cli(*args: str, input: str | None = None):
    return runner.invoke(app, [str(a) for a in args], input=input, catch_exceptions=False)


def js(result) -> dict:
    """The JSON document a successful CLI invocation printed."""
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)
