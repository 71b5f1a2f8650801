"""Tests of the MLflow registry adapter on a temporary sqlite store.

A fresh MLflow sqlite database costs ~10 s to create (schema migrations), so one empty database
is created per session and copied for each test: every test has its own store.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import sqlite3
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ["DO_NOT_TRACK"] = "true"
os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"

from faux_checks.registry import client as registry_client  # noqa: E402
from faux_checks.errors import InputError, UndecidableError  # noqa: E402
from faux_checks.inputs.models import load_model, model_sha256  # noqa: E402
from faux_checks.registry import Registry, default_tracking_uri  # noqa: E402

NAME = "credit-scorer"


@pytest.fixture(autouse=True)
def _quiet_env(monkeypatch, tmp_path):
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("DO_NOT_TRACK", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
    # run in an empty directory: MLflow falls back to ./mlflow.db, ./mlruns when a URI is lost
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    yield
    assert sorted(p.name for p in cwd.iterdir()) == [], "MLflow wrote to the working directory"


@pytest.fixture(scope="session")
def empty_db(tmp_path_factory) -> Path:
    """An MLflow sqlite database with the schema created and nothing in it.

    Built in RAM (/dev/shm) when available: the schema migrations commit many times and take
    ~7 s on disk against ~2 s in RAM.
    """
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        folder = Path(tempfile.mkdtemp(prefix="faux-checks-mlflow-", dir=shm))
    else:
        folder = tmp_path_factory.mktemp("template")
    path = folder / "mlflow.db"
    Registry(f"sqlite:///{path}").client.search_registered_models()
    template = tmp_path_factory.mktemp("template") / "mlflow.db"
    shutil.copy(path, template)
    if folder.parent == shm:
        shutil.rmtree(folder)
    return template


@pytest.fixture
def reg(tmp_path, empty_db) -> Registry:
    shutil.copy(empty_db, tmp_path / "mlflow.db")
    return Registry(f"sqlite:///{tmp_path / 'mlflow.db'}")


def _scripted_linear(seed: int, path: Path) -> torch.jit.ScriptModule:
    torch.manual_seed(seed)
    model = torch.jit.script(torch.nn.Linear(4, 1))
    torch.jit.save(model, str(path))
    return model


@pytest.fixture
def models(tmp_path):
    """Two TorchScript models (v1 with a feature spec, v2 without) and the spec file."""
    src = tmp_path / "src"
    src.mkdir()
    m1 = _scripted_linear(0, src / "model_v1.pt")
    m2 = _scripted_linear(1, src / "model_v2.pt")
    spec = src / "spec.json"
    spec.write_text(json.dumps({"schema_version": 1, "name": "credit", "columns": []}))
    return {"m1": m1, "m2": m2, "p1": src / "model_v1.pt", "p2": src / "model_v2.pt", "spec": spec}


@pytest.fixture
def two_versions(reg, models):
    v1 = reg.register_version(NAME, models["p1"], models["spec"], description="first", tags={"team": "risk"})
    v2 = reg.register_version(NAME, models["p2"])
    return v1, v2


def _report_dir(root: Path) -> Path:
    report = root / "report"
    (report / "plots").mkdir(parents=True)
    (report / "report.json").write_text('{"decision": "passed"}')
    (report / "report.html").write_text("<html>ok</html>")
    (report / "plots" / "lic.png").write_bytes(b"\x89PNG fake")
    return report


# ----------------------------------------------------------------------------- default URI
def test_default_tracking_uri_env_wins(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.internal:5000")
    assert default_tracking_uri() == "http://mlflow.internal:5000"


def test_default_tracking_uri_home(monkeypatch, tmp_path):
    home = tmp_path / "fc-home" / "nested"
    monkeypatch.setenv("FAUX_CHECKS_HOME", str(home))
    uri = default_tracking_uri()
    assert uri == f"sqlite:///{home.resolve() / 'mlflow.db'}"
    assert home.is_dir()


def test_missing_sqlite_directory_is_input_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        Registry(f"sqlite:///{tmp_path / 'nope' / 'mlflow.db'}")


def test_mlflow_imported_lazily():
    """No module-level import of mlflow in the registry package (it costs ~1.4 s at ``import faux_checks``)."""
    files = sorted(Path(registry_client.__file__).parent.glob("*.py"))
    assert len(files) >= 4
    for path in files:
        tree = ast.parse(path.read_text())
        top_level = []
        for node in tree.body:
            if isinstance(node, ast.Import):
                top_level += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                top_level.append(node.module or "")
        assert top_level and not [m for m in top_level if m.split(".")[0] == "mlflow"], path


# ----------------------------------------------------------------------------- registration
def test_register_two_versions_are_new(reg, models, two_versions, tmp_path):
    assert two_versions == ("1", "2")
    assert reg.new_versions(NAME) == ["1", "2"]
    mv1 = reg.client.get_model_version(NAME, "1")
    assert mv1.tags["model_sha256"] == model_sha256(models["p1"])
    assert mv1.tags["model_file"] == "model_v1.pt"
    assert mv1.tags["feature_spec_file"] == "spec.json"
    assert mv1.tags["team"] == "risk"
    assert mv1.description == "first"
    # artifacts next to the database, not in ./mlruns of the working directory
    assert mv1.source.startswith((tmp_path / "mlartifacts").as_uri())
    assert mv1.source.endswith("/artifacts/model")
    run = reg.client.get_run(mv1.run_id)
    assert reg.client.get_experiment(run.info.experiment_id).name == "faux-checks-models"
    assert run.info.status == "FINISHED"
    assert sorted(a.path for a in reg.client.list_artifacts(mv1.run_id, "model")) == [
        "model/model_v1.pt", "model/spec.json"
    ]
    mv2 = reg.client.get_model_version(NAME, "2")
    assert "feature_spec_file" not in mv2.tags
    assert mv2.tags["model_sha256"] == model_sha256(models["p2"]) != mv1.tags["model_sha256"]


def test_register_refuses_missing_file(reg, tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        reg.register_version(NAME, tmp_path / "absent.pt")


# ----------------------------------------------------------------------------- download
def test_download_round_trip(reg, models, two_versions, tmp_path):
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(3))
    model_path, spec_path = reg.download(NAME, "1", tmp_path / "dl1")
    assert model_path == tmp_path / "dl1" / "model_v1.pt"
    assert spec_path == tmp_path / "dl1" / "spec.json"
    assert spec_path.read_text() == models["spec"].read_text()
    loaded = load_model(model_path)
    with torch.no_grad():
        assert torch.equal(loaded(x), models["m1"](x))

    model_path2, spec_path2 = reg.download(NAME, 2, tmp_path / "dl2")
    assert spec_path2 is None
    with torch.no_grad():
        assert torch.equal(load_model(model_path2)(x), models["m2"](x))
        assert not torch.equal(load_model(model_path2)(x), models["m1"](x))


def test_download_never_overwrites(reg, two_versions, tmp_path):
    dst = tmp_path / "busy"
    dst.mkdir()
    (dst / "mine.txt").write_text("user data")
    with pytest.raises(InputError, match="not an empty directory"):
        reg.download(NAME, "1", dst)
    assert sorted(p.name for p in dst.iterdir()) == ["mine.txt"]
    assert (dst / "mine.txt").read_text() == "user data"


def test_download_detects_changed_artifact(reg, two_versions, tmp_path):
    source = reg.client.get_model_version(NAME, "2").source
    stored = Path(source.removeprefix("file://")) / "model_v2.pt"
    stored.write_bytes(stored.read_bytes() + b"tampered")
    with pytest.raises(InputError, match="sha256"):
        reg.download(NAME, "2", tmp_path / "dl")


# ----------------------------------------------------------------------------- decisions
def test_record_decision_tags(reg, two_versions):
    reg.record_decision(
        NAME, "1", decision="failed", flagged_fraction=0.072, delta=0.05, aux_quality=0.91,
        report_uri="file:///reports/v1", run_id="abc123", extra={"fairness_policy_sha256": "deadbeef"},
    )
    tags = reg.client.get_model_version(NAME, "1").tags
    assert tags["fairness_gate"] == "failed"
    assert float(tags["fairness_flagged_fraction"]) == 0.072
    assert float(tags["fairness_delta"]) == 0.05
    assert float(tags["fairness_aux_quality"]) == 0.91
    assert tags["fairness_report"] == "file:///reports/v1"
    assert tags["fairness_run_id"] == "abc123"
    assert tags["fairness_policy_sha256"] == "deadbeef"
    assert tags["fairness_checked_at"].endswith("+00:00")
    assert reg.new_versions(NAME) == ["2"]

    reg.record_decision(
        NAME, "2", decision="undecided", flagged_fraction=None, delta=0.05, aux_quality=None,
        report_uri="r", run_id="r2",
    )
    tags2 = reg.client.get_model_version(NAME, "2").tags
    assert tags2["fairness_gate"] == "undecided"
    assert tags2["fairness_aux_quality"] == ""
    assert reg.new_versions(NAME) == []


def test_record_decision_rejects_unknown_outcome(reg, two_versions):
    with pytest.raises(InputError, match="decision must be one of"):
        reg.record_decision(NAME, "1", decision="ok", flagged_fraction=0.0, delta=0.05,
                            aux_quality=0.9, report_uri="r", run_id="x")
    assert "fairness_gate" not in reg.client.get_model_version(NAME, "1").tags


def test_regate_after_version_left_running(reg, two_versions):
    reg.mark_running(NAME, "1")
    assert reg.client.get_model_version(NAME, "1").tags["fairness_gate"] == "running"
    # the gate was killed here: version 1 must still be picked up
    assert reg.new_versions(NAME) == ["1", "2"]
    with pytest.raises(UndecidableError, match="'running'"):
        reg.promote(NAME, "1")
    reg.mark_running(NAME, "1")
    reg.record_decision(NAME, "1", decision="passed", flagged_fraction=0.01, delta=0.05,
                        aux_quality=0.88, report_uri="r", run_id="x")
    assert reg.new_versions(NAME) == ["2"]


# ----------------------------------------------------------------------------- promotion
def test_promote_only_passed(reg, two_versions):
    assert reg.alias_version(NAME) is None
    with pytest.raises(UndecidableError, match="never gated"):
        reg.promote(NAME, "1")
    assert reg.alias_version(NAME) is None

    reg.record_decision(NAME, "1", decision="passed", flagged_fraction=0.01, delta=0.05,
                        aux_quality=0.9, report_uri="r1", run_id="x1")
    reg.record_decision(NAME, "2", decision="failed", flagged_fraction=0.2, delta=0.05,
                        aux_quality=0.9, report_uri="r2", run_id="x2")
    reg.promote(NAME, "1")
    assert reg.alias_version(NAME) == "1"
    with pytest.raises(UndecidableError, match="'failed'"):
        reg.promote(NAME, "2")
    assert reg.alias_version(NAME) == "1"  # unchanged
    assert reg.alias_version(NAME, "champion") is None
    reg.promote(NAME, "1", alias="champion")
    assert reg.alias_version(NAME, "champion") == "1"


def test_promote_rereads_registry(reg, two_versions):
    reg.record_decision(NAME, "2", decision="passed", flagged_fraction=0.0, delta=0.05,
                        aux_quality=0.9, report_uri="r", run_id="x")
    # someone overrides the decision in the registry after the gate ran
    reg.client.set_model_version_tag(NAME, "2", "fairness_gate", "failed")
    with pytest.raises(UndecidableError):
        reg.promote(NAME, "2")
    assert reg.alias_version(NAME) is None



def test_pending_promotion_stays_new_until_the_alias_is_set(reg, two_versions):
    """A gate killed between recording 'passed' and moving the alias leaves the version new; once the
    alias is on it (killed before 'done' was written) it is not gated again: re-marking it 'running'
    would leave the alias on a version whose gate tag is not 'passed'."""
    reg.record_decision(NAME, "1", decision="passed", flagged_fraction=0.0, delta=0.05, aux_quality=0.9,
                        report_uri="r", run_id="x", extra={"fairness_promotion": "pending"})
    assert reg.new_versions(NAME) == ["1", "2"]
    reg.client.set_registered_model_alias(NAME, "deployable", "1")      # alias set, 'done' never written
    assert reg.new_versions(NAME) == ["2"]
    reg.promote(NAME, "1")
    tags = reg.client.get_model_version(NAME, "1").tags
    assert tags["fairness_promotion"] == "done" and tags["fairness_promoted_at"].endswith("+00:00")
    assert reg.new_versions(NAME) == ["2"]

# ----------------------------------------------------------------------------- history
def test_history(reg, models, two_versions):
    reg.record_decision(NAME, "1", decision="passed", flagged_fraction=0.01, delta=0.05,
                        aux_quality=0.9, report_uri="r1", run_id="x1")
    reg.promote(NAME, "1")
    reg.mark_running(NAME, "2")
    rows = reg.history(NAME)
    assert [r["version"] for r in rows] == ["1", "2"]
    assert rows[0]["aliases"] == ["deployable"]
    assert rows[0]["fairness_gate"] == "passed"
    assert rows[0]["fairness_report"] == "r1"
    assert rows[0]["model_sha256"] == model_sha256(models["p1"])
    assert rows[1]["aliases"] == []
    assert rows[1]["fairness_gate"] == "running"
    assert "fairness_report" not in rows[1]
    assert rows[1]["created_at"].endswith("+00:00")
    assert all(not k.startswith("mlflow.") for r in rows for k in r)


# ----------------------------------------------------------------------------- audit run
def test_log_gate_run(reg, two_versions, tmp_path):
    report = _report_dir(tmp_path)
    run_id = reg.log_gate_run(
        NAME, "1", report_dir=report,
        metrics={"flagged_fraction": 0.072, "aux_quality": 0.91, "lic_ub": None},
        params={"delta": 0.05, "seed": 0, "testers": "faux"},
        tags={"decision": "failed"},
    )
    run = reg.client.get_run(run_id)
    assert reg.client.get_experiment(run.info.experiment_id).name == "faux-checks-gate"
    assert run.info.status == "FINISHED"
    assert run.data.metrics == {"flagged_fraction": 0.072, "aux_quality": 0.91}
    assert run.data.params == {"delta": "0.05", "seed": "0", "testers": "faux"}
    assert run.data.tags["decision"] == "failed"
    assert run.data.tags["faux_checks.model_name"] == NAME
    assert run.data.tags["faux_checks.model_version"] == "1"
    uri = reg.run_artifact_uri(run_id)
    assert uri.startswith((tmp_path / "mlartifacts").as_uri())
    stored = Path(uri.removeprefix("file://"))
    assert sorted(str(p.relative_to(stored)) for p in stored.rglob("*") if p.is_file()) == [
        "plots/lic.png", "report.html", "report.json"
    ]
    assert (stored / "report.json").read_text() == '{"decision": "passed"}'


def test_log_gate_run_rejects_bad_input(reg, two_versions, tmp_path):
    with pytest.raises(InputError, match="report directory"):
        reg.log_gate_run(NAME, "1", report_dir=tmp_path / "none", metrics={}, params={}, tags={})
    with pytest.raises(InputError, match="must be a number"):
        reg.log_gate_run(NAME, "1", report_dir=_report_dir(tmp_path), metrics={"x": "high"},
                         params={}, tags={})
    with pytest.raises(InputError, match="over MLflow's limit of 6,000"):
        reg.log_gate_run(NAME, "1", report_dir=tmp_path / "report", metrics={},
                         params={"policy": "x" * 6001}, tags={})
    with pytest.raises(InputError, match="no MLflow run"):
        reg.run_artifact_uri("0" * 32)


# ----------------------------------------------------------------------------- errors
def test_unknown_model_names_existing(reg, two_versions, tmp_path):
    for call in (
        lambda: reg.new_versions("credit-scorr"),
        lambda: reg.history("credit-scorr"),
        lambda: reg.alias_version("credit-scorr"),
        lambda: reg.download("credit-scorr", "1", tmp_path / "x"),
        lambda: reg.promote("credit-scorr", "1"),
    ):
        with pytest.raises(InputError, match=r"no registered model named 'credit-scorr'.*'credit-scorer'"):
            call()


def test_unknown_version_lists_versions(reg, two_versions):
    with pytest.raises(InputError, match=r"no version '7'; existing versions: \['1', '2'\]"):
        reg.mark_running(NAME, "7")


# ----------------------------------------------------------------------------- retries
def _locked_error() -> Exception:
    from mlflow.exceptions import MlflowException

    try:
        raise sqlite3.OperationalError("database is locked")
    except sqlite3.OperationalError as cause:
        try:
            raise MlflowException("(sqlite3.OperationalError) database is locked",
                                  error_code="TEMPORARILY_UNAVAILABLE") from cause
        except MlflowException as exc:
            return exc


def test_retry_on_sqlite_lock_only(monkeypatch):
    sleeps: list[float] = []
    monkeypatch.setattr(registry_client, "_sleep", sleeps.append)
    calls = {"n": 0}

    def flaky(x):
        calls["n"] += 1
        if calls["n"] < 3:
            raise _locked_error()
        return x * 2

    assert registry_client.with_retry(flaky, 21) == 42
    assert calls["n"] == 3
    assert sleeps == [0.1, 0.2]

    calls["n"] = 0

    def always_locked():
        calls["n"] += 1
        raise _locked_error()

    with pytest.raises(Exception, match="database is locked"):
        registry_client.with_retry(always_locked)
    assert calls["n"] == 5

    calls["n"] = 0

    def other_error():
        calls["n"] += 1
        raise sqlite3.OperationalError("no such table: registered_models")

    with pytest.raises(sqlite3.OperationalError):
        registry_client.with_retry(other_error)
    assert calls["n"] == 1

    calls["n"] = 0

    def input_error():
        calls["n"] += 1
        raise InputError("database is locked (but a user error)")

    with pytest.raises(InputError):
        registry_client.with_retry(input_error)
    assert calls["n"] == 1


def test_concurrent_registry_writers(reg, models):
    """Three writers on one sqlite file: every registration gets its own version number."""
    writers = [reg, Registry(reg.tracking_uri), Registry(reg.tracking_uri)]

    def register_three(writer):
        return [writer.register_version(NAME, models["p1"]) for _ in range(3)]

    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(register_three, writers))
    versions = sorted((v for vs in results for v in vs), key=int)
    assert versions == [str(i) for i in range(1, 10)]
    assert reg.new_versions(NAME) == versions


def test_a_regate_with_fewer_attributes_empties_the_other_attributes_tags(reg, two_versions):
    """Gate v1 with two protected attributes (sex, race), re-gate it with one (sex): every ``fairness_attr_race_*``
    tag (its record ``_uri`` tags included) is emptied; sex's are the new gate's; a single-attribute re-gate then
    empties them all, ``fairness_attributes`` too. The tags are the gate flow's own (faux_checks_flows.gate helpers)."""
    from faux_checks.registry.records import record_uri_tag, tag_value
    from faux_checks_flows.gate_record import attribute_tags, record_uris

    def _record_uri_tags(run_id, records):   # the record URI tags the flow writes
        return {record_uri_tag(name): tag_value(uri) for name, uri in record_uris(run_id, records).items()}

    def attribute(name, flagged, decision):
        return {"attribute": name, "key": name, "decision": decision, "flagged_fraction": flagged,
                "interval": {"lower": flagged / 2, "upper": flagged * 2}, "aux_quality": 0.9}

    check = {"provenance": {"policy": {"protected": "race"}}}
    records = {f"attr_{k}_scores": f"{k}/scores.parquet" for k in ("sex", "race")}
    two = {**_record_uri_tags("run1", records), **attribute_tags([attribute("sex", 0.01, "passed"),
                                                                   attribute("race", 0.3, "failed")], check)}
    reg.record_decision(NAME, "1", decision="failed", flagged_fraction=0.3, delta=0.05, aux_quality=0.9,
                        report_uri="r1", run_id="run1", extra=two)
    tags = reg.client.get_model_version(NAME, "1").tags
    assert tags["fairness_attr_race_decision"] == "failed" and tags["fairness_attr_race_scores_uri"] == \
        "runs:/run1/records/race/scores.parquet"
    race = sorted(k for k in tags if k.startswith("fairness_attr_race_"))
    assert race == ["fairness_attr_race_aux_quality", "fairness_attr_race_decision", "fairness_attr_race_flagged_fraction",
                    "fairness_attr_race_flagged_fraction_lower", "fairness_attr_race_flagged_fraction_upper",
                    "fairness_attr_race_scores_uri"]
    assert all(tags[k] for k in race) and tags["fairness_attributes"] == "sex,race"

    one = {**_record_uri_tags("run2", {"attr_sex_scores": "sex/scores.parquet"}),
           **attribute_tags([attribute("sex", 0.02, "passed")], {"provenance": {"policy": {"protected": "sex"}}})}
    reg.record_decision(NAME, "1", decision="passed", flagged_fraction=0.02, delta=0.05, aux_quality=0.9,
                        report_uri="r2", run_id="run2", extra=one)
    tags = reg.client.get_model_version(NAME, "1").tags
    assert {k: tags[k] for k in race} == dict.fromkeys(race, "")                # nothing of race's earlier gate left
    assert tags["fairness_attr_sex_decision"] == "passed" and float(tags["fairness_attr_sex_flagged_fraction"]) == 0.02
    assert tags["fairness_attr_sex_scores_uri"] == "runs:/run2/records/sex/scores.parquet"
    assert tags["fairness_attributes"] == "sex" and tags["fairness_deciding_attribute"] == "sex"

    reg.record_decision(NAME, "1", decision="passed", flagged_fraction=0.02, delta=0.05, aux_quality=0.9,
                        report_uri="r3", run_id="run3", extra=_record_uri_tags("run3", {"scores": "scores.parquet"}))
    tags = reg.client.get_model_version(NAME, "1").tags
    left = {k: v for k, v in tags.items() if k.startswith("fairness_attr") or k == "fairness_deciding_attribute"}
    assert left and set(left.values()) == {""}                                 # one protected column: none set
    assert tags["fairness_scores_uri"] == "runs:/run3/records/scores.parquet"
