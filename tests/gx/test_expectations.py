"""Great Expectations integration: the fAux and baseline expectations, the suite and its decision.

Synthetic data (600 rows): x1, x2 independent of ``sex``; x3 a strong proxy of it
(x3 = 2·[sex = M] − 1 + N(0, 0.5²)). The fair target uses x1, x2 only; the unfair one leans on
x3. Models are TorchScript files (``save_torchscript``), as the gate receives them.
"""

from __future__ import annotations

import json
import os
import time

os.environ.setdefault("DO_NOT_TRACK", "true")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from _support import linear, sex_proxy_frame  # noqa: E402
import faux_checks_gx as E  # noqa: E402
from faux_checks_gx.baselines import DP_METRIC, EO_METRIC, FTA_METRIC  # noqa: E402
from faux_checks_gx.faux import FAUX_METRIC  # noqa: E402
from faux_checks.gate.one_attribute import check_one_attribute  # noqa: E402
from faux_checks.errors import InputError  # noqa: E402
from faux_checks.inputs.models import load_model, save_torchscript  # noqa: E402
from faux_checks.gate.policy import Policy  # noqa: E402
from faux_checks.inputs.tabular import FeatureSpec  # noqa: E402

FAUX = "expect_faux_flagged_fraction_to_be_at_most"
FTA = "expect_fta_flagged_fraction_to_be_at_most"
DP = "expect_demographic_parity_difference_to_be_at_most"
EO = "expect_equalized_odds_difference_to_be_at_most"
GATE = "expect_faux_gate_to_pass"

TESTERS = {"fta": {"threshold": 0.5}, "demographic_parity": {"threshold": 0.2},
           "equalized_odds": {"threshold": 0.5}}


def make_policy(testers=None, **changes) -> Policy:
    """Small, fast policy: δ = 0.05, max flagged 10 %, a 16-unit aux MLP for 50 epochs, one aux seed."""
    payload = {"protected": "sex", "label": "y", "target_output": "logit", "min_aux_quality": 0.6,
               "faux": {"delta": 0.05, "max_flagged_fraction": 0.10},
               "aux": {"hidden": [16], "epochs": 50}, "testers": TESTERS if testers is None else testers,
               "decision": {"min_group_rows": 20, "aux_seeds": 1}}
    payload.update(changes)
    return Policy.model_validate(payload)




@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return sex_proxy_frame(n=600, seed=0)


@pytest.fixture(scope="module")
def files(tmp_path_factory, frame) -> dict:
    d = tmp_path_factory.mktemp("gx-models")
    out = {"fair": str(save_torchscript(linear([1.0, -0.5, 0.0]), d / "fair.pt")),
           "unfair": str(save_torchscript(linear([0.3, 0.0, 2.0]), d / "unfair.pt")),
           "spec": str(FeatureSpec.fit(frame, ["x1", "x2", "x3"], name="synthetic").save(d / "spec.json"))}
    return out


@pytest.fixture(scope="module")
def unfair_outcome(frame, files) -> E.SuiteOutcome:
    return E.validate_frame(frame, E.build_suite(make_policy(), model_path=files["unfair"]))


def row(outcome: E.SuiteOutcome, kind: str) -> dict:
    (found,) = [r for r in outcome.expectations if r["type"] == kind]
    return found


# ------------------------------------------------------------------ decisions on good input
def test_fair_model_passes(frame, files):
    outcome = E.validate_frame(frame, E.build_suite(make_policy(), model_path=files["fair"]))

    assert outcome.decision == "passed" and outcome.exit_code == 0
    assert outcome.gx_success is True
    assert [r["type"] for r in outcome.expectations] == [FAUX, FTA, DP, EO, GATE]
    assert all(r["success"] and r["exception"] is None for r in outcome.expectations)
    assert row(outcome, FAUX)["observed_value"] == 0.0
    assert outcome.check["decision"] == "passed" and outcome.check["n_individuals"] == 600
    assert outcome.reasons[0].startswith("flagged fraction 0.00% (95% CI 0.00%–0.61%) <= max_flagged_fraction 10.00%")


