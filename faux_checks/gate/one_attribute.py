"""One protected attribute's check in memory: :func:`check_one_attribute` -> :class:`~faux_checks.gate.result.CheckResult`.

The gate over N ≥ 1 attributes (:func:`faux_checks.gate.attributes.check_attributes`, and
``faux_checks.check`` for a notebook) runs it once per attribute and decides once
(:func:`faux_checks.gate.sections.combine`); it is not a public entry of its own.

The steps, each in its own module of this folder:

1. the rows to audit, encoded, and a target model that accepts them (:mod:`.rows`);
2. the auxiliary model, trained on those rows or given, and its quality (:mod:`.aux_model`);
3. the fAux scores, a non-finite score always undefined (:class:`~faux_checks.method.faux.FAuxTester`);
4. the policy's baseline testers on the same rows (:mod:`.testers`);
5. the flagged fraction's interval: over individuals and over aux seeds (:mod:`.bounds`, :mod:`.seeds`);
6. the decision (:func:`~faux_checks.gate.check_rules.check_rules` read by
   :func:`~faux_checks.gate.decision.decide`) and the provenance.

Bad input raises :class:`~faux_checks.errors.InputError` (the CLI exits 2); adapters turn any
exception into an ``undecided`` result with :meth:`CheckResult.undecided`. Nothing here passes
by accident.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from .._validation import as_frame, fmt_count
from ..errors import InputError
from ..inputs.estimators import as_target
from ..inputs.missing import target_takes_missing, with_nan_inputs
from ..inputs.tabular import FeatureSpec
from ..method._batching import as_tensor
from ..method.faux import FAuxTester
from ..method.result import LICResult
from ..method.output import TargetOutput, resolve_output_form
from .aux_model import AuxFit, free_column_quality
from .crossfit import check_aux, cross_fit_record, cross_fit_scores, cross_fit_seed_spread, oof_free_quality
from .bounds import FlaggedInterval, flagged_interval
from .check_provenance import check_provenance, target_access_record
from .power import capacity_statement, detectable_fraction
from .check_notes import check_notes, column_roles, held_columns, sensitivity, sensitivity_note, tree_note
from .check_rules import CheckEvidence, check_rules
from .couplings import coupling_evidence
from .cutoff import cutoff_reading
from .joint_block import held_block_summary
from .decision import decide
from .decompose import column_parts, decompose_change, reason_list
from .outcome import OutcomeDirection, outcome_direction, outcome_record
from .policy_schema import Policy
from .result import CheckResult, delta_curve
from .rows import AuditRows, check_model_accepts, check_model_outputs, prepare_audit
from .scorer import faux_tester
from .seeds import seed_sample, seed_spread
from .testers import run_baselines

__all__ = ["check_one_attribute"]


def check_one_attribute(
    target_model,
    data: pd.DataFrame,
    *,
    policy: Policy,
    feature_spec: FeatureSpec | None = None,
    aux_model=None,
    progress: bool = False,
    model_info: dict | None = None,
) -> CheckResult:
    """Run the fAux individual-fairness check and the policy's baseline testers, then decide.

    Parameters
    ----------
    target_model : torch.nn.Module, TorchScript module, scikit-learn estimator or Pipeline, XGBoost or LightGBM model
        Maps the encoded features (n, d) to the declared output (policy ``target_output``); anything but a torch
        module is read through :func:`~faux_checks.inputs.estimators.as_target` (a Pipeline starting with a
        ColumnTransformer brings its own feature spec, so ``data`` is the raw rows).
    data : DataFrame of shape (n, any)
        Audit rows: the target's source columns, the protected column and (optionally) the label.
        Never modified.
    policy : Policy
        δ, limits, testers and settings.
    feature_spec : FeatureSpec, optional
        Encoding of the target's inputs. Without it the model receives the numeric columns as they
        are, in file order, minus the protected and label columns.
    aux_model : AuxiliaryModel or torch module, optional
        A given auxiliary model (raw outputs); its quality is measured on the audit rows.
        Trained on the audit rows (seeded, held-out quality) when omitted.
    progress : bool
        Progress bars on aux training and scoring.
    model_info : dict, optional
        Added to the provenance (model name, version, sha256, ...).

    Returns
    -------
    CheckResult

    Raises
    ------
    InputError
        Missing columns, missing values the target cannot take (policy ``missing_values``; every column named),
        a feature count the model does not accept, an
        ambiguous output form, and every other bad input; the message names the column, the
        row count and the fix.

    Notes
    -----
    fAux: Castiglione et al. 2022, eq. 9-10 (arXiv 2210.06288). The steps are in the module
    docstring, the decision rules in :func:`~faux_checks.gate.check_rules.check_rules`.
    """
    frame = as_frame(data)
    scored = _scored_rows(target_model, frame, policy, feature_spec, aux_model=aux_model, progress=progress)
    testers = run_baselines(policy, scored.target_model, scored.resolved, scored.audit.X, scored.lic,
                            scored.group_labels, scored.audit.y_true, audit=scored.audit)
    flags = _flag_counts(scored, policy, given=aux_model is not None)
    evidence = _check_evidence(scored, flags, testers, policy)
    crossing = cutoff_reading(scored.lic, scored.group_labels, scored.names, policy)   # None without [faux] cutoff
    outcome = decide(check_rules(evidence, policy, crossing))
    readings = _readings(scored, flags, policy, outcome.decision)
    provenance = _provenance(frame, scored, flags, readings, evidence, policy, given=aux_model is not None,
                             model_info=model_info)
    return _check_result(frame, scored, flags, evidence, outcome, readings, testers, provenance, policy, crossing)


@dataclass(frozen=True)
class _Scored:
    """One attribute's audited rows, the target as scored and the fAux scores: what every later stage reads."""

    target_model: Any            # the target as scored: NaN inputs where the missing indicator says so
    audit: AuditRows
    direction: OutcomeDirection  # the favourable outcome's direction (favourable_label checked on the label)
    output: TargetOutput         # the declared output
    resolved: TargetOutput       # the output form read from the target
    column: str                  # the protected attribute
    uses_direct: bool            # the target takes the protected attribute as input
    mask: np.ndarray             # (d,) bool: the protected attribute's encoded columns
    group_labels: np.ndarray     # (n,) each audited row's group
    names: list                  # group names: the declared ones, else those found
    aux: AuxFit
    lic: LICResult
    tester: FAuxTester


