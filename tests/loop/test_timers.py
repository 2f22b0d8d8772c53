"""Timed commands through the loop (docs/loop.md, "Timed commands"): set, run at their time,
the way back, asks, the person's hand, voice cancel, a start after a power cut, kill -9."""

from __future__ import annotations

import logging
import signal
import sqlite3
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from edge_plm.config.settings import Settings
from edge_plm.loop.controller import text_utterance
from edge_plm.loop.replay import build_replay, flip_switch
from edge_plm.store import ReplayStore

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from notified_service import notified_service, text_service_config  # noqa: E402
from kit import FakeClock  # noqa: E402


@pytest.fixture
def replay(tmp_path):
    r = build_replay(Settings(), tmp_path / "edge-plm.db", seed=0)
    r.controller.timed.follow(r.clock)  # simulated time runs the timers
    yield r
    r.close()


def relay(r) -> bool:
    return r.controller.devices.relays[r.controller.names[0]].is_on


def test_in_twenty_minutes_acts_then_and_not_now(replay):
    c = replay.controller
    out = c.handle(text_utterance("turn on the lights in twenty minutes"))
    assert out.decision.value == "act" and out.action is None and not relay(replay)
    [t] = c.store.timers()
    assert (t.action, t.kind, t.interaction_id) == ("ON", "at", out.interaction_id)
    replay.clock.advance(1190)
    c.pump()
    assert not relay(replay) and c.store.timers()
    replay.clock.advance(20)
    c.pump()
    assert relay(replay) and c.store.timer(t.id).status == "done"
    assert c.store.get(out.interaction_id).label == "ON"  # learned as today: left alone


def test_for_an_hour_acts_now_and_goes_back(replay):
    c = replay.controller
    out = c.handle(text_utterance("turn on the lights for an hour"))
    assert out.action is not None and out.action.value == "ON" and relay(replay)
    [t] = c.store.timers()
    assert (t.action, t.kind) == ("OFF", "for")
    replay.clock.advance(3601)
    c.pump()
    assert not relay(replay) and c.store.timer(t.id).status == "done"


def test_a_time_it_cannot_read_is_asked_never_acted(replay):
    c = replay.controller
    out = c.handle(text_utterance("turn on the lights in a bit"))
    assert out.decision.value == "ask" and not relay(replay) and not c.store.timers()


def test_non_timed_command_unchanged(replay):
    out = replay.controller.handle(text_utterance("turn on the lights"))
    assert out.action is not None and relay(replay) and not replay.controller.store.timers(None)


def test_the_hand_cancels_the_timer(replay):
    c = replay.controller
    c.handle(text_utterance("turn on the lights in twenty minutes"))
    replay.clock.advance(60)
    switch = c.devices.switches[c.names[0]]
    flip_switch(switch, c.devices.factory.pin(switch.cfg.pin), replay.clock)
    c.pump()
    assert relay(replay) and not c.store.timers()
    assert c.store.timers("cancelled")[0].note == "the person's switch"


def test_cancel_by_voice(replay):
    c = replay.controller
    c.handle(text_utterance("turn the lamp on for an hour"))
    c.handle(text_utterance("turn off the lights in twenty minutes"))
    assert len(c.store.timers()) == 2
    out = c.handle(text_utterance("cancel the lamp timer"))
    assert out.interaction_id is None and out.error is None
    [left] = c.store.timers()
    assert "lights" in left.transcript
    c.handle(text_utterance("cancel the timer"))
    assert not c.store.timers()
    assert c.store.count() == 2  # the cancels are no interactions


def test_cancel_without_timers_is_an_utterance(replay):
    out = replay.controller.handle(text_utterance("cancel the timer"))
    assert out.interaction_id is not None


def test_start_after_a_power_cut_runs_within_grace_drops_after(tmp_path, caplog):
    db = tmp_path / "edge-plm.db"
    now = time.time()
    with ReplayStore(db) as store:
        late = store.add_timer("main", "ON", "at", now - 60, "turn on the light in a minute")
        old = store.add_timer("main", "OFF", "at", now - 3600, "turn off the light in an hour")
    settings = Settings()
    settings = replace(settings, timers=replace(settings.timers, grace_s=300.0))
    with caplog.at_level(logging.WARNING):
        r = build_replay(settings, db, seed=0)
    try:
        assert r.store.timer(old).status == "dropped" and "grace 300 s" in r.store.timer(old).note
        assert "dropped" in caplog.text
        r.controller.pump()
        assert r.store.timer(late).status == "done" and relay(r)
    finally:
        r.close()


@pytest.mark.slow
def test_a_timer_survives_kill_9_and_runs_at_the_restart(tmp_path):
    state = tmp_path / "state"
    config = text_service_config(tmp_path / "config.toml", state)
    db = state / "edge-plm.db"
    with notified_service(config, tmp_path / "notify.sock") as (proc, sock):
        assert sock.recv(64) == b"READY=1"
        proc.stdin.write("turn on the light in five seconds\n")
        proc.stdin.flush()
        rows = _wait_rows(db, "SELECT id, status, due_ts FROM timers", 120)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    [(tid, status, due)] = rows
    assert status == "pending"
    time.sleep(max(0.0, due - time.time()) + 1.0)  # off past its time, within the grace window
    with notified_service(config, tmp_path / "notify2.sock") as (proc, sock):
        assert sock.recv(64) == b"READY=1"
        done = _wait_rows(db, "SELECT id, status FROM timers WHERE status != 'pending'", 60)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert done == [(tid, "done")], out + err
    assert f"timer {tid} ran: ON" in out


