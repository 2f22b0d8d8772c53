"""Numba kernels == their NumPy reference twins (kernels.py vs saffu.py): every forward cache
and every gradient, on random parameters and varied lengths, within relative 1e-6."""

from __future__ import annotations

import numpy as np
import pytest

from edge_plm.research import kernels, saffu
from edge_plm.research.charnet.network import Batch

from _plm_util import copy_params, random_net, random_sequences

RTOL = 1e-6
LENGTH_SETS = [[1], [3, 8], [9, 16, 2, 5], [16, 16], [7, 15, 30, 1, 11]]


def _close(actual, desired, name):
    actual, desired = np.asarray(actual), np.asarray(desired)
    assert actual.shape == desired.shape, f"{name}: shape {actual.shape} != {desired.shape}"
    scale = max(np.abs(desired).max(initial=0.0), 1e-300)
    np.testing.assert_allclose(actual, desired, rtol=RTOL, atol=RTOL * 1e-3 * scale, err_msg=name)


def _pair(seed, **overrides):
    ref = random_net("numpy", seed=seed, scale=1.0, **overrides)
    fast = random_net("numba", seed=seed, **overrides)
    copy_params(ref, fast)
    return ref, fast


@pytest.mark.parametrize("lengths", LENGTH_SETS)
@pytest.mark.parametrize("seed", [0, 1])
def test_forward_caches_equal(lengths, seed):
    ref, fast = _pair(seed)
    b = Batch.from_sequences(random_sequences(lengths, seed=seed + 10))
    ids_r, lr, gr = ref.forward(b)
    ids_f, lf, gf = fast.forward(b)
    np.testing.assert_array_equal(ids_r.ids, ids_f.ids)
    np.testing.assert_array_equal(lr.win, lf.win)
    np.testing.assert_array_equal(lr.valid, lf.valid)
    for name in ("c", "a", "z", "h"):
        _close(getattr(lf, name), getattr(lr, name), f"local.{name}")
    np.testing.assert_array_equal(gr.branch, gf.branch)
    for name in ("z2", "g", "y"):
        _close(getattr(gf, name), getattr(gr, name), f"global.{name}")
    # per-sample global caches: the NumPy twin keeps (B,) / (B, dh) per sample, Numba pads to Bmax
    for n, Ln in enumerate(ids_r.lengths):
        B = len(gr.a2[n])
        _close(np.asarray(gf.a2[n])[:B], gr.a2[n], f"a2[{n}]")
        _close(np.asarray(gf.c2[n])[:Ln], np.asarray(gr.c2[n])[:Ln], f"c2[{n}]")
        # Numba sizes X2 by the batch's longest sequence (rows past a sequence are never
        # read); the reference keeps B rows, zero past the sequence's length
        _close(np.asarray(gf.X2[n])[:Ln], np.asarray(gr.X2[n])[:Ln], f"X2[{n}]")
        assert not np.asarray(gr.X2[n])[Ln:].any()
        assert (np.asarray(gf.a2[n])[B:] == 0).all()


@pytest.mark.parametrize("lengths", LENGTH_SETS)
@pytest.mark.parametrize("seed", [0, 1])
def test_gradients_equal(lengths, seed):
    ref, fast = _pair(seed)
    seqs = random_sequences(lengths, seed=seed + 20)
    labels = [(i + seed) % 3 for i in range(len(seqs))]
    b = Batch.from_sequences(seqs, labels)
    loss_r, gr = ref.gradients(b, need_dE=True)
    loss_f, gf = fast.gradients(b, need_dE=True)
    assert loss_f == pytest.approx(loss_r, rel=1e-12)
    assert set(gr) == set(gf) == {"W", "U", "W2", "U2", "O", "E"}
    for k in gr:
        if max(lengths) > 1:  # with one token, attention has one slot and dW is exactly 0
            assert np.abs(gr[k]).max() > 0, f"{k}: zero gradient makes the parity check vacuous"
        _close(gf[k], gr[k], f"d{k}")


