"""Process lifecycle of a ``faux-checks`` command: signals, the deadline, Prefect's temporary server, a bounded exit.

What lives here:

- :class:`Stop`, raised in the main thread by SIGTERM / SIGINT (:func:`on_signal`) or by a deadline
  (:func:`on_deadline`, :func:`time_limit`); :func:`faux_checks_app.cli.main` turns it into the exit code.
- The temporary Prefect API server (Prefect's ``SubprocessASGIServer``, started lazily by Prefect's
  client when no ``PREFECT_API_URL`` is set): :func:`guard_temporary_server` writes a pid file under
  ``PREFECT_HOME`` for each server process this command starts (removed when it stops cleanly), and
  first stops an orphan that a killed (SIGKILL) earlier command left running.
- :func:`flush_prefect`: Prefect's background services (events and API logs) flushed within a time
  bound, their unsent items dropped, so no exit-time flush retries against a dead API (an unbounded
  flush retries 7 s per queued event: 71-75 s measured for a SIGTERM with the temporary server).
- :func:`started_services` / :func:`stop_started_services`: what the command started, stopped on a
  :class:`Stop` within a few seconds; :func:`exit_now` then ends the process without module teardown.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from faux_checks.gate.decision import exit_code_for

__all__ = ["Stop", "on_signal", "on_deadline", "time_limit", "started_services", "stop_started_services", "flush_prefect", "exit_now", "finish_now", "record_prefect_sigterm",
           "guard_temporary_server", "reap_orphaned_servers", "uses_temporary_server", "SERVER_MARK", "PID_FOLDER"]

#: Folder under ``PREFECT_HOME`` holding one ``<pid>.json`` per temporary server a command started.
PID_FOLDER = "faux-checks-temporary-servers"
#: What the command line of Prefect's temporary server contains (``uvicorn --factory ...``): a recycled
#: pid running anything else is never stopped.
SERVER_MARK = "prefect.server.api.server:create_app"
#: Seconds the exit flush of Prefect's events and logs may take on a :class:`Stop` (normal exit: ``flush_prefect``'s default).
STOP_FLUSH_S = 2.0
#: Seconds left to Prefect's services once the temporary server is stopped (their API is gone).
AFTER_STOP_FLUSH_S = 0.3
#: Seconds a stopped process (server, Dask worker) gets after SIGTERM before SIGKILL.
TERMINATE_WAIT_S = 3.0


class Stop(BaseException):
    """Raised in the main thread by SIGTERM / SIGINT or by the gate's deadline.

    A ``BaseException``: the flow's fail-closed wrappers (``except Exception``) do not turn it into a
    recorded ``undecided``; it unwinds every ``finally`` (leases released) and
    :func:`faux_checks_app.cli.main` stops the temporary Prefect server and any Dask cluster this
    process started (:func:`stop_started_services`), then exits with ``code`` (128 + the signal, or 2).
    """

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


#: Every :class:`Stop` a handler raised in this command: a library that catches the exception where it lands (pydantic's
#: serializer re-raises it as its own error) cannot make a stopped command read as an internal error.
RAISED: list[Stop] = []


def raised_stop() -> "Stop | None":
    """The last :class:`Stop` a handler raised since :func:`forget_stops` (None: no signal or deadline)."""
    return RAISED[-1] if RAISED else None


def forget_stops() -> None:
    """Start a command with no :class:`Stop` raised (:func:`raised_stop`)."""
    RAISED.clear()


def _raise(stop: Stop):
    RAISED.append(stop)
    raise stop


def record_prefect_sigterm() -> None:
    """Prefect's SIGTERM handler records a :class:`Stop` (:func:`raised_stop`) before it raises.

    While a flow runs, Prefect replaces :func:`on_signal` with its own SIGTERM handler
    (``prefect.utilities.engine._prefect_sigterm_handler``), which raises ``TerminationSignal`` where the main
    thread is; Prefect hands the signal back to :func:`on_signal` only when that exception reaches the flow's edge.
    Raised inside an event-loop callback it is logged and dropped (``asyncio.Handle._run`` catches every
    ``BaseException``), and the flow would go on to a normal end. Recorded here, the command ends with 128 + the
    signal however the exception travelled (:func:`faux_checks_app.cli.main`). Idempotent; Prefect's handler is
    looked up by this module attribute at each flow's start, so the wrapper is what the flow installs.
    """
    from prefect.utilities import engine

    original = engine._prefect_sigterm_handler
    if getattr(original, "records_stop", False):
        return

    def handler(sig_num: int, *args: object):
        RAISED.append(Stop(128 + sig_num, f"{signal.Signals(sig_num).name} received"))
        original(sig_num, *args)

    handler.records_stop = True  # type: ignore[attr-defined]
    engine._prefect_sigterm_handler = handler  # type: ignore[assignment]


def on_signal(signum, frame):
    """SIGTERM / SIGINT handler: raise :class:`Stop` with exit code 128 + ``signum`` (143 for SIGTERM, 130 for SIGINT)."""
    _raise(Stop(128 + signum, f"{signal.Signals(signum).name} received"))


def on_deadline(seconds: float, what: str = "gate"):
    """A SIGALRM handler raising :class:`Stop` (exit 2) that names the deadline of ``what`` in seconds.

    While a gate writes a version's decision (:data:`faux_checks_flows.gate_deadline.WINDOW`), the first alarm is
    held back: the record ends whole and the gate delivers the deadline after it, or this handler stops the
    command :data:`~faux_checks_flows.gate_deadline.RECORD_GRACE_S` later, naming the version being recorded.
    """
    def handler(signum, frame):
        window = getattr(sys.modules.get("faux_checks_flows.gate_deadline"), "WINDOW", None)
        if window is not None and window.hold():
            signal.setitimer(signal.ITIMER_REAL, sys.modules["faux_checks_flows.gate_deadline"].RECORD_GRACE_S)
            return
        late = (f"; v{window.recording}'s decision was still being written and did not end within "
                f"{sys.modules['faux_checks_flows.gate_deadline'].RECORD_GRACE_S:g} s more"
                if window is not None and window.recording is not None else "")
        _raise(Stop(exit_code_for("undecided"), f"the {what}'s deadline of {seconds:g} s was reached{late}"))
    return handler


@contextlib.contextmanager
def time_limit(seconds: float, what: str):
    """Raise :class:`Stop` (exit 2) in the main thread after ``seconds`` (SIGALRM); a no-op off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGALRM, on_deadline(seconds, what))
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ------------------------------------------------------------------------------------------------ Prefect's exit flush
def _services() -> list:
    """Prefect's queue services alive in this process (events worker, API log worker, ...); [] before Prefect loads."""
    module = sys.modules.get("prefect._internal.concurrency.services")
    if module is None:
        return []
    found = list(getattr(module, "_active_services", ()) or ())
    found += list(getattr(module._QueueServiceBase, "_instances", {}).values())
    unique = {id(s): s for s in found}
    return [s for s in unique.values() if getattr(s, "_started", False) and getattr(s, "_done_event", None) is not None
            and not s._done_event.is_set()]


