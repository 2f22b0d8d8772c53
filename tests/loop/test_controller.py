"""The loop on real components: SQLite, pocketsphinx, the SwitchModel, gpiozero MockFactory."""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from edge_plm.device import MAIN_RELAY
from edge_plm.loop.controller import InputFailure, text_utterance, wav_inputs

from edge_plm.loop.replay import SessionLine, read_session, run_session
from edge_plm.decide.policy import Action
from edge_plm.loop.simulation import SimulatedPerson
from edge_plm.config.settings import PolicyConfig, Settings
from edge_plm.voice.asr import PocketSphinxASR
from edge_plm.voice.audio import Utterance, write_wav
from kit import make_replay

DEMO = Path(__file__).resolve().parents[2] / "edge_plm" / "data" / "demo"
ON, OFF = "turn on the light", "turn off the light"


def make(tmp_path, policy: PolicyConfig | None = None, asr=None, keep_audio=False, **lcfg):
    settings = Settings()
    settings = replace(settings, paths=replace(settings.paths, keep_audio=keep_audio,
                                               audio_dir=str(tmp_path / "audio")))
    return make_replay(tmp_path / "db" / "edge-plm.db", settings=settings, policy=policy, asr=asr,
                       version_every=lcfg.pop("version_every", 1000), **lcfg)


def teach(replay, n: int = 6) -> None:
    """Pre-train the live model on an easy pattern so its predictions are known."""
    for _ in range(n):
        for text, label in ((ON, "ON"), (OFF, "OFF"), ("what time is it", "NOOP")):
            replay.controller.learner.model.learn(text, label)


def flip(replay) -> None:
    """The person moves their (mock) toggle switch once."""
    pin = replay.controller.devices.factory.pin(replay.controller.devices.switches[MAIN_RELAY].cfg.pin)
    pin.drive_low() if pin.state else pin.drive_high()


def say(replay, text: str):
    return replay.controller.handle(text_utterance(text))


def row(replay, iid):
    return replay.store.get(iid)


# --- end to end with audio ------------------------------------------------------------------
def test_wav_session_end_to_end(tmp_path):
    lines = read_session(DEMO / "session.jsonl")[:6]
    replay = make(tmp_path, asr=PocketSphinxASR(adapt_cmn=False))
    try:
        result = run_session(lines, replay.controller, replay.clock,
                             endpointer=replay.endpointer)
        rows = replay.store.interactions(oldest_first=True)
        assert len(rows) == 6 and len(result.lines) == 6
        for line, r, res in zip(lines, rows, result.lines):
            assert r.asr_backend == "pocketsphinx" and r.error is None
            assert r.transcript and r.prediction in ("ON", "OFF", "NOOP")
            assert r.decision in ("act", "ask", "ignore")
            for col in ("latency_audio_ms", "latency_asr_ms", "latency_model_ms",
                        "latency_actuator_ms", "latency_total_ms"):
                assert getattr(r, col) is not None and getattr(r, col) >= 0
            assert r.latency_total_ms >= r.latency_asr_ms
            # the relay ends where the person wanted it (device or person's flip)
            want = SimulatedPerson.wanted_state(line.wish, res.relay_before)
            assert res.relay_final == want
            assert r.audio_path is None  # privacy default: audio not kept
        assert result.labels == replay.store.count(labeled=True) > 0
    finally:
        replay.close()


