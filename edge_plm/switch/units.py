"""Collision-free units of the switch's local block: word-anchored character n-grams and
whole words, in a vocabulary grown online (docs/design.md §2.2, docs/method.md "Units").

A transcript (normalised as by the tokenizer) is split into words; each word, padded with one
space on either side (" lamp "), gives its character n-grams of lengths ``min_n``..``max_n``
(n-grams never cross a word boundary: they are anchored to a word), and the word itself is a
unit ``"w:lamp"``. Every distinct string has its own id: no hashing, so two n-grams never share
a unit. Ids are handed out in order of first arrival and never change (append-only), so
statistics indexed by unit id stay valid while the vocabulary grows, and a checkpoint stores the
strings in id order.

``scrub`` (after a `forget`) tombstones the units no remaining text uses: the slot and its id
stay (ids are append-only), the string goes (a tombstone is ``None`` in the stored list), and a
tombstoned unit never matches again: hearing it again gives it a fresh id.

The vocabulary is capped (``cap`` units, which bounds the parameters that depend on it). Once it
is full, units first heard after that are not added: they are treated like units of a text the
model has not heard (ignored by the prediction and counted as unsupported by the confidence).
With potato's cap of 60,000 a household fills it after tens of thousands of distinct
utterances; the dev set's 708 utterances use about 10,000.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from edge_plm.switch.tokenizer import normalize

WORD_PREFIX = "w:"
SOUND_PREFIX = "s:"
BIGRAM_PREFIX = "b:"
TF_MODES = ("count", "log", "binary")
_SOUNDEX = {**dict.fromkeys("bfpv", "1"), **dict.fromkeys("cgjkqsxz", "2"), **dict.fromkeys("dt", "3"),
            "l": "4", **dict.fromkeys("mn", "5"), "r": "6"}


def soundex(word: str) -> str:
    """American Soundex of a word (first letter + 3 digits; digits and apostrophes dropped):
    words that sound alike share it ("of", "off"), so a misheard word can still meet its unit."""
    letters = [ch for ch in word if ch.isalpha()]
    if not letters:
        return word
    out, last = [letters[0]], _SOUNDEX.get(letters[0], "")
    for ch in letters[1:]:
        code = _SOUNDEX.get(ch, "")
        if code and code != last:
            out.append(code)
        if ch not in "hw":
            last = code
    return ("".join(out) + "000")[:4]


def unit_strings(text: str, min_n: int, max_n: int, sound: bool = False, bigrams: bool = False,
                 sound_max_len: int = 0, normalised: bool = False) -> list[str]:
    """Units of ``text`` in reading order, with repeats (the n-grams of each word, then it, then
    with ``sound`` its Soundex key, of words of at most ``sound_max_len`` characters when that
    is > 0; with ``bigrams`` each pair of adjacent words at the end). ``text`` is normalised
    first unless ``normalised`` says it already is (``normalize`` is idempotent)."""
    if not 1 <= min_n <= max_n:
        raise ValueError(f"need 1 <= min_n <= max_n, got {min_n}, {max_n}")
    out: list[str] = []
    words = (text if normalised else normalize(text)).split()
    for word in words:
        padded = f" {word} "
        for n in range(min_n, max_n + 1):
            out.extend(padded[i:i + n] for i in range(len(padded) - n + 1))
        out.append(WORD_PREFIX + word)
        if sound and (not sound_max_len or len(word) <= sound_max_len):
            out.append(SOUND_PREFIX + soundex(word))
    if bigrams:
        out.extend(f"{BIGRAM_PREFIX}{a} {b}" for a, b in zip(words, words[1:]))
    return out


def is_long(unit: str, support_min_n: int) -> bool:
    """Units that count for the support of a transcript: words and n-grams of at least
    ``support_min_n`` characters (short n-grams like " t" occur in almost any text)."""
    if unit.startswith((WORD_PREFIX, BIGRAM_PREFIX)):
        return True
    return not unit.startswith(SOUND_PREFIX) and len(unit) >= support_min_n


class UnitVocab:
    """Append-only map unit string -> id, capped at ``cap`` units (tombstoned slots count)."""

    def __init__(self, cap: int, min_n: int, max_n: int, word_weight: float, units: Iterable[str] = (),
                 support_min_n: int = 4, sound_weight: float = 0.0, bigram_weight: float = 0.0,
                 tf: str = "count", ngram_mass: float = 0.0,
                 ngram_power: float = 1.0, sound_max_len: int = 0):
        self.sound_max_len = int(sound_max_len)
        if ngram_mass < 0:
            raise ValueError(f"n-gram mass must be >= 0, got {ngram_mass}")
        self.ngram_mass = float(ngram_mass)
        self.ngram_power = float(ngram_power)
        if tf not in TF_MODES:
            raise ValueError(f"unit tf must be one of {TF_MODES}, got {tf!r}")
        self.tf = tf
        if cap <= 0:
            raise ValueError(f"unit cap must be positive, got {cap}")
        if word_weight <= 0:
            raise ValueError(f"word weight must be positive, got {word_weight}")
        self.cap, self.min_n, self.max_n, self.word_weight = int(cap), int(min_n), int(max_n), float(word_weight)
        self.support_min_n = int(support_min_n)
        self.sound_weight = float(sound_weight)
        self.bigram_weight = float(bigram_weight)
        self._weight = {WORD_PREFIX: self.word_weight, SOUND_PREFIX: self.sound_weight, BIGRAM_PREFIX: self.bigram_weight}
        self.units: list[str | None] = []  # None: a tombstone (``scrub``)
        self.index: dict[str, int] = {}
        self._long = np.zeros(0, dtype=bool)  # per id: counts for the support (is_long)
        for u in units:
            if u is None:
                self._append(None)
            else:
                self.add(u)

    def __len__(self) -> int:
        return len(self.units)

    @property
    def full(self) -> bool:
        return len(self.units) >= self.cap

    def add(self, unit: str) -> int:
        """The id of ``unit``, appended when new; -1 when new and the vocabulary is full."""
        i = self.index.get(unit)
        if i is not None:
            return i
        if self.full:
            return -1
        self.index[unit] = len(self.units)
        return self._append(unit)

    def _append(self, unit: str | None) -> int:
        self.units.append(unit)
        if len(self._long) < len(self.units):  # grown in blocks, not per unit
            self._long = np.concatenate([self._long, np.zeros(max(1024, len(self._long)), dtype=bool)])
        self._long[len(self.units) - 1] = unit is not None and is_long(unit, self.support_min_n)
        return len(self.units) - 1

    def strings_of(self, text: str) -> set[str]:
        """Every unit string of the normalised transcript ``text`` (known or not)."""
        return {u for u, _ in self.weighted_units(text)}

    def scrub(self, keep: set[str]) -> list[int]:
        """Tombstone every unit whose string is not in ``keep``: its slot and id stay, its
        string goes, and it never matches again. Returns the ids tombstoned now."""
        gone = [i for u, i in self.index.items() if u not in keep]
        for i in gone:
            del self.index[self.units[i]]
            self.units[i] = None
        return sorted(gone)

    def long_mask(self, ids: np.ndarray) -> np.ndarray:
        """For each id: does the unit count for the support (``is_long``)."""
        return self._long[ids]

    def weighted_units(self, text: str) -> list[tuple[str, float]]:
        """(unit, weight) of each unit occurrence of the normalised transcript ``text`` (the
        vocabulary's methods take normalised text: the model normalises once, at its entry;
        ``tokenizer.normalize``): an n-gram weighs 1 (with
        ``ngram_mass`` > 0: that mass shared by the n-grams of its word, so a word's spelling
        weighs the same whatever its length), a word ``word_weight``, a Soundex key
        ``sound_weight``, a word pair ``bigram_weight``."""
        out: list[tuple[str, float]] = []
        start = 0  # first n-gram of the current word
        for u in unit_strings(text, self.min_n, self.max_n, sound=self.sound_weight > 0, bigrams=self.bigram_weight > 0,
                             sound_max_len=self.sound_max_len, normalised=True):
            if u[1:2] != ":":
                out.append((u, 1.0))
                continue
            if u.startswith(WORD_PREFIX) and self.ngram_mass > 0 and len(out) > start:
                share = self.ngram_mass / (len(out) - start) ** self.ngram_power
                out[start:] = [(g, share) for g, _ in out[start:]]
            out.append((u, self._weight[u[:2]]))
            start = len(out)
        return out

    def features(self, text: str, grow: bool) -> tuple[np.ndarray, np.ndarray, float]:
        """(ids, weights, unknown): the distinct known units of ``text`` in increasing id
        order with their weights (occurrences; a word unit counts ``word_weight``), and the
        total weight of the support-counting (``is_long``) units that have no id (never heard,
        or heard after the cap). ``grow`` adds new units (while there is room)."""
        ids, weights, unknown, _ = self.positioned(text, grow)
        return ids, weights, unknown

    def positioned(self, text: str, grow: bool) -> tuple[np.ndarray, np.ndarray, float, tuple]:
        """``features`` plus where each unit occurred: entries (pos, m, v) — the word position
        of the occurrence, the index of its unit in ``ids`` and its share of that unit's weight
        (the shares of a unit sum to its weight), so that sum over positions = the bag. A word's
        n-grams, the word and its Soundex key belong to the word's position; a word pair to the
        position of its second word."""
        at_of: list[int] = []  # position, id and weight of each known occurrence
        id_of: list[int] = []
        w_of: list[float] = []
        unknown = 0.0
        words_seen = pairs = 0
        for u, w in self.weighted_units(text):
            if u.startswith(BIGRAM_PREFIX):  # "b:a b": the position of b
                pairs += 1
                at = pairs
            elif u.startswith(WORD_PREFIX):  # the word ends its n-grams
                at = words_seen
                words_seen += 1
            elif u.startswith(SOUND_PREFIX):  # follows its word
                at = words_seen - 1
            else:  # an n-gram of the word being read
                at = words_seen
            i = self.add(u) if grow else self.index.get(u, -1)
            if i < 0:
                unknown += w if is_long(u, self.support_min_n) else 0.0
            else:
                at_of.append(at)
                id_of.append(i)
                w_of.append(w)
        ids, weights, entries = merge_occurrences(at_of, id_of, w_of, self.tf)
        return ids, weights, unknown, entries

    def to_json(self) -> list[str | None]:
        return list(self.units)


def merge_occurrences(at: list[int], ids: list[int], w: list[float], tf: str) -> tuple:
    """(ids, weights, (ent_pos, ent_m, ent_v)) of a transcript's known unit occurrences (word
    position, unit id, weight each): the distinct ids in increasing order, each one's weight
    (its occurrences' summed weight, in their order; with ``tf`` "log" / "binary" the mean
    weight of an occurrence x (1 + ln c) / x 1), and each occurrence's entry: its position, its
    unit's index in ids and its share of that unit's weight."""
    raw = np.array(ids, dtype=np.int64)
    wr = np.array(w, dtype=np.float64)
    uniq, m = np.unique(raw, return_inverse=True)
    m = m.astype(np.int64)
    acc = np.bincount(m, weights=wr, minlength=len(uniq)).astype(np.float64, copy=False)  # float if empty
    weights = acc
    if tf != "count":
        c = np.bincount(m, minlength=len(uniq)).astype(np.float64)
        weights = acc / c * (1.0 + np.log(c) if tf == "log" else 1.0)
    return uniq, weights, (np.array(at, dtype=np.int64), m, weights[m] * wr / acc[m])