@dataclass(frozen=True)
class _Flags:
    """The flagged fraction: each row's flag, the counts and the interval over individuals and over aux seeds."""

    flagged: np.ndarray          # (n,) bool: defined rows flagged (the lists)
    weights: np.ndarray          # (n,) what each defined row adds (0/1 or P)
    worst: np.ndarray            # (n,) undefined counted as flagged
    n_flagged: int
    n_undefined: int
    interval: FlaggedInterval
    seed_models: list            # (seed, aux model): the extra seeds' models, recorded for re-gates


@dataclass(frozen=True)
class _Readings:
    """What the run reads beside the decision rules: the notes added to the reasons, the per-column evidence, the
    swap reading's sensitivity, parts and column roles, the group table, the power and the proxy capacity."""

    notes: list[str]             # reasons after the decision rules' own, in order
    held: list[str]              # columns held fixed as uninformative
    column_evidence: pd.DataFrame   # (n, source columns)
    sensitivities: list[dict]
    groups_table: list[dict]
    decomposition: pd.DataFrame | None
    power: dict
    roles: list
    free_quality: float | None
    capacity: str


def _target_and_rows(target_model, frame: pd.DataFrame, policy: Policy, feature_spec: FeatureSpec | None):
    """The inputs: the rows to audit, encoded, and a target model that accepts them and says its output form.

    Returns ``(target_model, audit, direction, output, resolved)``: the target as scored (NaN inputs where the missing
    indicator says so), the :class:`~faux_checks.gate.rows.AuditRows`, the favourable outcome's direction, the
    declared and the resolved output. Every row goes through the target before any training.

    Raises
    ------
    InputError
        Missing columns or values, a feature count the model does not accept, an ambiguous output form.
    """
    target_model, feature_spec = as_target(target_model, feature_spec)   # a Pipeline, booster, estimator as it is
    audit = prepare_audit(frame, policy=policy, feature_spec=feature_spec,
                          takes_missing=target_takes_missing(target_model, policy.missing_values))
    target_model = with_nan_inputs(target_model, audit.feature_spec)   # NaN where the indicator says missing
    direction = outcome_direction(policy, frame)                          # favourable_label checked on the label
    Xt = as_tensor(audit.X)
    check_model_accepts(target_model, Xt, audit.feature_spec)
    output = TargetOutput(form=policy.target_output, target_class=policy.target_class)
    resolved = resolve_output_form(target_model, Xt[:256], output)
    check_model_outputs(target_model, Xt, resolved, rows=audit.row_index)   # every row, before any training
    return target_model, audit, direction, output, resolved


