"""The explicit solution of the action layer from its statistics (``UnitNet.solve``; the formula
is in switch/unitnet.py's module docstring), with NumPy's sums over a (units x actions) array
taken in the same order by faster routes: the column sums of the units run down each column one
unit after another (what ``A.sum(axis=0)`` does on a C-ordered array, here as the last of a
cumulative sum), the rows' means over the few actions add the columns left to right (what
``A.mean(axis=1)`` does over fewer than 8), and rows are gathered with ``np.take``. Bit for bit the
former expressions (tests/switch/test_solution.py)."""

from __future__ import annotations

import numpy as np

from edge_plm.plm.warmstart import check_nonnegative


def column_sums(A: np.ndarray) -> np.ndarray:
    """(1, k): each column's sum over the rows, in row order (``A.sum(axis=0, keepdims=True)``)."""
    return np.cumsum(np.ascontiguousarray(A.T), axis=1)[:, -1:].T


def row_means(A: np.ndarray) -> np.ndarray:
    """(n, 1): each row's mean over its k < 8 columns, added left to right (``A.mean(axis=1,
    keepdims=True)``)."""
    s = A[:, 0].copy()
    for j in range(1, A.shape[1]):
        s += A[:, j]
    return (s / A.shape[1])[:, None]


def smoothing(alpha: float, alpha_young: float, young_n: float, n: float) -> float:
    """The explicit solution's additive smoothing after ``n`` labelled examples: ``alpha_young``
    with none, falling toward ``alpha`` as young_n / (young_n + n) (``SwitchConfig.alpha_young``).
    The solution's class-balanced statistics are per-example rates of each unit, so the
    smoothing is a floor under the rates: a high one keeps a handful of labels from reading much
    into a unit seen once, and would hide the rare units that many labels make telling."""
    if alpha < 0 or alpha_young < 0 or young_n < 0 or n < 0:
        raise ValueError(f"smoothing needs alpha, alpha_young, young_n, n >= 0, got {alpha}, {alpha_young}, "
                         f"{young_n}, {n}")
    if young_n == 0:
        return alpha
    return alpha + (alpha_young - alpha) * young_n / (young_n + n)


def explicit_solution(F: np.ndarray, seen: np.ndarray, mass: np.ndarray, present: np.ndarray, alpha: float,
                      balance: bool) -> np.ndarray:
    """B of the ``seen`` units (rows of F, the per-action summed unit weights): log(F / mass
    + alpha) - log(sum over the seen units + alpha V) with class balance (mass = each action's
    summed example weights, at least 1), 0 for actions without a label, rows centred over the
    labelled actions."""
    Fs = np.take(F, seen, axis=0)
    Fb = Fs / np.maximum(mass, 1.0) if balance else Fs
    check_nonnegative("unit co-occurrence F", Fb)  # logs of counts: fail loudly otherwise
    B = np.log(Fb + alpha) - np.log(column_sums(Fb) + alpha * len(seen))
    if present.all():
        B -= row_means(B)
        return B
    B[:, ~present] = 0.0
    P = B[:, present]
    B[:, present] = P - row_means(P)
    return B


__all__ = ["explicit_solution", "column_sums", "row_means", "smoothing"]
