"""Device layer on gpiozero's own MockFactory: relay levels, safe state, rate limit, switch."""

from __future__ import annotations

import logging
import signal
import threading
import time

import pytest
from gpiozero.pins.mock import MockFactory

from edge_plm import actions
from edge_plm.device import (MAIN_RELAY, Devices, FlipEvent, PersonSwitch, Relay, RelayConfig, PersonSwitchConfig,
                             PersonSwitchConfigError)
from edge_plm.device import relay as relay_mod
from edge_plm.device.led import AskBuzzer, NoLed, StatusLed, make_ask_buzzer, make_status_led
from edge_plm.device.pins import PinFactoryError, make_pin_factory
from edge_plm.device.relay import RelayClosed
from edge_plm.config.settings import GpioConfig
from kit import FakeClock

RELAY, SWITCH, LED_PIN = 17, 27, 22


@pytest.fixture
def factory() -> MockFactory:
    f = MockFactory()
    yield f
    f.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


def make_relay(factory, clock, active_high=True, safe=False, interval_ms=1000) -> Relay:
    return Relay(RelayConfig(RELAY, active_high, safe, interval_ms), factory, clock=clock,
                 install_exit_handlers=False)


# --- pin factory -------------------------------------------------------------------------
def test_mock_factory_by_name():
    factory, description = make_pin_factory("mock")
    assert isinstance(factory, MockFactory)
    assert description.startswith("mock")


def test_auto_falls_back_to_mock_with_warning(caplog, monkeypatch):
    monkeypatch.delenv("GPIOZERO_PIN_FACTORY", raising=False)
    # this test machine has no GPIO hardware and no lgpio/RPi.GPIO/pigpio libraries
    with caplog.at_level(logging.WARNING, logger="edge_plm.device.pins"):
        factory, description = make_pin_factory("auto")
    assert isinstance(factory, MockFactory)
    assert "no GPIO hardware" in description
    assert any("MockFactory" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)


def test_service_refuses_the_mock_fallback(monkeypatch):
    monkeypatch.delenv("GPIOZERO_PIN_FACTORY", raising=False)
    with pytest.raises(PinFactoryError, match='no GPIO hardware found.*gpio.pin_factory = "mock"'):
        make_pin_factory("auto", mock_fallback=False)
    factory, description = make_pin_factory("mock", mock_fallback=False)  # configured: fine
    assert isinstance(factory, MockFactory) and description.startswith("mock (configured")


def test_gpiozero_environment_variable_is_honoured_when_the_config_says_auto():
    factory, description = make_pin_factory("auto", mock_fallback=False,
                                            environ={"GPIOZERO_PIN_FACTORY": "mock"})
    assert isinstance(factory, MockFactory) and "GPIOZERO_PIN_FACTORY=mock" in description
    with pytest.raises(PinFactoryError, match="unknown pin factory 'gpiox'"):
        make_pin_factory("auto", environ={"GPIOZERO_PIN_FACTORY": "gpiox"})
    # a configured name wins over the environment
    with pytest.raises(PinFactoryError, match="'lgpio' cannot be used"):
        make_pin_factory("lgpio", environ={"GPIOZERO_PIN_FACTORY": "mock"})


def test_unknown_factory_is_a_clear_error():
    with pytest.raises(PinFactoryError, match="unknown pin factory 'gpiox'.*known:.*mock"):
        make_pin_factory("gpiox")


def test_named_factory_that_cannot_load_says_why():
    with pytest.raises(PinFactoryError, match="'lgpio' cannot be used on this machine"):
        make_pin_factory("lgpio")


def test_factories_are_independent():
    a, _ = make_pin_factory("mock")
    b, _ = make_pin_factory("mock")
    ra = make_relay(a, FakeClock(1000.0))
    rb = make_relay(b, FakeClock(1000.0))  # same pin number on another factory: no conflict
    ra.set(True)
    assert a.pin(RELAY).state is True and b.pin(RELAY).state is False
    ra.close(), rb.close()


# --- relay -------------------------------------------------------------------------------
def test_relay_active_high_levels(factory, clock):
    relay = make_relay(factory, clock, active_high=True)
    pin = factory.pin(RELAY)
    assert pin.state is False and relay.is_on is False
    assert relay.set(True)
    assert pin.state is True and relay.is_on is True
    relay.close()


