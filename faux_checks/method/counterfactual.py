"""The counterfactual inputs of one chunk of individuals under the swap reading.

For each individual and each counterfactual target (another group, or ±1 sd of a continuous c)
:func:`counterfactual_inputs` moves the auxiliary model's output to the matched value
(:mod:`faux_checks.method.goals`) along the minimum-norm direction (:func:`~faux_checks.method.swap.swap_displacement`),
or every matched feature to its own matched value, and sets c's own columns when the target takes them as inputs;
:func:`coupled_inputs` enumerates the level configurations of one-hot groups. :func:`faux_checks.method.chunk.swap_chunk`
reads the target's prediction there; the maths it calls are the pure functions of :mod:`faux_checks.method.swap`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Sequence, cast

import numpy as np
import torch

from .._device import host
from ..errors import InputError
from .goals import matched_goals
from .levels import (comonotone_transition, comonotone_transition_t, configurations, gumbel_transition,
                     gumbel_transition_t)
from .swap import SwapReference, pair_values, swap_displacement
from .torch_path import use_torch_path

__all__ = ["MAX_STRETCH", "coupled_inputs", "SwapSettings", "counterfactual_inputs", "fit_floors"]


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
    Our reading: a row whose aux gradient barely meets the metric's directions moves less than
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
    out: list[tuple[np.ndarray, torch.Tensor, np.ndarray]] = []
    for t in targets:
        other: Any = None if continuous else (np.asarray(c, dtype=np.int64) + int(t)) % reference.n_groups
        target = np.full(len(x), int(t), dtype=np.int64) if continuous else other
        x1 = x.clone()
        if not keep.all():
            _set_direct(x, x1, keep, direct_levels, other, t, continuous)
        out.append((target, x1, np.zeros(len(x), dtype=bool)))
    return out


def _matched_inputs(x: torch.Tensor, c, *, reference: SwapReference, settings: SwapSettings, keep: np.ndarray,
                    direct_levels) -> list[tuple[np.ndarray, torch.Tensor, np.ndarray]]:
    """``metric = "matched"``: every matched feature takes its own matched value (:class:`~faux_checks.method.matching.FeatureMatching`).

    One-hot groups with a level model move by their coupling's expected one-hot (``categorical = "soft"``) or its
    most probable level (``"snap"``); with ``"coupled"`` they stay and :func:`coupled_inputs` switches them.
    """
    continuous = reference.kind == "continuous"
    x = x.float()
    keep_t = torch.as_tensor(keep, device=x.device)
    x_aux = x[:, keep_t] if not keep.all() else x
    matching = reference.matching
    assert matching is not None, "counterfactual_inputs calls this only for a fitted matching"
    positions = torch.as_tensor(matching.positions, device=x.device)
    every = len(matching.positions) == x_aux.shape[1] and bool((matching.positions == np.arange(x_aux.shape[1])).all())
    on_device = use_torch_path(x)
    targets = [1.0, -1.0] if continuous else list(range(1, reference.n_groups))
    a_np: Any = None if continuous else np.asarray(c, dtype=np.int64)   # group index; None for a continuous c
    c_values = np.asarray(c, dtype=np.float64) if continuous and c is not None else None
    if continuous and c_values is None:
        raise InputError("the matched move of a continuous protected attribute needs each individual's value")
    out = []
    both = matching.continuous_values(x_aux, reference.admissible, c_values, targets) if continuous else None
    every_other = None if continuous else matching.moved_t(               # (targets, b, d_m) float32, one lookup
        x_aux, reference.admissible, a_np, np.stack([(a_np + int(t)) % reference.n_groups for t in targets]))
    for i, t in enumerate(targets):
        other: Any = None if continuous else (a_np + int(t)) % reference.n_groups
        target = np.full(len(x), int(t), dtype=np.int64) if continuous else other
        if both is not None:
            values = torch.as_tensor(both[i], device=x.device)                  # (b, d_m) float64
            block, undefined = values.float(), ~torch.isfinite(values.sum(dim=1))   # a NaN or inf makes the sum one
        else:
            block, undefined = (part[i] for part in cast(tuple, every_other))
        if every:
            moved = block                                                       # float32, the tables' layout
        else:
            moved = x_aux.clone()
            moved[:, positions] = block
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
        undefined = undefined if on_device else host(undefined)
        if keep.all():
            x1 = moved
        else:
            x1 = x.clone()
            x1[:, keep_t] = moved
            _set_direct(x, x1, keep, direct_levels, other, t, continuous)
        out.append((target, x1, undefined))
    return out


def _moved(aux_raw, x_aux: torch.Tensor, v: torch.Tensor, grad: torch.Tensor, goal: torch.Tensor, floors, *,
           pair: tuple, metric: torch.Tensor, free_t: torch.Tensor, all_free: bool, on_device: bool,
           settings: SwapSettings):
    """One target's move of the auxiliary inputs ``x_aux`` (b, d_aux) toward ``goal``: the swap displacement of the
    free features, ``settings``' line search and further Newton steps, categorical snapping.

    Returns the moved inputs (b, d_aux) float32 and the rows whose move is undefined (bool, on x's device on the
    torch path, else an ndarray).
    """
    a_t, b_t = pair
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
    return moved, undefined


def counterfactual_inputs(aux_raw, x: torch.Tensor, c: np.ndarray | None, *, reference: SwapReference,
                          settings: SwapSettings = SwapSettings(), keep: np.ndarray | None = None,
                          direct_levels: np.ndarray | None = None) -> list[tuple[np.ndarray, torch.Tensor, np.ndarray]]:
    """The estimated counterfactual inputs of one chunk, one per counterfactual target.

    Parameters are those of :func:`~faux_checks.method.chunk.swap_chunk`.

    Returns
    -------
    list of (target, x1, undefined)
        ``target`` (b,) int64: the other group of each row (continuous c: +1 or −1 sd, the same for every
        row); ``x1`` Tensor (b, d) float32: the counterfactual inputs as the target sees them;
        ``undefined`` (b,) bool: rows whose move could not be computed (x1 equals x there); an ndarray, or on
        the torch path (x on a non-CPU device, or :data:`faux_checks.method.torch_path._FORCE_TORCH`) a bool Tensor on
        x's device: the matched quantiles then run in torch there (:func:`~faux_checks.method.goals._goals_t`,
        :meth:`~faux_checks.method.matching.FeatureMatching.values`), no transfer to the host.
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
    on_device = use_torch_path(x)                                               # the matched quantiles in torch too
    targets = [1.0, -1.0] if continuous else list(range(1, reference.n_groups))
    c_values = None
    a_np: Any                                                                 # group index; None for a continuous c
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
    other: Any                                                               # the other group per row; None for a continuous c
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
        goal = torch.as_tensor(matched_goals(reference, v if on_device else host(v),
                                      x_aux if reference.admissible.any() else None, a_np, other, t, c_values),
                               device=device)
        floors = _row_floors(reference, a_np, other, b_rows, device)
        moved, undefined = _moved(aux_raw, x_aux, v, grad, goal, floors, pair=(a_t, b_t), metric=metric,
                                  free_t=free_t, all_free=all_free, on_device=on_device, settings=settings)
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

    On the torch path (:func:`~faux_checks.method.torch_path.torch_path` of x_aux): the same in torch on x_aux's device,
    (b, K) float64 Tensors there (:meth:`~faux_checks.method.levels.LevelModel.logits_t`,
    :func:`~faux_checks.method.levels.gumbel_transition_t`, :func:`~faux_checks.method.levels.comonotone_transition_t`).
    """
    if use_torch_path(x_aux):
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
    a_np: Any = None if continuous else np.asarray(c, dtype=np.int64)   # group index; None for a continuous c
    c_values = np.asarray(c, dtype=np.float64) if continuous and c is not None else None
    out = []
    for (target, x1, undefined), t in zip(soft, targets, strict=False):
        other = None if continuous else (a_np + int(t)) % reference.n_groups
        probabilities = _level_probabilities(reference, x_aux, a_np, other, c_values, t, settings.coupling)
        configs, weights = configurations(x1, groups, probabilities)
        out.append((target, configs, weights, undefined))
    return out
