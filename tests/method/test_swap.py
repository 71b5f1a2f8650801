"""The swap reading's maths (faux_checks.method.swap) against closed forms."""

import numpy as np
import pytest
import torch

from faux_checks.errors import InputError
from faux_checks.method.lic import faux_scores
from faux_checks.method.metric import covariance_metric
from faux_checks.method.quantiles import matched_quantile
from faux_checks.method.swap import (
    fit_swap_reference,
    pair_values,
    swap_displacement,
)


def test_covariance_metric_is_the_conditional_covariance_of_the_free_features():
    rng = np.random.default_rng(0)
    rho = 0.6
    cov = np.array([[1.0, rho, 0.2], [rho, 2.0, 0.0], [0.2, 0.0, 1.5]])
    X = rng.multivariate_normal(np.zeros(3), cov, size=200_000)
    M = covariance_metric(X, admissible=np.array([False, True, False]))
    S = np.cov(X, rowvar=False)
    F = [0, 2]
    expected = S[np.ix_(F, F)] - np.outer(S[F, 1], S[1, F]) / S[1, 1]       # Schur complement
    np.testing.assert_allclose(M[np.ix_(F, F)], expected, rtol=1e-10, atol=1e-12)
    assert np.all(M[1] == 0) and np.all(M[:, 1] == 0)
    np.testing.assert_allclose(M[0, 0], 1 - rho**2 / 2.0, atol=0.02)       # closed form of the population


def test_covariance_metric_is_zero_when_everything_is_held_and_refuses_bad_rows():
    X = np.random.default_rng(0).normal(size=(50, 3))
    for part in ("total", "explained", "within"):
        M = covariance_metric(X, admissible=np.ones(3, bool), c=np.arange(50) % 2, kind="binary", part=part)
        assert M.shape == (3, 3) and not M.any()                           # nothing may move: the move is zero
    X[3, 1] = np.nan
    with pytest.raises(InputError, match="1 rows with NaN"):
        covariance_metric(X)
    with pytest.raises(InputError, match=r"shape \(2,\), expected \(3,\)"):
        covariance_metric(np.zeros((5, 3)), admissible=np.zeros(2, bool))


def test_matched_quantile_is_the_monotone_transport():
    grid = np.linspace(0, 1, 1001)
    q0 = np.quantile(np.random.default_rng(1).normal(size=100_000), grid)
    np.testing.assert_allclose(matched_quantile(np.array([-1.0, 0.0, 0.5]), q0, q0), [-1.0, 0.0, 0.5], atol=1e-9)
    np.testing.assert_allclose(matched_quantile(np.array([-1.0, 0.0, 0.5]), q0, q0 + 3.0), [2.0, 3.0, 3.5], atol=1e-9)
    np.testing.assert_allclose(matched_quantile(np.array([0.0, 1.0]), q0, 2 * q0), [0.0, 2.0], atol=1e-9)
    # ties take their mid-rank: a point mass at 0 holding the lower half maps to the target's lower quartile
    tied = np.quantile(np.r_[np.zeros(500), np.arange(1, 501)], grid)
    assert matched_quantile(np.array([0.0]), tied, grid)[0] == pytest.approx(0.25, abs=2e-3)


def test_pair_values_read_binary_and_multiclass_logits():
    raw = torch.tensor([[2.0], [-1.0]])
    v = pair_values(raw, torch.tensor([0, 1]), torch.tensor([1, 0]))
    assert v.tolist() == [2.0, 1.0]                                           # log-odds of the other group
    raw3 = torch.tensor([[0.0, 1.0, 3.0]])
    assert pair_values(raw3, torch.tensor([1]), torch.tensor([2])).tolist() == [2.0]


