"""The history view: the table ``faux-checks gate`` and ``faux-checks history`` print, one row per model version.

Reads each version's tags through the registry's record codec (:class:`~faux_checks.registry.records.VersionRecord`,
:class:`~faux_checks.registry.records.GateRecord`) and its report (``report.json`` beside the recorded
``report.html``) for the per-group and baseline cells; the δ, policy and decided-at columns show the tags' text as
written. Split out of :mod:`faux_checks_app.cli`.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["attributes_cell", "audit_cell", "decision_columns", "interval_cell", "print_table", "read_report",
           "tester_cell"]


def print_table(rows: list[dict], extra: dict[str, dict[str, str]] | None = None) -> None:
    """Print version, decision, flagged fraction (overall and per group), aux AUC, baselines, alias.

    ``extra`` adds columns after "by group": column name -> {version number: cell text}.
    """
    from faux_checks.registry.records import GateRecord, VersionRecord

    from .output import terminal_text

    records = [VersionRecord.from_tags(r) for r in rows]
    gates = [rec.gate or GateRecord.from_tags(r) for r, rec in zip(rows, records, strict=True)]
    extra = dict(extra or {})
    if any(len(g.attributes) > 1 for g in gates):  # a several-attribute gate: one cell per version
        extra = {"by attribute": {str(r.get("version")): attributes_cell(g) for r, g in zip(rows, gates, strict=True)}, **extra}
    header = ["version", "decision", "flagged", "95% CI", "by group", *extra, "aux AUC", "baselines", "last audit", "alias"]
    table = []
    for r, rec, gate in zip(rows, records, gates, strict=True):
        report = read_report(gate.report)
        check = (report or {}).get("check") or {}
        groups = ", ".join(f"{g['group']} {g['flagged_fraction']:.1%}" for g in check.get("by_group") or []
                           if g.get("flagged_fraction") is not None)
        testers = ", ".join(tester_cell(name, t) for name, t in (check.get("testers") or {}).items()
                            if t.get("value") is not None)
        ff, aq = gate.flagged_fraction, gate.aux_quality
        table.append([terminal_text(cell) for cell in [str(r.get("version")), str(rec.state),
                      f"{ff:.1%}" if ff is not None else "n/a", interval_cell(gate), groups or "n/a",
                      *(cells.get(str(r.get("version")), "-") for cells in extra.values()),
                      f"{aq:.3f}" if aq is not None else "n/a", testers or "n/a",
                      audit_cell(rec), ",".join(r.get("aliases") or []) or "-"]])
    widths = [max(len(h), *(len(row[i]) for row in table)) if table else len(h) for i, h in enumerate(header)]
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in table:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)))


def attributes_cell(gate) -> str:
    """'sex failed 13.3%, race passed 0.4%' from a several-attribute gate's record (a
    :class:`~faux_checks.registry.records.GateRecord`); '-' for none.

    The other columns (flagged, CI, by group, aux AUC) show the attribute that decided
    (tag ``fairness_deciding_attribute``).
    """
    from faux_checks.gate.sections import attribute_key

    cells = []
    for name in gate.attributes:
        a = gate.attribute(attribute_key(name))
        shown = "n/a" if a.flagged_fraction is None else f"{a.flagged_fraction:.1%}"
        cells.append(f"{name} {a.decision or '?'} {shown}")
    return ", ".join(cells) or "-"


def interval_cell(gate) -> str:
    """'12.8–13.9%' from the gate record's interval (confidence in the header when 95%), 'n/a' when absent."""
    lo, hi, conf = gate.flagged_fraction_lower, gate.flagged_fraction_upper, gate.confidence
    if lo is None or hi is None:
        return "n/a"
    text = f"{lo:.1%}–{hi:.1%}"
    return text if conf in (None, 0.95) else f"{text} ({conf:.0%})"


def audit_cell(record) -> str:
    """'failed 2026-11-30' from the version's latest audit (a VersionRecord), '-' if never audited."""
    audit = record.audit
    return f"{audit.decision} {str(audit.at or '')[:10]}".strip() if audit and audit.decision else "-"


def tester_cell(name: str, t: dict) -> str:
    """'fta 54% > 0.5' for per-individual testers, 'demographic_parity 0.241 (> 0.2)' for group metrics."""
    over = "" if t.get("passed", True) else " !"
    if t.get("statistic") == "flagged_fraction":
        return f"{name} {t['value']:.0%} > {t.get('threshold'):g}{over}"
    if str(t.get("statistic")).endswith("_difference"):   # a difference of groups' rates: a share, as everywhere
        return f"{name} {t['value']:.1%}{over}"
    return f"{name} {t['value']:.3f}{over}"


def read_report(uri) -> dict | None:
    if not uri or uri in ("None", ""):
        return None
    path = Path(str(uri)).with_name("report.json")
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def decision_columns(rows: list[dict]) -> dict[str, dict[str, str]]:
    """History's per-version δ, policy hash (12 hex) and decision time; '-' where a version was never decided."""
    from faux_checks.registry.records import CHECKED_AT_TAG, DELTA_TAG, POLICY_SHA_TAG, parse_text

    def cell(row, key, width=None):   # the tag's text as written (an int δ stays "5")
        value = parse_text(row.get(key))
        return "-" if value is None else value[:width]

    return {"δ": {r["version"]: cell(r, DELTA_TAG) for r in rows},
            "policy": {r["version"]: cell(r, POLICY_SHA_TAG, 12) for r in rows},
            "decided at": {r["version"]: cell(r, CHECKED_AT_TAG) for r in rows}}