def _scored_rows(target_model, frame: pd.DataFrame, policy: Policy, feature_spec: FeatureSpec | None, *,
                 aux_model, progress: bool) -> _Scored:
    """The inputs (:func:`_target_and_rows`), the auxiliary model (trained on the audit rows or given, with its
    quality: :func:`~faux_checks.gate.crossfit.check_aux`) and the fAux scores of every audited row."""
    target_model, audit, direction, output, resolved = _target_and_rows(target_model, frame, policy, feature_spec)
    column = policy.single_protected("the in-memory check")    # prepare_audit refused several attributes already
    uses_direct, mask = column in audit.feature_spec.source_columns, audit.feature_spec.feature_mask(column)
    group_labels = audit.protected.group_labels(audit.values)
    names = list(audit.protected.groups) or sorted(set(group_labels))
    aux = check_aux(audit, policy, mask, group_labels, names, aux_model=aux_model, progress=progress)
    lic, tester = _faux_scores(target_model, aux, audit, policy, output, mask, progress=progress)
    return _Scored(target_model=target_model, audit=audit, direction=direction, output=output, resolved=resolved,
                   column=column, uses_direct=uses_direct, mask=mask, group_labels=group_labels, names=names, aux=aux,
                   lic=lic, tester=tester)


def _flag_counts(s: _Scored, policy: Policy, *, given: bool) -> _Flags:
    """Each row's flag at δ and the flagged fraction's interval: over individuals, and over aux seeds (extra trainings
    on a seeded sample: :func:`~faux_checks.gate.seeds.seed_spread`, cross-fitted
    :func:`~faux_checks.gate.crossfit.cross_fit_seed_spread`; none for a ``given`` aux model)."""
    delta, n = policy.faux.delta, len(s.audit.X)
    weights = s.lic.flag_probability(delta)
    worst = s.lic.decision_weights(delta)
    sample = seed_sample(n, policy)
    seed_models: list = []
    if given:
        seeds = None
    elif s.aux.cross is not None:
        seeds = cross_fit_seed_spread(s.target_model, s.aux.cross, s.audit, policy, s.resolved, s.mask, sample=sample,
                                      used_flagged=worst[sample], models=seed_models)
    else:
        seeds = seed_spread(s.target_model, policy, s.resolved, s.audit.feature_spec, s.audit.protected, s.audit.X,
                            s.audit.values, train=s.aux.rows, sample=sample, used_flagged=worst[sample],
                            models=seed_models)
    interval = flagged_interval(int(round(float(worst.sum()))), n, policy.decision.confidence, seeds)
    return _Flags(flagged=s.lic.flagged(delta), weights=weights, worst=worst, n_flagged=int(round(float(weights.sum()))),
                  n_undefined=int(s.lic.undefined.sum()), interval=interval, seed_models=seed_models)


def _check_evidence(s: _Scored, flags: _Flags, testers: dict, policy: Policy) -> CheckEvidence:
    """What the decision rules read (:func:`~faux_checks.gate.check_rules.check_rules`): the counts, rows per group
    audited and held out (cross-fitted: every row held out once), the aux quality, the interval, the testers, the
    couplings and the held block."""
    held_out = np.arange(len(s.audit.X)) if s.aux.cross is not None else s.aux.holdout
    return CheckEvidence(
        n=len(s.audit.X), n_flagged=flags.n_flagged, n_undefined=flags.n_undefined,
        group_rows=_group_counts(s.group_labels, s.names), holdout_rows=_group_counts(s.group_labels[held_out], s.names),
        aux_metric=s.aux.metric, aux_intervals=s.aux.intervals, interval=flags.interval, testers=testers,
        nothing_free=_nothing_free(s.tester), group_flagged=_group_sums(s.group_labels, flags.worst, s.names),
        couplings=coupling_evidence(s.tester, s.audit, policy, s.lic),
        held_block=held_block_summary(s.tester, s.audit.feature_spec, s.column))


