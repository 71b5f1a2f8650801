"""What every faux-checks flow shares: retries on I/O only, and names for Prefect artifacts.

Tasks that read data or talk to the registry retry twice, one second apart, but only for I/O
trouble (:func:`retry_io_only`): never for bad input (:class:`~faux_checks.errors.FauxChecksError`),
a decision, or a registry that did not answer (MLflow's client retried already). Tasks use no result cache (``NO_CACHE``): their parameters are paths and names,
and models or DataFrames never need hashing.
"""

from __future__ import annotations

from prefect.cache_policies import NO_CACHE

from faux_checks.errors import FauxChecksError

__all__ = ["IO_TASK", "TASK", "FlowBlocked", "PrefectUnreachableError", "failed_state", "is_prefect_unreachable", "prefect_unreachable", "retry_io_only", "run_logger", "slug"]


def run_logger():
    """Prefect's run logger (``get_run_logger()``) with its text escaped (:class:`faux_checks_flows.log_text.EscapingFilter`).

    Every flow and task of this package logs through it, so a model, column or group name holding
    terminal control codes or bidi characters reaches the terminal and the Prefect UI as visible
    escapes (``\\x1b[32m``), never as a redrawn line. The filter is attached
    once to the flow- and task-run loggers (prints of ``log_prints=True`` flows go through them too).

    Raises
    ------
    prefect.exceptions.MissingContextError
        Outside a flow or task run (as ``get_run_logger``).
    """
    import logging

    from prefect import get_run_logger

    from .log_text import RUN_LOGGERS, install

    for name in RUN_LOGGERS:
        install(logging.getLogger(name))
    return install(get_run_logger())


def retry_io_only(task, task_run, state) -> bool:
    """Retry a task only for I/O trouble, never for bad input or a decision.

    Never for an unreachable registry either (:func:`faux_checks.registry.operations.is_unreachable`):
    MLflow's client has already retried within the policy's ``[operations]`` budget, and Prefect's
    retries on top multiplied an outage (12.5 minutes).
    """
    from faux_checks.registry.operations import is_unreachable

    try:
        state.result()
    except FauxChecksError:
        return False
    except BaseException as exc:  # noqa: BLE001 - the task's own error is what is classified below
        if is_unreachable(exc):
            return False
        return _io_trouble(exc)
    return False


def _io_trouble(exc: BaseException) -> bool:
    if isinstance(exc, (OSError, TimeoutError, ConnectionError)):
        return True
    if isinstance(exc, Exception):  # MLflow/sqlite raise their own types for 'database is locked'
        return "locked" in str(exc).lower() or "connection" in str(exc).lower()
    return False


#: ``@task(**TASK)``: a task without result cache.
TASK = {"cache_policy": NO_CACHE}
#: ``@task(**IO_TASK)``: a task of registry or data I/O, retried on I/O trouble only.
IO_TASK = {**TASK, "retries": 2, "retry_delay_seconds": 1, "retry_condition_fn": retry_io_only}


def slug(name: str) -> str:
    """A model name as a Prefect artifact key or deployment name (lower case, letters, digits, '-')."""
    return "".join(ch if ch.isalnum() else "-" for ch in name.lower()).strip("-") or "model"


def prefect_unreachable() -> str | None:
    """``None`` when the Prefect API answers its health check, else the cause in one line.

    One ``GET /health`` through Prefect's client, so bounded by its timeout and retries
    (``PREFECT_API_REQUEST_TIMEOUT`` / ``PREFECT_CLIENT_MAX_RETRIES``, set from the policy's
    ``[operations] prefect_timeout_s`` / ``prefect_retries``). The gate calls it between versions: a
    Prefect server killed mid-gate stops the run there instead of gating on
    without Prefect.
    """
    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            error = client.api_healthcheck()
    except Exception as exc:  # noqa: BLE001 - the cause is the answer
        error = exc
    if error is None:
        return None
    first = (str(error).strip().splitlines() or [""])[0][:240]
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


