"""The report dict (``report.json``) of a gate or audit run, and :func:`write_report`.

The JSON is built from plain dicts (:meth:`CheckResult.to_dict`,
:meth:`faux_checks.audit.results.AuditResult.to_dict`, the registry's history) and validated
against the schema (:mod:`.schema`) before anything is written; the HTML is rendered from the
JSON alone (:mod:`.html`), so ``faux-checks report`` can re-render any stored report.
"""

from __future__ import annotations

import json
import logging
import platform
from pathlib import Path

from ..errors import InputError
from ..gate.decision import EXIT_CODES, exit_code_for, rule_row
from ..provenance import data_sha256, installed_versions, jsonable, utc_now
from ..registry.records import GateProvenance, GateRecord, VersionRecord, parse_number
from .html import render_html
from .protected_form import protected_form_line
from .schema import REPORT_SCHEMA_VERSION, validate_report

__all__ = ["KINDS", "build_report", "history_points", "report_history", "summarise_data", "write_report"]

logger = logging.getLogger(__name__)

KINDS = ("gate", "audit")
#: Integrations whose versions a report lists next to those the check recorded.
REPORT_PACKAGES = ("great-expectations", "prefect", "mlflow", "evidently", "scipy", "matplotlib", "jsonschema")


def summarise_data(frame, *, path: str | Path | None = None, name: str = "audit data") -> dict:
    """Row count, content hash and missing values per column of a batch (report ``data`` entry)."""
    missing = frame.isna().sum()
    return {
        "name": name,
        "path": None if path is None else str(Path(path).resolve()),
        "sha256": data_sha256(frame),
        "n_rows": int(len(frame)),
        "n_columns": int(frame.shape[1]),
        "missing_by_column": {str(c): int(v) for c, v in missing.items() if v},
        "empty_columns": [str(c) for c, v in missing.items() if len(frame) and v == len(frame)],
    }


def history_points(versions: list[dict], audits: list[dict], gates: list[dict] | None = None) -> list[dict]:
    """Flagged fraction over time: one point per gate decision and per audit.

    With ``gates`` every gate decision is a point, a re-gated version's earlier ones included;
    a version's tags add a point only for a decision no run
    carries (recorded without a run), and its churn to the point of the run that holds it.

    Parameters
    ----------
    versions : list of dict
        :meth:`Registry.history` rows (``fairness_gate``, ``fairness_flagged_fraction``,
        ``fairness_checked_at``, ``fairness_run_id``).
    audits : list of dict
        :meth:`Registry.audit_runs` rows (``decision``, ``metrics``, ``started_at``).
    gates : list of dict, optional
        :meth:`Registry.gate_runs` rows (``decision``, ``delta``, ``policy_sha256``, ``metrics``, ``started_at``).

    Returns
    -------
    list of dict
        ``kind`` (gate/audit), ``version``, ``decision``, ``flagged_fraction`` (None when not
        computed), ``at`` (UTC ISO 8601), ``run_id``; a gate also ``delta`` and ``policy_sha256`` (None when
        not recorded: runs from before these tags); a gate compared with the version before it also
        ``churn`` (``against``, ``newly_flagged``, ``resolved``, ``n``: tags ``fairness_churn_*``); oldest first.
    """
    number = parse_number
    points = []
    by_run = {}
    for run in gates or []:
        if run.get("decision") in EXIT_CODES:
            points.append({"kind": "gate", "version": str(run.get("version")), "decision": run["decision"],
                           "flagged_fraction": number((run.get("metrics") or {}).get("flagged_fraction")),
                           "at": run.get("started_at") or "", "run_id": run.get("run_id"),
                           "delta": number(run.get("delta")), "policy_sha256": run.get("policy_sha256") or None})
            by_run[run.get("run_id")] = points[-1]
    for row in versions:
        record = VersionRecord.from_tags(row)
        decision, gate = record.state, record.gate or GateRecord(decision=record.state)
        provenance = gate.provenance or GateProvenance()
        if decision in EXIT_CODES:
            point = by_run.get(gate.run_id or "")
            if point is None:
                point = {"kind": "gate", "version": str(row.get("version")), "decision": decision,
                         "flagged_fraction": gate.flagged_fraction, "at": gate.checked_at or row.get("created_at") or "",
                         "run_id": gate.run_id, "delta": gate.delta, "policy_sha256": provenance.policy_sha256}
                points.append(point)
            if provenance.churn_against:   # newly flagged / resolved against the version before it
                point["churn"] = {"against": provenance.churn_against, "newly_flagged": provenance.churn_newly_flagged,
                                  "resolved": provenance.churn_resolved, "n": provenance.churn_n}
    for run in audits:
        decision = run.get("decision")
        if decision in EXIT_CODES:
            points.append({"kind": "audit", "version": str(run.get("version")), "decision": decision,
                           "flagged_fraction": number((run.get("metrics") or {}).get("flagged_fraction_current")),
                           "at": run.get("started_at") or "", "run_id": run.get("run_id")})
    return sorted(points, key=lambda p: p["at"])