def _readings(s: _Scored, flags: _Flags, policy: Policy, decision: str) -> _Readings:
    """The readings beside the decision: the notes (:mod:`~faux_checks.gate.check_notes`), the per-column evidence,
    the sensitivity to the held columns, the group table, the swap reading's parts and column roles, the power
    (:func:`_power`) and the proxy capacity (:func:`~faux_checks.gate.power.capacity_statement`)."""
    faux, spec, aux = policy.faux, s.audit.feature_spec, s.aux
    held = held_columns(s.tester, spec, s.column)
    notes = [*check_notes(policy, s.audit, s.lic, flags.n_undefined, s.uses_direct, held, _nothing_free(s.tester)),
             *tree_note(s.target_model, policy, spec)]
    assert s.lic.evidence is not None, "_faux_scores asks the tester for evidence"
    column_evidence = pd.DataFrame(spec.aggregate(s.lic.evidence.astype(np.float64)), columns=spec.source_columns,
                                   index=s.audit.row_index)                # (n, source columns)
    sensitivities = sensitivity(s.target_model, aux, s.audit, policy, s.output, s.lic, column_evidence, held, decision,
                                s.mask)
    groups_table = _group_table(s.lic, s.group_labels, flags.worst, s.column, s.audit.protected.n_missing, s.direction)
    decomposition = decompose_change(s.target_model, s.resolved, s.audit.X, s.lic, spec, s.column, faux.admissible,
                                     s.audit.row_index) if faux.variant == "swap" else None
    notes += sensitivity_note(sensitivities, policy)
    power = _power(flags.interval, faux.max_flagged_fraction, policy.decision.confidence)
    roles = column_roles(s.tester, spec, policy) if faux.variant == "swap" else []
    free_quality = _free_quality(s.tester, aux, s.audit, s.mask) if faux.variant == "swap" else None
    first = (aux.intervals or [{}])[0]
    capacity = capacity_statement(aux.metric.split(" ")[0], aux.quality, (first.get("lower"), first.get("upper"))
                                  if first.get("lower") is not None else None, free_quality, roles,
                                  flags.interval.fraction)
    notes += [f"power: {power['statement']}", f"proxy capacity: {capacity}"]
    return _Readings(notes=notes, held=held, column_evidence=column_evidence, sensitivities=sensitivities,
                     groups_table=groups_table, decomposition=decomposition, power=power, roles=roles,
                     free_quality=free_quality, capacity=capacity)


def _provenance(frame: pd.DataFrame, s: _Scored, flags: _Flags, readings: _Readings, evidence: CheckEvidence,
                policy: Policy, *, given: bool, model_info: dict | None) -> dict:
    """The record of how the result was reached (:func:`~faux_checks.gate.check_provenance.check_provenance`): the
    target's access, the power, the aux models' cache keys and origins, the device, the cross-fit, the couplings
    and, for the swap reading, its held columns, sensitivity, column roles and free-column quality."""
    provenance = check_provenance(frame, policy, s.audit, s.resolved, s.aux, given=given, model_info=model_info,
                                  target_model=s.target_model)
    provenance.update(target_access_record(s.target_model, policy, s.resolved))
    provenance["power"] = readings.power
    provenance["aux_reused"] = bool(s.aux.reused)      # a copy of the model this process trained on the same inputs
    provenance["aux_key"] = getattr(s.aux.model, "cache_key_", None)             # what its training read (aux_cache)
    provenance["aux_reused_from"] = getattr(s.aux.model, "reused_from_", None)   # "run <id>": restored from a record
    provenance["aux_seed_keys"] = {str(k): getattr(m, "cache_key_", None) for k, m in flags.seed_models}  # extra seeds
    provenance["aux_seeds_reused_from"] = {str(k): getattr(m, "reused_from_", None) for k, m in flags.seed_models}
    provenance["device"] = getattr(s.tester, "device_used_", "cpu")    # where the scores ran ([scale] device)
    provenance["proxy_capacity"] = readings.capacity
    provenance.update(cross_fit=cross_fit_record(s.aux), couplings=evidence.couplings)   # None: single split
    if provenance["swap"] is not None:
        provenance["swap"]["held_fixed_uninformative"] = readings.held
        provenance["swap"]["sensitivity"] = readings.sensitivities
        provenance["swap"]["columns"] = readings.roles
        provenance["swap"]["aux_quality_free_columns"] = readings.free_quality
    return provenance


