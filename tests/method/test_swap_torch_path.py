"""The swap reading's torch path: on a non-CPU device a chunk's matched quantiles, move and
running maxima stay on the device, with no transfer to the host inside the chunk.

The CPU keeps the numpy path (the pinned scores of tests/method/test_swap_pinned.py, bit for bit); the private switch
``faux_checks.method.torch_path._FORCE_TORCH`` runs the torch path on CPU tensors, so that it is tested here without a GPU:

(a) each torch helper equals its numpy counterpart (float64; ``HELPER_ATOL``), ties, values outside the range and
    one-level quantiles included;
(b) the whole reading (``FAuxTester.evaluate``) on the forced torch path equals the numpy path within
    ``READING_ATOL`` on binary, 3-class and continuous c, with matched features, the aux model's move, admissible
    features, c's own column as a target input, one-hot groups with level models, and several chunks;
(c) the same on CUDA (skipped without one) within test_device.py's ``CUDA_ATOL``;
(d) no tensor comes to the host inside a chunk on the torch path (only at its end, ``_finish_chunk_t``), counted;
    with level configurations of one-hot groups, one scalar per group and target (their number, a shape).
"""

import contextlib

import numpy as np
import pytest
import torch
from torch import nn

from _swap_pin_problem import CASES, _problem

import faux_checks.method.chunk as chunk_mod
import faux_checks.method.counterfactual as cf
import faux_checks.method.goals as goals_mod
import faux_checks.method.levels as levels_mod
import faux_checks.method.matching as matching_mod
import faux_checks.method.output as output_mod
import faux_checks.method.swap as swap_mod
import faux_checks.method.torch_path as torch_path_mod
from faux_checks.method.auxiliary import AuxiliaryModel, AuxNet
from faux_checks.method.counterfactual import SwapSettings
from faux_checks.method.faux import FAuxTester
from faux_checks.method.output import TargetOutput
from faux_checks.method.quantiles import interp_t, interp_uniform, interp_uniform_t, quantile_ranks
from faux_checks.method.shifts import ContinuousShift, GroupShift

#: Torch helper against numpy helper, float64 (measured: 0, the same operations in the same order).
HELPER_ATOL = 1e-12
#: The whole reading, forced torch path against the numpy path on the CPU, in probability points (float64 quantities;
#: measured: 0, and 2.2e-16 where level models of one-hot groups are read: einsum's order). float32 is not tested:
#: x′ is float32 on both paths and the quantile matching float64 on both.
READING_ATOL = 1e-10
#: CUDA against the CPU's numpy path (as tests/method/test_device.py: float32 kernels sum in another order).
CUDA_ATOL = 1e-4
HAS_CUDA = torch.cuda.is_available()


@contextlib.contextmanager
def forced_torch_path():
    old = torch_path_mod._FORCE_TORCH
    torch_path_mod._FORCE_TORCH = True
    try:
        yield
    finally:
        torch_path_mod._FORCE_TORCH = old


def _t(a):
    return torch.as_tensor(np.asarray(a, dtype=np.float64))


# ---------------------------------------------------------------------------- (a) the helpers
def _probe(rng, lo, hi, n=400):
    """Values inside, at and outside [lo, hi], with NaN and ±inf."""
    inside = rng.uniform(lo, hi, n)
    outside = np.concatenate([rng.uniform(lo - 3, lo, 20), rng.uniform(hi, hi + 3, 20)])
    return np.concatenate([inside, outside, [lo, hi, np.nan, -np.inf, np.inf]])


