"""The board's MQTT topics and payloads, Home Assistant's conventions (no I/O, no paho).

- availability ``<base>/status``: ``online`` / ``offline`` (retained; ``offline`` is the last will);
- per device (``[[devices]]``, or ``main``; its topic id `edge_plm.config.settings.topic_id`):
  discovery ``<discovery_prefix>/switch/<node_id>/<device>/config`` (retained JSON), state
  ``<base>/<device>/state`` (retained ``ON`` / ``OFF``), command ``<base>/<device>/set``
  (``ON`` / ``OFF``, exact and case-sensitive, as Home Assistant sends them);
- a dimmer (``kind = "dimmer"``) is discovered as a ``light`` instead
  (``<discovery_prefix>/light/<node_id>/<device>/config``), with the same state and command
  topics and its brightness: state ``<base>/<device>/brightness`` (retained, ``1``..``100``: the
  level it is or would be lit at), command ``<base>/<device>/brightness/set`` (``0``..``100``);
- the last decision: ``<base>/last_decision`` (retained JSON; the transcript only with
  ``mqtt.publish_transcripts``), discovered as a ``sensor``.

docs/contracts.md lists them with their payloads.
"""

from __future__ import annotations

import hashlib
import json
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from edge_plm import __version__
from edge_plm.config.settings import MqttConfig, topic_id
from edge_plm.decide.policy import Action, Decision


class LoopOutcome(Protocol):
    """What the bridge reads of an utterance's outcome (the loop's `Outcome`)."""

    @property
    def interaction_id(self) -> int | None: ...
    @property
    def transcript(self) -> str: ...
    @property
    def decision(self) -> Decision | None: ...
    @property
    def prediction(self) -> str | None: ...
    @property
    def confidence(self) -> float | None: ...
    @property
    def action(self) -> Action | None: ...

ONLINE, OFFLINE = "online", "offline"
ON, OFF = "ON", "OFF"
PRESS = "PRESS"  # a button's press (Home Assistant's default payload_press)
#: the longest command payload looked at (``OFF``); anything longer is junk, unread
MAX_COMMAND_BYTES = 16
#: a dimmer's brightness in its topics: 0..BRIGHTNESS_SCALE (a percentage of full level)
BRIGHTNESS_SCALE = 100
#: Home Assistant turns a light on with a brightness command alone (never ``ON`` after a
#: brightness change: that ``ON`` would reach the person's switch as a flip)
ON_COMMAND_TYPE = "brightness"


MACHINE_ID = Path("/etc/machine-id")
#: the ``origin`` block of every discovery config (what published it)
ORIGIN = {"name": "edge-plm", "sw_version": __version__}


def mac_address() -> str | None:
    """The board's MAC address (``aa:bb:...``), or None when Python only has a random one."""
    node = uuid.getnode()
    if (node >> 40) & 1:  # the multicast bit: uuid made it up
        return None
    return ":".join(f"{(node >> s) & 0xff:02x}" for s in range(40, -1, -8))


def board_suffix(machine_id: Path = MACHINE_ID) -> str:
    """6 hex characters unique per board: of a digest of ``/etc/machine-id`` (never the id
    itself), else of the MAC address; empty when neither is known."""
    try:
        ident = machine_id.read_text().strip()
    except OSError:
        ident = ""
    if not ident:
        ident = mac_address() or ""
    return hashlib.sha256(f"edge-plm:{ident}".encode()).hexdigest()[:6] if ident else ""


def node_id(hostname: str | None = None, suffix: str | None = None) -> str:
    """The board's id in topics and unique ids: its host name as a topic id and, so that two
    boards left on one host name (``raspberrypi``) never share entities, `board_suffix`."""
    host = topic_id(hostname or socket.gethostname())
    suffix = board_suffix() if suffix is None else suffix
    return f"{host}-{suffix}" if suffix else host


