"""How a quantity is distributed in each group given the admissible features: per-group ridge fits and the
quantiles of their residuals (:class:`GroupShift`; a continuous c: per bin of c, :class:`ContinuousShift`).

The swap reading fits them on the aux log-odds (eq. 6, Δc: how far the aux output moves,
:func:`faux_checks.method.swap.fit_swap_reference`) and on each matched feature
(:class:`faux_checks.method.matching.FeatureMatching`); ``goal`` reads a person's rank in one group and
returns the value of that rank in the other, with numpy on the CPU and torch on a device.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from .quantiles import (PiecewiseTables, interp_t, interp_uniform, interp_uniform_t, quantile_ranks,
                        composite_knots, interp_uniform_rows)
from .torch_path import DeviceCached, t64

__all__ = ["continuous_shift", "ContinuousShift", "ContinuousStack", "group_shift", "GroupShift", "MIN_BIN_ROWS",
           "N_BINS", "N_QUANTILES", "RIDGE", "ridge_fit"]


#: Quantiles kept per group and pair for the 1-D optimal transport (1,001: 0.1% resolution).
N_QUANTILES = 1001
#: Ridge of the per-group linear models of v on the admissible features (relative to the row count).
RIDGE = 1e-3


@dataclass(frozen=True)
class GroupShift(DeviceCached):
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
            coef_from, coef_to = (t64(c, v.device) for c in (self.coef_from, self.coef_to))
            return self.goal_from_fits(v, coef_from[0] + x_admissible @ coef_from[1:],
                                       coef_to[0] + x_admissible @ coef_to[1:])
        fitted_from = self.coef_from[0] + x_admissible @ self.coef_from[1:]
        fitted_to = self.coef_to[0] + x_admissible @ self.coef_to[1:]
        return self.goal_from_fits(v, fitted_from, fitted_to)

    def goal_from_fits(self, v: np.ndarray, fitted_from: np.ndarray, fitted_to: np.ndarray) -> np.ndarray:
        """:meth:`goal` given the two linear models' fitted values for the rows, (n,) each -> (n,).

        ndarrays in: numpy (np.interp). float64 Tensors in: the same on their device (:func:`~faux_checks.method.quantiles.interp_t`,
        :func:`~faux_checks.method.quantiles.interp_uniform_t`; the quantiles are copied to the device once and kept).
        """
        if isinstance(v, torch.Tensor):
            levels, ranks, q_to = self._on_device(v.device, "ranks", lambda: tuple(
                t64(a, v.device) for a in (*self._ranks, self.quantiles_to)))
            return fitted_to + interp_uniform_t(interp_t(v - fitted_from, levels, ranks), q_to)
        levels, ranks = self._ranks
        return fitted_to + interp_uniform(np.interp(v - fitted_from, levels, ranks), self.quantiles_to)

    @functools.cached_property
    def _ranks(self) -> tuple[np.ndarray, np.ndarray]:
        return quantile_ranks(self.quantiles_from)

    def composite(self) -> tuple[np.ndarray, np.ndarray]:
        """(knots, values): ``y ↦ goal_from_fits(y + h_from, h_from + coef_from[0], h_to + coef_to[0]) − h_to`` as one
        piecewise-linear function of y = v − h_from (:func:`~faux_checks.method.quantiles.composite_knots`; h the
        fits' slope parts): the intercepts are folded into its knots and values."""
        return composite_knots(self.quantiles_from, self.quantiles_to, float(self.coef_from[0]), float(self.coef_to[0]))


@dataclass(frozen=True)
class ContinuousShift(DeviceCached):
    """How the aux prediction v of a continuous c is distributed at each value of c, given the admissible features.

    The continuous analogue of :class:`GroupShift`: c's reference values are cut into bins; per bin, a
    linear model of v on the admissible features and the quantiles of its residuals. A person at c keeps
    their rank among people with the same c (and admissible features) when c moves to c ± 1 sd: the goal
    is the value of that rank at c ± 1 sd, so the move of v is the person's own, not one global slope
    (our reading).

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
        """:meth:`goal` in torch on v's device (no transfer): :class:`ContinuousStack` of this one shift."""
        stack = self._on_device(v.device, "stack", lambda: ContinuousStack([self], v.device))
        return stack.goal(v[:, None], c, x_admissible, sign)[:, 0]

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
            levels, ranks = quantile_ranks(self.quantiles[b])
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


#: Bins of a continuous c for :class:`ContinuousShift`: at most this many, and at least MIN_BIN_ROWS rows each.
N_BINS = 10
MIN_BIN_ROWS = 200


def ridge_fit(design: np.ndarray, y: np.ndarray) -> np.ndarray:
    n = len(design)
    penalty = RIDGE * n * np.eye(design.shape[1])
    penalty[0, 0] = 0.0                                                  # no penalty on the intercept
    return np.linalg.solve(design.T @ design + penalty, design.T @ y)


def continuous_shift(v: np.ndarray, XA: np.ndarray, c: np.ndarray, slope: float, sd: float) -> ContinuousShift | None:
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
        coef = ridge_fit(design, v[rows])
        centers.append(float(np.median(c[rows])))
        coefs.append(coef)
        quantiles.append(np.quantile(v[rows] - design @ coef, grid))
    centers = np.asarray(centers)
    if not (np.diff(centers) > 0).all():
        return None
    return ContinuousShift(centers=centers, coefs=np.asarray(coefs), quantiles=np.asarray(quantiles), sd=sd, slope=slope)


def group_shift(y: np.ndarray, XA: np.ndarray, c: np.ndarray, a: int, b: int) -> GroupShift:
    """The per-group ridge regression of y on the held features and its residual quantiles, for groups a and b."""
    grid = np.linspace(0.0, 1.0, N_QUANTILES)
    parts = []
    for g in (a, b):
        rows = c == g
        design = np.column_stack([np.ones(int(rows.sum())), XA[rows]])
        coef = ridge_fit(design, y[rows])
        parts.append((coef, np.quantile(y[rows] - design @ coef, grid)))
    return GroupShift(parts[0][0], parts[1][0], parts[0][1], parts[1][1])


class ContinuousStack:
    """m :class:`ContinuousShift` that share their bins (one per matched feature, or the aux output's one), read
    at once on a device: one bin search per row, one rank search and one quantile interpolation for the (b, m)
    block (:class:`~faux_checks.method.quantiles.PiecewiseTables`), O(1) torch ops in m and in the bins.

    Raises
    ------
    ValueError
        The shifts' bin centers differ (they come from the same c, so they do not).
    """

    def __init__(self, shifts, device):
        first = shifts[0]
        if any(not np.array_equal(s.centers, first.centers) for s in shifts):
            raise ValueError("ContinuousStack needs shifts with the same bins")
        self.first, self.device = first, device
        self.n_bins = len(first.centers)
        ranks = [quantile_ranks(q) for s in shifts for q in s.quantiles]          # table f·B + bin
        ranges = np.array([[lv[0], lv[-1]] for lv, _ in ranks])
        self.tables = PiecewiseTables([lv for lv, _ in ranks], [r for _, r in ranks], ranges, device)
        coefs = np.stack([s.coefs for s in shifts])                                 # (m, B, 1 + d_A)
        self.intercepts = t64(coefs[:, :, 0].ravel(), device)                       # (m·B,)
        self.weights = t64(coefs[:, :, 1:].reshape(len(shifts) * self.n_bins, -1).T, device)   # (d_A, m·B)
        self.quantiles = t64(np.concatenate([s.quantiles for s in shifts]), device)   # (m·B, Q)
        self.slope = t64([s.slope for s in shifts], device)
        self.centers = t64(first.centers, device)
        self.offsets = torch.arange(len(shifts), device=device) * self.n_bins        # (m,)

    def _fitted(self, fits: torch.Tensor | None, at: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """The bin-interpolated linear fit per (row, feature): at (b, m) the lower bin's table, w (b, 1)."""
        if fits is None:
            lo, hi = self.intercepts.take(at), self.intercepts.take(at + 1)
        else:
            rows = (torch.arange(fits.shape[0], device=fits.device) * fits.shape[1])[:, None]
            lo, hi = fits.take(at + rows), fits.take(at + 1 + rows)
        return torch.lerp(lo, hi, w)

    def goal(self, v: torch.Tensor, c: torch.Tensor, x_admissible: torch.Tensor | None, sign: float) -> torch.Tensor:
        """:meth:`ContinuousShift.goal` of every column: v (b, m) float64, c (b,), x_admissible (b, d_A) float64 or
        None -> (b, m) float64 on v's device."""
        fits = None
        if x_admissible is not None and x_admissible.shape[1]:
            fits = x_admissible @ self.weights + self.intercepts                      # (b, m·B)
        lo, w, _ = self.first._position_t(c, self.centers)
        at, w = lo[:, None] + self.offsets, w[:, None]
        residual = v - self._fitted(fits, at, w)
        rank = torch.lerp(self.tables(residual, at), self.tables(residual, at + 1), w).clamp_(0.0, 1.0)
        lo_t, w_t, beyond = self.first._position_t(c + sign * self.first.sd, self.centers)
        at_t, w_t = lo_t[:, None] + self.offsets, w_t[:, None]
        fitted_to = self._fitted(fits, at_t, w_t).addcmul_(beyond[:, None], self.slope)
        q = torch.lerp(interp_uniform_rows(rank, self.quantiles, at_t), interp_uniform_rows(rank, self.quantiles, at_t + 1), w_t)
        return fitted_to.add_(q)
