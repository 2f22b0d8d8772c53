"""Explicit warm start of a softmax layer from generalized co-occurrence (docs/design.md §2.3).

For non-negative inputs H (M x D) and non-negative targets Y (M x N):
    F   = H^T Y                                   (accumulated, one pass, shardable)
    K^  = mean_m |H_m|_1                          (priming number)
    P_ji = log(F_ji + eps) - ((K^ - 1)/K^) * log(sum_d F_di + eps)

``CooccurrenceStats`` accumulates F, the number of rows and the L1 norms' moments and
histogram, so new data adds to it and ``solve`` is cheap to call again. Negative inputs or
targets raise ``NegativeInputError``: the formula takes logarithms of sums of products, which
only mean co-occurrence strengths when everything is non-negative (never silently abs()).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


class NegativeInputError(ValueError):
    """Explicit solution asked for with negative features or targets."""


def check_nonnegative(name: str, A: np.ndarray) -> None:
    A = np.asarray(A)
    if not A.size:
        return
    lo = A.min()
    if not np.isfinite(lo) or not np.isfinite(A.max()):
        raise NegativeInputError(f"{name}: explicit warm start needs finite values; found NaN/inf")
    if lo < 0:
        frac = float((A < 0).mean())
        raise NegativeInputError(
            f"{name}: explicit warm start needs non-negative values; found minimum {A.min():.4g} "
            f"({frac:.2%} of entries negative). Feed softmax outputs or other non-negative features."
        )


def explicit_solution(F: np.ndarray, K: float, eps: float, seen_only: bool = False) -> np.ndarray:
    """P_ji = log(F_ji + eps) - ((K - 1)/K) log(sum_d F_di + eps).

    With ``seen_only`` a target column that never occurred (zero mass) keeps log(eps) and is
    not translated: the translation would otherwise lift a never-seen target to log(eps)/K,
    above every target that did occur (a label that was never given must not be predicted).
    """
    check_nonnegative("co-occurrence F", F)
    if K <= 0:
        raise NegativeInputError(f"priming number must be positive, got {K}")
    column_mass = F.sum(axis=0, keepdims=True)
    translation = ((K - 1.0) / K) * np.log(column_mass + eps)
    if seen_only:
        translation = np.where(column_mass > 0, translation, 0.0)
    return np.log(F + eps) - translation


NORM_BINS = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 8.0, 16.0, np.inf])


@dataclass
class CooccurrenceStats:
    """Sufficient statistics for one softmax layer's explicit solution."""

    n_in: int
    n_out: int
    F: np.ndarray = field(default=None)
    rows: float = 0.0
    norm_sum: float = 0.0
    norm_sq_sum: float = 0.0
    norm_hist: np.ndarray = field(default=None)

    def __post_init__(self) -> None:
        if self.F is None:
            self.F = np.zeros((self.n_in, self.n_out))
        if self.norm_hist is None:
            self.norm_hist = np.zeros(len(NORM_BINS) - 1)

    def add(self, H: np.ndarray, Y: np.ndarray, sign: float = 1.0) -> None:
        """Add rows (sign=+1) or take back rows added earlier (sign=-1, see ``remove``)."""
        H = np.atleast_2d(np.asarray(H, dtype=np.float64))
        Y = np.atleast_2d(np.asarray(Y, dtype=np.float64))
        if H.shape[0] != Y.shape[0] or H.shape[1] != self.n_in or Y.shape[1] != self.n_out:
            raise ValueError(f"shapes {H.shape} x {Y.shape} do not fit stats {self.n_in} x {self.n_out}")
        check_nonnegative("features H", H)
        check_nonnegative("targets Y", Y)
        self.F += sign * (H.T @ Y)
        norms = H.sum(axis=1)
        self.rows += sign * H.shape[0]
        self.norm_sum += sign * float(norms.sum())
        self.norm_sq_sum += sign * float((norms**2).sum())
        bins = np.searchsorted(NORM_BINS, norms, side="right") - 1
        self.norm_hist += sign * np.bincount(bins, minlength=len(NORM_BINS) - 1)[: len(NORM_BINS) - 1]
        if sign < 0:
            # Taking back exactly what was added leaves rounding residue of either sign
            # (|x| ~ 1e-16 of the sums); floor it at zero. Real negative inputs never get here:
            # they are rejected above.
            np.maximum(self.F, 0.0, out=self.F)
            self.rows = max(self.rows, 0.0)

    def remove(self, H: np.ndarray, Y: np.ndarray) -> None:
        """Take back rows that were added earlier (their features have since gone stale)."""
        self.add(H, Y, sign=-1.0)

    def merge(self, other: "CooccurrenceStats") -> None:
        """Add another shard's statistics (sums parallelise trivially)."""
        self.F += other.F
        self.rows += other.rows
        self.norm_sum += other.norm_sum
        self.norm_sq_sum += other.norm_sq_sum
        self.norm_hist += other.norm_hist

    @property
    def priming_number(self) -> float:
        return self.norm_sum / self.rows if self.rows else 1.0

    def norm_report(self) -> dict:
        """Distribution of |H_m|_1, not just its mean (docs/design.md §2.3)."""
        mean = self.priming_number
        var = self.norm_sq_sum / self.rows - mean**2 if self.rows else 0.0
        return {
            "rows": self.rows,
            "mean": mean,
            "std": float(np.sqrt(max(var, 0.0))),
            "histogram": {f"[{lo:g},{hi:g})": int(c) for lo, hi, c in zip(NORM_BINS[:-1], NORM_BINS[1:], self.norm_hist)},
        }

    def solve(self, eps: float, seen_only: bool = False) -> np.ndarray:
        return explicit_solution(self.F, max(self.priming_number, 1e-12), eps, seen_only)
