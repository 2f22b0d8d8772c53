"""The replays' simulated person (``edge-plm replay``, `edge_plm.loop.replay.run_session`,
benchmarks): the flips a real person would make after the device acted, asked or ignored,
and their hand on a mock switch (`flip_switch`). A simulation aid, beside the mock pins the
replays drive, not part of the policy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from edge_plm.decide.policy import Action

if TYPE_CHECKING:
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


__all__ = ["SimulatedFlip", "SimulatedPerson", "flip_switch"]
