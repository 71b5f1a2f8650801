"""The self-contained ``report.html``, rendered from the report dict with a Jinja2 template.

The template (``templates/report.html.j2``) lays out the sections; :func:`render_html` prepares
what they show. The page has no external resources (no CDN, no fonts, no scripts): plots are
PNGs embedded as base64 (:mod:`.plots`), so it opens offline.

Numbers follow one rule (:mod:`._format`): shares of individuals or columns are percentages,
everything else a plain number; each rule's value is named for what it is (a KS p-value reads
"KS p-value ...", never "observed"). A team restyles the page by editing the template; the values
reach it already formatted.

Sections (HTML ids, :data:`SECTION_IDS`): the decision and the rule that produced it; every
rule with the statistic it reads, its value and limit; model version and hash; data hashes, row counts,
missing and undefined counts; the policy; (audit) column drift, score drift and classification
quality; auxiliary-model quality and ROC; fAux and baseline testers side by side; LIC score
histogram with δ and flagged fraction vs δ; per-group flagged fraction; the columns that carry
the evidence over flagged individuals; Great Expectations results (gate); the history of the
flagged fraction across versions and audits; library versions and seeds.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from ._format import cell, expectation_statistic, fmt, is_share_statistic, pct, rule_statistic, statistic_cell
from .limitations import limitations
from .protected_form import protected_form_line
from .plots import render_plots, report_unit

__all__ = ["SECTION_IDS", "render_html", "safe_href"]

#: URL schemes a report links to; anything else (``javascript:``, ``data:``, ``vbscript:``) is shown as text.
LINK_SCHEMES = ("http", "https", "file")
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):")

#: HTML section ids of each kind of report, in page order.
SECTION_IDS: dict[str, tuple[str, ...]] = {
    "gate": ("decision", "rules", "model", "data", "policy", "aux", "comparison", "scores", "groups", "regression",
             "evidence", "expectations", "history", "environment"),
    "audit": ("decision", "rules", "model", "data", "policy", "drift", "score-drift", "classification", "aux",
              "comparison", "scores", "groups", "evidence", "history", "environment"),
}
TITLES = {
    "decision": "Decision", "rules": "Rules and limits", "model": "Model", "data": "Data",
    "policy": "Policy", "drift": "Column drift", "score-drift": "Fairness drift",
    "classification": "Classification quality", "aux": "Auxiliary model", "comparison": "fAux and baselines",
    "scores": "LIC scores", "groups": "Protected groups", "evidence": "Evidence",
    "expectations": "Great Expectations", "history": "History", "environment": "Environment",
    "attributes": "Protected attributes", "limitations": "Limitations of this run",
    "regression": "Against earlier versions",
}
DECISION_COLOURS = {"passed": "#1b7f3b", "failed": "#b3261e"}
UNDECIDED_COLOUR = "#8a6d00"
STATUS_CLASSES = {"ok": "ok", "exceeded": "bad", "not met": "warn", "inconclusive": "warn", "not judged": "warn",
                  "not computed": "warn"}


def safe_href(url) -> str | None:
    """``url`` when a report may link to it (http, https, file or a relative path), else None (shown as text).

    A ``report.json`` is a file anyone can edit, and ``faux-checks report`` renders it (a
    ``javascript:`` link in it worked). A URL holding a control character (a browser drops tabs and
    newlines, so ``java\tscript:`` reads as ``javascript:``) is refused, and the scheme is read after
    leading spaces (``" javascript:"``), in any case.
    """
    if url is None or not isinstance(url, str) or not url.strip():
        return None
    if any(ord(ch) < 0x20 or ch == "\x7f" for ch in url):
        return None            # a browser drops these from a URL: the link would not be what it shows
    scheme = _SCHEME.match(url.strip())
    if scheme is not None and scheme.group(1).lower() not in LINK_SCHEMES:
        return None
    return url


def render_html(report: dict[str, Any]) -> str:
    """Self-contained HTML of a report dict (:func:`faux_checks.report.build.build_report`); no external resources."""
    return _template().render(**_page(report))


@lru_cache(maxsize=1)
def _template():
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("faux_checks.report", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(
        fmt=fmt, pct=pct, cell=cell, thousands=lambda v: f"{v:,}",
        status_class=lambda status: STATUS_CLASSES.get(status, ""), safe_href=safe_href,
        columns_of=lambda rows: list(dict.fromkeys(k for r in rows for k in r)),     # every key, first seen first
        field_rows=lambda d: [{"field": k, "value": cell(v, k)} for k, v in d.items()],
    )
    return env.get_template("report.html.j2")


SCORE_UNITS: dict[str | None, str] = {           # looked up with a report's variant (None: not recorded)
    "swap": "probability points: the estimated change of ŷ if only the protected attribute changed",
    "faux": "change of ŷ per unit of the auxiliary model's log-odds (eq. 9)",
    "ig": "change of ŷ per unit of the auxiliary model's log-odds (eq. 9, integrated gradients)",
    "ng": "|cos| between the two gradients, in [0, 1] (eq. 10)",
    "projection": "change of ŷ per unit step along the aux gradient (Fig. 1 reading)",
}


def _top_row(entry: dict) -> dict[str, Any]:
    """One row of the most affected individuals: ŷ now and, for the swap reading, under the estimated change of c."""
    row = {"row": entry["row"], "LIC score": entry["lic_score"], "ŷ now": entry["probability"]}
    if "counterfactual_probability" in entry:
        row["ŷ if only c changed"] = entry["counterfactual_probability"]
        row["to group"] = entry.get("counterfactual_group")
    parts = entry.get("parts")
    if parts:                                   # the swap reading: f(x′) − f(x) in its three parts (gate/decompose.py)
        for name in ("direct", "proxies", "admissible"):
            row[f"Δŷ {name}"] = parts.get(name)
        row["reasons"] = reason_text(entry.get("reasons") or [])
    else:
        row["top evidence"] = ", ".join(f"{e['column']} ({e['evidence']:+.3g})" for e in entry["top_evidence"])
    return row


def _decomposition_rows(summary: dict | None) -> list[dict]:
    """The decomposition's summary as table rows: part, mean and mean |·| over the flagged individuals."""
    if not summary:
        return []
    return [{"part": name, "mean Δŷ": (summary.get(name) or {}).get("mean"),
             "mean |Δŷ|": (summary.get(name) or {}).get("mean_abs")}
            for name in ("direct", "proxies", "admissible", "total") if name in summary]


