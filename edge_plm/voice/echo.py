"""The device never learns from its own voice: microphone input heard while it speaks, or
within a short guard after, is dropped (and counted) instead of becoming an interaction.

Times are the controller's clock (seconds). `speaking(start, seconds)` records that the device
plays `seconds` of audio from `start`; `is_echo(start, end)` says whether an utterance heard
from `start` to `end` overlaps any playback plus its guard. Only the latest few playbacks are
kept (the device says one short question at a time).
"""

from __future__ import annotations

import threading
from collections import deque


class EchoGuard:
    """Speaking intervals plus `guard_s`; `dropped` counts the utterances it rejected."""

    def __init__(self, guard_s: float = 0.5, keep: int = 8) -> None:
        if not guard_s >= 0:
            raise ValueError("guard_s must be >= 0")
        self.guard_s = float(guard_s)
        self._spans: deque[tuple[float, float]] = deque(maxlen=keep)
        self._lock = threading.Lock()
        self.dropped = 0

    def speaking(self, start: float, seconds: float) -> None:
        with self._lock:
            self._spans.append((start, start + max(0.0, seconds) + self.guard_s))

    def quiet_at(self) -> float | None:
        """When the latest playback's guard ends (None: the device has not spoken)."""
        with self._lock:
            return self._spans[-1][1] if self._spans else None

    def is_echo(self, start: float, end: float) -> bool:
        """True (and counted) when [start, end] overlaps a playback or its guard."""
        with self._lock:
            hit = any(start <= b and end >= a for a, b in self._spans)
            if hit:
                self.dropped += 1
            return hit


__all__ = ["EchoGuard"]
