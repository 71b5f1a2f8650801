"""Through the Prefect gate flow: two protected attributes and their intersection.

Data: ``sex`` with ``proxy`` = 2·[sex = M] + noise, ``race`` (3 groups) with ``race_proxy`` =
its group index + noise, drawn independently. The unfair target leans on ``proxy`` only, so it
fails on sex (and on sex×race, which sex drives) and passes on race; the fair one uses f0, f1 only.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from _support import linear, make_data

pytestmark = pytest.mark.slow

POLICY = '''label = "y"
intersections = [["sex", "race"]]
[[attributes]]
column = "sex"
kind = "binary"
[[attributes]]
column = "race"
[faux]
delta = 0.05
max_flagged_fraction = 0.1
[aux]
epochs = 15
[decision]
min_group_rows = 20
aux_seeds = 1
'''


def _frame():
    """The module's audit data: make_data's sex and proxy, plus race (3 groups) and its proxy, drawn independently."""
    frame = make_data(900, seed=3)
    rng = np.random.default_rng(4)
    race = rng.integers(0, 3, len(frame))
    frame["race_proxy"] = race * 2.0 + rng.normal(scale=0.5, size=len(frame))
    frame["race"] = np.array(["Asian", "Black", "White"], dtype=object)[race]
    return frame


def test_the_gate_decides_once_over_every_attribute_and_records_each(tmp_path, harness, capsys):
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry
    from faux_checks_flows.gate import gate

    frame = _frame()
    (tmp_path / "audit.csv").write_text(frame.to_csv(index=False))
    (tmp_path / "policy.toml").write_text(POLICY)
    save_torchscript(linear([1.0, 0.5, 0.0, 0.0, 0.0, 0.0]), tmp_path / "fair.pt")
    save_torchscript(linear([1.0, 0.0, 0.0, 0.0, 2.0, 0.0]), tmp_path / "unfair.pt")
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
    assert unfair["fairness_attributes"] == "sex,race,sex×race"
    assert (unfair["fairness_attr_sex_decision"], unfair["fairness_attr_race_decision"],
            unfair["fairness_attr_sex_x_race_decision"]) == ("failed", "passed", "failed")
    assert float(unfair["fairness_attr_sex_flagged_fraction_lower"]) > 0.1
    assert float(unfair["fairness_attr_race_flagged_fraction_upper"]) <= 0.1
    assert unfair["fairness_deciding_attribute"] == "sex"
    assert unfair["fairness_flagged_fraction"] == unfair["fairness_attr_sex_flagged_fraction"]
    assert {fair[f"fairness_attr_{k}_decision"] for k in ("sex", "race", "sex_x_race")} == {"passed"}

    report = json.loads(Path(unfair["fairness_report"]).with_name("report.json").read_text())
    assert [a["attribute"] for a in report["attributes"]] == ["sex", "race", "sex×race"]
    assert [a["decision"] for a in report["attributes"]] == ["failed", "passed", "failed"]
    assert report["policy"]["attributes"][1]["column"] == "race" and report["policy"]["protected"] is None
    from faux_checks.gate.policy import load_policy

    assert report["policy_sha256"] == load_policy(tmp_path / "policy.toml").sha256()
    cells = report["attributes"][2]["cells"]
    assert len(cells) == 6 and sum(c["rows"] for c in cells) == 900 and not any(c["below_min_group_rows"] for c in cells)
    statuses = {r["rule"]: r["status"] for r in report["rules"]}
    assert statuses["sex/max_flagged_fraction"] == "exceeded" and statuses["race/max_flagged_fraction"] == "ok"
    assert report["check"]["provenance"]["policy"]["protected"] == "sex"
    page = Path(unfair["fairness_report"]).read_text()
    assert "id='attributes'" in page and "id='attribute-sex_x_race'" in page

    returned = getattr(state.data, "result", state.data)          # the flow's list, as the CLI reads it
    returned = returned if isinstance(returned, list) else state.result(raise_on_failure=False)
    outcomes = {o["version"]: o for o in returned}
    assert [a["decision"] for a in outcomes[v_unfair]["attributes"]] == ["failed", "passed", "failed"]
    assert "check" not in outcomes[v_unfair]["attributes"][0]      # the flow's result stays small
    from faux_checks_app.history import print_table as _print_table

    capsys.readouterr()
    _print_table([fair, unfair])                                     # `faux-checks gate` / `history`
    header, _, row_fair, row_unfair = capsys.readouterr().out.splitlines()
    assert "| by attribute" in header
    sex = float(unfair["fairness_attr_sex_flagged_fraction"])
    assert f"| sex failed {sex:.1%}, race passed " in row_unfair and ", sex×race failed " in row_unfair
    assert "sex passed" in row_fair
    metrics = registry.client.get_run(unfair["fairness_run_id"]).data.metrics
    assert metrics["attributes/race/flagged_fraction"] == pytest.approx(report["attributes"][1]["flagged_fraction"])


def test_a_policy_declaring_one_attribute_gets_its_section_from_the_suite(tmp_path):
    """The GX suite has one fAux expectation then; the flow's validate step still gives the one section."""
    from faux_checks.inputs.models import save_torchscript
    from faux_checks_flows.gate_tasks import validate

    frame = make_data(400, seed=5)
    save_torchscript(linear([1.0, 0.0, 0.0, 0.0, 2.0]), tmp_path / "unfair.pt")
    policy = tmp_path / "one.toml"
    policy.write_text(POLICY.replace('intersections = [["sex", "race"]]\n', "")
                      .replace('[[attributes]]\ncolumn = "race"\n', ""))
    outcome = validate.fn(frame, str(policy), str(tmp_path / "unfair.pt"), None, None)
    assert outcome.decision == "failed" and [a["attribute"] for a in outcome.attributes] == ["sex"]
    assert outcome.attributes[0]["decision"] == "failed"
    assert outcome.attributes[0]["flagged_fraction"] == outcome.check["flagged_fraction"]
    assert outcome.rules[3]["rule"] == "max_flagged_fraction"            # one attribute: rules unprefixed
    assert list(tmp_path.glob("passthrough-spec-*.json"))                 # next to the model, never in the cwd


def test_the_no_new_harm_rule_over_several_attributes_is_not_judged_never_skipped(tmp_path, harness):
    """The per-individual comparison is not computed over several attributes yet: with the rule set, a version
    that passes every other rule is undecided (the rule named), never passed without it."""
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry
    from faux_checks_flows.gate import gate

    frame = _frame()
    (tmp_path / "audit.csv").write_text(frame.to_csv(index=False))
    (tmp_path / "policy.toml").write_text(POLICY + "max_newly_flagged_fraction = 0.02\n")
    save_torchscript(linear([1.0, 0.5, 0.0, 0.0, 0.0, 0.0]), tmp_path / "fair.pt")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    registry = Registry(uri)
    v = registry.register_version("m", tmp_path / "fair.pt")
    gate(model_name="m", data_path=str(tmp_path / "audit.csv"), policy_path=str(tmp_path / "policy.toml"),
         tracking_uri=uri, report_root=str(tmp_path / "reports"), return_state=True)
    row = {r["version"]: r for r in registry.history("m")}[v]
    assert row["fairness_gate"] == "undecided"
    report = json.loads(Path(row["fairness_report"]).with_name("report.json").read_text())
    statuses = {r["rule"]: r["status"] for r in report["rules"]}
    assert statuses["max_newly_flagged_fraction"] == "not judged"
    assert "several protected attributes" in report["reasons"][0]
    assert registry.alias_version("m", "deployable") is None
