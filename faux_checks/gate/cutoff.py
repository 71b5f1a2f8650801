"""A value target read against a business cut-off: who would cross it if only the protected attribute changed.

A score or a regression output used with a cut-off (a credit score approved at 650 or more, a limit granted above
a floor) turns into a decision at the cut-off. Beside the δ reading (|Δŷ| > δ in the output's unit), a policy with
``[faux] cutoff`` and ``cutoff_side`` reads each person as **crossing the cut-off** when their counterfactual output
(the swap reading's ŷ with only the protected attribute changed) lies on the other side of the cut-off than their
actual output. δ plays no part in this reading: a change of any size that crosses the cut-off changes the decision,
and a change far from it changes none. Both readings are reported and each gates at ``max_flagged_fraction``: δ
measures the size of the change anywhere on the scale (a limit, a price), the crossing reading whether the decision
at the cut-off changes.

Sides: ``above`` means an output at or above the cut-off is favourable, ``below`` an output under it; a person on
the favourable side who would cross crosses away from it (as they are, the model favours them), one on the other
side crosses towards it (as they are, the model disfavours them). An undefined score counts as crossing for the
decision (the worst case), as in the δ reading. With level configurations (``swap_categorical = "coupled"``) the
counterfactual output is the expected one over the configurations.

Individual fairness as in Definition 1 of arXiv 2210.06288, with the distance on outputs replaced by the decision
at the cut-off (Dwork et al. 2012's Lipschitz condition on the induced classifier).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import fmt_count
from ..method.result import LICResult
from .bounds import FlaggedInterval, flagged_interval, rows_needed
from .decision import rule_row

__all__ = ["CUTOFF_RULE", "CutoffReading", "crosses_cutoff", "cutoff_reading", "cutoff_rule", "on_favourable_side"]

#: The rule row of the crossing reading.
CUTOFF_RULE = "cutoff_crossing"


def on_favourable_side(values: np.ndarray, cutoff: float, side: str) -> np.ndarray:
    """Bool (n,): whether each output lies on the favourable side of the cut-off.

    ``side = "above"``: ``values >= cutoff``; ``"below"``: ``values < cutoff``. NaN is on neither side (False).

    Raises
    ------
    ValueError
        ``side`` is neither ``"above"`` nor ``"below"``.
    """
    v = np.asarray(values, dtype=np.float64)
    if side == "above":
        return v >= cutoff
    if side == "below":
        return v < cutoff
    raise ValueError(f"cutoff_side must be 'above' or 'below', got {side!r}")


def crosses_cutoff(actual: np.ndarray, counterfactual: np.ndarray, cutoff: float) -> np.ndarray:
    """Bool (n,): the counterfactual output lies on the other side of ``cutoff`` than the actual one.

    The sides are ``>= cutoff`` and ``< cutoff`` (the same partition for either favourable side). A NaN in either
    array is never a crossing here; the caller counts such rows apart (undefined scores).

    Parameters
    ----------
    actual, counterfactual : ndarray of shape (n,)
        The target's output and its output with only the protected attribute changed, in the output's unit.
    cutoff : float
        The cut-off, in the same unit.

    Examples
    --------
    >>> crosses_cutoff(np.array([640.0, 660.0, 700.0]), np.array([655.0, 650.0, 800.0]), 650.0).tolist()
    [True, False, False]
    """
    a, c = np.asarray(actual, dtype=np.float64), np.asarray(counterfactual, dtype=np.float64)
    defined = np.isfinite(a) & np.isfinite(c)
    return defined & ((a >= cutoff) != (c >= cutoff))


@dataclass(frozen=True)
class CutoffReading:
    """The crossing reading of one check.

    Attributes
    ----------
    cutoff : float
        The cut-off, in ``unit``.
    side : str
        ``"above"`` or ``"below"``: the favourable side.
    unit : str
    crossed : ndarray of shape (n,), bool
        Defined rows whose counterfactual output crosses the cut-off.
    undefined : ndarray of shape (n,), bool
        Rows without a defined counterfactual output (counted as crossing in :attr:`interval`).
    interval : FlaggedInterval
        The share crossing (undefined included) over every audited individual, Clopper–Pearson.
    by_group : list of dict
        Per group: ``group``, ``n``, ``crossed`` (undefined included), ``to_favourable``, ``to_unfavourable`` and
        their fractions of ``n``; ``favourable_rate``, the share whose actual output is on the favourable side (the
        selection rate at the cut-off), and ``impact_ratio``, that rate over the highest group's (descriptive: the
        gate decides on individuals).
    """

    cutoff: float
    side: str
    unit: str
    crossed: np.ndarray
    undefined: np.ndarray
    interval: FlaggedInterval
    by_group: list[dict]

    def where(self) -> str:
        """``the cut-off 650 EUR``."""
        return f"the cut-off {self.cutoff:g} {self.unit}"

    def favourable_text(self) -> str:
        """The favourable side in words: ``650 EUR or more`` / ``below 650 EUR``."""
        value = f"{self.cutoff:g} {self.unit}"
        return f"{value} or more" if self.side == "above" else f"below {value}"

    def sentences(self, protected: str) -> list[str]:
        """One sentence per group with audited rows: the share whose output would cross the cut-off if only
        ``protected`` changed, towards and away from the favourable side."""
        out = []
        for g in self.by_group:
            if not g["n"]:
                continue
            towards, away = round(g["to_favourable"]), round(g["to_unfavourable"])
            out.append(f"For {g['crossed_fraction']:.0%} of group '{g['group']}' ({fmt_count(round(g['crossed']))} of "
                       f"{fmt_count(g['n'])}) the model output crosses {self.where()} if only '{protected}' changed: "
                       f"{fmt_count(towards)} to the favourable side ({self.favourable_text()}; as they are, the model "
                       f"places them on the unfavourable side) and {fmt_count(away)} away from it (as they are, the "
                       "model places them on the favourable side).")
        return out

    def to_dict(self, protected: str) -> dict:
        """JSON-ready: ``cutoff``, ``side``, ``favourable``, ``unit``, ``reading``, ``summary`` (one sentence),
        ``n``, ``n_crossed`` (defined), ``n_undefined``, ``interval``, ``by_group``, ``sentences``."""
        summary = (f"Share of people whose model output crosses {self.where()} if only '{protected}' changed "
                   f"(favourable side: {self.favourable_text()}; an undefined score counted as crossing): "
                   f"{self.interval.text()}. δ plays no part in this reading: a change of any size that crosses the "
                   "cut-off counts, one that does not, however large, does not.")
        return {"cutoff": self.cutoff, "side": self.side, "favourable": self.favourable_text(), "unit": self.unit,
                "reading": f"crosses {self.where()}", "summary": summary, "n": int(len(self.crossed)),
                "n_crossed": int(self.crossed.sum()),
                "n_undefined": int(self.undefined.sum()), "interval": self.interval.to_dict(),
                "by_group": self.by_group, "sentences": self.sentences(protected)}


def cutoff_reading(lic: LICResult, group_labels: np.ndarray, names: list, policy) -> CutoffReading | None:
    """The crossing reading of a check under ``policy``; None when the policy sets no ``[faux] cutoff``.

    Parameters
    ----------
    lic : LICResult
        The swap reading's output: ``probability`` (the target's output, in the unit) and
        ``counterfactual_probability`` (n,). A policy with a cut-off is validated to variant ``swap``; a result
        without counterfactual outputs leaves every row undefined (counted as crossing: fail closed).
    group_labels : ndarray of shape (n,)
    names : list
        The groups, in report order.
    policy : Policy
    """
    faux = policy.faux
    if faux.cutoff is None:
        return None
    actual = np.asarray(lic.probability, dtype=np.float64)
    counter = (np.full_like(actual, np.nan) if lic.counterfactual_probability is None
               else np.asarray(lic.counterfactual_probability, dtype=np.float64))
    undefined = np.asarray(lic.undefined, dtype=bool) | ~np.isfinite(actual) | ~np.isfinite(counter)
    crossed = crosses_cutoff(actual, counter, faux.cutoff) & ~undefined
    worst = crossed | undefined
    now = on_favourable_side(actual, faux.cutoff, faux.cutoff_side)
    labels = np.asarray(group_labels, dtype=object)
    by_group: list[dict[str, Any]] = []
    rates: dict[str, float] = {}                # the share on the favourable side as they are, per group with rows
    for g in names:
        rows = labels == g
        n = int(rows.sum())
        k, towards, away = int(worst[rows].sum()), int((crossed & rows & ~now).sum()), int((crossed & rows & now).sum())
        by_group.append({"group": str(g), "n": n, "crossed": k, "to_favourable": towards, "to_unfavourable": away,
                         "crossed_fraction": k / n if n else None, "to_favourable_fraction": towards / n if n else None,
                         "to_unfavourable_fraction": away / n if n else None,
                         "favourable_rate": float(now[rows].mean()) if n else None})
        if n:
            rates[str(g)] = float(now[rows].mean())
    top = max(rates.values(), default=0.0)
    for entry in by_group:               # the selection rate at the cut-off over the highest group's (descriptive)
        rate = rates.get(entry["group"])
        entry["impact_ratio"] = rate / top if rate is not None and top > 0 else None
    interval = flagged_interval(int(worst.sum()), len(actual), policy.decision.confidence)
    return CutoffReading(float(faux.cutoff), str(faux.cutoff_side), str(faux.unit), crossed, undefined, interval,
                         by_group)


def cutoff_rule(reading: CutoffReading | None, policy, unmet: list[dict], guards_only: bool) -> list[dict]:
    """The crossing reading's rule row (:data:`CUTOFF_RULE`) against ``max_flagged_fraction``; none without a cut-off.

    ``ok`` when the interval's upper bound is within the limit, ``exceeded`` when the lower bound is over it (also
    under unmet guards only, ``guards_only``: they keep a model from passing, not from failing) or, with
    ``decision.rule = "upper_bound"``, when the upper bound is; ``inconclusive`` in between; ``not judged`` under
    other unmet rules; ``not computed`` when the policy sets a cut-off but the path computed no reading (fail
    closed).
    """
    if policy.faux.cutoff is None:
        return []
    limit = policy.faux.max_flagged_fraction
    if reading is None:
        return [rule_row(CUTOFF_RULE, "not computed", f"the share crossing the cut-off {policy.faux.cutoff:g} "
                         f"{policy.faux.unit} is not computed on this path (the in-memory check reads it); a "
                         "policy with a cut-off is not passed without it", None, limit)]
    iv = reading.interval
    n_undefined = int(reading.undefined.sum())
    counted = (f"the model output crosses {reading.where()} if only the protected attribute changed: "
               f"{fmt_count(int(reading.crossed.sum()))}" + (f", undefined (counted as crossing): "
                                                            f"{fmt_count(n_undefined)}" if n_undefined else "")
               + f"; of {fmt_count(iv.n)} individuals; favourable side {reading.favourable_text()}")
    head = f"share that crosses {reading.where()}: {iv.text()}"
    over = f"{head} > max_flagged_fraction {limit:.2%}"
    if unmet and not (guards_only and iv.lower > limit):
        names = ", ".join(r["rule"] for r in unmet)
        return [rule_row(CUTOFF_RULE, "not judged", f"{head} not judged: {names} not met ({counted})", iv.fraction,
                         limit)]
    if iv.lower > limit:
        return [rule_row(CUTOFF_RULE, "exceeded", f"{over}: even the lower bound exceeds it ({counted})",
                         iv.fraction, limit)]
    if iv.upper <= limit:
        return [rule_row(CUTOFF_RULE, "ok", f"{head} <= max_flagged_fraction {limit:.2%}: the upper bound is within "
                         f"the limit ({counted})", iv.fraction, limit)]
    if policy.decision.rule == "upper_bound":
        return [rule_row(CUTOFF_RULE, "exceeded", f"{over}: its upper bound exceeds it (rule upper_bound) ({counted})",
                         iv.fraction, limit)]
    needed = rows_needed(iv, limit)
    more = (f"about {fmt_count(needed)} audit rows would settle it" if needed else
            "the share equals the limit; no number of rows decides it")
    return [rule_row(CUTOFF_RULE, "inconclusive", f"{head} straddles max_flagged_fraction {limit:.2%}: {more} "
                     f"({counted})", iv.fraction, limit)]
