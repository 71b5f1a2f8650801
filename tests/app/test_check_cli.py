"""check_one_attribute decisions and the `faux-checks check` CLI: exit codes, outputs, bad inputs (C01-C04, C10)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks_app.cli import main
from faux_checks.inputs.models import save_torchscript
from faux_checks.gate.policy import load_policy

import _support
from _support import FAIR, FEATURES, UNFAIR


def make_data(n: int = 1500, seed: int = 0) -> pd.DataFrame:
    return _support.make_data(n, seed)


linear_model = _support.linear


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("cli")
    data = make_data()
    data.to_csv(d / "data.csv", index=False)
    save_torchscript(linear_model(FAIR), d / "fair.pt")
    save_torchscript(linear_model(UNFAIR), d / "unfair.pt")
    (d / "policy.toml").write_text(
        'protected = "sex"\nlabel = "y"\nmin_aux_quality = 0.7\n'
        '[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.1\n[aux]\nepochs = 8\n'
        '[testers.demographic_parity]\nthreshold = 0.2\n[decision]\nmin_group_rows = 20\n'
    )
    return {"dir": d, "data": d / "data.csv", "fair": d / "fair.pt", "unfair": d / "unfair.pt",
            "policy": d / "policy.toml"}


def test_linear_unfair_scores_match_closed_form(files):
    """Linear target on a proxy: every LIC score is σ'(z)|⟨w, a⟩|/‖a‖², checked through check_one_attribute."""
    data = pd.read_csv(files["data"])
    policy = load_policy(files["policy"])
    result = check_one_attribute(linear_model(UNFAIR), data, policy=policy)
    assert result.decision == "failed"
    assert result.exit_code == 1
    assert result.flagged_fraction > 0.3
    # both groups are affected, and the proxy carries the evidence
    assert set(result.by_group.index) == {"F", "M"}
    assert result.evidence_summary()[0]["column"] == "proxy"
    assert result.evidence_summary()[0]["share"] > 0.5
    fair = check_one_attribute(linear_model(FAIR), data, policy=policy)
    assert fair.decision == "passed" and fair.flagged_fraction < 0.02
    assert np.nanmedian(result.scores) > 10 * np.nanmedian(fair.scores)


def test_same_inputs_same_numbers(files):
    data = pd.read_csv(files["data"])
    policy = load_policy(files["policy"])
    a = check_one_attribute(linear_model(UNFAIR), data, policy=policy)
    b = check_one_attribute(linear_model(UNFAIR), data, policy=policy)
    np.testing.assert_array_equal(a.scores, b.scores)
    assert a.flagged_fraction == b.flagged_fraction
    assert a.provenance["data_sha256"] == b.provenance["data_sha256"]


def test_an_attribute_no_column_carries_passes_without_the_aux_floor(files):
    """Protected attribute independent of x: the aux model reads nothing (AUC ~0.5), every column is held as
    independent of c and the held block is jointly free of it, so nothing moves and every score is 0 by definition:
    the floor, which concerns what the move uses, is not applied (both figures reported) and the check passes."""
    data = pd.read_csv(files["data"])
    rng = np.random.default_rng(1)
    data = data.drop(columns="proxy").assign(proxy=rng.normal(size=len(data)))[FEATURES + ["sex", "y"]]
    result = check_one_attribute(linear_model(UNFAIR), data, policy=load_policy(files["policy"]))
    aux_rule = {r["rule"]: r for r in result.rules}["min_aux_quality"]
    assert aux_rule["observed"] < 0.7 and aux_rule["detail"].startswith("not applied: nothing is free to move")
    assert {r["rule"]: r["status"] for r in result.rules}["held_jointly_free"] == "ok"
    assert result.decision == "passed" and result.flagged_fraction == 0.0 and result.exit_code == 0


