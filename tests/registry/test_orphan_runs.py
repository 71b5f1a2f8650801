"""Orphan decision runs: a run left by a gate killed while recording is never a second decision.

A gate killed (or MLflow frozen) while writing a record can leave a finished run tagged with a decision and
some decision tags; its rerun adds a run of its own, and one version must still have one decision run. Every
gate run is ``fairness_run_state = recording`` until its version's decision tags name it (then ``decided``);
the rerun that records the decision marks the killed gate's run ``abandoned``, superseded by its own, and the
readers (:meth:`Registry.gate_runs`, :meth:`Registry.audit_runs`) leave such runs out.
"""

from __future__ import annotations

import pytest

from _support import FAIR, linear, make_data, write_policy


class Killed(BaseException):
    """The gate process dying mid-write (not an error any fail-closed wrapper catches)."""


@pytest.fixture
def env(tmp_path, harness):
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry

    make_data(400).to_csv(tmp_path / "data.csv", index=False)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    return {"tmp": tmp_path, "uri": uri, "registry": Registry(uri), "policy": write_policy(tmp_path / "policy.toml"),
            "model": save_torchscript(linear(FAIR), tmp_path / "fair.pt")}


def _gate(env, name):
    from faux_checks_flows.gate import gate

    return gate(model_name=name, data_path=str(env["tmp"] / "data.csv"), policy_path=str(env["policy"]),
                tracking_uri=env["uri"], report_root=str(env["tmp"] / "reports"), return_state=True)


def _all_runs(registry, name, version):
    return registry._search_runs("gate", name, version=version)


@pytest.mark.slow
def test_a_gate_killed_while_recording_leaves_no_second_decision(env, monkeypatch):
    from faux_checks.registry.trail import DecisionTrail

    registry, name = env["registry"], "orphans"
    version = registry.register_version(name, env["model"])
    real = DecisionTrail.record_decision

    def dies_half_way(self, name_, version_, **kwargs):   # some decision tags reach the registry, then the kill
        self._set_version_tags(name_, str(version_), {"fairness_run_id": kwargs["run_id"],
                                                     "fairness_flagged_fraction": str(kwargs["flagged_fraction"])})
        raise Killed("SIGKILL while recording")

    monkeypatch.setattr(DecisionTrail, "record_decision", dies_half_way)
    with pytest.raises(Killed):
        _gate(env, name)
    monkeypatch.setattr(DecisionTrail, "record_decision", real)
    (orphan,) = _all_runs(registry, name, version)
    assert orphan.data.tags["fairness_run_state"] == "recording" and orphan.data.tags["decision"] == "passed"
    assert registry.new_versions(name) == [version]               # still new: gated again
    assert registry.gate_runs(name) == []                          # a half-written record is no decision

    assert _gate(env, name).is_completed()                          # the rerun decides it
    tags = {r["version"]: r for r in registry.history(name)}[version]
    assert tags["fairness_gate"] == "passed"
    runs = {r.info.run_id: r.data.tags for r in _all_runs(registry, name, version)}
    assert len(runs) == 2                                           # the store holds both runs ...
    assert runs[orphan.info.run_id]["fairness_run_state"] == "abandoned"
    assert runs[orphan.info.run_id]["fairness_superseded_by"] == tags["fairness_run_id"]
    assert runs[tags["fairness_run_id"]]["fairness_run_state"] == "decided"
    decisions = registry.gate_runs(name)
    assert [(r["version"], r["run_id"], r["decision"]) for r in decisions] == [(version, tags["fairness_run_id"],
                                                                                "passed")]   # ... one decision
