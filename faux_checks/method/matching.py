"""The matched value of each free numeric feature in the other group (``swap_metric = "matched"``):
:class:`FeatureMatching`, fitted by :func:`faux_checks.method.swap.fit_swap_reference`.

Each feature is moved by its own :class:`~faux_checks.method.shifts.GroupShift` (or
:class:`~faux_checks.method.shifts.ContinuousShift`): the numpy path on the CPU, the torch path on a chunk's device.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .._device import host
from .shifts import ContinuousShift, GroupShift, _continuous_shift, _group_shift, _ridge_fit
from .torch_path import _DeviceCached, _t64, _torch_path

__all__ = ["FeatureMatching"]


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
    of its residuals: :class:`~faux_checks.method.shifts.GroupShift` applied to x_j instead of the aux output; a continuous c:
    :class:`~faux_checks.method.shifts.ContinuousShift` at c ± 1 sd). A feature distributed alike in both groups maps to itself. Our reading
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

        A Tensor on a non-CPU device (or any Tensor with :data:`~faux_checks.method.torch_path._FORCE_TORCH`): :meth:`_values_t`, the same in
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
        matching are torch ops on the device (:meth:`~faux_checks.method.shifts.GroupShift.goal_from_fits`, :meth:`~faux_checks.method.shifts.ContinuousShift.goal`
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