def reason_text(reasons: list[dict]) -> str:
    """The reason list of one person as a line an adverse-action reviewer reads (parts of zero change omitted).

    ``"proxies −0.212: relationship (−0.150), occupation (−0.041); direct −0.060: sex (−0.060)"``, the parts in the
    order of :data:`faux_checks.gate.decompose.PARTS`, columns by size (the list is stable across runs).
    """
    out = []
    for r in reasons:
        if not r.get("change"):
            continue
        cols = ", ".join(f"{c['column']} ({c['evidence']:+.3f})" for c in r.get("columns") or [])
        out.append(f"{r['part']} {r['change']:+.3f}" + (f": {cols}" if cols else ""))
    return "; ".join(out) or "no change"


ROLE_TEXT: dict[str | None, str] = {             # looked up with a record's role (None: not recorded)
    "declared": "held: declared admissible by the policy",
    "independent": "held: distributed alike in every group (chi-square test of independence, p ≥ 0.01)",
    "uninformative": "held: tells the auxiliary model nothing about the protected attribute on its held-out rows",
    "moves": "moves with the protected attribute",
}


def _role_row(entry: dict) -> dict[str, Any]:
    """One row of "which columns the counterfactual moves, and why"."""
    return {"column": entry.get("column"), "counterfactual": ROLE_TEXT.get(entry.get("role"), entry.get("role")),
            "independence p-value": entry.get("p_value"), "informativeness z": entry.get("informative_z")}


