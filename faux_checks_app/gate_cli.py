"""The commands that run a Prefect flow on registered model versions: ``faux-checks gate`` (each new version, or the
ones ``--version`` names, decided and recorded; the alias moved) and ``faux-checks audit`` (the deployed version's
drift on a current batch, once); ``faux-checks demo`` is :mod:`faux_checks_app.demo_cli`.

Each checks its configuration before any flow starts (:mod:`faux_checks_app.gate_plan`,
:mod:`faux_checks_app.audit_plan`: exit 3, nothing recorded), then runs the flow in this process and folds its
state and the versions' recorded decisions into the exit code; ``gate`` prints the history table
(:mod:`faux_checks_app.history`, :func:`print_history_and_code`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

from faux_checks.errors import EXIT_CONFIGURATION, ConfigurationError, FauxChecksError

from . import lifecycle
from .arguments import check_outputs, deadline_seconds, policy_name
from .console import EXIT_FAILED, EXIT_PASSED, EXIT_UNDECIDED, eprint, error, say, wants_json
from .lifecycle import on_deadline
from .prefect_start import start_temporary_server

__all__ = ["cmd_audit", "cmd_gate", "print_history_and_code"]


def _prefect_api() -> str:
    """Which Prefect API a flow command talks to, for its first line ("(Prefect ephemeral
    API)" was printed with ``PREFECT_API_URL`` set)."""
    url = os.environ.get("PREFECT_API_URL")
    if not url:
        try:  # a Prefect profile may name one
            from prefect.settings import PREFECT_API_URL

            url = PREFECT_API_URL.value()
        except Exception:  # noqa: BLE001 - only a label
            url = None
    if url:
        from faux_checks.report._format import printable

        return f"Prefect API {printable(str(url))}"
    return "Prefect ephemeral API; first start takes ~10 s"


def cmd_gate(args) -> int:
    """Run the Prefect gate flow on a registered model, within the deadline (policy ``[operations]`` or --deadline)."""
    from faux_checks.gate.policy import load_policy
    from faux_checks.registry import default_tracking_uri
    from faux_checks.registry.operations import apply_client_settings, check_reachable
    from faux_checks.settings import configure_environment

    check_outputs(report_dir=args.report_dir)
    try:
        operations = load_policy(args.policy).operations
    except FauxChecksError as exc:   # a policy that does not load: configuration, before anything (exit 3)
        raise ConfigurationError(f"{policy_name(args)}: {exc}; nothing was recorded") from None
    given = deadline_seconds(args.deadline, nothing="nothing was recorded")
    deadline = float(given if given is not None else operations.deadline_s)
    apply_client_settings(operations)
    uri = args.tracking_uri or default_tracking_uri()
    started = time.monotonic()
    armed = threading.current_thread() is threading.main_thread()
    if armed:  # the whole command: server start, flow, history
        previous = signal.signal(signal.SIGALRM, on_deadline(deadline))
        signal.setitimer(signal.ITIMER_REAL, deadline)
    stack = contextlib.ExitStack()
    try:
        _signing_key_or_configuration_error(args.signing_key)
        inputs = _gate_inputs(args)   # the data judged with the policy: no registry, no model, no Prefect (exit 3)
        check_reachable(uri)  # an MLflow server that does not answer: no Prefect server started at all
        if args.force and not args.version:
            raise FauxChecksError("--force re-decides the versions named by --version N; name at least one")
        versions = _versions_to_regate(args) if args.version else None
        policy_path = _flow_policy(args, stack)   # --positive-label: a copy of the policy with it set
        plan = _plan_gate(args, uri, versions, inputs)   # configuration checked, nothing recorded, no Prefect yet (exit 3)
        if versions is None and not plan.todo and not plan.regate:
            return _nothing_to_gate(args, plan)
        _say_findings(inputs)
        configure_environment()
        lifecycle.guard_temporary_server(say=error)
        lifecycle.record_prefect_sigterm()   # a SIGTERM during the flow ends the command with 143
        from faux_checks_flows.gate import PROGRESS, gate
        from faux_checks_flows.gate_deadline import WINDOW

        from .prefect_outage import is_outage, report_outage

        what = f"version(s) {', '.join(versions)}" if versions else "new versions"
        eprint(f"gating {what} of '{args.model_name}' ({_prefect_api()}; deadline {deadline:g} s)")
        start_temporary_server(deadline - (time.monotonic() - started))   # bounded, named on expiry (exit 2)
        gate = _tracked(gate, stack)
        PROGRESS.start(args.model_name, [str(v) for v in versions or plan.todo or []], [])   # nothing of an earlier run
        WINDOW.start(None)
        state, lost = _run_gate_flow(gate, args, policy_path=policy_path, versions=versions, plan=plan,
                                     deadline_s=max(1.0, deadline - (time.monotonic() - started)))
        if isinstance(lost, BaseException) and is_outage(lost):
            return report_outage(args.model_name, lost, as_json=wants_json(args), say=say, error=error)
        _raise_if_unreachable(state, uri, seconds=time.monotonic() - started)
        return _gate_result(args, plan, state, versions)
    finally:
        stack.close()
        if armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def _run_gate_flow(gate, args, *, policy_path, versions, plan, deadline_s: float):
    """Run the gate flow (library output on stderr): its final state, and what ended it when it did not complete
    (the exception when Prefect's API went away, an outage)."""
    from .output import library_output_to_stderr
    from .prefect_outage import is_outage

    state = None
    try:
        with library_output_to_stderr():
            state = gate(model_name=args.model_name, data_path=args.data, policy_path=policy_path,
                         tracking_uri=args.tracking_uri, alias=args.alias, report_root=args.report_dir,
                         versions=versions, deadline_s=deadline_s, trusted_types=args.trust_type or None,
                         regate=plan.regate or None, allow_rollback=args.allow_rollback,
                         signing_key=args.signing_key, sep=args.sep, thousands=args.thousands,
                         decimal=args.decimal, return_state=True)
        lost = None
        with contextlib.suppress(Exception):
            lost = None if state.is_completed() else state.result(raise_on_failure=False)
    except Exception as exc:   # the flow could not end in Prefect: its API went away
        if not is_outage(exc):
            raise
        lost = exc
    return state, lost


