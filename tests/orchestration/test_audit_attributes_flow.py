"""The drift audit of a version gated on two protected attributes (sex, region): one section each, one decision.

Data as tests/orchestration/test_audit_flow.py plus ``region`` (north/south, tied to f2, which the model does not
use). The model leans on ``proxy`` (a proxy of sex) where its logit is near 0, so sex's flagged
fraction moves with the share of individuals near the decision boundary and region's stays 0.
Audited twice with the policy the gate recorded: a fresh batch from the same distribution
(passed, both sections scored with the gate's own auxiliary models ``records/sex/`` and
``records/region/``) and a batch with f0 concentrated near 0 (sex's flagged fraction rises: the
``sex/...`` rules decide, region's section still passes).
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
POLICY = '''label = "y"
min_aux_quality = 0.7
[[attributes]]
column = "sex"
kind = "binary"
[[attributes]]
column = "region"
kind = "binary"
[faux]
delta = 0.05
max_flagged_fraction = 0.4
[aux]
epochs = 15
[decision]
min_group_rows = 20
'''


def _data(n=1200, seed=0, f0_scale=1.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = np.where(rng.random(n) < 0.5, "M", "F")
    z = rng.normal(size=(n, 4))
    z[:, 0] *= f0_scale
    df = pd.DataFrame(z, columns=FEATURES[:4])
    df["proxy"] = (sex == "M") * 2.0 + rng.normal(scale=0.5, size=n)
    df["sex"] = sex
    df["region"] = np.where(z[:, 2] + rng.normal(scale=0.3, size=n) > 0, "north", "south")
    df["y"] = (z[:, 0] > 0).astype(int)
    return df


@pytest.fixture(scope="module")
def gated(tmp_path_factory, harness):
    """One version gated on sex and region (passed, promoted) on reference.csv."""
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry
    from faux_checks_flows.gate import gate

    d = tmp_path_factory.mktemp("audit-attributes")
    uri = f"sqlite:///{d}/mlflow.db"
    registry = Registry(uri)
    save_torchscript(sensitive_model(), d / "model.pt")
    policy = d / "policy.toml"
    policy.write_text(POLICY)
    reference = d / "reference.csv"
    _data().to_csv(reference, index=False)
    version = registry.register_version("credit", d / "model.pt")
    state = gate(model_name="credit", data_path=str(reference), policy_path=str(policy), tracking_uri=uri,
                 report_root=str(d / "reports"), return_state=True)
    assert state.is_completed(), state.message
    row = {r["version"]: r for r in registry.history("credit")}[version]
    assert (row["fairness_attr_sex_decision"], row["fairness_attr_region_decision"]) == ("passed", "passed")
    return {"uri": uri, "registry": registry, "dir": d, "version": version, "gate_run": row["fairness_run_id"]}


def _audit(gated, name: str, frame: pd.DataFrame):
    from faux_checks_flows.audit import audit

    path = gated["dir"] / f"{name}.csv"
    frame.to_csv(path, index=False)
    return audit(model_name="credit", data_path=str(path), tracking_uri=gated["uri"],
                 report_root=str(gated["dir"] / "reports"), return_state=True)


def _row(gated) -> dict:
    return {r["version"]: r for r in gated["registry"].history("credit")}[gated["version"]]


def _report(row) -> dict:
    return json.loads(Path(row["fairness_audit_report"]).with_name("report.json").read_text())


def test_same_distribution_passes_with_one_section_per_attribute_on_the_gates_aux_models(gated):
    from faux_checks_app.output import audit_object

    state = _audit(gated, "same", _data(seed=1))
    assert state.is_completed(), state.message
    row = _row(gated)
    assert row["fairness_audit"] == "passed"
    assert row["fairness_audit_reason"].startswith("all ") and "over 2 protected attributes" in row["fairness_audit_reason"]
    assert row["fairness_audit_attributes"] == "sex,region"
    assert (row["fairness_audit_attr_sex_decision"], row["fairness_audit_attr_region_decision"]) == ("passed", "passed")
    assert (row["fairness_audit_attr_sex_aux_model"], row["fairness_audit_attr_region_aux_model"]) == ("gate", "gate")
    report = _report(row)
    assert report["kind"] == "audit" and report["decision"] == "passed"
    assert [a["attribute"] for a in report["attributes"]] == ["sex", "region"]
    assert [a["decision"] for a in report["attributes"]] == ["passed", "passed"]
    for a in report["attributes"]:   # each attribute scored both batches with the gate's own aux model of it
        aux = a["audit"]["aux_model"]
        assert aux["source"] == "gate" and aux["run_id"] == gated["gate_run"]
        assert aux["artifact"] == f"runs:/{gated['gate_run']}/records/{a['key']}/aux_model.pt"
    sex, region = report["attributes"]
    # the gate's headline flagged fraction is its deciding attribute's (sex): the audit's reference check agrees
    assert row["fairness_deciding_attribute"] == "sex" and report["audit"]["provenance"]["gate_record"][
        "deciding_attribute"] == "sex"
    assert float(row["fairness_flagged_fraction"]) == pytest.approx(sex["audit"]["flagged_fraction_reference"])
    assert not any("the gate recorded a flagged fraction" in r for r in report["reasons"])
    assert sex["audit"]["flagged_fraction_reference"] > 0.05          # the proxy matters near the boundary
    assert region["audit"]["flagged_fraction_reference"] == region["audit"]["flagged_fraction_current"] == 0.0
    rules = [r["rule"] for r in report["rules"]]
    # per attribute rows prefixed as the gate's, shared rows (column drift share) once and unprefixed
    assert {"sex/protected_drift", "region/protected_drift", "sex/max_flagged_fraction_increase",
            "region/score_ks", "max_drifted_share"} <= set(rules)
    assert rules.count("max_drifted_share") == 1 and all(r["status"] == "ok" for r in report["rules"])
    obj = audit_object("credit", {**state.result(), "decision": "passed"}, "")
    assert [s["protected"] for s in obj["attributes"]] == ["sex", "region"]
    assert obj["attributes"][0]["flagged_fraction_reference"] == sex["audit"]["flagged_fraction_reference"]
    assert obj["attributes"][1]["increase"] == 0.0 and obj["attributes"][1]["aux_model"]["source"] == "gate"


def test_one_attributes_shift_decides_and_the_other_section_still_passes(gated):
    state = _audit(gated, "concentrated", _data(seed=2, f0_scale=0.1))   # more individuals near the boundary
    assert state.is_failed()
    row = _row(gated)
    assert row["fairness_audit"] == "failed"
    assert row["fairness_audit_reason"].startswith("sex: ")
    assert (row["fairness_audit_attr_sex_decision"], row["fairness_audit_attr_region_decision"]) == ("failed", "passed")
    assert float(row["fairness_audit_attr_sex_increase"]) > 0.05
    report = _report(row)
    sex, region = report["attributes"]
    assert sex["audit"]["increase"] == pytest.approx(float(row["fairness_audit_attr_sex_increase"]))
    exceeded = {r["rule"] for r in report["rules"] if r["status"] == "exceeded"}
    assert "sex/max_flagged_fraction_increase" in exceeded
    assert not any(r.startswith("region/") for r in exceeded) and "sex/protected_drift" not in exceeded
    assert region["decision"] == "passed" and region["audit"]["flagged_fraction_current"] == 0.0
    assert report["audit"]["provenance"]["deciding_attribute"] == "sex"
    assert gated["registry"].alias_version("credit") == gated["version"]   # the audit never moves the alias
