"""The CI step of docs/ci.md, run locally: `scripts/ci-example.sh` on a small registry.

A fair version passes and an unfair one fails (exit 1, the JSON Lines name both); the shipped policy on data
without its columns is exit 3 with nothing recorded; a rerun with nothing new exits 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _support import FAIR, POLICY, UNFAIR, linear, make_data

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "ci-example.sh"



def test_readme_first_screen_keeps_the_two_commands_and_points_to_ci():
    readme = (ROOT / "README.md").read_text()
    first = readme[:readme.index("## What the demo prints")]
    assert "bash scripts/setup.sh && .venv/bin/faux-checks demo\n" in first
    ci = (ROOT / ".ci" / "run").read_text().split("# README test command:\n", 1)[1].splitlines()[0]
    assert ci.startswith("bash scripts/setup.sh && .venv/bin/python -m pytest") and ci + "\n" in first   # CI runs it
    assert "## Your own model in 10 lines" in first and "docs/ci.md" in first
    ten = first[first.index("## Your own model in 10 lines"):].split("```bash\n")[1].split("```")[0].splitlines()
    assert len(ten) == 10 and ten[0].startswith("printf 'protected")
    assert "| 3 |" in readme[readme.index("## Exit codes"):]   # the configuration code is in the table
    assert SCRIPT.is_file() and "scripts/ci-example.sh" in (ROOT / "docs" / "ci.md").read_text()


def _run(args, env, cwd):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=600)


@pytest.mark.slow
def test_ci_script_exit_codes_and_json(tmp_path):
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    reg = Registry(uri)
    save_torchscript(linear(FAIR), tmp_path / "fair.pt")
    save_torchscript(linear(UNFAIR), tmp_path / "unfair.pt")
    fair, unfair = reg.register_version("m", tmp_path / "fair.pt"), reg.register_version("m", tmp_path / "unfair.pt")
    make_data(400).to_csv(tmp_path / "audit.csv", index=False)
    (tmp_path / "policy.toml").write_text(POLICY)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MLFLOW_TRACKING_URI": uri, "PYTHON": sys.executable,
           "FAUX_CHECKS": f"{sys.executable} -m faux_checks_app.cli", "FAUX_CHECKS_HOME": str(tmp_path / "home")}

    # the forgotten policy: the shipped one names 'income', which the data lacks
    proc = _run(["m", str(tmp_path / "audit.csv")], env, tmp_path)
    assert proc.returncode == 3, proc.stderr[-2000:]
    (obj,) = [json.loads(line) for line in (tmp_path / "gate.jsonl").read_text().splitlines()]
    assert (obj["error"], obj["exit_code"]) == ("configuration", 3) and "'income' (label)" in obj["reasons"][0]
    assert "CONFIGURATION ERROR, nothing was recorded" in proc.stdout
    assert reg.new_versions("m") == [fair, unfair]

    proc = _run(["m", str(tmp_path / "audit.csv"), str(tmp_path / "policy.toml")], env, tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]
    objs = [json.loads(line) for line in (tmp_path / "gate.jsonl").read_text().splitlines()]
    assert [(o["model"]["version"], o["decision"], o["exit_code"]) for o in objs] == [(fair, "passed", 0),
                                                                                      (unfair, "failed", 1)]
    assert f"  v{fair}: passed (exit 0)" in proc.stdout and f"  v{unfair}: failed (exit 1)" in proc.stdout
    assert "FAILED, deployment of 'm' blocked" in proc.stdout
    assert reg.alias_version("m", "deployable") == fair

    proc = _run(["m", str(tmp_path / "audit.csv"), str(tmp_path / "policy.toml")], env, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "gate.jsonl").read_text() == ""
    assert "passed (or nothing new to gate)" in proc.stdout
