"""A torch.export (.pt2) archive never runs code when the gate reads it.

Each test rewrites one part of a real ``torch.export.save`` archive so that torch 2.13's own loader would
run a payload (creating a marker file), and checks that :func:`load_model` refuses it and that the marker
is never created. The control at the end shows each payload does run through ``torch.export.load``
itself, so the tests cannot pass by building a payload that never fires.
"""

from __future__ import annotations

import io
import json
import zipfile

import pytest
import torch
from torch import nn

from faux_checks import InputError, UnsafeModelError
from faux_checks.inputs.models import load_model


class _Payload:
    """Unpickling this object calls open(marker, "w"), which creates the marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _archive(tmp_path):
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    program = torch.export.export(net, (torch.randn(3, 4),), dynamic_shapes=({0: torch.export.Dim("batch")},))
    path = tmp_path / "clean.pt2"
    torch.export.save(program, str(path))
    return path, net


def _rewrite(src, dst, edit):
    """Copy the archive ``src`` to ``dst``, passing each member's (relative name, bytes) through ``edit``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        root = zin.namelist()[0].split("/", 1)[0]
        extra = {}
        for info in zin.infolist():
            rel = info.filename.split("/", 1)[1]
            data = edit(rel, zin.read(info.filename), extra)
            if data is not None:
                zout.writestr(info, data)
        for rel, data in extra.items():
            zout.writestr(f"{root}/{rel}", data)
    return dst


def _pickle_bytes(marker):
    buf = io.BytesIO()
    torch.save(_Payload(marker), buf)
    return buf.getvalue()


def _edit_program(edit_json):
    def edit(rel, data, extra):
        if rel == "models/model.json":
            program = json.loads(data)
            edit_json(program)
            return json.dumps(program).encode()
        return data

    return edit


def _hostile(kind, tmp_path, marker):
    src, _ = _archive(tmp_path)
    dst = tmp_path / f"{kind}.pt2"
    m = str(marker)
    if kind == "sample_inputs":  # torch retries a failed safe load with weights_only=False
        edit = lambda rel, data, extra: _pickle_bytes(marker) if rel.startswith("data/sample_inputs/") else data  # noqa: E731
    elif kind == "pickled_weight":

        def edit(rel, data, extra):
            if rel == "data/weights/model_weights_config.json":
                config = json.loads(data)
                first = next(iter(config["config"].values()))
                first.update(use_pickle=True, path_name="weight_evil")
                extra["data/weights/weight_evil"] = _pickle_bytes(marker)
                return json.dumps(config).encode()
            return data
    elif kind == "opaque_constant":

        def edit(rel, data, extra):
            if rel == "data/constants/model_constants_config.json":
                extra["data/constants/opaque_obj_0"] = _pickle_bytes(marker)
                return json.dumps({"config": {"evil": {"path_name": "opaque_obj_0", "is_param": False,
                                                        "use_pickle": True, "tensor_meta": None}}}).encode()
            return data
    elif kind == "guards_code":
        edit = _edit_program(lambda p: p.__setitem__("guards_code", [f"open({m!r}, 'w') is None"]))
    elif kind == "expr_str":

        def set_expr(program):
            tv = program["graph_module"]["graph"]["tensor_values"]
            tv["input"]["sizes"][0]["as_expr"]["expr_str"] = f"Symbol('s31') + len(open({m!r}, 'w').name) * 0"

        edit = _edit_program(set_expr)
    elif kind == "node_target":  # torch.os resolves, so torch.os.system would be called on every forward

        def set_target(program):
            program["graph_module"]["graph"]["nodes"][1]["target"] = "torch.os.system"

        edit = _edit_program(set_target)
    elif kind == "native_code":
        edit = lambda rel, data, extra: (extra.setdefault("data/aotinductor/model/model.so", b"\x7fELF"), data)[1]  # noqa: E731
    else:
        raise AssertionError(kind)
    return _rewrite(src, dst, edit)


KINDS = ["sample_inputs", "pickled_weight", "opaque_constant", "guards_code", "expr_str", "node_target", "native_code"]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_archive_is_refused_and_its_payload_never_runs(tmp_path, kind):
    marker = tmp_path / "pwned"
    path = _hostile(kind, tmp_path, marker)
    with pytest.raises(UnsafeModelError, match="refused to load torch.export archive") as err:
        model = load_model(path)
        model(torch.randn(5, 4))  # a load that got through must not run the payload either
    assert "Nothing from it was executed" in str(err.value)
    assert not marker.exists()


