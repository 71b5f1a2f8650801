"""The probe's address-space limit fits inside the runner's own limit (``ulimit -v``), and says so when it cannot.

The probe process of :func:`faux_checks.inputs.probe.probe_load` asks ``RLIMIT_AS`` of ``probe_memory_mb``
(16,384 MiB by default). A process can lower its limit, never raise it past its hard limit: under a shell's
``ulimit -v`` below that, the probe takes the runner's limit, and a probe that cannot load under it names
the runner's limit, never the file.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _support import FEATURES, make_data
from faux_checks.errors import InputError
from faux_checks.inputs import probe as probe_module
from faux_checks.inputs.limits import ModelLimits, set_model_limits
from faux_checks.inputs.models import load_model
from faux_checks.inputs.probe import MIN_PROBE_MIB

xgb = pytest.importorskip("xgboost")

#: ``ulimit -v`` of the subprocess test, in KiB: 7,812 MiB, half the default probe_memory_mb; torch, numpy and
#: XGBoost start under it.
ULIMIT_KIB = 8_000_000


@pytest.fixture(autouse=True)
def default_limits(monkeypatch):
    monkeypatch.setattr(probe_module, "_PASSED", set())     # every test's probe runs (none remembered as passed)
    set_model_limits(ModelLimits())
    yield
    set_model_limits(ModelLimits())


@pytest.fixture(scope="module")
def xgboost_model(tmp_path_factory) -> Path:
    data = make_data(300)
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 2},
                        xgb.DMatrix(data[FEATURES], (data["proxy"] > 1).astype(int)), 3)
    path = tmp_path_factory.mktemp("xgb") / "model.json"
    booster.save_model(str(path))
    return path


@pytest.mark.slow
def test_a_valid_xgboost_model_loads_under_a_shell_ulimit_below_probe_memory_mb(xgboost_model):
    code = textwrap.dedent(f"""
        from faux_checks.inputs.limits import model_limits
        from faux_checks.inputs.probe import inherited_memory_limit_mib
        from faux_checks.inputs.models import load_model
        print(inherited_memory_limit_mib(), model_limits().probe_memory_mb, load_model({str(xgboost_model)!r}).n_features)
        """)
    done = subprocess.run(["bash", "-c", f'ulimit -v {ULIMIT_KIB} && exec "$0" -c "$1"', sys.executable, code],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(ULIMIT_KIB >> 10), "16384", "5"]   # 7,812 MiB < 16,384 MiB; 5 features


def test_a_runner_limit_too_small_for_any_probe_is_named_and_the_file_is_not_blamed(monkeypatch, xgboost_model):
    monkeypatch.setattr(probe_module, "inherited_memory_limit_mib", lambda: MIN_PROBE_MIB - 56)
    with pytest.raises(InputError) as info:
        load_model(xgboost_model)
    assert str(info.value) == (
        f"cannot check {xgboost_model}: this process runs under an address-space limit of 200 MiB (RLIMIT_AS, as "
        "`ulimit -v` or the service manager sets it), below the 256 MiB a probe process needs to load a model file at "
        "all ([operations] probe_memory_mb asks 16,384 MiB). The limit is the runner's, not the file's: raise it "
        "(`ulimit -v unlimited`, or at least probe_memory_mb) and run again")


def test_a_probe_that_cannot_load_under_the_runners_limit_names_that_limit(monkeypatch, xgboost_model):
    """300 MiB: the probe process takes the runner's limit; XGBoost's library does not map under it."""
    monkeypatch.setattr(probe_module, "inherited_memory_limit_mib", lambda: 300)
    with pytest.raises(InputError) as info:
        load_model(xgboost_model)
    message = str(info.value)
    assert message.startswith(f"refused to load {xgboost_model}: the probe process could not run the XGBoost loader "
                              "(a probe process limited to 300 MiB (the runner's own address-space limit, RLIMIT_AS / "
                              "`ulimit -v`, below [operations] probe_memory_mb = 16,384 MiB) and 120 s)")
    assert "the cause is the machine or the runner, not the file" in message
    assert message.endswith("raise it (`ulimit -v`) to decide this file.")
    assert "damaged or hostile" not in message
