"""Compliance report: ``report.json`` (versioned JSON schema) and a self-contained ``report.html``.

One report per gate run or drift-audit run (``kind``). The JSON is built here from plain dicts
(:meth:`CheckResult.to_dict`, :meth:`faux_checks.drift.AuditResult.to_dict`, the registry's
history), validated against ``faux_checks/report_schema.json`` before anything is written, and
the HTML is rendered from the JSON alone, so ``faux-checks report`` can re-render any stored
report. The HTML has no external resources (no CDN, no fonts, no scripts): plots are PNGs
embedded as base64, so it opens offline.

Sections (HTML ids, :data:`SECTION_IDS`): the decision and the rule that produced it; every
rule with its observed value and limit; model version and hash; data hashes, row counts,
missing and undefined counts; the policy; (audit) column drift, score drift and classification
quality; auxiliary-model quality and ROC; fAux and baseline testers side by side; LIC score
histogram with δ and flagged fraction vs δ; per-group flagged fraction; the columns that carry
the evidence over flagged individuals; Great Expectations results (gate); the history of the
flagged fraction across versions and audits; library versions and seeds.
"""

from __future__ import annotations

import base64
import html
import io
import json
import logging
import platform
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import InputError

__all__ = [
    "REPORT_SCHEMA_VERSION",
    "SECTION_IDS",
    "artifact_markdown",
    "artifact_table",
    "build_report",
    "history_points",
    "load_report",
    "render_html",
    "report_history",
    "summarise_data",
    "validate_report",
    "write_report",
]

logger = logging.getLogger(__name__)

REPORT_SCHEMA_VERSION = "1.1"
KINDS = ("gate", "audit")
_EXIT_CODES = {"passed": 0, "failed": 1, "undecided": 2}
#: Integrations whose versions a report lists next to those the check recorded.
REPORT_PACKAGES = ("great-expectations", "prefect", "mlflow", "evidently", "scipy", "matplotlib", "jsonschema")

#: HTML section ids of each kind of report, in page order.
SECTION_IDS: dict[str, tuple[str, ...]] = {
    "gate": ("decision", "rules", "model", "data", "policy", "aux", "comparison", "scores", "groups", "evidence",
             "expectations", "history", "environment"),
    "audit": ("decision", "rules", "model", "data", "policy", "drift", "score-drift", "classification", "aux",
              "comparison", "scores", "groups", "evidence", "history", "environment"),
}


# ---------------------------------------------------------------------------------- schema
@lru_cache(maxsize=1)
def _schema() -> dict:
    return json.loads(resources.files("faux_checks").joinpath("report_schema.json").read_text())


def validate_report(report: dict) -> None:
    """Validate a report dict against ``report_schema.json`` (JSON Schema 2020-12).

    Raises
    ------
    InputError
        Listing up to 8 violations, each with its JSON path.
    """
    import jsonschema

    from jsonschema.exceptions import best_match

    def leaf(error):  # a failed oneOf/anyOf/allOf: the sub-error that says what is wrong
        while error.context:
            error = best_match(error.context)
        return error

    validator = jsonschema.Draft202012Validator(_schema())
    errors = sorted((leaf(e) for e in validator.iter_errors(report)), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        shown = "; ".join(f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:200]}" for e in errors[:8])
        more = f" (+{len(errors) - 8} more)" if len(errors) > 8 else ""
        raise InputError(f"report does not match report schema {REPORT_SCHEMA_VERSION}: {shown}{more}")


