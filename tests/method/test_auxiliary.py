"""The auxiliary model (faux_checks.method.auxiliary): determinism, quality, kinds, Jacobian, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from faux_checks import AuxiliaryModel, InputError

FAST = dict(hidden=(16,), epochs=15, batch_size=64, lr=1e-2)


def _binary_data(rng, n=400, d=5):
    X = rng.normal(size=(n, d)).astype(np.float32)
    c = (X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n) > 0).astype(np.int64)
    return X, c


def _state(model: AuxiliaryModel):
    return {k: v.clone() for k, v in model.net_.state_dict().items()}


def test_same_seed_gives_identical_weights_and_quality(rng):
    X, c = _binary_data(rng)
    a = AuxiliaryModel(seed=7, **FAST).fit(X, c)
    torch.manual_seed(999)                           # the global generator must not matter ...
    state = torch.get_rng_state()
    b = AuxiliaryModel(seed=7, **FAST).fit(X, c)
    assert torch.equal(torch.get_rng_state(), state)  # ... and fit must not reset it
    sa, sb = _state(a), _state(b)
    assert sa.keys() == sb.keys()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert a.quality_ == b.quality_ and a.epochs_run_ == b.epochs_run_
    torch.testing.assert_close(a.jacobian(X), b.jacobian(X), rtol=0, atol=0)
    other = AuxiliaryModel(seed=8, **FAST).fit(X, c)
    assert not torch.equal(_state(other)["mlp.0.weight"], sa["mlp.0.weight"])


def test_binary_quality_on_an_easy_problem(rng):
    X, c = _binary_data(rng)
    aux = AuxiliaryModel(seed=0, **FAST).fit(X, c, groups=("F", "M"))
    assert aux.quality_metric_ == "roc_auc"
    assert 0.9 < aux.quality_ <= 1.0
    assert aux.groups_ == ("F", "M")
    assert aux.n_features_in_ == 5 and aux.n_train_ + aux.n_holdout_ == 400
    assert aux.n_holdout_ == 80                                        # 20 % of each class, stratified
    assert 1 <= aux.epochs_run_ <= 15
    assert (aux.predict(X) == c).mean() > 0.85
    y, score = aux.holdout_
    assert len(y) == aux.n_holdout_ and score.shape == (aux.n_holdout_,)
    assert "roc_auc=" in repr(aux)


def test_a_weak_signal_gives_chance_quality(rng):
    X = rng.normal(size=(400, 4)).astype(np.float32)
    c = rng.integers(0, 2, 400)                                        # independent of X
    aux = AuxiliaryModel(seed=0, **FAST).fit(X, c)
    assert 0.3 < aux.quality_ < 0.7


def test_multiclass_kind(rng):
    n = 450
    c = np.repeat([0, 1, 2], n // 3)
    X = rng.normal(size=(n, 4)).astype(np.float32)
    X[:, 0] += 3.0 * (c == 1)
    X[:, 1] += 3.0 * (c == 2)
    aux = AuxiliaryModel(kind="multiclass", seed=0, **FAST).fit(X, c)
    assert aux.quality_metric_ == "roc_auc_ovr_macro"
    assert aux.quality_ > 0.9
    assert aux.n_jacobian_outputs == 2
    J = aux.jacobian(X[:10])
    assert J.shape == (10, 2, 4)
    # outputs are the log-odds of groups 1, 2 against group 0: rows of ∂(raw_j − raw_0)/∂x
    x = torch.from_numpy(X[:10]).requires_grad_(True)
    raw = aux.net_(x)
    (g1,) = torch.autograd.grad((raw[:, 1] - raw[:, 0]).sum(), x, retain_graph=True)
    (g2,) = torch.autograd.grad((raw[:, 2] - raw[:, 0]).sum(), x)
    torch.testing.assert_close(J[:, 0], g1)
    torch.testing.assert_close(J[:, 1], g2)
    assert (aux.predict(X) == c).mean() > 0.8


def test_continuous_kind(rng):
    X = rng.normal(size=(400, 3)).astype(np.float32)
    c = 50.0 + 10.0 * (X[:, 0] - X[:, 2]) + rng.normal(size=400)
    aux = AuxiliaryModel(kind="continuous", seed=0, **FAST).fit(X, c)
    assert aux.quality_metric_ == "r2"
    assert aux.quality_ > 0.8
    assert aux.n_jacobian_outputs == 1
    pred = aux.predict(X)                                              # back in c's own units
    assert abs(pred.mean() - 50.0) < 2.0
    assert np.corrcoef(pred, c)[0, 1] > 0.9
    J = aux.jacobian(X)
    # standardised output: slope along x0 is positive, along x2 negative
    assert J[:, 0, 0].mean() > 0 > J[:, 0, 2].mean()


def test_probability_output_space_is_logit_jacobian_times_p_one_minus_p(rng):
    """The identity a_p = p(1 − p)·a_l (docs/method.md), checked on the same trained network."""
    X, c = _binary_data(rng)
    logit = AuxiliaryModel(seed=0, **FAST).fit(X, c)
    prob = AuxiliaryModel(seed=0, output_space="probability", **FAST).fit(X, c)
    with torch.no_grad():
        p = torch.sigmoid(logit.net_(torch.from_numpy(X))[:, 0]).double()
    Jl, Jp = logit.jacobian(X).double(), prob.jacobian(X).double()
    torch.testing.assert_close(Jp[:, 0], (p * (1 - p))[:, None] * Jl[:, 0], rtol=1e-4, atol=1e-8)


def test_fit_errors(rng):
    X, c = _binary_data(rng, n=60)
    with pytest.raises(InputError, match="at least 20 rows"):
        AuxiliaryModel(**FAST).fit(X[:10], c[:10])
    with pytest.raises(InputError, match="60 rows but the protected attribute has 59"):
        AuxiliaryModel(**FAST).fit(X, c[:59])
    c3 = c.copy()
    c3[0] = 2
    with pytest.raises(InputError, match=r"group\(s\) \[2\] have fewer than 2 rows"):
        AuxiliaryModel(**FAST).fit(X, c3)
    c3[1] = 2
    with pytest.raises(InputError, match="kind 'binary' needs 2 groups, found 3"):
        AuxiliaryModel(**FAST).fit(X, c3)
    bad = X.copy()
    bad[3, 2] = np.inf
    with pytest.raises(InputError, match="feature column 2 of X has 0 NaN and 1 infinite values in 60 rows"):
        AuxiliaryModel(**FAST).fit(bad, c)
    with pytest.raises(InputError, match="kind must be"):
        AuxiliaryModel(kind="ordinal").fit(X, c)
    with pytest.raises(InputError, match="output_space must be"):
        AuxiliaryModel(output_space="odds").fit(X, c)
    with pytest.raises(InputError, match="holdout must be in"):
        AuxiliaryModel(holdout=1.5, **FAST).fit(X, c)


def test_use_before_fit_and_width_mismatch(rng):
    X, c = _binary_data(rng, n=100)
    with pytest.raises(InputError, match="not fitted yet"):
        AuxiliaryModel().jacobian(X)
    with pytest.raises(InputError, match="not fitted yet"):
        AuxiliaryModel().predict(X)
    aux = AuxiliaryModel(**FAST).fit(X, c)
    with pytest.raises(InputError, match="X has 4 features but the auxiliary model was fitted on 5"):
        aux.jacobian(X[:, :4])


def test_from_module_wraps_a_given_network(rng):
    """Wrapped modules: no `mlp` attribute, and n_features may be unknown (neither crashes)."""
    net = nn.Linear(3, 1)
    aux = AuxiliaryModel.from_module(net, kind="binary")               # n_features unknown
    X = torch.from_numpy(rng.normal(size=(5, 3)).astype(np.float32))
    torch.testing.assert_close(aux.jacobian(X), net.weight.detach().expand(5, 1, 3))
    assert np.isnan(aux.quality_) and aux.quality_metric_ == "given"
    multi = AuxiliaryModel.from_module(nn.Linear(3, 4), kind="multiclass", n_features=3)
    assert multi.n_jacobian_outputs == 3
    assert AuxiliaryModel.from_module(nn.Linear(3, 1), kind="binary", n_features=3).n_jacobian_outputs == 1


def test_torchscript_export_gives_the_same_jacobian(rng):
    X, c = _binary_data(rng, n=100)
    aux = AuxiliaryModel(**FAST).fit(X, c)
    scripted = AuxiliaryModel.from_module(aux.to_torchscript(), kind="binary", n_features=5)
    assert scripted.n_jacobian_outputs == 1
    torch.testing.assert_close(scripted.jacobian(X), aux.jacobian(X))
