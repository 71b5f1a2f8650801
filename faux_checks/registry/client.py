"""The MLflow side of the registry: the store's URI, retries on sqlite locks, and lookups.

:class:`RegistryClient` holds the MLflow client and the lookups every registry operation starts
with (a registered model, its versions, an experiment); :mod:`.versions` and :mod:`.trail`
build on it. MLflow is imported inside the functions that need it (≈1.4 s import), never at
``import faux_checks``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from ..errors import FauxChecksError, InputError
from .records import AUDIT_TAG, GATE_TAG, PROMOTION_TAG, tag_value

__all__ = [
    "AUDIT_EXPERIMENT",
    "AUDIT_TAG",
    "DEFAULT_ALIAS",
    "GATE_EXPERIMENT",
    "GATE_TAG",
    "MODELS_EXPERIMENT",
    "PENDING",
    "PROMOTION_TAG",
    "RUNNING",
    "RegistryClient",
    "default_tracking_uri",
    "error_code",
    "name_filter",
    "tag_value",
    "with_retry",
]

T = TypeVar("T")

MODELS_EXPERIMENT = "faux-checks-models"
GATE_EXPERIMENT = "faux-checks-gate"
AUDIT_EXPERIMENT = "faux-checks-audit"
DEFAULT_ALIAS = "deployable"

RUNNING = "running"
#: The ``fairness_promotion`` value of a gate that will move the alias (records.PROMOTION_TAG).
PENDING = "pending"

# sqlite lock contention surfaces as sqlite3.OperationalError, wrapped by SQLAlchemy and then by
# MLflow (MlflowException TEMPORARILY_UNAVAILABLE); only these messages are retried.
_LOCKED_MARKERS = ("database is locked", "database table is locked", "database schema is locked")
_RETRY_TRIES = 5
_RETRY_BASE_DELAY_S = 0.1
_sleep = time.sleep  # patched in tests


def default_tracking_uri() -> str:
    """Return the tracking/registry URI faux-checks uses when none is given.

    Returns
    -------
    str
        ``$MLFLOW_TRACKING_URI`` when that variable is set and non-empty; otherwise
        ``sqlite:///<dir>/mlflow.db`` with ``<dir>`` = ``$FAUX_CHECKS_HOME`` or
        ``~/.faux-checks``. The directory is created if needed; run artifacts of experiments
        created by :class:`Registry` go to ``<dir>/mlartifacts``.

    Raises
    ------
    InputError
        If ``<dir>`` cannot be created (the message gives the path and the OS error).
    """
    env = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    if env:
        return env
    home = Path(os.environ.get("FAUX_CHECKS_HOME") or "~/.faux-checks").expanduser().resolve()
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"cannot create the faux-checks home directory {home} ({exc}); set FAUX_CHECKS_HOME "
            "to a writable directory or MLFLOW_TRACKING_URI to an MLflow server"
        ) from exc
    return f"sqlite:///{home / 'mlflow.db'}"


def _sqlite_path(uri: str) -> Path | None:
    """Path of the database file of a ``sqlite:///`` URI, None for any other URI."""
    prefix = "sqlite:///"
    if not uri.startswith(prefix):
        return None
    path = uri[len(prefix):].split("?", 1)[0]
    if not path or path == ":memory:":
        return None
    return Path(path)


def _is_sqlite_locked(exc: BaseException) -> bool:
    """True if ``exc`` or an exception in its cause/context chain is an sqlite lock error."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        message = str(current).lower()
        if any(marker in message for marker in _LOCKED_MARKERS):
            return True
        current = current.__cause__ or current.__context__
    return False


def with_retry(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call ``fn``; retry up to 5 tries in all, with exponential backoff, on sqlite lock errors only."""
    for attempt in range(_RETRY_TRIES):
        try:
            return fn(*args, **kwargs)
        except FauxChecksError:
            raise
        except Exception as exc:
            if attempt == _RETRY_TRIES - 1 or not _is_sqlite_locked(exc):
                raise
            _sleep(_RETRY_BASE_DELAY_S * 2**attempt)
    raise AssertionError("unreachable")  # pragma: no cover


