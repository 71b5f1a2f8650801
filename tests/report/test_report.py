"""Compliance report: JSON schema, self-contained HTML with every section, embedded PNG plots."""

from __future__ import annotations

import base64
import copy
import json
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.audit.drift import run_audit
from faux_checks.errors import InputError
from faux_checks.gate.policy import Policy
from faux_checks.report.artifacts import artifact_markdown, artifact_table
from faux_checks.report.build import history_points, summarise_data, write_report
from faux_checks.report.html import SECTION_IDS
from faux_checks.report.schema import REPORT_SCHEMA_VERSION, load_report, validate_report

FEATURES = ["f0", "f1", "f2", "proxy"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PLOTS = {"gate": {"score_histogram", "flagged_vs_delta", "by_group", "evidence", "aux_roc", "history"},
         "audit": {"score_histogram", "flagged_vs_delta", "by_group", "evidence", "aux_roc", "history", "drift"}}


def _data(n=500, seed=0, p_male=0.5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = np.where(rng.random(n) < p_male, "M", "F")
    df = pd.DataFrame(rng.normal(size=(n, 3)), columns=FEATURES[:3])
    df["proxy"] = (sex == "M") * 2.0 + rng.normal(scale=0.5, size=n)
    df["sex"] = sex
    df["y"] = (df["f0"] > 0).astype(int)
    return df


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """One gate report and one audit report written by write_report (a model that uses the proxy), figures drawn."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAUX_CHECKS_REPORT_PLOTS", "on")
        return _reports(tmp_path_factory)


def _reports(tmp_path_factory):
    root = tmp_path_factory.mktemp("reports")
    model = torch.nn.Linear(4, 1)
    with torch.no_grad():
        model.weight[:] = torch.tensor([[1.0, 0.0, 0.0, 1.5]])
        model.bias.fill_(-1.5)
    policy = Policy.model_validate({"protected": "sex", "label": "y", "min_aux_quality": 0.7, "aux": {"epochs": 10},
                                    "faux": {"delta": 0.05, "max_flagged_fraction": 0.3},
                                    "testers": {"fta": {"threshold": 0.5}, "demographic_parity": {"threshold": 0.2}},
                                    "decision": {"min_group_rows": 15}})   # the current batch: ~100 women
    ref, cur = _data(), _data(seed=1, p_male=0.8)
    model_info = {"name": "credit", "version": "2", "sha256": "ab" * 32}
    check = check_one_attribute(model, ref, policy=policy, model_info=model_info)
    history = history_points(
        [{"version": "1", "fairness_gate": "failed", "fairness_flagged_fraction": "0.41",
          "fairness_checked_at": "2026-01-01T00:00:00+00:00", "fairness_run_id": "r1"},
         {"version": "2", "fairness_gate": "passed", "fairness_flagged_fraction": repr(check.flagged_fraction),
          "fairness_checked_at": "2026-01-02T00:00:00+00:00", "fairness_run_id": "r2"}],
        [{"version": "2", "decision": "passed", "metrics": {"flagged_fraction_current": 0.1},
          "started_at": "2026-01-03T00:00:00+00:00", "run_id": "a1"}])
    gate = write_report(root / "gate", decision=check.decision, reasons=check.reasons, check=check.to_dict(),
                        model=model_info, history=history, data=[summarise_data(ref, path=root / "ref.csv")],
                        expectations=[{"type": "expect_faux_flagged_fraction_to_be_at_most", "success": True,
                                       "observed_value": check.flagged_fraction, "gating": True, "exception": None}])
    (root / "audit").mkdir()
    result = run_audit(model, ref, cur, policy=policy, evidence_dir=root / "audit", model_info=model_info)
    audit = write_report(root / "audit", kind="audit", decision=result.decision, reasons=result.reasons,
                         check=result.fairness.current.to_dict(), audit=result.to_dict(), model=model_info,
                         history=history, data=[summarise_data(ref, name="reference"),
                                                summarise_data(cur, name="current")],
                         artifacts={"evidently drift": "evidently_drift.html"})
    return {"gate": gate, "audit": audit, "result": result}


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.imgs, self.tags, self.hrefs, self.srcs = set(), {}, [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "img":
            self.imgs[a.get("alt")] = a.get("src")
        if "href" in a:
            self.hrefs.append(a["href"])
        if "src" in a:
            self.srcs.append(a["src"])


def _page(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text())
    page.close()
    return page


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gate", "audit"])
def test_report_json_matches_the_schema(reports, kind):
    report = load_report(reports[kind]["json"].parent)          # validates
    assert report["schema_version"] == REPORT_SCHEMA_VERSION and report["kind"] == kind
    assert report["rule"] == report["reasons"][0]
    assert report["model"]["sha256"] == "ab" * 32
    assert report["policy"]["faux"]["delta"] == 0.05 and report["policy_sha256"]
    batches = report["data"]
    assert len(batches) == (1 if kind == "gate" else 2) and all(len(b["sha256"]) == 64 for b in batches)
    assert batches[0]["n_rows"] == 500 and batches[0]["n_undefined"] == 0
    assert [r["tester"] for r in report["comparison"]] == ["fAux (swap)", "fta", "demographic_parity"]
    assert report["environment"]["packages"]["torch"] and report["environment"]["seeds"]["policy_seed"] == 0
    assert [p["kind"] for p in report["history"]] == ["gate", "gate", "audit", kind]
    assert report["history"][-1]["this_run"] is True
    if kind == "audit":
        assert report["audit"]["decision"] == report["decision"] == reports["result"].decision
        assert {r["rule"] for r in report["rules"]} >= {"protected_drift", "max_drifted_share", "score_ks"}
        assert report["audit"]["reference_check"]["n_individuals"] == 500
    else:
        assert {r["rule"] for r in report["rules"]} == {"min_group_rows", "min_aux_quality", "max_undefined_fraction",
                                                         "max_flagged_fraction", "max_group_flagged_fraction",
                                                         "held_jointly_free"}


def _mutations(report):
    def set_(path, value):
        def f(r):
            obj = r
            for key in path[:-1]:
                obj = obj[key]
            obj[path[-1]] = value
        return f

    def drop(key):
        return lambda r: r.pop(key)

    return [
        ("decision", set_(["decision"], "maybe")),
        ("exit_code", set_(["exit_code"], 0) if report["decision"] != "passed" else set_(["exit_code"], 1)),
        ("rule", drop("rule")),
        ("(top)", set_(["surprise"], 1)),
        ("schema_version", set_(["schema_version"], "0.9")),
        ("check/flagged_fraction", set_(["check", "flagged_fraction"], 1.5)),
        ("data/0/sha256", set_(["data", 0, "sha256"], "not-a-hash")),
        ("rules/0/status", set_(["rules", 0, "status"], "fine")),
        ("history/0/flagged_fraction", set_(["history", 0, "flagged_fraction"], "high")),
    ]


@pytest.mark.parametrize("kind", ["gate", "audit"])
def test_invalid_reports_are_rejected(reports, kind, tmp_path):
    report = json.loads(reports[kind]["json"].read_text())
    validate_report(report)
    for where, mutate in _mutations(report):
        bad = copy.deepcopy(report)
        mutate(bad)
        with pytest.raises(InputError, match="does not match report schema") as err:
            validate_report(bad)
        assert where in str(err.value), (where, str(err.value))
    bad = copy.deepcopy(report)
    bad["audit"] = None if kind == "audit" else bad["audit"]
    bad["kind"] = "audit"
    with pytest.raises(InputError):
        validate_report(bad)
    # write_report refuses before writing anything
    check = copy.deepcopy(report["check"])
    check["n_individuals"] = -1
    with pytest.raises(InputError, match="check/n_individuals"):
        write_report(tmp_path / "r", decision="passed", reasons=["x"], check=check)
    assert not (tmp_path / "r" / "report.json").exists()
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        load_report(tmp_path / "broken.json")


@pytest.mark.parametrize("kind", ["gate", "audit"])
def test_html_has_every_section_and_no_external_resource(reports, kind):
    page = _page(reports[kind]["html"])
    optional = {"regression"}               # shown when the gate compared the version with earlier ones
    missing = set(SECTION_IDS[kind]) - optional - page.ids
    assert not missing, missing
    assert ("regression" in page.ids) == bool(load_report(reports[kind]["json"]).get("regression"))
    assert "script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags
    assert all(src.startswith("data:image/png;base64,") for src in page.srcs)
    assert all(h.startswith("#") or ("://" not in h and not h.startswith("//")) for h in page.hrefs), page.hrefs
    if kind == "audit":
        assert "evidently_drift.html" in page.hrefs


@pytest.mark.parametrize("kind", ["gate", "audit"])
def test_plots_are_real_png_images(reports, kind, monkeypatch):
    from faux_checks.report.plots import render_plots

    monkeypatch.setenv("FAUX_CHECKS_REPORT_PLOTS", "on")
    report = load_report(reports[kind]["json"])
    plots = render_plots(report)
    assert set(plots) == PLOTS[kind]
    page = _page(reports[kind]["html"])
    assert len(page.imgs) == len(PLOTS[kind])
    for alt, src in page.imgs.items():
        raw = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert raw[:8] == PNG_SIGNATURE, alt
        assert len(raw) > 1024, alt
        width, height = int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")
        assert width > 200 and height > 200, (alt, width, height)


@pytest.mark.parametrize("setting, drawn", [(None, True), ("OFF", False), ("no", False)])
def test_the_plot_switch_leaves_out_only_the_figures(reports, monkeypatch, setting, drawn):
    """FAUX_CHECKS_REPORT_PLOTS=off: the page keeps every section and shows no figure; unset or on: every figure."""
    from faux_checks.report.html import render_html

    if setting is None:
        monkeypatch.delenv("FAUX_CHECKS_REPORT_PLOTS", raising=False)
    else:
        monkeypatch.setenv("FAUX_CHECKS_REPORT_PLOTS", setting)
    report = load_report(reports["gate"]["json"])
    path = reports["gate"]["json"].parent / f"switch-{setting}.html"
    path.write_text(render_html(report))
    page = _page(path)
    assert len(page.imgs) == (len(PLOTS["gate"]) if drawn else 0)
    assert set(SECTION_IDS["gate"]) - {"regression"} <= page.ids


def test_report_cli_validates_and_renders(reports, tmp_path, capsys):
    from faux_checks_app.cli import main

    gate_dir = reports["gate"]["json"].parent
    expected = reports["result"].exit_code
    assert main(["report", str(reports["audit"]["json"]), "--out", str(tmp_path / "a.html")]) == expected
    assert set(SECTION_IDS["audit"]) <= _page(tmp_path / "a.html").ids
    code = main(["report", str(gate_dir)])
    assert code == json.loads(reports["gate"]["json"].read_text())["exit_code"]
    assert "gate report of credit v2" in capsys.readouterr().out
    assert main(["report", str(gate_dir), "--out", str(tmp_path / "a.html")]) == 2   # never overwritten
    bad = json.loads(reports["gate"]["json"].read_text())
    bad["decision"] = "maybe"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    assert main(["report", str(tmp_path / "bad.json")]) == 2
    assert "decision: 'maybe' is not one of" in capsys.readouterr().err


def test_artifacts_summarise_the_report(reports):
    report = load_report(reports["audit"]["json"])
    table = artifact_table(report)
    assert [r["rule"] for r in table] == [r["rule"] for r in report["rules"]]
    assert all(set(r) == {"rule", "statistic", "value", "limit", "status", "detail"} for r in table)
    ks = next(r for r in table if r["rule"] == "score_ks")
    assert ks["statistic"] == "KS p-value of the LIC scores, reference vs current"
    md = artifact_markdown(report, report_dir="/x")
    assert md.startswith("## audit · credit v2: **") and "/x/report.html" in md and "drifted columns" in md


def test_history_has_every_gate_of_a_re_gated_version_with_its_delta_and_policy():
    """A version gated twice is two points (from its gate runs), each with δ and the policy hash;
    a decision recorded without a run still comes from the version's tags, and churn joins the run's point."""
    runs = [{"run_id": "r1", "version": "1", "decision": "failed", "delta": "0.05", "policy_sha256": "a" * 64,
             "started_at": "2026-01-01T00:00:00+00:00", "metrics": {"flagged_fraction": 0.2}},
            {"run_id": "r2", "version": "1", "decision": "passed", "delta": "0.2", "policy_sha256": "b" * 64,
             "started_at": "2026-01-02T00:00:00+00:00", "metrics": {"flagged_fraction": 0.0}}]
    versions = [{"version": "1", "fairness_gate": "passed", "fairness_run_id": "r2", "fairness_churn_against": "0",
                 "fairness_churn_newly_flagged": "3", "fairness_churn_resolved": "1", "fairness_churn_n": "10"},
                {"version": "2", "fairness_gate": "failed", "fairness_run_id": "", "fairness_delta": "0.05",
                 "fairness_flagged_fraction": "0.5", "fairness_checked_at": "2026-01-03T00:00:00+00:00"}]
    points = history_points(versions, [], runs)
    assert [(p["version"], p["decision"], p["delta"], p["policy_sha256"], p["flagged_fraction"]) for p in points] == [
        ("1", "failed", 0.05, "a" * 64, 0.2), ("1", "passed", 0.2, "b" * 64, 0.0), ("2", "failed", 0.05, None, 0.5)]
    assert "churn" not in points[0] and points[1]["churn"] == {"against": "0", "newly_flagged": 3.0, "resolved": 1.0,
                                                                "n": 10.0}
