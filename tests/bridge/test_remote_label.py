"""A command from the home hub (MQTT) as the owner's answer: the policy's ``remote`` source,
the schema that stores it (migration v7), the config checks of ``[mqtt]`` and the topics —
everything of the bridge that needs no broker (tests/bridge/test_mqtt_bridge.py runs one)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from edge_plm.bridge.topics import Topics, command_state
from edge_plm.config.settings import ConfigError, DeviceConfig, MqttConfig, Settings, parse, problems
from edge_plm.decide.policy import Action, LabelSource, Policy, Prediction
from edge_plm.store import SCHEMA_VERSION, ReplayStore

CFG = Settings().policy
ON, OFF, NOOP = Action.ON, Action.OFF, Action.NOOP


@pytest.mark.parametrize("prediction, relay_on, desired, label, plain_source", [
    (Prediction(ON, 0.5), False, True, ON, LabelSource.ASKED),  # asked: the answer
    (Prediction(ON, 0.95), False, False, NOOP, LabelSource.OVERRIDE),  # acted ON: reverted
    (Prediction(ON, 0.95), False, True, ON, LabelSource.CONFIRMED),  # acted ON: the same state
    (Prediction(OFF, 0.1), False, True, ON, LabelSource.MANUAL),  # ignored: the person's wish
])
def test_a_remote_command_labels_exactly_as_a_flip_with_source_remote(prediction, relay_on, desired,
                                                                      label, plain_source):
    results = []
    for remote in (False, True):
        policy = Policy(CFG)
        policy.on_utterance(1, prediction, relay_on, 0.0)
        (r,) = policy.on_flip(desired, 1.0, remote=remote)
        results.append(r)
    flip, remote = results
    assert (flip.label, flip.source) == (label, plain_source)
    assert (remote.label, remote.source) == (label, LabelSource.REMOTE)
    assert (remote.key, remote.decision, remote.ts) == (flip.key, flip.decision, flip.ts)
    assert "remote" in remote.reason


def test_a_remote_command_outside_a_window_labels_nothing():
    policy = Policy(CFG)
    assert policy.on_flip(True, 0.0, remote=True) == []
    policy.on_utterance(1, Prediction(ON, 0.95), False, 0.0)
    (expired,) = policy.on_flip(False, 100.0, remote=True)  # the window had ended
    assert expired.source is LabelSource.CONFIRMED


def test_a_remote_command_after_junk_labels_nothing():
    policy = Policy(CFG)
    policy.on_utterance(1, Prediction(ON, 0.5, junk="too few letters"), False, 0.0)
    (r,) = policy.on_flip(True, 1.0, remote=True)
    assert r.label is None and r.source is None


def _back_to_v6(path) -> None:
    """Make a current file look like a v6 one (no 'remote' in its CHECKs)."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name IN "
                            "('interactions', 'interaction_devices')").fetchall()
        version = conn.execute("PRAGMA schema_version").fetchone()[0]
        conn.execute("PRAGMA writable_schema = ON")
        for name, sql in rows:
            conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", [sql.replace(", 'remote'", ""), name])
        conn.execute(f"PRAGMA schema_version = {version + 1}")
        conn.execute("PRAGMA writable_schema = OFF")
        conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
        conn.commit()
    finally:
        conn.close()