def test_raw_kernels_equal_with_arbitrary_upstream_gradient():
    """The backward kernels against the twins with a random dL/dh and dL/dv (not just the ones
    the loss produces), including need_dE=False returning None."""
    ref, _ = _pair(4)
    b = Batch.from_sequences(random_sequences([4, 13, 9], seed=6))
    p, E, C = ref.params, ref.E, ref.comparisons()
    widths = ref.config.widths
    out = {}
    for name, (lf, lb, gf, gb) in kernels.BACKENDS.items():
        local = lf(b.ids, b.lengths, E, C, p["W"], p["U"])
        glob = gf(local.h, b.lengths, widths, p["W2"], p["U2"], p["O"])
        dv = np.random.default_rng(7).normal(size=glob.y.shape)
        dW2, dU2, dO, dh = gb(local.h.shape, b.lengths, widths, p["W2"], p["U2"], p["O"], glob, dv)
        dh_up = np.random.default_rng(8).normal(size=local.h.shape) * local.valid[:, :, :1]
        dW, dU, dE = lb(b.ids, b.lengths, E, C, p["W"], p["U"], local, dh_up, True)
        _, _, none = lb(b.ids, b.lengths, E, C, p["W"], p["U"], local, dh_up, False)
        assert none is None
        out[name] = dict(dW2=dW2, dU2=dU2, dO=dO, dh=dh, dW=dW, dU=dU, dE=dE)
    for k, v in out["numpy"].items():
        _close(out["numba"][k], v, k)


@pytest.mark.parametrize("kernel", ["numpy", "numba"])
def test_backend_selected_by_config(kernel):
    net = random_net(kernel)
    assert net._backend() is kernels.BACKENDS[kernel]
    assert kernels.BACKENDS["numpy"][0] is saffu.local_forward


