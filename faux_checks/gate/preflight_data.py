"""The audit data judged once, before any model version is downloaded: what depends on the data and policy alone.

:func:`inspect_data` reads the data file's frame once (seconds for ~10⁵ rows) and returns :class:`DataFindings`:
the column types, every column's missing values, the label read as the policy says (text without
``positive_label`` is refused), each protected attribute's groups and their sizes, and how many rows a decision
needs (the group minimum ``decision.min_group_rows`` on the audited and on the auxiliary model's held-out rows;
the flagged fraction's interval, :func:`faux_checks.gate.bounds.rows_needed`). :func:`check_data` raises the
findings that stop every version (one :class:`~faux_checks.errors.ConfigurationError` line naming every offending
column: exit 3 in the CLI); :func:`finding_lines` says the rest.

Missing values in the model's input columns are a finding, not a refusal here: whether a target takes them is
the target's, judged per version by :func:`missing_value_refusal` (the one place that rule lives) once the
version's input columns and model are known (:func:`faux_checks.gate.preflight.check_inputs_fit`). What is
refused here does not depend on any model: the label (policy ``label``, ``positive_label``), the protected
attribute's values (``missing_protected = "error"``, a single group, a kind that does not fit) and missing values in
the policy's admissible and linked columns, which are inputs of every target.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pandas as pd

from .._validation import fmt_count
from ..errors import ConfigurationError, InputError
from ..inputs.column_values import is_numeric, numbers_as_text
from ..kinds import protected_kind

__all__ = ["AttributeGroups", "DataFindings", "check_data", "finding_lines", "group_rows_needed", "inspect_data",
           "missing_value_refusal"]


@dataclass(frozen=True)
class AttributeGroups:
    """One protected attribute's groups in the data: ``counts`` {group: rows with a known value}, ``missing`` rows."""

    column: str
    kind: str
    counts: dict[str, int]
    missing: int


@dataclass(frozen=True)
class DataFindings:
    """What :func:`inspect_data` found in one data file (for one policy).

    Attributes
    ----------
    name : str
        How messages name the data (its file name).
    rows : int
    column_types : dict
        ``{column: "number" | "boolean" | "text" | "empty"}``, in the data's order.
    numbers_as_text : dict
        ``{column: phrase}`` for a text column that holds numbers (:func:`~faux_checks.inputs.column_values.numbers_as_text`).
    missing : dict
        ``{column: missing values}`` for every column with at least one.
    groups : list of AttributeGroups
        Each declared protected attribute that could be read.
    problems : list of str
        What stops every version, one phrase each naming its column(s), the counts and the fix.
    rows_needed : dict
        ``"group minimum"``: audited rows for every group to reach ``decision.min_group_rows`` audited and held-out
        rows at the data's group shares (None: no grouped attribute); ``"pass at half the limit"``,
        ``"fail at twice the limit"``: audited rows for the flagged fraction's interval to clear
        ``faux.max_flagged_fraction`` at those fractions.
    """

    name: str
    rows: int
    column_types: dict[str, str]
    numbers_as_text: dict[str, str]
    missing: dict[str, int]
    groups: list[AttributeGroups] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    rows_needed: dict[str, int | None] = field(default_factory=dict)


def inspect_data(frame: pd.DataFrame, policy, *, name: str) -> DataFindings:
    """Judge the audit data against the policy, without any model: :class:`DataFindings`.

    Parameters
    ----------
    frame : DataFrame of shape (n, columns)
        The audit data as read (never modified); the policy's columns are present
        (:func:`faux_checks.gate.preflight.check_policy_columns` ran first).
    policy : Policy
    name : str
        How messages name the data.

    Returns
    -------
    DataFindings
        Its ``problems`` are what :func:`check_data` raises.
    """
    from .preflight import policy_columns

    types, as_text = {}, {}
    for column in frame.columns:
        series = frame[column]
        types[str(column)] = _column_type(series)
        phrase = numbers_as_text(series, column) if types[str(column)] == "text" else None
        if phrase:
            as_text[str(column)] = phrase
    counts = frame.isna().sum()
    missing = {str(c): int(k) for c, k in counts.items() if k}
    problems = _label_problems(frame, policy)
    groups, group_problems = _protected_groups(frame, policy)
    problems += group_problems
    inputs = [c for c, role in policy_columns(policy).items() if role in ("admissible column", "linked column")]
    known = frame[[a.column for a in policy.attributes]].notna().all(axis=1)   # rows a check keeps
    kept = frame.loc[known, inputs].isna().sum()
    refusal = missing_value_refusal({str(c): int(k) for c, k in kept.items()}, inputs, rows=int(known.sum()))
    if refusal:
        problems.append(f"{refusal} (the policy's admissible and linked columns are inputs of every target model)")
    return DataFindings(name=name, rows=len(frame), column_types=types, numbers_as_text=as_text, missing=missing,
                        groups=groups, problems=problems, rows_needed=_rows_needed(groups, policy))


