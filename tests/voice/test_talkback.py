"""Talk-back on real components: espeak-ng speech, pocketsphinx hearing the answers, SQLite,
gpiozero MockFactory. The piper backend is the one mock (no piper voice exists here)."""

from __future__ import annotations

import sqlite3
import sys
import types
from dataclasses import replace

import numpy as np
import pytest
import sqlite_utils

from edge_plm.device import MAIN_RELAY
from edge_plm.loop.controller import text_utterance
from edge_plm.decide.policy import Action, Decision, LabelSource, Policy, Prediction
from edge_plm.loop.replay import (SessionError, SpokenAnswers, build_replay, read_session, run_session,
                             spoken_input)
from edge_plm.config.settings import ConfigError, PolicyConfig, Settings, parse
from edge_plm.store import SCHEMA_VERSION, ReplayStore
from edge_plm.store.schema import migrate
from edge_plm.voice.talkback import Talkback, confirmation_text, prompt_text
from edge_plm.voice.answers import GrammarAnswers, answer_jsgf, classify_answer, stated_state
from edge_plm.voice.asr import PocketSphinxASR
from edge_plm.voice.echo import EchoGuard
from edge_plm.voice.speech import (EspeakSpeech, NoSpeech, NullPlayer, PiperSpeech, PromptCache,
                                   SpeechError, make_speech)

ASK_ALL = PolicyConfig(act_threshold=1.0, ask_threshold=0.0)  # every ON/OFF prediction asks


# --- what is said ------------------------------------------------------------------------------
def test_prompt_names_the_action_and_the_device_when_given():
    assert prompt_text("ON") == "On?" and prompt_text("OFF", None) == "Off?"
    assert prompt_text("ON", "lamp") == "Lamp on?" and prompt_text("OFF", "Fan") == "Fan off?"
    assert confirmation_text("ON", "lamp") == "Lamp on."
    with pytest.raises(KeyError):
        prompt_text("NOOP")


@pytest.mark.parametrize("text,asked,expected", [
    ("yes", "ON", True), ("yeah", "ON", True), ("do it", "OFF", True), ("on", "ON", True),
    ("yes please", "ON", True), ("sure", None, True), ("off", "OFF", True),
    ("no", "ON", False), ("leave it", "ON", False), ("off", "ON", False), ("nope", None, False),
    ("on", "OFF", False), ("no thanks", "OFF", False),
    ("", "ON", None), ("what time is it", "ON", None), ("yes no", "ON", None),
    ("no on", "ON", None), ("yes and turn on the fan too", "ON", None), ("the", "ON", None),
])
def test_answer_classifier(text, asked, expected):
    assert classify_answer(text, asked) is expected


# --- speech output -----------------------------------------------------------------------------
def test_espeak_synthesises_16k_int16_and_the_cache_synthesises_once(tmp_path):
    speech = EspeakSpeech("en-us", 175)
    cache = PromptCache(speech, tmp_path / "prompts")
    a = cache.get("On?")
    assert a.dtype == np.int16 and 0.2 < len(a) / 16000 < 2.0 and np.abs(a).max() > 1000
    assert cache.get("On?") is a and cache.hits == 1 and len(cache.cold_ms) == 1
    again = PromptCache(speech, tmp_path / "prompts")  # a restart: read from the state dir
    assert np.array_equal(again.get("On?"), a) and again.cold_ms == []
    other = PromptCache(EspeakSpeech("en-gb", 175), tmp_path / "prompts")
    other.get("On?")
    assert len(other.cold_ms) == 1  # another voice is another prompt


def test_speech_backends_and_their_errors(tmp_path):
    assert len(NoSpeech().synthesize("On?")) == 0 and make_speech("none").name == "none"
    with pytest.raises(SpeechError, match="unknown speech backend"):
        make_speech("festival")
    with pytest.raises(SpeechError, match="empty text"):
        EspeakSpeech().synthesize("  ")
    with pytest.raises(SpeechError, match="not found on PATH"):
        EspeakSpeech(program="no-such-espeak")
    with pytest.raises(SpeechError, match="voice model not found"):
        PiperSpeech(tmp_path / "missing.onnx")