def _page(report: dict[str, Any]) -> dict[str, Any]:
    """What the template shows, section by section (every value already chosen; the template lays out)."""
    kind = report.get("kind", "gate")
    check = report.get("check") or {}
    audit = report.get("audit") or {}
    decision = report.get("decision", "undecided")
    policy = report.get("policy") or {}
    faux = policy.get("faux") or {}
    unit = report_unit(report)                   # a value target's unit; None: probability points
    policy_summary = {"name": policy.get("name"), "protected": policy.get("protected"),
                      "form of the protected attribute": report.get("protected_form")
                      or protected_form_line(check.get("provenance"), policy.get("protected")),
                      "label": policy.get("label"),
                      "δ (delta)": faux.get("delta"), "max_flagged_fraction": faux.get("max_flagged_fraction"),
                      "min_aux_quality": policy.get("min_aux_quality"), "variant": faux.get("variant"),
                      **{f"decision.{k}": v for k, v in (policy.get("decision") or {}).items()},
                      "score unit": SCORE_UNITS.get(faux.get("variant"), "–") if unit is None else
                      f"{unit}: the estimated change of the predicted value if only the protected attribute changed",
                      "admissible columns": ", ".join(faux.get("admissible") or []) or "none (strictest)",
                      "sha256": report.get("policy_sha256")}
    if kind == "audit":
        policy_summary.update({f"audit.{k}": v for k, v in (policy.get("audit") or {}).items()})
    env = report.get("environment") or {}
    return {
        "kind": kind,
        "decision": decision,
        "colour": DECISION_COLOURS.get(decision, UNDECIDED_COLOUR),
        "exit_code": report.get("exit_code"),
        "rule": report.get("rule", ""),
        "reasons": report.get("reasons") or [],
        "rules": _rule_rows(report.get("rules") or [], check.get("testers") or {}, _protected_drift_label(audit)),
        "model": _model_rows(report),
        "limitations": limitations(report),
        "created_at": report.get("created_at", ""),
        "schema_version": report.get("schema_version", ""),
        "batches": [dict(b, missing_text=", ".join(f"{k} {v:,}" for k, v in (b.get("missing_by_column") or {}).items())
                         or "none", empty_text=", ".join(b.get("empty_columns") or []))
                    for b in report.get("data") or []],
        "sample_note": (audit.get("fairness") or {}).get("sample_note") or "",
        "policy": policy,
        "policy_summary": policy_summary,
        "policy_json": json.dumps(policy, indent=2),
        **(_audit_sections(audit, check) if kind == "audit" else {}),
        "aux": report.get("aux") or {},
        "comparison": _comparison_rows(report.get("comparison") or []),
        "check": check,
        "flagged_text": flagged_sentences(check, unit),
        "unit": unit,
        "top_flagged": [_top_row(t) for t in check.get("top_flagged") or []],
        "decomposition": _decomposition_rows(check.get("decomposition_summary")),
        "column_roles": [_role_row(r) for r in ((check.get("provenance") or {}).get("swap") or {}).get("columns") or []],
        "sensitivity": ((check.get("provenance") or {}).get("swap") or {}).get("sensitivity") or [],
        "expectations": _expectation_rows(report.get("expectations") or []),
        "history": [_history_row(h) for h in report.get("history") or []],
        "power": _power_lines(check),
        **_regression_rows(report.get("regression") or []),
        "environment": {"python": env.get("python"), "platform": env.get("platform"), **(env.get("seeds") or {})},
        "packages": env.get("packages") or {},
        "artifacts": report.get("artifacts") or {},
        "provenance_json": json.dumps({k: v for k, v in (check.get("provenance") or {}).items() if k != "policy"},
                                      indent=2),
        "plots": render_plots(report),
        "sections": [(sid, TITLES[sid]) for sid in _section_ids(kind, report)],
        **_attribute_sections(report),
    }


def _model_rows(report: dict[str, Any]) -> dict[str, Any]:
    """The model table: what the report names, plus the format and how the target was queried."""
    model = dict(report.get("model") or {})
    prov = (report.get("check") or {}).get("provenance") or {}
    if "format" not in model and "model_format" not in model:
        fmt = prov.get("model_format")
        if fmt is None and model.get("path"):
            try:
                from ..inputs.models import model_format

                fmt = model_format(model["path"])
            except Exception:       # noqa: BLE001 - the file moved since the run: the table says so rather than guess
                fmt = "not readable now"
        if fmt is not None:
            model["format"] = fmt
    if prov.get("target_access"):
        model["target access"] = prov["target_access"]
    return model


def _section_ids(kind: str, report: dict[str, Any]) -> tuple[str, ...]:
    """The page's sections: :data:`SECTION_IDS`, plus "attributes" after "rules" for several protected attributes,
    and "limitations" after "rules"."""
    ids = SECTION_IDS.get(kind, SECTION_IDS["gate"])
    if not report.get("regression"):
        ids = tuple(i for i in ids if i != "regression")
    if "limitations" not in ids and "rules" in ids:
        at = ids.index("rules") + 1
        ids = ids[:at] + ("limitations",) + ids[at:]
    if not report.get("attributes"):
        return ids
    at = ids.index("rules") + 1
    return ids[:at] + ("attributes",) + ids[at:]


def _power_lines(check: dict[str, Any]) -> list[str]:
    """The power statement and the proxy capacity of the check (its provenance), as sentences; empty when absent."""
    prov = check.get("provenance") or {}
    power, capacity = prov.get("power") or {}, prov.get("proxy_capacity")
    lines = [f"Power: {power['statement']}"] if power.get("statement") else []
    if capacity:
        lines.append(f"Proxy capacity: {capacity if isinstance(capacity, str) else capacity.get('statement', capacity)}")
    return lines


