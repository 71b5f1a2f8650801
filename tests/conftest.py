"""Shared test settings and small fixtures.

Environment variables are set at import time (``setdefault``: a value the caller exported
wins), before any test module imports torch, MLflow or Prefect, so that later integration
tests inherit them:

- no telemetry from MLflow/Prefect (``DO_NOT_TRACK`` and the tools' own switches);
- Prefect's home and MLflow's tracking store in a temporary folder, never the user's;
- one intra-op thread for torch (``OMP_NUM_THREADS=1``): on a shared 2-core machine the
  default of 2 threads made the tiny training loops of these tests ~60× slower under load.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

_TMP = tempfile.mkdtemp(prefix="faux-checks-tests-")
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)

os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_HOME", os.path.join(_TMP, "prefect"))
os.environ.setdefault("MLFLOW_TRACKING_URI", "sqlite:///" + os.path.join(_TMP, "mlflow.db"))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402


@pytest.fixture
def rng():
    """A fresh seeded numpy generator per test."""
    import numpy as np

    return np.random.default_rng(12345)


@pytest.fixture(autouse=True)
def _seed_torch():
    """Seed torch's global generator so module initialisations in tests are reproducible."""
    import torch

    torch.manual_seed(0)
    yield
