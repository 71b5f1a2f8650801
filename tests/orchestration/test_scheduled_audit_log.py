"""A scheduled audit that ends Failed logs its decision, not a Prefect traceback.

A deployment run of the audit flow (what ``python -m faux_checks_flows.deployments`` serves) that ends
Failed logs its decision, with no traceback and no ``TypeError``: Prefect's runner raises a Failed state's
data, which a bare summary dict cannot be, so in a deployment run the state carries the summary in a
``FlowBlocked`` exception (:func:`faux_checks_flows.common.failed_state`).

The test runs a flow run of a real deployment the way Prefect's runner does (``python -m
prefect.flow_engine ENTRYPOINT`` with ``PREFECT__FLOW_RUN_ID``), against the module's Prefect test server.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_scheduled_audit_that_ends_failed_logs_no_traceback(tmp_path, harness):
    """The deployment and its flow run on this module's Prefect test server (``harness``: its API URL)."""
    from prefect.client.orchestration import get_client

    from faux_checks_flows.audit import audit

    (tmp_path / "batch.csv").write_text("x0,sex\n1.0,F\n2.0,M\n")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    deployment_id = audit.to_deployment(
        name="fairness-audit-nobody",
        parameters={"model_name": "nobody", "data_path": str(tmp_path / "batch.csv"), "tracking_uri": uri,
                    "report_root": str(tmp_path / "reports")}).apply()
    with get_client(sync_client=True) as client:
        flow_run = client.create_flow_run_from_deployment(deployment_id)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PREFECT_API_URL": harness,
           "PREFECT__FLOW_RUN_ID": str(flow_run.id), "FAUX_CHECKS_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-m", "prefect.flow_engine", "flows/audit.py:audit"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    with get_client(sync_client=True) as client:
        state = client.read_flow_run(flow_run.id).state
    log = done.stdout + done.stderr
    assert state is not None and state.is_failed(), (state, log[-3000:])       # the audit ended Failed ...
    assert "fairness audit of nobody could not start" in log, log[-3000:]       # ... and says why, in its log
    assert "Traceback" not in log and "TypeError" not in log, log[-3000:]       # no traceback of Prefect's
    assert "fairness audit of nobody undecided" in log, log[-3000:]             # the flow's end: its decision
