"""One streaming run: :func:`score_stream` (source -> sample -> plan -> score) and its :class:`StreamSummary`."""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..._validation import fmt_count
from ...errors import InputError
from ...inputs.tabular import FeatureSpec
from ...kinds import protected_kind
from ...provenance import jsonable, package_versions, utc_now
from ..bounds import FlaggedInterval, flagged_interval
from ..check_rules import CheckEvidence, check_rules
from ..decision import DecidedResult, decide, missing_protected_note, summary_line, undefined_note
from ..policy_schema import Policy
from .plan import ScoringPlan, prepare_scoring, resolve_feature_spec
from .sample import sample_pass
from .score import ScoresWriter, StreamCounts, score_pass
from .source import DataSource, check_rows

__all__ = ["StreamSummary", "score_stream", "summarize"]


@dataclass(frozen=True)
class StreamSummary(DecidedResult):
    """Outcome of a streaming (or sharded) fAux run, computed from exact running counts.

    Attributes
    ----------
    decision : {"passed", "failed", "undecided"}
        The gate's rules (:func:`~faux_checks.gate.check_rules.check_rules`) read by
        :func:`~faux_checks.gate.decision.decide`, as in ``run_check``; an enabled *gating* baseline
        tester is a rule ``not computed`` here (not run by the streaming scorer).
    reasons : list of str
    flagged_fraction : float
        Flagged rows, an undefined score counted as flagged, over every audited row.
    max_flagged_fraction, delta : float
    n_rows, n_individuals, n_undefined, n_flagged, n_missing_protected : int
        Rows read; audited rows; undefined scores; flagged rows; rows without a protected value.
    by_group : DataFrame
        ``n``, ``flagged``, ``flagged_fraction``, ``undefined``, ``mean_score`` per protected group.
    aux_quality : float
    aux_quality_metric : str
    out_path : str
        The scores output: one row per input row, in input order (a file; from the sharded flow a
        ``.parquet`` output is a dataset folder, :mod:`~faux_checks.gate.stream.output`).
    timings : dict
        Seconds: ``sample``, ``aux``, ``score``, ``merge``, ``total``, ``first_score`` (start to the
        first written score).
    notes : list of str
        How this run differs from ``run_check`` (see module docstring).
    provenance : dict
    interval : FlaggedInterval or None
        The flagged fraction's interval over rows and aux seeds (seeds scored on the training sample).
    rules : list of dict
        Every rule of the decision with its status.
    """

    decision: str
    reasons: list[str]
    flagged_fraction: float
    max_flagged_fraction: float
    delta: float
    n_rows: int
    n_individuals: int
    n_undefined: int
    n_flagged: int
    n_missing_protected: int
    by_group: pd.DataFrame
    aux_quality: float
    aux_quality_metric: str
    out_path: str
    timings: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    provenance: dict = field(default_factory=dict)
    interval: FlaggedInterval | None = None
    rules: list[dict] = field(default_factory=list)

    def __repr__(self) -> str:
        return summary_line(self)

    def to_dict(self) -> dict:
        """JSON-ready dict; NaN becomes None."""
        return jsonable({
            "decision": self.decision, "exit_code": self.exit_code, "reasons": self.reasons,
            "flagged_fraction": self.flagged_fraction, "flagged_fraction_defined": self.flagged_fraction_defined,
            "interval": None if self.interval is None else self.interval.to_dict(), "rules": self.rules,
            "max_flagged_fraction": self.max_flagged_fraction,
            "delta": self.delta, "n_rows": self.n_rows, "n_individuals": self.n_individuals,
            "n_undefined": self.n_undefined, "n_flagged": self.n_flagged,
            "n_missing_protected": self.n_missing_protected,
            "by_group": self.by_group.reset_index().to_dict(orient="records"),
            "aux_quality": self.aux_quality, "aux_quality_metric": self.aux_quality_metric,
            "out_path": self.out_path, "timings": self.timings, "notes": self.notes, "provenance": self.provenance,
        })


