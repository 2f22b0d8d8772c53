"""Dimmers and questions through the real loop (text utterances on MockFactory pins with PWM,
the shipped kind head): a dim moves only the dimmer, a dim of a relay moves nothing, a question
is answered and moves no relay, a turn of the knob teaches, forget rebuilds the head, and a
household with relays only and questions off never loads the head."""

from __future__ import annotations

from dataclasses import replace

import pytest

from edge_plm.config.settings import DeviceConfig, Settings
from edge_plm.loop.controller import text_utterance
from edge_plm.loop.replay import build_replay, read_session, run_session
from edge_plm.loop.simulation import turn_knob
from edge_plm.switch.kinds import load_shipped

LAMP = DeviceConfig("lamp", ["light", "lights"], relay_pin=5, switch_pin=6, kind="dimmer",
                    encoder_pins=[13, 19])
FAN = DeviceConfig("fan", [], relay_pin=17, switch_pin=27)


def household(**kinds) -> Settings:
    s = Settings(devices=[LAMP, FAN])
    s.gpio.min_toggle_interval_ms = 0
    return replace(s, kinds=replace(s.kinds, **kinds)) if kinds else s


@pytest.fixture
def house(tmp_path):
    rep = build_replay(household(), tmp_path / "k.db", epoch=1.8e9)
    yield rep
    rep.close()


def say(rep, text: str):
    rep.clock.advance(30.0)
    rep.controller.pump()
    return rep.controller.handle(text_utterance(text))


def relays(rep) -> dict[str, bool]:
    return {n: r.is_on for n, r in rep.controller.devices.relays.items()}


def lamp(rep) -> float:
    return rep.controller.devices.dimmers["lamp"].level


def test_dim_and_brighten_move_the_dimmer_and_never_a_relay(house):
    devices = house.controller.devices
    devices.relays["fan"].set(True)
    devices.set_level("lamp", 1.0)
    out = say(house, "dim the lamp")
    assert lamp(house) == pytest.approx(0.75) and relays(house)["fan"] is True
    row = house.store.kind(out.interaction_id)
    assert (row.predicted, row.done, row.level_before, row.level_after) == ("DIM", "dimmed", 1.0, 0.75)
    assert house.store.get(out.interaction_id).decision == "ignore"  # the switch model held
    say(house, "make the lamp brighter")
    assert lamp(house) == pytest.approx(1.0) and relays(house)["fan"] is True
    say(house, "set the lamp to thirty percent")
    assert lamp(house) == pytest.approx(0.3)
    # the fan is a relay: a dim of it moves nothing (and the switch model does not switch it off)
    out = say(house, "brighten the fan")
    assert relays(house)["fan"] is True and lamp(house) == pytest.approx(0.3)
    assert house.store.kind(out.interaction_id).done == "held"
    # another thing named, no device: not the lamp ("turn up the heat a bit" is BRIGHTEN 0.97 to the head)
    out = say(house, "turn up the heat a bit")
    assert lamp(house) == pytest.approx(0.3) and house.store.kind(out.interaction_id) is None


def test_a_question_is_answered_on_the_led_and_moves_nothing(house):
    devices = house.controller.devices
    devices.relays["fan"].set(True)
    before = relays(house)
    out = say(house, "is the fan on")
    assert relays(house) == before and list(devices.led.shown) == [True]
    assert house.store.kind(out.interaction_id).done == "answered"
    say(house, "how far is the airport")  # chatter: not about the devices, not answered
    assert list(devices.led.shown) == [True] and relays(house) == before


def test_a_question_is_answered_aloud_with_talkback(tmp_path):
    rep = build_replay(household(), tmp_path / "t.db", epoch=1.8e9, talkback=True)
    try:
        rep.controller.devices.relays["fan"].set(True)
        rep.controller.devices.set_level("lamp", 0.5)
        before = relays(rep)
        say(rep, "is the fan on")
        say(rep, "what's on")
        assert list(rep.controller.talkback.told) == [
            "The fan is on.", "The lamp is at 50 percent and the fan is on."]
        assert relays(rep) == before
    finally:
        rep.close()


def test_a_turn_of_the_knob_teaches_the_utterance_before_it_and_forget_rebuilds(house):
    c = house.controller
    c.devices.set_level("lamp", 1.0)
    text = "make it cosy in here"
    assert load_shipped().predict(text).kind != "DIM"
    out = say(house, text)
    turn_knob(c.devices.controls["lamp"], c.devices.factory, lamp(house), 0.75)
    c.pump()
    row = house.store.kind(out.interaction_id)
    assert (row.label, row.label_source) == ("DIM", "control") and c.kinds.labels == 1
    taught = c.kinds.head.predict(text)
    assert taught.distribution["DIM"] > load_shipped().predict(text).distribution["DIM"]
    house.store.delete_interactions([out.interaction_id])
    c.pump()
    assert house.store.kind_labels() == []
    assert c.kinds.head.predict(text) == load_shipped().predict(text)