def test_bad_inputs_are_stored_with_an_error_and_the_loop_continues(tmp_path, caplog):
    bad = tmp_path / "corrupt.wav"
    bad.write_bytes(b"RIFF\x10\x00\x00\x00WAVEfmt garbage")
    silent = tmp_path / "silent.wav"
    write_wav(silent, np.zeros(16000, dtype=np.int16))
    good = DEMO / "turn-on-the-light.slt.wav"
    replay = make(tmp_path, asr=PocketSphinxASR(adapt_cmn=False))
    try:
        items = list(wav_inputs([bad, silent], replay.endpointer))
        assert isinstance(items[0], InputFailure)
        wrong_rate = Utterance(samples=np.ones(800, dtype=np.int16), sample_rate=8000,
                               source="wav", path="x.wav")
        source = [*items, wrong_rate, text_utterance("   "),
                  *wav_inputs([good], replay.endpointer)]
        assert replay.controller.run(source) == 5
        rows = replay.store.interactions(oldest_first=True)
        assert len(rows) == 5
        assert rows[0].error.startswith(f"{bad}: corrupt or truncated WAV file (")  # the file and why
        assert rows[1].error.startswith("empty utterance")
        assert rows[2].error.startswith("ASR error")
        assert rows[3].error == "empty transcript"
        assert all(r.decision is None and r.latency_total_ms is not None for r in rows[:4])
        # the stages each input reached: reading it, then the ASR for the last two; never the model
        stages = [(r.latency_audio_ms is not None, r.latency_asr_ms is not None,
                   r.latency_model_ms is not None, r.latency_actuator_ms is not None) for r in rows[:4]]
        assert stages == [(True, False, False, False), (True, False, False, False),
                          (True, True, False, False), (True, True, False, False)]
        assert all(r.latency_total_ms >= r.latency_audio_ms for r in rows[:4])
        assert rows[4].error is None and rows[4].transcript  # the loop went on
        assert sum(r.levelname == "ERROR" for r in caplog.records) >= 4
    finally:
        replay.close()


def test_an_unexpected_error_in_one_input_is_stored_and_the_loop_continues(tmp_path, monkeypatch,
                                                                          caplog):
    replay = make(tmp_path)
    try:
        def broken_predict(text):
            raise RuntimeError("injected bug")

        monkeypatch.setattr(replay.controller.worker, "predict_all", broken_predict)
        out = say(replay, ON)
        assert out.error == "internal error: RuntimeError: injected bug" and out.decision is None
        monkeypatch.undo()
        assert say(replay, ON).error is None  # the loop went on
        bad, good = replay.store.interactions(oldest_first=True)
        assert bad.error == out.error and bad.transcript == "" and bad.decision is None
        assert (bad.latency_audio_ms, bad.latency_asr_ms, bad.latency_model_ms,
                bad.latency_actuator_ms) == (None, None, None, None)  # only the total is known
        assert bad.latency_total_ms is not None and good.decision is not None
        assert any("interaction failed unexpectedly" in r.getMessage() for r in caplog.records)
    finally:
        replay.close()


# --- every label path -----------------------------------------------------------------------
ASK = PolicyConfig(act_threshold=1.0, ask_threshold=0.0)  # always ask
ACT = PolicyConfig(act_threshold=0.0, ask_threshold=0.0)  # act on any ON/OFF prediction
IGNORE = PolicyConfig(act_threshold=1.0, ask_threshold=1.0)  # c < 1: always ignore


def run_case(tmp_path, policy, text, flip_after=None, before_on=False, refuse=False):
    replay = make(tmp_path, policy=policy)
    try:
        teach(replay)
        c = replay.controller
        replay.clock.advance(100.0)
        if before_on:
            c.devices.relays[MAIN_RELAY].set(True, replay.clock())
            replay.clock.advance(0.1 if refuse else 5.0)
        out = say(replay, text)
        led_during = c.devices.led.asking
        if flip_after is not None:
            replay.clock.advance(flip_after)
            flip(replay)
            c.pump()
        replay.clock.advance(30.0)
        c.pump()
        r = row(replay, out.interaction_id)
        return out, r, led_during, c.devices.relays[MAIN_RELAY].is_on, c.devices.led.asking
    finally:
        replay.close()


