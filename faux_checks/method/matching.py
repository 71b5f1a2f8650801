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
from .joint_move import JointConditional
from .quantiles import BucketTables
from .shifts import ContinuousShift, ContinuousStack, GroupShift, continuous_shift, group_parts, ridge_fit
from .torch_path import DeviceCached, t64, use_torch_path

__all__ = ["feature_matching", "FeatureMatching"]


@dataclass(frozen=True)
class FeatureMatching(DeviceCached):
    """The matched value of each free numeric feature in the other group (``swap_metric = "matched"``).

    A person keeps their rank: feature j takes the value of the person's rank in the other group among people
    with the same held features (a per-group ridge regression of x_j on the held features and quantile matching
    of its residuals: :class:`~faux_checks.method.shifts.GroupShift` applied to x_j instead of the aux output; a continuous c:
    :class:`~faux_checks.method.shifts.ContinuousShift` at c ± 1 sd). A feature distributed alike in both groups maps to itself. Our reading
    (evidence in docs/benchmark.md): the move follows what c does to each feature, person by person,
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
    joint : JointConditional or None
        Grouped c: the features released from the hold as carrying c jointly with held partners, matched within the
        partners' neighbourhood instead (:class:`~faux_checks.method.joint_move.JointConditional`).
    """

    positions: np.ndarray
    shifts: dict = field(default_factory=dict)
    continuous: tuple = ()
    slopes: tuple = ()
    joint: JointConditional | None = None

    def values(self, x_aux, held: np.ndarray, a=None, b=None, c_values=None, sign: float = 1.0) -> np.ndarray:
        """(n, d_m) matched values of rows x_aux (n, d_aux; Tensor or array), groups a → b (or c ± sd).

        ``held`` (d_aux,) bool: the held features the regressions read. One evaluation for the whole (n, d_m)
        block (:meth:`values_t` on the CPU), returned as an ndarray.

        A Tensor on a non-CPU device (or any Tensor with :data:`~faux_checks.method.torch_path._FORCE_TORCH`):
        :meth:`values_t`, returning an (n, d_m) float64 Tensor on that device.
        """
        x_t = torch.as_tensor(x_aux, dtype=torch.float32)
        out = self.values_t(x_t, held, a, b, c_values, sign)
        return out if use_torch_path(x_t) else host(out)

    def continuous_values(self, x_aux, held: np.ndarray, c_values, signs) -> list:
        """:meth:`values` of a continuous c at each sign of ``signs`` (c ± sd), the rank at c read once: a list of
        (n, d_m) blocks (ndarrays, or float64 Tensors on x_aux's device as :meth:`values` returns them)."""
        x_t = torch.as_tensor(x_aux, dtype=torch.float32)
        x = self._matched_columns(x_t)
        outs = self._continuous_t(x, x_t, np.asarray(held, dtype=bool), c_values, tuple(signs)) if x.shape[1] \
            else [x for _ in signs]
        return outs if use_torch_path(x_t) else [host(o) for o in outs]

    def _matched_columns(self, x_t: torch.Tensor) -> torch.Tensor:
        """The matched features of x_t (n, d_aux) as an (n, d_m) float64 block on x_t's device."""
        dev = x_t.device
        d_m = len(self.positions)
        every = d_m == x_t.shape[1] and bool((self.positions == np.arange(d_m)).all())
        return (x_t if every else x_t[:, self._on_device(dev, "positions", lambda: torch.as_tensor(
            self.positions, device=dev))]).double()

    def values_t(self, x_t: torch.Tensor, held: np.ndarray, a=None, b=None, c_values=None,
                 sign: float = 1.0) -> torch.Tensor:
        """:meth:`values` on x_t's device, without a transfer to the host: (n, d_aux) float32 -> (n, d_m) float64.
        Groups b of shape (k, n) (k other groups per row, one bucket lookup for all): (k, n, d_m).

        The marginal move (:meth:`_marginal_t`); a column released as carrying c jointly with held partners
        (``joint``) is then replaced by its joint move (:class:`~faux_checks.method.joint_move.JointConditional`,
        on the host).
        """
        out = self._marginal_t(x_t, held, a, b, c_values, sign)
        if self.joint is not None and a is not None:
            local = torch.as_tensor(np.searchsorted(self.positions, self.joint.columns), device=out.device)
            rows = host(x_t)
            others = np.asarray(b)
            for block, other in ((out, others),) if others.ndim == 1 else zip(out, others, strict=True):
                block[:, local] = torch.as_tensor(self.joint.values(rows, a, other), dtype=out.dtype,
                                                  device=out.device)
        return out

    def moved_t(self, x_t: torch.Tensor, held: np.ndarray, a, b) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`values_t` of groups a -> b (b of shape (k, n)) as the moved rows keep them: ((k, n, d_m) float32, each
        value rounded once from float64; (k, n) bool, the rows whose float64 values do not sum to a finite number).

        Nothing held, no joint move, tables of moderate values (:attr:`~faux_checks.method.quantiles.BucketTables.finite_float32`):
        the tables write float32 directly (:meth:`~faux_checks.method.quantiles.BucketTables.read`) and every row is
        finite (x_t finite, as the chunk's rows are checked). Otherwise :meth:`values_t`, rounded and summed."""
        dev = x_t.device
        d_m = len(self.positions)
        if d_m and self.shifts and self.joint is None and not np.asarray(held, dtype=bool).any():
            pairs, tables = self.pair_tables(dev)
            if tables.finite_float32:
                every = d_m == x_t.shape[1] and bool((self.positions == np.arange(d_m)).all())
                x = x_t if every else x_t[:, self._on_device(dev, "positions", lambda: torch.as_tensor(
                    self.positions, device=dev))]
                code = pairs[np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)]
                out = tables.read(x.float(), torch.as_tensor(code.astype(np.int32), device=dev), torch.float32,
                                  tables.searched_once(code))
                return out, torch.zeros(out.shape[:2], dtype=torch.bool, device=dev)
        values = self.values_t(x_t, held, a, b)
        return values.float(), ~torch.isfinite(values.sum(dim=2))

    def _marginal_t(self, x_t: torch.Tensor, held: np.ndarray, a=None, b=None, c_values=None,
                    sign: float = 1.0) -> torch.Tensor:
        """Each matched feature moved on its own: (n, d_aux) float32 -> (n, d_m) float64 on x_t's device.

        Group pairs: each (pair, feature) is one piecewise-linear table (:meth:`~faux_checks.method.shifts.GroupShift.composite`,
        the group intercepts folded in), every row reads its pair's tables in one search
        (:class:`~faux_checks.method.quantiles.BucketTables`; nothing held: the float32 values searched as they are);
        the held features' fits are one float32 product, skipped when nothing is held. Continuous c:
        :class:`~faux_checks.method.shifts.ContinuousStack`. The groups a, b (ndarrays, the chunk's inputs) give each
        row its pair on the host; the tables are built once per device.
        """
        dev = x_t.device
        d_m = len(self.positions)
        every = d_m == x_t.shape[1] and bool((self.positions == np.arange(d_m)).all())
        x = x_t if every else x_t[:, self._on_device(dev, "positions", lambda: torch.as_tensor(
            self.positions, device=dev))]                                      # (n, d_m) float32
        if not d_m:                                                            # every free feature is one-hot
            return x.double() if np.ndim(b) < 2 else x.double().expand(len(b), *x.shape)
        held = np.asarray(held, dtype=bool)
        if self.continuous:
            return self._continuous_t(x.double(), x_t, held, c_values, (sign,))[0]
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        pairs, tables = self.pair_tables(dev)
        code = pairs[a, b]                                                     # (n,) or (k, n) pair index per row
        if not held.any():
            return tables(x, torch.as_tensor(code.astype(np.int32), device=dev), tables.searched_once(code))
        if b.ndim == 2:
            return torch.stack([self._marginal_t(x_t, held, a, other) for other in b])
        pair = torch.as_tensor(code.astype(np.int32), device=dev)
        used = tuple(np.unique(code).tolist())
        fits = torch.stack([x_t @ self._on_device(dev, ("slopes", p, held.tobytes()), lambda p=p: torch.from_numpy(
            self._held_slopes(p, held, x_t.shape[1])).to(dev)) for p in used], dim=1)   # (n, pairs used, 2 d_m)
        if len(used) > 1:
            local = torch.as_tensor(np.searchsorted(np.asarray(used), code), device=dev)
            fits = fits[torch.arange(len(x_t), device=dev), local]
        else:
            fits = fits[:, 0]
        fits = fits.double().view(len(x_t), d_m, 2)                            # (n, d_m, from/to)
        return tables(x.double() - fits[:, :, 0], pair).add(fits[:, :, 1])

    def pair_tables(self, dev) -> tuple[np.ndarray, BucketTables]:
        """(pair index (m, m) ndarray, BucketTables of table p·d_m + k over each feature's range), built once per
        device."""
        return self._on_device(dev, "pairs", lambda: self._build_pair_tables(dev))

    def _build_pair_tables(self, dev) -> tuple[np.ndarray, BucketTables]:
        keys = sorted(self.shifts)
        m = max(max(k) for k in keys) + 1
        pairs = np.full((m, m), -1, dtype=np.int64)
        for p, key in enumerate(keys):
            pairs[key] = p
        comp = [[s.composite() for s in self.shifts[key]] for key in keys]        # [pair][feature] (knots, values)
        d_m = len(self.positions)
        lo = np.array([min(c[k][0][0] for c in comp) for k in range(d_m)])
        hi = np.array([max(c[k][0][-1] for c in comp) for k in range(d_m)])
        tables = BucketTables([kv[0] for c in comp for kv in c], [kv[1] for c in comp for kv in c],
                              np.stack([lo, hi], axis=1), dev)
        return pairs, tables

    def _held_slopes(self, p: int, held: np.ndarray, d: int) -> np.ndarray:
        """(d, 2·d_m) float32: pair p's from- and to-fits' slopes on the held features (columns 2k, 2k + 1; rows of
        the other features zero), the float32 product the pinned scores were recorded with."""
        shifts = self.shifts[sorted(self.shifts)[p]]
        coef = np.stack([c[1:] for s in shifts for c in (s.coef_from, s.coef_to)], axis=1)   # (d_A, 2 d_m)
        slopes: np.ndarray = np.zeros((d, coef.shape[1]), dtype=np.float32)
        slopes[held] = coef
        return slopes

    def _continuous_t(self, x: torch.Tensor, x_t: torch.Tensor, held: np.ndarray, c_values, signs) -> list:
        """Continuous c, at each sign of ``signs``: every feature with bins in one
        :class:`~faux_checks.method.shifts.ContinuousStack` (the rank at c read once for all signs), the others
        moved by their slope. A list of (n, d_m) float64 Tensors."""
        dev = x.device
        binned = [k for k, s in enumerate(self.continuous) if s is not None]
        slopes = self._on_device(dev, "slopes", lambda: t64(self.slopes, dev))
        if not binned:
            return [x + sign * slopes for sign in signs]
        stack = self._on_device(dev, "stack", lambda: ContinuousStack([self.continuous[k] for k in binned], dev))
        x_held = x_t[:, torch.as_tensor(held, device=dev)].double() if held.any() else None
        c_t = torch.as_tensor(np.asarray(c_values, dtype=np.float64), device=dev)
        if len(binned) == len(self.continuous):
            return stack.goals(x, c_t, x_held, signs)
        cols = torch.as_tensor(binned, device=dev)
        return [(x + sign * slopes).index_copy_(1, cols, goal)
                for sign, goal in zip(signs, stack.goals(x[:, cols], c_t, x_held, signs), strict=True)]

    def to_dict(self) -> dict:
        shift = lambda s: [s.coef_from.tolist(), s.coef_to.tolist(), s.quantiles_from.tolist(), s.quantiles_to.tolist()]  # noqa: E731
        cont = lambda s: {"centers": s.centers.tolist(), "coefs": s.coefs.tolist(),  # noqa: E731
                          "quantiles": s.quantiles.tolist(), "sd": s.sd, "slope": s.slope}
        out = {"positions": self.positions.tolist(),
               "shifts": [[a, b, [shift(s) for s in ss]] for (a, b), ss in sorted(self.shifts.items())],
               "continuous": [None if s is None else cont(s) for s in self.continuous], "slopes": list(self.slopes)}
        if self.joint is not None:
            out["joint"] = self.joint.to_dict()
        return out

    @classmethod
    def from_dict(cls, payload: dict) -> "FeatureMatching":
        arr = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
        shifts = {(int(a), int(b)): tuple(GroupShift(*(arr(x) for x in s)) for s in ss) for a, b, ss in payload["shifts"]}
        cont = tuple(None if s is None else ContinuousShift(centers=arr(s["centers"]), coefs=arr(s["coefs"]),
                                                            quantiles=arr(s["quantiles"]), sd=float(s["sd"]),
                                                            slope=float(s["slope"]))
                     for s in payload.get("continuous", []))
        joint = JointConditional.from_dict(payload["joint"]) if payload.get("joint") else None
        return cls(positions=np.asarray(payload["positions"], dtype=np.int64), shifts=shifts, continuous=cont,
                   slopes=tuple(float(x) for x in payload.get("slopes", [])), joint=joint)


def feature_matching(X: np.ndarray, XA: np.ndarray, c: np.ndarray, kind: str, moving: np.ndarray,
                      m: int) -> "FeatureMatching":
    positions = np.flatnonzero(moving)
    if kind == "continuous":
        sd = float(np.std(c))
        z = (c - c.mean()) / sd
        design = np.column_stack([np.ones(len(c)), XA, z])
        per, slopes = [], []
        for j in positions:
            slope = float(ridge_fit(design, X[:, j])[-1])
            per.append(continuous_shift(X[:, j], XA, c.astype(np.float64), slope, sd))
            slopes.append(slope)
        return FeatureMatching(positions=positions, continuous=tuple(per), slopes=tuple(slopes))
    parts = {g: group_parts(X, XA, c, g, positions) for g in range(m)}      # each group's fits, shared by its pairs
    shifts = {(a, b): tuple(GroupShift(pa[0], pb[0], pa[1], pb[1]) for pa, pb in zip(parts[a], parts[b], strict=True))
              for a in range(m) for b in range(m) if a != b}
    return FeatureMatching(positions=positions, shifts=shifts)
