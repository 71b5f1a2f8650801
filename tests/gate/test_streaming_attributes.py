"""The streaming scorer and ``score-large`` take several protected attributes.

Known truth from the proxy-injection generator of tests/gate/test_attributes.py: the target reads A's
linear proxy only, so on A a large share of rows moves by more than δ and on B none does. The
stream must fail on A, pass on B and fail overall, and equal the in-memory several-attribute check
on the same rows (every row trains each aux model here: n ≤ max_train_rows).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from faux_checks.errors import InputError
from faux_checks.gate.attributes import check_attributes, intersection_cells
from faux_checks.gate.policy import Policy
from faux_checks.gate.stream.columns import level_labels
from faux_checks.gate.stream.outcome import summarize
from faux_checks.gate.stream.passes import key_pass, prepare_attributes, sample_pass, score_pass, stream_attributes
from faux_checks.gate.stream.run import score_stream
from faux_checks.gate.stream.sample import merge_samples
from faux_checks.gate.stream.score import ScoresWriter, StreamCounts, merge_score_parts
from faux_checks.gate.stream.source import DataSource
from faux_checks.inputs.protected import encode_protected
from faux_checks.inputs.tabular import FeatureSpec

from test_attributes import COLUMNS, _frame, _generators, _model, _policy

N = 3000


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    d = tmp_path_factory.mktemp("stream_attrs")
    frame = _frame(*_generators(N))
    frame.to_parquet(d / "data.parquet", row_group_size=700)        # 5 row groups, the last one short
    spec = FeatureSpec.passthrough(frame, exclude=["A", "B"])
    assert spec.source_columns == COLUMNS
    return {"dir": d, "frame": frame, "spec": spec, "model": _model()}


@pytest.fixture(scope="module")
def both(case):
    """The stream and the in-memory layer on the same data and policy (A, B and A×B)."""
    # one aux split on both paths: the streaming scorer does not cross-fit, so the in-memory check is held to it
    policy = _policy(intersections=[["A", "B"]], decision={"aux_seeds": 1, "min_group_rows": 100},
                     aux={"epochs": 20, "cross_fit_folds": 0})
    out = case["dir"] / "scores.parquet"
    streamed = score_stream(case["model"], case["dir"] / "data.parquet", policy=policy, out_path=out,
                                       chunk_rows=400)
    memory = check_attributes(case["model"], case["frame"], policy=policy)
    return policy, streamed, memory


def test_the_stream_fails_on_the_attribute_the_target_uses_and_passes_on_the_other(both, case):
    _, streamed, _ = both
    a, b = streamed["A"], streamed["B"]
    assert a.decision == "failed" and a.interval.lower > 0.05, a.reasons
    assert b.decision == "passed" and b.interval.upper <= 0.05, b.reasons
    assert streamed.decision == "failed" and streamed.exit_code == 1
    statuses = {r["rule"]: r["status"] for r in streamed.rules}
    assert statuses["A/max_flagged_fraction"] == "exceeded" and statuses["B/max_flagged_fraction"] == "ok"
    assert streamed.reasons[0].startswith("A: flagged fraction")
    assert [s.attribute for s in streamed.sections] == ["A", "B", "A×B"]
    # one scores file per attribute, named with the attribute key as `check --scores-out` names them
    names = {k: Path(p).name for k, p in streamed.out_paths.items()}
    assert names == {"A": "scores.A.parquet", "B": "scores.B.parquet", "A×B": "scores.A_x_B.parquet"}
    for s in streamed.sections:
        scores = pd.read_parquet(s.summary.out_path)
        np.testing.assert_array_equal(scores["row"], np.arange(N))
        assert int(scores["flagged"].sum()) == s.summary.n_flagged
    payload = streamed.to_dict()
    assert [x["key"] for x in payload["attributes"]] == ["A", "B", "A_x_B"]
    assert payload["attributes"][0]["check"]["provenance"]["policy"]["protected"] == "A"


def test_the_stream_equals_the_in_memory_several_attribute_check(both, case):
    """Same rows, same aux models (every row trains them), same rules: the same decision and fractions."""
    policy, streamed, memory = both
    assert streamed.decision == memory.decision
    assert [r["rule"] for r in streamed.rules] == [r["rule"] for r in memory.rules]
    assert [r["status"] for r in streamed.rules] == [r["status"] for r in memory.rules]
    for s, m in zip(streamed.sections, memory.sections, strict=False):
        assert s.attribute == m.attribute
        assert s.summary.n_flagged == m.check.n_flagged, s.attribute
        assert s.summary.flagged_fraction == m.check.flagged_fraction, s.attribute
        assert s.summary.aux_quality == pytest.approx(m.check.aux_quality, rel=1e-12)
        np.testing.assert_allclose(pd.read_parquet(s.summary.out_path)["lic_score"], m.check.scores,
                                   rtol=1e-12, atol=0)
    assert streamed.sections[2].cells == memory.sections[2].cells      # every cell, absent ones at 0
    assert streamed.sections[2].cells == intersection_cells(case["frame"], ("A", "B"), policy)
    assert sum(c["rows"] for c in streamed.sections[2].cells) == N


def test_intersection_labels_are_the_in_memory_groups():
    values = pd.Series([1.0, 0.0, None, 2.0, 1.0])
    attr = encode_protected(values, name="x", missing="drop")
    labels = level_labels(values)
    assert labels.isna().tolist() == [False, False, True, False, False]
    assert labels.dropna().tolist() == list(np.asarray(attr.groups, dtype=object)[attr.values])
    for raw in (pd.Series(["b", "a", "b"]), pd.Series([True, False, True]), pd.Series(["u", "v"], dtype="category")):
        attr = encode_protected(raw, name="x")
        assert level_labels(raw).tolist() == list(np.asarray(attr.groups, dtype=object)[attr.values])


def test_one_attribute_is_a_gate_of_one_section(case, tmp_path):
    """`protected = "A"`: one section, its scores file at out_path itself, its decision, reasons and rules unprefixed."""
    single = Policy.model_validate({**_policy().model_dump(), "attributes": (), "protected": "A",
                                    "protected_kind": "binary"})
    layer = score_stream(case["model"], case["dir"] / "data.parquet", out_path=tmp_path / "layer.parquet",
                         policy=single, feature_spec=case["spec"], chunk_rows=400)
    only = layer["A"]
    assert [s.attribute for s in layer.sections] == ["A"]
    assert layer.out_paths == {"A": str(tmp_path / "layer.parquet")}
    assert (layer.decision, layer.reasons, layer.rules) == (only.decision, only.reasons, only.rules)  # unprefixed
    assert not any("/" in r["rule"] for r in layer.rules)
    assert len(pd.read_parquet(tmp_path / "layer.parquet")) == N
    with pytest.raises(InputError, match=r"aux_model gives one auxiliary model, but the policy checks A, B"):
        score_stream(case["model"], case["dir"] / "data.parquet", policy=_policy(), out_path=tmp_path / "x.parquet",
                     aux_model=object())
    assert not (tmp_path / "x.parquet").exists()


def test_each_attribute_keeps_its_own_audited_rows_and_sample(case, tmp_path):
    """B missing on 300 rows (missing_protected = "drop"): A audits every row, B the others; samples as alone."""
    frame = case["frame"].copy()
    rng = np.random.default_rng(3)
    gone = rng.choice(N, 300, replace=False)
    frame["B"] = frame["B"].astype(object)
    frame.loc[gone, "B"] = None
    frame.to_parquet(tmp_path / "holes.parquet", row_group_size=700)
    policy = _policy(missing_protected="drop", aux={"epochs": 20, "max_train_rows": 2000}, min_aux_quality=0.6)
    source = DataSource.open(tmp_path / "holes.parquet")
    attributes = stream_attributes(policy, source.columns)
    parts = sample_pass(source, attributes, feature_spec=case["spec"], chunk_rows=400)
    for a in attributes:
        alone = sample_pass(source, [a], feature_spec=case["spec"], chunk_rows=400)[a.name]
        np.testing.assert_array_equal(parts[a.name].rows, alone.rows)
        np.testing.assert_array_equal(parts[a.name].X, alone.X)
        assert (parts[a.name].n_rows, parts[a.name].n_missing) == (alone.n_rows, alone.n_missing)
    assert parts["A"].n_missing == 0 and parts["B"].n_missing == 300
    assert np.isin(gone, parts["A"].rows).any() and not np.isin(gone, parts["B"].rows).any()
    streamed = score_stream(case["model"], tmp_path / "holes.parquet", policy=policy,
                                       out_path=tmp_path / "s.csv", feature_spec=case["spec"], chunk_rows=400)
    assert (streamed["A"].n_individuals, streamed["B"].n_individuals) == (N, N - 300)
    assert streamed["B"].n_missing_protected == 300 and streamed["A"].n_missing_protected == 0
    b_scores = pd.read_csv(tmp_path / "s.B.csv")
    assert (b_scores.loc[gone, "status"] == "not_audited").all() and len(b_scores) == N
    assert streamed.decision == "failed", "\n".join(f"{r['rule']} {r['status']} {r['detail']}" for r in streamed.rules)


def test_shard_functions_merge_to_the_single_process_result(case, both, tmp_path):
    """Key pass and sample pass per shard, merged per attribute; score per shard; = the one-process run."""
    from faux_checks_flows.shard import plan_shards

    policy, streamed, _ = both
    source = DataSource.open(case["dir"] / "data.parquet")
    spec = FeatureSpec.passthrough(case["frame"], exclude=["A", "B"])
    attributes = stream_attributes(policy, source.columns)
    shards = plan_shards(source.row_group_rows, 3)
    keys = [key_pass(source, attributes, chunk_rows=400, row_groups=rg) for rg in shards]
    merged_keys = {a.name: merge_samples([k[a.name] for k in keys]) for a in attributes}
    max_keys = {name: k.threshold for name, k in merged_keys.items()}
    samples = [sample_pass(source, attributes, feature_spec=spec, chunk_rows=400, row_groups=rg,
                                      max_keys=max_keys) for rg in shards]
    sample = {a.name: merge_samples([s[a.name] for s in samples]) for a in attributes}
    prepared = prepare_attributes(case["model"], sample, attributes, feature_spec=spec, chunk_rows=400)
    plans, auxes = {n: p for n, (p, _) in prepared.items()}, {n: x for n, (_, x) in prepared.items()}
    parts, counts = {a.name: [] for a in attributes}, []
    for i, rg in enumerate(shards):
        writers = {a.name: ScoresWriter(tmp_path / f"part-{i}.{a.name}.parquet") for a in attributes}
        counts.append(score_pass(case["model"], auxes, source, plans, attributes, writers, row_groups=rg))
        for name, w in writers.items():
            parts[name].append(w.commit())
    paths = {}
    for a in attributes:
        paths[a.name] = merge_score_parts(parts[a.name], tmp_path / f"merged.{a.name}.parquet")
        pd.testing.assert_frame_equal(pd.read_parquet(paths[a.name]), pd.read_parquet(streamed[a.name].out_path))
    total = {a.name: StreamCounts.merge([c[a.name] for c in counts[::-1]]) for a in attributes}
    result = summarize(total, plans, attributes, source=source, out_paths=paths)
    assert (result.decision, result.rules) == (streamed.decision, streamed.rules)
    assert [s.cells for s in result.sections] == [s.cells for s in streamed.sections]


def test_bad_inputs_name_the_attribute(case, tmp_path):
    frame = case["frame"].copy()
    frame["B"] = frame["B"].astype(object)
    frame.loc[[5, 9], "B"] = None
    frame.to_parquet(tmp_path / "holes.parquet")
    with pytest.raises(InputError, match="protected attribute 'B': protected attribute 'B' has 2 missing values"):
        score_stream(case["model"], tmp_path / "holes.parquet", policy=_policy(),
                                out_path=tmp_path / "s.parquet")
    assert not list(tmp_path.glob("s.*"))                    # nothing that looks complete
    frame = case["frame"].copy()
    frame["A×B"] = 1
    frame.to_parquet(tmp_path / "clash.parquet")
    with pytest.raises(InputError, match="already holds a column named 'A×B'"):
        score_stream(case["model"], tmp_path / "clash.parquet",
                                policy=_policy(intersections=[["A", "B"]]), out_path=tmp_path / "t.parquet")
    (tmp_path / "u.B.parquet").write_text("mine")
    with pytest.raises(InputError, match="u.B.parquet exist already"):
        score_stream(case["model"], case["dir"] / "data.parquet", policy=_policy(),
                                out_path=tmp_path / "u.parquet")
    assert (tmp_path / "u.B.parquet").read_text() == "mine" and not (tmp_path / "u.A.parquet").exists()


def test_cli_score_large_with_two_attributes(case, tmp_path, capsys):
    from faux_checks.inputs.models import save_torchscript
    from faux_checks_app.cli import main

    model = save_torchscript(case["model"], tmp_path / "m.pt")
    policy = tmp_path / "p.toml"
    policy.write_text('target_output = "logit"\n[[attributes]]\ncolumn = "A"\nkind = "binary"\n'
                      '[[attributes]]\ncolumn = "B"\nkind = "multiclass"\n'
                      '[faux]\ndelta = 0.1\nmax_flagged_fraction = 0.05\n[aux]\nepochs = 20\n[scale]\nworkers = 0\n'
                      '[decision]\naux_seeds = 1\nmin_group_rows = 100\n')
    out = tmp_path / "scores.csv"
    code = main(["score-large", "--model", str(model), "--data", str(case["dir"] / "data.parquet"),
                 "--out", str(out), "--policy", str(policy), "--chunk-rows", "1000"])
    printed = capsys.readouterr().out
    assert code == 1, printed
    assert printed.startswith("failed over 2 protected attributes: A failed"), printed
    assert "  A: failed" in printed and "  B: passed" in printed
    assert not out.exists()
    for key in ("A", "B"):
        scores = pd.read_csv(tmp_path / f"scores.{key}.csv")
        assert len(scores) == N and list(scores.columns) == ["row", "lic_score", "flagged", "status", "group"]
    assert main(["score-large", "--model", str(model), "--data", str(case["dir"] / "data.parquet"),
                 "--out", str(out), "--policy", str(policy)]) == 2          # never overwrites


@pytest.mark.slow
def test_dask_flow_two_attributes_equals_single_process(case, both, tmp_path, harness):
    """flows/shard.py with two attributes and their intersection: the same files and decision as in one process."""
    from faux_checks.inputs.models import save_torchscript
    from faux_checks_flows.score_large import run_score_sharded

    policy, streamed, _ = both
    model = save_torchscript(case["model"], tmp_path / "m.pt")
    sharded = run_score_sharded(model, case["dir"] / "data.parquet", tmp_path / "sharded.parquet", policy=policy,
                                workers=2, chunk_rows=400)
    assert (sharded.decision, sharded.rules) == (streamed.decision, streamed.rules)
    for s in streamed.sections:
        key = s.key
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / f"sharded.{key}.parquet"),
                                      pd.read_parquet(s.summary.out_path))
        pd.testing.assert_frame_equal(sharded[s.attribute].by_group, s.summary.by_group)
        # each attribute's Parquet output is a dataset the workers wrote in place (no serial merge), as with one
        assert sorted(p.name for p in (tmp_path / f"sharded.{key}.parquet").iterdir()) == [
            f"part-{i:05d}.parquet" for i in range(4)]
    assert len(sharded.sections[0].summary.provenance["shards"]) == 4      # 2 worker threads x 2 shards each
    assert not any(p.name.startswith(".sharded") or p.name.endswith(".partial")
                   for p in tmp_path.iterdir())                             # work folder and partials removed
    csv = run_score_sharded(model, case["dir"] / "data.parquet", tmp_path / "sharded.csv", policy=policy,
                            workers=2, chunk_rows=400)                      # a CSV output: its parts merged
    assert (csv.decision, csv.rules) == (streamed.decision, streamed.rules)
    for s in streamed.sections:
        merged = pd.read_csv(tmp_path / f"sharded.{s.key}.csv")
        pd.testing.assert_frame_equal(merged, pd.read_parquet(tmp_path / f"sharded.{s.key}.parquet"),
                                      check_dtype=False)
    assert not any(p.name.startswith(".sharded") or p.name.endswith(".partial") for p in tmp_path.iterdir())
