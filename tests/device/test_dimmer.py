"""Dimmable devices on gpiozero's MockFactory with PWM pins (``MockPWMPin``): the dimmer's duty
cycle, its rate limit for toggles only, its level watchers, a rotary encoder and an up / down
button pair moving it and recording `LevelChange` events, `Devices` with a dimmer, restore."""

from __future__ import annotations

import math

import pytest
from gpiozero.pins.mock import MockFactory, MockPWMPin

from edge_plm.device import Devices, Dimmer, DimmerConfig, DimmerPwmUnsupported, LevelChange
from edge_plm.device.level_control import LevelChanges, LevelControl, LevelControlConfig
from edge_plm.device.relay import RelayClosed
from edge_plm.device.restore import restore_relays
from edge_plm.config.settings import DeviceConfig, GpioConfig
from kit import FakeClock, MemoryStates

PIN = 18


@pytest.fixture()
def factory() -> MockFactory:
    return MockFactory(pin_class=MockPWMPin)


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock(1000.0)


def make_dimmer(factory, clock, interval_ms=1000, active_high=True, safe=False, **kw) -> Dimmer:
    return Dimmer(DimmerConfig(PIN, active_high, safe, interval_ms, **kw), factory, clock=clock,
                  install_exit_handlers=False)


def duty(factory, pin=PIN) -> float:
    return float(factory.pin(pin).state)


def test_on_lights_the_last_lit_level_off_sets_zero(factory, clock):
    d = make_dimmer(factory, clock)
    assert (d.level, d.is_on, duty(factory)) == (0.0, False, 0.0)
    assert factory.pin(PIN).frequency == 100
    assert d.set(True) and duty(factory) == 1.0 and d.level == 1.0  # default lit level: full
    assert d.step(-1) == 0.75 and duty(factory) == 0.75  # a level change: no rate limit
    clock.advance(1.0)
    assert d.set(False) and duty(factory) == 0.0 and not d.is_on
    assert d.lit_level == 0.75
    clock.advance(1.0)
    assert d.set(True) and duty(factory) == 0.75  # back at its last lit level
    d.close()
    assert duty(factory) == 0.0 and d.closed


def test_active_low_pwm_inverts_the_duty_cycle(factory, clock):
    d = make_dimmer(factory, clock, active_high=False)
    assert duty(factory) == 1.0  # off: the pin is high
    assert d.set_level(0.3) and d.level == 0.3
    assert math.isclose(duty(factory), 0.7)
    d.close()


def test_set_level_clamps_and_zero_is_off(factory, clock):
    d = make_dimmer(factory, clock, interval_ms=0, min_level=0.1)
    assert d.set_level(0.01) and d.level == 0.1  # the lowest lit level
    assert d.set_level(7) and d.level == 1.0
    assert d.set_level(0.5) and duty(factory) == 0.5
    assert d.set_level(0) and d.level == 0.0 and not d.is_on and duty(factory) == 0.0
    assert d.set_level(-3) and d.level == 0.0
    with pytest.raises(ValueError):
        d.set_level(float("nan"))
    d.close()
    with pytest.raises(RelayClosed):
        d.set_level(0.5)


def test_toggles_are_rate_limited_level_changes_are_not(factory, clock):
    d = make_dimmer(factory, clock, interval_ms=1000)
    assert d.set_level(0.5)  # off -> lit: a toggle
    for level in (0.6, 0.7, 0.8, 0.2):  # lit -> lit, at once: never refused
        assert d.set_level(level) and duty(factory) == level
    assert d.set_level(0) is False and d.level == 0.2  # lit -> off inside the interval
    assert d.set(False) is False
    clock.advance(1.0)
    assert d.set_level(0) and d.level == 0.0
    assert d.set_level(0.4) is False and d.level == 0.0  # off -> lit inside the interval
    d.close()


def test_step_never_dims_below_min_level_and_brightens_an_off_light_at_one_step(factory, clock):
    d = make_dimmer(factory, clock, interval_ms=0)
    assert d.step(-1) == 0.0  # dimming an off light does nothing
    assert d.step(+1) == 0.25 and d.is_on  # brightening it: on at level_step
    assert [d.step(+1) for _ in range(4)] == [0.5, 0.75, 1.0, 1.0]
    assert [d.step(-1) for _ in range(5)] == [0.75, 0.5, 0.25, 0.05, 0.05]  # never off
    assert d.is_on and d.move(-1) == (0.05, 0.05)
    with pytest.raises(ValueError):
        d.step(0)
    d.close()


def test_watchers_and_level_watchers(factory, clock):
    d = make_dimmer(factory, clock, interval_ms=0)
    states, levels, records = [], [], []
    d.watchers.append(states.append)
    d.level_watchers.append(levels.append)
    d.level_watchers.append(lambda level: 1 / 0)  # a failing watcher is logged, never raised
    d.on_change = records.append
    d.set(True)
    d.set_level(0.5)
    d.step(-1)
    d.set(False)
    assert states == [True, False] and records == [True, False]  # on / off only
    assert levels == [1.0, 0.5, 0.25, 0.0]  # every change of level
    d.close()
    assert levels == [1.0, 0.5, 0.25, 0.0]  # close is not a change the person made


