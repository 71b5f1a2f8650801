"""The cross-fitted auxiliary model of a small audit: every audited row is held out once.

On an audit of ordinary size (2,400 rows, 14% protected) the single split holds out 20% of the rows (67 protected),
too few for the group minimum and for a tight interval on the aux quality. Cross-fitting (Chernozhukov et al. 2018,
"Double/debiased machine learning", Econometrics Journal 21:C1-C68, section 3) splits the audited rows into k
stratified folds; the aux model of fold j trains on the other folds (its own seeded early-stopping split inside),
the swap reference of fold j is fitted on those training rows, and fold j's rows are scored by that model alone.
What reads held-out rows then reads every audited row out of fold: the aux quality and its interval, the group
counts of the evidence rule, the informativeness test (each row's loss from the model that did not see it) and the
independence test (on all rows). Every score comes from a model that did not train on its row.

When (:func:`cross_fit_k`): no aux model is given, ``[aux] cross_fit_folds`` >= 2, and the single split's held-out
part would leave a protected group under ``[decision] min_group_rows``. A large audit keeps the single split and its
scores bit for bit (one training instead of k).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Mapping

import numpy as np
import torch
from torch import nn

from ..errors import InputError
from ..inputs.protected import ProtectedAttribute
from ..kinds import protected_kind
from ..method._batching import as_tensor
from ..method.auxiliary import AuxiliaryModel
from ..method.faux import FAuxTester
from ..method.result import LICResult
from ..method.joint_hold import jointly_free_hold
from ..method.held import independent_features, uninformative_features
from ..method.output import TargetOutput
from .aux_cache import trained_aux
from .aux_model import AuxFit, fit_aux, free_column_quality, roc_curve, single_holdout
from .bounds import below_floor, quality_intervals
from .policy_schema import Policy
from .rows import AuditRows, swap_layout

__all__ = ["CROSS_FIT_MAX_ROWS", "CROSS_FIT_SEED_OFFSET", "CrossFit", "FLOOR_REASON", "GROUP_REASON", "FoldNet", "check_aux", "cross_fit_aux", "cross_fit_k", "cross_fit_record",
           "cross_fit_scores", "cross_fit_seed_spread", "fit_folds", "fold_assignment", "oof_free_quality", "oof_scores", "pooled_holds",
           "stack_results"]

#: The fold assignment is drawn with ``policy.seed + 3`` (the audit sample uses ``seed``, the aux training sample
#: ``seed + 1``, the seed sample ``seed + 2``).
CROSS_FIT_SEED_OFFSET = 3


def cross_fit_k(policy: Policy, holdout_counts: Mapping[str, int], group_rows: Mapping[str, int], *,
                given: bool) -> int:
    """The number of folds this check cross-fits with: 0 for the single split.

    Parameters
    ----------
    holdout_counts : mapping
        Rows per protected group in the single split's held-out part (:func:`faux_checks.gate.aux_model.gate_split`).
    group_rows : mapping
        Audited rows per protected group.
    given : bool
        An auxiliary model is given (it has no training to cross-fit).

    Returns
    -------
    int
        ``[aux] cross_fit_folds``, at most the smallest group's row count (every fold holds each group), when the
        single split leaves a group under ``[decision] min_group_rows`` held-out rows; else 0.
    """
    k = int(policy.aux.cross_fit_folds)
    if given or k < 2 or not holdout_counts:
        return 0
    if min(holdout_counts.values()) >= policy.decision.min_group_rows:
        return 0
    k = min(k, min(group_rows.values(), default=0))
    return k if k >= 2 else 0


def check_aux(audit: AuditRows, policy: Policy, mask: np.ndarray, group_labels: np.ndarray, names: list, *,
              aux_model=None, progress: bool = False) -> AuxFit:
    """A check's auxiliary model: cross-fitted on a small audit (:func:`cross_fit_k`), else the single split's
    (:func:`~faux_checks.gate.aux_model.fit_aux`, also for a given model).

    Parameters
    ----------
    mask : bool ndarray of shape (d,)
        The protected attribute's own encoded columns (not aux inputs).
    group_labels : ndarray of shape (n,)
        Each audited row's group label; ``names`` every group's name.
    """
    labels = np.asarray(group_labels, dtype=object)
    held = labels[single_holdout(audit.values, policy, audit.protected.kind)]
    group_rows = {str(g): int((labels == g).sum()) for g in names}
    k = cross_fit_k(policy, {str(g): int((held == g).sum()) for g in names}, group_rows, given=aux_model is not None)
    X_aux = audit.X[:, ~mask]
    if k:
        return cross_fit_aux(X_aux, audit.protected, audit.values, policy, k, progress=progress)
    single = fit_aux(X_aux, audit.protected, audit.values, policy, aux_model=aux_model, progress=progress)
    k = min(int(policy.aux.cross_fit_folds), min(group_rows.values(), default=0))
    if aux_model is None and k >= 2 and len(audit.X) <= CROSS_FIT_MAX_ROWS and _under_floor(single, policy):
        return cross_fit_aux(X_aux, audit.protected, audit.values, policy, k, progress=progress,
                             reason=FLOOR_REASON)
    return single


#: Audits of at most this many rows are cross-fitted when the single split's auxiliary-model quality interval does
#: not clear ``min_aux_quality`` (its held-out fifth is what leaves the floor unmet; above it the k trainings cost
#: more than a small audit's seconds).
CROSS_FIT_MAX_ROWS = 20_000
#: Why a check was cross-fitted (the provenance's ``rule``).
GROUP_REASON = ("cross-fitted: the single split's held-out part would leave a protected group under [decision] "
                "min_group_rows ([aux] cross_fit_folds; 0 or 1 = single split)")
FLOOR_REASON = ("cross-fitted: on the single split's held-out part the auxiliary model's quality interval did not "
                f"clear min_aux_quality, and the audit has at most {CROSS_FIT_MAX_ROWS:,} rows ([aux] cross_fit_folds; "
                "0 or 1 = single split)")


def _under_floor(aux: AuxFit, policy: Policy) -> bool:
    """Whether ``aux`` has no quality interval or one whose lower bound misses ``policy.min_aux_quality``."""
    return not aux.intervals or bool(below_floor(aux.intervals, policy.min_aux_quality))


def fold_assignment(values: np.ndarray, k: int, seed: int, *, grouped: bool) -> np.ndarray:
    """The fold (0..k-1) of each row, (n,) int64: stratified by group (grouped c), each group dealt round-robin in a
    seeded random order, the round continuing across groups so that folds differ by at most one row."""
    values = np.asarray(values)
    rng = np.random.default_rng(seed)
    folds: np.ndarray = np.empty(len(values), dtype=np.int64)
    strata = np.unique(values.astype(np.int64)) if grouped else [None]
    offset = 0
    for s in strata:
        idx = rng.permutation(np.flatnonzero(values.astype(np.int64) == s) if s is not None else len(values))
        folds[idx] = (np.arange(len(idx)) + offset) % k
        offset += len(idx)
    return folds


class FoldNet(nn.Module):
    """The out-of-fold auxiliary network over the audited rows in order: row i goes through the network of its fold.

    Input (n, d_aux) with n the audited rows (a permuted copy of them keeps each row's fold by position), output
    (n, outputs) raw as each fold's network gives it. Only for the held-out readings of the audited rows (quality,
    the informativeness test); never a model of new rows.

    Raises
    ------
    InputError
        An input whose row count is not the audit's.
    """

    def __init__(self, nets, folds: np.ndarray):
        super().__init__()
        self.nets = nn.ModuleList(nets)
        self.folds = torch.as_tensor(np.asarray(folds, dtype=np.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != len(self.folds):
            raise InputError(f"the out-of-fold auxiliary network reads the {len(self.folds):,} audited rows in order, "
                             f"got {x.shape[0]:,}")
        out: torch.Tensor | None = None
        for j, net in enumerate(self.nets):
            rows = self.folds == j
            part = net(x[rows])
            part = part[:, None] if part.ndim == 1 else part
            if out is None:
                out = part.new_zeros((x.shape[0], part.shape[1]))
            out[rows] = part
        assert out is not None
        return out


@dataclass(frozen=True)
class CrossFit:
    """The k fold models of a cross-fitted check.

    Attributes
    ----------
    folds : ndarray of shape (n,), int
        Each audited row's fold.
    models : tuple of AuxiliaryModel
        Fold j's model, trained on the rows of the other folds.
    seed : int
        The seed the fold models trained with (the fold assignment's is ``policy.seed + CROSS_FIT_SEED_OFFSET``).
    fold_seed : int
        The fold assignment's seed.
    reused : bool
        Every fold model was a copy of one this process trained, or restored from a record.
    """

    folds: np.ndarray
    models: tuple[AuxiliaryModel, ...]
    seed: int
    fold_seed: int
    reused: bool = False
    reason: str = ""

    @property
    def k(self) -> int:
        return len(self.models)

    def fold_rows(self, j: int) -> np.ndarray:
        return np.flatnonzero(self.folds == j)

    def train_rows(self, j: int) -> np.ndarray:
        return np.flatnonzero(self.folds != j)

    def net(self) -> FoldNet:
        return FoldNet([m.net_ for m in self.models], self.folds)


def fit_folds(X_aux: np.ndarray, protected: ProtectedAttribute, values: np.ndarray, policy: Policy, k: int, *,
              seed: int | None = None, folds: np.ndarray | None = None, progress: bool = False) -> CrossFit:
    """Train the k fold models (:func:`~faux_checks.gate.aux_cache.trained_aux`: each once per process, or restored
    from a gate's record by its key); ``folds`` given (an extra aux seed) or drawn by :func:`fold_assignment`."""
    fold_seed = policy.seed + CROSS_FIT_SEED_OFFSET
    if folds is None:
        folds = fold_assignment(values, k, fold_seed, grouped=protected_kind(protected.kind).grouped)
    seed = policy.seed if seed is None else seed
    models, reused = [], []
    for j in range(k):
        train = folds != j
        aux, again = trained_aux(policy, protected.kind, X_aux[train], values[train], groups=protected.groups,
                                 seed=seed, progress=progress)
        models.append(aux)
        reused.append(again)
    return CrossFit(folds, tuple(models), int(seed), int(fold_seed), all(reused))


def oof_scores(cf: CrossFit, X_aux: np.ndarray, kind: str) -> np.ndarray:
    """Out-of-fold scores as the quality reads them: P(group 1) (n,), group probabilities (n, m), or the continuous
    prediction in c's units (each fold model's own standardisation undone)."""
    with torch.no_grad():
        raw = cf.net()(as_tensor(X_aux)).double()
    if kind == "binary":
        return torch.sigmoid(raw[:, 0]).numpy()
    if kind == "multiclass":
        return torch.softmax(raw, dim=1).numpy()
    scale = np.array([m.c_std_ for m in cf.models])[cf.folds]
    shift = np.array([m.c_mean_ for m in cf.models])[cf.folds]
    return raw[:, 0].numpy() * scale + shift


def cross_fit_aux(X_aux: np.ndarray, protected: ProtectedAttribute, values: np.ndarray, policy: Policy, k: int, *,
                  progress: bool = False, reason: str = "") -> AuxFit:
    """The cross-fitted auxiliary model as an :class:`~faux_checks.gate.aux_model.AuxFit`.

    ``quality``, ``intervals`` and ``roc`` are read on the out-of-fold scores of every audited row; ``model``,
    ``rows`` and ``holdout`` are fold 0's (the model a report records, its training rows and its fold); ``cross``
    holds the :class:`CrossFit` (``reason``: why the check was cross-fitted, default :data:`GROUP_REASON`) and
    ``fold_quality`` each fold model's quality on its own fold.

    Raises
    ------
    InputError
        As :meth:`AuxiliaryModel.fit` on a fold's training rows.
    """
    cf = replace(fit_folds(X_aux, protected, values, policy, k, progress=progress), reason=reason or GROUP_REASON)
    kind = protected.kind
    score = oof_scores(cf, X_aux, kind)
    intervals = quality_intervals(kind, values, score, protected.groups, policy.decision.confidence, seed=policy.seed)
    quality = float(np.mean([r["quality"] for r in intervals]))
    metric = protected_kind(kind).quality_metric
    per_fold = []
    for j in range(k):
        rows = cf.fold_rows(j)
        q = quality_intervals(kind, values[rows], score[rows], protected.groups, policy.decision.confidence,
                              seed=policy.seed)
        per_fold.append({"fold": j, "rows": int(len(rows)), "quality": float(np.mean([r["quality"] for r in q])),
                         "aux_key": getattr(cf.models[j], "cache_key_", None)})
    what = f"{metric} (out of fold: {k} folds, each audited row scored by the aux model that did not train on it)"
    return AuxFit(cf.models[0], quality, what, roc_curve(values, score, kind), cf.train_rows(0), cf.fold_rows(0),
                  intervals, cf.reused, cross=cf, fold_quality=tuple(per_fold))


def pooled_holds(cf: CrossFit, audit: AuditRows, policy: Policy,
                 mask: np.ndarray) -> tuple[np.ndarray, list, list, dict]:
    """The swap reading's holds judged on every audited row: ``(held (d_aux,) bool, informativeness, independence,
    joint)``.

    The informativeness test (:func:`~faux_checks.method.held.uninformative_features`) reads each row's loss from
    the fold model that did not train on it (:class:`FoldNet`); the independence test reads every audited row; the
    held block is then tested jointly on every audited row and released until it is jointly free of c
    (:func:`~faux_checks.method.joint_hold.jointly_free_hold`; ``joint`` its summary). The declared columns are not
    in ``held``.
    """
    faux, protected = policy.faux, audit.protected
    c_std = float(np.std(audit.values)) if not protected_kind(protected.kind).grouped else 1.0
    layout = swap_layout(audit.feature_spec, protected, faux.admissible, c_std=c_std)
    X_aux = audit.X[:, ~mask]
    d = X_aux.shape[1]
    held = np.zeros(d, dtype=bool)
    informativeness: list = []
    independence: list = []
    if faux.hold_uninformative:
        uninformative, informativeness = uninformative_features(cf.net(), X_aux, audit.values, kind=protected.kind,
                                                                groups=layout.feature_groups)
        held |= uninformative
    if faux.hold_independent:
        independent, independence = independent_features(X_aux, audit.values, kind=protected.kind,
                                                         groups=layout.feature_groups)
        held |= independent
    held, joint = jointly_free_hold(X_aux, audit.values, kind=protected.kind, groups=layout.feature_groups,
                                    held=held & ~layout.admissible, declared=layout.admissible,
                                    independence=independence)
    return held, informativeness, independence, joint


def cross_fit_scores(target_model, cf: CrossFit, audit: AuditRows, policy: Policy, output: TargetOutput,
                     mask: np.ndarray, *, rows: np.ndarray | None = None, evidence: bool = True,
                     progress: bool = False) -> tuple[LICResult, list[FAuxTester]]:
    """Each fold's rows scored by its own tester: fold j's aux model, its swap reference fitted on fold j's training
    rows with the holds judged on every row (:func:`pooled_holds`; other variants need none).

    Parameters
    ----------
    mask : bool ndarray of shape (d,)
        The protected attribute's own encoded columns (not aux inputs).
    rows : int ndarray, optional
        The audited rows to score (sorted); default all.

    Returns
    -------
    (LICResult over ``rows`` in order, the k testers)
    """
    from .scorer import faux_tester

    rows = np.arange(len(audit.X)) if rows is None else np.asarray(rows)
    holds = pooled_holds(cf, audit, policy, mask) if policy.faux.variant == "swap" else None
    parts, testers = [], []
    for j in range(cf.k):
        train, mine = cf.train_rows(j), rows[cf.folds[rows] == j]
        tester = faux_tester(target_model, cf.models[j], policy, output, audit.feature_spec, audit.protected,
                             reference_rows=audit.X[train], reference_values=audit.values[train], holds=holds,
                             progress=progress)
        testers.append(tester)
        if len(mine):
            parts.append((np.flatnonzero(cf.folds[rows] == j),
                          tester.evaluate(audit.X[mine], audit.values[mine], evidence=evidence)))
    return stack_results(parts, len(rows)), testers


def stack_results(parts: list[tuple[np.ndarray, LICResult]], n: int) -> LICResult:
    """One :class:`LICResult` of n rows from the folds' results, each with its positions; per-configuration arrays
    (coupled levels) are padded with zero-weight configurations to the widest fold."""
    values: dict = {}
    for f in fields(LICResult):
        arrays = [getattr(r, f.name) for _, r in parts]
        if all(a is None for a in arrays):
            values[f.name] = None
            continue
        if any(a is None for a in arrays):
            raise InputError(f"the folds' scorers disagree on whether '{f.name}' is computed")
        width = max((a.shape[1:] for a in arrays), default=())
        out = np.zeros((n, *width), dtype=arrays[0].dtype)
        for (pos, _), a in zip(parts, arrays, strict=True):
            out[(pos, *(slice(0, s) for s in a.shape[1:]))] = a
        values[f.name] = out
    return LICResult(**values)


def cross_fit_seed_spread(target_model, cf: CrossFit, audit: AuditRows, policy: Policy, output: TargetOutput,
                          mask: np.ndarray, *, sample: np.ndarray, used_flagged: np.ndarray,
                          models: list | None = None) -> dict | None:
    """:func:`faux_checks.gate.seeds.seed_spread` for a cross-fitted check: each extra seed ``policy.seed + s``
    trains the k fold models again on the same folds and scores ``sample`` out of fold.

    Cost: ``(aux_seeds − 1) · k`` trainings on (k − 1)/k of the rows. The spread then measures what the seeds of the
    single split measure (the aux model's randomness, each row read by a model that did not see it), not the
    difference between folds, which mixes the rows' sampling into it. ``models`` receives ``(seed, fold 0's model)``.
    """
    from .seeds import spread_record

    count = policy.decision.aux_seeds
    if count <= 1:
        return None
    X_aux = audit.X[:, ~mask]
    extra = []
    for s in range(1, count):
        again = fit_folds(X_aux, audit.protected, audit.values, policy, cf.k, seed=policy.seed + s, folds=cf.folds)
        lic, _ = cross_fit_scores(target_model, again, audit, policy, output, mask, rows=sample, evidence=False)
        score = oof_scores(again, X_aux, audit.protected.kind)
        quality = quality_intervals(audit.protected.kind, audit.values, score, audit.protected.groups,
                                    policy.decision.confidence, seed=policy.seed)
        extra.append((float(np.mean(lic.decision_weights(policy.faux.delta))),
                      float(np.mean([r["quality"] for r in quality]))))
        if models is not None:
            models.append((policy.seed + s, again.models[0]))
    return spread_record(policy, float(np.mean(used_flagged)), extra, rows=len(sample))


def oof_free_quality(cf: CrossFit, audit: AuditRows, mask: np.ndarray, held: np.ndarray) -> float | None:
    """:func:`~faux_checks.gate.aux_model.free_column_quality` on every audited row out of fold (None when not
    finite)."""
    kind = audit.protected.kind
    oof = AuxiliaryModel.from_module(cf.net(), kind=kind, output_space=cf.models[0].output_space,
                                     groups=audit.protected.groups, n_features=int((~mask).sum()))
    if not protected_kind(kind).grouped:      # the fold models' standardisations differ: the quality reads c's units
        return None
    q = free_column_quality(oof, audit.X[:, ~mask], audit.values, audit.protected, held)
    return q if np.isfinite(q) else None


def cross_fit_record(aux: AuxFit) -> dict | None:
    """The provenance of a cross-fitted check (None for the single split): k, the fold seed, per-fold rows and
    qualities, and which model the records keep."""
    cf = aux.cross
    if cf is None:
        return None
    return {"folds": cf.k, "fold_seed": cf.fold_seed, "aux_seed": cf.seed, "per_fold": list(aux.fold_quality),
            "rule": cf.reason,
            "recorded_model": "fold 0's (trained on folds 1..k-1): a valid aux model for new rows (the audit); a "
                              "re-gate restores it by its key and trains folds 1..k-1 again"}