def _column_type(series: pd.Series) -> str:
    if series.notna().sum() == 0:
        return "empty"
    if pd.api.types.is_bool_dtype(series):
        return "boolean"
    return "number" if is_numeric(series) else "text"


def _label_problems(frame: pd.DataFrame, policy) -> list[str]:
    """The label read as the check reads it (:func:`~faux_checks.inputs.labels.encode_labels`): its refusal, if any."""
    if not policy.label:
        return []
    from ..inputs.labels import encode_labels

    try:
        encode_labels(frame[policy.label], column=policy.label, positive_label=policy.positive_label)
    except InputError as exc:
        return [str(exc)]
    return []


def _protected_groups(frame: pd.DataFrame, policy) -> tuple[list[AttributeGroups], list[str]]:
    """Each declared protected attribute encoded as the check encodes it: its groups, or its refusal."""
    import numpy as np

    from ..inputs.protected import encode_protected

    groups, problems = [], []
    for attribute in policy.attributes:
        column = attribute.column
        try:
            encoded = encode_protected(frame[column], name=column, kind=attribute.kind,
                                       missing=policy.missing_protected)
        except InputError as exc:
            problems.append(str(exc) if f"'{column}'" in str(exc) else f"protected attribute '{column}': {exc}")
            continue
        counts = {}
        if protected_kind(encoded.kind).grouped:
            sizes = np.bincount(encoded.values.astype(np.int64), minlength=len(encoded.groups))
            counts = {str(g): int(k) for g, k in zip(encoded.groups, sizes, strict=True)}
        groups.append(AttributeGroups(column, encoded.kind, counts, int(encoded.n_missing)))
    return groups, problems


def missing_value_refusal(missing: Mapping[str, int], columns: Iterable[str], *, rows: int,
                          model=None) -> str | None:
    """The missing-value rule: which input columns' missing values a target model cannot take, as one phrase.

    Parameters
    ----------
    missing : mapping
        ``{column: missing values}`` (:attr:`DataFindings.missing`, or counted on the rows at hand).
    columns : iterable of str
        The target's input columns (a version's feature spec; before download, the columns every target takes).
    rows : int
        Rows the counts are out of.
    model : target model, optional
        The version's model; None before it is downloaded. Every target is fed through
        :meth:`~faux_checks.inputs.tabular.FeatureSpec.encode`, which takes no missing value
        (:func:`~faux_checks.inputs.column_values.check_no_missing`), so the rule does not read it.

    Returns
    -------
    str or None
        ``"missing values in 2 input columns: 'income' (15 of 2,400 rows), 'debt' (3 of 2,400 rows); drop or impute
        them before the check"``; None when no input column has any.
    """
    offending = [(c, missing[c]) for c in dict.fromkeys(map(str, columns)) if missing.get(c)]
    if not offending:
        return None
    listed = ", ".join(f"'{c}' ({fmt_count(k)} of {fmt_count(rows)} rows)" for c, k in offending)
    return f"missing values in {len(offending)} input column(s): {listed}; drop or impute them before the check"