@pytest.mark.parametrize("seed", range(5))
def test_interp_equals_np_interp_inside_at_the_knots_and_beyond_the_ends(seed):
    rng = np.random.default_rng(seed)
    xp = np.unique(np.round(rng.normal(size=60), 1))                         # strictly increasing (np.unique)
    fp = np.sort(rng.normal(size=len(xp)))
    fp[5:9] = fp[5]                                                          # a flat stretch
    x = np.concatenate([_probe(rng, xp[0], xp[-1]), xp])                     # every knot exactly
    got = interp_t(_t(x), _t(xp), _t(fp)).numpy()
    want = np.interp(x, xp, fp)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=0, atol=HELPER_ATOL)
    assert got[-len(xp):].tolist() == fp.tolist()                            # at a knot: its value exactly
    assert (got[x < xp[0]] == fp[0]).all() and (got[x > xp[-1]] == fp[-1]).all()   # clamped at the ends


def test_interp_with_one_point_is_that_value_everywhere_as_numpy():
    x = np.array([np.nan, -5.0, 1.0, 7.0])
    got = interp_t(_t(x), _t([1.0]), _t([3.5])).numpy()
    assert got.tolist() == np.interp(x, [1.0], [3.5]).tolist() == [3.5] * 4


@pytest.mark.parametrize("seed", range(3))
def test_interp_uniform_equals_the_numpy_index_arithmetic_and_np_interp(seed):
    rng = np.random.default_rng(seed)
    q = np.sort(rng.normal(size=101))
    q[40:50] = q[40]                                                         # tied quantiles
    r = np.concatenate([rng.uniform(size=500), [0.0, 1.0, 0.5, 0.01]])
    got = interp_uniform_t(_t(r), _t(q)).numpy()
    np.testing.assert_allclose(got, interp_uniform(r, q), rtol=0, atol=HELPER_ATOL)
    np.testing.assert_allclose(got, np.interp(r, np.linspace(0, 1, len(q)), q), rtol=0, atol=1e-12)


def _shift(rng, Q=201, d_a=2, tie_from=False, one_level=False):
    qf = np.sort(rng.normal(size=Q))
    if tie_from:
        qf[30:80] = qf[30]
        qf[150:] = qf[150]
    if one_level:
        qf[:] = 0.25
    return GroupShift(coef_from=rng.normal(size=1 + d_a), coef_to=rng.normal(size=1 + d_a), quantiles_from=qf,
                      quantiles_to=np.sort(rng.normal(size=Q) + 1.0))


@pytest.mark.parametrize("shape", ["plain", "ties", "one_level"])
def test_group_shift_goal_on_tensors_equals_the_numpy_goal(shape):
    rng = np.random.default_rng(7)
    shift = _shift(rng, tie_from=shape == "ties", one_level=shape == "one_level")
    if shape == "one_level":
        levels, ranks = quantile_ranks(shift.quantiles_from)
        assert len(levels) == 1 and ranks.tolist() == [0.5]                 # the torch one-point branch is read
    n = 500
    v = np.concatenate([rng.normal(size=n - 3) * 3, shift.quantiles_from[[0, 40, -1]] + shift.coef_from[0]])
    xa = rng.normal(size=(n, 2))
    want = shift.goal(v, xa)
    got = shift.goal(_t(v), _t(xa))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=HELPER_ATOL)
    fitted_from, fitted_to = rng.normal(size=n), rng.normal(size=n)
    np.testing.assert_allclose(shift.goal_from_fits(_t(v), _t(fitted_from), _t(fitted_to)).numpy(),
                               shift.goal_from_fits(v, fitted_from, fitted_to), rtol=0, atol=HELPER_ATOL)


def test_a_group_shift_with_its_device_copies_pickles_without_them():
    import pickle

    shift = _shift(np.random.default_rng(1))
    shift.goal_from_fits(_t([0.1]), _t([0.0]), _t([0.0]))
    assert shift.__dict__["_device_cache"]                                   # the device copy was kept
    back = pickle.loads(pickle.dumps(shift))
    assert "_device_cache" not in back.__dict__
    for name in ("coef_from", "coef_to", "quantiles_from", "quantiles_to"):
        np.testing.assert_array_equal(getattr(back, name), getattr(shift, name))


