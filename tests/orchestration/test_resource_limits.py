"""Resource bombs are refused or isolated.

The cases: a 4.5 KB LightGBM file with ``num_leaves=2000000000``, whose load, unguarded, aborts the process
(exit 134) on every run (in a gate it would leave v1 ``running`` and the next version ungated); a 2 MB zip bomb
named ``model.pt`` that unpacks to 2.6 GB (unchecked, it is loaded and can pass); a categorical of ~8,600 levels
(15 minutes at ~10 GB to encode); and a ``check`` that needs a time limit. Archives are refused from their
directory (size and ratio), tree files from their text (leaves, trees, depth), native loaders run first in a
memory- and time-limited child, wide categoricals are refused with the column and the count, and ``check
--deadline`` ends the check with exit 2.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from _support import FEATURES, make_data, write_policy
from faux_checks.errors import InputError
from faux_checks.inputs.limits import ModelLimits, check_archive, check_tree_model, set_model_limits
from faux_checks.inputs.models import load_model
from faux_checks.inputs.probe import probe_load

lgb = pytest.importorskip("lightgbm")


@pytest.fixture(autouse=True)
def default_limits():
    set_model_limits(ModelLimits())
    yield
    set_model_limits(ModelLimits())


@pytest.fixture(scope="module")
def lightgbm_files(tmp_path_factory):
    """A good LightGBM text model on the test data's 5 features, and the bomb: the same file with
    tree 0's ``num_leaves`` set to 2,000,000,000 (a few bytes more)."""
    d = tmp_path_factory.mktemp("lgb")
    data = make_data(400)
    booster = lgb.train({"objective": "binary", "num_leaves": 4, "verbose": -1, "seed": 0},
                        lgb.Dataset(data[FEATURES].to_numpy(), (data["proxy"] > 1).astype(int)), num_boost_round=3)
    good = d / "good.txt"
    booster.save_model(str(good))
    text = good.read_text()
    start = text.index("num_leaves=", text.index("Tree=0"))
    bomb = d / "bomb.txt"
    bomb.write_text(text[:start] + "num_leaves=2000000000" + text[text.index("\n", start):])
    return good, bomb


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, raw in members.items():
            zf.writestr(name, raw)
    return path


# ---------------------------------------------------------------------------- (b) archives
def test_a_zip_bomb_under_the_size_limit_is_refused_for_its_ratio(tmp_path):
    bomb = _zip(tmp_path / "model.pt", {"archive/code/__torch__.py": b"\0" * (40 << 20), "archive/constants.pkl": b"\0"})
    packed = bomb.stat().st_size
    assert packed < 100_000                                          # ~40 KB on disk, 40 MiB unpacked
    with pytest.raises(InputError) as info:
        load_model(bomb)
    ratio = (40 << 20) + 1
    assert str(info.value).startswith(f"refused to load {bomb}: its archive members unpack to {ratio:,} bytes from ")
    assert "over the limit of 200 times ([operations] max_compression_ratio)" in str(info.value)
    assert "largest member 'archive/code/__torch__.py': 41,943,040 bytes" in str(info.value)


def test_a_skops_zip_bomb_is_refused_before_skops_reads_it(tmp_path):
    bomb = _zip(tmp_path / "model.skops", {"schema.json": b"{}", "big.npy": b"\0" * (2 << 20)})
    with pytest.raises(InputError, match=r"unpack to 2,097,154 bytes, more than the limit of 1,048,576 bytes "
                                         r"\(\[operations\] max_model_bytes\)"):
        load_model(bomb, max_bytes=1 << 20)
    check_archive(bomb, ModelLimits())                               # under 16 MiB: no ratio refusal
    small = _zip(tmp_path / "ok.zip", {"a": b"\0" * (17 << 20)})
    check_archive(small, ModelLimits(max_compression_ratio=1e6))     # the ratio limit is the setting


# ---------------------------------------------------------------------------- (c) tree files
def test_the_issues_lightgbm_bomb_is_refused_from_its_text(lightgbm_files):
    good, bomb = lightgbm_files
    assert bomb.stat().st_size - good.stat().st_size < 20
    with pytest.raises(InputError) as info:
        load_model(bomb)
    assert str(info.value) == (f"refused to load {bomb}: tree 0 has num_leaves = 2,000,000,000, over the limit of "
                               "1,048,576 ([operations] max_leaves); a damaged or hostile model file (nothing was "
                               "allocated for it). Raise the setting only for a model you know is that large")
    with pytest.raises(InputError, match=r"it has more than 2 trees, over the limit of 2 \(\[operations\] max_trees\)"):
        check_tree_model(good, "lightgbm", ModelLimits(max_trees=2))
    check_tree_model(good, "lightgbm", ModelLimits(max_trees=3, max_leaves=4))   # 3 trees of 4 leaves: at the limits
    assert load_model(good).n_features == 5


