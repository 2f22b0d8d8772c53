"""The replays' simulated person (``edge-plm replay``, `edge_plm.loop.replay.run_session`,
benchmarks): the flips a real person would make after the device acted, asked or ignored,
and their hand on a mock switch (`flip_switch`). A simulation aid, beside the mock pins the
replays drive, not part of the policy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from edge_plm.decide.policy import Action

if TYPE_CHECKING:
    from edge_plm.device.level_control import LevelControl
    from edge_plm.device.person_switch import PersonSwitch
    from edge_plm.loop.sim_clock import SimClock


@dataclass(frozen=True)
class SimulatedFlip:
    """A flip the simulated person makes at time `at`, wanting the relay `desired`."""

    at: float
    desired: bool


@dataclass(frozen=True)
class SimulatedPerson:
    """A person who wants `wants` and fixes what the device got wrong after `reaction_s`.

    The person wants the relay to end in: ON for ON, OFF for OFF, and for NOOP whatever it was
    before they spoke. After the device acted, asked or ignored, if the relay is not in that
    state they flip the switch once to it; when it is right they do nothing. (So when asked
    for what the relay already does, they do nothing: a flip could only make it wrong.)
    """

    reaction_s: float = 1.5

    def __post_init__(self) -> None:
        if not self.reaction_s > 0:
            raise ValueError("reaction_s must be > 0")

    @staticmethod
    def wanted_state(wants: Action, before: bool) -> bool:
        """The relay state the person wants after saying something meaning `wants`."""
        return before if wants.state is None else wants.state

    def react(self, wants: Action, before: bool, after: bool, now: float) -> list[SimulatedFlip]:
        """Flips the person makes, given the relay state before the utterance and after the
        device's response (`now` is when the device responded)."""
        target = self.wanted_state(Action(wants), before)
        if after == target:
            return []
        return [SimulatedFlip(now + self.reaction_s, target)]


def flip_switch(switch: PersonSwitch, factory_pin: Any, clock: SimClock) -> None:
    """Move the person's (mock) switch once, on its MockFactory pin `factory_pin`, as a hand
    would: the real PersonSwitch reacts."""
    if switch.cfg.mode == "momentary":
        factory_pin.drive_low() if switch.cfg.pull_up else factory_pin.drive_high()
        clock.advance(0.2)
        factory_pin.drive_high() if switch.cfg.pull_up else factory_pin.drive_low()
    elif factory_pin.state:
        factory_pin.drive_low()
    else:
        factory_pin.drive_high()


def turn_knob(control: LevelControl, factory: Any, level: float, want: float) -> int:
    """The person turns a dimmer's own control (on its MockFactory pins) from `level` toward
    `want`, as a hand would: a rotary encoder by whole detents (each a full quadrature cycle,
    A leading B clockwise, as a KY-040 pulled up), up / down buttons by whole presses; the real
    `LevelControl` moves the light and records the changes. Returns the detents or presses."""
    if control.kind == "encoder":
        a, b = control.pins
        n = round((want - level) / control.detent)
        first, second = (a, b) if n > 0 else (b, a)
        for _ in range(abs(n)):
            factory.pin(first).drive_low()
            factory.pin(second).drive_low()
            factory.pin(first).drive_high()
            factory.pin(second).drive_high()
        return abs(n)
    up, down = control.pins
    n = round((want - level) / control.step)
    for _ in range(abs(n)):
        pin = factory.pin(up if n > 0 else down)
        pin.drive_low()
        pin.drive_high()
    return abs(n)


__all__ = ["SimulatedFlip", "SimulatedPerson", "flip_switch", "turn_knob"]
