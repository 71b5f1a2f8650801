"""`faux-checks check` with the protected attribute given only as per-row probabilities ([protected_probabilities]).

Generator (tests/_support.make_data, seed 0): f0..f3 independent of sex, proxy = 2·[sex = M] + N(0, 0.5²); the fair
target reads f0, f1 (no one flagged), the unfair one the proxy (almost everyone flagged). The audit file holds no sex,
only p_F, p_M: calibrated probabilities p_M = σ(2a·s) of a signal s = a·(2c − 1) + N(0, 1) (P(c = M | s) under a
prior of ½), whose expected ROC-AUC against c is Φ(√2·a): a = 2.5 gives ≈ 0.9998 (sharp), a = 0.99 gives ≈ 0.92, under
the test policy's min_sharpness 0.96 (blunt for it).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from faux_checks.inputs.models import save_torchscript
from faux_checks_app.cli import main

import _support
from _support import FAIR, UNFAIR

N = 500
POLICY = ('label = "y"\nmin_aux_quality = 0.7\n[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.1\n[aux]\nepochs = 8\n'
          '[decision]\nmin_group_rows = 20\naux_seeds = 1\n[protected_probabilities]\ncolumn = "sex"\n'
          'groups = { F = "p_F", M = "p_M" }\ndraws = 2\nmin_sharpness = 0.96\n')


def _audit(data: pd.DataFrame, a: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    c = (data["sex"] == "M").to_numpy(dtype=float)
    p = expit(2 * a * (a * (2 * c - 1) + rng.normal(size=len(c))))
    return data.drop(columns="sex").assign(p_F=1 - p, p_M=p)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("estimated")
    data = _support.make_data(N, 0)
    _audit(data, 2.5, 1).to_csv(d / "sharp.csv", index=False)
    _audit(data, 0.99, 1).to_csv(d / "blunt.csv", index=False)
    off = _audit(data, 2.5, 1)
    off.loc[:6, ["p_F", "p_M"]] = [0.51, 0.5]                         # 7 rows sum to 1.01
    off.to_csv(d / "off.csv", index=False)
    save_torchscript(_support.linear(FAIR), d / "fair.pt")
    save_torchscript(_support.linear(UNFAIR), d / "unfair.pt")
    (d / "policy.toml").write_text(POLICY)
    return {"sharp": d / "sharp.csv", "blunt": d / "blunt.csv", "off": d / "off.csv", "fair": d / "fair.pt",
            "unfair": d / "unfair.pt", "policy": d / "policy.toml"}


def _check(files, model: str, data: str, *extra: str) -> list[str]:
    return ["check", "--model", str(files[model]), "--data", str(files[data]), "--policy", str(files["policy"]), *extra]


def test_unfair_fails_and_neither_c_nor_its_probabilities_reach_the_scores(files, tmp_path, capsys):
    code = main(_check(files, "unfair", "sharp", "--scores-out", str(tmp_path / "s.csv"),
                       "--report-dir", str(tmp_path / "r")))
    assert code == 1
    scores = pd.read_csv(tmp_path / "s.csv")
    assert len(scores) == N and (scores["status"] == "scored").all()
    assert not {"sex", "p_F", "p_M"} & set(scores.columns)
    assert not scores.astype(str).isin(["F", "M"]).any().any()
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    rules = {r["rule"]: r for r in report["rules"]}
    assert rules["max_flagged_fraction"]["status"] == "exceeded"
    detail = rules["protected_probabilities"]["detail"]
    assert "estimated probabilities (2 draws), expected ROC-AUC 1.000" in detail
    assert f"(between-draw variance {np.var(report['check']['interval']['draws'], ddof=1):.3g})" in detail
    imputed = report["check"]["provenance"]["protected_probabilities"]
    assert len(imputed["seeds"]) == 2 and imputed["expected_auc"] > 0.96
    interval = report["check"]["interval"]
    assert interval["fraction"] == pytest.approx(np.mean(interval["draws"]))
    assert interval["lower"] > 0.1


def test_fair_passes_on_sharp_probabilities_and_is_undecided_on_blunt_ones(files, capsys):
    assert main(_check(files, "fair", "sharp")) == 0
    capsys.readouterr()
    assert main(_check(files, "fair", "blunt")) == 2
    out = capsys.readouterr().out
    assert "expected ROC-AUC 0.9" in out and "under min_sharpness 0.96" in out
    assert "expected ROC-AUC >= 0.96 are needed" in out


def test_probabilities_that_do_not_sum_to_1_exit_3_before_scoring(files, tmp_path, capsys):
    code = main(_check(files, "fair", "off", "--report-dir", str(tmp_path / "r")))
    assert code == 3
    err = capsys.readouterr().err
    assert "7 of 500 rows" in err and "do not sum to 1" in err
    assert not (tmp_path / "r" / "report.json").exists()


def test_score_large_refuses_probabilities_and_the_registry_gate_preflight_takes_them(files, tmp_path, capsys):
    from argparse import Namespace

    from faux_checks.errors import ConfigurationError
    from faux_checks_app.gate_plan import read_gate_inputs

    code = main(["score-large", "--model", str(files["fair"]), "--data", str(files["sharp"]), "--policy",
                 str(files["policy"]), "--out", str(tmp_path / "s.csv"), "--workers", "0"])
    assert code == 3
    assert "score-large does not impute a protected attribute given as probabilities" in capsys.readouterr().err
    inputs = read_gate_inputs(Namespace(policy=str(files["policy"]), data=str(files["sharp"])))
    assert {"p_F", "p_M"} <= set(inputs.frame.columns) and "sex" not in inputs.frame.columns   # the flow gates this
    assert "sex" in inputs.rows.columns and not {"p_F", "p_M"} & set(inputs.rows.columns)     # the preflight's draw
    assert set(inputs.rows["sex"]) == {"F", "M"} and len(inputs.rows) == N
    with pytest.raises(ConfigurationError, match="7 of 500 rows.*do not sum to 1.*nothing was recorded"):
        read_gate_inputs(Namespace(policy=str(files["policy"]), data=str(files["off"])))


def test_the_drift_audit_refuses_probabilities_before_recording_anything(files, tmp_path, capsys):
    import mlflow

    from faux_checks.registry import Registry

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    version = Registry(uri).register_version("m", files["fair"])
    mlflow.MlflowClient(uri).set_registered_model_alias("m", "deployable", version)
    code = main(["audit", "m", "--tracking-uri", uri, "--data", str(files["sharp"]), "--policy", str(files["policy"])])
    assert code == 3
    err = capsys.readouterr().err
    assert "which the drift audit does not impute" in err and "nothing was recorded" in err


def test_notebook_verb_takes_the_probabilities_through_the_policy(files):
    import faux_checks

    result = faux_checks.check(_support.linear(UNFAIR), pd.read_csv(files["sharp"]), policy=files["policy"])
    assert result.decision == "failed"
    rules = result.rules.set_index("rule")
    assert rules.loc["protected_probabilities", "status"] == "ok"
    assert "sex" not in result.scores.columns and "p_M" not in result.scores.columns
