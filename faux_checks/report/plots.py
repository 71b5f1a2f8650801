"""The report's plots: matplotlib figures as PNG data URIs, embedded in the page (no file, no network)."""

from __future__ import annotations

import base64
import io
import os

__all__ = ["PLOTS_ENV", "plots_enabled", "render_plots", "report_unit", "score_axis_label"]

#: Environment variable that leaves the plots out of ``report.html`` when set to ``off`` (or ``0``, ``false``, ``no``):
#: the page keeps every section and table, without the figures. A run of many reports that nobody reads
#: (a test suite) saves matplotlib's drawing time, most of a small report's cost.
PLOTS_ENV = "FAUX_CHECKS_REPORT_PLOTS"


#: The score histogram's axis per reading: the unit of the reading in force.
SCORE_AXES: dict[str | None, str] = {            # looked up with a report's variant (None: not recorded)
    "swap": "LIC score: change in P(y) when c is swapped (probability points)",
    "faux": "LIC score: change in P(y) per unit of the aux output (eq. 9)",
    "ig": "LIC score: change in P(y) per unit of the aux output (eq. 9, integrated gradients)",
    "ng": "LIC score: |cos| between the target's and the aux model's gradients (eq. 10, in [0, 1])",
    "projection": "LIC score: change in P(y) per unit step along the aux gradient",
}


def report_unit(report: dict) -> str | None:
    """The unit of δ and the scores of a value target (policy ``target_output = "value"``, ``[faux] unit``): the
    check's recorded unit, else the policy's; None for a probability target (scores in probability points)."""
    check = report.get("check") or {}
    recorded = (check.get("provenance") or {}).get("unit")
    if recorded:
        return str(recorded)
    policy = report.get("policy") or {}
    unit = (policy.get("faux") or {}).get("unit")
    return str(unit) if unit and policy.get("target_output") == "value" else None


def score_axis_label(report: dict) -> str:
    """The score axis of the report's reading: the check's recorded variant, else the policy's, else unnamed.

    Returns
    -------
    str
        A :data:`SCORE_AXES` entry; ``"LIC score (reading not recorded)"`` when neither names a known variant.
    """
    check = report.get("check") or {}
    variant = ((check.get("provenance") or {}).get("variant")
               or ((report.get("policy") or {}).get("faux") or {}).get("variant"))
    unit = report_unit(report)
    if unit is not None and variant == "swap":
        return f"LIC score: change of the predicted value when c is swapped ({unit})"
    return SCORE_AXES.get(variant, "LIC score (reading not recorded)")


def plots_enabled() -> bool:
    """False when :data:`PLOTS_ENV` is ``off``, ``0``, ``false`` or ``no`` (any case); True otherwise, unset included."""
    return os.environ.get(PLOTS_ENV, "").strip().lower() not in ("off", "0", "false", "no")


def render_plots(report: dict) -> dict[str, str]:
    """PNG data URIs of the report's plots, by id; a plot whose data is absent is skipped.

    Returns an empty dict when :func:`plots_enabled` is False (``FAUX_CHECKS_REPORT_PLOTS=off``): the page
    then shows no figure.
    """
    if not plots_enabled():
        return {}
    import matplotlib

    matplotlib.use("Agg")
    plots: dict[str, str] = {}
    for key, draw in _PLOTS.items():
        fig = draw(report)
        if fig is not None:
            plots[key] = _png_data_uri(fig)
    return plots


def _parts(report: dict) -> tuple[dict, dict, dict]:
    """The report's ``check``, ``audit`` and the audit's ``fairness`` sections (empty when absent)."""
    check = report.get("check") or {}
    audit = report.get("audit") or {}
    return check, audit, audit.get("fairness") or {}


def _delta_line(ax, delta) -> None:
    """The policy's δ as a dashed vertical line (none when δ is absent or 0)."""
    if delta:
        ax.axvline(delta, color="crimson", ls="--", label=f"δ = {delta:g}")


def _limit_line(ax, mff) -> None:
    """The policy's ``max_flagged_fraction`` as a dotted horizontal line (none when absent)."""
    if mff is not None:
        ax.axhline(mff, color="grey", ls=":", label=f"max_flagged_fraction {mff:.1%}")


def _share_axis(ax, title: str) -> None:
    """A flagged-fraction y axis in percent, as in the page, with the legend outside and ``title``."""
    from matplotlib.ticker import PercentFormatter

    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    ax.set_ylabel("flagged fraction")
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))   # shares in percent, as in the page
    ax.set_title(title)


