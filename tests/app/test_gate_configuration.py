"""Configuration checked before the registry is touched, re-gates of undecided versions, alias semantics and a quiet
unknown model.

Data: ``_support.make_data`` with ``sex``/``y`` renamed ``gender``/``outcome``, so the shipped policy (``sex``,
``income``) does not fit it: a forgotten policy (the shipped one kept).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _support import FAIR, POLICY, linear, make_data

ROOT = Path(__file__).resolve().parents[2]
OWN_POLICY = POLICY.replace('protected = "sex"', 'protected = "gender"').replace('label = "y"', 'label = "outcome"')


@pytest.fixture
def files(tmp_path):
    from faux_checks.inputs.models import save_torchscript

    make_data(400).rename(columns={"sex": "gender", "y": "outcome"}).to_csv(tmp_path / "gate.csv", index=False)
    save_torchscript(linear(FAIR), tmp_path / "fair.pt")
    save_torchscript(linear(FAIR + [0.0, 0.0]), tmp_path / "wide.pt")   # expects 7 inputs, the data encodes to 5
    (tmp_path / "own.toml").write_text(OWN_POLICY)
    return tmp_path


def _no_flow(monkeypatch):
    """Fail the test if the command gets as far as configuring Prefect (the flow's first step)."""
    import faux_checks.settings as settings

    def refuse():
        raise AssertionError("Prefect was configured: the gate got past its configuration checks")
    monkeypatch.setattr(settings, "configure_environment", refuse)


def test_policy_columns_names_every_role(tmp_path):
    from faux_checks.gate.policy import load_policy
    from faux_checks.gate.preflight import policy_columns

    policy = load_policy(None, protected="gender", label="outcome")
    assert policy_columns(policy) == {"gender": "protected attribute", "outcome": "label"}
    (tmp_path / "p.toml").write_text('protected = "gender"\nlabel = "outcome"\n[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.1\nadmissible = ["f2"]\n'
                                     '[linked_columns]\ntitle = { by = "country", F = { uk = ["Ms"] }, '
                                     'M = { uk = ["Mr"] } }\n')
    assert policy_columns(load_policy(tmp_path / "p.toml")) == {
        "gender": "protected attribute", "outcome": "label", "f2": "admissible column", "title": "linked column",
        "country": "linked 'by' column"}


def test_forgotten_policy_records_nothing_and_exits_3(files, tmp_path, capfd, monkeypatch):
    from faux_checks.registry import Registry
    from faux_checks_app.cli import main

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    reg = Registry(uri)
    versions = [reg.register_version("m", files / "fair.pt") for _ in range(2)]
    _no_flow(monkeypatch)
    capfd.readouterr()
    assert main(["gate", "m", "--data", str(files / "gate.csv"), "--tracking-uri", uri]) == 3
    err = capfd.readouterr().err.strip().splitlines()
    assert err == [f"faux-checks gate: configuration error: the shipped policy (no --policy given) names 2 column(s) "
                   f"missing from {files / 'gate.csv'} (400 rows, 7 columns: f0, f1, f2, f3, proxy, gender, outcome): "
                   "'sex' (protected attribute), 'income' (label); nothing was recorded. Fix: give --policy with "
                   "protected = \"COLUMN\" and label = \"COLUMN\" (and admissible/linked columns) naming columns of "
                   "the data"]
    assert reg.new_versions("m") == versions                       # nothing claimed, marked or recorded
    assert all("fairness_gate" not in r and "fairness_started_at" not in r for r in reg.history("m"))

    # --json: the same error as one object with exit code 3 (and nothing else on stdout)
    assert main(["gate", "m", "--data", str(files / "gate.csv"), "--tracking-uri", uri, "--json"]) == 3
    (obj,) = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    assert (obj["exit_code"], obj["error"], obj["decision"]) == (3, "configuration", None)
    assert "'sex' (protected attribute), 'income' (label)" in obj["reasons"][0]

    # --version of a version the model lacks (with a policy that fits the data, which is judged first): configuration too
    assert main(["gate", "m", "--data", str(files / "gate.csv"), "--policy", str(files / "own.toml"),
                 "--tracking-uri", uri, "--version", "9", "--force"]) == 3
    assert capfd.readouterr().err.strip().endswith(f"registered model 'm' has no version '9'; existing versions: "
                                                   f"{versions}; nothing was recorded")


def test_spec_width_against_the_model_is_configuration(files, tmp_path, capfd, monkeypatch):
    from faux_checks.registry import Registry
    from faux_checks_app.cli import main

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    reg = Registry(uri)
    reg.register_version("m", files / "fair.pt")
    wide = reg.register_version("m", files / "wide.pt")
    _no_flow(monkeypatch)
    capfd.readouterr()
    assert main(["gate", "m", "--data", str(files / "gate.csv"), "--policy", str(files / "own.toml"),
                 "--tracking-uri", uri]) == 3
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith(f"faux-checks gate: configuration error: v{wide} of 'm': the target model does not accept "
                           "X with 5 encoded features")
    assert line.endswith("Pass the feature spec the model was trained with; nothing was recorded")
    assert len(reg.new_versions("m")) == 2


def test_unknown_model_is_one_line_without_prefect(files, tmp_path):
    """In a fresh interpreter: one line on stderr, exit 3, and Prefect / GX never imported (so no server started)."""
    script = textwrap.dedent(f"""
        import json, sys
        sys.path[:0] = [{str(ROOT)!r}]
        from faux_checks_app.cli import main
        code = main(["gate", "no-such-model", "--data", {str(files / 'gate.csv')!r}, "--policy",
                     {str(files / 'own.toml')!r}, "--tracking-uri", "sqlite:///" + {str(tmp_path / 'mlflow.db')!r}])
        heavy = sorted({{m.split(".")[0] for m in sys.modules}} & {{"prefect", "great_expectations", "torch"}})
        print(json.dumps({{"code": code, "heavy": heavy}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"code": 3, "heavy": []}, proc.stderr
    ours = [ln for ln in proc.stderr.splitlines() if "mlflow.store.db.utils" not in ln]   # MLflow creating the new db
    assert ours == [f"faux-checks gate: configuration error: no registered model named 'no-such-model' in "
                    f"sqlite:///{tmp_path / 'mlflow.db'}; existing models (0): []. Check the name or register the "
                    "model first; nothing was recorded"]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "mlflow.db").exists()          # the lookup created no registry file


def _decide(reg, version, decision, **tags):
    reg.record_decision("m", version, decision=decision, flagged_fraction=tags.pop("flagged_fraction", None),
                        delta=0.05, aux_quality=None, report_uri="r", run_id="run", extra=tags)


def test_gate_plan_regates_only_undecided_without_a_check_once_policy_or_data_changed(files, tmp_path):
    from faux_checks.registry import Registry

    reg = Registry(f"sqlite:///{tmp_path}/mlflow.db")
    v = [reg.register_version("m", files / "fair.pt") for _ in range(5)]
    _decide(reg, v[0], "passed", flagged_fraction=0.01, fairness_policy_sha256="old")
    _decide(reg, v[1], "undecided", fairness_undecided_cause="no_check", fairness_policy_sha256="old",
            fairness_data_sha256="data")
    _decide(reg, v[2], "undecided", fairness_undecided_cause="no_check", fairness_policy_sha256="new",
            fairness_data_sha256="data")
    _decide(reg, v[3], "undecided", flagged_fraction=0.2, fairness_undecided_cause="", fairness_policy_sha256="old")
    plan = {r["version"]: r for r in reg.gate_plan("m", policy_sha256="new", data_sha256="data")}
    assert [plan[x]["action"] for x in v] == ["decided", "regate", "skip", "skip", "new"]
    assert "the policy changed since" in plan[v[1]]["reason"]
    assert "under the same policy and audit data" in plan[v[2]]["reason"]
    assert "after its check ran" in plan[v[3]]["reason"] and f"--version {v[3]} --force" in plan[v[3]]["reason"]
    plan = {r["version"]: r for r in reg.gate_plan("m", policy_sha256="new", data_sha256="other")}
    assert plan[v[2]]["action"] == "regate" and "the audit data changed" in plan[v[2]]["reason"]


def test_alias_never_moves_backwards_unless_asked(files, tmp_path):
    from faux_checks.errors import UndecidableError
    from faux_checks.registry import PROMOTION_TAG, Registry

    reg = Registry(f"sqlite:///{tmp_path}/mlflow.db")
    v3, v4, v5 = (reg.register_version("m", files / "fair.pt") for _ in range(3))
    for v in (v3, v4):
        _decide(reg, v, "passed", flagged_fraction=0.0, **{PROMOTION_TAG: "pending"})
    assert reg.promote("m", v3) == v3 and reg.promote("m", v4) == v4      # forwards: moves
    _decide(reg, v3, "passed", flagged_fraction=0.0, **{PROMOTION_TAG: "pending"})   # v3 re-gated, passes again
    assert reg.promote("m", v3) == v4 and reg.alias_version("m", "deployable") == v4
    row = {r["version"]: r for r in reg.history("m")}[v3]
    assert (row[PROMOTION_TAG], row["fairness_promotion_kept_on"]) == ("superseded", v4)
    assert v3 not in reg.new_versions("m")                                # not pending any more: not re-gated forever
    assert reg.promote("m", v3, allow_rollback=True) == v3 and reg.alias_version("m", "deployable") == v3
    _decide(reg, v5, "passed", flagged_fraction=0.0)
    assert reg.promote("m", v5) == v5
    _decide(reg, v5, "failed", flagged_fraction=0.5)       # re-gated, fails; say the alias was not removed
    assert reg.promote("m", v3) == v3                      # a newer holder that no longer passes is no bar
    with pytest.raises(UndecidableError):
        reg.promote("m", v5)
    assert reg.alias_version("m", "deployable") == v3


@pytest.mark.slow
def test_fixed_policy_regates_without_force_and_the_alias_stays_on_the_newest(files, tmp_path, harness, capfd):
    """A version recorded undecided before its check could run (the flow called directly with the
    shipped policy records it ``no_check``) is decided by the next gate with the fixed policy, no --force; the
    same run again has nothing to gate; re-gating the older passing version leaves the alias on the newer one."""
    from faux_checks_flows.gate import gate

    from faux_checks.registry import Registry
    from faux_checks_app.cli import main

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    reg = Registry(uri)
    v1 = reg.register_version("m", files / "fair.pt")
    data = str(files / "gate.csv")
    reports = str(tmp_path / "reports")
    gate(model_name="m", data_path=data, tracking_uri=uri, report_root=reports, return_state=True)
    (row,) = reg.history("m")
    assert (row["fairness_gate"], row["fairness_undecided_cause"]) == ("undecided", "no_check")

    capfd.readouterr()
    common = ["--data", data, "--tracking-uri", uri, "--report-dir", reports, "--json"]
    # the shipped policy again: still a configuration error, exit 3
    assert main(["gate", "m", *common]) == 3
    assert json.loads(capfd.readouterr().out)["exit_code"] == 3
    assert reg.history("m")[0]["fairness_checked_at"] == row["fairness_checked_at"]    # nothing recorded again
    v2 = reg.register_version("m", files / "fair.pt")
    assert main(["gate", "m", "--policy", str(files / "own.toml"), *common]) == 0
    objs = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    assert [(o["model"]["version"], o["decision"], o["promoted"]) for o in objs] == [(v1, "passed", True),
                                                                                     (v2, "passed", True)]
    assert reg.alias_version("m", "deployable") == v2

    assert main(["gate", "m", "--policy", str(files / "own.toml"), *common]) == 0        # nothing new
    assert capfd.readouterr().out == ""

    assert main(["gate", "m", "--policy", str(files / "own.toml"), "--version", v1, "--force", *common]) == 0
    (obj,) = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    assert (obj["decision"], obj["promoted"]) == ("passed", False)
    assert f"alias 'deployable' stays on v{v2}, a newer version that passed" in " ".join(obj["reasons"])
    assert reg.alias_version("m", "deployable") == v2


@pytest.mark.slow
def test_every_version_undecided_is_not_exit_0(files, tmp_path, harness, capfd):
    """An undecided whose check ran (aux model too weak) under the same policy and data: not re-gated, reported as
    skipped in --json with its reason, and "nothing to gate" exits 2, not 0."""
    from faux_checks_flows.gate import gate

    from faux_checks.registry import Registry
    from faux_checks_app.cli import main

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    reg = Registry(uri)
    v1 = reg.register_version("m", files / "fair.pt")
    weak = files / "weak.toml"           # the proxy recovers gender with AUC ≈ 0.9 < 0.999: undecided, after the check
    weak.write_text(OWN_POLICY.replace("min_aux_quality = 0.7", "min_aux_quality = 0.999"))
    data = str(files / "gate.csv")
    gate(model_name="m", data_path=data, policy_path=str(weak), tracking_uri=uri,
         report_root=str(tmp_path / "reports"), return_state=True)
    (row,) = reg.history("m")
    assert row["fairness_gate"] == "undecided" and row["fairness_undecided_cause"] == ""
    capfd.readouterr()
    assert main(["gate", "m", "--data", data, "--policy", str(weak), "--tracking-uri", uri, "--json"]) == 2
    captured = capfd.readouterr()
    (obj,) = [json.loads(line) for line in captured.out.splitlines()]
    assert (obj["model"]["version"], obj["decision"], obj["skipped"]) == (v1, "undecided", True)
    assert "after its check ran (not enough evidence)" in obj["reasons"][0]
    assert "are recorded undecided and none can be re-gated now" in captured.err


def test_an_unreadable_signing_key_is_a_configuration_error_before_anything_is_recorded(tmp_path, capsys):
    from faux_checks_app.cli import main

    (tmp_path / "d.csv").write_text("a,sex,income\n1,F,0\n")
    (tmp_path / "not-a-key.pem").write_text("hello\n")
    code = main(["gate", "m", "--data", str(tmp_path / "d.csv"), "--signing-key", str(tmp_path / "not-a-key.pem"),
                 "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db"])
    err = capsys.readouterr().err
    assert code == 3 and "not a readable PEM private key" in err and "nothing was recorded" in err, err
