"""The drift audit of a deployed version: :func:`run_audit` runs its stages and decides.

The stages, in order: the columns compared (:func:`audit_columns`) and their drift (Evidently); the fAux checks on
both batches, once per protected attribute of the policy (:meth:`Policy.attribute_policies`; an intersection on its
derived column, :func:`faux_checks.gate.attributes.add_intersections`), each with its own auxiliary model and KS
reference; the target model's classification quality on both batches; one decision
(:func:`~.decision.decide_audit`); the notes that inform without deciding; the provenance. With ``[[attributes]]``
the result's ``attributes`` holds one :class:`~.results.AuditAttribute` each, ``fairness`` being the deciding
attribute's; a ``protected = "..."`` policy gives a result without ``attributes``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .._validation import as_frame
from ..errors import InputError
from ..gate.policy_schema import Policy
from ..inputs.tabular import FeatureSpec
from ..kinds import protected_kind
from ..provenance import data_sha256, installed_versions, jsonable, package_versions
from .classification import classification_quality, finite_or_none
from .columns import column_drift
from .decision import decide_audit
from .fairness import fairness_drift
from .results import AuditAttribute, AuditResult

__all__ = ["audit_columns", "run_audit"]

logger = logging.getLogger(__name__)

#: Integrations whose versions an audit records next to the core packages.
OPTIONAL_PACKAGES = ("evidently", "scipy", "prefect", "mlflow", "great-expectations", "matplotlib", "jsonschema")


def audit_columns(feature_spec: FeatureSpec | None, reference: pd.DataFrame, current: pd.DataFrame, *,
                  policy: Policy) -> dict[str, str]:
    """Columns compared for drift and their roles: target inputs, every declared protected attribute, then others shared."""
    declared = [a.column for a in policy.attributes]
    inputs = feature_spec.source_columns if feature_spec is not None else []
    columns = {c: "feature" for c in inputs if c not in declared}
    columns.update({c: "protected" for c in declared})
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
    reference_scores=None,
    aux_source: dict | None = None,
) -> AuditResult:
    """Audit a deployed model on a current batch against its reference data (the stages: module docstring).

    Parameters
    ----------
    target_model : torch module
        The deployed version's model.
    reference, current : DataFrame
        The data the version was gated on, and the current batch. Not modified.
    policy : Policy
        The gate policy; its ``[audit]`` section sets the limits. Every protected attribute it declares is audited.
    feature_spec : FeatureSpec, optional
        The version's encoding; without it the reference's numeric columns (minus protected and
        label) are passed to the model as they are, for both batches.
    evidence_dir : path, optional
        Existing folder for Evidently's HTML reports (``evidently_drift.html``, ``evidently_classification.html``).
    model_info : dict, optional
        Added to the provenance (name, version, sha256).
    gate_record : dict, optional
        What the gate recorded (``flagged_fraction``, ``data_sha256``): compared with the
        reference check and noted when they differ.
    aux_model, reference_scores, aux_source : mapping from attribute name (``sex``, ``sex×race``), optional
        The gate's auxiliary model (both batches are scored with it; an attribute not named trains its own on
        each batch), its recorded defined scores of shape (m,) (the KS test's reference) and where it came from
        (``source``, ``note``, ``run_id``, reported as given). A name the policy does not check: InputError.

    Returns
    -------
    AuditResult
        Never raises for bad data: what could not be computed makes the audit ``undecided``
        with the reason (the column, the row counts).
    """
    from ..gate.attributes import add_intersections

    timings: dict[str, float] = {}
    reference, current = as_frame(reference), as_frame(current)
    evidence = Path(evidence_dir) if evidence_dir is not None else None
    feature_spec, drift = _column_drift_step(reference, current, policy=policy, feature_spec=feature_spec,
                                             evidence=evidence, timings=timings)
    try:
        derived_ref, derived_cur = add_intersections(reference, policy), add_intersections(current, policy)
    except InputError as exc:
        return AuditResult.undecided(f"the audit could not derive the intersections: {exc}", provenance=model_info)
    given = {"aux_model": aux_model, "reference_scores": reference_scores, "aux_source": aux_source}
    sections = _fairness_sections(target_model, derived_ref, derived_cur, policy=policy, feature_spec=feature_spec,
                                  model_info=model_info, given=_per_attribute(policy, given), timings=timings)
    classification = _classification_step(target_model, reference, current, policy=policy,
                                          feature_spec=feature_spec, evidence=evidence, timings=timings)
    timings.update({f"column_drift.{k}": v for k, v in drift.timings.items()})
    decision, reasons, limits, outcomes = decide_audit(policy.audit, drift, sections, classification,
                                                       n_current=len(current))
    attributes = _audit_attributes(sections, outcomes, current, policy)
    deciding = next((a for a in attributes if a.decision == decision), attributes[0])
    reasons += _audit_notes(drift, attributes, several=len(policy.attribute_names) > 1, gate_record=gate_record)
    provenance = _audit_provenance(policy, feature_spec, reference, current, attributes, deciding,
                                   gate_record=gate_record, model_info=model_info)
    result = AuditResult(decision=decision, reasons=reasons, limits=limits, drift=drift, fairness=deciding.fairness,
                         classification=classification, timings=timings, provenance=jsonable(provenance),
                         attributes=tuple(attributes))
    logger.info("%r", result)
    return result


def _per_attribute(policy: Policy, given: dict) -> dict[str, dict]:
    """Each gate input (``aux_model``, ``reference_scores``, ``aux_source``) as a mapping from attribute name.

    Raises
    ------
    InputError
        A mapping names an attribute the policy does not check (each such name, and the policy's).
    """
    names = policy.attribute_names
    unknown = sorted({str(n) for value in given.values() for n in (value or {}) if n not in names})
    if unknown:
        raise InputError(f"aux_model, reference_scores and aux_source map protected attribute names to the gate's "
                         f"inputs; {unknown} {'is' if len(unknown) == 1 else 'are'} not checked by the policy "
                         f"(it checks {names}): key them by these names")
    return {key: dict(value or {}) for key, value in given.items()}


def _classification_step(target_model, reference: pd.DataFrame, current: pd.DataFrame, *, policy: Policy,
                         feature_spec: FeatureSpec | None, evidence: Path | None, timings: dict[str, float]):
    """The target model's classification quality on both batches (Evidently), timed into ``timings``."""
    t0 = time.perf_counter()
    classification = classification_quality(
        target_model, reference, current, policy=policy, feature_spec=feature_spec,
        html_path=None if evidence is None else evidence / "evidently_classification.html")
    timings["classification"] = time.perf_counter() - t0
    if classification.status == "skipped":
        logger.info("audit: classification quality skipped: %s", classification.reason)
    return classification


def _column_drift_step(reference: pd.DataFrame, current: pd.DataFrame, *, policy: Policy,
                       feature_spec: FeatureSpec | None, evidence: Path | None, timings: dict[str, float]):
    """The encoding the audit uses and the drift of every compared column (Evidently), timed into ``timings``."""
    t0 = time.perf_counter()
    feature_spec = _default_feature_spec(feature_spec, reference, policy)
    drift = column_drift(reference, current, audit_columns(feature_spec, reference, current, policy=policy),
                         categorical=_categorical_columns(policy, feature_spec), settings=policy.audit,
                         html_path=None if evidence is None else evidence / "evidently_drift.html")
    timings["column_drift"] = time.perf_counter() - t0
    return feature_spec, drift


def _default_feature_spec(feature_spec: FeatureSpec | None, reference: pd.DataFrame,
                          policy: Policy) -> FeatureSpec | None:
    """The version's encoding, or the reference's numeric columns less the protected and label ones (None when none)."""
    if feature_spec is not None:
        return feature_spec
    exclude = [a.column for a in policy.attributes] + ([policy.label] if policy.label else [])
    try:
        return FeatureSpec.passthrough(reference, exclude=exclude, name="passthrough (reference columns)")
    except InputError as exc:  # the fAux step reports it; drift still runs
        logger.warning("audit: no feature columns: %s", exc)
        return None


def _categorical_columns(policy: Policy, feature_spec: FeatureSpec | None) -> tuple[str, ...]:
    """Columns Evidently compares as categories: grouped protected attributes and the spec's one-hot columns."""
    # an attribute of undeclared kind (None, detected from the data later) is read as grouped
    categorical = tuple(a.column for a in policy.attributes if a.kind is None or protected_kind(a.kind).grouped)
    if feature_spec is not None:
        categorical += tuple(c.name for c in feature_spec.columns if c.kind == "categorical" and c.name not in categorical)
    return categorical


def _fairness_sections(target_model, derived_ref: pd.DataFrame, derived_cur: pd.DataFrame, *, policy: Policy,
                       feature_spec: FeatureSpec | None, model_info: dict | None, given: dict[str, dict],
                       timings: dict[str, float]) -> list[tuple]:
    """The fAux checks on both batches, one ``(attribute, components, FairnessDrift)`` per protected attribute.

    ``given`` maps ``aux_model``, ``reference_scores`` and ``aux_source`` to per-attribute mappings; ``timings`` gains each attribute's total and its steps (``fairness_drift[.<attribute>][.<step>]``).
    """
    from ..gate.policy_schema import INTERSECTION_SEPARATOR

    components = {INTERSECTION_SEPARATOR.join(c): tuple(c) for c in policy.intersections}
    sections = []
    for name, one in policy.attribute_policies().items():
        t0 = time.perf_counter()
        fairness = fairness_drift(target_model, derived_ref, derived_cur, policy=one, feature_spec=feature_spec,
                                  model_info=model_info, aux_model=given["aux_model"].get(name),
                                  reference_scores=given["reference_scores"].get(name),
                                  aux_source=given["aux_source"].get(name))
        key = f"fairness_drift.{name}"
        timings[key] = time.perf_counter() - t0
        timings.update({f"{key}.{k}": v for k, v in fairness.timings.items()})
        if fairness.error:
            logger.warning("audit: %s: %s", name, fairness.error)
        sections.append((name, components.get(name, ()), fairness))
    return sections


def _audit_attributes(sections: list[tuple], outcomes: list[tuple], current: pd.DataFrame,
                      policy: Policy) -> list[AuditAttribute]:
    """One :class:`AuditAttribute` per section with its own decision, an intersection's cells counted on ``current``."""
    from ..gate.attributes import intersection_cells

    attributes = []
    for (name, comps, fairness), (one_decision, one_reasons) in zip(sections, outcomes, strict=True):
        cells = []
        if comps:
            try:
                cells = intersection_cells(current, comps, policy)
            except InputError:
                cells = []
        attributes.append(AuditAttribute(name, comps, fairness, one_decision, one_reasons, cells))
    return attributes


def _audit_notes(drift, attributes: list[AuditAttribute], *, several: bool, gate_record: dict | None) -> list[str]:
    """Reasons that inform without deciding: skipped or noted drift columns, sampling, the auxiliary model's source,
    and a reference flagged fraction that differs from the gate's record."""
    notes = []
    if drift.skipped:
        notes.append("drift not computed for " + "; ".join(f"'{c.column}' ({c.note})" for c in drift.skipped))
    noted = [c for c in drift.columns if c.status == "compared" and c.note]
    if noted:
        notes.append("drift notes: " + "; ".join(f"'{c.column}': {c.note}" for c in noted))
    notes += sorted({a.fairness.sample_note for a in attributes if a.fairness.sample_note})
    notes += [f"{a.attribute + ': ' if several else ''}{_aux_note(a.fairness)}" for a in attributes
              if a.fairness.aux_source]
    gated = (attributes[0] if not several else   # the gate's headline tags are the deciding attribute's
             next((a for a in attributes if a.attribute == (gate_record or {}).get("deciding_attribute")), None))
    if gate_record and gated is not None and gated.fairness.reference is not None:
        recorded = finite_or_none(gate_record.get("flagged_fraction"))
        now = gated.fairness.flagged_fraction_reference
        if recorded is not None and np.isfinite(now) and abs(recorded - now) > 1e-9:
            whose = f" for '{gated.attribute}'" if several else ""
            notes.append(f"the gate recorded a flagged fraction of {recorded:.2%}{whose} on the reference; the audit's "
                         f"reference check gives {now:.2%} (sampled rows, or the data/policy changed since)")
    return notes


def _audit_provenance(policy: Policy, feature_spec: FeatureSpec | None, reference: pd.DataFrame,
                      current: pd.DataFrame, attributes: list[AuditAttribute], deciding: AuditAttribute, *,
                      gate_record: dict | None, model_info: dict | None) -> dict:
    """What the audit ran on: policy, seed, encoding, both batches' hashes and sizes, packages, the gate's record."""
    current_check = deciding.fairness.current
    return {
        "audited_at": current_check.provenance.get("checked_at") if current_check is not None else None,
        "policy_name": policy.name, "policy_sha256": policy.sha256(), "policy": policy.model_dump(mode="json"),
        "seed": policy.seed, "feature_spec": None if feature_spec is None else feature_spec.name,
        "reference": {"sha256": data_sha256(reference), "n_rows": len(reference)},
        "current": {"sha256": data_sha256(current), "n_rows": len(current)},
        "packages": {**package_versions(), **installed_versions(OPTIONAL_PACKAGES)},
        "gate_record": gate_record or {},
        "attributes": [a.attribute for a in attributes], "deciding_attribute": deciding.attribute,
        **(model_info or {}),
    }
