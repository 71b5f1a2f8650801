"""Where faux-checks keeps its embedded state (registry, reports), and environment defaults."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_home", "configure_environment"]


def default_home() -> Path:
    """``$FAUX_CHECKS_HOME`` or ``~/.faux-checks`` (created): sqlite registry, artifacts, reports."""
    home = Path(os.environ.get("FAUX_CHECKS_HOME", Path.home() / ".faux-checks")).expanduser()
    home.mkdir(parents=True, exist_ok=True)
    return home


def configure_environment() -> None:
    """Embedded defaults set before Prefect/MLflow are imported; values already set win.

    Telemetry off (``DO_NOT_TRACK``, ``PREFECT_SERVER_ANALYTICS_ENABLED``,
    ``MLFLOW_DISABLE_TELEMETRY``), Prefect's home under :func:`default_home` so nothing lands
    in ``~/.prefect``, and a 90 s ephemeral-server start timeout (docs/stack.md: 20 s can time out
    on a cold machine).
    """
    os.environ.setdefault("DO_NOT_TRACK", "true")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    os.environ.setdefault("PREFECT_HOME", str(default_home() / "prefect"))
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
