"""Forward-only (black-box) targets: models the gate can query for predictions but not differentiate.

Gradient-boosted trees, scikit-learn estimators and ONNX graphs give predictions, not input
gradients. The default swap reading needs only predictions for its score: the target's actual change
|f(x′) − f(x)| at a counterfactual x′ built from the (PyTorch) auxiliary model (docs/method.md, "The
swap reading"). This module holds what the method layer needs for such targets:

- :class:`ForwardOnlyTarget`: a torch module around a numpy ``predict`` (n, d) -> (n, m), batched,
  so that every reader that calls the target (:func:`~faux_checks.method.output.predict_probability`,
  the output-form probe, the batch-independence probe) works unchanged. Asking it for a gradient
  raises :class:`~faux_checks.errors.InputError` instead of returning a silent zero;
- :func:`forward_attribution`: the swap reading's per-feature evidence without gradients (a
  telescoping decomposition of f(x′) − f(x), below);
- :func:`directional_change`: central finite differences of the target along given directions, per
  individual, batched (eq. 9 for a forward-only target).

The loaders that build a :class:`ForwardOnlyTarget` from a file (ONNX, XGBoost, LightGBM, skops) are in
:mod:`faux_checks.inputs.targets`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from ..errors import InputError
from ._batching import DEFAULT_CHUNK, iter_chunks

__all__ = ["FD_STEP", "ForwardOnlyTarget", "directional_change", "forward_attribution", "is_forward_only", "target_access"]

#: Eq. 9 by finite differences: the largest feature move of each probe, in the feature's encoded scale (0.1
#: standard deviation of a FeatureSpec-standardised number; a tenth of a one-hot unit). Our choice: small enough
#: that a smooth target's central difference is within O(h²) of its derivative, large enough to cross some splits
#: of a tree; rows whose prediction does not change within ± the step are reported (``no_split_crossed``).
FD_STEP = 0.1

#: Rows per call of the wrapped predict function.
PREDICT_BATCH = 65_536


class ForwardOnlyTarget(torch.nn.Module):
    """A target model known only through its predictions, usable wherever a torch target is.

    Parameters
    ----------
    predict : callable, ndarray (b, d) -> ndarray (b,) or (b, m)
        The model's raw output for a batch of encoded rows: class probabilities, log-odds or margins
        (``output_form`` says which). Called on float ``dtype`` arrays of at most ``batch_size`` rows.
    access : str
        How the target is queried, for the report (e.g. ``"forward (onnxruntime)"``).
    output_form : {"auto", "logit", "probability", "softmax", "logits", "value"}
        The form of ``predict``'s output when the loader knows it (used when the policy says ``"auto"``);
        ``"value"``: a regressor's output in its own unit, which the policy must declare (``target_output = "value"``).
    n_features : int, optional
        The number of encoded features the model expects (checked on every call when given).
    dtype : numpy dtype
        What ``predict`` receives (float32 for ONNX graphs, float64 where the library prefers it).
    batch_size : int
        Rows per ``predict`` call.
    source : object, optional
        The loaded model object (booster, estimator, session), kept for inspection.
    piecewise_constant : bool
        A tree model (its output changes only where a split is crossed): the check then notes that
        ``swap_categorical = "snap"`` is the reading for one-hot inputs (docs/method.md, "Forward-only targets").
    takes_missing : bool
        The model takes NaN in its input as it does in production (a booster, an estimator whose tags allow
        NaN): the check then passes missing values (:mod:`faux_checks.inputs.missing`).

    Notes
    -----
    ``forward`` returns a float64 tensor without autograd history. Called with an input that requires
    a gradient while autograd is on, it raises :class:`~faux_checks.errors.InputError` naming what needs
    the gradient: a silent zero gradient would read as "fair". ``copy.deepcopy`` returns the same object
    (the wrapped sessions cannot be copied and have no parameters to convert).
    """

    forward_only = True

    def __init__(self, predict: Callable[[np.ndarray], np.ndarray], *, access: str, output_form: str = "auto",
                 n_features: int | None = None, dtype=np.float32, batch_size: int = PREDICT_BATCH, source=None,
                 piecewise_constant: bool = False, takes_missing: bool = False):
        super().__init__()
        self.piecewise_constant = bool(piecewise_constant)
        self.takes_missing = bool(takes_missing)
        self._predict = predict
        self.access = access
        self.output_form = output_form
        self.n_features = n_features
        self.dtype = np.dtype(dtype)
        self.batch_size = int(batch_size)
        self.source = source

    def __deepcopy__(self, memo):
        return self

    def predict_raw(self, X) -> np.ndarray:
        """The raw output for every row: ndarray (n, m), float64 (a (n,) output becomes (n, 1)).

        Raises
        ------
        InputError
            X is not (n, d) with the expected d, or the model returned another number of rows.
        """
        X = np.asarray(X.detach().cpu().numpy() if isinstance(X, torch.Tensor) else X)
        if X.ndim != 2:
            raise InputError(f"the target model takes a 2-d matrix of encoded rows, got shape {X.shape}")
        if self.n_features is not None and X.shape[1] != self.n_features:
            raise InputError(f"the target model ({self.access}) expects {self.n_features} encoded features but X "
                             f"has {X.shape[1]}")   # the caller (check_model_accepts) says which spec and the fix
        X = np.ascontiguousarray(X, dtype=self.dtype)
        parts = []
        for sl in iter_chunks(len(X), self.batch_size):
            out = np.asarray(self._predict(X[sl]), dtype=np.float64)
            out = out[:, None] if out.ndim == 1 else out
            if out.ndim != 2 or out.shape[0] != sl.stop - sl.start:
                raise InputError(f"the target model ({self.access}) returned shape {out.shape} for "
                                 f"{sl.stop - sl.start} rows; expected (n,) or (n, m)")
            parts.append(out)
        return np.concatenate(parts) if parts else np.empty((0, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and isinstance(x, torch.Tensor) and x.requires_grad:
            raise InputError(
                f"the target model is forward-only ({self.access}): it has no input gradients. The swap reading "
                "(variant = 'swap', swap_evaluation = 'finite', the default) and eq. 9 (variant = 'faux', by finite "
                "differences) need only its predictions; other variants, swap_evaluation = 'first_order' and "
                "gradient baselines (FTA, weighted FTA, Unfair Map) need a differentiable PyTorch target")
        return torch.from_numpy(self.predict_raw(x))

    def extra_repr(self) -> str:
        return f"access={self.access!r}, output_form={self.output_form!r}, n_features={self.n_features}"


def is_forward_only(model) -> bool:
    """Whether ``model`` is a :class:`ForwardOnlyTarget` (or declares ``forward_only = True``)."""
    return bool(getattr(model, "forward_only", False))


def target_access(model) -> str:
    """How the target's change is obtained, for the report: ``"forward (onnxruntime)"``, ``"autograd (PyTorch)"``."""
    return str(model.access) if is_forward_only(model) else "autograd (PyTorch)"