def load_report(path: str | Path) -> dict:
    """Read and validate ``report.json`` (a file, or a run folder holding one).

    Raises
    ------
    InputError
        Missing or unreadable file, invalid JSON, or a schema violation.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "report.json"
    try:
        report = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"cannot read report {path}: {exc}; pass a run folder or its report.json") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(report, dict):
        raise InputError(f"{path} holds a JSON {type(report).__name__}, not a report object")
    validate_report(report)
    return report


# ---------------------------------------------------------------------------------- building
def summarise_data(frame, *, path: str | Path | None = None, name: str = "audit data") -> dict:
    """Row count, content hash and missing values per column of a batch (report ``data`` entry)."""
    from .provenance import data_sha256

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


def history_points(versions: list[dict], audits: list[dict]) -> list[dict]:
    """Flagged fraction over time: one point per gate decision and per audit.

    Parameters
    ----------
    versions : list of dict
        :meth:`Registry.history` rows (``fairness_gate``, ``fairness_flagged_fraction``,
        ``fairness_checked_at``, ``fairness_run_id``).
    audits : list of dict
        :meth:`Registry.audit_runs` rows (``decision``, ``metrics``, ``started_at``).

    Returns
    -------
    list of dict
        ``kind`` (gate/audit), ``version``, ``decision``, ``flagged_fraction`` (None when not
        computed), ``at`` (UTC ISO 8601), ``run_id``; oldest first.
    """
    def number(v):
        try:
            f = float(v)
        except (TypeError, ValueError):
            return None
        return f if f == f and abs(f) != float("inf") else None

    points = []
    for row in versions:
        decision = row.get("fairness_gate")
        if decision in _EXIT_CODES:
            points.append({"kind": "gate", "version": str(row.get("version")), "decision": decision,
                           "flagged_fraction": number(row.get("fairness_flagged_fraction")),
                           "at": row.get("fairness_checked_at") or row.get("created_at") or "",
                           "run_id": row.get("fairness_run_id") or None})
    for run in audits:
        decision = run.get("decision")
        if decision in _EXIT_CODES:
            points.append({"kind": "audit", "version": str(run.get("version")), "decision": decision,
                           "flagged_fraction": number((run.get("metrics") or {}).get("flagged_fraction_current")),
                           "at": run.get("started_at") or "", "run_id": run.get("run_id")})
    return sorted(points, key=lambda p: p["at"])


def report_history(registry, model_name: str) -> list[dict]:
    """:func:`history_points` of a registered model (``registry``: a :class:`Registry`).

    A registry that cannot be read gives an empty history (logged), never a lost report.
    """
    try:
        return history_points(registry.history(model_name), registry.audit_runs(model_name))
    except Exception as exc:  # the report is still written; the history section says it is empty
        logger.warning("history of '%s' not available for the report: %s", model_name, exc)
        return []


def _gate_rules(decision: str, reasons: list[str], check: dict | None) -> list[dict]:
    """Each rule of the gate's decision (check.py) with its observed value and limit."""
    if not check:
        return [{"rule": "check", "observed": None, "limit": None, "status": "not computed",
                 "detail": reasons[0] if reasons else "the fAux check could not be computed"}]
    policy = (check.get("provenance") or {}).get("policy") or {}
    faux = policy.get("faux") or {}
    rules = []
    aux, min_aux = check.get("aux_quality"), policy.get("min_aux_quality")
    rules.append({"rule": "min_aux_quality", "observed": aux, "limit": min_aux,
                  "status": "not computed" if aux is None else ("exceeded" if min_aux is not None and aux < min_aux
                                                                else "ok"),
                  "detail": f"auxiliary model {check.get('aux_quality_metric') or 'quality'} "
                            f"{'n/a' if aux is None else f'{aux:.3f}'} (undecided below {min_aux})"})
    n, undefined = check.get("n_individuals") or 0, check.get("n_undefined") or 0
    max_undef = faux.get("max_undefined_fraction")
    frac = undefined / n if n else None
    rules.append({"rule": "max_undefined_fraction", "observed": frac, "limit": max_undef,
                  "status": "not computed" if frac is None else (
                      "exceeded" if max_undef is not None and frac > max_undef else "ok"),
                  "detail": f"{undefined:,} of {n:,} LIC scores undefined (undecided above {max_undef})"})
    ff, mff = check.get("flagged_fraction"), check.get("max_flagged_fraction")
    rules.append({"rule": "max_flagged_fraction", "observed": ff, "limit": mff,
                  "status": "not computed" if ff is None else ("exceeded" if mff is not None and ff > mff else "ok"),
                  "detail": f"flagged fraction {'n/a' if ff is None else f'{ff:.2%}'} at δ = {check.get('delta')} "
                            f"(fails above {mff})"})
    for name, t in (check.get("testers") or {}).items():
        if t.get("gating"):
            rules.append({"rule": f"tester:{name}", "observed": t.get("value"), "limit": t.get("limit"),
                          "status": "not computed" if t.get("value") is None else ("ok" if t.get("passed") else "exceeded"),
                          "detail": t.get("summary") or ""})
    return rules


def _comparison(check: dict | None) -> list[dict]:
    """fAux and the baseline testers side by side (statistic, value, threshold, limit, passed)."""
    if not check:
        return []
    prov = check.get("provenance") or {}
    ff, mff = check.get("flagged_fraction"), check.get("max_flagged_fraction")
    rows = [{"tester": f"fAux ({prov.get('variant') or 'faux'})", "statistic": "flagged_fraction", "value": ff,
             "threshold": check.get("delta"), "limit": mff, "gating": True,
             "passed": None if ff is None or mff is None else ff <= mff,
             "summary": (f"{ff:.2%} of individuals with LIC score > δ = {check.get('delta')}" if ff is not None
                         else "not computed")}]
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
    from .provenance import installed_versions

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


