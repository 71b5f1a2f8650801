"""The commands on one model file and one data file, no registry: ``faux-checks check`` (in memory, every protected
attribute of the policy, one decision, its report, scores and evidence pack) and ``faux-checks score-large`` (the
same scores streamed in chunks, in this process or sharded on Dask).

``check`` exits 0 / 1 / 2 with the decision, 3 for a configuration error found before scoring (nothing written);
any other error exits 2 with an undecided report when ``--report-dir`` is given.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from faux_checks.errors import ConfigurationError, FauxChecksError

from . import lifecycle
from .arguments import check_outputs, command_policy, deadline_seconds, policy_name
from .console import eprint, error, quiet, say, wants_json
from .lifecycle import Stop, time_limit

__all__ = ["cmd_check", "cmd_score_large"]


def cmd_check(args) -> int:
    """One model file + one data file, no registry; any error exits 2 (with an undecided report if asked for)."""
    deadline = _check_deadline(args)             # a --deadline out of range: exit 3 before anything is read
    report_dir = Path(args.report_dir) if args.report_dir else None
    if report_dir is not None and (report_dir / "report.json").exists():
        raise FauxChecksError(f"{report_dir} already holds a report; choose a new --report-dir (nothing is overwritten)")
    if args.scores_out and Path(args.scores_out).exists():
        raise FauxChecksError(f"{args.scores_out} exists already; choose another --scores-out (nothing is overwritten)")
    check_outputs(scores_out=args.scores_out, report_dir=report_dir)
    from faux_checks.report.evidence import signing_key_path

    if args.signing_key and report_dir is None:
        raise FauxChecksError("--signing-key signs the evidence pack written beside the report: add --report-dir DIR")
    if report_dir is not None:
        signing_key_path(args.signing_key)     # a wrong key stops the check before it scores
    try:
        with time_limit(deadline, "check"):
            code = _check(args, report_dir)
            if report_dir is not None:
                from .evidence_cli import write_check_pack

                pack = write_check_pack(report_dir, args)
                if pack is not None:
                    eprint(f"      evidence pack: {pack} (verify: faux-checks verify {pack})")
        return code
    except (Exception, Stop) as exc:  # fail closed, and say why in the report the user asked for
        if (report_dir is not None and not (report_dir / "report.json").exists()
                and not isinstance(exc, ConfigurationError)):   # a configuration error writes nothing (exit 3)
            _write_undecided_report(report_dir, args, exc)
        raise


def _check_deadline(args) -> float:
    """``check --deadline`` (:func:`~faux_checks_app.arguments.deadline_seconds`: exit 3 out of range), else the
    policy's ``[operations] deadline_s`` (the default's when the policy does not load: ``_check`` then reports why)."""
    from faux_checks.gate.policy import OperationsSettings, load_policy

    given = deadline_seconds(args.deadline, nothing="nothing was written")
    if given is not None:
        return given
    try:
        return float(load_policy(args.policy).operations.deadline_s)
    except Exception:  # noqa: BLE001 - an unreadable policy: the default deadline; the run reports the policy
        return float(OperationsSettings().deadline_s)


def _write_undecided_report(report_dir: Path, args, exc: BaseException) -> None:
    """Best effort: an 'undecided' report.json/html naming the error (the exit code is 2 either way)."""
    from faux_checks.report.build import write_report

    given = {}
    try:                       # the page shows the policy it was given, when it can be read
        policy = command_policy(args)
        given = {"policy": policy.model_dump(mode="json"), "policy_sha256": policy.sha256()}
    except Exception:  # noqa: BLE001 - best effort: the page shows the policy when it reads
        pass
    try:
        write_report(report_dir, decision="undecided", reasons=[f"could not decide: {type(exc).__name__}: {exc}"],
                     check=None, model={"path": str(args.model)}, **given)
        eprint(f"      undecided report: {report_dir / 'report.html'}")
    except Exception as report_exc:  # noqa: BLE001 - best effort: the undecided exit stands, the failure is said
        eprint(f"faux-checks: the undecided report could not be written either: {report_exc}")


def _check(args, report_dir: Path | None) -> int:
    """``check``: every protected attribute of the policy (one for ``protected = "..."``), one decision.

    One path and one output shape for one or several attributes
    (:func:`faux_checks.gate.attributes.check_attributes`): the report and ``--json`` hold one section per
    attribute and the decision over them all; the printed lines name each attribute when there are several.
    """
    from faux_checks.gate.attributes import check_attributes
    from faux_checks.inputs.io import read_table, write_scores
    from faux_checks.inputs.models import load_model, model_sha256
    from faux_checks.inputs.tabular import FeatureSpec
    from faux_checks.report.build import write_report

    policy = _check_policy(args)
    from faux_checks.inputs.limits import set_model_limits

    set_model_limits(policy.operations)   # size, tree and probe limits on the model files
    names = policy.attribute_names
    several = len(names) > 1
    if args.aux_model and len(names) > 1:
        raise FauxChecksError(f"--aux-model gives one auxiliary model, but the policy checks {len(names)} protected "
                              f"attributes ({', '.join(names)}), each with its own; drop --aux-model")
    scores_out = _scores_paths(args.scores_out, names)
    eprint(f"[1/4] loading model {args.model}")
    model = load_model(args.model, allow_pickle=args.allow_pickle, trusted_types=args.trust_type or ())
    aux = load_model(args.aux_model, allow_pickle=args.allow_pickle) if args.aux_model else None
    spec = FeatureSpec.load(args.feature_spec) if args.feature_spec else None
    eprint(f"[2/4] reading data {args.data}")
    frame = read_table(args.data, sep=getattr(args, "sep", None), thousands=getattr(args, "thousands", None),
                       decimal=getattr(args, "decimal", None))
    linked = _linked_rows(args, policy, spec, frame)    # [protected_file]: c joined by the key, unmatched rows handled
    frame = linked.frame if linked is not None else frame
    _check_configuration(args, policy, model, spec, _estimated_rows(args, policy, spec, frame))
    from .output import library_output_to_stderr

    if several:
        eprint(f"[3/4] fAux check of {len(names)} protected attributes ({', '.join(names)}) on {len(frame):,} rows, "
               "one auxiliary model each")
    else:
        eprint(f"[3/4] fAux check on {len(frame):,} rows (auxiliary model {'given' if aux is not None else 'trained'})")
    t0 = time.perf_counter()
    run = check_attributes
    if policy.protected_probabilities is not None:    # c as probabilities: multiple imputation, draws checked
        from faux_checks.gate.estimated import check_estimated as run
    with library_output_to_stderr():
        result = run(model, frame, policy=policy, feature_spec=spec,
                                  aux_models={names[0]: aux} if aux is not None else None,
                                  progress=sys.stderr.isatty() and not quiet(),
                                  model_info={"model_path": str(args.model), "model_sha256": model_sha256(args.model)})
    if linked is not None:
        from faux_checks.gate.unmatched import linked_outcome

        result = linked_outcome(result, linked, policy)
    eprint(f"      done in {time.perf_counter() - t0:.1f} s")
    for section in result.sections:
        if section.attribute in scores_out:
            write_scores(scores_out[section.attribute], section.check)
            eprint(f"      {section.attribute + ': ' if several else ''}scores written to {scores_out[section.attribute]}")
    sections = {"rules": result.rules, "attributes": [s.to_dict() for s in result.sections],
                "policy": policy.model_dump(mode="json"), "policy_sha256": policy.sha256()}
    if report_dir is not None:
        paths = write_report(report_dir, decision=result.decision, reasons=result.reasons,
                             check=result.deciding.check.to_dict(), **sections,
                             model={"path": str(args.model), "sha256": model_sha256(args.model)})
        eprint(f"[4/4] report: {paths['html']}")
    return _print_check(args, result, report_dir, model_sha256(args.model),
                        [f"{s.attribute}: {s.check!r}" for s in result.sections] if several else [])


def _check_policy(args):
    """``check``'s policy (:func:`~faux_checks_app.arguments.command_policy`); one that does not load is a configuration error (exit 3)."""
    try:
        return command_policy(args)
    except ConfigurationError:
        raise
    except FauxChecksError as exc:
        raise ConfigurationError(f"{policy_name(args)}: {exc}; nothing was written") from None


