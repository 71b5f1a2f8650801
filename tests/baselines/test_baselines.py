"""Baseline testers (weighted FTA, Unfair Map, FlipTest, FTU flip) against closed forms.

Expected values are computed by hand from the weights of linear logistic models, in float64
with numpy, never with the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from faux_checks import InputError, TargetOutput
from faux_checks.baselines import (
    FlipTestTester,
    FTATester,
    FTUFlipTester,
    UnfairMapTester,
    WeightedFTATester,
    fit_sensitive_subspace,
)

LOGIT = TargetOutput(form="logit")


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _linear(w, b=0.0) -> nn.Linear:
    """Logistic target z = wᵀx + b (float32 weights given exactly)."""
    lin = nn.Linear(len(w), 1)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(np.asarray(w, dtype=np.float32))[None, :])
        lin.bias.fill_(b)
    return lin


def _logit(model, X) -> np.ndarray:
    with torch.no_grad():
        return model(torch.as_tensor(X, dtype=torch.float32))[:, 0].double().numpy()


# ---------------------------------------------------------------------------- weighted FTA
def test_weighted_fta_linear_model_matches_closed_form(rng):
    w = np.array([1.5, -2.0, 0.5, 3.0], dtype=np.float32)
    model = _linear(w, 0.3)
    X = rng.normal(size=(200, 4)).astype(np.float32)
    v = np.array([1.0, 1.0, 0.0, 0.0]) / np.sqrt(2)                      # sensitive direction
    z = _logit(model, X)
    sig_prime = _sigmoid(z) * _sigmoid(-z)
    w64 = w.astype(np.float64)
    along = w64 @ v
    expected_sensitive = sig_prime * abs(along)
    expected_complement = sig_prime * np.linalg.norm(w64 - along * v)
    s = WeightedFTATester(model, basis=v, output=LOGIT).score(X)
    s_c = WeightedFTATester(model, basis=v, subspace="complement", output=LOGIT).score(X)
    np.testing.assert_allclose(s, expected_sensitive, rtol=1e-5)
    np.testing.assert_allclose(s_c, expected_complement, rtol=1e-5)
    # the two projections split the plain FTA score: |P g|² + |(I − P) g|² = |g|²
    fta = FTATester(model, output=LOGIT).score(X)
    np.testing.assert_allclose(s**2 + s_c**2, fta**2, rtol=1e-5)


def test_weighted_fta_scores_zero_for_a_target_blind_to_the_sensitive_direction(rng):
    """The projection choice: a steep model that never moves along S is fair (score 0) while FTA flags it."""
    model = _linear([0.0, 0.0, 5.0], 0.0)                                # uses x2 only
    X = rng.normal(size=(2000, 3)).astype(np.float32)
    c = (X[:, 0] + 0.1 * rng.normal(size=2000) > 0).astype(int)         # c lives along x0
    tester = WeightedFTATester(model, output=LOGIT).fit(X, c)
    assert tester.basis_.shape == (3, 1)
    assert abs(tester.basis_[0, 0]) > 0.95                               # fitted S ≈ x0 axis
    s = tester.score(X)
    fta = FTATester(model, output=LOGIT).score(X)
    assert np.all(s <= 0.1 * fta)                                        # |cos(g, S)| = |basis_[2]| < 0.1
    unfair = WeightedFTATester(_linear([5.0, 0.0, 0.0]), output=LOGIT).fit(X, c).score(X)
    assert np.median(unfair) > 10 * np.median(s)


def test_sensitive_subspace_of_three_groups_has_two_orthonormal_directions(rng):
    X = rng.normal(size=(600, 5))
    c = np.argmax(X[:, :3] + 0.05 * rng.normal(size=(600, 3)), axis=1)
    B = fit_sensitive_subspace(X, c, kind="multiclass")
    assert B.shape[0] == 5 and B.shape[1] in (2, 3)
    np.testing.assert_allclose(B.T @ B, np.eye(B.shape[1]), atol=1e-10)
    assert np.linalg.norm(B[3:]) < 0.2                                   # spans the first three axes


def test_weighted_fta_refuses_unfitted_and_bad_settings(rng):
    X = rng.normal(size=(10, 3)).astype(np.float32)
    with pytest.raises(InputError, match="call fit"):
        WeightedFTATester(_linear([1, 0, 0]), output=LOGIT).score(X)
    with pytest.raises(InputError, match="subspace"):
        WeightedFTATester(_linear([1, 0, 0]), basis=np.eye(3)[:, :1], subspace="both", output=LOGIT).score(X)


# ---------------------------------------------------------------------------- FTU flip
class _IgnoresLastColumn(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))

    def forward(self, x):
        return self.net(x[:, :3])


def test_ftu_flip_is_exactly_zero_for_a_model_that_ignores_c(rng):
    X = rng.normal(size=(50, 4)).astype(np.float32)
    X[:, 3] = rng.integers(0, 2, size=50)
    s = FTUFlipTester(_IgnoresLastColumn(), protected_columns=[3], output=LOGIT).score(X)
    assert s.dtype == np.float64 and s.shape == (50,)
    assert np.all(s == 0.0)


def test_ftu_flip_on_a_linear_model_is_the_sigmoid_difference_of_w_c(rng):
    w = np.array([0.7, -1.2, 2.5], dtype=np.float32)                     # w_c = 2.5 on column 2
    model = _linear(w, -0.4)
    X = rng.normal(size=(80, 3)).astype(np.float32)
    X[:, 2] = rng.integers(0, 2, size=80)
    z = _logit(model, X)
    expected = np.abs(_sigmoid(z) - _sigmoid(z + 2.5 * (1 - 2 * X[:, 2])))
    s = FTUFlipTester(model, protected_columns=[2], output=LOGIT).score(X)
    np.testing.assert_allclose(s, expected, rtol=1e-5, atol=1e-7)
    # a boolean mask and a standardised code (levels) give the same scores
    mask = np.array([False, False, True])
    np.testing.assert_array_equal(FTUFlipTester(model, protected_columns=mask, output=LOGIT).score(X), s)


def test_ftu_flip_one_hot_group_takes_the_largest_change(rng):
    w = np.array([0.5, 1.0, -2.0, 0.0], dtype=np.float32)                # one-hot c in columns 1..3
    model = _linear(w)
    X = np.zeros((30, 4), dtype=np.float32)
    X[:, 0] = rng.normal(size=30)
    groups = rng.integers(0, 3, size=30)
    X[np.arange(30), 1 + groups] = 1.0
    z = _logit(model, X)
    base = 0.5 * X[:, 0]
    others = np.stack([np.abs(_sigmoid(z) - _sigmoid(base + w[1 + k])) for k in range(3)], axis=1)
    others[np.arange(30), groups] = 0.0
    s = FTUFlipTester(model, protected_columns=[1, 2, 3], output=LOGIT).score(X)
    np.testing.assert_allclose(s, others.max(axis=1), rtol=1e-5, atol=1e-7)


def test_ftu_flip_refuses_values_that_are_not_the_two_levels(rng):
    X = rng.normal(size=(10, 2)).astype(np.float32)
    with pytest.raises(InputError, match="neither level"):
        FTUFlipTester(_linear([1, 1]), protected_columns=[1], output=LOGIT).score(X)


# ---------------------------------------------------------------------------- FlipTest
def _shifted_groups(rng, n=60, d=3):
    base = rng.normal(size=(n, d))
    shift = np.array([1.0, -0.5, 2.0])[:d]
    X = np.concatenate([base, base + shift]).astype(np.float32)
    c = np.repeat([0, 1], n)
    return X, c, shift


@pytest.mark.parametrize("method", ["exact", "quantile"])
def test_fliptest_on_shifted_identical_groups_maps_by_the_shift(rng, method):
    """Group 1 = group 0 + s: OT maps x ↦ x ± s, so the score is |σ(z) − σ(z ± wᵀs)|."""
    X, c, shift = _shifted_groups(rng)
    w = np.array([0.8, 1.5, -0.3], dtype=np.float32)
    model = _linear(w, 0.1)
    z = _logit(model, X)
    ws = float(w.astype(np.float64) @ shift)
    expected = np.where(c == 0, np.abs(_sigmoid(z) - _sigmoid(z + ws)), np.abs(_sigmoid(z) - _sigmoid(z - ws)))
    s = FlipTestTester(model, method=method, output=LOGIT).score(X, c)
    np.testing.assert_allclose(s, expected, rtol=1e-4, atol=1e-6)


def test_fliptest_on_a_sample_extends_the_map_to_every_row(rng):
    """max_n < group size: OT on a sample; a row copied from a sampled row gets the same score."""
    X, c, _ = _shifted_groups(rng, n=60)
    X = np.concatenate([X, X[:5]])                                       # 5 copies of group-0 rows
    c = np.concatenate([c, np.zeros(5, dtype=int)])
    s = FlipTestTester(_linear([0.8, 1.5, -0.3], 0.1), max_n=20, output=LOGIT).score(X, c)
    assert s.shape == (125,) and np.all((s >= 0) & (s <= 1))
    # the same row scored at another position of the batch: equal up to float32 rounding of the target's matmul
    # (which depends on the batch's blocking on some CPUs: 1.2e-8 measured)
    np.testing.assert_allclose(s[-5:], s[:5], rtol=1e-6, atol=1e-7)


@pytest.mark.filterwarnings("ignore:Sinkhorn did not converge")
def test_fliptest_sinkhorn_approximates_the_exact_map(rng):
    X, c, _ = _shifted_groups(rng, n=40)
    model = _linear([0.8, 1.5, -0.3], 0.1)
    exact = FlipTestTester(model, output=LOGIT).score(X, c)
    approx = FlipTestTester(model, method="sinkhorn", reg=0.01, output=LOGIT).score(X, c)
    error = np.abs(approx - exact)                                       # entropic blur of the map
    assert error.mean() < 0.01 and error.max() < 0.05


def test_fliptest_needs_two_groups(rng):
    X = rng.normal(size=(10, 3)).astype(np.float32)
    with pytest.raises(InputError, match="single group"):
        FlipTestTester(_linear([1, 0, 0]), output=LOGIT).score(X, np.zeros(10))


# ---------------------------------------------------------------------------- Unfair Map
def test_unfair_map_ratio_is_at_least_one_and_larger_for_an_unfair_model(rng):
    n = 400
    X = rng.normal(size=(n, 3)).astype(np.float32)
    c = (X[:, 0] > 0).astype(int)                                        # sensitive direction: x0
    fair = _linear([0.0, 2.0, -1.0])                                     # ignores x0
    unfair = _linear([2.0, 0.0, -1.0])                                   # relies on x0
    r_fair = UnfairMapTester(fair, output=LOGIT).fit(X, c).score(X)
    r_unfair = UnfairMapTester(unfair, output=LOGIT).fit(X, c).score(X)
    assert r_fair.shape == (n,) and r_unfair.shape == (n,)
    assert np.all(r_fair >= 1.0) and np.all(r_unfair >= 1.0)
    assert np.mean(r_unfair) > 2 * np.mean(r_fair)
    assert np.median(r_unfair) > 1.5


def test_unfair_map_with_a_given_basis_and_labels_matches_one_row_at_a_time(rng):
    """Batched over individuals: each row's ratio does not depend on the other rows."""
    X = rng.normal(size=(20, 3)).astype(np.float32)
    y = rng.integers(0, 2, size=20)
    tester = UnfairMapTester(_linear([1.0, 0.5, 0.0]), basis=np.array([1.0, 0.0, 0.0]), output=LOGIT)
    batch = tester.score(X, y)
    single = np.array([tester.score(X[i : i + 1], y[i : i + 1])[0] for i in range(5)])
    np.testing.assert_allclose(batch[:5], single, rtol=1e-6)


def test_unfair_map_refuses_bad_settings(rng):
    X = rng.normal(size=(10, 3)).astype(np.float32)
    with pytest.raises(InputError, match="steps"):
        UnfairMapTester(_linear([1, 0, 0]), steps=0, basis=np.eye(3)[:, :1], output=LOGIT).score(X)
    with pytest.raises(InputError, match="call fit"):
        UnfairMapTester(_linear([1, 0, 0]), output=LOGIT).score(X)