def _continuous_shift(rng, B=5, Q=101, d_a=2, ties=False):
    quantiles = np.sort(rng.normal(size=(B, Q)), axis=1)
    if ties:
        quantiles[1, 20:60] = quantiles[1, 20]
        quantiles[3, :] = 0.0                                                # one level in a whole bin
    return ContinuousShift(centers=np.sort(rng.normal(size=B)) * 2, coefs=rng.normal(size=(B, 1 + d_a)),
                           quantiles=quantiles, sd=1.3, slope=0.7)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_continuous_shift_goal_on_tensors_equals_the_numpy_goal(ties, sign):
    rng = np.random.default_rng(11)
    shift = _continuous_shift(rng, ties=ties)
    n = 600
    c = np.concatenate([rng.normal(size=n - 4) * 3, shift.centers[[0, 2, -1]], [shift.centers[-1] + 10]])
    v, xa = rng.normal(size=n) * 2, rng.normal(size=(n, 2))
    want = shift.goal(v, c, xa, sign)
    got = shift.goal(_t(v), _t(c), _t(xa), sign)
    assert np.isfinite(want).all()
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=HELPER_ATOL)


def _tester(case, metric=None, n=300, n_ref=200, onehot=False, categorical="coupled"):
    """_swap_pin_problem's problems, or variants: another metric, more reference rows (a continuous c gets its
    bins: MIN_BIN_ROWS each), or a 3-level one-hot feature whose distribution depends on c (level models)."""
    if metric is None and n == 300 and not onehot:
        return _problem(case)
    torch.manual_seed(12)
    rng = np.random.default_rng(12)
    D = 7
    X = rng.normal(size=(n, D)).astype(np.float32)
    z = X[:, 0] + 0.5 * X[:, 1] + rng.normal(size=n)
    kind = {"binary": "binary", "three": "multiclass", "continuous": "continuous"}[case]
    c = {"binary": (z > 0).astype(np.int64), "multiclass": np.digitize(z, np.quantile(z, [1 / 3, 2 / 3])),
         "continuous": z.astype(np.float64)}[kind]
    groups = ()
    if onehot:
        level = np.digitize(z + rng.normal(size=n), [-0.5, 0.5])            # depends on c
        X = np.column_stack([X, np.eye(3, dtype=np.float32)[level]])
        groups = (np.arange(D, D + 3),)
    d = X.shape[1]
    m = 3 if kind == "multiclass" else 1
    target = nn.Sequential(nn.Linear(d, 16), nn.Tanh(), nn.Linear(16, 1)).eval()
    aux = AuxiliaryModel.from_module(AuxNet(d, m, (16, 16), torch.zeros(d), torch.ones(d)), kind=kind, n_features=d)
    tester = FAuxTester(target, aux, variant="swap", output=TargetOutput(form="logit", target_class=1),
                        swap=SwapSettings(categorical=categorical, categorical_groups=groups), chunk_size=64)
    admissible = np.zeros(d, dtype=bool)
    admissible[2] = True
    feature_groups = [np.array([j]) for j in range(D)] + list(groups) if onehot else None   # the one-hot block as one
    tester.fit_reference(X[:n_ref], c[:n_ref], admissible=admissible, metric=metric or "matched",
                         feature_groups=feature_groups)
    assert bool(tester.reference.levels) == onehot
    return tester, X[-300:], c[-300:]


