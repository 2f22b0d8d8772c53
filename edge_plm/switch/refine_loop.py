"""The steps of ``UnitNet.refine``: gradient descent on ``UnitNet.objective``, with what does not
change between the steps of one call taken once.

One call's steps keep the examples, B, the pull, the mask and the query fixed, so they are read
once: the batch (``UnitNet.batch``, or ``sample_batch`` for a replay sample) with its unit
indices renumbered over the units it holds, logit_scale x B and the pull on those units, and
delta's rows of them, copied out and written back after the last step. Every step then costs
the batch's size, not the vocabulary's. The full batch also pulls the active rows no example
holds (units of forgotten examples) toward B: those with a nonzero delta take the same pull
step apart (the others stay zero). Each step's arithmetic is the objective's, operation for
operation, so the model is the one the steps of ``objective`` give, bit for bit (test:
tests/switch/test_refine_loop.py); only the loss returned is summed in another order.
"""

from __future__ import annotations

import copy

import numpy as np

from edge_plm.switch import attention, batches, unit_kernels

def compact_batch(b):
    """(batch, units): ``b``'s unit indices renumbered 0.. over ``units``, the sorted unit ids
    it holds (a shallow copy, made per call: ``b`` is left as it is, and a grown batch is the
    same object with new arrays)."""
    indices = b.indices if isinstance(b, attention.SaffuBatch) else b[1]
    units, local = batches.renumber(indices)
    local = local.astype(np.int64)
    if isinstance(b, attention.SaffuBatch):
        out = copy.copy(b)
        out.indices = local
        return out, units
    return (b[0], local, *b[2:]), units


def problem(net, keys: list[int] | None):
    """(batch, units, rest): the batch the steps run on, the units whose rows it reads and
    writes, and the other active rows the pull still moves (nonzero delta; full batch only)."""
    if keys is not None:
        b, units = net.sample_batch(keys)
        return b, units, np.zeros(0, dtype=np.int64)
    b, units = compact_batch(net.batch())
    n = net.n_active
    moved = np.flatnonzero(net.delta[:n].any(axis=1))
    held = np.zeros(n, dtype=bool)
    held[units] = True
    return b, units, moved[~held[moved]]


def run(net, steps: int, keys: list[int] | None, kernel: str) -> float:
    """``steps`` gradient steps (``UnitNet.refine``); returns the objective before the last."""
    c = net.config
    b, units, rest = problem(net, keys)
    lam, lr = net.l2(), c.refine_lr
    pull, pull_rest = net.unit_pull(units), net.unit_pull(rest)
    lp, lp_rest = lam * pull[:, None], lam * pull_rest[:, None]
    scaled_base = c.logit_scale * net.base[units]
    d, d_rest = net.delta[units], net.delta[rest]
    mask, bias = net.mask(), net.bias
    loss = 0.0
    for step in range(steps):
        dD = lp * d
        loss, db, gW = kernel_step(net, kernel, b, scaled_base + d, mask, dD)
        if step == steps - 1:  # the objective's regulariser, for the loss returned only
            loss += 0.5 * lam * (float((pull[:, None] * d * d).sum()) + float((pull_rest[:, None] * d_rest * d_rest).sum())
                                 + float(bias @ bias))
        d -= lr * dD
        d_rest -= lr * (lp_rest * d_rest)
        bias -= lr * (db + lam * bias)
        if gW is not None:
            net.att.dW -= c.attention_lr * gW
    net.delta[units], net.delta[rest] = d, d_rest
    net.refine_steps_done += steps
    return loss


def kernel_step(net, kernel: str, b, U: np.ndarray, mask: np.ndarray, dD: np.ndarray):
    """(loss without the pull on delta and b, d loss / d b without it, d loss / d dW or None)
    of one step, d loss / d U added into dD: the objective's kernel call."""
    c = net.config
    if net.att is None:
        loss, db = unit_kernels.BACKENDS[kernel](*b, U, net.bias, mask, dD)
        return loss, db, None
    dWv = net.att.dW
    gW = c.attention_l2 * dWv
    loss, db = attention.BACKENDS[kernel](b, U, net.bias, mask, net.att.W0 + dWv, dD, gW)
    return loss + 0.5 * c.attention_l2 * float(dWv @ dWv), db, gW


__all__ = ["run", "problem", "compact_batch"]