def error_code(exc: BaseException) -> str | None:
    """MLflow's error code of an exception (``RESOURCE_DOES_NOT_EXIST``, ...), None for others."""
    return getattr(exc, "error_code", None)


def _version_key(version: Any) -> int:
    try:
        return int(version)
    except (TypeError, ValueError):  # pragma: no cover - MLflow versions are integers
        return 0


def name_filter(name: str) -> str:
    """An MLflow search filter on a registered model's name, quoted to fit the name."""
    if "'" not in name:
        return f"name = '{name}'"
    if '"' not in name:
        return f'name = "{name}"'
    raise InputError(f"registered model name {name!r} holds both quote characters; rename the model")


class RegistryClient:
    """The MLflow client of a :class:`~faux_checks.registry.Registry` and its lookups.

    Parameters
    ----------
    tracking_uri : str, optional
        MLflow tracking and registry URI; default :func:`default_tracking_uri`.

    Raises
    ------
    InputError
        If ``tracking_uri`` is an sqlite URI whose directory does not exist.
    """

    def __init__(self, tracking_uri: str | None = None) -> None:
        self.tracking_uri = tracking_uri or default_tracking_uri()
        db_path = _sqlite_path(self.tracking_uri)
        if db_path is not None and not db_path.parent.is_dir():
            raise InputError(
                f"the directory of the sqlite registry {self.tracking_uri} does not exist "
                f"({db_path.parent}); create it first or pass another tracking_uri"
            )
        self._artifact_root = (db_path.parent / "mlartifacts").resolve().as_uri() if db_path is not None else None
        self._client = None
        self._experiment_ids: dict[str, str] = {}

    @property
    def client(self):
        """The ``mlflow.MlflowClient`` of this registry, created on first use: MLflow 3 opens (for a new sqlite
        file: creates and migrates, ~10 s) its store when the client is made, which a lookup of a model in a
        registry file that does not exist yet never needs (:meth:`_registered_model`)."""
        if self._client is None:
            import mlflow

            self._client = mlflow.MlflowClient(tracking_uri=self.tracking_uri, registry_uri=self.tracking_uri)
        return self._client

    @client.setter
    def client(self, value) -> None:
        self._client = value

    def __repr__(self) -> str:
        return f"Registry({self.tracking_uri!r})"

    def _experiment_id(self, experiment: str) -> str:
        if experiment in self._experiment_ids:
            return self._experiment_ids[experiment]
        exp = with_retry(self.client.get_experiment_by_name, experiment)
        if exp is None:
            try:
                experiment_id = with_retry(
                    self.client.create_experiment, experiment, artifact_location=self._artifact_root
                )
            except Exception as exc:  # another process created it meanwhile
                if error_code(exc) != "RESOURCE_ALREADY_EXISTS":
                    raise
                exp = with_retry(self.client.get_experiment_by_name, experiment)
                experiment_id = exp.experiment_id
        else:
            if exp.lifecycle_stage == "deleted":
                raise InputError(
                    f"MLflow experiment '{experiment}' is deleted in {self.tracking_uri}; restore it "
                    "(MlflowClient.restore_experiment) or delete it permanently (mlflow gc)"
                )
            experiment_id = exp.experiment_id
        self._experiment_ids[experiment] = experiment_id
        return experiment_id

    def _ensure_registered_model(self, name: str) -> None:
        try:
            with_retry(self.client.get_registered_model, name)
            return
        except Exception as exc:
            if error_code(exc) != "RESOURCE_DOES_NOT_EXIST":
                raise
        try:
            with_retry(self.client.create_registered_model, name)
        except Exception as exc:
            if error_code(exc) != "RESOURCE_ALREADY_EXISTS":  # created meanwhile by another writer
                raise

    def _registered_model(self, name: str):
        """The registered model ``name``; InputError naming the existing models when there is none.

        An sqlite registry whose file does not exist holds no model: said at once, and nothing is created:
        letting MLflow create and migrate a new database for a lookup would make ``gate no-such-model`` on a
        fresh registry take 17-24 s under load, most of it creating the file.
        """
        db_path = _sqlite_path(self.tracking_uri)
        if db_path is not None and not db_path.exists():
            raise InputError(f"no registered model named {name!r} in {self.tracking_uri}; existing models (0): []. "
                             "Check the name or register the model first")
        try:
            return with_retry(self.client.get_registered_model, name)
        except Exception as exc:
            if error_code(exc) != "RESOURCE_DOES_NOT_EXIST":
                raise
        existing = self._model_names()
        shown = ", ".join(repr(n) for n in existing[:30]) + (" ..." if len(existing) > 30 else "")
        raise InputError(
            f"no registered model named {name!r} in {self.tracking_uri}; existing models "
            f"({len(existing)}): [{shown}]. Check the name or register the model first"
        )

    def _model_names(self) -> list[str]:
        names: list[str] = []
        token = None
        while True:
            page = with_retry(self.client.search_registered_models, max_results=1000, page_token=token)
            names.extend(m.name for m in page)
            token = page.token
            if not token:
                return sorted(names)

    def _versions(self, name: str) -> list:
        self._registered_model(name)  # InputError naming the existing models
        versions: list = []
        token = None
        while True:
            page = with_retry(
                self.client.search_model_versions, name_filter(name), max_results=10_000, page_token=token
            )
            versions.extend(v for v in page if v.name == name)
            token = page.token
            if not token:
                return sorted(versions, key=lambda v: _version_key(v.version))

    def _version(self, name: str, version: str | int):
        self._registered_model(name)
        try:
            return with_retry(self.client.get_model_version, name, str(version))
        except Exception as exc:
            if error_code(exc) not in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
                raise
        existing = [str(v.version) for v in self._versions(name)]
        raise InputError(
            f"registered model '{name}' has no version {version!r}; existing versions: {existing}"
        )

    def _set_version_tags(self, name: str, version: Any, tags: Mapping[str, str]) -> None:
        """Write ``tags`` on a version: in one transaction on an SQL store (sqlite, PostgreSQL), all or none;
        otherwise (an MLflow server) one call per tag in dict order, so the last key (the decision) lands last.

        MLflow's client has no call that sets several version tags; one call per tag costs a registered-model read
        and a commit each (~35 tags per decision: 2-4 s on a loaded 2-core machine, against one commit here).
        """
        store = _sql_registry_store(self.client)
        if store is None:
            for key, value in tags.items():
                with_retry(self.client.set_model_version_tag, name, str(version), key, value)
        elif tags:
            with_retry(_write_version_tags, store, name, str(version), tags)


