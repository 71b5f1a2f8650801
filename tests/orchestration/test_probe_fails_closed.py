"""A model-loading probe that times out, is killed, or cannot run refuses the file: never a pass.

The probe (:func:`faux_checks.inputs.probe.probe_load`) passes a file only when its load exited 0. Each test
induces one way a probe can end otherwise (a timeout, a SIGKILL of the loading process or of the torch probe
server, a server that cannot fork, a reply out of turn, a loader that raises on a file this process loads)
and checks that the file is refused and, in the gate, that the version is recorded ``undecided``.
Stand-in probe processes replace the loader where the test needs one that hangs or misbehaves; the files
they are asked about are valid models, so a probe that failed open would load and pass them.
"""

from __future__ import annotations

import os
import signal
import textwrap
import threading
import time
from pathlib import Path

import pytest

from _support import FAIR, FEATURES, linear, make_data, write_policy
from faux_checks.errors import InputError
from faux_checks.inputs import probe as probe_module
from faux_checks.inputs import torch_probe
from faux_checks.inputs.limits import ModelLimits, set_model_limits
from faux_checks.inputs.models import load_model, save_torchscript
from faux_checks.inputs.probe import LoaderRaisedError, probe_load

lgb = pytest.importorskip("lightgbm")

CHILD_DIR = Path(probe_module.__file__).parent


@pytest.fixture(autouse=True)
def default_limits(monkeypatch):
    monkeypatch.setattr(probe_module, "_PASSED", set())     # every test's probe runs (none remembered as passed)
    set_model_limits(ModelLimits())
    torch_probe.stop_server()
    yield
    torch_probe.stop_server()
    set_model_limits(ModelLimits())


@pytest.fixture(scope="module")
def good_lightgbm(tmp_path_factory) -> Path:
    data = make_data(400)
    booster = lgb.train({"objective": "binary", "num_leaves": 4, "verbose": -1, "seed": 0},
                        lgb.Dataset(data[FEATURES].to_numpy(), (data["proxy"] > 1).astype(int)), num_boost_round=3)
    path = tmp_path_factory.mktemp("lgb") / "good.txt"
    booster.save_model(str(path))
    return path


@pytest.fixture
def good_torchscript(tmp_path) -> Path:
    return save_torchscript(linear(FAIR), tmp_path / "good.pt")


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def _kill_when_written(pid_file: Path, *, times: int = 1, everyone: bool = False) -> threading.Thread:
    """A thread that SIGKILLs the loading process whose pid ``pid_file`` names first (``everyone``: the server
    named second, then the load), ``times`` times (each time the file is written anew)."""
    def run():
        for _ in range(times):
            deadline = time.monotonic() + 120
            while not pid_file.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            if not pid_file.exists():
                return
            time.sleep(0.2)                                  # mid-load: the loader is in its sleep
            pids = [int(p) for p in pid_file.read_text().split()]
            pid_file.unlink()
            for pid in (pids[::-1] if everyone else pids[:1]):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# ---------------------------------------------------------------------------- induced timeouts
def test_a_probe_that_times_out_refuses_a_valid_file_and_load_model_never_returns_it(good_lightgbm):
    set_model_limits(ModelLimits(probe_timeout_s=0.001))
    with pytest.raises(InputError, match=r"the LightGBM loader did not finish in a probe process limited to 16,384 MiB "
                                         r"and 0.001 s \(\[operations\] probe_timeout_s\)"):
        load_model(good_lightgbm)


def _hanging_server(tmp_path: Path) -> tuple[Path, Path]:
    """The real torch probe server whose forked load writes ``<file>.pid`` (its pid, the server's) and hangs."""
    server = _script(tmp_path, "hanging_server.py", f"""
        import os, sys, time
        sys.path.insert(0, {str(CHILD_DIR)!r})
        import _probe_child

        def hang(fmt, path, trusted, sha256=None):
            with open(path + ".pid", "w") as fh:
                fh.write(f"{{os.getpid()}} {{os.getppid()}}")
            time.sleep(300)

        _probe_child._load = hang
        sys.exit(_probe_child.serve())
        """)
    return server, tmp_path / "good.pt.pid"