def build_report(
    *,
    decision: str,
    reasons: list[str],
    check: dict | None,
    kind: str = "gate",
    model: dict | None = None,
    expectations: list[dict] | None = None,
    audit: dict | None = None,
    history: list[dict] | None = None,
    data: list[dict] | None = None,
    artifacts: dict[str, str] | None = None,
) -> dict:
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
    """
    if kind not in KINDS:
        raise InputError(f"report kind must be one of {list(KINDS)}, got {kind!r}")
    if decision not in _EXIT_CODES:
        raise InputError(f"decision must be one of {list(_EXIT_CODES)}, got {decision!r}")
    from .provenance import jsonable, utc_now

    prov = (check or {}).get("provenance") or {}
    audit_prov = (audit or {}).get("provenance") or {}
    policy = prov.get("policy") or audit_prov.get("policy")
    data = list(data or [])
    if kind == "gate":
        batches = [_batch(data[0] if data else None, check, "audit data")]
    else:
        by_name = {d.get("name"): d for d in data}
        batches = [_batch(by_name.get("reference"), (audit or {}).get("reference_check"), "reference"),
                   _batch(by_name.get("current"), check, "current")]
    model = {str(k): v for k, v in (model or {}).items()}
    now = utc_now()
    if check is not None:
        this_ff = check.get("flagged_fraction")
    else:
        this_ff = None
    points = list(history or [])
    points.append({"kind": kind, "version": str(model.get("version", "")), "decision": decision,
                   "flagged_fraction": this_ff, "at": now, "run_id": None, "this_run": True})
    rules = (audit or {}).get("limits") if kind == "audit" else _gate_rules(decision, reasons, check)
    payload = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "kind": kind,
        "created_at": now,
        "decision": decision,
        "exit_code": _EXIT_CODES[decision],
        "rule": reasons[0] if reasons else "no reason recorded",
        "reasons": list(reasons),
        "rules": rules or [],
        "model": model,
        "policy": policy,
        "policy_sha256": prov.get("policy_sha256") or audit_prov.get("policy_sha256"),
        "data": batches,
        "aux": None if not check else {"quality": check.get("aux_quality"), "metric": check.get("aux_quality_metric"),
                                       "roc": check.get("aux_roc") or {}},
        "comparison": _comparison(check),
        "expectations": list(expectations or []),
        "check": check,
        "audit": audit,
        "history": points,
        "environment": _environment(check, audit),
        "artifacts": dict(artifacts or {}),
    }
    return jsonable(payload)


def write_report(report_dir: str | Path, *, decision: str, reasons: list[str], check: dict | None,
                 model: dict | None = None, expectations: list[dict] | None = None, kind: str = "gate",
                 audit: dict | None = None, history: list[dict] | None = None, data: list[dict] | None = None,
                 artifacts: dict[str, str] | None = None) -> dict[str, Path]:
    """Write ``report.json`` (schema-validated) and ``report.html`` into ``report_dir``.

    Parameters
    ----------
    report_dir : path
        Created if absent; must not already hold a report (nothing is overwritten).
    decision, reasons, check, model, expectations, kind, audit, history, data, artifacts :
        See :func:`build_report`.

    Returns
    -------
    dict with ``json`` and ``html`` paths.

    Raises
    ------
    InputError
        If ``report_dir`` already holds report.json or report.html, or the report does not
        match the schema (nothing is written then).
    """
    report_dir = Path(report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": report_dir / "report.json", "html": report_dir / "report.html"}
    for p in paths.values():
        if p.exists():
            raise InputError(f"{p} exists already; choose a new --report-dir (reports are never overwritten)")
    payload = build_report(decision=decision, reasons=reasons, check=check, kind=kind, model=model,
                           expectations=expectations, audit=audit, history=history, data=data, artifacts=artifacts)
    validate_report(payload)
    text = json.dumps(payload, indent=2, allow_nan=False)
    page = render_html(payload)
    paths["json"].write_text(text)
    paths["html"].write_text(page)
    return paths


# ---------------------------------------------------------------------------------- plots
def _fig_to_data_uri(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _plots(report: dict) -> dict[str, str]:
    """PNG data URIs of the report's plots, by id; a plot whose data is absent is skipped."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    check = report.get("check") or {}
    audit = report.get("audit") or {}
    fairness = audit.get("fairness") or {}
    delta = check.get("delta")
    mff = check.get("max_flagged_fraction")
    plots: dict[str, str] = {}

    def vline(ax):
        if delta:
            ax.axvline(delta, color="crimson", ls="--", label=f"δ = {delta:g}")

    # LIC score histogram with δ (audit: reference and current on one grid)
    two = fairness.get("score_histograms") or {}
    hist = check.get("score_histogram") or {}
    if two.get("log10_edges"):
        fig, ax = plt.subplots(figsize=(6.4, 3.2))
        edges = [10 ** e for e in two["log10_edges"]]
        ax.stairs(two["reference"], edges, fill=True, alpha=0.45, label="reference", color="tab:blue")
        ax.stairs(two["current"], edges, fill=False, lw=1.8, label="current", color="tab:orange")
        ax.set_xscale("log")
        vline(ax)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
        ax.set_xlabel("LIC score (Δ P(y) per unit of aux output)")
        ax.set_ylabel("individuals")
        ax.set_title("LIC score distribution: reference vs current")
        plots["score_histogram"] = _fig_to_data_uri(fig)
    elif hist.get("counts"):
        fig, ax = plt.subplots(figsize=(6.4, 3.2))
        ax.stairs(hist["counts"], [10 ** e for e in hist["log10_edges"]], fill=True, alpha=0.6)
        ax.set_xscale("log")
        vline(ax)
        if delta:
            ax.legend()
        ax.set_xlabel("LIC score (Δ P(y) per unit of aux output)")
        ax.set_ylabel("individuals")
        ax.set_title("LIC score distribution")
        plots["score_histogram"] = _fig_to_data_uri(fig)

    # flagged fraction vs δ
    curves = fairness.get("flagged_fraction_vs_delta") or {}
    series = ({"reference": curves.get("reference") or {}, "current": curves.get("current") or {}} if audit
              else {"": check.get("flagged_fraction_vs_delta") or {}})
    series = {k: v for k, v in series.items() if v.get("delta")}
    if series:
        fig, ax = plt.subplots(figsize=(6.4, 3.2))
        for label, curve in series.items():
            ax.plot(curve["delta"], curve["flagged_fraction"], label=label or None)
        ax.set_xscale("log")
        vline(ax)
        if mff is not None:
            ax.axhline(mff, color="grey", ls=":", label=f"max_flagged_fraction {mff:.1%}")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
        ax.set_xlabel("δ")
        ax.set_ylabel("flagged fraction")
        ax.set_title("Flagged fraction vs δ")
        plots["flagged_vs_delta"] = _fig_to_data_uri(fig)

    # per protected group
    groups_audit = fairness.get("by_group") or []
    groups = check.get("by_group") or []
    if groups_audit:
        import numpy as np

        fig, ax = plt.subplots(figsize=(6.4, 3.2))
        names = [str(g["group"]) for g in groups_audit]
        x = np.arange(len(names))
        ax.bar(x - 0.2, [g.get("flagged_fraction_reference") or 0.0 for g in groups_audit], 0.4, label="reference")
        ax.bar(x + 0.2, [g.get("flagged_fraction_current") or 0.0 for g in groups_audit], 0.4, label="current")
        ax.set_xticks(x, names)
        if mff is not None:
            ax.axhline(mff, color="grey", ls=":", label=f"max_flagged_fraction {mff:.1%}")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
        ax.set_ylabel("flagged fraction")
        ax.set_title("Flagged fraction per protected group")
        plots["by_group"] = _fig_to_data_uri(fig)
    elif groups:
        fig, ax = plt.subplots(figsize=(6.4, 3.2))
        ax.bar([str(g.get("group")) for g in groups], [g.get("flagged_fraction") or 0.0 for g in groups],
               color="steelblue")
        if mff is not None:
            ax.axhline(mff, color="grey", ls=":", label=f"max_flagged_fraction {mff:.1%}")
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
        ax.set_ylabel("flagged fraction")
        ax.set_title("Flagged fraction per protected group")
        plots["by_group"] = _fig_to_data_uri(fig)

    # evidence columns over flagged individuals
    evidence = check.get("evidence_summary") or []
    if evidence:
        fig, ax = plt.subplots(figsize=(6.4, 0.9 + 0.28 * len(evidence)))
        ax.barh([e["column"] for e in evidence][::-1], [e["share"] for e in evidence][::-1], color="darkorange")
        ax.set_xlabel("share of mean |evidence| over flagged individuals (all, if none flagged)")
        ax.set_title("Columns that carry the dependence on the protected attribute")
        plots["evidence"] = _fig_to_data_uri(fig)

    # auxiliary model ROC
    roc = check.get("aux_roc") or {}
    if roc.get("fpr"):
        fig, ax = plt.subplots(figsize=(3.6, 3.6))
        ax.plot(roc["fpr"], roc["tpr"])
        ax.plot([0, 1], [0, 1], color="grey", ls=":")
        ax.set_xlabel("false positive rate")
        ax.set_ylabel("true positive rate")
        q = check.get("aux_quality")
        ax.set_title(f"Auxiliary model ROC (AUC {q:.3f})" if q is not None else "Auxiliary model ROC")
        plots["aux_roc"] = _fig_to_data_uri(fig)

    # column drift
    compared = [c for c in (audit.get("drift") or {}).get("columns") or [] if c.get("status") == "compared"]
    if compared:
        fig, ax = plt.subplots(figsize=(6.4, 0.9 + 0.3 * len(compared)))
        names = [f"{c['column']} ({c['role'][0]})" for c in compared][::-1]
        scores = [c.get("score") or 0.0 for c in compared][::-1]
        colours = ["crimson" if c.get("drifted") else "seagreen" for c in compared][::-1]
        ax.barh(names, scores, color=colours)
        for i, c in enumerate(compared[::-1]):
            if c.get("threshold") is not None:
                ax.plot([c["threshold"]] * 2, [i - 0.4, i + 0.4], color="black", lw=1.5)
        ax.set_xlabel("drift score (bar; red = drifted) and threshold (black tick); f/p/o = feature/protected/other")
        ax.set_title("Column drift, current vs reference")
        plots["drift"] = _fig_to_data_uri(fig)

    # history of the flagged fraction
    points = [p for p in report.get("history") or [] if p.get("flagged_fraction") is not None]
    if points:
        fig, ax = plt.subplots(figsize=(6.4, 3.2))
        colour = {"passed": "seagreen", "failed": "crimson", "undecided": "goldenrod"}
        for kind, marker in (("gate", "o"), ("audit", "^")):
            idx = [i for i, p in enumerate(points) if p["kind"] == kind]
            if idx:
                ax.scatter(idx, [points[i]["flagged_fraction"] for i in idx], marker=marker, s=55,
                           c=[colour.get(points[i]["decision"], "grey") for i in idx], label=kind, edgecolors="black")
        ax.plot(range(len(points)), [p["flagged_fraction"] for p in points], color="grey", lw=0.8, zorder=0)
        ax.set_xticks(range(len(points)), [f"v{p['version']}\n{p['kind']}" + ("*" if p.get("this_run") else "")
                                           for p in points], fontsize=7)
        if mff is not None:
            ax.axhline(mff, color="grey", ls=":", label=f"max_flagged_fraction {mff:.1%}")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
        ax.set_ylabel("flagged fraction")
        ax.set_title("Flagged fraction across versions and audits (* = this run)")
        plots["history"] = _fig_to_data_uri(fig)
    return plots


