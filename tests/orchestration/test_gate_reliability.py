"""The gate flow fails closed, loses nothing and trusts nothing (one Prefect harness for the module).

- a fault injected at each step (model download/load, aux training, scoring, GX validation,
  audit data, recording, promotion) ends 'undecided' / flow Failed / exit 2, nothing promoted,
  the cause in a report; a version whose decision was not recorded or not acted on stays new;
- a pickle that would write a file, registered as a version, is refused with nothing executed;
- every bad-input case (bad-inputs.md) not covered by test_flow.py goes through the flow;
- two gate processes on different versions at once both record their decisions; the second one is
  killed (SIGKILL) between recording and promotion, which leaves its version to the next run; the
  alias never points at a version whose gate tag is not 'passed'; reruns are idempotent;
- five versions in one flow run all get their decision; user files are never modified.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _support import FAIR, UNFAIR, build_cases, linear, make_data, sha256, write_policy
from faux_checks_app.cli import main

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


class InjectedFault(RuntimeError):
    pass


def _raise(*args, **kwargs):
    raise InjectedFault("injected fault")


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def env(tmp_path_factory, harness):
    """One registry and one set of user files for the module; each test uses its own model name."""
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry

    d = tmp_path_factory.mktemp("gate-reliability")
    uri = f"sqlite:///{d}/mlflow.db"
    make_data(400).to_csv(d / "data.csv", index=False)
    files = {"data": d / "data.csv", "policy": write_policy(d / "policy.toml"),
             "fair": save_torchscript(linear(FAIR), d / "fair.pt"),
             "unfair": save_torchscript(linear(UNFAIR), d / "unfair.pt")}
    cases = build_cases(d / "cases")
    for case in cases.values():
        for key in ("data", "model", "policy", "spec", "aux"):
            if getattr(case, key) is not None:
                files[f"{case.id}:{key}"] = getattr(case, key)
    hashes = {k: sha256(p) for k, p in files.items()}
    return {"dir": d, "uri": uri, "registry": Registry(uri), "api_url": harness, "cases": cases, "hashes": hashes,
            "reports": d / "reports", **files}


def gate_cli(env, name: str, data=None, policy=None) -> int:
    return main(["gate", name, "--data", str(data or env["data"]), "--policy", str(policy or env["policy"]),
                 "--tracking-uri", env["uri"], "--report-dir", str(env["reports"])])


def gate_flow(env, name: str, versions=None, data=None, policy=None, aux=None):
    from faux_checks_flows.gate import gate

    return gate(model_name=name, data_path=str(data or env["data"]), policy_path=str(policy or env["policy"]),
                tracking_uri=env["uri"], report_root=str(env["reports"]), versions=versions,
                aux_model_path=None if aux is None else str(aux), return_state=True)


def outcomes(state) -> list[dict]:
    """The per-version outcomes a gate flow run returned (Prefect wraps them in a ResultRecord)."""
    return getattr(state.data, "result", state.data)


def row(env, name: str, version: str) -> dict:
    return {r["version"]: r for r in env["registry"].history(name)}[version]


def report_of(tag_row: dict) -> dict:
    return json.loads(Path(tag_row["fairness_report"]).with_name("report.json").read_text())


def assert_alias_only_on_passed(env, name: str) -> None:
    """The invariant: the deployment alias never points at a version whose gate tag is not 'passed'."""
    aliased = env["registry"].alias_version(name, "deployable")
    if aliased is not None:
        assert row(env, name, aliased)["fairness_gate"] == "passed"


# ---------------------------------------------------------------------------- faults before the decision
FLOW_FAULTS = [
    ("model-download", "faux_checks.registry.Registry.download"),
    ("model-load", "faux_checks_gx._inputs.load_model"),
    ("aux-training", "faux_checks.method.auxiliary.AuxiliaryModel.fit"),
    ("scoring-raises", "faux_checks.method.faux.FAuxTester.evaluate"),
    ("scoring-all-nan", "faux_checks.method.faux.FAuxTester.evaluate"),
    ("gx-validation", "faux_checks_gx.validate_frame"),
    ("audit-data", "faux_checks.inputs.io.read_table"),
]


def _all_nan_evaluate():
    import dataclasses

    import numpy as np

    from faux_checks.method.faux import FAuxTester

    real = FAuxTester.evaluate

    def evaluate(self, X, c=None, *, evidence=True):
        res = real(self, X, c, evidence=evidence)
        return dataclasses.replace(res, scores=np.full_like(res.scores, np.nan))

    return evaluate


@pytest.mark.parametrize("fault_id,target", FLOW_FAULTS, ids=[f[0] for f in FLOW_FAULTS])
def test_fault_before_the_decision_is_recorded_undecided(fault_id, target, env, monkeypatch):
    from faux_checks_gx._inputs import _load_model_cached

    reg = env["registry"]
    name = f"fault-{fault_id}"
    version = reg.register_version(name, env["fair"])   # passes without the fault
    _load_model_cached.cache_clear()
    monkeypatch.setattr(target, _all_nan_evaluate() if fault_id == "scoring-all-nan" else _raise)
    code = gate_cli(env, name)
    monkeypatch.undo()
    _load_model_cached.cache_clear()
    assert code == 2
    tags = row(env, name, version)
    assert tags["fairness_gate"] == "undecided"
    assert reg.alias_version(name, "deployable") is None
    expected = "LIC scores are undefined" if fault_id == "scoring-all-nan" else "injected fault"
    assert any(expected in r for r in report_of(tags)["reasons"]), report_of(tags)["reasons"]


def test_artifact_fault_does_not_change_a_recorded_decision(env, monkeypatch):
    name = "fault-artifact"
    version = env["registry"].register_version(name, env["fair"])
    monkeypatch.setattr("faux_checks_flows.gate_per_version.create_markdown_artifact", _raise)
    state = gate_flow(env, name)
    assert state.is_completed()
    assert row(env, name, version)["fairness_gate"] == "passed"
    assert env["registry"].alias_version(name, "deployable") == version


# ---------------------------------------------------------------------------- recording and promotion
@pytest.mark.parametrize("method", ["record_decision", "log_gate_run"])
def test_record_failure_promotes_nothing_and_the_version_stays_new(method, env, monkeypatch):
    reg = env["registry"]
    name = f"fault-record-{method}"
    version = reg.register_version(name, env["fair"])
    monkeypatch.setattr(f"faux_checks.registry.Registry.{method}", _raise)
    assert gate_cli(env, name) == 2
    monkeypatch.undo()
    assert row(env, name, version)["fairness_gate"] == "running"
    assert reg.alias_version(name, "deployable") is None
    assert reg.new_versions(name) == [version]                       # re-gateable
    causes = [p for p in env["reports"].glob(f"{name}-v{version}-*-not-recorded/report.json")]
    assert len(causes) == 1
    cause = json.loads(causes[0].read_text())
    assert cause["decision"] == "undecided" and "could not be recorded" in cause["reasons"][0]
    assert "injected fault" in cause["reasons"][0]
    if method != "record_decision":
        return
    # the next run gates it again and completes the job; a third run has nothing to do
    assert gate_flow(env, name).is_completed()
    assert row(env, name, version)["fairness_gate"] == "passed"
    assert reg.alias_version(name, "deployable") == version
    again = gate_flow(env, name)
    assert again.is_completed() and reg.new_versions(name) == []


def test_transient_lock_while_recording_is_retried_once_and_recorded_once(env, monkeypatch):
    """A retried `record` must not trip over the report its first attempt wrote."""
    from faux_checks.registry import Registry

    reg = env["registry"]
    name = "fault-record-transient"
    version = reg.register_version(name, env["fair"])
    real, calls = Registry.record_decision, []

    def flaky(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("(sqlite3.OperationalError) database is locked")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Registry, "record_decision", flaky)
    state = gate_flow(env, name)
    assert state.is_completed(), state.message
    assert len(calls) == 2
    assert row(env, name, version)["fairness_gate"] == "passed"
    assert reg.alias_version(name, "deployable") == version
    assert len(list(env["reports"].glob(f"{name}-v{version}-*/report.json"))) == 1


def test_promotion_failure_is_undecided_and_left_to_the_next_run(env, monkeypatch):
    reg = env["registry"]
    name = "fault-promote"
    version = reg.register_version(name, env["fair"])
    monkeypatch.setattr("faux_checks.registry.Registry.promote", _raise)
    assert gate_cli(env, name) == 2
    monkeypatch.undo()
    (cause,) = env["reports"].glob(f"{name}-v{version}-*-not-promoted/report.json")
    cause = json.loads(cause.read_text())
    assert cause["decision"] == "undecided"
    assert "alias 'deployable' could not be moved" in cause["reasons"][0] and "injected fault" in cause["reasons"][0]
    tags = row(env, name, version)
    assert tags["fairness_gate"] == "passed" and tags["fairness_promotion"] == "pending"
    assert reg.alias_version(name, "deployable") is None
    assert reg.new_versions(name) == [version]
    assert gate_flow(env, name).is_completed()
    assert reg.alias_version(name, "deployable") == version
    assert row(env, name, version)["fairness_promotion"] == "done"
    assert reg.new_versions(name) == []


# ---------------------------------------------------------------------------- bad inputs through the flow
#: (flow-run id, case ids gated in that run as versions of one model; data, policy, aux from the first)
FLOW_RUNS = [
    ("models", ["C06-train-mode", "C07-logit", "C07-ambiguous", "C09-direct", "C10-pickle"]),
    ("C01-drop", ["C01-drop"]), ("C02-Int64", ["C02-Int64-drop"]), ("C02-boolean", ["C02-boolean-error"]),
    ("C03-feature", ["C03-feature"]), ("C04-empty", ["C04-empty"]), ("C04-constant", ["C04-constant"]),
    ("C04-mixed", ["C04-mixed"]), ("C05", ["C05-dead-aux"]), ("C07-probability", ["C07-probability"]),
    ("C08-categorical", ["C08-categorical"]),   # strings: every other run; booleans, 0/1 ints, softmax: CLI and GX
]


@pytest.fixture(scope="module")
def flow_cases(env):
    """Run every bad-input flow run once; return {case id: registry row}."""
    reg, cases = env["registry"], env["cases"]
    out = {}
    for run_id, ids in FLOW_RUNS:
        name = f"case-{run_id}"
        first = cases[ids[0]]
        versions = {cid: reg.register_version(name, cases[cid].model, cases[cid].spec) for cid in ids}
        state = gate_flow(env, name, data=first.data, policy=first.policy, aux=first.aux)
        all_passed = all(cases[cid].decision == "passed" for cid in ids)
        assert state.is_completed() is all_passed, (run_id, state.message)
        for cid, v in versions.items():
            out[cid] = (name, row(env, name, v))
    return out


@pytest.mark.parametrize("case_id", [cid for _, ids in FLOW_RUNS for cid in ids])
def test_case_through_the_flow(case_id, env, flow_cases):
    case = env["cases"][case_id]
    name, tags = flow_cases[case_id]
    assert tags["fairness_gate"] == case.decision
    report = report_of(tags)
    assert report["decision"] == case.decision
    assert any(case.reason in r for r in report["reasons"]), report["reasons"]
    check = report["check"] or {}
    if case.n_missing_protected is not None:
        assert check["n_missing_protected"] == case.n_missing_protected
    if case.n_undefined is not None:
        assert check["n_undefined"] == case.n_undefined
    if case.uses_protected is not None:
        assert check["uses_protected_directly"] is case.uses_protected
    aliased = env["registry"].alias_version(name, "deployable")
    assert (aliased == tags["version"]) is (case.decision == "passed")
    assert_alias_only_on_passed(env, name)


def test_pickle_that_writes_a_file_is_refused_through_the_flow(env, flow_cases):
    case = env["cases"]["C10-pickle"]
    _, tags = flow_cases["C10-pickle"]
    assert tags["fairness_gate"] == "undecided"
    reasons = report_of(tags)["reasons"]
    assert any("Nothing from it was executed" in r and "torch.jit.save" in r for r in reasons)
    assert not case.notes["marker"].exists()                          # the payload never ran


def test_flow_numbers_match_across_encodings_and_output_forms(flow_cases):
    def ff(cid):
        return float(flow_cases[cid][1]["fairness_flagged_fraction"])

    assert ff("C07-probability") == pytest.approx(ff("C07-logit"), abs=1e-12)       # declared form, same classifier
    assert ff("C08-categorical") == ff("C07-logit")          # the same unfair weights, sex as a Categorical


# ---------------------------------------------------------------------------- processes: concurrency and kill
GATE_SCRIPT = textwrap.dedent("""
    import json, os, signal, sys
    args = json.loads(sys.argv[1])
    if args.get("kill_after_record"):
        import faux_checks.registry as registry
        real = registry.Registry.record_decision

        def record_then_die(self, *a, **k):
            real(self, *a, **k)
            os.kill(os.getpid(), signal.SIGKILL)          # between recording and promotion

        registry.Registry.record_decision = record_then_die
    from faux_checks_flows.gate import gate
    state = gate(model_name=args["name"], data_path=args["data"], policy_path=args["policy"],
                 tracking_uri=args["uri"], report_root=args["reports"], versions=args["versions"],
                 return_state=True)
    outcomes = getattr(state.data, "result", state.data)
    print("RESULT " + json.dumps({"state": str(state.type.value), "outcomes": outcomes}, default=str))
