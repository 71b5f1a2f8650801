"""Several protected attributes in one gate: one check per attribute, one decision.

A policy that declares ``[[attributes]]`` (and optionally ``intersections``) is expanded into one
single-attribute policy per attribute (:meth:`Policy.attribute_policies`); each runs the unchanged
:func:`~faux_checks.gate.one_attribute.check_one_attribute` with its own auxiliary model, scores and rules. An
intersection (``sex × race``) is checked as one multi-class attribute: a derived column named
``sex×race`` whose groups are the cells (``Female×Black``), added to a copy of the data
(:func:`add_intersections`). ``[decision] min_group_rows`` applies to every cell like to any group,
so a cell with too few rows makes that intersection ``undecided`` and is named, never merged into
another cell; :attr:`AttributeSection.cells` lists every cell with its rows, the combinations
absent from the data included.

The attributes' outcomes combine into one decision by :func:`~faux_checks.gate.sections.combine`:
every attribute's rule rows, prefixed with the attribute (rule ``race/max_flagged_fraction``, detail
``race: ...``; no prefix when only one is declared), feed one
:func:`~faux_checks.gate.decision.decide`, so the gate takes the worst outcome in the order
failed > undecided > passed (exit codes 0, 1, 2).

A policy with ``protected = "sex"`` is a list of one attribute (:class:`~faux_checks.gate.policy.Policy`
reads it so) and takes the same path: one section whose check is exactly ``check_one_attribute``'s, whose
decision, reasons and rules are the gate's.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .._validation import as_frame
from ..errors import InputError
from ..inputs.protected import encode_protected
from ..inputs.tabular import FeatureSpec
from ..kinds import protected_kind
from ..provenance import jsonable
from .one_attribute import check_one_attribute
from .decision import EXIT_CODES, Decision, Outcome, exit_code_for, rule_row
from .policy_schema import INTERSECTION_SEPARATOR, Policy
from .result import CheckResult
from .sections import Part, cells_note, combine, section_dict

__all__ = ["AttributeSection", "AttributesResult", "add_intersections", "attribute_sections", "check_attributes",
           "gate_of_checks", "intersection_cells", "shared_feature_spec"]


@dataclass(frozen=True)
class AttributeSection:
    """One protected attribute's check within a gate.

    Attributes
    ----------
    attribute : str
        The column, or an intersection's derived column (``sex×race``).
    components : tuple of str
        An intersection's columns; empty for a declared attribute.
    check : CheckResult
        Its own check (aux model, scores, rules, report fields).
    cells : list of dict
        Intersections only: per cell ``cell`` (``Female×Black``), ``rows`` (input rows with every
        component known) and ``below_min_group_rows`` (fewer than ``[decision] min_group_rows``);
        combinations absent from the data have 0 rows.
    """

    attribute: str
    components: tuple[str, ...]
    check: CheckResult
    cells: list[dict] = field(default_factory=list)

    @property
    def kind(self) -> str | None:
        """binary / multiclass / continuous, as the check encoded it (None when it did not run)."""
        return (self.check.provenance or {}).get("protected_kind")

    def to_dict(self) -> dict:
        """JSON-ready: :func:`section_dict` of this attribute."""
        return section_dict(self.attribute, self.components, self.check.to_dict(), self.cells)


def attribute_sections(policy: Policy, frame: pd.DataFrame, checks: Mapping[str, dict | None]) -> tuple[list[dict], list[str]]:
    """The sections of a several-attribute gate from each attribute's check dict (the GX suite's path).

    Parameters
    ----------
    policy : Policy
        With ``[[attributes]]``.
    frame : DataFrame
        The audit data (for the intersections' cells).
    checks : mapping
        Attribute name -> ``CheckResult.to_dict()`` or None; a name the policy checks but that is
        missing here is a check that did not run.

    Returns
    -------
    sections : list of dict
        :func:`section_dict` per attribute, in the policy's order.
    notes : list of str
        One per intersection with cells under ``[decision] min_group_rows``.
    """
    components = {INTERSECTION_SEPARATOR.join(c): tuple(c) for c in policy.intersections}
    sections, notes = [], []
    for name in policy.attribute_names:
        cells = intersection_cells(frame, components[name], policy) if name in components else []
        sections.append(section_dict(name, components.get(name, ()), checks.get(name), cells))
        note = cells_note(name, cells, policy.decision.min_group_rows)
        if note:
            notes.append(note)
    return sections, notes


def gate_of_checks(policy: Policy, frame: pd.DataFrame, checks: Mapping[str, dict | None]) -> dict:
    """The gate's decision over every protected attribute from each attribute's check dict (the GX suite's path).

    The decision :func:`check_attributes` takes over its checks: one :func:`~faux_checks.gate.sections.combine`
    of each attribute's decided check (a check that did not run: a ``not computed`` rule) with the
    intersections' cell notes.

    Parameters
    ----------
    policy, frame, checks
        As :func:`attribute_sections`.

    Returns
    -------
    dict
        JSON-ready, as :meth:`AttributesResult.to_dict`: ``decision``, ``exit_code``, ``reasons``, ``rules`` and
        ``attributes`` (:func:`attribute_sections`).
    """
    sections, notes = attribute_sections(policy, frame, checks)
    parts: list[Part] = []
    for s in sections:
        c = s["check"]
        parts.append((s["attribute"], Decision(c["decision"], list(c.get("reasons") or []), list(c.get("rules") or []))
                      if c is not None and c.get("decision") in EXIT_CODES else
                      [rule_row("fAux check", "not computed", f"fAux check did not run: {s['reasons'][0]}")]))
    outcome = combine(parts, notes=notes)
    return jsonable({"decision": outcome.decision, "exit_code": exit_code_for(outcome.decision),
                     "reasons": list(outcome.reasons), "rules": list(outcome.rules), "attributes": sections})


@dataclass(frozen=True)
class AttributesResult(Outcome):
    """The gate's outcome over every protected attribute (:func:`check_attributes`).

    Attributes
    ----------
    decision : {"passed", "failed", "undecided"}
        :func:`~faux_checks.gate.decision.decide` over every attribute's prefixed rules.
    reasons : list of str
        The deciding rules first (prefixed ``attribute: ``), then notes on intersection cells.
    rules : list of dict
        Every attribute's rule rows, each with ``attribute`` and a prefixed ``rule`` / ``detail``.
    sections : list of AttributeSection
        One per attribute, in the policy's order (declared columns, then intersections).
    """

    decision: str
    reasons: list[str]
    rules: list[dict]
    sections: list[AttributeSection]


    @property
    def deciding(self) -> AttributeSection:
        """The first attribute whose own decision is the gate's (the one a report's headline shows)."""
        return next((s for s in self.sections if s.check.decision == self.decision), self.sections[0])

    def __getitem__(self, attribute: str) -> CheckResult:
        for s in self.sections:
            if s.attribute == attribute:
                return s.check
        raise KeyError(f"no protected attribute {attribute!r}; checked: {[s.attribute for s in self.sections]}")

    def __repr__(self) -> str:
        """One attribute: its check's line (the gate's decision and reasons are its own); several: each one's."""
        if len(self.sections) == 1:
            return repr(self.sections[0].check)
        parts = ", ".join(f"{s.attribute} {s.check.decision} {_pct(s.check.flagged_fraction)}" for s in self.sections)
        return f"{self.decision} over {len(self.sections)} protected attributes: {parts}"

    def to_dict(self) -> dict:
        """JSON-ready: ``decision``, ``exit_code``, ``reasons``, ``rules`` and ``attributes`` (one dict per section)."""
        return jsonable({"decision": self.decision, "exit_code": self.exit_code, "reasons": list(self.reasons),
                         "rules": list(self.rules), "attributes": [s.to_dict() for s in self.sections]})


