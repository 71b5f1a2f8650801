"""Value targets (``target_output = "value"``): a credit limit in EUR gated with δ in EUR.

Truth: :mod:`faux_checks.groundtruth.value` (3,000 bundled Adult rows, limit = f(x) − β·c·g(x) EUR): changing only c
moves each person's limit by exactly β·g(x), so the true flagged share at δ = 500 EUR is mean(β·g(x) > 500).
"""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from faux_checks import FeatureSpec, ForwardOnlyTarget, Policy, load_policy
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.errors import InputError
from faux_checks.gate.tester_table import TESTERS, not_applicable
from faux_checks.groundtruth.value import VALUE_COLUMNS, exact_limit_target, make_value_data
from faux_checks.inputs.datasets import load_adult
from faux_checks.method.output import TargetOutput, predict_probability, resolve_output_form

DELTA = 500.0
TESTED = {"ftu_flip": {"threshold": DELTA}, "unfair_map": {"threshold": 1.0}, "demographic_parity": {"threshold": 0.2},
          "equalized_odds": {"threshold": 0.2}}


def _policy(**faux) -> Policy:
    base = load_policy(protected="c").model_dump()
    return Policy.model_validate({**base, "label": None, "target_output": "value", "testers": TESTED,
                                  "faux": {**base["faux"], "delta": DELTA, "unit": "EUR", **faux},
                                  "aux": {**base["aux"], "epochs": 15},
                                  "decision": {**base["decision"], "aux_seeds": 1}})


@pytest.fixture(scope="module")
def unfair():
    data = make_value_data(load_adult(), n=3000, beta=0.5, seed=0)
    spec = FeatureSpec.fit(data.frame(), columns=[*VALUE_COLUMNS, "proxy_linear", "proxy_nonlinear",
                                                  "proxy_category", "proxy_legit", "c"])
    target = ForwardOnlyTarget(exact_limit_target(data, spec), access="forward (exact limit)", output_form="value")
    return data, spec, target, check_one_attribute(target, data.frame(), policy=_policy(), feature_spec=spec)


@pytest.mark.slow        # one gate on 3,000 rows (aux training, sensitivity): 10-30 s
def test_the_flagged_fraction_of_a_credit_limit_equals_the_true_share_within_its_interval(unfair):
    data, spec, target, res = unfair
    truth = data.true_share(DELTA)
    assert 0.55 < truth < 0.70                                   # the generator's unfair target: about 62% move > 500 EUR
    assert res.interval.lower <= truth <= res.interval.upper
    assert res.flagged_fraction == pytest.approx(truth, abs=0.02)
    assert res.decision == "failed"
    # the gate reads the raw limit (no sigmoid): the recorded ŷ of a flagged person is their limit in EUR
    rows = [t["row"] for t in res.top_flagged]
    np.testing.assert_allclose([t["probability"] for t in res.top_flagged], data.limit()[rows], rtol=1e-5)
    assert res.provenance["unit"] == "EUR" and res.provenance["target_output"] == "value"
    from faux_checks.gate.decision import summary_line

    assert summary_line(res).endswith("at δ=500 EUR, n=3,000")
    # the group table: no class at ŷ > 0.5 for a limit; the mean limit per group, in EUR
    rows = {r["group"]: r for r in res.group_table}
    assert all(r["predicted_rate"] is None for r in rows.values())
    for g, code in (("g0", 0), ("g1", 1)):
        assert rows[g]["mean_score"] == pytest.approx(data.limit()[data.c == code].mean(), rel=1e-5)


@pytest.mark.slow        # one gate on 3,000 rows (aux training, sensitivity): 10-30 s
def test_a_fair_credit_limit_passes():
    data = make_value_data(load_adult(), n=3000, beta=0.0, seed=0)
    spec = FeatureSpec.fit(data.frame(), columns=[*VALUE_COLUMNS, "proxy_linear", "proxy_nonlinear",
                                                  "proxy_category", "proxy_legit", "c"])
    target = ForwardOnlyTarget(exact_limit_target(data, spec), access="forward (exact limit)", output_form="value")
    res = check_one_attribute(target, data.frame(), policy=_policy(), feature_spec=spec)
    assert data.true_share(DELTA) == 0.0
    assert res.decision == "passed" and res.flagged_fraction == 0.0


@pytest.mark.slow        # one gate on 3,000 rows (aux training, sensitivity): 10-30 s
def test_probability_testers_say_not_applicable_and_the_others_measure_in_the_unit(unfair):
    data, _, _, res = unfair
    for name in ("unfair_map", "demographic_parity", "equalized_odds"):
        entry = res.testers[name]
        assert entry["value"] is None and entry["summary"].startswith("not applicable: "), entry
        assert "probability" in entry["summary"] and "target_output = 'value'" in entry["summary"]
    # FTU flip changes c's own input: on the exact target that is β·g(x), so it flags exactly the true share
    assert res.testers["ftu_flip"]["value"] == pytest.approx(data.true_share(DELTA), abs=1e-12)
    assert [n for n, t in TESTERS.items() if t.needs_probability] == ["unfair_map", "demographic_parity",
                                                                      "equalized_odds"]
    audit = SimpleNamespace(protected=None, feature_spec=None)     # the probability flag is read first
    assert not_applicable(TESTERS["unfair_map"], None, audit, TargetOutput(form="value")).startswith(
        "not applicable: Unfair Map reads the target's output as a probability")


