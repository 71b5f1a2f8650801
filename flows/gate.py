"""Prefect 3 flow: the pre-deployment fairness gate.

Recipe per new model version: mark it running → download model + feature spec → validate the
Great Expectations suite (fAux + baselines) on the audit data → write report.json/html →
record the decision (MLflow run + registry tags) → move the deployment alias on ``passed`` only.
The flow ends Failed when any version failed or is undecided (docs/architecture.md, contracts).

Fails closed at every step (one wrapper, :func:`_fail_closed`): an error before the decision is
recorded as ``undecided``; a decision that cannot be recorded, or a ``passed`` version whose alias cannot be moved, is
``undecided`` in the flow's result (flow Failed, nothing promoted, a ``*-not-recorded`` /
``*-not-promoted`` report holds the cause) and the version stays new in the registry
(``running``, or ``passed`` with ``fairness_promotion=pending``), so the next run gates it again.

Parameters are paths and names, never DataFrames or models; tasks use no result cache and
retry only on registry/data I/O, never on :class:`~faux_checks.errors.InputError` or a policy
decision (:mod:`flows.common`).
"""

from __future__ import annotations

import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.states import Completed

from faux_checks.report.artifacts import markdown_text

from .common import IO_TASK, TASK, PrefectUnreachableError, failed_state, prefect_unreachable, run_logger, slug
from .gate_record import (
    RECORDS,
    _undecided_cause,
    _write_evidence,
    _regression_fields,
    _record_uris,
    _whole_policy,
    _given_policy,
    _attribute_metrics,
    _attribute_tags,
    _write_records,
    _group_metrics,
    _policy_tags,
    _aux_key_tag,
)

__all__ = ["gate", "gate_version", "gate_version_leased", "VersionOutcome", "RunProgress", "PROGRESS"]


