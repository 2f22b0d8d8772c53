"""The Numba kernels of the switch model's refinement objective: the full batch through the
word attention (``saffu_loss_grad``; its NumPy twins and the formulas: ``switch/attention.py``)
and over plain unit bags (``unit_loss_grad``: ``switch/unit_kernels.py``), and the row of
weighted cross-entropy both share (``softmax_xent_inplace``).

Imported only when ``SwitchConfig.kernel`` = "numba" serves a full-batch refinement
(``SwitchModel.refine``: the desktop trainer's epochs, `edge-plm train switch`). What the
device does online (a label, a relabel, a forget, a rebuild from the database) runs the NumPy
kernel of ``switch/segment_kernels.py`` (``unitnet.ONLINE_KERNEL``), so `run`, `replay` and
the data commands never load Numba and LLVM (docs/benchmarks-log.md, "Fits a Pi 3"). `edge-plm doctor
--warm-cache` compiles these into Numba's cache (``commands/doctor.py``).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np


@nb.njit(cache=True, fastmath=False)
def softmax_xent_inplace(s, label, weight, dbias):
    """One row of the weighted cross-entropy: turns the logits ``s`` into weight x (softmax(s) -
    onehot(label)), the gradient of the row's loss by its logits, adds it to ``dbias`` and
    returns the row's loss, weight x -log softmax(s)[label] (shared by this module's kernel and
    ``attention._batch_loss_grad``)."""
    C = s.shape[0]
    m = s[0]
    for c in range(1, C):
        if s[c] > m:
            m = s[c]
    tot = 0.0
    sy = s[label] - m
    for c in range(C):
        s[c] = math.exp(s[c] - m)
        tot += s[c]
    for c in range(C):
        s[c] /= tot
    s[label] -= 1.0
    for c in range(C):
        s[c] *= weight
        dbias[c] += s[c]
    return -weight * (sy - math.log(tot))


@nb.njit(cache=True, fastmath=False)
def unit_loss_grad(indptr, indices, values, labels, sw, U, bias, mask, dU):
    N = labels.shape[0]
    C = U.shape[1]
    s = np.empty(C)
    dbias = np.zeros(C)
    loss = 0.0
    for n in range(N):
        for c in range(C):
            s[c] = bias[c] + mask[c]
        for k in range(indptr[n], indptr[n + 1]):
            v = values[k]
            row = indices[k]
            for c in range(C):
                s[c] += v * U[row, c]
        loss += softmax_xent_inplace(s, labels[n], sw[n], dbias)
        for k in range(indptr[n], indptr[n + 1]):
            v = values[k]
            row = indices[k]
            for c in range(C):
                dU[row, c] += v * s[c]
    return loss, dbias


@nb.njit(cache=True, fastmath=False)
def saffu_loss_grad(indptr, indices, eptr, ent_pos, ent_m, ent_v, pptr, cval, branch, width, woff,
                     labels, sw, U, bias, mask, Wflat, dU, dW):
    N = labels.shape[0]
    C = U.shape[1]
    s = np.empty(C)
    dbias = np.zeros(C)
    loss = 0.0
    maxM = 1
    maxK = 1
    for n in range(N):
        maxM = max(maxM, indptr[n + 1] - indptr[n])
        maxK = max(maxK, pptr[n + 1] - pptr[n])
    z = np.empty(maxM)
    gz = np.empty(maxM)
    a = np.empty(maxK)
    ga = np.empty(maxK)
    for n in range(N):
        i0, M = indptr[n], indptr[n + 1] - indptr[n]
        p0, K = pptr[n], pptr[n + 1] - pptr[n]
        e0, e1 = eptr[n], eptr[n + 1]
        br = branch[n]
        B = width[n]
        w0 = woff[n]
        # attention
        if br >= 0:
            mx = -1e300
            for j in range(K):
                t = 0.0
                for i in range(K):
                    t += cval[p0 + i] * Wflat[w0 + i * B + j]
                a[j] = t
                if t > mx:
                    mx = t
            tot = 0.0
            for j in range(K):
                a[j] = math.exp(a[j] - mx)
                tot += a[j]
            for j in range(K):
                a[j] /= tot
        else:
            for j in range(K):
                a[j] = 1.0 / K
        # pooling
        for m in range(M):
            z[m] = 0.0
        for e in range(e0, e1):
            z[ent_m[e]] += K * a[ent_pos[e]] * ent_v[e]
        nz = 0.0
        for m in range(M):
            nz += z[m] * z[m]
        nz = math.sqrt(nz)
        if nz == 0.0:  # no known unit: x = 0 and the logits are the bias
            nz = 1.0
            br = -1
        for m in range(M):
            z[m] /= nz  # z is x from here on
        # output
        for c in range(C):
            s[c] = bias[c] + mask[c]
        for m in range(M):
            row = indices[i0 + m]
            for c in range(C):
                s[c] += z[m] * U[row, c]
        loss += softmax_xent_inplace(s, labels[n], sw[n], dbias)
        xg = 0.0
        for m in range(M):
            row = indices[i0 + m]
            g = 0.0
            for c in range(C):
                dU[row, c] += z[m] * s[c]
                g += U[row, c] * s[c]
            gz[m] = g
            xg += z[m] * g
        if br < 0:
            continue
        for m in range(M):
            gz[m] = (gz[m] - z[m] * xg) / nz
        for k in range(K):
            ga[k] = 0.0
        for e in range(e0, e1):
            ga[ent_pos[e]] += K * ent_v[e] * gz[ent_m[e]]
        bar = 0.0
        for k in range(K):
            bar += a[k] * ga[k]
        for j in range(K):
            gl = a[j] * (ga[j] - bar)
            for i in range(K):
                dW[w0 + i * B + j] += cval[p0 + i] * gl
    return loss, dbias


__all__ = ["saffu_loss_grad", "softmax_xent_inplace", "unit_loss_grad"]