def test_a_knob_turned_long_after_teaches_nothing(house):
    c = house.controller
    c.devices.set_level("lamp", 1.0)
    out = say(house, "what a lovely evening")
    house.clock.advance(c.settings.kinds.teach_window_s + 1)
    turn_knob(c.devices.controls["lamp"], c.devices.factory, lamp(house), 0.5)
    c.pump()
    assert house.store.kind(out.interaction_id) is None and c.kinds.labels == 0


def test_relays_only_with_questions_off_never_load_the_head(tmp_path):
    s = Settings(devices=[FAN, DeviceConfig("heater", [], relay_pin=23, switch_pin=24)])
    s = replace(s, kinds=replace(s.kinds, questions=False))
    rep = build_replay(s, tmp_path / "r.db", epoch=1.8e9)
    try:
        assert rep.controller.kinds.head is None
        out = say(rep, "is the fan on")
        assert rep.store.kind(out.interaction_id) is None
    finally:
        rep.close()


def test_dimmers_off_leave_dim_commands_to_the_switch_model(tmp_path):
    rep = build_replay(household(dimmers=False, questions=False), tmp_path / "o.db", epoch=1.8e9)
    try:
        assert rep.controller.kinds.head is None
        rep.controller.devices.set_level("lamp", 1.0)
        out = say(rep, "dim the lamp")
        assert rep.store.kind(out.interaction_id) is None
        c = rep.controller
        turn_knob(c.devices.controls["lamp"], c.devices.factory, lamp(rep), 0.5)
        c.pump()  # the knob's changes are drained (and dropped): nothing learns, nothing piles up
        assert c.devices.level_changes() == [] and rep.store.kind(out.interaction_id) is None
    finally:
        rep.close()


def test_a_replayed_dimmer_session_scores_its_kind_lines(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join([
        '{"text": "turn on the lamp", "label": "ON", "device": "lamp"}',
        '{"text": "dim the lamp", "kind": "DIM", "device": "lamp"}',
        '{"text": "brighten the lamp please", "kind": "BRIGHTEN", "device": "lamp"}',
        '{"text": "set the lamp to forty percent", "kind": "LEVEL", "level": 0.4, "device": "lamp"}',
        '{"text": "is the fan on", "kind": "QUERY"}',
    ]) + "\n")
    rep = build_replay(household(), tmp_path / "s.db", epoch=1.8e9)
    try:
        summary = run_session(read_session(path), rep.controller, rep.clock).summary()
    finally:
        rep.close()
    assert summary["kind_lines"] == 4 and summary["relays_moved_by_kind"] == 0
    assert summary["kind_right"] + summary["kind_asked"] + summary["kind_wrong"] + summary["kind_missed"] == 4
    assert summary["kind_wrong"] == 0 and summary["kind_right"] >= 3


@pytest.mark.parametrize("line, message", [
    ('{"text": "dim it", "kind": "FADE"}', '"kind" must be one of'),
    ('{"text": "half", "kind": "LEVEL"}', 'needs "level"'),
    ('{"text": "half", "kind": "LEVEL", "level": 1.5}', 'needs "level"'),
    ('{"text": "dim it", "kind": "DIM", "level": 0.5}', '"level" belongs'),
    ('{"text": "dim it", "kind": "DIM", "label": "OFF"}', 'its "label" is NOOP or absent'),
])
def test_bad_kind_lines_are_refused_with_the_line(tmp_path, line, message):
    from edge_plm.loop.replay import SessionError

    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(SessionError, match=message):
        read_session(path)


def test_a_spoken_yes_to_a_dim_question_dims_and_teaches_a_no_teaches_plain(tmp_path):
    rep = build_replay(household(), tmp_path / "y.db", epoch=1.8e9, talkback=True)
    try:
        c = rep.controller
        c.devices.set_level("lamp", 1.0)
        text = "decrease the brightness of the living room lamp"  # the head: DIM, unsure (asked)
        out = say(rep, text)
        assert rep.store.kind(out.interaction_id).done == "asked" and lamp(rep) == 1.0
        assert list(c.talkback.told) == ["Dim the lamp?"]
        rep.clock.advance(2.0)
        answered = c.handle(text_utterance("yes"))
        assert (answered.interaction_id, answered.answer) == (out.interaction_id, True)
        row = rep.store.kind(out.interaction_id)
        assert lamp(rep) == pytest.approx(0.75) and (row.done, row.label, row.label_source) == \
            ("dimmed", "DIM", "spoken")
        assert c.kinds.head.predict(text).distribution["DIM"] > load_shipped().predict(text).distribution["DIM"]
        out = say(rep, "dim the lamp a bit more")  # DIM, unsure: asked
        assert rep.store.kind(out.interaction_id).done == "asked"
        rep.clock.advance(2.0)
        assert c.handle(text_utterance("no")).answer is False
        assert rep.store.kind(out.interaction_id).label == "PLAIN" and lamp(rep) == pytest.approx(0.75)
        rep.clock.advance(60.0)
        c.pump()
        assert c.handle(text_utterance("yes")).answer is None  # no question open: an utterance
    finally:
        rep.close()
