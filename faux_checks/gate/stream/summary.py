"""One protected attribute's streamed outcome: :class:`StreamSummary`, decided from exact running counts by :func:`attribute_summary`.

A streamed or sharded run over N ≥ 1 attributes holds one summary per attribute
(:class:`~.outcome.StreamSection`) and decides once over them (:func:`~.outcome.summarize`).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..._validation import fmt_count
from ...errors import InputError
from ...kinds import protected_kind
from ...provenance import jsonable, package_versions, utc_now
from ..bounds import FlaggedInterval, flagged_interval
from ..check_rules import CheckEvidence, check_rules
from ..decision import DecidedResult, decide, missing_protected_note, summary_line, undefined_note
from .plan import ScoringPlan
from .score import StreamCounts
from .source import DataSource

__all__ = ["StreamSummary", "attribute_summary"]


@dataclass(frozen=True)
class StreamSummary(DecidedResult):
    """Outcome of a streaming (or sharded) fAux run, computed from exact running counts.

    Attributes
    ----------
    decision : {"passed", "failed", "undecided"}
        The gate's rules (:func:`~faux_checks.gate.check_rules.check_rules`) read by
        :func:`~faux_checks.gate.decision.decide`, as in ``check_one_attribute``; an enabled *gating* baseline
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
        How this run differs from ``check_one_attribute`` (see module docstring).
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


def attribute_summary(counts: StreamCounts, plan: ScoringPlan, *, source: DataSource, out_path: str | Path,
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
