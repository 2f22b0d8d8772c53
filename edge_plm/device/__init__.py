"""Device layer: relays, the person's switches, the status LEDs and an optional buzzer over gpiozero.

`Devices.from_config(GpioConfig, devices=...)` builds them on one pin factory (real GPIO when
present, gpiozero's MockFactory otherwise, see `pins.make_pin_factory`). Each configured device
(``[[devices]]``, `edge_plm.config.settings.device_configs`) is a named relay with its own person's
switch (its teacher) and optionally its own LED; without ``devices`` there is one device named
`MAIN_RELAY` from the ``[gpio]`` pins, exactly as before: a household of one, driven and
signalled by name like any other (there is no "the relay" or "the switch"; a caller that
means the one device names the household's first). Further named relays without a switch can
be given as `extra_relays`. An action of `edge_plm.actions` drives a named relay to its relay
state (`Devices.drive`). A device of ``kind = "dimmer"`` is a `Dimmer` (a relay on a PWM output,
with a level; `edge_plm.device.dimmer`): it is in `Devices.relays` like every relay (ON / OFF
drive it unchanged) and in `Devices.dimmers`; its optional level control (a rotary encoder or
up / down buttons, `edge_plm.device.level_control`) moves it and records `LevelChange` events,
drained by `Devices.level_changes`. Given a `RelayStateStore` (the service gives its replay buffer), every relay
is restored after its safe state as its ``relay_restore`` says and its changes are recorded
(`edge_plm.device.restore`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpiozero import Factory

from edge_plm import actions
from edge_plm.device.dimmer import Dimmer, DimmerConfig, DimmerPwmUnsupported
from edge_plm.device.led import AskBuzzer, NoLed, StatusLed, make_ask_buzzer, make_status_led
from edge_plm.device.pins import PinFactoryError, make_pin_factory
from edge_plm.device.level_control import LevelChange, LevelChanges, LevelControl, LevelControlConfig
from edge_plm.device.relay import Clock, Relay, RelayClosed, RelayConfig
from edge_plm.device.restore import RelayStateStore, restore_relays
from edge_plm.device.person_switch import FlipEvent, PersonSwitch, PersonSwitchConfig, PersonSwitchConfigError
from edge_plm.config.settings import DEFAULT_DEVICE, DeviceConfig, GpioConfig

log = logging.getLogger(__name__)

__all__ = [
    "AskBuzzer", "Devices", "Dimmer", "DimmerConfig", "DimmerPwmUnsupported", "FlipEvent", "LevelChange",
    "LevelControl", "MAIN_RELAY", "NoLed", "PersonSwitch", "PinFactoryError", "Relay",
    "RelayClosed", "RelayConfig", "StatusLed", "PersonSwitchConfig", "PersonSwitchConfigError", "make_pin_factory",
    "make_ask_buzzer", "make_status_led",
]

#: The name of the one device built from ``[gpio]`` (``gpio.relay_pin``) when no
#: ``[[devices]]`` are configured.
MAIN_RELAY = DEFAULT_DEVICE


@dataclass
class Devices:
    """The relays (by name), switches (by device, in order), LEDs and (optional) buzzer,
    sharing one pin factory. ``led`` is the shared status LED. Every device is addressed by
    its name; one device is the case N = 1 of the same calls."""

    relays: dict[str, Relay]
    switches: dict[str, PersonSwitch]  # by device, in order
    led: StatusLed | NoLed
    factory: Factory
    factory_description: str
    buzzer: AskBuzzer | None = None
    leds: dict[str, StatusLed] = field(default_factory=dict)  # devices with their own LED
    dimmers: dict[str, Dimmer] = field(default_factory=dict)  # the dimmers (also in `relays`)
    controls: dict[str, LevelControl] = field(default_factory=dict)  # dimmers with a level control
    clock: Clock = field(default=time.monotonic, repr=False)  # the relays' clock
    _levels: LevelChanges = field(default_factory=LevelChanges, repr=False)  # the person's level changes
    _shared_for: str | None = field(default=None, repr=False)  # whom the shared LED blinks for

    @property
    def names(self) -> list[str]:
        """The devices (relays with a switch), in configuration order."""
        return list(self.switches)

    def drive(self, action: str, relay: str, now: float | None = None) -> bool:
        """Drive relay `relay` to the state `action` asks for (`edge_plm.actions.RELAY_STATE`;
        an action without a relay state leaves it as it is). True when the relay is now in
        that state, False when its rate limit refused the change (see `Relay.set`)."""
        if relay not in self.relays:
            raise KeyError(f"no relay named {relay!r} (relays: {', '.join(self.relays)})")
        if action not in actions.RELAY_STATE:
            raise ValueError(f"action must be one of {', '.join(actions.ACTIONS)}, got {action!r}")
        state = actions.RELAY_STATE[action]
        return True if state is None else self.relays[relay].set(state, now)

    def is_dimmer(self, name: str) -> bool:
        """True when device (or relay) `name` is a dimmer."""
        return name in self.dimmers

    def _dimmer(self, name: str) -> Dimmer:
        if name not in self.dimmers:
            raise KeyError(f"no dimmer named {name!r} (dimmers: {', '.join(self.dimmers) or 'none'})")
        return self.dimmers[name]

    def set_level(self, name: str, level: float, now: float | None = None) -> bool:
        """Set dimmer `name` to `level` (`Dimmer.set_level`: clamped; 0 is off; False when the
        rate limit refused the toggle it would be)."""
        return self._dimmer(name).set_level(level, now)

    def step(self, name: str, direction: int, now: float | None = None) -> float:
        """Dimmer `name` one ``level_step`` up (+1) or down (-1); its level after (`Dimmer.step`)."""
        return self._dimmer(name).step(direction, now)

    def remote_level(self, name: str, level: float, now: float | None = None) -> LevelChange | None:
        """The person set dimmer `name`'s level from the home hub (the MQTT bridge, any thread):
        the dimmer is set (`set_level`) and the change queued as a `LevelChange` with source
        ``remote`` beside its control's. None when nothing changed (already there, or the rate
        limit refused the toggle)."""
        now = self.clock() if now is None else now
        moved = self._dimmer(name).change_level(level, now)
        if moved is None or moved[0] == moved[1]:
            return None
        change = LevelChange(name, moved[0], moved[1], now, "remote")
        self._levels.put(change)
        return change

    def level_changes(self) -> list[LevelChange]:
        """The person's level changes (controls and remote) since the last call, oldest first."""
        return self._levels.drain()

    def ask(self, device: str, beep: bool = True) -> None:
        """Signal "I'm not sure" about `device`: its own LED blinks if it has one, else the
        shared LED, in groups of as many blinks as the device's number (1 = the first
        configured, a plain blink; already showing another device: it keeps showing that
        one), until `done`; the buzzer beeps (unless not `beep`: the shared LED moves on to a
        device still in doubt)."""
        if device in self.leds:
            self.leds[device].ask()
            self.led.mark_asking()  # the loop's "something is asked" state lives on the shared one
        elif self._shared_for is None:
            self.led.ask(count=self.names.index(device) + 1)
            self._shared_for = device
        if self.buzzer is not None and beep:
            self.buzzer.ask()

    def done(self, device: str | None = None) -> None:
        """The ask window of `device` closed: only its signal goes out (its own LED, or the
        shared LED if it showed that device). Without `device`: nothing is in doubt any more,
        every LED off, the buzzer silent."""
        if device is not None:
            if device in self.leds:
                self.leds[device].done()
            elif self._shared_for == device:
                self.led.done()
                self._shared_for = None
            return
        self.led.done()
        self._shared_for = None
        for led in self.leds.values():
            led.done()
        if self.buzzer is not None:
            self.buzzer.done()

    def show(self, device: str | None, on: bool) -> None:
        """Answer a question without a voice: `device`'s own LED if it has one, else the shared
        LED, lit for "on", two short blinks for "off" (`StatusLed.show`)."""
        led = self.leds.get(device) if device is not None else None
        (led or self.led).show(on)

    @classmethod
    def from_config(
        cls,
        cfg: GpioConfig,
        clock: Clock = time.monotonic,
        factory: Factory | None = None,
        install_exit_handlers: bool = True,
        mock_fallback: bool = True,
        extra_relays: Mapping[str, RelayConfig] | None = None,
        state_store: RelayStateStore | None = None,
        devices: Sequence[DeviceConfig] | None = None,
    ) -> Devices:
        """Build the devices from `cfg`; `factory` overrides ``cfg.pin_factory`` (tests).
        ``mock_fallback=False`` (the service) refuses simulated pins unless configured.
        `devices`: the ``[[devices]]`` (none or empty: one device, `MAIN_RELAY`, from the
        ``[gpio]`` pins); the safe state and rate limit of every relay, the shared LED and
        the buzzer are ``[gpio]``'s. `extra_relays`: further relays by name, without a
        switch. `state_store`: restore the relays (each device's ``relay_restore``, extra
        relays ``cfg.relay_restore``) and record their changes there (none: every relay stays
        in its safe state and nothing is recorded, as in replays)."""
        devs = list(devices) if devices else [_gpio_device(cfg)]
        extra = dict(extra_relays or {})
        for name in extra:
            if name in {d.name for d in devs}:
                raise ValueError(f"relay name {name!r} is the configured relay of a device "
                                 "(gpio.relay_pin or [[devices]])")
        if factory is None:
            factory, description = make_pin_factory(cfg.pin_factory, mock_fallback=mock_fallback,
                                                    pwm=any(d.kind == "dimmer" for d in devs))
        else:
            description = f"{type(factory).__name__} (given)"
        _check_pins(cfg, devs, extra, from_gpio=not devices)
        parts = _Parts()
        try:
            parts.build(cfg, devs, extra, factory, clock, install_exit_handlers)
            if state_store is not None:
                policies = {**dict.fromkeys(parts.relays, cfg.relay_restore),
                            **{d.name: d.relay_restore for d in devs}}
                restore_relays(parts.relays, policies, state_store)
        except BaseException:
            parts.close()
            raise
        log.info("GPIO: %s; %s; LED pin %d, buzzer pin %d%s", description,
                 "; ".join(f"{d.name!r}: {'dimmer PWM' if d.kind == 'dimmer' else 'relay'} pin {d.relay_pin}, "
                           f"switch pin {d.switch_pin} ({d.switch_mode})"
                           + (f", LED pin {d.led_pin}" if d.led_pin != -1 else "")
                           + (f", level {parts.controls[d.name].kind} pins {list(parts.controls[d.name].pins)}"
                              if d.name in parts.controls else "")
                           for d in devs),
                 cfg.led_pin, cfg.buzzer_pin, "".join(f", relay {n!r} pin {r.pin}" for n, r in extra.items()))
        return cls(parts.relays, parts.switches, parts.led, factory, description, parts.buzzer, parts.leds,
                   parts.dimmers, parts.controls, clock, parts.levels)

    def close(self) -> None:
        """LED and buzzer off, switches and level controls released, every relay (dimmers too)
        to its safe state (last, and even if others fail)."""
        try:
            for control in self.controls.values():
                control.close()
            self.led.close()
            for led in self.leds.values():
                led.close()
            if self.buzzer is not None:
                self.buzzer.close()
            for switch in self.switches.values():
                switch.close()
        finally:
            _close_relays(self.relays)


