"""The Prefect tasks of the gate flow: each one step of gating a version, with its retry rule.

Find the new versions, fetch one (marked running; model and feature spec downloaded), load the audit
data, validate the GX suite on it, record the decision (reports, MLflow run, registry tags), demote
or promote the alias. Registry and data I/O retry (``IO_TASK``); the validation never does
(``TASK``: an :class:`~faux_checks.errors.InputError` or a policy decision is not transient;
:mod:`faux_checks_flows.common`). Split out of :mod:`faux_checks_flows.gate`; the task names are the functions'.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from prefect import task

from .common import IO_TASK, TASK
from .gate_record import (
    RECORDS,
    undecided_cause,
    write_evidence,
    regression_fields,
    record_uris,
    whole_policy,
    given_policy,
    attribute_metrics,
    attribute_tags,
    write_records,
    group_metrics,
    policy_tags,
    aux_key_tag,
)

__all__ = ["find_new_versions", "fetch_version", "load_audit_data", "validate", "record", "demote", "promote"]


@task(**IO_TASK)
def find_new_versions(model_name: str, tracking_uri: str | None) -> list[str]:
    """Versions of ``model_name`` with no finished gate decision."""
    from faux_checks.registry import Registry

    return Registry(tracking_uri).new_versions(model_name)


@task(**IO_TASK)
def fetch_version(model_name: str, version: str, tracking_uri: str | None, workdir: str) -> tuple[str, str | None]:
    """Mark the version running and download its model and feature spec."""
    from faux_checks.registry import Registry

    registry = Registry(tracking_uri)
    registry.mark_running(model_name, version)
    dst = Path(workdir) / f"v{version}-{uuid.uuid4().hex[:8]}"  # fresh per attempt: retries never meet a half download
    model_path, spec_path = registry.download(model_name, version, dst)
    return str(model_path), (str(spec_path) if spec_path else None)


@task(**IO_TASK)
def load_audit_data(data_path: str, sep: str | None = None, thousands: str | None = None,
                    decimal: str | None = None, policy_path: str | None = None):
    """Read the audit data (CSV/Parquet; the CSV delimiter ``sep`` or sniffed; the numbers' thousands mark
    ``thousands``, CLI ``--thousands``, and decimal mark ``decimal``, CLI ``--decimal``, else sniffed); the file is
    never modified. A policy with ``[protected_file]`` has c joined by its key
    (:func:`faux_checks.gate.unmatched.gate_rows`: unmatched rows refused)."""
    from faux_checks.inputs.io import read_table

    frame = read_table(data_path, sep=sep, thousands=thousands, decimal=decimal)
    from faux_checks.gate.policy import load_policy

    policy = load_policy(policy_path) if policy_path is not None else None
    if policy is None or policy.protected_file is None:
        return frame
    from faux_checks.gate.unmatched import gate_rows

    return gate_rows(frame, policy, audit_name=f"the audit data {data_path}")


@task(**TASK)
def validate(frame, policy_path: str | None, model_path: str, spec_path: str | None, aux_model_path: str | None,
             records_dir: str | None = None, trusted_types: list[str] | None = None):
    """Build the suite from the policy and validate it; any exception becomes 'undecided'.

    Several protected attributes: the intersections' columns are added to (a copy of) the frame,
    and a version without a feature spec gets one passthrough spec that leaves out every protected
    column, so that each attribute's check feeds the model the same inputs.

    ``records_dir`` receives the check's per-row scores, per-group metrics and auxiliary model
    (:mod:`faux_checks.report.records`; one sub-folder per attribute when there are several),
    logged with the gate run. ``trusted_types``: skops types the operator reviewed (CLI ``--trust-type``),
    trusted when the version's ``.skops`` model is loaded (:func:`faux_checks_gx.trusting`).
    """
    from dataclasses import replace

    from faux_checks_gx import build_suite, trusting, validate_frame
    from faux_checks.gate.policy import load_policy

    from faux_checks.gate.attributes import add_intersections, attribute_sections, shared_feature_spec

    policy = load_policy(policy_path)           # protected = "..." reads as attributes = (that one,)
    if spec_path is None:
        shared = shared_feature_spec(frame, policy, None)    # several: leaves out every protected column
        if shared is not None:
            spec_path = str(shared.save(Path(model_path).parent / f"passthrough-spec-{uuid.uuid4().hex[:8]}.json"))
    suite = build_suite(policy, model_path=model_path, feature_spec_path=spec_path, aux_model_path=aux_model_path)
    with _recording(records_dir, several=len(policy.attribute_names) > 1), trusting(trusted_types):
        outcome = validate_frame(add_intersections(frame, policy), suite)
    whole = {**policy.model_dump(mode="json"), "sha256": policy.sha256()}
    if outcome.attributes:                      # the library's sections, as the suite recorded them
        return replace(outcome, policy=whole)
    sections, _ = attribute_sections(policy, frame, {policy.attribute_names[0]: outcome.check} if outcome.check else {})
    return replace(outcome, attributes=sections, policy=whole)


def _recording(records_dir: str | None, *, several: bool):
    """:func:`faux_checks.report.records.recording` into ``records_dir`` (per attribute when several); a no-op without one."""
    import contextlib

    if records_dir is None:
        return contextlib.nullcontext()
    from faux_checks.gate.sections import attribute_key
    from faux_checks.report.records import recording

    def per_attribute(result) -> str:
        return attribute_key(((result.provenance or {}).get("policy") or {}).get("protected") or "_")

    return recording(records_dir, subfolder=per_attribute if several else None)




@task(**IO_TASK)
def record(model_name: str, version: str, tracking_uri: str | None, outcome, report_dir: str, model_info: dict,
           data_path: str | None = None, data: dict | None = None, policy_path: str | None = None,
           sources: dict | None = None, signing_key: str | None = None) -> str:
    """Write the reports, check them, log the MLflow audit run and tag the version with the decision.

    Records are whole or absent: every file is written under a temporary name, synced,
    read back and renamed (:mod:`faux_checks._files`); a retry rewrites them all, never trusting
    what an interrupted attempt left; the whole folder is read back (:func:`~faux_checks._files.check_records`)
    before the run is logged, and the upload is compared with it before any tag is written. So the
    version's decision tag (and, after this task, the alias) points only at records that read whole;
    a disk that stays full fails this task and the version stays new (``_not_completed``).

    ``data_path`` is recorded (tag ``fairness_data_path``) as the reference of later drift audits.

    The evidence pack (``evidence.json``, :mod:`faux_checks.report.evidence`) is written last, over the
    report, the records and the inputs (``sources``: model, spec, data), and uploaded with them; signed
    with ``signing_key`` (an Ed25519 PEM) when one is given.
    """
    from faux_checks._files import check_records, remove_temporaries
    from faux_checks.registry import PENDING, Registry
    from faux_checks.registry.records import GateProvenance
    from faux_checks.report.build import report_history, write_report

    check = outcome.check or {}
    registry = Registry(tracking_uri)
    records = write_records(Path(report_dir) / RECORDS, outcome, policy_path)
    write_report(report_dir, decision=outcome.decision, reasons=outcome.reasons, check=outcome.check,
                 model=model_info, expectations=outcome.expectations, data=[data] if data else None,
                 history=report_history(registry, model_name), rules=outcome.rules,
                 attributes=getattr(outcome, "attributes", None) or None, replace=True,
                 regression=getattr(outcome, "regression", None) or None,
                 **(whole_policy(outcome) or given_policy(check, policy_path)))
    remove_temporaries(report_dir)     # a killed attempt's temporary files are never uploaded
    check_records(report_dir)
    evidence = write_evidence(report_dir, sources or {}, signing_key, model_name, version, tracking_uri)
    interval = check.get("interval") or {}
    metrics = {k: check[k] for k in ("flagged_fraction", "aux_quality", "n_individuals", "n_undefined")
               if isinstance(check.get(k), (int, float))}
    metrics.update({f"flagged_fraction_{k}": interval[k] for k in ("lower", "upper")
                    if isinstance(interval.get(k), (int, float))})
    attributes = getattr(outcome, "attributes", None) or []
    metrics.update(attribute_metrics(attributes))
    metrics.update(group_metrics(check, attributes))
    run_id = registry.log_gate_run(
        model_name, version, report_dir=report_dir, metrics=metrics,
        params={"delta": check.get("delta"), "max_flagged_fraction": check.get("max_flagged_fraction"),
                "variant": (check.get("provenance") or {}).get("variant")},
        tags={"decision": outcome.decision, "delta": check.get("delta"),   # the report's history reads them back
              "policy_sha256": policy_tags(check, policy_path, outcome)[0],
              **aux_key_tag(check, records, attributes)},
    )
    sha256, policy_name = policy_tags(check, policy_path, outcome)
    provenance = GateProvenance(
        promotion=PENDING if outcome.decision == "passed" else "none",  # promote() sets 'done'
        policy_sha256=sha256, policy_name=policy_name, report_uri=f"runs:/{run_id}/report.html",
        record_uris=record_uris(run_id, records), **regression_fields(getattr(outcome, "regression", None) or []),
        evidence_uri=f"runs:/{run_id}/{evidence.name}", evidence_signed=bool(signing_key),
        data_uri=Path(data_path).resolve().as_uri() if data_path else None,
        data_path=str(Path(data_path).resolve()) if data_path else None,
        data_sha256=(data or {}).get("sha256") or (check.get("provenance") or {}).get("data_sha256"),
        undecided_cause=undecided_cause(outcome))
    registry.record_decision(
        model_name, version, decision=outcome.decision, flagged_fraction=check.get("flagged_fraction"),
        delta=check.get("delta"), aux_quality=check.get("aux_quality"),
        report_uri=str(Path(report_dir) / "report.html"), run_id=run_id, interval=check.get("interval"),
        extra={**provenance.to_tags(), **attribute_tags(attributes, check)},
    )
    return run_id


@task(**IO_TASK)
def demote(model_name: str, version: str, tracking_uri: str | None, alias: str) -> bool:
    """Remove ``alias`` from a re-gated version that no longer passes; True when it was removed."""
    from faux_checks.registry import Registry

    return Registry(tracking_uri).demote(model_name, version, alias=alias)


@task(**IO_TASK)
def promote(model_name: str, version: str, tracking_uri: str | None, alias: str, allow_rollback: bool = False) -> str:
    """Move ``alias`` to the version (the registry re-checks that its decision is 'passed'); never to an older
    version than a passed one holding it, unless ``allow_rollback``. Returns the version the alias is on."""
    from faux_checks.registry import Registry

    return Registry(tracking_uri).promote(model_name, version, alias=alias, allow_rollback=allow_rollback)
