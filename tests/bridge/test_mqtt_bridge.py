"""The MQTT bridge against a real broker (Debian's mosquitto on a free localhost port): a paho
client plays Home Assistant. Discovery and availability, remote switching (MockFactory pins),
retained state after voice, wall switch and remote changes, a remote toggle inside a window as a
``remote`` label the model learns, and the faults: broker killed and restarted during a replay,
a wrong password, bad TLS, junk payloads."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from edge_plm.device import MAIN_RELAY
from edge_plm.bridge.topics import Topics
from edge_plm.config.settings import MqttConfig, PolicyConfig, Settings
from edge_plm.loop.controller import text_utterance
from edge_plm.loop.replay import run_session
from _mqtt_util import MOSQUITTO, MOSQUITTO_PASSWD, Broker, HomeAssistant, free_port, wait_until
from kit import PHRASES, make_replay, session

pytest.importorskip("paho.mqtt.client", reason="paho-mqtt (the mqtt extra) is not installed")
pytestmark = pytest.mark.skipif(MOSQUITTO is None, reason="the mosquitto broker is not installed "
                                                          "(apt-get install mosquitto)")

CLI = [sys.executable, "-c", "from edge_plm.cli import main; main()"]
BASE = "edge-plm/test"


def mqtt_settings(port: int, interval_ms: int = 0, **mqtt) -> Settings:
    s = Settings()
    s = replace(s, mqtt=MqttConfig(enabled=True, host="127.0.0.1", port=port, base=BASE, **mqtt),
                gpio=replace(s.gpio, min_toggle_interval_ms=interval_ms))
    return s


def topics(settings: Settings, names=("main",)) -> Topics:
    return Topics.of(settings.mqtt, list(names))


def relay_pin(replay) -> bool:
    devices = replay.controller.devices
    return bool(devices.factory.pin(devices.relays[MAIN_RELAY].cfg.pin).state)


def pump_until(replay, predicate, timeout: float = 10.0) -> bool:
    return wait_until(lambda: (replay.controller.pump(), predicate())[1], timeout)


def test_home_assistant_sees_the_switch_and_switches_the_relay(tmp_path, broker, ha):
    s = mqtt_settings(broker.port)
    tp = topics(s)
    replay = make_replay(tmp_path / "a.db", settings=s)
    try:
        assert replay.bridge is not None and replay.bridge.wait_connected(10)
        assert ha.wait_for(tp.status, b"online")
        assert ha.wait_for(tp.state("main"), b"OFF")
        config = json.loads(ha.last[tp.config("main")])
        assert config["unique_id"] == f"edge-plm-{tp.node}-main"
        assert config["state_topic"] == f"{BASE}/main/state"
        assert config["command_topic"] == f"{BASE}/main/set"
        assert config["availability_topic"] == f"{BASE}/status"
        assert (config["payload_on"], config["payload_off"]) == ("ON", "OFF")
        assert set(config["device"]) >= {"identifiers", "name", "model", "sw_version"}
        assert not relay_pin(replay)
        ha.send(tp.command("main"), "ON")
        assert pump_until(replay, lambda: relay_pin(replay))  # the MockFactory pin is high
        assert ha.wait_for(tp.state("main"), b"ON")
        assert replay.store.interactions() == []  # a plain remote switch: no interaction
    finally:
        replay.close()
    assert ha.wait_for(tp.status, b"offline")  # a clean stop says so


def test_voice_action_and_wall_switch_publish_the_retained_state(tmp_path, broker, ha):
    s = mqtt_settings(broker.port)
    tp = topics(s)
    replay = make_replay(tmp_path / "b.db", settings=s)
    try:
        assert replay.bridge.wait_connected(10) and ha.wait_for(tp.state("main"), b"OFF")
        out = replay.controller.handle(text_utterance("turn on the light"))
        assert out.action is not None and out.action.value == "ON"
        assert ha.wait_for(tp.state("main"), b"ON")
        replay.clock.advance(30.0)
        replay.controller.pump()
        pin = replay.controller.devices.factory.pin(replay.controller.devices.switches[MAIN_RELAY].cfg.pin)
        pin.drive_low() if pin.state else pin.drive_high()  # the wall switch
        replay.controller.pump()
        assert not relay_pin(replay)
        assert ha.wait_for(tp.state("main"), b"OFF")
    finally:
        replay.close()
    late = HomeAssistant(broker.port)  # a hub that connects later gets the retained state
    try:
        assert late.wait_for(tp.state("main"), b"OFF") and late.wait_for(tp.status, b"offline")
    finally:
        late.close()


def test_a_remote_toggle_inside_the_window_is_a_remote_label_the_model_learns(tmp_path, broker, ha):
    s = replace(mqtt_settings(broker.port), policy=PolicyConfig(act_threshold=1.0, ask_threshold=0.0))
    tp = topics(s)
    db = tmp_path / "c.db"
    replay = make_replay(db, settings=s)
    try:
        assert replay.bridge.wait_connected(10)
        out = replay.controller.handle(text_utterance("turn on the light"))
        assert out.decision.value == "ask" and not relay_pin(replay)
        ha.send(tp.command("main"), "ON")  # answered from the phone
        assert pump_until(replay, lambda: relay_pin(replay))
        row = replay.store.get(out.interaction_id)
        assert (row.label, row.label_source) == ("ON", "remote")
        replay.clock.advance(30.0)
        replay.controller.pump()
        ha.send(tp.command("main"), "OFF")  # outside any window: a plain remote switch
        assert pump_until(replay, lambda: not relay_pin(replay))
        assert replay.store.count(labeled=True) == 1
    finally:
        replay.close()
    status = json.loads(subprocess.run([*CLI, "status", "--db", str(db), "--json"], check=True,
                                       capture_output=True, text=True).stdout)
    assert status["model"]["unlearned_labels"] == 0
    assert status["label_sources"]["remote"] == 1


def test_the_rate_limit_applies_to_remote_commands(tmp_path, broker, ha):
    s = mqtt_settings(broker.port, interval_ms=1000)
    tp = topics(s)
    replay = make_replay(tmp_path / "r.db", settings=s)
    try:
        assert replay.bridge.wait_connected(10)
        replay.controller.handle(text_utterance("turn on the light"))
        assert relay_pin(replay)
        ha.send(tp.command("main"), "OFF")
        assert wait_until(lambda: replay.controller.devices.switches[MAIN_RELAY].pending == 1)
        replay.controller.pump()  # the same (simulated) instant: refused, kept for later
        assert relay_pin(replay)
        replay.clock.advance(2.0)
        replay.controller.pump()
        assert not relay_pin(replay)
        row = replay.store.interactions()[0]
        assert row.label_source == "remote" and row.label == "NOOP"  # acted ON, reverted
    finally:
        replay.close()


def test_junk_on_the_topics_changes_nothing(tmp_path, broker, ha, caplog):
    s = mqtt_settings(broker.port)
    tp = topics(s, ["main", "old lamp", "their lamp"])
    ha.send(tp.command("main"), "ON", retain=True)  # retained junk before the board starts
    ha.send(tp.config("old_lamp"), json.dumps({"name": "old lamp"}), retain=True)  # a removed device
    ha.send(tp.config("their_lamp"), json.dumps({"name": "their lamp"}), retain=True)  # not its own
    # the node published old_lamp itself before (its own memory of what it published)
    (tmp_path / "j.db.mqtt-entities.json").write_text(json.dumps({"configs": [tp.config("old_lamp")]}))
    replay = make_replay(tmp_path / "j.db", settings=s)
    try:
        caplog.set_level(logging.WARNING, logger="edge_plm.bridge")
        assert replay.bridge.wait_connected(10) and ha.wait_for(tp.status, b"online")
        assert ha.wait_for(tp.config("old_lamp"), b"")  # its entity removed
        assert json.loads(ha.last[tp.config("their_lamp")])["name"] == "their lamp"  # kept
        for payload in (b"on", b"On", b"TOGGLE", b" ON", b"ON\n", b"", b"\xff\xfe\x00",
                        b"x" * 300_000, b'{"state": "ON"}'):
            ha.send(tp.command("main"), payload)
        ha.send(f"{BASE}/nosuch/set", "ON")
        ha.send(f"{BASE}/main/set/deeper", "ON")
        ha.send(tp.command("main"), "")  # clear the retained junk
        assert wait_until(lambda: replay.bridge._ignored >= 11)
        for _ in range(5):
            replay.controller.pump()
        assert not relay_pin(replay) and replay.bridge.commands == 0
        ignored = [r for r in caplog.records if "ignored" in r.getMessage()]
        assert 1 <= len(ignored) <= 2  # rate-limited log lines, no traceback
        ha.send(tp.command("main"), "ON")  # the bridge still works
        assert pump_until(replay, lambda: relay_pin(replay))
    finally:
        replay.close()


def _summary_without_latency(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k != "latency_ms"}


def test_broker_killed_and_restarted_during_a_replay(tmp_path, broker):
    lines = session(PHRASES, repeat=2)
    plain = make_replay(tmp_path / "plain.db", settings=replace(mqtt_settings(broker.port), mqtt=MqttConfig()))
    try:
        expected = run_session(lines, plain.controller, plain.clock).summary()
    finally:
        plain.close()
    s = mqtt_settings(broker.port)
    tp = topics(s)
    replay = make_replay(tmp_path / "k.db", settings=s)
    try:
        bridge = replay.bridge
        assert bridge.wait_connected(10)
        third = len(lines) // 3
        run_session(lines[:third], replay.controller, replay.clock)
        broker.kill()
        assert wait_until(lambda: not bridge.connected)
        run_session(lines[third:2 * third], replay.controller, replay.clock)
        broker.start()
        assert wait_until(lambda: bridge.announced >= 2, timeout=30)  # reconnected, announced again
        run_session(lines[2 * third:], replay.controller, replay.clock)
        labels = replay.store.count(labeled=True)
        ha = HomeAssistant(broker.port)
        try:
            want = b"ON" if replay.controller.devices.relays[MAIN_RELAY].is_on else b"OFF"
            assert ha.wait_for(tp.state("main"), want) and ha.wait_for(tp.status, b"online")
        finally:
            ha.close()
    finally:
        replay.close()
    assert labels == expected["labels"]  # no label lost


def test_replay_json_is_the_same_with_the_bridge_on_and_without_a_broker(tmp_path, broker):
    session_file = tmp_path / "s.jsonl"
    session_file.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in PHRASES))
    outs = []
    for name, port in (("on", broker.port), ("nobroker", free_port())):
        cfg = tmp_path / f"{name}.toml"
        cfg.write_text(f'[mqtt]\nenabled = true\nhost = "127.0.0.1"\nport = {port}\nbase = "{BASE}"\n')
        r = subprocess.run([*CLI, "replay", str(session_file), "--db", str(tmp_path / f"{name}.db"),
                            "--config", str(cfg), "--json"], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        outs.append(json.loads(r.stdout))
        if name == "nobroker":
            assert r.stderr.count("cannot connect") == 1  # said once
    assert _summary_without_latency(outs[0]) == _summary_without_latency(outs[1])


def test_a_wrong_password_leaves_the_device_working(tmp_path, caplog):
    if MOSQUITTO_PASSWD is None:
        pytest.skip("mosquitto_passwd is not installed")
    pw = tmp_path / "broker" / "passwd"
    pw.parent.mkdir()
    subprocess.run([MOSQUITTO_PASSWD, "-b", "-c", str(pw), "board", "right"], check=True)
    b = Broker(tmp_path / "broker", extra=f"allow_anonymous false\npassword_file {pw}").start()
    try:
        secret = tmp_path / "secret"
        secret.write_text("wrong\n")
        secret.chmod(0o600)
        caplog.set_level(logging.WARNING, logger="edge_plm.bridge")
        replay = make_replay(tmp_path / "w.db", settings=mqtt_settings(b.port, username="board",
                                                                       password_file=str(secret)))
        try:
            out = replay.controller.handle(text_utterance("turn on the light"))
            assert out.action is not None and relay_pin(replay)  # the device works on
            assert wait_until(lambda: any("refused" in r.getMessage() for r in caplog.records))
            wait_until(lambda: False, timeout=2.5)  # retries with backoff meanwhile
            assert sum("refused" in r.getMessage() for r in caplog.records) == 1
            assert not replay.bridge.connected
        finally:
            replay.close()
        secret.write_text("right\n")
        ha = HomeAssistant(b.port, "board", "right")
        replay = make_replay(tmp_path / "w2.db", settings=mqtt_settings(b.port, username="board",
                                                                        password_file=str(secret)))
        try:
            assert replay.bridge.wait_connected(10)
            assert ha.wait_for(topics(replay.controller.settings).status, b"online")
        finally:
            replay.close()
            ha.close()
    finally:
        b.stop()


def _self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    key.chmod(0o600)
    return cert, key


def test_tls_with_the_broker_certificate_and_bad_tls(tmp_path, caplog):
    cert, key = _self_signed(tmp_path)
    b = Broker(tmp_path / "broker", extra=f"allow_anonymous true\ncertfile {cert}\nkeyfile {key}").start()
    try:
        caplog.set_level(logging.WARNING, logger="edge_plm.bridge")
        ha = HomeAssistant(b.port, tls_ca=str(cert))
        replay = make_replay(tmp_path / "t.db", settings=mqtt_settings(b.port, tls=True, ca_file=str(cert)))
        try:
            assert replay.bridge.wait_connected(10)
            assert ha.wait_for(f"{BASE}/main/state", b"OFF")
        finally:
            replay.close()
            ha.close()
        # no CA given: the system's CAs do not trust a self-signed broker
        replay = make_replay(tmp_path / "t2.db", settings=mqtt_settings(b.port, tls=True))
        try:
            out = replay.controller.handle(text_utterance("turn on the light"))
            assert out.action is not None and relay_pin(replay)
            assert wait_until(lambda: any("cannot connect" in r.getMessage() for r in caplog.records))
            assert not replay.bridge.connected
        finally:
            replay.close()
    finally:
        b.stop()


def test_doctor_checks_the_broker(tmp_path, broker):
    from edge_plm.commands.doctor import check_mqtt

    assert check_mqtt(Settings()).detail.startswith("not configured")
    ok = check_mqtt(mqtt_settings(broker.port))
    assert ok.status == "ok" and f"127.0.0.1:{broker.port}" in ok.detail
    down = check_mqtt(mqtt_settings(free_port()), timeout=2.0)
    assert down.status == "fail" and "cannot connect" in down.detail and down.remedy
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[mqtt]\nenabled = true\nhost = "127.0.0.1"\nport = {broker.port}\n')
    r = subprocess.run([*CLI, "doctor", "--config", str(cfg), "--json"], capture_output=True, text=True)
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["mqtt"]["status"] == "ok"


def test_the_last_decision_leaves_the_board_without_its_transcript(tmp_path, broker, ha):
    s = mqtt_settings(broker.port)
    tp = topics(s)
    db = tmp_path / "p.db"
    replay = make_replay(db, settings=s)
    try:
        assert replay.bridge.wait_connected(10)
        replay.controller.handle(text_utterance("turn on the light"))
        assert ha.wait(lambda h: tp.decision in h.last)
        sent = json.loads(ha.last[tp.decision])
        assert sent["decision"] == "act" and sent["action"] == "ON" and "transcript" not in sent
        assert all(b"turn on the light" not in p for _, p, _ in ha.messages)
        assert json.loads(ha.last[tp.decision_config])["state_topic"] == tp.decision
    finally:
        replay.close()
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[mqtt]\nenabled = true\nhost = "127.0.0.1"\nport = {broker.port}\nbase = "{BASE}"\n')
    status = json.loads(subprocess.run([*CLI, "status", "--db", str(db), "--config", str(cfg), "--json"],
                                       check=True, capture_output=True, text=True).stdout)
    assert status["bridge"]["broker"] == f"127.0.0.1:{broker.port}" and status["bridge"]["base"] == BASE
    assert status["bridge"]["connected"] is False  # stopped with the replay


def test_with_publish_transcripts_forget_clears_the_retained_transcript(tmp_path, broker, ha):
    s = mqtt_settings(broker.port, publish_transcripts=True)
    tp = topics(s)
    db = tmp_path / "f.db"
    replay = make_replay(db, settings=s)
    try:
        assert replay.bridge.wait_connected(10)
        out = replay.controller.handle(text_utterance("turn on the light"))
        assert ha.wait(lambda h: b"turn on the light" in h.last.get(tp.decision, b""))
    finally:
        replay.close()
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[mqtt]\nenabled = true\nhost = "127.0.0.1"\nport = {broker.port}\nbase = "{BASE}"\n'
                   "publish_transcripts = true\n")
    subprocess.run([*CLI, "forget", str(out.interaction_id), "--yes", "--db", str(db), "--config", str(cfg)],
                   check=True, capture_output=True, text=True)
    assert ha.wait_for(tp.decision, b"")
    late = HomeAssistant(broker.port)
    try:
        assert late.wait_for(tp.status, b"offline")
        assert tp.decision not in late.last  # nothing retained holds the text
    finally:
        late.close()
