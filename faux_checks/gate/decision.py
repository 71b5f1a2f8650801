"""The decision engine: rules with a status in, ``passed`` / ``failed`` / ``undecided`` out.

One function decides everywhere: :func:`decide`. The in-memory check
(:func:`faux_checks.gate.one_attribute.check_one_attribute`), the streaming and sharded summary
(:func:`faux_checks.gate.stream.summary.attribute_summary`), the Great Expectations suite outcome
(``faux_checks_gx.suite``) and the drift audit (:func:`faux_checks.audit.decision.decide_audit`)
each turn what they measured into rule rows (:func:`rule_row`) and call it; the fAux check's
rows come from one builder, :func:`faux_checks.gate.check_rules.check_rules`, for both check paths.

Each rule has a status: ``ok``; ``exceeded`` (a limit measured and exceeded); or one that leaves
the gate unable to decide: ``not met`` (the evidence or quality a decision needs is missing),
``inconclusive`` (the interval straddles the limit), ``not judged`` (the rule depends on one that
is not met) or ``not computed``. The rule of :func:`decide`:

1. ``failed`` when any rule is ``exceeded`` (a valid measurement over its limit blocks the
   deployment even when something else could not be decided);
2. ``undecided`` when any other rule is not ``ok``, or when there is no rule at all;
3. ``passed`` otherwise.

Exit codes, one table for the CLI, ``CheckResult``, the streaming summary, the audit, the GX
suite outcome and the report: :data:`EXIT_CODES` (0 passed, 1 failed: deployment blocked,
2 undecided: could not decide). A gate that cannot decide never passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from .._validation import fmt_count

__all__ = ["DECISIONS", "EXIT_CODES", "STATUSES", "DecidedResult", "Decision", "Outcome", "add_rule", "decide",
           "exit_code_for", "missing_protected_note", "rule_row", "summary_line", "undefined_note"]

EXIT_CODES = {"passed": 0, "failed": 1, "undecided": 2}
#: The three outcomes, in exit-code order.
DECISIONS = tuple(EXIT_CODES)
#: A rule's status; every status after ``exceeded`` leaves the decision undecided.
STATUSES = ("ok", "exceeded", "not met", "inconclusive", "not judged", "not computed")
#: Rules whose detail leads the reasons of a pass.
HEADLINE_RULES = ("max_flagged_fraction", "current_check")


def exit_code_for(decision: str) -> int:
    """The process exit code of a decision: 0 ``passed``, 1 ``failed`` (deployment blocked), 2 ``undecided``.

    The one place the mapping is read (:data:`EXIT_CODES`); every result's ``exit_code`` comes from here
    (:class:`Outcome`).

    Raises
    ------
    ValueError
        ``decision`` is not one of :data:`DECISIONS` (a result was built with a decision the engine never
        makes; the message names it).
    """
    try:
        return EXIT_CODES[decision]
    except (KeyError, TypeError):
        raise ValueError(f"decision {decision!r} is not one of {list(DECISIONS)}; a result's decision comes from "
                         "faux_checks.gate.decision.decide") from None


class Outcome:
    """The base of every decided result: ``decision``, ``reasons``, ``rules`` and the :attr:`exit_code` they give.

    The in-memory check (``CheckResult``), the several-attribute check (``AttributesResult``), the streaming
    summaries (``StreamSummary``, ``StreamResult``), the drift audit (``AuditResult``), the GX suite's
    outcome (``SuiteOutcome``) and the engine's own :class:`Decision` derive from it, so the decision -> exit
    code mapping is written once (:func:`exit_code_for`). Subclasses are dataclasses that define the three
    fields; this base adds no state.
    """

    __slots__ = ()
    decision: str
    reasons: list[str]
    rules: list[dict]

    @property
    def exit_code(self) -> int:
        """0 passed, 1 failed, 2 undecided (:func:`exit_code_for`; docs/architecture.md, contracts)."""
        return exit_code_for(self.decision)


class DecidedResult(Outcome):
    """What the check's result and the stream's summary both derive from their decision and counts.

    Needs ``decision``, ``n_individuals``, ``n_undefined`` and ``n_flagged`` on the class using it.
    """

    if TYPE_CHECKING:                       # declared by the dataclasses that derive from it
        n_individuals: int
        n_undefined: int
        n_flagged: int

    @property
    def flagged_fraction_defined(self) -> float:
        """Flagged share over the defined scores only (undefined rows left out): the report's second reading."""
        defined = self.n_individuals - self.n_undefined
        return self.n_flagged / defined if defined > 0 else float("nan")


