"""The refinement objective through the word attention, in NumPy and without a loop over the
examples: every example's positions, units and occurrences are segments of one array. A sum over
an example's positions or unit slots (adjacent in the arrays) is one ``np.add.reduceat`` over
their runs (``Runs``); a scatter into many bins (a slot's occurrences, dU, dW) is one
``np.bincount``; the actions go together as (actions x slots) arrays read and written through
flat indices; what the batch's structure alone decides is its ``Layout``, built once per batch.
Same forward and backward as the per-example reference and the Numba kernel of
``switch/attention.py`` (parity: tests/switch/test_attention.py), whose module docstring gives
the formulas.

The device's online refinement runs this one (``unitnet.ONLINE_KERNEL``: after a label, a
relabel, a forget): on a replay sample of 65 examples a call costs ~0.6 ms here (~1 ms before
the runs and the flat indices) against the Numba kernel's ~0.2 ms, and the service never
imports Numba and LLVM, ~150 MB of its resident memory (docs/benchmarks-log.md, "Fits a Pi 3" and
"Learns from its owner"). The desktop trainer's full-batch epochs keep the Numba kernel
(``SwitchConfig.kernel``).
"""

from __future__ import annotations

import weakref

import numpy as np


_STRUCTURE = ("pptr", "indptr", "indices", "eptr", "ent_pos", "ent_m", "ent_v", "branch", "width", "woff")
_layouts: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class Runs:
    """Sums of weights over the bins 0..n-1 of a sorted index array: one ``np.add.reduceat``
    over its runs, not ``np.bincount``'s one add after another into the same bin (a chain of
    dependent adds when a bin's entries are adjacent, as an example's positions and slots are);
    the same sums, in pairwise order. Bins without an entry get 0."""

    def __init__(self, idx: np.ndarray, n: int) -> None:
        self.n = n
        self.starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]]) if len(idx) else idx[:0]
        self.bins = idx[self.starts]
        self.every = len(self.bins) == n

    @classmethod
    def of_ptr(cls, ptr: np.ndarray) -> "Runs":
        """The runs of CSR pointers ``ptr``: bin n holds entries ptr[n]:ptr[n + 1]."""
        runs = cls.__new__(cls)
        runs.n = len(ptr) - 1
        runs.bins = np.flatnonzero(ptr[1:] > ptr[:-1])
        runs.starts = ptr[:-1][runs.bins]
        runs.every = len(runs.bins) == runs.n
        return runs

    def sum(self, w: np.ndarray) -> np.ndarray:
        """(..., n) sums of ``w`` (..., len(idx)) over the last axis's bins."""
        if self.every:
            return np.add.reduceat(w, self.starts, axis=-1)
        out = np.zeros(w.shape[:-1] + (self.n,))
        if len(self.starts):
            out[..., self.bins] = np.add.reduceat(w, self.starts, axis=-1)
        return out


def is_sorted(idx: np.ndarray) -> bool:
    return bool((idx[1:] >= idx[:-1]).all())


class Layout:
    """What a batch's structure alone decides (not U, W, the labels or the comparisons): the
    example of each position, unit slot and occurrence, each occurrence's global position and
    slot, every (i, j) position pair of the attending examples with W_B[i, j]'s index in the
    flattened W, and the flat indices of each (slot, action) into U and into the (example,
    action) arrays. Built once per batch and reused by every refinement step on it."""

    def __init__(self, b) -> None:
        self.of = tuple(getattr(b, name) for name in _STRUCTURE)
        N = len(b.branch)
        self.K = np.diff(b.pptr)
        self.ex_pos = np.repeat(np.arange(N), self.K)
        self.ex_unit = np.repeat(np.arange(N), np.diff(b.indptr))
        ex_ent = np.repeat(np.arange(N), np.diff(b.eptr))
        self.g_pos = b.pptr[ex_ent] + b.ent_pos
        self.g_unit = b.indptr[ex_ent] + b.ent_m
        self.kv = self.K[ex_ent] * b.ent_v
        self.attends = b.branch >= 0
        self.starts = b.pptr[:-1][self.K > 0]  # the first position of each example that has one
        ex = np.flatnonzero(self.attends)
        sq = self.K[ex] ** 2
        pair_ex = np.repeat(ex, sq)
        # (no attending example at all, e.g. one sentence longer than the widest branch: empty)
        start = (np.cumsum(sq) - sq).astype(np.int64)
        r = np.arange(int(sq.sum())) - np.repeat(start, sq)
        Kp = self.K[pair_ex]
        j, i = np.divmod(r, Kp)  # j-major: each position's pairs are adjacent (``by_pj``)
        p0 = b.pptr[pair_ex]
        self.pi, self.pj = p0 + i, p0 + j
        self.pw = b.woff[pair_ex] + i * b.width[pair_ex] + j
        self.pair_ex = pair_ex
        n_pos = int(b.pptr[-1])
        self.by_pos, self.by_unit = Runs.of_ptr(b.pptr), Runs.of_ptr(b.indptr)
        self.by_pj = Runs(self.pj, n_pos)
        self.by_gpos = Runs(self.g_pos, n_pos) if is_sorted(self.g_pos) else None  # positions in reading order
        self.uniform = ~self.attends[self.ex_pos]
        self.uniform_a = 1.0 / self.K[self.ex_pos[self.uniform]]
        self.flat: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.cval = self.c_pi = None

    def fits(self, b) -> bool:
        return all(a is getattr(b, name) for a, name in zip(self.of, _STRUCTURE))

    def flat_indices(self, b, C: int) -> tuple[np.ndarray, np.ndarray]:
        """(fU, fS), C x slots: slot k's action c in the flattened U (indices[k] C + c) and in
        the flattened examples x actions arrays (example(k) C + c)."""
        if C not in self.flat:
            c = np.arange(C)[:, None]
            self.flat[C] = (b.indices[None, :] * C + c, self.ex_unit[None, :] * C + c)
        return self.flat[C]

    def comparisons_at_pairs(self, b) -> np.ndarray:
        """c_i of every position pair (i, j), for the batch's current comparisons."""
        if self.cval is not b.cval:
            self.cval, self.c_pi = b.cval, b.cval[self.pi]
        return self.c_pi


