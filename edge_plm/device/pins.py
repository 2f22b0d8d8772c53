"""Choose a gpiozero pin factory: real hardware when present, gpiozero's MockFactory otherwise.

Every device in `edge_plm.device` is created with an explicit ``pin_factory=`` argument; this
module never sets the global ``gpiozero.Device.pin_factory`` (tests build several factories side
by side, and a hidden global would couple them).

Names:
  - ``"auto"``: as gpiozero decides. gpiozero's own ``GPIOZERO_PIN_FACTORY`` environment
    variable, when set, names the factory; otherwise try gpiozero's real factories in its own
    preference order (lgpio, rpigpio, pigpio, native). If none loads (no GPIO hardware, or no
    GPIO library): with ``mock_fallback`` (doctor, tools) fall back to ``MockFactory`` and log a
    WARNING that says so and why; without it (the service) raise `PinFactoryError`, because a
    relay service that silently switches nothing is broken.
  - ``"mock"``: always ``MockFactory`` (simulated pins; nothing is switched).
  - ``pwm=True`` (a dimmer is configured): the mock factory's pins can do PWM
    (``MockPWMPin``); without it they are gpiozero's plain ``MockPin``, as always.
  - any other name registered under gpiozero's ``gpiozero_pin_factories`` entry point
    (``lgpio``, ``rpigpio``, ``pigpio``, ``native``, ...): that factory, or `PinFactoryError`.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from importlib.metadata import entry_points

from gpiozero import Factory
from gpiozero.pins.mock import MockFactory, MockPWMPin

from edge_plm.errors import EdgePlmError

log = logging.getLogger(__name__)

#: gpiozero's preference order for real hardware (see gpiozero.Device._default_pin_factory).
AUTO_ORDER: tuple[str, ...] = ("lgpio", "rpigpio", "pigpio", "native")
#: gpiozero's environment variable naming the pin factory (honoured when the config says auto).
ENV_VAR = "GPIOZERO_PIN_FACTORY"


class PinFactoryError(EdgePlmError, RuntimeError):
    """The requested pin factory is unknown or cannot be loaded on this machine."""


def available_factory_names() -> list[str]:
    """Names of the pin factories gpiozero has registered (installed or not)."""
    return sorted({ep.name for ep in entry_points(group="gpiozero_pin_factories")})


def _load_named(name: str) -> Factory:
    """Instantiate the factory registered as `name`; raise PinFactoryError with the cause."""
    matches = [ep for ep in entry_points(group="gpiozero_pin_factories") if ep.name == name.lower()]
    if not matches:
        known = ", ".join(["auto", *available_factory_names()])
        raise PinFactoryError(f"unknown pin factory {name!r} (known: {known})")
    try:
        with warnings.catch_warnings():
            # gpiozero warns when 'native' is used; we log our own description instead.
            warnings.simplefilter("ignore")
            return matches[0].load()()
    except Exception as exc:  # any import/hardware error: report it with its cause
        raise PinFactoryError(
            f"pin factory {name!r} cannot be used on this machine: {type(exc).__name__}: {exc}"
        ) from exc


def make_pin_factory(name: str = "auto", mock_fallback: bool = True,
                     environ: Mapping[str, str] | None = None, pwm: bool = False) -> tuple[Factory, str]:
    """Return ``(factory, description)`` for the configured factory `name`.

    The description is one human-readable line for logs and ``edge-plm doctor``
    (e.g. ``"lgpio (real GPIO)"`` or ``"mock (no GPIO hardware: ...)"``). A configured name
    other than ``auto`` wins over ``GPIOZERO_PIN_FACTORY``.
    """
    key = (name or "auto").strip().lower()
    env = (os.environ if environ is None else environ).get(ENV_VAR, "").strip().lower()
    origin = "configured"
    if key == "auto" and env:
        key, origin = env, f"{ENV_VAR}={env}"
    mock = (lambda: MockFactory(pin_class=MockPWMPin)) if pwm else MockFactory
    if key == "mock":
        return mock(), f"mock ({origin}: simulated pins, nothing is switched)"
    if key != "auto":
        return _load_named(key), f"{key} (real GPIO, {origin})"
    failures: list[str] = []
    for candidate in AUTO_ORDER:
        try:
            factory = _load_named(candidate)
        except PinFactoryError as exc:
            failures.append(str(exc.__cause__ or exc))
            log.debug("pin factory %s unavailable: %s", candidate, exc)
            continue
        return factory, f"{candidate} (real GPIO, auto-detected)"
    reason = "; ".join(f"{n}: {f}" for n, f in zip(AUTO_ORDER, failures))
    if not mock_fallback:
        raise PinFactoryError(
            f"no GPIO hardware found (tried {', '.join(AUTO_ORDER)}); the relay cannot switch. "
            f"Set gpio.pin_factory = \"mock\" (or {ENV_VAR}=mock) to run on simulated pins")
    log.warning(
        "no GPIO hardware found, using gpiozero MockFactory: the relay will NOT switch "
        "anything (tried %s)", reason,
    )
    return mock(), f"mock (no GPIO hardware found; tried {', '.join(AUTO_ORDER)})"