def test_piper_backend_with_a_mock_voice(tmp_path, monkeypatch):
    """The only mock: piper-tts and a voice model are not installed here."""
    model = tmp_path / "voice.onnx"
    model.write_bytes(b"not a real model")

    class Chunk:
        def __init__(self, audio, rate):
            self.audio_int16_bytes, self.sample_rate = audio.tobytes(), rate

    class Voice:
        @staticmethod
        def load(path):
            assert path == str(model)
            return Voice()

        def synthesize(self, text):
            tone = (8000 * np.sin(np.arange(22050) / 22050 * 2 * np.pi * 440)).astype(np.int16)
            yield Chunk(tone[:11025], 22050)
            yield Chunk(tone[11025:], 22050)

    monkeypatch.setitem(sys.modules, "piper", types.SimpleNamespace(PiperVoice=Voice))
    out = make_speech("piper", piper_model=str(model)).synthesize("On?")
    assert out.dtype == np.int16 and abs(len(out) - 16000) <= 2  # 1 s at 22.05 kHz -> 16 kHz


def test_talkback_settings_section():
    s = parse('[talkback]\nenabled = true\nbackend = "none"\necho_guard_ms = 300\n')
    assert s.talkback.enabled and s.talkback.backend == "none" and s.talkback.echo_guard_ms == 300
    assert not Settings().talkback.enabled  # off by default
    with pytest.raises(ConfigError, match="talkback.backend must be one of"):
        parse('[talkback]\nbackend = "festival"\n')
    with pytest.raises(ConfigError, match="talkback.piper_model"):
        parse('[talkback]\nbackend = "piper"\n')


# --- the policy's rule -------------------------------------------------------------------------
def _asked(relay_on=False, action=Action.ON, dist=None):
    p = Policy(PolicyConfig(), spoken_answers=True)  # talk-back on: asks the relay's own state too
    pred = Prediction(action, 0.5, dist or {Action.ON: 0.5, Action.OFF: 0.1, Action.NOOP: 0.4})
    step = p.on_utterance(1, pred, relay_on, 0.0)
    assert step.decision is Decision.ASK
    return p


def test_a_spoken_yes_labels_the_asked_action_when_the_window_ends():
    p = _asked()
    assert p.on_answer(True, 2.0) == []
    (r,) = p.tick(100.0)
    assert (r.label, r.source, r.ts) == (Action.ON, LabelSource.SPOKEN, 2.0)


def test_a_spoken_no_labels_noop_by_the_no_flip_rule():
    p = _asked()
    p.on_answer(False, 2.0)
    (r,) = p.tick(100.0)
    assert (r.label, r.source) == (Action.NOOP, LabelSource.SPOKEN)  # p(OFF)=0.1 < floor
    p = _asked(dist={Action.ON: 0.5, Action.OFF: 0.45, Action.NOOP: 0.05})
    p.on_answer(False, 2.0)
    assert p.tick(100.0)[0].label is None  # "no" cannot tell OFF from NOOP here
    p = _asked(relay_on=True)  # asked ON while on; no + no flip: not a command
    p.on_answer(False, 2.0)
    assert p.tick(100.0)[0].label is Action.NOOP


def test_a_bare_no_never_teaches_not_a_command_when_the_other_state_is_the_runner_up():
    """Asked "On?" with the light off, the person who wanted it OFF says "no": OFF (as it is) or
    not a command. With OFF the model's runner-up a no gives no label (it used to be NOOP when
    p(OFF) was under the ambiguity floor: an OFF command learned as "not a command")."""
    p = _asked(dist={Action.ON: 0.75, Action.OFF: 0.15, Action.NOOP: 0.10})
    p.on_answer(False, 2.0)
    (r,) = p.tick(100.0)
    assert (r.label, r.source) == (None, None) and "no label" in r.reason
    p = _asked(dist={Action.ON: 0.75, Action.OFF: 0.10, Action.NOOP: 0.15})  # NOOP the runner-up
    p.on_answer(False, 2.0)
    assert p.tick(100.0)[0].label is Action.NOOP


def test_an_answer_naming_the_other_state_labels_that_state():
    assert [stated_state(t) for t in ("off", "no, off", "yes on", "no", "on and off", "")] == \
        ["OFF", "OFF", "ON", None, None, None]
    p = _asked(dist={Action.ON: 0.75, Action.OFF: 0.05, Action.NOOP: 0.20})
    p.on_answer(False, 2.0, said=Action.OFF)  # "off" to "On?"
    (r,) = p.tick(100.0)
    assert (r.label, r.source, r.ts) == (Action.OFF, LabelSource.SPOKEN, 2.0)


