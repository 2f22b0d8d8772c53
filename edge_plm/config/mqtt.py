"""``[mqtt]``: the optional bridge to a home hub, with its checks (`MqttConfig.problems`) and
the topic id a name becomes (`topic_id`)."""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path

from edge_plm.config.keys import Problems, setting


@dataclass
class MqttConfig:
    """``[mqtt]``: the optional bridge to a home hub (Home Assistant's MQTT discovery;
    `edge_plm.bridge`). Off by default; ``paho-mqtt`` (the ``mqtt`` extra) is imported only
    when it is on."""

    enabled: bool = setting(False, "publish every relay to an MQTT broker with Home Assistant "
                                   "discovery and take ON/OFF commands (docs/deploy.md)")
    host: str = setting("localhost", "the broker's host name or address")
    port: int = setting(1883, "1883 (plain) or 8883 (TLS), usually")
    username: str = setting("", "empty: connect without a user name")
    password: str = setting("", "the user's password (or password_file; not both)")
    password_file: str = setting("", "a file holding the password (first line), readable only "
                                     "by its owner (mode 0600 or 0400)")
    tls: bool = setting(False, "connect with TLS")
    ca_file: str = setting("", "TLS: the CA certificate(s) that signed the broker's (empty: the "
                               "system's CAs)")
    certfile: str = setting("", "TLS client certificate (optional, with keyfile)")
    keyfile: str = setting("", "TLS client key, readable only by its owner")
    client_id: str = setting("", "empty: edge-plm-<node_id>-<process id>")
    node_id: str = setting("", "the board's id in discovery topics and unique ids (a-z, 0-9, _, "
                               "-); empty: <hostname>-<6 hex characters of /etc/machine-id, or "
                               "of the MAC address>, unique per board")
    base: str = setting("", "topic prefix of the board's topics; empty: edge-plm/<node_id>")
    discovery_prefix: str = setting("homeassistant", "Home Assistant's discovery prefix")
    qos: int = setting(1, "QoS of what the board publishes and subscribes to (0, 1 or 2)")
    keepalive_s: int = setting(60, "MQTT keepalive; a lost broker is noticed after about 1.5x this")
    publish_transcripts: bool = setting(False, "privacy: the last-decision sensor also carries "
                                               "the transcript (off: only the decision leaves "
                                               "the board)")

    def problems(self, device_names: list[str]) -> list[str]:
        """The ``[mqtt]`` checks: ranges and topic shapes always; files and the devices' topic
        ids (of `device_names`) only when the bridge is on."""
        m, out = self, Problems()
        out.need(1 <= m.port <= 65535, f"mqtt.port must be in 1..65535, got {m.port}")
        out.need(m.qos in (0, 1, 2), f"mqtt.qos must be 0, 1 or 2, got {m.qos}")
        out.need(5 <= m.keepalive_s <= 3600, f"mqtt.keepalive_s must be in 5..3600, got {m.keepalive_s}")
        for key in ("base", "discovery_prefix"):
            value = getattr(m, key)
            out.need(not any(c in value for c in "+#\0") and not value.startswith("/")
                     and not value.endswith("/"),
                     f"mqtt.{key} must be a topic without wildcards (+, #) or a leading or "
                     f"trailing /, got {value!r}")
        out.need(bool(m.discovery_prefix), "mqtt.discovery_prefix must not be empty")
        out.need(not m.node_id or topic_id(m.node_id) == m.node_id,
                 f"mqtt.node_id may hold only a-z, 0-9, _ and -, got {m.node_id!r}")
        out.need(not (m.password and m.password_file), "mqtt: give password or password_file, not both")
        out.need(not (m.certfile or m.keyfile) or bool(m.certfile and m.keyfile),
                 "mqtt: a TLS client certificate needs both certfile and keyfile")
        if not m.enabled:
            return out
        out.need(bool(m.host.strip()), "mqtt.host must name the broker when mqtt.enabled = true")
        for key in ("password_file", "keyfile"):
            if getattr(m, key):
                problem = _private_file_problem(key, getattr(m, key))
                if problem:
                    out.append(problem)
        for key in ("ca_file", "certfile"):
            value = getattr(m, key)
            if value and not Path(value).expanduser().is_file():
                out.append(f"mqtt.{key} {value!r} is not a file")
        ids: dict[str, str] = {}
        for name in device_names:
            key = topic_id(name)
            if key in ids:
                out.append(f"mqtt: the devices {ids[key]!r} and {name!r} have the same topic id "
                           f"{key!r}; rename one")
            ids.setdefault(key, name)
        return out


#: characters a topic level built from a name may hold (Home Assistant's node / object ids)
_TOPIC_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


def topic_id(name: str) -> str:
    """A device (or host) name as one topic level and discovery id: lower case, every
    character but a-z, 0-9, _ and - replaced by _ ("Big Lamp" -> "big_lamp")."""
    out = "".join(c if c in _TOPIC_ID_CHARS else "_" for c in name.strip().lower())
    return out or "_"


def _private_file_problem(key: str, value: str) -> str | None:
    """A secret's file exists and is readable by its owner only (no group or other bits)."""
    path = Path(value).expanduser()
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError as exc:
        return f"mqtt.{key} {value!r}: {exc.strerror or exc}"
    if not path.is_file():
        return f"mqtt.{key} {value!r} is not a file"
    if mode & 0o077:
        return (f"mqtt.{key} {value!r} is readable by others (mode {mode:04o}); it holds a "
                f"secret: chmod 600 {value}")
    return None
