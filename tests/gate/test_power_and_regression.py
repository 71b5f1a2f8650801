"""Power of a run and the per-individual comparison of two versions."""

from __future__ import annotations

import numpy as np
import pytest

from faux_checks.errors import InputError
from faux_checks.gate.bounds import clopper_pearson
from faux_checks.gate.power import capacity_statement, detectable_fraction, first_failing_count
from faux_checks.gate.regression import compare_flags, newly_flagged_rule


def _detection_rate(p: float, n: int, limit: float, k_fail: int, draws: int, seed: int) -> float:
    k = np.random.default_rng(seed).binomial(n, p, size=draws)
    return float(np.mean(k >= k_fail))


@pytest.mark.parametrize("n", [500, 4000, 15060])
def test_the_detectable_fraction_is_caught_in_95_percent_of_simulated_audits(n):
    limit = 0.05
    p = detectable_fraction(n, limit, 0.95, power=0.95)
    k_fail = first_failing_count(n, limit, 0.95)
    # the count from which the rule fails: its lower bound is above the limit, one fewer is not
    assert clopper_pearson(k_fail, n, 0.95)[0] > limit >= clopper_pearson(k_fail - 1, n, 0.95)[0]
    assert limit < p < 0.2
    assert _detection_rate(p, n, limit, k_fail, 200_000, 0) >= 0.95 - 0.002       # simulation, ±2 s.e.
    assert _detection_rate(p - 0.004, n, limit, k_fail, 200_000, 1) < 0.95          # and it is the smallest


def test_more_rows_detect_a_smaller_excess_and_the_seed_spread_costs_power():
    small, large = detectable_fraction(500, 0.05), detectable_fraction(15060, 0.05)
    assert large < small
    assert detectable_fraction(15060, 0.05, lower_shift=-0.01) > large               # seeds widen the interval
    assert detectable_fraction(20, 0.9) is None                                       # 20 rows cannot clear 90%


def test_the_capacity_statement_names_the_quality_and_the_columns_that_carry_it():
    text = capacity_statement("roc_auc", 0.933, (0.925, 0.941), 0.87,
                              [{"column": "relationship", "role": "moves", "informative_z": 41.2},
                               {"column": "age", "role": "declared", "informative_z": 3.1},
                               {"column": "race", "role": "independent", "informative_z": 0.4}], 0.014)
    assert text.startswith("an auxiliary model recovers the protected attribute with roc_auc 0.933 [0.925, 0.941]")
    assert "most from relationship (z 41.2), age (z 3.1), race (z 0.4)" in text and text.endswith("flagged 1.4%")


def test_newly_flagged_resolved_and_still_flagged_match_a_direct_comparison():
    rng = np.random.default_rng(2)
    base = (rng.random(3000) < 0.10).astype(float)
    cand = (rng.random(3000) < 0.12).astype(float)
    groups = rng.choice(["F", "M"], 3000)
    change = compare_flags(base, cand, groups=groups)
    assert change.newly == ((cand == 1) & (base == 0)).sum()
    assert change.resolved == ((cand == 0) & (base == 1)).sum()
    assert change.still == ((cand == 1) & (base == 1)).sum()
    assert change.change == pytest.approx(cand.mean() - base.mean())
    lo, hi = change.change_interval
    assert lo < change.change < hi
    f = change.by_group.loc["F"]
    rows = groups == "F"
    assert f["newly"] == ((cand == 1) & (base == 0) & rows).sum() and f["n"] == rows.sum()


def test_no_new_harm_fails_a_version_that_swaps_who_is_harmed_at_an_unchanged_fraction():
    base, cand = np.zeros(1000), np.zeros(1000)
    base[:50] = 1.0                                                                    # 5% flagged
    cand[50:100] = 1.0                                                                 # another 5%
    change = compare_flags(base, cand)
    assert (change.newly, change.resolved, change.still, change.change) == (50, 50, 0, 0.0)
    assert change.change_interval[0] < 0 < change.change_interval[1]                  # the aggregate: no change
    rule = newly_flagged_rule(change, 0.02)
    assert rule["status"] == "exceeded" and "harms individuals the deployed one did not" in rule["detail"]
    assert newly_flagged_rule(compare_flags(base, base), 0.02)["status"] == "ok"


def test_flag_probabilities_give_expected_counts_and_bad_flags_are_refused():
    change = compare_flags([0.5, 1.0, 0.0], [0.5, 0.0, 1.0])
    assert change.newly == pytest.approx(0.25 + 0 + 1) and change.resolved == pytest.approx(0.25 + 1.0)
    with pytest.raises(InputError, match="1 values outside"):
        compare_flags([0.5, np.nan], [0.5, 0.5])
    with pytest.raises(InputError, match="the same rows: 2 and 3 rows"):
        compare_flags([0, 1], [0, 1, 1])


def test_flag_probabilities_a_rounding_error_above_one_are_read_as_one():
    """A coupled level's probabilities sum to 1 + 2e-16 in float64; it is a flag of 1, not bad input."""
    change = compare_flags([1.0000000000000002, 0.0], [1.0, 1.0])
    assert change.newly == 1.0 and change.still == 1.0 and change.resolved == 0.0
    with pytest.raises(InputError, match="outside"):
        compare_flags([1.01, 0.0], [1.0, 1.0])
