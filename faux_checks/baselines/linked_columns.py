"""Linked columns: an exact counterfactual for columns tied to the protected attribute by definition.

Some values name the protected attribute outright: in UCI Adult, ``relationship`` is ``Husband``
for married men and ``Wife`` for married women. A policy declares such links per column, in one of
three forms:

- a value per group: ``relationship = { Male = "Husband", Female = "Wife" }``;
- a set per group (many-to-many): ``first_name = { F = ["Ann", "Beth"], M = ["Carl", "Dan"] }``;
- a set per (group, value of another column): ``first_name = { by = "race", F = { A = ["Ann"], B = ["Bea"] },
  M = { A = ["Carl"], B = ["Cole"] } }``.

The counterfactual of an individual for another group g′ changes the protected attribute to g′ and,
in each linked column, replaces a value tied to the individual's own group by each value tied to g′
(for the same value of the ``by`` column); every other value and column stays as it is. The score is
|f(x) − f(x′)| averaged over the tied values of g′ (``reduce = "mean"``, the default: the new value is
one of the set, none more likely) or their largest (``"max"``), the largest over the other groups.

This is exact by definition for the linked values and blind to every other proxy: it complements
fAux, which estimates the effect through all features, and it needs no auxiliary model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import InputError

__all__ = ["Link", "LinkedColumnsTester", "check_links", "linked_candidates", "linked_counterfactual", "parse_links"]

#: A declaration as the policy holds it: column -> {group: value}, {group: [values]}, or
#: {"by": other column, group: {other value: value or [values]}}.
Links = Mapping[str, Mapping[str, Any]]
ANY = "*"


@dataclass(frozen=True)
class Link:
    """One linked column, normalised: the values tied to each group, per value of the ``by`` column.

    Attributes
    ----------
    column : str
    by : str or None
        The column whose value selects the set (names per race and sex: ``by = "race"``); None: one set per group.
    values : dict of group -> dict of by-value (``"*"`` without ``by``) -> tuple of str
    """

    column: str
    by: str | None
    values: dict

    def tied(self, group: str, key: str) -> tuple:
        """The values tied to ``group`` for the ``by`` value ``key`` (empty when none)."""
        table = self.values.get(group, {})
        return table.get(key, table.get(ANY, ())) if self.by is not None else table.get(ANY, ())


def parse_links(links: Links) -> list[Link]:
    """The policy's ``[linked_columns]`` declarations, normalised (three forms, module docstring).

    Raises
    ------
    InputError
        A value that is neither a string, a list of strings nor (with ``by``) a table of them, a ``by`` that is
        not a string, an empty set, or one value tied to two groups (for the same ``by`` value).
    """
    out = []
    for column, mapping in links.items():
        mapping = dict(mapping)
        by = mapping.pop("by", None)
        if by is not None and not isinstance(by, str):
            raise InputError(f"linked column '{column}': 'by' must name a column, got {by!r}")
        values: dict = {}
        for group, tied in mapping.items():
            table = tied if by is not None else {ANY: tied}
            if by is not None and not isinstance(tied, Mapping):
                raise InputError(f"linked column '{column}' with by = '{by}': group '{group}' must map each value of "
                                 f"'{by}' to its value(s), e.g. {group} = {{ A = [\"x\", \"y\"] }}; got {tied!r}")
            values[str(group)] = {}
            for key, vals in table.items():
                vals = (vals,) if isinstance(vals, str) else tuple(vals) if isinstance(vals, (list, tuple)) else None
                if not vals or not all(isinstance(v, str) for v in vals):
                    raise InputError(f"linked column '{column}': group '{group}'"
                                     + (f", {by} = '{key}'" if by is not None else "")
                                     + f" must be a value or a non-empty list of values, got {table[key]!r}")
                values[str(group)][str(key)] = vals
        keys = {k for table in values.values() for k in table}
        for key in keys:
            seen: dict = {}
            for group, table in values.items():
                for v in table.get(key, ()):
                    if v in seen and seen[v] != group:
                        where = f" for {by} = '{key}'" if by is not None else ""
                        raise InputError(f"linked column '{column}' ties value '{v}' to groups '{seen[v]}' and "
                                         f"'{group}'{where}; a value names one group")
                    seen[v] = group
        out.append(Link(column=str(column), by=by, values=values))
    return out


def check_links(links: Links, *, columns, groups, levels: Mapping[str, tuple] | None = None) -> None:
    """Validate declared links against the data: columns present, groups known, values known.

    Parameters
    ----------
    links : mapping column -> declaration (:func:`parse_links`)
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
    for link in parse_links(links):
        for col in (link.column,) + ((link.by,) if link.by else ()):
            if col not in columns:
                what = "linked column" if col == link.column else f"linked column '{link.column}' reads by"
                raise InputError(f"{what} '{col}' is not in the data; columns: {list(columns)[:20]}")
        unknown = [g for g in link.values if g not in groups]
        if unknown:
            raise InputError(f"linked column '{link.column}' names groups {unknown} that the protected attribute does "
                             f"not have; its groups: {list(groups)}")
        if levels is not None and link.column in levels:
            declared = {v for table in link.values.values() for vals in table.values() for v in vals}
            missing = sorted(v for v in declared if str(v) not in levels[link.column])
            if missing:
                raise InputError(f"linked column '{link.column}' declares values {missing[:10]} that its feature spec "
                                 f"does not know; its levels: {list(levels[link.column])[:20]}")


