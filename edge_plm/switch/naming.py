"""A device's name as the query of an attention over the transcript's words (docs/method.md,
"Several devices: the name is the query"). Pure math: no I/O.

For a configured device (``addressing.DeviceName``) and each word position k of a transcript, a
comparison s_k in [0, 1] says how much word k is one of the device's name words:

- **codes**: every name and alias word is registered in the word vocabulary
  (``words.WordVocab``, append-only, so it gets a frozen bit-cipher code). The comparison of a
  heard word with a name word is read from a ``plm.cache.ColumnCache`` column of C = E E^T
  (one column per name word, extended as the vocabulary grows) and divided by the two codes'
  norms. Codes are distinct, so this is 1 exactly when the heard word is the name word.
- **units** (ASR garble, plurals): a heard word whose code is not the name word's compares by
  its bag of word-anchored character n-grams (``units.unit_strings``, the word's own unit left
  out): GARBLE_SHARE x the cosine of the two bags when that cosine is at least SIM_FLOOR, else
  0. A plural ("fans", "lamps": the name word + "s" / "es") compares as GARBLE_SHARE.

Each name word attends to the position that compares best with it (hard attention: the
argmax; when the name's words as one run of m words compare as well, that run); a name of m
words scores the mean of its m best comparisons, a device the best of its name and aliases.
A device's learned words (``device_evidence.DeviceEvidence``: what its switch taught) add a
second score: the largest evidence of a heard word for the device. The device's score r_d is
the larger of the two.

Shares (``address``): the devices with r_d >= ADDRESS_FLOOR and within MARGIN of the best
score are addressed, except a device whose name's positions are a strict part of another
addressed device's ("turn on the salt lamp" is for the salt lamp, not the lamp: the longest
name wins), with the share p_d = min(1, r_d / FULL_SHARE); when none is, "all" /
"every" / "everything" address every device, and otherwise one device gets the command
(``unnamed_device``): the one with the largest share

    p_d = (u_d + s_d * UNNAMED_PRIOR) / (u + UNNAMED_PRIOR),

u the unnamed commands the owner's switches labelled, u_d those labelled for device d
(``DeviceEvidence.unnamed_commands``), s_d = UNNAMED_SHARE for the first device (the default
one, where a single device's switch always went) and an equal part of the rest for each other.
With several devices a command that names none ("power off", "turn wemo on") is the default
device's only that surely: asked about, not acted on, until the owner has shown that unnamed
commands are the default device's (about five of them), or another device's (then they go to
it), or its switch has taught the words that name another device (docs/benchmarks-log.md, "Two
devices"). The words the addressed devices' queries picked up are the *slot*: the command's action is read from the transcript without
them ("turn on the kettle" -> "turn on the"), so a name the action model never heard, or
heard as another device's, does not change the action. A model's ``SwitchConfig.slot_word``
stands in the slot's place instead when its starting model was trained with that word as the
name ("turn on the kettle" -> "turn on the <slot>"; a trial, `models/build_switch_en.py
--slot-word`); the shipped model has none and leaves the slot out (docs/benchmarks-log.md, "Two
devices", compares both, and "Several named devices: the model" "light" as a filler).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edge_plm.plm.cache import ColumnCache
from edge_plm.switch.units import WORD_PREFIX, unit_strings
from edge_plm.switch.words import WordVocab

ALL_WORDS = frozenset({"all", "every", "everything"})  # address every device when none is named
SIM_FLOOR = 0.6  # n-gram bag cosine below which a heard word is not a name word
GARBLE_SHARE = 0.9  # a near word (plural, garble) counts at most this much of the name word itself
ADDRESS_FLOOR = 0.4  # a device scoring below this is not addressed
FULL_SHARE = 0.6  # score from which a device gets the whole command
MARGIN = 0.2  # a device scoring more than this below the best one is not addressed
UNNAMED_SHARE = 0.7  # the default device's share of a command naming none, before any is labelled
UNNAMED_PRIOR = 5.0  # pseudo-count of UNNAMED_SHARE against the owner's labelled unnamed commands
OWN_VOCAB = (4096, 14, 1)  # cap, bits, query words of the names' own vocabulary (model without attention)


@dataclass(frozen=True)
class Addressing:
    """Which devices a transcript addresses: the share of each, each device's score, the slot
    positions (the words the addressed devices' queries picked up) and the command without them.
    Several devices named: ``between`` holds the other words between the first and the last
    slot ("and the" in "turn on the lamp and the fan"), ``around`` the command without that
    whole span ("turn on the"); both "" otherwise."""

    shares: np.ndarray
    scores: np.ndarray
    slots: tuple[int, ...]
    command: str
    between: str = ""
    around: str = ""
    unnamed: bool = False  # no device was addressed: the default device got the command
    by_name: tuple[int, ...] = ()  # the addressed devices whose configured name or alias was heard
    # each device's share of an unnamed command (``unnamed_shares``): the one with the largest
    # gets the command (``shares``); the others' keep what their switch's silence can mean
    possible: np.ndarray | None = None

    def named(self, devices: Sequence) -> tuple[str, ...]:
        """The names of the addressed devices whose configured name or alias was heard
        (``devices``: those this was addressed over; not the default device of an unnamed
        command, nor "all", nor a device addressed by learned words alone)."""
        return tuple(devices[i].name for i in self.by_name)


def default_share(name: str, evidence=None, prior: float = UNNAMED_SHARE) -> float:
    """A device's share of a command that names no device, with several devices: its ``prior``
    (the default device's UNNAMED_SHARE) moved by the owner's labelled unnamed commands
    (module docstring)."""
    u0, u = evidence.unnamed_commands(name) if evidence is not None else (0, 0)
    return (u0 + prior * UNNAMED_PRIOR) / (u + UNNAMED_PRIOR)


def unnamed_shares(devices: Sequence, evidence=None) -> np.ndarray:
    """Each device's share of a command that names no device, with several devices: its
    ``default_share``, the default (first) device's from UNNAMED_SHARE and every other one's
    from an equal part of the rest. They sum to 1 while each labelled unnamed command was
    labelled for one device."""
    rest = (1.0 - UNNAMED_SHARE) / (len(devices) - 1)
    return np.array([default_share(d.name, evidence, UNNAMED_SHARE if i == 0 else rest)
                     for i, d in enumerate(devices)])


def unnamed_device(devices: Sequence, evidence=None) -> tuple[int, float]:
    """(device index, share) of a command that names no device, with several devices: the
    device with the largest ``unnamed_shares`` gets the command (ties: the earlier one). Before
    any unnamed command is labelled that is the default device; an owner whose unnamed commands
    ("power off", "turn off the juice") went to the plug's switch more often than to the lamp's
    has them asked about, then acted on, for the plug."""
    shares = unnamed_shares(devices, evidence)
    best = int(np.argmax(shares))
    return best, float(shares[best])


def bag_cosine(a: Counter, b: Counter) -> float:
    """Cosine of two count bags."""
    dot = sum(c * b.get(u, 0) for u, c in a.items())
    if not dot:
        return 0.0
    return dot / float(np.sqrt(sum(c * c for c in a.values()) * sum(c * c for c in b.values())))


class NameQuery:
    """The name comparisons of one model: the word vocabulary holding the name codes, the cache
    of their comparison columns and the words' n-gram bags."""

    def __init__(self, words: WordVocab | None, min_n: int, max_n: int):
        self.words = words if words is not None else WordVocab(*OWN_VOCAB)
        self.min_n, self.max_n = int(min_n), int(max_n)
        self.cache = ColumnCache()
        self._bags: dict[str, Counter] = {}
        self._cosines: dict[tuple[str, str], float] = {}
        self._near: dict[tuple[str, tuple[str, ...]], list[float]] = {}
        self._registered: tuple | None = None  # (devices, vocabulary size, ids) of the last register

    def bag(self, word: str) -> Counter:
        b = self._bags.get(word)
        if b is None:
            b = Counter(u for u in unit_strings(word, self.min_n, self.max_n) if not u.startswith(WORD_PREFIX))
            if len(self._bags) < 50_000:
                self._bags[word] = b
        return b

    def cosine(self, heard: str, name: str) -> float:
        """``bag_cosine`` of two words' n-gram bags, remembered (a pure function of the two
        strings: the same words recur in every utterance)."""
        c = self._cosines.get((heard, name))
        if c is None:
            c = bag_cosine(self.bag(heard), self.bag(name))
            if len(self._cosines) < 200_000:
                self._cosines[(heard, name)] = c
        return c

    def register(self, devices: Sequence) -> list[int]:
        """Give every name/alias word of ``devices`` a code (append-only) and its comparison
        column (so that `code_match` then only reads the cache); their ids (-1: the vocabulary
        is full). Once the devices are registered, a call changes nothing."""
        done = self._registered
        if done is not None and done[0] == tuple(devices) and done[1] == len(self.words.words):
            return done[2]  # the same devices over the same vocabulary: nothing to add
        ids = [self.words.add(w) for d in devices for p in d.phrases() for w in p]
        self.words.refresh()  # a no-op unless a name was new
        known = [i for i in ids if i >= 0]
        if not self.cache.covers(self.words.E, known, self.words.code_version):
            self.cache.block(self.words.E, known, self.words.code_version)
        self._registered = (tuple(devices), len(self.words.words), ids)
        return ids

    def code_match(self, heard: Sequence[str], name_words: Sequence[str]) -> np.ndarray:
        """(len(heard) x len(name_words)) normalised code comparisons, read from the cache."""
        out = np.zeros((len(heard), len(name_words)))
        hid = np.array([self.words.index.get(w, -1) for w in heard], dtype=np.int64)
        nid = [self.words.index.get(w, -1) for w in name_words]
        cols = [j for j, i in enumerate(nid) if i >= 0]
        known = hid >= 0
        if not cols or not known.any():
            return out
        E = self.words.E
        query = [nid[j] for j in cols]
        rows = hid[known]
        block = self.cache.read_rows(E, query, rows, self.words.code_version)  # registered names: a read
        if block is None:
            block = self.cache.block(E, query, self.words.code_version)[rows]
        sub = block / np.outer(np.linalg.norm(E[rows], axis=1), np.linalg.norm(E[query], axis=1))
        out[np.ix_(np.flatnonzero(known), cols)] = sub
        return out

    def comparisons(self, heard: Sequence[str], name_words: Sequence[str]) -> np.ndarray:
        """s[k, j]: how much heard word k is name word j (module docstring): 1 where the codes'
        comparison (read from the cache) says it is the name word, else the n-gram one."""
        ident = self.code_match(heard, name_words) >= 1.0 - 1e-9
        return np.where(ident, 1.0, self.near(heard, tuple(name_words)))

    def near(self, heard: Sequence[str], names: tuple[str, ...]) -> np.ndarray:
        """The n-gram comparisons of the heard words with the name words (a plural:
        GARBLE_SHARE; a bag cosine of at least SIM_FLOOR: GARBLE_SHARE x it; else 0). A heard
        word's row is a function of the words alone, so it is remembered: the same words recur
        in every utterance."""
        rows = []
        for h in heard:
            row = self._near.get((h, names))
            if row is None:
                row = [self.near_word(h, n) for n in names]
                if len(self._near) < 50_000:
                    self._near[(h, names)] = row
            rows.append(row)
        return np.array(rows, dtype=np.float64).reshape(len(heard), len(names))

    def near_word(self, heard: str, name: str) -> float:
        """How much ``heard`` is ``name`` by its n-grams (``near``)."""
        if heard in (name + "s", name + "es"):
            return GARBLE_SHARE
        c = self.cosine(heard, name)
        return GARBLE_SHARE * c if c >= SIM_FLOOR else 0.0

    def name_score(self, heard: Sequence[str], device, column: dict[str, int],
                   table: np.ndarray) -> tuple[float, tuple[int, ...]]:
        """(score, positions): the device's best name/alias and the positions its words attend.
        ``table``: ``comparisons(heard, name words)`` of all the devices' name words, made once
        per transcript by ``address``; ``column``: each name word's column in it."""
        best, where = 0.0, ()
        if not heard:
            return best, where
        for phrase in device.phrases():
            s = table[:, [column[w] for w in phrase]]
            pos = s.argmax(axis=0)
            top = s[pos, np.arange(len(phrase))]
            m = len(phrase)
            score = float(top.sum()) / m
            if 1 < m <= len(heard):  # the name said as one run of words is where it is
                runs = [sum(float(s[k + j, j]) for j in range(m)) / m for k in range(len(heard) - m + 1)]
                k = int(np.argmax(runs))
                if runs[k] >= score - 1e-9:
                    pos, top = np.arange(k, k + m), s[np.arange(k, k + m), np.arange(m)]
            if score > best:
                best, where = score, tuple(int(p) for p, t in zip(pos, top) if t > 0)
        return best, where

    def address(self, words: Sequence[str], devices: Sequence, evidence=None,
                filler: str = "") -> Addressing:
        """Shares, scores and slots of a (normalised, split) transcript; ``evidence``: the
        devices' learned words (``DeviceEvidence``) or None; ``filler``: the word that stands
        for the slot in the command (a model's ``SwitchConfig.slot_word``; "": the slot is left
        out)."""
        if not devices:
            raise ValueError("need at least one device")
        self.register(devices)
        scores = np.zeros(len(devices))
        picked: list[tuple[int, ...]] = []
        named: list[set[int]] = []
        vocab = list(dict.fromkeys(w for d in devices for p in d.phrases() for w in p))
        column, table = {w: j for j, w in enumerate(vocab)}, self.comparisons(words, vocab)
        for i, d in enumerate(devices):
            score, where = self.name_score(words, d, column, table)
            learned = [evidence.evidence(d.name, w) for w in words] if evidence is not None else []
            strong = tuple(k for k, e in enumerate(learned) if e >= ADDRESS_FLOOR)
            top = max(learned, default=0.0)
            scores[i] = max(score, top)
            picked.append(tuple(sorted(set(where) | set(strong))))
            named.append(set(where) if score >= ADDRESS_FLOOR else set())
        best = float(scores.max())
        hit = (scores >= ADDRESS_FLOOR) & (scores >= best - MARGIN)
        for i in np.flatnonzero(hit).tolist():  # the longest name wins: "salt lamp" is not the lamp
            if named[i] and any(j != i and hit[j] and named[i] < named[j] for j in range(len(devices))):
                hit[i] = False
        slots: set[int] = set()
        possible = None
        if hit.any():
            shares = np.where(hit, np.minimum(1.0, scores / FULL_SHARE), 0.0)
            for i in np.flatnonzero(hit).tolist():
                slots.update(picked[i])
        elif ALL_WORDS.intersection(words):
            shares = np.ones(len(devices))
        else:
            shares = np.zeros(len(devices))
            if len(devices) == 1:
                shares[0] = 1.0
            else:
                possible = unnamed_shares(devices, evidence)
                i = int(np.argmax(possible))
                shares[i] = possible[i]
        rest = [w for k, w in enumerate(words) if k not in slots]
        if filler and slots:
            rest = [filler if k in slots else w for k, w in enumerate(words)
                    if k not in slots or k - 1 not in slots]
        command = " ".join(rest if rest else words)
        between = around = ""
        if int(hit.sum()) > 1 and slots and rest:
            lo, hi = min(slots), max(slots)
            between = " ".join(w for k, w in enumerate(words) if lo < k < hi and k not in slots)
            around = " ".join(words[:lo] + words[hi + 1:])
        by_name = tuple(i for i in np.flatnonzero(hit).tolist() if named[i])
        return Addressing(shares, scores, tuple(sorted(slots)) if rest else (), command, between, around,
                          unnamed=not hit.any() and not ALL_WORDS.intersection(words), by_name=by_name,
                          possible=possible)
