"""Several protected attributes in one gate (faux_checks/gate/attributes.py).

Known truth from the proxy-injection generator (faux_checks/groundtruth/proxy.py): two protected
attributes A (binary) and B (multi-class, 3 groups), drawn independently, each with its own
proxies. The target reads A's linear proxy only, so its true individual-fairness score is > δ for
a large share on A and exactly 0 on B: the gate must fail on A, pass on B, and fail overall.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from faux_checks.errors import InputError
from faux_checks.gate.attributes import add_intersections, check_attributes, intersection_cells
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.gate.policy import Policy
from faux_checks.groundtruth.proxy import make_proxy_data, proxy_fairness_scores

N = 3000
WEIGHT = 3.0     # logit per unit of A's proxy_linear: A's counterfactual moves it by 2 x 0.35


def _generators(n: int = N):
    rng = np.random.default_rng(7)
    legit = pd.DataFrame({"z0": rng.normal(size=n), "z1": rng.normal(size=n), "z2": rng.normal(size=n)})
    y = (legit["z0"] > 0).astype(int).to_numpy()
    a = make_proxy_data(legit[["z0", "z1"]], y, legit_column="z1", kind="binary", seed=1, protected_name="A")
    b = make_proxy_data(legit[["z2"]], y, legit_column="z2", kind="multiclass", n_groups=3, seed=2,
                        protected_name="B", strength={"linear": 1.0, "nonlinear": 1.0, "legit": 1.0})
    return a, b


def _frame(a, b) -> pd.DataFrame:
    pa = a.proxies()[["proxy_linear", "proxy_nonlinear"]].add_prefix("a_")
    pb = b.proxies()[["proxy_linear", "proxy_nonlinear", "proxy_legit"]].add_prefix("b_")
    return pd.concat([a.features[["z0"]], pa, pb, a.protected(), b.protected()], axis=1)


COLUMNS = ["z0", "a_proxy_linear", "a_proxy_nonlinear", "b_proxy_linear", "b_proxy_nonlinear", "b_proxy_legit"]


def _model() -> nn.Module:
    lin = nn.Linear(len(COLUMNS), 1)
    with torch.no_grad():
        lin.weight.zero_()
        lin.weight[0, 0] = 1.0                     # z0: legitimate
        lin.weight[0, 1] = WEIGHT                  # A's proxy only
        lin.bias.zero_()
    return lin.eval()


def _policy(**extra) -> Policy:
    payload = {"attributes": [{"column": "A", "kind": "binary"}, {"column": "B", "kind": "multiclass"}],
               "target_output": "logit", "faux": {"delta": 0.1, "max_flagged_fraction": 0.05},
               "aux": {"epochs": 20}, "decision": {"aux_seeds": 1, "min_group_rows": 100}}
    payload.update(extra)
    return Policy.model_validate(payload)


@pytest.fixture(scope="module")
def truth_case():
    a, b = _generators()
    frame = _frame(a, b)
    model = _model()

    def predict(features: pd.DataFrame) -> np.ndarray:
        view = frame.copy()
        for col in ("proxy_linear", "proxy_nonlinear"):
            view[f"a_{col}"] = features[col].to_numpy()
        with torch.no_grad():
            return torch.sigmoid(model(torch.tensor(view[COLUMNS].to_numpy(np.float32)))).numpy().ravel()

    def predict_b(features: pd.DataFrame) -> np.ndarray:
        view = frame.copy()
        for col in ("proxy_linear", "proxy_nonlinear", "proxy_legit"):
            view[f"b_{col}"] = features[col].to_numpy()
        with torch.no_grad():
            return torch.sigmoid(model(torch.tensor(view[COLUMNS].to_numpy(np.float32)))).numpy().ravel()

    truth_a = float((proxy_fairness_scores(predict, a) > 0.1).mean())
    truth_b = float(np.abs(proxy_fairness_scores(predict_b, b)).max())
    result = check_attributes(model, frame, policy=_policy())
    return frame, model, result, truth_a, truth_b


def test_the_gate_fails_on_the_attribute_the_target_uses_and_passes_on_the_other(truth_case):
    frame, _, result, truth_a, truth_b = truth_case
    assert truth_b == 0.0 and truth_a > 0.3                      # the generator's truth: B never moves the target
    a, b = result["A"], result["B"]
    assert a.decision == "failed" and a.interval.lower > 0.05
    assert abs(a.flagged_fraction - truth_a) < 0.15, (a.flagged_fraction, truth_a)
    assert b.decision == "passed" and b.interval.upper <= 0.05, b.reasons
    assert result.decision == "failed" and result.exit_code == 1
    assert [s.attribute for s in result.sections] == ["A", "B"]
    assert [s.kind for s in result.sections] == ["binary", "multiclass"]
    statuses = {r["rule"]: r["status"] for r in result.rules}
    assert statuses["A/max_flagged_fraction"] == "exceeded" and statuses["B/max_flagged_fraction"] == "ok"
    assert result.reasons[0].startswith("A: flagged fraction")
    assert {r["attribute"] for r in result.rules} == {"A", "B"}
    payload = result.to_dict()
    assert [s["attribute"] for s in payload["attributes"]] == ["A", "B"]
    assert payload["attributes"][0]["check"]["provenance"]["policy"]["protected"] == "A"


def test_each_attribute_is_exactly_its_own_single_attribute_check(truth_case):
    """The layer adds nothing: with the same inputs, A's section is check_one_attribute with protected = "A"."""
    frame, model, result, _, _ = truth_case
    from faux_checks.inputs.tabular import FeatureSpec

    spec = FeatureSpec.passthrough(frame, exclude=["A", "B"])
    single = Policy.model_validate({**_policy().model_dump(), "attributes": (), "protected": "A",
                                    "protected_kind": "binary"})
    alone = check_one_attribute(model, frame, policy=single, feature_spec=spec)
    assert alone.n_flagged == result["A"].n_flagged and alone.flagged_fraction == result["A"].flagged_fraction
    np.testing.assert_array_equal(alone.scores, result["A"].scores)
    via_layer = check_attributes(model, frame, policy=single, feature_spec=spec)
    assert via_layer.sections[0].check.flagged_fraction == alone.flagged_fraction
    assert via_layer.decision == alone.decision and via_layer.rules == alone.rules    # unprefixed: as before
    declared_one = check_attributes(model, frame, policy=_policy(attributes=[{"column": "A", "kind": "binary"}]),
                                    feature_spec=spec)                    # [[attributes]] declaring one: the same
    assert declared_one.sections[0].check.n_flagged == alone.n_flagged and declared_one.rules == alone.rules
    from faux_checks.report.build import build_report
    from faux_checks.report.schema import validate_report

    validate_report(build_report(decision=declared_one.decision, reasons=declared_one.reasons,
                                 check=declared_one.deciding.check.to_dict(), rules=declared_one.rules,
                                 attributes=[s.to_dict() for s in declared_one.sections]))