#: HTTP statuses of a Prefect API that is there but cannot serve (a proxy without its backend, an overloaded server).
UNAVAILABLE_STATUSES = frozenset({502, 503, 504})


def is_prefect_unreachable(exc: BaseException) -> bool:
    """True when ``exc`` (or its cause/context chain) is Prefect's HTTP client failing to reach its API
    (``httpx`` connect, timeout, protocol errors) or the API answering 502, 503 or 504 (Prefect's own retries
    spent); MLflow's outages (``requests``) are not matched."""
    import httpx

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        module = type(current).__module__ or ""
        if module.startswith(("httpx", "httpcore")) and any(
                word in type(current).__name__ for word in ("Connect", "Timeout", "Protocol", "Network", "Read")):
            return True
        if isinstance(current, httpx.HTTPStatusError) and current.response.status_code in UNAVAILABLE_STATUSES:
            return True
        current = current.__cause__ or current.__context__
    return False


class PrefectUnreachableError(FauxChecksError):
    """The Prefect API stopped answering mid-run; the message names what was decided before."""


class FlowBlocked(Exception):
    """A flow that ended Failed by its decision (a gate that blocked a version, an audit that did not pass).

    The data of a deployment run's ``Failed`` state (:func:`failed_state`): Prefect's runner resolves a
    Failed state into an exception, and a summary dict there raised ``TypeError`` with a traceback in
    every scheduled run's log. ``data``: the flow's summary (dict or list).
    """

    def __init__(self, message: str, data=None):
        super().__init__(message, data)
        self.message, self.data = message, data

    def __str__(self) -> str:
        return self.message


def _in_deployment_run() -> bool:
    """True inside a flow run created from a deployment (a scheduled or triggered run, run by Prefect's runner)."""
    try:
        from prefect.context import FlowRunContext

        context = FlowRunContext.get()
        return bool(context and context.flow_run and context.flow_run.deployment_id)
    except Exception:  # noqa: BLE001 - not in a flow run
        return False


def failed_state(message: str, data):
    """The ``Failed`` state a flow returns when its decision blocks (audit not passed, a version not passed).

    Called in-process (``faux-checks gate|audit``, tests), its data is the summary itself, read with
    ``state.result(raise_on_failure=False)``. In a deployment run its data is :class:`FlowBlocked`
    carrying the summary: Prefect's runner raises a Failed state's data, and then logs the decision
    in one line (:class:`_DecisionNotTraceback`) instead of a ``TypeError`` traceback.

    Notes
    -----
    Our reading of Prefect 3.9 ``prefect/states.py`` ``get_state_exception`` (a result that is not an
    exception, a string or a state raises ``TypeError``) and ``prefect/flow_engine.py``
    ``_run_flow_from_runtime_entrypoint`` (``run_flow(..., error_logger=run_logger)`` resolves the result).
    """
    from prefect.states import Failed

    return Failed(message=message, data=FlowBlocked(message, data) if _in_deployment_run() else data)


class _DecisionNotTraceback:
    """Log filter on ``prefect.flow_runs`` and ``prefect.engine``: a run that ended by :class:`FlowBlocked` is logged as its
    decision in one line ("flow run ended Failed: ..."), without a traceback; any other error keeps its traceback."""

    def filter(self, record) -> bool:
        exc = record.exc_info[1] if isinstance(record.exc_info, tuple) and len(record.exc_info) > 1 else None
        if isinstance(exc, FlowBlocked):
            record.msg, record.args = "flow run ended Failed: %s", (exc.message,)
            record.exc_info, record.exc_text = None, None
        return True


def _install_log_filter() -> None:
    import logging

    for name in ("prefect.flow_runs", "prefect.engine"):   # run_flow's error logger; handle_engine_signals' logger
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DecisionNotTraceback) for f in logger.filters):
            logger.addFilter(_DecisionNotTraceback())


_install_log_filter()