def _history_row(point: dict[str, Any]) -> dict[str, Any]:
    """A history point with its churn against the version before it (``churn``: newly flagged, resolved, against)."""
    churn = point.get("churn") or {}
    sha = point.get("policy_sha256")
    return {**point, "δ": point.get("delta"), "policy": sha[:12] if sha else None,
            "churn against": f"v{churn['against']}" if churn.get("against") else None,
            "newly flagged": churn.get("newly_flagged"), "resolved": churn.get("resolved")}


def _regression_rows(comparisons: list[dict[str, Any]]) -> dict[str, Any]:
    """The "Against earlier versions" section: one row per comparison and, where compared, its by-group table."""
    rows: list[dict[str, Any]] = []
    groups: list[dict[str, Any]] = []
    for c in comparisons:
        change, rule = c.get("change") or {}, c.get("rule") or {}
        lo, hi = (change.get("change_interval") or [None, None])[:2]
        nlo, nhi = (change.get("newly_flagged_interval") or [None, None])[:2]
        rows.append({
            "against": c.get("role"), "version": c.get("compared_with") or "–", "rows": change.get("n"),
            "newly flagged": change.get("newly_flagged"), "resolved": change.get("resolved"),
            "still flagged": change.get("still_flagged"),
            "change of flagged fraction": pct(change["change"]) if change else None,
            "paired CI": f"{pct(lo)} – {pct(hi)}" if change else None,
            "newly flagged share": f"{pct(change['newly_flagged_fraction'])} ({pct(nlo)} – {pct(nhi)})" if change else None,
            "rule": f"{rule.get('status')}: {rule.get('detail')}" if rule else "not gated (no max_newly_flagged_fraction)"
            if c.get("role") == "deployed" else "reported only",
            "note": c.get("note")})
        if change.get("by_group") and all(g["version"] != c.get("compared_with") for g in groups):
            groups.append({"against": c.get("role"), "version": c.get("compared_with"), "rows": change["by_group"]})
    return {"regression_rows": rows, "regression_groups": groups}


def _attribute_sections(report: dict[str, Any]) -> dict[str, Any]:
    """The "Protected attributes" section: one summary row per attribute, then its groups and cells."""
    sections = report.get("attributes") or []
    deciding = ((report.get("policy") or {}).get("protected")
                or (((report.get("check") or {}).get("provenance") or {}).get("policy") or {}).get("protected"))
    rows = []
    for a in sections:
        iv = a.get("interval") or {}
        rows.append({"attribute": a.get("attribute"), "kind": a.get("kind"), "decision": a.get("decision"),
                     "flagged fraction": pct(a.get("flagged_fraction")),
                     "95% CI": (f"{pct(iv.get('lower'))}–{pct(iv.get('upper'))}"
                                if iv.get("lower") is not None and iv.get("upper") is not None else "–"),
                     "audited": a.get("n_individuals"), "aux quality": a.get("aux_quality"),
                     "first reason": (a.get("reasons") or [""])[0]})
    details = [{"attribute": a.get("attribute"), "key": a.get("key"), "components": a.get("components") or [],
                "decision": a.get("decision"), "cells": a.get("cells") or [],
                "by_group": (a.get("check") or {}).get("by_group") or []} for a in sections]
    return {"attribute_rows": rows, "attribute_sections": details, "deciding_attribute": deciding or "–"}


def _protected_drift_label(audit: dict) -> dict[str, str]:
    """The protected attribute's drift rule named by its test (e.g. "Z-test p_value of 'sex' (Evidently)")."""
    for c in ((audit or {}).get("drift") or {}).get("columns") or []:
        if c.get("role") == "protected" and c.get("method"):
            return {"protected_drift": f"{c['method']} of '{c.get('column')}' (Evidently)"}
    return {}


def _rule_rows(rules: list[dict], testers: dict, labels: dict[str, str] | None = None) -> list[dict]:
    """Each rule with the statistic its value is, value and limit formatted by the number rule."""
    out = []
    for r in rules:
        label, share = rule_statistic(r, testers)
        label = (labels or {}).get(str(r.get("rule")), label)
        show = pct if share else fmt
        out.append({**r, "statistic": label, "value": show(r.get("observed")), "limit": show(r.get("limit"))})
    return out


