"""The scoring plan: protected groups, output form and auxiliary model, fixed once for every chunk.

:func:`prepare_scoring` turns the merged sample into a :class:`ScoringPlan` (picklable: the sharded
flow sends it to its workers) and a trained or wrapped auxiliary model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import torch

from ..._validation import fmt_count
from ...errors import InputError
from ...inputs.protected import ProtectedAttribute, encode_protected
from ...inputs.tabular import FeatureSpec
from ...kinds import Kind, protected_kind
from ...method.auxiliary import AuxiliaryModel
from ...method.batch_probe import probe_batch_independence
from ...method.faux import FAuxTester
from ...method.swap import SwapReference
from ..joint_block import held_block_summary
from ..scorer import faux_tester
from ...method.output import TargetOutput, resolve_output_form
from ..aux_model import given_aux, holdout_scores, new_aux, quality_on
from ..bounds import quality_intervals
from ..policy_schema import Policy
from ..rows import check_model_accepts, check_model_outputs, direct_derivative
from ..seeds import seed_sample, seed_spread
from .sample import MAX_LEVELS, SamplePart
from .source import DataSource, columns_to_read, read_chunks

__all__ = ["ProtectedCodec", "ScoringPlan", "check_missing_protected", "prepare_scoring", "resolve_feature_spec"]


@dataclass(frozen=True)
class ProtectedCodec:
    """The protected attribute's groups, fixed once for every chunk.

    Attributes
    ----------
    name : str
    kind : {"binary", "multiclass", "continuous"}
    groups : tuple of str
        Class labels in class-index order (as :func:`faux_checks.encode_protected` orders them
        on the whole column); for continuous c, the quartile bins of the training sample.
    mapping : dict
        Raw value -> class index (binary/multi-class).
    edges : tuple of float
        Inner quartile edges of the training sample (continuous).
    """

    name: str
    kind: Kind
    groups: tuple[str, ...]
    mapping: dict = field(default_factory=dict)
    edges: tuple[float, ...] = ()

    @classmethod
    def build(cls, sample: SamplePart, policy: Policy) -> "ProtectedCodec":
        """Groups from every distinct value of the file (sample pass), kind as the policy or inferred."""
        name = policy.protected
        assert name is not None                     # single-attribute stream: score_stream raised on none
        distinct = list(sample.level_counts) if sample.level_counts is not None else list(sample.level_examples)
        if not distinct:
            raise InputError(f"protected attribute '{name}' has no non-missing values in {fmt_count(sample.n_rows)} rows")
        attr = encode_protected(pd.Series(distinct), name=name, kind=policy.protected_kind)
        if sample.level_counts is None and protected_kind(attr.kind).grouped:
            raise InputError(f"protected attribute '{name}' has more than {MAX_LEVELS} distinct values; "
                             "declare protected_kind = \"continuous\" for a numeric attribute or group the levels first")
        if not protected_kind(attr.kind).grouped:
            values = pd.to_numeric(pd.Series(sample.protected), errors="coerce").to_numpy(dtype="float64")
            if not np.isfinite(values).any():
                raise InputError(f"protected attribute '{name}' declared continuous but the sample has no numbers")
            edges = tuple(float(e) for e in np.unique(np.quantile(values[np.isfinite(values)], [0.25, 0.5, 0.75])))
            bounds = (-np.inf, *edges, np.inf)
            groups = tuple(f"({lo:.4g}, {hi:.4g}]" for lo, hi in zip(bounds[:-1], bounds[1:], strict=True))
            return cls(name, "continuous", groups, edges=edges)
        mapping = {value: int(code) for value, code in zip(distinct, attr.values, strict=False)}
        return cls(name, attr.kind, tuple(attr.groups), mapping=mapping)

    def encode(self, values: pd.Series) -> np.ndarray:
        """Class index (int64) or value (float64) of non-missing raw values, shape (m,)."""
        if not protected_kind(self.kind).grouped:
            return pd.to_numeric(values, errors="coerce").to_numpy(dtype="float64")
        inverse, uniques = pd.factorize(values.astype(object) if isinstance(values.dtype, pd.CategoricalDtype)
                                        else values)
        try:
            codes = np.array([self.mapping[u] for u in uniques], dtype=np.int64)
        except KeyError as exc:
            raise InputError(f"protected attribute '{self.name}' has the value {exc.args[0]!r}, which the sample pass "
                             "did not see; did the data file change between the two passes?") from None
        return codes[inverse] if len(codes) else np.empty(0, dtype=np.int64)

    def group_index(self, values: np.ndarray) -> np.ndarray:
        """Index into ``groups`` of each encoded value, shape (m,)."""
        if not protected_kind(self.kind).grouped:
            return np.searchsorted(np.asarray(self.edges), values, side="left").astype(np.int64)
        return np.asarray(values, dtype=np.int64)

    def attribute(self, values: np.ndarray) -> ProtectedAttribute:
        """A :class:`ProtectedAttribute` over ``values`` (for the library's helpers)."""
        groups = self.groups if protected_kind(self.kind).grouped else ()
        return ProtectedAttribute(self.name, self.kind, values, groups, np.ones(len(values), dtype=bool), 0)


@dataclass(frozen=True)
class ScoringPlan:
    """Everything the score pass needs besides the two models (picklable: sent to Dask workers).

    Attributes
    ----------
    policy : Policy
    feature_spec : FeatureSpec
    codec : ProtectedCodec
    output : TargetOutput
        The target's output form, resolved once on the sample.
    protected_mask, dx_dc : ndarray or None
        Direct term when the protected column is a target input (:func:`~faux_checks.gate.rows.direct_derivative`).
    ig_baseline : str or ndarray
    swap_reference : SwapReference or None
        Variant swap: fitted once on the sample (the rows the aux model learnt from), shipped to every worker.
    c_std : float
        Standard deviation of a continuous protected attribute on the sample (1.0 otherwise).
    chunk_rows : int
    n_rows, n_missing_protected : int
        From the sample pass.
    aux : dict
        Auxiliary-model facts: quality, metric, kind, output space, groups, n_features,
        train_rows, epochs_run, given; ``intervals`` (quality where it matters, with intervals),
        ``holdout_groups`` (its held-out rows per group), ``seeds``
        (:func:`~faux_checks.gate.seeds.seed_spread` on the sample, None when not computed) and
        ``batch_probe`` (``{"target": ..., "aux": ...}``: the largest batch-vs-alone difference of
        each model, measured once per stream by :func:`~faux_checks.method.batch_probe.probe_batch_independence`).
    """

    policy: Policy
    feature_spec: FeatureSpec
    codec: ProtectedCodec
    output: TargetOutput
    protected_mask: np.ndarray | None
    dx_dc: np.ndarray | None
    ig_baseline: Any
    chunk_rows: int
    n_rows: int
    n_missing_protected: int
    aux: dict
    swap_reference: SwapReference | None = None
    c_std: float = 1.0

    @property
    def columns(self) -> list[str]:
        """Columns read by the score pass."""
        assert self.policy.protected is not None    # the plan's codec was built for it (ProtectedCodec.build)
        return columns_to_read(self.feature_spec, self.policy.protected)

    def tester(self, target_model, aux_model: AuxiliaryModel) -> FAuxTester:
        """The FAuxTester used on every chunk (:func:`~faux_checks.gate.scorer.faux_tester`).

        It does not probe the models for batch dependence: :func:`prepare_scoring` probed each
        once, on the sample (a per-chunk probe would judge each chunk's first rows again).
        """
        faux = self.policy.faux
        if faux.variant == "swap":
            return faux_tester(target_model, aux_model, self.policy, self.output, self.feature_spec,
                               self.codec.attribute(np.zeros(0)), reference=self.swap_reference, c_std=self.c_std,
                               chunk_size=self.chunk_rows, probe_batches=False)
        return FAuxTester(target_model, aux_model, variant=faux.variant, output=self.output, ridge=faux.ridge,
                          protected_mask=self.protected_mask, dx_dc_direct=self.dx_dc,
                          ig_baseline=self.ig_baseline, ig_steps=faux.ig_steps, chunk_size=self.chunk_rows,
                          probe_batches=False)

    def wrap_aux(self, module) -> AuxiliaryModel:
        """A loaded auxiliary network (e.g. the flow's TorchScript copy) as this plan's AuxiliaryModel."""
        return AuxiliaryModel.from_module(module, kind=self.aux["kind"], output_space=self.aux["output_space"],
                                          groups=self.aux["groups"], n_features=self.aux["n_features"])


def resolve_feature_spec(source: DataSource, policy: Policy, feature_spec: FeatureSpec | None,
                         *, chunk_rows: int) -> FeatureSpec:
    """The given spec (checked against the label) or a passthrough spec from the first chunk's dtypes.

    The passthrough spec leaves out **every** declared protected column and the label, so a policy
    with several attributes feeds the target the same inputs for each (as
    :func:`faux_checks.gate.attributes.shared_feature_spec` does in memory); with ``protected = "..."``
    that is the one column, as before.
    """
    declared = [a.column for a in policy.attributes]
    required = declared + ([policy.label] if policy.label else [])
    source.require(declared, what="streaming scorer")
    if feature_spec is None:
        rows = min(chunk_rows, 65_536)
        probe = source.probe_frame([c for c in source.columns], rows=rows)
        if source.format == "parquet" and any(not pd.api.types.is_numeric_dtype(probe[c]) for c in probe.columns):
            # the schema gives the dtypes; a text column's first rows say whether it holds numbers as text
            probe = next((frame for _, frame in read_chunks(source, list(source.columns), chunk_rows=rows)), probe)
        return FeatureSpec.passthrough(probe, exclude=required)
    if policy.label and policy.label in feature_spec.source_columns:
        raise InputError(f"the label column '{policy.label}' is one of the target's input columns; "
                         "remove it from the feature spec")
    source.require(feature_spec.source_columns, what=f"FeatureSpec '{feature_spec.name}'")
    return feature_spec


def check_missing_protected(sample: SamplePart, policy: Policy) -> None:
    """Raise InputError (with the counts) for missing protected values under ``missing_protected = "error"``."""
    if sample.n_missing and policy.missing_protected == "error":
        raise InputError(
            f"protected attribute '{policy.protected}' has {fmt_count(sample.n_missing)} missing values in "
            f"{fmt_count(sample.n_rows)} rows; missing rows never join a group silently. Options: drop or impute "
            "them before the check, or set missing_protected = \"drop\" in the policy to exclude them (the count is reported)"
        )


def prepare_scoring(target_model, sample: SamplePart, *, policy: Policy, feature_spec: FeatureSpec,
                    aux_model=None, chunk_rows: int, progress: bool = False) -> tuple[ScoringPlan, AuxiliaryModel]:
    """Fix the groups and output form, and train (or wrap) the auxiliary model once.

    Parameters
    ----------
    sample : SamplePart
        From :func:`~.sample.sample_pass` / :func:`~.sample.merge_samples`.
    aux_model : AuxiliaryModel or torch module, optional
        Given auxiliary model (raw outputs); trained on the sample when omitted.

    Returns
    -------
    (ScoringPlan, AuxiliaryModel)

    Raises
    ------
    InputError
        Missing protected values with ``missing_protected = "error"``, a single group, a model that
        does not accept the features, an ambiguous output form, too few rows to train on, a
        batch-dependent target or auxiliary model (probed once here, not per chunk).
    """
    name = policy.protected
    check_missing_protected(sample, policy)
    codec = ProtectedCodec.build(sample, policy)
    if sample.X is None or len(sample.rows) == 0:
        raise InputError(f"no audited rows in {fmt_count(sample.n_rows)} rows (every protected value is missing)")
    values = codec.encode(pd.Series(sample.protected))
    protected = codec.attribute(values)
    X = sample.X
    Xt = torch.from_numpy(X[: min(len(X), 256)])
    check_model_accepts(target_model, Xt, feature_spec)
    output = resolve_output_form(target_model, Xt, TargetOutput(form=policy.target_output,
                                                                 target_class=policy.target_class))
    check_model_outputs(target_model, torch.from_numpy(X), output, rows=sample.rows)   # the sample's rows, before scoring
    uses_direct = name in feature_spec.source_columns
    mask, dx_dc = (direct_derivative(feature_spec, protected) if uses_direct
                   else (np.zeros(X.shape[1], dtype=bool), None))
    X_aux = X[:, ~mask]
    aux, quality, metric, (hold, y_hold, score_hold) = _sample_aux(aux_model, policy, codec, protected, X_aux, values,
                                                                   progress=progress)
    batch_probe = probe_batch_independence(target_model, aux, X, ~mask)
    intervals = quality_intervals(protected.kind, y_hold, score_hold, codec.groups, policy.decision.confidence,
                                  seed=policy.seed)
    held_per_group = np.bincount(codec.group_index(values[hold]), minlength=len(codec.groups))
    ig_baseline: Any = policy.faux.ig_baseline
    if policy.faux.variant == "ig" and ig_baseline == "mean":
        ig_baseline = X.astype(np.float64).mean(axis=0).astype(np.float32)
    swap_reference, c_std = None, float(np.std(values)) if not protected_kind(protected.kind).grouped else 1.0
    held_block = None
    if policy.faux.variant == "swap":
        fitted = faux_tester(target_model, aux, policy, output, feature_spec, protected, reference_rows=X,
                             reference_values=values, holdout_rows=X[hold], holdout_values=values[hold])
        swap_reference, held_block = fitted.reference, held_block_summary(fitted, feature_spec, str(name))
    plan = ScoringPlan(
        policy=policy, feature_spec=feature_spec, codec=codec, output=output,
        protected_mask=mask if uses_direct else None, dx_dc=dx_dc, ig_baseline=ig_baseline, chunk_rows=chunk_rows,
        n_rows=sample.n_rows, n_missing_protected=sample.n_missing,
        aux={"quality": float(quality), "metric": metric, "kind": protected.kind, "output_space": aux.output_space,
             "groups": tuple(protected.groups), "n_features": int(X_aux.shape[1]), "train_rows": int(len(X)),
             "epochs_run": getattr(aux, "epochs_run_", None), "given": aux_model is not None,
             "intervals": intervals, "seeds": None,
             "holdout_groups": {g: int(k) for g, k in zip(codec.groups, held_per_group, strict=False)},
             "batch_probe": batch_probe, "held_block": held_block,
             "nothing_free": bool(swap_reference is not None and swap_reference.nothing_free)},
        swap_reference=swap_reference, c_std=c_std,
    )
    if aux_model is None and policy.decision.aux_seeds > 1:
        plan = _with_seed_spread(plan, target_model, aux, X, values, protected)
    return plan, aux


def _sample_aux(aux_model, policy: Policy, codec: ProtectedCodec, protected: ProtectedAttribute, X_aux: np.ndarray,
                values: np.ndarray, *, progress: bool) -> tuple[AuxiliaryModel, float, str, tuple]:
    """The auxiliary model on the sample's rows X_aux (n, d_aux): trained (seeded, its held-out rows) or given (every
    sample row). Returns ``(aux, quality, metric, (hold, y_hold, score_hold))``: the rows its quality reads, their
    protected values and the aux model's scores on them."""
    if aux_model is None:
        aux = new_aux(policy, protected.kind, progress=progress)
        aux.fit(X_aux, values, groups=codec.groups if protected_kind(codec.kind).grouped else ())
        quality, metric = aux.quality_, aux.quality_metric_ + " (held-out rows of the training sample)"
        hold, (y_hold, score_hold) = aux.holdout_rows_, aux.holdout_
    else:
        aux = given_aux(aux_model, policy, protected, X_aux.shape[1])
        score_hold = holdout_scores(aux, X_aux)                      # one forward: the quality and its interval read it
        quality, metric, _ = quality_on(aux, X_aux, values, protected, score=score_hold)
        metric = metric.replace("on the audit rows", "on the training sample")
        hold, y_hold = np.arange(len(X_aux)), values
    return aux, quality, metric, (hold, y_hold, score_hold)


def _with_seed_spread(plan: ScoringPlan, target_model, aux: AuxiliaryModel, X: np.ndarray, values: np.ndarray,
                      protected: ProtectedAttribute) -> ScoringPlan:
    """The plan with the flagged fraction's spread over aux seeds (:func:`~faux_checks.gate.seeds.seed_spread`):
    extra trainings on the sample, each scoring a seeded subset of its rows (X (n, d), protected ``values`` (n,))."""
    policy = plan.policy
    seed_rows = seed_sample(len(X), policy)
    lic = plan.tester(target_model, aux).evaluate(X[seed_rows], values[seed_rows], evidence=False)
    seeds = seed_spread(target_model, policy, plan.output, plan.feature_spec, protected, X, values,
                        train=np.arange(len(X)), sample=seed_rows, used_flagged=lic.decision_weights(policy.faux.delta))
    return replace(plan, aux={**plan.aux, "seeds": seeds})
