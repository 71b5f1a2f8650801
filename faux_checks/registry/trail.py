"""The decision trail: the gate's and the audit's decisions as version tags, MLflow runs and the alias.

A version the gate has not decided yet is **new**; the gate marks it ``running``, decides, then
records the decision as version tags (``fairness_gate`` = ``passed`` / ``failed`` /
``undecided``, plus the numbers behind it); only a version whose recorded decision is ``passed``
can receive the deployment **alias** (``models:/name@deployable``); every decision also gets an
MLflow **run** holding metrics, parameters and the report files: the audit trail.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping

from ..errors import InputError, UndecidableError
from ..gate.decision import DECISIONS
from ..provenance import utc_now
from .client import (
    AUDIT_EXPERIMENT,
    AUDIT_TAG,
    DEFAULT_ALIAS,
    GATE_EXPERIMENT,
    GATE_TAG,
    PENDING,
    PROMOTION_TAG,
    RUNNING,
    error_code,
    tag_value,
    with_retry,
)
from .records import (
    ATTRIBUTE_TAG_PREFIX,
    ATTRIBUTES_TAG,
    CHECKED_AT_TAG,
    DELTA_TAG,
    DECIDING_ATTRIBUTE_TAG,
    DEMOTED_ALIAS_TAG,
    DEMOTED_AT_TAG,
    POLICY_SHA_TAG,
    PREVIOUS_GATE_TAG,
    PROMOTED_AT_TAG,
    PROMOTION_KEPT_ON_TAG,
    RUN_STATE_TAG,
    STARTED_AT_TAG,
    SUPERSEDED_BY_TAG,
    AuditRecord,
    GateRecord,
)
from .runs import RUN_ABANDONED, RUN_DECIDED, RUN_RECORDING, RunReader

__all__ = ["DecisionTrail"]

# MLflow REST limits per log_batch call
_BATCH_METRICS, _BATCH_PARAMS = 1000, 100
_MAX_PARAM_CHARS, _MAX_RUN_TAG_CHARS = 6000, 8000  # longer values are truncated by MLflow


class DecisionTrail(RunReader):
    """Decisions recorded on versions and as MLflow runs (half of :class:`~faux_checks.registry.Registry`)."""

    def mark_running(self, name: str, version: str | int) -> None:
        """Tag a version ``fairness_gate=running`` (it stays new until a decision is recorded).

        A version that was decided before (a re-gate) also gets ``fairness_previous_gate``: the earlier
        decision, its time, δ and policy hash.

        Raises
        ------
        InputError
            If the model or version does not exist.
        """
        mv = self._version(name, version)
        tags = {STARTED_AT_TAG: utc_now()}
        previous = mv.tags.get(GATE_TAG)
        if previous in DECISIONS:  # a re-gate: keep what was decided before, in one line
            tags[PREVIOUS_GATE_TAG] = (
                f"{previous} at {mv.tags.get(CHECKED_AT_TAG) or '?'} (δ={mv.tags.get(DELTA_TAG) or '?'}, "
                f"policy {(mv.tags.get(POLICY_SHA_TAG) or '?')[:12]})")
        tags[GATE_TAG] = RUNNING
        self._set_version_tags(name, mv.version, tags)

    def _decision_tags(self, name: str, version, decision: str, extra, own_tag: str):
        """The version and the ``extra`` tags (as strings, without ``own_tag``) of a decision being recorded.

        Raises
        ------
        InputError
            If ``decision`` is not one of the three outcomes, or the model or version does not exist.
        """
        if decision not in DECISIONS:
            raise InputError(f"decision must be one of {list(DECISIONS)}, got {decision!r}")
        mv = self._version(name, version)
        tags = {str(k): tag_value(v) for k, v in (extra or {}).items()}
        tags.pop(own_tag, None)
        return mv, tags

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
        interval: Mapping[str, Any] | None = None,
    ) -> None:
        """Record the gate's decision on a version as tags.

        Writes ``fairness_flagged_fraction``, its interval (``fairness_flagged_fraction_lower``,
        ``fairness_flagged_fraction_upper``, ``fairness_confidence``, ``fairness_aux_seed_spread``),
        ``fairness_delta``, ``fairness_aux_quality``, ``fairness_report``, ``fairness_run_id``,
        ``fairness_checked_at`` (UTC, ISO 8601), the ``extra`` tags as given, and last
        ``fairness_gate``: a gate killed while recording leaves the version ``running``, hence new.

        A re-gate leaves nothing of an earlier several-attribute gate behind: the version's per-attribute
        tags (``fairness_attr_<key>_*``, their ``_uri`` record tags included) and ``fairness_attributes`` /
        ``fairness_deciding_attribute`` that ``extra`` does not set again are written ``""``.

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
        interval : mapping, optional
            The check's ``interval`` (``lower``, ``upper``, ``confidence``, ``seeds``); None writes ``""``.

        Raises
        ------
        InputError
            If ``decision`` is not one of the three outcomes, or the model or version does not exist.
        """
        mv, tags = self._decision_tags(name, version, decision, extra, GATE_TAG)
        stale = {k: "" for k in (mv.tags or {}) if k not in tags and (k.startswith(ATTRIBUTE_TAG_PREFIX) or k in
                                                                      (ATTRIBUTES_TAG, DECIDING_ATTRIBUTE_TAG))}
        seeds = (interval or {}).get("seeds") or {}
        record = GateRecord(decision=decision, flagged_fraction=flagged_fraction,
                            flagged_fraction_lower=(interval or {}).get("lower"),
                            flagged_fraction_upper=(interval or {}).get("upper"),
                            confidence=(interval or {}).get("confidence"), aux_seed_spread=seeds.get("spread"),
                            delta=delta, aux_quality=aux_quality, report=report_uri, run_id=run_id,
                            checked_at=utc_now(), extra={**stale, **tags})
        self._set_version_tags(name, mv.version, record.to_tags())   # fairness_gate last: dict order is the write order
        self._settle_runs(name, mv.version, run_id, kind="gate")

    def promote(self, name: str, version: str | int, alias: str = DEFAULT_ALIAS, *, allow_rollback: bool = False) -> str:
        """Point ``alias`` at ``version``, only if its recorded decision is ``passed``, never backwards.

        The alias stays on the highest version that passed: when it is on a
        newer version whose recorded decision is ``passed``, re-gating an older one leaves it
        there (a silent production rollback otherwise) unless ``allow_rollback``; the older
        version's ``fairness_promotion`` is then ``superseded`` (so it is not new again).

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
        allow_rollback : bool
            Move the alias to ``version`` even when a newer passed version holds it.

        Returns
        -------
        str
            The version the alias points at afterwards (``version``, or the newer one it stayed on).

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
        holder = (self._registered_model(name).aliases or {}).get(alias)
        if (not allow_rollback and holder is not None and int(holder) > int(mv.version)
                and (self._version(name, holder).tags or {}).get(GATE_TAG) == "passed"):
            if mv.tags.get(PROMOTION_TAG) == PENDING:
                self._set_version_tags(name, mv.version, {PROMOTION_TAG: "superseded",
                                                          PROMOTION_KEPT_ON_TAG: str(holder)})
            return str(holder)
        with_retry(self.client.set_registered_model_alias, name, alias, str(mv.version))
        if mv.tags.get(PROMOTION_TAG) == PENDING:
            self._set_version_tags(name, mv.version, {PROMOTED_AT_TAG: utc_now(), PROMOTION_TAG: "done"})
        return str(mv.version)

    def demote(self, name: str, version: str | int, alias: str = DEFAULT_ALIAS) -> bool:
        """Remove ``alias`` from ``version`` if it points there (a re-gate that no longer passes).

        Returns
        -------
        bool
            True when the alias was removed (tag ``fairness_demoted_at`` set), False when it
            pointed elsewhere or nowhere.

        Raises
        ------
        InputError
            If the model or version does not exist.
        """
        mv = self._version(name, version)
        aliases = self._registered_model(name).aliases or {}
        if str(aliases.get(alias)) != str(mv.version):
            return False
        with_retry(self.client.delete_registered_model_alias, name, alias)
        self._set_version_tags(name, mv.version, {DEMOTED_AT_TAG: utc_now(), DEMOTED_ALIAS_TAG: alias})
        return True

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
        faux_checks._files.IncompleteRecordError
            The uploaded artifacts do not match the files of ``report_dir`` (:meth:`_check_uploaded`);
            the run is then marked FAILED, as on any other error.
        """
        from mlflow.entities import Param

        if kind not in ("gate", "audit"):
            raise InputError(f"kind must be 'gate' or 'audit', got {kind!r}")
        mv = self._version(name, version)
        report_dir = Path(report_dir)
        if not report_dir.is_dir():
            raise InputError(f"report directory {report_dir} does not exist (log_gate_run '{name}' v{mv.version})")
        metric_rows = _metric_rows(metrics, now_ms=int(time.time() * 1000))
        param_rows = [Param(str(k), tag_value(v)) for k, v in params.items()]
        run_tags = {str(k): tag_value(v) for k, v in tags.items()}
        _refuse_truncation({p.key: p.value for p in param_rows}, run_tags)
        run_tags.update({"faux_checks.model_name": name, "faux_checks.model_version": str(mv.version),
                         "faux_checks.kind": kind, RUN_STATE_TAG: RUN_RECORDING})   # 'decided' once the version names it

        experiment_id = self._experiment_id(GATE_EXPERIMENT if kind == "gate" else AUDIT_EXPERIMENT)
        run = with_retry(
            self.client.create_run, experiment_id, run_name=f"{name}-v{mv.version}-{kind}", tags=run_tags
        )
        run_id = run.info.run_id
        self._fill_run(run_id, metric_rows, param_rows, report_dir, what=f"'{name}' v{mv.version}")
        return run_id

    def _fill_run(self, run_id: str, metric_rows: list, param_rows: list, report_dir: Path, *, what: str) -> None:
        """Log the metrics and parameters in batches and upload ``report_dir``, checked whole; the run ends FINISHED,
        or FAILED on any error (a value MLflow rejects raised as :class:`InputError` naming ``what``)."""
        try:
            for i in range(0, len(metric_rows), _BATCH_METRICS):
                with_retry(self.client.log_batch, run_id, metrics=metric_rows[i : i + _BATCH_METRICS])
            for i in range(0, len(param_rows), _BATCH_PARAMS):
                with_retry(self.client.log_batch, run_id, params=param_rows[i : i + _BATCH_PARAMS])
            with_retry(self.client.log_artifacts, run_id, str(report_dir))
            self._check_uploaded(run_id, report_dir)
        except BaseException as exc:
            with_retry(self.client.set_terminated, run_id, "FAILED")
            if error_code(exc) == "INVALID_PARAMETER_VALUE":
                raise InputError(f"MLflow rejected a value of the gate run for {what}: {exc}") from exc
            raise
        with_retry(self.client.set_terminated, run_id, "FINISHED")

    def _check_uploaded(self, run_id: str, report_dir: Path) -> None:
        """Raise unless the run's artifacts hold every file of ``report_dir`` at its size (a record is whole
        in the store, not only on this disk, before any tag points at it).

        Raises
        ------
        faux_checks._files.IncompleteRecordError
            Files missing from the store or stored at another size (named, with both sizes); an
            I/O problem, so the gate's ``record`` step is retried.
        """
        from .._files import IncompleteRecordError

        local = {p.relative_to(report_dir).as_posix(): p.stat().st_size for p in report_dir.rglob("*") if p.is_file()}
        stored: dict[str, int | None] = {}
        folders: list[str | None] = [None]
        while folders:
            for info in with_retry(self.client.list_artifacts, run_id, folders.pop()):
                if info.is_dir:
                    folders.append(info.path)
                else:
                    stored[info.path] = info.file_size
        wrong = [f"{name} ({'absent' if name not in stored else f'{stored[name]:,} bytes'}, {size:,} written)"
                 for name, size in sorted(local.items())
                 if name not in stored or (stored[name] is not None and stored[name] != size)]
        if wrong:
            raise IncompleteRecordError(f"run {run_id}: the artifact store does not hold {len(wrong)} of the "
                                        f"{len(local)} record files whole: {'; '.join(wrong[:10])}")

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
        data_at: str | None = None,
        started_at: str | None = None,
    ) -> AuditRecord | None:
        """Record the latest drift audit of a version as tags (the gate's tags are left alone), unless the version
        holds an audit of newer data.

        Writes ``fairness_audit_reason`` (the rule that decided, cut to 1,000 characters),
        ``fairness_audit_report``, ``fairness_audit_run_id``, ``fairness_audit_at`` (UTC), the order of audits
        ``fairness_audit_data_at`` (``data_at``: when the audited batch was written, its file's modification time)
        and ``fairness_audit_started_at`` (``started_at``: when the audit started), both UTC ISO 8601, the ``extra``
        tags as given, and last ``fairness_audit`` = ``decision``.

        Audits are ordered by their data and start, not by when they finish
        (:func:`faux_checks.registry.audit_order.is_older`): an audit of an older batch that finishes after an
        audit of a newer one writes no tag; its run stays in the audit history, ``decided`` and tagged
        ``fairness_superseded_by`` the standing audit's run. The check reads the version's tags just before
        writing; two audits of one version writing at the same moment are kept apart by the deployment's
        concurrency limit (``faux_checks_flows.deployments``), not here.

        Returns
        -------
        AuditRecord or None
            None when this audit was written; else the newer audit the version holds, left as it is.

        Raises
        ------
        InputError
            If ``decision`` is not one of the three outcomes, or the model or version does not exist.
        """
        from .audit_order import is_older

        mv, tags = self._decision_tags(name, version, decision, extra, AUDIT_TAG)
        record = AuditRecord(decision=decision, reason=reason, report=report_uri, run_id=run_id, at=utc_now(),
                             extra=tags, flow_tags=False, data_at=data_at, started_at=started_at)
        standing = AuditRecord.from_tags(mv.tags or {})
        if is_older(record, standing):
            try:
                with_retry(self.client.set_tag, run_id, RUN_STATE_TAG, RUN_DECIDED)
                if standing.run_id:
                    with_retry(self.client.set_tag, run_id, SUPERSEDED_BY_TAG, standing.run_id)
            except Exception as exc:  # noqa: BLE001 - the version's tags are what counts; the run is read as recording
                import logging

                logging.getLogger(__name__).warning("%s v%s: audit run %s not settled (%s)", name, mv.version, run_id, exc)
            return standing
        self._set_version_tags(name, mv.version, record.to_tags())   # fairness_audit last, as record_decision does
        self._settle_runs(name, mv.version, run_id, kind="audit")
        return None

    def _settle_runs(self, name: str, version, run_id: str, *, kind: str) -> list[str]:
        """Mark ``run_id`` ``decided`` and every other run of this version and kind still ``recording`` (left by
        a killed gate or audit) ``abandoned``, superseded by ``run_id``; returns the abandoned run ids.

        Best effort after the version's tags are written (the decision stands): a run left ``recording`` is
        not read as a decision anyway (:meth:`gate_runs`, :meth:`audit_runs`) unless the version names it.
        """
        import logging

        try:
            with_retry(self.client.set_tag, run_id, RUN_STATE_TAG, RUN_DECIDED)
            abandoned = [r.info.run_id for r in self._search_runs(kind, name, version=str(version))
                         if r.info.run_id != run_id and r.data.tags.get(RUN_STATE_TAG) == RUN_RECORDING]
            for other in abandoned:
                with_retry(self.client.set_tag, other, SUPERSEDED_BY_TAG, run_id)
                with_retry(self.client.set_tag, other, RUN_STATE_TAG, RUN_ABANDONED)
            return abandoned
        except Exception as exc:  # noqa: BLE001 - the decision is recorded; readers skip unsettled runs
            logging.getLogger(__name__).warning("%s v%s: runs not settled after run %s (%s)", name, version, run_id, exc)
            return []


def _metric_rows(metrics: Mapping[str, float | None], *, now_ms: int) -> list:
    """One MLflow ``Metric`` per number (numpy / torch scalars too), None values left out; :class:`InputError` for a
    value that is not a number."""
    from mlflow.entities import Metric

    rows = []
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
        rows.append(Metric(str(key), number, now_ms, 0))
    return rows


def _refuse_truncation(params: Mapping[str, str], tags: Mapping[str, str]) -> None:
    """MLflow would silently truncate longer values (with a log warning): raise :class:`InputError` instead."""
    for what, values, limit in (("parameter", params, _MAX_PARAM_CHARS), ("tag", tags, _MAX_RUN_TAG_CHARS)):
        for key, text in values.items():
            if len(text) > limit:
                raise InputError(
                    f"gate run {what} {key!r} has {len(text):,} characters, over MLflow's limit of "
                    f"{limit:,}; write it to a file in report_dir instead"
                )
