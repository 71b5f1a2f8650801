"""Streaming and sharded fAux scores: chunked = whole, CSV = Parquet, input order, exact counts.

The Dask flow test starts a Prefect temporary server and a 2-worker LocalCluster (~25-40 s on a
loaded 2-core machine); every other test runs the streaming functions directly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from faux_checks import AuxiliaryModel, FAuxTester, FeatureSpec, InputError, TargetOutput
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.gate.policy import Policy, load_policy
from faux_checks.gate.stream.plan import prepare_scoring
from faux_checks.gate.stream.run import score_stream
from faux_checks.gate.stream.passes import key_pass, sample_pass, score_pass, stream_attributes
from faux_checks.gate.stream.sample import merge_samples, row_keys
from faux_checks.gate.stream.score import ScoresWriter, StreamCounts, merge_score_parts
from faux_checks.gate.stream.source import DataSource, csv_to_parquet

N = 2400



def _one(policy, source):
    """The policy's one protected attribute, as the passes take it."""
    return stream_attributes(policy, source.columns)

def make_data(n: int = N, seed: int = 0, missing: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], n).astype(object)
    df = pd.DataFrame(rng.normal(size=(n, 3)), columns=["f0", "f1", "f2"])
    df["proxy"] = (sex == "M") * 2.0 + rng.normal(scale=0.5, size=n)
    df["job"] = rng.choice(["a", "b", "c"], n)
    if missing:
        sex[rng.choice(n, missing, replace=False)] = None
    df["sex"] = sex
    return df


def make_spec(df: pd.DataFrame) -> FeatureSpec:
    return FeatureSpec.fit(df, ["f0", "f1", "f2", "proxy", "job"], name="stream-test")


def make_policy(variant: str = "faux", **changes) -> Policy:
    """The streaming mechanics are tested on eq. 9 (no reference to fit); the swap reading where it matters."""
    payload = {"protected": "sex", "target_output": "logit", "min_aux_quality": 0.6,
               "faux": {"variant": variant, "delta": 0.02, "max_flagged_fraction": 0.5, "max_undefined_fraction": 1.0},
               "aux": {"epochs": 4, "max_train_rows": 700}, "decision": {"min_group_rows": 20}}
    payload.update(changes)
    return Policy.model_validate(payload)


