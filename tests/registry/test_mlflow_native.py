"""Versions logged with MLflow's own APIs: what the gate loads, what it refuses, and that
nothing is written to the working directory.

Recipes (docs/using.md, "Registering versions"): ``mlflow.pytorch.log_model`` with MLflow 3's default
``serialization_format="pt2"`` (a torch.export archive), a ``torch.jit.script``-ed model logged with
``serialization_format="pickle"`` (stored as a TorchScript archive), a TorchScript file logged into a
LoggedModel (``MlflowClient.log_model_artifact``); an ``nn.Module`` logged with ``"pickle"`` is refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _support import FEATURES, linear, make_data, write_policy

FAIR = [1.0, 0.5, 0.0, 0.0, 0.0]


def snapshot(folder: Path) -> dict[str, int]:
    """Every path under ``folder`` with its size (directories: -1)."""
    return {str(p.relative_to(folder)): (p.stat().st_size if p.is_file() else -1) for p in folder.rglob("*")}


def log_native_versions(root: Path, uri: str, name: str) -> dict[str, str]:
    """Register four versions of ``name`` through MLflow's own APIs; returns recipe -> version number.

    Runs with ``MLFLOW_TRACKING_URI`` = ``uri`` (the caller's monkeypatch) and an experiment whose
    artifacts live under ``root`` (MLflow's default would be ./mlruns).
    """
    import mlflow
    from mlflow import MlflowClient

    from faux_checks.inputs.tabular import FeatureSpec

    client = MlflowClient(uri)
    exp = client.create_experiment(f"team-{name}", artifact_location=(root / "team-artifacts").as_uri())
    frame = make_data(200)
    spec_dir = root / "spec"
    spec_dir.mkdir()
    FeatureSpec.fit(frame, FEATURES, name="team spec").save(spec_dir / "feature_spec.json")
    model = linear(FAIR)
    X = torch.randn(16, len(FEATURES)).numpy()
    out = {}
    with mlflow.start_run(experiment_id=exp):
        out["pt2"] = mlflow.pytorch.log_model(
            model, name="model", input_example=X, registered_model_name=name, pip_requirements=["torch"],
            extra_files=[str(spec_dir / "feature_spec.json")]).registered_model_version
        out["scripted"] = mlflow.pytorch.log_model(
            torch.jit.script(model), name="scripted", serialization_format="pickle", registered_model_name=name,
            pip_requirements=["torch"]).registered_model_version
        out["pickle"] = mlflow.pytorch.log_model(
            model, name="pickled", serialization_format="pickle", registered_model_name=name,
            pip_requirements=["torch"]).registered_model_version
    logged = client.create_logged_model(exp, name="torchscript-file")
    torch.jit.save(torch.jit.script(model), str(root / "model.pt"))
    client.log_model_artifact(logged.model_id, str(root / "model.pt"))
    client.finalize_logged_model(logged.model_id, "READY")
    out["logged_model"] = client.create_model_version(name, source=f"models:/{logged.model_id}",
                                                      model_id=logged.model_id).version
    return {k: str(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    root = tmp_path_factory.mktemp("native")
    uri = f"sqlite:///{root}/mlflow.db"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", uri)
        versions = log_native_versions(root, uri, "credit")
    return {"root": root, "uri": uri, "versions": versions}


def test_native_versions_load_without_unpickling_and_write_nothing_to_cwd(native, tmp_path, monkeypatch):
    from faux_checks.errors import UnsafeModelError
    from faux_checks.inputs.models import load_model, model_format
    from faux_checks.registry import Registry

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # MLflow's global default would be ./mlflow.db (a stray file)
    reg = Registry(native["uri"])
    v = native["versions"]

    model, spec = reg.download("credit", v["pt2"], tmp_path / "pt2")
    assert (model.relative_to(tmp_path / "pt2").as_posix(), model_format(model)) == ("data/model.pt2", "torch.export")
    assert spec is not None and spec.relative_to(tmp_path / "pt2").as_posix() == "extra_files/feature_spec.json"
    x = torch.randn(7, len(FEATURES))
    expected = linear(FAIR)(x)
    assert torch.allclose(load_model(model)(x), expected, atol=1e-6)

    for recipe, expected_name in (("scripted", "data/model.pth"), ("logged_model", "model.pt")):
        model, spec = reg.download("credit", v[recipe], tmp_path / recipe)
        assert model.relative_to(tmp_path / recipe).as_posix() == expected_name and spec is None
        assert model_format(model) == "torchscript"
        assert torch.allclose(load_model(model)(x), expected, atol=1e-6)

    with pytest.raises(UnsafeModelError) as err:
        reg.download("credit", v["pickle"], tmp_path / "pickle")
    message = str(err.value)
    assert f"version {v['pickle']} of 'credit'" in message and "serialization_format='pickle'" in message
    assert "nothing from it was executed" in message and "input_example" in message  # the fix: the pt2 recipe
    assert snapshot(cwd) == {}


@pytest.mark.slow
def test_gate_decides_native_version_refuses_pickle_and_leaves_cwd_alone(native, tmp_path, monkeypatch, harness):
    from faux_checks_flows.gate import gate

    from faux_checks.registry import Registry

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "keep.txt").write_text("user file")
    before = snapshot(cwd)
    monkeypatch.chdir(cwd)
    data = tmp_path / "audit.csv"
    make_data(800).to_csv(data, index=False)
    policy = write_policy(tmp_path / "policy.toml")
    v = native["versions"]
    state = gate(model_name="credit", data_path=str(data), policy_path=str(policy), tracking_uri=native["uri"],
                 report_root=str(tmp_path / "reports"), versions=[v["pt2"], v["pickle"]], return_state=True)
    assert state.is_failed()  # the pickled version is undecided
    rows = {r["version"]: r for r in Registry(native["uri"]).history("credit")}
    assert rows[v["pt2"]]["fairness_gate"] == "passed"
    assert float(rows[v["pt2"]]["fairness_flagged_fraction_upper"]) <= 0.1
    assert rows[v["pickle"]]["fairness_gate"] == "undecided"
    outcome = {o["version"]: o for o in state.data.result}
    reasons = " ".join(outcome[v["pickle"]]["reasons"])
    assert "UnsafeModelError" in reasons and "serialization_format='pickle'" in reasons
    assert f"--version {v['pickle']} --force" in reasons and "not gated again automatically" in reasons
    assert snapshot(cwd) == before


def test_register_command_checks_the_file_and_the_data(tmp_path, capfd):
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.inputs.tabular import FeatureSpec
    from faux_checks.registry import Registry
    from faux_checks_app.cli import main

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    frame = make_data(200)
    data = tmp_path / "sample.csv"
    frame.to_csv(data, index=False)
    FeatureSpec.fit(frame, FEATURES).save(tmp_path / "spec.json")
    save_torchscript(linear(FAIR), tmp_path / "model.pt")
    save_torchscript(linear([1.0, 0.0]), tmp_path / "narrow.pt")
    torch.save(linear(FAIR), tmp_path / "pickled.pt")

    assert main(["register", "credit", "--model", str(tmp_path / "model.pt"), "--feature-spec", str(tmp_path / "spec.json"),
                 "--data", str(data), "--protected", "sex", "--tracking-uri", uri]) == 0
    assert capfd.readouterr().out.strip() == "1"
    reg = Registry(uri)
    row = reg.history("credit")[0]
    assert row["model_file"] == "model.pt" and row["feature_spec_file"] == "spec.json"
    assert row["model_format"] == "torchscript" and row["registered_checked_on"] == data.resolve().as_uri()
    assert reg.new_versions("credit") == ["1"]

    assert main(["register", "credit", "--model", str(tmp_path / "pickled.pt"), "--tracking-uri", uri]) == 2
    assert "refused to load" in capfd.readouterr().err
    assert main(["register", "credit", "--model", str(tmp_path / "narrow.pt"), "--feature-spec", str(tmp_path / "spec.json"),
                 "--data", str(data), "--protected", "sex", "--tracking-uri", uri]) == 2
    assert "does not accept X with 5 encoded features" in capfd.readouterr().err
    assert [r["version"] for r in reg.history("credit")] == ["1"]  # neither refused file was registered