def test_an_intersection_cell_under_min_group_rows_is_reported_not_merged(truth_case):
    frame, model, _, _, _ = truth_case
    small = frame[~((frame["A"] == "g1") & (frame["B"] == "g2"))].iloc[:1500]
    small = pd.concat([small, frame[(frame["A"] == "g1") & (frame["B"] == "g2")].iloc[:40]])
    policy = _policy(intersections=[["A", "B"]], decision={"aux_seeds": 1, "min_group_rows": 100})
    cells = {c["cell"]: c for c in intersection_cells(small, ("A", "B"), policy)}
    assert list(cells) == ["g0×g0", "g0×g1", "g0×g2", "g1×g0", "g1×g1", "g1×g2"]
    assert cells["g1×g2"] == {"cell": "g1×g2", "rows": 40, "below_min_group_rows": True}
    assert sum(c["rows"] for c in cells.values()) == len(small)
    result = check_attributes(model, small, policy=policy)
    section = result.sections[2]
    assert section.attribute == "A×B" and section.components == ("A", "B") and section.kind == "multiclass"
    # the small cell is a guard: it keeps A×B from passing, but A's unfairness shows through the intersection too
    flagged = next(r for r in result.rules if r["rule"] == "A×B/max_flagged_fraction")
    assert section.check.decision == "failed" and flagged["status"] == "exceeded"
    assert "though min_group_rows not met" in flagged["detail"]
    groups = {g["group"]: g["audited"] for g in section.check.group_rows}
    assert len(groups) == 6 and groups["g1×g2"] == 40                   # its own group, not merged
    rule = next(r for r in result.rules if r["rule"] == "A×B/min_group_rows")
    assert rule["status"] == "not met" and "group 'g1×g2' has 40 of 1,540 rows (minimum 100)" in rule["detail"]
    assert any(n.startswith("A×B: 1 of 6 cells have fewer than min_group_rows 100 rows (g1×g2 40)")
               for n in result.reasons)
    assert result.decision == "failed"                                  # A's exceeded limit still blocks


