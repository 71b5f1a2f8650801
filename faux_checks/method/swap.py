"""The swap reading of the fAux score: the change of the target's prediction, in probability points,
when only the protected attribute changes (our reading; the evidence is in docs/benchmark.md).

Eq. 9 of Castiglione et al. (2022) reports ``g · J⁺``: the change of ŷ per unit change of the
auxiliary model's output. That unit depends on how steep the auxiliary model is, not on how much
the protected attribute c changes a person's prediction (docs/method.md, "Why eq. 9 is not the
gate's unit"). The swap reading keeps fAux's idea — invert the auxiliary model locally to learn
how x moves with c — and answers the question a gate asks:

1. **How far** (eq. 6, Δc): for an individual of group a and another group b, the auxiliary
   model's log-odds of b against a, ``v = z_b(x) − z_a(x)``, is moved to the value it has for a
   *matched* member of group b: the same quantile of group b's distribution of v among people with
   the same admissible features (a per-group linear model of v on the admissible features, and
   1-D optimal transport of its residuals). Without admissible features this is plain quantile
   matching of v between the two groups. Continuous c: v is the aux prediction of c and moves by
   the change one standard deviation of c makes to it, given the admissible features.
2. **Along which direction** (eq. 7–8, J⁺): the minimum-norm solution of ``aᵀΔx = Δv`` in the
   data's own metric, ``Δx = M a · Δv / (aᵀ M a)`` with ``a = ∇ₓ v`` and M the covariance of the
   reference rows, conditional on the admissible features (which the move holds fixed). With
   M = I this is eq. 7–8 exactly; the covariance makes it independent of feature scaling and moves
   the features that vary with c rather than those the aux model merely uses to cancel noise
   (the pattern, not the filter).
3. **What changes** (eq. 5): the score is the target's actual change ``|f(x + Δx) − f(x)|``
   (``evaluation = "finite"``) or its first-order value ``|∇f · Δx|``; the largest over the other
   groups (continuous c: over ±1 sd). When c's own columns are target inputs they are set to group
   b's encoding too (the direct term, bad-inputs case C09).

Every function here is pure (tensors or arrays in, arrays out); :class:`~faux_checks.method.faux.FAuxTester`
streams individuals through them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from .._validation import fmt_count
from ..errors import InputError

__all__ = [
    "GroupShift",
    "SwapReference",
    "covariance_metric",
    "fit_swap_reference",
    "matched_quantile",
    "pair_values",
    "swap_displacement",
    "uninformative_features",
]

#: Quantiles kept per group and pair for the 1-D optimal transport (1,001: 0.1% resolution).
N_QUANTILES = 1001
#: Ridge of the per-group linear models of v on the admissible features (relative to the row count).
RIDGE = 1e-3
#: aᵀMa at or below this (in squared aux-output units) is a zero direction: the row is undefined.
ZERO_NORM2 = 1e-20
#: A feature group is informative about c when permuting it raises the aux model's held-out loss by more
#: than this many standard errors (one-sided, ≈ 2.3% of uninformative groups called informative).
INFORMATIVE_Z = 2.0

Kind = Literal["binary", "multiclass", "continuous"]


def covariance_metric(X_ref, *, admissible=None) -> np.ndarray:
    """The metric M of the swap's minimum-norm move: the covariance of x, conditional on the admissible features.

    Parameters
    ----------
    X_ref : ndarray of shape (n, d)
        Reference rows in the auxiliary model's input space (encoded features).
    admissible : bool array of shape (d,), optional
        Features the counterfactual holds fixed (declared in the policy).

    Returns
    -------
    ndarray of shape (d, d), float64
        ``Σ_FF − Σ_FA Σ_AA⁺ Σ_AF`` on the free features F (the covariance of F given A, under a
        linear model), zero on every row and column of an admissible feature.

    Raises
    ------
    InputError
        Fewer than 2 rows, non-finite values, a mask of the wrong shape, or no free feature.

    Notes
    -----
    Our reading of fAux eq. 7–8 in the Mahalanobis metric: minimising ``Δxᵀ M⁺ Δx`` subject to
    ``aᵀΔx = Δv`` and ``Δx_A = 0`` gives ``Δx = M a Δv / (aᵀ M a)`` with M the conditional covariance.
    """
    X = np.asarray(X_ref, dtype=np.float64)
    if X.ndim != 2 or len(X) < 2:
        raise InputError(f"the swap reading needs at least 2 reference rows of shape (n, d), got {X.shape}")
    if not np.isfinite(X).all():
        raise InputError(f"the reference rows hold {fmt_count(int((~np.isfinite(X)).any(axis=1).sum()))} rows "
                         "with NaN/inf; clean them first")
    d = X.shape[1]
    A = np.zeros(d, dtype=bool) if admissible is None else np.asarray(admissible, dtype=bool)
    if A.shape != (d,):
        raise InputError(f"the admissible mask has shape {A.shape}, expected ({d},)")
    if A.all():
        raise InputError("every feature is declared admissible: nothing is left that could carry the protected "
                         "attribute, so the swap reading cannot move x; declare fewer admissible columns")
    sigma = np.cov(X, rowvar=False).reshape(d, d)
    if not A.any():
        return sigma
    F = ~A
    s_ff, s_fa, s_aa = sigma[np.ix_(F, F)], sigma[np.ix_(F, A)], sigma[np.ix_(A, A)]
    conditional = s_ff - s_fa @ np.linalg.pinv(s_aa, rcond=1e-10, hermitian=True) @ s_fa.T
    out = np.zeros_like(sigma)
    out[np.ix_(F, F)] = (conditional + conditional.T) / 2
    return out


def pair_values(raw: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The auxiliary model's log-odds of group b against group a, ``v = z_b − z_a``, per row.

    Parameters
    ----------
    raw : Tensor of shape (n, m) or (n, 1)
        Raw aux outputs: m logits, or one logit of group 1 (binary; read as ``[0, z]``).
    a, b : Tensor of shape (n,), int64
        The individual's group and the other group.

    Returns
    -------
    Tensor of shape (n,), differentiable.
    """
    if raw.shape[1] == 1:
        raw = torch.cat([torch.zeros_like(raw), raw], dim=1)
    rows = torch.arange(raw.shape[0])
    return raw[rows, b] - raw[rows, a]


