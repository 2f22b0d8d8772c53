"""Language-model checkpoints in the device's format (``checkpoint.py``: atomic npz + JSON meta,
checksum) and the loader both the desktop trainer and the device side use.

Meta: ``kind`` = "edge-plm language model", ``config`` (``LMConfig`` fields), ``tokenizer``
(its JSON), ``embedding_hash``, ``counters`` (trainer state; absent for a bare model).
``load_lm`` checks kind, config fields, tokenizer, every array shape and the embedding hash,
and raises ``CheckpointError`` with a message that says what does not fit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edge_plm.plm import checkpoint
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.research.lm.model import SaffuLM
from edge_plm.research.lm.config import LM_KIND, LMConfig
from edge_plm.research.lm.subword import tokenizer_from_json


def save_lm(path, model: SaffuLM, tokenizer, extra_arrays: dict | None = None, counters: dict | None = None) -> Path:
    arrays = {**model.state_arrays(), **(extra_arrays or {})}
    meta = {"kind": LM_KIND, "config": model.config.to_dict(), "tokenizer": tokenizer.to_json(),
            "embedding_hash": model.embedding_hash(), "counters": counters or {},
            "embeddings_frozen": model.embeddings_frozen}
    return checkpoint.save(path, arrays, meta)


def load_lm(path, max_params: int | None = None, kernel: str | None = None):
    """(model, tokenizer, arrays, meta). ``max_params``: a device's budget (weights, E included)."""
    arrays, meta = checkpoint.load(path)
    if meta.get("kind") != LM_KIND:
        raise CheckpointError(f"{path} is not a language-model checkpoint (kind={meta.get('kind')!r}); "
                              f"a switch model loads with edge_plm.switch.model.SwitchModel.load")
    try:
        config = LMConfig.from_dict(meta["config"])
        if kernel:
            config = config.with_(kernel=kernel)
        tok = tokenizer_from_json(meta["tokenizer"])
    except ImportError as exc:
        raise CheckpointError(f"{path}: needs an optional dependency to read its tokenizer: {exc}") from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: incompatible language-model config: {exc}") from exc
    model = SaffuLM(config, len(tok))
    try:
        model.load_arrays(arrays)
    except ValueError as exc:
        raise CheckpointError(f"{path}: checkpoint does not match its config {config.name!r}: {exc}") from exc
    if model.embedding_hash() != meta.get("embedding_hash"):
        raise CheckpointError(f"{path}: embedding hash mismatch (embedding and metadata disagree)")
    model.embeddings_frozen = bool(meta.get("embeddings_frozen", True))
    n = config.param_count(len(tok), include_embedding=True)
    if max_params is not None and n > max_params:
        raise CheckpointError(f"{path}: model {config.name!r} has {n:,} parameters, this device allows {max_params:,}")
    return model, tok, arrays, meta


class LMPredictor:
    """What the device side needs from a desktop-trained language model."""

    def __init__(self, model: SaffuLM, tokenizer):
        self.model, self.tokenizer = model, tokenizer

    @classmethod
    def load(cls, path, max_params: int | None = None, kernel: str | None = None) -> "LMPredictor":
        model, tok, _, _ = load_lm(path, max_params=max_params, kernel=kernel)
        return cls(model, tok)

    def next_token_proba(self, text: str) -> np.ndarray:
        return self.model.next_proba(self.tokenizer.encode(text))

    def top_k(self, text: str, k: int = 5) -> list[tuple[str, float]]:
        p = self.next_token_proba(text)
        best = np.argsort(-p)[:k]
        return [(self.tokenizer.decode([int(i)]), float(p[i])) for i in best]

    def generate(self, prompt: str, n: int = 50) -> str:
        """Greedy continuation (deterministic)."""
        ids = list(self.tokenizer.encode(prompt))
        for _ in range(n):
            ids.append(int(np.argmax(self.model.next_proba(ids))))
        return self.tokenizer.decode(ids)

    def score(self, text: str) -> float:
        """Mean negative log-likelihood (nats per token) of ``text`` as one paragraph."""
        from edge_plm.research.lm.corpus import batches_from_docs

        batches = batches_from_docs([self.tokenizer.encode(text)], self.model.config.widths, 1024)
        nll = np.concatenate([self.model.nll(b) for b in batches]) if batches else np.zeros(0)
        return float(nll.mean()) if len(nll) else float("nan")
