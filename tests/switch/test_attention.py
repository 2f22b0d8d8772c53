"""The switch's SAFFU block (switch/attention.py, switch/words.py, plm/cache.ColumnCache) and the
calibrated confidence (switch/calibration.py)."""

import numpy as np
import pytest

from edge_plm.plm.bitcipher import bit_cipher, exclusive_bit_cipher
from edge_plm.plm.cache import ColumnCache
from edge_plm.plm.warmstart import NegativeInputError
from edge_plm.switch import attention
from edge_plm.switch.calibration import Calibrator, expected_calibration_error, features
from edge_plm.switch.model import SwitchModel
from edge_plm.switch.words import WordVocab

DATA = [("turn on the light", "ON"), ("lights off please", "OFF"), ("what time is it", "NOOP"),
        ("switch the lamp on", "ON"), ("kill the lamp", "OFF"), ("play some jazz", "NOOP"),
        ("could you turn the lights on", "ON"), ("shut off the light", "OFF"), ("how is the weather", "NOOP"),
        ("turn the kitchen lights off now please", "OFF"), ("the lamp in the hall on", "ON"),
        ("set a timer for ten minutes", "NOOP")]


def learned(**kw) -> SwitchModel:
    m = SwitchModel.empty("potato", **kw)
    if m.words is not None:
        m.words.register(t for t, _ in DATA)
    for t, y in DATA:
        m.learn(t, y)
    return m


def test_exclusive_codes_make_query_comparisons_exact():
    E = exclusive_bit_cipher(300, 20, 6)
    assert np.allclose(E.sum(axis=1), 1.0) and (E >= 0).all()
    C = E @ E.T
    np.testing.assert_array_equal(C[:, :6], np.eye(300)[:, :6])  # 1 for itself, 0 for every other word
    assert len({tuple(r) for r in E}) == 300  # every code distinct
    np.testing.assert_array_equal(exclusive_bit_cipher(50, 8, 0), bit_cipher(50, 8))
    with pytest.raises(ValueError):
        exclusive_bit_cipher(10, 8, 8)


def test_column_cache_reads_e_et_extends_and_rebuilds():
    cache = ColumnCache()
    E = bit_cipher(40, 8)
    np.testing.assert_allclose(cache.block(E, [0, 3], "v1"), (E @ E.T)[:, [0, 3]])
    E2 = bit_cipher(60, 8)  # append-only growth: extended, not rebuilt
    np.testing.assert_allclose(cache.block(E2, [0, 3], "v1"), (E2 @ E2.T)[:, [0, 3]])
    assert cache.extensions == 1 and cache.rebuilds == 0
    cache.verify(E2)
    E3 = E2[::-1].copy()  # a different code scheme: a new version rebuilds the block
    np.testing.assert_allclose(cache.block(E3, [0, 3], "v2"), (E3 @ E3.T)[:, [0, 3]])
    assert cache.rebuilds == 1
    cache.columns[0][5] += 1.0  # a stale column is caught
    with pytest.raises(ValueError, match="stale"):
        cache.verify(E3)


def test_column_cache_reads_rows_of_its_columns_or_none_when_stale():
    cache = ColumnCache()
    E = bit_cipher(40, 8)
    assert cache.read_rows(E, [0, 3], np.array([1, 7]), "v1") is None  # nothing cached yet
    cache.block(E, [0, 3], "v1")
    rows = np.array([7, 1, 7, 39])
    np.testing.assert_array_equal(cache.read_rows(E, [3, 0], rows, "v1"), (E @ E.T)[rows][:, [3, 0]])
    assert cache.read_rows(E, [0, 5], rows, "v1") is None  # a column never asked for
    assert cache.read_rows(bit_cipher(60, 8), [0, 3], rows, "v1") is None  # E grew: not current
    assert cache.read_rows(E, [0, 3], rows, "v2") is None  # another code scheme