def _pct(value: float) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.2%}"


def add_intersections(frame: pd.DataFrame, policy: Policy) -> pd.DataFrame:
    """``frame`` with one derived column per declared intersection (a copy when there is any; never modified).

    The derived column ``a×b`` holds each row's cell label (``Female×Black``): the components'
    group labels as the check encodes them (:func:`~faux_checks.inputs.protected.encode_protected`,
    each with its declared kind), joined by ``×``; missing when any component is missing.

    Raises
    ------
    InputError
        A component column is absent, or the data already holds a column with the derived name.
    """
    if not policy.intersections:
        return frame
    out = frame.copy()
    for cross in policy.intersections:
        name = INTERSECTION_SEPARATOR.join(cross)
        if name in frame.columns:
            raise InputError(f"the data already holds a column named '{name}', the name of the intersection "
                             f"{list(cross)}; rename that column")
        out[name] = _cell_labels(frame, cross, policy)
    return out


def _component_labels(frame: pd.DataFrame, column: str, policy: Policy) -> tuple[pd.Series, tuple[str, ...]]:
    """Group label per row of one component (NA where missing) and its groups in class order."""
    if column not in frame.columns:
        raise InputError(f"intersection component '{column}' is not a column of the audit data; columns present: "
                         f"{list(map(str, frame.columns))[:20]}")
    kind = next((a.kind for a in policy.attributes if a.column == column), None)
    attr = encode_protected(frame[column], name=column, kind=kind, missing="drop")
    if not protected_kind(attr.kind).grouped:
        raise InputError(f"intersection component '{column}' reads as continuous; intersections cross groups: "
                         f"declare its kind (binary or multiclass) or bin it into a multi-class column first")
    labels = pd.Series(pd.NA, index=frame.index, dtype=object)
    labels[attr.kept] = np.asarray(attr.groups, dtype=object)[attr.values]
    return labels, attr.groups