def test_the_v7_migration_lets_a_v6_file_store_remote_labels(tmp_path):
    path = tmp_path / "v6.db"
    with ReplayStore(path) as s:
        iid = s.add_interaction(ts=1.0, transcript="turn on the light")
        s.set_label(iid, "ON", "manual", ts=2.0)
    _back_to_v6(path)
    conn = sqlite3.connect(path)
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("UPDATE interactions SET label_source = 'remote'")
    conn.close()
    with ReplayStore(path) as s:
        assert s.stored_schema_version() == SCHEMA_VERSION >= 7
        s.set_label(iid, "OFF", "remote", ts=3.0)
        assert (s.get(iid).label, s.get(iid).label_source, s.get(iid).transcript) == ("OFF", "remote", "turn on the light")
        s.add_device_outcomes(iid, {"lamp": {"prediction": "ON", "confidence": 0.5, "distribution": None}})
        s.set_device_label(iid, "lamp", "OFF", "remote", ts=3.0)
        assert s.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_mqtt_is_off_by_default_and_its_values_are_checked(tmp_path):
    assert Settings().mqtt.enabled is False and problems(Settings()) == []
    with pytest.raises(ConfigError, match="mqtt.qos"):
        parse("[mqtt]\nqos = 3\n")
    with pytest.raises(ConfigError, match="wildcards"):
        parse('[mqtt]\nbase = "a/+/b"\n')
    with pytest.raises(ConfigError, match="not both"):
        parse('[mqtt]\npassword = "x"\npassword_file = "/y"\n')
    secret = tmp_path / "secret"
    secret.write_text("pw\n")
    secret.chmod(0o644)
    with pytest.raises(ConfigError, match="readable by others.*chmod 600"):
        parse(f'[mqtt]\nenabled = true\npassword_file = "{secret}"\n')
    secret.chmod(0o600)
    assert parse(f'[mqtt]\nenabled = true\npassword_file = "{secret}"\n').mqtt.enabled
    with pytest.raises(ConfigError, match="No such file"):
        parse(f'[mqtt]\nenabled = true\npassword_file = "{tmp_path / "none"}"\n')
    s = Settings(devices=[DeviceConfig("café", relay_pin=17, switch_pin=27),
                          DeviceConfig("cafè", relay_pin=5, switch_pin=6)],
                 mqtt=MqttConfig(enabled=True))
    assert [p for p in problems(s) if "same topic id 'caf_'" in p]


def test_topics_and_commands():
    tp = Topics.of(MqttConfig(), ["main", "Big Lamp"], hostname="Pi.Kitchen", suffix="")
    assert tp.base == "edge-plm/pi_kitchen" and tp.node == "pi_kitchen"
    assert tp.config("big_lamp") == "homeassistant/switch/pi_kitchen/big_lamp/config"
    assert tp.command_device("edge-plm/pi_kitchen/big_lamp/set") == "big_lamp"
    assert tp.command_device("edge-plm/pi_kitchen/a/b/set") is None
    assert tp.command_device("other/pi_kitchen/main/set") is None
    assert tp.config_device("homeassistant/switch/pi_kitchen/old/config") == "old"
    assert [command_state(p) for p in (b"ON", b"OFF", b"on", b"Off", b" ON", b"", b"ON" * 20)] == [
        True, False, None, None, None, None, None]


def test_the_node_id_is_unique_per_board_and_settable(tmp_path):
    """Issue 47, item 1: two boards left on one host name get two node ids (from a digest of
    /etc/machine-id, or the MAC address), never the machine id itself; ``mqtt.node_id`` wins."""
    from edge_plm.bridge import topics as t  # noqa: PLC0415

    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("0123456789abcdef0123456789abcdef\n")
    b.write_text("fedcba9876543210fedcba9876543210\n")
    na = t.node_id("raspberrypi", t.board_suffix(a))
    nb = t.node_id("raspberrypi", t.board_suffix(b))
    assert na != nb and na.startswith("raspberrypi-") and len(na) == len("raspberrypi-") + 6
    assert "0123456789" not in na
    assert t.node_id("raspberrypi", t.board_suffix(a)) == na  # stable
    tp = Topics.of(MqttConfig(node_id="kitchen-pi"), ["main"], hostname="raspberrypi")
    assert tp.node == "kitchen-pi" and tp.base == "edge-plm/kitchen-pi"
    assert [p for p in problems(Settings(mqtt=MqttConfig(node_id="Kitchen Pi"))) if "node_id" in p]


def test_the_bridge_is_not_imported_when_off():
    """Off (the default): the loop, the service and the CLI never import paho."""
    code = ("import sys, edge_plm.cli, edge_plm.loop.service, edge_plm.loop.replay; "
            "print(sorted(m for m in sys.modules if m.startswith(('paho', 'edge_plm.bridge.mqtt'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
