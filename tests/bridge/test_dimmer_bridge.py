"""A dimmer through the MQTT bridge against a real broker (Debian's mosquitto; a paho client plays
Home Assistant), on MockFactory PWM pins: discovered as a light with its brightness topics, a
brightness command moves the PWM duty and is a ``remote`` LevelChange, junk moves nothing, the
level changes of voice and the level control publish the brightness, a relay stays a switch, and
a device that becomes a dimmer loses its old switch entity."""

from __future__ import annotations

import json
import logging

import pytest
from gpiozero.pins.mock import MockFactory, MockPWMPin

from edge_plm.bridge import start_bridge, stop_bridge
from edge_plm.bridge.topics import Topics
from edge_plm.config.settings import DeviceConfig, GpioConfig, MqttConfig, Settings
from edge_plm.device import Devices
from _mqtt_util import MOSQUITTO, HomeAssistant, wait_until

pytest.importorskip("paho.mqtt.client", reason="paho-mqtt (the mqtt extra) is not installed")
pytestmark = pytest.mark.skipif(MOSQUITTO is None, reason="the mosquitto broker is not installed "
                                                          "(apt-get install mosquitto)")

BASE = "edge-plm/dim"
A, B = 5, 6
LAMP = DeviceConfig("lamp", [], relay_pin=17, switch_pin=27, kind="dimmer", encoder_pins=[A, B])
FAN = DeviceConfig("fan", [], relay_pin=23, switch_pin=24)


def board(port: int, devices) -> Settings:
    return Settings(devices=list(devices), gpio=GpioConfig(pin_factory="mock", min_toggle_interval_ms=0),
                    mqtt=MqttConfig(enabled=True, host="127.0.0.1", port=port, base=BASE, node_id="dim-node"))


def build(s: Settings) -> Devices:
    return Devices.from_config(s.gpio, factory=MockFactory(pin_class=MockPWMPin), install_exit_handlers=False,
                               devices=s.devices)


def duty(devices: Devices, name: str) -> float:
    return float(devices.factory.pin(devices.relays[name].cfg.pin).state)


@pytest.fixture()
def house(broker, ha, tmp_path):
    s = board(broker.port, [LAMP, FAN])
    devices = build(s)
    bridge = start_bridge(s, devices, status_file=tmp_path / "a.db.mqtt.json")
    assert bridge is not None and bridge.wait_connected(10)
    tp = Topics.of(s.mqtt, ["lamp", "fan"], dimmers=["lamp"])
    assert ha.wait_for(tp.status, b"online")
    yield devices, bridge, tp
    stop_bridge(bridge)
    devices.close()


def test_a_dimmer_is_a_light_with_brightness_and_a_relay_stays_a_switch(house, ha, broker):
    devices, bridge, tp = house
    assert tp.config("lamp") == "homeassistant/light/dim-node/lamp/config"
    assert ha.wait(lambda h: tp.config("lamp") in h.last and tp.config("fan") in h.last)
    light = json.loads(ha.last[tp.config("lamp")])
    assert light["default_entity_id"] == "light.edge_plm_dim_node_lamp" and light["schema"] == "default"
    assert (light["command_topic"], light["state_topic"]) == (f"{BASE}/lamp/set", f"{BASE}/lamp/state")
    assert light["brightness_command_topic"] == f"{BASE}/lamp/brightness/set"
    assert light["brightness_state_topic"] == f"{BASE}/lamp/brightness"
    assert (light["brightness_scale"], light["on_command_type"]) == (100, "brightness")
    assert (light["payload_on"], light["payload_off"]) == ("ON", "OFF")
    assert light["unique_id"] == "edge-plm-dim-node-lamp" and light["availability_topic"] == f"{BASE}/status"
    assert "homeassistant/switch/dim-node/lamp/config" not in ha.last
    switch = json.loads(ha.last[tp.config("fan")])
    assert tp.config("fan") == "homeassistant/switch/dim-node/fan/config"
    # the relay's switch is exactly the relay-only board's
    assert switch == Topics.of(board(0, [FAN]).mqtt, ["fan"]).discovery("fan", 1, bridge.mac)
    assert ha.wait_for(tp.state("lamp"), b"OFF")
    assert ha.wait_for(tp.brightness_state("lamp"), b"100")  # the level ON would light it at
    late = HomeAssistant(broker.port)  # retained: a client that comes later gets it
    try:
        assert late.wait(lambda h: (tp.brightness_state("lamp"), b"100", True) in h.messages)
    finally:
        late.close()


