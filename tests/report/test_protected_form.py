"""The form of the protected attribute stated by every report (faux_checks.report.protected_form): a column of the
audit data, or a linked file with its unmatched rows and what excluding them does to the bound."""

from __future__ import annotations

import copy
import html
import json
from pathlib import Path

import jsonschema

from faux_checks import report as report_package
from faux_checks.report.build import build_report
from faux_checks.report.html import render_html
from faux_checks.report.protected_form import PROTECTED_FORMS, protected_form_line

from test_report_formats import _check

SCHEMA = json.loads((Path(report_package.__file__).parent / "report_schema.json").read_text())


def _linked(unmatched: int) -> dict:
    check = copy.deepcopy(_check())
    check["provenance"]["policy"]["protected_file"] = {"path": "people.csv", "join_on": "pid", "unmatched": "exclude"}
    check["provenance"]["protected_file"] = {"join_on": "pid", "protected": ["sex"], "rows": 1000,
                                             "matched": 1000 - unmatched, "unmatched": unmatched,
                                             "unmatched_share": unmatched / 1000, "unmatched_rule": "exclude"}
    return check


def test_each_form_reads_its_sentence():
    assert protected_form_line(_check()["provenance"]) == "protected attribute 'sex': column in the audit data"
    assert protected_form_line(None, "race") == "protected attribute 'race': column in the audit data"
    assert protected_form_line(None) == "protected attribute: not recorded (no check ran)"
    assert protected_form_line(_linked(50)["provenance"]) == (
        "protected attribute 'sex': linked file people.csv, joined on pid: 50 of 1,000 rows unmatched (excluded; the "
        "bound widens by u = 5.00%: [l(1-u), h(1-u)+u] over all rows)")
    assert protected_form_line(_linked(0)["provenance"]) == (
        "protected attribute 'sex': linked file people.csv, joined on pid: 0 of 1,000 rows unmatched")


def test_a_new_form_is_one_reader_more(monkeypatch):
    monkeypatch.setattr("faux_checks.report.protected_form.PROTECTED_FORMS",
                        [lambda p: "estimated" if p.get("estimated") else None, *PROTECTED_FORMS])
    assert protected_form_line({"estimated": True, "policy": {"protected": "sex"}}) == "estimated"
    assert protected_form_line(_check()["provenance"]) == "protected attribute 'sex': column in the audit data"


def test_json_and_html_reports_state_the_form():
    for check, line in ((_check(), "protected attribute 'sex': column in the audit data"),
                        (_linked(50), "linked file people.csv, joined on pid: 50 of 1,000 rows unmatched")):
        report = build_report(decision="failed", reasons=check["reasons"], check=check, model={"name": "m"})
        assert line in report["protected_form"]
        jsonschema.validate(report["protected_form"], SCHEMA["properties"]["protected_form"])
        assert line in html.unescape(render_html(report))


def test_estimated_probabilities_state_the_draws_the_sharpness_and_the_imputation_spread():
    check = copy.deepcopy(_check())
    check["provenance"]["protected_probabilities"] = {
        "form": "estimated probabilities", "column": "race", "groups": {"a": "p_a", "b": "p_b"}, "draws": 5,
        "expected_auc": 0.9213, "between_variance": 0.000125}
    assert protected_form_line(check["provenance"]) == (
        "protected attribute 'race': estimated probabilities (a = p_a, b = p_b), 5 draws (multiple imputation), "
        "expected ROC-AUC 0.921; the interval carries the imputation spread (between-draw variance 1.25e-04)")