def test_relay_active_low_levels(factory, clock):
    relay = make_relay(factory, clock, active_high=False)
    pin = factory.pin(RELAY)
    assert pin.state is True and relay.is_on is False  # off = high level on an active-low board
    assert relay.set(True)
    assert pin.state is False and relay.is_on is True
    relay.close()


@pytest.mark.parametrize("active_high", [True, False])
@pytest.mark.parametrize("safe", [True, False])
def test_relay_starts_in_safe_state_and_close_returns_to_it(factory, clock, active_high, safe):
    relay = make_relay(factory, clock, active_high=active_high, safe=safe)
    pin = factory.pin(RELAY)
    assert relay.is_on is safe
    assert relay.set(not safe)
    pin.clear_states()
    relay.close()
    # the last level driven before the pin was released is the safe level
    safe_level = safe if active_high else not safe
    assert [s.state for s in pin.states][-1] == safe_level
    assert pin.function == "input"  # released to the hardware default
    with pytest.raises(RelayClosed):
        relay.set(True)


def test_close_ignores_rate_limit(factory, clock):
    relay = make_relay(factory, clock)
    relay.set(True)
    pin = factory.pin(RELAY)
    pin.clear_states()
    relay.close()  # same instant as the toggle: safety wins
    assert [s.state for s in pin.states] == [True, False]


def test_rate_limit_refuses_toggle_inside_interval_and_allows_after(factory, clock, caplog):
    relay = make_relay(factory, clock, interval_ms=1000)
    assert relay.set(True)
    clock.advance(0.999)
    with caplog.at_level(logging.WARNING):
        assert relay.set(False) is False
    assert relay.is_on is True
    assert "refused" in caplog.text
    assert relay.next_allowed() == pytest.approx(1000.0 + 1.0)
    clock.advance(0.001)  # exactly the interval: allowed
    assert relay.set(False) is True
    assert relay.is_on is False
    relay.close()


def test_same_state_request_is_not_a_toggle(factory, clock):
    relay = make_relay(factory, clock)
    assert relay.set(True)
    clock.advance(0.1)
    assert relay.set(True) is True  # already on: nothing to do, not refused
    clock.advance(0.95)  # 1.05 s after the only real toggle
    assert relay.set(False) is True
    relay.close()


def test_explicit_now_overrides_clock(factory, clock):
    relay = make_relay(factory, clock)
    assert relay.set(True, now=10.0)
    assert relay.set(False, now=10.5) is False
    assert relay.set(False, now=11.0) is True
    relay.close()


def test_exit_hook_returns_open_relays_to_safe_state(factory, clock, monkeypatch):
    monkeypatch.setattr(relay_mod, "_handlers_installed", True)  # don't touch this process' hooks
    relay = Relay(RelayConfig(RELAY, True, False, 0), factory, clock=clock)
    relay.set(True)
    relay_mod._close_all_relays()  # what atexit (and SIGTERM -> SystemExit) runs
    assert relay.closed and factory.pin(RELAY).function == "input"
    assert factory.pin(RELAY).states[-1].state is False


def test_sigterm_becomes_system_exit():
    with pytest.raises(SystemExit) as info:
        relay_mod._sigterm_to_exit(signal.SIGTERM, None)
    assert info.value.code == 128 + signal.SIGTERM


# --- switch ------------------------------------------------------------------------------
def make_switch(factory, clock, mode="toggle", bounce_ms=50, reference=None, pull_up=True):
    return PersonSwitch(PersonSwitchConfig(SWITCH, mode, pull_up, bounce_ms), factory, clock=clock,
                        reference=reference)


def test_toggle_switch_each_position_change_is_a_flip(factory, clock):
    switch = make_switch(factory, clock, "toggle")
    pin = factory.pin(SWITCH)
    pin.drive_low()  # pull-up: closing the contact pulls the line low
    clock.advance(1.0)
    pin.drive_high()
    flips = switch.poll()
    assert [(f.ts, f.desired, f.position) for f in flips] == [
        (1000.0, True, True), (1001.0, False, False)]
    assert switch.poll() == []
    switch.close()


def test_toggle_switch_with_pull_down(factory, clock):
    switch = make_switch(factory, clock, "toggle", pull_up=False)
    factory.pin(SWITCH).drive_high()
    assert [f.desired for f in switch.poll()] == [True]
    switch.close()