def test_unfair_model_fails_with_check_one_attribute_numbers(frame, files, unfair_outcome):
    direct = check_one_attribute(load_model(files["unfair"]), frame, policy=make_policy())

    assert unfair_outcome.decision == "failed" and unfair_outcome.exit_code == 1
    assert direct.decision == "failed"
    assert row(unfair_outcome, FAUX)["observed_value"] == direct.flagged_fraction
    # ground truth: sex flipped, x3 moves by ∓2 (its generator), so the unfair logit by ∓4
    male = (frame["sex"] == "M").to_numpy()
    z = 0.3 * frame["x1"].to_numpy() + 2.0 * frame["x3"].to_numpy()
    truth = np.abs(1 / (1 + np.exp(-z)) - 1 / (1 + np.exp(-(z + np.where(male, -4.0, 4.0)))))
    assert np.mean(truth > 0.05) > 0.95
    assert direct.flagged_fraction == pytest.approx(np.mean(truth > 0.05), abs=0.03)
    assert unfair_outcome.check["flagged_fraction"] == direct.flagged_fraction
    assert unfair_outcome.check["n_individuals"] == 600
    # the baseline metrics score the same individuals as check_one_attribute's own testers
    assert row(unfair_outcome, FTA)["observed_value"] == pytest.approx(direct.testers["fta"]["value"], abs=1e-12)
    assert row(unfair_outcome, DP)["observed_value"] == pytest.approx(direct.testers["demographic_parity"]["value"])
    assert row(unfair_outcome, EO)["observed_value"] == pytest.approx(direct.testers["equalized_odds"]["value"])
    assert unfair_outcome.reasons[0] == direct.reasons[0]            # the check's own rule, read by the same engine
    # non-gating baseline failures are listed, not decisive
    assert any(r.startswith(f"non-gating, reported only: {DP}: observed 0.937") for r in unfair_outcome.reasons)


def test_non_gating_baseline_failure_does_not_fail(frame, files):
    policy = make_policy(testers={"demographic_parity": {"threshold": 0.01}})
    outcome = E.validate_frame(frame, E.build_suite(policy, model_path=files["fair"]))

    assert outcome.decision == "passed"
    assert outcome.gx_success is False  # GX's flag counts every expectation
    assert row(outcome, DP)["success"] is False and row(outcome, DP)["gating"] is False
    assert row(outcome, DP)["observed_value"] == pytest.approx(0.052, abs=1e-3)
    assert any("non-gating, reported only" in r and DP in r for r in outcome.reasons)


def test_gating_baseline_failure_fails(frame, files):
    policy = make_policy(testers={})
    suite = E.build_suite(policy, model_path=files["fair"])
    suite.add_expectation(E.ExpectDemographicParityDifferenceToBeAtMost(
        column="sex", model_path=files["fair"], policy_json=policy.model_dump_json(), threshold=0.0, gating=True))
    outcome = E.validate_frame(frame, suite)

    assert outcome.check["decision"] == "passed"  # fAux alone passes ...
    assert outcome.decision == "failed"           # ... the gating baseline fails the gate
    assert outcome.reasons[0].startswith(f"gating {DP}: observed 0.05199 exceeds its limit 0")


# ------------------------------------------------------------------ every validator fires
def test_fta_validator_fires_and_report_only_never_fails(frame, files):
    testers = {"fta": {"threshold": 0.01, "max_flagged_fraction": 0.05}}
    outcome = E.validate_frame(frame, E.build_suite(make_policy(testers=testers), model_path=files["fair"]))
    direct = check_one_attribute(load_model(files["fair"]), frame, policy=make_policy(testers=testers))

    fta = row(outcome, FTA)
    assert fta["success"] is False and fta["exception"] is None
    assert fta["observed_value"] == pytest.approx(direct.testers["fta"]["value"], abs=1e-12)
    assert fta["observed_value"] > 0.9
    assert outcome.decision == "passed"  # not gating

    report_only = E.ExpectFtaFlaggedFractionToBeAtMost(
        column="sex", model_path=files["fair"], policy_json=make_policy().model_dump_json(), threshold=0.01)
    assert report_only._validate({FTA_METRIC: {"value": 1.0}})["success"] is True


