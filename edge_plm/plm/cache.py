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
