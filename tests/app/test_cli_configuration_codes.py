"""CLI configuration: ``--positive-label`` on ``gate`` and ``audit`` (precedence over the policy key) and
exit 3 for configuration mistakes of ``audit`` (``check``'s are in tests/app/test_check_cli.py).

No Prefect server: the flows are replaced by recorders of what the command hands them, or the command stops
before them. Data: ``_support.make_data`` with the label ``y`` written as text ``yes``/``no``.
"""

from __future__ import annotations

import json

import pytest
from _support import FAIR, linear, make_data, write_policy

from faux_checks.gate.policy import load_policy


class Handed(Exception):
    """Raised by the fake flow once it has recorded its arguments (the command then exits 2)."""


@pytest.fixture
def files(tmp_path):
    from faux_checks.inputs.models import save_torchscript

    df = make_data(300)
    df["y"] = df["y"].map({1: "yes", 0: "no"})
    df.to_csv(tmp_path / "gate.csv", index=False)
    save_torchscript(linear(FAIR), tmp_path / "fair.pt")
    write_policy(tmp_path / "policy.toml")                                        # no positive_label
    write_policy(tmp_path / "policy-no.toml", positive_label='"no"')             # the wrong class, on purpose
    return tmp_path


def _record_flow(monkeypatch, module: str, name: str) -> dict:
    """Replace ``flows.<module>.<name>`` (and skip Prefect's set-up: the environment, the orphan guard and the
    temporary server) with a recorder of its keyword arguments."""
    import importlib

    import faux_checks.settings as settings
    import faux_checks_app.gate_cli as gate_cli
    import faux_checks_app.lifecycle as lifecycle

    seen: dict = {}

    def fake(**kwargs):
        seen.update(kwargs)
        path = kwargs.get("policy_path")
        seen["policy_text"] = open(path).read() if path else None
        seen["policy"] = load_policy(path) if path else None
        raise Handed()
    fake.with_options = lambda **options: fake      # the command runs the flow with its run hooks attached
    monkeypatch.setattr(settings, "configure_environment", lambda: None)
    monkeypatch.setattr(lifecycle, "guard_temporary_server", lambda **kwargs: False)
    monkeypatch.setattr(gate_cli, "start_temporary_server", lambda *args: None)
    monkeypatch.setattr(importlib.import_module(f"faux_checks_flows.{module}"), name, fake)
    return seen


def test_policy_copy_sets_the_label_first_and_keeps_the_users_file(files, tmp_path):
    from faux_checks_app.policy_file import policy_with_positive_label

    given = files / "policy-no.toml"
    before = given.read_text()
    (tmp_path / "copy").mkdir()
    copy = policy_with_positive_label(str(given), "yes", tmp_path / "copy")
    assert given.read_text() == before                                             # never modified
    assert copy.read_text().splitlines()[0] == 'positive_label = "yes"   # --positive-label'
    assert load_policy(copy).positive_label == "yes"
    assert load_policy(copy).sha256() == load_policy(given, positive_label="yes").sha256()
    assert load_policy(copy).sha256() != load_policy(given).sha256()


def test_gate_positive_label_passes_preflight_and_reaches_the_flow_with_precedence(files, tmp_path, monkeypatch,
                                                                                  capfd):
    from faux_checks.registry import Registry
    from faux_checks_app.cli import main

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    reg = Registry(uri)
    reg.register_version("m", files / "fair.pt")
    common = ["gate", "m", "--data", str(files / "gate.csv"), "--tracking-uri", uri]
    # text labels, no positive class anywhere: a configuration error before the registry is touched
    assert main([*common, "--policy", str(files / "policy.toml")]) == 3
    err = capfd.readouterr().err
    assert "label" in err and "yes" in err and "positive_label" in err, err
    seen = _record_flow(monkeypatch, "gate", "gate")
    assert main([*common, "--policy", str(files / "policy-no.toml"), "--positive-label", "yes"]) == 2   # Handed
    assert seen["policy"].positive_label == "yes"                                  # the option over the policy key
    assert seen["policy"].sha256() == load_policy(files / "policy-no.toml", positive_label="yes").sha256()
    assert seen["policy_path"] != str(files / "policy-no.toml")                    # a copy; the user's file as it was
    assert 'positive_label = "no"' in (files / "policy-no.toml").read_text()
    assert 'positive_label = "no"' not in seen["policy_text"]
    from faux_checks_app.parser import build_parser

    for command in ("gate", "audit"):
        helptext = build_parser()._subparsers._group_actions[0].choices[command].format_help()
        assert "--positive-label" in helptext and "precedence over the policy key" in " ".join(helptext.split())


def _deployed(files, tmp_path):
    """A registered version holding 'deployable' (set directly: the audit's preflight reads only the alias)."""
    import mlflow

    from faux_checks.registry import Registry

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    version = Registry(uri).register_version("m", files / "fair.pt")
    mlflow.MlflowClient(uri).set_registered_model_alias("m", "deployable", version)
    return uri, version


def test_audit_configuration_mistakes_exit_3_with_nothing_recorded(files, tmp_path, monkeypatch, capfd):
    from faux_checks.registry import Registry
    from faux_checks_app.cli import main

    uri, version = _deployed(files, tmp_path)
    import faux_checks.settings as settings

    def refuse():
        raise AssertionError("Prefect was configured: the audit got past its configuration checks")
    monkeypatch.setattr(settings, "configure_environment", refuse)
    base = ["audit", "--tracking-uri", uri, "--data", str(files / "gate.csv")]

    assert main([*base[:1], "no-such-model", *base[1:], "--policy", str(files / "policy.toml")]) == 3
    lines = [ln for ln in capfd.readouterr().err.strip().splitlines() if "mlflow.store.db.utils" not in ln]
    assert len(lines) == 1, lines                                     # (MLflow's own log lines left out)
    (line,) = lines
    assert line.startswith("faux-checks audit: configuration error: no registered model named 'no-such-model'"), line

    other = make_data(300).rename(columns={"sex": "gender"})
    other.to_csv(tmp_path / "other.csv", index=False)
    assert main(["audit", "m", "--tracking-uri", uri, "--data", str(tmp_path / "other.csv"), "--policy",
                 str(files / "policy.toml"), "--json"]) == 3
    captured = capfd.readouterr()
    (obj,) = [json.loads(x) for x in captured.out.splitlines()]
    assert (obj["exit_code"], obj["error"], obj["decision"]) == (3, "configuration", None)
    assert "'sex' (protected attribute)" in obj["reasons"][0] and "nothing was recorded" in obj["reasons"][0]

    (tmp_path / "bad.toml").write_text("[faux]\ndelta = \"wide\"\n")
    assert main([*base[:1], "m", *base[1:], "--policy", str(tmp_path / "bad.toml")]) == 3
    assert "configuration error: the policy" in capfd.readouterr().err

    row = {r["version"]: r for r in Registry(uri).history("m")}[version]
    assert not any(k.startswith("fairness_audit") for k in row), row                # nothing recorded


def test_audit_positive_label_reaches_the_flow(files, tmp_path, monkeypatch):
    from faux_checks_app.cli import main

    uri, _ = _deployed(files, tmp_path)
    seen = _record_flow(monkeypatch, "audit", "audit")
    assert main(["audit", "m", "--tracking-uri", uri, "--data", str(files / "gate.csv"), "--policy",
                 str(files / "policy-no.toml"), "--positive-label", "yes"]) == 2     # Handed
    assert seen["positive_label"] == "yes" and seen["policy_path"] == str(files / "policy-no.toml")