@pytest.mark.filterwarnings("ignore")
def test_the_refusal_names_what_was_found(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(UnsafeModelError, match=r"node 'relu' calls 'torch.os.system'"):
        load_model(_hostile("node_target", tmp_path, marker))
    with pytest.raises(UnsafeModelError, match=r"constant 'evil' is a Python or TorchBind object"):
        load_model(_hostile("opaque_constant", tmp_path, marker))
    with pytest.raises(UnsafeModelError, match=r"compiled native code \(1 files"):
        load_model(_hostile("native_code", tmp_path, marker))


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("kind", ["sample_inputs", "guards_code", "expr_str"])
def test_control_torch_export_load_itself_runs_these_payloads(tmp_path, kind):
    """The payloads are live: torch's own loader (the explicit opt-in) creates the marker."""
    marker = tmp_path / "pwned"
    path = _hostile(kind, tmp_path, marker)
    try:
        torch.export.load(str(path)).module()(torch.randn(5, 4))
    except Exception:  # noqa: BLE001 - only whether the payload ran matters
        pass  # the payload has run by then; what torch does with its result does not matter here
    assert marker.exists()


def test_a_clean_archive_loads_and_scores_as_the_network(tmp_path):
    path, net = _archive(tmp_path)
    model = load_model(path)
    x = torch.randn(7, 4)
    torch.testing.assert_close(model(x), net(x))


def test_the_check_and_the_load_read_the_same_bytes(tmp_path, monkeypatch):
    """torch reads the archive from the bytes that were checked, never from the path again."""
    path, _ = _archive(tmp_path)
    opened = []
    real = torch.export.load
    monkeypatch.setattr(torch.export, "load", lambda f, **kw: (opened.append(type(f).__name__), real(f, **kw))[1])
    load_model(path)
    assert opened == ["BytesIO"]


def test_the_weights_only_switch_is_restored_after_the_load(tmp_path, monkeypatch):
    import os

    monkeypatch.delenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", raising=False)
    path, _ = _archive(tmp_path)
    load_model(path)
    assert "TORCH_FORCE_WEIGHTS_ONLY_LOAD" not in os.environ


def test_a_zip_bomb_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "model.pt"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("archive/code/__torch__.py", b"\0" * 5_000_000)
        zf.writestr("archive/constants.pkl", b"\0")
    assert path.stat().st_size < 20_000
    with pytest.raises(InputError, match=r"unpack to 5,000,001 bytes, more than the limit of 1,000,000 bytes"):
        load_model(path, max_bytes=1_000_000)


def test_a_file_over_the_size_limit_is_refused(tmp_path):
    path, _ = _archive(tmp_path)
    with pytest.raises(InputError, match=r"more than the limit of 100 bytes"):
        load_model(path, max_bytes=100)


@pytest.mark.filterwarnings("ignore")
def test_check_cli_refuses_a_hostile_archive_with_exit_2(tmp_path, capsys):
    from faux_checks_app.cli import main

    marker = tmp_path / "pwned"
    path = _hostile("sample_inputs", tmp_path, marker)
    data = tmp_path / "audit.csv"
    data.write_text("x0,x1,x2,x3,sex\n" + "".join(f"{i % 3},{i % 5},{i % 7},{i % 2},{i % 2}\n" for i in range(40)))
    code = main(["check", "--model", str(path), "--data", str(data), "--protected", "sex"])
    said = capsys.readouterr()
    assert code == 2, said.err[-2000:]
    assert "refused to load torch.export archive" in said.err + said.out
    assert not marker.exists()


def _swap_after_the_check(monkeypatch, path, replacement):
    """The first check of the archive passes on the file's bytes, then the file on disk becomes ``replacement``."""
    from faux_checks.inputs import export_archive

    real = export_archive.check_export_archive
    swapped = []

    def check_then_swap(data, name="<archive>"):
        real(data, name)
        if not swapped:
            path.write_bytes(replacement.read_bytes())
            swapped.append(name)
    monkeypatch.setattr(export_archive, "check_export_archive", check_then_swap)
    return swapped


def test_a_file_swapped_after_the_check_is_never_loaded_in_process(tmp_path, monkeypatch):
    """The loaded program is the checked one: the network on disk after the check is another one."""
    path, net = _archive(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    other_path, other_net = _archive(other)
    swapped = _swap_after_the_check(monkeypatch, path, other_path)
    model = load_model(path)
    assert swapped == [str(path)] and path.read_bytes() == other_path.read_bytes()
    x = torch.randn(6, 4)
    torch.testing.assert_close(model(x), net(x))
    assert not torch.allclose(model(x), other_net(x))


@pytest.mark.filterwarnings("ignore")
def test_a_file_swapped_after_the_check_never_reaches_the_probe_load(tmp_path, monkeypatch):
    """The gate's run (probe on): the archive is checked, then swapped for one whose symbolic expression creates a
    marker when torch reads it (torch's deserializer ``sympify``-s it); the probe reads the file once, sees other
    bytes than those checked, and refuses. Loaded by path, the probe process ran the payload (marker created)."""
    from faux_checks.inputs.limits import ModelLimits, set_model_limits

    marker = tmp_path / "pwned"
    path, _ = _archive(tmp_path)
    clean = path.read_bytes()
    hostile = _hostile("expr_str", tmp_path, marker)
    path.write_bytes(clean)                           # _hostile rewrote clean.pt2's neighbour; the clean file stays
    swapped = _swap_after_the_check(monkeypatch, path, hostile)
    set_model_limits(ModelLimits(probe_torch=True))
    try:
        with pytest.raises(InputError, match=r"the file changed after it was checked .*the changed file was not loaded"):
            load_model(path)
    finally:
        set_model_limits(ModelLimits())
    assert swapped == [str(path)]
    assert not marker.exists()
