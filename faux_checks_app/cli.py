"""Command line: ``faux-checks check | register | gate | demo | history | audit | report | score-large | spec``.

Exit codes (docs/architecture.md, contracts): 0 passed, 1 failed the policy (deployment blocked),
2 could not decide (bad input, auxiliary model too weak, any error), 3 configuration error of
``gate``, ``audit`` or ``check`` (policy, data columns, spec columns or width, or model name do not
fit; found before anything was recorded or written). A gate that cannot decide never exits 0. Commands that decide nothing (spec, register, history, report) exit 2 on an error,
printed as ``faux-checks COMMAND: error: ...`` without "could not decide".

Output: the result goes to stdout; progress, library logs (Prefect, Great Expectations, MLflow) and
errors go to stderr. ``--json`` prints one JSON object per model version instead (keys:
:mod:`faux_checks_app.output`), ``--quiet`` leaves out progress and library logs below warnings.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from faux_checks.errors import EXIT_CONFIGURATION, ConfigurationError, FauxChecksError
from faux_checks.gate.decision import exit_code_for

from . import lifecycle
from .lifecycle import Stop
from .lifecycle import on_deadline as _on_deadline
from .lifecycle import on_signal as _on_signal
from .lifecycle import started_services as _started_services

EXIT_PASSED, EXIT_FAILED, EXIT_UNDECIDED = (exit_code_for(d) for d in ("passed", "failed", "undecided"))


_QUIET = False


def _say(text) -> None:
    """One line of the result on stdout; control characters from data (a column name, a group, a report's
    field) written as escapes (:func:`faux_checks_app.output.terminal_text`), line breaks included."""
    from .output import terminal_text

    print(terminal_text(text))


def _eprint(*args) -> None:
    """Progress on stderr (left out with ``--quiet``); control characters escaped, our line breaks kept."""
    if not _QUIET:
        _error(*args)


def _error(*args) -> None:
    """An error on stderr, always; control characters escaped, our line breaks kept."""
    from .output import terminal_text

    print(*(terminal_text(a, keep_newlines=True) for a in args), file=sys.stderr, flush=True)


def _json(args) -> bool:
    return bool(getattr(args, "json", False))


def _policy(args):
    from faux_checks.gate.policy import load_policy

    protected = getattr(args, "protected", None)
    if protected is not None and args.policy is not None:
        given = load_policy(args.policy)
        if given.reports_per_attribute:
            declared = given.attributes
            raise FauxChecksError(
                f"--protected {protected}: the policy {args.policy} declares several protected attributes "
                f"({', '.join(a.column for a in declared)}); `check` and `gate` check every one of them without "
                "--protected; for one attribute give a policy with protected = \"COLUMN\"")
    if protected is None and hasattr(args, "protected") and args.policy is None:
        raise FauxChecksError("--protected is required with the shipped policy (or give --policy with protected = "
                              "\"COLUMN\" or [[attributes]])")
    overrides = {"protected": protected, "label": getattr(args, "label", None),
                 "positive_label": getattr(args, "positive_label", None)}
    if getattr(args, "output_form", None):
        overrides["target_output"] = args.output_form
    policy = load_policy(args.policy, **overrides)
    if args.policy is None and getattr(args, "label", None) is None and policy.label is not None:
        # the shipped default names the demo's label column; a user's data need not have it
        policy = policy.with_overrides(label=None)
    return policy


def cmd_check(args) -> int:
    """One model file + one data file, no registry; any error exits 2 (with an undecided report if asked for)."""
    report_dir = Path(args.report_dir) if args.report_dir else None
    if report_dir is not None and (report_dir / "report.json").exists():
        raise FauxChecksError(f"{report_dir} already holds a report; choose a new --report-dir (nothing is overwritten)")
    if args.scores_out and Path(args.scores_out).exists():
        raise FauxChecksError(f"{args.scores_out} exists already; choose another --scores-out (nothing is overwritten)")
    _check_outputs(scores_out=args.scores_out, report_dir=report_dir)
    from faux_checks.report.evidence import signing_key_path

    if args.signing_key and report_dir is None:
        raise FauxChecksError("--signing-key signs the evidence pack written beside the report: add --report-dir DIR")
    if report_dir is not None:
        signing_key_path(args.signing_key)     # a wrong key stops the check before it scores
    try:
        with _time_limit(_check_deadline(args), "check"):
            code = _check(args, report_dir)
            if report_dir is not None:
                from .evidence_cli import write_check_pack

                pack = write_check_pack(report_dir, args)
                if pack is not None:
                    _eprint(f"      evidence pack: {pack} (verify: faux-checks verify {pack})")
        return code
    except (Exception, Stop) as exc:  # fail closed, and say why in the report the user asked for
        if (report_dir is not None and not (report_dir / "report.json").exists()
                and not isinstance(exc, ConfigurationError)):   # a configuration error writes nothing (exit 3)
            _write_undecided_report(report_dir, args, exc)
        raise


def _check_deadline(args) -> float:
    """``check --deadline``, else the policy's ``[operations] deadline_s`` (the default's when the policy
    does not load: ``_check`` then reports why)."""
    from faux_checks.gate.policy import OperationsSettings, load_policy

    if args.deadline:
        return float(args.deadline)
    try:
        return float(load_policy(args.policy).operations.deadline_s)
    except Exception:  # noqa: BLE001 - an unreadable policy: the default deadline; the run reports the policy
        return float(OperationsSettings().deadline_s)


@contextlib.contextmanager
def _time_limit(seconds: float, what: str):
    """Raise :class:`Stop` (exit 2) in the main thread after ``seconds`` (SIGALRM); a no-op off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGALRM, _on_deadline(seconds, what))
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _check_outputs(*, scores_out=None, report_dir=None, out=None, work_dir=None) -> None:
    """Refuse output paths that cannot be written before anything is loaded or scored (InputError, exit 2)."""
    from faux_checks.inputs.io import check_output_path

    for path, option, folder in ((scores_out, "--scores-out", False), (out, "--out", False),
                                 (report_dir, "--report-dir", True), (work_dir, "--work-dir", True)):
        if path is not None:
            check_output_path(path, option=option, folder=folder)


