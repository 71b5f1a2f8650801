"""The estimated-probability generator (faux_checks.groundtruth.estimated): calibrated, of the ROC-AUC asked for."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from faux_checks.errors import InputError
from faux_checks.groundtruth.estimated import estimated_audit, sharpness_probabilities, signal_strength
from faux_checks.inputs.probabilities import expected_auc_binary


@pytest.mark.parametrize("auc", [0.7, 0.8, 0.9, 0.95])
def test_probabilities_reach_the_auc_asked_for_and_are_calibrated(auc):
    c = (np.random.default_rng(0).random(40_000) < 0.14).astype(int)
    p = sharpness_probabilities(c, auc, seed=1)
    assert norm.cdf(np.sqrt(2) * signal_strength(auc)) == pytest.approx(auc)
    assert roc_auc_score(c, p) == pytest.approx(auc, abs=0.01)
    assert expected_auc_binary(p) == pytest.approx(auc, abs=0.01)        # read from the probabilities alone
    bins = pd.qcut(p, 10, labels=False, duplicates="drop")
    by_bin = pd.DataFrame({"p": p, "c": c, "b": bins}).groupby("b").agg(p=("p", "mean"), c=("c", "mean"), n=("c", "size"))
    se = np.sqrt(by_bin["p"] * (1 - by_bin["p"]) / by_bin["n"]) + 1e-4
    assert (np.abs(by_bin["p"] - by_bin["c"]) / se).max() < 4.0            # calibrated: P(c = 1 | p) = p
    assert p.mean() == pytest.approx(c.mean(), abs=0.01)


def test_audit_rows_lose_c_and_gain_one_column_per_group():
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "c": [0, 1, 0, 1]})
    audit = estimated_audit(frame, "c", 0.9, seed=0)
    assert list(audit.columns) == ["x", "p_g0", "p_g1"]
    assert np.allclose(audit.p_g0 + audit.p_g1, 1.0)
    with pytest.raises(InputError, match=r"must lie in \(0.5, 1\)"):
        signal_strength(1.0)
    with pytest.raises(InputError, match="0/1"):
        sharpness_probabilities(np.array([0, 2]), 0.8, seed=0)


def test_probabilities_given_the_features_are_calibrated_given_them():
    """P(c = 1 | x) from the proxies' exact likelihood matches the share of c = 1 per bin; adding the signal keeps
    it calibrated and makes it sharper."""
    from scipy.special import expit

    from faux_checks.groundtruth.estimated import informed_probabilities, proxy_log_odds
    from faux_checks.groundtruth.proxy import make_proxy_data

    rng = np.random.default_rng(0)
    n = 6_000
    features = pd.DataFrame({"a": rng.normal(size=n), "b": rng.gamma(2.0, size=n)})
    data = make_proxy_data(features, rng.integers(0, 2, n), legit_column="b", kind="binary", seed=0)
    for p in (expit(proxy_log_odds(data)), informed_probabilities(data, 0.8, seed=1, share=0.5)):
        bins = pd.qcut(p, 10, labels=False, duplicates="drop")
        by_bin = pd.DataFrame({"p": p, "c": data.c, "b": bins}).groupby("b").agg(p=("p", "mean"), c=("c", "mean"),
                                                                                   n=("c", "size"))
        se = np.sqrt(by_bin["p"] * (1 - by_bin["p"]) / by_bin["n"]) + 1e-4
        assert (np.abs(by_bin["p"] - by_bin["c"]) / se).max() < 4.0
    assert roc_auc_score(data.c, informed_probabilities(data, 0.8, seed=1, share=0.5)) > roc_auc_score(
        data.c, expit(proxy_log_odds(data))) + 0.02
