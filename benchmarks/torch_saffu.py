"""PyTorch CPU twin of one SAFFU language-model branch (benchmark-only dependency:
``pip install torch==2.13.0``, CPU wheel). Same math as ``edge_plm/research/lm/reference.py``:
c = C[ctx, ctx_0] (masked), a = softmax(c W_h + mask), z = concat_h a_h E[ctx], h = softmax(z U),
y = softmax(h O); mean NLL; autograd for the backward."""

from __future__ import annotations

import numpy as np


def make_step(ctx, lengths, targets, E, C, W, U, O, threads: int):
    import torch

    torch.set_num_threads(threads)
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    ctx_t, len_t, tg = t(ctx), t(lengths), t(targets)
    E_t, C_t = t(E), t(C)
    W_t = t(W).requires_grad_(True)
    U_t = t(U).requires_grad_(True)
    O_t = t(O).requires_grad_(True)
    N, B = ctx.shape
    valid = torch.arange(B)[None, :] < len_t[:, None]
    c = torch.where(valid, C_t[ctx_t, ctx_t[:, :1]], torch.zeros(()))
    X = E_t[ctx_t] * valid[..., None]

    def step():
        logits = torch.einsum("nk,hkj->nhj", c, W_t).masked_fill(~valid[:, None, :], -1e30)
        a = torch.softmax(logits, -1)
        z = torch.einsum("nhj,njb->nhb", a, X).reshape(N, -1)
        h = torch.softmax(z @ U_t, -1)
        logp = torch.log_softmax(h @ O_t, -1)
        loss = -logp[torch.arange(N), tg].mean()
        for p in (W_t, U_t, O_t):
            p.grad = None
        loss.backward()
        return float(loss)

    return step
