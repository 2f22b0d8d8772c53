"""The owner's part of a device's model (switch/owner.py): the frozen starting part, the back-off
mixture, the bounded replay sample and the checkpoint that loads without re-reading text."""

from __future__ import annotations

import numpy as np
import pytest

from edge_plm.switch import owner
from edge_plm.switch.config import get_config
from edge_plm.switch.model import SwitchModel
from edge_plm.switch.share import pooled

START = [("turn on the light", "ON"), ("lights on please", "ON"), ("switch the lamp on", "ON"),
         ("turn off the light", "OFF"), ("lights off", "OFF"), ("switch the lamp off", "OFF"),
         ("what time is it", "NOOP"), ("play some music", "NOOP"), ("how is the weather", "NOOP")]
OWNER = [("abracadabra", "ON"), ("lumos", "ON"), ("nox", "OFF"), ("darkness falls", "OFF"),
         ("tell me a joke", "NOOP"), ("set a timer", "NOOP")]
TEXTS = ["turn on the light", "abracadabra", "nox please", "what is the weather", "lumos maxima"]


def _started() -> SwitchModel:
    m = SwitchModel.empty("potato")
    for t, y in START:
        m.learn(t, y)
    m.mark_start()
    return m


def test_mark_start_freezes_the_starting_part_and_predicts_as_before():
    m = SwitchModel.empty("potato")
    for t, y in START:
        m.learn(t, y)
    before = m.predict_many(TEXTS)
    m.mark_start()
    assert m.start is not None and len(m.net.rows) == 0 and m.prior_examples == len(START)
    np.testing.assert_allclose(m.predict_many(TEXTS), before)  # no owner label: lam = 0


def test_owner_labels_go_to_the_owners_part_only():
    m = _started()
    start_delta = m.start.delta.copy()
    for t, y in OWNER:
        m.learn(t, y)
    assert sorted(m.net.rows) == list(range(len(START), len(START) + len(OWNER)))
    np.testing.assert_array_equal(m.start.delta, start_delta)
    with pytest.raises(KeyError, match="starting model"):
        m.relabel(0, "OFF")
    assert m.relabel(len(START), "OFF")  # an owner's example can change


def test_the_share_follows_the_rule_until_the_parts_disagree_on_a_label():
    m = _started()
    assert m.owner_share() == 0.0
    m.learn("abracadabra", "ON")  # the owner's part knew nothing yet: both parts agree, no row
    assert len(m.share.y) == 0
    assert m.owner_share() == pytest.approx(1 / (1 + m.config.owner_backoff))
    for t, y in OWNER[1:]:
        m.learn(t, y)
    assert 0.0 <= m.owner_share() < 1.0
    assert len(m.share.y) >= 1  # rows once the owner's part had labels of the action


def test_the_owners_part_decides_what_the_starting_part_cannot_read():
    m = _started()
    for t, y in OWNER:
        m.learn(t, y)
    present = m.net.class_counts > 0.5
    start, own, _, unread = m.part_logits("abracadabra lumos")  # no word the start has labelled
    assert unread and m.owner_share() < 0.01
    np.testing.assert_allclose(m.raw("abracadabra lumos")[0], owner.owner_alone_scores(start, own, present))
    assert m.predict("abracadabra lumos").action == "ON"
    start, own, _, unread = m.part_logits("turn on the light")  # the start reads it: the share
    assert not unread
    np.testing.assert_allclose(m.raw("turn on the light")[0],
                               owner.mixed_scores(start, own, present, m.owner_share()))
    assert not m.part_logits("zzyzx qwop")[3]  # neither part reads it: nobody takes over
    m.config = m.config.with_(start_read_floor=0.0)  # off: the share everywhere
    start, own, _, unread = m.part_logits("abracadabra lumos")
    assert not unread
    np.testing.assert_allclose(m.raw("abracadabra lumos")[0],
                               owner.mixed_scores(start, own, present, m.owner_share()))


def test_what_the_owner_decides_alone_has_its_own_confidence_map(tmp_path):
    m = _started()
    rows_before = len(m.confidence.calib.y)
    for t, y in OWNER:
        m.learn(t, y)
    # the owner's words were unread by the start: their held-out rows went to the owner's map
    assert len(m.confidence.owner_calib.y) >= 1 and len(m.confidence.calib.y) == rows_before
    m.learn("turn on the light again", "ON")  # one the start reads: the model's map
    assert len(m.confidence.calib.y) == rows_before + 1
    i, y, n = m.read("abracadabra lumos")
    scores, support = m.raw("abracadabra lumos")
    i_own, y_own = m.calibrated(scores, support, owner_alone=True)
    assert i == i_own and not np.allclose(y, m.calibrated(scores, support)[1])
    np.testing.assert_array_equal(y, y_own)
    assert n == m.net.class_counts.sum() < m.class_counts.sum()  # the owner's labels behind it
    k = 3.0
    p = m.predict("abracadabra lumos", evidence_prior=k)
    assert p.confidence == pytest.approx((n * y[i] + k / 3) / (n + k))
    m.confidence.owner_calib.theta = m.confidence.owner_calib.theta + 0.5  # a map moved by rows, as after a load
    back = SwitchModel.load(m.save(tmp_path / "m.npz"))
    np.testing.assert_array_equal(back.confidence.owner_calib.theta, m.confidence.owner_calib.theta)
    np.testing.assert_array_equal(back.confidence.owner_calib.X, m.confidence.owner_calib.X)
    np.testing.assert_array_equal(back.confidence.calib.theta, m.confidence.calib.theta)


