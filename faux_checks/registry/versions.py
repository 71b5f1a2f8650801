"""Model versions in the registry: registration, the versions still to gate, download, history, aliases.

A registered model has numbered **versions**; each version holds two artifacts, the target model
file (TorchScript / torch.export / state dict, see :mod:`faux_checks.inputs.models`) and,
optionally, its :class:`~faux_checks.inputs.tabular.FeatureSpec` JSON.
"""

from __future__ import annotations

import datetime as _dt
import re
import uuid
from pathlib import Path
from typing import Any, Mapping

from ..errors import InputError
from .client import (
    DEFAULT_ALIAS,
    GATE_TAG,
    MODELS_EXPERIMENT,
    PENDING,
    PROMOTION_TAG,
    RUNNING,
    RegistryClient,
    tag_value,
    with_retry,
)
from .formats import feature_spec_file, mlflow_model_file
from .records import (  # noqa: F401  (UNDECIDED_CAUSE_TAG, NO_CHECK re-exported)
    CHECKED_AT_TAG,
    DATA_SHA_TAG,
    FLAGGED_FRACTION_TAG,
    NO_CHECK,
    POLICY_SHA_TAG,
    UNDECIDED_CAUSE_TAG,
)


def _model_format(path) -> str:
    """The format table's name for the file (content sniffed; nothing loaded, torch not imported)."""
    from ..inputs.formats import detect_format

    fmt = detect_format(path)
    return "unknown" if fmt is None else fmt.name


def model_sha256(path) -> str:
    """:func:`faux_checks.inputs.models.model_sha256`, imported on use (it brings torch: ~2 s a registry lookup need not pay)."""
    from ..inputs.models import model_sha256 as sha

    return sha(path)


def _logged_model_id(uri: str) -> str | None:
    """``m-…`` of a ``models:/m-…[/path]`` URI (an MLflow 3 LoggedModel), None for ``models:/name/…``."""
    head = uri[len("models:/"):].strip("/").split("/", 1)[0]
    return head if re.fullmatch(r"m-[0-9a-f]{32}", head) else None


__all__ = ["MODEL_FILE_TAG", "MODEL_FORMAT_TAG", "MODEL_SHA_TAG", "ModelVersions", "SPEC_FILE_TAG", "SPEC_SHA_TAG"]

#: Version tags written by :meth:`ModelVersions.register_version`.
MODEL_SHA_TAG = "model_sha256"
MODEL_FILE_TAG = "model_file"
#: The format table's name of the model file (faux_checks.inputs.formats.FORMATS), "unknown" when no entry detects it.
MODEL_FORMAT_TAG = "model_format"
SPEC_FILE_TAG = "feature_spec_file"
SPEC_SHA_TAG = "feature_spec_sha256"
_ARTIFACT_DIR = "model"  # artifact sub-folder of the registration run that becomes the version's source