def test_word_vocabulary_is_frequency_ordered_append_only_and_capped():
    v = WordVocab(cap=8, bits=12, query_words=3)
    v.register(["on on on", "light light", "the"])
    assert v.words == ["on", "light", "the"]
    assert v.ids("turn the light on", grow=True) == [3, 2, 1, 0]
    v.ids("a b c d e f g", grow=True)
    assert len(v) == 8 and v.ids("zzz", grow=True) == [-1]  # full: unknown, compares as 0
    c = v.comparisons(np.array([0, 1, 2, 5, -1]), np.array([1.0, 0.5, 0.25]))
    np.testing.assert_allclose(c, [1.0, 0.5, 0.25, 0.0, 0.0])


def _random_batch(seed):
    rng = np.random.default_rng(seed)
    widths = (4, 8)
    offsets = np.concatenate([[0], np.cumsum([w * w for w in widths])]).astype(np.int64)
    examples = []
    units = 15
    for _ in range(6):
        K = int(rng.integers(1, 11))  # some beyond the widest branch: uniform pooling
        M = int(rng.integers(1, 6))
        ids = np.sort(rng.choice(units, size=M, replace=False)).astype(np.int64)
        E = int(rng.integers(M, 3 * M + 1))
        ent_m = np.concatenate([np.arange(M), rng.integers(0, M, size=E - M)]).astype(np.int64)
        ent_pos = rng.integers(0, K, size=E).astype(np.int64)
        ent_v = rng.uniform(0.2, 2.0, size=E)
        examples.append((ids, ent_pos, ent_m, ent_v, rng.integers(0, 4, size=K).astype(np.int64)))
    labels = rng.integers(0, 3, size=len(examples))
    sw = np.full(len(examples), 1.0 / len(examples))
    cvals = rng.uniform(0.0, 1.0, size=4)
    b = attention.SaffuBatch(examples, widths, offsets).refresh(labels, sw, lambda w: cvals[w])
    grown = attention.SaffuBatch(examples[:2], widths, offsets)  # a batch grown label by label
    for e in examples[2:]:
        grown.extend([e])
    grown.refresh(labels, sw, lambda w: cvals[w])
    for name in ("indptr", "indices", "eptr", "ent_pos", "ent_m", "ent_v", "pptr", "cval", "branch", "woff"):
        np.testing.assert_array_equal(getattr(grown, name), getattr(b, name))
    U = rng.normal(0, 1.0, size=(units, 3))
    bias = rng.normal(0, 0.3, size=3)
    mask = np.array([0.0, 0.0, -10.0]) if seed % 2 else np.zeros(3)
    W = rng.normal(0, 1.0, size=int(offsets[-1]))
    return b, U, bias, mask, W


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_numba_kernel_equals_numpy_twin(seed):
    b, U, bias, mask, W = _random_batch(seed)
    dU_a, dU_b = np.full_like(U, 0.1), np.full_like(U, 0.1)
    dW_a, dW_b = np.full_like(W, 0.2), np.full_like(W, 0.2)
    la, ba = attention.batch_loss_grad_numpy(b, U, bias, mask, W, dU_a, dW_a)
    lb, bb = attention.batch_loss_grad_numba(b, U, bias, mask, W, dU_b, dW_b)
    assert la == pytest.approx(lb, rel=1e-12)
    np.testing.assert_allclose(ba, bb, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(dU_a, dU_b, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(dW_a, dW_b, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("empty", [False, True])
def test_segments_kernel_equals_numpy_twin(seed, empty):
    """The device's per-label kernel (vectorised NumPy, no Numba) against the per-example
    reference, also with an example whose two words hold no known unit (x = 0) in the
    middle, and on the same batch twice (its cached layout)."""
    b, U, bias, mask, W = _random_batch(seed)
    if empty:
        z = np.zeros(0, dtype=np.int64)
        ex = [(b.indices[b.indptr[n]:b.indptr[n + 1]], b.ent_pos[b.eptr[n]:b.eptr[n + 1]],
               b.ent_m[b.eptr[n]:b.eptr[n + 1]], b.ent_v[b.eptr[n]:b.eptr[n + 1]],
               b.wid[b.pptr[n]:b.pptr[n + 1]]) for n in range(len(b))]
        ex.insert(3, (z, z, z, np.zeros(0), np.array([0, 2], dtype=np.int64)))
        labels, cvals = np.append(b.labels, 1), np.random.default_rng(seed).uniform(0.0, 1.0, size=4)
        b = attention.SaffuBatch(ex, b.widths, b.offsets).refresh(labels, np.full(len(ex), 1 / len(ex)),
                                                                 lambda w: cvals[w])
    dU_a, dW_a = np.full_like(U, 0.1), np.full_like(W, 0.2)
    la, ba = attention.batch_loss_grad_numpy(b, U, bias, mask, W, dU_a, dW_a)
    for _ in range(2):
        dU_b, dW_b = np.full_like(U, 0.1), np.full_like(W, 0.2)
        lb, bb = attention.BACKENDS["segments"](b, U, bias, mask, W, dU_b, dW_b)
        assert la == pytest.approx(lb, rel=1e-12)
        np.testing.assert_allclose(ba, bb, rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(dU_a, dU_b, rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(dW_a, dW_b, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("kernel", ["numpy", "numba", "segments"])
def test_gradients_through_the_attention_match_finite_differences(kernel):
    b, U, bias, mask, W = _random_batch(5)
    fn = attention.BACKENDS[kernel]

    def loss(U_, W_, bias_):
        return fn(b, U_, bias_, mask, W_, np.zeros_like(U_), np.zeros_like(W_))[0]

    dU, dW = np.zeros_like(U), np.zeros_like(W)
    _, db = fn(b, U, bias, mask, W, dU, dW)
    h = 1e-6
    rng = np.random.default_rng(1)
    touched = np.flatnonzero(np.abs(dW) > 0)
    assert touched.size
    for i in rng.choice(touched, size=12, replace=False):
        Wp, Wm = W.copy(), W.copy()
        Wp[i] += h
        Wm[i] -= h
        assert dW[i] == pytest.approx((loss(U, Wp, bias) - loss(U, Wm, bias)) / (2 * h), rel=1e-5, abs=1e-9)
    for j in np.unique(b.indices)[:6]:
        for c in range(3):
            Up, Um = U.copy(), U.copy()
            Up[j, c] += h
            Um[j, c] -= h
            assert dU[j, c] == pytest.approx((loss(Up, W, bias) - loss(Um, W, bias)) / (2 * h), rel=1e-5, abs=1e-9)
    for c in range(3):
        bp, bm = bias.copy(), bias.copy()
        bp[c] += h
        bm[c] -= h
        assert db[c] == pytest.approx((loss(U, W, bp) - loss(U, W, bm)) / (2 * h), rel=1e-5, abs=1e-9)


def test_model_objective_gradient_for_w_matches_finite_differences():
    m = learned(kernel="numpy")
    net = m.net
    rng = np.random.default_rng(0)
    net.att.dW[:] = rng.normal(0, 0.5, size=net.att.size)
    _, _, _, gW = net.objective()
    h = 1e-6
    for i in rng.choice(np.flatnonzero(np.abs(gW) > 1e-6), size=8, replace=False):
        p, q = net.att.dW.copy(), net.att.dW.copy()
        p[i] += h
        q[i] -= h
        fd = (net.objective(dW=p)[0] - net.objective(dW=q)[0]) / (2 * h)
        assert gW[i] == pytest.approx(fd, rel=1e-5, abs=1e-9)


def test_w_zero_is_the_bag_of_units():
    """With W = 0 the attention is uniform and the network is the plain bag of units."""
    m = learned()
    plain = learned(attention=False)
    m.net.att.W0[:] = 0.0
    m.net.att.dW[:] = 0.0
    for t in ("turn the lights on", "kill the kitchen lamp please", "what is the time"):
        ids, w, _, placed = m.placed(t, grow=False)
        np.testing.assert_allclose(m.net.pooled(ids, w, placed), m.net.inputs(ids, w))
    assert plain.net.att is None and plain.params == m.params - sum(x * x for x in m.config.attention_widths)


def test_the_decision_goes_through_w_the_codes_and_the_cache():
    """A test that fails if the device's prediction bypasses W, the word codes or the cache."""
    m = learned()
    text = "turn the kitchen lights off please"  # not a remembered transcript: the network decides
    assert m.remembered(text) is None
    assert m.net.query_weights.max() == pytest.approx(1.0)  # the query is live
    before = m.predict(text).distribution
    m.net.att.dW[:] = 0.0
    m.net.att.W0[:] = 0.0
    lo = m.net.att.offsets[0]  # branch 8: put every position's weight on the first word
    W = np.zeros((8, 8))
    W[:, 0] = 50.0
    m.net.att.W0[lo:lo + 64] = W.ravel()
    after_w = m.predict(text).distribution
    assert after_w != before  # W decides
    calls = []
    real = m.words.cache.current  # what a prediction reads (it never extends the cache)

    def spy(E, query, version=None):
        calls.append(len(query))
        return real(E, query, version)

    m.words.cache.current = spy
    m.predict(text)
    assert calls  # the comparisons are read from the cache
    m.words.cache.current = lambda E, q, v=None: np.zeros((E.shape[0], len(q)))  # comparisons all 0
    assert m.predict(text).distribution != after_w  # without the codes' comparisons W has no input


def test_warm_start_targets_follow_the_evidence_and_refuse_negatives():
    t = attention.position_targets(np.array([0, 1, 2]), np.array([0, 1, 2]), np.array([1.0, 1.0, 1.0]), 3,
                                   np.array([0.0, 2.0, 0.0]))
    assert t.argmax() == 1 and t.sum() == pytest.approx(1.0) and (t > 0).all()
    with pytest.raises(NegativeInputError):
        attention.position_targets(np.array([0]), np.array([0]), np.array([1.0]), 1, np.array([-1.0]))
    m = learned(attention_warm_scale=0.5)  # the warm start, measured (off by default)
    assert any(st.rows > 0 for st in m.net.att.stats) and np.abs(m.net.att.W0).max() > 0
    assert not np.abs(learned().net.att.W0).max()  # default: W starts at 0
    assert m.net.att.norm_report()[0]["width"] == 8


def test_same_data_same_model(tmp_path):
    a, b = learned(), learned()
    fresh = learned()
    fresh.net.struct = None  # the grown batch structure equals one built from scratch
    assert fresh.net.objective()[0] == a.net.objective()[0]
    assert a.save(tmp_path / "a.npz").read_bytes() == b.save(tmp_path / "b.npz").read_bytes()


# -- calibration ---------------------------------------------------------------------------


def test_calibration_fit_is_deterministic_and_pulled_by_its_prior():
    rng = np.random.default_rng(0)
    X = np.array([features(float(m), float(s), bool(n)) for m, s, n in
                  zip(rng.uniform(0, 6, 300), rng.uniform(0, 1, 300), rng.integers(0, 2, 300))])
    y = (rng.uniform(size=300) < 1 / (1 + np.exp(-(1.5 * X[:, 0] - 2.0)))).astype(float)
    a = Calibrator(strength=1.0).fit(X, y)
    assert np.array_equal(a, Calibrator(strength=1.0).fit(X, y))
    assert a[0] == pytest.approx(1.5, abs=0.4)
    strong = Calibrator(prior=np.array([0.0, 0.0, 0.0, 3.0]), strength=1e6).fit(X, y)
    np.testing.assert_allclose(strong, [0.0, 0.0, 0.0, 3.0], atol=1e-3)
    with pytest.raises(ValueError):
        features(-1.0, 0.5, False)


def test_ece_of_a_perfectly_calibrated_set_is_small_and_of_an_overconfident_one_large():
    conf = np.repeat([0.55, 0.75, 0.95], 100)
    right = np.concatenate([np.arange(100) < 55, np.arange(100) < 75, np.arange(100) < 95])
    assert expected_calibration_error(conf, right) == pytest.approx(0.0, abs=1e-12)
    assert expected_calibration_error(np.full(100, 0.99), np.arange(100) < 50) == pytest.approx(0.49)


def test_a_nonsense_utterance_stays_unsure_and_a_confident_command_is_acted_on():
    from edge_plm.decide.policy import Decision, Prediction, decide
    from edge_plm.config.settings import PolicyConfig

    m = learned()
    for _ in range(4):
        for t, y in DATA:
            m.learn(t, y)
    cfg = PolicyConfig()
    nonsense = m.predict("zxqv blorf gnarp")
    assert nonsense.confidence <= 0.34 and nonsense.action == "NOOP"
    assert decide(Prediction(nonsense.action, nonsense.confidence, nonsense.distribution), cfg) is Decision.IGNORE
    sure = m.predict("could you turn the light on")
    assert sure.action == "ON"
    assert decide(Prediction(sure.action, sure.confidence, sure.distribution), cfg) is Decision.ACT


def test_a_young_models_prior_is_the_measured_one_not_a_sure_guess():
    # benchmarks/young_calibration.py fitted it; a young ON / OFF prediction with a clear
    # margin reads about .75 (the first guess sigmoid(margin - 1) read .95 and acted on garble)
    young = Calibrator()
    assert young.confidence(features(4.0, 0.7, False)) == pytest.approx(0.75, abs=0.01)
    assert young.confidence(features(4.0, 0.1, False)) < young.confidence(features(4.0, 0.7, False)) - 0.05
    assert young.confidence(features(1.0, 0.7, False)) < 0.4  # a margin of one is asked about at most
    assert young.confidence(features(2.0, 1.0, True)) > young.confidence(features(2.0, 1.0, False))


def test_calibrate_on_a_validation_file_sets_the_prior():
    m = learned()
    out = m.calibrate_on([("turn the lamp on please", "ON"), ("switch off the lights", "OFF"),
                          ("what is the weather", "NOOP"), ("play jazz", "NOOP")])
    assert out["rows"] == 4 and np.array_equal(m.confidence.calib.prior, m.confidence.calib.theta)
    assert len(m.confidence.calib.y) == 0  # the device's own rows start empty


LONG = " ".join(("please could you be so kind as to turn on the lamp in the living room because "
                 "it is getting dark and I cannot see a thing while reading my book about the "
                 "history of the ancient world and its many civilisations that rose and fell").split()
                * 3).split()[:100]


@pytest.mark.parametrize("kernel", ["numba", "numpy", "segments"])
def test_a_first_label_longer_than_every_branch_is_learned(kernel, tmp_path):
    """Issue 47, item 9: a 100-word first label (wider than the widest attention branch, so
    no example attends) used to fail every refinement kernel and brick a new device."""
    m = SwitchModel.empty("potato", kernel=kernel)
    assert len(LONG) == 100 and len(LONG) > max(m.config.attention_widths)
    m.learn(" ".join(LONG), "ON")
    m.learn("lamp off", "OFF")
    m.learn(" ".join(LONG[:70]), "ON")
    assert m.predict("lamp off").action in ("ON", "OFF", "NOOP")
    m.forget_examples([0])
    again = SwitchModel.load(m.save(tmp_path / "m.npz"))
    assert again.predict(" ".join(LONG)).action == m.predict(" ".join(LONG)).action