""")


@pytest.fixture(scope="module")
def processes(env):
    """Two gate processes at once on one sqlite registry, on v1 and v2 (both pass the policy); the one on v2
    kills itself (SIGKILL) right after recording its decision, before promotion. v3 (unfair) is left new."""
    reg = env["registry"]
    name = "concurrent"
    v1, v2, v3 = (reg.register_version(name, env[m]) for m in ("fair", "fair", "unfair"))
    script = env["dir"] / "gate_process.py"
    script.write_text(GATE_SCRIPT)
    child_env = dict(os.environ, PREFECT_API_URL=env["api_url"],
                     PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    procs = {}
    for version, kill in ((v1, False), (v2, True)):
        args = {"name": name, "data": str(env["data"]), "policy": str(env["policy"]), "uri": env["uri"],
                "reports": str(env["reports"]), "versions": [version], "kill_after_record": kill}
        procs[version] = subprocess.Popen([sys.executable, str(script), json.dumps(args)], cwd=REPO, env=child_env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = {}
    for version, proc in procs.items():
        out, err = proc.communicate(timeout=900)
        line = next((ln for ln in out.splitlines() if ln.startswith("RESULT ")), None)
        results[version] = {"returncode": proc.returncode, "result": json.loads(line[7:]) if line else None,
                            "stderr": err[-3000:]}
    return {"name": name, "v1": v1, "v2": v2, "v3": v3, "results": results}


def test_concurrent_gates_both_record_their_decisions(env, processes):
    name, res, v1, v2 = processes["name"], processes["results"], processes["v1"], processes["v2"]
    assert res[v1]["returncode"] == 0, res[v1]["stderr"]
    assert [o["decision"] for o in res[v1]["result"]["outcomes"]] == ["passed"]
    assert res[v2]["returncode"] == -9 and res[v2]["result"] is None   # killed after recording, before its result
    for v in (v1, v2):
        assert row(env, name, v)["fairness_gate"] == "passed"
        assert row(env, name, v)["fairness_run_id"]                   # the audit run is there too
    assert_alias_only_on_passed(env, name)


def test_killed_gate_leaves_the_version_to_the_next_run(env, processes):
    reg, name, v1, v2, v3 = env["registry"], processes["name"], processes["v1"], processes["v2"], processes["v3"]
    tags = row(env, name, v2)
    assert tags["fairness_gate"] == "passed" and tags["fairness_promotion"] == "pending"
    assert reg.alias_version(name, "deployable") == v1                 # never half-promoted
    assert_alias_only_on_passed(env, name)
    assert reg.new_versions(name) == [v2, v3]                          # v2 again, and v3 never gated
    state = gate_flow(env, name)                                       # the next run finishes the job
    assert state.is_failed()                                           # v3 leans on the proxy
    assert [(o["version"], o["decision"], o["promoted"]) for o in outcomes(state)] == [
        (v2, "passed", True), (v3, "failed", False)]
    assert reg.alias_version(name, "deployable") == v2
    assert row(env, name, v2)["fairness_promotion"] == "done"
    assert_alias_only_on_passed(env, name)


def test_reruns_are_idempotent(env, processes):
    reg, name = env["registry"], processes["name"]
    before = {r["version"]: (r["fairness_gate"], r.get("fairness_flagged_fraction")) for r in reg.history(name)}
    alias = reg.alias_version(name, "deployable")
    assert gate_flow(env, name).is_completed() and reg.new_versions(name) == []   # nothing new: no-op
    again = gate_flow(env, name, versions=[processes["v1"], processes["v3"]])     # explicit re-gate
    assert [o["decision"] for o in outcomes(again)] == ["passed", "failed"]
    after = {r["version"]: (r["fairness_gate"], r.get("fairness_flagged_fraction")) for r in reg.history(name)}
    assert after == before
    assert reg.alias_version(name, "deployable") in (alias, processes["v1"])
    assert_alias_only_on_passed(env, name)


# ---------------------------------------------------------------------------- load and user files
def test_five_versions_in_one_run_all_get_a_decision(env, tmp_path):
    from faux_checks.inputs.models import save_torchscript

    reg = env["registry"]
    name = "load-5"
    make_data(500, seed=3).to_csv(tmp_path / "data500.csv", index=False)
    weights = [FAIR, UNFAIR, FAIR, [1.0, 0.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.0, 0.0, 0.0]]
    versions = [reg.register_version(name, save_torchscript(linear(w), tmp_path / f"m{i}.pt"))
                for i, w in enumerate(weights)]
    assert gate_cli(env, name, data=tmp_path / "data500.csv") == 1     # v2 and v4 lean on the proxy: blocked
    decisions = {r["version"]: r["fairness_gate"] for r in reg.history(name)}
    assert decisions == dict(zip(versions, ["passed", "failed", "passed", "failed", "passed"], strict=False))
    assert all(row(env, name, v)["fairness_run_id"] for v in versions)
    assert reg.new_versions(name) == []
    assert reg.alias_version(name, "deployable") == versions[-1]


def test_user_files_are_never_modified(env):
    """Data, policies, models, feature specs and aux models read by every test above are unchanged."""
    assert len(env["hashes"]) > 40
    for key, digest in env["hashes"].items():
        assert sha256(env[key]) == digest, key
