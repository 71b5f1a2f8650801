"""The report an auditor reads. The score axis follows the reading in force; a limitations
section generated from what the run did; an undecided page shows the policy it was given; one policy hash in the
gate's and the audit's report; the model table gives the format and how the target was queried; ``model_format``
names ONNX, XGBoost, LightGBM and skops files.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from _support import linear, make_data, write_policy
from faux_checks import load_policy
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.inputs.models import model_format
from faux_checks.report.build import build_report, write_report
from faux_checks.report.limitations import limitations
from faux_checks.report.plots import SCORE_AXES, score_axis_label


def test_the_score_axis_is_the_unit_of_the_reading_in_force():
    assert score_axis_label({"check": {"provenance": {"variant": "swap"}}}) == (
        "LIC score: change in P(y) when c is swapped (probability points)")
    assert "per unit of the aux output (eq. 9)" in score_axis_label({"check": {"provenance": {"variant": "faux"}}})
    assert "|cos|" in score_axis_label({"policy": {"faux": {"variant": "ng"}}})          # the policy when no check
    assert score_axis_label({}) == "LIC score (reading not recorded)"
    assert len(set(SCORE_AXES.values())) == len(SCORE_AXES)


def _topics(items):
    return {i["topic"]: i["text"] for i in items}


def test_limitations_follow_what_the_run_did():
    assert [i["topic"] for i in limitations({"decision": "undecided"})] == ["decision"]
    base = {"decision": "passed", "max_flagged_fraction": 0.05, "n_undefined": 0,
            "group_rows": [{"group": "F", "audited": 900}, {"group": "M", "audited": 60}],
            "by_group": [{"group": "F", "n": 900, "flagged_fraction": 0.02}, {"group": "M", "n": 60, "flagged_fraction": 0.2}],
            "provenance": {"variant": "swap", "protected_kind": "binary", "groups": ["F", "M"],
                           "target_access": "forward (xgboost)"}}
    policy = {"protected": "sex", "faux": {"admissible": [], "variant": "swap"}, "decision": {}}
    t = _topics(limitations({"check": base, "policy": policy}))
    assert "if only 'sex' were swapped" in t["reading"]
    assert "no column is declared admissible" in t["declarations"] and "value judgement" in t["declarations"]
    assert "attribute" not in t                                          # binary c: no under-flagging statement
    assert "forward (xgboost)" in t["target"]
    groups = [i["text"] for i in limitations({"check": base, "policy": policy}) if i["topic"] == "groups"]
    assert any("'M' (60 rows)" in g for g in groups)                      # small group named with its size
    assert any("passed although group(s) 'M' 20.0% of 60" in g and "10.0%" in g for g in groups)  # default 2 × 5%
    declared = {**policy, "faux": {"admissible": ["education"], "variant": "swap"}}
    cont = {**base, "provenance": {**base["provenance"], "protected_kind": "continuous"}, "n_undefined": 7}
    t = _topics(limitations({"check": cont, "policy": declared}))
    assert "education" in t["declarations"] and "value judgement" in t["declarations"]
    assert "continuous" in t["attribute"] and "under-flags" in t["attribute"]
    assert t["undefined"].startswith("7 scores are undefined")
    eq9 = {**base, "provenance": {**base["provenance"], "variant": "faux"}}
    assert "not in probability points" in _topics(limitations({"check": eq9, "policy": policy}))["reading"]


def test_a_real_check_page_has_the_limitations_section_the_unit_and_the_model_table(tmp_path):
    df = make_data(400, seed=0)
    model = tmp_path / "m.pt"
    torch.jit.save(torch.jit.script(linear([1.0, 0, 0, 0, 2.0])), str(model))
    policy = load_policy(write_policy(tmp_path / "p.toml", target_output='"logit"'))
    result = check_one_attribute(torch.jit.load(str(model)), df, policy=policy)
    paths = write_report(tmp_path / "r", decision=result.decision, reasons=result.reasons, check=result.to_dict(),
                         model={"path": str(model)})
    html = paths["html"].read_text()
    assert "Limitations of this run" in html and "value judgement" in html
    assert "torchscript" in html and "autograd (PyTorch)" in html            # format and target access rows
    assert json.loads(paths["json"].read_text())["policy_sha256"] == policy.sha256()


def test_an_undecided_cli_page_shows_the_policy_it_was_given(tmp_path, capsys):
    from faux_checks_app.cli import main

    df = make_data(100, seed=0)
    df["f3"] = np.nan                       # an entirely empty column: the check cannot encode it (undecided, exit 2)
    df.to_csv(tmp_path / "d.csv", index=False)
    model = tmp_path / "m.pt"
    torch.jit.save(torch.jit.script(linear([1.0, 0, 0, 0, 2.0])), str(model))
    policy_path = write_policy(tmp_path / "p.toml")
    code = main(["check", "--model", str(model), "--data", str(tmp_path / "d.csv"), "--policy", str(policy_path),
                 "--report-dir", str(tmp_path / "r")])
    assert code == 2
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["decision"] == "undecided"
    assert report["policy_sha256"] == load_policy(policy_path).sha256() and report["policy"]["protected"] == "sex"
    assert "No policy recorded" not in (tmp_path / "r" / "report.html").read_text()


def test_the_audit_report_hashes_the_policy_as_given_not_the_sampled_copy():
    given = load_policy(protected="sex")
    sampled = given.with_overrides(max_rows=500)
    assert sampled.sha256() != given.sha256()
    check = {"provenance": {"policy": sampled.model_dump(mode="json"), "policy_sha256": sampled.sha256()}}
    audit = {"provenance": {"policy": given.model_dump(mode="json"), "policy_sha256": given.sha256()}}
    report = build_report(decision="passed", reasons=["ok"], check=check, kind="audit", audit=audit)
    assert report["policy_sha256"] == given.sha256() and report["policy"]["max_rows"] is None


def test_model_format_names_the_forward_only_formats(tmp_path):
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    sio = pytest.importorskip("skops.io")
    pytest.importorskip("onnx")
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 3)), (rng.random(200) > 0.5).astype(int)
    xgb.XGBClassifier(n_estimators=2).fit(X, y).get_booster().save_model(str(tmp_path / "m.json"))
    lgb.LGBMClassifier(n_estimators=2, verbose=-1).fit(X, y).booster_.save_model(str(tmp_path / "m.txt"))
    sio.dump(LogisticRegression().fit(X, y), tmp_path / "m.skops")
    torch.onnx.export(torch.nn.Linear(3, 1), (torch.zeros(2, 3),), str(tmp_path / "m.onnx"), dynamo=False)
    assert [model_format(tmp_path / f) for f in ("m.json", "m.txt", "m.skops", "m.onnx")] == [
        "xgboost", "lightgbm", "skops", "onnx"]
    (tmp_path / "x.bin").write_bytes(b"not a model")
    assert model_format(tmp_path / "x.bin") == "unknown"