@pytest.mark.parametrize("case", ["binary", "three", "continuous"])
def test_feature_matching_values_on_the_torch_path_equal_the_numpy_values(case):
    tester, X, c = _tester(case, n=1500, n_ref=1200)
    ref = tester.reference
    matching = ref.matching
    assert matching is not None and len(matching.positions) == 2             # x0, x1 matched (x2 held, x3.. independent)
    if case == "continuous":
        assert all(s is not None for s in matching.continuous)               # the bins are read, not the slopes
        args = [(None, None, c.astype(np.float64), s) for s in (1.0, -1.0)]
    else:
        a = c.astype(np.int64)
        args = [(a, (a + t) % ref.n_groups, None, 1.0) for t in range(1, ref.n_groups)]
    x = torch.as_tensor(X)
    for a, b, cv, sign in args:
        want = matching.values(x, ref.admissible, a, b, cv, sign)
        with forced_torch_path():
            got = matching.values(x, ref.admissible, a, b, cv, sign)
        assert isinstance(want, np.ndarray) and isinstance(got, torch.Tensor)
        assert np.isfinite(want).all()
        np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=HELPER_ATOL)


@pytest.mark.parametrize("case", ["binary", "three", "continuous"])
def test_aux_goals_on_the_torch_path_equal_the_numpy_goals(case):
    tester, X, c = _tester(case, metric="between", n=1500, n_ref=1200)
    ref = tester.reference
    assert ref.admissible.any()
    if case == "continuous":
        assert ref.continuous is not None                                    # rank matching in bins
    rng = np.random.default_rng(3)
    v = rng.normal(size=len(X)) * 2
    x = torch.as_tensor(X)
    a = None if case == "continuous" else c.astype(np.int64)
    for t in ([1.0, -1.0] if case == "continuous" else range(1, ref.n_groups)):
        b = None if a is None else (a + int(t)) % ref.n_groups
        cv = c if case == "continuous" else None
        want = goals_mod.matched_goals(ref, v, x, a, b, t, cv)
        got = goals_mod.matched_goals(ref, _t(v), x, a, b, t, cv)
        assert isinstance(got, torch.Tensor)
        np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=HELPER_ATOL)


def _level_probabilities(rng, b, K, zero_level=True):
    p = rng.dirichlet(np.ones(K), size=b)
    if zero_level:
        p[: b // 3, 1] = 0.0                                                 # a level absent in the from-group
        p /= p.sum(axis=1, keepdims=True)
    return p


@pytest.mark.parametrize("K", [2, 4])
def test_comonotone_transition_on_tensors_equals_numpy_zero_probability_levels_and_ties_included(K):
    rng = np.random.default_rng(K)
    b = 300
    p_from, p_to = _level_probabilities(rng, b, K), _level_probabilities(rng, b, K, zero_level=False)
    p_to[150:200] = p_from[150:200]                                          # every ratio tied: the stable order
    current = rng.integers(0, K, b)
    current[: b // 3] = 1                                                    # rows at the zero-probability level
    want = levels_mod.comonotone_transition(p_from, p_to, current)
    got = levels_mod.comonotone_transition_t(_t(p_from), _t(p_to), torch.as_tensor(current))
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=HELPER_ATOL)
    np.testing.assert_allclose(got.numpy().sum(axis=1), 1.0, rtol=0, atol=1e-12)


@pytest.mark.parametrize("K", [2, 5])
def test_gumbel_transition_on_tensors_equals_numpy(K):
    rng = np.random.default_rng(10 + K)
    b = 300
    eta, eta2 = rng.normal(size=(b, K)) * 2, rng.normal(size=(b, K)) * 2
    eta2[:20] = eta[:20]                                                     # no change: everyone stays
    current = rng.integers(0, K, b)
    want = levels_mod.gumbel_transition(eta, eta2, current)
    got = levels_mod.gumbel_transition_t(_t(eta), _t(eta2), torch.as_tensor(current))
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=HELPER_ATOL)
    assert (got.numpy()[np.arange(20), current[:20]] == 1.0).all()


