"""A flow run left Running by a killed command is marked Crashed on the next start; ``serve``'s stop ends its
flow-run processes; an early exit names what stands (the audit's own words, a Prefect 503 as an outage)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from types import SimpleNamespace

import httpx
import psutil
import pytest


class FakeClient:
    """The two calls of Prefect's sync client the marking uses; runs held in a dict id -> state."""

    def __init__(self, states: dict):
        self.states, self.set_calls = states, []

    def read_flow_run(self, run_id):
        if str(run_id) not in self.states:
            from prefect.exceptions import ObjectNotFound

            raise ObjectNotFound(http_exc=Exception("404"))
        return SimpleNamespace(state=self.states[str(run_id)])

    def set_flow_run_state(self, run_id, state, force=False):
        self.set_calls.append((str(run_id), state.name, force))
        self.states[str(run_id)] = state


def _dead_process() -> tuple[int, float]:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = psutil.Process(child.pid).create_time()
    child.wait()
    return child.pid, started


def _entry(home, run_id: str, pid: int, started: float) -> None:
    folder = home / "faux-checks-flow-runs"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{run_id}.json").write_text(json.dumps({"flow_run_id": run_id, "flow_name": "fairness-gate",
                                                       "flow_run_name": "brave-otter", "owner_pid": pid,
                                                       "owner_started": started}))


def test_runs_of_killed_commands_are_marked_crashed_and_live_ones_left(tmp_path):
    from prefect.states import Completed, Running

    from faux_checks_app.orphan_runs import mark_orphaned_flow_runs

    killed, finished, unknown, alive = (str(uuid.uuid4()) for _ in range(4))
    pid, started = _dead_process()
    for run_id in (killed, finished, unknown):
        _entry(tmp_path, run_id, pid, started)
    _entry(tmp_path, alive, os.getpid(), psutil.Process().create_time())     # this process: its run goes on
    client = FakeClient({killed: Running(), finished: Completed(), alive: Running()})
    said: list[str] = []
    marked = mark_orphaned_flow_runs(tmp_path, client=client, say=said.append)
    assert marked == [killed]
    assert client.set_calls == [(killed, "Crashed", True)]
    assert client.states[killed].is_crashed() and client.states[alive].is_running()
    assert len(said) == 1 and "brave-otter" in said[0] and "marked Crashed" in said[0]
    left = sorted(p.stem for p in (tmp_path / "faux-checks-flow-runs").glob("*.json"))
    assert left == [alive]                                                       # the others' files are gone
    assert mark_orphaned_flow_runs(tmp_path, client=client, say=said.append) == []   # nothing twice


def test_track_writes_the_run_and_forget_removes_it(tmp_path):
    from faux_checks_app import orphan_runs

    run = SimpleNamespace(id=uuid.uuid4(), name="calm-heron")
    path = orphan_runs.track(SimpleNamespace(name="fairness-audit"), run, None, home=tmp_path)
    entry = json.loads(path.read_text())
    assert entry["flow_run_id"] == str(run.id) and entry["owner_pid"] == os.getpid()
    assert entry["flow_name"] == "fairness-audit"
    orphan_runs.forget()
    assert not path.exists()


def test_serve_stop_ends_the_flow_run_processes():
    """``end_children`` ends every child of the process it runs in, so it runs in a process of its own: in the
    test process it would also end this pytest worker's Prefect test server (tests/conftest.py). The child ignores
    SIGTERM: it is killed after the wait and reaped by ``end_children`` (its pid is gone while its parent lives)."""
    script = (
        "import json, subprocess, sys, psutil\n"
        "from faux_checks_flows.deployments import end_children\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(120)'], "
        "stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)\n"
        "try:\n"
        "    child.stdout.readline()\n"                   # the child ignores SIGTERM from here on
        "    ended = end_children(wait_s=0.5)\n"
        "    print(json.dumps({'child': child.pid, 'ended': ended, 'exists': psutil.pid_exists(child.pid)}))\n"
        "finally:\n"
        "    child.kill()\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["ended"] == [seen["child"]]
    assert seen["exists"] is False                          # killed and reaped: not even a zombie is left


@pytest.mark.parametrize("status,outage", [(503, True), (502, True), (504, True), (500, False), (404, False)])
def test_a_prefect_api_answering_503_is_an_outage(status, outage):
    from faux_checks_flows.common import is_prefect_unreachable

    request = httpx.Request("POST", "http://prefect:4200/api/flow_runs/")
    exc = httpx.HTTPStatusError(f"Server error '{status}'", request=request,
                                response=httpx.Response(status, request=request))
    assert is_prefect_unreachable(exc) is outage
    try:
        raise RuntimeError("flow run not created") from exc
    except RuntimeError as wrapped:
        assert is_prefect_unreachable(wrapped) is outage


def test_a_stopped_audit_names_the_audit_not_a_gated_version(monkeypatch):
    import faux_checks_flows.audit as audit_flow

    from faux_checks_app.standing import stop_message

    monkeypatch.setattr(audit_flow, "AUDIT_PROGRESS", {"model_name": "credit", "version": "3", "stage": "running"})
    text = stop_message("audit")
    assert "audit of v3 of 'credit' was not recorded" in text and "being gated" not in text
    audit_flow.AUDIT_PROGRESS.update(stage="recorded", decision="failed")
    assert stop_message("audit") == "The audit of v3 of 'credit' was recorded (failed): it stands."
    assert stop_message("check") == "Nothing was recorded."


def test_a_stopped_gate_names_what_stands(monkeypatch):
    import faux_checks_flows.gate as gate_flow
    from faux_checks_flows.gate_deadline import RecordWindow
    from faux_checks_flows.gate_per_version import VersionOutcome

    from faux_checks_app.standing import stop_message

    progress = gate_flow.RunProgress()
    progress.start("credit", ["1", "2", "3", "4"], [VersionOutcome("credit", "1", "failed", [], run_id="r1"),
                                                    VersionOutcome("credit", "2", "undecided", ["lease held"])])
    window = RecordWindow()
    window.note("1", "failed", "r1")
    window.note("3", "passed", "r3", "alias 'deployable' not moved (promotion pending)")
    monkeypatch.setattr(gate_flow, "PROGRESS", progress)
    monkeypatch.setattr("faux_checks_flows.gate_deadline.WINDOW", window)
    assert stop_message("gate") == (
        "In the registry: v1 recorded failed (run r1): it stands; v2 undecided in this run, nothing recorded: it "
        "stays new; v3 recorded passed (run r3): it stands, alias 'deployable' not moved (promotion pending); v4 not "
        "decided: nothing recorded, it stays new and the next gate run gates it.")