def _gate_result(args, plan, state, versions) -> int:
    """Say what the gate flow decided (JSON Lines with --json, else the history) and return the exit code."""
    outcomes = _flow_outcomes(state)
    if outcomes == [] and state.is_completed():   # the flow found nothing to gate: say so (stdout stays empty in --json)
        return _nothing_to_gate(args, plan)
    for row in plan.skipped:
        eprint(f"skipped v{row['version']}: {row['reason']}")
    if wants_json(args):
        from .gate_plan import skipped_objects
        from .output import emit_json, gate_error_object, gate_objects

        if outcomes is None:
            emit_json([gate_error_object(args.model_name, f"the gate flow ended {state.type} before deciding: "
                                                          f"{state.message}")])
            return EXIT_UNDECIDED
        emit_json(gate_objects(args.model_name, outcomes) + skipped_objects(args.model_name, plan))
        return _gate_exit_code(state, [o.get("decision") for o in outcomes])
    return print_history_and_code(args.model_name, args.tracking_uri, state, versions=versions)


def _tracked(flow, stack: contextlib.ExitStack):
    """``flow`` with its run recorded while it runs (:mod:`faux_checks_app.orphan_runs`, forgotten when ``stack``
    closes), after the runs a killed earlier command left ``Running`` are marked ``Crashed``."""
    from . import orphan_runs

    try:
        orphan_runs.mark_orphaned_flow_runs(say=error)
    except Exception as exc:  # noqa: BLE001 - the Prefect API answers the flow or names its outage there
        error(f"faux-checks: flow runs left by killed commands not checked: {type(exc).__name__}: {exc}")
    stack.callback(orphan_runs.forget)
    return flow.with_options(on_running=[orphan_runs.track])


