"""1-D optimal transport by quantiles: np.interp on quantile grids, and the same in torch (np.interp semantics).

The numpy helpers are the CPU path of the swap reading's matched quantiles (the pinned scores); the ``*_t``
helpers are their torch counterparts for a chunk on a device (tests/method/test_swap_torch_path.py holds them equal).
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["matched_quantile"]


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
    pos: np.ndarray = r * (len(q) - 1)
    i = np.minimum(pos.astype(np.int64), len(q) - 2)
    return q[i] + (pos - i) * (q[i + 1] - q[i])


def _quantile_ranks(q_from: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct quantile values and their mean rank on the probability grid (ties share their mean rank)."""
    grid = np.linspace(0.0, 1.0, len(q_from))
    levels, inverse = np.unique(q_from, return_inverse=True)
    return levels, np.bincount(inverse, weights=grid) / np.bincount(inverse)


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
    tensors it equals np.interp (tests/method/test_swap_torch_path.py).
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
