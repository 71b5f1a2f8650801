"""Through the registry gate and its Prefect flow: every form of c (per-row probabilities, a linked file) and a value
target with a cut-off.

Data: ``make_data`` (400 rows, seed 0): f0..f3 independent of sex, proxy = 2·[sex = M] + N(0, 0.5²). The fair
classifier reads f0, f1 (no one moves), the unfair one leans on the proxy (almost everyone moves by more than δ).

- Probabilities: the audit file holds no sex; :func:`faux_checks.groundtruth.estimated.estimated_audit` replaces it by
  calibrated probabilities p_F, p_M at ROC-AUC 0.999 against the true sex (over the policy's min_sharpness 0.95).
- Linked file: the audit file holds a key ``customer_id`` and no sex; ``protected.csv`` holds the key and sex.
- Value target with a cut-off (tests/app/test_value_cutoff_cli.py): the score 650 + 40·f0 + 60·proxy moves by about
  120 pts when sex changes, so people near 700 pts cross; 700 + 40·f0 reads no proxy. δ = 1,000 pts flags no one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from _support import FAIR, UNFAIR, linear, make_data

pytestmark = pytest.mark.slow

POLICY = '''label = "y"
min_aux_quality = 0.7
[faux]
delta = 0.05
max_flagged_fraction = 0.1
[aux]
epochs = 8
[decision]
min_group_rows = 20
aux_seeds = 1
[protected_probabilities]
column = "sex"
groups = { F = "p_F", M = "p_M" }
draws = 2
min_sharpness = 0.95
'''


def _audit() -> pd.DataFrame:
    from faux_checks.groundtruth.estimated import estimated_audit

    frame = make_data(400, seed=0)
    frame["sex"] = (frame["sex"] == "M").astype(int)
    return estimated_audit(frame, "sex", 0.999, seed=1, groups=("F", "M"))


def test_the_registry_gate_imputes_c_and_records_the_decision_of_check(tmp_path, harness):
    from faux_checks.gate.estimated import check_estimated
    from faux_checks.gate.policy import load_policy
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry
    from faux_checks_app.cli import main

    audit = _audit()
    audit.to_csv(tmp_path / "audit.csv", index=False)
    (tmp_path / "policy.toml").write_text(POLICY)
    save_torchscript(linear(FAIR), tmp_path / "fair.pt")
    save_torchscript(linear(UNFAIR), tmp_path / "unfair.pt")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    registry = Registry(uri)
    v_fair = registry.register_version("m", tmp_path / "fair.pt")
    v_unfair = registry.register_version("m", tmp_path / "unfair.pt")

    code = main(["gate", "m", "--data", str(tmp_path / "audit.csv"), "--policy", str(tmp_path / "policy.toml"),
                 "--tracking-uri", uri, "--report-dir", str(tmp_path / "reports")])
    assert code == 1                                  # the CLI's preflight takes the probabilities, the flow gates
    history = {r["version"]: r for r in registry.history("m")}
    fair, unfair = history[v_fair], history[v_unfair]
    assert fair["fairness_gate"] == "passed" and registry.alias_version("m", "deployable") == v_fair
    assert unfair["fairness_gate"] == "failed"

    # the same draws as `faux-checks check` (seeds from the policy seed): the same numbers
    direct = check_estimated(linear(UNFAIR), pd.read_csv(tmp_path / "audit.csv"),
                             policy=load_policy(tmp_path / "policy.toml")).sections[0].check
    assert float(unfair["fairness_flagged_fraction"]) == pytest.approx(direct.flagged_fraction, rel=0, abs=1e-12)
    assert float(unfair["fairness_flagged_fraction_lower"]) == pytest.approx(direct.interval.lower, rel=0, abs=1e-12)
    assert direct.interval.lower > 0.1

    report = json.loads(Path(unfair["fairness_report"]).with_name("report.json").read_text())
    assert report["protected_form"].startswith("protected attribute 'sex': estimated probabilities "
                                               "(F = p_F, M = p_M), 2 draws (multiple imputation)")
    check = report["check"]
    assert check["interval"]["draws"] == list(direct.interval.draws)
    rules = {r["rule"]: r["status"] for r in report["rules"]}
    assert rules["protected_probabilities"] == "ok" and rules["max_flagged_fraction"] == "exceeded"
    assert check["provenance"]["n_features"] == 5           # f0..f3, proxy: neither c nor its probabilities


def _gate(tmp_path, models: dict, policy: str, audit: pd.DataFrame):
    """Register ``models`` (name -> nn.Module) in a new registry, gate them through the flow; the registry's rows."""
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry
    from faux_checks_flows.gate import gate

    audit.to_csv(tmp_path / "audit.csv", index=False)
    (tmp_path / "policy.toml").write_text(policy)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    registry = Registry(uri)
    versions = {name: registry.register_version("m", save_torchscript(m, tmp_path / f"{name}.pt"))
                for name, m in models.items()}
    gate(model_name="m", data_path=str(tmp_path / "audit.csv"), policy_path=str(tmp_path / "policy.toml"),
         tracking_uri=uri, report_root=str(tmp_path / "reports"), return_state=True)
    history = {r["version"]: r for r in registry.history("m")}
    return {name: history[v] for name, v in versions.items()}