def _linked_rows(args, policy, spec, frame):
    """The audit rows with c joined from ``[protected_file]`` (:func:`faux_checks.gate.unmatched.link_audit_rows`:
    join errors and refused unmatched rows exit 3); None when the policy names no protected file."""
    if policy.protected_file is None:
        return None
    from faux_checks.gate.unmatched import link_audit_rows

    linked = link_audit_rows(frame, policy, feature_spec=spec, audit_name=f"the audit data {args.data}")
    eprint(f"      protected file {policy.protected_file.path}: {len(linked.matched):,} of {linked.n_rows:,} rows "
           f"matched by '{linked.join_on}', {linked.n_unmatched:,} unmatched")
    return linked


def _estimated_rows(args, policy, spec, frame):
    """``frame`` itself, or with ``[protected_probabilities]`` the audit rows with the probabilities checked
    (:func:`faux_checks.gate.estimated.imputed_frame`: exit 3 naming every offending column) and c's first draw in
    place of the probability columns, for the preflight of the policy's columns and the model's inputs."""
    settings = policy.protected_probabilities
    if settings is None:
        return frame
    from faux_checks.gate.estimated import preflight_rows
    from faux_checks.inputs.probabilities import expected_auc

    rows, matrix = preflight_rows(frame, policy, feature_spec=spec, data_name=f"the audit data {args.data}")
    eprint(f"      protected attribute '{settings.column}' as probabilities ({', '.join(settings.groups.values())}): "
           f"expected ROC-AUC {expected_auc(matrix):.3f} (min_sharpness {settings.min_sharpness:.2f} to pass), "
           f"{settings.draws} draws")
    return rows


