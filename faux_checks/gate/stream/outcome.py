"""The outcome of a streamed or sharded check over N ≥ 1 protected attributes: one section each, one decision.

:func:`summarize` takes each attribute's :func:`~.summary.attribute_summary` and decides once over
them with :func:`faux_checks.gate.sections.combine`, as the in-memory gate does: one attribute's
own decision, reasons and rules as they stand; several attributes' rules prefixed
``attribute/rule`` and read by one :func:`~faux_checks.gate.decision.decide`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ...provenance import jsonable
from ..decision import Outcome
from ..policy_schema import INTERSECTION_SEPARATOR
from ..sections import attribute_key, cells_note, combine, section_dict
from .columns import StreamAttribute
from .plan import ScoringPlan
from .summary import StreamSummary, attribute_summary
from .score import StreamCounts
from .source import DataSource


__all__ = ["StreamResult", "StreamSection", "summarize"]


@dataclass(frozen=True)
class StreamSection:
    """One attribute's streamed check within a run over N ≥ 1 attributes.

    Attributes
    ----------
    attribute : str
    components : tuple of str
        An intersection's columns (empty otherwise).
    summary : StreamSummary
        Its own decision, counts, aux quality, rules and scores file.
    cells : list of dict
        Intersections only: ``cell``, ``rows`` (audited rows, every component known) and
        ``below_min_group_rows``, every combination of the components' groups, absent ones at 0 (as
        :func:`faux_checks.gate.attributes.intersection_cells`).
    """

    attribute: str
    components: tuple[str, ...]
    summary: StreamSummary
    cells: list[dict] = field(default_factory=list)

    @property
    def key(self) -> str:
        return attribute_key(self.attribute)

    def to_dict(self) -> dict:
        """JSON-ready: :func:`~faux_checks.gate.attributes.section_dict` with the summary as its check."""
        return section_dict(self.attribute, self.components, self.summary.to_dict(), self.cells)


@dataclass(frozen=True)
class StreamResult(Outcome):
    """Outcome of a streamed (:func:`~.run.score_stream`) or sharded check over every protected attribute of the policy.

    One result type for N ≥ 1 attributes; ``result["sex"]`` is an attribute's :class:`~.summary.StreamSummary`.

    Attributes
    ----------
    decision : {"passed", "failed", "undecided"}
        :func:`faux_checks.gate.sections.combine` over the sections (one attribute: its own
        decision, reasons and rules, unprefixed).
    reasons : list of str
        The deciding rules (prefixed ``attribute: `` when several), then notes on intersection cells.
    rules : list of dict
    sections : list of StreamSection
        One per attribute, in the policy's order.
    """

    decision: str
    reasons: list[str]
    rules: list[dict]
    sections: list[StreamSection]


    @property
    def deciding(self) -> StreamSection:
        """The first attribute whose own decision is the gate's (the one a one-line report shows)."""
        return next((s for s in self.sections if s.summary.decision == self.decision), self.sections[0])

    @property
    def out_paths(self) -> dict[str, str]:
        """Attribute name -> its scores file."""
        return {s.attribute: s.summary.out_path for s in self.sections}

    @property
    def out_path(self) -> str:
        """The scores files, comma-separated (what the CLI prints)."""
        return ", ".join(self.out_paths.values())

    @property
    def notes(self) -> list[str]:
        """Every section's notes, once each, in order."""
        return list(dict.fromkeys(n for s in self.sections for n in s.summary.notes))

    def __getitem__(self, attribute: str) -> StreamSummary:
        for s in self.sections:
            if s.attribute == attribute:
                return s.summary
        raise KeyError(f"no protected attribute {attribute!r}; checked: {[s.attribute for s in self.sections]}")

    def __repr__(self) -> str:
        """One attribute: its summary's line (the gate's decision and reasons are its own); several: each one's."""
        if len(self.sections) == 1:
            return repr(self.sections[0].summary)

        def pct(v):
            return "n/a" if v is None or not np.isfinite(v) else f"{v:.2%}"

        parts = ", ".join(f"{s.attribute} {s.summary.decision} {pct(s.summary.flagged_fraction)}" for s in self.sections)
        return f"{self.decision} over {len(self.sections)} protected attributes: {parts}"

    def to_dict(self) -> dict:
        """JSON-ready: ``decision``, ``exit_code``, ``reasons``, ``rules``, ``attributes`` (one dict per section)."""
        return jsonable({"decision": self.decision, "exit_code": self.exit_code, "reasons": list(self.reasons),
                         "rules": list(self.rules), "attributes": [s.to_dict() for s in self.sections]})


def _cells(attribute: StreamAttribute, plans: Mapping[str, ScoringPlan], counts: StreamCounts,
           minimum: int) -> list[dict]:
    if not attribute.components:
        return []
    rows = dict(zip(counts.groups, counts.n.tolist(), strict=False))
    groups = [plans[c].codec.groups if c in plans else () for c in attribute.components]
    out = []
    for combo in itertools.product(*groups):
        cell = INTERSECTION_SEPARATOR.join(combo)
        k = int(rows.get(cell, 0))
        out.append({"cell": cell, "rows": k, "below_min_group_rows": k < minimum})
    return out


def summarize(counts: Mapping[str, StreamCounts], plans: Mapping[str, ScoringPlan],
              attributes: Sequence[StreamAttribute], *, source: DataSource,
              out_paths: Mapping[str, str | Path], timings: dict | None = None,
              model_info: dict | None = None, extra_notes: Sequence[str] = ()) -> StreamResult:
    """Each attribute's :func:`~.summary.attribute_summary`, then one decision (:func:`faux_checks.gate.sections.combine`).

    Parameters
    ----------
    counts, plans : mapping
        Attribute name -> the merged :class:`~.score.StreamCounts` / its :class:`~.plan.ScoringPlan`.
    attributes : sequence of StreamAttribute
        In the policy's order (:func:`~.passes.stream_attributes`).
    out_paths : mapping
        Attribute name -> its scores output.
    timings, model_info, extra_notes
        As :func:`~.summary.attribute_summary`, the same for every attribute.

    Returns
    -------
    StreamResult
        One section per attribute; with several, the intersections' cell notes follow the reasons.

    Raises
    ------
    InputError
        The score pass and the sample pass read different row counts (the file changed during the run).
    """
    sections, notes = [], []
    for a in attributes:
        summary = attribute_summary(counts[a.name], plans[a.name], source=source, out_path=out_paths[a.name],
                            timings=timings, model_info=model_info, extra_notes=extra_notes)
        cells = _cells(a, plans, counts[a.name], a.policy.decision.min_group_rows)
        sections.append(StreamSection(a.name, a.components, summary, cells))
        note = cells_note(a.name, cells, a.policy.decision.min_group_rows)
        if note:
            notes.append(note)
    outcome = combine([(s.attribute, s.summary) for s in sections], notes=notes)
    return StreamResult(outcome.decision, outcome.reasons, outcome.rules, sections)
