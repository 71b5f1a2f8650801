"""Process lifecycle under faults: a Prefect server killed mid-gate, signals, orphans.

Each test runs the product in subprocesses (real signals, a real temporary Prefect server) and
prints the wall times it measured (``-s`` shows them; they are reported, never asserted).

The faults guarded against: a temporary Prefect server killed after v1 is decided must not let the
gate record v2 nor end "internal error, could not decide" minutes later; SIGTERM must not wait on
Prefect's exit flush retrying each queued event against a stopped server; a SIGKILLed gate must not
leave its temporary server running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
from _support import write_proxy_audit  # noqa: E402
DECISIONS = ("passed", "failed", "undecided")


def _env(tmp: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_HTTP_REQUEST_", "PREFECT_API_URL"))}
    env.update({"PYTHONPATH": str(ROOT), "FAUX_CHECKS_HOME": str(tmp / "home"), "PREFECT_HOME": str(tmp / "prefect"),
                "OMP_NUM_THREADS": "1", **extra})
    env.pop("PREFECT_API_REQUEST_TIMEOUT", None)
    env.pop("PREFECT_CLIENT_MAX_RETRIES", None)
    return env


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from faux_checks_app.cli import main; sys.exit(main())", *args]   # as the command


def _servers(root: psutil.Process) -> list[psutil.Process]:
    """Prefect temporary servers (uvicorn children) under ``root``."""
    found = []
    for child in root.children(recursive=True):
        try:
            if "prefect.server.api.server:create_app" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def two_versions(tmp_path):
    """Two registered versions of one model (a linear model on a proxy of 'sex': it fails the policy), audit data, policy."""
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry

    write_proxy_audit(tmp_path)   # audit.csv and policy.toml
    torch.manual_seed(0)
    save_torchscript(torch.nn.Sequential(torch.nn.Linear(3, 1)), tmp_path / "m.pt")
    (tmp_path / "home").mkdir()
    uri = f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}"
    registry = Registry(uri)
    versions = [registry.register_version("credit", tmp_path / "m.pt") for _ in range(2)]
    return {"dir": tmp_path, "uri": uri, "registry": registry, "versions": versions}


def _gate_cmd(d: dict, *extra: str) -> list[str]:
    t = d["dir"]
    return _cli("gate", "credit", "--data", str(t / "audit.csv"), "--policy", str(t / "policy.toml"),
                "--tracking-uri", d["uri"], "--report-dir", str(t / "reports"), *extra)


# ------------------------------------------------------------------------------------------------ fault 2
@pytest.mark.slow
def test_prefect_server_killed_mid_gate_exits_2_naming_the_decided_version(two_versions):
    d = two_versions
    registry, (v1, v2) = d["registry"], d["versions"]
    ours = {p.pid for p in _servers(psutil.Process())}   # this process's Prefect test server (tests/conftest.py), if up
    t0 = time.monotonic()
    proc = subprocess.Popen(_gate_cmd(d, "--deadline", "1200"), env=_env(d["dir"]), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    killed_at, server = None, None
    while proc.poll() is None and time.monotonic() - t0 < 1200:
        # v1 being checked: kill Prefect. v1 still ends (its tasks need no API) and records its decision; the
        # health check before v2 then fails. (Killed once v1's decision appeared, the gate could be past that
        # check already on a fast machine, and then rightly decide v2 too: "v1, v2 were decided".)
        if registry._version("credit", v1).tags.get("fairness_gate") == "running":
            servers = _servers(psutil.Process(proc.pid))
            assert servers, "the gate runs without its temporary Prefect server"
            server = servers[0]
            server.kill()
            killed_at = time.monotonic()
            break
        time.sleep(0.2)
    out, err = proc.communicate(timeout=1200)
    ended = time.monotonic()
    assert killed_at is not None, (proc.returncode, err[-3000:])
    print(f"\nPrefect killed {killed_at - t0:.1f} s into the gate (v1 being checked); exit {proc.returncode} "
          f"{ended - killed_at:.1f} s after the kill ({ended - t0:.1f} s in all)")
    assert proc.returncode == 2, err[-3000:]
    assert "internal error" not in err
    assert "Prefect API unreachable at http://127.0.0.1:" in err, err[-3000:]
    v1_tags = registry._version("credit", v1).tags
    assert f"after v{v1} ({v1_tags['fairness_gate']}; recorded in MLflow: it stands) was decided" in err, err[-3000:]
    assert f"v{v2} not decided" in err
    assert f"credit v{v1}: {v1_tags['fairness_gate']} (decided before the Prefect API was lost; recorded)" in out
    assert f"credit v{v2}: not decided" in out
    # what was recorded: v1's decision intact with its run; v2 untouched (still new, never deployable)
    assert v1_tags["fairness_gate"] in DECISIONS and v1_tags.get("fairness_run_id")
    v2_tags = registry._version("credit", v2).tags
    assert v2_tags.get("fairness_gate") not in DECISIONS and "fairness_gate_lease" not in v2_tags, v2_tags
    assert registry.new_versions("credit") == [v2]
    assert (registry.client.get_registered_model("credit").aliases or {}).get("deployable") != v2
    assert not _alive(server) and [p for p in _servers(psutil.Process()) if p.pid not in ours] == []


# ------------------------------------------------------------------------------------------------ fault 3: signals
@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_ends_the_gate_with_its_temporary_server_stopped(two_versions, sig, code):
    d = two_versions
    env = _env(d["dir"])
    proc = subprocess.Popen(_gate_cmd(d), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    parent = psutil.Process(proc.pid)
    stop_at = time.monotonic() + 900
    servers: list = []
    while proc.poll() is None and time.monotonic() < stop_at:   # wait until the flow runs (its first task logged)
        servers = servers or _servers(parent)
        if servers and registry_running(d):
            break
        time.sleep(0.2)
    assert servers, "the gate never started Prefect's temporary server"
    pid_files = list((d["dir"] / "prefect" / "faux-checks-temporary-servers").glob("*.json"))
    assert [json.loads(p.read_text())["server_pid"] for p in pid_files] == [servers[0].pid]
    children = parent.children(recursive=True)
    sent = time.monotonic()
    proc.send_signal(sig)
    out = proc.communicate(timeout=600)[0]
    took = time.monotonic() - sent
    print(f"\n{signal.Signals(sig).name}: exit {proc.returncode} {took:.1f} s after the signal")
    assert proc.returncode == code, out[-3000:]
    assert f"{signal.Signals(sig).name} received; stopping" in out
    assert [c for c in children if _alive(c)] == [], [c.cmdline() for c in children if _alive(c)]
    assert not list((d["dir"] / "prefect" / "faux-checks-temporary-servers").glob("*.json"))   # clean stop: no pid file


def registry_running(d: dict) -> bool:
    """A version marked running by the gate (its check started)."""
    return any(d["registry"]._version("credit", v).tags.get("fairness_gate") == "running" for v in d["versions"])


# ------------------------------------------------------------------------------------------------ fault 3: orphans
STARTS_SERVER = """
import sys, time
from faux_checks_app.lifecycle import guard_temporary_server
guard_temporary_server(say=print)
if sys.argv[1] == "serve":
    from prefect.client.orchestration import get_client
    with get_client(sync_client=True) as client:   # Prefect's client starts the temporary server, as in a flow
        assert client.api_healthcheck() is None
    print("ready", flush=True)
    time.sleep(600)