def flush_prefect(timeout_s: float = 5.0) -> int:
    """Flush Prefect's background services (events, API logs) within ``timeout_s``; drop what is left.

    Prefect drains these services at interpreter exit with no time bound, each item retried against
    the API; with the API gone (a killed server, or the temporary server already stopped) that took
    ~7 s per queued event. Here each service is drained for at most ``timeout_s`` seconds, then its
    asyncio task is cancelled, so the exit-time drain finds nothing to do.

    Parameters
    ----------
    timeout_s : float
        Seconds to wait for the services together.

    Returns
    -------
    int
        Items not sent (events or log lines dropped); 0 when everything was flushed or Prefect never loaded.

    Notes
    -----
    Our reading of Prefect 3.9 ``prefect/_internal/concurrency/services.py`` (``_QueueServiceBase``:
    ``_drain``, ``_task``, ``_done_event``, ``threading._register_atexit(self._at_exit)``). Private
    attributes: a Prefect release that renames them makes this a no-op (Prefect's own flush remains).
    """
    import concurrent.futures

    services = _services()
    if not services:
        return 0
    tasks = [(s, getattr(s, "_task", None), getattr(s, "_loop", None)) for s in services]
    futures = {}
    for service in services:
        try:
            futures[service._drain()] = service
        except Exception:  # noqa: BLE001 - best effort on the way out
            continue
    _, pending = concurrent.futures.wait(list(futures), timeout=max(0.0, timeout_s))
    dropped = 0
    stuck = {id(futures[f]) for f in pending}
    for service, task, loop in tasks:
        if id(service) not in stuck:
            continue
        try:
            dropped += max(0, service._queue.qsize() - 1)    # the stop marker is not an item
        except Exception:  # noqa: BLE001
            pass
        if task is not None and loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop stopped meanwhile
                pass
    if pending:
        concurrent.futures.wait(list(pending), timeout=1.0)   # the cancelled tasks set their done events
        dropped = max(dropped, len(pending))
    return dropped


