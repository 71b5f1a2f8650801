"""Who a new version harms: the per-individual comparison of two versions' flags on the same audit rows.

An aggregate flagged fraction hides churn: a version can keep 5% flagged while harming a different 5%.
:func:`compare_flags` pairs the two versions' flags row by row and reports newly flagged, resolved and
still flagged individuals (counts, shares, per group), with

- the change of the flagged fraction and its exact paired interval (McNemar-type: conditional on the
  b + c discordant rows, b ~ Binomial(b + c, π); the Clopper–Pearson interval of π maps to the difference
  (b − c) / n = (b + c)(2π − 1) / n; Breslow & Day, "Statistical methods in cancer research", 1980, §7.2 for
  the conditional interval);
- the share newly flagged and its Clopper–Pearson interval, read by the "no new harm" rule
  (``[decision] max_newly_flagged_fraction``): exceeded when its lower bound is above the limit,
  inconclusive when the interval straddles it.

Flags may be probabilities (the swap reading's coupled levels): the counts are then expected counts,
rounded for the intervals (as the decision does). Pure functions; our construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import InputError
from .bounds import clopper_pearson

__all__ = ["FlagChange", "compare_flags", "compare_score_records", "flags_of_scores", "newly_flagged_rule", "version_comparison"]


@dataclass(frozen=True)
class FlagChange:
    """The paired comparison of two versions' flags (:func:`compare_flags`).

    Attributes
    ----------
    n : int
        Rows both versions scored.
    newly, resolved, still : float
        Expected counts: flagged by the candidate only, by the baseline only, by both.
    change : float
        Flagged fraction of the candidate minus the baseline's.
    change_interval : (float, float)
        Its exact paired interval at ``confidence``.
    newly_fraction : float
        ``newly / n``; ``newly_interval`` its Clopper–Pearson interval.
    by_group : DataFrame
        Per group: ``n``, ``newly``, ``resolved``, ``still``, ``newly_fraction``, ``change``.
    """

    n: int
    newly: float
    resolved: float
    still: float
    change: float
    change_interval: tuple[float, float]
    newly_fraction: float
    newly_interval: tuple[float, float]
    confidence: float
    by_group: pd.DataFrame = field(repr=False)

    def to_dict(self) -> dict:
        return {"n": self.n, "newly_flagged": self.newly, "resolved": self.resolved, "still_flagged": self.still,
                "change": self.change, "change_interval": list(self.change_interval),
                "newly_flagged_fraction": self.newly_fraction, "newly_flagged_interval": list(self.newly_interval),
                "confidence": self.confidence, "by_group": self.by_group.reset_index().to_dict(orient="records")}


def _as_flags(values, name: str) -> np.ndarray:
    f = np.asarray(values, dtype=np.float64)
    f = np.where((f > 1) & (f <= 1 + 1e-9), 1.0, np.where((f < 0) & (f >= -1e-9), 0.0, f))   # summation round-off
    bad = ~np.isfinite(f) | (f < 0) | (f > 1)
    if bad.any():
        raise InputError(f"{name} holds {fmt_count(int(bad.sum()))} values outside [0, 1] or missing; give each row's "
                         "flag (0/1) or flag probability, an undefined score as 1")
    return f


def compare_flags(baseline, candidate, *, groups=None, confidence: float = 0.95) -> FlagChange:
    """Newly flagged, resolved and still flagged rows between two versions scored on the same rows.

    Parameters
    ----------
    baseline, candidate : array of shape (n,)
        Each row's flag (0/1) or flag probability under the deployed version and the candidate, in the same
        row order (an undefined score counted as 1, as the decision counts it).
    groups : array of shape (n,), optional
        Protected group per row, for ``by_group``.
    confidence : float

    Returns
    -------
    FlagChange

    Raises
    ------
    InputError
        Arrays of different lengths, no rows, or values outside [0, 1].

    Notes
    -----
    With probabilities p₀ (baseline) and p₁ (candidate) and independent level draws per version, a row is newly
    flagged with probability p₁(1 − p₀), resolved p₀(1 − p₁), still flagged p₀p₁.
    """
    p0, p1 = _as_flags(baseline, "the baseline's flags"), _as_flags(candidate, "the candidate's flags")
    if len(p0) != len(p1) or len(p0) == 0:
        raise InputError(f"the two versions' flags must cover the same rows: {fmt_count(len(p0))} and "
                         f"{fmt_count(len(p1))} rows")
    n = len(p0)
    newly_rows, resolved_rows, still_rows = p1 * (1 - p0), p0 * (1 - p1), p0 * p1
    newly, resolved, still = float(newly_rows.sum()), float(resolved_rows.sum()), float(still_rows.sum())
    b, c = int(round(newly)), int(round(resolved))
    if b + c == 0:
        change_ci = (0.0, 0.0)
    else:
        lo, hi = clopper_pearson(b, b + c, confidence)
        change_ci = ((b + c) * (2 * lo - 1) / n, (b + c) * (2 * hi - 1) / n)
    g = np.asarray(groups, dtype=object) if groups is not None else np.full(n, "all", dtype=object)
    frame = pd.DataFrame({"group": g, "newly": newly_rows, "resolved": resolved_rows, "still": still_rows})
    by_group = frame.groupby("group", observed=True).agg(n=("newly", "size"), newly=("newly", "sum"),
                                                         resolved=("resolved", "sum"), still=("still", "sum"))
    by_group["newly_fraction"] = by_group["newly"] / by_group["n"]
    by_group["change"] = (by_group["newly"] - by_group["resolved"]) / by_group["n"]
    return FlagChange(n=n, newly=newly, resolved=resolved, still=still, change=(newly - resolved) / n,
                      change_interval=change_ci, newly_fraction=newly / n,
                      newly_interval=clopper_pearson(b, n, confidence), confidence=confidence, by_group=by_group)


def newly_flagged_rule(change: FlagChange, limit: float) -> dict:
    """The "no new harm" rule on the share newly flagged: ok / exceeded / inconclusive, as a decision rule row."""
    from .decision import rule_row

    lo, hi = change.newly_interval
    text = (f"newly flagged {change.newly_fraction:.2%} (CI {lo:.2%}–{hi:.2%}; {change.newly:,.0f} of "
            f"{fmt_count(change.n)} rows; resolved {change.resolved:,.0f}, still flagged {change.still:,.0f})")
    if hi <= limit:
        return rule_row("max_newly_flagged_fraction", "ok", f"{text} <= max_newly_flagged_fraction {limit:.2%}",
                        change.newly_fraction, limit)
    if lo > limit:
        return rule_row("max_newly_flagged_fraction", "exceeded", f"{text} > max_newly_flagged_fraction {limit:.2%}: "
                        "the new version harms individuals the deployed one did not", change.newly_fraction, limit)
    return rule_row("max_newly_flagged_fraction", "inconclusive", f"{text} straddles max_newly_flagged_fraction "
                    f"{limit:.2%}", change.newly_fraction, limit)


def flags_of_scores(frame: pd.DataFrame) -> pd.Series:
    """Each audited row's flag from a ``scores.parquet`` record, indexed by its input ``row``.

    ``flag_probability`` when the record has it (the swap reading's coupled levels), else ``flagged``;
    an ``undefined`` score counts as flagged (1.0), as the decision counts it; ``not_audited`` rows are left
    out (they were dropped for a missing protected value, or not sampled).

    Raises
    ------
    InputError
        The frame lacks ``row``/``status`` or both flag columns (not a scores record).
    """
    missing = [c for c in ("row", "status") if c not in frame.columns]
    if missing or not ({"flag_probability", "flagged"} & set(frame.columns)):
        raise InputError(f"not a scores record: columns {missing or ['flagged']} missing (a gate's records/scores.parquet "
                         "has row, status, flagged and, for the swap reading, flag_probability)")
    audited = frame[frame["status"] != "not_audited"]
    column = "flag_probability" if "flag_probability" in audited.columns else "flagged"
    flags = pd.to_numeric(audited[column].astype("Float64"), errors="coerce").astype(np.float64)
    flags = flags.where(audited["status"] != "undefined", 1.0)
    return pd.Series(flags.to_numpy(), index=audited["row"].to_numpy(dtype=np.int64), name="flag")


def compare_score_records(baseline: pd.DataFrame, candidate: pd.DataFrame, *, groups=None,
                          confidence: float = 0.95) -> FlagChange:
    """:func:`compare_flags` of two versions' score records on the rows both audited.

    Parameters
    ----------
    baseline, candidate : DataFrame
        ``scores.parquet`` records of the deployed version and the candidate, written on the same audit data
        (the caller checks the data hash): rows are matched by ``row`` (the input row number).
    groups : array of shape (n_input_rows,), optional
        Protected group of every input row (indexed by ``row``).
    confidence : float

    Raises
    ------
    InputError
        Not scores records, or no row audited by both.
    """
    base, cand = flags_of_scores(baseline), flags_of_scores(candidate)
    rows = base.index.intersection(cand.index).sort_values()
    if len(rows) == 0:
        raise InputError("the two versions' score records share no audited row: they were not written on the same "
                         "audit data")
    g = None if groups is None else np.asarray(groups, dtype=object)[rows.to_numpy()]
    return compare_flags(base.loc[rows].to_numpy(), cand.loc[rows].to_numpy(), groups=g, confidence=confidence)


def version_comparison(candidate: pd.DataFrame, baseline: pd.DataFrame | None, *, baseline_version: str | None,
                       limit: float | None, why_not: str | None = None, groups=None, confidence: float = 0.95,
                       role: str = "deployed") -> dict:
    """The candidate against one earlier version, as the gate records it (report ``regression``, version tags).

    Parameters
    ----------
    candidate : DataFrame
        The candidate's ``scores.parquet`` record.
    baseline : DataFrame or None
        The earlier version's record on the same audit data; None when there is none to compare with.
    baseline_version : str or None
        Its version number (None: no such version).
    limit : float or None
        ``[decision] max_newly_flagged_fraction``; None = reported, not gated (no rule row).
    why_not : str, optional
        Why ``baseline`` is None although ``baseline_version`` is set (e.g. other audit data): with a limit
        the rule is then ``not judged`` (the gate fails closed: undecided), the fix in its detail.
    groups : array (n_input_rows,), optional
        Protected group of each input row.
    role : str
        ``deployed`` (the alias holder: the rule's baseline) or ``previous`` (the history's churn).

    Returns
    -------
    dict
        ``role``, ``compared_with`` (version or None), ``change`` (:meth:`FlagChange.to_dict`, or None),
        ``note`` (why there is no comparison), ``rule`` (a :func:`faux_checks.gate.decision.rule_row`, or None).
    """
    from .decision import rule_row

    out: dict[str, Any] = {"role": role, "compared_with": baseline_version, "change": None, "note": None, "rule": None}
    if baseline_version is None:
        out["note"] = "no deployed version to compare with" if role == "deployed" else "no earlier gated version"
        if limit is not None:
            out["rule"] = rule_row("max_newly_flagged_fraction", "ok", f"no new harm: {out['note']} (nobody is "
                                   "newly harmed relative to a version that does not exist)", 0.0, limit)
        return out
    if baseline is None:
        out["note"] = why_not or f"v{baseline_version}'s scores are not available"
        if limit is not None:
            out["rule"] = rule_row("max_newly_flagged_fraction", "not judged", f"no new harm not judged against "
                                   f"v{baseline_version}: {out['note']}", None, limit)
        return out
    change = compare_score_records(baseline, candidate, groups=groups, confidence=confidence)
    out["change"] = change.to_dict()
    if limit is not None:
        row = newly_flagged_rule(change, limit)
        row["detail"] = f"against v{baseline_version} ({role}): {row['detail']}"
        out["rule"] = row
    return out
