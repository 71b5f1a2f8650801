"""The metric M of the swap reading's minimum-norm move: a covariance of x, conditional on the admissible features.

:func:`covariance_metric` (total, explained, within or between part); :func:`faux_checks.method.swap.fit_swap_reference`
chooses among it, the variances only and the identity.
"""

from __future__ import annotations

import numpy as np

from .._validation import fmt_count
from ..errors import InputError

__all__ = ["METRIC_PARTS", "covariance_metric"]


def _group_design(c: np.ndarray, kind: str) -> np.ndarray:
    """(n, r) regressors for c: group dummies without group 0 (binary, multi-class) or c standardised (continuous)."""
    if kind == "continuous":
        c = np.asarray(c, dtype=np.float64)
        return ((c - c.mean()) / (c.std() or 1.0))[:, None]
    c = np.asarray(c, dtype=np.int64)
    m = int(c.max()) + 1 if len(c) else 0
    return (c[:, None] == np.arange(1, max(m, 2))[None, :]).astype(np.float64)


def _residuals(Y: np.ndarray, design: np.ndarray) -> np.ndarray:
    """Y minus its least-squares fit on ``design`` (columns already include the intercept)."""
    coef, *_ = np.linalg.lstsq(design, Y, rcond=None)
    return Y - design @ coef


METRIC_PARTS = ("total", "explained", "within", "between")


def covariance_metric(X_ref, *, admissible=None, c=None, kind: str | None = None, part: str = "total") -> np.ndarray:
    """The metric M of the swap's minimum-norm move: a covariance of x, conditional on the admissible features.

    Parameters
    ----------
    X_ref : ndarray of shape (n, d)
        Reference rows in the auxiliary model's input space (encoded features).
    admissible : bool array of shape (d,), optional
        Features the counterfactual holds fixed (declared, and those uninformative about c).
    c : ndarray of shape (n,), optional
        The rows' protected attribute (needed for ``part`` "explained" and "within").
    kind : {"binary", "multiclass", "continuous"}, optional
        How c enters the regression: group dummies, or linearly (continuous).
    part : {"total", "explained", "within"}
        ``"total"``: Cov(F | A) = Σ_FF − Σ_FA Σ_AA⁺ Σ_AF, the free features' covariance given the admissible
        ones (linear). ``"explained"``: the part of it c explains, Cov(F | A) − Cov(F | A, c) (the
        between-group covariance given A). ``"within"``: Cov(F | A, c), the within-group covariance given A.

    Returns
    -------
    ndarray of shape (d, d), float64
        Symmetric positive semi-definite, zero on every row and column of an admissible feature; all zero
        when every feature is admissible (nothing may move: every score is 0 by definition).

    Raises
    ------
    InputError
        Fewer than 2 rows, non-finite values, a mask of the wrong shape, ``part`` unknown, or ``c``
        missing or of the wrong length for "explained"/"within".

    Notes
    -----
    Our reading of fAux eq. 7–8 in the Mahalanobis metric: minimising ``Δxᵀ M⁺ Δx`` subject to
    ``aᵀΔx = Δv`` and ``Δx_A = 0`` gives ``Δx = M a Δv / (aᵀ M a)``. With "total", features that covary for
    reasons other than c (a proxy built from a legitimate feature and that feature) move together; with
    "explained", only along directions in which the groups' means differ given A (evidence in
    docs/benchmark.md). The three satisfy total = explained + within (the law of total covariance, with
    linear conditioning), each regression by least squares on the reference rows.
    """
    X = np.asarray(X_ref, dtype=np.float64)
    if X.ndim != 2 or len(X) < 2:
        raise InputError(f"the swap reading needs at least 2 reference rows of shape (n, d), got {X.shape}")
    if not np.isfinite(X).all():
        raise InputError(f"the reference rows hold {fmt_count(int((~np.isfinite(X)).any(axis=1).sum()))} rows "
                         "with NaN/inf; clean them first")
    if part not in METRIC_PARTS:
        raise InputError(f"the metric's part must be one of {list(METRIC_PARTS)}, got {part!r}")
    n, d = X.shape
    A = np.zeros(d, dtype=bool) if admissible is None else np.asarray(admissible, dtype=bool)
    if A.shape != (d,):
        raise InputError(f"the admissible mask has shape {A.shape}, expected ({d},)")
    out = np.zeros((d, d))
    if A.all():
        return out
    F = ~A
    if part == "total" and not A.any():
        return np.cov(X, rowvar=False).reshape(d, d)
    if part == "total":
        sigma = np.cov(X, rowvar=False).reshape(d, d)
        s_ff, s_fa, s_aa = sigma[np.ix_(F, F)], sigma[np.ix_(F, A)], sigma[np.ix_(A, A)]
        conditional = s_ff - s_fa @ np.linalg.pinv(s_aa, rcond=1e-10, hermitian=True) @ s_fa.T
        out[np.ix_(F, F)] = (conditional + conditional.T) / 2
        return out
    if c is None or len(c) != n:
        raise InputError(f"the '{part}' metric needs the protected attribute of each of the {fmt_count(n)} "
                         f"reference rows, got {'none' if c is None else fmt_count(len(c))}")
    # "between": c's explained part of the free features, not conditional on A (conditioning on an admissible
    # mediator makes c and the features that predict the mediator dependent, though c causes neither)
    base = np.column_stack([np.ones(n), X[:, A]]) if part != "between" else np.ones((n, 1))   # (n, 1 + d_A)
    R0 = _residuals(X[:, F], base)                                          # F given A
    G = _residuals(_group_design(c, kind or "binary"), base)               # c given A
    coef, *_ = np.linalg.lstsq(G, R0, rcond=None)                           # (r, d_F)
    explained = G @ coef                                                     # (n, d_F): the part of F that c explains
    if part in ("explained", "between"):
        block = explained.T @ explained / (n - 1)
    else:
        within = R0 - explained
        block = within.T @ within / (n - 1)
    out[np.ix_(F, F)] = (block + block.T) / 2
    return out
