"""Clean stops: SIGTERM/SIGINT set a flag (edge_plm.loop.stopping) that `run`, the loop and `replay`
check at safe points; they save what was learned, put the relay in its stop state, exit 0, and
drive nothing after the signal."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from edge_plm.device import MAIN_RELAY
from edge_plm.loop import stopping
from edge_plm.loop.controller import text_utterance
from edge_plm.learning.state import unlearned_in_active
from edge_plm.loop.replay import build_replay
from edge_plm.config.settings import Settings
from edge_plm.store import ReplayStore
from edge_plm.voice.audio import TextSource

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "edge_plm.cli"]
sys.path.insert(0, str(ROOT / "benchmarks"))
from notified_service import text_service_config  # noqa: E402

TEXTS = [("turn on the light", "ON"), ("switch the light off", "OFF"), ("what time is it", "NOOP")]


def test_a_signal_sets_the_flag_and_the_handlers_come_back():
    before = signal.getsignal(signal.SIGTERM)
    with stopping.handling() as flag:
        assert not flag.is_set()
        os.kill(os.getpid(), signal.SIGTERM)
        assert flag.wait(2.0)
        assert flag.signal_name == "SIGTERM" and flag.reason() == "SIGTERM"
        assert stopping.install() is flag  # idempotent: a signal before the call is kept
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_text_source_on_a_pipe_ends_when_the_flag_is_set():
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"turn on the light\nwhat time\n")  # the writer stays open: a read blocks
    flag = stopping.StopFlag()
    threading.Timer(0.3, flag.set).start()
    t0 = time.monotonic()
    with os.fdopen(read_fd, "rb") as stream:
        texts = [u.text for u in TextSource(stream, stop=flag)]
    os.close(write_fd)
    assert texts == ["turn on the light", "what time"]
    assert time.monotonic() - t0 < 5.0


def test_the_loop_drives_nothing_after_the_stop(tmp_path):
    replay = build_replay(Settings(), tmp_path / "edge-plm.db")
    controller = replay.controller
    for _ in range(6):
        for text, label in TEXTS:
            controller.learner.model.learn(text, label)
    flag = stopping.StopFlag()
    real_predict = controller.worker.predict_all

    def predict_then_signal(text):  # the signal lands while this input is being handled
        flag.set()
        return real_predict(text)

    controller.worker.predict_all = predict_then_signal
    try:
        n = controller.run([text_utterance("turn on the light"), text_utterance("turn on the light")],
                           flag)
        relay_on = controller.devices.relays[MAIN_RELAY].is_on
        rows = replay.store.interactions(oldest_first=True)
    finally:
        controller.stop()
        replay.close()
    assert n == 1 and len(rows) == 1  # the second input came after the stop: not handled
    assert rows[0].prediction == "ON" and rows[0].decision == "act"
    assert rows[0].action is None and relay_on is False  # decided, but not driven


def wait_for_interactions(db: Path, n: int, timeout_s: float) -> bool:
    """Whether `db` holds at least `n` interactions within `timeout_s` (a file still being
    created, without its tables yet, counts as none)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                if conn.execute("SELECT count(*) FROM interactions").fetchone()[0] >= n:
                    return True
        except sqlite3.Error:
            pass
        time.sleep(0.2)
    return False


def _status(db: Path) -> int | None:
    with ReplayStore(db, read_only=True) as store:
        return unlearned_in_active(store, Settings().model.holdout_fraction)


def test_run_stops_cleanly_in_the_loop_and_during_start_up(tmp_path):
    state = tmp_path / "state"
    config = text_service_config(tmp_path / "config.toml", state,
                                 "[policy]\nask_window_s = 0.05\noverride_window_s = 0.05\n"
                                 "[model]\nversion_every = 1000\n")
    # during start-up (before the database exists): a clean exit, nothing written
    proc = subprocess.Popen([*CLI, "run", "--config", str(config)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out + err
    assert "Traceback" not in out + err
    # in the loop: labels resolved after the last version are saved, the relay goes OFF
    proc = subprocess.Popen([*CLI, "run", "--config", str(config)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdin.write("".join(f"{t}\n" for t, _ in TEXTS * 3))
    proc.stdin.flush()
    assert wait_for_interactions(state / "edge-plm.db", 9, timeout_s=120)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out + err
    assert time.monotonic() - t0 < 10.0
    assert "SIGTERM: stopping" in out and "relay closed in safe state OFF" in out
    assert _status(state / "edge-plm.db") == 0  # without a restart


def test_replay_stops_after_the_line_and_saves(tmp_path):
    session = tmp_path / "s.jsonl"
    session.write_text("".join(json.dumps({"text": t, "label": lab}) + "\n"
                               for t, lab in TEXTS * 400))
    db = tmp_path / "edge-plm.db"
    proc = subprocess.Popen([*CLI, "replay", str(session), "--db", str(db), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for_interactions(db, 5, timeout_s=120)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    summary = json.loads(out)
    assert 5 <= summary["interactions"] < 1200
    assert "SIGINT: the replay stopped after" in err
    assert _status(db) == 0