def matched_quantile(values: np.ndarray, q_from: np.ndarray, q_to: np.ndarray) -> np.ndarray:
    """1-D optimal transport between two distributions given by their quantiles.

    Parameters
    ----------
    values : ndarray of shape (n,)
    q_from, q_to : ndarray of shape (Q,), non-decreasing
        Quantiles of the source and target distributions on the same probability grid.

    Returns
    -------
    ndarray of shape (n,)
        The target distribution's value at each value's rank in the source distribution (ties
        and flat stretches at their mid-rank; values outside the source range at its ends).
    """
    levels, ranks = _quantile_ranks(q_from)
    return np.interp(np.interp(values, levels, ranks), np.linspace(0.0, 1.0, len(q_from)), q_to)


def _interp_uniform(r: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``np.interp(r, linspace(0, 1, len(q)), q)`` for r in [0, 1], by index arithmetic (no search)."""
    pos = r * (len(q) - 1)
    i = np.minimum(pos.astype(np.int64), len(q) - 2)
    return q[i] + (pos - i) * (q[i + 1] - q[i])


def _quantile_ranks(q_from: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct quantile values and their mean rank on the probability grid (ties share their mean rank)."""
    grid = np.linspace(0.0, 1.0, len(q_from))
    levels, inverse = np.unique(q_from, return_inverse=True)
    return levels, np.bincount(inverse, weights=grid) / np.bincount(inverse)


@dataclass(frozen=True)
class GroupShift:
    """How the aux log-odds v = z_b − z_a differ between group a and group b, given the admissible features.

    Attributes
    ----------
    coef_from, coef_to : ndarray of shape (1 + d_A,)
        Intercept and slopes of the linear model of v on the admissible features, within group a
        (from) and within group b (to).
    quantiles_from, quantiles_to : ndarray of shape (N_QUANTILES,)
        Quantiles of the residuals of those models within each group.
    """

    coef_from: np.ndarray
    coef_to: np.ndarray
    quantiles_from: np.ndarray
    quantiles_to: np.ndarray

    def goal(self, v: np.ndarray, x_admissible: np.ndarray) -> np.ndarray:
        """The matched value of v in group b for rows of group a: (n,), (n, d_A) -> (n,)."""
        fitted_from = self.coef_from[0] + x_admissible @ self.coef_from[1:]
        fitted_to = self.coef_to[0] + x_admissible @ self.coef_to[1:]
        return self.goal_from_fits(v, fitted_from, fitted_to)

    def goal_from_fits(self, v: np.ndarray, fitted_from: np.ndarray, fitted_to: np.ndarray) -> np.ndarray:
        """:meth:`goal` given the two linear models' fitted values for the rows, (n,) each -> (n,)."""
        levels, ranks = self._ranks
        return fitted_to + _interp_uniform(np.interp(v - fitted_from, levels, ranks), self.quantiles_to)

    @functools.cached_property
    def _ranks(self) -> tuple[np.ndarray, np.ndarray]:
        return _quantile_ranks(self.quantiles_from)


@dataclass(frozen=True)
class SwapReference:
    """What the swap reading learns once from reference rows (:func:`fit_swap_reference`).

    Attributes
    ----------
    kind : {"binary", "multiclass", "continuous"}
    n_groups : int
        m groups (0 for continuous).
    metric : ndarray of shape (d, d)
        :func:`covariance_metric`, the variances only, or the identity (eq. 7–8 as printed).
    admissible : ndarray of shape (d,), bool
    shifts : dict of (a, b) -> GroupShift
        For every ordered pair of groups (binary and multi-class).
    slope : float
        Continuous c: change of the aux output per +1 standard deviation of c, given the admissible
        features (NaN otherwise).
    """

    kind: str
    n_groups: int
    metric: np.ndarray
    admissible: np.ndarray
    shifts: dict = field(default_factory=dict)
    slope: float = float("nan")

    @property
    def n_targets(self) -> int:
        """Counterfactuals per individual: m − 1 other groups, or ±1 sd for continuous c."""
        return 2 if self.kind == "continuous" else self.n_groups - 1

    def to_dict(self) -> dict:
        """JSON-serialisable form (lists), for sharing with workers."""
        return {
            "kind": self.kind, "n_groups": self.n_groups, "metric": self.metric.tolist(),
            "admissible": self.admissible.tolist(), "slope": None if np.isnan(self.slope) else self.slope,
            "shifts": [[a, b, s.coef_from.tolist(), s.coef_to.tolist(), s.quantiles_from.tolist(),
                        s.quantiles_to.tolist()] for (a, b), s in sorted(self.shifts.items())],
        }

    @classmethod
    def from_dict(cls, payload: dict) -> "SwapReference":
        """Inverse of :meth:`to_dict`."""
        shifts = {(int(a), int(b)): GroupShift(*(np.asarray(x, dtype=np.float64) for x in rest))
                  for a, b, *rest in payload["shifts"]}
        slope = payload.get("slope")
        return cls(kind=payload["kind"], n_groups=int(payload["n_groups"]),
                   metric=np.asarray(payload["metric"], dtype=np.float64),
                   admissible=np.asarray(payload["admissible"], dtype=bool), shifts=shifts,
                   slope=float("nan") if slope is None else float(slope))


def _ridge_fit(design: np.ndarray, y: np.ndarray) -> np.ndarray:
    n = len(design)
    penalty = RIDGE * n * np.eye(design.shape[1])
    penalty[0, 0] = 0.0                                                  # no penalty on the intercept
    return np.linalg.solve(design.T @ design + penalty, design.T @ y)


def fit_swap_reference(raw_ref, X_ref, c_ref, *, kind: Kind, admissible=None,
                       metric: Literal["covariance", "diagonal", "euclidean"] = "covariance") -> SwapReference:
    """Learn the swap reading's metric and group shifts from reference rows.

    Parameters
    ----------
    raw_ref : ndarray or Tensor of shape (n, m) or (n, 1)
        Raw aux outputs on the reference rows (logits; continuous: the standardised prediction of c).
    X_ref : ndarray of shape (n, d)
        The same rows in the aux model's input space.
    c_ref : ndarray of shape (n,)
        Their protected attribute: group index 0..m−1, or the continuous value.
    kind : {"binary", "multiclass", "continuous"}
    admissible : bool array of shape (d,), optional
        Features the counterfactual holds fixed.
    metric : {"covariance", "diagonal", "euclidean"}
        The move's metric: :func:`covariance_metric` (default); the features' variances only (eq. 7–8
        in standardised units, no correlations); or the identity (eq. 7–8 as printed). Admissible
        rows and columns are zero in every metric.

    Returns
    -------
    SwapReference

    Raises
    ------
    InputError
        Shapes that disagree, a group with fewer than 2 reference rows, a constant continuous c,
        or any error of :func:`covariance_metric`.
    """
    X = np.asarray(X_ref, dtype=np.float64)
    raw = np.asarray(raw_ref.detach().numpy() if isinstance(raw_ref, torch.Tensor) else raw_ref, dtype=np.float64)
    c = np.asarray(c_ref)
    if raw.ndim == 1:
        raw = raw[:, None]
    if not (len(X) == len(raw) == len(c)):
        raise InputError(f"reference rows disagree: X has {fmt_count(len(X))}, the aux outputs "
                         f"{fmt_count(len(raw))}, the protected attribute {fmt_count(len(c))}")
    A = np.zeros(X.shape[1], dtype=bool) if admissible is None else np.asarray(admissible, dtype=bool)
    if metric == "covariance":
        M = covariance_metric(X, admissible=A)
    elif metric == "diagonal":
        M = np.diag(np.where(A, 0.0, X.var(axis=0)))
    elif metric == "euclidean":
        M = np.diag((~A).astype(np.float64))
    else:
        raise InputError(f"metric must be 'covariance', 'diagonal' or 'euclidean', got {metric!r}")
    XA = X[:, A]
    grid = np.linspace(0.0, 1.0, N_QUANTILES)
    if kind == "continuous":
        sd = float(np.std(c))
        if not sd > 0:
            raise InputError("the continuous protected attribute is constant on the reference rows")
        design = np.column_stack([np.ones(len(c)), XA, (c - c.mean()) / sd])
        slope = float(_ridge_fit(design, raw[:, 0])[-1])
        return SwapReference(kind=kind, n_groups=0, metric=M, admissible=A, slope=slope)
    m = 2 if raw.shape[1] == 1 else raw.shape[1]
    c = c.astype(np.int64)
    counts = np.bincount(c, minlength=m)
    if (counts < 2).any():
        raise InputError(f"every protected group needs at least 2 reference rows for the swap reading; "
                         f"counts {counts.tolist()}")
    z = np.concatenate([np.zeros((len(raw), 1)), raw], axis=1) if raw.shape[1] == 1 else raw
    shifts = {}
    for a in range(m):
        for b in range(m):
            if a == b:
                continue
            v = z[:, b] - z[:, a]
            parts = []
            for g in (a, b):
                rows = c == g
                design = np.column_stack([np.ones(int(rows.sum())), XA[rows]])
                coef = _ridge_fit(design, v[rows])
                parts.append((coef, np.quantile(v[rows] - design @ coef, grid)))
            shifts[(a, b)] = GroupShift(parts[0][0], parts[1][0], parts[0][1], parts[1][1])
    return SwapReference(kind=kind, n_groups=m, metric=M, admissible=A, shifts=shifts)


def uninformative_features(aux_raw, X_hold, c_hold, *, kind: Kind, groups, z: float = INFORMATIVE_Z,
                           seed: int = 0) -> tuple[np.ndarray, list[dict]]:
    """Feature groups that tell the auxiliary model nothing about c: permuting them does not raise its held-out loss.

    The swap reading moves every feature the aux gradient points at; where the aux model leans on a
    feature only by noise (its local gradient is rarely exactly zero), the move would shift a
    legitimate feature and the score would count the target's use of it as discrimination. A
    feature group whose permutation (one permutation of the held-out rows for the whole group) leaves
    the aux model's loss unchanged, within ``z`` standard errors of the per-row differences, carries no
    evidence about c and is held fixed like a declared admissible feature.

    Parameters
    ----------
    aux_raw : callable, Tensor (n, d) -> Tensor (n, m) or (n, 1)
        Raw aux outputs (logits, or the standardised prediction of a continuous c).
    X_hold : ndarray of shape (n, d)
        Rows the aux model did not train on.
    c_hold : ndarray of shape (n,)
        Their protected attribute.
    kind : {"binary", "multiclass", "continuous"}
    groups : sequence of index arrays
        Feature groups permuted together (a source column's one-hot block, or one numeric feature).
    z : float
        Standard errors above zero the loss increase must reach to count as informative.
    seed : int

    Returns
    -------
    mask : ndarray of shape (d,), bool
        Features of the uninformative groups.
    table : list of dict
        Per group: ``features`` (index list), ``loss_increase`` (mean, nats or squared sd), ``z``, ``informative``.

    Notes
    -----
    Our choice (permutation importance, Breiman 2001, as a significance test on held-out rows);
    evidence in docs/benchmark.md ("hold uninformative features").
    """
    X = torch.as_tensor(np.asarray(X_hold), dtype=torch.float32)
    c = np.asarray(c_hold)
    if len(X) != len(c) or len(X) < 2:
        raise InputError(f"uninformative_features needs at least 2 held-out rows with their protected values; got "
                         f"{fmt_count(len(X))} rows and {fmt_count(len(c))} values")

    def row_losses(x: torch.Tensor) -> np.ndarray:
        with torch.no_grad():
            raw = aux_raw(x)
        raw = raw[:, None] if raw.ndim == 1 else raw
        if kind == "binary":
            target = torch.as_tensor(c, dtype=raw.dtype)
            return torch.nn.functional.binary_cross_entropy_with_logits(raw[:, 0], target, reduction="none").double().numpy()
        if kind == "multiclass":
            return torch.nn.functional.cross_entropy(raw, torch.as_tensor(c, dtype=torch.long), reduction="none").double().numpy()
        standard = (c - c.mean()) / (c.std() or 1.0)
        return (raw[:, 0].double().numpy() - standard) ** 2

    base = row_losses(X)
    rng = np.random.default_rng(seed)
    mask = np.zeros(X.shape[1], dtype=bool)
    table = []
    for idx in groups:
        idx = np.asarray(idx, dtype=np.int64)
        permuted = X.clone()
        permuted[:, idx] = X[torch.as_tensor(rng.permutation(len(X)))][:, idx]
        diff = row_losses(permuted) - base
        se = diff.std(ddof=1) / np.sqrt(len(diff))
        score = float(diff.mean() / se) if se > 0 else (float("inf") if diff.mean() > 0 else 0.0)
        informative = score > z
        mask[idx] = not informative
        table.append({"features": idx.tolist(), "loss_increase": float(diff.mean()), "z": score,
                      "informative": bool(informative)})
    return mask, table


def swap_displacement(grad: torch.Tensor, metric: torch.Tensor, delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The minimum-norm move ``Δx = M a · Δv / (aᵀ M a)`` that changes the aux output by Δv (first order).

    Parameters
    ----------
    grad : Tensor of shape (n, d)
        a = ∇ₓ v, the gradient of the aux log-odds (or prediction) being moved; float32 or float64.
    metric : Tensor of shape (d, d), symmetric positive semi-definite
    delta : Tensor of shape (n,)
        Δv, the change of the aux output to make.

    Returns
    -------
    dx : Tensor of shape (n, d), in grad's dtype
        Zero where undefined. The product M a is formed in grad's dtype (a float32 gradient from autograd
        gives a float32 move, the precision x′ is stored in, and its norm aᵀMa); Δv / aᵀMa is in float64.
    undefined : Tensor of shape (n,), bool
        Rows whose gradient has no component the metric can move (aᵀMa ≈ 0), or non-finite values.

    Notes
    -----
    Our reading of fAux eq. 7–8 in the metric M (module docstring); M = I gives ``a Δv / ‖a‖²``,
    eq. 9's direction times Δv.
    """
    g = grad if grad.dtype in (torch.float32, torch.float64) else grad.double()
    Mg = g @ metric.to(g.dtype)                                              # (n, d)
    norm2 = (Mg * g).sum(dim=1).double()                                     # (n,)
    delta = delta.double()
    undefined = ~(torch.isfinite(norm2) & torch.isfinite(delta)) | (norm2 <= ZERO_NORM2)
    scale = delta / norm2                                                    # (n,): inf/NaN only where undefined
    if bool(undefined.any()):
        scale = torch.where(undefined, torch.zeros((), dtype=torch.float64), scale)
        Mg = torch.where(undefined[:, None], torch.zeros((), dtype=g.dtype), Mg)
    dx = Mg.mul_(scale.to(g.dtype)[:, None])                                 # Mg is the matmul's own output
    return dx, undefined
