"""Fail closed: a fault injected at each step of the CLI, the library and the GX suite ends 'undecided'.

Every fault is injected into an input that passes without it (the fair model), so the fault is the
only thing that can change the outcome; none may end in a pass. The Prefect flow's share is in
test_gate_reliability.py.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from _support import FAIR, linear, make_data, sha256, write_policy
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks_app.cli import main
from faux_checks.gate.policy import load_policy


class InjectedFault(RuntimeError):
    pass


def _raise(*args, **kwargs):
    raise InjectedFault("injected fault")


def _all_nan(undefined: bool):
    """A FAuxTester.evaluate that breaks its contract: every score NaN (flagged as undefined or not)."""
    from faux_checks.method.faux import FAuxTester

    real = FAuxTester.evaluate

    def evaluate(self, X, c=None, *, evidence=True):
        res = real(self, X, c, evidence=evidence)
        return dataclasses.replace(res, scores=np.full_like(res.scores, np.nan),
                                   undefined=np.full(len(res.scores), undefined))

    return evaluate


#: (id, target to patch, replacement factory, reason expected in the report)
FAULTS = [
    ("model-load", "faux_checks.inputs.models.load_model", lambda: _raise, "injected fault"),
    ("aux-training", "faux_checks.method.auxiliary.AuxiliaryModel.fit", lambda: _raise, "injected fault"),
    ("scoring-raises", "faux_checks.method.faux.FAuxTester.evaluate", lambda: _raise, "injected fault"),
    ("scoring-all-nan", "faux_checks.method.faux.FAuxTester.evaluate", lambda: _all_nan(False), "LIC scores are undefined"),
    ("scoring-all-nan-undefined", "faux_checks.method.faux.FAuxTester.evaluate", lambda: _all_nan(True),
     "LIC scores are undefined"),
    ("scores-out", "faux_checks.inputs.io.write_scores", lambda: _raise, "injected fault"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from faux_checks.inputs.models import save_torchscript

    d = tmp_path_factory.mktemp("fail-closed")
    make_data(400).to_csv(d / "data.csv", index=False)
    save_torchscript(linear(FAIR), d / "fair.pt")
    write_policy(d / "policy.toml")
    lenient = (d / "policy.toml").read_text().replace("[faux]\n", "[faux]\nmax_undefined_fraction = 1.0\n")
    (d / "policy-lenient.toml").write_text(lenient)
    return {"dir": d, "data": d / "data.csv", "model": d / "fair.pt", "policy": d / "policy.toml",
            "lenient": d / "policy-lenient.toml"}


def _cli(files, out, policy="policy"):
    return main(["check", "--model", str(files["model"]), "--data", str(files["data"]), "--protected", "sex",
                 "--policy", str(files[policy]), "--report-dir", str(out / "report"),
                 "--scores-out", str(out / "scores.csv")])


def test_control_passes_without_a_fault(files, tmp_path):
    assert _cli(files, tmp_path) == 0


@pytest.mark.parametrize("fault_id,target,factory,reason", FAULTS, ids=[f[0] for f in FAULTS])
def test_cli_fault_is_undecided_with_the_cause_in_the_report(fault_id, target, factory, reason, files, tmp_path,
                                                              monkeypatch, capsys):
    monkeypatch.setattr(target, factory())
    before = {k: sha256(files[k]) for k in ("data", "model", "policy")}
    code = _cli(files, tmp_path)
    assert code == 2, capsys.readouterr()
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["decision"] == "undecided" and report["exit_code"] == 2
    assert any(reason in r for r in report["reasons"]), report["reasons"]
    assert {k: sha256(files[k]) for k in ("data", "model", "policy")} == before


@pytest.mark.parametrize("undefined", [False, True])
def test_all_undefined_scores_never_pass_even_if_the_policy_allows_them(undefined, files, tmp_path, monkeypatch):
    """max_undefined_fraction = 1 must not turn 'no defined score at all' into a pass."""
    monkeypatch.setattr("faux_checks.method.faux.FAuxTester.evaluate", _all_nan(undefined))
    assert _cli(files, tmp_path, policy="lenient") == 2
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["decision"] == "undecided"
    assert "no individual has a defined LIC score" in report["reasons"][0]


def test_inf_scores_are_undefined_not_flagged_or_passed(files, monkeypatch):
    from faux_checks.method.faux import FAuxTester

    real = FAuxTester.evaluate

    def evaluate(self, X, c=None, *, evidence=True):
        res = real(self, X, c, evidence=evidence)
        scores = res.scores.copy()
        scores[::2] = np.inf
        return dataclasses.replace(res, scores=scores)

    monkeypatch.setattr(FAuxTester, "evaluate", evaluate)
    result = check_one_attribute(linear(FAIR), pd.read_csv(files["data"]), policy=load_policy(files["policy"]))
    assert result.decision == "undecided"
    assert result.n_undefined == 200 and np.isnan(result.scores[::2]).all()
    assert not np.isinf(result.scores).any()


def test_report_writer_fault_exits_2(files, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("faux_checks.report.build.write_report", _raise)
    assert _cli(files, tmp_path) == 2
    assert "injected fault" in capsys.readouterr().err
    assert not (tmp_path / "report" / "report.json").exists()


def test_allow_pickle_is_the_explicit_opt_in(files, tmp_path, capsys):
    """A pickled module is refused by default and loads with --allow-pickle (trusted files only)."""
    torch.save(linear(FAIR), tmp_path / "pickled.pt")
    args = ["check", "--model", str(tmp_path / "pickled.pt"), "--data", str(files["data"]), "--protected", "sex",
            "--policy", str(files["policy"])]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "refused to load" in err and "--allow-pickle" in err
    assert main(args + ["--allow-pickle"]) == 0
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert "## Security" in readme and "--allow-pickle" in readme


# ---------------------------------------------------------------------------- GX suite
@pytest.fixture(scope="module")
def suite(files):
    import faux_checks_gx as E

    return E.build_suite(load_policy(files["policy"]), model_path=str(files["model"]))


GX_FAULTS = [
    ("model-load", "faux_checks_gx._inputs.load_model", lambda: _raise, "injected fault"),
    ("aux-training", "faux_checks.method.auxiliary.AuxiliaryModel.fit", lambda: _raise, "injected fault"),
    ("scoring-raises", "faux_checks.method.faux.FAuxTester.evaluate", lambda: _raise, "injected fault"),
    ("scoring-all-nan", "faux_checks.method.faux.FAuxTester.evaluate", lambda: _all_nan(False), "LIC scores are undefined"),
    ("gx-run", "faux_checks_gx.suite._run_gx", lambda: _raise, "GX validation could not run"),
    ("gx-result", "faux_checks_gx.suite._decide", lambda: _raise, "GX validation result could not be read"),
]


@pytest.mark.parametrize("fault_id,target,factory,reason", GX_FAULTS, ids=[f[0] for f in GX_FAULTS])
def test_expectation_fault_is_undecided(fault_id, target, factory, reason, files, suite, monkeypatch):
    import faux_checks_gx as E
    from faux_checks_gx._inputs import _load_model_cached

    _load_model_cached.cache_clear()  # a cached model would skip the patched loader
    monkeypatch.setattr(target, factory())
    frame = pd.read_csv(files["data"])
    outcome = E.validate_frame(frame, suite)
    _load_model_cached.cache_clear()
    assert outcome.decision == "undecided" and outcome.exit_code == 2
    assert any(reason in r for r in outcome.reasons), outcome.reasons
    assert outcome.gx_success is False
