"""Explicit warm start of a softmax layer (docs/design.md §2.3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edge_plm.plm.warmstart import CooccurrenceStats, NegativeInputError, explicit_solution

# Hand-computed case: F (3 features x 2 targets), priming number K = 2, eps = 1.
# (``_hand_HY`` below gives rows H, Y with H^T Y = F and mean |H_m|_1 = 2.)
F_HAND = np.array([[2.0, 0.0],
                   [1.0, 1.0],
                   [0.0, 3.0]])
K_HAND = 2.0
EPS_HAND = 1.0
# column masses: 3 and 4; translation ((K-1)/K) log(mass + eps) = 0.5 log 4 = log 2, 0.5 log 5
# P = log(F + 1) - translation:
P_HAND = np.array([[math.log(3) - math.log(2), 0.0 - 0.5 * math.log(5)],
                   [math.log(2) - math.log(2), math.log(2) - 0.5 * math.log(5)],
                   [0.0 - math.log(2),          math.log(4) - 0.5 * math.log(5)]])
P_HAND_NUMBERS = np.array([[0.4054651081, -0.8047189562],
                           [0.0, -0.1115717756],
                           [-0.6931471806, 0.5815754049]])


def test_hand_numbers_are_what_the_formula_says():
    np.testing.assert_allclose(P_HAND, P_HAND_NUMBERS, atol=1e-10)


def test_explicit_solution_hand_case():
    P = explicit_solution(F_HAND, K_HAND, EPS_HAND)
    np.testing.assert_allclose(P, P_HAND_NUMBERS, atol=1e-10)


def test_k_equal_one_is_plain_log():
    P = explicit_solution(F_HAND, 1.0, 0.5)
    np.testing.assert_allclose(P, np.log(F_HAND + 0.5))


def _hand_HY():
    # M = 4 rows, F = H^T Y = F_HAND, norms 2, 1, 4, 1 -> mean |H_m|_1 = 2 = K_HAND.
    # The last row has no target (an all-zero Y row): it counts for K but adds nothing to F.
    H = np.array([[1.0, 1.0, 0.0],   # -> y0   (|.|_1 = 2)
                  [1.0, 0.0, 0.0],   # -> y0   (|.|_1 = 1)
                  [0.0, 1.0, 3.0],   # -> y1   (|.|_1 = 4)
                  [1.0, 0.0, 0.0]])  # -> none (|.|_1 = 1)
    Y = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    return H, Y


def test_stats_from_rows_reproduce_hand_case():
    H, Y = _hand_HY()
    np.testing.assert_array_equal(H.T @ Y, F_HAND)
    st = CooccurrenceStats(3, 2)
    st.add(H, Y)
    np.testing.assert_array_equal(st.F, F_HAND)
    assert st.rows == 4
    assert st.priming_number == pytest.approx(2.0)  # (2 + 1 + 4 + 1) / 4
    np.testing.assert_allclose(st.solve(EPS_HAND), P_HAND_NUMBERS, atol=1e-10)


def test_norm_report_distribution():
    H, Y = _hand_HY()
    st = CooccurrenceStats(3, 2)
    st.add(H, Y)
    rep = st.norm_report()
    assert rep["rows"] == 4
    assert rep["mean"] == pytest.approx(2.0)
    assert rep["std"] == pytest.approx(math.sqrt(1.5))  # norms 2, 1, 4, 1: variance (0+1+4+1)/4
    hist = rep["histogram"]
    assert hist["[1,1.5)"] == 2 and hist["[2,3)"] == 1 and hist["[4,8)"] == 1
    assert sum(hist.values()) == 4
    empty = CooccurrenceStats(3, 2)
    assert empty.priming_number == 1.0
    assert empty.norm_report()["rows"] == 0


def test_incremental_equals_one_shot_equals_merge():
    rng = np.random.default_rng(0)
    H = rng.random((40, 5)) * (rng.random((40, 5)) < 0.6)
    Y = np.eye(3)[rng.integers(0, 3, 40)]
    one = CooccurrenceStats(5, 3)
    one.add(H, Y)
    inc = CooccurrenceStats(5, 3)
    for m in range(40):
        inc.add(H[m], Y[m])  # one row at a time (1-D rows accepted)
    shards = [CooccurrenceStats(5, 3) for _ in range(3)]
    for s, sl in zip(shards, (slice(0, 7), slice(7, 30), slice(30, 40))):
        s.add(H[sl], Y[sl])
    merged = CooccurrenceStats(5, 3)
    for s in shards:
        merged.merge(s)
    for other in (inc, merged):
        np.testing.assert_allclose(other.F, one.F, rtol=1e-13)
        assert other.rows == one.rows == 40
        assert other.priming_number == pytest.approx(one.priming_number, rel=1e-13)
        np.testing.assert_array_equal(other.norm_hist, one.norm_hist)
        assert other.norm_report()["std"] == pytest.approx(one.norm_report()["std"], rel=1e-9)
        np.testing.assert_allclose(other.solve(1e-3), one.solve(1e-3), rtol=1e-12)


@pytest.mark.parametrize("which", ["H", "Y"])
def test_negative_inputs_raise_clear_error(which):
    st = CooccurrenceStats(2, 2)
    H = np.array([[0.5, 0.5]])
    Y = np.array([[1.0, 0.0]])
    if which == "H":
        H = np.array([[0.5, -0.25]])
    else:
        Y = np.array([[1.0, -1.0]])
    with pytest.raises(NegativeInputError) as err:
        st.add(H, Y)
    msg = str(err.value)
    assert "non-negative" in msg and ("features" if which == "H" else "targets") in msg
    assert st.rows == 0 and not st.F.any(), "a rejected batch must not be accumulated"
    assert issubclass(NegativeInputError, ValueError)


def test_negative_F_and_bad_K_rejected():
    with pytest.raises(NegativeInputError, match="non-negative"):
        explicit_solution(np.array([[1.0, -0.1]]), 1.0, 1e-3)
    with pytest.raises(NegativeInputError, match="priming number"):
        explicit_solution(F_HAND, 0.0, 1e-3)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_inf_rejected(bad):
    st = CooccurrenceStats(2, 2)
    with pytest.raises(NegativeInputError, match="NaN"):
        st.add(np.array([[bad, 0.0]]), np.array([[1.0, 0.0]]))
    with pytest.raises(NegativeInputError, match="NaN"):
        st.add(np.array([[1.0, 0.0]]), np.array([[bad, 0.0]]))
    with pytest.raises(NegativeInputError, match="NaN"):
        explicit_solution(np.array([[bad, 1.0]]), 1.0, 1e-3)


def test_shape_mismatch_rejected():
    st = CooccurrenceStats(3, 2)
    with pytest.raises(ValueError, match="shapes"):
        st.add(np.ones((2, 3)), np.ones((3, 2)))
    with pytest.raises(ValueError, match="shapes"):
        st.add(np.ones((2, 4)), np.ones((2, 2)))


def test_seen_only_keeps_unseen_columns_at_log_eps():
    F = np.array([[2.0, 0.0, 1.0],
                  [1.0, 0.0, 0.0]])
    K, eps = 3.0, 0.01
    plain = explicit_solution(F, K, eps)
    seen = explicit_solution(F, K, eps, seen_only=True)
    # seen columns: identical
    np.testing.assert_allclose(seen[:, [0, 2]], plain[:, [0, 2]])
    # the never-seen column keeps log(eps) (no translation) ...
    np.testing.assert_allclose(seen[:, 1], math.log(eps))
    # ... whereas the plain solution lifts it to log(eps)/K, above a seen target's logit
    np.testing.assert_allclose(plain[:, 1], math.log(eps) / K)
    assert plain[0, 1] > math.log(eps) + 3.0  # a label never given got a large logit
    # seen_only: the unseen target is below every target that co-occurred with the feature
    assert seen[0, 1] < seen[0, 0] and seen[0, 1] < seen[0, 2]
    # and at most a hair above a seen target the feature never met (both ~ log eps)
    assert abs(seen[1, 1] - seen[1, 2]) < 0.01
