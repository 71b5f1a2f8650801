"""Prefect's temporary API server started within a named bound: its start-up timeout follows ``--deadline``.

A flow command without ``PREFECT_API_URL`` runs on Prefect's temporary server (``SubprocessASGIServer``), which
Prefect starts at the first client call and waits for up to ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``
(Prefect's default 20 s). On a loaded machine the start takes longer, and Prefect's RuntimeError ("Timed out while
attempting to connect to ephemeral Prefect API server") names neither the setting nor the alternative.

Here the command starts the server itself, in the main thread, before its flow (:func:`start_temporary_server`):

- the start-up timeout is :func:`startup_timeout`: the setting when the user set it, else the command's deadline
  (``--deadline`` or the policy's ``[operations] deadline_s``), else :data:`MIN_STARTUP_S`;
- a start that fails or runs out of time raises :class:`PrefectStartError` (the CLI: exit 2, one line naming
  the setting, its value and where it came from, and ``PREFECT_API_URL`` of a running server as the alternative);
- a deadline reached during the start (SIGALRM, :class:`faux_checks_app.lifecycle.Stop`) says the same.

Notes
-----
Our reading of Prefect 3.9 ``prefect/server/api/server.py``: ``SubprocessASGIServer.start(timeout=None)`` waits
``timeout or PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()`` seconds, counted as 0.1 s per health probe
(the probes' own time is not counted, so on a loaded machine the wall time exceeds it: the deadline's alarm is
the wall-clock bound), and raises ``RuntimeError`` when the server never answered. The setting is read from the
settings Prefect loaded at import, so a value given here goes to ``start(timeout=...)`` rather than the environment.
"""

from __future__ import annotations

import math
import re
import threading
from typing import Callable

from faux_checks.errors import FauxChecksError

__all__ = ["MIN_STARTUP_S", "STARTUP_SETTING", "BackgroundStart", "PrefectStartError", "expiry_message",
           "start_temporary_server", "startup_timeout"]

#: Prefect's setting for how long its temporary server may take to start (seconds).
STARTUP_SETTING = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"
#: The start-up timeout of a command without a deadline (the demo, the audit): Prefect's own 20 s and 90 s both
#: expire on a loaded 2-core machine.
MIN_STARTUP_S = 300


class PrefectStartError(FauxChecksError):
    """Prefect's temporary server did not start within its start-up timeout (the CLI: exit 2, one line)."""


def startup_timeout(deadline_s: float | None = None) -> tuple[int, str]:
    """The temporary server's start-up timeout in seconds, and where it comes from.

    Parameters
    ----------
    deadline_s : float, optional
        The command's deadline in seconds (``--deadline``, else the policy's ``[operations] deadline_s``);
        None for a command without one.

    Returns
    -------
    (seconds, source) : (int, str)
        ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` when the user set it (a whole number of seconds,
        at least 1; source ``"set in the environment"``); else the deadline rounded up (``"from the deadline"``):
        the server may take as long as the command may run, and the deadline's alarm stops it at the same time;
        else :data:`MIN_STARTUP_S` (``"faux-checks' default for a command without a deadline"``).

    Raises
    ------
    PrefectStartError
        The setting is not a positive whole number (its value named).
    """
    from faux_checks.settings import user_value

    own = user_value(STARTUP_SETTING)
    if own is not None:
        try:
            seconds = int(float(own))
        except ValueError:
            seconds = 0
        if seconds < 1:
            raise PrefectStartError(f"{STARTUP_SETTING}={own!r} is not a positive number of seconds; set it to one "
                                    "(e.g. 300) or unset it to follow --deadline")
        return seconds, "set in the environment"
    if deadline_s is not None and math.isfinite(deadline_s) and deadline_s > 0:
        return max(1, math.ceil(deadline_s)), "from the deadline"
    return MIN_STARTUP_S, "faux-checks' default for a command without a deadline"


def expiry_message(seconds: int, source: str, cause: str) -> str:
    """The one line of a temporary server that did not start: the cause, the setting, the two fixes.

    ``cause``: Prefect's error (its first sentence is kept, whitespace collapsed) or the deadline reached.
    """
    first = re.split(r"(?<=\.)\s", " ".join(str(cause).split()), maxsplit=1)[0][:200]
    return (f"Prefect's temporary API server did not start within {seconds} s ({STARTUP_SETTING}={seconds}, "
            f"{source}): {first}; no flow ran. Fix: raise {STARTUP_SETTING} (or --deadline), or set PREFECT_API_URL "
            "to the API of a running Prefect server (`prefect server start`, then "
            "PREFECT_API_URL=http://127.0.0.1:4200/api)")


def start_temporary_server(deadline_s: float | None = None) -> bool:
    """Start Prefect's temporary server now, in this thread, within :func:`startup_timeout`; False when none is used.

    Call after :func:`faux_checks_app.lifecycle.guard_temporary_server` (its pid file is written) and before the
    flow. The server object is Prefect's process-wide one, so the flow's client finds it running. A server that
    already runs (an earlier command of this process) is left as it is.

    Raises
    ------
    PrefectStartError
        The server did not answer within the timeout, or did not start (Prefect's RuntimeError); one line
        (:func:`expiry_message`).
    faux_checks_app.lifecycle.Stop
        The command's deadline was reached during the start: its message names the setting and the fix too.
    """
    from faux_checks.gate.decision import exit_code_for

    from .lifecycle import Stop, uses_temporary_server

    if not uses_temporary_server():
        return False
    seconds, source = startup_timeout(deadline_s)
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    if server.running:
        return True
    try:
        server.start(timeout=seconds)
    except RuntimeError as exc:
        _forget_failed_start(server)
        raise PrefectStartError(expiry_message(seconds, source, str(exc))) from None
    except Stop as stop:   # a deadline (exit 2) is said with the setting; a signal is said as it is
        _forget_failed_start(server)
        if stop.code != exit_code_for("undecided"):
            raise
        raise Stop(stop.code, expiry_message(seconds, source, stop.message)) from None
    return True


def _forget_failed_start(server) -> None:
    """A server process that never answered is stopped, so no later call finds it 'running' (best effort)."""
    try:
        server.stop()
    except Exception:  # noqa: BLE001 - the error being raised is what the user needs
        pass
    server.running = False
    server.server_process = None


class BackgroundStart:
    """Prefect's temporary server started in a daemon thread while the caller's thread does other work.

    The thread runs :func:`faux_checks_app.lifecycle.guard_temporary_server` (orphans of killed runs stopped, a pid
    file for the server this process starts) and :func:`start_temporary_server` without a deadline
    (:data:`MIN_STARTUP_S`, or the user's ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``). The server is a
    child process, so on two cores its start-up runs beside the caller's work (``faux-checks demo``: the training).
    Call :meth:`wait` before any flow runs: Prefect marks its server running before it answers, so a flow started
    earlier would talk to a server that is not up yet.

    Parameters
    ----------
    say : callable
        Prints what the orphan cleanup did (stderr in the CLI).
    """

    def __init__(self, say: Callable[[str], None] = print):
        self._say = say
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="faux-checks-prefect-start", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from .lifecycle import guard_temporary_server

        try:
            guard_temporary_server(say=self._say)
            start_temporary_server()
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread by wait()
            self._error = exc

    def wait(self) -> None:
        """Block until the start ended; raise what it raised.

        Raises
        ------
        PrefectStartError
            The server did not answer within its start-up timeout, or did not start (one line).
        Exception
            Anything else the start raised (the orphan cleanup's or Prefect's errors), as it was raised.
        """
        self._thread.join()
        if self._error is not None:
            raise self._error
