"""The GX suite with the protected attribute given only as per-row probabilities ([protected_probabilities]).

Data: the GX tests' generator (``sex_proxy_frame``, 400 rows, seed 0): x1, x2 independent of sex, x3 = 2·[sex = M] − 1
+ N(0, 0.5²). The fair target reads x1, x2 (no one moves), the unfair one leans on x3 (almost everyone moves by more
than δ). The batch holds no sex: :func:`faux_checks.groundtruth.estimated.estimated_audit` replaces it by calibrated
probabilities p_F, p_M at a chosen ROC-AUC against the true sex (0.999: sharp; 0.8: under the policy's
min_sharpness 0.95).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import faux_checks_gx as E
from _support import linear, sex_proxy_frame
from faux_checks.gate.estimated import check_estimated
from faux_checks.gate.policy import Policy
from faux_checks.groundtruth.estimated import estimated_audit
from faux_checks.inputs.models import load_model, save_torchscript
from faux_checks.inputs.probabilities import expected_auc
from faux_checks.inputs.tabular import FeatureSpec

FAUX = "expect_faux_flagged_fraction_to_be_at_most"
GATE = "expect_faux_gate_to_pass"


def _policy(**changes) -> Policy:
    payload = {"label": "y", "target_output": "logit", "min_aux_quality": 0.6,
               "faux": {"delta": 0.05, "max_flagged_fraction": 0.10}, "aux": {"hidden": [16], "epochs": 30},
               "decision": {"min_group_rows": 20, "aux_seeds": 1},
               "protected_probabilities": {"column": "sex", "groups": {"F": "p_F", "M": "p_M"}, "draws": 2,
                                           "min_sharpness": 0.95}}
    payload.update(changes)
    return Policy.model_validate(payload)


def _batch(auc: float) -> pd.DataFrame:
    frame = sex_proxy_frame(n=400, seed=0)
    frame["sex"] = (frame["sex"] == "M").astype(int)
    return estimated_audit(frame, "sex", auc, seed=1, groups=("F", "M"))


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("gx-estimated")
    return {"fair": str(save_torchscript(linear([1.0, -0.5, 0.0]), d / "fair.pt")),
            "unfair": str(save_torchscript(linear([0.3, 0.0, 2.0]), d / "unfair.pt")),
            "spec": str(FeatureSpec.fit(_batch(0.999).head(50), ["x1", "x2", "p_M"], name="leaky")
                        .save(d / "leaky.json"))}


@pytest.fixture(scope="module")
def unfair(files):
    batch = _batch(0.999)
    return batch, E.validate_frame(batch, E.build_suite(_policy(), model_path=files["unfair"]))


def _row(outcome, kind: str) -> dict:
    (found,) = [r for r in outcome.expectations if r["type"] == kind]
    return found


def test_the_suite_anchors_on_a_probability_column_and_builds_no_tester_expectation(files):
    suite = E.build_suite(_policy(testers={"fta": {"threshold": 0.5}}), model_path=files["fair"])
    kinds = [e.configuration.type for e in suite.expectations]
    assert kinds == [FAUX, GATE]
    assert suite.expectations[0].configuration.kwargs["column"] == "p_F"


def test_unfair_model_fails_with_the_numbers_of_check_estimated(files, unfair):
    batch, outcome = unfair
    assert outcome.decision == "failed"
    faux, gate = _row(outcome, FAUX), _row(outcome, GATE)
    assert faux["success"] is False and gate["success"] is False and gate["observed_value"] == "failed"
    direct = check_estimated(load_model(files["unfair"]), batch, policy=_policy()).sections[0].check
    check = outcome.check
    assert check["decision"] == "failed"
    assert check["flagged_fraction"] == direct.flagged_fraction              # same seeds, same draws: the same numbers
    interval = check["interval"]
    assert interval["draws"] == list(direct.interval.draws) and len(interval["draws"]) == 2
    assert (interval["lower"], interval["upper"]) == (direct.interval.lower, direct.interval.upper)
    assert interval["lower"] > 0.10
    assert interval["fraction"] == pytest.approx(np.mean(interval["draws"]))
    rules = {r["rule"]: r for r in check["rules"]}
    assert rules["max_flagged_fraction"]["status"] == "exceeded"
    assert rules["protected_probabilities"]["status"] == "ok"


def test_the_expectation_result_carries_the_draws_and_the_sharpness(files, unfair):
    batch, outcome = unfair
    (result,) = [r for r in outcome.gx_result["results"] if r["expectation_config"]["type"] == FAUX]
    details = result["result"]["details"]
    auc = expected_auc(batch[["p_F", "p_M"]].to_numpy())
    assert details["decision"] == "failed"
    assert details["imputation"]["expected_auc"] == pytest.approx(auc, abs=1e-12) and auc > 0.95
    assert details["imputation"]["draws"] == 2 and len(details["imputation"]["seeds"]) == 2
    assert details["interval"]["draws"] == details["imputation"]["per_draw_fractions"]
    assert details["protected_form"].startswith("protected attribute 'sex': estimated probabilities (F = p_F, M = p_M)")


def test_fair_model_passes_on_sharp_probabilities_and_is_undecided_on_blunt_ones(files):
    suite = E.build_suite(_policy(), model_path=files["fair"])
    assert E.validate_frame(_batch(0.999), suite).decision == "passed"
    blunt = E.validate_frame(_batch(0.8), suite)
    assert blunt.decision == "undecided"                                     # fails closed: never a pass
    assert _row(blunt, FAUX)["success"] is False and _row(blunt, GATE)["success"] is False
    rules = {r["rule"]: r for r in blunt.check["rules"]}
    assert rules["protected_probabilities"]["status"] == "not met"
    assert "expected ROC-AUC >= 0.95 are needed" in rules["protected_probabilities"]["detail"]


def test_the_probability_columns_never_reach_the_model_inputs(files):
    batch = _batch(0.999)
    outcome = E.validate_frame(batch, E.build_suite(_policy(), model_path=files["fair"]))
    assert outcome.check["n_individuals"] == len(batch)                # 3 inputs (x1, x2, x3): p_F, p_M left out
    leaky = E.validate_frame(batch, E.build_suite(_policy(), model_path=files["fair"],
                                                  feature_spec_path=files["spec"]))
    assert leaky.decision == "undecided"
    assert any("p_M" in r for r in leaky.reasons)


def test_probabilities_that_do_not_sum_to_1_are_undecided_naming_the_rows(files):
    batch = _batch(0.999)
    batch.loc[:4, ["p_F", "p_M"]] = [0.55, 0.5]                             # 5 rows sum to 1.05
    outcome = E.validate_frame(batch, E.build_suite(_policy(), model_path=files["fair"]))
    assert outcome.decision == "undecided"
    assert any("5 of 400 rows" in r and "do not sum to 1" in r for r in outcome.reasons)


def test_unfair_model_fails_on_blunt_probabilities_too(files):
    outcome = E.validate_frame(_batch(0.8), E.build_suite(_policy(), model_path=files["unfair"]))
    assert outcome.decision == "failed"                   # blunt probabilities under-read: a fail still stands
    rules = {r["rule"]: r["status"] for r in outcome.check["rules"]}
    assert rules["protected_probabilities"] == "not met" and rules["max_flagged_fraction"] == "exceeded"
    assert outcome.check["interval"]["lower"] > 0.1