def test_a_loader_that_aborts_is_isolated_in_the_probe_process(lightgbm_files):
    good, bomb = lightgbm_files
    set_model_limits(ModelLimits(max_leaves=1 << 31))                # past the text check: LightGBM aborts
    with pytest.raises(InputError) as info:
        load_model(bomb)
    assert str(info.value).startswith(f"refused to load {bomb}: the LightGBM loader was killed by SIGABRT in a probe "
                                      "process limited to 16,384 MiB and 120 s ([operations] probe_memory_mb, "
                                      "probe_timeout_s)")
    assert str(info.value).endswith("a damaged or hostile model file, not loaded by the gate")
    probe_load(good, "lightgbm")                                      # a good file passes the probe
    with pytest.raises(InputError, match="did not finish in a probe process limited to 16,384 MiB and 0.001 s"):
        probe_load(good, "lightgbm", limits=ModelLimits(probe_timeout_s=0.001))


@pytest.mark.slow
def test_a_load_past_the_memory_limit_dies_in_the_probe_not_in_the_gate(lightgbm_files, tmp_path):
    """50,000,000 leaves (past the text check when max_leaves allows it): LightGBM sizes its tree arrays from
    num_leaves (gigabytes), and under a 1 GiB address space the probe's load dies, not this process."""
    good, bomb = lightgbm_files
    wide = tmp_path / "wide.txt"
    wide.write_text(bomb.read_text().replace("num_leaves=2000000000", "num_leaves=50000000"))
    limits = ModelLimits(max_leaves=100_000_000, probe_memory_mb=1024)
    check_tree_model(wide, "lightgbm", limits)
    with pytest.raises(InputError, match=r"^refused to load .*wide.txt: the LightGBM loader (was killed by SIG\w+|ran out "
                                         r"of memory) in a probe process limited to 1,024 MiB and 120 s"):
        probe_load(wide, "lightgbm", limits=limits)
    probe_load(good, "lightgbm", limits=limits)                      # a good file loads under the same limit


def test_xgboost_json_trees_nodes_and_depth_are_bounded(tmp_path):
    xgb = pytest.importorskip("xgboost")
    data = make_data(300)
    label = (np.sin(3 * data["f0"]) + data["f1"] * data["f2"] > 0).astype(int)   # needs the full depth 3
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 3}, xgb.DMatrix(data[FEATURES], label), 4)
    path = tmp_path / "m.json"
    booster.save_model(str(path))
    trees = json.loads(path.read_text())["learner"]["gradient_booster"]["model"]["trees"]
    assert len(trees) == 4
    with pytest.raises(InputError, match=r"it has 4 trees, over the limit of 3 \(\[operations\] max_trees\)"):
        check_tree_model(path, "xgboost", ModelLimits(max_trees=3))
    with pytest.raises(InputError, match=r"tree 0 is 4 levels deep, over the limit of 3 \(\[operations\] max_tree_depth\)"):
        check_tree_model(path, "xgboost", ModelLimits(max_tree_depth=3))   # depth 3 splits + the leaves
    assert [int(t["tree_param"]["num_nodes"]) for t in trees] == [15] * 4   # full binary trees of depth 3
    with pytest.raises(InputError, match=r"tree 0 has 15 nodes, over the limit of 14 "):
        check_tree_model(path, "xgboost", ModelLimits(max_leaves=7))
    check_tree_model(path, "xgboost", ModelLimits(max_trees=4, max_tree_depth=4))
    assert load_model(path).n_features == 5


def test_xgboost_ubj_trees_nodes_and_depth_are_bounded_like_json(tmp_path):
    """UBJ: decoded by the bounded reader, it is the same document as the
    JSON file of the same booster, and the same limits refuse it with the same messages."""
    xgb = pytest.importorskip("xgboost")
    from faux_checks.inputs.limits import read_ubjson

    data = make_data(300)
    label = (np.sin(3 * data["f0"]) + data["f1"] * data["f2"] > 0).astype(int)
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 3}, xgb.DMatrix(data[FEATURES], label), 4)
    ubj, js = tmp_path / "m.ubj", tmp_path / "m.json"
    booster.save_model(str(ubj))
    booster.save_model(str(js))
    decoded = read_ubjson(ubj.read_bytes())
    reference = json.loads(js.read_text())["learner"]["gradient_booster"]["model"]["trees"]
    trees = decoded["learner"]["gradient_booster"]["model"]["trees"]
    assert [t["left_children"] for t in trees] == [t["left_children"] for t in reference]
    assert np.allclose(np.concatenate([t["split_conditions"] for t in trees]),
                       np.concatenate([t["split_conditions"] for t in reference]), rtol=1e-6)
    with pytest.raises(InputError, match=r"it has 4 trees, over the limit of 3 \(\[operations\] max_trees\)"):
        check_tree_model(ubj, "xgboost", ModelLimits(max_trees=3))
    with pytest.raises(InputError, match=r"tree 0 is 4 levels deep, over the limit of 3 "):
        check_tree_model(ubj, "xgboost", ModelLimits(max_tree_depth=3))
    with pytest.raises(InputError, match=r"tree 0 has 15 nodes, over the limit of 14 "):
        check_tree_model(ubj, "xgboost", ModelLimits(max_leaves=7))
    check_tree_model(ubj, "xgboost", ModelLimits(max_trees=4, max_tree_depth=4))
    # a hostile count: an int64 array of 2**40 elements in a 20-byte file allocates nothing and is refused
    bomb = b"{" + b"i\x05trees" + b"[$L#L" + (2**40).to_bytes(8, "big") + b"}"
    with pytest.raises(ValueError, match="past the"):
        read_ubjson(bomb)
    with pytest.raises(ValueError, match="deeper than 64"):
        read_ubjson(b"[" * 100)


