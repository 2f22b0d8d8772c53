"""SAFFU blocks and the switch net (docs/design.md §2.2, §2.4, §2.5): comparison cache, the
multi-context width rule, attention masks, padding invariance, and finite-difference checks of
every gradient on both backends."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from edge_plm.research import saffu
from edge_plm.plm.bitcipher import bit_cipher
from edge_plm.plm.cache import ComparisonCache
from edge_plm.research.charnet.config import CharNetConfig as SwitchConfig
from edge_plm.research.charnet.network import PARAM_NAMES, Batch

from _plm_util import batch, random_net, random_sequences

BACKENDS = ["numpy", "numba"]

# ---------------------------------------------------------------------------------------------
# comparison cache


def test_cache_table_is_gram_matrix():
    E = bit_cipher(30, 6)
    cache = ComparisonCache()
    C = cache.table(E)
    np.testing.assert_allclose(C, E @ E.T, rtol=0, atol=1e-15)
    assert cache.rebuilds == 1 and cache.extensions == 0
    assert cache.table(E) is C, "same E: the table is reused, not recomputed"
    assert cache.table(E.copy()) is C, "an equal copy of E hits the cache (hash by content)"
    assert cache.rebuilds == 1


def test_cache_extends_when_rows_are_appended():
    cache = ComparisonCache()
    C0 = cache.table(bit_cipher(10, 6)).copy()
    E = bit_cipher(25, 6)
    C = cache.table(E)
    assert cache.extensions == 1 and cache.rebuilds == 1
    np.testing.assert_allclose(C, E @ E.T, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(C[:10, :10], C0)


def test_cache_rebuilds_when_E_changes():
    cache = ComparisonCache()
    E = bit_cipher(10, 6)
    cache.table(E)
    E2 = E.copy()
    E2[3, 0] += 0.25
    C = cache.table(E2)
    assert cache.rebuilds == 2 and cache.extensions == 0
    np.testing.assert_allclose(C, E2 @ E2.T)
    # an appended block whose old rows also changed is a rebuild, not an extension
    E3 = np.vstack([E, bit_cipher(12, 6)[10:]])
    cache.table(E3)
    assert cache.rebuilds == 3 and cache.extensions == 0
    np.testing.assert_allclose(cache.C, E3 @ E3.T)
    # in-place modification of the same array object is detected too
    E3[0, 0] += 0.5
    cache.table(E3)
    assert cache.rebuilds == 4
    np.testing.assert_allclose(cache.C, E3 @ E3.T)
    assert cache.rebuild_seconds > 0


@pytest.mark.parametrize("kernel", BACKENDS)
def test_thaw_train_step_invalidates_cache(kernel):
    net = random_net(kernel)
    b = batch([5, 9, 12])
    net.forward(b)
    rebuilds = net.cache.rebuilds
    net.forward(b)
    assert net.cache.rebuilds == rebuilds, "frozen embeddings: no rebuild between forwards"
    E_before = net.E.copy()
    net.train_step(b)  # frozen: E untouched
    np.testing.assert_array_equal(net.E, E_before)
    net.forward(b)
    assert net.cache.rebuilds == rebuilds
    net.thaw()
    net.train_step(b)
    assert not np.array_equal(net.E, E_before), "a thawed step must move E"
    assert (net.E >= 0).all(), "thawed embeddings stay non-negative"
    net.forward(b)
    assert net.cache.rebuilds == rebuilds + 1
    np.testing.assert_allclose(net.comparisons(), net.E @ net.E.T, rtol=1e-13, atol=1e-15)


def test_grow_vocab_extends_cache():
    net = random_net("numpy")
    net.forward(batch([5]))
    net.grow_vocab(30)
    assert net.E.shape[0] == 30
    net.forward(batch([5]))
    assert net.cache.extensions == 1
    np.testing.assert_array_equal(net.E[:20], bit_cipher(20, 8))


# ---------------------------------------------------------------------------------------------
# multi-context width rule


@pytest.mark.parametrize("length,expected", [(1, 0), (7, 0), (8, 0), (9, 1), (16, 1), (17, 2), (64, 2)])
def test_branch_for_smallest_width(length, expected):
    assert saffu.branch_for(length, (8, 16, 64)) == expected


def test_branch_for_beyond_largest_raises():
    with pytest.raises(ValueError, match="exceeds the largest context width 64"):
        saffu.branch_for(65, (8, 16, 64))


def test_width_of_clips():
    net = random_net("numpy")
    assert [net.width_of(n) for n in (3, 8, 9, 16, 400)] == [8, 8, 16, 16, 16]


def test_clip_keeps_last_max_len_tokens():
    net = random_net("numpy")  # widths (8, 16): max_len 16
    seqs = [list(range(1, 21)), [5, 6, 7], list(range(100, 116))]
    b = Batch.from_sequences(seqs, [0, 1, 2])
    c = net._clip(b)
    assert c.ids.shape == (3, 16)
    np.testing.assert_array_equal(c.lengths, [16, 3, 16])
    assert c.ids[0].tolist() == list(range(5, 21))
    assert c.ids[1].tolist() == [5, 6, 7] + [0] * 13
    assert c.ids[2].tolist() == list(range(100, 116))
    np.testing.assert_array_equal(c.labels, [0, 1, 2])
    short = Batch.from_sequences([[1, 2]], [0])
    assert net._clip(short) is short


@pytest.mark.parametrize("kernel", BACKENDS)
def test_long_sequence_predicts_like_its_tail(kernel):
    net = random_net(kernel)
    long = random_sequences([30], seed=5)[0]
    y_long = net.predict_proba(Batch.from_sequences([long]))
    y_tail = net.predict_proba(Batch.from_sequences([long[-16:]]))
    np.testing.assert_allclose(y_long, y_tail, rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# attention


def _global_a2(glob, n):
    return np.asarray(glob.a2[n])


@pytest.mark.parametrize("kernel", BACKENDS)
def test_attention_rows_sum_to_one_and_masks_are_zero(kernel):
    net = random_net(kernel)
    lengths = [1, 2, 5, 9, 16]
    b = batch(lengths)
    ids, local, glob = net.forward(b)
    N, L = ids.ids.shape
    H, w = net.config.heads, net.config.window
    assert local.a.shape == (N, L, H, w)
    for n, Ln in enumerate(lengths):
        for t in range(L):
            for k in range(w):
                if t < Ln and t - k >= 0:
                    assert local.valid[n, t, k]
                else:
                    assert not local.valid[n, t, k]
                    assert (local.a[n, t, :, k] == 0.0).all(), "masked slot must get exactly 0"
            if t < Ln:
                np.testing.assert_allclose(local.a[n, t].sum(axis=-1), 1.0, atol=1e-14)
            else:
                assert (local.a[n, t] == 0.0).all() and (local.h[n, t] == 0.0).all()
                assert (local.z[n, t] == 0.0).all()
        a2 = _global_a2(glob, n)
        np.testing.assert_allclose(a2[:Ln].sum(), 1.0, atol=1e-14)
        assert (a2[Ln:] == 0.0).all(), "global positions past the length must get exactly 0"
        assert (a2[:Ln] > 0).all()
    np.testing.assert_allclose(glob.y.sum(axis=1), 1.0, atol=1e-14)
    # non-negativity and the count-scaled pooling: |z|_1 = heads (local), |z2|_1 = L (global)
    assert (local.z >= 0).all() and (glob.z2 >= 0).all()
    for n, Ln in enumerate(lengths):
        np.testing.assert_allclose(local.z[n, :Ln].sum(axis=-1), H, rtol=1e-13)
        np.testing.assert_allclose(glob.z2[n].sum(), Ln, rtol=1e-13)


@pytest.mark.parametrize("kernel", BACKENDS)
def test_padding_does_not_change_other_outputs(kernel):
    net = random_net(kernel)
    seqs = random_sequences([4, 7], seed=11)
    alone = net.forward(Batch.from_sequences(seqs))
    padded_seqs = seqs + random_sequences([15], seed=12)
    padded = net.forward(Batch.from_sequences(padded_seqs))
    _, la, ga = alone
    _, lp, gp = padded
    L = la.h.shape[1]
    for n in range(2):
        np.testing.assert_allclose(lp.h[n, :L], la.h[n], rtol=1e-12, atol=1e-300)
        assert (lp.h[n, L:] == 0).all()
        np.testing.assert_allclose(lp.a[n, :L], la.a[n], rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(gp.z2[n], ga.z2[n], rtol=1e-12)
        np.testing.assert_allclose(gp.y[n], ga.y[n], rtol=1e-12)
    # and each alone, batch of one
    for n, s in enumerate(seqs):
        y1 = net.predict_proba(Batch.from_sequences([s]))[0]
        np.testing.assert_allclose(y1, gp.y[n], rtol=1e-12)


@pytest.mark.parametrize("kernel", BACKENDS)
def test_padding_does_not_change_gradients(kernel):
    net = random_net(kernel)
    seqs = random_sequences([4, 7], seed=11)
    _, g1 = net.gradients(Batch.from_sequences(seqs, [0, 2]), need_dE=True)
    # the same two sequences with 8 extra padding columns (L = 15 instead of 7)
    b = Batch.from_sequences(seqs, [0, 2])
    ids = np.zeros((2, 15), dtype=np.int64)
    ids[:, : b.ids.shape[1]] = b.ids
    _, g2 = net.gradients(Batch(ids, b.lengths, b.labels), need_dE=True)
    for k in g1:
        np.testing.assert_allclose(g2[k], g1[k], rtol=1e-11, atol=1e-14)


# ---------------------------------------------------------------------------------------------
# finite-difference gradient checks


def _fd_check(net, b, names, h=1e-5):
    loss, grads = net.gradients(b, need_dE="E" in names)
    assert loss == pytest.approx(net.loss(b), rel=1e-13)
    p = {k: v.copy() for k, v in net.params.items()}
    shared_u2 = getattr(net.config, "shared_u2", False)
    for name in names:
        if name == "E":
            target, param_dict = net.E, None
        else:
            target, param_dict = p[name], p
        g = grads[name]
        if name == "U2" and shared_u2:
            # one U_B stored once per branch: the parameter is the shared matrix, so perturb
            # every branch's copy together; the tied gradient lives in copy 0, the rest are 0
            for bi in range(1, g.shape[0]):
                assert not g[bi].any()
            view, g = target, g[0]
            target = target[0].copy()
        fd = np.zeros_like(target)
        it = np.nditer(target, flags=["multi_index"])
        for _ in it:
            i = it.multi_index
            for sign, slot in ((+1, 0), (-1, 1)):
                if name == "U2" and shared_u2:
                    view[(slice(None), *i)] = target[i] + sign * h
                else:
                    target[i] += sign * h
                val = net.loss(b, param_dict)
                if name == "U2" and shared_u2:
                    view[(slice(None), *i)] = target[i]
                else:
                    target[i] -= sign * h
                if slot == 0:
                    lp = val
                else:
                    lm = val
            fd[i] = (lp - lm) / (2 * h)
        assert g.shape == target.shape
        scale = max(np.abs(g).max(), np.abs(fd).max())
        assert scale > 1e-6, f"{name}: gradient is identically zero; the check would be vacuous"
        rel = np.linalg.norm(g - fd) / (np.linalg.norm(g) + np.linalg.norm(fd))
        assert rel < 1e-5, f"{name}: relative error {rel:.3g}"
        # elementwise, with an absolute floor at the finite-difference noise level (~1e-9)
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-8, err_msg=name)


HAS_SHARED_U2 = "shared_u2" in {f.name for f in dataclasses.fields(SwitchConfig)}


@pytest.mark.parametrize("kernel", BACKENDS)
@pytest.mark.parametrize("variant", ["default", "per-branch U2"])
def test_gradients_finite_difference(kernel, variant):
    if variant != "default" and not HAS_SHARED_U2:
        pytest.skip("config has no shared_u2 switch")
    overrides = {} if variant == "default" else {"shared_u2": False}
    net = random_net(kernel, seed=3, **overrides)
    # lengths cover both branches (8 and 16); labels cover all classes
    b = batch([5, 12, 8, 3], labels=[0, 1, 2, 0], seed=4)
    _fd_check(net, b, list(PARAM_NAMES) + ["E"])


@pytest.mark.parametrize("kernel", BACKENDS)
def test_gradients_finite_difference_clipped_and_repeated_tokens(kernel):
    # a dialogue longer than max_len (clipped) and repeated tokens (the query meets itself:
    # c_k = X_k . X_0 with X_k = X_0 exercises both paths of dc into dE)
    net = random_net(kernel, seed=7)
    seqs = [[3, 3, 3, 4, 3, 3], random_sequences([21], seed=9)[0]]
    b = Batch.from_sequences(seqs, [2, 1])
    _fd_check(net, b, ["W", "U", "W2", "E"])


@pytest.mark.parametrize("kernel", BACKENDS)
def test_gradient_step_reduces_loss(kernel):
    net = random_net(kernel, seed=5)
    b = batch([5, 12, 8, 3, 10, 14], labels=[0, 1, 2, 0, 1, 2])
    losses = [net.train_step(b, lr=0.05) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]
