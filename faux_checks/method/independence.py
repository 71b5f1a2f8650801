"""The chi-square test of a feature group's independence from the protected attribute c: the first of the swap
reading's holds (:mod:`faux_checks.method.held`), and the screen of the joint test's partner search
(:mod:`faux_checks.method.joint_hold`)."""

from __future__ import annotations

import numpy as np

from .._validation import fmt_count
from ..errors import InputError
from ..kinds import Kind

__all__ = ["INDEPENDENCE_ALPHA", "INDEPENDENCE_BINS", "independent_features"]


#: A feature group counts as dependent on c when its chi-square test of independence from c has a p-value below this.
INDEPENDENCE_ALPHA = 0.01
#: Quantile bins of a numeric feature (and of a continuous c) in that test.
INDEPENDENCE_BINS = 10


def _bins(values: np.ndarray, n_bins: int) -> np.ndarray:
    """Quantile-bin index (n,) of a numeric vector; a column with few distinct values keeps them as its bins."""
    distinct = np.unique(values)
    if len(distinct) <= n_bins:
        return np.asarray(np.searchsorted(distinct, values))
    edges = np.unique(np.quantile(values, np.linspace(0, 1, n_bins + 1)[1:-1]))
    return np.asarray(np.searchsorted(edges, values, side="right"))


def independent_features(X_ref, c_ref, *, kind: Kind, groups, alpha: float = INDEPENDENCE_ALPHA
                         ) -> tuple[np.ndarray, list[dict]]:
    """Feature groups whose distribution does not depend on c: a chi-square test of independence per group.

    The counterfactual moves only what the protected attribute moves. A feature whose
    distribution is the same in every group is not caused by c, even where the auxiliary model reads c
    from it *given* other features (a proxy built multiplicatively from a legitimate feature makes that
    feature informative given the proxy; a declared mediator makes the features that predict it
    informative given the mediator). Such a feature group is held fixed like a declared admissible one.

    Parameters
    ----------
    X_ref : ndarray of shape (n, d)
        Reference rows in the aux input space.
    c_ref : ndarray of shape (n,)
        Their protected attribute (a continuous c is cut into ``INDEPENDENCE_BINS`` quantile bins).
    kind : {"binary", "multiclass", "continuous"}
    groups : sequence of index arrays
        Feature groups tested together: a one-hot block (its level as a category), or one numeric feature
        (cut into quantile bins).
    alpha : float
        The test's level: a group with p ≥ alpha is independent (held).

    Returns
    -------
    mask : ndarray of shape (d,), bool
        Features of the independent groups.
    table : list of dict
        Per group: ``features``, ``chi2``, ``dof``, ``p_value``, ``dependent``.

    Notes
    -----
    Our choice (Pearson's chi-square test of independence on the contingency table of the group's level or
    bin against c's group or bin, scipy.stats.chi2_contingency); evidence in docs/benchmark.md. A feature
    that c changes without changing its distribution (c flips the sign of a symmetric noise) is missed.
    """
    from scipy.stats import chi2_contingency

    X = np.asarray(X_ref, dtype=np.float64)
    c = np.asarray(c_ref)
    if len(X) != len(c) or len(X) < 2:
        raise InputError(f"independent_features needs at least 2 reference rows with their protected values; got "
                         f"{fmt_count(len(X))} rows and {fmt_count(len(c))} values")
    c_bins = _bins(c.astype(np.float64), INDEPENDENCE_BINS) if kind == "continuous" else c.astype(np.int64)
    mask = np.zeros(X.shape[1], dtype=bool)
    table = []
    _, ci = np.unique(c_bins, return_inverse=True)                 # c's bins: the same for every group
    n_c = int(ci.max()) + 1
    for idx in (np.asarray(idx, dtype=np.int64) for idx in groups):
        level = X[:, idx].argmax(axis=1) if len(idx) > 1 else _bins(X[:, idx[0]], INDEPENDENCE_BINS)
        n_level = int(level.max()) + 1
        counts = np.bincount(level * n_c + ci, minlength=n_level * n_c).reshape(n_level, n_c).astype(np.float64)
        counts = counts[counts.sum(axis=1) > 0][:, counts.sum(axis=0) > 0]   # the levels and c's bins present
        if counts.shape[0] < 2 or counts.shape[1] < 2:
            chi2, dof, p = 0.0, 0, 1.0
        else:
            chi2, p, dof, _ = chi2_contingency(counts, correction=False)
        dependent = bool(p < alpha)
        mask[idx] = not dependent
        table.append({"features": idx.tolist(), "chi2": float(chi2), "dof": int(dof), "p_value": float(p),
                      "dependent": dependent})
    return mask, table
