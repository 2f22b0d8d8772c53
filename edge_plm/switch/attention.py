"""The SAFFU block of the switch: attention over the transcript's word positions, and the
objective of the network through it (backends: the Numba kernel of ``switch/jit_kernels.py``,
imported on first use, for the full batch; the vectorised NumPy kernel of
``switch/segment_kernels.py`` for a replay sample; the per-example NumPy reference below;
parity and finite-difference tests in tests/switch/test_attention.py). docs/method.md, "Word
attention".

For a transcript of K words with unit bags V_k (each word's units, ``UnitVocab.positioned``):

    c   = X q                       comparisons of the K word codes with the query (read from
                                    the cached block of C = E E^T, ``WordVocab.comparisons``)
    a   = softmax(c W_B + mask)     W_B in R^{B x B}: the branch of the smallest width B >= K
    z   = K * sum_k a_k V_k         count-scaled pooling of the word bags
    x   = z / |z|_2
    p   = softmax(x U + b + m)      U = scale * B_units + delta (``unitnet.py``)

W = 0 gives a = 1/K and z = the transcript's bag of units: the network without attention.
W_B = W0_B + dW_B: W0 is the explicit warm start (hidden targets: attend to the positions whose
units carry evidence for the label, ``position_targets``), dW what the refinement adds, pulled
toward W0 like delta toward the explicit unit solution. Transcripts longer than the widest
branch are pooled uniformly (W = 0).
"""

from __future__ import annotations

import math

import numpy as np

from edge_plm.actions import N_ACTIONS
from edge_plm.plm.warmstart import CooccurrenceStats, check_nonnegative

TARGET_EPS = 0.05  # share of a position's target that every position gets (no position is ruled out)


def branch_index(K: int, widths: tuple[int, ...]) -> int:
    """Index of the smallest width >= K, -1 when K is 0 or longer than every branch."""
    if K <= 0:
        return -1
    for i, w in enumerate(widths):
        if K <= w:
            return i
    return -1


def softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max())
    return e / e.sum()