def test_euclidean_displacement_is_eq9_times_the_aux_change():
    gen = torch.Generator().manual_seed(0)
    g = torch.randn(6, 4, generator=gen, dtype=torch.float64)
    a = torch.randn(6, 4, generator=gen, dtype=torch.float64)
    delta = torch.randn(6, generator=gen, dtype=torch.float64)
    dx, undefined = swap_displacement(a, torch.eye(4, dtype=torch.float64), delta)
    assert not undefined.any()
    np.testing.assert_allclose((a * dx).sum(1), delta, rtol=1e-12)            # aᵀΔx = Δv
    eq9 = faux_scores(g, a[:, None, :]).components[:, 0]                      # ⟨g, a⟩ / ‖a‖²
    np.testing.assert_allclose((g * dx).sum(1), eq9 * delta, rtol=1e-12)


def test_displacement_moves_the_pattern_not_the_filter():
    # x1 = c + n, x2 = n: the discriminant is a ∝ (1, −1) but only x1 changes with c
    rng = np.random.default_rng(0)
    c = rng.integers(0, 2, 200_000)
    n = rng.normal(size=len(c))
    X = np.column_stack([c + n, n])
    M = covariance_metric(X)
    a = torch.tensor([[4.0, -4.0]], dtype=torch.float64)                      # LDA filter, Δv = aᵀΔμ = 4
    dx, _ = swap_displacement(a, torch.as_tensor(M), torch.tensor([4.0], dtype=torch.float64))
    np.testing.assert_allclose(dx[0].numpy(), [1.0, 0.0], atol=0.02)          # Δμ = (1, 0)
    dx_e, _ = swap_displacement(a, torch.eye(2, dtype=torch.float64), torch.tensor([4.0], dtype=torch.float64))
    np.testing.assert_allclose(dx_e[0].numpy(), [0.5, -0.5], atol=1e-12)       # eq. 7–8 moves the noise too


def test_zero_direction_is_undefined_never_zero():
    a = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    M = torch.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)           # feature 2 held fixed
    dx, undefined = swap_displacement(a, M, torch.tensor([1.0, 2.0], dtype=torch.float64))
    assert undefined.tolist() == [True, False]
    assert dx[1].tolist() == [2.0, 0.0]


def _two_groups(shift=2.0, n=20_000, seed=0):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 2, n)
    xA = rng.normal(size=n) + 1.5 * c                                         # admissible feature differs by group
    xF = rng.normal(size=n)
    v = 0.8 * xA + shift * c + 0.3 * xF                                        # aux log-odds of group 1
    return c, np.column_stack([xA, xF]), v


def test_reference_without_admissible_features_is_plain_quantile_matching():
    c, X, v = _two_groups()
    ref = fit_swap_reference(v[:, None], X, c, kind="binary")
    goal = ref.shifts[(0, 1)].goal(np.array([np.median(v[c == 0])]), np.zeros((1, 0)))
    assert goal[0] == pytest.approx(np.median(v[c == 1]), abs=0.03)
    # the pair (1, 0) reads the log-odds of group 0 (−v): its goal for a median member of group 1
    goal10 = ref.shifts[(1, 0)].goal(np.array([-np.median(v[c == 1])]), np.zeros((1, 0)))
    assert goal10[0] == pytest.approx(-np.median(v[c == 0]), abs=0.03)


def test_reference_with_admissible_features_shifts_by_the_conditional_difference():
    c, X, v = _two_groups(shift=2.0)
    admissible = np.array([True, False])
    ref = fit_swap_reference(v[:, None], X, c, kind="binary", admissible=admissible)
    rows = np.flatnonzero(c == 0)[:500]
    goal = ref.shifts[(0, 1)].goal(v[rows], X[rows][:, admissible])
    # given x_A the groups differ by exactly the shift (2.0), not by 2.0 + 0.8 * 1.5 (the marginal gap)
    np.testing.assert_allclose(goal - v[rows], 2.0, atol=0.05)


def test_reference_continuous_slope_per_standard_deviation():
    rng = np.random.default_rng(0)
    c = rng.normal(loc=5.0, scale=3.0, size=50_000)
    X = rng.normal(size=(len(c), 2))
    out = 0.25 * (c - 5.0) / 3.0 + 0.1 * X[:, 0]                                 # aux output: 0.25 per sd of c
    ref = fit_swap_reference(out[:, None], X, c, kind="continuous")
    assert ref.slope == pytest.approx(0.25, abs=1e-3)
    assert ref.n_targets == 2


