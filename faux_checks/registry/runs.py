"""Reading the decision trail's MLflow runs: the gate's and the audit's decision runs, their artifacts, a recorded aux model.

A run is a decision unless a killed gate or audit left it (``fairness_run_state`` = ``recording`` and not
named by its version, or ``abandoned``): one decision, one run. Writing the runs and the version tags is
:mod:`faux_checks.registry.trail`.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..gate.decision import DECISIONS
from .client import AUDIT_EXPERIMENT, AUDIT_TAG, GATE_EXPERIMENT, GATE_TAG, RegistryClient, error_code, name_filter, with_retry
from .records import AUDIT_RUN_ID_TAG, AUX_KEY_TAG, AUX_SEED_KEYS_TAG, RUN_ID_TAG, RUN_STATE_TAG

__all__ = ["RunReader", "RECORDS_FOLDER", "RUN_RECORDING", "RUN_DECIDED", "RUN_ABANDONED"]

#: The artifact folder of a gate run holding its records (flows/gate.py ``RECORDS``).
RECORDS_FOLDER = "records"
#: The values of RUN_STATE_TAG (records.py): a run being recorded, named by its version, or left by a killed gate.
RUN_RECORDING, RUN_DECIDED, RUN_ABANDONED = "recording", "decided", "abandoned"


class RunReader(RegistryClient):
    """The decision runs read back (half of :class:`~faux_checks.registry.trail.DecisionTrail`, which writes them)."""

    def _search_runs(self, kind: str, name: str, *, version: str | None = None) -> list:
        """Every run of ``name`` (and ``version``) in the gate or audit experiment, oldest first."""
        exp = with_retry(self.client.get_experiment_by_name, GATE_EXPERIMENT if kind == "gate" else AUDIT_EXPERIMENT)
        if exp is None:
            return []
        run_filter = name_filter(name).replace("name", "tags.`faux_checks.model_name`", 1)
        if version is not None:
            run_filter += f" AND tags.`faux_checks.model_version` = '{int(version)}'"
        runs, token = [], None
        while True:
            page = with_retry(self.client.search_runs, [exp.experiment_id], filter_string=run_filter,
                              order_by=["attributes.start_time ASC"], max_results=1000, page_token=token)
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    def _decision_runs(self, kind: str, name: str) -> list[dict[str, Any]]:
        """:meth:`gate_runs` / :meth:`audit_runs`: the runs that are decisions (module constant RUN_STATE_TAG)."""
        key, own = (RUN_ID_TAG, GATE_TAG) if kind == "gate" else (AUDIT_RUN_ID_TAG, AUDIT_TAG)
        named = {(mv.tags or {}).get(key) for mv in self._versions(name)   # a half-written version names nothing
                 if (mv.tags or {}).get(own) in DECISIONS} - {None, ""}
        rows: list[dict[str, Any]] = []
        for run in self._search_runs(kind, name):
            tags = {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.")}
            state = tags.get(RUN_STATE_TAG)
            if state == RUN_ABANDONED or (state == RUN_RECORDING and run.info.run_id not in named):
                continue                     # a killed gate's run: never a second decision
            rows.append({
                **tags,
                "run_id": run.info.run_id,
                "version": tags.get("faux_checks.model_version"),
                "started_at": _dt.datetime.fromtimestamp(run.info.start_time / 1000, _dt.timezone.utc).isoformat(
                    timespec="seconds"),
                "metrics": dict(run.data.metrics),
            })
        return rows

    def gate_runs(self, name: str) -> list[dict[str, Any]]:
        """Every gate decision run of ``name``, oldest first (rows as :meth:`audit_runs`).

        A run left by a gate killed while recording (``fairness_run_state`` = ``recording``, not named by its
        version's ``fairness_run_id``) or marked ``abandoned`` is left out: one decision, one run. Runs logged before the state tag existed count as decisions.
        """
        return self._decision_runs("gate", name)

    def audit_runs(self, name: str) -> list[dict[str, Any]]:
        """Every drift audit of ``name`` logged by :meth:`log_audit_run`, oldest first.

        Returns
        -------
        list of dict
            Per run: ``run_id``, ``version``, ``started_at`` (UTC, ISO 8601), the run's tags
            (``decision``, ``reason``, ...; ``mlflow.*`` left out) and its metrics under
            ``metrics``. Empty when the model was never audited. A run an audit killed while recording left
            (``recording`` and not its version's ``fairness_audit_run_id``, or ``abandoned``) is left out.
        """
        return self._decision_runs("audit", name)

    def download_run_artifacts(self, run_id: str, artifact_path: str, dst_dir: str | Path) -> Path:
        """Download ``artifact_path`` of a run (e.g. a gate run's ``records``) into ``dst_dir``, through this registry's URI.

        Returns
        -------
        Path
            The local copy (a folder or a file).

        Raises
        ------
        InputError
            If the run does not exist or holds no such artifact.
        """
        import mlflow

        self.run_artifact_uri(run_id)  # InputError naming the run when it does not exist
        try:
            local = with_retry(mlflow.artifacts.download_artifacts, run_id=run_id, artifact_path=artifact_path,
                               dst_path=str(dst_dir), tracking_uri=self.tracking_uri)
        except Exception as exc:
            if error_code(exc) in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE") or isinstance(exc, OSError):
                raise InputError(f"run {run_id} has no artifact {artifact_path!r} in {self.tracking_uri} "
                                 f"({type(exc).__name__}: {exc})") from exc
            raise
        return Path(local)

    def find_aux_record(self, key: str, dst_dir: str | Path) -> tuple[Path, str] | None:
        """The newest gate run whose recorded auxiliary model has ``key``, downloaded: ``(folder, "run <id>")`` or None.

        One ``search_runs`` on the gate experiment (tag ``fairness_aux_key``, set by the gate flow on a run whose
        records hold exactly one auxiliary model), then the two record files of that run only; for an extra aux
        seed's key, a second search on ``fairness_aux_seed_keys`` and that seed's two files
        (``aux_model_seed<k>.*``, which :func:`~faux_checks.gate.aux_cache.restore_recorded` reads for that seed).

        Raises
        ------
        InputError
            The run's record files cannot be downloaded (the caller trains instead).
        """
        if not all(ch in "0123456789abcdef" for ch in key):
            raise InputError(f"an auxiliary-model key is a sha256 hex digest, got {key!r}")
        exp = with_retry(self.client.get_experiment_by_name, GATE_EXPERIMENT)
        if exp is None:
            return None
        runs = with_retry(self.client.search_runs, [exp.experiment_id], filter_string=f"tags.{AUX_KEY_TAG} = '{key}'",
                          order_by=["attributes.start_time DESC"], max_results=1)
        names = ("aux_model.pt", "aux_model.json")
        if not runs:     # an extra seed's model: the run lists it in its seed keys
            runs = with_retry(self.client.search_runs, [exp.experiment_id],
                              filter_string=f"tags.{AUX_SEED_KEYS_TAG} LIKE '%:{key}%'",
                              order_by=["attributes.start_time DESC"], max_results=1)
            if not runs:
                return None
            listed = (p.split(":", 1) for p in runs[0].data.tags.get(AUX_SEED_KEYS_TAG, "").split() if ":" in p)
            pairs = {k: s for s, k in listed}                       # key -> seed
            seed = pairs.get(key)
            if seed is None or not seed.isdigit():
                raise InputError(f"run {runs[0].info.run_id}'s tag {AUX_SEED_KEYS_TAG} does not list key {key[:12]}")
            names = (f"aux_model_seed{seed}.pt", f"aux_model_seed{seed}.json")
        run_id = runs[0].info.run_id
        folder = Path(dst_dir) / f"aux-{run_id}"
        local = [self.download_run_artifacts(run_id, f"{RECORDS_FOLDER}/{name}", folder) for name in names]
        if local[0].parent != local[1].parent:
            raise InputError(f"run {run_id}'s aux record files downloaded to two folders: {local}")
        return local[0].parent, f"run {run_id}"

    def run_artifact_uri(self, run_id: str) -> str:
        """Artifact URI of a run (where :meth:`log_gate_run` put the report files).

        Raises
        ------
        InputError
            If no run has this id.
        """
        try:
            run = with_retry(self.client.get_run, run_id)
        except Exception as exc:
            if error_code(exc) in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
                raise InputError(f"no MLflow run with id {run_id!r} in {self.tracking_uri}") from exc
            raise
        return run.info.artifact_uri
