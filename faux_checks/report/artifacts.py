"""Prefect artifacts of a report: a markdown summary and one table row per rule or limit."""

from __future__ import annotations

import html
import re
from pathlib import Path

from ._format import fmt, pct, printable, rule_statistic

__all__ = ["artifact_markdown", "artifact_table", "markdown_text"]

#: Markdown punctuation that could start emphasis, a link, an image, code, a table cell or a heading.
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+!|~])")


def markdown_text(value) -> str:
    """``value`` as literal text inside Markdown: no HTML, no link, no table cell break, one line.

    For every name and value that comes from data (model name, column names, group values, reasons)
    in a Prefect Markdown artifact: ``<``, ``>`` and ``&`` become entities (a raw ``<script>`` or
    ``<img onerror=...>`` reached the artifact), Markdown punctuation is backslash-escaped
    (``[x](javascript:...)`` stays text, a ``|`` does not split a table cell) and control characters
    and line breaks are written as escapes (:func:`~._format.printable`).
    """
    return _MARKDOWN.sub(r"\\\1", html.escape(printable(value), quote=False))


def artifact_markdown(report: dict, *, report_dir: str | Path | None = None) -> str:
    """Markdown summary of a report (a Prefect markdown artifact); every value from the report is escaped
    (:func:`markdown_text`)."""
    md = markdown_text
    model = report.get("model") or {}
    check = report.get("check") or {}
    lines = [f"## {md(report.get('kind'))} · {md(model.get('name', ''))} v{md(model.get('version', ''))}: "
             f"**{md(report.get('decision'))}**", "", f"**Rule:** {md(report.get('rule'))}", ""]
    if check:
        lines.append(f"- flagged fraction: {md(pct(check.get('flagged_fraction')))} at δ = {md(check.get('delta'))} "
                     f"(n = {md(_count(check.get('n_individuals', 0)))})")
        lines.append(f"- aux quality: {md(fmt(check.get('aux_quality')))} ({md(check.get('aux_quality_metric') or '')})")
    audit = report.get("audit") or {}
    if audit:
        drift = audit.get("drift") or {}
        fairness = audit.get("fairness") or {}
        lines.append(f"- drifted columns: {md(drift.get('n_drifted', 0))} of {md(drift.get('n_compared', 0))}; skipped: "
                     + (", ".join(f"{md(s['column'])} ({md(s['reason'])})" for s in drift.get("skipped") or []) or "none"))
        lines.append(f"- flagged fraction reference → current: {md(pct(fairness.get('flagged_fraction_reference')))} → "
                     f"{md(pct(fairness.get('flagged_fraction_current')))}; KS p-value of the LIC scores = "
                     f"{md(fmt(fairness.get('ks_pvalue')))}")
    if report_dir is not None:
        lines.append(f"- report: {md(Path(report_dir) / 'report.html')}")
    return "\n".join(lines)


def _count(v) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else fmt(v)


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
