"""The report's limitations section, generated from what the run did.

Each statement is chosen by a fact recorded in ``report.json`` (the check's provenance, the policy, the per-group
counts), never written once for every page: the reading in force and its unit, whether columns were declared
admissible (and that declaring them is a value judgement), the kind of protected attribute (a continuous or
multi-class c under-flags in measured cells), small groups and their interval width, undefined scores, a
forward-only target, a given auxiliary model, a categorical proxy's coupling, and a pass with a group above the overall limit. The measurements
quoted are docs/benchmark.md's ("What the shipped reading fails") and docs/method.md's.
"""

from __future__ import annotations

import math
from typing import Any

from .plots import report_unit

__all__ = ["limitations"]

#: Below this many audited rows a group's 95% interval is wider than about ±10 points at a fraction near 50%.
SMALL_GROUP_ROWS = 100


def limitations(report: dict[str, Any]) -> list[dict[str, str]]:
    """What this run's decision does not establish, one statement per fact of the run.

    Parameters
    ----------
    report : dict
        ``report.json`` content (``check`` with its ``provenance``, ``by_group``, ``group_rows``; ``policy``;
        ``decision``).

    Returns
    -------
    list of dict
        ``topic`` (``reading``, ``declarations``, ``attribute``, ``groups``, ``coupling``, ``outcome``, ``cutoff``,
        ``undefined``, ``target``, ``aux``, ``decision``) and ``text``; one ``decision`` entry only, saying nothing was
        measured, when the check did not run.
    """
    check = report.get("check") or {}
    prov = check.get("provenance") or {}
    policy = report.get("policy") or prov.get("policy") or {}
    faux = policy.get("faux") or {}
    if not check:
        return [{"topic": "decision", "text": "the check did not run, so nothing about the model was measured: the "
                 "decision is undecided because of the reasons above, not because of the model's scores"}]
    protected = policy.get("protected") or "c"
    variant = prov.get("variant") or faux.get("variant")
    outcome = check.get("outcome") or {}
    name = outcome.get("probability") or "P(y)"
    out = [_reading(protected, variant, name, report_unit(report) or "probability points"),
           _declarations(protected, list(faux.get("admissible") or []))]
    out += _attribute_statements(protected, prov.get("protected_kind") or policy.get("protected_kind"),
                                 prov.get("groups") or [])
    out += _group_statements(check, policy, report.get("decision") or check.get("decision"))
    out += _coupling_statements(prov)
    out += _run_statements(check, prov, outcome, name)
    return out


def _reading(protected: str, variant: str | None, name: str, unit: str) -> dict[str, str]:
    """What the score reads: a modelled counterfactual change in ``unit`` (the target's output), or (another variant) not."""
    if variant in (None, "swap"):
        return {"topic": "reading", "text": (
            f"the score is an estimate of how much {name} would change if only '{protected}' were swapped, the other "
            f"features moving as the auxiliary model and the matched move say they go with it ({unit}). "
            "It is a model of the counterfactual, not an observed one: a proxy the data do not show is not seen")}
    return {"topic": "reading", "text": (
        f"the '{variant}' reading's score is not in probability points (eq. 9: per unit of the auxiliary model's "
        "output), so δ depends on how steep that model is and does not mean the same on another data set")}


def _declarations(protected: str, admissible: list[str]) -> dict[str, str]:
    """The admissible columns declared (a value judgement the result holds under), or that none is."""
    if admissible:
        return {"topic": "declarations", "text": (
            f"declared admissible, and held at each person's own value: {', '.join(admissible)}. That these may "
            "differ between groups is the policy owner's value judgement; the result holds under it only")}
    return {"topic": "declarations", "text": (
        "no column is declared admissible: the score counts the use of every feature that differs between "
        f"groups of '{protected}', not discrimination alone (docs/benchmark.md: 47–61% of every Adult model flagged without "
        "declarations). Which columns may differ is a value judgement for the policy's owner")}


def _attribute_statements(protected: str, kind: str | None, groups: list) -> list[dict[str, str]]:
    """What a continuous or a multi-class protected attribute weakens (measured cells); nothing for a binary one."""
    out: list[dict[str, str]] = []
    if kind == "continuous":
        out.append({"topic": "attribute", "text": (
            f"'{protected}' is continuous: each person is moved by ± one standard deviation. With a categorical proxy "
            "this under-flags in measured cells (law school, bias 0.8: 13.7% flagged against 21.5% truly affected), "
            "so a pass is weaker evidence")})
    elif kind == "multiclass" or len(groups) > 2:
        out.append({"topic": "attribute", "text": (
            f"'{protected}' has {len(groups) or 'several'} groups: a person counts as flagged with the chance that moving "
            "to any other group changes the prediction by more than δ (the capped sum over the groups, an upper bound: "
            "about 1 point high where the groups' flags fall on the same people, e.g. 3-class cells read 20.1/21.2/16.8% "
            "against 21.0/22.1/17.1% truly affected); small groups carry wide intervals")})
    return out


