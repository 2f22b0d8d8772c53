"""How much the owner's part counts in the pooled prediction (``switch/owner.py``): a share
chosen on the owner's own labels, each predicted by both parts *before* it was learned
(prequential).

The two parts are pooled as a product (``pooled``): over the actions the owner has labelled,
p(a) is proportional to P(a) Q(a)^lam, where P is the starting part's distribution and Q the
owner's part's over those actions; the actions the owner has not labelled keep P's probability.
A fixed back-off lam = n / (n + k) cannot know whether a household talks like the starting
data (then the starting part should stay in charge for hundreds of labels) or not (then the
owner's part should take over sooner). Each owner label, before it is learned, gives a row: the
two parts' distributions P_t (starting) and Q_t (owner's) and the label y_t. The share stays on
the back-off rule r = n / (n + backoff) unless a point of the grid lam in {0, 0.15, ..., 3}
decides the newest ``window`` rows *significantly* better than r does, as a paired test:

    d_t(lam) = w_t ([argmax pool_lam(t) = y_t] - [argmax pool_r(t) = y_t]),
    lam is a candidate when  sum_t d_t(lam) > z sqrt(sum_t d_t(lam)^2)

(w_t: class-balanced weights, each labelled action's rows weigh the same in all, summing to the
number of rows; the rows where the two poolings decide alike give d = 0). The test runs only when
every action among the rows has at least ``min_rows`` of them (the config's
``owner_share_min_rows``): a few rows of one action can pass it while nothing shows what the
share costs an action with two rows, which the balanced comparison weighs as much
(docs/benchmarks-log.md, "A share chosen on one action's rows"). The share is the
candidate with the most right answers, ties to the one nearest r; none: r. No rows yet (a new
device, or a checkpoint written before the share was chosen): the rule. Deterministic: a grid,
no random numbers.

Why a product and not the mixture (1 - lam) P + lam Q (until 2026-12-03): a mixture pulls a
sure reading toward an unsure one. A household whose owner's part holds 9 ON labels among 283
NOOP ones reads "switch on the lights" ON .46 / NOOP .51 (its ON evidence is thin, not
contrary); mixed at .22 the starting part's ON .80 fell under the act threshold, and the
household acted right on fewer commands after its labels than before (28 against 31 of 43).
In the product an unsure part (Q(ON) close to Q(NOOP)) leaves the odds as they are and a sure
one moves them: the household acts right on 32 of 43 after its labels, and the first-week and
spoken sessions ask less (docs/benchmarks-log.md, "The owner's evidence multiplies the odds"). The grid
runs to 3 so that a household the starting part misreads can outweigh it.
Why right answers and not the log-loss: on switch-dev the two disagree (the owner's part hedges
better and decides worse; the device acts on decisions: docs/benchmarks-log.md, "The owner's share").
Why a test and not a penalty (lam - r)^2: a penalty weak enough to let a household the
starting model cannot read take over (Home Assistant's German sentences, from the English
shipped model) moved on a few lucky rows on switch-dev and lost up to .05 there.
"""

from __future__ import annotations

import numpy as np

GRID = np.linspace(0.0, 3.0, 21)  # the shares tried
POOLING = 1  # the checkpoint's mark of the product pooling's rows (``OwnerShare.load``)


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