class ModelVersions(RegistryClient):
    """Registration and reading of model versions (half of :class:`~faux_checks.registry.Registry`)."""

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
            Extra version tags (values are converted to strings). ``model_format`` is set from the file's
            content (:data:`faux_checks.inputs.formats.FORMATS`: ``onnx``, ``xgboost``, ``lightgbm``, ``skops``,
            ``torchscript``, ``torch.export``, ``torch.save``, else ``unknown``) unless given here.

        Returns
        -------
        str
            The new version number, e.g. ``"3"``.

        Raises
        ------
        InputError
            If ``name`` is empty, a file does not exist, or both files have the same file name.
        """
        model_path, spec_path = _registered_files(name, model_path, feature_spec_path)
        version_tags = _version_tags(tags, model_path, spec_path)
        experiment_id = self._experiment_id(MODELS_EXPERIMENT)
        run = with_retry(
            self.client.create_run,
            experiment_id,
            run_name=f"{name}-register",
            tags={"faux_checks.model_name": name, "faux_checks.kind": "register"},
        )
        run_id = run.info.run_id
        try:
            with_retry(self.client.log_artifact, run_id, str(model_path), _ARTIFACT_DIR)
            if spec_path is not None:
                with_retry(self.client.log_artifact, run_id, str(spec_path), _ARTIFACT_DIR)
        except BaseException:
            with_retry(self.client.set_terminated, run_id, "FAILED")
            raise
        with_retry(self.client.set_terminated, run_id, "FINISHED")

        self._ensure_registered_model(name)
        version = with_retry(
            self.client.create_model_version,
            name,
            source=f"{run.info.artifact_uri.rstrip('/')}/{_ARTIFACT_DIR}",
            run_id=run_id,
            tags=version_tags,
            description=description or None,
        )
        return str(version.version)

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

    def gate_plan(self, name: str, *, policy_sha256: str | None, data_sha256: str | None) -> list[dict[str, Any]]:
        """What a gate run does with each version of ``name``: gate it, re-gate it, or skip it, and why.

        A recorded ``undecided`` whose check never ran (cause configuration or loading: tag
        :data:`UNDECIDED_CAUSE_TAG` = :data:`NO_CHECK`; for versions recorded before that tag, an
        empty ``fairness_flagged_fraction``) is re-gated when the policy's hash or the audit data's
        hash differs from the recorded one: no ``--force`` needed once the
        cause is fixed. Every other decided version is left alone; an undecided one is ``skip``
        with the reason.

        Parameters
        ----------
        name : str
            Registered model name.
        policy_sha256, data_sha256 : str or None
            Hashes of this run's policy (:meth:`Policy.sha256`) and audit data
            (:func:`faux_checks.provenance.data_sha256`).

        Returns
        -------
        list of dict
            One per version, ascending: ``version``, ``action`` (``"new"``, ``"regate"``, ``"skip"``
            for an undecided version not re-gated, ``"decided"`` for passed/failed), ``decision`` (the
            recorded one, None if new) and ``reason`` (one sentence).

        Raises
        ------
        InputError
            If no registered model is called ``name`` (the message lists the existing names).
        """
        new = set(self.new_versions(name))
        plan = []
        for v in self._versions(name):
            version, tags = str(v.version), v.tags or {}
            decision = tags.get(GATE_TAG)
            row = {"version": version, "decision": None if version in new else decision}
            if version in new:
                plan.append({**row, "action": "new", "reason": "not decided yet"})
                continue
            if decision != "undecided":
                plan.append({**row, "action": "decided", "reason": f"already {decision}"})
                continue
            no_check = (tags.get(UNDECIDED_CAUSE_TAG) == NO_CHECK if UNDECIDED_CAUSE_TAG in tags
                        else tags.get(FLAGGED_FRACTION_TAG) in (None, "", "None"))
            changed = [what for what, now, key in (("policy", policy_sha256, POLICY_SHA_TAG),
                                                   ("audit data", data_sha256, DATA_SHA_TAG))
                       if now and tags.get(key) != now]
            when = tags.get(CHECKED_AT_TAG) or "?"
            if no_check and changed:
                plan.append({**row, "action": "regate",
                             "reason": f"recorded undecided at {when} before its check ran (configuration or loading); "
                                       f"the {' and the '.join(changed)} changed since, so it is gated again"})
            else:
                why = ("before its check ran, under the same policy and audit data" if no_check
                       else "after its check ran (not enough evidence)")
                plan.append({**row, "action": "skip",
                             "reason": f"recorded undecided at {when} {why}; re-decide it with --version {version} "
                                       "--force, or register a fixed model as a new version"})
        return plan

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
            The model file: the one named by the ``model_file`` tag (registered by faux-checks,
            checked against its ``model_sha256`` tag), or, for a version logged with MLflow's own
            APIs, the file :func:`~faux_checks.registry.formats.mlflow_model_file` picks: the pytorch
            flavor's TorchScript / torch.export file, the file an ONNX, XGBoost, LightGBM or skops
            flavour's ``MLmodel`` names (:func:`~faux_checks.registry.flavors.flavor_model_file`),
            or a LoggedModel's single model file.
        feature_spec_path : Path or None
            The feature spec JSON (:func:`~faux_checks.registry.formats.feature_spec_file`), or None.

        Raises
        ------
        UnsafeModelError
            The version's model is a pickle (e.g. ``serialization_format="pickle"`` of an
            ``nn.Module``); nothing from it is executed; the message gives the safe recipes.
        InputError
            If the model or version does not exist, ``dst_dir`` is a file or a non-empty
            directory, the version's artifacts do not identify a single model file of a format
            the gate reads, or the downloaded model does not match its recorded sha256.

        Notes
        -----
        Only this registry's URI is used (never MLflow's global default, which would create
        ``./mlflow.db`` in the working directory).
        """
        mv = self._version(name, version)
        dst = Path(dst_dir)
        if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
            raise InputError(
                f"download destination {dst} exists and is not an empty directory; pass an empty or "
                "new directory (nothing is overwritten)"
            )
        dst.mkdir(parents=True, exist_ok=True)
        local = Path(with_retry(self._download_source, mv, dst))
        if local.is_file() and local.parent != dst:  # a single-file source: keep it at the top
            local = local.rename(dst / local.name)
        if local.is_dir() and local != dst:  # the source folder itself was copied: flatten it
            staging = local.rename(dst / f".staging-{uuid.uuid4().hex}")  # a file may be named like it
            for item in list(staging.iterdir()):
                item.rename(dst / item.name)
            staging.rmdir()
        files = sorted(p for p in dst.rglob("*") if p.is_file())
        what = f"version {mv.version} of '{name}'"
        model_file = mv.tags.get(MODEL_FILE_TAG)
        if model_file is None:  # logged with MLflow's own APIs: the MLmodel file or the content says
            model_path = mlflow_model_file(dst, what=what, exclude=mv.tags.get(SPEC_FILE_TAG))
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
        spec_path = feature_spec_file(dst, mv.tags.get(SPEC_FILE_TAG), what=what)
        return model_path, spec_path

    def _download_source(self, mv, dst: Path) -> str:
        """Download a version's source into ``dst`` through this registry's URI only.

        A ``models:/m-…`` source (MLflow 3's LoggedModel, what ``log_model(registered_model_name=…)``
        registers) is resolved here with this client: MLflow's own resolver asks the *global*
        tracking URI, i.e. ``sqlite:///mlflow.db`` in the working directory when none is set, which
        created a stray ``mlflow.db`` there and answered "Logged model … not found".
        """
        import mlflow

        uri = str(mv.source)
        if uri.startswith("models:/"):
            model_id = getattr(mv, "model_id", None) or _logged_model_id(uri)
            if model_id:
                uri = with_retry(self.client.get_logged_model, model_id).artifact_location
            else:  # models:/name/version: the registry's own download location
                uri = with_retry(self.client.get_model_version_download_uri, mv.name, str(mv.version))
        return mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=str(dst),
                                                   tracking_uri=self.tracking_uri, registry_uri=self.tracking_uri)

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


def _registered_files(name: str, model_path: str | Path,
                      feature_spec_path: str | Path | None) -> tuple[Path, Path | None]:
    """The model file and the feature spec file as paths, once both exist under different file names; raises
    :class:`InputError` otherwise, or for an empty ``name``."""
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
    return model_path, spec_path


def _version_tags(tags: Mapping[str, Any] | None, model_path: Path, spec_path: Path | None) -> dict[str, str]:
    """The version's tags: the caller's (as strings), the files' names and sha256, the model format unless given."""
    version_tags = {str(k): tag_value(v) for k, v in (tags or {}).items()}
    version_tags[MODEL_SHA_TAG] = model_sha256(model_path)
    version_tags[MODEL_FILE_TAG] = model_path.name
    version_tags.setdefault(MODEL_FORMAT_TAG, _model_format(model_path))     # a format the caller gave is kept
    if spec_path is not None:
        version_tags[SPEC_FILE_TAG] = spec_path.name
        version_tags[SPEC_SHA_TAG] = model_sha256(spec_path)
    return version_tags