def group_rows_needed(counts: Mapping[str, int], minimum: int, held_out_share: float) -> int | None:
    """Rows at these group shares for every group to reach ``minimum`` audited and ``minimum`` held-out rows.

    ``max over groups of ceil(minimum / (share × held_out_share))``; ``held_out_share``: the share of audited
    rows the auxiliary model's quality is measured on (policy ``aux.holdout``). None without groups or rows.
    """
    total = sum(counts.values())
    if not counts or total == 0 or min(counts.values()) == 0:
        return None
    return max(math.ceil(minimum * total / (k * held_out_share)) for k in counts.values())


def _rows_needed(groups: list[AttributeGroups], policy) -> dict[str, int | None]:
    """The rows-needed estimates of :attr:`DataFindings.rows_needed`."""
    from .bounds import FlaggedInterval, rows_needed

    limit, confidence = policy.faux.max_flagged_fraction, policy.decision.confidence
    per_group = [group_rows_needed(g.counts, policy.decision.min_group_rows, policy.aux.holdout)
                 for g in groups if g.counts]
    known = [n for n in per_group if n is not None]
    out: dict[str, int | None] = {"group minimum": max(known) if known else None}
    for key, fraction in (("pass at half the limit", limit / 2), ("fail at twice the limit", min(1.0, 2 * limit))):
        start = FlaggedInterval(fraction, 0, 1, confidence, (0.0, 1.0))   # the search starts at one row
        out[key] = rows_needed(start, limit) if 0 < limit < 1 else None
    return out


def check_data(findings: DataFindings, *, policy_name: str) -> None:
    """Raise :class:`ConfigurationError` when the data stops every version: one line naming every problem.

    Raises
    ------
    ConfigurationError
        ``DATA (n rows) does not fit POLICY: <each problem, naming its column(s), counts and fix>; nothing was
        downloaded or recorded``.
    """
    if not findings.problems:
        return
    raise ConfigurationError(
        f"{findings.name} ({fmt_count(findings.rows)} rows) does not fit {policy_name}: "
        f"{len(findings.problems)} problem(s): " + "; ".join(f"({i}) {p}" for i, p in enumerate(findings.problems, 1))
        + "; no model was downloaded and nothing was recorded")


def finding_lines(findings: DataFindings, policy) -> list[str]:
    """What the data holds and needs, one line each (stderr before the registry is asked): types, missing values,
    groups per protected attribute, rows needed."""
    types = pd.Series(findings.column_types).value_counts()
    lines = [f"data {findings.name}: {fmt_count(findings.rows)} rows, {len(findings.column_types)} columns ("
             + ", ".join(f"{k} {t}" for t, k in types.items()) + ")"]
    for phrase in findings.numbers_as_text.values():
        lines.append(f"  {phrase}")
    if findings.missing:
        listed = ", ".join(f"'{c}' {fmt_count(k)}" for c, k in findings.missing.items())
        lines.append(f"  missing values in {len(findings.missing)} column(s): {listed} (judged per model version: "
                     "a target model that cannot take them in its input columns is refused)")
    minimum = policy.decision.min_group_rows
    for g in findings.groups:
        if not g.counts:
            lines.append(f"  protected attribute '{g.column}' ({g.kind}): no groups")
            continue
        shown = ", ".join(f"{name} {fmt_count(k)} ({k / max(1, sum(g.counts.values())):.1%})"
                          for name, k in g.counts.items())
        lines.append(f"  protected attribute '{g.column}': {shown}; decision.min_group_rows {minimum} audited and "
                     f"held-out rows (aux.holdout {policy.aux.holdout:g} of the audited rows)")
    need = findings.rows_needed
    if (group_need := need.get("group minimum")) is not None:
        lines.append(f"  rows needed at these group shares: {fmt_count(group_need)} for the group minimum")
    limit = policy.faux.max_flagged_fraction
    if need.get("pass at half the limit") is not None or need.get("fail at twice the limit") is not None:
        parts = [f"a target flagging {f:.1%} {verb} from about {fmt_count(n)} audited rows"
                 for key, f, verb in (("pass at half the limit", limit / 2, "can pass"),
                                      ("fail at twice the limit", min(1.0, 2 * limit), "can fail"))
                 if (n := need.get(key)) is not None]
        lines.append(f"  flagged-fraction limit {limit:.1%}: " + "; ".join(parts))
    return lines
