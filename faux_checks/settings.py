"""Where faux-checks keeps its embedded state (registry, reports), and environment defaults."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["EPHEMERAL_STARTUP_S", "configure_environment", "default_home", "user_value"]

#: Start-up timeout (seconds) of Prefect's temporary server that :func:`configure_environment` sets when the user set
#: none: Prefect's 20 s, and 90 s, expired on a loaded 2-core machine. Flow commands pass their own
#: (``faux_checks_app.prefect_start.startup_timeout``: the deadline).
EPHEMERAL_STARTUP_S = 300

#: The variables :func:`configure_environment` set in this process, with the value it gave.
_SET_HERE: dict[str, str] = {}


def default_home() -> Path:
    """``$FAUX_CHECKS_HOME`` or ``~/.faux-checks`` (created): sqlite registry, artifacts, reports."""
    home = Path(os.environ.get("FAUX_CHECKS_HOME", Path.home() / ".faux-checks")).expanduser()
    home.mkdir(parents=True, exist_ok=True)
    return home


def configure_environment() -> None:
    """Embedded defaults set before Prefect/MLflow are imported; values already set win.

    Telemetry off (``DO_NOT_TRACK``, ``PREFECT_SERVER_ANALYTICS_ENABLED``,
    ``MLFLOW_DISABLE_TELEMETRY``), Prefect's home under :func:`default_home` so nothing lands
    in ``~/.prefect``, and a start timeout of :data:`EPHEMERAL_STARTUP_S` for Prefect's temporary server
    (docs/stack.md: Prefect's 20 s, and 90 s, time out on a loaded machine). :func:`user_value` tells a value
    set here from one the user set.
    """
    os.environ.setdefault("DO_NOT_TRACK", "true")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    if "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS" not in os.environ:
        os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = _SET_HERE[
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = str(EPHEMERAL_STARTUP_S)
    os.environ.setdefault("PREFECT_HOME", str(default_home() / "prefect"))
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


def user_value(name: str) -> str | None:
    """The environment variable ``name`` as the user set it; None when unset or set by :func:`configure_environment`.

    A value that differs from the one :func:`configure_environment` gave counts as the user's.
    """
    value = os.environ.get(name)
    if value is None or _SET_HERE.get(name) == value:
        return None
    return value