def test_reference_round_trips_through_a_dict():
    c, X, v = _two_groups()
    ref = fit_swap_reference(v[:, None], X, c, kind="binary", admissible=np.array([True, False]))
    back = type(ref).from_dict(ref.to_dict())
    np.testing.assert_array_equal(back.metric, ref.metric)
    np.testing.assert_array_equal(back.shifts[(1, 0)].quantiles_to, ref.shifts[(1, 0)].quantiles_to)
    assert back.admissible.tolist() == [True, False]


def test_reference_refuses_tiny_groups():
    X = np.random.default_rng(0).normal(size=(10, 2))
    c = np.array([0] * 9 + [1])
    with pytest.raises(InputError, match=r"at least 2 reference rows.*\[9, 1\]"):
        fit_swap_reference(np.zeros((10, 1)), X, c, kind="binary")


# ---------------------------------------------------------------------------- the tester, variant swap
from torch import nn  # noqa: E402

from faux_checks.method.auxiliary import AuxiliaryModel  # noqa: E402
from faux_checks.method.counterfactual import SwapSettings  # noqa: E402
from faux_checks.method.faux import FAuxTester  # noqa: E402
from faux_checks.method.output import TargetOutput  # noqa: E402


def _linear(weights, bias=0.0):
    net = nn.Linear(len(weights), 1)
    with torch.no_grad():
        net.weight.copy_(torch.as_tensor(np.asarray([weights], dtype=np.float32)))
        net.bias.fill_(bias)
    return net.eval()


def _shifted_groups(mu, n=4000, seed=0):
    """Reference rows whose group 1 is group 0 shifted by mu exactly (so any linear v is an exact shift)."""
    Z = np.random.default_rng(seed).normal(size=(n, len(mu)))
    return np.vstack([Z, Z + mu]).astype(np.float32), np.r_[np.zeros(n, int), np.ones(n, int)]


def test_linear_target_and_aux_give_the_closed_form_swap_effect():
    u = np.array([1.0, -0.5, 0.2])                     # aux logit of group 1
    w = np.array([0.8, 0.3, -1.0])                     # target logit
    mu = np.array([1.0, 0.5, 0.0])
    X_ref, c_ref = _shifted_groups(mu)
    aux = AuxiliaryModel.from_module(_linear(u), kind="binary", n_features=3)
    tester = FAuxTester(_linear(w), aux, variant="swap", output=TargetOutput("logit")).fit_reference(
        X_ref, c_ref, metric="covariance", guard=0.0, hold_independent=False)
    X = np.random.default_rng(1).normal(size=(50, 3)).astype(np.float32)
    c = np.r_[np.zeros(25, int), np.ones(25, int)]
    res = tester.evaluate(X, c)
    S = np.cov(X_ref.astype(np.float64), rowvar=False)
    dv = np.full(len(c), u @ mu)                        # matched change of v = log-odds of the other group
    sign = np.where(c == 0, 1.0, -1.0)                  # v = ±(uᵀx): its gradient is ±u
    dx = (sign[:, None] * (S @ u)[None, :]) * (dv / (u @ S @ u))[:, None]
    z = X.astype(np.float64) @ w
    expected = np.abs(1 / (1 + np.exp(-(z + dx @ w))) - 1 / (1 + np.exp(-z)))
    np.testing.assert_allclose(res.scores, expected, rtol=2e-3, atol=1e-6)
    np.testing.assert_array_equal(res.counterfactual_target, 1 - c)
    np.testing.assert_allclose(res.counterfactual_probability, 1 / (1 + np.exp(-(z + dx @ w))), rtol=2e-3)
    # evidence: integrated gradients along x -> x′ add up to the change (completeness; 8-point midpoint rule)
    np.testing.assert_allclose(np.abs(res.evidence.sum(1)), expected, rtol=0.01, atol=1e-5)


