"""Concurrent leases on a PostgreSQL-backed MLflow server.

On PostgreSQL two gates that both found no lease tag both INSERT it; the second INSERT breaks the
tags table's primary key and MLflow's server answers ``BAD_REQUEST: (psycopg.errors.UniqueViolation)
duplicate key ...``. The lease reads that error as a lost race; unhandled, it would end the whole flow with
exit 2 and no version named (1 of 16 concurrent gates; 3 of 48 simultaneous tag writes measured
here). These tests start their own PostgreSQL (the binaries of the machine, a socket in a temporary folder,
no TCP) and an MLflow server on it. To make the race certain rather than likely, the test holds an EXCLUSIVE lock on
``model_version_tags`` (reads still pass, writes wait) until every writer is queued on it, then lets
them all go at once: one INSERT wins, every other one gets the UniqueViolation.

Skipped only where the PostgreSQL binaries are absent (``.ci/run`` installs them).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _pg_bin() -> Path | None:
    """The folder of ``initdb``/``pg_ctl``: on PATH, else Debian's /usr/lib/postgresql/<major>/bin."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent   # Debian's /usr/local/bin links point into the versioned folder
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    return None


PG_BIN = _pg_bin()
pytestmark = pytest.mark.skipif(PG_BIN is None, reason="PostgreSQL binaries absent (initdb, pg_ctl)")


