"""The drift audit of a deployed version: :func:`run_audit` runs the three steps and decides."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from .._validation import as_frame
from ..errors import InputError
from ..gate.policy import Policy
from ..inputs.tabular import FeatureSpec
from ..provenance import data_sha256, installed_versions, jsonable, package_versions
from .classification import classification_quality, finite_or_none
from .columns import column_drift
from .decision import decide_audit, decide_audit_attributes
from .fairness import fairness_drift
from .results import AuditAttribute, AuditResult

__all__ = ["audit_columns", "run_audit", "run_audit_attributes"]

logger = logging.getLogger(__name__)

#: Integrations whose versions an audit records next to the core packages.
OPTIONAL_PACKAGES = ("evidently", "scipy", "prefect", "mlflow", "great-expectations", "matplotlib", "jsonschema")


def audit_columns(feature_spec: FeatureSpec | None, reference: pd.DataFrame, current: pd.DataFrame, *,
                  policy: Policy) -> dict[str, str]:
    """Columns compared for drift and their roles: target inputs, protected, then others shared."""
    inputs = feature_spec.source_columns if feature_spec is not None else []
    columns = {c: "feature" for c in inputs if c != policy.protected}
    columns[policy.protected] = "protected"
    for c in reference.columns:
        if c not in columns and c != policy.label and c in current.columns:
            columns[str(c)] = "other"
    return columns


def _aux_note(fairness) -> str:
    """One line: which auxiliary model scored both batches, and what the score drift compares."""
    src = fairness.aux_source
    if src.get("source") == "gate":
        text = (f"auxiliary model: the gate's (run {src.get('run_id')}), reused on both batches, so the score drift "
                "measures the data")
    elif src.get("source") == "retrained":
        text = "auxiliary model: retrained on each batch (the score drift includes the retraining's own variation)"
    else:
        text = f"auxiliary model: {src.get('source')}"
    if src.get("note"):
        text += f" ({src['note']})"
    if fairness.score_reference:
        text += f"; KS reference: {fairness.score_reference}"
    return text


def run_audit(
    target_model,
    reference: pd.DataFrame,
    current: pd.DataFrame,
    *,
    policy: Policy,
    feature_spec: FeatureSpec | None = None,
    evidence_dir: str | Path | None = None,
    model_info: dict | None = None,
    gate_record: dict | None = None,
    aux_model=None,
    reference_scores: np.ndarray | None = None,
    aux_source: dict | None = None,
) -> AuditResult:
    """Audit a deployed model on a current batch against its reference data (module docstring).

    Parameters
    ----------
    target_model : torch module
        The deployed version's model.
    reference : DataFrame
        The data the version was gated on. Not modified.
    current : DataFrame
        The current batch. Not modified.
    policy : Policy
        The gate policy; its ``[audit]`` section sets the limits.
    feature_spec : FeatureSpec, optional
        The version's encoding; without it the reference's numeric columns (minus protected and
        label) are passed to the model as they are, for both batches.
    evidence_dir : path, optional
        Existing folder for Evidently's HTML reports (``evidently_drift.html``,
        ``evidently_classification.html``).
    model_info : dict, optional
        Added to the provenance (name, version, sha256).
    gate_record : dict, optional
        What the gate recorded (``flagged_fraction``, ``data_sha256``): compared with the
        reference check and noted when they differ.
    aux_model : torch module or AuxiliaryModel, optional
        The gate's auxiliary model: both batches are scored with it (score drift then measures
        the data); without it each batch trains its own.
    reference_scores : ndarray of shape (m,), optional
        The gate's recorded defined scores: the KS test's reference.
    aux_source : dict, optional
        Where ``aux_model`` came from (``source``, ``note``, ``run_id``), reported as given.

    Returns
    -------
    AuditResult
        Never raises for bad data: what could not be computed makes the audit ``undecided``
        with the reason (the column, the row counts).

    A policy with ``[[attributes]]`` (and intersections) is audited over every attribute
    (:func:`run_audit_attributes`); ``aux_model``, ``reference_scores`` and ``aux_source`` are then
    mappings from attribute name (``sex``, ``sex×race``) to that attribute's.
    """
    if policy.reports_per_attribute:
        return run_audit_attributes(target_model, reference, current, policy=policy, feature_spec=feature_spec,
                                    evidence_dir=evidence_dir, model_info=model_info, gate_record=gate_record,
                                    aux_models=aux_model, reference_scores=reference_scores, aux_sources=aux_source)
    timings: dict[str, float] = {}
    reference, current = as_frame(reference), as_frame(current)
    evidence = Path(evidence_dir) if evidence_dir is not None else None
    t0 = time.perf_counter()
    if feature_spec is None:
        exclude = [policy.protected] + ([policy.label] if policy.label else [])
        try:
            feature_spec = FeatureSpec.passthrough(reference, exclude=exclude, name="passthrough (reference columns)")
        except InputError as exc:  # the fAux step reports it; drift still runs
            logger.warning("audit: no feature columns: %s", exc)
    columns = audit_columns(feature_spec, reference, current, policy=policy)
    categorical = (policy.protected,) if policy.protected_kind != "continuous" else ()
    if feature_spec is not None:  # the spec's one-hot columns are categorical for Evidently too
        categorical += tuple(c.name for c in feature_spec.columns if c.kind == "categorical" and c.name not in categorical)
    drift = column_drift(reference, current, columns, categorical=categorical, settings=policy.audit,
                         html_path=None if evidence is None else evidence / "evidently_drift.html")
    timings["column_drift"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    fairness = fairness_drift(target_model, reference, current, policy=policy, feature_spec=feature_spec,
                              model_info=model_info, aux_model=aux_model, reference_scores=reference_scores,
                              aux_source=aux_source)
    timings["fairness_drift"] = time.perf_counter() - t0
    if fairness.error:
        logger.warning("audit: %s", fairness.error)

    t0 = time.perf_counter()
    classification = classification_quality(
        target_model, reference, current, policy=policy, feature_spec=feature_spec,
        html_path=None if evidence is None else evidence / "evidently_classification.html")
    timings["classification"] = time.perf_counter() - t0
    if classification.status == "skipped":
        logger.info("audit: classification quality skipped: %s", classification.reason)

    timings.update({f"column_drift.{k}": v for k, v in drift.timings.items()})
    timings.update({f"fairness_drift.{k}": v for k, v in fairness.timings.items()})
    decision, reasons, limits = decide_audit(policy.audit, drift, fairness, classification,
                                             protected=policy.protected, n_current=len(current))
    skipped = drift.skipped
    if skipped:
        reasons.append("drift not computed for " + "; ".join(f"'{c.column}' ({c.note})" for c in skipped))
    noted = [c for c in drift.columns if c.status == "compared" and c.note]
    if noted:
        reasons.append("drift notes: " + "; ".join(f"'{c.column}': {c.note}" for c in noted))
    if fairness.sample_note:
        reasons.append(fairness.sample_note)
    if fairness.aux_source:
        reasons.append(_aux_note(fairness))
    if gate_record and fairness.reference is not None:
        recorded = finite_or_none(gate_record.get("flagged_fraction"))
        now = fairness.flagged_fraction_reference
        if recorded is not None and np.isfinite(now) and abs(recorded - now) > 1e-9:
            reasons.append(f"the gate recorded a flagged fraction of {recorded:.2%} on the reference; the audit's "
                           f"reference check gives {now:.2%} (sampled rows, or the data/policy changed since)")
    provenance = {
        "audited_at": fairness.current.provenance.get("checked_at") if fairness.current is not None else None,
        "policy_name": policy.name, "policy_sha256": policy.sha256(), "policy": policy.model_dump(mode="json"),
        "seed": policy.seed, "feature_spec": None if feature_spec is None else feature_spec.name,
        "reference": {"sha256": data_sha256(reference), "n_rows": len(reference)},
        "current": {"sha256": data_sha256(current), "n_rows": len(current)},
        "packages": {**package_versions(), **installed_versions(OPTIONAL_PACKAGES)},
        "gate_record": gate_record or {},
        **(model_info or {}),
    }
    result = AuditResult(decision=decision, reasons=reasons, limits=limits, drift=drift, fairness=fairness,
                         classification=classification, timings=timings, provenance=jsonable(provenance))
    logger.info("%r", result)
    return result


def run_audit_attributes(
    target_model,
    reference: pd.DataFrame,
    current: pd.DataFrame,
    *,
    policy: Policy,
    feature_spec: FeatureSpec | None = None,
    evidence_dir: str | Path | None = None,
    model_info: dict | None = None,
    gate_record: dict | None = None,
    aux_models: Mapping[str, Any] | None = None,
    reference_scores: Mapping[str, np.ndarray] | None = None,
    aux_sources: Mapping[str, dict] | None = None,
) -> AuditResult:
    """Audit over every protected attribute of a policy with ``[[attributes]]``: one fairness section each, one decision.

    Column drift (every declared attribute is a ``protected`` column) and classification quality
    run once; the fAux checks on both batches run per attribute
    (:meth:`Policy.attribute_policies`; an intersection on its derived column,
    :func:`faux_checks.gate.attributes.add_intersections`), each with its own auxiliary model
    (``aux_models[name]``, the gate's ``records/<key>/``; retrained when absent) and KS reference
    (``reference_scores[name]``). :func:`~.decision.decide_audit_attributes` prefixes each
    attribute's rows (``race/max_flagged_fraction_increase``) and decides once with the gate's engine.

    Returns
    -------
    AuditResult
        ``attributes`` holds one :class:`~.results.AuditAttribute` per attribute, in the policy's
        order; ``fairness`` is the deciding attribute's. Never raises for bad data: a current
        batch whose intersection cannot be derived is ``undecided`` with the reason.
    """
    from ..gate.attributes import add_intersections, intersection_cells
    from ..gate.policy import INTERSECTION_SEPARATOR

    aux_models, reference_scores, aux_sources = dict(aux_models or {}), dict(reference_scores or {}), dict(aux_sources or {})
    timings: dict[str, float] = {}
    reference, current = as_frame(reference), as_frame(current)
    evidence = Path(evidence_dir) if evidence_dir is not None else None
    declared = [a.column for a in policy.attributes]
    t0 = time.perf_counter()
    if feature_spec is None:
        exclude = declared + ([policy.label] if policy.label else [])
        try:
            feature_spec = FeatureSpec.passthrough(reference, exclude=exclude, name="passthrough (reference columns)")
        except InputError as exc:
            logger.warning("audit: no feature columns: %s", exc)
    inputs = feature_spec.source_columns if feature_spec is not None else []
    columns = {c: "feature" for c in inputs if c not in declared}
    columns.update({c: "protected" for c in declared})
    for c in reference.columns:
        if c not in columns and c != policy.label and c in current.columns:
            columns[str(c)] = "other"
    categorical = tuple(a.column for a in policy.attributes if a.kind != "continuous")
    if feature_spec is not None:
        categorical += tuple(c.name for c in feature_spec.columns if c.kind == "categorical" and c.name not in categorical)
    drift = column_drift(reference, current, columns, categorical=categorical, settings=policy.audit,
                         html_path=None if evidence is None else evidence / "evidently_drift.html")
    timings["column_drift"] = time.perf_counter() - t0

    components = {INTERSECTION_SEPARATOR.join(c): tuple(c) for c in policy.intersections}
    try:
        derived_ref, derived_cur = add_intersections(reference, policy), add_intersections(current, policy)
    except InputError as exc:
        return AuditResult.undecided(f"the audit could not derive the intersections: {exc}", provenance=model_info)
    sections = []
    for name, one in policy.attribute_policies().items():
        t0 = time.perf_counter()
        fairness = fairness_drift(target_model, derived_ref, derived_cur, policy=one, feature_spec=feature_spec,
                                  model_info=model_info, aux_model=aux_models.get(name),
                                  reference_scores=reference_scores.get(name), aux_source=aux_sources.get(name))
        timings[f"fairness_drift.{name}"] = time.perf_counter() - t0
        if fairness.error:
            logger.warning("audit: %s: %s", name, fairness.error)
        sections.append((name, components.get(name, ()), fairness))

    t0 = time.perf_counter()
    classification = classification_quality(
        target_model, reference, current, policy=policy, feature_spec=feature_spec,
        html_path=None if evidence is None else evidence / "evidently_classification.html")
    timings["classification"] = time.perf_counter() - t0
    timings.update({f"column_drift.{k}": v for k, v in drift.timings.items()})
    decision, reasons, limits, outcomes = decide_audit_attributes(policy.audit, drift, sections, classification,
                                                                  n_current=len(current))
    attributes = []
    for (name, comps, fairness), (one_decision, one_reasons) in zip(sections, outcomes):
        cells = []
        if comps:
            try:
                cells = intersection_cells(current, comps, policy)
            except InputError:
                cells = []
        attributes.append(AuditAttribute(name, comps, fairness, one_decision, one_reasons, cells))
    deciding = next((a for a in attributes if a.decision == decision), attributes[0])
    for c in drift.skipped:
        reasons.append(f"drift not computed for '{c.column}' ({c.note})")
    notes = {a.fairness.sample_note for a in attributes if a.fairness.sample_note}
    reasons += sorted(notes)
    reasons += [f"{a.attribute}: {_aux_note(a.fairness)}" for a in attributes if a.fairness.aux_source]
    gated = next((a for a in attributes if a.attribute == (gate_record or {}).get("deciding_attribute")), None)
    if gated is not None and gated.fairness.reference is not None:  # the gate's headline tags are that attribute's
        recorded = finite_or_none(gate_record.get("flagged_fraction"))
        now = gated.fairness.flagged_fraction_reference
        if recorded is not None and np.isfinite(now) and abs(recorded - now) > 1e-9:
            reasons.append(f"the gate recorded a flagged fraction of {recorded:.2%} for '{gated.attribute}' on the "
                           f"reference; the audit's reference check gives {now:.2%} (sampled rows, or the data/policy "
                           "changed since)")
    current_check = deciding.fairness.current
    provenance = {
        "audited_at": current_check.provenance.get("checked_at") if current_check is not None else None,
        "policy_name": policy.name, "policy_sha256": policy.sha256(), "policy": policy.model_dump(mode="json"),
        "seed": policy.seed, "feature_spec": None if feature_spec is None else feature_spec.name,
        "reference": {"sha256": data_sha256(reference), "n_rows": len(reference)},
        "current": {"sha256": data_sha256(current), "n_rows": len(current)},
        "packages": {**package_versions(), **installed_versions(OPTIONAL_PACKAGES)},
        "gate_record": gate_record or {}, "attributes": [a.attribute for a in attributes],
        "deciding_attribute": deciding.attribute,
        **(model_info or {}),
    }
    result = AuditResult(decision=decision, reasons=reasons, limits=limits, drift=drift, fairness=deciding.fairness,
                         classification=classification, timings=timings, provenance=jsonable(provenance),
                         attributes=tuple(attributes))
    logger.info("%r", result)
    return result
