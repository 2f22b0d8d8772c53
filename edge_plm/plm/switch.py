"""The switch network: two SAFFU blocks and an action output, warm-started explicitly and
refined online by gradient steps (DESIGN.md §2.2-§2.6).

Parameters are ``base + delta``: ``base`` is the explicit solution of the accumulated
co-occurrence statistics (re-solved cheaply whenever statistics grow), ``delta`` is what
gradient training adds on top (Adam). Starting "empty" means zero statistics and zero delta:
every explicit layer is then uniform, so the first prediction is (1/3, 1/3, 1/3).

Hidden targets used by the explicit solution, bottom-up (see docs/method.md):
  local W_h  — head h attends to relative position h (slot h): the concatenated context of
               the lecture's feed-forward warm start, reached through attention;
  local U    — the identity of the local n-gram (its hash bucket among ``local_hidden`` units),
               so local states are n-gram detectors. Needs no label: every transcript counts;
  global W_B — attend to positions whose local state carries evidence for the target action
               (t_k ∝ h_k · r_y + eps, r_y = balanced P(y | unit));
  global U_B — the action as a one-hot label embedding (three actions need no compression);
  O          — the one-hot action.
Class balance (config.class_balance): ON/OFF/NOOP are very unequal in a home (mostly NOOP),
so statistics of the labelled layers are divided by class counts when solved and the loss is
class-weighted; each action then matters equally (the product goal: do not miss ON/OFF).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge_plm.plm import kernels
from edge_plm.plm.bitcipher import bit_cipher
from edge_plm.plm.cache import ComparisonCache
from edge_plm.plm.config import PLMConfig
from edge_plm.plm.optim import Adam, clip_by_global_norm
from edge_plm.plm.saffu import branch_for
from edge_plm.plm.warmstart import CooccurrenceStats

N_ACTIONS = 3
PARAM_NAMES = ("W", "U", "W2", "U2", "O")
STAGES = PARAM_NAMES  # explicit solution order, bottom-up
LABELLED_STAGES = ("W2", "U2", "O")


@dataclass
class Batch:
    ids: np.ndarray  # (N, L) int64, padded with 0
    lengths: np.ndarray  # (N,) int64
    labels: np.ndarray | None = None  # (N,) int64 in 0..2 (ON, OFF, NOOP)

    @classmethod
    def from_sequences(cls, seqs: list[list[int]], labels: list[int] | None = None) -> "Batch":
        L = max(len(s) for s in seqs)
        ids = np.zeros((len(seqs), L), dtype=np.int64)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = s
        lengths = np.array([len(s) for s in seqs], dtype=np.int64)
        lab = None if labels is None else np.asarray(labels, dtype=np.int64)
        return cls(ids, lengths, lab)


def ngram_buckets(win: np.ndarray, valid: np.ndarray, n: int, buckets: int) -> np.ndarray:
    """Deterministic bucket of the n-gram ending at each position (slots 0..n-1)."""
    x = np.zeros(win.shape[:2], dtype=np.uint64)
    for k in range(n):
        tok = np.where(valid[:, :, k], win[:, :, k], 0).astype(np.uint64)
        x = (x * np.uint64(1000003)) ^ (tok + np.uint64(1))
    x ^= x >> np.uint64(17)
    x *= np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(29)
    return (x % np.uint64(buckets)).astype(np.int64)


class ClassStats:
    """Co-occurrence statistics kept per class, so they can be class-balanced when solved."""

    def __init__(self, n_in: int, n_out: int):
        self.per_class = [CooccurrenceStats(n_in, n_out) for _ in range(N_ACTIONS)]

    def add(self, H: np.ndarray, Y: np.ndarray, labels: np.ndarray) -> None:
        for y in range(N_ACTIONS):
            sel = labels == y
            if sel.any():
                self.per_class[y].add(H[sel], Y[sel])

    def combined(self, balance: bool, smoothing: float = 0.0) -> CooccurrenceStats:
        """Sum of the per-class statistics. With ``balance`` every class with data counts as
        one example: its F (plus ``smoothing`` per entry of its own target column, an
        additive prior in counts) is divided by its number of rows."""
        total = CooccurrenceStats(self.per_class[0].n_in, self.per_class[0].n_out)
        for y, s in enumerate(self.per_class):
            if s.rows == 0:
                continue
            if balance:
                F = s.F.copy()
                F[:, y] += smoothing
                part = CooccurrenceStats(s.n_in, s.n_out, F=F / s.rows, rows=1.0,
                                         norm_sum=s.norm_sum / s.rows, norm_sq_sum=s.norm_sq_sum / s.rows,
                                         norm_hist=s.norm_hist / s.rows)
                total.merge(part)
            else:
                total.merge(s)
        return total


class SwitchNet:
    def __init__(self, config: PLMConfig, vocab_size: int):
        c = config
        self.config = c
        self.E = bit_cipher(vocab_size, c.bits)
        self.cache = ComparisonCache()
        nb, Bmax = len(c.widths), max(c.widths)
        shapes = {
            "W": (c.heads, c.window, c.window),
            "U": (c.heads * c.bits, c.local_hidden),
            "W2": (nb, Bmax, Bmax),
            "U2": (nb, c.local_hidden, N_ACTIONS),
            "O": (N_ACTIONS, N_ACTIONS),
        }
        self.base = {k: np.zeros(s) for k, s in shapes.items()}
        self.delta = {k: np.zeros(s) for k, s in shapes.items()}
        self.w2_mask = np.zeros((nb, Bmax, Bmax))
        for i, B in enumerate(c.widths):
            self.w2_mask[i, :B, :B] = 1.0
        self.stats_W = [CooccurrenceStats(c.window, c.window) for _ in range(c.heads)]
        self.stats_U = CooccurrenceStats(c.heads * c.bits, c.local_hidden)
        self.stats_H = ClassStats(c.local_hidden, N_ACTIONS)
        self.stats_W2 = [CooccurrenceStats(B, B) for B in c.widths]
        self.stats_U2 = [ClassStats(c.local_hidden, N_ACTIONS) for _ in c.widths]
        self.stats_O = ClassStats(N_ACTIONS, N_ACTIONS)
        self.class_counts = np.zeros(N_ACTIONS)
        self.optimizer = Adam(c.lr)
        self.embeddings_frozen = True
        self.updates = 0
        self.solve()

    # -- parameters -----------------------------------------------------------------------

    @property
    def params(self) -> dict[str, np.ndarray]:
        return {k: self.base[k] + self.delta[k] for k in PARAM_NAMES}

    def grow_vocab(self, vocab_size: int) -> None:
        """Append codes for new tokens (old codes unchanged; the cache extends)."""
        if vocab_size > self.E.shape[0]:
            if self.embeddings_frozen:
                self.E = bit_cipher(vocab_size, self.config.bits)
            else:
                self.E = np.vstack([self.E, bit_cipher(vocab_size, self.config.bits)[self.E.shape[0]:]])

    def comparisons(self) -> np.ndarray:
        return self.cache.table(self.E)

    def _backend(self):
        return kernels.BACKENDS[self.config.kernel]

    # -- forward --------------------------------------------------------------------------

    def forward(self, batch: Batch, params: dict | None = None, local_only: bool = False):
        p = self.params if params is None else params
        lf, _, gf, _ = self._backend()
        ids = self._clip(batch)
        local = lf(ids.ids, ids.lengths, self.E, self.comparisons(), p["W"], p["U"])
        if local_only:
            return ids, local, None
        glob = gf(local.h, ids.lengths, self.config.widths, p["W2"], p["U2"], p["O"])
        return ids, local, glob

    def _clip(self, batch: Batch) -> Batch:
        """Keep the last max_len tokens of longer dialogues (the action sits at the end)."""
        M = self.config.max_len
        if batch.ids.shape[1] <= M:
            return batch
        ids = np.zeros((batch.ids.shape[0], M), dtype=np.int64)
        lengths = np.minimum(batch.lengths, M)
        for n in range(len(lengths)):
            L = int(batch.lengths[n])
            ids[n, : lengths[n]] = batch.ids[n, max(0, L - M) : L]
        return Batch(ids, lengths, batch.labels)

    def predict_proba(self, batch: Batch) -> np.ndarray:
        return self.forward(batch)[2].y

    # -- loss and gradients ---------------------------------------------------------------

    def sample_weights(self, labels: np.ndarray) -> np.ndarray:
        if not self.config.class_balance:
            return np.ones(len(labels))
        counts = np.maximum(self.class_counts, 1.0)
        return (counts.sum() / (N_ACTIONS * counts))[labels]

    def loss(self, batch: Batch, params: dict | None = None) -> float:
        y = self.forward(batch, params)[2].y
        w = self.sample_weights(batch.labels)
        nll = -np.log(y[np.arange(len(w)), batch.labels] + 1e-300)
        return float((w * nll).sum() / w.sum())

    def gradients(self, batch: Batch, params: dict | None = None, need_dE: bool = False):
        """(loss, grads) for the weighted mean cross-entropy of the action."""
        p = self.params if params is None else params
        _, lb, _, gb = self._backend()
        ids, local, glob = self.forward(batch, p)
        N = len(batch.labels)
        w = self.sample_weights(batch.labels)
        w = w / w.sum()
        onehot = np.zeros((N, N_ACTIONS))
        onehot[np.arange(N), batch.labels] = 1.0
        nll = -np.log(glob.y[np.arange(N), batch.labels] + 1e-300)
        dv = w[:, None] * (glob.y - onehot)
        dW2, dU2, dO, dh = gb(local.h.shape, ids.lengths, self.config.widths, p["W2"], p["U2"], p["O"], glob, dv)
        dW, dU, dE = lb(ids.ids, ids.lengths, self.E, self.comparisons(), p["W"], p["U"], local, dh, need_dE)
        grads = {"W": dW, "U": dU, "W2": dW2 * self.w2_mask, "U2": dU2, "O": dO}
        if need_dE:
            grads["E"] = dE
        return float((w * nll).sum()), grads

    # -- explicit warm start --------------------------------------------------------------

    def reset_labelled_stats(self) -> None:
        c = self.config
        self.stats_H = ClassStats(c.local_hidden, N_ACTIONS)
        self.stats_W2 = [CooccurrenceStats(B, B) for B in c.widths]
        self.stats_U2 = [ClassStats(c.local_hidden, N_ACTIONS) for _ in c.widths]
        self.stats_O = ClassStats(N_ACTIONS, N_ACTIONS)
        self.class_counts = np.zeros(N_ACTIONS)

    def refresh_labelled_stats(self, batch: Batch) -> None:
        """Recompute the statistics of the labelled layers from `batch` (all labelled examples)
        with the current lower layers: statistics gathered while the local block was younger
        are stale, and the explicit solution is only as good as its statistics."""
        self.reset_labelled_stats()
        self.observe(batch, stages=LABELLED_STAGES)

    def observe(self, batch: Batch, stages: tuple[str, ...] = STAGES) -> None:
        """Add a batch to the co-occurrence statistics, bottom-up: for each layer, run the
        network as it is now, add that layer's (inputs, hidden targets) and re-solve it, so
        the next layer's inputs come from the re-solved layers below. Unlabelled batches stop
        after the local block."""
        for stage in stages:
            if stage in LABELLED_STAGES and batch.labels is None:
                break
            ids, local, glob = self.forward(batch, local_only=stage not in LABELLED_STAGES)
            getattr(self, f"_observe_{stage}")(ids, local, glob)
            self.solve(stage)

    def _observe_W(self, ids: Batch, local, glob) -> None:
        c = self.config
        for hh in range(c.heads):
            sel = local.valid[:, :, hh]
            if sel.any():
                target = np.zeros((int(sel.sum()), c.window))
                target[:, hh] = 1.0  # head h reads relative position h
                self.stats_W[hh].add(local.c[sel], target)

    def _observe_U(self, ids: Batch, local, glob) -> None:
        c = self.config
        rows = local.valid[:, :, 0]
        buckets = ngram_buckets(local.win, local.valid, min(c.window, c.hidden_ngram), c.local_hidden)[rows]
        target = np.zeros((len(buckets), c.local_hidden))
        target[np.arange(len(buckets)), buckets] = 1.0
        self.stats_U.add(local.z[rows], target)

    def _observe_W2(self, ids: Batch, local, glob) -> None:
        c = self.config
        labels = ids.labels
        self.class_counts += np.bincount(labels, minlength=N_ACTIONS)
        # local states vs action (each dialogue counts once: states averaged over positions)
        mean_h = local.h.sum(axis=1) / ids.lengths[:, None]
        self.stats_H.add(mean_h, np.eye(N_ACTIONS)[labels], labels)
        evidence = self._unit_evidence()
        for bi, B in enumerate(c.widths):
            rows = np.flatnonzero(glob.branch == bi)
            if not len(rows):
                continue
            c2 = np.zeros((len(rows), B))
            target = np.zeros((len(rows), B))
            for r, n in enumerate(rows):
                Ln = int(ids.lengths[n])
                X2 = np.asarray(glob.X2[n])[:Ln]
                c2[r, :Ln] = np.asarray(glob.c2[n])[:Ln]
                target[r, :Ln] = X2 @ evidence[:, labels[n]] + c.eps
            self.stats_W2[bi].add(c2, target / target.sum(axis=1, keepdims=True))

    def _observe_U2(self, ids: Batch, local, glob) -> None:
        onehot = np.eye(N_ACTIONS)[ids.labels]
        for bi in range(len(self.config.widths)):
            rows = np.flatnonzero(glob.branch == bi)
            if len(rows):
                self.stats_U2[bi].add(glob.z2[rows], onehot[rows], ids.labels[rows])

    def _observe_O(self, ids: Batch, local, glob) -> None:
        self.stats_O.add(glob.g, np.eye(N_ACTIONS)[ids.labels], ids.labels)

    def _unit_evidence(self) -> np.ndarray:
        """r[j, y]: balanced share of class y in unit j's co-occurrence with actions."""
        F = self.stats_H.combined(self.config.class_balance).F
        mass = F.sum(axis=1, keepdims=True)
        return np.divide(F, mass, out=np.full_like(F, 1.0 / N_ACTIONS), where=mass > 0)

    def solve(self, stage: str | None = None) -> None:
        """Re-solve one explicit layer (or all, bottom-up) from its statistics (cheap: logs
        of small tables)."""
        c, bal, eps = self.config, self.config.class_balance, self.config.eps
        if stage in (None, "W"):
            for hh in range(c.heads):
                self.base["W"][hh] = self.stats_W[hh].solve(eps)
        if stage in (None, "U"):
            self.base["U"] = self.stats_U.solve(eps)
        for i, B in enumerate(c.widths):
            if stage in (None, "W2"):
                self.base["W2"][i, :B, :B] = self.stats_W2[i].solve(eps)
            if stage in (None, "U2"):
                self.base["U2"][i] = self.stats_U2[i].combined(bal, c.smoothing).solve(eps, seen_only=True)
        if stage in (None, "O"):
            self.base["O"] = self.stats_O.combined(bal, c.smoothing).solve(eps, seen_only=True)

    # -- online update --------------------------------------------------------------------

    def train_step(self, batch: Batch, lr: float | None = None) -> float:
        """One clipped Adam step on delta (and E when thawed). Returns the loss before the step."""
        need_dE = not self.embeddings_frozen
        loss, grads = self.gradients(batch, need_dE=need_dE)
        clip_by_global_norm(grads, self.config.clip)
        if lr is not None:
            self.optimizer.lr = lr
        if need_dE:
            holder = {"E": self.E}
            self.optimizer.step(holder, {"E": grads.pop("E")})
            np.maximum(holder["E"], 0.0, out=holder["E"])  # projection: codes stay non-negative
            self.E = holder["E"]
        self.optimizer.step(self.delta, grads)
        self.updates += 1
        return loss

    def thaw(self) -> None:
        self.embeddings_frozen = False

    def freeze(self) -> None:
        self.embeddings_frozen = True

    def width_of(self, length: int) -> int:
        return self.config.widths[branch_for(min(length, self.config.max_len), self.config.widths)]

    # -- state ----------------------------------------------------------------------------

    def _all_stats(self) -> dict[str, CooccurrenceStats]:
        named = {f"W.{i}": st for i, st in enumerate(self.stats_W)}
        named["U"] = self.stats_U
        named.update({f"H.{y}": st for y, st in enumerate(self.stats_H.per_class)})
        named.update({f"W2.{i}": st for i, st in enumerate(self.stats_W2)})
        for i, cs in enumerate(self.stats_U2):
            named.update({f"U2.{i}.{y}": st for y, st in enumerate(cs.per_class)})
        named.update({f"O.{y}": st for y, st in enumerate(self.stats_O.per_class)})
        return named

    def state_arrays(self) -> dict[str, np.ndarray]:
        arrays = {"E": self.E, "class_counts": self.class_counts}
        arrays.update({f"base.{k}": v for k, v in self.base.items()})
        arrays.update({f"delta.{k}": v for k, v in self.delta.items()})
        for name, st in self._all_stats().items():
            arrays[f"stats.{name}.F"] = st.F
            arrays[f"stats.{name}.norm_hist"] = st.norm_hist
            arrays[f"stats.{name}.moments"] = np.array([st.rows, st.norm_sum, st.norm_sq_sum])
        arrays.update({f"adam.m.{k}": v for k, v in self.optimizer.m.items()})
        arrays.update({f"adam.v.{k}": v for k, v in self.optimizer.v.items()})
        return arrays

    def counters(self) -> dict:
        return {"updates": self.updates, "adam_steps": self.optimizer.steps,
                "embeddings_frozen": self.embeddings_frozen}

    def load_state(self, arrays: dict[str, np.ndarray], counters: dict) -> None:
        def take(name: str, like: np.ndarray | None = None) -> np.ndarray:
            if name not in arrays:
                raise KeyError(f"checkpoint lacks array {name!r}")
            a = arrays[name]
            if like is not None and a.shape != like.shape:
                raise ValueError(f"checkpoint array {name!r} has shape {a.shape}, config needs {like.shape}")
            return np.array(a, dtype=np.float64)

        self.E = take("E")
        self.class_counts = take("class_counts", self.class_counts)
        for k in PARAM_NAMES:
            self.base[k] = take(f"base.{k}", self.base[k])
            self.delta[k] = take(f"delta.{k}", self.delta[k])
        for name, st in self._all_stats().items():
            st.F = take(f"stats.{name}.F", st.F)
            st.norm_hist = take(f"stats.{name}.norm_hist", st.norm_hist)
            st.rows, st.norm_sum, st.norm_sq_sum = (float(x) for x in take(f"stats.{name}.moments"))
        self.optimizer.m = {k[7:]: np.array(v) for k, v in arrays.items() if k.startswith("adam.m.")}
        self.optimizer.v = {k[7:]: np.array(v) for k, v in arrays.items() if k.startswith("adam.v.")}
        self.optimizer.steps = int(counters.get("adam_steps", 0))
        self.updates = int(counters.get("updates", 0))
        self.embeddings_frozen = bool(counters.get("embeddings_frozen", True))

