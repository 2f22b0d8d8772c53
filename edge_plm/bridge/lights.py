"""The bridge's dimmers, Home Assistant lights: brightness out, brightness commands in.

- **Brightness out.** Each dimmer's level change (`Dimmer.level_watchers`: voice, its level
  control, a remote command, ON / OFF) only queues the level for the bridge's thread (it never
  touches the network). A lit level is published, retained, on ``<base>/<device>/brightness``
  as ``1``..``100``; going off publishes no brightness (the state topic says ``OFF``; the
  retained brightness stays the level ON lights it at again). Every connect publishes each
  dimmer's lit level (`Dimmer.lit_level`).
- **Brightness in.** A brightness command (``0``..``100`` on ``<base>/<device>/brightness/set``,
  paho's network thread) sets the dimmer's level at once (`Devices.remote_level`: clamped to
  [``min_level``, 1]; ``0`` is off; turning it on or off is a toggle under the rate limit) and
  is queued as a `LevelChange` with source ``remote`` for the loop, beside the level control's.
  A bad payload, a retained command or a device that is not a dimmer is ignored (logged by the
  bridge's rate-limited warning) and moves nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from edge_plm.bridge import topics as t

log = logging.getLogger(__name__)


class Lights:
    """The dimmers of one bridge (`MqttBridge.lights`)."""

    def __init__(self, devices: Any, topics: t.Topics, put: Callable[[tuple], None],
                 ignore: Callable[[str, bytes, str], None]) -> None:
        self.devices = devices
        self.topics = topics
        self._put = put  # the bridge's outbox (its own thread publishes)
        self._ignore = ignore  # the bridge's rate-limited "ignored" log line
        self._watchers: dict[str, Callable[[float], None]] = {}
        self.commands = 0  # brightness commands that set a dimmer

    def _dimmer(self, device_id: str) -> Any:
        return self.devices.dimmers[self.topics.devices[device_id]]

    def watch(self) -> None:
        """Queue every level change of every dimmer (the bridge's `start`)."""
        for device_id in self.topics.lights:
            watcher = self._watcher(device_id)
            self._watchers[device_id] = watcher
            self._dimmer(device_id).level_watchers.append(watcher)

    def unwatch(self) -> None:
        for device_id, watcher in self._watchers.items():
            try:
                self._dimmer(device_id).level_watchers.remove(watcher)
            except ValueError:
                pass
        self._watchers.clear()

    def _watcher(self, device_id: str) -> Callable[[float], None]:
        def watch(level: float) -> None:  # on the thread that moved the dimmer: never blocks
            self._put(("brightness", device_id, float(level)))
        return watch

    def state(self, device_id: str, level: float) -> tuple[str, str] | None:
        """The retained brightness message of a level (None: off, nothing to publish)."""
        if level <= 0:
            return None
        return self.topics.brightness_state(device_id), t.brightness_payload(level)

    def states(self) -> list[tuple[str, str]]:
        """Every dimmer's brightness message for a connect: the level it is (or would be) lit at."""
        return [(self.topics.brightness_state(d), t.brightness_payload(self._dimmer(d).lit_level))
                for d in self.topics.devices if d in self.topics.lights]

    def command(self, topic: str, device_id: str, payload: bytes, retained: bool) -> None:
        """A brightness command (paho's thread): set the dimmer, record it as ``remote``."""
        if retained:
            return self._ignore(topic, payload, "a retained command (stale; commands are not retained)")
        if device_id not in self.topics.lights:
            return self._ignore(topic, payload, "no such dimmer")
        level = t.brightness_level(payload)
        if level is None:
            return self._ignore(topic, payload, f"not a brightness 0..{t.BRIGHTNESS_SCALE}")
        name = self.topics.devices[device_id]
        self.commands += 1
        change = self.devices.remote_level(name, level)
        if change is None:
            log.info("mqtt: brightness %s for %r changed nothing (already there, or the rate limit "
                     "refused turning it %s)", t.shown(payload), name, "off" if level == 0 else "on")
        else:
            log.info("mqtt: %r level %.2f -> %.2f (remote)", name, change.before, change.after)


__all__ = ["Lights"]
