"""The transcript's words as tokens of the switch's SAFFU block: an append-only word vocabulary
with frozen bit-cipher codes and the cached comparisons of every word with the query words
(docs/method.md, "Word attention").

Ids are handed out in order of first arrival and never change, so a word's code never changes
(the desktop trainer registers its training file's words in order of frequency first, so a
starting model's vocabulary is frequency-ordered; a device appends the words it hears after
that). The first ``query_words`` ids are the query vocabulary of the attention: they own one
bit each (``bitcipher.exclusive_bit_cipher``), so the comparison of any word with a query word
is exactly 1 for the word itself and 0 for every other word; the remaining words share the other
``bits - query_words`` bits, sparsest codes first. The comparisons are read from the block
C[:, query] of C = E E^T (``plm.cache.ColumnCache``), extended as the vocabulary grows.

The codes and the cached block grow when the vocabulary does (``add``, ``ids`` with
``grow``: learning and observing), never when a prediction reads them, so a published model is
only read by its predictions.

``scrub`` (after a `forget`) tombstones the words no remaining text uses: the id and its code
stay, the string goes (``None`` in the stored list); the word heard again gets a fresh id.

The vocabulary is capped (``cap`` words); a word first heard after the cap is reached has id -1:
it compares as 0 with every query word (like a word that is not a query word).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np

from edge_plm.plm.bitcipher import exclusive_bit_cipher
from edge_plm.plm.cache import ColumnCache
from edge_plm.switch.tokenizer import normalize


class WordVocab:
    """Append-only map word -> id with frozen codes E and the cached query comparisons."""

    def __init__(self, cap: int, bits: int, query_words: int, words: Iterable[str] = ()):
        if cap <= 0:
            raise ValueError(f"word cap must be positive, got {cap}")
        if not 0 < query_words < bits:
            raise ValueError(f"need 0 < query_words < word_bits, got {query_words}, {bits}")
        if cap - query_words > 2 ** (bits - query_words) - 1:
            raise ValueError(f"{cap} words need more than {bits} word bits with {query_words} query words")
        self.cap, self.bits, self.query_words = int(cap), int(bits), int(query_words)
        self.words: list[str | None] = []  # None: a tombstone (``scrub``)
        self.index: dict[str, int] = {}
        self._E = np.zeros((0, self.bits))
        self.cache = ColumnCache()
        # a tombstoned query word's labelled evidence when it was scrubbed (the query's scale
        # stays what it was; the word itself can never occur again)
        self.frozen: dict[int, float] = {}
        for w in words:
            if w is None:
                self.words.append(None)
            else:
                self.add(w)
        self._grow_codes()
        self.refresh()

    def __len__(self) -> int:
        return len(self.words)

    def add(self, word: str) -> int:
        """The id of ``word``, appended when new; -1 when new and the vocabulary is full."""
        i = self.index.get(word)
        if i is not None:
            return i
        if len(self.words) >= self.cap:
            return -1
        self.index[word] = len(self.words)
        self.words.append(word)
        self._grow_codes()
        return len(self.words) - 1

    def register(self, texts: Iterable[str]) -> None:
        """Add the words of ``texts`` in order of decreasing frequency (ties: first arrival), so
        the most frequent words get the query ids and the sparsest codes (the trainer calls this
        before learning a training file)."""
        counts: Counter[str] = Counter()
        first: dict[str, int] = {}
        for t in texts:
            for w in normalize(t).split():
                counts[w] += 1
                first.setdefault(w, len(first))
        for w in sorted(counts, key=lambda w: (-counts[w], first[w])):
            self.add(w)
        self.refresh()

    def ids(self, text: str, grow: bool) -> list[int]:
        """The word ids of the normalised transcript ``text`` in reading order (-1: unknown, or
        heard after the cap); ``grow`` adds the new words (and extends the cached comparisons:
        ``refresh``)."""
        words = text.split()
        if not grow:
            return [self.index.get(w, -1) for w in words]
        n = len(self.words)
        out = [self.add(w) for w in words]
        if len(self.words) != n:
            self.refresh()
        return out

    # -- codes and comparisons --------------------------------------------------------------

    def _grow_codes(self) -> None:
        if self._E.shape[0] < len(self.words):  # codes for a block of future ids at once
            room = min(self.cap, max(2 * self._E.shape[0], len(self.words), 256))
            self._E = exclusive_bit_cipher(room, self.bits, self.query_words)

    def refresh(self) -> None:
        """Extend the cached block C[:, query] to the vocabulary (when it grows, so that
        predictions find it current and change nothing)."""
        self.cache.block(self.E, self.query_ids(), self.code_version)

    @property
    def E(self) -> np.ndarray:
        """The codes of every word (V x bits; extended by ``add``, only read here)."""
        return self._E[: len(self.words)]

    @property
    def code_version(self) -> str:
        """Identity of the code scheme (the cache is rebuilt if it changes)."""
        return f"exclusive-bit-cipher/{self.bits}/{self.query_words}"

    def query_ids(self) -> np.ndarray:
        return np.arange(min(self.query_words, len(self.words)), dtype=np.int64)

    def query_comparisons(self) -> np.ndarray:
        """C[:, query] (V x |query|), read from the cache; computed without storing it when
        the vocabulary grew without a ``refresh`` (a device's name registered by a prediction)."""
        E, query = self.E, self.query_ids()
        block = self.cache.current(E, query, self.code_version)
        if block is not None:
            return block
        if not len(query):
            return np.zeros((E.shape[0], 0))
        return np.stack([E @ E[q] for q in query.tolist()], axis=1)

    def comparisons(self, word_ids: np.ndarray, query_weights: np.ndarray) -> np.ndarray:
        """c_k = e_{w_k} . q with the query q = sum_r query_weights[r] e_r over the query words:
        C[w_k, query] @ query_weights, read from the cached block (0 for unknown words)."""
        word_ids = np.asarray(word_ids, dtype=np.int64)
        out = np.zeros(len(word_ids))
        known = word_ids >= 0
        if known.any() and len(query_weights):
            block = self.query_comparisons()
            q = np.zeros(block.shape[1])
            n = min(len(q), len(query_weights))
            q[:n] = query_weights[:n]
            out[known] = block[word_ids[known]] @ q
        return out

    def scrub(self, keep: set[str]) -> list[int]:
        """Tombstone every word not in ``keep`` (its id and code stay; the string goes).
        Returns the ids tombstoned now."""
        gone = [i for w, i in self.index.items() if w not in keep]
        for i in gone:
            del self.index[self.words[i]]
            self.words[i] = None
        return sorted(gone)

    def to_json(self) -> list[str | None]:
        return list(self.words)
