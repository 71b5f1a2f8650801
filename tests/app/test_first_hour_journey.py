"""A data scientist's first hour, end to end through the CLI on bank marketing.

Three versions logged with MLflow's own API (a skops Pipeline with no feature spec, an XGBoost booster and a pt2
torch MLP with ``feature_spec.json`` in ``extra_files``; tests/_first_hour.py), then, in order:

(a) ``gate bank --data gate.csv`` with the policy forgotten: exit 3, nothing recorded (no tag, no run, no alias);
(b) with the right policy: every version decided, the Pipeline on raw rows through its own transformer;
(c) ``--version 1 --force``: v1 re-decided, ``deployable`` stays on the newest passing version (v3);
(d) a model that reads age for retired people only: under the overall limit, failed by the per-group rule;
(e) the re-gated v1's HTML page: its decision history (both gates), the limitations section and the swap
    reading's unit, rendered in headless Chromium with no console message;
(f) ``gate no-such-model``: exit 3, one line (its wall time is measured in the report, not asserted here).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("skops")
pytest.importorskip("xgboost")
pytestmark = pytest.mark.slow

from _first_hour import BANK, build_journey  # noqa: E402


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def journey(tmp_path_factory):
    if not BANK.exists():
        pytest.skip(f"{BANK} is not on this machine")
    return build_journey(tmp_path_factory.mktemp("first-hour"))


def _gate_runs(uri: str) -> list:
    """Every MLflow run outside the team's own experiment (the gate logs its runs elsewhere)."""
    import mlflow

    client = mlflow.MlflowClient(uri)
    ids = [e.experiment_id for e in client.search_experiments() if e.name != "bank-team"]
    return client.search_runs(ids) if ids else []


def _chromium(html: Path, tmp: Path) -> tuple[str, list[str]]:
    """The page's DOM after scripts ran, and Chromium's console lines (``CONSOLE`` in its log on stderr)."""
    done = subprocess.run([shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           "--no-first-run", f"--user-data-dir={tmp / 'chromium-profile'}", "--enable-logging=stderr",
                           "--v=0", "--dump-dom", html.as_uri()], capture_output=True, text=True, timeout=600)
    return done.stdout, [line for line in done.stderr.splitlines() if "CONSOLE" in line]


def test_first_hour(journey, tmp_path, harness, capfd):
    from faux_checks.registry import Registry
    from faux_checks_app.cli import main

    uri, data, versions = journey["uri"], str(journey["data"]), journey["versions"]
    v1, v2, v3 = versions["pipeline"], versions["booster"], versions["mlp"]
    reg = Registry(uri)
    common = ["--data", data, "--tracking-uri", uri, "--report-dir", str(tmp_path / "reports"), "--json"]
    runs_before = len(_gate_runs(uri))

    # (a) the policy forgotten: the shipped policy's sex/income are not columns of the bank data
    capfd.readouterr()
    assert main(["gate", "bank", *common]) == 3
    captured = capfd.readouterr()
    (obj,) = json_lines(captured.out)
    assert (obj["exit_code"], obj["error"], obj["decision"]) == (3, "configuration", None)
    assert "'sex' (protected attribute), 'income' (label)" in obj["reasons"][0]
    assert reg.new_versions("bank") == [v1, v2, v3]
    assert all(not any(k.startswith("fairness_") for k in row) for row in reg.history("bank")), reg.history("bank")
    assert len(_gate_runs(uri)) == runs_before and reg.alias_version("bank", "deployable") is None

    # (b) the right policy: every version decided; none reads age and job is declared admissible: all pass
    assert main(["gate", "bank", "--policy", str(journey["policy"]), *common]) == 0
    out = {o["model"]["version"]: o for o in json_lines(capfd.readouterr().out)}
    assert {v: o["decision"] for v, o in out.items()} == {v1: "passed", v2: "passed", v3: "passed"}
    assert reg.download("bank", v1, tmp_path / "v1")[1] is None            # no spec attached to the Pipeline
    pipe_report = json.loads(Path(out[v1]["report"]).read_text())
    provenance = pipe_report["check"]["provenance"]
    assert provenance["target_access"].startswith("forward (scikit-learn via skops); features: the pipeline's")
    assert pipe_report["check"]["n_individuals"] == len(journey["frame"])   # every raw row audited
    assert reg.alias_version("bank", "deployable") == v3
    assert len(_gate_runs(uri)) == runs_before + 3

    # (c) re-gate the oldest version: re-decided, the alias stays on the newest version that passed
    assert main(["gate", "bank", "--policy", str(journey["policy"]), "--version", v1, "--force", *common]) == 0
    (regated,) = json_lines(capfd.readouterr().out)
    assert (regated["model"]["version"], regated["decision"], regated["promoted"]) == (v1, "passed", False)
    assert f"alias 'deployable' stays on v{v3}, a newer version that passed" in " ".join(regated["reasons"])
    assert reg.alias_version("bank", "deployable") == v3

    # (d) a model that flags a small group heavily: under the overall limit, failed by the per-group rule
    assert main(["gate", "bank-age", "--policy", str(journey["policy"]), *common]) == 1
    (aged,) = json_lines(capfd.readouterr().out)
    assert aged["decision"] == "failed"
    report = json.loads(Path(aged["report"]).read_text())
    rules = {r["rule"]: r for r in report["rules"]}
    assert rules["max_flagged_fraction"]["status"] == "ok", rules["max_flagged_fraction"]["detail"]
    assert rules["max_group_flagged_fraction"]["status"] == "exceeded"
    by_group = {g["group"]: g for g in report["check"]["by_group"]}
    assert by_group["55+"]["flagged_fraction"] > 0.15 > report["check"]["flagged_fraction"], by_group
    assert reg.alias_version("bank-age", "deployable") is None

    # (e) the re-gated v1's page: its history (both gates), limitations, the swap reading's unit; no console message
    page = Path(regated["report"]).with_name("report.html")
    regate_report = json.loads(Path(regated["report"]).read_text())
    from faux_checks.report.plots import score_axis_label

    assert score_axis_label(regate_report) == "LIC score: change in P(y) when c is swapped (probability points)"
    from faux_checks.gate.policy import load_policy

    sha = load_policy(journey["policy"]).sha256()
    v1_points = [h for h in regate_report["history"] if h["kind"] == "gate" and h["version"] == v1]
    assert [(h["decision"], h["delta"], h["policy_sha256"], h.get("this_run", False)) for h in v1_points] == [
        ("passed", 0.1, sha, False), ("passed", 0.1, sha, True)], regate_report["history"]   # the first gate, this one
    assert v1_points[0]["run_id"] == out[v1]["run_id"]
    assert sorted(h["version"] for h in regate_report["history"]) == sorted([v1, v1, v2, v3])
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed: the page was not rendered (apt-get install -y chromium)")
    dom, console = _chromium(page, tmp_path)
    assert console == [], console
    assert "Limitations of this run" in dom
    assert "probability points: the estimated change of ŷ if only the protected attribute changed" in dom
    assert "History" in dom and dom.count(sha[:12]) >= 3                  # the history table names each gate's policy

    # (f) an unknown model: exit 3 and one line
    assert main(["gate", "no-such-model", "--data", data, "--policy", str(journey["policy"]),
                 "--tracking-uri", uri]) == 3
    err = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "no registered model named 'no-such-model'" in err[0], err
