"""Output for people and machines: --version, --json (one object per version, stdout only JSON), --quiet, and
a gate with nothing new that says so."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

import faux_checks
from faux_checks_app.cli import main
from faux_checks_app.output import RESULT_SCHEMA_VERSION

import _support

#: keys every --json object has (faux_checks_app/output.py, docs/output.md)
COMMON_KEYS = {"schema_version", "command", "model", "decision", "exit_code", "reasons", "attributes", "report"}
ATTRIBUTE_KEYS = {"protected", "kind", "components", "cells", "decision", "flagged_fraction", "flagged_fraction_lower", "flagged_fraction_upper",
                  "confidence", "flagged_fraction_defined", "delta", "max_flagged_fraction", "n_individuals",
                  "n_undefined", "aux_quality", "aux_quality_metric", "by_group", "testers"}
POLICY = ('protected = "sex"\nlabel = "y"\nmin_aux_quality = 0.7\n[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.1\n'
          '[aux]\nepochs = 8\n[testers.demographic_parity]\nthreshold = 0.2\n[decision]\nmin_group_rows = 20\n')


def _json_lines(out: str) -> list[dict]:
    """Every line of stdout parsed as JSON: fails on any line that is not."""
    lines = out.splitlines()
    assert all(line.strip() for line in lines), out
    return [json.loads(line) for line in lines]


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"faux-checks {faux_checks.__version__}\n"
    assert faux_checks.__version__ == importlib.metadata.version("faux-checks")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from faux_checks.inputs.models import save_torchscript

    d = tmp_path_factory.mktemp("out")
    _support.make_data(800, 0).to_csv(d / "data.csv", index=False)
    save_torchscript(_support.linear(_support.FAIR), d / "fair.pt")
    save_torchscript(_support.linear(_support.UNFAIR), d / "unfair.pt")
    (d / "policy.toml").write_text(POLICY)
    return d


def test_check_json_is_one_object_with_the_documented_keys(files, tmp_path, capfd):
    args = ["check", "--model", str(files / "unfair.pt"), "--data", str(files / "data.csv"), "--protected", "sex",
            "--label", "y", "--policy", str(files / "policy.toml")]
    code = main(args + ["--json", "--report-dir", str(tmp_path / "r")])
    captured = capfd.readouterr()
    [obj] = _json_lines(captured.out)               # stdout holds exactly one JSON object, nothing else
    assert set(obj) == COMMON_KEYS and obj["schema_version"] == RESULT_SCHEMA_VERSION and obj["command"] == "check"
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert obj["decision"] == report["decision"] == "failed" and obj["exit_code"] == code == 1
    assert obj["report"] == str((tmp_path / "r" / "report.json").resolve())
    assert obj["model"] == {"path": str((files / "unfair.pt").resolve()), "sha256": report["model"]["sha256"]}
    assert obj["reasons"] == report["reasons"]
    [section] = obj["attributes"]
    assert set(section) == ATTRIBUTE_KEYS and section["protected"] == "sex"
    check = report["check"]
    assert section["flagged_fraction"] == check["flagged_fraction"] and section["flagged_fraction"] > 0.3
    assert (section["flagged_fraction_lower"], section["flagged_fraction_upper"], section["confidence"]) == (
        check["interval"]["lower"], check["interval"]["upper"], 0.95)
    assert section["delta"] == 0.05 and section["max_flagged_fraction"] == 0.1 and section["n_individuals"] == 800
    assert [g["group"] for g in section["by_group"]] == ["F", "M"]
    assert sum(g["n"] for g in section["by_group"]) == 800
    assert section["testers"]["demographic_parity"]["statistic"] == "demographic_parity_difference"
    assert "[1/4] loading model" in captured.err     # progress goes to stderr
    # --quiet: the same result line, no progress
    code = main(args + ["--quiet"])
    captured = capfd.readouterr()
    assert code == 1 and captured.out.startswith("failed: ") and captured.err == ""


def test_check_json_carries_one_section_per_protected_attribute(tmp_path, capfd):
    import numpy as np

    from faux_checks.inputs.models import save_torchscript

    frame = _support.make_data(900, seed=3)
    rng = np.random.default_rng(4)
    race = rng.integers(0, 3, len(frame))
    frame["race_proxy"] = race * 2.0 + rng.normal(scale=0.5, size=len(frame))
    frame["race"] = np.array(["Asian", "Black", "White"], dtype=object)[race]
    frame.to_csv(tmp_path / "audit.csv", index=False)
    save_torchscript(_support.linear([1.0, 0.0, 0.0, 0.0, 2.0, 0.0]), tmp_path / "unfair.pt")
    policy = tmp_path / "policy.toml"
    policy.write_text('label = "y"\n[[attributes]]\ncolumn = "sex"\n[[attributes]]\ncolumn = "race"\n'
                      '[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.1\n[aux]\nepochs = 15\n'
                      '[decision]\nmin_group_rows = 20\naux_seeds = 1\n')
    code = main(["check", "--model", str(tmp_path / "unfair.pt"), "--data", str(tmp_path / "audit.csv"),
                 "--policy", str(policy), "--report-dir", str(tmp_path / "r"), "--json"])
    [obj] = _json_lines(capfd.readouterr().out)
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert code == obj["exit_code"] == 1 and obj["decision"] == "failed"
    assert [(a["protected"], a["decision"]) for a in obj["attributes"]] == [("sex", "failed"), ("race", "passed")]
    assert all(set(a) == ATTRIBUTE_KEYS for a in obj["attributes"])
    for section, recorded in zip(obj["attributes"], report["attributes"], strict=False):
        assert section["flagged_fraction"] == recorded["flagged_fraction"]
        assert section["n_individuals"] == 900 and section["kind"] == recorded["kind"]
    assert obj["attributes"][0]["kind"] == "binary" and obj["attributes"][1]["kind"] == "multiclass"
    assert {g["group"] for g in obj["attributes"][1]["by_group"]} == {"Asian", "Black", "White"}


@pytest.mark.slow
def test_gate_audit_history_json_and_a_gate_with_nothing_new(files, tmp_path, harness, capfd):
    from faux_checks.registry import Registry

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    registry = Registry(uri)
    fair = registry.register_version("m", files / "fair.pt")
    unfair = registry.register_version("m", files / "unfair.pt")
    common = ["--tracking-uri", uri]
    gate = ["gate", "m", "--data", str(files / "data.csv"), "--policy", str(files / "policy.toml"),
            "--report-dir", str(tmp_path / "reports"), *common]
    capfd.readouterr()
    assert main(gate + ["--json"]) == 1
    captured = capfd.readouterr()
    objs = _json_lines(captured.out)                 # one object per version, and only JSON on stdout
    assert [o["model"] for o in objs] == [{"name": "m", "version": fair}, {"name": "m", "version": unfair}]
    assert all(set(o) == COMMON_KEYS | {"run_id", "promoted"} for o in objs)
    by_version = {o["model"]["version"]: o for o in objs}
    assert by_version[fair]["decision"] == "passed" and by_version[fair]["promoted"] is True
    assert by_version[unfair]["decision"] == "failed" and by_version[unfair]["exit_code"] == 1
    assert by_version[unfair]["promoted"] is False
    history = {r["version"]: r for r in registry.history("m")}
    for version, obj in by_version.items():
        assert obj["run_id"] == history[version]["fairness_run_id"]
        assert obj["attributes"][0]["flagged_fraction"] == pytest.approx(
            float(history[version]["fairness_flagged_fraction"]))
        assert Path(obj["report"]).name == "report.json" and Path(obj["report"]).is_file()
    assert "Beginning flow run" in captured.err or "gating new versions" in captured.err

    # nothing new: says so, in words (stdout) or on stderr with an empty stdout (--json); exit 0
    assert main(gate) == 0
    captured = capfd.readouterr()
    assert captured.out.strip() == ("nothing to gate: no new versions of 'm'; all 2 registered version(s) already have "
                                    f"a decision (latest v{unfair}: failed). `faux-checks history m` lists them")
    assert "COMPLETED" not in captured.out and "None" not in captured.out
    assert main(gate + ["--json", "--quiet"]) == 0
    captured = capfd.readouterr()
    assert captured.out == "" and "nothing to gate: no new versions of 'm'" in captured.err

    assert main(["history", "m", "--json", *common]) == 0
    rows = _json_lines(capfd.readouterr().out)
    assert [(r["model"]["version"], r["decision"], r["aliases"]) for r in rows] == [
        (fair, "passed", ["deployable"]), (unfair, "failed", [])]
    assert all(set(r) == COMMON_KEYS | {"status", "aliases", "checked_at", "policy_sha256", "previous_gate", "last_audit"} for r in rows)
    assert rows[0]["last_audit"] is None

    assert main(["audit", "m", "--data", str(files / "data.csv"), "--json", *common,
                 "--report-dir", str(tmp_path / "audits")]) == 0
    [audit] = _json_lines(capfd.readouterr().out)
    assert set(audit) == COMMON_KEYS | {"run_id", "drift"} and audit["command"] == "audit"
    assert audit["model"] == {"name": "m", "version": fair} and audit["decision"] == "passed"
    [section] = audit["attributes"]
    assert section["flagged_fraction_reference"] == section["flagged_fraction_current"]   # the same batch
    assert section["increase"] == 0.0 and section["ks_statistic"] == 0.0 and section["ks_pvalue"] == 1.0
    assert audit["drift"]["n_drifted"] == 0 and audit["drift"]["n_compared"] > 0
    assert main(["history", "m", "--json", *common]) == 0
    rows = _json_lines(capfd.readouterr().out)
    assert rows[0]["last_audit"]["decision"] == "passed" and rows[0]["last_audit"]["run_id"] == audit["run_id"]
