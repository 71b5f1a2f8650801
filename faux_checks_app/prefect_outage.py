"""``faux-checks gate`` when the Prefect API is lost mid-run: exit 2 naming what was decided.

When the Prefect server is killed mid-gate, the gate does not go on without Prefect (each call retrying until its
timeout: 60-70 s with Prefect's client defaults), record the next versions and end with "internal error, could not
decide" while MLflow holds the decisions: the flow checks the API between versions
(:func:`faux_checks_flows.common.prefect_unreachable`) and stops; the command reads the run's progress
(:data:`faux_checks_flows.gate.PROGRESS`) and says which versions were decided (their decisions stand) and
which were not (they stay new).
"""

from __future__ import annotations

import os
from typing import Callable

__all__ = ["api_url", "is_outage", "report_outage"]


def is_outage(exc: BaseException | None) -> bool:
    """True when the gate flow ended because the Prefect API did not answer (our stop, or Prefect's own call failing)."""
    from faux_checks_flows.common import PrefectUnreachableError, is_prefect_unreachable
    from faux_checks_flows.gate import PROGRESS

    if exc is None:
        return False
    return PROGRESS.prefect_error is not None or isinstance(exc, PrefectUnreachableError) or is_prefect_unreachable(exc)


def api_url() -> str:
    """`` at <the Prefect API URL>`` (the variable, else the temporary server's), or "" when none is known."""
    import sys

    url = os.environ.get("PREFECT_API_URL")
    module = sys.modules.get("prefect.server.api.server")
    if not url and module is not None:
        servers = list(getattr(module.SubprocessASGIServer, "_instances", {}).values())
        url = servers[0].api_url if servers and servers[0].port else None
    return f" at {url}" if url else ""


def report_outage(model_name: str, exc: BaseException, *, as_json: bool, say: Callable[[str], None],
                  error: Callable[[str], None]) -> int:
    """Print the outcome of a gate whose Prefect API went away; return exit code 2 (never 0: the run is incomplete).

    stdout: one line per version of the run (``--json``: one object each; a version not decided has
    decision ``undecided`` and no run); stderr: the error with the versions already decided (those
    decisions stand: recorded in MLflow, with their records) and Prefect's client settings.
    """
    from faux_checks.gate.decision import exit_code_for
    from faux_checks_flows.gate import PROGRESS

    from faux_checks.report._format import printable

    message = PROGRESS.describe().replace("Prefect API unreachable", f"Prefect API unreachable{api_url()}", 1)
    if PROGRESS.prefect_error is None:
        first = (str(exc).strip().splitlines() or [""])[0][:240]
        message += f"; Prefect's last call failed ({type(exc).__name__}: {printable(first)})"
    settings = ", ".join(f"{n}={os.environ.get(n, 'Prefect default')}"
                         for n in ("PREFECT_API_REQUEST_TIMEOUT", "PREFECT_CLIENT_MAX_RETRIES"))
    left = PROGRESS.not_decided()
    if as_json:
        from dataclasses import asdict

        from .output import emit_json, gate_error_object, gate_objects

        objects = gate_objects(model_name, [asdict(o) for o in PROGRESS.decided])
        for version in left:
            obj = gate_error_object(model_name, f"not gated: {message}")
            obj["model"]["version"] = version
            objects.append(obj)
        emit_json(objects)
    else:
        for o in PROGRESS.decided:
            say(f"{model_name} v{o.version}: {o.decision} (decided before the Prefect API was lost"
                f"{'; recorded' if o.run_id else '; not recorded'})")
        for version in left:
            say(f"{model_name} v{version}: not decided (the Prefect API was unreachable; it stays new)")
    error(f"faux-checks: could not decide: {message}. Prefect client: {settings} (policy [operations])")
    return exit_code_for("undecided")
