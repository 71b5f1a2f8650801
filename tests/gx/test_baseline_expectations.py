"""Weighted FTA, Unfair Map, FlipTest and FTU flip: selectable in the policy, GX expectations in the suite.

Synthetic data (300 rows): x1, x2 independent of ``sex``; x3 a proxy of it. The spec's inputs
include ``sex`` itself (one-hot), so FTU flip applies; the unfair target leans on x3 and on the
sex columns, the fair one uses x1, x2 only. Small settings keep the module fast (Unfair Map: 5 steps).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from _support import linear, sex_proxy_frame
import faux_checks_gx as E
from faux_checks_gx.baselines import TESTER_PARAMS, UNFAIR_MAP_METRIC
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.inputs.models import load_model, save_torchscript
from faux_checks.gate.policy import Policy
from faux_checks.inputs.tabular import FeatureSpec

NEW = {"weighted_fta": "expect_weighted_fta_flagged_fraction_to_be_at_most",
       "unfair_map": "expect_unfair_map_flagged_fraction_to_be_at_most",
       "fliptest": "expect_flip_test_flagged_fraction_to_be_at_most",
       "ftu_flip": "expect_ftu_flip_flagged_fraction_to_be_at_most"}
STRICT = {"weighted_fta": {"threshold": 0.01, "max_flagged_fraction": 0.05},
          "unfair_map": {"threshold": 1.01, "max_flagged_fraction": 0.05, "steps": 5, "step_size": 0.2},
          "fliptest": {"threshold": 0.01, "max_flagged_fraction": 0.05, "max_n": 200},
          "ftu_flip": {"threshold": 0.01, "max_flagged_fraction": 0.05}}
NOT_INPUT = "not applicable: the target does not take the protected attribute as input"


def make_policy(testers, **changes) -> Policy:
    payload = {"protected": "sex", "label": "y", "target_output": "logit",
               "faux": {"delta": 0.05, "max_flagged_fraction": 0.10},
               "aux": {"hidden": [16], "epochs": 50}, "testers": testers, "decision": {"min_group_rows": 20}}
    payload.update(changes)
    return Policy.model_validate(payload)




@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return sex_proxy_frame(n=300, seed=1)


@pytest.fixture(scope="module")
def files(tmp_path_factory, frame) -> dict:
    d = tmp_path_factory.mktemp("gx-baselines")
    spec = FeatureSpec.fit(frame, ["x1", "x2", "x3", "sex"], name="with-sex")   # x1, x2, x3, sex=F, sex=M
    assert spec.n_features == 5
    return {"unfair": str(save_torchscript(linear([0.3, 0.0, 2.0, -1.0, 1.0]), d / "unfair.pt")),
            "fair3": str(save_torchscript(linear([1.0, -0.5, 0.0]), d / "fair3.pt")),
            "spec": str(spec.save(d / "spec.json"))}


def row(outcome, kind: str) -> dict:
    (found,) = [r for r in outcome.expectations if r["type"] == kind]
    return found


def test_each_new_expectation_fires_with_check_one_attribute_numbers(frame, files):
    policy = make_policy(STRICT)
    outcome = E.validate_frame(frame, E.build_suite(policy, model_path=files["unfair"],
                                                    feature_spec_path=files["spec"]))
    direct = check_one_attribute(load_model(files["unfair"]), frame, policy=policy,
                       feature_spec=FeatureSpec.load(files["spec"]))

    assert [r["type"] for r in outcome.expectations][1:] == [*NEW.values(), "expect_faux_gate_to_pass"]
    for name, kind in NEW.items():
        r, t = row(outcome, kind), direct.testers[name]
        assert r["exception"] is None, (name, r["exception"])
        assert r["success"] is False and t["passed"] is False, name
        assert r["observed_value"] == pytest.approx(t["value"], abs=1e-12), name
        assert r["observed_value"] > 0.05
        assert t["statistic"] == "flagged_fraction" and t["limit"] == 0.05 and t["gating"] is False
        assert set(t) == {"statistic", "value", "threshold", "limit", "gating", "passed", "p50", "p90", "summary",
                          "n_flagged", "description"}
        assert t["summary"] == f"{t['value']:.2%} of individuals with {t['description']}"
        assert t["n_flagged"] == round(t["value"] * direct.n_individuals)
    # non-gating: reported, and the decision is fAux's own
    assert outcome.decision == direct.decision
    assert any(r.startswith(f"non-gating, reported only: {NEW['fliptest']}") for r in outcome.reasons)


def test_the_suite_runs_the_check_once_and_the_baselines_read_its_testers(frame, files, monkeypatch):
    """GX resolves one faux.check for the fAux expectation and every baseline metric; the baselines
    validate check_one_attribute's numbers and score nothing again (a hand-built expectation with other settings does)."""
    import faux_checks.gate.one_attribute as check_mod
    import faux_checks.gate.testers as testers_mod

    calls = {"check_one_attribute": 0, "baseline_scores": 0, "fta": 0}
    real_check_one_attribute, real_scores = check_mod.check_one_attribute, testers_mod.baseline_scores

    def counted_check_one_attribute(*a, **k):
        calls["check_one_attribute"] += 1
        return real_check_one_attribute(*a, **k)

    def counted_scores(name, *a, **k):
        calls["baseline_scores"] += 1
        return real_scores(name, *a, **k)

    real_fta = E.baseline_metrics.FTATester.score

    def counted_fta(self, *a, **k):
        calls["fta"] += 1
        return real_fta(self, *a, **k)

    monkeypatch.setattr(check_mod, "check_one_attribute", counted_check_one_attribute)
    monkeypatch.setattr(testers_mod, "baseline_scores", counted_scores)
    monkeypatch.setattr(E.baseline_metrics.FTATester, "score", counted_fta)
    testers = {**STRICT, "fta": {"threshold": 0.05, "max_flagged_fraction": 0.5},
               "demographic_parity": {"threshold": 0.2}, "equalized_odds": {"threshold": 0.2}}
    policy = make_policy(testers)
    suite = E.build_suite(policy, model_path=files["unfair"], feature_spec_path=files["spec"])
    outcome = E.validate_frame(frame, suite)
    per_run = {k: v for k, v in calls.items()}
    assert per_run["check_one_attribute"] == 1                       # the fAux expectation's check, shared by 7 baselines
    # check_one_attribute itself scores each per-individual tester once (5 through baseline_scores; FTA in it too)
    assert per_run["baseline_scores"] == 5 and per_run["fta"] == 1
    check = outcome.check
    for r in outcome.expectations[1:]:
        assert r["exception"] is None, r
    rows = {r["type"]: r for r in outcome.expectations}
    for name, kind in NEW.items():
        assert rows[kind]["observed_value"] == check["testers"][name]["value"], name
    assert rows["expect_fta_flagged_fraction_to_be_at_most"]["observed_value"] == check["testers"]["fta"]["value"]
    assert rows["expect_demographic_parity_difference_to_be_at_most"]["observed_value"] == \
        check["testers"]["demographic_parity"]["value"]
    assert rows["expect_equalized_odds_difference_to_be_at_most"]["observed_value"] == \
        check["testers"]["equalized_odds"]["value"]

    # an expectation whose threshold differs from its policy's scores the rows itself (and still agrees)
    calls.update(check_one_attribute=0, baseline_scores=0)
    odd = E.ExpectUnfairMapFlaggedFractionToBeAtMost(
        column="sex", model_path=files["unfair"], feature_spec_path=files["spec"],
        policy_json=policy.model_dump_json(), threshold=5.0, **{k: v for k, v in STRICT["unfair_map"].items()
                                                               if k not in ("threshold", "max_flagged_fraction")})
    import great_expectations as gx

    E.validate_frame(frame, gx.ExpectationSuite(name="odd", expectations=[suite.expectations[0], odd]))
    assert calls["check_one_attribute"] == 1 and calls["baseline_scores"] == 1 + 5


