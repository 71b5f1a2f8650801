"""The drift audit's decision: every limit of the policy's ``[audit]`` section, then the outcome.

``failed`` when any limit is exceeded; ``undecided`` when none is exceeded but one could not be
computed; ``passed`` otherwise (the exit codes are the gate's, :data:`faux_checks.gate.decision.EXIT_CODES`).
"""

from __future__ import annotations

import numpy as np

from .._validation import fmt_count
from ..gate.policy import AuditSettings
from .results import ClassificationQuality, DriftResult, FairnessDrift, limit_row

__all__ = ["decide_audit"]


def decide_audit(
    settings: AuditSettings,
    drift: DriftResult,
    fairness: FairnessDrift,
    classification: ClassificationQuality,
    *,
    protected: str,
    n_current: int,
) -> tuple[str, list[str], list[dict]]:
    """Apply the audit limits (module docstring) to the three steps' results.

    Returns
    -------
    decision : {"passed", "failed", "undecided"}
    reasons : list of str
        The rule that decided first.
    limits : list of dict
        One row per limit (see :class:`AuditResult`).
    """
    limits: list[dict] = []
    if n_current < settings.min_rows:
        limits.append(limit_row("min_rows", n_current, settings.min_rows, "not computed",
                                f"the current batch has {fmt_count(n_current)} rows < min_rows {settings.min_rows}; "
                                "too few to audit"))
    limits += _drift_limits(settings, drift, protected)
    limits += _fairness_limits(settings, fairness)
    limits += _classification_limits(settings, classification)

    exceeded = [l_["detail"] for l_ in limits if l_["status"] == "exceeded"]
    missing = [l_["detail"] for l_ in limits if l_["status"] == "not computed"]
    if exceeded:
        decision, reasons = "failed", exceeded + missing
    elif missing:
        decision, reasons = "undecided", missing
    else:
        decision = "passed"
        reasons = [f"all {len(limits)} audit limits held"] + [l_["detail"] for l_ in limits]
    return decision, reasons, limits


def _drift_limits(settings: AuditSettings, drift: DriftResult, protected: str) -> list[dict]:
    """The protected attribute's drift and the share of drifted feature/protected columns."""
    limits: list[dict] = []
    pcol = drift.column(protected)
    if settings.fail_on_protected_drift:
        if pcol is None or pcol.status != "compared":
            limits.append(limit_row("protected_drift", None, False, "not computed",
                                    f"drift of the protected attribute '{protected}' not computed: "
                                    f"{pcol.note if pcol is not None else 'not requested'}"))
        else:
            limits.append(limit_row(
                "protected_drift", pcol.score, pcol.threshold, "exceeded" if pcol.drifted else "ok",
                f"the protected attribute '{protected}' {'drifted' if pcol.drifted else 'did not drift'} "
                f"({pcol.method} {pcol.score:.3g}, threshold {pcol.threshold if pcol.threshold is not None else 'n/a'})"))
    share = drift.drifted_share
    counted = drift.counted
    if not counted:
        limits.append(limit_row("max_drifted_share", None, settings.max_drifted_share, "not computed",
                                f"no feature or protected column could be compared for drift"
                                f"{': ' + drift.error if drift.error else ''}"))
    else:
        names = [c.column for c in counted if c.drifted]
        limits.append(limit_row(
            "max_drifted_share", share, settings.max_drifted_share,
            "exceeded" if share > settings.max_drifted_share else "ok",
            f"{len(names)} of {len(counted)} feature/protected columns drifted ({share:.0%} "
            f"{'>' if share > settings.max_drifted_share else '<='} max_drifted_share "
            f"{settings.max_drifted_share:.0%}){': ' + ', '.join(names[:10]) if names else ''}"))
    return limits


