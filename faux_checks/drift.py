"""Drift audit of a deployed model version: the data it was gated on vs a current batch.

:func:`run_audit` makes three comparisons and one decision:

1. **Column drift** (Evidently ``DataDriftPreset``, per-column tests) over the target's input
   columns, the protected attribute and the other columns both batches share (the label is
   left to step 3). Columns are screened first (bad-inputs case C04): a column that is absent or
   entirely empty in a batch is *skipped* with the reason; a column that mixes value types
   (strings and integers) is compared as text categories; a numeric column that is constant in
   the reference is compared as "that value" vs "any other value" (Evidently's normed
   Wasserstein distance divides by the reference's standard deviation, 0 there); a column
   constant in both batches is compared here (same value: no drift). Every such choice is a
   note on the column, in the report and in the log.
2. **Fairness drift**: the fAux check (:func:`faux_checks.gate.check.run_check`) on both batches with
   the same policy and seed (at most ``[audit] max_rows`` rows each, a seeded sample): flagged
   fraction overall and per protected group, and a two-sample Kolmogorov-Smirnov test on the
   defined LIC scores (scipy ``ks_2samp``).
3. **Classification quality** of the target model (Evidently ``ClassificationPreset``) when the
   policy names a label column that both batches hold.

Decision (policy ``[audit]``, :class:`~faux_checks.gate.policy.AuditSettings`):

- ``failed`` when any limit is exceeded: the protected attribute drifted; the share of drifted
  feature/protected columns is above ``max_drifted_share``; the current fAux check fails the
  gate's own rule; the flagged fraction rose by more than ``max_flagged_fraction_increase``
  (overall) or ``max_group_flagged_fraction_increase`` (a group with at least
  ``min_group_rows`` rows in both batches); the KS test on the scores has p <
  ``score_ks_pvalue`` with a statistic of at least ``score_ks_min_statistic``; the ROC-AUC fell
  by more than ``max_roc_auc_drop`` (when set);
- ``undecided`` when no limit is exceeded but a required comparison could not be computed
  (current batch below ``min_rows``, a fAux check that could not run or was undecided, the
  protected column not comparable, ...);
- ``passed`` otherwise.

This is the only module that imports Evidently, lazily (its import takes 4-7 s).
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._validation import as_frame, fmt_count
from .errors import FauxChecksError, InputError
from .gate.check import run_check
from .gate.decision import EXIT_CODES
from .gate.policy import AuditSettings, Policy
from .gate.result import SCHEMA_VERSION, CheckResult
from .inputs.tabular import FeatureSpec
from .provenance import data_sha256, installed_versions, jsonable, package_versions

__all__ = [
    "AuditResult",
    "ClassificationQuality",
    "ColumnDrift",
    "DriftResult",
    "FairnessDrift",
    "classification_quality",
    "column_drift",
    "decide_audit",
    "fairness_drift",
    "run_audit",
    "screen_columns",
]

logger = logging.getLogger(__name__)

_TARGET, _PREDICTION = "__target__", "__prediction__"  # classification columns (never user names)
#: Integrations whose versions an audit records next to the core packages.
OPTIONAL_PACKAGES = ("evidently", "scipy", "prefect", "mlflow", "great-expectations", "matplotlib", "jsonschema")


# ---------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class ColumnDrift:
    """Drift of one column.

    Attributes
    ----------
    column : str
    role : {"feature", "protected", "other"}
        A target input, the protected attribute, or another column both batches share
        (reported, not counted in the drifted share).
    status : {"compared", "skipped"}
    kind : {"numeric", "categorical"} or None
    method : str or None
        Evidently's stat test (``"Wasserstein distance (normed)"``, ``"Jensen-Shannon distance"``,
        ...) or ``"identical constant"`` / ``"different constants"`` for the cases decided here.
    score, threshold : float or None
        The test's statistic and its threshold (a p-value test drifts below it, a distance above).
    drifted : bool or None
        None when skipped.
    reference_missing, current_missing : int
        Missing values in each batch.
    note : str
        Why the column was skipped or how it was prepared (C04); empty when nothing special.
    """

    column: str
    role: str
    status: str
    kind: str | None = None
    method: str | None = None
    score: float | None = None
    threshold: float | None = None
    drifted: bool | None = None
    reference_missing: int = 0
    current_missing: int = 0
    note: str = ""


@dataclass(frozen=True)
class DriftResult:
    """Column drift of a current batch against the reference (step 1 of :func:`run_audit`)."""

    columns: list[ColumnDrift]
    n_reference: int
    n_current: int
    html_path: str | None = None
    error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def counted(self) -> list[ColumnDrift]:
        """Compared feature and protected columns (the denominator of the drifted share)."""
        return [c for c in self.columns if c.status == "compared" and c.role in ("feature", "protected")]

    @property
    def drifted_share(self) -> float:
        """Share of counted columns that drifted; NaN when none was compared."""
        counted = self.counted
        return sum(bool(c.drifted) for c in counted) / len(counted) if counted else float("nan")

    @property
    def skipped(self) -> list[ColumnDrift]:
        return [c for c in self.columns if c.status == "skipped"]

    def column(self, name: str) -> ColumnDrift | None:
        return next((c for c in self.columns if c.column == name), None)

    def to_dict(self) -> dict:
        counted = self.counted
        return jsonable({
            "n_reference": self.n_reference, "n_current": self.n_current, "error": self.error,
            "n_compared": len(counted), "n_drifted": sum(bool(c.drifted) for c in counted),
            "drifted_share": self.drifted_share,
            "columns": [asdict(c) for c in self.columns],
            "skipped": [{"column": c.column, "reason": c.note} for c in self.skipped],
            "evidently_html": Path(self.html_path).name if self.html_path else None,
        })


@dataclass(frozen=True)
class FairnessDrift:
    """The fAux check on both batches and how its scores moved (step 2 of :func:`run_audit`).

    ``reference`` / ``current`` are the two :class:`CheckResult` (None where the check raised,
    ``error`` then says which batch and why). ``by_group`` rows: ``group``, ``n_reference``,
    ``n_current``, ``flagged_fraction_reference``, ``flagged_fraction_current``, ``increase``,
    ``compared`` (enough rows in both batches) and ``note``.
    """

    reference: CheckResult | None
    current: CheckResult | None
    error: str | None = None
    ks_statistic: float = float("nan")
    ks_pvalue: float = float("nan")
    n_reference_scores: int = 0
    n_current_scores: int = 0
    by_group: list[dict] = field(default_factory=list)
    score_histograms: dict = field(default_factory=dict)
    sample_note: str = ""
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def flagged_fraction_reference(self) -> float:
        return self.reference.flagged_fraction if self.reference is not None else float("nan")

    @property
    def flagged_fraction_current(self) -> float:
        return self.current.flagged_fraction if self.current is not None else float("nan")

    @property
    def increase(self) -> float:
        return self.flagged_fraction_current - self.flagged_fraction_reference

    def to_dict(self) -> dict:
        return jsonable({
            "error": self.error,
            "flagged_fraction_reference": self.flagged_fraction_reference,
            "flagged_fraction_current": self.flagged_fraction_current,
            "increase": self.increase,
            "decision_reference": None if self.reference is None else self.reference.decision,
            "decision_current": None if self.current is None else self.current.decision,
            "aux_quality_reference": None if self.reference is None else self.reference.aux_quality,
            "aux_quality_current": None if self.current is None else self.current.aux_quality,
            "ks_statistic": self.ks_statistic, "ks_pvalue": self.ks_pvalue,
            "n_reference_scores": self.n_reference_scores, "n_current_scores": self.n_current_scores,
            "by_group": self.by_group, "score_histograms": self.score_histograms,
            "flagged_fraction_vs_delta": {
                "reference": {} if self.reference is None else self.reference.curve,
                "current": {} if self.current is None else self.current.curve,
            },
            "sample_note": self.sample_note,
        })


@dataclass(frozen=True)
class ClassificationQuality:
    """Target-model quality on both batches (step 3 of :func:`run_audit`).

    ``metrics``: name -> ``{"reference": value, "current": value}`` (accuracy, precision, recall,
    f1, roc_auc, log_loss). ``status`` is ``"skipped"`` with ``reason`` when the label column is
    absent, not binary for the tested class, or the features cannot be encoded.
    """

    status: str
    reason: str = ""
    metrics: dict[str, dict[str, float | None]] = field(default_factory=dict)
    n_reference: int = 0
    n_current: int = 0
    html_path: str | None = None

    def to_dict(self) -> dict:
        return jsonable({"status": self.status, "reason": self.reason, "metrics": self.metrics,
                          "n_reference": self.n_reference, "n_current": self.n_current,
                          "evidently_html": Path(self.html_path).name if self.html_path else None})


@dataclass(frozen=True)
class AuditResult:
    """Outcome of one drift audit, computed eagerly and then read-only.

    Attributes
    ----------
    decision : {"passed", "failed", "undecided"}
    reasons : list of str
        The rule that produced the decision first, then the other exceeded or not computed
        limits, then notes (skipped columns, sampling).
    limits : list of dict
        Every audit limit: ``rule``, ``observed``, ``limit``, ``status`` (``"ok"``,
        ``"exceeded"``, ``"not computed"``), ``detail``.
    drift, fairness, classification : the three steps' results.
    timings : dict
        Wall seconds per step.
    provenance : dict
        Hashes and row counts of both batches, policy hash, seed, package versions.
    """

    decision: str
    reasons: list[str]
    limits: list[dict]
    drift: DriftResult
    fairness: FairnessDrift
    classification: ClassificationQuality
    timings: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def undecided(cls, reason: str, *, provenance: dict | None = None) -> "AuditResult":
        """An audit that could not run at all (e.g. the current batch cannot be read); never a pass."""
        return cls(decision="undecided", reasons=[reason],
                   limits=[_limit("audit", None, None, "not computed", reason)],
                   drift=DriftResult(columns=[], n_reference=0, n_current=0, error=reason),
                   fairness=FairnessDrift(reference=None, current=None, error=reason),
                   classification=ClassificationQuality("skipped", reason), provenance=jsonable(provenance or {}))

    @property
    def exit_code(self) -> int:
        """0 passed, 1 failed, 2 undecided (as the gate)."""
        return EXIT_CODES[self.decision]

    @property
    def rule(self) -> str:
        """The rule that produced the decision (first reason)."""
        return self.reasons[0] if self.reasons else ""

    def __repr__(self) -> str:
        return f"audit {self.decision}: {self.rule}"

    def to_dict(self) -> dict:
        """JSON-ready dict with ``schema_version`` (the fAux checks' own dicts under ``fairness``)."""
        return jsonable({
            "schema_version": SCHEMA_VERSION,
            "decision": self.decision,
            "exit_code": self.exit_code,
            "rule": self.rule,
            "reasons": self.reasons,
            "limits": self.limits,
            "drift": self.drift.to_dict(),
            "fairness": self.fairness.to_dict(),
            "reference_check": None if self.fairness.reference is None else self.fairness.reference.to_dict(),
            "classification": self.classification.to_dict(),
            "timings": self.timings,
            "provenance": self.provenance,
        })


# ---------------------------------------------------------------------------------- step 1: column drift
def _value_types(series: pd.Series) -> list[str]:
    """Python type names of the non-missing values of an object column (str subclasses as str)."""
    values = series.dropna()
    if values.empty:
        return []
    names = values.map(lambda v: "str" if isinstance(v, str) else type(v).__name__)
    return sorted(names.unique().tolist())


def _fmt_value(v) -> str:
    return f"{v:g}" if isinstance(v, (float, np.floating)) else repr(v) if isinstance(v, str) else str(v)


def screen_columns(
    reference: pd.DataFrame,
    current: pd.DataFrame,
    columns: dict[str, str],
    *,
    categorical: tuple[str, ...] = (),
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str], list[ColumnDrift], list[ColumnDrift]]:
    """Prepare columns for Evidently, skipping or converting what it cannot use (case C04).

    Parameters
    ----------
    reference, current : DataFrame
        Not modified.
    columns : dict
        Column name -> role (``"feature"``, ``"protected"``, ``"other"``), in report order.
    categorical : tuple of str
        Columns compared as categories even when numeric (e.g. a 0/1 protected attribute).

    Returns
    -------
    ref, cur : DataFrame
        Copies of the columns to send to Evidently, converted as the notes say.
    kinds : dict
        Column -> ``"numeric"`` / ``"categorical"`` for the columns in ``ref`` / ``cur``.
    pending : list of ColumnDrift
        Columns sent to Evidently (status to be filled in), with their notes.
    decided : list of ColumnDrift
        Columns decided here: skipped ones with the reason, and constant ones.
    """
    ref_out, cur_out, kinds = {}, {}, {}
    pending: list[ColumnDrift] = []
    decided: list[ColumnDrift] = []
    n_ref, n_cur = len(reference), len(current)
    for col, role in columns.items():
        in_ref, in_cur = col in reference.columns, col in current.columns
        r = reference[col] if in_ref else None
        c = current[col] if in_cur else None
        r_miss = int(r.isna().sum()) if r is not None else 0
        c_miss = int(c.isna().sum()) if c is not None else 0
        common = {"column": col, "role": role, "reference_missing": r_miss, "current_missing": c_miss}
        if not in_ref or not in_cur:
            where = "the reference" if not in_ref else "the current batch"
            decided.append(ColumnDrift(**common, status="skipped", note=f"absent from {where}"))
            continue
        if n_cur and c_miss == n_cur:
            decided.append(ColumnDrift(**common, status="skipped",
                                       note=f"entirely empty in the current batch ({fmt_count(n_cur)} of "
                                            f"{fmt_count(n_cur)} values missing); no distribution to compare"))
            continue
        if n_ref and r_miss == n_ref:
            decided.append(ColumnDrift(**common, status="skipped",
                                       note=f"entirely empty in the reference ({fmt_count(n_ref)} values missing); "
                                            "no distribution to compare"))
            continue
        notes = []
        if c_miss:
            notes.append(f"{fmt_count(c_miss)} of {fmt_count(n_cur)} values missing in the current batch "
                         "(compared over the rest)")
        numeric = (col not in categorical
                   and all(pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s) for s in (r, c)))
        if not numeric and col not in categorical:
            # one side numeric, the other text: numbers written as text are still numbers
            as_num = [pd.to_numeric(s, errors="coerce") for s in (r, c)]
            if all(int(a.notna().sum()) == int(s.notna().sum()) for a, s in zip(as_num, (r, c))) and not any(
                    pd.api.types.is_bool_dtype(s) for s in (r, c)):
                numeric = True
                r, c = as_num
                notes.append("numbers stored as text in one batch: compared as numbers")
        if numeric:
            r = r.astype("float64")
            c = c.astype("float64")
        else:
            for name, s in (("reference", r), ("current batch", c)):
                types = _value_types(s) if s.dtype == object else []
                if len(types) > 1:
                    notes.append(f"mixed value types ({', '.join(types)}) in the {name}: compared as text "
                                 "categories (1 and '1' are one category)")
            r = r.astype("object").where(r.isna(), r.astype(str))
            c = c.astype("object").where(c.isna(), c.astype(str))
        r_values, c_values = r.dropna().unique(), c.dropna().unique()
        if len(r_values) == 1 and len(c_values) == 1:
            same = r_values[0] == c_values[0]
            decided.append(ColumnDrift(
                **common, status="compared", kind="numeric" if numeric else "categorical",
                method="identical constant" if same else "different constants",
                score=0.0 if same else 1.0, drifted=not same,
                note="; ".join(notes + [f"constant in both batches ({_fmt_value(r_values[0])})" if same else
                                        f"constant in both batches but {_fmt_value(r_values[0])} in the reference "
                                        f"and {_fmt_value(c_values[0])} now"])))
            continue
        if numeric and len(r_values) == 1:
            value = r_values[0]
            label, other = _fmt_value(value), f"not {_fmt_value(value)}"
            r = r.map(lambda v: v if pd.isna(v) else (label if v == value else other)).astype("object")
            c = c.map(lambda v: v if pd.isna(v) else (label if v == value else other)).astype("object")
            numeric = False
            notes.append(f"constant in the reference ({label}): its standard deviation is 0, so it is compared as "
                         f"'{label}' vs any other value")
        elif len(c_values) == 1:
            notes.append(f"constant in the current batch ({_fmt_value(c_values[0])})")
        ref_out[col], cur_out[col] = r, c
        kinds[col] = "numeric" if numeric else "categorical"
        pending.append(ColumnDrift(**common, status="compared", kind=kinds[col], note="; ".join(notes)))
    ref_frame = pd.DataFrame(ref_out, index=reference.index)
    cur_frame = pd.DataFrame(cur_out, index=current.index)
    return ref_frame, cur_frame, kinds, pending, decided


