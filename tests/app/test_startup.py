"""Commands that need no flow engine never import it: `spec`, `check`, `report` and `history` run in a
fresh interpreter, in process through the CLI's ``main``, and Prefect must not be in ``sys.modules`` after
them (importing Prefect alone costs seconds; starting its temporary API server ~10 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path[:0] = [{root!r}, {tests!r}]
    from pathlib import Path
    import _support
    from faux_checks.inputs.models import save_torchscript
    from faux_checks_app.cli import main

    d = Path({tmp!r})
    _support.make_data(400).to_csv(d / "data.csv", index=False)
    save_torchscript(_support.linear(_support.FAIR), d / "fair.pt")
    (d / "policy.toml").write_text(_support.POLICY)
    codes = {{}}
    codes["spec"] = main(["spec", "--data", str(d / "data.csv"), "--out", str(d / "spec.json"), "--exclude", "sex,y"])
    codes["check"] = main(["check", "--model", str(d / "fair.pt"), "--data", str(d / "data.csv"), "--protected", "sex",
                           "--label", "y", "--policy", str(d / "policy.toml"), "--report-dir", str(d / "report")])
    codes["report"] = main(["report", str(d / "report" / "report.json"), "--out", str(d / "again.html")])
    codes["history"] = main(["history", "nobody", "--tracking-uri", "sqlite:///" + str(d / "mlflow.db")])
    heavy = sorted({{m.split(".")[0] for m in sys.modules}} & {{"prefect", "great_expectations", "dask", "distributed"}})
    print(json.dumps({{"codes": codes, "heavy": heavy}}))
""")


@pytest.mark.slow
def test_spec_check_report_and_history_never_import_prefect(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = SCRIPT.format(root=str(ROOT), tests=str(ROOT / "tests"), tmp=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # the fair model passes and so does its report; `history` of a model the registry lacks reads the registry
    # (MLflow) and says so: exit 2
    assert out["codes"] == {"spec": 0, "check": 0, "report": 0, "history": 2}, proc.stderr[-1500:]
    assert "no registered model named 'nobody'" in proc.stderr
    assert out["heavy"] == []                                          # no Prefect, GX or Dask was imported
    assert (tmp_path / "again.html").stat().st_size > 1000
    assert '"f0"' in (tmp_path / "spec.json").read_text()
