"""The GX suite on the other forms of c and of the target: a linked protected file, and a value target with a cut-off.

Data: ``make_data`` (400 rows, seed 0): f0..f3 independent of sex, proxy = 2·[sex = M] + N(0, 0.5²).

- Linked file: the batch holds a key ``customer_id`` and no sex; ``protected.csv`` holds the key and sex. The unfair
  classifier leans on the proxy (fails), as when sex is a column.
- Value target with a cut-off (as tests/app/test_value_cutoff_cli.py): the unfair score 650 + 40·f0 + 60·proxy moves
  by about 120 pts when sex changes, so people near 700 pts cross; the fair score 700 + 40·f0 reads no proxy. δ =
  1,000 pts flags no one: the decision comes from the crossing reading alone.
"""

from __future__ import annotations

import pytest

import faux_checks_gx as E
from _support import UNFAIR, linear, make_data
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.gate.policy import Policy
from faux_checks.gate.unmatched import check_linked_attributes
from faux_checks.inputs.models import load_model, save_torchscript
from faux_checks.report.protected_form import protected_form_line

SMALL = {"min_aux_quality": 0.7, "aux": {"epochs": 30}, "decision": {"min_group_rows": 20, "aux_seeds": 1}}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("gx-forms")
    data = make_data(400, seed=0).assign(customer_id=lambda f: 1000 + f.index)
    data[["customer_id", "sex"]].to_csv(d / "protected.csv", index=False)
    return {"data": data, "protected": str(d / "protected.csv"), "dir": d,
            "unfair": str(save_torchscript(linear(UNFAIR), d / "unfair.pt")),
            "score_unfair": str(save_torchscript(linear([40.0, 0.0, 0.0, 0.0, 60.0], bias=650.0), d / "su.pt")),
            "score_fair": str(save_torchscript(linear([40.0, 0.0, 0.0, 0.0, 0.0], bias=700.0), d / "sf.pt"))}


def _linked_policy(files, **changes) -> Policy:
    payload = {**SMALL, "protected": "sex", "label": "y", "faux": {"delta": 0.05, "max_flagged_fraction": 0.1},
               "protected_file": {"path": files["protected"], "join_on": "customer_id", **changes}}
    return Policy.model_validate(payload)


def test_a_linked_file_is_joined_and_the_unfair_model_fails_with_check_linked_attributes_numbers(files):
    batch = files["data"].drop(columns="sex")
    policy = _linked_policy(files)
    outcome = E.validate_frame(batch, E.build_suite(policy, model_path=files["unfair"]))
    assert outcome.decision == "failed"
    direct = check_linked_attributes(load_model(files["unfair"]), batch, policy=policy).sections[0].check
    assert outcome.check["flagged_fraction"] == direct.flagged_fraction
    assert (outcome.check["interval"]["lower"], outcome.check["interval"]["upper"]) == (
        direct.interval.lower, direct.interval.upper)
    assert direct.interval.lower > 0.1
    assert protected_form_line(outcome.check["provenance"]) == (
        f"protected attribute 'sex': linked file {files['protected']}, joined on customer_id: 0 of 400 rows unmatched")
    assert outcome.check["provenance"]["n_features"] == 5                  # f0..f3, proxy: no key, no sex


def test_a_linked_file_with_unmatched_rows_is_undecided_naming_them(files):
    batch = files["data"].drop(columns="sex").copy()
    batch.loc[:2, "customer_id"] = [1, 2, 3]                                 # 3 keys the protected file lacks
    outcome = E.validate_frame(batch, E.build_suite(_linked_policy(files), model_path=files["unfair"]))
    assert outcome.decision == "undecided"
    assert "the protected file could not be joined" in outcome.reasons[0] and "3 of 400" in outcome.reasons[0]
    exclude = E.validate_frame(batch, E.build_suite(_linked_policy(files, unmatched="exclude"),
                                                    model_path=files["unfair"]))
    assert exclude.decision == "undecided" and "faux-checks check" in exclude.reasons[0]


def _value_policy() -> Policy:
    return Policy.model_validate({**SMALL, "protected": "sex", "target_output": "value",
                                  "faux": {"delta": 1000, "unit": "pts", "cutoff": 700, "cutoff_side": "above",
                                           "max_flagged_fraction": 0.1}})


def test_a_value_target_with_a_cutoff_fails_on_the_crossing_with_check_one_attribute_numbers(files):
    data = files["data"].drop(columns=["y", "customer_id"])
    outcome = E.validate_frame(data, E.build_suite(_value_policy(), model_path=files["score_unfair"]))
    assert outcome.decision == "failed"
    direct = check_one_attribute(load_model(files["score_unfair"]), data, policy=_value_policy())
    reading, expected = outcome.check["outcome"]["cutoff"], direct.to_dict()["outcome"]["cutoff"]
    assert reading["n_crossed"] == expected["n_crossed"] and reading["interval"] == expected["interval"]
    assert reading["unit"] == "pts" and reading["interval"]["lower"] > 0.1
    rules = {r["rule"]: r["status"] for r in outcome.check["rules"]}
    assert rules["cutoff_crossing"] == "exceeded" and rules["max_flagged_fraction"] == "ok"
    assert outcome.check["provenance"]["unit"] == "pts"
    fair = E.validate_frame(data, E.build_suite(_value_policy(), model_path=files["score_fair"]))
    assert fair.decision == "passed" and fair.check["outcome"]["cutoff"]["n_crossed"] == 0


def test_a_batch_with_c_as_a_column_states_that_form(files):
    data = files["data"].drop(columns="customer_id")
    column = E.validate_frame(data, E.build_suite(_linked_policy(files).model_copy(update={"protected_file": None}),
                                                  model_path=files["unfair"]))
    assert column.decision == "failed"
    assert protected_form_line(column.check["provenance"]) == "protected attribute 'sex': column in the audit data"