@dataclass(frozen=True)
class Topics:
    """Every topic of one board, from ``[mqtt]`` and the configured device names."""

    base: str
    prefix: str  # Home Assistant's discovery prefix
    node: str
    devices: dict[str, str]  # topic id -> device name, in configuration order
    lights: frozenset[str] = frozenset()  # the topic ids of the dimmers (discovered as lights)

    @classmethod
    def of(cls, cfg: MqttConfig, names: Sequence[str], hostname: str | None = None,
           suffix: str | None = None, dimmers: Sequence[str] = ()) -> Topics:
        """``mqtt.node_id``, else `node_id` (`hostname`, `suffix`: tests). `dimmers`: the
        names (of `names`) that are dimmers."""
        node = cfg.node_id or node_id(hostname, suffix)
        return cls(cfg.base or f"edge-plm/{node}", cfg.discovery_prefix, node,
                   {topic_id(n): n for n in names}, frozenset(topic_id(n) for n in dimmers))

    @property
    def status(self) -> str:
        return f"{self.base}/status"

    @property
    def commands(self) -> str:
        """The subscription for every device's command topic."""
        return f"{self.base}/+/set"

    @property
    def configs(self) -> str:
        """The subscription for the board's retained switch configs (to clear removed ones)."""
        return f"{self.prefix}/switch/{self.node}/+/config"

    @property
    def light_configs(self) -> str:
        """The subscription for the board's retained light configs (to clear removed ones)."""
        return f"{self.prefix}/light/{self.node}/+/config"

    @property
    def brightness_commands(self) -> str:
        """The subscription for every dimmer's brightness command topic."""
        return f"{self.base}/+/brightness/set"

    @property
    def hub_status(self) -> str:
        """Home Assistant's birth and last will (``online`` / ``offline``)."""
        return f"{self.prefix}/status"

    @property
    def model_version(self) -> str:
        return f"{self.base}/model_version"

    @property
    def asks(self) -> str:
        return f"{self.base}/asks_today"

    @property
    def undo_press(self) -> str:
        """The command topic of the *undo last lesson* button (payload ``PRESS``)."""
        return f"{self.base}/undo_last_lesson/press"

    @property
    def undo_config(self) -> str:
        return f"{self.prefix}/button/{self.node}/undo_last_lesson/config"

    def undo_discovery(self, qos: int, mac: str | None = None) -> dict:
        """The retained discovery config of the *undo last lesson* button."""
        return {"name": "undo last lesson", "unique_id": f"edge-plm-{self.node}-undo_last_lesson",
                "default_entity_id": self.entity_id("button", "undo_last_lesson"),
                "command_topic": self.undo_press, "payload_press": PRESS,
                "availability_topic": self.status, "entity_category": "config", "qos": qos,
                "icon": "mdi:undo", "device": self.device_block(mac), "origin": dict(ORIGIN)}

    def sensor_config(self, key: str) -> str:
        return f"{self.prefix}/sensor/{self.node}/{key}/config"

    @property
    def decision(self) -> str:
        return f"{self.base}/last_decision"

    @property
    def decision_config(self) -> str:
        return f"{self.prefix}/sensor/{self.node}/last_decision/config"

    def state(self, device_id: str) -> str:
        return f"{self.base}/{device_id}/state"

    def command(self, device_id: str) -> str:
        return f"{self.base}/{device_id}/set"

    def component(self, device_id: str) -> str:
        """Its Home Assistant entity: ``light`` for a dimmer, else ``switch``."""
        return "light" if device_id in self.lights else "switch"

    def config(self, device_id: str) -> str:
        return f"{self.prefix}/{self.component(device_id)}/{self.node}/{device_id}/config"

    def brightness_state(self, device_id: str) -> str:
        return f"{self.base}/{device_id}/brightness"

    def brightness_command(self, device_id: str) -> str:
        return f"{self.base}/{device_id}/brightness/set"

    def id_of(self, name: str) -> str:
        return topic_id(name)

    def device_block(self, mac: str | None = None) -> dict:
        """The ``device`` block every entity of the board shares (``connections``: its MAC
        address, when known, as ESPHome and Tasmota give it)."""
        out = {"identifiers": [f"edge-plm-{self.node}"], "name": f"edge-plm {self.node}",
               "manufacturer": "edge-plm", "model": "voice switch", "sw_version": __version__}
        if mac:
            out["connections"] = [["mac", mac]]
        return out

    def entity_id(self, domain: str, key: str) -> str:
        """``default_entity_id`` (Home Assistant 2025.10+, in place of ``object_id``)."""
        return f"{domain}.edge_plm_{self.node.replace('-', '_')}_{key.replace('-', '_')}"

    def discovery(self, device_id: str, qos: int, mac: str | None = None) -> dict:
        """The retained discovery config of one device's entity: a switch, or a dimmer's light."""
        if device_id in self.lights:
            return self.light_discovery(device_id, qos, mac)
        return {"name": self.devices[device_id], "unique_id": f"edge-plm-{self.node}-{device_id}",
                "default_entity_id": self.entity_id("switch", device_id),
                "state_topic": self.state(device_id), "command_topic": self.command(device_id),
                "availability_topic": self.status, "payload_available": ONLINE,
                "payload_not_available": OFFLINE, "payload_on": ON, "payload_off": OFF,
                "state_on": ON, "state_off": OFF, "optimistic": False, "retain": False,
                "qos": qos, "device": self.device_block(mac), "origin": dict(ORIGIN)}

    def light_discovery(self, device_id: str, qos: int, mac: str | None = None) -> dict:
        """A dimmer's light entity (Home Assistant's default schema): on / off as a switch's,
        and its brightness, 0..100."""
        return {"name": self.devices[device_id], "unique_id": f"edge-plm-{self.node}-{device_id}",
                "default_entity_id": self.entity_id("light", device_id), "schema": "default",
                "state_topic": self.state(device_id), "command_topic": self.command(device_id),
                "brightness_state_topic": self.brightness_state(device_id),
                "brightness_command_topic": self.brightness_command(device_id),
                "brightness_scale": BRIGHTNESS_SCALE, "on_command_type": ON_COMMAND_TYPE,
                "availability_topic": self.status, "payload_available": ONLINE,
                "payload_not_available": OFFLINE, "payload_on": ON, "payload_off": OFF,
                "optimistic": False, "retain": False, "qos": qos, "device": self.device_block(mac),
                "origin": dict(ORIGIN)}

    def decision_discovery(self, qos: int, mac: str | None = None) -> dict:
        """The retained discovery config of the last-decision sensor (a diagnostic)."""
        return {"name": "last decision", "unique_id": f"edge-plm-{self.node}-last_decision",
                "default_entity_id": self.entity_id("sensor", "last_decision"),
                "state_topic": self.decision, "value_template": "{{ value_json.decision }}",
                "json_attributes_topic": self.decision, "availability_topic": self.status,
                "entity_category": "diagnostic", "qos": qos, "icon": "mdi:account-voice",
                "device": self.device_block(mac), "origin": dict(ORIGIN)}

    def sensor_discovery(self, key: str, name: str, icon: str, qos: int,
                         mac: str | None = None, **extra) -> dict:
        """The retained discovery config of a diagnostic sensor at ``<base>/<key>``."""
        return {"name": name, "unique_id": f"edge-plm-{self.node}-{key}",
                "default_entity_id": self.entity_id("sensor", key),
                "state_topic": f"{self.base}/{key}", "availability_topic": self.status,
                "entity_category": "diagnostic", "qos": qos, "icon": icon,
                "device": self.device_block(mac), "origin": dict(ORIGIN), **extra}

    @property
    def timers(self) -> str:
        return f"{self.base}/timers_pending"

    def timers_discovery(self, qos: int, mac: str | None = None) -> dict:
        """The pending-timers sensor: the count, the timers as attributes (timed commands)."""
        return self.sensor_discovery("timers_pending", "pending timers", "mdi:timer-outline", qos, mac,
                                     value_template="{{ value_json.count }}",
                                     json_attributes_topic=self.timers)

    def sensors(self, qos: int, mac: str | None = None) -> dict[str, dict]:
        """Every sensor's config topic -> its discovery config."""
        return {self.decision_config: self.decision_discovery(qos, mac),
                self.sensor_config("model_version"): self.sensor_discovery(
                    "model_version", "model version", "mdi:source-branch", qos, mac),
                self.sensor_config("asks_today"): self.sensor_discovery(
                    "asks_today", "asks today", "mdi:help-circle-outline", qos, mac,
                    state_class="total_increasing")}

    def command_device(self, topic: str) -> str | None:
        """The device id a command topic is for (None: not a command topic of this board)."""
        head, sep, rest = topic.partition(self.base + "/")
        if head or not sep or not rest.endswith("/set"):
            return None
        device_id = rest[: -len("/set")]
        return device_id if "/" not in device_id else None

    def brightness_device(self, topic: str) -> str | None:
        """The device id a brightness command topic is for (None: not one of this board's)."""
        head, sep, rest = topic.partition(self.base + "/")
        if head or not sep or not rest.endswith("/brightness/set"):
            return None
        device_id = rest[: -len("/brightness/set")]
        return device_id if device_id and "/" not in device_id else None

    def config_device(self, topic: str) -> str | None:
        """The device id of one of the board's switch or light config topics (else None)."""
        for component in ("switch", "light"):
            start = f"{self.prefix}/{component}/{self.node}/"
            if topic.startswith(start) and topic.endswith("/config"):
                device_id = topic[len(start): -len("/config")]
                return device_id if device_id and "/" not in device_id else None
        return None