@pytest.mark.slow        # one gate on 3,000 rows (aux training, sensitivity): 10-30 s
def test_the_report_speaks_in_the_unit(unfair, tmp_path):
    from faux_checks.report.build import write_report

    _, _, _, res = unfair
    paths = write_report(tmp_path / "r", decision=res.decision, reasons=res.reasons, check=res.to_dict())
    page, report = paths["html"].read_text(), json.loads(paths["json"].read_text())
    sentences = report["check"]["outcome"]["sentences"]
    assert len(sentences) == 2 and all("500 EUR" in t for t in sentences)       # one per group, no label direction
    assert report["check"]["outcome"]["unit"] == "EUR" and report["policy"]["faux"]["unit"] == "EUR"
    assert "LIC score &gt; δ = 500.0 EUR" in page or "LIC score > δ = 500.0 EUR" in page
    assert "would fall by more than 500 EUR" in page and "(EUR)" in page
    assert "probability points" not in page.lower() and "probability points" not in json.dumps(report["check"]).lower()
    from faux_checks.report.plots import score_axis_label

    assert score_axis_label(report) == "LIC score: change of the predicted value when c is swapped (EUR)"


@pytest.mark.parametrize("faux, words", [
    ({"unit": None}, "set [faux] unit to the output's unit"),
    ({"unit": None, "delta": 500.0}, "set target_output = 'value' and [faux] unit"),
])
def test_a_value_delta_without_a_unit_is_refused_naming_the_key_and_the_fix(faux, words):
    base = load_policy(protected="c").model_dump()
    with pytest.raises(Exception) as info:
        Policy.model_validate({**base, "target_output": "value",
                               "faux": {**base["faux"], "delta": 0.5, **faux}})
    assert words in str(info.value), str(info.value)


def test_a_unit_on_a_classifier_policy_is_refused():
    base = load_policy(protected="c").model_dump()
    with pytest.raises(Exception, match=r"\[faux\] unit = 'EUR' is set but target_output = 'auto'"):
        Policy.model_validate({**base, "faux": {**base["faux"], "unit": "EUR"}})
    assert load_policy(protected="c").model_dump()["faux"]["unit"] is None


def test_value_and_probability_declarations_are_checked_against_the_target():
    X = torch.randn(64, 3)
    regressor = torch.nn.Linear(3, 1)
    out = resolve_output_form(regressor, X, TargetOutput(form="value"))
    assert out.form == "value"
    np.testing.assert_allclose(predict_probability(regressor, X, out), regressor(X).detach().numpy()[:, 0], rtol=1e-6)
    classifier = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Sigmoid())
    with pytest.raises(InputError, match="output form 'value' declared but the target model says it returns a probability"):
        resolve_output_form(classifier, X, TargetOutput(form="value"))
    forward_value = ForwardOnlyTarget(lambda x: x[:, 0] * 1000.0, access="forward (test)", output_form="value")
    with pytest.raises(InputError, match="returns a value .* Declare it: policy target_output = 'value'"):
        resolve_output_form(forward_value, X, TargetOutput(form="auto"))
    with pytest.raises(InputError, match="output form 'value' needs one output column"):
        resolve_output_form(torch.nn.Linear(3, 2), X, TargetOutput(form="value"))


def test_scikit_learn_regressors_are_read_through_predict_and_classifiers_refuse_value():
    from sklearn.linear_model import LinearRegression, LogisticRegression

    from faux_checks import as_target

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = X @ np.array([100.0, -50.0, 20.0]) + 3000.0
    target, _ = as_target(LinearRegression().fit(X, y))
    assert target.output_form == "value"
    Xt = torch.as_tensor(X, dtype=torch.float32)
    out = resolve_output_form(target, Xt, TargetOutput(form="value"))
    np.testing.assert_allclose(predict_probability(target, Xt, out), y, rtol=1e-5)     # no sigmoid: EUR as predicted
    clf, _ = as_target(LogisticRegression().fit(X, (y > 3000).astype(int)))
    with pytest.raises(InputError, match="output form 'value' declared but the target model says it returns"):
        resolve_output_form(clf, Xt, TargetOutput(form="value"))


def test_the_generator_moves_each_limit_by_beta_times_the_gain():
    data = make_value_data(load_adult(), n=500, beta=0.5, seed=3)
    np.testing.assert_allclose(np.abs(data.limit(1 - data.c) - data.limit()), 0.5 * data.gain(), rtol=0, atol=1e-9)
    assert replace(data, beta=0.0).true_share(DELTA) == 0.0
    with pytest.raises(InputError, match="beta must be >= 0"):
        make_value_data(load_adult(), n=10, beta=-1.0)
