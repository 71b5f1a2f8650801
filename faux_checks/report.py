"""Compliance report: ``report.json`` (versioned schema) and a self-contained ``report.html``.

Built from the JSON-ready dict of a check (:meth:`CheckResult.to_dict`), so the same code
serves the CLI, the Great Expectations adapter and the Prefect flow. The HTML has no external
resources (no CDN): plots are PNGs embedded as base64, so it opens offline.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

from .errors import InputError

__all__ = ["write_report", "render_html", "REPORT_SCHEMA_VERSION"]

REPORT_SCHEMA_VERSION = "1.0"


def _fig_to_data_uri(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _plots(check: dict) -> dict[str, str]:
    """PNG data URIs of the report's plots; a plot whose data is absent is skipped."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots: dict[str, str] = {}
    delta = check.get("delta")
    hist = check.get("score_histogram") or {}
    if hist.get("counts"):
        fig, ax = plt.subplots(figsize=(6, 3))
        edges = hist["log10_edges"]
        ax.stairs(hist["counts"], [10 ** e for e in edges], fill=True, alpha=0.6)
        ax.set_xscale("log")
        if delta:
            ax.axvline(delta, color="crimson", ls="--", label=f"δ = {delta:g}")
            ax.legend()
        ax.set_xlabel("LIC score (Δ P(y) per unit of aux output)")
        ax.set_ylabel("individuals")
        ax.set_title("LIC score distribution")
        plots["score_histogram"] = _fig_to_data_uri(fig)
    curve = check.get("flagged_fraction_vs_delta") or {}
    if curve.get("delta"):
        fig, ax = plt.subplots(figsize=(6, 3))
        ax.plot(curve["delta"], curve["flagged_fraction"])
        ax.set_xscale("log")
        if delta:
            ax.axvline(delta, color="crimson", ls="--", label=f"δ = {delta:g}")
        mff = check.get("max_flagged_fraction")
        if mff is not None:
            ax.axhline(mff, color="grey", ls=":", label=f"policy threshold {mff:.1%}")
        ax.legend()
        ax.set_xlabel("δ")
        ax.set_ylabel("flagged fraction")
        ax.set_title("Flagged fraction vs δ")
        plots["flagged_vs_delta"] = _fig_to_data_uri(fig)
    groups = check.get("by_group") or []
    if groups:
        fig, ax = plt.subplots(figsize=(6, 3))
        names = [str(g.get("group")) for g in groups]
        vals = [g.get("flagged_fraction") or 0.0 for g in groups]
        ax.bar(names, vals, color="steelblue")
        if check.get("max_flagged_fraction") is not None:
            ax.axhline(check["max_flagged_fraction"], color="grey", ls=":")
        ax.set_ylabel("flagged fraction")
        ax.set_title("Flagged fraction per protected group")
        plots["by_group"] = _fig_to_data_uri(fig)
    evidence = check.get("evidence_summary") or []
    if evidence:
        fig, ax = plt.subplots(figsize=(6, 3))
        cols = [e["column"] for e in evidence][::-1]
        ax.barh(cols, [e["share"] for e in evidence][::-1], color="darkorange")
        ax.set_xlabel("share of mean |evidence| over flagged individuals")
        ax.set_title("Which features carry the dependence on the protected attribute")
        plots["evidence"] = _fig_to_data_uri(fig)
    roc = check.get("aux_roc") or {}
    if roc.get("fpr"):
        fig, ax = plt.subplots(figsize=(3.5, 3.5))
        ax.plot(roc["fpr"], roc["tpr"])
        ax.plot([0, 1], [0, 1], color="grey", ls=":")
        ax.set_xlabel("false positive rate")
        ax.set_ylabel("true positive rate")
        q = check.get("aux_quality")
        ax.set_title(f"Auxiliary model ROC (AUC {q:.3f})" if q is not None else "Auxiliary model ROC")
        plots["aux_roc"] = _fig_to_data_uri(fig)
    return plots