def _report(row: dict) -> dict:
    return json.loads(Path(row["fairness_report"]).with_name("report.json").read_text())


def test_the_gate_flow_joins_a_linked_file_and_states_it(tmp_path, harness):
    from faux_checks.gate.policy import load_policy
    from faux_checks.gate.unmatched import check_linked_attributes

    data = make_data(400, seed=0).assign(customer_id=lambda f: 1000 + f.index)
    data[["customer_id", "sex"]].to_csv(tmp_path / "protected.csv", index=False)
    policy = ('protected = "sex"\nlabel = "y"\nmin_aux_quality = 0.7\n[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.1\n'
              '[aux]\nepochs = 8\n[decision]\nmin_group_rows = 20\naux_seeds = 1\n'
              f'[protected_file]\npath = "{tmp_path / "protected.csv"}"\njoin_on = "customer_id"\n')
    rows = _gate(tmp_path, {"unfair": linear(UNFAIR)}, policy, data.drop(columns="sex"))
    unfair = rows["unfair"]
    assert unfair["fairness_gate"] == "failed"
    direct = check_linked_attributes(linear(UNFAIR), data.drop(columns="sex"),
                                     policy=load_policy(tmp_path / "policy.toml")).sections[0].check
    assert float(unfair["fairness_flagged_fraction"]) == pytest.approx(direct.flagged_fraction, rel=0, abs=1e-12)
    report = _report(unfair)
    assert report["protected_form"] == (f"protected attribute 'sex': linked file {tmp_path / 'protected.csv'}, "
                                        "joined on customer_id: 0 of 400 rows unmatched")
    assert report["check"]["provenance"]["n_features"] == 5             # f0..f3, proxy: no key, no sex


def test_the_gate_flow_gates_a_value_target_on_its_cutoff(tmp_path, harness):
    policy = ('protected = "sex"\ntarget_output = "value"\nmin_aux_quality = 0.7\n[faux]\ndelta = 1000\nunit = "pts"\n'
              'cutoff = 700\ncutoff_side = "above"\nmax_flagged_fraction = 0.1\n[aux]\nepochs = 30\n[decision]\n'
              'min_group_rows = 20\naux_seeds = 1\n')
    rows = _gate(tmp_path, {"fair": linear([40.0, 0.0, 0.0, 0.0, 0.0], bias=700.0),
                            "unfair": linear([40.0, 0.0, 0.0, 0.0, 60.0], bias=650.0)},
                 policy, make_data(400, seed=0).drop(columns="y"))
    assert rows["unfair"]["fairness_gate"] == "failed" and rows["fair"]["fairness_gate"] == "passed"
    check = _report(rows["unfair"])["check"]
    reading = check["outcome"]["cutoff"]
    assert reading["unit"] == "pts" and reading["cutoff"] == 700 and reading["interval"]["lower"] > 0.1
    assert {r["rule"]: r["status"] for r in check["rules"]}["cutoff_crossing"] == "exceeded"
    assert _report(rows["fair"])["check"]["outcome"]["cutoff"]["n_crossed"] == 0