def test_the_switch_wins_over_a_spoken_answer_and_answers_need_an_open_ask():
    p = _asked()
    p.on_answer(True, 1.0)
    (r,) = p.on_flip(False, 3.0)
    assert (r.label, r.source) == (Action.OFF, LabelSource.ASKED)
    p = Policy(PolicyConfig())
    assert p.on_answer(True, 1.0) == []  # nothing open: labels nothing
    p.on_utterance(2, Prediction(Action.ON, 0.95), False, 0.0)  # an ACT is not answered
    p.on_answer(False, 1.0)
    assert p.open.answer is None
    p = _asked()
    p.on_answer(True, 1.0)
    closed = p.on_utterance(3, Prediction(Action.NOOP, 0.9), False, 4.0).closed
    assert [(r.key, r.label, r.source) for r in closed] == [(1, Action.ON, LabelSource.SPOKEN)]


# --- the loop ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sphinx():
    return PocketSphinxASR(adapt_cmn=False)


@pytest.fixture()
def loop(tmp_path, sphinx):
    s = replace(Settings(), policy=ASK_ALL)
    r = build_replay(s, tmp_path / "edge-plm.db", asr=sphinx, talkback=True)
    yield r
    r.close()


def _ask(loop, text="turn on the light"):
    out = loop.controller.handle(text_utterance(text))
    assert out.decision is Decision.ASK
    return out


def test_the_question_is_spoken_from_the_cache(loop):
    tb = loop.controller.talkback
    _ask(loop)
    assert tb.asks == 1 and len(tb.player.played) == 1 and tb.cache.hits >= 1
    assert np.array_equal(tb.player.played[0], tb.cache.get(prompt_text("ON")))


def test_own_voice_gives_no_interaction_and_no_label(loop):
    """Echo test: the device's own prompts, fed into the audio source while it speaks and in
    the guard after, are dropped: no row, no label, no answer."""
    c, tb = loop.controller, loop.controller.talkback
    first = _ask(loop)
    rows = loop.store.count()
    prompts = [tb.cache.get(prompt_text(a)) for a in ("ON", "OFF")] + list(tb.player.played)
    for samples in prompts:
        utt = spoken_input(samples, loop.endpointer, c.asr)
        loop.clock.set(tb.guard.quiet_at() - 0.05)  # heard as the guard ends
        out = c.handle(utt)
        assert out.error == "own voice: dropped" and out.interaction_id is None
    assert tb.dropped == len(prompts) and loop.store.count() == rows
    assert c.policy.open.key == first.interaction_id and c.policy.open.answer is None
    loop.clock.advance(60.0)
    c.pump()
    assert all(row.label_source != "spoken" for row in loop.store.interactions())


def _answer(loop, yes: bool):
    c, tb = loop.controller, loop.controller.talkback
    utt = spoken_input(SpokenAnswers()(yes, 0), loop.endpointer, c.asr)
    loop.clock.set(tb.guard.quiet_at() + 0.5 + utt.duration_ms / 1000 + utt.tail_ms / 1000)
    return c.handle(utt)


def test_a_spoken_yes_through_the_loop_switches_and_labels(loop):
    asked = _ask(loop)
    out = _answer(loop, True)
    assert out.answer is True and out.action is Action.ON and loop.controller.devices.relays[MAIN_RELAY].is_on
    assert not loop.controller.devices.led.asking
    loop.clock.advance(60.0)
    loop.controller.pump()
    row = loop.store.get(asked.interaction_id)
    assert (row.label, row.label_source, row.action) == ("ON", "spoken", "ON")
    assert loop.store.count() == 1  # the answer is not an interaction of its own


def test_a_spoken_no_through_the_loop_leaves_the_relay(loop):
    asked = _ask(loop)
    out = _answer(loop, False)
    assert out.answer is False and out.action is None and not loop.controller.devices.relays[MAIN_RELAY].is_on
    loop.clock.advance(60.0)
    loop.controller.pump()
    row = loop.store.get(asked.interaction_id)
    assert row.label_source in ("spoken", None) and row.label != "ON"


