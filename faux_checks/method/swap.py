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

from .._device import host
from .._validation import fmt_count
from ..errors import InputError
from .levels import LevelModel

__all__ = [
    "ContinuousShift",
    "FeatureMatching",
    "GroupShift",
    "METRICS",
    "SwapReference",
    "covariance_metric",
    "fit_swap_reference",
    "independent_features",
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
    "explained", only along directions in which the groups' means differ given A (issue 20; evidence in
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
    rows = torch.arange(raw.shape[0], device=raw.device)
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


#: Private switch for tests: True runs the torch path of the matched quantiles (:func:`_interp_t` and the
#: ``*_t`` helpers) on CPU tensors too. Without it the torch path runs only for a chunk on a non-CPU device; the
#: CPU keeps the numpy path (bit-identical to the pinned scores).
_FORCE_TORCH = False


def _torch_path(x) -> bool:
    """Whether a chunk's tensor ``x`` takes the torch path: a Tensor on a non-CPU device (or :data:`_FORCE_TORCH`)."""
    return isinstance(x, torch.Tensor) and (_FORCE_TORCH or x.device.type != "cpu")


def _interp_t(x: torch.Tensor, xp: torch.Tensor, fp: torch.Tensor) -> torch.Tensor:
    """``np.interp(x, xp, fp)`` in torch, on x's device.

    Parameters
    ----------
    x : Tensor of shape (n,), float64
    xp : Tensor of shape (Q,), float64, strictly increasing
    fp : Tensor of shape (Q,), float64, on x's device

    Returns
    -------
    Tensor of shape (n,), float64
        Linear interpolation; ``fp[0]`` below ``xp[0]``, ``fp[-1]`` at or above ``xp[-1]``, ``fp[j]`` where
        x equals ``xp[j]``, NaN where x is NaN (one point, Q = 1: ``fp[0]`` everywhere, NaN included).

    Notes
    -----
    Our reading: np.interp semantics (numpy's ``arr_interp``: the same slope formula ``slope·(x − xp[j]) +
    fp[j]``, and its retry from the right end of the interval where that is NaN), so that on float64 CPU
    tensors it equals np.interp (tests/test_swap_torch_path.py).
    """
    if xp.shape[0] == 1:
        return torch.full_like(x, 0.0) + fp[0]
    j = (torch.searchsorted(xp, x.contiguous(), right=True) - 1).clamp(0, xp.shape[0] - 2)   # xp[j] <= x < xp[j+1]
    x0, x1, f0, f1 = xp[j], xp[j + 1], fp[j], fp[j + 1]
    slope = (f1 - f0) / (x1 - x0)
    out = slope * (x - x0) + f0
    retry = torch.isnan(out)
    out = torch.where(retry, slope * (x - x1) + f1, out)
    out = torch.where(torch.isnan(out) & (f0 == f1), f0, out)
    out = torch.where(x == x0, f0, out)
    out = torch.where(x >= xp[-1], fp[-1], out)
    out = torch.where(x < xp[0], fp[0], out)
    return torch.where(torch.isnan(x), x, out)


def _interp_uniform_t(r: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """:func:`_interp_uniform` in torch: ``np.interp(r, linspace(0, 1, len(q)), q)`` for r (n,) in [0, 1], q (Q,) float64.

    The index is clamped to [0, Q − 2] (numpy's would be out of range for a NaN r; here a NaN r gives NaN).
    """
    pos = r * (q.shape[0] - 1)
    i = pos.long().clamp(0, q.shape[0] - 2)
    return q[i] + (pos - i) * (q[i + 1] - q[i])


class _DeviceCached:
    """Mixin: per-device copies of a frozen reference object's arrays (built once per device, never pickled)."""

    def _on_device(self, device: torch.device, key, build):
        cache = self.__dict__.setdefault("_device_cache", {})               # frozen dataclass: no __setattr__
        k = (str(device), key)
        if k not in cache:
            cache[k] = build()
        return cache[k]

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_device_cache", None)
        return state


def _t64(a, device) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a, dtype=np.float64), dtype=torch.float64, device=device)