def _sql_registry_store(client: Any):
    """The SQLAlchemy model-registry store behind an ``MlflowClient``, or None (a server, another client)."""
    import mlflow
    from mlflow.store.model_registry.sqlalchemy_store import SqlAlchemyStore

    if not isinstance(client, mlflow.MlflowClient):
        return None
    store = client._get_registry_client().store
    return store if isinstance(store, SqlAlchemyStore) else None


def _write_version_tags(store: Any, name: str, version: str, tags: Mapping[str, str]) -> None:
    """Every tag of ``tags`` on version ``version`` of ``name`` in one transaction of an SQLAlchemy store, checked
    as MLflow's own ``SqlAlchemyStore.set_model_version_tag`` checks each (name, version, key, value, the version
    existing) before anything is written. Reads MLflow's store internals (pinned ``mlflow`` version)."""
    from mlflow.entities.model_registry import ModelVersionTag
    from mlflow.store.model_registry.dbmodels.models import SqlModelVersionTag
    from mlflow.utils.validation import _validate_model_name, _validate_model_version, _validate_model_version_tag

    _validate_model_name(name)
    number = _validate_model_version(version)                          # the int the store keys versions by
    rows = [ModelVersionTag(str(key), str(value)) for key, value in tags.items()]
    for row in rows:
        _validate_model_version_tag(row.key, row.value)
    with store.ManagedSessionMaker(read_only=False) as session:
        found = store._get_sql_model_version(session, name, number)
        for row in rows:
            session.merge(SqlModelVersionTag(workspace=found.workspace, name=name, version=found.version,
                                             key=row.key, value=row.value))
