"""The explicit solution's arithmetic (switch/solution.py) against the NumPy expressions it
replaced in ``UnitNet.solve``: bit for bit, every pattern of labelled actions, with and
without class balance, small and large."""

from __future__ import annotations

import numpy as np
import pytest

from edge_plm.plm.warmstart import NegativeInputError
from edge_plm.switch import solution


def reference(F, seen, mass, present, alpha, balance):
    Fb = F[seen] / np.maximum(mass, 1.0) if balance else F[seen]
    B = np.log(Fb + alpha) - np.log(Fb.sum(axis=0, keepdims=True) + alpha * len(seen))
    B[:, ~present] = 0.0
    B[:, present] -= B[:, present].mean(axis=1, keepdims=True)
    return B


@pytest.mark.parametrize("n", [1, 7, 300, 20_000])
@pytest.mark.parametrize("present", [(True, True, True), (True, False, True), (False, True, False)])
@pytest.mark.parametrize("balance", [True, False])
def test_the_explicit_solution_is_the_former_expression_bit_for_bit(n, present, balance):
    rng = np.random.default_rng(n)
    F = np.zeros((n + 50, 3))
    seen = np.sort(rng.choice(n + 50, size=n, replace=False))
    F[seen] = rng.gamma(0.3, 4.0, size=(n, 3)) * np.array(present)
    mass = rng.uniform(0.5, 400.0, size=3)
    present = np.array(present)
    np.testing.assert_array_equal(solution.explicit_solution(F, seen, mass, present, 0.03, balance),
                                  reference(F, seen, mass, present, 0.03, balance))


def test_sums_and_means_keep_numpys_order():
    A = np.random.default_rng(0).normal(size=(5000, 3)) * 1e3
    np.testing.assert_array_equal(solution.column_sums(A), A.sum(axis=0, keepdims=True))
    np.testing.assert_array_equal(solution.row_means(A), A.mean(axis=1, keepdims=True))
    np.testing.assert_array_equal(solution.row_means(A[:, :2]), A[:, :2].mean(axis=1, keepdims=True))


def test_negative_statistics_fail_loudly():
    F = np.array([[1.0, -0.5, 0.0]])
    with pytest.raises(NegativeInputError):
        solution.explicit_solution(F, np.array([0]), np.ones(3), np.ones(3, bool), 0.03, True)
