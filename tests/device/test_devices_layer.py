"""Several named devices on gpiozero's MockFactory: three relays, three switches, per-device
LED and the shared LED's blink count ([[devices]], docs/devices.md)."""

from __future__ import annotations

import time

import pytest
from gpiozero.pins.mock import MockFactory

from edge_plm.device import Devices
from edge_plm.config.settings import DeviceConfig, GpioConfig
from kit import FakeClock, MemoryStates

HOUSE = [DeviceConfig("lamp", ["light"], relay_pin=17, switch_pin=27),
         DeviceConfig("fan", [], relay_pin=23, relay_active_high=False, switch_pin=24),
         DeviceConfig("heater", [], relay_pin=5, switch_pin=6, led_pin=13)]


def build(clock, **kw) -> Devices:
    cfg = GpioConfig(pin_factory="mock", min_toggle_interval_ms=0, led_pin=22)
    return Devices.from_config(cfg, clock=clock, factory=MockFactory(), install_exit_handlers=False,
                               devices=HOUSE, **kw)


def test_three_relays_and_three_switches_drive_their_own_pins():
    clock = FakeClock(1000.0)
    devices = build(clock)
    pin = devices.factory.pin
    assert devices.names == ["lamp", "fan", "heater"]
    assert list(devices.switches) == ["lamp", "fan", "heater"]
    # all in the safe state (off): the active-low fan's pin is high
    assert (pin(17).state, pin(23).state, pin(5).state) == (False, True, False)
    assert devices.drive("ON", "fan") and pin(23).state is False and pin(17).state is False
    assert devices.drive("ON", "heater") and pin(5).state is True
    assert [devices.relays[n].is_on for n in devices.names] == [False, True, True]
    # each switch reports only its own flips; a flip means "the opposite of its relay now"
    clock.advance(1.0)
    pin(24).drive_low()  # the fan's toggle switch moves
    assert devices.switches["lamp"].poll() == [] and devices.switches["heater"].poll() == []
    (flip,) = devices.switches["fan"].poll()
    assert flip.desired is False  # the fan is on: the person wants it off
    clock.advance(1.0)
    pin(27).drive_low()
    (flip,) = devices.switches["lamp"].poll()
    assert flip.desired is True
    devices.close()
    assert all(r.closed for r in devices.relays.values())
    assert (pin(17).states[-1].state, pin(23).states[-1].state, pin(5).states[-1].state) == (False, True, False)


def test_each_relay_is_restored_by_its_own_policy_and_recorded_by_name():
    store = MemoryStates({"lamp": True, "fan": True})
    devs = [HOUSE[0], DeviceConfig("fan", [], 23, False, "off", 24), DeviceConfig("heater", [], 5, True, "on", 6)]
    cfg = GpioConfig(pin_factory="mock", min_toggle_interval_ms=0)
    devices = Devices.from_config(cfg, clock=FakeClock(1000.0), factory=MockFactory(),
                                  install_exit_handlers=False, devices=devs, state_store=store)
    assert [devices.relays[n].is_on for n in devices.names] == [True, False, True]
    assert store.states == {"lamp": True, "fan": False, "heater": True}
    devices.drive("OFF", "lamp")
    assert store.states["lamp"] is False
    devices.close()


def wait_for(pin, n: int, timeout: float = 4.0) -> list[bool]:
    deadline = time.monotonic() + timeout
    while len(pin.states) < n and time.monotonic() < deadline:
        time.sleep(0.02)
    return [s.state for s in pin.states]


def test_the_shared_led_blinks_the_number_of_the_device_in_doubt_and_an_own_led_blinks_alone():
    devices = build(FakeClock(1000.0))
    shared, own = devices.factory.pin(22), devices.factory.pin(13)
    devices.ask("fan")  # the second device: groups of two blinks
    wait_for(shared, 14)
    devices.done()
    assert devices.factory.pin(22).state is False and not devices.led.asking
    # the pin records its changes: between two lit periods the LED is dark for one period
    # (within a group) or four (the pause after a group); a group holds two blinks
    changes = shared.states[1:14]
    dark = [b.timestamp - a.timestamp for a, b in zip(changes, changes[1:]) if not a.state and b.state]
    long = [d > 0.6 for d in dark]
    assert any(long) and not all(long), dark
    firsts = [i for i, x in enumerate(long) if x]
    assert all(b - a == 2 for a, b in zip(firsts, firsts[1:])), dark
    devices.ask("heater")  # it has its own LED: that one blinks, the shared one stays dark
    wait_for(own, 3)
    assert True in [s.state for s in own.states]
    assert devices.led.asking and not devices.led.is_lit
    devices.done()
    assert own.state is False and not devices.led.asking
    devices.close()


def test_pins_shared_between_devices_are_refused():
    clash = [HOUSE[0], DeviceConfig("fan", [], relay_pin=27, switch_pin=24)]
    with pytest.raises(ValueError, match="'fan' relay needs its own pin, but pin 27 is already the 'lamp' switch"):
        Devices.from_config(GpioConfig(pin_factory="mock"), factory=MockFactory(),
                            install_exit_handlers=False, devices=clash)
