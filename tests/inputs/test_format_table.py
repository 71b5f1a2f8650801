"""The model format table: every registered version's ``model_format`` tag names its format, read from the file.

``Registry.register_version`` records ``model_format`` itself, read from the file (not only ``faux-checks register``
does), so a version registered from Python reads back its format (``unknown`` only for a file of no known format); the
MLflow flavours and the forward-only loaders read this one table rather than a list of formats each.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from faux_checks.inputs.formats import FORMATS, detect_format
from faux_checks.inputs.models import model_format, save_torchscript
from faux_checks.inputs.formats import FORWARD_ONLY
from faux_checks.registry.flavors import FLAVORS


@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> dict:
    """One small model per format (the recipes of tests/report/test_report_limitations.py and tests/app/test_blackbox.py)."""
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    sio = pytest.importorskip("skops.io")
    pytest.importorskip("onnx")
    from sklearn.linear_model import LogisticRegression

    d = tmp_path_factory.mktemp("formats")
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 3)), (rng.random(200) > 0.5).astype(int)
    xgb.XGBClassifier(n_estimators=2).fit(X, y).get_booster().save_model(str(d / "m.json"))
    xgb.XGBClassifier(n_estimators=2).fit(X, y).get_booster().save_model(str(d / "m.ubj"))
    lgb.LGBMClassifier(n_estimators=2, verbose=-1).fit(X, y).booster_.save_model(str(d / "m.txt"))
    sio.dump(LogisticRegression().fit(X, y), d / "m.skops")
    torch.onnx.export(torch.nn.Linear(3, 1), (torch.zeros(2, 3),), str(d / "m.onnx"), dynamo=False)
    save_torchscript(torch.nn.Linear(3, 1), d / "m.pt")
    torch.save(torch.nn.Linear(3, 1).state_dict(), d / "state.pt")
    (d / "x.bin").write_bytes(b"not a model")
    return {"xgboost": d / "m.json", "xgboost-ubj": d / "m.ubj", "lightgbm": d / "m.txt", "skops": d / "m.skops",
            "onnx": d / "m.onnx", "torchscript": d / "m.pt", "torch.save": d / "state.pt", "unknown": d / "x.bin"}


def test_register_version_tags_each_format(model_files, tmp_path):
    from faux_checks.registry import Registry

    reg = Registry(f"sqlite:///{tmp_path / 'mlflow.db'}")
    read = {}
    for key, path in model_files.items():
        version = reg.register_version(f"m-{key.replace('.', '-')}", path)
        read[key] = reg.client.get_model_version(f"m-{key.replace('.', '-')}", version).tags["model_format"]
    assert read == {"xgboost": "xgboost", "xgboost-ubj": "xgboost", "lightgbm": "lightgbm", "skops": "skops",
                    "onnx": "onnx", "torchscript": "torchscript", "torch.save": "torch.save", "unknown": "unknown"}
    # a format the caller gave is kept, not overwritten
    version = reg.register_version("given", model_files["onnx"], tags={"model_format": "onnx-opset-17"})
    assert reg.client.get_model_version("given", version).tags["model_format"] == "onnx-opset-17"


def test_the_table_gives_capabilities_and_the_other_lists(model_files):
    assert model_format(model_files["onnx"]) == detect_format(model_files["onnx"]).name == "onnx"
    assert detect_format(model_files["unknown"]) is None
    assert [n for n, f in FORMATS.items() if f.differentiable] == ["torchscript", "torch.export", "torch.save"]
    assert [n for n, f in FORMATS.items() if not f.safe] == ["torch.save"]
    assert FORWARD_ONLY == ("onnx", "xgboost", "lightgbm", "skops")
    assert FLAVORS == {"onnx": "data", "xgboost": "data", "lightgbm": "data", "sklearn": "pickled_model"}


def test_forward_only_entries_load_through_their_loader(model_files):
    from faux_checks.method.forward import is_forward_only

    for name in FORWARD_ONLY:
        model = FORMATS[name].load(model_files[name], ())
        assert is_forward_only(model), name
        out = model.predict_raw(np.zeros((2, 3), np.float32))   # the ONNX graph takes 2 rows
        assert np.asarray(out).shape[0] == 2 and np.all(np.isfinite(out)), name
