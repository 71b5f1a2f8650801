"""ForestRows: predictions with columns replaced equal scikit-learn's, bit for bit, while recomputing fewer trees."""

from __future__ import annotations

import numpy as np
import pytest

from faux_checks.method.joint_hold import _model, _predict
from faux_checks.method.tree_costs import forest_rows


@pytest.mark.parametrize("kind", ["binary", "multiclass", "continuous"])
def test_replaced_columns_predict_as_the_whole_model(kind):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(1500, 8))
    c = {"binary": (X[:, 0] * X[:, 1] > 0).astype(np.int64), "multiclass": np.digitize(X[:, 2], [-0.5, 0.5]),
         "continuous": X[:, 3] + 0.5 * rng.normal(size=1500)}[kind]
    m = 0 if kind == "continuous" else int(c.max()) + 1
    model = _model(kind, 0).fit(X[:1000], c[:1000])
    rows = X[1000:].copy()
    forest = forest_rows(model, rows)
    assert forest is not None
    assert np.array_equal(forest.predict(rows, [], kind, m), _predict(model, rows, kind, m))
    recomputed = 0
    for j in range(8):
        rows[:, j] = rows[rng.permutation(len(rows)), j]
        assert np.array_equal(forest.predict(rows, [j], kind, m), _predict(model, rows, kind, m))
        recomputed += sum(j in r for it in forest.reads for r in it)
        rows[:, j] = X[1000:, j]
    assert recomputed < 8 * sum(len(it) for it in forest.reads)           # only the trees that split on the column
