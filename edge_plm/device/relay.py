"""The relay: a gpiozero `DigitalOutputDevice` with a safe state and a toggle rate limit.

Safe state (``GpioConfig.relay_safe_state``): the relay is driven to it when the object is
created (``initial_value``), by `Relay.close`, on normal interpreter exit (``atexit``) and on
SIGTERM (a handler that turns SIGTERM into ``SystemExit`` so ``atexit`` and ``finally`` run;
installed only from the main thread and only when SIGTERM still has its default action, so an
application's own handler is never replaced).

What software cannot cover: SIGKILL, a kernel panic, a segfault in a C extension and power
loss. After those, and after `close` releases the pin (gpiozero returns it to an input), the
relay follows its *hardware* default: the relay board's pull resistor on the input line.
Wire the relay so that this hardware default is the safe state (most opto-isolated relay
boards are active-low with a pull-up, so a released pin means "off").

State record: `Relay.on_change`, when set, is called with the new state right after every
change `Relay.set` makes (after the pin write; `Relay.close` is not a change the person made and
is not recorded). The service records it in the database for ``gpio.relay_restore``
(`edge_plm.device.restore`). A failing record is logged as an ERROR and counted
(``record_failures``); the relay stays switched. `Relay.watchers` (e.g. the MQTT bridge,
`edge_plm.bridge`) are called the same way after the record; each must return at once (it
runs on the thread that switched the relay) and its failure is logged, never raised.

Rate limit: a change of state inside ``min_toggle_interval_ms`` of the previous change is
refused: `Relay.set` returns False and logs a WARNING (the relay never flaps). Requests for
the state the relay is already in are not toggles and always succeed. `Relay.close` ignores
the rate limit: safety wins over relay wear.
"""

from __future__ import annotations

import atexit
import logging
import signal
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from gpiozero import DigitalOutputDevice, Factory

log = logging.getLogger(__name__)

Clock = Callable[[], float]


@dataclass(frozen=True)
class RelayConfig:
    """The relay part of `GpioConfig` (kept separate so the relay can be built on its own)."""

    pin: int
    active_high: bool = True
    safe_state: bool = False
    min_toggle_interval_ms: int = 1000