def _flow_policy(args, stack: contextlib.ExitStack) -> str | None:
    """The policy path the gate flow reads: ``--policy``, or with ``--positive-label`` a copy of it with that key set
    (in a temporary folder closed by ``stack``; :func:`faux_checks_app.policy_file.policy_with_positive_label`)."""
    if getattr(args, "positive_label", None) is None:
        return args.policy
    import tempfile

    from .policy_file import policy_with_positive_label

    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="faux-policy-")))
    return str(policy_with_positive_label(args.policy, args.positive_label, folder))


def _signing_key_or_configuration_error(path: str | None) -> None:
    """A signing key (given or ``$FAUX_CHECKS_SIGNING_KEY``) that cannot be read is a configuration error (exit 3)."""
    from faux_checks.errors import InputError
    from faux_checks.report.evidence import signing_key_path

    try:
        signing_key_path(path)
    except InputError as exc:
        raise ConfigurationError(f"{exc}; nothing was recorded") from None


def _gate_inputs(args):
    """:func:`faux_checks_app.gate_plan.read_gate_inputs`; with ``--json`` a configuration error is also one JSON object."""
    from .gate_plan import read_gate_inputs

    return _json_configuration_error(args, read_gate_inputs, args)


def _say_findings(inputs) -> None:
    """What the data holds and needs (:func:`faux_checks.gate.preflight_data.finding_lines`), on stderr before the flow."""
    if inputs.findings is not None:
        from faux_checks.gate.preflight_data import finding_lines

        for line in finding_lines(inputs.findings, inputs.policy):
            eprint(line)


def _plan_gate(args, uri: str, versions: list[str] | None, inputs=None):
    """:func:`faux_checks_app.gate_plan.prepare_gate`; with ``--json`` a configuration error is also one JSON object."""
    from .gate_plan import prepare_gate

    return _json_configuration_error(args, prepare_gate, args, uri, versions, inputs)


def _json_configuration_error(args, step, *step_args):
    """``step(*step_args)``; with ``--json`` a configuration error it raises is also printed as one JSON object."""
    try:
        return step(*step_args)
    except ConfigurationError as exc:
        if wants_json(args):
            from .output import emit_json, gate_error_object

            obj = gate_error_object(args.model_name, str(exc))
            obj.update({"decision": None, "exit_code": EXIT_CONFIGURATION, "error": "configuration"})
            emit_json([obj])
        raise


def _nothing_to_gate(args, plan) -> int:
    """No version to gate: say so (stdout stays empty in --json but for skipped undecided versions); exit 0,
    or 2 when every registered version is recorded undecided (nothing can be deployed)."""
    from .gate_plan import skipped_objects

    if plan.all_undecided:
        message = (f"nothing to gate: all {len(plan.rows)} registered version(s) of '{args.model_name}' are recorded "
                   "undecided and none can be re-gated now (same policy and data, or their check ran); "
                   f"`faux-checks history {args.model_name}` lists them")
    else:
        message = _nothing_new(args.model_name, args.tracking_uri)
    for row in plan.skipped:
        eprint(f"skipped v{row['version']}: {row['reason']}")
    if wants_json(args):
        from .output import emit_json

        error(message)
        if plan.skipped:
            emit_json(skipped_objects(args.model_name, plan))
    else:
        say(message)
    return EXIT_UNDECIDED if plan.all_undecided else EXIT_PASSED


def _raise_if_unreachable(state, uri: str, seconds: float = 0.0) -> None:
    """A flow that ended because the registry did not answer: its error, without one more registry call
    (``seconds``: how long the command ran, named in the error)."""
    from faux_checks.errors import RegistryUnreachableError
    from faux_checks.registry.operations import is_unreachable, unreachable_error

    if state.is_completed():
        return
    try:
        exc = state.result(raise_on_failure=False)
    except Exception as error:  # noqa: BLE001 - the state's own error is what is inspected below
        exc = error
    if isinstance(exc, BaseException) and is_unreachable(exc):
        from faux_checks.registry.operations import NOTHING_RECORDED
        from faux_checks_flows.gate_deadline import WINDOW

        from .standing import gate_standing

        if not WINDOW.recorded:   # nothing this run wrote: the default sentence holds
            raise exc if isinstance(exc, RegistryUnreachableError) else unreachable_error(uri, seconds, exc)
        standing = gate_standing().rstrip(".")   # versions recorded before the registry went away stand
        if isinstance(exc, RegistryUnreachableError) and NOTHING_RECORDED in str(exc):
            raise RegistryUnreachableError(str(exc).replace(NOTHING_RECORDED, standing)) from exc
        raise unreachable_error(uri, seconds, exc, standing=standing)


