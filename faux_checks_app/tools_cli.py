"""The commands that decide nothing about a model: ``faux-checks register`` (a model file as a new registered version,
checked to load safely first), ``history`` (every recorded decision of a model's versions), ``spec`` (a feature spec
fitted on a data file) and ``report`` (a stored report validated and rendered).

Their errors read ``faux-checks COMMAND: error: ...`` and exit 2 (the parser marks them ``decides=False``); a
success exits 0, but ``report``, which exits with the recorded decision's code.
"""

from __future__ import annotations

from pathlib import Path

from faux_checks.errors import FauxChecksError

from .console import EXIT_PASSED, eprint, say, wants_json

__all__ = ["cmd_history", "cmd_register", "cmd_report", "cmd_spec"]


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
    eprint(f"registered {args.model} as version {version} of '{args.model_name}' in {registry.tracking_uri}; "
           f"`faux-checks gate {args.model_name} --data ...` gates it")
    say(version)
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
    eprint(f"the model accepts {args.data}: {rows.X.shape[1]} encoded features")


def cmd_history(args) -> int:
    """Every registered version of a model with its recorded gate decision, then its drift audits; exit 0.

    One table (:func:`faux_checks_app.history.print_table`), or with ``--json`` one object per version
    (:func:`faux_checks_app.output.history_objects`). Raises the registry's errors (no such model: InputError).
    """
    from faux_checks.registry import Registry

    from .output import library_output_to_stderr

    registry = Registry(args.tracking_uri)
    with library_output_to_stderr():
        rows, audits = registry.history(args.model_name), registry.audit_runs(args.model_name)
    if wants_json(args):
        from .output import emit_json, history_objects

        emit_json(history_objects(args.model_name, rows, audits))
        return EXIT_PASSED
    from .history import decision_columns, print_table

    print_table(rows, decision_columns(rows))
    if audits:
        print()
        say(f"drift audits ({len(audits)}):")
        for a in audits:
            m = a.get("metrics") or {}
            ff = [m.get("flagged_fraction_reference"), m.get("flagged_fraction_current")]
            flagged = " -> ".join("n/a" if v is None else f"{v:.1%}" for v in ff)
            say(f"  {a.get('started_at')}  v{a.get('version')}  {a.get('decision'):<9}  flagged {flagged}  "
                f"{a.get('reason', '')[:140]}")
    return EXIT_PASSED


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
        eprint(f"rendered {out}")
    model = report.get("model") or {}
    say(f"{report['kind']} report of {model.get('name', '?')} v{model.get('version', '?')} "
        f"({report['created_at']}, schema {report['schema_version']}): {report['decision']}")
    say(f"  rule: {report['rule']}")
    for r in report.get("rules") or []:
        if r.get("status") != "ok":
            say(f"  - {r['status']}: {r['detail']}")
    say(f"html: {out}")
    return int(report["exit_code"])


def _names(values: list[str] | None) -> list[str]:
    """Column names from repeated and/or comma-separated options (``--categorical a,b --categorical c``)."""
    return [n.strip() for v in values or [] for n in v.split(",") if n.strip()]


def cmd_spec(args) -> int:
    """Fit a FeatureSpec on a data file and save it as JSON (imports nothing from Prefect, MLflow or GX)."""
    from faux_checks.inputs.io import read_table
    from faux_checks.inputs.tabular import FeatureSpec

    out = Path(args.out)
    if out.exists():
        raise FauxChecksError(f"{out} exists already; choose another --out (nothing is overwritten)")
    frame = read_table(args.data, sep=getattr(args, "sep", None), thousands=getattr(args, "thousands", None),
                       decimal=getattr(args, "decimal", None))
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
    say(f"feature spec '{spec.name}': {len(spec.columns)} source columns ({len(spec.columns) - n_cat} numeric, "
        f"{n_cat} categorical) -> {spec.n_features} features, fitted on {len(frame):,} rows of {args.data}")
    for enc in spec.columns:
        detail = (f"mean {enc.mean:.4g}, std {enc.std:.4g}" if enc.kind == "numeric"
                  else f"{len(enc.levels)} levels: {', '.join(enc.levels[:6])}{', ...' if len(enc.levels) > 6 else ''}")
        say(f"  {enc.name}: {enc.kind} ({detail})")
    left_out = [c for c in present if c not in columns]
    say(f"  not inputs: {', '.join(left_out) if left_out else 'none'}")
    say(f"written: {out}")
    return EXIT_PASSED