def test_the_between_metric_moves_along_the_group_mean_difference():
    """The default metric (the covariance c explains): Δx = Δμ · Δv / (aᵀΔμ) without the guard, for any aux
    gradient a; the guard shrinks the step by aᵀMa / (aᵀMa + floor) and keeps its direction."""
    u = np.array([1.0, -0.5, 0.2])
    w = np.array([0.8, 0.3, -1.0])
    mu = np.array([1.0, 0.5, 0.0])
    X_ref, c_ref = _shifted_groups(mu)
    aux = AuxiliaryModel.from_module(_linear(u), kind="binary", n_features=3)
    X = np.random.default_rng(1).normal(size=(40, 3)).astype(np.float32)
    c = np.r_[np.zeros(20, int), np.ones(20, int)]
    z = X.astype(np.float64) @ w
    dmu = X_ref[c_ref == 1].mean(0).astype(np.float64) - X_ref[c_ref == 0].mean(0)   # the sample's Δμ
    sign = np.where(c == 0, 1.0, -1.0)
    dv = u @ mu
    dx = sign[:, None] * dmu[None, :] * (dv / (u @ dmu))                    # the move reaches Δv exactly
    exact = FAuxTester(_linear(w), aux, variant="swap", output=TargetOutput("logit")).fit_reference(
        X_ref, c_ref, metric="between", guard=0.0, hold_independent=False)
    expected = np.abs(1 / (1 + np.exp(-(z + dx @ w))) - 1 / (1 + np.exp(-z)))
    np.testing.assert_allclose(exact.evaluate(X, c, evidence=False).scores, expected, rtol=3e-3, atol=1e-6)
    guarded = FAuxTester(_linear(w), aux, variant="swap", output=TargetOutput("logit"),
                         swap=SwapSettings(line_search=0)).fit_reference(X_ref, c_ref, metric="between", guard=0.1,
                                                                         hold_independent=False)
    shrink = 1 / 1.1                                                         # every row: aᵀMa = its median
    expected = np.abs(1 / (1 + np.exp(-(z + shrink * dx @ w))) - 1 / (1 + np.exp(-z)))
    np.testing.assert_allclose(guarded.evaluate(X, c, evidence=False).scores, expected, rtol=3e-3, atol=1e-6)


def test_first_order_evaluation_is_the_gradient_along_the_move():
    u, w, mu = np.array([1.0, 0.0]), np.array([0.5, 2.0]), np.array([2.0, 0.0])
    X_ref, c_ref = _shifted_groups(mu)
    aux = AuxiliaryModel.from_module(_linear(u), kind="binary", n_features=2)
    tester = FAuxTester(_linear(w), aux, variant="swap", output=TargetOutput("logit"),
                        swap=SwapSettings(evaluation="first_order")).fit_reference(X_ref, c_ref, metric="covariance",
                                                                                   guard=0.0, hold_independent=False)
    X = np.zeros((1, 2), dtype=np.float32)
    res = tester.evaluate(X, np.array([0]))
    S = np.cov(X_ref.astype(np.float64), rowvar=False)
    dx = S @ u * (u @ mu) / (u @ S @ u)
    assert res.scores[0] == pytest.approx(0.25 * abs(w @ dx), rel=2e-3)            # σ'(0) = 1/4


def test_admissible_features_stay_fixed_and_a_fully_admissible_aux_direction_is_undefined():
    u, w, mu = np.array([1.0, 1.0]), np.array([1.0, 1.0]), np.array([1.0, 1.0])
    X_ref, c_ref = _shifted_groups(mu)
    aux = AuxiliaryModel.from_module(_linear(u), kind="binary", n_features=2)
    tester = FAuxTester(_linear(w), aux, variant="swap", output=TargetOutput("logit"))
    tester.fit_reference(X_ref, c_ref, admissible=np.array([True, False]), metric="between")
    X = np.zeros((2, 2), dtype=np.float32)
    res = tester.evaluate(X, np.array([0, 1]), evidence=True)
    assert np.all(res.evidence[:, 0] == 0.0)                                        # x_A never moves
    only_first = AuxiliaryModel.from_module(_linear([1.0, 0.0]), kind="binary", n_features=2)
    t2 = FAuxTester(_linear(w), only_first, variant="swap", output=TargetOutput("logit"))
    t2.fit_reference(X_ref, c_ref, admissible=np.array([True, False]), metric="between")
    res2 = t2.evaluate(X, np.array([0, 1]))
    assert res2.undefined.all() and np.isnan(res2.scores).all()                    # never a silent 0


