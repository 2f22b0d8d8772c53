"""What the loop records of one input: its latency breakdown (`Latency`, timed by a
`Stopwatch`), what it did (`Outcome`), why an input was rejected (`Rejected`), and which
failures mean "could not be written" (`storage_failure`)."""

from __future__ import annotations

import errno
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from edge_plm.decide.policy import Action, Decision
from edge_plm.loop.outcomes import DeviceResult
from edge_plm.store import StorageError

_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS}


def storage_failure(exc: BaseException) -> bool:
    """`StorageError`, or an OSError that means "could not be written" (disk full, quota, I/O
    error, read-only file system), e.g. from writing a checkpoint."""
    return isinstance(exc, StorageError) or (isinstance(exc, OSError)
                                              and exc.errno in _DISK_ERRNOS)


@dataclass(frozen=True)
class Latency:
    """Per-interaction latency breakdown in milliseconds (None: that stage did not run).

    `after_speech` (not stored in the database): for an utterance with a known endpoint that
    drove the relay, the silence tail plus the time from the endpoint until the relay call
    returned (what the person waits after their last word)."""

    audio: float | None = None
    asr: float | None = None
    model: float | None = None
    actuator: float | None = None
    total: float | None = None
    after_speech: float | None = None

    def columns(self) -> dict[str, float | None]:
        return {"latency_audio_ms": self.audio, "latency_asr_ms": self.asr,
                "latency_model_ms": self.model, "latency_actuator_ms": self.actuator,
                "latency_total_ms": self.total}


@dataclass(frozen=True)
class Outcome:
    """What `Controller.handle` did with one input.

    ``devices`` is the one record of what the policies decided, per device; `decision`,
    `prediction`, `confidence` and `action` are read from the ``lead`` device's part (the one
    the interaction's row holds, `outcomes.lead_device`; one device: its own part), so there is
    no second copy to keep in step."""

    interaction_id: int | None  # None only if even storing the row failed
    transcript: str
    latency: Latency
    error: str | None = None
    stored: bool = True  # False: the interaction (or part of it) could not be stored
    # each device's part of an utterance the policies decided on; None for an input error,
    # an answer, own voice
    devices: dict[str, DeviceResult] | None = None
    lead: str | None = None  # the device of ``devices`` whose part the interaction's row holds
    answer: bool | None = None  # talk-back: a spoken yes/no to the open ask (no row of its own)
    answered: Action | None = None  # ... and the relay state it drove (None: none)

    @property
    def lead_result(self) -> DeviceResult | None:
        """The lead device's part (None: no utterance the policies decided on)."""
        return None if self.devices is None or self.lead is None else self.devices[self.lead]

    def _lead(self, part: str) -> Any:
        """The lead device's `part` (a `DeviceResult` field), None without one."""
        r = self.lead_result
        return None if r is None else getattr(r, part)

    @property
    def decision(self) -> Decision | None:
        """The lead device's decision; None for an input error, an answer, own voice."""
        return self._lead("decision")

    @property
    def prediction(self) -> str | None:
        return self._lead("prediction")

    @property
    def confidence(self) -> float | None:
        return self._lead("confidence")

    @property
    def action(self) -> Action | None:
        """The relay state driven: the lead device's (an ACT that reached the relay), or what a
        spoken answer drove."""
        return self.answered if self.lead_result is None else self._lead("action")

class Stopwatch:
    """The latency breakdown of one input in ms, filled stage by stage."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.ms: dict[str, float] = {}
        self.after_speech: float | None = None  # set when the relay was driven (Latency)

    def record(self, stage: str, ms: float) -> None:
        self.ms[stage] = ms

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as stage `name` (also when it raises)."""
        t = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = (time.perf_counter() - t) * 1e3

    def stop(self) -> Latency:
        """The breakdown, with the total: the audio plus everything since the input arrived."""
        total = self.ms.get("audio", 0.0) + (time.perf_counter() - self.start) * 1e3
        return Latency(**self.ms, total=total, after_speech=self.after_speech)


class Rejected(Exception):
    """An input without a usable transcript: stored as an error row, never seen by the policy."""

    def __init__(self, error: str, asr_backend: str | None = None, keep_audio: bool = False):
        super().__init__(error)
        self.error = error
        self.asr_backend = asr_backend
        self.keep_audio = keep_audio



def clamp(p: float) -> float:
    """A probability as stored: a float in [0, 1]."""
    return min(1.0, max(0.0, float(p)))


__all__ = ["Latency", "Outcome", "Rejected", "Stopwatch", "clamp", "storage_failure"]
