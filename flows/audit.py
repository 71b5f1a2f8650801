"""Prefect 3 flow: the scheduled drift audit of the deployed model version.

Recipe: find the version holding the deployment alias and the data it was gated on (its
``fairness_data_path`` tag, or ``reference_path``) → download its model and feature spec, and
the gate run's records (its auxiliary model and scores, reused unless ``retrain_aux``) →
read both batches → :func:`faux_checks.audit.drift.run_audit` (column drift, fairness drift,
classification quality; Evidently's HTML kept as evidence) → write report.json/html → log an
MLflow run in ``faux-checks-audit`` and tag the version ``fairness_audit`` =
``passed``/``failed``/``undecided`` with ``fairness_audit_reason`` → Prefect markdown and
table artifacts. The flow ends Failed unless the audit passed (docs/architecture.md, contracts).

Policy: ``policy_path`` when given; otherwise the policy the gate recorded in its report for
that version; otherwise the shipped default. Parameters are paths and names; tasks use no
result cache, and retries only cover registry/data I/O.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
import time
from pathlib import Path

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.states import Completed

from faux_checks.errors import FauxChecksError, InputError
from faux_checks.report.artifacts import markdown_text

from .common import IO_TASK, TASK, failed_state, run_logger, slug

__all__ = ["AUDIT_PROGRESS", "audit", "data_written_at", "linked_batches"]

#: The audit run of this process, for a caller whose command stops early (``faux_checks_app.standing``):
#: ``model_name``, ``version`` (once found), ``stage`` (``running``, ``recording``, ``recorded``, ``superseded``)
#: and ``decision``.
AUDIT_PROGRESS: dict = {}


def data_written_at(path: str) -> str | None:
    """When the batch at ``path`` was last written: its modification time, UTC ISO 8601 to the microsecond (a folder
    of Parquet files: its newest file); None when it cannot be read. The order of audits (:mod:`faux_checks.registry.
    audit_order`): an audit of a batch written earlier never replaces the recorded audit of a later one."""
    try:
        stamp = os.stat(path).st_mtime
        if os.path.isdir(path):
            stamp = max([stamp] + [os.stat(os.path.join(root, f)).st_mtime for root, _, files in os.walk(path)
                                   for f in files])
    except OSError:
        return None
    return _dt.datetime.fromtimestamp(stamp, _dt.timezone.utc).isoformat(timespec="microseconds")


@task(**IO_TASK)
def find_deployed(model_name: str, alias: str, tracking_uri: str | None, reference_path: str | None) -> dict:
    """The version holding ``alias``, its reference data and what the gate recorded on it."""
    from faux_checks.registry import Registry
    from faux_checks.registry.records import DATA_PATH_TAG, GateProvenance, GateRecord, VersionRecord

    registry = Registry(tracking_uri)
    version = registry.alias_version(model_name, alias)
    if version is None:
        raise InputError(f"no version of '{model_name}' holds the alias '{alias}' in {registry.tracking_uri}; "
                         "nothing is deployed, so there is nothing to audit (run the gate first)")
    row = next(r for r in registry.history(model_name) if r["version"] == version)
    gate = VersionRecord.from_tags(row).gate or GateRecord(decision=None)
    provenance = gate.provenance or GateProvenance()
    reference = reference_path or provenance.data_path
    if not reference:
        raise InputError(f"version {version} of '{model_name}' has no recorded reference data (tag "
                         f"'{DATA_PATH_TAG}': it was gated before audits existed); pass --reference")
    policy_json = None
    report = gate.report
    if report:
        try:
            gate_report = json.loads(Path(report).with_name("report.json").read_text())
            policy_json = json.dumps(gate_report.get("policy") or ((gate_report.get("check") or {}).get(
                "provenance") or {}).get("policy")) if gate_report else None
        except (OSError, json.JSONDecodeError):
            policy_json = None
    return {"version": version, "reference_path": reference, "policy_json": policy_json if policy_json != "null" else None,
            "gate_record": {"decision": gate.decision, "flagged_fraction": gate.flagged_fraction,
                            "data_path": provenance.data_path, "data_sha256": provenance.data_sha256,
                            "run_id": gate.run_id, "checked_at": gate.checked_at,
                            **({"deciding_attribute": gate.deciding_attribute} if gate.deciding_attribute else {})},
            "sha256": row.get("model_sha256")}


@task(**IO_TASK)
def fetch_version(model_name: str, version: str, tracking_uri: str | None, workdir: str) -> tuple[str, str | None]:
    """Download the version's model and feature spec (its gate tags are left alone)."""
    from faux_checks.registry import Registry

    model_path, spec_path = Registry(tracking_uri).download(model_name, version, Path(workdir) / f"v{version}")
    return str(model_path), (str(spec_path) if spec_path else None)


