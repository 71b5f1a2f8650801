"""The sentence every report gives on the form the protected attribute c had, and what that form does to the interval.

c reaches a check in one of several forms: a column of the audit data (the flagged fraction's interval is the
check's own), or a linked protected file joined by a key (:mod:`faux_checks.gate.unmatched`: unmatched rows
excluded widen the decision's bound to [l(1 − u), h(1 − u) + u], u the unmatched share). :func:`protected_form_line`
reads the form from a check's provenance; :data:`PROTECTED_FORMS` holds one reader per form that is not a column,
so a new form (e.g. per-row group probabilities) adds its reader there and every report (text, HTML, JSON) states it.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

__all__ = ["PROTECTED_FORMS", "estimated_form", "linked_file_form", "protected_form_line"]


def linked_file_form(provenance: Mapping[str, Any]) -> str | None:
    """The linked-file form: "protected attribute 'c': linked file <name>, joined on <key>: k of n rows unmatched
    (excluded; the bound widens by u ...)"; None without a linked file.

    Parameters
    ----------
    provenance : mapping
        A check's provenance (:meth:`CheckResult.to_dict` ``provenance``); reads its ``protected_file`` entry
        (:meth:`faux_checks.inputs.linked.LinkedRows.to_dict` plus ``unmatched_rule``) and the policy's
        ``[protected_file] path``.
    """
    linked = provenance.get("protected_file")
    if not linked:
        return None
    settings = (provenance.get("policy") or {}).get("protected_file") or {}
    name = settings.get("path") or "(given in memory)"
    k, n = int(linked.get("unmatched") or 0), int(linked.get("rows") or 0)
    line = (f"protected attribute {', '.join(map(repr, linked.get('protected') or ()))}: linked file {name}, "
            f"joined on {linked.get('join_on')}: {k:,} of {n:,} rows unmatched")
    if k:
        u = float(linked.get("unmatched_share") or (k / n if n else 0.0))
        line += f" (excluded; the bound widens by u = {u:.2%}: [l(1-u), h(1-u)+u] over all rows)"
    return line


def estimated_form(provenance: Mapping[str, Any]) -> str | None:
    """The estimated form: "protected attribute 'c': estimated probabilities (columns ...), M draws, expected ROC-AUC a;
    the interval carries the imputation spread (between-draw variance v)"; None when c was not estimated.

    Parameters
    ----------
    provenance : mapping
        A check's provenance; reads its ``protected_probabilities`` entry
        (:func:`faux_checks.gate.estimated.check_estimated`: ``column``, ``groups``, ``draws``, ``expected_auc``,
        ``between_variance``).
    """
    est = provenance.get("protected_probabilities")
    if not est:
        return None
    columns = ", ".join(f"{g} = {c}" for g, c in (est.get("groups") or {}).items())
    auc, between = est.get("expected_auc"), est.get("between_variance")
    line = (f"protected attribute {est.get('column')!r}: estimated probabilities ({columns}), "
            f"{est.get('draws')} draws (multiple imputation)")
    if auc is not None:
        line += f", expected ROC-AUC {float(auc):.3f}"
    if between is not None:
        line += f"; the interval carries the imputation spread (between-draw variance {float(between):.2e})"
    return line


#: Readers of the forms of c that are not a column of the audit data: each takes a check's provenance and returns
#: the sentence, or None when the check did not have that form. The first that answers is the line.
PROTECTED_FORMS: list[Callable[[Mapping[str, Any]], str | None]] = [linked_file_form, estimated_form]


def protected_form_line(provenance: Mapping[str, Any] | None, protected: str | None = None) -> str:
    """The sentence on the form of c: the first of :data:`PROTECTED_FORMS` that answers, else
    "protected attribute '<c>': column in the audit data".

    Parameters
    ----------
    provenance : mapping or None
        A check's provenance (its ``policy`` names the protected column); None: no check ran.
    protected : str, optional
        The protected column, when the provenance's policy does not name it (e.g. a several-attribute section).

    Returns
    -------
    str
        One line, no trailing full stop.
    """
    provenance = provenance or {}
    for form in PROTECTED_FORMS:
        line = form(provenance)
        if line:
            return line
    column = protected or (provenance.get("policy") or {}).get("protected")
    if not column:
        return "protected attribute: not recorded (no check ran)"
    return f"protected attribute '{column}': column in the audit data"
