"""The rows the swap reading's reference is fitted on: every reference row up to a cap, beyond it a seeded sample.

The reference (:meth:`~faux_checks.method.faux.FAuxTester.fit_reference`) is a fixed cost per check whose
statistics — per-group ridge fits and residual quantiles of each matched feature, the metric's covariance, the
chi-square and permutation tests of the holds, the level models — settle at a few thousand rows per group,
while its time grows with the rows (the permutation test alone is one auxiliary-model forward of every
hold-out row per feature group). :func:`capped_rows` keeps at most :data:`REFERENCE_MAX_ROWS` of them.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MIN_GROUP_ROWS", "REFERENCE_MAX_ROWS", "REFERENCE_SEED", "capped_rows"]

#: Reference (and, separately, hold-out) rows read at most; beyond it a seeded sample of this size.
REFERENCE_MAX_ROWS = 20_000
#: Seed of that sample.
REFERENCE_SEED = 0
#: Rows a protected group keeps in the sample at least (all of them when it has fewer).
MIN_GROUP_ROWS = 1_000


def capped_rows(c, *, grouped: bool, max_rows: int = REFERENCE_MAX_ROWS, seed: int = REFERENCE_SEED
                ) -> np.ndarray | None:
    """Sorted indices of the rows kept: None when there are at most ``max_rows`` (every row, in order).

    Parameters
    ----------
    c : array of shape (n,)
        The rows' protected attribute (group index, or the continuous value).
    grouped : bool
        Groups are sampled apart (stratified): each keeps its share of ``max_rows``, at least
        :data:`MIN_GROUP_ROWS` (or all its rows), so a small group keeps its rows; a continuous c: a plain
        sample of ``max_rows`` rows.
    max_rows : int
    seed : int

    Returns
    -------
    ndarray of shape (k,), int64, or None
        k ≤ ``max_rows`` + groups × :data:`MIN_GROUP_ROWS`.

    Notes
    -----
    Our choice (the joint test of the held block samples its rows the same way,
    :data:`~faux_checks.method.joint_hold.JOINT_MAX_ROWS`). The sample's error: a residual quantile from k rows of
    a group is off by about √(p(1−p)/k) / f(q) (≈ 0.01 sd at the median for k = 10,000), the ridge and covariance
    fits by O(1/√k) relative; measured in benchmarks/README.md ("The reference fit: one thread, capped rows").
    """
    c = np.asarray(c)
    n = len(c)
    if n <= max_rows:
        return None
    rng = np.random.default_rng(seed)
    if not grouped:
        return np.sort(rng.choice(n, max_rows, replace=False))
    parts = []
    for g in np.unique(c):
        rows = np.flatnonzero(c == g)
        take = min(len(rows), max(int(round(max_rows * len(rows) / n)), MIN_GROUP_ROWS))
        parts.append(rows if take == len(rows) else rng.choice(rows, take, replace=False))
    return np.sort(np.concatenate(parts))


def capped_reference(X_ref, c_ref, holdout, *, grouped: bool):
    """The reference rows and the hold-out rows, each capped by :func:`capped_rows`, and what was kept.

    Parameters
    ----------
    X_ref : Tensor or ndarray of shape (n, d)
    c_ref : array of shape (n,)
    holdout : (X_hold (n_hold, d), c_hold (n_hold,)) or None
    grouped : bool
        c is a group index (sampled per group).

    Returns
    -------
    (X_ref, c_ref, holdout, sample)
        The inputs themselves where they are within the cap, else their sampled rows (in order); ``sample`` is
        ``{"rows", "of", "holdout_rows", "holdout_of", "max_rows", "seed"}`` (row counts kept and given; the
        hold-out's None without one).
    """
    sample = {"rows": len(c_ref), "of": len(c_ref), "holdout_rows": None, "holdout_of": None,
              "max_rows": REFERENCE_MAX_ROWS, "seed": REFERENCE_SEED}
    rows = capped_rows(c_ref, grouped=grouped, max_rows=REFERENCE_MAX_ROWS, seed=REFERENCE_SEED)
    if rows is not None:
        X_ref, c_ref = X_ref[rows], np.asarray(c_ref)[rows]
        sample["rows"] = len(rows)
    if holdout is not None:
        sample["holdout_rows"] = sample["holdout_of"] = len(holdout[1])
        kept = capped_rows(holdout[1], grouped=grouped, max_rows=REFERENCE_MAX_ROWS, seed=REFERENCE_SEED)
        if kept is not None:
            holdout = (np.asarray(holdout[0])[kept], np.asarray(holdout[1])[kept])
            sample["holdout_rows"] = len(kept)
    return X_ref, c_ref, holdout, sample
