"""Device layer: relays, the person's switch, the status LED and an optional buzzer over gpiozero.

`Devices.from_config(GpioConfig)` builds them on one pin factory (real GPIO when present,
gpiozero's MockFactory otherwise, see `pins.make_pin_factory`). Relays are held by name: the
configured relay is the main one (`MAIN_RELAY`, ``devices.relay``), the one the person's switch
and the policy refer to; further named relays can be given to `Devices.from_config`. An action
of `edge_plm.actions` drives a relay to its relay state (`Devices.drive`). Given a
`RelayStateStore` (the service gives its replay buffer), every relay is restored after its safe
state as ``gpio.relay_restore`` says and its changes are recorded (`edge_plm.device.restore`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from gpiozero import Factory

from edge_plm import actions
from edge_plm.device.led import AskBuzzer, NoLed, StatusLed, make_ask_buzzer, make_status_led
from edge_plm.device.pins import PinFactoryError, make_pin_factory
from edge_plm.device.relay import Clock, Relay, RelayClosed, RelayConfig
from edge_plm.device.restore import RelayStateStore, restore_relays
from edge_plm.device.person_switch import FlipEvent, PersonSwitch, PersonSwitchConfig, PersonSwitchConfigError
from edge_plm.settings import GpioConfig

log = logging.getLogger(__name__)

__all__ = [
    "AskBuzzer", "Devices", "FlipEvent", "MAIN_RELAY", "NoLed", "PersonSwitch", "PinFactoryError", "Relay",
    "RelayClosed", "RelayConfig", "StatusLed", "PersonSwitchConfig", "PersonSwitchConfigError", "make_pin_factory",
    "make_ask_buzzer", "make_status_led",
]

#: The name of the configured relay (``gpio.relay_pin``), the one the switch and policy use.
MAIN_RELAY = "main"


@dataclass
class Devices:
    """The relays (by name), switch, LED and (optional) buzzer of one device, sharing one pin
    factory."""

    relays: dict[str, Relay]
    switch: PersonSwitch
    led: StatusLed | NoLed
    factory: Factory
    factory_description: str
    buzzer: AskBuzzer | None = None

    @property
    def relay(self) -> Relay:
        """The main relay (`MAIN_RELAY`)."""
        return self.relays[MAIN_RELAY]

    def drive(self, action: str, relay: str = MAIN_RELAY, now: float | None = None) -> bool:
        """Drive relay `relay` to the state `action` asks for (`edge_plm.actions.RELAY_STATE`;
        an action without a relay state leaves it as it is). True when the relay is now in that
        state, False when its rate limit refused the change (see `Relay.set`)."""
        if relay not in self.relays:
            raise KeyError(f"no relay named {relay!r} (relays: {', '.join(self.relays)})")
        if action not in actions.RELAY_STATE:
            raise ValueError(f"action must be one of {', '.join(actions.ACTIONS)}, got {action!r}")
        state = actions.RELAY_STATE[action]
        return True if state is None else self.relays[relay].set(state, now)

    def ask(self) -> None:
        """Signal "I'm not sure": the LED blinks until `done`, the buzzer beeps."""
        self.led.ask()
        if self.buzzer is not None:
            self.buzzer.ask()

    def done(self) -> None:
        """The ask window closed: LED off, buzzer silent."""
        self.led.done()
        if self.buzzer is not None:
            self.buzzer.done()

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
    ) -> Devices:
        """Build the devices from `cfg`; `factory` overrides ``cfg.pin_factory`` (tests).
        ``mock_fallback=False`` (the service) refuses simulated pins unless configured.
        `extra_relays`: further relays by name, next to the main one. `state_store`: restore
        the relays (``cfg.relay_restore``) and record their changes there (none: every relay
        stays in its safe state and nothing is recorded, as in replays)."""
        extra = dict(extra_relays or {})
        if MAIN_RELAY in extra:
            raise ValueError(f"relay name {MAIN_RELAY!r} is the configured relay (gpio.relay_pin)")
        if factory is None:
            factory, description = make_pin_factory(cfg.pin_factory, mock_fallback=mock_fallback)
        else:
            description = f"{type(factory).__name__} (given)"
        _check_pins(cfg, extra)
        main = RelayConfig(cfg.relay_pin, cfg.relay_active_high, cfg.relay_safe_state, cfg.min_toggle_interval_ms)
        relays: dict[str, Relay] = {}
        switch: PersonSwitch | None = None
        led: StatusLed | NoLed | None = None
        buzzer: AskBuzzer | None = None
        try:
            for name, rcfg in {MAIN_RELAY: main, **extra}.items():
                relays[name] = Relay(rcfg, factory, clock=clock, install_exit_handlers=install_exit_handlers)
            relay = relays[MAIN_RELAY]
            switch = PersonSwitch(
                PersonSwitchConfig(cfg.switch_pin, cfg.switch_mode, cfg.switch_pull_up,
                             cfg.switch_bounce_ms, initial_desired=cfg.relay_safe_state),
                factory, clock=clock, reference=lambda: relay.is_on,
            )
            led = make_status_led(cfg.led_pin, factory)
            buzzer = make_ask_buzzer(cfg.buzzer_pin, factory)
            if state_store is not None:
                restore_relays(relays, dict.fromkeys(relays, cfg.relay_restore), state_store)
        except BaseException:
            if buzzer is not None:
                buzzer.close()
            if led is not None:
                led.close()
            if switch is not None:
                switch.close()
            _close_relays(relays)
            raise
        log.info("GPIO: %s; relay pin %d, switch pin %d (%s), LED pin %d, buzzer pin %d%s",
                 description, cfg.relay_pin, cfg.switch_pin, cfg.switch_mode, cfg.led_pin,
                 cfg.buzzer_pin, "".join(f", relay {n!r} pin {r.pin}" for n, r in extra.items()))
        return cls(relays, switch, led, factory, description, buzzer)

    def close(self) -> None:
        """LED and buzzer off, switch released, every relay to its safe state (last, and even
        if others fail)."""
        try:
            self.led.close()
            if self.buzzer is not None:
                self.buzzer.close()
            self.switch.close()
        finally:
            _close_relays(self.relays)


def _check_pins(cfg: GpioConfig, extra: Mapping[str, RelayConfig]) -> None:
    """Every device needs its own pin."""
    pins = [p for p in (cfg.relay_pin, cfg.switch_pin, cfg.led_pin, cfg.buzzer_pin) if p != -1]
    if len(set(pins)) != len(pins):
        raise ValueError(f"gpio: relay_pin, switch_pin, led_pin and buzzer_pin must differ, got {pins}")
    for name, rcfg in extra.items():
        if rcfg.pin in pins:
            raise ValueError(f"gpio: relay {name!r} needs its own pin, but pin {rcfg.pin} is already used")
        pins.append(rcfg.pin)


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