def test_cli_exit_codes_and_outputs(files, capsys, monkeypatch):
    monkeypatch.setenv("FAUX_CHECKS_REPORT_PLOTS", "on")   # the page's figures are asserted below
    d = files["dir"]
    code = main(["check", "--model", str(files["unfair"]), "--data", str(files["data"]), "--protected", "sex",
                 "--label", "y", "--policy", str(files["policy"]), "--scores-out", str(d / "scores.csv"),
                 "--report-dir", str(d / "rep")])
    assert code == 1
    scores = pd.read_csv(d / "scores.csv")
    assert len(scores) == 1500 and list(scores["row"]) == list(range(1500))
    assert set(scores["status"]) == {"scored"}
    report = json.loads((d / "rep" / "report.json").read_text())
    assert report["decision"] == "failed"
    assert report["check"]["flagged_fraction"] == pytest.approx(scores["flagged"].mean())
    assert "<img" in (d / "rep" / "report.html").read_text()
    # nothing is overwritten: the same outputs again is an error, exit 2, files unchanged
    before = (d / "scores.csv").read_bytes()
    code = main(["check", "--model", str(files["fair"]), "--data", str(files["data"]), "--protected", "sex",
                 "--policy", str(files["policy"]), "--scores-out", str(d / "scores.csv")])
    assert code == 2
    assert (d / "scores.csv").read_bytes() == before
    assert main(["check", "--model", str(files["fair"]), "--data", str(files["data"]), "--protected", "sex",
                 "--policy", str(files["policy"])]) == 0


def test_c01_missing_protected_values_cli_and_library(files, capsys):
    """C01: 6 of 200 rows miss `sex`: error naming the column and count, for every container."""
    data = make_data(200)
    data.loc[data.index[:6], "sex"] = None
    path = files["dir"] / "c01.csv"
    data.to_csv(path, index=False)
    code = main(["check", "--model", str(files["fair"]), "--data", str(path), "--protected", "sex",
                 "--policy", str(files["policy"])])
    err = capsys.readouterr().err
    assert code == 2
    assert "'sex'" in err and "6 missing values in 200 rows" in err
    from faux_checks import InputError, encode_protected

    for container in (data["sex"], data["sex"].to_numpy(dtype=object), list(data["sex"])):
        with pytest.raises(InputError, match=r"'sex' has 6 missing values in 200 rows"):
            encode_protected(container, name="sex")
    # the documented policy: drop and count, identically
    policy = load_policy(files["policy"]).with_overrides(missing_protected="drop")
    result = check_one_attribute(linear_model(FAIR), data, policy=policy)
    assert result.n_missing_protected == 6 and result.n_individuals == 194
    assert np.isnan(result.scores[:6]).all()


def test_c03_missing_columns_are_configuration_exit_3_and_write_nothing(files, capsys):
    """A missing protected column or a width the model does not take is a configuration error of
    `check` too: exit 3, one error line (``--quiet``: no progress lines), no report written (before: exit 2 and an undecided
    report)."""
    data = make_data(300).drop(columns=["sex"])
    path = files["dir"] / "c03.csv"
    data.to_csv(path, index=False)
    report = files["dir"] / "c03-report"
    assert main(["check", "--model", str(files["fair"]), "--data", str(path), "--protected", "sex",
                 "--policy", str(files["policy"]), "--report-dir", str(report), "--quiet"]) == 3
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"faux-checks check: configuration error: the policy {files['policy']} names 1 column(s) "
                           f"missing from {path} (300 rows, 6 columns: f0, f1, f2, f3, proxy, y): "
                           "'sex' (protected attribute)"), line
    assert not report.exists()
    # a feature the model needs is absent: the model gets 4 instead of 5 features
    data = make_data(300).drop(columns=["f3"])
    data.to_csv(path, index=False)
    assert main(["check", "--model", str(files["fair"]), "--data", str(path), "--protected", "sex",
                 "--policy", str(files["policy"]), "--report-dir", str(report), "--quiet"]) == 3
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "the target model does not accept X with 4 encoded features" in line and line.endswith("nothing was written")
    assert not report.exists()
    # a policy that does not load: exit 3 too
    bad = files["dir"] / "bad.toml"
    bad.write_text("protected = 3\n")
    assert main(["check", "--model", str(files["fair"]), "--data", str(files["data"]), "--policy", str(bad), "--quiet"]) == 3
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"faux-checks check: configuration error: the policy {bad}: policy {bad} is invalid"), line


