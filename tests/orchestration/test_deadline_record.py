"""The gate's deadline bounds what it records, and the exit names what stands in the registry.

Four concurrent gates under load: one recorded v6 ``passed`` and moved ``deployable`` to it after its 600 s
deadline, then exited 2 saying nothing unfinished was recorded. Here the deadline is induced at each step
(the record window's deadline moved into the past, or the SIGALRM of the command's deadline raised while the
decision is being written): nothing is recorded or promoted once it passed, a record under way is finished and
named as standing, and the exit code (2) comes with what the registry holds.
"""

from __future__ import annotations

import signal
import time

import pytest

from _support import FAIR, linear, make_data, write_policy

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(tmp_path_factory, harness):
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry

    d = tmp_path_factory.mktemp("deadline-record")
    make_data(300).to_csv(d / "data.csv", index=False)
    return {"dir": d, "uri": f"sqlite:///{d}/mlflow.db", "registry": Registry(f"sqlite:///{d}/mlflow.db"),
            "policy": write_policy(d / "policy.toml"), "fair": save_torchscript(linear(FAIR), d / "fair.pt")}


def _gate(env, name: str) -> int:
    from faux_checks_app.cli import main

    return main(["gate", name, "--data", str(env["dir"] / "data.csv"), "--policy", str(env["policy"]),
                 "--tracking-uri", env["uri"], "--report-dir", str(env["dir"] / "reports"), "--deadline", "900"])


def _tags(env, name: str, version: str) -> dict:
    return {r["version"]: r for r in env["registry"].history(name)}[version]


def test_deadline_just_before_the_record_records_nothing(env, monkeypatch, capsys):
    import faux_checks_flows.gate_per_version as per_version
    from faux_checks_flows.gate_deadline import WINDOW

    name = "deadline-before-record"
    version = env["registry"].register_version(name, env["fair"])
    real = per_version._check_version

    def check_then_expire(*args, **kwargs):
        outcome = real(*args, **kwargs)
        WINDOW.ends_at = time.monotonic() - 1.0          # the deadline passed while the version was checked
        return outcome

    monkeypatch.setattr(per_version, "_check_version", check_then_expire)
    assert _gate(env, name) == 2
    out = capsys.readouterr().out
    assert _tags(env, name, version)["fairness_gate"] == "running"          # not recorded: it stays new
    assert env["registry"].alias_version(name, "deployable") is None
    assert env["registry"].new_versions(name) == [version]
    assert "undecided" in out


def test_deadline_just_before_the_promotion_promotes_nothing(env, monkeypatch, capsys):
    from faux_checks.registry import Registry
    from faux_checks_flows.gate_deadline import WINDOW

    name = "deadline-before-promote"
    version = env["registry"].register_version(name, env["fair"])
    real = Registry.record_decision

    def record_then_expire(self, *args, **kwargs):
        result = real(self, *args, **kwargs)
        WINDOW.ends_at = time.monotonic() - 1.0          # the deadline passed while the decision was recorded
        return result

    monkeypatch.setattr(Registry, "record_decision", record_then_expire)
    assert _gate(env, name) == 2
    tags = _tags(env, name, version)
    assert tags["fairness_gate"] == "passed" and tags["fairness_promotion"] == "pending"   # recorded, whole
    assert env["registry"].alias_version(name, "deployable") is None                      # never promoted after it
    (cause,) = (env["dir"] / "reports").glob(f"{name}-v{version}-*-not-promoted/report.json")
    assert "the deadline was reached" in cause.read_text()


def test_a_deadline_arriving_while_the_alias_moves_is_named_as_standing(env, monkeypatch, capsys):
    """The reported case: the alarm reaches the command once the record and the promotion are written."""
    from faux_checks.registry import Registry

    name = "deadline-during-promote"
    version = env["registry"].register_version(name, env["fair"])
    real = Registry.promote

    def promote_then_alarm(self, *args, **kwargs):
        result = real(self, *args, **kwargs)
        signal.raise_signal(signal.SIGALRM)              # the command's deadline, delivered late by a blocked call
        return result

    monkeypatch.setattr(Registry, "promote", promote_then_alarm)
    assert _gate(env, name) == 2
    err = capsys.readouterr().err
    assert _tags(env, name, version)["fairness_gate"] == "passed"
    assert env["registry"].alias_version(name, "deployable") == version
    assert "the gate's deadline of 900 s was reached" in err
    assert f"v{version} recorded passed (run " in err and "it stands, alias 'deployable' moved to it" in err
    assert "Nothing unfinished was recorded" not in err
