"""Device layer: relay, the person's switch, the status LED and an optional buzzer over gpiozero.

`Devices.from_config(GpioConfig)` builds them on one pin factory (real GPIO when present,
gpiozero's MockFactory otherwise, see `pins.make_pin_factory`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from gpiozero import Factory

from edge_plm.device.led import AskBuzzer, NoLed, StatusLed, make_ask_buzzer, make_status_led
from edge_plm.device.pins import PinFactoryError, make_pin_factory
from edge_plm.device.relay import Clock, Relay, RelayClosed, RelayConfig
from edge_plm.device.switch import FlipEvent, PersonSwitch, SwitchConfig, SwitchConfigError
from edge_plm.settings import GpioConfig

log = logging.getLogger(__name__)

__all__ = [
    "AskBuzzer", "Devices", "FlipEvent", "NoLed", "PersonSwitch", "PinFactoryError", "Relay", "RelayClosed",
    "RelayConfig", "StatusLed", "SwitchConfig", "SwitchConfigError", "make_pin_factory",
    "make_ask_buzzer", "make_status_led",
]


@dataclass
class Devices:
    """The relay, switch, LED and (optional) buzzer of one device, sharing one pin factory."""

    relay: Relay
    switch: PersonSwitch
    led: StatusLed | NoLed
    factory: Factory
    factory_description: str
    buzzer: AskBuzzer | None = None

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
    ) -> Devices:
        """Build the devices from `cfg`; `factory` overrides ``cfg.pin_factory`` (tests).
        ``mock_fallback=False`` (the service) refuses simulated pins unless configured."""
        if factory is None:
            factory, description = make_pin_factory(cfg.pin_factory, mock_fallback=mock_fallback)
        else:
            description = f"{type(factory).__name__} (given)"
        pins = [p for p in (cfg.relay_pin, cfg.switch_pin, cfg.led_pin, cfg.buzzer_pin) if p != -1]
        if len(set(pins)) != len(pins):
            raise ValueError(f"gpio: relay_pin, switch_pin, led_pin and buzzer_pin must differ, got {pins}")
        relay = Relay(
            RelayConfig(cfg.relay_pin, cfg.relay_active_high, cfg.relay_safe_state,
                        cfg.min_toggle_interval_ms),
            factory, clock=clock, install_exit_handlers=install_exit_handlers,
        )
        switch: PersonSwitch | None = None
        led: StatusLed | NoLed | None = None
        try:
            switch = PersonSwitch(
                SwitchConfig(cfg.switch_pin, cfg.switch_mode, cfg.switch_pull_up,
                             cfg.switch_bounce_ms, initial_desired=cfg.relay_safe_state),
                factory, clock=clock, reference=lambda: relay.is_on,
            )
            led = make_status_led(cfg.led_pin, factory)
            buzzer = make_ask_buzzer(cfg.buzzer_pin, factory)
        except BaseException:
            if led is not None:
                led.close()
            if switch is not None:
                switch.close()
            relay.close()
            raise
        log.info("GPIO: %s; relay pin %d, switch pin %d (%s), LED pin %d, buzzer pin %d",
                 description, cfg.relay_pin, cfg.switch_pin, cfg.switch_mode, cfg.led_pin,
                 cfg.buzzer_pin)
        return cls(relay, switch, led, factory, description, buzzer)

    def close(self) -> None:
        """LED and buzzer off, switch released, relay to its safe state (last, and even if
        others fail)."""
        try:
            self.led.close()
            if self.buzzer is not None:
                self.buzzer.close()
            self.switch.close()
        finally:
            self.relay.close()