def _write_undecided_report(report_dir: Path, args, exc: BaseException) -> None:
    """Best effort: an 'undecided' report.json/html naming the error (the exit code is 2 either way)."""
    from faux_checks.report.build import write_report

    given = {}
    try:                       # the page shows the policy it was given (issue 22, item 8), when it can be read
        policy = _policy(args)
        given = {"policy": policy.model_dump(mode="json"), "policy_sha256": policy.sha256()}
    except Exception:  # noqa: BLE001 - best effort: the page shows the policy when it reads
        pass
    try:
        write_report(report_dir, decision="undecided", reasons=[f"could not decide: {type(exc).__name__}: {exc}"],
                     check=None, model={"path": str(args.model)}, **given)
        _eprint(f"      undecided report: {report_dir / 'report.html'}")
    except Exception as report_exc:  # noqa: BLE001 - best effort: the undecided exit stands, the failure is said
        _eprint(f"faux-checks: the undecided report could not be written either: {report_exc}")


def _check(args, report_dir: Path | None) -> int:
    """``check``: every protected attribute of the policy (one for ``protected = "..."``), one decision.

    One path for one or several attributes (:func:`faux_checks.gate.attributes.check_attributes`); a
    ``protected = "..."`` policy prints, writes and reports its one check in the shape it always had
    (:attr:`Policy.reports_per_attribute`).
    """
    from faux_checks.gate.attributes import check_attributes
    from faux_checks.inputs.io import read_table, write_scores
    from faux_checks.inputs.models import load_model, model_sha256
    from faux_checks.inputs.tabular import FeatureSpec
    from faux_checks.report.build import write_report

    policy = _check_policy(args)
    from faux_checks.inputs.limits import set_model_limits

    set_model_limits(policy.operations)   # size, tree and probe limits on the model files (issue 25)
    names, sectioned = policy.attribute_names, policy.reports_per_attribute
    if args.aux_model and len(names) > 1:
        raise FauxChecksError(f"--aux-model gives one auxiliary model, but the policy checks {len(names)} protected "
                              f"attributes ({', '.join(names)}), each with its own; drop --aux-model")
    scores_out = _scores_paths(args.scores_out, names, per_attribute=sectioned)
    _eprint(f"[1/4] loading model {args.model}")
    model = load_model(args.model, allow_pickle=args.allow_pickle, trusted_types=args.trust_type or ())
    aux = load_model(args.aux_model, allow_pickle=args.allow_pickle) if args.aux_model else None
    spec = FeatureSpec.load(args.feature_spec) if args.feature_spec else None
    _eprint(f"[2/4] reading data {args.data}")
    frame = read_table(args.data, sep=getattr(args, "sep", None), thousands=getattr(args, "thousands", None))
    _check_configuration(args, policy, model, spec, frame)
    from .output import library_output_to_stderr

    if sectioned:
        _eprint(f"[3/4] fAux check of {len(names)} protected attributes ({', '.join(names)}) on {len(frame):,} rows, "
                "one auxiliary model each")
    else:
        _eprint(f"[3/4] fAux check on {len(frame):,} rows (auxiliary model {'given' if aux is not None else 'trained'})")
    t0 = time.perf_counter()
    with library_output_to_stderr():
        result = check_attributes(model, frame, policy=policy, feature_spec=spec,
                                  aux_models={names[0]: aux} if aux is not None else None,
                                  progress=sys.stderr.isatty() and not _QUIET,
                                  model_info={"model_path": str(args.model), "model_sha256": model_sha256(args.model)})
    _eprint(f"      done in {time.perf_counter() - t0:.1f} s")
    for section in result.sections:
        if section.attribute in scores_out:
            write_scores(scores_out[section.attribute], section.check)
            _eprint(f"      {section.attribute + ': ' if sectioned else ''}scores written to {scores_out[section.attribute]}")
    sections = {"rules": result.rules, "attributes": [s.to_dict() for s in result.sections],
                "policy": policy.model_dump(mode="json"), "policy_sha256": policy.sha256()} if sectioned else {}
    if report_dir is not None:
        paths = write_report(report_dir, decision=result.decision, reasons=result.reasons,
                             check=result.deciding.check.to_dict(), **sections,
                             model={"path": str(args.model), "sha256": model_sha256(args.model)})
        _eprint(f"[4/4] report: {paths['html']}")
    return _print_check(args, result if sectioned else result.deciding.check, report_dir, model_sha256(args.model),
                        [f"{s.attribute}: {s.check!r}" for s in result.sections] if sectioned else [])


def _policy_name(args) -> str:
    return f"the policy {args.policy}" if args.policy else "the shipped policy (no --policy given)"


def _check_policy(args):
    """``check``'s policy (:func:`_policy`); one that does not load is a configuration error (exit 3)."""
    try:
        return _policy(args)
    except ConfigurationError:
        raise
    except FauxChecksError as exc:
        raise ConfigurationError(f"{_policy_name(args)}: {exc}; nothing was written") from None


def _check_configuration(args, policy, model, spec, frame) -> None:
    """``check``'s inputs against each other before scoring (issue 22): the policy's columns, the spec's columns and
    the model's input width (:func:`faux_checks.gate.preflight.check_inputs_fit`, probed on the first 256 rows);
    a mismatch is a :class:`ConfigurationError` (exit 3, nothing written). Errors of the encoding itself (missing
    protected values, an empty column) are left to the check (undecided, exit 2, with its report)."""
    from faux_checks.gate.preflight import check_inputs_fit, check_policy_columns

    check_policy_columns(frame, policy, data_name=str(args.data), policy_name=_policy_name(args))
    check_inputs_fit(model, frame.head(256), policy, spec, suffix="; nothing was written",
                     encoding_is_configuration=False)


def _scores_paths(scores_out: str | None, names: list[str], *, per_attribute: bool) -> dict[str, Path]:
    """Where ``--scores-out`` writes each attribute's scores: the path itself for a ``protected = "..."`` policy,
    else one file per attribute beside it (``scores.sex.csv``, :func:`~faux_checks.gate.attributes.attribute_key`).

    Raises
    ------
    FauxChecksError
        A path exists already (nothing is overwritten).
    """
    from faux_checks.gate.attributes import attribute_key

    if not scores_out:
        return {}
    base = Path(scores_out)
    paths = ({n: base.with_name(f"{base.stem}.{attribute_key(n)}{base.suffix}") for n in names} if per_attribute
             else {names[0]: base})
    taken = [str(p) for p in paths.values() if p.exists()]
    if taken:
        raise FauxChecksError(f"{', '.join(taken)} exist already; choose another --scores-out (nothing is overwritten)")
    return paths


