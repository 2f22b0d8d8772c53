"""Exact relabel / forget of single examples in the switch model (SwitchModel.relabel,
SwitchModel.forget_example)."""

from __future__ import annotations

import numpy as np
import pytest

from edge_plm.plm.dialogue import SwitchModel

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
    sa, sb = a.net._all_stats(), b.net._all_stats()
    assert sa.keys() == sb.keys()
    for name in sa:
        np.testing.assert_allclose(sa[name].F, sb[name].F, atol=tol, rtol=0, err_msg=name)
        assert sa[name].rows == pytest.approx(sb[name].rows, abs=tol), name
        assert sa[name].norm_sum == pytest.approx(sb[name].norm_sum, abs=tol), name
        np.testing.assert_allclose(sa[name].norm_hist, sb[name].norm_hist, atol=tol, err_msg=name)
    np.testing.assert_allclose(a.net.class_counts, b.net.class_counts, atol=tol)
    for k in a.net.base:
        np.testing.assert_allclose(a.net.base[k], b.net.base[k], atol=1e-6, err_msg=k)


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
    # Nothing else changed: the relabelled example is the last one learned and no other
    # example was re-gathered with it (refresh=0), so only its own contribution differs.
    a = learned(DATA, refresh=0)
    a.relabel(len(DATA) - 1, "OFF")
    b = learned(corrected(len(DATA) - 1, "OFF"), refresh=0)
    assert_same_stats(a, b)
    assert a.predict("turn on the lamp").distribution == pytest.approx(
        b.predict("turn on the lamp").distribution, abs=1e-9)


def test_relabel_of_an_earlier_example_equals_the_corrected_data_after_regather_all():
    # Relabel gathers the example's contribution with the current layers (not those of its
    # time), and its earlier label influenced how later examples were gathered (W_B's targets
    # use the class evidence of all labels; U_B and O see the re-solved layers below), so the
    # two models differ until every example is re-gathered with the current layers; then the
    # labelled statistics depend only on the local block (label-independent) and the labels.
    k = 4
    a = learned(DATA)
    a.relabel(k, "OFF")
    b = learned(corrected(k, "OFF"))
    a.regather_all()
    b.regather_all()
    assert_same_stats(a, b)


def test_forgetting_the_last_example_equals_never_learning_it():
    # W and U were solved with this example in them and nothing has been observed since, so
    # even U's take-back (recomputed with the current W) is exact here.
    a = learned(DATA, refresh=0)
    a.forget_example(len(DATA) - 1)
    b = learned(DATA[:-1], refresh=0)
    assert_same_stats(a, b)
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


def test_replay_and_refresh_skip_forgotten_examples():
    m = learned(DATA, refresh=4, replay=5)
    gone = {1, 2, 3, 5, 8}
    for k in gone:
        m.forget_example(k)
    n = len(m.examples)
    for _ in range(20):
        assert not gone & set(m.refresh_keys(n))
        assert not gone & set(m.replay_sample(exclude=n))
    assert len(m.refresh_keys(n)) == 4 and len(m.replay_sample(exclude=n)) == 5


def test_save_load_after_relabel_and_forget_continues_identically(tmp_path):
    a = learned(DATA, update_steps=1)
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


def test_refine_embedding_only_on_an_empty_model_and_survives_growth():
    from edge_plm.plm.bitcipher import bit_cipher
    from edge_plm.plm.dialogue import SwitchModel

    m = SwitchModel.empty("potato")
    m.refine_embedding(["turn on the light", "lights off please"])
    E = m.net.E.copy()
    assert (E >= 0).all() and np.allclose(E.sum(axis=1), 1.0)
    assert not np.allclose(E, bit_cipher(E.shape[0], m.config.bits))  # codes were mixed
    m.learn("zzz quiet", "NOOP")  # 'z' and 'q' are new: rows appended, refined rows kept
    np.testing.assert_array_equal(m.net.E[: E.shape[0]], E)
    with pytest.raises(RuntimeError, match="empty model"):
        m.refine_embedding(["more text"])