def linked_candidates(frame: pd.DataFrame, *, protected: str, groups: np.ndarray, to_groups: np.ndarray,
                      links: Links, raw_values: Mapping[str, object] | None = None
                      ) -> tuple[list[pd.DataFrame], np.ndarray]:
    """Every counterfactual of the rows in other groups, linked values mapped to each tied value of the new group.

    A row whose value in a linked column is one of the values tied to its own group (for its ``by`` value)
    takes, in turn, each value tied to the new group (for the same ``by`` value); with several linked
    columns the candidates advance together (candidate j takes the j-th value of each set, cycling).

    Parameters
    ----------
    frame : DataFrame of shape (n, any)
        Not modified.
    protected : str
        Protected column; set to the new group's raw value when present in ``frame``.
    groups, to_groups : ndarray of shape (n,), str
        Each row's group and the group of its counterfactual.
    links : mapping column -> declaration (:func:`parse_links`)
    raw_values : mapping group -> raw value, optional
        The value to write into the protected column for each group (default: the group label).

    Returns
    -------
    frames : list of J DataFrames of shape (n, same columns)
    weights : ndarray of shape (n, J)
        1 / (number of distinct candidates of the row) for its candidates, 0 for the repeats beyond them;
        rows summing to 1 (a row with no linked value has one candidate: only c changes).
    """
    groups = np.asarray(groups, dtype=object).astype(str)
    to_groups = np.asarray(to_groups, dtype=object).astype(str)
    parsed = parse_links(links)
    n = len(frame)
    per_link = []                                                              # (change mask, list of target values)
    for link in parsed:
        values = frame[link.column].astype(str).to_numpy()
        keys = frame[link.by].astype(str).to_numpy() if link.by else np.full(n, ANY, dtype=object)
        sets: np.ndarray = np.empty(n, dtype=object)
        change: np.ndarray = np.zeros(n, dtype=bool)
        for i in range(n):
            own = link.tied(groups[i], keys[i])       # type: ignore[arg-type]  # stubs: int index -> ndarray; str
            new = link.tied(to_groups[i], keys[i])    # type: ignore[arg-type]  # (same)
            change[i] = values[i] in own and len(new) > 0
            sets[i] = new if change[i] else ()
        per_link.append((link.column, change, sets))
    sizes: np.ndarray = np.ones(n, dtype=np.int64)
    for _, _change, sets in per_link:
        sizes = np.maximum(sizes, np.array([len(s) or 1 for s in sets]))
    J = int(sizes.max()) if n else 1
    frames = []
    for j in range(J):
        out = frame.copy()
        for column, change, sets in per_link:
            if change.any():
                col = out[column].astype(object).to_numpy().copy()
                idx = np.flatnonzero(change)
                col[idx] = [sets[i][j % len(sets[i])] for i in idx]
                out[column] = col
        if protected in out.columns:
            raw = raw_values or {}
            out[protected] = np.array([raw.get(g, g) for g in to_groups], dtype=object)
            if pd.api.types.is_numeric_dtype(frame[protected]):
                out[protected] = pd.to_numeric(out[protected])
        frames.append(out)
    weights = (np.arange(J)[None, :] < sizes[:, None]) / sizes[:, None].astype(np.float64)
    return frames, weights


