"""Torch loads are isolated in the gate, archive bombs refused, payloads never run.

A 1,937-byte TorchScript archive whose ``code/`` nests 200,000 parentheses passes :func:`check_archive` (it
unpacks to ~400 KB) and kills ``torch.jit.load`` with SIGSEGV, so the structural checks alone cannot promise that
a torch load never crashes; without the probe, the gate would load TorchScript and ``.pt2`` files in its own
process, and that file would end the whole gate (no version after it gated, v1 left ``running``). The gate's run
probes torch files in the probe server of :mod:`faux_checks.inputs.torch_probe` (a forked, memory- and
time-limited process); ``check`` and ``register`` load in-process.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from _support import FAIR, linear, make_data, write_policy
from faux_checks.errors import InputError, UnsafeModelError
from faux_checks.inputs.limits import ModelLimits, check_archive, set_model_limits
from faux_checks.inputs.models import load_model, save_torchscript
from faux_checks.inputs.probe import LoaderRaisedError, probe_load
from test_export_archive import _pickle_bytes, _rewrite

NESTING = 200_000


@pytest.fixture(autouse=True)
def default_limits():
    set_model_limits(ModelLimits())
    yield
    set_model_limits(ModelLimits())


def _deep_torchscript(tmp_path: Path) -> Path:
    """A real TorchScript Linear(5, 1) whose forward's ``torch.linear(...)`` is wrapped in NESTING parentheses."""
    good = save_torchscript(linear(FAIR), tmp_path / "good.pt")
    out = tmp_path / "deep.pt"
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith("code/__torch__/torch/nn/modules/linear.py"):
                code = data.decode()
                start = code.index("torch.linear(")
                end = code.index(")", start) + 1
                data = (code[:start] + "(" * NESTING + code[start:end] + ")" * NESTING + code[end:]).encode()
            elif info.filename.endswith(".debug_pkl"):
                continue
            zout.writestr(info.filename, data)
    return out


def _export_with_payload(tmp_path: Path, marker: Path) -> Path:
    """A torch.export of the fair Linear(5, 1) whose ``data/sample_inputs/`` is a pickle that creates ``marker``
    (torch 2.13 retries a failed safe load of it with ``weights_only=False``)."""
    program = torch.export.export(linear(FAIR), (torch.randn(3, 5),), dynamic_shapes=({0: torch.export.Dim("batch")},))
    clean = tmp_path / "clean.pt2"
    torch.export.save(program, str(clean))
    return _rewrite(clean, tmp_path / "model.pt2",
                    lambda rel, data, extra: _pickle_bytes(marker) if rel.startswith("data/sample_inputs/") else data)


def _skip_unless_it_crashes_torch(deep: Path) -> None:
    """The control: ``torch.jit.load`` of ``deep`` in a process with this one's stack limit dies with SIGSEGV.

    The parser's recursion needs a few hundred MiB of C stack for NESTING levels (measured: it crashes under
    ``ulimit -s`` 256 MiB and loads under 1 GiB or ``unlimited``); under a stack that large the file is a valid
    model (the fair Linear(5, 1)), loads everywhere, and rightly passes.
    """
    control = subprocess.run([sys.executable, "-c", f"import torch; torch.jit.load({str(deep)!r})"],
                             capture_output=True, timeout=900)
    if control.returncode == 0:
        pytest.skip("torch.jit.load did not crash on this machine's stack (ulimit -s): nothing for the probe to isolate")
    assert control.returncode == -signal.SIGSEGV             # torch's own load dies: the crash is real


