"""Model-registry adapter (MLflow): new versions, artifacts, gate tags, aliases, audit runs.

The gate's view of a registry is small:

- a registered model has numbered **versions**; each version holds two artifacts, the target
  model file (TorchScript / torch.export / state dict, see :mod:`faux_checks.inputs.models`) and,
  optionally, its :class:`~faux_checks.inputs.tabular.FeatureSpec` JSON;
- a version the gate has not decided yet is **new**; the gate marks it ``running``, decides, then
  records the decision as version tags (``fairness_gate`` = ``passed`` / ``failed`` /
  ``undecided``, plus the numbers behind it);
- only a version whose recorded decision is ``passed`` can receive the deployment **alias**
  (``models:/name@deployable``);
- every decision also gets an MLflow **run** holding metrics, parameters and the report files:
  the audit trail.

Everything else (the maths, the policy, the decision) lives in the library; this module only
moves strings and files. MLflow is imported inside the functions that need it (≈1.4 s import),
never at ``import faux_checks``.

Default store: an sqlite file, ``$FAUX_CHECKS_HOME/mlflow.db`` (``~/.faux-checks/mlflow.db``),
with artifacts in ``mlartifacts/`` next to it; ``MLFLOW_TRACKING_URI`` (e.g. a real tracking
server) overrides it. The same URI is used for tracking and the registry.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from .errors import FauxChecksError, InputError, UndecidableError
from .inputs.models import model_sha256
from .provenance import utc_now

__all__ = ["Registry", "default_tracking_uri", "GATE_TAG", "AUDIT_TAG", "DECISIONS"]

T = TypeVar("T")

MODELS_EXPERIMENT = "faux-checks-models"
GATE_EXPERIMENT = "faux-checks-gate"
AUDIT_EXPERIMENT = "faux-checks-audit"
DEFAULT_ALIAS = "deployable"

GATE_TAG = "fairness_gate"
AUDIT_TAG = "fairness_audit"  # latest drift audit of a version: passed / failed / undecided
_MAX_REASON_CHARS = 1000
RUNNING = "running"
#: Set to ``pending`` (with a ``passed`` decision) by a gate that will move the alias, and to
#: ``done`` by :meth:`Registry.promote`: a gate killed in between leaves the version new.
PROMOTION_TAG = "fairness_promotion"
PENDING = "pending"
DECISIONS = ("passed", "failed", "undecided")

#: Version tags written by :meth:`Registry.register_version`.
MODEL_SHA_TAG = "model_sha256"
MODEL_FILE_TAG = "model_file"
SPEC_FILE_TAG = "feature_spec_file"
SPEC_SHA_TAG = "feature_spec_sha256"
_ARTIFACT_DIR = "model"  # artifact sub-folder of the registration run that becomes the version's source

# sqlite lock contention surfaces as sqlite3.OperationalError, wrapped by SQLAlchemy and then by
# MLflow (MlflowException TEMPORARILY_UNAVAILABLE); only these messages are retried.
_LOCKED_MARKERS = ("database is locked", "database table is locked", "database schema is locked")
_RETRY_TRIES = 5
_RETRY_BASE_DELAY_S = 0.1
_sleep = time.sleep  # patched in tests

# MLflow REST limits per log_batch call
_BATCH_METRICS, _BATCH_PARAMS = 1000, 100
_MAX_PARAM_CHARS, _MAX_RUN_TAG_CHARS = 6000, 8000  # longer values are truncated by MLflow


# ---------------------------------------------------------------------------------- helpers
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


def _with_retry(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
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


def _error_code(exc: BaseException) -> str | None:
    return getattr(exc, "error_code", None)


def _tag_value(value: Any) -> str:
    """Tag/param string of a value: floats round-trip exactly (repr), None is ``""``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _version_key(version: Any) -> int:
    try:
        return int(version)
    except (TypeError, ValueError):  # pragma: no cover - MLflow versions are integers
        return 0


def _name_filter(name: str) -> str:
    if "'" not in name:
        return f"name = '{name}'"
    if '"' not in name:
        return f'name = "{name}"'
    raise InputError(f"registered model name {name!r} holds both quote characters; rename the model")


