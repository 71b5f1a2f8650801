"""What the data cannot identify about a categorical proxy's move: its readings under several couplings, and bounds.

A categorical (one-hot) feature that the counterfactual moves switches level with the probabilities of a level
model (:mod:`faux_checks.method.levels`): each person's level distribution in their own group, p_from, and in the
other group, p_to. Observational data identify these two marginals, never their coupling: which level a person
at level k would have had in the other group. Two couplings are both consistent with the data:

- **comonotone** (inverse CDF): a person keeps their rank along the levels ordered by the level model's
  likelihood ratio (:func:`~faux_checks.method.levels.comonotone_transition`);
- **Gumbel-max**: a person keeps the Gumbel noise of the level model read as a structural model
  (:func:`~faux_checks.method.levels.gumbel_transition`; Oberst & Sontag 2019).

:func:`coupling_readings` gives the flagged fraction under each (the same move of every other feature), and
:func:`coupling_bounds` the Fréchet bounds over **every** coupling of the two marginals, per person
(:func:`frechet_bounds`): for a person at level configuration k with P_from(k) = p, and S the counterfactual
configurations at which the target's change exceeds δ,

    max(0, 1 − P_to(S̄) / p)  ≤  P(change > δ | k)  ≤  min(1, P_to(S) / p)

(the row k of a coupling matrix is any vector r ≤ P_to with total p; the other rows can always complete it).
The same bounds with S = "any configuration but k" bound the share of people whose level can change. The
population bounds are the means of the per-person ones: outer bounds (people with the same features share
one coupling in a structural model, which can only narrow them). Our reading; evidence in docs/benchmark.md
("Categorical proxies: the coupling").
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from ..errors import InputError
from ._batching import as_tensor, iter_chunks
from .counterfactual import counterfactual_inputs
from .levels import configurations
from .output import predict_probability, resolve_output_form

__all__ = ["COUPLINGS", "CouplingBounds", "coupling_bounds", "coupling_readings", "frechet_bounds",
           "moves_categorical"]

#: The couplings of a categorical move read by :func:`coupling_readings` (both consistent with the data).
COUPLINGS = ("comonotone", "gumbel")
#: Joint level configurations enumerated per person for the bounds (the rest of P_to is counted as unknown).
BOUND_CONFIGURATIONS = 64


@dataclass(frozen=True)
class CouplingBounds:
    """Fréchet bounds over every coupling of a categorical move's level distributions (:func:`coupling_bounds`).

    Attributes
    ----------
    flagged_lower, flagged_upper : float
        Bounds on the flagged fraction (undefined rows counted as flagged, as in the decision), in [0, 1].
    change_lower, change_upper : float
        Bounds on the share of people whose level configuration can change.
    enumerated_mass : float
        Mean share of P_to the enumerated configurations carry (1.0 for one group of at most 64 levels); the
        rest is counted on both sides of each bound.
    n : int
        Rows read.
    """

    flagged_lower: float
    flagged_upper: float
    change_lower: float
    change_upper: float
    enumerated_mass: float
    n: int

    def to_dict(self) -> dict:
        """JSON-ready fields."""
        return dataclasses.asdict(self)


def moves_categorical(tester) -> bool:
    """Whether the tester's swap reading switches the level of at least one free categorical feature.

    True for variant ``swap`` with ``categorical = "coupled"`` and a reference with a level model, unless every
    feature is held (nothing moves).
    """
    reference = getattr(tester, "reference", None)
    return (getattr(tester, "variant", None) == "swap" and tester.swap.categorical == "coupled"
            and reference is not None and bool(reference.levels) and not reference.nothing_free)


def frechet_bounds(p_current: np.ndarray, to_mass: np.ndarray, hit: np.ndarray, residual: np.ndarray | float = 0.0
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Per-person bounds on P(counterfactual configuration in S | current configuration) over every coupling.

    Parameters
    ----------
    p_current : ndarray of shape (b,)
        P_from of each person's current configuration (> 0).
    to_mass : ndarray of shape (b, C)
        P_to of C enumerated counterfactual configurations (not renormalised).
    hit : bool ndarray of shape (b, C)
        Whether each configuration is in S (e.g. the target's change there exceeds δ).
    residual : ndarray of shape (b,) or float
        P_to of the configurations not enumerated (unknown: counted in S for the upper bound and out of it for the
        lower one).

    Returns
    -------
    lower, upper : ndarray of shape (b,), in [0, 1]
        ``max(0, 1 − (P_to(S̄) + r) / p)`` and ``min(1, (P_to(S) + r) / p)`` (module docstring; Fréchet–Hoeffding
        bounds of one row of a coupling matrix).

    Raises
    ------
    InputError
        Shapes that do not match.
    """
    to_mass = np.asarray(to_mass, dtype=np.float64)
    hit = np.asarray(hit, dtype=bool)
    p = np.maximum(np.asarray(p_current, dtype=np.float64), 1e-300)
    if to_mass.shape != hit.shape or to_mass.shape[:1] != p.shape:
        raise InputError(f"frechet_bounds: to_mass {to_mass.shape}, hit {hit.shape} and p_current {p.shape} do not "
                         "match ((b, C), (b, C), (b,))")
    r = np.broadcast_to(np.asarray(residual, dtype=np.float64), p.shape)
    inside = (to_mass * hit).sum(axis=1) + r
    outside = (to_mass * ~hit).sum(axis=1) + r
    return np.clip(1.0 - outside / p, 0.0, 1.0), np.clip(inside / p, 0.0, 1.0)


