"""The unit network of the switch (switch/units.py, switch/unitnet.py, switch/unit_kernels.py) and the model's
corrections memory (switch/model.py)."""

import json

import numpy as np
import pytest

from edge_plm.decide.policy import PolicyConfig
from edge_plm.plm import checkpoint
from edge_plm.switch import unit_kernels
from edge_plm.plm.checkpoint import CheckpointError
from edge_plm.switch.config import STARTING_OVERRIDES
from edge_plm.switch.model import SwitchModel
from edge_plm.switch.units import UnitVocab, unit_strings
from kit import PHRASES

DATA = PHRASES


def test_unit_strings_are_word_anchored_ngrams_and_words():
    u = unit_strings("Lamp ON", 2, 3)
    assert u == [" l", "la", "am", "mp", "p ", " la", "lam", "amp", "mp ", "w:lamp",
                 " o", "on", "n ", " on", "on ", "w:on"]
    with pytest.raises(ValueError):
        unit_strings("x", 3, 2)


def test_vocabulary_growth_keeps_old_ids_and_respects_the_cap():
    v = UnitVocab(cap=10_000, min_n=2, max_n=5, word_weight=10.0)
    ids1, w1, unk1 = v.features("turn on the light", grow=True)
    before = dict(v.index)
    v.features("a completely different sentence about heaters", grow=True)
    assert all(v.index[u] == i for u, i in before.items())  # append-only
    assert v.units[: len(before)] == list(before)
    ids2, w2, unk2 = v.features("turn on the light", grow=False)
    assert np.array_equal(ids1, ids2) and np.array_equal(w1, w2) and unk1 == unk2 == 0
    small = UnitVocab(cap=5, min_n=2, max_n=2, word_weight=2.0, support_min_n=2)
    ids, w, unk = small.features("abc de", grow=True)
    assert len(small) == 5 and small.full
    assert unk > 0 and w.sum() + unk == len(unit_strings("abc de", 2, 2)) + 2 * (2.0 - 1.0)
    assert small.add("zz") == -1 and len(small) == 5