# ---------------------------------------------------------------------------------- HTML
def _fmt(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return str(v)


def _table(rows: list[dict], columns: list[str] | None = None) -> str:
    if not rows:
        return "<p><em>none</em></p>"
    columns = columns or list(dict.fromkeys(k for r in rows for k in r))
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(r.get(c)))}</td>" for c in columns) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _kv(d: dict) -> str:
    return _table([{"field": k, "value": v} for k, v in d.items()], ["field", "value"]) if d else "<p><em>none</em></p>"


def _figure(plots: dict[str, str], key: str, caption: str) -> str:
    if key not in plots:
        return f"<p class='note'>No data for the {html.escape(caption.lower())} plot.</p>"
    return (f"<figure><img alt='{html.escape(caption)}' src='{plots[key]}'/>"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _pct(v) -> str:
    return "n/a" if v is None else f"{v:.2%}"


def _status_class(status: str) -> str:
    return {"ok": "ok", "exceeded": "bad", "not computed": "warn"}.get(status, "")


def _section(sid: str, title: str, body: str) -> str:
    return f"<section id='{sid}'><h2>{html.escape(title)}</h2>{body}</section>"


def render_html(report: dict[str, Any]) -> str:
    """Self-contained HTML of a report dict (:func:`build_report`); no external resources."""
    kind = report.get("kind", "gate")
    check = report.get("check") or {}
    audit = report.get("audit") or {}
    decision = report.get("decision", "undecided")
    colour = {"passed": "#1b7f3b", "failed": "#b3261e"}.get(decision, "#8a6d00")
    plots = _plots(report)
    titles = {
        "decision": "Decision", "rules": "Rules and limits", "model": "Model", "data": "Data",
        "policy": "Policy", "drift": "Column drift", "score-drift": "Fairness drift",
        "classification": "Classification quality", "aux": "Auxiliary model", "comparison": "fAux and baselines",
        "scores": "LIC scores", "groups": "Protected groups", "evidence": "Evidence",
        "expectations": "Great Expectations", "history": "History", "environment": "Environment",
    }
    body: dict[str, str] = {}

    reasons = report.get("reasons") or []
    body["decision"] = (
        f"<p class='decision' style='background:{colour}'>{html.escape(kind)} decision: "
        f"<b>{html.escape(decision.upper())}</b> (exit code {report.get('exit_code')})</p>"
        f"<p><b>Rule that produced it:</b> {html.escape(report.get('rule', ''))}</p>"
        + ("<details><summary>All reasons and notes</summary><ul>"
           + "".join(f"<li>{html.escape(r)}</li>" for r in reasons) + "</ul></details>" if len(reasons) > 1 else ""))
    rules = report.get("rules") or []
    body["rules"] = "<table><thead><tr><th>rule</th><th>observed</th><th>limit</th><th>status</th><th>detail</th></tr>" \
        "</thead><tbody>" + "".join(
            f"<tr class='{_status_class(r.get('status', ''))}'><td>{html.escape(str(r.get('rule')))}</td>"
            f"<td>{html.escape(_fmt(r.get('observed')))}</td><td>{html.escape(_fmt(r.get('limit')))}</td>"
            f"<td>{html.escape(str(r.get('status')))}</td><td>{html.escape(str(r.get('detail', '')))}</td></tr>"
            for r in rules) + "</tbody></table>"
    body["model"] = _kv(report.get("model") or {})

    batches = report.get("data") or []
    body["data"] = _table(batches, ["name", "n_rows", "n_individuals", "n_missing_protected", "n_undefined", "sha256",
                                    "path"]) + "".join(
        f"<p><b>{html.escape(str(b.get('name')))}</b>: missing values by column: "
        f"{html.escape(', '.join(f'{k} {v:,}' for k, v in (b.get('missing_by_column') or {}).items()) or 'none')}"
        + (f"; entirely empty: {html.escape(', '.join(b['empty_columns']))}" if b.get("empty_columns") else "")
        + "</p>" for b in batches) + (
        "<p class='note'>n_individuals: rows the fAux check scored (rows with a protected value, or a seeded "
        "sample of them: policy max_rows" + (", [audit] max_rows). " + html.escape(
            ((report.get("audit") or {}).get("fairness") or {}).get("sample_note") or "") if kind == "audit" else ").")
        + " n_undefined: scored rows whose LIC score is undefined.</p>")

    policy = report.get("policy") or {}
    faux = policy.get("faux") or {}
    summary = {"name": policy.get("name"), "protected": policy.get("protected"), "label": policy.get("label"),
               "δ (delta)": faux.get("delta"), "max_flagged_fraction": faux.get("max_flagged_fraction"),
               "min_aux_quality": policy.get("min_aux_quality"), "variant": faux.get("variant"),
               "sha256": report.get("policy_sha256")}
    if kind == "audit":
        summary.update({f"audit.{k}": v for k, v in (policy.get("audit") or {}).items()})
    body["policy"] = (_kv(summary) + "<details><summary>Full policy (JSON)</summary><pre>"
                      + html.escape(json.dumps(policy, indent=2)) + "</pre></details>") if policy else \
        "<p>No policy recorded (the check did not run).</p>"

    if kind == "audit":
        drift = audit.get("drift") or {}
        link = drift.get("evidently_html")
        body["drift"] = (
            f"<p>{drift.get('n_drifted', 0)} of {drift.get('n_compared', 0)} feature/protected columns drifted "
            f"(share {_pct(drift.get('drifted_share'))}). Reference {drift.get('n_reference', 0):,} rows, current "
            f"{drift.get('n_current', 0):,} rows."
            + (f" Evidently's own report: <a href='{html.escape(link)}'>{html.escape(link)}</a> (same folder)."
               if link else "") + "</p>"
            + (f"<p class='bad'>{html.escape(drift['error'])}</p>" if drift.get("error") else "")
            + _figure(plots, "drift", "Column drift")
            + "<h3>Skipped columns</h3>" + _table(drift.get("skipped") or [], ["column", "reason"])
            + "<h3>All columns</h3>" + _table(drift.get("columns") or [], [
                "column", "role", "status", "kind", "method", "score", "threshold", "drifted", "reference_missing",
                "current_missing", "note"]))
        fairness = audit.get("fairness") or {}
        overall = {"group": "(all)", "n_reference": (audit.get("reference_check") or {}).get("n_individuals"),
                   "n_current": check.get("n_individuals"),
                   "flagged_fraction_reference": fairness.get("flagged_fraction_reference"),
                   "flagged_fraction_current": fairness.get("flagged_fraction_current"),
                   "increase": fairness.get("increase"), "compared": True, "note": ""}
        body["score-drift"] = (
            (f"<p class='bad'>{html.escape(fairness['error'])}</p>" if fairness.get("error") else "")
            + _kv({"fAux decision (reference)": fairness.get("decision_reference"),
                   "fAux decision (current)": fairness.get("decision_current"),
                   "aux quality (reference)": fairness.get("aux_quality_reference"),
                   "aux quality (current)": fairness.get("aux_quality_current"),
                   "KS statistic (LIC scores)": fairness.get("ks_statistic"),
                   "KS p-value": fairness.get("ks_pvalue"),
                   "scores compared": f"{fairness.get('n_reference_scores', 0):,} vs "
                                      f"{fairness.get('n_current_scores', 0):,}",
                   "sampling": fairness.get("sample_note") or "all rows"})
            + "<h3>Flagged fraction, reference vs current</h3>"
            + _table([overall] + list(fairness.get("by_group") or []), [
                "group", "n_reference", "n_current", "flagged_fraction_reference", "flagged_fraction_current",
                "increase", "compared", "note"]))
        cls = audit.get("classification") or {}
        if cls.get("status") == "computed":
            rows = [{"metric": k, "reference": v.get("reference"), "current": v.get("current"),
                     "change": (None if v.get("reference") is None or v.get("current") is None
                                else v["current"] - v["reference"])} for k, v in (cls.get("metrics") or {}).items()]
            link = cls.get("evidently_html")
            body["classification"] = (
                f"<p>Target model vs label on {cls.get('n_reference', 0):,} reference and {cls.get('n_current', 0):,} "
                "current rows." + (f" Evidently's own report: <a href='{html.escape(link)}'>{html.escape(link)}</a>."
                                   if link else "") + "</p>" + _table(rows, ["metric", "reference", "current", "change"]))
        else:
            body["classification"] = f"<p>Not computed: {html.escape(cls.get('reason') or 'no label')}</p>"

    aux = report.get("aux") or {}
    body["aux"] = (_kv({"quality": aux.get("quality"), "metric": aux.get("metric")})
                   + _figure(plots, "aux_roc", "Auxiliary model ROC")) if aux else \
        "<p>The auxiliary model was not trained (the check did not run).</p>"
    body["comparison"] = _table(report.get("comparison") or [], [
        "tester", "statistic", "value", "threshold", "limit", "gating", "passed", "summary"])
    body["scores"] = (
        (f"<p>Flagged fraction {_pct(check.get('flagged_fraction'))} at δ = {check.get('delta')} over "
         f"{check.get('n_individuals', 0):,} individuals ({check.get('n_undefined', 0):,} undefined scores).</p>"
         if check else "<p>No scores: the check did not run.</p>")
        + _figure(plots, "score_histogram", "LIC score histogram with δ")
        + _figure(plots, "flagged_vs_delta", "Flagged fraction vs δ"))
    body["groups"] = _table(check.get("by_group") or [], [
        "group", "n", "flagged", "flagged_fraction", "undefined", "mean_score", "p90_score"]) + _figure(
        plots, "by_group", "Flagged fraction per protected group")
    top = [{"row": t["row"], "lic_score": t["lic_score"], "probability": t["probability"],
            "top_evidence": ", ".join(f"{e['column']} ({e['evidence']:+.3g})" for e in t["top_evidence"])}
           for t in check.get("top_flagged") or []]
    body["evidence"] = (_figure(plots, "evidence", "Top evidence columns over flagged individuals")
                        + "<h3>Top flagged individuals</h3>" + _table(top))
    body["expectations"] = _table(report.get("expectations") or [])
    history = report.get("history") or []
    body["history"] = _figure(plots, "history", "Flagged fraction across versions and audits") + _table(
        history, ["at", "kind", "version", "decision", "flagged_fraction", "run_id"])
    env = report.get("environment") or {}
    body["environment"] = (
        _kv({"python": env.get("python"), "platform": env.get("platform"), **(env.get("seeds") or {})})
        + "<h3>Library versions</h3>" + _kv(env.get("packages") or {})
        + ("<h3>Other evidence in this folder</h3><ul>" + "".join(
            f"<li>{html.escape(k)}: <a href='{html.escape(v)}'>{html.escape(v)}</a></li>"
            for k, v in report["artifacts"].items()) + "</ul>" if report.get("artifacts") else "")
        + "<details><summary>Provenance of the check (JSON)</summary><pre>" + html.escape(json.dumps(
            {k: v for k, v in (check.get("provenance") or {}).items() if k != "policy"}, indent=2)) + "</pre></details>")

    ids = SECTION_IDS.get(kind, SECTION_IDS["gate"])
    nav = "<nav>" + " · ".join(f"<a href='#{i}'>{html.escape(titles[i])}</a>" for i in ids) + "</nav>"
    model = report.get("model") or {}
    heading = (f"<h1>Individual-fairness {'drift audit' if kind == 'audit' else 'gate'} report</h1>"
               f"<p class='sub'>{html.escape(str(model.get('name', '')))} "
               f"{('v' + html.escape(str(model['version']))) if model.get('version') else ''} · "
               f"{html.escape(report.get('created_at', ''))} · report schema {html.escape(report.get('schema_version', ''))}"
               "</p>")
    sections = "".join(_section(i, titles[i], body.get(i, "")) for i in ids)
    note = ("<p class='note'>Method: fAux (Castiglione, Wu, Srinivasa, Prince 2022, arXiv 2210.06288), eq. 9: "
            "LIC score = ‖∇f_tar · J⁺‖∞ with J the auxiliary model's input Jacobian; an individual is flagged "
            "when the score exceeds δ. Drift: Evidently per-column tests; score drift: two-sample "
            "Kolmogorov-Smirnov test.</p>")
    style = ("body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;max-width:1100px;margin:1.5em auto;"
             "padding:0 1em;color:#222;line-height:1.4}"
             "h1{margin-bottom:0.1em}.sub{color:#666;margin-top:0}h2{border-bottom:1px solid #ddd;padding-bottom:3px;"
             "margin-top:1.6em}nav{font-size:0.85em;margin:0.8em 0;padding:0.5em;background:#f5f5f5}"
             "nav a{color:#0b5cad;text-decoration:none}"
             "table{border-collapse:collapse;font-size:0.85em;margin:0.4em 0;display:block;overflow-x:auto;"
             "max-width:100%}td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top;text-align:left}"
             "td{overflow-wrap:anywhere;max-width:38em}th{background:#f0f0f0}tr.bad td,p.bad{background:#fde8e6}tr.warn td{background:#fff6d6}"
             "tr.ok td{background:#eef8ef}.decision{color:white;padding:0.6em;font-size:1.3em;border-radius:4px}"
             "figure{display:inline-block;margin:0.5em;vertical-align:top}figure img{max-width:100%}"
             "figcaption{font-size:0.8em;color:#555;text-align:center}"
             "pre{background:#f5f5f5;padding:0.5em;overflow-x:auto;font-size:0.8em}.note{color:#555;font-size:0.85em}")
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>fairness {html.escape(kind)} report: {html.escape(decision)}</title>"
            f"<style>{style}</style></head><body>{heading}{nav}{sections}{note}</body></html>")


