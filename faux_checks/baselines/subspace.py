"""The sensitive subspace S of the fair metric: the span of a linear model of c given x.

Shared by the weighted FTA and Unfair Map testers. The fair metric of Yurochkin, Bower and Sun
(SenSR, ICLR 2020) and Ruoss et al. (LCIFR, NeurIPS 2020) makes moves inside S free.
"""

from __future__ import annotations


import numpy as np

from .._validation import check_finite_matrix, fmt_count
from ..errors import InputError
from ..kinds import Kind
from ..method._batching import as_tensor

__all__ = ["Kind", "fit_sensitive_subspace"]



def fit_sensitive_subspace(X, c, *, kind: Kind = "binary", C: float = 1.0, alpha: float = 1.0,
                           rcond: float = 1e-6) -> np.ndarray:
    """Orthonormal basis of the sensitive subspace: the span of a linear model's coefficients.

    Parameters
    ----------
    X : ndarray or Tensor of shape (n, d)
        Encoded features (the target's inputs).
    c : array of shape (n,)
        Protected attribute: class index (binary/multi-class) or value (continuous).
    kind : {"binary", "multiclass", "continuous"}
        Binary and multi-class c: scikit-learn ``LogisticRegression(C=C)`` (1 or m coefficient
        vectors); continuous: ``Ridge(alpha=alpha)`` (1 vector).
    C, alpha : float
        Inverse L2 strength of the logistic model; L2 strength of the ridge model.
    rcond : float
        Directions with singular value below ``rcond`` times the largest are dropped.

    Returns
    -------
    ndarray of shape (d, r), float64
        Orthonormal columns (r ≥ 1): the directions of x-space along which the linear model's
        output for c changes. Columns are in units of the encoded features (the model is fitted
        on standardised features and its coefficients mapped back, w_x = w_std / scale).

    Raises
    ------
    InputError
        Row counts differ, fewer than two groups, non-finite X, or all coefficients zero.

    Notes
    -----
    Yurochkin et al. 2020 (SenSR, "sensitive subspace" metric); Ruoss et al. 2020.
    """
    from sklearn.linear_model import LogisticRegression, Ridge

    Xn = as_tensor(X).double().numpy()
    c = np.asarray(c)
    n, d = Xn.shape
    if len(c) != n:
        raise InputError(f"X has {fmt_count(n)} rows but c has {fmt_count(len(c))}")
    if not np.isfinite(Xn).all():
        check_finite_matrix(Xn, [f"feature column {j} of X" for j in range(d)], what="sensitive subspace")
    mean = Xn.mean(axis=0)
    scale = Xn.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    Z = (Xn - mean) / scale
    if kind == "continuous":
        coef = np.atleast_2d(Ridge(alpha=alpha).fit(Z, c.astype(np.float64)).coef_)
    elif kind in ("binary", "multiclass"):
        if len(np.unique(c)) < 2:
            raise InputError(f"c has a single group in {fmt_count(n)} rows; the sensitive subspace needs two")
        coef = np.atleast_2d(LogisticRegression(C=C, max_iter=1000).fit(Z, c.astype(np.int64)).coef_)
    else:
        raise InputError(f"kind must be 'binary', 'multiclass' or 'continuous', got {kind!r}")
    W = (coef / scale[None, :]).T                                         # (d, m): ∂(linear output)/∂x
    U, s, _ = np.linalg.svd(W, full_matrices=False)
    if s.size == 0 or s[0] <= 0:
        raise InputError("the linear model of c has all-zero coefficients: no sensitive direction to measure")
    return U[:, s > rcond * s[0]]                                         # (d, r)
