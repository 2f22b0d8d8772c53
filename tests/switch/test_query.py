"""The query's evidence (switch/query.py): all query words at once against the word-by-word
reference, with a tombstoned query word and with idf-weighted inputs."""

from __future__ import annotations

import numpy as np
import pytest

from edge_plm.switch.model import SwitchModel
from edge_plm.switch.query import query_evidence_reference

DATA = [("turn on the light", "ON"), ("lights off please", "OFF"), ("what time is it", "NOOP"),
        ("switch the lamp on", "ON"), ("kill the lamp", "OFF"), ("play some jazz", "NOOP"),
        ("could you turn the lights on", "ON"), ("shut off the light", "OFF"), ("how is the weather", "NOOP")]


def reference(m: SwitchModel) -> np.ndarray:
    return query_evidence_reference(m.net, m.words, m.query_bag)


@pytest.mark.parametrize("overrides", [{}, {"idf_power": 1.0}])
def test_all_query_words_at_once_equal_the_word_by_word_reference(overrides):
    m = SwitchModel.empty("potato", **overrides)
    m.words.register(t for t, _ in DATA)
    assert m.query_evidence().tolist() == reference(m).tolist() == [0.0] * len(m.words.query_ids())
    for t, y in DATA:
        m.learn(t, y)
        np.testing.assert_allclose(m.query_evidence(), reference(m), rtol=1e-12, atol=1e-14)
    assert (m.query_evidence() > 0).sum() >= 3


def test_a_tombstoned_query_word_keeps_its_frozen_evidence():
    m = SwitchModel.empty("potato")
    m.words.register(t for t, _ in DATA)
    for t, y in DATA:
        m.learn(t, y)
    m.forget_example(5)  # "play some jazz": its words go
    m.scrub([])
    gone = [r for r in m.words.query_ids().tolist() if m.words.words[r] is None]
    assert gone
    ev = m.query_evidence()
    np.testing.assert_allclose(ev, reference(m), rtol=1e-12, atol=1e-14)
    assert [ev[r] for r in gone] == [m.words.frozen.get(r, 0.0) for r in gone]
