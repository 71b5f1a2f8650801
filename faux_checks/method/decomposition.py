"""Per-individual decomposition of the target's change into parts that add up to it exactly.

The swap reading moves an individual x to a counterfactual x′ (c's own columns set to the other group,
the proxies moved to the matched values, admissible and held columns unchanged). The change
f(x′) − f(x) is split over a few groups of columns (direct: c's own columns; proxies: the non-admissible
columns; admissible: the declared ones) by the Shapley value of the cooperative game

    v(S) = f(x with the columns of the groups in S set to x′) − f(x),     S ⊆ {groups},

evaluated exactly over all 2^k subsets (k ≤ :data:`MAX_GROUPS`). The parts add up to f(x′) − f(x) for
any target (efficiency), a group whose columns do not move or that the target does not read gets 0
(dummy player; up to float32 rounding when the target's kernels differ by an ulp between batch positions, ~1e-8), and for a target linear in its inputs each part is Σⱼ∈group wⱼ (x′ⱼ − xⱼ), the closed form
(Shapley 1953; for groups of features, the "grouped Shapley value" of e.g. Jullum et al. 2021). Only
predictions are needed, so trees and ONNX files decompose as torch networks do.

The parts must sum to the person's total: per-column integrated gradients
(:func:`faux_checks.method.chunk.segment_attribution`) add up only to within quadrature error on a
non-linear target; the grouped Shapley value adds up exactly, with 2^k forward passes (8 for three groups).
"""

from __future__ import annotations

from itertools import combinations
from math import factorial
from typing import Callable, Mapping

import numpy as np
import torch

from ..errors import InputError

__all__ = ["MAX_GROUPS", "grouped_shapley"]

#: At most this many groups (2^k forward passes per individual).
MAX_GROUPS = 6


def grouped_shapley(predict: Callable[[torch.Tensor], np.ndarray], x: torch.Tensor, x1: torch.Tensor,
                    groups: Mapping[str, np.ndarray], *, chunk_rows: int = 8192) -> dict[str, np.ndarray]:
    """Exact Shapley value of each column group for the change predict(x′) − predict(x).

    Parameters
    ----------
    predict : callable, Tensor (m, d) float32 -> ndarray (m,)
        The target's output (e.g. P(y = target class | x) in probability points).
    x, x1 : Tensor of shape (b, d)
        Individuals and their counterfactuals.
    groups : mapping name -> bool ndarray of shape (d,)
        Disjoint masks over the d inputs that together cover every input where x and x′ differ
        (an empty mask is allowed: its part is 0).
    chunk_rows : int
        Rows per forward pass (each pass holds at most ``chunk_rows`` inputs).

    Returns
    -------
    dict name -> ndarray of shape (b,), float64
        Each group's part; ``sum(parts) == predict(x1) - predict(x)`` up to floating point
        (the differences are taken in float64 of the target's float32 outputs).

    Raises
    ------
    InputError
        Shapes differ, more than ``MAX_GROUPS`` groups, the masks overlap, or an input where x and x′ differ
        is in no group (its change would be attributed to nobody).
    """
    if x.shape != x1.shape or x.ndim != 2:
        raise InputError(f"x and x1 must both be (b, d); got {tuple(x.shape)} and {tuple(x1.shape)}")
    names = list(groups)
    k = len(names)
    if not 1 <= k <= MAX_GROUPS:
        raise InputError(f"grouped_shapley takes 1 to {MAX_GROUPS} groups, got {k}")
    d = x.shape[1]
    masks = []
    for name in names:
        m = np.asarray(groups[name], dtype=bool)
        if m.shape != (d,):
            raise InputError(f"group {name!r}: mask of shape {m.shape}, expected ({d},)")
        masks.append(m)
    stacked = np.stack(masks)
    if (stacked.sum(axis=0) > 1).any():
        both = int((stacked.sum(axis=0) > 1).sum())
        raise InputError(f"the column groups overlap on {both} input(s); each input belongs to at most one group")
    moved = (x1 != x).any(dim=0).numpy()
    orphan = moved & ~stacked.any(axis=0)
    if orphan.any():
        raise InputError(f"{int(orphan.sum())} input(s) move between x and x′ but are in no group "
                         f"(positions {np.flatnonzero(orphan)[:5].tolist()}); add them to a group")
    b = x.shape[0]
    subsets = [frozenset(s) for r in range(k + 1) for s in combinations(range(k), r)]
    pieces: dict[frozenset, list[np.ndarray]] = {}
    x = x.float()
    x1 = x1.float()
    for start in range(0, b, max(1, chunk_rows // len(subsets))):
        sl = slice(start, min(b, start + max(1, chunk_rows // len(subsets))))
        mixed = []
        for s in subsets:
            cols = torch.as_tensor(stacked[list(s)].any(axis=0) if s else np.zeros(d, dtype=bool))
            mixed.append(torch.where(cols, x1[sl], x[sl]))
        out = np.asarray(predict(torch.cat(mixed)), dtype=np.float64).reshape(len(subsets), -1)
        for s, row in zip(subsets, out, strict=True):
            pieces.setdefault(s, []).append(row)
    value: dict[frozenset, np.ndarray] = {s: np.concatenate(v) for s, v in pieces.items()}
    base = value[frozenset()]
    parts = {}
    for i, name in enumerate(names):
        phi = np.zeros(b)
        for s in subsets:
            if i in s:
                continue
            weight = factorial(len(s)) * factorial(k - len(s) - 1) / factorial(k)
            phi += weight * ((value[s | {i}] - base) - (value[s] - base))
        parts[name] = phi
    return parts
