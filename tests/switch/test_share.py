"""The owner's share (switch/share.py): chosen on the owner's labels predicted before they were
learned, off the back-off rule only on significant evidence; the vectorised choice checked
against the rule written out."""

from __future__ import annotations

import numpy as np
import pytest

from edge_plm.switch.model import SwitchModel
from edge_plm.switch.share import GRID, OwnerShare, backoff_rule, balanced_weights, choose_share, pooled

START = [("turn on the light", "ON"), ("lights on please", "ON"), ("switch the lamp on", "ON"),
         ("turn off the light", "OFF"), ("lights off", "OFF"), ("switch the lamp off", "OFF"),
         ("what time is it", "NOOP"), ("play some music", "NOOP"), ("how is the weather", "NOOP")]
# a household whose words the starting part has never seen, each said in several ways
MAGIC = [(f"{w} {tail}", y) for tail in ("now", "please", "at once", "right now", "again", "for me")
         for w, y in (("abracadabra", "ON"), ("lumos", "ON"), ("nox", "OFF"), ("obscuro", "OFF"),
                      ("tell me a joke", "NOOP"), ("set a timer", "NOOP"))]


def _brute(P, Q, y, prior, z):
    """The rule of share.py written out row by row, share by share."""
    w = balanced_weights(y)

    def right(lam, t):  # the product over the actions Q has (all three here), written out
        p = [P[t][a] * Q[t][a] ** lam for a in range(3)]
        return float(np.argmax(p) == y[t])

    best, best_gain = prior, None
    for lam in GRID:
        d = [w[t] * (right(lam, t) - right(prior, t)) for t in range(len(y))]
        gain, sd = sum(d), sum(x * x for x in d) ** 0.5
        if gain <= z * sd + 1e-9:
            continue
        if best_gain is None or gain > best_gain + 1e-9 or (
                abs(gain - best_gain) <= 1e-9 and abs(lam - prior) < abs(best - prior)):
            best, best_gain = lam, gain
    return best


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_choose_share_is_the_significantly_better_grid_point(seed):
    rng = np.random.default_rng(seed)
    P, Q = rng.dirichlet(np.ones(3), 60), rng.dirichlet(np.ones(3), 60)
    y = np.where(rng.random(60) < 0.5, Q.argmax(1), rng.integers(0, 3, 60))  # the owner's part is often right
    for prior, z in ((0.3, 2.0), (0.0, 0.5), (0.9, 1.0), (0.05, 6.0)):
        assert choose_share(P, Q, y, prior, z) == pytest.approx(_brute(P, Q, y, prior, z))


def test_balanced_weights_give_every_action_the_same_weight():
    w = balanced_weights(np.array([2, 2, 2, 0]))
    assert w.sum() == pytest.approx(4) and w[:3].sum() == pytest.approx(w[3])


def test_choose_share_moves_only_on_significant_evidence():
    right, wrong = np.array([[0.1, 0.2, 0.7]] * 6), np.array([[0.6, 0.3, 0.1]] * 6)
    y = np.full(6, 2)
    # the owner's part decides all six right, the rule's pooling none: NOOP wins once
    # .1 x .7^lam > .6 x .1^lam, lam > .92, so from the grid's 1.05 on they are right, and the
    # gain (6) is far above z x its spread (sqrt 6): the nearest such point; at 0.95, the rule
    assert choose_share(wrong, right, y, 0.2, 2.0) == pytest.approx(1.05)
    assert choose_share(wrong, right, y, 0.95, 2.0) == 0.95
    assert choose_share(wrong[:3], right[:3], y[:3], 0.0, 2.0) == 0.0  # 3 rows: 3 > 2 sqrt 3 fails
    assert choose_share(wrong[:3], right[:3], y[:3], 0.0, 1.0) == pytest.approx(1.05)
    assert choose_share(right, wrong, y, 0.2, 2.0) == pytest.approx(0.2)  # worse: the rule
    assert choose_share(right, right, y, 0.4, 2.0) == pytest.approx(0.4)  # no evidence: the rule
    assert choose_share(right[:0], right[:0], y[:0], 0.25, 2.0) == 0.25
    with pytest.raises(ValueError, match="share prior"):
        choose_share(right, wrong, y, 1.5, 1.0)


