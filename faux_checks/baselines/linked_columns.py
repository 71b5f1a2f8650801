"""Linked columns: an exact counterfactual for columns tied to the protected attribute by definition.

Some values name the protected attribute outright: in UCI Adult, ``relationship`` is ``Husband``
for married men and ``Wife`` for married women. A policy declares such links per column as
``{group: value}`` (``relationship = { Male = "Husband", Female = "Wife" }``). The counterfactual
of an individual for another group g′ changes the protected attribute to g′ and, in each linked
column, replaces the value tied to the individual's own group by the value tied to g′; every other
value and column stays as it is. The score is |f(x) − f(x′)|, the largest over the other groups.

This is exact by definition for the linked values and blind to every other proxy: it complements
fAux, which estimates the effect through all features, and it needs no auxiliary model.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import InputError

__all__ = ["LinkedColumnsTester", "check_links", "linked_counterfactual"]

Links = Mapping[str, Mapping[str, str]]


def check_links(links: Links, *, columns, groups, levels: Mapping[str, tuple] | None = None) -> None:
    """Validate declared links against the data: columns present, groups known, values known.

    Parameters
    ----------
    links : mapping column -> {group: value}
    columns : sequence of str
        Columns of the data (or of the target's feature spec).
    groups : sequence of str
        Protected groups (labels as :func:`faux_checks.encode_protected` names them).
    levels : mapping column -> levels, optional
        Known values of categorical columns (a feature spec's levels); unknown declared values raise.

    Raises
    ------
    InputError
        Naming the column, group or value and what is present.
    """
    if not links:
        raise InputError("no linked columns declared: add a [linked_columns] table to the policy, e.g. "
                         "relationship = { Male = \"Husband\", Female = \"Wife\" }")
    for column, mapping in links.items():
        if column not in columns:
            raise InputError(f"linked column '{column}' is not in the data; columns: {list(columns)[:20]}")
        unknown = [g for g in mapping if g not in groups]
        if unknown:
            raise InputError(f"linked column '{column}' names groups {unknown} that the protected attribute does "
                             f"not have; its groups: {list(groups)}")
        if len(set(map(str, mapping.values()))) != len(mapping):
            raise InputError(f"linked column '{column}' ties one value to several groups: {dict(mapping)}")
        if levels is not None and column in levels:
            missing = [v for v in mapping.values() if str(v) not in levels[column]]
            if missing:
                raise InputError(f"linked column '{column}' declares values {missing} that its feature spec does not "
                                 f"know; its levels: {list(levels[column])[:20]}")


def linked_counterfactual(frame: pd.DataFrame, *, protected: str, groups: np.ndarray, to_groups: np.ndarray,
                          links: Links, raw_values: Mapping[str, object] | None = None) -> pd.DataFrame:
    """The rows of ``frame`` as they would be in other groups, linked values mapped (module docstring).

    Parameters
    ----------
    frame : DataFrame of shape (n, any)
        Not modified.
    protected : str
        Protected column; set to the new group's raw value when present in ``frame``.
    groups, to_groups : ndarray of shape (n,), str
        Each row's group and the group of its counterfactual.
    links : mapping column -> {group: value}
    raw_values : mapping group -> raw value, optional
        The value to write into the protected column for each group (default: the group label).

    Returns
    -------
    DataFrame of shape (n, same columns)
    """
    out = frame.copy()
    groups = np.asarray(groups, dtype=object).astype(str)
    to_groups = np.asarray(to_groups, dtype=object).astype(str)
    for column, mapping in links.items():
        values = frame[column].astype(str).to_numpy()
        tied_from = np.array([str(mapping.get(g, "\0")) for g in groups], dtype=object)
        tied_to = np.array([mapping.get(g) for g in to_groups], dtype=object)
        change = (values == tied_from) & np.array([t is not None for t in tied_to])
        if change.any():
            col = out[column].astype(object).to_numpy().copy()
            col[change] = tied_to[change]
            out[column] = col
    if protected in out.columns:
        raw = raw_values or {}
        out[protected] = np.array([raw.get(g, g) for g in to_groups], dtype=object)
        if pd.api.types.is_numeric_dtype(frame[protected]):
            out[protected] = pd.to_numeric(out[protected])
    return out


class LinkedColumnsTester:
    """Score = max over other groups g′ of |f(x) − f(x with c = g′ and linked values mapped)|.

    Parameters
    ----------
    predict : callable
        DataFrame -> P(y = target_class | x), ndarray of shape (n,) (e.g. the feature spec's encoding
        followed by the target model).
    protected : str
        Protected column.
    links : mapping column -> {group: value}
        Declared in the policy's ``[linked_columns]`` table.
    groups : sequence of str
        The protected groups in class-index order.

    Notes
    -----
    Our tester (no paper): the definitional counterfactual of issue "linked columns", exact for the
    declared values. Rows with no linked value and no protected input score exactly 0.
    """

    name = "linked_columns"
    needs_protected_input = False

    def __init__(self, predict: Callable[[pd.DataFrame], np.ndarray], *, protected: str, links: Links, groups):
        self.predict = predict
        self.protected = protected
        self.links = links
        self.groups = tuple(map(str, groups))

    def score(self, frame: pd.DataFrame, values: np.ndarray) -> np.ndarray:
        """Scores of the rows of ``frame``; ``values`` (n,) are their group indices. Shape (n,), probability points.

        Raises
        ------
        InputError
            Links that do not fit the data (:func:`check_links`), or row counts that differ.
        """
        values = np.asarray(values, dtype=np.int64)
        if len(values) != len(frame):
            raise InputError(f"linked columns: {fmt_count(len(frame))} rows but {fmt_count(len(values))} group values")
        check_links(self.links, columns=list(frame.columns), groups=self.groups)
        labels = np.asarray(self.groups, dtype=object)
        raw = {}
        if self.protected in frame.columns:
            for label, value in zip(labels[values], frame[self.protected].to_numpy()):
                raw.setdefault(label, value)
        p = np.asarray(self.predict(frame), dtype=np.float64)
        m = len(self.groups)
        changes = []
        for shift in range(1, m):
            to = labels[(values + shift) % m]
            cf = linked_counterfactual(frame, protected=self.protected, groups=labels[values], to_groups=to,
                                       links=self.links, raw_values=raw)
            changes.append(np.abs(np.asarray(self.predict(cf), dtype=np.float64) - p))
        return np.max(changes, axis=0)
