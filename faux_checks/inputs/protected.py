"""The protected attribute c: from whatever container a user has to encoded values.

Strings, booleans, 0/1 integers, pandas Categoricals, nullable dtypes and one-hot columns
all give the same groups (bad-inputs case C08). Groups are ordered by sorted level (numbers
by value, ``0`` and ``0.0`` being one level; other values as strings; booleans ``False < True``; a Categorical keeps its declared category order, which is
sorted by default; one-hot columns keep their column order).

Missing values are never put into a group silently (case C01): by default they raise an
:class:`~faux_checks.errors.InputError` naming the column, the row count and the options;
``missing="drop"`` drops those rows everywhere (aux training, scoring, report) and the number
dropped is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import InputError
from ..kinds import KINDS, MAX_GROUPS, Kind

__all__ = ["all_number", "encode_protected", "fmt_level", "ProtectedAttribute"]

MAX_CLASSES = MAX_GROUPS                      # the multiclass entry of KINDS accepts 2 to 20 groups


@dataclass(frozen=True)
class ProtectedAttribute:
    """Encoded protected attribute.

    Attributes
    ----------
    name : str
        Column name (or the one-hot group's name).
    kind : {"binary", "multiclass", "continuous"}
    values : ndarray of shape (n_kept,)
        Class index (int64, 0..k-1) or the continuous value (float64), for the kept rows.
    groups : tuple of str
        Group labels in class-index order (empty for continuous).
    kept : ndarray of shape (n,), bool
        Rows with a known protected value.
    n_missing : int
        Rows without one (only non-zero with ``missing="drop"``).
    """

    name: str
    kind: Kind
    values: np.ndarray
    groups: tuple[str, ...]
    kept: np.ndarray
    n_missing: int

    @property
    def n_outputs(self) -> int:
        """Number of aux-model outputs k: 1 for binary/continuous, the class count otherwise."""
        return KINDS[self.kind].n_outputs(len(self.groups))

    def group_labels(self, values: np.ndarray | None = None) -> np.ndarray:
        """Group label (str) per row of ``values`` (default: all kept rows); continuous: quartile bins."""
        values = self.values if values is None else values
        if not KINDS[self.kind].grouped:
            return np.asarray(pd.qcut(values, 4, duplicates="drop").astype(str), dtype=object)
        return np.asarray(self.groups, dtype=object)[values]


def encode_protected(
    values,
    *,
    name: str | None = None,
    kind: Kind | None = None,
    missing: Literal["error", "drop"] = "error",
) -> ProtectedAttribute:
    """Encode the protected attribute c.

    Parameters
    ----------
    values : Series, ndarray, list, or DataFrame of one-hot columns; length n
        The protected attribute. A DataFrame with more than one column is read as one-hot
        (each row must have exactly one 1).
    name : str, optional
        Column name used in messages (defaults to the Series name).
    kind : {"binary", "multiclass", "continuous"}, optional
        Inferred when omitted: two levels -> binary; a float column with more than
        ``MAX_CLASSES`` (20) distinct values -> continuous; otherwise multiclass.
    missing : {"error", "drop"}
        What to do with missing values (see module docstring).

    Returns
    -------
    ProtectedAttribute

    Raises
    ------
    InputError
        Missing values with ``missing="error"``; an unknown ``missing`` option (a typo never
        drops rows); a single group; a malformed one-hot row; a declared kind that does not fit
        the values.
    """
    if missing not in ("error", "drop"):
        raise InputError(f"missing must be 'error' or 'drop', got {missing!r}")
    if isinstance(values, pd.DataFrame):
        if values.shape[1] == 1:
            values = values.iloc[:, 0]
        else:
            return _from_one_hot(values, name=name or "protected", kind=kind, missing=missing)
    series = values if isinstance(values, pd.Series) else pd.Series(np.asarray(values, dtype=object)
                                                                     if not isinstance(values, np.ndarray)
                                                                     else values)
    name = name or (str(series.name) if series.name is not None else "protected")
    s, kept, n_missing = _present_values(series, name, missing)
    if kind is None:
        kind = _inferred_kind(s)
    if kind == "continuous":
        try:
            vals = pd.to_numeric(s).to_numpy(dtype="float64")
        except (TypeError, ValueError) as exc:
            raise InputError(f"protected attribute '{name}' declared continuous but is not numeric ({exc})") from exc
        if np.nanstd(vals) == 0:
            raise InputError(f"protected attribute '{name}' is constant in {fmt_count(len(vals))} rows; nothing to test")
        return ProtectedAttribute(name, "continuous", vals, (), kept, n_missing)
    labels, levels = _group_labels(s)
    _check_groups(name, kind, levels, n_rows=len(s))
    index = {lvl: i for i, lvl in enumerate(levels)}
    codes = labels.map(index).to_numpy(dtype=np.int64)
    return ProtectedAttribute(name, kind, codes, tuple(levels), kept, n_missing)


def _present_values(series: pd.Series, name: str, missing: str) -> tuple[pd.Series, np.ndarray, int]:
    """The non-missing values, the mask of rows kept, and the count of missing ones; raises :class:`InputError` on
    missing values with ``missing="error"`` or when no value is left."""
    n = len(series)
    na = series.isna().to_numpy()
    n_missing = int(na.sum())
    if n_missing and missing == "error":
        raise InputError(
            f"protected attribute '{name}' has {fmt_count(n_missing)} missing values in {fmt_count(n)} rows; "
            "missing rows never join a group silently. Options: drop or impute them before the check, or "
            "set missing_protected = \"drop\" in the policy to exclude them (the count is reported)"
        )
    kept = ~na
    s = series[kept]
    if len(s) == 0:
        raise InputError(f"protected attribute '{name}' has no non-missing values in {fmt_count(n)} rows")
    return s, kept, n_missing


def _inferred_kind(s: pd.Series) -> Kind:
    """Two levels: binary; a float column with more than ``MAX_CLASSES`` distinct values: continuous; else multiclass."""
    is_float = pd.api.types.is_float_dtype(s) or (s.dtype == object and _all_float(s))
    nunique = s.nunique()
    if nunique == 2:
        return "binary"
    if is_float and nunique > MAX_CLASSES:
        return "continuous"
    return "multiclass"


def _group_labels(s: pd.Series) -> tuple[pd.Series, list[str]]:
    """Each row's group label (text) and the groups in code order: a categorical's categories present, booleans
    False < True, numbers by value (:func:`fmt_level`), other values as sorted text."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        return s.astype(str), [str(c) for c in s.cat.categories if (s == c).any()]
    if pd.api.types.is_bool_dtype(s) or (s.dtype == object and s.map(type).eq(bool).all()):
        labels = s.astype(bool).astype(str)
        return labels, sorted(labels.unique())  # 'False' < 'True'
    if (pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)) or (
        s.dtype == object and all_number(s)  # a list or object array of numbers: same labels
    ):
        numeric_levels = sorted(pd.unique(s))
        return s.map(fmt_level), list(dict.fromkeys(fmt_level(v) for v in numeric_levels))
    labels = s.astype(str)
    return labels, sorted(labels.unique())