def test_the_share_stays_on_the_rule_until_every_labelled_action_has_min_rows():
    # 50 labels as a young household gives them: 2 ON, 4 OFF, 44 NOOP. On five NOOP rows the
    # owner's part is right and the rule's pooling is not; on every other row both decide alike.
    # Five rows of one action pass the test (5 > 2 sqrt 5), though nothing shows what a large
    # share costs the two ON rows' action: with min_rows 5 the share keeps the rule.
    on, off, noop = [0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]
    P = np.array([on] * 2 + [off] * 4 + [[0.6, 0.3, 0.1]] * 5 + [noop] * 39)
    Q = np.array([on] * 2 + [off] * 4 + [[0.1, 0.2, 0.7]] * 5 + [noop] * 39)
    y = np.array([0] * 2 + [1] * 4 + [2] * 44)
    assert choose_share(P, Q, y, 0.05, 2.0) == pytest.approx(1.05)
    assert choose_share(P, Q, y, 0.05, 2.0, min_rows=5) == pytest.approx(0.05)
    # five rows of each action (the same five NOOP rows decide): the test decides again
    P5 = np.array([on] * 5 + [off] * 5 + [[0.6, 0.3, 0.1]] * 5 + [noop] * 35)
    Q5 = np.array([on] * 5 + [off] * 5 + [[0.1, 0.2, 0.7]] * 5 + [noop] * 35)
    y5 = np.array([0] * 5 + [1] * 5 + [2] * 40)
    assert choose_share(P5, Q5, y5, 0.05, 2.0, min_rows=5) == pytest.approx(1.05)


def test_rows_window_state_and_bad_rows():
    s = OwnerShare(backoff=100, z=1.0, window=3)
    assert s.value(0) == 0.0 and s.value(50) == pytest.approx(backoff_rule(50, 100))
    s.add([0.2, 0.3, 0.5], [0.0, 0.0, 1.0], 0, 1)  # the owner's part has one action: no row
    assert len(s.y) == 0
    for i in range(5):
        s.add([0.5, 0.3, 0.2], [0.1, 0.1, 0.8], 2, i + 1)  # the owner's part is right
    assert len(s.y) == 3 and s.value(5) > 0.3 > backoff_rule(5, 100)  # the nearest share that gets them right
    t = OwnerShare(backoff=100, z=1.0, window=3)
    t.load(s.state(), 5)
    assert t.value(5) == s.value(5) and np.array_equal(t.P, s.P)
    old = {k: v for k, v in s.state().items() if k != "share.pooling"}  # rows of the old mixture
    t.load(old, 5)
    assert len(t.y) == 0 and t.value(5) == pytest.approx(backoff_rule(5, 100))
    with pytest.raises(ValueError, match="3 actions"):
        s.add([0.5, 0.5], [0.5, 0.5], 0, 6)
    with pytest.raises(ValueError, match="finite"):
        s.add([np.nan, 0.5, 0.5], [0.2, 0.3, 0.5], 0, 6)
    with pytest.raises(ValueError, match="do not fit"):
        t.load({"share.P": np.zeros((2, 3)), "share.Q": np.zeros((3, 3)), "share.y": np.zeros(2),
                "share.lam": np.array([0.1])}, 2)


def _started(**overrides) -> SwitchModel:
    m = SwitchModel.empty("potato", **overrides)
    for t, y in START:
        m.learn(t, y)
    m.mark_start()
    return m


def test_a_household_the_starting_part_does_not_know_takes_the_share_early(tmp_path):
    m = _started()
    for t, y in MAGIC:
        m.learn(t, y)
    rule = backoff_rule(len(MAGIC), m.config.owner_backoff)
    assert m.owner_share() > 10 * rule
    assert m.predict("lumos in the hall").action == "ON"
    again = SwitchModel.load(m.save(tmp_path / "m.npz"))
    assert again.owner_share() == m.owner_share()
    np.testing.assert_allclose(again.predict_many(["nox here", "obscuro"]), m.predict_many(["nox here", "obscuro"]))


