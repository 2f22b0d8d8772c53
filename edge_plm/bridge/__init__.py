"""Bridges to a home hub: the optional MQTT bridge with Home Assistant discovery (``[mqtt]``).

`start_bridge` is all the loop calls: None when ``[mqtt]`` is off (``paho-mqtt``, the ``mqtt``
extra, is not even imported) or cannot be set up (logged once; the device works without it).
The bridge consumes relay changes (`Relay.watchers`) and feeds remote toggles to the person's
switches (`PersonSwitch.remote`); topics and payloads: `edge_plm.bridge.topics`, docs/contracts.md.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def start_bridge(settings: Any, devices: Any, status_file: Path | None = None) -> Any:
    """The started `MqttBridge` of ``settings.mqtt`` for `devices`, or None (off, or it cannot
    be built: paho missing, an unreadable password file, a bad TLS file; said once)."""
    if not settings.mqtt.enabled:
        return None
    try:
        from edge_plm.bridge.mqtt import MqttBridge  # noqa: PLC0415 - imports paho
        from edge_plm.bridge.topics import Topics  # noqa: PLC0415

        topics = Topics.of(settings.mqtt, devices.names)
        return MqttBridge(settings.mqtt, devices, topics, status_file=status_file).start()
    except ImportError as exc:
        log.error("mqtt: the bridge needs paho-mqtt (pip install 'edge-plm[mqtt]'): %s; "
                  "running without it", exc)
    except (OSError, ValueError) as exc:  # password file, TLS files
        log.error("mqtt: cannot set up the bridge: %s: %s; running without it",
                  type(exc).__name__, exc)
    return None


def stop_bridge(bridge: Any) -> None:
    """Stop `bridge` (None: nothing); a failure is logged, never raised."""
    if bridge is None:
        return
    try:
        bridge.stop()
    except Exception:
        log.exception("mqtt: the bridge did not stop cleanly")


__all__ = ["start_bridge", "stop_bridge"]