def _wait_rows(db: Path, sql: str, timeout_s: float) -> list[tuple]:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if db.exists():
            with sqlite3.connect(db) as conn:
                try:
                    rows = conn.execute(sql).fetchall()
                except sqlite3.OperationalError:  # the schema is still being made
                    rows = []
            if rows:
                return rows
        time.sleep(0.2)
    raise AssertionError(f"no rows for {sql!r} within {timeout_s} s")


# --- replayed sessions with timed lines ---------------------------------------------------
def _session(tmp_path, rows) -> Path:
    import json  # noqa: PLC0415

    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_timed_session_acts_at_the_wished_times(tmp_path):
    from edge_plm.loop.replay import read_session, run_session  # noqa: PLC0415

    lines = read_session(_session(tmp_path, [
        {"text": "turn off the lights in twenty minutes", "label": "OFF", "delay": 1200},
        {"text": "turn on the lights", "label": "ON"},
        {"text": "turn the lamp off in five minutes", "label": "OFF", "delay": 300},
        {"text": "turn on the lights for ten minutes", "label": "ON", "for": 600},
        {"text": "what time is it", "label": "NOOP"}]))
    r = build_replay(Settings(), None, seed=0)
    try:
        s = run_session(lines, r.controller, r.clock).summary()
    finally:
        r.close()
    assert {k: s[k] for k in ("timed_lines", "timers_set", "timed_right", "acted_at_wrong_time",
                              "timed_missed")} == {"timed_lines": 3, "timers_set": 3,
                                                   "timed_right": 3, "acted_at_wrong_time": 0,
                                                   "timed_missed": 0}


def test_a_session_without_timed_lines_prints_the_old_keys(tmp_path):
    from edge_plm.loop.replay import read_session, run_session  # noqa: PLC0415

    lines = read_session(_session(tmp_path, [{"text": "turn on the lights", "label": "ON"}]))
    r = build_replay(Settings(), None, seed=0)
    try:
        s = run_session(lines, r.controller, r.clock).summary()
    finally:
        r.close()
    assert not {"timed_lines", "timers_set", "acted_at_wrong_time"} & set(s)


@pytest.mark.parametrize("row", [{"delay": -1}, {"for": "an hour"}, {"delay": 5, "for": 5}])
def test_bad_timing_is_refused(tmp_path, row):
    from edge_plm.loop.replay import SessionError, read_session  # noqa: PLC0415

    with pytest.raises(SessionError, match="s.jsonl:1"):
        read_session(_session(tmp_path, [{"text": "lights on", "label": "ON", **row}]))


# --- asks about timed commands ------------------------------------------------------------
@pytest.fixture
def asking(tmp_path):
    s = Settings()
    s = replace(s, policy=replace(s.policy, act_threshold=0.999, ask_threshold=0.3))
    r = build_replay(s, tmp_path / "edge-plm.db", seed=0)
    yield r
    r.close()


def _flip(r) -> None:
    c = r.controller
    switch = c.devices.switches[c.names[0]]
    flip_switch(switch, c.devices.factory.pin(switch.cfg.pin), r.clock)
    c.pump()


def test_an_ask_left_alone_sets_no_timer_and_teaches_no_noop(asking):
    c = asking.controller
    out = c.handle(text_utterance("turn on the lights in twenty minutes"))
    assert out.decision.value == "ask" and not c.store.timers()
    asking.clock.advance(60)
    c.pump()
    assert c.store.get(out.interaction_id).label is None and not c.store.timers() and not relay(asking)


def test_a_flip_on_an_ask_switches_now_and_sets_only_the_way_back(asking):
    c = asking.controller
    c.handle(text_utterance("turn on the lights in twenty minutes"))
    asking.clock.advance(1)
    _flip(asking)
    assert relay(asking) and not c.store.timers()  # "at": the hand switched, no timer
    asking.clock.advance(60)
    c.pump()
    c.handle(text_utterance("turn off the lights for ten minutes"))
    asking.clock.advance(1)
    _flip(asking)
    [back] = c.store.timers()
    assert not relay(asking) and (back.action, back.kind) == ("ON", "for")


def test_a_spoken_yes_to_an_at_ask_sets_the_timer_instead_of_switching():
    from edge_plm.decide.devices import DeviceResolution, Steps  # noqa: PLC0415
    from edge_plm.decide.policy import Action, Decision, LabelSource, Resolution, Step  # noqa: PLC0415
    from edge_plm.decide.when import read_time  # noqa: PLC0415
    from edge_plm.learning.household import Household  # noqa: PLC0415
    from edge_plm.loop.timers import TimedCommands  # noqa: PLC0415

    class Store:
        def __init__(self):
            self.set = []

        def add_timer(self, *args):
            self.set.append(args)
            return len(self.set)

    store = Store()
    timed = TimedCommands(Settings(), store, None, Household.of_one(), clock=FakeClock(0.0),
                          wall=FakeClock(1000.0))
    slot = read_time("turn on the lights in twenty minutes", 1000.0)
    steps = Steps({"main": Step(Decision.ASK, None, True, 10.0, [])}, [])
    assert timed.hold(7, slot, steps) is steps and timed.holds_answer(7)
    yes = Resolution(7, Decision.ASK, Action.ON, LabelSource.SPOKEN, 5.0, "asked ON; person said yes")
    [out] = timed.resolved([DeviceResolution("main", yes)])
    assert out.resolution == yes
    assert store.set == [("main", "ON", "at", 2200.0, "turn on the lights in twenty minutes", 7)]
