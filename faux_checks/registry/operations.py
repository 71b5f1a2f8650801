"""Operating the registry under faults: bounded MLflow calls, an unreachable registry named, one gate per version.

- :func:`apply_client_settings` sets MLflow's own HTTP settings (``MLFLOW_HTTP_REQUEST_TIMEOUT``,
  ``MLFLOW_HTTP_REQUEST_MAX_RETRIES``, ``MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR``; read by
  ``mlflow/utils/rest_utils.py`` at every call, MLflow 3.17.2) for this process from the policy's
  ``[operations]``: MLflow's defaults (120 s timeout, 7 retries, factor 2) retry one call for about
  4 minutes, so an outage hung a gate for more than 15 minutes.
- :func:`is_unreachable` recognises a registry that did not answer (connection refused, timed out,
  retries exhausted) in an exception chain; :func:`check_reachable` turns it into
  :class:`~faux_checks.errors.RegistryUnreachableError` ("registry unreachable at URI for N s").
- :func:`acquire_lease` / :func:`release_lease`: a **lease** on a model version, so that two gates
  never gate the same version at once. It is a version tag, ``fairness_gate_lease`` = JSON
  ``{owner, host, pid, expires_at}``, written only when no live lease is there, then read back after
  a settle delay: of two gates that both found it free, the one whose write was last holds it, and
  the other sees that and backs off. A lease expires at ``expires_at`` (the gate's deadline plus a
  margin: a gate cannot outlive its deadline, so no heartbeat is needed), or at once when its owner
  ran on this host and its process is gone. Why a tag and not Prefect's global concurrency limits:
  by default each ``faux-checks gate`` process runs its own temporary Prefect API, so a limit
  would not be shared between two processes; the registry is what they share (sqlite file or
  server). MLflow has no compare-and-set, so two writes within one settle delay (1 s) of each
  other's read could both win; the read-back makes that window the time between a gate's read
  and its write (milliseconds). On a database-backed MLflow server (PostgreSQL, MySQL) two gates that
  both found no tag both INSERT it, and the second INSERT breaks the tags table's primary key: the
  server answers ``BAD_REQUEST: (psycopg.errors.UniqueViolation) duplicate key value violates unique
  constraint "model_version_tag_pk"`` (measured, MLflow 3.17.2 on PostgreSQL 15: 3 of 48 simultaneous
  writes). :func:`is_unique_violation` recognises it and :func:`acquire_lease` reads it as "taken": the
  other gate's write is in, so this gate reads the lease back and waits for it, as on sqlite (the error
  would otherwise end the whole flow with exit 2 and no version named).
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from dataclasses import asdict, dataclass

from ..errors import RegistryUnreachableError
from .records import LEASE_TAG  # noqa: F401  (re-exported)

__all__ = ["LEASE_TAG", "NOTHING_RECORDED", "Lease", "acquire_lease", "apply_client_settings", "check_reachable", "is_unique_violation",
           "is_unreachable",
           "read_lease", "release_lease", "release_lease_within", "unreachable_error"]

#: Seconds between writing a lease and reading it back.
SETTLE_S = 1.0
#: MLflow environment variables set from ``[operations]`` (policy field -> variable).
CLIENT_SETTINGS = {"registry_timeout_s": "MLFLOW_HTTP_REQUEST_TIMEOUT",
                   "registry_retries": "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
                   "registry_backoff": "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"}
#: Prefect's client settings set from ``[operations]`` (each Prefect call retried 60-70 s
#: against a killed server). Read by Prefect's settings when first loaded in the process (Prefect 3), so
#: :func:`apply_client_settings` runs before Prefect is imported (``faux-checks gate`` does).
PREFECT_SETTINGS = {"prefect_timeout_s": "PREFECT_API_REQUEST_TIMEOUT",
                    "prefect_retries": "PREFECT_CLIENT_MAX_RETRIES"}
_set_by_us: set[str] = set()
_UNREACHABLE_MARKERS = ("max retries exceeded", "connection refused", "failed to establish a new connection",
                        "read timed out", "connecttimeout", "connection aborted", "connection reset",
                        "name or service not known", "temporary failure in name resolution", "remotedisconnected")

#: Lower-cased messages of a unique-constraint error, as MLflow's server passes the database's text on:
#: psycopg 3 / psycopg2 (PostgreSQL), sqlite3, PyMySQL / mysqlclient (MySQL), SQL Server.
_UNIQUE_MARKERS = ("uniqueviolation", "duplicate key value violates unique constraint", "unique constraint failed",
                   "duplicate entry", "violation of primary key constraint", "violation of unique key constraint")


def apply_client_settings(operations) -> dict[str, str]:
    """Set MLflow's HTTP timeout, retries and backoff, and Prefect's API timeout and retries
    (:data:`PREFECT_SETTINGS`), for this process from ``[operations]``.

    A variable the user exported before (not set by an earlier call here) wins.

    Parameters
    ----------
    operations : faux_checks.gate.policy.OperationsSettings

    Returns
    -------
    dict
        The variables in force, name -> value.
    """
    applied = {}
    for field, name in {**CLIENT_SETTINGS, **PREFECT_SETTINGS}.items():
        if name in os.environ and name not in _set_by_us:
            applied[name] = os.environ[name]
            continue
        os.environ[name] = str(getattr(operations, field))
        _set_by_us.add(name)
        applied[name] = os.environ[name]
    return applied


def _chain(exc: BaseException):
    """``exc``, then its ``__cause__`` (or ``__context__``), and so on; each exception once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_unreachable(exc: BaseException) -> bool:
    """True when ``exc`` (or its cause/context chain) says the registry server did not answer."""
    for current in _chain(exc):
        if isinstance(current, (RegistryUnreachableError, ConnectionError, TimeoutError)):
            return True
        name = type(current).__name__
        if name in ("MaxRetryError", "NewConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectTimeout",
                    "ReadTimeout"):
            return True
        if any(marker in str(current).lower() for marker in _UNREACHABLE_MARKERS):
            return True
    return False


