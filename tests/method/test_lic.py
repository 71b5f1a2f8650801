"""LIC scores (faux_checks.method.lic) against closed forms, and FAuxTester on linear models.

Every expected value here is computed independently of the code under test: in float64 with
numpy / torch.linalg.pinv, or by hand from the weights of linear models.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from faux_checks import AuxiliaryModel, FAuxTester, InputError, TargetOutput
from faux_checks.method.gradients import path_averaged_gradients
from faux_checks.method.lic import RCOND, faux_ng_scores, faux_scores, lic_upper_bound, pseudo_inverse_rows


def _rand(rng, *shape):
    return torch.from_numpy(rng.normal(size=shape))


# ---------------------------------------------------------------------------- k = 1 closed forms
def test_k1_score_is_abs_inner_product_over_squared_norm(rng):
    g, a = _rand(rng, 50, 6), _rand(rng, 50, 6)
    res = faux_scores(g, a[:, None, :])
    expected = (g * a).sum(1).abs() / (a * a).sum(1)
    torch.testing.assert_close(res.scores, expected, rtol=1e-12, atol=0)
    torch.testing.assert_close(res.components[:, 0], (g * a).sum(1) / (a * a).sum(1), rtol=1e-12, atol=0)
    assert res.scores.dtype == torch.float64
    assert not res.undefined.any()


@pytest.mark.parametrize("ridge", [1e-3, 0.5, 10.0])
def test_k1_ridge_divides_by_squared_norm_plus_lambda(rng, ridge):
    g, a = _rand(rng, 40, 5), _rand(rng, 40, 5) * 0.1
    res = faux_scores(g, a[:, None, :], ridge=ridge)
    expected = (g * a).sum(1).abs() / ((a * a).sum(1) + ridge)
    torch.testing.assert_close(res.scores, expected, rtol=1e-12, atol=0)
    # the ridge can only lower a score
    assert (res.scores < faux_scores(g, a[:, None, :]).scores).all()


def test_k1_float32_inputs_are_scored_in_float64(rng):
    g32, a32 = _rand(rng, 20, 4).float(), _rand(rng, 20, 4).float()
    res = faux_scores(g32, a32[:, None, :])
    g, a = g32.double(), a32.double()
    torch.testing.assert_close(res.scores, (g * a).sum(1).abs() / (a * a).sum(1), rtol=1e-12, atol=0)


@settings(max_examples=30, deadline=None)
@given(
    g=arrays(np.float64, (3, 4), elements=st.floats(-1e3, 1e3)),
    a=arrays(np.float64, (3, 4), elements=st.floats(0.01, 1e3)),
)
def test_k1_closed_form_property(g, a):
    res = faux_scores(torch.from_numpy(g), torch.from_numpy(a)[:, None, :])
    expected = np.abs((g * a).sum(1)) / (a * a).sum(1)
    np.testing.assert_allclose(res.scores.numpy(), expected, rtol=1e-10, atol=1e-300)


# ---------------------------------------------------------------------------- k = 3
def test_k3_matches_float64_pseudo_inverse(rng):
    n, k, d = 30, 3, 7
    g, J = _rand(rng, n, d), _rand(rng, n, k, d)
    res = faux_scores(g, J)
    # g · Jᵀ(JJᵀ)⁻¹ with numpy's SVD pinv, one row at a time
    expected = np.stack([g[i].numpy() @ np.linalg.pinv(J[i].numpy()) for i in range(n)])   # (n, k)
    np.testing.assert_allclose(res.components.numpy(), expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.scores.numpy(), np.abs(expected).max(1), rtol=1e-9, atol=1e-12)
    # and with torch's pinv, batched
    expected_t = (g[:, None, :] @ torch.linalg.pinv(J))[:, 0]
    torch.testing.assert_close(res.components, expected_t, rtol=1e-9, atol=1e-12)


def test_k3_ridge_matches_damped_formula(rng):
    n, k, d, lam = 10, 3, 5, 0.3
    g, J = _rand(rng, n, d), _rand(rng, n, k, d)
    res = faux_scores(g, J, ridge=lam)
    expected = np.stack([
        np.linalg.solve(J[i].numpy() @ J[i].numpy().T + lam * np.eye(k), J[i].numpy() @ g[i].numpy())
        for i in range(n)
    ])
    np.testing.assert_allclose(res.components.numpy(), expected, rtol=1e-10)


def test_pseudo_inverse_rows_is_right_inverse(rng):
    J = _rand(rng, 8, 3, 6)
    M, undefined = pseudo_inverse_rows(J)
    assert not undefined.any()
    # J · J⁺ = I_k with J⁺ = Mᵀ
    torch.testing.assert_close(J @ M.transpose(1, 2), torch.eye(3, dtype=torch.float64).expand(8, 3, 3),
                               rtol=0, atol=1e-10)


@pytest.mark.parametrize("k", [1, 3])
def test_evidence_row_sums_to_signed_largest_component(rng, k):
    g, J = _rand(rng, 25, 6), _rand(rng, 25, k, 6)
    res = faux_scores(g, J)
    top = res.components.abs().argmax(1)
    largest = res.components[torch.arange(25), top]
    torch.testing.assert_close(res.evidence.sum(1), largest, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(res.scores, largest.abs(), rtol=0, atol=0)
    # some largest components are negative: the evidence keeps the sign
    assert (largest < 0).any() and (largest > 0).any()
    # for k = 1 each term is g_j a_j / ‖a‖²
    if k == 1:
        a = J[:, 0]
        torch.testing.assert_close(res.evidence, g * a / (a * a).sum(1, keepdim=True), rtol=1e-12, atol=0)


def test_direct_term_is_added_before_the_max(rng):
    g, J = _rand(rng, 12, 5), _rand(rng, 12, 1, 5)
    direct = _rand(rng, 12, 1)
    plain = faux_scores(g, J)
    res = faux_scores(g, J, direct=direct)
    torch.testing.assert_close(res.components, plain.components + direct, rtol=1e-12, atol=0)
    torch.testing.assert_close(res.scores, (plain.components + direct).abs()[:, 0], rtol=1e-12, atol=0)
    with pytest.raises(InputError, match=r"direct term has shape \(12, 2\)"):
        faux_scores(g, J, direct=_rand(rng, 12, 2))


# ---------------------------------------------------------------------------- undefined rows
def test_zero_aux_gradient_rows_are_undefined_not_zero(rng):
    g, J = _rand(rng, 6, 4), _rand(rng, 6, 1, 4)
    J[[1, 4]] = 0.0
    for ridge in (0.0, 0.1):
        res = faux_scores(g, J, ridge=ridge)
        assert res.undefined.tolist() == [False, True, False, False, True, False]
        assert torch.isnan(res.scores[[1, 4]]).all() and torch.isnan(res.evidence[[1, 4]]).all()
        assert torch.isfinite(res.scores[[0, 2, 3, 5]]).all()


def test_non_finite_inputs_make_only_their_row_undefined(rng):
    g, J = _rand(rng, 4, 3), _rand(rng, 4, 2, 3)
    g[0, 1] = float("nan")
    J[2, 1, 0] = float("inf")
    res = faux_scores(g, J)
    assert res.undefined.tolist() == [True, False, True, False]
    ng = faux_ng_scores(g, J)
    assert ng.undefined.tolist() == [True, False, True, False]
    assert torch.isfinite(res.scores[[1, 3]]).all() and torch.isfinite(ng.scores[[1, 3]]).all()


def test_near_singular_k3_is_finite_or_undefined_never_inf(rng):
    d = 6
    v, u = rng.normal(size=d), rng.normal(size=d)
    rows = []
    for eps in (1e-1, 1e-3, 1e-9, 0.0):
        rows.append(np.stack([v, v + eps * u, rng.normal(size=d)]))
    J = torch.from_numpy(np.stack(rows))
    g = _rand(rng, 4, d)
    res = faux_scores(g, J)
    assert not torch.isinf(res.scores).any()
    assert res.undefined.tolist() == [False, False, True, True]
    assert torch.isfinite(res.scores[:2]).all()
    # the eps = 1e-3 row is still the exact pseudo-inverse
    np.testing.assert_allclose(res.components[1].numpy(), g[1].numpy() @ np.linalg.pinv(J[1].numpy()), rtol=1e-6)
    # the eigenvalue ratio of JJᵀ decides: eps² ~ 1e-18 < RCOND
    assert 1e-18 < RCOND
    again = faux_scores(g, J)
    torch.testing.assert_close(again.scores, res.scores, rtol=0, atol=0, equal_nan=True)
    # a ridge makes every row defined and finite
    damped = faux_scores(g, J, ridge=1e-2)
    assert not damped.undefined.any() and torch.isfinite(damped.scores).all()


def test_bad_arguments_raise_input_error(rng):
    g, J = _rand(rng, 3, 4), _rand(rng, 3, 1, 4)
    with pytest.raises(InputError, match="ridge must be >= 0"):
        faux_scores(g, J, ridge=-1.0)
    with pytest.raises(InputError, match=r"\(3, 4\).*\(3, 1, 5\)"):
        faux_scores(g, _rand(rng, 3, 1, 5))
    with pytest.raises(InputError, match=r"\(2, 4\)"):
        faux_scores(_rand(rng, 2, 4), J)
    with pytest.raises(InputError):
        faux_scores(g[0], J)
    with pytest.raises(InputError, match="no direct term"):
        faux_ng_scores(g, J, direct=torch.zeros(3, 1))


# ---------------------------------------------------------------------------- NG (eq. 10)
def test_ng_k1_is_absolute_cosine(rng):
    g, a = _rand(rng, 40, 5), _rand(rng, 40, 5)
    res = faux_ng_scores(g, a[:, None, :])
    cos = torch.nn.functional.cosine_similarity(g, a, dim=1)
    torch.testing.assert_close(res.scores, cos.abs(), rtol=1e-12, atol=1e-15)
    assert (res.scores <= 1 + 1e-12).all()


def test_ng_k3_is_max_absolute_cosine_over_rows(rng):
    g, J = _rand(rng, 20, 6), _rand(rng, 20, 3, 6)
    res = faux_ng_scores(g, J)
    cos = torch.nn.functional.cosine_similarity(g[:, None, :], J, dim=2)         # (n, 3)
    torch.testing.assert_close(res.scores, cos.abs().amax(1), rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(res.evidence.sum(1), cos[torch.arange(20), cos.abs().argmax(1)], rtol=1e-10, atol=1e-12)


def test_ng_is_invariant_to_scaling_g_and_J(rng):
    g, J = _rand(rng, 15, 4), _rand(rng, 15, 3, 4)
    base = faux_ng_scores(g, J).scores
    row_scale = torch.from_numpy(rng.uniform(1e-3, 1e3, size=(15, 3, 1)))
    scaled = faux_ng_scores(g * 37.5, J * row_scale).scores
    torch.testing.assert_close(scaled, base, rtol=1e-12, atol=1e-15)
    # whereas eq. 9 is not scale-free: it scales with g and inversely with J
    s1 = faux_scores(g, J[:, :1]).scores
    torch.testing.assert_close(faux_scores(2 * g, 4 * J[:, :1]).scores, s1 / 2, rtol=1e-12, atol=0)


def test_ng_flat_target_scores_zero_and_is_defined(rng):
    g, J = torch.zeros(3, 4, dtype=torch.float64), _rand(rng, 3, 1, 4)
    J[2] = 0
    res = faux_ng_scores(g, J)
    assert res.scores[:2].tolist() == [0.0, 0.0]
    assert res.undefined.tolist() == [False, False, True]


# ---------------------------------------------------------------------------- LIC-UB
def test_lic_upper_bound_is_g_times_true_derivative(rng):
    g = _rand(rng, 10, 5)
    D = _rand(rng, 5, 2)
    torch.testing.assert_close(lic_upper_bound(g, D), (g @ D).abs().amax(1), rtol=1e-12, atol=0)
    torch.testing.assert_close(lic_upper_bound(g, D[:, 0]), (g @ D[:, 0]).abs(), rtol=1e-12, atol=0)
    Dn = _rand(rng, 10, 5, 2)
    expected = torch.stack([(g[i] @ Dn[i]).abs().max() for i in range(10)])
    torch.testing.assert_close(lic_upper_bound(g, Dn), expected, rtol=1e-12, atol=0)
    with pytest.raises(InputError, match="d = 5"):
        lic_upper_bound(g, _rand(rng, 4, 2))


def test_faux_equals_lic_upper_bound_for_linear_generator(rng):
    """x = f(z⊥) + c·b and a linear aux logit with slope a = 3b (parallel to b).

    Per unit change of the aux output, the generator moves x by b / ⟨a, b⟩ = b / (3‖b‖²), which
    is exactly J⁺ = a/‖a‖²: fAux then equals LIC-UB expressed in aux-output units.
    """
    b = rng.normal(size=5)
    a = 3.0 * b
    g = _rand(rng, 9, 5)
    faux = faux_scores(g, torch.from_numpy(np.tile(a, (9, 1, 1))))
    ub = lic_upper_bound(g, torch.from_numpy(b / (a @ b)))
    torch.testing.assert_close(faux.scores, ub, rtol=1e-12, atol=0)
    # a tilted aux slope no longer recovers the generator's direction
    tilted = faux_scores(g, torch.from_numpy(np.tile(a + rng.normal(size=5), (9, 1, 1))))
    assert not torch.allclose(tilted.scores, ub, rtol=1e-3)


# ---------------------------------------------------------------------------- FAuxTester on linear models
def _linear(w, b=0.0, dtype=torch.float32):
    w = torch.as_tensor(w, dtype=dtype)
    m = torch.nn.Linear(len(w), 1).to(dtype)
    with torch.no_grad():
        m.weight.copy_(w[None, :])
        m.bias.fill_(b)
    return m


def _dsigmoid(z):
    z = np.asarray(z, dtype=np.float64)
    s = 1 / (1 + np.exp(-z))
    return s * (1 - s)


def test_tester_k1_linear_target_and_aux_closed_form(rng):
    d = 5
    w_tar, w_aux = rng.normal(size=d), rng.normal(size=d)
    target, aux_net = _linear(w_tar, 0.2), _linear(w_aux, -0.1)
    X = rng.normal(size=(64, d)).astype(np.float32)
    aux = AuxiliaryModel.from_module(aux_net, kind="binary", n_features=d)
    res = FAuxTester(target, aux, output=TargetOutput("logit")).evaluate(X)
    # weights as float32 numbers, the rest in float64
    w_t = target.weight.detach().double().numpy()[0]
    a = aux_net.weight.detach().double().numpy()[0]
    z = X.astype(np.float64) @ w_t + float(target.bias.detach())
    g = _dsigmoid(z)[:, None] * w_t                                              # σ'(z) w_tar
    expected = np.abs(g @ a) / (a @ a)
    np.testing.assert_allclose(res.scores, expected, rtol=1e-5)
    np.testing.assert_allclose(res.probability, 1 / (1 + np.exp(-z)), rtol=1e-6)
    np.testing.assert_allclose(res.evidence.sum(1), np.sign(g @ a) * expected, rtol=1e-4)
    assert res.direct is None and not res.undefined.any()
    # ridge: |⟨g, a⟩| / (‖a‖² + λ)
    damped = FAuxTester(target, aux, output=TargetOutput("logit"), ridge=0.7).score(X)
    np.testing.assert_allclose(damped, np.abs(g @ a) / (a @ a + 0.7), rtol=1e-5)
    # NG: |cos(w_tar, w_aux)| for every row, since σ'(z) > 0
    ng = FAuxTester(target, aux, variant="ng", output=TargetOutput("logit")).score(X)
    cos = abs(w_t @ a) / np.linalg.norm(w_t) / np.linalg.norm(a)
    np.testing.assert_allclose(ng, np.full(64, cos), rtol=1e-6)


def test_path_averaged_gradients_of_linear_function_is_its_gradient(rng):
    W = torch.from_numpy(rng.normal(size=(2, 4))).float()
    fn = lambda x: x @ W.T + 1.0  # noqa: E731
    X = torch.from_numpy(rng.normal(size=(10, 4))).float()
    ig = path_averaged_gradients(fn, X, n_outputs=2, baseline=torch.zeros(4), n_steps=8)
    torch.testing.assert_close(ig, W.expand(10, 2, 4), rtol=1e-5, atol=1e-6)


def test_ig_variant_equals_gradient_variant_for_linear_models(rng):
    """A linear probability target (declared 'probability') and a linear aux: IG = gradient."""
    d = 4
    w_tar = rng.normal(size=d) * 0.02
    target = _linear(w_tar, 0.5)
    aux = AuxiliaryModel.from_module(_linear(rng.normal(size=d)), kind="binary", n_features=d)
    X = rng.normal(size=(30, d)).astype(np.float32)
    out = TargetOutput("probability")
    plain = FAuxTester(target, aux, output=out).score(X)
    for baseline in ("mean", "zeros", np.ones(d)):
        ig = FAuxTester(target, aux, variant="ig", output=out, ig_baseline=baseline, ig_steps=8).score(X)
        np.testing.assert_allclose(ig, plain, rtol=1e-5)
    with pytest.raises(InputError, match="ig_baseline"):
        FAuxTester(target, aux, variant="ig", output=out, ig_baseline="median").score(X)


def test_ig_differs_from_gradient_for_a_curved_target(rng):
    """Control for the test above: with a saturating target IG is an average, not the local value."""
    d = 4
    target = _linear(rng.normal(size=d) * 3)
    aux = AuxiliaryModel.from_module(_linear(rng.normal(size=d)), kind="binary", n_features=d)
    X = rng.normal(size=(30, d)).astype(np.float32)
    plain = FAuxTester(target, aux, output=TargetOutput("logit")).score(X)
    ig = FAuxTester(target, aux, variant="ig", output=TargetOutput("logit"), ig_steps=16).score(X)
    assert np.max(np.abs(ig - plain) / plain) > 0.1


def test_tester_rejects_bad_settings(rng):
    d = 3
    target = _linear(np.ones(d))
    aux = AuxiliaryModel.from_module(_linear(np.ones(d)), kind="binary", n_features=d)
    X = rng.normal(size=(10, d)).astype(np.float32)
    with pytest.raises(InputError, match="variant"):
        FAuxTester(target, aux, variant="lime", output=TargetOutput("logit")).score(X)
    with pytest.raises(InputError, match="0 individuals"):
        FAuxTester(target, aux, output=TargetOutput("logit")).score(X[:0])
    bad = X.copy()
    bad[[2, 5], 1] = np.nan
    with pytest.raises(InputError, match="2 rows with NaN"):
        FAuxTester(target, aux, output=TargetOutput("logit")).score(bad)
    aux4 = AuxiliaryModel.from_module(_linear(np.ones(4)), kind="binary", n_features=4)
    with pytest.raises(InputError, match="expects 4 features but X has 3"):
        FAuxTester(target, aux4, output=TargetOutput("logit")).score(X)


def test_projection_closed_form_and_aux_scale_invariance():
    """Projection reading: |⟨g, a⟩| / ‖a‖ exactly; scaling the aux gradient leaves it unchanged (eq. 9 does not)."""
    import torch

    from faux_checks.method.lic import faux_projection_scores, faux_scores

    gen = torch.Generator().manual_seed(3)
    g = torch.randn(50, 6, generator=gen, dtype=torch.float64)
    a = torch.randn(50, 1, 6, generator=gen, dtype=torch.float64)
    expected = (g * a[:, 0]).sum(1).abs() / a[:, 0].norm(dim=1)
    res = faux_projection_scores(g, a)
    torch.testing.assert_close(res.scores, expected, rtol=1e-12, atol=0)
    torch.testing.assert_close(res.evidence.sum(1).abs(), expected, rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(faux_projection_scores(g, 0.01 * a).scores, expected, rtol=1e-12, atol=0)
    # eq. 9 is inflated 100x by the same shrinking of the aux gradient
    torch.testing.assert_close(faux_scores(g, 0.01 * a).scores, 100 * faux_scores(g, a).scores, rtol=1e-10, atol=0)
    # a zero aux gradient is undefined, not 0
    a[0] = 0
    out = faux_projection_scores(g, a)
    assert out.undefined[0] and torch.isnan(out.scores[0]) and not out.undefined[1:].any()


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("ridge", [0.0, 0.5])
def test_faux_scores_without_evidence_match(k, ridge):
    """The fast path (k×k solve for J·g, no (n, k, d) pseudo-inverse) gives the same scores and undefined rows."""
    import torch

    from faux_checks.method.lic import faux_scores

    gen = torch.Generator().manual_seed(k)
    g = torch.randn(200, 7, generator=gen, dtype=torch.float64)
    J = torch.randn(200, k, 7, generator=gen, dtype=torch.float64)
    J[0] = 0.0                      # zero aux gradient: undefined on both paths
    full = faux_scores(g, J, ridge=ridge)
    fast = faux_scores(g, J, ridge=ridge, evidence=False)
    assert fast.evidence is None
    torch.testing.assert_close(fast.undefined, full.undefined)
    torch.testing.assert_close(fast.scores, full.scores, rtol=1e-10, atol=1e-14, equal_nan=True)
    assert fast.undefined[0] and not fast.undefined[1:].any()
