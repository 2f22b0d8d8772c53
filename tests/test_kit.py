"""The test kit (tests/kit.py) and its rule: no test file defines a clock of its own."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from kit import EPOCH, PHRASES, FakeClock, make_replay, session

from edge_plm.decide.policy import Action, PolicyConfig

TESTS = Path(__file__).resolve().parent


def test_fake_clock_moves_only_when_told():
    clock = FakeClock()
    assert clock() == clock() == EPOCH
    clock.advance(2.5)
    assert clock() == EPOCH + 2.5
    clock.set(10.0)
    assert clock() == 10.0


def test_fake_clock_with_a_tick_steps_at_every_read():
    clock = FakeClock(100.0, tick=1.0)
    assert [clock(), clock(), clock()] == [101.0, 102.0, 103.0]
    clock.advance(10)
    assert clock() == 114.0


def test_phrases_take_turns_on_off_noop():
    assert [y for _, y in PHRASES[:3]] == ["ON", "OFF", "NOOP"]
    assert all(PHRASES[i][1] == ["ON", "OFF", "NOOP"][i % 3] for i in range(len(PHRASES)))
    assert Counter(y for _, y in PHRASES) == {"ON": 3, "OFF": 3, "NOOP": 3}
    assert len({t for t, _ in PHRASES}) == len(PHRASES)


def test_session_lines_of_phrases():
    lines = session(PHRASES[:2] + [("hello", None)], repeat=2)
    assert [(line.text, line.wish) for line in lines] == [
        ("turn on the light", Action.ON), ("turn off the light", Action.OFF), ("hello", None)] * 2


def test_make_replay_applies_its_knobs(tmp_path):
    rep = make_replay(tmp_path / "a" / "edge-plm.db", start="empty", policy=PolicyConfig(act_threshold=0.9),
                      version_every=7, holdout_fraction=0.0)
    try:
        assert rep.controller.settings.model.start == "empty"
        assert rep.controller.settings.policy.act_threshold == 0.9
        assert rep.controller.learner.cfg.version_every == 7 and rep.controller.learner.cfg.holdout_fraction == 0.0
        assert rep.store.path == (tmp_path / "a" / "edge-plm.db").resolve()
    finally:
        rep.close()
    rep = make_replay(tmp_path / "b" / "edge-plm.db", holdout_min=3)  # learner knobs: no version unless asked
    try:
        assert rep.controller.learner.cfg.version_every == 1000
    finally:
        rep.close()


def test_no_test_file_defines_its_own_clock():
    """One fake clock for every test (kit.FakeClock): no Clock classes, no lambda clocks."""
    own = re.compile(r"^class \w*Clock\b|(clock|wall|now)\s*=\s*lambda", re.M)
    offenders = [p.name for p in sorted(TESTS.rglob("*.py"))
                 if p.name != "kit.py" and p.name != Path(__file__).name and own.search(p.read_text())]
    assert offenders == []