def _score_histogram(report: dict):
    """LIC score histogram with δ (audit: reference and current on one grid)."""
    import matplotlib.pyplot as plt

    check, _, fairness = _parts(report)
    delta = check.get("delta")
    two = fairness.get("score_histograms") or {}
    hist = check.get("score_histogram") or {}
    if two.get("log10_edges"):
        fig, ax = plt.subplots(figsize=(6.4, 3.2))
        edges = [10 ** e for e in two["log10_edges"]]
        ax.stairs(two["reference"], edges, fill=True, alpha=0.45, label="reference", color="tab:blue")
        ax.stairs(two["current"], edges, fill=False, lw=1.8, label="current", color="tab:orange")
        ax.set_xscale("log")
        _delta_line(ax, delta)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
        title = "LIC score distribution: reference vs current"
    elif hist.get("counts"):
        fig, ax = plt.subplots(figsize=(6.4, 3.2))
        ax.stairs(hist["counts"], [10 ** e for e in hist["log10_edges"]], fill=True, alpha=0.6)
        ax.set_xscale("log")
        _delta_line(ax, delta)
        if delta:
            ax.legend()
        title = "LIC score distribution"
    else:
        return None
    ax.set_xlabel(score_axis_label(report))
    ax.set_ylabel("individuals")
    ax.set_title(title)
    return fig


def _flagged_vs_delta(report: dict):
    """The flagged fraction as δ varies (audit: reference and current)."""
    import matplotlib.pyplot as plt

    check, audit, fairness = _parts(report)
    curves = fairness.get("flagged_fraction_vs_delta") or {}
    series = ({"reference": curves.get("reference") or {}, "current": curves.get("current") or {}} if audit
              else {"": check.get("flagged_fraction_vs_delta") or {}})
    series = {k: v for k, v in series.items() if v.get("delta")}
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for label, curve in series.items():
        ax.plot(curve["delta"], curve["flagged_fraction"], label=label or None)
    ax.set_xscale("log")
    _delta_line(ax, check.get("delta"))
    _limit_line(ax, check.get("max_flagged_fraction"))
    ax.set_xlabel(f"δ ({report_unit(report)})" if report_unit(report) else "δ")
    _share_axis(ax, "Flagged fraction vs δ")
    return fig


def _by_group(report: dict):
    """The flagged fraction per protected group (audit: reference and current side by side)."""
    import matplotlib.pyplot as plt

    check, _, fairness = _parts(report)
    mff = check.get("max_flagged_fraction")
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
        _limit_line(ax, mff)
        _share_axis(ax, "Flagged fraction per protected group")
        return fig
    if not groups:
        return None
    from matplotlib.ticker import PercentFormatter

    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    ax.bar([str(g.get("group")) for g in groups], [g.get("flagged_fraction") or 0.0 for g in groups],
           color="steelblue")
    if mff is not None:
        _limit_line(ax, mff)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    ax.set_ylabel("flagged fraction")
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))   # shares in percent, as in the page
    ax.set_title("Flagged fraction per protected group")
    return fig


def _evidence(report: dict):
    """The columns that carry the dependence on the protected attribute, over flagged individuals."""
    import matplotlib.pyplot as plt

    evidence = (report.get("check") or {}).get("evidence_summary") or []
    if not evidence:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 0.9 + 0.28 * len(evidence)))
    ax.barh([e["column"] for e in evidence][::-1], [e["share"] for e in evidence][::-1], color="darkorange")
    ax.set_xlabel("share of mean |evidence| over flagged individuals (all, if none flagged)")
    ax.set_title("Columns that carry the dependence on the protected attribute")
    return fig


def _aux_roc(report: dict):
    """The auxiliary model's ROC curve, its AUC in the title."""
    import matplotlib.pyplot as plt

    check = report.get("check") or {}
    roc = check.get("aux_roc") or {}
    if not roc.get("fpr"):
        return None
    fig, ax = plt.subplots(figsize=(3.6, 3.6))
    ax.plot(roc["fpr"], roc["tpr"])
    ax.plot([0, 1], [0, 1], color="grey", ls=":")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    q = check.get("aux_quality")
    ax.set_title(f"Auxiliary model ROC (AUC {q:.3f})" if q is not None else "Auxiliary model ROC")
    return fig


def _drift(report: dict):
    """Each compared column's drift score (red: drifted) against its threshold."""
    import matplotlib.pyplot as plt

    audit = report.get("audit") or {}
    compared = [c for c in (audit.get("drift") or {}).get("columns") or [] if c.get("status") == "compared"]
    if not compared:
        return None
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
    return fig


def _history(report: dict):
    """The flagged fraction across versions and audits, coloured by decision (* = this run)."""
    import matplotlib.pyplot as plt

    points = [p for p in report.get("history") or [] if p.get("flagged_fraction") is not None]
    if not points:
        return None
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
    _limit_line(ax, (report.get("check") or {}).get("max_flagged_fraction"))
    _share_axis(ax, "Flagged fraction across versions and audits (* = this run)")
    return fig


#: The report's plots by id, in page order: each draws a figure from the report, or None when its data is absent.
_PLOTS = {"score_histogram": _score_histogram, "flagged_vs_delta": _flagged_vs_delta, "by_group": _by_group,
          "evidence": _evidence, "aux_roc": _aux_roc, "drift": _drift, "history": _history}


def _png_data_uri(fig) -> str:
    """The figure as a PNG data URI (base64), closed afterwards."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
