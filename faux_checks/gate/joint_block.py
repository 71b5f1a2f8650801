"""The joint test of the held columns as the gate reports it: feature indices named by their source columns."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..inputs.tabular import FeatureSpec

__all__ = ["held_block_summary", "release_text"]


def held_block_summary(tester, spec: FeatureSpec, protected: str) -> dict[str, Any] | None:
    """The tester's joint test of the held block (``joint_hold_``) with ``columns`` and ``released_columns`` named.

    Parameters
    ----------
    tester : FAuxTester
        After :meth:`~faux_checks.method.faux.FAuxTester.fit_reference` (``joint_hold_``, feature indices in the
        aux input space: the spec's features without the protected attribute's own columns).
    spec : FeatureSpec
    protected : str
        The protected column (its own columns are not aux inputs).

    Returns
    -------
    dict or None
        :func:`faux_checks.method.joint_hold.jointly_free_hold`'s summary (``steps`` left out) with ``columns``
        (source columns of the final held block), ``released_columns`` (one list per release) and
        ``partner_columns`` (per release, the held columns that carried c with it), ``joint_free_columns`` (free
        columns that carry c only with held ones, and those: pairs of lists); None when the
        tester has no joint test (another reading than swap, a reference fitted before).
    """
    block = getattr(tester, "joint_hold_", None)
    if block is None:
        return None
    columns = np.asarray(spec.source_columns, dtype=object)[spec.feature_to_column()[~spec.feature_mask(protected)]]

    def named(features) -> list[str]:
        return list(dict.fromkeys(str(columns[j]) for j in features))
    out = {k: v for k, v in block.items() if k != "steps"}
    out["columns"] = named(block.get("features", []))
    out["released_columns"] = [named(r) for r in block.get("released", [])]
    out["partner_columns"] = [named(step.get("partners", [])) for step in block.get("steps", []) if "released" in step]
    out["joint_free_columns"] = [[named(e["features"]), named(e["partners"])] for e in block.get("joint_free", [])]
    return out


def release_text(block) -> str:
    """What the report says of the released columns ('' when none): their names, their held partners, the move, and
    what the data do not identify.

    Parameters
    ----------
    block : Mapping
        :func:`held_block_summary`'s dict (``released_columns``, ``partner_columns``, ``joint_free_columns``).

    Returns
    -------
    str
        '; released from the hold as carrying it jointly: …' and '; free, carrying it only with held columns: …',
        each with, where the joint test named partners, a
        bracketed note on the rank-preserving move (:mod:`faux_checks.method.joint_move`) and the two things the data do
        not identify (docs/benchmark.md, "Joint-only proxies").
    """
    released = "; ".join(", ".join(map(str, r)) for r in block.get("released_columns") or ())
    partners = sorted({str(c) for p in block.get("partner_columns") or () for c in p})
    text = f"; released from the hold as carrying it jointly: {released}{_note(partners)}" if released else ""
    for free, held in block.get("joint_free_columns") or ():
        text += f"; free, carrying it only with held columns: {', '.join(map(str, free))}{_note(sorted(map(str, held)))}"
    return text


def _note(partners: list) -> str:
    if not partners:
        return ""
    return (f" [with {', '.join(partners)} held: it moves by its rank among people alike in those; which of them "
            "the protected attribute causes, and how their values pair between the groups, are not identified from "
            "the data, so the flagged fraction is the rank-preserving reading]")
