"""The refinement's full-batch objective over sparse unit features: a Numba kernel
(``switch/jit_kernels.py``, imported on first use) and its NumPy twin (parity: tests/switch/test_units.py).

Rows are CSR (``indptr``, ``indices``, ``values``: the L2-normalised unit weights of each
labelled example). For weights ``U`` (units x 3), ``bias`` (3,) and ``mask`` (3,: 0 for actions
with labels, a large negative number for actions never labelled), the logits are
s_n = sum_k values_k U[indices_k] + bias + mask, p_n = softmax(s_n), and with per-row weights
``sw`` (summing to 1) the loss is sum_n sw_n (-log p_n[y_n]). Both functions return that loss and
add d loss / d U into ``dU`` (rows of units not in the batch stay untouched) and return
d loss / d bias.
"""

from __future__ import annotations

import numpy as np


def batch_loss_grad_numpy(indptr, indices, values, labels, sw, U, bias, mask, dU):
    N = len(labels)
    rows = np.repeat(np.arange(N), np.diff(indptr))
    S = np.zeros((N, U.shape[1]))
    np.add.at(S, rows, values[:, None] * U[indices])
    S += bias + mask
    S -= S.max(axis=1, keepdims=True)
    P = np.exp(S)
    Z = P.sum(axis=1, keepdims=True)
    P /= Z
    loss = float(-(sw * (S[np.arange(N), labels] - np.log(Z[:, 0]))).sum())
    G = P.copy()
    G[np.arange(N), labels] -= 1.0
    G *= sw[:, None]
    np.add.at(dU, indices, values[:, None] * G[rows])
    return loss, G.sum(axis=0)


def batch_loss_grad_numba(indptr, indices, values, labels, sw, U, bias, mask, dU):
    from edge_plm.switch.jit_kernels import unit_loss_grad  # noqa: PLC0415 - Numba only when used

    loss, db = unit_loss_grad(indptr, indices, values, labels, sw, U, bias, mask, dU)
    return float(loss), db


# "segments": the NumPy twin has no loop over the examples already (unitnet.ONLINE_KERNEL)
BACKENDS = {"numba": batch_loss_grad_numba, "numpy": batch_loss_grad_numpy, "segments": batch_loss_grad_numpy}


def csr(ids: list[np.ndarray], values: list[np.ndarray], labels: np.ndarray, sw: np.ndarray) -> tuple:
    """(indptr, indices, values, labels, sample weights) of examples given as unit ids and
    their input values each: the CSR batch the kernels read."""
    indptr = np.concatenate([[0], np.cumsum([len(i) for i in ids], dtype=np.int64)]).astype(np.int64)
    indices = np.concatenate(ids).astype(np.int64) if ids else np.zeros(0, np.int64)
    vals = np.concatenate(values).astype(np.float64) if values else np.zeros(0)
    return indptr, indices, vals, labels, sw
