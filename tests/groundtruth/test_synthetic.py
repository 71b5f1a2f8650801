"""The fused synthetic generator (faux_checks.groundtruth.fused) and its ground truth.

Stand-in datasets are generated here (small, seeded): the generator takes any two labelled
numeric datasets; the benchmark feeds it Adult and Bank Marketing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from faux_checks import InputError, TargetOutput
from faux_checks.method._batching import as_tensor
from faux_checks.method.gradients import target_probability_and_gradient
from faux_checks.method.lic import lic_upper_bound
from faux_checks.groundtruth.fused import fuse, individual_fairness_scores, make_fused_data

D_HAT, D_TILDE = 3, 4


def _stand_ins(rng, n=3000):
    """D̂: label from a logistic model of 3 features; D̃: 4 features whose mean and scale depend on its label."""
    x_hat = pd.DataFrame(rng.normal(size=(n, D_HAT)), columns=["h0", "h1", "h2"])
    y_hat = (x_hat["h0"] - x_hat["h1"] + 0.5 * rng.normal(size=n) > 0).astype(int).to_numpy()
    y_tilde = rng.integers(0, 2, size=n)
    x_tilde = rng.normal(size=(n, D_TILDE)) * (1.0 + 0.5 * y_tilde[:, None]) + 1.5 * y_tilde[:, None]
    return x_hat, y_hat, pd.DataFrame(x_tilde, columns=[f"t{i}" for i in range(D_TILDE)]), y_tilde


def test_bias_sets_the_correlation_of_y_and_c_monotonically(rng):
    parts = _stand_ins(rng)
    levels = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    corr = [np.corrcoef(*(lambda d: (d.y, d.c))(make_fused_data(*parts, n=20_000, bias=b, seed=1)))[0, 1]
            for b in levels]
    assert np.all(np.diff(corr) > 0.1)                                   # strictly and measurably increasing
    np.testing.assert_allclose(corr, levels, atol=0.03)                  # corr(y, c) = b by construction
    assert corr[-1] == pytest.approx(1.0)


@pytest.mark.parametrize("fusion", ["concat", "outer"])
def test_generator_reproduces_the_real_rows_and_swaps_only_the_c_driven_part(rng, fusion):
    x_hat, y_hat, x_tilde, y_tilde = parts = _stand_ins(rng, n=500)
    data = make_fused_data(*parts, n=200, bias=0.5, fusion=fusion, seed=3)
    d = D_HAT + D_TILDE if fusion == "concat" else (D_HAT + 1) * (D_TILDE + 1) - 1
    assert data.X.shape == (200, d) and data.dx_dc().shape == (200, d, 1) and len(data.feature_names) == d
    i, j = data.pairs.T
    xh = (x_hat.to_numpy() - x_hat.to_numpy().mean(0)) / x_hat.to_numpy().std(0)
    xt = (x_tilde.to_numpy() - x_tilde.to_numpy().mean(0)) / x_tilde.to_numpy().std(0)
    np.testing.assert_allclose(data.X, fuse(xh[i], xt[j], fusion), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(data.y, y_hat[i])
    np.testing.assert_array_equal(data.c, y_tilde[j])
    swapped = data.swapped()
    if fusion == "concat":
        np.testing.assert_array_equal(swapped[:, :D_HAT], data.X[:, :D_HAT])   # z⊥ fixed
        assert np.all(np.abs(swapped[:, D_HAT:] - data.X[:, D_HAT:]).sum(1) > 0)
    np.testing.assert_allclose(data.features(data.c), data.X, atol=1e-6)


class _HatOnly(nn.Module):
    """A target that reads only the c-independent columns."""

    def __init__(self, cols):
        super().__init__()
        self.cols = cols
        self.net = nn.Sequential(nn.Linear(len(cols), 8), nn.Tanh(), nn.Linear(8, 1))

    def forward(self, x):
        return self.net(x[:, self.cols])


@pytest.mark.parametrize("fusion", ["concat", "outer"])
def test_ifs_is_zero_for_a_target_that_ignores_the_c_driven_part(rng, fusion):
    data = make_fused_data(*_stand_ins(rng, n=500), n=300, bias=1.0, fusion=fusion, seed=0)
    # concat: x̂ is the first block; outer: x̂ₐ·1 sits at a·(d̃+1) + d̃
    cols = list(range(D_HAT)) if fusion == "concat" else [a * (D_TILDE + 1) + D_TILDE for a in range(D_HAT)]
    ifs = individual_fairness_scores(_HatOnly(cols), data, output=TargetOutput(form="logit"))
    assert ifs.shape == (300,) and np.all(ifs == 0.0)
    # a target reading the c-driven block is not fair here
    full = nn.Sequential(nn.Linear(data.X.shape[1], 8), nn.Tanh(), nn.Linear(8, 1))
    assert np.mean(individual_fairness_scores(full, data, output=TargetOutput(form="logit"))) > 1e-3


@pytest.mark.parametrize("fusion", ["concat", "outer"])
def test_lic_upper_bound_equals_the_finite_difference_along_dx_dc(rng, fusion):
    """LIC-UB |g·∂x/∂c| is the derivative of f along the generator's c: check by central differences."""
    data = make_fused_data(*_stand_ins(rng, n=500), n=100, bias=0.6, fusion=fusion, seed=2)
    d = data.X.shape[1]
    target = nn.Sequential(nn.Linear(d, 16), nn.Tanh(), nn.Linear(16, 1), nn.Sigmoid())
    _, g = target_probability_and_gradient(target, as_tensor(data.X), TargetOutput(form="probability"))
    ub = lic_upper_bound(g, torch.from_numpy(data.dx_dc())).numpy()
    eps = 1e-5
    twin = target.double()

    def prob(c):
        x = fuse(data.x_hat, data.c_map(data.z_tilde, c), data.fusion)   # float64, c real-valued
        with torch.no_grad():
            return twin(torch.from_numpy(x))[:, 0].numpy()

    fd = np.abs(prob(data.c + eps) - prob(data.c - eps)) / (2 * eps)
    np.testing.assert_allclose(ub, fd, rtol=1e-5, atol=1e-9)
    assert np.median(ub) > 1e-3


def test_generator_refuses_bad_settings(rng):
    parts = _stand_ins(rng, n=100)
    with pytest.raises(InputError, match="bias"):
        make_fused_data(*parts, n=10, bias=1.5)
    with pytest.raises(InputError, match="fusion"):
        make_fused_data(*parts, n=10, bias=0.5, fusion="sum")
    x_hat, y_hat, x_tilde, y_tilde = parts
    with pytest.raises(InputError, match="0/1"):
        make_fused_data(x_hat, y_hat + 1, x_tilde, y_tilde, n=10, bias=0.5)
    with pytest.raises(InputError, match="non-numeric"):
        make_fused_data(x_hat.assign(h0="a"), y_hat, x_tilde, y_tilde, n=10, bias=0.5)
