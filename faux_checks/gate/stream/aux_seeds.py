"""The streaming plan with its extra auxiliary-model seeds apart, so they train in parallel with the scoring.

:func:`~.plan.prepare_scoring` trains the aux model's extra seeds (``decision.aux_seeds`` − 1, for
:func:`~faux_checks.gate.seeds.seed_spread`) one after the other after the check's own model: in the sharded
flow that was the serial part of a run (3 seeds × 30 epochs on a 200,000-row sample, 26–53 s
before any shard could score). Only the check's own model is needed to score; the extra seeds only feed the
flagged fraction's interval, read when the counts are merged. So:

- :func:`prepare_primary` is :func:`~.plan.prepare_scoring` without the extra seeds, plus the check's own flags
  on the seed sample (what the seed spread compares the extra seeds with);
- :func:`extra_seed` trains one extra seed on the same sample and scores the same seed sample; it needs nothing
  from the check's own model, so each runs on a worker while the first shards score;
- :func:`with_seeds` puts the :func:`~faux_checks.gate.seeds.spread_record` into the plan before the decision.

The result is the plan :func:`~.plan.prepare_scoring` gives (tested: same ``aux["seeds"]``): the same seeds
(``policy.seed + k``), training rows, seed sample and per-seed maths (:func:`~faux_checks.gate.seeds.seed_fraction`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import torch

from ...inputs.tabular import FeatureSpec
from ...method.auxiliary import AuxiliaryModel
from ...method.output import TargetOutput, resolve_output_form
from ..policy_schema import Policy
from ..seeds import seed_fraction, seed_sample, spread_record
from .plan import ProtectedCodec, ScoringPlan, prepare_scoring
from .sample import SamplePart

__all__ = ["extra_seed_count", "extra_seed", "prepare_primary", "with_seeds"]


def extra_seed_count(policy: Policy, aux_model=None) -> int:
    """Extra aux seeds the plan trains: ``decision.aux_seeds − 1``, none with a given aux model."""
    return 0 if aux_model is not None else max(0, policy.decision.aux_seeds - 1)


def prepare_primary(target_model, sample: SamplePart, *, policy: Policy, feature_spec: FeatureSpec, aux_model=None,
                    chunk_rows: int, progress: bool = False) -> tuple[ScoringPlan, AuxiliaryModel, float | None]:
    """:func:`~.plan.prepare_scoring` without the extra seeds: ``(plan, aux model, own fraction)``.

    Returns
    -------
    plan : ScoringPlan
        ``plan.policy`` is ``policy`` (all its seeds); ``plan.aux["seeds"]`` is None until :func:`with_seeds`.
    aux : AuxiliaryModel
    own_fraction : float or None
        The check's own flagged fraction (decision weights at δ, undefined counted as flagged) on the seed
        sample (:func:`~faux_checks.gate.seeds.seed_sample` of the training sample); None without extra seeds.

    Raises
    ------
    InputError
        As :func:`~.plan.prepare_scoring`.
    """
    one = policy.model_copy(update={"decision": policy.decision.model_copy(update={"aux_seeds": 1})})
    plan, aux = prepare_scoring(target_model, sample, policy=one, feature_spec=feature_spec, aux_model=aux_model,
                                chunk_rows=chunk_rows, progress=progress)
    plan = replace(plan, policy=policy)
    if not extra_seed_count(policy, aux_model):
        return plan, aux, None
    values = plan.codec.encode(pd.Series(sample.protected))
    assert sample.X is not None                     # prepare_scoring raised on a sample without rows
    rows = seed_sample(len(sample.X), policy)
    lic = plan.tester(target_model, aux).evaluate(sample.X[rows], values[rows], evidence=False)
    return plan, aux, float(np.mean(lic.decision_weights(policy.faux.delta)))


def extra_seed(target_model, sample: SamplePart, *, policy: Policy, feature_spec: FeatureSpec,
               k: int) -> tuple[float, float]:
    """Extra seed ``policy.seed + k`` (k ≥ 1) on the training sample: ``(flagged fraction, aux quality)``.

    The protected codec and the target's output form are fixed again from the sample, as
    :func:`~.plan.prepare_scoring` fixes them (deterministic: the same values).

    Raises
    ------
    InputError
        As the aux training and the swap reference; :func:`prepare_primary` on the same sample raises first
        for the plan's own checks.
    """
    codec = ProtectedCodec.build(sample, policy)
    values = codec.encode(pd.Series(sample.protected))
    protected = codec.attribute(values)
    X = sample.X
    assert X is not None                            # prepare_primary on this sample raised first (Raises)
    output = resolve_output_form(target_model, torch.from_numpy(X[: min(len(X), 256)]),
                                 TargetOutput(form=policy.target_output, target_class=policy.target_class))
    return seed_fraction(target_model, policy, output, feature_spec, protected, X, values, train=np.arange(len(X)),
                         sample=seed_sample(len(X), policy), seed=policy.seed + int(k))


def with_seeds(plan: ScoringPlan, own_fraction: float | None, extra) -> ScoringPlan:
    """The plan with ``aux["seeds"]`` (:func:`~faux_checks.gate.seeds.spread_record`); unchanged without extra seeds.

    ``extra``: the extra seeds' ``(fraction, quality)`` in seed order (``k = 1, 2, ...``).
    """
    if own_fraction is None or not extra:
        return plan
    rows = len(seed_sample(plan.aux["train_rows"], plan.policy))
    return replace(plan, aux={**plan.aux, "seeds": spread_record(plan.policy, own_fraction, list(extra), rows=rows)})
