"""The coupling of a categorical proxy's levels: which decisions the data identify (rule ``level_coupling``).

When the counterfactual moves a categorical feature (a proxy with unordered levels whose distribution differs
by group), the level a person would have had in the other group is not identified from observational data:
the comonotone (inverse-CDF) and the Gumbel-max couplings of the level model are both consistent with it
(:mod:`faux_checks.method.readings`). :func:`coupling_evidence` reads the flagged fraction under each, with the
Fréchet bounds over every coupling; :func:`with_coupling_rule` turns them into the rule ``level_coupling``:

- every reading gives the decision of the coupling the check used: ``ok``, "decision robust across m of m
  readings";
- they disagree and the policy names a coupling (``[faux] swap_coupling = "comonotone"`` or ``"gumbel"``): ``ok``,
  the named coupling decides and the line says so ("decision robust across k of m readings");
- they disagree under ``swap_coupling = "auto"``: ``not met``, and a flagged-fraction rule that the used
  coupling alone would fail is ``not judged``: the decision is undecided (never passed) with the readings as
  its reason;
- no categorical feature is free to move: the rule does not apply and has no row; the provenance's
  ``couplings`` says so (``applies`` false, with the reason).

The bounds are reported, not decided on: they cover couplings that no structural model of the level proposes
(a person sent to the level the target treats worst), and they straddle most limits.

The streaming path (:mod:`faux_checks.gate.stream`) reads the policy's coupling only: its evidence has no
readings and the rule has no row there.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..method.readings import COUPLINGS, coupling_bounds, coupling_readings, moves_categorical
from .bounds import FlaggedInterval, flagged_interval
from .decision import rule_row

__all__ = ["COUPLING_RULE", "coupling_evidence", "coupling_rule", "reading_decision", "used_coupling",
           "with_coupling_rule"]

COUPLING_RULE = "level_coupling"
#: Rules the used coupling's reading decides, left ``not judged`` when the readings disagree under "auto".
FRACTION_RULES = ("max_flagged_fraction", "max_group_flagged_fraction", "max_group_flagged_ratio")


def used_coupling(setting: str, kind: str) -> str:
    """The coupling a check reads: the policy's ``swap_coupling``, "auto" being comonotone for a continuous c and
    Gumbel-max for groups (:class:`~faux_checks.method.counterfactual.SwapSettings`)."""
    if setting != "auto":
        return setting
    return "comonotone" if kind == "continuous" else "gumbel"


def _proxy_names(tester, feature_spec) -> list[str]:
    """Source column of each level model's one-hot group (positions in the aux input space)."""
    if feature_spec is None:
        return [f"one-hot group {i + 1}" for i in range(len(tester.reference.levels))]
    mask = tester.protected_mask
    keep = np.ones(feature_spec.n_features, dtype=bool) if mask is None else ~np.asarray(mask, dtype=bool)
    to_target = np.flatnonzero(keep)
    column_of = feature_spec.feature_to_column()
    return [str(feature_spec.source_columns[int(column_of[to_target[lm.positions[0]]])]) for lm in tester.reference.levels]


def coupling_evidence(tester, audit, policy, lic) -> dict[str, Any]:
    """The flagged fraction under each coupling of the categorical move, and the Fréchet bounds.

    Parameters
    ----------
    tester : FAuxTester
        The check's tester (cross-fitted: fold 0's, whose holds are every fold's; it reads the other couplings).
    audit : AuditRows
        The audited rows (:mod:`faux_checks.gate.rows`): ``X`` (n, d) encoded, ``values`` (n,) the protected
        attribute, ``feature_spec`` (names the categorical columns).
    policy : Policy
    lic : LICResult
        The check's own scores: the used coupling's reading is the check's flagged fraction.

    Returns
    -------
    dict
        ``applies`` False with ``reason``, or: ``setting`` (the policy's swap_coupling), ``used``, ``readings``
        (coupling -> flagged fraction, undefined counted as flagged), ``bounds``
        (:meth:`~faux_checks.method.readings.CouplingBounds.to_dict`), ``columns``, ``n``.
    """
    faux = policy.faux
    if faux.variant != "swap" or not moves_categorical(tester):
        why = ("the reading is not the swap reading" if faux.variant != "swap" else
               "no categorical feature is free to move (none, or every one declared admissible or held, or "
               "swap_categorical is not 'coupled')")
        return {"applies": False, "reason": why}
    X, c = audit.X, audit.values
    used = used_coupling(faux.swap_coupling, tester.reference.kind)
    readings = {used: float(np.mean(lic.decision_weights(faux.delta)))}
    readings.update(coupling_readings(tester, X, c, faux.delta, [k for k in COUPLINGS if k != used]))
    bounds = coupling_bounds(tester, X, c, faux.delta)
    return {"applies": True, "setting": faux.swap_coupling, "used": used,
            "readings": {k: readings[k] for k in COUPLINGS}, "bounds": None if bounds is None else bounds.to_dict(),
            "columns": _proxy_names(tester, audit.feature_spec), "n": int(len(X))}