def test_a_deeply_nested_torchscript_file_crashes_torch_and_is_refused_by_the_probe(tmp_path):
    deep = _deep_torchscript(tmp_path)
    assert deep.stat().st_size < 4_000
    check_archive(deep, ModelLimits())                       # the structural check lets it through
    _skip_unless_it_crashes_torch(deep)
    set_model_limits(ModelLimits(probe_torch=True))          # as the gate's run sets it
    with pytest.raises(InputError) as info:
        load_model(deep)
    assert str(info.value).startswith(f"refused to load {deep}: the TorchScript loader was killed by SIGSEGV in a "
                                      "probe process limited to 16,384 MiB and 120 s")
    good = load_model(tmp_path / "good.pt")                  # a good file passes the probe and loads
    x = torch.randn(4, 5)
    torch.testing.assert_close(good(x), linear(FAIR)(x))


def test_the_torch_probe_never_runs_a_payload_and_leaves_the_refusal_to_the_safe_loader(tmp_path):
    marker = tmp_path / "pwned"
    hostile = _export_with_payload(tmp_path, marker)
    with pytest.raises(LoaderRaisedError, match="the torch.export loader raised an error in a probe process"):
        probe_load(hostile, "torch.export", limits=ModelLimits(probe_torch=True))   # exit 3: the safe load refuses
    assert not marker.exists()                                # the probe loads with weights_only forced
    set_model_limits(ModelLimits(probe_torch=True))
    with pytest.raises(UnsafeModelError, match="refused to load torch.export archive"):
        load_model(hostile)
    assert not marker.exists()


def test_a_zip_bomb_named_model_pt2_is_refused_with_the_named_limit(tmp_path):
    bomb = tmp_path / "model.pt2"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("archive/models/model.json", b" " * (40 << 20))
        zf.writestr("archive/archive_format", b"pt2")
    assert bomb.stat().st_size < 100_000
    with pytest.raises(InputError, match=r"over the limit of 200 times \(\[operations\] max_compression_ratio\)"):
        load_model(bomb)
    with pytest.raises(InputError, match=r"more than the limit of 1,048,576 bytes \(\[operations\] max_model_bytes\)"):
        load_model(bomb, max_bytes=1 << 20)


@pytest.mark.filterwarnings("ignore")
def test_register_refuses_a_payload_pt2_and_its_marker_is_never_created(tmp_path):
    from faux_checks_app.cli import main

    marker = tmp_path / "pwned"
    hostile = _export_with_payload(tmp_path, marker)
    code = main(["register", "m", "--model", str(hostile), "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db"])
    assert code == 2
    assert not marker.exists()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_the_gate_records_a_crashing_and_a_payload_version_undecided_and_gates_the_next(tmp_path, harness):
    from faux_checks.registry import Registry
    from faux_checks_flows.gate import gate

    marker = tmp_path / "pwned"
    deep = _deep_torchscript(tmp_path)
    _skip_unless_it_crashes_torch(deep)
    hostile = _export_with_payload(tmp_path, marker)
    good = tmp_path / "good.pt"                              # written by _deep_torchscript
    make_data(400).to_csv(tmp_path / "data.csv", index=False)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    registry = Registry(uri)
    v1 = registry.register_version("crashes", deep)
    v2 = registry.register_version("crashes", hostile)
    v3 = registry.register_version("crashes", good)
    state = gate(model_name="crashes", data_path=str(tmp_path / "data.csv"),
                 policy_path=str(write_policy(tmp_path / "policy.toml")), tracking_uri=uri,
                 report_root=str(tmp_path / "reports"), return_state=True)
    outcomes = {o["version"]: o for o in getattr(state.data, "result", state.data)}
    assert outcomes[v1]["decision"] == "undecided"
    assert "the TorchScript loader was killed by SIGSEGV in a probe process" in outcomes[v1]["reasons"][0]
    assert outcomes[v2]["decision"] == "undecided"
    assert "refused to load torch.export archive" in " ".join(outcomes[v2]["reasons"])
    assert not marker.exists()
    assert outcomes[v3]["decision"] == "passed" and outcomes[v3]["flagged_fraction"] is not None
    tags = {r["version"]: r["fairness_gate"] for r in registry.history("crashes")}
    assert tags == {v1: "undecided", v2: "undecided", v3: "passed"}
    assert registry.new_versions("crashes") == []
