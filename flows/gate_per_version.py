"""One version through the gate: check, compare, record, demote or promote, publish; fails closed.

:func:`gate_version` runs the tasks of :mod:`faux_checks_flows.gate_tasks` for one model version, each step in one
fail-closed wrapper (:func:`_fail_closed`): an error before the decision is recorded as ``undecided``; a
decision that cannot be recorded, or a ``passed`` version whose alias cannot be moved, is ``undecided`` in
the result with the cause in a report of its own, and the version stays new in the registry.
:func:`gate_version_leased` runs it under the version's lease; :class:`VersionOutcome` is what it returns
(the flow's record of one version) and :func:`outcome_markdown` its Prefect artifact. Split out of
:mod:`faux_checks_flows.gate`.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from faux_checks.report.artifacts import markdown_text

from .common import run_logger, slug
from .gate_record import RECORDS
from .gate_tasks import demote, fetch_version, promote, record, validate

__all__ = ["gate_version", "gate_version_leased", "record_undecided", "VersionOutcome"]


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
    #: The decision this run recorded in the registry (it stands there), None when it recorded none.
    recorded: str | None = None


def _undecided(exc: BaseException):
    from faux_checks_gx import SuiteOutcome

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
    finally:  # bounded: a frozen registry never holds the gate past its deadline
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
    (otherwise the alias stays on the newer version and the outcome says so).

    An error while checking makes the decision ``undecided`` (still recorded); a decision that
    cannot be recorded, or a ``passed`` version whose alias cannot be moved, makes the version
    ``undecided`` here, with the cause in a report of its own, and leaves it new in the registry.

    A checked version is compared per individual with the deployed and the previous version
    (:func:`faux_checks_flows.regression.against_earlier`: the "no new harm" rule when the policy sets one), and its
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

    from .gate_deadline import WINDOW

    if (late := WINDOW.why_not_record()) is not None:   # nothing is recorded or promoted after the deadline
        return _not_completed(model_name, version, outcome, report_dir, model_info, timings, "not-recorded",
                              f"{late}: the decision '{outcome.decision}' was not recorded and nothing was promoted; "
                              "the version stays new, so the next gate run checks it again")
    t0 = time.perf_counter()
    with WINDOW.recording_of(version):   # a deadline arriving now waits for the record and alias move to end
        run_id, error = _fail_closed(f"model {model_name} v{version}: the decision could not be recorded",
                                     lambda: _record(model_name, version, tracking_uri, outcome, report_dir, model_info,
                                                     data_path, frame, policy_path, sources, signing_key))
        if error is not None:  # not recorded: the version stays 'running' (new), nothing is promoted
            return _not_completed(model_name, version, outcome, report_dir, model_info, timings, "not-recorded",
                                  f"the decision '{outcome.decision}' could not be recorded in the registry "
                                  f"({type(error).__name__}: {error}); nothing was promoted and the version stays "
                                  "new, so the next gate run checks it again")
        timings["record"] = time.perf_counter() - t0
        WINDOW.note(version, outcome.decision, run_id)
        outcome = _demote_if_not_passed(model_name, version, outcome, tracking_uri, alias)
        result, promoted = _promote(model_name, version, outcome, report_dir, model_info, timings, run_id,
                                    tracking_uri, alias, allow_rollback)
    if promoted is None:   # not promoted for a cause of its own: the outcome says it, nothing to publish
        return result
    _publish(result, report_dir)
    run_logger().info("%s v%s: %s (%s)", model_name, version, result.decision, "; ".join(result.reasons[:2]))
    return result


def _demote_if_not_passed(model_name: str, version: str, outcome, tracking_uri: str | None, alias: str):
    """A re-gated version that no longer passes loses ``alias``; the outcome's reasons say what happened."""
    if outcome.decision == "passed":
        return outcome
    removed, error = _fail_closed(f"model {model_name} v{version}: alias '{alias}' could not be removed",
                                  lambda: demote(model_name, version, tracking_uri, alias))
    if removed or error is not None:
        from dataclasses import replace

        from .gate_deadline import WINDOW

        if removed:
            run_id = WINDOW.recorded.get(str(version), (None, None, None))[1]
            WINDOW.note(version, outcome.decision, run_id, f"alias '{alias}' removed from it")
        note = (f"alias '{alias}' removed from v{version}: it no longer passes" if removed else
                f"alias '{alias}' may still point at v{version}, which no longer passes: removing it failed "
                f"({type(error).__name__}: {error}); remove it by hand")
        outcome = replace(outcome, reasons=list(outcome.reasons) + [note])
    return outcome


