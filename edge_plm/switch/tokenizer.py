"""Character-level tokenizer with reserved dialogue tokens and an online-growing vocabulary.

Normalisation (``normalize``), applied to every transcript before tokenising:
  1. Unicode NFKC, then lower-case (``str.casefold``);
  2. characters other than letters, digits, apostrophes and spaces become spaces
     (punctuation carries almost nothing in ASR output, and ASR engines differ in it);
  3. runs of whitespace collapse to one space; leading/trailing spaces are removed.

The first ids are reserved (``RESERVED``): padding, unknown, the dialogue markers, then the
actions' tokens in class order (`edge_plm.actions`: ids 0..7 with ON, OFF, NOOP). Characters
get the following ids, in the order they are added. A vocabulary can *grow* (``add``) as new
characters appear online; ids of known tokens never change, so their bit-cipher codes never
change either. ``encode(..., grow=False)`` maps unseen characters to
``<unk>`` instead of growing.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable

from edge_plm import actions

PAD, UNK, USER, DEVICE, SEP = range(5)
MARKERS = ("<pad>", "<unk>", "USER:", "DEVICE:", "<sep>")
RESERVED = MARKERS + actions.TOKENS
ACTIONS = actions.ACTIONS  # the action names, in class order (re-exported for callers)
ACTION_IDS = tuple(range(len(MARKERS), len(RESERVED)))  # in class order


def normalize(text: str) -> str:
    """The transcript as the model reads it (module docstring). Idempotent:
    ``normalize(normalize(x)) == normalize(x)`` (checked over every code point), so the model
    normalises once at its entry and passes the normalised text down."""
    text = unicodedata.normalize("NFKC", text).casefold()
    kept = [ch if (ch.isalnum() or ch in "' ") else " " for ch in text]
    return " ".join("".join(kept).split())


class CharTokenizer:
    """Maps normalised text to ids. Reserved tokens first, then characters."""

    def __init__(self, chars: Iterable[str] = ()):
        self.tokens: list[str] = list(RESERVED)
        self.index: dict[str, int] = {tok: i for i, tok in enumerate(self.tokens)}
        for ch in chars:
            self.add(ch)

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> "CharTokenizer":
        """Characters ranked by frequency (ties by character), most frequent first."""
        counts = Counter(ch for text in texts for ch in normalize(text))
        ranked = sorted(counts, key=lambda ch: (-counts[ch], ch))
        return cls(ranked)

    def __len__(self) -> int:
        return len(self.tokens)

    def add(self, ch: str) -> int:
        if len(ch) != 1:
            raise ValueError(f"a character token must be one character, got {ch!r}")
        if ch not in self.index:
            self.index[ch] = len(self.tokens)
            self.tokens.append(ch)
        return self.index[ch]

    def encode(self, text: str, grow: bool = True, normalised: bool = False) -> list[int]:
        """The ids of ``text``'s characters after ``normalize`` (``normalised``: ``text`` is
        already; ``normalize`` is idempotent, so this only saves the work)."""
        ids = []
        for ch in text if normalised else normalize(text):
            if ch in self.index:
                ids.append(self.index[ch])
            elif grow:
                ids.append(self.add(ch))
            else:
                ids.append(UNK)
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.tokens[i] if i >= len(RESERVED) else f"[{self.tokens[i]}]" for i in ids)

    def dialogue(self, transcript: str, grow: bool = True, normalised: bool = False) -> list[int]:
        """``USER: <transcript> <sep> DEVICE:`` — the action token follows this prefix."""
        return [USER, *self.encode(transcript, grow=grow, normalised=normalised), SEP, DEVICE]

    def to_json(self) -> list[str]:
        return list(self.tokens[len(RESERVED):])

    @classmethod
    def from_json(cls, chars: list[str]) -> "CharTokenizer":
        return cls(chars)
