"""The tester table: a tester registered in a test (no other file changed) is validated by the policy, run by the
check, built into the GX suite and decided on; "not applicable" comes from its flags.

The plug-in tester scores each row by |x_j| of one encoded column ``feature`` (its own settings field), so its
flagged fraction has a closed form: mean(|spec.encode(frame)[:, feature]| > threshold).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from pydantic import Field, ValidationError

import faux_checks_gx as E
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.gate.policy import Policy, TesterSettings
from faux_checks.gate.tester_table import TESTERS, Tester, TesterCall, not_applicable, register_tester
from faux_checks.gate.testers import baseline_scores
from faux_checks.inputs.models import load_model, save_torchscript
from faux_checks.inputs.tabular import FeatureSpec
from faux_checks.errors import InputError

GX_TYPE = "expect_abs_feature_flagged_fraction_to_be_at_most"


class AbsFeatureSettings(TesterSettings):
    feature: int = Field(0, ge=0, description="Encoded column whose absolute value is the score.")


def _abs_feature(call: TesterCall):
    j = call.settings.feature
    return np.abs(call.audit.X[:, j]), f"|x_{j}| > {call.settings.threshold:g}"


@pytest.fixture
def plugin():
    """The tiny test-only tester, registered through the table for one test and removed after it."""
    entry = register_tester(Tester("abs_feature", _abs_feature, settings=AbsFeatureSettings, params=("feature",),
                                   gx_name="AbsFeature", summary="|x_j| of one encoded column"))
    try:
        yield entry
    finally:
        TESTERS.pop("abs_feature", None)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 240
    sex = rng.choice(["F", "M"], n)
    df = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n),
                       "x3": 2 * (sex == "M") - 1 + rng.normal(scale=0.5, size=n), "sex": sex})
    df["y"] = (df.x1 + rng.normal(scale=0.5, size=n) > 0).astype(int)
    return df


@pytest.fixture(scope="module")
def files(tmp_path_factory, frame) -> dict:
    d = tmp_path_factory.mktemp("tester-table")
    spec = FeatureSpec.fit(frame, ["x1", "x2", "x3"], name="three")
    layer = torch.nn.Linear(3, 1)
    with torch.no_grad():
        layer.weight[:] = torch.tensor([[1.0, -0.5, 0.3]])
        layer.bias[:] = 0.0
    return {"model": str(save_torchscript(layer, d / "m.pt")), "spec": str(spec.save(d / "spec.json")), "fitted": spec}


def _policy(testers: dict) -> Policy:
    return Policy.model_validate({"protected": "sex", "label": "y", "target_output": "logit",
                                  "faux": {"delta": 0.05, "max_flagged_fraction": 0.10},
                                  "aux": {"hidden": [8], "epochs": 20}, "testers": testers,
                                  "decision": {"min_group_rows": 20}})


def test_a_registered_tester_is_validated_against_its_own_settings_model(plugin):
    policy = _policy({"abs_feature": {"threshold": 1.0, "feature": 2}})
    settings = policy.testers["abs_feature"]
    assert type(settings) is AbsFeatureSettings and settings.feature == 2
    # its settings field is part of the recorded policy and comes back when it is read again
    assert Policy.model_validate_json(policy.model_dump_json()).testers["abs_feature"] == settings
    with pytest.raises(ValidationError) as info:
        _policy({"abs_feature": {"threshold": 1.0, "feature": -1}})
    assert [e["loc"] for e in info.value.errors()] == [("testers", "abs_feature", "feature")]
    with pytest.raises(ValidationError) as info:        # strict: no string for an int, no unknown key
        _policy({"abs_feature": {"threshold": 1.0, "feature": "2", "featur": 1}})
    assert sorted(e["loc"] for e in info.value.errors()) == [("testers", "abs_feature", "featur"),
                                                             ("testers", "abs_feature", "feature")]


def test_unregistered_tester_is_refused_by_name():
    with pytest.raises(ValidationError, match=r"unknown tester\(s\) \['abs_feature'\]"):
        _policy({"abs_feature": {"threshold": 1.0}})


def test_a_registered_tester_runs_in_the_check_and_in_the_gx_suite(plugin, frame, files):
    policy = _policy({"abs_feature": {"threshold": 1.0, "feature": 1, "max_flagged_fraction": 0.05, "gating": True}})
    expected = float(np.mean(np.abs(files["fitted"].encode(frame)[:, 1]) > 1.0))
    assert 0.05 < expected < 0.9                        # the column is standardised: ~32% of rows over 1

    direct = check_one_attribute(load_model(files["model"]), frame, policy=policy, feature_spec=files["fitted"])
    entry = direct.testers["abs_feature"]
    assert entry["value"] == pytest.approx(expected, abs=1e-12)
    assert entry["passed"] is False and entry["description"] == "|x_1| > 1"
    assert direct.decision == "failed"                  # gating: the tester's limit fails the gate

    suite = E.build_suite(policy, model_path=files["model"], feature_spec_path=files["spec"])
    built = {e.expectation_type: e for e in suite.expectations}
    assert GX_TYPE in built and built[GX_TYPE].feature == 1 and built[GX_TYPE].max_flagged_fraction == 0.05
    outcome = E.validate_frame(frame, suite)
    (row,) = [r for r in outcome.expectations if r["type"] == GX_TYPE]
    assert row["exception"] is None and row["success"] is False and row["gating"] is True
    assert row["observed_value"] == pytest.approx(expected, abs=1e-12)
    assert outcome.decision == "failed"
    assert any(r["rule"] == GX_TYPE and r["status"] == "exceeded" for r in outcome.rules)


def test_not_applicable_is_derived_from_the_flags(frame, files):
    from faux_checks.gate.rows import prepare_audit
    from faux_checks.method.forward import ForwardOnlyTarget

    audit = prepare_audit(frame, policy=_policy({}), feature_spec=files["fitted"])
    forward = ForwardOnlyTarget(lambda x: x[:, :1], access="forward (test)", n_features=3)
    grad = Tester("grad_only", _abs_feature, needs_gradients=True)
    assert not_applicable(grad, forward, audit) == ("not applicable: grad_only needs the target's input gradient; "
                                                    "the target is forward-only (forward (test))")
    assert not_applicable(grad, load_model(files["model"]), audit) is None
    # the target's inputs are x1..x3: a tester that changes the protected input does not apply
    direct = Tester("direct", _abs_feature, needs_protected_input=True)
    assert not_applicable(direct, forward, audit) == ("not applicable: the target does not take the protected "
                                                      "attribute as input")
    # the shipped FTA reads the same flag: scores None on a forward-only target, its scorer never called
    scores, why = baseline_scores("fta", TESTERS["fta"].settings(threshold=0.1), forward, None, audit)
    assert scores is None and why.startswith("not applicable: fta needs the target's input gradient")


def test_entries_are_checked_when_declared():
    with pytest.raises(InputError, match="needs scores="):
        Tester("no_scores")
    with pytest.raises(InputError, match=r"params \['featur'\] are not fields of TesterSettings"):
        Tester("typo", _abs_feature, params=("featur",))
    with pytest.raises(InputError, match=r"params \['column'\] are names the GX expectations use"):
        Tester("clash", _abs_feature, settings=type("Clash", (TesterSettings,), {"__annotations__": {"column": int},
                                                                                 "column": 0}), params=("column",))
    with pytest.raises(InputError, match="registered already"):
        register_tester(Tester("fta", _abs_feature))
    assert {n for n, t in TESTERS.items() if t.needs_gradients} == {"fta", "weighted_fta", "unfair_map"}
