"""`faux-checks spec`: fit a feature spec from a data file; refuses to overwrite; starts no integration."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from faux_checks import FeatureSpec
from faux_checks_app.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def data(tmp_path):
    frame = pd.DataFrame({"age": [20, 30, 40, 50, 60, 70], "job": ["a", "b", "a", "c", "a", "b"],
                          "code": [1, 2, 1, 2, 1, 3], "sex": ["F", "M", "F", "M", "F", "M"], "y": [0, 1, 0, 1, 1, 0]})
    path = tmp_path / "train.csv"
    frame.to_csv(path, index=False)
    return frame, path


def test_spec_command_writes_the_fitted_spec(data, tmp_path, capsys):
    frame, path = data
    out = tmp_path / "spec.json"
    code = main(["spec", "--data", str(path), "--categorical", "code", "--exclude", "y,sex", "--out", str(out),
                 "--min-frequency", "2"])
    assert code == 0
    spec = FeatureSpec.load(out)
    assert spec.name == "spec" and spec.source_columns == ["age", "job", "code"]
    assert spec.feature_names == ["age", "job=a", "job=b", "job=__infrequent__", "code=1", "code=2",
                                  "code=__infrequent__"]
    assert spec.columns[0].mean == 45.0 and spec.columns[0].std == pytest.approx(np.std([20, 30, 40, 50, 60, 70]))
    assert spec == FeatureSpec.fit(frame, ["age", "job", "code"], categorical=["code"], min_frequency=2, name="spec")
    printed = capsys.readouterr().out
    assert "3 source columns (1 numeric, 2 categorical) -> 7 features, fitted on 6 rows" in printed
    assert "not inputs: sex, y" in printed


def test_spec_command_never_overwrites_and_names_bad_columns(data, tmp_path, capsys):
    _, path = data
    out = tmp_path / "spec.json"
    out.write_text("keep me")
    assert main(["spec", "--data", str(path), "--out", str(out)]) == 2
    assert out.read_text() == "keep me"
    assert "exists already" in capsys.readouterr().err
    fresh = tmp_path / "other.json"
    assert main(["spec", "--data", str(path), "--exclude", "label", "--out", str(fresh)]) == 2
    assert "column(s) ['label'] are not in" in capsys.readouterr().err and not fresh.exists()
    assert main(["spec", "--data", str(path), "--categorical", "y", "--exclude", "y", "--out", str(fresh)]) == 2
    assert "both --categorical and --exclude" in capsys.readouterr().err and not fresh.exists()


def test_spec_command_imports_no_integration(data, tmp_path):
    _, path = data
    out = tmp_path / "spec.json"
    code = ("import json, sys; from faux_checks_app.cli import main; "
            f"rc = main(['spec', '--data', {str(path)!r}, '--exclude', 'y', '--out', {str(out)!r}]); "
            "print(json.dumps([rc, sorted({m.split('.')[0] for m in sys.modules})]))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    rc, loaded = json.loads(run.stdout.strip().splitlines()[-1])
    assert rc == 0 and out.exists()
    assert not set(loaded) & {"prefect", "mlflow", "great_expectations", "evidently", "faux_checks_flows", "faux_checks_gx"}, loaded


def test_commands_that_decide_nothing_report_an_error_not_could_not_decide(data, tmp_path, capsys):
    """spec, register and report make no decision: their errors name the command and the problem, exit 2,
    and never say "could not decide" (which check/gate/audit print when they fail closed)."""
    _, path = data
    assert main(["spec", "--data", str(path), "--exclude", "label", "--out", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("faux-checks spec: error: column(s) ['label'] are not in") and "could not decide" not in err
    assert main(["report", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("faux-checks report: error: ") and "missing" in err and "could not decide" not in err
    torch = pytest.importorskip("torch")
    torch.save(torch.nn.Linear(2, 1), tmp_path / "m.pt")                           # a pickle: register refuses it
    assert main(["register", "m", "--model", str(tmp_path / "m.pt"),
                 "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("faux-checks register: error: ") and "could not decide" not in err
    assert main(["check", "--model", str(tmp_path / "m.pt"), "--data", str(path), "--protected", "sex"]) == 2
    assert "faux-checks: could not decide: " in capsys.readouterr().err           # check decides: unchanged wording
