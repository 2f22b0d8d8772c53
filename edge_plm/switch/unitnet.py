"""The switch network over collision-free units: an explicit, class-balanced solution of the
action layer, refined by gradient steps pulled toward it (docs/method.md).

Local block: the state at a word's positions is the identity of the units (word-anchored
character n-grams and the word, ``switch/units.py``) ending there, read exactly from the unit vocabulary
(the target identity the local layer's explicit solution is fitted to, without the blur of
hashing thousands of n-grams into a few hundred soft detectors).
Global block: count-scaled pooling with uniform attention (the W_B = 0 member of the global SAFFU
layer), so the pooled state of a transcript is the bag of its units; it is L2-normalised,
x = w / |w|_2, and the action distribution is p = softmax(x U + b).

U = scale * B + delta:
  B      the explicit solution of the labelled statistics: per action y, F[:, y] = the summed unit
         weights (occurrences; a word counts ``word_weight``) of its examples divided by its number of examples (class balance: each action
         counts as one example), B[j, y] = log(F[j, y] + a) - log(sum_d F[d, y] + a V), over the
         V units that occur in labelled examples (a naive-Bayes log-likelihood; a = the smoothing
         after the n labelled examples: ``alpha_young`` at n = 0 falling toward ``alpha``,
         ``solution.smoothing``), rows centred over the actions; units never labelled have B = 0;
  delta  what refinement adds: gradient steps on the class-weighted cross-entropy of the
         labelled examples plus (l2 / 2) |delta|^2 + (l2 / 2) |b|^2, i.e. an L2 pull toward the
         explicit solution: full batch (``refine(steps)``), or after one label on its replay
         sample (``refine(steps, keys)``, ``switch/owner.py``: the pull on the sample's units).
         Deterministic: a seeded sample, a fixed number of steps.
Actions that have no label yet get a large negative logit (a label never given is never
predicted). The statistics are sums over the labelled examples, so adding, relabelling and
forgetting an example are exact.
"""

from __future__ import annotations

import numpy as np

from edge_plm.actions import N_ACTIONS
from edge_plm.switch import attention, batches, refine_loop, solution, unit_kernels
from edge_plm.switch.attention import SaffuBatch, WordAttention
from edge_plm.switch.config import SwitchConfig

#: the backend of the device's online refinement (after a label, a relabel, a forget:
#: ``switch/owner.py``, ``switch/scrub.py``): NumPy without a loop over the examples, so the
#: service never loads Numba and LLVM (switch/segment_kernels.py, docs/benchmarks-log.md "Fits a Pi 3");
#: ``config.kernel`` serves the desktop trainer's full-batch epochs (``refine(steps)``)
ONLINE_KERNEL = "segments"
ABSENT_LOGIT = -10.0


def l2_normalise(w: np.ndarray) -> np.ndarray:
    n = float(np.sqrt((w * w).sum()))
    return w / n if n > 0 else w