class _Parts:
    """What `Devices.from_config` builds, closed again if a later part fails."""

    def __init__(self) -> None:
        self.relays: dict[str, Relay] = {}
        self.switches: dict[str, PersonSwitch] = {}
        self.leds: dict[str, StatusLed] = {}
        self.dimmers: dict[str, Dimmer] = {}
        self.controls: dict[str, LevelControl] = {}
        self.levels = LevelChanges()
        self.led: StatusLed | NoLed | None = None
        self.buzzer: AskBuzzer | None = None

    def build(self, cfg: GpioConfig, devs: Sequence[DeviceConfig], extra: Mapping[str, RelayConfig],
              factory: Factory, clock: Clock, install_exit_handlers: bool) -> None:
        for d in devs:  # every relay first: each is in its safe state from here on
            if d.kind == "dimmer":
                dcfg = DimmerConfig(d.relay_pin, d.relay_active_high, cfg.relay_safe_state,
                                    cfg.min_toggle_interval_ms, d.pwm_frequency, d.level_step, d.min_level)
                self.relays[d.name] = self.dimmers[d.name] = Dimmer(
                    dcfg, factory, clock=clock, install_exit_handlers=install_exit_handlers)
                continue
            rcfg = RelayConfig(d.relay_pin, d.relay_active_high, cfg.relay_safe_state, cfg.min_toggle_interval_ms)
            self.relays[d.name] = Relay(rcfg, factory, clock=clock, install_exit_handlers=install_exit_handlers)
        for name, rcfg in extra.items():
            self.relays[name] = Relay(rcfg, factory, clock=clock, install_exit_handlers=install_exit_handlers)
        for d in devs:
            relay = self.relays[d.name]
            self.switches[d.name] = PersonSwitch(
                PersonSwitchConfig(d.switch_pin, d.switch_mode, d.switch_pull_up, d.switch_bounce_ms,
                                   initial_desired=cfg.relay_safe_state),
                factory, clock=clock, reference=lambda relay=relay: relay.is_on)
            if d.led_pin != -1:
                self.leds[d.name] = StatusLed(d.led_pin, factory)
            control = LevelControlConfig(tuple(d.encoder_pins), d.up_pin, d.down_pin, d.switch_pull_up,
                                         d.switch_bounce_ms)
            if d.name in self.dimmers and control.present:
                self.controls[d.name] = LevelControl(d.name, self.dimmers[d.name], control, factory,
                                                     self.levels, clock=clock)
        self.led = make_status_led(cfg.led_pin, factory)
        self.buzzer = make_ask_buzzer(cfg.buzzer_pin, factory)

    def close(self) -> None:
        for closable in (*self.controls.values(), self.buzzer, self.led, *self.leds.values(),
                         *self.switches.values()):
            if closable is not None:
                closable.close()
        _close_relays(self.relays)


