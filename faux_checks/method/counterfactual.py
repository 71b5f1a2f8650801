"""One chunk of individuals through the swap reading: counterfactual inputs and the target's change.

:func:`swap_chunk` is the loop body of :meth:`faux_checks.method.faux.FAuxTester.evaluate` for
``variant="swap"``; the maths it calls are the pure functions of :mod:`faux_checks.method.swap`.
For each individual and each counterfactual target (another group, or ±1 sd of a continuous c)
it moves the auxiliary model's output to the matched value along the minimum-norm direction,
sets c's own columns when the target takes them as inputs, and reads the target's prediction
there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
import torch

from .._device import host
from ..errors import InputError
from .forward import forward_attribution, is_forward_only
from .gradients import target_probability_and_gradient
from .output import TargetOutput, predict_probability, predict_probability_tensor
from .levels import (comonotone_transition, comonotone_transition_t, configurations, gumbel_transition,
                     gumbel_transition_t)
from .swap import SwapReference, _torch_path, pair_values, swap_displacement

__all__ = ["EVIDENCE_STEPS", "MAX_STRETCH", "coupled_inputs", "SwapSettings", "SwapChunk", "counterfactual_inputs", "fit_floors",
           "segment_attribution", "swap_chunk"]

#: The line search never stretches the linear step beyond this factor (nor reverses it): an aux output
#: that cannot reach the matched value along the direction does not send x off to infinity.
MAX_STRETCH = 4.0


@dataclass(frozen=True)
class SwapSettings:
    """How the swap reading reads each counterfactual (the policy's ``[faux]`` swap settings).

    Attributes
    ----------
    steps : int
        Newton steps toward the matched aux value (1: the minimum-norm move of eq. 7–8 applied once;
        more: recompute the aux gradient at the moved point, a finite path).
    evaluation : {"finite", "first_order"}
        The target's actual change f(x′) − f(x), or its first-order value ∇f(x) · (x′ − x).
    categorical : {"soft", "snap", "coupled"}
        One-hot groups keep the moved (fractional) values, snap to their largest entry (a discrete swap to
        the level the move points to), or switch level with the probabilities of the reference's level
        models (:mod:`faux_checks.method.levels`; the score is then the expected change and the flag a
        probability).
    categorical_groups : sequence of index arrays
        Encoded positions (aux input space) of each one-hot group (needed for ``"snap"``).
    line_search : int
        Secant iterations along the first step's direction so that the aux model's actual output,
        not its linearisation, reaches the matched value (each one aux forward pass); 0 = none. The
        step length is kept within [0, ``MAX_STRETCH``] times the linear one.
    coupling : {"auto", "comonotone", "gumbel"}
        ``categorical = "coupled"``: how a person's level maps to the other group's level distribution
        (:func:`~faux_checks.method.levels.comonotone_transition`, :func:`~faux_checks.method.levels.gumbel_transition`);
        ``"auto"``: comonotone for a continuous c (c moves people along the levels' order), Gumbel-max for
        groups (a level is a choice among unordered alternatives).
    """

    steps: int = 1
    evaluation: Literal["finite", "first_order"] = "finite"
    categorical: Literal["soft", "snap", "coupled"] = "coupled"
    categorical_groups: Sequence[np.ndarray] = ()
    line_search: int = 2
    coupling: Literal["auto", "comonotone", "gumbel"] = "auto"

    def __post_init__(self):
        if self.line_search < 0:
            raise InputError(f"swap line_search must be >= 0, got {self.line_search}")
        if self.steps < 1:
            raise InputError(f"swap steps must be >= 1, got {self.steps}")
        if self.evaluation not in ("finite", "first_order"):
            raise InputError(f"swap evaluation must be 'finite' or 'first_order', got {self.evaluation!r}")
        if self.categorical not in ("soft", "snap", "coupled"):
            raise InputError(f"swap categorical must be 'soft', 'snap' or 'coupled', got {self.categorical!r}")


@dataclass(frozen=True)
class SwapChunk:
    """Per-individual output of :func:`swap_chunk` for b rows (numpy, float64 unless stated).

    Attributes
    ----------
    scores : (b,)  |Δŷ| of the counterfactual with the largest change; NaN where undefined.
    undefined : (b,) bool
    probability : (b,)  ŷ = P(y = target_class | x).
    counterfactual_probability : (b,)  ŷ at that counterfactual.
    counterfactual_target : (b,) int64  its other group (index), or +1 / −1 (sd) for continuous c.
    direct : (b,) or None  |Δŷ| from c's own columns alone (when they are target inputs).
    evidence : (b, d) or None  per-feature terms of the change: integrated gradients along x -> x′ (:func:`segment_attribution`).
    outcomes : (b, C) or None  ``categorical = "coupled"``: |Δŷ| of each level configuration of the counterfactual
        with the largest expected change (``scores`` is their expected value).
    outcome_weights : (b, C) or None  their probabilities (rows sum to 1).
    counterfactual : (b, d) float32 or None  with ``evidence``: the representative counterfactual x′ (the most
        probable configuration of the group with the largest expected change), the segment the evidence and
        the decomposition (:mod:`faux_checks.method.decomposition`) read.
    """

    scores: np.ndarray
    undefined: np.ndarray
    probability: np.ndarray
    counterfactual_probability: np.ndarray
    counterfactual_target: np.ndarray
    direct: np.ndarray | None
    evidence: np.ndarray | None
    outcomes: np.ndarray | None = None
    outcome_weights: np.ndarray | None = None
    counterfactual: np.ndarray | None = None


def _aux_value_and_grad(aux_raw, x: torch.Tensor, a: torch.Tensor | None, b: torch.Tensor | None):
    """v (n,) float64 and ∇ₓv (n, d) float32 of the aux log-odds of b against a (continuous: the prediction of c)."""
    return _aux_values_and_grads(aux_raw, x, [(a, b)])[0]


def _aux_values_and_grads(aux_raw, x: torch.Tensor, pairs: Sequence[tuple]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """For each (a, b) of ``pairs`` ((None, None): continuous c), v (n,) float64 and ∇ₓv (n, d) float32.

    One forward pass of the aux network for all pairs and one backward pass per pair (the batch-sum trick:
    rows are independent). The gradient stays in autograd's float32.
    """
    x = x.detach().float().requires_grad_(True)
    raw = aux_raw(x)
    raw = raw[:, None] if raw.ndim == 1 else raw
    out = []
    for i, (a, b) in enumerate(pairs):
        v = raw[:, 0] if a is None else pair_values(raw, a, b)
        (grad,) = torch.autograd.grad(v.sum(), x, retain_graph=i < len(pairs) - 1)
        out.append((v.detach().double(), grad))
    return out


def _goals(reference: SwapReference, v: np.ndarray, x_aux: torch.Tensor | None, a: np.ndarray, b: np.ndarray,
           sign: float, c_values: np.ndarray | None = None) -> np.ndarray:
    """The matched aux value of each row (:meth:`GroupShift.goal`).

    ``x_aux`` (n, d_aux) float32: the rows in the aux input space (None without admissible features). The
    linear fits of every group pair come from one float32 product with coefficients that are zero on the
    free features (no (n, d_A) gather of the admissible columns, no float64 copy of the rows); the fits
    then enter the float64 quantile matching.

    ``v`` a float64 Tensor (the torch path, :func:`~faux_checks.method.swap._torch_path`): :func:`_goals_t`,
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
    """:func:`_goals` on v's device, without a transfer to the host: v (n,) float64 -> goals (n,) float64 there.

    The chunk's groups ``a``, ``b`` (ndarrays, inputs) choose the rows on the host; the fits (one float32
    product, as in :func:`_goals`) and the quantile matching (:meth:`GroupShift.goal_from_fits` on Tensors)
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


def _row_floors(reference: SwapReference, a: np.ndarray | None, b: np.ndarray | None, n: int,
                device: torch.device | None = None) -> torch.Tensor | float:
    """The guard of each row's move (:func:`~faux_checks.method.swap.swap_displacement`): (n,) float64, or 0.0."""
    if not reference.floors:
        return 0.0
    if a is None:
        return reference.floor(-1, -1)
    table = np.zeros((reference.n_groups, reference.n_groups))
    for (ga, gb), f in reference.floors.items():
        table[ga, gb] = f
    return torch.as_tensor(table[a, b], dtype=torch.float64, device=device)


def fit_floors(aux_raw, X_ref, c_ref, reference: SwapReference, *, scale: float, max_rows: int = 20_000,
               seed: int = 0) -> dict:
    """The guard per group pair: ``scale`` × the median of aᵀMa over reference rows of the pair's first group.

    Parameters
    ----------
    aux_raw : callable, Tensor (n, d_aux) -> Tensor (n, m) or (n, 1)
    X_ref : array of shape (n, d_aux)
    c_ref : array of shape (n,)
    reference : SwapReference
        Its metric and admissible mask.
    scale : float
        0 turns the guard off (returns {}).
    max_rows : int
        At most this many reference rows (a seeded sample) per pair.

    Returns
    -------
    dict of (a, b) -> float; continuous c: {(-1, -1): float}

    Notes
    -----
    Our reading (issue 20): a row whose aux gradient barely meets the metric's directions moves less than
    eq. 7–8 would move it (a ridge relative to what is typical on the reference rows), never without bound.
    """
    if scale <= 0 or reference.nothing_free:
        return {}
    X = torch.as_tensor(np.asarray(X_ref), dtype=torch.float32)
    c = np.asarray(c_ref)
    rng = np.random.default_rng(seed)
    free = torch.as_tensor(np.flatnonzero(~reference.admissible))
    M = torch.as_tensor(reference.metric[np.ix_(~reference.admissible, ~reference.admissible)], dtype=torch.float64)

    def median_norm(rows: np.ndarray, a, b) -> float:
        if len(rows) > max_rows:
            rows = rng.choice(rows, max_rows, replace=False)
        x = X[torch.as_tensor(rows)]
        pair = [(None, None)] if a is None else [(torch.full((len(rows),), a), torch.full((len(rows),), b))]
        _, grad = _aux_values_and_grads(aux_raw, x, pair)[0]
        g = grad.index_select(1, free).double()
        return float(torch.median(((g @ M) * g).sum(dim=1)))

    if reference.kind == "continuous":
        return {(-1, -1): scale * median_norm(np.arange(len(X)), None, None)}
    out = {}
    for a in range(reference.n_groups):
        rows = np.flatnonzero(c == a)
        for b in range(reference.n_groups):
            if a != b and len(rows):
                out[(a, b)] = scale * median_norm(rows, a, b)
    return out


def _aux_value(aux_raw, x: torch.Tensor, a, b) -> torch.Tensor:
    with torch.no_grad():
        raw = aux_raw(x.float())
    raw = raw[:, None] if raw.ndim == 1 else raw
    return (raw[:, 0] if a is None else pair_values(raw, a, b)).double()


def _line_search(aux_raw, x_aux: torch.Tensor, dx: torch.Tensor, free_t: torch.Tensor, v0: torch.Tensor,
                 goal: torch.Tensor, a, b, iterations: int) -> torch.Tensor:
    """x + t·Δx with t from secant iterations on v(x + t·Δx) = goal, t in [0, MAX_STRETCH] (t = 1: the linear step)."""
    dx32 = dx.float()

    def at(t: torch.Tensor) -> torch.Tensor:
        moved = x_aux.clone()
        moved.index_add_(1, free_t, dx32 * t.float()[:, None])
        return moved

    t_prev, v_prev = torch.zeros_like(v0), v0
    t_cur = torch.ones_like(v0)
    for _ in range(iterations):
        v_cur = _aux_value(aux_raw, at(t_cur), a, b)
        slope = v_cur - v_prev
        ok = slope.abs() > 1e-9
        t_next = torch.where(ok, t_cur + (goal - v_cur) * (t_cur - t_prev) / torch.where(ok, slope, torch.ones_like(slope)),
                             t_cur)
        t_prev, v_prev, t_cur = t_cur, v_cur, t_next.clamp(0.0, MAX_STRETCH)
    return at(t_cur)


def _snap(x: torch.Tensor, groups: Sequence[np.ndarray]) -> torch.Tensor:
    for idx in groups:
        idx = torch.as_tensor(np.asarray(idx), dtype=torch.long, device=x.device)
        block = x[:, idx]
        hot = torch.zeros_like(block)
        hot[torch.arange(len(x), device=x.device), block.argmax(dim=1)] = 1.0
        x[:, idx] = hot
    return x


def _set_direct(x: torch.Tensor, x1: torch.Tensor, keep: np.ndarray, direct_levels, other, t, continuous: bool) -> None:
    """Set c's own columns (target inputs) of x1 to the counterfactual group's encoding, in place."""
    levels = torch.as_tensor(np.asarray(direct_levels, dtype=np.float32), device=x.device)
    drop = ~torch.as_tensor(keep, device=x.device)
    x1[:, drop] = x[:, drop] + t * levels[0] if continuous else levels[torch.as_tensor(other, device=x.device)]


def _unmoved(x: torch.Tensor, c, reference: SwapReference, keep: np.ndarray, direct_levels):
    """Counterfactuals when every aux feature is held: only c's own columns (if target inputs) change."""
    continuous = reference.kind == "continuous"
    targets = [1.0, -1.0] if continuous else list(range(1, reference.n_groups))
    out = []
    for t in targets:
        other = None if continuous else (np.asarray(c, dtype=np.int64) + int(t)) % reference.n_groups
        target = np.full(len(x), int(t), dtype=np.int64) if continuous else other
        x1 = x.clone()
        if not keep.all():
            _set_direct(x, x1, keep, direct_levels, other, t, continuous)
        out.append((target, x1, np.zeros(len(x), dtype=bool)))
    return out


def _matched_inputs(x: torch.Tensor, c, *, reference: SwapReference, settings: SwapSettings, keep: np.ndarray,
                    direct_levels) -> list[tuple[np.ndarray, torch.Tensor, np.ndarray]]:
    """``metric = "matched"``: every matched feature takes its own matched value (:class:`~faux_checks.method.swap.FeatureMatching`).

    One-hot groups with a level model move by their coupling's expected one-hot (``categorical = "soft"``) or its
    most probable level (``"snap"``); with ``"coupled"`` they stay and :func:`coupled_inputs` switches them.
    """
    continuous = reference.kind == "continuous"
    x = x.float()
    keep_t = torch.as_tensor(keep, device=x.device)
    x_aux = x[:, keep_t] if not keep.all() else x
    positions = torch.as_tensor(reference.matching.positions, device=x.device)
    targets = [1.0, -1.0] if continuous else list(range(1, reference.n_groups))
    a_np = None if continuous else np.asarray(c, dtype=np.int64)
    c_values = np.asarray(c, dtype=np.float64) if continuous and c is not None else None
    if continuous and c_values is None:
        raise InputError("the matched move of a continuous protected attribute needs each individual's value")
    out = []
    for t in targets:
        other = None if continuous else (a_np + int(t)) % reference.n_groups
        target = np.full(len(x), int(t), dtype=np.int64) if continuous else other
        values = reference.matching.values(x_aux, reference.admissible, a_np, other, c_values, t)
        moved = x_aux.clone()
        moved[:, positions] = torch.as_tensor(values, dtype=torch.float32, device=x.device)
        if reference.levels and settings.categorical in ("soft", "snap"):
            probabilities = _level_probabilities(reference, x_aux, a_np, other, c_values, t, settings.coupling)
            for lm, p in zip(reference.levels, probabilities, strict=False):
                if settings.categorical != "snap":
                    block = p
                elif isinstance(p, torch.Tensor):
                    block = torch.eye(p.shape[1], dtype=torch.float64, device=p.device)[p.argmax(dim=1)]
                else:
                    block = np.eye(p.shape[1])[p.argmax(axis=1)]
                moved[:, torch.as_tensor(lm.positions, device=x.device)] = torch.as_tensor(block, dtype=torch.float32,
                                                                                          device=x.device)
        undefined = (~torch.isfinite(values).all(dim=1)) if isinstance(values, torch.Tensor) \
            else ~np.isfinite(values).all(axis=1)
        if keep.all():
            x1 = moved
        else:
            x1 = x.clone()
            x1[:, keep_t] = moved
            _set_direct(x, x1, keep, direct_levels, other, t, continuous)
        out.append((target, x1, undefined))
    return out


def counterfactual_inputs(aux_raw, x: torch.Tensor, c: np.ndarray | None, *, reference: SwapReference,
                          settings: SwapSettings = SwapSettings(), keep: np.ndarray | None = None,
                          direct_levels: np.ndarray | None = None) -> list[tuple[np.ndarray, torch.Tensor, np.ndarray]]:
    """The estimated counterfactual inputs of one chunk, one per counterfactual target.

    Parameters are those of :func:`swap_chunk`.

    Returns
    -------
    list of (target, x1, undefined)
        ``target`` (b,) int64: the other group of each row (continuous c: +1 or −1 sd, the same for every
        row); ``x1`` Tensor (b, d) float32: the counterfactual inputs as the target sees them;
        ``undefined`` (b,) bool: rows whose move could not be computed (x1 equals x there); an ndarray, or on
        the torch path (x on a non-CPU device, or :data:`faux_checks.method.swap._FORCE_TORCH`) a bool Tensor on
        x's device: the matched quantiles then run in torch there (:func:`_goals_t`,
        :meth:`~faux_checks.method.swap.FeatureMatching.values`), no transfer to the host.
    """
    b_rows, d = x.shape
    keep = np.ones(d, dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    if not keep.all() and direct_levels is None:
        raise InputError("c's own columns are target inputs but no direct_levels were given")
    continuous = reference.kind == "continuous"
    if not continuous and c is None:
        raise InputError("the swap reading needs each individual's protected group")
    if reference.nothing_free:                                               # every feature held: no move at all
        return _unmoved(x, c, reference, keep, direct_levels)
    if reference.matching is not None:
        return _matched_inputs(x, c, reference=reference, settings=settings, keep=keep, direct_levels=direct_levels)
    free = ~reference.admissible                                             # (d_aux,) features the move may change
    device = x.device                                                        # every tensor of the chunk stays there
    free_t = torch.as_tensor(np.flatnonzero(free), device=device)            # their positions in the aux input
    # (d_free, d_free); M a in float32, the precision x′ is stored in (the norm aᵀMa is summed in float64)
    metric = torch.as_tensor(reference.metric[np.ix_(free, free)], dtype=torch.float32, device=device)
    x = x.float()
    x_aux = x[:, torch.as_tensor(keep, device=device)] if not keep.all() else x   # (b, d_aux)
    all_free = bool(free.all())
    on_device = _torch_path(x)                                               # the matched quantiles in torch too
    targets = [1.0, -1.0] if continuous else list(range(1, reference.n_groups))
    c_values = None
    if continuous:
        a_np = None
        c_values = None if c is None else np.asarray(c, dtype=np.float64)
        pairs = [(None, None)]                                               # ±1 sd share v and its gradient
    else:
        a_np = np.asarray(c, dtype=np.int64)
        a_t = torch.as_tensor(a_np, device=device)
        pairs = [(a_t, torch.as_tensor((a_np + int(t)) % reference.n_groups, device=device)) for t in targets]
    first = _aux_values_and_grads(aux_raw, x_aux, pairs)                    # one aux forward, one backward per pair
    out = []
    for i, t in enumerate(targets):
        if continuous:
            other = a_t = b_t = None
            target = np.full(b_rows, int(t), dtype=np.int64)
            v, grad = first[0]
        else:
            a_t, b_t = pairs[i]
            other = (a_np + int(t)) % reference.n_groups                     # b_t's values, from the host's input
            target = other
            v, grad = first[i]
        goal = torch.as_tensor(_goals(reference, v if on_device else host(v),
                                      x_aux if reference.admissible.any() else None, a_np, other, t, c_values),
                               device=device)
        floors = _row_floors(reference, a_np, other, b_rows, device)
        dx, undef = swap_displacement(grad if all_free else grad.index_select(1, free_t), metric, goal - v, floors)
        undefined = undef.clone() if on_device else host(undef).copy()
        if all_free:
            moved = x_aux + dx                                               # (b, d_aux) float32
        else:
            moved = x_aux.clone()
            moved.index_add_(1, free_t, dx)
        if settings.line_search:
            moved = _line_search(aux_raw, x_aux, dx, free_t, v, goal, a_t, b_t, settings.line_search)
        for _ in range(settings.steps - 1):                                    # further Newton steps (a finite path)
            v, grad = _aux_value_and_grad(aux_raw, moved, a_t, b_t)
            dx, undef = swap_displacement(grad if all_free else grad.index_select(1, free_t), metric, goal - v, floors)
            moved.index_add_(1, free_t, dx)
            undefined |= undef if on_device else host(undef)
        if settings.categorical == "snap":
            moved = _snap(moved, settings.categorical_groups)
        if keep.all():
            x1 = moved
        else:
            x1 = x.clone()
            x1[:, torch.as_tensor(keep, device=device)] = moved
            _set_direct(x, x1, keep, direct_levels, other, t, continuous)
        out.append((target, x1, undefined))
    return out


def _level_probabilities(reference: SwapReference, x_aux: torch.Tensor, a_np, other, c_values, t,
                         coupling: str = "auto") -> list[np.ndarray]:
    """Per level model, each row's probabilities (b, K) of its counterfactual level (comonotone coupling).

    On the torch path (:func:`~faux_checks.method.swap._torch_path` of x_aux): the same in torch on x_aux's device,
    (b, K) float64 Tensors there (:meth:`~faux_checks.method.levels.LevelModel.logits_t`,
    :func:`~faux_checks.method.levels.gumbel_transition_t`, :func:`~faux_checks.method.levels.comonotone_transition_t`).
    """
    if _torch_path(x_aux):
        return _level_probabilities_t(reference, x_aux, a_np, other, c_values, t, coupling)
    xa = host(x_aux[:, torch.as_tensor(reference.admissible, device=x_aux.device)].double())
    out = []
    for lm in reference.levels:
        current = host(x_aux[:, torch.as_tensor(lm.positions, device=x_aux.device)].argmax(dim=1))
        c_from, c_to = (c_values, c_values + t * lm.c_sd) if reference.kind == "continuous" else (a_np, other)
        if coupling == "gumbel" or (coupling == "auto" and reference.kind != "continuous"):
            out.append(gumbel_transition(lm.logits(xa, c_from), lm.logits(xa, c_to), current))
        else:
            out.append(comonotone_transition(lm.probabilities(xa, c_from), lm.probabilities(xa, c_to), current))
    return out


def _level_probabilities_t(reference: SwapReference, x_aux: torch.Tensor, a_np, other, c_values, t,
                           coupling: str = "auto") -> list[torch.Tensor]:
    """:func:`_level_probabilities` on x_aux's device (no transfer to the host): a (b, K) float64 Tensor per level model."""
    dev = x_aux.device
    xa = x_aux[:, torch.as_tensor(reference.admissible, device=dev)].double()
    out = []
    for lm in reference.levels:
        current = x_aux[:, torch.as_tensor(lm.positions, device=dev)].argmax(dim=1)
        if reference.kind == "continuous":
            c_from = torch.as_tensor(np.asarray(c_values, dtype=np.float64), device=dev)
            c_to = torch.as_tensor(np.asarray(c_values, dtype=np.float64) + t * lm.c_sd, device=dev)
        else:
            c_from, c_to = torch.as_tensor(a_np, device=dev), torch.as_tensor(other, device=dev)
        if coupling == "gumbel" or (coupling == "auto" and reference.kind != "continuous"):
            out.append(gumbel_transition_t(lm.logits_t(xa, c_from), lm.logits_t(xa, c_to), current))
        else:
            out.append(comonotone_transition_t(lm.probabilities_t(xa, c_from), lm.probabilities_t(xa, c_to), current))
    return out


def coupled_inputs(aux_raw, x: torch.Tensor, c, *, reference: SwapReference, settings: SwapSettings = SwapSettings(),
                   keep: np.ndarray | None = None, direct_levels: np.ndarray | None = None
                   ) -> list[tuple[np.ndarray, torch.Tensor, np.ndarray, np.ndarray]]:
    """Counterfactuals whose free one-hot groups switch level and whose other free features move (``"coupled"``).

    The other free features move as in the soft move of :func:`counterfactual_inputs` (the metric shares the
    matched change of the aux output between all free features); each free one-hot group with a level model
    then takes a level drawn from the coupling of its level distributions in the two groups
    (:mod:`faux_checks.method.levels`) instead of the soft move's fractional values, and the configurations
    of several groups are enumerated with their probabilities.

    Parameters are those of :func:`counterfactual_inputs`.

    Returns
    -------
    list of (target, configs, weights, undefined)
        ``target`` (b,) int64; ``configs`` Tensor (b, C, d) float32 in the target's feature space; ``weights``
        (b, C) float64, rows summing to 1; ``undefined`` (b,) bool. On the torch path (x on a non-CPU device)
        ``weights`` and ``undefined`` are Tensors on x's device (:func:`_level_probabilities_t`).
    """
    d = x.shape[1]
    keep = np.ones(d, dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    # the other features' move; "coupled" keeps the soft one-hot move of an aux-driven metric (its share of Δv) and
    # skips the matched move's own level blocks, which the configurations below overwrite
    soft = counterfactual_inputs(aux_raw, x, c, reference=reference, settings=settings, keep=keep,
                                 direct_levels=direct_levels)
    if not reference.levels or reference.nothing_free:
        return [(t, x1[:, None, :], np.ones((len(x), 1)), u) for t, x1, u in soft]
    continuous = reference.kind == "continuous"
    x = x.float()
    x_aux = x[:, torch.as_tensor(keep, device=x.device)] if not keep.all() else x
    to_target = np.flatnonzero(keep)                                          # aux position -> target position
    groups = [to_target[lm.positions] for lm in reference.levels]
    targets = [1.0, -1.0] if continuous else list(range(1, reference.n_groups))
    a_np = None if continuous else np.asarray(c, dtype=np.int64)
    c_values = np.asarray(c, dtype=np.float64) if continuous and c is not None else None
    out = []
    for (target, x1, undefined), t in zip(soft, targets, strict=False):
        other = None if continuous else (a_np + int(t)) % reference.n_groups
        probabilities = _level_probabilities(reference, x_aux, a_np, other, c_values, t, settings.coupling)
        configs, weights = configurations(x1, groups, probabilities)
        out.append((target, configs, weights, undefined))
    return out


#: Gradient evaluations along the segment x -> x′ for the per-feature evidence (midpoint Riemann sum).
EVIDENCE_STEPS = 8


def segment_attribution(target_model, x: torch.Tensor, x1: torch.Tensor, output: TargetOutput,
                        *, steps: int = EVIDENCE_STEPS) -> np.ndarray:
    """Per-feature terms of f(x′) − f(x): integrated gradients along the straight segment from x to x′.

    Parameters
    ----------
    x, x1 : Tensor of shape (b, d)
        Individuals and their counterfactuals.
    steps : int
        Midpoint Riemann sum with this many gradient evaluations.

    Returns
    -------
    ndarray of shape (b, d), float64
        Δxⱼ · mean over the segment of ∂f/∂xⱼ; the terms add up to f(x′) − f(x) up to the quadrature
        error (completeness of integrated gradients, Sundararajan et al. 2017). c's own columns, set to
        the other group in x′, get their share: the direct part of the change.

        A forward-only target (:class:`~faux_checks.method.forward.ForwardOnlyTarget`: trees, scikit-learn,
        ONNX) has no gradients: its terms come from predictions only
        (:func:`~faux_checks.method.forward.forward_attribution`), complete as well.
    """
    if is_forward_only(target_model):
        return forward_attribution(lambda p: predict_probability(target_model, p, output), x, x1)
    x = x.float()
    dx = x1.double() - x.double()                                          # (b, d)
    mean_grad = torch.zeros_like(dx)
    for k in range(steps):
        point = (x.double() + (k + 0.5) / steps * dx).float()
        _, g = target_probability_and_gradient(target_model, point, output)
        mean_grad += g / steps
    return host(mean_grad * dx)


def _pad_to(a: np.ndarray, width: int) -> np.ndarray:
    """(b, C) -> (b, width) with zero columns (configurations of weight 0)."""
    return np.pad(a, ((0, 0), (0, width - a.shape[1])))


def swap_chunk(target_model, aux_raw, x: torch.Tensor, c: np.ndarray | None, *, reference: SwapReference,
               output: TargetOutput, settings: SwapSettings = SwapSettings(), keep: np.ndarray | None = None,
               direct_levels: np.ndarray | None = None, evidence: bool = False) -> SwapChunk:
    """Swap-reading scores of one chunk of individuals.

    Parameters
    ----------
    target_model : torch.nn.Module or TorchScript module
    aux_raw : callable, Tensor (b, d_aux) -> Tensor (b, m) or (b, 1)
        The auxiliary network's raw outputs (logits, or the standardised prediction of c).
    x : Tensor of shape (b, d), float32
        Encoded features as the target sees them.
    c : ndarray of shape (b,) or None
        Group index of each individual (None for a continuous c).
    reference : SwapReference
        Fitted on reference rows in the aux input space (:func:`~faux_checks.method.swap.fit_swap_reference`).
    output : TargetOutput
        Resolved output form of the target.
    settings : SwapSettings
    keep : bool array of shape (d,), optional
        The target's features the aux model sees (all but c's own columns, bad-inputs case C09).
    direct_levels : ndarray of shape (m, d_c) or (1, d_c), optional
        Encoded value of c's own columns for each group, or (continuous) their change per +1 sd of c.
    evidence : bool
        Compute the (b, d) per-feature terms (:func:`segment_attribution`, ``EVIDENCE_STEPS`` target gradients).

    Returns
    -------
    SwapChunk

    Notes
    -----
    Our reading (docs/method.md, "The swap reading"); module docstring of :mod:`faux_checks.method.swap`.

    Device path: with x on a non-CPU device and a torch target (or :data:`faux_checks.method.swap._FORCE_TORCH`
    on the CPU), the move, the matched quantiles (np.interp semantics in torch, :func:`~faux_checks.method.swap._interp_t`),
    the target's probabilities and the running maxima stay on the device; the results come to the host once at
    the chunk's end (:func:`_finish_chunk_t`). The level models of one-hot groups run there too
    (:func:`_level_probabilities_t`); what still crosses inside a chunk is one scalar per one-hot group and target:
    the number of level configurations to read (:func:`~faux_checks.method.levels.configurations`, a shape).
    On the CPU the numpy path is kept (the pinned scores, bit for bit).
    """
    b_rows, d = x.shape
    x = x.float()
    keep_t = torch.as_tensor(np.ones(d, dtype=bool) if keep is None else np.asarray(keep, dtype=bool), device=x.device)
    on_device = _torch_path(x) and not is_forward_only(target_model)
    p0 = (predict_probability_tensor if on_device else predict_probability)(target_model, x, output)
    g0 = None
    if settings.evaluation == "first_order":
        if is_forward_only(target_model):
            raise InputError("swap_evaluation = 'first_order' needs the target's gradient, but the target is "
                             "forward-only; use swap_evaluation = 'finite' (the default)")
        _, g0 = target_probability_and_gradient(target_model, x, output)
    coupled = settings.categorical == "coupled" and bool(reference.levels)
    if coupled and g0 is not None:
        raise InputError("swap_categorical = 'coupled' reads the target's actual change at each level configuration; "
                         "use swap_evaluation = 'finite'")
    if coupled:
        candidates = coupled_inputs(aux_raw, x, c, reference=reference, settings=settings, keep=keep,
                                    direct_levels=direct_levels)
    else:                                                                      # one configuration of weight 1
        candidates = [(t, x1[:, None, :], np.ones((b_rows, 1)), u) for t, x1, u in
                      counterfactual_inputs(aux_raw, x, c, reference=reference, settings=settings, keep=keep,
                                            direct_levels=direct_levels)]
    if on_device:
        return _swap_chunk_t(target_model, x, p0, g0, candidates, output=output,
                             keep=np.ones(d, dtype=bool) if keep is None else np.asarray(keep, dtype=bool),
                             coupled=coupled, evidence=evidence)
    to_np = lambda a: host(a) if isinstance(a, torch.Tensor) else a           # noqa: E731  (forced path, forward-only)
    candidates = [(t, x1, to_np(w), to_np(u)) for t, x1, w, u in candidates]
    best = np.full(b_rows, -np.inf)
    best_p = np.full(b_rows, np.nan)
    best_t = np.zeros(b_rows, dtype=np.int64)
    best_x = x.clone() if evidence else None
    outcomes = weights = None
    undefined = np.zeros(b_rows, dtype=bool)
    direct = np.zeros(b_rows) if not keep_t.all() else None
    rows = torch.arange(b_rows, device=x.device)
    for target, configs, w, undef in candidates:                              # configs (b, C, d), w (b, C)
        undefined |= undef
        C = configs.shape[1]
        if direct is not None:
            only_c = x.clone()
            only_c[:, ~keep_t] = configs[:, 0, ~keep_t]
            direct = np.maximum(direct, np.abs(predict_probability(target_model, only_c, output) - p0))
        p1 = predict_probability(target_model, configs.reshape(b_rows * C, d), output).reshape(b_rows, C)
        if g0 is None:
            change = np.abs(p1 - p0[:, None])                                  # (b, C)
        else:
            change = np.abs(host(((configs.double() - x.double()[:, None, :]) * g0[:, None, :]).sum(dim=2)))
        expected = (w * change).sum(axis=1)
        better = expected > best
        if coupled:
            width = max(C, 0 if outcomes is None else outcomes.shape[1])
            change_p, w_p = _pad_to(change, width), _pad_to(w, width)
            outcomes = change_p if outcomes is None else np.where(better[:, None], change_p, _pad_to(outcomes, width))
            weights = w_p if weights is None else np.where(better[:, None], w_p, _pad_to(weights, width))
        best = np.where(better, expected, best)
        best_p = np.where(better, (w * p1).sum(axis=1), best_p)
        best_t = np.where(better, target, best_t)
        if best_x is not None:
            likely = configs[rows, torch.as_tensor(w.argmax(axis=1), device=x.device)]   # (b, d): the most probable one
            better_t = torch.as_tensor(better, device=x.device)
            best_x[better_t] = likely[better_t]
    undefined |= ~np.isfinite(best)
    ev = None
    if evidence:
        ev = segment_attribution(target_model, x, best_x, output)
        ev[undefined] = np.nan
    return SwapChunk(scores=np.where(undefined, np.nan, best), undefined=undefined, probability=p0,
                     counterfactual_probability=np.where(undefined, np.nan, best_p), counterfactual_target=best_t,
                     direct=direct, evidence=ev, outcomes=outcomes, outcome_weights=weights,
                     counterfactual=None if best_x is None else host(best_x))


def _swap_chunk_t(target_model, x: torch.Tensor, p0: torch.Tensor, g0: torch.Tensor | None, candidates, *,
                  output: TargetOutput, keep: np.ndarray, coupled: bool, evidence: bool) -> SwapChunk:
    """The candidate loop of :func:`swap_chunk` in torch on x's device (the chunk's device path).

    ``x`` (b, d) float32 and ``p0`` (b,) float64 on the device; ``candidates`` as in :func:`swap_chunk` (the
    configurations on the device; ``undefined`` and ``weights`` Tensors there, or ndarrays, copied up). Every running maximum stays on the device; :func:`_finish_chunk_t` brings the
    results to the host once, at the chunk's end.
    """
    b_rows, d = x.shape
    dev = x.device
    f64 = dict(dtype=torch.float64, device=dev)
    best = torch.full((b_rows,), -np.inf, **f64)
    best_p = torch.full((b_rows,), np.nan, **f64)
    best_t = torch.zeros(b_rows, dtype=torch.int64, device=dev)
    best_x = x.clone() if evidence else None
    outcomes = weights = None
    undefined = torch.zeros(b_rows, dtype=torch.bool, device=dev)
    drop = torch.as_tensor(np.flatnonzero(~keep), device=dev)               # c's own columns (target inputs)
    direct = None if keep.all() else torch.zeros(b_rows, **f64)
    rows = torch.arange(b_rows, device=dev)
    pad = lambda a, width: torch.nn.functional.pad(a, (0, width - a.shape[1]))   # noqa: E731
    for target, configs, w, undef in candidates:                              # configs (b, C, d), w (b, C)
        undefined |= torch.as_tensor(undef, device=dev)
        w = torch.as_tensor(w, **f64)
        target = torch.as_tensor(target, device=dev)
        C = configs.shape[1]
        if direct is not None:
            only_c = x.clone()
            only_c[:, drop] = configs[:, 0, drop]
            direct = torch.maximum(direct, (predict_probability_tensor(target_model, only_c, output) - p0).abs())
        p1 = predict_probability_tensor(target_model, configs.reshape(b_rows * C, d), output).reshape(b_rows, C)
        if g0 is None:
            change = (p1 - p0[:, None]).abs()                                  # (b, C)
        else:
            change = ((configs.double() - x.double()[:, None, :]) * g0[:, None, :]).sum(dim=2).abs()
        expected = (w * change).sum(dim=1)
        better = expected > best
        if coupled:
            width = max(C, 0 if outcomes is None else outcomes.shape[1])
            change_p, w_p = pad(change, width), pad(w, width)
            outcomes = change_p if outcomes is None else torch.where(better[:, None], change_p, pad(outcomes, width))
            weights = w_p if weights is None else torch.where(better[:, None], w_p, pad(weights, width))
        best = torch.where(better, expected, best)
        best_p = torch.where(better, (w * p1).sum(dim=1), best_p)
        best_t = torch.where(better, target, best_t)
        if best_x is not None:
            likely = configs[rows, w.argmax(dim=1)]                            # (b, d): the most probable one
            best_x = torch.where(better[:, None], likely, best_x)
    undefined |= ~torch.isfinite(best)
    return _finish_chunk_t(target_model, x, output, best=best, best_p=best_p, best_t=best_t, best_x=best_x,
                           undefined=undefined, p0=p0, direct=direct, outcomes=outcomes, weights=weights)


def _finish_chunk_t(target_model, x, output, *, best, best_p, best_t, best_x, undefined, p0, direct, outcomes,
                    weights) -> SwapChunk:
    """The device path's results as a :class:`SwapChunk`: the one place its tensors come to the host (its end)."""
    nan = torch.tensor(np.nan, dtype=torch.float64, device=x.device)
    und = host(undefined)
    ev = None
    if best_x is not None:
        ev = segment_attribution(target_model, x, best_x, output)
        ev[und] = np.nan
    opt = lambda t: None if t is None else host(t)                           # noqa: E731
    return SwapChunk(scores=host(torch.where(undefined, nan, best)), undefined=und, probability=host(p0),
                     counterfactual_probability=host(torch.where(undefined, nan, best_p)),
                     counterfactual_target=host(best_t), direct=opt(direct), evidence=ev, outcomes=opt(outcomes),
                     outcome_weights=opt(weights), counterfactual=opt(best_x))