def make_target(d: int) -> torch.nn.Module:
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(d, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


class HalfFlatAux(torch.nn.Module):
    """Aux logit relu(proxy feature): zero gradient (undefined score) wherever the proxy is negative."""

    def forward(self, x):
        return torch.relu(x[:, 3:4]) * 3.0 - 1.0


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("stream")
    df = make_data()
    df.to_parquet(d / "data.parquet", row_group_size=500)  # 5 row groups, the last one short
    df.to_csv(d / "data.csv", index=False)
    spec = make_spec(df)
    return {"dir": d, "df": df, "spec": spec, "target": make_target(spec.n_features)}


def whole_scores(target, aux, X) -> np.ndarray:
    return FAuxTester(target, aux, output=TargetOutput(form="logit")).evaluate(X, evidence=False).scores


def test_row_keys_distinct_and_sample_independent_of_chunks_and_shards(files):
    keys = row_keys(np.arange(100_000), seed=3)
    assert len(np.unique(keys)) == 100_000
    assert not np.array_equal(keys, row_keys(np.arange(100_000), seed=4))
    source, policy, spec = DataSource.open(files["dir"] / "data.parquet"), make_policy(), files["spec"]
    base = sample_pass(source, _one(policy, source), feature_spec=spec, chunk_rows=10_000)["sex"]
    assert len(base.rows) == 700 and base.n_rows == N and np.all(np.diff(base.rows) > 0)
    small = sample_pass(source, _one(policy, source), feature_spec=spec, chunk_rows=128)["sex"]
    split = [(0, 2), (2, 3), (3, 5)]
    shards = merge_samples([sample_pass(source, _one(policy, source), feature_spec=spec, chunk_rows=128, row_groups=rg)["sex"]
                            for rg in split])
    # the flow's two rounds: keys of the protected column, then each shard's rows of the global sample
    keys = merge_samples([key_pass(source, _one(policy, source), chunk_rows=128, row_groups=rg)["sex"] for rg in split])
    parts = [sample_pass(source, _one(policy, source), feature_spec=spec, chunk_rows=128, row_groups=rg,
                         max_keys={"sex": keys.threshold})["sex"] for rg in split]
    assert sum(len(p.rows) for p in parts) == 700
    np.testing.assert_array_equal(keys.rows, base.rows)
    for other in (small, shards, merge_samples(parts)):
        np.testing.assert_array_equal(other.rows, base.rows)
        np.testing.assert_array_equal(other.X, base.X)
        assert other.level_counts == base.level_counts == files["df"]["sex"].value_counts().to_dict()
    np.testing.assert_array_equal(base.X, spec.encode(files["df"].iloc[base.rows]))


@pytest.mark.parametrize("name", ["data.parquet", "data.csv"])
def test_chunked_scores_equal_whole_data_in_input_order(files, name, tmp_path):
    df, spec, target = files["df"], files["spec"], files["target"]
    source_frame = pd.read_csv(files["dir"] / name) if name.endswith(".csv") else df
    X = spec.encode(source_frame)
    codes = (source_frame["sex"] == "M").to_numpy().astype(int)
    aux = AuxiliaryModel(epochs=4, seed=0).fit(X, codes, groups=("F", "M"))
    out = tmp_path / "scores.parquet"
    summary = score_stream(target, files["dir"] / name, policy=make_policy(), feature_spec=spec, aux_model=aux,
                           chunk_rows=300, out_path=out)["sex"]
    scores = pd.read_parquet(out)
    np.testing.assert_array_equal(scores["row"], np.arange(N))
    np.testing.assert_allclose(scores["lic_score"], whole_scores(target, aux, X), rtol=1e-12, atol=0)
    assert (scores["status"] == "scored").all()
    assert list(scores["group"]) == list(source_frame["sex"])
    assert summary.n_rows == summary.n_individuals == N
    assert summary.provenance["n_chunks"] == (10 if name.endswith(".parquet") else 8)  # 500-row groups: 300+200


@pytest.mark.parametrize("variant", ["faux", "swap"])
def test_stream_equals_check_one_attribute_when_every_row_trains_the_aux_model(files, tmp_path, variant):
    df, spec, target = files["df"], files["spec"], files["target"]
    policy = make_policy(variant, aux={"epochs": 4, "max_train_rows": 5000})
    summary = score_stream(target, files["dir"] / "data.parquet", policy=policy, feature_spec=spec, chunk_rows=256,
                           out_path=tmp_path / "s.csv")["sex"]
    result = check_one_attribute(target, df, policy=policy, feature_spec=spec)
    scores = pd.read_csv(tmp_path / "s.csv")
    np.testing.assert_allclose(scores["lic_score"], result.scores, rtol=1e-12, atol=0)
    assert summary.flagged_fraction == result.flagged_fraction
    assert summary.decision == result.decision
    assert summary.aux_quality == result.aux_quality
    pd.testing.assert_frame_equal(summary.by_group[["n", "flagged", "flagged_fraction", "undefined"]],
                                  result.by_group[["n", "flagged", "flagged_fraction", "undefined"]],
                                  check_dtype=False, check_index_type=False)


@pytest.mark.parametrize("variant", ["faux", "swap"])
def test_protected_column_as_target_input_matches_check_one_attribute(files, tmp_path, variant):
    """C09 through the stream: the direct term of a protected input is added as in check_one_attribute."""
    df = files["df"]
    spec = FeatureSpec.fit(df, ["f0", "f1", "proxy", "sex"], name="with-sex")
    target = make_target(spec.n_features)
    policy = make_policy(variant, aux={"epochs": 3, "max_train_rows": 5000})
    summary = score_stream(target, files["dir"] / "data.parquet", policy=policy, feature_spec=spec, chunk_rows=700,
                           out_path=tmp_path / "s.parquet")["sex"]
    result = check_one_attribute(target, df, policy=policy, feature_spec=spec)
    np.testing.assert_allclose(pd.read_parquet(tmp_path / "s.parquet")["lic_score"], result.scores, rtol=1e-12, atol=0)
    assert summary.n_flagged == int(result.flagged().sum())


def test_running_counts_exact_with_missing_protected_and_undefined_scores(tmp_path):
    df = make_data(missing=37)
    df.to_parquet(tmp_path / "d.parquet", row_group_size=400)
    spec = make_spec(df)
    target = make_target(spec.n_features)
    policy = make_policy(missing_protected="drop")
    summary = score_stream(target, tmp_path / "d.parquet", policy=policy, feature_spec=spec, aux_model=HalfFlatAux(),
                           chunk_rows=333, out_path=tmp_path / "s.parquet")["sex"]
    out = pd.read_parquet(tmp_path / "s.parquet")
    np.testing.assert_array_equal(out["row"], np.arange(N))
    missing = df["sex"].isna().to_numpy()
    assert (out["status"][missing] == "not_audited").all() and out["lic_score"][missing].isna().all()
    assert out["group"][missing].isna().all() and out["flagged"][missing].isna().all()
    audited = out[~missing]
    undefined = audited["status"] == "undefined"
    assert 0.2 < undefined.mean() < 0.8                     # the flat half of the aux model
    assert audited["lic_score"][undefined].isna().all() and audited["flagged"][undefined].isna().all()
    assert summary.n_missing_protected == 37 and summary.n_individuals == N - 37
    assert summary.n_undefined == int(undefined.sum())
    assert summary.n_flagged == int((audited["lic_score"] > policy.faux.delta).sum())
    assert summary.flagged_fraction == (summary.n_flagged + summary.n_undefined) / summary.n_individuals  # worst case
    assert summary.flagged_fraction_defined == summary.n_flagged / (summary.n_individuals - summary.n_undefined)
    expected = audited.groupby("group").agg(n=("row", "size"), flagged=("flagged", lambda s: int((s == True).sum())),  # noqa: E712
                                            undefined=("status", lambda s: int((s == "undefined").sum())),
                                            mean_score=("lic_score", "mean"))
    got = summary.by_group
    np.testing.assert_array_equal(got["n"], expected["n"])
    np.testing.assert_array_equal(got["flagged"], expected["flagged"])
    np.testing.assert_array_equal(got["undefined"], expected["undefined"])
    np.testing.assert_allclose(got["mean_score"], expected["mean_score"], rtol=1e-12)
    assert summary.decision == "undecided" or summary.aux_quality >= policy.min_aux_quality


def test_shard_functions_merge_to_the_single_process_result(files, tmp_path):
    from faux_checks_flows.shard import plan_shards

    source, policy, spec, target = (DataSource.open(files["dir"] / "data.parquet"), make_policy(), files["spec"],
                                    files["target"])
    shards = plan_shards(source.row_group_rows, 3)
    assert shards == [(0, 2), (2, 4), (4, 5)]
    sample = merge_samples([sample_pass(source, _one(policy, source), feature_spec=spec, chunk_rows=300, row_groups=rg)["sex"]
                            for rg in shards])
    plan, aux = prepare_scoring(target, sample, policy=policy, feature_spec=spec, chunk_rows=300)
    # the workers' copy of the aux model: TorchScript, saved and loaded by path
    torch.jit.save(aux.to_torchscript(), str(tmp_path / "aux.pt"))
    from faux_checks.inputs.models import load_model

    worker_aux = plan.wrap_aux(load_model(tmp_path / "aux.pt"))
    parts, counts = [], []
    for i, rg in enumerate(shards):
        writer = ScoresWriter(tmp_path / f"part-{i}.parquet")
        counts.append(score_pass(target, {"sex": worker_aux}, source, {"sex": plan}, _one(plan.policy, source), {"sex": writer}, row_groups=rg)["sex"])
        parts.append(writer.commit())
    merge_score_parts(parts, tmp_path / "merged.parquet")
    single_writer = ScoresWriter(tmp_path / "single.parquet")
    single = score_pass(target, {"sex": aux}, source, {"sex": plan}, _one(plan.policy, source), {"sex": single_writer})["sex"]
    single_writer.commit()
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "merged.parquet"),
                                  pd.read_parquet(tmp_path / "single.parquet"))
    merged = StreamCounts.merge(counts[::-1])              # any merge order gives the same numbers
    pd.testing.assert_frame_equal(merged.by_group(), single.by_group())
    assert (merged.n_rows, merged.n_flagged, merged.n_chunks) == (single.n_rows, single.n_flagged, single.n_chunks)