def test_off_to_on_through_the_loop_switches_off_and_labels_off(loop):
    c = loop.controller
    c.devices.drive("ON", MAIN_RELAY, now=loop.clock())  # the light is on; "turn on the light" is asked
    loop.clock.advance(30.0)
    asked = _ask(loop)
    out = c.handle(text_utterance("no off"))
    assert out.answer is False and out.action is Action.OFF and not c.devices.relays[MAIN_RELAY].is_on
    loop.clock.advance(60.0)
    c.pump()
    row = loop.store.get(asked.interaction_id)
    assert (row.label, row.label_source, row.action) == ("OFF", "spoken", "OFF")


def test_chatter_with_yes_or_no_outside_an_ask_window_is_never_a_spoken_label(loop):
    c = loop.controller
    for text in ("yes please", "no", "yeah do it"):  # no ask open
        out = c.handle(text_utterance(text))
        assert out.answer is None and out.interaction_id is not None
        loop.clock.advance(30.0)
    _ask(loop)
    loop.clock.advance(PolicyConfig().ask_window_s + 1.0)  # the window has ended
    out = c.handle(text_utterance("yes"))
    assert out.answer is None and out.action is None and not c.devices.relays[MAIN_RELAY].is_on
    loop.clock.advance(30.0)
    c.pump()
    assert all(row.label_source != "spoken" for row in loop.store.interactions())
    assert all(row.label in (None, "NOOP") for row in loop.store.interactions()
               if row.transcript in ("yes please", "no", "yeah do it", "yes"))


def test_talkback_off_does_not_answer(tmp_path):
    r = build_replay(replace(Settings(), policy=ASK_ALL), tmp_path / "e.db")
    try:
        assert r.controller.talkback is None
        _ask(r)
        out = r.controller.handle(text_utterance("yes"))
        assert out.answer is None and out.decision is not None  # an ordinary utterance
    finally:
        r.close()


def test_echo_guard_intervals():
    g = EchoGuard(0.5)
    g.speaking(10.0, 1.0)
    assert g.quiet_at() == 11.5
    assert g.is_echo(9.0, 10.1) and g.is_echo(11.4, 12.0) and not g.is_echo(11.6, 13.0)
    assert not g.is_echo(8.0, 9.9) and g.dropped == 2
    with pytest.raises(ValueError):
        EchoGuard(-1)


# --- replays -------------------------------------------------------------------------------------
def test_session_lines_say_how_the_person_answers(tmp_path, sphinx):
    path = tmp_path / "s.jsonl"
    path.write_text('{"text": "turn on the light", "label": "ON", "answer": "voice"}\n'
                    '{"text": "what time is it", "label": "NOOP", "answer": "voice"}\n'
                    '{"text": "turn off the light", "label": "OFF"}\n')
    lines = read_session(path)
    assert [x.answer for x in lines] == ["voice", "voice", None]
    r = build_replay(replace(Settings(), policy=ASK_ALL), tmp_path / "e.db", asr=sphinx,
                     talkback=True)
    try:
        res = run_session(lines, r.controller, r.clock, endpointer=r.endpointer)
    finally:
        r.close()
    s = res.summary()
    assert s["spoken_answers"] == s["asked"] - 1 and s["answer_errors"] == 0
    assert res.lines[0].relay_final is True and res.lines[0].flips == 0  # the yes switched it
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "x", "label": "ON", "answer": "shout"}\n')
    with pytest.raises(SessionError, match='"answer" must be one of voice, switch'):
        read_session(bad)


def test_grammar_answers_hear_a_spoken_yes_and_do_not_trust_on_or_off():
    g = GrammarAnswers()
    assert g.classify(SpokenAnswers()(True, 0), "ON") is True
    assert classify_answer("it on", "ON", states=False) is None  # the grammar's "on": no vote
    assert "ok" not in answer_jsgf()
    assert g.words(np.zeros(16000, dtype=np.int16)) == ""


