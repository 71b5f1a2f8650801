"""A 3-class protected attribute with one group's auxiliary quality under the floor: the floor keeps a model from
passing, never from failing (the asymmetric guards of :func:`faux_checks.gate.check_rules.check_rules`).

Ground truth: the ``multicat`` mechanism (:mod:`faux_checks.groundtruth.mechanisms`), a 5-level categorical proxy
of a 3-class c, on 3,000 rows with two numeric columns c does not cause. The unfair target reads the proxy's levels
(its true flagged fraction at δ = 0.1 is over 70%), the fair one ignores it (exactly 0). ``min_aux_quality`` is set
between the two smallest lower bounds of the groups' one-vs-rest ROC-AUC intervals, so that exactly one group is
under it (the bounds of the cross-fitted audit, which a missed floor brings on): the unfair target still fails on
its flagged fraction, the fair one is undecided (not passed); with the floor under every bound, the fair one passes,
and with the floor over every bound the unfair one fails.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from faux_checks import FeatureSpec
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.gate.policy import Policy
from faux_checks.groundtruth.mechanisms import make_mechanism_data, mechanism_fairness_scores

N = 3000
LIMIT = 0.05
DELTA = 0.1
UNFAIR_LEVELS = {"p": 3.0, "q": 1.5, "s": -3.0}       # logit weights of cat_proxy's levels


@pytest.fixture(scope="module")
def cell():
    rng = np.random.default_rng(0)
    base = pd.DataFrame({"f0": rng.normal(size=N), "f1": rng.normal(size=N)})
    y = (base["f0"] + rng.normal(size=N) > 0).astype(int).to_numpy()
    data = make_mechanism_data(base, y, mechanism="multicat", kind="multiclass", n_groups=3, seed=0)
    frame = data.frame()
    spec = FeatureSpec.fit(frame, list(frame.columns))
    audit = frame.assign(c=np.array(["A", "B", "C"])[data.c], y=data.y)
    return data, spec, audit


def _target(spec, levels) -> nn.Linear:
    w = [1.0 if f == "f0" else levels.get(f.split("=")[1], 0.0) if f.startswith("cat_proxy=") else 0.0
         for f in spec.feature_names]
    lin = nn.Linear(len(w), 1)
    with torch.no_grad():
        lin.weight[:] = torch.tensor([w])
        lin.bias[:] = 0.0
    return lin


def _policy(floor: float) -> Policy:
    return Policy.model_validate({
        "protected": "c", "protected_kind": "multiclass", "label": "y", "target_output": "logit",
        "min_aux_quality": floor, "faux": {"delta": DELTA, "max_flagged_fraction": LIMIT, "admissible": ["f0", "f1"]},
        "aux": {"epochs": 30}, "decision": {"min_group_rows": 100, "aux_seeds": 1}})


def _truth(data, spec, target) -> float:
    def predict(f):
        with torch.no_grad():
            return torch.sigmoid(target(torch.as_tensor(spec.encode(f)).float())).numpy().ravel()
    return float((mechanism_fairness_scores(predict, data) > DELTA).mean())


def test_one_group_under_the_floor_blocks_a_pass_but_not_a_clear_fail(cell):
    data, spec, audit = cell
    unfair, fair = _target(spec, UNFAIR_LEVELS), _target(spec, {})
    assert _truth(data, spec, unfair) > 0.7 and _truth(data, spec, fair) == 0.0

    clear = check_one_attribute(fair, audit, policy=_policy(0.5), feature_spec=spec)
    assert clear.decision == "passed"                        # every bound over the floor: judged as usual
    # a floor over every group's bound: the audit is cross-fitted (every row held out once), still under it
    every = check_one_attribute(unfair, audit, policy=_policy(0.99), feature_spec=spec)
    assert "cross_fit" in every.provenance and every.decision == "failed"
    lowers = sorted(r["lower"] for r in every.aux_intervals)
    assert len(lowers) == 3 and lowers[0] < lowers[1] < 0.99
    floor = (lowers[0] + lowers[1]) / 2                       # exactly one group's bound under it

    for target, want in ((unfair, "failed"), (fair, "undecided")):
        result = check_one_attribute(target, audit, policy=_policy(floor), feature_spec=spec)
        rules = {r["rule"]: r for r in result.rules}
        weak = [r["what"] for r in result.aux_intervals if r["lower"] < floor]
        assert rules["min_aux_quality"]["status"] == "not met" and len(weak) == 1, result.aux_intervals
        assert all(w in rules["min_aux_quality"]["detail"] for w in weak)
        assert result.decision == want, rules
    assert rules["max_flagged_fraction"]["status"] == "not judged"           # the fair one: 0 flagged, not passed