def _versions_to_regate(args) -> list[str]:
    """The ``--version`` numbers, checked to exist; one already decided needs ``--force`` (re-decided under the current policy)."""
    from faux_checks.registry import GATE_TAG, RUNNING, Registry
    from faux_checks.registry.records import CHECKED_AT_TAG, DELTA_TAG, POLICY_SHA_TAG

    from faux_checks.errors import InputError

    try:
        rows = {r["version"]: r for r in Registry(args.tracking_uri).history(args.model_name)}
    except InputError as exc:   # no such registered model: configuration (exit 3), nothing recorded
        raise ConfigurationError(f"{exc}; nothing was recorded") from None
    versions = [str(v) for v in dict.fromkeys(args.version)]
    for v in versions:
        if v not in rows:
            raise ConfigurationError(f"registered model '{args.model_name}' has no version {v!r}; existing versions: "
                                     f"{list(rows)}; nothing was recorded")
        decided = rows[v].get(GATE_TAG)
        if decided not in (None, RUNNING) and not args.force:
            raise FauxChecksError(
                f"v{v} of '{args.model_name}' was already decided: {decided} at {rows[v].get(CHECKED_AT_TAG, '?')} "
                f"(δ={rows[v].get(DELTA_TAG) or '?'}, policy {(rows[v].get(POLICY_SHA_TAG) or '?')[:12]}); "
                "pass --force to re-decide it under the current policy (its tags and alias follow the new decision)")
    return versions


def _nothing_new(model_name: str, tracking_uri: str | None) -> str:
    """What a gate run that found no new version prints (instead of an empty table)."""
    from faux_checks.registry import GATE_TAG, Registry

    from .output import library_output_to_stderr

    with library_output_to_stderr():
        rows = Registry(tracking_uri).history(model_name)
    if not rows:
        return f"nothing to gate: '{model_name}' has no registered versions"
    last = rows[-1]
    return (f"nothing to gate: no new versions of '{model_name}'; all {len(rows)} registered version(s) already have "
            f"a decision (latest v{last.get('version')}: {last.get(GATE_TAG)}). "
            f"`faux-checks history {model_name}` lists them")


def _flow_outcomes(state) -> list[dict] | None:
    """The per-version outcome dicts a gate flow run returned (Completed or Failed), or None when it raised."""
    data = getattr(state, "data", None)  # a Failed state the flow returned: its list, in a ResultRecord
    data = getattr(data, "result", data)
    if not isinstance(data, list):
        try:
            data = state.result(raise_on_failure=False)
        except Exception:  # noqa: BLE001 - no readable result: None, the caller reports the state
            return None
    if isinstance(data, list) and all(isinstance(o, dict) for o in data):
        return data
    return None


def _gate_exit_code(state, decisions: list) -> int:
    """0 when the flow completed, else 1 for blocks only and 2 when anything is undecided."""
    if state.is_completed():
        return EXIT_PASSED
    return EXIT_UNDECIDED if (not decisions or "undecided" in decisions or None in decisions
                              or "running" in decisions) else EXIT_FAILED


def print_history_and_code(model_name: str, tracking_uri: str | None, state, versions: list[str] | None = None,
                            extra: dict[str, dict[str, str]] | None = None) -> int:
    """Print the history table of ``versions`` (all when None) and the flow's state line; the command's exit code.

    ``extra``: more columns, ``{column: {version: text}}``. Returns 0 when the flow completed, 1 when it blocked
    versions, 2 when any version is undecided or the flow raised (:func:`_gate_exit_code`).
    """
    from faux_checks.registry import GATE_TAG, Registry

    rows = Registry(tracking_uri).history(model_name)
    if versions is not None:
        rows = [r for r in rows if str(r.get("version")) in set(versions)]
    from .history import print_table

    print_table(rows, extra)
    decisions = [r.get(GATE_TAG) for r in rows]
    say(f"flow state: {state.type.value if hasattr(state.type, 'value') else state.type} ({state.message})")
    if not state.is_completed():
        decided = _flow_decisions(state)
        if decided is None:  # the flow raised: it decided nothing
            return EXIT_UNDECIDED
        decisions = decided or decisions  # this run's own outcomes (a failed promotion is 'undecided' there)
    return _gate_exit_code(state, decisions)


