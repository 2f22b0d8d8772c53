"""The person's level control of a dimmer: a rotary encoder or an up / down button pair.

Like a real dimmer knob the control moves the light directly (`Dimmer.move`, on gpiozero's
callback thread) and records what it did as a `LevelChange` in a thread-safe queue
(`LevelChanges`), which the loop's pump drains (`Devices.level_changes`): the person's level is
the teacher of the device's level as the person's switch is of its on / off.

- Rotary encoder (``encoder_pins = [a, b]``, gpiozero `RotaryEncoder`, pins pulled up, common
  to ground): each detent (one full quadrature cycle, gpiozero's step) moves the level by
  ``level_step * DETENT_SHARE`` (a quarter step: with the default ``level_step = 0.25``, 16
  detents from the lowest level to full). Clockwise brightens.
- Up / down buttons (``up_pin``, ``down_pin``, gpiozero `Button`, with the device's switch's
  ``switch_pull_up`` and ``switch_bounce_ms``): each press moves it by one ``level_step``; a
  held button counts once.

The dimmer's own rules apply (docs in `edge_plm.device.dimmer`): dimming stops at
``min_level`` and never turns the light off; brightening an off light turns it on at the
move's amount (an on / off toggle, so the rate limit may refuse it). A move that changed
nothing (already at the end, refused) records nothing. The bridge puts the person's remote
level changes (Home Assistant's brightness) into the same queue with ``source = "remote"``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from gpiozero import Button, Factory, RotaryEncoder

from edge_plm.device.dimmer import Dimmer
from edge_plm.device.relay import Clock, RelayClosed

log = logging.getLogger(__name__)

#: what one encoder detent moves, as a share of ``level_step``
DETENT_SHARE = 0.25
#: where a level change came from: the person's control on the board, or the home hub
SOURCES = ("control", "remote")


@dataclass(frozen=True)
class LevelChange:
    """One change of a dimmer's level by the person (its control, or the home hub)."""

    device: str
    before: float  # 0..1 (0: off)
    after: float
    at: float  # clock seconds
    source: str = "control"  # "control" | "remote"


class LevelChanges:
    """A thread-safe FIFO of `LevelChange`: the controls (gpiozero's threads) and the bridge
    (paho's thread) put, the loop drains."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: deque[LevelChange] = deque()

    def put(self, change: LevelChange) -> None:
        if change.source not in SOURCES:
            raise ValueError(f"a level change's source must be one of {', '.join(SOURCES)}, "
                             f"got {change.source!r}")
        with self._lock:
            self._items.append(change)

    def drain(self) -> list[LevelChange]:
        """Every queued change, oldest first; the queue is then empty."""
        with self._lock:
            out = list(self._items)
            self._items.clear()
            return out

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


@dataclass(frozen=True)
class LevelControlConfig:
    """A dimmer's control: `encoder_pins` (two pins) or `up_pin` and `down_pin`."""

    encoder_pins: tuple[int, ...] = ()
    up_pin: int = -1
    down_pin: int = -1
    pull_up: bool = True  # the buttons' (an encoder is always pulled up)
    bounce_ms: int = 50  # the buttons'

    @property
    def present(self) -> bool:
        return bool(self.encoder_pins) or self.up_pin != -1 or self.down_pin != -1


class LevelControl:
    """The person's level control of one dimmer (see the module docstring)."""

    def __init__(self, device: str, dimmer: Dimmer, cfg: LevelControlConfig, pin_factory: Factory,
                 changes: LevelChanges, clock: Clock = time.monotonic) -> None:
        encoder = len(cfg.encoder_pins) == 2
        buttons = cfg.up_pin != -1 and cfg.down_pin != -1
        if cfg.encoder_pins and not encoder:
            raise ValueError(f"{device!r}: encoder_pins needs two pins [a, b], got {list(cfg.encoder_pins)}")
        if encoder == buttons or (not buttons and (cfg.up_pin != -1 or cfg.down_pin != -1)):
            raise ValueError(f"{device!r}: a level control is a rotary encoder (encoder_pins) or an "
                             "up / down button pair (up_pin and down_pin), one of them")
        self.device = device
        self.cfg = cfg
        self._dimmer = dimmer
        self._changes = changes
        self._clock = clock
        self._encoder: RotaryEncoder | None = None
        self._buttons: list[Button] = []
        self.moves = 0  # level changes recorded (diagnostics)
        self._closed = False
        try:
            if encoder:
                a, b = cfg.encoder_pins
                self._encoder = RotaryEncoder(a, b, max_steps=0, pin_factory=pin_factory)
                self._encoder.when_rotated_clockwise = lambda: self._turn(+1, self.detent)
                self._encoder.when_rotated_counter_clockwise = lambda: self._turn(-1, self.detent)
            else:
                for pin, direction in ((cfg.up_pin, +1), (cfg.down_pin, -1)):
                    button = Button(pin, pull_up=cfg.pull_up, bounce_time=cfg.bounce_ms / 1000 or None,
                                    pin_factory=pin_factory)
                    self._buttons.append(button)
                    button.when_pressed = lambda d=direction: self._turn(d, None)
        except BaseException:
            self.close()
            raise

    @property
    def kind(self) -> str:
        return "encoder" if self._encoder is not None else "buttons"

    @property
    def pins(self) -> Sequence[int]:
        return tuple(self.cfg.encoder_pins) if self._encoder is not None else (self.cfg.up_pin, self.cfg.down_pin)

    @property
    def step(self) -> float:
        """What one press of the up / down buttons moves the level by."""
        return self._dimmer.level_step

    @property
    def detent(self) -> float:
        """What one encoder detent moves the level by."""
        return self._dimmer.level_step * DETENT_SHARE

    def _turn(self, direction: int, amount: float | None) -> None:
        """The person moved the control (gpiozero's thread): move the light, record it."""
        now = self._clock()
        try:
            before, after = self._dimmer.move(direction, now, amount)
        except RelayClosed:
            return
        except Exception:  # never let a failure end gpiozero's callback thread
            log.exception("%r: the level control's move failed", self.device)
            return
        if after != before:
            self.moves += 1
            self._changes.put(LevelChange(self.device, before, after, now, "control"))
            log.info("%r: level %.2f -> %.2f (its control)", self.device, before, after)

    def close(self) -> None:
        """Release the pins (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._encoder is not None:
            self._encoder.when_rotated_clockwise = None
            self._encoder.when_rotated_counter_clockwise = None
            self._encoder.close()
        for button in self._buttons:
            button.when_pressed = None
            button.close()


__all__ = ["DETENT_SHARE", "SOURCES", "LevelChange", "LevelChanges", "LevelControl", "LevelControlConfig"]
