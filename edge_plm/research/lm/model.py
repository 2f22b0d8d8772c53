"""SAFFU next-token language model (docs/design.md §2.2-§2.6; shapes in ``research/lm/config.py``).

``SaffuLM`` holds the bit-cipher embedding E, the comparison cache C = E E^T
(``ComparisonCache``: rebuilt whenever E changes, the rebuild time counted there), and the
parameters ``W.i`` (heads x B_i x B_i), ``U.i`` (heads*bits x hidden) per branch i and the
shared ``O`` (hidden x V). There are no random numbers: parameters start at zero (uniform
attention and outputs) and get their values from the explicit warm start (``research/lm/warmstart.py``).

A batch of one branch (``LMBatch`` from ``research/lm/corpus.py``) goes through that branch only; a
mixed batch (``branch`` = -1) is split by branch internally, so a bucketed and an unbucketed
batch of the same samples give the same loss and gradients.
"""

from __future__ import annotations

import numpy as np

from edge_plm.research.lm import kernels, reference
from edge_plm.plm.bitcipher import bit_cipher, embedding_hash
from edge_plm.plm.cache import ComparisonCache
from edge_plm.research.lm.corpus import LMBatch
from edge_plm.research.lm.config import LMConfig

BACKENDS = {
    "numpy": (reference.branch_forward, reference.branch_backward),
    "numba": (kernels.branch_forward, kernels.branch_backward),
}


class SaffuLM:
    def __init__(self, config: LMConfig, vocab_size: int):
        self.config = config
        self.V = vocab_size
        self.E = bit_cipher(vocab_size, config.bits)
        self.cache = ComparisonCache()
        self.params = {k: np.zeros(s) for k, s in config.param_shapes(vocab_size).items()}
        self.embeddings_frozen = True

    # -- helpers ----------------------------------------------------------------------------

    @property
    def n_branches(self) -> int:
        return len(self.config.widths)

    def comparisons(self) -> np.ndarray:
        return self.cache.table(self.E)

    def param_count(self) -> int:
        return self.config.param_count(self.V, include_embedding=not self.embeddings_frozen)

    def kernels_for(self, kernel: str | None = None):
        """The (forward, backward) kernels of ``kernel`` (default: the config's)."""
        return BACKENDS[kernel or self.config.kernel]

    def _parts(self, batch: LMBatch):
        """[(branch index, ctx, lengths, targets, sample indices)] of a batch."""
        if batch.branch >= 0:
            return [(batch.branch, batch.ctx, batch.lengths, batch.targets, None)]
        branches = np.searchsorted(np.asarray(self.config.widths), batch.lengths)
        out = []
        for bi, B in enumerate(self.config.widths):
            sel = np.flatnonzero(branches == bi)
            if len(sel):
                out.append((bi, batch.ctx[sel, :B], batch.lengths[sel], batch.targets[sel], sel))
        return out

    # -- forward / loss / gradients ---------------------------------------------------------

    def nll(self, batch: LMBatch, kernel: str | None = None) -> np.ndarray:
        """Per-sample negative log-likelihood (nats), in the batch's sample order."""
        fwd, _ = self.kernels_for(kernel)
        C = self.comparisons()
        out = np.empty(len(batch))
        for bi, ctx, lengths, targets, sel in self._parts(batch):
            p = self.params
            nll = fwd(ctx, lengths, targets, self.E, C, p[f"W.{bi}"], p[f"U.{bi}"], p["O"]).nll
            if sel is None:
                out[:] = nll
            else:
                out[sel] = nll
        return out

    def loss(self, batch: LMBatch, kernel: str | None = None) -> float:
        return float(self.nll(batch, kernel).mean())

    def gradients(self, batch: LMBatch, need_dE: bool = False, kernel: str | None = None):
        """(mean loss, grads) — grads only for the branches present (others stay untouched)."""
        fwd, bwd = self.kernels_for(kernel)
        C = self.comparisons()
        p = self.params
        grads: dict[str, np.ndarray] = {}
        total, N = 0.0, len(batch)
        for bi, ctx, lengths, targets, _ in self._parts(batch):
            W, U, O = p[f"W.{bi}"], p[f"U.{bi}"], p["O"]
            cache = fwd(ctx, lengths, targets, self.E, C, W, U, O)
            total += float(cache.nll.sum())
            dW, dU, dO, dE = bwd(cache, targets, self.E, W, U, O, N, need_dE)
            grads[f"W.{bi}"], grads[f"U.{bi}"] = dW, dU
            grads["O"] = grads["O"] + dO if "O" in grads else dO
            if need_dE:
                grads["E"] = grads["E"] + dE if "E" in grads else dE
        return total / N, grads

    # -- prediction -------------------------------------------------------------------------

    def next_proba(self, context_ids) -> np.ndarray:
        """Distribution of the token following ``context_ids`` (its last max(widths) tokens)."""
        from edge_plm.research.lm.subword import BOS, PAD

        ids = np.concatenate([[BOS], np.asarray(context_ids, dtype=np.int64)])[-self.config.max_len:]
        L = len(ids)
        bi = int(np.searchsorted(np.asarray(self.config.widths), L))
        ctx = np.full((1, self.config.widths[bi]), PAD, dtype=np.int64)
        ctx[0, :L] = ids[::-1]
        fwd, _ = self.kernels_for()
        p = self.params
        return fwd(ctx, np.array([L]), np.array([0]), self.E, self.comparisons(), p[f"W.{bi}"], p[f"U.{bi}"],
                   p["O"]).y[0]

    # -- state ------------------------------------------------------------------------------

    def state_arrays(self) -> dict[str, np.ndarray]:
        return {"E": self.E, **{f"param.{k}": v for k, v in self.params.items()}}

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Load E and parameters, checking every shape against the config (ValueError)."""
        E = arrays.get("E")
        if E is None or E.shape != (self.V, self.config.bits):
            raise ValueError(f"embedding has shape {None if E is None else E.shape}, "
                             f"config/tokenizer need {(self.V, self.config.bits)}")
        for k, v in self.params.items():
            a = arrays.get(f"param.{k}")
            if a is None:
                raise ValueError(f"checkpoint lacks parameter {k!r}")
            if a.shape != v.shape:
                raise ValueError(f"parameter {k!r} has shape {a.shape}, config needs {v.shape}")
        self.E = np.array(E, dtype=np.float64)
        for k in self.params:
            self.params[k] = np.array(arrays[f"param.{k}"], dtype=np.float64)

    def embedding_hash(self) -> str:
        return embedding_hash(self.E)
