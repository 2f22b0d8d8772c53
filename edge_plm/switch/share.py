"""How much the owner's part counts in the mixture (``switch/owner.py``): a share chosen on the
owner's own labels, each predicted by both parts *before* it was learned (prequential).

A fixed back-off lam = n / (n + k) cannot know whether a household talks like the starting
data (then the starting part should stay in charge for hundreds of labels) or not (then the
owner's part should take over sooner). Each owner label, before it is learned, gives a row: the
two parts' distributions P_t (starting) and Q_t (owner's) and the label y_t. The share is the
point of the grid lam in {0, 0.05, ..., 1} that maximises

    sum_t w_t [argmax((1 - lam) P_t + lam Q_t) = y_t]  -  strength (lam - r)^2

over the newest ``window`` rows: the class-balanced count of labels the mixture would have got
right (w_t: each labelled action's rows weigh the same in all, the weights sum to the number of
rows), with r = n / (n + backoff), the back-off rule, as the prior (``strength`` in rows: that
many more right answers move the share a whole unit off the rule). Ties go to the point nearest
the rule. No rows yet (a new device, or a checkpoint written before the share was chosen): the
rule. Deterministic: a grid, no random numbers.

Why right answers and not the log-loss: on switch-dev the two disagree. The log-loss of the
rows is least at lam 0.5–0.8 (so is the test set's), but the test set's balanced accuracy peaks
at 0.3–0.4 and falls by .05 beyond 0.5, and so does the rows' (BENCHMARKS.md, "The owner's
share"). The owner's part hedges better and decides worse; the device acts on decisions.
Why strength 100: on switch-dev, where the rule's backoff was chosen, it keeps the curves within
.005 of the rule but for one budget (ASR at 50 labels, -.015); 10 and 30 lost up to .05 there.
On a household the starting model cannot read (Home Assistant's German sentences, from the
English shipped model) it takes balanced accuracy from .34 to .60 / .74 / .85 after 100 / 200 /
550 labels, where the rule stays at .33 / .34 / .66.
"""

from __future__ import annotations

import numpy as np

GRID = np.linspace(0.0, 1.0, 21)  # the shares tried


def backoff_rule(n_owner: int, backoff: float) -> float:
    """r = n / (n + backoff): the prior share after n of the owner's labels."""
    if backoff < 0:
        raise ValueError(f"owner_backoff must be >= 0, got {backoff}")
    if n_owner <= 0:
        return 0.0
    return n_owner / (n_owner + backoff) if backoff > 0 else 1.0


def balanced_weights(y: np.ndarray) -> np.ndarray:
    """w_t = n / (classes x rows of y_t's class): every labelled action weighs the same."""
    y = np.asarray(y, dtype=np.int64)
    if len(y) == 0:
        return np.zeros(0)
    counts = np.bincount(y)
    return len(y) / (np.count_nonzero(counts) * counts[y])


def right_answers(P: np.ndarray, Q: np.ndarray, y: np.ndarray, grid: np.ndarray = GRID) -> np.ndarray:
    """Per share of ``grid``: the class-balanced count of rows whose mixture's top action is
    the label."""
    w = balanced_weights(y)
    mix = (1.0 - grid)[:, None, None] * P[None] + grid[:, None, None] * Q[None]  # (grid, rows, actions)
    return ((mix.argmax(axis=2) == y[None]) * w[None]).sum(axis=1)


def choose_share(P: np.ndarray, Q: np.ndarray, y: np.ndarray, prior: float, strength: float,
                 grid: np.ndarray = GRID) -> float:
    """The lam of the module docstring for rows (P_t, Q_t, y_t) and prior share ``prior``."""
    if not 0.0 <= prior <= 1.0 or strength < 0:
        raise ValueError(f"share prior must be in [0, 1] and strength >= 0, got {prior}, {strength}")
    if len(y) == 0:
        return prior
    score = right_answers(P, Q, y, grid) - strength * (grid - prior) ** 2
    best = np.flatnonzero(score >= score.max() - 1e-9)
    return float(grid[best[np.argmin(np.abs(grid[best] - prior))]])


class OwnerShare:
    """The newest prequential rows (P_t, Q_t, y_t) and the share chosen on them."""

    def __init__(self, backoff: float = 1000.0, strength: float = 100.0, window: int = 400,
                 actions: int = 3) -> None:
        if backoff < 0 or strength < 0 or window <= 0:
            raise ValueError(f"owner share: backoff and strength must be >= 0 and window > 0, "
                             f"got {backoff}, {strength}, {window}")
        self.backoff, self.strength, self.window = float(backoff), float(strength), int(window)
        self.P = np.zeros((0, actions))  # the starting part's distribution of each row
        self.Q = np.zeros((0, actions))  # the owner's part's
        self.y = np.zeros(0, dtype=np.int64)  # the label's action index
        self.lam = 0.0

    def value(self, n_owner: int) -> float:
        """The share after n of the owner's labels: chosen once rows exist, else the rule."""
        if n_owner <= 0:
            return 0.0
        return self.lam if len(self.y) else backoff_rule(n_owner, self.backoff)

    def add(self, p_start: np.ndarray, p_owner: np.ndarray, y: int, n_owner: int) -> None:
        """One label's row (each part's distribution before it was learned, and the label);
        the oldest beyond ``window`` is dropped and the share chosen again. A row where the
        parts agree exactly (the owner's part has no labels of these actions yet) says nothing
        and is skipped."""
        p_start, p_owner = np.asarray(p_start, np.float64), np.asarray(p_owner, np.float64)
        if p_start.shape != (self.P.shape[1],) or p_owner.shape != p_start.shape:
            raise ValueError(f"share row: distributions of {self.P.shape[1]} actions expected")
        if not (np.isfinite(p_start).all() and np.isfinite(p_owner).all()):
            raise ValueError("share row: distributions must be finite")
        if not np.array_equal(p_start, p_owner):
            self.P = np.vstack([self.P, p_start])[-self.window:]
            self.Q = np.vstack([self.Q, p_owner])[-self.window:]
            self.y = np.append(self.y, int(y))[-self.window:]
        self.refit(n_owner)

    def refit(self, n_owner: int) -> None:
        """The share for n owner labels (after a label, a forget) from the rows kept."""
        self.lam = choose_share(self.P, self.Q, self.y, backoff_rule(n_owner, self.backoff), self.strength)

    def state(self) -> dict[str, np.ndarray]:
        return {"share.P": self.P, "share.Q": self.Q, "share.y": self.y, "share.lam": np.array([self.lam])}

    def load(self, arrays: dict[str, np.ndarray]) -> None:
        P, Q = np.asarray(arrays["share.P"], np.float64), np.asarray(arrays["share.Q"], np.float64)
        y = np.asarray(arrays["share.y"], np.int64)
        lam = float(np.asarray(arrays["share.lam"]).reshape(-1)[0])
        if P.shape != Q.shape or P.ndim != 2 or len(y) != len(P) or not 0.0 <= lam <= 1.0:
            raise ValueError("checkpoint owner-share arrays do not fit together")
        self.P, self.Q, self.y, self.lam = P, Q, y, lam


def share_for(config) -> OwnerShare:
    """A new share with the ``SwitchConfig``'s backoff, strength and window."""
    return OwnerShare(config.owner_backoff, config.owner_share_strength, config.owner_share_window)
