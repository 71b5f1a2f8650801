"""Reading audit data and writing per-row outputs (never overwriting what a user has)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError

__all__ = ["read_table", "write_scores"]


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV (any of ``.csv``, ``.csv.gz``, ``.txt``) or Parquet file into a DataFrame.

    Raises
    ------
    InputError
        Missing file, unknown format, or a parse error (message keeps the parser's words).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"data file {path} does not exist")
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, skipinitialspace=True)
    except Exception as exc:
        raise InputError(f"cannot read data file {path}: {type(exc).__name__}: {exc}") from exc


def write_scores(path: str | Path, result) -> Path:
    """Write one row per input row, in input order: ``row``, ``lic_score``, ``flagged``, ``status``.

    ``status`` is ``scored``, ``undefined`` (audited, score undefined: never counted as not
    flagged) or ``not_audited`` (dropped for a missing protected value, or not sampled); the last
    two have empty ``lic_score`` and ``flagged``. Refuses to overwrite an existing file.

    Parameters
    ----------
    result : CheckResult
        With ``scores`` (n_input_rows,) and ``row_index``.
    """
    path = Path(path)
    if path.exists():
        raise InputError(f"{path} exists already; choose another --scores-out (nothing is overwritten)")
    scores = result.scores
    audited = np.zeros(len(scores), dtype=bool)
    audited[result.row_index] = True
    status = np.where(~audited, "not_audited", np.where(np.isfinite(scores), "scored", "undefined"))
    flagged = pd.array(result.flagged(), dtype="boolean")
    flagged[status != "scored"] = pd.NA
    frame = pd.DataFrame({"row": np.arange(len(scores)), "lic_score": scores, "flagged": flagged, "status": status})
    frame.to_csv(path, index=False)
    return path
