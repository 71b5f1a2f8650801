"""The per-person ranking score (faux_checks.method.ranking): closed forms and a generator with known truth."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import rankdata

from faux_checks.method.ranking import ranking_score
from faux_checks.method.result import LICResult


def _result(outcomes, weights, undefined=None) -> LICResult:
    outcomes, weights = np.asarray(outcomes, dtype=np.float64), np.asarray(weights, dtype=np.float64)
    scores = (outcomes * weights).sum(axis=1)
    undefined = np.zeros(len(scores), dtype=bool) if undefined is None else np.asarray(undefined)
    scores = np.where(undefined, np.nan, scores)
    return LICResult(scores=scores, undefined=undefined, evidence=None, probability=np.full(len(scores), 0.5),
                     direct=None, outcomes=outcomes, outcome_weights=weights)


def test_rare_large_change_ranks_below_a_sure_change_above_delta():
    """δ = 0.1. A: 0.30 w.p. 0.4 else 0 (E 0.12, P 0.4); B: 0.11 surely (E 0.11, P 1); C: 0.09 surely (P 0);
    D: 0.02 surely (P 0); U undefined. Order U, B, A, C, D (the expected change would put A above B)."""
    lic = _result([[0.30, 0.0], [0.11, 0.11], [0.09, 0.09], [0.02, 0.02], [0.5, 0.5]],
                  [[0.4, 0.6], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]],
                  undefined=[False, False, False, False, True])
    np.testing.assert_allclose(lic.scores[:4], [0.12, 0.11, 0.09, 0.02])
    np.testing.assert_allclose(lic.ranking_score(0.1), [0.6, 0.8, 0.4, 0.2, 1.0])


def test_equal_pairs_share_the_largest_rank():
    s = np.array([0.2, 0.2, 0.05, 0.2])
    p = np.array([1.0, 1.0, 0.0, 0.5])
    np.testing.assert_allclose(ranking_score(s, p), [1.0, 1.0, 0.25, 0.5])


def test_without_configurations_the_order_is_the_scores_order():
    """Outcomes None: the flag probability is 1[score > δ], so (p, s) orders rows as s does."""
    rng = np.random.default_rng(3)
    scores = rng.uniform(0, 0.3, 200)
    lic = LICResult(scores=scores, undefined=np.zeros(200, dtype=bool), evidence=None,
                    probability=np.full(200, 0.5), direct=None)
    np.testing.assert_allclose(lic.ranking_score(0.1), rankdata(scores, method="max") / 200)


def test_top_k_holds_the_most_expected_true_positives_on_a_known_generator():
    """Each row's true change is one of its K configurations, drawn with the configuration weights (the reading
    knows the law exactly): E[#{IFS > δ} in the top k] = Σ_top-k P_i, largest when the top k are the k largest P
    (closed form), for every k. The expected change loses at some k on the same rows, and the realised AP follows."""
    from sklearn.metrics import average_precision_score

    rng = np.random.default_rng(0)
    n, k_conf, delta = 4000, 4, 0.1
    weights = rng.dirichlet(np.ones(k_conf), n)
    outcomes = np.abs(rng.normal(0.05, 0.08, (n, k_conf)))
    lic = _result(outcomes, weights)
    p = lic.flag_probability(delta)
    best = np.cumsum(np.sort(p)[::-1])                               # Σ of the k largest P, k = 1..n
    by_rank = np.cumsum(p[np.argsort(-lic.ranking_score(delta), kind="stable")])
    by_mean = np.cumsum(p[np.argsort(-lic.scores, kind="stable")])
    np.testing.assert_allclose(by_rank, best, rtol=0, atol=1e-9)
    assert (best - by_mean).max() > 5.0                              # several expected positives lost
    truth = outcomes[np.arange(n), (rng.random(n)[:, None] > np.cumsum(weights, axis=1)).sum(axis=1)] > delta
    ap_rank = average_precision_score(truth, lic.ranking_score(delta))
    ap_mean = average_precision_score(truth, lic.scores)
    assert ap_rank > ap_mean + 0.01


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="one entry per row"):
        ranking_score(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="2 flag probabilities"):
        ranking_score(np.zeros(3), np.array([0.5, 1.5, np.nan]))
