"""The refinement loop (switch/refine_loop.py) against the steps of ``UnitNet.objective`` it
replaces: the same delta, b and dW, bit for bit, on the full batch, on a replay sample, with and
without attention, and after a forget (rows no example holds any more)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from edge_plm.switch import batches, refine_loop, segment_kernels
from edge_plm.switch.model import SwitchModel

DATA = [("turn on the light", "ON"), ("lights off please", "OFF"), ("what time is it", "NOOP"),
        ("switch the lamp on", "ON"), ("kill the lamp", "OFF"), ("play some jazz", "NOOP"),
        ("could you turn the lights on", "ON"), ("shut off the light", "OFF"), ("how is the weather", "NOOP"),
        ("turn the kitchen lights off now please", "OFF"), ("the lamp in the hall on", "ON"),
        ("set a timer for ten minutes", "NOOP")]


def objective_steps(net, steps: int, keys, kernel: str) -> float:
    """The reference: each step one call of ``objective`` and its gradient step."""
    c = net.config
    for _ in range(steps):
        rows = slice(0, net.n_active) if keys is None else net.sample_batch(keys)[1]
        loss, dD, db, gW = net.objective(keys=keys, kernel=kernel)
        net.delta[rows] -= c.refine_lr * dD
        net.bias -= c.refine_lr * db
        if gW is not None:
            net.att.dW -= c.attention_lr * gW
    return loss


def learned(attention: bool, forget: bool) -> SwitchModel:
    m = SwitchModel.empty("potato", attention=attention)
    m.observe("water the garden")  # units with ids below the labelled ones', never labelled
    for t, y in DATA:
        m.learn(t, y)
    if forget:  # the forgotten example's units keep their delta: the full batch still pulls them
        m.forget_example(9)
    return m


@pytest.mark.parametrize("attention", [True, False])
@pytest.mark.parametrize("forget", [False, True])
@pytest.mark.parametrize("sample", [False, True])
@pytest.mark.parametrize("kernel", ["segments", "numpy"])
def test_the_loop_gives_the_objectives_steps_bit_for_bit(attention, forget, sample, kernel):
    m = learned(attention, forget)
    keys = sorted(m.net.rows)[1::2] if sample else None
    a, b = copy.deepcopy(m.net), copy.deepcopy(m.net)
    if forget and not sample:
        assert len(refine_loop.problem(a, None)[2]) > 0  # rows held by no example are pulled
    la = objective_steps(a, 7, keys, kernel)
    lb = b.refine(7, keys, kernel=kernel)
    np.testing.assert_array_equal(a.delta, b.delta)
    np.testing.assert_array_equal(a.bias, b.bias)
    if attention:
        np.testing.assert_array_equal(a.att.dW, b.att.dW)
    assert lb == pytest.approx(la, rel=1e-12)
    assert b.refine_steps_done == a.refine_steps_done + 7


def test_the_full_batch_reads_only_the_units_it_holds():
    m = learned(True, False)
    b, units, rest = refine_loop.problem(m.net, None)
    held = np.unique(m.net.batch().indices)
    np.testing.assert_array_equal(units, held)
    np.testing.assert_array_equal(units[b.indices], m.net.batch().indices)  # renumbered, the batch kept
    assert len(rest) == 0 and len(units) < m.net.n_active


def test_renumber_is_np_unique_with_its_inverse():
    rng = np.random.default_rng(0)
    for n in (0, 1, 50):
        idx = rng.integers(0, 30, size=n)
        units, local = batches.renumber(idx)
        u, inv = np.unique(idx, return_inverse=True)
        np.testing.assert_array_equal(units, u)
        np.testing.assert_array_equal(local, inv)
        assert local.dtype == np.int64


def test_runs_are_the_bincount_of_a_sorted_index():
    rng = np.random.default_rng(1)
    idx = np.sort(rng.integers(0, 12, size=40))
    w = rng.normal(size=(3, 40))
    for runs in (segment_kernels.Runs(idx, 14), segment_kernels.Runs(idx[:0], 14)):
        n = len(runs.bins) and 40
        want = np.stack([np.bincount(idx[:n], weights=row[:n], minlength=14) for row in w])
        np.testing.assert_allclose(runs.sum(w[:, :n]), want, rtol=1e-13, atol=1e-15)
    ptr = np.concatenate([[0], np.cumsum(np.bincount(idx, minlength=14))])  # empty bins 12 and 13 and between
    np.testing.assert_allclose(segment_kernels.Runs.of_ptr(ptr).sum(w[0]), np.bincount(idx, weights=w[0], minlength=14),
                               rtol=1e-13, atol=1e-15)
