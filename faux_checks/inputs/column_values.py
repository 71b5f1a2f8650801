"""How a source column's values are read: numbers or text, level strings, and the refusal of missing or non-finite values.

The rules :class:`faux_checks.inputs.tabular.FeatureSpec` applies to each column it fits or encodes: a
column is numeric when its dtype is (booleans are levels); a text column that holds numbers is named
(:func:`numbers_as_text`); categorical levels compare as strings (``1`` and ``1.0`` are one level); a
missing, infinite or float32-overflowing value is an :class:`~faux_checks.errors.InputError` naming
the column and the counts.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import InputError
from .number_marks import comma_reading

__all__ = ["THOUSANDS", "as_level_strings", "check_finite", "check_no_missing", "is_numeric", "level_string",
           "missing_counts", "missing_message", "numbers_as_text"]


def is_numeric(series: pd.Series) -> bool:
    """Whether ``series`` is read as numbers: a numeric dtype that is not boolean."""
    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


#: A number written with a thousands separator (``1,234.5``, ``1 234``, ``1_000``, ``1'000``): never read as a number.
THOUSANDS = re.compile(r"^\s*[+-]?\d{1,3}(?:[,_' \u00a0\u202f]\d{3})+(?:\.\d*)?\s*$")


def numbers_as_text(series: pd.Series, column) -> str | None:
    """Why a non-numeric column holds numbers (one phrase), or None for a numeric column or genuine text.

    A column is read as text when a single value in it is not a number: ``'1,234.5'`` (a thousands
    separator), ``'-162,4'`` (a decimal comma), ``'?'``, ``'n/a '``. It holds numbers when at least one of its
    values parses as a number or is one written with a thousands separator (:data:`THOUSANDS`) or a decimal comma
    (:func:`faux_checks.inputs.number_marks.comma_reading`); then the phrase names the count of values that do not
    parse, the first of them and its row (0-based, in the frame's order), and the option that reads them
    (:func:`_mark_hint`: only one that reads every such value of the column as written). A column of numbers
    stored as text (every value parses, object dtype) is named too. Counted over unique values.
    """
    if is_numeric(series) or pd.api.types.is_bool_dtype(series):
        return None
    counts = series.dropna().value_counts(sort=False)             # unique value -> rows
    if counts.empty:
        return None
    values = pd.Series(counts.index, dtype=object)
    flags = values.map(lambda v: isinstance(v, (bool, np.bool_))).to_numpy(dtype=bool)   # True/False: not numbers
    parsed = pd.to_numeric(values, errors="coerce").notna().to_numpy() & ~flags
    commas = values.map(comma_reading)
    thousands = values.map(lambda v: isinstance(v, str) and THOUSANDS.match(v) is not None).to_numpy(dtype=bool)
    if not (parsed | thousands | commas.notna().to_numpy()).any():
        return None                                                # genuine text, e.g. a categorical
    rows = counts.to_numpy()
    n_values, n_bad = int(rows.sum()), int(rows[~parsed].sum())
    if n_bad == 0:
        return (f"column {column!r} holds numbers stored as text (dtype {series.dtype}; all {fmt_count(n_values)} "
                "values parse as numbers): convert it to a numeric dtype")
    first = int(np.flatnonzero(series.isin(set(values[~parsed])).to_numpy())[0])
    example = series.iloc[first]
    hint = _mark_hint(example, commas[~parsed])
    verb = "is not a number" if n_bad == 1 else "are not numbers"
    return (f"column {column!r} is read as text: {fmt_count(n_bad)} of its {fmt_count(n_values)} values {verb} "
            f"(e.g. {example!r} in row {fmt_count(first)}{hint}; {fmt_count(n_values - n_bad)} "
            f"{'is a number' if n_values - n_bad == 1 else 'are numbers'})")


def _mark_hint(example, commas: pd.Series) -> str:
    """The option that reads a text column's numbers, for its refusal; never one that would misread a value.

    ``commas`` holds :func:`~faux_checks.inputs.number_marks.comma_reading` of the column's unparsed values: a
    comma read only as a thousands mark (``1,234.5``) gives ``--thousands ','``, only as a decimal comma
    (``-162,4``) ``--decimal ','``; ``1,234`` alone (1234 or 1.234) and a column with both are named as
    ambiguous. Other thousands separators (``1 234``, ``1_000``) give ``--thousands`` with that mark.
    """
    readings = set(commas.dropna())
    if readings:
        if {"thousands", "decimal"} <= readings:
            return (", written with commas that are thousands marks in some values (1,234.5) and decimal commas in "
                    "others (0,5): write the numbers plainly (1234.5)")
        if "thousands" in readings:
            return ", written with a thousands separator: read it with --thousands ','"
        if "decimal" in readings:
            return ", written with a decimal comma: read it with --decimal ','"
        return (", written with a comma that may mark thousands (1,234 = 1234: --thousands ',') or decimals "
                "(1,234 = 1.234: --decimal ','); give the one the file means")
    found = re.search(r"\d([^\d])\d{3}", example) if isinstance(example, str) and THOUSANDS.match(example) else None
    if found is None:
        return ""
    mark = found.group(1)                                   # THOUSANDS matched, so a digit group is there
    return f", written with a thousands separator: read it with --thousands {'space' if mark == ' ' else repr(mark)}"


def level_string(value) -> str:
    """``1.0`` -> ``'1'`` (an integer column read back as float keeps its levels); else ``str``."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def as_level_strings(series: pd.Series) -> pd.Series:
    """Categorical values as strings (integral floats as integers); booleans as 'False'/'True'; NA kept."""
    out = series.astype("object")
    mask = out.isna()
    out = out.where(mask, out.map(level_string))
    return out


def check_finite(raw: np.ndarray, encoded: np.ndarray, column: str, *, what: str) -> None:
    """Raise :class:`InputError` naming the column and the counts when a numeric column holds ±inf or overflows float32."""
    infinite = np.isinf(raw)
    overflow = ~np.isfinite(encoded) & ~infinite
    if infinite.any() or overflow.any():
        n = len(raw)
        parts = []
        if infinite.any():
            parts.append(f"{fmt_count(infinite.sum())} infinite values (+inf {fmt_count((raw == np.inf).sum())}, "
                         f"-inf {fmt_count((raw == -np.inf).sum())})")
        if overflow.any():
            parts.append(f"{fmt_count(overflow.sum())} values too large for float32 once standardised "
                         f"(e.g. {float(raw[overflow][0])!r})")
        raise InputError(f"{what}: numeric column '{column}' has {' and '.join(parts)} in {fmt_count(n)} rows; "
                         "drop, clip or impute them before the check")


def missing_counts(frame: pd.DataFrame, columns) -> dict[str, int]:
    """Missing values per column of ``columns`` in ``frame``, for the columns that have any (in ``columns``' order).

    A column ``frame`` lacks is left to the encoder, which names every absent column.
    """
    present = [c for c in columns if c in frame.columns]
    counts = frame[present].isna().sum()
    return {str(c): int(counts[c]) for c in present if counts[c]}


def missing_message(counts: dict[str, int], n: int, *, what: str, fix: str) -> str:
    """One message naming every column of ``counts`` (column -> missing values) in ``n`` rows, then ``fix``.

    A column missing in every row is named as entirely empty (drop it from the features).
    """
    parts = [f"column '{c}' is entirely empty ({fmt_count(n)} rows): drop it from the features" if k == n
             else f"column '{c}' has {fmt_count(k)} missing values in {fmt_count(n)} rows" for c, k in counts.items()]
    lead = f"{len(counts)} columns have missing values: " if len(counts) > 1 else ""
    return f"{what}: {lead}{'; '.join(parts)}; {fix}"


#: The fix a refusal of missing values names when the target's inputs are not known to take NaN.
MISSING_FIX = "drop or impute them before the check"


def check_no_missing(series: pd.Series, column: str, *, what: str) -> None:
    """Raise :class:`InputError` naming the column and the counts when ``series`` has missing values (all: drop it)."""
    missing = int(series.isna().sum())
    if missing:
        raise InputError(missing_message({column: missing}, len(series), what=what, fix=MISSING_FIX))