# ---------------------------------------------------------------------------------- adapter
class Registry:
    """Thin adapter over an MLflow tracking store and model registry.

    Parameters
    ----------
    tracking_uri : str, optional
        MLflow tracking and registry URI (``sqlite:///path/mlflow.db``, ``http://host:5000``, ...).
        Default: :func:`default_tracking_uri`. For an ``sqlite:///`` URI, experiments created
        here store their artifacts in ``mlartifacts/`` next to the database file (MLflow's own
        default would be ``./mlruns`` under the current directory).

    Attributes
    ----------
    tracking_uri : str
        The URI in use.
    client : mlflow.MlflowClient
        The underlying client (tracking and registry on the same URI).

    Raises
    ------
    InputError
        If ``tracking_uri`` is an sqlite URI whose directory does not exist.

    Notes
    -----
    Every call that touches the store is retried (≤ 5 tries, 0.1 s doubling) when sqlite reports
    a lock held by a concurrent writer; no other error is retried. Tags written on versions:
    ``model_sha256``, ``model_file``, ``feature_spec_file`` / ``feature_spec_sha256`` (at
    registration); ``fairness_gate`` and ``fairness_*`` (by the gate); ``fairness_audit`` and
    ``fairness_audit_*`` (by the drift audit, :meth:`record_audit`).

    Examples
    --------
    >>> reg = Registry("sqlite:////tmp/reg/mlflow.db")
    >>> v = reg.register_version("credit", "model.pt", "spec.json")
    >>> reg.new_versions("credit")
    ['1']
    """

    def __init__(self, tracking_uri: str | None = None) -> None:
        import mlflow

        self.tracking_uri = tracking_uri or default_tracking_uri()
        db_path = _sqlite_path(self.tracking_uri)
        if db_path is not None and not db_path.parent.is_dir():
            raise InputError(
                f"the directory of the sqlite registry {self.tracking_uri} does not exist "
                f"({db_path.parent}); create it first or pass another tracking_uri"
            )
        self._artifact_root = (db_path.parent / "mlartifacts").resolve().as_uri() if db_path is not None else None
        self.client = mlflow.MlflowClient(tracking_uri=self.tracking_uri, registry_uri=self.tracking_uri)
        self._experiment_ids: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"Registry({self.tracking_uri!r})"

    # ------------------------------------------------------------------ registration
    def register_version(
        self,
        name: str,
        model_path: str | Path,
        feature_spec_path: str | Path | None = None,
        *,
        description: str = "",
        tags: Mapping[str, Any] | None = None,
    ) -> str:
        """Register a model file (and its feature spec) as a new version of ``name``.

        The files are logged as plain artifacts of a new run in experiment
        ``"faux-checks-models"`` (no pickling, no ``log_model``), and the run's ``model/``
        artifact folder becomes the version's source. The registered model is created if absent.

        Parameters
        ----------
        name : str
            Registered model name.
        model_path : str or Path
            Target model file (any format :func:`faux_checks.inputs.models.load_model` reads). It is not
            loaded here; the gate loads it safely.
        feature_spec_path : str or Path, optional
            :class:`~faux_checks.inputs.tabular.FeatureSpec` JSON saved with the model.
        description : str
            Version description.
        tags : mapping, optional
            Extra version tags (values are converted to strings).

        Returns
        -------
        str
            The new version number, e.g. ``"3"``.

        Raises
        ------
        InputError
            If ``name`` is empty, a file does not exist, or both files have the same file name.
        """
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"registered model name must be a non-empty string, got {name!r}")
        model_path = Path(model_path)
        if not model_path.is_file():
            raise InputError(f"model file {model_path} does not exist (register_version '{name}')")
        spec_path = Path(feature_spec_path) if feature_spec_path is not None else None
        if spec_path is not None:
            if not spec_path.is_file():
                raise InputError(f"feature spec file {spec_path} does not exist (register_version '{name}')")
            if spec_path.name == model_path.name:
                raise InputError(
                    f"the model file and the feature spec have the same file name {model_path.name!r}; "
                    "rename one of them (both are stored in the same artifact folder)"
                )
        version_tags = {str(k): _tag_value(v) for k, v in (tags or {}).items()}
        version_tags[MODEL_SHA_TAG] = model_sha256(model_path)
        version_tags[MODEL_FILE_TAG] = model_path.name
        if spec_path is not None:
            version_tags[SPEC_FILE_TAG] = spec_path.name
            version_tags[SPEC_SHA_TAG] = model_sha256(spec_path)

        experiment_id = self._experiment_id(MODELS_EXPERIMENT)
        run = _with_retry(
            self.client.create_run,
            experiment_id,
            run_name=f"{name}-register",
            tags={"faux_checks.model_name": name, "faux_checks.kind": "register"},
        )
        run_id = run.info.run_id
        try:
            _with_retry(self.client.log_artifact, run_id, str(model_path), _ARTIFACT_DIR)
            if spec_path is not None:
                _with_retry(self.client.log_artifact, run_id, str(spec_path), _ARTIFACT_DIR)
        except BaseException:
            _with_retry(self.client.set_terminated, run_id, "FAILED")
            raise
        _with_retry(self.client.set_terminated, run_id, "FINISHED")

        self._ensure_registered_model(name)
        version = _with_retry(
            self.client.create_model_version,
            name,
            source=f"{run.info.artifact_uri.rstrip('/')}/{_ARTIFACT_DIR}",
            run_id=run_id,
            tags=version_tags,
            description=description or None,
        )
        return str(version.version)

    # ------------------------------------------------------------------ reading versions
    def new_versions(self, name: str) -> list[str]:
        """Versions of ``name`` the gate has not decided yet.

        A version is new when it has no ``fairness_gate`` tag, or when that tag is still
        ``running`` (a gate that was killed before recording its decision must be re-run), or
        when it ``passed`` with its ``fairness_promotion`` still ``pending`` and holds no alias
        (a gate killed, or whose promotion failed, between recording and promotion).

        Parameters
        ----------
        name : str
            Registered model name.

        Returns
        -------
        list of str
            Version numbers, ascending.

        Raises
        ------
        InputError
            If no registered model is called ``name`` (the message lists the existing names).
        """
        versions = self._versions(name)
        aliased = {str(v) for v in (self._registered_model(name).aliases or {}).values()}
        return [
            str(v.version)
            for v in versions
            if v.tags.get(GATE_TAG, RUNNING) == RUNNING
            or (v.tags.get(GATE_TAG) == "passed" and v.tags.get(PROMOTION_TAG) == PENDING
                and str(v.version) not in aliased)
        ]

    def download(self, name: str, version: str | int, dst_dir: str | Path) -> tuple[Path, Path | None]:
        """Download a version's model file and feature spec into ``dst_dir``.

        Parameters
        ----------
        name : str
            Registered model name.
        version : str or int
            Version number.
        dst_dir : str or Path
            Empty or non-existent directory (created); existing files are never overwritten.

        Returns
        -------
        model_path : Path
            The model file, checked against the version's ``model_sha256`` tag.
        feature_spec_path : Path or None
            The feature spec JSON, or None if the version has none.

        Raises
        ------
        InputError
            If the model or version does not exist, ``dst_dir`` is a file or a non-empty
            directory, the version's artifacts do not identify a single model file, or the
            downloaded model does not match its recorded sha256.
        """
        import mlflow

        mv = self._version(name, version)
        dst = Path(dst_dir)
        if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
            raise InputError(
                f"download destination {dst} exists and is not an empty directory; pass an empty or "
                "new directory (nothing is overwritten)"
            )
        dst.mkdir(parents=True, exist_ok=True)
        # From the version's source, not "models:/name/version": MLflow resolves a models:/ URI
        # through the *global* registry URI (ignoring the one passed), i.e. ./mlflow.db.
        local = Path(
            _with_retry(
                mlflow.artifacts.download_artifacts,
                artifact_uri=mv.source,
                dst_path=str(dst),
                tracking_uri=self.tracking_uri,
            )
        )
        if local.is_dir() and local != dst:  # the source folder itself was copied: flatten it
            staging = local.rename(dst / f".staging-{uuid.uuid4().hex}")  # a file may be named like it
            for item in list(staging.iterdir()):
                item.rename(dst / item.name)
            staging.rmdir()
        files = sorted(p for p in dst.rglob("*") if p.is_file())
        model_file = mv.tags.get(MODEL_FILE_TAG)
        if model_file is None:
            if len(files) != 1:
                raise InputError(
                    f"version {mv.version} of '{name}' was not registered by faux-checks (no "
                    f"'{MODEL_FILE_TAG}' tag) and holds {len(files)} files "
                    f"{[str(p.relative_to(dst)) for p in files][:10]}; set the '{MODEL_FILE_TAG}' tag "
                    "to the model's file name"
                )
            model_path = files[0]
        else:
            model_path = dst / model_file
        if not model_path.is_file():
            raise InputError(
                f"version {mv.version} of '{name}': model file {model_file!r} not found among its "
                f"artifacts {[str(p.relative_to(dst)) for p in files][:10]} (source {mv.source})"
            )
        expected = mv.tags.get(MODEL_SHA_TAG)
        if expected and model_sha256(model_path) != expected:
            raise InputError(
                f"version {mv.version} of '{name}': downloaded model {model_path.name} has sha256 "
                f"{model_sha256(model_path)[:12]}… but the registry recorded {expected[:12]}…; the "
                "artifact was changed after registration, register the model again"
            )
        spec_file = mv.tags.get(SPEC_FILE_TAG)
        spec_path = dst / spec_file if spec_file else None
        if spec_path is not None and not spec_path.is_file():
            raise InputError(
                f"version {mv.version} of '{name}': feature spec {spec_file!r} not found among its "
                f"artifacts {[str(p.relative_to(dst)) for p in files][:10]}"
            )
        return model_path, spec_path

    # ------------------------------------------------------------------ gate tags
    def mark_running(self, name: str, version: str | int) -> None:
        """Tag a version ``fairness_gate=running`` (it stays new until a decision is recorded).

        Raises
        ------
        InputError
            If the model or version does not exist.
        """
        mv = self._version(name, version)
        self._set_version_tags(name, mv.version, {"fairness_started_at": utc_now(), GATE_TAG: RUNNING})

    def record_decision(
        self,
        name: str,
        version: str | int,
        *,
        decision: str,
        flagged_fraction: float | None,
        delta: float | None,
        aux_quality: float | None,
        report_uri: str,
        run_id: str,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Record the gate's decision on a version as tags.

        Writes ``fairness_flagged_fraction``, ``fairness_delta``, ``fairness_aux_quality``,
        ``fairness_report``, ``fairness_run_id``, ``fairness_checked_at`` (UTC, ISO 8601), the
        ``extra`` tags as given, and last ``fairness_gate``: a gate killed while recording leaves
        the version ``running``, hence new.

        Parameters
        ----------
        name : str
            Registered model name.
        version : str or int
            Version number.
        decision : {"passed", "failed", "undecided"}
            The gate's outcome.
        flagged_fraction, delta, aux_quality : float or None
            Numbers behind the decision; None (not computed) is written as ``""``.
        report_uri : str
            Where the compliance report lies (e.g. :meth:`run_artifact_uri` of the audit run).
        run_id : str
            The audit run (:meth:`log_gate_run`).
        extra : mapping, optional
            Further tags, keys kept as given (values converted to strings).

        Raises
        ------
        InputError
            If ``decision`` is not one of the three outcomes, or the model or version does not exist.
        """
        if decision not in DECISIONS:
            raise InputError(f"decision must be one of {list(DECISIONS)}, got {decision!r}")
        mv = self._version(name, version)
        tags = {str(k): _tag_value(v) for k, v in (extra or {}).items()}
        tags.pop(GATE_TAG, None)
        tags.update(
            {
                "fairness_flagged_fraction": _tag_value(flagged_fraction),
                "fairness_delta": _tag_value(delta),
                "fairness_aux_quality": _tag_value(aux_quality),
                "fairness_report": _tag_value(report_uri),
                "fairness_run_id": _tag_value(run_id),
                "fairness_checked_at": utc_now(),
            }
        )
        tags[GATE_TAG] = decision  # last: dict order is the write order
        self._set_version_tags(name, mv.version, tags)

    # ------------------------------------------------------------------ aliases
    def promote(self, name: str, version: str | int, alias: str = DEFAULT_ALIAS) -> None:
        """Point ``alias`` at ``version``, only if its recorded decision is ``passed``.

        The decision is re-read from the registry, not taken from the caller. A version the gate
        left ``fairness_promotion=pending`` is marked ``done`` after the alias is set (a kill in
        between leaves the alias on a ``passed`` version; :meth:`new_versions` skips it).

        Parameters
        ----------
        name : str
            Registered model name.
        version : str or int
            Version number.
        alias : str
            Alias to set (``models:/name@alias``); default ``"deployable"``.

        Raises
        ------
        InputError
            If the model or version does not exist.
        UndecidableError
            If the version's ``fairness_gate`` tag is not ``passed`` (absent, running, failed or
            undecided); the alias is left unchanged.
        """
        mv = self._version(name, version)
        state = mv.tags.get(GATE_TAG)
        if state != "passed":
            shown = "absent (never gated)" if state is None else repr(state)
            raise UndecidableError(
                f"version {mv.version} of '{name}' cannot get alias '{alias}': its {GATE_TAG} tag is "
                f"{shown}, only 'passed' versions are promoted; run the fairness gate on it first"
            )
        _with_retry(self.client.set_registered_model_alias, name, alias, str(mv.version))
        if mv.tags.get(PROMOTION_TAG) == PENDING:
            self._set_version_tags(name, mv.version, {"fairness_promoted_at": utc_now(), PROMOTION_TAG: "done"})

    def alias_version(self, name: str, alias: str = DEFAULT_ALIAS) -> str | None:
        """Version the alias points at, or None if the alias is not set.

        Raises
        ------
        InputError
            If no registered model is called ``name``.
        """
        aliases = self._registered_model(name).aliases or {}
        version = aliases.get(alias)
        return None if version is None else str(version)

    # ------------------------------------------------------------------ audit trail
    def log_gate_run(
        self,
        name: str,
        version: str | int,
        *,
        report_dir: str | Path,
        metrics: Mapping[str, float | None],
        params: Mapping[str, Any],
        tags: Mapping[str, Any],
        kind: str = "gate",
    ) -> str:
        """Log one gate decision as an MLflow run in experiment ``"faux-checks-gate"``.

        Parameters
        ----------
        name : str
            Registered model name.
        version : str or int
            Version number checked.
        report_dir : str or Path
            Directory whose files (recursively) are logged as the run's artifacts.
        metrics : mapping of str to float
            Numeric metrics; None values (not computed) are not logged.
        params : mapping
            Parameters (values converted to strings).
        tags : mapping
            Run tags; ``faux_checks.model_name`` / ``faux_checks.model_version`` /
            ``faux_checks.kind`` are added.
        kind : {"gate", "audit"}
            ``"audit"`` logs into experiment ``"faux-checks-audit"`` instead (:meth:`log_audit_run`).

        Returns
        -------
        str
            The run id; its artifact URI is :meth:`run_artifact_uri`.

        Raises
        ------
        InputError
            If the model or version does not exist, ``report_dir`` is not a directory, a metric
            is not a number, a parameter (tag) value is longer than 6,000 (8,000) characters (MLflow
            would truncate it), or MLflow rejects a value.
        """
        from mlflow.entities import Metric, Param

        if kind not in ("gate", "audit"):
            raise InputError(f"kind must be 'gate' or 'audit', got {kind!r}")
        mv = self._version(name, version)
        report_dir = Path(report_dir)
        if not report_dir.is_dir():
            raise InputError(f"report directory {report_dir} does not exist (log_gate_run '{name}' v{mv.version})")
        now_ms = int(time.time() * 1000)
        metric_rows = []
        for key, value in metrics.items():
            if value is None:
                continue
            try:
                if isinstance(value, (str, bytes)):
                    raise TypeError
                number = float(value)  # numpy / torch scalars too
            except (TypeError, ValueError):
                raise InputError(
                    f"metric {key!r} must be a number, got {type(value).__name__} {value!r}"
                ) from None
            metric_rows.append(Metric(str(key), number, now_ms, 0))
        param_rows = [Param(str(k), _tag_value(v)) for k, v in params.items()]
        run_tags = {str(k): _tag_value(v) for k, v in tags.items()}
        # MLflow would silently truncate longer values (with a log warning): refuse instead
        for what, values, limit in (
            ("parameter", {p.key: p.value for p in param_rows}, _MAX_PARAM_CHARS),
            ("tag", run_tags, _MAX_RUN_TAG_CHARS),
        ):
            for key, text in values.items():
                if len(text) > limit:
                    raise InputError(
                        f"gate run {what} {key!r} has {len(text):,} characters, over MLflow's limit of "
                        f"{limit:,}; write it to a file in report_dir instead"
                    )
        run_tags.update({"faux_checks.model_name": name, "faux_checks.model_version": str(mv.version),
                         "faux_checks.kind": kind})

        experiment_id = self._experiment_id(GATE_EXPERIMENT if kind == "gate" else AUDIT_EXPERIMENT)
        run = _with_retry(
            self.client.create_run, experiment_id, run_name=f"{name}-v{mv.version}-{kind}", tags=run_tags
        )
        run_id = run.info.run_id
        try:
            for i in range(0, len(metric_rows), _BATCH_METRICS):
                _with_retry(self.client.log_batch, run_id, metrics=metric_rows[i : i + _BATCH_METRICS])
            for i in range(0, len(param_rows), _BATCH_PARAMS):
                _with_retry(self.client.log_batch, run_id, params=param_rows[i : i + _BATCH_PARAMS])
            _with_retry(self.client.log_artifacts, run_id, str(report_dir))
        except BaseException as exc:
            _with_retry(self.client.set_terminated, run_id, "FAILED")
            if _error_code(exc) == "INVALID_PARAMETER_VALUE":
                raise InputError(f"MLflow rejected a value of the gate run for '{name}' v{mv.version}: {exc}") from exc
            raise
        _with_retry(self.client.set_terminated, run_id, "FINISHED")
        return run_id

    def log_audit_run(self, name: str, version: str | int, **kwargs: Any) -> str:
        """Log one drift audit as an MLflow run in experiment ``"faux-checks-audit"``.

        Same parameters, return value and errors as :meth:`log_gate_run` (``kind="audit"``).
        """
        return self.log_gate_run(name, version, kind="audit", **kwargs)

    def record_audit(
        self,
        name: str,
        version: str | int,
        *,
        decision: str,
        reason: str,
        report_uri: str,
        run_id: str,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Record the latest drift audit of a version as tags (the gate's tags are left alone).

        Writes ``fairness_audit_reason`` (the rule that decided, cut to 1,000 characters),
        ``fairness_audit_report``, ``fairness_audit_run_id``, ``fairness_audit_at`` (UTC), the
        ``extra`` tags as given, and last ``fairness_audit`` = ``decision``.

        Raises
        ------
        InputError
            If ``decision`` is not one of the three outcomes, or the model or version does not exist.
        """
        if decision not in DECISIONS:
            raise InputError(f"decision must be one of {list(DECISIONS)}, got {decision!r}")
        mv = self._version(name, version)
        tags = {str(k): _tag_value(v) for k, v in (extra or {}).items()}
        tags.pop(AUDIT_TAG, None)
        text = str(reason)
        tags.update(
            {
                "fairness_audit_reason": text if len(text) <= _MAX_REASON_CHARS else text[: _MAX_REASON_CHARS - 1] + "…",
                "fairness_audit_report": _tag_value(report_uri),
                "fairness_audit_run_id": _tag_value(run_id),
                "fairness_audit_at": utc_now(),
            }
        )
        tags[AUDIT_TAG] = decision  # last, as record_decision does
        self._set_version_tags(name, mv.version, tags)

    def audit_runs(self, name: str) -> list[dict[str, Any]]:
        """Every drift audit of ``name`` logged by :meth:`log_audit_run`, oldest first.

        Returns
        -------
        list of dict
            Per run: ``run_id``, ``version``, ``started_at`` (UTC, ISO 8601), the run's tags
            (``decision``, ``reason``, ...; ``mlflow.*`` left out) and its metrics under
            ``metrics``. Empty when the model was never audited.
        """
        exp = _with_retry(self.client.get_experiment_by_name, AUDIT_EXPERIMENT)
        if exp is None:
            return []
        name_filter = _name_filter(name).replace("name", "tags.`faux_checks.model_name`", 1)
        rows: list[dict[str, Any]] = []
        token = None
        while True:
            page = _with_retry(
                self.client.search_runs, [exp.experiment_id],
                filter_string=name_filter,
                order_by=["attributes.start_time ASC"], max_results=1000, page_token=token,
            )
            for run in page:
                tags = {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.")}
                rows.append({
                    **tags,
                    "run_id": run.info.run_id,
                    "version": tags.get("faux_checks.model_version"),
                    "started_at": _dt.datetime.fromtimestamp(run.info.start_time / 1000, _dt.timezone.utc).isoformat(
                        timespec="seconds"),
                    "metrics": dict(run.data.metrics),
                })
            token = page.token
            if not token:
                return rows

    def run_artifact_uri(self, run_id: str) -> str:
        """Artifact URI of a run (where :meth:`log_gate_run` put the report files).

        Raises
        ------
        InputError
            If no run has this id.
        """
        try:
            run = _with_retry(self.client.get_run, run_id)
        except Exception as exc:
            if _error_code(exc) in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
                raise InputError(f"no MLflow run with id {run_id!r} in {self.tracking_uri}") from exc
            raise
        return run.info.artifact_uri

    def history(self, name: str) -> list[dict[str, Any]]:
        """Every version of ``name`` with its tags and aliases, ascending by version.

        Parameters
        ----------
        name : str
            Registered model name.

        Returns
        -------
        list of dict
            One dict per version: the version's own tags (``fairness_*``, ``model_sha256``, ...;
            MLflow's internal ``mlflow.*`` tags left out, a version never gated has no
            ``fairness_gate`` key), then ``version`` (str), ``aliases`` (list of str, empty if
            none), ``run_id`` and ``created_at`` (UTC, ISO 8601).

        Raises
        ------
        InputError
            If no registered model is called ``name``.
        """
        aliases_of: dict[str, list[str]] = {}
        for alias, version in (self._registered_model(name).aliases or {}).items():
            aliases_of.setdefault(str(version), []).append(alias)
        rows = []
        for mv in self._versions(name):
            row: dict[str, Any] = {k: v for k, v in mv.tags.items() if not k.startswith("mlflow.")}
            row.update(
                version=str(mv.version),
                aliases=sorted(aliases_of.get(str(mv.version), [])),
                run_id=mv.run_id,
                created_at=_dt.datetime.fromtimestamp(mv.creation_timestamp / 1000, _dt.timezone.utc).isoformat(
                    timespec="seconds"
                ),
            )
            rows.append(row)
        return rows

    # ------------------------------------------------------------------ private
    def _experiment_id(self, experiment: str) -> str:
        if experiment in self._experiment_ids:
            return self._experiment_ids[experiment]
        exp = _with_retry(self.client.get_experiment_by_name, experiment)
        if exp is None:
            try:
                experiment_id = _with_retry(
                    self.client.create_experiment, experiment, artifact_location=self._artifact_root
                )
            except Exception as exc:  # another process created it meanwhile
                if _error_code(exc) != "RESOURCE_ALREADY_EXISTS":
                    raise
                exp = _with_retry(self.client.get_experiment_by_name, experiment)
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
            _with_retry(self.client.get_registered_model, name)
            return
        except Exception as exc:
            if _error_code(exc) != "RESOURCE_DOES_NOT_EXIST":
                raise
        try:
            _with_retry(self.client.create_registered_model, name)
        except Exception as exc:
            if _error_code(exc) != "RESOURCE_ALREADY_EXISTS":  # created meanwhile by another writer
                raise

    def _registered_model(self, name: str):
        try:
            return _with_retry(self.client.get_registered_model, name)
        except Exception as exc:
            if _error_code(exc) != "RESOURCE_DOES_NOT_EXIST":
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
            page = _with_retry(self.client.search_registered_models, max_results=1000, page_token=token)
            names.extend(m.name for m in page)
            token = page.token
            if not token:
                return sorted(names)

    def _versions(self, name: str) -> list:
        self._registered_model(name)  # InputError naming the existing models
        versions = []
        token = None
        while True:
            page = _with_retry(
                self.client.search_model_versions, _name_filter(name), max_results=10_000, page_token=token
            )
            versions.extend(v for v in page if v.name == name)
            token = page.token
            if not token:
                return sorted(versions, key=lambda v: _version_key(v.version))

    def _version(self, name: str, version: str | int):
        self._registered_model(name)
        try:
            return _with_retry(self.client.get_model_version, name, str(version))
        except Exception as exc:
            if _error_code(exc) not in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
                raise
        existing = [str(v.version) for v in self._versions(name)]
        raise InputError(
            f"registered model '{name}' has no version {version!r}; existing versions: {existing}"
        )

    def _set_version_tags(self, name: str, version: Any, tags: Mapping[str, str]) -> None:
        for key, value in tags.items():
            _with_retry(self.client.set_model_version_tag, name, str(version), key, value)
