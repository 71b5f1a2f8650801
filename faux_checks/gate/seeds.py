"""How much the flagged fraction depends on the auxiliary model's randomness: several aux seeds.

The auxiliary model is trained with seeds ``seed, seed + 1, ..., seed + aux_seeds − 1`` (its
initialisation, batch order and hold-out split), on the same training rows; each one, with its
own swap reference, scores the same seeded sample of at most ``decision.aux_seed_rows`` audited
rows. :func:`seed_spread` returns the flagged fraction (undefined counted as flagged) of each seed
on that sample; :func:`faux_checks.gate.bounds.flagged_interval` widens the interval over
individuals by how far they moved from the seed the check used. Used by the in-memory check and
by the streaming plan (on its training sample); not with a given auxiliary model (it has no
training randomness).

Cost: one aux training, one swap reference and one scoring pass (no evidence) of the sample per
extra seed; measured on all of Adult in ``docs/method.md`` ("From scores to a decision").
"""

from __future__ import annotations

import numpy as np

from ..inputs.protected import ProtectedAttribute
from ..inputs.tabular import FeatureSpec
from ..method.output import TargetOutput
from .aux_cache import trained_aux
from .policy_schema import Policy
from .scorer import faux_tester

__all__ = ["seed_fraction", "seed_sample", "seed_spread", "spread_record"]


def seed_sample(n: int, policy: Policy) -> np.ndarray:
    """Indices (sorted) of the audited rows every aux seed scores: all when n <= aux_seed_rows, else a seeded sample."""
    limit = policy.decision.aux_seed_rows
    if n <= limit:
        return np.arange(n)
    return np.sort(np.random.default_rng(policy.seed + 2).choice(n, limit, replace=False))


def seed_spread(target_model, policy: Policy, output: TargetOutput, spec: FeatureSpec,
                protected: ProtectedAttribute, X: np.ndarray, values: np.ndarray, *, train: np.ndarray,
                sample: np.ndarray, used_flagged: np.ndarray, models: list | None = None) -> dict | None:
    """The flagged fraction of every auxiliary-model seed on the same rows.

    Parameters
    ----------
    target_model : torch module
    policy : Policy
        ``decision.aux_seeds`` seeds from ``policy.seed``; the aux and swap settings.
    output : TargetOutput
        The target's resolved output form.
    spec : FeatureSpec
    protected : ProtectedAttribute
    X : ndarray of shape (n, d), float32
        Encoded audited rows (the target's inputs, c's own columns included when it has them).
    values : ndarray of shape (n,)
        Their protected values.
    train : ndarray of int
        Rows the check's auxiliary model was trained on (each seed trains on the same rows).
    sample : ndarray of int
        Rows every seed scores (:func:`seed_sample`).
    used_flagged : ndarray of shape (len(sample),), bool or float in [0, 1]
        The check's own aux model's worst-case flags on ``sample``
        (:meth:`~faux_checks.method.result.LICResult.decision_weights`).
    models : list, optional
        Receives ``(seed, fitted AuxiliaryModel)`` of every extra seed, in seed order (the check records them,
        :func:`faux_checks.report.records.write_check_records`, so a re-gate restores them instead of training).

    Returns
    -------
    dict or None
        ``seeds`` (the seed the check used first), ``fractions`` (flagged fraction on the sample, same
        order), ``aux_quality`` (each seed's held-out quality; the first is None: the check reports its
        own), ``rows`` (sample size), ``spread`` (highest − lowest fraction). None when
        ``aux_seeds`` is 1.

    Raises
    ------
    InputError
        As the aux training and the swap reference (e.g. a group with too few rows).
    """
    count = policy.decision.aux_seeds
    if count <= 1:
        return None
    seeds = [policy.seed + k for k in range(count)]
    extra = [seed_fraction(target_model, policy, output, spec, protected, X, values, train=train, sample=sample,
                           seed=seed, models=models) for seed in seeds[1:]]
    return spread_record(policy, float(np.mean(used_flagged)), extra, rows=len(sample))


def seed_fraction(target_model, policy: Policy, output: TargetOutput, spec: FeatureSpec,
                  protected: ProtectedAttribute, X: np.ndarray, values: np.ndarray, *, train: np.ndarray,
                  sample: np.ndarray, seed: int, models: list | None = None) -> tuple[float, float]:
    """One extra seed of :func:`seed_spread`: ``(flagged fraction on sample, held-out aux quality)``.

    Trains the auxiliary model with ``seed`` on ``X[train]`` (its own swap reference) and scores
    ``X[sample]``; arguments as :func:`seed_spread`. Independent of the other seeds, so the seeds can
    run in parallel (the sharded flow runs each on a worker). ``models`` receives ``(seed, aux model)``.
    """
    mask = spec.feature_mask(policy.protected)  # type: ignore[arg-type]  # None (no column) reads as zeros; tabular.py's to widen
    X_aux = X[:, ~mask]
    aux, _ = trained_aux(policy, protected.kind, X_aux[train], values[train], groups=protected.groups, seed=seed)
    hold = train[aux.holdout_rows_]
    tester = faux_tester(target_model, aux, policy, output, spec, protected, reference_rows=X[train],
                         reference_values=values[train], holdout_rows=X[hold], holdout_values=values[hold])
    lic = tester.evaluate(X[sample], values[sample], evidence=False)
    if models is not None:
        models.append((int(seed), aux))
    return float(np.mean(lic.decision_weights(policy.faux.delta))), float(aux.quality_)


def spread_record(policy: Policy, first_fraction: float, extra, *, rows: int) -> dict:
    """:func:`seed_spread`'s dict from the check's own fraction and the extra seeds' ``(fraction, quality)`` pairs,
    in seed order (``policy.seed + 1, ...``)."""
    seeds = [policy.seed + k for k in range(len(extra) + 1)]
    fractions = [float(first_fraction), *(float(f) for f, _ in extra)]
    qualities: list[float | None] = [None, *(float(q) for _, q in extra)]
    return {"seeds": seeds, "fractions": fractions, "aux_quality": qualities, "rows": int(rows),
            "spread": float(max(fractions) - min(fractions))}
