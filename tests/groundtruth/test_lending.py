"""The lending generator: its shares, its counterfactual and its truth against closed forms."""

import numpy as np
import pytest

from faux_checks.errors import InputError
from faux_checks.groundtruth.lending import (LENDING_FEATURES, LENDING_PROXIES, lending_fairness_scores,
                                             make_lending_data)


def test_shares_missing_values_and_labels():
    data = make_lending_data(20_000, minority_share=0.14, missing_share=0.02, seed=3)
    f = data.frame
    assert abs((f["race"] == "minority").mean() - 0.14) < 0.01
    assert abs(f["employment_years"].isna().mean() - 0.02) < 0.004
    assert set(f["deny"]) == {"yes", "no"}
    assert f[[c for c in f.columns if c != "employment_years"]].notna().all().all()


def test_label_bias_only_turns_minority_no_into_yes():
    fair = make_lending_data(20_000, label_bias=0.0, seed=1)
    biased = make_lending_data(20_000, label_bias=0.5, seed=1)
    changed = (fair.frame["deny"] != biased.frame["deny"]).to_numpy()
    assert (biased.c[changed] == 1).all() and (fair.frame["deny"][changed] == "no").all()
    # half of the minority's unbiased "no" become "yes" (binomial: 5 standard errors)
    no = (fair.c == 1) & (fair.deny_true == 0)
    assert abs(changed[no].mean() - 0.5) < 5 * np.sqrt(0.25 / no.sum())


def test_counterfactual_flips_the_protected_attribute_and_the_proxies_only():
    data = make_lending_data(500, seed=0)
    cf = data.counterfactual()
    assert (cf["race"] != data.frame["race"]).all()
    for col in LENDING_FEATURES + ("deny",):
        assert cf[col].equals(data.frame[col])
    # the minority lives in tracts with a higher minority share: flipping to minority raises it, same noise
    up = data.c == 0
    assert (cf["tract_minority_share"][up] > data.frame["tract_minority_share"][up]).all()
    assert (cf["tract_median_income"][up] < data.frame["tract_median_income"][up]).all()
    back = data.counterfactual()
    assert back.equals(cf)                   # deterministic: the stored noise


def test_truth_is_zero_for_a_model_blind_to_the_proxies_and_exact_for_a_linear_one():
    data = make_lending_data(1000, seed=2)
    blind = lending_fairness_scores(data, lambda f: 1 / (1 + np.exp(-(f["debt_to_income"] - 36) / 10)))
    assert np.array_equal(blind, np.zeros(1000))
    slope = 0.5
    linear = lending_fairness_scores(data, lambda f: np.clip(slope * f["tract_minority_share"].to_numpy(), 0, 1))
    cf = data.counterfactual()
    expected = slope * np.abs(cf["tract_minority_share"].to_numpy() - data.frame["tract_minority_share"].to_numpy())
    assert np.allclose(linear, expected, atol=1e-12)


def test_bad_parameters_are_named():
    with pytest.raises(InputError, match="minority_share=1.5"):
        make_lending_data(100, minority_share=1.5)
    with pytest.raises(InputError, match="2 probabilities|probabilities in"):
        lending_fairness_scores(make_lending_data(100), lambda f: np.zeros(2))
    assert set(LENDING_PROXIES) <= set(make_lending_data(60).frame.columns)
