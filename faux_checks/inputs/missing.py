"""Missing input values for a target that takes NaN: which targets do, and the NaN they receive.

A target takes NaN when its format or pipeline handles it as it would in production:

=========================================================  ==================================================
target                                                     takes NaN
=========================================================  ==================================================
XGBoost / LightGBM booster (file or in memory)             yes (a learnt default direction per split)
scikit-learn estimator whose input tags allow NaN          yes (``HistGradientBoostingClassifier``, ...)
scikit-learn ``Pipeline``                                  yes when a step imputes (``sklearn.impute``) before
                                                           any step that refuses NaN, or every step allows it
ONNX graph, PyTorch module, TorchScript                    no, unless the policy declares it
=========================================================  ==================================================

The policy's ``missing_values`` key overrides the detection: ``"pass"`` declares that the target takes NaN,
``"refuse"`` refuses missing values for every target (:func:`target_takes_missing`).

For such a target the audited rows' numeric columns with missing values are encoded with an indicator
(:meth:`~faux_checks.inputs.tabular.FeatureSpec.with_missing_indicators`): a finite value (the fitted mean
where missing) and a present/missing one-hot group, which the auxiliary model reads and the swap move may
switch like any binary categorical feature. :class:`MissingAsNaN` gives the target what it would see in
production: the value, or NaN where the group says missing (:func:`nan_inputs`).
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["MISSINGNESS", "MissingAsNaN", "feature_columns", "nan_inputs", "sklearn_takes_nan", "target_takes_missing",
           "with_nan_inputs"]

#: How the report names a column's present/missing group (``savings (missing)``): a feature group of its own.
MISSINGNESS = "{} (missing)"


def _allows_nan(estimator) -> bool:
    from sklearn.utils import get_tags

    try:
        return bool(get_tags(estimator).input_tags.allow_nan)
    except Exception:  # noqa: BLE001 - an object without scikit-learn tags is not known to take NaN
        return False


def sklearn_takes_nan(model) -> bool:
    """Whether a fitted scikit-learn estimator or Pipeline takes NaN in its input.

    An estimator: its input tags (``sklearn.utils.get_tags(model).input_tags.allow_nan``). A Pipeline, step
    by step: a step whose tags refuse NaN ends the walk (no); an imputer (``sklearn.impute``, not
    ``MissingIndicator``) that allows NaN removes it (yes); a step that allows NaN passes it on (a scaler);
    the last step allowing NaN is a yes (scikit-learn's own Pipeline tags read only the first step).
    """
    steps = getattr(model, "steps", None)
    if not steps:
        return _allows_nan(model)
    for _, step in steps:
        if step is None or step == "passthrough":
            continue
        if not _allows_nan(step):
            return False
        module = type(step).__module__
        if module.startswith("sklearn.impute") and type(step).__name__ != "MissingIndicator":
            return True
    return True


def target_takes_missing(target, policy_value: str = "auto") -> bool:
    """Whether the audit passes missing values to ``target``: the policy's ``missing_values`` over the detection.

    Parameters
    ----------
    target : torch module or ForwardOnlyTarget
        A loader or :func:`~faux_checks.inputs.estimators.as_target` sets ``takes_missing`` on targets that take
        NaN (boosters, scikit-learn estimators by :func:`sklearn_takes_nan`); any other target does not.
    policy_value : {"auto", "pass", "refuse"}
        ``"pass"``: the target takes NaN (declared); ``"refuse"``: never; ``"auto"``: as detected.
    """
    if policy_value == "pass":
        return True
    if policy_value == "refuse":
        return False
    return bool(getattr(target, "takes_missing", False))


def feature_columns(spec) -> np.ndarray:
    """(d,) object: each encoded feature's source column; an indicator's present/missing pair named :data:`MISSINGNESS`.

    The swap reading tests and holds a column's value and its missingness apart, so the report names them apart.
    """
    names = np.asarray(spec.source_columns, dtype=object)[spec.feature_to_column()]
    for _, present, missing in spec.missing_positions():
        names[[present, missing]] = MISSINGNESS.format(names[present])
    return names


def nan_inputs(x: torch.Tensor, positions: np.ndarray) -> torch.Tensor:
    """The target's input from the encoded matrix: each indicator column's value, NaN where it says missing.

    Parameters
    ----------
    x : Tensor of shape (n, d_encoded)
        Encoded rows (:meth:`~faux_checks.inputs.tabular.FeatureSpec.encode` of a spec with indicators), possibly
        moved by the counterfactual (a fractional group reads as missing where its missing entry is the larger).
    positions : ndarray of shape (k, 3), int64
        (value, present, missing) positions per indicator column
        (:meth:`~faux_checks.inputs.tabular.FeatureSpec.missing_positions`).

    Returns
    -------
    Tensor of shape (n, d_encoded − 2k)
        The indicator groups dropped, NaN in the value where missing; the other features as given.
    """
    if not len(positions):
        return x
    value, present, missing = (torch.as_tensor(positions[:, i], device=x.device) for i in range(3))
    out = x.clone()
    absent = x.index_select(1, missing) > x.index_select(1, present)                     # (n, k)
    out[:, value] = torch.where(absent, torch.full_like(absent, float("nan"), dtype=x.dtype), x.index_select(1, value))
    keep = np.ones(x.shape[1], dtype=bool)
    keep[positions[:, 1:].ravel()] = False
    return out[:, torch.as_tensor(np.flatnonzero(keep), device=x.device)]


class MissingAsNaN(torch.nn.Module):
    """A target that takes NaN, read on encoded rows with missing-value indicators (:func:`nan_inputs`).

    Parameters
    ----------
    target : torch module or ForwardOnlyTarget
        The model on its own inputs (d_encoded − 2k features).
    positions : ndarray of shape (k, 3)
        (value, present, missing) positions per indicator column.

    The wrapper keeps what the check reads of the target (``forward_only``, ``output_form``,
    ``piecewise_constant``, ``access`` with ", missing values passed as NaN" added) and takes the
    encoded width (``n_features``).
    """

    def __init__(self, target, positions: np.ndarray):
        super().__init__()
        self.target = target
        self.positions = np.asarray(positions, dtype=np.int64).reshape(-1, 3)
        self.forward_only = bool(getattr(target, "forward_only", False))
        self.output_form = getattr(target, "output_form", "auto")
        self.piecewise_constant = bool(getattr(target, "piecewise_constant", False))
        self.takes_missing = True
        inner = getattr(target, "n_features", None)
        self.n_features = None if inner is None else int(inner) + 2 * len(self.positions)
        if self.forward_only:
            self.access = f"{target.access}, missing values passed as NaN"
        self.source = getattr(target, "source", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.target(nan_inputs(x, self.positions))


def with_nan_inputs(target, spec):
    """``target`` read on ``spec``'s encoded rows: :class:`MissingAsNaN` when the spec has indicator columns, else itself."""
    positions = spec.missing_positions()
    return MissingAsNaN(target, positions) if len(positions) else target
