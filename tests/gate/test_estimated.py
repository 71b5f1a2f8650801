"""The protected attribute as per-row probabilities: the checks of the probabilities, their sharpness, the draws
and Rubin's combination, each against a closed form (faux_checks.inputs.probabilities, faux_checks.gate.estimated)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm, t

from faux_checks.errors import ConfigurationError
from types import SimpleNamespace

from faux_checks.gate.bounds import FlaggedInterval
from faux_checks.gate.estimated import (draw_rules, flagged_rule, pass_interval, pass_reading, rubin_interval,
                                        sharpness_rule)
from faux_checks.gate.policy import Policy
from faux_checks.inputs.probabilities import (discrimination, draw_groups, expected_auc, expected_auc_binary,
                                              probability_matrix)

GROUPS = {"black": "p_black", "white": "p_white", "other": "p_other"}
BASE = {"label": "y", "faux": {"delta": 0.05, "max_flagged_fraction": 0.1}}


def _policy(**extra) -> Policy:
    section = {"column": "race", "groups": GROUPS, "draws": 3}
    return Policy.model_validate({**BASE, "protected_probabilities": section, **extra})


def _frame(n: int = 10) -> pd.DataFrame:
    p = np.tile([0.2, 0.5, 0.3], (n, 1))
    return pd.DataFrame({"x": np.arange(n, dtype=float), "p_black": p[:, 0], "p_white": p[:, 1], "p_other": p[:, 2]})


def test_policy_names_the_attribute_and_refuses_a_second_source_of_c():
    policy = _policy()
    assert policy.protected == "race" and policy.attribute_names == ["race"]
    assert Policy.model_validate(policy.model_dump()).sha256() == policy.sha256()
    assert "protected_probabilities" not in Policy.model_validate({**BASE, "protected": "sex"}).model_dump(
        exclude_none=True)
    with pytest.raises(ValueError, match=r"\[protected_probabilities\] \(column 'race'\) and protected = 'sex'"):
        _policy(protected="sex")
    with pytest.raises(ValueError, match=r"and \[protected_file\] both give"):
        _policy(protected_file={"join_on": "pid"})
    with pytest.raises(ValueError, match=r"and \[\[attributes\]\] both give"):
        _policy(attributes=[{"column": "sex"}])
    with pytest.raises(ValueError, match="more than one group"):
        Policy.model_validate({**BASE, "protected_probabilities": {"column": "race",
                                                                   "groups": {"a": "p", "b": "p"}}})


def test_probabilities_are_checked_naming_every_column_and_the_count():
    frame = _frame()
    assert probability_matrix(frame, GROUPS, column="race").shape == (10, 3)
    bad = frame.assign(p_white=frame.p_white.where(frame.index >= 3), p_other=frame.p_other.where(frame.index != 4, 1.5))
    with pytest.raises(ConfigurationError) as err:
        probability_matrix(bad, GROUPS, column="race")
    assert "'p_white' (white): 3 rows missing" in str(err.value)
    assert "'p_other' (other): 1 rows outside [0, 1]" in str(err.value)
    off = frame.assign(p_other=frame.p_other.where(frame.index >= 2, 0.31))     # rows 0, 1 sum to 1.01
    with pytest.raises(ConfigurationError, match=r"2 of 10 rows .* do not sum to 1 \(largest gap 0.01, first rows 0, 1\)"):
        probability_matrix(off, GROUPS, column="race")
    assert probability_matrix(frame.assign(p_other=frame.p_other + 5e-7), GROUPS, column="race").shape == (10, 3)
    with pytest.raises(ConfigurationError, match=r"1 probability column\(s\) missing .*'p_other' \(other\)"):
        probability_matrix(frame.drop(columns="p_other"), GROUPS, column="race")
    with pytest.raises(ConfigurationError, match="holds a 'race' column"):
        probability_matrix(frame.assign(race="black"), GROUPS, column="race")


def test_expected_auc_closed_forms_and_monte_carlo():
    # two rows, p = (0.2, 0.8): the pair (1 member, 0 not) weighs 0.8·0.8 and is ordered right, (0, 1) 0.2·0.2 wrong
    assert expected_auc_binary(np.array([0.2, 0.8])) == pytest.approx(0.64 / 0.68)
    assert expected_auc_binary(np.full(50, 0.3)) == pytest.approx(0.5)
    assert expected_auc_binary(np.r_[np.zeros(5), np.ones(5)]) == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    p = rng.beta(2, 3, size=2000)
    from sklearn.metrics import roc_auc_score

    drawn = [roc_auc_score(rng.random(p.size) < p, p) for _ in range(200)]
    assert expected_auc_binary(p) == pytest.approx(np.mean(drawn), abs=0.003)
    three = rng.dirichlet([1, 1, 1], size=500)
    assert expected_auc(three) == pytest.approx(np.mean([expected_auc_binary(three[:, g]) for g in range(3)]))
    assert expected_auc(np.c_[1 - p, p]) == pytest.approx(expected_auc_binary(p))


def test_draws_follow_the_probabilities_and_the_seed():
    p = np.tile([0.1, 0.6, 0.3], (30_000, 1))
    drawn = draw_groups(p, ["a", "b", "c"], seed=7)
    shares = pd.Series(drawn).value_counts(normalize=True)
    assert shares.to_dict() == pytest.approx({"a": 0.1, "b": 0.6, "c": 0.3}, abs=0.01)
    assert (draw_groups(p, ["a", "b", "c"], seed=7) == drawn).all()
    assert set(draw_groups(np.array([[0.0, 1.0], [1.0, 0.0]]), ["a", "b"], seed=1)) == {"a", "b"}


def test_rubin_interval_matches_the_hand_closed_form():
    q = np.array([0.10, 0.12, 0.14])
    n, m, conf = 1000, 3, 0.95
    iv = rubin_interval(q, q - 0.02, q + 0.02, n=n, confidence=conf)
    z = norm.ppf(0.975)
    w, b = (0.02 / z) ** 2, 0.0004                        # B = sample variance of (0.10, 0.12, 0.14)
    total = w + (1 + 1 / m) * b
    lam = (1 + 1 / m) * b / total
    nu_old = (m - 1) / lam ** 2
    nu_obs = (n - 1 + 1) / (n - 1 + 3) * (n - 1) * (1 - lam)
    nu = 1 / (1 / nu_old + 1 / nu_obs)
    half = t.ppf(0.975, nu) * math.sqrt(total)
    assert iv.fraction == pytest.approx(0.12)
    assert iv.between == pytest.approx(b) and iv.within == pytest.approx((w, w))
    assert iv.df[0] == pytest.approx(nu)
    assert (iv.lower, iv.upper) == pytest.approx((0.12 - half, 0.12 + half))
    same = rubin_interval([0.05] * 4, [0.03] * 4, [0.08] * 4, n=10**9, confidence=conf)    # B = 0: each draw's own
    assert (same.lower, same.upper) == pytest.approx((0.03, 0.08), abs=1e-6)
    with pytest.raises(ValueError, match="at least two draws"):
        rubin_interval([0.1], [0.0], [0.2], n=10, confidence=conf)


def test_decision_is_asymmetric_in_the_sharpness():
    policy = _policy()
    low = rubin_interval([0.01, 0.012], [0.0, 0.002], [0.03, 0.032], n=2000, confidence=0.95)
    high = rubin_interval([0.4, 0.41], [0.37, 0.38], [0.43, 0.44], n=2000, confidence=0.95)
    assert flagged_rule(low, policy, pass_at=low, discrimination=1.0)["status"] == "ok"
    assert flagged_rule(high, policy, pass_at=high, discrimination=1.0)["status"] == "exceeded"
    assert flagged_rule(low, policy, pass_at=None, discrimination=1.0)["status"] == "inconclusive"
    assert flagged_rule(None, policy, pass_at=None, discrimination=1.0)["status"] == "not computed"
    blunt = sharpness_rule(0.8, policy)
    assert blunt["status"] == "not met"
    assert "expected ROC-AUC 0.800" in blunt["detail"] and "expected ROC-AUC >= 0.90 are needed" in blunt["detail"]
    assert sharpness_rule(0.93, policy)["status"] == "ok"


def test_rules_hold_only_where_they_hold_in_every_draw():
    class Draw:
        def __init__(self, status):
            self.rules = [{"rule": "min_aux_quality", "status": status, "detail": f"aux {status}", "observed": 0.8,
                           "limit": 0.7}]
    rows = draw_rules([Draw("ok"), Draw("ok")])
    assert rows[0]["status"] == "ok" and "in every one of 2 draws" in rows[0]["detail"]
    assert draw_rules([Draw("ok"), Draw("exceeded")])[0]["status"] == "inconclusive"
    mixed = draw_rules([Draw("ok"), Draw("not met"), Draw("exceeded")])[0]
    assert mixed["status"] == "not met" and "draw 2" in mixed["detail"] and "exceeded in 1" in mixed["detail"]


def test_discrimination_is_tjurs_coefficient_closed_form_and_monte_carlo():
    p = np.repeat([0.2, 0.8], 500)                  # π = ½, Var p = 0.09: λ = Var p / (π(1 − π)) = 0.36
    assert discrimination(np.c_[1 - p, p]) == pytest.approx(0.36)
    assert discrimination(np.c_[p, 1 - p]) == pytest.approx(0.36)
    assert discrimination(np.full((10, 2), 0.5)) == pytest.approx(0.0)
    assert discrimination(np.c_[1 - np.repeat([0.0, 1.0], 5), np.repeat([0.0, 1.0], 5)]) == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    q = rng.beta(1.0, 4.0, 400_000)
    c = rng.random(len(q)) < q                      # c drawn from calibrated probabilities
    assert discrimination(np.c_[1 - q, q]) == pytest.approx(q[c].mean() - q[~c].mean(), abs=0.005)
    three = np.tile([[0.6, 0.3, 0.1], [0.2, 0.2, 0.6]], (50, 1))     # one-vs-rest: (a − b)²/4 / (m(1 − m))
    per_group = [0.04 / 0.24, 0.0025 / 0.1875, 0.0625 / 0.2275]
    assert discrimination(three) == pytest.approx(min(per_group))


def _draw(scores: np.ndarray, audited: np.ndarray, shift=(0.0, 0.0)) -> SimpleNamespace:
    return SimpleNamespace(scores=scores, row_index=audited,
                           interval=FlaggedInterval(0.0, 0, len(audited), 0.95, (0.0, 0.0), shift))


def test_pass_reads_the_flagged_fraction_at_delta_times_lambda():
    policy = _policy()                              # δ = 0.05, max_flagged_fraction 10%
    n = 2000
    scores = np.full(n + 5, 0.001)
    scores[:40] = 0.08                              # 2% move by more than δ
    scores[40:440] = 0.03                           # 20% more move by more than δ·½ = 0.025, not by δ
    scores[440] = np.nan                            # undefined: counted flagged
    scores[n:] = 1.0                                # not audited: not counted
    draws = [_draw(scores, np.arange(n)) for _ in range(3)]
    at_delta = pass_reading(draws[0], 0.05, 0.95)
    assert (at_delta.k, at_delta.n) == (41, n)
    half = pass_reading(draws[0], 0.025, 0.95)
    assert half.k == 441 and half.fraction == pytest.approx(441 / n)
    interval = pass_interval(draws, 0.05, 0.95)
    pass_at = pass_interval(draws, 0.025, 0.95)
    assert interval.upper < 0.1 < pass_at.lower
    blind = flagged_rule(interval, policy, pass_at=pass_at, discrimination=0.5)
    assert blind["status"] == "inconclusive" and blind["pass_delta"] == pytest.approx(0.025)
    assert "pass read at δ·λ = 0.025" in blind["detail"] and "λ = 0.500" in blind["detail"]
    assert "probabilities blind to the features" in blind["detail"]
    sharp = flagged_rule(interval, policy, pass_at=pass_interval(draws, 0.05, 0.95), discrimination=1.0)
    assert sharp["status"] == "ok"
    unfair = pass_interval([_draw(np.where(scores > 0.02, 0.5, 0.0), np.arange(n)) for _ in range(3)], 0.05, 0.95)
    assert flagged_rule(unfair, policy, pass_at=None, discrimination=0.1)["status"] == "exceeded"
    assert pass_reading(_draw(scores, np.arange(n), (-0.01, 0.02)), 0.05, 0.95).upper == pytest.approx(
        at_delta.individuals[1] + 0.02)
    assert pass_reading(SimpleNamespace(scores=None, row_index=None, interval=None), 0.05, 0.95) is None
