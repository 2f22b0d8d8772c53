"""The query's evidence: how strongly each query word of the word attention points to one
action (docs/method.md, "Word attention"); `SwitchModel.update_query` scales it to a maximum of
1, `scrub` freezes a tombstoned query word's evidence."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edge_plm.switch.unitnet import UnitNet
from edge_plm.switch.words import WordVocab

#: query word id -> its own units and their weights (``SwitchModel.query_bag``)
Bags = Callable[[int], tuple[np.ndarray, np.ndarray]]


def query_evidence(net: UnitNet, words: WordVocab, bag: Bags) -> np.ndarray:
    """Each query word of ``words``'s labelled evidence in ``net``: the spread of its own logits
    over the labelled actions (its unit bag, ``bag``, through U); a tombstoned one (``scrub``)
    keeps what it had. All the
    query words' bags at once: one gather of U, each bag's normalisation and logits as sums
    over its run (``query_evidence_reference``: word by word, the same up to rounding)."""
    ev = np.zeros(len(words.query_ids()))
    present = net.class_counts > 0.5
    if present.sum() < 2:
        return ev
    live, bags = live_bags(words, bag, ev)
    if not live:
        return ev
    ids = np.concatenate([ids for ids, _ in bags])
    w = np.concatenate([w for _, w in bags])
    starts = np.concatenate([[0], np.cumsum([len(i) for i, _ in bags])[:-1]])
    if net.config.idf_power:
        w = w * net.idf(ids)
    norm = np.sqrt(np.add.reduceat(w * w, starts))
    x = w / np.where(norm > 0, norm, 1.0)[np.repeat(np.arange(len(bags)), [len(i) for i, _ in bags])]
    U = net.config.logit_scale * net.base[ids] + net.delta[ids]
    s = np.add.reduceat(x[:, None] * U[:, present], starts, axis=0)
    ev[live] = s.max(axis=1) - s.min(axis=1)
    return ev


def live_bags(words: WordVocab, bag: Bags, ev: np.ndarray) -> tuple[list[int], list[tuple[np.ndarray, np.ndarray]]]:
    """The query words that have units and their bags; a tombstoned word's frozen evidence is
    written into ``ev``."""
    live, bags = [], []
    for r in words.query_ids().tolist():
        if words.words[r] is None:
            ev[r] = words.frozen.get(r, 0.0)
            continue
        ids, w = bag(r)
        if len(ids):
            live.append(r)
            bags.append((ids, w))
    return live, bags


def query_evidence_reference(net: UnitNet, words: WordVocab, bag: Bags) -> np.ndarray:
    """``query_evidence`` word by word (the reference of its parity test)."""
    q = words.query_ids()
    present = net.class_counts > 0.5
    ev = np.zeros(len(q))
    if present.sum() >= 2:
        for r in q.tolist():
            if words.words[r] is None:
                ev[r] = words.frozen.get(r, 0.0)
                continue
            ids, w = bag(r)
            if len(ids):
                U = net.config.logit_scale * net.base[ids] + net.delta[ids]
                s = net.inputs(ids, w) @ U[:, present]
                ev[r] = float(s.max() - s.min())
    return ev


__all__ = ["query_evidence", "query_evidence_reference"]
