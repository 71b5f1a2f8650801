"""The protected attribute held in a separate file, linked to the audit rows by a key.

Data-protection rules often keep special-category data (the protected attribute c) apart from the rows a model
scores, in a file joined by a person's key. :func:`join_protected` joins that file's protected column(s) onto the
audit rows by the key and drops the key, so that the auxiliary model and the group statistics read c while the
target model's inputs are built from the audit columns alone: neither c (excluded from the inputs as any protected
column) nor the key (dropped here, refused when a feature spec names it: :func:`check_key_not_input`) reaches the
target model, and the scores file holds per-row scores only. Audit rows whose key the file does not hold are
*unmatched*: counted here, handled by the policy's ``[protected_file] unmatched``
(:mod:`faux_checks.gate.unmatched`).

Method reference: the fAux check (Castiglione et al., arXiv 2210.06288) needs c on the audited rows for the
auxiliary model only; the target is read on x alone, so joining c by a key leaves the scores of the matched
rows exactly those of the same rows with c as a column.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import ConfigurationError

__all__ = ["LinkedRows", "check_key_not_input", "join_protected", "link_protected_file"]


@dataclass(frozen=True)
class LinkedRows:
    """The audit rows with the protected column(s) joined from a linked file.

    Attributes
    ----------
    frame : DataFrame of shape (n_matched, n_audit_columns - 1 + n_protected)
        The matched audit rows, in audit order (index 0 .. n_matched - 1), without the key, with the protected
        column(s) appended.
    matched : ndarray of int, shape (n_matched,)
        Audit-row position of each row of ``frame``.
    unmatched : ndarray of int, shape (n_unmatched,)
        Audit-row positions whose key the protected file does not hold (a missing key included).
    n_rows : int
        Audit rows.
    join_on : str
        The key column.
    protected : tuple of str
        The columns joined from the protected file.
    """

    frame: pd.DataFrame
    matched: np.ndarray
    unmatched: np.ndarray
    n_rows: int
    join_on: str
    protected: tuple[str, ...]

    @property
    def n_unmatched(self) -> int:
        """Audit rows without a match."""
        return int(len(self.unmatched))

    @property
    def unmatched_share(self) -> float:
        """Unmatched rows over audit rows, in [0, 1] (0 for no audit rows)."""
        return self.n_unmatched / self.n_rows if self.n_rows else 0.0

    def to_dict(self) -> dict:
        """JSON-ready: ``join_on``, ``protected``, ``rows``, ``matched``, ``unmatched``, ``unmatched_share`` and the
        first 20 ``unmatched_rows`` (audit-row positions)."""
        return {"join_on": self.join_on, "protected": list(self.protected), "rows": int(self.n_rows),
                "matched": int(len(self.matched)), "unmatched": self.n_unmatched,
                "unmatched_share": float(self.unmatched_share), "unmatched_rows": [int(i) for i in self.unmatched[:20]]}


def _key_kind(column: pd.Series) -> str:
    """``numeric`` or ``text`` (booleans and every other dtype read as text)."""
    if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
        return "numeric"
    return "text"


def _check_columns(rows: pd.DataFrame, protected_rows: pd.DataFrame, join_on: str, protected: Sequence[str],
                   names: tuple[str, str]) -> None:
    audit_name, file_name = names
    problems = []
    if join_on not in rows.columns:
        problems.append(f"the key column '{join_on}' is not in {audit_name} (columns: {list(map(str, rows.columns))[:20]})")
    missing = [c for c in [join_on, *protected] if c not in protected_rows.columns]
    if missing:
        problems.append(f"{file_name} lacks {missing} (columns: {list(map(str, protected_rows.columns))[:20]})")
    held = [c for c in protected if c in rows.columns and c != join_on]
    if held:
        problems.append(f"{audit_name} holds the protected column(s) {held} itself; with a protected file the audit "
                        "data holds none: drop them from the audit data, or drop the protected file")
    if problems:
        raise ConfigurationError("cannot join the protected file: " + "; ".join(problems) + "; give --join-on the "
                                 "key column both files hold")


def _check_keys(rows: pd.DataFrame, protected_rows: pd.DataFrame, join_on: str, names: tuple[str, str]) -> None:
    audit_name, file_name = names
    keys = protected_rows[join_on]
    kinds = _key_kind(rows[join_on]), _key_kind(keys)
    if kinds[0] != kinds[1]:
        raise ConfigurationError(
            f"the key column '{join_on}' is {kinds[0]} ({rows[join_on].dtype}) in {audit_name} but {kinds[1]} "
            f"({keys.dtype}) in {file_name}: no key would match; write the key the same way in both files (all "
            "numbers, or all text)")
    absent = int(keys.isna().sum())
    if absent:
        raise ConfigurationError(f"{file_name}: {fmt_count(absent)} of {fmt_count(len(keys))} rows have no "
                                 f"'{join_on}' key; every row of the protected file needs its key: fill or drop them")
    repeated = keys[keys.duplicated(keep=False)]
    if len(repeated):
        shown = ", ".join(map(str, pd.unique(repeated)[:5]))
        raise ConfigurationError(
            f"{file_name}: {fmt_count(int(repeated.nunique()))} '{join_on}' keys occur more than once "
            f"({fmt_count(len(repeated))} rows; e.g. {shown}): each person's key must be unique in the protected "
            "file (one protected value per person); remove the duplicates")


def join_protected(rows: pd.DataFrame, protected_rows: pd.DataFrame, join_on: str, protected: Sequence[str], *,
                   names: tuple[str, str] = ("the audit data", "the protected file")) -> LinkedRows:
    """Join the protected column(s) of ``protected_rows`` onto ``rows`` by the key ``join_on`` (module docstring).

    Parameters
    ----------
    rows : DataFrame of shape (n, any)
        Audit rows: the key and the target's input columns, no protected column. Never modified.
    protected_rows : DataFrame of shape (m, any)
        The key and the protected column(s); other columns are ignored. Never modified.
    join_on : str
        The key column of both frames (unique in ``protected_rows``).
    protected : sequence of str
        The protected columns to join (the policy's declared attributes).
    names : (str, str)
        How messages name the two frames (file paths in the CLI).

    Returns
    -------
    LinkedRows
        The matched rows without the key, the protected column(s) appended, and the unmatched positions.

    Raises
    ------
    ConfigurationError
        The key is missing from either frame, a protected column is missing from ``protected_rows`` or present in
        ``rows``, the key is numeric in one frame and text in the other, or ``protected_rows`` has missing or
        repeated keys: each message names the columns, the counts and the fix.
    """
    protected = tuple(protected)
    _check_columns(rows, protected_rows, join_on, protected, names)
    _check_keys(rows, protected_rows, join_on, names)
    keys = protected_rows[join_on]
    where = pd.Index(keys).get_indexer(rows[join_on])        # -1: no match (a missing key never matches)
    where[rows[join_on].isna().to_numpy()] = -1
    found = where >= 0
    matched = np.flatnonzero(found)
    frame = rows.iloc[matched].drop(columns=[join_on]).reset_index(drop=True)
    joined = protected_rows.iloc[where[found]][list(protected)].reset_index(drop=True)
    frame = pd.concat([frame, joined], axis=1)
    return LinkedRows(frame=frame, matched=matched, unmatched=np.flatnonzero(~found), n_rows=len(rows),
                      join_on=join_on, protected=protected)


def link_protected_file(path: str | Path, rows: pd.DataFrame, join_on: str, protected: Sequence[str], *,
                        audit_name: str = "the audit data") -> LinkedRows:
    """Read the protected file at ``path`` (CSV or Parquet, :func:`faux_checks.inputs.io.read_table`) and
    :func:`join_protected` it onto ``rows``.

    Raises
    ------
    ConfigurationError
        The file does not exist or does not read, and every error of :func:`join_protected`.
    """
    from .io import read_table
    from ..errors import InputError

    try:
        protected_rows = read_table(path)
    except InputError as exc:
        raise ConfigurationError(f"protected file {path}: {exc}") from None
    return join_protected(rows, protected_rows, join_on, protected, names=(audit_name, f"the protected file {path}"))


def check_key_not_input(spec, join_on: str) -> None:
    """Refuse a feature spec that names the join key as an input of the target model.

    The key identifies a person across the two files; a model that reads it could read c through it.

    Raises
    ------
    ConfigurationError
        ``spec`` (a :class:`~faux_checks.inputs.tabular.FeatureSpec`, or None: nothing to check) lists ``join_on``
        among its source columns.
    """
    if spec is not None and join_on in spec.source_columns:
        raise ConfigurationError(f"the feature spec names the join key '{join_on}' as an input of the target model; "
                                 "the key links the protected file and never enters the model: drop it from the "
                                 "spec (and retrain without it), or join on another key")
