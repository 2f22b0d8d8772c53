"""The bridge as a good citizen of the home network (issue 47, items 1-3), against a real
broker (Debian's mosquitto) with a paho client playing Home Assistant: two boards on one host
name keep each other's entities and availability; Home Assistant's birth message re-publishes
the discovery configs; the configs use ``default_entity_id`` and carry ``origin``; the sensors
are diagnostics."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from edge_plm.bridge.topics import Topics
from edge_plm.config.settings import MqttConfig, Settings
from _mqtt_util import MOSQUITTO, wait_until
from kit import make_replay

pytest.importorskip("paho.mqtt.client", reason="paho-mqtt (the mqtt extra) is not installed")
pytestmark = pytest.mark.skipif(MOSQUITTO is None, reason="the mosquitto broker is not installed "
                                                          "(apt-get install mosquitto)")


def board(port: int, node_id: str = "") -> Settings:
    """A board's settings with the default base (``edge-plm/<node id>``)."""
    return replace(Settings(), mqtt=MqttConfig(enabled=True, host="127.0.0.1", port=port,
                                               node_id=node_id))


def test_two_boards_on_one_host_name_keep_each_others_entities(tmp_path, broker, ha):
    a_s, b_s = board(broker.port, "raspberrypi-aaaaaa"), board(broker.port, "raspberrypi-bbbbbb")
    ta, tb = Topics.of(a_s.mqtt, ["main"]), Topics.of(b_s.mqtt, ["main"])
    assert ta.status != tb.status and ta.config("main") != tb.config("main")
    a = make_replay(tmp_path / "a" / "a.db", settings=a_s)
    try:
        assert a.bridge.wait_connected(10) and ha.wait_for(ta.status, b"online")
        a_config = ha.last[ta.config("main")]
        b = make_replay(tmp_path / "b" / "b.db", settings=b_s)
        try:
            assert b.bridge.wait_connected(10) and ha.wait_for(tb.status, b"online")
        finally:
            b.close()
        assert ha.wait_for(tb.status, b"offline")
        assert ha.last[ta.status] == b"online"  # the other's offline does not mark it
        assert ha.last[ta.config("main")] == a_config  # its retained config intact
        assert json.loads(ha.last[tb.config("main")])["unique_id"] != json.loads(a_config)["unique_id"]
        blanked = [t for t, p, _ in ha.messages if t.startswith(ta.prefix) and p == b""]
        assert blanked == []
    finally:
        a.close()


def test_a_node_blanks_only_the_entities_it_published_itself(tmp_path, broker, ha):
    """Two processes with one node id (the same board, or a copied node id) and different
    devices: neither removes the other's switch."""
    s = board(broker.port, "shared-node")
    tp = Topics.of(s.mqtt, ["main", "heater"])
    ha.send(tp.config("heater"), json.dumps({"name": "heater", "unique_id": "x"}), retain=True)
    r = make_replay(tmp_path / "one.db", settings=s)
    try:
        assert r.bridge.wait_connected(10) and ha.wait_for(tp.status, b"online")
        assert ha.wait(lambda h: tp.config("main") in h.last)
        assert wait_until(lambda: r.bridge.published >= 4)
        assert json.loads(ha.last[tp.config("heater")])["name"] == "heater"
    finally:
        r.close()
    remembered = json.loads((tmp_path / "one.db.mqtt-entities.json").read_text())["configs"]
    assert tp.config("main") in remembered and tp.config("heater") not in remembered


def test_discovery_uses_default_entity_id_origin_and_diagnostic_sensors(tmp_path, broker, ha):
    s = board(broker.port, "kitchen-pi")
    tp = Topics.of(s.mqtt, ["main"])
    r = make_replay(tmp_path / "d.db", settings=s)
    try:
        assert r.bridge.wait_connected(10) and ha.wait_for(tp.status, b"online")
        assert ha.wait(lambda h: tp.sensor_config("asks_today") in h.last)
        switch = json.loads(ha.last[tp.config("main")])
        assert switch["default_entity_id"] == "switch.edge_plm_kitchen_pi_main"
        assert "object_id" not in switch
        assert switch["origin"]["name"] == "edge-plm" and switch["origin"]["sw_version"]
        for key in ("unique_id", "device", "state_topic", "command_topic", "availability_topic"):
            assert key in switch  # the contract's keys stay
        for topic in (tp.decision_config, tp.sensor_config("model_version"),
                      tp.sensor_config("asks_today")):
            sensor = json.loads(ha.last[topic])
            assert sensor["entity_category"] == "diagnostic" and sensor["default_entity_id"].startswith("sensor.")
            assert sensor["origin"]["name"] == "edge-plm"
        assert ha.wait_for(tp.asks, b"0")
    finally:
        r.close()


