"""Operable under faults: bounded time, an unreachable registry, one gate per version, clean shutdown.

The CLI runs in subprocesses where a test needs real signals or two processes at once (each
starts its own temporary Prefect API, as two `faux-checks gate` commands would).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]

from _support import FAST_GATE_POLICY, write_proxy_audit  # noqa: E402

POLICY = FAST_GATE_POLICY


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAUX_CHECKS_HOME": str(tmp / "home"),
           "PREFECT_HOME": str(tmp / "prefect"), "OMP_NUM_THREADS": "1"}
    for name in ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"):
        env.pop(name, None)   # set by in-process tests; a subprocess gets the policy's
    return env


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from faux_checks_app.cli import main; sys.exit(main(sys.argv[1:]))", *args]


# ------------------------------------------------------------------------------------------------ bounded time
def test_retries_never_stack_on_an_unreachable_registry():
    from mlflow.exceptions import MlflowException

    from faux_checks.errors import InputError, RegistryUnreachableError
    from faux_checks_flows.common import retry_io_only

    class State:
        def __init__(self, exc):
            self.exc = exc

        def result(self):
            raise self.exc

    outage = MlflowException("API request to http://127.0.0.1:9/api/2.0/mlflow/registered-models/get failed with "
                             "exception HTTPConnectionPool(host='127.0.0.1', port=9): Max retries exceeded")
    assert [retry_io_only(None, None, State(e)) for e in (
        outage, RegistryUnreachableError("x"), ConnectionRefusedError(), InputError("bad"),
        OSError("disk full"), RuntimeError("database is locked"))] == [False, False, False, False, True, True]


def test_unreachable_registry_exits_2_within_the_deadline(tmp_path, capsys):
    """Nothing listens on the port: MLflow's client gives up after our retries, well within the deadline."""
    from faux_checks_app.cli import main

    (tmp_path / "d.csv").write_text("a,sex,income,y\n1,F,0,0\n2,M,1,1\n")   # passes the data check; the registry is what fails
    uri = f"http://127.0.0.1:{_free_port()}"
    t0 = time.monotonic()
    code = main(["gate", "m", "--data", str(tmp_path / "d.csv"), "--tracking-uri", uri, "--deadline", "600"])
    elapsed = time.monotonic() - t0
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"registry unreachable at {uri} for " in err and "nothing was recorded" in err
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES=2" in err
    # 2 retries, backoff factor 1: the retries ended it, not the 600-s deadline (whose stop names itself)
    assert "deadline of 600 s was reached" not in err, (elapsed, err)


def test_silent_registry_times_out_per_call(tmp_path, capsys):
    """A server that accepts connections and never answers: the per-call timeout (1 s, no retry) ends it."""
    from faux_checks_app.cli import main

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    (tmp_path / "d.csv").write_text("a,sex,income,y\n1,F,0,0\n2,M,1,1\n")   # passes the data check; the registry is what fails
    (tmp_path / "p.toml").write_text(POLICY + "[operations]\nregistry_timeout_s = 1\nregistry_retries = 0\n")
    uri = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        t0 = time.monotonic()
        code = main(["gate", "m", "--data", str(tmp_path / "d.csv"), "--tracking-uri", uri,
                     "--policy", str(tmp_path / "p.toml"), "--deadline", "600"])
        elapsed = time.monotonic() - t0
    finally:
        listener.close()
    err = capsys.readouterr().err
    assert code == 2 and f"registry unreachable at {uri} for " in err, err
    # one 1-s timeout, no retry: it waited the timeout out (a lower bound holds on any machine), and the timeout,
    # not the 600-s deadline (whose stop names itself), ended it
    assert elapsed > 0.9, (elapsed, err)
    assert "deadline of 600 s was reached" not in err, (elapsed, err)


def test_deadline_stops_the_command_with_exit_2(tmp_path, capsys, monkeypatch):
    """The deadline covers the whole command (here: a registry check that hangs past it)."""
    import faux_checks.registry.operations as ops
    from faux_checks_app.cli import main

    monkeypatch.setattr(ops, "check_reachable", lambda uri: time.sleep(600))
    (tmp_path / "d.csv").write_text("a,sex,income,y\n1,F,0,0\n2,M,1,1\n")   # passes the data check; the registry is what fails
    t0 = time.monotonic()
    code = main(["gate", "m", "--data", str(tmp_path / "d.csv"), "--deadline", "1.5"])
    assert code == 2 and 1.4 < time.monotonic() - t0 < 500                  # before the 600-s hang would end
    assert "the gate's deadline of 1.5 s was reached" in capsys.readouterr().err


