"""The per-person ranking of the swap reading: who most probably changes by more than δ.

The decision reads the flagged fraction, the mean over individuals of P(|Δŷ| > δ) (the flag probability of
:class:`~faux_checks.method.result.LICResult`); the per-person list ranks individuals by the same posterior
probability, and breaks its ties by the expected change. Ranking by the probability of the event IFS > δ is the
order that maximises the expected number of true positives among the top k for every k (the probability ranking
principle, Robertson, "The probability ranking principle in IR", J. Documentation 33(4), 1977), and so the expected
precision at every recall; the expected change E|Δŷ| mixes a rare large change with a sure small one and ranks
them by their mean instead. Rows whose level configurations all fall on one side of δ share a probability of 0
or 1; among them the larger expected change ranks first (the change further above δ, or nearer to it from
below).
"""

from __future__ import annotations

import numpy as np

__all__ = ["ranking_score"]


def ranking_score(scores: np.ndarray, flag_probability: np.ndarray, undefined: np.ndarray | None = None) -> np.ndarray:
    """The per-person ranking score: the rank of (P(|Δŷ| > δ), E|Δŷ|), lexicographic, as a fraction of n.

    score_i = #{j : (p_j, s_j) ≤ (p_i, s_i)} / n, ties sharing the largest rank, with p the flag probability at δ
    and s the expected change (lexicographic order: p first, s among equal p). Undefined rows (``undefined`` or a
    non-finite score) rank first (score 1), as the decision counts them as flagged. Source: the probability
    ranking principle (module docstring); p and s as in :class:`~faux_checks.method.result.LICResult`
    (``flag_probability(delta)`` and ``scores``).

    Parameters
    ----------
    scores : ndarray of shape (n,)
        Expected |Δŷ| per row, probability points (NaN where undefined).
    flag_probability : ndarray of shape (n,)
        P(|Δŷ| > δ) per row, in [0, 1].
    undefined : ndarray of shape (n,), bool, or None
        Rows without a score.

    Returns
    -------
    ndarray of shape (n,), float64, in (0, 1]
        A larger value ranks higher; only the order carries meaning (a monotone map of the pair).

    Raises
    ------
    ValueError
        If the arrays differ in length, or a flag probability is outside [0, 1] or not finite.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    p = np.asarray(flag_probability, dtype=np.float64).ravel()
    bad = ~np.isfinite(s) if undefined is None else np.asarray(undefined, dtype=bool).ravel() | ~np.isfinite(s)
    if not (len(s) == len(p) == len(bad)):
        raise ValueError(f"ranking_score: scores ({len(s)}), flag_probability ({len(p)}) and undefined ({len(bad)}) "
                         "must have one entry per row")
    off = ~np.isfinite(p) | (p < -1e-9) | (p > 1 + 1e-9)     # a sum of weights may pass 1 by rounding
    if off.any():
        raise ValueError(f"ranking_score: {int(off.sum())} flag probabilities are outside [0, 1] or not finite; "
                         "pass LICResult.flag_probability(delta)")
    p = np.clip(p, 0.0, 1.0)
    n = len(s)
    if n == 0:
        return np.zeros(0)
    key_p = np.where(bad, 2.0, p)                          # undefined rows above every defined one
    key_s = np.where(bad, 0.0, s)
    order = np.lexsort((key_s, key_p))                     # ascending: p first, then s
    sp, ss = key_p[order], key_s[order]
    same_as_next: np.ndarray = np.append((sp[1:] == sp[:-1]) & (ss[1:] == ss[:-1]), False)
    run_end: np.ndarray = np.flatnonzero(~same_as_next)              # the last position of each run of equal pairs
    run_of: np.ndarray = np.cumsum(np.append(True, ~same_as_next[:-1])) - 1
    rank = np.empty(n)
    rank[order] = run_end[run_of] + 1.0                     # ties share the largest rank
    return rank / n
