"""Exact relabel / forget of single examples in the switch model (SwitchModel.relabel,
SwitchModel.forget_example)."""

from __future__ import annotations

import numpy as np
import pytest

from edge_plm.switch.model import SwitchModel

DATA = [
    ("turn on the lamp", "ON"), ("what time is it", "NOOP"), ("switch the light off", "OFF"),
    ("turn on the lamp", "ON"), ("play some music", "NOOP"), ("lights off please", "OFF"),
    ("turn on the lamp", "ON"), ("how is the weather", "NOOP"), ("turn on the lamp", "ON"),
    ("switch off the lamp", "OFF"), ("turn on the lamp", "ON"), ("tell me a joke", "NOOP"),
    ("turn on the lamp", "ON"), ("turn off the light", "OFF"), ("turn on the lamp", "ON"),
]


def model(**kw) -> SwitchModel:
    return SwitchModel.empty("potato", seed=0, kernel="numpy", **kw)


def learned(data, **kw) -> SwitchModel:
    m = model(**kw)
    for text, label in data:
        m.learn(text, label)
    return m


def assert_same_stats(a: SwitchModel, b: SwitchModel, tol: float = 1e-9) -> None:
    """The labelled statistics (unit counts per action, document frequencies, class counts) and
    the explicit solution solved from them."""
    np.testing.assert_allclose(a.net.F, b.net.F, atol=tol, rtol=0)
    np.testing.assert_allclose(a.net.df, b.net.df, atol=tol, rtol=0)
    np.testing.assert_allclose(a.net.class_counts, b.net.class_counts, atol=tol)
    np.testing.assert_allclose(a.net.base, b.net.base, atol=1e-9)
    assert sorted(a.net.rows) == sorted(b.net.rows)


def on_keys(m: SwitchModel) -> list[int]:
    return [k for k, (text, label) in enumerate(DATA) if text == "turn on the lamp"]


def test_relabelling_all_seven_on_to_off_flips_the_prediction():
    m = learned(DATA)
    keys = on_keys(m)
    assert len(keys) == 7
    assert m.predict("turn on the lamp").action == "ON"
    counts = m.net.class_counts.copy()
    for k in keys:
        assert m.relabel(k, "OFF") is True
    assert m.predict("turn on the lamp").action == "OFF"
    np.testing.assert_array_equal(m.net.class_counts, counts + [-7, 7, 0])
    assert [m.examples[k][1] for k in keys] == [1] * 7
    assert m.relabel(keys[0], "OFF") is False  # already OFF: nothing changes


def test_relabel_validates():
    m = learned(DATA[:3])
    with pytest.raises(ValueError):
        m.relabel(0, "MAYBE")
    with pytest.raises(KeyError):
        m.relabel(3, "ON")
    m.forget_example(1)
    with pytest.raises(KeyError):
        m.relabel(1, "ON")
    with pytest.raises(KeyError):
        m.forget_example(1)


def corrected(k: int, label: str):
    return [(t, label if i == k else y) for i, (t, y) in enumerate(DATA)]


def test_relabel_of_the_last_example_equals_learning_the_corrected_data():
    # The statistics are plain sums over the examples: relabel moves one example's counts.
    # Without refinement (refine_steps=0) the models are then the same; refinement's delta
    # depends on the order of events (tested below for the statistics only).
    a = learned(DATA, refine_steps=0)
    a.relabel(len(DATA) - 1, "OFF")
    b = learned(corrected(len(DATA) - 1, "OFF"), refine_steps=0)
    assert_same_stats(a, b)
    assert a.predict("turn on the lamp").distribution == pytest.approx(
        b.predict("turn on the lamp").distribution, abs=1e-9)


def test_relabel_of_an_earlier_example_equals_the_corrected_data():
    # The unit counts of an example do not depend on the layers (no re-gathering needed), so
    # relabelling any example gives exactly the statistics of the corrected data.
    k = 4
    a = learned(DATA)
    a.relabel(k, "OFF")
    b = learned(corrected(k, "OFF"))
    assert_same_stats(a, b)
    a.regather_all()
    assert_same_stats(a, b)


def test_forgetting_the_last_example_equals_never_learning_it():
    a = learned(DATA, refine_steps=0)
    a.forget_example(len(DATA) - 1)
    b = learned(DATA[:-1], refine_steps=0)
    assert_same_stats(a, b)
    assert a.predict("switch off the lamp").distribution == pytest.approx(
        b.predict("switch off the lamp").distribution, abs=1e-9)
    assert a.n_examples == len(DATA) - 1 and len(a.examples) == len(DATA)
    assert a.examples[-1][0] == []  # its token ids are gone


def test_forget_example_then_predict():
    m = learned(DATA)
    assert m.predict("turn on the lamp").action == "ON"
    for k in on_keys(m):
        m.forget_example(k)
    assert m.net.class_counts[0] == 0
    assert m.n_examples == len(DATA) - 7
    p = m.predict("turn on the lamp")
    assert p.action != "ON"  # ON was never given by what remains: never predicted
    assert np.isfinite(list(p.distribution.values())).all()
    m.learn("turn on the lamp", "ON")  # learning continues with stable keys
    assert len(m.examples) == len(DATA) + 1


def test_refinement_skips_forgotten_examples():
    m = learned(DATA)
    gone = {1, 2, 3, 5, 8}
    for k in gone:
        m.forget_example(k)
    assert not gone & set(m.net.rows)
    assert len(m.net.batch().labels) == len(DATA) - len(gone)
    before = m.net.objective()[0]
    m.refine(5)
    assert m.net.objective()[0] < before


def test_save_load_after_relabel_and_forget_continues_identically(tmp_path):
    a = learned(DATA, refine_steps=1)
    a.relabel(2, "NOOP")
    a.relabel(6, "OFF")
    a.forget_example(4)
    b = SwitchModel.load(a.save(tmp_path / "m.npz"))
    assert b.removed == {4} and b.examples == a.examples
    np.testing.assert_array_equal(a.net.class_counts, b.net.class_counts)
    for text, label in [("lamp on now", "ON"), ("lamp off now", "OFF"), ("good night", "NOOP")]:
        assert a.learn(text, label) == b.learn(text, label)
    a.relabel(len(DATA), "OFF")
    b.relabel(len(DATA), "OFF")
    a.forget_example(0)
    b.forget_example(0)
    assert_same_stats(a, b, tol=0.0)
    for text in ("turn on the lamp", "lamp off now", "play some music"):
        assert a.predict(text).distribution == b.predict(text).distribution
