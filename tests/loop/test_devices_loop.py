"""Several named devices through the real loop (text replays on MockFactory pins): each
device's switch labels the utterance for that device, per-device rows, the command's label,
the learner's invariant after a restart, and the replay's per-device counts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from edge_plm.loop.controller import text_utterance
from edge_plm.decide.policy import Action, Decision
from edge_plm.loop.replay import SessionError, SessionLine, read_session, run_session
from edge_plm.config.settings import DeviceConfig, Settings
from kit import make_replay

HOUSE = [DeviceConfig("lamp", ["light"], relay_pin=17, switch_pin=27),
         DeviceConfig("fan", [], relay_pin=23, switch_pin=24),
         DeviceConfig("heater", [], relay_pin=5, switch_pin=6)]


def house(**policy) -> Settings:
    s = Settings(devices=list(HOUSE))
    s.gpio.min_toggle_interval_ms = 0
    return replace(s, policy=replace(s.policy, **policy)) if policy else s


def flip(replay, device: str) -> None:
    sw = replay.controller.devices.switches[device]
    pin = replay.controller.devices.factory.pin(sw.cfg.pin)
    pin.drive_low() if pin.state else pin.drive_high()


def relays(replay) -> dict[str, bool]:
    return {n: r.is_on for n, r in replay.controller.devices.relays.items()}


def settle(replay) -> None:
    replay.clock.advance(30.0)
    replay.controller.pump()


def test_a_named_device_is_switched_and_the_others_learn_noop(tmp_path):
    replay = make_replay(tmp_path / "d.db", settings=house())
    try:
        out = replay.controller.handle(text_utterance("turn on the light"))  # the lamp's alias
        assert set(out.devices) == {"lamp", "fan", "heater"}
        assert out.devices["lamp"].decision is Decision.ACT and out.devices["lamp"].action is Action.ON
        assert out.devices["fan"].decision is out.devices["heater"].decision is Decision.IGNORE
        assert relays(replay) == {"lamp": True, "fan": False, "heater": False}
        settle(replay)
        row = replay.store.get(out.interaction_id)
        # the row: the lead device's outcome, the command's label
        assert (row.prediction, row.decision, row.action) == ("ON", "act", "ON")
        assert (row.label, row.label_source) == ("ON", "confirmed")
        per = replay.store.device_outcomes([out.interaction_id])[out.interaction_id]
        assert list(per) == ["lamp", "fan", "heater"]
        assert {n: (o.decision, o.action, o.label, o.label_source) for n, o in per.items()} == {
            "lamp": ("act", "ON", "ON", "confirmed"), "fan": ("ignore", None, "NOOP", "confirmed"),
            "heater": ("ignore", None, "NOOP", "confirmed")}
    finally:
        replay.close()


def test_a_flip_of_another_devices_switch_labels_the_utterance_for_that_device(tmp_path):
    # nothing is acted on or asked about: what the switches say is the whole story
    replay = make_replay(tmp_path / "d.db", settings=house(act_threshold=1.0, ask_threshold=1.0))
    try:
        out = replay.controller.handle(text_utterance("turn on the breeze"))
        assert all(r.decision is Decision.IGNORE for r in out.devices.values())
        replay.clock.advance(1.0)
        flip(replay, "fan")  # the person switches the fan on with its own switch
        replay.controller.pump()
        assert relays(replay) == {"lamp": False, "fan": True, "heater": False}
        settle(replay)
        per = replay.store.device_outcomes([out.interaction_id])[out.interaction_id]
        assert (per["fan"].label, per["fan"].label_source) == ("ON", "manual")
        assert (per["lamp"].label, per["heater"].label) == ("NOOP", "NOOP")
        row = replay.store.get(out.interaction_id)
        assert (row.label, row.label_source) == ("ON", "manual")  # a correction: always learned
        assert replay.controller.learner.unlearned() == 0
        (resolved,) = [r for r in replay.controller.resolutions if r.key == out.interaction_id]
        assert resolved.device_labels == {"lamp": "NOOP", "fan": "ON", "heater": "NOOP"}
    finally:
        replay.close()


def test_reverting_a_wrong_device_labels_it_noop_and_the_right_ones_flip_labels_it(tmp_path):
    replay = make_replay(tmp_path / "d.db", settings=house())
    try:
        out = replay.controller.handle(text_utterance("turn on the light"))
        assert relays(replay)["lamp"] is True
        replay.clock.advance(1.0)
        flip(replay, "lamp")  # the person meant the fan: the lamp goes back off ...
        replay.controller.pump()
        replay.clock.advance(1.0)
        flip(replay, "fan")  # ... and the fan on
        replay.controller.pump()
        settle(replay)
        per = replay.store.device_outcomes([out.interaction_id])[out.interaction_id]
        assert (per["lamp"].label, per["lamp"].label_source) == ("NOOP", "override")
        assert (per["fan"].label, per["fan"].label_source) == ("ON", "manual")
        assert replay.store.get(out.interaction_id).label == "ON"
    finally:
        replay.close()


def test_an_unnamed_command_left_alone_by_a_device_already_in_that_state_is_not_learned_as_noop(tmp_path):
    # "switch it on" names no device: the lamp (the default) is asked about it; the person meant
    # the fan, which is already on, so no switch moves. Before, the fan's silence (its share of
    # the command was 0) labelled it NOOP and the command was learned as no command at all.
    replay = make_replay(tmp_path / "d.db", settings=house(act_threshold=1.0, ask_threshold=0.3))
    try:
        flip(replay, "fan")
        replay.controller.pump()
        settle(replay)
        assert relays(replay)["fan"] is True
        learned = len(replay.controller.learner.model.examples)
        out = replay.controller.handle(text_utterance("switch it on"))
        assert out.devices["lamp"].decision is Decision.ASK
        assert out.devices["fan"].decision is Decision.IGNORE
        settle(replay)
        per = replay.store.device_outcomes([out.interaction_id])[out.interaction_id]
        assert per["lamp"].label == "NOOP"  # asked "lamp on?", left off: not the lamp's
        assert per["fan"].label is None  # already on: "on" or nothing, the command reads "on"
        assert replay.store.get(out.interaction_id).label is None
        assert len(replay.controller.learner.model.examples) == learned
    finally:
        replay.close()


def test_an_ask_names_the_device_in_doubt_and_its_flip_answers_it(tmp_path):
    # every command is asked about (act threshold above any confidence)
    replay = make_replay(tmp_path / "d.db", settings=house(act_threshold=1.0, ask_threshold=0.3))
    try:
        out = replay.controller.handle(text_utterance("switch the heater on"))
        assert out.devices["heater"].decision is Decision.ASK
        assert [n for n, r in out.devices.items() if r.decision is Decision.ASK] == ["heater"]
        assert replay.controller.devices.led.asking
        replay.clock.advance(1.0)
        flip(replay, "heater")
        replay.controller.pump()
        assert not replay.controller.devices.led.asking  # the asked window closed: light out
        settle(replay)
        per = replay.store.device_outcomes([out.interaction_id])[out.interaction_id]
        assert (per["heater"].label, per["heater"].label_source) == ("ON", "asked")
        assert replay.store.get(out.interaction_id).label == "ON"
    finally:
        replay.close()


def test_per_device_labels_survive_a_restart_and_forget(tmp_path):
    db = tmp_path / "d.db"
    replay = make_replay(db, settings=house())
    lines = [SessionLine(Action.ON, "turn on the fan", devices=("fan",)),
             SessionLine(Action.OFF, "turn off the fan", devices=("fan",)),
             SessionLine(Action.ON, "heater on please", devices=("heater",)),
             SessionLine(Action.OFF, "everything off", devices=("lamp", "fan", "heater")),
             SessionLine(Action.NOOP, "what a nice day")]
    try:
        run_session(lines, replay.controller, replay.clock)
        ids = replay.store.ids_in_order()
        labelled = replay.store.device_labels(ids)
        assert len(labelled) == len(lines)
        assert replay.controller.learner.unlearned() == 0
    finally:
        replay.close()
    again = make_replay(db, settings=house())
    try:
        lr = again.controller.learner
        assert lr.household.names == ("lamp", "fan", "heater")
        assert lr.unlearned() == 0
        lr.forget_interactions(ids[:2])
        assert lr.unlearned() == 0 and set(again.store.device_outcomes()) == set(ids[2:])
    finally:
        again.close()


def test_replay_counts_per_device_and_wrong_device_actions(tmp_path):
    replay = make_replay(tmp_path / "d.db", settings=house())
    lines = [SessionLine(Action.ON, "turn on the light", devices=("lamp",)),
             SessionLine(Action.OFF, "turn off the light", devices=("fan",)),  # the lamp acts: wrong
             SessionLine(Action.NOOP, "tell me a joke")]
    try:
        result = run_session(lines, replay.controller, replay.clock)
    finally:
        replay.close()
    s = result.summary()
    first, second, _ = result.lines
    assert first.acted_right and not first.acted_wrong_device
    assert second.acted_wrong_device and second.acted_wrong
    assert s["acted_wrong_device"] == 1 and s["acted_wrong"] == 1 and s["acted"] == 2
    assert s["devices"]["lamp"]["commands"] == 1 and s["devices"]["lamp"]["acted_right"] == 1
    assert s["devices"]["lamp"]["acted_wrong"] == 1
    assert s["devices"]["fan"]["commands"] == 1 and s["devices"]["fan"]["acted"] == 0


def test_session_lines_name_devices_and_unknown_ones_are_refused(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text('{"text": "fan on", "label": "ON", "device": "fan"}\n'
                 '{"text": "all off", "label": "OFF", "device": ["lamp", "fan"]}\n'
                 '{"text": "lamp on", "label": "ON"}\n')
    lines = read_session(f)
    assert [x.devices for x in lines] == [("fan",), ("lamp", "fan"), None]
    f.write_text('{"text": "fan on", "label": "ON", "device": 3}\n')
    with pytest.raises(SessionError, match='s.jsonl:1: "device" must be a device name'):
        read_session(f)
    replay = make_replay(tmp_path / "d.db", settings=house())
    try:
        with pytest.raises(SessionError, match="line 1: unknown device 'kettle'"):
            run_session([SessionLine(Action.ON, "kettle on", devices=("kettle",))],
                        replay.controller, replay.clock)
    finally:
        replay.close()


def test_with_two_devices_in_doubt_the_signal_stays_until_both_are_answered(tmp_path):
    replay = make_replay(tmp_path / "d.db", settings=house(act_threshold=1.0, ask_threshold=0.3))
    try:
        devices = replay.controller.devices
        for name in ("lamp", "fan"):  # the person switches both on by hand
            replay.clock.advance(1.0)
            flip(replay, name)
            replay.controller.pump()
        out = replay.controller.handle(text_utterance("everything off"))
        asked = [n for n, r in out.devices.items() if r.decision is Decision.ASK]
        assert asked[:2] == ["lamp", "fan"]
        assert devices._shared_for == "lamp"  # the shared LED blinks once per group: the lamp
        replay.clock.advance(1.0)
        flip(replay, "lamp")
        replay.controller.pump()
        assert devices.led.asking and devices._shared_for == "fan"  # now two blinks: the fan
        replay.clock.advance(1.0)
        flip(replay, "fan")
        replay.controller.pump()
        if "heater" in asked:  # the heater (already off) is still asked about until its window ends
            assert devices.led.asking and devices._shared_for == "heater"
            settle(replay)
        assert not devices.led.asking and devices._shared_for is None
        per = replay.store.device_outcomes([out.interaction_id])[out.interaction_id]
        assert (per["lamp"].label, per["fan"].label) == ("OFF", "OFF")
        assert per["lamp"].label_source == per["fan"].label_source == "asked"
    finally:
        replay.close()


def test_a_rebuild_from_the_database_relearns_what_each_devices_switch_taught(tmp_path):
    # the owner's own name for the fan is learned from the fan's switch; a model rebuilt from
    # the database (forget --rebuild) must know it too, not only the command's action
    replay = make_replay(tmp_path / "d.db", settings=house(act_threshold=1.0, ask_threshold=1.0))
    try:
        for _ in range(3):
            replay.controller.handle(text_utterance("turn on the breeze"))
            replay.clock.advance(1.0)
            flip(replay, "fan")
            replay.controller.pump()
            settle(replay)
            flip(replay, "fan")  # and off again by hand, outside any window
            settle(replay)
        lr = replay.controller.learner
        live = lr.model.address("turn on the breeze", lr.household.devices).shares.tolist()
        assert live[1] > 0 and live[0] == 0, live
        lr.rebuild_from_store()
        rebuilt = lr.model.address("turn on the breeze", lr.household.devices).shares.tolist()
        assert rebuilt == live
        assert lr.unlearned() == 0
    finally:
        replay.close()


def test_everything_switches_every_device_of_three(tmp_path):
    """ "turn everything off" / "all on": one command for every device (switch/naming.py)."""
    replay = make_replay(tmp_path / "d.db", settings=house())
    try:
        out = replay.controller.handle(text_utterance("turn everything on"))
        assert {n: r.action for n, r in out.devices.items()} == dict.fromkeys(("lamp", "fan", "heater"), Action.ON)
        assert relays(replay) == {"lamp": True, "fan": True, "heater": True}
        settle(replay)
        replay.controller.handle(text_utterance("switch everything off"))
        assert relays(replay) == {"lamp": False, "fan": False, "heater": False}
    finally:
        replay.close()


def test_a_household_word_for_all_is_learned_from_the_switches(tmp_path):
    """A word for "all" the shipped model does not know ("the whole house") is taught by the
    owner's switches (every device's switch answers the asks, `DeviceEvidence`) and then
    addresses every device, while a device's name still addresses that device alone."""
    replay = make_replay(tmp_path / "d.db", settings=house())
    every = ("lamp", "fan", "heater")
    lines = [SessionLine(Action.ON, "turn on the lamp", devices=("lamp",)),
             SessionLine(Action.ON, "turn on the fan", devices=("fan",)),
             SessionLine(Action.ON, "turn on the heater", devices=("heater",)),
             SessionLine(Action.OFF, "whole house off", devices=every),
             SessionLine(Action.ON, "whole house on", devices=every),
             SessionLine(Action.OFF, "the whole house off", devices=every)]
    try:
        result = run_session(lines, replay.controller, replay.clock)
        assert not result.lines[3].acted  # not known yet: asked about, the switches answer
        assert result.summary()["acted_wrong"] == 0
        settle(replay)
        out = replay.controller.handle(text_utterance("whole house on please"))  # new wording
        assert {n: (r.decision, r.prediction) for n, r in out.devices.items()} == dict.fromkeys(
            every, (Decision.ASK, "ON"))  # every device addressed; the action still young: asked
        settle(replay)
        out = replay.controller.handle(text_utterance("turn on the fan"))  # a name still names one
        assert [n for n, r in out.devices.items() if r.decision is not Decision.IGNORE] == ["fan"]
    finally:
        replay.close()