def test_training_trajectories_agree():
    """Twenty Adam steps (thawed for the last ten) on each backend end at the same parameters."""
    ref, fast = _pair(2)
    b = Batch.from_sequences(random_sequences([5, 12, 8, 3, 16], seed=3), [0, 1, 2, 0, 1])
    for step in range(20):
        if step == 10:
            ref.thaw(), fast.thaw()
        lr_, lf_ = ref.train_step(b), fast.train_step(b)
        assert lf_ == pytest.approx(lr_, rel=1e-9)
    for k in ref.delta:
        np.testing.assert_allclose(fast.delta[k], ref.delta[k], rtol=1e-7, atol=1e-9, err_msg=k)
    np.testing.assert_allclose(fast.E, ref.E, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("lengths", LENGTH_SETS)
def test_token_table_equal(lengths):
    """kernels.token_table (Numba _token_ids + one matmul) == saffu.token_table: the distinct
    tokens of the batch, their compact index, and E[used] @ U_h per head."""
    ref, _ = _pair(5)
    b = Batch.from_sequences(random_sequences(lengths, seed=len(lengths)))
    p = ref.params
    U3 = p["U"].reshape(ref.config.heads, ref.E.shape[1], -1)
    out_r = saffu.token_table(b.ids, b.lengths, ref.E, U3)
    out_f = kernels.token_table(b.ids, b.lengths, ref.E, U3, kernels.Workspace())
    for name, r, f in zip(("cid", "used", "Eu", "EU"), out_r, out_f):
        if name in ("cid", "used"):
            np.testing.assert_array_equal(f, r, err_msg=name)
        else:
            _close(f, r, name)
    assert (out_r[0] >= 0).sum() == len(out_r[1]) <= ref.E.shape[0]


def test_workspace_buffers_are_fully_overwritten():
    """With a workspace whose buffers hold NaN garbage (and are larger than needed), the Numba
    forward and backward give exactly what they give on fresh arrays, and the reference's
    values: every output entry, padding included, is written by the kernels."""
    ref, fast = _pair(6)
    p, E, C, widths = fast.params, fast.E, fast.comparisons(), fast.config.widths
    ws = kernels.Workspace()
    big = Batch.from_sequences(random_sequences([16, 3, 15, 9, 12], seed=1))
    lf, lb, gf, gb = kernels.BACKENDS["numba"]
    local = lf(big.ids, big.lengths, E, C, p["W"], p["U"], ws=ws)
    glob = gf(local.h, big.lengths, widths, p["W2"], p["U2"], p["O"], ws=ws)
    gb(local.h.shape, big.lengths, widths, p["W2"], p["U2"], p["O"], glob, np.ones(glob.y.shape), ws=ws)
    for buf in ws._buffers.values():
        buf[...] = np.nan if buf.dtype.kind == "f" else (True if buf.dtype.kind == "b" else -7)
    b = Batch.from_sequences(random_sequences([4, 13, 9], seed=2), [0, 1, 2])
    runs = {}
    for name, w in (("fresh", None), ("reused", ws)):
        local = lf(b.ids, b.lengths, E, C, p["W"], p["U"], ws=w)
        glob = gf(local.h, b.lengths, widths, p["W2"], p["U2"], p["O"], ws=w)
        dv = np.random.default_rng(3).normal(size=glob.y.shape)
        dW2, dU2, dO, dh = gb(local.h.shape, b.lengths, widths, p["W2"], p["U2"], p["O"], glob, dv, ws=w)
        dW, dU, dE = lb(b.ids, b.lengths, E, C, p["W"], p["U"], local, dh, True, ws=w)
        runs[name] = {**{k: getattr(local, k).copy() for k in ("win", "valid", "c", "a", "z", "h")},
                      "y": glob.y, "dh": dh.copy(), "dW": dW, "dU": dU, "dE": dE, "dW2": dW2, "dU2": dU2, "dO": dO}
    for k, v in runs["fresh"].items():
        np.testing.assert_array_equal(runs["reused"][k], v, err_msg=k)
    # and the twins agree with both
    lr = saffu.local_forward(b.ids, b.lengths, E, C, p["W"], p["U"])
    for k in ("c", "a", "z", "h"):
        _close(runs["reused"][k], getattr(lr, k), k)
    np.testing.assert_array_equal(runs["reused"]["win"], lr.win)


def test_gradients_reuse_workspace_across_batch_shapes():
    """SwitchNet.gradients keeps one workspace per net: alternating batch shapes (longer,
    shorter, more rows, fewer) gives the reference gradients every time."""
    ref, fast = _pair(8)
    for i, lengths in enumerate([[30, 2, 9], [5], [7, 15, 1, 11, 16, 3], [4, 4]]):
        seqs = random_sequences(lengths, seed=40 + i)
        b = Batch.from_sequences(seqs, [(j + i) % 3 for j in range(len(seqs))])
        loss_r, gr = ref.gradients(b, need_dE=True)
        loss_f, gf = fast.gradients(b, need_dE=True)
        assert loss_f == pytest.approx(loss_r, rel=1e-12)
        for k in gr:
            _close(gf[k], gr[k], f"d{k} (batch {i})")


def test_vectorised_exp_matches_numpy_exp():
    """kernels._exp_into (the softmax exp of the local block) == np.exp within 1 ulp on the
    range softmax uses (x <= 0), 0 where exp is subnormal, exact at 0 and -inf, NaN kept."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-1.0, 0.0, 20000), rng.uniform(-60.0, 0.0, 20000),
                        rng.uniform(-745.0, 0.0, 20000), -np.logspace(-300, 2.8, 2000),
                        [0.0, -0.0, -708.39, -708.4, -745.2, -1e300, -np.inf, np.nan]])
    out, kbuf = np.empty_like(x), np.empty_like(x)
    kernels._exp_into(x, out, kbuf)
    ref = np.exp(x)
    normal = ref >= np.finfo(float).tiny
    ulps = np.abs(out[normal].view(np.int64) - ref[normal].view(np.int64))
    assert ulps.max() <= 1
    assert np.abs(out[~normal & ~np.isnan(x)] - ref[~normal & ~np.isnan(x)]).max() < 2.3e-308
    assert out[x == 0].tolist() == [1.0, 1.0] and out[x == -np.inf][0] == 0.0
    assert np.isnan(out[np.isnan(x)]).all()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 255, 256, 257])
def test_row_reductions_match_numpy(n):
    """_max (exact, four running maxima), _sum and _dot (SIMD partial sums) == NumPy."""
    rng = np.random.default_rng(n)
    x, y = rng.normal(size=n) * 10, rng.normal(size=n)
    assert kernels._max(x) == x.max()
    assert kernels._sum(x) == pytest.approx(x.sum(), rel=1e-13, abs=1e-13)
    assert kernels._dot(x, y) == pytest.approx(float(x @ y), rel=1e-13, abs=1e-13)


@pytest.mark.parametrize("n", [1, 3, 16, 257])
def test_softmax_inplace_matches_the_numpy_softmax(n):
    """softmax_inplace (global block, LM trainer rows) == saffu.softmax, also on a row view."""
    from edge_plm.research.saffu import softmax

    rng = np.random.default_rng(n)
    x = rng.normal(size=(2, n)) * 30
    expect = softmax(x[1])
    kernels.softmax_inplace(x[1])
    np.testing.assert_allclose(x[1], expect, rtol=1e-12, atol=1e-300)
    assert x[1].sum() == pytest.approx(1.0)
