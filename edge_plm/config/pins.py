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
    kind: str = setting("relay", "relay (on / off) | dimmer (relay_pin is a PWM output to a dimmer module "
                                 "or LED driver: ON / OFF and a level)")
    pwm_frequency: int = setting(100, "dimmer only: the PWM frequency, Hz")
    level_step: float = setting(0.25, "dimmer only: what one dim / brighten (an up / down press) moves, 0..1")
    min_level: float = setting(0.05, "dimmer only: the lowest lit level (a dim never turns it off)")
    encoder_pins: list[int] = setting([], "dimmer only: a rotary encoder's [a, b] pins, its level "
                                          "control (each detent a quarter level_step); [] = none")
    up_pin: int = setting(-1, "dimmer only: the level control's up button (one level_step a press); "
                              "-1 = none")
    down_pin: int = setting(-1, "dimmer only: the level control's down button; -1 = none")

    @property
    def is_dimmer(self) -> bool:
        return self.kind == "dimmer"


#: What a ``[[devices]]`` entry drives (``kind``).
DEVICE_KINDS = ("relay", "dimmer")
#: The keys only a dimmer uses: set on a relay, they are a problem (they would do nothing).
DIMMER_KEYS = ("pwm_frequency", "level_step", "min_level", "encoder_pins", "up_pin", "down_pin")
#: The PWM frequencies a dimmer may ask for, Hz (lgpio's range; pigpio rounds to its own set).
PWM_FREQUENCIES = range(1, 10_001)


def devices_problems(devices: list[DeviceConfig], gpio: GpioConfig) -> list[str]:
    """``[[devices]]``: names unique (case-insensitive, aliases included) and non-empty, pins
    valid and distinct across devices (relays, switches, LEDs, a dimmer's encoder or up / down
    buttons) and the shared LED / buzzer; a dimmer's keys in range, a relay without them."""
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
        pins = [("relay_pin", d.relay_pin, False), ("switch_pin", d.switch_pin, False),
                ("led_pin", d.led_pin, True)]
        if d.kind == "dimmer":
            out += _dimmer_problems(d, where)
            if _encoder_ok(d.encoder_pins):
                pins += [(f"encoder_pins[{j}]", p, False) for j, p in enumerate(d.encoder_pins)]
            pins += [("up_pin", d.up_pin, True), ("down_pin", d.down_pin, True)]
        for key, pin, optional in pins:
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
        if d.kind not in DEVICE_KINDS:
            out.append(f"{where}.kind must be one of {', '.join(DEVICE_KINDS)}, got {d.kind!r}")
        elif d.kind == "relay":
            defaults = DeviceConfig()
            extra = [k for k in DIMMER_KEYS if getattr(d, k) != getattr(defaults, k)]
            out.need(not extra, f"{where}: {', '.join(extra)} {'is a key' if len(extra) == 1 else 'are keys'}"
                                f" of a dimmer only; set kind = \"dimmer\" or remove {'it' if len(extra) == 1 else 'them'}")
    return out


def _encoder_ok(pins: list) -> bool:
    """``encoder_pins`` is two whole numbers (their range is checked with the other pins)."""
    return len(pins) == 2 and all(isinstance(p, int) and not isinstance(p, bool) for p in pins)


def _dimmer_problems(d: DeviceConfig, where: str) -> list[str]:
    """A dimmer's own keys (its pins are checked with every other pin)."""
    out = Problems()
    out.need(0 < d.level_step <= 1, f"{where}.level_step must be in (0, 1], got {d.level_step}")
    out.need(0 < d.min_level <= 1, f"{where}.min_level must be in (0, 1], got {d.min_level}")
    out.need(d.pwm_frequency in PWM_FREQUENCIES, f"{where}.pwm_frequency must be {PWM_FREQUENCIES[0]}.."
                                                 f"{PWM_FREQUENCIES[-1]} Hz, got {d.pwm_frequency}")
    out.need(not d.encoder_pins or _encoder_ok(d.encoder_pins),
             f"{where}.encoder_pins must be two BCM GPIO numbers [a, b] (or [] for none), got {d.encoder_pins!r}")
    buttons = [k for k in ("up_pin", "down_pin") if getattr(d, k) != -1]
    out.need(len(buttons) != 1, f"{where}: {buttons[0] if buttons else ''} without "
                                f"{'down_pin' if buttons == ['up_pin'] else 'up_pin'}: up_pin and "
                                "down_pin are a pair (set both, or neither)")
    out.need(not (d.encoder_pins and buttons), f"{where}: a dimmer's level control is encoder_pins or "
                                               "up_pin / down_pin, not both")
    return out