def column_drift(
    reference: pd.DataFrame,
    current: pd.DataFrame,
    columns: dict[str, str],
    *,
    categorical: tuple[str, ...] = (),
    settings: AuditSettings | None = None,
    html_path: str | Path | None = None,
) -> DriftResult:
    """Per-column drift of ``current`` against ``reference`` (Evidently ``DataDriftPreset``).

    Parameters
    ----------
    reference, current : DataFrame
        Not modified.
    columns : dict
        Column -> role (``"feature"``, ``"protected"``, ``"other"``), see :func:`screen_columns`.
    categorical : tuple of str
        Numeric columns to compare as categories.
    settings : AuditSettings, optional
        ``drift_method`` / ``drift_threshold``; Evidently's per-type defaults otherwise.
    html_path : path, optional
        Where to save Evidently's own HTML report (self-contained, ~4 MB).

    Returns
    -------
    DriftResult
        One :class:`ColumnDrift` per requested column, in the given order. If Evidently itself
        fails, every column it should have compared is skipped and ``error`` says why.
    """
    settings = settings or AuditSettings()
    t0 = time.perf_counter()
    ref, cur, kinds, pending, decided = screen_columns(reference, current, columns, categorical=categorical)
    timings = {"screen": time.perf_counter() - t0}
    results: dict[str, ColumnDrift] = {c.column: c for c in decided}
    error = None
    saved = None
    if pending:
        try:
            scores, saved = _evidently_drift(ref, cur, kinds, settings, html_path, timings)
        except Exception as exc:  # Evidently failed as a whole: say so, decide nothing from it
            error = f"Evidently data drift failed: {type(exc).__name__}: {exc}"
            logger.error(error)
            scores = {}
        for item in pending:
            got = scores.get(item.column)
            if got is None:
                reason = error or "Evidently returned no drift result for this column"
                results[item.column] = ColumnDrift(**{**asdict(item), "status": "skipped",
                                                      "note": "; ".join(filter(None, [item.note, reason]))})
            else:
                results[item.column] = ColumnDrift(**{**asdict(item), **got})
    ordered = [results[c] for c in columns]
    for c in ordered:
        if c.status == "skipped":
            logger.warning("drift: column '%s' skipped: %s", c.column, c.note)
        elif c.note:
            logger.info("drift: column '%s': %s", c.column, c.note)
    return DriftResult(columns=ordered, n_reference=len(reference), n_current=len(current),
                       html_path=None if saved is None else str(saved), error=error, timings=timings)


