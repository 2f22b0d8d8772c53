"""The person's own switch: a gpiozero `Button`, turned into "flip" events.

A *flip* is the person using the physical switch. Each flip carries the state the person now
wants the relay in (`FlipEvent.desired`):

- ``"momentary"`` (push button): each press is one flip; releases are not flips.
- ``"toggle"`` (latching switch): each change of position is one flip.

What a flip means ("the new desired state"): when a `reference` callable is given (normally the
relay's ``is_on``), a flip means *the opposite of what the relay is doing now*, for both modes.
This is how a staircase switch behaves and it is the only reading that stays right after the
voice path has switched the relay: if the voice turned the lamp on while the latching switch
sat in its "off" position, the person flips the switch to turn the lamp off, and that flip must
mean OFF (reading the new *position* would say ON, the lamp would not react, and the
interaction would be labelled wrongly). Without a reference, the switch keeps its own notion
of the desired state: toggle mode uses the new position, momentary mode inverts the previous
desired state (starting from ``initial_desired``). `FlipEvent.position` always carries the raw
position, so a controller can choose either reading.

Debounce: gpiozero's ``bounce_time`` is passed to the pin (real factories filter in the GPIO
library). On top of that, and because gpiozero's MockPin does not simulate bounce, this class
ignores every edge that comes within ``bounce_ms`` of the previous edge (a quiet-period filter,
timed by the injectable `clock`). The position is reconciled in `poll`/`wait_flip`: if the
settled level differs from the last accepted one (an edge was lost in the bounce), the change is
applied late (a toggle flip or a press is emitted with ``late=True``; a release is recorded).

A held-down push button counts once (only the press edge is a flip). When it is held longer
than ``hold_warn_s`` a single WARNING is logged for that press (found by `poll`), and a stream
of edges faster than the debounce interval never turns into a flood of flips.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from gpiozero import Button, Factory

from edge_plm.errors import EdgePlmError

log = logging.getLogger(__name__)

Clock = Callable[[], float]
MODES = ("toggle", "momentary")


@dataclass(frozen=True)
class FlipEvent:
    """One use of the physical switch."""

    ts: float  # clock seconds when the flip was detected
    desired: bool  # the relay state the person wants now (True = ON)
    position: bool  # raw switch position after the flip (True = pressed / closed contact)
    late: bool = False  # emitted by `poll`'s reconciliation after an edge lost in the bounce
    remote: bool = False  # not the switch: the person's command from the home hub (`remote`)


@dataclass(frozen=True)
class PersonSwitchConfig:
    """The switch part of `GpioConfig`."""

    pin: int
    mode: str = "toggle"
    pull_up: bool = True
    bounce_ms: int = 50
    hold_warn_s: float = 3.0
    initial_desired: bool = False


class PersonSwitchConfigError(EdgePlmError, ValueError):
    """The switch configuration is invalid (e.g. an unknown mode)."""


class PersonSwitch:
    """The person's switch; thread-safe producer of `FlipEvent` for the controller."""

    def __init__(
        self,
        cfg: PersonSwitchConfig,
        pin_factory: Factory,
        clock: Clock = time.monotonic,
        reference: Callable[[], bool] | None = None,
    ) -> None:
        if cfg.mode not in MODES:
            raise PersonSwitchConfigError(f"switch mode must be one of {MODES}, got {cfg.mode!r}")
        if cfg.bounce_ms < 0:
            raise PersonSwitchConfigError("switch bounce_ms must be >= 0")
        self.cfg = cfg
        self._clock = clock
        self._reference = reference
        self._bounce_s = cfg.bounce_ms / 1000.0
        self._cond = threading.Condition()
        self._events: deque[FlipEvent] = deque()
        self._button = Button(
            cfg.pin,
            pull_up=cfg.pull_up,
            bounce_time=self._bounce_s or None,
            pin_factory=pin_factory,
        )
        self._last_edge: float | None = None
        self._position = bool(self._button.is_pressed)  # last accepted position
        self._desired = cfg.initial_desired
        self._pressed_since: float | None = None
        self._hold_warned = False
        self.ignored_edges = 0  # edges dropped by the debounce filter (diagnostics)
        self._button.when_pressed = lambda: self._on_edge(True)
        self._button.when_released = lambda: self._on_edge(False)
        if self._position and cfg.mode == "momentary":
            log.warning("push button on pin %s is pressed at start (stuck?); it counts only "
                        "after a release", cfg.pin)

    # --- producer side (gpiozero's callback thread) -------------------------------------
    def _on_edge(self, pressed: bool) -> None:
        now = self._clock()
        with self._cond:
            previous_edge, self._last_edge = self._last_edge, now
            if previous_edge is not None and now - previous_edge < self._bounce_s:
                self.ignored_edges += 1
                log.debug("switch edge ignored (bounce, %.1f ms)", (now - previous_edge) * 1000)
                return
            if pressed == self._position:
                return  # no change of position (a lost opposite edge); nothing to report
            self._accept(pressed, now, late=False)

    def _accept(self, pressed: bool, now: float, late: bool) -> None:
        """A real change of position (caller holds the lock)."""
        self._position = pressed
        if self.cfg.mode == "momentary":
            self._momentary_edge(pressed, now, late)
        else:
            self._emit(now, late)

    def _momentary_edge(self, pressed: bool, now: float, late: bool) -> None:
        if pressed:
            self._pressed_since, self._hold_warned = now, False
            self._emit(now, late)
            return
        if self._pressed_since is not None and self._hold_warned:
            log.warning("push button released after %.1f s held down (counted as one press)",
                        now - self._pressed_since)
        self._pressed_since = None

    def _emit(self, now: float, late: bool) -> None:
        """Queue a flip (caller holds the lock)."""
        if self._reference is not None:
            # a flip not yet consumed by the controller has not reached the relay: build on it
            base = self._events[-1].desired if self._events else bool(self._reference())
            desired = not base
        elif self.cfg.mode == "toggle":
            desired = self._position
        else:
            desired = not self._desired
        self._desired = desired
        self._events.append(FlipEvent(ts=now, desired=desired, position=self._position, late=late))
        self._cond.notify_all()

    def remote(self, desired: bool) -> None:
        """The person switched this device from the home hub (an MQTT command; any thread):
        queued as a flip to `desired` marked ``remote``, so the controller takes it exactly as
        a flip of this switch (the relay, the rate limit, the window's label)."""
        with self._cond:
            now = self._clock()
            self._desired = bool(desired)
            self._events.append(FlipEvent(ts=now, desired=bool(desired), position=self._position,
                                          remote=True))
            self._cond.notify_all()

    # --- consumer side (controller) ----------------------------------------------------
    def _housekeeping(self, now: float) -> None:
        """Reconcile a lost toggle edge and warn once about a held-down button."""
        settled = self._last_edge is None or now - self._last_edge >= self._bounce_s
        if not settled:
            return
        level = bool(self._button.is_pressed)
        if level != self._position:
            log.info("switch level %s settled after a lost edge; reconciling", level)
            self._accept(level, now, late=True)
            return
        if level and self._pressed_since is not None and not self._hold_warned:
            held = now - self._pressed_since
            if held >= self.cfg.hold_warn_s:
                self._hold_warned = True
                log.warning("push button held down for %.1f s: counted once, ignored until "
                            "released (stuck button?)", held)

    def poll(self, until: float | None = None) -> list[FlipEvent]:
        """Return (and remove) queued flips with ``ts <= until`` (all when None). Never blocks."""
        with self._cond:
            self._housekeeping(self._clock())
            out: list[FlipEvent] = []
            while self._events and (until is None or self._events[0].ts <= until):
                out.append(self._events.popleft())
            return out

    def wait_flip(self, timeout: float | None = None) -> FlipEvent | None:
        """Block up to `timeout` real seconds for the next flip; None on timeout."""
        with self._cond:
            self._housekeeping(self._clock())
            if not self._events:
                self._cond.wait_for(lambda: bool(self._events), timeout=timeout)
            return self._events.popleft() if self._events else None

    @property
    def is_pressed(self) -> bool:
        """Raw level: True when the contact is closed."""
        return bool(self._button.is_pressed)

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._events)

    def close(self) -> None:
        """Release the pin and wake any waiter."""
        self._button.when_pressed = None
        self._button.when_released = None
        self._button.close()
        with self._cond:
            self._cond.notify_all()
