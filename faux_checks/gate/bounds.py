"""Confidence intervals a decision rests on: the flagged fraction and the auxiliary model's quality.

- The flagged fraction over individuals: the exact (Clopper–Pearson) binomial interval,
  ``scipy.stats.binomtest(k, n).proportion_ci(method="exact")``; widened by how far the fraction
  moved across auxiliary-model seeds (:class:`FlaggedInterval`); :func:`rows_needed` estimates the
  audit rows that would bring the interval clear of a limit.
- ROC-AUC: the Hanley–McNeil (1982) standard error, a normal interval clipped to [0, 1]; for a
  group with one held-out member it is wide, so a floor is not met by a lucky point value.
- R² (continuous c): the percentile bootstrap of ``scipy.stats.bootstrap`` (paired rows, seeded).

Pure functions of counts and arrays; no model is touched here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..kinds import protected_kind
__all__ = ["FlaggedInterval", "auc_interval", "auc_rows_needed", "below_floor", "clopper_pearson", "flagged_interval",
           "quality_intervals", "r2_interval", "rows_needed"]


def clopper_pearson(k: int, n: int, confidence: float) -> tuple[float, float]:
    """Exact two-sided binomial interval of k successes in n trials.

    Parameters
    ----------
    k, n : int
        0 <= k <= n.
    confidence : float
        In (0, 1), e.g. 0.95.

    Returns
    -------
    (lower, upper) : floats in [0, 1]; (nan, nan) when n == 0.

    Notes
    -----
    Clopper and Pearson (1934), Biometrika 26:404–413, via ``scipy.stats.binomtest``.
    """
    if n <= 0:
        return float("nan"), float("nan")
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=float(confidence), method="exact")
    return float(ci.low), float(ci.high)


@dataclass(frozen=True)
class FlaggedInterval:
    """The flagged fraction and its interval over individuals and auxiliary-model seeds.

    Attributes
    ----------
    fraction : float
        ``k / n``: flagged individuals, an undefined score counted as flagged, over every audited one.
    k, n : int
    confidence : float
    individuals : (float, float)
        Clopper–Pearson interval of ``k / n``.
    seed_shift : (float, float)
        How far the flagged fraction moved across aux seeds, relative to the seed the check used,
        on the rows all seeds scored: (min(0, lowest − used), max(0, highest − used)); (0, 0) when
        not computed.
    seeds : dict or None
        ``seeds``, ``fractions`` (on the seed sample), ``rows``, ``spread`` (highest − lowest);
        None when one seed (or a given aux model).
    lower, upper : float
        ``individuals`` widened by ``seed_shift``, clipped to [0, 1].
    """

    fraction: float
    k: int
    n: int
    confidence: float
    individuals: tuple[float, float]
    seed_shift: tuple[float, float] = (0.0, 0.0)
    seeds: dict | None = field(default=None)

    @property
    def lower(self) -> float:
        return max(0.0, self.individuals[0] + self.seed_shift[0])

    @property
    def upper(self) -> float:
        return min(1.0, self.individuals[1] + self.seed_shift[1])

    def text(self) -> str:
        """'13.3% (95% CI 12.7–13.9%)'."""
        if not math.isfinite(self.fraction):
            return "n/a"
        return f"{self.fraction:.2%} ({self.confidence:.0%} CI {self.lower:.2%}–{self.upper:.2%})"

    def to_dict(self) -> dict:
        """JSON-ready: fraction, lower, upper, confidence, the interval over individuals, the seed part."""
        return {"fraction": self.fraction, "lower": self.lower, "upper": self.upper, "confidence": self.confidence,
                "method": "Clopper-Pearson over individuals, widened by the spread across auxiliary-model seeds",
                "k": self.k, "n": self.n, "individuals": {"lower": self.individuals[0], "upper": self.individuals[1]},
                "seed_shift": {"lower": self.seed_shift[0], "upper": self.seed_shift[1]}, "seeds": self.seeds}


def flagged_interval(k: int, n: int, confidence: float, seeds: dict | None = None) -> FlaggedInterval:
    """The :class:`FlaggedInterval` of k flagged (undefined included) among n audited individuals.

    Parameters
    ----------
    seeds : dict, optional
        From :func:`faux_checks.gate.seeds.seed_spread`: ``fractions`` on the rows every seed
        scored, the first being the seed the check used.
    """
    frac = k / n if n else float("nan")
    shift = (0.0, 0.0)
    if seeds and len(seeds.get("fractions") or ()) > 1:
        f = np.asarray(seeds["fractions"], dtype=np.float64)
        shift = (min(0.0, float(f.min() - f[0])), max(0.0, float(f.max() - f[0])))
    return FlaggedInterval(frac, int(k), int(n), float(confidence), clopper_pearson(k, n, confidence), shift, seeds)


def rows_needed(interval: FlaggedInterval, limit: float) -> int | None:
    """About how many audit rows would bring the interval clear of ``limit`` at the same flagged fraction.

    The smallest m (2 significant digits, rounded up) for which the Clopper–Pearson interval of
    round(fraction · m) in m, widened by the same seed shift, lies entirely on one side of the limit.

    Returns
    -------
    int or None
        None when no number of rows can: the fraction (or its range across aux seeds) touches the limit.
    """
    p = interval.fraction
    lo_shift, hi_shift = interval.seed_shift
    below = p + hi_shift < limit
    above = p + lo_shift > limit
    if not (below or above) or not math.isfinite(p):
        return None

    def clears(m: int) -> bool:
        lo, hi = clopper_pearson(round(p * m), m, interval.confidence)
        return hi + hi_shift <= limit if below else lo + lo_shift > limit

    lo_m, hi_m = max(interval.n, 1), max(interval.n, 1)
    while not clears(hi_m):
        lo_m, hi_m = hi_m, hi_m * 2
        if hi_m > 10**12:
            return None
    while hi_m - lo_m > max(1, lo_m // 200):
        mid = (lo_m + hi_m) // 2
        lo_m, hi_m = (lo_m, mid) if clears(mid) else (mid, hi_m)
    digits = max(0, len(str(hi_m)) - 2)
    return int(math.ceil(hi_m / 10**digits) * 10**digits)


def auc_interval(auc: float, n_pos: int, n_neg: int, confidence: float) -> tuple[float, float]:
    """Normal interval of a ROC-AUC with the Hanley–McNeil standard error, clipped to [0, 1].

    Parameters
    ----------
    auc : float
        The AUC measured on ``n_pos`` positive and ``n_neg`` negative rows.

    Returns
    -------
    (lower, upper) ; (nan, nan) when either class is empty or the AUC is not finite.

    Notes
    -----
    Hanley and McNeil (1982), Radiology 143:29–36, eq. 2: Q1 = A/(2 − A), Q2 = 2A²/(1 + A),
    SE² = [A(1 − A) + (n_pos − 1)(Q1 − A²) + (n_neg − 1)(Q2 − A²)] / (n_pos · n_neg).
    """
    if n_pos < 1 or n_neg < 1 or not math.isfinite(auc):
        return float("nan"), float("nan")
    from scipy.stats import norm

    q1, q2 = auc / (2 - auc), 2 * auc**2 / (1 + auc)
    var = (auc * (1 - auc) + (n_pos - 1) * (q1 - auc**2) + (n_neg - 1) * (q2 - auc**2)) / (n_pos * n_neg)
    half = float(norm.ppf(0.5 + confidence / 2)) * math.sqrt(max(var, 0.0))
    return max(0.0, auc - half), min(1.0, auc + half)


def auc_rows_needed(auc: float, n_pos: int, n_neg: int, floor: float, confidence: float) -> tuple[int, int] | None:
    """About how many positive and negative rows would lift the AUC interval's lower bound to ``floor``.

    The smallest factor m (searched by bisection to 1%) for which :func:`auc_interval` of the same AUC on
    ``ceil(m · n_pos)`` positive and ``ceil(m · n_neg)`` negative rows has its lower bound at or above the floor: the
    Hanley–McNeil variance with both classes grown in their observed proportion.

    Returns
    -------
    (n_pos, n_neg) or None
        None when no number of rows can: the AUC itself is at or below the floor (or not finite, or a class empty).
    """
    if not math.isfinite(auc) or auc <= floor or n_pos < 1 or n_neg < 1:
        return None

    def clears(m: float) -> bool:
        return auc_interval(auc, math.ceil(m * n_pos), math.ceil(m * n_neg), confidence)[0] >= floor

    lo, hi = 0.0, 1.0
    while not clears(hi):
        lo, hi = hi, hi * 2
        if hi > 1e9:
            return None
    while hi - lo > 0.01 * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if clears(mid) else (mid, hi)
    return math.ceil(hi * n_pos), math.ceil(hi * n_neg)


def r2_interval(y: np.ndarray, pred: np.ndarray, confidence: float, *, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval (999 paired resamples, seeded) of the R² of ``pred`` for ``y`` (both (m,))."""
    y, pred = np.asarray(y, dtype=np.float64), np.asarray(pred, dtype=np.float64)
    if len(y) < 3 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    from scipy.stats import bootstrap

    def r2(a, b, axis=-1):
        resid = ((a - b) ** 2).sum(axis=axis)
        total = ((a - a.mean(axis=axis, keepdims=True)) ** 2).sum(axis=axis)
        return 1 - resid / np.where(total > 0, total, np.nan)

    res = bootstrap((y, pred), r2, paired=True, vectorized=True, n_resamples=999, confidence_level=confidence,
                    method="percentile", random_state=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def quality_intervals(kind: str, y: np.ndarray, score: np.ndarray, groups, confidence: float, *,
                      seed: int = 0) -> list[dict]:
    """The auxiliary model's held-out quality where it matters, each with its interval.

    Parameters
    ----------
    kind : {"binary", "multiclass", "continuous"}
    y : ndarray of shape (m,)
        Held-out protected values (group index, or the value for continuous c).
    score : ndarray of shape (m,) or (m, k)
        P(group 1) (binary), group probabilities (multiclass) or the prediction (continuous).
    groups : sequence of str
        Group names in index order (unused for continuous c).

    Returns
    -------
    list of dict
        ``what`` (the groups it separates), ``metric``, ``quality``, ``lower``, ``upper``,
        ``n_positive``, ``n_negative``. Binary: one row (the AUC separates both groups);
        multiclass: one row per group (one-vs-rest AUC); continuous: one row (R²).
    """
    from sklearn.metrics import r2_score, roc_auc_score

    entry = protected_kind(kind)
    y = np.asarray(y)
    if not entry.grouped:
        q = float(r2_score(y, score)) if len(y) >= 2 else float("nan")
        lo, hi = r2_interval(y, score, confidence, seed=seed)
        return [{"what": "all", "metric": entry.quality_metric, "quality": q, "lower": lo, "upper": hi, "n_positive": int(len(y)),
                 "n_negative": 0}]
    score = np.asarray(score, dtype=np.float64)
    targets = list(range(len(groups))) if entry.multi_output else [1]
    rows = []
    for g in targets:
        hit = y == g
        s = score[:, g] if entry.multi_output else score
        n_pos, n_neg = int(hit.sum()), int((~hit).sum())
        auc = float(roc_auc_score(hit, s)) if n_pos and n_neg else float("nan")
        lo, hi = auc_interval(auc, n_pos, n_neg, confidence)
        what = f"{groups[0]} vs {groups[1]}" if not entry.multi_output and len(groups) == 2 else f"{groups[g]} vs rest"
        rows.append({"what": what, "metric": entry.quality_metric, "quality": auc,
                     "lower": lo, "upper": hi, "n_positive": n_pos, "n_negative": n_neg})
    return rows


def below_floor(intervals, floor: float) -> list:
    """The quality intervals (:func:`quality_intervals` rows) whose lower bound is missing, not finite or under ``floor``.

    The one reading of ``min_aux_quality``: the decision's rule and the choice to cross-fit both ask it.
    """
    return [r for r in intervals if r.get("lower") is None or not math.isfinite(r["lower"]) or r["lower"] < floor]