def is_unique_violation(exc: BaseException) -> bool:
    """True when ``exc`` (or its cause/context chain) is the backend's unique-constraint error.

    Our reading of how it arrives (measured): through an MLflow server, a
    :class:`mlflow.exceptions.RestException` with error code ``BAD_REQUEST`` whose message carries the
    database's text (``(psycopg.errors.UniqueViolation) duplicate key value violates unique constraint
    ...``); through a local SQLAlchemy store, an ``MlflowException`` wrapping SQLAlchemy's
    ``IntegrityError``. Both are recognised by the exception's class name (``UniqueViolation``,
    ``IntegrityError`` with a unique marker) or by :data:`_UNIQUE_MARKERS` in its message.
    """
    return any(type(current).__name__ == "UniqueViolation"
               or any(marker in str(current).lower() for marker in _UNIQUE_MARKERS) for current in _chain(exc))


#: What an unreachable registry leaves when nothing was recorded (:func:`unreachable_error`'s default).
NOTHING_RECORDED = "nothing was recorded, every version stays new and is gated by the next run"


def unreachable_error(uri: str, seconds: float, exc: BaseException | None = None,
                      standing: str = NOTHING_RECORDED) -> RegistryUnreachableError:
    """``registry unreachable at URI for N s`` with MLflow's settings and the cause's first line; ``standing``:
    what the registry holds after the run (default :data:`NOTHING_RECORDED`)."""
    settings = ", ".join(f"{n}={os.environ.get(n, 'MLflow default')}" for n in CLIENT_SETTINGS.values())
    cause = ""
    if exc is not None:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        cause = f" ({type(exc).__name__}: {first[:240]}{'...' if len(first) > 240 else ''})"
    return RegistryUnreachableError(
        f"registry unreachable at {uri} for {seconds:.1f} s{cause}; {standing}. Client settings: {settings} "
        "(policy [operations])")


def check_reachable(tracking_uri: str) -> float:
    """One cheap call to an MLflow server; raise if it does not answer. Local stores are not probed.

    Returns
    -------
    float
        Seconds the call took (0.0 for a local store).

    Raises
    ------
    RegistryUnreachableError
        ``registry unreachable at URI for N s`` (N: seconds spent trying, retries included).
    """
    if not tracking_uri.startswith(("http://", "https://")):
        return 0.0
    import mlflow

    t0 = time.monotonic()
    try:
        mlflow.MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri).search_registered_models(max_results=1)
    except Exception as exc:
        if is_unreachable(exc):
            raise unreachable_error(tracking_uri, time.monotonic() - t0, exc) from exc
        raise
    return time.monotonic() - t0