def command_state(payload: bytes) -> bool | None:
    """``ON`` -> True, ``OFF`` -> False; anything else (other case, spaces, longer): None."""
    if len(payload) > MAX_COMMAND_BYTES:
        return None
    return {b"ON": True, b"OFF": False}.get(bytes(payload))


def brightness_level(payload: bytes) -> float | None:
    """A brightness command, ``0``..``100`` (ASCII digits, a decimal part allowed: ``37.5``)
    -> the level 0..1 (0: off); anything else (a sign, spaces, JSON, out of range, longer than
    16 bytes): None."""
    if not payload or len(payload) > MAX_COMMAND_BYTES:
        return None
    whole, dot, part = bytes(payload).partition(b".")
    if not whole.isdigit() or not whole.isascii() or (dot and not (part.isdigit() and part.isascii())):
        return None
    value = float(payload)
    return value / BRIGHTNESS_SCALE if value <= BRIGHTNESS_SCALE else None


def brightness_payload(level: float) -> str:
    """A lit level as its brightness state, ``1``..``100`` (never 0: off is the state topic's)."""
    return str(min(BRIGHTNESS_SCALE, max(1, round(level * BRIGHTNESS_SCALE))))


def shown(payload: bytes, limit: int = 24) -> str:
    """A payload for one log line: its length and a short, escaped start."""
    text = repr(bytes(payload[:limit]))
    return f"{text}{'...' if len(payload) > limit else ''} ({len(payload)} bytes)"


def state_payload(on: bool) -> str:
    return ON if on else OFF


def decision_payload(decision: dict, with_transcript: bool) -> str:
    """The last decision as the sensor's JSON (the transcript only when configured)."""
    out = {k: v for k, v in decision.items() if k != "transcript"}
    if with_transcript and "transcript" in decision:
        out["transcript"] = decision["transcript"]
    return json.dumps(out, sort_keys=True)


def discovery_payload(config: dict) -> str:
    return json.dumps(config, sort_keys=True)


__all__ = ["BRIGHTNESS_SCALE", "MAX_COMMAND_BYTES", "ON_COMMAND_TYPE", "OFF", "OFFLINE", "ON", "ONLINE", "ORIGIN",
           "LoopOutcome", "Topics", "board_suffix", "brightness_level", "brightness_payload", "command_state",
           "decision_payload", "discovery_payload", "mac_address", "node_id", "shown", "state_payload"]
