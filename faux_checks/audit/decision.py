"""The drift audit's decision: every limit of the policy's ``[audit]`` section, read by the gate's engine.

Each limit is a rule row (:func:`faux_checks.gate.decision.rule_row`); the fAux check on each
batch is decided by the gate's own rules (:func:`faux_checks.gate.one_attribute.check_one_attribute`), and
:func:`faux_checks.gate.decision.decide` turns the rows into the outcome: ``failed`` when any
limit is exceeded, ``undecided`` when none is but one could not be computed (or a batch's check is
undecided), ``passed`` otherwise, with the gate's exit codes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import fmt_count
from ..gate.decision import decide, rule_row
from ..gate.policy_sections import AuditSettings
from .results import ClassificationQuality, DriftResult, FairnessDrift

__all__ = ["decide_audit"]

#: The gate's decision on the current batch as the status of the audit's ``current_check`` limit.
CHECK_STATUS = {"passed": "ok", "failed": "exceeded", "undecided": "not computed"}


def decide_audit(
    settings: AuditSettings,
    drift: DriftResult,
    sections: list[tuple[str, tuple[str, ...], FairnessDrift]],
    classification: ClassificationQuality,
    *,
    n_current: int,
) -> tuple[str, list[str], list[dict], list[tuple[str, list[str]]]]:
    """Apply the audit limits (module docstring) to the three steps' results, over every protected attribute.

    One protected attribute is a list of one (a ``protected = "..."`` policy included): its rows are
    unprefixed. With several, each attribute's rows are prefixed as the gate prefixes them
    (:func:`faux_checks.gate.sections.prefixed_rules`: rule ``race/score_ks``, detail ``race: ...``);
    ``min_rows``, ``max_drifted_share`` and ``max_roc_auc_drop`` are shared and never prefixed. Row
    order: ``min_rows``, each attribute's ``protected_drift``, ``max_drifted_share``, each attribute's
    fairness limits, ``max_roc_auc_drop``. Every row feeds one decision (:func:`faux_checks.gate.sections.combine`).

    A current batch below ``settings.min_rows`` rows is ``undecided`` (exit 2): the ``min_rows``
    rule is ``not met`` and every limit measured on it is ``not judged`` (its detail is kept), so a
    drift seen on 10 rows neither fails nor passes the audit.

    Parameters
    ----------
    sections : list of (attribute, components, FairnessDrift)
        In the policy's order; ``components`` is empty for a declared column, an intersection's
        columns otherwise (an intersection has no ``protected_drift`` row: its components' drift is
        each declared attribute's own row).

    Returns
    -------
    decision : {"passed", "failed", "undecided"}
    reasons : list of str
        The rule that decided first (a pass: "all N audit limits held" [over K protected attributes],
        then each limit).
    limits : list of dict
        One row per limit (see :class:`AuditResult`).
    per_attribute : list of (decision, reasons)
        Each attribute's own rows decided alone (its section's outcome), in ``sections``' order.
    """
    from ..gate.sections import combine, prefixed_rules

    several = len(sections) > 1
    too_few = _min_rows(settings, n_current)
    judge = _not_judged if too_few else list
    shared_drift: list[dict] = []
    own_drift, own_fairness = [], []
    for name, components, fairness in sections:
        rows = []
        for row in _drift_limits(settings, drift, name):
            if row["rule"] != "protected_drift":
                shared_drift = [row]
            elif not components:
                rows.append(row)
        own_drift.append((name, judge(rows)))
        own_fairness.append((name, judge(_fairness_limits(settings, fairness))))
    outcome = combine([(None, too_few), *own_drift, (None, judge(shared_drift)), *own_fairness,
                       (None, judge(_classification_limits(settings, classification)))])
    limits, reasons = list(outcome.rules), list(outcome.reasons)
    if outcome.decision == "passed":
        over = f" over {len(sections)} protected attributes" if several else ""
        reasons = [f"all {len(limits)} audit limits held{over}"] + [row["detail"] for row in limits]
    per_attribute = []
    for (name, drift_rows), (_, fairness_rows) in zip(own_drift, own_fairness, strict=True):
        rows = drift_rows + fairness_rows
        one = decide(prefixed_rules(name, rows) if several else rows)
        per_attribute.append((one.decision, list(one.reasons)))
    return outcome.decision, reasons, limits, per_attribute


def _min_rows(settings: AuditSettings, n_current: int) -> list[dict]:
    """The ``min_rows`` rule row when the current batch is too small to audit, else no row."""
    if n_current >= settings.min_rows:
        return []
    return [rule_row("min_rows", "not met", f"insufficient evidence: the current batch has {fmt_count(n_current)} "
                     f"rows < audit.min_rows {settings.min_rows}; too few to audit", n_current, settings.min_rows)]


def _not_judged(rows: list[dict]) -> list[dict]:
    """Limits measured on too few rows: reported, never judged (as the gate's max_flagged_fraction)."""
    return [{**row, "status": "not judged", "detail": f"not judged (audit.min_rows not met): {row['detail']}"}
            if row["status"] in ("ok", "exceeded") else row for row in rows]


def _drift_limits(settings: AuditSettings, drift: DriftResult, protected: str) -> list[dict]:
    """The protected attribute's drift and the share of drifted feature/protected columns."""
    limits: list[dict] = []
    pcol = drift.column(protected)
    if settings.fail_on_protected_drift:
        if pcol is None or pcol.status != "compared":
            limits.append(rule_row("protected_drift", "not computed", f"drift of the protected attribute '{protected}' "
                                   f"not computed: {pcol.note if pcol is not None else 'not requested'}", None, False))
        else:
            limits.append(rule_row(
                "protected_drift", "exceeded" if pcol.drifted else "ok",
                f"the protected attribute '{protected}' {'drifted' if pcol.drifted else 'did not drift'} "
                f"({pcol.method} {pcol.score:.3g}, threshold {pcol.threshold if pcol.threshold is not None else 'n/a'})",
                pcol.score, pcol.threshold))
    share, counted, limit = drift.drifted_share, drift.counted, settings.max_drifted_share
    if not counted:
        limits.append(rule_row("max_drifted_share", "not computed", "no feature or protected column could be compared "
                               f"for drift{': ' + drift.error if drift.error else ''}", None, limit))
    else:
        names = [c.column for c in counted if c.drifted]
        limits.append(rule_row(
            "max_drifted_share", "exceeded" if share > limit else "ok",
            f"{len(names)} of {len(counted)} feature/protected columns drifted ({share:.2%} "
            f"{'>' if share > limit else '<='} max_drifted_share {limit:.2%}){': ' + ', '.join(names[:10]) if names else ''}",
            share, limit))
    return limits


def _fairness_limits(settings: AuditSettings, fairness: FairnessDrift) -> list[dict]:
    """The fAux checks on both batches: the gate's rule now, the flagged fractions' increase, the KS test."""
    cur, ref = fairness.current, fairness.reference
    if fairness.error or cur is None or ref is None:
        return [rule_row("fairness", "not computed", fairness.error or "the fAux checks did not run")]
    unit = (ref.provenance or {}).get("unit")                # a value target's unit ([faux] unit); None for a probability
    at = f" at δ={ref.delta:g} {unit}" if unit else ""
    limits: list[dict] = []
    undecided = [(n, c) for n, c in (("reference", ref), ("current batch", cur)) if c.decision == "undecided"]
    for name, check in undecided:
        limits.append(rule_row("fairness", "not computed", f"the fAux check on the {name} is undecided: {check.reasons[0]}"))
    if settings.fail_on_current_check and cur.decision != "undecided":
        limits.append(rule_row("current_check", CHECK_STATUS[cur.decision], f"the gate's rule on the current batch{at}: "
                               f"{cur.decision}: {cur.reasons[0]}", cur.flagged_fraction, cur.max_flagged_fraction))
    if undecided:
        return limits
    inc, limit = fairness.increase, settings.max_flagged_fraction_increase
    limits.append(rule_row(
        "max_flagged_fraction_increase", "exceeded" if inc > limit else "ok",
        f"flagged fraction{at} {fairness.flagged_fraction_reference:.2%} (reference) -> "
        f"{fairness.flagged_fraction_current:.2%} (current): {inc:+.2%} {'>' if inc > limit else '<='} "
        f"max_flagged_fraction_increase {limit:.2%}", inc, limit))
    group_limit = settings.max_group_flagged_fraction_increase
    compared = [g for g in fairness.by_group if g["compared"]]
    if not compared:
        limits.append(rule_row("max_group_flagged_fraction_increase", "not computed", "no protected group has "
                               "decision.min_group_rows rows with defined scores in both batches", None, group_limit))
    for g in compared:
        over = g["increase"] > group_limit
        limits.append(rule_row(
            "max_group_flagged_fraction_increase", "exceeded" if over else "ok",
            f"group '{g['group']}': flagged fraction{at} {g['flagged_fraction_reference']:.2%} -> "
            f"{g['flagged_fraction_current']:.2%} ({g['increase']:+.2%} {'>' if over else '<='} {group_limit:.2%})",
            g["increase"], group_limit))
    if np.isfinite(fairness.ks_pvalue):
        over = fairness.ks_pvalue < settings.score_ks_pvalue and fairness.ks_statistic >= settings.score_ks_min_statistic
        limits.append(rule_row(
            "score_ks", "exceeded" if over else "ok",
            f"LIC score distribution{' (' + unit + ')' if unit else ''}: KS statistic {fairness.ks_statistic:.3f}, p = {fairness.ks_pvalue:.3g} "
            f"({fmt_count(fairness.n_reference_scores)} vs {fmt_count(fairness.n_current_scores)} scores; fails when "
            f"p < {settings.score_ks_pvalue:g} and the statistic >= {settings.score_ks_min_statistic:g})",
            fairness.ks_pvalue, settings.score_ks_pvalue))
    else:
        limits.append(rule_row("score_ks", "not computed", "no defined LIC score in a batch; the score distributions "
                               "cannot be compared", None, settings.score_ks_pvalue))
    return limits


def _classification_limits(settings: AuditSettings, classification: ClassificationQuality) -> list[dict]:
    """The target's ROC-AUC drop, a limit only when the policy sets one."""
    limit = settings.max_roc_auc_drop
    if limit is None:
        return []
    if classification.status == "not applicable":       # a value target: no ROC-AUC to compare; fails closed
        return [rule_row("max_roc_auc_drop", "not computed", f"ROC-AUC {classification.reason}; remove [audit] "
                         "max_roc_auc_drop from the policy of a value target", None, limit)]
    auc: dict[str, Any] = classification.metrics.get("roc_auc") or {}   # both values checked not None below
    if classification.status != "computed" or auc.get("reference") is None or auc.get("current") is None:
        return [rule_row("max_roc_auc_drop", "not computed", f"ROC-AUC not computed: {classification.reason or 'no value'}",
                         None, limit)]
    drop = auc["reference"] - auc["current"]
    over = drop > limit
    return [rule_row("max_roc_auc_drop", "exceeded" if over else "ok", f"ROC-AUC {auc['reference']:.3f} -> "
                     f"{auc['current']:.3f} (drop {drop:+.3f} {'>' if over else '<='} {limit:g})", drop, limit)]
