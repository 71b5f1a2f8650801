"""The fAux tester's per-individual output: :class:`LICResult` (scores, undefined rows, evidence, the swap
reading's counterfactuals and level configurations) and the flags a decision reads from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ranking import ranking_score

__all__ = ["LICResult"]


@dataclass(frozen=True)
class LICResult:
    """Per-individual fAux output, as numpy arrays.

    Attributes
    ----------
    scores : ndarray of shape (n,), float64
        LIC score (NaN where undefined). Unit: probability points, |Δŷ| when only c changes (variant
        swap); change of P(y = target_class) per unit change of the aux output (variants faux/ig);
        |cos| in [0, 1] (ng).
    undefined : ndarray of shape (n,), bool
        Zero/degenerate aux gradient, non-finite values, or (probability/softmax output forms)
        a target probability saturated to exactly 0 or 1, whose gradient is 0 by rounding.
    evidence : ndarray of shape (n, d), float32, or None
        Per-feature terms of the score (see :func:`faux_checks.method.lic.faux_scores`).
    probability : ndarray of shape (n,), float64
        The target's P(y = target_class | x).
    direct : ndarray of shape (n,), float64, or None
        Max-abs of the direct term alone when c's own columns are target inputs (C09).
    counterfactual_probability : ndarray of shape (n,), float64, or None
        Variant swap: ŷ at the counterfactual with the largest change.
    counterfactual_target : ndarray of shape (n,), int64, or None
        Variant swap: that counterfactual's group index (continuous c: +1 or −1 sd).
    no_split_crossed : ndarray of shape (n,), bool, or None
        Variant faux with a forward-only target (finite differences): the score is 0 only because the
        prediction did not change within ± the step (a tree crossed no split), not by evidence.
    outcomes, outcome_weights : ndarray of shape (n, C), or None
        Variant swap with ``swap_categorical = "coupled"``: |Δŷ| at each level configuration of the
        counterfactuals and its weight (rows sum to 1); ``scores`` is their expected value. With several other
        groups (or ±1 sd) the weight above δ is min(1, Σ_t P_t(change > δ)) over the counterfactual targets t
        (:func:`~faux_checks.method.chunk.union_outcomes`).
    counterfactual : ndarray of shape (n, d), float32, or None
        Variant swap with evidence: the representative counterfactual x′ of each row (the most probable
        configuration of the other group with the largest expected change); what the evidence and the
        decomposition (:mod:`faux_checks.method.decomposition`) read.
    """

    scores: np.ndarray
    undefined: np.ndarray
    evidence: np.ndarray | None
    probability: np.ndarray
    direct: np.ndarray | None
    counterfactual_probability: np.ndarray | None = None
    counterfactual_target: np.ndarray | None = None
    no_split_crossed: np.ndarray | None = None
    outcomes: np.ndarray | None = None
    outcome_weights: np.ndarray | None = None
    counterfactual: np.ndarray | None = None

    def flag_probability(self, delta: float) -> np.ndarray:
        """Float (n,) in [0, 1]: the probability that a defined row's change exceeds delta (0 for undefined rows).

        With level configurations (``outcomes``) it is the weight of the configurations whose change exceeds
        delta; otherwise 1.0 where the score exceeds delta and 0.0 elsewhere.
        """
        if self.outcomes is None:
            return self.flagged(delta).astype(np.float64)
        p = (self.outcome_weights * (self.outcomes > delta)).sum(axis=1)
        return np.where(self.undefined, 0.0, p)

    def decision_weights(self, delta: float) -> np.ndarray:
        """Float (n,) in [0, 1]: what each row adds to the decision's flagged count at delta.

        1.0 for an undefined row (the worst case), :meth:`flag_probability` otherwise.
        """
        bad = np.asarray(self.undefined, dtype=bool) | ~np.isfinite(np.asarray(self.scores, dtype=np.float64))
        return np.where(bad, 1.0, self.flag_probability(delta))

    def ranking_score(self, delta: float) -> np.ndarray:
        """Float (n,) in (0, 1]: the per-person ranking at delta, larger first (undefined rows first).

        The rank of (:meth:`flag_probability`, ``scores``) in lexicographic order as a fraction of n
        (:func:`~faux_checks.method.ranking.ranking_score`: the probability ranking principle). Without level
        configurations it orders rows as ``scores`` does.
        """
        return ranking_score(self.scores, self.flag_probability(delta), self.undefined)

    def flagged(self, delta: float) -> np.ndarray:
        """Bool (n,): defined rows flagged at delta; undefined rows are never in it (count them apart).

        Without level configurations: score > delta. With them: the change exceeds delta with probability
        at least ½ (the per-person list; the flagged fraction reads :meth:`flag_probability`).
        """
        if self.outcomes is None:
            return np.nan_to_num(self.scores, nan=-np.inf) > delta
        return self.flag_probability(delta) >= 0.5
