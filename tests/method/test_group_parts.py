"""group_parts: each group's ridge fit and residual quantiles, shared by its pairs, equal group_shift's bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from faux_checks.method.matching import feature_matching
from faux_checks.method.shifts import group_shift


@pytest.mark.parametrize(("m", "held"), [(2, 0), (2, 3), (3, 2)])
def test_feature_matching_shifts_equal_each_pairs_own_fit(m, held):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(2000, 8))
    c = rng.integers(0, m, 2000)
    XA = X[:, 8 - held:]
    moving = np.arange(8) < 8 - held
    matching = feature_matching(X, XA, c, "binary" if m == 2 else "multiclass", moving, m)
    assert sorted(matching.shifts) == [(a, b) for a in range(m) for b in range(m) if a != b]
    for (a, b), shifts in matching.shifts.items():
        for j, got in zip(np.flatnonzero(moving), shifts, strict=True):
            own = group_shift(X[:, j], XA, c, a, b)
            for name in ("coef_from", "coef_to", "quantiles_from", "quantiles_to"):
                assert np.array_equal(getattr(got, name), getattr(own, name)), (a, b, j, name)
