"""Bridges to a home hub: the optional MQTT bridge with Home Assistant discovery (``[mqtt]``).

`start_bridge` is all the loop calls: None when ``[mqtt]`` is off (``paho-mqtt``, the ``mqtt``
extra, is not even imported) or cannot be set up (logged once; the device works without it).
The bridge consumes relay changes (`Relay.watchers`) and feeds remote toggles to the person's
switches (`PersonSwitch.remote`); a dimmer is a light whose brightness commands set its level
and are queued as remote `LevelChange` events (`Devices.remote_level`, `edge_plm.bridge.lights`);
topics and payloads: `edge_plm.bridge.topics`, docs/contracts.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from edge_plm.bridge.topics import LoopOutcome
from edge_plm.config.settings import Settings

if TYPE_CHECKING:
    from edge_plm.bridge.mqtt import MqttBridge
    from edge_plm.device import Devices

log = logging.getLogger(__name__)


def start_bridge(settings: Settings, devices: Devices, status_file: Path | None = None,
                 outcome_watchers: list[Callable[[LoopOutcome], None]] | None = None,
                 model_version: Callable[[], str | None] | None = None,
                 undo: Callable[[], None] | None = None,
                 timers: Callable[[], dict] | None = None) -> MqttBridge | None:
    """The started `MqttBridge` of ``settings.mqtt`` for `devices`, or None (off, or it cannot
    be built: paho missing, an unreadable password file, a bad TLS file; said once). With
    `outcome_watchers` (the loop's `Controller.watchers`), the bridge adds itself there to
    publish the last decision of each utterance. `model_version`: the live model's version
    (the model-version sensor). `undo`: the *undo last lesson* button's action (None: no
    button). `timers`: the pending timers (the pending-timers sensor; None: no sensor)."""
    if not settings.mqtt.enabled:
        return None
    try:
        from edge_plm.bridge.mqtt import MqttBridge  # noqa: PLC0415 - imports paho
        from edge_plm.bridge.topics import Topics  # noqa: PLC0415

        topics = Topics.of(settings.mqtt, devices.names,
                           dimmers=[n for n in devices.names if devices.is_dimmer(n)])
        bridge = MqttBridge(settings.mqtt, devices, topics, status_file=status_file,
                            model_version=model_version, undo=undo, timers=timers).start()
        if outcome_watchers is not None:
            outcome_watchers.append(bridge.on_outcome)
        return bridge
    except ImportError as exc:
        log.error("mqtt: the bridge needs paho-mqtt (pip install 'edge-plm[mqtt]'): %s; "
                  "running without it", exc)
    except (OSError, ValueError) as exc:  # password file, TLS files
        log.error("mqtt: cannot set up the bridge: %s: %s; running without it",
                  type(exc).__name__, exc)
    return None


def stop_bridge(bridge: MqttBridge | None) -> None:
    """Stop `bridge` (None: nothing); a failure is logged, never raised."""
    if bridge is None:
        return
    try:
        bridge.stop()
    except Exception:
        log.exception("mqtt: the bridge did not stop cleanly")


def clear_decision(settings: Settings) -> bool:
    """After `forget`: the retained last decision (it may hold a forgotten transcript) is
    replaced by an empty payload on the broker. True when done; nothing to do when ``[mqtt]``
    is off or publishes no transcripts."""
    m = settings.mqtt
    if not (m.enabled and m.publish_transcripts):
        return True
    try:
        from edge_plm.bridge.mqtt import clear_retained  # noqa: PLC0415 - imports paho
        from edge_plm.bridge.topics import Topics  # noqa: PLC0415
    except ImportError as exc:
        log.error("mqtt: cannot clear the retained last decision: %s", exc)
        return False
    ok, detail = clear_retained(m, Topics.of(m, []).decision)
    if not ok:
        log.error("mqtt: the retained last decision was not cleared: %s", detail)
    return ok


__all__ = ["clear_decision", "start_bridge", "stop_bridge"]
