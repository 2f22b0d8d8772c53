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
from _mqtt_util import MOSQUITTO, Broker, HomeAssistant, wait_until
from kit import make_replay

pytest.importorskip("paho.mqtt.client", reason="paho-mqtt (the mqtt extra) is not installed")
pytestmark = pytest.mark.skipif(MOSQUITTO is None, reason="the mosquitto broker is not installed "
                                                          "(apt-get install mosquitto)")


@pytest.fixture()
def broker(tmp_path):
    b = Broker(tmp_path / "broker").start()
    yield b
    b.stop()


@pytest.fixture()
def ha(broker):
    client = HomeAssistant(broker.port)
    yield client
    client.close()


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
