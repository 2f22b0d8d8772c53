"""What the person's silence has already said about a wording (``Policy``'s memory; docs/policy.md,
"Left alone in both states").

A switch left alone after an utterance says "what the relay already is, or no command": with
the relay off, "turn off the porch light" and "play my playlist" both leave it alone. The label
rules then decide between the two by the model's probabilities, and leave it unlabelled when
they cannot (`Policy._no_flip`). The same wording left alone once with the relay on and once
with it off can only have been no command: this remembers, per wording, the relay states in
which it was left alone without a label, so that the second time settles it as NOOP.

Pure and bounded: the newest ``capacity`` wordings (least recently used dropped first); nothing
is stored across restarts (the model's own labels are).
"""

from __future__ import annotations

from collections import OrderedDict

from edge_plm.switch.tokenizer import normalize


def wording(text: str | None) -> str | None:
    """The key of a transcript: the model's own normalisation (``tokenizer.normalize``, as its
    exact-transcript memory keys it); None for no text."""
    if text is None:
        return None
    return normalize(text) or None


class LeftAlone:
    """Per wording, the relay states (True: on) in which it was left alone without a label."""

    def __init__(self, capacity: int = 2000) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self.capacity = capacity
        self._states: OrderedDict[str, set[bool]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._states)

    def record(self, text: str | None, relay_on: bool) -> None:
        """``text`` was left alone, unlabelled, with the relay ``relay_on``."""
        key = wording(text)
        if key is None:
            return
        self._states.setdefault(key, set()).add(bool(relay_on))
        self._states.move_to_end(key)
        while len(self._states) > self.capacity:
            self._states.popitem(last=False)

    def other_state_seen(self, text: str | None, relay_on: bool) -> bool:
        """Was ``text`` left alone before with the relay in the other state?"""
        key = wording(text)
        return key is not None and (not relay_on) in self._states.get(key, ())

    def drop(self, text: str | None) -> None:
        """``text`` got a label: what its silences said is no longer needed."""
        key = wording(text)
        if key is not None:
            self._states.pop(key, None)
