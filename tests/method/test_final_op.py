"""The output form read from a torch target's last operation (faux_checks.method.final_op)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from faux_checks.errors import InputError
from faux_checks.method.final_op import final_op_name
from faux_checks.method.output import TargetOutput, predict_probability, resolve_output_form


class _SoftmaxColumn(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x):
        return torch.softmax(self.lin(x), dim=1)[:, 1]


class _FunctionalSigmoid(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 1)

    def forward(self, x):
        return torch.sigmoid(self.lin(x)).squeeze(-1)


def _forms(model, x):
    return {"eager": model, "script": torch.jit.script(model), "trace": torch.jit.trace(model, x),
            "export": torch.export.export(model, (x,)).module()}


def test_a_final_sigmoid_or_softmax_declares_the_output_form():
    torch.manual_seed(0)
    x = torch.randn(64, 3)
    sigmoid = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1), nn.Sigmoid())
    for how, model in _forms(sigmoid, x).items():
        resolved = resolve_output_form(model, x, TargetOutput())
        assert resolved.form == "probability", how
        with torch.no_grad():
            expected = sigmoid(x)[:, 0].double().numpy()
        assert predict_probability(model, x, resolved) == pytest.approx(expected, abs=1e-6)   # read as it is
    softmax = nn.Sequential(nn.Linear(3, 2), nn.Softmax(dim=1))
    for how, model in _forms(softmax, x).items():
        assert resolve_output_form(model, x, TargetOutput()).form == "softmax", how
    for how in ("script", "export"):                                   # a column of a softmax, a functional sigmoid
        assert resolve_output_form(_forms(_SoftmaxColumn(), x)[how], x, TargetOutput()).form == "probability"
        assert resolve_output_form(_forms(_FunctionalSigmoid(), x)[how], x, TargetOutput()).form == "probability"
    log_softmax = nn.Sequential(nn.Linear(3, 2), nn.LogSoftmax(dim=1))
    assert final_op_name(torch.jit.script(log_softmax), x) == "log_softmax"
    assert resolve_output_form(log_softmax, x, TargetOutput()).form == "logits"


def test_an_exported_file_as_mlflow_pytorch_stores_it_reads_its_form(tmp_path):
    from faux_checks.inputs.models import load_model

    x = torch.randn(32, 3)
    model = nn.Sequential(nn.Linear(3, 1), nn.Sigmoid())
    path = tmp_path / "model.pt2"                                     # mlflow.pytorch's data/model.pt2
    torch.export.save(torch.export.export(model, (x,)), str(path))
    assert resolve_output_form(load_model(path), x, TargetOutput()).form == "probability"


def test_an_output_in_0_1_without_a_final_activation_names_the_policy_key():
    x = torch.randn(16, 3)
    lin = nn.Sequential(nn.Linear(3, 1))
    with torch.no_grad():
        lin[0].weight.zero_()
        lin[0].bias.fill_(0.3)
    with pytest.raises(InputError) as err:
        resolve_output_form(lin, x, TargetOutput())
    msg = str(err.value)
    assert "could be a probability or a logit (its last operation, 'Linear', does not say which)" in msg
    assert "policy target_output" in msg and "--output-form" in msg
    assert resolve_output_form(lin, x, TargetOutput("logit")).form == "logit"          # a declaration is kept
    eager = _FunctionalSigmoid()                                      # eager torch.sigmoid: not read, declared instead
    with pytest.raises(InputError, match="policy target_output"):
        resolve_output_form(eager, x, TargetOutput())
