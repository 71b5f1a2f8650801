"""Your estimator as it is: in-memory scikit-learn, XGBoost, LightGBM and PyTorch targets for the gate.

The gate scores a target on the encoded matrix X (n, d) a :class:`~faux_checks.inputs.tabular.FeatureSpec`
makes from the raw rows. :func:`as_target` turns what a data scientist holds into that pair:

=====================================================  =========================================================
given                                                  read as
=====================================================  =========================================================
``torch.nn.Module`` / TorchScript                      itself (autograd), the spec given or the passthrough one
``sklearn.pipeline.Pipeline`` whose first step is a    the feature spec is the transformer's own
``ColumnTransformer``                                  (:func:`~faux_checks.inputs.column_transformer.from_column_transformer`);
                                                       the target is the rest of the pipeline on its output
                                                       (``predict_proba``), so the gate is given the raw DataFrame
other scikit-learn estimator or Pipeline with          ``predict_proba`` on the encoded matrix
``predict_proba``
a scikit-learn regressor or a Pipeline ending in one   ``predict``, form ``value`` (policy ``target_output = "value"``)
``xgboost.Booster`` / ``XGBClassifier``                margins (log-odds or class scores), as the file loader
``lightgbm.Booster`` / ``LGBMClassifier``              raw scores, as the file loader
=====================================================  =========================================================

Every non-torch target becomes a :class:`~faux_checks.method.forward.ForwardOnlyTarget` (queried for predictions
only; the swap reading, the default, needs nothing else). A skops file holding such a pipeline is read the same
way (:func:`~faux_checks.inputs.targets.load_skops`), so a version logged with ``mlflow.sklearn.log_model`` gates
on raw rows without a separate spec.

Our reading: deriving the spec from the pipeline's own transformer keeps the counterfactual
moves in the space where the protected attribute's correlates are encoded (one-hot levels, standardised numbers),
which is where the swap reading is defined; wrapping the whole pipeline around raw columns would need the
moves decoded back into categories.
"""

from __future__ import annotations

import torch

from ..errors import InputError
from .tabular import FeatureSpec
from .targets import lightgbm_target, sklearn_target, xgboost_target

__all__ = ["as_target", "sklearn_target"]   # sklearn_target lives in .targets beside the other wrappers

SUPPORTED_TARGETS = ("a torch.nn.Module or TorchScript module, a fitted scikit-learn estimator or Pipeline with "
                     "predict_proba (or a regressor, target_output = 'value'), an xgboost Booster/XGBClassifier or a "
                     "lightgbm Booster/LGBMClassifier")


def _library(model) -> str:
    return type(model).__module__.split(".")[0]


def as_target(model, feature_spec: FeatureSpec | None = None) -> tuple[torch.nn.Module, FeatureSpec | None]:
    """The target the gate scores and the feature spec it encodes with, from what the user holds.

    Parameters
    ----------
    model : object
        One of the kinds in the module docstring; a :class:`ForwardOnlyTarget` loaded from a skops pipeline
        carries its derived spec (``feature_spec`` attribute).
    feature_spec : FeatureSpec, optional
        The spec the user gave. Kept as given; for a pipeline it must have the transformer's output width.

    Returns
    -------
    (target, FeatureSpec or None)
        ``target`` maps (n, d) to the model's output; the spec is the one given, else the one the model
        carries (a pipeline's transformer), else None (the check then uses the passthrough spec).

    Raises
    ------
    InputError
        A model of another kind (its type named, with the kinds accepted); a scikit-learn object without
        ``predict_proba``; a given spec whose width differs from the pipeline transformer's output (both widths
        named); a ColumnTransformer step the spec cannot reproduce (the step named, from
        :func:`~faux_checks.inputs.column_transformer.from_column_transformer`).
    """
    if isinstance(model, (torch.nn.Module, torch.jit.ScriptModule)):
        carried = getattr(model, "feature_spec", None)
        return model, _choose_spec(feature_spec, carried, getattr(model, "n_features", None))
    library = _library(model)
    if library == "sklearn":
        target = sklearn_target(model, access="forward (scikit-learn, in memory)")
        return target, _choose_spec(feature_spec, getattr(target, "feature_spec", None), target.n_features)
    if library == "xgboost":

        booster = model.get_booster() if hasattr(model, "get_booster") else model
        return xgboost_target(booster, where=f"in-memory {type(model).__name__}", access="forward (xgboost, in memory)"), feature_spec
    if library == "lightgbm":

        booster = getattr(model, "booster_", model)
        return lightgbm_target(booster, where=f"in-memory {type(model).__name__}", access="forward (lightgbm, in memory)"), feature_spec
    raise InputError(f"the target model is a {type(model).__module__}.{type(model).__name__}; the gate takes "
                     f"{SUPPORTED_TARGETS}. Wrap anything else as faux_checks.ForwardOnlyTarget(predict, access=...)")


def _choose_spec(given: FeatureSpec | None, carried: FeatureSpec | None, width: int | None) -> FeatureSpec | None:
    """The given spec (checked against the model's input width when it carries its own), else the carried one."""
    if given is None:
        return carried
    if carried is not None and width is not None and given.n_features != width:
        raise InputError(
            f"the feature spec '{given.name}' encodes {given.n_features} features but the pipeline's ColumnTransformer "
            f"outputs {width} (columns {carried.source_columns[:8]}{' ...' if len(carried.source_columns) > 8 else ''}); "
            "pass no feature spec (the pipeline's own transformer is used) or "
            "faux_checks.from_column_transformer(pipeline[0])")
    return given