@task(**IO_TASK)
def fetch_gate_records(run_id: str | None, tracking_uri: str | None, workdir: str) -> tuple[str | None, str]:
    """Download the gate run's ``records/`` (aux model, scores): ``(folder, note)``; folder None with the reason."""
    from faux_checks.registry import Registry

    if not run_id:
        return None, "the version's gate recorded no run"
    try:
        folder = Registry(tracking_uri).download_run_artifacts(run_id, "records", Path(workdir) / "gate-records")
    except Exception as exc:  # noqa: BLE001 - a gate from before records existed, or the store is unreachable: retrain, say why
        return None, f"{type(exc).__name__}: {exc}"
    return str(folder), ""


@task(**IO_TASK)
def load_table(path: str, sep: str | None = None, thousands: str | None = None, decimal: str | None = None):
    """Read a batch (CSV/Parquet; the CSV delimiter ``sep`` or sniffed; the numbers' thousands mark
    ``thousands``, CLI ``--thousands``, and decimal mark ``decimal``, CLI ``--decimal``, else sniffed); the file is
    never modified."""
    from faux_checks.inputs.io import read_table

    return read_table(path, sep=sep, thousands=thousands, decimal=decimal)


@task(**TASK)
def audit_batch(model_path: str, spec_path: str | None, reference, current, policy_path: str | None,
                policy_json: str | None, evidence_dir: str, model_info: dict, gate_record: dict,
                records: tuple[str | None, str] | None = None, positive_label: str | None = None):
    """Column drift, fairness drift and classification quality of the current batch (one library call).

    ``records``: the gate run's downloaded records (:func:`fetch_gate_records`); their auxiliary
    model and scores are reused when they fit the policy, else the audit retrains (and says why).
    ``positive_label`` (CLI ``--positive-label``) replaces the policy's key of that name.
    """
    from faux_checks.audit.drift import run_audit
    from faux_checks.inputs.models import load_model
    from faux_checks.gate.policy import load_policy, recorded_policy
    from faux_checks.inputs.tabular import FeatureSpec

    policy = load_policy(policy_path) if policy_path or not policy_json else recorded_policy(policy_json)
    if positive_label is not None:
        policy = policy.with_overrides(positive_label=positive_label)
    source = policy_path or ("the policy recorded by the gate" if policy_json else "the shipped default policy")
    run_logger().info("audit policy: %s (sha256 %s…)", source, policy.sha256()[:12])
    Path(evidence_dir).mkdir(parents=True, exist_ok=True)
    reference, current = linked_batches(policy, reference, current)
    # one auxiliary model per attribute: the gate's records/ (one attribute) or records/<attribute_key>/ (several)
    per = {name: _gate_aux(records, one, gate_record.get("run_id")) for name, one in policy.attribute_policies().items()}
    for name, (_, _, src) in per.items():
        run_logger().info("audit auxiliary model of %s: %s", name, src)
    aux = {name: a for name, (a, _, _) in per.items() if a is not None}
    scores = {name: s for name, (_, s, _) in per.items() if s is not None}
    aux_source = {name: src for name, (_, _, src) in per.items()}
    return run_audit(load_model(model_path), reference, current, policy=policy,
                     feature_spec=FeatureSpec.load(spec_path) if spec_path else None, evidence_dir=evidence_dir,
                     model_info=model_info, gate_record=gate_record, aux_model=aux, reference_scores=scores,
                     aux_source=aux_source)


