"""What every faux-checks flow shares: retries on I/O only, and names for Prefect artifacts.

Tasks that read data or talk to the registry retry twice, one second apart, but only for I/O
trouble (:func:`retry_io_only`): never for bad input (:class:`~faux_checks.errors.FauxChecksError`),
a decision, or a registry that did not answer (MLflow's client retried already). Tasks use no result cache (``NO_CACHE``): their parameters are paths and names,
and models or DataFrames never need hashing.
"""

from __future__ import annotations

from prefect.cache_policies import NO_CACHE

from faux_checks.errors import FauxChecksError

__all__ = ["IO_TASK", "TASK", "PrefectUnreachableError", "is_prefect_unreachable", "prefect_unreachable", "retry_io_only", "slug"]


def retry_io_only(task, task_run, state) -> bool:
    """Retry a task only for I/O trouble, never for bad input or a decision.

    Never for an unreachable registry either (:func:`faux_checks.registry.operations.is_unreachable`):
    MLflow's client has already retried within the policy's ``[operations]`` budget, and Prefect's
    retries on top multiplied an outage (issue 14: 12.5 minutes).
    """
    from faux_checks.registry.operations import is_unreachable

    try:
        state.result()
    except FauxChecksError:
        return False
    except BaseException as exc:
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
    Prefect server killed mid-gate (issue 25, fault 2) stops the run there instead of gating on
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


def is_prefect_unreachable(exc: BaseException) -> bool:
    """True when ``exc`` (or its cause/context chain) is Prefect's HTTP client failing to reach its API
    (``httpx`` connect, timeout, protocol errors); MLflow's outages (``requests``) are not matched."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        module = type(current).__module__ or ""
        if module.startswith(("httpx", "httpcore")) and any(
                word in type(current).__name__ for word in ("Connect", "Timeout", "Protocol", "Network", "Read")):
            return True
        current = current.__cause__ or current.__context__
    return False


class PrefectUnreachableError(FauxChecksError):
    """The Prefect API stopped answering mid-run; the message names what was decided before (issue 25, fault 2)."""