def test_gating_new_tester_fails_a_passing_model(frame, files):
    policy = make_policy({"weighted_fta": {**STRICT["weighted_fta"], "gating": True}})
    direct = check_one_attribute(load_model(files["fair3"]), frame, policy=policy)
    outcome = E.validate_frame(frame, E.build_suite(policy, model_path=files["fair3"]))

    assert direct.testers["weighted_fta"]["passed"] is False
    assert direct.decision == outcome.decision == "failed"
    assert direct.reasons[0].startswith("gating baseline tester exceeded its limit: weighted_fta: ")
    assert any(r.startswith(f"gating {NEW['weighted_fta']}: observed") for r in outcome.reasons)
    assert row(outcome, NEW["weighted_fta"])["gating"] is True


def test_ftu_flip_not_applicable_without_the_protected_input(frame, files):
    policy = make_policy({"ftu_flip": STRICT["ftu_flip"]})
    direct = check_one_attribute(load_model(files["fair3"]), frame, policy=policy)
    outcome = E.validate_frame(frame, E.build_suite(policy, model_path=files["fair3"]))

    t = direct.testers["ftu_flip"]
    assert (t["value"], t["passed"], t["summary"]) == (None, True, NOT_INPUT)
    r = row(outcome, NEW["ftu_flip"])
    assert r["success"] is True and r["observed_value"] is None and r["exception"] is None
    assert direct.decision == outcome.decision == "passed"