def linked_counterfactual(frame: pd.DataFrame, *, protected: str, groups: np.ndarray, to_groups: np.ndarray,
                          links: Links, raw_values: Mapping[str, object] | None = None) -> pd.DataFrame:
    """The rows of ``frame`` in other groups with linked values mapped: the first candidate of
    :func:`linked_candidates` (the only one when each group has one tied value, as Adult's Husband ↔ Wife).

    Returns
    -------
    DataFrame of shape (n, same columns)
    """
    frames, _ = linked_candidates(frame, protected=protected, groups=groups, to_groups=to_groups, links=links,
                                  raw_values=raw_values)
    return frames[0]


class LinkedColumnsTester:
    """Score = max over other groups g′ of |f(x) − f(x with c = g′ and linked values mapped)| (mean or max over a set).

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
    reduce : {"mean", "max"}
        Over the values tied to the new group (several with a many-to-many declaration).

    Notes
    -----
    Our tester (no paper): the definitional counterfactual of issue "linked columns", exact for the
    declared values. Rows with no linked value and no protected input score exactly 0.
    """

    name = "linked_columns"
    needs_protected_input = False

    def __init__(self, predict: Callable[[pd.DataFrame], np.ndarray], *, protected: str, links: Links, groups,
                 reduce: str = "mean"):
        if reduce not in ("mean", "max"):
            raise InputError(f"linked columns: reduce must be 'mean' or 'max', got {reduce!r}")
        self.predict = predict
        self.protected = protected
        self.links = links
        self.groups = tuple(map(str, groups))
        self.reduce = reduce

    def score(self, frame: pd.DataFrame, values: np.ndarray) -> np.ndarray:
        """Scores of the rows of ``frame``; ``values`` (n,) are their group indices. Shape (n,), probability points.

        Raises
        ------
        InputError
            Links that do not fit the data (:func:`check_links`), or row counts that differ.
        """
        return self.scores(frame, values)[self.reduce]

    def scores(self, frame: pd.DataFrame, values: np.ndarray) -> dict[str, np.ndarray]:
        """Both reductions over the tied values: ``{"mean": (n,), "max": (n,)}`` (each the largest over other groups)."""
        values = np.asarray(values, dtype=np.int64)
        if len(values) != len(frame):
            raise InputError(f"linked columns: {fmt_count(len(frame))} rows but {fmt_count(len(values))} group values")
        check_links(self.links, columns=list(frame.columns), groups=self.groups)
        labels = np.asarray(self.groups, dtype=object)
        raw: dict[Any, Any] = {}
        if self.protected in frame.columns:
            for label, value in zip(labels[values], frame[self.protected].to_numpy(), strict=False):
                raw.setdefault(label, value)
        p = np.asarray(self.predict(frame), dtype=np.float64)
        m = len(self.groups)
        mean, top = np.zeros(len(frame)), np.zeros(len(frame))
        for shift in range(1, m):
            to = labels[(values + shift) % m]
            frames, weights = linked_candidates(frame, protected=self.protected, groups=labels[values], to_groups=to,
                                                links=self.links, raw_values=raw)
            changes = np.stack([np.abs(np.asarray(self.predict(cf), dtype=np.float64) - p) for cf in frames], axis=1)
            mean = np.maximum(mean, (weights * changes).sum(axis=1))
            top = np.maximum(top, np.where(weights > 0, changes, -np.inf).max(axis=1))
        return {"mean": mean, "max": top}