def summarize(counts: StreamCounts, plan: ScoringPlan, *, source: DataSource, out_path: str | Path,
              timings: dict | None = None, model_info: dict | None = None, extra_notes: Sequence[str] = ()) -> StreamSummary:
    """Decide from the merged counts (:func:`~faux_checks.gate.check_rules.check_rules`, :func:`~faux_checks.gate.decision.decide`); notes and provenance."""
    policy, faux = plan.policy, plan.policy.faux
    n, n_undefined, n_flagged = counts.n_individuals, counts.n_undefined, counts.n_flagged
    if counts.n_rows != plan.n_rows or counts.n_missing_protected != plan.n_missing_protected:
        raise InputError(
            f"the score pass read {fmt_count(counts.n_rows)} rows ({fmt_count(counts.n_missing_protected)} without a "
            f"protected value) but the sample pass {fmt_count(plan.n_rows)} ({fmt_count(plan.n_missing_protected)}); "
            "the data file changed during the run"
        )
    interval = flagged_interval(n_flagged + n_undefined, n, policy.decision.confidence, plan.aux.get("seeds"))
    gating = tuple(sorted(name for name, t in policy.testers.items() if t.enabled and t.gating))
    evidence = CheckEvidence(
        n=n, n_flagged=n_flagged, n_undefined=n_undefined,
        group_rows={g: int(k) for g, k in zip(counts.groups, counts.n, strict=False)}, holdout_rows=plan.aux["holdout_groups"],
        aux_metric=plan.aux["metric"], aux_intervals=plan.aux["intervals"], interval=interval, testers_not_run=gating,
        nothing_free=bool(plan.aux.get("nothing_free")), held_block=plan.aux.get("held_block"),
        group_flagged={g: float(f + u) for g, f, u in zip(counts.groups, counts.flagged, counts.undefined, strict=False)})
    outcome = decide(check_rules(evidence, policy))
    reasons = list(outcome.reasons)
    aux_quality = plan.aux["quality"]
    if n_undefined:
        reasons.append(undefined_note(n_undefined))
    if counts.n_missing_protected:
        reasons.append(missing_protected_note(counts.n_missing_protected))
    notes = [f"aux model {'given' if plan.aux['given'] else 'trained'} on a bottom-k sample of "
             f"{fmt_count(plan.aux['train_rows'])} rows (seeded hash of the row number, seed {policy.seed})",
             "every row is scored: policy.max_rows is not applied" if policy.max_rows is not None else None,
             "baseline testers and per-feature evidence are not computed by the streaming scorer"
             if any(t.enabled for t in policy.testers.values()) else "per-feature evidence is not computed",
             "continuous protected attribute grouped by the training sample's quartiles"
             if not protected_kind(plan.codec.kind).grouped else None,
             "IG baseline = mean of the training sample" if isinstance(plan.ig_baseline, np.ndarray) else None,
             *extra_notes]
    path = Path(source.path)
    stat = path.stat() if path.exists() else None
    provenance = {
        "checked_at": utc_now(),
        "seed": policy.seed, "policy_name": policy.name, "policy_sha256": policy.sha256(),
        "policy": policy.model_dump(mode="json"), "data_path": str(path), "data_format": source.format,
        "data_bytes": stat.st_size if stat else None,
        "data_mtime": _dt.datetime.fromtimestamp(stat.st_mtime, _dt.timezone.utc).isoformat() if stat else None,
        "n_input_rows": counts.n_rows, "chunk_rows": plan.chunk_rows, "n_chunks": counts.n_chunks,
        "feature_spec": plan.feature_spec.name, "n_features": plan.feature_spec.n_features,
        "variant": faux.variant, "target_output": plan.output.form, "target_class": plan.output.target_class,
        "unit": faux.unit if plan.output.form == "value" else None,
        "aux_output_space": plan.aux["output_space"], "aux_epochs_run": plan.aux["epochs_run"],
        "aux_given": plan.aux["given"], "aux_train_rows": plan.aux["train_rows"], "protected_kind": plan.codec.kind,
        "aux_intervals": plan.aux["intervals"], "aux_holdout_groups": plan.aux["holdout_groups"],
        "batch_probe": plan.aux.get("batch_probe"),
        "groups": list(plan.codec.groups), "max_score": counts.max_score, "first_score_at": counts.first_score_at,
        "packages": package_versions(),
        **(model_info or {}),
    }
    return StreamSummary(
        decision=outcome.decision, reasons=reasons, flagged_fraction=interval.fraction,
        max_flagged_fraction=faux.max_flagged_fraction, delta=faux.delta, n_rows=counts.n_rows,
        n_individuals=n, n_undefined=n_undefined, n_flagged=n_flagged,
        n_missing_protected=counts.n_missing_protected, by_group=counts.by_group(), aux_quality=aux_quality,
        aux_quality_metric=plan.aux["metric"], out_path=str(out_path), timings=dict(timings or {}),
        notes=[x for x in notes if x], provenance=provenance, interval=interval, rules=outcome.rules,
    )