def report_history(registry, model_name: str) -> list[dict]:
    """:func:`history_points` of a registered model (``registry``: a :class:`Registry`).

    A registry that cannot be read gives an empty history (logged), never a lost report.
    """
    try:
        return history_points(registry.history(model_name), registry.audit_runs(model_name),
                              registry.gate_runs(model_name))
    except Exception as exc:  # noqa: BLE001 - the report is still written; the history section says it is empty
        logger.warning("history of '%s' not available for the report: %s", model_name, exc)
        return []


def _gate_rules(reasons: list[str], check: dict | None, rules: list[dict] | None) -> list[dict]:
    """The rules the gate decided from: those given (the GX suite's), else the check's own; one row when it did not run."""
    if rules:
        return list(rules)
    if check and check.get("rules"):
        return list(check["rules"])
    return [rule_row("check", "not computed", reasons[0] if reasons else "the fAux check could not be computed")]


def _comparison(check: dict | None) -> list[dict]:
    """fAux and the baseline testers side by side (statistic, value, threshold, limit, passed)."""
    if not check:
        return []
    prov = check.get("provenance") or {}
    ff, mff = check.get("flagged_fraction"), check.get("max_flagged_fraction")
    iv = check.get("interval") or {}
    status = next((r["status"] for r in check.get("rules") or [] if r.get("rule") == "max_flagged_fraction"), None)
    ci = (f" ({iv['confidence']:.0%} CI {iv['lower']:.2%}–{iv['upper']:.2%})"
          if iv.get("lower") is not None and iv.get("upper") is not None else "")
    rows = [{"tester": f"fAux ({prov.get('variant') or 'faux'})", "statistic": "flagged_fraction", "value": ff,
             "threshold": check.get("delta"), "limit": mff, "gating": True,
             "passed": None if status not in ("ok", "exceeded") else status == "ok",
             "summary": (f"{ff:.2%}{ci} of individuals with LIC score > δ = {check.get('delta')} or undefined"
                         if ff is not None else "not computed")}]
    for name, t in (check.get("testers") or {}).items():
        rows.append({"tester": name, "statistic": t.get("statistic"), "value": t.get("value"),
                     "threshold": t.get("threshold"), "limit": t.get("limit"), "gating": bool(t.get("gating")),
                     "passed": t.get("passed"), "summary": t.get("summary") or ""})
    return rows


def _batch(summary: dict | None, check: dict | None, name: str) -> dict:
    summary = dict(summary or {})
    prov = (check or {}).get("provenance") or {}
    out = {
        "name": summary.get("name") or name,
        "path": summary.get("path"),
        "sha256": summary.get("sha256") or prov.get("data_sha256"),
        "n_rows": summary.get("n_rows", prov.get("n_input_rows")),
        "n_individuals": (check or {}).get("n_individuals"),
        "n_missing_protected": (check or {}).get("n_missing_protected"),
        "n_undefined": (check or {}).get("n_undefined"),
        "missing_by_column": summary.get("missing_by_column") or {},
        "empty_columns": summary.get("empty_columns") or [],
    }
    return out


def _environment(check: dict | None, audit: dict | None) -> dict:
    prov = (check or {}).get("provenance") or {}
    packages = dict(prov.get("packages") or {})
    packages.update(((audit or {}).get("provenance") or {}).get("packages") or {})
    for pkg, version in installed_versions(REPORT_PACKAGES).items():
        packages.setdefault(pkg, version)
    policy = prov.get("policy") or ((audit or {}).get("provenance") or {}).get("policy") or {}
    return {
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "packages": {str(k): str(v) for k, v in packages.items()},
        "seeds": {"policy_seed": policy.get("seed", prov.get("seed")),
                  "note": "one seed drives the auxiliary model's initialisation and batch order, its hold-out "
                          "split and every row sample (max_rows)"},
    }