def test_mixed_scores_keep_the_starting_part_for_actions_the_owner_never_labelled():
    start = np.log(np.array([0.2, 0.3, 0.5]))
    own = np.array([5.0, 0.0, -10.0])
    present = np.array([True, False, False])  # the owner has labelled ON only
    p = np.exp(owner.mixed_scores(start, own, present, 0.5))
    assert p.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(p, [0.2, 0.3, 0.5])  # ON takes exactly the start's ON mass
    p = np.exp(owner.mixed_scores(start, own, np.array([True, True, False]), 1.0))
    assert p[2] == pytest.approx(0.5) and p[0] > 0.45
    np.testing.assert_allclose(np.exp(owner.mixed_scores(start, own, present, 0.0)), [0.2, 0.3, 0.5])


def test_replay_keys_are_bounded_balanced_and_deterministic():
    by_label = [list(range(0, 300, 3)), list(range(1, 300, 3))[:5], list(range(2, 300, 3))]
    assert owner.replay_keys([[0, 1], [2], []], 2, 128, 0) is None  # few: full batch
    keys = owner.replay_keys(by_label, 299, 30, 7)
    assert keys == owner.replay_keys(by_label, 299, 30, 7)
    assert keys != owner.replay_keys(by_label, 296, 30, 7)
    assert 299 in keys and len(keys) == 31 and keys == sorted(set(keys))
    per = [sum(k in set(b) for k in keys) for b in by_label]
    assert per[1] == 5  # the small action gives all it has, its unused share passes on
    assert abs(per[0] - per[2]) <= 2