def _flow_decisions(state) -> list | None:
    """Decisions of the versions a gate flow run returned, or None when it raised instead."""
    outcomes = _flow_outcomes(state)
    return None if outcomes is None else [o.get("decision") for o in outcomes]


def cmd_audit(args) -> int:
    """Run the Prefect drift-audit flow once on the deployed version of a registered model."""
    from faux_checks.settings import configure_environment

    check_outputs(report_dir=args.report_dir)
    _plan_audit(args)     # configuration checked, nothing recorded, no Prefect yet (exit 3)
    configure_environment()
    lifecycle.guard_temporary_server(say=error)
    lifecycle.record_prefect_sigterm()
    from faux_checks_flows.audit import audit

    eprint(f"auditing the '{args.alias}' version of '{args.model_name}' on {args.data} "
           f"({_prefect_api()})")
    start_temporary_server()
    from .output import library_output_to_stderr

    try:
        with library_output_to_stderr(), contextlib.ExitStack() as stack:
            state = _tracked(audit, stack)(model_name=args.model_name, data_path=args.data, reference_path=args.reference,
                          policy_path=args.policy, tracking_uri=args.tracking_uri, alias=args.alias,
                          report_root=args.report_dir, retrain_aux=args.retrain_aux, signing_key=args.signing_key,
                          sep=args.sep, thousands=args.thousands, positive_label=args.positive_label,
                          decimal=args.decimal, return_state=True)
    except Exception as exc:   # Prefect's API down or unavailable (503): named, with what the audit left (exit 2)
        from faux_checks_flows.common import is_prefect_unreachable

        if not is_prefect_unreachable(exc):
            raise
        from faux_checks.report._format import printable

        from .prefect_outage import api_url
        from .standing import audit_standing

        first = printable((str(exc).strip().splitlines() or [""])[0][:240])
        raise FauxChecksError(f"Prefect API unreachable{api_url()} ({type(exc).__name__}: {first}). "
                              f"{audit_standing()}") from None
    try:
        summary = state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - the state carries no readable data: report the state only
        summary = None
    summary = summary if isinstance(summary, dict) else {}
    decision = summary.get("decision") or ("passed" if state.is_completed() else "undecided")
    if wants_json(args):
        from .output import audit_object, emit_json

        emit_json([audit_object(args.model_name, {**summary, "decision": decision}, str(state.message))])
    else:
        _print_audit(summary, decision, state)
    if state.is_completed() and decision == "passed":
        return EXIT_PASSED
    return EXIT_FAILED if decision == "failed" else EXIT_UNDECIDED


def _plan_audit(args) -> None:
    """:func:`faux_checks_app.audit_plan.prepare_audit_run`; with ``--json`` a configuration error is also one object."""
    from .audit_plan import prepare_audit_run

    try:
        prepare_audit_run(args, args.tracking_uri)
    except ConfigurationError as exc:
        if wants_json(args):
            from .output import audit_object, emit_json

            obj = audit_object(args.model_name, {"reasons": [str(exc)]}, str(exc))
            obj.update({"decision": None, "exit_code": EXIT_CONFIGURATION, "error": "configuration"})
            emit_json([obj])
        raise


def _print_audit(summary: dict, decision: str, state) -> None:
    say(f"audit {decision}: {(summary.get('reasons') or [state.message])[0]}")
    for reason in (summary.get("reasons") or [])[1:]:
        say(f"  - {reason}")
    if summary.get("superseded"):
        say(f"not recorded on the version: {summary['superseded']}")
    if summary.get("report_dir"):
        say(f"report: {Path(summary['report_dir']) / 'report.html'}")