def _as_pg_user(cmd: list[str]) -> list[str]:
    """initdb refuses root: run the server's tools as ``postgres`` (or ``nobody``) when we are root."""
    if os.geteuid() != 0:
        return cmd
    import pwd

    for user in ("postgres", "nobody"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            continue
        return ["runuser", "-u", user, "--", *cmd]
    pytest.fail("running as root and neither a 'postgres' nor a 'nobody' user exists for initdb")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def pg_mlflow():
    """PostgreSQL on a socket in a fresh folder, and an MLflow server (2 workers) on it."""
    base = Path(tempfile.mkdtemp(prefix="fxpg", dir="/tmp"))   # short: a socket path has a 107-byte limit
    os.chmod(base, 0o777)
    data, log = base / "data", base / "pg.log"
    subprocess.run(_as_pg_user([str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "fx"]), check=True,
                   capture_output=True)
    subprocess.run(_as_pg_user([str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-o",
                                f"-k {base} -c listen_addresses='' -c fsync=off", "start"]),
                   check=True, capture_output=True)
    server = None
    try:
        db_url = f"postgresql+psycopg://fx@/postgres?host={base}"
        port = _free_port()
        env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
        server_log = open(base / "mlflow.log", "w")
        server = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", db_url, "--default-artifact-root",
             str(base / "artifacts"), "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            env=env, stdout=server_log, stderr=subprocess.STDOUT)
        uri = f"http://127.0.0.1:{port}"
        stop = time.monotonic() + 600
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > stop:
                pytest.fail("MLflow server on PostgreSQL did not start:\n" + (base / "mlflow.log").read_text()[-3000:])
            time.sleep(0.5)
        yield {"uri": uri, "socket_dir": base, "dir": base}
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
        subprocess.run(_as_pg_user([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


class _TagWritesHeld:
    """An EXCLUSIVE lock on ``model_version_tags``: reads pass, tag writes queue until :meth:`release`."""

    def __init__(self, socket_dir: Path) -> None:
        import psycopg

        self.conn = psycopg.connect(host=str(socket_dir), user="fx", dbname="postgres")
        self.conn.execute("LOCK TABLE model_version_tags IN EXCLUSIVE MODE")

    def waiting(self) -> int:
        import psycopg

        with psycopg.connect(host=str(self.conn.info.host), user="fx", dbname="postgres", autocommit=True) as other:
            return other.execute("SELECT count(*) FROM pg_locks WHERE NOT granted AND "
                                 "relation = 'model_version_tags'::regclass").fetchone()[0]

    def wait_for(self, n: int, timeout_s: float) -> int:
        stop = time.monotonic() + timeout_s
        while (count := self.waiting()) < n and time.monotonic() < stop:
            time.sleep(0.2)
        return count

    def release(self) -> None:
        self.conn.commit()
        self.conn.close()


def _model_file(path: Path) -> Path:
    import torch

    from faux_checks.inputs.models import save_torchscript

    torch.manual_seed(0)
    save_torchscript(torch.nn.Sequential(torch.nn.Linear(3, 1)), path)
    return path


@pytest.mark.slow
def test_simultaneous_lease_writes_on_postgres_give_one_lease(pg_mlflow, tmp_path):
    """8 acquisitions that all read "no lease", then all INSERT at once: one holds it, 7 read it as taken."""
    from faux_checks.registry import Registry
    from faux_checks.registry import operations
    from faux_checks.registry.operations import acquire_lease, read_lease

    registry = Registry(pg_mlflow["uri"])
    version = registry.register_version("pgrace", _model_file(tmp_path / "m.pt"))
    violations = []
    real = operations.is_unique_violation

    def spy(exc):
        hit = real(exc)
        violations.append(hit)
        return hit

    results, errors = [], []

    def acquire():
        try:
            results.append(acquire_lease(Registry(pg_mlflow["uri"]), "pgrace", version, ttl_s=120, wait_s=0,
                                         settle_s=0.5))
        except Exception as exc:  # noqa: BLE001 - an unhandled UniqueViolation would end the flow
            errors.append(exc)

    n = 8
    held = _TagWritesHeld(pg_mlflow["socket_dir"])
    operations.is_unique_violation = spy
    try:
        workers = [threading.Thread(target=acquire) for _ in range(n)]
        for w in workers:
            w.start()
        queued = held.wait_for(n, timeout_s=600)
    finally:
        held.release()
        for w in workers:
            w.join(600)
        operations.is_unique_violation = real
    assert queued == n                                               # every writer had read "free" and queued
    assert errors == [], errors                                      # none of the 7 UniqueViolations escapes
    assert sum(violations) == n - 1                                  # the race really happened: 7 INSERTs lost
    winners = [mine for mine, _ in results if mine is not None]
    assert len(results) == n and len(winners) == 1
    assert read_lease(registry, "pgrace", version) == winners[0]
    assert all(other == winners[0] for mine, other in results if mine is None)   # the losers name the holder


from _support import write_proxy_audit  # noqa: E402


@pytest.mark.slow
def test_concurrent_gates_on_postgres_make_one_run_and_one_decision(pg_mlflow, tmp_path, harness):
    """3 gates on one version whose lease writes all meet at once: one run, one decision, no exit 2.

    The three commands run their flows on this module's Prefect server (``PREFECT_API_URL``): the lease on
    PostgreSQL is what is tested, and one server start replaces three."""
    from faux_checks.registry import Registry
    from faux_checks.registry.client import GATE_EXPERIMENT, GATE_TAG

    write_proxy_audit(tmp_path)   # audit.csv and policy.toml
    registry = Registry(pg_mlflow["uri"])
    version = registry.register_version("pggate", _model_file(tmp_path / "m.pt"))
    cmd = [sys.executable, "-c", "import sys; from faux_checks_app.cli import main; sys.exit(main(sys.argv[1:]))",
           "gate", "pggate", "--data", str(tmp_path / "audit.csv"), "--policy", str(tmp_path / "policy.toml"),
           "--tracking-uri", pg_mlflow["uri"], "--report-dir", str(tmp_path / "reports"), "--deadline", "900"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_HTTP_REQUEST_")}
    env.update(PYTHONPATH=str(ROOT), FAUX_CHECKS_HOME=str(tmp_path / "home"), OMP_NUM_THREADS="1",
               PREFECT_API_URL=harness)
    gates = 3
    held = _TagWritesHeld(pg_mlflow["socket_dir"])
    procs = []
    try:
        for i in range(gates):
            procs.append(subprocess.Popen(cmd, env={**env, "PREFECT_HOME": str(tmp_path / f"prefect{i}")},
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        queued = held.wait_for(gates, timeout_s=600)
    finally:
        held.release()
    outs = [p.communicate(timeout=960)[0] for p in procs]
    codes = [p.returncode for p in procs]
    assert queued == gates, outs                                    # all three lease writes met at the lock
    runs = registry.client.search_runs([registry._experiment_id(GATE_EXPERIMENT)])   # only this test gates
    tags = registry._version("pggate", version).tags
    assert 2 not in codes, (codes, outs)                            # no loser's flow exits 2
    assert len(set(codes)) == 1, (codes, outs)                      # all report the one decision
    assert tags[GATE_TAG] in ("passed", "failed") and "fairness_gate_lease" not in tags
    assert len(runs) == 1, (codes, outs)
    assert sum("was decided by another gate run while this one waited" in o for o in outs) == gates - 1, outs
