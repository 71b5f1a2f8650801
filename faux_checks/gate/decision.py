"""The gate's outcome: three decisions, their exit codes, the one-line summary and the rules.

The contract (docs/architecture.md): ``passed`` exits 0; ``failed`` exits 1 (deployment
blocked); ``undecided`` exits 2 (could not decide: bad input, an auxiliary model too weak, any
error). A gate that cannot decide never passes.

Two rules decide from the fAux scores; they stand side by side here and share their reasons'
words:

- :func:`decide_check`: :func:`faux_checks.gate.check.run_check`, in memory, with the policy's
  baseline testers;
- :func:`decide_stream`: the streaming scorer (:mod:`faux_checks.gate.stream`), from exact
  running counts, without baseline testers.

Where they differ (see each docstring) the difference is today's behaviour, kept as it is. The
drift audit decides from its own limits (:func:`faux_checks.audit.decision.decide_audit`), the
Great Expectations suite from its expectations (``expectations.suite``).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .._validation import fmt_count

__all__ = [
    "DECISIONS",
    "EXIT_CODES",
    "aux_too_weak",
    "decide_check",
    "decide_stream",
    "summary_line",
    "undefined_note",
]

EXIT_CODES = {"passed": 0, "failed": 1, "undecided": 2}
#: The three outcomes, in exit-code order.
DECISIONS = tuple(EXIT_CODES)


def summary_line(result) -> str:
    """One-line outcome of a check-like result: "failed: 7.2% flagged > 5.0% at δ=0.05, n=10,000".

    ``result`` needs ``decision``, ``reasons``, ``flagged_fraction``, ``max_flagged_fraction``,
    ``delta`` and ``n_individuals`` (a :class:`CheckResult` or a streaming summary).
    """
    if result.decision == "undecided":
        return f"undecided: {result.reasons[0] if result.reasons else 'no reason recorded'}"
    op = ">" if result.flagged_fraction > result.max_flagged_fraction else "<="
    return (f"{result.decision}: {result.flagged_fraction:.1%} flagged {op} {result.max_flagged_fraction:.1%} "
            f"at δ={result.delta:g}, n={result.n_individuals:,}")


def aux_too_weak(aux_quality: float, min_aux_quality: float) -> bool:
    """True when the auxiliary model's quality is unknown (NaN) or below the policy's floor."""
    return not np.isfinite(aux_quality) or aux_quality < min_aux_quality


def _aux_too_weak_reason(aux_metric: str, aux_quality: float, min_aux_quality: float) -> str:
    return (f"auxiliary model too weak: {aux_metric} {aux_quality:.3f} < min_aux_quality {min_aux_quality:g}; "
            "fAux cannot estimate how the features depend on the protected attribute")


def _too_many_undefined_reason(n_undefined: int, n: int, faux) -> str:
    return (f"{fmt_count(n_undefined)} of {fmt_count(n)} LIC scores are undefined ({n_undefined / n:.2%} > "
            f"max_undefined_fraction {faux.max_undefined_fraction:.2%})")


def _flagged_reason(flagged_fraction: float, n_flagged: int, n_defined: int, faux) -> str:
    if flagged_fraction > faux.max_flagged_fraction:
        return (f"flagged fraction {flagged_fraction:.2%} > max_flagged_fraction {faux.max_flagged_fraction:.2%} "
                f"(LIC score > δ = {faux.delta:g}, {fmt_count(n_flagged)} of {fmt_count(n_defined)} individuals)")
    return (f"flagged fraction {flagged_fraction:.2%} <= max_flagged_fraction {faux.max_flagged_fraction:.2%} "
            f"at δ = {faux.delta:g}")


def undefined_note(n_undefined: int) -> str:
    """The note that follows a decision when some scores are undefined."""
    return f"{fmt_count(n_undefined)} individuals have an undefined score (zero or degenerate aux gradient)"


def decide_check(*, faux, min_aux_quality: float, aux_quality: float, aux_metric: str, n: int, n_undefined: int,
                 n_flagged: int, flagged_fraction: float, testers: Mapping[str, Any]) -> tuple[str, list[str]]:
    """The rule of :func:`~faux_checks.gate.check.run_check`; the first that applies wins.

    1. ``undecided`` when the auxiliary model's held-out quality is below ``min_aux_quality`` (or
       unknown): fAux's estimate of ∂x/∂c is only as good as f_aux (the paper's RQ4);
    2. ``undecided`` when more than ``max_undefined_fraction`` of the scores are undefined, or
       none is defined (a non-finite score is undefined, never "not flagged");
    3. ``failed`` when the flagged fraction (LIC score > δ, over defined scores) exceeds
       ``max_flagged_fraction``;
    4. ``passed`` otherwise, unless a baseline tester marked ``gating`` exceeded its limit: then
       ``failed``, with the testers' reasons first.

    Parameters
    ----------
    faux : FauxSettings
        The policy's ``[faux]`` section (δ and the limits).
    n, n_undefined, n_flagged : int
        Audited individuals, undefined scores, defined scores above δ.
    flagged_fraction : float
        ``n_flagged`` over the defined scores (NaN when none is defined).
    testers : mapping
        Baseline testers' summaries (``gating``, ``passed``, ``summary``).

    Returns
    -------
    decision : {"passed", "failed", "undecided"}
    reasons : list of str
        The rule that decided first.
    """
    reasons: list[str] = []
    n_defined = n - n_undefined
    undefined_fraction = n_undefined / n
    if aux_too_weak(aux_quality, min_aux_quality):
        decision = "undecided"
        reasons.append(_aux_too_weak_reason(aux_metric, aux_quality, min_aux_quality))
    elif undefined_fraction > faux.max_undefined_fraction:
        decision = "undecided"
        reasons.append(_too_many_undefined_reason(n_undefined, n, faux))
    elif n_defined == 0 or not np.isfinite(flagged_fraction):
        decision = "undecided"
        reasons.append(
            f"no individual has a defined LIC score ({fmt_count(n_undefined)} of {fmt_count(n)} undefined); "
            "there is nothing to decide on"
        )
    else:
        decision = "failed" if flagged_fraction > faux.max_flagged_fraction else "passed"
        reasons.append(_flagged_reason(flagged_fraction, n_flagged, n_defined, faux))
    gating_failures = [f"{name}: {t['summary']}" for name, t in testers.items() if t.get("gating") and not t["passed"]]
    if gating_failures and decision == "passed":
        decision = "failed"
        reasons[0:0] = [f"gating baseline tester exceeded its limit: {msg}" for msg in gating_failures]
    return decision, reasons


def decide_stream(*, policy, aux_quality: float, aux_metric: str, n: int, n_undefined: int, n_flagged: int,
                  flagged_fraction: float) -> tuple[str, list[str]]:
    """The rule of the streaming scorer (:func:`faux_checks.gate.stream.run.summarize`); the first that applies wins.

    1. ``undecided`` when the auxiliary model is too weak (as :func:`decide_check`);
    2. ``undecided`` when no row was audited;
    3. ``undecided`` when more than ``max_undefined_fraction`` of the scores are undefined;
    4. ``failed`` when the flagged fraction exceeds ``max_flagged_fraction``;
    5. ``undecided`` when the policy has an enabled *gating* baseline tester (not run here);
    6. ``passed`` otherwise.

    Differs from :func:`decide_check` today: a gating baseline tester makes the decision
    ``undecided`` (it is not run) instead of being judged, and there is no separate rule for
    "no defined score" (it is covered by rule 3 unless ``max_undefined_fraction`` is 1).

    Returns
    -------
    decision : {"passed", "failed", "undecided"}
    reasons : list of str
    """
    faux = policy.faux
    reasons: list[str] = []
    n_defined = n - n_undefined
    gating = sorted(name for name, t in policy.testers.items() if t.enabled and t.gating)
    if aux_too_weak(aux_quality, policy.min_aux_quality):
        decision = "undecided"
        reasons.append(_aux_too_weak_reason(aux_metric, aux_quality, policy.min_aux_quality))
    elif n == 0:
        decision = "undecided"
        reasons.append("no audited rows")
    elif n_undefined / n > faux.max_undefined_fraction:
        decision = "undecided"
        reasons.append(_too_many_undefined_reason(n_undefined, n, faux))
    elif flagged_fraction > faux.max_flagged_fraction:
        decision = "failed"
        reasons.append(_flagged_reason(flagged_fraction, n_flagged, n_defined, faux))
    elif gating:
        decision = "undecided"
        reasons.append(f"the policy's gating baseline tester(s) {gating} are not run by the streaming scorer; "
                       "run `faux-checks check` on a sample for them, or make them non-gating")
    else:
        decision = "passed"
        reasons.append(_flagged_reason(flagged_fraction, n_flagged, n_defined, faux))
    return decision, reasons
