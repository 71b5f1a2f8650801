"""Numerically honest batch-independence probe: float64, relative tolerance, once per model per stream."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from faux_checks import AuxiliaryModel, FeatureSpec, InputError
from faux_checks.gate.policy import Policy
from faux_checks.gate.stream.run import score_stream
from faux_checks.method import batch_probe as probe_module
from faux_checks.method.batch_probe import probe_batch_independence
from faux_checks.method.gradients import check_batch_independence


class KernelNoise(torch.nn.Module):
    """Output x0 + 0.5·x1 computed as (1000 + ...) − 1000, with one rounding unit of the dtype's
    relative error on the 1000-sized intermediate whenever the batch has more than one row: what
    float32 BLAS kernels do (their summation order differs between batch sizes). In float32 the
    difference is 1000 · 2⁻²³ ≈ 1.2e-4, in float64 1000 · 2⁻⁵² ≈ 2e-13."""

    def __init__(self, d: int):
        super().__init__()
        self.linear = torch.nn.Linear(d, 1)
        with torch.no_grad():
            self.linear.weight.zero_()
            self.linear.weight[0, 0], self.linear.weight[0, 1] = 1.0, 0.5
            self.linear.bias.fill_(1000.0)

    def forward(self, x):
        h = self.linear(x)                                                  # (b, 1), about 1000
        if x.shape[0] > 1:
            h = h * (1 + torch.finfo(x.dtype).eps)
        return h - 1000.0


class BatchCentred(torch.nn.Module):
    def forward(self, x):
        return x[:, :1] - x[:, :1].mean(dim=0)


def test_float32_rounding_is_not_batch_dependence():
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))
    model = KernelNoise(4)
    with torch.no_grad():                                   # a float32 comparison (atol 1e-6) fails on this model
        b, s = model(x), torch.cat([model(x[i:i + 1]) for i in range(8)])
    assert not torch.allclose(b, s, rtol=1e-4, atol=1e-6)
    assert 5e-5 < float((b - s).abs().max()) < 3e-4
    worst = check_batch_independence(lambda t, net: net(t), x, model="target model", module=model)
    assert worst < 1e-11                                    # measured in float64
    assert model.linear.weight.dtype == torch.float32       # the user's model is untouched
    # without a float64 copy the tolerance is relative to the largest output (about 2 here)
    assert 5e-5 < check_batch_independence(model, x, model="target model") < 3e-4


def test_real_batch_dependence_names_the_model_and_the_difference():
    x = torch.arange(16, dtype=torch.float32).reshape(8, 2)
    with pytest.raises(InputError, match=r"the target model's output .* max difference 7 over 8 probe rows"):
        check_batch_independence(lambda t, net: net(t), x, model="target model", module=BatchCentred())
    aux = AuxiliaryModel.from_module(BatchCentred(), kind="binary", n_features=2)
    with pytest.raises(InputError, match=r"the auxiliary model's output .* max difference 7 over"):
        probe_batch_independence(torch.nn.Linear(2, 1), aux, x)


def _data(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    sex = rng.choice(["F", "M"], n)
    df = pd.DataFrame(rng.normal(size=(n, 3)), columns=["f0", "f1", "f2"])
    df["proxy"] = (sex == "M") * 2.0 + rng.normal(scale=0.5, size=n)
    df["sex"] = sex
    return df


@pytest.fixture(scope="module")
def stream_case(tmp_path_factory):
    d = tmp_path_factory.mktemp("probe")
    df = _data(3001)
    df.to_parquet(d / "data.parquet", row_group_size=1000)
    spec = FeatureSpec.fit(df, ["f0", "f1", "f2", "proxy"], name="probe")
    policy = Policy.model_validate({
        "protected": "sex", "target_output": "logit", "min_aux_quality": 0.6,
        "faux": {"variant": "faux", "delta": 0.02, "max_flagged_fraction": 0.9, "max_undefined_fraction": 1.0},
        "aux": {"epochs": 3, "max_train_rows": 600}, "decision": {"min_group_rows": 20, "aux_seeds": 1}})
    return d, spec, policy


FLAGGED: dict[int, int] = {}


@pytest.mark.parametrize("chunk_rows", [7, 333, 1000, 2999])
def test_clean_stream_passes_with_any_chunk_size_probing_each_model_once(stream_case, chunk_rows, tmp_path,
                                                                         monkeypatch):
    d, spec, policy = stream_case
    calls = []
    real = probe_module.check_batch_independence
    monkeypatch.setattr(probe_module, "check_batch_independence",
                        lambda *a, **k: calls.append(k["model"]) or real(*a, **k))
    summary = score_stream(KernelNoise(spec.n_features), d / "data.parquet", policy=policy, feature_spec=spec,
                           chunk_rows=chunk_rows, out_path=tmp_path / "scores.parquet")["sex"]
    assert summary.n_rows == summary.n_individuals == 3001
    assert summary.decision == "passed"
    FLAGGED[chunk_rows] = summary.n_flagged                   # the same count whatever the chunk size
    assert len(set(FLAGGED.values())) == 1, FLAGGED
    assert calls == ["target model", "auxiliary model"]      # once per model, not once per chunk
    probe = summary.provenance["batch_probe"]
    assert probe["target"] < 1e-11 and probe["aux"] < 1e-9
    scores = pd.read_parquet(tmp_path / "scores.parquet")
    assert (scores["status"] == "scored").all()
    np.testing.assert_array_equal(scores["row"], np.arange(3001))