def test_plan_shards_covers_every_row_group_once():
    from faux_checks_flows.shard import plan_shards

    for sizes, k in [([10] * 7, 3), ([100, 1, 1, 1, 100], 4), ([5], 8), ([3, 3], 2)]:
        shards = plan_shards(sizes, k)
        assert shards[0][0] == 0 and shards[-1][1] == len(sizes)
        assert all(a[1] == b[0] for a, b in zip(shards, shards[1:], strict=False)) and all(s < e for s, e in shards)
        assert len(shards) <= min(k, len(sizes))
    assert plan_shards([10] * 8, 4) == [(0, 2), (2, 4), (4, 6), (6, 8)]


def test_bad_inputs_are_input_errors(files, tmp_path):
    target, spec = files["target"], files["spec"]
    existing = tmp_path / "exists.csv"
    existing.write_text("x\n")
    with pytest.raises(InputError, match="exists already"):
        score_stream(target, files["dir"] / "data.parquet", policy=make_policy(), feature_spec=spec, out_path=existing)["sex"]
    with pytest.raises(InputError, match="does not exist"):
        score_stream(target, tmp_path / "nope.parquet", policy=make_policy(), out_path=tmp_path / "o.csv")["sex"]
    make_data(missing=5).to_csv(tmp_path / "m.csv", index=False)
    with pytest.raises(InputError, match="5 missing values in 2,400 rows"):
        score_stream(target, tmp_path / "m.csv", policy=make_policy(), feature_spec=spec, out_path=tmp_path / "o.csv")["sex"]
    with pytest.raises(InputError, match=r"column\(s\) \['nope'\] not found"):
        score_stream(target, files["dir"] / "data.csv", policy=make_policy(protected="nope"), out_path=tmp_path / "o.csv")["sex"]
    assert not (tmp_path / "o.csv").exists() and not (tmp_path / "o.csv.partial").exists()
    bad = make_data(n=600)
    bad.loc[550, "f1"] = np.nan                              # a missing feature value in the last chunk
    bad.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(InputError, match="rows 512-599"):
        score_stream(target, tmp_path / "bad.csv", policy=make_policy(), feature_spec=spec, chunk_rows=256,
                     aux_model=HalfFlatAux(), out_path=tmp_path / "o.parquet")["sex"]
    assert not (tmp_path / "o.parquet").exists() and not (tmp_path / "o.parquet.partial").exists()
    mixed = pd.DataFrame({"a": [1.0] * 300 + ["x"] * 300})
    mixed.to_csv(tmp_path / "mixed.csv", index=False)
    with pytest.raises(InputError, match=r"\['a'\] change type in the chunk starting at row 300"):
        csv_to_parquet(DataSource.open(tmp_path / "mixed.csv"), tmp_path / "mixed.parquet", columns=["a"],
                       chunk_rows=300)