def _random_batch(seed=0, n=7, units=12):
    rng = np.random.default_rng(seed)
    lens = rng.integers(0, 5, size=n)
    indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    indices = np.concatenate([np.sort(rng.choice(units, size=k, replace=False)) for k in lens]).astype(np.int64)
    values = rng.uniform(0.1, 1.0, size=len(indices))
    labels = rng.integers(0, 3, size=n).astype(np.int64)
    sw = rng.uniform(0.5, 1.5, size=n)
    sw /= sw.sum()
    U = rng.normal(0, 1.5, size=(units, 3))
    bias = rng.normal(0, 0.5, size=3)
    mask = np.array([0.0, 0.0, -50.0]) if seed % 2 else np.zeros(3)
    return indptr, indices, values, labels, sw, U, bias, mask


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_numba_kernel_equals_numpy_twin(seed):
    args = _random_batch(seed)
    dU_a, dU_b = np.full_like(args[5], 0.25), np.full_like(args[5], 0.25)
    la, ba = unit_kernels.batch_loss_grad_numpy(*args, dU_a)
    lb, bb = unit_kernels.batch_loss_grad_numba(*args, dU_b)
    assert la == pytest.approx(lb, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(ba, bb, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dU_a, dU_b, rtol=1e-12, atol=1e-14)


def _learned(n=len(DATA), **overrides):
    m = SwitchModel.empty("potato", **overrides)
    for t, y in DATA[:n]:
        m.learn(t, y)
    return m


# the optional input transforms and the per-unit pull (docs/benchmarks-log.md §1, 2026-12-01 ASR study)
KNOBS = {"unit_tf": "binary", "ngram_mass": 8.0, "ngram_power": 0.75, "sound_weight": 3.5,
         "l2_df_power": 0.75, "l2": 0.06, "logit_scale": 1.5, "idf_power": 1.0}


@pytest.mark.parametrize("knobs", [{}, KNOBS], ids=["default", "knobs"])
@pytest.mark.parametrize("kernel", ["numpy", "numba"])
def test_refinement_gradient_matches_finite_differences(kernel, knobs):
    m = _learned(kernel=kernel, refine_steps=3, **knobs)
    net = m.net
    rng = np.random.default_rng(0)
    used = np.unique(np.concatenate([r[0] for r in net.rows.values()]))
    net.delta[used] = rng.normal(0, 0.3, size=(len(used), 3))  # off the optimum, all terms matter
    net.bias[:] = rng.normal(0, 0.3, size=3)
    net._U = None
    _, dD, db, _ = net.objective()
    h = 1e-6
    for j in rng.choice(used, size=8, replace=False):
        for c in range(3):
            Dp, Dm = net.delta.copy(), net.delta.copy()
            Dp[j, c] += h
            Dm[j, c] -= h
            fd = (net.objective(delta=Dp)[0] - net.objective(delta=Dm)[0]) / (2 * h)
            assert dD[j, c] == pytest.approx(fd, rel=1e-5, abs=1e-8)
    for c in range(3):
        bp, bm = net.bias.copy(), net.bias.copy()
        bp[c] += h
        bm[c] -= h
        fd = (net.objective(bias=bp)[0] - net.objective(bias=bm)[0]) / (2 * h)
        assert db[c] == pytest.approx(fd, rel=1e-5, abs=1e-8)
    assert dD.shape == (net.n_active, 3)  # rows beyond: no example, zero delta, zero gradient
    m.forget_example(5)  # "play some jazz": its own units now have no example: only the L2 pull
    _, dD, _, _ = net.objective()
    only0 = np.setdiff1d(m.units.features(DATA[5][0], grow=False)[0],
                         np.concatenate([r[0] for r in net.rows.values()]))
    assert only0.size
    np.testing.assert_allclose(dD[only0], net.l2() * net.delta[only0])  # df 0: the pull's factor is 1


def test_tf_modes_and_ngram_mass():
    def weights(text, **kw):
        v = UnitVocab(cap=1000, min_n=2, max_n=3, word_weight=8.0, **kw)
        ids, w, _ = v.features(text, grow=True)
        return {v.units[i]: x for i, x in zip(ids.tolist(), w.tolist())}

    count, binary, log = (weights("on and on", tf=tf) for tf in ("count", "binary", "log"))
    assert count["w:on"] == 16.0 and binary["w:on"] == 8.0 and log["w:on"] == pytest.approx(8.0 * (1 + np.log(2)))
    assert count[" o"] == 2.0 and binary[" o"] == 1.0 and count["an"] == binary["an"] == 1.0
    # ngram_mass: a word's n-grams share the mass, whatever the word's length
    m = weights("on lights", ngram_mass=6.0)
    short = [u for u in unit_strings("on", 2, 3) if ":" not in u]
    long_ = [u for u in unit_strings("lights", 2, 3) if ":" not in u]
    assert sum(m[u] for u in short) == pytest.approx(6.0) and sum(m[u] for u in long_) == pytest.approx(6.0)
    assert m["w:on"] == m["w:lights"] == 8.0
    p = weights("lights", ngram_mass=6.0, ngram_power=0.5)
    assert p[" l"] == pytest.approx(6.0 / np.sqrt(len(long_)))
    assert "s:o100" in weights("off lights", sound_weight=4.0, sound_max_len=3)
    assert "s:l232" not in weights("off lights", sound_weight=4.0, sound_max_len=3)
    assert "s:l232" in weights("off lights", sound_weight=4.0)
    with pytest.raises(ValueError):
        UnitVocab(cap=10, min_n=2, max_n=3, word_weight=8.0, tf="sqrt")
    with pytest.raises(ValueError):
        UnitVocab(cap=10, min_n=2, max_n=3, word_weight=8.0, ngram_mass=-1.0)


def test_idf_and_per_unit_pull():
    m = _learned(idf_power=1.0, l2_df_power=1.0)
    net = m.net
    ids, w, _ = m.units.features("turn on the light", grow=False)
    idf = net.idf(ids)
    n = len(net.rows)
    np.testing.assert_allclose(idf, np.log((1 + n) / (1 + net.df[ids])) + 1)
    x = net.inputs(ids, w)
    np.testing.assert_allclose(x, w * idf / np.linalg.norm(w * idf))
    pull = net.unit_pull(net.n_active)
    np.testing.assert_allclose(pull, 1.0 / np.maximum(net.df[: net.n_active], 1.0))
    plain = _learned()
    np.testing.assert_array_equal(plain.net.unit_pull(5), np.ones(5))
    np.testing.assert_array_equal(plain.net.idf(ids), np.ones(len(ids)))


def test_refinement_lowers_the_objective_and_is_deterministic(tmp_path):
    a, b = _learned(refine_steps=0), _learned(refine_steps=0)
    before = a.net.objective()[0]
    a.refine(50)
    b.refine(50)
    assert a.net.objective()[0] < before
    assert np.array_equal(a.net.delta, b.net.delta) and np.array_equal(a.net.bias, b.net.bias)
    assert a.save(tmp_path / "a.npz").read_bytes() == b.save(tmp_path / "b.npz").read_bytes()


@pytest.mark.parametrize("structure", [{}, STARTING_OVERRIDES], ids=["from-empty", "starting-recipe"])
def test_nonsense_gets_low_confidence_and_familiar_wording_does_not(structure):
    m = _learned(**structure)
    for _ in range(3):
        for t, y in DATA:
            m.learn(t, y)
    nonsense = m.predict("zxqv blorf gnarp")
    assert nonsense.confidence < 0.45 and nonsense.action == "NOOP"
    familiar = m.predict("turn on the lamp")  # heard words, heard pairs
    assert familiar.action == "ON" and familiar.confidence > nonsense.confidence + 0.2
    # heard words in an order the household has not used: without word pairs read as ON; with
    # them "turn the" is OFF's ("turn the plug off"), and the young model is not sure of either
    swapped = m.predict("turn the light on")
    if structure:
        assert swapped.action == "ON" and swapped.confidence > nonsense.confidence + 0.2
    else:
        assert swapped.action == "ON" or swapped.confidence < PolicyConfig().ask_threshold


def test_a_corrected_transcript_is_never_acted_on_with_the_overridden_action():
    m = _learned()
    for _ in range(6):  # "turn off the smart plug" = ON six times (the crowd says smart plug = ON)
        m.learn("turn on the smart plug", "ON")
        m.learn("smart plug on", "ON")
    m.learn("turn off the smart plug", "ON")
    assert m.predict("turn off the smart plug").action == "ON"
    m.learn("turn off the smart plug", "OFF")  # the person's correction
    p = m.predict("turn off the smart plug")
    assert p.action == "OFF" and p.confidence < 0.8  # labels disagree: the latest wins, unsure
    m.learn("turn off the smart plug", "OFF")
    assert m.predict("Turn off the  smart plug!").action == "OFF"  # normalised exact repeat
    # relabel and forget move the memory with the examples
    keys = [k for k in m.live_keys() if m.text_of(k) == "turn off the smart plug"]
    for k in keys:
        m.relabel(k, "NOOP")
    assert m.predict("turn off the smart plug").action == "NOOP"
    for k in keys:
        m.forget_example(k)
    assert m.remembered("turn off the smart plug") is None


def test_save_load_continues_identically(tmp_path):
    a = _learned(5)
    a.observe("an unlabelled sentence about the garage door")
    a.relabel(1, "NOOP")
    a.forget_example(2)
    b = SwitchModel.load(a.save(tmp_path / "m.npz"))
    for t, y in DATA[5:]:
        a.learn(t, y)
        b.learn(t, y)
    assert a.units.units == b.units.units and b.removed == {2}
    np.testing.assert_array_equal(a.net.delta, b.net.delta)
    assert a.predict("turn the lamp off") == b.predict("turn the lamp off")
    assert a.save(tmp_path / "a.npz").read_bytes() == b.save(tmp_path / "b.npz").read_bytes()


def test_old_format_checkpoint_is_refused_clearly(tmp_path):
    path = tmp_path / "old.npz"
    checkpoint.save(path, {"E": np.zeros((2, 2))}, {"kind": "edge-plm switch model", "config": {}})
    with pytest.raises(CheckpointError, match="format 1"):
        SwitchModel.load(path)


def test_params_within_the_potato_budget():
    m = SwitchModel.empty("potato")
    widths = m.config.attention_widths
    assert m.params == 3 * m.config.unit_cap + 3 + sum(w * w for w in widths) <= 200_000
    assert json.loads(json.dumps(m.units.to_json())) == []


def test_explicit_solution_refuses_negative_statistics():
    from edge_plm.plm.warmstart import NegativeInputError

    m = _learned(3)
    m.net.F[0, 0] = -1.0
    with pytest.raises(NegativeInputError, match="unit co-occurrence"):
        m.net.solve()


def test_soundex_units_join_words_that_sound_alike():
    from edge_plm.switch.units import soundex

    assert soundex("off") == soundex("of") == "o100"
    assert soundex("robert") == soundex("rupert") == "r163" and soundex("ashcraft") == "a261"
    v = UnitVocab(cap=1000, min_n=2, max_n=3, word_weight=8.0, sound_weight=4.0)
    a, _, _ = v.features("lights off", grow=True)
    b, wb, unk = v.features("lights of", grow=False)  # a misheard "off" still meets "s:o100"
    shared = set(a.tolist()) & set(b.tolist())
    assert v.index["s:o100"] in shared and v.index["w:off"] not in set(b.tolist())
    plain = UnitVocab(cap=1000, min_n=2, max_n=3, word_weight=8.0)  # sound_weight 0: no such units
    plain.features("lights off", grow=True)
    assert not any(u.startswith("s:") for u in plain.units)


def test_word_pair_units_when_asked_for():
    v = UnitVocab(cap=1000, min_n=2, max_n=3, word_weight=8.0, bigram_weight=4.0)
    ids, w, _ = v.features("turn it off", grow=True)
    assert v.units[-2:] == ["b:turn it", "b:it off"]
    assert dict(zip(ids.tolist(), w.tolist()))[v.index["b:it off"]] == 4.0
    assert v.long_mask(np.array([v.index["b:it off"]]))[0]  # counts for the support