# --- the store -----------------------------------------------------------------------------------
def test_a_v4_database_migrates_to_the_spoken_label_source(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite_utils.Database(path)
    migrate(db, 4)
    db.execute("INSERT INTO interactions (ts, transcript) VALUES (1.0, 'a'), (2.0, 'b')")
    db.execute("DELETE FROM interactions WHERE id = 2")
    db.conn.commit()
    with pytest.raises(sqlite3.IntegrityError):
        db.execute("UPDATE interactions SET label = 'ON', label_source = 'spoken'")
    db.close()
    with ReplayStore(path) as store:
        assert store.stored_schema_version() == SCHEMA_VERSION
        store.set_label(1, "ON", "spoken")
        assert store.get(1).label_source == "spoken"
        assert store.add_interaction(ts=3.0, transcript="c") == 3  # ids are still not reused
        with pytest.raises(Exception):
            store.set_label(1, "ON", "shouted")


def test_talkback_without_an_output_device_plays_nothing():
    tb = Talkback(Settings().talkback, NoSpeech(), NullPlayer(), lambda: 0.0)
    assert tb.ask("ON") == 0.0 and tb.guard.quiet_at() is None


# --- doctor --------------------------------------------------------------------------------------
def test_doctor_checks_speech_only_when_talkback_is_on(tmp_path):
    from edge_plm.commands import doctor

    s = Settings()
    assert s.talkback.enabled is False
    s.talkback.enabled = True
    assert doctor.check_speech(s, which=lambda name: None).status == doctor.FAIL
    s.talkback.backend = "none"
    assert doctor.check_speech(s).status == doctor.OK
    s.talkback.backend = "piper"
    s.talkback.piper_model = str(tmp_path / "missing.onnx")
    assert doctor.check_speech(s).status == doctor.FAIL
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[paths]\nstate_dir = "{tmp_path}"\n[talkback]\nenabled = true\n')
    names = [c.name for c in doctor.run_checks(cfg).checks]
    assert names[:4] == ["config", "platform", "microphone", "speech"]
    cfg.write_text(f'[paths]\nstate_dir = "{tmp_path}"\n')
    assert "speech" not in [c.name for c in doctor.run_checks(cfg).checks]


def test_the_service_builds_talkback_only_when_on(tmp_path):
    from edge_plm.loop.service import CannotStart, _talkback

    s = Settings()
    s.paths.state_dir = str(tmp_path)
    assert _talkback(s) is None
    s.talkback.enabled = True
    tb = _talkback(s)  # no output device here: questions play nowhere, the loop still runs
    assert tb is not None and len(list((tmp_path / "prompts").glob("*.wav"))) == 2
    s.talkback.backend, s.talkback.piper_model = "piper", str(tmp_path / "missing.onnx")
    with pytest.raises(CannotStart, match="talk-back: piper voice model not found"):
        _talkback(s)


def test_confirmation_and_chime_are_settings_off_by_default():
    cfg = Settings().talkback
    assert (cfg.confirm, cfg.chime) == (False, False)
    speech = EspeakSpeech()
    tb = Talkback(cfg, speech, NullPlayer(), lambda: 0.0)
    assert tb.acted("ON") == 0.0 and tb.player.played == []
    tb = Talkback(replace(cfg, confirm=True), speech, NullPlayer(), lambda: 0.0)
    assert tb.acted("ON", "lamp") > 0.2
    assert np.array_equal(tb.player.played[0], tb.cache.get("Lamp on."))
    tb = Talkback(replace(cfg, chime=True, confirm=True), speech, NullPlayer(), lambda: 0.0)
    assert 0.1 <= tb.ask("OFF") <= 0.2 and tb.acted("OFF") <= 0.2 and tb.cache.cold_ms == []


def test_a_misheard_answer_keeps_the_ask_open_and_a_command_supersedes_it(loop):
    c = loop.controller
    asked = _ask(loop)
    rows = loop.store.count()
    out = c.handle(text_utterance("believe it"))  # "leave it", misheard: not an answer
    assert out.error == "unclear answer" and out.answer is None and loop.store.count() == rows
    assert c.policy.open.key == asked.interaction_id and c.talkback.unclear_answers == 1
    out = c.handle(text_utterance("please turn off the light in the kitchen now"))
    assert out.interaction_id != asked.interaction_id and loop.store.count() == rows + 1


def test_replay_cli_with_voice_answers_adds_its_keys(tmp_path):
    import json
    import subprocess

    rows = [{"text": "turn on the light", "label": "ON", "answer": "voice"},
            {"text": "what time is it", "label": "NOOP", "answer": "voice"}] * 3
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = subprocess.run([sys.executable, "-c", "from edge_plm.cli import main; main()", "replay",
                          str(path), "--json"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert {"spoken_answers", "answer_errors", "own_voice_dropped"} <= set(out)
    assert out["spoken_answers"] == out["asked"] and out["answer_errors"] <= out["spoken_answers"]


def test_with_several_devices_the_question_names_the_device_and_the_answer_is_for_it(tmp_path, sphinx):
    from edge_plm.config.settings import DeviceConfig

    devices = [DeviceConfig("lamp", ["light"], relay_pin=17, switch_pin=27),
               DeviceConfig("fan", [], relay_pin=23, switch_pin=24)]
    s = replace(Settings(devices=devices), policy=ASK_ALL)
    loop = build_replay(s, tmp_path / "edge-plm.db", asr=sphinx, talkback=True)
    try:
        c, tb = loop.controller, loop.controller.talkback
        asked = c.handle(text_utterance("turn on the fan"))
        assert asked.devices["fan"].decision is Decision.ASK
        assert asked.devices["lamp"].decision is not Decision.ASK
        assert np.array_equal(tb.player.played[-1], tb.cache.get(prompt_text("ON", "fan")))
        out = _answer(loop, True)
        assert out.answer is True and out.action is Action.ON
        assert c.devices.relays["fan"].is_on and not c.devices.relays["lamp"].is_on
        loop.clock.advance(60.0)
        c.pump()
        per = loop.store.device_outcomes([asked.interaction_id])[asked.interaction_id]
        assert (per["fan"].label, per["fan"].label_source, per["fan"].action) == ("ON", "spoken", "ON")
        assert per["lamp"].label == "NOOP"
    finally:
        loop.close()


def test_run_with_talkback_that_cannot_start_is_one_clean_error(tmp_path, monkeypatch):
    """Issue 27 item 14: talk-back on and its backend unusable (espeak-ng missing) is one
    `error:` line and exit 1, and the learner's thread never outlives the closed database
    (it printed `ProgrammingError: Cannot operate on a closed database`). The backend here
    fails after the learner's idle poll would have run."""
    import threading
    import time

    from _data_util import cli
    from edge_plm.voice import talkback as talkback_mod

    def slow_failure(*args, **kwargs):
        time.sleep(0.8)  # > the worker's idle poll (0.25 s)
        raise SpeechError("'espeak-ng' not found on PATH (Debian: apt-get install espeak-ng)")

    monkeypatch.setattr(talkback_mod, "make_talkback", slow_failure)
    hooked = []
    monkeypatch.setattr(threading, "excepthook", lambda args: hooked.append(args.exc_value))
    state = tmp_path / "state"
    config = tmp_path / "c.toml"
    config.write_text(f'[paths]\nstate_dir = "{state}"\n[talkback]\nenabled = true\n[audio]\n'
                      'source = "text"\n[gpio]\npin_factory = "mock"\n')
    before = set(threading.enumerate())
    r = cli("run", "--config", config, input="turn on the light\n")
    time.sleep(0.6)
    assert r.exit_code == 1
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: cannot start: talk-back: 'espeak-ng' not found on PATH (Debian: apt-get "
                      "install espeak-ng) (or set [talkback] enabled = false)"], r.stderr
    assert "Error" not in r.stderr.replace("SpeechError", ""), r.stderr
    assert hooked == []
    assert [t for t in threading.enumerate() if t not in before and t.is_alive()] == []


def test_a_replay_with_several_devices_answers_the_question_about_the_device_in_doubt(tmp_path, sphinx):
    """One session runner for one device and several: the simulated person answers by voice
    about the device the question is about, with their wish for that device."""
    from edge_plm.config.settings import DeviceConfig

    devices = [DeviceConfig("lamp", ["light"], relay_pin=17, switch_pin=27),
               DeviceConfig("fan", [], relay_pin=23, switch_pin=24)]
    path = tmp_path / "s.jsonl"
    path.write_text('{"text": "turn on the fan", "label": "ON", "device": "fan", "answer": "voice"}\n')
    r = build_replay(replace(Settings(devices=devices), policy=ASK_ALL), tmp_path / "e.db",
                     asr=sphinx, talkback=True)
    try:
        res = run_session(read_session(path), r.controller, r.clock, endpointer=r.endpointer)
        relays = {n: r.controller.devices.relays[n].is_on for n in ("lamp", "fan")}
    finally:
        r.close()
    s = res.summary()
    assert res.answers == [(0, True, True)] and s["spoken_answers"] == 1 and s["answer_errors"] == 0
    assert relays == {"lamp": False, "fan": True} and res.lines[0].flips == 0  # the yes switched it
    assert s["devices"]["fan"]["asked"] == 1 and s["acted_wrong_device"] == 0