class UnitNet:
    def __init__(self, config: SwitchConfig, words=None):
        c = config
        self.config = c
        # the SAFFU block over word positions (switch/attention.py); None: uniform pooling
        self.att = WordAttention(c.attention_widths, c.attention_warm_scale, c.eps) if c.attention else None
        self.words = words  # WordVocab: the comparisons of word positions with the query words
        self.query_weights = np.zeros(0)  # the query q = sum_r query_weights[r] e_r
        # key -> (word ids, entry positions, entry unit index, entry weight share)
        self.placed: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        self.refresh_at = 0  # next earlier example whose attention statistics are re-gathered
        cap = c.unit_cap
        self.F = np.zeros((cap, N_ACTIONS))  # per action: summed weights of its examples' units
        self.df = np.zeros(cap)  # number of labelled examples holding each unit
        self.class_counts = np.zeros(N_ACTIONS)
        self.class_mass = np.zeros(N_ACTIONS)  # summed example weights per action
        self.ex_weight: dict[int, float] = {}
        self.base = np.zeros((cap, N_ACTIONS))
        self.delta = np.zeros((cap, N_ACTIONS))
        self.bias = np.zeros(N_ACTIONS)
        # key -> (ids, weights, label, L2-normalised weights)
        self.rows: dict[int, tuple[np.ndarray, np.ndarray, int, np.ndarray]] = {}
        self.refine_steps_done = 0
        # 1 + the largest unit id any labelled example ever held: rows at and beyond it have
        # F = df = B = delta = 0 and zero gradient, so the solve and refinement skip them
        self.n_active = 0
        self._batch = None  # CSR of the labelled rows, rebuilt when they change
        self._sample = None  # (keys, batch, units) of the last replay sample (``sample_batch``)
        self.struct: SaffuBatch | None = None  # the attention batch's structure, grown by new labels
        self.struct_keys: list[int] = []
        self.by_label: list[list[int]] = [[] for _ in range(N_ACTIONS)]  # keys of each action, ascending
        # a frozen net (the starting model's part, ``frozen_state``): its labelled examples are
        # not held, only what prediction reads; this many of them are behind the statistics
        self.frozen_rows = 0

    # -- statistics ------------------------------------------------------------------------

    def add(self, key: int, ids: np.ndarray, weights: np.ndarray, label: int, placed: tuple | None = None,
            weight: float = 1.0) -> None:
        """``placed`` = (word ids, entries) of ``UnitVocab.positioned``: needed with attention.
        ``weight``: how much the example counts (the owner's labels weigh more than a starting
        model's, ``SwitchModel.example_weight``), in the statistics and in the loss."""
        if not weight > 0:
            raise ValueError(f"example weight must be positive, got {weight}")
        if key in self.rows:
            raise ValueError(f"example {key} is already in the statistics")
        if weights.size and weights.min() <= 0:
            raise ValueError("unit weights must be positive")
        if self.att is not None:
            if placed is None:
                raise ValueError("the attention network needs each example's word positions")
            self.placed[key] = placed
        self.rows[key] = (ids, weights, int(label), l2_normalise(weights))
        self.by_label[int(label)].append(key)
        self.ex_weight[key] = float(weight)
        if ids.size:
            self.n_active = max(self.n_active, int(ids.max()) + 1)
        self._count(ids, weights, int(label), 1.0, float(weight))

    def remove(self, key: int) -> None:
        ids, w, label, _ = self.rows.pop(key)
        self.by_label[label].remove(key)
        self._count(ids, w, label, -1.0, self.ex_weight.pop(key))
        self.struct = None
        if self.att is not None:
            self.att.remove(key)
            self.placed.pop(key, None)

    def relabel(self, key: int, label: int) -> None:
        ids, w, old, x = self.rows[key]
        self._count(ids, w, old, -1.0, self.ex_weight[key])
        self.rows[key] = (ids, w, int(label), x)
        self.by_label[old].remove(key)
        self.by_label[int(label)].append(key)
        self.by_label[int(label)].sort()
        self._count(ids, w, int(label), 1.0, self.ex_weight[key])

    def _count(self, ids: np.ndarray, w: np.ndarray, label: int, sign: float, weight: float) -> None:
        """F gathers the unit weights (occurrences, words weighted) x the example's weight, as
        naive Bayes counts; class_mass the examples' weights per action."""
        self.F[ids, label] += sign * weight * w
        self.df[ids] += sign
        self.class_counts[label] += sign
        self.class_mass[label] += sign * weight
        if sign < 0:  # a take-back leaves rounding residue: floor it at zero
            self.F[ids, label] = np.maximum(self.F[ids, label], 0.0)
            self.F[ids[self.df[ids] <= 0.5], :] = 0.0
            np.maximum(self.df, 0.0, out=self.df)
            np.maximum(self.class_counts, 0.0, out=self.class_counts)
            np.maximum(self.class_mass, 0.0, out=self.class_mass)
        self._batch = self._sample = None

    def solve(self) -> None:
        """B from the statistics (cheap: a log over the labelled units; ``solution.py``)."""
        c = self.config
        n = self.n_active
        seen = np.flatnonzero(self.df[:n] > 0.5)
        self.base[:n] = 0.0
        present = self.class_counts > 0.5
        if not seen.size or not present.any():
            return
        alpha = solution.smoothing(c.alpha, c.alpha_young, c.young_n, float(self.class_counts.sum()))
        self.base[seen] = solution.explicit_solution(self.F, seen, self.class_mass, present, alpha, c.class_balance)

    # -- the attention's explicit warm start ------------------------------------------------

    def set_query(self, weights: np.ndarray) -> None:
        """The query's weights over the query words (their labelled evidence, >= 0)."""
        self.query_weights = np.asarray(weights, dtype=np.float64)
        self._batch = self._sample = None

    def warm(self, key: int) -> None:
        """Gather example ``key``'s attention statistics (``attention.gather``)."""
        attention.gather(self, key)

    def warm_refresh(self, key: int, refresh: int) -> None:
        """After learning ``key``: its statistics, ``refresh`` earlier ones', W0 re-solved."""
        attention.gather_after_label(self, key, refresh)

    def warm_all(self) -> None:
        """Re-gather every example's attention statistics and re-solve W0 (load, trainer)."""
        attention.gather_all(self)

    # -- prediction ------------------------------------------------------------------------

    def mask(self) -> np.ndarray:
        return np.where(self.class_counts > 0.5, 0.0, ABSENT_LOGIT)

    def idf(self, ids: np.ndarray) -> np.ndarray:
        """ln((1 + N) / (1 + df)) + 1 of each unit over the N labelled examples, raised to
        ``idf_power`` (all ones when it is 0)."""
        p = self.config.idf_power
        if not p:
            return np.ones(len(ids))
        return (np.log((1.0 + len(self.rows) + self.frozen_rows) / (1.0 + self.df[ids])) + 1.0) ** p

    def inputs(self, ids: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """x: the L2-normalised unit weights (times their idf when ``idf_power`` > 0)."""
        return l2_normalise(weights * self.idf(ids)) if self.config.idf_power else l2_normalise(weights)

    def pooled(self, ids: np.ndarray, weights: np.ndarray, placed: tuple | None) -> np.ndarray:
        """x: the attention-pooled, L2-normalised unit weights (times their idf when
        ``idf_power`` > 0); without attention, ``inputs``."""
        if self.att is None or placed is None:
            return self.inputs(ids, weights)
        word_ids, ent_pos, ent_m, ent_v = placed
        K = len(word_ids)
        if K == 0 or not len(ids):
            return np.zeros(len(ids))
        a = self.att.attend(self.comparisons(word_ids))
        z = np.zeros(len(ids))
        np.add.at(z, ent_m, K * a[ent_pos] * ent_v)
        return l2_normalise(z * self.idf(ids)) if self.config.idf_power else l2_normalise(z)

    def comparisons(self, word_ids: np.ndarray) -> np.ndarray:
        """c of each word position: its comparison with the query (the cached block of C)."""
        return self.words.comparisons(word_ids, self.query_weights)

    def logits(self, ids: np.ndarray, weights: np.ndarray, placed: tuple | None = None) -> np.ndarray:
        x = self.pooled(ids, weights, placed)
        U = self.config.logit_scale * self.base[ids] + self.delta[ids]
        return x @ U + self.bias + self.mask()

    def support(self, ids: np.ndarray, weights: np.ndarray, unknown: float, long: np.ndarray | None = None,
                also: "UnitNet | None" = None) -> float:
        """Share of the transcript's support-counting unit weight (``long``: words and longer
        n-grams; ``unknown``: that weight of units without an id) whose units occur in
        labelled examples (of this net or of ``also``)."""
        w = weights if long is None else weights * long
        total = float(w.sum()) + unknown
        if total <= 0:
            return 0.0
        seen = self.df[ids] > 0.5
        if also is not None:
            seen |= also.df[ids] > 0.5
        return float(w[seen].sum()) / total

    # -- refinement ------------------------------------------------------------------------

    def batch(self):
        """Every labelled example for the kernels: without attention the CSR (indptr, indices,
        values, labels, sample weights) of their normalised unit weights; with attention a
        ``SaffuBatch`` (the comparisons read with the current query). Kept until they change."""
        if self._batch is None:
            self._batch = batches.make_batch(self, sorted(self.rows), True)
        return self._batch

    def sample_batch(self, keys: list[int]) -> tuple[object, np.ndarray]:
        """(batch, units) of the examples ``keys`` (a replay sample): the batch as ``batch``'s,
        its unit indices renumbered 0.. over ``units``, the sorted unit ids it holds, so that
        the kernels read and write only those rows of U (its cost is the sample's size, not
        the history's). Kept until the examples or the query change."""
        tag = tuple(keys)
        if self._sample is None or self._sample[0] != tag:
            b = batches.make_batch(self, sorted(keys), False)
            indices = b.indices if self.att is not None else b[1]
            units, local = batches.renumber(indices)
            if self.att is not None:
                b.indices = local.astype(np.int64)
            else:
                b = (b[0], local.astype(np.int64), *b[2:])
            self._sample = (tag, b, units)
        return self._sample[1], self._sample[2]

    def sample_weights(self, labels: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """Class-balanced weights (each action's examples weigh 1/3 in all; within an action in
        proportion to the examples' own weights), summing to 1."""
        if not len(labels):
            return np.zeros(0)
        ew = np.ones(len(labels)) if weights is None else np.asarray(weights, dtype=np.float64)
        mass = np.bincount(labels, weights=ew, minlength=N_ACTIONS).astype(np.float64)
        w = ew / np.maximum(mass, 1e-12)[labels] if self.config.class_balance else ew
        return w / w.sum()

    def objective(self, delta: np.ndarray | None = None, bias: np.ndarray | None = None,
                  kernel: str | None = None, dW: np.ndarray | None = None, keys: list[int] | None = None
                  ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray | None]:
        """(loss, d loss / d delta[rows], d loss / d bias, d loss / d dW or None) of the
        refinement objective. ``keys`` None: every example, rows = :n_active (the gradient of
        the rows beyond is l2 * delta there, which is zero). ``keys``: the objective of those
        examples (a replay sample), with the pull toward the explicit solution on the units
        they hold, rows = ``sample_batch(keys)[1]`` (a sparse step: units the sample does not
        hold are not pulled by it). dW is the attention's refinement, pulled toward its warm start."""
        c = self.config
        b, rows = (self.batch(), slice(0, self.n_active)) if keys is None else self.sample_batch(keys)
        delta = (self.delta if delta is None else delta)[rows]
        bias = self.bias if bias is None else bias
        U = c.logit_scale * self.base[rows] + delta
        lam = self.l2()
        pull = self.unit_pull(rows)
        dD = lam * pull[:, None] * delta
        gW = None
        if self.att is not None:
            dWv = self.att.dW if dW is None else dW
            gW = c.attention_l2 * dWv
            fn = attention.BACKENDS[kernel or c.kernel]
            loss, db = fn(b, U, bias, self.mask(), self.att.W0 + dWv, dD, gW)
            loss += 0.5 * c.attention_l2 * float(dWv @ dWv)
        else:
            fn = unit_kernels.BACKENDS[kernel or c.kernel]
            loss, db = fn(*b, U, bias, self.mask(), dD)
        loss += 0.5 * lam * (float((pull[:, None] * delta * delta).sum()) + float(bias @ bias))
        return loss, dD, db + lam * bias, gW

    def unit_pull(self, rows) -> np.ndarray:
        """Per unit of ``rows`` (n: the first n units; a slice or unit ids), the factor of the pull toward the explicit
        solution: df^-l2_df_power over the labelled examples holding it (df at least 1; all
        ones when the power is 0)."""
        df = self.df[:rows] if isinstance(rows, int) else self.df[rows]
        q = self.config.l2_df_power
        return np.maximum(df, 1.0) ** -q if q else np.ones(len(df))

    def l2(self) -> float:
        """The pull toward the explicit solution: ``l2``, divided by n / l2_n0 once there are
        more than l2_n0 labelled examples (the loss is a weighted mean, so this keeps the
        pull's weight against the summed evidence constant beyond l2_n0, as in a sum-loss
        regulariser; 0 = no decay)."""
        c = self.config
        n = len(self.rows)
        l2 = c.replay_l2 if c.replay_l2 > 0 and c.refines_on_sample(n) else c.l2
        return l2 * min(1.0, c.l2_n0 / n) if c.l2_n0 > 0 and n > 0 else l2

    def refine(self, steps: int, keys: list[int] | None = None, kernel: str | None = None) -> float | None:
        """``steps`` gradient steps (learning rate ``refine_lr``) on delta and b over the
        examples ``keys`` (None: full batch, every example), with the objective's backend
        ``kernel`` (None: ``config.kernel``); the loop is ``refine_loop.run`` (the steps of
        ``objective``, its per-call reads taken once). Returns the objective before the last
        step (None when there is nothing to fit)."""
        if steps < 0:
            raise ValueError(f"steps must be >= 0, got {steps}")
        if len(self.rows) == 0 or steps == 0:
            return None
        return refine_loop.run(self, steps, keys, kernel or self.config.kernel)

    # -- state -----------------------------------------------------------------------------

    def state_arrays(self) -> dict[str, np.ndarray]:
        """delta's active rows only (the rest are zero), so a checkpoint grows with the units
        labelled, not with the cap."""
        out = {"units.delta": self.delta[: self.n_active], "units.bias": self.bias}
        if self.att is not None:
            out.update(self.att.state_arrays())
        return out
