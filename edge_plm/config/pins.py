"""The hardware's sections: ``[gpio]`` (the one device's relay and switch, the shared LED and
buzzer) and ``[[devices]]`` (several named relays, each with its own switch), with their checks."""

from __future__ import annotations

from dataclasses import dataclass

from edge_plm.config.keys import Problems, setting


#: BCM GPIO numbers gpiozero can drive on a Raspberry Pi's 40-pin header (GPIO0..GPIO27).
GPIO_PINS = range(0, 28)

#: What the relay does after the safe state on start (``gpio.relay_restore``).
RELAY_RESTORE = ("last", "off", "on")


@dataclass
class GpioConfig:
    pin_factory: str = setting("auto", "auto (GPIOZERO_PIN_FACTORY, else real GPIO; run refuses none) "
                                       "| mock | lgpio | rpigpio | pigpio | native (gpiozero pin factories)")
    relay_pin: int = 17
    relay_active_high: bool = True
    relay_safe_state: bool = setting(False, "state on stop and crash, and first on start")
    relay_restore: str = setting("last", "after the safe state on start: last (the state recorded "
                                         "before the restart) | off | on")
    switch_pin: int = 27
    switch_mode: str = setting("toggle", "toggle | momentary")
    switch_pull_up: bool = True
    switch_bounce_ms: int = 50
    led_pin: int = setting(22, '"I\'m not sure" signal; -1 disables')
    buzzer_pin: int = setting(-1, "optional active buzzer: two short beeps when asking; -1 = none")
    min_toggle_interval_ms: int = setting(1000, "relay rate limit")

    def problems(self) -> list[str]:
        """The [gpio] checks: pins valid and distinct, modes known."""
        g, out = self, Problems()
        lo, hi = GPIO_PINS[0], GPIO_PINS[-1]
        for name, optional in (("relay_pin", False), ("switch_pin", False), ("led_pin", True),
                               ("buzzer_pin", True)):
            pin = getattr(g, name)
            if optional and pin == -1:
                continue
            out.need(pin in GPIO_PINS, f"gpio.{name} must be a BCM GPIO number {lo}..{hi}"
                                       f"{' or -1 (none)' if optional else ''}, got {pin}")
        used: dict[int, str] = {}
        for name in ("relay_pin", "switch_pin", "led_pin", "buzzer_pin"):
            pin = getattr(g, name)
            if pin == -1:
                continue
            if pin in used:
                out.append(f"gpio.{used[pin]} and gpio.{name} are both pin {pin}; each needs its own")
            used.setdefault(pin, name)
        out.need(g.switch_mode in ("toggle", "momentary"), "gpio.switch_mode must be 'toggle' or 'momentary'")
        out.need(g.switch_bounce_ms >= 0, f"gpio.switch_bounce_ms must be >= 0, got {g.switch_bounce_ms}")
        out.need(g.min_toggle_interval_ms >= 0,
                 f"gpio.min_toggle_interval_ms must be >= 0, got {g.min_toggle_interval_ms}")
        out.need(g.relay_restore in RELAY_RESTORE,
                 f"gpio.relay_restore must be one of {', '.join(RELAY_RESTORE)}, got {g.relay_restore!r}")
        return out


#: The name of the one device built from ``[gpio]`` when no ``[[devices]]`` is configured: the
#: name its relay has always been recorded under (``relay_state``), so existing databases keep
#: restoring it.
DEFAULT_DEVICE = "main"


@dataclass
class DeviceConfig:
    """One ``[[devices]]`` entry: a named relay with its own switch (its teacher)."""

    name: str = setting("", "what the person calls it, e.g. \"lamp\" (unique, case-insensitive)")
    aliases: list[str] = setting([], "other names it answers to, e.g. [\"light\", \"big light\"]")
    relay_pin: int = -1
    relay_active_high: bool = True
    relay_restore: str = setting("last", "after the safe state on start: last | off | on")
    switch_pin: int = setting(-1, "this device's own switch: its flips label utterances for it")
    switch_mode: str = setting("toggle", "toggle | momentary")
    switch_pull_up: bool = True
    switch_bounce_ms: int = 50
    led_pin: int = setting(-1, "its own \"I'm not sure\" LED; -1: the shared gpio.led_pin blinks "
                               "the device's number")


def devices_problems(devices: list[DeviceConfig], gpio: GpioConfig) -> list[str]:
    """``[[devices]]``: names unique (case-insensitive, aliases included) and non-empty, pins
    valid and distinct across devices and the shared LED / buzzer."""
    if not devices:
        return []
    from edge_plm.switch.tokenizer import normalize  # noqa: PLC0415 - text only, no kernels

    out, lo, hi = Problems(), GPIO_PINS[0], GPIO_PINS[-1]
    names: dict[str, str] = {}
    used: dict[int, str] = {p: f"gpio.{k}" for k in ("led_pin", "buzzer_pin")
                            if (p := getattr(gpio, k)) != -1}
    for i, d in enumerate(devices, 1):
        where = f"devices[{i}] ({d.name!r})" if d.name.strip() else f"devices[{i}]"
        for phrase in (d.name, *d.aliases):
            key = " ".join(normalize(phrase).split())
            if not key:
                out.append(f"{where}: a name or alias needs a letter or digit, got {phrase!r}")
            elif key in names:
                out.append(f"{where}: the name {phrase!r} is already {names[key]}'s "
                           "(names and aliases must be unique, case-insensitive)")
            else:
                names[key] = repr(d.name)
        for key, optional in (("relay_pin", False), ("switch_pin", False), ("led_pin", True)):
            pin = getattr(d, key)
            if optional and pin == -1:
                continue
            if pin not in GPIO_PINS:
                out.append(f"{where}.{key} must be a BCM GPIO number {lo}..{hi}"
                           f"{' or -1 (none)' if optional else ''}, got {pin}")
            elif pin in used:
                out.append(f"{where}.{key} is pin {pin}, already {used[pin]}; each needs its own")
            else:
                used[pin] = f"{where}.{key}"
        out.need(d.switch_mode in ("toggle", "momentary"),
                 f"{where}.switch_mode must be 'toggle' or 'momentary', got {d.switch_mode!r}")
        out.need(d.switch_bounce_ms >= 0, f"{where}.switch_bounce_ms must be >= 0, got {d.switch_bounce_ms}")
        out.need(d.relay_restore in RELAY_RESTORE, f"{where}.relay_restore must be one of "
                                                   f"{', '.join(RELAY_RESTORE)}, got {d.relay_restore!r}")
    return out
