"""The transcript memory: which labelled examples had each exact normalised transcript, and the
distribution their labels give when that transcript is heard again (``SwitchModel``'s module
docstring, "Corrections stick").

With every label of a transcript agreeing, the n labels' action is confident,
(n e_latest + MEMORY_DOUBT u) / (n + MEMORY_DOUBT) with u uniform; when they disagree (the person
corrected it), the latest label wins at MEMORY_CONFLICT_SHARE e_latest + (1 - share) u (0.73 with
three actions), which the default policy asks about instead of acting on. The memory holds keys,
not labels: a relabel changes the distribution through the examples' labels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from edge_plm.actions import ACTIONS

MEMORY_DOUBT = 0.1  # pseudo-count of "anything" next to n agreeing labels of an exact transcript
MEMORY_CONFLICT_SHARE = 0.6  # weight of the latest label when labels of a transcript disagree


@dataclass
class TranscriptMemory:
    """normalised transcript -> the keys of its labelled examples, in learning order."""

    keys: dict[str, list[int]] = field(default_factory=dict)

    def __contains__(self, text: str) -> bool:
        return text in self.keys

    def add(self, text: str, key: int) -> None:
        self.keys.setdefault(text, []).append(key)

    def forget(self, text: str, key: int) -> None:
        """Example ``key`` (of transcript ``text``) no longer counts; a transcript left with no
        example leaves the memory."""
        held = self.keys.get(text, [])
        if key in held:
            held.remove(key)
        if not held:
            self.keys.pop(text, None)

    def remembered(self, text: str, label_of: Callable[[int], int]) -> np.ndarray | None:
        """The distribution the labels of the normalised transcript ``text`` give (``label_of``:
        an example key's action index), None if it was never labelled."""
        keys = self.keys.get(text)
        if not keys:
            return None
        held = [label_of(k) for k in keys]
        latest = np.eye(len(ACTIONS))[held[-1]]
        uniform = np.full(len(ACTIONS), 1.0 / len(ACTIONS))
        if len(set(held)) == 1:
            n = len(held)
            return (n * latest + MEMORY_DOUBT * uniform) / (n + MEMORY_DOUBT)
        return MEMORY_CONFLICT_SHARE * latest + (1.0 - MEMORY_CONFLICT_SHARE) * uniform