def score_stream(
    target_model,
    source_path: str | Path,
    *,
    policy: Policy,
    out_path: str | Path,
    feature_spec: FeatureSpec | None = None,
    aux_model=None,
    chunk_rows: int | None = None,
    progress: bool = False,
    model_info: dict | None = None,
    sep: str | None = None,
    thousands: str | None = None,
    decimal: str | None = None,
) -> StreamSummary:
    """Score every row of a large Parquet/CSV file with fAux in bounded memory, in this process.

    Parameters
    ----------
    target_model : torch.nn.Module or TorchScript module
        Maps the encoded features (n, d) to the declared output (policy ``target_output``).
    source_path : str or Path
        ``.parquet`` (read by row group) or CSV (``pd.read_csv(chunksize=...)``). Not modified.
    policy : Policy
        δ, limits, aux settings, seed; ``policy.scale.chunk_rows`` is the default chunk size.
    out_path : str or Path
        New scores file (``.parquet`` or CSV): ``row``, ``lic_score``, ``flagged``, ``status``
        (``scored`` / ``undefined`` / ``not_audited``), ``group``; one row per input row, in input
        order. Never overwritten; written under ``<name>.partial`` until the run succeeds.
    feature_spec : FeatureSpec, optional
        Without it the numeric columns of the first chunk are used as they are (minus protected
        and label).
    aux_model : AuxiliaryModel or torch module, optional
        Given auxiliary model; trained once on the bottom-k sample when omitted (module docstring).
    chunk_rows : int, optional
        Rows per chunk; bounds memory (default ``policy.scale.chunk_rows``).
    progress : bool
        Progress bars (aux training, scores).
    model_info : dict, optional
        Added to the provenance.
    sep : str, optional
        CSV delimiter; default sniffed from the file's head (:func:`faux_checks.inputs.io.sniff_sep`).
    thousands : str, optional
        The CSV numbers' thousands mark (``","`` reads ``1,234.5`` as 1234.5; pandas ``read_csv(thousands=...)``);
        it may equal the delimiter for quoted numbers (:func:`faux_checks.inputs.io.thousands_mark`); every marked
        value is checked for groups of 3 digits (``12,34`` is refused: :func:`faux_checks.inputs.io.check_thousands`).
    decimal : str, optional
        The CSV numbers' decimal mark, ``","`` or ``"."``; default sniffed with the delimiter
        (:func:`faux_checks.inputs.io.csv_number_marks`: a ``;``-separated file of ``0,189`` reads 0.189).

    Returns
    -------
    StreamSummary

    Raises
    ------
    InputError
        As :func:`faux_checks.gate.check.run_check`, plus an existing ``out_path``; a policy with
        ``[[attributes]]`` (:func:`~.attributes.score_stream_attributes` scores those).

    Notes
    -----
    fAux: Castiglione et al. 2022, eq. 9-10 (arXiv 2210.06288). Peak memory ≈ the training sample
    (``max_train_rows`` × d float32) + one chunk's gradients and Jacobians.
    """
    t0 = time.perf_counter()
    t_wall = time.time()
    if policy.protected is None:
        raise InputError(f"score_stream checks one protected attribute; this policy declares "
                         f"{len(policy.attribute_names)} ({', '.join(policy.attribute_names)}): score them with "
                         "faux_checks.gate.stream.attributes.score_stream_attributes (one pass for all of them)")
    chunk_rows = int(chunk_rows or policy.scale.chunk_rows)
    if Path(out_path).exists():
        raise InputError(f"{out_path} exists already; choose another output path (nothing is overwritten)")
    from ...inputs.estimators import as_target

    target_model, feature_spec = as_target(target_model, feature_spec)   # a skops Pipeline brings its own spec
    source = DataSource.open(source_path, sep=sep, thousands=thousands, decimal=decimal)
    spec = resolve_feature_spec(source, policy, feature_spec, chunk_rows=chunk_rows)
    check_rows(source, spec, chunk_rows=max(chunk_rows, 65_536))
    sample = sample_pass(source, policy=policy, feature_spec=spec, chunk_rows=chunk_rows)
    t1 = time.perf_counter()
    plan, aux = prepare_scoring(target_model, sample, policy=policy, feature_spec=spec, aux_model=aux_model,
                                chunk_rows=chunk_rows, progress=progress)
    del sample
    t2 = time.perf_counter()
    writer = ScoresWriter(out_path)
    try:
        counts = score_pass(target_model, aux, source, plan, writer, progress=progress)
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    t3 = time.perf_counter()
    timings = {"sample": t1 - t0, "aux": t2 - t1, "score": t3 - t2, "merge": 0.0, "total": t3 - t0,
               "first_score": (counts.first_score_at - t_wall) if counts.first_score_at else None}
    return summarize(counts, plan, source=source, out_path=out_path, timings=timings,
                     model_info={"workers": 0, **(model_info or {})})