def test_operations_are_not_part_of_the_policy_hash():
    from faux_checks.gate.policy import load_policy

    policy = load_policy()
    changed = policy.model_validate({**policy.model_dump(), "operations": {"deadline_s": 60}})
    assert changed.operations.deadline_s == 60 and changed.sha256() == policy.sha256()


# ------------------------------------------------------------------------------------------------ leases
@pytest.fixture
def registered(tmp_path):
    """A registered model version, its audit data and a fast policy, in a fresh sqlite registry."""
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.registry import Registry

    write_proxy_audit(tmp_path)   # audit.csv and policy.toml
    torch.manual_seed(0)
    save_torchscript(torch.nn.Sequential(torch.nn.Linear(3, 1)), tmp_path / "m.pt")
    (tmp_path / "home").mkdir()
    uri = f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}"
    registry = Registry(uri)
    version = registry.register_version("credit", tmp_path / "m.pt")
    return {"dir": tmp_path, "uri": uri, "registry": registry, "version": version}


def test_lease_is_exclusive_and_a_dead_owners_lease_expires(registered):
    from faux_checks.registry.operations import LEASE_TAG, acquire_lease, read_lease, release_lease

    registry, v = registered["registry"], registered["version"]
    mine, other = acquire_lease(registry, "credit", v, ttl_s=60, settle_s=0.05)
    assert mine is not None and other is None and read_lease(registry, "credit", v) == mine
    again, held = acquire_lease(registry, "credit", v, ttl_s=60, wait_s=0.3, settle_s=0.05, poll_s=0.1)
    assert again is None and held == mine                       # a live lease: the second gate does not get it
    assert release_lease(registry, mine) and read_lease(registry, "credit", v) is None
    # a dead owner on this host: its lease is expired at once, whatever its expiry says
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    registry.client.set_model_version_tag("credit", v, LEASE_TAG, '{"owner": "ghost", "host": "%s", "pid": %d, '
                                          '"expires_at": %f}' % (socket.gethostname(), dead.pid, time.time() + 3600))
    taken, _ = acquire_lease(registry, "credit", v, ttl_s=60, settle_s=0.05)
    assert taken is not None and taken.owner != "ghost"
    # another host's lease past its expiry
    registry.client.set_model_version_tag("credit", v, LEASE_TAG, '{"owner": "far", "host": "elsewhere", "pid": 1, '
                                          '"expires_at": %f}' % (time.time() - 1))
    assert acquire_lease(registry, "credit", v, ttl_s=60, settle_s=0.05)[0] is not None


