"""Shared harness for learning-curve benchmarks (docs/design.md section 4).

A learning curve is balanced accuracy on a fixed test file after a learner has
seen the first ``n`` training examples, for several budgets ``n`` and averaged
over several orders of the training file.

Orders (``train_orders``):
  * order 0 is the file order (identity permutation);
  * order ``i`` for ``i = 1 .. k-1`` is ``numpy.random.default_rng(i).permutation(n)``,
    i.e. the seed is the order index.  This is fixed so curves are reproducible
    across machines and runs and comparable between learners.

``pyrandom_orders`` is a second, documented scheme: order ``i`` for ``i = 0 .. k-1``
is ``list(range(n))`` shuffled in place by ``random.Random(i).shuffle`` (no
identity order).  It is the scheme docs/design.md's baseline table was measured with
(it reproduces the naive-Bayes row exactly); use it only to reproduce that table.

Budgets (``budgets_for``): a budget of ``None`` or one at or beyond the size of the
training file means "all"; such budgets collapse into one ``"all"`` entry.

A learner is any ``fit_predict(train_rows, test_texts) -> list[str]`` where
``train_rows`` is a list of ``{"text": str, "label": str}`` dicts (the training
prefix, in order) and the result holds one label per test text.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from edge_plm.jsonl import LABELS, JsonlError, label_of, read_objects

FitPredict = Callable[[list, list], list]


def load_jsonl(path) -> list[dict]:
    """Read a JSONL file of ``{"text": ..., "label": ...}`` rows (other keys kept), with the
    package's own reader (``edge_plm.jsonl``, what ``edge-plm eval`` uses).

    Blank lines are skipped.  A line that is not a JSON object, lacks a string
    ``text``, or has a ``label`` outside LABELS raises ``ValueError`` (``JsonlError``) naming
    the file and 1-based line number.
    """
    rows: list[dict] = []
    for lineno, row in read_objects(path, "data file"):
        if not isinstance(row.get("text"), str):
            raise JsonlError(f"{path}:{lineno}: missing or non-string 'text'")
        if "label" in row:
            label_of(path, lineno, row)
        rows.append(row)
    return rows


def load_switch_dev(data, asr: bool = False) -> tuple[list[dict], list[dict]]:
    """(train, test) of switch-dev: the clean files in `data`, or with `asr` the pocketsphinx
    transcripts of the same utterances in benchmarks/data/ (asr_transcripts.py)."""
    folder = Path(__file__).resolve().parent / "data" if asr else Path(data)
    suffix = ".asr.jsonl" if asr else ".jsonl"
    return load_jsonl(folder / f"switch-dev-train{suffix}"), load_jsonl(folder / f"switch-dev-test{suffix}")


def train_orders(n: int, k: int = 5) -> list[list[int]]:
    """Return ``k`` orders (index lists) of ``n`` training rows.

    Order 0 is ``[0, 1, ..., n-1]`` (file order).  Order ``i >= 1`` is
    ``numpy.random.default_rng(i).permutation(n)`` (seed = order index).
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    orders = [list(range(n))]
    for seed in range(1, k):
        orders.append([int(i) for i in np.random.default_rng(seed).permutation(n)])
    return orders


def pyrandom_orders(n: int, k: int = 5) -> list[list[int]]:
    """Orders ``random.Random(i).shuffle(list(range(n)))`` for ``i = 0 .. k-1``.

    Reproduces the orders behind docs/design.md's baseline table; the harness
    default is ``train_orders``.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    orders = []
    for seed in range(k):
        idx = list(range(n))
        random.Random(seed).shuffle(idx)
        orders.append(idx)
    return orders


ORDER_SCHEMES = {"spec": train_orders, "pyrandom": pyrandom_orders}


def confusion(y_true: Sequence[str], y_pred: Sequence[str]) -> dict[str, dict[str, int]]:
    """Confusion counts: ``result[true_label][predicted_label]`` over LABELS."""
    if len(y_true) != len(y_pred):
        raise ValueError(f"length mismatch: {len(y_true)} true vs {len(y_pred)} predicted")
    table = {t: {p: 0 for p in LABELS} for t in LABELS}
    for t, p in zip(y_true, y_pred):
        if t not in table:
            raise ValueError(f"unknown true label {t!r}")
        if p not in table[t]:
            raise ValueError(f"unknown predicted label {p!r}")
        table[t][p] += 1
    return table


def balanced_accuracy(y_true: Sequence[str], y_pred: Sequence[str]) -> float:
    """Mean per-class recall over the classes present in ``y_true``."""
    cm = confusion(y_true, y_pred)
    recalls = []
    for t in LABELS:
        support = sum(cm[t].values())
        if support:
            recalls.append(cm[t][t] / support)
    if not recalls:
        raise ValueError("balanced_accuracy of an empty set")
    return float(sum(recalls) / len(recalls))


def accuracy(y_true: Sequence[str], y_pred: Sequence[str]) -> float:
    """Fraction of exact matches."""
    if len(y_true) != len(y_pred):
        raise ValueError(f"length mismatch: {len(y_true)} true vs {len(y_pred)} predicted")
    if not y_true:
        raise ValueError("accuracy of an empty set")
    return sum(t == p for t, p in zip(y_true, y_pred)) / len(y_true)


def budgets_for(n_train: int, budgets: Iterable = (10, 20, 50, 100, 200, None)) -> list:
    """Resolve budgets against a training file of ``n_train`` rows.

    Returns a list of ``(label, n)`` pairs in the given order: a budget below
    ``n_train`` keeps its value as label; ``None`` or a budget ``>= n_train``
    becomes ``("all", n_train)``, and only the first such "all" is kept.
    """
    out = []
    seen_all = False
    for b in budgets:
        if b is None or b >= n_train:
            if not seen_all:
                out.append(("all", n_train))
                seen_all = True
        else:
            if b < 0:
                raise ValueError(f"negative budget {b}")
            out.append((str(b), int(b)))
    return out


def learning_curve(
    fit_predict: FitPredict,
    train: Sequence[dict],
    test: Sequence[dict],
    budgets: Iterable = (10, 20, 50, 100, 200, None),
    orders=5,
) -> dict[str, dict]:
    """Balanced accuracy after each budget, per order and averaged.

    ``orders`` is either an int ``k`` (then ``train_orders(len(train), k)``) or
    an explicit list of index lists.  Returns
    ``{budget_label: {"n": int, "mean": float, "per_order": [float, ...]}}``
    with budget labels as produced by ``budgets_for`` (e.g. ``"10"``, ``"all"``).
    """
    if isinstance(orders, int):
        orders = train_orders(len(train), orders)
    test_texts = [r["text"] for r in test]
    y_true = [r["label"] for r in test]
    curve: dict[str, dict] = {}
    for label, n in budgets_for(len(train), budgets):
        scores = []
        for order in orders:
            prefix = [train[i] for i in order[:n]]
            y_pred = list(fit_predict(prefix, test_texts))
            scores.append(balanced_accuracy(y_true, y_pred))
        curve[label] = {"n": n, "mean": float(np.mean(scores)), "per_order": scores}
    return curve