def _check_groups(name: str, kind: str, levels: list[str], *, n_rows: int) -> None:
    """Raise :class:`InputError` for a single group, a binary attribute without two groups, or too many groups."""
    if len(levels) < 2:
        raise InputError(
            f"protected attribute '{name}' has a single group {levels} in {fmt_count(n_rows)} rows; "
            "a fairness test needs at least two groups"
        )
    if kind == "binary" and len(levels) != 2:
        raise InputError(f"protected attribute '{name}' declared binary but has {len(levels)} groups: {levels[:10]}")
    if len(levels) > MAX_CLASSES:
        raise InputError(
            f"protected attribute '{name}' has {len(levels)} groups (more than {MAX_CLASSES}); "
            "declare protected_kind = \"continuous\" in the policy (kind = \"continuous\" in an [[attributes]] table) "
            "for a numeric attribute, or group the levels first"
        )


def fmt_level(v) -> str:
    """1.0 -> '1', 1 -> '1', 0.5 -> '0.5' (so ints and integral floats give the same labels)."""
    f = float(v)
    return str(int(f)) if f.is_integer() else repr(f)


def _all_float(s: pd.Series) -> bool:
    return s.map(lambda v: isinstance(v, (float, np.floating))).all()


def all_number(s: pd.Series) -> bool:
    return s.map(lambda v: isinstance(v, (int, float, np.integer, np.floating))
                 and not isinstance(v, (bool, np.bool_))).all()


def _from_one_hot(frame: pd.DataFrame, *, name: str, kind, missing) -> ProtectedAttribute:
    n = len(frame)
    values = frame.apply(pd.to_numeric, errors="coerce")
    na = values.isna().any(axis=1).to_numpy()
    if na.any() and missing == "error":
        raise InputError(
            f"protected attribute '{name}' (one-hot columns {list(frame.columns)}) has {fmt_count(na.sum())} rows "
            f"with missing values in {fmt_count(n)} rows; drop or impute them, or set missing_protected = \"drop\""
        )
    arr = values.to_numpy(dtype="float64")[~na]
    row_sums = arr.sum(axis=1)
    bad = ~np.isin(arr, (0.0, 1.0)).all(axis=1) | (row_sums != 1)
    if bad.any():
        raise InputError(
            f"protected attribute '{name}': {fmt_count(bad.sum())} of {fmt_count(len(arr))} rows of the one-hot "
            f"columns {list(frame.columns)} do not hold exactly one 1; pass one label column instead"
        )
    levels = tuple(str(c) for c in frame.columns)
    codes = arr.argmax(axis=1).astype(np.int64)
    present = np.unique(codes)
    if len(present) < 2:
        raise InputError(f"protected attribute '{name}' has a single group in {fmt_count(len(codes))} rows")
    k: Kind = "binary" if len(levels) == 2 else "multiclass"
    if kind is not None and kind != k:
        raise InputError(f"protected attribute '{name}' declared {kind} but has {len(levels)} one-hot columns")
    return ProtectedAttribute(name, k, codes, levels, ~na, int(na.sum()))
