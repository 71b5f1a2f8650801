"""The fAux check's rules: what a check measured (:class:`CheckEvidence`) as rule rows for the engine.

One builder, :func:`check_rules`, for both check paths (the in-memory
:func:`faux_checks.gate.one_attribute.check_one_attribute` and the streaming :func:`faux_checks.gate.stream.summary.attribute_summary`):
evidence per group, the auxiliary model's quality, undefined scores, the flagged fraction (overall and per
group) and the gating baseline testers. :func:`faux_checks.gate.decision.decide` reads the rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .._validation import fmt_count
from .bounds import FlaggedInterval, auc_interval, auc_rows_needed, below_floor, clopper_pearson, rows_needed
from .couplings import with_coupling_rule
from .cutoff import CutoffReading, cutoff_rule
from .decision import rule_row
from .joint_block import release_text

__all__ = ["GUARD_RULES", "CheckEvidence", "check_rules", "group_flagged_rules", "group_intervals", "held_block_rule"]

#: Rules that keep a model from passing but not from failing: a weak auxiliary model or a small group biases the
#: flagged count downwards (:func:`check_rules`), so a lower bound over the limit fails the model even where they
#: are not met.
GUARD_RULES = ("min_group_rows", "min_aux_quality")


@dataclass(frozen=True)
class CheckEvidence:
    """What a fAux check measured, as the rules read it (both check paths fill one).

    Attributes
    ----------
    n, n_flagged, n_undefined : int
        Audited individuals; defined scores above δ; undefined scores.
    group_rows : dict
        Audited rows per protected group (name -> count).
    holdout_rows : dict
        The auxiliary model's held-out rows per group (all audited rows for a given aux model).
    aux_metric : str
    aux_intervals : list of dict
        :func:`faux_checks.gate.bounds.quality_intervals`: quality and interval where it matters.
    interval : FlaggedInterval
        The flagged fraction (undefined counted as flagged) and its bounds.
    testers : mapping
        Baseline testers' summaries (``gating``, ``passed``, ``value``, ``summary``).
    testers_not_run : tuple of str
        Gating testers the path does not run (the streaming scorer).
    group_flagged : dict, optional
        Flagged individuals per protected group (undefined counted as flagged; flag probabilities summed), for
        the per-group rules; None on a path that does not count them (the rules are then not computed).
    nothing_free : bool
        The swap reading held every feature (declared, uninformative or independent of c): nothing moves and
        every score is 0 by definition. When the held block is jointly free of c (``held_block``), the aux-quality
        floor does not apply (it concerns what the move uses, and nothing moves); otherwise it applies.
    held_block : dict, optional
        The joint test of the columns the tool's own tests hold
        (:func:`faux_checks.method.joint_hold.jointly_free_hold`'s summary, with ``columns``: their source
        names); None on a path without it (no rule then).
    couplings : dict, optional
        :func:`faux_checks.gate.couplings.coupling_evidence`; None on a path without readings (no rule then).
    """

    n: int
    n_flagged: int
    n_undefined: int
    group_rows: Mapping[str, int]
    holdout_rows: Mapping[str, int]
    aux_metric: str
    aux_intervals: Sequence[Mapping]
    interval: FlaggedInterval
    testers: Mapping[str, Any] = field(default_factory=dict)
    nothing_free: bool = False
    testers_not_run: tuple[str, ...] = ()
    group_flagged: Mapping[str, float] | None = None
    held_block: Mapping[str, Any] | None = None
    couplings: Mapping[str, Any] | None = None


def check_rules(evidence: CheckEvidence, policy, cutoff: CutoffReading | None = None) -> list[dict]:
    """The fAux check's rules, in reading order: evidence, aux quality, undefined scores, flagged fraction, testers.

    - ``min_group_rows``: every protected group has ``decision.min_group_rows`` audited rows and as
      many of the auxiliary model's held-out rows; else ``not met`` ("insufficient evidence");
    - ``min_aux_quality``: the lower bound of the aux quality's interval, for every group where it
      matters (:func:`~faux_checks.gate.bounds.quality_intervals`), reaches the floor; else ``not met``;
    - ``max_undefined_fraction``: undefined scores within the limit and at least one defined; else ``not met``;
    - ``max_flagged_fraction``: the fraction counts an undefined score as flagged, over every audited
      individual. When only the guards (:data:`GUARD_RULES`: ``min_group_rows``, ``min_aux_quality``) are not
      met, ``exceeded`` if the lower bound is above the limit, else ``not judged``: the guards keep a model from
      passing, never from failing. A weaker auxiliary model reads less of c from the features, so the holds'
      tests find fewer features informative (more are held), its log-odds separate the groups less, and the
      move it drives (or the matched values of features it reads) carries fewer people across δ: the count is
      biased downwards, and a lower bound already over the limit stays over it with a better model
      (benchmarks/bench_crossfit.py --weak: epochs 30, 3, 1 on ground truth). A small group's own evidence is
      its Clopper-Pearson interval, which the per-group rule reads at its size. ``not judged`` when another rule
      above is not met; otherwise (rule ``interval``) ``ok``
      when the upper bound is at or below the limit, ``exceeded`` when the lower bound is above it,
      ``inconclusive`` in between (with the rows that would decide it); rule ``upper_bound``:
      ``ok`` or ``exceeded`` on the upper bound;
    - ``max_group_flagged_fraction`` and, when set, ``max_group_flagged_ratio``: :func:`group_flagged_rules`;
    - ``held_jointly_free``: :func:`held_block_rule` (the report's own numbers must not say that the auxiliary
      model's evidence about c sits in what the counterfactual holds);
    - ``level_coupling``: :func:`~faux_checks.gate.couplings.with_coupling_rule` (a categorical proxy's move read
      under each coupling consistent with the data);
    - ``tester:<name>`` for each gating baseline tester: ``exceeded`` over its limit, ``not computed``
      when it could not run (or is not run on this path) and when it is not applicable to this model
      (e.g. a gradient tester on a forward-only target): a gating tester that cannot judge never passes;
    - ``cutoff_crossing``: :func:`~faux_checks.gate.cutoff.cutoff_rule` on ``cutoff`` (a value target's reading;
      ``not computed`` when the policy sets ``[faux] cutoff`` and a path gives none).
    Parameters: ``evidence`` (:class:`CheckEvidence`), ``policy`` (Policy), ``cutoff`` (CutoffReading or None). Returns
    :func:`rule_row` rows (list of dict) for :func:`decide`.
    """
    if evidence.n == 0:
        return [rule_row("min_group_rows", "not computed", "no audited rows: there is nothing to decide on", 0,
                         policy.decision.min_group_rows)]
    rows = [_group_rule(evidence, policy.decision.min_group_rows),
            _aux_rule(evidence, policy.min_aux_quality, policy.decision.confidence),
            _undefined_rule(evidence, policy.faux.max_undefined_fraction)]
    unmet = [r for r in rows if r["status"] != "ok"]
    rows.append(_flagged_rule(evidence, policy, unmet))
    rows += group_flagged_rules(evidence, policy, unmet)
    rows += cutoff_rule(cutoff, policy, unmet, all(r["rule"] in GUARD_RULES for r in unmet))
    rows += held_block_rule(evidence)
    return with_coupling_rule(rows, evidence.couplings, policy, evidence.interval) + _tester_rules(evidence)


def group_intervals(ev: CheckEvidence, policy, *, every: bool = False) -> list[dict]:
    """Per protected group: rows, flagged count, fraction and its Clopper-Pearson interval, and whether it is judged.

    The interval's confidence is Bonferroni-adjusted over the judged groups (1 − (1 − confidence)/m), so that a
    fair model fails the per-group rule through any of m groups with probability at most 1 − confidence. A group
    with fewer than ``decision.min_group_rows`` audited rows is listed with ``judged = False``; with ``every`` every
    group with a row is judged (the Bonferroni over all of them): the rule that may fail a model under its guards.

    Returns
    -------
    list of dict
        ``group``, ``n``, ``flagged`` (int, rounded), ``fraction``, ``lower``, ``upper``, ``confidence``, ``judged``;
        empty when the path does not count flags per group.
    """
    if not ev.group_flagged:
        return []
    minimum = 1 if every else policy.decision.min_group_rows
    judged = [g for g, n in ev.group_rows.items() if n >= minimum and n > 0]
    confidence = 1.0 - (1.0 - policy.decision.confidence) / max(len(judged), 1)
    out = []
    for group, n in ev.group_rows.items():
        k = int(round(float(ev.group_flagged.get(group, 0.0))))
        lo, hi = clopper_pearson(min(k, n), n, confidence) if n else (float("nan"), float("nan"))
        out.append({"group": str(group), "n": int(n), "flagged": k, "fraction": k / n if n else float("nan"),
                    "lower": lo, "upper": hi, "confidence": confidence, "judged": group in judged})
    return out


def group_flagged_rules(ev: CheckEvidence, policy, unmet: Sequence[Mapping] = ()) -> list[dict]:
    """The per-group rules: no protected group flagged clearly above its limit, and (optionally) no ratio between groups.

    - ``max_group_flagged_fraction`` (:meth:`~faux_checks.gate.policy.DecisionSettings.group_flagged_limit`,
      default twice ``faux.max_flagged_fraction``): ``exceeded`` when some judged group's lower bound
      (:func:`group_intervals`) is above the limit, else ``ok``; a group whose fraction is above the limit but
      whose lower bound is not is named in the detail (a pass with a high group is explained, not hidden);
    - ``max_group_flagged_ratio`` (off unless set): ``exceeded`` when the highest judged group's lower bound
      over the lowest judged group's upper bound exceeds it. Off by default: a ratio of two small fractions
      (0.2% against 1%) reads as a large disparity where nobody is much affected, which the fraction rule
      already bounds; users who report impact ratios can set it.

    Both are ``not judged`` when a rule they depend on is not met (``unmet``), and ``not computed`` when the
    path gives no per-group counts while the rule is in force (fail closed).

    Returns
    -------
    list of dict
        :func:`rule_row` rows.
    """
    settings = policy.decision
    limit = settings.group_flagged_limit(policy.faux.max_flagged_fraction)
    ratio = settings.max_group_flagged_ratio
    rows = []
    if ev.group_flagged is None:
        if limit < 1 or ratio is not None:
            rows.append(rule_row("max_group_flagged_fraction", "not computed", "flagged individuals per protected "
                                 "group were not counted on this path, so the per-group limit cannot be judged",
                                 None, limit))
        return rows
    groups = group_intervals(ev, policy)
    judged = [g for g in groups if g["judged"]]
    small = [g for g in groups if not g["judged"]]
    small_text = ("; not judged (under min_group_rows " f"{settings.min_group_rows}): "
                  + ", ".join(f"'{g['group']}' {g['flagged']}/{fmt_count(g['n'])}" for g in small)) if small else ""
    worst = max(judged, key=lambda g: g["fraction"], default=None)
    observed = worst["fraction"] if worst else float("nan")
    conf = f"{judged[0]['confidence']:.2%} Clopper-Pearson per group" if judged else ""

    def show(g):
        return f"'{g['group']}' {g['fraction']:.2%} ({g['flagged']}/{fmt_count(g['n'])}, CI {g['lower']:.2%}–{g['upper']:.2%})"
    if unmet:
        rows.append(_group_rule_unmet(ev, policy, unmet, limit, observed, show))
    elif not judged:
        rows.append(rule_row("max_group_flagged_fraction", "not computed", "no protected group has min_group_rows "
                             f"{settings.min_group_rows} audited rows{small_text}", observed, limit))
    else:
        over = [g for g in judged if g["lower"] > limit]
        high = [g for g in judged if g["fraction"] > limit and g["lower"] <= limit]
        if over:
            rows.append(rule_row("max_group_flagged_fraction", "exceeded", "flagged fraction of group(s) "
                                 f"{'; '.join(show(g) for g in over)} > max_group_flagged_fraction {limit:.2%}: even the "
                                 f"lower bound exceeds it ({conf}){small_text}", observed, limit))
        else:
            note = (f"; above the limit but not clearly (lower bound within it, so not failed): "
                    f"{'; '.join(show(g) for g in high)}" if high else "")
            rows.append(rule_row("max_group_flagged_fraction", "ok", f"no protected group's flagged fraction is "
                                 f"clearly above max_group_flagged_fraction {limit:.2%} (highest {show(worst)}; {conf})"
                                 f"{note}{small_text}", observed, limit))
    if ratio is not None:
        if unmet or len(judged) < 2:
            why = (f"{', '.join(r['rule'] for r in unmet)} not met" if unmet
                   else "fewer than two groups have min_group_rows audited rows")
            rows.append(rule_row("max_group_flagged_ratio", "not judged" if unmet else "not computed",
                                 f"ratio of flagged fractions between groups not judged: {why}", None, ratio))
        else:
            top = max(judged, key=lambda g: g["lower"])
            bottom = min(judged, key=lambda g: g["upper"])
            low_ratio = top["lower"] / bottom["upper"] if bottom["upper"] > 0 else float("inf")
            point = (top["fraction"] / bottom["fraction"]) if bottom["fraction"] > 0 else float("inf")
            status = "exceeded" if low_ratio > ratio else "ok"
            rel = ">" if status == "exceeded" else "<="
            rows.append(rule_row("max_group_flagged_ratio", status, f"flagged fraction of {show(top)} over {show(bottom)}:"
                                 f" {point:.2f}×, at least {low_ratio:.2f}× on the intervals {rel} "
                                 f"max_group_flagged_ratio {ratio:g}", low_ratio, ratio))
    return rows


def _group_rule_unmet(ev: CheckEvidence, policy, unmet: Sequence[Mapping], limit: float, observed, show) -> dict:
    """The per-group rule under unmet rules: ``exceeded`` when only guards are unmet and some group's lower bound
    (every group with a row judged, Bonferroni over them) is above the limit; else ``not judged``."""
    names = ", ".join(r["rule"] for r in unmet)
    if all(r["rule"] in GUARD_RULES for r in unmet):
        every = group_intervals(ev, policy, every=True)
        over = [g for g in every if g["judged"] and g["lower"] > limit]
        if over:
            conf = f"{over[0]['confidence']:.2%} Clopper-Pearson per group, Bonferroni over {len(every)} groups"
            return rule_row("max_group_flagged_fraction", "exceeded", "flagged fraction of group(s) "
                            f"{'; '.join(show(g) for g in over)} > max_group_flagged_fraction {limit:.2%}: even the "
                            f"lower bound exceeds it ({conf}), though {names} not met: a weak auxiliary model or a "
                            "small group biases the count downwards, so these guards keep a model from passing, not "
                            "from failing", max(g["fraction"] for g in over), limit)
    return rule_row("max_group_flagged_fraction", "not judged", f"flagged fraction per group not judged: {names} not "
                    "met (the rows a decision needs are in those rules)", observed, limit)


def _group_short(ev: CheckEvidence, group: str, have: int, total: int, minimum: int, held: bool) -> str:
    """One group under the minimum, with the audited rows a decision would need at the audit's shares."""
    where = "of the auxiliary model's held-out rows" if held else "rows"
    text = f"insufficient evidence: group '{group}' has {fmt_count(have)} of {fmt_count(total)} {where} (minimum {minimum})"
    audited = ev.group_rows.get(group, 0)
    if not audited or not ev.n or (held and not have):
        return text + f"; a decision needs at least {minimum} audited rows of '{group}'"
    group_needed = math.ceil(minimum * audited / have) if held else minimum   # held-out rows grow with the group
    total_needed = math.ceil(group_needed * ev.n / audited)
    return (text + f"; a decision needs about {fmt_count(group_needed)} audited rows of '{group}' (about "
            f"{fmt_count(total_needed)} audited rows at its share of {audited / ev.n:.1%})")


def _group_rule(ev: CheckEvidence, minimum: int) -> dict:
    short = []
    for group, n in ev.group_rows.items():
        if n < minimum:
            short.append(_group_short(ev, group, n, ev.n, minimum, held=False))
    held_total = sum(ev.holdout_rows.values())
    for group in ev.group_rows:
        n = ev.holdout_rows.get(group, 0)
        if n < minimum:
            short.append(_group_short(ev, group, n, held_total, minimum, held=True))
    smallest = min(min(ev.group_rows.values(), default=0), min(ev.holdout_rows.values(), default=0))
    if short:
        return rule_row("min_group_rows", "not met", "; ".join(short), smallest, minimum)
    return rule_row("min_group_rows", "ok", f"every protected group has at least {minimum} audited rows and {minimum} "
                    f"of the auxiliary model's held-out rows (smallest: {fmt_count(smallest)})", smallest, minimum)


def _aux_needed(ev: CheckEvidence, weak: Sequence[Mapping], floor: float, confidence: float) -> str:
    """The audited rows at which each weak AUC's lower bound would reach the floor at the observed AUC
    (:func:`~faux_checks.gate.bounds.auc_rows_needed`, held-out rows scaled to audited rows by their share)."""
    held = sum(ev.holdout_rows.values())
    scale = ev.n / held if held else 1.0
    parts = []
    for r in weak:
        if r.get("metric") == "r2" or r.get("n_negative") is None:
            parts.append("R²'s bootstrap interval narrows with more rows; no estimate of how many")
            continue
        q = r.get("quality")
        need = auc_rows_needed(q if q is not None else float("nan"), int(r.get("n_positive") or 0),
                               int(r.get("n_negative") or 0), floor, confidence)
        if need is None:
            parts.append(f"{r.get('what')}: no number of rows, the AUC itself is not above {floor:g}")
        else:
            parts.append(f"{r.get('what')}: about {fmt_count(math.ceil(sum(need) * scale))} audited rows at this AUC "
                         f"(Hanley-McNeil, both classes in their observed proportion)")
    return "; a decision needs " + "; ".join(parts) if parts else ""


def _aux_rule(ev: CheckEvidence, floor: float, confidence: float = 0.95) -> dict:
    lows = [r.get("lower") for r in ev.aux_intervals]
    weak = below_floor(ev.aux_intervals, floor)
    observed = min((lo for lo in lows if lo is not None and math.isfinite(lo)), default=float("nan"))

    headline = str(ev.aux_metric).split(" ")[0]     # 'roc_auc (held-out rows ...)': named once, not per row

    def text(r):
        q, lo, hi = r.get("quality"), r.get("lower"), r.get("upper")
        name = "" if r.get("metric") == headline else f"{r.get('metric')} "
        if q is None or not math.isfinite(q):
            return f"{name}n/a ({r.get('what')})"
        ci = "CI n/a" if lo is None or not math.isfinite(lo) else f"CI {lo:.3f}–{hi:.3f}"
        return f"{name}{q:.3f} ({ci}; {r.get('what')})"
    if ev.nothing_free and _block_free(ev.held_block):
        shown = "; ".join(text(r) for r in ev.aux_intervals) or "quality not measured"
        return rule_row("min_aux_quality", "ok", f"not applied: nothing is free to move (every column is declared "
                        f"admissible or held, and the held block is jointly free of the protected attribute: "
                        f"{_block_text(ev.held_block)}), so every score is 0 by definition and the floor, which "
                        f"concerns what the move uses, has nothing to judge; auxiliary model {ev.aux_metric} {shown} "
                        f"(min_aux_quality {floor:g})", observed, floor)
    if not ev.aux_intervals or weak:
        shown = "; ".join(text(r) for r in (weak or ev.aux_intervals)) or "quality not measured"
        return rule_row("min_aux_quality", "not met",
                        f"auxiliary model too weak: {ev.aux_metric} {shown}: the interval's lower bound is below "
                        f"min_aux_quality {floor:g}; fAux cannot estimate how the features depend on the protected "
                        f"attribute{_aux_needed(ev, weak, floor, confidence)}", observed, floor)
    held = (": the data show the protected attribute, and nothing outside the held columns carries it"
            if ev.nothing_free else "")
    return rule_row("min_aux_quality", "ok", f"auxiliary model {ev.aux_metric} "
                    f"{'; '.join(text(r) for r in ev.aux_intervals)}: lower bound >= min_aux_quality {floor:g}{held}",
                    observed, floor)


def held_block_rule(ev: CheckEvidence, confidence: float = 0.95) -> list[dict]:
    """Self-consistency: the columns the counterfactual holds by the tool's own tests must not carry c jointly.

    - ``held_jointly_free``: ``ok`` when the block of columns held because they are uninformative about c or
      independent of it, tested together (the declared admissible columns are not in it)
      (:func:`faux_checks.method.joint_hold.jointly_free_hold`), tells a cross-fitted classifier nothing about c; ``not met`` when it carries
      c (the counterfactual would hold what the protected attribute moves, and a score of 0 there is not evidence
      of fairness) or when it could not be tested (too few rows): the check can then never end ``passed``.

    No row when the path gives no joint test (``ev.held_block`` None: another reading than swap, a reference fitted
    before). The declared columns are held by the policy's choice and are not tested.

    Parameters
    ----------
    ev : CheckEvidence
    confidence : float
        Of the ROC-AUC interval shown (Hanley–McNeil, :func:`~faux_checks.gate.bounds.auc_interval`).

    Returns
    -------
    list of dict
        Zero or one :func:`rule_row` row.
    """
    from ..method.joint_hold import JOINT_Z

    block = ev.held_block
    if block is None:
        return []
    z = block.get("z")
    observed = float(z) if z is not None else float("nan")
    if not block.get("tested", False):
        return [rule_row("held_jointly_free", "not met", "the columns the counterfactual holds beyond the declared ones "
                         f"({_names(block)}) could not be tested together for the protected attribute: "
                         f"{block.get('reason', 'no test')}; whether they carry it jointly is unknown", observed, JOINT_Z)]
    if not block.get("free", False):
        return [rule_row("held_jointly_free", "not met", "the report's own numbers say the auxiliary model reads the "
                         "protected attribute from what the counterfactual holds: the columns held beyond the declared "
                         f"ones carry it jointly ({_block_text(block, confidence)}), so a score of 0 on them is not "
                         "evidence of fairness", observed, JOINT_Z)]
    return [rule_row("held_jointly_free", "ok", "the columns held beyond the declared ones are jointly free of the "
                     f"protected attribute ({_block_text(block, confidence)})", observed, JOINT_Z)]


def _block_free(block: Mapping[str, Any] | None) -> bool:
    return block is not None and bool(block.get("tested")) and bool(block.get("free"))


def _names(block: Mapping[str, Any]) -> str:
    return ", ".join(map(str, block.get("columns") or ())) or "none"


def _block_text(block: Mapping[str, Any] | None, confidence: float = 0.95) -> str:
    """The held block's figures: its columns, the cross-fitted quality (and AUC interval), the loss gain, releases."""
    from ..method.joint_hold import JOINT_Z

    if block is None:
        return "not tested"
    tail = release_text(block)
    if not block.get("columns"):
        return "no column is held by the tests" + tail
    q, metric = block.get("quality"), block.get("metric", "quality")
    shown = f"{metric} n/a" if q is None or not math.isfinite(q) else f"{metric} {q:.3f}"
    if metric == "roc_auc" and q is not None and math.isfinite(q):
        lo, hi = auc_interval(q, int(block.get("n_positive", 0)), int(block.get("n_negative", 0)), confidence)
        shown += f" (CI {lo:.3f}–{hi:.3f})"
    rel = ">" if block.get("z", 0.0) > JOINT_Z else "<="
    return (f"held columns {_names(block)}: cross-fitted {shown} from them, loss gain {block.get('gain', 0.0):+.4f} "
            f"per row over the prior (z {block.get('z', 0.0):.2f} {rel} {JOINT_Z:g}) on "
            f"{fmt_count(int(block.get('rows', 0)))} rows{tail}")


def _undefined_rule(ev: CheckEvidence, limit: float) -> dict:
    frac = ev.n_undefined / ev.n
    if ev.n_undefined == ev.n:
        return rule_row("max_undefined_fraction", "not met", f"{fmt_count(ev.n_undefined)} of {fmt_count(ev.n)} LIC "
                        "scores are undefined: no individual has a defined LIC score, so there is nothing to decide on",
                        frac, limit)
    if frac > limit:
        return rule_row("max_undefined_fraction", "not met", f"{fmt_count(ev.n_undefined)} of {fmt_count(ev.n)} LIC "
                        f"scores are undefined ({frac:.2%} > max_undefined_fraction {limit:.2%})", frac, limit)
    return rule_row("max_undefined_fraction", "ok", f"{fmt_count(ev.n_undefined)} of {fmt_count(ev.n)} LIC scores "
                    f"undefined ({frac:.2%} <= max_undefined_fraction {limit:.2%})", frac, limit)


def _flagged_rule(ev: CheckEvidence, policy, unmet: list[dict]) -> dict:
    faux, settings, iv = policy.faux, policy.decision, ev.interval
    limit = faux.max_flagged_fraction
    counted = (f"LIC score > δ = {faux.delta:g}: {fmt_count(ev.n_flagged)}"
               + (f", undefined (counted as flagged): {fmt_count(ev.n_undefined)}" if ev.n_undefined else "")
               + f"; of {fmt_count(ev.n)} individuals")
    if iv.seeds:
        counted += f"; {_seed_text(iv.seeds)}"
    head = f"flagged fraction {iv.text()}"
    if unmet:
        names = ", ".join(r["rule"] for r in unmet)
        guards = all(r["rule"] in GUARD_RULES for r in unmet)
        if guards and iv.lower > limit:
            return rule_row("max_flagged_fraction", "exceeded", f"{head} > max_flagged_fraction {limit:.2%}: even the "
                            f"lower bound exceeds it, though {names} not met: a weak auxiliary model or a small group "
                            "biases the count downwards, so these guards keep a model from passing, not from failing "
                            f"({counted})", iv.fraction, limit)
        why = ("; within the limit, but a model is not passed under unmet guards" if guards and iv.upper <= limit
               else "")
        return rule_row("max_flagged_fraction", "not judged", f"{head} not judged: {names} not met{why} (the rows a "
                        f"decision needs are in those rules; {counted})", iv.fraction, limit)
    if iv.upper <= limit:
        return rule_row("max_flagged_fraction", "ok", f"{head} <= max_flagged_fraction {limit:.2%}: the upper bound is "
                        f"within the limit ({counted})", iv.fraction, limit)
    needed = rows_needed(iv, limit)
    zero_limit = (f"max_flagged_fraction is 0 and no individual is flagged: the fraction equals the limit and the "
                  f"interval's upper bound ({iv.upper:.2%} at {fmt_count(ev.n)} rows) is above 0 at any number of rows, "
                  "so a limit of 0 can fail a model but never pass one; set a positive limit (e.g. 0.01)"
                  if limit == 0 and iv.fraction == 0 else None)
    if settings.rule == "upper_bound" or iv.lower > limit:
        why = ("even the lower bound exceeds it" if iv.lower > limit else zero_limit or
               "its upper bound exceeds it (rule upper_bound)" + (f"; about {fmt_count(needed)} audit rows would "
                                                                  "settle it at this fraction" if needed else ""))
        return rule_row("max_flagged_fraction", "exceeded", f"{head} > max_flagged_fraction {limit:.2%}: {why} "
                        f"({counted})", iv.fraction, limit)
    if zero_limit:
        return rule_row("max_flagged_fraction", "inconclusive", f"{head}: {zero_limit} ({counted})", iv.fraction, limit)
    if needed is None:
        # rows_needed gives up when the fraction, or its range across the aux seeds, touches the limit
        cause = ("the fraction equals the limit; no number of rows decides it" if iv.fraction == limit else
                 "the auxiliary model's seeds disagree on which side of the limit it lies; more audit rows do not "
                 "narrow that part")
    else:
        cause = f"more audit rows needed (about {fmt_count(needed)} for an interval this side of the limit)"
    return rule_row("max_flagged_fraction", "inconclusive", f"{head} straddles max_flagged_fraction {limit:.2%}: "
                    f"{cause} ({counted})", iv.fraction, limit)


def _seed_text(seeds: Mapping) -> str:
    f = seeds["fractions"]
    return (f"across {len(f)} auxiliary-model seeds the flagged fraction on {fmt_count(seeds['rows'])} rows "
            f"ranged {min(f):.2%}–{max(f):.2%} (spread {seeds['spread']:.2%})")


def _tester_rules(ev: CheckEvidence) -> list[dict]:
    rows = []
    for name, t in ev.testers.items():
        if not t.get("gating"):
            continue
        summary = str(t.get("summary", ""))
        if t.get("value") is None and summary.startswith("not applicable"):
            # a tester the policy makes gating cannot judge this model: the gate cannot decide with it (fail closed)
            rows.append(rule_row(f"tester:{name}", "not computed", f"gating baseline tester {name} is {summary}; "
                                 f"the policy makes it gating, so the gate cannot decide: set "
                                 f"[testers.{name}] gating = false for this model", None, t.get("limit")))
        elif t.get("passed"):
            rows.append(rule_row(f"tester:{name}", "ok", f"{name}: {t.get('summary', '')}", t.get("value"),
                                 t.get("limit")))
        elif t.get("value") is None:
            rows.append(rule_row(f"tester:{name}", "not computed", f"gating baseline tester {name} not computed: "
                                 f"{t.get('summary', '')}", None, t.get("limit")))
        else:
            rows.append(rule_row(f"tester:{name}", "exceeded", f"gating baseline tester exceeded its limit: {name}: "
                                 f"{t.get('summary', '')}", t.get("value"), t.get("limit")))
    for name in ev.testers_not_run:
        rows.append(rule_row(f"tester:{name}", "not computed", f"gating baseline tester {name} is not run by the "
                             "streaming scorer; run `faux-checks check` on a sample for it, or make it non-gating"))
    return rows
