"""End to end: versions logged through MLflow's own API, gated, re-gated after a policy change,
audited with the gate's own auxiliary model; the run records and tags hold what they claim, and the
working directory is untouched.

Two protected attributes (``sex`` and ``region``, one ``[[attributes]]`` policy) through the gate and the
re-gate; the audit here checks one attribute (its own policy; tests/orchestration/test_audit_attributes_flow.py audits several), with the gate's auxiliary model of that attribute;
``--json`` output throughout.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from _support import POLICY, linear, make_data

pytestmark = pytest.mark.slow

FEATURES = ["f0", "f1", "f2", "f3", "proxy", "grade"]   # grade: categorical, one-hot (3 levels) in the spec
FAIR = [1.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
SLIGHT = [1.0, 0.0, 0.0, 0.0, 0.2, 0.0, 0.0, 0.0]     # proxy (standardised) moves the logit by ≈0.36: |Δp| < 0.1


def data(n: int, seed: int) -> pd.DataFrame:
    frame = make_data(n, seed)
    rng = np.random.default_rng(seed + 100)
    frame["grade"] = rng.choice(["a", "b", "c"], n)
    # a second protected attribute, tied to f2 (which no model uses): its aux model is good, no model depends on it
    frame["region"] = np.where(frame["f2"] + rng.normal(scale=0.3, size=n) > 0, "north", "south")
    return frame


def two_attributes(policy: str) -> str:
    """The one-attribute test policy as an ``[[attributes]]`` policy over sex and region."""
    return (policy.replace('protected = "sex"\n', "")
            + '\n[[attributes]]\ncolumn = "sex"\nkind = "binary"\n\n[[attributes]]\ncolumn = "region"\nkind = "binary"\n')


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def snapshot(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): (p.stat().st_size if p.is_file() else -1) for p in folder.rglob("*")}


def test_versions_logged_gated_regated_and_audited_end_to_end(tmp_path, monkeypatch, harness, capfd):
    import mlflow

    from faux_checks.gate.policy import load_policy
    from faux_checks.inputs.models import load_model
    from faux_checks.inputs.tabular import FeatureSpec
    from faux_checks.registry import Registry
    from faux_checks_app.cli import main

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    reference, current = data(800, 0), data(800, 1)   # the same distribution, other rows
    ref_path, cur_path = tmp_path / "reference.csv", tmp_path / "current.csv"
    reference.to_csv(ref_path, index=False)
    current.to_csv(cur_path, index=False)
    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    spec = FeatureSpec.fit(reference, FEATURES, categorical=["grade"], name="credit spec")
    spec.save(spec_dir / "feature_spec.json")
    strict, lenient, audit_policy = tmp_path / "strict.toml", tmp_path / "lenient.toml", tmp_path / "sex.toml"
    strict.write_text(two_attributes(POLICY))                                          # δ = 0.05: slight fails
    lenient.write_text(two_attributes(POLICY.replace("delta = 0.05", "delta = 0.2")))  # δ = 0.2: nobody that far
    audit_policy.write_text(POLICY.replace("delta = 0.05", "delta = 0.2"))            # this audit: one attribute

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "notes.txt").write_text("the user's own file")
    before = snapshot(cwd)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)

    # 1. two versions through MLflow's own API (a team's recipes; experiment artifacts outside cwd)
    exp = mlflow.MlflowClient(uri).create_experiment("team", artifact_location=(tmp_path / "team").as_uri())
    X = torch.tensor(spec.encode(reference)[:32], dtype=torch.float32).numpy()
    with mlflow.start_run(experiment_id=exp):
        v1 = mlflow.pytorch.log_model(linear(FAIR), name="model", input_example=X, registered_model_name="credit",
                                      pip_requirements=["torch"], extra_files=[str(spec_dir / "feature_spec.json")]
                                      ).registered_model_version
        v2 = mlflow.pytorch.log_model(torch.jit.script(linear(SLIGHT)), name="model", serialization_format="pickle",
                                      registered_model_name="credit", pip_requirements=["torch"],
                                      extra_files=[str(spec_dir / "feature_spec.json")]).registered_model_version
    v1, v2 = str(v1), str(v2)
    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # from here on only the gate's own URI may be used
    reg = Registry(uri)
    assert reg.new_versions("credit") == [v1, v2]

    # 2. gate both on two protected attributes under the strict policy
    common = ["--data", str(ref_path), "--tracking-uri", uri, "--report-dir", str(tmp_path / "reports"), "--json"]
    capfd.readouterr()
    assert main(["gate", "credit", "--policy", str(strict), *common]) == 1
    out = {o["model"]["version"]: o for o in json_lines(capfd.readouterr().out)}
    assert (out[v1]["decision"], out[v2]["decision"]) == ("passed", "failed")
    assert [a["protected"] for a in out[v2]["attributes"]] == ["sex", "region"]
    assert [a["decision"] for a in out[v2]["attributes"]] == ["failed", "passed"]   # sex fails, region passes
    assert reg.alias_version("credit", "deployable") == v1

    # 3. change the policy, re-gate v2 only
    assert main(["gate", "credit", "--policy", str(lenient), "--version", v2, "--force", *common]) == 0
    (regated,) = json_lines(capfd.readouterr().out)
    assert (regated["model"]["version"], regated["decision"], regated["promoted"]) == (v2, "passed", True)
    assert [a["delta"] for a in regated["attributes"]] == [0.2, 0.2]
    row = {r["version"]: r for r in reg.history("credit")}[v2]
    assert row["fairness_gate"] == "passed" and row["fairness_delta"] == "0.2"
    assert row["fairness_policy_sha256"] == load_policy(lenient).sha256()
    assert row["fairness_previous_gate"].startswith("failed at ") and "δ=0.05" in row["fairness_previous_gate"]
    assert row["fairness_attributes"] == "sex,region" and row["fairness_attr_sex_decision"] == "passed"
    assert reg.alias_version("credit", "deployable") == v2
    assert main(["history", "credit", "--tracking-uri", uri, "--json"]) == 0
    history = {o["model"]["version"]: o for o in json_lines(capfd.readouterr().out)}
    assert history[v2]["policy_sha256"] == load_policy(lenient).sha256()
    assert history[v1]["policy_sha256"] == load_policy(strict).sha256()   # v1 untouched
    assert history[v2]["previous_gate"] == row["fairness_previous_gate"]

    # 4. the gate run's records: every URI tag points at an artifact that exists and loads
    run_id = row["fairness_run_id"]
    assert row["fairness_report_uri"] == f"runs:/{run_id}/report.html"
    assert row["fairness_data_uri"] == ref_path.resolve().as_uri()
    tags = {"report": row["fairness_report_uri"], "policy": row["fairness_policy_uri"],
            "gx_result": row["fairness_gx_result_uri"]}
    for attr in ("sex", "region"):
        for key in ("scores", "by_group", "aux_model", "aux_model_info"):
            tags[f"{attr}/{key}"] = row[f"fairness_attr_{attr}_{key}_uri"]
    fetched = {}
    for key, target in tags.items():
        assert target.startswith(f"runs:/{run_id}/"), target
        fetched[key] = Path(mlflow.artifacts.download_artifacts(
            artifact_uri=target, dst_path=str(tmp_path / "dl" / key.replace("/", "-")), tracking_uri=uri))
    assert fetched["policy"].read_text() == lenient.read_text()
    gx_result = json.loads(fetched["gx_result"].read_text())
    faux_results = [r for r in gx_result["results"]
                    if r["expectation_config"]["type"] == "expect_faux_flagged_fraction_to_be_at_most"]
    assert gx_result["success"] is True and [r["expectation_config"]["kwargs"]["column"] for r in faux_results] == \
        ["sex", "region"]
    run = mlflow.MlflowClient(uri).get_run(run_id)
    for attr, groups in (("sex", ["F", "M"]), ("region", ["north", "south"])):
        scores = pd.read_parquet(fetched[f"{attr}/scores"])
        assert len(scores) == len(reference) and set(scores["status"]) == {"scored"}
        assert (scores["lic_score"] > 0.2).sum() == 0
        by_group = pd.read_csv(fetched[f"{attr}/by_group"])
        assert sorted(by_group["group"]) == groups and by_group["n"].sum() == len(reference)
        for g, fraction in by_group.set_index("group")["flagged_fraction"].items():
            assert run.data.metrics[f"attributes/{attr}/flagged_fraction.{g}"] == pytest.approx(fraction)
        info = json.loads(fetched[f"{attr}/aux_model_info"].read_text())
        assert (info["kind"], info["n_features"], info["protected"]) == ("binary", 8, attr)
        with torch.no_grad():
            assert load_model(fetched[f"{attr}/aux_model"])(torch.zeros(3, 8)).shape == (3, 1)
    assert pd.read_parquet(fetched["sex/scores"])["lic_score"].max() > 0.02   # v2 does lean on the sex proxy

    # 5. audit the deployed v2 (one attribute: sex) on a batch from the same distribution, reusing the gate's aux model
    assert main(["audit", "credit", "--data", str(cur_path), "--policy", str(audit_policy), "--tracking-uri", uri,
                 "--report-dir", str(tmp_path / "audits"), "--json"]) in (0, 1)
    (audited,) = json_lines(capfd.readouterr().out)
    (section,) = audited["attributes"]
    assert section["aux_model"]["source"] == "gate" and section["aux_model"]["run_id"] == run_id
    assert section["aux_model"]["swap_reference"] == "gate"           # both batches read with the gate's counterfactual
    assert section["ks_statistic"] < 0.1, section["ks_statistic"]      # same distribution: the data did not move
    report = json.loads(Path(audited["report"]).read_text())
    fairness = report["audit"]["fairness"]
    assert fairness["n_reference_scores"] == len(reference)             # the gate's recorded scores of sex
    assert any("the gate's (run" in r for r in report["reasons"])
    kinds = {c["column"]: c.get("kind") for c in report["audit"]["drift"]["columns"]}
    assert kinds["grade"] == "categorical" and kinds["proxy"] == "numeric"
    row = {r["version"]: r for r in reg.history("credit")}[v2]
    assert row["fairness_audit_data_path"] == str(cur_path.resolve())
    assert row["fairness_audit_data_uri"] == cur_path.resolve().as_uri()

    assert snapshot(cwd) == before   # nothing written to the working directory by any step
