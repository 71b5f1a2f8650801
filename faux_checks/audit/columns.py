"""Step 1 of the audit: per-column drift (Evidently ``DataDriftPreset``), after screening the columns.

Screening (bad-inputs case C04) decides here what Evidently cannot use: a column absent or
entirely empty in a batch is skipped with the reason; mixed value types are compared as text
categories; a numeric column constant in the reference is compared as "that value" vs "any
other value"; a column constant in both batches is compared here.
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._files import whole_file
from .._validation import fmt_count
from ..gate.policy_sections import AuditSettings
from .results import ColumnDrift, DriftResult

__all__ = ["column_drift", "screen_columns"]

logger = logging.getLogger(__name__)


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
    for col, role in columns.items():
        common, skip = _presence(col, role, reference, current)
        if skip is not None:
            decided.append(ColumnDrift(**common, status="skipped", note=skip))
            continue
        notes = []
        n_cur, c_miss = len(current), common["current_missing"]
        if c_miss:
            notes.append(f"{fmt_count(c_miss)} of {fmt_count(n_cur)} values missing in the current batch "
                         "(compared over the rest)")
        r, c, numeric = _comparable(reference[col], current[col], as_category=col in categorical, notes=notes)
        r_values, c_values = r.dropna().unique(), c.dropna().unique()
        if len(r_values) == 1 and len(c_values) == 1:
            decided.append(_constants(common, r_values[0], c_values[0], numeric=numeric, notes=notes))
            continue
        if numeric and len(r_values) == 1:
            r, c = _relabel_constant(r, c, r_values[0], notes)
            numeric = False
        elif len(c_values) == 1:
            notes.append(f"constant in the current batch ({_fmt_value(c_values[0])})")
        ref_out[col], cur_out[col] = r, c
        kinds[col] = "numeric" if numeric else "categorical"
        pending.append(ColumnDrift(**common, status="compared", kind=kinds[col], note="; ".join(notes)))
    ref_frame = pd.DataFrame(ref_out, index=reference.index)
    cur_frame = pd.DataFrame(cur_out, index=current.index)
    return ref_frame, cur_frame, kinds, pending, decided


def _presence(col: str, role: str, reference: pd.DataFrame,
              current: pd.DataFrame) -> tuple[dict[str, Any], str | None]:
    """The column's common fields (name, role, missing counts) and why it is skipped: absent from a batch, or
    entirely empty in one (None when it can be compared)."""
    n_ref, n_cur = len(reference), len(current)
    in_ref, in_cur = col in reference.columns, col in current.columns
    r_miss = int(reference[col].isna().sum()) if in_ref else 0
    c_miss = int(current[col].isna().sum()) if in_cur else 0
    common: dict[str, Any] = {"column": col, "role": role, "reference_missing": r_miss, "current_missing": c_miss}
    if not in_ref or not in_cur:
        return common, f"absent from {'the reference' if not in_ref else 'the current batch'}"
    if n_cur and c_miss == n_cur:
        return common, (f"entirely empty in the current batch ({fmt_count(n_cur)} of {fmt_count(n_cur)} values "
                        "missing); no distribution to compare")
    if n_ref and r_miss == n_ref:
        return common, (f"entirely empty in the reference ({fmt_count(n_ref)} values missing); "
                        "no distribution to compare")
    return common, None


def _comparable(r: pd.Series, c: pd.Series, *, as_category: bool,
                notes: list[str]) -> tuple[pd.Series, pd.Series, bool]:
    """Both batches' values as float64 (numeric, numbers written as text included) or as text categories, and
    whether numeric; ``notes`` gains what was converted."""
    numeric = (not as_category
               and all(pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s) for s in (r, c)))
    if not numeric and not as_category:
        # one side numeric, the other text: numbers written as text are still numbers
        as_num = [pd.to_numeric(s, errors="coerce") for s in (r, c)]
        if all(int(a.notna().sum()) == int(s.notna().sum()) for a, s in zip(as_num, (r, c), strict=True)) and not any(
                pd.api.types.is_bool_dtype(s) for s in (r, c)):
            numeric = True
            r, c = as_num
            notes.append("numbers stored as text in one batch: compared as numbers")
    if numeric:
        return r.astype("float64"), c.astype("float64"), True
    for name, s in (("reference", r), ("current batch", c)):
        types = _value_types(s) if s.dtype == object else []
        if len(types) > 1:
            notes.append(f"mixed value types ({', '.join(types)}) in the {name}: compared as text "
                         "categories (1 and '1' are one category)")
    return r.astype("object").where(r.isna(), r.astype(str)), c.astype("object").where(c.isna(), c.astype(str)), False


def _constants(common: dict[str, Any], r_value, c_value, *, numeric: bool, notes: list[str]) -> ColumnDrift:
    """A column constant in both batches, decided here: no drift when the two constants are equal, drift when not."""
    same = r_value == c_value
    return ColumnDrift(
        **common, status="compared", kind="numeric" if numeric else "categorical",
        method="identical constant" if same else "different constants",
        score=0.0 if same else 1.0, drifted=not same,
        note="; ".join(notes + [f"constant in both batches ({_fmt_value(r_value)})" if same else
                                f"constant in both batches but {_fmt_value(r_value)} in the reference "
                                f"and {_fmt_value(c_value)} now"]))


def _relabel_constant(r: pd.Series, c: pd.Series, value, notes: list[str]) -> tuple[pd.Series, pd.Series]:
    """A numeric column constant in the reference (standard deviation 0) as two categories: the value, and any other."""
    label, other = _fmt_value(value), f"not {_fmt_value(value)}"

    def relabel(v):
        return v if pd.isna(v) else (label if v == value else other)

    notes.append(f"constant in the reference ({label}): its standard deviation is 0, so it is compared as "
                 f"'{label}' vs any other value")
    return r.map(relabel).astype("object"), c.map(relabel).astype("object")


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
        except Exception as exc:  # noqa: BLE001 - Evidently failed as a whole: say so, decide nothing from it
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

    ref, cur, kinds, original = html_safe(ref, cur, kinds)
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
            with whole_file(saved) as tmp:         # whole or absent, as every record
                snapshot.save_html(str(tmp))
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
    return {original.get(c, c): got for c, got in out.items()}, saved


def html_safe(ref: pd.DataFrame, cur: pd.DataFrame, kinds: dict[str, str]
              ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str], dict[str, str]]:
    """Column names and text categories HTML-escaped (``<`` as ``&lt;``) before they reach Evidently.

    Evidently writes its page's data as JSON inside a ``<script>`` element and renders some of it as
    HTML, so a column named ``</script><script>...`` or a category ``<img onerror=...>`` ran as script
    in ``evidently_drift.html``. :func:`html.escape` is one-to-one, so the drift statistics
    are those of the data as given; the page shows the escaped spelling.

    Returns
    -------
    ref, cur : DataFrame
        Renamed columns; a categorical column's text values escaped (others as given).
    kinds : dict
        Escaped column -> kind.
    original : dict
        Escaped column -> the column as given (to read Evidently's results back).
    """
    import html

    safe = {c: html.escape(str(c)) for c in kinds}
    values = {}
    for c, kind in kinds.items():
        if kind != "categorical":
            continue
        seen = pd.unique(pd.concat([ref[c], cur[c]], ignore_index=True).dropna())
        values[c] = {v: html.escape(v) for v in seen if isinstance(v, str) and html.escape(v) != v}

    def convert(frame: pd.DataFrame) -> pd.DataFrame:
        out = frame.copy()
        for c, mapping in values.items():
            if mapping:
                out[c] = out[c].map(lambda v, mapping=mapping: mapping.get(v, v) if isinstance(v, str) else v
                                    ).astype(frame[c].dtype)
        return out.rename(columns=safe)

    return convert(ref), convert(cur), {safe[c]: k for c, k in kinds.items()}, {v: k for k, v in safe.items()}
