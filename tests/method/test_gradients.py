"""Input gradients and Jacobians (faux_checks.method.gradients) against central finite differences.

Finite differences are taken on a float64 copy of each model (h = 1e-5, error ~1e-10), so
they are an independent reference for both the float32 logit path and the float64 twin path.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from faux_checks import InputError, TargetOutput
from faux_checks.method._batching import eval_mode, iter_chunks
from faux_checks.method.gradients import check_batch_independence, output_jacobian, target_probability_and_gradient
from faux_checks.method.output import resolve_output_form

H = 1e-5


def _mlp(d: int, m: int, seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, m))


def _fd_gradient(fn, X: np.ndarray) -> np.ndarray:
    """Central differences of a row-wise scalar function fn: (n, d) float64 -> (n,)."""
    X = torch.from_numpy(X.astype(np.float64))
    cols = []
    for j in range(X.shape[1]):
        e = torch.zeros_like(X)
        e[:, j] = H
        cols.append((fn(X + e) - fn(X - e)) / (2 * H))
    return torch.stack(cols, dim=1).numpy()


def _fd_jacobian(fn, X: np.ndarray) -> np.ndarray:
    """(n, k, d) central differences of fn: (n, d) float64 -> (n, k)."""
    X = torch.from_numpy(X.astype(np.float64))
    cols = []
    for j in range(X.shape[1]):
        e = torch.zeros_like(X)
        e[:, j] = H
        cols.append((fn(X + e) - fn(X - e)) / (2 * H))
    return torch.stack(cols, dim=2).numpy()


@pytest.fixture
def X(rng):
    return rng.normal(size=(24, 4)).astype(np.float32)


# ---------------------------------------------------------------------------- target gradient vs FD
@pytest.mark.parametrize("target_class", [0, 1])
def test_logit_form_gradient_matches_finite_differences(X, target_class):
    net = _mlp(4, 1)
    net64 = copy.deepcopy(net).double()
    sign = 1.0 if target_class == 1 else -1.0

    def prob64(x):
        with torch.no_grad():
            return torch.sigmoid(sign * net64(x)[:, 0])

    p, g = target_probability_and_gradient(net, torch.from_numpy(X), TargetOutput("logit", target_class))
    assert p.dtype == torch.float64 and g.dtype == torch.float64
    np.testing.assert_allclose(p.numpy(), prob64(torch.from_numpy(X.astype(np.float64))).numpy(), rtol=1e-6)
    np.testing.assert_allclose(g.numpy(), _fd_gradient(prob64, X), rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("target_class", [0, 1])
def test_probability_form_gradient_matches_finite_differences(X, target_class):
    net = nn.Sequential(_mlp(4, 1), nn.Sigmoid())
    net64 = copy.deepcopy(net).double()

    def prob64(x):
        with torch.no_grad():
            p1 = net64(x)[:, 0]
        return p1 if target_class == 1 else 1 - p1

    p, g = target_probability_and_gradient(net, torch.from_numpy(X), TargetOutput("probability", target_class))
    np.testing.assert_allclose(p.numpy(), prob64(torch.from_numpy(X.astype(np.float64))).numpy(), rtol=1e-12)
    np.testing.assert_allclose(g.numpy(), _fd_gradient(prob64, X), rtol=1e-6, atol=1e-10)


@pytest.mark.parametrize("m,target_class", [(2, 0), (2, 1), (3, 2)])
def test_softmax_form_gradient_matches_finite_differences(X, m, target_class):
    net = nn.Sequential(_mlp(4, m), nn.Softmax(dim=1))
    net64 = copy.deepcopy(net).double()

    def prob64(x):
        with torch.no_grad():
            return net64(x)[:, target_class]

    p, g = target_probability_and_gradient(net, torch.from_numpy(X), TargetOutput("softmax", target_class))
    np.testing.assert_allclose(p.numpy(), prob64(torch.from_numpy(X.astype(np.float64))).numpy(), rtol=1e-12)
    np.testing.assert_allclose(g.numpy(), _fd_gradient(prob64, X), rtol=1e-6, atol=1e-10)


@pytest.mark.parametrize("target_class", [0, 1, 2])
def test_logits_form_gradient_matches_finite_differences(X, target_class):
    net = _mlp(4, 3)
    net64 = copy.deepcopy(net).double()

    def prob64(x):
        with torch.no_grad():
            return torch.softmax(net64(x), dim=1)[:, target_class]

    p, g = target_probability_and_gradient(net, torch.from_numpy(X), TargetOutput("logits", target_class))
    np.testing.assert_allclose(p.numpy(), prob64(torch.from_numpy(X.astype(np.float64))).numpy(), rtol=1e-6)
    np.testing.assert_allclose(g.numpy(), _fd_gradient(prob64, X), rtol=1e-4, atol=1e-7)


def test_gradient_is_the_same_in_chunks(X):
    net = _mlp(4, 1)
    whole = target_probability_and_gradient(net, torch.from_numpy(X), TargetOutput("logit"))
    chunked = target_probability_and_gradient(net, torch.from_numpy(X), TargetOutput("logit"), chunk_size=5)
    torch.testing.assert_close(chunked[0], whole[0], rtol=1e-6, atol=0)
    # float32 rounding of a smaller batch's matmul: 1.4e-9 absolute measured on the smallest gradient entry
    torch.testing.assert_close(chunked[1], whole[1], rtol=1e-5, atol=1e-8)


def test_unresolved_auto_form_is_refused(X):
    with pytest.raises(InputError, match="resolve the output form first"):
        target_probability_and_gradient(_mlp(4, 1), torch.from_numpy(X), TargetOutput("auto"))


# ---------------------------------------------------------------------------- saturation
@pytest.mark.parametrize("z", [40.0, -40.0, 110.0, -110.0])
def test_saturated_logit_target_keeps_a_nonzero_float64_gradient(z):
    """|z| = 40: the float32 probability is exactly 1 (or ~4e-18), σ'(z) ≈ 4.2e-18 must survive.

    |z| = 110: σ'(z) ≈ 1.7e-48 is below float32's smallest subnormal; only a float64 gradient
    keeps it (a float32 gradient is exactly 0 there).
    """
    w = torch.tensor([[2.0, -1.0, 0.5]])
    net = nn.Linear(3, 1)
    with torch.no_grad():
        net.weight.copy_(w)
        net.bias.zero_()
    x = torch.tensor([[z / 2.0, 0.0, 0.0]])
    p, g = target_probability_and_gradient(net, x, TargetOutput("logit"))
    assert (g != 0).all() and torch.isfinite(g).all()
    s = 1.0 / (1.0 + np.exp(-z))
    dsig = np.exp(-abs(z)) / (1.0 + np.exp(-abs(z))) ** 2                     # σ'(z), stable form
    np.testing.assert_allclose(g.numpy()[0], dsig * w.double().numpy()[0], rtol=1e-6)
    np.testing.assert_allclose(p.numpy()[0], s, rtol=1e-6)


# ---------------------------------------------------------------------------- Jacobian vs FD
def test_output_jacobian_matches_finite_differences(X):
    net = _mlp(4, 3, seed=3)
    net64 = copy.deepcopy(net).double()

    def fn64(x):
        with torch.no_grad():
            return net64(x)

    J = output_jacobian(net, torch.from_numpy(X))
    assert J.shape == (24, 3, 4) and J.dtype == torch.float32
    np.testing.assert_allclose(J.numpy(), _fd_jacobian(fn64, X), rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(output_jacobian(net, torch.from_numpy(X), chunk_size=7), J, rtol=1e-5, atol=1e-7)


def test_output_jacobian_of_vector_output_and_empty_input(X):
    w = torch.tensor([1.0, -2.0, 3.0, 0.5])
    J = output_jacobian(lambda x: x @ w, torch.from_numpy(X))
    torch.testing.assert_close(J, w.expand(24, 1, 4))
    assert output_jacobian(lambda x: x @ w, torch.zeros(0, 4)).shape[0] == 0


# ---------------------------------------------------------------------------- output forms
def _const_net(values):
    """A module that returns fixed outputs (n, m) for any input of n rows."""
    values = torch.as_tensor(values, dtype=torch.float32)

    class Const(nn.Module):
        def forward(self, x):
            return values[: x.shape[0]] + 0.0 * x.sum()

    return Const()


def test_auto_form_resolution_and_errors():
    x = torch.zeros(3, 2)
    with pytest.raises(InputError, match="could be a probability or a logit"):
        resolve_output_form(_const_net([[0.2], [0.9], [0.5]]), x, TargetOutput("auto"))
    assert resolve_output_form(_const_net([[0.2], [1.5], [-3.0]]), x, TargetOutput("auto")).form == "logit"
    soft = [[0.2, 0.8], [0.5, 0.5], [1.0, 0.0]]
    assert resolve_output_form(_const_net(soft), x, TargetOutput("auto")).form == "softmax"
    assert resolve_output_form(_const_net([[0.2, 3.0], [1.0, -1.0], [0.0, 0.1]]), x, TargetOutput("auto")).form == "logits"
    # a declared form is kept when it fits
    assert resolve_output_form(_const_net([[0.2], [0.9], [0.5]]), x, TargetOutput("probability")).form == "probability"


def test_output_form_mismatches_and_class_range():
    x = torch.zeros(3, 2)
    one = _const_net([[0.2], [0.9], [0.5]])
    two = _const_net([[0.2, 0.8], [0.5, 0.5], [1.0, 0.0]])
    with pytest.raises(InputError, match="target_class 2 is out of range for 2 output columns"):
        resolve_output_form(two, x, TargetOutput("softmax", target_class=2))
    with pytest.raises(InputError, match="target_class -1 is out of range"):
        resolve_output_form(two, x, TargetOutput("auto", target_class=-1))
    with pytest.raises(InputError, match="target_class 2 is out of range for a binary output"):
        resolve_output_form(one, x, TargetOutput("logit", target_class=2))
    with pytest.raises(InputError, match="needs one output column but the target model returns 2"):
        resolve_output_form(two, x, TargetOutput("logit"))
    with pytest.raises(InputError, match="needs at least 2 output columns"):
        resolve_output_form(one, x, TargetOutput("softmax"))
    with pytest.raises(InputError, match="outside \\[0, 1\\]"):
        resolve_output_form(_const_net([[0.2], [1.5], [0.5]]), x, TargetOutput("probability"))
    with pytest.raises(InputError, match="shape"):
        resolve_output_form(_const_net(torch.zeros(3, 2, 2)), x, TargetOutput("logit"))


# ---------------------------------------------------------------------------- modes and batches
def test_eval_mode_restores_each_submodule_flag():
    net = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.BatchNorm1d(3))
    net.train()
    net[1].eval()                       # mixed flags: top and BN train, dropout eval
    before = [m.training for m in net.modules()]
    with eval_mode(net):
        assert not any(m.training for m in net.modules())
    assert [m.training for m in net.modules()] == before == [True, True, False, True]


def test_gradient_leaves_train_mode_model_untouched(X):
    net = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Dropout(0.5), nn.Linear(6, 1))
    net.train()
    params = copy.deepcopy(net.state_dict())
    for form, model in [("logit", net), ("probability", nn.Sequential(net, nn.Sigmoid()).train())]:
        _, g1 = target_probability_and_gradient(model, torch.from_numpy(X), TargetOutput(form))
        _, g2 = target_probability_and_gradient(model, torch.from_numpy(X), TargetOutput(form))
        assert torch.equal(g1, g2)                                   # dropout off, BN running stats
        assert all(m.training for m in model.modules())
    for key, value in net.state_dict().items():                      # BN running stats unchanged
        assert torch.equal(value, params[key]), key


def test_check_batch_independence():
    x = torch.randn(8, 3)
    check_batch_independence(lambda t: t * 2.0, x)                   # passes silently
    with pytest.raises(InputError, match="changes with the other rows of its batch"):
        check_batch_independence(lambda t: t - t.mean(dim=0), x)
    bn = nn.BatchNorm1d(3).train()
    with eval_mode(bn):                                              # running statistics: row-wise
        check_batch_independence(bn, x + 5.0)
    check_batch_independence(lambda t: t.sum(dim=1), x[:1])          # one row: nothing to compare


def test_iter_chunks_cover_the_rows():
    assert [(s.start, s.stop) for s in iter_chunks(10, 4)] == [(0, 4), (4, 8), (8, 10)]
    assert list(iter_chunks(0, 4)) == []
    with pytest.raises(InputError, match="chunk_size must be >= 1"):
        list(iter_chunks(10, 0))


def test_constant_outputs_have_zero_gradient_not_an_autograd_error(X):
    """A model whose output does not depend on x (no graph at all) is flat: g = 0, J = 0."""
    const = _const_net(torch.full((24, 1), 2.0))

    class Detached(nn.Module):
        def forward(self, x):
            return torch.full((x.shape[0], 2), 0.3)

    _, g = target_probability_and_gradient(Detached(), torch.from_numpy(X), TargetOutput("softmax"))
    assert g.shape == (24, 4) and (g == 0).all()
    _, g = target_probability_and_gradient(const, torch.from_numpy(X), TargetOutput("logit"))
    assert (g == 0).all()
    J = output_jacobian(Detached(), torch.from_numpy(X))
    assert J.shape == (24, 2, 4) and (J == 0).all()
