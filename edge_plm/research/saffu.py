"""SAFFU blocks, NumPy reference implementation (docs/design.md §2.2, §2.4, §2.5).

One SAFFU unit, for a context X (K x b, rows are non-negative codes) and its query row q:
    c = X q                       comparisons, read from the cache C = E E^T by token id
    a = softmax(c W + mask)       W in R^{K x K}: comparisons -> position weights
    z = a X                       aggregated features (non-negative, sums to 1)
    h = softmax(z U)

Two blocks make the switch model (see ``edge_plm.switch.config.SwitchConfig``):
  local  — at every position t, the context is the last `window` tokens (slot k = position
           t-k), with several heads whose z's are concatenated before U;
  global — at the last position, the context is the sequence of local states h (slot k =
           position L-1-k, i.e. aligned to the end), with the branch width B chosen as the
           smallest configured width >= L (``branch_for``); W_B, U_B per branch, O shared.
           Its aggregation is count-scaled, z = L * (a X): the L local states are L pieces of
           evidence, and |z|_1 = L makes the priming number of U_B the mean dialogue length,
           so the explicit solution of U_B is a sum of per-position log-likelihoods (a plain
           average would shrink every logit difference by 1/L; measured in docs/method.md).

Everything here is plain NumPy and is the reference for the Numba kernels in ``kernels.py``.
Masked positions get logit -inf, hence attention weight exactly 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NEG = -1e30  # "minus infinity" for masked logits (exp underflows to exactly 0)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_backward(y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """d loss / d logits for y = softmax(logits)."""
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))


def branch_for(length: int, widths: tuple[int, ...]) -> int:
    """Index of the smallest width >= length (the multi-context rule)."""
    for i, w in enumerate(widths):
        if w >= length:
            return i
    raise ValueError(f"sequence of length {length} exceeds the largest context width {widths[-1]}")


# ---------------------------------------------------------------------------------------------
# Local block


@dataclass
class LocalCache:
    win: np.ndarray  # (N, L, w) token id at slot k of position t (PAD where invalid)
    valid: np.ndarray  # (N, L, w) bool
    c: np.ndarray  # (N, L, w) comparisons
    a: np.ndarray  # (N, L, H, w) attention
    z: np.ndarray  # (N, L, H*b)
    h: np.ndarray  # (N, L, dh) local states (zero rows past the length)


def local_windows(ids: np.ndarray, lengths: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    N, L = ids.shape
    pos = np.arange(L)[:, None] - np.arange(window)[None, :]  # (L, w)
    inside = np.arange(L)[None, :, None] < lengths[:, None, None]  # (N, L, 1)
    valid = (pos >= 0)[None, :, :] & inside
    win = np.where(valid, ids[:, np.clip(pos, 0, None)], 0)
    return win, valid


def local_forward(ids, lengths, E, C, W, U, ws=None) -> LocalCache:
    """ids (N, L) int, lengths (N,), E (V, b), C (V, V), W (H, w, w), U (H*b, dh).
    ``ws`` (a ``kernels.Workspace`` for the Numba twins' reusable buffers) is ignored here."""
    N, L = ids.shape
    H, w, _ = W.shape
    b = E.shape[1]
    win, valid = local_windows(ids, lengths, w)
    c = np.where(valid, C[win, ids[:, :, None]], 0.0)
    logits = np.einsum("nlk,hkj->nlhj", c, W)
    logits = np.where(valid[:, :, None, :], logits, NEG)
    row = valid[:, :, 0]  # positions inside the sequence
    a = softmax(logits, axis=-1) * row[:, :, None, None]
    X = E[win] * valid[..., None]
    z = np.einsum("nlhj,nljb->nlhb", a, X).reshape(N, L, H * b)
    h = softmax(z @ U, axis=-1) * row[..., None]
    return LocalCache(win, valid, c, a, z, h)


def unit_backward(ctx, valid, c, a, z, E, W, U, du, need_dE: bool = False):
    """Backward through SAFFU units for M rows (shared by the switch's local block and the
    desktop LM): ctx (M, w) token ids of each row's context, valid (M, w), comparisons c (M, w),
    attention a (M, H, w), z (M, H*b), du = d loss / d (z U) (M, dh). Slot 0 is the query
    (c_k = X_k . X_0). Returns dW, dU and dE (None unless need_dE)."""
    M = ctx.shape[0]
    H, b = W.shape[0], E.shape[1]
    dU = z.T @ du
    dz = (du @ U.T).reshape(M, H, b)
    X = E[ctx] * valid[..., None]
    da = np.einsum("mhb,mjb->mhj", dz, X)
    dl = softmax_backward(a, da)
    dW = np.einsum("mk,mhj->hkj", c, dl)
    dE = None
    if need_dE:
        dX = np.einsum("mhj,mhb->mjb", a, dz)
        dc = np.einsum("hkj,mhj->mk", W, dl) * valid
        dX += dc[..., None] * X[:, :1, :]  # c_k = X_k . X_0
        dX[:, 0, :] += np.einsum("mk,mkb->mb", dc, X)
        dE = np.zeros_like(E)
        np.add.at(dE, ctx[valid], dX[valid])
    return dW, dU, dE


def local_backward(ids, lengths, E, C, W, U, cache: LocalCache, dh: np.ndarray, need_dE: bool = False, ws=None):
    """Gradients of W, U (and E when thawed) given d loss / d h (N, L, dh): every position is
    one unit's row (``unit_backward``)."""
    w = W.shape[1]
    row = cache.valid[:, :, 0]
    du = softmax_backward(cache.h, dh) * row[..., None]
    M = row.size
    return unit_backward(cache.win.reshape(M, w), cache.valid.reshape(M, w), cache.c.reshape(M, w),
                         cache.a.reshape(M, W.shape[0], w), cache.z.reshape(M, -1), E, W, U,
                         du.reshape(M, -1), need_dE)


# ---------------------------------------------------------------------------------------------
# Global block + output


@dataclass
class GlobalCache:
    branch: np.ndarray  # (N,) branch index
    X2: list  # per sample (B, dh) states, slot k = position L-1-k (zero rows when masked)
    c2: list  # per sample (B,)
    a2: list  # per sample (B,)
    z2: np.ndarray  # (N, dh)
    g: np.ndarray  # (N, d)
    y: np.ndarray  # (N, n_out)


def global_forward(h, lengths, widths, W2, U2, O, ws=None) -> GlobalCache:
    """h (N, L, dh) local states; W2 (n_branch, Bmax, Bmax) with branch i using its top-left
    B_i x B_i block; U2 (n_branch, dh, d); O (d, n_out)."""
    N = h.shape[0]
    branch = np.array([branch_for(int(n), widths) for n in lengths])
    X2s, c2s, a2s = [], [], []
    z2 = np.zeros((N, h.shape[2]))
    g = np.zeros((N, U2[0].shape[1]))
    for n in range(N):
        Ln, bi = int(lengths[n]), int(branch[n])
        B = widths[bi]
        X2 = np.zeros((B, h.shape[2]))
        X2[:Ln] = h[n, Ln - 1 :: -1][:Ln] if Ln else 0.0
        c2 = X2 @ X2[0]
        logits = c2 @ W2[bi, :B, :B]
        logits[Ln:] = NEG
        a2 = softmax(logits)
        z2[n] = Ln * (a2 @ X2)  # count-scaled pooling: |z2|_1 = L (see module docstring)
        g[n] = softmax(z2[n] @ U2[bi])
        X2s.append(X2), c2s.append(c2), a2s.append(a2)
    y = softmax(g @ O)
    return GlobalCache(branch, X2s, c2s, a2s, z2, g, y)


def global_backward(h_shape, lengths, widths, W2, U2, O, cache: GlobalCache, dv: np.ndarray, ws=None):
    """Gradients given d loss / d (g O) = dv (N, n_out). Returns dW2, dU2, dO, dh."""
    N = len(lengths)
    dO = cache.g.T @ dv
    dg = dv @ O.T
    du2 = softmax_backward(cache.g, dg)
    dW2 = np.zeros_like(W2)
    dU2 = np.zeros_like(U2)
    dh = np.zeros(h_shape)
    for n in range(N):
        Ln, bi = int(lengths[n]), int(cache.branch[n])
        B = widths[bi]
        X2, c2, a2 = cache.X2[n], cache.c2[n], cache.a2[n]
        dU2[bi] += np.outer(cache.z2[n], du2[n])
        dz2 = Ln * (U2[bi] @ du2[n])
        da2 = X2 @ dz2
        dX2 = np.outer(a2, dz2)
        dl2 = a2 * (da2 - (da2 * a2).sum())
        dW2[bi, :B, :B] += np.outer(c2, dl2)
        dc2 = W2[bi, :B, :B] @ dl2
        dc2[Ln:] = 0.0
        dX2 += dc2[:, None] * X2[0][None, :]
        dX2[0] += dc2 @ X2
        dh[n, :Ln] += dX2[:Ln][::-1]
    return dW2, dU2, dO, dh


# ---------------------------------------------------------------------------------------------
# Token table (used by the Numba local block, kernels._token_table; not by the reference path)


def token_table(ids, lengths, E, U3):
    """The distinct tokens of a batch and their rows through U, per head.

    z_t U = sum_h (a_h X) U_h = sum_h sum_j a_hj (E U_h)[win_j] with U_h = U3[h] (b x dh), so a
    kernel can multiply U once per distinct token instead of once per position. Returns
    cid (V,) compact index of each token (-1 when absent), used (nu,) the tokens in id order,
    Eu = E[used] (nu, b) and EU (H, nu, dh) with EU[h, u] = E[used[u]] @ U3[h]."""
    inside = np.arange(ids.shape[1])[None, :] < lengths[:, None]
    used = np.unique(ids[inside])
    cid = np.full(E.shape[0], -1, dtype=np.int64)
    cid[used] = np.arange(len(used))
    Eu = E[used]
    return cid, used, Eu, np.einsum("ub,hbd->hud", Eu, U3)
