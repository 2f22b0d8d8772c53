"""Numba kernels for the SAFFU hot loops; ``saffu.py`` holds their NumPy reference twins.

Each kernel computes exactly what its twin computes (parity tests: tests/test_kernels.py) but
as fused loops without temporaries, compiled once and cached on disk (``cache=True``). The
functions ``local_forward`` ... ``global_backward`` at the bottom have the same signatures and
return the same objects as the reference ones, so ``switch.py`` selects a backend by name.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from edge_plm.plm import saffu
from edge_plm.plm.saffu import GlobalCache, LocalCache, branch_for


@nb.njit(cache=True, fastmath=False)
def _local_forward(ids, lengths, E, C, W, U, win, valid, c, a, z, h):
    N, L = ids.shape
    H, w, _ = W.shape
    b = E.shape[1]
    dh = U.shape[1]
    logits = np.empty(w)
    for n in range(N):
        for t in range(lengths[n]):
            q = ids[n, t]
            for k in range(w):
                if t - k >= 0:
                    win[n, t, k] = ids[n, t - k]
                    valid[n, t, k] = True
                    c[n, t, k] = C[ids[n, t - k], q]
            for hh in range(H):
                m = -1e300
                for j in range(w):
                    if valid[n, t, j]:
                        s = 0.0
                        for k in range(w):
                            s += c[n, t, k] * W[hh, k, j]
                        logits[j] = s
                        if s > m:
                            m = s
                tot = 0.0
                for j in range(w):
                    if valid[n, t, j]:
                        e = math.exp(logits[j] - m)
                        a[n, t, hh, j] = e
                        tot += e
                for j in range(w):
                    a[n, t, hh, j] /= tot
                for j in range(w):
                    if valid[n, t, j]:
                        aj = a[n, t, hh, j]
                        row = win[n, t, j]
                        for d in range(b):
                            z[n, t, hh * b + d] += aj * E[row, d]
        Ln = lengths[n]
        if Ln == 0:
            continue
        # all positions of the sequence at once: one matrix product (BLAS) for z U
        us = np.dot(z[n, :Ln], U)
        for t in range(Ln):
            m = -1e300
            for o in range(dh):
                if us[t, o] > m:
                    m = us[t, o]
            tot = 0.0
            for o in range(dh):
                e = math.exp(us[t, o] - m)
                h[n, t, o] = e
                tot += e
            for o in range(dh):
                h[n, t, o] /= tot


@nb.njit(cache=True, fastmath=False)
def _local_backward(ids, lengths, E, W, U, win, valid, c, a, z, h, dh_in, dW, dU, dE, need_dE):
    N, L = ids.shape
    H, w, _ = W.shape
    b = E.shape[1]
    dh = U.shape[1]
    dz = np.empty(H * b)
    da = np.empty(w)
    dl = np.empty(w)
    dc = np.empty(w)
    dX = np.empty((w, b))
    for n in range(N):
        Ln = lengths[n]
        if Ln == 0:
            continue
        # softmax backward for every position, then two matrix products (BLAS):
        # dU += Z^T dU_pre and dZ = dU_pre U^T
        dus = np.empty((Ln, dh))
        for t in range(Ln):
            s = 0.0
            for o in range(dh):
                s += dh_in[n, t, o] * h[n, t, o]
            for o in range(dh):
                dus[t, o] = h[n, t, o] * (dh_in[n, t, o] - s)
        dU += np.dot(z[n, :Ln].T, dus)
        dzs = np.dot(dus, U.T)
        for t in range(Ln):
            for i in range(H * b):
                dz[i] = dzs[t, i]
            if need_dE:
                for k in range(w):
                    dc[k] = 0.0
                    for d in range(b):
                        dX[k, d] = 0.0
            for hh in range(H):
                sa = 0.0
                for j in range(w):
                    if valid[n, t, j]:
                        row = win[n, t, j]
                        acc = 0.0
                        for d in range(b):
                            acc += dz[hh * b + d] * E[row, d]
                        da[j] = acc
                        sa += acc * a[n, t, hh, j]
                    else:
                        da[j] = 0.0
                for j in range(w):
                    dl[j] = a[n, t, hh, j] * (da[j] - sa)
                for k in range(w):
                    ck = c[n, t, k]
                    for j in range(w):
                        dW[hh, k, j] += ck * dl[j]
                if need_dE:
                    for k in range(w):
                        if valid[n, t, k]:
                            acc = 0.0
                            for j in range(w):
                                acc += W[hh, k, j] * dl[j]
                            dc[k] += acc
                    for j in range(w):
                        if valid[n, t, j]:
                            aj = a[n, t, hh, j]
                            for d in range(b):
                                dX[j, d] += aj * dz[hh * b + d]
            if need_dE:
                q = win[n, t, 0]
                for k in range(w):
                    if valid[n, t, k]:
                        row = win[n, t, k]
                        for d in range(b):
                            dX[k, d] += dc[k] * E[q, d]
                            dX[0, d] += dc[k] * E[row, d]
                for k in range(w):
                    if valid[n, t, k]:
                        row = win[n, t, k]
                        for d in range(b):
                            dE[row, d] += dX[k, d]


@nb.njit(cache=True, fastmath=False)
def _global_forward(h, lengths, branch, widths, W2, U2, O, X2, c2, a2, z2, g, y):
    N = h.shape[0]
    dh = h.shape[2]
    d = U2.shape[2]
    n_out = O.shape[1]
    for n in range(N):
        Ln = lengths[n]
        bi = branch[n]
        B = widths[bi]
        for k in range(Ln):
            for o in range(dh):
                X2[n, k, o] = h[n, Ln - 1 - k, o]
        for k in range(Ln):
            s = 0.0
            for o in range(dh):
                s += X2[n, k, o] * X2[n, 0, o]
            c2[n, k] = s
        m = -1e300
        for j in range(Ln):
            s = 0.0
            for k in range(Ln):
                s += c2[n, k] * W2[bi, k, j]
            a2[n, j] = s
            if s > m:
                m = s
        tot = 0.0
        for j in range(Ln):
            a2[n, j] = math.exp(a2[n, j] - m)
            tot += a2[n, j]
        for j in range(Ln):
            a2[n, j] /= tot
        for o in range(dh):
            s = 0.0
            for j in range(Ln):
                s += a2[n, j] * X2[n, j, o]
            z2[n, o] = Ln * s
        m = -1e300
        for e in range(d):
            s = 0.0
            for o in range(dh):
                s += z2[n, o] * U2[bi, o, e]
            g[n, e] = s
            if s > m:
                m = s
        tot = 0.0
        for e in range(d):
            g[n, e] = math.exp(g[n, e] - m)
            tot += g[n, e]
        for e in range(d):
            g[n, e] /= tot
        m = -1e300
        for r in range(n_out):
            s = 0.0
            for e in range(d):
                s += g[n, e] * O[e, r]
            y[n, r] = s
            if s > m:
                m = s
        tot = 0.0
        for r in range(n_out):
            y[n, r] = math.exp(y[n, r] - m)
            tot += y[n, r]
        for r in range(n_out):
            y[n, r] /= tot


@nb.njit(cache=True, fastmath=False)
def _global_backward(lengths, branch, W2, U2, O, X2, c2, a2, z2, g, dv, dW2, dU2, dO, dh):
    N = X2.shape[0]
    dhd = X2.shape[2]
    d = U2.shape[2]
    n_out = O.shape[1]
    dg = np.empty(d)
    du2 = np.empty(d)
    dz2 = np.empty(dhd)
    Bmax = X2.shape[1]
    da2 = np.empty(Bmax)
    dl2 = np.empty(Bmax)
    dc2 = np.empty(Bmax)
    dX2 = np.empty((Bmax, dhd))
    for n in range(N):
        Ln = lengths[n]
        bi = branch[n]
        for e in range(d):
            s = 0.0
            for r in range(n_out):
                dO[e, r] += g[n, e] * dv[n, r]
                s += dv[n, r] * O[e, r]
            dg[e] = s
        s = 0.0
        for e in range(d):
            s += dg[e] * g[n, e]
        for e in range(d):
            du2[e] = g[n, e] * (dg[e] - s)
        for o in range(dhd):
            acc = 0.0
            for e in range(d):
                dU2[bi, o, e] += z2[n, o] * du2[e]
                acc += U2[bi, o, e] * du2[e]
            dz2[o] = Ln * acc
        sa = 0.0
        for k in range(Ln):
            acc = 0.0
            for o in range(dhd):
                acc += X2[n, k, o] * dz2[o]
                dX2[k, o] = a2[n, k] * dz2[o]
            da2[k] = acc
            sa += acc * a2[n, k]
        for j in range(Ln):
            dl2[j] = a2[n, j] * (da2[j] - sa)
        for k in range(Ln):
            acc = 0.0
            for j in range(Ln):
                dW2[bi, k, j] += c2[n, k] * dl2[j]
                acc += W2[bi, k, j] * dl2[j]
            dc2[k] = acc
        for k in range(Ln):
            for o in range(dhd):
                dX2[k, o] += dc2[k] * X2[n, 0, o]
                dX2[0, o] += dc2[k] * X2[n, k, o]
        for k in range(Ln):
            for o in range(dhd):
                dh[n, Ln - 1 - k, o] += dX2[k, o]


# --- wrappers with the reference signatures -------------------------------------------------


def local_forward(ids, lengths, E, C, W, U) -> LocalCache:
    N, L = ids.shape
    H, w, _ = W.shape
    b = E.shape[1]
    win = np.zeros((N, L, w), dtype=np.int64)
    valid = np.zeros((N, L, w), dtype=np.bool_)
    c = np.zeros((N, L, w))
    a = np.zeros((N, L, H, w))
    z = np.zeros((N, L, H * b))
    h = np.zeros((N, L, U.shape[1]))
    _local_forward(ids, lengths, E, C, W, U, win, valid, c, a, z, h)
    return LocalCache(win, valid, c, a, z, h)


def local_backward(ids, lengths, E, C, W, U, cache: LocalCache, dh, need_dE: bool = False):
    dW = np.zeros_like(W)
    dU = np.zeros_like(U)
    dE = np.zeros_like(E)
    _local_backward(ids, lengths, E, W, U, cache.win, cache.valid, cache.c, cache.a, cache.z, cache.h,
                    np.ascontiguousarray(dh), dW, dU, dE, need_dE)
    return dW, dU, (dE if need_dE else None)


def global_forward(h, lengths, widths, W2, U2, O) -> GlobalCache:
    N = h.shape[0]
    branch = np.array([branch_for(int(n), widths) for n in lengths], dtype=np.int64)
    Bmax = W2.shape[1]
    # slot rows beyond the longest sequence are never read: size X2 by it, not by Bmax
    X2 = np.zeros((N, max(1, min(Bmax, int(lengths.max()) if N else 1)), h.shape[2]))
    c2 = np.zeros((N, Bmax))
    a2 = np.zeros((N, Bmax))
    z2 = np.zeros((N, h.shape[2]))
    g = np.zeros((N, U2.shape[2]))
    y = np.zeros((N, O.shape[1]))
    _global_forward(h, lengths, branch, np.asarray(widths, dtype=np.int64), W2, U2, O, X2, c2, a2, z2, g, y)
    return GlobalCache(branch, X2, c2, a2, z2, g, y)


def global_backward(h_shape, lengths, widths, W2, U2, O, cache: GlobalCache, dv):
    dW2 = np.zeros_like(W2)
    dU2 = np.zeros_like(U2)
    dO = np.zeros_like(O)
    dh = np.zeros(h_shape)
    _global_backward(lengths, cache.branch, W2, U2, O, cache.X2, cache.c2, cache.a2, cache.z2, cache.g,
                     np.ascontiguousarray(dv), dW2, dU2, dO, dh)
    return dW2, dU2, dO, dh


BACKENDS = {
    "numpy": (saffu.local_forward, saffu.local_backward, saffu.global_forward, saffu.global_backward),
    "numba": (local_forward, local_backward, global_forward, global_backward),
}