def pooled(P: np.ndarray, Q: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """(shares, rows, actions): the pooled distributions of rows (P_t, Q_t) at each share. Q_t
    is the owner's part's distribution over the actions it has labels of, 0 at the others:
    those keep P_t's probability, and the labelled ones share out P_t's mass on them in
    proportion to P_t(a) Q_t(a)^lam (lam 0: P_t itself)."""
    P, Q = np.atleast_2d(np.asarray(P, np.float64)), np.atleast_2d(np.asarray(Q, np.float64))
    lam = np.asarray(shares, np.float64).reshape(-1, 1, 1)
    present = Q > 0
    with np.errstate(divide="ignore"):
        logs = np.log(P)[None] + lam * np.where(present, np.log(np.where(present, Q, 1.0)), 0.0)[None]
    logs = np.where(present[None], logs, -np.inf)
    top = logs.max(axis=2, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(logs - top)
    total = e.sum(axis=2, keepdims=True)
    mass = np.where(present, P, 0.0).sum(axis=1)[None, :, None]  # P's mass on the labelled actions
    share_out = np.divide(e, total, out=np.zeros_like(e), where=total > 0) * mass
    return np.where(present[None], share_out, P[None])


def right_per_row(P: np.ndarray, Q: np.ndarray, y: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """(shares, rows): 1.0 where the pooling at that share decides the row's label, else 0."""
    return (pooled(P, Q, shares).argmax(axis=2) == y[None]).astype(np.float64)


def choose_share(P: np.ndarray, Q: np.ndarray, y: np.ndarray, prior: float, z: float,
                 grid: np.ndarray = GRID, min_rows: int = 0) -> float:
    """The lam of the module docstring for rows (P_t, Q_t, y_t), the rule's share ``prior``
    and the test's threshold ``z``."""
    if not 0.0 <= prior <= 1.0 or z < 0:
        raise ValueError(f"share prior must be in [0, 1] and z >= 0, got {prior}, {z}")
    if len(y) == 0:
        return prior
    right = right_per_row(P, Q, y, np.append(grid, prior))
    return choose_on_right(right[:-1], right[-1], y, prior, z, grid, min_rows)


def choose_on_right(right: np.ndarray, right_prior: np.ndarray, y: np.ndarray, prior: float, z: float,
                    grid: np.ndarray = GRID, min_rows: int = 0) -> float:
    """``choose_share`` from the rows' right answers at each grid point (``right``, shares x
    rows) and at the rule's share (``right_prior``): a row's answers at the grid points never
    change, so ``OwnerShare`` keeps them and decides only the rule's share again per label."""
    counts = np.bincount(y)
    if len(y) == 0 or counts[counts > 0].min() < min_rows:
        return prior  # an action with fewer rows: the balanced comparison cannot see what it costs there
    d = (right - right_prior[None]) * balanced_weights(y)  # each grid point against the rule, per row
    gain = d.sum(axis=1)
    candidate = gain > z * np.sqrt((d * d).sum(axis=1)) + 1e-9
    if not candidate.any():
        return prior
    gain = np.where(candidate, gain, -np.inf)
    best = np.flatnonzero(gain >= gain.max() - 1e-9)
    return float(grid[best[np.argmin(np.abs(grid[best] - prior))]])


class OwnerShare:
    """The newest prequential rows (P_t, Q_t, y_t) and the share chosen on them."""

    def __init__(self, backoff: float = 1000.0, z: float = 2.0, window: int = 400,
                 actions: int = 3, min_rows: int = 0) -> None:
        if backoff < 0 or z < 0 or window <= 0 or min_rows < 0:
            raise ValueError(f"owner share: backoff, z and min_rows must be >= 0 and window > 0, "
                             f"got {backoff}, {z}, {min_rows}, {window}")
        self.backoff, self.z, self.window = float(backoff), float(z), int(window)
        self.min_rows = int(min_rows)
        self.P = np.zeros((0, actions))  # the starting part's distribution of each row
        self.Q = np.zeros((0, actions))  # the owner's part's
        self.y = np.zeros(0, dtype=np.int64)  # the label's action index
        self.right = np.zeros((len(GRID), 0))  # right_per_row at the grid (fixed per row: kept)
        self.lam = 0.0

    def value(self, n_owner: int) -> float:
        """The share after n of the owner's labels: chosen once rows exist, else the rule."""
        if n_owner <= 0:
            return 0.0
        return self.lam if len(self.y) else backoff_rule(n_owner, self.backoff)

    def add(self, p_start: np.ndarray, p_owner: np.ndarray, y: int, n_owner: int) -> None:
        """One label's row (each part's distribution before it was learned, and the label);
        the oldest beyond ``window`` is dropped and the share chosen again. A row where the
        owner's part has labels of fewer than two actions says nothing (the pooling is P at
        every share) and is skipped."""
        p_start, p_owner = np.asarray(p_start, np.float64), np.asarray(p_owner, np.float64)
        if p_start.shape != (self.P.shape[1],) or p_owner.shape != p_start.shape:
            raise ValueError(f"share row: distributions of {self.P.shape[1]} actions expected")
        if not (np.isfinite(p_start).all() and np.isfinite(p_owner).all()):
            raise ValueError("share row: distributions must be finite")
        if np.count_nonzero(p_owner > 0) >= 2:
            self.P = np.vstack([self.P, p_start])[-self.window:]
            self.Q = np.vstack([self.Q, p_owner])[-self.window:]
            self.y = np.append(self.y, int(y))[-self.window:]
            row = right_per_row(p_start[None], p_owner[None], self.y[-1:], GRID)
            self.right = np.hstack([self.right, row])[:, -self.window:]
        self.refit(n_owner)

    def refit(self, n_owner: int) -> None:
        """The share for n owner labels (after a label, a forget) from the rows kept
        (``choose_share``, on the kept right answers at the grid)."""
        prior = backoff_rule(n_owner, self.backoff)
        if len(self.y) == 0:
            self.lam = prior
            return
        at_prior = right_per_row(self.P, self.Q, self.y, np.array([prior]))[0]
        self.lam = choose_on_right(self.right, at_prior, self.y, prior, self.z, min_rows=self.min_rows)

    def state(self) -> dict[str, np.ndarray]:
        return {"share.P": self.P, "share.Q": self.Q, "share.y": self.y, "share.lam": np.array([self.lam]),
                "share.pooling": np.array([POOLING])}

    def load(self, arrays: dict[str, np.ndarray], n_owner: int) -> None:
        """The rows and share of a checkpoint. One written before the product pooling (no
        ``share.pooling``) holds rows of the old mixture's parts: they are dropped, and the
        share is the back-off rule for ``n_owner`` labels until new rows come."""
        P, Q = np.asarray(arrays["share.P"], np.float64), np.asarray(arrays["share.Q"], np.float64)
        y = np.asarray(arrays["share.y"], np.int64)
        lam = float(np.asarray(arrays["share.lam"]).reshape(-1)[0])
        if P.shape != Q.shape or P.ndim != 2 or len(y) != len(P) or not 0.0 <= lam <= GRID[-1]:
            raise ValueError("checkpoint owner-share arrays do not fit together")
        if int(np.asarray(arrays.get("share.pooling", [0])).reshape(-1)[0]) != POOLING:
            P, Q, y = P[:0], Q[:0], y[:0]  # the old mixture's rows: none kept
        self.P, self.Q, self.y, self.lam = P, Q, y, lam
        self.right = right_per_row(P, Q, y, GRID)
        if not len(y):
            self.refit(n_owner)


def share_for(config) -> OwnerShare:
    """A new share with the ``SwitchConfig``'s backoff, test threshold and window."""
    return OwnerShare(config.owner_backoff, config.owner_share_z, config.owner_share_window,
                      min_rows=config.owner_share_min_rows)
