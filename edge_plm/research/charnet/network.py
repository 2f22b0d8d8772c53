"""The switch network: two SAFFU blocks and an action output, warm-started explicitly and
refined online by gradient steps (docs/design.md §2.2-§2.6).

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

from edge_plm.actions import N_ACTIONS
from edge_plm.research import kernels
from edge_plm.plm.bitcipher import bit_cipher
from edge_plm.plm.cache import ComparisonCache
from edge_plm.research.charnet.config import CharNetConfig as SwitchConfig
from edge_plm.research.optim import Adam, clip_by_global_norm
from edge_plm.research.saffu import branch_for, local_windows
from edge_plm.plm.warmstart import CooccurrenceStats

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

    def add(self, H: np.ndarray, Y: np.ndarray, labels: np.ndarray, sign: float = 1.0) -> None:
        for y in range(N_ACTIONS):
            sel = labels == y
            if sel.any():
                self.per_class[y].add(H[sel], Y[sel], sign)

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
    def __init__(self, config: SwitchConfig, vocab_size: int):
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
        self._effective: dict[str, np.ndarray] = {}
        self.delta = {k: np.zeros(s) for k, s in shapes.items()}
        self.w2_mask = np.zeros((nb, Bmax, Bmax))
        for i, B in enumerate(c.widths):
            self.w2_mask[i, :B, :B] = 1.0
        self.stats_W = [CooccurrenceStats(c.window, c.window) for _ in range(c.heads)]
        self.stats_U = CooccurrenceStats(c.heads * c.bits, c.local_hidden)
        self.reset_labelled_stats()
        self.optimizer = Adam(c.lr)
        self.embeddings_frozen = True
        self.updates = 0
        self.solve()

    # -- parameters -----------------------------------------------------------------------

    @property
    def params(self) -> dict[str, np.ndarray]:
        """Effective parameters base + delta, cached per name until base or delta change."""
        for k in PARAM_NAMES:
            if k not in self._effective:
                self._effective[k] = self.base[k] + self.delta[k]
        return dict(self._effective)

    def grow_vocab(self, vocab_size: int) -> None:
        """Append codes for new tokens (old codes unchanged; the cache extends)."""
        if vocab_size > self.E.shape[0]:
            self.E = np.vstack([self.E, bit_cipher(vocab_size, self.config.bits)[self.E.shape[0]:]])

    def comparisons(self) -> np.ndarray:
        return self.cache.table(self.E)

    def _backend(self):
        return kernels.BACKENDS[self.config.kernel]

    # -- forward --------------------------------------------------------------------------

    def forward(self, batch: Batch, params: dict | None = None, local_only: bool = False, ws=None):
        """``ws``: a ``kernels.Workspace`` whose buffers the caches may live in (only for
        callers that drop the caches before the next use of it, like ``gradients``)."""
        p = self.params if params is None else params
        lf, _, gf, _ = self._backend()
        ids = self._clip(batch)
        local = lf(ids.ids, ids.lengths, self.E, self.comparisons(), p["W"], p["U"], ws=ws)
        if local_only:
            return ids, local, None
        glob = gf(local.h, ids.lengths, self.config.widths, p["W2"], p["U2"], p["O"], ws=ws)
        return ids, local, glob

    def global_forward(self, ids: Batch, local):
        """The global block and output on an already computed local block."""
        p = self.params
        return self._backend()[2](local.h, ids.lengths, self.config.widths, p["W2"], p["U2"], p["O"])

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
        ws = getattr(self, "_ws", None)  # buffers reused across calls (the caches stay in here)
        if ws is None:
            ws = self._ws = kernels.Workspace()
        ids, local, glob = self.forward(batch, p, ws=ws)
        N = len(batch.labels)
        w = self.sample_weights(batch.labels)
        w = w / w.sum()
        onehot = np.zeros((N, N_ACTIONS))
        onehot[np.arange(N), batch.labels] = 1.0
        nll = -np.log(glob.y[np.arange(N), batch.labels] + 1e-300)
        dv = w[:, None] * (glob.y - onehot)
        dW2, dU2, dO, dh = gb(local.h.shape, ids.lengths, self.config.widths, p["W2"], p["U2"], p["O"], glob, dv, ws=ws)
        dW, dU, dE = lb(ids.ids, ids.lengths, self.E, self.comparisons(), p["W"], p["U"], local, dh, need_dE, ws=ws)
        if self.config.shared_u2:  # one U for every branch: its gradient lives in copy 0
            dU2[0] = dU2.sum(axis=0)
            dU2[1:] = 0.0
        grads = {"W": dW, "U": dU, "W2": dW2 * self.w2_mask, "U2": dU2, "O": dO}
        if need_dE:
            grads["E"] = dE
        return float((w * nll).sum()), grads

    # -- explicit warm start --------------------------------------------------------------

    def reset_labelled_stats(self) -> None:
        c = self.config
        self.stats_H = ClassStats(c.local_hidden, N_ACTIONS)
        self.stats_W2 = [CooccurrenceStats(B, B) for B in c.widths]
        n_u2 = 1 if c.shared_u2 else len(c.widths)
        self.stats_U2 = [ClassStats(c.local_hidden, N_ACTIONS) for _ in range(n_u2)]
        self.stats_O = ClassStats(N_ACTIONS, N_ACTIONS)
        self.class_counts = np.zeros(N_ACTIONS)
        self.contributions: dict = {}  # key -> {stage: what the example added}


    def observe(self, batch: Batch, keys: list | None = None) -> None:
        """Add a batch to the co-occurrence statistics, bottom-up: for each layer, run the
        network as it is now, add that layer's (inputs, hidden targets) and re-solve it, so
        the next layer's inputs come from the re-solved layers below. A labelled batch needs
        `keys` (one hashable id per row) under which its contributions are remembered."""
        self._observe_W(self._clip(batch))
        self.solve("W")
        ids, local, _ = self.forward(batch, local_only=True)
        self._observe_U(ids, local)
        self.solve("U")
        if batch.labels is not None:
            if keys is None or len(keys) != len(batch.labels):
                raise ValueError("a labelled batch needs one key per row")
            self.regather(batch, keys)

    def _observe_W(self, ids: Batch, sign: float = 1.0) -> None:
        """Inputs of W are the comparisons alone (no parameters): read them from the cache.
        ``sign`` -1 takes an earlier observation back (``unobserve``)."""
        c = self.config
        win, valid = local_windows(ids.ids, ids.lengths, c.window)
        comps = np.where(valid, self.comparisons()[win, ids.ids[:, :, None]], 0.0)
        for hh in range(c.heads):
            sel = valid[:, :, hh]
            if sel.any():
                target = np.zeros((int(sel.sum()), c.window))
                target[:, hh] = 1.0  # head h reads relative position h
                self.stats_W[hh].add(comps[sel], target, sign)

    def _observe_U(self, ids: Batch, local, sign: float = 1.0) -> None:
        c = self.config
        rows = local.valid[:, :, 0]
        buckets = ngram_buckets(local.win, local.valid, min(c.window, c.hidden_ngram), c.local_hidden)[rows]
        target = np.zeros((len(buckets), c.local_hidden))
        target[np.arange(len(buckets)), buckets] = 1.0
        self.stats_U.add(local.z[rows], target, sign)

    # Labelled stages. Each returns, per row, what it added, so that ``regather`` can take an
    # example's stale contribution back and add a fresh one (statistics are plain sums).

    def _observe_W2(self, ids: Batch, local, glob) -> list:
        c = self.config
        labels = ids.labels
        mean_h = local.h.sum(axis=1) / ids.lengths[:, None]  # each dialogue counts once
        self.stats_H.add(mean_h, np.eye(N_ACTIONS)[labels], labels)
        evidence = self._unit_evidence()
        rows = []
        for n in range(len(labels)):
            bi, Ln, B = int(glob.branch[n]), int(ids.lengths[n]), c.widths[int(glob.branch[n])]
            c2, target = np.zeros(B), np.zeros(B)
            c2[:Ln] = np.asarray(glob.c2[n])[:Ln]
            target[:Ln] = np.asarray(glob.X2[n])[:Ln] @ evidence[:, labels[n]] + c.eps
            rows.append((mean_h[n], bi, c2, target / target.sum()))
        for bi in np.unique(glob.branch):
            sel = np.flatnonzero(glob.branch == bi)
            self.stats_W2[bi].add(np.array([rows[i][2] for i in sel]), np.array([rows[i][3] for i in sel]))
        return rows

    def _observe_U2(self, ids: Batch, local, glob) -> list:
        onehot = np.eye(N_ACTIONS)[ids.labels]
        for bi in np.unique(glob.branch):
            sel = np.flatnonzero(glob.branch == bi)
            self.stats_U2[self._u2(bi)].add(glob.z2[sel], onehot[sel], ids.labels[sel])
        return [(int(glob.branch[n]), glob.z2[n].copy()) for n in range(len(ids.labels))]

    def _observe_O(self, ids: Batch, local, glob) -> list:
        self.stats_O.add(glob.g, np.eye(N_ACTIONS)[ids.labels], ids.labels)
        return [g.copy() for g in glob.g]

    def _forget(self, stage: str, labels: np.ndarray, rows: list) -> None:
        """Take back the contributions `rows` (as returned by ``_observe_<stage>``)."""
        onehot = np.eye(N_ACTIONS)[labels]
        if stage == "O":
            self.stats_O.add(np.array(rows), onehot, labels, sign=-1.0)
            return
        if stage == "W2":
            self.stats_H.add(np.array([r[0] for r in rows]), onehot, labels, sign=-1.0)
        branch = np.array([r[1] if stage == "W2" else r[0] for r in rows])
        for bi in np.unique(branch):
            sel = np.flatnonzero(branch == bi)
            if stage == "W2":
                self.stats_W2[bi].remove(np.array([rows[i][2] for i in sel]), np.array([rows[i][3] for i in sel]))
            else:
                self.stats_U2[self._u2(bi)].add(np.array([rows[i][1] for i in sel]), onehot[sel], labels[sel], sign=-1.0)

    def regather(self, batch: Batch, keys: list, old_labels: np.ndarray | None = None) -> None:
        """Refresh the labelled-layer statistics of the examples `keys` (rows of `batch`):
        take back what each contributed when it was last gathered, add what it contributes
        now, layer by layer. Examples never gathered are simply added.

        ``old_labels`` (one per row) are the labels the remembered contributions were added
        with, when they differ from ``batch.labels`` (a relabel): the per-class statistics must
        be taken back from the class they went into. ``class_counts`` moves with them."""
        old = batch.labels if old_labels is None else np.asarray(old_labels, dtype=np.int64)
        if len(old) != len(keys):
            raise ValueError("one old label per row is needed")
        # the local block does not depend on W_B, U_B or O: run it once for all three stages
        ids, local, _ = self.forward(batch, local_only=True)
        for stage in LABELLED_STAGES:
            known = [i for i, key in enumerate(keys) if stage in self.contributions.get(key, {})]
            if known:
                self._forget(stage, old[known], [self.contributions[keys[i]][stage] for i in known])
            if stage == "W2":
                for key, label, was in zip(keys, batch.labels, old):
                    if key not in self.contributions:
                        self.class_counts[label] += 1
                    elif was != label:
                        self.class_counts[was] -= 1
                        self.class_counts[label] += 1
            glob = self.global_forward(ids, local)
            rows = getattr(self, f"_observe_{stage}")(ids, local, glob)
            for key, row in zip(keys, rows):
                self.contributions.setdefault(key, {})[stage] = row
            self.solve(stage)

    def forget(self, keys: list, labels: np.ndarray) -> None:
        """Take back the labelled-layer contributions of the examples `keys` (``labels``: the
        labels they were gathered with), drop them from ``contributions`` and
        ``class_counts`` and re-solve the labelled layers. The statistics are plain sums, so
        this is exact: afterwards they are the sum of the other examples' contributions as
        last gathered. Keys never gathered are ignored."""
        labels = np.asarray(labels, dtype=np.int64)
        sel = [i for i, key in enumerate(keys) if key in self.contributions]
        if not sel:
            return
        for stage in LABELLED_STAGES:
            have = [i for i in sel if stage in self.contributions[keys[i]]]
            if have:
                self._forget(stage, labels[have], [self.contributions[keys[i]][stage] for i in have])
        for i in sel:
            del self.contributions[keys[i]]
            self.class_counts[labels[i]] = max(self.class_counts[labels[i]] - 1.0, 0.0)
        for stage in LABELLED_STAGES:
            self.solve(stage)

    def unobserve(self, batch: Batch) -> None:
        """Take an earlier ``observe`` of `batch` back from the local (unlabelled) statistics.

        W: its inputs are the comparisons of the token ids (read from the cache) and its
        targets the relative positions, so with frozen embeddings this is exact. U: the
        targets (n-gram buckets) and the input norms (|z|_1 = heads) are exact, so every
        bucket's mass, the row count and the priming number come back exactly; how the mass
        is spread over the input features is recomputed with the current W, not the W of
        the time it was added, so that part is approximate (residue is floored at zero).
        With thawed embeddings the comparisons have changed too and W is approximate."""
        ids, local, _ = self.forward(batch, local_only=True)  # the W this example helped make
        self._observe_U(ids, local, sign=-1.0)
        self._observe_W(ids, sign=-1.0)
        self.solve("W")
        self.solve("U")

    def _u2(self, branch: int) -> int:
        """Index of the U_B statistics used by a branch (all share one when shared_u2)."""
        return 0 if self.config.shared_u2 else int(branch)

    def _unit_evidence(self) -> np.ndarray:
        """r[j, y]: balanced share of class y in unit j's co-occurrence with actions."""
        F = self.stats_H.combined(self.config.class_balance).F
        mass = F.sum(axis=1, keepdims=True)
        return np.divide(F, mass, out=np.full_like(F, 1.0 / N_ACTIONS), where=mass > 0)

    def solve(self, stage: str | None = None) -> None:
        """Re-solve one explicit layer (or all, bottom-up) from its statistics (cheap: logs
        of small tables)."""
        c, bal, eps = self.config, self.config.class_balance, self.config.eps
        for k in (PARAM_NAMES if stage is None else (stage,)):
            self._effective.pop(k, None)
        if stage in (None, "W"):
            for hh in range(c.heads):
                self.base["W"][hh] = self.stats_W[hh].solve(eps)
        if stage in (None, "U"):
            self.base["U"] = self.stats_U.solve(eps, seen_only=True)
        for i, B in enumerate(c.widths):
            if stage in (None, "W2"):
                self.base["W2"][i, :B, :B] = self.stats_W2[i].solve(eps)
            if stage in (None, "U2"):
                self.base["U2"][i] = self.stats_U2[self._u2(i)].combined(bal, c.smoothing).solve(eps, seen_only=True)
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
        trainable = dict(self.delta)
        if need_dE:
            trainable["E"] = self.E
        self.optimizer.step(trainable, grads)  # one Adam step over everything trainable
        if need_dE:
            np.maximum(self.E, 0.0, out=self.E)  # projection: codes stay non-negative
        if self.config.shared_u2:
            self.delta["U2"][1:] = self.delta["U2"][0]
        self._effective.clear()
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
        arrays.update(self._contribution_arrays())
        arrays.update({f"adam.m.{k}": v for k, v in self.optimizer.m.items()})
        arrays.update({f"adam.v.{k}": v for k, v in self.optimizer.v.items()})
        return arrays

    def _contribution_arrays(self) -> dict[str, np.ndarray]:
        c, Bmax = self.config, max(self.config.widths)
        keys = sorted(self.contributions)
        n = len(keys)
        out = {"contrib.keys": np.array(keys, dtype=np.int64), "contrib.branch": np.zeros(n, dtype=np.int64),
               "contrib.mean_h": np.zeros((n, c.local_hidden)), "contrib.c2": np.zeros((n, Bmax)),
               "contrib.target": np.zeros((n, Bmax)), "contrib.z2": np.zeros((n, c.local_hidden)),
               "contrib.g": np.zeros((n, N_ACTIONS))}
        for i, key in enumerate(keys):
            mean_h, bi, c2, target = self.contributions[key]["W2"]
            out["contrib.branch"][i] = bi
            out["contrib.mean_h"][i] = mean_h
            out["contrib.c2"][i, : len(c2)] = c2
            out["contrib.target"][i, : len(target)] = target
            out["contrib.z2"][i] = self.contributions[key]["U2"][1]
            out["contrib.g"][i] = self.contributions[key]["O"]
        return out

    def _load_contributions(self, arrays: dict[str, np.ndarray]) -> None:
        self.contributions = {}
        for i, key in enumerate(arrays["contrib.keys"].tolist()):
            bi = int(arrays["contrib.branch"][i])
            B = self.config.widths[bi]
            self.contributions[key] = {
                "W2": (arrays["contrib.mean_h"][i].copy(), bi, arrays["contrib.c2"][i, :B].copy(),
                       arrays["contrib.target"][i, :B].copy()),
                "U2": (bi, arrays["contrib.z2"][i].copy()),
                "O": arrays["contrib.g"][i].copy(),
            }

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
        self._load_contributions(arrays)
        self._effective.clear()
        self.optimizer.m = {k[7:]: np.array(v) for k, v in arrays.items() if k.startswith("adam.m.")}
        self.optimizer.v = {k[7:]: np.array(v) for k, v in arrays.items() if k.startswith("adam.v.")}
        self.optimizer.steps = int(counters.get("adam_steps", 0))
        self.updates = int(counters.get("updates", 0))
        self.embeddings_frozen = bool(counters.get("embeddings_frozen", True))