def _table(rows: list[dict], columns: list[str] | None = None) -> str:
    if not rows:
        return "<p><em>none</em></p>"
    columns = columns or list(rows[0].keys())
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = ""
    for r in rows:
        cells = []
        for c in columns:
            v = r.get(c)
            if isinstance(v, float):
                v = f"{v:.4g}"
            elif isinstance(v, (list, dict)):
                v = json.dumps(v)
            cells.append(f"<td>{html.escape(str(v))}</td>")
        body += "<tr>" + "".join(cells) + "</tr>"
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(report: dict[str, Any]) -> str:
    """Self-contained HTML for a report dict (see :func:`write_report`)."""
    check = report.get("check") or {}
    decision = report.get("decision", "undecided")
    colour = {"passed": "#1b7f3b", "failed": "#b3261e"}.get(decision, "#8a6d00")
    plots = _plots(check) if check else {}
    model = report.get("model", {})
    prov = check.get("provenance", {})
    sections = [
        f"<h1>Individual-fairness report</h1>"
        f"<p class='decision' style='background:{colour}'>Decision: <b>{html.escape(decision.upper())}</b></p>",
        "<h2 id='decision'>Decision and the rule that produced it</h2><ul>"
        + "".join(f"<li>{html.escape(r)}</li>" for r in report.get("reasons", [])) + "</ul>",
        "<h2 id='model'>Model</h2>" + _table([{k: v for k, v in model.items()}]) if model else "",
        "<h2 id='summary'>fAux summary</h2>" + _table([{
            "flagged_fraction": check.get("flagged_fraction"), "max_flagged_fraction": check.get("max_flagged_fraction"),
            "delta": check.get("delta"), "n_individuals": check.get("n_individuals"),
            "n_undefined": check.get("n_undefined"), "n_missing_protected": check.get("n_missing_protected"),
            "aux_quality": check.get("aux_quality"), "aux_quality_metric": check.get("aux_quality_metric"),
            "uses_protected_directly": check.get("uses_protected_directly"),
        }]) if check else "<p>The fAux check could not be computed.</p>",
        "<h2 id='groups'>Per protected group</h2>" + _table(check.get("by_group") or []),
        "<h2 id='testers'>Baseline testers</h2>" + _table(
            [{"tester": k, **{kk: vv for kk, vv in v.items() if kk != "summary"}, "summary": v.get("summary")}
             for k, v in (check.get("testers") or {}).items()]),
        "<h2 id='expectations'>Great Expectations results</h2>" + _table(report.get("expectations") or []),
        "<h2 id='flagged'>Top flagged individuals</h2>" + _table(
            [{"row": t["row"], "lic_score": t["lic_score"], "probability": t["probability"],
              "top_evidence": ", ".join(f"{e['column']} ({e['evidence']:+.3g})" for e in t["top_evidence"])}
             for t in check.get("top_flagged") or []]),
        "<h2 id='plots'>Plots</h2>" + "".join(
            f"<figure><img alt='{k}' src='{v}'/><figcaption>{k.replace('_', ' ')}</figcaption></figure>"
            for k, v in plots.items()),
        "<h2 id='policy'>Policy</h2><pre>" + html.escape(json.dumps(prov.get("policy", {}), indent=2)) + "</pre>",
        "<h2 id='provenance'>Reproduction</h2><pre>" + html.escape(
            json.dumps({k: v for k, v in prov.items() if k != "policy"}, indent=2)) + "</pre>",
        "<p class='note'>Method: fAux (Castiglione et al. 2022, arXiv 2210.06288), eq. 9: LIC score = "
        "‖∇f_tar · J⁺‖∞ with J the auxiliary model's input Jacobian. An individual is flagged when the "
        "score exceeds δ.</p>",
    ]
    style = ("body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}"
             "table{border-collapse:collapse;font-size:0.9em}td,th{border:1px solid #ccc;padding:3px 6px}"
             ".decision{color:white;padding:0.6em;font-size:1.3em}figure{display:inline-block;margin:0.5em}"
             "pre{background:#f5f5f5;padding:0.5em;overflow-x:auto}.note{color:#555;font-size:0.85em}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>fairness report: {html.escape(decision)}"
            f"</title><style>{style}</style></head><body>{''.join(sections)}</body></html>")


def write_report(report_dir: str | Path, *, decision: str, reasons: list[str], check: dict | None,
                 model: dict | None = None, expectations: list[dict] | None = None) -> dict[str, Path]:
    """Write ``report.json`` and ``report.html`` into ``report_dir``.

    Parameters
    ----------
    report_dir : path
        Created if absent; must not already hold a report (nothing is overwritten).
    decision, reasons : the gate's outcome.
    check : dict or None
        :meth:`CheckResult.to_dict` of the fAux check.
    model : dict, optional
        Model name, version, sha256, path.
    expectations : list of dict, optional
        Per-expectation Great Expectations results.

    Returns
    -------
    dict with ``json`` and ``html`` paths.

    Raises
    ------
    InputError
        If ``report_dir`` already holds report.json or report.html.
    """
    report_dir = Path(report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": report_dir / "report.json", "html": report_dir / "report.html"}
    for p in paths.values():
        if p.exists():
            raise InputError(f"{p} exists already; choose a new --report-dir (reports are never overwritten)")
    payload = {"schema_version": REPORT_SCHEMA_VERSION, "decision": decision, "reasons": reasons,
               "model": model or {}, "expectations": expectations or [], "check": check}
    paths["json"].write_text(json.dumps(payload, indent=2, default=str))
    paths["html"].write_text(render_html(payload))
    return paths