def linked_batches(policy, reference, current):
    """Both batches with c joined from the policy's ``[protected_file]`` by its key, as the gate joins its audit data
    (:func:`faux_checks.gate.unmatched.gate_rows`: unmatched rows refused, c never a model input); the batches
    themselves without one.

    Raises
    ------
    ConfigurationError
        Every join error, with the count of unmatched rows and their first keys
        (:func:`faux_checks.gate.unmatched.gate_rows`).
    """
    from faux_checks.gate.unmatched import gate_rows

    return (gate_rows(reference, policy, audit_name="the reference data"),
            gate_rows(current, policy, audit_name="the current batch"))


def _gate_aux(records: tuple[str | None, str] | None, policy, run_id: str | None):
    """``(aux module, reference scores, aux_source)`` from the gate's records, or ``(None, None, retrained + why)``."""
    from faux_checks.report.records import RECORD_FILES, read_aux_record, reference_scores

    if records is None:
        return None, None, {"source": "retrained", "note": "asked for (--retrain-aux)"}
    folder, why = records
    if folder is None:
        return None, None, {"source": "retrained", "note": f"the gate's auxiliary model is not available: {why}"}
    artifact = f"runs:/{run_id}/records/{RECORD_FILES['aux_model']}"
    if not (Path(folder) / RECORD_FILES["aux_model"]).is_file():  # a several-attribute gate: records/<attribute>/
        from faux_checks.gate.sections import attribute_key

        key = attribute_key(policy.protected or "")
        folder = str(Path(folder) / key)
        artifact = f"runs:/{run_id}/records/{key}/{RECORD_FILES['aux_model']}"
    try:
        aux, info = read_aux_record(folder, policy=policy)
        scores_path = Path(folder) / RECORD_FILES["scores"]
        scores = reference_scores(scores_path) if scores_path.is_file() else None
    except FauxChecksError as exc:
        return None, None, {"source": "retrained", "note": f"the gate's auxiliary model does not fit: {exc}"}
    return aux, scores, {"source": "gate", "run_id": run_id, "artifact": artifact,
                         "kind": info.get("kind"), "gate_quality": info.get("quality"),
                         "gate_quality_metric": info.get("quality_metric"),
                         "swap_reference": "gate" if info.get("swap_reference_reused") else "refitted on each batch"}


@task(**TASK)
def write_audit_report(result, report_dir: str, model_info: dict, data: list[dict], tracking_uri: str | None) -> dict:
    """report.json (schema-validated) and report.html, next to Evidently's HTML."""
    from faux_checks.registry import Registry
    from faux_checks.report.build import report_history, write_report
    from faux_checks.report.schema import load_report

    current = result.fairness.current
    artifacts = {p.stem.replace("_", " "): p.name for p in sorted(Path(report_dir).glob("evidently_*.html"))}
    history = report_history(Registry(tracking_uri), model_info["name"])
    audit = result.to_dict()
    attributes = audit.pop("attributes", None)  # one section per attribute: the report's own `attributes`
    paths = write_report(report_dir, kind="audit", decision=result.decision, reasons=result.reasons,
                         check=None if current is None else current.to_dict(), audit=audit, model=model_info,
                         history=history, data=data, artifacts=artifacts, attributes=attributes)
    return load_report(paths["json"])