def test_momentary_press_toggles_desired_release_is_not_a_flip(factory, clock):
    switch = make_switch(factory, clock, "momentary")
    pin = factory.pin(SWITCH)
    for _ in range(3):
        pin.drive_low()
        clock.advance(0.2)
        pin.drive_high()
        clock.advance(0.5)
    assert [f.desired for f in switch.poll()] == [True, False, True]
    switch.close()


def test_flip_means_opposite_of_relay_when_referenced(factory, clock):
    relay = make_relay(factory, clock)
    switch = make_switch(factory, clock, "toggle", reference=lambda: relay.is_on)
    relay.set(True)  # the voice turned the lamp on; the latching switch still sits at "off"
    factory.pin(SWITCH).drive_low()  # the person flips the switch (to its "on" position)...
    (flip,) = switch.poll()
    assert flip.position is True and flip.desired is False  # ...to turn the lamp off
    relay.close(), switch.close()


def test_unconsumed_flips_build_on_each_other(factory, clock):
    relay = make_relay(factory, clock)
    switch = make_switch(factory, clock, "momentary", reference=lambda: relay.is_on)
    pin = factory.pin(SWITCH)
    for _ in range(2):  # two presses before the controller applied the first one
        pin.drive_low(); clock.advance(0.1); pin.drive_high(); clock.advance(0.1)
    assert [f.desired for f in switch.poll()] == [True, False]
    relay.close(), switch.close()


def test_bounce_is_filtered(factory, clock):
    switch = make_switch(factory, clock, "toggle", bounce_ms=50)
    pin = factory.pin(SWITCH)
    pin.drive_low()
    for _ in range(4):  # contact chatter, 5 ms apart
        clock.advance(0.005)
        pin.drive_high()
        clock.advance(0.005)
        pin.drive_low()
    clock.advance(0.1)
    flips = switch.poll()
    assert [f.desired for f in flips] == [True]
    assert switch.ignored_edges == 8
    switch.close()


def test_edge_lost_in_bounce_is_reconciled_late(factory, clock):
    switch = make_switch(factory, clock, "toggle", bounce_ms=50)
    pin = factory.pin(SWITCH)
    pin.drive_low()
    clock.advance(0.01)
    pin.drive_high()  # settles high, but this edge came inside the bounce window
    assert [f.desired for f in switch.poll()] == [True]  # not settled yet: nothing late
    clock.advance(0.06)
    (late,) = switch.poll()
    assert late.desired is False and late.late is True
    switch.close()


def test_momentary_bounce_on_press_and_release_counts_once(factory, clock):
    switch = make_switch(factory, clock, "momentary", bounce_ms=50)
    pin = factory.pin(SWITCH)
    pin.drive_low(); clock.advance(0.003); pin.drive_high(); clock.advance(0.003); pin.drive_low()
    clock.advance(0.5)
    pin.drive_high(); clock.advance(0.003); pin.drive_low(); clock.advance(0.003); pin.drive_high()
    clock.advance(0.5)
    assert len(switch.poll()) == 1
    switch.close()


def test_held_down_button_counts_once_and_is_logged_once(factory, clock, caplog):
    switch = make_switch(factory, clock, "momentary")
    pin = factory.pin(SWITCH)
    pin.drive_low()
    with caplog.at_level(logging.WARNING, logger="edge_plm.device.person_switch"):
        flips = []
        for _ in range(20):  # the controller keeps polling while the button is held for 20 s
            clock.advance(1.0)
            pin.drive_low()  # no edge: the level does not change
            flips += switch.poll()
        pin.drive_high()
        flips += switch.poll()
    assert len(flips) == 1
    held = [r for r in caplog.records if "held down for" in r.getMessage()]
    assert len(held) == 1
    assert any("released after" in r.getMessage() for r in caplog.records)
    switch.close()


def test_poll_until_keeps_later_events(factory, clock):
    switch = make_switch(factory, clock, "momentary")
    pin = factory.pin(SWITCH)
    pin.drive_low(); clock.advance(1.0); pin.drive_high(); clock.advance(1.0)
    pin.drive_low()  # at t=1002
    assert [f.ts for f in switch.poll(until=1001.0)] == [1000.0]
    assert [f.ts for f in switch.poll(until=1002.0)] == [1002.0]
    switch.close()


