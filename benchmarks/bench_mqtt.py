"""The MQTT bridge's cost, against a local mosquitto (started on a free port, stopped by PID).

1. Relay change -> retained state seen by a subscriber (a paho client playing Home Assistant,
   in this process, so both ends read one clock): `Devices.drive` on MockFactory pins, the
   bridge's watcher, its thread, paho, the broker and back. p50 / p95 over ``--toggles``.
2. Utterance -> relay with the bridge on vs off, in one run: two replay loops (the real
   controller, shipped starting model, text utterances that switch the relay), one with
   ``[mqtt] enabled`` connected to the broker, one without; lines alternate between the two so
   machine noise hits both alike. The time is from `Controller.handle` being called to the
   relay's pin write (a relay watcher). Target: ratio of medians <= 1.05.

Usage (repo root): python3 benchmarks/bench_mqtt.py [--toggles 300] [--lines 300]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
from benchinfo import header  # noqa: E402
from _mqtt_util import MOSQUITTO, Broker, HomeAssistant  # noqa: E402

from edge_plm.device import MAIN_RELAY  # noqa: E402
from edge_plm.bridge import start_bridge, stop_bridge  # noqa: E402
from edge_plm.config.settings import MqttConfig, Settings  # noqa: E402
from edge_plm.loop.controller import text_utterance  # noqa: E402
from edge_plm.loop.replay import build_replay  # noqa: E402

PHRASES = ["turn on the light", "turn off the light"]


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q * len(s))) - 1))]


def settings(port: int | None) -> Settings:
    s = Settings()
    s = replace(s, gpio=replace(s.gpio, min_toggle_interval_ms=0))
    if port is not None:
        s = replace(s, mqtt=MqttConfig(enabled=True, host="127.0.0.1", port=port, base="edge-plm/bench"))
    return s


def state_latency(port: int, tmp: Path, toggles: int) -> list[float]:
    """ms from `Devices.drive` to the subscriber's copy of the retained state."""
    replay = build_replay(settings(None), tmp / "state.db")
    devices = replay.controller.devices
    bridge = start_bridge(settings(port), devices)
    ha = HomeAssistant(port)
    topic = bridge.topics.state("main")
    arrived: dict[bytes, float] = {}
    got = threading.Event()

    def on_message(client, userdata, msg) -> None:
        if msg.topic == topic:
            arrived[bytes(msg.payload)] = time.perf_counter()
            got.set()

    ha.client.on_message = on_message
    assert bridge.wait_connected(10)
    time.sleep(0.5)  # the announce round has arrived
    out = []
    try:
        for i in range(toggles):
            action = "ON" if i % 2 == 0 else "OFF"
            got.clear()
            arrived.clear()
            t0 = time.perf_counter()
            assert devices.drive(action, MAIN_RELAY)
            if not got.wait(5):
                raise RuntimeError("state not seen")
            out.append((arrived[action.encode()] - t0) * 1e3)
            time.sleep(0.005)
    finally:
        ha.close()
        stop_bridge(bridge)
        replay.close()
    return out


def utterance_to_relay(port: int, tmp: Path, lines: int) -> dict[str, list[float]]:
    """ms from `Controller.handle` to the relay's pin write, bridge on and off, alternating."""
    loops = {"bridge off": build_replay(settings(None), tmp / "off.db"),
             "bridge on": build_replay(settings(port), tmp / "on.db")}
    assert loops["bridge on"].bridge.wait_connected(10)
    written: dict[str, float] = {}
    for name, replay in loops.items():
        replay.controller.devices.relays[MAIN_RELAY].watchers.append(
            lambda on, name=name: written.__setitem__(name, time.perf_counter()))
    times: dict[str, list[float]] = {name: [] for name in loops}
    try:
        for i in range(lines):
            order = list(loops) if i % 2 == 0 else list(loops)[::-1]
            for name in order:
                replay = loops[name]
                replay.clock.advance(30.0)
                replay.controller.pump()
                written.pop(name, None)
                t0 = time.perf_counter()
                replay.controller.handle(text_utterance(PHRASES[i % 2]))
                if name in written:  # the relay was driven (acted)
                    times[name].append((written[name] - t0) * 1e3)
    finally:
        for replay in loops.values():
            replay.close()
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--toggles", type=int, default=300)
    ap.add_argument("--lines", type=int, default=300)
    args = ap.parse_args()
    if MOSQUITTO is None:
        sys.exit("mosquitto is not installed (apt-get install mosquitto)")
    with tempfile.TemporaryDirectory() as tmp:
        broker = Broker(Path(tmp) / "broker").start()
        try:
            state = state_latency(broker.port, Path(tmp), args.toggles)
            loop = utterance_to_relay(broker.port, Path(tmp), args.lines)
        finally:
            broker.stop()
    info = header()
    print(f"{info['date']}; {info['machine']}; {info['command']}\n")
    print("| what | n | median ms | p95 ms |\n|---|---|---|---|")
    print(f"| relay change -> retained state at the subscriber | {len(state)} | "
          f"{statistics.median(state):.3f} | {pct(state, 0.95):.3f} |")
    for name, values in loop.items():
        print(f"| utterance -> relay, {name} | {len(values)} | {statistics.median(values):.3f} | "
              f"{pct(values, 0.95):.3f} |")
    ratio = statistics.median(loop["bridge on"]) / statistics.median(loop["bridge off"])
    ratio95 = pct(loop["bridge on"], 0.95) / pct(loop["bridge off"], 0.95)
    print(f"\nutterance -> relay, bridge on / off: {ratio:.3f} (median), {ratio95:.3f} (p95); "
          f"target <= 1.05: {'met' if ratio <= 1.05 else 'NOT met'}")


if __name__ == "__main__":
    main()
