"""Cached comparisons C = E E^T (docs/design.md §2.4).

With frozen embeddings a comparison depends only on the two token ids, so it is read from a
V x V table. The table remembers the hash of the E it was built from; ``table(E)`` rebuilds it
when E changed (a thaw) and extends it when E only grew (new tokens appended, old rows equal).
Rebuild time is accumulated in ``rebuild_seconds`` so trainers can count it.
"""

from __future__ import annotations

import time

import numpy as np

from edge_plm.plm.bitcipher import embedding_hash


class ComparisonCache:
    def __init__(self) -> None:
        self.C: np.ndarray | None = None
        self.source_hash: str | None = None
        self._E: np.ndarray | None = None
        self.rebuilds = 0
        self.extensions = 0
        self.rebuild_seconds = 0.0

    def table(self, E: np.ndarray) -> np.ndarray:
        h = embedding_hash(E)
        if h == self.source_hash:
            return self.C
        t0 = time.perf_counter()
        old = self._E
        if old is not None and E.shape[0] > old.shape[0] and np.array_equal(E[: old.shape[0]], old):
            n = old.shape[0]
            C = np.empty((E.shape[0], E.shape[0]))
            C[:n, :n] = self.C
            C[n:, :] = E[n:] @ E.T
            C[:n, n:] = C[n:, :n].T
            self.extensions += 1
        else:
            C = E @ E.T
            self.rebuilds += 1
        self.C, self.source_hash, self._E = C, h, E.copy()
        self.rebuild_seconds += time.perf_counter() - t0
        return C


class ColumnCache:
    """Columns of the comparison table C = E E^T for a few query tokens, read by token id.

    The switch's word attention compares every word of a transcript with a handful of query
    words; storing C in full (V x V) would cost V^2 entries for a vocabulary that grows online,
    so this keeps the block C[:, Q] (V x |Q|) of the columns asked for. Codes are append-only:
    when E gained rows, only the new rows of each column are computed (an extension). Any other
    change of E (a thaw, or a different code scheme) must come with a new ``version`` (the
    owner's code-scheme identity, e.g. ``embedding_hash`` of E after the change): the block is
    then rebuilt, so a changed code is never read from a stale block. ``verify(E)`` recomputes
    the block and fails loudly if it differs (the tests' check of the cache). Rebuild/extension
    time is accumulated in ``rebuild_seconds``.
    """

    def __init__(self) -> None:
        self.columns: dict[int, np.ndarray] = {}
        self.rows = 0  # rows of E the block covers
        self.version: object = None
        self.rebuilds = 0
        self.extensions = 0
        self.rebuild_seconds = 0.0
        self._stacked: np.ndarray | None = None  # the block as last returned
        self._stacked_query: list[int] = []

    def current(self, E: np.ndarray, query, version: object = None) -> np.ndarray | None:
        """The block C[:, query] as last returned by ``block`` if it is still the one for this
        E, query and version, else None; changes nothing (a reader's check)."""
        stacked = self._stacked
        if (stacked is not None and version == self.version and E.shape[0] == self.rows
                and [int(q) for q in query] == self._stacked_query):
            return stacked
        return None

    def covers(self, E: np.ndarray, query, version: object = None) -> bool:
        """Every column of `query` is cached and current for this E and version."""
        return (version == self.version and E.shape[0] == self.rows
                and all(int(q) in self.columns for q in query))

    def read(self, E: np.ndarray, query, version: object = None) -> np.ndarray | None:
        """C[:, query] from the columns already cached for this E and version, or None when
        one is missing or stale (then `block` makes it); changes nothing (a reader's path,
        safe beside other readers)."""
        if not self.covers(E, query, version):
            return None
        if not query:
            return np.zeros((E.shape[0], 0))
        return np.stack([self.columns[int(q)] for q in query], axis=1)

    def read_rows(self, E: np.ndarray, query, rows: np.ndarray, version: object = None) -> np.ndarray | None:
        """C[rows][:, query] from the cached columns (as ``read``, without stacking whole
        columns: a transcript reads a few rows of them), or None when one is missing or stale."""
        if not self.covers(E, query, version):
            return None
        out = np.empty((len(rows), len(query)))
        for j, q in enumerate(query):
            out[:, j] = self.columns[int(q)][rows]
        return out

    def block(self, E: np.ndarray, query, version: object = None) -> np.ndarray:
        """C[:, query] for the current E (V x len(query))."""
        query = [int(q) for q in query]
        if (self._stacked is not None and version == self.version and E.shape[0] == self.rows
                and query == self._stacked_query):
            return self._stacked
        t0 = time.perf_counter()
        if version != self.version or E.shape[0] < self.rows:
            if self.columns:
                self.rebuilds += 1
            self.columns.clear()
            self.rows = 0
            self.version = version
        if E.shape[0] > self.rows and self.columns:
            new = E[self.rows:]
            for q, col in self.columns.items():
                self.columns[q] = np.concatenate([col, new @ E[q]])
            self.extensions += 1
        self.rows = E.shape[0]
        for q in query:
            if q not in self.columns:
                self.columns[q] = E @ E[q]
        self.rebuild_seconds += time.perf_counter() - t0
        if not query:
            return np.zeros((E.shape[0], 0))
        stacked = np.stack([self.columns[q] for q in query], axis=1)
        self._stacked, self._stacked_query = stacked, query
        return stacked

    def verify(self, E: np.ndarray) -> None:
        """Raise ValueError if a cached column differs from E E^T (a stale cache)."""
        for q, col in self.columns.items():
            if len(col) != E.shape[0] or not np.allclose(col, E @ E[q], rtol=0, atol=1e-12):
                raise ValueError(f"comparison cache column {q} is stale: rebuild it (new version)")
