"""Writers wait for each other: one busy timeout on every connection, BEGIN IMMEDIATE for
multi-statement writes, and `label`/`forget` succeed while another process writes."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from edge_plm.store import BUSY_TIMEOUT_MS, ReplayStore, is_busy, retry_busy

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "edge_plm.cli"]


def _hold_write_lock(path: Path, seconds: float, started: threading.Event) -> threading.Thread:
    """Another connection holds the write lock for `seconds` (as the service's loop does,
    briefly, on every interaction)."""

    def hold() -> None:
        conn = sqlite3.connect(path, timeout=10)
        conn.isolation_level = None
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO interactions (ts, transcript) VALUES (0, 'other writer')")
        started.set()
        time.sleep(seconds)
        conn.execute("COMMIT")
        conn.close()

    t = threading.Thread(target=hold)
    t.start()
    return t


def test_delete_waits_after_reading_instead_of_failing_at_once(tmp_path):
    """The old `delete_interactions` read, then wrote, in a deferred transaction: SQLite
    answers SQLITE_BUSY at once (no busy handler) when another connection writes meanwhile."""
    path = tmp_path / "db"
    store = ReplayStore(path)
    ids = [store.add_interaction(transcript=f"t{i}") for i in range(5)]
    started = threading.Event()
    t = _hold_write_lock(path, 0.5, started)
    started.wait(5)
    t0 = time.monotonic()
    store.delete_interactions(ids[:2])
    waited = time.monotonic() - t0
    t.join()
    assert waited >= 0.3  # it waited for the other writer rather than failing
    assert store.count() == 4  # 5 - 2 + the other writer's row
    store.close()


def test_deferred_read_then_write_is_what_fails_without_begin_immediate(tmp_path):
    """The failure mode the store avoids, shown on a raw connection (so the test above means
    something): a deferred transaction that read first gets 'database is locked' at once."""
    path = tmp_path / "db"
    ReplayStore(path).close()
    started = threading.Event()
    t = _hold_write_lock(path, 0.5, started)
    started.wait(5)
    conn = sqlite3.connect(path, timeout=10)
    conn.isolation_level = None
    conn.execute("BEGIN")
    conn.execute("SELECT count(*) FROM interactions").fetchone()
    t0 = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked") as err:
        conn.execute("DELETE FROM interactions")
    assert time.monotonic() - t0 < 0.3  # at once, despite timeout=10
    assert is_busy(err.value)
    conn.execute("ROLLBACK")
    conn.close()
    t.join()


def test_retry_busy_retries_then_gives_up():
    calls = []

    def busy() -> None:
        calls.append(1)
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(sqlite3.OperationalError):
        retry_busy(busy, timeout_ms=100)
    assert len(calls) > 2
    assert retry_busy(lambda: 7) == 7


def test_every_store_connection_has_the_busy_timeout(tmp_path):
    path = tmp_path / "db"
    with ReplayStore(path) as rw, ReplayStore(path, read_only=True) as ro:
        for s in (rw, ro):
            assert s.db.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_TIMEOUT_MS


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1"}, timeout=300)


def test_label_and_forget_wait_for_a_writer(tmp_path):
    """`label` and `forget` while another connection holds the write lock: both wait and
    succeed (they failed with 'database is locked' before)."""
    path = tmp_path / "db"
    store = ReplayStore(path)
    ids = [store.add_interaction(transcript=t, prediction="ON", confidence=0.5, decision="ask")
           for t in ("turn on the light", "lights off", "what time is it")]
    store.close()
    for args in (("label", str(ids[0]), "ON"), ("forget", str(ids[2]), "--yes")):
        started = threading.Event()
        t = _hold_write_lock(path, 1.5, started)
        started.wait(5)
        proc = _cli(*args, "--db", str(path), "--json")
        t.join()
        assert proc.returncode == 0, proc.stderr
        assert "locked" not in proc.stderr
        json.loads(proc.stdout)
    with ReplayStore(path, read_only=True) as s:
        assert s.get(ids[0]).label == "ON"
        assert [r.id for r in s.interactions()].count(ids[2]) == 0


def test_processes_creating_one_database_at_once_all_succeed(tmp_path):
    """Migrations run in BEGIN IMMEDIATE transactions that check the version again inside:
    the second process waits, then finds the schema made."""
    path = tmp_path / "new.db"
    go = tmp_path / "go"
    code = ("import os, sys, time; from edge_plm.store import ReplayStore\n"
            "while not os.path.exists(sys.argv[2]): time.sleep(0.001)\n"
            "s = ReplayStore(sys.argv[1]); s.add_interaction(transcript='x'); s.close()\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), str(go)], cwd=ROOT,
                              stderr=subprocess.PIPE, text=True) for _ in range(6)]
    time.sleep(1.5)  # every process imported and waiting
    go.touch()
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, errs
    with ReplayStore(path, read_only=True) as s:
        assert s.count() == 6
