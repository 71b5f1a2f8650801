"""The order of a version's drift audits: by the data they read and when they started, never by when they finish.

A scheduled audit that reads a batch refreshed in place (``/data/scoring/latest.parquet``) can finish after
a later run that read a newer copy of it; the version's ``fairness_audit`` tags must keep the newer result.
Each audit records ``data_at`` (the batch file's modification time when it was read) and ``started_at``
(:class:`~faux_checks.registry.records.AuditRecord`); :meth:`DecisionTrail.record_audit
<faux_checks.registry.trail.DecisionTrail.record_audit>` writes an audit only when :func:`is_older` says the
audit the version holds is not newer.
"""

from __future__ import annotations

import datetime as _dt

from .records import AuditRecord

__all__ = ["instant", "is_older"]


def instant(text: str | None) -> _dt.datetime | None:
    """An ISO 8601 time as an aware datetime (UTC when it names no zone); None when absent or not a time."""
    if not text:
        return None
    try:
        value = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=_dt.timezone.utc)


def is_older(audit: AuditRecord, standing: AuditRecord | None) -> bool:
    """True when ``standing`` (the audit a version holds) is of newer data than ``audit``, which must then not
    replace it: ``standing``'s batch was written later, or it read the same batch and started later.

    Compared on what both records hold: the data times when both have one and they differ, else the start
    times. A record without either (an audit written by a direct call, or before these tags existed) never
    counts as newer, so it is replaced; equal times are not older (the later write replaces the audit).
    """
    if standing is None or standing.decision is None:
        return False
    mine_data, theirs_data = instant(audit.data_at), instant(standing.data_at)
    if mine_data is not None and theirs_data is not None and mine_data != theirs_data:
        return theirs_data > mine_data
    mine_start, theirs_start = instant(audit.started_at), instant(standing.started_at)
    return mine_start is not None and theirs_start is not None and theirs_start > mine_start
