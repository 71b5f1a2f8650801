"""Step 2 of the audit: the fAux check on both batches, the change of the flagged fraction, a KS test."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from .._validation import fmt_count
from ..errors import FauxChecksError
from ..gate.one_attribute import check_one_attribute
from ..gate.policy_schema import Policy
from ..gate.result import CheckResult
from ..inputs.tabular import FeatureSpec
from ..provenance import jsonable
from .results import FairnessDrift

__all__ = ["fairness_drift"]


def fairness_drift(
    target_model,
    reference: pd.DataFrame,
    current: pd.DataFrame,
    *,
    policy: Policy,
    feature_spec: FeatureSpec | None,
    model_info: dict | None = None,
    aux_model=None,
    reference_scores: np.ndarray | None = None,
    aux_source: dict | None = None,
) -> FairnessDrift:
    """The fAux check on both batches, the change of the flagged fraction, and a KS test on scores.

    Both checks use ``policy`` (δ, aux settings, seed) with ``max_rows`` lowered to
    ``policy.audit.max_rows`` so that the two batches are scored on samples of the same size.

    With ``aux_model`` (the gate's, :func:`faux_checks.report.records.read_aux_record`) both batches
    are scored with it, so a change of the scores measures the data, not a retrained auxiliary
    model; without it each batch trains its own. With ``reference_scores`` (m,) (the gate's recorded
    defined scores) the KS test compares the current batch's scores with them instead of the
    reference check's. ``aux_source`` (``source``, ``note``, ...) is reported as given.

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
            checks[name] = check_one_attribute(target_model, frame, policy=check_policy, feature_spec=feature_spec,
                                     model_info=model_info, aux_model=aux_model)
        except FauxChecksError as exc:
            checks[name] = None
            errors.append(f"the fAux check on the {name} could not run: {exc}")
        except Exception as exc:  # noqa: BLE001 - fail closed: an unexpected error is 'could not run', never a pass
            checks[name] = None
            errors.append(f"the fAux check on the {name} could not run: internal error {type(exc).__name__}: {exc}")
        timings["check_" + name.split()[0]] = time.perf_counter() - t0
    ref_check, cur_check = checks["reference"], checks["current batch"]
    error = "; ".join(errors) or None
    aux_source = dict(aux_source or {"source": "given" if aux_model is not None else "retrained"})
    if ref_check is None or cur_check is None:
        return FairnessDrift(reference=ref_check, current=cur_check, error=error, sample_note=sample_note,
                             timings=timings, aux_source=aux_source)
    from scipy.stats import ks_2samp

    assert ref_check.scores is not None and cur_check.scores is not None   # check_one_attribute's results carry the scores
    ref_scores = ref_check.scores[np.isfinite(ref_check.scores)]
    score_reference = f"the reference batch's {fmt_count(len(ref_scores))} defined scores, scored by the audit"
    if reference_scores is not None:
        ref_scores = np.asarray(reference_scores, dtype=np.float64)
        ref_scores = ref_scores[np.isfinite(ref_scores)]
        score_reference = f"the {fmt_count(len(ref_scores))} defined scores the gate recorded on the reference"
    cur_scores = cur_check.scores[np.isfinite(cur_check.scores)]
    ks_stat, ks_p = float("nan"), float("nan")
    if len(ref_scores) and len(cur_scores):
        ks = ks_2samp(ref_scores, cur_scores)
        ks_stat, ks_p = float(ks.statistic), float(ks.pvalue)
    return FairnessDrift(
        reference=ref_check, current=cur_check, error=error, ks_statistic=ks_stat, ks_pvalue=ks_p,
        n_reference_scores=len(ref_scores), n_current_scores=len(cur_scores),
        by_group=_group_changes(ref_check, cur_check, policy.decision.min_group_rows),
        score_histograms=_common_histogram(ref_scores, cur_scores), sample_note=sample_note, timings=timings,
        aux_source=aux_source, score_reference=score_reference)


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
            note = f"fewer than decision.min_group_rows = {min_rows} rows in a batch ({n_r} / {n_c}): reported, not compared"
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