def reading_decision(interval: FlaggedInterval, limit: float, rule: str = "interval") -> str:
    """The flagged-fraction rule's verdict on one reading: "passed", "failed" or "inconclusive" (the interval
    rule of :func:`~faux_checks.gate.check_rules.check_rules`; ``rule = "upper_bound"`` fails on the upper bound)."""
    if interval.upper <= limit:
        return "passed"
    if rule == "upper_bound" or interval.lower > limit:
        return "failed"
    return "inconclusive"


def coupling_rule(couplings: Mapping[str, Any] | None, policy, base: FlaggedInterval) -> list[dict]:
    """The ``level_coupling`` row (module docstring); none when the path computed no readings (``couplings`` None)
    or the rule does not apply (``applies`` False: its ``reason`` is in the provenance, ``couplings``).

    Each reading's interval is the check's: Clopper–Pearson at the same n and confidence, widened by the same
    aux-seed shift (``base``).
    """
    if couplings is None or not couplings.get("applies"):
        return []
    limit, used = policy.faux.max_flagged_fraction, couplings["used"]
    verdicts = {}
    parts = []
    for name, fraction in couplings["readings"].items():
        iv = flagged_interval(int(round(fraction * base.n)), base.n, base.confidence, base.seeds)
        verdicts[name] = reading_decision(iv, limit, policy.decision.rule)
        parts.append(f"{name}{' (used)' if name == used else ''} {iv.text()}: {verdicts[name]}")
    m = len(verdicts)
    k = sum(v == verdicts[used] for v in verdicts.values())
    line = f"decision robust across {k} of {m} readings"
    b = couplings.get("bounds") or {}
    bounds = (f"; over every coupling of the levels (Fréchet bounds) {b['flagged_lower']:.1%}–{b['flagged_upper']:.1%} "
              f"flagged, {b['change_lower']:.1%}–{b['change_upper']:.1%} of people change level" if b else "")
    named = couplings.get("setting", "auto") != "auto"
    why = ("named by the policy (swap_coupling)" if named else
           "swap_coupling 'auto': Gumbel-max for groups, comonotone for a continuous protected attribute")
    what = (f"the level of the categorical column(s) {', '.join(couplings.get('columns') or ())} moves under a "
            f"coupling the data do not identify; the check reads '{used}' ({why}) ({'; '.join(parts)}{bounds})")
    if k == m:
        return [rule_row(COUPLING_RULE, "ok", f"{line}: {what}", k, m)]
    if named:
        return [rule_row(COUPLING_RULE, "ok", f"{line}: decided by the policy's coupling '{used}': {what}", k, m)]
    return [rule_row(COUPLING_RULE, "not met", f"{line}: the couplings consistent with the data give different "
                     f"decisions, so the data cannot decide: {what}; set [faux] swap_coupling = 'comonotone' or "
                     "'gumbel' to decide by one", k, m)]


def with_coupling_rule(rows: Sequence[Mapping], couplings: Mapping[str, Any] | None, policy,
                       base: FlaggedInterval) -> list[dict]:
    """``rows`` with the ``level_coupling`` row added; when it is ``not met``, the flagged-fraction rules that
    read the used coupling alone and are ``exceeded`` become ``not judged`` (undecided, never passed)."""
    extra = coupling_rule(couplings, policy, base)
    out = [dict(r) for r in rows]
    if extra and extra[0]["status"] == "not met":
        for r in out:
            if r["rule"] in FRACTION_RULES and r["status"] == "exceeded":
                r["status"] = "not judged"
                r["detail"] += f"; not judged: {COUPLING_RULE} not met (another coupling of the levels decides otherwise)"
    return out + extra
