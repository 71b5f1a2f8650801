"""Every case of bad-inputs.md through the CLI (`faux-checks check`) and the Great Expectations suite.

Only the combinations no other module covers (test_check_cli: C01 error, C03, C04 empty, C10;
test_expectations: C01, C03, C10); the Prefect flow's share is in test_gate_reliability.py. The
cases are the file bundles of ``_support.build_cases``: the same files for every entry point, and
the same expected outcome.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from _support import build_cases
from faux_checks_app.cli import main

CLI_CASES = ["C01-drop", "C02-Int64-drop", "C02-boolean-error", "C04-constant", "C04-mixed", "C05-dead-aux",
             "C06-train-mode", "C07-logit", "C07-probability", "C07-softmax", "C07-ambiguous", "C08-strings",
             "C08-booleans", "C08-ints", "C08-categorical", "C09-direct"]
GX_CASES = ["C02-Int64-drop", "C02-boolean-error", "C04-empty", "C04-constant", "C04-mixed", "C05-dead-aux",
            "C06-train-mode", "C07-logit", "C07-probability", "C07-softmax", "C07-ambiguous", "C08-strings",
            "C08-booleans", "C08-ints", "C08-categorical", "C09-direct"]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    return build_cases(tmp_path_factory.mktemp("cases"))


def run_cli(case, out_dir, name: str = "run") -> tuple[int, dict, pd.DataFrame | None]:
    args = ["check", "--model", str(case.model), "--data", str(case.data), "--protected", case.protected,
            "--policy", str(case.policy), "--report-dir", str(out_dir / f"{name}-report"),
            "--scores-out", str(out_dir / f"{name}-scores.csv")]
    if case.spec:
        args += ["--feature-spec", str(case.spec)]
    if case.aux:
        args += ["--aux-model", str(case.aux)]
    code = main(args)
    report = json.loads((out_dir / f"{name}-report" / "report.json").read_text())
    scores_path = out_dir / f"{name}-scores.csv"
    return code, report, (pd.read_csv(scores_path) if scores_path.exists() else None)


def check_outcome(case, decision: str, reasons: list[str], check: dict | None) -> None:
    assert decision == case.decision, (case.id, reasons)
    assert any(case.reason in r for r in reasons), (case.id, case.reason, reasons)
    check = check or {}
    if case.n_missing_protected is not None:
        assert check["n_missing_protected"] == case.n_missing_protected
        assert check["n_individuals"] == 400 - case.n_missing_protected
    if case.n_undefined is not None:
        assert check["n_undefined"] == case.n_undefined
    if case.uses_protected is not None:
        assert check["uses_protected_directly"] is case.uses_protected


@pytest.fixture(scope="module")
def cli_runs(cases, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli-runs")
    return {cid: run_cli(cases[cid], out, cid) for cid in CLI_CASES}


@pytest.mark.slow
@pytest.mark.parametrize("case_id", CLI_CASES)
def test_case_through_the_cli(case_id, cases, cli_runs):
    case = cases[case_id]
    code, report, scores = cli_runs[case_id]
    assert code == {"passed": 0, "failed": 1, "undecided": 2}[case.decision]
    assert report["decision"] == case.decision and report["exit_code"] == code
    check_outcome(case, report["decision"], report["reasons"], report["check"])
    if case.decision == "undecided" and report["check"] is None:
        assert scores is None                                   # nothing half-written
    if case.n_undefined:                                         # C05: undefined rows are shown, never 'not flagged'
        assert (scores["status"] == "undefined").sum() == case.n_undefined
        assert scores.loc[scores["status"] == "undefined", "flagged"].isna().all()
    json.dumps(report, allow_nan=False)                         # C02: serialises without NaN/NA


def test_c06_train_mode_target_scores_repeat_exactly(cases, cli_runs, tmp_path):
    """C06: dropout and BatchNorm saved in train mode: the same scores on a second run."""
    _, _, first = cli_runs["C06-train-mode"]
    _, _, again = run_cli(cases["C06-train-mode"], tmp_path, "again")
    pd.testing.assert_frame_equal(first, again)
    assert first["status"].eq("scored").all()


def test_c07_output_forms_give_the_same_scores(cli_runs):
    logit = cli_runs["C07-logit"][2]["lic_score"].to_numpy()
    for form in ("probability", "softmax"):
        # the swap score is a difference of two probabilities; a float32 probability output is exact to ~6e-8
        np.testing.assert_allclose(cli_runs[f"C07-{form}"][2]["lic_score"].to_numpy(), logit, rtol=1e-6, atol=5e-7)


def test_c08_protected_encodings_give_the_same_groups_and_scores(cli_runs):
    strings = cli_runs["C08-strings"]
    for name in ("booleans", "ints", "categorical"):
        other = cli_runs[f"C08-{name}"]
        np.testing.assert_array_equal(other[2]["lic_score"].to_numpy(), strings[2]["lic_score"].to_numpy())
        assert [g["n"] for g in other[1]["check"]["by_group"]] == [g["n"] for g in strings[1]["check"]["by_group"]]
        assert other[1]["check"]["flagged_fraction"] == strings[1]["check"]["flagged_fraction"]
    assert [g["group"] for g in cli_runs["C08-booleans"][1]["check"]["by_group"]] == ["False", "True"]


def test_c10_pickled_aux_model_is_refused_too(cases, tmp_path, capsys):
    case = cases["C10-pickle"]
    code = main(["check", "--model", str(cases["C06-train-mode"].model), "--aux-model", str(case.model),
                 "--data", str(case.data), "--protected", "sex", "--policy", str(case.policy)])
    assert code == 2 and "refused to load" in capsys.readouterr().err
    assert not case.notes["marker"].exists()


# ---------------------------------------------------------------------------- Great Expectations
@pytest.fixture(scope="module")
def gx_runs(cases):
    import faux_checks_gx as E
    from faux_checks.inputs.io import read_table
    from faux_checks.gate.policy import load_policy

    out = {}
    for cid in GX_CASES:
        case = cases[cid]
        suite = E.build_suite(load_policy(case.policy), model_path=str(case.model),
                              feature_spec_path=str(case.spec) if case.spec else None,
                              aux_model_path=str(case.aux) if case.aux else None)
        out[cid] = E.validate_frame(read_table(case.data), suite)
    return out


@pytest.mark.parametrize("case_id", GX_CASES)
def test_case_through_the_expectation(case_id, cases, gx_runs):
    outcome = gx_runs[case_id]
    check_outcome(cases[case_id], outcome.decision, outcome.reasons, outcome.check)
    assert outcome.gx_success is (outcome.decision == "passed")


def test_expectation_agrees_with_the_cli(gx_runs, cli_runs):
    for cid in set(GX_CASES) & set(CLI_CASES):
        cli_check = cli_runs[cid][1]["check"]
        gx_check = gx_runs[cid].check
        if cli_check is None:
            assert gx_check is None or gx_check["decision"] == "undecided"
            continue
        assert gx_check["flagged_fraction"] == cli_check["flagged_fraction"], cid
        assert gx_check["n_undefined"] == cli_check["n_undefined"], cid
