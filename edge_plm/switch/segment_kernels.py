"""The refinement objective through the word attention, in NumPy and without a loop over the
examples: every example's positions, units and occurrences are segments of one array, and each
sum over a segment is a `np.bincount`. Same forward and backward as the per-example reference
and the Numba kernel of ``switch/attention.py`` (parity: tests/test_attention.py), whose
module docstring gives the formulas.

The device's online refinement runs this one (``unitnet.ONLINE_KERNEL``: after a label, a
relabel, a forget): on a replay sample of ~65 examples a call costs ~1 ms here against the
Numba kernel's ~0.2 ms, and the service never imports Numba and LLVM, ~150 MB of its resident
memory (BENCHMARKS.md, "Fits a Pi 3"). The desktop trainer's full-batch epochs keep the Numba
kernel (``SwitchConfig.kernel``).
"""

from __future__ import annotations

import weakref

import numpy as np


_STRUCTURE = ("pptr", "indptr", "eptr", "ent_pos", "ent_m", "branch", "width", "woff")
_layouts: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class Layout:
    """What a batch's structure alone decides (not U, W, the labels or the comparisons): the
    example of each position, unit slot and occurrence, each occurrence's global position and
    slot, and every (i, j) position pair of the attending examples with W_B[i, j]'s index in
    the flattened W. Built once per batch and reused by every refinement step on it."""

    def __init__(self, b) -> None:
        self.of = tuple(getattr(b, name) for name in _STRUCTURE)
        N = len(b.branch)
        self.K = np.diff(b.pptr)
        self.ex_pos = np.repeat(np.arange(N), self.K)
        self.ex_unit = np.repeat(np.arange(N), np.diff(b.indptr))
        ex_ent = np.repeat(np.arange(N), np.diff(b.eptr))
        self.g_pos = b.pptr[ex_ent] + b.ent_pos
        self.g_unit = b.indptr[ex_ent] + b.ent_m
        self.K_ent = self.K[ex_ent]
        self.attends = b.branch >= 0
        ex = np.flatnonzero(self.attends)
        sq = self.K[ex] ** 2
        pair_ex = np.repeat(ex, sq)
        start = np.concatenate([[0], np.cumsum(sq)[:-1]]).astype(np.int64)
        r = np.arange(int(sq.sum())) - np.repeat(start, sq)
        Kp = self.K[pair_ex]
        i, j = r // Kp, r % Kp
        p0 = b.pptr[pair_ex]
        self.pi, self.pj = p0 + i, p0 + j
        self.pw = b.woff[pair_ex] + i * b.width[pair_ex] + j
        self.pair_ex = pair_ex
        self.uniform = ~self.attends[self.ex_pos]

    def fits(self, b) -> bool:
        return all(a is getattr(b, name) for a, name in zip(self.of, _STRUCTURE))


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
    K, ex_pos, ex_unit, g_pos, g_unit = lay.K, lay.ex_pos, lay.ex_unit, lay.g_pos, lay.g_unit
    pi, pj, pw = lay.pi, lay.pj, lay.pw
    # attention: a = softmax(c W_B) over each attending example's positions, else uniform
    logits = np.bincount(pj, weights=b.cval[pi] * Wflat[pw], minlength=n_pos)
    top = np.full(N, -np.inf)
    np.maximum.at(top, ex_pos, logits)
    a = np.exp(logits - top[ex_pos])
    a /= np.bincount(ex_pos, weights=a, minlength=N)[ex_pos]
    a[lay.uniform] = 1.0 / K[ex_pos[lay.uniform]]
    # pooling: z = K sum_k a_k V_k, x = z / |z|
    kv = lay.K_ent * b.ent_v
    z = np.bincount(g_unit, weights=kv * a[g_pos], minlength=n_units)
    nz = np.sqrt(np.bincount(ex_unit, weights=z * z, minlength=N))
    empty = nz == 0.0  # no known unit: x = 0, the logits are the bias, W gets no gradient
    nz[empty] = 1.0
    attends = lay.attends & ~empty
    x = z / nz[ex_unit]
    # output: p = softmax(x U + b + m), the weighted cross-entropy
    Urows = U[b.indices]
    S = np.empty((N, C))
    for c in range(C):
        S[:, c] = np.bincount(ex_unit, weights=x * Urows[:, c], minlength=N)
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
    Gu = G[ex_unit]
    for c in range(C):
        dU[:, c] += np.bincount(b.indices, weights=x * Gu[:, c], minlength=len(dU))
    # back through the pooling and the attention (attending examples only)
    gz = (Urows * Gu).sum(axis=1)
    xg = np.bincount(ex_unit, weights=x * gz, minlength=N)
    gz = (gz - x * xg[ex_unit]) / nz[ex_unit]
    ga = np.bincount(g_pos, weights=kv * gz[g_unit], minlength=n_pos)
    bar = np.bincount(ex_pos, weights=a * ga, minlength=N)
    gl = a * (ga - bar[ex_pos])
    live = attends[lay.pair_ex]
    dW += np.bincount(pw[live], weights=b.cval[pi[live]] * gl[pj[live]], minlength=len(dW))
    return loss, G.sum(axis=0)


__all__ = ["batch_loss_grad_segments"]
