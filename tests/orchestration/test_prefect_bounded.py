"""Bounded Prefect calls: Prefect's client timeout and retries come from ``[operations]``.

With Prefect's client defaults (60 s timeout, 5 retries with exponential backoff) each Prefect call against a
killed server retries for 60-70 s, and a gate can reach 434 s. The gate sets ``PREFECT_API_REQUEST_TIMEOUT`` /
``PREFECT_CLIENT_MAX_RETRIES`` for its process before Prefect loads its settings, as it does MLflow's, so each call
is bounded by ``[operations]`` (by default 20 s and 2 retries); a value the user exported wins.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _support import write_policy

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ("import json, sys; from faux_checks.gate.policy import load_policy; "
          "from faux_checks.registry.operations import apply_client_settings; "
          "apply_client_settings(load_policy(sys.argv[1]).operations); "
          "from prefect.settings import get_current_settings; s = get_current_settings(); "
          "print(json.dumps([s.api.request_timeout, s.client.max_retries]))")


def _prefect_settings(policy: Path, **env: str) -> list:
    clean = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_REQUEST_TIMEOUT", "PREFECT_CLIENT_MAX_RETRIES")}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(policy)], capture_output=True, text=True, timeout=600,
                          env={**clean, "PYTHONPATH": str(ROOT), **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_prefect_client_timeout_and_retries_come_from_the_policy(tmp_path):
    policy = write_policy(tmp_path / "p.toml", "[operations]\nprefect_timeout_s = 7\nprefect_retries = 1\n")
    assert _prefect_settings(policy) == [7.0, 1]
    default = write_policy(tmp_path / "d.toml")
    assert _prefect_settings(default) == [20.0, 2]                       # not Prefect's 60 s and 5 retries
    assert _prefect_settings(policy, PREFECT_CLIENT_MAX_RETRIES="4") == [7.0, 4]   # the user's export wins
