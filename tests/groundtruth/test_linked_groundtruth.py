"""Ground truth for a linked protected file with keys missing (faux_checks.groundtruth.linked).

Closed forms: exactly round(u·n) keys missing; min(round(t·k), |T|) of them from the targeted set T. Bound: on
tests/_support.make_data (n = 400) with the target logit = f0 + 2·proxy·[f1 > 0], whose true per-person change is
exact (flipping sex moves the proxy by ±2, the logit by ±4 where f1 > 0), the adversarial pattern (the missing keys
all truly flagged) leaves the true all-rows fraction inside [l(1-u), h(1-u)+u].
"""

from __future__ import annotations

import tomllib

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from faux_checks.errors import InputError
from faux_checks.gate.policy import Policy
from faux_checks.gate.unmatched import check_linked_attributes, flagged_bound
from faux_checks.groundtruth.linked import MISSINGNESS_PATTERNS, linked_files, missing_keys

import _support


@pytest.mark.parametrize("u", [0.02, 0.05, 0.10])
@pytest.mark.parametrize("n_targeted", [0, 30, 300])
def test_missing_keys_give_the_share_and_the_tilt(u, n_targeted):
    n = 2000
    targeted = np.zeros(n, dtype=bool)
    targeted[np.random.default_rng(1).choice(n, n_targeted, replace=False)] = True
    k = round(u * n)
    for tilt in (0.0, 0.8, 1.0):
        missing = missing_keys(n, u, seed=3, targeted=targeted, tilt=tilt)
        assert missing.sum() == k
        assert (missing & targeted).sum() == min(round(tilt * k), n_targeted)
    assert not np.array_equal(missing_keys(n, u, seed=3), missing_keys(n, u, seed=4))


def test_patterns_closed_forms():
    """random: k missing; protected: min(round(0.8k), n1)/n1 of group 1 missing; flagged: every missing key truly
    flagged (T large enough), then all of T and the rest outside it (T too small)."""
    n, u = 2000, 0.05
    rng = np.random.default_rng(0)
    c = (rng.random(n) < 0.14).astype(int)
    frame = pd.DataFrame({"x": rng.normal(size=n), "c": c})
    truth = np.where(rng.random(n) < 0.3, 0.5, 0.0)
    k = round(u * n)
    for pattern in MISSINGNESS_PATTERNS:
        audit, protected, missing = linked_files(frame, "c", u, pattern, seed=7, truth=truth)
        assert missing.sum() == k and len(protected) == n - k and "c" not in audit.columns
        assert set(protected["pid"]) == set(np.flatnonzero(~missing))
        assert (protected.set_index("pid")["c"].sort_index().to_numpy() == c[~missing]).all()
        if pattern == "protected":
            assert missing[c == 1].mean() == pytest.approx(min(round(0.8 * k), c.sum()) / c.sum())
        if pattern == "flagged":
            assert (truth[missing] > 0.1).all()
    few = np.where(np.arange(n) < 40, 0.5, 0.0)                  # |T| = 40 < k = 100
    missing = linked_files(frame, "c", u, "flagged", seed=7, truth=few)[2]
    assert missing[:40].all() and missing.sum() == k
    with pytest.raises(InputError, match="needs each person's true score"):
        linked_files(frame, "c", u, "flagged", seed=7)
    with pytest.raises(InputError, match="unknown missingness pattern"):
        linked_files(frame, "c", u, "worst", seed=7)
    with pytest.raises(InputError, match=r"\[0, 1\)"):
        missing_keys(n, 1.0, seed=0)


def test_bound_covers_the_truth_when_the_flagged_go_missing():
    n, u, delta = 400, 0.05, 0.05
    data = _support.make_data(n, 0)
    target = _support.ProxyWhere(1.0, 0.0)
    logit = data["f0"].to_numpy() + 2.0 * data["proxy"].to_numpy() * (data["f1"].to_numpy() > 0)
    shift = np.where(data["sex"] == "M", -2.0, 2.0) * 2.0 * (data["f1"].to_numpy() > 0)
    truth = np.abs(expit(logit + shift) - expit(logit))
    audit, protected, missing = linked_files(data.drop(columns="y"), "sex", u, "flagged", seed=0, truth=truth,
                                             delta=delta)
    assert (truth[missing] > delta).all()
    payload = tomllib.loads(_support.POLICY.replace("epochs = 30", "epochs = 8").replace('label = "y"\n', ""))
    payload["protected_file"] = {"join_on": "pid", "unmatched": "exclude", "max_unmatched_share": 0.1}
    result = check_linked_attributes(target, audit, policy=Policy.model_validate(payload), protected_rows=protected)
    interval = result.sections[0].check.interval
    lo, hi = flagged_bound(interval.lower, interval.upper, u)
    true_all = float(np.mean(truth > delta))
    assert 0.3 < true_all < 0.6
    assert float(np.mean(truth[~missing] > delta)) < true_all     # the matched rows under-read the truth
    assert lo <= true_all <= hi
    assert {r["rule"]: r for r in result.rules}["max_flagged_fraction"]["bound"] == pytest.approx([lo, hi])
