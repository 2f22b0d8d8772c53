"""Forgetting examples in bulk and scrubbing the vocabularies of what was forgotten
(`SwitchModel.forget_examples`, `SwitchModel.scrub`; docs/loop.md, "What `forget` reaches").

The unit and word vocabularies are append-only: ids never change, so statistics indexed by them
stay valid. After a `forget`, a string that no kept text uses is *tombstoned*: its slot and id
stay, the string goes (``None``; ``null`` in the checkpoint), and it never matches again (the
string heard again gets a fresh id). Every kept text has exactly the units and word ids it had,
so its prediction does not change.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from edge_plm.switch.query import query_evidence
from edge_plm.switch.unitnet import ONLINE_KERNEL
from edge_plm.switch.tokenizer import normalize


def forget_examples(model: Any, keys: list[int]) -> None:
    """Take the examples `keys` out of `model`: their counts leave the statistics (exact),
    their slots are marked removed, their token ids are dropped and their transcripts leave
    the memory; then one solve and one round of ``refine_budget()`` refinement steps, whatever
    the number of keys (one key: exactly what `SwitchModel.forget_example` always did)."""
    keys = [model.check_key(k) for k in dict.fromkeys(int(k) for k in keys)]
    if not keys:
        return
    texts = {key: model.text_of(key) for key in keys}
    for key in keys:
        model.net.remove(key)
        model.device_evidence.forget(key, texts[key].split())
    model.net.solve()
    model.update_query()
    if model.net.att is not None:
        model.net.att.solve()
    model.share.refit(model.n_owner_examples)  # its rows are probabilities, no text: the prior moves
    for key in keys:
        held = model.memory.get(texts[key], [])
        if key in held:
            held.remove(key)
        if not held:
            model.memory.pop(texts[key], None)
        model.examples[key] = ([], model.examples[key][1])
        model.removed.add(key)
    model.net.refine(model.refine_budget(), kernel=ONLINE_KERNEL)
    model.update_query()


def scrub(model: Any, texts: list[str]) -> dict[str, int]:
    """Tombstone the unit and word strings of `model` that neither a live example nor
    `texts` (the other transcripts to keep: the unlabelled ones the model observed) uses, so
    that its checkpoint holds no string of forgotten text. A tombstoned unit's delta row (only
    forgotten text reached it) is zeroed; a tombstoned query word keeps its evidence as it was
    (``WordVocab.frozen``), so the query's scale does not move. Returns the counts tombstoned."""
    texts = [model.text_of(k) for k in model.live_keys()] + [normalize(t) for t in texts]
    before = query_evidence(model) if model.words is not None else np.zeros(0)
    units = set().union(*(model.units.strings_of(t) for t in texts)) if texts else set()
    gone_units = model.units.scrub(units)
    if gone_units:
        model.net.delta[np.array(gone_units, dtype=np.int64)] = 0.0
    gone_words: list[int] = []
    if model.words is not None:
        gone_words = model.words.scrub({w for t in texts for w in t.split()})
        for r in gone_words:
            if r < len(before):
                model.words.frozen[r] = float(before[r])
    model.query_bags.clear()
    model.update_query()
    return {"units": len(gone_units), "words": len(gone_words)}


__all__ = ["forget_examples", "scrub"]