def forward_attribution(prob_fn: Callable[[torch.Tensor], np.ndarray], x: torch.Tensor, x1: torch.Tensor) -> np.ndarray:
    """Per-feature terms of f(x′) − f(x) from predictions only: a two-order telescoping decomposition.

    The features that move (x′ⱼ ≠ xⱼ in some row) are switched from x to x′ one at a time, in feature order
    and in reverse order; feature j's term is the mean over the two orders of the change its switch causes.
    Each order adds up to f(x′) − f(x) exactly, so their mean does too (completeness, like integrated
    gradients), and a feature that does not move gets 0. The two orders are the two extreme permutations of
    a Shapley value (our choice: 2·m + 1 forward passes for m moving features, against 2^m for the exact
    Shapley value); a tree's term is 0 unless switching that feature crosses one of its splits.

    Parameters
    ----------
    prob_fn : callable, Tensor (b, d) -> ndarray (b,)
        P(y = target_class | x) without gradients (:func:`~faux_checks.method.output.predict_probability`).
    x, x1 : Tensor of shape (b, d)
        Individuals and their counterfactuals.

    Returns
    -------
    ndarray of shape (b, d), float64
    """
    x, x1 = x.float(), x1.float()
    b, d = x.shape
    moving = np.flatnonzero((x1 != x).any(dim=0).numpy())
    out = np.zeros((b, d))
    if len(moving) == 0:
        return out
    for order in (moving, moving[::-1]):
        point = x.clone()
        prev = prob_fn(point)
        for j in order:
            point[:, j] = x1[:, j]
            cur = prob_fn(point)
            out[:, j] += 0.5 * (cur - prev)
            prev = cur
    return out