# ---------------------------------------------------------------------------- (d) wide categoricals
def test_a_categorical_with_more_levels_than_the_limit_is_refused_with_the_column_and_count(tmp_path):
    from faux_checks.gate.policy import load_policy
    from faux_checks.gate.rows import prepare_audit
    from faux_checks.inputs.tabular import FeatureSpec

    data = make_data(1500)
    data["zip"] = [f"z{i}" for i in range(1200)] + ["z0"] * 300      # 1,200 levels
    spec = FeatureSpec.fit(data, ["f0", "f1", "zip"])
    policy = load_policy(write_policy(tmp_path / "p.toml"))
    with pytest.raises(InputError) as info:
        prepare_audit(data, policy=policy, feature_spec=spec)
    assert str(info.value).startswith("column 'zip' has 1,200 levels: more than the limit of 1,000 levels per "
                                      "categorical column ([operations] max_levels in the policy)")
    assert "FeatureSpec.fit(..., min_frequency=...)" in str(info.value)
    wider = load_policy(write_policy(tmp_path / "q.toml", "[operations]\nmax_levels = 1200\n"))
    assert prepare_audit(data, policy=wider, feature_spec=spec).X.shape == (1500, 2 + 1200)
    grouped = FeatureSpec.fit(data, ["f0", "f1", "zip"], min_frequency=2)   # rare levels to '__infrequent__'
    assert prepare_audit(data, policy=policy, feature_spec=grouped).X.shape == (1500, 2 + 2)
    assert policy.sha256() == wider.sha256()                                # an operations setting: same policy hash


# ---------------------------------------------------------------------------- (e) check --deadline
def test_check_deadline_ends_a_check_that_hangs_with_exit_2_and_an_undecided_report(tmp_path, monkeypatch):
    import time

    import faux_checks.gate.one_attribute as check_module
    from faux_checks.inputs.models import save_torchscript
    from faux_checks_app.cli import main

    from _support import FAIR, linear

    make_data(200).to_csv(tmp_path / "d.csv", index=False)
    model = save_torchscript(linear(FAIR), tmp_path / "m.pt")
    calls = []

    def hangs(*args, **kwargs):
        calls.append(1)
        time.sleep(120)

    monkeypatch.setattr(check_module, "check_one_attribute", hangs)
    monkeypatch.setattr("faux_checks.gate.attributes.check_one_attribute", hangs)   # the one check path
    code = main(["check", "--model", str(model), "--data", str(tmp_path / "d.csv"), "--policy",
                 str(write_policy(tmp_path / "p.toml")), "--report-dir", str(tmp_path / "r"), "--deadline", "1"])
    assert calls == [1] and code == 2
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["decision"] == "undecided"
    assert report["reasons"] == ["could not decide: Stop: the check's deadline of 1 s was reached"]


# ---------------------------------------------------------------------------- (a) through the gate
@pytest.mark.slow
def test_an_aborting_loader_makes_its_version_undecided_and_the_next_version_is_gated(tmp_path, harness,
                                                                                      lightgbm_files):
    from faux_checks.registry import Registry
    from faux_checks_flows.gate import gate

    good, bomb = lightgbm_files
    make_data(400).to_csv(tmp_path / "data.csv", index=False)
    policy = write_policy(tmp_path / "policy.toml", "[operations]\nmax_leaves = 2147483648\n")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    registry = Registry(uri)
    v1 = registry.register_version("bombs", bomb)
    v2 = registry.register_version("bombs", good)
    state = gate(model_name="bombs", data_path=str(tmp_path / "data.csv"), policy_path=str(policy), tracking_uri=uri,
                 report_root=str(tmp_path / "reports"), return_state=True)
    outcomes = {o["version"]: o for o in getattr(state.data, "result", state.data)}
    assert outcomes[v1]["decision"] == "undecided"
    assert "the LightGBM loader was killed by SIGABRT in a probe process" in outcomes[v1]["reasons"][0]
    assert outcomes[v2]["decision"] in ("passed", "failed") and outcomes[v2]["flagged_fraction"] is not None
    tags = {r["version"]: r for r in registry.history("bombs")}
    assert tags[v1]["fairness_gate"] == "undecided" and tags[v2]["fairness_gate"] == outcomes[v2]["decision"]
    assert registry.new_versions("bombs") == []                        # nothing left running