def test_policy_scale_section(tmp_path):
    base = (load_policy().model_dump(mode="json"))
    path = tmp_path / "p.toml"
    path.write_text('protected = "sex"\n[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.05\n'
                    '[scale]\nchunk_rows = 4096\nworkers = 3\nscheduler_address = "tcp://10.0.0.5:8786"\n')
    policy = load_policy(path)
    assert (policy.scale.chunk_rows, policy.scale.workers, policy.scale.threads_per_worker) == (4096, 3, 1)
    assert policy.scale.scheduler_address == "tcp://10.0.0.5:8786"
    assert base["scale"]["workers"] is None and base["scale"]["chunk_rows"] == 16_384
    path.write_text('protected = "sex"\n[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.05\n[scale]\nworker = 3\n')
    with pytest.raises(InputError, match="scale.worker"):
        load_policy(path)


def test_cli_score_large_in_process(files, tmp_path, capsys):
    from faux_checks_app.cli import main
    from faux_checks.inputs.models import save_torchscript

    model = save_torchscript(files["target"], tmp_path / "m.pt")
    spec = files["spec"].save(tmp_path / "spec.json")
    policy = tmp_path / "p.toml"
    policy.write_text('protected = "sex"\ntarget_output = "logit"\nmin_aux_quality = 0.6\n'
                      '[faux]\ndelta = 0.5\nmax_flagged_fraction = 0.05\n[aux]\nepochs = 3\n[scale]\nworkers = 0\n'
                      '[decision]\nmin_group_rows = 20\n')
    out = tmp_path / "scores.csv"
    code = main(["score-large", "--model", str(model), "--data", str(files["dir"] / "data.parquet"),
                 "--protected", "sex", "--feature-spec", str(spec), "--out", str(out), "--policy", str(policy),
                 "--chunk-rows", "1000"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert printed.startswith("passed: 0.00% (95% CI 0.00%–0.15%) flagged <= 5.0%")
    scores = pd.read_csv(out)
    assert len(scores) == N and list(scores.columns) == ["row", "lic_score", "flagged", "status", "group"]
    assert main(["score-large", "--model", str(model), "--data", str(files["dir"] / "data.parquet"),
                 "--protected", "sex", "--out", str(out), "--workers", "0"]) == 2   # never overwrites


@pytest.mark.slow
def test_dask_flow_two_workers_equals_single_process(files, tmp_path, harness):
    """CSV in (copied to Parquet, one row group per chunk), 2 Dask workers, same file as score_stream."""
    from faux_checks.inputs.models import load_model, save_torchscript
    from faux_checks_flows.score_large import run_score_sharded

    model = save_torchscript(files["target"], tmp_path / "m.pt")
    spec = files["spec"].save(tmp_path / "spec.json")
    policy = make_policy()
    single = score_stream(load_model(model), files["dir"] / "data.csv", policy=policy, feature_spec=files["spec"],
                          chunk_rows=256, out_path=tmp_path / "single.parquet")["sex"]
    sharded = run_score_sharded(model, files["dir"] / "data.csv", tmp_path / "sharded.parquet", policy=policy,
                                feature_spec_path=spec, workers=2, chunk_rows=256)["sex"]
    # a dataset folder, one part per shard written by the workers (no merge), read back in input order
    assert sorted(p.name for p in (tmp_path / "sharded.parquet").iterdir()) == [f"part-{i:05d}.parquet" for i in range(4)]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "sharded.parquet"),
                                  pd.read_parquet(tmp_path / "single.parquet"))
    pd.testing.assert_frame_equal(sharded.by_group, single.by_group)
    assert (sharded.decision, sharded.flagged_fraction, sharded.aux_quality) == (
        single.decision, single.flagged_fraction, single.aux_quality)
    assert sharded.interval == single.interval      # the 3 aux seeds, trained on workers, give the same spread
    assert len(sharded.provenance["shards"]) == 4 and sharded.provenance["worker_threads"] == 2
    # every worker that scored a shard reports its peak RSS (under load one worker can take all 4 shards,
    # so 1 or 2 of them; the count of workers is not asserted)
    peaks, timeline = sharded.provenance["worker_peak_rss_mb"], sharded.provenance["shard_timeline"]
    assert len(timeline) == 4 and set(peaks) == {r["pid"] for r in timeline} and 1 <= len(peaks) <= 2
    assert all(v > 0 for v in peaks.values())
    assert not any(p.name.startswith(".sharded") or p.name.endswith(".partial") for p in tmp_path.iterdir())
