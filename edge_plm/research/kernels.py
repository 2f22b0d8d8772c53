"""Numba kernels for the SAFFU hot loops; ``saffu.py`` holds their NumPy reference twins.

Each kernel computes exactly what its twin computes (parity tests: tests/research/test_kernels.py) but
as fused loops without temporaries, compiled once and cached on disk (``cache=True``). The
functions ``local_forward`` ... ``global_backward`` at the bottom have the same signatures and
return the same objects as the reference ones, so ``research/charnet/network.py`` selects a backend by name.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from edge_plm.research import saffu
from edge_plm.research.saffu import GlobalCache, LocalCache, branch_for


@nb.njit(cache=True, fastmath={"reassoc"})
def _dot(x, y):
    """x . y of two rows, summed in SIMD lanes (like BLAS ddot; the order of the additions is
    the only thing ``reassoc`` lets the compiler change)."""
    acc = 0.0
    for o in range(x.shape[0]):
        acc += x[o] * y[o]
    return acc


@nb.njit(cache=True, fastmath={"reassoc"})
def _sum(x):
    """Sum of a row, in SIMD lanes (the order of the additions is all ``reassoc`` changes)."""
    acc = 0.0
    for o in range(x.shape[0]):
        acc += x[o]
    return acc


@nb.njit(cache=True, fastmath=False)
def _max(x):
    """Exact maximum of a non-empty row, four independent running maxima (NaN-free input)."""
    n = x.shape[0]
    m0 = m1 = m2 = m3 = x[0]
    i = 0
    while i + 4 <= n:
        if x[i] > m0:
            m0 = x[i]
        if x[i + 1] > m1:
            m1 = x[i + 1]
        if x[i + 2] > m2:
            m2 = x[i + 2]
        if x[i + 3] > m3:
            m3 = x[i + 3]
        i += 4
    while i < n:
        if x[i] > m0:
            m0 = x[i]
        i += 1
    return max(max(m0, m1), max(m2, m3))


# exp by Cody-Waite reduction and a degree-13 polynomial, written so that the compiler can
# vectorise it (a libm call per element cannot be): exp(x) = 2^k exp(r), k = round(x / ln 2),
# r = x - k ln 2 in [-ln2/2, ln2/2]; 2^k is built from its exponent bits.
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # k * _LN2_HI is exact for |k| < 2^11 (fdlibm split)
_LN2_LO = 1.90821492927058770002e-10
_ROUND = 6755399441055744.0  # 1.5 * 2^52: x + _ROUND rounds x to an integer in the low bits
_ROUND_BITS = int(np.array(_ROUND).view(np.int64))
_EXP_MIN = -708.39  # exp below this is subnormal (< 2.3e-308): returned as 0


@nb.njit(cache=True, fastmath=False)
def softmax_inplace(v):
    """v <- softmax(v) for a 1-D array (or row view), max-shifted (twin: saffu.softmax)."""
    m = -1e300
    for i in range(v.shape[0]):
        if v[i] > m:
            m = v[i]
    tot = 0.0
    for i in range(v.shape[0]):
        v[i] = math.exp(v[i] - m)
        tot += v[i]
    for i in range(v.shape[0]):
        v[i] /= tot


@nb.njit(cache=True, fastmath=False)
def _exp_into(x, out, kbuf):
    """out[i] = exp(x[i]) for x[i] <= 0 (softmax arguments after the max is subtracted),
    within 1 ulp of libm's exp (twin: np.exp; parity test in tests/research/test_kernels.py); 0 below
    _EXP_MIN, where exp is subnormal; NaN stays NaN. kbuf: float64 scratch, len(x)."""
    n = x.shape[0]
    for i in range(n):
        xi = _EXP_MIN if x[i] < _EXP_MIN else x[i]
        t = xi * _LOG2E + _ROUND
        kbuf[i] = t
        kf = t - _ROUND
        r = (xi - kf * _LN2_HI) - kf * _LN2_LO
        p = 1.0 / 6227020800.0
        p = p * r + 1.0 / 479001600.0
        p = p * r + 1.0 / 39916800.0
        p = p * r + 1.0 / 3628800.0
        p = p * r + 1.0 / 362880.0
        p = p * r + 1.0 / 40320.0
        p = p * r + 1.0 / 5040.0
        p = p * r + 1.0 / 720.0
        p = p * r + 1.0 / 120.0
        p = p * r + 1.0 / 24.0
        p = p * r + 1.0 / 6.0
        p = p * r + 0.5
        p = p * r + 1.0
        out[i] = p * r + 1.0
    kb = kbuf.view(np.int64)
    for i in range(n):
        kb[i] = (kb[i] - _ROUND_BITS + 1023) << 52  # the bits of 2^k
    for i in range(n):
        out[i] = 0.0 if x[i] < _EXP_MIN else out[i] * kbuf[i]


@nb.njit(cache=True, fastmath=False)
def _token_ids(ids, lengths, V):
    """The distinct tokens of the batch in id order (``used``) and each token's index among
    them (``cid``, -1 when absent)."""
    seen = np.zeros(V, dtype=np.bool_)
    for n in range(ids.shape[0]):
        for t in range(lengths[n]):
            seen[ids[n, t]] = True
    cid = np.full(V, -1, dtype=np.int64)
    nu = 0
    for v in range(V):
        if seen[v]:
            cid[v] = nu
            nu += 1
    used = np.empty(nu, dtype=np.int64)
    for v in range(V):
        if seen[v]:
            used[cid[v]] = v
    return cid, used


@nb.njit(cache=True, fastmath=False)
def _local_forward(ids, lengths, E, C, W, cid, EU, win, valid, c, a, z, h):
    """Writes every entry of win ... h (zeros at masked slots and past each length), so the
    outputs may be reused buffers. z U without z: z_t U = sum_h sum_j a_hj E[win_j] U_h =
    sum_h sum_j a_hj EU[h, win_j], so each position adds heads x window rows of the token
    table instead of a (H b) x dh product; z itself (H b per position) is still filled for the
    cache."""
    N, L = ids.shape
    H, w, _ = W.shape
    b = E.shape[1]
    dh = EU.shape[2]
    logits = np.empty(w)
    us = np.empty(dh)  # z_t U of the current position
    kbuf = np.empty(dh)
    for n in range(N):
        Ln = lengths[n]
        for t in range(L):
            hr = h[n, t]
            zr = z[n, t]
            for i in range(H * b):
                zr[i] = 0.0
            if t >= Ln:
                for o in range(dh):
                    hr[o] = 0.0
                for k in range(w):
                    win[n, t, k] = 0
                    valid[n, t, k] = False
                    c[n, t, k] = 0.0
                    for hh in range(H):
                        a[n, t, hh, k] = 0.0
                continue
            q = ids[n, t]
            for o in range(dh):
                us[o] = 0.0
            for k in range(w):
                if t - k >= 0:
                    win[n, t, k] = ids[n, t - k]
                    valid[n, t, k] = True
                    c[n, t, k] = C[ids[n, t - k], q]
                else:
                    win[n, t, k] = 0
                    valid[n, t, k] = False
                    c[n, t, k] = 0.0
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
                    else:
                        a[n, t, hh, j] = 0.0
                for j in range(w):
                    a[n, t, hh, j] /= tot
                for j in range(w):
                    if valid[n, t, j]:
                        aj = a[n, t, hh, j]
                        row = win[n, t, j]
                        for d in range(b):
                            zr[hh * b + d] += aj * E[row, d]
                        er = EU[hh, cid[row]]
                        for o in range(dh):
                            us[o] += aj * er[o]
            m = _max(us)
            for o in range(dh):
                us[o] -= m
            _exp_into(us, hr, kbuf)
            tot = _sum(hr)
            for o in range(dh):
                hr[o] /= tot


@nb.njit(cache=True, fastmath=False)
def _local_backward(ids, lengths, E, W, U3, used, Eu, cid, EU, win, valid, c, a, h, dh_in, G, dW, dU3, dE, need_dE):
    """Per position: du = softmax backward of h; da_hj = dz_h . E[win_j] = du . EU[h, win_j];
    the z path of dU and dE goes through G[h, u] = sum over the slots holding token u of
    a_hj du (G comes in zeroed), so dU_h = E_used^T G_h and dE[used] += sum_h G_h U_h^T: two
    small products at the end instead of two (H b) x dh products per position."""
    N, L = ids.shape
    H, w, _ = W.shape
    b = E.shape[1]
    dh = EU.shape[2]
    nu = EU.shape[1]
    du = np.empty(dh)
    da = np.empty(w)
    dl = np.empty(w)
    dc = np.empty(w)
    for n in range(N):
        for t in range(lengths[n]):
            hr = h[n, t]
            gr = dh_in[n, t]
            s = _dot(gr, hr)
            for o in range(dh):
                du[o] = hr[o] * (gr[o] - s)
            if need_dE:
                for k in range(w):
                    dc[k] = 0.0
            for hh in range(H):
                sa = 0.0
                for j in range(w):
                    if valid[n, t, j]:
                        aj = a[n, t, hh, j]
                        u = cid[win[n, t, j]]
                        acc = _dot(du, EU[hh, u])
                        Gu = G[hh, u]
                        for o in range(dh):
                            Gu[o] += aj * du[o]
                        da[j] = acc
                        sa += acc * aj
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
            if need_dE:
                # c_k = E[win_k] . E[q]: d/dE[win_k] = dc_k E[q], d/dE[q] = dc_k E[win_k]
                q = win[n, t, 0]
                for k in range(w):
                    if valid[n, t, k]:
                        row = win[n, t, k]
                        for d in range(b):
                            dE[row, d] += dc[k] * E[q, d]
                            dE[q, d] += dc[k] * E[row, d]
    if nu == 0:
        return
    for hh in range(H):
        dU3[hh] += np.dot(Eu.T, G[hh])
    if need_dE:
        for hh in range(H):
            dEu = np.dot(G[hh], U3[hh].T)
            for u in range(nu):
                for d in range(b):
                    dE[used[u], d] += dEu[u, d]


@nb.njit(cache=True, fastmath=False)
def _global_forward(h, lengths, branch, W2, U2, O, c2, a2, z2, g, y):
    """Reads the context X2 (slot k = position L-1-k) straight from h: no (N, B, dh) copy."""
    N = h.shape[0]
    dh = h.shape[2]
    d = U2.shape[2]
    n_out = O.shape[1]
    for n in range(N):
        Ln = lengths[n]
        bi = branch[n]
        ar = a2[n]
        zr = z2[n]
        if Ln > 0:
            q = h[n, Ln - 1]
            for k in range(Ln):
                c2[n, k] = _dot(h[n, Ln - 1 - k], q)
            for k in range(Ln):
                ck = c2[n, k]
                wr = W2[bi, k]
                for j in range(Ln):
                    ar[j] += ck * wr[j]
            softmax_inplace(ar[:Ln])
            for j in range(Ln):
                aj = ar[j]
                xr = h[n, Ln - 1 - j]
                for o in range(dh):
                    zr[o] += aj * xr[o]
            for o in range(dh):
                zr[o] *= Ln
        for e in range(d):
            s = 0.0
            for o in range(dh):
                s += zr[o] * U2[bi, o, e]
            g[n, e] = s
        softmax_inplace(g[n])
        for r in range(n_out):
            s = 0.0
            for e in range(d):
                s += g[n, e] * O[e, r]
            y[n, r] = s
        softmax_inplace(y[n])


@nb.njit(cache=True, fastmath=False)
def _global_backward(h, lengths, branch, W2, U2, O, c2, a2, z2, g, dv, dW2, dU2, dO, dh):
    """Writes every row of dh (zeros past each length): dX2[k] = a2_k dz2 + dc2_k X2[0] and
    dX2[0] += sum_k dc2_k X2[k], with X2[k] = h[n, L-1-k] read in place."""
    N, L, dhd = h.shape
    d = U2.shape[2]
    n_out = O.shape[1]
    Bmax = W2.shape[1]
    dg = np.empty(d)
    du2 = np.empty(d)
    dz2 = np.empty(dhd)
    da2 = np.empty(Bmax)
    dl2 = np.empty(Bmax)
    dc2 = np.empty(Bmax)
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
        for t in range(Ln, L):
            for o in range(dhd):
                dh[n, t, o] = 0.0
        if Ln == 0:
            continue
        sa = 0.0
        for k in range(Ln):
            da2[k] = _dot(h[n, Ln - 1 - k], dz2)
            sa += da2[k] * a2[n, k]
        for j in range(Ln):
            dl2[j] = a2[n, j] * (da2[j] - sa)
        for k in range(Ln):
            ck = c2[n, k]
            dwr = dW2[bi, k]
            for j in range(Ln):
                dwr[j] += ck * dl2[j]
            dc2[k] = _dot(W2[bi, k, :Ln], dl2[:Ln])
        q = h[n, Ln - 1]
        for k in range(Ln):
            ak = a2[n, k]
            ck = dc2[k]
            row = dh[n, Ln - 1 - k]
            for o in range(dhd):
                row[o] = ak * dz2[o] + ck * q[o]
        r0 = dh[n, Ln - 1]
        for k in range(Ln):
            ck = dc2[k]
            xr = h[n, Ln - 1 - k]
            for o in range(dhd):
                r0[o] += ck * xr[o]


class ReversedStates:
    """``GlobalCache.X2`` of the Numba path without a copy: item n is sample n's context,
    h[n, :L_n] reversed (slot k = position L_n-1-k), as a view of the local states."""

    def __init__(self, h: np.ndarray, lengths: np.ndarray):
        self.h, self.lengths = h, lengths

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, n: int) -> np.ndarray:
        return self.h[n, : int(self.lengths[n])][::-1]


# --- wrappers with the reference signatures -------------------------------------------------


class Workspace:
    """Buffers reused from one call to the next, so a training step does not allocate (and
    page-fault in) its (N, L, dh) arrays every time. An array handed out for a name is
    overwritten by the next request for that name: caches built in a workspace are valid
    until the next forward/backward that uses the same workspace (``SwitchNet.gradients``
    keeps them inside one call). Pickles and deep-copies as an empty workspace."""

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}

    def get(self, name: str, shape, dtype=np.float64) -> np.ndarray:
        """An uninitialised C-contiguous array of `shape` (the buffer grows when needed)."""
        size = int(np.prod(shape))
        buf = self._buffers.get(name)
        if buf is None or buf.size < size or buf.dtype != dtype:
            buf = np.empty(size, dtype=dtype)
            self._buffers[name] = buf
        return buf[:size].reshape(shape)

    def __reduce__(self):
        return (Workspace, ())


def _empty(ws: Workspace | None, name: str, shape, dtype=np.float64) -> np.ndarray:
    return np.empty(shape, dtype=dtype) if ws is None else ws.get(name, shape, dtype)


def _heads(W, U, E):
    """U (H b, dh) as (H, b, dh): U_h is the block of head h."""
    return np.ascontiguousarray(U).reshape(W.shape[0], E.shape[1], U.shape[1])


def token_table(ids, lengths, E, U3, ws: Workspace | None = None):
    """Twin of ``saffu.token_table``: (cid, used, Eu, EU) with EU[h, u] = E[used[u]] @ U3[h]."""
    cid, used = _token_ids(ids, lengths, E.shape[0])
    Eu = E[used]
    EU = np.matmul(Eu, U3, out=_empty(ws, "EU", (U3.shape[0], len(used), U3.shape[2])))
    return cid, used, Eu, EU


def local_forward(ids, lengths, E, C, W, U, ws: Workspace | None = None) -> LocalCache:
    N, L = ids.shape
    H, w, _ = W.shape
    b = E.shape[1]
    cid, _, _, EU = token_table(ids, lengths, E, _heads(W, U, E), ws)
    win = _empty(ws, "win", (N, L, w), np.int64)
    valid = _empty(ws, "valid", (N, L, w), np.bool_)
    c = _empty(ws, "c", (N, L, w))
    a = _empty(ws, "a", (N, L, H, w))
    z = _empty(ws, "z", (N, L, H * b))
    h = _empty(ws, "h", (N, L, U.shape[1]))
    _local_forward(ids, lengths, E, C, W, cid, EU, win, valid, c, a, z, h)
    return LocalCache(win, valid, c, a, z, h)


def local_backward(ids, lengths, E, C, W, U, cache: LocalCache, dh, need_dE: bool = False,
                   ws: Workspace | None = None):
    U3 = _heads(W, U, E)
    cid, used, Eu, EU = token_table(ids, lengths, E, U3, ws)
    G = _empty(ws, "G", EU.shape)
    G.fill(0.0)
    dW = np.zeros_like(W)
    dU = np.zeros_like(U)
    dE = np.zeros_like(E)
    _local_backward(ids, lengths, E, W, U3, used, Eu, cid, EU, cache.win, cache.valid, cache.c, cache.a,
                    cache.h, np.ascontiguousarray(dh), G, dW, dU.reshape(U3.shape), dE, need_dE)
    return dW, dU, (dE if need_dE else None)


def _branches(lengths, widths) -> np.ndarray:
    branch = np.searchsorted(np.asarray(widths), lengths).astype(np.int64)
    if len(branch) and branch.max() >= len(widths):
        branch_for(int(lengths.max()), widths)  # raises with the reference message
    return branch


def global_forward(h, lengths, widths, W2, U2, O, ws: Workspace | None = None) -> GlobalCache:
    N = h.shape[0]
    h = np.ascontiguousarray(h)
    branch = _branches(lengths, widths)
    Bmax = W2.shape[1]
    c2 = np.zeros((N, Bmax))
    a2 = np.zeros((N, Bmax))
    z2 = np.zeros((N, h.shape[2]))
    g = np.zeros((N, U2.shape[2]))
    y = np.zeros((N, O.shape[1]))
    _global_forward(h, lengths, branch, W2, U2, O, c2, a2, z2, g, y)
    return GlobalCache(branch, ReversedStates(h, lengths), c2, a2, z2, g, y)


def global_backward(h_shape, lengths, widths, W2, U2, O, cache: GlobalCache, dv, ws: Workspace | None = None):
    h = cache.X2.h
    dW2 = np.zeros_like(W2)
    dU2 = np.zeros_like(U2)
    dO = np.zeros_like(O)
    dh = _empty(ws, "dh", tuple(h_shape))  # every row is written by the kernel
    _global_backward(h, lengths, cache.branch, W2, U2, O, cache.c2, cache.a2, cache.z2, cache.g,
                     np.ascontiguousarray(dv), dW2, dU2, dO, dh)
    return dW2, dU2, dO, dh


BACKENDS = {
    "numpy": (saffu.local_forward, saffu.local_backward, saffu.global_forward, saffu.global_backward),
    "numba": (local_forward, local_backward, global_forward, global_backward),
}
