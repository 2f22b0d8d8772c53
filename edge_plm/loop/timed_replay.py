"""Timed lines in a replayed session (``edge-plm replay``; docs/contracts.md).

A session line may carry ``"delay": S`` (the person wants the line's action S seconds after
saying it: "turn off the lights in twenty minutes", ``"delay": 1200``) or ``"for": S`` (the
action now, and the relay back S seconds later: "turn on the fan for an hour", ``"for":
3600``). After such a line the simulated clock runs to the wished time: the loop's pump runs
the due timers, and the simulated person looks at the relay `TOLERANCE_S` before and after
that time; where it is not as they want, they switch it by hand then. What each timed line
got is a `TimedLine`; the summary adds ``timed_lines``, ``timers_set``, ``timed_right``,
``acted_at_wrong_time`` and ``timed_missed`` (only for sessions with timed lines).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from edge_plm.decide.policy import Action

if TYPE_CHECKING:
    from edge_plm.loop.controller import Controller, Outcome

#: A timer that ran this close to the wished time ran on time (the loop pumps every 0.1 s on
#: the device; a replay pumps when the person looks).
TOLERANCE_S = 30.0


@dataclass(frozen=True)
class TimedLine:
    """What one timed line got: ``right`` (the relay where the person wanted it, when they
    wanted it, without their hand), ``wrong_time`` (the relay moved to the wished state
    before the time, or a ``for`` line's way back came early), else ``missed``."""

    index: int
    kind: str  # "delay" or "for"
    timers_set: int
    right: bool
    wrong_time: bool

    @property
    def missed(self) -> bool:
        return not self.right and not self.wrong_time


def timing_of(row: dict, where: str, error: type[Exception]) -> tuple[float | None, float | None]:
    """A line's ``"delay"`` and ``"for"`` (seconds > 0; at most one of them)."""
    out = []
    for key in ("delay", "for"):
        v = row.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                              or not math.isfinite(v) or v <= 0):
            raise error(f'{where}: "{key}" must be a number of seconds > 0, got {v!r}')
        out.append(None if v is None else float(v))
    if out[0] is not None and out[1] is not None:
        raise error(f'{where}: a line has "delay" or "for", not both')
    return out[0], out[1]


def wants_now(line, wants: dict[str, Action] | None) -> dict[str, Action] | None:
    """What the person wants right after saying a line: nothing yet for a delayed one."""
    if wants is None or getattr(line, "delay", None) is None:
        return wants
    return dict.fromkeys(wants, Action.NOOP)


def follow_line(i: int, line, wants: dict[str, Action] | None, outcome: Outcome,
                controller: Controller, clock, said_at: float, before: dict[str, bool],
                after: dict[str, bool], flip) -> TimedLine | None:
    """Run the clock to a timed line's wished time and judge what the relays did (module
    docstring); `before` / `after`: the relays before the line and right after the device
    responded; ``flip(name)`` is the person's hand. None for a line that is not timed, or
    whose wish is not known."""
    delay, hold = getattr(line, "delay", None), getattr(line, "hold", None)
    if wants is None or (delay is None and hold is None):
        return None
    targets = {n: w.state for n, w in wants.items() if w.state is not None}
    relays = controller.devices.relays
    iid = outcome.interaction_id
    timers = sum(t.interaction_id == iid for t in controller.store.timers(None)) if iid else 0
    due = said_at + (delay if delay is not None else hold)
    # after the line: the state now, and the state wanted at the time
    now_state = {n: relays[n].is_on for n in targets}
    later = targets if delay is not None else {n: not s for n, s in targets.items()}
    early = delay is not None and any(after[n] == s != before[n] for n, s in targets.items())
    clock.set(max(clock(), due - TOLERANCE_S))
    controller.pump()
    early = early or any(relays[n].is_on != now_state[n] for n in targets)
    clock.set(max(clock(), due + TOLERANCE_S))
    controller.pump()
    right = not early and all(relays[n].is_on == s for n, s in later.items())
    for n, s in later.items():
        if relays[n].is_on != s:
            flip(n)  # the person switches it by hand at the time
    return TimedLine(i, "delay" if delay is not None else "for", timers, right and bool(later), early)


def summary_keys(timed: list[TimedLine]) -> dict[str, int]:
    """The keys a session with timed lines adds to the replay summary."""
    if not timed:
        return {}
    return {"timed_lines": len(timed), "timers_set": sum(t.timers_set for t in timed),
            "timed_right": sum(t.right for t in timed),
            "acted_at_wrong_time": sum(t.wrong_time for t in timed),
            "timed_missed": sum(t.missed for t in timed)}


__all__ = ["TOLERANCE_S", "TimedLine", "follow_line", "summary_keys", "timing_of", "wants_now"]