def coupling_readings(tester, X, c, delta: float, couplings: Sequence[str] = COUPLINGS) -> dict[str, float]:
    """The flagged fraction at δ under each coupling of the categorical move (everything else as the tester reads it).

    Parameters
    ----------
    tester : FAuxTester
        Variant swap with a fitted reference (:meth:`~faux_checks.method.faux.FAuxTester.fit_reference`).
    X : ndarray or Tensor of shape (n, d)
        Encoded rows as the target sees them.
    c : ndarray of shape (n,)
        Group index (or continuous value) of each row.
    delta : float
        δ, probability points.
    couplings : sequence of {"comonotone", "gumbel"}

    Returns
    -------
    dict of coupling -> float
        Mean of :meth:`~faux_checks.method.result.LICResult.decision_weights` (an undefined row counts as flagged).

    Raises
    ------
    InputError
        An unknown coupling, and what :meth:`~faux_checks.method.faux.FAuxTester.evaluate` raises.
    """
    bad = [k for k in couplings if k not in COUPLINGS]
    if bad:
        raise InputError(f"unknown coupling(s) {bad}; use {list(COUPLINGS)}")
    out = {}
    for name in couplings:
        reader = copy.copy(tester)
        reader.swap = dataclasses.replace(tester.swap, coupling=name)
        reader.probe_batches = False
        reader.progress = False
        reader.device = "cpu"
        lic = reader.evaluate(X, c, evidence=False)
        out[name] = float(np.mean(lic.decision_weights(delta)))
    return out


def _level_distributions(reference, x_aux: torch.Tensor, a, other, c_values, t):
    """Per level model: (p_from, p_to, current) of each row, (b, K), (b, K), (b,) (numpy, float64 / int64)."""
    xa = x_aux[:, torch.as_tensor(reference.admissible)].double().numpy()
    out = []
    for lm in reference.levels:
        current = x_aux[:, torch.as_tensor(lm.positions)].argmax(dim=1).numpy()
        c_from, c_to = (c_values, c_values + t * lm.c_sd) if reference.kind == "continuous" else (a, other)
        out.append((lm.probabilities(xa, c_from), lm.probabilities(xa, c_to), current))
    return out