def _replay_keys_by_copies(by_label, new_key, size, seed):
    """The sample as first written: every class's keys copied without new_key (O(history))."""
    if size <= 0 or sum(len(k) for k in by_label) <= size + 1:
        return None
    rng = np.random.default_rng([int(seed), int(new_key)])
    pools = [p for p in ([k for k in keys if k != new_key] for keys in by_label) if p]
    out, left = [new_key], size
    for i, pool in enumerate(sorted(pools, key=len)):
        take = min(left // (len(pools) - i), len(pool))
        picked = rng.choice(len(pool), size=take, replace=False) if take < len(pool) else np.arange(len(pool))
        out.extend(pool[j] for j in sorted(picked.tolist()))
        left -= take
    return sorted(out)


def test_replay_keys_copy_no_history_and_draw_the_same_sample():
    # each class's keys ascending, as UnitNet keeps them (test_unitnet_keeps_each_class_ascending)
    rng = np.random.default_rng(3)
    for t in range(400):
        n = int(rng.integers(0, 300))
        by_label = [[], [], []]
        for k in range(n):
            by_label[int(rng.integers(0, 3))].append(k)
        if t % 4 == 0 and n:  # relabelled keys move to another class, sorted in (UnitNet.relabel)
            for k in rng.choice(n, size=min(n, 20), replace=False).tolist():
                old = next(i for i, keys in enumerate(by_label) if k in keys)
                by_label[old].remove(k)
                by_label[(old + 1) % 3] = sorted(by_label[(old + 1) % 3] + [k])
        new_key = int(rng.integers(0, n + 1))
        size = int(rng.choice([0, 8, 64]))
        assert owner.replay_keys(by_label, new_key, size, t) == _replay_keys_by_copies(by_label, new_key, size, t)


def test_unitnet_keeps_each_class_ascending():
    m = SwitchModel.empty("potato")
    for t, y in START + OWNER:
        m.learn(t, y)
    for key, label in ((0, "NOOP"), (3, "ON"), (1, "OFF"), (len(START), "NOOP")):
        m.relabel(key, label)
    m.forget_examples([2])
    for keys in m.net.by_label:
        assert keys == sorted(keys)
    assert sorted(k for keys in m.net.by_label for k in keys) == sorted(m.net.rows)


def test_a_label_beyond_the_replay_size_costs_a_bounded_batch():
    m = SwitchModel.empty("potato", replay_rows=8)
    for i in range(30):
        m.learn(f"word{i} on" if i % 2 else f"word{i} off", "ON" if i % 2 else "OFF")
    keys = owner.replay_keys(m.net.by_label, 29, 8, m.seed)
    assert len(keys) == 9
    b, units = m.net.sample_batch(keys)
    assert len(b) == 9 and len(units) < m.net.n_active


def test_a_label_on_a_replay_sample_runs_a_bounded_number_of_example_passes():
    c = get_config("potato")  # refine_steps 10, replay_rows 64, replay_passes 400
    assert [owner.refine_budget(c, n) for n in (1, 30, 40, 41, 65, 66, 5000)] == [10, 10, 10, 9, 6, 6, 6]
    for n in (1, 30, 65, 5000):  # steps x examples refined on stays within the bound
        assert owner.refine_budget(c, n) * min(n, c.replay_rows + 1) <= max(c.replay_passes, c.refine_steps)
    full = c.with_(replay_rows=0)  # the desktop trainer's full batch: refine_rows bounds it
    assert [owner.refine_budget(full, n) for n in (65, 600, 1000, 7000)] == [10, 10, 6, 1]


def test_the_sample_objective_gradient_matches_finite_differences():
    m = SwitchModel.empty("potato", replay_rows=4)
    for t, y in START + OWNER:
        m.learn(t, y)
    net = m.net
    keys = owner.replay_keys(net.by_label, len(START) + len(OWNER) - 1, 4, 0)
    _, units = net.sample_batch(keys)
    _, dD, db, _ = net.objective(keys=keys)
    h = 1e-6
    for r, j in [(0, 0), (len(units) // 2, 1), (len(units) - 1, 2)]:
        Dp, Dm = net.delta.copy(), net.delta.copy()
        Dp[units[r], j] += h
        Dm[units[r], j] -= h
        fd = (net.objective(delta=Dp, keys=keys)[0] - net.objective(delta=Dm, keys=keys)[0]) / (2 * h)
        assert dD[r, j] == pytest.approx(fd, rel=1e-4, abs=1e-8)
    for j in range(3):
        bp, bm = net.bias.copy(), net.bias.copy()
        bp[j] += h
        bm[j] -= h
        fd = (net.objective(bias=bp, keys=keys)[0] - net.objective(bias=bm, keys=keys)[0]) / (2 * h)
        assert db[j] == pytest.approx(fd, rel=1e-4, abs=1e-8)


def test_the_same_labels_in_the_same_order_give_the_same_model(tmp_path):
    a, b = _started(), _started()
    for m in (a, b):
        m.config = m.net.config = m.start.config = m.config.with_(replay_rows=3)
        for t, y in OWNER * 3:
            m.learn(t, y)
    np.testing.assert_array_equal(a.net.delta, b.net.delta)
    assert a.save(tmp_path / "a.npz").read_bytes() == b.save(tmp_path / "b.npz").read_bytes()


def test_a_checkpoint_loads_without_processing_text_again(tmp_path, monkeypatch):
    m = _started()
    for t, y in OWNER:
        m.learn(t, y)
    path = m.save(tmp_path / "c.npz")
    from edge_plm.switch.units import UnitVocab

    seen, real = [], UnitVocab.positioned

    def record(self, text, grow):
        seen.append(text)
        return real(self, text, grow)

    monkeypatch.setattr(UnitVocab, "positioned", record)
    loaded = SwitchModel.load(path)
    monkeypatch.undo()
    assert not {t for t, _ in START + OWNER if " " in t} & set(seen)  # (query words: their own bags)
    assert loaded.start is not None and sorted(loaded.net.rows) == sorted(m.net.rows)
    np.testing.assert_allclose(loaded.predict_many(TEXTS), m.predict_many(TEXTS))
    m.learn("lumos", "ON")
    loaded.learn("lumos", "ON")
    np.testing.assert_allclose(loaded.predict_many(TEXTS), m.predict_many(TEXTS))


def test_a_checkpoint_written_before_the_two_parts_is_split_at_the_start(tmp_path):
    """An older device checkpoint: one network over every example, prior_examples set. It loads
    with the starting model's examples as the frozen part and the owner's as the owner's part."""
    m = SwitchModel.empty("potato")
    for t, y in START:
        m.learn(t, y)
    m.store.prior = len(START)  # as the old mark_start did: no frozen part
    for t, y in OWNER:
        m.learn(t, y)
    path = m.save(tmp_path / "old.npz")
    loaded = SwitchModel.load(path)
    assert loaded.start is not None
    assert sorted(loaded.net.rows) == list(range(len(START), len(START) + len(OWNER)))
    assert loaded.predict("abracadabra").action == "ON"


@pytest.mark.parametrize("present", [(True, True, True), (True, True, False), (False, True, True),
                                     (True, False, False), (False, False, False)])
def test_mixed_scores_are_the_shares_pooling_of_one_row(present):
    rng = np.random.default_rng(sum(present))
    present = np.array(present)
    for _ in range(20):
        start, own, lam = rng.normal(0, 3, 3), rng.normal(0, 3, 3), float(rng.uniform(0, 3))
        p_start, p_own = owner.mixture_parts(start, own, present)
        np.testing.assert_allclose(np.exp(owner.mixed_scores(start, own, present, lam)),
                                   pooled(p_start[None], p_own[None], np.array([lam]))[0, 0], rtol=1e-10)