def test_a_household_that_talks_like_the_starting_data_keeps_it_in_charge():
    m = _started()
    same = [(f"{t} {tail}", y) for tail in ("now", "please", "for me", "again") for t, y in START]
    for t, y in same:
        m.learn(t, y)
    assert m.owner_share() <= 2 * backoff_rule(len(same), m.config.owner_backoff) + 0.05


def test_the_same_labels_in_the_same_order_give_the_same_share():
    shares = []
    for _ in range(2):
        m = _started()
        for t, y in MAGIC[:20]:
            m.learn(t, y)
        shares.append((m.owner_share(), m.share.P.tobytes(), m.share.Q.tobytes()))
    assert shares[0] == shares[1]


def test_the_kept_right_answers_choose_as_the_rows_do():
    """OwnerShare keeps each row's right answers at the grid; the share it chooses is
    choose_share's on its rows, after every label, past the window and after a load."""

    rng = np.random.default_rng(3)
    s = OwnerShare(backoff=50.0, z=1.0, window=60)
    for n in range(1, 151):
        y = int(rng.integers(0, 3))
        q = rng.dirichlet([1, 1, 1]) * 0.5
        q[y] += 0.5 * (n > 40)  # the owner's part becomes right: the share leaves the rule
        s.add(rng.dirichlet([1, 1, 1]), q / q.sum(), y, n)
        assert s.lam == choose_share(s.P, s.Q, s.y, backoff_rule(n, 50.0), 1.0)
    assert len(s.y) == s.right.shape[1] == 60 and s.lam != backoff_rule(150, 50.0)
    t = OwnerShare(backoff=50.0, z=1.0, window=60)
    t.load(s.state(), 150)
    np.testing.assert_array_equal(t.right, s.right)
    t.refit(151)
    assert t.lam == choose_share(s.P, s.Q, s.y, backoff_rule(151, 50.0), 1.0)


def test_pooled_is_the_product_over_the_owners_actions():
    P = np.array([[0.80, 0.09, 0.11], [0.2, 0.3, 0.5]])
    Q = np.array([[0.46, 0.03, 0.51], [0.7, 0.3, 0.0]])  # row 2: the owner has no NOOP label
    p = pooled(P, Q, np.array([0.0, 0.5, 2.0]))
    np.testing.assert_allclose(p.sum(axis=2), 1.0)
    np.testing.assert_allclose(p[0], P)  # share 0: the starting part
    for k, lam in enumerate((0.5, 2.0)):
        row = P[0] * Q[0] ** lam
        np.testing.assert_allclose(p[k + 1, 0], row / row.sum())
        assert p[k + 1, 1, 2] == pytest.approx(0.5)  # an action the owner never labelled keeps P
        ab = P[1, :2] * Q[1, :2] ** lam
        np.testing.assert_allclose(p[k + 1, 1, :2], 0.5 * ab / ab.sum())


def test_an_unsure_owners_part_leaves_a_sure_reading_where_a_mixture_would_not():
    """Issue 25's household: the owner's part, with 9 ON labels among 283 NOOP, is unsure
    between ON and NOOP on "switch on the lights"; the starting part reads ON .80."""
    P, Q = np.array([[0.80, 0.09, 0.11]]), np.array([[0.46, 0.03, 0.51]])
    mixture_on = (1 - 0.22) * P[0, 0] + 0.22 * Q[0, 0]
    assert mixture_on < 0.73  # the old mixture: under the act threshold of a sure reading
    assert pooled(P, Q, np.array([0.22]))[0, 0, 0] > 0.79  # the product: the odds ON : NOOP stay
    sure = np.array([[0.02, 0.03, 0.95]])  # an owner's part sure it is not a command overrules
    assert pooled(P, sure, np.array([0.9]))[0, 0].argmax() == 2
