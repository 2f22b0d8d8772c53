"""The switch model's parts (switch/memory.py, switch/examples.py, switch/confidence.py) and the
transcript normalised once at the model's entry (switch/tokenizer.py ``normalize``)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from edge_plm.actions import INDEX
from edge_plm.switch import tokenizer, units
from edge_plm.switch.calibration import Calibrator, features
from edge_plm.switch.confidence import ConfidenceMap
from edge_plm.switch.examples import ExampleStore
from edge_plm.switch.memory import MEMORY_CONFLICT_SHARE, MEMORY_DOUBT, TranscriptMemory
from edge_plm.switch.model import SwitchModel
from edge_plm.switch.tokenizer import normalize

ON, OFF, NOOP = INDEX["ON"], INDEX["OFF"], INDEX["NOOP"]


def test_normalize_is_idempotent_on_every_code_point():
    """What the model passes down is normalised once: normalising it again changes nothing, for
    every code point alone and between a letter and a combining mark."""
    for c in range(sys.maxunicode + 1):
        if 0xD800 <= c <= 0xDFFF:
            continue
        for text in (chr(c), f"x{chr(c)}\u0301"):
            once = normalize(text)
            assert normalize(once) == once, hex(c)


def test_memory_remembers_the_latest_label_and_forgets_by_key():
    memory, labels = TranscriptMemory(), {0: ON, 1: ON, 2: OFF}
    assert memory.remembered("lamp on", labels.get) is None and "lamp on" not in memory
    memory.add("lamp on", 0)
    memory.add("lamp on", 1)
    y = memory.remembered("lamp on", labels.get)
    assert np.argmax(y) == ON and y[ON] == pytest.approx((2 + MEMORY_DOUBT / 3) / (2 + MEMORY_DOUBT))
    memory.add("lamp on", 2)  # corrected: the latest label wins, unsurely
    y = memory.remembered("lamp on", labels.get)
    assert np.argmax(y) == OFF and y[OFF] == pytest.approx(MEMORY_CONFLICT_SHARE + (1 - MEMORY_CONFLICT_SHARE) / 3)
    memory.forget("lamp on", 2)
    assert np.argmax(memory.remembered("lamp on", labels.get)) == ON
    memory.forget("lamp on", 0)
    memory.forget("lamp on", 1)
    assert "lamp on" not in memory and memory.keys == {}
    memory.forget("lamp on", 1)  # a key it does not hold: nothing


def test_example_store_keeps_keys_stable_and_guards_the_starting_examples():
    store = ExampleStore()
    assert store.add("turn on the lamp", ON) == 0 and store.add("lights off", OFF) == 1
    assert store.text_of(0) == "turn on the lamp" and store.label(1) == OFF
    store.relabel(1, NOOP)
    assert store.label(1) == NOOP
    store.drop(0)
    assert store.examples[0] == ([], ON) and store.removed == {0} and store.live_keys() == [1]
    assert len(store) == 2 and store.n_live == 1
    with pytest.raises(KeyError, match="forgotten"):
        store.check_key(0, frozen_prior=False)
    with pytest.raises(KeyError, match="no example"):
        store.check_key(2, frozen_prior=False)
    store.prior = 2
    assert store.check_key(1, frozen_prior=False) == 1
    with pytest.raises(KeyError, match="starting model"):
        store.check_key(1, frozen_prior=True)


def test_confidence_map_fits_the_prior_and_round_trips_its_state():
    m = ConfidenceMap()
    rng = np.random.default_rng(0)
    rows = [(features(3.0 * x, x, False), bool(x > 0.3)) for x in rng.random(40)]
    out = m.fit(rows, strength=10.0)
    assert out["rows"] == 40 and np.array_equal(m.calib.prior, m.calib.theta)
    m.add(rows[0], owner_alone=True)
    back = ConfidenceMap()
    back.load(m.state())
    np.testing.assert_array_equal(back.calib.theta, m.calib.theta)
    assert len(back.owner_calib.y) == 1 and isinstance(back.of(owner_alone=True), Calibrator)
    with pytest.raises(ValueError, match="no held-out row"):
        ConfidenceMap().fit([])


def test_the_model_normalises_a_transcript_once(monkeypatch):
    """``learn`` and ``predict`` normalise at the entry; the vocabularies and the tokenizer read
    the normalised text as it is (``normalised=True``)."""
    m = SwitchModel.empty("potato")
    for text, label in [("turn on the light", "ON"), ("lights off", "OFF"), ("what time is it", "NOOP")]:
        m.learn(text, label)
    calls = []

    def counting(text: str) -> str:
        calls.append(text)
        return normalize(text)

    monkeypatch.setattr("edge_plm.switch.model.normalize", counting)
    monkeypatch.setattr(units, "normalize", lambda t: pytest.fail("units normalised again"))
    monkeypatch.setattr(tokenizer, "normalize", lambda t: pytest.fail("the tokenizer normalised again"))
    m.learn("Turn the LIGHT on!", "ON")
    assert calls == ["Turn the LIGHT on!"] and m.text_of(3) == "turn the light on"
    calls.clear()
    p = m.predict("TURN the light on")
    assert calls == ["TURN the light on"] and p.action == "ON"
    assert m.predict_normalised("turn the light on") == p
