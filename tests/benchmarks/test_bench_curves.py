"""Tests for the benchmark harness (benchmarks/curves.py) and keyword baseline."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import curves  # noqa: E402
from baselines import keyword_label, markdown_table, run  # noqa: E402


def test_confusion_and_balanced_accuracy_hand_computed():
    y_true = ["ON", "ON", "OFF", "NOOP", "NOOP", "NOOP"]
    y_pred = ["ON", "NOOP", "OFF", "NOOP", "ON", "NOOP"]
    assert curves.confusion(y_true, y_pred) == {
        "ON": {"ON": 1, "OFF": 0, "NOOP": 1},
        "OFF": {"ON": 0, "OFF": 1, "NOOP": 0},
        "NOOP": {"ON": 1, "OFF": 0, "NOOP": 2},
    }
    # recalls: ON 1/2, OFF 1/1, NOOP 2/3 -> mean 13/18
    assert curves.balanced_accuracy(y_true, y_pred) == pytest.approx(13 / 18)
    assert curves.accuracy(y_true, y_pred) == pytest.approx(4 / 6)


def test_balanced_accuracy_ignores_classes_absent_from_truth():
    # OFF never occurs in y_true: mean over ON (0/1) and NOOP (1/1) only.
    assert curves.balanced_accuracy(["ON", "NOOP"], ["OFF", "NOOP"]) == pytest.approx(0.5)


def test_confusion_rejects_bad_input():
    with pytest.raises(ValueError):
        curves.confusion(["ON"], ["ON", "OFF"])
    with pytest.raises(ValueError):
        curves.confusion(["ON"], ["MAYBE"])


def test_train_orders_deterministic_and_order0_identity():
    a = curves.train_orders(50, 5)
    b = curves.train_orders(50, 5)
    assert a == b
    assert len(a) == 5
    assert a[0] == list(range(50))
    for seed, order in enumerate(a[1:], start=1):
        assert sorted(order) == list(range(50))
        assert order == list(np.random.default_rng(seed).permutation(50))
    assert a[1] != a[0] and a[1] != a[2]
    assert curves.train_orders(7, 1) == [list(range(7))]


def test_pyrandom_orders_are_permutations_and_deterministic():
    a = curves.pyrandom_orders(30, 3)
    assert a == curves.pyrandom_orders(30, 3)
    assert all(sorted(o) == list(range(30)) for o in a)


def test_budgets_rule():
    assert curves.budgets_for(425) == [
        ("10", 10), ("20", 20), ("50", 50), ("100", 100), ("200", 200), ("all", 425)]
    # budgets at or beyond the file collapse into a single "all"
    assert curves.budgets_for(60) == [("10", 10), ("20", 20), ("50", 50), ("all", 60)]
    assert curves.budgets_for(50, (10, 50, 100)) == [("10", 10), ("all", 50)]
    assert curves.budgets_for(5, (None,)) == [("all", 5)]


@pytest.mark.parametrize("text,label", [
    ("turn on the kitchen light", "ON"),
    ("Lights ON please", "ON"),
    ("switch the plug off.", "OFF"),
    ("turn off the lights, then turn them on", "NOOP"),
    ("what's the weather tomorrow", "NOOP"),
    ("play the song onward", "NOOP"),     # whole words only
    ("offer me a coffee", "NOOP"),
    ("dim the lights", "NOOP"),
])
def test_keyword_rule(text, label):
    assert keyword_label(text) == label


def test_keyword_rule_both_variant():
    assert keyword_label("power off on", both="OFF") == "OFF"
    assert keyword_label("power off on") == "NOOP"


def test_load_jsonl_reports_bad_line(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"text": "turn on", "label": "ON"}\n\n{not json}\n')
    with pytest.raises(ValueError, match=r"d\.jsonl:3"):
        curves.load_jsonl(p)
    p.write_text('{"text": "turn on", "label": "YES"}\n')
    with pytest.raises(ValueError, match="label"):
        curves.load_jsonl(p)
    p.write_text('{"text": "turn on", "label": "ON", "intent": "x"}\n\n')
    assert curves.load_jsonl(p) == [{"text": "turn on", "label": "ON", "intent": "x"}]


def _rows(pairs):
    return [{"text": t, "label": lab} for t, lab in pairs]


def test_learning_curve_shape_and_single_class_fallback():
    train = _rows([("turn on the lamp", "ON")] * 3 + [("turn off the lamp", "OFF")] * 3
                  + [("what time is it", "NOOP")] * 3)
    test = _rows([("turn on", "ON"), ("turn off", "OFF"), ("hello there", "NOOP")])
    curve = curves.learning_curve(lambda tr, te: [keyword_label(t) for t in te],
                                  train, test, (2, None), 3)
    assert list(curve) == ["2", "all"]
    assert curve["all"]["n"] == 9
    assert curve["2"]["per_order"] == [1.0, 1.0, 1.0]
    assert curve["all"]["mean"] == 1.0
    # the sklearn baselines must not crash when the prefix holds one class
    pytest.importorskip("sklearn")
    results = run(train, test, orders=[list(range(9))], budgets=(1, 3, None))
    for name, c in results.items():
        assert set(c) == {"1", "3", "all"}
        assert 0.0 <= c["1"]["mean"] <= 1.0
    table = markdown_table(results, len(train), (1, 3, None))
    assert table.splitlines()[0] == "| n | 1 | 3 | all |"
    json.dumps(results)  # JSON-serialisable
