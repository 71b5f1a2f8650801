"""Cross-fitting on a small audit and the asymmetric guards: a weak auxiliary model or a small group never passes a
model, but a flagged fraction clearly over the limit fails it; every undecided guard names the rows it needs.

The scores of a cross-fitted check are each fold tester's own scores of its fold's rows (to 1e-12); the fold
assignment is stratified by group; the rule-level cases are built on :class:`CheckEvidence` with the Clopper-Pearson
and Hanley-McNeil bounds computed here.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from _support import UNFAIR, linear, make_data
from faux_checks.gate.aux_cache import _key
from faux_checks.gate.bounds import auc_interval, auc_rows_needed, flagged_interval
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.gate.check_rules import CheckEvidence, check_rules
from faux_checks.gate.crossfit import (CROSS_FIT_SEED_OFFSET, cross_fit_k, fit_folds, fold_assignment,
                                       pooled_holds)
from faux_checks.gate.decision import decide
from faux_checks.gate.policy import Policy
from faux_checks.gate.rows import prepare_audit
from faux_checks.gate.scorer import faux_tester
from faux_checks.method.output import TargetOutput

SMALL = {"protected": "sex", "label": "y", "target_output": "logit",
         "faux": {"delta": 0.05, "max_flagged_fraction": 0.1}, "aux": {"epochs": 30},
         "decision": {"min_group_rows": 100, "aux_seeds": 1}}


def policy(**changes) -> Policy:
    return Policy.model_validate({**SMALL, **changes})


def evidence(*, n=1000, flagged=30, groups=None, holdout=None, aux=0.67, aux_lower=0.65, group_flagged=None
             ) -> CheckEvidence:
    groups = groups or {"F": n // 2, "M": n - n // 2}
    holdout = holdout or dict(groups)
    return CheckEvidence(
        n=n, n_flagged=flagged, n_undefined=0, group_rows=groups, holdout_rows=holdout,
        aux_metric="roc_auc", aux_intervals=[{"what": "F vs M", "metric": "roc_auc", "quality": aux,
                                              "lower": aux_lower, "upper": 2 * aux - aux_lower,
                                              "n_positive": holdout["M"], "n_negative": holdout["F"]}],
        interval=flagged_interval(flagged, n, 0.95),
        group_flagged=group_flagged or {g: flagged * k / n for g, k in groups.items()})


# ------------------------------------------------------------------------------------------- the rule
def test_cross_fit_only_where_the_single_split_leaves_a_group_short():
    p = policy()
    assert cross_fit_k(p, {"F": 99, "M": 120}, {"F": 495, "M": 600}, given=False) == 5
    assert cross_fit_k(p, {"F": 100, "M": 120}, {"F": 500, "M": 600}, given=False) == 0     # large enough: single
    assert cross_fit_k(p, {"F": 99, "M": 120}, {"F": 495, "M": 600}, given=True) == 0      # a given model
    assert cross_fit_k(p, {"F": 1, "M": 120}, {"F": 3, "M": 600}, given=False) == 3        # folds <= smallest group
    assert cross_fit_k(p, {"F": 0, "M": 120}, {"F": 1, "M": 600}, given=False) == 0
    off = policy(aux={"epochs": 30, "cross_fit_folds": 1})
    assert cross_fit_k(off, {"F": 99, "M": 120}, {"F": 495, "M": 600}, given=False) == 0


def test_folds_are_stratified_and_balanced():
    values = np.r_[np.zeros(337, dtype=int), np.ones(63, dtype=int)]
    folds = fold_assignment(values, 5, 3, grouped=True)
    per_fold = [np.bincount(values[folds == j], minlength=2) for j in range(5)]
    assert all(abs(c[0] - 337 / 5) < 1 and abs(c[1] - 63 / 5) < 1 for c in per_fold)
    assert sorted(np.bincount(folds)) == [80, 80, 80, 80, 80]
    assert np.array_equal(folds, fold_assignment(values, 5, 3, grouped=True))            # seeded


# ------------------------------------------------------------------------------------------- the scores
def test_cross_fitted_scores_are_the_fold_models_scores_row_by_row():
    """400 rows, min_group_rows 100: the single split holds out ~40 per group, so the check cross-fits in 5 folds.
    Each fold's rows, scored by a tester built from that fold's model (trained on the other folds' rows only),
    give the check's scores to 1e-12; every group's held-out count is its audited count."""
    data, p = make_data(400), policy()
    target = linear(UNFAIR)
    result = check_one_attribute(target, data, policy=p)
    record = result.provenance["cross_fit"]
    assert record["folds"] == 5 and record["fold_seed"] == p.seed + CROSS_FIT_SEED_OFFSET
    assert {g["group"]: g["holdout"] for g in result.group_rows} == {g["group"]: g["audited"] for g in result.group_rows}
    assert result.aux_intervals[0]["n_positive"] + result.aux_intervals[0]["n_negative"] == 400

    audit = prepare_audit(data, policy=p, feature_spec=None)
    mask = audit.feature_spec.feature_mask("sex")
    X_aux = audit.X[:, ~mask]
    folds = fold_assignment(audit.values, 5, p.seed + CROSS_FIT_SEED_OFFSET, grouped=True)
    cf = fit_folds(X_aux, audit.protected, audit.values, p, 5)
    assert np.array_equal(cf.folds, folds)
    for j, row in enumerate(record["per_fold"]):      # fold j's model trained on exactly the rows outside fold j
        assert row["aux_key"] == _key(p, "binary", p.seed, X_aux[folds != j], audit.values[folds != j],
                                      audit.protected.groups)
    holds = pooled_holds(cf, audit, p, mask)
    scores = np.full(len(audit.X), np.nan)
    for j in range(5):
        tester = faux_tester(target, cf.models[j], p, TargetOutput(form="logit"), audit.feature_spec,
                             audit.protected, reference_rows=audit.X[folds != j],
                             reference_values=audit.values[folds != j], holds=holds)
        mine = folds == j
        scores[mine] = tester.evaluate(audit.X[mine], audit.values[mine], evidence=False).scores
    assert np.isfinite(scores).all()
    np.testing.assert_allclose(result.scores[audit.row_index], scores, rtol=0, atol=1e-12)
    assert result.decision == "failed"          # the unfair target leans on the proxy: clearly over 10%


# ------------------------------------------------------------------------------------------- asymmetric guards
def test_weak_aux_model_can_fail_but_never_pass():
    p = policy(min_aux_quality=0.7)
    # AUC 0.67, lower bound 0.65 < floor 0.7; 300 of 1,000 flagged: 95% CI 27.2%-32.9% > 10%
    over = decide(check_rules(evidence(flagged=300), p))
    assert over.decision == "failed"
    rules = {r["rule"]: r for r in over.rules}
    assert rules["min_aux_quality"]["status"] == "not met" and rules["max_flagged_fraction"]["status"] == "exceeded"
    assert "though min_aux_quality not met" in rules["max_flagged_fraction"]["detail"]
    # 10 of 1,000: CI 0.48%-1.83%, the upper bound under the limit: never a pass under a weak aux model
    under = decide(check_rules(evidence(flagged=10), p))
    assert under.decision == "undecided"
    assert {r["rule"]: r["status"] for r in under.rules}["max_flagged_fraction"] == "not judged"
    # 100 of 1,000 = the limit, CI straddling it: undecided
    assert decide(check_rules(evidence(flagged=100), p)).decision == "undecided"
    # the same fraction with a strong aux model: judged as usual
    assert decide(check_rules(evidence(flagged=10, aux=0.92, aux_lower=0.9), p)).decision == "passed"


def test_small_group_can_fail_its_group_rule_but_never_pass():
    p = policy()
    groups = {"F": 60, "M": 940}                          # F under min_group_rows 100
    # F: 30 of 60 flagged (CI 36.8%-63.2% even at Bonferroni 97.5%) > group limit 20%; 40 flagged overall (4%)
    ev = evidence(flagged=40, groups=groups, aux=0.92, aux_lower=0.9, group_flagged={"F": 30.0, "M": 10.0})
    out = decide(check_rules(ev, p))
    rules = {r["rule"]: r for r in out.rules}
    assert out.decision == "failed"
    assert rules["min_group_rows"]["status"] == "not met"
    assert rules["max_flagged_fraction"]["status"] == "not judged"                   # 4%: CI within the limit
    assert rules["max_group_flagged_fraction"]["status"] == "exceeded"
    assert "'F' 50.00% (30/60" in rules["max_group_flagged_fraction"]["detail"]
    fair = evidence(flagged=10, groups=groups, aux=0.92, aux_lower=0.9, group_flagged={"F": 1.0, "M": 9.0})
    assert decide(check_rules(fair, p)).decision == "undecided"


def test_undefined_scores_are_no_guard():
    """Only min_group_rows and min_aux_quality give way; too many undefined scores leave even 30% undecided."""
    p = policy(faux={"delta": 0.05, "max_flagged_fraction": 0.1, "max_undefined_fraction": 0.01})
    ev = evidence(flagged=300, aux=0.92, aux_lower=0.9)
    ev = CheckEvidence(**{**ev.__dict__, "n_undefined": 50, "interval": flagged_interval(350, 1000, 0.95)})
    assert decide(check_rules(ev, p)).decision == "undecided"      # 5% undefined: the aux model is degenerate there
    unmet = {r["rule"]: r["status"] for r in check_rules(ev, p)}
    assert unmet["max_undefined_fraction"] == "not met" and unmet["max_flagged_fraction"] == "not judged"


# ------------------------------------------------------------------------------------------- rows needed
def test_rows_needed_for_the_aux_floor_by_hanley_mcneil():
    # a proxy set just under the floor: AUC 0.73 on 67 protected and 413 other held-out rows, lower bound 0.658 < 0.7
    lo, _ = auc_interval(0.73, 67, 413, 0.95)
    assert 0.65 < lo < 0.66
    n_pos, n_neg = auc_rows_needed(0.73, 67, 413, 0.7, 0.95)
    assert auc_interval(0.73, n_pos, n_neg, 0.95)[0] >= 0.7
    assert auc_interval(0.73, math.floor(0.97 * n_pos), math.floor(0.97 * n_neg), 0.95)[0] < 0.7   # near the smallest
    assert abs(n_pos / n_neg - 67 / 413) < 0.01
    assert auc_rows_needed(0.69, 67, 413, 0.7, 0.95) is None        # the AUC itself under the floor
    text = {r["rule"]: r["detail"] for r in check_rules(
        evidence(n=2400, groups={"F": 2064, "M": 336}, holdout={"F": 413, "M": 67}, aux=0.73, aux_lower=lo),
        policy(min_aux_quality=0.7))}
    scaled = math.ceil((n_pos + n_neg) * 2400 / 480)
    assert f"a decision needs F vs M: about {scaled:,} audited rows at this AUC" in text["min_aux_quality"]
    assert ("a decision needs about 502 audited rows of 'M' (about 3,586 audited rows at its share of 14.0%)"
            in text["min_group_rows"])   # 67 of 336 held out: 100 held out need 100 · 336 / 67
    assert "the rows a decision needs are in those rules" in text["max_flagged_fraction"]


@pytest.mark.parametrize("auc", [0.75, 0.85])
def test_rows_needed_is_monotone_in_the_floor(auc):
    small = auc_rows_needed(auc, 50, 300, 0.65, 0.95)
    large = auc_rows_needed(auc, 50, 300, 0.7, 0.95)
    assert small is not None and large is not None and sum(small) <= sum(large)


def test_an_audit_whose_single_split_misses_the_aux_floor_is_cross_fitted():
    """1,500 rows, a proxy with ROC-AUC about 0.76 (a shift of 1 sd): each group has ~150 held-out rows (the group
    rule is met) but the AUC interval on 300 held-out rows reaches below 0.7. Cross-fitted, every row is
    held out once and the interval clears the floor; a single split (``cross_fit_folds = 0``) stays undecided."""
    from faux_checks.gate.crossfit import FLOOR_REASON

    rng = np.random.default_rng(7)
    n = 1500
    sex = rng.choice(["F", "M"], n)
    data = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n),
                         "proxy": 1.0 * (sex == "M") + rng.normal(size=n), "sex": sex, "y": 0})
    target = linear([0.0, 0.0, 0.0])                 # a fair target: reads nothing
    single = check_one_attribute(target, data, policy=policy(aux={"epochs": 30, "cross_fit_folds": 0}))
    aux_rule = {r["rule"]: r for r in single.rules}["min_aux_quality"]
    assert single.provenance.get("cross_fit") is None and aux_rule["status"] == "not met", aux_rule
    assert single.decision == "undecided"
    crossed = check_one_attribute(target, data, policy=policy())
    assert crossed.provenance["cross_fit"]["rule"] == FLOOR_REASON
    assert crossed.aux_intervals[0]["n_positive"] + crossed.aux_intervals[0]["n_negative"] == n
    assert {r["rule"]: r["status"] for r in crossed.rules}["min_aux_quality"] == "ok"
    assert crossed.aux_intervals[0]["lower"] > aux_rule["observed"]      # the narrower interval of every row
    assert crossed.decision == "passed"