def test_a_brightness_command_moves_the_pwm_and_is_a_remote_level_change(house, ha):
    devices, bridge, tp = house
    ha.send(tp.brightness_command("lamp"), "40")
    assert wait_until(lambda: duty(devices, "lamp") == 0.4)  # off -> lit at 40 %, no ON needed
    assert ha.wait_for(tp.state("lamp"), b"ON") and ha.wait_for(tp.brightness_state("lamp"), b"40")
    ha.send(tp.brightness_command("lamp"), "75.5")
    assert wait_until(lambda: duty(devices, "lamp") == 0.755)
    ha.send(tp.brightness_command("lamp"), "1")  # below min_level: its lowest lit level
    assert wait_until(lambda: duty(devices, "lamp") == 0.05)
    changes = devices.level_changes()
    assert [(c.device, c.before, c.after, c.source) for c in changes] == [
        ("lamp", 0.0, 0.4, "remote"), ("lamp", 0.4, 0.755, "remote"), ("lamp", 0.755, 0.05, "remote")]
    assert ha.wait_for(tp.brightness_state("lamp"), b"5")
    ha.send(tp.brightness_command("lamp"), "0")  # 0: off
    assert wait_until(lambda: duty(devices, "lamp") == 0.0)
    assert ha.wait_for(tp.state("lamp"), b"OFF")
    assert [(c.before, c.after) for c in devices.level_changes()] == [(0.05, 0.0)]
    assert ha.last[tp.brightness_state("lamp")] == b"5"  # off publishes no brightness
    assert devices.switches["lamp"].poll() == []  # no flip: the on / off teacher saw nothing
    # ON lights it at its last lit level, as a relay's command: through the person's switch
    ha.send(tp.command("lamp"), "ON")
    assert wait_until(lambda: devices.switches["lamp"].pending == 1)
    (flip,) = devices.switches["lamp"].poll()
    assert flip.remote and flip.desired is True
    assert devices.drive("ON", "lamp") and duty(devices, "lamp") == 0.05


def test_bad_brightness_payloads_are_ignored_and_move_nothing(house, ha, caplog):
    devices, bridge, tp = house
    devices.set_level("lamp", 0.5)
    assert ha.wait_for(tp.brightness_state("lamp"), b"50")
    devices.level_changes()
    caplog.set_level(logging.WARNING, logger="edge_plm.bridge.mqtt")
    for junk in ("101", "-5", "fifty", " 50", "50\n", '{"brightness": 50}', "5e1", "nan", "", "9" * 40):
        ha.send(tp.brightness_command("lamp"), junk)
    ha.send(tp.brightness_command("fan"), "50")  # a relay has no brightness
    ha.send(tp.brightness_command("ghost"), "50")
    assert wait_until(lambda: bridge._ignored >= 12)
    assert duty(devices, "lamp") == 0.5 and duty(devices, "fan") == 0.0
    assert devices.level_changes() == [] and bridge.lights.commands == 0
    assert any("ignored" in r.getMessage() for r in caplog.records)


