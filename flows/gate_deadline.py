"""The gate's deadline around what it writes: nothing starts recording or promoting after it, and a record that
started is finished, then reported as standing.

A deadline that arrives while a version's decision is being written (``faux-checks gate``: SIGALRM, handled by
:func:`faux_checks_app.lifecycle.on_deadline`) is held back until that write returns (at most
:data:`RECORD_GRACE_S` more): the decision is then whole in the registry, the version is not promoted (its
promotion stays ``pending``, so the next gate run re-gates it) and the deadline is delivered between versions,
with the version in the run's outcomes (:data:`faux_checks_flows.gate.PROGRESS`), so the command names it as
recorded. A record is started only with :data:`RECORD_RESERVE_S` left; a version reached with less is not recorded
(it stays new).
"""

from __future__ import annotations

import contextlib
import signal
import time
from dataclasses import dataclass, field

__all__ = ["RECORD_GRACE_S", "RECORD_RESERVE_S", "RecordWindow", "WINDOW"]

#: Seconds a record needs left before the deadline to start (the report, evidence pack and run are uploaded).
RECORD_RESERVE_S = 10.0
#: Seconds a record that started may run past the deadline before the deadline is delivered anyway.
RECORD_GRACE_S = 30.0


@dataclass
class RecordWindow:
    """When this process's gate run must end, and whether a version's decision is being written now.

    ``ends_at``: the deadline on :func:`time.monotonic` (None: no deadline); ``recording``: the version whose
    decision (record, then alias) is being written; ``deferred``: a deadline arrived during that write and waits
    for it to end; ``recorded``: what this run wrote (:meth:`note`), read by a command that stops early.
    """

    ends_at: float | None = None
    recording: str | None = None
    deferred: bool = False
    #: What this run wrote, per version: ``(decision, run id, what became of the alias or None)``.
    recorded: dict[str, tuple[str, str | None, str | None]] = field(default_factory=dict)

    def start(self, ends_at: float | None) -> None:
        """A new gate run ending at ``ends_at`` (monotonic seconds)."""
        self.ends_at, self.recording, self.deferred, self.recorded = ends_at, None, False, {}

    def note(self, version: str, decision: str, run_id: str | None, alias: str | None = None) -> None:
        """``version``'s decision is in the registry (run ``run_id``); ``alias``: what became of the alias."""
        self.recorded[str(version)] = (decision, run_id, alias)

    def left(self) -> float | None:
        """Seconds to the deadline (negative past it); None without one."""
        return None if self.ends_at is None else self.ends_at - time.monotonic()

    def passed(self) -> bool:
        """True once the deadline arrived (held back or not)."""
        left = self.left()
        return self.deferred or (left is not None and left <= 0)

    def why_not_record(self) -> str | None:
        """None when a record may start; else why not (the deadline passed, or less than the reserve is left)."""
        left = self.left()
        if self.deferred or (left is not None and left < RECORD_RESERVE_S):
            return ("the deadline was reached before the decision was recorded" if self.passed() else
                    f"{max(left or 0.0, 0.0):.0f} s were left before the deadline, under the {RECORD_RESERVE_S:g} s "
                    "a record needs")
        return None

    @contextlib.contextmanager
    def recording_of(self, version: str):
        """Mark ``version``'s decision as being written: a deadline arriving meanwhile waits for it to end."""
        self.recording = str(version)
        try:
            yield
        finally:
            self.recording = None

    def hold(self) -> bool:
        """Called by the deadline's handler: True (hold the deadline back, ``deferred``) while a decision is being
        written and this is the first hold; False when the handler must stop the command now."""
        if self.recording is None or self.deferred:
            return False
        self.deferred = True
        return True

    def deliver(self) -> None:
        """Between versions: a deadline held back during a record is delivered now (SIGALRM again, to the handler
        that held it back)."""
        if self.deferred and self.recording is None:
            signal.raise_signal(signal.SIGALRM)


#: The current gate run of this process.
WINDOW = RecordWindow()
