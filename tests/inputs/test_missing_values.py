"""Missing input values: NaN passed to a target that takes it, every column named for one that does not, and the
counterfactual switching missingness (ground truth: a proxy that lives in missingness)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from faux_checks import FeatureSpec, Policy
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.errors import InputError
from faux_checks.groundtruth.missingness import missingness_labels, missingness_proxy, true_share
from faux_checks.inputs.missing import nan_inputs, sklearn_takes_nan, target_takes_missing

pytest.importorskip("sklearn")
from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402
from sklearn.impute import SimpleImputer  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

COLUMNS = ["x1", "x2", "savings"]


def policy(**changes) -> Policy:
    payload = {"protected": "group", "faux": {"delta": 0.1, "max_flagged_fraction": 0.05},
               "aux": {"epochs": 10}, "decision": {"min_group_rows": 20}}
    payload.update(changes)
    return Policy.model_validate(payload)


def hgb(data, *, unfair: bool) -> HistGradientBoostingClassifier:
    y = missingness_labels(data, unfair=unfair, seed=2)
    return HistGradientBoostingClassifier(max_depth=2, max_iter=60, min_samples_leaf=100, random_state=0).fit(
        data.frame[COLUMNS].to_numpy(), y)


def test_detection_of_targets_that_take_nan():
    assert sklearn_takes_nan(HistGradientBoostingClassifier())
    assert not sklearn_takes_nan(LogisticRegression())
    assert sklearn_takes_nan(make_pipeline(SimpleImputer(), LogisticRegression()))          # the imputer removes NaN
    assert sklearn_takes_nan(make_pipeline(StandardScaler(), HistGradientBoostingClassifier()))   # passed on
    assert not sklearn_takes_nan(make_pipeline(StandardScaler(), LogisticRegression()))
    linear = torch.nn.Linear(3, 1)
    assert not target_takes_missing(linear) and target_takes_missing(linear, "pass")
    from faux_checks.inputs.estimators import as_target

    booster, _ = as_target(HistGradientBoostingClassifier().fit(np.eye(3), [0, 1, 0]))
    assert target_takes_missing(booster) and not target_takes_missing(booster, "refuse")


def test_indicator_encoding_and_the_targets_nan_inputs():
    frame = pd.DataFrame({"a": [1.0, np.nan, 3.0], "b": ["u", "v", "u"]})
    spec = FeatureSpec.fit(frame.fillna(2.0), ["a", "b"]).with_missing_indicators(["a"])
    assert spec.feature_names == ["a", "a=__present__", "a=__missing__", "b=u", "b=v"]
    X = spec.encode(frame)                                                     # finite: the aux model's input
    sd = np.std([1.0, 2.0, 3.0])
    np.testing.assert_allclose(X[:, :3], [[-1 / sd, 1, 0], [0, 0, 1], [1 / sd, 1, 0]], rtol=1e-6)
    assert FeatureSpec.from_dict(spec.to_dict()).feature_names == spec.feature_names
    target_in = nan_inputs(torch.from_numpy(X), spec.missing_positions()).numpy()   # (3, 3): a, b=u, b=v
    assert target_in.shape == (3, 3) and np.isnan(target_in[1, 0]) and not np.isnan(target_in[[0, 2], 0]).any()
    with pytest.raises(InputError, match=r"\['b'\] is not"):
        spec.with_missing_indicators(["b"])


def test_nan_reaches_a_nan_native_model_unchanged():
    data = missingness_proxy(600, seed=5)
    model = hgb(missingness_proxy(2000, seed=1), unfair=True)
    seen = []
    inner = model.predict_proba
    model.predict_proba = lambda x: (seen.append(np.array(x, copy=True)), inner(x))[1]   # a spy on the model's input
    result = check_one_attribute(model, data.frame, policy=policy(min_aux_quality=0.5))
    expected = data.frame[COLUMNS].to_numpy()
    whole = [x for x in seen if x.shape == expected.shape]
    assert whole, "the model was never read on the audited rows"
    np.testing.assert_array_equal(np.isnan(whole[0]), np.isnan(expected))                  # NaN at the same cells
    present = ~np.isnan(expected)                     # the gate's encoded matrix is float32 (FeatureSpec.encode)
    np.testing.assert_array_equal(whole[0][present], expected[present].astype(np.float32))
    assert int(np.isnan(expected[:, 2]).sum()) > 50
    assert "missing values passed as NaN" in result.provenance["target_access"]


def test_a_target_that_cannot_take_nan_is_refused_naming_every_column():
    frame = missingness_proxy(400, seed=0).frame
    frame.loc[[3, 7, 11, 19], "x1"] = np.nan
    counts = frame[COLUMNS].isna().sum()
    with pytest.raises(InputError) as info:
        check_one_attribute(torch.nn.Linear(3, 1), frame, policy=policy(target_output="logit"))
    message = str(info.value)
    assert "2 columns have missing values" in message
    assert "column 'x1' has 4 missing values in 400 rows" in message
    assert f"column 'savings' has {counts['savings']} missing values in 400 rows" in message
    assert 'missing_values = "pass"' in message
    model = hgb(missingness_proxy(500, seed=1), unfair=False)
    with pytest.raises(InputError, match=r"column 'x1' has 4 .*column 'savings' has .*missing_values = \"refuse\""):
        check_one_attribute(model, frame, policy=policy(missing_values="refuse"))


def test_a_categorical_column_with_missing_values_is_refused_for_a_nan_native_target():
    frame = missingness_proxy(300, seed=0).frame.assign(job=["a", "b", None] * 100)
    spec = FeatureSpec.fit(frame.assign(job=frame["job"].fillna("a"), savings=0.0), ["x1", "x2", "savings", "job"])
    model = HistGradientBoostingClassifier(max_iter=5).fit(spec.encode(frame.fillna({"job": "a", "savings": 0.0})),
                                                           np.arange(300) % 2)
    with pytest.raises(InputError, match=r"column 'job' has 100 missing values in 300 rows; .*categorical"):
        check_one_attribute(model, frame, policy=policy(), feature_spec=spec)


@pytest.mark.slow
@pytest.mark.parametrize("unfair", [True, False])
def test_a_proxy_in_missingness_is_read_as_the_truth(unfair):
    """Savings missing for 30% of group A and 5% of B: the unfair target (labels lowered where savings is missing)
    fails with the flagged fraction near the true share; the fair one passes."""
    model = hgb(missingness_proxy(3000, seed=1), unfair=unfair)
    data = missingness_proxy(3000, seed=3)
    truth = true_share(lambda f: model.predict_proba(f[COLUMNS].to_numpy())[:, 1], data, 0.1)
    result = check_one_attribute(model, data.frame, policy=policy(decision={"min_group_rows": 100}))
    if unfair:
        assert truth > 0.15
        assert result.decision == "failed"
    else:
        assert truth < 0.02
        assert result.decision == "passed"
    assert abs(result.flagged_fraction - truth) < 0.03
