"""The gate on audit rows whose protected attribute comes from a linked file (policy ``[protected_file]``).

:func:`link_audit_rows` joins the protected file onto the audit rows (:func:`faux_checks.inputs.linked.join_protected`)
and applies the policy to the rows without a match: ``unmatched = "refuse"`` (the default) stops the check before
anything is scored (:class:`~faux_checks.errors.ConfigurationError`, exit 3, the count named); ``"exclude"`` checks
the matched rows, unless their unmatched share u exceeds ``max_unmatched_share`` (then refused likewise).

What exclude does to the interval (:func:`flagged_bound`). Over all N audit rows the flagged fraction is
F = (1 − u)·F_m + u·F_u, F_m the matched rows' and F_u the unmatched rows' own fraction, which nothing measures:
0 ≤ F_u ≤ 1. With [l, h] the matched rows' interval (Clopper–Pearson and aux seeds, :mod:`faux_checks.gate.bounds`),
F lies in [l(1 − u), h(1 − u) + u] at the same confidence whatever the unmatched rows are (a worst-case, Manski-type
bound: Manski 1989, "Anatomy of the selection problem"). The ``max_flagged_fraction`` rule decides on that bound
(:func:`bounded_rule`): ``exceeded`` only when its lower end is over the policy threshold, ``ok`` only when its
upper end is at or under it, ``inconclusive`` (undecided) in between; ``[decision] rule = "upper_bound"`` fails
on the upper end as it does on the interval. Every other rule reads the matched rows.

:func:`linked_outcome` adds a ``protected_file`` rule (the form of c, matched and unmatched counts, what exclude
did), rewrites the rules, decides again (:func:`~faux_checks.gate.decision.decide`) and puts each check's scores
back on the audit rows (the unmatched ones ``not_audited`` in the scores file); :func:`check_linked_attributes`
is the whole route for a library caller.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import ConfigurationError
from ..inputs.linked import LinkedRows, check_key_not_input, join_protected, link_protected_file
from .attributes import AttributeSection, AttributesResult, check_attributes
from .decision import decide, rule_row
from .policy_schema import Policy
from .result import CheckResult

__all__ = ["bounded_rule", "check_linked_attributes", "flagged_bound", "gate_rows", "link_audit_rows", "linked_outcome",
           "on_audit_rows", "protected_file_rule", "refuse_unmatched"]


def flagged_bound(lower: float, upper: float, unmatched_share: float) -> tuple[float, float]:
    """The flagged fraction's bound over all audit rows: ``[lower·(1 − u), upper·(1 − u) + u]`` (module docstring).

    Parameters
    ----------
    lower, upper : float
        The matched rows' interval, fractions in [0, 1].
    unmatched_share : float
        u, unmatched rows over all audit rows, in [0, 1).

    Returns
    -------
    (float, float)
        Lower and upper end, in [0, 1].
    """
    u = float(unmatched_share)
    return float(lower) * (1.0 - u), min(1.0, float(upper) * (1.0 - u) + u)


def refuse_unmatched(linked: LinkedRows, settings) -> None:
    """Apply ``[protected_file] unmatched`` and ``max_unmatched_share`` to the unmatched rows.

    Raises
    ------
    ConfigurationError
        ``unmatched = "refuse"`` and a row is unmatched, or ``"exclude"`` with an unmatched share over
        ``max_unmatched_share``, or no row matched at all: the count, the share and the fix named.
    """
    n, k, share = linked.n_rows, linked.n_unmatched, linked.unmatched_share
    counted = (f"{fmt_count(k)} of {fmt_count(n)} audit rows ({share:.2%}) have no '{linked.join_on}' key in the "
               "protected file")
    if k == n and n > 0:
        raise ConfigurationError(f"{counted}: no row matched, so there is nothing to check; check that both files "
                                 "write the same keys; nothing was written")
    if k and settings.unmatched == "refuse":
        raise ConfigurationError(f"{counted} (first rows: {', '.join(map(str, linked.unmatched[:5]))}); the policy "
                                 "refuses unmatched rows ([protected_file] unmatched = \"refuse\"): add their keys to "
                                 "the protected file, drop them from the audit data, or set unmatched = \"exclude\" "
                                 "(the decision then reads a bound over all rows); nothing was written")
    if share > settings.max_unmatched_share:
        raise ConfigurationError(f"{counted}, over [protected_file] max_unmatched_share "
                                 f"{settings.max_unmatched_share:.2%}: a bound that wide decides little; add the "
                                 "missing keys to the protected file or raise max_unmatched_share; nothing was written")


def _settings(policy: Policy):
    if policy.protected_file is None:
        raise ConfigurationError("no protected file: set [protected_file] path and join_on in the policy, or give "
                                 "--protected-file PATH --join-on KEY")
    return policy.protected_file


def link_audit_rows(data: pd.DataFrame, policy: Policy, *, feature_spec=None,
                    protected_rows: pd.DataFrame | None = None, audit_name: str = "the audit data") -> LinkedRows:
    """The audit rows with c joined from the policy's protected file, the unmatched rows handled by the policy.

    Parameters
    ----------
    data : DataFrame of shape (n, any)
        Audit rows with the key and no protected column.
    policy : Policy
        With ``[protected_file]`` (its ``join_on``; its ``path`` unless ``protected_rows`` is given).
    feature_spec : FeatureSpec, optional
        Refused when it names the key (:func:`~faux_checks.inputs.linked.check_key_not_input`).
    protected_rows : DataFrame, optional
        The protected file's rows, already read (the notebook); else read from ``[protected_file] path``.

    Raises
    ------
    ConfigurationError
        No ``[protected_file]`` or no path, every join error (:func:`~faux_checks.inputs.linked.join_protected`)
        and :func:`refuse_unmatched`.
    """
    settings = _settings(policy)
    check_key_not_input(feature_spec, settings.join_on)
    columns = [a.column for a in policy.attributes]
    if protected_rows is not None:
        linked = join_protected(data, protected_rows, settings.join_on, columns, names=(audit_name, "the protected rows"))
    elif settings.path is None:
        raise ConfigurationError(f"[protected_file] join_on = {settings.join_on!r} but no path: set [protected_file] "
                                 "path or give --protected-file PATH")
    else:
        linked = link_protected_file(settings.path, data, settings.join_on, columns, audit_name=audit_name)
    refuse_unmatched(linked, settings)
    return linked


def gate_rows(data: pd.DataFrame, policy: Policy, *, audit_name: str = "the audit data") -> pd.DataFrame:
    """The registry gate's audit rows: ``data`` itself, or with ``[protected_file]`` the matched rows with c joined
    (:func:`link_audit_rows`; the gate takes ``unmatched = "refuse"`` only, so its rules are the check's own).

    Raises
    ------
    ConfigurationError
        ``unmatched = "exclude"`` (the bound is read by ``faux-checks check`` and the notebook verb), and every error
        of :func:`link_audit_rows`.
    """
    if policy.protected_file is None:
        return data
    if policy.protected_file.unmatched != "refuse":
        raise ConfigurationError("the registry gate joins a protected file with [protected_file] unmatched = "
                                 "\"refuse\" only: add the missing keys (or drop those rows) and set it to refuse, or "
                                 "check the model file with `faux-checks check`, which reads the exclude bound")
    return link_audit_rows(data, policy, audit_name=audit_name).frame


def bounded_rule(row: Mapping[str, Any], interval, linked: LinkedRows, policy: Policy) -> dict:
    """A ``max_flagged_fraction`` rule row read on :func:`flagged_bound` over all audit rows (module docstring).

    A row the check did not judge (``not judged``, ``not met``, ...) keeps its status: the bound only widens the
    interval. With no unmatched row the row is returned unchanged.
    """
    u = linked.unmatched_share
    if not linked.n_unmatched or interval is None or row.get("status") not in ("ok", "exceeded", "inconclusive"):
        return dict(row)
    limit = policy.faux.max_flagged_fraction
    lo, hi = flagged_bound(interval.lower, interval.upper, u)
    if lo > limit or (policy.decision.rule == "upper_bound" and hi > limit):
        status, verdict = "exceeded", (f"> max_flagged_fraction {limit:.2%}: even the lower end exceeds it" if lo > limit
                                       else f"> max_flagged_fraction {limit:.2%}: its upper end exceeds it (rule upper_bound)")
    elif hi <= limit:
        status, verdict = "ok", f"<= max_flagged_fraction {limit:.2%}: the upper end is within the limit"
    else:
        status, verdict = "inconclusive", (f"straddles max_flagged_fraction {limit:.2%}: the unmatched rows could put it "
                                           "on either side; fewer unmatched rows or more audit rows would settle it")
    detail = (f"flagged fraction over all {fmt_count(linked.n_rows)} audit rows within [{lo:.2%}, {hi:.2%}] {verdict} "
              f"(the matched rows' {interval.text()} on {fmt_count(len(linked.matched))} rows; "
              f"{fmt_count(linked.n_unmatched)} unmatched rows, u = {u:.2%}, each counted flagged or not: "
              f"[l(1-u), h(1-u)+u]; on the matched rows: {row.get('detail')})")
    return {**rule_row(str(row.get("rule")), status, detail, row.get("observed"), limit), "bound": [lo, hi]}


def protected_file_rule(linked: LinkedRows, policy: Policy) -> dict:
    """The ``protected_file`` rule row: the form of c, matched and unmatched counts, what exclude does (status ok:
    a refused share never reaches a decision, :func:`refuse_unmatched`)."""
    settings = _settings(policy)
    effect = ("every audit row matched: the interval is the check's own" if not linked.n_unmatched else
              f"unmatched = exclude: the matched rows are checked and max_flagged_fraction decides on the bound "
              f"[l(1-u), h(1-u)+u] over all rows, u = {linked.unmatched_share:.2%}")
    detail = (f"c ({', '.join(linked.protected)}) joined from a linked protected file by '{linked.join_on}'; never an "
              f"input of the target model nor in the scores file; {fmt_count(len(linked.matched))} of "
              f"{fmt_count(linked.n_rows)} audit rows matched, {fmt_count(linked.n_unmatched)} unmatched "
              f"(max_unmatched_share {settings.max_unmatched_share:.2%} if excluded); {effect}")
    return rule_row("protected_file", "ok", detail, linked.unmatched_share, settings.max_unmatched_share)


def on_audit_rows(check: CheckResult, linked: LinkedRows) -> CheckResult:
    """``check`` (computed on :attr:`LinkedRows.frame`) with its per-row outputs on the audit rows.

    ``scores`` and ``flag_probability`` get shape (n_rows,) (NaN on unmatched rows, ``not_audited`` in the scores
    file); ``row_index``, the decomposition's index and ``top_flagged`` rows become audit-row positions.
    """
    if check.scores is None or check.row_index is None:
        return check

    def spread(values):
        if values is None:
            return None
        out = np.full(linked.n_rows, np.nan)
        out[linked.matched] = values
        return out
    decomposition = check.decomposition
    if decomposition is not None:
        decomposition = decomposition.set_axis(linked.matched[np.asarray(decomposition.index, dtype=int)], axis=0)
    top = [{**t, "row": int(linked.matched[int(t["row"])])} if "row" in t else t for t in check.top_flagged]
    return replace(check, scores=spread(check.scores), flag_probability=spread(check.flag_probability),
                   row_index=linked.matched[np.asarray(check.row_index, dtype=int)], decomposition=decomposition,
                   top_flagged=top)


def _section(section: AttributeSection, linked: LinkedRows, policy: Policy, prefix: str) -> tuple[AttributeSection, list]:
    """One attribute's check with the bounded rule, the protected-file rule, its own decision again."""
    check = on_audit_rows(section.check, linked)
    rules = [protected_file_rule(linked, policy)] + [
        bounded_rule(r, check.interval, linked, policy) if r.get("rule") == "max_flagged_fraction" else dict(r)
        for r in check.rules]
    outcome = decide(rules)
    details = {str(r.get("detail")) for r in check.rules}
    notes = [r for r in check.reasons if r not in details]
    provenance = {**check.provenance, "protected_file": {**linked.to_dict(), "unmatched_rule": _settings(policy).unmatched}}
    check = replace(check, decision=outcome.decision, reasons=list(outcome.reasons) + notes,
                    rules=list(outcome.rules), provenance=provenance)
    prefixed = [{**r, "rule": f"{prefix}/{r['rule']}", "detail": f"{prefix}: {r['detail']}", "attribute": prefix}
                for r in check.rules] if prefix else list(check.rules)
    return replace(section, check=check), prefixed


def linked_outcome(result: AttributesResult, linked: LinkedRows, policy: Policy) -> AttributesResult:
    """The gate's outcome on linked rows: each section's rules bounded (module docstring), one decision again.

    Parameters
    ----------
    result : AttributesResult
        :func:`~faux_checks.gate.attributes.check_attributes` on ``linked.frame``.
    linked : LinkedRows
    policy : Policy
        With ``[protected_file]``.
    """
    several = len(result.sections) > 1
    sections, rules = [], []
    for s in result.sections:
        section, rows = _section(s, linked, policy, s.attribute if several else "")
        sections.append(section)
        rules += rows
    if not several:
        check = sections[0].check
        return AttributesResult(check.decision, list(check.reasons), rules, sections)
    outcome = decide(rules)
    details = {str(r.get("detail")) for r in result.rules}
    notes = [r for r in result.reasons if r not in details]
    return AttributesResult(outcome.decision, list(outcome.reasons) + notes, list(outcome.rules), sections)


def check_linked_attributes(target_model, data: pd.DataFrame, *, policy: Policy,
                            protected_rows: pd.DataFrame | None = None, feature_spec=None,
                            **kwargs) -> AttributesResult:
    """:func:`~faux_checks.gate.attributes.check_attributes` with c joined from a linked file (module docstring).

    Parameters
    ----------
    target_model, feature_spec, **kwargs
        As for ``check_attributes`` (``aux_models``, ``progress``, ``model_info``).
    data : DataFrame of shape (n, any)
        Audit rows with the key, without the protected column.
    policy : Policy
        With ``[protected_file]``.
    protected_rows : DataFrame, optional
        The key and the protected column(s); read from ``[protected_file] path`` when not given.

    Raises
    ------
    ConfigurationError
        :func:`link_audit_rows` (join errors, unmatched rows refused), before anything is scored.
    """
    linked = link_audit_rows(data, policy, feature_spec=feature_spec, protected_rows=protected_rows)
    result = check_attributes(target_model, linked.frame, policy=policy, feature_spec=feature_spec, **kwargs)
    return linked_outcome(result, linked, policy)
