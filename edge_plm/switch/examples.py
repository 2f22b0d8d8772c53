"""The switch model's labelled examples, in learning order: each one's dialogue character ids
(``tokenizer.CharTokenizer.dialogue``) and action index, under a stable key (its index).

A forgotten example keeps its slot (keys never move), loses its character ids and is marked
removed. Examples with keys below ``prior`` came with the starting model (``SwitchModel.mark_start``);
while the model has a frozen starting part they cannot change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edge_plm.switch.tokenizer import CharTokenizer


@dataclass
class ExampleStore:
    tokenizer: CharTokenizer = field(default_factory=CharTokenizer)
    examples: list[tuple[list[int], int]] = field(default_factory=list)  # (character ids, label), by key
    removed: set[int] = field(default_factory=set)  # keys of forgotten examples
    prior: int = 0  # examples with keys below this came with the starting model (0: none)

    def __len__(self) -> int:
        """Keys handed out (forgotten examples included)."""
        return len(self.examples)

    @property
    def n_live(self) -> int:
        """Examples held now (forgotten ones not counted)."""
        return len(self.examples) - len(self.removed)

    def encode(self, text: str, grow: bool) -> list[int]:
        """The dialogue ids of the normalised transcript ``text`` (``grow``: new characters join)."""
        return self.tokenizer.dialogue(text, grow=grow, normalised=True)

    def add(self, text: str, label: int) -> int:
        """A new example of the normalised transcript ``text``; returns its key."""
        self.examples.append((self.encode(text, grow=True), label))
        return len(self.examples) - 1

    def label(self, key: int) -> int:
        return self.examples[key][1]

    def relabel(self, key: int, label: int) -> None:
        self.examples[key] = (self.examples[key][0], label)

    def drop(self, key: int) -> None:
        """Forget example ``key``: its character ids go, its slot and label stay."""
        self.examples[key] = ([], self.examples[key][1])
        self.removed.add(key)

    def text_of(self, key: int) -> str:
        """The normalised transcript of example ``key`` (from its stored character ids)."""
        seq = self.examples[key][0]
        return "".join(self.tokenizer.tokens[i] for i in seq[1:-2])

    def live_keys(self) -> list[int]:
        return [k for k in range(len(self.examples)) if k not in self.removed]

    def check_key(self, key: int, frozen_prior: bool) -> int:
        """``key`` as an int when it is an example that may change; KeyError otherwise (no such
        key, forgotten, or, with ``frozen_prior``, the starting model's)."""
        key = int(key)
        if not 0 <= key < len(self.examples):
            raise KeyError(f"no example with key {key} (the model holds keys 0..{len(self.examples) - 1})")
        if key in self.removed:
            raise KeyError(f"example {key} was forgotten")
        if key < self.prior and frozen_prior:
            raise KeyError(f"example {key} is the starting model's (frozen); only the owner's examples change")
        return key
