"""The sharded flow's stages without a serial tail: the aux seeds apart, the output a dataset.

No Dask here: the stage functions run in this process; ``tests/gate/test_streaming.py`` runs the flow on 2 workers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from faux_checks import FeatureSpec, InputError
from faux_checks.gate.aux_cache import aux_cache_stats, clear_aux_cache
from faux_checks.gate.policy import Policy
from faux_checks.gate.stream.aux_seeds import extra_seed, extra_seed_count, prepare_primary, with_seeds
from faux_checks.gate.stream.output import ScoresDataset, is_dataset_output, read_scores, score_files
from faux_checks.gate.stream.plan import prepare_scoring
from faux_checks.gate.stream.passes import sample_pass, score_pass, stream_attributes
from faux_checks.gate.stream.score import ScoresWriter
from faux_checks.gate.stream.source import DataSource

N = 1500


def _one(policy, source):
    """The policy's one protected attribute, as the passes take it."""
    return stream_attributes(policy, source.columns)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    d = tmp_path_factory.mktemp("stages")
    rng = np.random.default_rng(0)
    sex = rng.choice(["F", "M"], N).astype(object)
    df = pd.DataFrame(rng.normal(size=(N, 3)), columns=["f0", "f1", "f2"])
    df["proxy"] = (sex == "M") * 2.0 + rng.normal(scale=0.5, size=N)
    df["sex"] = sex
    df.to_parquet(d / "data.parquet", row_group_size=400)          # 4 row groups
    spec = FeatureSpec.fit(df, ["f0", "f1", "f2", "proxy"], name="stages")
    torch.manual_seed(1)
    target = torch.nn.Sequential(torch.nn.Linear(spec.n_features, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    return {"dir": d, "spec": spec, "target": target, "source": DataSource.open(d / "data.parquet")}


def _policy(variant: str, seeds: int = 3) -> Policy:
    return Policy.model_validate({
        "protected": "sex", "target_output": "logit", "min_aux_quality": 0.0,
        "faux": {"variant": variant, "delta": 0.02, "max_flagged_fraction": 0.5, "max_undefined_fraction": 1.0},
        "aux": {"epochs": 3, "max_train_rows": 600}, "decision": {"min_group_rows": 20, "aux_seeds": seeds}})


@pytest.mark.parametrize("variant", ["faux", "swap"])
def test_seeds_trained_apart_give_the_serial_plan(case, variant):
    """prepare_primary + extra_seed (in any order) + with_seeds == prepare_scoring: same seed spread, same plan."""
    policy, spec, target = _policy(variant), case["spec"], case["target"]
    sample = sample_pass(case["source"], _one(policy, case["source"]), feature_spec=spec, chunk_rows=200)["sex"]
    clear_aux_cache()                      # the serial plan below must train its seeds again, not reuse these
    plan, aux, own = prepare_primary(target, sample, policy=policy, feature_spec=spec, chunk_rows=200)
    assert plan.policy is policy and plan.aux["seeds"] is None and own is not None
    extra = {k: extra_seed(target, sample, policy=policy, feature_spec=spec, k=k) for k in (2, 1)}   # reversed
    assert aux_cache_stats()["trainings"] == 2                          # one training per extra seed
    parallel = with_seeds(plan, own, [extra[1], extra[2]])
    clear_aux_cache()
    serial, serial_aux = prepare_scoring(target, sample, policy=policy, feature_spec=spec, chunk_rows=200)
    assert aux_cache_stats()["trainings"] == 2
    assert parallel.aux["seeds"] == serial.aux["seeds"]
    assert parallel.aux["seeds"]["seeds"] == [policy.seed, policy.seed + 1, policy.seed + 2]
    assert parallel.aux["seeds"]["rows"] == 600 and len(set(parallel.aux["seeds"]["fractions"])) >= 1
    assert {k: v for k, v in parallel.aux.items() if k != "seeds"} == {k: v for k, v in serial.aux.items() if k != "seeds"}
    assert parallel.policy == serial.policy
    for a, b in zip(aux.net_.state_dict().values(), serial_aux.net_.state_dict().values(), strict=False):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_no_extra_seeds_with_one_seed_or_a_given_aux(case):
    policy = _policy("faux", seeds=1)
    assert extra_seed_count(policy) == 0 and extra_seed_count(_policy("faux"), aux_model=object()) == 0
    assert extra_seed_count(_policy("faux")) == 2
    sample = sample_pass(case["source"], _one(policy, case["source"]), feature_spec=case["spec"], chunk_rows=200)["sex"]
    plan, _, own = prepare_primary(case["target"], sample, policy=policy, feature_spec=case["spec"], chunk_rows=200)
    assert own is None and with_seeds(plan, own, []) is plan


def test_dataset_output_parts_read_back_in_input_order(case, tmp_path):
    """Part files written in place (no merge), renamed on commit; read as one table equal to one process's file."""
    policy, spec, target, source = _policy("faux", seeds=1), case["spec"], case["target"], case["source"]
    sample = sample_pass(source, _one(policy, source), feature_spec=spec, chunk_rows=200)["sex"]
    plan, aux = prepare_scoring(target, sample, policy=policy, feature_spec=spec, chunk_rows=200)
    out = tmp_path / "scores.parquet"
    assert is_dataset_output(out) and not is_dataset_output(tmp_path / "scores.csv")
    dataset = ScoresDataset(out)
    for i, rg in enumerate([(2, 4), (0, 2)][::-1]):                    # shards in order (0,2), (2,4)
        writer = ScoresWriter(dataset.part_path(i))
        score_pass(target, {"sex": aux}, source, {"sex": plan}, _one(plan.policy, source), {"sex": writer}, row_groups=rg)["sex"]
        writer.commit()
    assert not out.exists()                                             # nothing under the name before commit
    assert dataset.commit(2) == out and out.is_dir() and not dataset.partial.exists()
    assert [p.name for p in score_files(out)] == ["part-00000.parquet", "part-00001.parquet"]
    single = ScoresWriter(tmp_path / "single.parquet")
    score_pass(target, {"sex": aux}, source, {"sex": plan}, _one(plan.policy, source), {"sex": single})["sex"]
    single.commit()
    expected = pq.read_table(tmp_path / "single.parquet")
    assert read_scores(out).equals(expected)
    assert read_scores(tmp_path / "single.parquet").equals(expected)
    pd.testing.assert_frame_equal(pd.read_parquet(out), expected.to_pandas())     # pandas reads the folder too
    np.testing.assert_array_equal(read_scores(out, columns=["row"]).column("row").to_numpy(), np.arange(N))


def test_dataset_output_never_overwrites_and_a_missing_part_fails_the_commit(tmp_path):
    out = tmp_path / "s.parquet"
    dataset = ScoresDataset(out)
    with pytest.raises(InputError, match="another run writing it"):
        ScoresDataset(out)
    ScoresWriter(dataset.part_path(0)).commit()                         # one empty part of two
    with pytest.raises(InputError, match="1 of 2 shard part files are missing") as info:
        dataset.commit(2)
    assert "part-00001.parquet" in str(info.value) and not out.exists()
    dataset.abort()
    assert not dataset.partial.exists() and not out.exists()
    out.mkdir()
    with pytest.raises(InputError, match="exists already"):
        ScoresDataset(out)
