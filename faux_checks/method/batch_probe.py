"""The batch-dependence probe of both models (C06): a row's output in a batch against its output alone, once per model.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from ._batching import as_tensor, eval_mode
from .auxiliary import AuxiliaryModel
from .forward import is_forward_only
from .gradients import check_batch_independence

__all__ = ["probe_batch_independence"]


def probe_batch_independence(target_model, aux_model: AuxiliaryModel, X, keep=None) -> dict[str, float]:
    """Probe the target and the auxiliary model for batch dependence, once each, on X's first rows.

    Parameters
    ----------
    target_model : torch module
    aux_model : AuxiliaryModel
    X : array or Tensor of shape (n, d)
        Encoded rows as the target sees them.
    keep : bool array of shape (d,), optional
        Columns the auxiliary model sees (all when omitted).

    Returns
    -------
    dict
        ``{"target": difference, "aux": difference}``: the largest difference measured between a
        row's output in a batch and alone (:func:`~faux_checks.method.gradients.check_batch_independence`,
        float64 where the model runs in float64).

    Raises
    ------
    InputError
        Naming the model ("target model" or "auxiliary model") and the measured difference.
    """
    X = as_tensor(X)
    keep = torch.ones(X.shape[1], dtype=torch.bool) if keep is None else torch.as_tensor(np.asarray(keep, dtype=bool))
    target = _module_or_none(target_model)
    with eval_mode(target_model):
        if target is not None:
            d_target = check_batch_independence(lambda x, net: net(x), X, model="target model", module=target)
        else:
            d_target = check_batch_independence(lambda x: target_model(x), X, model="target model")
    net = getattr(aux_model, "net_", None)
    x_aux = X[:8][:, keep]
    if _module_or_none(net) is not None:
        def aux_out(x, module):
            view = copy.copy(aux_model)
            view.net_ = module
            return view.outputs(x)

        d_aux = check_batch_independence(aux_out, x_aux, model="auxiliary model", module=net)
    else:
        d_aux = check_batch_independence(aux_model.outputs, x_aux, model="auxiliary model")
    return {"target": d_target, "aux": d_aux}


def _module_or_none(model):
    # a forward-only target runs at its own precision (float32 for ONNX/XGBoost): probed as it runs
    return model if isinstance(model, torch.nn.Module) and not is_forward_only(model) else None