def test_the_torch_probe_server_ends_a_load_past_its_time_and_the_file_is_refused(tmp_path, monkeypatch,
                                                                                   good_torchscript):
    server, _pid_file = _hanging_server(tmp_path)
    monkeypatch.setattr(torch_probe, "_SCRIPT", server)
    with pytest.raises(InputError, match=r"the TorchScript loader did not finish in a probe process limited to "
                                         r"16,384 MiB and 1 s"):
        probe_load(good_torchscript, "torchscript", limits=ModelLimits(probe_torch=True, probe_timeout_s=1.0))


# ---------------------------------------------------------------------------- induced kills
def test_a_probe_process_killed_mid_load_refuses_the_file(tmp_path, monkeypatch, good_lightgbm):
    child = _script(tmp_path, "hanging_child.py", """
        import os, sys, time
        with open(sys.argv[2] + ".pid", "w") as fh:
            fh.write(str(os.getpid()))
        time.sleep(300)
        """)
    monkeypatch.setattr(probe_module, "_PROBE_SCRIPT", child)
    model = tmp_path / "model.txt"
    model.write_bytes(good_lightgbm.read_bytes())
    killer = _kill_when_written(tmp_path / "model.txt.pid")
    with pytest.raises(InputError, match=r"the LightGBM loader was killed by SIGKILL in a probe process"):
        load_model(model)
    killer.join(5)


def test_a_forked_torch_load_killed_mid_load_refuses_the_file(tmp_path, monkeypatch, good_torchscript):
    server, pid_file = _hanging_server(tmp_path)
    monkeypatch.setattr(torch_probe, "_SCRIPT", server)
    set_model_limits(ModelLimits(probe_torch=True))
    killer = _kill_when_written(pid_file)                     # the forked load only: the server answers
    with pytest.raises(InputError, match=r"the TorchScript loader was killed by SIGKILL in a probe process"):
        load_model(good_torchscript)
    killer.join(5)


def test_a_torch_probe_server_killed_mid_load_twice_refuses_the_file(tmp_path, monkeypatch, good_torchscript):
    server, pid_file = _hanging_server(tmp_path)
    monkeypatch.setattr(torch_probe, "_SCRIPT", server)
    set_model_limits(ModelLimits(probe_torch=True))
    killer = _kill_when_written(pid_file, times=2, everyone=True)   # the server and its load, both tries
    with pytest.raises(InputError, match=r"the probe process could not run the TorchScript loader .*: the torch "
                                         r"probe server ended twice while loading the file"):
        load_model(good_torchscript)
    killer.join(5)


# ---------------------------------------------------------------------------- probes that cannot run
_FAKE_SERVER = """
    import json, sys
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps(REPLY(request)), flush=True)
    """


@pytest.mark.parametrize("reply, said", [
    ('lambda r: {"id": r["id"], "status": "error", "code": None, '
     '"stderr": "BlockingIOError: [Errno 11] Resource temporarily unavailable"}',
     "the torch probe server could not probe the file: BlockingIOError"),
    ('lambda r: {"id": "an earlier request", "status": "exit", "code": 0, "stderr": ""}',
     "the torch probe server answered out of turn"),
], ids=["fork-failed", "reply-out-of-turn"])
def test_a_torch_probe_that_could_not_run_refuses_a_valid_file(tmp_path, monkeypatch, good_torchscript, reply, said):
    """A probe server that cannot fork, or that answers another request's id, refuses the file (InputError naming
    the machine or runner, not the file): its error is not read as the loader's Python error (exit 3), nor the
    stray reply as this one's, and the file is never loaded in this process unprobed."""
    server = _script(tmp_path, "fake_server.py", f"REPLY = {reply}\n" + textwrap.dedent(_FAKE_SERVER))
    monkeypatch.setattr(torch_probe, "_SCRIPT", server)
    set_model_limits(ModelLimits(probe_torch=True))
    with pytest.raises(InputError) as info:
        load_model(good_torchscript)
    assert said in str(info.value)
    assert "the cause is the machine or the runner, not the file" in str(info.value)


