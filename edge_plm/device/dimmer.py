"""The dimmer: a `Relay` whose output is PWM (gpiozero `PWMOutputDevice`), with a level.

A dimmer is a relay in everything the rest of the code uses (`Relay.set`, `is_on`, `on_change`,
`watchers`, `record_state`, `next_allowed`, `close`, ``cfg.pin``, the exit handlers), so ON /
OFF (voice, the person's switch, restore, the MQTT bridge) drive it unchanged:

- ON lights it at its *lit level* (`Dimmer.lit_level`: the last level it was lit at; 1.0 until
  it was dimmed), OFF sets the duty cycle to 0. The safe state (``gpio.relay_safe_state``) is
  OFF, or ON at the lit level.
- `Dimmer.level` is the duty cycle, 0..1 (0 = off), regardless of the pin's polarity
  (``relay_active_high = false``: the pin's duty cycle is ``1 - level``).
- `Dimmer.set_level` sets a level: a level > 0 is clamped to [``min_level``, 1], 0 (or below)
  is off. `Dimmer.step` (and `Dimmer.move`) move it by ``level_step`` (or a given amount):
  dimming never goes below ``min_level`` and never turns it off (only OFF or level 0 does);
  brightening an off dimmer turns it on at the step's amount (``level_step``; at least
  ``min_level``), as a real dimmer knob turned up from off starts low; dimming an off dimmer
  does nothing.

Rate limit: a change from off to lit or from lit to off is a toggle, refused inside
``min_toggle_interval_ms`` of the previous toggle exactly as `Relay.set` refuses it (False, a
WARNING). A change of level while lit is not a toggle and is never rate-limited (a dimmer moves
smoothly), and does not restart the toggle interval.

Watchers: `on_change` and `watchers` are told on/off changes as a relay's are (not level
changes); `Dimmer.level_watchers` are called with the new level after every change of level,
toggles included (after `watchers`), on the thread that made the change; each must return at
once and its failure is logged, never raised. `close` tells nobody (as a relay's).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpiozero import Factory, PWMOutputDevice
from gpiozero.exc import PinPWMUnsupported

from edge_plm.device.pins import PinFactoryError
from edge_plm.device.relay import Clock, Relay, RelayClosed, RelayConfig

log = logging.getLogger(__name__)

#: levels are kept to this many decimals (0.1 + 0.2 is 0.3, not 0.30000000000000004)
DECIMALS = 6


@dataclass(frozen=True)
class DimmerConfig(RelayConfig):
    """A dimmer's output: the relay's keys plus its PWM frequency and its level steps."""

    frequency: int = 100  # PWM frequency, Hz
    level_step: float = 0.25  # what one step (DIM / BRIGHTEN, an up / down press) moves, 0..1
    min_level: float = 0.05  # the lowest lit level


class DimmerPwmUnsupported(PinFactoryError):
    """The pin factory cannot drive PWM on the dimmer's pin."""