@pytest.mark.parametrize("case", ["binary", "three", "continuous"])
def test_level_model_and_configurations_on_tensors_equal_numpy(case):
    tester, X, c = _tester(case, onehot=True, n=1500, n_ref=1200)
    ref = tester.reference
    (lm,) = ref.levels
    xa = X[:, ref.admissible].astype(np.float64)
    cv = c.astype(np.float64) if case == "continuous" else c.astype(np.int64)
    ct = torch.as_tensor(cv)
    np.testing.assert_allclose(lm.logits_t(_t(xa), ct).numpy(), lm.logits(xa, cv), rtol=0, atol=HELPER_ATOL)
    p = lm.probabilities(xa, cv)
    np.testing.assert_allclose(lm.probabilities_t(_t(xa), ct).numpy(), p, rtol=0, atol=HELPER_ATOL)
    x1 = torch.as_tensor(X)
    groups = [np.asarray(lm.positions)]
    cfg, w = levels_mod.configurations(x1, groups, [p])
    cfg_t, w_t = levels_mod.configurations(x1, groups, [_t(p)])
    assert isinstance(w, np.ndarray) and isinstance(w_t, torch.Tensor) and cfg.shape[1] > 1
    np.testing.assert_array_equal(cfg_t.numpy(), cfg.numpy())
    np.testing.assert_allclose(w_t.numpy(), w, rtol=0, atol=HELPER_ATOL)


# ---------------------------------------------------------------------------- (b) the whole reading
EXTRA = {
    "three-between": dict(case="three", metric="between"),
    "continuous-bins-matched": dict(case="continuous", n=1500, n_ref=1200),
    "continuous-bins-between": dict(case="continuous", metric="between", n=1500, n_ref=1200),
    "binary-onehot-coupled": dict(case="binary", onehot=True, n=800, n_ref=600),
    "three-onehot-snap": dict(case="three", onehot=True, n=800, n_ref=600, categorical="snap"),
    "three-onehot-coupled": dict(case="three", onehot=True, n=800, n_ref=600),
    "continuous-onehot-coupled": dict(case="continuous", onehot=True, n=1500, n_ref=1200),
}
KEYS = ("scores", "probability", "counterfactual_probability", "direct", "evidence", "outcomes", "outcome_weights")


def _build(name):
    return _problem(name) if name in CASES else _tester(**EXTRA[name])


@pytest.mark.parametrize("name", [*CASES, *EXTRA])
def test_the_forced_torch_path_reads_the_same_scores_as_the_numpy_path(name):
    tester, X, c = _build(name)
    want = tester.evaluate(X, c, evidence=True)
    with forced_torch_path():
        got = tester.evaluate(X, c, evidence=True)
    assert np.isfinite(want.scores).sum() > 200 and np.nanmax(want.scores) > 1e-3   # a reading, not all zeros
    np.testing.assert_array_equal(got.undefined, want.undefined)
    np.testing.assert_array_equal(got.counterfactual_target, want.counterfactual_target)
    for key in KEYS:
        w, g = getattr(want, key), getattr(got, key)
        assert (w is None) == (g is None), key
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=0, atol=READING_ATOL, err_msg=key)
    if name.endswith("coupled"):
        assert want.outcomes.shape[1] > 1                                    # level configurations were read


# ---------------------------------------------------------------------------- (c) CUDA
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", [*CASES, *EXTRA])
def test_cuda_reads_the_cpu_scores_within_tolerance(name):
    tester, X, c = _build(name)
    cpu = tester.evaluate(X, c, evidence=True)
    tester.device = torch.device("cuda")
    gpu = tester.evaluate(X, c, evidence=True)
    assert tester.device_used_ == "cuda"
    np.testing.assert_array_equal(gpu.undefined, cpu.undefined)
    np.testing.assert_allclose(gpu.scores, cpu.scores, rtol=0, atol=CUDA_ATOL)
    np.testing.assert_allclose(gpu.probability, cpu.probability, rtol=0, atol=CUDA_ATOL)
    np.testing.assert_allclose(gpu.counterfactual_probability, cpu.counterfactual_probability, rtol=0, atol=CUDA_ATOL)


