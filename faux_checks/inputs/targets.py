"""Forward-only target models from files, loaded without unpickling: ONNX, XGBoost, LightGBM, scikit-learn (skops).

Each loader returns a :class:`~faux_checks.method.forward.ForwardOnlyTarget`: the model's raw output on the
spec-encoded matrix (n, d), batched, with the output form the file declares. The formats, detected from the
file's content (not its name) by :func:`sniff_format`:

==========  =========================================  ==================================  ==================
format      file                                       output given to the gate            ``target_access``
==========  =========================================  ==================================  ==================
onnx        ``onnx`` ModelProto (protobuf)             the graph's output (``auto``;        forward (onnxruntime)
                                                       ``probabilities`` -> softmax)
xgboost     ``Booster.save_model`` JSON or UBJ         margins: log-odds (``logit``) or     forward (xgboost)
                                                       class scores (``logits``)
lightgbm    ``Booster.save_model`` text                raw scores, as XGBoost               forward (lightgbm)
skops       ``skops.io.dump`` of a fitted classifier   ``predict_proba`` (``softmax``)     forward (scikit-learn via skops)
            or regressor                               ``predict`` (``value``)
==========  =========================================  ==================================  ==================

None of these formats runs code when read: ONNX, XGBoost and LightGBM files are data, and skops rebuilds
only types it trusts. A skops file that holds other types is refused with their list
(:class:`~faux_checks.errors.UnsafeModelError`); pass the ones you have reviewed as ``trusted_types``.
The libraries are the optional extra ``blackbox`` (``pip install faux-checks[blackbox]``).

Trees and margins: the gate reads P(y = target_class | x) from the margin in float64, so a tree ensemble's
probability does not saturate to exactly 0 or 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import InputError, UnsafeModelError
from ..method.forward import ForwardOnlyTarget
from .missing import sklearn_takes_nan

__all__ = ["lightgbm_target", "load_lightgbm", "load_onnx", "load_skops", "load_xgboost", "sklearn_target",
           "xgboost_target"]

_EXTRA_HINT = "install the optional extra: pip install 'faux-checks[blackbox]'"


def _require(module: str, fmt: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(f"reading a {fmt} model needs the package '{module}': {_EXTRA_HINT}") from None


def load_onnx(path: str | Path, *, output_name: str | None = None) -> ForwardOnlyTarget:
    """An ONNX graph through onnxruntime (CPU).

    Parameters
    ----------
    path : str or Path
        ONNX model with one input of shape (n, d), float or double.
    output_name : str, optional
        The output to read. Default: ``probabilities`` if the graph has it (scikit-learn converters with
        ``zipmap=False``; read as softmax), else the only output, else the first float output.

    Raises
    ------
    InputError
        The graph has more than one input, no float output, or onnxruntime cannot build a session.
    """
    ort = _require("onnxruntime", "ONNX")
    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - the backend's own error, carried in the InputError
        raise InputError(f"cannot load ONNX model {path}: {type(exc).__name__}: {str(exc)[:300]}") from None
    inputs = session.get_inputs()
    if len(inputs) != 1:
        raise InputError(f"ONNX model {path} has {len(inputs)} inputs ({[i.name for i in inputs]}); the gate feeds one "
                         "(n, d) matrix of encoded features: export the model with a single input")
    inp = inputs[0]
    dtype = {"tensor(float)": np.float32, "tensor(double)": np.float64}.get(inp.type)
    if dtype is None:
        raise InputError(f"ONNX model {path} takes {inp.type}; the gate feeds float32 or float64 features")
    outputs = session.get_outputs()
    names = [o.name for o in outputs]
    if output_name is None:
        floats = [o.name for o in outputs if o.type in ("tensor(float)", "tensor(double)")]
        output_name = ("probabilities" if "probabilities" in floats else names[0] if len(names) == 1
                       else floats[0] if floats else None)
    if output_name not in names:
        raise InputError(f"ONNX model {path}: no usable float output (outputs: {names}); pass output_name")
    d = inp.shape[1] if len(inp.shape) == 2 and isinstance(inp.shape[1], int) else None
    form = "softmax" if output_name == "probabilities" else "auto"

    def predict(x: np.ndarray) -> np.ndarray:
        return session.run([output_name], {inp.name: x})[0]

    return ForwardOnlyTarget(predict, access="forward (onnxruntime)", output_form=form, n_features=d, dtype=dtype,
                             source=session)


def _margin_form(objective: str, path, library: str) -> str:
    if objective.startswith(("binary", "reg:logistic", "cross_entropy", "xentropy")):
        return "logit"
    if objective.startswith(("multi", "multiclass", "softmax")):
        return "logits"
    raise InputError(f"{library} model {path} has objective {objective!r}; the gate tests classifiers "
                     "(binary or multi-class objectives)")


def load_xgboost(path: str | Path) -> ForwardOnlyTarget:
    """An XGBoost booster from its JSON or UBJ model file (``Booster.save_model``), read as margins.

    Output: the margin (``predict_type="margin"``): one log-odds column for binary objectives (form
    ``logit``), m class scores for ``multi:*`` (form ``logits``). Input: float32 (XGBoost's own precision).

    Raises
    ------
    InputError
        The file is not an XGBoost model, or the objective is not a classification one.
    """
    xgb = _require("xgboost", "XGBoost")
    try:
        booster = xgb.Booster(model_file=str(path))
    except Exception as exc:  # noqa: BLE001 - the backend's own error, carried in the InputError
        raise InputError(f"cannot load XGBoost model {path}: {str(exc).splitlines()[0][:300]}") from None
    return xgboost_target(booster, where=str(path), access="forward (xgboost)")


def xgboost_target(booster, *, where: str, access: str) -> ForwardOnlyTarget:
    """An ``xgboost.Booster`` (from a file or in memory) as a forward-only target read as margins.

    ``where`` names the model in messages (a path, or ``"in-memory XGBClassifier"``).

    Raises
    ------
    InputError
        The objective is not a classification one.
    """
    booster.set_param({"nthread": 0})
    objective = json.loads(booster.save_config())["learner"]["objective"]["name"]
    form = _margin_form(objective, where, "XGBoost")

    def predict(x: np.ndarray) -> np.ndarray:
        return booster.inplace_predict(x, predict_type="margin", validate_features=False)

    return ForwardOnlyTarget(predict, access=access, output_form=form,
                             n_features=booster.num_features() or None, dtype=np.float32, source=booster,
                             piecewise_constant=True, takes_missing=True)


def load_lightgbm(path: str | Path) -> ForwardOnlyTarget:
    """A LightGBM booster from its text model file (``Booster.save_model``), read as raw scores.

    Output: ``raw_score=True``: one log-odds column (binary, form ``logit``) or m class scores (multi-class,
    form ``logits``). Input: float64.

    Raises
    ------
    InputError
        The file is not a LightGBM model, or the objective is not a classification one.
    """
    lgb = _require("lightgbm", "LightGBM")
    try:
        booster = lgb.Booster(model_file=str(path))
    except Exception as exc:  # noqa: BLE001 - the backend's own error, carried in the InputError
        raise InputError(f"cannot load LightGBM model {path}: {str(exc).splitlines()[0][:300]}") from None
    return lightgbm_target(booster, where=str(path), access="forward (lightgbm)")


def lightgbm_target(booster, *, where: str, access: str) -> ForwardOnlyTarget:
    """A ``lightgbm.Booster`` (from a file or in memory) as a forward-only target read as raw scores.

    Raises
    ------
    InputError
        The objective is not a classification one.
    """
    objective = str(booster.dump_model(num_iteration=0).get("objective", ""))
    form = _margin_form(objective, where, "LightGBM")

    def predict(x: np.ndarray) -> np.ndarray:
        return booster.predict(x, raw_score=True)

    return ForwardOnlyTarget(predict, access=access, output_form=form,
                             n_features=booster.num_feature(), dtype=np.float64, source=booster, piecewise_constant=True,
                             takes_missing=True)


def load_skops(path: str | Path, *, trusted_types: Sequence[str] = ()) -> ForwardOnlyTarget:
    """A fitted scikit-learn classifier from a skops file, read through ``predict_proba`` (form ``softmax``).

    skops rebuilds only the types it trusts by default (scikit-learn's estimators, numpy, builtins) and those
    in ``trusted_types``; the file's other types are listed by ``skops.io.get_untrusted_types`` before
    anything is built.

    Parameters
    ----------
    trusted_types : sequence of str
        Fully qualified type names you have reviewed (CLI: ``--trust-type``), e.g. ``"mylib.MyScaler"``.

    Raises
    ------
    UnsafeModelError
        The file holds types not trusted by default nor listed: the message lists them. Nothing was built.
    InputError
        The object has no ``predict_proba`` (a regressor, a transformer).
    """
    sio = _require("skops.io", "scikit-learn (skops)")
    try:
        untrusted = sio.get_untrusted_types(file=str(path))
    except Exception as exc:  # noqa: BLE001 - the backend's own error, carried in the InputError
        raise InputError(f"cannot read skops file {path}: {type(exc).__name__}: {str(exc)[:300]}") from None
    refused = sorted(set(untrusted) - set(trusted_types))
    if refused:
        raise UnsafeModelError(
            f"refused to load {path}: it holds {len(refused)} type(s) skops does not trust by default: "
            f"{', '.join(refused)}. Nothing from it was built. Review them and, if you trust them, pass them as "
            "trusted types (load_model(..., trusted_types=[...]); CLI --trust-type NAME, once per type)")
    try:
        model = sio.load(str(path), trusted=list(untrusted))
    except Exception as exc:  # noqa: BLE001 - the backend's own error, carried in the InputError
        raise InputError(f"cannot load skops file {path}: {type(exc).__name__}: {str(exc)[:300]}") from None
    if not hasattr(model, "predict_proba") and not _is_regressor(model):
        raise InputError(f"the scikit-learn object in {path} ({type(model).__name__}) has no predict_proba and is not "
                         "a regressor; the gate tests classifiers (predict_proba) and regressors (predict, "
                         "target_output = 'value')")

    # a Pipeline starting with a ColumnTransformer carries that transformer as its feature spec
    return sklearn_target(model, access="forward (scikit-learn via skops)")


def _is_regressor(model) -> bool:
    """A fitted scikit-learn regressor (or a Pipeline ending in one): read through ``predict``."""
    from sklearn.base import is_regressor

    return bool(hasattr(model, "predict") and is_regressor(model))


def sklearn_target(model, *, access: str) -> ForwardOnlyTarget:
    """A fitted scikit-learn classifier or Pipeline as a forward-only target (``predict_proba``, form softmax).

    A regressor (no ``predict_proba``, :func:`sklearn.base.is_regressor`) is read through ``predict`` as it is
    (form ``"value"``, no sigmoid); the policy must then declare ``target_output = "value"`` and ``[faux] unit``.

    A Pipeline whose first step is a ``ColumnTransformer`` is split: its transformer becomes the target's
    ``feature_spec`` (:func:`~faux_checks.inputs.column_transformer.from_column_transformer`) and the rest of
    the pipeline reads the encoded matrix. Any other object is queried on the encoded matrix as it is.

    Raises
    ------
    InputError
        No ``predict_proba`` (a regressor, a transformer); a ColumnTransformer step the spec cannot reproduce.
    """
    regressor = not hasattr(model, "predict_proba") and _is_regressor(model)
    if not hasattr(model, "predict_proba") and not regressor:
        raise InputError(f"the scikit-learn object {type(model).__name__} has no predict_proba and is not a regressor; "
                         "the gate tests classifiers (fit a classifier, or wrap a calibrated one) and regressors "
                         "(predict, read with target_output = 'value')")
    spec = None
    rest = model
    steps = getattr(model, "steps", None)
    if steps:
        from sklearn.compose import ColumnTransformer

        first = steps[0][1]
        if isinstance(first, ColumnTransformer):
            from .column_transformer import from_column_transformer

            try:
                spec = from_column_transformer(first, name=f"pipeline step '{steps[0][0]}'")
            except InputError as exc:
                raise InputError(f"the Pipeline's first step '{steps[0][0]}' cannot serve as the feature spec: {exc}") from None
            rest = model[1:]
            access = f"{access}; features: the pipeline's ColumnTransformer '{steps[0][0]}'"
    n_features = spec.n_features if spec is not None else getattr(model, "n_features_in_", None)
    final = steps[-1][1] if steps else model
    trees = type(final).__module__.startswith(("sklearn.tree", "sklearn.ensemble"))

    def predict(x: np.ndarray) -> np.ndarray:
        return rest.predict(x) if regressor else rest.predict_proba(x)    # a regressor: its raw value, (n,)

    target = ForwardOnlyTarget(predict, access=access, output_form="value" if regressor else "softmax",
                               n_features=int(n_features) if n_features is not None else None, dtype=np.float64,
                               source=model, piecewise_constant=trees, takes_missing=sklearn_takes_nan(rest))
    target.feature_spec = spec
    return target