def _check_configuration(args, policy, model, spec, frame) -> None:
    """``check``'s inputs against each other before scoring: the policy's columns, the spec's columns and
    the model's input width (:func:`faux_checks.gate.preflight.check_inputs_fit`, probed on the first 256 rows);
    a mismatch is a :class:`ConfigurationError` (exit 3, nothing written). Errors of the encoding itself (missing
    protected values, an empty column) are left to the check (undecided, exit 2, with its report)."""
    from faux_checks.gate.preflight import check_inputs_fit, check_policy_columns

    check_policy_columns(frame, policy, data_name=str(args.data), policy_name=policy_name(args))
    check_inputs_fit(model, frame.head(256), policy, spec, suffix="; nothing was written",
                     encoding_is_configuration=False)


def _scores_paths(scores_out: str | None, names: list[str]) -> dict[str, Path]:
    """Where ``--scores-out`` writes each attribute's scores: the path itself for one attribute,
    else one file per attribute beside it (``scores.sex.csv``, :func:`~faux_checks.gate.attributes.attribute_key`).

    Raises
    ------
    FauxChecksError
        A path exists already (nothing is overwritten).
    """
    from faux_checks.gate.sections import attribute_key

    if not scores_out:
        return {}
    base = Path(scores_out)
    paths = ({n: base.with_name(f"{base.stem}.{attribute_key(n)}{base.suffix}") for n in names}
             if len(names) > 1 else {names[0]: base})
    taken = [str(p) for p in paths.values() if p.exists()]
    if taken:
        raise FauxChecksError(f"{', '.join(taken)} exist already; choose another --scores-out (nothing is overwritten)")
    return paths


def _print_check(args, result, report_dir: Path | None, sha256: str, sections: list[str] = ()) -> int:
    """A check's result on stdout: one ``--json`` object, or its summary, one line per attribute section, the form of
    each protected attribute (:func:`~faux_checks.report.protected_form.protected_form_line`) and the reasons."""
    if wants_json(args):
        from .output import check_object, emit_json

        emit_json([check_object(result.to_dict(), model_path=str(args.model), model_sha256=sha256,
                                report_dir=str(report_dir) if report_dir is not None else None)])
        return result.exit_code
    from faux_checks.report.protected_form import protected_form_line

    say(repr(result))
    checks = [s.check for s in result.sections] if hasattr(result, "sections") else [result]
    for line in sections:
        say(f"  {line}")
    for form in dict.fromkeys(protected_form_line(getattr(c, "provenance", None)) for c in checks):
        say(f"  {form}")
    for reason in result.reasons:
        say(f"  - {reason}")
    return result.exit_code


