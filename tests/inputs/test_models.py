"""Safe model loading (faux_checks.inputs.models): bad-inputs case C10 and the accepted formats."""

from __future__ import annotations

import hashlib
import pickle

import pytest
import torch
from torch import nn

from faux_checks import InputError, UnsafeModelError
from faux_checks.inputs.models import load_model, model_sha256, save_torchscript


class _Payload:
    """Unpickling this object calls open(marker, "w"), which creates the marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _net():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol:UserWarning")
@pytest.mark.parametrize("writer", ["torch.save", "pickle.dump"])
def test_code_running_pickle_is_refused_and_nothing_runs(tmp_path, writer):
    marker = tmp_path / "pwned"
    path = tmp_path / "model.pt"
    obj = {"model": _Payload(marker)}
    if writer == "torch.save":
        torch.save(obj, path)
    else:
        with open(path, "wb") as fh:
            pickle.dump(obj, fh)
    assert not marker.exists()
    with pytest.raises(UnsafeModelError) as info:
        load_model(path)
    assert not marker.exists()                                        # nothing was executed
    msg = str(info.value)
    assert "Nothing from it was executed" in msg and "torch.jit.save" in msg and "allow_pickle=True" in msg
    assert isinstance(info.value, InputError)                         # CLI exit code 2


def test_control_the_payload_does_run_when_pickle_is_allowed(tmp_path):
    """Shows the test above would notice execution: with the explicit opt-in the marker appears."""
    marker = tmp_path / "pwned"
    path = tmp_path / "model.pt"
    torch.save(_Payload(marker), path)
    handle = load_model(path, allow_pickle=True)
    handle.close()
    assert marker.exists()


def test_pickled_module_is_refused(tmp_path):
    path = tmp_path / "module.pt"
    torch.save(_net(), path)
    with pytest.raises(UnsafeModelError, match="refused to load"):
        load_model(path)
    loaded = load_model(path, allow_pickle=True)                      # trusted file, explicit opt-in
    assert isinstance(loaded, nn.Sequential) and not loaded.training


def test_torchscript_round_trip(tmp_path):
    net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 1))
    net.train()
    net[2].eval()                                                     # mixed flags must survive
    flags = [m.training for m in net.modules()]
    path = save_torchscript(net, tmp_path / "model.pt")
    assert [m.training for m in net.modules()] == flags
    loaded = load_model(path)
    assert not loaded.training
    x = torch.randn(16, 4)
    net.eval()
    torch.testing.assert_close(loaded(x), net(x), rtol=0, atol=0)
    with pytest.raises(InputError, match="exists already"):
        save_torchscript(net, path)
    traced = save_torchscript(net, tmp_path / "traced.pt", example=x)
    torch.testing.assert_close(load_model(traced)(x), net(x), rtol=0, atol=0)


def test_state_dict_with_factory(tmp_path):
    net = _net()
    path = tmp_path / "weights.pt"
    torch.save(net.state_dict(), path)
    loaded = load_model(path, factory=_net)
    x = torch.randn(5, 4)
    torch.testing.assert_close(loaded(x), net(x), rtol=0, atol=0)
    assert not loaded.training
    with pytest.raises(InputError, match="holds a state dict \\(4 tensors\\) but no model factory"):
        load_model(path)
    wider = lambda: nn.Sequential(nn.Linear(4, 9), nn.ReLU(), nn.Linear(9, 1))  # noqa: E731
    with pytest.raises(InputError, match="does not fit the module built by the factory"):
        load_model(path, factory=wider)


def test_not_a_model(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_model(tmp_path / "nope.pt")
    path = tmp_path / "list.pt"
    torch.save([1, 2, 3], path)
    with pytest.raises(InputError, match="is not a model file \\(found list\\)"):
        load_model(path)


def test_model_sha256(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"faux" * 1000)
    assert model_sha256(path) == hashlib.sha256(b"faux" * 1000).hexdigest()


@pytest.mark.slow
def test_torch_export_round_trip_is_differentiable(tmp_path):
    from faux_checks import TargetOutput
    from faux_checks.method.gradients import target_probability_and_gradient

    net = _net().eval()
    x = torch.randn(6, 4)
    program = torch.export.export(net, (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    path = tmp_path / "model.pt2"
    torch.export.save(program, str(path))
    loaded = load_model(path)
    x2 = torch.randn(9, 4)                                            # another batch size
    torch.testing.assert_close(loaded(x2), net(x2), rtol=0, atol=0)
    _, g_loaded = target_probability_and_gradient(loaded, x2, TargetOutput("logit"))
    _, g_net = target_probability_and_gradient(net, x2, TargetOutput("logit"))
    torch.testing.assert_close(g_loaded, g_net, rtol=1e-6, atol=1e-12)


def test_a_file_that_is_no_pickle_is_not_called_unsafe(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="is not a model file torch can read") as info:
        load_model(path)
    assert not isinstance(info.value, UnsafeModelError)
