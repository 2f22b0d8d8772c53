"""NumPy reference of one SAFFU language-model branch (the twin of ``research/lm/kernels.py``).

For a bucket of N samples of one branch (width B, heads H, bits b):
    c   = C[ctx_k, ctx_0] masked                   (N, B)     cached comparisons
    a   = softmax(c W[h] + mask)                   (N, H, B)
    z   = concat_h a_h X,  X = E[ctx] masked       (N, H*b)
    h   = softmax(z U)                             (N, d)
    y   = softmax(h O)                             (N, V)
The loss is the summed negative log-likelihood of the targets; ``backward`` takes the
gradient of the *mean* over ``n_total`` samples (so several buckets add up to one batch).
Everything is explicit tensors (the reference); the kernels fuse the gathers and the
attention and leave the dense products to BLAS.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge_plm.research.saffu import NEG, softmax, softmax_backward, unit_backward


@dataclass
class BranchCache:
    ctx: np.ndarray
    lengths: np.ndarray
    valid: np.ndarray  # (N, B) bool
    c: np.ndarray  # (N, B)
    a: np.ndarray  # (N, H, B)
    z: np.ndarray  # (N, H*b)
    h: np.ndarray  # (N, d)
    y: np.ndarray  # (N, V)
    nll: np.ndarray  # (N,)


def branch_forward(ctx, lengths, targets, E, C, W, U, O) -> BranchCache:
    N, B = ctx.shape
    H = W.shape[0]
    valid = np.arange(B)[None, :] < lengths[:, None]
    c = np.where(valid, C[ctx, ctx[:, :1]], 0.0)
    logits = np.einsum("nk,hkj->nhj", c, W)
    logits = np.where(valid[:, None, :], logits, NEG)
    a = softmax(logits, axis=-1)
    X = E[ctx] * valid[..., None]
    z = np.einsum("nhj,njb->nhb", a, X).reshape(N, H * E.shape[1])
    h = softmax(z @ U)
    y = softmax(h @ O)
    nll = -np.log(y[np.arange(N), targets] + 1e-300)
    return BranchCache(ctx, lengths, valid, c, a, z, h, y, nll)


def branch_backward(cache: BranchCache, targets, E, W, U, O, n_total: int, need_dE: bool = False):
    """Gradients (dW, dU, dO, dE or None) of sum(nll) / n_total."""
    N = cache.ctx.shape[0]
    dv = cache.y.copy()
    dv[np.arange(N), targets] -= 1.0
    dv /= n_total
    dO = cache.h.T @ dv
    du = softmax_backward(cache.h, dv @ O.T)
    dW, dU, dE = unit_backward(cache.ctx, cache.valid, cache.c, cache.a, cache.z, E, W, U, du, need_dE)
    return dW, dU, dO, dE


def padded_forward_nll(ctx, lengths, targets, branches, widths, E, C, Ws, Us, O) -> np.ndarray:
    """Unbucketed reference: every sample padded to max(widths), its branch's W embedded in a
    Bmax x Bmax zero matrix. Same numbers as bucketing (masked slots get weight exactly 0),
    at the cost of the longest width for every sample. Used by tests and benchmarks."""
    N, Bm = ctx.shape
    nll = np.empty(N)
    for bi, B in enumerate(widths):
        sel = np.flatnonzero(branches == bi)
        if len(sel) == 0:
            continue
        Wp = np.zeros((Ws[bi].shape[0], Bm, Bm))
        Wp[:, :B, :B] = Ws[bi]
        nll[sel] = branch_forward(ctx[sel], lengths[sel], targets[sel], E, C, Wp, Us[bi], O).nll
    return nll
