"""The Prefect drift-audit flow end to end on a tmp sqlite registry (one harness for the module).

One version is gated (which records its reference data), then audited three times: on a fresh
batch from the same distribution (Completed), on a batch whose feature distribution moves
individuals into the region where the model leans on a proxy of the protected attribute
(flagged fraction up: Failed), and on a batch with a shifted protected attribute (Failed).
Batches have 1,200 rows: above 1,000 Evidently compares distances (Wasserstein, Jensen-Shannon)
instead of p-values, so a batch from the same distribution does not drift 5% of the time.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _support import sensitive_model

pytestmark = pytest.mark.slow

FEATURES = ["f0", "f1", "f2", "f3", "proxy"]


def _data(n=1200, seed=0, p_male=0.5, f0_scale=1.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = np.where(rng.random(n) < p_male, "M", "F")
    z = rng.normal(size=(n, 4))
    z[:, 0] *= f0_scale
    df = pd.DataFrame(z, columns=FEATURES[:4])
    df["proxy"] = (sex == "M") * 2.0 + rng.normal(scale=0.5, size=n)
    df["sex"] = sex
    df["y"] = (z[:, 0] > 0).astype(int)
    return df


@pytest.fixture(scope="module")
def gated(tmp_path_factory, harness):
    """One version gated (passed, promoted) on reference.csv: its data_path is recorded."""
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry
    from faux_checks_flows.gate import gate

    d = tmp_path_factory.mktemp("audit")
    uri = f"sqlite:///{d}/mlflow.db"
    registry = Registry(uri)
    save_torchscript(sensitive_model(), d / "model.pt")
    policy = d / "policy.toml"
    policy.write_text('protected = "sex"\nlabel = "y"\nmin_aux_quality = 0.7\n'
                      '[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.4\n[aux]\nepochs = 15\n'
                      '[decision]\nmin_group_rows = 20\n')
    reference = d / "reference.csv"
    _data().to_csv(reference, index=False)
    version = registry.register_version("credit", d / "model.pt")
    state = gate(model_name="credit", data_path=str(reference), policy_path=str(policy), tracking_uri=uri,
                 report_root=str(d / "reports"), return_state=True)
    assert state.is_completed(), state.message
    return {"uri": uri, "registry": registry, "policy": str(policy), "dir": d, "version": version,
            "reference": reference}


def _audit(gated, name: str, frame: pd.DataFrame, **kwargs):
    from faux_checks_flows.audit import audit

    path = gated["dir"] / f"{name}.csv"
    frame.to_csv(path, index=False)
    return audit(model_name="credit", data_path=str(path), tracking_uri=gated["uri"],
                 report_root=str(gated["dir"] / "reports"), return_state=True, **kwargs)


def _row(gated) -> dict:
    return {r["version"]: r for r in gated["registry"].history("credit")}[gated["version"]]


def test_gate_records_reference_data(gated):
    row = _row(gated)
    assert row["fairness_gate"] == "passed"
    assert row["fairness_data_path"] == str(gated["reference"].resolve())
    assert len(row["fairness_data_sha256"]) == 64
    report = json.loads(Path(row["fairness_report"]).with_name("report.json").read_text())
    assert report["kind"] == "gate" and report["data"][0]["path"] == str(gated["reference"].resolve())


def test_no_drift_completes_and_tags_passed(gated):
    state = _audit(gated, "same", _data(seed=1))
    assert state.is_completed(), state.message
    row = _row(gated)
    assert row["fairness_audit"] == "passed"
    assert row["fairness_audit_reason"].startswith("all ")
    assert row["fairness_gate"] == "passed"                      # the gate's tags are left alone
    report_dir = Path(row["fairness_audit_report"]).parent
    report = json.loads((report_dir / "report.json").read_text())
    assert report["kind"] == "audit" and report["decision"] == "passed"
    assert report["model"]["sha256"] == row["model_sha256"]
    # the policy recorded by the gate was used (no --policy): its max_flagged_fraction, not the default's
    assert report["policy"]["faux"]["max_flagged_fraction"] == 0.4
    assert (report_dir / "evidently_drift.html").stat().st_size > 100_000
    assert (report_dir / "evidently_classification.html").is_file()
    run = gated["registry"].audit_runs("credit")[-1]
    assert run["decision"] == "passed" and run["run_id"] == row["fairness_audit_run_id"]
    artifacts = gated["registry"].client.list_artifacts(run["run_id"])
    assert {"report.json", "report.html", "evidently_drift.html", "evidence.json"} <= {a.path for a in artifacts}
    from faux_checks.report.verify import verify_pack

    checked = verify_pack(report_dir, allow_unsigned=True)         # the audit's evidence pack: every file re-hashed
    assert checked.ok and checked.decision == "passed", checked.lines()
    assert {"report.json", "evidently_drift.html", "current"} <= {c.item for c in checked.checks}


def test_flagged_fraction_drift_fails(gated):
    # f0 concentrated near 0: more individuals where the logit is near 0 and the proxy matters
    state = _audit(gated, "concentrated", _data(seed=2, f0_scale=0.1), policy_path=gated["policy"])
    assert state.is_failed()
    row = _row(gated)
    assert row["fairness_audit"] == "failed"
    assert "flagged fraction" in row["fairness_audit_reason"]
    report = json.loads(Path(row["fairness_audit_report"]).with_name("report.json").read_text())
    fairness = report["audit"]["fairness"]
    assert fairness["increase"] > 0.05
    exceeded = {r["rule"] for r in report["rules"] if r["status"] == "exceeded"}
    assert "max_flagged_fraction_increase" in exceeded
    assert "protected_drift" not in exceeded
    assert "fairness audit" in state.message and "failed" in state.message


def test_protected_attribute_drift_fails(gated):
    state = _audit(gated, "more-men", _data(seed=3, p_male=0.9))
    assert state.is_failed()
    row = _row(gated)
    assert row["fairness_audit"] == "failed"
    assert row["fairness_audit_reason"].startswith("the protected attribute 'sex' drifted")
    assert gated["registry"].alias_version("credit") == gated["version"]   # the audit never moves the alias


def test_ten_row_audit_is_undecided(gated, capsys):
    """Below audit.min_rows (100) the audit is undecided (exit 2) even where those rows drifted (all men)."""
    from faux_checks_app.cli import main

    path = gated["dir"] / "tiny.csv"
    _data(n=10, seed=6, p_male=1.0).to_csv(path, index=False)
    code = main(["audit", "credit", "--data", str(path), "--tracking-uri", gated["uri"],
                 "--report-dir", str(gated["dir"] / "reports")])
    out = capsys.readouterr().out
    assert code == 2, out
    row = _row(gated)
    assert row["fairness_audit"] == "undecided"
    assert row["fairness_audit_reason"].startswith("insufficient evidence: the current batch has 10 rows < "
                                                   "audit.min_rows 100")
    report = json.loads(Path(row["fairness_audit_report"]).with_name("report.json").read_text())
    statuses = {r["rule"]: r["status"] for r in report["rules"]}
    assert statuses["min_rows"] == "not met" and "exceeded" not in statuses.values()


def test_cli_audit_history_and_report(gated, capsys):
    from faux_checks_app.cli import main

    path = gated["dir"] / "cli.csv"
    _data(seed=4, p_male=0.9).to_csv(path, index=False)
    code = main(["audit", "credit", "--data", str(path), "--tracking-uri", gated["uri"],
                 "--report-dir", str(gated["dir"] / "reports")])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "audit failed: the protected attribute 'sex' drifted" in out
    report_html = Path(out.split("report: ")[1].split()[0])
    assert code == main(["report", str(report_html.parent)])
    assert "audit report of credit" in capsys.readouterr().out

    assert main(["history", "credit", "--tracking-uri", gated["uri"]]) == 0
    out = capsys.readouterr().out
    assert "last audit" in out and "failed" in out
    assert out.count("  v1  ") >= 4                       # every audit run listed
    # nothing deployed under another alias: could not decide
    assert main(["audit", "credit", "--data", str(path), "--tracking-uri", gated["uri"], "--alias", "none"]) == 2


def test_deployments_build_without_a_server():
    from faux_checks_flows.deployments import _parser, build_deployments

    args = _parser().parse_args(["--model", "credit model", "--data", "/data/latest.parquet", "--gate-data",
                                 "/data/audit.csv", "--audit-cron", "30 2 * * 1"])
    audit, gate = build_deployments(args)
    assert audit.name == "fairness-audit-credit-model" and audit.flow_name == "fairness-audit"
    assert audit.schedules[0].schedule.cron == "30 2 * * 1"
    assert audit.parameters["data_path"] == "/data/latest.parquet"
    assert gate.flow_name == "fairness-gate" and gate.schedules[0].schedule.cron == "*/15 * * * *"