def test_protected_inputs_are_set_to_the_other_group_and_counted_as_direct():
    # x = [f, c=0 one-hot, c=1 one-hot]; the target adds 1.5 to the logit of group 1 directly
    w = np.array([0.5, 0.0, 1.5])
    target = _linear(w)
    u = np.array([1.0])
    X_ref, c_ref = _shifted_groups(np.array([1.0]))
    aux = AuxiliaryModel.from_module(_linear(u), kind="binary", n_features=1)
    levels = np.array([[1.0, 0.0], [0.0, 1.0]])
    tester = FAuxTester(target, aux, variant="swap", output=TargetOutput("logit"),
                        protected_mask=np.array([False, True, True]), direct_levels=levels).fit_reference(X_ref, c_ref)
    X = np.array([[0.0, 1.0, 0.0]], dtype=np.float32)                               # group 0, f = 0
    res = tester.evaluate(X, np.array([0]), evidence=True)
    sig = lambda z: 1 / (1 + np.exp(-z))                                            # noqa: E731
    assert res.direct[0] == pytest.approx(sig(1.5) - 0.5, rel=1e-6)
    assert res.scores[0] == pytest.approx(sig(0.5 * 1.0 + 1.5) - 0.5, rel=2e-3)     # Δf = Δμ = 1 and the flip
    assert abs(res.evidence[0, 2]) > abs(res.evidence[0, 0])                        # c's own column leads


def test_multiclass_takes_the_largest_change_over_the_other_groups():
    rng = np.random.default_rng(0)
    means = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 1.0]])
    c_ref = np.repeat([0, 1, 2], 3000)
    Z = rng.normal(size=(3000, 2))
    X_ref = np.vstack([Z + means[k] for k in range(3)]).astype(np.float32)
    aux = AuxiliaryModel(kind="multiclass", hidden=(16,), epochs=20, seed=0).fit(X_ref, c_ref)
    target = _linear([1.0, 0.0])
    tester = FAuxTester(target, aux, variant="swap", output=TargetOutput("logit")).fit_reference(X_ref, c_ref)
    X = np.zeros((1, 2), dtype=np.float32)
    res = tester.evaluate(X, np.array([0]))
    assert res.counterfactual_target[0] == 1                                       # group 1 moves x₁ by ≈ 3
    assert res.scores[0] == pytest.approx(1 / (1 + np.exp(-3.0)) - 0.5, abs=0.06)


def test_continuous_moves_one_standard_deviation_each_way():
    rng = np.random.default_rng(0)
    c = rng.normal(size=20_000)
    X_ref = np.column_stack([0.5 * c + rng.normal(scale=0.5, size=len(c)), rng.normal(size=len(c))]).astype(np.float32)
    aux = AuxiliaryModel(kind="continuous", hidden=(32, 32), epochs=30, seed=0).fit(X_ref, c)
    target = _linear([2.0, 0.0])
    tester = FAuxTester(target, aux, variant="swap", output=TargetOutput("logit")).fit_reference(X_ref, c)
    res = tester.evaluate(np.zeros((1, 2), dtype=np.float32), np.zeros(1))          # a person at c = 0
    # +1 sd of c moves x₁ by 0.5 (the generator; the matched move reads it from x₁'s distribution at c ± 1),
    # so the logit by 1.0; both directions change ŷ by σ(1) − ½
    assert res.scores[0] == pytest.approx(1 / (1 + np.exp(-1.0)) - 0.5, abs=0.03)
