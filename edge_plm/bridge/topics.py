"""The board's MQTT topics and payloads, Home Assistant's conventions (no I/O, no paho).

- availability ``<base>/status``: ``online`` / ``offline`` (retained; ``offline`` is the last will);
- per device (``[[devices]]``, or ``main``; its topic id `edge_plm.config.settings.topic_id`):
  discovery ``<discovery_prefix>/switch/<node_id>/<device>/config`` (retained JSON), state
  ``<base>/<device>/state`` (retained ``ON`` / ``OFF``), command ``<base>/<device>/set``
  (``ON`` / ``OFF``, exact and case-sensitive, as Home Assistant sends them);
- the last decision: ``<base>/last_decision`` (retained JSON; the transcript only with
  ``mqtt.publish_transcripts``), discovered as a ``sensor``.

docs/contracts.md lists them with their payloads.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Sequence
from dataclasses import dataclass
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
#: the longest command payload looked at (``OFF``); anything longer is junk, unread
MAX_COMMAND_BYTES = 16


def node_id(hostname: str | None = None) -> str:
    """The board's id in topics and unique ids: its host name as a topic id."""
    return topic_id(hostname or socket.gethostname())


@dataclass(frozen=True)
class Topics:
    """Every topic of one board, from ``[mqtt]`` and the configured device names."""

    base: str
    prefix: str  # Home Assistant's discovery prefix
    node: str
    devices: dict[str, str]  # topic id -> device name, in configuration order

    @classmethod
    def of(cls, cfg: MqttConfig, names: Sequence[str], hostname: str | None = None) -> Topics:
        node = node_id(hostname)
        return cls(cfg.base or f"edge-plm/{node}", cfg.discovery_prefix, node,
                   {topic_id(n): n for n in names})

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
    def decision(self) -> str:
        return f"{self.base}/last_decision"

    @property
    def decision_config(self) -> str:
        return f"{self.prefix}/sensor/{self.node}/last_decision/config"

    def state(self, device_id: str) -> str:
        return f"{self.base}/{device_id}/state"

    def command(self, device_id: str) -> str:
        return f"{self.base}/{device_id}/set"

    def config(self, device_id: str) -> str:
        return f"{self.prefix}/switch/{self.node}/{device_id}/config"

    def id_of(self, name: str) -> str:
        return topic_id(name)

    def device_block(self) -> dict:
        """The ``device`` block every entity of the board shares."""
        return {"identifiers": [f"edge-plm-{self.node}"], "name": f"edge-plm {self.node}",
                "manufacturer": "edge-plm", "model": "voice switch", "sw_version": __version__}

    def discovery(self, device_id: str, qos: int) -> dict:
        """The retained discovery config of one device's switch entity."""
        return {"name": self.devices[device_id], "unique_id": f"edge-plm-{self.node}-{device_id}",
                "object_id": f"edge_plm_{self.node}_{device_id}",
                "state_topic": self.state(device_id), "command_topic": self.command(device_id),
                "availability_topic": self.status, "payload_available": ONLINE,
                "payload_not_available": OFFLINE, "payload_on": ON, "payload_off": OFF,
                "state_on": ON, "state_off": OFF, "optimistic": False, "retain": False,
                "qos": qos, "device": self.device_block()}

    def decision_discovery(self, qos: int) -> dict:
        """The retained discovery config of the last-decision sensor."""
        return {"name": "last decision", "unique_id": f"edge-plm-{self.node}-last_decision",
                "object_id": f"edge_plm_{self.node}_last_decision",
                "state_topic": self.decision, "value_template": "{{ value_json.decision }}",
                "json_attributes_topic": self.decision, "availability_topic": self.status,
                "qos": qos, "icon": "mdi:account-voice", "device": self.device_block()}

    def command_device(self, topic: str) -> str | None:
        """The device id a command topic is for (None: not a command topic of this board)."""
        head, sep, rest = topic.partition(self.base + "/")
        if head or not sep or not rest.endswith("/set"):
            return None
        device_id = rest[: -len("/set")]
        return device_id if "/" not in device_id else None

    def config_device(self, topic: str) -> str | None:
        """The device id of one of the board's switch config topics (else None)."""
        start = f"{self.prefix}/switch/{self.node}/"
        if not (topic.startswith(start) and topic.endswith("/config")):
            return None
        device_id = topic[len(start): -len("/config")]
        return device_id if device_id and "/" not in device_id else None


def command_state(payload: bytes) -> bool | None:
    """``ON`` -> True, ``OFF`` -> False; anything else (other case, spaces, longer): None."""
    if len(payload) > MAX_COMMAND_BYTES:
        return None
    return {b"ON": True, b"OFF": False}.get(bytes(payload))


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


__all__ = ["MAX_COMMAND_BYTES", "OFF", "OFFLINE", "ON", "ONLINE", "LoopOutcome", "Topics", "command_state",
           "decision_payload", "discovery_payload", "node_id", "shown", "state_payload"]
