"""`faux-checks check --protected-file PATH --join-on KEY` end to end on a generated case.

Generator (tests/_support.make_data, seed 0): f0..f3 independent of sex, proxy = 2·[sex = M] + N(0, 0.5²); the fair
target reads f0, f1 (no flagged individual), the unfair one the proxy (almost everyone flagged). The audit file holds
a person key ``pid`` and no sex; the protected file holds ``pid`` and ``sex``, shuffled.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from faux_checks.gate.unmatched import flagged_bound
from faux_checks.inputs.models import save_torchscript
from faux_checks_app.cli import main

import _support
from _support import FAIR, UNFAIR

N = 600
POLICY = ('protected = "sex"\nlabel = "y"\nmin_aux_quality = 0.7\n[faux]\ndelta = 0.05\nmax_flagged_fraction = {limit}\n'
          '[aux]\nepochs = 8\n[decision]\nmin_group_rows = 20\naux_seeds = 1\n')


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("linked")
    data = _support.make_data(N, 0)
    data.insert(0, "pid", np.arange(5000, 5000 + N))
    data.drop(columns="sex").to_csv(d / "audit.csv", index=False)
    protected = data[["pid", "sex"]].sample(frac=1.0, random_state=3)
    protected.to_csv(d / "protected.csv", index=False)
    protected.iloc[:-24].to_csv(d / "protected_24_missing.csv", index=False)      # 24 of 600 rows unmatched (4%)
    protected.iloc[:-60].to_csv(d / "protected_60_missing.csv", index=False)      # 10%: over the 5% default share
    save_torchscript(_support.linear(FAIR), d / "fair.pt")
    save_torchscript(_support.linear(UNFAIR), d / "unfair.pt")
    (d / "policy.toml").write_text(POLICY.format(limit=0.1))
    (d / "exclude.toml").write_text(POLICY.format(limit=0.03) + '[protected_file]\njoin_on = "pid"\n'
                                    'unmatched = "exclude"\n')
    return {"dir": d, "data": d / "audit.csv", "fair": d / "fair.pt", "unfair": d / "unfair.pt",
            "policy": d / "policy.toml", "exclude": d / "exclude.toml", "protected": d / "protected.csv",
            "p24": d / "protected_24_missing.csv", "p60": d / "protected_60_missing.csv"}


def _check(files, model: str, *extra: str, policy: str = "policy", protected: str = "protected") -> list[str]:
    return ["check", "--model", str(files[model]), "--data", str(files["data"]), "--policy", str(files[policy]),
            "--protected-file", str(files[protected]), *extra]


def test_unfair_fails_fair_passes_and_scores_hold_no_c(files, tmp_path, capsys):
    unfair = main(_check(files, "unfair", "--join-on", "pid", "--scores-out", str(tmp_path / "s.csv"),
                         "--report-dir", str(tmp_path / "r")))
    assert unfair == 1
    scores = pd.read_csv(tmp_path / "s.csv")
    assert len(scores) == N and (scores["status"] == "scored").all()
    assert not {"sex", "pid"} & set(scores.columns)
    assert not scores.astype(str).isin(["F", "M"]).any().any()
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    rule = {r["rule"]: r for r in report["rules"]}["protected_file"]
    assert rule["status"] == "ok" and "600 of 600 audit rows matched" in rule["detail"]
    assert report["check"]["provenance"]["protected_file"]["unmatched"] == 0
    evidence = json.loads((tmp_path / "r" / "evidence.json").read_text())
    assert evidence["evidence"]["files"]["protected_file"]["sha256"] == _support.sha256(files["protected"])
    capsys.readouterr()
    assert main(_check(files, "fair", "--join-on", "pid")) == 0


def test_unmatched_rows_refused_by_default_exit_3(files, tmp_path, capsys):
    code = main(_check(files, "fair", "--join-on", "pid", "--report-dir", str(tmp_path / "r"), protected="p24"))
    err = capsys.readouterr().err
    assert code == 3
    assert "24 of 600 audit rows (4.00%)" in err and "unmatched = \"exclude\"" in err
    assert not (tmp_path / "r" / "report.json").exists()


def test_join_errors_exit_3_naming_the_column(files, tmp_path, capsys):
    assert main(_check(files, "fair", "--join-on", "person")) == 3
    assert "'person' is not in the audit data" in capsys.readouterr().err
    assert main(_check(files, "fair")) == 3                       # --protected-file without --join-on
    assert "--join-on KEY" in capsys.readouterr().err
    doubled = tmp_path / "doubled.csv"
    pd.concat([pd.read_csv(files["protected"]), pd.read_csv(files["protected"]).head(3)]).to_csv(doubled, index=False)
    files = {**files, "doubled": doubled}
    assert main(_check(files, "fair", "--join-on", "pid", protected="doubled")) == 3
    assert "3 'pid' keys occur more than once (6 rows" in capsys.readouterr().err


def test_exclude_decides_on_the_closed_form_bound(files, tmp_path, capsys):
    """4% unmatched, limit 3%: the fair target's matched interval [l, h] is under the limit, but the bound over all
    rows, [l(1-u), h(1-u)+u] = [0, ≈4.6%], is not: undecided (never passed); the unfair one still fails."""
    code = main(_check(files, "fair", "--report-dir", str(tmp_path / "r"), "--scores-out", str(tmp_path / "s.csv"),
                       policy="exclude", protected="p24"))
    assert code == 2
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    rules = {r["rule"]: r for r in report["rules"]}
    interval = report["check"]["interval"]
    lower, upper = interval["lower"], interval["upper"]
    assert upper <= 0.03                                          # the matched rows alone would pass
    u = 24 / 600
    assert rules["max_flagged_fraction"]["bound"] == pytest.approx([lower * (1 - u), upper * (1 - u) + u], abs=1e-12)
    assert flagged_bound(lower, upper, u) == pytest.approx((lower * (1 - u), upper * (1 - u) + u))
    assert rules["max_flagged_fraction"]["status"] == "inconclusive"
    assert report["check"]["n_individuals"] == 576
    scores = pd.read_csv(tmp_path / "s.csv")
    assert len(scores) == N and (scores["status"] == "not_audited").sum() == 24
    form = (f"protected attribute 'sex': linked file {files['p24']}, joined on pid: 24 of 600 rows unmatched "
            "(excluded; the bound widens by u = 4.00%: [l(1-u), h(1-u)+u] over all rows)")
    assert report["protected_form"] == form                       # the report states the form of c
    assert form in capsys.readouterr().out                        # and so does the text on stdout
    assert main(_check(files, "unfair", policy="exclude", protected="p24")) == 1


def test_exclude_over_the_share_and_score_large_exit_3(files, tmp_path, capsys):
    assert main(_check(files, "fair", policy="exclude", protected="p60")) == 3
    assert "over [protected_file] max_unmatched_share 5.00%" in capsys.readouterr().err
    code = main(["score-large", "--model", str(files["fair"]), "--data", str(files["data"]), "--policy",
                 str(files["policy"]), "--out", str(tmp_path / "s.csv"), "--workers", "0",
                 "--protected-file", str(files["protected"]), "--join-on", "pid"])
    assert code == 3
    assert "score-large does not join a protected file" in capsys.readouterr().err


def test_gate_preflight_joins_the_policys_protected_file(files, tmp_path):
    """`faux-checks gate` reads [protected_file] from the policy: c joined before the columns are checked; unmatched
    rows and exclude are configuration errors (exit 3) before the registry is asked anything."""
    from argparse import Namespace

    from faux_checks.errors import ConfigurationError
    from faux_checks_app.gate_plan import read_gate_inputs

    def policy(path: Path, unmatched: str = "refuse") -> str:
        body = POLICY.format(limit=0.1) + f'[protected_file]\npath = "{path}"\njoin_on = "pid"\nunmatched = "{unmatched}"\n'
        (tmp_path / "gate.toml").write_text(body)
        return str(tmp_path / "gate.toml")

    inputs = read_gate_inputs(Namespace(policy=policy(files["protected"]), data=str(files["data"])))
    assert len(inputs.frame) == N and "sex" in inputs.frame.columns and "pid" not in inputs.frame.columns
    from faux_checks_flows.gate_tasks import load_audit_data

    flow_frame = load_audit_data.fn(str(files["data"]), policy_path=policy(files["protected"]))   # the flow's read
    pd.testing.assert_frame_equal(flow_frame, inputs.frame)
    with pytest.raises(ConfigurationError, match="24 of 600 audit rows"):
        read_gate_inputs(Namespace(policy=policy(files["p24"]), data=str(files["data"])))
    with pytest.raises(ConfigurationError, match="unmatched = \"refuse\" only"):
        read_gate_inputs(Namespace(policy=policy(files["p24"], "exclude"), data=str(files["data"])))