def exit_now(code: int) -> None:
    """End the process with ``code`` after a :class:`Stop`, skipping interpreter finalization.

    Called once :func:`stop_started_services` has stopped the server and the children, every
    ``finally`` has run (leases released) and Prefect's services were flushed within their bound.
    What is skipped is module teardown: measured 1-8 s on a loaded 2-core machine for torch, Great
    Expectations and MLflow (``import`` then exit: 2-3 s each after the last ``atexit`` handler), which
    put a SIGTERM past a 10 s grace period. stdout and stderr are flushed first.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed pipe
            pass
    os._exit(code)


def finish_now(code: int) -> None:
    """End the process with ``code`` after a command ended normally, as the interpreter would, less its teardown.

    What interpreter exit does first is done here, in its order: non-daemon threads joined and the threads' exit
    callbacks run (``threading._shutdown``: Prefect's services drained, already bounded by :func:`flush_prefect`),
    then every ``atexit`` handler (Prefect's temporary server stopped and its pid file removed, temporary folders
    removed, logging flushed). What is skipped is the teardown of modules and objects that follows
    (:func:`exit_now`): 9 s on a loaded 2-core machine once torch, MLflow, Prefect and Great Expectations are
    imported, 0.2 s with it skipped.

    Notes
    -----
    ``threading._shutdown`` and ``atexit._run_exitfuncs`` are CPython's own steps of ``Py_FinalizeEx`` (3.11),
    private names: a Python without them gets the plain exit (``sys.exit(code)``).
    """
    import atexit

    shutdown, run_exitfuncs = getattr(threading, "_shutdown", None), getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or run_exitfuncs is None or threading.current_thread() is not threading.main_thread():
        sys.exit(code)   # pragma: no cover - another interpreter
    shutdown()
    run_exitfuncs()
    exit_now(code)


# ------------------------------------------------------------------------------------------------ stopping what we started
def started_services() -> tuple[set, set]:
    """Prefect temporary servers and child processes that exist now (ids), so that only later ones are stopped."""
    server = sys.modules.get("prefect.server.api.server")
    servers = {id(i) for i in getattr(getattr(server, "SubprocessASGIServer", None), "_instances", {}).values()}
    try:
        import psutil

        children = {c.pid for c in psutil.Process().children(recursive=True)}
    except Exception:  # noqa: BLE001 - psutil comes with distributed  # pragma: no cover
        children = set()
    return servers, children


def stop_started_services(before: tuple[set, set], say: Callable[[str], None] = print) -> None:
    """Stop what this command started, within ~``STOP_FLUSH_S + TERMINATE_WAIT_S + 1`` s: Prefect's
    events/logs flushed while its temporary server still answers (:func:`flush_prefect`), then that
    server and every child process left (Dask) terminated together, killed after ``TERMINATE_WAIT_S``.

    Prefect stops its server at interpreter exit (``atexit``), which a signal's default action
    skips; stopping it here makes the exit clean. Called on :class:`Stop`; what existed before the
    command (``before``, from :func:`started_services`) is left alone. ``say`` prints a problem (stderr).
    """
    old_servers, old_children = before
    dropped = flush_prefect(STOP_FLUSH_S)
    if dropped:
        say(f"faux-checks: {dropped} Prefect event(s)/log line(s) not sent on the way out")
    module = sys.modules.get("prefect.server.api.server")
    servers = [i for i in getattr(getattr(module, "SubprocessASGIServer", None), "_instances", {}).values()
               if id(i) not in old_servers] if module is not None else []
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with distributed
        psutil = None
    if psutil is not None:
        children = [c for c in psutil.Process().children(recursive=True) if c.pid not in old_children]
        for child in children:
            try:
                child.terminate()
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(children, timeout=TERMINATE_WAIT_S)
        for child in alive:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=1.0)
    for instance in servers:   # its process is gone by now: Prefect's stop only reaps it and forgets it
        try:
            instance.stop()
        except Exception as exc:  # noqa: BLE001 - best effort on the way out  # pragma: no cover
            say(f"faux-checks: Prefect's temporary server did not stop cleanly: {exc}")
    flush_prefect(AFTER_STOP_FLUSH_S)   # what was logged meanwhile ("Stopping temporary server") has no API left


# ------------------------------------------------------------------------------------------------ pid files, orphans
def _prefect_home(home: str | os.PathLike | None) -> Path:
    if home is not None:
        return Path(home)
    try:
        from prefect.settings import get_current_settings

        return Path(get_current_settings().home)
    except Exception:  # noqa: BLE001 - Prefect's default
        return Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect")


def _pid_folder(home) -> Path:
    return _prefect_home(home) / PID_FOLDER


#: How long a pid file waits for a just-started server's command line (its child has not called exec yet).
CMDLINE_WAIT_S = 5.0


def _write_pid_file(home, pid: int, port: int | None) -> Path | None:
    """Record a temporary server this process started: its pid, start time and command line, and ours.

    The pid comes straight from ``Popen``: until the child has called ``exec`` its command line reads empty, so it
    is read again for up to :data:`CMDLINE_WAIT_S` seconds until it names the server.
    """
    try:
        import psutil

        server, owner = psutil.Process(pid), psutil.Process()
        cmdline, deadline = server.cmdline(), time.monotonic() + CMDLINE_WAIT_S
        while not cmdline and time.monotonic() < deadline:
            time.sleep(0.01)
            cmdline = server.cmdline()
        entry = {"server_pid": pid, "server_started": server.create_time(), "cmdline": cmdline,
                 "port": port, "owner_pid": owner.pid, "owner_started": owner.create_time(),
                 "written_at": time.time()}
        folder = _pid_folder(home)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{pid}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entry))
        os.replace(tmp, path)
        return path
    except Exception:  # noqa: BLE001 - the server runs without its pid file; only orphan cleanup is lost
        return None


def _same_process(psutil, pid, started) -> "object | None":
    """The live process ``pid`` if it started at ``started`` (within 1 s; a recycled pid started later), else None."""
    try:
        process = psutil.Process(int(pid))
        if started is not None and abs(process.create_time() - float(started)) > 1.0:
            return None
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError, TypeError):
        return None


def reap_orphaned_servers(home: str | os.PathLike | None = None, say: Callable[[str], None] = print) -> list[int]:
    """Stop the temporary Prefect servers that a killed faux-checks command left running; return their pids.

    Each ``PREFECT_HOME/faux-checks-temporary-servers/<pid>.json`` (:func:`guard_temporary_server`)
    names a server and the command that started it. A server is stopped (SIGTERM, then SIGKILL after
    ``TERMINATE_WAIT_S``) only when its owner is gone and the pid still runs Prefect's server (same
    start time, :data:`SERVER_MARK` in its command line): a live gate's server, or a recycled pid, is
    never touched. Files of servers that are gone are removed; each stop is said on ``say`` (stderr).

    Raises
    ------
    Nothing: a file that cannot be read is removed; a process that cannot be stopped is named.
    """
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with distributed
        return []
    folder = _pid_folder(home)
    stopped: list[int] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            entry = json.loads(path.read_text())
            pid = int(entry["server_pid"])
        except Exception:  # noqa: BLE001 - half-written or foreign: not ours to act on
            path.unlink(missing_ok=True)
            continue
        if _same_process(psutil, entry.get("owner_pid"), entry.get("owner_started")) is not None:
            continue   # its command still runs (another gate on the same PREFECT_HOME): its server is not an orphan
        server = _same_process(psutil, pid, entry.get("server_started"))
        if server is not None:
            try:
                is_ours = SERVER_MARK in " ".join(server.cmdline())
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                is_ours = False
            if is_ours:
                try:
                    server.terminate()
                    _, alive = psutil.wait_procs([server], timeout=TERMINATE_WAIT_S)
                    for process in alive:
                        process.kill()
                    stopped.append(pid)
                    say(f"faux-checks: stopped an orphaned temporary Prefect server (pid {pid}, port "
                        f"{entry.get('port')}) left by an earlier command (pid {entry.get('owner_pid')}) that was killed")
                except psutil.NoSuchProcess:
                    pass
                except psutil.AccessDenied as exc:
                    say(f"faux-checks: an orphaned temporary Prefect server (pid {pid}) could not be stopped: {exc}")
                    continue
        path.unlink(missing_ok=True)
    return stopped


def uses_temporary_server() -> bool:
    """True when Prefect's client would start its temporary server (no API URL set, ephemeral mode allowed)."""
    if os.environ.get("PREFECT_API_URL"):
        return False
    try:
        from prefect.settings import get_current_settings

        settings = get_current_settings()
        return not settings.api.url and bool(settings.server.ephemeral.enabled)
    except Exception:  # noqa: BLE001 - cannot tell: guarding costs nothing
        return True