def test_home_assistants_birth_message_publishes_the_configs_again(tmp_path, broker, ha):
    s = board(broker.port, "birth-pi")
    tp = Topics.of(s.mqtt, ["main"])
    r = make_replay(tmp_path / "b.db", settings=s)
    try:
        assert r.bridge.wait_connected(10) and ha.wait_for(tp.status, b"online")
        config = ha.last[tp.config("main")]
        ha.send(tp.config("main"), "", retain=True)  # Home Assistant lost it (deleted, restarted)
        assert ha.wait_for(tp.config("main"), b"")
        ha.send("homeassistant/status", "online")  # its birth message
        assert ha.wait_for(tp.config("main"), config)
        assert ha.wait_for(tp.status, b"online")
        ha.send("homeassistant/status", "offline")  # its last will: nothing to do
    finally:
        r.close()


def test_the_undo_button_relabels_the_last_lesson(tmp_path, broker, ha):
    """Issue 47, item 4: Home Assistant's *undo last lesson* button relabels the newest
    labelled interaction NOOP when it taught a command (as `edge-plm label ID NOOP`)."""
    from edge_plm.loop.replay import run_session  # noqa: PLC0415
    from kit import PHRASES, session  # noqa: PLC0415

    s = board(broker.port, "undo-pi")
    tp = Topics.of(s.mqtt, ["main"])
    r = make_replay(tmp_path / "u.db", settings=s)
    try:
        assert r.bridge.wait_connected(10) and ha.wait_for(tp.status, b"online")
        button = json.loads(ha.last[tp.undo_config])
        assert button["command_topic"] == tp.undo_press and button["payload_press"] == "PRESS"
        assert button["default_entity_id"] == "button.edge_plm_undo_pi_undo_last_lesson"
        run_session(session(PHRASES), r.controller, r.clock)
        commands = [row for row in r.store.interactions(labeled=True) if row.label in ("ON", "OFF")]
        assert len(commands) >= 2
        last, before = commands[0], commands[1]  # the newest command learned
        ha.send(tp.undo_press, "junk")  # not a press: nothing
        ha.send(tp.undo_press, "PRESS")
        assert wait_until(lambda: r.store.get(last.id).label == "NOOP")
        assert r.store.get(last.id).label_source == "manual"
        assert r.store.get(before.id).label == before.label  # only the last lesson
        from edge_plm.switch.tokenizer import ACTIONS  # noqa: PLC0415

        lr = r.controller.worker.learner
        if not r.store.get(last.id).holdout:  # the model now holds NOOP for it (the worker's task
            assert wait_until(lambda: lr.model.examples[lr.keys[last.id]][1]  # may still be running)
                              == ACTIONS.index("NOOP"))
    finally:
        r.close()


def test_home_assistant_shows_the_pending_timers(tmp_path, broker, ha):
    """Timed commands (issue 48): a diagnostic sensor with the pending timers' count, the
    timers as its attributes; a timer set by voice reaches it, and its run empties it."""
    from edge_plm.loop.controller import text_utterance  # noqa: PLC0415

    s = board(broker.port, "timer-pi")
    tp = Topics.of(s.mqtt, ["main"])
    r = make_replay(tmp_path / "t.db", settings=s)
    try:
        assert r.bridge.wait_connected(10) and ha.wait_for(tp.status, b"online")
        sensor = json.loads(ha.wait(lambda h: h.last.get(tp.sensor_config("timers_pending"))))
        assert sensor["state_topic"] == tp.timers and sensor["entity_category"] == "diagnostic"
        r.controller.handle(text_utterance("turn on the lights in twenty minutes"))
        assert ha.wait(lambda h: json.loads(h.last.get(tp.timers, b'{"count": 0}'))["count"] == 1)
        assert json.loads(ha.last[tp.timers])["timers"][0]["action"] == "ON"
        r.clock.advance(1201)
        r.controller.pump()
        assert ha.wait(lambda h: json.loads(h.last.get(tp.timers))["count"] == 0)
    finally:
        r.close()
