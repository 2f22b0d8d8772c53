"""Explicit warm start of the SAFFU language model (docs/design.md §2.3), bottom-up, in one
streaming pass over a warm slice, reusing ``CooccurrenceStats``.

Per batch of the slice (one branch B), with the layers below already solved:
  W_B[h]  inputs c (comparisons, masked), hidden attention targets
            positional head h < P:  one-hot at slot h (the n-gram heads: z concatenates the
                                    codes of the last P tokens);
            content head i >= 0:    t_j ∝ X_j . e_y + TARGET_EPS over the valid slots j >= i*P
                                    (attend to positions whose code resembles the target's;
                                    later content heads look further back), then normalised;
          -> re-solve W_B;
  U_B     inputs z (with the new W_B), label-embedding targets
            T = (code_d(y) + onehot(bucket(x_0, y))) / 2,
          code_d = bit-cipher code of y over the d hidden units (the label embedding) and the
          hashed bucket of the (query, target) pair, so that every hidden unit has its own
          role even when V < d (units with identical roles would stay identical under
          gradient descent: the symmetry that random initialisation otherwise breaks);
          -> re-solve U_B;
  O       inputs h (with the new U_B), one-hot targets; solved at the end of the pass
          (nothing is stacked on it).
All statistics are sums (shardable, incremental). Solutions use F / rows (a per-sample
average), so each layer's eps is a smoothing mass per sample, independent of the slice size.
Negative inputs or targets raise ``NegativeInputError`` (``warmstart.check_nonnegative``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import numpy as np

from edge_plm.plm.bitcipher import bit_cipher
from edge_plm.research.lm.corpus import LMBatch
from edge_plm.research.lm.model import SaffuLM
from edge_plm.plm.warmstart import NORM_BINS, CooccurrenceStats, check_nonnegative, explicit_solution

TARGET_EPS = 1e-3


def add_onehot(stats: CooccurrenceStats, H: np.ndarray, labels: np.ndarray) -> None:
    """``stats.add(H, onehot(labels))`` without the dense (M x N) target matrix (V can be 16K)."""
    H = np.atleast_2d(np.asarray(H, dtype=np.float64))
    labels = np.asarray(labels, dtype=np.int64)
    if H.shape != (len(labels), stats.n_in) or (len(labels) and (labels.min() < 0 or labels.max() >= stats.n_out)):
        raise ValueError(f"shapes {H.shape} / labels do not fit stats {stats.n_in} x {stats.n_out}")
    check_nonnegative("features H", H)
    np.add.at(stats.F.T, labels, H)
    norms = H.sum(axis=1)
    stats.rows += H.shape[0]
    stats.norm_sum += float(norms.sum())
    stats.norm_sq_sum += float((norms**2).sum())
    stats.norm_hist += np.histogram(norms, bins=NORM_BINS)[0]


def solve_rows(stats: CooccurrenceStats, eps: float) -> np.ndarray | None:
    """Explicit solution of F / rows (None if the layer saw no data). Target columns that
    never occurred keep log(eps) (``seen_only``): translating them would lift a never-seen
    target above the seen ones, e.g. spread a positional head's attention over every slot."""
    if stats.rows == 0:
        return None
    return explicit_solution(stats.F / stats.rows, max(stats.priming_number, 1e-12), eps, seen_only=True)


def pair_bucket(x0: np.ndarray, y: np.ndarray, buckets: int) -> np.ndarray:
    x = (x0.astype(np.uint64) * np.uint64(1000003)) ^ (y.astype(np.uint64) + np.uint64(1))
    x ^= x >> np.uint64(17)
    x *= np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(29)
    return (x % np.uint64(buckets)).astype(np.int64)