class WordAttention:
    """W per context-length branch: its explicit warm start, its refinement and the pooling."""

    def __init__(self, widths: tuple[int, ...], warm_scale: float, eps: float):
        self.widths = tuple(int(w) for w in widths)
        self.offsets = np.concatenate([[0], np.cumsum([w * w for w in self.widths])]).astype(np.int64)
        self.warm_scale = float(warm_scale)
        self.eps = float(eps)
        self.W0 = np.zeros(int(self.offsets[-1]))  # explicit solution, every branch flattened
        self.dW = np.zeros_like(self.W0)  # what refinement adds
        self.stats = [CooccurrenceStats(w, w) for w in self.widths]
        self.contrib: dict[int, tuple[int, np.ndarray, np.ndarray]] = {}  # key -> (branch, c, t)

    @property
    def size(self) -> int:
        return len(self.W0)

    def W(self, branch: int) -> np.ndarray:
        b = self.widths[branch]
        lo = self.offsets[branch]
        return (self.W0[lo:lo + b * b] + self.dW[lo:lo + b * b]).reshape(b, b)

    def attend(self, c: np.ndarray) -> np.ndarray:
        """a over the K positions for comparisons c (uniform without a branch)."""
        K = len(c)
        i = branch_index(K, self.widths)
        if i < 0:
            return np.full(K, 1.0 / max(K, 1))
        return softmax(c @ self.W(i)[:K, :K])

    # -- explicit warm start ---------------------------------------------------------------

    def add(self, key: int, c: np.ndarray, t: np.ndarray) -> None:
        """One labelled example's comparisons c (K) and position targets t (K) join the
        statistics of its branch (none beyond the widest branch or without a query word)."""
        self.remove(key)
        i = branch_index(len(c), self.widths)
        if i < 0 or not c.any():
            return
        B = self.widths[i]
        cp, tp = np.zeros(B), np.zeros(B)
        cp[:len(c)], tp[:len(t)] = c, t
        self.stats[i].add(cp, tp)
        self.contrib[key] = (i, cp, tp)

    def remove(self, key: int) -> None:
        if key in self.contrib:
            i, cp, tp = self.contrib.pop(key)
            self.stats[i].remove(cp, tp)

    def solve(self) -> None:
        """W0 per branch = warm_scale x the explicit solution of its statistics; rows of
        comparison slots never seen are 0 (they would only shift every logit alike)."""
        for i, (B, st) in enumerate(zip(self.widths, self.stats)):
            lo = self.offsets[i]
            if st.rows < 0.5:
                self.W0[lo:lo + B * B] = 0.0
                continue
            P = st.solve(self.eps, seen_only=True)
            seen = st.F.sum(axis=1) > 0
            P[~seen] = 0.0
            P[seen] -= P[seen].mean(axis=1, keepdims=True)
            self.W0[lo:lo + B * B] = self.warm_scale * P.ravel()

    def state_arrays(self) -> dict[str, np.ndarray]:
        """dW, the statistics and every example's contribution (exact: learning continues after
        a load as it would have without one; W0 is the solution of the statistics)."""
        keys = sorted(self.contrib)
        return {
            "attention.dW": self.dW,
            "attention.F": np.concatenate([st.F.ravel() for st in self.stats]),
            "attention.sums": np.array([[st.rows, st.norm_sum, st.norm_sq_sum] for st in self.stats]),
            "attention.hist": np.stack([st.norm_hist for st in self.stats]),
            "attention.keys": np.array(keys, dtype=np.int64),
            "attention.branch": np.array([self.contrib[k][0] for k in keys], dtype=np.int64),
            "attention.c": _cat([self.contrib[k][1] for k in keys], np.float64),
            "attention.t": _cat([self.contrib[k][2] for k in keys], np.float64),
        }

    def load_state(self, arrays: dict[str, np.ndarray]) -> None:
        dW = arrays["attention.dW"]
        if dW.shape != (self.size,) or arrays["attention.F"].shape != (self.size,):
            raise ValueError(f"checkpoint attention arrays have shape {dW.shape}, config needs ({self.size},)")
        self.dW = np.array(dW, dtype=np.float64)
        F, sums, hist = arrays["attention.F"], arrays["attention.sums"], arrays["attention.hist"]
        for i, (B, st) in enumerate(zip(self.widths, self.stats)):
            st.F = np.array(F[self.offsets[i]:self.offsets[i + 1]].reshape(B, B))
            st.rows, st.norm_sum, st.norm_sq_sum = (float(v) for v in sums[i])
            st.norm_hist = np.array(hist[i], dtype=np.float64)
        self.contrib = {}
        at = 0
        for key, i in zip(arrays["attention.keys"].tolist(), arrays["attention.branch"].tolist()):
            B = self.widths[i]
            self.contrib[int(key)] = (int(i), arrays["attention.c"][at:at + B].copy(), arrays["attention.t"][at:at + B].copy())
            at += B
        self.solve()

    def norm_report(self) -> list[dict]:
        """Per branch: the distribution of |c|_1 (the priming number's inputs)."""
        return [{"width": B, **st.norm_report()} for B, st in zip(self.widths, self.stats)]


def position_targets(ent_pos: np.ndarray, ent_m: np.ndarray, ent_v: np.ndarray, K: int,
                     evidence: np.ndarray) -> np.ndarray:
    """Hidden attention targets of one labelled example: t_k proportional to the evidence its
    units carry for the label (``evidence`` per unit of the example, >= 0) + TARGET_EPS of the
    mean, normalised over the K positions."""
    check_nonnegative("unit evidence", evidence)
    e = np.zeros(K)
    np.add.at(e, ent_pos, ent_v * evidence[ent_m])
    e += TARGET_EPS * (e.mean() if e.any() else 1.0)
    return e / e.sum()


# -- gathering the warm start's statistics from a UnitNet's labelled examples ------------------


def gather(net, key: int) -> None:
    """Gather example ``key``'s attention statistics with the current solution: inputs its
    comparisons c, targets ``position_targets`` from the evidence its units carry for its
    label under B (the explicit unit solution)."""
    ids, _, label, _ = net.rows[key]
    word_ids, pos, mm, v = net.placed[key]
    if not len(word_ids) or not len(ids):
        return
    Bu = net.base[ids]
    present = net.class_counts > 0.5
    others = [y for y in range(N_ACTIONS) if y != label and present[y]]
    rival = Bu[:, others].max(axis=1) if others else np.zeros(len(ids))
    evidence = np.maximum(0.0, Bu[:, label] - rival)
    net.att.add(key, net.comparisons(word_ids), position_targets(pos, mm, v, len(word_ids), evidence))