@pytest.mark.parametrize("case, kwargs, expected", [
    ("asked, flip", dict(policy=ASK, text=ON, flip_after=1.0), ("ask", "ON", "asked")),
    ("asked, no flip", dict(policy=ASK, text=ON), ("ask", "NOOP", "asked")),
    # unsure of the state the relay already has: no question, no LED (no spoken answers here)
    ("not asked about the state it has", dict(policy=ASK, text=ON, before_on=True),
     ("ignore", None, None)),
    ("not asked about the state it has, flip", dict(policy=ASK, text=ON, before_on=True, flip_after=1.0),
     ("ignore", "OFF", "manual")),
    ("acted, reverted", dict(policy=ACT, text=ON, flip_after=2.0), ("act", "NOOP", "override")),
    ("acted, already there, flipped", dict(policy=ACT, text=ON, before_on=True, flip_after=2.0),
     ("act", "OFF", "override")),
    ("acted, left alone", dict(policy=ACT, text=OFF, before_on=True), ("act", "OFF", "confirmed")),
    ("act refused, flip", dict(policy=ACT, text=OFF, before_on=True, refuse=True, flip_after=2.0),
     ("act", "OFF", "manual")),
    ("act refused, no flip", dict(policy=ACT, text=OFF, before_on=True, refuse=True),
     ("act", None, None)),
    ("ignored, flip", dict(policy=IGNORE, text=ON, flip_after=2.0), ("ignore", "ON", "manual")),
    ("ignored, no flip", dict(policy=IGNORE, text=ON), ("ignore", "NOOP", "confirmed")),
    # "off" while off, left alone: the model gave OFF (the relay's state) a high probability,
    # so "no flip" cannot tell "yes, off" from NOOP: no label (policy.ambiguity_floor)
    ("ignored, no flip, wish may be the relay's state", dict(policy=IGNORE, text=OFF),
     ("ignore", None, None)),
])
def test_label_paths(tmp_path, case, kwargs, expected):
    out, r, led_during, relay_on, led_after = run_case(tmp_path, **kwargs)
    decision, label, source = expected
    assert (r.decision, r.label, r.label_source) == expected, case
    assert r.transcript == kwargs["text"]
    assert led_during == (decision == "ask") and not led_after
    assert (r.label_ts is not None) == (label is not None)
    if case == "acted, left alone":
        assert r.action == "OFF" and relay_on is False
    if case == "act refused, no flip":
        assert r.action is None and relay_on is True
    if case == "asked, flip":
        assert relay_on is True  # the person's switch drives the relay


def test_policy_gets_the_model_distribution(tmp_path):
    replay = make(tmp_path, policy=ASK)
    try:
        teach(replay)
        out = say(replay, "what time is it")
        stored = row(replay, out.interaction_id).distribution
        got = replay.controller.policy.open.prediction.distribution
        assert {a.value: v for a, v in got.items()} == pytest.approx(stored)
        assert set(stored) == {"ON", "OFF", "NOOP"}
    finally:
        replay.close()


def test_superseded_interaction_gets_no_label_and_labels_reach_the_learner(tmp_path):
    replay = make(tmp_path, policy=ACT, holdout_fraction=0.0, version_every=2)
    try:
        teach(replay)
        c = replay.controller
        replay.clock.advance(100.0)
        first = say(replay, ON)
        replay.clock.advance(2.0)
        second = say(replay, OFF)  # within the first one's window
        replay.clock.advance(30.0)
        third = say(replay, ON)
        replay.clock.advance(30.0)
        c.pump()
        labels = [row(replay, o.interaction_id).label for o in (first, second, third)]
        assert labels == [None, "OFF", "ON"]
        n_taught = 18
        assert len(c.learner.model.examples) == n_taught + 2
        assert [v.status for v in replay.store.model_versions()] == ["active"]
        assert row(replay, third.interaction_id).model_version is None
        fourth = say(replay, OFF)
        assert row(replay, fourth.interaction_id).model_version == "v0001"
    finally:
        replay.close()


def test_holdout_labels_are_marked_and_keep_their_transcript(tmp_path):
    replay = make(tmp_path, policy=ACT, holdout_fraction=0.5)
    try:
        teach(replay)
        for i in range(8):  # alternate, so every act changes the relay (and gets a label)
            replay.clock.advance(30.0)
            say(replay, ON if i % 2 == 0 else OFF)
        replay.clock.advance(30.0)
        replay.controller.pump()
        rows = replay.store.interactions(labeled=True)
        assert any(r.holdout for r in rows) and not all(r.holdout for r in rows)
        assert all(r.transcript in (ON, OFF) for r in rows)
    finally:
        replay.close()


