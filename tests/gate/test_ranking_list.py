"""The gate's list of most affected individuals follows the per-person ranking score (method.ranking)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.gate.policy import Policy
from faux_checks.inputs.tabular import FeatureSpec


def _zone_case(n: int = 2000, seed: int = 0):
    """f0 independent of sex; a 4-level zone drawn by Gumbel-max from sex-dependent logits (the level a person
    would have in the other group is not identified, so each person's change is a mixture over configurations);
    a linear target logit 0.8·f0 + (1.2, 0.6, 0, −0.6)·zone − 1."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], n)
    logits = np.where((sex == "M")[:, None], [1.0, 0.5, 0.0, -0.5], [-0.5, 0.0, 0.5, 1.0])
    df = pd.DataFrame({"f0": rng.normal(size=n),
                       "zone": np.array(list("ABCD"))[np.argmax(logits + rng.gumbel(size=(n, 4)), axis=1)],
                       "sex": sex})
    spec = FeatureSpec.fit(df, ["f0", "zone"], name="zone")
    layer = torch.nn.Linear(5, 1)
    with torch.no_grad():
        layer.weight[:] = torch.tensor([[0.8, 1.2, 0.6, 0.0, -0.6]])
        layer.bias.fill_(-1.0)
    return df, spec, layer.eval()


def test_most_affected_are_ranked_by_flag_probability_then_expected_change():
    df, spec, target = _zone_case()
    policy = Policy.model_validate({"protected": "sex", "target_output": "logit", "min_aux_quality": 0.6, "seed": 0,
                                    "faux": {"delta": 0.1, "max_flagged_fraction": 0.05}, "aux": {"epochs": 20}})
    result = check_one_attribute(target, df, policy=policy, feature_spec=spec)
    p, s = np.asarray(result.flag_probability), np.asarray(result.scores)
    rows = np.asarray(result.row_index)
    listed = [int(np.flatnonzero(rows == e["row"])[0]) for e in result.top_flagged]
    assert len(listed) == 10 and ((p > 0) & (p < 1)).mean() > 0.5          # configurations mix for most people
    keys = [(p[i], s[i]) for i in listed]
    assert keys == sorted(keys, reverse=True)                              # lexicographic, largest first
    flagged = np.flatnonzero(p >= 0.5)
    assert p[listed[0]] == p[flagged].max()
    by_score = flagged[np.argsort(-s[flagged], kind="stable")][:10]
    assert set(by_score) != set(listed)                                    # the expected change alone orders otherwise
