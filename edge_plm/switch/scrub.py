"""Forgetting examples in bulk and scrubbing the vocabularies of what was forgotten
(``Forgetting``: `SwitchModel.forget_examples`, `SwitchModel.scrub`; docs/loop.md, "What `forget`
reaches").

A forget takes each part's share of the examples out through the part's own methods: the owner's
part's statistics (``UnitNet.remove``), the device evidence, the memory and the example store;
the share's prior moves (``OwnerShare.refit``); then one solve and one round of refinement,
whatever the number of keys.

The unit and word vocabularies are append-only: ids never change, so statistics indexed by them
stay valid. After a `forget`, a string that no kept text uses is *tombstoned*: its slot and id
stay, the string goes (``None``; ``null`` in the checkpoint), and it never matches again (the
string heard again gets a fresh id). Every kept text has exactly the units and word ids it had,
so its prediction does not change.
"""

from __future__ import annotations

import numpy as np

from edge_plm.switch.tokenizer import normalize
from edge_plm.switch.unitnet import ONLINE_KERNEL, UnitNet
from edge_plm.switch.units import UnitVocab
from edge_plm.switch.words import WordVocab


def scrub_vocabularies(texts: list[str], units: UnitVocab, words: WordVocab | None, net: UnitNet,
                       evidence: np.ndarray) -> dict[str, int]:
    """Tombstone the unit and word strings that none of the normalised transcripts ``texts``
    (every live example's and the other transcripts to keep) uses, so that the checkpoint holds
    no string of forgotten text. A tombstoned unit's delta row in ``net`` (only forgotten text
    reached it) is zeroed; a tombstoned query word keeps its ``evidence`` (the query's, before
    the scrub) as it was (``WordVocab.frozen``), so the query's scale does not move. Returns the
    counts tombstoned."""
    kept = set().union(*(units.strings_of(t) for t in texts)) if texts else set()
    gone_units = units.scrub(kept)
    if gone_units:
        net.delta[np.array(gone_units, dtype=np.int64)] = 0.0
    gone_words: list[int] = []
    if words is not None:
        gone_words = words.scrub({w for t in texts for w in t.split()})
        for r in gone_words:
            if r < len(evidence):
                words.frozen[r] = float(evidence[r])
    return {"units": len(gone_units), "words": len(gone_words)}


class Forgetting:
    """``SwitchModel``'s ``forget_example(s)`` and ``scrub`` (module docstring)."""

    def forget_example(self, key: int) -> None:
        """Take example `key` out (its counts exactly; what refinement fitted to it is pulled
        back; ``rebuild`` is the exact way; ``scrub`` takes its strings out)."""
        self.forget_examples([key])

    def forget_examples(self, keys: list[int]) -> None:
        """Take the examples `keys` out: their counts leave the statistics (exact), their slots
        are marked removed, their token ids are dropped and their transcripts leave the memory
        and the device evidence; then one solve and one round of ``refine_budget()`` refinement
        steps, whatever the number of keys."""
        keys = [self.check_key(k) for k in dict.fromkeys(int(k) for k in keys)]
        if not keys:
            return
        texts = {key: self.text_of(key) for key in keys}
        for key in keys:
            self.net.remove(key)
            self.naming.evidence.forget(key, texts[key].split())
        self.net.solve()
        self.update_query()
        if self.net.att is not None:
            self.net.att.solve()
        self.share.refit(self.n_owner_examples)  # its rows are probabilities, no text: the prior moves
        for key in keys:
            self.memory.forget(texts[key], key)
            self.store.drop(key)
        self.net.refine(self.refine_budget(), kernel=ONLINE_KERNEL)
        self.update_query()

    def scrub(self, texts: list[str]) -> dict[str, int]:
        """Tombstone the unit and word strings that neither a live example nor ``texts`` (the
        unlabelled transcripts to keep) uses; predictions for them do not change
        (``switch/scrub.py``)."""
        kept = [self.text_of(k) for k in self.live_keys()] + [normalize(t) for t in texts]
        before = self.query_evidence() if self.words is not None else np.zeros(0)
        counts = scrub_vocabularies(kept, self.units, self.words, self.net, before)
        self.query_bags.clear()
        self.update_query()
        return counts


__all__ = ["Forgetting", "scrub_vocabularies"]
