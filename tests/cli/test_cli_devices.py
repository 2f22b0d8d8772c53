"""The CLI with several devices: `config check`, `replay --config`, `status`, `log`, `stats`,
`export` (lines with "device") and `label ID ACTION --device NAME`."""

from __future__ import annotations

import json

import pytest

from _data_util import cli, js
from edge_plm.store import ReplayStore

CONFIG = """
[gpio]
min_toggle_interval_ms = 0

[[devices]]
name = "lamp"
aliases = ["light"]
relay_pin = 17
switch_pin = 27

[[devices]]
name = "fan"
relay_pin = 23
switch_pin = 24

[[devices]]
name = "heater"
relay_pin = 5
switch_pin = 6
led_pin = 13
"""

SESSION = [
    {"text": "turn on the light", "label": "ON", "device": "lamp"},
    {"text": "turn on the fan", "label": "ON", "device": "fan"},
    {"text": "what a nice day", "label": "NOOP"},
    {"text": "everything off", "label": "OFF", "device": ["lamp", "fan", "heater"]},
]


@pytest.fixture
def house(tmp_path):
    cfg = tmp_path / "house.toml"
    cfg.write_text(CONFIG)
    session = tmp_path / "s.jsonl"
    session.write_text("".join(json.dumps(x) + "\n" for x in SESSION))
    db = tmp_path / "edge-plm.db"
    out = js(cli("replay", str(session), "--config", cfg, "--db", db, "--json"))
    return cfg, db, out


