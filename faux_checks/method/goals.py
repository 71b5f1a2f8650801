"""How far the swap reading moves the aux output (eq. 6, Δc): the matched aux value of each row of a chunk,
from the reference's group shifts, with numpy on the CPU (:func:`matched_goals`) and torch on a device (:func:`_goals_t`).
"""

from __future__ import annotations

import numpy as np
import torch

from .._device import host
from .swap import SwapReference

__all__ = ["matched_goals"]


def matched_goals(reference: SwapReference, v: np.ndarray, x_aux: torch.Tensor | None, a: np.ndarray, b: np.ndarray,
           sign: float, c_values: np.ndarray | None = None) -> np.ndarray:
    """The matched aux value of each row (:meth:`~faux_checks.method.shifts.GroupShift.goal`).

    ``x_aux`` (n, d_aux) float32: the rows in the aux input space (None without admissible features). The
    linear fits of every group pair come from one float32 product with coefficients that are zero on the
    free features (no (n, d_A) gather of the admissible columns, no float64 copy of the rows); the fits
    then enter the float64 quantile matching.

    ``v`` a float64 Tensor (the torch path, :func:`~faux_checks.method.torch_path.torch_path`): :func:`_goals_t`,
    the same on v's device, returning a Tensor there.
    """
    if isinstance(v, torch.Tensor):
        return _goals_t(reference, v, x_aux, a, b, sign, c_values)
    if reference.kind == "continuous":
        if reference.continuous is None or c_values is None:
            return v + sign * reference.slope
        xa = (np.zeros((len(v), 0)) if x_aux is None
              else host(x_aux[:, torch.as_tensor(reference.admissible, device=x_aux.device)].double()))
        return reference.continuous.goal(v, np.asarray(c_values, dtype=np.float64), xa, sign)
    present = [(ga, np.flatnonzero(a == ga)) for ga in range(reference.n_groups)]
    present = [(ga, rows) for ga, rows in present if len(rows)]
    shifts = [reference.shifts[(ga, int(b[rows[0]]))] for ga, rows in present]
    coef = np.stack([c for s in shifts for c in (s.coef_from, s.coef_to)], axis=1)   # (1 + d_A, 2 * groups)
    if x_aux is None:
        fitted = np.broadcast_to(coef[0], (len(v), coef.shape[1]))
    else:
        slopes = np.zeros((x_aux.shape[1], coef.shape[1]), dtype=np.float32)
        slopes[reference.admissible] = coef[1:]
        fitted = host(x_aux @ torch.from_numpy(slopes).to(x_aux.device)) + coef[0]   # (n, 2 * groups) float64
    if len(present) == 1:                                                           # one group in this chunk: no gathers
        return shifts[0].goal_from_fits(v, fitted[:, 0], fitted[:, 1])
    out = np.empty_like(v)
    for i, ((_ga, rows), shift) in enumerate(zip(present, shifts, strict=True)):   # shifts is built from present
        out[rows] = shift.goal_from_fits(v[rows], fitted[rows, 2 * i], fitted[rows, 2 * i + 1])
    return out


def _goals_t(reference: SwapReference, v: torch.Tensor, x_aux: torch.Tensor | None, a: np.ndarray, b: np.ndarray,
             sign: float, c_values: np.ndarray | None = None) -> torch.Tensor:
    """:func:`matched_goals` on v's device, without a transfer to the host: v (n,) float64 -> goals (n,) float64 there.

    The chunk's groups ``a``, ``b`` (ndarrays, inputs) choose the rows on the host; the fits (one float32
    product, as in :func:`matched_goals`) and the quantile matching (:meth:`~faux_checks.method.shifts.GroupShift.goal_from_fits` on Tensors)
    run on the device.
    """
    dev = v.device
    if reference.kind == "continuous":
        if reference.continuous is None or c_values is None:
            return v + sign * reference.slope
        xa = (torch.zeros((len(v), 0), dtype=torch.float64, device=dev) if x_aux is None
              else x_aux[:, torch.as_tensor(reference.admissible, device=dev)].double())
        c_t = torch.as_tensor(np.asarray(c_values, dtype=np.float64), device=dev)
        return reference.continuous.goal(v, c_t, xa, sign)
    present = [(ga, np.flatnonzero(a == ga)) for ga in range(reference.n_groups)]
    present = [(ga, rows) for ga, rows in present if len(rows)]
    shifts = [reference.shifts[(ga, int(b[rows[0]]))] for ga, rows in present]
    coef = np.stack([c for s in shifts for c in (s.coef_from, s.coef_to)], axis=1)   # (1 + d_A, 2 * groups)
    intercepts = torch.as_tensor(coef[0], dtype=torch.float64, device=dev)
    if x_aux is None:
        fitted = intercepts.expand(len(v), coef.shape[1])
    else:
        slopes = np.zeros((x_aux.shape[1], coef.shape[1]), dtype=np.float32)
        slopes[reference.admissible] = coef[1:]
        fitted = (x_aux @ torch.from_numpy(slopes).to(dev)).double() + intercepts   # (n, 2 * groups) float64
    if len(present) == 1:
        return shifts[0].goal_from_fits(v, fitted[:, 0], fitted[:, 1])
    out = torch.empty_like(v)
    for i, ((_ga, rows), shift) in enumerate(zip(present, shifts, strict=True)):   # shifts is built from present
        r = torch.as_tensor(rows, device=dev)
        out[r] = shift.goal_from_fits(v[r], fitted[r, 2 * i], fitted[r, 2 * i + 1])
    return out
