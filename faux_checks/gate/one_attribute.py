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

from dataclasses import replace

import numpy as np
import pandas as pd

from .._validation import as_frame, fmt_count
from ..errors import InputError
from ..inputs.estimators import as_target
from ..inputs.missing import target_takes_missing, with_nan_inputs
from ..inputs.tabular import FeatureSpec
from ..method._batching import as_tensor
from ..method.faux import FAuxTester, LICResult
from ..method.output import TargetOutput, resolve_output_form
from .aux_model import AuxFit, free_column_quality
from .crossfit import check_aux, cross_fit_record, cross_fit_scores, cross_fit_seed_spread, oof_free_quality
from .bounds import flagged_interval
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
    uses_direct, mask = _direct_term(audit, policy)
    group_labels = audit.protected.group_labels(audit.values)
    names = list(audit.protected.groups) or sorted(set(group_labels))
    aux = check_aux(audit, policy, mask, group_labels, names, aux_model=aux_model, progress=progress)
    lic, tester = _faux_scores(target_model, aux, audit, policy, output, mask, progress=progress)

    faux, n, n_undefined = policy.faux, len(audit.X), int(lic.undefined.sum())
    flagged = lic.flagged(faux.delta)                                     # (n,) bool: flagged defined rows (lists)
    weights = lic.flag_probability(faux.delta)                            # (n,) what each defined row adds (0/1 or P)
    worst = lic.decision_weights(faux.delta)                              # (n,) undefined counted as flagged
    testers = run_baselines(policy, target_model, resolved, audit.X, lic, group_labels, audit.y_true, audit=audit)
    sample = seed_sample(n, policy)
    seed_models: list = []                                                # (seed, aux model): recorded for re-gates
    if aux_model is not None:
        seeds = None
    elif aux.cross is not None:
        seeds = cross_fit_seed_spread(target_model, aux.cross, audit, policy, resolved, mask, sample=sample,
                                      used_flagged=worst[sample], models=seed_models)
    else:
        seeds = seed_spread(target_model, policy, resolved, audit.feature_spec, audit.protected, audit.X, audit.values,
                            train=aux.rows, sample=sample, used_flagged=worst[sample], models=seed_models)
    interval = flagged_interval(int(round(float(worst.sum()))), n, policy.decision.confidence, seeds)
    n_flagged = int(round(float(weights.sum())))
    held_out = np.arange(n) if aux.cross is not None else aux.holdout     # cross-fitted: every row held out once
    evidence = CheckEvidence(
        n=n, n_flagged=n_flagged, n_undefined=n_undefined, group_rows=_group_counts(group_labels, names),
        holdout_rows=_group_counts(group_labels[held_out], names), aux_metric=aux.metric,
        aux_intervals=aux.intervals, interval=interval, testers=testers, nothing_free=_nothing_free(tester),
        group_flagged=_group_sums(group_labels, worst, names), couplings=coupling_evidence(tester, audit, policy, lic),
        held_block=held_block_summary(tester, audit.feature_spec, policy.single_protected("the in-memory check")))
    crossing = cutoff_reading(lic, group_labels, names, policy)          # None without [faux] cutoff
    outcome = decide(check_rules(evidence, policy, crossing))
    reasons = list(outcome.reasons)
    column = policy.single_protected("the in-memory check")    # prepare_audit refused several attributes already
    held = held_columns(tester, audit.feature_spec, column)
    reasons += check_notes(policy, audit, lic, n_undefined, uses_direct, held, _nothing_free(tester))
    reasons += tree_note(target_model, policy, audit.feature_spec)

    spec = audit.feature_spec
    assert lic.evidence is not None, "_faux_scores asks the tester for evidence"
    column_evidence = pd.DataFrame(spec.aggregate(lic.evidence.astype(np.float64)), columns=spec.source_columns,
                                   index=audit.row_index)                # (n, source columns)
    sensitivities = sensitivity(target_model, aux, audit, policy, output, lic, column_evidence, held, outcome.decision,
                               mask)
    groups_table = _group_table(lic, group_labels, worst, column, audit.protected.n_missing, direction)
    decomposition = decompose_change(target_model, resolved, audit.X, lic, spec, column, faux.admissible,
                                     audit.row_index) if faux.variant == "swap" else None
    reasons += sensitivity_note(sensitivities, policy)
    power = _power(interval, faux.max_flagged_fraction, policy.decision.confidence)
    roles = column_roles(tester, audit.feature_spec, policy) if faux.variant == "swap" else []
    free_quality = _free_quality(tester, aux, audit, mask) if faux.variant == "swap" else None
    first = (aux.intervals or [{}])[0]
    capacity = capacity_statement(aux.metric.split(" ")[0], aux.quality, (first.get("lower"), first.get("upper"))
                                  if first.get("lower") is not None else None, free_quality, roles, interval.fraction)
    reasons += [f"power: {power['statement']}", f"proxy capacity: {capacity}"]
    scores_all = np.full(len(frame), np.nan)                              # (n_input_rows,)
    scores_all[audit.row_index] = lic.scores
    flags_all = np.full(len(frame), np.nan)
    flags_all[audit.row_index] = np.where(lic.undefined, np.nan, weights)
    provenance = check_provenance(frame, policy, audit, resolved, aux, given=aux_model is not None, model_info=model_info,
                                  target_model=target_model)
    provenance.update(target_access_record(target_model, policy, resolved))
    provenance["power"] = power
    provenance["aux_reused"] = bool(aux.reused)      # a copy of the model this process trained on the same inputs
    provenance["aux_key"] = getattr(aux.model, "cache_key_", None)             # what its training read (aux_cache)
    provenance["aux_reused_from"] = getattr(aux.model, "reused_from_", None)   # "run <id>": restored from a record
    provenance["aux_seed_keys"] = {str(k): getattr(m, "cache_key_", None) for k, m in seed_models}   # extra seeds
    provenance["aux_seeds_reused_from"] = {str(k): getattr(m, "reused_from_", None) for k, m in seed_models}
    provenance["device"] = getattr(tester, "device_used_", "cpu")    # where the scores ran ([scale] device)
    provenance["proxy_capacity"] = capacity
    provenance.update(cross_fit=cross_fit_record(aux), couplings=evidence.couplings)   # None: single split, no readings
    if provenance["swap"] is not None:
        provenance["swap"]["held_fixed_uninformative"] = held
        provenance["swap"]["sensitivity"] = sensitivities
        provenance["swap"]["columns"] = roles
        provenance["swap"]["aux_quality_free_columns"] = free_quality
    return CheckResult(
        decision=outcome.decision, reasons=reasons, flagged_fraction=interval.fraction,
        max_flagged_fraction=faux.max_flagged_fraction, delta=faux.delta, n_individuals=n,
        n_undefined=n_undefined, n_missing_protected=audit.protected.n_missing,
        by_group=_by_group_table(group_labels, lic.scores, weights, lic.undefined), aux_quality=aux.quality,
        aux_quality_metric=aux.metric, evidence=column_evidence, testers=testers, provenance=provenance,
        scores=scores_all, row_index=audit.row_index, uses_protected_directly=uses_direct,
        top_flagged=_top_flagged(lic, audit.row_index, column_evidence, flagged, groups=tuple(audit.protected.groups),
                                 decomposition=decomposition,
                                 parts_of=column_parts(spec, column, faux.admissible)),
        curve=delta_curve(lic.scores, outcomes=lic.outcomes, weights=lic.outcome_weights), aux_roc=aux.roc,
        n_flagged=n_flagged, interval=interval, flag_probability=flags_all,
        rules=outcome.rules, aux_intervals=list(aux.intervals),
        group_rows=[{"group": g, "audited": evidence.group_rows[g], "holdout": evidence.holdout_rows[g]} for g in names],
        aux_model=aux.model, aux_seed_models=seed_models, swap_reference=getattr(tester, "reference", None),
        decomposition=decomposition,
        group_table=groups_table,
        outcome=outcome_record(direction, lic, group_labels, names, faux.delta, column, crossing),
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


def _direct_term(audit: AuditRows, policy: Policy) -> tuple[bool, np.ndarray]:
    """Whether the target takes the protected attribute as input, and its columns' mask (d,)."""
    column = policy.single_protected("the in-memory check")
    uses_direct = column in audit.feature_spec.source_columns
    return uses_direct, audit.feature_spec.feature_mask(column)


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
                 parts_of: dict[str, str] | None = None) -> list[dict]:
    """The ``k`` flagged individuals with the largest scores: ŷ, its counterfactual, the top evidence and (swap
    reading) the three parts of the change with the columns of each (:func:`~faux_checks.gate.decompose.reason_list`)."""
    if not flagged.any():
        return []
    idx = np.flatnonzero(flagged)
    order = idx[np.argsort(-lic.scores[idx])][:k]
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
