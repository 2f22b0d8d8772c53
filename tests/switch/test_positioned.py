"""``UnitVocab.positioned`` (switch/units.py): its occurrences merged with array sums
(``merge_occurrences``) against the per-occurrence dictionaries it replaced, bit for bit, in
every weighting of the units."""

from __future__ import annotations

import numpy as np
import pytest

from edge_plm.switch.units import BIGRAM_PREFIX, SOUND_PREFIX, WORD_PREFIX, UnitVocab, is_long

TEXTS = ["turn on the light", "lights lights lights off", "", "the the the", "a", "kitchen fan on now please",
         "lumos maxima", "set a timer for ten minutes and then turn the lamp off"]


def positioned_reference(vocab: UnitVocab, text: str, grow: bool):
    """The former ``positioned``: per occurrence, into dictionaries."""
    acc, occ, raw = {}, {}, []
    unknown = 0.0
    words_seen = pairs = 0
    for u, w in vocab.weighted_units(text):
        if u.startswith(BIGRAM_PREFIX):
            pairs += 1
            at = pairs
        elif u.startswith(WORD_PREFIX):
            at = words_seen
            words_seen += 1
        elif u.startswith(SOUND_PREFIX):
            at = words_seen - 1
        else:
            at = words_seen
        i = vocab.add(u) if grow else vocab.index.get(u, -1)
        if i < 0:
            unknown += w if is_long(u, vocab.support_min_n) else 0.0
        else:
            acc[i] = acc.get(i, 0.0) + w
            occ[i] = occ.get(i, 0) + 1
            raw.append((at, i, w))
    ids = np.array(sorted(acc), dtype=np.int64)
    weights = np.array([acc[i] for i in ids.tolist()], dtype=np.float64)
    if vocab.tf != "count":
        c = np.array([occ[i] for i in ids.tolist()], dtype=np.float64)
        weights = weights / c * (1.0 + np.log(c) if vocab.tf == "log" else 1.0)
    local = {int(i): m for m, i in enumerate(ids.tolist())}
    ent_pos = np.array([p for p, _, _ in raw], dtype=np.int64)
    ent_m = np.array([local[i] for _, i, _ in raw], dtype=np.int64)
    ent_v = np.array([weights[local[i]] * w / acc[i] for _, i, w in raw], dtype=np.float64)
    return ids, weights, unknown, (ent_pos, ent_m, ent_v)


@pytest.mark.parametrize("kw", [{}, {"tf": "log", "ngram_mass": 3.0, "ngram_power": 0.5},
                                {"tf": "binary", "sound_weight": 2.0, "bigram_weight": 1.0, "sound_max_len": 4}])
def test_positioned_equals_the_per_occurrence_reference(kw):
    a, b = UnitVocab(150, 2, 5, 8.0, **kw), UnitVocab(150, 2, 5, 8.0, **kw)
    for text in TEXTS[:4]:  # grow the vocabularies alike
        a.positioned(text, grow=True)
        positioned_reference(b, text, grow=True)
    assert a.units == b.units and not a.full
    for grow in (False, True):  # unknown units, then the cap (150) reached midway
        for text in TEXTS:
            got, want = a.positioned(text, grow), positioned_reference(b, text, grow)
            assert got[2] == want[2]
            for x, y in zip((got[0], got[1], *got[3]), (want[0], want[1], *want[3])):
                assert x.dtype == y.dtype
                np.testing.assert_array_equal(x, y)
    assert a.units == b.units and a.full
