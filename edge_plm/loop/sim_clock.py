"""The replays' simulated clock: nothing sleeps, time jumps (`edge_plm.loop.replay`)."""

from __future__ import annotations


class SimClock:
    """A settable clock in seconds for replays: nothing sleeps, time jumps."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = float(t)

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds

    def set(self, t: float) -> None:
        if t < self.t:
            raise ValueError("the simulated clock cannot go back")
        self.t = t
