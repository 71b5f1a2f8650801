"""Hold only what is jointly free of c: closed-form generators where c is carried only by a pair of columns."""

from __future__ import annotations

import numpy as np
import pytest

from faux_checks.errors import InputError
from faux_checks.method.held import independent_features
from faux_checks.method.joint_hold import JOINT_Z, block_capacity, jointly_free_hold

GROUPS = [[0], [1], [2]]


def _sign(n=3000, seed=0):
    """x1, x2 ~ N(0, 1) iid and c = 1[x1·x2 > 0]: each marginal is N(0, 1) in both groups; a third column is noise."""
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    return np.column_stack([x1, x2, rng.normal(size=n)]), (x1 * x2 > 0).astype(np.int64)


def _xor(n=3000, seed=0):
    """b1, c ~ Bernoulli(½) iid, b2 = b1 XOR c: both binaries Bernoulli(½) in each group."""
    rng = np.random.default_rng(seed)
    b1, c = rng.integers(0, 2, n), rng.integers(0, 2, n)
    return np.column_stack([b1, b1 ^ c, rng.normal(size=n)]).astype(np.float64), c


@pytest.mark.parametrize("make", [_sign, _xor])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_pair_that_carries_c_only_jointly_is_never_held_whole(make, seed):
    X, c = make(seed=seed)
    marginal, table = independent_features(X, c, kind="binary", groups=GROUPS)
    assert marginal[:2].all(), table                                       # the per-column test holds both
    held, summary = jointly_free_hold(X, c, kind="binary", groups=GROUPS, held=marginal)
    assert not held[:2].all()                                              # one member moves
    assert held[2] and held.sum() == 2                                     # exactly one released; the noise stays held
    first = summary["steps"][0]
    assert first["carries"] and first["quality"] > 0.95 and first["z"] > JOINT_Z
    assert summary["tested"] and summary["free"] and len(summary["released"]) == 1
    assert summary["quality"] < 0.6                                        # the final block reads c at chance


def test_measuring_without_release_reports_the_block_as_carrying_c():
    X, c = _sign()
    held, summary = jointly_free_hold(X, c, kind="binary", groups=GROUPS, held=np.ones(3, bool), release=False)
    assert held.all() and summary["tested"] and not summary["free"] and summary["released"] == []


def test_a_legitimate_feature_independent_of_c_stays_held_beside_a_multiplicative_proxy():
    """t = l (1 + 0.8c) + ½ε: l alone says nothing about c, so the block {l} is free and l stays held."""
    rng = np.random.default_rng(3)
    n = 4000
    c = rng.integers(0, 2, n)
    l = np.maximum(0.1, 2.0 + rng.normal(size=n))  # noqa: E741 - l as in the docstring
    X = np.column_stack([l, l * (1 + 0.8 * c) + 0.5 * rng.normal(size=n), rng.normal(size=n)])
    marginal, _ = independent_features(X, c, kind="binary", groups=GROUPS)
    assert marginal.tolist() == [True, False, True]
    held, summary = jointly_free_hold(X, c, kind="binary", groups=GROUPS, held=marginal)
    assert held.tolist() == [True, False, True] and summary["free"] and summary["released"] == []
    assert abs(summary["quality"] - 0.5) < 0.05
    assert summary["joint_free"] == []                                     # t alone carries c: not a joint-only member