@task(**IO_TASK)
def record_audit(model_name: str, version: str, tracking_uri: str | None, report: dict, report_dir: str,
                 data_path: str, evidence_files: dict | None = None, signing_key: str | None = None,
                 data_at: str | None = None, started_at: str | None = None) -> tuple[str, str | None]:
    """Log the audit run (metrics + report folder) and tag the version with the audit's decision, once every file
    of the folder reads whole (:func:`faux_checks._files.check_records`; the upload is compared with it too).

    Returns ``(run_id, None)``, or ``(run_id, what stands)`` when the version holds an audit of newer data
    (``data_at``: the batch's modification time, ``started_at``: this audit's start; UTC ISO 8601), whose tags
    are left as they are (:meth:`~faux_checks.registry.Registry.record_audit`).

    The folder's evidence pack (``evidence.json``: the report, Evidently's pages, ``evidence_files`` such as the
    reference and current batches; signed with ``signing_key``) is written first and uploaded with it."""
    from faux_checks._files import check_records, remove_temporaries
    from faux_checks.registry import Registry
    from faux_checks.registry.records import AuditAttributeRecord, AuditRecord
    from faux_checks.report.evidence import build_evidence, write_evidence_pack

    remove_temporaries(report_dir)
    folder = Path(report_dir)
    files = {role: str(p) for role, p in (evidence_files or {}).items() if p and Path(p).is_file()}
    files.update({p.name: str(p) for p in sorted(folder.iterdir()) if p.is_file() and p.name != "evidence.json"})
    write_evidence_pack(folder, build_evidence(report=report, files=files, pack_dir=folder,
                                               extra={"model_name": model_name, "version": str(version),
                                                      "kind": "audit"}),
                        signing_key=signing_key, replace=True)
    check_records(report_dir)

    audit = report["audit"]
    fairness, drift = audit["fairness"], audit["drift"]
    cls = (audit.get("classification") or {}).get("metrics") or {}
    metrics = {
        "flagged_fraction_reference": fairness.get("flagged_fraction_reference"),
        "flagged_fraction_current": fairness.get("flagged_fraction_current"),
        "flagged_fraction_increase": fairness.get("increase"),
        "ks_statistic": fairness.get("ks_statistic"), "ks_pvalue": fairness.get("ks_pvalue"),
        "drifted_share": drift.get("drifted_share"), "n_drifted": drift.get("n_drifted"),
        "n_skipped_columns": len(drift.get("skipped") or []),
        "n_reference_rows": drift.get("n_reference"), "n_current_rows": drift.get("n_current"),
        "roc_auc_current": (cls.get("roc_auc") or {}).get("current"),
        **{f"seconds_{k}": v for k, v in (audit.get("timings") or {}).items()},
    }
    sections = report.get("attributes") or []
    by_attribute = []
    for a in sections:  # per attribute metrics and tags, in the gate's style (fairness_audit_attr_<key>_...)
        drift_of = a.get("audit") or {}
        values = {"flagged_fraction_reference": drift_of.get("flagged_fraction_reference"),
                  "flagged_fraction_current": drift_of.get("flagged_fraction_current"),
                  "flagged_fraction_increase": drift_of.get("increase"), "ks_pvalue": drift_of.get("ks_pvalue")}
        metrics.update({f"attributes/{a['key']}/{k}": v for k, v in values.items()})
        by_attribute.append(AuditAttributeRecord(key=a["key"], decision=a["decision"],
                                                 flagged_fraction=values["flagged_fraction_current"],
                                                 increase=values["flagged_fraction_increase"],
                                                 aux_model=(drift_of.get("aux_model") or {}).get("source")))
    registry = Registry(tracking_uri)
    run_id = registry.log_audit_run(
        model_name, version, report_dir=report_dir, metrics=metrics,
        params={"data_path": str(Path(data_path).resolve()), "policy_sha256": report.get("policy_sha256")},
        tags={"decision": report["decision"], "reason": report["rule"][:1000]})
    standing = registry.record_audit(
                          model_name, version, decision=report["decision"], reason=report["rule"],
                          report_uri=str(Path(report_dir) / "report.html"), run_id=run_id, data_at=data_at,
                          started_at=started_at,
                          extra=AuditRecord(decision=report["decision"],
                                            flagged_fraction=fairness.get("flagged_fraction_current"),
                                            drifted_share=drift.get("drifted_share"),
                                            data_path=str(Path(data_path).resolve()),
                                            data_uri=Path(data_path).resolve().as_uri(),
                                            report_uri=f"runs:/{run_id}/report.html",
                                            attributes=tuple(a["attribute"] for a in sections),
                                            by_attribute=tuple(by_attribute)).measurement_tags())
    if standing is None:
        return run_id, None
    note = (f"v{version} holds an audit of newer data ({standing.decision}; data written {standing.data_at or '?'}, "
            f"started {standing.started_at or '?'}, run {standing.run_id or '?'}): it stands; this audit of data written "
            f"{data_at or '?'} is kept in run {run_id} only")
    run_logger().warning("%s %s", model_name, note)
    return run_id, note