def test_c04_awkward_feature_columns(files, capsys):
    """C04: an empty feature column, a constant one, and mixed types: precise errors or a correct run."""
    base = make_data(300)
    path = files["dir"] / "c04.csv"
    empty = base.assign(f3=np.nan)
    empty.to_csv(path, index=False)
    # with no feature spec, an all-NaN column is numeric and reaches encoding: named, with the count
    assert main(["check", "--model", str(files["fair"]), "--data", str(path), "--protected", "sex",
                 "--policy", str(files["policy"])]) == 2
    assert "'f3' is entirely empty (300 rows)" in capsys.readouterr().err
    constant = base.assign(f3=1.0)
    result = check_one_attribute(linear_model(FAIR), constant, policy=load_policy(files["policy"]))
    assert np.isfinite(result.scores).all()
    mixed = base.assign(f3=["a", 1] * 150)
    from faux_checks import FeatureSpec, InputError

    spec = FeatureSpec.fit(mixed, FEATURES)  # mixed column becomes categorical: levels '1', 'a'
    assert spec.columns[3].levels == ("1", "a")
    with pytest.raises(InputError, match="'f3' has 300 non-numeric values"):
        FeatureSpec.fit(base, FEATURES).encode(mixed.assign(f3=["a"] * 300))


def test_c10_pickle_refused_nothing_executed(files, tmp_path, capsys):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (Path.write_text, (marker, "ran"))

    torch.save({"model": Evil()}, tmp_path / "evil.pt")
    code = main(["check", "--model", str(tmp_path / "evil.pt"), "--data", str(files["data"]), "--protected", "sex",
                 "--policy", str(files["policy"])])
    assert code == 2
    assert not marker.exists()
    err = capsys.readouterr().err
    assert "refused to load" in err and "torch.jit.save" in err


@pytest.mark.parametrize("dtype", ["Int64", "boolean"])
def test_c02_nullable_protected_dtype_counts_na_and_serialises(files, dtype):
    """C02: Int64 {0, 1, NA} and boolean-with-NA protected columns: NA counted, JSON written."""
    data = make_data(400)
    values = (data["sex"] == "M").astype(int)
    data["sex"] = pd.array(values if dtype == "Int64" else values.astype(bool), dtype=dtype)
    data.loc[data.index[:9], "sex"] = pd.NA
    policy = load_policy(files["policy"]).with_overrides(missing_protected="drop")
    result = check_one_attribute(linear_model(UNFAIR), data, policy=policy)
    payload = json.loads(result.to_json())
    assert payload["n_missing_protected"] == 9
    assert payload["n_individuals"] == 391
    groups = {g["group"]: g["n"] for g in payload["by_group"]}
    expected = ({"0", "1"} if dtype == "Int64" else {"False", "True"})
    assert set(groups) == expected and sum(groups.values()) == 391
    assert any("9 rows with a missing protected value were not audited" in r for r in payload["reasons"])
    # the default policy stops instead, naming the column and the count
    from faux_checks import InputError

    with pytest.raises(InputError, match=r"'sex' has 9 missing values in 400 rows"):
        check_one_attribute(linear_model(UNFAIR), data, policy=load_policy(files["policy"]))


def test_check_writes_a_signed_evidence_pack_that_verify_checks(files, tmp_path, capsys):
    """`check --report-dir --signing-key`: evidence.json over model, data, policy, scores and report; verify 0, then
    1 after the model file changes by one byte; a key without --report-dir is refused before anything runs."""
    key = tmp_path / "k.pem"
    assert main(["keygen", str(key)]) == 0
    model = tmp_path / "model.pt"
    model.write_bytes(files["unfair"].read_bytes())
    out = tmp_path / "run"
    code = main(["check", "--model", str(model), "--data", str(files["data"]), "--policy", str(files["policy"]),
                 "--report-dir", str(out), "--scores-out", str(tmp_path / "s.csv"), "--signing-key", str(key), "-q"])
    assert code == 1
    pack = json.loads((out / "evidence.json").read_text())
    assert {"model", "data", "policy", "scores", "report", "report_html"} <= set(pack["evidence"]["files"])
    assert pack["evidence"]["decision"] == "failed" and pack["signature"]["algorithm"] == "Ed25519"
    assert main(["verify", str(out), "--public-key", f"{key}.pub"]) == 0
    model.write_bytes(model.read_bytes()[:-1] + bytes([model.read_bytes()[-1] ^ 1]))
    assert main(["verify", str(out), "--public-key", f"{key}.pub"]) == 1
    assert "model" in capsys.readouterr().out
    assert main(["check", "--model", str(files["fair"]), "--data", str(files["data"]), "--policy",
                 str(files["policy"]), "--signing-key", str(key)]) == 2
    assert "--report-dir" in capsys.readouterr().err