def _check_result(frame: pd.DataFrame, s: _Scored, flags: _Flags, evidence: CheckEvidence, outcome,
                  readings: _Readings, testers: dict, provenance: dict, policy: Policy, crossing=None) -> CheckResult:
    """The result: the decision and its reasons, the flagged fraction and its interval, the per-row scores and flag
    probabilities on the input rows (NaN for rows not audited), the group tables, the top flagged individuals, the
    δ curve, the outcome record (with the cut-off reading ``crossing``, None without ``[faux] cutoff``) and the models
    to re-gate with."""
    faux, lic, audit = policy.faux, s.lic, s.audit
    scores_all = np.full(len(frame), np.nan)                              # (n_input_rows,)
    scores_all[audit.row_index] = lic.scores
    flags_all = np.full(len(frame), np.nan)
    flags_all[audit.row_index] = np.where(lic.undefined, np.nan, flags.weights)
    return CheckResult(
        decision=outcome.decision, reasons=[*outcome.reasons, *readings.notes], flagged_fraction=flags.interval.fraction,
        max_flagged_fraction=faux.max_flagged_fraction, delta=faux.delta, n_individuals=len(audit.X),
        n_undefined=flags.n_undefined, n_missing_protected=audit.protected.n_missing,
        by_group=_by_group_table(s.group_labels, lic.scores, flags.weights, lic.undefined), aux_quality=s.aux.quality,
        aux_quality_metric=s.aux.metric, evidence=readings.column_evidence, testers=testers, provenance=provenance,
        scores=scores_all, row_index=audit.row_index, uses_protected_directly=s.uses_direct,
        top_flagged=_top_flagged(lic, audit.row_index, readings.column_evidence, flags.flagged,
                                 groups=tuple(audit.protected.groups), decomposition=readings.decomposition,
                                 delta=faux.delta, parts_of=column_parts(audit.feature_spec, s.column, faux.admissible)),
        curve=delta_curve(lic.scores, outcomes=lic.outcomes, weights=lic.outcome_weights), aux_roc=s.aux.roc,
        n_flagged=flags.n_flagged, interval=flags.interval, flag_probability=flags_all,
        rules=outcome.rules, aux_intervals=list(s.aux.intervals),
        group_rows=[{"group": g, "audited": evidence.group_rows[g], "holdout": evidence.holdout_rows[g]}
                    for g in s.names],
        aux_model=s.aux.model, aux_seed_models=flags.seed_models, swap_reference=getattr(s.tester, "reference", None),
        decomposition=readings.decomposition,
        group_table=readings.groups_table,
        outcome=outcome_record(s.direction, lic, s.group_labels, s.names, faux.delta, s.column, crossing),
    )