@dataclass
class VersionOutcome:
    """What the gate decided for one model version (plain data, JSON-ready)."""

    model_name: str
    version: str
    decision: str
    reasons: list[str]
    flagged_fraction: float | None = None
    by_group: list[dict] = field(default_factory=list)
    aux_quality: float | None = None
    testers: dict = field(default_factory=dict)
    report_dir: str | None = None
    run_id: str | None = None
    promoted: bool = False
    timings: dict = field(default_factory=dict)
    attributes: list[dict] = field(default_factory=list)


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
def load_audit_data(data_path: str, sep: str | None = None, thousands: str | None = None):
    """Read the audit data (CSV/Parquet; the CSV delimiter ``sep`` or sniffed; the numbers' thousands mark
    ``thousands``, CLI ``--thousands``); the file is never modified."""
    from faux_checks.inputs.io import read_table

    return read_table(data_path, sep=sep, thousands=thousands)


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
    trusted when the version's ``.skops`` model is loaded (:func:`expectations.trusting`).
    """
    from dataclasses import replace

    from expectations import build_suite, trusting, validate_frame
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
    if not policy.reports_per_attribute:        # the shape a one-attribute gate always recorded: no sections
        return outcome
    checks = ({a["attribute"]: a["check"] for a in outcome.attributes} if outcome.attributes
              else {policy.attribute_names[0]: outcome.check})          # [[attributes]] declaring one
    sections, notes = attribute_sections(policy, frame, checks)
    return replace(outcome, attributes=sections, reasons=list(outcome.reasons) + notes,
                   policy={**policy.model_dump(mode="json"), "sha256": policy.sha256()})


def _recording(records_dir: str | None, *, several: bool):
    """:func:`faux_checks.report.records.recording` into ``records_dir`` (per attribute when several); a no-op without one."""
    import contextlib

    if records_dir is None:
        return contextlib.nullcontext()
    from faux_checks.gate.attributes import attribute_key
    from faux_checks.report.records import recording

    def per_attribute(result) -> str:
        return attribute_key(((result.provenance or {}).get("policy") or {}).get("protected") or "_")

    return recording(records_dir, subfolder=per_attribute if several else None)


#: Sub-folder of a gate's report folder (and of its MLflow run's artifacts) holding its records.


@task(**IO_TASK)
def record(model_name: str, version: str, tracking_uri: str | None, outcome, report_dir: str, model_info: dict,
           data_path: str | None = None, data: dict | None = None, policy_path: str | None = None,
           sources: dict | None = None, signing_key: str | None = None) -> str:
    """Write the reports, check them, log the MLflow audit run and tag the version with the decision.

    Records are whole or absent (issue 25): every file is written under a temporary name, synced,
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
    records = _write_records(Path(report_dir) / RECORDS, outcome, policy_path)
    write_report(report_dir, decision=outcome.decision, reasons=outcome.reasons, check=outcome.check,
                 model=model_info, expectations=outcome.expectations, data=[data] if data else None,
                 history=report_history(registry, model_name), rules=outcome.rules,
                 attributes=getattr(outcome, "attributes", None) or None, replace=True,
                 regression=getattr(outcome, "regression", None) or None,
                 **(_whole_policy(outcome) or _given_policy(check, policy_path)))
    remove_temporaries(report_dir)     # a killed attempt's temporary files are never uploaded
    check_records(report_dir)
    evidence = _write_evidence(report_dir, sources or {}, signing_key, model_name, version, tracking_uri)
    interval = check.get("interval") or {}
    metrics = {k: check[k] for k in ("flagged_fraction", "aux_quality", "n_individuals", "n_undefined")
               if isinstance(check.get(k), (int, float))}
    metrics.update({f"flagged_fraction_{k}": interval[k] for k in ("lower", "upper")
                    if isinstance(interval.get(k), (int, float))})
    attributes = getattr(outcome, "attributes", None) or []
    metrics.update(_attribute_metrics(attributes))
    metrics.update(_group_metrics(check, attributes))
    run_id = registry.log_gate_run(
        model_name, version, report_dir=report_dir, metrics=metrics,
        params={"delta": check.get("delta"), "max_flagged_fraction": check.get("max_flagged_fraction"),
                "variant": (check.get("provenance") or {}).get("variant")},
        tags={"decision": outcome.decision, "delta": check.get("delta"),   # the report's history reads them back
              "policy_sha256": _policy_tags(check, policy_path, outcome)[0],
              **_aux_key_tag(check, records, attributes)},
    )
    sha256, policy_name = _policy_tags(check, policy_path, outcome)
    provenance = GateProvenance(
        promotion=PENDING if outcome.decision == "passed" else "none",  # promote() sets 'done'
        policy_sha256=sha256, policy_name=policy_name, report_uri=f"runs:/{run_id}/report.html",
        record_uris=_record_uris(run_id, records), **_regression_fields(getattr(outcome, "regression", None) or []),
        evidence_uri=f"runs:/{run_id}/{evidence.name}", evidence_signed=bool(signing_key),
        data_uri=Path(data_path).resolve().as_uri() if data_path else None,
        data_path=str(Path(data_path).resolve()) if data_path else None,
        data_sha256=(data or {}).get("sha256") or (check.get("provenance") or {}).get("data_sha256"),
        undecided_cause=_undecided_cause(outcome))
    registry.record_decision(
        model_name, version, decision=outcome.decision, flagged_fraction=check.get("flagged_fraction"),
        delta=check.get("delta"), aux_quality=check.get("aux_quality"),
        report_uri=str(Path(report_dir) / "report.html"), run_id=run_id, interval=check.get("interval"),
        extra={**provenance.to_tags(), **_attribute_tags(attributes, check)},
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


def _undecided(exc: BaseException):
    from expectations import SuiteOutcome

    return SuiteOutcome(decision="undecided", reasons=[f"{type(exc).__name__}: {exc}"], check=None,
                        expectations=[], gx_success=False)


def gate_version_leased(model_name: str, version: str, frame, *, lease_ttl_s: float, lease_wait_s: float = 0.0,
                        only_if_new: bool = True, **kwargs) -> VersionOutcome:
    """:func:`gate_version` under the version's lease (:mod:`faux_checks.registry.operations`): one gate at a time.

    Another gate's live lease is waited for up to ``lease_wait_s``; a version that this wait let
    another gate decide is reported with that decision (``only_if_new``: nothing run or recorded
    again); a lease still held after the wait leaves the version ``undecided`` in this run, with
    nothing recorded. The lease is released however the gate ends (an interrupt included), within
    :data:`~faux_checks.registry.operations.RELEASE_TIMEOUT_S` (a registry that does not answer by then
    leaves it to expire); a lease whose owner died expires (its deadline, or at once on the same host).
    """
    from faux_checks.registry import GATE_TAG, Registry
    from faux_checks.registry import operations
    from faux_checks.registry.records import REPORT_TAG, RUN_ID_TAG, parse_text
    from faux_checks.registry.operations import acquire_lease, release_lease_within

    logger = run_logger()
    tracking_uri = kwargs.get("tracking_uri")
    registry = Registry(tracking_uri)
    lease, other = acquire_lease(registry, model_name, version, ttl_s=lease_ttl_s, wait_s=lease_wait_s)
    if lease is None:
        reason = (f"v{version} is being gated by another run, {other.describe() if other else 'unknown'}; this run "
                  f"waited {lease_wait_s:.0f} s and recorded nothing (the other run decides it)")
        logger.warning("%s %s", model_name, reason)
        return VersionOutcome(model_name=model_name, version=version, decision="undecided", reasons=[reason])
    try:
        if only_if_new and str(version) not in registry.new_versions(model_name):
            tags = registry._version(model_name, version).tags or {}
            decision = tags.get(GATE_TAG)
            reason = f"v{version} was decided by another gate run while this one waited: {decision}"
            logger.info("%s %s", model_name, reason)
            return VersionOutcome(model_name=model_name, version=version, decision=decision or "undecided",
                                  reasons=[reason], run_id=parse_text(tags.get(RUN_ID_TAG)),
                                  report_dir=parse_text(tags.get(REPORT_TAG)))
        return gate_version(model_name, version, frame, **kwargs)
    finally:  # bounded: a frozen registry never holds the gate past its deadline (issue 25, fault 5)
        try:
            if release_lease_within(registry, lease) is None:
                logger.warning("%s v%s: lease not released within %g s (the registry did not answer); it expires "
                               "at its deadline", model_name, version, operations.RELEASE_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - it expires by itself
            logger.warning("%s v%s: lease not released (%s); it expires at its deadline", model_name, version, exc)


def gate_version(model_name: str, version: str, frame, *, policy_path: str | None, tracking_uri: str | None,
                 alias: str, report_root: str, workdir: str, aux_model_path: str | None = None,
                 data_path: str | None = None, trusted_types: list[str] | None = None,
                 allow_rollback: bool = False, signing_key: str | None = None) -> VersionOutcome:
    """Gate one version (called inside the flow): check, record, promote, publish; fails closed.

    ``allow_rollback``: a passing version older than the passed one holding ``alias`` takes it
    (otherwise the alias stays on the newer version and the outcome says so; issue 22, item 4).

    An error while checking makes the decision ``undecided`` (still recorded); a decision that
    cannot be recorded, or a ``passed`` version whose alias cannot be moved, makes the version
    ``undecided`` here, with the cause in a report of its own, and leaves it new in the registry.

    A checked version is compared per individual with the deployed and the previous version
    (:func:`flows.regression.against_earlier`: the "no new harm" rule when the policy sets one), and its
    records get an evidence pack (``evidence.json``, signed with ``signing_key`` when given).
    """
    timings: dict[str, float] = {}
    report_dir = _new_report_dir(report_root, model_name, version)
    model_info = {"name": model_name, "version": version}
    sources: dict[str, str | None] = {"data": data_path}
    outcome, error = _fail_closed(f"model {model_name} v{version} could not be validated", lambda: _check_version(
        model_name, version, frame, policy_path, tracking_uri, workdir, aux_model_path, model_info, timings,
        str(Path(report_dir) / RECORDS), trusted_types, sources))
    if error is not None:
        outcome = _undecided(error)
    else:
        from faux_checks.provenance import data_sha256

        from .regression import against_earlier

        t0 = time.perf_counter()
        outcome = against_earlier(model_name, version, outcome, frame, tracking_uri=tracking_uri, alias=alias,
                                  workdir=workdir, policy_path=policy_path, records_dir=str(Path(report_dir) / RECORDS),
                                  data_sha256=data_sha256(frame))
        timings["compare"] = time.perf_counter() - t0
    outcome = _with_next_step(outcome, model_name, version)

    t0 = time.perf_counter()
    run_id, error = _fail_closed(f"model {model_name} v{version}: the decision could not be recorded", lambda: _record(
        model_name, version, tracking_uri, outcome, report_dir, model_info, data_path, frame, policy_path,
        sources, signing_key))
    if error is not None:  # not recorded: the version stays 'running' (new), nothing is promoted
        return _not_completed(model_name, version, outcome, report_dir, model_info, timings, "not-recorded",
                              f"the decision '{outcome.decision}' could not be recorded in the registry "
                              f"({type(error).__name__}: {error}); nothing was promoted and the version stays new, "
                              "so the next gate run checks it again")
    timings["record"] = time.perf_counter() - t0

    promoted = False
    if outcome.decision != "passed":  # a re-gated version that no longer passes loses the alias
        removed, error = _fail_closed(f"model {model_name} v{version}: alias '{alias}' could not be removed",
                                      lambda: demote(model_name, version, tracking_uri, alias))
        if removed or error is not None:
            from dataclasses import replace

            note = (f"alias '{alias}' removed from v{version}: it no longer passes" if removed else
                    f"alias '{alias}' may still point at v{version}, which no longer passes: removing it failed "
                    f"({type(error).__name__}: {error}); remove it by hand")
            outcome = replace(outcome, reasons=list(outcome.reasons) + [note])
    if outcome.decision == "passed":
        holder, error = _fail_closed(f"model {model_name} v{version} passed but alias '{alias}' could not be moved",
                                     lambda: promote(model_name, version, tracking_uri, alias, allow_rollback))
        if error is not None:  # recorded 'passed' + promotion 'pending': re-gated by the next run
            return _not_completed(model_name, version, outcome, report_dir, model_info, timings, "not-promoted",
                                  f"the version passed the policy but alias '{alias}' could not be moved to it "
                                  f"({type(error).__name__}: {error}); it stays pending and the next gate run "
                                  "checks it again", run_id=run_id)
        promoted = holder is None or str(holder) == str(version)
        if not promoted:
            from dataclasses import replace

            outcome = replace(outcome, reasons=list(outcome.reasons) + [
                f"alias '{alias}' stays on v{holder}, a newer version that passed; re-gating v{version} never moves "
                "it backwards (pass --allow-rollback to move it)"])

    result = _version_outcome(model_name, version, outcome, outcome.decision, outcome.reasons, report_dir, timings,
                              run_id=run_id, promoted=promoted)
    _publish(result, report_dir)
    run_logger().info("%s v%s: %s (%s)", model_name, version, outcome.decision, "; ".join(outcome.reasons[:2]))
    return result


def _with_next_step(outcome, model_name: str, version: str):
    """An ``undecided`` outcome with what happens to the version next (it is not gated again by itself)."""
    if outcome.decision != "undecided":
        return outcome
    from dataclasses import replace

    step = (f"v{version} of '{model_name}' is recorded undecided and is not gated again automatically: fix the cause "
            f"above, then re-decide it with `faux-checks gate {model_name} --data ... --version {version} --force`, or "
            "register a fixed model as a new version, which the next gate run picks up")
    return replace(outcome, reasons=list(outcome.reasons) + [step])


def _fail_closed(what: str, step):
    """Run one step of the gate: ``(its result, None)``, or ``(None, the exception)``, logged; never raises."""
    try:
        return step(), None
    except Exception as exc:  # noqa: BLE001 - fail closed: the exception is returned and logged, never raised
        run_logger().error("%s: %s", what, exc)
        return None, exc


def _check_version(model_name: str, version: str, frame, policy_path: str | None, tracking_uri: str | None,
                   workdir: str, aux_model_path: str | None, model_info: dict, timings: dict,
                   records_dir: str | None = None, trusted_types: list[str] | None = None,
                   sources: dict | None = None):
    """Download the version (marked running), hash its model, validate the suite on the audit data.

    ``sources`` receives the downloaded ``model`` and ``spec`` paths (the evidence pack hashes them)."""
    from faux_checks.inputs.models import model_sha256

    t0 = time.perf_counter()
    model_path, spec_path = fetch_version(model_name, version, tracking_uri, workdir)
    if sources is not None:
        sources.update(model=model_path, spec=spec_path)
    model_info["sha256"] = model_sha256(model_path)
    timings["load"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    with _aux_store(tracking_uri, workdir):    # an aux model an earlier gate recorded is restored, not retrained
        outcome = validate(frame, policy_path, model_path, spec_path, aux_model_path, records_dir, trusted_types)
    timings["validate"] = time.perf_counter() - t1
    return outcome


def _aux_store(tracking_uri: str | None, workdir: str):
    """An :func:`~faux_checks.gate.aux_cache.aux_store` on this registry's gate runs (tag ``fairness_aux_key``)."""
    from faux_checks.gate.aux_cache import aux_store
    from faux_checks.registry import Registry

    registry = Registry(tracking_uri)
    return aux_store(lambda key: registry.find_aux_record(key, Path(workdir) / "aux-records"))


def _record(model_name: str, version: str, tracking_uri: str | None, outcome, report_dir: str, model_info: dict,
            data_path: str | None, frame, policy_path: str | None = None, sources: dict | None = None,
            signing_key: str | None = None):
    """The :func:`record` task, with the audit data's summary (rows, hash, missing values) for the report."""
    from faux_checks.report.build import summarise_data

    data = summarise_data(frame, path=data_path) if frame is not None else None
    return record(model_name, version, tracking_uri, outcome, report_dir, model_info, data_path, data, policy_path,
                  sources, signing_key)


def _publish(result: VersionOutcome, report_dir: str) -> None:
    """The Prefect markdown and table artifacts of a recorded decision (best effort: the decision stands)."""
    name, version = result.model_name, result.version
    try:
        create_markdown_artifact(key=f"fairness-gate-{slug(name)}-v{version}", markdown=_markdown(result),
                                 description=f"fairness gate decision for {markdown_text(name)} v{markdown_text(version)}")
        from faux_checks.report.artifacts import artifact_table
        from faux_checks.report.schema import load_report

        create_table_artifact(key=f"fairness-gate-{slug(name)}-v{version}-rules",
                              table=artifact_table(load_report(report_dir)),
                              description=f"fairness gate rules for {markdown_text(name)} v{markdown_text(version)}")
    except Exception as exc:  # noqa: BLE001 - best effort after the decision: logged
        run_logger().warning("model %s v%s: Prefect artifact not written: %s", name, version, exc)


def _version_outcome(model_name: str, version: str, outcome, decision: str, reasons: list[str],
                     report_dir: str | None, timings: dict, *, run_id: str | None, promoted: bool) -> VersionOutcome:
    """The flow's record of one version, with the check's numbers (when the check ran)."""
    check = outcome.check or {}
    return VersionOutcome(
        model_name=model_name, version=version, decision=decision, reasons=reasons,
        flagged_fraction=check.get("flagged_fraction"), by_group=check.get("by_group") or [],
        aux_quality=check.get("aux_quality"), testers=check.get("testers") or {}, report_dir=report_dir,
        run_id=run_id, promoted=promoted, timings=timings,
        attributes=[{k: v for k, v in a.items() if k != "check"} for a in getattr(outcome, "attributes", None) or []],
    )


def _new_report_dir(report_root: str, model_name: str, version: str) -> str:
    """A report folder no other gate run uses (time stamp + random suffix)."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    return str(Path(report_root) / f"{model_name}-v{version}-{stamp}-{uuid.uuid4().hex[:6]}")


def _not_completed(model_name: str, version: str, outcome, report_dir: str, model_info: dict, timings: dict,
                   suffix: str, cause: str, run_id: str | None = None) -> VersionOutcome:
    """'undecided' for a version whose decision was not recorded or not acted on, with the cause in a report.

    The cause goes first in the reasons, then the check's own; the report (``<report_dir>-<suffix>``,
    best effort: the file system may be what failed) keeps the check's numbers.
    """
    logger = run_logger()
    reasons = [cause] + list(outcome.reasons)
    incident_dir = f"{report_dir}-{suffix}"
    try:
        from faux_checks.report.build import write_report

        write_report(incident_dir, decision="undecided", reasons=reasons, check=outcome.check, model=model_info,
                     expectations=outcome.expectations)
    except Exception as exc:  # noqa: BLE001 - best effort after the decision: logged
        logger.error("model %s v%s: the report of the cause could not be written either: %s", model_name, version, exc)
        incident_dir = None
    result = _version_outcome(model_name, version, outcome, "undecided", reasons, incident_dir, timings,
                              run_id=run_id, promoted=False)
    try:
        create_markdown_artifact(key=f"fairness-gate-{slug(model_name)}-v{version}", markdown=_markdown(result),
                                 description=f"fairness gate decision for {markdown_text(model_name)} v{markdown_text(version)}")
    except Exception as exc:  # noqa: BLE001 - best effort after the decision: logged
        logger.warning("model %s v%s: Prefect artifact not written: %s", model_name, version, exc)
    return result


def _markdown(o: VersionOutcome) -> str:
    """The version's Markdown artifact; every name and value from the model, data or reasons is escaped."""
    md = markdown_text
    ff = "n/a" if o.flagged_fraction is None else f"{o.flagged_fraction:.2%}"
    lines = [f"## {md(o.model_name)} v{md(o.version)}: **{md(o.decision)}**", "", f"- flagged fraction: {ff}",
             f"- aux quality: {md(o.aux_quality if o.aux_quality is not None else 'n/a')}",
             f"- promoted: {o.promoted}", f"- report: {md(o.report_dir)}", "", "Reasons:"]
    lines += [f"- {md(r)}" for r in o.reasons]
    if o.attributes:
        lines += ["", "| protected attribute | decision | flagged fraction | aux quality |", "|---|---|---|---|"]
        lines += [f"| {md(a.get('attribute'))} | {md(a.get('decision'))} | "
                  f"{'n/a' if a.get('flagged_fraction') is None else format(a['flagged_fraction'], '.2%')} | "
                  f"{md(a.get('aux_quality') if a.get('aux_quality') is not None else 'n/a')} |" for a in o.attributes]
    if o.by_group:
        lines += ["", "| group | n | flagged fraction |", "|---|---|---|"]
        lines += [f"| {md(g.get('group'))} | {md(g.get('n'))} | {md(g.get('flagged_fraction'))} |" for g in o.by_group]
    return "\n".join(lines)


@flow(name="fairness-gate", log_prints=True)
def gate(model_name: str, data_path: str, policy_path: str | None = None, tracking_uri: str | None = None,
         alias: str = "deployable", report_root: str | None = None, versions: list[str] | None = None,
         aux_model_path: str | None = None, deadline_s: float | None = None, trusted_types: list[str] | None = None,
         regate: list[str] | None = None, allow_rollback: bool = False, signing_key: str | None = None,
         sep: str | None = None, thousands: str | None = None):
    """Gate every new version of ``model_name`` on the audit data at ``data_path``.

    Parameters
    ----------
    model_name : str
        Registered model name.
    data_path : str
        CSV or Parquet audit data (protected column, label if the policy names one, features).
    policy_path : str, optional
        Policy TOML; the shipped default when omitted.
    tracking_uri : str, optional
        MLflow tracking/registry URI; ``MLFLOW_TRACKING_URI`` or the embedded sqlite file by default.
    alias : str
        Alias moved to a version that passes.
    report_root : str, optional
        Folder for per-version reports (default ``$FAUX_CHECKS_HOME/reports``).
    versions : list of str, optional
        Gate exactly these versions instead of the new ones.
    deadline_s : float, optional
        This run's deadline (default: the policy's ``[operations] deadline_s``): it bounds the
        version leases (their expiry) and how long this run waits for another gate's lease. The
        CLI enforces it on the whole command.
    trusted_types : list of str, optional
        A ``.skops`` version: types beyond those skops trusts by default that its operator reviewed
        (CLI ``--trust-type NAME``); without them such a version is ``undecided``, its reason listing them.
    regate : list of str, optional
        Without ``versions``: decided versions to gate again besides the new ones (the CLI passes the
        undecided versions whose check never ran, once the policy or data changed;
        :meth:`~faux_checks.registry.Registry.gate_plan`).
    allow_rollback : bool
        Let a passing version older than the passed one holding ``alias`` take it (default: never).
    signing_key : str, optional
        Ed25519 private key (PEM) that signs each decision's evidence pack (``evidence.json``); default the
        ``FAUX_CHECKS_SIGNING_KEY`` environment variable; unsigned packs without either. Read before any
        version is touched: a key that cannot be read stops the run (:class:`faux_checks.errors.InputError`).

    Returns
    -------
    list of dict (one per version, see :class:`VersionOutcome`) when every version passed;
    otherwise a ``Failed`` state carrying the same list, so callers see the flow Failed.
    """
    from dataclasses import asdict

    from faux_checks.report.evidence import signing_key_path
    from flows.memory import free_version_memory
    from faux_checks.settings import default_home

    logger = run_logger()
    flow_started = time.perf_counter()            # the flow body's wall time is logged at its end (bench_gate.py)
    report_root = report_root or str(default_home() / "reports")
    signing_key = signing_key_path(signing_key)   # a wrong key or passphrase stops the run before any version
    operations = _operations(policy_path)
    deadline_s = float(deadline_s or operations.deadline_s)
    ends_at = time.monotonic() + deadline_s
    todo = versions if versions else _new_versions(model_name, tracking_uri)
    if not versions and regate:
        todo = sorted(set(todo) | {str(v) for v in regate}, key=int)
    if not todo:
        logger.info("no new versions of %s to gate", model_name)
        return []
    try:
        frame = load_audit_data(data_path, sep, thousands)   # CLI --sep (None = sniffed) and --thousands
        load_error = None
    except Exception as exc:  # noqa: BLE001 - fail closed: the load error makes each version undecided
        frame, load_error = None, exc
    outcomes: list[VersionOutcome] = []
    PROGRESS.start(model_name, todo, outcomes)
    with tempfile.TemporaryDirectory(prefix="faux-gate-") as workdir:
        for version in todo:
            if outcomes and (cause := prefect_unreachable()) is not None:   # bounded by Prefect's client settings
                PROGRESS.prefect_error = cause
                raise PrefectUnreachableError(PROGRESS.describe())
            if load_error is not None:
                outcome = _record_undecided(model_name, version, load_error, tracking_uri, report_root, data_path,
                                            policy_path)
            else:
                outcome = gate_version_leased(
                    model_name, version, frame, lease_ttl_s=deadline_s + LEASE_MARGIN_S,
                    lease_wait_s=max(0.0, ends_at - time.monotonic() - LEASE_MARGIN_S),
                    only_if_new=not versions and str(version) not in {str(v) for v in regate or ()},
                    policy_path=policy_path, tracking_uri=tracking_uri, alias=alias, report_root=report_root,
                    workdir=workdir, aux_model_path=aux_model_path, data_path=data_path,
                    trusted_types=list(trusted_types or []), allow_rollback=allow_rollback,
                    signing_key=signing_key)
            outcomes.append(outcome)
            free_version_memory()   # flat RSS over versions (issue 25, fault 7; flows/memory.py)
    results = [asdict(o) for o in outcomes]
    logger.info("%s: %d version(s) gated; flow body %.2f s", FLOW_TIME_LOG, len(outcomes), time.perf_counter() - flow_started)
    bad = [o for o in outcomes if o.decision != "passed"]
    if bad:
        summary = ", ".join(f"v{o.version} {o.decision}" for o in bad)
        return failed_state(f"fairness gate blocked {model_name}: {summary}", data=results)
    return Completed(message=f"all {len(outcomes)} version(s) of {model_name} passed", data=results)


#: The flow's closing log line starts with this (``benchmarks/bench_gate.py --cli`` reads the flow time from it).
FLOW_TIME_LOG = "fairness-gate timing"
#: Seconds a lease outlives its gate's deadline, and that a waiting gate keeps for its own work.
LEASE_MARGIN_S = 60.0


@dataclass
class RunProgress:
    """What the gate run in this process has decided so far, for a caller whose flow cannot end in Prefect.

    :func:`gate` fills it as each version ends (``decided``: the :class:`VersionOutcome` list, shared);
    with the Prefect API gone mid-run (issue 25, fault 2) the flow's final state cannot be recorded and
    Prefect raises, so ``faux-checks gate`` reads this instead: the versions decided before stay valid
    (their decisions are in MLflow), the rest are reported not decided. ``prefect_error``: the failed
    health check's cause, when the gate stopped for it.
    """

    model_name: str = ""
    todo: list[str] = field(default_factory=list)
    decided: list[VersionOutcome] = field(default_factory=list)
    prefect_error: str | None = None

    def start(self, model_name: str, todo: list[str], decided: list[VersionOutcome]) -> None:
        self.model_name, self.todo, self.decided, self.prefect_error = model_name, [str(v) for v in todo], decided, None

    def not_decided(self) -> list[str]:
        """Versions of ``todo`` with no outcome in this run."""
        done = {str(o.version) for o in self.decided}
        return [v for v in self.todo if v not in done]

    def describe(self) -> str:
        """``Prefect API unreachable after v1 was decided (failed, recorded: it stands); v2 not decided (...)``."""
        def one(o: VersionOutcome) -> str:
            kept = "recorded in MLflow: it stands" if o.run_id else "not recorded"
            return f"v{o.version} ({o.decision}; {kept})"

        done = (f"after {', '.join(one(o) for o in self.decided)} {'was' if len(self.decided) == 1 else 'were'} decided"
                if self.decided else "before any version was decided")
        left = self.not_decided()
        stays = "it stays new and the next gate run gates it" if len(left) == 1 else \
            "they stay new and the next gate run gates them"
        rest = f"; {', '.join('v' + v for v in left)} not decided (not gated: {stays})" if left else ""
        cause = f" ({self.prefect_error})" if self.prefect_error else ""
        return f"Prefect API unreachable{cause} {done}{rest}"


#: The current (last) gate run of this process (:class:`RunProgress`).
PROGRESS = RunProgress()


def _operations(policy_path: str | None):
    """The policy's ``[operations]`` (defaults when the policy does not load: the check reports that),
    with MLflow's HTTP timeout, retries and backoff and the model-file limits applied to this process."""
    from faux_checks.gate.policy import OperationsSettings, load_policy
    from faux_checks.registry.operations import apply_client_settings

    try:
        operations = load_policy(policy_path).operations
    except Exception:  # noqa: BLE001 - an unreadable policy: default client settings; the gate records why
        operations = OperationsSettings()
    apply_client_settings(operations)
    from faux_checks.inputs.limits import set_model_limits

    # size, tree and probe limits on every model file this run loads; torch loads probed too (a crash ends
    # the probe child, the version is recorded undecided and the next one is gated: inputs/limits.py)
    set_model_limits(operations, probe_torch=True)
    return operations


def _new_versions(model_name: str, tracking_uri: str | None) -> list[str]:
    """:func:`find_new_versions`, an unreachable registry named as such (with the seconds spent trying)."""
    from faux_checks.registry import default_tracking_uri
    from faux_checks.registry.operations import is_unreachable, unreachable_error

    t0 = time.monotonic()
    try:
        return find_new_versions(model_name, tracking_uri)
    except Exception as exc:
        if is_unreachable(exc):
            raise unreachable_error(tracking_uri or default_tracking_uri(), time.monotonic() - t0, exc) from exc
        raise


def _record_undecided(model_name, version, exc, tracking_uri, report_root, data_path=None,
                      policy_path=None) -> VersionOutcome:
    outcome = _with_next_step(_undecided(exc), model_name, version)
    report_dir = _new_report_dir(report_root, model_name, version)
    model_info = {"name": model_name, "version": version}
    try:
        run_id = record(model_name, version, tracking_uri, outcome, report_dir, model_info, data_path,
                        policy_path=policy_path)
    except Exception as rec_exc:  # noqa: BLE001 - not recorded: said, the version stays new
        return _not_completed(model_name, version, outcome, report_dir, model_info, {}, "not-recorded",
                              f"the decision 'undecided' could not be recorded in the registry "
                              f"({type(rec_exc).__name__}: {rec_exc}); the version stays new")
    return VersionOutcome(model_name=model_name, version=version, decision="undecided", reasons=outcome.reasons,
                          report_dir=report_dir, run_id=run_id)
