"""Bad-inputs cases C05-C09 at the scoring-engine level (FAuxTester), and a fair-vs-unfair check.

C08 (protected-attribute encodings) is in test_protected.py and C10 (pickled models) in
test_models.py; C01/C02 at the encoding level are in test_protected.py as well.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from faux_checks import AuxiliaryModel, FAuxTester, InputError, TargetOutput
from faux_checks.method.gradients import target_probability_and_gradient
from faux_checks.method.lic import lic_upper_bound


def _linear(w, b=0.0) -> nn.Linear:
    w = torch.as_tensor(np.asarray(w, dtype=np.float32))
    m = nn.Linear(len(w), 1)
    with torch.no_grad():
        m.weight.copy_(w[None, :])
        m.bias.fill_(b)
    return m


def _dsigmoid(z):
    z = np.asarray(z, dtype=np.float64)
    return np.exp(-np.abs(z)) / (1.0 + np.exp(-np.abs(z))) ** 2


def _given_aux(module, d, kind="binary", **kw) -> AuxiliaryModel:
    return AuxiliaryModel.from_module(module, kind=kind, n_features=d, **kw)


# ---------------------------------------------------------------------------- fair vs unfair
@pytest.fixture(scope="module")
def proxy_data():
    """x = [z⊥ (3 features, independent of c), proxies c + noise (2 features)]; c binary."""
    rng = np.random.default_rng(2)
    n = 600
    z = rng.normal(size=(n, 3))
    c = rng.integers(0, 2, n)
    proxies = c[:, None] + 0.3 * rng.normal(size=(n, 2))
    X = np.hstack([z, proxies]).astype(np.float32)
    aux = AuxiliaryModel(hidden=(16,), epochs=20, lr=1e-2, weight_decay=1e-3, seed=0).fit(X, c)
    return X, c, aux


def test_fair_target_scores_near_zero_and_proxy_target_much_higher(proxy_data):
    from scipy.stats import spearmanr

    X, c, aux = proxy_data
    assert aux.quality_ > 0.95
    fair = _linear([1.0, 1.0, 0.0, 0.0, 0.0])            # uses z⊥ only
    unfair = _linear([1.0, 0.0, 0.0, 2.0, 0.0])          # uses a proxy of c
    out = TargetOutput("logit")
    s_fair = FAuxTester(fair, aux, output=out).evaluate(X)
    s_unfair = FAuxTester(unfair, aux, output=out).evaluate(X)
    assert not s_fair.undefined.any() and not s_unfair.undefined.any()
    med_fair, med_unfair = np.median(s_fair.scores), np.median(s_unfair.scores)
    assert med_fair < 5e-3
    assert med_unfair / med_fair > 10
    delta = 5e-3
    assert s_fair.flagged(delta).mean() < 0.2
    assert s_unfair.flagged(delta).mean() > 0.8
    # NG (|cos|) separates them too
    ng_fair = FAuxTester(fair, aux, variant="ng", output=out).score(X)
    ng_unfair = FAuxTester(unfair, aux, variant="ng", output=out).score(X)
    assert np.median(ng_fair) < 0.1 < 0.4 < np.median(ng_unfair)
    # ground truth: ∂x/∂c = (0, 0, 0, 1, 1); LIC-UB is exactly 0 for the fair target
    dx_dc = torch.tensor([0.0, 0.0, 0.0, 1.0, 1.0])
    _, g_fair = target_probability_and_gradient(fair, torch.from_numpy(X), out)
    _, g_unfair = target_probability_and_gradient(unfair, torch.from_numpy(X), out)
    assert (lic_upper_bound(g_fair, dx_dc) == 0).all()
    ub = lic_upper_bound(g_unfair, dx_dc).numpy()
    assert spearmanr(s_unfair.scores, ub).correlation > 0.6
    # the evidence of the unfair target sits on the proxy it uses
    top_feature = np.abs(s_unfair.evidence).argmax(1)
    assert (top_feature == 3).mean() > 0.9


# ---------------------------------------------------------------------------- C05
class _DeadReLUAux(nn.Module):
    """Aux logit relu(x·v): exactly zero input gradient wherever x·v < 0 (a dead-ReLU region)."""

    def __init__(self, v):
        super().__init__()
        self.register_buffer("v", torch.as_tensor(np.asarray(v, dtype=np.float32)))

    def forward(self, x):
        return torch.relu(x @ self.v)[:, None]


def test_c05_zero_aux_gradient_rows_are_undefined_and_counted(rng):
    d = 4
    v = np.array([1.0, -0.5, 0.25, 2.0])
    w = np.array([0.3, 1.0, -2.0, 0.5])
    X = rng.normal(size=(100, d)).astype(np.float32)
    tester = FAuxTester(_linear(w), _given_aux(_DeadReLUAux(v), d), output=TargetOutput("logit"))
    res = tester.evaluate(X)
    dead = X.astype(np.float64) @ v < 0
    assert 20 < dead.sum() < 80
    np.testing.assert_array_equal(res.undefined, dead)
    assert int(res.undefined.sum()) == int(dead.sum())
    assert np.isnan(res.scores[dead]).all() and np.isfinite(res.scores[~dead]).all()
    # the live rows have the k = 1 closed form |⟨g, v⟩| / ‖v‖²
    z = X.astype(np.float64) @ w
    expected = _dsigmoid(z) * abs(w @ v) / (v @ v)
    np.testing.assert_allclose(res.scores[~dead], expected[~dead], rtol=1e-5)
    # undefined rows are never flagged, even at δ = 0 ...
    assert not res.flagged(0.0)[dead].any()
    assert res.flagged(0.0)[~dead].all()
    # ... and repeated runs give the same result
    again = tester.evaluate(X)
    np.testing.assert_array_equal(again.scores, res.scores)          # NaNs in the same places
    np.testing.assert_array_equal(again.undefined, res.undefined)


def test_c05_saturated_probability_aux_is_undefined_not_silently_zero(rng):
    """Aux in probability space with confident logits: σ(40) == 1 in float32 so J == 0 exactly."""
    d = 3
    a = np.array([10.0, 0.0, 0.0])
    X = np.array([[4.0, 1, 1], [3.0, 0, 0], [0.1, 2, 0], [-0.2, 0, 1]], dtype=np.float32)   # logits 40, 30, 1, -2
    aux = _given_aux(_linear(a), d, output_space="probability")
    res = FAuxTester(_linear([1.0, 1.0, 1.0]), aux, output=TargetOutput("logit")).evaluate(X)
    assert res.undefined.tolist() == [True, True, False, False]
    assert not np.isinf(res.scores).any()
    p = 1 / (1 + np.exp(-X[2:, 0].astype(np.float64) * 10))
    g = _dsigmoid(X[2:].astype(np.float64).sum(1))
    expected = g * 10.0 / (p * (1 - p) * 100.0)                      # |⟨g, a_p⟩| / ‖a_p‖², a_p = p(1−p)a
    np.testing.assert_allclose(res.scores[2:], expected, rtol=1e-5)


def _three_class_aux(d, eps, rng_seed=0):
    """Raw logits W x with W0 = 0, W1 = v, W2 = v + eps·u: Jacobian rows v and v + eps·u."""
    r = np.random.default_rng(rng_seed)
    v, u = r.normal(size=d), r.normal(size=d)
    lin = nn.Linear(d, 3, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(np.stack([np.zeros(d), v, v + eps * u]).astype(np.float32)))
    return _given_aux(lin, d, kind="multiclass")


@pytest.mark.parametrize("eps,expect", [(1e-1, "finite"), (1e-6, "either"), (0.0, "undefined")])
def test_c05_near_singular_three_class_jacobian(rng, eps, expect):
    d = 5
    X = rng.normal(size=(40, d)).astype(np.float32)
    target = nn.Sequential(nn.Linear(d, 8), nn.Tanh(), nn.Linear(8, 1))
    tester = FAuxTester(target, _three_class_aux(d, eps), output=TargetOutput("logit"))
    res = tester.evaluate(X)
    assert not np.isinf(res.scores).any()
    assert np.array_equal(np.isnan(res.scores), res.undefined)
    if expect == "finite":
        assert not res.undefined.any()
    elif expect == "undefined":
        assert res.undefined.all()
    again = tester.evaluate(X)
    np.testing.assert_array_equal(again.scores, res.scores)
    np.testing.assert_array_equal(again.undefined, res.undefined)
    # a ridge keeps every row defined and finite
    damped = FAuxTester(target, tester.aux_model, output=TargetOutput("logit"), ridge=1e-3).evaluate(X)
    assert not damped.undefined.any() and np.isfinite(damped.scores).all()


# ---------------------------------------------------------------------------- C06
def _train_mode_target(d: int) -> nn.Module:
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(d, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 1))
    with torch.no_grad():
        net[1].running_mean.copy_(torch.randn(16) * 0.3)
        net[1].running_var.copy_(torch.rand(16) + 0.5)
    net.train()
    return net


@pytest.mark.parametrize("form", ["logit", "probability"])
def test_c06_train_mode_dropout_and_batchnorm(rng, form):
    d = 5
    net = _train_mode_target(d)
    target = net if form == "logit" else nn.Sequential(net, nn.Sigmoid()).train()
    net[3].eval()                                                     # one submodule with its own flag
    flags = [m.training for m in target.modules()]
    state = copy.deepcopy(target.state_dict())
    aux = _given_aux(_linear(rng.normal(size=d)), d)
    X = rng.normal(size=(45, d)).astype(np.float32)

    whole = FAuxTester(target, aux, output=TargetOutput(form)).evaluate(X)
    chunked = FAuxTester(target, aux, output=TargetOutput(form), chunk_size=7).evaluate(X)
    again = FAuxTester(target, aux, output=TargetOutput(form)).evaluate(X)
    np.testing.assert_array_equal(again.scores, whole.scores)        # deterministic
    np.testing.assert_allclose(chunked.scores, whole.scores, rtol=1e-6, atol=0)
    subset = FAuxTester(target, aux, output=TargetOutput(form)).evaluate(X[10:13])
    np.testing.assert_allclose(subset.scores, whole.scores[10:13], rtol=1e-6, atol=0)
    # the model is left exactly as it was: flags and BatchNorm statistics
    assert [m.training for m in target.modules()] == flags
    for key, value in target.state_dict().items():
        assert torch.equal(value, state[key]), key
    # the scores are those of the model in eval mode (dropout off, running statistics)
    frozen = copy.deepcopy(target).eval()
    reference = FAuxTester(frozen, aux, output=TargetOutput(form)).evaluate(X)
    np.testing.assert_allclose(whole.scores, reference.scores, rtol=1e-6, atol=0)


def test_c06_batch_dependent_model_is_refused(rng):
    class BatchCentred(nn.Module):
        def forward(self, x):
            return (x - x.mean(dim=0)).sum(dim=1, keepdim=True)

    d = 3
    aux = _given_aux(_linear([1.0, 0.0, 0.0]), d)
    with pytest.raises(InputError, match="changes with the other rows of its batch"):
        FAuxTester(BatchCentred(), aux, output=TargetOutput("logit")).evaluate(rng.normal(size=(20, d)))


# ---------------------------------------------------------------------------- C07
class _Forms(nn.Module):
    """One classifier h(x) (a logit) exposed in the output forms of bad-inputs case C07."""

    def __init__(self, h: nn.Module, form: str):
        super().__init__()
        self.h, self.form = h, form

    def forward(self, x):
        z = self.h(x)                                                 # (b, 1)
        if self.form == "logit":
            return z
        if self.form == "probability":
            return torch.sigmoid(z)
        two = torch.cat([torch.zeros_like(z), z], dim=1)              # class 1 has log-odds z
        return torch.softmax(two, dim=1) if self.form == "softmax" else two


@pytest.fixture(scope="module")
def c07_setup():
    rng = np.random.default_rng(7)
    d = 5
    torch.manual_seed(7)
    h = nn.Sequential(nn.Linear(d, 8), nn.Tanh(), nn.Linear(8, 1))
    X = rng.normal(size=(60, d)).astype(np.float32)
    aux = _given_aux(nn.Sequential(nn.Linear(d, 4), nn.Tanh(), nn.Linear(4, 1)), d)
    return h, X, aux


@pytest.mark.parametrize("variant", ["faux", "ng"])
def test_c07_same_classifier_same_scores_in_every_output_form(c07_setup, variant):
    h, X, aux = c07_setup
    scores = {}
    for form in ("logit", "probability", "softmax", "logits"):
        for cls in (0, 1):
            res = FAuxTester(_Forms(h, form), aux, variant=variant, output=TargetOutput(form, cls)).evaluate(X)
            scores[form, cls] = res.scores
            if cls == 1:
                with torch.no_grad():
                    p = torch.sigmoid(h(torch.from_numpy(X))[:, 0].double()).numpy()
                np.testing.assert_allclose(res.probability, p, rtol=1e-5)
    reference = scores["logit", 1]
    assert np.isfinite(reference).all() and reference.std() > 0
    for key, s in scores.items():
        np.testing.assert_allclose(s, reference, rtol=1e-4, err_msg=str(key))
    # 'auto' reads the logit and the 2-column forms correctly
    for form in ("logit", "softmax", "logits"):
        auto = FAuxTester(_Forms(h, form), aux, variant=variant).score(X)
        np.testing.assert_allclose(auto, reference, rtol=1e-4, err_msg=form)


def test_c07_ambiguous_form_and_bad_class_are_errors(c07_setup):
    h, X, aux = c07_setup
    with pytest.raises(InputError, match="could be a probability or a logit"):
        FAuxTester(_Forms(h, "probability"), aux).score(X)
    with pytest.raises(InputError, match="target_class 2 is out of range for 2 output columns"):
        FAuxTester(_Forms(h, "softmax"), aux, output=TargetOutput("softmax", 2)).score(X)
    with pytest.raises(InputError, match="target_class 3 is out of range for a binary output"):
        FAuxTester(_Forms(h, "logit"), aux, output=TargetOutput("logit", 3)).score(X)
    with pytest.raises(InputError, match="needs one output column"):
        FAuxTester(_Forms(h, "softmax"), aux, output=TargetOutput("probability")).score(X)


def test_saturated_logit_target_still_scores(rng):
    """|z| ≈ 40 and 110: the float64 chain rule keeps g ≠ 0, so these rows can still be scored."""
    d = 3
    w = np.array([10.0, 1.0, -1.0])
    X = np.array([[4.0, 0, 0], [-4.0, 0, 0], [11.0, 0, 0], [-11.0, 0, 0], [0.1, 0, 0]], dtype=np.float32)
    a = np.array([0.5, 1.0, 2.0])
    res = FAuxTester(_linear(w), _given_aux(_linear(a), d), output=TargetOutput("logit")).evaluate(X)
    assert not res.undefined.any() and (res.scores > 0).all()
    z = X.astype(np.float64) @ w
    np.testing.assert_allclose(res.scores, _dsigmoid(z) * abs(w @ a) / (a @ a), rtol=1e-5)


# ---------------------------------------------------------------------------- C09
@pytest.mark.parametrize("w_c", [1.5, 0.0])
def test_c09_direct_term_of_a_protected_input(rng, w_c):
    """x = [x0, x1, x2, x_c]: the target uses the encoded protected column x_c directly."""
    d = 4
    w = np.array([0.4, -1.0, 0.7, w_c])
    a = np.array([1.0, 0.5, -0.25])                                   # aux on x0..x2 only
    step = 1.8                                                        # Δx_c per unit c (e.g. 1/std)
    mask = np.array([False, False, False, True])
    dx_dc = np.zeros((d, 1))
    dx_dc[3, 0] = step
    X = rng.normal(size=(50, d)).astype(np.float32)
    target = _linear(w, 0.1)
    aux = _given_aux(_linear(a), d - 1)
    res = FAuxTester(target, aux, output=TargetOutput("logit"), protected_mask=mask, dx_dc_direct=dx_dc).evaluate(X)

    s = _dsigmoid(X.astype(np.float64) @ w + 0.1)                     # σ'(z), g = σ'(z) w
    indirect = s * (w[:3] @ a) / (a @ a)
    direct = s * w_c * step
    np.testing.assert_allclose(res.direct, np.abs(direct), rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(res.scores, np.abs(indirect + direct), rtol=1e-5)
    np.testing.assert_allclose(res.evidence[:, :3].sum(1), indirect, rtol=1e-4, atol=1e-9)
    assert (res.evidence[:, 3] == 0).all()                            # the protected column carries no evidence
    if w_c == 0.0:
        assert (res.direct == 0).all()
        plain = FAuxTester(_linear(w[:3], 0.1), aux, output=TargetOutput("logit")).score(X[:, :3])
        np.testing.assert_allclose(res.scores, plain, rtol=1e-5)


def test_c09_settings_errors(rng):
    d = 4
    X = rng.normal(size=(10, d)).astype(np.float32)
    target, aux = _linear(np.ones(d)), _given_aux(_linear(np.ones(3)), 3)
    mask = np.array([False, False, False, True])
    with pytest.raises(InputError, match="protected_mask given without dx_dc_direct"):
        FAuxTester(target, aux, output=TargetOutput("logit"), protected_mask=mask).score(X)
    with pytest.raises(InputError, match="variant 'ng' cannot add the direct term"):
        FAuxTester(target, aux, variant="ng", output=TargetOutput("logit"), protected_mask=mask,
                   dx_dc_direct=np.ones((d, 1))).score(X)
    with pytest.raises(InputError, match=r"protected_mask has shape \(3,\), expected \(4,\)"):
        FAuxTester(target, aux, output=TargetOutput("logit"), protected_mask=mask[:3],
                   dx_dc_direct=np.ones((d, 1))).score(X)


def test_c05_constant_aux_is_undefined_and_constant_target_scores_zero(rng):
    class Constant(nn.Module):
        def forward(self, x):
            return torch.ones(x.shape[0], 1)                          # no graph to x at all

    d = 3
    X = rng.normal(size=(12, d)).astype(np.float32)
    res = FAuxTester(_linear([1.0, 2.0, 3.0]), _given_aux(Constant(), d), output=TargetOutput("logit")).evaluate(X)
    assert res.undefined.all() and np.isnan(res.scores).all()
    flat = FAuxTester(Constant(), _given_aux(_linear([1.0, 0.0, 0.0]), d), output=TargetOutput("logit")).evaluate(X)
    assert not flat.undefined.any() and (flat.scores == 0).all()


def test_saturated_probability_output_is_undefined_not_zero():
    """A sigmoid-probability target saturated to exactly 1.0 has g = 0 by rounding: undefined, counted."""
    import torch

    from faux_checks import AuxiliaryModel, FAuxTester, TargetOutput

    gen = torch.Generator().manual_seed(0)
    X = torch.randn(300, 4, generator=gen)
    X[:5, 0] = 100.0                      # sigmoid(1000 + ...) == 1.0 exactly, even in float64
    c = (X[:, 1] > 0).long().numpy()
    aux = AuxiliaryModel(kind="binary", epochs=5, seed=0).fit(X, c)

    class Prob(torch.nn.Module):
        def forward(self, x):
            return torch.sigmoid(10 * x[:, :1] + x[:, 1:2])

    res = FAuxTester(Prob(), aux, output=TargetOutput("probability")).evaluate(X)
    assert res.undefined[:5].all() and np.isnan(res.scores[:5]).all()
    assert not res.undefined[5:].any() and np.isfinite(res.scores[5:]).all()