def _comparison_rows(rows: list[dict]) -> list[dict]:
    """fAux and the baselines: value and limit as shares where the statistic is one; the per-individual threshold
    (a score, e.g. δ or a gradient norm) only for per-individual testers."""
    out = []
    for r in rows:
        statistic = r.get("statistic")
        per_individual = str(statistic).endswith("flagged_fraction")
        out.append({"tester": r.get("tester"), "statistic": statistic, "value": statistic_cell(r.get("value"), statistic),
                    "per-individual threshold": fmt(r.get("threshold")) if per_individual else "–",
                    "limit": statistic_cell(r.get("limit"), statistic), "gating": r.get("gating"),
                    "passed": r.get("passed"), "summary": r.get("summary")})
    return out


def _expectation_rows(rows: list[dict]) -> list[dict]:
    """Great Expectations results: each expectation's statistic named, its value formatted by the number rule."""
    out = []
    for r in rows:
        kind = str(r.get("type", ""))
        statistic = expectation_statistic(kind)
        value = r.get("observed_value")
        out.append({"expectation": kind, "statistic": statistic.replace("_", " "),
                    "value": pct(value) if is_share_statistic(statistic) else fmt(value),
                    "success": r.get("success"), "gating": r.get("gating"), "exception": r.get("exception")})
    return out


def flagged_sentences(check: dict, unit: str | None = None) -> list[str]:
    """The flagged fraction both ways, its interval, and how far it moved across auxiliary-model seeds; δ in
    ``unit`` for a value target (:func:`~faux_checks.report.plots.report_unit`)."""
    if not check or check.get("flagged_fraction") is None:
        return ["No scores: the check did not run."]
    iv = check.get("interval") or {}
    n, undefined = check.get("n_individuals") or 0, check.get("n_undefined") or 0
    ci = (f" ({iv['confidence']:.0%} CI {iv['lower']:.2%}–{iv['upper']:.2%})"
          if iv.get("lower") is not None and iv.get("upper") is not None else "")
    out = [f"Flagged fraction {check['flagged_fraction']:.2%}{ci}: LIC score > δ = {check.get('delta')}{' ' + unit if unit else ''} or undefined "
           f"(counted as flagged), over all {n:,} audited individuals. Over the defined scores only: "
           f"{pct(check.get('flagged_fraction_defined'))} ({undefined:,} undefined left out)."]
    seeds = iv.get("seeds")
    if seeds:
        fractions = ", ".join(f"{f:.2%}" for f in seeds["fractions"])
        out.append(f"Across {len(seeds['fractions'])} auxiliary-model seeds ({', '.join(map(str, seeds['seeds']))}), on "
                   f"{seeds['rows']:,} rows, the flagged fraction was {fractions}: it moved by {seeds['spread']:.2%} "
                   "(the interval is widened by that much beyond the one over individuals).")
    elif iv:
        out.append("The auxiliary model's seed was not varied (decision.aux_seeds = 1, or a given auxiliary model): "
                   "the interval covers the individuals only.")
    return out


def _audit_sections(audit: dict, check: dict) -> dict[str, Any]:
    """The audit's own sections: column drift, fairness drift, classification quality."""
    fairness = audit.get("fairness") or {}
    overall = {"group": "(all)", "n_reference": (audit.get("reference_check") or {}).get("n_individuals"),
               "n_current": check.get("n_individuals"),
               "flagged_fraction_reference": fairness.get("flagged_fraction_reference"),
               "flagged_fraction_current": fairness.get("flagged_fraction_current"),
               "increase": fairness.get("increase"), "compared": True, "note": ""}
    cls = audit.get("classification") or {}
    return {
        "drift": audit.get("drift") or {},
        "drift_rows": [{**c, "statistic": c.get("method"), "value": c.get("score")}
                       for c in (audit.get("drift") or {}).get("columns") or []],
        "fairness": fairness,
        "fairness_summary": {
            "fAux decision (reference)": fairness.get("decision_reference"),
            "fAux decision (current)": fairness.get("decision_current"),
            "aux quality (reference)": fairness.get("aux_quality_reference"),
            "aux quality (current)": fairness.get("aux_quality_current"),
            "KS statistic (LIC scores)": fairness.get("ks_statistic"),
            "KS p-value": fairness.get("ks_pvalue"),
            "scores compared": f"{fairness.get('n_reference_scores', 0):,} vs {fairness.get('n_current_scores', 0):,}",
            "sampling": fairness.get("sample_note") or "all rows"},
        "fairness_rows": [overall] + list(fairness.get("by_group") or []),
        "classification": cls,
        "classification_rows": [
            {"metric": k, "reference": v.get("reference"), "current": v.get("current"),
             "change": (None if v.get("reference") is None or v.get("current") is None
                        else v["current"] - v["reference"])}
            for k, v in (cls.get("metrics") or {}).items()],
    }