def _evidently_drift(ref: pd.DataFrame, cur: pd.DataFrame, kinds: dict[str, str], settings: AuditSettings,
                     html_path, timings: dict) -> tuple[dict[str, dict], Path | None]:
    t0 = time.perf_counter()
    from evidently import DataDefinition, Dataset, Report
    from evidently.presets import DataDriftPreset

    timings["evidently_import"] = time.perf_counter() - t0
    t0 = time.perf_counter()

    numeric = [c for c, k in kinds.items() if k == "numeric"]
    categorical = [c for c, k in kinds.items() if k == "categorical"]
    definition = DataDefinition(numerical_columns=numeric, categorical_columns=categorical)
    preset = DataDriftPreset(columns=list(kinds), method=settings.drift_method, threshold=settings.drift_threshold,
                             drift_share=settings.max_drifted_share)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy/scipy RuntimeWarnings inside Evidently's plots
        snapshot = Report([preset], include_tests=True).run(
            current_data=Dataset.from_pandas(cur, data_definition=definition),
            reference_data=Dataset.from_pandas(ref, data_definition=definition))
        payload = snapshot.dict()
        timings["evidently_drift"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        saved = None
        if html_path is not None:
            saved = Path(html_path)
            snapshot.save_html(str(saved))
        timings["evidently_html"] = time.perf_counter() - t0
    out: dict[str, dict] = {}
    for metric in payload["metrics"]:
        config = metric.get("config") or {}
        column = config.get("column")
        if column is None or not str(config.get("type", "")).endswith("ValueDrift"):
            continue
        value = metric.get("value")
        score = float(value) if value is not None and np.isfinite(float(value)) else None
        out[column] = {"method": config.get("method"), "score": score, "threshold": config.get("threshold")}
    for test in payload["tests"]:
        params = (test.get("metric_config") or {}).get("params") or {}
        column = params.get("column")
        if column in out and str(params.get("type", "")).endswith("ValueDrift"):
            status = getattr(test.get("status"), "value", test.get("status"))
            out[column]["drifted"] = str(status).upper() == "FAIL"
    for column, got in list(out.items()):
        if got["score"] is None or "drifted" not in got:  # never pass a NaN statistic on as a number
            del out[column]
    return out, saved


# ---------------------------------------------------------------------------------- step 2: fairness drift
def fairness_drift(
    target_model,
    reference: pd.DataFrame,
    current: pd.DataFrame,
    *,
    policy: Policy,
    feature_spec: FeatureSpec | None,
    model_info: dict | None = None,
) -> FairnessDrift:
    """The fAux check on both batches, the change of the flagged fraction, and a KS test on scores.

    Both checks use ``policy`` (δ, aux settings, seed) with ``max_rows`` lowered to
    ``policy.audit.max_rows`` so that the two batches are scored on samples of the same size.

    Returns
    -------
    FairnessDrift
        ``error`` names the batch and the reason when a check raised (e.g. a feature column that
        is entirely empty in the current batch); the numbers are then NaN.
    """
    audit = policy.audit
    limit = audit.max_rows
    effective = policy.max_rows if limit is None else (limit if policy.max_rows is None else min(limit, policy.max_rows))
    check_policy = policy.with_overrides(max_rows=effective)
    sample_note = ""
    if effective is not None and max(len(reference), len(current)) > effective:
        sample_note = (f"the fAux check scores a seeded sample of at most {fmt_count(effective)} rows per batch "
                       f"(reference {fmt_count(len(reference))}, current {fmt_count(len(current))} rows; "
                       "[audit] max_rows)")
    checks: dict[str, CheckResult | None] = {}
    errors = []
    timings: dict[str, float] = {}
    for name, frame in (("reference", reference), ("current batch", current)):
        t0 = time.perf_counter()
        try:
            checks[name] = run_check(target_model, frame, policy=check_policy, feature_spec=feature_spec,
                                     model_info=model_info)
        except FauxChecksError as exc:
            checks[name] = None
            errors.append(f"the fAux check on the {name} could not run: {exc}")
        except Exception as exc:  # fail closed: an unexpected error is 'could not run', never a pass
            checks[name] = None
            errors.append(f"the fAux check on the {name} could not run: internal error {type(exc).__name__}: {exc}")
        timings["check_" + name.split()[0]] = time.perf_counter() - t0
    ref_check, cur_check = checks["reference"], checks["current batch"]
    error = "; ".join(errors) or None
    if ref_check is None or cur_check is None:
        return FairnessDrift(reference=ref_check, current=cur_check, error=error, sample_note=sample_note,
                             timings=timings)
    from scipy.stats import ks_2samp

    ref_scores = ref_check.scores[np.isfinite(ref_check.scores)]
    cur_scores = cur_check.scores[np.isfinite(cur_check.scores)]
    ks_stat, ks_p = float("nan"), float("nan")
    if len(ref_scores) and len(cur_scores):
        ks = ks_2samp(ref_scores, cur_scores)
        ks_stat, ks_p = float(ks.statistic), float(ks.pvalue)
    return FairnessDrift(
        reference=ref_check, current=cur_check, error=error, ks_statistic=ks_stat, ks_pvalue=ks_p,
        n_reference_scores=len(ref_scores), n_current_scores=len(cur_scores),
        by_group=_group_changes(ref_check, cur_check, audit.min_group_rows),
        score_histograms=_common_histogram(ref_scores, cur_scores), sample_note=sample_note, timings=timings)


def _group_changes(ref: CheckResult, cur: CheckResult, min_rows: int) -> list[dict]:
    def rows(check):
        if check.by_group is None:
            return {}
        return {str(g): r for g, r in check.by_group.iterrows()}

    r_rows, c_rows = rows(ref), rows(cur)
    out = []
    for group in list(r_rows) + [g for g in c_rows if g not in r_rows]:
        r, c = r_rows.get(group), c_rows.get(group)
        n_r = int(r["n"]) if r is not None else 0
        n_c = int(c["n"]) if c is not None else 0
        ff_r = float(r["flagged_fraction"]) if r is not None else float("nan")
        ff_c = float(c["flagged_fraction"]) if c is not None else float("nan")
        note = ""
        if r is None or c is None:
            note = f"group absent from the {'reference' if r is None else 'current batch'}"
        elif min(n_r, n_c) < min_rows:
            note = f"fewer than min_group_rows = {min_rows} rows in a batch ({n_r} / {n_c}): reported, not compared"
        elif not (np.isfinite(ff_r) and np.isfinite(ff_c)):
            note = "flagged fraction undefined in a batch (no defined score)"
        out.append({"group": group, "n_reference": n_r, "n_current": n_c, "flagged_fraction_reference": ff_r,
                    "flagged_fraction_current": ff_c, "increase": ff_c - ff_r, "compared": not note, "note": note})
    return jsonable(out)


def _common_histogram(ref: np.ndarray, cur: np.ndarray, bins: int = 40) -> dict:
    """Both batches' LIC scores on one log10 grid: ``log10_edges``, ``reference``, ``current`` counts."""
    r, c = ref[ref > 0], cur[cur > 0]
    both = np.concatenate([r, c])
    if len(both) == 0:
        return {}
    lo, hi = np.log10(both.min()), np.log10(both.max())
    edges = np.linspace(lo, hi if hi > lo else lo + 1, bins + 1)
    return {"log10_edges": edges.tolist(), "reference": np.histogram(np.log10(r), edges)[0].tolist(),
            "current": np.histogram(np.log10(c), edges)[0].tolist(),
            "n_zero_reference": int((ref <= 0).sum()), "n_zero_current": int((cur <= 0).sum())}


# ---------------------------------------------------------------------------------- step 3: classification
def _binary_labels(series: pd.Series, name: str) -> tuple[np.ndarray | None, str]:
    values = pd.to_numeric(series, errors="coerce")
    bad = values.isna() & series.notna()
    if bad.any():
        return None, (f"label column has non-numeric values (e.g. {series[bad].iloc[0]!r}) in the {name}; "
                      "classification quality needs class indices")
    return values.to_numpy(), ""


def classification_quality(
    target_model,
    reference: pd.DataFrame,
    current: pd.DataFrame,
    *,
    policy: Policy,
    feature_spec: FeatureSpec | None,
    html_path: str | Path | None = None,
) -> ClassificationQuality:
    """Target-model quality (P(y = target_class) vs the label) on both batches, via Evidently.

    Skipped, with the reason, when the policy names no label, a batch lacks it or holds
    non-numeric labels, a batch holds a single class, or the features cannot be encoded.
    Rows with a missing label are left out (counted in the reason's note).
    """
    label = policy.label
    if not label:
        return ClassificationQuality("skipped", "the policy names no label column")
    for name, frame in (("reference", reference), ("current batch", current)):
        if label not in frame.columns:
            return ClassificationQuality("skipped", f"label column '{label}' is absent from the {name}")
    if feature_spec is None:
        return ClassificationQuality("skipped", "no feature columns to score the target model on")
    from .method._batching import as_tensor
    from .method.output import TargetOutput, predict_probability, resolve_output_form

    output = TargetOutput(form=policy.target_output, target_class=policy.target_class)
    parts = {}
    for name, frame in (("reference", reference), ("current batch", current)):
        y, why = _binary_labels(frame[label], name)
        if y is None:
            return ClassificationQuality("skipped", why)
        keep = ~np.isnan(y)
        target = (y[keep] == policy.target_class).astype(int)
        if len(np.unique(target)) < 2:
            return ClassificationQuality("skipped", f"the {name} holds a single class of '{label}' "
                                                    f"({fmt_count(keep.sum())} labelled rows)")
        try:
            Xt = as_tensor(feature_spec.encode(frame.loc[keep]))
            prob = predict_probability(target_model, Xt, resolve_output_form(target_model, Xt[:256], output))
        except Exception as exc:  # bad input (InputError) or a model that cannot take X
            return ClassificationQuality("skipped", f"the target model cannot score the {name}: {exc}")
        parts[name] = pd.DataFrame({_TARGET: target, _PREDICTION: prob})
    try:
        metrics, saved = _evidently_classification(parts["reference"], parts["current batch"], html_path)
    except Exception as exc:
        logger.error("classification quality: Evidently failed: %s", exc)
        return ClassificationQuality("skipped", f"Evidently classification failed: {type(exc).__name__}: {exc}")
    return ClassificationQuality("computed", "", metrics, n_reference=len(parts["reference"]),
                                 n_current=len(parts["current batch"]), html_path=None if saved is None else str(saved))


_CLASSIFICATION_METRICS = {"Accuracy": "accuracy", "Precision": "precision", "Recall": "recall", "F1Score": "f1",
                           "RocAuc": "roc_auc", "LogLoss": "log_loss"}


def _evidently_classification(ref: pd.DataFrame, cur: pd.DataFrame, html_path):
    from evidently import BinaryClassification, DataDefinition, Dataset, Report
    from evidently.presets import ClassificationPreset

    definition = DataDefinition(numerical_columns=[_PREDICTION], categorical_columns=[_TARGET], classification=[
        BinaryClassification(target=_TARGET, prediction_probas=_PREDICTION)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        snapshot = Report([ClassificationPreset()]).run(
            current_data=Dataset.from_pandas(cur, data_definition=definition),
            reference_data=Dataset.from_pandas(ref, data_definition=definition))
        saved = None
        if html_path is not None:
            saved = Path(html_path)
            snapshot.save_html(str(saved))
    context = snapshot.context
    metrics: dict[str, dict[str, float | None]] = {}
    for metric_id, result in snapshot.metric_results.items():
        payload = result.to_dict()
        head = str(payload.get("metric_name", "")).split("(", 1)[0]
        name = _CLASSIFICATION_METRICS.get(head)
        if name is None:
            continue
        try:
            ref_value = context.get_reference_metric_result(metric_id).to_dict().get("value")
        except BaseException:  # ReferenceMetricNotFound derives from BaseException
            ref_value = None
        metrics[name] = {"reference": _finite(ref_value), "current": _finite(payload.get("value"))}
    return metrics, saved


def _finite(value) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if np.isfinite(v) else None


# ---------------------------------------------------------------------------------- decision
def _limit(rule: str, observed, limit, status: str, detail: str) -> dict:
    return jsonable({"rule": rule, "observed": observed, "limit": limit, "status": status, "detail": detail})


def decide_audit(
    settings: AuditSettings,
    drift: DriftResult,
    fairness: FairnessDrift,
    classification: ClassificationQuality,
    *,
    protected: str,
    n_current: int,
) -> tuple[str, list[str], list[dict]]:
    """Apply the audit limits (module docstring) to the three steps' results.

    Returns
    -------
    decision : {"passed", "failed", "undecided"}
    reasons : list of str
        The rule that decided first.
    limits : list of dict
        One row per limit (see :class:`AuditResult`).
    """
    limits: list[dict] = []
    if n_current < settings.min_rows:
        limits.append(_limit("min_rows", n_current, settings.min_rows, "not computed",
                             f"the current batch has {fmt_count(n_current)} rows < min_rows {settings.min_rows}; "
                             "too few to audit"))
    # -- column drift
    pcol = drift.column(protected)
    if settings.fail_on_protected_drift:
        if pcol is None or pcol.status != "compared":
            limits.append(_limit("protected_drift", None, False, "not computed",
                                 f"drift of the protected attribute '{protected}' not computed: "
                                 f"{pcol.note if pcol is not None else 'not requested'}"))
        else:
            limits.append(_limit(
                "protected_drift", pcol.score, pcol.threshold, "exceeded" if pcol.drifted else "ok",
                f"the protected attribute '{protected}' {'drifted' if pcol.drifted else 'did not drift'} "
                f"({pcol.method} {pcol.score:.3g}, threshold {pcol.threshold if pcol.threshold is not None else 'n/a'})"))
    share = drift.drifted_share
    counted = drift.counted
    if not counted:
        limits.append(_limit("max_drifted_share", None, settings.max_drifted_share, "not computed",
                             f"no feature or protected column could be compared for drift"
                             f"{': ' + drift.error if drift.error else ''}"))
    else:
        names = [c.column for c in counted if c.drifted]
        limits.append(_limit(
            "max_drifted_share", share, settings.max_drifted_share,
            "exceeded" if share > settings.max_drifted_share else "ok",
            f"{len(names)} of {len(counted)} feature/protected columns drifted ({share:.0%} "
            f"{'>' if share > settings.max_drifted_share else '<='} max_drifted_share "
            f"{settings.max_drifted_share:.0%}){': ' + ', '.join(names[:10]) if names else ''}"))
    # -- fairness drift
    cur, ref = fairness.current, fairness.reference
    if fairness.error or cur is None or ref is None:
        limits.append(_limit("fairness", None, None, "not computed",
                             fairness.error or "the fAux checks did not run"))
    else:
        undecided = [(n, c) for n, c in (("reference", ref), ("current batch", cur)) if c.decision == "undecided"]
        for name, check in undecided:
            limits.append(_limit("fairness", None, None, "not computed",
                                 f"the fAux check on the {name} is undecided: {check.reasons[0]}"))
        if settings.fail_on_current_check and cur.decision != "undecided":
            limits.append(_limit("current_check", cur.flagged_fraction, cur.max_flagged_fraction,
                                 "exceeded" if cur.decision == "failed" else "ok",
                                 f"the gate's rule on the current batch: {cur.decision}: {cur.reasons[0]}"))
        if not undecided:
            inc = fairness.increase
            limits.append(_limit(
                "max_flagged_fraction_increase", inc, settings.max_flagged_fraction_increase,
                "exceeded" if inc > settings.max_flagged_fraction_increase else "ok",
                f"flagged fraction {fairness.flagged_fraction_reference:.2%} (reference) -> "
                f"{fairness.flagged_fraction_current:.2%} (current): {inc:+.2%} "
                f"{'>' if inc > settings.max_flagged_fraction_increase else '<='} max_flagged_fraction_increase "
                f"{settings.max_flagged_fraction_increase:.2%}"))
            compared = [g for g in fairness.by_group if g["compared"]]
            if not compared:
                limits.append(_limit("max_group_flagged_fraction_increase", None,
                                     settings.max_group_flagged_fraction_increase, "not computed",
                                     "no protected group has min_group_rows rows with defined scores in both batches"))
            for g in compared:
                over = g["increase"] > settings.max_group_flagged_fraction_increase
                limits.append(_limit(
                    "max_group_flagged_fraction_increase", g["increase"], settings.max_group_flagged_fraction_increase,
                    "exceeded" if over else "ok",
                    f"group '{g['group']}': flagged fraction {g['flagged_fraction_reference']:.2%} -> "
                    f"{g['flagged_fraction_current']:.2%} ({g['increase']:+.2%} {'>' if over else '<='} "
                    f"{settings.max_group_flagged_fraction_increase:.2%})"))
            if np.isfinite(fairness.ks_pvalue):
                over = fairness.ks_pvalue < settings.score_ks_pvalue and fairness.ks_statistic >= settings.score_ks_min_statistic
                limits.append(_limit(
                    "score_ks", fairness.ks_pvalue, settings.score_ks_pvalue, "exceeded" if over else "ok",
                    f"LIC score distribution: KS statistic {fairness.ks_statistic:.3f}, p = {fairness.ks_pvalue:.3g} "
                    f"({fmt_count(fairness.n_reference_scores)} vs {fmt_count(fairness.n_current_scores)} scores; fails "
                    f"when p < {settings.score_ks_pvalue:g} and the statistic >= {settings.score_ks_min_statistic:g})"))
            else:
                limits.append(_limit("score_ks", None, settings.score_ks_pvalue, "not computed",
                                     "no defined LIC score in a batch; the score distributions cannot be compared"))
    # -- classification quality (a limit only when the policy sets one)
    if settings.max_roc_auc_drop is not None:
        auc = classification.metrics.get("roc_auc") or {}
        if classification.status != "computed" or auc.get("reference") is None or auc.get("current") is None:
            limits.append(_limit("max_roc_auc_drop", None, settings.max_roc_auc_drop, "not computed",
                                 f"ROC-AUC not computed: {classification.reason or 'no value'}"))
        else:
            drop = auc["reference"] - auc["current"]
            over = drop > settings.max_roc_auc_drop
            limits.append(_limit("max_roc_auc_drop", drop, settings.max_roc_auc_drop, "exceeded" if over else "ok",
                                 f"ROC-AUC {auc['reference']:.3f} -> {auc['current']:.3f} (drop {drop:+.3f} "
                                 f"{'>' if over else '<='} {settings.max_roc_auc_drop:g})"))

    exceeded = [l_["detail"] for l_ in limits if l_["status"] == "exceeded"]
    missing = [l_["detail"] for l_ in limits if l_["status"] == "not computed"]
    if exceeded:
        decision, reasons = "failed", exceeded + missing
    elif missing:
        decision, reasons = "undecided", missing
    else:
        decision = "passed"
        reasons = [f"all {len(limits)} audit limits held"] + [l_["detail"] for l_ in limits]
    return decision, reasons, limits


# ---------------------------------------------------------------------------------- the audit
def audit_columns(feature_spec: FeatureSpec | None, reference: pd.DataFrame, current: pd.DataFrame, *,
                  policy: Policy) -> dict[str, str]:
    """Columns compared for drift and their roles: target inputs, protected, then others shared."""
    inputs = feature_spec.source_columns if feature_spec is not None else []
    columns = {c: "feature" for c in inputs if c != policy.protected}
    columns[policy.protected] = "protected"
    for c in reference.columns:
        if c not in columns and c != policy.label and c in current.columns:
            columns[str(c)] = "other"
    return columns


def run_audit(
    target_model,
    reference: pd.DataFrame,
    current: pd.DataFrame,
    *,
    policy: Policy,
    feature_spec: FeatureSpec | None = None,
    evidence_dir: str | Path | None = None,
    model_info: dict | None = None,
    gate_record: dict | None = None,
) -> AuditResult:
    """Audit a deployed model on a current batch against its reference data (module docstring).

    Parameters
    ----------
    target_model : torch module
        The deployed version's model.
    reference : DataFrame
        The data the version was gated on. Not modified.
    current : DataFrame
        The current batch. Not modified.
    policy : Policy
        The gate policy; its ``[audit]`` section sets the limits.
    feature_spec : FeatureSpec, optional
        The version's encoding; without it the reference's numeric columns (minus protected and
        label) are passed to the model as they are, for both batches.
    evidence_dir : path, optional
        Existing folder for Evidently's HTML reports (``evidently_drift.html``,
        ``evidently_classification.html``).
    model_info : dict, optional
        Added to the provenance (name, version, sha256).
    gate_record : dict, optional
        What the gate recorded (``flagged_fraction``, ``data_sha256``): compared with the
        reference check and noted when they differ.

    Returns
    -------
    AuditResult
        Never raises for bad data: what could not be computed makes the audit ``undecided``
        with the reason (the column, the row counts).
    """
    timings: dict[str, float] = {}
    reference, current = as_frame(reference), as_frame(current)
    evidence = Path(evidence_dir) if evidence_dir is not None else None
    t0 = time.perf_counter()
    if feature_spec is None:
        exclude = [policy.protected] + ([policy.label] if policy.label else [])
        try:
            feature_spec = FeatureSpec.passthrough(reference, exclude=exclude, name="passthrough (reference columns)")
        except InputError as exc:  # the fAux step reports it; drift still runs
            logger.warning("audit: no feature columns: %s", exc)
    columns = audit_columns(feature_spec, reference, current, policy=policy)
    categorical = (policy.protected,) if policy.protected_kind != "continuous" else ()
    drift = column_drift(reference, current, columns, categorical=categorical, settings=policy.audit,
                         html_path=None if evidence is None else evidence / "evidently_drift.html")
    timings["column_drift"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    fairness = fairness_drift(target_model, reference, current, policy=policy, feature_spec=feature_spec,
                              model_info=model_info)
    timings["fairness_drift"] = time.perf_counter() - t0
    if fairness.error:
        logger.warning("audit: %s", fairness.error)

    t0 = time.perf_counter()
    classification = classification_quality(
        target_model, reference, current, policy=policy, feature_spec=feature_spec,
        html_path=None if evidence is None else evidence / "evidently_classification.html")
    timings["classification"] = time.perf_counter() - t0
    if classification.status == "skipped":
        logger.info("audit: classification quality skipped: %s", classification.reason)

    timings.update({f"column_drift.{k}": v for k, v in drift.timings.items()})
    timings.update({f"fairness_drift.{k}": v for k, v in fairness.timings.items()})
    decision, reasons, limits = decide_audit(policy.audit, drift, fairness, classification,
                                             protected=policy.protected, n_current=len(current))
    skipped = drift.skipped
    if skipped:
        reasons.append("drift not computed for " + "; ".join(f"'{c.column}' ({c.note})" for c in skipped))
    noted = [c for c in drift.columns if c.status == "compared" and c.note]
    if noted:
        reasons.append("drift notes: " + "; ".join(f"'{c.column}': {c.note}" for c in noted))
    if fairness.sample_note:
        reasons.append(fairness.sample_note)
    if gate_record and fairness.reference is not None:
        recorded = _finite(gate_record.get("flagged_fraction"))
        now = fairness.flagged_fraction_reference
        if recorded is not None and np.isfinite(now) and abs(recorded - now) > 1e-9:
            reasons.append(f"the gate recorded a flagged fraction of {recorded:.2%} on the reference; the audit's "
                           f"reference check gives {now:.2%} (sampled rows, or the data/policy changed since)")
    provenance = {
        "audited_at": fairness.current.provenance.get("checked_at") if fairness.current is not None else None,
        "policy_name": policy.name, "policy_sha256": policy.sha256(), "policy": policy.model_dump(mode="json"),
        "seed": policy.seed, "feature_spec": None if feature_spec is None else feature_spec.name,
        "reference": {"sha256": data_sha256(reference), "n_rows": len(reference)},
        "current": {"sha256": data_sha256(current), "n_rows": len(current)},
        "packages": {**package_versions(), **installed_versions(OPTIONAL_PACKAGES)},
        "gate_record": gate_record or {},
        **(model_info or {}),
    }
    result = AuditResult(decision=decision, reasons=reasons, limits=limits, drift=drift, fairness=fairness,
                         classification=classification, timings=timings, provenance=jsonable(provenance))
    logger.info("%r", result)
    return result