def _promote(model_name: str, version: str, outcome, report_dir: str, model_info: dict, timings: dict, run_id,
             tracking_uri: str | None, alias: str, allow_rollback: bool) -> tuple[VersionOutcome, bool | None]:
    """A recorded version: ``alias`` moved to it when it passed, never once the deadline is reached.

    Returns ``(outcome, promoted)``; ``promoted`` None when a passed version was not promoted (the deadline, or
    the move failed: the outcome is ``undecided`` with the cause, the promotion stays pending in the registry).
    """
    from .gate_deadline import WINDOW

    promoted = False
    if outcome.decision == "passed" and WINDOW.passed():   # recorded, whole; never promoted after the deadline
        WINDOW.note(version, "passed", run_id, f"alias '{alias}' not moved (promotion pending)")
        return _not_completed(model_name, version, outcome, report_dir, model_info, timings, "not-promoted",
                              f"the decision 'passed' is recorded (it stands) but alias '{alias}' was not moved: the "
                              "deadline was reached by the time it was recorded; the promotion stays pending and the "
                              "next gate run checks the version again", run_id=run_id, recorded="passed"), None
    if outcome.decision == "passed":
        holder, error = _fail_closed(f"model {model_name} v{version} passed but alias '{alias}' could not be moved",
                                     lambda: promote(model_name, version, tracking_uri, alias, allow_rollback))
        if error is not None:  # recorded 'passed' + promotion 'pending': re-gated by the next run
            WINDOW.note(version, "passed", run_id, f"alias '{alias}' not moved (promotion pending)")
            return _not_completed(model_name, version, outcome, report_dir, model_info, timings, "not-promoted",
                                  f"the version passed the policy but alias '{alias}' could not be moved to it "
                                  f"({type(error).__name__}: {error}); it stays pending and the next gate run "
                                  "checks it again", run_id=run_id, recorded="passed"), None
        promoted = holder is None or str(holder) == str(version)
        WINDOW.note(version, "passed", run_id, f"alias '{alias}' moved to it" if promoted else
                    f"alias '{alias}' stays on v{holder}")
        if not promoted:
            from dataclasses import replace

            outcome = replace(outcome, reasons=list(outcome.reasons) + [
                f"alias '{alias}' stays on v{holder}, a newer version that passed; re-gating v{version} never moves "
                "it backwards (pass --allow-rollback to move it)"])
    result = _version_outcome(model_name, version, outcome, outcome.decision, outcome.reasons, report_dir, timings,
                              run_id=run_id, promoted=promoted, recorded=outcome.decision)
    return result, promoted


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
        create_markdown_artifact(key=f"fairness-gate-{slug(name)}-v{version}", markdown=outcome_markdown(result),
                                 description=f"fairness gate decision for {markdown_text(name)} v{markdown_text(version)}")
        from faux_checks.report.artifacts import artifact_table
        from faux_checks.report.schema import load_report

        create_table_artifact(key=f"fairness-gate-{slug(name)}-v{version}-rules",
                              table=artifact_table(load_report(report_dir)),
                              description=f"fairness gate rules for {markdown_text(name)} v{markdown_text(version)}")
    except Exception as exc:  # noqa: BLE001 - best effort after the decision: logged
        run_logger().warning("model %s v%s: Prefect artifact not written: %s", name, version, exc)


def _version_outcome(model_name: str, version: str, outcome, decision: str, reasons: list[str],
                     report_dir: str | None, timings: dict, *, run_id: str | None, promoted: bool,
                     recorded: str | None = None) -> VersionOutcome:
    """The flow's record of one version, with the check's numbers (when the check ran)."""
    check = outcome.check or {}
    return VersionOutcome(
        model_name=model_name, version=version, decision=decision, reasons=reasons,
        flagged_fraction=check.get("flagged_fraction"), by_group=check.get("by_group") or [],
        aux_quality=check.get("aux_quality"), testers=check.get("testers") or {}, report_dir=report_dir,
        run_id=run_id, promoted=promoted, timings=timings, recorded=recorded,
        attributes=[{k: v for k, v in a.items() if k != "check"} for a in getattr(outcome, "attributes", None) or []],
    )


def _new_report_dir(report_root: str, model_name: str, version: str) -> str:
    """A report folder no other gate run uses (time stamp + random suffix)."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    return str(Path(report_root) / f"{model_name}-v{version}-{stamp}-{uuid.uuid4().hex[:6]}")


def _not_completed(model_name: str, version: str, outcome, report_dir: str, model_info: dict, timings: dict,
                   suffix: str, cause: str, run_id: str | None = None, recorded: str | None = None) -> VersionOutcome:
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
                              run_id=run_id, promoted=False, recorded=recorded)
    try:
        create_markdown_artifact(key=f"fairness-gate-{slug(model_name)}-v{version}", markdown=outcome_markdown(result),
                                 description=f"fairness gate decision for {markdown_text(model_name)} v{markdown_text(version)}")
    except Exception as exc:  # noqa: BLE001 - best effort after the decision: logged
        logger.warning("model %s v%s: Prefect artifact not written: %s", model_name, version, exc)
    return result


def outcome_markdown(o: VersionOutcome) -> str:
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


def record_undecided(model_name, version, exc, tracking_uri, report_root, data_path=None,
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
    from .gate_deadline import WINDOW

    WINDOW.note(version, "undecided", run_id)
    return VersionOutcome(model_name=model_name, version=version, decision="undecided", reasons=outcome.reasons,
                          report_dir=report_dir, run_id=run_id, recorded="undecided")