@flow(name="fairness-audit", log_prints=True)
def audit(model_name: str, data_path: str, reference_path: str | None = None, policy_path: str | None = None,
          tracking_uri: str | None = None, alias: str = "deployable", report_root: str | None = None,
          retrain_aux: bool = False, signing_key: str | None = None, sep: str | None = None,
          positive_label: str | None = None, thousands: str | None = None, decimal: str | None = None):
    """Audit the deployed version of ``model_name`` on the current batch at ``data_path``.

    Parameters
    ----------
    model_name : str
        Registered model name.
    data_path : str
        CSV or Parquet current batch (features, protected column, label if the policy names one).
    reference_path : str, optional
        The reference batch; default: the data the version was gated on (``fairness_data_path``).
    policy_path : str, optional
        Policy TOML; default: the policy recorded by the gate, else the shipped default.
    tracking_uri : str, optional
        MLflow tracking/registry URI.
    alias : str
        The deployment alias whose version is audited.
    report_root : str, optional
        Folder for the run's report folder (default ``$FAUX_CHECKS_HOME/reports``).
    retrain_aux : bool
        Train an auxiliary model on each batch instead of reusing the gate's (recorded in the gate
        run's ``records/``); the report says which was used, and why when the gate's could not be.
    signing_key : str, optional
        Ed25519 private key (PEM) signing the audit's ``evidence.json``; default ``$FAUX_CHECKS_SIGNING_KEY``.
    sep : str, optional
        The current batch's CSV delimiter (CLI ``--sep``); sniffed when None.
    thousands : str, optional
        The current batch's thousands mark (CLI ``--thousands``: ``","`` reads ``1,234.5`` as 1234.5).
    decimal : str, optional
        The current batch's decimal mark (CLI ``--decimal``: ``","`` reads ``0,189`` as 0.189); sniffed when None.
    positive_label : str, optional
        The label value of the positive class (CLI ``--positive-label``); replaces the policy's ``positive_label``.

    Returns
    -------
    dict (the audit summary) when the audit passed; otherwise a ``Failed`` state carrying it.
    """
    from faux_checks.settings import default_home

    from faux_checks.report.evidence import signing_key_path

    logger = run_logger()
    AUDIT_PROGRESS.clear()
    AUDIT_PROGRESS.update(model_name=model_name, version=None, stage="running", decision=None)
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")   # the order of audits
    report_root = report_root or str(default_home() / "reports")
    signing_key = signing_key_path(signing_key)   # a wrong key stops the audit before it runs
    try:
        target = find_deployed(model_name, alias, tracking_uri, reference_path)
    except FauxChecksError as exc:  # nothing to tag: no deployed version, or no reference
        logger.error("fairness audit of %s could not start: %s", model_name, exc)
        return failed_state(f"fairness audit of {model_name} undecided: {exc}",
                            data={"model_name": model_name, "decision": "undecided", "reasons": [str(exc)]})
    version = target["version"]
    AUDIT_PROGRESS.update(version=str(version), stage="running")
    report_dir = str(Path(report_root) / f"{model_name}-v{version}-audit-{time.strftime('%Y%m%dT%H%M%S')}")
    model_info = {"name": model_name, "version": version}
    if target["sha256"]:  # a version logged with MLflow's own API has no model_sha256 tag: hashed once downloaded
        model_info["sha256"] = target["sha256"]
    result, data, data_at = _audit_in_workdir(target, model_info, data_path=data_path, policy_path=policy_path,
                                              tracking_uri=tracking_uri, report_dir=report_dir, retrain_aux=retrain_aux,
                                              csv={"sep": sep, "thousands": thousands, "decimal": decimal},
                                              positive_label=positive_label)
    for column in result.drift.skipped:
        logger.warning("column '%s' skipped: %s", column.column, column.note)
    report = write_audit_report(result, report_dir, model_info, data, tracking_uri)
    AUDIT_PROGRESS.update(stage="recording", decision=result.decision)
    run_id, superseded = record_audit(
        model_name, version, tracking_uri, report, report_dir, data_path,
        {"reference": target.get("reference_path"), "current": data_path, "policy": policy_path}, signing_key,
        data_at, started_at)
    AUDIT_PROGRESS.update(stage="superseded" if superseded else "recorded")
    _publish_artifacts(model_name, version, report, report_dir)
    logger.info("%s v%s audit: %s (%s)", model_name, version, result.decision, result.rule)
    return _final_state(model_name, version, result, report_dir=report_dir, run_id=run_id, superseded=superseded)