def guard_temporary_server(home: str | os.PathLike | None = None, say: Callable[[str], None] = print) -> bool:
    """Before a flow command: stop orphans of killed runs and record the temporary server this process starts.

    Prefect starts its temporary server lazily (the first client call) as a ``uvicorn`` child; a
    SIGKILL of the command leaves that child running. Here (1) :func:`reap_orphaned_servers` stops
    such orphans under the same ``PREFECT_HOME``, and (2) Prefect's server object is wrapped so that
    each server process it starts gets a pid file at once (pid, start time, command line, owner)
    and a clean stop removes it. Returns False (and does nothing) when a Prefect API URL is set.

    Notes
    -----
    Our reading of Prefect 3.9 ``prefect/server/api/server.py``: ``SubprocessASGIServer()`` is one
    object per port (``None`` = the client's temporary server), ``start`` calls
    ``_run_uvicorn_command`` (also to retry on another port) and registers ``self.stop`` at exit.
    """
    if not uses_temporary_server():
        return False
    reap_orphaned_servers(home, say)
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    if getattr(server, "_faux_checks_guarded", False):
        return True
    run, stop = server._run_uvicorn_command, server.stop
    files: list[Path] = []

    def run_and_record():
        process = run()
        path = _write_pid_file(home, process.pid, server.port)
        if path is not None:
            files.append(path)
        return process

    def stop_and_forget():
        try:
            stop()
        finally:
            if server.server_process is None:   # stopped: its pid files go (a failed start's too)
                while files:
                    files.pop().unlink(missing_ok=True)

    server._run_uvicorn_command = run_and_record
    server.stop = stop_and_forget
    server._faux_checks_guarded = True
    return True