def build_report(*, decision: str, reasons: list[str], check: dict | None, kind: str = "gate", model: dict | None = None,
                 expectations: list[dict] | None = None, audit: dict | None = None, history: list[dict] | None = None,
                 data: list[dict] | None = None, artifacts: dict[str, str] | None = None, rules: list[dict] | None = None,
                 attributes: list[dict] | None = None, policy: dict | None = None, policy_sha256: str | None = None,
                 regression: list[dict] | None = None) -> dict:
    """The report dict (not validated; :func:`write_report` validates before writing).

    Parameters
    ----------
    decision, reasons : the run's outcome; ``reasons[0]`` is the rule that produced it.
    check : dict or None
        :meth:`CheckResult.to_dict` of the fAux check (an audit's: on the current batch).
    kind : {"gate", "audit"}
    model : dict, optional
        ``name``, ``version``, ``sha256``, ``path``, ...
    expectations : list of dict, optional
        Great Expectations results (gate).
    audit : dict, optional
        :meth:`AuditResult.to_dict` (kind ``"audit"``).
    history : list of dict, optional
        :func:`history_points`; this run's own point is appended.
    data : list of dict, optional
        :func:`summarise_data` of each batch (gate: the audit data; audit: reference, current).
    artifacts : dict, optional
        Name -> file name of other evidence in the run folder (e.g. Evidently's HTML).
    rules : list of dict, optional
        The rule rows the decision came from (gate: the GX suite's); default the check's own.
    attributes : list of dict, optional
        One section per protected attribute (:func:`faux_checks.gate.sections.section_dict`), written as
        ``attributes``; ``check`` is the check of the attribute that decided. Absent when not given.
    policy, policy_sha256 : optional
        The policy as the gate read it and its hash (:meth:`Policy.sha256`); default the check's
        provenance (a several-attribute gate passes its whole policy: each check records its own
        attribute's).
    regression : list of dict, optional
        A gate's per-individual comparison with the deployed and the previous version
        (:func:`faux_checks.gate.regression.version_comparison` rows), written as ``regression``.
    """
    if kind not in KINDS or decision not in EXIT_CODES:
        raise InputError(f"report kind must be one of {list(KINDS)}, got {kind!r}" if kind not in KINDS else
                         f"decision must be one of {list(EXIT_CODES)}, got {decision!r}")
    prov = (check or {}).get("provenance") or {}
    audit_prov = (audit or {}).get("provenance") or {}
    policy, policy_sha256 = _report_policy(kind, policy, policy_sha256, prov, audit_prov)
    batches = _batches(kind, list(data or []), check, audit)
    model = {str(k): v for k, v in (model or {}).items()}
    now = utc_now()
    this_run = {"kind": kind, "version": str(model.get("version", "")), "decision": decision,
                "flagged_fraction": check.get("flagged_fraction") if check is not None else None, "at": now}
    points = _history(history, this_run, check, policy_sha256 or prov.get("policy_sha256"), regression)
    rules = (audit or {}).get("limits") if kind == "audit" else _gate_rules(reasons, check, rules)
    payload = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "kind": kind,
        "created_at": now,
        "decision": decision,
        "exit_code": exit_code_for(decision),
        "rule": reasons[0] if reasons else "no reason recorded",
        "reasons": list(reasons),
        "rules": rules or [],
        "model": model,
        "policy": policy,
        "policy_sha256": policy_sha256 or prov.get("policy_sha256") or audit_prov.get("policy_sha256"),
        "data": batches,
        "aux": None if not check else {"quality": check.get("aux_quality"), "metric": check.get("aux_quality_metric"),
                                       "roc": check.get("aux_roc") or {}, "intervals": check.get("aux_intervals") or []},
        "comparison": _comparison(check),
        "expectations": list(expectations or []),
        "check": check,
        "audit": audit,
        "history": points,
        "environment": _environment(check, audit),
        "artifacts": dict(artifacts or {}), "protected_form": protected_form_line(prov),
    }
    if attributes:
        payload["attributes"] = list(attributes)
    if regression:
        payload["regression"] = list(regression)
    return jsonable(payload)


