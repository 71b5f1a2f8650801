"""One chunk of individuals through the swap reading: the target's change at the counterfactual inputs.

:func:`swap_chunk` is the loop body of :meth:`faux_checks.method.faux.FAuxTester.evaluate` for
``variant="swap"``: it reads the target's prediction at the counterfactual inputs of
:mod:`faux_checks.method.counterfactual` (one per other group, or ±1 sd of a continuous c), keeps the
largest change per individual (numpy on the CPU, :func:`_swap_chunk_t` in torch on a device), with level
configurations the chance that the change toward any other group exceeds δ (:func:`union_outcomes`), and the
per-feature evidence along the segment x -> x′ (:func:`segment_attribution`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .._device import host
from ..errors import InputError
from .counterfactual import SwapSettings, counterfactual_inputs, coupled_inputs
from .forward import forward_attribution, is_forward_only
from .gradients import target_probability_and_gradient
from .output import TargetOutput, predict_probability, predict_probability_tensor
from .swap import SwapReference
from .torch_path import use_torch_path

__all__ = ["EVIDENCE_STEPS", "SwapChunk", "segment_attribution", "swap_chunk", "union_outcomes"]


@dataclass(frozen=True)
class SwapChunk:
    """Per-individual output of :func:`swap_chunk` for b rows (numpy, float64 unless stated).

    Attributes
    ----------
    scores : (b,)  |Δŷ| of the counterfactual with the largest change (with ``outcomes``: their expected value);
        NaN where undefined.
    undefined : (b,) bool
    probability : (b,)  ŷ = P(y = target_class | x).
    counterfactual_probability : (b,)  ŷ at the counterfactual with the largest (expected) change.
    counterfactual_target : (b,) int64  its other group (index), or +1 / −1 (sd) for continuous c.
    direct : (b,) or None  |Δŷ| from c's own columns alone (when they are target inputs).
    evidence : (b, d) or None  per-feature terms of the change: integrated gradients along x -> x′ (:func:`segment_attribution`).
    outcomes : (b, C) or None  ``categorical = "coupled"``: |Δŷ| of the level configurations of every counterfactual
        target, largest first (:func:`union_outcomes`; one target: its own configurations).
    outcome_weights : (b, C) or None  their weights (rows sum to 1): the weight above δ is
        min(1, Σ_t P_t(change > δ)), the chance that moving to some other group changes ŷ by more than δ.
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