def gather_after_label(net, key: int, refresh: int) -> None:
    """After learning ``key``: gather its statistics, re-gather ``refresh`` earlier examples'
    (in cyclic order, bounded cost; statistics gathered early go stale as B and the query
    move) and re-solve W0."""
    if net.att is None or not net.att.warm_scale:  # no warm start: nothing to gather
        return
    gather(net, key)
    keys = sorted(net.rows)
    for _ in range(min(refresh, len(keys))):
        net.refresh_at %= len(keys)
        gather(net, keys[net.refresh_at])
        net.refresh_at += 1
    net.att.solve()

def gather_all(net) -> None:
    """Re-gather every example's attention statistics and re-solve W0 (load, trainer)."""
    if net.att is None or not net.att.warm_scale:
        return
    for key in sorted(net.rows):
        gather(net, key)
    net.att.solve()


# -- the objective through the attention ------------------------------------------------------


def batch_loss_grad_numpy(b, U, bias, mask, Wflat, dU, dW):
    """Reference: per example, the forward of the module docstring and its backward.
    ``b`` is the batch (``SaffuBatch`` arrays). Adds d loss / d U into dU (rows of the batch's
    units) and d loss / d W into dW; returns (loss, d loss / d bias)."""
    loss, db = 0.0, np.zeros(U.shape[1])
    for n in range(len(b.labels)):
        ids = b.indices[b.indptr[n]:b.indptr[n + 1]]
        pos = b.ent_pos[b.eptr[n]:b.eptr[n + 1]]
        mm = b.ent_m[b.eptr[n]:b.eptr[n + 1]]
        v = b.ent_v[b.eptr[n]:b.eptr[n + 1]]
        c = b.cval[b.pptr[n]:b.pptr[n + 1]]
        K = len(c)
        br = b.branch[n]
        if br >= 0:
            B = int(b.width[n])
            W = Wflat[b.woff[n]:b.woff[n] + B * B].reshape(B, B)[:K, :K]
            a = softmax(c @ W)
        else:
            a = np.full(K, 1.0 / K)
        z = np.zeros(len(ids))
        np.add.at(z, mm, K * a[pos] * v)
        nz = float(np.sqrt(z @ z))
        if nz == 0.0:  # no known unit: the logits are the bias
            p = softmax(bias + mask)
            loss -= b.sw[n] * math.log(p[b.labels[n]])
            g = p.copy()
            g[b.labels[n]] -= 1.0
            db += b.sw[n] * g
            continue
        x = z / nz
        s = x @ U[ids] + bias + mask
        p = softmax(s)
        y = b.labels[n]
        loss -= b.sw[n] * math.log(p[y])
        g = p.copy()
        g[y] -= 1.0
        g *= b.sw[n]
        db += g
        np.add.at(dU, ids, np.outer(x, g))
        if br < 0:
            continue
        gx = U[ids] @ g
        gz = (gx - x * (x @ gx)) / nz
        ga = np.zeros(K)
        np.add.at(ga, pos, K * v * gz[mm])
        gl = a * (ga - a @ ga)
        B = int(b.width[n])
        dWb = dW[b.woff[n]:b.woff[n] + B * B].reshape(B, B)
        dWb[:K, :K] += np.outer(c, gl)
    return loss, db


def batch_loss_grad_numba(b, U, bias, mask, Wflat, dU, dW):
    from edge_plm.switch.jit_kernels import saffu_loss_grad  # noqa: PLC0415 - Numba only when used

    loss, db = saffu_loss_grad(b.indptr, b.indices, b.eptr, b.ent_pos, b.ent_m, b.ent_v, b.pptr, b.cval,
                                b.branch, b.width, b.woff, b.labels, b.sw, U, bias, mask, Wflat, dU, dW)
    return float(loss), db