def layout(b) -> Layout:
    """The `Layout` of batch `b` (cached while its structure arrays are the same objects)."""
    lay = _layouts.get(b)
    if lay is None or not lay.fits(b):
        lay = _layouts[b] = Layout(b)
    return lay


def batch_loss_grad_segments(b, U, bias, mask, Wflat, dU, dW):
    """The objective of the batch ``b`` (``SaffuBatch`` arrays) and its gradients: adds
    d loss / d U into dU, d loss / d W into dW; returns (loss, d loss / d bias)."""
    N, C = len(b.labels), U.shape[1]
    if N == 0:
        return 0.0, np.zeros(C)
    lay = layout(b)
    n_pos, n_units = len(b.cval), len(b.indices)
    ex_pos, ex_unit, g_pos, g_unit, kv = lay.ex_pos, lay.ex_unit, lay.g_pos, lay.g_unit, lay.kv
    fU, fS = lay.flat_indices(b, C)
    c_pi = lay.comparisons_at_pairs(b)
    # attention: a = softmax(c W_B) over each attending example's positions, else uniform
    logits = lay.by_pj.sum(c_pi * Wflat[lay.pw])
    top = np.full(N, -np.inf)
    if len(lay.starts):
        top[lay.K > 0] = np.maximum.reduceat(logits, lay.starts)
    a = np.exp(logits - top[ex_pos])
    a /= lay.by_pos.sum(a)[ex_pos]
    a[lay.uniform] = lay.uniform_a
    # pooling: z = K sum_k a_k V_k, x = z / |z|
    z = np.bincount(g_unit, weights=kv * a[g_pos], minlength=n_units)
    nz = np.sqrt(lay.by_unit.sum(z * z))
    empty = nz == 0.0  # no known unit: x = 0, the logits are the bias, W gets no gradient
    nz[empty] = 1.0
    nz_unit = nz[ex_unit]
    x = z / nz_unit
    # output: p = softmax(x U + b + m), the weighted cross-entropy, on (actions x slots) arrays
    Urows = np.take(U, fU)
    S = lay.by_unit.sum(x * Urows).T.copy()
    S += bias + mask
    S -= S.max(axis=1, keepdims=True)
    P = np.exp(S)
    Z = P.sum(axis=1)
    P /= Z[:, None]
    rows = np.arange(N)
    loss = float(-(b.sw * (S[rows, b.labels] - np.log(Z))).sum())
    G = P
    G[rows, b.labels] -= 1.0
    G *= b.sw[:, None]
    Gu = np.take(G, fS)
    dU += np.bincount(fU.ravel(), weights=(x * Gu).ravel(), minlength=dU.size).reshape(dU.shape)
    # back through the pooling and the attention (attending examples only)
    UG = Urows * Gu
    gz = UG[0].copy()
    for c in range(1, C):
        gz += UG[c]
    xg = lay.by_unit.sum(x * gz)
    gz = (gz - x * xg[ex_unit]) / nz_unit
    wa = kv * gz[g_unit]
    ga = lay.by_gpos.sum(wa) if lay.by_gpos is not None else np.bincount(g_pos, weights=wa, minlength=n_pos)
    bar = lay.by_pos.sum(a * ga)
    gl = a * (ga - bar[ex_pos])
    if empty.any():
        live = (lay.attends & ~empty)[lay.pair_ex]
        dW += np.bincount(lay.pw[live], weights=c_pi[live] * gl[lay.pj[live]], minlength=len(dW))
    else:
        dW += np.bincount(lay.pw, weights=c_pi * gl[lay.pj], minlength=len(dW))
    return loss, G.sum(axis=0)


__all__ = ["batch_loss_grad_segments", "layout"]
