"""The policy's baseline testers, run on the rows the fAux check audits.

One definition of each tester's scores (:func:`baseline_scores`) and of its report entry
(:func:`flagged_summary`), shared by ``check_one_attribute`` and the Great Expectations baseline metrics.
Which testers exist, their settings and capability flags are the entries of
:data:`~faux_checks.gate.tester_table.TESTERS`; a new tester is one module and one entry there
(docs/architecture.md, "Where things go").
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..errors import InputError
from ..method.result import LICResult
from ..method.output import TargetOutput
from .policy_schema import Policy
from .tester_settings import TesterSettings
from .rows import AuditRows
from .tester_table import TESTERS, TesterCall, not_applicable, value_not_applicable

__all__ = ["baseline_scores", "flagged_summary", "run_baselines"]


def baseline_scores(name: str, settings: TesterSettings, target_model, output: TargetOutput, audit: AuditRows, *,
                    seed: int = 0, links: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[np.ndarray | None, str]:
    """Per-individual scores of a baseline tester on the audited rows, and what they measure.

    The one definition shared by :func:`~faux_checks.gate.one_attribute.check_one_attribute` and the Great Expectations baseline metrics.
    ``links`` are the policy's ``[linked_columns]`` (tester ``linked_columns``). "Not applicable" comes from the
    entry's capability flags (:func:`~faux_checks.gate.tester_table.not_applicable`) before its scorer runs.

    Returns
    -------
    scores : ndarray of shape (n,) or None
        None when the tester does not apply to this target (the str then says why).
    description : str
        The flagging rule in words (``"… > threshold"``), or "not applicable: …".

    Raises
    ------
    InputError
        ``name`` is not a per-individual tester of :data:`~faux_checks.gate.tester_table.TESTERS`.
    """
    tester = TESTERS.get(name)
    if tester is None or not tester.per_individual:
        known = [n for n, t in TESTERS.items() if t.per_individual]
        raise InputError(f"unknown per-individual tester {name!r}; known: {known}")
    reason = not_applicable(tester, target_model, audit, output)
    if reason is not None:
        return None, reason
    assert tester.scores is not None                # per-individual: Tester.__post_init__ requires scores=
    return tester.scores(TesterCall(settings=settings, target_model=target_model, output=output, audit=audit,
                                    seed=seed, links=links or {}))


def flagged_summary(settings: TesterSettings, scores: np.ndarray | None, description: str) -> dict[str, Any]:
    """The report entry of a per-individual tester: flagged fraction over ``threshold`` against its limit.

    ``scores`` None (tester not applicable): value None, passed True, ``description`` as summary.
    """
    limit = settings.max_flagged_fraction
    entry: dict[str, Any] = {"statistic": "flagged_fraction", "value": None, "threshold": settings.threshold,
                             "limit": limit, "gating": settings.gating, "passed": True, "p50": None, "p90": None,
                             "summary": description}
    if scores is None:
        return entry
    frac = float(np.mean(scores > settings.threshold))
    entry.update(value=frac, passed=limit is None or frac <= limit, p50=float(np.median(scores)),
                 p90=float(np.quantile(scores, 0.9)), summary=f"{frac:.2%} of individuals with {description}",
                 n_flagged=int(np.sum(scores > settings.threshold)), description=description)
    return entry


def run_baselines(policy: Policy, target_model, output: TargetOutput, X: np.ndarray, lic: LICResult,
                  groups: np.ndarray, y_true: np.ndarray | None, *, audit: AuditRows | None = None) -> dict[str, Any]:
    """Every enabled baseline tester of the policy on the audited rows: name -> report entry.

    Per-individual testers (entries of :data:`~faux_checks.gate.tester_table.TESTERS`) are summarised by
    :func:`flagged_summary`; group metrics (demographic parity, equalized odds) compare the
    predictions P(y | x) > 0.5 across ``groups`` (equalized odds needs ``y_true``). A tester that needs a
    probability is "not applicable" (value None) for a target that returns a value (``output.form == "value"``).
    """
    from ..baselines.group_metrics import group_metrics

    out: dict[str, Any] = {}
    for name, settings in policy.testers.items():
        if not settings.enabled:
            continue
        tester = TESTERS.get(name)       # the policy refuses names missing from the table
        if tester is None:
            raise InputError(f"policy tester {name!r} is not in the tester table (known: {sorted(TESTERS)}); "
                             "register it with faux_checks.gate.tester_table.register_tester")
        if tester.per_individual:
            if audit is None:
                raise InputError(f"tester {name!r} needs the audit rows (pass audit=)")
            scores, description = baseline_scores(name, settings, target_model, output, audit, seed=policy.seed,
                                                  links=policy.linked_columns)
            out[name] = flagged_summary(settings, scores, description)
            continue
        key = tester.statistic
        if tester.needs_probability and output.form == "value":
            out[name] = {"statistic": key, "value": None, "passed": True, "gating": settings.gating,
                         "threshold": settings.threshold, "limit": settings.threshold,
                         "summary": value_not_applicable(tester)}
            continue
        if tester.needs_label and y_true is None:
            out[name] = {"statistic": name, "value": None, "passed": False, "gating": settings.gating,
                         "threshold": settings.threshold, "summary": "not computed: the policy names no label column"}
            continue
        y_pred = (lic.probability > 0.5).astype(int)
        value = group_metrics(y_pred, groups, y_true if tester.needs_label else None)[key]
        out[name] = {"statistic": key, "value": value, "threshold": settings.threshold, "limit": settings.threshold,
                     "gating": settings.gating, "passed": value <= settings.threshold,
                     "summary": f"{key} {value:.2%} (limit {settings.threshold:.2%})"}
    return out