# ---------------------------------------------------------------------------------- Prefect artifacts
def artifact_markdown(report: dict, *, report_dir: str | Path | None = None) -> str:
    """Markdown summary of a report (a Prefect markdown artifact)."""
    model = report.get("model") or {}
    check = report.get("check") or {}
    lines = [f"## {report.get('kind')} · {model.get('name', '')} v{model.get('version', '')}: "
             f"**{report.get('decision')}**", "", f"**Rule:** {report.get('rule')}", ""]
    if check:
        lines.append(f"- flagged fraction: {_pct(check.get('flagged_fraction'))} at δ = {check.get('delta')} "
                     f"(n = {check.get('n_individuals', 0):,})")
        lines.append(f"- aux quality: {_fmt(check.get('aux_quality'))} ({check.get('aux_quality_metric') or ''})")
    audit = report.get("audit") or {}
    if audit:
        drift = audit.get("drift") or {}
        fairness = audit.get("fairness") or {}
        lines.append(f"- drifted columns: {drift.get('n_drifted', 0)} of {drift.get('n_compared', 0)}; skipped: "
                     + (", ".join(f"{s['column']} ({s['reason']})" for s in drift.get("skipped") or []) or "none"))
        lines.append(f"- flagged fraction reference → current: {_pct(fairness.get('flagged_fraction_reference'))} → "
                     f"{_pct(fairness.get('flagged_fraction_current'))}; KS p = {_fmt(fairness.get('ks_pvalue'))}")
    if report_dir is not None:
        lines.append(f"- report: {Path(report_dir) / 'report.html'}")
    return "\n".join(lines)


def artifact_table(report: dict) -> list[dict]:
    """One row per rule/limit (a Prefect table artifact): rule, observed, limit, status."""
    return [{"rule": str(r.get("rule")), "observed": _fmt(r.get("observed")), "limit": _fmt(r.get("limit")),
             "status": str(r.get("status")), "detail": str(r.get("detail", ""))[:300]}
            for r in report.get("rules") or []]
