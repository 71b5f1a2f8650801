"""Which outcome is favourable, and in which direction the counterfactual moves people.

The target gives P(label = the value of ``target_class``): ``P(deny = yes)`` on a denial label mapped with
``positive_label = "yes"``. Whether that value is good or bad for the person is not something the data can say:
the policy declares the favourable value (``favourable_label``). :func:`outcome_direction` reads the declaration
against the label column; :func:`moves_by_group` and :func:`direction_sentences` say, per protected group, for
what share of people the estimated probability would rise or fall by more than δ if only the attribute changed,
and whether that is towards the favourable outcome. Undeclared, nothing is called favourable: the sentences name
the key instead, and the group table (:func:`faux_checks.baselines.group_metrics.group_table`) gives no impact
ratios and no most favoured group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import InputError
from ..method.result import LICResult
from .cutoff import CutoffReading
from .policy_schema import Policy

__all__ = ["FAVOURABLE_KEY", "OutcomeDirection", "direction_sentences", "label_values", "moves_by_group",
           "outcome_direction", "outcome_record", "same_value"]

#: The policy key that declares the favourable outcome (named by every message that asks for it).
FAVOURABLE_KEY = "favourable_label"

_BOOLEAN_TEXT = {"true": 1.0, "false": 0.0}


@dataclass(frozen=True)
class OutcomeDirection:
    """The outcome the target's probability is about, and whether it is the favourable one.

    Attributes
    ----------
    label : str or None
        The label column (None when the policy names none).
    target_value : str
        The label value whose probability the target gives (``"yes"``; ``"1"`` for class indices).
    favourable_value : str or None
        The policy's ``favourable_label``; None when not declared.
    target_favourable : bool or None
        Whether ``target_value`` is the favourable outcome; None when not declared (never guessed).
    unit : str or None
        The unit of a target that returns a value (policy ``target_output = "value"``, ``[faux] unit``); None for a
        probability.
    """

    label: str | None
    target_value: str
    favourable_value: str | None
    target_favourable: bool | None
    unit: str | None = None

    @property
    def probability_name(self) -> str:
        """The target's probability named by the label's value: ``P(deny = yes)`` (``P(y = 1)`` without a label);
        for a value target, ``model output`` (``model output (LABEL)`` with a label column)."""
        if self.unit is not None:
            return "model output" if self.label is None else f"model output ({self.label})"
        return f"P({self.label or 'y'} = {self.target_value})"

    def change(self, delta: float) -> str:
        """δ as a change in the output's unit: ``10 points`` (probability) or ``500 EUR`` (a value target)."""
        return f"{delta:g} {self.unit}" if self.unit is not None else f"{delta * 100:g} points"

    def to_dict(self) -> dict:
        """JSON-ready: the four attributes, ``probability`` (:attr:`probability_name`), ``declared``, ``key`` and,
        for a value target, ``unit``."""
        out = {"label": self.label, "target_value": self.target_value, "favourable_value": self.favourable_value,
               "target_favourable": self.target_favourable, "probability": self.probability_name,
               "declared": self.target_favourable is not None, "key": FAVOURABLE_KEY}
        if self.unit is not None:
            out["unit"] = self.unit
        return out


def _number(text: str) -> float | None:
    low = text.strip().lower()
    if low in _BOOLEAN_TEXT:
        return _BOOLEAN_TEXT[low]
    try:
        return float(low)
    except ValueError:
        return None


def same_value(a, b) -> bool:
    """Whether two label values are the same: equal as text (stripped), or equal as numbers (``"1"`` = ``1.0``,
    ``"true"`` = 1)."""
    sa, sb = str(a).strip(), str(b).strip()
    if sa == sb:
        return True
    na, nb = _number(sa), _number(sb)
    return na is not None and nb is not None and na == nb


def label_values(series: pd.Series) -> list[str]:
    """The distinct non-missing values of a label column as text, sorted (integer-valued numbers without ``.0``)."""
    values = series.dropna()
    if pd.api.types.is_bool_dtype(values) or pd.api.types.is_numeric_dtype(values):
        numbers = sorted(set(values.astype(np.float64).tolist()))
        return [str(int(v)) if float(v).is_integer() else repr(v) for v in numbers]
    return sorted(set(values.astype(str).str.strip().tolist()))


def _target_value(policy: Policy, values: list[str] | None) -> str:
    """The label value whose probability the target gives (``target_class`` read through ``positive_label``)."""
    if policy.positive_label is None:
        return str(policy.target_class)
    if policy.target_class == 1:
        return str(policy.positive_label)
    others = [v for v in values or [] if not same_value(v, policy.positive_label)]
    return others[0] if len(others) == 1 else f"not {policy.positive_label}"