def rule_row(rule: str, status: str, detail: str, observed: Any = None, limit: Any = None) -> dict:
    """One rule of a decision, JSON-ready: ``rule``, ``observed``, ``limit``, ``status``, ``detail``.

    Parameters
    ----------
    rule : str
        Its name (a policy key such as ``max_flagged_fraction``, ``tester:<name>``, an audit limit).
    status : str
        One of :data:`STATUSES`.
    detail : str
        What was found against what was required, with counts; it becomes a reason of :func:`decide`.
    observed, limit : number, bool or None
        The value measured and the policy's limit (NaN is written as None).
    """
    def plain(v):
        return None if isinstance(v, float) and not math.isfinite(v) else v
    return {"rule": rule, "observed": plain(observed), "limit": plain(limit), "status": status, "detail": detail}


@dataclass(frozen=True)
class Decision(Outcome):
    """The engine's outcome: ``decision``, ``reasons`` (the deciding rules first) and the ``rules`` it read."""

    decision: str
    reasons: list[str]
    rules: list[dict] = field(default_factory=list)


def decide(rules: Sequence[Mapping]) -> Decision:
    """Turn rule rows into a decision (the rule is in the module docstring).

    Parameters
    ----------
    rules : sequence of dict
        :func:`rule_row` rows, in the order a reader should see them (causes before the rules that
        depend on them). A status outside :data:`STATUSES` counts as ``not computed`` (fail closed).

    Returns
    -------
    Decision
        ``failed``: the exceeded rules' details, then the undecided ones'; ``undecided``: the
        details of every rule not ``ok``; ``passed``: every detail, :data:`HEADLINE_RULES` first.
    """
    rows = [dict(r) if r.get("status") in STATUSES else {**r, "status": "not computed",
                                                         "detail": f"{r.get('detail', '')} (unknown status "
                                                                   f"{r.get('status')!r})"} for r in rules]
    if not rows:
        return Decision("undecided", ["nothing was checked: no rule applies, so there is nothing to decide on"], [])
    exceeded = [r["detail"] for r in rows if r["status"] == "exceeded"]
    unsure = [r["detail"] for r in rows if r["status"] not in ("ok", "exceeded")]
    if exceeded:
        return Decision("failed", exceeded + unsure, rows)
    if unsure:
        return Decision("undecided", unsure, rows)
    ordered = sorted(rows, key=lambda r: r["rule"] not in HEADLINE_RULES)
    return Decision("passed", [r["detail"] for r in ordered], rows)


def add_rule(decision: str, reasons: Sequence[str], rules: Sequence[Mapping], row: Mapping) -> Decision:
    """A decision made by other rules, with one more rule read after them (e.g. the "no new harm" rule).

    ``exceeded`` fails the decision (its detail first); a rule not ``ok`` and not ``exceeded`` leaves a
    ``passed`` decision ``undecided`` (its detail first) and a ``failed`` one failed (detail appended);
    ``ok`` keeps the decision, its detail appended. The same fold as :func:`decide`, without re-reading
    the earlier rules (their decision may carry more than rule rows, e.g. GX's own exceptions).
    """
    row = dict(row)
    rows, reasons = [*map(dict, rules), row], list(reasons)
    status = row.get("status")
    if status == "exceeded":
        return Decision("failed", [row["detail"], *reasons], rows)
    if status != "ok":
        if decision == "passed":
            return Decision("undecided", [row["detail"], *reasons], rows)
        return Decision(decision, [*reasons, row["detail"]], rows)
    return Decision(decision, [*reasons, row["detail"]], rows)


def summary_line(result) -> str:
    """One-line outcome of a check-like result: "failed: 7.20% (95% CI 6.9–7.5%) flagged > 5.0% at δ=0.05, n=10,000".

    ``result`` needs ``decision``, ``reasons``, ``rules``, ``interval`` (a FlaggedInterval or None),
    ``max_flagged_fraction``, ``delta`` and ``n_individuals`` (a :class:`CheckResult` or a streaming summary); δ
    carries the unit of a value target (``provenance["unit"]``). When the decision came from another rule than the flagged fraction, that rule's detail is shown.
    """
    first = result.reasons[0] if result.reasons else "no reason recorded"
    deciding = next((r["rule"] for r in (result.rules or []) if r["status"] == "exceeded"), "max_flagged_fraction")
    iv = getattr(result, "interval", None)
    if result.decision == "undecided" or iv is None or deciding != "max_flagged_fraction":
        return f"{result.decision}: {first}"
    op = ">" if result.decision == "failed" else "<="
    unit = (getattr(result, "provenance", None) or {}).get("unit")        # a value target's unit ([faux] unit)
    return (f"{result.decision}: {iv.text()} flagged {op} {result.max_flagged_fraction:.1%} "
            f"at δ={result.delta:g}{' ' + unit if unit else ''}, n={result.n_individuals:,}")


def undefined_note(n_undefined: int) -> str:
    """The note that follows a decision when some scores are undefined."""
    return (f"{fmt_count(n_undefined)} individuals have an undefined score (zero or degenerate aux gradient); "
            "they count as flagged")


def missing_protected_note(n_missing: int) -> str:
    """The note for rows left out because their protected value is missing (policy ``missing_protected = "drop"``)."""
    return f"{fmt_count(n_missing)} rows with a missing protected value were not audited (policy)"