"""


@pytest.mark.slow
def test_a_killed_commands_temporary_server_is_stopped_by_the_next_run(tmp_path):
    env = _env(tmp_path)
    owner = subprocess.Popen([sys.executable, "-c", STARTS_SERVER, "serve"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    servers: list = []
    try:
        lines = [owner.stdout.readline() for _ in range(1)]
        while lines[-1] and lines[-1].strip() != "ready":
            lines.append(owner.stdout.readline())
        assert lines[-1].strip() == "ready", "".join(lines)
        servers = _servers(psutil.Process(owner.pid))
        assert len(servers) == 1
        server = servers[0]
        entry = json.loads((tmp_path / "prefect" / "faux-checks-temporary-servers" / f"{server.pid}.json").read_text())
        assert entry["owner_pid"] == owner.pid and "prefect.server.api.server:create_app" in " ".join(entry["cmdline"])
        # another command on the same PREFECT_HOME while the owner lives: the live server is not an orphan
        other = subprocess.run([sys.executable, "-c", STARTS_SERVER, "check"], env=env, capture_output=True,
                               text=True, timeout=600)
        assert other.returncode == 0 and "orphaned" not in other.stdout, other.stdout + other.stderr
        assert _alive(server)
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=120)
        time.sleep(0.5)
        assert _alive(server)                                   # SIGKILL left it orphaned
        t0 = time.monotonic()
        again = subprocess.run([sys.executable, "-c", STARTS_SERVER, "check"], env=env, capture_output=True,
                               text=True, timeout=600)
        print(f"\norphan found and stopped by the next run in {time.monotonic() - t0:.1f} s (with its imports)")
        assert again.returncode == 0, again.stderr
        assert f"stopped an orphaned temporary Prefect server (pid {server.pid}, port {entry['port']})" in again.stdout
        assert f"earlier command (pid {owner.pid}) that was killed" in again.stdout
        assert not _alive(server)
        assert not list((tmp_path / "prefect" / "faux-checks-temporary-servers").glob("*.json"))
    finally:
        if owner.poll() is None:
            owner.kill()
        for process in servers:
            if _alive(process):
                process.kill()


def test_a_recycled_pid_is_never_stopped(tmp_path):
    """A pid file whose pid now runs something else (or started later) is removed, the process left alone."""
    from faux_checks_app.lifecycle import PID_FOLDER, reap_orphaned_servers

    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        folder = tmp_path / PID_FOLDER
        folder.mkdir()
        me = psutil.Process(bystander.pid)
        entries = {"same-start-not-ours": {"server_started": me.create_time()},
                   "recycled": {"server_started": me.create_time() - 3600,
                                "cmdline": ["uvicorn", "prefect.server.api.server:create_app"]}}
        for name, extra in entries.items():
            (folder / f"{name}.json").write_text(json.dumps({"server_pid": bystander.pid, "owner_pid": 999999999,
                                                             "owner_started": 0, "port": 1, **extra}))
        (folder / "torn.json").write_text('{"server_pid": ')
        said: list[str] = []
        assert reap_orphaned_servers(tmp_path, say=said.append) == []
        assert said == [] and bystander.poll() is None and list(folder.glob("*.json")) == []
    finally:
        bystander.kill()