def test_faux_dp_eo_validators_fire(unfair_outcome):
    for kind in (FAUX, DP, EO):
        assert row(unfair_outcome, kind)["success"] is False
        assert row(unfair_outcome, kind)["exception"] is None
    assert row(unfair_outcome, DP)["observed_value"] == pytest.approx(0.937, abs=1e-3)
    assert row(unfair_outcome, EO)["observed_value"] == pytest.approx(0.923, abs=1e-3)


@pytest.mark.parametrize("cls, metric", [
    (E.ExpectFauxFlaggedFractionToBeAtMost, FAUX_METRIC),
    (E.ExpectFtaFlaggedFractionToBeAtMost, FTA_METRIC),
    (E.ExpectDemographicParityDifferenceToBeAtMost, DP_METRIC),
    (E.ExpectEqualizedOddsDifferenceToBeAtMost, EO_METRIC),
])
def test_missing_metric_is_not_a_success(cls, metric):
    policy = make_policy()
    kwargs = {"column": "sex", "model_path": "m.pt", "policy_json": policy.model_dump_json()}
    kwargs.update({"max_flagged_fraction": 0.1} if cls is E.ExpectFauxFlaggedFractionToBeAtMost else {"threshold": 0.5})
    expectation = cls(**kwargs)
    for metrics in ({}, {metric: None}):
        result = expectation._validate(metrics)
        assert result["success"] is False
        assert result["result"]["observed_value"] is None
        assert result["result"]["details"]["metric_missing"] is True


# ------------------------------------------------------------------ the library's decision, recorded
@pytest.mark.parametrize("model, changes, expected", [("fair", {}, "passed"), ("unfair", {}, "failed"),
                                                      ("fair", {"min_aux_quality": 1.0}, "undecided")])
def test_the_suite_records_the_library_decision(frame, files, model, changes, expected):
    """GX's gate expectation succeeds exactly when the library's check over every attribute passes; the suite's
    decision, reasons and sections are the library's, and GX's own result records them."""
    from faux_checks.gate.attributes import check_attributes

    policy = make_policy(testers={}, **changes)
    library = check_attributes(load_model(files[model]), frame, policy=policy)
    outcome = E.validate_frame(frame, E.build_suite(policy, model_path=files[model]))
    assert library.decision == expected
    assert row(outcome, GATE)["success"] is (library.decision == "passed")
    assert row(outcome, GATE)["observed_value"] == outcome.decision == library.decision
    assert outcome.reasons == library.reasons and outcome.rules == library.rules
    assert [a["attribute"] for a in outcome.attributes] == ["sex"]
    assert outcome.attributes[0]["flagged_fraction"] == library["sex"].flagged_fraction
    (recorded,) = [r for r in outcome.gx_result["results"] if r["expectation_config"]["type"] == GATE]
    assert recorded["result"]["details"]["gate"]["decision"] == library.decision
    assert recorded["success"] is (expected == "passed")


# ------------------------------------------------------------------ fail closed
def test_suite_without_faux_expectation_is_undecided(files):
    import great_expectations as gx

    empty = gx.ExpectationSuite(name="empty")
    outcome = E.validate_frame(pd.DataFrame({"sex": ["F", "M"]}), empty)
    assert outcome.decision == "undecided" and "no expectations" in outcome.reasons[0]

    policy = make_policy()
    only_dp = gx.ExpectationSuite(name="dp-only", expectations=[E.ExpectDemographicParityDifferenceToBeAtMost(
        column="sex", model_path=files["fair"], policy_json=policy.model_dump_json(), threshold=0.2)])
    outcome = E.validate_frame(pd.DataFrame({"sex": ["F", "M"]}), only_dp)
    assert outcome.decision == "undecided" and FAUX in outcome.reasons[0] and outcome.check is None


def test_weak_aux_model_never_passes_but_can_fail(frame, files):
    """Under a floor no auxiliary model meets (1.0): the fair model is undecided, the unfair one, whose flagged
    fraction's lower bound is over the limit, fails (a weak auxiliary model reads c less, so it counts fewer)."""
    policy = make_policy(testers={}, min_aux_quality=1.0)
    fair = E.validate_frame(frame, E.build_suite(policy, model_path=files["fair"]))
    assert fair.decision == fair.check["decision"] == "undecided"
    assert any(r.startswith("auxiliary model too weak: roc_auc") for r in fair.reasons)
    unfair = E.validate_frame(frame, E.build_suite(policy, model_path=files["unfair"]))
    assert unfair.decision == unfair.check["decision"] == "failed"
    rules = {r["rule"]: r["status"] for r in unfair.check["rules"]}
    assert rules["min_aux_quality"] == "not met" and rules["max_flagged_fraction"] == "exceeded"