def _cell_labels(frame: pd.DataFrame, cross: Sequence[str], policy: Policy) -> pd.Series:
    parts = [_component_labels(frame, c, policy)[0] for c in cross]
    known = np.logical_and.reduce([p.notna().to_numpy() for p in parts])
    cells = pd.Series(pd.NA, index=frame.index, dtype=object)
    joined = parts[0][known].astype(str)
    for p in parts[1:]:
        joined = joined + INTERSECTION_SEPARATOR + p[known].astype(str)
    cells[known] = joined
    return cells


def intersection_cells(frame: pd.DataFrame, cross: Sequence[str], policy: Policy) -> list[dict]:
    """Every cell of an intersection with its input rows (0 for a combination absent from the data).

    Returns
    -------
    list of dict
        ``cell``, ``rows``, ``below_min_group_rows`` (rows < ``[decision] min_group_rows``), in the
        components' group order.
    """
    groups = [_component_labels(frame, c, policy)[1] for c in cross]
    counts = _cell_labels(frame, cross, policy).value_counts()
    minimum = policy.decision.min_group_rows
    out = []
    for combo in itertools.product(*groups):
        cell = INTERSECTION_SEPARATOR.join(combo)
        rows = int(counts.get(cell, 0))
        out.append({"cell": cell, "rows": rows, "below_min_group_rows": rows < minimum})
    return out


def check_attributes(
    target_model,
    data: pd.DataFrame,
    *,
    policy: Policy,
    feature_spec: FeatureSpec | None = None,
    aux_models: Mapping[str, Any] | None = None,
    progress: bool = False,
    model_info: dict | None = None,
) -> AttributesResult:
    """Check every protected attribute of the policy and decide once (module docstring).

    Parameters
    ----------
    target_model : torch module
        As for :func:`~faux_checks.gate.one_attribute.check_one_attribute`.
    data : DataFrame of shape (n, any)
        Audit rows with every protected column (intersections are derived). Never modified.
    policy : Policy
        ``protected = "..."`` (one attribute) or ``[[attributes]]`` and ``intersections``.
    feature_spec : FeatureSpec, optional
        The target's encoding. Without it the model receives the numeric columns minus **every**
        protected column and the label (the same inputs for every attribute).
    aux_models : mapping, optional
        A given auxiliary model per attribute name (``sex``, ``sex×race``); the others are trained.
    progress : bool
    model_info : dict, optional
        Added to every check's provenance.

    Returns
    -------
    AttributesResult
        One section per attribute; with ``protected = "..."`` its one check is ``check_one_attribute``'s own.

    Raises
    ------
    InputError
        Bad input for one attribute (a missing column, missing values, too many groups): the
        message is prefixed with the attribute. A protected column the target takes as input is
        fine; a derived intersection column already in the data is not.
    """
    frame = as_frame(data)
    policies = policy.attribute_policies()
    aux_models = dict(aux_models or {})
    unknown = sorted(set(aux_models) - set(policies))
    if unknown:
        raise InputError(f"auxiliary models given for {unknown}, which the policy does not check "
                         f"(attributes: {list(policies)})")
    derived = add_intersections(frame, policy)
    feature_spec = shared_feature_spec(frame, policy, feature_spec)
    components = {INTERSECTION_SEPARATOR.join(c): tuple(c) for c in policy.intersections}
    sections, notes = [], []
    for name, one in policies.items():
        try:
            result = check_one_attribute(target_model, derived, policy=one, feature_spec=feature_spec,
                               aux_model=aux_models.get(name), progress=progress, model_info=model_info)
        except InputError as exc:
            if len(policies) == 1:
                raise
            raise InputError(f"protected attribute '{name}': {exc}") from exc
        cells = intersection_cells(frame, components[name], policy) if name in components else []
        sections.append(AttributeSection(name, components.get(name, ()), result, cells))
        note = cells_note(name, cells, policy.decision.min_group_rows)
        if note:
            notes.append(note)
    outcome = combine([(s.attribute, s.check) for s in sections], notes=notes)
    return AttributesResult(outcome.decision, outcome.reasons, outcome.rules, sections)


def shared_feature_spec(frame: pd.DataFrame, policy: Policy, feature_spec: FeatureSpec | None) -> FeatureSpec | None:
    """The feature spec every attribute's check feeds the target: the same inputs for all of them.

    The given spec; else, for a policy written with ``[[attributes]]``, a passthrough spec of the
    numeric columns less **every** declared attribute and the label; else (``protected = "..."``)
    None, so that :func:`~faux_checks.gate.rows.prepare_audit` builds its own passthrough (the same
    columns) with its guard against a label-like input, as it always did.
    """
    if feature_spec is not None or policy.protected is not None:
        return feature_spec
    declared = [a.column for a in policy.attributes]
    return FeatureSpec.passthrough(frame, exclude=declared + ([policy.label] if policy.label else []))