def _print_check(args, result, report_dir: Path | None, sha256: str, sections: list[str] = ()) -> int:
    """A check's result on stdout: one ``--json`` object, or its summary, one line per attribute section and its reasons."""
    if _json(args):
        from .output import check_object, emit_json

        emit_json([check_object(result.to_dict(), model_path=str(args.model), model_sha256=sha256,
                                report_dir=str(report_dir) if report_dir is not None else None)])
        return result.exit_code
    _say(repr(result))
    for line in sections:
        _say(f"  {line}")
    for reason in result.reasons:
        _say(f"  - {reason}")
    return result.exit_code


def _prefect_api() -> str:
    """Which Prefect API a flow command talks to, for its first line (issue 25, item 8: "(Prefect ephemeral
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


def cmd_register(args) -> int:
    """Register a model file (and its feature spec) as a new version; checked to load safely first."""
    from faux_checks.inputs.models import load_model, model_format
    from faux_checks.registry import Registry

    fmt = model_format(args.model)
    # UnsafeModelError for a pickle, or a skops file with types not reviewed: the gate would refuse it, so it is not registered
    model = load_model(args.model, trusted_types=args.trust_type or ())
    if args.data:
        _check_accepts(model, args)
    registry = Registry(args.tracking_uri)
    tags = {"registered_with": "faux-checks register", "model_format": fmt}
    if args.data:
        tags["registered_checked_on"] = Path(args.data).resolve().as_uri()
    from .output import library_output_to_stderr

    with library_output_to_stderr():   # MLflow's run links are not the version number stdout carries
        version = registry.register_version(args.model_name, args.model, args.feature_spec,
                                            description=args.description or "", tags=tags)
    _eprint(f"registered {args.model} as version {version} of '{args.model_name}' in {registry.tracking_uri}; "
            f"`faux-checks gate {args.model_name} --data ...` gates it")
    _say(version)
    return EXIT_PASSED


def _check_accepts(model, args) -> None:
    """Raise InputError unless the model accepts the rows of ``--data`` encoded by the feature spec."""
    from faux_checks.gate.policy import load_policy
    from faux_checks.gate.rows import check_model_accepts, prepare_audit
    from faux_checks.inputs.io import read_table
    from faux_checks.inputs.tabular import FeatureSpec
    from faux_checks.method._batching import as_tensor

    overrides = {"protected": args.protected} if args.protected else {}
    policy = load_policy(args.policy, **overrides)
    if args.policy is None and policy.label is not None:
        policy = policy.with_overrides(label=None)
    rows = prepare_audit(read_table(args.data), policy=policy,
                         feature_spec=FeatureSpec.load(args.feature_spec) if args.feature_spec else None)
    check_model_accepts(model, as_tensor(rows.X[:256]), rows.feature_spec)
    _eprint(f"the model accepts {args.data}: {rows.X.shape[1]} encoded features")


def cmd_gate(args) -> int:
    """Run the Prefect gate flow on a registered model, within the deadline (policy ``[operations]`` or --deadline)."""
    from faux_checks.gate.policy import load_policy
    from faux_checks.registry import default_tracking_uri
    from faux_checks.registry.operations import apply_client_settings, check_reachable
    from faux_checks.settings import configure_environment

    _check_outputs(report_dir=args.report_dir)
    try:
        operations = load_policy(args.policy).operations
    except FauxChecksError as exc:   # a policy that does not load: configuration, before anything (exit 3)
        raise ConfigurationError(f"{_policy_name(args)}: {exc}; nothing was recorded") from None
    deadline = float(args.deadline or operations.deadline_s)
    apply_client_settings(operations)
    uri = args.tracking_uri or default_tracking_uri()
    started = time.monotonic()
    armed = threading.current_thread() is threading.main_thread()
    if armed:  # the whole command: server start, flow, history
        previous = signal.signal(signal.SIGALRM, _on_deadline(deadline))
        signal.setitimer(signal.ITIMER_REAL, deadline)
    stack = contextlib.ExitStack()
    try:
        check_reachable(uri)  # an MLflow server that does not answer: no Prefect server started at all
        if args.force and not args.version:
            raise FauxChecksError("--force re-decides the versions named by --version N; name at least one")
        versions = _versions_to_regate(args) if args.version else None
        _signing_key_or_configuration_error(args.signing_key)
        policy_path = _flow_policy(args, stack)   # --positive-label: a copy of the policy with it set
        plan = _plan_gate(args, uri, versions)   # configuration checked, nothing recorded, no Prefect yet (exit 3)
        if versions is None and not plan.todo and not plan.regate:
            return _nothing_to_gate(args, plan)
        configure_environment()
        lifecycle.guard_temporary_server(say=_error)
        from flows.gate import PROGRESS, gate

        from .output import library_output_to_stderr

        what = f"version(s) {', '.join(versions)}" if versions else "new versions"
        _eprint(f"gating {what} of '{args.model_name}' ({_prefect_api()}; "
                f"deadline {deadline:g} s)")
        from .prefect_outage import is_outage, report_outage

        PROGRESS.start(args.model_name, [str(v) for v in versions or plan.todo or []], [])   # nothing of an earlier run
        try:
            with library_output_to_stderr():
                state = gate(model_name=args.model_name, data_path=args.data, policy_path=policy_path,
                             tracking_uri=args.tracking_uri, alias=args.alias, report_root=args.report_dir,
                             versions=versions, deadline_s=deadline, trusted_types=args.trust_type or None,
                             regate=plan.regate or None, allow_rollback=args.allow_rollback,
                             signing_key=args.signing_key, sep=args.sep, thousands=args.thousands,
                             return_state=True)
            lost = None
            with contextlib.suppress(Exception):
                lost = None if state.is_completed() else state.result(raise_on_failure=False)
        except Exception as exc:   # the flow could not end in Prefect: its API went away (issue 25, fault 2)
            if not is_outage(exc):
                raise
            lost = exc
        if isinstance(lost, BaseException) and is_outage(lost):
            return report_outage(args.model_name, lost, as_json=_json(args), say=_say, error=_error)
        _raise_if_unreachable(state, uri, seconds=time.monotonic() - started)
        outcomes = _flow_outcomes(state)
        if outcomes == [] and state.is_completed():   # the flow found nothing to gate: say so (stdout stays empty in --json)
            return _nothing_to_gate(args, plan)
        for row in plan.skipped:
            _eprint(f"skipped v{row['version']}: {row['reason']}")
        if _json(args):
            from .gate_plan import skipped_objects
            from .output import emit_json, gate_error_object, gate_objects

            if outcomes is None:
                emit_json([gate_error_object(args.model_name, f"the gate flow ended {state.type} before deciding: "
                                                              f"{state.message}")])
                return EXIT_UNDECIDED
            emit_json(gate_objects(args.model_name, outcomes) + skipped_objects(args.model_name, plan))
            return _gate_exit_code(state, [o.get("decision") for o in outcomes])
        return _print_history_and_code(args.model_name, args.tracking_uri, state, versions=versions)
    finally:
        stack.close()
        if armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


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


def _plan_gate(args, uri: str, versions: list[str] | None):
    """:func:`faux_checks_app.gate_plan.prepare_gate`; with ``--json`` a configuration error is also one JSON object."""
    from faux_checks.errors import ConfigurationError

    from .gate_plan import prepare_gate

    try:
        return prepare_gate(args, uri, versions)
    except ConfigurationError as exc:
        if _json(args):
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
        _eprint(f"skipped v{row['version']}: {row['reason']}")
    if _json(args):
        from .output import emit_json

        _error(message)
        if plan.skipped:
            emit_json(skipped_objects(args.model_name, plan))
    else:
        _say(message)
    return EXIT_UNDECIDED if plan.all_undecided else EXIT_PASSED


def _raise_if_unreachable(state, uri: str, seconds: float = 0.0) -> None:
    """A flow that ended because the registry did not answer: its error, without one more registry call
    (``seconds``: how long the command ran, named in the error; "for 0.0 s" after minutes was issue 25's item 8)."""
    from faux_checks.errors import RegistryUnreachableError
    from faux_checks.registry.operations import is_unreachable, unreachable_error

    if state.is_completed():
        return
    try:
        exc = state.result(raise_on_failure=False)
    except Exception as error:  # noqa: BLE001 - the state's own error is what is inspected below
        exc = error
    if isinstance(exc, BaseException) and is_unreachable(exc):
        raise exc if isinstance(exc, RegistryUnreachableError) else unreachable_error(uri, seconds, exc)


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


def _print_history_and_code(model_name: str, tracking_uri: str | None, state, versions: list[str] | None = None,
                            extra: dict[str, dict[str, str]] | None = None) -> int:
    from faux_checks.registry import GATE_TAG, Registry

    rows = Registry(tracking_uri).history(model_name)
    if versions is not None:
        rows = [r for r in rows if str(r.get("version")) in set(versions)]
    from .history import print_table

    print_table(rows, extra)
    decisions = [r.get(GATE_TAG) for r in rows]
    _say(f"flow state: {state.type.value if hasattr(state.type, 'value') else state.type} ({state.message})")
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


def cmd_history(args) -> int:
    from faux_checks.registry import Registry

    from .output import library_output_to_stderr

    registry = Registry(args.tracking_uri)
    with library_output_to_stderr():
        rows, audits = registry.history(args.model_name), registry.audit_runs(args.model_name)
    if _json(args):
        from .output import emit_json, history_objects

        emit_json(history_objects(args.model_name, rows, audits))
        return EXIT_PASSED
    from .history import decision_columns, print_table

    print_table(rows, decision_columns(rows))
    if audits:
        print()
        _say(f"drift audits ({len(audits)}):")
        for a in audits:
            m = a.get("metrics") or {}
            ff = [m.get("flagged_fraction_reference"), m.get("flagged_fraction_current")]
            flagged = " -> ".join("n/a" if v is None else f"{v:.1%}" for v in ff)
            _say(f"  {a.get('started_at')}  v{a.get('version')}  {a.get('decision'):<9}  flagged {flagged}  "
                  f"{a.get('reason', '')[:140]}")
    return EXIT_PASSED


def cmd_audit(args) -> int:
    """Run the Prefect drift-audit flow once on the deployed version of a registered model."""
    from faux_checks.settings import configure_environment

    _check_outputs(report_dir=args.report_dir)
    _plan_audit(args)     # configuration checked, nothing recorded, no Prefect yet (exit 3)
    configure_environment()
    lifecycle.guard_temporary_server(say=_error)
    from flows.audit import audit

    _eprint(f"auditing the '{args.alias}' version of '{args.model_name}' on {args.data} "
            f"({_prefect_api()})")
    from .output import library_output_to_stderr

    with library_output_to_stderr():
        state = audit(model_name=args.model_name, data_path=args.data, reference_path=args.reference,
                      policy_path=args.policy, tracking_uri=args.tracking_uri, alias=args.alias,
                      report_root=args.report_dir, retrain_aux=args.retrain_aux, signing_key=args.signing_key,
                      sep=args.sep, thousands=args.thousands, positive_label=args.positive_label,
                      return_state=True)
    try:
        summary = state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - the state carries no readable data: report the state only
        summary = None
    summary = summary if isinstance(summary, dict) else {}
    decision = summary.get("decision") or ("passed" if state.is_completed() else "undecided")
    if _json(args):
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
        if _json(args):
            from .output import audit_object, emit_json

            obj = audit_object(args.model_name, {"reasons": [str(exc)]}, str(exc))
            obj.update({"decision": None, "exit_code": EXIT_CONFIGURATION, "error": "configuration"})
            emit_json([obj])
        raise


def _print_audit(summary: dict, decision: str, state) -> None:
    _say(f"audit {decision}: {(summary.get('reasons') or [state.message])[0]}")
    for reason in (summary.get("reasons") or [])[1:]:
        _say(f"  - {reason}")
    if summary.get("report_dir"):
        _say(f"report: {Path(summary['report_dir']) / 'report.html'}")


def cmd_report(args) -> int:
    """Validate a stored report.json against its schema and (re)render its self-contained HTML."""
    from faux_checks.report.html import render_html
    from faux_checks.report.schema import load_report

    source = Path(args.path)
    report = load_report(source)
    folder = source if source.is_dir() else source.parent
    out = Path(args.out) if args.out else folder / "report.html"
    if args.out and out.exists():
        raise FauxChecksError(f"{out} exists already; choose another --out (nothing is overwritten)")
    if not out.exists():
        from faux_checks._files import write_whole

        write_whole(out, render_html(report), replace=False)   # whole or absent
        _eprint(f"rendered {out}")
    model = report.get("model") or {}
    _say(f"{report['kind']} report of {model.get('name', '?')} v{model.get('version', '?')} "
          f"({report['created_at']}, schema {report['schema_version']}): {report['decision']}")
    _say(f"  rule: {report['rule']}")
    for r in report.get("rules") or []:
        if r.get("status") != "ok":
            _say(f"  - {r['status']}: {r['detail']}")
    _say(f"html: {out}")
    return int(report["exit_code"])


def cmd_demo(args) -> int:
    """Train and register Adult income classifiers, then gate them with the default policy."""
    from faux_checks.settings import configure_environment, default_home

    configure_environment()
    lifecycle.guard_temporary_server(say=_error)
    from .demo import build_demo_versions, definitional_truth
    from faux_checks.gate.policy import load_policy, policy_path
    from faux_checks.registry import Registry

    workdir = Path(args.workdir) if args.workdir else default_home() / "demo" / time.strftime("%Y%m%dT%H%M%S")
    if workdir.exists() and any(workdir.iterdir()):
        raise FauxChecksError(f"{workdir} is not empty; choose a new --workdir (nothing is overwritten)")
    workdir.mkdir(parents=True, exist_ok=True)
    _eprint(f"[1/3] training demo income classifiers on UCI Adult in {workdir}")
    versions = build_demo_versions(workdir, seed=args.seed)
    registry = Registry(args.tracking_uri)
    model_name = args.model_name
    _eprint(f"[2/3] registering {len(versions)} versions of '{model_name}' in {registry.tracking_uri}")
    registered = []
    for v in versions:
        number = registry.register_version(model_name, v.model_path, v.spec_path, description=v.description,
                                           tags={"demo_recipe": v.name})
        registered.append(number)
        _eprint(f"      v{number}: {v.name}: {v.description}")
    _eprint("[3/3] running the fairness gate flow (Prefect ephemeral API)")
    from flows.gate import gate

    policy_file = args.policy or str(policy_path("adult"))
    from .output import library_output_to_stderr

    with library_output_to_stderr():
        state = gate(model_name=model_name, data_path=str(versions[0].audit_path), policy_path=policy_file,
                     tracking_uri=args.tracking_uri, alias="deployable", versions=registered,
                     report_root=str(workdir / "reports"), return_state=True)
    delta = load_policy(policy_file).faux.delta
    truth = {}
    for number, v in zip(registered, versions, strict=True):
        t = definitional_truth(v, delta=delta)
        truth[str(number)] = f"{t['share']:.1%} (married {t['share_married']:.0%})"
    print()
    code = _print_history_and_code(model_name, args.tracking_uri, state, versions=registered,
                                   extra={f"truth Δŷ>{delta:g}": truth})
    print()
    for number, v in zip(registered, versions, strict=True):
        _say(f"v{number}: {v.description}")
    print()
    _say(f"policy: {policy_file}")
    _say(f"reports: {workdir / 'reports'}")
    print(f"'flagged': share of the audit rows whose estimated move of P(>50K) exceeds δ = {delta:g} if only their sex "
          "changed. 'truth': the share that moves by more than δ when sex flips and relationship follows it "
          "(Husband <-> Wife), everything else fixed (exact for married people, a lower bound for the rest).")
    print("'!' marks a baseline over its limit. Exit code of the demo: 0 when every version got a "
          "decision (passed or failed), 2 when any is undecided; `faux-checks gate` exits 1 on a block.")
    return EXIT_UNDECIDED if code == EXIT_UNDECIDED else EXIT_PASSED


def cmd_score_large(args) -> int:
    """fAux scores of a large Parquet/CSV file in chunks, sharded on Dask workers (or in this process)."""
    from faux_checks.inputs.models import load_model, model_sha256
    from faux_checks.inputs.tabular import FeatureSpec

    if Path(args.out).exists():
        raise FauxChecksError(f"{args.out} exists already; choose another --out (nothing is overwritten)")
    _check_outputs(out=args.out, work_dir=args.work_dir)
    policy = _policy(args)
    several = policy.reports_per_attribute    # [[attributes]]: one scores file per attribute beside --out
    if several and args.aux_model:
        raise FauxChecksError(f"--aux-model gives one auxiliary model, but the policy checks "
                              f"{', '.join(policy.attribute_names)}, each with its own; drop --aux-model")
    scale = policy.scale
    workers = args.workers if args.workers is not None else scale.workers
    scheduler = args.scheduler or scale.scheduler_address
    chunk_rows = args.chunk_rows or scale.chunk_rows
    t0 = time.perf_counter()
    if workers == 0 and not scheduler:
        from faux_checks.gate.stream.attributes import score_stream_attributes
        from faux_checks.gate.stream.run import score_stream

        _eprint(f"scoring {args.data} in chunks of {chunk_rows:,} rows in this process")
        aux = load_model(args.aux_model, allow_pickle=args.allow_pickle) if args.aux_model else None
        summary = (score_stream_attributes if several else score_stream)(
            load_model(args.model, allow_pickle=args.allow_pickle, trusted_types=args.trust_type or ()), args.data,
            policy=policy, out_path=args.out,
            feature_spec=FeatureSpec.load(args.feature_spec) if args.feature_spec else None,
            **({} if several else {"aux_model": aux}),
            chunk_rows=chunk_rows, progress=sys.stderr.isatty(), sep=args.sep, thousands=args.thousands,
            model_info={"model_path": str(args.model), "model_sha256": model_sha256(args.model)})
    else:
        from faux_checks.inputs.io import sniff_sep
        from faux_checks.settings import configure_environment

        if args.sep is not None and sniff_sep(args.data, args.sep) != sniff_sep(args.data):
            raise FauxChecksError(f"--sep {args.sep!r}: the sharded scorer reads the delimiter it sniffs from "
                                  f"{args.data} ({sniff_sep(args.data)!r}); score in this process (--workers 0) to "
                                  "force another, or convert the file to Parquet")
        if args.thousands is not None:
            raise FauxChecksError(f"--thousands {args.thousands!r}: the sharded scorer reads numbers without a thousands "
                                  "mark; score in this process (--workers 0) to read them with it, or write the "
                                  "numbers plainly (1234.5)")
        configure_environment()
        lifecycle.guard_temporary_server(say=_error)
        from flows.score_large import run_score_sharded

        where = f"Dask scheduler {scheduler}" if scheduler else f"a local Dask cluster of {workers or 'one per core'} workers"
        _eprint(f"scoring {args.data} in chunks of {chunk_rows:,} rows on {where} (Prefect flow; first start ~10-20 s)")
        summary = run_score_sharded(args.model, args.data, args.out, policy=policy, feature_spec_path=args.feature_spec,
                                    aux_model_path=args.aux_model, workers=workers, scheduler_address=scheduler,
                                    chunk_rows=chunk_rows, work_dir=args.work_dir, allow_pickle=args.allow_pickle,
                                    trusted_types=args.trust_type or ())
    _eprint(f"      done in {time.perf_counter() - t0:.1f} s; scores written to {summary.out_path}")
    _say(repr(summary))
    for section in getattr(summary, "sections", ()):
        _say(f"  {section.attribute}: {section.summary!r}")
    for reason in summary.reasons:
        _say(f"  - {reason}")
    for note in summary.notes:
        _say(f"  note: {note}")
    return summary.exit_code


def _sep(p) -> None:
    p.add_argument("--sep", help="CSV delimiter, e.g. ';' or tab (default: sniffed from the file's head among , ; tab |)")
    p.add_argument("--thousands", help="the thousands mark of the CSV's numbers, e.g. ',' to read 1,234.5 as 1234.5 "
                   "(or 'space'); quoted where it is also the delimiter (default: none, such a column is refused)")


def _data_format(p) -> None:
    """``--sep`` and ``--positive-label`` (issue 22, item 7)."""
    _sep(p)
    p.add_argument("--positive-label", help="the label value meaning the positive class, for text labels such as "
                   "yes/no; takes precedence over the policy key positive_label; text labels without either are "
                   "refused")


def _names(values: list[str] | None) -> list[str]:
    """Column names from repeated and/or comma-separated options (``--categorical a,b --categorical c``)."""
    return [n.strip() for v in values or [] for n in v.split(",") if n.strip()]


def _min_frequency(text: str) -> int | float:
    """``--min-frequency``: a row count (integer >= 0) or a share of rows (0 < x < 1)."""
    try:
        value = float(text) if any(ch in text for ch in ".eE") else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a row count nor a share of rows") from None
    if value < 0 or (isinstance(value, float) and value >= 1):
        raise argparse.ArgumentTypeError(f"{text!r}: give a row count (integer >= 0) or a share in (0, 1)")
    return value


def cmd_spec(args) -> int:
    """Fit a FeatureSpec on a data file and save it as JSON (imports nothing from Prefect, MLflow or GX)."""
    from faux_checks.inputs.io import read_table
    from faux_checks.inputs.tabular import FeatureSpec

    out = Path(args.out)
    if out.exists():
        raise FauxChecksError(f"{out} exists already; choose another --out (nothing is overwritten)")
    frame = read_table(args.data, sep=getattr(args, "sep", None), thousands=getattr(args, "thousands", None))
    exclude, categorical = _names(args.exclude), _names(args.categorical)
    present = [str(c) for c in frame.columns]
    unknown = [c for c in exclude + categorical + _names(args.columns) if c not in present]
    if unknown:
        raise FauxChecksError(f"column(s) {unknown} are not in {args.data}; columns present: {present}")
    columns = _names(args.columns) or [c for c in present if c not in exclude]
    overlap = sorted(set(categorical) & set(exclude))
    if overlap:
        raise FauxChecksError(f"column(s) {overlap} are both --categorical and --exclude; choose one")
    spec = FeatureSpec.fit(frame, columns, categorical=categorical, min_frequency=args.min_frequency,
                           name=args.name or out.stem)
    spec.save(out)
    n_cat = sum(c.kind == "categorical" for c in spec.columns)
    _say(f"feature spec '{spec.name}': {len(spec.columns)} source columns ({len(spec.columns) - n_cat} numeric, "
          f"{n_cat} categorical) -> {spec.n_features} features, fitted on {len(frame):,} rows of {args.data}")
    for enc in spec.columns:
        detail = (f"mean {enc.mean:.4g}, std {enc.std:.4g}" if enc.kind == "numeric"
                  else f"{len(enc.levels)} levels: {', '.join(enc.levels[:6])}{', ...' if len(enc.levels) > 6 else ''}")
        _say(f"  {enc.name}: {enc.kind} ({detail})")
    left_out = [c for c in present if c not in columns]
    _say(f"  not inputs: {', '.join(left_out) if left_out else 'none'}")
    _say(f"written: {out}")
    return EXIT_PASSED


def build_parser() -> argparse.ArgumentParser:
    from faux_checks import __version__

    from .evidence_cli import add_parsers as add_evidence_parsers
    from .evidence_cli import signing_key_option

    parser = argparse.ArgumentParser(prog="faux-checks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"faux-checks {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument("-q", "--quiet", action="store_true",
                       help="print the result only: no progress, no library log lines below warnings")
    machine = argparse.ArgumentParser(add_help=False, parents=[quiet])
    machine.add_argument("--json", action="store_true",
                         help="print one JSON object per model version on stdout (JSON Lines) and nothing else there")
    parents = {"parents": [quiet]}
    with_json = {"parents": [machine]}

    p = sub.add_parser("check", help="check one model file on one data file (no registry)", **with_json)
    p.add_argument("--model", required=True, help="model file: TorchScript / torch.export, or forward-only (extra "
                   "'blackbox'): ONNX, XGBoost JSON/UBJ, LightGBM text, scikit-learn .skops")
    p.add_argument("--data", required=True, help="CSV or Parquet audit data")
    p.add_argument("--protected", help="protected attribute column (required unless --policy names the protected "
                   "attribute or declares several with [[attributes]])")
    p.add_argument("--label", help="label column (excluded from features; group metrics)")
    _data_format(p)
    p.add_argument("--policy", help="policy TOML (default: the shipped policy)")
    p.add_argument("--aux-model", help="TorchScript auxiliary model (raw outputs) instead of training one")
    p.add_argument("--feature-spec", help="FeatureSpec JSON; without it the numeric columns are used as they are")
    p.add_argument("--scores-out", help="CSV with one row per input row: lic_score, flagged, status (several "
                   "protected attributes: one file each, NAME.<attribute>.csv)")
    p.add_argument("--report-dir", help="folder for report.json and report.html")
    p.add_argument("--output-form", choices=["auto", "logit", "probability", "softmax", "logits"],
                   help="how to read the target's output (default: the policy's)")
    p.add_argument("--allow-pickle", action="store_true",
                   help="DANGEROUS: load pickled models (runs code from the file); only for files you trust")
    _trust_type(p)
    _device_option(p)
    p.add_argument("--deadline", type=float, metavar="SECONDS",
                   help="stop the check after this many seconds and exit 2 (undecided) "
                        "(default: the policy's [operations] deadline_s, 600)")
    signing_key_option(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("gate", help="gate every new version of a registered model (Prefect flow)", **with_json)
    p.add_argument("model_name")
    p.add_argument("--data", required=True, help="CSV or Parquet audit data")
    _data_format(p)
    p.add_argument("--policy", help="policy TOML (default: the shipped policy)")
    p.add_argument("--tracking-uri", help="MLflow URI (default: $MLFLOW_TRACKING_URI or the embedded sqlite file)")
    p.add_argument("--alias", default="deployable", help="alias moved to versions that pass")
    p.add_argument("--report-dir", help="root folder for per-version reports")
    p.add_argument("--deadline", type=float, metavar="SECONDS",
                   help="stop the whole gate after this many seconds, exit 2, record nothing unfinished "
                        "(default: the policy's [operations] deadline_s, 600)")
    p.add_argument("--version", action="append", metavar="N",
                   help="gate this version (repeatable) instead of the new ones; one already decided needs --force")
    p.add_argument("--force", action="store_true",
                   help="with --version: re-decide an already decided version under the current policy")
    p.add_argument("--allow-rollback", action="store_true",
                   help="let a passing version older than the passed one holding --alias take it (default: the alias "
                        "stays on the highest version that passed)")
    _trust_type(p)
    _device_option(p)
    signing_key_option(p)
    p.set_defaults(func=cmd_gate)

    p = sub.add_parser("register", help="register a model file (+ feature spec) as a new version of a registered model",
                       **parents)
    p.add_argument("model_name")
    p.add_argument("--model", required=True, help="model file the gate loads without unpickling (a pickle is refused)")
    p.add_argument("--feature-spec", help="FeatureSpec JSON the model was trained with")
    p.add_argument("--data", help="CSV or Parquet sample: refuse to register unless the model accepts its encoded rows")
    p.add_argument("--protected", help="protected attribute column of --data (default: the policy's)")
    p.add_argument("--policy", help="policy TOML naming the protected/label columns of --data")
    p.add_argument("--description", help="version description")
    p.add_argument("--tracking-uri", help="MLflow URI (default: $MLFLOW_TRACKING_URI or the embedded sqlite file)")
    _trust_type(p)
    p.set_defaults(func=cmd_register, decides=False)

    p = sub.add_parser("demo", help="train, register and gate Adult income classifiers (real data)", **parents)
    p.add_argument("--workdir", help="new folder for models and reports")
    p.add_argument("--model-name", default="adult-income", help="registered model name")
    p.add_argument("--policy", help="policy TOML (default: the shipped Adult policy, faux_checks/gate/policies/adult.toml)")
    p.add_argument("--tracking-uri", help="MLflow URI (default: the embedded sqlite file)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("history", help="every recorded gate decision of a model's versions", **with_json)
    p.add_argument("model_name")
    p.add_argument("--tracking-uri")
    p.set_defaults(func=cmd_history, decides=False)

    p = sub.add_parser("audit", help="drift audit of the deployed version on a current batch (Prefect flow, once)",
                       **with_json)
    p.add_argument("model_name")
    p.add_argument("--data", required=True, help="CSV or Parquet current batch")
    _data_format(p)
    p.add_argument("--reference", help="reference batch (default: the data the version was gated on)")
    p.add_argument("--policy", help="policy TOML (default: the policy recorded by the gate, else the shipped one)")
    p.add_argument("--tracking-uri", help="MLflow URI (default: $MLFLOW_TRACKING_URI or the embedded sqlite file)")
    p.add_argument("--alias", default="deployable", help="alias of the audited version")
    p.add_argument("--report-dir", help="root folder for the audit's report folder")
    p.add_argument("--retrain-aux", action="store_true",
                   help="train an auxiliary model on each batch instead of reusing the gate's (the report says which)")
    _device_option(p)
    signing_key_option(p)
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("report", help="validate a gate/audit report.json and render its HTML; exits with its "
                                      "decision's code (2 if the report is invalid)", **parents)
    p.add_argument("path", help="a run's report folder or its report.json")
    p.add_argument("--out", help="HTML file to write (default: report.html next to the JSON, if absent)")
    p.set_defaults(func=cmd_report, decides=False)

    p = sub.add_parser("score-large", help="fAux scores of a large Parquet/CSV file, streamed and sharded on Dask",
                       **parents)
    p.add_argument("--model", required=True, help="TorchScript / torch.export model file")
    p.add_argument("--data", required=True, help="Parquet (sharded by row group) or CSV audit data")
    _data_format(p)
    p.add_argument("--protected", help="protected attribute column (required unless --policy names it, or declares "
                   "[[attributes]]: then every one is scored, one file each beside --out, e.g. scores.sex.csv)")
    p.add_argument("--feature-spec", help="FeatureSpec JSON; without it the numeric columns are used as they are")
    p.add_argument("--out", required=True, help="new scores output: one row per input row, in order; .parquet: one file (--workers 0) or, sharded, "
                   "a dataset folder of one part file per shard (read it with pandas.read_parquet or pyarrow.dataset); else CSV")
    p.add_argument("--label", help="label column (excluded from features)")
    p.add_argument("--policy", help="policy TOML (default: the shipped policy); its [scale] section gives the defaults")
    p.add_argument("--aux-model", help="TorchScript auxiliary model (raw outputs) instead of training one")
    p.add_argument("--workers", type=int, help="local Dask workers (default: [scale] workers, one per core); "
                   "0 = in this process, no Dask")
    p.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. tcp://10.0.0.5:8786")
    p.add_argument("--chunk-rows", type=int, help="rows per chunk (default: [scale] chunk_rows, 16,384)")
    p.add_argument("--work-dir", help="folder for shard files visible to every worker (default: next to --out)")
    p.add_argument("--output-form", choices=["auto", "logit", "probability", "softmax", "logits"],
                   help="how to read the target's output (default: the policy's)")
    p.add_argument("--allow-pickle", action="store_true",
                   help="DANGEROUS: load pickled models (runs code from the file); only for files you trust")
    _trust_type(p)
    _device_option(p)
    p.set_defaults(func=cmd_score_large)

    p = sub.add_parser("spec", help="fit a feature spec (the target model's input encoding) on a data file and "
                                    "save it as JSON (never overwrites)", **parents)
    p.add_argument("--data", required=True, help="CSV or Parquet training data of the target model")
    p.add_argument("--out", required=True, help="new JSON file for the spec")
    p.add_argument("--exclude", action="append", metavar="COLS",
                   help="columns that are not model inputs (label, ids; the protected attribute unless the model "
                        "takes it); comma-separated or repeated")
    p.add_argument("--categorical", action="append", metavar="COLS",
                   help="numeric columns to one-hot encode anyway (integer codes); text and boolean columns always are")
    p.add_argument("--columns", action="append", metavar="COLS",
                   help="the input columns, in the model's order (default: every column of the file minus --exclude)")
    p.add_argument("--min-frequency", default=0, type=_min_frequency,
                   help="levels with fewer rows (integer) or a smaller share of rows (0-1) join '__infrequent__' "
                        "(default 0: none)")
    p.add_argument("--name", help="the spec's name in messages and reports (default: the file's stem)")
    p.set_defaults(func=cmd_spec, decides=False)
    add_evidence_parsers(sub, parents)
    return parser


def _decides(args) -> bool:
    """Whether the command makes a decision (check, gate, audit, demo, score-large); its errors read "could not decide"."""
    return getattr(args, "decides", True)


def _trust_type(p) -> None:
    """The ``--trust-type NAME`` option (check, gate, register, score-large): skops types the user reviewed."""
    p.add_argument("--trust-type", action="append", metavar="NAME",
                   help="a .skops model: a type to rebuild beyond those skops trusts by default (once per type; the "
                        "refusal message lists them). Only for types you have reviewed")


def _device_option(p) -> None:
    """The ``--device {auto,cpu,cuda}`` option (check, gate, audit, score-large): overrides ``[scale] device``."""
    p.add_argument("--device", choices=["auto", "cpu", "cuda"],
                   help="where the swap reading and the aux training run (default: the policy's [scale] device, "
                        "'auto' = CUDA when torch sees a GPU, else the CPU); recorded in the provenance")


@contextlib.contextmanager
def _device_setting(args):
    """``--device`` for this command: ``$FAUX_CHECKS_DEVICE`` while it runs (the flows run in this process), then restored.

    Checked first, so that ``--device cuda`` on a machine without CUDA exits 2 before anything is read or trained.
    """
    device = getattr(args, "device", None)
    if device is None:
        yield
        return
    from faux_checks._device import DEVICE_ENV, resolve_device

    previous = os.environ.get(DEVICE_ENV)
    os.environ[DEVICE_ENV] = device
    try:
        resolve_device(device)
        yield
    finally:
        if previous is None:
            os.environ.pop(DEVICE_ENV, None)
        else:
            os.environ[DEVICE_ENV] = previous


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code (0 passed, 1 failed, 2 undecided/error).

    Run as the command (``argv`` None), a SIGTERM / SIGINT / deadline ends the process at once once
    what it started is stopped (:func:`faux_checks_app.lifecycle.exit_now`, within 10 s of the signal).
    """
    global _QUIET
    args = build_parser().parse_args(argv)
    _QUIET = bool(getattr(args, "quiet", False))
    restore = _quiet_libraries() if _QUIET else None
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        handlers = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    before, stopped = _started_services(), False
    try:
        with _device_setting(args):
            return args.func(args)
    except Stop as stop:
        _error(f"faux-checks: {stop.message}; stopping. Nothing unfinished was recorded: a version being gated "
               "stays new and is gated by the next run")
        lifecycle.stop_started_services(before, say=_error)
        stopped = stop.code
        return stop.code
    except ConfigurationError as exc:  # found before anything was recorded: its own code, one line
        _error(f"faux-checks {args.command}: configuration error: {exc}")
        return EXIT_CONFIGURATION
    except FauxChecksError as exc:  # commands that decide nothing (spec, register, history, report) say "error"
        _error(f"faux-checks: could not decide: {exc}" if _decides(args) else f"faux-checks {args.command}: error: {exc}")
        return EXIT_UNDECIDED
    except KeyboardInterrupt:
        _error("faux-checks: interrupted; nothing was decided")
        return 130
    except Exception as exc:  # noqa: BLE001 - fail closed on anything unexpected
        _error(f"faux-checks: internal error, could not decide: {type(exc).__name__}: {exc}" if _decides(args) else
               f"faux-checks {args.command}: internal error: {type(exc).__name__}: {exc}")
        return EXIT_UNDECIDED
    finally:
        try:   # never unbounded; a signal during this flush ends the command as any other does
            dropped = lifecycle.flush_prefect(lifecycle.AFTER_STOP_FLUSH_S if stopped is not False else 5.0)
        except Stop as stop:
            dropped, stopped = 0, stop.code
        if dropped:
            _error(f"faux-checks: {dropped} Prefect event(s)/log line(s) not sent: the Prefect API did not answer")
        _QUIET = False
        for sig, previous in handlers.items():
            signal.signal(sig, previous)
        if restore is not None:
            restore()
        if stopped is not False and argv is None:   # the command itself (not a caller's main([...])): a bounded exit
            lifecycle.exit_now(stopped)


def _quiet_libraries():
    """``--quiet``: library log records below WARNING are dropped (Prefect, GX, MLflow, alembic); returns the undo."""
    previous_disable = logging.root.manager.disable
    previous_env = {k: os.environ.get(k) for k in ("PREFECT_LOGGING_LEVEL", "MLFLOW_LOGGING_LEVEL")}
    os.environ.update({"PREFECT_LOGGING_LEVEL": "WARNING", "MLFLOW_LOGGING_LEVEL": "WARNING"})
    logging.disable(logging.INFO)

    def restore():
        logging.disable(previous_disable)
        for key, value in previous_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return restore



if __name__ == "__main__":
    sys.exit(main())
