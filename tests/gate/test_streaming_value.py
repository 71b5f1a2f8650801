"""A value target (``target_output = "value"``, ``[faux] unit = "EUR"``) scored by the stream equals the in-memory
check on the same rows: the same scores in EUR, flagged fraction and decision; the summary states δ in EUR."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from faux_checks.gate.decision import summary_line
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.gate.policy import Policy
from faux_checks.gate.stream.run import score_stream
from faux_checks.inputs.tabular import FeatureSpec

N = 1200
DELTA = 200.0


def _data(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], N).astype(object)
    df = pd.DataFrame(rng.normal(size=(N, 3)), columns=["f0", "f1", "f2"])
    df["proxy"] = (sex == "M") * 2.0 + rng.normal(scale=0.5, size=N)
    df["sex"] = sex
    return df


class Limit(torch.nn.Module):
    """A credit limit in EUR: 1000 × a small tanh network of the encoded features (no sigmoid)."""

    def __init__(self, d: int):
        super().__init__()
        torch.manual_seed(1)
        self.net = torch.nn.Sequential(torch.nn.Linear(d, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))

    def forward(self, x):
        return 1000.0 * self.net(x)


def test_stream_of_a_value_target_equals_the_in_memory_check_and_states_its_unit(tmp_path):
    df = _data()
    df.to_parquet(tmp_path / "data.parquet", row_group_size=300)         # 4 row groups, chunks of 256 rows
    spec = FeatureSpec.fit(df, ["f0", "f1", "f2", "proxy"], name="value-stream")
    target = Limit(spec.n_features)
    policy = Policy.model_validate({
        "protected": "sex", "target_output": "value", "min_aux_quality": 0.6,
        "faux": {"delta": DELTA, "unit": "EUR", "max_flagged_fraction": 0.05},
        "aux": {"epochs": 4, "max_train_rows": 5000, "cross_fit_folds": 0}, "decision": {"min_group_rows": 20}})
    summary = score_stream(target, tmp_path / "data.parquet", policy=policy, feature_spec=spec, chunk_rows=256,
                           out_path=tmp_path / "s.parquet")["sex"]
    result = check_one_attribute(target, df, policy=policy, feature_spec=spec)

    scores = pd.read_parquet(tmp_path / "s.parquet")
    np.testing.assert_allclose(scores["lic_score"], result.scores, rtol=1e-12, atol=0)   # |Δŷ| in EUR, row by row
    assert 0.0 < result.flagged_fraction < 1.0                  # δ = 200 EUR splits the rows: the comparison is not vacuous
    assert summary.n_flagged == int((scores["lic_score"] > DELTA).sum()) == int(result.flagged().sum())
    assert summary.flagged_fraction == result.flagged_fraction
    assert summary.decision == result.decision == "failed"            # about half the rows move by > 200 EUR > 5%
    assert summary.provenance["unit"] == result.provenance["unit"] == "EUR"
    assert summary.provenance["target_output"] == "value"
    assert summary_line(summary) == summary_line(result)
    assert summary_line(summary).endswith(f"at δ=200 EUR, n={N:,}")


@pytest.mark.slow        # the stream and the in-memory check on 1,200 rows (aux training twice): 10-30 s
def test_the_stream_leaves_a_cutoff_policy_undecided_and_the_in_memory_check_reads_it(tmp_path):
    """The stream does not read who crosses a cut-off: a policy with one is undecided there (rule cutoff_crossing not
    computed), never passed, on a target the δ reading passes; the in-memory check reads and decides it."""
    df = _data()
    df.to_parquet(tmp_path / "data.parquet", row_group_size=600)
    spec = FeatureSpec.fit(df, ["f0", "f1", "f2", "proxy"], name="value-stream")
    target = Limit(spec.n_features)
    policy = Policy.model_validate({
        "protected": "sex", "target_output": "value", "min_aux_quality": 0.6,
        "faux": {"delta": 1e6, "unit": "EUR", "max_flagged_fraction": 0.05, "cutoff": 0.0, "cutoff_side": "above"},
        "aux": {"epochs": 4, "max_train_rows": 5000, "cross_fit_folds": 0}, "decision": {"min_group_rows": 20}})
    summary = score_stream(target, tmp_path / "data.parquet", policy=policy, feature_spec=spec, chunk_rows=600,
                           out_path=tmp_path / "s.parquet")["sex"]
    rules = {r["rule"]: r["status"] for r in summary.rules}
    assert rules["max_flagged_fraction"] == "ok" and rules["cutoff_crossing"] == "not computed"   # δ = 10⁶ EUR
    assert summary.decision == "undecided"
    result = check_one_attribute(target, df, policy=policy, feature_spec=spec)
    status = {r["rule"]: r["status"] for r in result.rules}["cutoff_crossing"]
    assert status in ("ok", "exceeded") and result.outcome["cutoff"]["n"] == N