def _report_policy(kind: str, policy: dict | None, policy_sha256: str | None, prov: dict,
                   audit_prov: dict) -> tuple[dict | None, str | None]:
    """The policy the report shows and its hash: as given, else the audit's, else the check's provenance."""
    # an audit scores each batch with [audit] max_rows folded into a copy of the policy: the report shows (and
    # hashes) the policy as given, the one the gate recorded (one policy hash everywhere)
    if kind == "audit" and audit_prov.get("policy"):
        policy = policy or audit_prov.get("policy")
        policy_sha256 = policy_sha256 or audit_prov.get("policy_sha256")
    return policy or prov.get("policy") or audit_prov.get("policy"), policy_sha256


def _batches(kind: str, data: list[dict], check: dict | None, audit: dict | None) -> list[dict]:
    """The report's ``data``: the audit data of a gate; the reference and current batches of an audit."""
    if kind == "gate":
        return [_batch(data[0] if data else None, check, "audit data")]
    by_name = {d.get("name"): d for d in data}
    return [_batch(by_name.get("reference"), (audit or {}).get("reference_check"), "reference"),
            _batch(by_name.get("current"), check, "current")]


def _history(history: list[dict] | None, this_run: dict, check: dict | None, policy_sha256: str | None,
             regression: list[dict] | None) -> list[dict]:
    """The earlier decisions and this run's point: a gate's δ and policy hash, and its churn against the
    previous version (newly flagged and resolved individuals) when compared."""
    points = list(history or [])
    points.append({**this_run, "run_id": None, "this_run": True})
    if this_run["kind"] == "gate":                          # this decision's δ and policy, as the earlier ones'
        points[-1].update({"delta": (check or {}).get("delta"), "policy_sha256": policy_sha256})
    previous = next((c for c in regression or [] if c.get("role") == "previous" and c.get("change")), None)
    if previous is not None:
        change = previous["change"]
        points[-1]["churn"] = {"against": str(previous["compared_with"]), "newly_flagged": change["newly_flagged"],
                               "resolved": change["resolved"], "n": change["n"]}
    return points


def write_report(report_dir: str | Path, *, decision: str, reasons: list[str], check: dict | None,
                 model: dict | None = None, expectations: list[dict] | None = None, kind: str = "gate",
                 audit: dict | None = None, history: list[dict] | None = None, data: list[dict] | None = None,
                 artifacts: dict[str, str] | None = None, rules: list[dict] | None = None,
                 attributes: list[dict] | None = None, policy: dict | None = None,
                 policy_sha256: str | None = None, regression: list[dict] | None = None,
                 replace: bool = False) -> dict[str, Path]:
    """Write ``report.json`` (schema-validated) and ``report.html`` into ``report_dir``, each whole or not at all.

    Each file goes to a temporary name, is synced and read back, then renamed
    (:func:`faux_checks._files.write_whole`); the page is written first, so a ``report.json`` on
    disk means both are there. A full disk leaves no file, never a short one.

    Parameters
    ----------
    report_dir : path
        Created if absent; must not already hold a report (nothing is overwritten) unless ``replace``.
    decision, reasons, check, model, expectations, kind, audit, history, data, artifacts, rules, attributes, policy,
    policy_sha256, regression :
        See :func:`build_report`.
    replace : bool
        Rewrite a report already there: the retry of a step that owns ``report_dir`` (the gate's
        ``record``), which never trusts what an interrupted attempt left.

    Returns
    -------
    dict with ``json`` and ``html`` paths.

    Raises
    ------
    InputError
        If ``report_dir`` already holds report.json or report.html (and not ``replace``), or the
        report does not match the schema (nothing is written then).
    OSError
        The disk refused a write (e.g. no space left), or a file did not read back whole
        (:class:`faux_checks._files.IncompleteRecordError`); no partial file is left.
    """
    from .._files import write_whole

    report_dir = Path(report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": report_dir / "report.json", "html": report_dir / "report.html"}
    for p in paths.values():
        if p.exists() and not replace:
            raise InputError(f"{p} exists already; choose a new --report-dir (reports are never overwritten)")
    payload = build_report(decision=decision, reasons=reasons, check=check, kind=kind, model=model,
                           expectations=expectations, audit=audit, history=history, data=data, artifacts=artifacts,
                           rules=rules, attributes=attributes, policy=policy, policy_sha256=policy_sha256,
                           regression=regression)
    validate_report(payload)
    text = json.dumps(payload, indent=2, allow_nan=False)
    page = render_html(payload)
    if replace:
        paths["json"].unlink(missing_ok=True)    # never a new page beside the old report.json
    write_whole(paths["html"], page)
    write_whole(paths["json"], text)
    return paths
