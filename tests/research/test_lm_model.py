"""SAFFU language model: finite-difference gradients, Numba == NumPy parity, bucketed ==
unbucketed, warm start determinism, negative inputs rejected, cache rebuilt on thaw."""

from __future__ import annotations

import numpy as np
import pytest

from edge_plm.research.lm import kernels as lm_kernels, reference as lm_ref
from edge_plm.research.lm.corpus import batches_from_docs
from edge_plm.research.lm.model import SaffuLM
from edge_plm.research.lm.warmstart import LMWarmStart, add_onehot
from edge_plm.research.lm.subword import CharVocab
from edge_plm.plm.warmstart import CooccurrenceStats, NegativeInputError

from _lm_util import TEXT, randomize, tiny_config

V = 20


def _docs(seed=1, lengths=(3, 9, 20, 1, 15)):
    rng = np.random.default_rng(seed)
    return [rng.integers(3, V, n) for n in lengths]


def _model(kernel="numpy", seed=0):
    return randomize(SaffuLM(tiny_config(kernel=kernel), V), seed)


@pytest.mark.parametrize("seed", [0, 1])
def test_finite_difference_gradients(seed):
    m = _model("numpy", seed)
    batch = batches_from_docs(_docs(seed), m.config.widths, 1000, bucketed=False)[0]
    loss, g = m.gradients(batch, need_dE=True)
    assert set(g) == {"W.0", "W.1", "W.2", "U.0", "U.1", "U.2", "O", "E"}
    rng = np.random.default_rng(seed + 5)
    for name, grad in g.items():
        arr = m.E if name == "E" else m.params[name]
        for _ in range(6):
            i = tuple(int(rng.integers(0, s)) for s in arr.shape)
            old = arr[i]
            arr[i] = old + 1e-6
            lp = m.loss(batch)
            arr[i] = old - 1e-6
            lm = m.loss(batch)
            arr[i] = old
            assert (lp - lm) / 2e-6 == pytest.approx(grad[i], rel=1e-4, abs=1e-8), (name, i)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numba_equals_numpy(seed):
    m = _model("numpy", seed)
    C = m.comparisons()
    for batch in batches_from_docs(_docs(seed), m.config.widths, 7, np.random.default_rng(seed)):
        bi = batch.branch
        args = (batch.ctx, batch.lengths, batch.targets, m.E, C, m.params[f"W.{bi}"], m.params[f"U.{bi}"], m.params["O"])
        r, f = lm_ref.branch_forward(*args), lm_kernels.branch_forward(*args)
        for k in ("c", "a", "z", "h", "y", "nll"):
            np.testing.assert_allclose(getattr(f, k), getattr(r, k), rtol=1e-9, atol=1e-12, err_msg=k)
        W, U, O = args[5:]
        gr = lm_ref.branch_backward(r, batch.targets, m.E, W, U, O, 50, True)
        gf = lm_kernels.branch_backward(f, batch.targets, m.E, W, U, O, 50, True)
        for name, a, b in zip(("dW", "dU", "dO", "dE"), gf, gr):
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-13, err_msg=name)


@pytest.mark.parametrize("kernel", ["numpy", "numba"])
def test_bucketed_equals_unbucketed(kernel):
    m = _model(kernel, 3)
    docs = _docs(4)
    mixed = batches_from_docs(docs, m.config.widths, 10**6, bucketed=False)[0]
    buckets = batches_from_docs(docs, m.config.widths, 5, np.random.default_rng(0))
    assert all(b.ctx.shape[1] == m.config.widths[b.branch] for b in buckets)
    n = sum(len(b) for b in buckets)
    assert n == len(mixed)
    total = sum(float(m.nll(b).sum()) for b in buckets)
    assert total / n == pytest.approx(m.loss(mixed), rel=1e-12)
    # fully padded reference (every sample at the longest width) gives the same numbers
    branches = np.searchsorted(np.asarray(m.config.widths), mixed.lengths)
    Ws = [m.params[f"W.{i}"] for i in range(3)]
    Us = [m.params[f"U.{i}"] for i in range(3)]
    padded = lm_ref.padded_forward_nll(mixed.ctx, mixed.lengths, mixed.targets, branches, m.config.widths,
                                       m.E, m.comparisons(), Ws, Us, m.params["O"])
    np.testing.assert_allclose(padded, m.nll(mixed), rtol=1e-12)
    # gradients too: one bucketed batch per branch summed == the mixed batch's
    _, g_mixed = m.gradients(mixed)
    per_branch = batches_from_docs(docs, m.config.widths, 10**6, None)
    acc = {}
    for b in per_branch:
        _, g = m.gradients(b)
        for k, v in g.items():
            acc[k] = acc.get(k, 0) + v * len(b) / n
    for k in g_mixed:
        np.testing.assert_allclose(acc[k], g_mixed[k], rtol=1e-9, atol=1e-15, err_msg=k)


def _warm(text, kernel="numba"):
    tok = CharVocab.train([text])
    m = SaffuLM(tiny_config(kernel=kernel), len(tok))
    ids = [tok.encode(p + "\n\n") for p in text.split("\n\n") if p]
    LMWarmStart(m).run(batches_from_docs(ids, m.config.widths, 32))
    return m, tok, ids


def test_warm_start_deterministic_and_better_than_uniform():
    m1, tok, ids = _warm(TEXT * 3)
    m2, _, _ = _warm(TEXT * 3)
    for k in m1.params:
        assert np.array_equal(m1.params[k], m2.params[k]), k
        assert m1.params[k].tobytes() == m2.params[k].tobytes()
    assert np.array_equal(m1.E, m2.E)
    batch = batches_from_docs(ids, m1.config.widths, 10**6, bucketed=False)[0]
    assert m1.loss(batch) < np.log(len(tok)) - 0.5  # zero parameters = uniform = log V


def test_warm_start_positional_heads_attend_to_their_slot():
    m, _, ids = _warm(TEXT * 3)
    for b in batches_from_docs(ids, m.config.widths, 10**6, None):
        bi = b.branch
        cache = lm_ref.branch_forward(b.ctx, b.lengths, b.targets, m.E, m.comparisons(), m.params[f"W.{bi}"],
                                      m.params[f"U.{bi}"], m.params["O"])
        for h in range(m.config.positional_heads):
            rows = b.lengths > h
            assert cache.a[rows, h, h].mean() > 0.9


def test_negative_inputs_rejected():
    s = CooccurrenceStats(3, 4)
    with pytest.raises(NegativeInputError):
        add_onehot(s, np.array([[0.1, -0.2, 0.3]]), np.array([1]))
    m = SaffuLM(tiny_config(), V)
    m.E[5, 0] = -0.5  # a negative code makes negative comparisons: the warm start must refuse
    b = batches_from_docs([np.full(6, 5)], m.config.widths, 100, None)[0]
    with pytest.raises(NegativeInputError):
        LMWarmStart(m).observe(b)
