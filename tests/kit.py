"""The test kit: one fake clock, one phrase set and one replay builder for every test file.

- `FakeClock`: seconds, moved by the test (`advance`, `set`); with ``tick`` every read steps
  forward first (a store's clock that gives each row its own time).
- `PHRASES`: labelled utterances, ON / OFF / NOOP in turn (``PHRASES[:3]``: one of each);
  `session` turns them into replay lines.
- `make_replay`: the real loop (controller, learner, policy, store) on MockFactory pins and a
  simulated clock (`edge_plm.loop.replay.build_replay`) with the tests' usual knobs.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from edge_plm.learning.learner import LearnerConfig
from edge_plm.decide.policy import Action, PolicyConfig
from edge_plm.loop.replay import Replay, SessionLine, build_replay
from edge_plm.config.settings import Settings

#: an epoch for clocks: a plausible wall time (2023-11-14), far from 0
EPOCH = 1_700_000_000.0


class FakeClock:
    """A clock in seconds that only the test moves. ``tick`` > 0: every read first steps the
    time forward by ``tick`` (so each stored row gets a time of its own)."""

    def __init__(self, t: float = EPOCH, tick: float = 0.0) -> None:
        self.t = float(t)
        self.tick = float(tick)

    def __call__(self) -> float:
        self.t += self.tick
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds

    def set(self, t: float) -> None:
        self.t = float(t)


#: labelled utterances, ON / OFF / NOOP in turn; PHRASES[:3] is one of each
PHRASES: list[tuple[str, str]] = [
    ("turn on the light", "ON"), ("turn off the light", "OFF"), ("what time is it", "NOOP"),
    ("lamp on please", "ON"), ("lights off now", "OFF"), ("play some music", "NOOP"),
    ("switch the lamp on", "ON"), ("turn the plug off", "OFF"), ("tell me a joke", "NOOP"),
]


def session(phrases: list[tuple[str, str | None]] = PHRASES, repeat: int = 1) -> list[SessionLine]:
    """Text replay lines of `phrases` (a None label: the simulated person does nothing)."""
    return [SessionLine(None if y is None else Action(y), text=t) for t, y in phrases] * repeat


def make_replay(db: str | Path | None, *, settings: Settings | None = None, start: str | None = None,
                policy: PolicyConfig | None = None, asr: Any = None, seed: int | None = None,
                learner_cfg: LearnerConfig | None = None, **learner: Any) -> Replay:
    """`build_replay` on `settings` (default: built-in) with ``model.start`` = `start` and
    `policy` if given; ``learner`` keywords make a `LearnerConfig` (``version_every``
    defaults to 1000 then: no version unless the test asks for one)."""
    settings = settings or Settings()
    if start is not None:
        settings = replace(settings, model=replace(settings.model, start=start))
    if policy is not None:
        settings = replace(settings, policy=policy)
    if learner:
        learner.setdefault("version_every", 1000)
        learner_cfg = LearnerConfig(**learner)
    return build_replay(settings, db, seed=seed, asr=asr, learner_cfg=learner_cfg)


class MemoryStates:
    """A relay state store in memory (the replay buffer's relay-state methods: on / off by relay,
    and a dimmer's lit level)."""

    def __init__(self, states: dict[str, bool], levels: dict[str, float] | None = None) -> None:
        self.states = dict(states)
        self.levels = dict(levels or {})

    def relay_state(self, name: str) -> bool | None:
        return self.states.get(name)

    def set_relay_state(self, name: str, is_on: bool) -> None:
        self.states[name] = is_on

    def relay_level(self, name: str) -> float | None:
        return self.levels.get(name)

    def set_relay_level(self, name: str, level: float) -> None:
        self.levels[name] = level


__all__ = ["EPOCH", "FakeClock", "MemoryStates", "PHRASES", "make_replay", "session"]