def _run_statements(check: dict, prov: dict, outcome: dict, name: str) -> list[dict[str, str]]:
    """Facts of this run: an undeclared favourable outcome, a cut-off reading, undefined scores, a forward-only
    target, a given or reused auxiliary model."""
    out: list[dict[str, str]] = []
    if outcome and not outcome.get("declared"):
        out.append({"topic": "outcome", "text": (
            f"which outcome is favourable is not declared (policy {outcome.get('key') or 'favourable_label'}): the "
            f"report says in which direction {name} moves, not whether that is a gain or a loss, and calls no group "
            "most favoured")})
    cutoff = outcome.get("cutoff") if outcome else None
    if cutoff:
        out.append({"topic": "cutoff", "text": (
            f"the cut-off reading ('{cutoff.get('reading')}') compares each person's output with one modelled "
            "counterfactual output (with categorical level switches, their expected output): a person close to the "
            "cut-off counts as crossing on a small modelled move, and one whose level switches would straddle it "
            "counts by that expected value. It reads a single cut-off; a score used with several (tiers, pricing "
            "bands) is read at the one the policy names, and δ still reads the size of the change")})
    n_undefined = check.get("n_undefined") or 0
    if n_undefined:
        out.append({"topic": "undefined", "text": (
            f"{n_undefined:,} scores are undefined and counted as flagged (the worst case): the flagged fraction is an "
            "upper reading for those individuals")})
    access = str(prov.get("target_access") or "")
    if access.startswith("forward"):
        out.append({"topic": "target", "text": (
            f"the target was queried for predictions only ({access}): no gradient evidence, and a tree's score is 0 "
            "where the move crosses no split")})
    if prov.get("aux_given"):
        out.append({"topic": "aux", "text": "the auxiliary model was given, not trained on these rows: its quality "
                    "was measured here, but no spread over aux seeds widens the interval"})
    if prov.get("aux_reused_from"):
        out.append({"topic": "aux", "text": (
            f"the auxiliary model was reused from {prov['aux_reused_from']}, not trained again: that run trained it "
            "on the same audit rows, protected values, encoding, [aux] settings and seed (key "
            f"{str(prov.get('aux_key'))[:12]}), so it is the model a new training would give")})
    return out


def _group_statements(check: dict, policy: dict, decision: str | None) -> list[dict[str, str]]:
    """Small groups (interval width) and, on a pass, groups flagged above the overall limit."""
    out = []
    limit = check.get("max_flagged_fraction")
    rows = {str(r.get("group")): r for r in check.get("by_group") or []}
    small = [g for g in check.get("group_rows") or [] if (g.get("audited") or 0) < SMALL_GROUP_ROWS]
    if small:
        shown = ", ".join(f"'{g['group']}' ({g.get('audited', 0):,} rows)" for g in small)
        out.append({"topic": "groups", "text": f"small groups: {shown}; an interval over fewer than "
                    f"{SMALL_GROUP_ROWS} people is wide, so these groups' flagged fractions are weak evidence"})
    high = [(g, r) for g, r in rows.items() if limit is not None and _num(r.get("flagged_fraction")) > limit]
    if high and decision == "passed":
        assert limit is not None                    # high is empty without a limit
        shown = "; ".join(f"'{g}' {_num(r.get('flagged_fraction')):.1%} of {int(r.get('n') or 0):,}" for g, r in high)
        group_limit = ((policy.get("decision") or {}).get("max_group_flagged_fraction")
                       or min(1.0, 2 * float(limit)))
        out.append({"topic": "groups", "text": (
            f"passed although group(s) {shown} are flagged above the overall limit {limit:.1%}: the overall fraction "
            f"is a mean over groups, and the per-group rule fails a group only when its interval's lower bound is "
            f"above {group_limit:.1%} (see the rule max_group_flagged_fraction)")})
    return out


def _coupling_statements(prov: dict) -> list[dict[str, str]]:
    """The coupling of a categorical proxy's levels, which the data do not identify (provenance ``couplings``)."""
    cp = prov.get("couplings") or {}
    if not cp.get("applies"):
        return []
    readings = "; ".join(f"{k} {_num(v):.1%}" for k, v in (cp.get("readings") or {}).items())
    b = cp.get("bounds") or {}
    bounds = (f"; over every coupling {_num(b.get('flagged_lower')):.1%}–{_num(b.get('flagged_upper')):.1%}"
              if b else "")
    return [{"topic": "coupling", "text": (
        f"which level of {', '.join(cp.get('columns') or ['a categorical column'])} a person would have had in another "
        f"group is not identified by the data: the check read '{cp.get('used')}', and the flagged fraction under each "
        f"coupling consistent with the data is {readings}{bounds} (rule level_coupling)")}]


def _num(value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return float("nan")
    return v if math.isfinite(v) else float("nan")