def test_stop_returns_the_relay_to_its_safe_state(tmp_path):
    replay = make(tmp_path, policy=ACT)
    teach(replay)
    c = replay.controller
    replay.clock.advance(100.0)
    say(replay, ON)
    assert c.devices.relays[MAIN_RELAY].is_on
    pin = c.devices.factory.pin(c.settings.gpio.relay_pin)
    replay.close()
    assert c.devices.relays[MAIN_RELAY].closed and pin.state is False


def test_keep_audio_writes_private_files(tmp_path):
    os.umask(0o022)
    replay = make(tmp_path, asr=PocketSphinxASR(adapt_cmn=False), keep_audio=True)
    try:
        src = tmp_path / "in.wav"
        shutil.copy(DEMO / "lights-on-please.slt.wav", src)
        out = replay.controller.handle(next(wav_inputs([src], replay.endpointer)))
        path = Path(row(replay, out.interaction_id).audio_path)
        assert path.is_file() and stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    finally:
        replay.close()


def test_session_summary_counts(tmp_path):
    lines = [SessionLine(Action("ON"), ON), SessionLine(Action("NOOP"), "what time is it"),
             SessionLine(Action("OFF"), OFF), SessionLine(Action("OFF"), OFF)] * 6  # the 2nd OFF: already off
    replay = make(tmp_path)
    try:
        result = run_session(lines, replay.controller, replay.clock)
    finally:
        replay.close()
    s = result.summary()
    assert s["interactions"] == 24
    assert s["asked"] + s["acted"] + sum(r.outcome.decision.value == "ignore"
                                         for r in result.lines) == 24
    assert s["missed"] == sum(r.wish.value != "NOOP" and r.outcome.decision.value == "ignore"
                              for r in result.lines)
    for r in result.lines:  # "already as wished": the relay was in the wished state before
        assert r.already_so == (r.wish.value != "NOOP" and r.relay_before == (r.wish.value == "ON"))
        assert r.missed_already_so == (r.missed and r.already_so)
    assert sum(r.already_so for r in result.lines) >= 6  # OFF wishes said with the lamp off
    assert 0 <= s["acted_wrong"] <= s["acted"]
    parts = result.parts(4)
    assert sum(p["lines"] for p in parts) == 24
    assert all(r.relay_final == SimulatedPerson.wanted_state(r.wish, r.relay_before)
               for r in result.lines)


def test_a_wording_left_alone_with_the_relay_off_and_on_is_learned_as_no_command(tmp_path):
    """Through the loop: a wording the model reads as ON or OFF (taught both) and never as NOOP
    is left alone with the relay off (no label: "off or nothing"), then with it on: "on or
    nothing" too, so it is stored and learned as NOOP (policy: `LeftAlone`)."""
    replay = make(tmp_path, policy=IGNORE)
    try:
        teach(replay)
        model = replay.controller.learner.model
        for label in ("ON", "OFF", "ON", "OFF"):
            model.learn("toggle the light", label)
        c = replay.controller
        replay.clock.advance(100.0)
        first = say(replay, "toggle the light")
        replay.clock.advance(30.0)
        c.pump()
        assert row(replay, first.interaction_id).label is None
        c.devices.relays[MAIN_RELAY].set(True, replay.clock())
        replay.clock.advance(5.0)
        second = say(replay, "Toggle the light")
        replay.clock.advance(30.0)
        c.pump()
        r = row(replay, second.interaction_id)
        assert (r.label, r.label_source) == ("NOOP", "confirmed")
        assert row(replay, first.interaction_id).label is None  # the first stays as it was
        assert c.devices.relays[MAIN_RELAY].is_on is True
    finally:
        replay.close()