def test_a_probe_whose_loader_raised_refuses_a_file_this_process_loads(tmp_path, monkeypatch, good_lightgbm):
    """Exit 3 (the library raised in the probe) while this process's load succeeds: the probe's verdict stands."""
    child = _script(tmp_path, "raising_child.py", """
        import sys
        print("RuntimeError: the loader gave up", file=sys.stderr)
        sys.exit(3)
        """)
    monkeypatch.setattr(probe_module, "_PROBE_SCRIPT", child)
    with pytest.raises(LoaderRaisedError, match=r"the LightGBM loader raised an error in a probe process limited to "
                                                r"16,384 MiB and 120 s: RuntimeError: the loader gave up$"):
        load_model(good_lightgbm)


def test_a_damaged_file_is_refused_in_the_words_of_its_library(tmp_path):
    damaged = tmp_path / "damaged.txt"
    damaged.write_text("tree\nversion=v4\nnum_class=1\nnum_tree_per_iteration=1\nmax_feature_idx=4\nTree=0\n")
    with pytest.raises(InputError, match=r"^cannot load LightGBM model .*damaged.txt"):
        load_model(damaged)


# ---------------------------------------------------------------------------- the gate
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_the_gate_records_versions_whose_probe_timed_out_was_killed_or_raised_undecided(tmp_path, harness, monkeypatch,
                                                                                       good_lightgbm, good_torchscript):
    """v1 (TorchScript): its forked load hangs past probe_timeout_s; v2 (LightGBM): the probe's loader raises
    (the file loads in the gate's own process, yet the probe's verdict stands); v3 (LightGBM): the probe process is
    SIGKILLed mid-load."""
    from faux_checks.registry import Registry
    from faux_checks_flows.gate import gate

    server, _pid_file = _hanging_server(tmp_path)
    monkeypatch.setattr(torch_probe, "_SCRIPT", server)
    child = _script(tmp_path, "child.py", """
        import os, signal, sys
        if sys.argv[2].endswith("killed.txt"):
            os.kill(os.getpid(), signal.SIGKILL)
        print("RuntimeError: the loader gave up", file=sys.stderr)
        sys.exit(3)
        """)
    monkeypatch.setattr(probe_module, "_PROBE_SCRIPT", child)
    for name in ("raises.txt", "killed.txt"):
        (tmp_path / name).write_bytes(good_lightgbm.read_bytes() + name.encode())   # distinct files, valid models
    make_data(400).to_csv(tmp_path / "data.csv", index=False)
    policy = write_policy(tmp_path / "policy.toml", "[operations]\nprobe_timeout_s = 2.0\n")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    registry = Registry(uri)
    v1 = registry.register_version("probed", good_torchscript)
    v2 = registry.register_version("probed", tmp_path / "raises.txt")
    v3 = registry.register_version("probed", tmp_path / "killed.txt")
    state = gate(model_name="probed", data_path=str(tmp_path / "data.csv"), policy_path=str(policy), tracking_uri=uri,
                 report_root=str(tmp_path / "reports"), return_state=True)
    outcomes = {o["version"]: o for o in getattr(state.data, "result", state.data)}
    said = {v1: "the TorchScript loader did not finish in a probe process limited to 16,384 MiB and 2 s",
            v2: "the LightGBM loader raised an error in a probe process limited to 16,384 MiB and 2 s: RuntimeError: "
                "the loader gave up",
            v3: "the LightGBM loader was killed by SIGKILL in a probe process limited to 16,384 MiB and 2 s"}
    for version, reason in said.items():
        assert outcomes[version]["decision"] == "undecided", outcomes[version]["reasons"]
        assert reason in " ".join(outcomes[version]["reasons"])
    tags = {r["version"]: r["fairness_gate"] for r in registry.history("probed")}
    assert tags == {v1: "undecided", v2: "undecided", v3: "undecided"}