def test_a_retained_brightness_command_is_stale_and_ignored(broker, ha, tmp_path):
    s = board(broker.port, [LAMP])
    tp = Topics.of(s.mqtt, ["lamp"], dimmers=["lamp"])
    ha.send(tp.brightness_command("lamp"), "20", retain=True)  # before the board starts
    devices = build(s)
    bridge = start_bridge(s, devices)
    try:
        assert bridge.wait_connected(10) and wait_until(lambda: bridge._ignored >= 1)
        assert duty(devices, "lamp") == 0.0 and devices.level_changes() == []
    finally:
        stop_bridge(bridge)
        devices.close()
        ha.send(tp.brightness_command("lamp"), "", retain=True)


def test_voice_and_the_level_control_publish_the_brightness(house, ha):
    devices, bridge, tp = house
    assert devices.drive("ON", "lamp")  # voice: ON at the lit level
    assert ha.wait_for(tp.state("lamp"), b"ON")
    assert devices.step("lamp", -1) == 0.75  # voice: DIM
    assert ha.wait_for(tp.brightness_state("lamp"), b"75")
    pin = devices.factory.pin
    for first, second in ((A, B), (A, B)):  # two detents clockwise: +2 x 0.0625
        pin(first).drive_low(), pin(second).drive_low(), pin(first).drive_high(), pin(second).drive_high()
    assert duty(devices, "lamp") == 0.875
    assert ha.wait_for(tp.brightness_state("lamp"), b"88")
    assert [(c.after, c.source) for c in devices.level_changes()] == [(0.8125, "control"), (0.875, "control")]


def test_a_device_that_becomes_a_dimmer_loses_its_switch_entity(broker, ha, tmp_path):
    status = tmp_path / "a.db.mqtt.json"
    as_relay = board(broker.port, [DeviceConfig("lamp", [], relay_pin=17, switch_pin=27)])
    devices = build(as_relay)
    bridge = start_bridge(as_relay, devices, status_file=status)
    switch_topic = "homeassistant/switch/dim-node/lamp/config"
    try:
        assert bridge.wait_connected(10) and ha.wait(lambda h: h.last.get(switch_topic))
    finally:
        stop_bridge(bridge)
        devices.close()
    as_dimmer = board(broker.port, [LAMP])
    devices = build(as_dimmer)
    bridge = start_bridge(as_dimmer, devices, status_file=status)
    try:
        assert bridge.wait_connected(10)
        assert ha.wait(lambda h: h.last.get("homeassistant/light/dim-node/lamp/config"))
        assert ha.wait_for(switch_topic, b"")  # blanked: Home Assistant removes the switch
    finally:
        stop_bridge(bridge)
        devices.close()


def test_a_brightness_from_home_assistant_right_after_an_utterance_teaches_its_kind(broker, ha, tmp_path):
    """The whole path on the real broker: an utterance the kind head does not call, then Home
    Assistant dims the lamp; the loop's pump labels the utterance DIM (source ``remote``) and
    the head learns it."""
    from edge_plm.loop.controller import text_utterance
    from edge_plm.loop.replay import build_replay
    from edge_plm.switch.kinds import load_shipped

    s = board(broker.port, [LAMP, FAN])
    rep = build_replay(s, tmp_path / "t.db", epoch=1.8e9)
    try:
        assert rep.bridge is not None and rep.bridge.wait_connected(10)
        tp = Topics.of(s.mqtt, ["lamp", "fan"], dimmers=["lamp"])
        assert ha.wait_for(tp.status, b"online")
        rep.controller.devices.set_level("lamp", 1.0)
        text = "make it cosy in here"
        out = rep.controller.handle(text_utterance(text))
        ha.send(tp.brightness_command("lamp"), "50")
        assert wait_until(lambda: duty(rep.controller.devices, "lamp") == 0.5)
        rep.controller.pump()
        row = rep.store.kind(out.interaction_id)
        assert (row.label, row.label_source) == ("DIM", "remote")
        assert (rep.controller.kinds.head.predict(text).distribution["DIM"]
                > load_shipped().predict(text).distribution["DIM"])
    finally:
        rep.close()