def test_safe_state_on_lights_it_fully(factory, clock):
    d = make_dimmer(factory, clock, safe=True)
    assert d.level == 1.0 and duty(factory) == 1.0
    d.close()
    assert duty(factory) == 0.0  # the pin released (gpiozero stops the PWM)


def test_a_factory_without_pwm_is_a_clear_error(clock):
    with pytest.raises(DimmerPwmUnsupported, match="cannot drive PWM"):
        make_dimmer(MockFactory(), clock)


# --- level controls ----------------------------------------------------------------------------
A, B, UP, DOWN = 5, 6, 20, 21


def detent(factory, clockwise: bool = True) -> None:
    """One detent of a KY-040-style encoder (pulled up, common to ground): one full quadrature
    cycle, A leading B clockwise."""
    first, second = (A, B) if clockwise else (B, A)
    factory.pin(first).drive_low()
    factory.pin(second).drive_low()
    factory.pin(first).drive_high()
    factory.pin(second).drive_high()


def test_an_encoder_turned_moves_the_duty_and_records_level_changes(factory, clock):
    d = make_dimmer(factory, clock, interval_ms=0)
    changes = LevelChanges()
    control = LevelControl("lamp", d, LevelControlConfig(encoder_pins=(A, B)), factory, changes, clock=clock)
    detent(factory)  # off: on at a quarter step
    assert d.level == 0.0625 and duty(factory) == 0.0625
    clock.advance(0.5)
    for _ in range(3):
        detent(factory)
    assert d.level == 0.25 and duty(factory) == 0.25
    detent(factory, clockwise=False)
    assert d.level == 0.1875
    got = changes.drain()
    assert [(c.device, c.before, c.after, c.source) for c in got] == [
        ("lamp", 0.0, 0.0625, "control"), ("lamp", 0.0625, 0.125, "control"),
        ("lamp", 0.125, 0.1875, "control"), ("lamp", 0.1875, 0.25, "control"),
        ("lamp", 0.25, 0.1875, "control")]
    assert got[0].at == 1000.0 and got[1].at == 1000.5
    assert changes.drain() == []
    control.close()
    control.close()  # idempotent
    detent(factory)  # released: the knob moves nothing any more
    assert d.level == 0.1875 and changes.drain() == []
    d.close()


def test_up_and_down_buttons_move_one_step_a_press(factory, clock):
    d = make_dimmer(factory, clock, interval_ms=0)
    changes = LevelChanges()
    control = LevelControl("lamp", d, LevelControlConfig(up_pin=UP, down_pin=DOWN, bounce_ms=0), factory,
                           changes, clock=clock)

    def press(pin):
        factory.pin(pin).drive_low()
        factory.pin(pin).drive_high()

    press(UP)
    press(UP)
    assert d.level == 0.5 and duty(factory) == 0.5
    press(DOWN)
    press(DOWN)
    press(DOWN)  # at the lowest level: nothing more to record
    press(DOWN)
    assert d.level == 0.05 and d.is_on
    assert [(c.before, c.after) for c in changes.drain()] == [
        (0.0, 0.25), (0.25, 0.5), (0.5, 0.25), (0.25, 0.05)]
    control.close()
    d.close()


def test_a_level_control_is_an_encoder_or_a_button_pair(factory, clock):
    d = make_dimmer(factory, clock)
    for bad in (LevelControlConfig(), LevelControlConfig(encoder_pins=(A,)),
                LevelControlConfig(up_pin=UP), LevelControlConfig(encoder_pins=(A, B), up_pin=UP)):
        with pytest.raises(ValueError):
            LevelControl("lamp", d, bad, factory, LevelChanges(), clock=clock)
    with pytest.raises(ValueError):
        LevelChanges().put(LevelChange("lamp", 0, 1, 0.0, "voice"))
    d.close()


# --- Devices --------------------------------------------------------------------------------
HOUSE = [DeviceConfig("lamp", ["light"], relay_pin=17, switch_pin=27, kind="dimmer", encoder_pins=[A, B]),
         DeviceConfig("fan", [], relay_pin=23, switch_pin=24),
         DeviceConfig("spots", [], relay_pin=12, switch_pin=16, kind="dimmer", up_pin=UP, down_pin=DOWN,
                      switch_bounce_ms=0, level_step=0.5)]


def build(clock, factory=None, **kw) -> Devices:
    cfg = GpioConfig(pin_factory="mock", min_toggle_interval_ms=0, led_pin=22)
    return Devices.from_config(cfg, clock=clock, factory=factory or MockFactory(pin_class=MockPWMPin),
                               install_exit_handlers=False, devices=HOUSE, **kw)


