"""Shared helpers for the language-model tests: a tiny config and a small corpus file."""

from __future__ import annotations

import numpy as np

from edge_plm.research.lm.config import LMConfig

TEXT = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
    "All:\nSpeak, speak.\n\n"
    "First Citizen:\nYou are all resolved rather to die than to famish?\n\n"
    "All:\nResolved. resolved.\n\n"
    "First Citizen:\nFirst, you know Caius Marcius is chief enemy to the people.\n\n"
    "All:\nWe know't, we know't.\n\n"
)


def tiny_config(**kw) -> LMConfig:
    base = dict(name="tiny", bits=8, heads=3, positional_heads=2, hidden=12, widths=(4, 8, 16), batch_size=16,
                warm_tokens=300, window_chars=200, eval_every=5, checkpoint_every=4, eval_tokens=100)
    base.update(kw)
    return LMConfig(**base)


def write_corpus(tmp_path, repeats: int = 6):
    p = tmp_path / "corpus.txt"
    p.write_text(TEXT * repeats)
    return p


def randomize(model, seed: int = 0, scale: float = 0.5):
    rng = np.random.default_rng(seed)
    for v in model.params.values():
        v[...] = rng.normal(0.0, scale, v.shape)
    model.E = model.E + 0.1 * rng.random(model.E.shape)
    return model