def test_the_derived_column_never_touches_the_users_frame_or_an_existing_column(truth_case):
    frame = truth_case[0]
    policy = _policy(intersections=[["A", "B"]])
    before = list(frame.columns)
    derived = add_intersections(frame, policy)
    assert list(frame.columns) == before and derived["A×B"].iloc[0] == f"{frame['A'].iloc[0]}×{frame['B'].iloc[0]}"
    with pytest.raises(InputError, match="already holds a column named 'A×B'"):
        add_intersections(derived, policy)
    with pytest.raises(InputError, match="protected attribute 'B': .*'B'"):
        check_attributes(_model(), frame.drop(columns=["B"]), policy=_policy())


def test_the_check_command_reports_one_section_per_attribute(tmp_path, capsys):
    """`faux-checks check` with a several-attribute policy: exit 1, one line, report section and scores file each."""
    import json

    from _support import linear, make_data
    from faux_checks.inputs.models import save_torchscript
    from faux_checks_app.cli import main

    frame = make_data(900, seed=3)
    rng = np.random.default_rng(4)
    race = rng.integers(0, 3, len(frame))
    frame["race_proxy"] = race * 2.0 + rng.normal(scale=0.5, size=len(frame))
    frame["race"] = np.array(["Asian", "Black", "White"], dtype=object)[race]
    frame.to_csv(tmp_path / "audit.csv", index=False)
    save_torchscript(linear([1.0, 0.0, 0.0, 0.0, 2.0, 0.0]), tmp_path / "unfair.pt")
    policy = tmp_path / "policy.toml"
    policy.write_text('label = "y"\n[[attributes]]\ncolumn = "sex"\n[[attributes]]\ncolumn = "race"\n'
                      '[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.1\n[aux]\nepochs = 15\n'
                      '[decision]\nmin_group_rows = 20\naux_seeds = 1\n')
    args = ["check", "--model", str(tmp_path / "unfair.pt"), "--data", str(tmp_path / "audit.csv"),
            "--policy", str(policy)]
    code = main(args + ["--report-dir", str(tmp_path / "report"), "--scores-out", str(tmp_path / "scores.csv")])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[0].startswith("failed over 2 protected attributes: sex failed ") and ", race passed " in out[0]
    assert out[1].startswith("  sex: failed: ") and out[2].startswith("  race: passed: ")
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert [a["attribute"] for a in report["attributes"]] == ["sex", "race"]
    assert report["check"]["provenance"]["policy"]["protected"] == "sex" and report["policy"]["protected"] is None
    for key in ("sex", "race"):
        scores = pd.read_csv(tmp_path / f"scores.{key}.csv")
        assert len(scores) == 900 and set(scores["status"]) == {"scored"}
    flagged = pd.read_csv(tmp_path / "scores.sex.csv")["flagged"].mean()
    assert flagged == pytest.approx(report["attributes"][0]["check"]["n_flagged"] / 900)
    assert main(args + ["--protected", "sex"]) == 3   # configuration
    assert "declares several protected attributes (sex, race); `check` and `gate` check every one" in capsys.readouterr().err