def outcome_direction(policy: Policy, frame: pd.DataFrame | None = None) -> OutcomeDirection:
    """The direction of the outcome under ``policy``, checked against the label column of ``frame`` when present.

    With ``positive_label`` the favourable value is compared with it (labels become 1 where equal); without it
    the label holds class indices and ``favourable_label`` must be one (``"0"``, ``"1"``). The target's class is
    favourable when the favourable value is that class.

    Raises
    ------
    InputError
        ``favourable_label`` is not a value of the label column (both named, with the values present), or,
        without ``positive_label``, not a class index.
    """
    label = policy.label
    values = label_values(frame[label]) if frame is not None and label and label in frame.columns else None
    target = _target_value(policy, values)
    favourable = policy.favourable_label
    unit = policy.faux.unit if policy.target_output == "value" else None
    if favourable is None:
        return OutcomeDirection(label, target, None, None, unit)
    if values is not None and not any(same_value(favourable, v) for v in values):
        shown = ", ".join(repr(v) for v in values[:10]) + (" ..." if len(values) > 10 else "")
        raise InputError(f"{FAVOURABLE_KEY} = {favourable!r} is not a value of the label column '{label}' (values: "
                         f"{shown}); set {FAVOURABLE_KEY} to the value that is good for the person (e.g. \"no\" on a "
                         "deny or default label)")
    if policy.positive_label is not None:
        target_favourable = same_value(favourable, policy.positive_label) == (policy.target_class == 1)
    else:
        number = _number(favourable)
        if number is None or not number.is_integer() or number < 0:
            raise InputError(f"{FAVOURABLE_KEY} = {favourable!r}: without positive_label the label holds class "
                             f"indices, so {FAVOURABLE_KEY} is one of them (\"0\" or \"1\"); for a text label declare "
                             "positive_label (the event the model predicts) too")
        target_favourable = int(number) == policy.target_class
    return OutcomeDirection(label, target, str(favourable), target_favourable, unit)


def moves_by_group(lic: LICResult, group_labels: np.ndarray, names: list, delta: float) -> list[dict]:
    """Per protected group, the flagged people split by the sign of their move (swap reading).

    Parameters
    ----------
    lic : LICResult
        With ``probability`` and ``counterfactual_probability`` (n,); empty list without the latter (the gradient
        readings have no counterfactual).
    group_labels : ndarray of shape (n,)
        Each audited row's group.
    names : list
        The groups, in report order.
    delta : float
        The policy's δ (probability points).

    Returns
    -------
    list of dict
        ``group``, ``n``, ``rise`` and ``fall`` (the flagged count whose counterfactual probability is above /
        below the observed one: the sum of flag probabilities, undefined rows left out), ``rise_fraction`` and
        ``fall_fraction`` (over the group's ``n``).
    """
    if lic.counterfactual_probability is None:
        return []
    weights = lic.flag_probability(delta)                                          # (n,)
    move = np.asarray(lic.counterfactual_probability, dtype=np.float64) - np.asarray(lic.probability, np.float64)
    labels = np.asarray(group_labels, dtype=object)
    out = []
    for g in names:
        rows = labels == g
        n = int(rows.sum())
        rise = float(weights[rows & (move > 0)].sum())
        fall = float(weights[rows & (move < 0)].sum())
        out.append({"group": str(g), "n": n, "rise": rise, "fall": fall,
                    "rise_fraction": rise / n if n else None, "fall_fraction": fall / n if n else None})
    return out


def direction_sentences(direction: OutcomeDirection, moves: list[dict], delta: float, protected: str) -> list[str]:
    """One sentence per group: for what share the estimated probability would fall / rise by more than δ if only
    the protected attribute changed, and which of the two is towards the favourable outcome; a last sentence
    naming :data:`FAVOURABLE_KEY` when the direction is not declared."""
    name, points = direction.probability_name, direction.change(delta)
    if direction.target_favourable is None:
        meaning = {"fall": "", "rise": ""}
    else:
        better = "rise" if direction.target_favourable else "fall"
        worse = "fall" if better == "rise" else "rise"
        meaning = {better: (f" (towards the favourable outcome '{direction.favourable_value}': as they are, the "
                            "model treats them less favourably)"),
                   worse: " (away from the favourable outcome: as they are, the model treats them more favourably)"}
    out = []
    for m in moves:
        if not m["n"]:
            continue
        first, second = ("fall", "rise") if m["fall"] >= m["rise"] else ("rise", "fall")
        rest = (f"for {m[second + '_fraction']:.0%} ({fmt_count(round(m[second]))}) it would {second}"
                f"{meaning[second]}" if round(m[second]) else f"for no one would it {second} by that much")
        out.append(f"For {m[first + '_fraction']:.0%} of group '{m['group']}' ({fmt_count(round(m[first]))} of "
                   f"{fmt_count(m['n'])}) the estimated {name} would {first} by more than {points} if only "
                   f"'{protected}' changed{meaning[first]}; {rest}.")
    if direction.target_favourable is None and out and direction.unit is None:   # a value target has no label class
        out.append(f"Which outcome is favourable is not declared (policy {FAVOURABLE_KEY}, e.g. {FAVOURABLE_KEY} = "
                   f"\"no\" on a deny label): these moves are not read as gains or losses, and no group is called "
                   "most favoured.")
    return out


def outcome_record(direction: OutcomeDirection, lic: LICResult, group_labels: np.ndarray, names: list, delta: float,
                   protected: str, cutoff: CutoffReading | None = None) -> dict:
    """The check's ``outcome`` section: :meth:`OutcomeDirection.to_dict` with ``by_group``
    (:func:`moves_by_group`) and ``sentences`` (:func:`direction_sentences`); with a value target's cut-off
    reading (:func:`faux_checks.gate.cutoff.cutoff_reading`), ``cutoff`` (:meth:`CutoffReading.to_dict`: who
    crosses the cut-off, towards or away from its favourable side)."""
    moves = moves_by_group(lic, group_labels, names, delta)
    out = {**direction.to_dict(), "by_group": moves,
           "sentences": direction_sentences(direction, moves, delta, protected)}
    if cutoff is not None:
        out["cutoff"] = cutoff.to_dict(protected)
    return out
