"""The confidence of the switch: a calibration map fitted on held-out predictions
(docs/method.md, "Calibrated confidence").

A confidence means "the probability that the action is right on wording the device has not
heard". The map is top-label Platt scaling with two more features:

    confidence = sigmoid(theta . f),   f = (margin, support, [top is NOOP], 1)

margin   the network's logit gap between its top action and the runner-up (labelled actions);
support  the share of the transcript's word and longer n-gram weight whose units occur in
         labelled examples (``UnitNet.support``): made-up words have support 0;
NOOP     whether the top action is NOOP: a household's chatter is NOOP far more often than a
         command is right, so the two are calibrated apart.

Held-out rows: every labelled interaction is predicted *before* it is learned (prequential), so
each gives one (features, right?) row on wording the model had not learned; the newest
``window`` rows are kept. A starting model is fitted on its validation file, and its theta is
the prior the device's own rows pull away from: theta = argmin of the mean log-loss over the
rows + (strength / n_rows) |theta - prior|^2 / 2, i.e. the prior counts as ``strength`` rows.
The fit is Newton's method on a convex objective: deterministic, no random numbers.
"""

from __future__ import annotations

import math

import numpy as np

N_FEATURES = 4
# The prior of a model started empty (no validation file): the map fitted on 5,031 held-out rows
# of young models replayed from empty over models/data/switch-dev-train.jsonl and its three ASR
# versions (`python3 benchmarks/young_calibration.py`, docs/benchmarks-log.md "A young model's
# confidence"; refitted for the young smoothing, ``SwitchConfig.alpha_young``, and for word pairs,
# ``SwitchConfig.bigram_weight``, and for the firmer pull, ``SwitchConfig.replay_l2``: docs/benchmarks-log.md
# "Word pairs for a device that starts empty", "A firmer pull once a label refines on a sample").
# An ON / OFF prediction with margin 4 at support .7 reads .75, where the first guess
# sigmoid(margin - 1) read .95 and acted wrongly on 16 % of its actions.
DEFAULT_THETA = np.array([0.642, 1.471, 3.872, -2.502])


def features(margin: float, support: float, top_is_noop: bool) -> np.ndarray:
    if not (math.isfinite(margin) and margin >= 0 and 0.0 <= support <= 1.0):
        raise ValueError(f"calibration features out of range: margin {margin}, support {support}")
    return np.array([margin, support, 1.0 if top_is_noop else 0.0, 1.0])


def sigmoid(t: np.ndarray | float):
    return 1.0 / (1.0 + np.exp(-np.clip(t, -50.0, 50.0)))


class Calibrator:
    """theta, its prior, and the newest held-out rows (features, right?)."""

    def __init__(self, prior: np.ndarray | None = None, strength: float = 30.0, window: int = 400,
                 name: str = "calibration"):
        self.name = name  # the prefix of its arrays in a checkpoint
        if strength <= 0 or window <= 0:
            raise ValueError(f"calibration strength and window must be positive, got {strength}, {window}")
        self.prior = np.array(DEFAULT_THETA if prior is None else prior, dtype=np.float64)
        if self.prior.shape != (N_FEATURES,) or not np.isfinite(self.prior).all():
            raise ValueError(f"calibration prior must be {N_FEATURES} finite numbers, got {self.prior}")
        self.strength, self.window = float(strength), int(window)
        self.theta = self.prior.copy()
        self.X = np.zeros((0, N_FEATURES))
        self.y = np.zeros(0)

    def confidence(self, f: np.ndarray) -> float:
        return float(sigmoid(f @ self.theta))

    def add(self, f: np.ndarray, right: bool) -> None:
        """One held-out row; the oldest beyond ``window`` is dropped; theta is refitted."""
        self.X = np.vstack([self.X, f])[-self.window:]
        self.y = np.append(self.y, 1.0 if right else 0.0)[-self.window:]
        self.fit(start=self.theta)

    def fit(self, X: np.ndarray | None = None, y: np.ndarray | None = None,
            start: np.ndarray | None = None) -> np.ndarray:
        """MAP logistic regression of right? on the features (the rows kept, or X, y), by
        Newton's method from ``start`` (default the prior; the objective is strictly convex, so
        the minimum does not depend on it beyond the 1e-10 stopping tolerance)."""
        X = self.X if X is None else np.asarray(X, dtype=np.float64)
        y = self.y if y is None else np.asarray(y, dtype=np.float64)
        n = len(y)
        theta = (self.prior if start is None else start).copy()
        if n == 0:
            self.theta = self.prior.copy()
            return self.theta
        lam = self.strength / n
        for _ in range(50):
            p = sigmoid(X @ theta)
            grad = X.T @ (p - y) / n + lam * (theta - self.prior)
            H = (X * (p * (1 - p))[:, None]).T @ X / n + lam * np.eye(N_FEATURES)
            step = np.linalg.solve(H, grad)
            theta = theta - step
            if float(np.abs(step).max()) < 1e-10:
                break
        if not np.isfinite(theta).all():
            raise FloatingPointError("calibration fit diverged")
        self.theta = theta
        return theta

    def state(self) -> dict[str, np.ndarray]:
        n = self.name
        return {f"{n}.prior": self.prior, f"{n}.theta": self.theta, f"{n}.X": self.X, f"{n}.y": self.y}

    def stored_in(self, arrays) -> bool:
        return f"{self.name}.theta" in arrays

    def load(self, arrays: dict[str, np.ndarray]) -> None:
        n = self.name
        self.prior = np.array(arrays[f"{n}.prior"], dtype=np.float64)
        self.theta = np.array(arrays[f"{n}.theta"], dtype=np.float64)
        self.X = np.array(arrays[f"{n}.X"], dtype=np.float64).reshape(-1, N_FEATURES)
        self.y = np.array(arrays[f"{n}.y"], dtype=np.float64)
        if self.prior.shape != (N_FEATURES,) or self.theta.shape != (N_FEATURES,) or len(self.X) != len(self.y):
            raise ValueError("checkpoint calibration arrays do not fit together")


def expected_calibration_error(confidence: np.ndarray, right: np.ndarray, bins: int = 10) -> float:
    """ECE: 10 equal-width bins of the confidence; sum over bins of the bin's share of the
    predictions x |accuracy in the bin - mean confidence in it| (the first bin includes 0)."""
    confidence = np.asarray(confidence, dtype=np.float64)
    right = np.asarray(right, dtype=np.float64)
    if not len(confidence):
        return 0.0
    idx = np.clip(np.ceil(confidence * bins).astype(int) - 1, 0, bins - 1)
    total = 0.0
    for b in range(bins):
        sel = idx == b
        if sel.any():
            total += sel.mean() * abs(right[sel].mean() - confidence[sel].mean())
    return float(total)