def cmd_score_large(args) -> int:
    """fAux scores of a large Parquet/CSV file in chunks, sharded on Dask workers (or in this process)."""
    from faux_checks.inputs.models import load_model, model_sha256
    from faux_checks.inputs.tabular import FeatureSpec

    if Path(args.out).exists():
        raise FauxChecksError(f"{args.out} exists already; choose another --out (nothing is overwritten)")
    check_outputs(out=args.out, work_dir=args.work_dir)
    policy = command_policy(args)
    if policy.protected_file is not None:
        raise ConfigurationError("score-large does not join a protected file ([protected_file] or --protected-file): "
                                 "join the protected column onto the data first, or run `faux-checks check` with "
                                 "--protected-file; nothing was written")
    if policy.protected_probabilities is not None:
        raise ConfigurationError("score-large does not impute a protected attribute given as probabilities "
                                 "([protected_probabilities]): run `faux-checks check`, which checks each draw of it "
                                 "and combines them; nothing was written")
    if args.aux_model and len(policy.attribute_names) > 1:
        raise FauxChecksError(f"--aux-model gives one auxiliary model, but the policy checks "
                              f"{', '.join(policy.attribute_names)}, each with its own; drop --aux-model")
    scale = policy.scale
    workers = args.workers if args.workers is not None else scale.workers
    scheduler = args.scheduler or scale.scheduler_address
    chunk_rows = args.chunk_rows or scale.chunk_rows
    t0 = time.perf_counter()
    if workers == 0 and not scheduler:
        from faux_checks.gate.stream.run import score_stream

        eprint(f"scoring {args.data} in chunks of {chunk_rows:,} rows in this process")
        aux = load_model(args.aux_model, allow_pickle=args.allow_pickle) if args.aux_model else None
        result = score_stream(
            load_model(args.model, allow_pickle=args.allow_pickle, trusted_types=args.trust_type or ()), args.data,
            policy=policy, out_path=args.out,
            feature_spec=FeatureSpec.load(args.feature_spec) if args.feature_spec else None,
            aux_model=aux,
            chunk_rows=chunk_rows, progress=sys.stderr.isatty(), sep=args.sep, thousands=args.thousands,
            decimal=args.decimal,
            model_info={"model_path": str(args.model), "model_sha256": model_sha256(args.model)})
    else:
        from faux_checks.inputs.io import csv_number_marks, sniff_sep
        from faux_checks.settings import configure_environment

        if args.sep is not None and sniff_sep(args.data, args.sep) != sniff_sep(args.data):
            raise FauxChecksError(f"--sep {args.sep!r}: the sharded scorer reads the delimiter it sniffs from "
                                  f"{args.data} ({sniff_sep(args.data)!r}); score in this process (--workers 0) to "
                                  "force another, or convert the file to Parquet")
        if (args.decimal is not None and not str(args.data).endswith(".parquet")
                and csv_number_marks(args.data, sniff_sep(args.data))[1] != args.decimal):
            raise FauxChecksError(f"--decimal {args.decimal!r}: the sharded scorer reads the decimal mark it sniffs "
                                  f"from {args.data}; score in this process (--workers 0) to read it with another, "
                                  "or convert the file to Parquet")
        if args.thousands is not None:
            raise FauxChecksError(f"--thousands {args.thousands!r}: the sharded scorer reads numbers without a thousands "
                                  "mark; score in this process (--workers 0) to read them with it, or write the "
                                  "numbers plainly (1234.5)")
        configure_environment()
        lifecycle.guard_temporary_server(say=error)
        from faux_checks_flows.score_large import run_score_sharded

        where = f"Dask scheduler {scheduler}" if scheduler else f"a local Dask cluster of {workers or 'one per core'} workers"
        eprint(f"scoring {args.data} in chunks of {chunk_rows:,} rows on {where} (Prefect flow; first start ~10-20 s)")
        result = run_score_sharded(args.model, args.data, args.out, policy=policy, feature_spec_path=args.feature_spec,
                                    aux_model_path=args.aux_model, workers=workers, scheduler_address=scheduler,
                                    chunk_rows=chunk_rows, work_dir=args.work_dir, allow_pickle=args.allow_pickle,
                                    trusted_types=args.trust_type or ())
    eprint(f"      done in {time.perf_counter() - t0:.1f} s; scores written to {result.out_path}")
    say(repr(result))        # one attribute: its summary's line; several: the gate's, then each section's
    for section in result.sections if len(result.sections) > 1 else ():
        say(f"  {section.attribute}: {section.summary!r}")
    for reason in result.reasons:
        say(f"  - {reason}")
    for note in result.notes:
        say(f"  note: {note}")
    return result.exit_code
