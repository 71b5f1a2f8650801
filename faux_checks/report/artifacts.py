"""Prefect artifacts of a report: a markdown summary and one table row per rule or limit."""

from __future__ import annotations

from pathlib import Path

from ._format import fmt, pct, rule_statistic

__all__ = ["artifact_markdown", "artifact_table"]


def artifact_markdown(report: dict, *, report_dir: str | Path | None = None) -> str:
    """Markdown summary of a report (a Prefect markdown artifact)."""
    model = report.get("model") or {}
    check = report.get("check") or {}
    lines = [f"## {report.get('kind')} · {model.get('name', '')} v{model.get('version', '')}: "
             f"**{report.get('decision')}**", "", f"**Rule:** {report.get('rule')}", ""]
    if check:
        lines.append(f"- flagged fraction: {pct(check.get('flagged_fraction'))} at δ = {check.get('delta')} "
                     f"(n = {check.get('n_individuals', 0):,})")
        lines.append(f"- aux quality: {fmt(check.get('aux_quality'))} ({check.get('aux_quality_metric') or ''})")
    audit = report.get("audit") or {}
    if audit:
        drift = audit.get("drift") or {}
        fairness = audit.get("fairness") or {}
        lines.append(f"- drifted columns: {drift.get('n_drifted', 0)} of {drift.get('n_compared', 0)}; skipped: "
                     + (", ".join(f"{s['column']} ({s['reason']})" for s in drift.get("skipped") or []) or "none"))
        lines.append(f"- flagged fraction reference → current: {pct(fairness.get('flagged_fraction_reference'))} → "
                     f"{pct(fairness.get('flagged_fraction_current'))}; KS p-value of the LIC scores = "
                     f"{fmt(fairness.get('ks_pvalue'))}")
    if report_dir is not None:
        lines.append(f"- report: {Path(report_dir) / 'report.html'}")
    return "\n".join(lines)


def artifact_table(report: dict) -> list[dict]:
    """One row per rule/limit (a Prefect table artifact): rule, statistic (what the value is), value, limit, status,
    detail; shares as percentages, as in the HTML page."""
    testers = (report.get("check") or {}).get("testers") or {}
    rows = []
    for r in report.get("rules") or []:
        label, share = rule_statistic(r, testers)
        show = pct if share else fmt
        rows.append({"rule": str(r.get("rule")), "statistic": label, "value": show(r.get("observed")),
                     "limit": show(r.get("limit")), "status": str(r.get("status")),
                     "detail": str(r.get("detail", ""))[:300]})
    return rows