@dataclass(frozen=True)
class Lease:
    """A gate's hold on one model version (the ``fairness_gate_lease`` tag's content)."""

    name: str
    version: str
    owner: str
    host: str
    pid: int
    expires_at: float

    def live(self, now: float | None = None) -> bool:
        """Not expired, and (same host) its process still runs."""
        if (now if now is not None else time.time()) >= self.expires_at:
            return False
        if self.host == socket.gethostname():
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
        return True

    def describe(self) -> str:
        left = max(0.0, self.expires_at - time.time())
        return f"{self.owner} (pid {self.pid} on {self.host}, lease expires in {left:.0f} s)"


def read_lease(registry, name: str, version: str) -> Lease | None:
    """The version's lease, or None (no tag, or one that does not parse)."""
    tags = registry._version(name, version).tags or {}
    raw = tags.get(LEASE_TAG)
    if not raw:
        return None
    try:
        data = json.loads(raw)
        return Lease(name=name, version=str(version), owner=str(data["owner"]), host=str(data["host"]),
                     pid=int(data["pid"]), expires_at=float(data["expires_at"]))
    except (ValueError, KeyError, TypeError):
        return None


def acquire_lease(registry, name: str, version: str, *, ttl_s: float, wait_s: float = 0.0,
                  settle_s: float = SETTLE_S, poll_s: float = 1.0) -> tuple[Lease | None, Lease | None]:
    """Take the lease on a version, waiting up to ``wait_s`` for a live one to end.

    Parameters
    ----------
    registry : faux_checks.registry.Registry
    ttl_s : float
        The lease's lifetime (the gate's deadline plus a margin).
    wait_s : float
        How long to wait for another gate's live lease (0: do not wait).

    Returns
    -------
    (Lease or None, Lease or None)
        This gate's lease (None when not taken) and the other gate's live lease it found last.

    Raises
    ------
    Exception
        What the registry raised, except the backend's unique-constraint error on the lease write
        (:func:`is_unique_violation`), which means another gate wrote the lease first: read as taken.
    """
    from .client import with_retry

    stop = time.monotonic() + wait_s
    other = None
    while True:
        current = read_lease(registry, name, version)
        if current is None or not current.live():
            mine = Lease(name=name, version=str(version), owner=f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}",
                         host=socket.gethostname(), pid=os.getpid(), expires_at=time.time() + ttl_s)
            payload = {k: v for k, v in asdict(mine).items() if k not in ("name", "version")}
            try:
                with_retry(registry.client.set_model_version_tag, name, str(version), LEASE_TAG, json.dumps(payload))
            except Exception as exc:
                if not is_unique_violation(exc):
                    raise
                # another gate's INSERT of the tag came first (database backends): taken; read it back and wait
            time.sleep(settle_s)
            back = read_lease(registry, name, version)
            if back is not None and back.owner == mine.owner:
                return mine, None
            other = back
        else:
            other = current
        left = stop - time.monotonic()
        if left <= 0:
            return None, other
        time.sleep(min(poll_s, left))


#: Seconds a gate waits for its lease's release before leaving the lease to expire.
RELEASE_TIMEOUT_S = 5.0


def release_lease_within(registry, lease: Lease, timeout_s: float | None = None) -> bool | None:
    """:func:`release_lease` bounded in time: the deadline is a hard bound, the release included.

    The release runs in a daemon thread joined for at most ``timeout_s`` (default :data:`RELEASE_TIMEOUT_S`);
    a registry that does not answer in that time (frozen: a ``--deadline 75`` gate would end at 121 s
    if its release made one more slow call) leaves the lease in place, and it expires on its own at
    ``expires_at`` (the gate's deadline plus a margin) or, on this host, as soon as this process is gone.

    Returns
    -------
    bool or None
        True: deleted; False: not this lease's any more (nothing deleted); None: not finished in time.

    Raises
    ------
    Exception
        What :func:`release_lease` raised within the time.
    """
    import threading

    timeout_s = RELEASE_TIMEOUT_S if timeout_s is None else timeout_s
    done: dict = {}

    def run() -> None:
        try:
            done["released"] = release_lease(registry, lease)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            done["error"] = exc

    worker = threading.Thread(target=run, name=f"faux-lease-release-v{lease.version}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        return None
    if "error" in done:
        raise done["error"]
    return done["released"]


def release_lease(registry, lease: Lease) -> bool:
    """Delete the lease tag if it is still this lease's (never another gate's); True when deleted."""
    from .client import with_retry

    current = read_lease(registry, lease.name, lease.version)
    if current is None or current.owner != lease.owner:
        return False
    with_retry(registry.client.delete_model_version_tag, lease.name, lease.version, LEASE_TAG)
    return True
