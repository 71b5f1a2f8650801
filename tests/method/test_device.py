"""The device option: ``[scale] device`` / ``--device``, resolved once, recorded, never hashed.

On the CPU the device plumbing must not change a single bit (the pinned scores of tests/method/test_swap_pinned.py stay;
here: the same bytes with and without ``device="cpu"``). On CUDA (skipped without a GPU) the scores agree with the
CPU's within ``CUDA_ATOL`` probability points: float32 kernels that sum in another order move the target's logit by
~1e-6 relative, and the line search and the quantile matching carry that through.
"""

import numpy as np
import pytest
import torch

from _swap_pin_problem import CASES, _problem

from faux_checks._device import DEVICE_ENV, host, module_on, resolve_device
from faux_checks.errors import InputError
from faux_checks.gate.policy import Policy, load_policy
from faux_checks.method.auxiliary import AuxiliaryModel

#: CPU against CUDA, in probability points (δ is 0.1): float32 reduction order, amplified by the line search.
CUDA_ATOL = 1e-4
HAS_CUDA = torch.cuda.is_available()
#: The shipped policy's hash before ``[scale] device`` existed (commit a2379b7): the field must not change it.
DEFAULT_POLICY_SHA256 = "018fc1f5a0b4cb9d1878c8bcb2dcabaea0311e1794292124d4ebc27b1e7d63d2"


@pytest.fixture(autouse=True)
def _no_device_env(monkeypatch):
    monkeypatch.delenv(DEVICE_ENV, raising=False)


def test_cpu_and_auto_resolve_without_a_gpu():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(None) == resolve_device("auto") == torch.device("cuda" if HAS_CUDA else "cpu")


@pytest.mark.skipif(HAS_CUDA, reason="needs a machine without CUDA")
def test_cuda_without_a_gpu_is_an_input_error_naming_the_fix():
    with pytest.raises(InputError, match=r"\[scale\] device = 'cuda' but torch .* sees no CUDA device.*--device auto or cpu"):
        resolve_device("cuda")


def test_the_environment_wins_over_the_policy_and_bad_values_are_refused(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    assert resolve_device("cuda") == torch.device("cpu")      # --device cpu on a policy that says cuda
    monkeypatch.setenv(DEVICE_ENV, "tpu")
    with pytest.raises(InputError, match=r"\$FAUX_CHECKS_DEVICE = 'tpu' is not a device"):
        resolve_device("auto")


def test_policy_field_defaults_to_auto_and_stays_out_of_the_hash():
    policy = load_policy()
    assert policy.scale.device == "auto"
    assert policy.sha256() == DEFAULT_POLICY_SHA256
    for device in ("cpu", "cuda"):
        other = Policy.model_validate(policy.model_dump() | {"scale": policy.scale.model_dump() | {"device": device}})
        assert other.scale.device == device
        assert other.sha256() == DEFAULT_POLICY_SHA256
    with pytest.raises(Exception, match="device"):
        Policy.model_validate(policy.model_dump() | {"scale": {"device": "gpu"}})


def test_helpers_leave_cpu_objects_alone():
    net = torch.nn.Linear(3, 1)
    assert module_on(net, torch.device("cpu")) is net
    t = torch.arange(4.0)
    a = host(t)
    a[0] = 9.0                                  # a view, not a copy
    assert t[0] == 9.0


@pytest.mark.parametrize("case", CASES)
def test_device_cpu_gives_the_same_bytes_as_no_device(case):
    tester, X, c = _problem(case)
    before = tester.evaluate(X, c, evidence=True)
    tester.device = torch.device("cpu")
    after = tester.evaluate(X, c, evidence=True)
    assert tester.device_used_ == "cpu"
    for key in ("scores", "probability", "counterfactual_probability", "evidence", "counterfactual"):
        np.testing.assert_array_equal(getattr(after, key), getattr(before, key), err_msg=key)


def _fit(device, X, c, seed=3):
    return AuxiliaryModel(kind="binary", hidden=(8,), epochs=3, seed=seed, device=device).fit(X, c)


def _aux_data():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 4)).astype(np.float32)
    c = (X[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(np.int64)
    return X, c


def test_aux_training_on_device_cpu_is_the_default_training_bit_for_bit():
    X, c = _aux_data()
    a = AuxiliaryModel(kind="binary", hidden=(8,), epochs=3, seed=3).fit(X, c)
    b = _fit("cpu", X, c)
    for (name, p), q in zip(a.net_.state_dict().items(), b.net_.state_dict().values(), strict=False):
        assert torch.equal(p, q), name
    assert a.quality_ == b.quality_ and a.quality_ > 0.7      # it learnt something (c = [x0 + noise > 0])


def test_the_check_records_the_device_it_scored_on():
    import pandas as pd

    from faux_checks.gate.one_attribute import check_one_attribute

    rng = np.random.default_rng(0)
    n = 600
    frame = pd.DataFrame({"x0": rng.normal(size=n), "x1": rng.normal(size=n)})
    frame["g"] = np.where(frame.x0 + rng.normal(size=n) > 0, "a", "b")
    target = torch.nn.Sequential(torch.nn.Linear(2, 1)).eval()
    policy = load_policy(protected="g").with_overrides(label=None)
    policy = policy.with_overrides(aux=policy.aux.model_copy(update={"epochs": 2}),
                                   scale=policy.scale.model_copy(update={"device": "cpu"}))
    result = check_one_attribute(target, frame, policy=policy)
    assert result.provenance["device"] == "cpu"


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("case", CASES)
def test_cuda_scores_agree_with_the_cpu_within_tolerance(case):
    tester, X, c = _problem(case)
    cpu = tester.evaluate(X, c, evidence=True)
    tester.device = torch.device("cuda")
    gpu = tester.evaluate(X, c, evidence=True)
    assert tester.device_used_ == "cuda"
    np.testing.assert_allclose(gpu.scores, cpu.scores, rtol=0, atol=CUDA_ATOL)
    np.testing.assert_allclose(gpu.probability, cpu.probability, rtol=0, atol=CUDA_ATOL)
    np.testing.assert_array_equal(gpu.undefined, cpu.undefined)
    assert next(tester.target_model.parameters()).device.type == "cpu"     # the given model was not moved


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_cuda_aux_training_comes_back_on_the_cpu_with_the_cpu_quality():
    X, c = _aux_data()
    cpu, gpu = _fit("cpu", X, c), _fit("cuda", X, c)
    assert next(gpu.net_.parameters()).device.type == "cpu"
    assert abs(gpu.quality_ - cpu.quality_) < 0.01


@pytest.mark.skipif(HAS_CUDA, reason="needs a machine without CUDA")
@pytest.mark.parametrize("command", [["check", "--model", "absent.pt", "--data", "absent.csv", "--protected", "g"],
                                     ["gate", "m", "--data", "absent.csv"], ["audit", "m", "--data", "absent.csv"],
                                     ["score-large", "--model", "absent.pt", "--data", "absent.parquet",
                                      "--protected", "g", "--out", "absent-out.parquet"]])
def test_cli_device_cuda_without_a_gpu_exits_2_before_reading_anything(command, capsys, monkeypatch, tmp_path):
    import os

    from faux_checks_app.cli import main

    monkeypatch.chdir(tmp_path)
    assert main([*command, "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "'cuda' but torch" in err and "absent" not in err      # refused on the device, not on the missing files
    assert DEVICE_ENV not in os.environ                            # the override ends with the command