class LMWarmStart:
    def __init__(self, model: SaffuLM):
        self.model = model
        c = model.config
        self.stats_W = [[CooccurrenceStats(B, B) for _ in range(c.heads)] for B in c.widths]
        self.stats_U = [CooccurrenceStats(c.heads * c.bits, c.hidden) for _ in c.widths]
        self.stats_O = CooccurrenceStats(c.hidden, model.V)
        self.label_code = bit_cipher(model.V, c.hidden) if model.V <= 2**c.hidden - 1 else None
        self.tokens = 0
        self.seconds = 0.0

    # -- hidden targets ---------------------------------------------------------------------

    def attention_targets(self, batch: LMBatch, head: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows that have a target, targets (rows, B)) for one head."""
        c = self.model.config
        N, B = batch.ctx.shape
        valid = np.arange(B)[None, :] < batch.lengths[:, None]
        if head < c.positional_heads:
            rows = np.flatnonzero(batch.lengths > head)
            T = np.zeros((len(rows), B))
            T[:, head] = 1.0
            return rows, T
        lo = (head - c.positional_heads) * c.positional_heads
        E = self.model.E
        sim = np.einsum("njb,nb->nj", E[batch.ctx], E[batch.targets]) + TARGET_EPS
        ok = valid & (np.arange(B)[None, :] >= lo)
        sim = np.where(ok, sim, 0.0)
        rows = np.flatnonzero(ok.any(axis=1))
        T = sim[rows]
        return rows, T / T.sum(axis=1, keepdims=True)

    def hidden_targets(self, batch: LMBatch) -> np.ndarray:
        d = self.model.config.hidden
        T = np.zeros((len(batch), d))
        T[np.arange(len(batch)), pair_bucket(batch.ctx[:, 0], batch.targets, d)] += 0.5
        if self.label_code is not None:
            T += 0.5 * self.label_code[batch.targets]
        else:
            T *= 2.0
        return T

    # -- the pass ---------------------------------------------------------------------------

    def observe(self, batch: LMBatch) -> None:
        """Add one single-branch batch bottom-up (W, re-solve; U, re-solve; O)."""
        t0 = time.perf_counter()
        m, c = self.model, self.model.config
        bi = batch.branch
        if bi < 0:
            raise ValueError("the warm start takes bucketed (single-branch) batches")
        fwd, _ = m.kernels_for()
        C = m.comparisons()
        p = m.params
        # O is solved at the end and nothing here needs y: a 1-column output skips the
        # (hidden x V) product, which dominates for a 16K vocabulary
        no_out, zero_t = np.zeros((c.hidden, 1)), np.zeros(len(batch), dtype=np.int64)
        cache = fwd(batch.ctx, batch.lengths, zero_t, m.E, C, p[f"W.{bi}"], p[f"U.{bi}"], no_out)
        for hh in range(c.heads):
            if hh < c.positional_heads:  # one-hot targets: no dense target matrix needed
                rows = np.flatnonzero(batch.lengths > hh)
                add_onehot(self.stats_W[bi][hh], cache.c[rows], np.full(len(rows), hh))
            else:
                rows, T = self.attention_targets(batch, hh)
                self.stats_W[bi][hh].add(cache.c[rows], T)
            if len(rows):
                p[f"W.{bi}"][hh] = solve_rows(self.stats_W[bi][hh], c.eps_W)
        cache = fwd(batch.ctx, batch.lengths, zero_t, m.E, C, p[f"W.{bi}"], p[f"U.{bi}"], no_out)
        self.stats_U[bi].add(cache.z, self.hidden_targets(batch))
        p[f"U.{bi}"] = solve_rows(self.stats_U[bi], c.eps_U)
        cache = fwd(batch.ctx, batch.lengths, zero_t, m.E, C, p[f"W.{bi}"], p[f"U.{bi}"], no_out)
        add_onehot(self.stats_O, cache.h, batch.targets)
        self.tokens += len(batch)
        self.seconds += time.perf_counter() - t0

    def finish(self) -> None:
        t0 = time.perf_counter()
        O = solve_rows(self.stats_O, self.model.config.eps_O)
        if O is not None:
            self.model.params["O"] = O
        self.seconds += time.perf_counter() - t0

    def run(self, batches: Iterable[LMBatch]) -> dict:
        for b in batches:
            self.observe(b)
        self.finish()
        return self.report()

    def report(self) -> dict:
        """Token count, time, and the |H_m|_1 distributions (priming numbers) per layer."""
        return {
            "tokens": self.tokens,
            "seconds": self.seconds,
            "W": [[s.norm_report() for s in heads][0] for heads in self.stats_W],
            "U": [s.norm_report() for s in self.stats_U],
            "O": self.stats_O.norm_report(),
        }
