"""Property tests (hypothesis) of the LIC scoring functions in faux_checks.method.lic.

- permuting individuals permutes their scores (no row sees another);
- finite inputs give finite scores or explicitly undefined ones (NaN + ``undefined``), never inf;
- fAux+NG is invariant to positive scaling of g and of each row of J (it is a cosine);
- the fAux score is linear in g (and, for k = 1 without ridge, inversely proportional to J's scale).
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from faux_checks.method.lic import faux_ng_scores, faux_scores

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)
ENTRY = st.floats(-100, 100, allow_nan=False, allow_infinity=False, allow_subnormal=False, width=32)
POSITIVE = st.floats(1e-3, 1e3, allow_nan=False, allow_infinity=False)


@st.composite
def g_and_J(draw, k_max: int = 3, zero_rows: bool = True):
    """g (n, d) float32 and J (n, k, d) float32; some rows of J (or g) set exactly to zero."""
    n = draw(st.integers(1, 8))
    d = draw(st.integers(1, 6))
    k = draw(st.integers(1, k_max))
    g = draw(arrays(np.float32, (n, d), elements=ENTRY))
    J = draw(arrays(np.float32, (n, k, d), elements=ENTRY))
    if zero_rows:
        zero_J = draw(arrays(np.bool_, (n,)))
        J[zero_J] = 0.0
        zero_g = draw(arrays(np.bool_, (n,)))
        g[zero_g] = 0.0
    return torch.from_numpy(g), torch.from_numpy(J)


def _well_scaled(J: torch.Tensor) -> bool:
    """Every row of every J is exactly zero or clearly non-zero (scaling cannot cross the zero threshold)."""
    norms = J.double().norm(dim=2)
    return bool(((norms == 0) | (norms > 1e-3)).all())


def _same(a: torch.Tensor, b: torch.Tensor, rtol: float = 1e-9) -> None:
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=rtol, atol=0, equal_nan=True)


@SETTINGS
@given(g_and_J(), st.randoms(use_true_random=False), st.sampled_from([0.0, 1e-3]))
def test_permuting_individuals_permutes_scores(gJ, rnd, ridge):
    g, J = gJ
    perm = torch.tensor(rnd.sample(range(g.shape[0]), g.shape[0]))
    for scorer in (lambda g_, J_: faux_scores(g_, J_, ridge=ridge), faux_ng_scores):
        full, permuted = scorer(g, J), scorer(g[perm], J[perm])
        _same(permuted.scores, full.scores[perm], rtol=1e-12)
        assert torch.equal(permuted.undefined, full.undefined[perm])


@SETTINGS
@given(g_and_J(), st.sampled_from([0.0, 1e-6, 1.0]))
def test_scores_are_finite_or_explicitly_undefined_never_inf(gJ, ridge):
    g, J = gJ
    for res in (faux_scores(g, J, ridge=ridge), faux_ng_scores(g, J)):
        assert not torch.isinf(res.scores).any()
        assert torch.equal(torch.isnan(res.scores), res.undefined)
        assert torch.isfinite(res.scores[~res.undefined]).all()
        assert (res.scores[~res.undefined] >= 0).all()
        assert not torch.isinf(res.evidence).any() and not torch.isinf(res.components).any()
    zero_aux = (J == 0).flatten(1).all(dim=1)
    assert faux_scores(g, J, ridge=ridge).undefined[zero_aux].all()   # no aux gradient: undefined, never 0


@SETTINGS
@given(g_and_J(), st.data())
def test_ng_is_invariant_to_positive_scaling_of_g_and_of_J_rows(gJ, data):
    g, J = gJ
    assume(_well_scaled(J))
    n, k, _ = J.shape
    row_scale = torch.tensor(data.draw(arrays(np.float64, (n,), elements=POSITIVE)))
    J_scale = torch.tensor(data.draw(arrays(np.float64, (n, k), elements=POSITIVE)))
    base = faux_ng_scores(g.double(), J.double())
    scaled = faux_ng_scores(g.double() * row_scale[:, None], J.double() * J_scale[:, :, None])
    _same(scaled.scores, base.scores, rtol=1e-9)
    assert torch.equal(scaled.undefined, base.undefined)
    assert (base.scores[~base.undefined] <= 1 + 1e-12).all()                   # a |cosine|


@SETTINGS
@given(g_and_J(), st.data(), st.sampled_from([0.0, 1e-2]))
def test_faux_score_scales_linearly_with_g(gJ, data, ridge):
    g, J = gJ
    n = g.shape[0]
    c = torch.tensor(data.draw(arrays(np.float64, (n,), elements=POSITIVE)))
    base = faux_scores(g.double(), J, ridge=ridge)
    scaled = faux_scores(g.double() * c[:, None], J, ridge=ridge)
    _same(scaled.scores, base.scores * c, rtol=1e-9)
    assert torch.equal(scaled.undefined, base.undefined)


@SETTINGS
@given(g_and_J(k_max=1), POSITIVE)
def test_k1_faux_score_is_inverse_in_the_aux_gradient_scale(gJ, c):
    g, J = gJ
    assume(_well_scaled(J))
    base = faux_scores(g, J.double())
    scaled = faux_scores(g, J.double() * c)
    _same(scaled.scores, base.scores / c, rtol=1e-9)
