"""The kind head (edge_plm/switch/kinds.py): determinism, exact learn / forget, its format, the
refinement's gradient, and a quality floor of the shipped head on the crowd file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from edge_plm.actions import KIND_INDEX, KINDS
from edge_plm.plm.warmstart import NegativeInputError
from edge_plm.switch import kinds as K

ROOT = Path(__file__).resolve().parents[2]
CROWD = ROOT / "benchmarks" / "data" / "kinds" / "crowd-kinds.jsonl"

SMALL = [("dim the lamp", "DIM"), ("turn the lights down a bit", "DIM"), ("make it darker in here", "DIM"),
         ("brighten the lamp", "BRIGHTEN"), ("turn the lights up", "BRIGHTEN"), ("more light please", "BRIGHTEN"),
         ("set the lamp to thirty percent", "LEVEL"), ("half brightness", "LEVEL"),
         ("is the heater on", "QUERY"), ("what's on", "QUERY"), ("are the lights on in the kitchen", "QUERY"),
         ("turn on the lamp", "PLAIN"), ("what time is it", "PLAIN"), ("set a timer for ten minutes", "PLAIN"),
         ("turn up the volume", "PLAIN")]


def small_head(steps: int = 5) -> K.KindHead:
    head = K.KindHead()
    for t, k in SMALL:
        head.add(t, k)
    K.fit_refinement(head, [t for t, _ in SMALL], [k for _, k in SMALL], steps=steps, lr=1.0, l2=1e-3)
    head.temperature = 0.8
    return head


@pytest.fixture(scope="module")
def shipped() -> K.KindHead:
    return K.load_shipped()


def same_arrays(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_same_data_gives_the_same_arrays_byte_for_byte():
    a, b = small_head(), small_head()
    assert K.npz_bytes(a.to_arrays()) == K.npz_bytes(b.to_arrays())
    again = K.KindHead.from_arrays(a.to_arrays())
    assert K.npz_bytes(again.to_arrays()) == K.npz_bytes(a.to_arrays())
    assert again.predict("dim the kitchen lamp") == a.predict("dim the kitchen lamp")


def test_the_committed_head_is_what_the_build_makes():
    # the whole build (two fits of ~9,500 lines) takes ~13 s: rebuilt in memory, compared byte for byte
    sys.path.insert(0, str(ROOT / "models"))
    import build_kinds_en

    assert build_kinds_en.main(["--check"]) == 0


def test_learn_then_forget_gives_back_the_same_head(shipped):
    head = K.KindHead.from_arrays(shipped.to_arrays())
    texts = ["lights a tad gloomier", "zorbly the glimmer lamp", "is the heater on", "turn on the lamp"]
    before_arrays = head.to_arrays()
    before = [head.predict(t) for t in texts]
    head.learn("lights a tad gloomier zorbly", "DIM")  # new words: the vocabulary grows
    head.learn("is the heater on", "PLAIN")
    assert head.predict("lights a tad gloomier") != before[0]
    head.forget("lights a tad gloomier zorbly", "DIM")
    head.forget("is the heater on", "PLAIN")
    assert [head.predict(t) for t in texts] == before  # identical, not close
    after = head.to_arrays()
    n = len(before_arrays["units"])
    for k in ("F", "df"):
        assert np.array_equal(after[k][:n], before_arrays[k]) and not after[k][n:].any()
    for k in ("mass", "colsum", "n_seen", "delta", "bias", "owner.counts"):
        assert np.array_equal(after[k], before_arrays[k])
    with pytest.raises(KeyError):
        head.forget("is the heater on", "PLAIN")


def test_an_owner_label_sticks(shipped):
    head = K.KindHead.from_arrays(shipped.to_arrays())
    text = "make the room gloomier"
    head.learn(text, "DIM")
    assert head.predict(text).kind == "DIM"
    assert head.config.owner_weight > 1


def test_prediction_is_a_calibrated_distribution(shipped):
    p = shipped.predict("Dim the LAMP, please!")
    assert p.kind == "DIM" and list(p.distribution) == list(KINDS)
    assert p.confidence == max(p.distribution.values())
    assert sum(p.distribution.values()) == pytest.approx(1.0)
    assert shipped.predict("").kind in KINDS  # no units: the biases decide


def test_format_is_checked_on_load():
    d = small_head().to_arrays()
    d["format"] = np.array(K.KIND_FORMAT + 1)
    with pytest.raises(K.KindFormatError, match="format"):
        K.KindHead.from_arrays(d)
    d = small_head().to_arrays()
    d["kinds"] = np.array(["PLAIN", "DIM"])
    with pytest.raises(K.KindFormatError, match="classes"):
        K.KindHead.from_arrays(d)


def test_negative_statistics_fail_loudly():
    with pytest.raises(NegativeInputError, match="non-negative"):
        K.explicit_rows(np.array([[1.0, -2.0, 0, 0, 0]]), np.ones(5), np.ones(5), 1, 0.03)
    with pytest.raises(ValueError, match="whole numbers"):
        K.KindHead(K.KindConfig(owner_weight=2.5))


def test_explicit_rows_do_not_depend_on_the_subset():
    head = small_head(steps=0)
    ids = np.flatnonzero(head.df[: len(head.vocab)] > 0.5)
    full = K.solved(head)[ids]
    for part in (ids[:7], ids[5:40:3]):
        assert np.array_equal(head.weights(part), K.solved(head)[part] + head.delta[part])
    assert np.array_equal(K.solved(head)[ids], full)


def test_refinement_gradient_matches_finite_differences():
    head = small_head(steps=0)
    texts, kinds = [t for t, _ in SMALL], [k for _, k in SMALL]
    labels = np.array([KIND_INDEX[k] for k in kinds])
    X, B, s = K.design(head, texts), K.solved(head), K.class_weights(labels)
    rng = np.random.default_rng(0)  # a test point only; the head itself has no random numbers
    delta, bias = rng.normal(0, 0.3, B.shape), rng.normal(0, 0.3, len(KINDS))
    _, gD, gb = K.objective(X, B, delta, bias, labels, s, 0.01)
    h = 1e-6
    cols = np.flatnonzero(np.asarray(X.sum(axis=0)).ravel() > 0)[:6]
    for j in cols:
        for y in range(len(KINDS)):
            d1, d2 = delta.copy(), delta.copy()
            d1[j, y] += h
            d2[j, y] -= h
            num = (K.objective(X, B, d1, bias, labels, s, 0.01)[0] - K.objective(X, B, d2, bias, labels, s, 0.01)[0]) / (2 * h)
            assert gD[j, y] == pytest.approx(num, rel=1e-4, abs=1e-7)
    for y in range(len(KINDS)):
        b1, b2 = bias.copy(), bias.copy()
        b1[y] += h
        b2[y] -= h
        num = (K.objective(X, B, delta, b1, labels, s, 0.01)[0] - K.objective(X, B, delta, b2, labels, s, 0.01)[0]) / (2 * h)
        assert gb[y] == pytest.approx(num, rel=1e-4, abs=1e-7)
    losses = K.fit_refinement(head, texts, kinds, steps=20, lr=1.0, l2=1e-3)
    assert losses[-1] < losses[0]


def test_shipped_head_quality_floor_on_the_crowd_file(shipped):
    # measured: balanced accuracy .931, ECE .037 (benchmarks/results/kind-head.json);
    # the floor is a little below, so that a collapse fails
    rows = [json.loads(line) for line in CROWD.read_text(encoding="utf-8").splitlines() if line.strip()]
    P = np.array([list(shipped.predict(r["text"]).distribution.values()) for r in rows])
    labels = np.array([KIND_INDEX[r["kind"]] for r in rows])
    report = K.calibration_report(P, labels)
    assert report["balanced_accuracy"] >= 0.88
    assert report["ece"] <= 0.08
    for name in ("DIM", "BRIGHTEN", "LEVEL", "QUERY"):
        assert report["kinds"][name]["accuracy"] >= 0.8, name


def test_the_shipped_head_is_package_data():
    assert K.SHIPPED.is_file() and K.SHIPPED.parent == ROOT / "edge_plm" / "data" / "models"
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'edge_plm = ["data/*", "data/**/*"]' in text