def test_the_partner_search_reads_the_independence_tables_p_values_on_the_same_rows(monkeypatch):
    """Given the per-column test's table on the same rows, the partner search tests no column again and reads each
    free column's p-value by its feature index: the proxy t (p far under JOINT_ALONE_P) is never fitted alone; read
    with a p-value of 1 it is. On a row sample (more rows than JOINT_MAX_ROWS) the search tests the sampled rows."""
    import faux_checks.method.joint_hold as joint_hold

    rng = np.random.default_rng(3)
    n = 4000
    c = rng.integers(0, 2, n)
    l = np.maximum(0.1, 2.0 + rng.normal(size=n))  # noqa: E741 - the legitimate feature
    X = np.column_stack([l, l * (1 + 0.8 * c) + 0.5 * rng.normal(size=n), rng.normal(size=n)])
    groups = [[2], [0], [1]]                                               # no position equals its feature index
    marginal, table = independent_features(X, c, kind="binary", groups=groups)
    assert table[2]["features"] == [1] and table[2]["p_value"] < joint_hold.JOINT_ALONE_P
    _, want = jointly_free_hold(X, c, kind="binary", groups=groups, held=marginal)
    tested, fitted_alone = [], []
    counted, capacity = joint_hold.independent_features, joint_hold.block_capacity

    def independence(X_block, *args, **kwargs):
        tested.append(X_block.shape)
        return counted(X_block, *args, **kwargs)

    def block(X_block, *args, **kwargs):
        if X_block.shape[1] == 1:                                          # which column is fitted alone
            fitted_alone.extend(j for j in range(X.shape[1]) if np.array_equal(X[:, j], X_block[:, 0]))
        return capacity(X_block, *args, **kwargs)

    monkeypatch.setattr(joint_hold, "independent_features", independence)
    monkeypatch.setattr(joint_hold, "block_capacity", block)
    _, got = jointly_free_hold(X, c, kind="binary", groups=groups, held=marginal, independence=table)
    assert tested == [] and got == want and 1 not in fitted_alone
    doctored = [{**t, "p_value": 1.0} if t["features"] == [1] else t for t in table]
    jointly_free_hold(X, c, kind="binary", groups=groups, held=marginal, independence=doctored)
    assert tested == [] and fitted_alone == [1]                           # read by index: t now looks independent
    monkeypatch.setattr(joint_hold, "JOINT_MAX_ROWS", n - 1000)
    jointly_free_hold(X, c, kind="binary", groups=groups, held=marginal, independence=doctored)
    assert tested == [(n - 1000, 1)]                                      # the one free column, on the sample


def test_the_block_is_not_conditioned_on_a_declared_mediator():
    """m = z + c + 0.3ε declared: z is informative about c given m (a collider) but c does not cause z; z stays held."""
    rng = np.random.default_rng(2)
    n = 3000
    c = rng.integers(0, 2, n)
    z = rng.normal(size=n)
    X = np.column_stack([z + c + 0.3 * rng.normal(size=n), z, rng.normal(size=n)])
    held, summary = jointly_free_hold(X, c, kind="binary", groups=GROUPS, held=np.array([False, True, True]),
                                      declared=np.array([True, False, False]))
    assert held.tolist() == [False, True, True] and summary["free"] and summary["features"] == [1, 2]
    given_m = block_capacity(X[:, :2], c, kind="binary", seed=0)           # z with m: c readable, from m and z
    assert given_m["carries"] and given_m["quality"] > 0.9


def test_continuous_and_multiclass_c_without_joint_carrier_release_nothing():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(3000, 3))
    released = {"multiclass": 0, "continuous": 0}       # each test releases a free block with probability <= 1%
    for seed in range(6):
        draw = np.random.default_rng(100 + seed)
        for kind, c in (("multiclass", draw.integers(0, 3, 3000)), ("continuous", draw.normal(size=3000))):
            held, summary = jointly_free_hold(X, c, kind=kind, groups=GROUPS, held=np.ones(3, bool))
            released[kind] += int(not held.all())
            assert summary["tested"], (kind, summary)
    assert released["multiclass"] <= 1 and released["continuous"] <= 1, released
    c = np.sign(X[:, 0] * X[:, 1]) + 0.3 * rng.normal(size=3000)           # continuous c carried by the product
    held, summary = jointly_free_hold(X, c, kind="continuous", groups=GROUPS, held=np.ones(3, bool))
    assert held.sum() == 2 and held[2] and summary["steps"][0]["quality"] > 0.5


def test_too_few_rows_leave_the_block_untested_and_not_free():
    X, c = _sign(n=40)
    c[:35] = 0
    held, summary = jointly_free_hold(X, c, kind="binary", groups=GROUPS, held=np.ones(3, bool))
    assert held.all() and not summary["tested"] and not summary["free"]
    assert "at least 10 rows per protected group" in summary["reason"]
    with pytest.raises(InputError, match="rows per protected group; the smallest has"):
        block_capacity(X, c, kind="binary")