def _group_table(lic: LICResult, group_labels: np.ndarray, worst: np.ndarray, protected: str,
                 n_missing: int, direction: OutcomeDirection) -> list[dict]:
    """The descriptive group-level table (:func:`faux_checks.baselines.group_metrics.group_table`): the target's
    class at ŷ > 0.5, the favourable outcome's rate and impact ratios in the declared direction, mean ŷ, the flagged
    fraction per group, and the rows whose protected value is unknown (not audited: a count only). Empty when
    fairlearn is not installed (it comes with the ``gate`` extra)."""
    try:
        from ..baselines.group_metrics import group_table
        rows = group_table(lic.probability > 0.5, lic.probability, pd.DataFrame({protected: group_labels}),
                           favourable=direction.target_favourable, flagged=worst)
    except ImportError:
        return []
    if direction.unit is not None:                   # a value target: no class at ŷ > 0.5; mean ŷ is in its unit
        rows = [{**r, "predicted_rate": None} for r in rows]
    if n_missing:
        rows.append({"attribute": protected, "group": "(unknown: not audited)", "count": int(n_missing),
                     "predicted_rate": None, "favourable_rate": None, "mean_score": None, "impact_ratio": None,
                     "most_favoured": None if direction.target_favourable is None else False,
                     "flagged_fraction": None})
    return rows


def _faux_scores(target_model, aux: AuxFit, audit: AuditRows, policy: Policy, output: TargetOutput,
                 mask: np.ndarray, *, progress: bool) -> tuple[LICResult, FAuxTester]:
    """The policy's fAux variant on every audited row, with evidence; undefined scores kept undefined.

    Cross-fitted: each fold's rows by its fold's tester; the tester returned is fold 0's (its holds are every
    fold's: :func:`~faux_checks.gate.crossfit.pooled_holds`)."""
    if aux.cross is not None:
        lic, testers = cross_fit_scores(target_model, aux.cross, audit, policy, output, mask, progress=progress)
        return _fail_closed_scores(lic, len(audit.X)), testers[0]
    # a gate's recorded aux model carries the gate's reference (faux_checks.report.records.read_aux_record)
    reference = getattr(aux.model, "swap_reference_", None) if policy.faux.variant == "swap" else None
    tester = faux_tester(target_model, aux.model, policy, output, audit.feature_spec, audit.protected,
                         reference=reference, reference_rows=audit.X[aux.rows], reference_values=audit.values[aux.rows],
                         holdout_rows=audit.X[aux.holdout], holdout_values=audit.values[aux.holdout], progress=progress)
    lic = _fail_closed_scores(tester.evaluate(audit.X, audit.values, evidence=True), len(audit.X))
    return lic, tester


def _power(interval, limit: float, confidence: float, power: float = 0.95) -> dict:
    """What the run could detect: the smallest flagged fraction it fails in ``power`` of repeated audits."""
    p = detectable_fraction(interval.n, limit, confidence, power=power, lower_shift=interval.seed_shift[0])
    statement = (f"with {fmt_count(interval.n)} audited individuals this run fails, in {power:.0%} of repeated audits, "
                 f"any model flagging at least {p:.2%} (the limit is {limit:.2%})" if p is not None else
                 f"with {fmt_count(interval.n)} audited individuals no flagged fraction can clear the limit {limit:.2%}")
    return {"detectable_fraction": p, "power": power, "n": interval.n, "limit": limit, "statement": statement}


def _nothing_free(tester: FAuxTester) -> bool:
    reference = getattr(tester, "reference", None)
    return reference is not None and reference.nothing_free


def _free_quality(tester: FAuxTester, aux: AuxFit, audit: AuditRows, mask: np.ndarray) -> float | None:
    """The aux model's held-out quality with the held columns permuted (None for a given model or nothing free)."""
    reference = getattr(tester, "reference", None)
    if reference is None or reference.nothing_free or not len(aux.holdout):
        return None
    if aux.cross is not None:      # every audited row, each read by the fold model that did not train on it
        q = oof_free_quality(aux.cross, audit, mask, reference.admissible)
    else:
        q = free_column_quality(aux.model, audit.X[aux.holdout][:, ~mask], audit.values[aux.holdout],
                                audit.protected, reference.admissible)
    return None if q is None or not np.isfinite(q) else q