def directional_change(prob_fn: Callable[[torch.Tensor], np.ndarray], X: torch.Tensor, U: torch.Tensor, *,
                       step: float, chunk_size: int = DEFAULT_CHUNK) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Central finite differences of the target's probability along per-individual directions.

    For each row i and direction uᵢⱼ (j = 1..k): D = (f(xᵢ + hᵢⱼ uᵢⱼ) − f(xᵢ − hᵢⱼ uᵢⱼ)) / (2 hᵢⱼ), with the step
    hᵢⱼ = ``step`` / max|uᵢⱼ|, so the largest feature moves by ``step`` in its own encoded scale (standard
    deviations for a FeatureSpec's standardised numbers, one unit for a one-hot level). Two predictions per
    direction, all rows of a chunk in one call.

    Parameters
    ----------
    prob_fn : callable, Tensor (b, d) -> ndarray (b,)
    X : Tensor of shape (n, d)
    U : Tensor of shape (n, k, d)
        Directions (e.g. the columns of J⁺ for eq. 9: the move per unit of each aux output).
    step : float
        > 0; the largest feature move of each probe.

    Returns
    -------
    derivative : ndarray (n, k), float64
        The estimated directional derivative f′(x; u) (probability per unit of u); NaN where u = 0.
    no_change : ndarray (n, k), bool
        f(x + h u) == f(x − h u) exactly: for a piecewise-constant model (trees), no split was crossed
        within ± ``step``; the derivative is then 0 by construction, not by evidence.
    steps : ndarray (n, k), float64
        The h used.

    Raises
    ------
    InputError
        ``step`` is not > 0 or U's shape does not match X.
    """
    if not step > 0:
        raise InputError(f"the finite-difference step must be > 0, got {step}")
    n, d = X.shape
    if U.ndim != 3 or U.shape[0] != n or U.shape[2] != d:
        raise InputError(f"directions have shape {tuple(U.shape)}, expected ({n}, k, {d})")
    k = U.shape[1]
    deriv = np.full((n, k), np.nan)
    flat = np.zeros((n, k), dtype=bool)
    hs = np.full((n, k), np.nan)
    for sl in iter_chunks(n, chunk_size):
        x = X[sl].double()
        u = U[sl].double()
        scale = u.abs().amax(dim=2)                                        # (b, k)
        ok = (scale > 0) & torch.isfinite(scale)
        h = torch.where(ok, step / torch.where(ok, scale, torch.ones_like(scale)), torch.zeros_like(scale))
        move = h[:, :, None] * u                                           # (b, k, d)
        plus = (x[:, None, :] + move).reshape(-1, d).float()
        minus = (x[:, None, :] - move).reshape(-1, d).float()
        both = prob_fn(torch.cat([plus, minus]))                           # (2·b·k,)
        f_plus, f_minus = both[: len(plus)].reshape(-1, k), both[len(plus):].reshape(-1, k)
        okn = ok.numpy()
        hn = h.numpy()
        deriv[sl] = np.where(okn, (f_plus - f_minus) / np.where(okn, 2 * hn, 1.0), np.nan)
        flat[sl] = okn & (f_plus == f_minus)
        hs[sl] = np.where(okn, hn, np.nan)
    return deriv, flat, hs
