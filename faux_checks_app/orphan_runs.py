"""Prefect flow runs left ``Running`` by a killed ``faux-checks`` command, marked ``Crashed`` on the next start.

A SIGTERM / SIGINT / deadline ends a flow through Prefect's engine, which records the run's end. A SIGKILL (or
the machine going down) does not: the run stays ``Running`` in Prefect for good. Each flow command here runs
its flow with :func:`track` (Prefect's ``on_running`` hook), which writes
``PREFECT_HOME/faux-checks-flow-runs/<flow run id>.json`` naming the run and this process, and removes it when
the flow returns (:func:`forget`). The next flow command, once its Prefect API answers, calls
:func:`mark_orphaned_flow_runs`: a file whose process is gone names a run that nobody will end, which is set
``Crashed`` (when still ``Pending`` / ``Running``) with a message naming the command that was killed; the file goes.
The same scheme finds orphaned temporary servers (:func:`faux_checks_app.lifecycle.reap_orphaned_servers`).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable

__all__ = ["RUN_FOLDER", "forget", "mark_orphaned_flow_runs", "track"]

#: Folder under ``PREFECT_HOME`` holding one ``<flow run id>.json`` per flow run a command is running.
RUN_FOLDER = "faux-checks-flow-runs"
#: The files this process wrote (removed by :func:`forget`).
_WRITTEN: list[Path] = []


def _folder(home: str | os.PathLike | None) -> Path:
    if home is not None:
        return Path(home) / RUN_FOLDER
    try:
        from prefect.settings import get_current_settings

        return Path(get_current_settings().home) / RUN_FOLDER
    except Exception:  # noqa: BLE001 - Prefect's default
        return Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect") / RUN_FOLDER


def track(flow, flow_run, state, home: str | os.PathLike | None = None) -> Path | None:
    """Prefect ``on_running`` hook: record that this process runs ``flow_run`` (its id, flow name, our pid and
    start time). Returns the file, or None when it could not be written (only the orphan marking is lost)."""
    try:
        import psutil

        entry = {"flow_run_id": str(flow_run.id), "flow_run_name": getattr(flow_run, "name", None),
                 "flow_name": getattr(flow, "name", None), "owner_pid": os.getpid(),
                 "owner_started": psutil.Process().create_time(), "written_at": time.time()}
        folder = _folder(home)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{entry['flow_run_id']}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entry))
        os.replace(tmp, path)
        _WRITTEN.append(path)
        return path
    except Exception:  # noqa: BLE001 - the flow runs without it
        return None


def forget() -> None:
    """Remove the files :func:`track` wrote in this process (its flows ended: Prefect recorded how)."""
    while _WRITTEN:
        _WRITTEN.pop().unlink(missing_ok=True)


def _owner_alive(entry: dict) -> bool:
    """True while the process that wrote ``entry`` runs (same pid and start time: a recycled pid is not it)."""
    import psutil

    try:
        process = psutil.Process(int(entry["owner_pid"]))
        started = entry.get("owner_started")
        if started is not None and abs(process.create_time() - float(started)) > 1.0:
            return False
        return process.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, KeyError, ValueError, TypeError):
        return False


def mark_orphaned_flow_runs(home: str | os.PathLike | None = None, client=None,
                            say: Callable[[str], None] = print) -> list[str]:
    """Set ``Crashed`` the flow runs that a killed faux-checks command left ``Pending`` / ``Running``; return their ids.

    ``client``: a synchronous Prefect client (``read_flow_run``, ``set_flow_run_state``); default one from
    ``prefect.get_client(sync_client=True)``. A file whose command still runs is left alone; a file that cannot be
    read is removed; a run that Prefect does not know, or that ended, only loses its file. Each marked run is
    said on ``say`` (stderr). Best effort: a Prefect error leaves the file for the next start and is said.
    """
    folder = _folder(home)
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    orphans = []
    for path in paths:
        try:
            entry = json.loads(path.read_text())
            entry["flow_run_id"] = str(entry["flow_run_id"])
        except Exception:  # noqa: BLE001 - half-written or foreign
            path.unlink(missing_ok=True)
            continue
        if not _owner_alive(entry):
            orphans.append((path, entry))
    if not orphans:
        return []
    if client is None:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as own:
            return _mark(orphans, own, say)
    return _mark(orphans, client, say)


def _mark(orphans: list[tuple[Path, dict]], client, say: Callable[[str], None]) -> list[str]:
    """Set each orphan's run ``Crashed`` when it is still pending or running; remove the files dealt with."""
    from uuid import UUID

    from prefect.states import Crashed

    marked = []
    for path, entry in orphans:
        run_id = entry["flow_run_id"]
        try:
            run = client.read_flow_run(UUID(run_id))
            state = getattr(run, "state", None)
            if state is not None and (state.is_running() or state.is_pending()):
                message = (f"the faux-checks command running it (pid {entry.get('owner_pid')}) was killed; marked "
                           "crashed by the next faux-checks command")
                client.set_flow_run_state(UUID(run_id), Crashed(message=message), force=True)
                marked.append(run_id)
                say(f"faux-checks: flow run '{entry.get('flow_run_name') or run_id}' of {entry.get('flow_name')} "
                    f"({run_id}) was left {state.type.value} by a command that was killed: marked Crashed")
        except Exception as exc:  # noqa: BLE001 - an unknown run loses its file; an API problem keeps it
            if type(exc).__name__ != "ObjectNotFound":
                say(f"faux-checks: flow run {run_id} left by a killed command could not be marked crashed: {exc}")
                continue
        path.unlink(missing_ok=True)
    return marked
