"""The outcome of one check: :class:`CheckResult`, computed eagerly and then read-only."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..provenance import jsonable
from .bounds import FlaggedInterval
from .decision import DecidedResult, rule_row, summary_line

__all__ = ["CheckResult", "Decision", "SCHEMA_VERSION", "delta_curve"]

SCHEMA_VERSION = "1.1"
Decision = str  # "passed" | "failed" | "undecided"


@dataclass(frozen=True)
class CheckResult(DecidedResult):
    """Outcome of one fairness check, computed eagerly and then read-only.

    Attributes
    ----------
    decision : {"passed", "failed", "undecided"}
    reasons : list of str
        The rule that produced the decision first, then notes.
    flagged_fraction : float
        Share of the audited individuals whose LIC score exceeds ``delta`` or is undefined (an
        undefined score counts as flagged: the worst case); NaN when not computed.
        :attr:`flagged_fraction_defined` is the other reading (defined scores only).
    max_flagged_fraction, delta : float
        From the policy.
    n_individuals, n_undefined, n_missing_protected : int
        Audited rows; rows with an undefined score; rows dropped for a missing protected value.
    by_group : DataFrame or None
        Per protected group: ``n``, ``flagged``, ``flagged_fraction``, ``undefined``,
        ``mean_score``, ``p90_score``.
    aux_quality : float
        Held-out ROC-AUC / macro AUC / R² of the auxiliary model (``aux_quality_metric``).
    evidence : DataFrame or None
        Shape (n_individuals, n_source_columns): per-feature evidence summed to source columns.
    testers : dict
        Baseline testers' summaries (name -> dict with the statistic and its limit).
    provenance : dict
        Model/data/policy hashes, seed, settings and package versions.
    scores : ndarray of shape (n_input_rows,) or None
        LIC score per input row, in input order; NaN for rows not audited or undefined.
    row_index : ndarray of shape (n_individuals,) or None
        Input-row positions of the audited individuals.
    n_flagged : int
        Defined scores above ``delta``.
    interval : FlaggedInterval or None
        The flagged fraction's interval over individuals and aux seeds (:mod:`faux_checks.gate.bounds`).
    rules : list of dict
        Every rule of the decision with its status (:func:`faux_checks.gate.check_rules.check_rules`).
    aux_intervals : list of dict
        The aux model's quality where it matters, with intervals (:func:`~faux_checks.gate.bounds.quality_intervals`).
    group_rows : list of dict
        Per protected group: ``audited`` rows and the aux model's ``holdout`` rows (the evidence minimum).
    flag_probability : ndarray of shape (n_input_rows,) or None
        Per input row, the probability that the change exceeds δ (0 or 1 unless the reading enumerates
        level configurations, ``swap_categorical = "coupled"``); NaN for rows not audited or undefined.
        The flagged fraction is their mean (undefined rows counted as 1).
    swap_reference : SwapReference or None
        Variant swap: the reference the scores were read with (not in :meth:`to_dict`; recorded with the
        auxiliary model, :func:`faux_checks.report.records.write_check_records`).
    aux_model : AuxiliaryModel or None
        The auxiliary model the scores were computed with (trained or given); not in :meth:`to_dict`
        (:func:`faux_checks.report.records.write_check_records` saves it as TorchScript).
    decomposition : DataFrame of shape (n_individuals, 4) or None
        Variant swap: each audited person's f(x′) − f(x) and its ``direct``, ``proxies``, ``admissible`` parts
        (probability points, index: input row; :mod:`faux_checks.gate.decompose`); summarised in :meth:`to_dict`.
    group_table : list of dict
        The descriptive group-level table (:func:`faux_checks.baselines.group_metrics.group_table`).
    outcome : dict
        The outcome's direction (:func:`faux_checks.gate.outcome.outcome_record`): the probability's name
        (``P(deny = yes)``), whether the target's class is favourable (None: not declared), per group the flagged
        people whose probability would rise / fall, and the report's sentences; empty when the check did not run.
    """

    decision: Decision
    reasons: list[str]
    flagged_fraction: float
    max_flagged_fraction: float
    delta: float
    n_individuals: int = 0
    n_undefined: int = 0
    n_missing_protected: int = 0
    by_group: pd.DataFrame | None = None
    aux_quality: float = float("nan")
    aux_quality_metric: str = ""
    evidence: pd.DataFrame | None = None
    testers: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    scores: np.ndarray | None = None
    row_index: np.ndarray | None = None
    uses_protected_directly: bool = False
    top_flagged: list[dict] = field(default_factory=list)
    curve: dict[str, list[float]] = field(default_factory=dict)
    aux_roc: dict[str, list[float]] = field(default_factory=dict)
    n_flagged: int = 0
    interval: FlaggedInterval | None = None
    rules: list[dict] = field(default_factory=list)
    aux_intervals: list[dict] = field(default_factory=list)
    group_rows: list[dict] = field(default_factory=list)
    flag_probability: np.ndarray | None = None
    aux_model: Any = field(default=None, repr=False, compare=False)
    aux_seed_models: list = field(default_factory=list, repr=False, compare=False)   # (seed, AuxiliaryModel) extra seeds
    swap_reference: Any = field(default=None, repr=False, compare=False)
    decomposition: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    group_table: list[dict] = field(default_factory=list)
    outcome: dict = field(default_factory=dict)

    @classmethod
    def undecided(cls, reason: str, *, delta: float = float("nan"), max_flagged_fraction: float = float("nan"),
                  provenance: dict | None = None) -> "CheckResult":
        """A result for a check that could not be computed (never a pass)."""
        return cls(decision="undecided", reasons=[reason], flagged_fraction=float("nan"),
                   max_flagged_fraction=max_flagged_fraction, delta=delta, provenance=provenance or {},
                   rules=[rule_row("check", "not computed", reason)])

    def __repr__(self) -> str:
        return summary_line(self)

    def to_dict(self) -> dict:
        """JSON-ready dict with ``schema_version``; NaN becomes None."""
        return jsonable({
            "schema_version": SCHEMA_VERSION,
            "decision": self.decision,
            "exit_code": self.exit_code,
            "reasons": self.reasons,
            "flagged_fraction": self.flagged_fraction,
            "flagged_fraction_defined": self.flagged_fraction_defined,
            "interval": None if self.interval is None else self.interval.to_dict(),
            "max_flagged_fraction": self.max_flagged_fraction,
            "delta": self.delta,
            "n_individuals": self.n_individuals,
            "n_undefined": self.n_undefined,
            "n_flagged": self.n_flagged,
            "n_missing_protected": self.n_missing_protected,
            "rules": self.rules,
            "uses_protected_directly": self.uses_protected_directly,
            "aux_quality": self.aux_quality,
            "aux_quality_metric": self.aux_quality_metric,
            "aux_intervals": self.aux_intervals,
            "group_rows": self.group_rows,
            "by_group": None if self.by_group is None else self.by_group.reset_index().to_dict(orient="records"),
            "testers": self.testers,
            "top_flagged": self.top_flagged,
            "evidence_summary": self.evidence_summary(),
            "decomposition_summary": self.decomposition_summary(),
            "group_table": self.group_table,
            "outcome": self.outcome,
            "flagged_fraction_vs_delta": self.curve,
            "score_histogram": self.score_histogram(),
            "aux_roc": self.aux_roc,
            "provenance": self.provenance,
        })

    def to_json(self, **kwargs) -> str:
        """``json.dumps(self.to_dict())``."""
        return json.dumps(self.to_dict(), **{"indent": 2, **kwargs})

    def flagged(self) -> np.ndarray | None:
        """Bool array (n_input_rows,): rows flagged at δ (a defined score above δ; with level configurations, a
        flag probability of at least ½)."""
        if self.scores is None:
            return None
        if self.flag_probability is not None:
            return np.nan_to_num(self.flag_probability, nan=0.0) >= 0.5
        return np.nan_to_num(self.scores, nan=-np.inf) > self.delta

    def score_histogram(self, bins: int = 40) -> dict[str, list[float]]:
        """Histogram of the defined LIC scores on a log10 axis: ``edges`` (bins+1) and ``counts`` (bins)."""
        if self.scores is None:
            return {}
        s = self.scores[np.isfinite(self.scores)]
        s = s[s > 0]
        if len(s) == 0:
            return {}
        lo, hi = np.log10(s.min()), np.log10(s.max())
        counts, edges = np.histogram(np.log10(s), bins=bins, range=(lo, hi if hi > lo else lo + 1))
        return {"log10_edges": edges.tolist(), "counts": counts.tolist()}

    def decomposition_summary(self) -> dict | None:
        """Over flagged individuals (all, if none): the mean of each part of the change and of its absolute value.

        ``{"over": "flagged" | "all", "n": int, "direct": {"mean", "mean_abs"}, "proxies": ..., "admissible": ...,
        "total": ...}`` in probability points; None without a decomposition (the gradient readings).
        """
        if self.decomposition is None or self.scores is None or self.row_index is None:
            return None
        flags = self.flagged()
        assert flags is not None                    # None only without scores, checked above
        flagged = flags[self.row_index]
        rows = self.decomposition[flagged] if flagged.any() else self.decomposition
        rows = rows.dropna()
        out: dict = {"over": "flagged" if flagged.any() else "all", "n": int(len(rows))}
        for col in rows.columns:
            out[str(col)] = {"mean": float(rows[col].mean()) if len(rows) else None,
                             "mean_abs": float(rows[col].abs().mean()) if len(rows) else None}
        return out

    def evidence_summary(self, top: int = 10) -> list[dict]:
        """Source columns ranked by mean |evidence| over flagged individuals (all if none flagged)."""
        if self.evidence is None or self.scores is None or self.row_index is None:
            return []
        flags = self.flagged()
        assert flags is not None                    # None only without scores, checked above
        flagged = flags[self.row_index]
        ev = self.evidence[flagged] if flagged.any() else self.evidence
        mean_abs = ev.abs().mean().sort_values(ascending=False)
        total = float(mean_abs.sum()) or 1.0
        return [{"column": str(c), "mean_abs_evidence": float(v), "share": float(v) / total}
                for c, v in mean_abs.head(top).items()]


def delta_curve(scores: np.ndarray, n_points: int = 60, *, outcomes: np.ndarray | None = None,
                weights: np.ndarray | None = None) -> dict[str, list[float]]:
    """Flagged fraction (over the defined scores) as a function of δ (log grid over the defined scores' range).

    Parameters
    ----------
    scores : ndarray of shape (n,), NaN where undefined
    outcomes, weights : ndarray of shape (n, C), optional
        Level configurations' changes and probabilities (:class:`~faux_checks.method.result.LICResult`): the
        fraction at δ is then the mean probability that the change exceeds δ.

    Returns
    -------
    dict with ``delta`` and ``flagged_fraction`` lists of length ``n_points``.
    """
    ok = np.isfinite(scores)
    if outcomes is None:                                  # one outcome per row, weight 1
        values, w = scores[ok][:, None], np.ones((int(ok.sum()), 1))
    else:
        assert weights is not None                  # given with the outcomes (LICResult holds both)
        values, w = outcomes[ok], weights[ok]
    s = values[w > 0]
    if len(s) == 0:
        return {"delta": [], "flagged_fraction": []}
    positive = s[s > 0]
    lo = float(np.quantile(positive, 0.01)) if len(positive) else 1e-6
    hi = float(s.max()) * 1.05 if s.max() > 0 else 1.0
    grid = np.geomspace(max(lo, 1e-9), max(hi, lo * 10), n_points)
    order = np.argsort(values.ravel(), kind="stable")
    flat_v, flat_w = values.ravel()[order], w.ravel()[order]
    above = np.concatenate([np.cumsum(flat_w[::-1])[::-1], [0.0]])              # weight of the outcomes from each on
    frac = above[np.searchsorted(flat_v, grid, side="right")] / ok.sum()        # weight above δ, per defined row
    return {"delta": grid.tolist(), "flagged_fraction": frac.tolist()}