def test_c03_missing_protected_or_feature_column_is_undecided(frame, files):
    outcome = E.validate_frame(frame.drop(columns=["sex"]), E.build_suite(make_policy(), model_path=files["fair"]))
    assert outcome.decision == "undecided" and outcome.check is None
    assert "column(s) ['sex'] not found" in outcome.reasons[0]
    assert "present columns: [x1, x2, x3, y]" in outcome.reasons[0]
    assert all(r["exception"] and "'sex'" in r["exception"] for r in outcome.expectations)

    suite = E.build_suite(make_policy(), model_path=files["fair"], feature_spec_path=files["spec"])
    outcome = E.validate_frame(frame.drop(columns=["x3"]), suite)
    assert outcome.decision == "undecided"
    assert "column(s) ['x3'] not found" in outcome.reasons[0]


def test_c01_missing_protected_values(frame, files):
    data = frame.copy()
    data.loc[[3, 50, 100, 200, 300, 599], "sex"] = None
    outcome = E.validate_frame(data, E.build_suite(make_policy(), model_path=files["fair"]))
    assert outcome.decision == "undecided"
    assert "protected attribute 'sex' has 6 missing values in 600 rows" in outcome.reasons[0]

    dropping = make_policy(testers={"demographic_parity": {"threshold": 0.2}}, missing_protected="drop")
    outcome = E.validate_frame(data, E.build_suite(dropping, model_path=files["fair"]))
    assert outcome.decision == "passed"
    assert outcome.check["n_missing_protected"] == 6 and outcome.check["n_individuals"] == 594
    assert any("6 rows with a missing protected value were not audited" in r for r in outcome.reasons)


class _RunsCodeWhenUnpickled:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_c10_pickled_model_is_refused(frame, tmp_path):
    marker = tmp_path / "executed.txt"
    path = tmp_path / "evil.pt"
    torch.save(_RunsCodeWhenUnpickled(str(marker)), path)
    outcome = E.validate_frame(frame, E.build_suite(make_policy(testers={"fta": {"threshold": 0.5}}),
                                                    model_path=str(path)))
    assert outcome.decision == "undecided"
    assert "refused to load" in outcome.reasons[0] and "pickle" in outcome.reasons[0]
    assert "Nothing from it was executed" in outcome.reasons[0]
    assert not marker.exists()


def test_missing_aux_model_file_is_undecided(frame, files, tmp_path):
    suite = E.build_suite(make_policy(testers={}), model_path=files["fair"], aux_model_path=str(tmp_path / "no.pt"))
    outcome = E.validate_frame(frame, suite)
    assert outcome.decision == "undecided" and "does not exist" in outcome.reasons[0]


# ------------------------------------------------------------------ consistency with check_one_attribute
def test_max_rows_sample_is_the_one_check_one_attribute_audits(frame, files):
    policy = make_policy(testers={"fta": {"threshold": 0.2}, "demographic_parity": {"threshold": 0.2}}, max_rows=250)
    outcome = E.validate_frame(frame, E.build_suite(policy, model_path=files["unfair"]))
    direct = check_one_attribute(load_model(files["unfair"]), frame, policy=policy)

    assert outcome.check["n_individuals"] == 250
    assert row(outcome, FAUX)["observed_value"] == direct.flagged_fraction
    assert row(outcome, FTA)["observed_value"] == pytest.approx(direct.testers["fta"]["value"], abs=1e-12)
    assert row(outcome, DP)["observed_value"] == pytest.approx(direct.testers["demographic_parity"]["value"])


def test_validate_frame_leaves_the_frame_unchanged(frame, files, unfair_outcome):
    before = frame.copy(deep=True)
    E.validate_frame(frame.head(5).drop(columns=["sex"]), E.build_suite(make_policy(), model_path=files["fair"]))
    pd.testing.assert_frame_equal(frame, before)


