"""Shared test settings and small fixtures.

Environment variables are set at import time (``setdefault``: a value the caller exported
wins), before any test module imports torch, MLflow or Prefect, so that later integration
tests inherit them:

- no telemetry from MLflow/Prefect (``DO_NOT_TRACK`` and the tools' own switches);
- Prefect's home and MLflow's tracking store in a temporary folder, never the user's;
- Prefect's temporary server given 600 s to start (``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``);
- reports without their figures (``FAUX_CHECKS_REPORT_PLOTS=off``): drawing costs ~18% of the
  suite's time; the tests of the plots and of the page's images turn them on (``monkeypatch.setenv``);
- one intra-op thread for torch (``OMP_NUM_THREADS=1``): on a shared 2-core machine the
  default of 2 threads made the tiny training loops of these tests ~60× slower under load.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

# the shared helpers (_support, _first_hour, _swap_pin_problem) stay in tests/ while the tests sit in its folders
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_TMP = tempfile.mkdtemp(prefix="faux-checks-tests-")
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)

_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER:
    # Under pytest-xdist each worker gets its own registry, Prefect home and report root (the
    # caller's values are shared paths: two workers writing one sqlite registry would see each
    # other's models). One process without xdist keeps the caller's values.
    for _name, _sub in (("PREFECT_HOME", "prefect"), ("FAUX_CHECKS_HOME", "home")):
        os.environ[_name] = os.path.join(_TMP, _WORKER, _sub)
    os.environ["MLFLOW_TRACKING_URI"] = "sqlite:///" + os.path.join(_TMP, _WORKER, "mlflow.db")
    os.makedirs(os.path.join(_TMP, _WORKER), exist_ok=True)

os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_HOME", os.path.join(_TMP, "prefect"))
os.environ.setdefault("MLFLOW_TRACKING_URI", "sqlite:///" + os.path.join(_TMP, "mlflow.db"))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("FAUX_CHECKS_REPORT_PLOTS", "off")   # the tests that read the figures set it "on"
# Prefect's temporary server: 600 s to start (Prefect's 20 s, and 90 s, expired on a loaded machine); a test of the
# start-up timeout itself removes it (monkeypatch.delenv)
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "600")

import pytest  # noqa: E402


#: Seconds per file of one measured run of the suite (``[slow tests, other tests]``; tests/file_seconds.py writes it).
FILE_SECONDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "file_seconds.json")
#: The estimate of a test of a file the table lacks: a slow test, another test (seconds).
UNMEASURED_S = (15.0, 0.5)


@pytest.hookimpl(trylast=True)   # after ``-m``/``-k`` deselected: the time of the tests that will run
def pytest_collection_modifyitems(config, items):
    """The files that take longest first, each file's tests kept in their order.

    Under ``-n auto --dist loadfile`` a worker takes the next file in this order when it is free
    (``--no-loadscope-reorder`` in ``addopts``); longest first (the LPT rule) keeps both workers busy to the end,
    where xdist's own order, most tests first, leaves a few minute-long files to one worker while the other idles.
    A file's time is that of its selected tests: its measured seconds (:data:`FILE_SECONDS`) shared out among its
    slow and its other tests, so ``-m "not slow"`` orders by the other tests' share; a file or a kind the table
    lacks counts :data:`UNMEASURED_S` per test.
    """
    import json

    measured = json.loads(open(FILE_SECONDS).read()) if os.path.exists(FILE_SECONDS) else {}
    counts: dict[str, list[int]] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        path = item.nodeid.split("::", 1)[0]
        first.setdefault(path, index)
        counts.setdefault(path, [0, 0])[item.get_closest_marker("slow") is None] += 1
    seconds = {}
    for path, selected in counts.items():
        table = measured.get(path, [None, None])
        seconds[path] = sum(UNMEASURED_S[kind] * n if table[kind] is None else table[kind]
                            for kind, n in enumerate(selected) if n)
    items.sort(key=lambda item: (-seconds[item.nodeid.split("::", 1)[0]], first[item.nodeid.split("::", 1)[0]]))


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


@pytest.fixture(autouse=True)
def _mlflow_reads_the_environment_again():
    """After each test, MLflow's process-wide tracking URI is unset again (``mlflow.set_tracking_uri``).

    A test that logs with MLflow's fluent API sets it; left set, a later test in the same process (under
    pytest-xdist: whichever file the worker runs next) wrote to the earlier test's registry while its
    own ``MLFLOW_TRACKING_URI`` named another ("No Experiment with id=1 exists").
    """
    yield
    import sys

    utils = sys.modules.get("mlflow.tracking._tracking_service.utils")
    if utils is not None and hasattr(utils, "_tracking_uri"):
        utils._tracking_uri = None


#: Tests that patch, count or read the provenance of the auxiliary training or of the swap reference's fit (faults
#: injected into ``AuxiliaryModel.fit``, ``aux_cache_stats``, ``aux_reused``): each of them starts with nothing trained.
FRESH_AUX_TESTS = ("tests/method/", "tests/gate/test_aux_cache.py", "tests/gate/test_aux_store.py",
                   "tests/gate/test_crossfit.py", "tests/gate/test_fail_closed.py", "tests/gate/test_reference_cache.py",
                   "tests/gate/test_shard_stages.py", "tests/orchestration/test_gate_reliability.py")


@pytest.fixture(autouse=True)
def _fresh_aux_cache(request):
    """The tests of :data:`FRESH_AUX_TESTS` start with no auxiliary model trained in this process; the others reuse
    the models this worker trained on the same inputs (the same model a new training gives: training is deterministic
    given its inputs, tests/gate/test_aux_cache.py), as a gate over several versions does."""
    from faux_checks.gate.aux_cache import clear_aux_cache

    if request.node.nodeid.replace("\\", "/").startswith(FRESH_AUX_TESTS):
        clear_aux_cache()
    yield


@pytest.fixture(autouse=True)
def _log_handlers_outlive_capture():
    """After each test, point logging handlers whose stream was closed back at ``sys.stderr``.

    Prefect reconfigures logging (``setup_logging``, resolving ``ext://sys.stderr`` then) whenever it
    builds a server app; inside a test that uses ``capfd``/``capsys`` that stream is pytest's per-test
    capture, closed when the test ends, and every later Prefect log line then failed with "I/O
    operation on closed file" (seen as a RecursionError in tests/orchestration/test_flow.py after
    tests/app/test_cli_output.py). A real process never closes its stderr, so this is test hygiene only.
    """
    yield
    import logging
    import sys

    loggers = [logging.getLogger()] + [lg for lg in logging.Logger.manager.loggerDict.values()
                                       if isinstance(lg, logging.Logger)]
    for lg in loggers:
        for handler in lg.handlers:
            stream = getattr(handler, "stream", None)
            if isinstance(handler, logging.StreamHandler) and getattr(stream, "closed", False):
                handler.stream = sys.stderr        # not setStream: it flushes the closed stream first
                console = getattr(handler, "console", None)   # Prefect's rich console keeps its own file
                if console is not None:
                    console.file = sys.stderr


@pytest.fixture(scope="session")
def prefect_test_server():
    """One Prefect test server for this process (a pytest-xdist worker, or the whole run without xdist): a
    ``SubprocessASGIServer`` on a SQLite database of its own, started once (the schema migrated, the block types
    registered: ~9 s of server CPU on a quiet 2-core machine), given 600 s to start, stopped at the session's end.

    Yields ``(server, database URL)``. Tests take :func:`harness`, which points Prefect at it for one module.
    """
    from faux_checks.settings import configure_environment

    configure_environment()
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_SERVER_DATABASE_CONNECTION_URL, temporary_settings
    from prefect.testing.utilities import _find_available_port

    database = "sqlite+aiosqlite:///" + os.path.join(tempfile.mkdtemp(dir=_TMP), "prefect-test.db")
    with temporary_settings({PREFECT_SERVER_DATABASE_CONNECTION_URL: database}):   # what the server's process reads
        server = SubprocessASGIServer(port=_find_available_port())
        server.start(timeout=600)
    try:
        yield server, database
    finally:
        server.stop()


@pytest.fixture(scope="module")
def harness(prefect_test_server):
    """Prefect pointed at this process's test server (:func:`prefect_test_server`) for one module's flow tests,
    as ``prefect_test_harness`` does for its own server; yields the server's API URL.

    Module scope: outside these modules ``PREFECT_API_URL`` is unset again, so in-process CLI tests elsewhere still
    start (and stop) their own temporary server. The server outlives the module: the modules of one process share
    it and its database (each test registers its own models in its own MLflow registry; no test reads another
    module's flow runs), so it starts once per process, not once per module (~5.5 s of server CPU each).
    """
    import contextlib

    import prefect.context
    import prefect.testing.utilities as utilities
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.server.database.dependencies import temporary_database_interface
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_DATABASE_CONNECTION_URL, temporary_settings

    server, database = prefect_test_server
    process = getattr(server, "server_process", None)
    if process is not None and process.poll() is not None:   # a clear cause, not a connection refused per flow test
        pytest.fail(f"this worker's Prefect test server (pid {process.pid}) exited with {process.returncode}: it "
                    "crashed, or an earlier test in this process ended its child processes (run such code in a "
                    "subprocess)")
    prior_default = SubprocessASGIServer._instances.get(None)
    with contextlib.ExitStack() as stack:
        stack.enter_context(temporary_database_interface())
        stack.enter_context(temporary_settings({PREFECT_SERVER_DATABASE_CONNECTION_URL: database,
                                                PREFECT_API_URL: server.api_url}))
        SubprocessASGIServer._instances[None] = server   # a flow's own server lookup finds this one
        stack.enter_context(prefect.context._temporary_global_settings_context(prefect.context.get_settings_context()))
        try:
            yield server.api_url
            utilities.run_coro_as_sync(_drain_prefect_workers())   # this module's logs and events reach the server
        finally:
            if prior_default is not None:
                SubprocessASGIServer._instances[None] = prior_default
            else:
                SubprocessASGIServer._instances.pop(None, None)


async def _drain_prefect_workers() -> None:
    """Prefect's log and event workers flushed (what ``prefect_test_harness`` does before it stops its server)."""
    import inspect

    import prefect.testing.utilities as utilities

    try:
        result = utilities.APILogWorker.instance().drain()
        if inspect.isawaitable(result):
            await result
    except RuntimeError:   # the worker never started
        pass
    result = utilities.EventsWorker.drain_all()
    if inspect.isawaitable(result):
        await result


def pytest_runtest_setup(item):
    """Once MLflow's stores are imported in this process, a new sqlite registry gets the tables of one migrated
    copy (:func:`_support.use_migrated_copies`); nothing is imported here."""
    if "mlflow.store.db.utils" in sys.modules:
        from _support import use_migrated_copies

        use_migrated_copies(_TMP)
