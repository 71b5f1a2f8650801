"""The Prefect gate flow end to end against an embedded sqlite registry (C01, C03, C10 through the flow)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from _support import linear, make_data

pytestmark = pytest.mark.slow



def _data(n=800, seed=0) -> pd.DataFrame:
    return make_data(n, seed)


_linear = linear


@pytest.fixture()
def setup(tmp_path, harness):
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    registry = Registry(uri)
    save_torchscript(_linear([1.0, 0.5, 0.0, 0.0, 0.0]), tmp_path / "fair.pt")
    save_torchscript(_linear([1.0, 0.0, 0.0, 0.0, 2.0]), tmp_path / "unfair.pt")
    policy = tmp_path / "policy.toml"
    policy.write_text('protected = "sex"\nlabel = "y"\nmin_aux_quality = 0.7\n'
                      '[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.1\n[aux]\nepochs = 15\n'
                      '[testers.demographic_parity]\nthreshold = 0.2\n[decision]\nmin_group_rows = 20\n')
    data = tmp_path / "audit.csv"
    _data().to_csv(data, index=False)
    return {"uri": uri, "registry": registry, "policy": str(policy), "data": str(data), "dir": tmp_path}


def test_gate_promotes_fair_blocks_unfair(setup):
    from faux_checks_flows.gate import gate

    reg = setup["registry"]
    v_fair = reg.register_version("m", setup["dir"] / "fair.pt")
    v_unfair = reg.register_version("m", setup["dir"] / "unfair.pt")
    data_before = Path(setup["data"]).read_bytes()
    state = gate(model_name="m", data_path=setup["data"], policy_path=setup["policy"], tracking_uri=setup["uri"],
                 report_root=str(setup["dir"] / "reports"), return_state=True)
    assert state.is_failed()
    assert f"v{v_unfair} failed" in state.message
    history = {r["version"]: r for r in reg.history("m")}
    assert history[v_fair]["fairness_gate"] == "passed"
    assert history[v_unfair]["fairness_gate"] == "failed"
    assert float(history[v_unfair]["fairness_flagged_fraction"]) > 0.3
    assert reg.alias_version("m", "deployable") == v_fair
    report = json.loads(Path(history[v_unfair]["fairness_report"]).with_name("report.json").read_text())
    assert report["decision"] == "failed"
    assert report["check"]["flagged_fraction"] == pytest.approx(float(history[v_unfair]["fairness_flagged_fraction"]))
    interval = report["check"]["interval"]                      # the interval in the tags and the report
    assert float(history[v_unfair]["fairness_flagged_fraction_lower"]) == pytest.approx(interval["lower"])
    assert float(history[v_unfair]["fairness_flagged_fraction_upper"]) == pytest.approx(interval["upper"])
    assert history[v_unfair]["fairness_confidence"] == "0.95" and interval["lower"] > 0.1
    assert float(history[v_fair]["fairness_flagged_fraction_upper"]) <= 0.1
    assert [r["status"] for r in report["rules"]][:4] == ["ok", "ok", "ok", "exceeded"]
    assert Path(setup["data"]).read_bytes() == data_before
    # nothing new to gate: a second run is a no-op and completes
    again = gate(model_name="m", data_path=setup["data"], policy_path=setup["policy"], tracking_uri=setup["uri"],
                 report_root=str(setup["dir"] / "reports"), return_state=True)
    assert again.is_completed()


def test_bad_inputs_end_undecided_and_never_promote(setup):
    """C03 (missing protected column), C01 (missing values) and C10 (pickle) through the flow."""
    from faux_checks_flows.gate import gate

    reg = setup["registry"]
    d = setup["dir"]
    torch.save(_linear([1.0, 0, 0, 0, 0]), d / "pickled.pt")   # a pickled module: refused
    v_pickle = reg.register_version("b", d / "pickled.pt")
    no_sex = d / "no_sex.csv"
    _data().drop(columns="sex").to_csv(no_sex, index=False)
    state = gate(model_name="b", data_path=str(no_sex), policy_path=setup["policy"], tracking_uri=setup["uri"],
                 report_root=str(d / "reports"), return_state=True)
    assert state.is_failed()
    row = {r["version"]: r for r in reg.history("b")}[v_pickle]
    assert row["fairness_gate"] == "undecided"
    assert reg.alias_version("b", "deployable") is None
    report = json.loads(Path(row["fairness_report"]).with_name("report.json").read_text())
    assert any("refused to load" in r for r in report["reasons"])

    v_fair = reg.register_version("c", d / "fair.pt")
    missing = _data()
    missing.loc[missing.index[:6], "sex"] = None
    missing_path = d / "missing.csv"
    missing.to_csv(missing_path, index=False)
    state = gate(model_name="c", data_path=str(missing_path), policy_path=setup["policy"], tracking_uri=setup["uri"],
                 report_root=str(d / "reports"), return_state=True)
    assert state.is_failed()
    row = {r["version"]: r for r in reg.history("c")}[v_fair]
    assert row["fairness_gate"] == "undecided"
    report = json.loads(Path(row["fairness_report"]).with_name("report.json").read_text())
    assert any("'sex' has 6 missing values in 800 rows" in r for r in report["reasons"])

    v_fair2 = reg.register_version("d", d / "fair.pt")
    state = gate(model_name="d", data_path=str(no_sex), policy_path=setup["policy"], tracking_uri=setup["uri"],
                 report_root=str(d / "reports"), return_state=True)
    row = {r["version"]: r for r in reg.history("d")}[v_fair2]
    assert state.is_failed() and row["fairness_gate"] == "undecided"
    report = json.loads(Path(row["fairness_report"]).with_name("report.json").read_text())
    assert any("['sex']" in r and "present columns" in r for r in report["reasons"])
    assert reg.alias_version("d", "deployable") is None