def test_wait_flip_returns_event_or_none(factory, clock):
    switch = make_switch(factory, clock, "toggle")
    assert switch.wait_flip(timeout=0.01) is None
    factory.pin(SWITCH).drive_low()
    assert isinstance(switch.wait_flip(timeout=0.01), FlipEvent)
    switch.close()


def test_wait_flip_wakes_on_event_from_another_thread(factory, clock):
    switch = make_switch(factory, clock, "toggle")
    timer = threading.Timer(0.05, factory.pin(SWITCH).drive_low)
    timer.start()
    flip = switch.wait_flip(timeout=5.0)
    timer.join()
    assert flip is not None and flip.desired is True
    switch.close()


def test_bad_switch_mode_is_rejected(factory, clock):
    from edge_plm.device import PersonSwitchConfigError

    with pytest.raises(PersonSwitchConfigError, match="mode"):
        make_switch(factory, clock, "rocker")


# --- LED ---------------------------------------------------------------------------------
def test_status_led_blinks_while_asking(factory):
    led = make_status_led(LED_PIN, factory)
    assert isinstance(led, StatusLed) and not led.is_lit
    led.ask()
    assert led.asking
    pin = factory.pin(LED_PIN)
    # gpiozero's own blink thread runs in real time (0.25 s on/off): wait for one cycle
    deadline = time.monotonic() + 2.0
    while len(pin.states) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)  # gpiozero's own blink thread runs in real time
    assert [s.state for s in pin.states[:3]] == [False, True, False]
    led.done()
    assert not led.asking and not led.is_lit
    led.close()


def test_no_led_variant():
    led = make_status_led(-1, MockFactory())
    assert isinstance(led, NoLed)
    led.ask()
    assert led.asking
    led.done()
    assert not led.asking
    with pytest.raises(ValueError, match="-1"):
        make_status_led(-5, MockFactory())


BUZZER_PIN = 23


def wait_states(pin, n: int, timeout: float = 3.0) -> list[bool]:
    """The first n states a mock pin went through (gpiozero's threads run in real time)."""
    deadline = time.monotonic() + timeout
    while len(pin.states) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return [s.state for s in pin.states]


def test_buzzer_beeps_twice_when_asking_and_then_falls_silent(factory):
    buzzer = make_ask_buzzer(BUZZER_PIN, factory)
    assert isinstance(buzzer, AskBuzzer) and not buzzer.is_active
    buzzer.ask()
    pin = factory.pin(BUZZER_PIN)
    # initial off, then on/off twice; the beep thread ends by itself (n=2)
    assert wait_states(pin, 5) == [False, True, False, True, False]
    time.sleep(0.3)
    assert [s.state for s in pin.states] == [False, True, False, True, False]
    assert not buzzer.is_active
    buzzer.close()


def test_buzzer_done_silences_it_and_bad_pins_are_refused(factory):
    buzzer = make_ask_buzzer(BUZZER_PIN, factory)
    buzzer.ask()
    buzzer.done()
    assert not buzzer.is_active
    buzzer.close()
    assert make_ask_buzzer(-1, factory) is None
    with pytest.raises(ValueError, match="-1"):
        make_ask_buzzer(-3, factory)


# --- bundle ------------------------------------------------------------------------------
def test_devices_from_config(clock):
    cfg = GpioConfig(pin_factory="mock", relay_active_high=False, switch_mode="momentary")
    devices = Devices.from_config(cfg, clock=clock, install_exit_handlers=False)
    assert devices.factory_description.startswith("mock")
    assert devices.relays[MAIN_RELAY].is_on is False
    devices.factory.pin(cfg.switch_pin).drive_low()
    (flip,) = devices.switches[MAIN_RELAY].poll()
    assert flip.desired is True
    assert devices.relays[MAIN_RELAY].set(flip.desired)
    devices.close()
    assert devices.factory.pin(cfg.relay_pin).states[-1].state is True  # active-low off level


def test_devices_reject_shared_pins():
    with pytest.raises(ValueError, match="must differ"):
        Devices.from_config(GpioConfig(pin_factory="mock", led_pin=17),
                            install_exit_handlers=False)
    with pytest.raises(ValueError, match="buzzer_pin must differ"):
        Devices.from_config(GpioConfig(pin_factory="mock", buzzer_pin=22),
                            install_exit_handlers=False)