def _gpio_device(cfg: GpioConfig) -> DeviceConfig:
    """The one device of a configuration without ``[[devices]]``: ``[gpio]``'s relay and switch."""
    return DeviceConfig(MAIN_RELAY, [], cfg.relay_pin, cfg.relay_active_high, cfg.relay_restore,
                        cfg.switch_pin, cfg.switch_mode, cfg.switch_pull_up, cfg.switch_bounce_ms, -1)


def _check_pins(cfg: GpioConfig, devs: Sequence[DeviceConfig], extra: Mapping[str, RelayConfig],
                from_gpio: bool) -> None:
    """Every relay, switch, LED and level control needs its own pin (`from_gpio`: the device is ``[gpio]``'s,
    no ``[[devices]]``, and a clash gets a message naming its keys)."""
    if from_gpio:
        pins = [p for p in (cfg.relay_pin, cfg.switch_pin, cfg.led_pin, cfg.buzzer_pin) if p != -1]
        if len(set(pins)) != len(pins):
            raise ValueError(f"gpio: relay_pin, switch_pin, led_pin and buzzer_pin must differ, got {pins}")
    used: dict[int, str] = {}
    owners = [("gpio.led_pin", cfg.led_pin), ("gpio.buzzer_pin", cfg.buzzer_pin)]
    for d in devs:
        owners += [(f"{d.name!r} relay", d.relay_pin), (f"{d.name!r} switch", d.switch_pin),
                   (f"{d.name!r} LED", d.led_pin)]
        if d.kind == "dimmer":
            owners += [(f"{d.name!r} encoder", p) for p in d.encoder_pins]
            owners += [(f"{d.name!r} up button", d.up_pin), (f"{d.name!r} down button", d.down_pin)]
    owners += [(f"relay {name!r}", rcfg.pin) for name, rcfg in extra.items()]
    for owner, pin in owners:
        if pin == -1:
            continue
        if pin in used:
            raise ValueError(f"gpio: {owner} needs its own pin, but pin {pin} is already the {used[pin]}")
        used[pin] = owner


def _close_relays(relays: Mapping[str, Relay]) -> None:
    """Every relay to its safe state; a relay that fails to close does not keep the others
    from closing (the first failure is raised after all were tried)."""
    failure: BaseException | None = None
    for name, relay in relays.items():
        try:
            relay.close()
        except BaseException as exc:
            log.error("relay %r (pin %d) could not be returned to its safe state: %s", name, relay.cfg.pin, exc)
            failure = failure or exc
    if failure is not None:
        raise failure
