"""Through the Prefect gate flow: the protected attribute given only as per-row probabilities ([protected_probabilities]).

Data: ``make_data`` (400 rows, seed 0): f0..f3 independent of sex, proxy = 2·[sex = M] + N(0, 0.5²). The fair target
reads f0, f1 (no one moves), the unfair one leans on the proxy (almost everyone moves by more than δ). The audit file
holds no sex: :func:`faux_checks.groundtruth.estimated.estimated_audit` replaces it by calibrated probabilities p_F,
p_M at ROC-AUC 0.999 against the true sex (over the policy's min_sharpness 0.95).
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


def test_the_gate_flow_imputes_c_and_records_the_decision_of_check(tmp_path, harness):
    from faux_checks.gate.estimated import check_estimated
    from faux_checks.gate.policy import load_policy
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry
    from faux_checks_flows.gate import gate

    audit = _audit()
    audit.to_csv(tmp_path / "audit.csv", index=False)
    (tmp_path / "policy.toml").write_text(POLICY)
    save_torchscript(linear(FAIR), tmp_path / "fair.pt")
    save_torchscript(linear(UNFAIR), tmp_path / "unfair.pt")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    registry = Registry(uri)
    v_fair = registry.register_version("m", tmp_path / "fair.pt")
    v_unfair = registry.register_version("m", tmp_path / "unfair.pt")

    state = gate(model_name="m", data_path=str(tmp_path / "audit.csv"), policy_path=str(tmp_path / "policy.toml"),
                 tracking_uri=uri, report_root=str(tmp_path / "reports"), return_state=True)
    assert state.is_failed() and f"v{v_unfair} failed" in state.message
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