def test_report_only_never_fails_and_missing_metric_is_no_success(frame):
    policy = make_policy({})
    cls = E.ExpectUnfairMapFlaggedFractionToBeAtMost
    report_only = cls(column="sex", model_path="m.pt", policy_json=policy.model_dump_json(), threshold=2.0)
    assert report_only._validate({UNFAIR_MAP_METRIC: {"value": 1.0}})["success"] is True
    limited = cls(column="sex", model_path="m.pt", policy_json=policy.model_dump_json(), threshold=2.0,
                  max_flagged_fraction=0.1)
    assert limited._validate({UNFAIR_MAP_METRIC: {"value": 0.2}})["success"] is False
    assert limited._validate({UNFAIR_MAP_METRIC: {"value": 0.1}})["success"] is True
    missing = limited._validate({})
    assert missing["success"] is False and missing["result"]["details"]["metric_missing"] is True


def test_build_suite_passes_the_tester_settings(files):
    testers = {"weighted_fta": {"threshold": 0.2, "p": 1.0, "subspace": "complement", "gating": True},
               "unfair_map": {"threshold": 2.0, "steps": 7, "step_size": 0.05, "penalty": 0.5},
               "fliptest": {"threshold": 0.1, "method": "quantile", "max_n": 50, "max_flagged_fraction": 0.3},
               "ftu_flip": {"threshold": 0.1, "enabled": False}}
    policy = make_policy(testers)
    suite = E.build_suite(policy, model_path=files["unfair"], feature_spec_path=files["spec"])
    built = {e.expectation_type: e for e in suite.expectations}

    assert NEW["ftu_flip"] not in built
    for name in ("weighted_fta", "unfair_map", "fliptest"):
        settings = policy.testers[name]
        for key in ("threshold", "max_flagged_fraction", "gating", *TESTER_PARAMS[name]):
            assert getattr(built[NEW[name]], key) == getattr(settings, key), (name, key)


def test_policy_accepts_new_testers_and_rejects_unknown_ones():
    policy = make_policy({name: {"threshold": 0.1} for name in NEW})
    assert policy.testers["unfair_map"].steps == 20 and policy.testers["unfair_map"].step_size == 0.1
    assert policy.testers["unfair_map"].penalty == 1.0
    assert policy.testers["fliptest"].method == "exact" and policy.testers["fliptest"].max_n == 2000
    assert policy.testers["weighted_fta"].subspace == "sensitive"

    with pytest.raises(ValidationError, match=r"unknown tester\(s\) \['lipschitz'\]"):
        make_policy({"lipschitz": {"threshold": 0.1}})
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        make_policy({"fliptest": {"threshold": 0.1, "max_rows": 10}})
    with pytest.raises(ValidationError):
        make_policy({"fliptest": {"threshold": 0.1, "method": "wgan"}})


def test_linked_columns_expectation_matches_check_one_attribute_and_gates(tmp_path):
    """The linked-columns tester through the GX suite: check_one_attribute's numbers, gating, aliases known."""
    rng = np.random.default_rng(2)
    n = 400
    sex = rng.choice(["F", "M"], n)
    married = rng.random(n) < 0.5
    df = pd.DataFrame({"x1": rng.normal(size=n), "sex": sex,
                       "role": np.where(married, np.where(sex == "M", "Husband", "Wife"), "Single")})
    spec = FeatureSpec.fit(df, ["x1", "role"], name="role")           # x1, role=Husband, role=Single, role=Wife
    model = save_torchscript(linear([1.0, 2.0, 0.0, 0.0]), tmp_path / "husbands.pt")
    links = {"role": {"M": "Husband", "F": "Wife"}}
    policy = make_policy({"linked_columns": {"threshold": 0.1, "max_flagged_fraction": 0.05, "gating": True}},
                         label=None, linked_columns=links, min_aux_quality=0.5)
    spec_path = spec.save(tmp_path / "spec.json")
    outcome = E.validate_frame(df, E.build_suite(policy, model_path=str(model), feature_spec_path=str(spec_path)))
    direct = check_one_attribute(load_model(model), df, policy=policy, feature_spec=spec)
    kind = "expect_linked_columns_flagged_fraction_to_be_at_most"
    r = row(outcome, kind)
    z = (df["x1"].to_numpy() - spec.columns[0].mean) / spec.columns[0].std
    exact = np.where(married, np.abs(1 / (1 + np.exp(-(z + 2.0))) - 1 / (1 + np.exp(-z))), 0.0)
    assert r["exception"] is None and r["observed_value"] == pytest.approx(np.mean(exact > 0.1), abs=1e-12)
    assert r["observed_value"] == pytest.approx(direct.testers["linked_columns"]["value"], abs=1e-12)
    assert r["success"] is False and outcome.decision == "failed" == direct.decision
    # a model that cannot see Husband/Wife (aliased to one value) scores 0 and the declared values stay known
    canon = FeatureSpec.fit(df, ["x1", "role"], aliases={"role": {"Husband": "Spouse", "Wife": "Spouse"}}, name="c")
    blind = save_torchscript(linear([1.0] + [0.0] * (canon.n_features - 1)), tmp_path / "blind.pt")
    again = check_one_attribute(load_model(blind), df, policy=policy, feature_spec=canon)
    assert again.testers["linked_columns"]["value"] == 0.0 and again.testers["linked_columns"]["passed"]
