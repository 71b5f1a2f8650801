"""A categorical move under the couplings the data cannot tell apart: readings and Fréchet bounds.

The per-person bounds against a linear programme over every coupling matrix (brute force, 3–4 levels), the two
couplings' transitions against their closed forms on three levels, and the gate's readings on a generator where
the comonotone and the Gumbel-max flagged fractions differ by a known amount (1/6 against 1/12).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy.optimize import linprog
from torch import nn

from faux_checks import AuxiliaryModel, FAuxTester, TargetOutput
from faux_checks.errors import InputError
from faux_checks.method.counterfactual import SwapSettings
from faux_checks.method.levels import comonotone_transition, gumbel_transition
from faux_checks.method.readings import coupling_bounds, coupling_readings, frechet_bounds, moves_categorical


def _lp_extremes(p_from: np.ndarray, p_to: np.ndarray, k: int, hit: np.ndarray) -> tuple[float, float]:
    """min and max of P(counterfactual level in S | level k) over every coupling of p_from and p_to (linprog)."""
    K = len(p_from)
    A_eq = np.zeros((2 * K, K * K))
    for i in range(K):
        A_eq[i, i * K:(i + 1) * K] = 1.0                                       # row sums: p_from
        A_eq[K + i, i::K] = 1.0                                                # column sums: p_to
    b_eq = np.concatenate([p_from, p_to])
    cost = np.zeros(K * K)
    cost[k * K:(k + 1) * K] = hit / p_from[k]
    lo = linprog(cost, A_eq=A_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    hi = linprog(-cost, A_eq=A_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    assert lo.success and hi.success
    return float(lo.fun), float(-hi.fun)


@pytest.mark.parametrize("K", [3, 4])
def test_frechet_bounds_are_the_extremes_over_every_coupling(K):
    rng = np.random.default_rng(K)
    for _ in range(6):
        p_from, p_to = rng.dirichlet(np.ones(K)), rng.dirichlet(np.ones(K))
        for k in range(K):
            for bits in itertools.product([False, True], repeat=K):
                hit = np.asarray(bits)
                lower, upper = frechet_bounds(np.array([p_from[k]]), p_to[None, :], hit[None, :])
                lp_lo, lp_hi = _lp_extremes(p_from, p_to, k, hit.astype(float))
                assert lower[0] == pytest.approx(lp_lo, abs=1e-7)
                assert upper[0] == pytest.approx(lp_hi, abs=1e-7)


def test_unenumerated_mass_widens_both_bounds_and_bad_shapes_are_refused():
    lower, upper = frechet_bounds(np.array([0.5]), np.array([[0.2, 0.3]]), np.array([[True, False]]), residual=0.5)
    assert lower[0] == pytest.approx(0.0) and upper[0] == pytest.approx(1.0)      # (0.2+0.5)/0.5 capped; 1-(0.8)/0.5
    lower, upper = frechet_bounds(np.array([0.5]), np.array([[0.2, 0.7]]), np.array([[True, False]]), residual=0.1)
    assert lower[0] == pytest.approx(0.0) and upper[0] == pytest.approx(0.6)
    with pytest.raises(InputError, match="do not match"):
        frechet_bounds(np.ones(2), np.ones((2, 3)), np.ones((2, 2), dtype=bool))


def test_comonotone_and_gumbel_differ_by_their_closed_forms_on_three_levels():
    """p_from uniform, p_to = (1/4, 1/4, 1/2): from level 0 the comonotone coupling moves to level 1 with 1/4, the
    Gumbel-max one to level 2 with 1/4 (3/(2(2e^{-D}+1)) − 1/2 at D = ln 2); from level 1, 1/2 against 1/4 to 2."""
    logits_from = np.zeros((3, 3))
    logits_to = np.log(np.tile([0.25, 0.25, 0.5], (3, 1)))
    current = np.arange(3)
    gum = gumbel_transition(logits_from, logits_to, current, nodes=32)
    com = comonotone_transition(np.full((3, 3), 1 / 3), np.exp(logits_to), current)
    np.testing.assert_allclose(gum, [[0.75, 0, 0.25], [0, 0.75, 0.25], [0, 0, 1]], atol=1e-6)
    np.testing.assert_allclose(com, [[0.75, 0.25, 0], [0, 0.5, 0.5], [0, 0, 1]], atol=1e-9)
    change_gum, change_com = np.mean(1 - np.diag(gum)), np.mean(1 - np.diag(com))
    assert change_gum == pytest.approx(1 / 6, abs=1e-6) and change_com == pytest.approx(1 / 4, abs=1e-9)
    lower, _ = frechet_bounds(np.full(3, 1 / 3), np.exp(logits_to), ~np.eye(3, dtype=bool))
    assert lower.mean() == pytest.approx(1 / 6)                               # Gumbel-max moves the fewest people


class _Logistic(nn.Module):
    def __init__(self, w, b=0.0):
        super().__init__()
        self.w = nn.Parameter(torch.as_tensor(w, dtype=torch.float32)[:, None], requires_grad=False)
        self.b = b

    def forward(self, x):
        return x @ self.w + self.b


def test_the_readings_differ_by_the_known_amount_and_the_bounds_contain_both():
    """Group 0's levels uniform, group 1's (1/4, 1/4, 1/2); the target's log-odds jump by 6 at level 1.

    Flagged (level 1 entered or left): comonotone 1/4 in group 0 and 1/12 in group 1 (1/6 overall), Gumbel-max
    1/12 in both (1/12 overall); the per-person Fréchet bounds average to 1/24 and 5/6.
    """
    rng = np.random.default_rng(3)
    n = 6000
    c = rng.integers(0, 2, n)
    probs = np.where(c[:, None] == 1, [0.25, 0.25, 0.5], [1 / 3, 1 / 3, 1 / 3])
    level = (probs.cumsum(axis=1) < rng.random(n)[:, None]).sum(axis=1)
    X = np.column_stack([rng.normal(size=n), np.eye(3)[level]]).astype(np.float32)
    aux = AuxiliaryModel(kind="binary", seed=0, epochs=30).fit(X, c)
    tester = FAuxTester(_Logistic([0.0, 0.0, 6.0, 0.0], b=-3.0), aux, variant="swap", output=TargetOutput("logit"),
                        swap=SwapSettings(categorical="coupled", categorical_groups=[np.array([1, 2, 3])]))
    hold = aux.holdout_rows_
    tester.fit_reference(X, c, holdout=(X[hold], c[hold]))
    assert moves_categorical(tester)
    readings = coupling_readings(tester, X, c, 0.1)
    assert readings["comonotone"] == pytest.approx(1 / 6, abs=0.03)
    assert readings["gumbel"] == pytest.approx(1 / 12, abs=0.03)
    assert readings["comonotone"] - readings["gumbel"] == pytest.approx(1 / 12, abs=0.03)
    bounds = coupling_bounds(tester, X, c, 0.1)
    assert bounds is not None and bounds.enumerated_mass == pytest.approx(1.0)
    assert bounds.flagged_lower == pytest.approx(1 / 24, abs=0.03)
    assert bounds.flagged_upper == pytest.approx(5 / 6, abs=0.04)
    assert bounds.flagged_lower <= min(readings.values()) <= max(readings.values()) <= bounds.flagged_upper
    with pytest.raises(InputError, match="unknown coupling"):
        coupling_readings(tester, X, c, 0.1, couplings=["optimal"])