def swap_chunk(target_model, aux_raw, x: torch.Tensor, c: np.ndarray | None, *, reference: SwapReference,
               output: TargetOutput, settings: SwapSettings = SwapSettings(), keep: np.ndarray | None = None,  # noqa: B008 - frozen
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

    Device path: with x on a non-CPU device and a torch target (or :data:`faux_checks.method.torch_path._FORCE_TORCH`
    on the CPU), the move, the matched quantiles (np.interp semantics in torch, :func:`~faux_checks.method.quantiles.interp_t`),
    the target's probabilities and the running maxima stay on the device; the results come to the host once at
    the chunk's end (:func:`_finish_chunk_t`). The level models of one-hot groups run there too
    (:func:`~faux_checks.method.counterfactual._level_probabilities_t`); what still crosses inside a chunk is one scalar per one-hot group and target:
    the number of level configurations to read (:func:`~faux_checks.method.levels.configurations`, a shape).
    On the CPU the numpy path is kept (the pinned scores, bit for bit).
    """
    b_rows, d = x.shape
    x = x.float()
    keep_np = np.ones(d, dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    on_device = use_torch_path(x) and not is_forward_only(target_model)
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
    loop = _swap_chunk_t if on_device else _swap_chunk_np
    return loop(target_model, x, p0, g0, candidates, output=output, keep=keep_np, coupled=coupled, evidence=evidence)


def union_outcomes(changes: list[np.ndarray], weights: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """One distribution of the largest change over several counterfactual targets, from each target's own.

    Parameters
    ----------
    changes, weights : lists of k ndarrays of shape (b, C_t)
        Per counterfactual target t: |Δŷ| at each level configuration and its probability (rows sum to 1).

    Returns
    -------
    outcomes, outcome_weights : ndarrays of shape (b, Σ C_t)
        Every target's configurations, largest change first, each with the weight that keeps the running total at
        most 1: P(change > δ) = min(1, Σ_t P_t(change_t > δ)) at every δ, rows summing to min(1, Σ_t 1) = 1.
        A NaN change sorts last. One target (a binary c) is returned as given.

    Notes
    -----
    A person is affected when moving to **any** other group changes the prediction by more than δ (IFS, the
    largest change over the other groups). Each target's configuration probabilities come from its own level
    model; how the configurations of two targets occur together is not given by the data, and the chance that at
    least one exceeds δ lies between max_t P_t and min(1, Σ_t P_t) (Boole's inequality and its Fréchet bound,
    sharp at each δ). The flag reads the upper end: the target whose change is largest alone reads the lower one,
    an under-read when the targets exceed δ in different level configurations (a 3-class c with a categorical
    proxy: docs/method.md, "The swap reading").
    """
    if len(changes) == 1:
        return changes[0], weights[0]
    v, w = np.concatenate(changes, axis=1), np.concatenate(weights, axis=1)
    order = np.argsort(-np.where(np.isnan(v), -np.inf, v), axis=1, kind="stable")
    v, w = np.take_along_axis(v, order, axis=1), np.take_along_axis(w, order, axis=1)
    before = np.cumsum(w, axis=1) - w                                          # weight of the larger changes
    return v, np.clip(1.0 - before, 0.0, w)


def _union_outcomes_t(changes: list[torch.Tensor], weights: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`union_outcomes` in torch on the tensors' device (the same operations, the same order)."""
    if len(changes) == 1:
        return changes[0], weights[0]
    v, w = torch.cat(changes, dim=1), torch.cat(weights, dim=1)
    key = torch.where(torch.isnan(v), torch.tensor(-np.inf, dtype=v.dtype, device=v.device), v)
    order = torch.sort(-key, dim=1, stable=True).indices
    v, w = torch.gather(v, 1, order), torch.gather(w, 1, order)
    before = torch.cumsum(w, dim=1) - w
    return v, torch.minimum(torch.clamp(1.0 - before, min=0.0), w)


def _swap_chunk_np(target_model, x: torch.Tensor, p0: np.ndarray, g0: torch.Tensor | None, candidates, *,
                   output: TargetOutput, keep: np.ndarray, coupled: bool, evidence: bool) -> SwapChunk:
    """The candidate loop of :func:`swap_chunk` in numpy (the CPU path; the pinned scores, bit for bit).

    ``candidates`` as in :func:`swap_chunk`: (target, configurations (b, C, d), weights (b, C), undefined (b,)).
    """
    b_rows, d = x.shape
    keep_t = torch.as_tensor(keep, device=x.device)
    to_np = lambda a: host(a) if isinstance(a, torch.Tensor) else a           # noqa: E731  (forced path, forward-only)
    candidates = [(t, x1, to_np(w), to_np(u)) for t, x1, w, u in candidates]
    best = np.full(b_rows, -np.inf)
    best_p = np.full(b_rows, np.nan)
    best_t = np.zeros(b_rows, dtype=np.int64)
    best_x = x.clone() if evidence else None
    changes, weights = [], []
    undefined = np.zeros(b_rows, dtype=bool)
    direct = np.zeros(b_rows) if not keep.all() else None
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
        changes.append(change)
        weights.append(w)
        best = np.where(better, expected, best)
        best_p = np.where(better, (w * p1).sum(axis=1), best_p)
        best_t = np.where(better, target, best_t)
        if best_x is not None:
            likely = configs[rows, torch.as_tensor(w.argmax(axis=1), device=x.device)]   # (b, d): the most probable one
            better_t = torch.as_tensor(better, device=x.device)
            best_x[better_t] = likely[better_t]
    outcomes = outcome_weights = None
    if coupled:
        outcomes, outcome_weights = union_outcomes(changes, weights)
        if len(changes) > 1:                                                   # the expected largest change
            union = np.where(outcome_weights > 0, outcome_weights * outcomes, 0.0).sum(axis=1)
            best = np.where(np.isfinite(best), union, best)
    undefined |= ~np.isfinite(best)
    ev = None
    if evidence:
        ev = segment_attribution(target_model, x, best_x, output)
        ev[undefined] = np.nan
    return SwapChunk(scores=np.where(undefined, np.nan, best), undefined=undefined, probability=p0,
                     counterfactual_probability=np.where(undefined, np.nan, best_p), counterfactual_target=best_t,
                     direct=direct, evidence=ev, outcomes=outcomes, outcome_weights=outcome_weights,
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
    changes, weights = [], []
    undefined = torch.zeros(b_rows, dtype=torch.bool, device=dev)
    drop = torch.as_tensor(np.flatnonzero(~keep), device=dev)               # c's own columns (target inputs)
    direct = None if keep.all() else torch.zeros(b_rows, **f64)
    rows = torch.arange(b_rows, device=dev)
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
        changes.append(change)
        weights.append(w)
        best = torch.where(better, expected, best)
        best_p = torch.where(better, (w * p1).sum(dim=1), best_p)
        best_t = torch.where(better, target, best_t)
        if best_x is not None:
            likely = configs[rows, w.argmax(dim=1)]                            # (b, d): the most probable one
            best_x = torch.where(better[:, None], likely, best_x)
    outcomes = outcome_weights = None
    if coupled:
        outcomes, outcome_weights = _union_outcomes_t(changes, weights)
        if len(changes) > 1:                                                   # the expected largest change
            union = torch.where(outcome_weights > 0, outcome_weights * outcomes, 0.0).sum(dim=1)
            best = torch.where(torch.isfinite(best), union, best)
    undefined |= ~torch.isfinite(best)
    return _finish_chunk_t(target_model, x, output, best=best, best_p=best_p, best_t=best_t, best_x=best_x,
                           undefined=undefined, p0=p0, direct=direct, outcomes=outcomes, weights=outcome_weights)


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
