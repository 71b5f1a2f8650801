"""A gate over N ≥ 1 protected attributes: one section per attribute, one decision over them all.

:func:`combine` is the one place that turns per-attribute results into the gate's decision; the
in-memory check (:func:`faux_checks.gate.attributes.check_attributes`), the streamed and sharded
runs (:func:`faux_checks.gate.stream.outcome.summarize`), the Great Expectations suite outcome
(``faux_checks_gx.suite``) and the drift audit (:func:`faux_checks.audit.decision.decide_audit`)
call it. The rule:

- every attribute's rule rows, prefixed with the attribute when more than one attribute is
  checked (rule ``race/max_flagged_fraction``, detail ``race: ...``; :func:`prefixed_rules`), and
  the rows no attribute owns (an audit's ``min_rows``, a suite's raised expectation; never
  prefixed) feed **one** :func:`~faux_checks.gate.decision.decide`;
- so the gate is ``failed`` when any attribute's rule is ``exceeded`` (a measured violation on one
  attribute blocks the deployment even when another could not be decided), else ``undecided``
  when any rule is not ``ok``, else ``passed``: the worst outcome in the order
  failed > undecided > passed, as within one attribute; exit codes 0, 1, 2;
- one attribute given as its own decided result (and nothing else) is the gate's outcome as it
  stands: its decision, its reasons (notes included) and its rules, unprefixed.

The shape each section takes in a report, ``--json`` or flow result is :func:`section_dict`; the
name an attribute takes in MLflow tags, metrics and file names is :func:`attribute_key`; where its
scores go is :func:`attribute_paths`. Every output takes this one shape, whether the policy declares
one attribute (``protected = "..."`` or one ``[[attributes]]`` entry) or several.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, Sequence, Union

from .._validation import fmt_count
from ..errors import InputError
from ..provenance import jsonable
from .decision import EXIT_CODES, Decision, Outcome, decide, exit_code_for
from .policy_schema import INTERSECTION_SEPARATOR, Policy

__all__ = ["Part", "attribute_key", "attribute_paths", "cells_note", "combine", "prefixed_rules", "section_dict"]

#: One piece of a gate: ``(attribute, result or rule rows)``; attribute None for rows no attribute owns.
Part = tuple[Union[str, None], Union[Outcome, Sequence[Mapping]]]


def prefixed_rules(attribute: str, rules: Sequence[Mapping]) -> list[dict]:
    """An attribute's rule rows for the combined decision: ``rule`` -> ``attribute/rule``, ``detail`` -> ``attribute: detail``.

    Each row also gets ``attribute``; status, observed and limit are unchanged.
    """
    return [{**r, "rule": f"{attribute}/{r.get('rule')}", "detail": f"{attribute}: {r.get('detail')}",
             "attribute": attribute} for r in rules]


def combine(parts: Sequence[Part], *, notes: Sequence[str] = ()) -> Decision:
    """One decision from the per-attribute results of a gate over N ≥ 1 protected attributes (module docstring).

    Parameters
    ----------
    parts : sequence of (attribute, result or rows)
        In the order a reader should see the rules. ``attribute`` names the protected attribute
        (None: rows no attribute owns, never prefixed); the second item is a decided result
        (``decision``, ``reasons``, ``rules``: a check, a streamed summary) or a list of
        :func:`~faux_checks.gate.decision.rule_row` rows. Several parts may name one attribute.
    notes : sequence of str
        Lines appended to the reasons (an intersection's small cells).

    Returns
    -------
    Decision
        One part naming one attribute, given as a decided result: that result's decision, reasons
        (then ``notes``) and rules. Otherwise :func:`~faux_checks.gate.decision.decide` over every
        part's rows, each attribute's prefixed (:func:`prefixed_rules`) when more than one
        attribute is named, reasons then ``notes``. No part at all: ``undecided`` (nothing checked).
    """
    names = {name for name, _ in parts if name is not None}
    if len(parts) == 1 and parts[0][0] is not None and isinstance(parts[0][1], Outcome):
        only = parts[0][1]
        return Decision(only.decision, [*only.reasons, *notes], list(only.rules))
    several = len(names) > 1
    rows: list[Mapping] = []
    for name, part in parts:
        own = list(part.rules) if isinstance(part, Outcome) else list(part)
        rows += prefixed_rules(name, own) if several and name is not None else own
    outcome = decide(rows)
    return Decision(outcome.decision, [*outcome.reasons, *notes], list(outcome.rules))


def attribute_key(attribute: str) -> str:
    """The attribute's name as MLflow tag, metric and artifact paths allow it: ``sex×race`` -> ``sex_x_race``.

    Every character other than letters, digits, ``_``, ``-`` and ``.`` becomes ``_``.
    """
    name = attribute.replace(INTERSECTION_SEPARATOR, "_x_")
    return re.sub(r"[^\w.\-]", "_", name, flags=re.ASCII) or "_"


def section_dict(attribute: str, components: Sequence[str], check: dict | None, cells: Sequence[dict] = ()) -> dict:
    """One attribute's section of a report, ``--json`` or flow result (one shape everywhere).

    Parameters
    ----------
    attribute : str
    components : sequence of str
        An intersection's columns (empty otherwise).
    check : dict or None
        ``CheckResult.to_dict()`` (or a streamed summary's); None when the attribute's check could
        not run (``undecided``).
    cells : sequence of dict
        :func:`~faux_checks.gate.attributes.intersection_cells` (intersections only).

    Returns
    -------
    dict
        ``attribute``, ``key`` (:func:`attribute_key`), ``kind``, ``components``, ``decision``,
        ``exit_code``, ``reasons``, ``flagged_fraction``, ``interval``, ``n_individuals``,
        ``aux_quality``, ``aux_quality_metric``, ``cells``, ``check``.
    """
    c = check or {}
    decision = c["decision"] if c.get("decision") in EXIT_CODES else "undecided"
    return jsonable({
        "attribute": attribute, "key": attribute_key(attribute),
        "kind": (c.get("provenance") or {}).get("protected_kind"), "components": list(components),
        "decision": decision, "exit_code": exit_code_for(decision),
        "reasons": list(c.get("reasons") or ["the check of this attribute could not run"]),
        "flagged_fraction": c.get("flagged_fraction"), "interval": c.get("interval"),
        "n_individuals": c.get("n_individuals"), "aux_quality": c.get("aux_quality"),
        "aux_quality_metric": c.get("aux_quality_metric"), "cells": list(cells), "check": check,
    })


def cells_note(attribute: str, cells: Sequence[Mapping], minimum: int) -> str | None:
    """The reason line naming an intersection's cells under ``min_group_rows`` (None when there is none)."""
    small = [c for c in cells if c["below_min_group_rows"]]
    if not small:
        return None
    shown = ", ".join(f"{c['cell']} {fmt_count(c['rows'])}" for c in small[:12])
    more = f" and {len(small) - 12} more" if len(small) > 12 else ""
    return (f"{attribute}: {len(small)} of {len(cells)} cells have fewer than min_group_rows {minimum} rows "
            f"({shown}{more}); each is its own group, never merged into another")


def attribute_paths(out_path: str | Path, policy: Policy) -> dict[str, Path]:
    """Each attribute's scores file: ``out_path`` itself for a gate over one attribute, else ``<stem>.<key><suffix>``.

    Several attributes: ``scores.parquet`` -> ``scores.sex.parquet``, ``scores.sex_x_race.parquet``
    (:func:`attribute_key`), in :attr:`~faux_checks.gate.policy.Policy.attribute_names` order; the names the
    in-memory ``check --scores-out``, ``score-large`` and the sharded flow write.

    Raises
    ------
    InputError
        A path exists already (nothing is overwritten; every such path is named).
    """
    base, names = Path(out_path), policy.attribute_names
    paths = ({n: base.with_name(f"{base.stem}.{attribute_key(n)}{base.suffix}") for n in names}
             if len(names) > 1 else {names[0]: base})
    taken = [str(p) for p in paths.values() if p.exists()]
    if taken:
        raise InputError(f"{', '.join(taken)} {'exists' if len(paths) == 1 else 'exist'} already; choose another "
                         "output path (nothing is overwritten)")
    return paths