def test_config_check_validates_device_names_and_pins(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    assert cli("config", "check", "--config", cfg).exit_code == 0
    cfg.write_text(CONFIG.replace('name = "fan"', 'name = "Lamp"'))
    r = cli("config", "check", "--config", cfg)
    assert r.exit_code != 0 and "the name 'Lamp' is already 'lamp''s" in r.output
    assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1
    cfg.write_text(CONFIG.replace("switch_pin = 24", "switch_pin = 17"))
    r = cli("config", "check", "--config", cfg)
    assert r.exit_code != 0 and "devices[2] ('fan').switch_pin is pin 17, already devices[1] ('lamp').relay_pin" in r.output
    cfg.write_text(CONFIG.replace('name = "heater"', 'name = " "'))
    r = cli("config", "check", "--config", cfg)
    assert r.exit_code != 0 and "a name or alias needs a letter or digit" in r.output
    cfg.write_text(CONFIG.replace("led_pin = 13", "led_pin = 22"))  # gpio.led_pin's default
    r = cli("config", "check", "--config", cfg)
    assert r.exit_code != 0 and "led_pin is pin 22, already gpio.led_pin" in r.output
    cfg.write_text(CONFIG + 'colour = "red"\n')
    r = cli("config", "check", "--config", cfg)
    assert r.exit_code != 0 and "[[devices]] #3: unknown key 'colour'" in r.output


def test_replay_json_adds_per_device_counts(house):
    _, _, out = house
    assert {"interactions", "asked", "acted", "acted_wrong", "missed", "labels", "latency_ms",
            "silence_tail_ms"} <= set(out)
    assert out["interactions"] == 4 and set(out["devices"]) == {"lamp", "fan", "heater"}
    assert out["acted_wrong_device"] == 0
    assert out["devices"]["lamp"]["commands"] == 2 and out["devices"]["heater"]["commands"] == 1


def test_replay_refuses_a_device_the_config_does_not_have(tmp_path, house):
    cfg, _, _ = house
    session = tmp_path / "bad.jsonl"
    session.write_text('{"text": "kettle on", "label": "ON", "device": "kettle"}\n')
    r = cli("replay", str(session), "--config", cfg, "--json")
    assert r.exit_code == 2 and "unknown device 'kettle'" in r.output and "Traceback" not in r.output


def test_replay_without_a_config_uses_the_devices_the_session_names(tmp_path):
    session = tmp_path / "s.jsonl"
    session.write_text("".join(json.dumps(x) + "\n" for x in SESSION))
    r = cli("replay", str(session), "--db", tmp_path / "d.db", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    # the names in order of first mention; the heater is named only by "everything off"
    assert list(out["devices"]) == ["lamp", "fan", "heater"] and out["interactions"] == 4
    assert "replaying with the devices the session names (lamp, fan, heater" in r.stderr
    # a session that names one device replays as one device: the single-device keys only
    one = tmp_path / "one.jsonl"
    one.write_text('{"text": "turn on the lamp", "label": "ON", "device": "lamp"}\n')
    out = json.loads(cli("replay", str(one), "--db", tmp_path / "e.db", "--json").stdout)
    assert "devices" not in out and out["interactions"] == 1


def test_status_log_stats_and_export_show_devices(tmp_path, house):
    cfg, db, _ = house
    s = js(cli("status", "--db", db, "--config", cfg, "--json"))
    assert [d["name"] for d in s["devices"]] == ["lamp", "fan", "heater"]
    assert s["devices"][0]["aliases"] == ["light"] and s["devices"][2]["led_pin"] == 13
    assert "lamp (light): relay pin 17" in cli("status", "--db", db, "--config", cfg).stdout
    rows = js(cli("log", "--db", db, "--config", cfg, "--json"))
    assert [list(r["devices"]) for r in rows] == [["lamp", "fan", "heater"]] * 4
    assert rows[0]["devices"]["lamp"]["label"] == "ON"
    assert "devices" in cli("log", "--db", db, "--config", cfg).stdout
    st = js(cli("stats", "--db", db, "--config", cfg, "--json"))
    assert set(st["devices"]) == {"lamp", "fan", "heater"}
    assert st["devices"]["fan"]["label"]["ON"] == 1
    text = cli("export", "--db", db, "--config", cfg).stdout
    lines = [json.loads(x) for x in text.splitlines()]
    assert [x.get("device") for x in lines] == ["lamp", "fan", None, ["lamp", "fan", "heater"]]
    assert all(set(x["devices"]) == {"lamp", "fan", "heater"} for x in lines)
    # the export replays for the same devices
    exported = tmp_path / "export.jsonl"
    exported.write_text(text)
    again = js(cli("replay", str(exported), "--config", cfg, "--json"))
    assert again["devices"]["lamp"]["commands"] == 2 and again["devices"]["heater"]["commands"] == 1


def test_label_with_device(house):
    cfg, db, _ = house
    with ReplayStore(db) as store:
        chatter = [r for r in store.interactions() if r.transcript == "what a nice day"][0].id
    r = cli("label", str(chatter), "ON", "--db", db, "--config", cfg)
    assert r.exit_code != 0 and "say which with --device NAME" in r.output
    r = cli("label", str(chatter), "ON", "--device", "kettle", "--db", db, "--config", cfg)
    assert r.exit_code != 0 and "has no device 'kettle'" in r.output
    out = js(cli("label", str(chatter), "ON", "--device", "heater", "--db", db, "--config", cfg, "--json"))
    assert (out["label"], out["device"], out["device_label"], out["changed"]) == ("ON", "heater", "ON", True)
    with ReplayStore(db) as store:
        per = store.device_outcomes([chatter])[chatter]
        assert (per["heater"].label, per["heater"].label_source) == ("ON", "manual")
        assert store.get(chatter).label == "ON"
    s = js(cli("status", "--db", db, "--config", cfg, "--json"))
    assert s["model"]["unlearned_labels"] == 0
    again = js(cli("label", str(chatter), "ON", "--device", "heater", "--db", db, "--config", cfg, "--json"))
    assert again["changed"] is False


def test_the_generated_config_shows_a_devices_entry_that_parses_when_uncommented():
    from edge_plm.config.file import default_config_toml
    from edge_plm.config.settings import parse

    text = default_config_toml()
    block = text[text.index("## [[devices]]"):]
    entry = "\n".join(line[3:] for line in block.splitlines() if line.startswith("## "))
    (device,) = parse(entry + "\n", "<entry>").devices
    assert (device.name, device.aliases, device.relay_pin, device.switch_pin, device.led_pin) == (
        "lamp", ["light", "big light"], 17, 27, -1)