# ---------------------------------------------------------------------------- (d) no transfer inside a chunk
class _Transfers:
    """Counts what brings a tensor to the host while a chunk runs (host(), .numpy(), .cpu(), .item(), .tolist(),
    np.asarray(tensor), and the scalar reads bool(t), int(t), float(t), an index), until the chunk's end
    (_finish_chunk_t) starts."""

    def __init__(self, monkeypatch):
        self.inside, self.chunks, self.counting = [], 0, False
        real_host = chunk_mod.host
        for module in (chunk_mod, cf, goals_mod, matching_mod, swap_mod, output_mod, levels_mod):
            if hasattr(module, "host"):
                monkeypatch.setattr(module, "host", self._wrap("host()", real_host))
        for name in ("numpy", "cpu", "item", "tolist", "__array__", "__bool__", "__int__", "__float__", "__index__"):
            monkeypatch.setattr(torch.Tensor, name, self._wrap(f".{name}()", getattr(torch.Tensor, name)))
        real_chunk, real_finish = chunk_mod.swap_chunk, chunk_mod._finish_chunk_t

        def chunk(*args, **kw):
            self.counting, self.chunks = True, self.chunks + 1
            try:
                return real_chunk(*args, **kw)
            finally:
                self.counting = False

        def finish(*args, **kw):
            self.counting = False                                            # the chunk's end: its results come back
            return real_finish(*args, **kw)

        monkeypatch.setattr(chunk_mod, "swap_chunk", chunk)
        monkeypatch.setattr(chunk_mod, "_finish_chunk_t", finish)
        import faux_checks.method.faux as faux_mod
        monkeypatch.setattr(faux_mod, "swap_chunk", chunk)

    def _wrap(self, label, fn):
        def counted(*args, **kw):
            if self.counting:
                self.inside.append(label)
            return fn(*args, **kw)
        return counted


@pytest.mark.parametrize("name", ["binary", "three", "continuous", "binary-path", "binary-direct", "binary-first",
                                  "continuous-bins-matched", "continuous-bins-between", "three-between",
                                  "three-onehot-snap"])
@pytest.mark.parametrize("device", ["cpu-forced", "cuda"])
def test_nothing_comes_to_the_host_inside_a_chunk_on_the_torch_path(name, device, monkeypatch):
    if device == "cuda" and not HAS_CUDA:
        pytest.skip("needs a CUDA GPU")
    tester, X, c = _build(name)
    if device == "cuda":
        tester.device = torch.device("cuda")
    counter = _Transfers(monkeypatch)
    with (forced_torch_path() if device == "cpu-forced" else contextlib.nullcontext()):
        r = tester.evaluate(X, c, evidence=True)
    assert counter.chunks == 5                                               # 300 rows in chunks of 64
    assert counter.inside == []
    assert np.isfinite(r.scores).sum() > 200


def test_the_counter_sees_the_numpy_paths_transfers(monkeypatch):
    # the same count on the CPU's numpy path is not 0: the counter reads what it should
    tester, X, c = _build("binary")
    counter = _Transfers(monkeypatch)
    tester.evaluate(X, c, evidence=False)
    assert counter.chunks == 5 and counter.inside.count("host()") >= 5 * 3   # p0, p1 and the matched quantiles


@pytest.mark.parametrize("name, targets", [("binary-onehot-coupled", 1), ("three-onehot-coupled", 2)])
def test_with_level_configurations_only_their_number_crosses(name, targets, monkeypatch):
    # what is left of the round trip: configurations() reads how many level configurations to keep (a shape),
    # one scalar per one-hot group and counterfactual target
    tester, X, c = _build(name)
    assert len(tester.reference.levels) == 1
    counter = _Transfers(monkeypatch)
    with forced_torch_path():
        tester.evaluate(X, c, evidence=False)
    assert counter.chunks == 5
    assert counter.inside == [".__int__()"] * (5 * targets)
