"""Labels as class indices, and label-like columns kept out of the model's inputs.

A label column holds class indices (0/1, booleans) or text (``yes``/``no``, ``>50K``/``<=50K``). Text labels are
mapped with a declared positive class (policy ``positive_label``, CLI ``--positive-label``): 1 where the label
equals it, 0 elsewhere, so that ``target_class = 1`` is the positive class. Text without a declaration is refused:
which of two words is "positive" is not something the data can say, and guessing would silently flip every
classification metric. The refusal reads the label's name and values for their meaning (:func:`label_meaning`:
``deny``, ``default``, ``fraud`` name an adverse event; ``approved``, ``repaid`` a favourable one) and, where it
can tell, names the adverse value and suggests ``positive_label`` with the favourable key (``favourable_label``);
otherwise it lists both choices without picking one.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import InputError

__all__ = ["ADVERSE_WORDS", "FAVOURABLE_WORDS", "LABEL_LIKE_NAMES", "encode_labels", "label_like_columns",
           "label_meaning"]

#: Column names that hold a label in most tabular data sets (compared case-insensitively); without a declared label
#: and without a feature spec, such a numeric column would otherwise become a model input.
LABEL_LIKE_NAMES = ("y", "label", "target", "class", "outcome", "income", "default_payment", "churn")

#: Word stems that name an adverse event for the person (matched at the start of a word of the label's name or
#: value, case-insensitively): a credit denial, a default, fraud, churn, a charge-off, a late payment.
ADVERSE_WORDS = ("deny", "deni", "default", "fraud", "churn", "reject", "bad", "late", "delinquen", "chargeoff",
                 "charged", "charge", "declin", "refus", "fail", "arrest", "recidiv", "unpaid", "writeoff")
#: Word stems that name a favourable outcome: an approval, acceptance, a loan repaid.
FAVOURABLE_WORDS = ("approv", "accept", "good", "repaid", "paid", "grant", "hire", "admit", "pass", "success")

_YES = ("yes", "y", "true", "t", "1")
_NO = ("no", "n", "false", "f", "0")


def _names_word(text: str, stems: tuple[str, ...]) -> str | None:
    """The first word of ``text`` (split at anything but letters) that starts with one of ``stems``."""
    for word in re.split(r"[^a-z]+", str(text).lower()):
        if word and any(word.startswith(s) for s in stems):
            return word
    return None


def label_meaning(column: str, values: list[str]) -> tuple[str, str, str] | None:
    """Which of a two-valued text label's values is the adverse event, when its name or values tell.

    Parameters
    ----------
    column : str
        The label's name (``deny``, ``loan_default``, ``approved``).
    values : list of str
        Its distinct values.

    Returns
    -------
    tuple of (adverse value, favourable value, why) or None
        None when the label does not have two values or neither its values nor its name (with yes/no-like values)
        say which is adverse; ``why`` names the word that told.
    """
    if len(values) != 2:
        return None
    marks = [(_names_word(v, ADVERSE_WORDS), _names_word(v, FAVOURABLE_WORDS)) for v in values]
    bad = [i for i, (b, g) in enumerate(marks) if b and not g]
    good = [i for i, (b, g) in enumerate(marks) if g and not b]
    if len(bad) == 1 and bad[0] not in good:
        i = bad[0]
        return values[i], values[1 - i], f"the value '{values[i]}' names an adverse event ('{marks[i][0]}')"
    if len(good) == 1 and not bad:
        i = good[0]
        return values[1 - i], values[i], f"the value '{values[i]}' names a favourable outcome ('{marks[i][1]}')"
    yes = [v for v in values if v.strip().lower() in _YES]
    no = [v for v in values if v.strip().lower() in _NO]
    if len(yes) != 1 or len(no) != 1:
        return None
    bad_name, good_name = _names_word(column, ADVERSE_WORDS), _names_word(column, FAVOURABLE_WORDS)
    if bad_name and not good_name:
        return yes[0], no[0], f"the label's name '{column}' names an adverse event ('{bad_name}')"
    if good_name and not bad_name:
        return no[0], yes[0], f"the label's name '{column}' names a favourable outcome ('{good_name}')"
    return None


def _text_label_fix(column: str, counts: pd.Series) -> str:
    """What the text-label refusal asks for: the values read by :func:`label_meaning`, or both choices listed."""
    values = list(dict.fromkeys(str(v).strip() for v in counts.index))
    meaning = label_meaning(column, values)
    if meaning is not None:
        adverse, favourable, why = meaning
        event = next((v for v in values if v.strip().lower() in _YES), adverse)
        return (f"{why}, so '{adverse}' is the adverse outcome and '{favourable}' the favourable one. Declare the "
                f"event the model's probability is about as the positive class and the favourable value: policy "
                f"positive_label = \"{event}\" and favourable_label = \"{favourable}\" (CLI --positive-label {event}) "
                f"if the model gives P({column} = {event}); or write the labels as 0/1")
    shown = sorted(values)[:4]
    choices = " or ".join(f"positive_label = \"{v}\"" for v in shown)
    return (f"declare which value is the positive class, the event the model's probability is about ({choices}; "
            f"CLI --positive-label VALUE), and which value is favourable for the person (favourable_label = "
            + " or ".join(f"\"{v}\"" for v in shown) + "); or write the labels as 0/1")


def encode_labels(series: pd.Series, *, column: str, positive_label: str | None = None) -> np.ndarray:
    """The label column as class indices: float64 (n,), NaN where the label is missing.

    Parameters
    ----------
    series : Series of shape (n,)
        Numbers, booleans or text.
    column : str
        Its name, for messages.
    positive_label : str, optional
        The value meaning the positive class (compared as text: ``"yes"``, ``"1"``, ``">50K"``). With it every
        label becomes 1 (equal) or 0 (not equal); without it numbers and booleans are kept as class indices.

    Raises
    ------
    InputError
        Text labels without ``positive_label`` (the values and their counts named, with the fix); a
        ``positive_label`` that no row holds (the values present named).
    """
    missing = series.isna().to_numpy()
    if positive_label is not None:
        text = series.astype(str).str.strip()
        present = sorted(text[~missing].unique().tolist())
        if str(positive_label) not in present:
            raise InputError(f"positive_label {positive_label!r} is not a value of the label column '{column}' "
                             f"(values: {present[:10]}{' ...' if len(present) > 10 else ''}); declare one of them")
        return np.where(missing, np.nan, (text == str(positive_label)).to_numpy(dtype=np.float64))
    if pd.api.types.is_bool_dtype(series):
        return series.astype(np.float64).to_numpy()
    values = pd.to_numeric(series, errors="coerce")
    bad = values.isna() & series.notna()
    if bad.any():
        counts = series[~missing].astype(str).value_counts()
        shown = ", ".join(f"{v!r} ({fmt_count(int(k))})" for v, k in counts.head(5).items())
        raise InputError(f"the label column '{column}' holds text ({shown}{' ...' if len(counts) > 5 else ''}; "
                         f"{fmt_count(int(bad.sum()))} of {fmt_count(len(series))} rows are not numbers); "
                         + _text_label_fix(column, counts))
    return values.to_numpy(dtype=np.float64)


def label_like_columns(columns, *, exclude=()) -> list[str]:
    """The columns among ``columns`` whose name is a usual label name (:data:`LABEL_LIKE_NAMES`), minus ``exclude``."""
    names = {n.lower() for n in LABEL_LIKE_NAMES}
    return [str(c) for c in columns if str(c).lower() in names and c not in exclude]