def _fairness_limits(settings: AuditSettings, fairness: FairnessDrift) -> list[dict]:
    """The fAux checks on both batches: the gate's rule now, the flagged fractions' increase, the KS test."""
    limits: list[dict] = []
    cur, ref = fairness.current, fairness.reference
    if fairness.error or cur is None or ref is None:
        limits.append(limit_row("fairness", None, None, "not computed",
                                fairness.error or "the fAux checks did not run"))
    else:
        undecided = [(n, c) for n, c in (("reference", ref), ("current batch", cur)) if c.decision == "undecided"]
        for name, check in undecided:
            limits.append(limit_row("fairness", None, None, "not computed",
                                    f"the fAux check on the {name} is undecided: {check.reasons[0]}"))
        if settings.fail_on_current_check and cur.decision != "undecided":
            limits.append(limit_row("current_check", cur.flagged_fraction, cur.max_flagged_fraction,
                                    "exceeded" if cur.decision == "failed" else "ok",
                                    f"the gate's rule on the current batch: {cur.decision}: {cur.reasons[0]}"))
        if not undecided:
            inc = fairness.increase
            limits.append(limit_row(
                "max_flagged_fraction_increase", inc, settings.max_flagged_fraction_increase,
                "exceeded" if inc > settings.max_flagged_fraction_increase else "ok",
                f"flagged fraction {fairness.flagged_fraction_reference:.2%} (reference) -> "
                f"{fairness.flagged_fraction_current:.2%} (current): {inc:+.2%} "
                f"{'>' if inc > settings.max_flagged_fraction_increase else '<='} max_flagged_fraction_increase "
                f"{settings.max_flagged_fraction_increase:.2%}"))
            compared = [g for g in fairness.by_group if g["compared"]]
            if not compared:
                limits.append(limit_row("max_group_flagged_fraction_increase", None,
                                        settings.max_group_flagged_fraction_increase, "not computed",
                                        "no protected group has min_group_rows rows with defined scores in both batches"))
            for g in compared:
                over = g["increase"] > settings.max_group_flagged_fraction_increase
                limits.append(limit_row(
                    "max_group_flagged_fraction_increase", g["increase"], settings.max_group_flagged_fraction_increase,
                    "exceeded" if over else "ok",
                    f"group '{g['group']}': flagged fraction {g['flagged_fraction_reference']:.2%} -> "
                    f"{g['flagged_fraction_current']:.2%} ({g['increase']:+.2%} {'>' if over else '<='} "
                    f"{settings.max_group_flagged_fraction_increase:.2%})"))
            if np.isfinite(fairness.ks_pvalue):
                over = fairness.ks_pvalue < settings.score_ks_pvalue and fairness.ks_statistic >= settings.score_ks_min_statistic
                limits.append(limit_row(
                    "score_ks", fairness.ks_pvalue, settings.score_ks_pvalue, "exceeded" if over else "ok",
                    f"LIC score distribution: KS statistic {fairness.ks_statistic:.3f}, p = {fairness.ks_pvalue:.3g} "
                    f"({fmt_count(fairness.n_reference_scores)} vs {fmt_count(fairness.n_current_scores)} scores; fails "
                    f"when p < {settings.score_ks_pvalue:g} and the statistic >= {settings.score_ks_min_statistic:g})"))
            else:
                limits.append(limit_row("score_ks", None, settings.score_ks_pvalue, "not computed",
                                        "no defined LIC score in a batch; the score distributions cannot be compared"))
    return limits


def _classification_limits(settings: AuditSettings, classification: ClassificationQuality) -> list[dict]:
    """The target's ROC-AUC drop, a limit only when the policy sets one."""
    limits: list[dict] = []
    if settings.max_roc_auc_drop is not None:
        auc = classification.metrics.get("roc_auc") or {}
        if classification.status != "computed" or auc.get("reference") is None or auc.get("current") is None:
            limits.append(limit_row("max_roc_auc_drop", None, settings.max_roc_auc_drop, "not computed",
                                    f"ROC-AUC not computed: {classification.reason or 'no value'}"))
        else:
            drop = auc["reference"] - auc["current"]
            over = drop > settings.max_roc_auc_drop
            limits.append(limit_row("max_roc_auc_drop", drop, settings.max_roc_auc_drop, "exceeded" if over else "ok",
                                    f"ROC-AUC {auc['reference']:.3f} -> {auc['current']:.3f} (drop {drop:+.3f} "
                                    f"{'>' if over else '<='} {settings.max_roc_auc_drop:g})"))
    return limits