def test_devices_with_dimmers_drive_on_off_and_levels(clock):
    devices = build(clock)
    pin = devices.factory.pin
    assert devices.names == ["lamp", "fan", "spots"]
    assert set(devices.dimmers) == {"lamp", "spots"} and set(devices.relays) == {"lamp", "fan", "spots"}
    assert devices.relays["lamp"] is devices.dimmers["lamp"]
    assert devices.is_dimmer("lamp") and not devices.is_dimmer("fan")
    assert set(devices.controls) == {"lamp", "spots"}
    assert devices.drive("ON", "lamp") and pin(17).state == 1.0
    assert devices.set_level("lamp", 0.4) and pin(17).state == 0.4
    assert devices.step("lamp", -1) == 0.15
    assert devices.drive("OFF", "lamp") and pin(17).state == 0.0
    assert devices.drive("ON", "lamp") and pin(17).state == 0.15
    assert devices.drive("ON", "fan") and pin(23).state == 1.0
    with pytest.raises(KeyError, match="no dimmer named 'fan'"):
        devices.set_level("fan", 0.5)
    assert devices.level_changes() == []  # the loop's own changes are not the person's
    detent(devices.factory)
    pin(UP).drive_low()
    pin(UP).drive_high()
    change = devices.remote_level("spots", 0.9)
    assert change == LevelChange("spots", 0.5, 0.9, 1000.0, "remote") and pin(12).state == 0.9
    assert devices.remote_level("spots", 0.9) is None  # nothing changed: nothing recorded
    got = devices.level_changes()
    assert [(c.device, c.before, c.after, c.source) for c in got] == [
        ("lamp", 0.15, 0.2125, "control"), ("spots", 0.0, 0.5, "control"), ("spots", 0.5, 0.9, "remote")]
    assert devices.level_changes() == []
    # the dimmer's switch is its on / off teacher, as a relay's
    pin(16).drive_low()
    (flip,) = devices.switches["spots"].poll()
    assert flip.desired is False  # the spots are lit: the person wants them off
    devices.close()
    assert (pin(17).state, pin(12).state) == (0.0, 0.0)


def test_a_relay_only_configuration_builds_exactly_as_before(clock):
    cfg = GpioConfig(pin_factory="mock", min_toggle_interval_ms=0)
    devices = Devices.from_config(cfg, clock=clock, factory=MockFactory(), install_exit_handlers=False,
                                  devices=[DeviceConfig("fan", [], relay_pin=23, switch_pin=24)])
    assert devices.dimmers == {} and devices.controls == {} and not devices.is_dimmer("fan")
    assert type(devices.relays["fan"]).__name__ == "Relay"
    assert devices.drive("ON", "fan") and devices.factory.pin(23).state is True
    assert devices.level_changes() == []
    devices.close()


def test_the_mock_factory_by_name_gets_pwm_pins_only_with_a_dimmer(clock):
    devices = Devices.from_config(GpioConfig(pin_factory="mock"), clock=clock, install_exit_handlers=False,
                                  devices=HOUSE)
    assert devices.factory.pin_class is MockPWMPin
    devices.close()
    devices = Devices.from_config(GpioConfig(pin_factory="mock"), clock=clock, install_exit_handlers=False,
                                  devices=[HOUSE[1]])
    assert devices.factory.pin_class is not MockPWMPin
    devices.close()


def test_level_control_pins_need_their_own(clock):
    clash = [HOUSE[0], DeviceConfig("fan", [], relay_pin=23, switch_pin=B)]
    with pytest.raises(ValueError, match="'fan' switch needs its own pin, but pin 6 is already the 'lamp' encoder"):
        Devices.from_config(GpioConfig(pin_factory="mock"), clock=clock, factory=MockFactory(pin_class=MockPWMPin),
                            install_exit_handlers=False, devices=clash)


def test_a_dimmer_is_restored_on_at_full_level_and_recorded(clock):
    store = MemoryStates({"lamp": True, "spots": False})
    devices = build(clock, state_store=store)
    pin = devices.factory.pin
    assert devices.dimmers["lamp"].level == 1.0 and pin(17).state == 1.0  # on, never dimmed: full
    assert not devices.dimmers["spots"].is_on
    devices.set_level("lamp", 0.3)  # a level change while lit: its lit level is recorded
    assert store.states["lamp"] is True and store.levels["lamp"] == 0.3
    devices.drive("OFF", "lamp")
    assert store.states["lamp"] is False and store.levels["lamp"] == 0.3  # off keeps the lit level
    devices.close()
    assert restore_relays({}, {}, store) == {}


def test_a_dimmer_comes_back_at_its_last_level_after_a_restart(clock, tmp_path):
    from edge_plm.store import ReplayStore

    with ReplayStore(tmp_path / "r.db") as store:
        devices = build(clock, state_store=store)
        devices.drive("ON", "lamp")
        devices.set_level("lamp", 0.4)
        devices.close()  # a stop: the safe state, not recorded
        devices = build(clock, state_store=store)  # the restart
        assert devices.dimmers["lamp"].level == 0.4 and devices.factory.pin(17).state == 0.4
        devices.drive("OFF", "lamp")
        devices.close()
        devices = build(clock, state_store=store)  # off stays off, and ON lights it at 0.4
        assert not devices.dimmers["lamp"].is_on
        devices.drive("ON", "lamp")
        assert devices.dimmers["lamp"].level == 0.4
        devices.close()
