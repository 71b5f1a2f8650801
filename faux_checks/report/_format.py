"""How report values read in the HTML page and the Prefect artifacts (private module; public names).

One rule for numbers, applied everywhere a report is shown: **a share of individuals or columns**
(a flagged fraction, the share of undefined scores or of drifted columns, a difference of groups'
rates such as demographic parity, the limits on them and their changes, a confidence level) **is a
percentage with two decimals** (``47.00%``); everything else (probabilities, LIC scores and δ in
probability points, AUC / R² and other model-quality scores, KS statistics, p-values, gradient
norms) is a plain number with 4 significant digits (``0.4667``). Each statistic is named for what
it is (:func:`rule_statistic`): a rule's value is never just "observed".
"""

from __future__ import annotations

import json
import re

__all__ = ["FRACTION_FIELDS", "cell", "expectation_statistic", "fmt", "is_fraction_field", "is_share_statistic", "pct",
           "printable", "rule_statistic", "signed_pct", "statistic_cell"]

#: Characters that steer a terminal or a text's layout instead of showing: C0/C1 controls (ESC starts
#: colour and cursor sequences, CR returns to the line's start), DEL, line/paragraph separators and the
#: bidirectional overrides that display text in another order. Tab is left as it is.
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\n{_CONTROLS}]")
_CONTROL_BUT_NEWLINE = re.compile(f"[{_CONTROLS}]")
_NAMED = {"\n": "\\n", "\r": "\\r"}

#: Field names (table columns, policy keys, without a ``section.`` prefix) whose values are shares.
FRACTION_FIELDS = frozenset({
    "flagged_fraction", "flagged_fraction_defined", "flagged_fraction_reference", "flagged_fraction_current",
    "flagged_fraction_lower", "flagged_fraction_upper", "drifted_share", "max_flagged_fraction",
    "max_undefined_fraction", "max_drifted_share", "max_flagged_fraction_increase",
    "max_group_flagged_fraction_increase", "confidence", "increase",
})
#: Tester statistics that are shares (a fraction of individuals, a difference of groups' rates).
FRACTION_STATISTICS = frozenset({"flagged_fraction", "demographic_parity_difference", "equalized_odds_difference"})
#: Fields whose values are changes of a share (shown with a sign).
SIGNED_FIELDS = frozenset({"increase"})

#: Rule name -> (what its value is, whether it is a share). Rules of the gate (faux_checks/gate/decision.py) and of
#: the drift audit (faux_checks/audit/decision.py).
RULE_STATISTICS: dict[str, tuple[str, bool]] = {
    "min_group_rows": ("rows of the smallest protected group (audited or aux held-out)", False),
    "min_aux_quality": ("auxiliary-model quality, lowest lower bound (AUC or R²)", False),
    "max_undefined_fraction": ("share of undefined LIC scores", True),
    "max_flagged_fraction": ("flagged fraction (point estimate; the decision reads its interval, in the detail)", True),
    "min_rows": ("rows of the current batch", False),
    "protected_drift": ("drift score of the protected attribute (method in the detail)", False),
    "max_drifted_share": ("share of drifted feature/protected columns", True),
    "current_check": ("flagged fraction on the current batch", True),
    "max_flagged_fraction_increase": ("increase of the flagged fraction, reference to current", True),
    "max_group_flagged_fraction_increase": ("increase of a group's flagged fraction", True),
    "score_ks": ("KS p-value of the LIC scores, reference vs current", False),
    "max_roc_auc_drop": ("drop of the target model's ROC-AUC", False),
}


def printable(text, *, keep_newlines: bool = False) -> str:
    """``text`` with every control character written as an escape (``\\x1b``, ``\\r``, ``\\u202e``): safe to show.

    For whatever comes from data (column names, group values, reasons that quote them, a report
    file's fields) before it reaches a terminal, a Markdown artifact or a log: an escape sequence
    in a column name cannot move the cursor and redraw a failed check as "passed".

    Parameters
    ----------
    text : object
        Converted with ``str``.
    keep_newlines : bool
        Keep ``\\n`` (text whose line breaks are ours); otherwise it is written ``\\n`` too.
    """
    pattern = _CONTROL_BUT_NEWLINE if keep_newlines else _CONTROL

    def escape(match: re.Match) -> str:
        ch = match.group()
        return _NAMED.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
    return pattern.sub(escape, str(text))


def fmt(v) -> str:
    """A value as a report cell: ``n/a`` for None, yes/no, 4 significant digits, JSON for lists and dicts."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return str(v)


def pct(v) -> str:
    """A share as a percentage with two decimals, ``n/a`` for None (a non-number is shown as it is)."""
    if v is None:
        return "n/a"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return fmt(v)
    return f"{v:.2%}"


def signed_pct(v) -> str:
    """A change of a share, with its sign: ``+1.25%``."""
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return fmt(v)
    return f"{v:+.2%}"


def is_fraction_field(field: str) -> bool:
    """Whether a column or key (``audit.max_drifted_share`` reads as ``max_drifted_share``) holds a share."""
    return str(field).rsplit(".", 1)[-1] in FRACTION_FIELDS


def cell(v, field: str) -> str:
    """A value as a cell of column / key ``field``: a percentage for a share (:data:`FRACTION_FIELDS`), else :func:`fmt`."""
    if is_fraction_field(field):
        return signed_pct(v) if str(field).rsplit(".", 1)[-1] in SIGNED_FIELDS else pct(v)
    return fmt(v)


def is_share_statistic(statistic: str | None) -> bool:
    """Whether a tester statistic (or an expectation's, e.g. ``fta_flagged_fraction``) is a share."""
    return statistic in FRACTION_STATISTICS or str(statistic).endswith("flagged_fraction")


def statistic_cell(v, statistic: str | None) -> str:
    """A tester's value: a percentage when its statistic is a share (:func:`is_share_statistic`)."""
    return pct(v) if is_share_statistic(statistic) else fmt(v)


def rule_statistic(row: dict, testers: dict | None = None) -> tuple[str, bool]:
    """What a rule row's value is, and whether it is a share.

    Parameters
    ----------
    row : dict
        A rule row (``rule``, ``observed``, ``limit``, ...; :func:`faux_checks.gate.decision.rule_row`).
    testers : dict, optional
        The check's testers (``name -> {statistic, ...}``), to name a ``tester:<name>`` rule's value.

    Returns
    -------
    (label, is_share)
    """
    rule = str(row.get("rule", "")).rsplit("/", 1)[-1]   # several attributes: 'sex/max_flagged_fraction'
    if rule in RULE_STATISTICS:
        return RULE_STATISTICS[rule]
    if rule.startswith("tester:"):
        statistic = ((testers or {}).get(rule.split(":", 1)[1]) or {}).get("statistic") or "value"
        return statistic.replace("_", " "), is_share_statistic(statistic)
    if rule.startswith("expect_"):   # a Great Expectations expectation of the gate's suite
        statistic = expectation_statistic(rule)
        return statistic.replace("_", " "), is_share_statistic(statistic)
    return "value", False


def expectation_statistic(kind: str) -> str:
    """``expect_demographic_parity_difference_to_be_at_most`` -> ``demographic_parity_difference``."""
    name = kind.removeprefix("expect_").removeprefix("faux_")
    for suffix in ("_to_be_at_most", "_to_be_between", "_to_be_at_least"):
        name = name.removesuffix(suffix)
    return name