def _fail_closed_scores(lic: LICResult, n: int) -> LICResult:
    """Mark every non-finite score undefined (NaN), so that it can never count as "not flagged".

    The scorer already does this (:mod:`faux_checks.method.lic`); this guard keeps the decision closed
    even if a scorer broke that contract (a NaN or inf score not in ``undefined``).

    Raises
    ------
    InputError
        If the scorer returned a number of scores other than the ``n`` audited individuals.
    """
    scores = np.asarray(lic.scores, dtype=np.float64)
    undefined = np.asarray(lic.undefined, dtype=bool)
    if scores.shape != (n,) or undefined.shape != (n,):
        raise InputError(f"the scorer returned {scores.shape} scores and {undefined.shape} undefined flags "
                         f"for {n:,} individuals")
    undefined = undefined | ~np.isfinite(scores)
    return replace(lic, scores=np.where(undefined, np.nan, scores), undefined=undefined)


def _group_counts(labels: np.ndarray, names: list) -> dict[str, int]:
    """Rows per group name (every name listed, 0 when absent) of ``labels`` (m,)."""
    labels = np.asarray(labels, dtype=object)
    return {str(g): int((labels == g).sum()) for g in names}


def _group_sums(labels: np.ndarray, weights: np.ndarray, names: list) -> dict[str, float]:
    """Sum of ``weights`` (n,) per group name (0 when absent): flagged individuals per group, undefined counted."""
    labels = np.asarray(labels, dtype=object)
    return {str(g): float(weights[labels == g].sum()) for g in names}


def _by_group_table(labels: np.ndarray, scores: np.ndarray, flagged: np.ndarray, undefined: np.ndarray) -> pd.DataFrame:
    """Per protected group: ``n``, ``flagged`` (defined rows flagged: the sum of their flag probabilities), ``undefined``,
    ``flagged_fraction`` (undefined
    counted as flagged, over all of the group's rows), ``flagged_fraction_defined`` (over its defined scores),
    ``mean_score``, ``p90_score``. All inputs (n,)."""
    df = pd.DataFrame({"group": labels, "score": scores, "flagged": flagged, "undefined": undefined})
    out = df.groupby("group", observed=True).agg(
        n=("score", "size"), flagged=("flagged", "sum"), undefined=("undefined", "sum"),
        mean_score=("score", "mean"), p90_score=("score", lambda s: float(np.nanquantile(s, 0.9)) if s.notna().any() else np.nan),
    )
    out["flagged_fraction"] = (out["flagged"] + out["undefined"]) / out["n"]
    out["flagged_fraction_defined"] = out["flagged"] / (out["n"] - out["undefined"]).replace(0, np.nan)
    return out[["n", "flagged", "flagged_fraction", "flagged_fraction_defined", "undefined", "mean_score", "p90_score"]]


def _top_flagged(lic: LICResult, row_index: np.ndarray, evidence: pd.DataFrame, flagged: np.ndarray, k: int = 10,
                 groups: tuple = (), decomposition: pd.DataFrame | None = None,
                 parts_of: dict[str, str] | None = None, delta: float = 0.0) -> list[dict]:
    """The ``k`` flagged individuals ranked first by :meth:`~faux_checks.method.result.LICResult.ranking_score` at
    ``delta``: ŷ, its counterfactual, the top evidence and (swap
    reading) the three parts of the change with the columns of each (:func:`~faux_checks.gate.decompose.reason_list`)."""
    if not flagged.any():
        return []
    idx = np.flatnonzero(flagged)
    order = idx[np.argsort(-lic.ranking_score(delta)[idx], kind="stable")][:k]
    out = []
    for i in order:
        ev = evidence.iloc[i]
        cols = ev.abs().sort_values(ascending=False).head(3)
        entry = {"row": int(row_index[i]), "lic_score": float(lic.scores[i]), "probability": float(lic.probability[i]),
                 "top_evidence": [{"column": str(c), "evidence": float(ev[c])} for c in cols.index]}
        if lic.counterfactual_probability is not None and lic.counterfactual_target is not None:
            entry["counterfactual_probability"] = float(lic.counterfactual_probability[i])
            entry["counterfactual_group"] = (groups[int(lic.counterfactual_target[i])] if groups
                                             else f"{int(lic.counterfactual_target[i]):+d} sd")
        if decomposition is not None:
            parts = decomposition.iloc[i]
            entry["parts"] = {k: (None if not np.isfinite(v) else float(v)) for k, v in parts.items()}
            entry["reasons"] = reason_list(ev, parts, parts_of or {})
        out.append(entry)
    return out