def _audit_in_workdir(target: dict, model_info: dict, *, data_path: str, policy_path: str | None,
                      tracking_uri: str | None, report_dir: str, retrain_aux: bool, csv: dict,
                      positive_label: str | None):
    """Download the deployed version and the gate's records into a temporary folder, read both batches and audit
    them: ``(AuditResult, data summaries, the current batch's written-at time)``. Fails closed: any error makes the
    result ``undecided`` with its reason. ``model_info`` gains the model file's sha256 when the version has none."""
    from faux_checks.audit.results import AuditResult
    from faux_checks.report.build import summarise_data

    logger = run_logger()
    data: list[dict] = []
    data_at = data_written_at(data_path)
    with tempfile.TemporaryDirectory(prefix="faux-audit-") as workdir:
        try:
            model_path, spec_path = fetch_version(model_info["name"], target["version"], tracking_uri, workdir)
            if "sha256" not in model_info:
                from faux_checks.inputs.models import model_sha256

                model_info["sha256"] = model_sha256(model_path)
            reference = load_table(target["reference_path"])
            data_at = data_written_at(data_path)   # before the read: a batch replaced meanwhile is newer than this
            current = load_table(data_path, csv["sep"], csv["thousands"], csv["decimal"])   # CLI --sep/--thousands/--decimal
            records = None if retrain_aux else fetch_gate_records(target["gate_record"].get("run_id"), tracking_uri,
                                                                  workdir)
            data = [summarise_data(reference, path=target["reference_path"], name="reference"),
                    summarise_data(current, path=data_path, name="current")]
            result = audit_batch(model_path, spec_path, reference, current, policy_path, target["policy_json"],
                                 report_dir, model_info, target["gate_record"], records, positive_label)
        except Exception as exc:  # noqa: BLE001 - fail closed, but still record the undecided audit
            logger.error("audit of %s v%s could not run: %s", model_info["name"], target["version"], exc)
            result = AuditResult.undecided(f"the audit could not run: {type(exc).__name__}: {exc}",
                                           provenance=model_info)
    return result, data, data_at


def _publish_artifacts(model_name: str, version, report: dict, report_dir: str) -> None:
    """The audit's Prefect artifacts: its markdown summary and its table of limits."""
    from faux_checks.report.artifacts import artifact_markdown, artifact_table

    key = slug(model_name)
    create_markdown_artifact(key=f"fairness-audit-{key}", markdown=artifact_markdown(report, report_dir=report_dir),
                             description=f"fairness drift audit of {markdown_text(model_name)} v{markdown_text(version)}")
    create_table_artifact(key=f"fairness-audit-{key}-limits", table=artifact_table(report),
                          description=f"audit limits of {markdown_text(model_name)} v{markdown_text(version)}")


def _final_state(model_name: str, version, result, *, report_dir: str, run_id: str | None, superseded: str | None):
    """The flow's end: ``Completed`` with the audit summary when it passed, else a ``Failed`` state carrying it."""
    summary = {"model_name": model_name, "version": version, "decision": result.decision, "reasons": result.reasons,
               "report_dir": report_dir, "run_id": run_id, "timings": result.timings,
               "recorded": superseded is None, **({"superseded": superseded} if superseded else {})}
    if result.decision != "passed":
        return failed_state(f"fairness audit of {model_name} v{version} {result.decision}: {result.rule}",
                            data=summary)
    return Completed(message=f"fairness audit of {model_name} v{version} passed", data=summary)
