"""The query's evidence: how strongly each query word of the word attention points to one
action (docs/method.md, "Word attention"); `SwitchModel.update_query` scales it to a maximum of
1, `scrub` freezes a tombstoned query word's evidence."""

from __future__ import annotations

from typing import Any

import numpy as np


def query_evidence(model: Any) -> np.ndarray:
    """Each query word's labelled evidence: the spread of its own logits over the labelled
    actions (its unit bag through U); a tombstoned one (``scrub``) keeps what it had."""
    net = model.net
    q = model.words.query_ids()
    present = net.class_counts > 0.5
    ev = np.zeros(len(q))
    if present.sum() >= 2:
        for r in q.tolist():
            if model.words.words[r] is None:
                ev[r] = model.words.frozen.get(r, 0.0)
                continue
            ids, w = model.query_bag(r)
            if len(ids):
                U = net.config.logit_scale * net.base[ids] + net.delta[ids]
                s = net.inputs(ids, w) @ U[:, present]
                ev[r] = float(s.max() - s.min())
    return ev


__all__ = ["query_evidence"]