def _chunk_bounds(tester, x: torch.Tensor, c, keep: np.ndarray, output, delta: float):
    """(flag lower, flag upper, change lower, change upper, enumerated mass), each (b,), for one chunk."""
    reference = tester.reference
    continuous = reference.kind == "continuous"
    targets = [1.0, -1.0] if continuous else list(range(1, reference.n_groups))
    a: Any = None if continuous else np.asarray(c, dtype=np.int64)
    c_values = np.asarray(c, dtype=np.float64) if continuous and c is not None else None
    moved = counterfactual_inputs(tester.aux_model.net_, x, c, reference=reference, settings=tester.swap, keep=keep,
                                  direct_levels=tester.direct_levels)
    to_target = np.flatnonzero(keep)
    groups = [to_target[lm.positions] for lm in reference.levels]
    p0 = predict_probability(tester.target_model, x, output)
    x_aux = x[:, torch.as_tensor(keep)]
    b = len(x)
    rows = np.arange(b)
    best: list[np.ndarray] = [np.zeros(b) for _ in range(5)]
    undefined: np.ndarray = np.zeros(b, dtype=bool)
    for (_, x1, undef), t in zip(moved, targets, strict=True):
        other: Any = None if continuous else (a + int(t)) % reference.n_groups
        dists = _level_distributions(reference, x_aux, a, other, c_values, t)
        configs, weights = configurations(x1, groups, [d[1] for d in dists], max_configs=BOUND_CONFIGURATIONS,
                                          min_probability=0.0)
        C = configs.shape[1]
        mass, p_cur, stay = np.asarray(weights) > 0, np.ones(b), np.ones((b, C), dtype=bool)
        mass = mass.astype(np.float64)
        for idx, (p_from, p_to, current) in zip(groups, dists, strict=True):
            level = configs[:, :, torch.as_tensor(idx)].argmax(dim=2).numpy()     # (b, C)
            mass *= p_to[rows[:, None], level]
            p_cur *= p_from[rows, current]
            stay &= level == current[:, None]
        residual = np.clip(1.0 - mass.sum(axis=1), 0.0, 1.0)
        p1 = predict_probability(tester.target_model, configs.reshape(b * C, -1), output).reshape(b, C)
        flag = frechet_bounds(p_cur, mass, np.abs(p1 - p0[:, None]) > delta, residual)
        change = frechet_bounds(p_cur, mass, ~stay, residual)
        for i, v in enumerate((*flag, *change, 1.0 - residual)):
            best[i] = np.maximum(best[i], v)
        undefined |= np.asarray(undef, dtype=bool)
    best[0] = np.where(undefined, 1.0, best[0])
    best[1] = np.where(undefined, 1.0, best[1])
    return best


def coupling_bounds(tester, X, c, delta: float, *, chunk_size: int = 512) -> CouplingBounds | None:
    """Fréchet bounds over every coupling of the categorical move's level distributions (module docstring).

    Each person's other features move as the tester moves them; their level configuration then ranges over
    the at most :data:`BOUND_CONFIGURATIONS` most probable configurations under P_to (independent groups, as in
    :func:`~faux_checks.method.levels.configurations`), the target read at each. With several counterfactual
    groups (multi-class c) or ±1 sd (continuous c) a person's bound is the largest over them.

    Parameters
    ----------
    tester : FAuxTester
        Variant swap with a fitted reference.
    X : ndarray or Tensor of shape (n, d)
    c : ndarray of shape (n,)
    delta : float
    chunk_size : int
        Rows per chunk (each reads up to 64 configurations).

    Returns
    -------
    CouplingBounds, or None when the tester moves no categorical feature (:func:`moves_categorical`).

    Raises
    ------
    InputError
        What the move raises on bad input (:func:`~faux_checks.method.counterfactual.counterfactual_inputs`).
    """
    if not moves_categorical(tester):
        return None
    X = as_tensor(X)
    n, d = X.shape
    mask = np.zeros(d, dtype=bool) if tester.protected_mask is None else np.asarray(tester.protected_mask, bool)
    keep = ~mask
    output = resolve_output_form(tester.target_model, X[: min(n, 256)], tester.output)
    parts = []
    for sl in iter_chunks(n, chunk_size):                                  # the move needs the aux gradient
        parts.append(_chunk_bounds(tester, X[sl].float(), None if c is None else np.asarray(c)[sl], keep, output, delta))
    cols = [np.concatenate([p[i] for p in parts]) for i in range(5)]
    return CouplingBounds(flagged_lower=float(cols[0].mean()), flagged_upper=float(cols[1].mean()),
                          change_lower=float(cols[2].mean()), change_upper=float(cols[3].mean()),
                          enumerated_mass=float(cols[4].mean()), n=int(n))
