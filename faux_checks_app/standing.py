"""What stands in the registry when a flow command stops early (a signal, a deadline, a lost service).

Every early exit of ``faux-checks gate``, ``demo`` and ``audit`` names what the registry holds after it:
the versions this run recorded (their decisions stand, with the alias moved or not), the version whose
record was under way, and the versions not decided (they stay new and the next gate run gates them).
The gate's progress is :data:`faux_checks_flows.gate.PROGRESS` and its record window
:data:`faux_checks_flows.gate_deadline.WINDOW`; the audit's, :data:`faux_checks_flows.audit.AUDIT_PROGRESS`.
Only what this process did is read: no registry call on the way out.
"""

from __future__ import annotations

import sys

__all__ = ["audit_standing", "gate_standing", "stop_message"]


def gate_standing() -> str:
    """What the stopped gate left, one clause per version of the run, in its order:

    ``In the registry: v1 recorded failed (run 4f…): it stands; v2 recorded passed (run 9a…): it stands, alias
    'deployable' not moved (promotion pending); v3 not decided: nothing recorded, it stays new ...``.
    """
    progress = getattr(sys.modules.get("faux_checks_flows.gate"), "PROGRESS", None)
    window = getattr(sys.modules.get("faux_checks_flows.gate_deadline"), "WINDOW", None)
    if progress is None or not progress.todo:
        return "Nothing was recorded."
    recorded = dict(window.recorded) if window is not None else {}
    writing = window.recording if window is not None else None
    outcomes = {str(o.version): o for o in progress.decided}
    parts, left = [], []
    for version in progress.todo:
        if version in recorded:
            decision, run_id, alias = recorded[version]
            parts.append(f"v{version} recorded {decision} (run {run_id or '?'}): it stands" + (f", {alias}" if alias else ""))
        elif version == writing:
            parts.append(f"v{version}'s decision was being written when the command stopped: the registry may hold "
                         f"it (`faux-checks history {progress.model_name}` shows what stands)")
        elif version in outcomes:
            parts.append(f"v{version} {outcomes[version].decision} in this run, nothing recorded: it stays new")
        else:
            left.append(version)
    if left:
        one = len(left) == 1
        parts.append(f"{', '.join('v' + v for v in left)} not decided: nothing recorded, {'it stays' if one else 'they stay'}"
                     f" new and the next gate run gates {'it' if one else 'them'}")
    return "In the registry: " + "; ".join(parts) + "."


def audit_standing() -> str:
    """What the stopped audit left: its decision written or not; the version's earlier audit stands otherwise."""
    progress = getattr(sys.modules.get("faux_checks_flows.audit"), "AUDIT_PROGRESS", None)
    if progress is None or progress.get("version") is None:
        return "The audit stopped before it found the deployed version: nothing was recorded."
    where = f"v{progress['version']} of '{progress['model_name']}'"
    if progress.get("stage") == "recorded":
        return f"The audit of {where} was recorded ({progress.get('decision')}): it stands."
    if progress.get("stage") == "superseded":
        return (f"The audit of {where} ({progress.get('decision')}) is kept in its run only: the version holds an "
                "audit of newer data, which stands.")
    if progress.get("stage") == "recording":
        return (f"The audit of {where} was being recorded when the command stopped: its tags may be partly written "
                f"(`fairness_audit` is written last; `faux-checks history {progress['model_name']}` shows what stands).")
    return f"The audit of {where} was not recorded: the version keeps its earlier audit, if any."


def stop_message(command: str | None) -> str:
    """What a stopped ``command`` says after the cause: what stands in the registry (gate, demo, audit), or that
    a command that records nothing recorded nothing."""
    if command in ("gate", "demo"):
        return gate_standing()
    if command == "audit":
        return audit_standing()
    return "Nothing was recorded."