# ------------------------------------------------------------------ build / save / load
def test_build_suite_mirrors_the_policy(files):
    policy = make_policy(testers={"fta": {"threshold": 0.3, "max_flagged_fraction": 0.2, "p": 1.0, "gating": True},
                                  "demographic_parity": {"threshold": 0.1, "enabled": False}})
    suite = E.build_suite(policy, model_path=files["fair"], feature_spec_path=files["spec"], name="g")
    assert suite.name == "g"
    faux, fta, gate = (e.configuration.kwargs for e in suite.expectations)
    assert faux["column"] == "sex" and faux["max_flagged_fraction"] == 0.10 and faux.get("aux_model_path") is None
    assert Policy.model_validate_json(faux["policy_json"]) == policy
    assert faux["feature_spec_path"] == files["spec"]
    assert (fta["threshold"], fta["max_flagged_fraction"], fta["p"], fta["gating"]) == (0.3, 0.2, 1.0, True)
    assert Policy.model_validate_json(gate["policy_json"]) == policy and gate["model_path"] == files["fair"]

    with pytest.raises(InputError, match="equalized_odds is enabled but the policy names no label"):
        E.build_suite(make_policy(label=None), model_path=files["fair"])
    with pytest.raises(ValueError, match="differs from the policy's faux.max_flagged_fraction"):
        E.ExpectFauxFlaggedFractionToBeAtMost(column="sex", model_path="m.pt", policy_json=policy.model_dump_json(),
                                              max_flagged_fraction=0.5)


def test_suite_round_trip(frame, files, tmp_path):
    suite = E.build_suite(make_policy(), model_path=files["fair"], feature_spec_path=files["spec"])
    path = E.save_suite(suite, tmp_path / "suite.json")
    loaded = E.load_suite(path)

    assert len(loaded.expectations) == len(suite.expectations) == 5
    assert [e.configuration.to_json_dict() for e in loaded.expectations] == \
        [e.configuration.to_json_dict() for e in suite.expectations]
    assert E.validate_frame(frame, loaded).decision == "passed"


def test_load_suite_refuses_unknown_or_invalid_expectations(files, tmp_path):
    path = E.save_suite(E.build_suite(make_policy(), model_path=files["fair"]), tmp_path / "suite.json")
    payload = json.loads(path.read_text())

    unknown = json.loads(json.dumps(payload))
    unknown["expectations"][1]["type"] = "expect_fairness_from_a_plugin_not_imported"
    (tmp_path / "unknown.json").write_text(json.dumps(unknown))
    with pytest.raises(InputError, match=r"5 expectations of which 1 have a type unknown.*not_imported"):
        E.load_suite(tmp_path / "unknown.json")

    edited = json.loads(json.dumps(payload))
    edited["expectations"][0]["kwargs"]["max_flagged_fraction"] = 0.5
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    with pytest.raises(InputError, match="differs from the policy's faux.max_flagged_fraction"):
        E.load_suite(tmp_path / "edited.json")

    with pytest.raises(InputError, match="cannot read expectation suite"):
        E.load_suite(tmp_path / "absent.json")


# ------------------------------------------------------------------ cost of the adapter
def test_gx_decides_as_a_direct_check_one_attribute(frame, files, record_property):
    """validate_frame (fAux only) decides as a direct check_one_attribute on the same data; the time of each is recorded."""
    policy = make_policy(testers={})
    suite = E.build_suite(policy, model_path=files["unfair"])
    model = load_model(files["unfair"])
    direct_s, gx_s = [], []
    for _ in range(2):
        t = time.perf_counter()
        direct = check_one_attribute(model, frame, policy=policy)
        direct_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        outcome = E.validate_frame(frame, suite)
        gx_s.append(time.perf_counter() - t)
    overhead = min(gx_s) - min(direct_s)
    record_property("gx_overhead_s", round(overhead, 3))
    print(f"check_one_attribute {min(direct_s):.3f} s, validate_frame {min(gx_s):.3f} s, GX overhead {overhead:.3f} s")
    assert outcome.check["flagged_fraction"] == direct.flagged_fraction
    # No wall-clock assert: under load one failed the README's test command on a fresh clone. The
    # overhead is measured by benchmarks/bench_gate.py (validate_frame - check_one_attribute, same run); recorded here only.
