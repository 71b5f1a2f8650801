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
    """Accept a DataFrame (returned as is, never modified) or anything ``pd.DataFrame`` takes."""
    if isinstance(data, pd.DataFrame):
        return data
    try:
        return pd.DataFrame(data)
    except Exception as exc:  # pragma: no cover - pandas' own message is kept
        raise InputError(f"{what}: cannot be read as a table ({exc}); pass a pandas DataFrame") from exc


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
