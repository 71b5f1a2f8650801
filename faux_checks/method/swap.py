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

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from .._validation import fmt_count
from ..errors import InputError
from ..kinds import Kind
from .levels import LevelModel
from .matching import FeatureMatching, feature_matching
from .metric import covariance_metric
from .shifts import ContinuousShift, GroupShift, continuous_shift, group_shift, ridge_fit
from .torch_path import use_torch_path

__all__ = [
    "METRICS",
    "SwapReference",
    "fit_swap_reference",
    "pair_values",
    "swap_displacement",
]


#: aᵀMa at or below this (in squared aux-output units) is a zero direction: the row is undefined.
ZERO_NORM2 = 1e-20



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


@dataclass(frozen=True)
class SwapReference:
    """What the swap reading learns once from reference rows (:func:`fit_swap_reference`).

    Attributes
    ----------
    kind : {"binary", "multiclass", "continuous"}
    n_groups : int
        m groups (0 for continuous).
    metric : ndarray of shape (d, d)
        :func:`~faux_checks.method.metric.covariance_metric` (total, explained or within), the variances only, or the identity
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


METRICS = ("matched", "covariance", "explained", "between", "within", "diagonal", "euclidean")


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
        The move's metric: :func:`~faux_checks.method.metric.covariance_metric` with part "total" (``"covariance"``), "explained" or
        "within"; the features' variances only (eq. 7–8 in standardised units, no correlations); or the
        identity (eq. 7–8 as printed). Admissible rows and columns are zero in every metric.
    continuous_matching : {"rank", "slope"}
        Continuous c: match each person's rank at c ± 1 sd (:class:`~faux_checks.method.shifts.ContinuousShift`) or move everyone's
        aux output by one global regression slope (the first round's reading).
    matched : bool array of shape (d,), optional
        ``metric = "matched"``: the features moved to their own matched value (:class:`~faux_checks.method.matching.FeatureMatching`), the free
        numeric ones; the metric is then "between" (kept for the shapes and the guard, not used by the move).

    Returns
    -------
    SwapReference

    Raises
    ------
    InputError
        Shapes that disagree, a group with fewer than 2 reference rows, a constant continuous c,
        or any error of :func:`~faux_checks.method.metric.covariance_metric`.
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
    M = _metric(X, A, c, kind, metric)
    XA = X[:, A]
    if kind == "continuous":
        sd = float(np.std(c))
        if not sd > 0:
            raise InputError("the continuous protected attribute is constant on the reference rows")
        design = np.column_stack([np.ones(len(c)), XA, (c - c.mean()) / sd])
        slope = float(ridge_fit(design, raw[:, 0])[-1])
        cont = continuous_shift(raw[:, 0], XA, c.astype(np.float64), slope, sd) if continuous_matching == "rank" else None
        matching = (None if matched is None
                    else feature_matching(X, XA, c.astype(np.float64), kind, np.asarray(matched, dtype=bool), 0))
        return SwapReference(kind=kind, n_groups=0, metric=M, admissible=A, slope=slope, continuous=cont,
                             metric_name=metric, matching=matching)
    m = 2 if raw.shape[1] == 1 else raw.shape[1]
    c = c.astype(np.int64)
    counts = np.bincount(c, minlength=m)
    if (counts < 2).any():
        raise InputError(f"every protected group needs at least 2 reference rows for the swap reading; "
                         f"counts {counts.tolist()}")
    z = np.concatenate([np.zeros((len(raw), 1)), raw], axis=1) if raw.shape[1] == 1 else raw
    shifts = {(a, b): group_shift(z[:, b] - z[:, a], XA, c, a, b) for a in range(m) for b in range(m) if a != b}
    matching = None if matched is None else feature_matching(X, XA, c, kind, np.asarray(matched, dtype=bool), m)
    return SwapReference(kind=kind, n_groups=m, metric=M, admissible=A, shifts=shifts, metric_name=metric,
                         matching=matching)


def _metric(X: np.ndarray, A: np.ndarray, c: np.ndarray, kind: Kind, metric: str) -> np.ndarray:
    """The move's (d, d) metric named ``metric`` (:func:`fit_swap_reference`), zero on the admissible ``A``."""
    if metric == "covariance":
        return covariance_metric(X, admissible=A)
    if metric == "matched":
        return covariance_metric(X, admissible=A, c=c, kind=kind, part="between")
    if metric in ("explained", "between", "within"):
        return covariance_metric(X, admissible=A, c=c, kind=kind, part=metric)
    if metric == "diagonal":
        return np.diag(np.where(A, 0.0, X.var(axis=0)))
    if metric == "euclidean":
        return np.diag((~A).astype(np.float64))
    raise InputError(f"metric must be one of {list(METRICS)}, got {metric!r}")


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
        ``floor``; our reading). 0: eq. 7–8's exact solve.

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
    if use_torch_path(g) or bool(undefined.any()):                             # on a device: no sync, where() always
        scale = torch.where(undefined, torch.zeros((), dtype=torch.float64, device=g.device), scale)
        Mg = torch.where(undefined[:, None], torch.zeros((), dtype=g.dtype, device=g.device), Mg)
    dx = Mg.mul_(scale.to(g.dtype)[:, None])                                 # Mg is the matmul's own output
    return dx, undefined
