"""Did the test have power? The smallest flagged fraction the run would have caught, and the data's proxy capacity.

A pass says "at most 5% are flagged, with 95% confidence"; a reviewer also asks what the run could
have seen. Two statements answer it, both from what the run measured:

- **Power** (:func:`detectable_fraction`): the smallest true flagged fraction above the limit at which a
  run of the same size would *fail* the model (its interval's lower bound above the limit, after the
  aux seeds' widening) in at least ``power`` of repeated audits — a binomial calculation with
  Clopper–Pearson's exact bounds, the same bounds the decision reads.
- **Proxy capacity** (:func:`capacity_statement`): how well c can be recovered from the features at all
  (the auxiliary model's held-out quality and its interval, and with the held columns permuted), and
  which columns carry it. High capacity with a low flagged fraction is evidence of a real pass;
  near-chance capacity says the data cannot carry proxy discrimination (and the aux-quality floor then
  keeps the gate undecided).

Pure functions of counts; our construction.
"""

from __future__ import annotations

import math

import numpy as np

from .bounds import clopper_pearson

__all__ = ["capacity_statement", "detectable_fraction", "first_failing_count"]


def first_failing_count(n: int, limit: float, confidence: float, lower_shift: float = 0.0) -> int | None:
    """The smallest flagged count k out of n whose interval's lower bound, moved down by ``lower_shift`` (≤ 0, the
    aux seeds' largest drop), lies above ``limit``: the count from which the rule fails a model. None if none does."""
    if n <= 0:
        return None
    lo, hi = 0, n
    if clopper_pearson(n, n, confidence)[0] + lower_shift <= limit:
        return None
    while lo < hi:                                    # the lower bound grows with k: bisection
        mid = (lo + hi) // 2
        if clopper_pearson(mid, n, confidence)[0] + lower_shift > limit:
            hi = mid
        else:
            lo = mid + 1
    return lo


def detectable_fraction(n: int, limit: float, confidence: float = 0.95, *, power: float = 0.95,
                        lower_shift: float = 0.0) -> float | None:
    """The smallest true flagged fraction a run of n audited individuals fails with probability ≥ ``power``.

    Parameters
    ----------
    n : int
        Audited individuals.
    limit : float
        ``max_flagged_fraction``.
    confidence : float
        The decision's interval level.
    power : float
        The share of repeated audits (binomial draws of the flagged count) that must fail.
    lower_shift : float
        How far the aux seeds moved the interval's lower end down (≤ 0; ``FlaggedInterval.seed_shift[0]``).

    Returns
    -------
    float or None
        p* in (limit, 1]: P(K ≥ k*) ≥ power for K ~ Binomial(n, p*), k* from :func:`first_failing_count`; None
        when no fraction is detectable (too few rows for any count to clear the limit).

    Notes
    -----
    Our construction: the binomial model treats individuals as independent flags, as the interval does.
    ``tests/test_power.py`` checks it against simulated draws.
    """
    from scipy.stats import binom

    k = first_failing_count(n, limit, confidence, lower_shift)
    if k is None:
        return None
    lo, hi = float(limit), 1.0
    if binom.sf(k - 1, n, hi) < power:
        return None
    for _ in range(60):                                # P(K ≥ k) increases with p: bisection to 1e-18
        mid = (lo + hi) / 2
        if binom.sf(k - 1, n, mid) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def capacity_statement(metric: str, quality: float, interval: tuple[float, float] | None, free_quality: float | None,
                       columns: list[dict], flagged_fraction: float) -> str:
    """One sentence: how well c can be read from the features, by which columns, next to the flagged fraction.

    ``columns``: the report's column roles (``column``, ``role``, ``informative_z``); the three columns that
    inform the aux model most (largest z) are named.
    """
    if quality is None or not math.isfinite(quality):
        return "the auxiliary model's quality was not measured: the data's capacity to carry the protected attribute is unknown"
    ranked = sorted((c for c in columns if c.get("informative_z") is not None and math.isfinite(c["informative_z"])),
                    key=lambda c: -c["informative_z"])[:3]
    where = ", ".join(f"{c['column']} (z {c['informative_z']:.1f})" for c in ranked) or "no column tested"
    ci = "" if not interval or not all(np.isfinite(interval)) else f" [{interval[0]:.3f}, {interval[1]:.3f}]"
    free = ("" if free_quality is None or not math.isfinite(free_quality)
            else f"; {free_quality:.3f} from the columns the counterfactual moves (the held ones permuted)")
    return (f"an auxiliary model recovers the protected attribute with {metric} {quality:.3f}{ci} from these columns"
            f"{free}, most from {where}; the gate flagged {flagged_fraction:.1%}")