class Relay:
    """A relay on one GPIO output, starting in (and returning to) its safe state."""

    def __init__(
        self,
        cfg: RelayConfig,
        pin_factory: Factory,
        clock: Clock = time.monotonic,
        install_exit_handlers: bool = True,
    ) -> None:
        if cfg.min_toggle_interval_ms < 0:
            raise ValueError("min_toggle_interval_ms must be >= 0")
        self.cfg = cfg
        self._clock = clock
        self._interval_s = cfg.min_toggle_interval_ms / 1000.0
        self._last_toggle: float | None = None
        self._lock = threading.Lock()
        self._device = self._make_output(pin_factory)
        self._closed = False
        #: called with the new state after each change `set` makes (see the module docstring)
        self.on_change: Callable[[bool], None] | None = None
        #: also called with the new state after each change (see the module docstring)
        self.watchers: list[Callable[[bool], None]] = []
        self.record_failures = 0
        if install_exit_handlers:
            _register_for_exit(self)

    def _make_output(self, pin_factory: Factory) -> DigitalOutputDevice:
        """The output device, in the safe state (a `Dimmer` makes a PWM output)."""
        return DigitalOutputDevice(self.cfg.pin, active_high=self.cfg.active_high,
                                   initial_value=self.cfg.safe_state, pin_factory=pin_factory)

    def _drive(self, on: bool) -> None:
        """Write `on` to the output (caller holds the lock; a `Dimmer` lights its level)."""
        self._device.value = bool(on)

    def _refused(self, on: bool, now: float) -> bool:
        """True (and a WARNING) when a toggle to `on` at `now` is inside the rate limit
        (caller holds the lock)."""
        if self._last_toggle is not None and now - self._last_toggle < self._interval_s:
            log.warning(
                "relay toggle to %s refused: previous toggle %.3f s ago (< %.3f s rate limit)",
                "ON" if on else "OFF", now - self._last_toggle, self._interval_s,
            )
            return True
        return False

    @property
    def is_on(self) -> bool:
        """True when the relay is energised-as-configured ("on"), regardless of pin polarity."""
        return bool(self._device.value)

    @property
    def safe_state(self) -> bool:
        """The state the relay takes on start, stop and crash."""
        return self.cfg.safe_state

    @property
    def closed(self) -> bool:
        return self._closed

    def next_allowed(self, now: float | None = None) -> float:
        """Earliest time (clock seconds) at which a toggle will be accepted."""
        if self._last_toggle is None:
            return now if now is not None else self._clock()
        return self._last_toggle + self._interval_s

    def set(self, on: bool, now: float | None = None) -> bool:
        """Drive the relay to `on`. Returns True when the relay is now in that state.

        Returns False (and logs a WARNING) when the change is refused by the rate limit:
        the previous toggle was less than ``min_toggle_interval_ms`` ago. `now` defaults to the
        injected clock. Raises `RelayClosed` after `close`.
        """
        now = self._clock() if now is None else now
        with self._lock:
            if self._closed:
                raise RelayClosed("relay is closed; cannot switch it")
            if self.is_on == bool(on):
                return True
            if self._refused(bool(on), now):
                return False
            self._drive(bool(on))
            self._last_toggle = now
            log.info("relay -> %s", "ON" if on else "OFF")
            self._record(bool(on))
            self._tell(bool(on))
            return True

    def record_state(self) -> None:
        """Tell `on_change` the current state (e.g. after a start that changed nothing)."""
        with self._lock:
            self._record(self.is_on)

    def _record(self, on: bool) -> None:
        """Tell `on_change` (caller holds the lock: records come in the order of the writes)."""
        if self.on_change is None:
            return
        try:
            self.on_change(on)
        except Exception as exc:  # the relay did switch: say that its record is behind
            self.record_failures += 1
            log.error("relay on pin %s is %s, but that state could not be recorded (%s: %s); a "
                      "restart would restore the state recorded before", self.cfg.pin,
                      "ON" if on else "OFF", type(exc).__name__, exc)

    def _tell(self, on: bool) -> None:
        """Tell the watchers (caller holds the lock); a failing one is logged."""
        for watcher in list(self.watchers):
            try:
                watcher(on)
            except Exception:
                log.exception("relay on pin %s: a watcher of its state failed", self.cfg.pin)

    def close(self) -> None:
        """Drive the safe state (ignoring the rate limit), then release the pin. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._drive(self.cfg.safe_state)
            finally:
                self._device.close()
            log.info("relay closed in safe state %s", "ON" if self.cfg.safe_state else "OFF")

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RelayClosed(RuntimeError):
    """The relay was used after `Relay.close`."""


# --- exit handling ------------------------------------------------------------------------
_open_relays: weakref.WeakSet[Relay] = weakref.WeakSet()
_handlers_installed = False
_install_lock = threading.Lock()


def _close_all_relays() -> None:
    """atexit hook: every relay still open goes back to its safe state."""
    for relay in list(_open_relays):
        try:
            relay.close()
        except Exception:  # log each failure; keep closing the others
            log.exception("could not return relay on pin %s to its safe state", relay.cfg.pin)


def _sigterm_to_exit(signum: int, frame: object) -> None:
    """SIGTERM -> SystemExit, so atexit hooks and finally blocks run (systemd stop)."""
    raise SystemExit(128 + signum)


def _register_for_exit(relay: Relay) -> None:
    global _handlers_installed
    _open_relays.add(relay)
    with _install_lock:
        if _handlers_installed:
            return
        atexit.register(_close_all_relays)
        _handlers_installed = True
        if threading.current_thread() is not threading.main_thread():
            log.warning("relay created off the main thread: SIGTERM handler not installed")
            return
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _sigterm_to_exit)
        else:
            log.info("SIGTERM already handled by the application; relying on atexit only")