def test_devices_ask_signals_led_and_buzzer(clock):
    cfg = GpioConfig(pin_factory="mock", buzzer_pin=BUZZER_PIN)
    devices = Devices.from_config(cfg, clock=clock, install_exit_handlers=False)
    assert isinstance(devices.buzzer, AskBuzzer)
    devices.ask(MAIN_RELAY)
    assert devices.led.asking
    assert True in wait_states(devices.factory.pin(BUZZER_PIN), 2)
    devices.done()
    assert not devices.led.asking and not devices.buzzer.is_active
    devices.close()
    plain = Devices.from_config(GpioConfig(pin_factory="mock"), clock=clock, install_exit_handlers=False)
    assert plain.buzzer is None
    plain.ask(MAIN_RELAY)  # LED only
    assert plain.led.asking
    plain.close()


def test_two_named_relays_driven_independently_by_the_registry(clock):
    """A two-relay configuration on MockFactory: the main relay (gpio.relay_pin) and a named
    second one, each driven by the registry's relay states, both in their safe state on close."""
    cfg = GpioConfig(pin_factory="mock", relay_pin=17, min_toggle_interval_ms=0)
    fan = RelayConfig(pin=23, active_high=False, safe_state=False, min_toggle_interval_ms=0)
    devices = Devices.from_config(cfg, clock=clock, install_exit_handlers=False,
                                  extra_relays={"fan": fan})
    main_pin, fan_pin = devices.factory.pin(17), devices.factory.pin(23)
    assert list(devices.relays) == [MAIN_RELAY, "fan"]
    assert (main_pin.state, fan_pin.state) == (False, True)  # both off; the fan is active-low

    def states():
        return devices.relays[MAIN_RELAY].is_on, devices.relays["fan"].is_on

    assert devices.drive("ON", "fan") and states() == (False, True) and fan_pin.state is False
    assert devices.drive("ON", MAIN_RELAY) and states() == (True, True) and main_pin.state is True
    assert devices.drive("OFF", "fan") and states() == (True, False) and fan_pin.state is True
    for relay in (MAIN_RELAY, "fan"):  # an action without a relay state changes nothing
        assert actions.RELAY_STATE["NOOP"] is None
        assert devices.drive("NOOP", relay) and states() == (True, False)
    with pytest.raises(KeyError, match="no relay named 'lamp'"):
        devices.drive("ON", "lamp")
    with pytest.raises(ValueError, match="action must be one of ON, OFF, NOOP"):
        devices.drive("DIM", "fan")
    devices.drive("ON", "fan")
    devices.close()
    assert devices.relays[MAIN_RELAY].closed and devices.relays["fan"].closed
    # safe state (off) written last on each pin: low for the main relay, high for the active-low fan
    assert (main_pin.states[-1].state, fan_pin.states[-1].state) == (False, True)


def test_named_relays_need_their_own_pins_and_names(clock):
    with pytest.raises(ValueError, match="relay 'fan' needs its own pin, but pin 27"):
        Devices.from_config(GpioConfig(pin_factory="mock"), clock=clock, install_exit_handlers=False,
                            extra_relays={"fan": RelayConfig(pin=27)})
    with pytest.raises(ValueError, match="'main' is the configured relay"):
        Devices.from_config(GpioConfig(pin_factory="mock"), clock=clock, install_exit_handlers=False,
                            extra_relays={"main": RelayConfig(pin=23)})


def test_a_second_relay_is_closed_when_a_later_device_fails(clock):
    factory = MockFactory()
    cfg = GpioConfig(switch_mode="bogus")  # the switch refuses its config after the relays exist
    with pytest.raises(PersonSwitchConfigError, match="bogus"):
        Devices.from_config(cfg, clock=clock, factory=factory, install_exit_handlers=False,
                            extra_relays={"fan": RelayConfig(pin=23, active_high=False)})
    # both relays were released (gpiozero returns a closed output to an input) in their safe state
    for pin, off_level in ((17, False), (23, True)):
        assert factory.pin(pin).function == "input"
        assert factory.pin(pin).states[-1].state is off_level
    factory.close()