@dataclass(frozen=True)
class GroupShift(_DeviceCached):
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
        """The matched value of v in group b for rows of group a: (n,), (n, d_A) -> (n,).

        Float64 Tensors (on any device) in give a Tensor on that device (:meth:`goal_from_fits`).
        """
        if isinstance(v, torch.Tensor):
            coef_from, coef_to = (_t64(c, v.device) for c in (self.coef_from, self.coef_to))
            return self.goal_from_fits(v, coef_from[0] + x_admissible @ coef_from[1:],
                                       coef_to[0] + x_admissible @ coef_to[1:])
        fitted_from = self.coef_from[0] + x_admissible @ self.coef_from[1:]
        fitted_to = self.coef_to[0] + x_admissible @ self.coef_to[1:]
        return self.goal_from_fits(v, fitted_from, fitted_to)

    def goal_from_fits(self, v: np.ndarray, fitted_from: np.ndarray, fitted_to: np.ndarray) -> np.ndarray:
        """:meth:`goal` given the two linear models' fitted values for the rows, (n,) each -> (n,).

        ndarrays in: numpy (np.interp). float64 Tensors in: the same on their device (:func:`_interp_t`,
        :func:`_interp_uniform_t`; the quantiles are copied to the device once and kept).
        """
        if isinstance(v, torch.Tensor):
            levels, ranks, q_to = self._on_device(v.device, "ranks", lambda: tuple(
                _t64(a, v.device) for a in (*self._ranks, self.quantiles_to)))
            return fitted_to + _interp_uniform_t(_interp_t(v - fitted_from, levels, ranks), q_to)
        levels, ranks = self._ranks
        return fitted_to + _interp_uniform(np.interp(v - fitted_from, levels, ranks), self.quantiles_to)

    @functools.cached_property
    def _ranks(self) -> tuple[np.ndarray, np.ndarray]:
        return _quantile_ranks(self.quantiles_from)


