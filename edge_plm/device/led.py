"""The "I'm not sure" signals: a status LED blinking while an ask window is open, and an
optional buzzer that beeps when the device starts asking.

`StatusLed` drives a gpiozero `LED`; `NoLed` is the drop-in used when ``led_pin = -1`` (the
"asking" state is still tracked, so the controller and tests behave the same). Both share the
`StatusIndicator` interface. `AskBuzzer` drives a gpiozero `Buzzer` (an active buzzer on a GPIO
pin, ``buzzer_pin``; -1, the default, means none): two short beeps at the start of an ask, for
a person who is not looking at the device.
"""

from __future__ import annotations

import itertools
from collections import deque
import logging
from typing import Protocol

from gpiozero import LED, Buzzer, Factory

log = logging.getLogger(__name__)


class StatusIndicator(Protocol):
    """What the controller needs from a status signal."""

    @property
    def asking(self) -> bool: ...

    def ask(self, count: int = 0) -> None: ...

    def done(self) -> None: ...

    def close(self) -> None: ...


#: How long the LED stays lit to answer "on" to a question (`StatusLed.show`).
ANSWER_ON_S = 2.0


class StatusLed:
    """A gpiozero LED that blinks (``on_time``/``off_time`` seconds) while asking."""

    def __init__(self, pin: int, pin_factory: Factory, on_time: float = 0.25,
                 off_time: float = 0.25) -> None:
        if on_time <= 0 or off_time <= 0:
            raise ValueError("LED on_time and off_time must be > 0")
        self._led = LED(pin, initial_value=False, pin_factory=pin_factory)
        self._on_time, self._off_time = on_time, off_time
        self._asking = False
        self.shown: deque[bool] = deque(maxlen=100)  # the latest answers `show` gave, in order

    @property
    def asking(self) -> bool:
        return self._asking

    @property
    def is_lit(self) -> bool:
        """The LED's current level (changes while blinking)."""
        return bool(self._led.is_lit)

    def ask(self, count: int = 0) -> None:
        """Start the "I'm not sure" blink (gpiozero runs it in a background thread). With
        `count` > 1 (the number of the device in doubt, `Devices.ask`; the first device's is 1,
        a plain blink) the LED blinks in groups of `count`, each group followed by a pause of
        three blink periods."""
        self._asking = True
        if count > 1:
            group = (1, 0) * count + (0, 0, 0)
            self._led.source_delay = self._on_time
            self._led.source = itertools.cycle(group)
            return
        self._led.blink(on_time=self._on_time, off_time=self._off_time, background=True)

    def mark_asking(self) -> None:
        """Record that something is asked without lighting this LED (a device's own LED does)."""
        self._asking = True

    def show(self, on: bool) -> None:
        """Answer a question without a voice (`edge_plm.loop.kinds`): lit steadily for
        ``ANSWER_ON_S`` when the answer is "on", two short blinks when it is "off" (in the
        background; an ask's blink afterwards replaces it)."""
        self.shown.append(bool(on))
        if on:
            self._led.blink(on_time=ANSWER_ON_S, off_time=0.05, n=1, background=True)
        else:
            self._led.blink(on_time=0.15, off_time=0.15, n=2, background=True)

    def done(self) -> None:
        """Stop blinking; LED off."""
        self._asking = False
        self._led.source = None
        self._led.off()

    def close(self) -> None:
        self._asking = False
        self._led.close()


class NoLed:
    """No LED configured (``led_pin = -1``): tracks the asking state, drives nothing."""

    def __init__(self) -> None:
        self._asking = False

    @property
    def asking(self) -> bool:
        return self._asking

    def ask(self, count: int = 0) -> None:
        self._asking = True
        log.info("asking%s (no status LED configured)", f" about device {count}" if count > 1 else "")

    def mark_asking(self) -> None:
        self._asking = True

    def show(self, on: bool) -> None:
        log.info("answer: %s (no status LED configured)", "on" if on else "off")

    def done(self) -> None:
        self._asking = False

    def close(self) -> None:
        self._asking = False


def make_status_led(pin: int, pin_factory: Factory) -> StatusLed | NoLed:
    """`StatusLed` on `pin`, or `NoLed` when pin is -1."""
    if pin == -1:
        return NoLed()
    if pin < 0:
        raise ValueError(f"led_pin must be a GPIO number or -1 (disabled), got {pin}")
    return StatusLed(pin, pin_factory)


class AskBuzzer:
    """A gpiozero Buzzer that beeps ``beeps`` times (``on_time``/``off_time`` s) when asking."""

    def __init__(self, pin: int, pin_factory: Factory, beeps: int = 2, on_time: float = 0.08,
                 off_time: float = 0.08) -> None:
        if beeps < 1 or on_time <= 0 or off_time <= 0:
            raise ValueError("buzzer: beeps must be >= 1 and on_time, off_time > 0")
        self._buzzer = Buzzer(pin, initial_value=False, pin_factory=pin_factory)
        self._beeps, self._on_time, self._off_time = beeps, on_time, off_time

    @property
    def is_active(self) -> bool:
        return bool(self._buzzer.is_active)

    def ask(self) -> None:
        """Start the beeps (gpiozero runs them in a background thread; they end by themselves)."""
        self._buzzer.beep(on_time=self._on_time, off_time=self._off_time, n=self._beeps,
                          background=True)

    def done(self) -> None:
        """Silence (stops beeps still running)."""
        self._buzzer.off()

    def close(self) -> None:
        self._buzzer.close()


def make_ask_buzzer(pin: int, pin_factory: Factory) -> AskBuzzer | None:
    """`AskBuzzer` on `pin`, or None when pin is -1 (no buzzer, the default)."""
    if pin == -1:
        return None
    if pin < 0:
        raise ValueError(f"buzzer_pin must be a GPIO number or -1 (none), got {pin}")
    return AskBuzzer(pin, pin_factory)