def batch_loss_grad_segments(b, U, bias, mask, Wflat, dU, dW):
    from edge_plm.switch.segment_kernels import batch_loss_grad_segments as fn  # noqa: PLC0415

    return fn(b, U, bias, mask, Wflat, dU, dW)


BACKENDS = {"numba": batch_loss_grad_numba, "numpy": batch_loss_grad_numpy,
            "segments": batch_loss_grad_segments}


class SaffuBatch:
    """Every labelled example, concatenated for the kernels: merged units (CSR ``indptr``,
    ``indices``), their occurrences (``eptr``; position, merged index, weight share), the
    comparisons of each word position (``pptr``, ``cval``), each example's branch (index, width,
    offset into the flattened W; -1 / 0 / 0 without one), labels and class-balanced weights.
    The structure grows by ``extend`` (a new label appends; nothing before it is rebuilt);
    ``refresh`` sets what changes with every label: labels, weights and the comparisons."""

    def __init__(self, examples: list[tuple], widths: tuple[int, ...], offsets: np.ndarray):
        # examples: (ids, ent_pos, ent_m, ent_v, word_ids) per labelled example
        self.widths, self.offsets = widths, offsets
        self.indptr = _ptr([len(e[0]) for e in examples])
        self.indices = _cat([e[0] for e in examples], np.int64)
        self.eptr = _ptr([len(e[1]) for e in examples])
        self.ent_pos = _cat([e[1] for e in examples], np.int64)
        self.ent_m = _cat([e[2] for e in examples], np.int64)
        self.ent_v = _cat([e[3] for e in examples], np.float64)
        lengths = [len(e[4]) for e in examples]
        self.pptr = _ptr(lengths)
        self.wid = _cat([e[4] for e in examples], np.int64)
        br = [branch_index(k, widths) for k in lengths]
        self.branch = np.array(br, dtype=np.int64)
        self.width = np.array([widths[i] if i >= 0 else 0 for i in br], dtype=np.int64)
        self.woff = np.array([offsets[i] if i >= 0 else 0 for i in br], dtype=np.int64)
        self.cval = np.zeros(len(self.wid))
        self.labels = np.zeros(len(lengths), dtype=np.int64)
        self.sw = np.zeros(len(lengths))

    def __len__(self) -> int:
        return len(self.branch)

    def extend(self, examples: list[tuple]) -> None:
        """Append examples (as for the constructor) after the ones held."""
        more = SaffuBatch(examples, self.widths, self.offsets)
        for ptr in ("indptr", "eptr", "pptr"):
            old, new = getattr(self, ptr), getattr(more, ptr)
            setattr(self, ptr, np.concatenate([old, new[1:] + old[-1]]))
        for name in ("indices", "ent_pos", "ent_m", "ent_v", "wid", "branch", "width", "woff"):
            setattr(self, name, np.concatenate([getattr(self, name), getattr(more, name)]))

    def refresh(self, labels: np.ndarray, sw: np.ndarray, comparisons) -> "SaffuBatch":
        """Set the labels, the class-balanced weights and the comparisons (``comparisons``
        maps the concatenated word ids to c: one vectorised read of the cache)."""
        self.labels = labels.astype(np.int64)
        self.sw = sw.astype(np.float64)
        self.cval = comparisons(self.wid)
        return self


def _ptr(lengths: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)


def _cat(parts: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)


def batch_structure(net, keys: list[int]) -> SaffuBatch:
    """The batch's structure for ``keys``: extended when they only add keys after the ones
    it holds (a new label), rebuilt otherwise (forget, relabel, idf weights that move)."""
    n = len(net.struct_keys)
    if (net.struct is None or net.config.idf_power or keys[:n] != net.struct_keys):
        net.struct, net.struct_keys = SaffuBatch([], net.att.widths, net.att.offsets), []
        n = 0
    if len(keys) > n:
        net.struct.extend([example_arrays(net, k) for k in keys[n:]])
        net.struct_keys = list(keys)
    return net.struct

def example_arrays(net, key: int) -> tuple:
    """Example ``key``'s arrays as a ``SaffuBatch`` holds them."""
    ids = net.rows[key][0]
    word_ids, pos, mm, v = net.placed[key]
    return ids, pos, mm, v * net.idf(ids)[mm] if net.config.idf_power else v, word_ids
