"""Labels as class indices, and label-like columns kept out of the model's inputs (issue 22, item 7).

A label column holds class indices (0/1, booleans) or text (``yes``/``no``, ``>50K``/``<=50K``). Text labels are
mapped with a declared positive class (policy ``positive_label``, CLI ``--positive-label``): 1 where the label
equals it, 0 elsewhere, so that ``target_class = 1`` is the positive class. Text without a declaration is refused:
which of two words is "positive" is not something the data can say, and guessing would silently flip every
classification metric.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import InputError

__all__ = ["LABEL_LIKE_NAMES", "encode_labels", "label_like_columns"]

#: Column names that hold a label in most tabular data sets (compared case-insensitively); without a declared label
#: and without a feature spec, such a numeric column would otherwise become a model input.
LABEL_LIKE_NAMES = ("y", "label", "target", "class", "outcome", "income", "default_payment", "churn")


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
        example = str(counts.index[0])
        raise InputError(f"the label column '{column}' holds text ({shown}{' ...' if len(counts) > 5 else ''}; "
                         f"{fmt_count(int(bad.sum()))} of {fmt_count(len(series))} rows are not numbers); declare "
                         f"which value is the positive class: policy positive_label = \"{example}\" "
                         f"(CLI --positive-label {example}), or write the labels as 0/1")
    return values.to_numpy(dtype=np.float64)


def label_like_columns(columns, *, exclude=()) -> list[str]:
    """The columns among ``columns`` whose name is a usual label name (:data:`LABEL_LIKE_NAMES`), minus ``exclude``."""
    names = {n.lower() for n in LABEL_LIKE_NAMES}
    return [str(c) for c in columns if str(c).lower() in names and c not in exclude]
