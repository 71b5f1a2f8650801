"""Small input checks shared by the library (private)."""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from .errors import InputError


def fmt_count(n: int) -> str:
    """``12345`` -> ``'12,345'``."""
    return f"{int(n):,}"


def require_columns(frame: pd.DataFrame, columns: Iterable[str], *, what: str) -> None:
    """Raise :class:`InputError` naming every missing column and what is present."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        present = list(map(str, frame.columns))
        shown = ", ".join(present[:30]) + (" ..." if len(present) > 30 else "")
        raise InputError(
            f"{what}: column(s) {missing} not found in the data ({fmt_count(len(frame))} rows); "
            f"present columns: [{shown}]. Fix the column name or the data file."
        )


def as_frame(data, *, what: str = "data") -> pd.DataFrame:
    """Accept a DataFrame (returned as is, never modified) or anything ``pd.DataFrame`` takes.

    Raises
    ------
    InputError
        Data that is not a table, or ambiguous column names (:func:`check_column_names`).
    """
    if not isinstance(data, pd.DataFrame):
        try:
            data = pd.DataFrame(data)
        except Exception as exc:  # pragma: no cover - pandas' own message is kept
            raise InputError(f"{what}: cannot be read as a table ({exc}); pass a pandas DataFrame") from exc
    check_column_names(data.columns, what=what)
    return data


def check_finite_matrix(X: np.ndarray, names: list[str], *, what: str) -> None:
    """Raise :class:`InputError` if X (n, d) has NaN/inf: the worst column named, its NaN and infinite counts, the rows."""
    bad = ~np.isfinite(X)
    if bad.any():
        per_col = bad.sum(axis=0)
        j = int(per_col.argmax())
        n_nan, n_inf = int(np.isnan(X[:, j]).sum()), int(np.isinf(X[:, j]).sum())
        raise InputError(
            f"{what}: {names[j]} has {fmt_count(n_nan)} NaN and {fmt_count(n_inf)} infinite values "
            f"in {fmt_count(X.shape[0])} rows ({fmt_count(bad.any(axis=1).sum())} rows affected in all); "
            "drop or impute them before the check"
        )


def column_name_problems(names: Iterable) -> list[str]:
    """What makes a table's column names ambiguous, one phrase per problem (empty when none).

    A name that is empty (or only whitespace), a name given twice, and names that differ only by
    surrounding whitespace: pandas reads a repeated CSV header ``x1,x1`` as ``x1`` and ``x1.1`` and an
    empty one as ``Unnamed: 2``, so a model fed "the numeric columns in file order" may receive
    another column than its author meant. Positions are 1-based, as a spreadsheet counts columns.
    """
    texts = [str(n) for n in names]
    problems = [f"column {i + 1} has an empty name" for i, t in enumerate(texts) if not t.strip()]
    seen: dict[str, list[int]] = {}
    for i, t in enumerate(texts):
        if t.strip():
            seen.setdefault(t.strip(), []).append(i)
    for positions in seen.values():
        if len(positions) < 2:
            continue
        where = ", ".join(str(i + 1) for i in positions[:-1]) + f" and {positions[-1] + 1}"
        spelled = list(dict.fromkeys(texts[i] for i in positions))
        if len(spelled) == 1:
            problems.append(f"{spelled[0]!r} is given {len(positions)} times (columns {where})")
        else:
            problems.append(f"{' and '.join(map(repr, spelled))} differ only by surrounding whitespace "
                            f"(columns {where})")
    return problems


def check_column_names(names: Iterable, *, what: str) -> None:
    """Raise :class:`InputError` naming every empty, repeated or whitespace-ambiguous column name.

    Parameters
    ----------
    names : iterable
        The column names as written (a CSV header, a Parquet schema, a DataFrame's columns).
    what : str
        The table, for the message (``data file adult.csv``).

    Raises
    ------
    InputError
        ``data file d.csv has ambiguous column names: 'x1' is given 2 times (columns 2 and 5); ...``
        with the fix; nothing is read or scored.
    """
    problems = column_name_problems(names)
    if problems:
        raise InputError(
            f"{what} has ambiguous column names: {'; '.join(problems)}. Every column needs a unique, non-empty "
            "name (a repeated name would be read as another column, e.g. 'x1' as 'x1.1'); rename or remove these "
            "columns; nothing was scored"
        )
