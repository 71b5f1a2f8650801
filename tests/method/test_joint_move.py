"""The joint move: a released member of a pair that carries c jointly, matched by rank within its partner's neighbourhood.

Closed forms of the rank-preserving coupling on the pair generators (x2 the held partner, x1 released, a share φ of
rows reads the other group):

- sign (x1 = z1, x2 = e·f·sign(z1)·|z2|): given x2 and c, x1 is positive with probability 1 − φ on one side and φ on
  the other; the rank-preserving map to the other group sends the ranks in (φ, 1 − φ) across zero, so a share 1 − 2φ
  of the rows changes the sign of x1·x2 (the generator's own counterfactual changes every row's).
- xor (binaries, x1 = x2 XOR c XOR 1[f = −1]): given x2 and c, x1 is the majority value with probability 1 − φ; the
  mid-rank map sends every majority row to the other group's majority value and keeps the minority rows: a share
  1 − φ changes.
"""

from __future__ import annotations

import numpy as np
import pytest

from faux_checks.errors import InputError
from faux_checks.method.held import independent_features
from faux_checks.method.joint_hold import jointly_free_hold
from faux_checks.method.joint_move import JointConditional, fit_joint_conditional, joint_released

PHI = 0.1


def _pair(construction: str, n: int, seed: int):
    """(X (n, 3): x1, x2, noise; c) of a pair generator with a share PHI of flipped rows."""
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 2, n)
    f = np.where(rng.random(n) < PHI, -1.0, 1.0)
    if construction == "sign":
        z1, z2 = rng.normal(size=n), rng.normal(size=n)
        x1, x2 = z1, (2 * c - 1) * f * np.sign(z1) * np.abs(z2)
    else:
        x2 = rng.integers(0, 2, n)
        x1 = x2 ^ c ^ (f < 0)
    return np.column_stack([x1, x2, rng.normal(size=n)]).astype(np.float64), c


@pytest.mark.parametrize(("construction", "share"), [("sign", 1 - 2 * PHI), ("xor", 1 - PHI)])
def test_the_released_member_moves_as_the_rank_preserving_coupling_says(construction, share):
    X, c = _pair(construction, 20_000, 0)
    joint = fit_joint_conditional(X, c, columns=[0], context=[1])
    Xa, ca = _pair(construction, 4_000, 1)
    moved = joint.values(Xa, ca, 1 - ca)[:, 0]
    if construction == "sign":
        changed = np.sign(moved * Xa[:, 1]) != np.sign(Xa[:, 0] * Xa[:, 1])
    else:
        changed = moved != Xa[:, 0]
    assert abs(changed.mean() - share) < 0.02, changed.mean()
    if construction == "xor":                                             # ties: every row takes the majority value
        return
    for g in (0, 1):                                                       # the other group's law given the partner
        for side in (True, False):
            rows, ref = (ca == g) & ((Xa[:, 1] > 0) == side), (c == 1 - g) & ((X[:, 1] > 0) == side)
            assert abs(np.mean(moved[rows] > 0) - np.mean(X[ref, 0] > 0)) < 0.03


def test_a_round_trip_through_the_dict_gives_the_same_values():
    X, c = _pair("sign", 2_000, 2)
    joint = fit_joint_conditional(X, c, columns=[0], context=[1, 2], neighbours=30)
    again = JointConditional.from_dict(joint.to_dict())
    np.testing.assert_array_equal(again.values(X[:100], c[:100], 1 - c[:100]), joint.values(X[:100], c[:100], 1 - c[:100]))


def test_the_joint_move_refuses_overlapping_or_empty_features():
    X, c = _pair("sign", 100, 0)
    with pytest.raises(InputError, match="disjoint"):
        fit_joint_conditional(X, c, columns=[0], context=[0, 1])
    with pytest.raises(InputError, match="disjoint"):
        fit_joint_conditional(X, c, columns=[0], context=[])
    with pytest.raises(InputError, match="at least 2 reference rows"):
        fit_joint_conditional(X, np.r_[np.zeros(99, dtype=int), 1], columns=[0], context=[1])
    with pytest.raises(InputError, match=r"counts \[100, 0\].*audit more rows"):     # the absent last group counts
        fit_joint_conditional(X, np.zeros(100, dtype=int), columns=[0], context=[1], n_groups=2)


def test_the_trees_are_built_once_and_shared():
    X, c = _pair("sign", 500, 1)
    joint = fit_joint_conditional(X, c, columns=[0], context=[1, 2], neighbours=20)
    first = joint.values(X[:50], c[:50], 1 - c[:50])
    trees = joint.__dict__["_tree_cache"]
    assert set(trees) == {0, 1}
    np.testing.assert_array_equal(joint.values(X[:50], c[:50], 1 - c[:50]), first)
    assert joint.__dict__["_tree_cache"] is trees


@pytest.mark.parametrize("construction", ["sign", "xor"])
def test_the_joint_test_names_the_partner_and_not_the_noise(construction):
    X, c = _pair(construction, 3_000, 0)
    groups = [[0], [1], [2]]
    marginal, _ = independent_features(X, c, kind="binary", groups=groups)
    held, summary = jointly_free_hold(X, c, kind="binary", groups=groups, held=marginal)
    step = summary["steps"][0]
    assert len(step["released"]) == 1 and step["partners"] == [1 - step["released"][0]]
    columns, context = joint_released(summary, held, ~held, "binary")
    assert columns == step["released"] and context == step["partners"]
    assert joint_released(summary, held, ~held, "continuous") is None      # no grouped c: the linear move stays
    assert joint_released(summary, held, None, "binary") is None           # another reading than matched


@pytest.mark.parametrize("construction", ["sign", "xor"])
def test_a_free_member_of_the_pair_gets_its_held_partner(construction):
    """x2 free (the per-column test did not hold it), x1 held: x2 alone says nothing about c, with x1 it does."""
    X, c = _pair(construction, 3_000, 0)
    held = np.array([True, False, True])
    out, summary = jointly_free_hold(X, c, kind="binary", groups=[[0], [1], [2]], held=held)
    assert out.tolist() == held.tolist() and summary["released"] == [] and summary["free"]
    assert summary["joint_free"] == [{"features": [1], "partners": [0]}]
    assert joint_released(summary, out, ~out, "binary") == ([1], [0])