@pytest.mark.slow
def test_two_concurrent_gates_make_one_run_and_one_decision(registered):
    d = registered["dir"]
    cmd = _cli("gate", "credit", "--data", str(d / "audit.csv"), "--policy", str(d / "policy.toml"),
               "--tracking-uri", registered["uri"], "--report-dir", str(d / "reports"), "--deadline", "900")
    env = _env(d)
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)
    second = subprocess.Popen(cmd, env={**env, "PREFECT_HOME": str(d / "prefect2")}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    outs = [p.communicate(timeout=960)[0] for p in (first, second)]
    codes = [first.returncode, second.returncode]
    registry = registered["registry"]
    from faux_checks.registry.client import GATE_EXPERIMENT, GATE_TAG

    runs = registry.client.search_runs([registry._experiment_id(GATE_EXPERIMENT)])
    tags = registry._version("credit", registered["version"]).tags
    assert len(runs) == 1, (codes, outs)                          # one gate run recorded for v1
    assert tags[GATE_TAG] in ("passed", "failed", "undecided") and "fairness_gate_lease" not in tags
    assert codes[0] == codes[1], (codes, outs)                   # both report the one decision
    assert sum("was decided by another gate run while this one waited" in o for o in outs) == 1, outs


# ------------------------------------------------------------------------------------------------ shutdown
@pytest.mark.slow
def test_sigterm_stops_the_gate_and_leaves_no_child_process(registered):
    import psutil

    d = registered["dir"]
    cmd = _cli("gate", "credit", "--data", str(d / "audit.csv"), "--policy", str(d / "policy.toml"),
               "--tracking-uri", registered["uri"], "--report-dir", str(d / "reports"))
    proc = subprocess.Popen(cmd, env=_env(d), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    parent = psutil.Process(proc.pid)
    children: list = []
    stop_at = time.monotonic() + 600
    while not children and proc.poll() is None and time.monotonic() < stop_at:   # Prefect's temporary server
        children = parent.children(recursive=True)
        time.sleep(0.1)
    assert children, "the gate never started Prefect's temporary server"
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=900)[0]
    assert proc.returncode == 143, out
    assert "SIGTERM received; stopping" in out
    left = [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert left == [], [c.cmdline() for c in left]
    tags = registered["registry"]._version("credit", registered["version"]).tags
    assert tags.get("fairness_gate") in (None, "running"), tags     # no decision it did not finish
    assert "fairness_gate_lease" not in tags                        # its lease released on the way out
    assert registered["registry"].new_versions("credit") == [registered["version"]]


def test_sigint_in_process_exits_130(tmp_path, capsys, monkeypatch):
    import faux_checks.registry.operations as ops
    from faux_checks_app.cli import main

    def interrupted(uri):
        threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        time.sleep(5)

    monkeypatch.setattr(ops, "check_reachable", interrupted)
    (tmp_path / "d.csv").write_text("a,sex,income,y\n1,F,0,0\n2,M,1,1\n")   # passes the data check; the registry is what fails
    assert main(["gate", "m", "--data", str(tmp_path / "d.csv")]) == 130
    assert "SIGINT received" in capsys.readouterr().err


def test_a_unique_violation_on_the_lease_write_reads_as_taken(registered, monkeypatch):
    """The database's unique-constraint error on the lease write (PostgreSQL via an MLflow server) means
    another gate wrote the lease first: taken, waited for and named, never raised."""
    import json

    from mlflow.exceptions import RestException

    from faux_checks.registry.operations import LEASE_TAG, acquire_lease, is_unique_violation, read_lease

    registry, v = registered["registry"], registered["version"]
    real_set = registry.client.set_model_version_tag
    theirs = {"owner": "other-gate", "host": "elsewhere", "pid": 1, "expires_at": time.time() + 3600}
    message = ('(psycopg.errors.UniqueViolation) duplicate key value violates unique constraint '
               '"model_version_tag_pk"\nDETAIL:  Key (workspace, key, name, version)=(default, '
               f'fairness_gate_lease, credit, {v}) already exists.')
    writes = []

    def racing_write(name, version, key, value):
        writes.append(key)
        real_set(name, version, key, json.dumps(theirs))   # the other gate's INSERT lands first ...
        raise RestException({"error_code": "BAD_REQUEST", "message": message})   # ... and ours breaks the key

    monkeypatch.setattr(registry.client, "set_model_version_tag", racing_write)
    mine, other = acquire_lease(registry, "credit", v, ttl_s=60, wait_s=0.3, settle_s=0.01, poll_s=0.1)
    assert mine is None and other is not None and other.owner == "other-gate"
    assert writes == [LEASE_TAG]                          # one write; after that the live lease is waited for
    assert read_lease(registry, "credit", v).owner == "other-gate"
    # what the check recognises, and what it does not (any other error still raises)
    assert is_unique_violation(RestException({"error_code": "BAD_REQUEST", "message": message}))
    assert is_unique_violation(RuntimeError("wrapped")) is False
    chained = RuntimeError("MLflow failed")
    chained.__cause__ = type("UniqueViolation", (Exception,), {})("key exists")
    assert is_unique_violation(chained)
    assert is_unique_violation(Exception("(sqlite3.IntegrityError) UNIQUE constraint failed: model_version_tags.key"))

    def broken_write(*args):
        raise RestException({"error_code": "INVALID_PARAMETER_VALUE", "message": "tag value too long"})

    registry.client.delete_model_version_tag("credit", v, LEASE_TAG)
    monkeypatch.setattr(registry.client, "set_model_version_tag", broken_write)
    with pytest.raises(RestException, match="too long"):
        acquire_lease(registry, "credit", v, ttl_s=60, settle_s=0.01)
