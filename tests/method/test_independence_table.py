"""The chi-square test of independence from c: each group's table counted at once (np.bincount) is the table of its
levels against c's groups, and the test is scipy's on it."""

import numpy as np

from faux_checks.method.independence import INDEPENDENCE_BINS


def _quantile_bins(values: np.ndarray) -> np.ndarray:
    """A numeric column's bins: its distinct values when at most INDEPENDENCE_BINS, else its inner deciles' cuts."""
    distinct = np.unique(values)
    if len(distinct) <= INDEPENDENCE_BINS:
        return np.searchsorted(distinct, values)
    cuts = np.unique(np.quantile(values, np.linspace(0, 1, INDEPENDENCE_BINS + 1)[1:-1]))
    return np.searchsorted(cuts, values, side="right")


def _one_group_at_a_time(X, c_bins, groups):
    """Each group's chi-square test from its own contingency table (np.unique labels, np.add.at counts)."""
    from scipy.stats import chi2_contingency

    _, ci = np.unique(c_bins, return_inverse=True)
    out = []
    for idx in groups:
        block = X[:, idx]
        level = block.argmax(axis=1) if len(idx) > 1 else _quantile_bins(block[:, 0])
        _, li = np.unique(level, return_inverse=True)
        counts = np.zeros((li.max() + 1, ci.max() + 1))
        np.add.at(counts, (li, ci), 1.0)
        counts = counts[counts.sum(axis=1) > 0][:, counts.sum(axis=0) > 0]
        chi2, p, dof, _ = chi2_contingency(counts, correction=False)
        out.append((chi2, dof, p))
    return out


def test_every_groups_test_equals_its_own_contingency_table():
    from faux_checks.method.independence import independent_features

    rng = np.random.default_rng(8)
    n = 1500
    c = rng.integers(0, 3, n)
    onehot = np.eye(4)[np.where(rng.random(n) < 0.5, c, rng.integers(0, 4, n))]   # a level that depends on c
    numeric = np.column_stack([rng.standard_normal(n) + 0.3 * c, rng.standard_normal(n),
                               rng.integers(0, 3, n).astype(float)])
    sparse = np.eye(4)[rng.integers(0, 3, n)]                  # its last level never taken: an empty row dropped
    sparse[rng.random(n) < 0.1] = 0.0                                # rows with no level hot read as level 0
    X = np.column_stack([numeric[:, :1], onehot, numeric[:, 1:], sparse])
    groups = [[0], [1, 2, 3, 4], [5], [6], [7, 8, 9, 10]]
    mask, table = independent_features(X, c, kind="multiclass", groups=groups)
    want = _one_group_at_a_time(X, c, [np.asarray(g) for g in groups])
    assert [(t["chi2"], t["dof"], t["p_value"]) for t in table] == [(float(a), int(b), float(p)) for a, b, p in want]
    assert table[4]["dof"] == (3 - 1) * (3 - 1)                      # 3 levels present of 4, 3 groups
    assert [t["dependent"] for t in table] == [True, True, False, False, False]
    assert mask.tolist() == [False, False, False, False, False, True, True, True, True, True, True]