@dataclass(frozen=True)
class ContinuousShift(_DeviceCached):
    """How the aux prediction v of a continuous c is distributed at each value of c, given the admissible features.

    The continuous analogue of :class:`GroupShift`: c's reference values are cut into bins; per bin, a
    linear model of v on the admissible features and the quantiles of its residuals. A person at c keeps
    their rank among people with the same c (and admissible features) when c moves to c ± 1 sd: the goal
    is the value of that rank at c ± 1 sd, so the move of v is the person's own, not one global slope
    (issue 20, item 4; our reading).

    Attributes
    ----------
    centers : ndarray of shape (B,)
        Median c of each bin, increasing (in c's own units).
    coefs : ndarray of shape (B, 1 + d_A)
        Intercept and slopes of v on the admissible features within each bin.
    quantiles : ndarray of shape (B, N_QUANTILES)
        Residual quantiles within each bin.
    sd : float
        Standard deviation of c on the reference rows (the unit of a counterfactual move).
    slope : float
        Global change of v per +1 sd of c given the admissible features (extrapolation beyond the bins).
    """

    centers: np.ndarray
    coefs: np.ndarray
    quantiles: np.ndarray
    sd: float
    slope: float

    def _position(self, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For values c (n,): lower bin index, weight of the upper bin, and c beyond the outer centers (in sd)."""
        clipped = np.clip(c, self.centers[0], self.centers[-1])
        hi = np.clip(np.searchsorted(self.centers, clipped, side="right"), 1, len(self.centers) - 1)
        lo = hi - 1
        span = self.centers[hi] - self.centers[lo]
        w = np.where(span > 0, (clipped - self.centers[lo]) / np.where(span > 0, span, 1.0), 0.0)
        return lo, w, (c - clipped) / self.sd

    def _position_t(self, c: torch.Tensor, centers: torch.Tensor):
        """:meth:`_position` in torch (c (n,) float64 and the centers on one device)."""
        clipped = c.clamp(float(self.centers[0]), float(self.centers[-1]))
        hi = torch.searchsorted(centers, clipped.contiguous(), right=True).clamp(1, len(self.centers) - 1)
        lo = hi - 1
        span = centers[hi] - centers[lo]
        w = torch.where(span > 0, (clipped - centers[lo]) / torch.where(span > 0, span, torch.ones_like(span)),
                        torch.zeros_like(span))
        return lo, w, (c - clipped) / self.sd

    def _goal_t(self, v: torch.Tensor, c: torch.Tensor, x_admissible: torch.Tensor, sign: float) -> torch.Tensor:
        """:meth:`goal` in torch on v's device (no transfer): every bin is read with masks instead of np.unique."""
        dev = v.device
        centers, coefs, quantiles, grid = self._on_device(dev, "bins", lambda: (
            _t64(self.centers, dev), _t64(self.coefs, dev), _t64(self.quantiles, dev),
            torch.linspace(0.0, 1.0, self.quantiles.shape[1], dtype=torch.float64, device=dev)))
        ranks_of = self._on_device(dev, "ranks", lambda: [tuple(_t64(a, dev) for a in _quantile_ranks(q))
                                                          for q in self.quantiles])
        design = torch.cat([torch.ones((len(v), 1), dtype=torch.float64, device=dev), x_admissible], dim=1)
        fits = design @ coefs.T                                              # (n, B)
        rows = torch.arange(len(v), device=dev)
        lo, w, _ = self._position_t(c, centers)
        fitted = (1 - w) * fits[rows, lo] + w * fits[rows, lo + 1]
        residual = v - fitted
        zero = torch.zeros_like(v)
        rank = torch.zeros_like(v)
        for b, (levels, ranks) in enumerate(ranks_of):                        # mixture of the two bins' CDFs
            at = _interp_t(residual, levels, ranks)
            rank = rank + torch.where(lo == b, (1 - w) * at, zero)
            rank = rank + torch.where(lo + 1 == b, w * at, zero)
        rank = rank.clamp(0.0, 1.0)
        lo_t, w_t, beyond = self._position_t(c + sign * self.sd, centers)
        fitted_to = (1 - w_t) * fits[rows, lo_t] + w_t * fits[rows, lo_t + 1] + beyond * self.slope
        q_lo = torch.zeros_like(v)
        q_hi = torch.zeros_like(v)
        for b in range(len(self.centers) - 1):
            sel = lo_t == b
            q_lo = torch.where(sel, _interp_t(rank, grid, quantiles[b]), q_lo)
            q_hi = torch.where(sel, _interp_t(rank, grid, quantiles[b + 1]), q_hi)
        return fitted_to + (1 - w_t) * q_lo + w_t * q_hi

    def goal(self, v: np.ndarray, c: np.ndarray, x_admissible: np.ndarray, sign: float) -> np.ndarray:
        """The matched value of v at c + sign·sd for rows at c: (n,), (n,), (n, d_A) -> (n,).

        float64 Tensors in (on any device): the same in torch on that device (:meth:`_goal_t`).
        """
        if isinstance(v, torch.Tensor):
            return self._goal_t(v, c, x_admissible, sign)
        grid = np.linspace(0.0, 1.0, self.quantiles.shape[1])
        design = np.column_stack([np.ones(len(v)), x_admissible])            # (n, 1 + d_A)
        fits = design @ self.coefs.T                                         # (n, B)
        rows = np.arange(len(v))
        lo, w, _ = self._position(c)
        fitted = (1 - w) * fits[rows, lo] + w * fits[rows, lo + 1]
        residual = v - fitted
        rank = np.zeros(len(v))
        for b in np.unique(np.concatenate([lo, lo + 1])):                    # mixture of the two bins' CDFs
            levels, ranks = _quantile_ranks(self.quantiles[b])
            below, above = lo == b, lo + 1 == b
            rank[below] += (1 - w[below]) * np.interp(residual[below], levels, ranks)
            rank[above] += w[above] * np.interp(residual[above], levels, ranks)
        rank = np.clip(rank, 0.0, 1.0)
        lo_t, w_t, beyond = self._position(c + sign * self.sd)
        fitted_to = (1 - w_t) * fits[rows, lo_t] + w_t * fits[rows, lo_t + 1] + beyond * self.slope
        q_lo = np.empty(len(v))
        q_hi = np.empty(len(v))
        for b in np.unique(lo_t):
            sel = lo_t == b
            q_lo[sel] = np.interp(rank[sel], grid, self.quantiles[b])
            q_hi[sel] = np.interp(rank[sel], grid, self.quantiles[b + 1])
        return fitted_to + (1 - w_t) * q_lo + w_t * q_hi


def _pair_fit_coefficients(shifts, held: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """One group pair's matched-feature fits as one product: ``(slopes, intercepts)``, slopes (d, 2 d_m) float32
    with the held features' rows filled from each shift's ``coef_from`` / ``coef_to`` (columns 2k, 2k+1), intercepts
    (2 d_m,) float64; ``x @ slopes + intercepts`` are the fitted values both paths of :meth:`FeatureMatching.values`
    read (the numpy path on the host, the torch path on the chunk's device)."""
    coef = np.stack([c for s in shifts for c in (s.coef_from, s.coef_to)], axis=1)   # (1 + d_A, 2 d_m)
    slopes = np.zeros((d, coef.shape[1]), dtype=np.float32)
    slopes[held] = coef[1:]
    return slopes, coef[0]


@dataclass(frozen=True)
class FeatureMatching(_DeviceCached):
    """The matched value of each free numeric feature in the other group (``swap_metric = "matched"``).

    A person keeps their rank: feature j takes the value of the person's rank in the other group among people
    with the same held features (a per-group ridge regression of x_j on the held features and quantile matching
    of its residuals: :class:`GroupShift` applied to x_j instead of the aux output; a continuous c:
    :class:`ContinuousShift` at c ± 1 sd). A feature distributed alike in both groups maps to itself. Our reading
    (issue 20; evidence in docs/benchmark.md): the move follows what c does to each feature, person by person,
    instead of the auxiliary model's gradient.

    Attributes
    ----------
    positions : ndarray of shape (d_m,), int64
        The matched features' positions in the aux input space.
    shifts : dict of (a, b) -> tuple of GroupShift
        One per position, for every ordered pair of groups.
    continuous : tuple of (ContinuousShift or None)
        One per position, for a continuous c (None where c has too few rows for bins).
    slopes : tuple of float
        Continuous c: each feature's change per +1 sd of c given the held features (where there are no bins).
    """

    positions: np.ndarray
    shifts: dict = field(default_factory=dict)
    continuous: tuple = ()
    slopes: tuple = ()

    def values(self, x_aux, held: np.ndarray, a=None, b=None, c_values=None, sign: float = 1.0) -> np.ndarray:
        """(n, d_m) matched values of rows x_aux (n, d_aux; Tensor or array), groups a → b (or c ± sd).

        ``held`` (d_aux,) bool: the held features the regressions read. The fits come from one float32 product
        of the rows with coefficients that are zero outside the held features (no (n, d_A) float64 copy); the
        quantile matching is in float64.

        A Tensor on a non-CPU device (or any Tensor with :data:`_FORCE_TORCH`): :meth:`_values_t`, the same in
        torch, returning an (n, d_m) float64 Tensor on that device.
        """
        x_t = torch.as_tensor(x_aux, dtype=torch.float32)
        if _torch_path(x_t):
            return self._values_t(x_t, held, a, b, c_values, sign)
        x = host(x_t[:, torch.as_tensor(self.positions, device=x_t.device)].double())   # (n, d_m)
        out = np.empty_like(x)
        if not len(self.positions):                                            # every free feature is one-hot
            return out
        held = np.asarray(held, dtype=bool)
        if self.continuous:
            x_held = host(x_t[:, torch.as_tensor(held, device=x_t.device)].double())
            for k, shift in enumerate(self.continuous):
                out[:, k] = x[:, k] + sign * self.slopes[k] if shift is None else shift.goal(x[:, k], c_values, x_held, sign)
            return out
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        for ga in np.unique(a):
            for gb in np.unique(b[a == ga]):
                sel = (a == ga) & (b == gb)
                shifts = self.shifts[(int(ga), int(gb))]
                slopes, intercepts = _pair_fit_coefficients(shifts, held, x_t.shape[1])
                rows = x_t if sel.all() else x_t[torch.as_tensor(sel, device=x_t.device)]
                fits = host((rows @ torch.from_numpy(slopes).to(x_t.device)).double()) + intercepts   # (n_sel, 2 d_m)
                xs = x if sel.all() else x[sel]
                for k, shift in enumerate(shifts):
                    value = shift.goal_from_fits(xs[:, k], fits[:, 2 * k], fits[:, 2 * k + 1])
                    if sel.all():
                        out[:, k] = value
                    else:
                        out[sel, k] = value
        return out

    def _values_t(self, x_t: torch.Tensor, held: np.ndarray, a=None, b=None, c_values=None,
                  sign: float = 1.0) -> torch.Tensor:
        """:meth:`values` on x_t's device, without a transfer to the host: (n, d_aux) float32 -> (n, d_m) float64.

        The groups a, b (ndarrays, the chunk's inputs) choose the rows on the host; the fits and the quantile
        matching are torch ops on the device (:meth:`GroupShift.goal_from_fits`, :meth:`ContinuousShift.goal`
        on Tensors); the coefficients are copied to the device once per pair and kept.
        """
        dev = x_t.device
        x = x_t[:, torch.as_tensor(self.positions, device=dev)].double()          # (n, d_m)
        out = torch.empty_like(x)
        if not len(self.positions):
            return out
        held = np.asarray(held, dtype=bool)
        if self.continuous:
            x_held = x_t[:, torch.as_tensor(held, device=dev)].double()
            c_t = _t64(c_values, dev)
            for k, shift in enumerate(self.continuous):
                out[:, k] = x[:, k] + sign * self.slopes[k] if shift is None else shift.goal(x[:, k], c_t, x_held, sign)
            return out
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        for ga in np.unique(a):
            for gb in np.unique(b[a == ga]):
                sel = (a == ga) & (b == gb)
                shifts = self.shifts[(int(ga), int(gb))]

                def build(shifts=shifts):                                       # called at once; bound: B023
                    slopes, intercepts = _pair_fit_coefficients(shifts, held, x_t.shape[1])
                    return torch.from_numpy(slopes).to(dev), _t64(intercepts, dev)

                slopes_t, intercepts = self._on_device(dev, (int(ga), int(gb), held.tobytes()), build)
                sel_t = None if sel.all() else torch.as_tensor(sel, device=dev)
                rows = x_t if sel_t is None else x_t[sel_t]
                fits = (rows @ slopes_t).double() + intercepts                  # (n_sel, 2 d_m)
                xs = x if sel_t is None else x[sel_t]
                for k, shift in enumerate(shifts):
                    value = shift.goal_from_fits(xs[:, k], fits[:, 2 * k], fits[:, 2 * k + 1])
                    if sel_t is None:
                        out[:, k] = value
                    else:
                        out[sel_t, k] = value
        return out

    def to_dict(self) -> dict:
        shift = lambda s: [s.coef_from.tolist(), s.coef_to.tolist(), s.quantiles_from.tolist(), s.quantiles_to.tolist()]  # noqa: E731
        cont = lambda s: {"centers": s.centers.tolist(), "coefs": s.coefs.tolist(),  # noqa: E731
                          "quantiles": s.quantiles.tolist(), "sd": s.sd, "slope": s.slope}
        return {"positions": self.positions.tolist(),
                "shifts": [[a, b, [shift(s) for s in ss]] for (a, b), ss in sorted(self.shifts.items())],
                "continuous": [None if s is None else cont(s) for s in self.continuous], "slopes": list(self.slopes)}

    @classmethod
    def from_dict(cls, payload: dict) -> "FeatureMatching":
        arr = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
        shifts = {(int(a), int(b)): tuple(GroupShift(*(arr(x) for x in s)) for s in ss) for a, b, ss in payload["shifts"]}
        cont = tuple(None if s is None else ContinuousShift(centers=arr(s["centers"]), coefs=arr(s["coefs"]),
                                                            quantiles=arr(s["quantiles"]), sd=float(s["sd"]),
                                                            slope=float(s["slope"]))
                     for s in payload.get("continuous", []))
        return cls(positions=np.asarray(payload["positions"], dtype=np.int64), shifts=shifts, continuous=cont,
                   slopes=tuple(float(x) for x in payload.get("slopes", [])))


#: Bins of a continuous c for :class:`ContinuousShift`: at most this many, and at least MIN_BIN_ROWS rows each.
N_BINS = 10
MIN_BIN_ROWS = 200


@dataclass(frozen=True)
class SwapReference:
    """What the swap reading learns once from reference rows (:func:`fit_swap_reference`).

    Attributes
    ----------
    kind : {"binary", "multiclass", "continuous"}
    n_groups : int
        m groups (0 for continuous).
    metric : ndarray of shape (d, d)
        :func:`covariance_metric` (total, explained or within), the variances only, or the identity
        (eq. 7–8 as printed).
    admissible : ndarray of shape (d,), bool
        Features the move holds fixed (declared and uninformative).
    shifts : dict of (a, b) -> GroupShift
        For every ordered pair of groups (binary and multi-class).
    slope : float
        Continuous c: change of the aux output per +1 standard deviation of c, given the admissible
        features (NaN otherwise).
    continuous : ContinuousShift or None
        Continuous c: the rank matching at each value of c (None: the global ``slope`` for everyone).
    floors : dict of (a, b) -> float
        The guard of the move's denominator per pair ((−1, −1) for continuous c): Δx = M a Δv / (aᵀMa + floor)
        (:func:`swap_displacement`); empty = no guard.
    metric_name : str
        How ``metric`` was formed (provenance).
    levels : tuple of LevelModel
        ``swap_categorical = "coupled"`` (or ``metric = "matched"``): the level model of each free one-hot group
        (:mod:`faux_checks.method.levels`); empty otherwise.
    matching : FeatureMatching or None
        ``metric = "matched"``: the matched value of each free numeric feature.
    """

    kind: str
    n_groups: int
    metric: np.ndarray
    admissible: np.ndarray
    shifts: dict = field(default_factory=dict)
    slope: float = float("nan")
    continuous: ContinuousShift | None = None
    floors: dict = field(default_factory=dict)
    metric_name: str = "covariance"
    levels: tuple = ()
    matching: FeatureMatching | None = None

    @property
    def n_targets(self) -> int:
        """Counterfactuals per individual: m − 1 other groups, or ±1 sd for continuous c."""
        return 2 if self.kind == "continuous" else self.n_groups - 1

    @property
    def nothing_free(self) -> bool:
        """Every feature is held (declared or uninformative): the move is zero and every score is 0 by definition."""
        return bool(self.admissible.all())

    def floor(self, a: int, b: int) -> float:
        """The guard for the pair (a, b) (continuous c: any pair), 0.0 when none was fitted."""
        return float(self.floors.get((a, b), self.floors.get((-1, -1), 0.0)))

    def to_dict(self) -> dict:
        """JSON-serialisable form (lists), for sharing with workers."""
        cont = self.continuous
        return {
            "kind": self.kind, "n_groups": self.n_groups, "metric": self.metric.tolist(),
            "admissible": self.admissible.tolist(), "slope": None if np.isnan(self.slope) else self.slope,
            "shifts": [[a, b, s.coef_from.tolist(), s.coef_to.tolist(), s.quantiles_from.tolist(),
                        s.quantiles_to.tolist()] for (a, b), s in sorted(self.shifts.items())],
            "continuous": None if cont is None else {
                "centers": cont.centers.tolist(), "coefs": cont.coefs.tolist(), "quantiles": cont.quantiles.tolist(),
                "sd": cont.sd, "slope": cont.slope},
            "floors": [[a, b, f] for (a, b), f in sorted(self.floors.items())],
            "metric_name": self.metric_name,
            "levels": [lm.to_dict() for lm in self.levels],
            "matching": None if self.matching is None else self.matching.to_dict(),
        }

    @classmethod
    def from_dict(cls, payload: dict) -> "SwapReference":
        """Inverse of :meth:`to_dict`."""
        shifts = {(int(a), int(b)): GroupShift(*(np.asarray(x, dtype=np.float64) for x in rest))
                  for a, b, *rest in payload["shifts"]}
        slope = payload.get("slope")
        cont = payload.get("continuous")
        continuous = None if cont is None else ContinuousShift(
            centers=np.asarray(cont["centers"], dtype=np.float64), coefs=np.asarray(cont["coefs"], dtype=np.float64),
            quantiles=np.asarray(cont["quantiles"], dtype=np.float64), sd=float(cont["sd"]), slope=float(cont["slope"]))
        return cls(kind=payload["kind"], n_groups=int(payload["n_groups"]),
                   metric=np.asarray(payload["metric"], dtype=np.float64),
                   admissible=np.asarray(payload["admissible"], dtype=bool), shifts=shifts,
                   slope=float("nan") if slope is None else float(slope), continuous=continuous,
                   floors={(int(a), int(b)): float(f) for a, b, f in payload.get("floors", [])},
                   metric_name=payload.get("metric_name", "covariance"),
                   levels=tuple(LevelModel.from_dict(x) for x in payload.get("levels", [])),
                   matching=None if payload.get("matching") is None else FeatureMatching.from_dict(payload["matching"]))


def _ridge_fit(design: np.ndarray, y: np.ndarray) -> np.ndarray:
    n = len(design)
    penalty = RIDGE * n * np.eye(design.shape[1])
    penalty[0, 0] = 0.0                                                  # no penalty on the intercept
    return np.linalg.solve(design.T @ design + penalty, design.T @ y)


METRICS = ("matched", "covariance", "explained", "between", "within", "diagonal", "euclidean")


def _continuous_shift(v: np.ndarray, XA: np.ndarray, c: np.ndarray, slope: float, sd: float) -> ContinuousShift | None:
    n_bins = min(N_BINS, len(c) // MIN_BIN_ROWS)
    if n_bins < 2:
        return None
    edges = np.quantile(c, np.linspace(0.0, 1.0, n_bins + 1))
    which = np.clip(np.searchsorted(edges, c, side="right") - 1, 0, n_bins - 1)
    grid = np.linspace(0.0, 1.0, N_QUANTILES)
    centers, coefs, quantiles = [], [], []
    for b in range(n_bins):
        rows = which == b
        if rows.sum() < 2:
            return None
        design = np.column_stack([np.ones(int(rows.sum())), XA[rows]])
        coef = _ridge_fit(design, v[rows])
        centers.append(float(np.median(c[rows])))
        coefs.append(coef)
        quantiles.append(np.quantile(v[rows] - design @ coef, grid))
    centers = np.asarray(centers)
    if not (np.diff(centers) > 0).all():
        return None
    return ContinuousShift(centers=centers, coefs=np.asarray(coefs), quantiles=np.asarray(quantiles), sd=sd, slope=slope)


def fit_swap_reference(raw_ref, X_ref, c_ref, *, kind: Kind, admissible=None, metric: str = "covariance",
                       continuous_matching: Literal["rank", "slope"] = "rank", matched=None) -> SwapReference:
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
    metric : {"covariance", "explained", "within", "diagonal", "euclidean"}
        The move's metric: :func:`covariance_metric` with part "total" (``"covariance"``), "explained" or
        "within"; the features' variances only (eq. 7–8 in standardised units, no correlations); or the
        identity (eq. 7–8 as printed). Admissible rows and columns are zero in every metric.
    continuous_matching : {"rank", "slope"}
        Continuous c: match each person's rank at c ± 1 sd (:class:`ContinuousShift`) or move everyone's
        aux output by one global regression slope (the reading before issue 20).
    matched : bool array of shape (d,), optional
        ``metric = "matched"``: the features moved to their own matched value (:class:`FeatureMatching`), the free
        numeric ones; the metric is then "between" (kept for the shapes and the guard, not used by the move).

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
    if metric == "matched" and matched is None:
        raise InputError("metric 'matched' needs the features to match (matched=...)")
    if metric == "covariance":
        M = covariance_metric(X, admissible=A)
    elif metric == "matched":
        M = covariance_metric(X, admissible=A, c=c, kind=kind, part="between")
    elif metric in ("explained", "between", "within"):
        M = covariance_metric(X, admissible=A, c=c, kind=kind, part=metric)
    elif metric == "diagonal":
        M = np.diag(np.where(A, 0.0, X.var(axis=0)))
    elif metric == "euclidean":
        M = np.diag((~A).astype(np.float64))
    else:
        raise InputError(f"metric must be one of {list(METRICS)}, got {metric!r}")
    XA = X[:, A]
    if kind == "continuous":
        sd = float(np.std(c))
        if not sd > 0:
            raise InputError("the continuous protected attribute is constant on the reference rows")
        design = np.column_stack([np.ones(len(c)), XA, (c - c.mean()) / sd])
        slope = float(_ridge_fit(design, raw[:, 0])[-1])
        cont = _continuous_shift(raw[:, 0], XA, c.astype(np.float64), slope, sd) if continuous_matching == "rank" else None
        matching = (None if matched is None
                    else _feature_matching(X, XA, c.astype(np.float64), kind, np.asarray(matched, dtype=bool), 0))
        return SwapReference(kind=kind, n_groups=0, metric=M, admissible=A, slope=slope, continuous=cont,
                             metric_name=metric, matching=matching)
    m = 2 if raw.shape[1] == 1 else raw.shape[1]
    c = c.astype(np.int64)
    counts = np.bincount(c, minlength=m)
    if (counts < 2).any():
        raise InputError(f"every protected group needs at least 2 reference rows for the swap reading; "
                         f"counts {counts.tolist()}")
    z = np.concatenate([np.zeros((len(raw), 1)), raw], axis=1) if raw.shape[1] == 1 else raw
    shifts = {(a, b): _group_shift(z[:, b] - z[:, a], XA, c, a, b) for a in range(m) for b in range(m) if a != b}
    matching = None if matched is None else _feature_matching(X, XA, c, kind, np.asarray(matched, dtype=bool), m)
    return SwapReference(kind=kind, n_groups=m, metric=M, admissible=A, shifts=shifts, metric_name=metric,
                         matching=matching)


def _group_shift(y: np.ndarray, XA: np.ndarray, c: np.ndarray, a: int, b: int) -> GroupShift:
    """The per-group ridge regression of y on the held features and its residual quantiles, for groups a and b."""
    grid = np.linspace(0.0, 1.0, N_QUANTILES)
    parts = []
    for g in (a, b):
        rows = c == g
        design = np.column_stack([np.ones(int(rows.sum())), XA[rows]])
        coef = _ridge_fit(design, y[rows])
        parts.append((coef, np.quantile(y[rows] - design @ coef, grid)))
    return GroupShift(parts[0][0], parts[1][0], parts[0][1], parts[1][1])


def _feature_matching(X: np.ndarray, XA: np.ndarray, c: np.ndarray, kind: str, moving: np.ndarray,
                      m: int) -> "FeatureMatching":
    positions = np.flatnonzero(moving)
    if kind == "continuous":
        sd = float(np.std(c))
        z = (c - c.mean()) / sd
        design = np.column_stack([np.ones(len(c)), XA, z])
        per, slopes = [], []
        for j in positions:
            slope = float(_ridge_fit(design, X[:, j])[-1])
            per.append(_continuous_shift(X[:, j], XA, c.astype(np.float64), slope, sd))
            slopes.append(slope)
        return FeatureMatching(positions=positions, continuous=tuple(per), slopes=tuple(slopes))
    shifts = {(a, b): tuple(_group_shift(X[:, j], XA, c, a, b) for j in positions)
              for a in range(m) for b in range(m) if a != b}
    return FeatureMatching(positions=positions, shifts=shifts)


#: A feature group counts as dependent on c when its chi-square test of independence from c has a p-value below this.
INDEPENDENCE_ALPHA = 0.01
#: Quantile bins of a numeric feature (and of a continuous c) in that test.
INDEPENDENCE_BINS = 10


def _bins(values: np.ndarray, n_bins: int) -> np.ndarray:
    """Quantile-bin index (n,) of a numeric vector; a column with few distinct values keeps them as its bins."""
    distinct = np.unique(values)
    if len(distinct) <= n_bins:
        return np.searchsorted(distinct, values)
    edges = np.unique(np.quantile(values, np.linspace(0, 1, n_bins + 1)[1:-1]))
    return np.searchsorted(edges, values, side="right")


def independent_features(X_ref, c_ref, *, kind: Kind, groups, alpha: float = INDEPENDENCE_ALPHA
                         ) -> tuple[np.ndarray, list[dict]]:
    """Feature groups whose distribution does not depend on c: a chi-square test of independence per group.

    The counterfactual moves only what the protected attribute moves (issue 20). A feature whose
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
    for idx in groups:
        idx = np.asarray(idx, dtype=np.int64)
        block = X[:, idx]
        level = block.argmax(axis=1) if len(idx) > 1 else _bins(block[:, 0], INDEPENDENCE_BINS)
        _, li = np.unique(level, return_inverse=True)
        _, ci = np.unique(c_bins, return_inverse=True)
        counts = np.zeros((li.max() + 1, ci.max() + 1))
        np.add.at(counts, (li, ci), 1.0)
        counts = counts[counts.sum(axis=1) > 0][:, counts.sum(axis=0) > 0]
        if counts.shape[0] < 2 or counts.shape[1] < 2:
            chi2, dof, p = 0.0, 0, 1.0
        else:
            chi2, p, dof, _ = chi2_contingency(counts, correction=False)
        dependent = bool(p < alpha)
        mask[idx] = not dependent
        table.append({"features": idx.tolist(), "chi2": float(chi2), "dof": int(dof), "p_value": float(p),
                      "dependent": dependent})
    return mask, table


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


def swap_displacement(grad: torch.Tensor, metric: torch.Tensor, delta: torch.Tensor,
                      floor: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The minimum-norm move ``Δx = M a · Δv / (aᵀ M a + floor)`` that changes the aux output by Δv (first order).

    Parameters
    ----------
    grad : Tensor of shape (n, d)
        a = ∇ₓ v, the gradient of the aux log-odds (or prediction) being moved; float32 or float64.
    metric : Tensor of shape (d, d), symmetric positive semi-definite
    delta : Tensor of shape (n,)
        Δv, the change of the aux output to make.
    floor : float or Tensor of shape (n,)
        The guard (≥ 0, squared aux-output units): with it, a row whose gradient has almost no component the
        metric can move gets a move bounded by |Δv| / (2 √floor) in the metric's norm instead of an
        unbounded one (the posterior mean of Δx under the prior N(0, M) given aᵀΔx = Δv observed with variance
        ``floor``; our reading, issue 20). 0: eq. 7–8's exact solve.

    Returns
    -------
    dx : Tensor of shape (n, d), in grad's dtype
        Zero where undefined. The product M a is formed in grad's dtype (a float32 gradient from autograd
        gives a float32 move, the precision x′ is stored in, and its norm aᵀMa); Δv / aᵀMa is in float64.
    undefined : Tensor of shape (n,), bool
        Rows with non-finite values, or whose gradient has no component the metric can move (aᵀMa ≈ 0: the
        auxiliary model says nothing along the directions c moves x; fail closed, guard or not).

    Notes
    -----
    Our reading of fAux eq. 7–8 in the metric M (module docstring); M = I gives ``a Δv / ‖a‖²``,
    eq. 9's direction times Δv.
    """
    g = grad if grad.dtype in (torch.float32, torch.float64) else grad.double()
    Mg = g @ metric.to(g.dtype)                                              # (n, d)
    norm2 = (Mg * g).sum(dim=1).double()                                     # (n,)
    delta = delta.double()
    floor = torch.as_tensor(floor, dtype=torch.float64, device=delta.device)
    undefined = ~(torch.isfinite(norm2) & torch.isfinite(delta)) | (norm2 <= ZERO_NORM2)
    scale = delta / (norm2 + floor)                                                    # (n,): inf/NaN only where undefined
    if _torch_path(g) or bool(undefined.any()):                             # on a device: no sync, where() always
        scale = torch.where(undefined, torch.zeros((), dtype=torch.float64, device=g.device), scale)
        Mg = torch.where(undefined[:, None], torch.zeros((), dtype=g.dtype, device=g.device), Mg)
    dx = Mg.mul_(scale.to(g.dtype)[:, None])                                 # Mg is the matmul's own output
    return dx, undefined