class Dimmer(Relay):
    """A dimmable light on one PWM output, starting in (and returning to) its safe state."""

    cfg: DimmerConfig

    def __init__(self, cfg: DimmerConfig, pin_factory: Factory, clock: Clock = time.monotonic,
                 install_exit_handlers: bool = True) -> None:
        if not (0 < cfg.min_level <= 1):
            raise ValueError(f"min_level must be in (0, 1], got {cfg.min_level}")
        if not (0 < cfg.level_step <= 1):
            raise ValueError(f"level_step must be in (0, 1], got {cfg.level_step}")
        if cfg.frequency <= 0:
            raise ValueError(f"PWM frequency must be > 0 Hz, got {cfg.frequency}")
        self._lit = 1.0  # the level ON lights it at
        self._level = 1.0 if cfg.safe_state else 0.0
        #: called with the new level after each change of level (see the module docstring)
        self.level_watchers: list[Callable[[float], None]] = []
        super().__init__(cfg, pin_factory, clock=clock, install_exit_handlers=install_exit_handlers)

    def _make_output(self, pin_factory: Factory) -> PWMOutputDevice:
        try:
            return PWMOutputDevice(self.cfg.pin, active_high=self.cfg.active_high,
                                   initial_value=self._level, frequency=self.cfg.frequency,
                                   pin_factory=pin_factory)
        except PinPWMUnsupported as exc:
            raise DimmerPwmUnsupported(
                f"dimmer on pin {self.cfg.pin}: the pin factory cannot drive PWM on it "
                f"({exc or type(exc).__name__}); use a factory with PWM (lgpio, rpigpio, pigpio)") from exc

    # --- what a relay has --------------------------------------------------------------
    @property
    def is_on(self) -> bool:
        """True when lit (any level > 0)."""
        return self._level > 0

    def _drive(self, on: bool) -> None:
        self._write(self._lit if on else 0.0)

    def _write(self, level: float) -> None:
        """The duty cycle (caller holds the lock, or is building / closing the dimmer)."""
        self._device.value = level
        self._level = level

    def _tell(self, on: bool) -> None:
        super()._tell(on)
        self._tell_level()

    def _tell_level(self) -> None:
        for watcher in list(self.level_watchers):
            try:
                watcher(self._level)
            except Exception:
                log.exception("dimmer on pin %s: a watcher of its level failed", self.cfg.pin)

    # --- levels ------------------------------------------------------------------------
    @property
    def level(self) -> float:
        """The duty cycle now, 0..1 (0: off)."""
        return self._level

    @property
    def lit_level(self) -> float:
        """The level ON lights it at: the level it was last lit at (1.0 until dimmed)."""
        return self._lit

    @property
    def level_step(self) -> float:
        return self.cfg.level_step

    @property
    def min_level(self) -> float:
        return self.cfg.min_level

    def clamp(self, level: float) -> float:
        """`level` as the dimmer takes it: <= 0 is 0 (off), else within [min_level, 1].
        NaN is a ValueError."""
        level = float(level)
        if math.isnan(level):
            raise ValueError("a dimmer level must be a number, got NaN")
        if level <= 0:
            return 0.0
        return round(min(1.0, max(self.cfg.min_level, level)), DECIMALS)

    def set_level(self, level: float, now: float | None = None) -> bool:
        """Set the level (`clamp`ed). True when the dimmer is now at that level; False when
        it was a toggle (off -> lit, lit -> off) the rate limit refused. Raises `RelayClosed`
        after `close`."""
        return self.change_level(level, now) is not None

    def change_level(self, level: float, now: float | None = None) -> tuple[float, float] | None:
        """`set_level`, answering ``(level before, level after)`` read and written under one
        lock, or None when the rate limit refused the toggle."""
        now = self._clock() if now is None else now
        target = self.clamp(level)
        with self._lock:
            if self._closed:
                raise RelayClosed("dimmer is closed; cannot set its level")
            before = self._level
            return (before, self._level) if self._move_to(target, now) else None

    def move(self, direction: int, now: float | None = None,
             amount: float | None = None) -> tuple[float, float]:
        """One step up (`direction` > 0) or down (< 0) by `amount` (default ``level_step``):
        ``(level before, level after)``, read and written under one lock (see the module
        docstring for the edges: never below ``min_level``, never off; up from off lights it
        at the step's amount). A refused toggle leaves it as it was."""
        if not direction:
            raise ValueError("direction must be +1 (brighten) or -1 (dim), got 0")
        amount = self.cfg.level_step if amount is None else float(amount)
        if not amount > 0:
            raise ValueError(f"a step must be > 0, got {amount}")
        now = self._clock() if now is None else now
        with self._lock:
            if self._closed:
                raise RelayClosed("dimmer is closed; cannot step its level")
            before = self._level
            if before == 0:
                if direction < 0:
                    return before, before  # an off light stays off
                target = self.clamp(amount)
            else:
                target = self.clamp(max(self.cfg.min_level, before + (amount if direction > 0 else -amount)))
            self._move_to(target, now)
            return before, self._level

    def set_lit_level(self, level: float) -> None:
        """The level ON lights it at (a restart restores it, `edge_plm.device.restore`); lit
        now: it goes there (not a toggle, no rate limit). A level <= 0 is refused."""
        target = self.clamp(level)
        if target <= 0:
            raise ValueError(f"a lit level must be > 0, got {level}")
        with self._lock:
            if self._closed:
                raise RelayClosed("dimmer is closed; cannot set its lit level")
            self._lit = target
            if self.is_on and target != self._level:
                self._write(target)
                self._tell_level()

    def step(self, direction: int, now: float | None = None) -> float:
        """One ``level_step`` up (+1) or down (-1); the level after it (`move`)."""
        return self.move(direction, now)[1]

    def _move_to(self, target: float, now: float) -> bool:
        """Write `target` (already clamped; caller holds the lock): a toggle obeys the rate
        limit and tells `on_change` and `watchers`; every change tells `level_watchers`."""
        if target == self._level:
            return True
        on = target > 0
        toggle = on != self.is_on
        if toggle and self._refused(on, now):
            return False
        if on:
            self._lit = target
        self._write(target)
        if toggle:
            self._last_toggle = now
            log.info("dimmer on pin %s -> %s", self.cfg.pin, f"ON at {target:.2f}" if on else "OFF")
            self._record(on)
            self._tell(on)
        else:
            log.debug("dimmer on pin %s -> level %.2f", self.cfg.pin, target)
            self._tell_level()
        return True


__all__ = ["Dimmer", "DimmerConfig", "DimmerPwmUnsupported"]
