"""Which features the swap reading's move holds fixed besides the declared admissible ones: those whose
distribution does not depend on c (:func:`independent_features`) and those that tell the auxiliary model
nothing about c (:func:`uninformative_features`), released where the held block would carry c jointly
(:func:`faux_checks.method.joint_hold.jointly_free_hold`); :func:`reference_holds` runs the three in that order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .._threads import thread_map
from .._validation import fmt_count
from ..errors import InputError
from ..kinds import Kind
from .auxiliary import AuxNet
from .independence import INDEPENDENCE_ALPHA, INDEPENDENCE_BINS, independent_features
from .joint_hold import jointly_free_hold

__all__ = ["INDEPENDENCE_ALPHA", "INDEPENDENCE_BINS", "INFORMATIVE_Z", "PERMUTATION_BATCH_ROWS", "ReferenceHolds",
           "independent_features", "reference_holds", "uninformative_features"]


_AUXNET_FORWARD = AuxNet.forward

#: A feature group is informative about c when permuting it raises the aux model's held-out loss by more
#: than this many standard errors (one-sided, ≈ 2.3% of uninformative groups called informative).
INFORMATIVE_Z = 2.0




#: Rows of one stacked forward of the permutation test (several feature groups' permuted copies at once).
PERMUTATION_BATCH_ROWS = 65_536


def _first_layer(aux_raw):
    """(mean, scale, first Linear, the rest) of an :class:`~faux_checks.method.auxiliary.AuxNet`-shaped module
    x ↦ rest(W·(x − mean)/scale + b); None for any other callable."""
    mlp = getattr(aux_raw, "mlp", None)
    mean, scale = getattr(aux_raw, "mean", None), getattr(aux_raw, "scale", None)
    if (not isinstance(mlp, torch.nn.Sequential) or len(mlp) < 2 or not isinstance(mlp[0], torch.nn.Linear)
            or not isinstance(mean, torch.Tensor) or not isinstance(scale, torch.Tensor)
            or type(aux_raw).forward is not _AUXNET_FORWARD or mlp[0].in_features <= mlp[0].out_features):
        return None                         # a narrow input: the full forward costs no more than the update
    return mean, scale, mlp[0], mlp[1:]


def _permuted_losses(aux_raw, X: torch.Tensor, groups, rng: np.random.Generator, row_losses):
    """Yield (group indices, per-row loss (n,) with the group permuted), group by group, one permutation each.

    For an AuxNet-shaped aux model the first layer's pre-activation of a permuted copy is the unpermuted one plus
    the group's change times its weight columns (O(n·h) instead of O(n·d·h) per group), and the copies of several
    groups go through the rest of the network in one stacked forward; any other callable gets one forward of the
    permuted rows per group."""
    layers = _first_layer(aux_raw)
    if layers is None:
        permuted = X.clone()                              # one working copy: each group permuted, then restored
        for idx in groups:
            idx = np.asarray(idx, dtype=np.int64)
            cols = torch.as_tensor(idx)
            permuted[:, cols] = X[:, cols][torch.as_tensor(rng.permutation(len(X)))]
            with torch.no_grad():
                losses = row_losses(aux_raw(permuted))
            permuted[:, cols] = X[:, cols]
            yield idx, losses
        return
    mean, scale, first, rest = layers
    n = len(X)
    per_batch = max(1, PERMUTATION_BATCH_ROWS // max(n, 1))
    group_list = [np.asarray(g, dtype=np.int64) for g in groups]
    with torch.no_grad():
        standard = (X - mean) / scale
        pre = first(standard)                                                  # (n, h)
        weight = first.weight                                                  # (h, d)
        stacked = torch.empty(per_batch * n, pre.shape[1], dtype=pre.dtype)
        for start in range(0, len(group_list), per_batch):
            batch = group_list[start:start + per_batch]
            for j, idx in enumerate(batch):
                cols = torch.as_tensor(idx)
                change = standard[:, cols][torch.as_tensor(rng.permutation(n))] - standard[:, cols]
                torch.add(pre, change @ weight[:, cols].T, out=stacked[j * n:(j + 1) * n])
            hidden = stacked[:len(batch) * n]
            for layer in rest:
                hidden = torch.relu_(hidden) if isinstance(layer, torch.nn.ReLU) else layer(hidden)
            losses = row_losses(hidden)
            for j, idx in enumerate(batch):
                yield idx, losses[j * n:(j + 1) * n]


def uninformative_features(aux_raw, X_hold, c_hold, *, kind: Kind, groups, z: float = INFORMATIVE_Z,
                           seed: int = 0) -> tuple[np.ndarray, list[dict]]:
    """Feature groups that tell the auxiliary model nothing about c: permuting them does not raise its held-out loss.

    The swap reading moves every feature the aux gradient points at; where the aux model leans on a
    feature only by noise (its local gradient is rarely exactly zero), the move would shift a
    legitimate feature and the score would count the target's use of it as discrimination. A
    feature group whose permutation (one permutation of the held-out rows for the whole group) leaves
    the aux model's loss unchanged, within ``z`` standard errors of the per-row differences, carries no
    evidence about c and is held fixed like a declared admissible feature.

    Parameters
    ----------
    aux_raw : callable, Tensor (n, d) -> Tensor (n, m) or (n, 1)
        Raw aux outputs (logits, or the standardised prediction of a continuous c).
    X_hold : ndarray of shape (n, d)
        Rows the aux model did not train on.
    c_hold : ndarray of shape (n,)
        Their protected attribute.
    kind : {"binary", "multiclass", "continuous"}
    groups : sequence of index arrays
        Feature groups permuted together (a source column's one-hot block, or one numeric feature).
    z : float
        Standard errors above zero the loss increase must reach to count as informative.
    seed : int

    Returns
    -------
    mask : ndarray of shape (d,), bool
        Features of the uninformative groups.
    table : list of dict
        Per group: ``features`` (index list), ``loss_increase`` (mean, nats or squared sd), ``z``, ``informative``.

    Notes
    -----
    Our choice (permutation importance, Breiman 2001, as a significance test on held-out rows);
    evidence in docs/benchmark.md ("hold uninformative features"). An :class:`~faux_checks.method.auxiliary.AuxNet`
    wider than its first layer is read through that layer's pre-activation plus the permuted group's change
    (O(n·h) per group instead of O(n·d·h)), several groups per stacked forward: the same permutations, the losses
    equal to float32 rounding (tests/method/test_permutation_batches.py); any other callable gets one forward per group.
    """
    X = torch.as_tensor(np.asarray(X_hold), dtype=torch.float32)
    c = np.asarray(c_hold)
    if len(X) != len(c) or len(X) < 2:
        raise InputError(f"uninformative_features needs at least 2 held-out rows with their protected values; got "
                         f"{fmt_count(len(X))} rows and {fmt_count(len(c))} values")

    def row_losses(raw: torch.Tensor) -> np.ndarray:
        raw = raw[:, None] if raw.ndim == 1 else raw
        if kind == "binary":
            target = torch.as_tensor(np.resize(c, len(raw)), dtype=raw.dtype)
            return torch.nn.functional.binary_cross_entropy_with_logits(raw[:, 0], target, reduction="none").double().numpy()
        if kind == "multiclass":
            target = torch.as_tensor(np.resize(c, len(raw)), dtype=torch.long)
            return torch.nn.functional.cross_entropy(raw, target, reduction="none").double().numpy()
        standard = (c - c.mean()) / (c.std() or 1.0)
        return (raw[:, 0].double().numpy() - np.resize(standard, len(raw))) ** 2

    with torch.no_grad():
        base = row_losses(aux_raw(X))
    rng = np.random.default_rng(seed)
    mask = np.zeros(X.shape[1], dtype=bool)
    table = []
    for idx, permuted_losses in _permuted_losses(aux_raw, X, groups, rng, row_losses):
        diff = permuted_losses - base
        se = diff.std(ddof=1) / np.sqrt(len(diff))
        score = float(diff.mean() / se) if se > 0 else (float("inf") if diff.mean() > 0 else 0.0)
        informative = score > z
        mask[idx] = not informative
        table.append({"features": idx.tolist(), "loss_increase": float(diff.mean()), "z": score,
                      "informative": bool(informative)})
    return mask, table


@dataclass(frozen=True)
class ReferenceHolds:
    """The features the move holds fixed besides the declared ones, and the tests that chose them.

    Attributes
    ----------
    held : ndarray of shape (d,), bool
        Held because uninformative or independent of c (never a declared feature), less those released for the
        held block to be jointly free of c.
    informativeness : list of dict
        :func:`uninformative_features`' test per group (empty without hold-out rows).
    independence : list of dict
        :func:`independent_features`' test per group (empty when not asked).
    joint : dict or None
        :func:`~faux_checks.method.joint_hold.jointly_free_hold`'s summary of the held block.
    """

    held: np.ndarray
    informativeness: list
    independence: list
    joint: Any


def reference_holds(aux_net, X_ref: np.ndarray, c_ref, *, kind: Kind, declared: np.ndarray, groups, holdout=None,
                    hold_independent: bool = True, hold_jointly: bool = True) -> ReferenceHolds:
    """Which feature groups the swap reading holds fixed: uninformative on ``holdout``, independent of c on the
    reference rows (the two tests side by side on torch's scoring threads, :func:`~faux_checks._threads.thread_map`:
    the same holds on any count), then released until the held block is jointly free of c.

    Parameters
    ----------
    aux_net : torch.nn.Module
        The auxiliary network (logits of c), for the permutation test.
    X_ref : ndarray of shape (n, d)
        Reference rows in the aux input space; ``c_ref`` (n,) their protected attribute.
    kind : Kind
        The protected attribute's kind.
    declared : ndarray of shape (d,), bool
        The declared admissible features (held anyway, never counted here).
    groups : sequence of index arrays
        Feature groups tested together.
    holdout : (X_hold, c_hold), optional
        Rows the auxiliary model did not train on; None skips the informativeness test.
    hold_independent, hold_jointly : bool
        Run the independence test; release from the holds what the joint test needs (False measures only).

    Returns
    -------
    ReferenceHolds

    Notes
    -----
    Method reference: the permutation test of Breiman (2001) on held-out loss, a chi-square test of
    independence per group, and a cross-fitted classifier of c on the held block (docs/method.md).
    """
    held = np.zeros(X_ref.shape[1], dtype=bool)
    tests = {}
    if holdout is not None:
        tests["informative"] = lambda: uninformative_features(aux_net, holdout[0], holdout[1], kind=kind, groups=groups)
    if hold_independent:
        tests["independent"] = lambda: independent_features(X_ref, c_ref, kind=kind, groups=groups)
    found = dict(zip(tests, thread_map(lambda test: test(), tests.values()), strict=True))   # side by side
    informativeness: list = found["informative"][1] if "informative" in found else []
    independence: list = found["independent"][1] if "independent" in found else []
    for tested, _ in found.values():
        held |= tested & ~declared                       # uninformative on the hold-out rows, or independent of c
    held, joint = jointly_free_hold(X_ref, c_ref, kind=kind, groups=groups, held=held, declared=declared,
                                    release=hold_jointly, independence=independence)
    return ReferenceHolds(held=held, informativeness=informativeness, independence=independence, joint=joint)
