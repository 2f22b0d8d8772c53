"""Numba twin of ``research/lm/reference.py`` (parity: tests/research/test_lm_model.py, test_numba_equals_numpy).

The dense products (c W, z U, h O and their transposes) go to BLAS as 2-D matrix products;
Numba fuses what NumPy would materialise: the comparison gather from the cache, the masked
per-head softmax with the aggregation z = a E[ctx] (no (N, B, b) tensor), the row softmaxes
with the NLL, and the attention backward. Sample loops run in parallel (``prange``) except the
embedding scatter (rows are shared between samples). Compiled once, cached on disk.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from edge_plm.research.kernels import softmax_inplace
from edge_plm.research.lm.reference import BranchCache


@nb.njit(cache=True, parallel=True)
def _gather_c(ctx, lengths, C, c):
    N, B = ctx.shape
    for n in nb.prange(N):
        q = ctx[n, 0]
        for k in range(B):
            c[n, k] = C[ctx[n, k], q] if k < lengths[n] else 0.0


@nb.njit(cache=True, parallel=True)
def _attend(ctx, lengths, E, logits, a, z):
    """a[n,h,:] = masked softmax(logits[n, h*B:(h+1)*B]); z[n, h*b:(h+1)*b] = sum_j a E[ctx_j]."""
    N, H, B = a.shape
    b = E.shape[1]
    for n in nb.prange(N):
        L = lengths[n]
        for hh in range(H):
            off = hh * B
            m = -1e300
            for j in range(L):
                if logits[n, off + j] > m:
                    m = logits[n, off + j]
            tot = 0.0
            for j in range(L):
                e = math.exp(logits[n, off + j] - m)
                a[n, hh, j] = e
                tot += e
            for j in range(B):
                a[n, hh, j] = a[n, hh, j] / tot if j < L else 0.0
            for d in range(b):
                z[n, hh * b + d] = 0.0
            for j in range(L):
                aj = a[n, hh, j]
                row = ctx[n, j]
                for d in range(b):
                    z[n, hh * b + d] += aj * E[row, d]


@nb.njit(cache=True, parallel=True)
def _softmax_rows(x):
    for n in nb.prange(x.shape[0]):
        softmax_inplace(x[n])


@nb.njit(cache=True, parallel=True)
def _nll(y, targets, nll):
    for n in nb.prange(y.shape[0]):
        nll[n] = -math.log(y[n, targets[n]] + 1e-300)


@nb.njit(cache=True, parallel=True)
def _dlogits(y, targets, scale, dv):
    N, V = y.shape
    for n in nb.prange(N):
        for i in range(V):
            dv[n, i] = y[n, i] * scale
        dv[n, targets[n]] -= scale


@nb.njit(cache=True, parallel=True)
def _softmax_back_rows(y, dy):
    """In place: dy <- y * (dy - sum(dy * y))."""
    N, D = y.shape
    for n in nb.prange(N):
        s = 0.0
        for i in range(D):
            s += dy[n, i] * y[n, i]
        for i in range(D):
            dy[n, i] = y[n, i] * (dy[n, i] - s)


@nb.njit(cache=True, parallel=True)
def _attend_backward(ctx, lengths, E, a, dz, dl):
    N, H, B = a.shape
    b = E.shape[1]
    for n in nb.prange(N):
        L = lengths[n]
        for hh in range(H):
            sa = 0.0
            for j in range(L):
                row = ctx[n, j]
                acc = 0.0
                for d in range(b):
                    acc += dz[n, hh * b + d] * E[row, d]
                dl[n, hh * B + j] = acc
                sa += acc * a[n, hh, j]
            for j in range(L):
                dl[n, hh * B + j] = a[n, hh, j] * (dl[n, hh * B + j] - sa)
            for j in range(L, B):
                dl[n, hh * B + j] = 0.0


@nb.njit(cache=True)
def _embed_backward(ctx, lengths, E, a, dz, dc, dE):
    N, H, B = a.shape
    b = E.shape[1]
    for n in range(N):
        L = lengths[n]
        q = ctx[n, 0]
        for j in range(L):
            row = ctx[n, j]
            for d in range(b):
                acc = dc[n, j] * E[q, d]
                for hh in range(H):
                    acc += a[n, hh, j] * dz[n, hh * b + d]
                dE[row, d] += acc
                dE[q, d] += dc[n, j] * E[row, d]


def _w2d(W: np.ndarray) -> np.ndarray:
    """(H, B, B) -> (B, H*B) with [k, h*B + j] = W[h, k, j]."""
    H, B, _ = W.shape
    return np.ascontiguousarray(W.transpose(1, 0, 2).reshape(B, H * B))


def branch_forward(ctx, lengths, targets, E, C, W, U, O) -> BranchCache:
    N, B = ctx.shape
    H = W.shape[0]
    ctx = np.ascontiguousarray(ctx, dtype=np.int64)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    c = np.empty((N, B))
    _gather_c(ctx, lengths, C, c)
    logits = c @ _w2d(W)
    a = np.empty((N, H, B))
    z = np.empty((N, H * E.shape[1]))
    _attend(ctx, lengths, E, logits, a, z)
    h = z @ U
    _softmax_rows(h)
    y = h @ O
    _softmax_rows(y)
    nll = np.empty(N)
    _nll(y, np.ascontiguousarray(targets, dtype=np.int64), nll)
    valid = np.arange(B)[None, :] < lengths[:, None]
    return BranchCache(ctx, lengths, valid, c, a, z, h, y, nll)


def branch_backward(cache: BranchCache, targets, E, W, U, O, n_total: int, need_dE: bool = False):
    N, B = cache.ctx.shape
    H = W.shape[0]
    dv = np.empty_like(cache.y)
    _dlogits(cache.y, np.ascontiguousarray(targets, dtype=np.int64), 1.0 / n_total, dv)
    dO = cache.h.T @ dv
    du = dv @ O.T
    _softmax_back_rows(cache.h, du)
    dU = cache.z.T @ du
    dz = du @ U.T
    dl = np.empty((N, H * B))
    _attend_backward(cache.ctx, cache.lengths, E, cache.a, dz, dl)
    dW = np.ascontiguousarray((cache.c.T @ dl).reshape(B, H, B).transpose(1, 0, 2))
    dE = None
    if need_dE:
        W2 = _w2d(W)
        dc = dl @ W2.T
        dE = np.zeros_like(E)
        _embed_backward(cache.ctx, cache.lengths, E, cache.a, dz, dc, dE)
    return dW, dU, dO, dE
